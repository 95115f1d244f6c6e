/* activation.c — Activation: y = act(x) elementwise (softmax over the last axis). */
#include "layer.h"

static kc_status activation_init(kc_layer *l, const void *opts_) {
    const kc_activation_opts *o = opts_;
    kc__act_layer_cfg *c = l->cfg;
    kc_status st = kc__act_parse(o->activation, &c->act);
    if (st) return kc__wrap(st, "%s: ", kc__layer_label(l));
    return KC_STATUS_OK;
}

static void activation_get_opts(const kc_layer *l, void *opts_) {
    const kc__act_layer_cfg *c = l->cfg;
    *(kc_activation_opts *)opts_ = (kc_activation_opts){.name = l->name, .activation = kc__act_name(&c->act)};
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_activation_opts, member)
static const kc__field k_keras_keys[] = {
    {"activation", KC_F_ACT, KC_F_W, O(activation), "linear", 0},
};
#undef O

const kc_layer_ops kc__activation_ops = {
    .class_name = "Activation",
    .snake_name = "activation",
    .cfg_size = sizeof(kc__act_layer_cfg),
    .opts_size = sizeof(kc_activation_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ACTIVATION),
    .init = activation_init,
    .get_opts = activation_get_opts,
    .build = kc__act_layer_build,
    KC_ACT_LAYER_FNS,
    KC_KERAS_KEYS(k_keras_keys),
};
