/* conv2d_transpose.c — Conv2DTranspose: y = act(conv_transpose(x, kernel) + bias), NHWC,
 * kernel (KH, KW, filters, C) as Keras stores it.
 *
 * The transposed convolution of x is the backward-data pass of the convolution that maps
 * the output y (L_h, L_w, filters) back to x's shape (H, W, C): so the layer runs the
 * backend's conv2d entries with the roles swapped, one descriptor for all three passes
 * (h, w, c = y's size and filters; oh, ow, f = x's size and C):
 *   forward          conv2d_backward_data(x as dy) + bias
 *   backward-data    conv2d_forward(dy as x)
 *   backward-filter  conv2d_backward_filter(dy as x, x as dy)
 * and Keras's kernel (KH, KW, filters, C) is that convolution's HWIO kernel as it is.
 *
 * Sizes are Keras 3's (conv_utils.deconv_output_length and the padding JAX is given):
 * with k' = (k - 1) * dilation + 1,
 *   output_padding None:  valid L = in * s + max(k' - s, 0);  same L = in * s
 *   output_padding p:     L = (in - 1) * s + k' - 2 * (same ? k' / 2 : 0) + p
 * and the convolution's leading padding P = k' - 1 - left, where JAX pads the dilated input
 * left = 0 + (k' - 1) (valid: P = 0) or, for same, left = min(ceil(n / 2), k' - 1) with
 * n = s + k' - 2 (None) or k' + k' % 2 - 2 + p. */
#include <stdio.h>

#include "layer.h"

typedef struct convt_cfg {
    int filters;
    bool use_bias, out_pad_set;
    int out_pad[2];
    kc_act_params act;
    const char *kernel_init, *bias_init; /* static canonical names */
    /* from build: input (h, w, c), output (oh, ow, filters), the convolution's leading pads */
    kc__conv_win g;
} convt_cfg;

static kc_status convt_init(kc_layer *l, const void *opts_) {
    const kc_conv2d_transpose_opts *o = opts_;
    convt_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (o->filters <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: filters must be a positive integer, got %d", L, o->filters);
    c->filters = o->filters;
    KC_TRY(kc__conv_win_init(l, o->kernel_size, o->strides, o->dilation_rate, o->padding, &c->g));
    const int s[2] = {c->g.sh, c->g.sw};
    c->out_pad_set = o->output_padding.set != 0;
    if (c->out_pad_set) {
        for (int i = 0; i < 2; i++) {
            int p = o->output_padding.v[i];
            if (p < 0 || p >= s[i])
                return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                "%s: output_padding (%d, %d) must be >= 0 and less than strides (%d, %d) in each "
                                "dimension, as in Keras",
                                L, o->output_padding.v[0], o->output_padding.v[1], s[0], s[1]);
            c->out_pad[i] = p;
        }
    }
    return kc__parse_weighted(l, o->activation, o->use_bias, o->kernel_initializer, o->bias_initializer, &c->act,
                              &c->use_bias, &c->kernel_init, &c->bias_init);
}

static void convt_get_opts(const kc_layer *l, void *opts_) {
    const convt_cfg *c = l->cfg;
    kc_conv2d_transpose_opts *o = opts_;
    *o = (kc_conv2d_transpose_opts){
        .name = l->name,
        .filters = c->filters,
        KC_CONV_WIN_OPTS(c->g),
        .output_padding = {c->out_pad_set, {c->out_pad[0], c->out_pad[1]}},
        .activation = kc__act_name(&c->act),
        .use_bias = c->use_bias ? KC_TRUE : KC_FALSE,
        .kernel_initializer = c->kernel_init,
        .bias_initializer = c->bias_init,
    };
}

/* Keras's output length of one dimension and the convolution's leading pad (above). */
static void convt_size(int in, int k, int s, int dil, bool same, bool op_set, int op, int *len, int *pad) {
    int ke = (k - 1) * dil + 1;
    if (!op_set) *len = same ? in * s : in * s + KC_MAX(ke - s, 0);
    else *len = (in - 1) * s + ke - 2 * (same ? ke / 2 : 0) + op;
    if (!same) {
        *pad = 0;
        return;
    }
    int n = op_set ? ke + ke % 2 - 2 + op : s + ke - 2;
    *pad = ke - 1 - KC_MIN(n / 2 + n % 2, ke - 1);
}

static kc_status convt_build(kc_layer *l) {
    convt_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->g.h = in->dim[0], c->g.w = in->dim[1], c->g.c = in->dim[2];
    convt_size(c->g.h, c->g.kh, c->g.sh, c->g.dh, c->g.same, c->out_pad_set, c->out_pad[0], &c->g.oh, &c->g.pad_top);
    convt_size(c->g.w, c->g.kw, c->g.sw, c->g.dw, c->g.same, c->out_pad_set, c->out_pad[1], &c->g.ow, &c->g.pad_left);
    if (c->g.oh < 1 || c->g.ow < 1 || (int64_t)c->g.oh * c->g.ow > (1 << 30))
        return kc__fail(KC_STATUS_SHAPE, "%s: input %s gives an output of %d x %d; check kernel_size, strides and "
                        "output_padding", kc__layer_label(l), kc__shape_str(in, true, b, sizeof b), c->g.oh, c->g.ow);
    l->out_shape = kc__shape_make(3, (int[]){c->g.oh, c->g.ow, c->filters});
    /* Keras's fans for a (KH, KW, filters, C) kernel: receptive field x C in, x filters out */
    int64_t rf = (int64_t)c->g.kh * c->g.kw;
    KC_TRY(kc__layer_add_weight(l, "kernel", kc__shape_make(4, (int[]){c->g.kh, c->g.kw, c->filters, c->g.c}), true,
                                c->kernel_init, rf * c->filters, rf * c->g.c));
    if (c->use_bias)
        KC_TRY(kc__layer_add_weight(l, "bias", kc__shape_make(1, (int[]){c->filters}), true, c->bias_init,
                                    rf * c->filters, rf * c->g.c));
    return KC_STATUS_OK;
}

