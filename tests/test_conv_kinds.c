/* test_conv_kinds.c — Conv2D with groups, SeparableConv2D and Conv2DTranspose against plain
 * references written here (direct loops in double, from Keras's definitions):
 *   - the CPU backend's grouped kernels (cpu_conv_grouped.c): y, dx, dw, db for every option;
 *   - each layer's prediction through a model (weights set from random data), so the layer's
 *     routing (Conv2D groups == channels runs the depthwise kernels), its descriptors and
 *     Keras's output sizes are checked: Conv2DTranspose's reference is JAX's formulation
 *     (the input dilated by the strides, padded by Keras 3's rule, convolved with the
 *     flipped kernel), not the backward-data identity the layer uses;
 *   - shapes, weights in Keras's order and shapes, FLOPs, option errors naming the layer and
 *     option, and the JSON keys (groups, output_padding null or a pair, the pointwise
 *     initializer) in both flavours;
 *   - the workspace of the depthwise and grouped entries: planned by the model from their
 *     *_workspace queries and handed to every call, apart from the data the layers keep. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "kerac.h"
#include "layers/layer.h"
#include "model/model.h"

static kc_backend *B;

static void fill(kc_rng *g, float *a, int64_t n, double lo, double hi) {
    for (int64_t i = 0; i < n; i++) a[i] = (float)(lo + (hi - lo) * kc__rng_uniform(g));
}

static void close_to(const char *what, const char *name, const float *got, const double *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(got[i] - want[i]) <= 1e-4 * (1.0 + fabs(want[i]))))
            fail_msg("%s %s[%lld] = %.7g, reference %.7g", what, name, (long long)i, got[i], want[i]);
}

/* ---------------------------------------------------------------- grouped kernels */

static kc_conv2d_desc gdesc(int n, int h, int w, int c, int f, int kh, int kw, int sh, int sw, int dh, int dw,
                            bool same) {
    kc_conv2d_desc d = {.n = n, .h = h, .w = w, .c = c, .f = f, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .dh = dh,
                        .dw = dw};
    kc__conv_out_size(h, kh, sh, dh, same, &d.oh, &d.pad_top);
    kc__conv_out_size(w, kw, sw, dw, same, &d.ow, &d.pad_left);
    return d;
}

/* y[n,oy,ox,k] = b[k] + sum_{r,s,ci} x[n,iy,ix,g*CG+ci] w[r,s,ci,k], g = k / FG; and the
 * gradients of sum(y * dy). */
static void grouped_ref(const kc_conv2d_desc *d, int groups, const float *x, const float *w, const float *b,
                        const float *dy, double *y, double *dx, double *dw, double *db) {
    const int cg = d->c / groups, fg = d->f / groups;
    if (dx) memset(dx, 0, sizeof(double) * (size_t)d->n * d->h * d->w * d->c);
    if (dw) memset(dw, 0, sizeof(double) * (size_t)d->kh * d->kw * cg * d->f);
    if (db) memset(db, 0, sizeof(double) * (size_t)d->f);
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int k = 0; k < d->f; k++) {
                    int64_t o = (((int64_t)n * d->oh + oy) * d->ow + ox) * d->f + k;
                    double acc = b ? b[k] : 0.0;
                    if (db) db[k] += dy[o];
                    for (int r = 0; r < d->kh; r++)
                        for (int s = 0; s < d->kw; s++) {
                            int iy = oy * d->sh - d->pad_top + r * d->dh, ix = ox * d->sw - d->pad_left + s * d->dw;
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                            for (int ci = 0; ci < cg; ci++) {
                                int64_t xi = (((int64_t)n * d->h + iy) * d->w + ix) * d->c + (k / fg) * cg + ci;
                                int64_t wi = (((int64_t)r * d->kw + s) * cg + ci) * d->f + k;
                                acc += (double)x[xi] * w[wi];
                                if (dx) dx[xi] += (double)dy[o] * w[wi];
                                if (dw) dw[wi] += (double)dy[o] * x[xi];
                            }
                        }
                    y[o] = d->relu && acc < 0 ? 0.0 : acc;
                }
}

