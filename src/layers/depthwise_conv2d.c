/* depthwise_conv2d.c — DepthwiseConv2D: y = act(dwconv(x, kernel) + bias), NHWC input,
 * kernel (KH, KW, C, depth_multiplier) as Keras stores it; output channel c * M + m is
 * input channel c convolved with kernel[:, :, c, m]. */
#include <stdio.h>

#include "layer.h"

typedef struct dw_cfg {
    int mult;
    bool use_bias;
    kc_act_params act;
    const char *kernel_init, *bias_init; /* static canonical names */
    kc__conv_win g;
    int f; /* from build: C * mult */
} dw_cfg;

static kc_status dw_init(kc_layer *l, const void *opts_) {
    const kc_depthwise_conv2d_opts *o = opts_;
    dw_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (o->depth_multiplier < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: depth_multiplier must be a positive integer, got %d", L,
                        o->depth_multiplier);
    c->mult = o->depth_multiplier ? o->depth_multiplier : 1;
    KC_TRY(kc__conv_win_init(l, o->kernel_size, o->strides, o->dilation_rate, o->padding, &c->g));
    return kc__parse_weighted(l, o->activation, o->use_bias, o->depthwise_initializer, o->bias_initializer, &c->act,
                              &c->use_bias, &c->kernel_init, &c->bias_init);
}

static void dw_get_opts(const kc_layer *l, void *opts_) {
    const dw_cfg *c = l->cfg;
    kc_depthwise_conv2d_opts *o = opts_;
    *o = (kc_depthwise_conv2d_opts){
        .name = l->name,
        KC_CONV_WIN_OPTS(c->g),
        .depth_multiplier = c->mult,
        .activation = kc__act_name(&c->act),
        .use_bias = c->use_bias ? KC_TRUE : KC_FALSE,
        .depthwise_initializer = c->kernel_init,
        .bias_initializer = c->bias_init,
    };
}

static kc_status dw_build(kc_layer *l) {
    dw_cfg *c = l->cfg;
    l->n_weights = 0;
    KC_TRY(kc__conv_win_build(l, &c->g));
    if ((int64_t)c->g.c * c->mult > (1 << 30))
        return kc__fail(KC_STATUS_SHAPE, "%s: %d channels x depth_multiplier %d is too many output channels",
                        kc__layer_label(l), c->g.c, c->mult);
    c->f = c->g.c * c->mult;
    l->out_shape = kc__shape_make(3, (int[]){c->g.oh, c->g.ow, c->f});
    /* Keras's fans for a (KH, KW, C, M) kernel: receptive field x C in, x M out */
    int64_t rf = (int64_t)c->g.kh * c->g.kw;
    KC_TRY(kc__layer_add_weight(l, "kernel", kc__shape_make(4, (int[]){c->g.kh, c->g.kw, c->g.c, c->mult}), true,
                                c->kernel_init, rf * c->g.c, rf * c->mult));
    if (c->use_bias)
        KC_TRY(kc__layer_add_weight(l, "bias", kc__shape_make(1, (int[]){c->f}), true, c->bias_init, rf * c->g.c,
                                    rf * c->mult));
    return KC_STATUS_OK;
}

/* The backend's description (Conv2D's, with f = C * M); a plain ReLU is fused. With a
 * ZeroPadding2D folded in (src/model/fuse.c) the input is the unpadded one and its
 * padding before adds to the layer's own. */
static kc_conv2d_desc dw_desc(const kc_layer *l, int batch) {
    const dw_cfg *c = l->cfg;
    kc_conv2d_desc d = kc__conv_win_desc(&c->g, batch, c->f, c->act.kind == KC_ACT_RELU && !l->defer_act);
    if (l->fold_h > 0) {
        d.h = l->fold_h, d.w = l->fold_w;
        d.pad_top += l->fold_top, d.pad_left += l->fold_left;
    }
    return d;
}

static size_t dw_aux_bytes(const kc_layer *l, int batch) {
    const dw_cfg *c = l->cfg;
    if (!kc__act_needs_input(c->act.kind)) return 0;
    return (size_t)batch * c->g.oh * c->g.ow * c->f * sizeof(float); /* pre-activation (N, OH, OW, F) */
}

static size_t dw_workspace_bytes(const kc_layer *l, int batch, kc_backend *be) {
    kc_conv2d_desc d = dw_desc(l, batch);
    return be->depthwise_workspace ? be->depthwise_workspace(be, &d) : 0;
}

