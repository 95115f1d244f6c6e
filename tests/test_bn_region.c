/* test_bn_region.c — the CPU batch norm as one parallel region per call (cpu_norm.c, bn_run:
 * sums, barrier, per-channel coefficients, barrier, the pass over the rows) against a plain
 * reference written here (per channel, sums in double, one loop per quantity):
 *   matches_reference  training forward (y, saved statistics, moving statistics) and backward
 *                      (dx, dgamma, dbeta; dx written over dy too), plain and with the fused
 *                      ReLU (no clip, and ReLU6), and the frozen layer's kernels (inference
 *                      forward; its backward, the inference kernel on dy with a zero mean);
 *                      every kernel set this processor runs on 2 threads, the best one on 1
 *                      and 3 too (3: channel and row splits that do not divide evenly); shapes
 *                      from a few rows (serial) to MobileNetV2's widths, one channel, and
 *                      more than 2048 channels (blocks of 64)
 *   deterministic      the same call twice on the same thread count gives the same bits
 *                      (the threads' sums are added in a fixed order, not as they finish) */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "backend/cpu/cpu.h"

static kc_backend *g_be;

static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

/* Everything one case needs, kernel outputs and reference outputs. */
typedef struct bn_case {
    int64_t rows;
    int c;
    float relu_max; /* < 0: no ReLU, 0: ReLU, > 0: its clip */
    float *x, *dy, *gamma, *beta, *mm, *mv, *y, *dx, *sm, *si, *dg, *db;
    double *ry, *rdx, *rsm, *rsi, *rmm, *rmv, *rdg, *rdb;
} bn_case;

static void *zalloc(size_t n, size_t sz) {
    void *p = calloc(n, sz);
    assert_non_null(p);
    return p;
}

static void case_alloc(bn_case *k, int64_t rows, int c, float relu_max, unsigned seed) {
    const size_t n = (size_t)rows * (size_t)c;
    *k = (bn_case){.rows = rows, .c = c, .relu_max = relu_max};
    k->x = zalloc(n, 4), k->dy = zalloc(n, 4), k->y = zalloc(n, 4), k->dx = zalloc(n, 4);
    k->ry = zalloc(n, 8), k->rdx = zalloc(n, 8);
    float **fp[] = {&k->gamma, &k->beta, &k->mm, &k->mv, &k->sm, &k->si, &k->dg, &k->db};
    for (size_t i = 0; i < sizeof fp / sizeof *fp; i++) *fp[i] = zalloc((size_t)c, 4);
    double **dp[] = {&k->rsm, &k->rsi, &k->rmm, &k->rmv, &k->rdg, &k->rdb};
    for (size_t i = 0; i < sizeof dp / sizeof *dp; i++) *dp[i] = zalloc((size_t)c, 8);
    for (int j = 0; j < c; j++) {
        k->gamma[j] = 0.5f + rnd(&seed), k->beta[j] = rnd(&seed) - 0.3f;
        k->mm[j] = rnd(&seed) - 0.5f, k->mv[j] = 0.5f + rnd(&seed);
    }
    for (size_t i = 0; i < n; i++) /* channel j centred near j / 8: a mean that grows with the channel */
        k->x[i] = 3.0f * rnd(&seed) - 1.0f + (float)(i % (size_t)c) * 0.125f, k->dy[i] = rnd(&seed) - 0.5f;
}

static void case_free(bn_case *k) {
    void *p[] = {k->x, k->dy, k->y, k->dx, k->ry, k->rdx, k->gamma, k->beta, k->mm, k->mv, k->sm, k->si,
                 k->dg, k->db, k->rsm, k->rsi, k->rmm, k->rmv, k->rdg, k->rdb};
    for (size_t i = 0; i < sizeof p / sizeof *p; i++) free(p[i]);
}

static double relu_of(double v, float relu_max) {
    if (relu_max < 0.0f) return v;
    v = v > 0.0 ? v : 0.0;
    return relu_max > 0.0f && v > relu_max ? relu_max : v;
}

/* The reference training forward (momentum 0.9, epsilon 1e-3), from the moving statistics in k. */
static void ref_forward(bn_case *k) {
    const int64_t rows = k->rows;
    const int c = k->c;
    for (int j = 0; j < c; j++) {
        double s = 0.0, v = 0.0;
        for (int64_t r = 0; r < rows; r++) s += k->x[r * c + j];
        const double mean = s / (double)rows;
        for (int64_t r = 0; r < rows; r++) v += (k->x[r * c + j] - mean) * (k->x[r * c + j] - mean);
        const double var = v / (double)rows, inv = 1.0 / sqrt(var + 1e-3);
        k->rsm[j] = mean, k->rsi[j] = inv;
        k->rmm[j] = k->mm[j] * 0.9 + mean * 0.1, k->rmv[j] = k->mv[j] * 0.9 + var * 0.1;
        for (int64_t r = 0; r < rows; r++)
            k->ry[r * c + j] = relu_of(k->gamma[j] * (k->x[r * c + j] - mean) * inv + k->beta[j], k->relu_max);
    }
}

