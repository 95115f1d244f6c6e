/* softmax.c — Softmax layer over the last axis. */
#include "layer.h"

typedef struct softmax_cfg {
    int axis;     /* as given: -1, or the last axis counted with the batch (checked at build) */
    int64_t size;
    int cols;
} softmax_cfg;

static const kc_act_params k_softmax = {KC_ACT_SOFTMAX, 0.0f, 0.0f, 0.0f};

static kc_status softmax_init(kc_layer *l, const void *opts_) {
    const kc_softmax_opts *o = opts_;
    softmax_cfg *c = l->cfg;
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
    softmax_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    /* Keras counts axes with the batch: the last axis of (None, d1, .., dr) is r */
    if (c->axis != -1 && c->axis != in->rank)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the last axis (-1 or %d) is",
                        kc__layer_label(l), c->axis, in->rank);
    l->out_shape = *in;
    c->size = kc__shape_size(in);
    c->cols = in->rank ? in->dim[in->rank - 1] : 1;
    return KC_STATUS_OK;
}

static kc_status softmax_forward(kc_layer *l, const kc_fwd *a) {
    const softmax_cfg *c = l->cfg;
    return kc__act_layer_forward(l, k_softmax, c->size, c->cols, a);
}

static kc_status softmax_backward(kc_layer *l, const kc_bwd *a) {
    const softmax_cfg *c = l->cfg;
    return kc__act_layer_backward(l, k_softmax, c->size, c->cols, a);
}

static int64_t softmax_flops(const kc_layer *l) {
    const softmax_cfg *c = l->cfg;
    return c->size * kc__act_flops(KC_ACT_SOFTMAX);
}

static kc_act_params softmax_activation(const kc_layer *l) { return k_softmax; }

const kc_layer_ops kc__softmax_ops = {
    .class_name = "Softmax",
    .snake_name = "softmax",
    .cfg_size = sizeof(softmax_cfg),
    .opts_size = sizeof(kc_softmax_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .init = softmax_init,
    .get_opts = softmax_get_opts,
    .build = softmax_build,
    .forward = softmax_forward,
    .backward = softmax_backward,
    .flops = softmax_flops,
    .activation = softmax_activation,
};