static void grouped_case(const char *what, kc_conv2d_desc d, int groups, bool bias) {
    kc_rng g;
    kc__rng_seed(&g, 7);
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * (d.c / groups) * d.f;
    float *x = malloc(xn * sizeof(float)), *w = malloc(wn * sizeof(float)), *b = malloc(d.f * sizeof(float));
    float *dy = malloc(yn * sizeof(float)), *y = malloc(yn * sizeof(float)), *dx = malloc(xn * sizeof(float));
    float *dw = malloc(wn * sizeof(float)), *db = malloc(d.f * sizeof(float));
    double *ry = malloc(yn * sizeof(double)), *rdx = malloc(xn * sizeof(double)), *rdw = malloc(wn * sizeof(double));
    double *rdb = malloc(d.f * sizeof(double));
    assert_true(x && w && b && dy && y && dx && dw && db && ry && rdx && rdw && rdb);
    fill(&g, x, xn, -1, 1), fill(&g, w, wn, -0.5, 0.5), fill(&g, b, d.f, -0.5, 0.5), fill(&g, dy, yn, -1, 1);
    grouped_ref(&d, groups, x, w, bias ? b : NULL, dy, ry, rdx, rdw, rdb);
    for (int64_t i = 0; i < xn; i++) dx[i] = NAN; /* everything must be overwritten */
    for (int64_t i = 0; i < wn; i++) dw[i] = NAN;
    for (int i = 0; i < d.f; i++) db[i] = NAN;
    if (B->grouped_conv_forward(B, &d, groups, x, w, bias ? b : NULL, y, NULL, 0) != KC_STATUS_OK)
        fail_msg("%s: %s", what, kc_last_error());
    assert_int_equal(B->grouped_conv_backward_data(B, &d, groups, dy, w, dx, NULL, 0), KC_STATUS_OK);
    assert_int_equal(B->grouped_conv_backward_filter(B, &d, groups, x, dy, dw, bias ? db : NULL, NULL, 0), KC_STATUS_OK);
    close_to(what, "y", y, ry, yn);
    close_to(what, "dx", dx, rdx, xn);
    close_to(what, "dw", dw, rdw, wn);
    if (bias) close_to(what, "db", db, rdb, d.f);
    else
        for (int i = 0; i < d.f; i++) assert_true(isnan(db[i])); /* db NULL: untouched */
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(ry), free(rdx), free(rdw), free(rdb);
}

static void test_grouped_kernels(void **state) {
    (void)state;
    grouped_case("2 groups 3x3 valid", gdesc(2, 7, 6, 4, 6, 3, 3, 1, 1, 1, 1, false), 2, true);
    grouped_case("3 groups 3x3 same", gdesc(2, 6, 7, 6, 9, 3, 3, 1, 1, 1, 1, true), 3, true);
    grouped_case("2 groups stride 2 same, even input", gdesc(2, 8, 8, 4, 4, 3, 3, 2, 2, 1, 1, true), 2, false);
    grouped_case("4 groups 5x3 stride (2, 1)", gdesc(1, 9, 7, 8, 8, 5, 3, 2, 1, 1, 1, false), 4, true);
    grouped_case("2 groups dilation (2, 3) same", gdesc(2, 8, 10, 4, 6, 3, 3, 1, 1, 2, 3, true), 2, true);
    grouped_case("groups 1 (a dense convolution)", gdesc(1, 5, 5, 3, 4, 3, 3, 1, 1, 1, 1, true), 1, true);
    grouped_case("groups = channels, 2 filters each", gdesc(2, 5, 5, 3, 6, 3, 3, 1, 1, 1, 1, true), 3, true);
    kc_conv2d_desc r = gdesc(2, 6, 6, 4, 8, 3, 3, 1, 1, 1, 1, true);
    r.relu = 1;
    grouped_case("fused relu", r, 2, true);
    /* past the parallel threshold, filter blocks of 64 and more than one channel block */
    grouped_case("ResNeXt-like 14x14x64, 8 groups", gdesc(2, 14, 14, 64, 64, 3, 3, 1, 1, 1, 1, true), 8, true);
    grouped_case("2 groups of 130 filters", gdesc(1, 6, 6, 4, 260, 3, 3, 1, 1, 1, 1, true), 2, true);
    grouped_case("one group of 200 channels x 40 filters", gdesc(1, 4, 4, 200, 40, 1, 1, 1, 1, 1, 1, false), 1,
                 false);
}

