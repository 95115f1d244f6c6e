/* image.h — private: decoding image files (image_decode.c), Keras's resizing
 * (image_resize.c), the folder walk in Keras's order (image_dir.c) and the dataset of images
 * decoded by a pool of threads (image_load.c). */
#ifndef KC_IMAGE_H
#define KC_IMAGE_H

#include "dataset.h"

/* A decoded image: h x w pixels of c uint8 channels, row-major HWC. */
typedef struct kc_img {
    uint8_t *px;
    int h, w, c;
} kc_img;

#define KC_IMAGE_DEFAULT_SIZE 256
#define KC_IMAGE_DEFAULT_MAX_PIXELS 100000000LL

/* Decode the bytes of an image file (JPEG, PNG, BMP or GIF, told by its first bytes) into
 * `channels` (1, 3 or 4) channels. Images over max_pixels are refused before decoding.
 * With want_h/want_w > 0 a JPEG may be decoded smaller in the DCT (never below want). Fails
 * with KC_STATUS_BAD_FILE and the decoder's reason; `name` is only for messages. */
kc_status kc__image_decode(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                           int want_h, int want_w, kc_img *out);
void kc__img_free(kc_img *im);

/* Resize as Keras's load_image does (crop / pad to the aspect ratio, then TensorFlow's
 * resize without antialiasing, half-pixel centres) into out (h, w, c) float values in
 * 0..255. tmp: scratch the caller keeps between calls (freed with free()). */
kc_status kc__image_resize(const kc_img *in, const kc_image_opts *o, float *out, float **tmp, size_t *tmp_n);

/* The files of a folder of images in Keras's order. */
typedef struct kc_img_list {
    char **files;         /* (n) paths relative to the folder: "class/sub/name.jpg" */
    int32_t *labels;      /* (n) */
    int64_t n;
    char **classes;       /* (num_classes) names */
    int num_classes;
} kc_img_list;

kc_status kc__image_list(const char *dir, const kc_image_opts *o, kc_img_list *out);
void kc__image_list_free(kc_img_list *l);
/* numpy's legacy RandomState(seed).shuffle of n items, as the permutation perm (n). */
void kc__numpy_shuffle_perm(uint32_t seed, int64_t n, int64_t *perm);

/* What a dataset of images keeps beside its storage. */
typedef struct kc_img_meta {
    kc_image_opts opts;   /* class_names points into classes, cache_file to cache_file */
    kc_img_list list;     /* files and labels of the examples kept, in example order */
    int64_t skipped;
    char *dir;            /* the folder, for decoding on demand */
    kc_image_cache cache; /* resolved: MEMORY, FILE or NONE */
    char *cache_file;     /* FILE: the cache file */
    bool cache_reused;    /* FILE: read from an existing cache file, nothing decoded */
} kc_img_meta;

/* Decode + resize every file of meta->list into x (n, e) with the pool of threads, then
 * settle failures: the first one is the error, or (skip_bad_images) a warning per file and
 * the examples close up in x and the list. kept (n, may be NULL) gets the list indices
 * kept, in order. The labels are left to the caller (meta->list.labels). */
kc_status kc__image_decode_list(kc_img_meta *meta, float *x, int64_t *kept);
/* image_cache.c: the storage of a dataset of images cached in meta->cache_file: an existing
 * file written for the same files and options is mapped as is, else the images are decoded
 * into a new one. Labels are filled. */
kc_status kc__image_cache_file(kc_img_meta *meta, kc_shape shape, const char *source, kc_ds_storage **out);

/* The defaults filled in (size 256, max_pixels, threads from the cores). */
kc_image_opts kc__image_opts_resolve(const kc_image_opts *o);
int kc__image_channels(kc_color_mode c);

#endif /* KC_IMAGE_H */