/* The reference backward, with the ReLU's mask from the kernel's own y (as the layer passes it). */
static void ref_backward(bn_case *k) {
    const int64_t rows = k->rows;
    const int c = k->c;
    const double hi = k->relu_max > 0.0f ? k->relu_max : INFINITY;
    for (int j = 0; j < c; j++) {
        double sdy = 0.0, sdyxh = 0.0;
        for (int64_t r = 0; r < rows; r++) {
            const float yv = k->y[r * c + j];
            const double g = k->relu_max < 0.0f || (yv > 0.0f && yv < hi) ? k->dy[r * c + j] : 0.0;
            sdy += g, sdyxh += g * (k->x[r * c + j] - k->rsm[j]) * k->rsi[j];
        }
        k->rdg[j] = sdyxh, k->rdb[j] = sdy;
        for (int64_t r = 0; r < rows; r++) {
            const float yv = k->y[r * c + j];
            const double g = k->relu_max < 0.0f || (yv > 0.0f && yv < hi) ? k->dy[r * c + j] : 0.0;
            const double xh = (k->x[r * c + j] - k->rsm[j]) * k->rsi[j];
            k->rdx[r * c + j] = k->gamma[j] * k->rsi[j] / (double)rows * ((double)rows * g - sdy - xh * sdyxh);
        }
    }
}

/* Largest |a - r| over n, relative to the largest |r| (at least tiny). */
static double rel_err(const float *a, const double *r, int64_t n) {
    double m = 0.0, big = 1e-30;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - r[i])), big = fmax(big, fabs(r[i]));
    return m / big;
}

static void expect(const char *what, const bn_case *k, int threads, const float *a, const double *r, int64_t n,
                   double tol) {
    const double e = rel_err(a, r, n);
    if (!(e <= tol))
        fail_msg("%s: rows %lld c %d relu %g threads %d: relative error %g > %g", what, (long long)k->rows, k->c,
                 (double)k->relu_max, threads, e, tol);
}

static kc_status run_forward(bn_case *k) {
    if (k->relu_max < 0.0f)
        return g_be->batchnorm_forward_train(g_be, k->x, k->y, k->rows, k->c, k->gamma, k->beta, k->mm, k->mv, 0.9f,
                                             1e-3f, k->sm, k->si);
    return g_be->batchnorm_relu_forward_train(g_be, k->x, k->y, k->rows, k->c, k->gamma, k->beta, k->mm, k->mv, 0.9f,
                                              1e-3f, k->sm, k->si, k->relu_max);
}

static kc_status run_backward(bn_case *k, const float *dy, float *dx) {
    if (k->relu_max < 0.0f)
        return g_be->batchnorm_backward(g_be, k->x, dy, dx, k->rows, k->c, k->gamma, k->sm, k->si, k->dg, k->db);
    return g_be->batchnorm_relu_backward(g_be, k->x, k->y, dy, dx, k->rows, k->c, k->gamma, k->beta, k->sm, k->si,
                                         k->dg, k->db, k->relu_max);
}

/* The frozen layer: inference forward from the moving statistics, and its backward (the inference
 * kernel on the masked dy with a zero mean and no beta, as src/layers/batchnorm.c runs it). */
static void check_frozen(bn_case *k, int threads) {
    const int64_t rows = k->rows, n = rows * k->c;
    const int c = k->c;
    const double hi = k->relu_max > 0.0f ? k->relu_max : INFINITY;
    if (k->relu_max < 0.0f)
        assert_int_equal(
            g_be->batchnorm_forward_infer(g_be, k->x, k->y, rows, c, k->gamma, k->beta, k->mm, k->mv, 1e-3f),
            KC_STATUS_OK);
    else
        assert_int_equal(g_be->batchnorm_relu_forward_infer(g_be, k->x, k->y, rows, c, k->gamma, k->beta, k->mm, k->mv,
                                                            1e-3f, k->relu_max),
                         KC_STATUS_OK);
    float *g = zalloc((size_t)n, 4), *zero = zalloc((size_t)c, 4);
    for (int j = 0; j < c; j++) {
        const double inv = 1.0 / sqrt((double)k->mv[j] + 1e-3);
        for (int64_t r = 0; r < rows; r++) {
            const int64_t i = r * c + j;
            k->ry[i] = relu_of(k->gamma[j] * (k->x[i] - (double)k->mm[j]) * inv + k->beta[j], k->relu_max);
            g[i] = k->relu_max < 0.0f || (k->y[i] > 0.0f && k->y[i] < hi) ? k->dy[i] : 0.0f;
            k->rdx[i] = k->gamma[j] * inv * g[i];
        }
    }
    expect("frozen forward", k, threads, k->y, k->ry, n, 1e-5);
    assert_int_equal(g_be->batchnorm_forward_infer(g_be, g, k->dx, rows, c, k->gamma, NULL, zero, k->mv, 1e-3f),
                     KC_STATUS_OK);
    expect("frozen backward", k, threads, k->dx, k->rdx, n, 1e-5);
    free(g), free(zero);
}

