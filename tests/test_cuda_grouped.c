/* test_cuda_grouped.c — grouped and depthwise convolutions on the GPU by both of the CUDA
 * module's paths: cuDNN's grouped convolution (the default) and the module's own kernels
 * (kernels_grouped.cu; a second backend opened with KERAC_CUDNN_GROUPED=0), each against
 * the CPU backend and against each other, every pass (forward with bias, backward-data,
 * backward-filter, the bias gradient). Bound: relative L2 error 2e-5 (fp32, TF32 off:
 * other summation orders), the bound test_cuda_backend.c gives convolutions.
 * Which path ran: the module logs at debug level, once per shape, when cuDNN cannot run a
 * shape and its own kernels do; the cases models use most (ResNeXt-style Conv2D with
 * 2 groups, 3x3 depthwise stride 1 and 2) must run on cuDNN, the others may fall back (said).
 * Each path runs in the workspace its *_workspace entry asks for (none on the module's own
 * kernels), and the three calls allocate nothing: the allocator's peak stays where it was.
 * Then one MobileNetV2-sized depthwise layer (32 x 48x48x144, 3x3) is timed on both paths
 * (forward + both backward passes, median of 5, device time through sync) and printed.
 * Without a GPU: "SKIP: no GPU: ..." and exit 77. Run by scripts/gpu-check. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "cuda_test.h"
#include "layers/layer.h"

static kc_backend *D; /* cuDNN first */
static kc_backend *K; /* the module's own kernels (KERAC_CUDNN_GROUPED=0) */
static kc_backend *C; /* the CPU reference */
static kc_rng R;
static int fallbacks; /* "runs on kerac's own kernels" lines logged so far */

static void on_log(kc_log_level level, const char *message, void *user) {
    (void)user;
    if (strstr(message, "runs on kerac's own kernels")) fallbacks++;
    if (level >= KC_LOG_WARNING) fprintf(stderr, "%s\n", message);
}

static float *hrand(int64_t n, float lo, float hi) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = lo + (hi - lo) * (float)kc__rng_uniform(&R);
    return p;
}

/* The tensors of one case on one GPU backend. */
typedef struct dev {
    kc_backend *be;
    float *x, *w, *b, *dy, *y, *dx, *dw, *db;
} dev;

static float *put(kc_backend *be, const float *h, int64_t n) {
    void *d = NULL;
    OK(be->alloc(be, (size_t)(n > 0 ? n : 1) * sizeof(float), &d));
    if (h) OK(be->to_device(be, d, h, (size_t)n * sizeof(float)));
    return d;
}

static double rel_err(const float *a, const float *ref, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(a[i]) || isnan(ref[i])) return INFINITY;
        num += ((double)a[i] - ref[i]) * ((double)a[i] - ref[i]);
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The device result against the reference (host) within 2e-5; returns the host copy. */
static float *check(const char *name, const char *what, kc_backend *be, const float *dptr, const float *ref,
                    int64_t n) {
    float *h = malloc((size_t)n * sizeof(float));
    assert_non_null(h);
    OK(be->to_host(be, h, dptr, (size_t)n * sizeof(float)));
    double e = rel_err(h, ref, n);
    printf("    %-44s %-16s %-12s %.2e (bound 2e-05)\n", name, what, be == D ? "cuDNN first" : "own kernels", e);
    if (!(e <= 2e-5)) fail_msg("%s %s (%s): relative L2 error %.3g > 2e-5", name, what, be->device, e);
    return h;
}

/* One grouped convolution (groups = c: depthwise, through the depthwise entries) on the CPU
 * and both GPU paths; the two paths' results within 2e-5 of each other too. *fell: whether
 * the cuDNN-first backend fell back for this shape. */
