/* keras_keys.h — the Keras config keys of a layer kind, as data.
 *
 * Each kind lists, in its own file, every key of its Keras config (get_config()) in the
 * order Keras writes them, after the name/trainable/dtype header every layer shares:
 * where the value goes in the kind's public kc_*_opts struct (or the only value kerac
 * accepts, for metadata keys such as data_format, groups, regularizers, constraints), and
 * for which flavour (Keras 2 or 3) the writer emits it. The table hangs off the kind's
 * ops (kc_layer_ops.keras_keys); src/io reads and writes Keras JSON through it and
 * rejects any key that is in no table. Nothing in src/layers interprets these. */
#ifndef KC_KERAS_KEYS_H
#define KC_KERAS_KEYS_H

#include <stddef.h>

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
    /* normalisation and resampling */
    KC_F_CONSTS,      /* kc_consts: null, a number, a list of numbers or Keras's {"class_name": "__numpy__"} */
    KC_F_AXES,        /* kc_axes: null, an integer or a list of integers */
    KC_F_CROP2,       /* int[2][2] as KC_F_PAD2, zeros allowed (and the default) */
    /* augmentation */
    KC_F_FACTOR,      /* kc_factor: null, a number or [lower, upper] */
    KC_F_FLOAT_PAIR,  /* float[2]: [a, b]; `lit` (JSON) written for (0, 0) */
    /* convolutions */
    KC_F_OPT_INT2,    /* kc_opt_int2: null (set 0), or n / [a, b] >= 0 (set 1) */
    /* elementwise fixes block */
    KC_F_FLOAT_GIVEN, /* float that may be 0 on purpose: reading sets the int at `given_off`;
                         written as is when that flag is set, else as KC_F_FLOAT */
    KC_F_NOISE_SHAPE, /* kc_noise_shape: null or a list of null / sizes */
    KC_F__END,        /* one past the last kind (keep last) */
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
    size_t off;             /* offset inside the kind's public kc_*_opts (KC_F_NO_OFFSET: none) */
    const char *lit;        /* FIXED: JSON text of the accepted value; STR: default; FIXED_INIT: name */
    double def;             /* INT2 / FLOAT / BOOL: Keras's default */
    size_t given_off;       /* FLOAT_GIVEN: offset of the int flag "given" in the same struct */
} kc__field;

/* Helpers for the tables. FIXED: the only value kerac accepts (JSON text; alternatives
 * separated by '|', the first is written). */
#define KC_KEY_FIXED(key, lit, flags) {key, KC_F_FIXED, flags, KC_F_NO_OFFSET, lit, 0}
#define KC_KEY_NULL(key, flags) KC_KEY_FIXED(key, "null", flags)
#define KC_KEY_CHANNELS_LAST(flags) KC_KEY_FIXED("data_format", "\"channels_last\"|null", flags)
#define KC_KEY_IGNORE(key) {key, KC_F_IGNORE, 0, KC_F_NO_OFFSET, NULL, 0}
/* In an ops table: `KC_KERAS_KEYS(k_keys),` */
#define KC_KERAS_KEYS(table) .keras_keys = (table), .n_keras_keys = (int)(sizeof(table) / sizeof((table)[0]))

#endif /* KC_KERAS_KEYS_H */
