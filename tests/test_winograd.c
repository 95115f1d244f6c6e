/* test_winograd.c — the CPU backend's Winograd F(2x2,3x3) and F(4x4,3x3) convolutions
 * (cpu_winograd.c) against a direct double-precision sum and against the im2col + GEMM path
 * they replace:
 *   against_direct     forward (bias, ReLU), backward-data and backward-filter for "valid"
 *                      and "same" padding, odd and even sizes (partial tiles at the edges),
 *                      channel counts that are and are not multiples of the transforms'
 *                      blocks, each output tile (kc_device_opts.cpu_winograd_tile 2 and 4)
 *                      and each kernel set the processor runs (kc_device_opts.cpu_isa, as
 *                      KERAC_CPU_ISA); the largest error relative to the largest magnitude
 *                      stays under WG_TOL (F(2x2)) / WG4_TOL (F(4x4)) (printed)
 *   against_im2col     the same calls on a backend created with cpu_winograd = KC_FALSE
 *                      (which runs im2col + GEMM) agree to WG_TOL with the direct sum
 *   where_it_applies   3x3 stride 1, dilation 1, padding "valid" or "same", at least
 *                      KC_CPU_WINOGRAD_MIN_C channels in and out (any number with cpu_winograd = KC_TRUE), and not when turned off;
 *                      F(4x4) chosen from KC_CPU_WINOGRAD4_MIN_HW outputs a side, a tile
 *                      other than 0, 2, 4 refused; not where the tile saves fewer than
 *                      KC_CPU_WINOGRAD_MIN_SAVING times the multiply-adds (3x3 outputs)
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

/* the bound on max |winograd - direct| / max |direct| (float sums of up to 9 * 130 terms); the
 * gradient checks (test_gradcheck_layers) accept 2e-2 relative plus 2e-3 absolute, and the
 * backward passes here are checked against the exact gradients of the same sums, which is
 * stricter than a finite-difference check */
#define WG_TOL 2e-5
/* F(4x4,3x3)'s transforms have coefficients up to 8 (B^T's 4 and 5, A^T's 8): measured
 * 3e-7 to 2.6e-6 here on every pass and set (bench/RESULTS.md, "Workload B"), bounded
 * 10x looser than F(2x2) and still 200x inside the gradient checks' 2e-2 */
#define WG4_TOL 2e-4

static kc_conv2d_desc conv3(int n, int h, int w, int c, int f, int pad) {
    return (kc_conv2d_desc){.n = n, .h = h, .w = w, .c = c, .f = f, .kh = 3, .kw = 3, .sh = 1, .sw = 1, .dh = 1,
                            .dw = 1, .pad_top = pad, .pad_left = pad, .oh = h + 2 * pad - 2, .ow = w + 2 * pad - 2};
}

static double x_at(const kc_conv2d_desc *d, const float *x, int img, int iy, int ix, int ch) {
    if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) return 0.0;
    return x[(((size_t)img * d->h + iy) * d->w + ix) * d->c + ch];
}

/* the three passes as direct sums in double */
static void direct(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, const float *dy,
                   double *y, double *dx, double *dw) {
    const size_t ny = (size_t)d->n * d->oh * d->ow * d->f;
    memset(dx, 0, (size_t)d->n * d->h * d->w * d->c * sizeof(double));
    memset(dw, 0, (size_t)9 * d->c * d->f * sizeof(double));
    for (size_t o = 0; o < ny; o++) {
        const int q = (int)(o % d->f), ox = (int)(o / d->f % d->ow), oy = (int)(o / d->f / d->ow % d->oh);
        const int img = (int)(o / d->f / d->ow / d->oh);
        double s = b ? b[q] : 0.0;
        for (int ki = 0; ki < 3; ki++)
            for (int kj = 0; kj < 3; kj++) {
                const int iy = oy + ki - d->pad_top, ix = ox + kj - d->pad_left;
                for (int ch = 0; ch < d->c; ch++) {
                    const size_t wi = (((size_t)ki * 3 + kj) * d->c + ch) * d->f + q;
                    s += x_at(d, x, img, iy, ix, ch) * w[wi];
                    dw[wi] += x_at(d, x, img, iy, ix, ch) * dy[o];
                    if (iy >= 0 && iy < d->h && ix >= 0 && ix < d->w)
                        dx[(((size_t)img * d->h + iy) * d->w + ix) * d->c + ch] += w[wi] * dy[o];
                }
            }
        y[o] = d->relu && s < 0 ? 0.0 : s;
    }
}

