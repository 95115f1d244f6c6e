/* test_gemm_small.c — the CPU backend's own GEMM tiles for a small dimension
 * (cpu_gemm_small.c) through the backend's gemm, on every kernel set this processor runs:
 * each form (A B, A B^T, A^T B) against a double-precision reference, over sizes that leave
 * every kind of remainder (columns not a multiple of the vector, rows not a multiple of the
 * tile, K across several chunks), beta 0 and 1, leading dimensions wider than the matrices
 * (the columns between must stay untouched); the same results bit for bit at 1, 2 and 3
 * threads; the rule that picks these tiles; the option that turns them off; and a 1x1
 * convolution's bias and ReLU applied in the tiles' registers (or in OpenBLAS's C). */
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
#include "core/core.h"
#include "kerac.h"
#include "kerac_backend.h"

/* the rule of one kernel set: each copy has its own bounds (cpu_isa.h renames the AVX2 and
 * AVX-512 copies; x86-64 builds have them) */
#if defined(__x86_64__)
int kc__cpu_gemm_small_applies_avx2(int trans_a, int trans_b, int m, int n, int k, float alpha, float beta);
int kc__cpu_gemm_small_applies_avx512(int trans_a, int trans_b, int m, int n, int k, float alpha, float beta);
#endif
static int applies_on(int isa, int ta, int tb, int m, int n, int k, float alpha, float beta) {
#if defined(__x86_64__)
    if (isa == KC_CPU_ISA_AVX512) return kc__cpu_gemm_small_applies_avx512(ta, tb, m, n, k, alpha, beta);
    if (isa == KC_CPU_ISA_AVX2) return kc__cpu_gemm_small_applies_avx2(ta, tb, m, n, k, alpha, beta);
#endif
    (void)isa;
    return kc__cpu_gemm_small_applies(ta, tb, m, n, k, alpha, beta);
}

static uint64_t g_rng = 1;
static float frand(void) { /* in [-1, 1) */
    g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((g_rng >> 40) / (double)(1ull << 24)) * 2.0f - 1.0f;
}

typedef struct gemm_case {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
    float *a, *b, *c0;
    double *ref; /* m x n */
    double *mag; /* m x n: beta |c0| + sum |a b|, the scale of each element's rounding */
} gemm_case;

static gemm_case make_case(int ta, int tb, int m, int n, int k, float beta) {
    gemm_case g = {.ta = ta, .tb = tb, .m = m, .n = n, .k = k, .beta = beta};
    g.lda = (ta ? m : k) + 3, g.ldb = (tb ? k : n) + 1, g.ldc = n + 5;
    const size_t na = (size_t)(ta ? k : m) * g.lda, nb = (size_t)(tb ? n : k) * g.ldb, nc = (size_t)m * g.ldc;
    g.a = malloc(na * sizeof(float)), g.b = malloc(nb * sizeof(float)), g.c0 = malloc(nc * sizeof(float));
    g.ref = malloc((size_t)m * n * sizeof(double)), g.mag = malloc((size_t)m * n * sizeof(double));
    assert_true(g.a && g.b && g.c0 && g.ref && g.mag);
    for (size_t i = 0; i < na; i++) g.a[i] = frand();
    for (size_t i = 0; i < nb; i++) g.b[i] = frand();
    for (size_t i = 0; i < nc; i++) g.c0[i] = frand();
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, mg = 0;
            for (int p = 0; p < k; p++) {
                const double av = ta ? g.a[(size_t)p * g.lda + i] : g.a[(size_t)i * g.lda + p];
                const double bv = tb ? g.b[(size_t)j * g.ldb + p] : g.b[(size_t)p * g.ldb + j];
                s += av * bv, mg += fabs(av * bv);
            }
            const double c0 = g.c0[(size_t)i * g.ldc + j];
            g.ref[(size_t)i * n + j] = s + beta * c0;
            g.mag[(size_t)i * n + j] = mg + fabs(beta * c0);
        }
    return g;
}

