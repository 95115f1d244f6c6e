/* relu.c — ReLU layer: y = x >= threshold ? min(x, max_value) : negative_slope * (x - threshold);
 * the plain relu when all three options are 0. */
#include "layer.h"

typedef struct relu_cfg {
    float max_value, negative_slope, threshold;
    kc_act_params act;
    int64_t size;
    int cols;
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
        c->act = (kc_act_params){KC_ACT_RELU, 0.0f, 0.0f, 0.0f};
    else
        c->act = (kc_act_params){KC_ACT_RELU_GENERAL, c->negative_slope, c->max_value, c->threshold};
    return KC_STATUS_OK;
}

static void relu_get_opts(const kc_layer *l, void *opts_) {
    const relu_cfg *c = l->cfg;
    *(kc_relu_opts *)opts_ = (kc_relu_opts){.name = l->name, .max_value = c->max_value,
                                            .negative_slope = c->negative_slope, .threshold = c->threshold};
}

static kc_status relu_build(kc_layer *l) {
    relu_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    l->out_shape = *in;
    c->size = kc__shape_size(in);
    c->cols = in->rank ? in->dim[in->rank - 1] : 1;
    return KC_STATUS_OK;
}

static kc_status relu_forward(kc_layer *l, const kc_fwd *a) {
    const relu_cfg *c = l->cfg;
    return kc__act_layer_forward(l, c->act, c->size, c->cols, a);
}

static kc_status relu_backward(kc_layer *l, const kc_bwd *a) {
    const relu_cfg *c = l->cfg;
    return kc__act_layer_backward(l, c->act, c->size, c->cols, a);
}

static int64_t relu_flops(const kc_layer *l) {
    const relu_cfg *c = l->cfg;
    return c->size * kc__act_flops(c->act.kind);
}

static kc_act_params relu_activation(const kc_layer *l) { return ((const relu_cfg *)l->cfg)->act; }

const kc_layer_ops kc__relu_ops = {
    .class_name = "ReLU",
    .snake_name = "re_lu",
    .cfg_size = sizeof(relu_cfg),
    .opts_size = sizeof(kc_relu_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .init = relu_init,
    .get_opts = relu_get_opts,
    .build = relu_build,
    .forward = relu_forward,
    .backward = relu_backward,
    .flops = relu_flops,
    .activation = relu_activation,
};