static const kc_conv2d_desc *cases(size_t *n) {
    static kc_conv2d_desc c[6];
    c[0] = conv3(2, 8, 8, 64, 64, 1);   /* "same", even */
    c[1] = conv3(2, 13, 13, 64, 72, 0); /* "valid", odd: a partial tile at the edges */
    c[2] = conv3(1, 7, 9, 65, 80, 1);   /* odd channel counts, a non-square image */
    c[3] = conv3(1, 6, 5, 130, 64, 0);  /* more channels than two blocks of the transforms */
    c[4] = conv3(1, 5, 5, 64, 64, 1);
    c[4].relu = 1;
    c[5] = conv3(1, 4, 4, 64, 130, 1); /* output filters past two blocks */
    *n = sizeof c / sizeof c[0];
    return c;
}

/* one case: every kernel set the processor runs x each tile against the direct sums, and
 * im2col against them too; the largest errors seen go to worst[tile / 4] */
static void one_case(const kc_conv2d_desc *d, unsigned seed, kc_backend *im, double worst[2]) {
    const size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->f;
    const size_t nw = (size_t)9 * d->c * d->f;
    float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd((size_t)d->f, &seed), *dy = rnd(ny, &seed);
    double *ry = malloc(ny * sizeof(double)), *rdx = malloc(nx * sizeof(double)), *rdw = malloc(nw * sizeof(double));
    assert_true(ry && rdx && rdw);
    direct(d, x, w, b, dy, ry, rdx, rdw);
    passes c;
    assert_false(kc__cpu_winograd_applies(im, d));
    run_passes(im, d, x, w, b, dy, &c);
    const double ei[3] = {rel_err(c.y, ry, ny), rel_err(c.dx, rdx, nx), rel_err(c.dw, rdw, nw)};
    for (int i = 0; i < 3; i++) assert_true(ei[i] < WG_TOL);
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++)
        for (int tile = 2; tile <= 4; tile += 2) {
            kc_device_opts o = {.cpu_isa = isa, .cpu_winograd_tile = tile};
            kc_backend *wg = NULL;
            assert_int_equal(kc_backend_cpu_create_ex(&o, &wg), KC_STATUS_OK);
            assert_int_equal(kc__cpu_winograd_tile_of(wg, d), tile);
            passes a;
            run_passes(wg, d, x, w, b, dy, &a);
            const double e[3] = {rel_err(a.y, ry, ny), rel_err(a.dx, rdx, nx), rel_err(a.dw, rdw, nw)};
            print_message("    %dx%dx%dx%d -> %d, pad %d%s, %s F(%dx%d): error fwd %.2g bwd-data %.2g bwd-filter %.2g "
                          "(im2col %.2g %.2g %.2g)\n",
                          d->n, d->h, d->w, d->c, d->f, d->pad_top, d->relu ? ", relu" : "", kc__cpu_isa_label(isa),
                          tile, tile, e[0], e[1], e[2], ei[0], ei[1], ei[2]);
            for (int i = 0; i < 3; i++) {
                assert_true(e[i] < (tile == 4 ? WG4_TOL : WG_TOL));
                worst[tile / 4] = fmax(worst[tile / 4], e[i]);
            }
            for (int q = 0; q < d->f; q++) assert_float_equal(a.db[q], c.db[q], 1e-4);
            free_passes(&a);
            kc_backend_destroy(wg);
        }
    free_passes(&c);
    free(x), free(w), free(b), free(dy), free(ry), free(rdx), free(rdw);
}

static void test_against_direct_and_im2col(void **state) {
    (void)state;
    kc_backend *im = NULL;
    kc_device_opts off = {.cpu_winograd = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create_ex(&off, &im), KC_STATUS_OK);
    size_t nc;
    const kc_conv2d_desc *cs = cases(&nc);
    double worst[2] = {0, 0};
    for (size_t k = 0; k < nc; k++) one_case(&cs[k], 7 + (unsigned)k, im, worst);
    print_message("    largest error: F(2x2) %.2g, F(4x4) %.2g\n", worst[0], worst[1]);
    kc_backend_destroy(im);
}