static kc_status dw_forward(kc_layer *l, const kc_fwd *a) {
    const dw_cfg *c = l->cfg;
    kc_conv2d_desc d = dw_desc(l, a->batch);
    const float *bias = c->use_bias ? l->w[1].data : NULL;
    KC_TRY(a->be->depthwise_forward(a->be, &d, a->x[0], l->w[0].data, bias, a->y, a->ws, a->ws_bytes));
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->f;
    if (l->defer_act || d.relu) return KC_STATUS_OK;
    return kc__fused_act_forward(a->be, &c->act, a->y, a->training ? a->aux : NULL, n, c->f);
}

static kc_status dw_backward(kc_layer *l, const kc_bwd *a) {
    const dw_cfg *c = l->cfg;
    kc_conv2d_desc d = dw_desc(l, a->batch);
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->f;
    if (!l->defer_act) KC_TRY(kc__fused_act_backward(a->be, &c->act, a->aux, a->y, a->dy, n, c->f));
    if (l->w[0].grad)
        KC_TRY(a->be->depthwise_backward_filter(a->be, &d, a->x[0], a->dy, l->w[0].grad,
                                                c->use_bias ? l->w[1].grad : NULL, a->ws, a->ws_bytes));
    else if (c->use_bias && l->w[1].grad)
        KC_TRY(a->be->bias_grad(a->be, a->dy, l->w[1].grad, n / c->f, c->f));
    if (a->dx[0])
        KC_TRY(a->be->depthwise_backward_data(a->be, &d, a->dy, l->w[0].data, a->dx[0], a->ws, a->ws_bytes));
    return KC_STATUS_OK;
}

static kc_act_params dw_activation(const kc_layer *l) { return ((const dw_cfg *)l->cfg)->act; }

static int64_t dw_flops(const kc_layer *l) {
    const dw_cfg *c = l->cfg;
    return 2 * (int64_t)c->g.oh * c->g.ow * c->f * c->g.kh * c->g.kw;
}

/* The Keras config keys (keras_keys.h), in the order Keras 3's get_config() writes them.
 * tf-keras (a Conv2D subclass there) also writes groups: read, never written, since Keras 3
 * refuses it in a DepthwiseConv2D of a legacy .h5 and tf-keras does without it. */
#define O(member) offsetof(kc_depthwise_conv2d_opts, member)
static const kc__field k_keras_keys[] = {
    {"depth_multiplier", KC_F_INT, KC_F_W, O(depth_multiplier), NULL, 0},
    KC_CONV_WINDOW_KEYS(kc_depthwise_conv2d_opts),
    KC_KEY_FIXED("groups", "1", 0),
    {"activation", KC_F_ACT, KC_F_W, O(activation), "linear", 0},
    {"use_bias", KC_F_BOOL, KC_F_W, O(use_bias), NULL, 1},
    {"depthwise_initializer", KC_F_INIT, KC_F_W, O(depthwise_initializer), "glorot_uniform", 0},
    {"bias_initializer", KC_F_INIT, KC_F_W, O(bias_initializer), "zeros", 0},
    KC_KEY_NULL("depthwise_regularizer", KC_F_W),
    KC_KEY_NULL("bias_regularizer", KC_F_W),
    KC_KEY_NULL("activity_regularizer", KC_F_W),
    KC_KEY_NULL("depthwise_constraint", KC_F_W),
    KC_KEY_NULL("bias_constraint", KC_F_W),
};
#undef O

const kc_layer_ops kc__depthwise_conv2d_ops = {
    .class_name = "DepthwiseConv2D",
    .alias = NULL,
    .snake_name = "depthwise_conv2d",
    .cfg_size = sizeof(dw_cfg),
    .opts_size = sizeof(kc_depthwise_conv2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .init = dw_init,
    .get_opts = dw_get_opts,
    .build = dw_build,
    .aux_bytes = dw_aux_bytes,
    .workspace_bytes = dw_workspace_bytes,
    .forward = dw_forward,
    .backward = dw_backward,
    .flops = dw_flops,
    .activation = dw_activation,
    .backend_ops = KC_OP_BIT(KC_OP_DEPTHWISE) | KC_OP_BIT(KC_OP_ACTIVATION) | KC_OP_BIT(KC_OP_GEMM),
    KC_KERAS_KEYS(k_keras_keys),
};