static void test_grouped_errors(void **state) {
    (void)state;
    float v[256] = {0};
    kc_conv2d_desc d = gdesc(1, 4, 4, 4, 6, 3, 3, 1, 1, 1, 1, false);
    assert_int_equal(B->grouped_conv_forward(B, &d, 4, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT); /* 6 % 4 */
    assert_non_null(strstr(kc_last_error(), "multiples of the groups"));
    assert_int_equal(B->grouped_conv_forward(B, &d, 0, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->grouped_conv_backward_data(B, &d, 2, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->grouped_conv_backward_filter(B, &d, 2, v, v, NULL, NULL, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->grouped_conv_forward(B, NULL, 2, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------------- layers through a model */

/* Every weight of m uniform in [-0.5, 0.5). */
static void set_random_weights(kc_model *m, kc_rng *g) {
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(m, i, &wi), KC_STATUS_OK);
        float *v = malloc((size_t)wi.size * sizeof(float));
        fill(g, v, wi.size, -0.5, 0.5);
        assert_int_equal(kc_model_set_weight(m, i, v, wi.size), KC_STATUS_OK);
        free(v);
    }
}

/* One layer on an input of shape (h, w, c): random weights set, predictions on n examples;
 * returns the model (the caller reads weights back) and the output in *y. */
static kc_model *run_layer(const kc_layer_spec *spec, int n, int h, int w, int c, float **x_out, float **y_out,
                           int *out_hwc) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("t", &m), KC_STATUS_OK);
    kc_node in = kc_input(m, KC_INPUT(.shape = {h, w, c}));
    kc_node o = kc_apply(m, spec, in);
    assert_int_equal(kc_set_output(m, o), KC_STATUS_OK);
    if (kc_model_build(m) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
    kc_rng g;
    kc__rng_seed(&g, 11);
    set_random_weights(m, &g);
    kc_layer_info li;
    assert_int_equal(kc_model_layer_info(m, 1, &li), KC_STATUS_OK);
    for (int i = 0; i < 3; i++) out_hwc[i] = li.output_shape.dim[i];
    int64_t xn = (int64_t)n * h * w * c, yn = (int64_t)n * out_hwc[0] * out_hwc[1] * out_hwc[2];
    float *x = malloc(xn * sizeof(float)), *y = malloc(yn * sizeof(float));
    fill(&g, x, xn, -1, 1);
    if (kc_predict(m, x, n, 2, y) != KC_STATUS_OK) fail_msg("predict: %s", kc_last_error());
    *x_out = x, *y_out = y;
    return m;
}

static float *weight(kc_model *m, int i) {
    kc_weight_info wi;
    assert_int_equal(kc_model_weight_info(m, i, &wi), KC_STATUS_OK);
    float *v = malloc((size_t)wi.size * sizeof(float));
    assert_int_equal(kc_model_get_weight(m, i, v, wi.size), KC_STATUS_OK);
    return v;
}

static void conv_groups_case(const char *what, int groups, int filters, int c, int k, int stride, int dil,
                             const char *pad, const char *act) {
    float *x, *y;
    int o[3];
    kc_model *m = run_layer(KC_CONV2D(.filters = filters, .kernel_size = {k, k}, .strides = {stride, stride},
                                      .dilation_rate = {dil, dil}, .padding = pad, .groups = groups,
                                      .activation = act),
                            3, 7, 8, c, &x, &y, o);
    kc_weight_info wi;
    assert_int_equal(kc_model_weight_info(m, 0, &wi), KC_STATUS_OK);
    assert_int_equal(wi.shape.dim[2], c / groups); /* Keras's (kh, kw, C / groups, filters) */
    assert_int_equal(wi.shape.dim[3], filters);
    float *w = weight(m, 0), *b = weight(m, 1);
    kc_conv2d_desc d = gdesc(3, 7, 8, c, filters, k, k, stride, stride, dil, dil, !strcmp(pad, "same"));
    d.relu = !strcmp(act, "relu");
    int64_t yn = (int64_t)3 * o[0] * o[1] * o[2];
    assert_int_equal(o[0], d.oh), assert_int_equal(o[1], d.ow);
    double *ry = malloc(yn * sizeof(double));
    grouped_ref(&d, groups, x, w, b, y /* unused dy */, ry, NULL, NULL, NULL);
    close_to(what, "y", y, ry, yn);
    free(ry), free(w), free(b), free(x), free(y);
    kc_model_destroy(m);
}

static void test_conv2d_groups(void **state) {
    (void)state;
    conv_groups_case("groups 1", 1, 4, 3, 3, 1, 1, "same", "linear");
    conv_groups_case("groups 2 stride 2", 2, 6, 4, 3, 2, 1, "valid", "relu");
    conv_groups_case("groups 3 dilation 2", 3, 6, 6, 3, 1, 2, "same", "linear");
    conv_groups_case("groups = channels (depthwise route), 7x7", 5, 5, 5, 7, 1, 1, "same", "linear");
    conv_groups_case("groups = channels, 2 filters each, relu", 4, 8, 4, 3, 1, 1, "same", "relu");
}

/* Conv2DTranspose by JAX's formulation (keras/src/backend/jax/nn.py): out length from
 * deconv_output_length, the input dilated by the strides and padded by (left, right), a
 * stride-1 convolution with the spatially flipped kernel (kh, kw, filters, C). */
static int tr_len(int in, int k, int s, int d, bool same, int op, int *left) {
    int ke = (k - 1) * d + 1;
    int len;
    if (op < 0) len = same ? in * s : in * s + (ke - s > 0 ? ke - s : 0);
    else len = (in - 1) * s + ke - 2 * (same ? ke / 2 : 0) + op;
    if (!same) *left = ke - 1;
    else {
        int pl = op < 0 ? s + ke - 2 : ke + ke % 2 - 2 + op;
        *left = pl / 2 + pl % 2 < ke - 1 ? pl / 2 + pl % 2 : ke - 1;
    }
    return len;
}

static void transpose_ref(int n, int h, int w, int c, int f, int kh, int kw, int s[2], int d[2], bool same,
                          int op[2], const float *x, const float *k, const float *b, double *y, int *lh, int *lw) {
    int left_h, left_w;
    *lh = tr_len(h, kh, s[0], d[0], same, op[0], &left_h);
    *lw = tr_len(w, kw, s[1], d[1], same, op[1], &left_w);
    for (int ni = 0; ni < n; ni++)
        for (int p = 0; p < *lh; p++)
            for (int q = 0; q < *lw; q++)
                for (int fo = 0; fo < f; fo++) {
                    double acc = b ? b[fo] : 0.0;
                    for (int i = 0; i < kh; i++)
                        for (int j = 0; j < kw; j++) {
                            int ty = p + i * d[0] - left_h, tx = q + j * d[1] - left_w;
                            if (ty < 0 || tx < 0 || ty % s[0] || tx % s[1] || ty / s[0] >= h || tx / s[1] >= w)
                                continue;
                            const float *xp = x + (((int64_t)ni * h + ty / s[0]) * w + tx / s[1]) * c;
                            const float *kp = k + (((int64_t)(kh - 1 - i) * kw + (kw - 1 - j)) * f + fo) * c;
                            for (int ci = 0; ci < c; ci++) acc += (double)xp[ci] * kp[ci];
                        }
                    y[(((int64_t)ni * *lh + p) * *lw + q) * f + fo] = acc;
                }
}

static void transpose_case(const char *what, int k0, int k1, int s0, int s1, int d0, const char *pad, int op0,
                           int op1) {
    float *x, *y;
    int o[3];
    const int h = 5, w = 4, c = 3, f = 2, n = 3;
    kc_opt_int2 op = {op0 >= 0, {op0 >= 0 ? op0 : 0, op1 >= 0 ? op1 : 0}};
    kc_model *m = run_layer(KC_CONV2D_TRANSPOSE(.filters = f, .kernel_size = {k0, k1}, .strides = {s0, s1},
                                                .dilation_rate = {d0, d0}, .padding = pad, .output_padding = op),
                            n, h, w, c, &x, &y, o);
    kc_weight_info wi;
    assert_int_equal(kc_model_weight_info(m, 0, &wi), KC_STATUS_OK);
    assert_int_equal(wi.shape.dim[2], f); /* Keras's (kh, kw, filters, C) */
    assert_int_equal(wi.shape.dim[3], c);
    float *kw = weight(m, 0), *b = weight(m, 1);
    int lh, lw;
    double *ry = malloc((size_t)n * o[0] * o[1] * f * sizeof(double) + 1024 * sizeof(double));
    transpose_ref(n, h, w, c, f, k0, k1, (int[]){s0, s1}, (int[]){d0, d0}, !strcmp(pad, "same"), (int[]){op0, op1}, x,
                  kw, b, ry, &lh, &lw);
    if (o[0] != lh || o[1] != lw) fail_msg("%s: output %dx%d, Keras's %dx%d", what, o[0], o[1], lh, lw);
    close_to(what, "y", y, ry, (int64_t)n * lh * lw * f);
    free(ry), free(kw), free(b), free(x), free(y);
    kc_model_destroy(m);
}

static void test_conv2d_transpose(void **state) {
    (void)state;
    transpose_case("3x3 stride 2 same", 3, 3, 2, 2, 1, "same", -1, -1);
    transpose_case("3x3 stride 2 valid", 3, 3, 2, 2, 1, "valid", -1, -1);
    transpose_case("2x2 stride 2 valid (U-Net)", 2, 2, 2, 2, 1, "valid", -1, -1);
    transpose_case("4x4 stride 2 same", 4, 4, 2, 2, 1, "same", -1, -1);
    transpose_case("3x3 stride 1 same", 3, 3, 1, 1, 1, "same", -1, -1);
    transpose_case("stride 3 > kernel 2, valid", 2, 2, 3, 3, 1, "valid", -1, -1);
    transpose_case("3x3 stride 2 same output_padding 1", 3, 3, 2, 2, 1, "same", 1, 1);
    transpose_case("3x3 stride 2 same output_padding 0", 3, 3, 2, 2, 1, "same", 0, 0);
    transpose_case("3x2 stride (2, 3) valid output_padding (1, 2)", 3, 2, 2, 3, 1, "valid", 1, 2);
    transpose_case("4x4 stride 2 same output_padding (0, 1)", 4, 4, 2, 2, 1, "same", 0, 1);
    transpose_case("dilation 2 same", 3, 3, 1, 1, 2, "same", -1, -1);
    transpose_case("dilation 2 valid", 3, 2, 1, 1, 2, "valid", -1, -1);
}

static void test_separable(void **state) {
    (void)state;
    struct {
        int k, s, dil, mult;
        const char *pad;
    } cs[] = {{3, 1, 1, 1, "same"}, {3, 2, 1, 2, "valid"}, {3, 1, 2, 1, "same"}, {2, 2, 1, 3, "same"}};
    for (size_t ci = 0; ci < sizeof cs / sizeof cs[0]; ci++) {
        float *x, *y;
        int o[3];
        const int n = 2, h = 7, w = 6, c = 3, f = 4;
        kc_model *m = run_layer(KC_SEPARABLE_CONV2D(.filters = f, .kernel_size = {cs[ci].k, cs[ci].k},
                                                    .strides = {cs[ci].s, cs[ci].s},
                                                    .dilation_rate = {cs[ci].dil, cs[ci].dil},
                                                    .depth_multiplier = cs[ci].mult, .padding = cs[ci].pad),
                                n, h, w, c, &x, &y, o);
        const char *names[] = {"depthwise_kernel", "pointwise_kernel", "bias"};
        for (int i = 0; i < 3; i++) {
            kc_weight_info wi;
            assert_int_equal(kc_model_weight_info(m, i, &wi), KC_STATUS_OK);
            assert_non_null(strstr(wi.name, names[i]));
        }
        float *dk = weight(m, 0), *pk = weight(m, 1), *b = weight(m, 2);
        /* depthwise = grouped with groups = C, then pointwise = a 1x1 convolution */
        kc_conv2d_desc d = gdesc(n, h, w, c, c * cs[ci].mult, cs[ci].k, cs[ci].k, cs[ci].s, cs[ci].s, cs[ci].dil,
                                 cs[ci].dil, !strcmp(cs[ci].pad, "same"));
        int64_t tn = (int64_t)n * d.oh * d.ow * d.f;
        double *t = malloc(tn * sizeof(double)), *ry = malloc((size_t)n * d.oh * d.ow * f * sizeof(double));
        float *tf = malloc(tn * sizeof(float));
        grouped_ref(&d, c, x, dk, NULL, x, t, NULL, NULL, NULL);
        for (int64_t i = 0; i < tn; i++) tf[i] = (float)t[i];
        kc_conv2d_desc p = gdesc(n, d.oh, d.ow, d.f, f, 1, 1, 1, 1, 1, 1, false);
        grouped_ref(&p, 1, tf, pk, b, tf, ry, NULL, NULL, NULL);
        assert_int_equal(o[0], d.oh), assert_int_equal(o[1], d.ow), assert_int_equal(o[2], f);
        close_to("separable", "y", y, ry, (int64_t)n * d.oh * d.ow * f);
        free(t), free(ry), free(tf), free(dk), free(pk), free(b), free(x), free(y);
        kc_model_destroy(m);
    }
}

/* ---------------------------------------------------------------- the planned workspace */

/* The CPU backend with depthwise and grouped entries that ask for a workspace, as cuDNN's
 * do (an amount that grows with the batch), and check that each call gets at least that
 * from the plan; they then overwrite all of it, so a workspace that overlapped anything
 * the layer keeps (SeparableConv2D's t and its gradient) would change the results. */
enum { WS_DW_FWD, WS_DW_DATA, WS_DW_FILTER, WS_GC_FWD, WS_GC_DATA, WS_GC_FILTER };
static struct {
    kc_backend *inner;
    unsigned called; /* bit per entry above */
} WS;

static size_t ws_ask(const kc_conv2d_desc *d) { return 4096 + (size_t)d->n * d->f * 16; }
/* depthwise: at least what the CPU asks (its backward-filter's partial sums), handed on to it */
static size_t ws_dw_ask(const kc_conv2d_desc *d) {
    return KC_MAX(ws_ask(d), WS.inner->depthwise_workspace(WS.inner, d));
}
static size_t ws_dw_workspace(kc_backend *be, const kc_conv2d_desc *d) { return (void)be, ws_dw_ask(d); }
static size_t ws_gc_workspace(kc_backend *be, const kc_conv2d_desc *d, int groups) {
    return (void)be, (void)groups, ws_ask(d);
}

static kc_status ws_take(int entry, const kc_conv2d_desc *d, void *ws, size_t ws_bytes) {
    WS.called |= 1u << entry;
    const size_t ask = entry <= WS_DW_FILTER ? ws_dw_ask(d) : ws_ask(d);
    if (!ws || ws_bytes < ask)
        return kc__fail(KC_STATUS_INTERNAL, "entry %d got %zu bytes of workspace at %p, asked %zu", entry, ws_bytes,
                        ws, ask);
    memset(ws, 0x7f, ws_bytes);
    return KC_STATUS_OK;
}

static kc_status ws_dw_fwd(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w, const float *b,
                           float *y, void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_DW_FWD, d, ws, wsb));
    return WS.inner->depthwise_forward(be, d, x, w, b, y, NULL, 0);
}
static kc_status ws_dw_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w, float *dx,
                            void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_DW_DATA, d, ws, wsb));
    return WS.inner->depthwise_backward_data(be, d, dy, w, dx, NULL, 0);
}
static kc_status ws_dw_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy, float *dw,
                              float *db, void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_DW_FILTER, d, ws, wsb)); /* scribbled over: the CPU must not read what is there */
    return WS.inner->depthwise_backward_filter(be, d, x, dy, dw, db, ws, WS.inner->depthwise_workspace(WS.inner, d));
}
static kc_status ws_gc_fwd(kc_backend *be, const kc_conv2d_desc *d, int g, const float *x, const float *w,
                           const float *b, float *y, void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_GC_FWD, d, ws, wsb));
    return WS.inner->grouped_conv_forward(be, d, g, x, w, b, y, NULL, 0);
}
static kc_status ws_gc_data(kc_backend *be, const kc_conv2d_desc *d, int g, const float *dy, const float *w,
                            float *dx, void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_GC_DATA, d, ws, wsb));
    return WS.inner->grouped_conv_backward_data(be, d, g, dy, w, dx, NULL, 0);
}
static kc_status ws_gc_filter(kc_backend *be, const kc_conv2d_desc *d, int g, const float *x, const float *dy,
                              float *dw, float *db, void *ws, size_t wsb) {
    KC_TRY(ws_take(WS_GC_FILTER, d, ws, wsb));
    return WS.inner->grouped_conv_backward_filter(be, d, g, x, dy, dw, db, NULL, 0);
}

