/* test_cuda_backend.c — the CUDA backend against the CPU backend (the reference).
 *
 * Without a usable GPU (no module, no driver, no device) this prints
 * "SKIP: no GPU: <reason>" and exits 77 (ctest SKIP). With one:
 *   1. every entry of the backend table on random inputs, GPU result against the CPU's,
 *      and the input feed's two streams racing (test_feed);
 *   2. every layer kind's forward and backward through its layer table (as
 *      test_gradcheck_layers.c drives them), GPU against CPU;
 *   3. a 51-step training run (50 steps of 32 and a short one of 7) of the default CNN
 *      (Keras mnist_convnet, Adam, on synthetic learnable 28x28x1 data) on both devices
 *      from the same seed.
 *
 * Precision: fp32 everywhere, TF32 off (the module's default, KERAC_TF32 unset here: cuBLAS
 * with CUBLAS_DEFAULT_MATH, cuDNN with CUDNN_FMA_MATH). Errors are relative L2 norms,
 * ||gpu - cpu|| / ||cpu||, with these bounds:
 *   exact by construction (same formula, same order): max-pooling masks, dropout masks
 *     and outputs, copies, padding, accuracy counts                                  0
 *   the same formula where one side may fuse a multiply-add (pooling, global average
 *     pooling, axpy, optimizer updates)                                          1e-7 .. 1e-6
 *   elementwise with transcendental functions (CUDA's expf/tanhf/erfcf vs glibc's)  2e-6
 *   reductions in double (bias/BN statistics, losses, sums of squares)              1e-5
 *   GEMM and convolutions (fp32 FMA, other summation orders)                        2e-5
 *   layers: as their kernels; where a fused ReLU-like kink meets a pre-activation within
 *     rounding of 0, up to n/1000 elements (at least 1) may differ and are reported
 *   training: loss at step 1 within 1e-4 relative; running mean loss over 51 steps within
 *     1e-3; final weights within 1e-2 (relative L2): Adam amplifies rounding differences
 *     in weights whose gradients are near zero, so weights are looser than the loss.
 * KERAC_CUDA_DEBUG_SYNC=1 is set (unless given) so that a fault names its operation; the
 * feed test and the training run leave it off, so that their two streams really overlap.
 * Every check prints one line "name: error (bound)"; KC_CUDA_TEST_QUIET=1 keeps failures only. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bcast_desc.h"
#include "cuda_test.h"

#include "layers/layer.h"

static kc_backend *G; /* the GPU */
static kc_backend *C; /* the CPU reference */
static kc_rng R;
static int quiet;

/* ---------------------------------------------------------------- buffers */

static float *hbuf(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

static void *dalloc(size_t bytes) {
    void *p = NULL;
    OK(G->alloc(G, bytes ? bytes : 4, &p));
    assert_non_null(p);
    return p;
}

static float *dbuf(int64_t n) { return dalloc((size_t)(n > 0 ? n : 1) * sizeof(float)); }
static void dfree(void *p) { G->free(G, p); }
static void up(void *d, const void *h, size_t bytes) { OK(G->to_device(G, d, h, bytes)); }
static void down(void *h, const void *d, size_t bytes) { OK(G->to_host(G, h, d, bytes)); }

static float *dcopy(const float *h, int64_t n) {
    float *d = dbuf(n);
    up(d, h, (size_t)n * sizeof(float));
    return d;
}

static float unif(float lo, float hi) { return lo + (hi - lo) * (float)kc__rng_uniform(&R); }

static float *hrand(int64_t n, float lo, float hi) {
    float *p = hbuf(n);
    for (int64_t i = 0; i < n; i++) p[i] = unif(lo, hi);
    return p;
}

/* ||a - ref|| / ||ref|| (absolute when ref is all zeros); NaN anywhere -> INFINITY. With
 * outliers > 0, the largest `outliers` differences are left out (reported by the caller). */
static double rel_err(const float *a, const float *ref, int64_t n, int outliers) {
    double num = 0, den = 0;
    double *top = outliers > 0 ? calloc((size_t)outliers, sizeof(double)) : NULL;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) != isnan(ref[i])) {
            free(top);
            return INFINITY;
        }
        if (isnan(a[i])) continue;
        double d = (double)a[i] - (double)ref[i];
        double d2 = d * d;
        if (top) { /* keep the largest d2 out of the sum */
            int m = 0;
            for (int k = 1; k < outliers; k++)
                if (top[k] < top[m]) m = k;
            if (d2 > top[m]) {
                double t = top[m];
                top[m] = d2;
                d2 = t;
            }
        }
        num += d2;
        den += (double)ref[i] * (double)ref[i];
    }
    free(top);
    if (den == 0) return sqrt(num);
    return sqrt(num / den);
}

/* Compare n floats of a device buffer with the CPU's host values. */
static void check_dev(const char *what, const float *dev, const float *ref, int64_t n, double bound, int kink) {
    float *h = hbuf(n);
    down(h, dev, (size_t)n * sizeof(float));
    double e = rel_err(h, ref, n, 0);
    int outliers = 0;
    if (!(e <= bound) && kink) {
        outliers = (int)KC_MAX(1, n / 1000);
        e = rel_err(h, ref, n, outliers);
    }
    free(h);
    if (!(e <= bound)) {
        print_error("%-60s rel error %.3g > bound %.1g\n", what, e, bound);
        fail_msg("%s: GPU differs from CPU (relative L2 error %.3g, bound %.1g)", what, e, bound);
    }
    if (!quiet)
        printf("    %-60s %.2e (bound %.0e)%s\n", what, e, bound, outliers && e > 0 ? " [kink outliers left out]" : "");
}

static void check_host(const char *what, const float *a, const float *ref, int64_t n, double bound) {
    double e = rel_err(a, ref, n, 0);
    if (!(e <= bound)) fail_msg("%s: GPU differs from CPU (relative L2 error %.3g, bound %.1g)", what, e, bound);
    if (!quiet) printf("    %-60s %.2e (bound %.0e)\n", what, e, bound);
}

/* ---------------------------------------------------------------- table: GEMM */

static void gemm_case(int ta, int tb, int m, int n, int k, int pad) {
    int a_rows = ta ? k : m, a_cols = ta ? m : k, b_rows = tb ? n : k, b_cols = tb ? k : n;
    int lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
    float *a = hrand((int64_t)a_rows * lda, -1, 1), *b = hrand((int64_t)b_rows * ldb, -1, 1);
    float *c = hrand((int64_t)m * ldc, -1, 1);
    float *da = dcopy(a, (int64_t)a_rows * lda), *db = dcopy(b, (int64_t)b_rows * ldb), *dc = dcopy(c, (int64_t)m * ldc);
    OK(C->gemm(C, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, 0.3f, c, ldc));
    OK(G->gemm(G, ta, tb, m, n, k, 0.7f, da, lda, db, ldb, 0.3f, dc, ldc));
    char what[96];
    snprintf(what, sizeof what, "gemm ta=%d tb=%d m=%d n=%d k=%d ld+%d", ta, tb, m, n, k, pad);
    check_dev(what, dc, c, (int64_t)m * ldc, k ? 2e-5 : 1e-7, 0);
    free(a), free(b), free(c), dfree(da), dfree(db), dfree(dc);
}

static void test_gemm(void **state) {
    (void)state;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) gemm_case(ta, tb, 37, 53, 129, ta + 2 * tb);
    gemm_case(0, 0, 256, 10, 1600, 0); /* the default CNN's Dense */
    gemm_case(1, 0, 1600, 10, 256, 0);
    gemm_case(0, 1, 256, 1600, 10, 0);
    gemm_case(0, 0, 5, 7, 0, 1); /* k = 0: C = beta C */
    /* a bad leading dimension is an argument error, as on the CPU */
    assert_int_equal(G->gemm(G, 0, 0, 4, 4, 4, 1.0f, NULL, 2, NULL, 4, 0.0f, NULL, 4), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "leading dimension"));
}

/* ---------------------------------------------------------------- bias, elementwise, layout */

static void test_bias_and_elementwise(void **state) {
    (void)state;
    const int64_t rows = 5003;
    const int cols = 37;
    const int64_t n = rows * cols;
    float *y = hrand(n, -1, 1), *bias = hrand(cols, -1, 1);
    float *dy_ = dcopy(y, n), *dbias = dcopy(bias, cols);
    OK(C->bias_add(C, y, bias, rows, cols));
    OK(G->bias_add(G, dy_, dbias, rows, cols));
    check_dev("bias_add (5003, 37)", dy_, y, n, 1e-7, 0);
    float *db = hbuf(cols), *ddb = dbuf(cols);
    OK(C->bias_grad(C, y, db, rows, cols));
    OK(G->bias_grad(G, dy_, ddb, rows, cols));
    check_dev("bias_grad (5003, 37)", ddb, db, cols, 1e-6, 0);
    OK(C->bias_grad(C, y, db, 7, cols)); /* few rows: one partial */
    OK(G->bias_grad(G, dy_, ddb, 7, cols));
    check_dev("bias_grad (7, 37)", ddb, db, cols, 1e-6, 0);

    float *a = hrand(n, -2, 2), *b = hrand(n, -2, 2), *o = hbuf(n);
    float *da = dcopy(a, n), *dbb = dcopy(b, n), *dout = dbuf(n);
    OK(C->add(C, o, a, b, n));
    OK(G->add(G, dout, da, dbb, n));
    check_dev("add", dout, o, n, 0, 0);
    OK(C->axpy(C, a, b, -0.37f, n));
    OK(G->axpy(G, da, dbb, -0.37f, n));
    check_dev("axpy", da, a, n, 1e-7, 0);
    OK(C->scale(C, a, 1.7f, n));
    OK(G->scale(G, da, 1.7f, n));
    check_dev("scale", da, a, n, 0, 0);

    /* copy_strided: a (rows, 5) block into columns 3..7 of (rows, 11) */
    float *dst = hrand(rows * 11, -1, 1), *src = hrand(rows * 9, -1, 1);
    float *ddst = dcopy(dst, rows * 11), *dsrc = dcopy(src, rows * 9);
    OK(C->copy_strided(C, dst, 11, 3, src, 9, 2, rows, 5));
    OK(G->copy_strided(G, ddst, 11, 3, dsrc, 9, 2, rows, 5));
    check_dev("copy_strided", ddst, dst, rows * 11, 0, 0);

    /* pad2d: (3, 5, 4, 6) with (1, 2, 0, 3) */
    const int pn = 3, ph = 5, pw = 4, pc = 6, t = 1, bo = 2, l = 0, r = 3;
    const int64_t xin = (int64_t)pn * ph * pw * pc, yout = (int64_t)pn * (ph + t + bo) * (pw + l + r) * pc;
    float *px = hrand(xin, -1, 1), *py = hrand(yout, -1, 1), *pdx = hbuf(xin);
    float *dpx = dcopy(px, xin), *dpy = dcopy(py, yout), *dpdx = dbuf(xin);
    OK(C->pad2d_forward(C, px, py, pn, ph, pw, pc, t, bo, l, r));
    OK(G->pad2d_forward(G, dpx, dpy, pn, ph, pw, pc, t, bo, l, r));
    check_dev("pad2d_forward", dpy, py, yout, 0, 0);
    OK(C->pad2d_backward(C, py, pdx, pn, ph, pw, pc, t, bo, l, r));
    OK(G->pad2d_backward(G, dpy, dpdx, pn, ph, pw, pc, t, bo, l, r));
    check_dev("pad2d_backward", dpdx, pdx, xin, 0, 0);

    /* sum of squares */
    const int64_t big = 1000003;
    float *s = hrand(big, -1, 1), out = 0, gout = 0;
    float *ds = dcopy(s, big), *dsc = dbuf(1);
    OK(C->sum_squares(C, s, big, &out));
    OK(G->sum_squares(G, ds, big, dsc));
    down(&gout, dsc, sizeof gout);
    check_host("sum_squares (1000003)", &gout, &out, 1, 1e-6);

    free(y), free(bias), free(db), free(a), free(b), free(o), free(dst), free(src), free(px), free(py), free(pdx), free(s);
    dfree(dy_), dfree(dbias), dfree(ddb), dfree(da), dfree(dbb), dfree(dout), dfree(ddst), dfree(dsrc), dfree(dpx);
    dfree(dpy), dfree(dpdx), dfree(ds), dfree(dsc);
}

/* ---------------------------------------------------------------- convolution */