static void free_case(gemm_case *g) { free(g->a), free(g->b), free(g->c0), free(g->ref), free(g->mag); }

/* be->gemm on a copy of c0 into c (m x ldc); checks against the reference and the padding */
static void run_case(kc_backend *be, const gemm_case *g, float *c, const char *what) {
    memcpy(c, g->c0, (size_t)g->m * g->ldc * sizeof(float));
    assert_int_equal(be->gemm(be, g->ta, g->tb, g->m, g->n, g->k, 1.0f, g->a, g->lda, g->b, g->ldb, g->beta, c, g->ldc),
                     KC_STATUS_OK);
    for (int i = 0; i < g->m; i++) {
        for (int j = 0; j < g->n; j++) {
            const double got = c[(size_t)i * g->ldc + j], want = g->ref[(size_t)i * g->n + j];
            /* float rounding of a sum of k products: well under k * 2^-24 of their magnitudes */
            const double tol = 1e-6 * (g->k + 2) * g->mag[(size_t)i * g->n + j] + 1e-30;
            if (!(fabs(got - want) <= tol))
                fail_msg("%s: gemm ta %d tb %d m %d n %d k %d beta %g: C[%d][%d] = %.9g, reference %.9g (tol %.3g)",
                         what, g->ta, g->tb, g->m, g->n, g->k, g->beta, i, j, got, want, tol);
        }
        for (int j = g->n; j < g->ldc; j++)
            if (c[(size_t)i * g->ldc + j] != g->c0[(size_t)i * g->ldc + j])
                fail_msg("%s: gemm ta %d tb %d m %d n %d k %d: column %d of row %d (past n) was written", what, g->ta,
                         g->tb, g->m, g->n, g->k, j, i);
    }
}

/* columns: below, at and past one vector (4, 8, 16 floats), several blocks, up to the rule's 256 */
static const int k_ns[] = {1, 7, 8, 16, 17, 24, 40, 64, 65, 100, 144, 256};
static const int k_ms[] = {1, 5, 13, 30, 97};
static const int k_ks[] = {1, 3, 16, 37};

static void forms_on(kc_backend *be, int isa) {
    int count = 0;
    for (int form = 0; form < 3; form++) {
        const int ta = form == 2, tb = form == 1;
        for (size_t in = 0; in < KC_ARRAY_LEN(k_ns); in++)
            for (size_t im = 0; im < KC_ARRAY_LEN(k_ms); im++)
                for (size_t ik = 0; ik <= KC_ARRAY_LEN(k_ks); ik++) {
                    /* A^T B also runs K = 700, over several chunks of K */
                    if (ik == KC_ARRAY_LEN(k_ks) && !ta) continue;
                    const int m = k_ms[im], n = k_ns[in], k = ik < KC_ARRAY_LEN(k_ks) ? k_ks[ik] : 700;
                    const float beta = (float)((in + im + ik) % 2);
                    if (!applies_on(isa, ta, tb, m, n, k, 1.0f, beta)) {
                        assert_true(ta && m * n > 8192); /* only A^T B's C past the rule's bound (97 x 100) */
                        continue;
                    }
                    gemm_case g = make_case(ta, tb, m, n, k, beta);
                    float *c = malloc((size_t)m * g.ldc * sizeof(float));
                    assert_non_null(c);
                    run_case(be, &g, c, kc__cpu_isa_label(isa));
                    free(c);
                    free_case(&g);
                    count++;
                }
    }
    print_message("    %s kernels: %d GEMMs match the reference\n", kc__cpu_isa_label(isa), count);
}

/* every kernel set this processor runs, each against the reference */
static void test_against_reference(void **state) {
    (void)state;
    g_rng = 1;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_device_opts o = {.cpu_isa = isa};
        kc_backend *be = NULL;
        assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
        assert_int_equal(be->cpu_gemm_small, 1);
        forms_on(be, isa);
        kc_backend_destroy(be);
    }
}

/* large enough to run on the team: the same bits at 1, 2 and 3 threads (each element of C
 * is one chain over k in order whatever the tiles dealt to the threads) */