static void gc_case(const char *name, kc_conv2d_desc d, int groups, bool *fell) {
    const bool depthwise = groups == d.c;
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * (d.c / groups) * d.f;
    float *x = hrand(xn, -1, 1), *w = hrand(wn, -0.5f, 0.5f), *b = hrand(d.f, -1, 1), *dy = hrand(yn, -1, 1);
    float *y = hrand(yn, 0, 0), *dx = hrand(xn, 0, 0), *dw = hrand(wn, 0, 0), *db = hrand(d.f, 0, 0);
    if (depthwise) {
        OK(C->depthwise_forward(C, &d, x, w, b, y, NULL, 0));
        OK(C->depthwise_backward_data(C, &d, dy, w, dx, NULL, 0));
        OK(C->depthwise_backward_filter(C, &d, x, dy, dw, db, NULL, 0));
    } else {
        OK(C->grouped_conv_forward(C, &d, groups, x, w, b, y, NULL, 0));
        OK(C->grouped_conv_backward_data(C, &d, groups, dy, w, dx, NULL, 0));
        OK(C->grouped_conv_backward_filter(C, &d, groups, x, dy, dw, db, NULL, 0));
    }
    float *out[2][4] = {{0}};
    int before = fallbacks;
    for (int p = 0; p < 2; p++) {
        kc_backend *be = p == 0 ? D : K;
        dev g = {be, put(be, x, xn), put(be, w, wn), put(be, b, d.f), put(be, dy, yn), put(be, NULL, yn),
                 put(be, NULL, xn), put(be, NULL, wn), put(be, NULL, d.f)};
        const size_t wsb = depthwise ? be->depthwise_workspace(be, &d) : be->grouped_conv_workspace(be, &d, groups);
        void *ws = put(be, NULL, (int64_t)(wsb / sizeof(float)) + 1);
        if (p == 1 && wsb != 0) fail_msg("%s: the module's own kernels ask for %zu bytes of workspace", name, wsb);
        size_t in_use = 0, peak = 0;
        be->reset_peak(be);
        if (depthwise) {
            OK(be->depthwise_forward(be, &d, g.x, g.w, g.b, g.y, ws, wsb));
            OK(be->depthwise_backward_data(be, &d, g.dy, g.w, g.dx, ws, wsb));
            OK(be->depthwise_backward_filter(be, &d, g.x, g.dy, g.dw, g.db, ws, wsb));
        } else {
            OK(be->grouped_conv_forward(be, &d, groups, g.x, g.w, g.b, g.y, ws, wsb));
            OK(be->grouped_conv_backward_data(be, &d, groups, g.dy, g.w, g.dx, ws, wsb));
            OK(be->grouped_conv_backward_filter(be, &d, groups, g.x, g.dy, g.dw, g.db, ws, wsb));
        }
        OK(be->sync(be));
        be->memory_stats(be, &in_use, &peak);
        if (peak != in_use)
            fail_msg("%s (%s): the calls allocated %zu bytes beyond the planned workspace of %zu", name,
                     p == 0 ? "cuDNN first" : "own kernels", peak - in_use, wsb);
        if (p == 0 && fallbacks == before && wsb == 0) fail_msg("%s: cuDNN runs it in no workspace", name);
        be->free(be, ws);
        out[p][0] = check(name, "forward", be, g.y, y, yn);
        out[p][1] = check(name, "backward-data", be, g.dx, dx, xn);
        out[p][2] = check(name, "backward-filter", be, g.dw, dw, wn);
        out[p][3] = check(name, "bias gradient", be, g.db, db, d.f);
        float *all[] = {g.x, g.w, g.b, g.dy, g.y, g.dx, g.dw, g.db};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) be->free(be, all[i]);
        if (p == 0) *fell = fallbacks > before;
    }
    const int64_t sizes[4] = {yn, xn, wn, d.f};
    for (int k = 0; k < 4; k++) {
        double e = rel_err(out[0][k], out[1][k], sizes[k]);
        if (!(e <= 2e-5)) fail_msg("%s: cuDNN and the module's kernels differ by %.3g (pass %d)", name, e, k);
        free(out[0][k]);
        free(out[1][k]);
    }
    printf("    %-44s ran on %s\n", name, *fell ? "the module's kernels (cuDNN cannot run it)" : "cuDNN");
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
}

static kc_conv2d_desc conv_desc(int n, int h, int w, int c, int f, int k, int s, int dil, bool same) {
    kc_conv2d_desc d = {.n = n, .h = h, .w = w, .c = c, .f = f, .kh = k, .kw = k, .sh = s, .sw = s, .dh = dil, .dw = dil};
    kc__conv_out_size(h, k, s, dil, same, &d.oh, &d.pad_top);
    kc__conv_out_size(w, k, s, dil, same, &d.ow, &d.pad_left);
    return d;
}