static kc_conv2d_desc conv_desc(int n, int h, int w, int c, int f, int kh, int kw, int sh, int sw, int dh, int dw,
                                bool same) {
    kc_conv2d_desc d = {.n = n, .h = h, .w = w, .c = c, .f = f, .kh = kh, .kw = kw, .sh = sh, .sw = sw, .dh = dh, .dw = dw};
    kc__conv_out_size(h, kh, sh, dh, same, &d.oh, &d.pad_top);
    kc__conv_out_size(w, kw, sw, dw, same, &d.ow, &d.pad_left);
    return d;
}

static void conv_case(const char *name, kc_conv2d_desc d, bool bias) {
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * d.c * d.f;
    float *x = hrand(xn, -1, 1), *w = hrand(wn, -0.5f, 0.5f), *b = hrand(d.f, -1, 1), *y = hbuf(yn);
    float *dy = hrand(yn, -1, 1), *dx = hbuf(xn), *dw = hbuf(wn), *db = hbuf(d.f);
    float *gx = dcopy(x, xn), *gw = dcopy(w, wn), *gb = dcopy(b, d.f), *gy = dbuf(yn), *gdy = dcopy(dy, yn);
    float *gdx = dbuf(xn), *gdw = dbuf(wn), *gdb = dbuf(d.f);
    size_t cws = C->conv2d_workspace(C, &d), gws = G->conv2d_workspace(G, &d);
    void *cw = cws ? malloc(cws) : NULL, *gwsp = gws ? dalloc(gws) : NULL;
    OK(C->conv2d_forward(C, &d, x, w, bias ? b : NULL, y, cw, cws));
    OK(G->conv2d_forward(G, &d, gx, gw, bias ? gb : NULL, gy, gwsp, gws));
    char what[160];
    snprintf(what, sizeof what, "conv2d %s forward", name);
    check_dev(what, gy, y, yn, 2e-5, 0);
    OK(C->conv2d_backward_data(C, &d, dy, w, dx, cw, cws));
    OK(G->conv2d_backward_data(G, &d, gdy, gw, gdx, gwsp, gws));
    snprintf(what, sizeof what, "conv2d %s backward-data", name);
    check_dev(what, gdx, dx, xn, 2e-5, 0);
    OK(C->conv2d_backward_filter(C, &d, x, dy, dw, bias ? db : NULL, cw, cws));
    OK(G->conv2d_backward_filter(G, &d, gx, gdy, gdw, bias ? gdb : NULL, gwsp, gws));
    snprintf(what, sizeof what, "conv2d %s backward-filter", name);
    check_dev(what, gdw, dw, wn, 2e-5, 0);
    if (bias) {
        snprintf(what, sizeof what, "conv2d %s bias gradient", name);
        check_dev(what, gdb, db, d.f, 1e-6, 0);
    }
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db), free(cw);
    dfree(gx), dfree(gw), dfree(gb), dfree(gy), dfree(gdy), dfree(gdx), dfree(gdw), dfree(gdb), dfree(gwsp);
}

/* The short last batch of an epoch: a convolution at n rows with the workspace planned for
 * the full batch (what the model gives it), followed by a canary that must stay intact.
 * cuDNN may rank for n an algorithm that needs more workspace than the full batch's; the
 * backend must pick one that fits. */
static void short_batch_case(const char *name, kc_conv2d_desc full, int n) {
    kc_conv2d_desc d = full;
    d.n = n;
    const int64_t xn = (int64_t)n * d.h * d.w * d.c, yn = (int64_t)n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * d.c * d.f;
    float *x = hrand(xn, -1, 1), *w = hrand(wn, -0.5f, 0.5f), *y = hbuf(yn), *dy = hrand(yn, -1, 1);
    float *dx = hbuf(xn), *dw = hbuf(wn);
    float *gx = dcopy(x, xn), *gw = dcopy(w, wn), *gy = dbuf(yn), *gdy = dcopy(dy, yn), *gdx = dbuf(xn), *gdw = dbuf(wn);
    size_t cws = C->conv2d_workspace(C, &d), gws = G->conv2d_workspace(G, &full);
    enum { CANARY = 4096 };
    void *cw = cws ? malloc(cws) : NULL;
    char *gwsp = dalloc(gws + CANARY);
    unsigned char pattern[CANARY], back[CANARY];
    memset(pattern, 0xa7, sizeof pattern);
    up(gwsp + gws, pattern, CANARY);
    OK(C->conv2d_forward(C, &d, x, w, NULL, y, cw, cws));
    OK(G->conv2d_forward(G, &d, gx, gw, NULL, gy, gwsp, gws));
    OK(C->conv2d_backward_data(C, &d, dy, w, dx, cw, cws));
    OK(G->conv2d_backward_data(G, &d, gdy, gw, gdx, gwsp, gws));
    OK(C->conv2d_backward_filter(C, &d, x, dy, dw, NULL, cw, cws));
    OK(G->conv2d_backward_filter(G, &d, gx, gdy, gdw, NULL, gwsp, gws));
    char what[160];
    snprintf(what, sizeof what, "conv2d %s, batch %d in the workspace of %d: forward", name, n, full.n);
    check_dev(what, gy, y, yn, 2e-5, 0);
    snprintf(what, sizeof what, "conv2d %s, batch %d in the workspace of %d: backward-data", name, n, full.n);
    check_dev(what, gdx, dx, xn, 2e-5, 0);
    snprintf(what, sizeof what, "conv2d %s, batch %d in the workspace of %d: backward-filter", name, n, full.n);
    check_dev(what, gdw, dw, wn, 2e-5, 0);
    down(back, gwsp + gws, CANARY);
    if (memcmp(back, pattern, CANARY) != 0)
        fail_msg("conv2d %s at batch %d wrote past the %zu-byte workspace planned for batch %d", name, n, gws, full.n);
    free(x), free(w), free(y), free(dy), free(dx), free(dw), free(cw);
    dfree(gx), dfree(gw), dfree(gy), dfree(gdy), dfree(gdx), dfree(gdw), dfree(gwsp);
}

static void test_conv2d(void **state) {
    (void)state;
    conv_case("3x3 valid 17x19x3 -> 8", conv_desc(4, 17, 19, 3, 8, 3, 3, 1, 1, 1, 1, false), true);
    conv_case("3x3 same 16x16x8 -> 16", conv_desc(4, 16, 16, 8, 16, 3, 3, 1, 1, 1, 1, true), true);
    conv_case("3x3 stride 2 same 16x16 (asymmetric pad)", conv_desc(3, 16, 16, 5, 7, 3, 3, 2, 2, 1, 1, true), true);
    conv_case("4x4 stride 2 same 7x6 (asymmetric pad)", conv_desc(2, 7, 6, 2, 3, 4, 4, 2, 2, 1, 1, true), false);
    conv_case("2x2 same (pad after only)", conv_desc(2, 5, 5, 2, 3, 2, 2, 1, 1, 1, 1, true), true);
    conv_case("3x3 dilation 2 valid", conv_desc(2, 11, 11, 4, 6, 3, 3, 1, 1, 2, 2, false), true);
    conv_case("3x3 dilation 2 same", conv_desc(2, 9, 9, 4, 6, 3, 3, 1, 1, 2, 2, true), true);
    conv_case("1x1 28x28x32 -> 64", conv_desc(8, 28, 28, 32, 64, 1, 1, 1, 1, 1, 1, false), true);
    conv_case("5x5 same 12x12x3", conv_desc(4, 12, 12, 3, 10, 5, 5, 1, 1, 1, 1, true), true);
    conv_case("3x2 stride (2, 1) valid", conv_desc(2, 9, 7, 3, 4, 3, 2, 2, 1, 1, 1, false), false);
    conv_case("default CNN conv 1 (128, 28x28x1 -> 32)", conv_desc(128, 28, 28, 1, 32, 3, 3, 1, 1, 1, 1, false), true);
    conv_case("default CNN conv 2 (128, 13x13x32 -> 64)", conv_desc(128, 13, 13, 32, 64, 3, 3, 1, 1, 1, 1, false), true);
    kc_conv2d_desc fused = conv_desc(16, 13, 13, 32, 64, 3, 3, 1, 1, 1, 1, false);
    fused.relu = 1; /* the layer's fused ReLU */
    conv_case("3x3 valid with the fused ReLU", fused, true);
    short_batch_case("default CNN conv 1", conv_desc(128, 28, 28, 1, 32, 3, 3, 1, 1, 1, 1, false), 7);
    short_batch_case("default CNN conv 2", conv_desc(128, 13, 13, 32, 64, 3, 3, 1, 1, 1, 1, false), 7);
    short_batch_case("VGG 3x3 same 32x32x32 -> 32", conv_desc(256, 32, 32, 32, 32, 3, 3, 1, 1, 1, 1, true), 17);
    short_batch_case("3x3 stride 2 same (asymmetric pad)", conv_desc(64, 16, 16, 5, 7, 3, 3, 2, 2, 1, 1, true), 3);
    /* no workspace is an argument error */
    kc_conv2d_desc d = conv_desc(2, 8, 8, 2, 2, 3, 3, 1, 1, 1, 1, false);
    float *gx = dbuf(2 * 8 * 8 * 2), *gw = dbuf(3 * 3 * 2 * 2), *gy = dbuf(2 * 6 * 6 * 2);
    assert_int_equal(G->conv2d_forward(G, &d, gx, gw, NULL, gy, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "workspace"));
    void *tiny = dalloc(64); /* and a workspace too small for the transposed kernel */
    assert_int_equal(G->conv2d_forward(G, &d, gx, gw, NULL, gy, tiny, 64), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "too small"));
    dfree(tiny);
    dfree(gx), dfree(gw), dfree(gy);
}

/* supports and describe: every operation is there, and a convolution's description names
 * the cuDNN algorithm of each direction that fits the workspace given. */
