/* common.c — helpers every layer file uses: labels for messages, weight declaration,
 * padding names, TensorFlow's convolution output sizes, the fused activation. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "layer.h"

const char *kc__layer_label(const kc_layer *l) {
    static _Thread_local char buf[4][KC_NAME_MAX + 48];
    static _Thread_local int next;
    char *b = buf[next];
    next = (next + 1) % 4;
    const char *cls = (l && l->ops) ? l->ops->class_name : "layer";
    if (l && l->name[0])
        snprintf(b, sizeof buf[0], "%s '%s'", cls, l->name);
    else
        snprintf(b, sizeof buf[0], "%s", cls);
    return b;
}

kc_status kc__layer_add_weight(kc_layer *l, const char *name, kc_shape shape, bool trainable,
                               const char *init, int64_t fan_in, int64_t fan_out) {
    if (l->n_weights >= KC_MAX_WEIGHTS)
        return kc__fail(KC_STATUS_INTERNAL, "%s: cannot declare weight '%s': a layer holds at most %d weights",
                        kc__layer_label(l), name, KC_MAX_WEIGHTS);
    if (!name || strlen(name) >= sizeof l->w[0].name)
        return kc__fail(KC_STATUS_INTERNAL, "%s: weight name '%s' is empty or too long", kc__layer_label(l),
                        name ? name : "(null)");
    /* "const:VALUE": a constant the layer sets itself (LayerScale's init_values) */
    const char *canon = init && strncmp(init, KC_INIT_CONST, strlen(KC_INIT_CONST)) == 0 ? init
                                                                                          : kc__init_canonical(init);
    if (!canon)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: weight '%s' has an unknown initializer '%s'",
                        kc__layer_label(l), name, init ? init : "(null)");
    int64_t size = kc__shape_size(&shape);
    if (shape.rank < 0 || size <= 0)
        return kc__fail(KC_STATUS_SHAPE, "%s: weight '%s' would be empty; check the layer's input shape",
                        kc__layer_label(l), name);
    kc_weight *w = &l->w[l->n_weights++];
    memset(w, 0, sizeof *w);
    snprintf(w->name, sizeof w->name, "%s", name);
    w->init = canon;
    w->shape = shape;
    w->size = size;
    w->trainable = trainable;
    w->fan_in = fan_in;
    w->fan_out = fan_out;
    return KC_STATUS_OK;
}

kc_status kc__padding_parse(const kc_layer *l, const char *padding, bool *same) {
    if (!padding || !padding[0] || strcasecmp(padding, "valid") == 0) {
        *same = false;
        return KC_STATUS_OK;
    }
    if (strcasecmp(padding, "same") == 0) {
        *same = true;
        return KC_STATUS_OK;
    }
    if (strcasecmp(padding, "causal") == 0)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: padding 'causal' is only for Conv1D; use valid or same",
                        kc__layer_label(l));
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: padding '%s' is not one of valid, same", kc__layer_label(l),
                    padding);
}

void kc__conv_out_size(int in, int k, int stride, int dilation, bool same, int *out, int *pad_before) {
    if (stride < 1) stride = 1;
    if (dilation < 1) dilation = 1;
    int ek = (k - 1) * dilation + 1; /* effective kernel extent */
    int o, pb = 0;
    if (same) {
        o = (in + stride - 1) / stride;
        int total = (o - 1) * stride + ek - in;
        if (total < 0) total = 0;
        pb = total / 2;
    } else {
        o = in >= ek ? (in - ek) / stride + 1 : 0;
    }
    if (out) *out = o;
    if (pad_before) *pad_before = pb;
}

kc_status kc__fused_act_forward(kc_backend *be, const kc_act_params *a, float *y, float *pre, int64_t n,
                                int cols) {
    if (a->kind == KC_ACT_LINEAR) return KC_STATUS_OK;
    if (kc__act_needs_input(a->kind) && pre) /* kept for the backward (pre is NULL outside training) */
        KC_TRY(be->copy(be, pre, y, (size_t)n * sizeof(float)));
    return be->act_forward(be, *a, y, y, n, cols);
}

kc_status kc__fused_act_backward(kc_backend *be, const kc_act_params *a, const float *pre, const float *y,
                                 float *dy, int64_t n, int cols) {
    if (a->kind == KC_ACT_LINEAR) return KC_STATUS_OK;
    return be->act_backward(be, *a, kc__act_needs_input(a->kind) ? pre : NULL, y, dy, dy, n, cols);
}

kc_status kc__parse_weighted(const kc_layer *l, const char *activation, int use_bias, const char *kernel_init,
                             const char *bias_init, kc_act_params *act, bool *bias, const char **kinit,
                             const char **binit) {
    const char *L = kc__layer_label(l);
    kc_status st = kc__act_parse(activation, act);
    if (st) return kc__wrap(st, "%s: ", L);
    *bias = kc__bool3(use_bias, true);
    *kinit = kc__init_canonical(kernel_init ? kernel_init : "glorot_uniform");
    if (!*kinit)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: kernel_initializer '%s' is not supported; use one of %s", L,
                        kernel_init, kc__init_supported);
    *binit = kc__init_canonical(bias_init ? bias_init : "zeros");
    if (!*binit)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: bias_initializer '%s' is not supported; use one of %s", L,
                        bias_init, kc__init_supported);
    return KC_STATUS_OK;
}