static void ws_destroy(kc_backend *be) {
    WS.inner->destroy(WS.inner);
    free(be);
}

static kc_backend *ws_backend(void) {
    assert_int_equal(kc_backend_cpu_create(&WS.inner), KC_STATUS_OK);
    kc_backend *be = malloc(sizeof *be);
    *be = *WS.inner; /* the CPU's entries keep its ctx */
    be->destroy = ws_destroy;
    be->depthwise_workspace = ws_dw_workspace;
    be->depthwise_forward = ws_dw_fwd;
    be->depthwise_backward_data = ws_dw_data;
    be->depthwise_backward_filter = ws_dw_filter;
    be->grouped_conv_workspace = ws_gc_workspace;
    be->grouped_conv_forward = ws_gc_fwd;
    be->grouped_conv_backward_data = ws_gc_data;
    be->grouped_conv_backward_filter = ws_gc_filter;
    return be;
}

/* Conv2D with groups = C (the depthwise entries) and 2 groups, DepthwiseConv2D,
 * SeparableConv2D: one epoch of 10 examples in batches of 4 (a short last one of 2),
 * then predict; on the wrapper when ws, else on the plain CPU backend. */
static kc_model *ws_model(bool ws, const float *x, const int32_t *y, float *pred) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("ws", &m), KC_STATUS_OK);
    if (ws) m->be = ws_backend(); /* before the model opens its own */
    kc_add(m, KC_INPUT(.shape = {9, 9, 4}));
    kc_add(m, KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .groups = 4, .padding = "same", .activation = "relu"));
    kc_add(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .groups = 2, .strides = {2, 2}));
    kc_add(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .depth_multiplier = 2, .padding = "same"));
    kc_add(m, KC_SEPARABLE_CONV2D(.filters = 5, .kernel_size = {3, 3}, .padding = "same", .activation = "relu"));
    kc_add(m, KC_FLATTEN());
    assert_int_equal(kc_add(m, KC_DENSE(.units = 3, .activation = "softmax")), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.1)}), KC_STATUS_OK);
    kc_rng g;
    kc__rng_seed(&g, 5);
    set_random_weights(m, &g);
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, 10, (kc_shape){3, {9, 9, 4}}, 3, &d), KC_STATUS_OK);
    kc_fit_opts fo = {.epochs = 1, .batch_size = 4, .shuffle = KC_FALSE};
    kc_history *h = NULL;
    if (kc_fit(m, d, &fo, &h) != KC_STATUS_OK) fail_msg("fit: %s", kc_last_error());
    kc_history_destroy(h);
    kc_dataset_destroy(d);
    if (kc_predict(m, x, 10, 4, pred) != KC_STATUS_OK) fail_msg("predict: %s", kc_last_error());
    return m;
}

