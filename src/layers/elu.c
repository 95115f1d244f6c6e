/* elu.c — ELU: y = x > 0 ? x : alpha * (exp(x) - 1) (Keras's default alpha 1), through the
 * shared activation-layer functions. */
#include <math.h>

#include "layer.h"

static kc_status elu_init(kc_layer *l, const void *opts_) {
    const kc_elu_opts *o = opts_;
    kc__act_layer_cfg *c = l->cfg;
    c->act = (kc_act_params){KC_ACT_ELU, o->alpha_given || o->alpha != 0.0f ? o->alpha : 1.0f, 0.0f, 0.0f};
    if (!isfinite(c->act.alpha))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: alpha must be finite, got %g", kc__layer_label(l),
                        (double)o->alpha);
    return KC_STATUS_OK;
}

static void elu_get_opts(const kc_layer *l, void *opts_) {
    const kc__act_layer_cfg *c = l->cfg;
    *(kc_elu_opts *)opts_ = (kc_elu_opts){.name = l->name, .alpha = c->act.alpha, .alpha_given = 1};
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_elu_keys[] = {
    {"alpha", KC_F_FLOAT_GIVEN, KC_F_W, offsetof(kc_elu_opts, alpha), NULL, 1.0, offsetof(kc_elu_opts, alpha_given)},
};

const kc_layer_ops kc__elu_ops = {
    .class_name = "ELU",
    .snake_name = "elu",
    .cfg_size = sizeof(kc__act_layer_cfg),
    .opts_size = sizeof(kc_elu_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ACTIVATION),
    .init = elu_init,
    .get_opts = elu_get_opts,
    .build = kc__act_layer_build,
    KC_ACT_LAYER_FNS,
    KC_KERAS_KEYS(k_elu_keys),
};