static void test_where_it_applies(void **state) {
    (void)state;
    kc_backend *be = NULL, *off_be = NULL;
    kc_device_opts off = {.cpu_winograd = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    assert_int_equal(kc_backend_cpu_create_ex(&off, &off_be), KC_STATUS_OK);
    kc_conv2d_desc d = conv3(2, 8, 8, 64, 64, 1);
    assert_true(kc__cpu_winograd_applies(be, &d));
    assert_false(kc__cpu_winograd_applies(off_be, &d));
    assert_false(kc__cpu_winograd_applies(be, NULL));
    kc_conv2d_desc e = d; /* 8x8 outputs: F(4x4) from KC_CPU_WINOGRAD4_MIN_C channels */
    e.c = KC_CPU_WINOGRAD4_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e.c = KC_CPU_WINOGRAD4_MIN_C;
    assert_true(kc__cpu_winograd_applies(be, &e));
    e = d;
    e.f = KC_CPU_WINOGRAD4_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e = conv3(2, 6, 6, KC_CPU_WINOGRAD_MIN_C - 1, 64, 1); /* 6x6 outputs: F(2x2) from KC_CPU_WINOGRAD_MIN_C */
    assert_false(kc__cpu_winograd_applies(be, &e));
    e.c = KC_CPU_WINOGRAD_MIN_C;
    e.f = KC_CPU_WINOGRAD_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e.f = KC_CPU_WINOGRAD_MIN_C;
    assert_true(kc__cpu_winograd_applies(be, &e));
    e = d;
    e.sh = e.sw = 2;
    e.oh = e.ow = 4;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e = d;
    e.dh = e.dw = 2;
    e.oh = e.ow = 6;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e = d;
    e.kh = e.kw = 5;
    e.oh = e.ow = 6;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e = d; /* padding after larger than before (an explicit asymmetric pad) */
    e.oh = e.ow = 9;
    assert_false(kc__cpu_winograd_applies(be, &e));
    char label[256];
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &d, be->conv2d_workspace(be, &d), label, sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu winograd F(4x4,3x3)")); /* 8x8 outputs: F(4x4) */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &d), 4);
    e = conv3(2, 6, 6, 64, 64, 0); /* 4x4 outputs: F(2x2) */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), KC_CPU_WINOGRAD4_MIN_HW > 4 ? 2 : 4);
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &e, be->conv2d_workspace(be, &e), label, sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, KC_CPU_WINOGRAD4_MIN_HW > 4 ? "cpu winograd F(2x2,3x3)" : "F(4x4,3x3)"));
    assert_int_equal(kc__cpu_winograd_tile_of(off_be, &d), 0);
    kc_backend *any = NULL; /* KC_TRUE: at any channel count */
    kc_device_opts on = {.cpu_winograd = KC_TRUE};
    assert_int_equal(kc_backend_cpu_create_ex(&on, &any), KC_STATUS_OK);
    e = conv3(2, 8, 8, 16, 16, 1);
    assert_false(kc__cpu_winograd_applies(be, &e));
    assert_true(kc__cpu_winograd_applies(any, &e));
    /* where partial tiles waste most: F(2x2) on 3x3 outputs (ResNet50's stage 5 at 96x96) saves
     * 1.27x the multiply-adds, under KC_CPU_WINOGRAD_MIN_SAVING: im2col; 5x5 saves 1.56x */
    e = conv3(2, 3, 3, 512, 512, 1);
    assert_false(kc__cpu_winograd_applies(be, &e));
    assert_true(kc__cpu_winograd_applies(any, &e));
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &e, be->conv2d_workspace(be, &e), label, sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu im2col+gemm"));
    e = conv3(2, 5, 5, 512, 512, 1);
    assert_true(kc__cpu_winograd_applies(be, &e));
    e = conv3(2, 5, 5, 512, 512, 0); /* 3x3 outputs again, "valid" */
    assert_false(kc__cpu_winograd_applies(be, &e));
    kc_backend_destroy(any);
    kc_backend *bad = NULL;
    kc_device_opts three = {.cpu_winograd_tile = 3};
    assert_int_equal(kc_backend_cpu_create_ex(&three, &bad), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "cpu_winograd_tile"));
    assert_null(bad);
    assert_int_equal(off_be->describe(off_be, KC_OP_CONV2D, &d, off_be->conv2d_workspace(off_be, &d), label,
                                      sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu im2col+gemm"));
    kc_backend_destroy(be);
    kc_backend_destroy(off_be);
}

static void test_workspace(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    kc_conv2d_desc d = conv3(2, 8, 8, 64, 64, 1);
    const size_t need = be->conv2d_workspace(be, &d);
    assert_true(need >= (size_t)16 * 64 * 64 * sizeof(float));
    float *x = calloc(2 * 8 * 8 * 64, sizeof(float)), *w = calloc(9 * 64 * 64, sizeof(float));
    float *y = calloc(2 * 8 * 8 * 64, sizeof(float));
    void *ws = malloc(need);
    assert_true(x && w && y && ws);
    assert_int_equal(be->conv2d_forward(be, &d, x, w, NULL, y, ws, need - 1), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "too small"));
    assert_int_equal(be->conv2d_backward_data(be, &d, y, w, x, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->conv2d_backward_filter(be, &d, x, y, w, NULL, ws, need), KC_STATUS_OK);
    free(x), free(w), free(y), free(ws);
    kc_backend_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_direct_and_im2col),
        cmocka_unit_test(test_where_it_applies),
        cmocka_unit_test(test_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