static void test_describe(void **state) {
    (void)state;
    for (int op = 0; op < KC_OP_COUNT; op++) assert_int_equal(G->supports(G, (kc_op)op), 1);
    assert_int_equal(G->supports(G, KC_OP_COUNT), 0);
    char text[512];
    OK(G->describe(G, KC_OP_GEMM, NULL, 0, text, sizeof text));
    assert_string_equal(text, "cuBLAS sgemm");
    kc_conv2d_desc full = conv_desc(128, 13, 13, 32, 64, 3, 3, 1, 1, 1, 1, false);
    size_t ws = G->conv2d_workspace(G, &full);
    OK(G->describe(G, KC_OP_CONV2D, &full, ws, text, sizeof text));
    print_message("    %s\n", text);
    const char *want[] = {"cuDNN forward ", ", backward-data ", ", backward-filter ", "; cuDNN heuristics"};
    for (size_t i = 0; i < KC_ARRAY_LEN(want); i++)
        if (!strstr(text, want[i])) fail_msg("expected \"%s\" in: %s", want[i], text);
    assert_null(strstr(text, "beyond the plan"));
    assert_null(strstr(text, "refused"));
    kc_conv2d_desc tail = full; /* the short last batch in the full batch's workspace: as the call does */
    tail.n = 7;
    OK(G->describe(G, KC_OP_CONV2D, &tail, ws, text, sizeof text));
    print_message("    batch 7: %s\n", text);
    assert_null(strstr(text, "beyond the plan"));
    kc_conv2d_desc bad = full;
    bad.f = 0;
    assert_int_equal(G->describe(G, KC_OP_CONV2D, &bad, ws, text, sizeof text), KC_STATUS_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------------- depthwise convolution */

/* A depthwise convolution (f = c * multiplier) on both devices: forward, backward-data,
 * backward-filter and the bias gradient. */
static void dw_case(const char *name, kc_conv2d_desc d, bool bias) {
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * d.f;
    float *x = hrand(xn, -1, 1), *w = hrand(wn, -0.5f, 0.5f), *b = hrand(d.f, -1, 1), *y = hbuf(yn);
    float *dy = hrand(yn, -1, 1), *dx = hbuf(xn), *dw = hbuf(wn), *db = hbuf(d.f);
    float *gx = dcopy(x, xn), *gw = dcopy(w, wn), *gb = dcopy(b, d.f), *gy = dbuf(yn), *gdy = dcopy(dy, yn);
    float *gdx = dbuf(xn), *gdw = dbuf(wn), *gdb = dbuf(d.f);
    const size_t wsb = G->depthwise_workspace(G, &d); /* as the plan asks: no call borrows */
    void *gws = dalloc(wsb);
    char what[160];
    OK(C->depthwise_forward(C, &d, x, w, bias ? b : NULL, y, NULL, 0));
    OK(G->depthwise_forward(G, &d, gx, gw, bias ? gb : NULL, gy, gws, wsb));
    snprintf(what, sizeof what, "depthwise %s forward", name);
    check_dev(what, gy, y, yn, 2e-5, 0); /* cuDNN's grouped convolution: other summation orders */
    OK(C->depthwise_backward_data(C, &d, dy, w, dx, NULL, 0));
    OK(G->depthwise_backward_data(G, &d, gdy, gw, gdx, gws, wsb));
    snprintf(what, sizeof what, "depthwise %s backward-data", name);
    check_dev(what, gdx, dx, xn, 2e-5, 0);
    OK(C->depthwise_backward_filter(C, &d, x, dy, dw, bias ? db : NULL, NULL, 0));
    OK(G->depthwise_backward_filter(G, &d, gx, gdy, gdw, bias ? gdb : NULL, gws, wsb));
    snprintf(what, sizeof what, "depthwise %s backward-filter", name);
    check_dev(what, gdw, dw, wn, 1e-5, 0);
    if (bias) {
        snprintf(what, sizeof what, "depthwise %s bias gradient", name);
        check_dev(what, gdb, db, d.f, 1e-5, 0);
    }
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
    dfree(gx), dfree(gw), dfree(gb), dfree(gy), dfree(gdy), dfree(gdx), dfree(gdw), dfree(gdb), dfree(gws);
}

static void test_depthwise(void **state) {
    (void)state;
    dw_case("3x3 same 16x16x24", conv_desc(4, 16, 16, 24, 24, 3, 3, 1, 1, 1, 1, true), true);
    dw_case("3x3 stride 2 valid 17x17x40 (MobileNetV2 after ZeroPadding2D)",
            conv_desc(8, 17, 17, 40, 40, 3, 3, 2, 2, 1, 1, false), false);
    dw_case("3x3 stride 2 same (asymmetric pad) 16x15x8", conv_desc(3, 16, 15, 8, 8, 3, 3, 2, 2, 1, 1, true), true);
    dw_case("multiplier 3, 5x3 valid", conv_desc(2, 11, 9, 5, 15, 5, 3, 1, 1, 1, 1, false), true);
    dw_case("dilation 2 same, multiplier 2", conv_desc(2, 9, 9, 6, 12, 3, 3, 1, 1, 2, 2, true), true);
    dw_case("MobileNetV2 96x96 block (32, 24x24x96)", conv_desc(32, 24, 24, 96, 96, 3, 3, 1, 1, 1, 1, true), false);
    kc_conv2d_desc fused = conv_desc(4, 10, 10, 16, 16, 3, 3, 1, 1, 1, 1, true);
    fused.relu = 1;
    dw_case("3x3 same with the fused ReLU", fused, true);
    kc_conv2d_desc bad = conv_desc(1, 4, 4, 3, 4, 3, 3, 1, 1, 1, 1, false); /* f not a multiple of c */
    float *g = dbuf(64);
    assert_int_equal(G->depthwise_forward(G, &bad, g, g, NULL, g, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "multiple"));
    dfree(g);
}

/* ---------------------------------------------------------------- augmentation: resampling, colour */

/* One resampling on both devices: forward and the adjoint, per-image transforms. */
static void sample_case(const char *name, kc_sample2d_desc d, bool per_image) {
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.c;
    float *x = hrand(xn, -1, 1), *y = hbuf(yn), *dy = hrand(yn, -1, 1), *dx = hbuf(xn), *m = hbuf(6 * (int64_t)d.n);
    for (int i = 0; i < d.n; i++) { /* a rotation and zoom about the centre, a shift */
        float a = unif(-1.0f, 1.0f), z = unif(0.7f, 1.3f), co = z * cosf(a), si = z * sinf(a);
        float cx = 0.5f * (float)(d.w - 1), cy = 0.5f * (float)(d.h - 1);
        m[6 * i + 0] = co, m[6 * i + 1] = -si, m[6 * i + 2] = cx - cx * co + cy * si + unif(-2, 2);
        m[6 * i + 3] = si, m[6 * i + 4] = co, m[6 * i + 5] = cy - cx * si - cy * co + unif(-2, 2);
    }
    float *gx = dcopy(x, xn), *gy = dbuf(yn), *gdy = dcopy(dy, yn), *gdx = dbuf(xn), *gm = dcopy(m, 6 * (int64_t)d.n);
    char what[160];
    OK(C->sample2d_forward(C, &d, per_image ? m : NULL, x, y));
    OK(G->sample2d_forward(G, &d, per_image ? gm : NULL, gx, gy));
    snprintf(what, sizeof what, "resampling %s forward", name);
    check_dev(what, gy, y, yn, 1e-6, 0);
    OK(C->sample2d_backward(C, &d, per_image ? m : NULL, dy, dx));
    OK(G->sample2d_backward(G, &d, per_image ? gm : NULL, gdy, gdx));
    snprintf(what, sizeof what, "resampling %s backward", name);
    check_dev(what, gdx, dx, xn, 1e-6, 0);
    free(x), free(y), free(dy), free(dx), free(m);
    dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gm);
}

static void color_case(const char *name, kc_color2d_desc d) {
    const int64_t n = (int64_t)d.n * d.hw * d.c;
    float *x = hrand(n, 0, 1), *y = hbuf(n), *dy = hrand(n, -1, 1), *dx = hbuf(n), *p = hbuf(2 * (int64_t)d.n);
    for (int i = 0; i < d.n; i++) p[2 * i] = d.contrast ? unif(0.5f, 1.5f) : 1.0f, p[2 * i + 1] = unif(-0.2f, 0.2f);
    float *gx = dcopy(x, n), *gy = dbuf(n), *gdy = dcopy(dy, n), *gdx = dbuf(n), *gp = dcopy(p, 2 * (int64_t)d.n);
    char what[160];
    OK(C->color2d_forward(C, &d, p, x, y));
    OK(G->color2d_forward(G, &d, gp, gx, gy));
    snprintf(what, sizeof what, "colour %s forward", name);
    check_dev(what, gy, y, n, 1e-6, 0);
    float *gyc = dcopy(y, n); /* the backward from the CPU's output: the same clipping mask */
    OK(C->color2d_backward(C, &d, p, y, dy, dx));
    OK(G->color2d_backward(G, &d, gp, gyc, gdy, gdx));
    snprintf(what, sizeof what, "colour %s backward", name);
    check_dev(what, gdx, dx, n, 1e-6, 0);
    free(x), free(y), free(dy), free(dx), free(p);
    dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gp), dfree(gyc);
}

static void test_augment(void **state) {
    (void)state;
    static const char *const fills[] = {"reflect", "wrap", "constant", "nearest"};
    for (int f = KC_FILL_REFLECT; f <= KC_FILL_NEAREST; f++)
        for (int ip = KC_SAMPLE_ROUND; ip <= KC_SAMPLE_BILINEAR; ip++) {
            kc_sample2d_desc d = {.n = 6, .h = 19, .w = 23, .c = 3, .oh = 19, .ow = 23, .ch = 19, .cw = 23,
                                  .interp = ip, .fill = f, .fill_value = 0.5f};
            char name[64];
            snprintf(name, sizeof name, "affine %s %s", fills[f], ip == KC_SAMPLE_ROUND ? "nearest" : "bilinear");
            sample_case(name, d, true);
        }
    /* Resizing-like: one transform, a padded canvas, floor taps */
    kc_sample2d_desc r = {.n = 4, .h = 20, .w = 30, .c = 5, .oh = 33, .ow = 17, .ch = 24, .cw = 30, .top = 2,
                          .interp = KC_SAMPLE_BILINEAR, .fill = KC_FILL_NEAREST, .fill_value = 0.25f,
                          .m = {30.0f / 17, 0, 0.5f * 30 / 17 - 0.5f, 0, 24.0f / 33, 0.5f * 24 / 33 - 0.5f}};
    sample_case("resize bilinear padded", r, false);
    r.interp = KC_SAMPLE_FLOOR;
    sample_case("resize nearest padded", r, false);
    color_case("contrast [0, 1]", (kc_color2d_desc){.n = 5, .hw = 300, .c = 3, .contrast = 1, .lo = 0, .hi = 1});
    color_case("brightness [0, 1]", (kc_color2d_desc){.n = 5, .hw = 300, .c = 3, .contrast = 0, .lo = 0, .hi = 1});
    color_case("contrast 64 channels", (kc_color2d_desc){.n = 3, .hw = 1000, .c = 64, .contrast = 1, .lo = -5, .hi = 5});
}

/* ---------------------------------------------------------------- convolutions: grouped, transposed */

/* A grouped convolution (Conv2D with 1 < groups) on both devices, every pass. */
static void gc_case(const char *name, kc_conv2d_desc d, int groups, bool bias) {
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * (d.c / groups) * d.f;
    float *x = hrand(xn, -1, 1), *w = hrand(wn, -0.5f, 0.5f), *b = hrand(d.f, -1, 1), *y = hbuf(yn);
    float *dy = hrand(yn, -1, 1), *dx = hbuf(xn), *dw = hbuf(wn), *db = hbuf(d.f);
    float *gx = dcopy(x, xn), *gw = dcopy(w, wn), *gb = dcopy(b, d.f), *gy = dbuf(yn), *gdy = dcopy(dy, yn);
    float *gdx = dbuf(xn), *gdw = dbuf(wn), *gdb = dbuf(d.f);
    const size_t wsb = G->grouped_conv_workspace(G, &d, groups); /* as the plan asks: no call borrows */
    void *gws = dalloc(wsb);
    char what[160];
    OK(C->grouped_conv_forward(C, &d, groups, x, w, bias ? b : NULL, y, NULL, 0));
    OK(G->grouped_conv_forward(G, &d, groups, gx, gw, bias ? gb : NULL, gy, gws, wsb));
    snprintf(what, sizeof what, "grouped %s forward", name);
    check_dev(what, gy, y, yn, 1e-5, 0);
    OK(C->grouped_conv_backward_data(C, &d, groups, dy, w, dx, NULL, 0));
    OK(G->grouped_conv_backward_data(G, &d, groups, gdy, gw, gdx, gws, wsb));
    snprintf(what, sizeof what, "grouped %s backward-data", name);
    check_dev(what, gdx, dx, xn, 1e-5, 0);
    OK(C->grouped_conv_backward_filter(C, &d, groups, x, dy, dw, bias ? db : NULL, NULL, 0));
    OK(G->grouped_conv_backward_filter(G, &d, groups, gx, gdy, gdw, bias ? gdb : NULL, gws, wsb));
    snprintf(what, sizeof what, "grouped %s backward-filter", name);
    check_dev(what, gdw, dw, wn, 1e-5, 0);
    if (bias) {
        snprintf(what, sizeof what, "grouped %s bias gradient", name);
        check_dev(what, gdb, db, d.f, 1e-5, 0);
    }
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
    dfree(gx), dfree(gw), dfree(gb), dfree(gy), dfree(gdy), dfree(gdx), dfree(gdw), dfree(gdb), dfree(gws);
}

/* The descriptor a layer hands its backend (Conv2DTranspose: the convolution whose
 * backward-data pass it is, with Keras's output size and padding). */
static kc_conv2d_desc layer_desc(const kc_layer_spec *spec, int n, int h, int w, int c) {
    kc_layer *l = NULL;
    OK(kc__layer_create(spec, &l));
    l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){h, w, c});
    OK(l->ops->build(l));
    kc_conv2d_desc d;
    l->ops->backend_desc(l, n, &d);
    kc__layer_destroy(l);
    return d;
}

