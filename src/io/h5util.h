/* h5util.h — private to src/io: the HDF5 pieces the Keras file formats share (files in
 * memory, string attributes as h5py writes them, float32 weight datasets), and the two
 * weight layouts written into an open HDF5 file (keras_h5.c).
 *
 * Every helper returns a kc_status with a message that names the HDF5 object; callers
 * prefix the file name with kc__wrap. HDF5's own error printing is switched off
 * (kc__h5_quiet) and its error stack is turned into the message text instead. */
#ifndef KC_H5UTIL_H
#define KC_H5UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <hdf5.h>

#include "io.h"

/* Switch off HDF5's automatic error printing (library code never prints). Call it before
 * the first HDF5 call of every entry point; it is cheap and idempotent. */
void kc__h5_quiet(void);
/* The innermost description on HDF5's error stack ("file signature not found"), or
 * "unknown HDF5 error"; the stack is cleared. */
const char *kc__h5_reason(char *buf, size_t n);

/* ---- files */

/* An HDF5 file on disk, read-only. KC_STATUS_IO when it cannot be opened at all,
 * KC_STATUS_BAD_FILE when it is not HDF5. */
kc_status kc__h5_open_path(const char *path, hid_t *out);
/* A read-only HDF5 file from an image in memory (the image is copied). BAD_FILE when the
 * bytes are not HDF5. */
kc_status kc__h5_open_image(const void *data, size_t len, hid_t *out);
/* A new HDF5 file held in memory (HDF5's core driver, no backing store; h5_memfile.c). big_attrs: allow
 * attributes over 64 KiB (HDF5 1.8 object headers; readable by every HDF5 since 1.8). */
kc_status kc__h5_create_file(size_t expected_bytes, bool big_attrs, hid_t *out);
/* Close a file made by kc__h5_create_file, giving its bytes (malloc'd): writers put them in
 * place themselves (kc__write_file_atomic), so that a failed write is reported with its own
 * errno, not through libhdf5. */
kc_status kc__h5_close_image(hid_t file, void **data, size_t *len);
/* Close a file made by kc__h5_create_file, dropping it (after a failure). */
void kc__h5_discard(hid_t file);

/* ---- objects */

bool kc__h5_is_group(hid_t loc, const char *path);   /* path exists and is a group */
bool kc__h5_exists(hid_t loc, const char *path);     /* path exists (any object) */
bool kc__h5_has_attr(hid_t obj, const char *name);
/* Number of links in the group at path (-1 when it is not a group). */
long kc__h5_group_size(hid_t loc, const char *path);
/* Create a group (and the groups above it). */
kc_status kc__h5_make_group(hid_t loc, const char *path, hid_t *out);

/* ---- string attributes */

typedef struct kc__strlist {
    char **v;
    int n;
} kc__strlist;
void kc__strlist_free(kc__strlist *l);

/* The strings of attribute `name` of obj: a scalar or a 1-D array of fixed- or
 * variable-length strings, or Keras's split form name0, name1, ... (attributes over
 * 64 KiB). An empty array of any type reads as no strings. *found is false (status OK)
 * when there is no such attribute. */
kc_status kc__h5_get_strings(hid_t obj, const char *name, kc__strlist *out, bool *found);
/* One string: a scalar string attribute or the only element of a 1-D one; *out is NULL
 * (status OK) when the attribute is absent. Free with free(). */
kc_status kc__h5_get_string(hid_t obj, const char *name, char **out);

/* As h5py writes a Python str (variable-length UTF-8, scalar). */
kc_status kc__h5_put_vlen_string(hid_t obj, const char *name, const char *value);
/* As h5py writes Python bytes (fixed-length, NUL-padded, scalar). */
kc_status kc__h5_put_fixed_string(hid_t obj, const char *name, const char *value);
/* As Keras's save_attributes_to_hdf5_group writes a list of bytes: a 1-D fixed-length
 * array (the longest string's length), split into name0, name1, ... when it would exceed
 * 64512 bytes; an empty list is an empty float64 array, as numpy makes it. */
kc_status kc__h5_put_fixed_strings(hid_t obj, const char *name, const char *const *v, int n);

/* ---- float32 datasets (weights) */

/* A float32 dataset of the given shape at path (groups above it are created). */
kc_status kc__h5_put_f32(hid_t loc, const char *path, const kc_shape *shape, const float *data);
/* Read the float dataset at path into dst after checking that its shape is `want`.
 * `what` names the weight in messages ("layer 'c1' weight 'kernel'"). Any float type is
 * converted to float32; a bfloat16 or non-float dataset is an error. */
kc_status kc__h5_read_weight(hid_t loc, const char *path, const kc_shape *want, float *dst, const char *what);
/* (dst NULL: the checks only, nothing read) */

/* ---- the Keras weight layouts inside an open HDF5 file (keras_h5.c) */

/* Keras 3 (saving_lib): /vars, /layers/<snake_class>[_N]/vars/<i>. */
kc_status kc__keras3_weights_write(kc_model *m, hid_t file);
/* `file` names the file in messages ("'m.keras': model.weights.h5"). */
kc_status kc__keras3_weights_read(kc_model *m, hid_t file, const char *file_label);
/* The same checks (every variable there, of the model's shape), nothing read: usable from
 * the model's before_alloc hook, before its parameters exist. */
kc_status kc__keras3_weights_check(kc_model *m, hid_t file, const char *file_label);

#endif /* KC_H5UTIL_H */
