/* dataset.h — private dataset internals: a reference-counted storage of examples
 * (uint8 or float32 images, int32 labels) and views (kc_dataset) of a range of it.
 * Every read of example values goes through kc__dataset_gather, so that a later storage
 * kind (memory-mapped files) changes one function. */
#ifndef KC_DATASET_H
#define KC_DATASET_H

#include <stdatomic.h>

#include "../core/core.h"

typedef enum kc_ds_dtype {
    KC_DS_U8 = 1,  /* stored as uint8, read as v / 255 */
    KC_DS_F32 = 2  /* stored as float32, read as is */
} kc_ds_dtype;

typedef struct kc_ds_storage {
    atomic_int refs;        /* one per kc_dataset that views it */
    kc_ds_dtype dtype;
    int64_t n;              /* examples */
    kc_shape shape;         /* one example: (H, W, C) or (D) */
    int64_t example_size;   /* elements per example: product of shape */
    uint8_t *x_u8;          /* (n, example_size) when dtype == KC_DS_U8, else NULL */
    float *x_f32;           /* (n, example_size) when dtype == KC_DS_F32, else NULL */
    int32_t *y;             /* (n) class labels, >= 0 (zeros when t holds the labels) */
    float *t;               /* (n, t_size) label tensors (float or one-hot targets, per-pixel masks,
                             * regression targets), or NULL: the labels are the class indices y */
    kc_shape t_shape;       /* one example's labels as stored (e.g. (1), (K), (H, W), (H, W, 1)) */
    int64_t t_size;         /* floats per example in t: product of t_shape */
    bool t_integral;        /* every value of t is an integer >= 0 (class indices: masks, int files) */
    int num_classes;        /* max label + 1, computed once when the storage is finished */
    int64_t fault_index;    /* tests: gathering this example fails with KC_STATUS_IO; -1: never */
    void *map;              /* a memory-mapped file holding x (x_u8/x_f32 point inside it), or NULL */
    size_t map_len;
    char source[512];       /* where it came from, for messages: "idx:'a','b'", "memory" */
    struct kc_img_meta *img; /* a folder of images: files, class names, options (image.h); else NULL */
} kc_ds_storage;

struct kc_dataset {
    kc_ds_storage *st;      /* shared with every slice */
    int64_t start;          /* first example of this view inside st */
    int64_t count;          /* examples in this view */
};

/* A new storage (refs = 0) with uninitialised x (n, shape) and y (n) of the given dtype.
 * n >= 1, shape rank 1..KC_MAX_RANK with positive dims. */
kc_status kc__ds_storage_create(kc_ds_dtype dtype, int64_t n, kc_shape shape, const char *source,
                                kc_ds_storage **out);
/* Finish a filled storage: compute num_classes (or check labels against num_classes > 0)
 * and wrap it as a dataset viewing all of it. On failure the storage is freed. */
kc_status kc__ds_storage_finish(kc_ds_storage *st, int num_classes, kc_dataset **out);
/* Like kc__ds_storage_create, but the images are read on demand from the file `path`
 * through a read-only memory mapping: x starts `offset` bytes into the file (which must be
 * a multiple of the element size). Only y is allocated. Datasets larger than RAM work:
 * the kernel pages examples in as batches gather them. */
kc_status kc__ds_storage_create_mapped(kc_ds_dtype dtype, int64_t n, kc_shape shape, const char *source,
                                       const char *path, int64_t offset, kc_ds_storage **out);
/* A storage of labels only (y allocated, x NULL): the examples of a folder of images
 * decoded each time they are gathered (st->img set by the caller). */
kc_status kc__ds_storage_create_labels(int64_t n, kc_shape shape, const char *source, kc_ds_storage **out);
/* Give a storage label tensors of t_shape per example (st->t, uninitialised; y zeroed).
 * Filled by the caller, who then calls kc__ds_storage_finish (which sets t_integral). */
kc_status kc__ds_storage_add_targets(kc_ds_storage *st, kc_shape t_shape);
/* Free a storage that no dataset views yet (refs == 0). NULL is fine. */
void kc__ds_storage_free(kc_ds_storage *st);
void kc__img_meta_free(struct kc_img_meta *m); /* image_load.c */
/* image_load.c: decode + resize the examples idx[0..n) (indices into the folder's list) into
 * x (n, e) with the pool of threads, for a batch of images without a cache. */
kc_status kc__image_decode_batch(const struct kc_img_meta *meta, const int64_t *idx, int64_t n, float *x);

/* Copy examples into x (n, example shape) floats (uint8 scaled by 1/255) and their labels
 * into y (n); either may be NULL. Example i is idx[i] when idx is given, else first + i;
 * both relative to d's start, and the caller has checked them against d's size. */
kc_status kc__dataset_gather(const kc_dataset *d, const int64_t *idx, int64_t first, int64_t n,
                             float *x, int32_t *y);
/* Copy the label tensors of examples (as kc__dataset_gather picks them) into t (n, t_size);
 * a dataset of class labels writes them as floats (t_size 1). */
kc_status kc__dataset_gather_targets(const kc_dataset *d, const int64_t *idx, int64_t first, int64_t n, float *t);
/* Elements per example (product of the shape). */
int64_t kc__dataset_example_size(const kc_dataset *d);
/* Tests: make gathering example `index` (relative to d's start; -1 clears) fail, as an
 * I/O error from a memory-mapped file will. */
void kc__dataset_set_fault(kc_dataset *d, int64_t index);

/* Loaders (each returns a finished dataset; `source` names it in messages). */
kc_status kc__idx_load(const char *images_path, const char *labels_path, const char *hint,
                       kc_dataset **out);
kc_status kc__mnist_dir_load(const char *kind, const char *dir, bool train, const char *hint,
                             kc_dataset **out);
kc_status kc__cifar10_load(const char *dir, bool train, kc_dataset **out);
kc_status kc__npy_load(const char *x_path, const char *y_path, kc_dataset **out);

/* finite.c: BAD_FILE naming path and the first example holding NaN or Inf in x (n examples
 * of e values), unless kc_set_allow_nonfinite_input(1). */
kc_status kc__ds_check_finite(const float *x, int64_t n, int64_t e, const char *what, const char *path);

#endif /* KC_DATASET_H */