static void test_conv_grouped_transposed(void **state) {
    (void)state;
    gc_case("2 groups 3x3 same 16x16x16 -> 32", conv_desc(4, 16, 16, 16, 32, 3, 3, 1, 1, 1, 1, true), 2, true);
    gc_case("8 groups 3x3 stride 2 same (ResNeXt-like, asymmetric pad)",
            conv_desc(8, 14, 14, 64, 64, 3, 3, 2, 2, 1, 1, true), 8, false);
    gc_case("4 groups dilation 2 valid", conv_desc(2, 11, 11, 8, 12, 3, 3, 1, 1, 2, 2, false), 4, true);
    gc_case("3 groups 5x3 stride (2, 1)", conv_desc(3, 9, 7, 6, 9, 5, 3, 2, 1, 1, 1, false), 3, true);
    gc_case("groups = channels 7x7 same (ConvNeXt)", conv_desc(2, 14, 14, 32, 32, 7, 7, 1, 1, 1, 1, true), 32, true);
    kc_conv2d_desc fused = conv_desc(4, 10, 10, 8, 16, 3, 3, 1, 1, 1, 1, true);
    fused.relu = 1;
    gc_case("2 groups with the fused ReLU", fused, 2, true);
    kc_conv2d_desc bad = conv_desc(1, 4, 4, 4, 6, 3, 3, 1, 1, 1, 1, false); /* 6 filters in 4 groups */
    float *g = dbuf(256);
    assert_int_equal(G->grouped_conv_forward(G, &bad, 4, g, g, NULL, g, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    dfree(g);
    /* Conv2DTranspose runs the conv2d entries on its own descriptors (sizes other than the
     * convolution's natural ones, cropped or asymmetric padding) */
    struct {
        const char *name;
        const kc_layer_spec *spec;
    } tr[] = {
        {"transpose 3x3 stride 2 same", KC_CONV2D_TRANSPOSE(.filters = 8, .kernel_size = {3, 3}, .strides = {2, 2},
                                                              .padding = "same")},
        {"transpose 2x2 stride 2 valid (U-Net)",
         KC_CONV2D_TRANSPOSE(.filters = 16, .kernel_size = {2, 2}, .strides = {2, 2})},
        {"transpose 4x3 stride (2, 1) same output_padding (1, 0)",
         KC_CONV2D_TRANSPOSE(.filters = 4, .kernel_size = {4, 3}, .strides = {2, 1}, .padding = "same",
                             .output_padding = {1, {1, 0}})},
        {"transpose 3x3 stride 2 valid output_padding 1",
         KC_CONV2D_TRANSPOSE(.filters = 6, .kernel_size = {3, 3}, .strides = {2, 2},
                             .output_padding = {1, {1, 1}})},
        {"transpose 3x3 dilation 2 same", KC_CONV2D_TRANSPOSE(.filters = 5, .kernel_size = {3, 3},
                                                                .dilation_rate = {2, 2}, .padding = "same")},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(tr); i++) conv_case(tr[i].name, layer_desc(tr[i].spec, 4, 9, 10, 12), false);
}

/* ---------------------------------------------------------------- pooling */

static void pool_case(const char *name, kc_pool_kind kind, int n, int h, int w, int c, int k, int s, bool same) {
    kc_pool2d_desc d = {.kind = kind, .n = n, .h = h, .w = w, .c = c, .kh = k, .kw = k, .sh = s, .sw = s};
    kc__conv_out_size(h, k, s, 1, same, &d.oh, &d.pad_top);
    kc__conv_out_size(w, k, s, 1, same, &d.ow, &d.pad_left);
    const int64_t xn = (int64_t)n * h * w * c, yn = (int64_t)n * d.oh * d.ow * c;
    float *x = hrand(xn, -1, 1), *y = hbuf(yn), *dy = hrand(yn, -1, 1), *dx = hbuf(xn);
    int32_t *mask = calloc((size_t)yn, sizeof(int32_t)), *gmask_h = calloc((size_t)yn, sizeof(int32_t));
    float *gx = dcopy(x, xn), *gy = dbuf(yn), *gdy = dcopy(dy, yn), *gdx = dbuf(xn);
    int32_t *gmask = dalloc((size_t)yn * sizeof(int32_t));
    OK(C->pool2d_forward(C, &d, x, y, mask));
    OK(G->pool2d_forward(G, &d, gx, gy, gmask));
    char what[128];
    snprintf(what, sizeof what, "%s forward", name);
    check_dev(what, gy, y, yn, 1e-7, 0);
    down(gmask_h, gmask, (size_t)yn * sizeof(int32_t));
    int64_t bad = 0;
    for (int64_t i = 0; i < yn; i++) bad += gmask_h[i] != mask[i];
    if (bad) fail_msg("%s: %lld of %lld mask entries differ from the CPU's", name, (long long)bad, (long long)yn);
    OK(C->pool2d_backward(C, &d, dy, mask, dx));
    OK(G->pool2d_backward(G, &d, gdy, gmask, gdx));
    snprintf(what, sizeof what, "%s backward", name);
    check_dev(what, gdx, dx, xn, 1e-6, 0);
    free(x), free(y), free(dy), free(dx), free(mask), free(gmask_h);
    dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gmask);
}

static void test_pooling(void **state) {
    (void)state;
    pool_case("max 2x2 (4, 26, 26, 32)", KC_POOL_MAX, 4, 26, 26, 32, 2, 2, false);
    pool_case("max 3x3 stride 2 same (3, 7, 7, 5)", KC_POOL_MAX, 3, 7, 7, 5, 3, 2, true);
    pool_case("max 3x3 stride 1 overlapping (2, 6, 5, 3)", KC_POOL_MAX, 2, 6, 5, 3, 3, 1, false);
    pool_case("avg 2x2 (4, 12, 12, 8)", KC_POOL_AVG, 4, 12, 12, 8, 2, 2, false);
    pool_case("avg 3x3 stride 2 same (3, 7, 7, 5)", KC_POOL_AVG, 3, 7, 7, 5, 3, 2, true);
    pool_case("avg 3x3 stride 1 overlapping (2, 6, 5, 3)", KC_POOL_AVG, 2, 6, 5, 3, 3, 1, false);

    const int n = 16, hw = 49, c = 40;
    float *x = hrand((int64_t)n * hw * c, -1, 1), *y = hbuf(n * c), *dy = hrand(n * c, -1, 1), *dx = hbuf((int64_t)n * hw * c);
    float *gx = dcopy(x, (int64_t)n * hw * c), *gy = dbuf(n * c), *gdy = dcopy(dy, n * c), *gdx = dbuf((int64_t)n * hw * c);
    OK(C->global_avg_pool_forward(C, x, y, n, hw, c));
    OK(G->global_avg_pool_forward(G, gx, gy, n, hw, c));
    check_dev("global average pooling forward", gy, y, n * c, 1e-7, 0);
    OK(C->global_avg_pool_backward(C, dy, dx, n, hw, c));
    OK(G->global_avg_pool_backward(G, gdy, gdx, n, hw, c));
    check_dev("global average pooling backward", gdx, dx, (int64_t)n * hw * c, 0, 0);
    free(x), free(y), free(dy), free(dx), dfree(gx), dfree(gy), dfree(gdy), dfree(gdx);
}

/* ---------------------------------------------------------------- batch normalization */

static void bn_case(const char *name, int64_t rows, int c, bool affine) {
    const int64_t n = rows * c;
    float *x = hrand(n, -2, 3), *y = hbuf(n), *gamma = hrand(c, 0.5f, 1.5f), *beta = hrand(c, -1, 1);
    float *mm = hrand(c, -0.1f, 0.1f), *mv = hrand(c, 0.8f, 1.2f), *sm = hbuf(c), *si = hbuf(c);
    float *gx = dcopy(x, n), *gy = dbuf(n), *ggamma = dcopy(gamma, c), *gbeta = dcopy(beta, c);
    float *gmm = dcopy(mm, c), *gmv = dcopy(mv, c), *gsm = dbuf(c), *gsi = dbuf(c);
    const float *G_gamma = affine ? ggamma : NULL, *G_beta = affine ? gbeta : NULL;
    const float *C_gamma = affine ? gamma : NULL, *C_beta = affine ? beta : NULL;
    char what[128];
    OK(C->batchnorm_forward_train(C, x, y, rows, c, C_gamma, C_beta, mm, mv, 0.99f, 1e-3f, sm, si));
    OK(G->batchnorm_forward_train(G, gx, gy, rows, c, G_gamma, G_beta, gmm, gmv, 0.99f, 1e-3f, gsm, gsi));
    snprintf(what, sizeof what, "batchnorm %s train y", name);
    check_dev(what, gy, y, n, 1e-5, 0);
    snprintf(what, sizeof what, "batchnorm %s saved mean", name);
    check_dev(what, gsm, sm, c, 1e-5, 0);
    snprintf(what, sizeof what, "batchnorm %s saved 1/std", name);
    check_dev(what, gsi, si, c, 1e-5, 0);
    snprintf(what, sizeof what, "batchnorm %s moving mean", name);
    check_dev(what, gmm, mm, c, 1e-5, 0);
    snprintf(what, sizeof what, "batchnorm %s moving variance", name);
    check_dev(what, gmv, mv, c, 1e-5, 0);
    OK(C->batchnorm_forward_infer(C, x, y, rows, c, C_gamma, C_beta, mm, mv, 1e-3f));
    OK(G->batchnorm_forward_infer(G, gx, gy, rows, c, G_gamma, G_beta, gmm, gmv, 1e-3f));
    snprintf(what, sizeof what, "batchnorm %s inference y", name);
    check_dev(what, gy, y, n, 1e-5, 0);
    float *dy = hrand(n, -1, 1), *dx = hbuf(n), *dg = hbuf(c), *dbt = hbuf(c);
    float *gdy = dcopy(dy, n), *gdx = dbuf(n), *gdg = dbuf(c), *gdbt = dbuf(c);
    OK(C->batchnorm_backward(C, x, dy, dx, rows, c, C_gamma, sm, si, affine ? dg : NULL, affine ? dbt : NULL));
    OK(G->batchnorm_backward(G, gx, gdy, gdx, rows, c, G_gamma, gsm, gsi, affine ? gdg : NULL, affine ? gdbt : NULL));
    snprintf(what, sizeof what, "batchnorm %s backward dx", name);
    check_dev(what, gdx, dx, n, 1e-5, 0);
    if (affine) {
        snprintf(what, sizeof what, "batchnorm %s backward dgamma", name);
        check_dev(what, gdg, dg, c, 1e-5, 0);
        snprintf(what, sizeof what, "batchnorm %s backward dbeta", name);
        check_dev(what, gdbt, dbt, c, 1e-5, 0);
    }
    free(x), free(y), free(gamma), free(beta), free(mm), free(mv), free(sm), free(si), free(dy), free(dx), free(dg), free(dbt);
    dfree(gx), dfree(gy), dfree(ggamma), dfree(gbeta), dfree(gmm), dfree(gmv), dfree(gsm), dfree(gsi), dfree(gdy);
    dfree(gdx), dfree(gdg), dfree(gdbt);
}

static void test_batchnorm(void **state) {
    (void)state;
    bn_case("(4*32*32, 32)", 4 * 32 * 32, 32, true);
    bn_case("(100000, 3)", 100000, 3, true);
    bn_case("(16, 130) dense", 16, 130, true);
    bn_case("(999, 7) no gamma/beta", 999, 7, false);
}

/* ---------------------------------------------------------------- activations, dropout */

static void act_case(kc_act kind, float alpha, float beta, float gamma, int cols) {
    static const char *names[KC_ACT_COUNT] = {
        "linear", "relu", "sigmoid", "tanh", "softmax", "elu", "gelu", "leaky_relu", "silu", "relu_general",
        "hard_sigmoid", "hard_silu", "softplus", "softsign", "selu", "mish", "exponential", "log_softmax", "gelu_tanh",
        "hard_sigmoid_k2"};
    kc_act_params a = {.kind = kind, .alpha = alpha, .beta = beta, .gamma = gamma};
    const int64_t n = 64 * 1001;
    float *x = hrand(n, -4, 4), *y = hbuf(n), *dy = hrand(n, -1, 1), *dx = hbuf(n);
    float *gx = dcopy(x, n), *gy = dbuf(n), *gdy = dcopy(dy, n), *gdx = dbuf(n);
    char what[128];
    OK(C->act_forward(C, a, x, y, n, cols));
    OK(G->act_forward(G, a, gx, gy, n, cols));
    snprintf(what, sizeof what, "%s forward", names[kind]);
    check_dev(what, gy, y, n, 2e-6, 0);
    /* backward from x and y (where the kind allows y alone, also from y only) */
    OK(C->act_backward(C, a, x, y, dy, dx, n, cols));
    OK(G->act_backward(G, a, gx, gy, gdy, gdx, n, cols));
    snprintf(what, sizeof what, "%s backward (x, y)", names[kind]);
    check_dev(what, gdx, dx, n, 2e-6, 0);
    const bool y_only = kind == KC_ACT_LINEAR || kind == KC_ACT_RELU || kind == KC_ACT_SIGMOID || kind == KC_ACT_TANH ||
                        kind == KC_ACT_SOFTMAX || kind == KC_ACT_ELU || kind == KC_ACT_LEAKY_RELU ||
                        kind == KC_ACT_RELU_GENERAL || kind == KC_ACT_EXPONENTIAL || kind == KC_ACT_LOG_SOFTMAX;
    if (y_only) {
        OK(C->act_backward(C, a, NULL, y, dy, dx, n, cols));
        OK(G->act_backward(G, a, NULL, gy, gdy, gdx, n, cols));
        snprintf(what, sizeof what, "%s backward (y only)", names[kind]);
        check_dev(what, gdx, dx, n, 2e-6, 0);
    }
    /* in place: y = f(y), dx = dy */
    OK(C->act_forward(C, a, x, x, n, cols));
    OK(G->act_forward(G, a, gx, gx, n, cols));
    snprintf(what, sizeof what, "%s forward in place", names[kind]);
    check_dev(what, gx, x, n, 2e-6, 0);
    free(x), free(y), free(dy), free(dx), dfree(gx), dfree(gy), dfree(gdy), dfree(gdx);
}

static void test_activations(void **state) {
    (void)state;
    act_case(KC_ACT_LINEAR, 0, 0, 0, 1);
    act_case(KC_ACT_RELU, 0, 0, 0, 1);
    act_case(KC_ACT_SIGMOID, 0, 0, 0, 1);
    act_case(KC_ACT_TANH, 0, 0, 0, 1);
    act_case(KC_ACT_SOFTMAX, 0, 0, 0, 1001);
    act_case(KC_ACT_SOFTMAX, 0, 0, 0, 7);
    act_case(KC_ACT_ELU, 1.0f, 0, 0, 1);
    act_case(KC_ACT_GELU, 0, 0, 0, 1);
    act_case(KC_ACT_LEAKY_RELU, 0.3f, 0, 0, 1);
    act_case(KC_ACT_SILU, 0, 0, 0, 1);
    act_case(KC_ACT_RELU_GENERAL, 0.1f, 1.5f, 0.5f, 1);
    /* broadcasting and activations */
    act_case(KC_ACT_HARD_SIGMOID, 0, 0, 0, 1);
    act_case(KC_ACT_HARD_SILU, 0, 0, 0, 1);
    act_case(KC_ACT_SOFTPLUS, 0, 0, 0, 1);
    act_case(KC_ACT_SOFTSIGN, 0, 0, 0, 1);
    act_case(KC_ACT_SELU, 0, 0, 0, 1);
    act_case(KC_ACT_MISH, 0, 0, 0, 1);
    act_case(KC_ACT_EXPONENTIAL, 0, 0, 0, 1);
    act_case(KC_ACT_LOG_SOFTMAX, 0, 0, 0, 1001);
    act_case(KC_ACT_LOG_SOFTMAX, 0, 0, 0, 7);
    act_case(KC_ACT_GELU_TANH, 0, 0, 0, 1);
    act_case(KC_ACT_HARD_SIGMOID_K2, 0, 0, 0, 1); /* elementwise fixes */
}

/* ---------------------------------------------------------------- broadcasting */

/* y = a op b over dims with a's and b's shapes (1 where broadcast, rank-aligned), forward
 * and both gradients, GPU against CPU. */
static void bcast_case(const char *name, kc_binop op, int rank, const int64_t *dims, const int64_t *ashape,
                       const int64_t *bshape) {
    int64_t an, bn, yn;
    kc_bcast_desc d = bcast_desc(rank, dims, ashape, bshape, &an, &bn, &yn);
    float *a = hrand(an, -2, 2), *b = hrand(bn, 0.5f, 2), *y = hbuf(yn), *dy = hrand(yn, -1, 1);
    float *da = hbuf(an), *db = hbuf(bn);
    float *ga = dcopy(a, an), *gb = dcopy(b, bn), *gy = dbuf(yn), *gdy = dcopy(dy, yn), *gda = dbuf(an), *gdb = dbuf(bn);
    char what[160];
    OK(C->binary_forward(C, op, &d, a, b, y));
    OK(G->binary_forward(G, op, &d, ga, gb, gy));
    snprintf(what, sizeof what, "%s forward", name);
    check_dev(what, gy, y, yn, 1e-6, 0);
    OK(C->binary_backward(C, op, &d, a, b, dy, da, db));
    OK(G->binary_backward(G, op, &d, ga, gb, gdy, gda, gdb));
    snprintf(what, sizeof what, "%s gradient of a", name);
    check_dev(what, gda, da, an, 1e-5, 0);
    snprintf(what, sizeof what, "%s gradient of b", name);
    check_dev(what, gdb, db, bn, 1e-5, 0);
    free(a), free(b), free(y), free(dy), free(da), free(db);
    dfree(ga), dfree(gb), dfree(gy), dfree(gdy), dfree(gda), dfree(gdb);
}

static void scalar_case(kc_binop op, float s, int scalar_first) {
    const int64_t n = 10007;
    float *x = hrand(n, 0.5f, 3), *y = hbuf(n), *dy = hrand(n, -1, 1), *dx = hbuf(n);
    float *gx = dcopy(x, n), *gy = dbuf(n), *gdy = dcopy(dy, n), *gdx = dbuf(n);
    char what[96];
    OK(C->scalar_forward(C, op, x, s, scalar_first, y, n));
    OK(G->scalar_forward(G, op, gx, s, scalar_first, gy, n));
    snprintf(what, sizeof what, "scalar op %d (s %g, first %d) forward", (int)op, (double)s, scalar_first);
    check_dev(what, gy, y, n, 1e-6, 0);
    OK(C->scalar_backward(C, op, x, s, scalar_first, dy, dx, n));
    OK(G->scalar_backward(G, op, gx, s, scalar_first, gdy, gdx, n));
    snprintf(what, sizeof what, "scalar op %d (s %g, first %d) backward", (int)op, (double)s, scalar_first);
    check_dev(what, gdx, dx, n, 1e-6, 0);
    free(x), free(y), free(dy), free(dx), dfree(gx), dfree(gy), dfree(gdy), dfree(gdx);
}

static void test_broadcast(void **state) {
    (void)state;
    static const int64_t se_y[4] = {8, 14, 14, 96}, se_a[4] = {8, 14, 14, 96}, se_b[4] = {8, 1, 1, 96};
    static const int64_t ch_b[4] = {8, 14, 14, 1}, row_b[4] = {1, 1, 1, 96};
    for (int op = 0; op < KC_BIN_COUNT; op++) {
        char name[96];
        snprintf(name, sizeof name, "op %d squeeze-excite (8,14,14,96) x (8,1,1,96)", op);
        bcast_case(name, (kc_binop)op, 4, se_y, se_a, se_b);
        snprintf(name, sizeof name, "op %d (8,1,1,96) x (8,14,14,96)", op);
        bcast_case(name, (kc_binop)op, 4, se_y, se_b, se_a);
        snprintf(name, sizeof name, "op %d (8,14,14,96) x (8,14,14,1)", op);
        bcast_case(name, (kc_binop)op, 4, se_y, se_a, ch_b);
        snprintf(name, sizeof name, "op %d same shapes", op);
        bcast_case(name, (kc_binop)op, 4, se_y, se_a, se_a);
        snprintf(name, sizeof name, "op %d PReLU-style (8,14,14,96) x (1,1,1,96)", op);
        bcast_case(name, (kc_binop)op, 4, se_y, se_a, row_b);
    }
    for (int op = 0; op < KC_BIN_COUNT; op++) {
        if (op == KC_BIN_PRELU) continue;
        scalar_case((kc_binop)op, 3.0f, 0);
        scalar_case((kc_binop)op, 1.5f, 1);
    }
}

static void test_dropout(void **state) {
    (void)state;
    const int64_t n = 300007;
    float *x = hrand(n, -1, 1), *y = hbuf(n), *dy = hrand(n, -1, 1), *dx = hbuf(n);
    uint8_t *mask = calloc((size_t)n, 1), *gmask_h = calloc((size_t)n, 1);
    float *gx = dcopy(x, n), *gy = dbuf(n), *gdy = dcopy(dy, n), *gdx = dbuf(n);
    uint8_t *gmask = dalloc((size_t)n);
    OK(C->dropout_forward(C, x, y, mask, n, 0.3f, 0x1234abcdull));
    OK(G->dropout_forward(G, gx, gy, gmask, n, 0.3f, 0x1234abcdull));
    down(gmask_h, gmask, (size_t)n);
    int64_t bad = 0, kept = 0;
    for (int64_t i = 0; i < n; i++) {
        bad += gmask_h[i] != mask[i];
        kept += mask[i];
    }
    if (bad) fail_msg("dropout: %lld of %lld mask entries differ from the CPU's", (long long)bad, (long long)n);
    assert_true(kept > n * 0.68 && kept < n * 0.72);
    check_dev("dropout forward", gy, y, n, 0, 0);
    OK(C->dropout_backward(C, dy, mask, dx, n, 0.3f));
    OK(G->dropout_backward(G, gdy, gmask, gdx, n, 0.3f));
    check_dev("dropout backward", gdx, dx, n, 0, 0);
    free(x), free(y), free(dy), free(dx), free(mask), free(gmask_h);
    dfree(gx), dfree(gy), dfree(gdy), dfree(gdx), dfree(gmask);
}

/* ---------------------------------------------------------------- losses and accuracy */

static void softmax_rows(float *p, int n, int c) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < c; j++) s += p[i * c + j] = expf(p[i * c + j]);
        for (int j = 0; j < c; j++) p[i * c + j] = (float)(p[i * c + j] / s);
    }
}

