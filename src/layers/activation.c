/* activation.c — Activation: y = act(x) elementwise (softmax over the last axis). */
#include "layer.h"

typedef struct activation_cfg {
    kc_act_params act;
    int64_t size; /* values per example */
    int cols;     /* last axis (softmax rows) */
} activation_cfg;

static kc_status activation_init(kc_layer *l, const void *opts_) {
    const kc_activation_opts *o = opts_;
    activation_cfg *c = l->cfg;
    kc_status st = kc__act_parse(o->activation, &c->act);
    if (st) return kc__wrap(st, "%s: ", kc__layer_label(l));
    return KC_STATUS_OK;
}

static void activation_get_opts(const kc_layer *l, void *opts_) {
    const activation_cfg *c = l->cfg;
    *(kc_activation_opts *)opts_ = (kc_activation_opts){.name = l->name, .activation = kc__act_name(&c->act)};
}

static kc_status activation_build(kc_layer *l) {
    activation_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    l->out_shape = *in;
    c->size = kc__shape_size(in);
    c->cols = in->rank ? in->dim[in->rank - 1] : 1;
    return KC_STATUS_OK;
}

static kc_status activation_forward(kc_layer *l, const kc_fwd *a) {
    const activation_cfg *c = l->cfg;
    return kc__act_layer_forward(l, c->act, c->size, c->cols, a);
}

static kc_status activation_backward(kc_layer *l, const kc_bwd *a) {
    const activation_cfg *c = l->cfg;
    return kc__act_layer_backward(l, c->act, c->size, c->cols, a);
}

static int64_t activation_flops(const kc_layer *l) {
    const activation_cfg *c = l->cfg;
    return c->size * kc__act_flops(c->act.kind);
}

static kc_act_params activation_activation(const kc_layer *l) { return ((const activation_cfg *)l->cfg)->act; }

const kc_layer_ops kc__activation_ops = {
    .class_name = "Activation",
    .snake_name = "activation",
    .cfg_size = sizeof(activation_cfg),
    .opts_size = sizeof(kc_activation_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .init = activation_init,
    .get_opts = activation_get_opts,
    .build = activation_build,
    .forward = activation_forward,
    .backward = activation_backward,
    .flops = activation_flops,
    .activation = activation_activation,
};