static void test_planned_workspace(void **state) {
    (void)state;
    kc_rng g;
    kc__rng_seed(&g, 17);
    float x[10 * 9 * 9 * 4], pw[30], pc[30];
    int32_t y[10];
    fill(&g, x, 10 * 9 * 9 * 4, -1, 1);
    for (int i = 0; i < 10; i++) y[i] = i % 3;
    memset(&WS, 0, sizeof WS);
    kc_model *mw = ws_model(true, x, y, pw), *mc = ws_model(false, x, y, pc);
    assert_int_equal(WS.called, (1u << (WS_GC_FILTER + 1)) - 1); /* every entry, each with its workspace */
    assert_memory_equal(pw, pc, sizeof pw);                      /* nothing kept in the workspace */
    for (int i = 0; i < kc_model_num_weights(mc); i++) {
        float *a = weight(mw, i), *b = weight(mc, i);
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(mc, i, &wi), KC_STATUS_OK);
        assert_memory_equal(a, b, (size_t)wi.size * sizeof(float));
        free(a), free(b);
    }
    kc_model_destroy(mw);
    kc_model_destroy(mc);
}

/* ---------------------------------------------------------------- options, errors, JSON */

static void expect_bad(const kc_layer_spec *spec, const char *cls, const char *word, int build_c) {
    kc_layer *l = NULL;
    kc_status s = kc__layer_create(spec, &l);
    if (s == KC_STATUS_OK && build_c) {
        l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){8, 8, build_c});
        s = l->ops->build(l);
    }
    kc__layer_destroy(l);
    if (s == KC_STATUS_OK) fail_msg("%s: '%s' accepted", cls, word);
    if (!strstr(kc_last_error(), word) || !strstr(kc_last_error(), cls))
        fail_msg("%s: the error does not name '%s': %s", cls, word, kc_last_error());
}

