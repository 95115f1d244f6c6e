/* test_winograd.c — the CPU backend's Winograd F(2x2,3x3), F(3x3,3x3) and F(4x4,3x3) convolutions
 * (cpu_winograd.c) against a direct double-precision sum and against the im2col + GEMM path
 * they replace:
 *   against_direct     forward (bias, ReLU), backward-data and backward-filter for "valid"
 *                      and "same" padding, odd and even sizes (partial tiles at the edges),
 *                      channel counts that are and are not multiples of the transforms'
 *                      blocks, each output tile (kc_device_opts.cpu_winograd_tile 2, 3, 4)
 *                      and each kernel set the processor runs (kc_device_opts.cpu_isa, as
 *                      KERAC_CPU_ISA); the largest error relative to the largest magnitude
 *                      stays under WG_TOL (F(2x2)) / WG3_TOL (F(3x3)) / WG4_TOL (F(4x4))
 *                      (printed)
 *   against_im2col     the same calls on a backend created with cpu_winograd = KC_FALSE
 *                      (which runs im2col + GEMM) agree to WG_TOL with the direct sum
 *   where_it_applies   3x3 stride 1, dilation 1, padding "valid" or "same", at least
 *                      KC_CPU_WINOGRAD_MIN_C (F(2x2)) / KC_CPU_WINOGRAD4_MIN_C channels in
 *                      and out (any number with cpu_winograd = KC_TRUE), and not when turned
 *                      off; the tile of least cost (cpu.h), none where im2col costs less
 *                      than KC_CPU_WINOGRAD_MIN_SAVING times that; a tile other than 0, 2, 3,
 *                      4 refused
 *   smaller_batch      a workspace planned at one batch runs each pass at smaller ones, which
 *                      choose otherwise, and agrees with im2col
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
/* F(3x3,3x3) (points 0, 1, -1, 2): coefficients up to 4 (A^T's 4, B^T's 3); between the two
 * (a tile's error in float, numpy: 4x F(2x2)'s, 0.4x F(4x4)'s) */
#define WG3_TOL 1e-4
static double tile_tol(int tile) { return tile == 4 ? WG4_TOL : tile == 3 ? WG3_TOL : WG_TOL; }

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
    static kc_conv2d_desc c[8];
    c[0] = conv3(2, 8, 8, 64, 64, 1);   /* "same", even */
    c[1] = conv3(2, 13, 13, 64, 72, 0); /* "valid", odd: a partial tile at the edges */
    c[2] = conv3(1, 7, 9, 65, 80, 1);   /* odd channel counts, a non-square image */
    c[3] = conv3(1, 6, 5, 130, 64, 0);  /* more channels than two blocks of the transforms */
    c[4] = conv3(1, 5, 5, 64, 64, 1);
    c[4].relu = 1;
    c[5] = conv3(1, 4, 4, 64, 130, 1); /* output filters past two blocks */
    /* fewer tiles than output channels (ResNet50's stage 5 at 96x96): on 2+ threads each pass
     * splits its output channels into blocks (cpu_winograd.c, split), the last one partial */
    c[6] = conv3(3, 3, 3, 200, 260, 1);
    /* tiles in more than 2 chunks on 2 threads (F(2x2) 8, F(3x3) 4): backward-data's U stored
     * F x C; the cases above, in 1-2 chunks, store it C x F and read it transposed */
    c[7] = conv3(4, 16, 16, 64, 64, 1);
    *n = sizeof c / sizeof c[0];
    return c;
}

/* one case: every kernel set the processor runs x each tile against the direct sums, and
 * im2col against them too; the largest errors seen go to worst[tile - 2] */