static void test_threads(void **state) {
    (void)state;
    g_rng = 7;
    const int saved = kc_get_num_threads();
    /* MobileNetV2's 1x1 convolutions at 96x96 (batch 4 here): forward, backward-data, backward-filter */
    /* and ResNet50's stage-3 shortcut forward (512 columns: the AVX-512 tiles only) */
    /* A^T B from a K of KC_CPU_GEMM_SMALL_HALVES (4,096) runs in two halves, each on its own
     * threads; (128, 256) is past the halves' bound on AVX-512 and past the rule on AVX2 */
    const int shapes[][5] = {{9216, 144, 24, 0, 0}, {9216, 24, 144, 0, 1}, {24, 144, 9216, 1, 0},
                             {9216, 16, 96, 0, 0},  {96, 17, 9000, 1, 0},  {5, 33, 40000, 1, 0},
                             {1500, 500, 200, 0, 0}, {64, 256, 4097, 1, 0}, {128, 256, 4100, 1, 0}};
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_device_opts o = {.cpu_isa = isa};
        kc_backend *be = NULL;
        assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
        for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++) {
            const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
            if (!applies_on(isa, ta, tb, m, n, k, 1.0f, 0.0f)) {
                assert_true(isa != KC_CPU_ISA_AVX512 && (n > 256 || (ta && m * n > 8192)));
                continue;
            }
            gemm_case g = make_case(ta, tb, m, n, k, (float)(s % 2));
            float *c1 = malloc((size_t)m * g.ldc * sizeof(float)), *c = malloc((size_t)m * g.ldc * sizeof(float));
            assert_true(c1 && c);
            for (int nt = 1; nt <= 3; nt++) {
                kc_set_num_threads(nt);
                run_case(be, &g, nt == 1 ? c1 : c, kc__cpu_isa_label(isa));
                if (nt > 1 && memcmp(c1, c, (size_t)m * g.ldc * sizeof(float)) != 0)
                    fail_msg("%s: gemm %dx%dx%d (ta %d, tb %d): %d threads differ from 1 thread",
                             kc__cpu_isa_label(isa), m, n, k, ta, tb, nt);
            }
            free(c1), free(c);
            free_case(&g);
        }
        kc_backend_destroy(be);
    }
    kc_set_num_threads(saved);
}

/* which GEMMs the tiles take: the 1x1 convolutions' forms and sizes, nothing else; the rule
 * of each kernel set the processor runs (each copy is compiled for its own instructions) */
static void test_rule(void **state) {
    (void)state;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        const int wide = isa == KC_CPU_ISA_AVX512; /* 32 registers: larger bounds */
        assert_true(applies_on(isa, 0, 0, 18432, 144, 24, 1.0f, 0.0f));  /* forward 24 -> 144 */
        assert_true(applies_on(isa, 0, 1, 18432, 24, 144, 1.0f, 1.0f));  /* backward-data, adding */
        assert_true(applies_on(isa, 1, 0, 24, 144, 18432, 1.0f, 0.0f));  /* backward-filter */
        assert_int_equal(applies_on(isa, 0, 0, 18432, 64, 256, 1.0f, 0.0f), wide); /* K 256 */
        assert_int_equal(applies_on(isa, 0, 0, 1000, 64, 512, 1.0f, 0.0f), wide);
        assert_false(applies_on(isa, 0, 0, 1000, 64, 513, 1.0f, 0.0f)); /* long K */
        assert_int_equal(applies_on(isa, 1, 0, 64, 256, 100000, 1.0f, 1.0f), wide); /* C of 16,384 floats */
        assert_int_equal(applies_on(isa, 1, 0, 256, 128, 4608, 1.0f, 0.0f), wide);  /* C of 32,768 */
        assert_false(applies_on(isa, 1, 0, 257, 128, 4608, 1.0f, 0.0f));            /* 32,896 */
        assert_true(applies_on(isa, 1, 0, 64, 128, 100000, 1.0f, 1.0f));            /* C of 8,192 */
        assert_false(applies_on(isa, 0, 0, 100, 16, 16, 0.5f, 0.0f));    /* alpha */
        assert_false(applies_on(isa, 0, 0, 100, 16, 16, 1.0f, 0.5f));    /* beta */
        assert_false(applies_on(isa, 1, 1, 100, 16, 16, 1.0f, 0.0f));    /* A^T B^T */
        assert_false(applies_on(isa, 0, 0, 288, 1280, 320, 1.0f, 0.0f)); /* wide C: OpenBLAS */
        assert_int_equal(applies_on(isa, 0, 0, 4608, 512, 256, 1.0f, 0.0f), wide); /* A B: 512 columns */
        assert_false(applies_on(isa, 0, 1, 4608, 512, 16, 1.0f, 0.0f));             /* not A B^T */
        assert_false(applies_on(isa, 0, 1, 1152, 96, 192, 1.0f, 0.0f)); /* B^T of 18,432 floats */
        assert_false(applies_on(isa, 1, 0, 512, 128, 9000, 1.0f, 0.0f)); /* C of 65,536 floats */
        assert_false(applies_on(isa, 0, 0, 0, 16, 16, 1.0f, 0.0f));
    }
}