static void test_errors(void **state) {
    (void)state;
    expect_bad(KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .groups = 4), "Conv2D", "groups", 0);
    expect_bad(KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .groups = -1), "Conv2D", "groups", 0);
    expect_bad(KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .groups = 3), "Conv2D", "groups", 4); /* 4 channels */
    expect_bad(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2},
                                   .output_padding = {1, {2, 1}}),
               "Conv2DTranspose", "output_padding", 0);
    expect_bad(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .output_padding = {1, {1, 0}}),
               "Conv2DTranspose", "output_padding", 0); /* stride 1 */
    expect_bad(KC_CONV2D_TRANSPOSE(.filters = 0, .kernel_size = {3, 3}), "Conv2DTranspose", "filters", 0);
    expect_bad(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2}, .dilation_rate = {2, 2}),
               "Conv2DTranspose", "dilation_rate", 0);
    expect_bad(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .padding = "full"), "Conv2DTranspose",
               "full", 0);
    expect_bad(KC_SEPARABLE_CONV2D(.filters = 2, .kernel_size = {3, 3}, .depth_multiplier = -2), "SeparableConv2D",
               "depth_multiplier", 0);
    expect_bad(KC_SEPARABLE_CONV2D(.filters = 2, .kernel_size = {3, 3}, .pointwise_initializer = "nope"),
               "SeparableConv2D", "pointwise_initializer", 0);
    expect_bad(KC_SEPARABLE_CONV2D(.kernel_size = {3, 3}), "SeparableConv2D", "filters", 0);
    expect_bad(KC_SEPARABLE_CONV2D(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2}, .dilation_rate = {2, 1}),
               "SeparableConv2D", "dilation_rate", 0);
}