static void one_case(const kc_conv2d_desc *d, unsigned seed, kc_backend *im, double worst[3]) {
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
        for (int tile = 2; tile <= 4; tile++) {
            /* KC_TRUE: each tile wherever it can run, also where it would not be chosen */
            kc_device_opts o = {.cpu_isa = isa, .cpu_winograd = KC_TRUE, .cpu_winograd_tile = tile};
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
                assert_true(e[i] < tile_tol(tile));
                worst[tile - 2] = fmax(worst[tile - 2], e[i]);
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
    kc_set_num_threads(2); /* the passes' splits across threads, whatever the machine */
    size_t nc;
    const kc_conv2d_desc *cs = cases(&nc);
    double worst[3] = {0, 0, 0};
    for (size_t k = 0; k < nc; k++) one_case(&cs[k], 7 + (unsigned)k, im, worst);
    print_message("    largest error: F(2x2) %.2g, F(3x3) %.2g, F(4x4) %.2g\n", worst[0], worst[1], worst[2]);
    kc_backend_destroy(im);
}

static void test_where_it_applies(void **state) {
    (void)state;
    kc_backend *be = NULL, *off_be = NULL;
    kc_device_opts off = {.cpu_winograd = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    assert_int_equal(kc_backend_cpu_create_ex(&off, &off_be), KC_STATUS_OK);
    /* costs in GEMM rows per channel pair (cpu.h): E (tiles + KC_CPU_WINOGRAD_U_TILES) against
     * im2col's 9 n oh ow; batch 32 */
    kc_conv2d_desc d = conv3(32, 8, 8, 64, 64, 1); /* F(4x4) 36 (128 + 50) against 18432 */
    assert_true(kc__cpu_winograd_applies(be, &d));
    assert_int_equal(kc__cpu_winograd_tile_of(be, &d), 4);
    assert_false(kc__cpu_winograd_applies(off_be, &d));
    assert_false(kc__cpu_winograd_applies(be, NULL));
    kc_conv2d_desc e = d; /* F(4x4) from KC_CPU_WINOGRAD4_MIN_C channels in and out */
    e.c = KC_CPU_WINOGRAD4_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e.c = KC_CPU_WINOGRAD4_MIN_C;
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 4);
    e = d;
    e.f = KC_CPU_WINOGRAD4_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
    /* 4x4 outputs: F(2x2) 16 (128 + 50) = 2848, F(4x4) 36 (32 + 50) = 2952, F(3x3) 4450 */
    e = conv3(32, 4, 4, KC_CPU_WINOGRAD_MIN_C, KC_CPU_WINOGRAD_MIN_C, 1);
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 2);
    e.c = KC_CPU_WINOGRAD_MIN_C - 1; /* F(2x2) from KC_CPU_WINOGRAD_MIN_C: then F(4x4) */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 4);
    /* 6x6 outputs: F(3x3) 25 (128 + 50) = 4450, F(2x2) 5408, F(4x4) 6408 (its tiles waste 44 %) */
    e = conv3(32, 6, 6, KC_CPU_WINOGRAD4_MIN_C, 256, 1);
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 3);
    e.c = KC_CPU_WINOGRAD4_MIN_C - 1;
    assert_false(kc__cpu_winograd_applies(be, &e));
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
    assert_non_null(strstr(label, "cpu winograd F(4x4,3x3)"));
    e = conv3(32, 6, 6, 256, 256, 1);
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &e, be->conv2d_workspace(be, &e), label, sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu winograd F(3x3,3x3)"));
    assert_int_equal(kc__cpu_winograd_tile_of(off_be, &d), 0);
    kc_backend *any = NULL; /* KC_TRUE: at any channel count and cost */
    kc_device_opts on = {.cpu_winograd = KC_TRUE};
    assert_int_equal(kc_backend_cpu_create_ex(&on, &any), KC_STATUS_OK);
    e = conv3(2, 8, 8, 16, 16, 1);
    assert_false(kc__cpu_winograd_applies(be, &e));
    assert_true(kc__cpu_winograd_applies(any, &e));
    /* the transform of U against few tiles: 3x3 outputs (one F(3x3) tile an image) at batch
     * 8, 25 (8 + 50) = 1450 against 648 */
    e = conv3(8, 3, 3, 512, 512, 1);
    assert_false(kc__cpu_winograd_applies(be, &e));
    assert_true(kc__cpu_winograd_applies(any, &e));
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &e, be->conv2d_workspace(be, &e), label, sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu im2col+gemm"));
    e.n = 32; /* ResNet50's stage 5 at 96x96: 25 (32 + 50) = 2050 against 2592 */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 3);
    e.n = 128; /* 4450 against 10368 */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 3);
    e = conv3(32, 5, 5, 512, 512, 1); /* 5x5: F(3x3) 4450 against 7200 */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 3);
    e = conv3(32, 5, 5, 512, 512, 0); /* 3x3 outputs again, "valid": as with "same" */
    assert_int_equal(kc__cpu_winograd_tile_of(be, &e), 3);
    e.n = 8;
    assert_false(kc__cpu_winograd_applies(be, &e));
    e = conv3(2, 8, 8, 64, 64, 1); /* two images: every tile's U costs more than it saves */
    assert_false(kc__cpu_winograd_applies(be, &e));
    kc_backend_destroy(any);
    kc_backend *bad = NULL;
    kc_device_opts five = {.cpu_winograd_tile = 5};
    assert_int_equal(kc_backend_cpu_create_ex(&five, &bad), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "cpu_winograd_tile"));
    assert_null(bad);
    assert_int_equal(off_be->describe(off_be, KC_OP_CONV2D, &d, off_be->conv2d_workspace(off_be, &d), label,
                                      sizeof label),
                     KC_STATUS_OK);
    assert_non_null(strstr(label, "cpu im2col+gemm"));
    kc_backend_destroy(be);
    kc_backend_destroy(off_be);
}