/* Standalone activation layers (Activation, ReLU, Softmax): y = act(x) over `size` values
 * per example in rows of `cols`; a copy when linear or when the model folded the
 * activation into the loss (defer_act). */
kc_status kc__act_layer_build(kc_layer *l) {
    kc__act_layer_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    l->out_shape = *in;
    c->size = kc__shape_size(in);
    c->cols = in->rank ? in->dim[in->rank - 1] : 1;
    return KC_STATUS_OK;
}

kc_status kc__act_layer_forward(kc_layer *l, const kc_fwd *a) {
    const kc__act_layer_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    if (c->act.kind == KC_ACT_LINEAR || l->defer_act)
        return a->y == a->x[0] ? KC_STATUS_OK : a->be->copy(a->be, a->y, a->x[0], (size_t)n * sizeof(float));
    return a->be->act_forward(a->be, c->act, a->x[0], a->y, n, c->cols);
}

kc_status kc__act_layer_backward(kc_layer *l, const kc_bwd *a) {
    const kc__act_layer_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    int64_t n = (int64_t)a->batch * c->size;
    if (c->act.kind == KC_ACT_LINEAR || l->defer_act)
        return a->dx[0] == a->dy ? KC_STATUS_OK : a->be->copy(a->be, a->dx[0], a->dy, (size_t)n * sizeof(float));
    return a->be->act_backward(a->be, c->act, a->x[0], a->y, a->dy, a->dx[0], n, c->cols);
}

int64_t kc__act_layer_flops(const kc_layer *l) {
    const kc__act_layer_cfg *c = l->cfg;
    return c->size * kc__act_flops(c->act.kind);
}

kc_act_params kc__act_layer_activation(const kc_layer *l) { return ((const kc__act_layer_cfg *)l->cfg)->act; }

/* Keras accepts an int for a pair: {3} (the second zero) means (3, 3); {0, 0} is `def`. */
static void int_pair(const int in[2], int def, int out[2]) {
    if (in[0] == 0 && in[1] == 0) out[0] = out[1] = def;
    else if (in[1] == 0) out[0] = out[1] = in[0];
    else out[0] = in[0], out[1] = in[1];
}

kc_status kc__conv_win_init(const kc_layer *l, const int kernel_size[2], const int strides[2],
                            const int dilation_rate[2], const char *padding, kc__conv_win *g) {
    const char *L = kc__layer_label(l);
    int k[2], s[2], d[2];
    if (kernel_size[0] == 0 && kernel_size[1] == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: kernel_size is required, e.g. .kernel_size = {3, 3}", L);
    int_pair(kernel_size, 0, k);
    if (k[0] <= 0 || k[1] <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: kernel_size must be positive, got (%d, %d)", L,
                        kernel_size[0], kernel_size[1]);
    int_pair(strides, 1, s);
    if (s[0] <= 0 || s[1] <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: strides must be positive, got (%d, %d)", L, strides[0],
                        strides[1]);
    int_pair(dilation_rate, 1, d);
    if (d[0] <= 0 || d[1] <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: dilation_rate must be positive, got (%d, %d)", L,
                        dilation_rate[0], dilation_rate[1]);
    if ((s[0] > 1 || s[1] > 1) && (d[0] > 1 || d[1] > 1))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: strides (%d, %d) > 1 together with dilation_rate (%d, %d) > 1 is not allowed (as in Keras); "
                        "use one of them",
                        L, s[0], s[1], d[0], d[1]);
    *g = (kc__conv_win){.kh = k[0], .kw = k[1], .sh = s[0], .sw = s[1], .dh = d[0], .dw = d[1]};
    return kc__padding_parse(l, padding, &g->same);
}

kc_status kc__layer_need_hwc(const kc_layer *l) {
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    if (in->rank != 3)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects input (H, W, C), got %s; add a Reshape or check input_shape",
                        kc__layer_label(l), kc__shape_str(in, true, b, sizeof b));
    return KC_STATUS_OK;
}

kc_status kc__conv_win_build(const kc_layer *l, kc__conv_win *g) {
    const kc_shape *in = &l->in_shape[0];
    char b1[96];
    KC_TRY(kc__layer_need_hwc(l));
    g->h = in->dim[0], g->w = in->dim[1], g->c = in->dim[2];
    kc__conv_out_size(g->h, g->kh, g->sh, g->dh, g->same, &g->oh, &g->pad_top);
    kc__conv_out_size(g->w, g->kw, g->sw, g->dw, g->same, &g->ow, &g->pad_left);
    if (g->oh < 1 || g->ow < 1)
        return kc__fail(KC_STATUS_SHAPE,
                        "%s: input %s is smaller than the kernel (%d, %d) with dilation (%d, %d) and padding 'valid'; "
                        "use padding 'same', a smaller kernel or a larger input",
                        kc__layer_label(l), kc__shape_str(in, true, b1, sizeof b1), g->kh, g->kw, g->dh, g->dw);
    return KC_STATUS_OK;
}

kc_conv2d_desc kc__conv_win_desc(const kc__conv_win *g, int batch, int f, bool relu) {
    return (kc_conv2d_desc){.n = batch, .h = g->h, .w = g->w, .c = g->c, .f = f, .kh = g->kh, .kw = g->kw,
                            .sh = g->sh, .sw = g->sw, .dh = g->dh, .dw = g->dw, .pad_top = g->pad_top,
                            .pad_left = g->pad_left, .oh = g->oh, .ow = g->ow, .relu = relu};
}
