/* conv2d.c — Conv2D: y = act(conv(x, kernel) + bias), NHWC input, HWIO kernel
 * (KH, KW, C / groups, filters). groups == 1 runs the backend's conv2d entries; one input
 * channel per group (groups == C, ConvNeXt) is depthwise convolution with depth multiplier
 * filters / C, whose (KH, KW, 1, F) kernel is the depthwise (KH, KW, C, M) one, byte for
 * byte; other groups run the grouped_conv entries. */
#include <stdio.h>

#include "layer.h"

typedef struct conv_cfg {
    int filters, groups;
    bool use_bias;
    kc_act_params act;
    const char *kernel_init, *bias_init; /* static canonical names */
    kc__conv_win g;
} conv_cfg;

static kc_status conv_init(kc_layer *l, const void *opts_) {
    const kc_conv2d_opts *o = opts_;
    conv_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (o->filters <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: filters must be a positive integer, got %d", L, o->filters);
    c->filters = o->filters;
    if (o->groups < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: groups must be a positive integer, got %d", L, o->groups);
    c->groups = o->groups ? o->groups : 1;
    if (c->filters % c->groups)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: filters (%d) must be a multiple of groups (%d), as in Keras", L, c->filters, c->groups);
    KC_TRY(kc__conv_win_init(l, o->kernel_size, o->strides, o->dilation_rate, o->padding, &c->g));
    return kc__parse_weighted(l, o->activation, o->use_bias, o->kernel_initializer, o->bias_initializer, &c->act,
                              &c->use_bias, &c->kernel_init, &c->bias_init);
}

static void conv_get_opts(const kc_layer *l, void *opts_) {
    const conv_cfg *c = l->cfg;
    kc_conv2d_opts *o = opts_;
    *o = (kc_conv2d_opts){
        .name = l->name,
        .filters = c->filters,
        KC_CONV_WIN_OPTS(c->g),
        .activation = kc__act_name(&c->act),
        .use_bias = c->use_bias ? KC_TRUE : KC_FALSE,
        .kernel_initializer = c->kernel_init,
        .bias_initializer = c->bias_init,
        .groups = c->groups,
    };
}

static kc_status conv_build(kc_layer *l) {
    conv_cfg *c = l->cfg;
    l->n_weights = 0;
    KC_TRY(kc__conv_win_build(l, &c->g));
    if (c->g.c % c->groups)
        return kc__fail(KC_STATUS_SHAPE, "%s: the input's %d channels must be a multiple of groups (%d), as in Keras",
                        kc__layer_label(l), c->g.c, c->groups);
    l->out_shape = kc__shape_make(3, (int[]){c->g.oh, c->g.ow, c->filters});
    int64_t rf = (int64_t)c->g.kh * c->g.kw, cg = c->g.c / c->groups;
    KC_TRY(kc__layer_add_weight(l, "kernel", kc__shape_make(4, (int[]){c->g.kh, c->g.kw, (int)cg, c->filters}), true,
                                c->kernel_init, rf * cg, rf * c->filters));
    if (c->use_bias)
        KC_TRY(kc__layer_add_weight(l, "bias", kc__shape_make(1, (int[]){c->filters}), true, c->bias_init,
                                    rf * cg, rf * c->filters));
    return KC_STATUS_OK;
}

/* The backend's description; a plain ReLU activation is fused into the convolution (one
 * pass over the output less), unless the loss takes the logits. */
static kc_conv2d_desc conv_desc(const kc_layer *l, int batch) {
    const conv_cfg *c = l->cfg;
    return kc__conv_win_desc(&c->g, batch, c->filters, c->act.kind == KC_ACT_RELU && !l->defer_act);
}

static void conv_backend_desc(const kc_layer *l, int batch, void *desc) { *(kc_conv2d_desc *)desc = conv_desc(l, batch); }

static size_t conv_aux_bytes(const kc_layer *l, int batch) {
    const conv_cfg *c = l->cfg;
    if (!kc__act_needs_input(c->act.kind)) return 0;
    return (size_t)batch * c->g.oh * c->g.ow * c->filters * sizeof(float); /* pre-activation (N, OH, OW, F) */
}

static size_t conv_workspace_bytes(const kc_layer *l, int batch, kc_backend *be) {
    const conv_cfg *c = l->cfg;
    kc_conv2d_desc d = conv_desc(l, batch);
    if (c->groups == 1) return be->conv2d_workspace ? be->conv2d_workspace(be, &d) : 0;
    if (c->groups == c->g.c) return be->depthwise_workspace ? be->depthwise_workspace(be, &d) : 0;
    return be->grouped_conv_workspace ? be->grouped_conv_workspace(be, &d, c->groups) : 0;
}

static kc_status conv_forward(kc_layer *l, const kc_fwd *a) {
    const conv_cfg *c = l->cfg;
    kc_conv2d_desc d = conv_desc(l, a->batch);
    const float *bias = c->use_bias ? l->w[1].data : NULL; /* (F) */
    if (c->groups == 1)
        KC_TRY(a->be->conv2d_forward(a->be, &d, a->x[0], l->w[0].data, bias, a->y, a->ws, a->ws_bytes));
    else if (c->groups == c->g.c)
        KC_TRY(a->be->depthwise_forward(a->be, &d, a->x[0], l->w[0].data, bias, a->y, a->ws, a->ws_bytes));
    else
        KC_TRY(a->be->grouped_conv_forward(a->be, &d, c->groups, a->x[0], l->w[0].data, bias, a->y, a->ws,
                                           a->ws_bytes));
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->filters;
    if (l->defer_act || d.relu) return KC_STATUS_OK; /* the loss takes the logits; or done in the convolution */
    return kc__fused_act_forward(a->be, &c->act, a->y, a->training ? a->aux : NULL, n, c->filters);
}

/* A plain convolution adds its input gradient in place where the backend's backward-data can. */
static bool conv_dx_adds(const kc_layer *l, int k, int batch, kc_backend *be) {
    const conv_cfg *c = l->cfg;
    if (k != 0 || c->groups != 1 || !be || !be->conv2d_dx_adds) return false;
    kc_conv2d_desc d = conv_desc(l, batch);
    return be->conv2d_dx_adds(be, &d) != 0;
}

static kc_status conv_backward(kc_layer *l, const kc_bwd *a) {
    const conv_cfg *c = l->cfg;
    kc_conv2d_desc d = conv_desc(l, a->batch);
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->filters;
    if (!l->defer_act)
        KC_TRY(kc__fused_act_backward(a->be, &c->act, a->aux, a->y, a->dy, n, c->filters));
    float *db = c->use_bias ? l->w[1].grad : NULL;
    if (l->w[0].grad && c->groups == 1)
        KC_TRY(a->be->conv2d_backward_filter(a->be, &d, a->x[0], a->dy, l->w[0].grad, db, a->ws, a->ws_bytes));
    else if (l->w[0].grad && c->groups == c->g.c)
        KC_TRY(a->be->depthwise_backward_filter(a->be, &d, a->x[0], a->dy, l->w[0].grad, db, a->ws, a->ws_bytes));
    else if (l->w[0].grad)
        KC_TRY(a->be->grouped_conv_backward_filter(a->be, &d, c->groups, a->x[0], a->dy, l->w[0].grad, db, a->ws,
                                                   a->ws_bytes));
    else if (db)
        KC_TRY(a->be->bias_grad(a->be, a->dy, db, n / c->filters, c->filters));
    if (!a->dx[0]) return KC_STATUS_OK;
    d.accumulate = (a->dx_add & 1u) != 0; /* only when conv_dx_adds said so */
    if (c->groups == 1)
        return a->be->conv2d_backward_data(a->be, &d, a->dy, l->w[0].data, a->dx[0], a->ws, a->ws_bytes);
    if (c->groups == c->g.c)
        return a->be->depthwise_backward_data(a->be, &d, a->dy, l->w[0].data, a->dx[0], a->ws, a->ws_bytes);
    return a->be->grouped_conv_backward_data(a->be, &d, c->groups, a->dy, l->w[0].data, a->dx[0], a->ws,
                                             a->ws_bytes);
}

static kc_act_params conv_activation(const kc_layer *l) { return ((const conv_cfg *)l->cfg)->act; }

static int64_t conv_flops(const kc_layer *l) {
    const conv_cfg *c = l->cfg;
    return 2 * (int64_t)c->g.oh * c->g.ow * c->filters * c->g.kh * c->g.kw * (c->g.c / c->groups);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_conv2d_opts, member)
static const kc__field k_keras_keys[] = {
    {"filters", KC_F_INT, KC_F_W, O(filters), NULL, 0},
    KC_CONV_WINDOW_KEYS(kc_conv2d_opts),
    {"groups", KC_F_INT, KC_F_W, O(groups), NULL, 0},
    KC_WEIGHTED_KEYS_HEAD(kc_conv2d_opts),
    KC_KEY_NULL("activity_regularizer", KC_F_W),
    KC_WEIGHTED_KEYS_TAIL,
};
#undef O

const kc_layer_ops kc__conv2d_ops = {
    .class_name = "Conv2D",
    .alias = "Convolution2D",
    .snake_name = "conv2d",
    .cfg_size = sizeof(conv_cfg),
    .opts_size = sizeof(kc_conv2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_CONV2D) | KC_OP_BIT(KC_OP_ACTIVATION) | KC_OP_BIT(KC_OP_GEMM) |
                   KC_OP_BIT(KC_OP_DEPTHWISE) | KC_OP_BIT(KC_OP_GROUPED_CONV),
    .backend_desc = conv_backend_desc,
    .init = conv_init,
    .get_opts = conv_get_opts,
    .build = conv_build,
    .aux_bytes = conv_aux_bytes,
    .workspace_bytes = conv_workspace_bytes,
    .forward = conv_forward,
    .backward = conv_backward,
    .dx_adds = conv_dx_adds,
    .flops = conv_flops,
    .activation = conv_activation,
    KC_KERAS_KEYS(k_keras_keys),
};
