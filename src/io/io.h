/* io.h — private to src/io: the Keras layer tables that drive reading and writing the
 * JSON model config, and the model-file helpers (dispatch by extension, whole-file read,
 * atomic write).
 *
 * One table per Keras layer class lists every config key kerac knows for it, in the order
 * Keras's get_config() writes them: where the value goes in the public kc_*_opts struct
 * (or the only value kerac accepts, for metadata keys), and for which flavour (Keras 2 or
 * 3) the writer emits it. The reader rejects any key that is in no table. */
#ifndef KC_IO_H
#define KC_IO_H

#include <stddef.h>

#include "../model/model.h"

/* Every public options struct, for get_opts and for filling a kc_layer_spec. All of them
 * start with `const char *name`. */
typedef union kc__layer_opts {
    kc_input_opts input;
    kc_conv2d_opts conv2d;
    kc_dense_opts dense;
    kc_pool2d_opts pool2d;
    kc_global_pool_opts global_pool;
    kc_flatten_opts flatten;
    kc_reshape_opts reshape;
    kc_dropout_opts dropout;
    kc_batchnorm_opts batchnorm;
    kc_activation_opts activation;
    kc_relu_opts relu;
    kc_softmax_opts softmax;
    kc_zeropad2d_opts zeropad2d;
    kc_merge_opts merge;
} kc__layer_opts;

typedef enum kc__field_kind {
    KC_F_NAME,        /* const char *name (the layer name) */
    KC_F_INT,         /* int */
    KC_F_INT2,        /* int[2]; a single number n means (n, n); `def` written for 0 */
    KC_F_POOL_STRIDES,/* int[2] or null (= pool_size) */
    KC_F_FLOAT,       /* float; `def` written for 0 */
    KC_F_MAX_VALUE,   /* float or null (stored as 0) */
    KC_F_BOOL,        /* tri-state int (KC_DEFAULT/KC_TRUE/KC_FALSE); `def` is Keras's default */
    KC_F_STR,         /* const char *; `lit` written for NULL */
    KC_F_ACT,         /* activation name; null means "linear" */
    KC_F_INIT,        /* initializer: "glorot_uniform" or {"class_name": "GlorotUniform", ...} */
    KC_F_SHAPE,       /* int[KC_MAX_RANK], a list without the batch dimension */
    KC_F_BATCH_SHAPE, /* int[KC_MAX_RANK] from [null, d1, d2, ...] */
    KC_F_SEED,        /* uint64_t or null (0) */
    KC_F_PAD2,        /* int[2][2]: n, (a, b) or ((t, b), (l, r)) */
    KC_F_AXIS,        /* int -1, or the last axis (Keras 2 writes [3]); stored as -1 */
    KC_F_FIXED,       /* metadata: only the JSON value `lit` is accepted, and written */
    KC_F_FIXED_INIT,  /* an initializer kerac does not configure: must be `lit` */
    KC_F_DTYPE,       /* "float32" or {"class_name": "DTypePolicy", "config": {"name": "float32"}} */
    KC_F_IGNORE,      /* accepted with any value, never written */
} kc__field_kind;

enum {
    KC_F_W2 = 1u << 0,      /* written in the Keras 2 flavour */
    KC_F_W3 = 1u << 1,      /* written in the Keras 3 flavour */
    KC_F_W = KC_F_W2 | KC_F_W3,
    KC_F_AXIS_LIST2 = 1u << 2, /* Keras 2 writes this axis as [last axis] */
};

#define KC_F_NO_OFFSET ((size_t)-1)

typedef struct kc__field {
    const char *key;
    kc__field_kind kind;
    unsigned flags;         /* KC_F_W2 | KC_F_W3: which flavours write it; 0: read only */
    size_t off;             /* offset inside kc__layer_opts (KC_F_NO_OFFSET: none) */
    const char *lit;        /* FIXED: JSON text of the accepted value; STR: default; FIXED_INIT: name */
    double def;             /* INT2 / FLOAT / BOOL: Keras's default */
} kc__field;

enum {
    KC_CLS_INPUT = 1u << 0, /* InputLayer: no name/trainable/dtype header, fields carry them */
    KC_CLS_MERGE = 1u << 1, /* takes a list of inputs (Add, Concatenate) */
};

typedef struct kc__keras_class {
    const char *class_name; /* Keras and kerac class name */
    unsigned flags;
    const kc__field *fields;
    int n_fields;
} kc__keras_class;

/* The table of a Keras class name (aliases such as "MaxPool2D" accepted), or NULL. */
const kc__keras_class *kc__keras_class_find(const char *class_name);
int kc__keras_class_count(void);
const kc__keras_class *kc__keras_class_at(int i);
/* Keys every non-input layer has (name, trainable, dtype), written first. */
const kc__field *kc__keras_base_fields(int *n);
/* Keys accepted on any non-input layer but not written (batch_input_shape, ...). */
const kc__field *kc__keras_extra_fields(int *n);
/* "InputLayer, Conv2D, ..." into buf. */
const char *kc__keras_class_list(char *buf, size_t n);

/* Initializers: Keras snake name <-> class name ("glorot_uniform" <-> "GlorotUniform"). */
typedef struct kc__keras_init {
    const char *name, *class_name;
    int has_seed;           /* its config is {"seed": null} (else {}) */
} kc__keras_init;
const kc__keras_init *kc__keras_init_find(const char *name_or_class);

/* ---- model files */

typedef struct kc__model_format {
    const char *ext;        /* ".json" */
    const char *what;       /* "Keras JSON model config" */
    kc_status (*load)(const char *path, kc_model **out);
    kc_status (*save)(kc_model *m, const char *path);
} kc__model_format;

/* The format of a path by its extension (case-insensitive, the longest match: ".weights.h5"
 * before ".h5"), or NULL. */
const kc__model_format *kc__model_format_for_path(const char *path);

/* ---- Keras model files (keras_archive.c, keras_h5.c); messages name the path */

/* .keras: a Keras 3 zip archive (metadata.json, config.json, model.weights.h5). */
kc_status kc__keras_archive_load(const char *path, kc_model **out);
kc_status kc__keras_archive_save(kc_model *m, const char *path);
/* The weights of a .keras archive into m (its config.json is not read). */
kc_status kc__keras_archive_load_weights(kc_model *m, const char *path);
/* .h5: a Keras 2 full-model HDF5 file (model_config + /model_weights). Load also reads the
 * .h5 files Keras 3 writes in that legacy format. */
kc_status kc__legacy_h5_load(const char *path, kc_model **out);
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
/* Write to "path.tmp", flush, then rename over path: never a partial file. */
kc_status kc__write_file_atomic(const char *path, const char *data, size_t len);
/* For writers that make the file themselves: the temporary name ("path.tmp", malloc'd;
 * NULL with an error set when out of memory), and the commit: fsync the temporary, rename
 * it over path; the temporary is removed when that fails. */
char *kc__tmp_path(const char *path);
kc_status kc__commit_tmp(const char *tmp, const char *path);

/* Keras JSON with jansson dump flags (compact for to_json, indent 2 for files). */
kc_status kc__model_to_json_flags(kc_model *m, int flavour, size_t flags, char **out);

#endif /* KC_IO_H */