/* One shape, ReLU variant and thread count: the kernels against the reference. */
static void check_case(int64_t rows, int c, float relu_max, int threads, unsigned seed) {
    bn_case k;
    case_alloc(&k, rows, c, relu_max, seed);
    omp_set_num_threads(threads);
    const int64_t n = rows * c;
    ref_forward(&k); /* before the kernel updates the moving statistics */
    float *mm0 = zalloc((size_t)c, 4), *mv0 = zalloc((size_t)c, 4);
    memcpy(mm0, k.mm, sizeof(float) * (size_t)c), memcpy(mv0, k.mv, sizeof(float) * (size_t)c);
    assert_int_equal(run_forward(&k), KC_STATUS_OK);
    expect("forward y", &k, threads, k.y, k.ry, n, 2e-5);
    expect("saved mean", &k, threads, k.sm, k.rsm, c, 1e-5);
    expect("saved inv_std", &k, threads, k.si, k.rsi, c, 1e-5);
    expect("moving mean", &k, threads, k.mm, k.rmm, c, 1e-5);
    expect("moving variance", &k, threads, k.mv, k.rmv, c, 1e-5);
    ref_backward(&k);
    assert_int_equal(run_backward(&k, k.dy, k.dx), KC_STATUS_OK);
    expect("backward dx", &k, threads, k.dx, k.rdx, n, 1e-4);
    expect("backward dgamma", &k, threads, k.dg, k.rdg, c, 1e-4);
    expect("backward dbeta", &k, threads, k.db, k.rdb, c, 1e-4);
    float *g = zalloc((size_t)n, 4); /* dx written over dy */
    memcpy(g, k.dy, sizeof(float) * (size_t)n);
    assert_int_equal(run_backward(&k, g, g), KC_STATUS_OK);
    expect("backward dx over dy", &k, threads, g, k.rdx, n, 1e-4);
    memcpy(k.mm, mm0, sizeof(float) * (size_t)c), memcpy(k.mv, mv0, sizeof(float) * (size_t)c);
    check_frozen(&k, threads);
    free(g), free(mm0), free(mv0);
    case_free(&k);
}

static void test_matches_reference(void **state) {
    (void)state;
    const struct {
        int64_t rows;
        int c;
    } shapes[] = {
        {10, 3},     /* serial */
        {40000, 1},  /* one channel, parallel */
        {4608, 7},   /* 7 channels over 3 threads */
        {3001, 96},  /* MobileNetV2's widths; rows that do not split evenly */
        {1152, 576}, /* 6x6 maps of a batch of 32 */
        {40, 2049},  /* blocks of 64 channels */
    };
    const float relus[] = {-1.0f, 0.0f, 6.0f};
    kc_backend *best = g_be;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) { /* every kernel set this processor runs */
        assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_isa = isa}, &g_be), KC_STATUS_OK);
        unsigned seed = 11;
        const int best = isa == kc__cpu_isa_best();
        for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
            for (int t = best ? 1 : 2; t <= (best ? 3 : 2); t++) /* 1 and 3 threads: the best set only */
                for (size_t r = 0; r < sizeof relus / sizeof *relus; r++)
                    check_case(shapes[s].rows, shapes[s].c, relus[r], t, seed++);
        kc_backend_destroy(g_be);
    }
    g_be = best;
    omp_set_num_threads(2);
}

/* The bits of y, saved statistics, dx, dgamma and dbeta of one forward + backward. */
static void run_bits(bn_case *k, float *out) {
    const int64_t n = k->rows * k->c;
    assert_int_equal(run_forward(k), KC_STATUS_OK);
    assert_int_equal(run_backward(k, k->dy, k->dx), KC_STATUS_OK);
    memcpy(out, k->y, sizeof(float) * (size_t)n), memcpy(out + n, k->dx, sizeof(float) * (size_t)n);
    memcpy(out + 2 * n, k->sm, sizeof(float) * (size_t)k->c);
    memcpy(out + 2 * n + k->c, k->si, sizeof(float) * (size_t)k->c);
    memcpy(out + 2 * n + 2 * k->c, k->dg, sizeof(float) * (size_t)k->c);
    memcpy(out + 2 * n + 3 * k->c, k->db, sizeof(float) * (size_t)k->c);
}

static void test_deterministic(void **state) {
    (void)state;
    for (int t = 2; t <= 3; t++) {
        omp_set_num_threads(t);
        bn_case k;
        case_alloc(&k, 9000, 96, 6.0f, 5);
        const size_t words = 2 * (size_t)k.rows * k.c + 4 * (size_t)k.c;
        float *a = zalloc(words, 4), *b = zalloc(words, 4);
        for (int rep = 0; rep < 5; rep++) {
            run_bits(&k, rep ? b : a);
            if (rep && memcmp(a, b, words * sizeof(float)) != 0)
                fail_msg("%d threads: run %d differs from run 0 in its bits", t, rep);
        }
        free(a), free(b);
        case_free(&k);
    }
    omp_set_num_threads(2);
}

static int setup(void **state) {
    (void)state;
    return kc_backend_cpu_create(&g_be) == KC_STATUS_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    kc_backend_destroy(g_be);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_reference),
        cmocka_unit_test(test_deterministic),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