/* kc_device_opts.cpu_gemm_small and KERAC_CPU_GEMM_SMALL reach the backend's field; with it
 * at 0 the same GEMM runs on OpenBLAS and still matches the reference */
static void test_option(void **state) {
    (void)state;
    kc_backend *be = NULL;
    kc_device_opts o = {.cpu_gemm_small = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    assert_int_equal(be->cpu_gemm_small, 0);
    g_rng = 3;
    gemm_case g = make_case(1, 0, 30, 40, 500, 1.0f);
    float *c = malloc((size_t)g.m * g.ldc * sizeof(float));
    assert_non_null(c);
    run_case(be, &g, c, "OpenBLAS");
    be->cpu_gemm_small = 1;
    run_case(be, &g, c, "tiles");
    free(c);
    free_case(&g);
    kc_backend_destroy(be);
    const char *const values[] = {"0", "off", "1", ""};
    const int want[] = {KC_FALSE, KC_FALSE, KC_TRUE, KC_DEFAULT};
    for (int i = 0; i < 4; i++) {
        setenv("KERAC_CPU_GEMM_SMALL", values[i], 1);
        assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
        assert_int_equal(o.cpu_gemm_small, want[i]);
        assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
        assert_int_equal(be->cpu_gemm_small, want[i] != KC_FALSE);
        kc_backend_destroy(be);
    }
    unsetenv("KERAC_CPU_GEMM_SMALL");
}

/* A 1x1 convolution's forward with a bias and a fused ReLU (conv2d_forward: the bias and the
 * ReLU in the GEMM, cpu_gemm_conv.c's gemm_bias_relu) on every kernel set, with kerac's tiles
 * (added in their registers) and without them (OpenBLAS adding into the bias rows): against a
 * double-precision reference; and with the tiles, bit for bit the tiles' plain GEMM followed by
 * y + b and max(0, y), the passes it replaces. Also a strided 1x1 (im2col's chunks), and no bias. */
static void test_conv_bias_relu(void **state) {
    (void)state;
    g_rng = 11;
    /* n, h, w, c, f, stride, relu, bias */
    const int shapes[][8] = {{2, 7, 9, 16, 24, 1, 1, 1}, {1, 5, 5, 24, 144, 1, 1, 1}, {3, 4, 6, 64, 17, 1, 0, 1},
                             {2, 6, 6, 40, 256, 1, 1, 1}, {2, 3, 3, 32, 600, 1, 1, 1}, {2, 4, 4, 700, 40, 1, 1, 1},
                             {2, 9, 8, 32, 48, 2, 1, 1}, {2, 7, 7, 16, 33, 1, 1, 0}};
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++)
        for (int small = 0; small <= 1; small++) {
            kc_device_opts o = {.cpu_isa = isa, .cpu_gemm_small = small ? KC_TRUE : KC_FALSE};
            kc_backend *be = NULL;
            assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
            for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++) {
                const int *q = shapes[s], st = q[5];
                kc_conv2d_desc d = {.n = q[0], .h = q[1], .w = q[2], .c = q[3], .f = q[4], .kh = 1, .kw = 1,
                                    .sh = st, .sw = st, .dh = 1, .dw = 1, .oh = (q[1] - 1) / st + 1,
                                    .ow = (q[2] - 1) / st + 1, .relu = q[6] != 0};
                const size_t nx = (size_t)d.n * d.h * d.w * d.c, rows = (size_t)d.n * d.oh * d.ow,
                             ny = rows * d.f;
                float *x = malloc(nx * sizeof(float)), *w = malloc((size_t)d.c * d.f * sizeof(float)),
                      *b = malloc((size_t)d.f * sizeof(float)), *y = malloc(ny * sizeof(float)),
                      *y2 = malloc(ny * sizeof(float));
                assert_true(x && w && b && y && y2);
                for (size_t i = 0; i < nx; i++) x[i] = frand();
                for (int i = 0; i < d.c * d.f; i++) w[i] = frand();
                for (int i = 0; i < d.f; i++) b[i] = frand();
                const float *bias = q[7] ? b : NULL;
                const size_t wsb = be->conv2d_workspace(be, &d);
                void *ws = wsb ? malloc(wsb) : NULL;
                assert_true(!wsb || ws);
                assert_int_equal(be->conv2d_forward(be, &d, x, w, bias, y, ws, wsb), KC_STATUS_OK);
                for (size_t r = 0; r < rows; r++) {
                    const int img = (int)(r / ((size_t)d.oh * d.ow)), pix = (int)(r % ((size_t)d.oh * d.ow));
                    const float *xr =
                        x + (((size_t)img * d.h + (size_t)(pix / d.ow) * st) * d.w + (size_t)(pix % d.ow) * st) * d.c;
                    for (int j = 0; j < d.f; j++) {
                        double sum = bias ? bias[j] : 0.0, mg = bias ? fabs(bias[j]) : 0.0;
                        for (int p = 0; p < d.c; p++) sum += (double)xr[p] * w[(size_t)p * d.f + j],
                                                      mg += fabs((double)xr[p] * w[(size_t)p * d.f + j]);
                        const double want = d.relu && sum < 0 ? 0.0 : sum, got = y[r * d.f + j];
                        if (!(fabs(got - want) <= 1e-6 * (d.c + 2) * mg + 1e-30))
                            fail_msg("%s %s: 1x1 conv c %d f %d stride %d: y[%zu][%d] = %.9g, reference %.9g",
                                     kc__cpu_isa_label(isa), small ? "tiles" : "OpenBLAS", d.c, d.f, st, r, j,
                                     got, want);
                    }
                }
                if (small && st == 1 && applies_on(isa, 0, 0, (int)rows, d.f, d.c, 1.0f, 0.0f)) {
                    assert_int_equal(be->gemm(be, 0, 0, (int)rows, d.f, d.c, 1.0f, x, d.c, w, d.f, 0.0f, y2, d.f),
                                     KC_STATUS_OK);
                    for (size_t i = 0; i < ny; i++) {
                        const float v = bias ? y2[i] + bias[i % d.f] : y2[i];
                        y2[i] = d.relu ? (v > 0.0f ? v : 0.0f) : v;
                    }
                    if (memcmp(y, y2, ny * sizeof(float)) != 0)
                        fail_msg("%s: 1x1 conv c %d f %d: the bias and ReLU in the tiles differ from the separate "
                                 "passes", kc__cpu_isa_label(isa), d.c, d.f);
                }
                free(x), free(w), free(b), free(y), free(y2), free(ws);
            }
            kc_backend_destroy(be);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conv_bias_relu),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_rule),
        cmocka_unit_test(test_option),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
