/* io.h — private to src/io: what reading and writing the Keras JSON model config needs
 * beyond the layer kinds' own key tables (src/layers/keras_keys.h), and the model-file
 * helpers (dispatch by extension, whole-file read, atomic write). */
#ifndef KC_IO_H
#define KC_IO_H

#include <stddef.h>

#include "../model/model.h"

/* Every kind's public options struct (src/layers/layer_kinds.h), for get_opts and for
 * filling a kc_layer_spec. All of them start with `const char *name`. */
#define KC__OPTS_MEMBER(id, opts_type) opts_type id;
typedef union kc__layer_opts {
    KC_LAYER_KINDS(KC__OPTS_MEMBER)
} kc__layer_opts;
#undef KC__OPTS_MEMBER

/* How a kind appears in Keras JSON, from its ops table: the input layer has no
 * name/trainable/dtype header (its keys carry them); a merge layer (Add, Concatenate)
 * takes a list of inputs. The kind's own keys are ops->keras_keys (src/layers/keras_keys.h). */
static inline bool kc__keras_is_input(const kc_layer_ops *ops) { return ops->flags & KC_LAYER_INPUT; }
static inline bool kc__keras_is_merge(const kc_layer_ops *ops) { return ops->max_inputs > 1; }
/* Keys every non-input layer has (name, trainable, dtype), written first. */
const kc__field *kc__keras_base_fields(int *n);
/* Keys accepted on any non-input layer but not written (batch_input_shape, ...). */
const kc__field *kc__keras_extra_fields(int *n);

/* ---- model files */

typedef struct kc__model_format {
    const char *ext;        /* ".json" */
    const char *what;       /* "Keras JSON model config" */
    kc_status (*load)(const char *path, const kc_device_opts *dev, kc_model **out); /* dev: NULL or the device */
    kc_status (*save)(kc_model *m, const char *path);
} kc__model_format;

/* The format of a path by its extension (case-insensitive, the longest match: ".weights.h5"
 * before ".h5"), or NULL. */
const kc__model_format *kc__model_format_for_path(const char *path);

/* ---- Keras model files (keras_archive.c, keras_h5.c); messages name the path */

/* .keras: a Keras 3 zip archive (metadata.json, config.json, model.weights.h5). */
kc_status kc__keras_archive_load(const char *path, const kc_device_opts *dev, kc_model **out);
kc_status kc__keras_archive_save(kc_model *m, const char *path);
/* metadata.json of a .keras file: Keras's keys, and the image options of a model trained on
 * a folder of images (image_meta.c). The text is malloc'd; NULL on failure. */
char *kc__metadata_json(const kc_model *m, const char *keras_version, const char *date);
/* Read the image options back from metadata.json, if it has them. */
kc_status kc__metadata_read(kc_model *m, const char *path, const char *text, size_t len);
/* The weights of a .keras archive into m (its config.json is not read). */
kc_status kc__keras_archive_load_weights(kc_model *m, const char *path);
/* .h5: a Keras 2 full-model HDF5 file (model_config + /model_weights). Load also reads the
 * .h5 files Keras 3 writes in that legacy format. */
kc_status kc__legacy_h5_load(const char *path, const kc_device_opts *dev, kc_model **out);
kc_status kc__legacy_h5_save(kc_model *m, const char *path);
/* Weights only, from any Keras HDF5 layout: Keras 3 (/layers/<class>/vars/<i>), Keras 2
 * weights-only (layer_names at the root) or a Keras 2 full model (/model_weights). All
 * weights are read and checked before any is set: on failure m is unchanged. */
kc_status kc__weights_h5_load(kc_model *m, const char *path);
/* keras3: the Keras 3 layout (.weights.h5); else Keras 2's save_weights layout (.h5). */
kc_status kc__weights_h5_save(kc_model *m, const char *path, bool keras3);
/* HDF5 prints its errors to stderr unless told not to; library code never prints. Every
 * public call that may touch HDF5 silences it and gives the caller's handler back after. */
typedef struct kc__h5_silence {
    void (*func)(void);      /* the caller's H5E_auto2_t */
    void *data;
    int saved;
} kc__h5_silence;
void kc__h5_silence_begin(kc__h5_silence *q);
void kc__h5_silence_end(const kc__h5_silence *q);
/* The Keras version kerac writes: metadata.json of .keras files and the Keras 2 .h5 files. */
#define KC_KERAS3_VERSION "3.6.0"
#define KC_KERAS2_VERSION "2.15.0"

/* The whole file, NUL-terminated (malloc'd; *len excludes the NUL). KC_STATUS_IO names the path. */
kc_status kc__read_file(const char *path, char **data, size_t *len);
/* Atomic writes: a temporary file per writer, fsync, rename (atomic_file.h). */
#include "atomic_file.h"

/* Keras JSON with jansson dump flags (compact for to_json, indent 2 for files). */
kc_status kc__model_to_json_flags(kc_model *m, int flavour, size_t flags, char **out);
/* kc_model_from_json_ex, with before_alloc called by the model's build once the weight
 * shapes are known and before any parameter is allocated (kc_model.before_alloc). */
kc_status kc__model_from_json_hooked(const char *text, size_t len, const kc_device_opts *opts,
                                     kc_status (*before_alloc)(kc_model *m, void *user), void *user, kc_model **out);

#endif /* KC_IO_H */