static void loss_case(kc_loss_kind kind, int logits, int n, int c) {
    static const char *names[] = {"sparse_cce", "cce", "bce", "mse", "mae"};
    float *pred = hrand((int64_t)n * c, -3, 3), *target = hbuf((int64_t)n * c);
    if (!logits && (kind == KC_LOSS_SPARSE_CCE || kind == KC_LOSS_CCE)) softmax_rows(pred, n, c);
    if (!logits && kind == KC_LOSS_BCE)
        for (int64_t i = 0; i < (int64_t)n * c; i++) pred[i] = 1.0f / (1.0f + expf(-pred[i]));
    int tw = kind == KC_LOSS_SPARSE_CCE ? 1 : c;
    for (int i = 0; i < n; i++) {
        if (kind == KC_LOSS_SPARSE_CCE) target[i] = (float)(kc__rng_below(&R, (uint64_t)c));
        else if (kind == KC_LOSS_CCE) {
            double s = 0;
            for (int j = 0; j < c; j++) s += target[i * c + j] = unif(0, 1);
            for (int j = 0; j < c; j++) target[i * c + j] = (float)(target[i * c + j] / s);
        } else if (kind == KC_LOSS_BCE) {
            for (int j = 0; j < c; j++) target[i * c + j] = (float)kc__rng_below(&R, 2);
        } else {
            for (int j = 0; j < c; j++) target[i * c + j] = unif(-2, 2);
        }
    }
    kc_loss_desc d = {.kind = kind, .n = n, .c = c, .from_logits = logits};
    float loss = 0, gloss = 0, *dp = hbuf((int64_t)n * c);
    float *gpred = dcopy(pred, (int64_t)n * c), *gt = dcopy(target, (int64_t)n * tw), *gdp = dbuf((int64_t)n * c);
    float *gls = dbuf(1);
    OK(C->loss_forward_backward(C, &d, pred, target, &loss, dp, n + 3));
    OK(G->loss_forward_backward(G, &d, gpred, gt, gls, gdp, n + 3));
    down(&gloss, gls, sizeof gloss);
    char what[128];
    snprintf(what, sizeof what, "loss %s%s (%d, %d) value", names[kind], logits ? " logits" : "", n, c);
    check_host(what, &gloss, &loss, 1, 1e-5);
    snprintf(what, sizeof what, "loss %s%s (%d, %d) gradient", names[kind], logits ? " logits" : "", n, c);
    check_dev(what, gdp, dp, (int64_t)n * c, 1e-5, 0);
    OK(G->loss_forward_backward(G, &d, gpred, gt, gls, NULL, n)); /* evaluation: no gradient */
    down(&gloss, gls, sizeof gloss);
    snprintf(what, sizeof what, "loss %s%s value without gradient", names[kind], logits ? " logits" : "");
    check_host(what, &gloss, &loss, 1, 1e-5);
    free(pred), free(target), free(dp), dfree(gpred), dfree(gt), dfree(gdp), dfree(gls);
}

static void test_losses(void **state) {
    (void)state;
    for (int logits = 0; logits < 2; logits++) {
        loss_case(KC_LOSS_SPARSE_CCE, logits, 256, 10);
        loss_case(KC_LOSS_SPARSE_CCE, logits, 33, 1000);
        loss_case(KC_LOSS_CCE, logits, 128, 10);
        loss_case(KC_LOSS_BCE, logits, 64, 3);
    }
    loss_case(KC_LOSS_MSE, 0, 64, 5);
    loss_case(KC_LOSS_MAE, 0, 64, 5);

    /* a label that is not a class index: the CPU refuses at once, the GPU at the next read */
    float pred[2 * 10] = {0}, target[2] = {3.0f, 10.0f}, ls = 0;
    kc_loss_desc d = {.kind = KC_LOSS_SPARSE_CCE, .n = 2, .c = 10, .from_logits = 1};
    assert_int_equal(C->loss_forward_backward(C, &d, pred, target, &ls, NULL, 2), KC_STATUS_INVALID_ARGUMENT);
    float *gp = dcopy(pred, 20), *gt = dcopy(target, 2), *gl = dbuf(1);
    assert_int_equal(G->loss_forward_backward(G, &d, gp, gt, gl, NULL, 2), KC_STATUS_OK);
    assert_int_equal(G->to_host(G, &ls, gl, sizeof ls), KC_STATUS_INVALID_ARGUMENT);
    if (!quiet) printf("    bad label reported: %s\n", kc_last_error());
    assert_non_null(strstr(kc_last_error(), "label 10 of example 1"));
    OK(G->sync(G)); /* reported once */
    dfree(gp), dfree(gt), dfree(gl);
}