/* max |a - ref| / max |ref| */
static double rel_err_f(const float *a, const float *ref, size_t n) {
    double e = 0.0, mag = 0.0;
    for (size_t i = 0; i < n; i++) e = fmax(e, fabs((double)a[i] - ref[i])), mag = fmax(mag, fabs((double)ref[i]));
    return mag > 0.0 ? e / mag : e;
}

/* A model plans one workspace at its batch and runs smaller batches (an epoch's last) in it;
 * Winograd's cost depends on the batch, so these may choose another tile or im2col
 * (cpu.h), whose workspace the planned one must hold (kc__cpu_conv2d_workspace). */
static void test_smaller_batch(void **state) {
    (void)state;
    kc_backend *be = NULL, *im = NULL;
    kc_device_opts off = {.cpu_winograd = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    assert_int_equal(kc_backend_cpu_create_ex(&off, &im), KC_STATUS_OK);
    const struct {
        kc_conv2d_desc planned;
        int n[2]; /* the batches run */
    } cases[] = {
        {conv3(128, 3, 3, 512, 512, 1), {32, 3}}, /* F(3x3) planned, im2col at 32 */
        {conv3(64, 6, 6, 256, 256, 1), {8, 1}},
        {conv3(32, 8, 8, 64, 64, 1), {5, 1}},
        {conv3(48, 4, 4, 64, 64, 1), {17, 2}},
        /* F(4x4) from 51 images, F(2x2) below, whose workspace is the larger (6.8 MB, 5.6) */
        {conv3(51, 4, 4, 64, 128, 1), {50, 7}},
    };
    unsigned seed = 11;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const size_t ws = be->conv2d_workspace(be, &cases[k].planned);
        for (int r = 0; r < 2; r++) {
            kc_conv2d_desc d = cases[k].planned;
            d.n = cases[k].n[r];
            const size_t nx = (size_t)d.n * d.h * d.w * d.c, ny = (size_t)d.n * d.oh * d.ow * d.f;
            const size_t nw = (size_t)9 * d.c * d.f;
            float *x = rnd(nx, &seed), *w = rnd(nw, &seed), *b = rnd((size_t)d.f, &seed), *dy = rnd(ny, &seed);
            passes a, c;
            run_passes_ws(be, &d, ws, x, w, b, dy, &a);
            run_passes(im, &d, x, w, b, dy, &c);
            const double e[3] = {rel_err_f(a.y, c.y, ny), rel_err_f(a.dx, c.dx, nx), rel_err_f(a.dw, c.dw, nw)};
            print_message("    planned %d x %dx%dx%d -> %d (tile %d), run at %d (tile %d): error %.2g %.2g %.2g\n",
                          cases[k].planned.n, d.h, d.w, d.c, d.f, kc__cpu_winograd_tile_of(be, &cases[k].planned), d.n,
                          kc__cpu_winograd_tile_of(be, &d), e[0], e[1], e[2]);
            for (int i = 0; i < 3; i++) assert_true(e[i] < WG4_TOL);
            free_passes(&a), free_passes(&c);
            free(x), free(w), free(b), free(dy);
        }
    }
    /* the workspace asked at a batch covers every smaller one's, whichever kernel it runs */
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        kc_conv2d_desc d = cases[k].planned;
        const size_t ws = be->conv2d_workspace(be, &d);
        for (d.n = 1; d.n < cases[k].planned.n; d.n++) assert_true(be->conv2d_workspace(be, &d) <= ws);
    }
    kc_backend_destroy(be);
    kc_backend_destroy(im);
}

static void test_workspace(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    kc_conv2d_desc d = conv3(32, 8, 8, 64, 64, 1);
    assert_int_equal(kc__cpu_winograd_tile_of(be, &d), 4); /* the Winograd path's check */
    const size_t need = be->conv2d_workspace(be, &d);
    assert_true(need >= kc__cpu_winograd_workspace(&d, 4));
    float *x = calloc(32 * 8 * 8 * 64, sizeof(float)), *w = calloc(9 * 64 * 64, sizeof(float));
    float *y = calloc(32 * 8 * 8 * 64, sizeof(float));
    void *ws = malloc(need);
    assert_true(x && w && y && ws);
    assert_int_equal(be->conv2d_forward(be, &d, x, w, NULL, y, ws, need - 1), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "too small"));
    assert_non_null(strstr(kc_last_error(), "conv2d_workspace"));
    assert_int_equal(be->conv2d_backward_data(be, &d, y, w, x, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "no workspace given"));
    assert_int_equal(be->conv2d_backward_filter(be, &d, x, y, w, NULL, ws, need), KC_STATUS_OK);
    free(x), free(w), free(y), free(ws);
    kc_backend_destroy(be);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_direct_and_im2col),
        cmocka_unit_test(test_where_it_applies),
        cmocka_unit_test(test_smaller_batch),
        cmocka_unit_test(test_workspace),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