static void test_flops_and_shapes(void **state) {
    (void)state;
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .padding = "same", .groups = 4),
                                      &l),
                     KC_STATUS_OK);
    l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){6, 5, 4});
    assert_int_equal(l->ops->build(l), KC_STATUS_OK);
    assert_int_equal(l->ops->flops(l), 2 * 6 * 5 * 8 * 9 * 1);
    assert_int_equal(l->w[0].size, 3 * 3 * 1 * 8);
    kc__layer_destroy(l);

    l = NULL;
    assert_int_equal(kc__layer_create(KC_SEPARABLE_CONV2D(.filters = 7, .kernel_size = {3, 3}, .depth_multiplier = 2,
                                                          .use_bias = KC_FALSE),
                                      &l),
                     KC_STATUS_OK);
    l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){6, 5, 4});
    assert_int_equal(l->ops->build(l), KC_STATUS_OK);
    assert_int_equal(l->n_weights, 2);
    assert_int_equal(l->ops->flops(l), 2 * 4 * 3 * 8 * (9 + 7));
    assert_true(l->ops->aux_bytes(l, 2) >= (size_t)2 * 4 * 3 * 8 * sizeof(float));
    kc__layer_destroy(l);

    l = NULL;
    assert_int_equal(kc__layer_create(KC_CONV2D_TRANSPOSE(.filters = 3, .kernel_size = {3, 3}, .strides = {2, 2},
                                                          .padding = "same"),
                                      &l),
                     KC_STATUS_OK);
    l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){6, 5, 4});
    assert_int_equal(l->ops->build(l), KC_STATUS_OK);
    assert_int_equal(l->out_shape.dim[0], 12);
    assert_int_equal(l->out_shape.dim[1], 10);
    assert_int_equal(l->out_shape.dim[2], 3);
    assert_int_equal(l->ops->flops(l), 2 * 6 * 5 * 4 * 9 * 3);
    kc__layer_destroy(l);
}

