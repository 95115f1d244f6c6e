/* separable_conv2d.c — SeparableConv2D: y = act(pointwise(depthwise(x)) + bias), NHWC.
 *
 * Keras's weights, in its order: depthwise_kernel (KH, KW, C, M), pointwise_kernel
 * (1, 1, C * M, filters), bias (filters). The depthwise step (strides, padding, dilation)
 * runs the backend's depthwise entries, the pointwise step its conv2d entries with a 1x1
 * kernel (one GEMM on the CPU). The intermediate t (N, OH, OW, C * M) lives in the aux
 * buffer in training (the pointwise filter gradient reads it) and at the start of the
 * workspace in inference; its gradient takes the workspace's start in backward. The rest
 * of the workspace goes to the 1x1 convolution and to the depthwise calls (the larger of
 * the two). */
#include <stdio.h>

#include "layer.h"

typedef struct sep_cfg {
    int filters, mult;
    bool use_bias;
    kc_act_params act;
    const char *dw_init, *pw_init, *bias_init; /* static canonical names */
    kc__conv_win g;                            /* the depthwise step's */
    int m;                                     /* from build: C * depth_multiplier */
} sep_cfg;

static kc_status sep_init(kc_layer *l, const void *opts_) {
    const kc_separable_conv2d_opts *o = opts_;
    sep_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (o->filters <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: filters must be a positive integer, got %d", L, o->filters);
    if (o->depth_multiplier < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: depth_multiplier must be a positive integer, got %d", L,
                        o->depth_multiplier);
    c->filters = o->filters;
    c->mult = o->depth_multiplier ? o->depth_multiplier : 1;
    KC_TRY(kc__conv_win_init(l, o->kernel_size, o->strides, o->dilation_rate, o->padding, &c->g));
    const char *pw = o->pointwise_initializer ? o->pointwise_initializer : "glorot_uniform";
    if (!kc__init_known(pw))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: unknown pointwise_initializer '%s'; supported: %s", L, pw,
                        kc__init_supported);
    c->pw_init = kc__init_canonical(pw);
    return kc__parse_weighted(l, o->activation, o->use_bias, o->depthwise_initializer, o->bias_initializer, &c->act,
                              &c->use_bias, &c->dw_init, &c->bias_init);
}

static void sep_get_opts(const kc_layer *l, void *opts_) {
    const sep_cfg *c = l->cfg;
    kc_separable_conv2d_opts *o = opts_;
    *o = (kc_separable_conv2d_opts){
        .name = l->name,
        .filters = c->filters,
        KC_CONV_WIN_OPTS(c->g),
        .depth_multiplier = c->mult,
        .activation = kc__act_name(&c->act),
        .use_bias = c->use_bias ? KC_TRUE : KC_FALSE,
        .depthwise_initializer = c->dw_init,
        .pointwise_initializer = c->pw_init,
        .bias_initializer = c->bias_init,
    };
}

static kc_status sep_build(kc_layer *l) {
    sep_cfg *c = l->cfg;
    l->n_weights = 0;
    KC_TRY(kc__conv_win_build(l, &c->g));
    if ((int64_t)c->g.c * c->mult > (1 << 30))
        return kc__fail(KC_STATUS_SHAPE, "%s: %d channels x depth_multiplier %d is too many channels",
                        kc__layer_label(l), c->g.c, c->mult);
    c->m = c->g.c * c->mult;
    l->out_shape = kc__shape_make(3, (int[]){c->g.oh, c->g.ow, c->filters});
    /* Keras's fans: (KH, KW, C, M) and (1, 1, C * M, filters) */
    int64_t rf = (int64_t)c->g.kh * c->g.kw;
    KC_TRY(kc__layer_add_weight(l, "depthwise_kernel", kc__shape_make(4, (int[]){c->g.kh, c->g.kw, c->g.c, c->mult}),
                                true, c->dw_init, rf * c->g.c, rf * c->mult));
    KC_TRY(kc__layer_add_weight(l, "pointwise_kernel", kc__shape_make(4, (int[]){1, 1, c->m, c->filters}), true,
                                c->pw_init, c->m, c->filters));
    if (c->use_bias)
        KC_TRY(kc__layer_add_weight(l, "bias", kc__shape_make(1, (int[]){c->filters}), true, c->bias_init, c->m,
                                    c->filters));
    return KC_STATUS_OK;
}