static void count_case(const char *name, int n, int c, int sparse, int k, int logits) {
    float *pred = hrand((int64_t)n * c, -1, 1), *target = hbuf((int64_t)n * (sparse ? 1 : c));
    for (int i = 0; i < n / 7; i++) /* some rows of ties: the first index wins */
        for (int j = 0; j < c; j++) pred[(int64_t)i * 7 * c + j] = 0.25f;
    for (int i = 0; i < n; i++) {
        if (c == 1) target[i] = (float)kc__rng_below(&R, 2);
        else if (sparse) target[i] = (float)kc__rng_below(&R, (uint64_t)c);
        else
            for (int j = 0; j < c; j++) target[(int64_t)i * c + j] = unif(0, 1);
    }
    float cnt = 5.0f, gcnt = 0; /* counts are added to what is there */
    float *gpred = dcopy(pred, (int64_t)n * c), *gt = dcopy(target, (int64_t)n * (sparse ? 1 : c)), *gc = dcopy(&cnt, 1);
    OK(C->count_correct(C, pred, target, n, c, sparse, k, logits, &cnt));
    OK(G->count_correct(G, gpred, gt, n, c, sparse, k, logits, gc));
    down(&gcnt, gc, sizeof gcnt);
    if (gcnt != cnt) fail_msg("accuracy %s: GPU counts %g, CPU %g", name, (double)gcnt, (double)cnt);
    if (!quiet) printf("    %-60s %g = %g\n", name, (double)gcnt, (double)cnt);
    free(pred), free(target), dfree(gpred), dfree(gt), dfree(gc);
}

static void test_accuracy(void **state) {
    (void)state;
    count_case("accuracy sparse top-1 (1000, 10)", 1000, 10, 1, 1, 0);
    count_case("accuracy sparse top-5 (1000, 100)", 1000, 100, 1, 5, 0);
    count_case("accuracy categorical top-1 (500, 10)", 500, 10, 0, 1, 0);
    count_case("accuracy categorical top-3 (500, 40)", 500, 40, 0, 3, 1);
    count_case("accuracy binary probabilities (999, 1)", 999, 1, 0, 1, 0);
    count_case("accuracy binary logits (999, 1)", 999, 1, 1, 1, 1);
}

/* ---------------------------------------------------------------- optimizers */

/* clipnorm > 0: the gradients' norm is clipped on the device, from each backend's own
 * sum_squares (a host float for the CPU, a device float for the GPU) */
static void opt_case(const char *name, kc_opt_step s, int slots, float clipnorm) {
    const int64_t n = 100003;
    float *p = hrand(n, -1, 1), *g = hbuf(n), *s0 = hbuf(n), *s1 = hbuf(n);
    float *gp = dcopy(p, n), *gg = dbuf(n), *gs0 = dcopy(s0, n), *gs1 = dcopy(s1, n);
    float cpu_ss = 0, *gpu_ss = dbuf(1);
    for (int step = 1; step <= 3; step++) {
        for (int64_t i = 0; i < n; i++) g[i] = unif(-1, 1);
        up(gg, g, (size_t)n * sizeof(float));
        s.t = step;
        kc_opt_step sc = s, sg = s;
        if (clipnorm > 0) {
            OK(C->sum_squares(C, g, n, &cpu_ss));
            OK(G->sum_squares(G, gg, n, gpu_ss));
            sc.clipnorm = sg.clipnorm = clipnorm;
            sc.norm_sq = &cpu_ss;
            sg.norm_sq = gpu_ss;
        }
        OK(C->optimizer_step(C, &sc, p, g, slots > 0 ? s0 : NULL, slots > 1 ? s1 : NULL, n));
        OK(G->optimizer_step(G, &sg, gp, gg, slots > 0 ? gs0 : NULL, slots > 1 ? gs1 : NULL, n));
    }
    dfree(gpu_ss);
    char what[128];
    snprintf(what, sizeof what, "%s: parameters after 3 steps", name);
    check_dev(what, gp, p, n, 1e-6, 0);
    if (slots > 0) {
        snprintf(what, sizeof what, "%s: slot 0", name);
        check_dev(what, gs0, s0, n, 1e-6, 0);
    }
    if (slots > 1) {
        snprintf(what, sizeof what, "%s: slot 1", name);
        check_dev(what, gs1, s1, n, 1e-6, 0);
    }
    free(p), free(g), free(s0), free(s1), dfree(gp), dfree(gg), dfree(gs0), dfree(gs1);
}

static void test_optimizers(void **state) {
    (void)state;
    opt_case("sgd", (kc_opt_step){.kind = KC_OPT_SGD, .lr = 0.01f, .grad_scale = 1}, 0, 0);
    opt_case("sgd momentum", (kc_opt_step){.kind = KC_OPT_SGD, .lr = 0.01f, .momentum = 0.9f, .grad_scale = 0.5f}, 1, 0);
    opt_case("sgd nesterov", (kc_opt_step){.kind = KC_OPT_SGD, .lr = 0.01f, .momentum = 0.9f, .nesterov = 1,
                                           .grad_scale = 1}, 1, 0);
    opt_case("adam", (kc_opt_step){.kind = KC_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                   .epsilon = 1e-7f, .grad_scale = 1}, 2, 0);
    opt_case("adamw", (kc_opt_step){.kind = KC_OPT_ADAMW, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                    .epsilon = 1e-7f, .weight_decay = 0.004f, .grad_scale = 1}, 2, 0);
    opt_case("rmsprop", (kc_opt_step){.kind = KC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .epsilon = 1e-7f,
                                      .grad_scale = 1}, 1, 0);
    opt_case("rmsprop momentum", (kc_opt_step){.kind = KC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .momentum = 0.9f,
                                               .epsilon = 1e-7f, .grad_scale = 1}, 2, 0);
    /* the norm of 100003 uniform(-1, 1) values is about 183: clipped to 10 */
    opt_case("sgd momentum clipnorm", (kc_opt_step){.kind = KC_OPT_SGD, .lr = 0.01f, .momentum = 0.9f,
                                                    .grad_scale = 1}, 1, 10.0f);
    opt_case("adam clipnorm", (kc_opt_step){.kind = KC_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f,
                                            .epsilon = 1e-7f, .grad_scale = 1}, 2, 10.0f);
}

/* ---------------------------------------------------------------- memory */

static void test_memory(void **state) {
    (void)state;
    size_t in0 = 0, peak0 = 0, in1 = 0;
    G->memory_stats(G, &in0, &peak0);
    float *a = dbuf(1 << 20), *b = dbuf(1000);
    G->memory_stats(G, &in1, NULL);
    assert_true(in1 >= in0 + (4u << 20) + 4000);
    float *h = hrand(1000, -1, 1), *h2 = hbuf(1000);
    up(b, h, 4000);
    OK(G->copy(G, a + 5, b, 4000));
    down(h2, a + 5, 4000);
    assert_memory_equal(h, h2, 4000);
    OK(G->memset0(G, a + 5, 4000));
    down(h2, a + 5, 4000);
    for (int i = 0; i < 1000; i++) assert_true(h2[i] == 0.0f);
    dfree(a), dfree(b);
    size_t in2 = 0;
    G->memory_stats(G, &in2, NULL);
    assert_int_equal(in2, in0);
    /* a cap: an allocation past it fails with the bytes asked, held and allowed */
    G->set_memory_limit(G, in0 + (1u << 20));
    void *p = NULL;
    kc_status s = G->alloc(G, 8u << 20, &p);
    assert_int_equal(s, KC_STATUS_OUT_OF_MEMORY);
    assert_null(p);
    if (!quiet) printf("    memory limit message: %s\n", kc_last_error());
    assert_non_null(strstr(kc_last_error(), "asked"));
    assert_non_null(strstr(kc_last_error(), "limit"));
    G->set_memory_limit(G, 0);
    G->release_cache(G);
    kc_mem_info mi = {0};
    OK(G->mem_info(G, &mi));
    assert_true(mi.total_bytes > 0 && mi.free_bytes <= mi.total_bytes);
    if (!quiet) printf("    mem_info: %.1f GiB free of %.1f GiB\n", mi.free_bytes / 1073741824.0, mi.total_bytes / 1073741824.0);
    /* more than the device has: a clean out-of-memory, not an abort */
    s = G->alloc(G, mi.total_bytes + ((size_t)1 << 30), &p);
    assert_int_equal(s, KC_STATUS_OUT_OF_MEMORY);
    if (!quiet) printf("    out of memory message: %s\n", kc_last_error());
    assert_non_null(strstr(kc_last_error(), "asked"));
    free(h), free(h2);
}

/* The input feed on the device: uploads on the copy stream racing long compute on the
 * compute stream, as fit runs them (batch k + 1 is put while step k computes). Step k adds
 * its slot's batch (all k + 1) into its own result R times; an upload landing before the
 * previous reader of its slot finished, or a read before its upload landed, would leave
 * other values there. A backend of its own without KERAC_CUDA_DEBUG_SYNC, so that the two
 * streams really overlap. */
/* KERAC_CUDA_DEBUG_SYNC off while a backend opens (it is read then), and back after. */
static void debug_sync_off(char *saved, size_t n) {
    const char *v = getenv("KERAC_CUDA_DEBUG_SYNC");
    snprintf(saved, n, "%s", v ? v : "");
    unsetenv("KERAC_CUDA_DEBUG_SYNC");
}

static void debug_sync_restore(const char *saved) {
    if (saved[0]) setenv("KERAC_CUDA_DEBUG_SYNC", saved, 1);
}

/* put(k): wait until the slot's last upload has read its host buffer, refill it, upload */
static void feed_put(kc_backend *F, float **host, float **dev, int64_t n, int k) {
    int slot = k % KC_FEED_SLOTS;
    OK(F->feed_wait(F, slot));
    for (int64_t i = 0; i < n; i++) host[slot][i] = (float)(k + 1);
    OK(F->feed_upload(F, slot, dev[slot], host[slot], (size_t)n * sizeof(float)));
}

static void test_feed(void **state) {
    (void)state;
    char saved[16];
    debug_sync_off(saved, sizeof saved);
    kc_backend *F = NULL;
    OK(kc_backend_open("cuda", &F));
    debug_sync_restore(saved);
    enum { STEPS = 8, R = 24 };
    const int64_t n = (int64_t)4 << 20;
    const size_t bytes = (size_t)n * sizeof(float);
    float *host[KC_FEED_SLOTS], *dev[KC_FEED_SLOTS], *res[STEPS];
    for (int i = 0; i < KC_FEED_SLOTS; i++) {
        OK(F->host_alloc(F, bytes, (void **)&host[i]));
        OK(F->alloc(F, bytes, (void **)&dev[i]));
    }
    for (int k = 0; k < STEPS; k++) {
        OK(F->alloc(F, bytes, (void **)&res[k]));
        OK(F->memset0(F, res[k], bytes));
    }
    double t0 = kc__now();
    feed_put(F, host, dev, n, 0);
    for (int k = 0; k < STEPS; k++) {
        int s = k % KC_FEED_SLOTS;
        OK(F->feed_acquire(F, s));
        for (int r = 0; r < R; r++) OK(F->axpy(F, res[k], dev[s], 1.0f, n));
        OK(F->feed_release(F, s));
        if (k + 1 < STEPS) feed_put(F, host, dev, n, k + 1);
    }
    OK(F->sync(F));
    double secs = kc__now() - t0;
    float *h = hbuf(n);
    for (int k = 0; k < STEPS; k++) {
        OK(F->to_host(F, h, res[k], bytes));
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < n; i++)
            if (h[i] != (float)(R * (k + 1)) && bad++ == 0) first = i;
        if (bad)
            fail_msg("feed step %d: %lld of %lld values wrong (first at %lld: %g, expected %d)", k, (long long)bad,
                     (long long)n, (long long)first, h[first], R * (k + 1));
    }
    if (!quiet) printf("    feed: %d steps of %d MiB uploads racing %d reads each: all values right (%.1f ms)\n", STEPS,
                       (int)(bytes >> 20), R, 1e3 * secs);
    free(h);
    for (int k = 0; k < STEPS; k++) F->free(F, res[k]);
    for (int i = 0; i < KC_FEED_SLOTS; i++) {
        F->free(F, dev[i]);
        F->host_free(F, host[i]);
    }
    kc_backend_destroy(F);
}