/* The convolution whose backward-data pass this layer is (roles above). */
static kc_conv2d_desc convt_desc(const kc_layer *l, int batch) {
    const convt_cfg *c = l->cfg;
    return (kc_conv2d_desc){.n = batch, .h = c->g.oh, .w = c->g.ow, .c = c->filters, .f = c->g.c, .kh = c->g.kh,
                            .kw = c->g.kw, .sh = c->g.sh, .sw = c->g.sw, .dh = c->g.dh, .dw = c->g.dw,
                            .pad_top = c->g.pad_top, .pad_left = c->g.pad_left, .oh = c->g.h, .ow = c->g.w, .relu = 0};
}

static void convt_backend_desc(const kc_layer *l, int batch, void *desc) {
    *(kc_conv2d_desc *)desc = convt_desc(l, batch);
}

static size_t convt_aux_bytes(const kc_layer *l, int batch) {
    const convt_cfg *c = l->cfg;
    if (!kc__act_needs_input(c->act.kind)) return 0;
    return (size_t)batch * c->g.oh * c->g.ow * c->filters * sizeof(float); /* pre-activation */
}

static size_t convt_workspace_bytes(const kc_layer *l, int batch, kc_backend *be) {
    kc_conv2d_desc d = convt_desc(l, batch);
    return be->conv2d_workspace ? be->conv2d_workspace(be, &d) : 0;
}

static kc_status convt_forward(kc_layer *l, const kc_fwd *a) {
    const convt_cfg *c = l->cfg;
    kc_conv2d_desc d = convt_desc(l, a->batch);
    KC_TRY(a->be->conv2d_backward_data(a->be, &d, a->x[0], l->w[0].data, a->y, a->ws, a->ws_bytes));
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->filters;
    if (c->use_bias) KC_TRY(a->be->bias_add(a->be, a->y, l->w[1].data, n / c->filters, c->filters));
    if (l->defer_act) return KC_STATUS_OK;
    return kc__fused_act_forward(a->be, &c->act, a->y, a->training ? a->aux : NULL, n, c->filters);
}

static kc_status convt_backward(kc_layer *l, const kc_bwd *a) {
    const convt_cfg *c = l->cfg;
    kc_conv2d_desc d = convt_desc(l, a->batch);
    int64_t n = (int64_t)a->batch * c->g.oh * c->g.ow * c->filters;
    if (!l->defer_act) KC_TRY(kc__fused_act_backward(a->be, &c->act, a->aux, a->y, a->dy, n, c->filters));
    if (l->w[0].grad)
        KC_TRY(a->be->conv2d_backward_filter(a->be, &d, a->dy, a->x[0], l->w[0].grad, NULL, a->ws, a->ws_bytes));
    if (c->use_bias && l->w[1].grad) KC_TRY(a->be->bias_grad(a->be, a->dy, l->w[1].grad, n / c->filters, c->filters));
    if (a->dx[0]) KC_TRY(a->be->conv2d_forward(a->be, &d, a->dy, l->w[0].data, NULL, a->dx[0], a->ws, a->ws_bytes));
    return KC_STATUS_OK;
}

static kc_act_params convt_activation(const kc_layer *l) { return ((const convt_cfg *)l->cfg)->act; }

static int64_t convt_flops(const kc_layer *l) {
    const convt_cfg *c = l->cfg; /* every input value times every kernel tap and filter */
    return 2 * (int64_t)c->g.h * c->g.w * c->g.c * c->g.kh * c->g.kw * c->filters;
}

/* The Keras config keys, in Keras 3's order. tf-keras (a Conv2D subclass there) also writes
 * groups, always 1: read, never written, since Keras 3 refuses it (as DepthwiseConv2D's). */
#define O(member) offsetof(kc_conv2d_transpose_opts, member)
static const kc__field k_keras_keys[] = {
    {"filters", KC_F_INT, KC_F_W, O(filters), NULL, 0},
    KC_CONV_WINDOW_KEYS(kc_conv2d_transpose_opts,
                        {"output_padding", KC_F_OPT_INT2, KC_F_W, O(output_padding), NULL, 0},),
    KC_KEY_FIXED("groups", "1", 0),
    KC_WEIGHTED_KEYS_HEAD(kc_conv2d_transpose_opts),
    KC_KEY_NULL("activity_regularizer", KC_F_W),
    KC_WEIGHTED_KEYS_TAIL,
};
#undef O

const kc_layer_ops kc__conv2d_transpose_ops = {
    .class_name = "Conv2DTranspose",
    .alias = "Convolution2DTranspose",
    .snake_name = "conv2d_transpose",
    .cfg_size = sizeof(convt_cfg),
    .opts_size = sizeof(kc_conv2d_transpose_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_CONV2D) | KC_OP_BIT(KC_OP_ACTIVATION) | KC_OP_BIT(KC_OP_GEMM),
    .backend_desc = convt_backend_desc,
    .init = convt_init,
    .get_opts = convt_get_opts,
    .build = convt_build,
    .aux_bytes = convt_aux_bytes,
    .workspace_bytes = convt_workspace_bytes,
    .forward = convt_forward,
    .backward = convt_backward,
    .flops = convt_flops,
    .activation = convt_activation,
    KC_KERAS_KEYS(k_keras_keys),
};