static kc_conv2d_desc sep_dw_desc(const sep_cfg *c, int batch) {
    return kc__conv_win_desc(&c->g, batch, c->m, false);
}

/* The pointwise 1x1 convolution; a plain ReLU is fused into it. */
static kc_conv2d_desc sep_pw_desc(const kc_layer *l, int batch) {
    const sep_cfg *c = l->cfg;
    return (kc_conv2d_desc){.n = batch, .h = c->g.oh, .w = c->g.ow, .c = c->m, .f = c->filters, .kh = 1, .kw = 1,
                            .sh = 1, .sw = 1, .dh = 1, .dw = 1, .oh = c->g.oh, .ow = c->g.ow,
                            .relu = c->act.kind == KC_ACT_RELU && !l->defer_act};
}

/* The placement log describes the main group's (KC_OP_CONV2D) call: the pointwise one. */
static void sep_backend_desc(const kc_layer *l, int batch, void *desc) {
    *(kc_conv2d_desc *)desc = sep_pw_desc(l, batch);
}

/* Bytes of t (or its gradient), rounded to 64 so that what follows stays aligned. */
static size_t sep_t_bytes(const sep_cfg *c, int batch) {
    return ((size_t)batch * c->g.oh * c->g.ow * c->m * sizeof(float) + 63) & ~(size_t)63;
}

static size_t sep_aux_bytes(const kc_layer *l, int batch) {
    const sep_cfg *c = l->cfg;
    size_t pre = kc__act_needs_input(c->act.kind) ? (size_t)batch * c->g.oh * c->g.ow * c->filters * sizeof(float) : 0;
    return sep_t_bytes(c, batch) + pre; /* t, then the pre-activation */
}

static size_t sep_workspace_bytes(const kc_layer *l, int batch, kc_backend *be) {
    kc_conv2d_desc pd = sep_pw_desc(l, batch), dd = sep_dw_desc(l->cfg, batch);
    size_t pw = be->conv2d_workspace ? be->conv2d_workspace(be, &pd) : 0;
    size_t dw = be->depthwise_workspace ? be->depthwise_workspace(be, &dd) : 0;
    return sep_t_bytes(l->cfg, batch) + KC_MAX(pw, dw);
}

static kc_status sep_forward(kc_layer *l, const kc_fwd *a) {
    const sep_cfg *c = l->cfg;
    kc_conv2d_desc dd = sep_dw_desc(c, a->batch), pd = sep_pw_desc(l, a->batch);
    size_t tb = sep_t_bytes(c, a->batch);
    if (a->ws_bytes < tb) return kc__fail(KC_STATUS_INTERNAL, "%s: the workspace is too small", kc__layer_label(l));
    float *t = a->training && a->aux ? (float *)a->aux : (float *)a->ws;
    float *pre = a->training && a->aux ? (float *)((char *)a->aux + tb) : NULL;
    void *ws = (char *)a->ws + tb;
    KC_TRY(a->be->depthwise_forward(a->be, &dd, a->x[0], l->w[0].data, NULL, t, ws, a->ws_bytes - tb));
    const float *bias = c->use_bias ? l->w[2].data : NULL;
    KC_TRY(a->be->conv2d_forward(a->be, &pd, t, l->w[1].data, bias, a->y, ws, a->ws_bytes - tb));
    if (l->defer_act || pd.relu) return KC_STATUS_OK;
    return kc__fused_act_forward(a->be, &c->act, a->y, pre, (int64_t)a->batch * c->g.oh * c->g.ow * c->filters,
                                 c->filters);
}