/* ---------------------------------------------------------------- layers */

typedef struct lcase {
    const char *what;
    const kc_layer_spec *spec;
    int n_in;
    kc_shape in[3];
    int batch;
    bool training;
    double bound;   /* 0: 2e-5 */
    bool kink;      /* a fused ReLU-like kink may meet a pre-activation near 0 */
} lcase;

static void fill_weight(const kc_weight *w, float *h) {
    for (int64_t i = 0; i < w->size; i++) {
        if (strcmp(w->name, "gamma") == 0) h[i] = unif(0.5f, 1.5f);
        else if (strcmp(w->name, "moving_variance") == 0 || strcmp(w->name, "variance") == 0) h[i] = unif(0.8f, 1.2f);
        else if (strcmp(w->name, "moving_mean") == 0) h[i] = unif(-0.1f, 0.1f);
        else h[i] = unif(-0.5f, 0.5f);
    }
}

static void run_layer_case(void **state) {
    const lcase *c = *state;
    const double bound = c->bound > 0 ? c->bound : 2e-5;
    kc_layer *lc = NULL, *lg = NULL;
    OK(kc__layer_create(c->spec, &lc));
    OK(kc__layer_create(c->spec, &lg));
    kc_layer *ls[2] = {lc, lg};
    for (int k = 0; k < 2; k++) {
        snprintf(ls[k]->name, sizeof ls[k]->name, "t");
        ls[k]->n_in = c->n_in;
        for (int i = 0; i < c->n_in; i++) ls[k]->in_shape[i] = c->in[i];
        OK(ls[k]->ops->build(ls[k]));
        ls[k]->seed = 77;
    }
    const int B = c->batch;
    int64_t xn[3], yn = (int64_t)B * kc__shape_size(&lc->out_shape);
    float *hx[3], *gx[3], *hdx[3], *gdx[3];
    for (int i = 0; i < c->n_in; i++) {
        xn[i] = (int64_t)B * kc__shape_size(&c->in[i]);
        hx[i] = hrand(xn[i], -1, 1);
        gx[i] = dcopy(hx[i], xn[i]);
        hdx[i] = hbuf(xn[i]);
        gdx[i] = dbuf(xn[i]);
    }
    for (int k = 0; k < lc->n_weights; k++) {
        float *h = hbuf(lc->w[k].size);
        fill_weight(&lc->w[k], h);
        lc->w[k].data = h;
        lc->w[k].grad = lc->w[k].trainable ? hbuf(lc->w[k].size) : NULL;
        lg->w[k].data = dcopy(h, lc->w[k].size);
        lg->w[k].grad = lg->w[k].trainable ? dbuf(lg->w[k].size) : NULL;
    }
    size_t aux = lc->ops->aux_bytes ? lc->ops->aux_bytes(lc, B) : 0;
    size_t cws = lc->ops->workspace_bytes ? lc->ops->workspace_bytes(lc, B, C) : 0;
    size_t gws = lg->ops->workspace_bytes ? lg->ops->workspace_bytes(lg, B, G) : 0;
    void *caux = aux ? calloc(1, aux) : NULL, *gaux = aux ? dalloc(aux) : NULL;
    void *cws_p = cws ? malloc(cws) : NULL, *gws_p = gws ? dalloc(gws) : NULL;
    float *hy = hbuf(yn), *gy = dbuf(yn), *hdy = hrand(yn, -1, 1), *gdy = dcopy(hdy, yn);

    kc_fwd fc = {.be = C, .batch = B, .training = c->training, .y = hy, .aux = caux, .ws = cws_p, .ws_bytes = cws, .seed = 99};
    kc_fwd fg = {.be = G, .batch = B, .training = c->training, .y = gy, .aux = gaux, .ws = gws_p, .ws_bytes = gws, .seed = 99};
    for (int i = 0; i < c->n_in; i++) fc.x[i] = hx[i], fg.x[i] = gx[i];
    OK(lc->ops->forward(lc, &fc));
    OK(lg->ops->forward(lg, &fg));
    char what[160];
    snprintf(what, sizeof what, "%s: forward", c->what);
    check_dev(what, gy, hy, yn, bound, c->kink);
    for (int k = 0; k < lc->n_weights; k++)
        if (!lc->w[k].trainable) { /* moving statistics updated by a training forward */
            snprintf(what, sizeof what, "%s: %s after forward", c->what, lc->w[k].name);
            check_dev(what, lg->w[k].data, lc->w[k].data, lc->w[k].size, 1e-5, 0);
        }
    if (!c->training) { /* a backward follows a training forward (layers keep their state for it only then) */
        fc.training = fg.training = true;
        OK(lc->ops->forward(lc, &fc));
        OK(lg->ops->forward(lg, &fg));
    }
    kc_bwd bc = {.be = C, .batch = B, .y = hy, .dy = hdy, .aux = caux, .ws = cws_p, .ws_bytes = cws};
    kc_bwd bg = {.be = G, .batch = B, .y = gy, .dy = gdy, .aux = gaux, .ws = gws_p, .ws_bytes = gws};
    for (int i = 0; i < c->n_in; i++) bc.x[i] = hx[i], bc.dx[i] = hdx[i], bg.x[i] = gx[i], bg.dx[i] = gdx[i];
    OK(lc->ops->backward(lc, &bc));
    OK(lg->ops->backward(lg, &bg));
    for (int i = 0; i < c->n_in; i++) {
        snprintf(what, sizeof what, "%s: dx%d", c->what, i);
        check_dev(what, gdx[i], hdx[i], xn[i], bound, c->kink);
    }
    for (int k = 0; k < lc->n_weights; k++)
        if (lc->w[k].trainable) {
            snprintf(what, sizeof what, "%s: d%s", c->what, lc->w[k].name);
            check_dev(what, lg->w[k].grad, lc->w[k].grad, lc->w[k].size, bound, c->kink);
        }

    for (int i = 0; i < c->n_in; i++) free(hx[i]), free(hdx[i]), dfree(gx[i]), dfree(gdx[i]);
    for (int k = 0; k < lc->n_weights; k++) {
        free(lc->w[k].data), free(lc->w[k].grad);
        dfree(lg->w[k].data), dfree(lg->w[k].grad);
    }
    free(caux), free(cws_p), free(hy), free(hdy);
    dfree(gaux), dfree(gws_p), dfree(gy), dfree(gdy);
    kc__layer_destroy(lc);
    kc__layer_destroy(lg);
}

#define S1(a) {1, {a}}
#define S2(a, b) {2, {a, b}}
#define S3(a, b, c) {3, {a, b, c}}
#define DENSE_ACT(a) KC_DENSE(.units = 32, .activation = a)
#define CONV_ACT(a) KC_CONV2D(.filters = 16, .kernel_size = {3, 3}, .activation = a)
#define ACTL(a) KC_ACTIVATION(.activation = a)

