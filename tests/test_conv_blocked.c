/* test_conv_blocked.c — the CPU backend's register-blocked direct convolution
 * (cpu_conv_blocked.c) against a direct double-precision sum and against the im2col + GEMM
 * path it replaces (a backend created with cpu_conv_blocked = KC_FALSE), for every kernel set
 * this processor runs (AVX2, AVX-512: each blocks differently; the baseline set runs im2col),
 * 2 threads:
 *   against_reference  forward (bias, ReLU) and backward-filter (and backward-data, which
 *                      stays im2col's) for "valid" and "same" padding, 3x3 and 5x5 kernels,
 *                      odd sizes, pixel counts that leave a partial block, 16 to 64 filters,
 *                      stride 2 (ResNet50's stem: 7x7 from 3 channels, patches that stop
 *                      short of the image's last row and column; "same" with padding);
 *                      the largest error relative to the largest magnitude under 2e-5
 *   where_it_applies   any stride, no dilation, at most 64 filters, at most 32 channels in,
 *                      not in the baseline set; describe names the kernel; off with
 *                      kc_device_opts.cpu_conv_blocked = KC_FALSE
 *   workspace          a workspace one byte short is an error, not a write past it */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/cpu.h"
#include "kerac.h"
#include "kerac_backend.h"

#include "conv_check.h"

#define TOL 2e-5

static kc_conv2d_desc conv(int n, int h, int w, int c, int f, int k, int pad) {
    return (kc_conv2d_desc){.n = n, .h = h, .w = w, .c = c, .f = f, .kh = k, .kw = k, .sh = 1, .sw = 1, .dh = 1,
                            .dw = 1, .pad_top = pad, .pad_left = pad, .oh = h + 2 * pad - k + 1,
                            .ow = w + 2 * pad - k + 1};
}

/* stride s, pad rows and columns before (and as many after as the last patch needs) */
static kc_conv2d_desc conv_s(int n, int h, int w, int c, int f, int k, int s, int pad) {
    kc_conv2d_desc d = conv(n, h, w, c, f, k, pad);
    d.sh = d.sw = s;
    d.oh = (h + 2 * pad - k) / s + 1;
    d.ow = (w + 2 * pad - k) / s + 1;
    return d;
}

/* y and dW of the convolution as direct sums in double (dx is im2col's, checked against the off backend) */
static void direct(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, const float *dy,
                   double *y, double *dw) {
    const size_t ny = (size_t)d->n * d->oh * d->ow * d->f, kf = (size_t)d->kh * d->kw * d->c * d->f;
    memset(dw, 0, kf * sizeof(double));
    for (size_t o = 0; o < ny; o++) {
        const int q = (int)(o % d->f), ox = (int)(o / d->f % d->ow), oy = (int)(o / d->f / d->ow % d->oh);
        const int img = (int)(o / d->f / d->ow / d->oh);
        double s = b ? b[q] : 0.0;
        for (int ki = 0; ki < d->kh; ki++)
            for (int kj = 0; kj < d->kw; kj++) {
                const int iy = oy * d->sh + ki - d->pad_top, ix = ox * d->sw + kj - d->pad_left;
                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                for (int ch = 0; ch < d->c; ch++) {
                    const size_t wi = (((size_t)ki * d->kw + kj) * d->c + ch) * d->f + q;
                    const double xv = x[(((size_t)img * d->h + iy) * d->w + ix) * d->c + ch];
                    s += xv * w[wi];
                    dw[wi] += xv * dy[o];
                }
            }
        y[o] = d->relu && s < 0 ? 0.0 : s;
    }
}

static double max_diff(const float *a, const float *b, size_t n) {
    double e = 0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - b[i]));
    return e;
}

/* a backend with the given kernel set, the blocked kernels on or off; Winograd off, since it
 * takes the 3x3 shapes it suits before the blocked kernel (cpu_gemm_conv.c) */
