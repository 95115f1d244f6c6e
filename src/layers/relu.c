/* relu.c — ReLU layer: y = x >= threshold ? min(x, max_value) : negative_slope * (x - threshold);
 * the plain relu when all three options are 0. */
#include "layer.h"

typedef struct relu_cfg {
    kc__act_layer_cfg base; /* first: the shared activation-layer functions read it */
    float max_value, negative_slope, threshold;
} relu_cfg;

static kc_status relu_init(kc_layer *l, const void *opts_) {
    const kc_relu_opts *o = opts_;
    relu_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (!(o->max_value >= 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: max_value must be >= 0 (0 means none), got %g", L,
                        (double)o->max_value);
    if (!(o->negative_slope >= 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: negative_slope must be >= 0, got %g", L,
                        (double)o->negative_slope);
    if (!(o->threshold >= 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: threshold must be >= 0, got %g", L, (double)o->threshold);
    c->max_value = o->max_value, c->negative_slope = o->negative_slope, c->threshold = o->threshold;
    if (c->max_value == 0.0f && c->negative_slope == 0.0f && c->threshold == 0.0f)
        c->base.act = (kc_act_params){KC_ACT_RELU, 0.0f, 0.0f, 0.0f};
    else
        c->base.act = (kc_act_params){KC_ACT_RELU_GENERAL, c->negative_slope, c->max_value, c->threshold};
    return KC_STATUS_OK;
}

static void relu_get_opts(const kc_layer *l, void *opts_) {
    const relu_cfg *c = l->cfg;
    *(kc_relu_opts *)opts_ = (kc_relu_opts){.name = l->name, .max_value = c->max_value,
                                            .negative_slope = c->negative_slope, .threshold = c->threshold};
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_relu_opts, member)
static const kc__field k_keras_keys[] = {
    {"max_value", KC_F_MAX_VALUE, KC_F_W, O(max_value), NULL, 0},
    {"negative_slope", KC_F_FLOAT, KC_F_W, O(negative_slope), NULL, 0},
    {"threshold", KC_F_FLOAT, KC_F_W, O(threshold), NULL, 0},
};
#undef O

const kc_layer_ops kc__relu_ops = {
    .class_name = "ReLU",
    .snake_name = "re_lu",
    .cfg_size = sizeof(relu_cfg),
    .opts_size = sizeof(kc_relu_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ACTIVATION),
    .init = relu_init,
    .get_opts = relu_get_opts,
    .build = kc__act_layer_build,
    KC_ACT_LAYER_FNS,
    KC_KERAS_KEYS(k_keras_keys),
};