static char *to_json(const kc_layer_spec *spec, int flavour) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("j", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {8, 8, 4}));
    assert_int_equal(kc_set_output(m, kc_apply(m, spec, x)), KC_STATUS_OK);
    if (kc_model_build(m) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
    char *text = NULL;
    assert_int_equal(kc_model_to_json(m, flavour, &text), KC_STATUS_OK);
    kc_model *back = NULL; /* and back */
    if (kc_model_from_json(text, strlen(text), &back) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
    char *again = NULL;
    assert_int_equal(kc_model_to_json(back, flavour, &again), KC_STATUS_OK);
    assert_string_equal(text, again);
    free(again);
    kc_model_destroy(back);
    kc_model_destroy(m);
    return text;
}

static void test_json(void **state) {
    (void)state;
    for (int fl = 2; fl <= 3; fl++) {
        char *t = to_json(KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .groups = 2), fl);
        assert_non_null(strstr(t, "\"groups\": 2"));
        free(t);
        t = to_json(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2}), fl);
        assert_non_null(strstr(t, "\"output_padding\": null"));
        assert_null(strstr(t, "\"groups\"")); /* tf-keras writes 1, Keras 3 refuses the key */
        free(t);
        t = to_json(KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 3},
                                        .output_padding = {1, {0, 2}}),
                    fl);
        assert_non_null(strstr(t, "\"output_padding\": [0, 2]"));
        free(t);
        t = to_json(KC_SEPARABLE_CONV2D(.filters = 5, .kernel_size = {3, 3}, .depth_multiplier = 2,
                                        .pointwise_initializer = "he_normal"),
                    fl);
        assert_non_null(strstr(t, "\"depth_multiplier\": 2"));
        assert_non_null(strstr(t, "HeNormal") ? strstr(t, "HeNormal") : strstr(t, "he_normal"));
        assert_null(strstr(t, "\"groups\""));
        free(t);
    }
    /* tf-keras's SeparableConv2D writes its Conv base's unused kernel_initializer (NASNet: he_normal) */
    const char *nasnet =
        "{\"class_name\": \"Functional\", \"keras_version\": \"2.16.0\", \"config\": {\"name\": \"f\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_input_shape\": [null, 8, 8, 2], \"name\": \"i\"}, "
        "\"name\": \"i\", \"inbound_nodes\": []}, {\"class_name\": \"SeparableConv2D\", \"name\": \"sep\", \"config\": "
        "{\"name\": \"sep\", \"filters\": 2, \"kernel_size\": [3, 3], \"groups\": 1, \"kernel_initializer\": "
        "{\"module\": \"keras.initializers\", \"class_name\": \"HeNormal\", \"config\": {\"seed\": null}, "
        "\"registered_name\": null}}, \"inbound_nodes\": [[[\"i\", 0, 0, {}]]]}], "
        "\"input_layers\": [[\"i\", 0, 0]], \"output_layers\": [[\"sep\", 0, 0]]}}";
    kc_model *nm = NULL;
    if (kc_model_from_json(nasnet, strlen(nasnet), &nm) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
    for (int fl = 2; fl <= 3; fl++) {
        char *t = NULL;
        assert_int_equal(kc_model_to_json(nm, fl, &t), KC_STATUS_OK);
        assert_null(strstr(t, "\"kernel_initializer\""));
        free(t);
    }
    kc_model_destroy(nm);
    /* JSON errors name the layer and the key */
    const char *bad[] = {
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"InputLayer\", "
        "\"config\": {\"batch_shape\": [null, 8, 8, 2], \"name\": \"i\"}}, {\"class_name\": \"Conv2DTranspose\", "
        "\"config\": {\"name\": \"up\", \"filters\": 2, \"kernel_size\": [3, 3], \"output_padding\": [-1, 0]}}]}}",
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"InputLayer\", "
        "\"config\": {\"batch_shape\": [null, 8, 8, 2], \"name\": \"i\"}}, {\"class_name\": \"SeparableConv2D\", "
        "\"config\": {\"name\": \"sep\", \"filters\": 2, \"kernel_size\": [3, 3], \"pointwise_regularizer\": "
        "\"l2\"}}]}}",
    };
    const char *words[][2] = {{"up", "output_padding"}, {"sep", "pointwise_regularizer"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kc_model *m = NULL;
        assert_int_not_equal(kc_model_from_json(bad[i], strlen(bad[i]), &m), KC_STATUS_OK);
        if (!strstr(kc_last_error(), words[i][0]) || !strstr(kc_last_error(), words[i][1]))
            fail_msg("case %zu: %s", i, kc_last_error());
        kc_model_destroy(m);
    }
}

int main(void) {
    if (kc_backend_cpu_create(&B) != KC_STATUS_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grouped_kernels), cmocka_unit_test(test_grouped_errors),
        cmocka_unit_test(test_conv2d_groups),   cmocka_unit_test(test_conv2d_transpose),
        cmocka_unit_test(test_separable),       cmocka_unit_test(test_errors),
        cmocka_unit_test(test_flops_and_shapes), cmocka_unit_test(test_json),
        cmocka_unit_test(test_planned_workspace),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(B);
    return r;
}