static kc_status sep_backward(kc_layer *l, const kc_bwd *a) {
    const sep_cfg *c = l->cfg;
    kc_conv2d_desc dd = sep_dw_desc(c, a->batch), pd = sep_pw_desc(l, a->batch);
    size_t tb = sep_t_bytes(c, a->batch);
    if (a->ws_bytes < tb) return kc__fail(KC_STATUS_INTERNAL, "%s: the workspace is too small", kc__layer_label(l));
    const float *t = a->aux;
    float *dt = a->ws;
    void *ws = (char *)a->ws + tb;
    size_t wsb = a->ws_bytes - tb;
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->filters;
    if (!l->defer_act)
        KC_TRY(kc__fused_act_backward(a->be, &c->act, (const float *)((const char *)a->aux + tb), a->y, a->dy, n,
                                      c->filters));
    float *db = c->use_bias ? l->w[2].grad : NULL;
    if (l->w[1].grad) KC_TRY(a->be->conv2d_backward_filter(a->be, &pd, t, a->dy, l->w[1].grad, db, ws, wsb));
    else if (db) KC_TRY(a->be->bias_grad(a->be, a->dy, db, n / c->filters, c->filters));
    if (!l->w[0].grad && !a->dx[0]) return KC_STATUS_OK;
    KC_TRY(a->be->conv2d_backward_data(a->be, &pd, a->dy, l->w[1].data, dt, ws, wsb));
    if (l->w[0].grad) KC_TRY(a->be->depthwise_backward_filter(a->be, &dd, a->x[0], dt, l->w[0].grad, NULL, ws, wsb));
    if (a->dx[0]) KC_TRY(a->be->depthwise_backward_data(a->be, &dd, dt, l->w[0].data, a->dx[0], ws, wsb));
    return KC_STATUS_OK;
}

static kc_act_params sep_activation(const kc_layer *l) { return ((const sep_cfg *)l->cfg)->act; }

static int64_t sep_flops(const kc_layer *l) {
    const sep_cfg *c = l->cfg;
    return 2 * (int64_t)c->g.oh * c->g.ow * c->m * ((int64_t)c->g.kh * c->g.kw + c->filters);
}

/* The Keras config keys, in Keras 3's order. tf-keras (a Conv subclass there) also writes
 * groups (1) and its base's unused kernel_initializer / kernel_regularizer /
 * kernel_constraint: read, never written, since Keras 3 refuses them. tf-keras never uses
 * that kernel_initializer (it builds the depthwise and pointwise kernels only), and
 * NASNet sets it to he_normal: any value is accepted. */
#define O(member) offsetof(kc_separable_conv2d_opts, member)
static const kc__field k_keras_keys[] = {
    {"depth_multiplier", KC_F_INT, KC_F_W, O(depth_multiplier), NULL, 0},
    {"filters", KC_F_INT, KC_F_W, O(filters), NULL, 0},
    KC_CONV_WINDOW_KEYS(kc_separable_conv2d_opts),
    KC_KEY_FIXED("groups", "1", 0),
    {"activation", KC_F_ACT, KC_F_W, O(activation), "linear", 0},
    {"use_bias", KC_F_BOOL, KC_F_W, O(use_bias), NULL, 1},
    {"depthwise_initializer", KC_F_INIT, KC_F_W, O(depthwise_initializer), "glorot_uniform", 0},
    {"pointwise_initializer", KC_F_INIT, KC_F_W, O(pointwise_initializer), "glorot_uniform", 0},
    {"bias_initializer", KC_F_INIT, KC_F_W, O(bias_initializer), "zeros", 0},
    KC_KEY_NULL("depthwise_regularizer", KC_F_W),
    KC_KEY_NULL("pointwise_regularizer", KC_F_W),
    KC_KEY_NULL("bias_regularizer", KC_F_W),
    KC_KEY_NULL("activity_regularizer", KC_F_W),
    KC_KEY_NULL("depthwise_constraint", KC_F_W),
    KC_KEY_NULL("pointwise_constraint", KC_F_W),
    KC_KEY_NULL("bias_constraint", KC_F_W),
    KC_KEY_IGNORE("kernel_initializer"),
    KC_KEY_NULL("kernel_regularizer", 0),
    KC_KEY_NULL("kernel_constraint", 0),
};
#undef O

const kc_layer_ops kc__separable_conv2d_ops = {
    .class_name = "SeparableConv2D",
    .alias = "SeparableConvolution2D",
    .snake_name = "separable_conv2d",
    .cfg_size = sizeof(sep_cfg),
    .opts_size = sizeof(kc_separable_conv2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_CONV2D) | KC_OP_BIT(KC_OP_ACTIVATION) | KC_OP_BIT(KC_OP_GEMM) |
                   KC_OP_BIT(KC_OP_DEPTHWISE),
    .backend_desc = sep_backend_desc,
    .init = sep_init,
    .get_opts = sep_get_opts,
    .build = sep_build,
    .aux_bytes = sep_aux_bytes,
    .workspace_bytes = sep_workspace_bytes,
    .forward = sep_forward,
    .backward = sep_backward,
    .flops = sep_flops,
    .activation = sep_activation,
    KC_KERAS_KEYS(k_keras_keys),
};