static kc_backend *make(int isa, int blocked) {
    kc_backend *be = NULL;
    kc_device_opts o = {.cpu_isa = isa, .cpu_conv_blocked = blocked ? KC_DEFAULT : KC_FALSE, .cpu_winograd = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    return be;
}

static int label_has(kc_backend *be, const kc_conv2d_desc *d, const char *what) {
    char label[256];
    assert_int_equal(be->describe(be, KC_OP_CONV2D, d, be->conv2d_workspace(be, d), label, sizeof label),
                     KC_STATUS_OK);
    return strstr(label, what) != NULL;
}

static void check_case(int isa, const kc_conv2d_desc *d, unsigned seed) {
    kc_backend *on = make(isa, 1), *off = make(isa, 0);
    assert_false(label_has(off, d, "register-blocked"));
    const int ran = label_has(on, d, "register-blocked");
    const size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->f;
    const size_t nw = (size_t)d->kh * d->kw * d->c * d->f;
    float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd((size_t)d->f, &seed), *dy = rnd(ny, &seed);
    double *ry = malloc(ny * sizeof(double)), *rdw = malloc(nw * sizeof(double));
    assert_true(ry && rdw);
    direct(d, x, w, b, dy, ry, rdw);
    passes a, c;
    run_passes(on, d, x, w, b, dy, &a);
    run_passes(off, d, x, w, b, dy, &c);
    const double e[2] = {rel_err(a.y, ry, ny), rel_err(a.dw, rdw, nw)};
    const double ei[2] = {rel_err(c.y, ry, ny), rel_err(c.dw, rdw, nw)};
    print_message("    %s %dx%dx%dx%d -> %d, %dx%d pad %d%s (%s): error fwd %.2g bwd-filter %.2g (im2col %.2g %.2g)\n",
                  kc_backend_cpu_isa(on), d->n, d->h, d->w, d->c, d->f, d->kh, d->kw, d->pad_top,
                  d->relu ? ", relu" : "", ran ? "blocked" : "not blocked here", e[0], e[1], ei[0], ei[1]);
    for (int i = 0; i < 2; i++) {
        assert_true(e[i] < TOL);
        assert_true(ei[i] < TOL);
    }
    assert_true(max_diff(a.dx, c.dx, nx) == 0.0); /* backward-data is the same im2col path */
    for (int q = 0; q < d->f; q++) assert_float_equal(a.db[q], c.db[q], 1e-4);
    free_passes(&a);
    free_passes(&c);
    free(x), free(w), free(b), free(dy), free(ry), free(rdw);
    kc_backend_destroy(on);
    kc_backend_destroy(off);
}

static void test_against_reference(void **state) {
    (void)state;
    kc_set_num_threads(2); /* the per-thread partial sums and padded images */
    kc_conv2d_desc cs[9];
    cs[0] = conv(5, 13, 13, 32, 64, 3, 0); /* workload A's conv2d_1: 121 pixels, a block of 1 left */
    cs[0].relu = 1;
    cs[1] = conv(2, 7, 9, 20, 64, 3, 1); /* "same", a non-square image */
    cs[2] = conv(3, 6, 6, 8, 32, 5, 2);  /* 5x5 "same", 32 filters */
    cs[3] = conv(2, 5, 5, 4, 16, 3, 0);  /* K = 36, 16 filters */
    cs[4] = conv(1, 4, 3, 32, 64, 3, 1); /* fewer pixels than a block */
    cs[5] = conv(2, 9, 9, 17, 48, 3, 1); /* odd channels, 48 filters */
    cs[5].relu = 1;
    cs[6] = conv_s(3, 26, 26, 3, 64, 7, 2, 0); /* the stem's shape: patches stop a row and a column short */
    cs[7] = conv_s(2, 11, 9, 5, 64, 3, 2, 1);  /* stride 2 with padding */
    cs[7].relu = 1;
    cs[8] = conv_s(2, 12, 12, 4, 16, 5, 3, 2); /* stride 3, 16 filters */
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++)
        for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) check_case(isa, &cs[k], 11u + (unsigned)k);
}

static void test_where_it_applies(void **state) {
    (void)state;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_backend *be = make(isa, 1), *off = make(isa, 0);
        kc_conv2d_desc d = conv(2, 13, 13, 32, 64, 3, 0);
        /* the baseline copy never takes it (slower than im2col + OpenBLAS) */
        assert_int_equal(label_has(be, &d, "cpu register-blocked direct conv"), isa != KC_CPU_ISA_BASELINE);
        assert_int_equal(label_has(be, &d, "cpu im2col+gemm"), isa == KC_CPU_ISA_BASELINE);
        assert_true(label_has(off, &d, "cpu im2col+gemm"));
        kc_conv2d_desc e = conv_s(2, 102, 102, 3, 64, 7, 2, 0); /* ResNet50's stem at 96x96 */
        assert_int_equal(label_has(be, &e, "cpu register-blocked direct conv"), isa != KC_CPU_ISA_BASELINE);
        e = d;
        e.dh = e.dw = 2;
        e.oh = e.ow = 9;
        assert_false(label_has(be, &e, "register-blocked"));
        e = d;
        e.f = 128;
        assert_false(label_has(be, &e, "register-blocked"));
        e = d;
        e.c = 33;
        assert_false(label_has(be, &e, "register-blocked"));
        e = d;
        e.f = 60; /* not a multiple of any set's block */
        assert_false(label_has(be, &e, "register-blocked"));
        kc_backend_destroy(be);
        kc_backend_destroy(off);
    }
}

static void test_workspace(void **state) {
    (void)state;
    kc_backend *be = make(KC_CPU_ISA_AUTO, 1);
    kc_conv2d_desc d = conv(2, 8, 8, 16, 64, 3, 1);
    const size_t need = be->conv2d_workspace(be, &d);
    float *x = calloc(2 * 8 * 8 * 16, sizeof(float)), *w = calloc(9 * 16 * 64, sizeof(float));
    float *y = calloc(2 * 8 * 8 * 64, sizeof(float));
    void *ws = malloc(need);
    assert_true(x && w && y && ws);
    assert_int_equal(be->conv2d_forward(be, &d, x, w, NULL, y, ws, need - 1), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "too small"));
    assert_int_equal(be->conv2d_backward_filter(be, &d, x, y, w, NULL, ws, need - 1), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->conv2d_backward_filter(be, &d, x, y, w, NULL, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->conv2d_forward(be, &d, x, w, NULL, y, ws, need), KC_STATUS_OK);
    free(x), free(w), free(y), free(ws);
    kc_backend_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_where_it_applies),
        cmocka_unit_test(test_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