static void test_parity(void **state) {
    (void)state;
    bool fell = false;
    gc_case("Conv2D 2 groups 3x3 same 16x16x16->32", conv_desc(4, 16, 16, 16, 32, 3, 1, 1, true), 2, &fell);
    assert_false(fell); /* the plainest grouped shape runs on cuDNN */
    gc_case("DepthwiseConv2D 3x3 same 24x24x96", conv_desc(8, 24, 24, 96, 96, 3, 1, 1, true), 96, &fell);
    assert_false(fell);
    gc_case("DepthwiseConv2D 3x3 stride 2 same (asym. pad)", conv_desc(4, 16, 15, 32, 32, 3, 2, 1, true), 32, &fell);
    assert_false(fell);
    gc_case("Conv2D 8 groups 3x3 stride 2 (ResNeXt)", conv_desc(8, 14, 14, 64, 64, 3, 2, 1, true), 8, &fell);
    gc_case("Conv2D 4 groups dilation 2 valid", conv_desc(2, 11, 11, 8, 12, 3, 1, 2, false), 4, &fell);
    gc_case("DepthwiseConv2D multiplier 2 5x5 valid", conv_desc(2, 13, 13, 6, 12, 5, 1, 1, false), 6, &fell);
    gc_case("Conv2D groups = C 7x7 same (ConvNeXt)", conv_desc(2, 14, 14, 32, 32, 7, 1, 1, true), 32, &fell);
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* A MobileNetV2 depthwise layer on both paths: median of 5 (forward + backward), after a warm-up. */
static void test_speed(void **state) {
    (void)state;
    kc_conv2d_desc d = conv_desc(32, 48, 48, 144, 144, 3, 1, 1, true);
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, wn = 9 * (int64_t)d.c;
    double med[2];
    for (int p = 0; p < 2; p++) {
        kc_backend *be = p == 0 ? D : K;
        float *x = put(be, NULL, xn), *w = put(be, NULL, wn), *y = put(be, NULL, xn), *dx = put(be, NULL, xn);
        float *dw = put(be, NULL, wn);
        const size_t wsb = be->depthwise_workspace(be, &d);
        void *ws = put(be, NULL, (int64_t)(wsb / sizeof(float)) + 1);
        OK(be->memset0(be, x, (size_t)xn * sizeof(float)));
        OK(be->memset0(be, w, (size_t)wn * sizeof(float)));
        double t[6];
        for (int r = 0; r < 6; r++) {
            OK(be->sync(be));
            double t0 = now();
            OK(be->depthwise_forward(be, &d, x, w, NULL, y, ws, wsb));
            OK(be->depthwise_backward_data(be, &d, y, w, dx, ws, wsb));
            OK(be->depthwise_backward_filter(be, &d, x, y, dw, NULL, ws, wsb));
            OK(be->sync(be));
            t[r] = now() - t0;
        }
        qsort(t + 1, 5, sizeof t[0], cmp_d);
        med[p] = t[3];
        be->free(be, x), be->free(be, w), be->free(be, y), be->free(be, dx), be->free(be, dw), be->free(be, ws);
    }
    printf("depthwise 32 x 48x48x144 3x3, forward + backward: cuDNN first %.3f ms, own kernels %.3f ms "
           "(median of 5)\n", 1e3 * med[0], 1e3 * med[1]);
}

int main(void) {
    unsetenv("KERAC_CUDNN_GROUPED");
    kc_log_set_callback(on_log, NULL);
    kc_log_set_level(KC_LOG_DEBUG);
    int open_rc = cuda_test_open(&D, &C);
    if (open_rc) return open_rc;
    setenv("KERAC_CUDNN_GROUPED", "0", 1);
    kc_status s = kc_backend_open("cuda", &K);
    unsetenv("KERAC_CUDNN_GROUPED");
    if (s != KC_STATUS_OK) {
        printf("cannot open the second CUDA backend: %s\n", kc_last_error());
        return 1;
    }
    kc__rng_seed(&R, 20261201);
    printf("grouped convolutions on %s: cuDNN first and the module's own kernels against the CPU\n", D->device);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_parity), cmocka_unit_test(test_speed)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(D);
    kc_backend_destroy(K);
    kc_backend_destroy(C);
    return rc;
}
