/* flatten.c — Flatten: (d0, d1, ...) -> (d0*d1*...). An alias: y is x's memory. */
#include "layer.h"

typedef struct flatten_cfg {
    int unused;
} flatten_cfg;

static kc_status flatten_init(kc_layer *l, const void *opts) { return KC_STATUS_OK; }

static void flatten_get_opts(const kc_layer *l, void *opts) {
    *(kc_flatten_opts *)opts = (kc_flatten_opts){.name = l->name};
}

static kc_status flatten_build(kc_layer *l) {
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    int64_t n = kc__shape_size(in);
    if (in->rank < 1 || n < 1 || n > INT32_MAX)
        return kc__fail(KC_STATUS_SHAPE, "%s: cannot flatten an input of %lld values; check input_shape",
                        kc__layer_label(l), (long long)n);
    l->out_shape = kc__shape_make(1, (int[]){(int)n});
    return KC_STATUS_OK;
}

static kc_status alias_forward(kc_layer *l, const kc_fwd *a) { return KC_STATUS_OK; }
static kc_status alias_backward(kc_layer *l, const kc_bwd *a) { return KC_STATUS_OK; }

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_keras_keys[] = {
    KC_KEY_CHANNELS_LAST(KC_F_W),
};

const kc_layer_ops kc__flatten_ops = {
    .class_name = "Flatten",
    .snake_name = "flatten",
    .cfg_size = sizeof(flatten_cfg),
    .opts_size = sizeof(kc_flatten_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .flags = KC_LAYER_ALIAS,
    .init = flatten_init,
    .get_opts = flatten_get_opts,
    .build = flatten_build,
    .forward = alias_forward,
    .backward = alias_backward,
    KC_KERAS_KEYS(k_keras_keys),
};
