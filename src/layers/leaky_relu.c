/* leaky_relu.c — LeakyReLU: y = x > 0 ? x : negative_slope * x (Keras's default slope 0.3;
 * Keras 2 calls it alpha), through the shared activation-layer functions (elementwise
 * helper). */
#include "layer.h"

static kc_status leaky_relu_init(kc_layer *l, const void *opts_) {
    const kc_leaky_relu_opts *o = opts_;
    kc__act_layer_cfg *c = l->cfg;
    const float s = o->negative_slope_given || o->negative_slope != 0.0f ? o->negative_slope : 0.3f;
    if (!(s >= 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: negative_slope must be >= 0 (Keras's rule), got %g",
                        kc__layer_label(l), (double)o->negative_slope);
    c->act = (kc_act_params){KC_ACT_LEAKY_RELU, s, 0.0f, 0.0f};
    return KC_STATUS_OK;
}

static void leaky_relu_get_opts(const kc_layer *l, void *opts_) {
    const kc__act_layer_cfg *c = l->cfg;
    *(kc_leaky_relu_opts *)opts_ = (kc_leaky_relu_opts){.name = l->name, .negative_slope = c->act.alpha,
                                                          .negative_slope_given = 1};
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_leaky_keys[] = {
    {"negative_slope", KC_F_FLOAT_GIVEN, KC_F_W3, offsetof(kc_leaky_relu_opts, negative_slope), NULL, 0.3,
     offsetof(kc_leaky_relu_opts, negative_slope_given)},
    {"alpha", KC_F_FLOAT_GIVEN, KC_F_W2, offsetof(kc_leaky_relu_opts, negative_slope), NULL, 0.3,
     offsetof(kc_leaky_relu_opts, negative_slope_given)},
};

const kc_layer_ops kc__leaky_relu_ops = {
    .class_name = "LeakyReLU",
    .snake_name = "leaky_re_lu",
    .cfg_size = sizeof(kc__act_layer_cfg),
    .opts_size = sizeof(kc_leaky_relu_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ACTIVATION),
    .init = leaky_relu_init,
    .get_opts = leaky_relu_get_opts,
    .build = kc__act_layer_build,
    KC_ACT_LAYER_FNS,
    KC_KERAS_KEYS(k_leaky_keys),
};
