/* input.c — InputLayer: the model's input; its output shape is the per-example shape. */
#include "layer.h"

typedef struct input_cfg {
    kc_shape shape;
} input_cfg;

static kc_status input_init(kc_layer *l, const void *opts_) {
    const kc_input_opts *o = opts_;
    input_cfg *c = l->cfg;
    int rank = 0;
    while (rank < KC_MAX_RANK && o->shape[rank] != 0) rank++;
    for (int i = 0; i < KC_MAX_RANK; i++) {
        if (o->shape[i] < 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "%s: shape dimension %d is %d; every dimension must be positive (variable sizes are not "
                            "supported)",
                            kc__layer_label(l), i, o->shape[i]);
        if (i > rank && o->shape[i] != 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "%s: shape has a zero at dimension %d before a non-zero one; every dimension must be positive",
                            kc__layer_label(l), rank);
    }
    if (rank == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: shape is empty; give the per-example shape, e.g. .shape = {28, 28, 1}", kc__layer_label(l));
    c->shape = kc__shape_make(rank, o->shape);
    return KC_STATUS_OK;
}

static void input_get_opts(const kc_layer *l, void *opts_) {
    const input_cfg *c = l->cfg;
    kc_input_opts *o = opts_;
    *o = (kc_input_opts){.name = l->name};
    for (int i = 0; i < c->shape.rank; i++) o->shape[i] = c->shape.dim[i];
}

static kc_status input_build(kc_layer *l) {
    const input_cfg *c = l->cfg;
    l->n_weights = 0;
    l->out_shape = c->shape;
    return KC_STATUS_OK;
}

static kc_status input_forward(kc_layer *l, const kc_fwd *a) { return KC_STATUS_OK; }
static kc_status input_backward(kc_layer *l, const kc_bwd *a) { return KC_STATUS_OK; }

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_input_opts, member)
static const kc__field k_keras_keys[] = {
    {"batch_shape", KC_F_BATCH_SHAPE, KC_F_W3, O(shape), NULL, 0},
    {"batch_input_shape", KC_F_BATCH_SHAPE, KC_F_W2, O(shape), NULL, 0},
    {"dtype", KC_F_DTYPE, KC_F_W, KC_F_NO_OFFSET, NULL, 0},
    KC_KEY_FIXED("sparse", "false|null", KC_F_W),
    KC_KEY_FIXED("ragged", "false|null", KC_F_W),
    {"name", KC_F_NAME, KC_F_W, O(name), NULL, 0},
    KC_KEY_FIXED("optional", "false", KC_F_W3),
    {"shape", KC_F_SHAPE, 0, O(shape), NULL, 0},
    {"input_shape", KC_F_SHAPE, 0, O(shape), NULL, 0},
    KC_KEY_IGNORE("batch_size"),
};
#undef O

const kc_layer_ops kc__input_layer_ops = {
    .class_name = "InputLayer",
    .alias = "Input",
    .snake_name = "input_layer",
    .cfg_size = sizeof(input_cfg),
    .opts_size = sizeof(kc_input_opts),
    .min_inputs = 0,
    .max_inputs = 0,
    .flags = KC_LAYER_INPUT,
    .init = input_init,
    .get_opts = input_get_opts,
    .build = input_build,
    .forward = input_forward,
    .backward = input_backward,
    KC_KERAS_KEYS(k_keras_keys),
};
