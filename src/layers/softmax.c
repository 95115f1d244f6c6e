/* softmax.c — Softmax layer over the last axis. */
#include "layer.h"

typedef struct softmax_cfg {
    kc__act_layer_cfg base; /* first: the shared activation-layer functions read it */
    int axis;     /* as given: -1, or the last axis counted with the batch (checked at build) */
} softmax_cfg;

static kc_status softmax_init(kc_layer *l, const void *opts_) {
    const kc_softmax_opts *o = opts_;
    softmax_cfg *c = l->cfg;
    c->base.act = (kc_act_params){KC_ACT_SOFTMAX, 0.0f, 0.0f, 0.0f};
    c->axis = o->axis == 0 ? -1 : o->axis;
    if (c->axis < -1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the last axis (-1) is", kc__layer_label(l),
                        o->axis);
    return KC_STATUS_OK;
}

static void softmax_get_opts(const kc_layer *l, void *opts_) {
    const softmax_cfg *c = l->cfg;
    *(kc_softmax_opts *)opts_ = (kc_softmax_opts){.name = l->name, .axis = c->axis};
}

static kc_status softmax_build(kc_layer *l) {
    const softmax_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    /* Keras counts axes with the batch: the last axis of (None, d1, .., dr) is r */
    if (c->axis != -1 && c->axis != in->rank)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the last axis (-1 or %d) is",
                        kc__layer_label(l), c->axis, in->rank);
    return kc__act_layer_build(l);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_softmax_opts, member)
static const kc__field k_keras_keys[] = {
    {"axis", KC_F_AXIS, KC_F_W, O(axis), NULL, 0},
};
#undef O

const kc_layer_ops kc__softmax_ops = {
    .class_name = "Softmax",
    .snake_name = "softmax",
    .cfg_size = sizeof(softmax_cfg),
    .opts_size = sizeof(kc_softmax_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ACTIVATION),
    .init = softmax_init,
    .get_opts = softmax_get_opts,
    .build = softmax_build,
    KC_ACT_LAYER_FNS,
    KC_KERAS_KEYS(k_keras_keys),
};