static const lcase k_layers[] = {
    {"Dense linear", DENSE_ACT("linear"), 1, {S1(64)}, 16},
    {"Dense relu", DENSE_ACT("relu"), 1, {S1(64)}, 16, .kink = true},
    {"Dense softmax", DENSE_ACT("softmax"), 1, {S1(64)}, 16},
    {"Dense gelu", DENSE_ACT("gelu"), 1, {S1(64)}, 16},
    {"Dense silu", DENSE_ACT("silu"), 1, {S1(64)}, 16},
    {"Dense tanh no bias", KC_DENSE(.units = 20, .activation = "tanh", .use_bias = KC_FALSE), 1, {S1(30)}, 8},
    {"Dense rank-3 input", KC_DENSE(.units = 9), 1, {S3(4, 5, 12)}, 6},
    {"Conv2D relu", CONV_ACT("relu"), 1, {S3(12, 12, 3)}, 4, .kink = true},
    {"Conv2D sigmoid", CONV_ACT("sigmoid"), 1, {S3(10, 9, 4)}, 3},
    {"Conv2D elu", CONV_ACT("elu"), 1, {S3(10, 9, 4)}, 3, .kink = true},
    {"Conv2D softmax", CONV_ACT("softmax"), 1, {S3(8, 8, 2)}, 2},
    {"Conv2D gelu", CONV_ACT("gelu"), 1, {S3(8, 8, 2)}, 2},
    {"Conv2D stride 2 same (asymmetric)", KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .strides = {2, 2},
                                                    .padding = "same"), 1, {S3(12, 12, 3)}, 4},
    {"Conv2D dilation 2", KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .dilation_rate = {2, 2}), 1,
     {S3(11, 11, 3)}, 2},
    {"Conv2D same even kernel", KC_CONV2D(.filters = 5, .kernel_size = {2, 2}, .padding = "same"), 1,
     {S3(7, 7, 3)}, 2},
    {"Conv2D 1x1", KC_CONV2D(.filters = 12, .kernel_size = {1, 1}), 1, {S3(9, 9, 8)}, 3},
    {"Conv2D 5x5 same no bias", KC_CONV2D(.filters = 4, .kernel_size = {5, 5}, .padding = "same",
                                          .use_bias = KC_FALSE), 1, {S3(9, 9, 3)}, 2},
    {"Conv2D rect stride (2, 1)", KC_CONV2D(.filters = 4, .kernel_size = {3, 2}, .strides = {2, 1}), 1,
     {S3(9, 7, 3)}, 2},
    {"DepthwiseConv2D relu same", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same", .activation = "relu"),
     1, {S3(12, 12, 8)}, 4, .kink = true},
    {"DepthwiseConv2D multiplier 2 stride 2 no bias",
     KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}, .depth_multiplier = 2, .use_bias = KC_FALSE), 1,
     {S3(11, 11, 6)}, 3},
    {"DepthwiseConv2D dilation 2 relu6",
     KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .dilation_rate = {2, 2}, .activation = "relu6"), 1,
     {S3(9, 9, 4)}, 2, .kink = true},
    {"ReLU max_value 6 (relu6)", KC_RELU(.max_value = 6.0f), 1, {S3(4, 4, 6)}, 4},
    {"MaxPooling2D 2x2", KC_MAXPOOL2D(), 1, {S3(12, 12, 8)}, 4, .bound = 1e-6},
    {"MaxPooling2D 3x3 s2 same", KC_MAXPOOL2D(.pool_size = {3, 3}, .strides = {2, 2}, .padding = "same"), 1,
     {S3(7, 7, 4)}, 3, .bound = 1e-6},
    {"AveragePooling2D 2x2", KC_AVGPOOL2D(), 1, {S3(12, 12, 8)}, 4, .bound = 1e-6},
    {"AveragePooling2D 3x3 s2 same", KC_AVGPOOL2D(.pool_size = {3, 3}, .strides = {2, 2}, .padding = "same"), 1,
     {S3(7, 7, 4)}, 3, .bound = 1e-6},
    {"GlobalAveragePooling2D", KC_GLOBALAVGPOOL2D(), 1, {S3(6, 5, 16)}, 4, .bound = 1e-7},
    {"Dropout training", KC_DROPOUT(.rate = 0.3f), 1, {S2(10, 20)}, 8, .training = true, .bound = 1e-7},
    {"Dropout inference", KC_DROPOUT(.rate = 0.3f), 1, {S2(10, 20)}, 8, .bound = 1e-7},
    {"BatchNormalization conv", KC_BATCHNORM(), 1, {S3(6, 6, 8)}, 8, .training = true, .bound = 1e-5},
    {"BatchNormalization dense", KC_BATCHNORM(), 1, {S1(24)}, 16, .training = true, .bound = 1e-5},
    {"BatchNormalization no center", KC_BATCHNORM(.center = KC_FALSE), 1, {S3(3, 3, 5)}, 4, .training = true,
     .bound = 1e-5},
    {"BatchNormalization no scale", KC_BATCHNORM(.scale = KC_FALSE), 1, {S3(3, 3, 5)}, 4, .training = true,
     .bound = 1e-5},
    {"BatchNormalization inference", KC_BATCHNORM(), 1, {S3(6, 6, 8)}, 8, .bound = 1e-5},
    {"Activation linear", ACTL("linear"), 1, {S2(8, 16)}, 4},
    {"Activation relu", ACTL("relu"), 1, {S2(8, 16)}, 4},
    {"Activation sigmoid", ACTL("sigmoid"), 1, {S2(8, 16)}, 4},
    {"Activation tanh", ACTL("tanh"), 1, {S2(8, 16)}, 4},
    {"Activation softmax", ACTL("softmax"), 1, {S2(8, 16)}, 4},
    {"Activation elu", ACTL("elu"), 1, {S2(8, 16)}, 4},
    {"Activation gelu", ACTL("gelu"), 1, {S2(8, 16)}, 4},
    {"Activation leaky_relu", ACTL("leaky_relu"), 1, {S2(8, 16)}, 4},
    {"Activation silu", ACTL("silu"), 1, {S2(8, 16)}, 4},
    {"ReLU general", KC_RELU(.max_value = 0.8f, .negative_slope = 0.1f, .threshold = 0.2f), 1, {S3(4, 4, 6)}, 4},
    {"Softmax", KC_SOFTMAX(), 1, {S2(3, 10)}, 6},
    {"ZeroPadding2D asymmetric", KC_ZEROPAD2D(.padding = {{1, 2}, {0, 3}}), 1, {S3(5, 4, 3)}, 3, .bound = 1e-7},
    {"Add 2 inputs", KC_ADD(), 2, {S3(4, 4, 6), S3(4, 4, 6)}, 3, .bound = 1e-7},
    {"Add 3 inputs", KC_ADD(), 3, {S2(5, 7), S2(5, 7), S2(5, 7)}, 3, .bound = 1e-7},
    {"Concatenate 2 inputs", KC_CONCATENATE(), 2, {S3(4, 4, 6), S3(4, 4, 2)}, 3, .bound = 1e-7},
    {"Concatenate 3 inputs", KC_CONCATENATE(), 3, {S1(3), S1(8), S1(5)}, 5, .bound = 1e-7},
    /* normalisation and resampling: GPU-vs-CPU parity of the normalisation and resampling kernels */
    {"Rescaling per channel", KC_RESCALING(.scale = {3, 1, {2.0f, -0.5f, 1.5f}}, .offset = {3, 1, {1, 2, 3}}), 1,
     {S3(9, 7, 3)}, 4, .bound = 1e-6},
    {"Normalization config invert", KC_NORMALIZATION(.mean = {1, 0, {0.5f}}, .variance = {1, 0, {2.0f}},
                                                     .invert = KC_TRUE), 1, {S2(6, 10)}, 4, .bound = 1e-6},
    {"Normalization weights", KC_NORMALIZATION(), 1, {S3(5, 5, 6)}, 4, .bound = 1e-6},
    {"LayerNormalization (ConvNeXt 96 channels)", KC_LAYERNORM(.epsilon = 1e-6f), 1, {S3(14, 14, 96)}, 4,
     .training = true, .bound = 1e-5},
    {"LayerNormalization axes (1, 2, 3) no center", KC_LAYERNORM(.axis = {3, 1, 0, {1, 2, 3}}, .center = KC_FALSE), 1,
     {S3(6, 5, 8)}, 3, .training = true, .bound = 1e-5},
    {"LayerNormalization inference", KC_LAYERNORM(), 1, {S2(7, 33)}, 5, .bound = 1e-5},
    {"GroupNormalization 32 groups", KC_GROUPNORM(), 1, {S3(8, 8, 64)}, 3, .training = true, .bound = 1e-5},
    {"GroupNormalization -1 no scale", KC_GROUPNORM(.groups = -1, .scale = KC_FALSE), 1, {S3(5, 6, 12)}, 3,
     .training = true, .bound = 1e-5},
    {"UpSampling2D nearest (2, 3)", KC_UPSAMPLING2D(.size = {2, 3}), 1, {S3(7, 5, 6)}, 3, .bound = 1e-6},
    {"UpSampling2D bilinear", KC_UPSAMPLING2D(.interpolation = "bilinear"), 1, {S3(9, 8, 5)}, 3, .bound = 1e-5},
    {"UpSampling2D bilinear (3, 2)", KC_UPSAMPLING2D(.size = {3, 2}, .interpolation = "bilinear"), 1, {S3(4, 7, 3)},
     3, .bound = 1e-5},
    {"Cropping2D", KC_CROPPING2D(.cropping = {{1, 2}, {0, 3}}), 1, {S3(9, 8, 4)}, 3, .bound = 1e-7},
    {"GlobalMaxPooling2D keepdims", KC_GLOBALMAXPOOL2D(.keepdims = KC_TRUE), 1, {S3(6, 7, 10)}, 4, .training = true,
     .bound = 1e-7},
    {"Permute (3, 1, 2)", KC_PERMUTE(.dims = {3, 1, 2}), 1, {S3(5, 6, 7)}, 3, .bound = 1e-7},
    {"Permute (2, 1)", KC_PERMUTE(.dims = {2, 1}), 1, {S2(9, 4)}, 3, .bound = 1e-7},
    {"RepeatVector", KC_REPEAT_VECTOR(.n = 4), 1, {S1(11)}, 5, .bound = 1e-6},
    {"Dense on (N, H, W, C)", KC_DENSE(.units = 7), 1, {{4, {3, 4, 5, 6}}}, 2, .bound = 1e-5},
    /* regularising layers */
    {"SpatialDropout2D training", KC_SPATIAL_DROPOUT2D(.rate = 0.3f), 1, {S3(5, 4, 12)}, 8, .training = true,
     .bound = 1e-7},
    {"StochasticDepth training", KC_STOCHASTIC_DEPTH(.drop_path_rate = 0.4f), 1, {S3(3, 3, 5)}, 16, .training = true,
     .bound = 1e-7},
    {"LayerScale", KC_LAYER_SCALE(.init_values = 0.5f, .projection_dim = 6), 1, {S3(4, 5, 6)}, 4, .training = true,
     .bound = 1e-6},
    /* Gaussian noise layers: the same counter-based draws on both devices */
    {"GaussianNoise training", KC_GAUSSIAN_NOISE(.stddev = 0.8f), 1, {S3(6, 5, 7)}, 9, .training = true,
     .bound = 1e-5},
    {"GaussianDropout training", KC_GAUSSIAN_DROPOUT(.rate = 0.45f), 1, {S3(5, 7, 3)}, 11, .training = true,
     .bound = 1e-5},
};

/* ---------------------------------------------------------------- training on both devices */

typedef struct steps_log {
    double loss[64];
    int n;
} steps_log;

static kc_callback_action on_batch(kc_model *m, const kc_batch_logs *logs, void *user) {
    (void)m;
    steps_log *s = user;
    if (s->n < 64) s->loss[s->n++] = logs->loss;
    return KC_CONTINUE;
}

/* The GPU model runs without KERAC_CUDA_DEBUG_SYNC, as users run it: the input feed's
 * uploads really overlap the steps. */
static kc_model *train_on(const char *device, const kc_dataset *ds, steps_log *log) {
    kc_model *m = NULL;
    char saved[16];
    debug_sync_off(saved, sizeof saved);
    OK(kc_default_cnn(28, 28, 1, 10, &m));
    OK(kc_model_set_seed(m, 4242));
    OK(kc_model_set_device(m, device));
    OK(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                        .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}}));
    OK(kc_model_memory_usage(m, NULL, NULL)); /* builds it: the backend opens now, without the debug sync */
    debug_sync_restore(saved);
    kc_callback cb = {.name = "steps", .user = log, .on_batch_end = on_batch};
    kc_callback *cbs[] = {&cb};
    kc_history *h = NULL;
    OK(kc_fit(m, ds, &(kc_fit_opts){.epochs = 1, .batch_size = 32, .seed = 99, .callbacks = cbs, .num_callbacks = 1}, &h));
    kc_history_destroy(h);
    return m;
}

static void test_training_51_steps(void **state) {
    (void)state;
    const int n = 50 * 32 + 7; /* 50 full steps and a short one: its convolutions run in the full batch's workspace */
    float *x = hbuf((int64_t)n * 784);
    int32_t *y = calloc((size_t)n, sizeof(int32_t));
    /* learnable: the label is which of 10 horizontal bands is brightest, plus noise */
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)kc__rng_below(&R, 10);
        for (int p = 0; p < 784; p++) {
            int band = (p / 28) * 10 / 28;
            x[(int64_t)i * 784 + p] = unif(0, 0.5f) + (band == y[i] ? 0.5f : 0.0f);
        }
    }
    kc_dataset *ds = NULL;
    OK(kc_dataset_from_memory(x, y, n, (kc_shape){3, {28, 28, 1}}, 10, &ds));
    steps_log lc = {0}, lg = {0};
    kc_model *mc = train_on("cpu", ds, &lc);
    kc_model *mg = train_on("cuda", ds, &lg);
    assert_int_equal(lc.n, 51);
    assert_int_equal(lg.n, 51);
    if (!quiet) {
        printf("    model on %s and %s\n", kc_model_device(mc), kc_model_device(mg));
        for (int s = 0; s < 50; s += 7) printf("    step %2d: running loss cpu %.6f gpu %.6f\n", s + 1, lc.loss[s], lg.loss[s]);
        printf("    step 51: running loss cpu %.6f gpu %.6f\n", lc.loss[50], lg.loss[50]);
    }
    double e1 = fabs(lg.loss[0] - lc.loss[0]) / fabs(lc.loss[0]);
    double e50 = fabs(lg.loss[50] - lc.loss[50]) / fabs(lc.loss[50]);
    if (!quiet) printf("    %-60s %.2e (bound 1e-04)\n    %-60s %.2e (bound 1e-03)\n", "loss at step 1", e1,
                       "running mean loss at step 51 (the short one)", e50);
    if (!(e1 <= 1e-4)) fail_msg("step-1 loss: cpu %.7f, gpu %.7f (relative %.3g > 1e-4)", lc.loss[0], lg.loss[0], e1);
    if (!(e50 <= 1e-3)) fail_msg("mean loss over 51 steps: cpu %.7f, gpu %.7f (relative %.3g > 1e-3)", lc.loss[50],
                                 lg.loss[50], e50);
    assert_true(lc.loss[50] < lc.loss[0]); /* it learned something */
    /* the weights after 51 steps */
    int nw = kc_model_num_weights(mc);
    for (int k = 0; k < nw; k++) {
        kc_weight_info wi;
        OK(kc_model_weight_info(mc, k, &wi));
        float *a = hbuf(wi.size), *b = hbuf(wi.size);
        OK(kc_model_get_weight(mc, k, a, wi.size));
        OK(kc_model_get_weight(mg, k, b, wi.size));
        char what[128];
        snprintf(what, sizeof what, "after 51 steps: %s/%s", wi.layer, wi.name);
        check_host(what, b, a, wi.size, 1e-2);
        free(a), free(b);
    }
    size_t peak = 0;
    OK(kc_model_memory_usage(mg, &peak, NULL));
    if (!quiet) printf("    GPU model peak memory %.1f MiB\n", peak / 1048576.0);
    kc_model_destroy(mc);
    kc_model_destroy(mg);
    kc_dataset_destroy(ds);
    free(x);
    free(y);
}

/* ---------------------------------------------------------------- main */

int main(void) {
    quiet = getenv("KC_CUDA_TEST_QUIET") != NULL;
    setenv("KERAC_CUDA_DEBUG_SYNC", "1", 0); /* a fault names its operation */
    int open_rc = cuda_test_open(&G, &C);
    if (open_rc) return open_rc;
    printf("comparing %s with the CPU backend (fp32, TF32 off)\n", G->device);
    kc__rng_seed(&R, 20261129);
    const struct CMUnitTest table[] = {
        cmocka_unit_test(test_memory),
        cmocka_unit_test(test_feed),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_bias_and_elementwise),
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_describe),
        cmocka_unit_test(test_depthwise),
        cmocka_unit_test(test_augment), /* augmentation */
        /* convolutions */
        cmocka_unit_test(test_conv_grouped_transposed),
        cmocka_unit_test(test_pooling),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_broadcast),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_losses),
        cmocka_unit_test(test_accuracy),
        cmocka_unit_test(test_optimizers),
    };
    int rc = cmocka_run_group_tests_name("cuda_backend_table", table, NULL, NULL);
    size_t nl = KC_ARRAY_LEN(k_layers);
    struct CMUnitTest *lt = calloc(nl, sizeof *lt);
    for (size_t i = 0; i < nl; i++) {
        lt[i].name = k_layers[i].what;
        lt[i].test_func = run_layer_case;
        lt[i].initial_state = (void *)&k_layers[i];
    }
    rc |= _cmocka_run_group_tests("cuda_backend_layers", lt, nl, NULL, NULL);
    free(lt);
    const struct CMUnitTest train[] = {cmocka_unit_test(test_training_51_steps)};
    rc |= cmocka_run_group_tests_name("cuda_backend_training", train, NULL, NULL);
    kc_backend_destroy(C);
    kc_backend_destroy(G);
    return rc ? 1 : 0;
}
