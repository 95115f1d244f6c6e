/* test_backend_cpu.c — every kernel of the CPU backend against a naive, obviously-correct
 * reference written here in double precision, on random inputs from a fixed seed.
 *
 * Error bounds (float32 kernels against float64 references):
 *   elementwise, activations, pooling, dropout, layout:  |got - ref| <= 1e-5 (|ref| + 1e-6)
 *     (transcendental activations: 2e-5 relative + 1e-6 absolute)
 *   gemm, convolution, reductions (bias_grad, BN sums):  |got - ref| <= 1e-4 (|ref| + rms(ref))
 *     (a sum of K products carries cancellation; rms(ref) is the scale of the output)
 *   batch norm outputs, losses, optimizers:              1e-4 / 2e-5 relative, see each test
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"
#include "core/core.h"
#include "kerac.h"
#include "kerac_backend.h"

/* Let a huge allocation fail with NULL under AddressSanitizer instead of aborting. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }

static kc_backend *g_be;

/* ---- random numbers (splitmix64; fixed seed per test) */
static uint64_t g_rs;
static void rseed(uint64_t s) { g_rs = s; }
static double urand(void) {
    uint64_t z = (g_rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static void fill(float *a, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) a[i] = (float)(lo + (hi - lo) * urand());
}
static float *falloc(size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    assert_non_null(p);
    return p;
}
static double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    assert_non_null(p);
    return p;
}

/* |got - ref| <= rtol * |ref| + atol, element by element */
static void expect_close(const char *what, const float *got, const double *ref, size_t n, double rtol, double atol) {
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - ref[i]);
        if (!(e <= rtol * fabs(ref[i]) + atol)) {
            print_error("%s: element %zu: got %.9g, expected %.9g (err %.3g > %.3g)\n", what, i, (double)got[i],
                        ref[i], e, rtol * fabs(ref[i]) + atol);
            fail();
        }
    }
}
/* |got - ref| <= tol * (|ref| + rms(ref)) */
static void expect_close_scaled(const char *what, const float *got, const double *ref, size_t n, double tol) {
    double ss = 0;
    for (size_t i = 0; i < n; i++) ss += ref[i] * ref[i];
    double rms = n ? sqrt(ss / (double)n) : 0;
    if (rms == 0) rms = 1e-30;
    expect_close(what, got, ref, n, tol, tol * rms);
}

static int group_setup(void **state) {
    (void)state;
    return kc_backend_cpu_create(&g_be) == KC_STATUS_OK ? 0 : -1;
}
static int group_teardown(void **state) {
    (void)state;
    kc_backend_destroy(g_be);
    g_be = NULL;
    return 0;
}

/* ================================================================ table and memory */

static void test_table_and_memory(void **state) {
    (void)state;
    kc_backend *be = g_be;
    assert_int_equal(be->abi, KC_BACKEND_ABI);
    assert_int_equal(be->struct_size, sizeof(kc_backend));
    assert_string_equal(be->name, "cpu");
    /* every entry is set, but the optional device collectives (data-parallel: the CPU has
     * none, the caller's host collective serves) and device timing (the CPU is timed by
     * host clocks) */
    void (**fp)(void) = (void (**)(void))&be->destroy;
    size_t nfp = (sizeof(kc_backend) - offsetof(kc_backend, destroy)) / sizeof(void (*)(void));
    size_t coll0 = (offsetof(kc_backend, coll_unique_id) - offsetof(kc_backend, destroy)) / sizeof(void (*)(void));
    size_t coll1 = (offsetof(kc_backend, coll_describe) - offsetof(kc_backend, destroy)) / sizeof(void (*)(void));
    const size_t timing0 = (offsetof(kc_backend, timing_begin) - offsetof(kc_backend, destroy)) / sizeof(void (*)(void));
    for (size_t i = 0; i < nfp; i++) {
        if ((i >= coll0 && i <= coll1) || (i >= timing0 && i < timing0 + 3)) assert_null(fp[i]);
        else assert_non_null(fp[i]);
    }

    void *p = NULL;
    assert_int_equal(be->alloc(be, 1000, &p), KC_STATUS_OK);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    float src[250], back[250];
    for (int i = 0; i < 250; i++) src[i] = (float)i * 0.5f;
    assert_int_equal(be->to_device(be, p, src, sizeof src), KC_STATUS_OK);
    assert_int_equal(be->to_host(be, back, p, sizeof back), KC_STATUS_OK);
    assert_memory_equal(src, back, sizeof src);
    void *q = NULL;
    assert_int_equal(be->alloc(be, 0, &q), KC_STATUS_OK); /* zero bytes: a valid pointer */
    assert_non_null(q);
    be->free(be, q);
    assert_int_equal(be->alloc(be, 1000, &q), KC_STATUS_OK);
    assert_int_equal(be->copy(be, q, p, 1000), KC_STATUS_OK);
    assert_memory_equal(q, src, 1000);
    assert_int_equal(be->memset0(be, q, 1000), KC_STATUS_OK);
    for (int i = 0; i < 250; i++) assert_true(((float *)q)[i] == 0.0f);
    assert_int_equal(be->sync(be), KC_STATUS_OK);
    be->free(be, q);
    be->free(be, p);
    be->free(be, NULL);

    /* an impossible allocation fails with OUT_OF_MEMORY and names the bytes */
    size_t huge = (size_t)1 << 62;
    p = (void *)1;
    assert_int_equal(be->alloc(be, huge, &p), KC_STATUS_OUT_OF_MEMORY);
    assert_null(p);
    char num[32];
    snprintf(num, sizeof num, "%zu", huge);
    assert_non_null(strstr(kc_last_error(), num));

    kc_mem_info mi = {0};
    assert_int_equal(be->mem_info(be, &mi), KC_STATUS_OK);
    assert_true(mi.total_bytes > ((size_t)64 << 20));
    assert_true(mi.free_bytes > 0 && mi.free_bytes <= mi.total_bytes);

    kc_backend_destroy(NULL); /* NULL-safe */
}

/* ================================================================ gemm */

static void ref_gemm(int ta, int tb, int m, int n, int k, double alpha, const float *a, int lda, const float *b,
                     int ldb, double beta, const float *c0, int ldc, double *out) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++) {
                double av = ta ? a[(size_t)p * lda + i] : a[(size_t)i * lda + p];
                double bv = tb ? b[(size_t)j * ldb + p] : b[(size_t)p * ldb + j];
                s += av * bv;
            }
            out[(size_t)i * n + j] = alpha * s + (beta != 0 ? beta * c0[(size_t)i * ldc + j] : 0.0);
        }
}

static void test_gemm(void **state) {
    (void)state;
    rseed(1);
    const int shapes[][3] = {{37, 23, 19}, {1, 1, 1}, {64, 65, 130}, {5, 128, 3}};
    for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
                int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;
                float *a = falloc((size_t)(ta ? k : m) * lda), *b = falloc((size_t)(tb ? n : k) * ldb);
                float *c = falloc((size_t)m * ldc), *c0 = falloc((size_t)m * ldc);
                fill(a, (size_t)(ta ? k : m) * lda, -1, 1);
                fill(b, (size_t)(tb ? n : k) * ldb, -1, 1);
                fill(c0, (size_t)m * ldc, -1, 1);
                memcpy(c, c0, (size_t)m * ldc * sizeof(float));
                double *ref = dalloc((size_t)m * n);
                float alpha = 0.75f, beta = (s % 2) ? 0.0f : -0.5f;
                ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, ref);
                assert_int_equal(g_be->gemm(g_be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), KC_STATUS_OK);
                float *packed = falloc((size_t)m * n);
                for (int i = 0; i < m; i++) {
                    memcpy(packed + (size_t)i * n, c + (size_t)i * ldc, (size_t)n * sizeof(float));
                    /* the padding columns of C are untouched */
                    for (int j = n; j < ldc; j++) assert_true(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j]);
                }
                expect_close_scaled("gemm", packed, ref, (size_t)m * n, 1e-4);
                free(a), free(b), free(c), free(c0), free(ref), free(packed);
            }
    /* k = 0: C = beta C */
    float c[6] = {1, 2, 3, 4, 5, 6};
    assert_int_equal(g_be->gemm(g_be, 0, 0, 2, 3, 0, 1.0f, NULL, 1, NULL, 3, 2.0f, c, 3), KC_STATUS_OK);
    assert_true(c[5] == 12.0f);
    /* a too-small leading dimension is an error, not a BLAS message */
    float a[4] = {0}, b[4] = {0};
    assert_int_equal(g_be->gemm(g_be, 0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(g_be->gemm(g_be, 0, 0, -1, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2), KC_STATUS_INVALID_ARGUMENT);
}

/* GEMMs large enough for the backend's own split of C across the threads (a dimension of at
 * least 4096 and at most 256 columns: by rows when C is taller than wide, else by columns in blocks of 16, n not a
 * multiple of 16 here), at 1, 2 and 3 threads: each against the double reference, and the
 * threaded results bit for bit equal to the 1-thread one (each element of C comes from one
 * single-threaded call whatever the split). Both paths: the split (cpu_gemm_split on, as
 * many threads as asked), and OpenBLAS's own threading (cpu_gemm_split 0: one call). */
static void gemm_split_shapes(int split);
static void test_gemm_split(void **state) {
    (void)state;
    const int saved_split = g_be->cpu_gemm_split;
    for (int split = 1; split >= 0; split--) {
        g_be->cpu_gemm_split = split;
        gemm_split_shapes(split);
    }
    g_be->cpu_gemm_split = saved_split;
}

static void gemm_split_shapes(int split) {
    rseed(11);
    const int shapes[][5] = {/* m, n, k, ta, tb */
                             {16500, 40, 37, 0, 0}, {16400, 24, 33, 1, 1}, {20, 100, 17000, 1, 0}, {50, 30, 16384, 0, 1}};
    const int saved = kc_get_num_threads();
    for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++) {
        const int m = shapes[s][0], n = shapes[s][1], k = shapes[s][2], ta = shapes[s][3], tb = shapes[s][4];
        const int lda = (ta ? m : k) + 1, ldb = (tb ? k : n) + 2, ldc = n + 3;
        float *a = falloc((size_t)(ta ? k : m) * lda), *b = falloc((size_t)(tb ? n : k) * ldb);
        float *c0 = falloc((size_t)m * ldc), *c1 = falloc((size_t)m * ldc), *c = falloc((size_t)m * ldc);
        fill(a, (size_t)(ta ? k : m) * lda, -1, 1);
        fill(b, (size_t)(tb ? n : k) * ldb, -1, 1);
        fill(c0, (size_t)m * ldc, -1, 1);
        const float alpha = 1.25f, beta = s % 2 ? 0.0f : 0.5f;
        double *ref = dalloc((size_t)m * n);
        ref_gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c0, ldc, ref);
        float *packed = falloc((size_t)m * n);
        for (int nt = 1; nt <= 3; nt++) {
            kc_set_num_threads(nt);
            assert_int_equal(kc__cpu_gemm_threads(g_be, m, n, k), split ? nt : 1);
            memcpy(c, c0, (size_t)m * ldc * sizeof(float));
            assert_int_equal(g_be->gemm(g_be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc), KC_STATUS_OK);
            for (int i = 0; i < m; i++) {
                memcpy(packed + (size_t)i * n, c + (size_t)i * ldc, (size_t)n * sizeof(float));
                for (int j = n; j < ldc; j++) assert_true(c[(size_t)i * ldc + j] == c0[(size_t)i * ldc + j]);
            }
            expect_close_scaled("gemm split", packed, ref, (size_t)m * n, 1e-4);
            if (nt == 1)
                memcpy(c1, c, (size_t)m * ldc * sizeof(float));
            else if (split && memcmp(c1, c, (size_t)m * ldc * sizeof(float)) != 0)
                fail_msg("gemm %dx%dx%d (ta %d, tb %d): %d threads differ from 1 thread", m, n, k, ta, tb, nt);
        }
        free(a), free(b), free(c0), free(c1), free(c), free(ref), free(packed);
    }
    kc_set_num_threads(saved);
}

/* debt2: the split is a device option. kc_device_opts.cpu_gemm_split and KERAC_CPU_GEMM_SPLIT
 * (read by kc_device_opts_default) reach the backend's cpu_gemm_split, which decides the
 * threads of a tall, skinny GEMM at each call; a model's backend (kc_model_backend) has its
 * device options' value, and changing the field changes the next GEMM. */
static void test_gemm_split_option(void **state) {
    (void)state;
    const int saved = kc_get_num_threads();
    kc_set_num_threads(2);
    const int m = 16500, n = 40, k = 37; /* split at 2 threads when on */
    kc_backend *be = NULL;
    kc_device_opts o = {0};
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    assert_int_equal(be->cpu_gemm_split, 1);
    assert_int_equal(kc__cpu_gemm_threads(be, m, n, k), 2);
    assert_int_equal(kc__cpu_gemm_threads(be, 64, n, k), 1); /* not tall: OpenBLAS's threading */
    be->cpu_gemm_split = 0;
    assert_int_equal(kc__cpu_gemm_threads(be, m, n, k), 1);
    kc_backend_destroy(be);
    o.cpu_gemm_split = KC_FALSE;
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    assert_int_equal(be->cpu_gemm_split, 0);
    assert_int_equal(kc__cpu_gemm_threads(be, m, n, k), 1);
    kc_backend_destroy(be);
    /* the environment: 0/off turn it off, anything else (or unset) leaves it on */
    const char *const values[] = {"0", "off", "1", ""};
    const int want[] = {KC_FALSE, KC_FALSE, KC_TRUE, KC_DEFAULT};
    for (int i = 0; i < 4; i++) {
        setenv("KERAC_CPU_GEMM_SPLIT", values[i], 1);
        assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
        assert_int_equal(o.cpu_gemm_split, want[i]);
        assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
        assert_int_equal(be->cpu_gemm_split, want[i] != KC_FALSE);
        assert_int_equal(kc__cpu_gemm_threads(be, m, n, k), want[i] == KC_FALSE ? 1 : 2);
        kc_backend_destroy(be);
    }
    /* a model's backend: kc_model_set_device_opts over the environment's */
    kc_model *mod = NULL;
    assert_int_equal(kc_sequential("split_opt", &mod), KC_STATUS_OK);
    assert_int_equal(kc_add(mod, KC_INPUT(.shape = {4})), KC_STATUS_OK);
    assert_int_equal(kc_add(mod, KC_DENSE(.units = 2)), KC_STATUS_OK);
    assert_null(kc_model_backend(mod)); /* not built yet */
    assert_null(kc_model_backend(NULL));
    setenv("KERAC_CPU_GEMM_SPLIT", "1", 1);
    o = (kc_device_opts){.device = "cpu", .cpu_gemm_split = KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(mod, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_build(mod), KC_STATUS_OK);
    kc_backend *mbe = kc_model_backend(mod);
    assert_non_null(mbe);
    assert_int_equal(mbe->cpu_gemm_split, 0);
    mbe->cpu_gemm_split = 1;
    assert_int_equal(kc__cpu_gemm_threads(mbe, m, n, k), 2);
    kc_model_destroy(mod);
    unsetenv("KERAC_CPU_GEMM_SPLIT");
    kc_set_num_threads(saved);
}

/* ================================================================ convolution */

typedef struct conv_case {
    int n, h, w, c, f, kh, kw, sh, sw, dh, dw, same;
} conv_case;

/* Output size and leading pad of one axis, as TensorFlow computes them. */
static void out_pad(int in, int k, int s, int dil, int same, int *out, int *pad) {
    int ek = (k - 1) * dil + 1;
    if (same) {
        *out = (in + s - 1) / s;
        int total = (*out - 1) * s + ek - in;
        if (total < 0) total = 0;
        *pad = total / 2;
    } else {
        *out = (in - ek) / s + 1;
        *pad = 0;
    }
}

static kc_conv2d_desc conv_desc(conv_case k) {
    kc_conv2d_desc d = {.n = k.n, .h = k.h, .w = k.w, .c = k.c, .f = k.f, .kh = k.kh, .kw = k.kw,
                        .sh = k.sh, .sw = k.sw, .dh = k.dh, .dw = k.dw};
    out_pad(k.h, k.kh, k.sh, k.dh, k.same, &d.oh, &d.pad_top);
    out_pad(k.w, k.kw, k.sw, k.dw, k.same, &d.ow, &d.pad_left);
    return d;
}

#define X4(d, N, Y, X, C) ((((size_t)(N) * (d)->h + (Y)) * (d)->w + (X)) * (d)->c + (C))
#define Y4(d, N, Y, X, F) ((((size_t)(N) * (d)->oh + (Y)) * (d)->ow + (X)) * (d)->f + (F))
#define W4(d, I, J, C, F) ((((size_t)(I) * (d)->kw + (J)) * (d)->c + (C)) * (d)->f + (F))

/* Visit every (output, kernel tap, input) triple of a convolution that touches real input. */
#define CONV_FOR_EACH(d, BODY)                                                                                   \
    for (int n_ = 0; n_ < (d)->n; n_++)                                                                          \
        for (int oy_ = 0; oy_ < (d)->oh; oy_++)                                                                  \
            for (int ox_ = 0; ox_ < (d)->ow; ox_++)                                                              \
                for (int ki_ = 0; ki_ < (d)->kh; ki_++)                                                          \
                    for (int kj_ = 0; kj_ < (d)->kw; kj_++) {                                                    \
                        int iy_ = oy_ * (d)->sh - (d)->pad_top + ki_ * (d)->dh;                                  \
                        int ix_ = ox_ * (d)->sw - (d)->pad_left + kj_ * (d)->dw;                                 \
                        if (iy_ < 0 || iy_ >= (d)->h || ix_ < 0 || ix_ >= (d)->w) continue;                      \
                        for (int c_ = 0; c_ < (d)->c; c_++)                                                      \
                            for (int f_ = 0; f_ < (d)->f; f_++) { BODY; }                                        \
                    }

static void run_conv_case(conv_case cc) {
    kc_conv2d_desc dd = conv_desc(cc), *d = &dd;
    size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->f;
    size_t nw = (size_t)d->kh * d->kw * d->c * d->f;
    float *x = falloc(nx), *w = falloc(nw), *b = falloc(d->f), *y = falloc(ny), *dy = falloc(ny);
    float *dx = falloc(nx), *dw = falloc(nw), *db = falloc(d->f);
    fill(x, nx, -1, 1), fill(w, nw, -1, 1), fill(b, d->f, -1, 1), fill(dy, ny, -1, 1);
    double *ry = dalloc(ny), *rdx = dalloc(nx), *rdw = dalloc(nw), *rdb = dalloc(d->f);
    for (size_t i = 0; i < ny; i++) ry[i] = b[i % d->f];
    CONV_FOR_EACH(d, ry[Y4(d, n_, oy_, ox_, f_)] += (double)x[X4(d, n_, iy_, ix_, c_)] * w[W4(d, ki_, kj_, c_, f_)]);
    CONV_FOR_EACH(d, rdx[X4(d, n_, iy_, ix_, c_)] += (double)dy[Y4(d, n_, oy_, ox_, f_)] * w[W4(d, ki_, kj_, c_, f_)]);
    CONV_FOR_EACH(d, rdw[W4(d, ki_, kj_, c_, f_)] += (double)x[X4(d, n_, iy_, ix_, c_)] * dy[Y4(d, n_, oy_, ox_, f_)]);
    for (size_t i = 0; i < ny; i++) rdb[i % d->f] += dy[i];

    size_t wsb = g_be->conv2d_workspace(g_be, d);
    int is_1x1 = cc.kh == 1 && cc.kw == 1 && cc.sh == 1 && cc.sw == 1 && d->pad_top == 0 && d->pad_left == 0;
    if (is_1x1) assert_int_equal(wsb, 0);
    else assert_true(wsb > 0);
    void *ws = NULL;
    assert_int_equal(g_be->alloc(g_be, wsb, &ws), KC_STATUS_OK);
    char what[160];
    snprintf(what, sizeof what, "conv n%d %dx%dx%d f%d k%dx%d s%dx%d d%dx%d %s", cc.n, cc.h, cc.w, cc.c, cc.f, cc.kh,
             cc.kw, cc.sh, cc.sw, cc.dh, cc.dw, cc.same ? "same" : "valid");

    assert_int_equal(g_be->conv2d_forward(g_be, d, x, w, b, y, ws, wsb), KC_STATUS_OK);
    expect_close_scaled(what, y, ry, ny, 1e-4);
    for (size_t i = 0; i < nx; i++) dx[i] = 1234.0f; /* overwritten, not accumulated */
    assert_int_equal(g_be->conv2d_backward_data(g_be, d, dy, w, dx, ws, wsb), KC_STATUS_OK);
    expect_close_scaled(what, dx, rdx, nx, 1e-4);
    for (size_t i = 0; i < nw; i++) dw[i] = 1234.0f;
    assert_int_equal(g_be->conv2d_backward_filter(g_be, d, x, dy, dw, db, ws, wsb), KC_STATUS_OK);
    expect_close_scaled(what, dw, rdw, nw, 1e-4);
    expect_close_scaled(what, db, rdb, d->f, 1e-4);
    /* the fused ReLU: max(0, conv + b), bit for bit what the ReLU pass of act_forward gives */
    {
        float *y2 = falloc(ny);
        kc_conv2d_desc dr = *d;
        dr.relu = 1;
        assert_int_equal(g_be->conv2d_forward(g_be, &dr, x, w, b, y2, ws, wsb), KC_STATUS_OK);
        assert_int_equal(g_be->act_forward(g_be, (kc_act_params){.kind = KC_ACT_RELU}, y, y, (int64_t)ny, d->f),
                         KC_STATUS_OK);
        assert_memory_equal(y2, y, ny * sizeof(float));
        free(y2);
    }
    /* no bias: y = conv only; db NULL accepted */
    assert_int_equal(g_be->conv2d_forward(g_be, d, x, w, NULL, y, ws, wsb), KC_STATUS_OK);
    for (size_t i = 0; i < ny; i++) ry[i] -= b[i % d->f];
    expect_close_scaled(what, y, ry, ny, 1e-4);
    assert_int_equal(g_be->conv2d_backward_filter(g_be, d, x, dy, dw, NULL, ws, wsb), KC_STATUS_OK);
    if (!is_1x1) { /* a missing or short workspace is an error (the direct small-patch forward needs none) */
        assert_int_equal(g_be->conv2d_backward_data(g_be, d, dy, w, dx, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
        assert_int_equal(g_be->conv2d_backward_data(g_be, d, dy, w, dx, ws, wsb - 1), KC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(kc_last_error(), "too small"));
    }
    if (d->n > 1) { /* the workspace of this batch is enough for a shorter one (the last batch of an epoch) */
        kc_conv2d_desc short_d = *d;
        short_d.n = 1;
        assert_true(g_be->conv2d_workspace(g_be, &short_d) <= wsb);
        assert_int_equal(g_be->conv2d_forward(g_be, &short_d, x, w, NULL, y, ws, wsb), KC_STATUS_OK);
        assert_int_equal(g_be->conv2d_backward_filter(g_be, &short_d, x, dy, dw, NULL, ws, wsb), KC_STATUS_OK);
    }
    g_be->free(g_be, ws);
    free(x), free(w), free(b), free(y), free(dy), free(dx), free(dw), free(db);
    free(ry), free(rdx), free(rdw), free(rdb);
}

static void test_conv2d(void **state) {
    (void)state;
    rseed(2);
    const conv_case cases[] = {
        /* n  h  w  c  f kh kw sh sw dh dw same */
        {2, 7, 9, 3, 5, 3, 3, 1, 1, 1, 1, 0},  /* valid, odd sizes, batch > 1 */
        {2, 8, 7, 4, 6, 3, 3, 2, 2, 1, 1, 1},  /* same, stride 2: pad top 0 / bottom 1, left 1 / right 1 */
        {1, 6, 6, 2, 3, 2, 2, 2, 2, 1, 1, 1},  /* same, even kernel: no padding needed */
        {2, 9, 10, 3, 4, 3, 3, 1, 1, 2, 2, 1}, /* dilation 2, same */
        {2, 9, 8, 2, 3, 3, 2, 1, 1, 2, 1, 0},  /* dilation 2 rows only, valid, non-square kernel */
        {3, 5, 4, 6, 7, 1, 1, 1, 1, 1, 1, 0},  /* 1x1 fast path */
        {2, 5, 5, 6, 7, 1, 1, 2, 2, 1, 1, 0},  /* 1x1 stride 2 (im2col path) */
        {2, 5, 7, 3, 4, 2, 3, 1, 2, 1, 1, 1},  /* 2x3 kernel, strides (1, 2), same */
        {1, 3, 3, 2, 2, 5, 5, 1, 1, 1, 1, 1},  /* kernel larger than the image, same */
        {2, 6, 6, 1, 8, 3, 3, 3, 3, 1, 1, 1},  /* one input channel, stride 3 */
        {8, 28, 28, 1, 32, 3, 3, 1, 1, 1, 1, 0}, /* the default CNN's first layer: direct path, threaded partial sums */
        {2, 9, 9, 16, 12, 3, 3, 1, 1, 1, 1, 1},  /* K = 144: im2col + GEMM path */
        /* infer-b: the direct kernel's blocks of pixels (8 / 4 / 2 a block for AVX-512 / AVX2 /
         * baseline), read in place inside the image, gathered at its edges and for the last
         * partial block */
        {3, 13, 30, 1, 32, 3, 3, 1, 1, 1, 1, 0}, /* valid, 28 wide: whole blocks + a partial one */
        {2, 11, 70, 1, 16, 3, 3, 1, 1, 1, 1, 1}, /* same, 70 wide: two spans of the row, padded edges */
        {2, 12, 21, 3, 48, 3, 3, 2, 2, 1, 1, 1}, /* 3 channels (K = 27), stride 2, same, 3 filter blocks */
        {2, 9, 17, 2, 16, 4, 4, 1, 1, 1, 1, 0},  /* K = 32 (the largest direct patch), even kernel */
        {1, 10, 19, 1, 32, 3, 3, 1, 2, 2, 2, 0}, /* strides (1, 2), dilation 2, valid */
        {2, 5, 5, 3, 16, 3, 3, 1, 1, 1, 1, 0},   /* 3 wide: fewer pixels than a block */
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(cases); i++) run_conv_case(cases[i]);
}

/* A batch whose im2col matrix exceeds the workspace cap runs in chunks of whole images
 * (here 3 + 3 + 1 with the 4 MiB cap; whatever the cap, the workspace is a whole number of
 * images' col matrices and less than the full batch's). */
static void test_conv2d_chunked(void **state) {
    (void)state;
    rseed(3);
    conv_case cc = {7, 48, 48, 16, 3, 3, 3, 1, 1, 1, 1, 1};
    kc_conv2d_desc d = conv_desc(cc);
    size_t per_image = (size_t)d.oh * d.ow * d.kh * d.kw * d.c * sizeof(float);
    size_t wsb = g_be->conv2d_workspace(g_be, &d);
    assert_true(wsb < (size_t)d.n * per_image); /* chunked */
    assert_true(wsb >= per_image && wsb % per_image == 0);
    run_conv_case(cc);
    /* a single image larger than the cap: one image per chunk */
    conv_case big = {2, 100, 100, 32, 2, 3, 3, 1, 1, 1, 1, 1};
    d = conv_desc(big);
    per_image = (size_t)d.oh * d.ow * d.kh * d.kw * d.c * sizeof(float);
    assert_true(g_be->conv2d_workspace(g_be, &d) == per_image);
    run_conv_case(big);
}

static void test_conv2d_bad_desc(void **state) {
    (void)state;
    kc_conv2d_desc d = conv_desc((conv_case){1, 4, 4, 1, 1, 3, 3, 1, 1, 1, 1, 0});
    d.sh = 0;
    float buf[64] = {0};
    assert_int_equal(g_be->conv2d_forward(g_be, &d, buf, buf, NULL, buf, buf, sizeof buf), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "conv2d_forward"));
    assert_int_equal(g_be->conv2d_forward(g_be, NULL, buf, buf, NULL, buf, buf, sizeof buf), KC_STATUS_INVALID_ARGUMENT);
}

/* ================================================================ pooling */

static kc_pool2d_desc pool_desc(kc_pool_kind kind, int n, int h, int w, int c, int k, int s, int same) {
    kc_pool2d_desc d = {.kind = kind, .n = n, .h = h, .w = w, .c = c, .kh = k, .kw = k, .sh = s, .sw = s};
    out_pad(h, k, s, 1, same, &d.oh, &d.pad_top);
    out_pad(w, k, s, 1, same, &d.ow, &d.pad_left);
    return d;
}

/* ties: inputs from {0, 1, 2}, so windows hold equal maxima (the first one in window order wins) */
static void run_pool_case_x(kc_pool2d_desc dd, int ties) {
    kc_pool2d_desc *d = &dd;
    size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->c;
    float *x = falloc(nx), *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
    int32_t *mask = malloc(ny * sizeof(int32_t)), *rmask = malloc(ny * sizeof(int32_t));
    double *ry = dalloc(ny), *rdx = dalloc(nx);
    fill(x, nx, -2, 2), fill(dy, ny, -1, 1);
    if (ties)
        for (size_t i = 0; i < nx; i++) x[i] = (float)(int)(urand() * 3);
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int c = 0; c < d->c; c++) {
                    size_t o = (((size_t)n * d->oh + oy) * d->ow + ox) * d->c + c;
                    double best = -INFINITY, sum = 0;
                    int cnt = 0, arg = -1;
                    for (int ky = 0; ky < d->kh; ky++)
                        for (int kx = 0; kx < d->kw; kx++) {
                            int iy = oy * d->sh - d->pad_top + ky, ix = ox * d->sw - d->pad_left + kx;
                            if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                            int idx = (int)((((size_t)n * d->h + iy) * d->w + ix) * d->c + c);
                            if (x[idx] > best) best = x[idx], arg = idx;
                            sum += x[idx], cnt++;
                        }
                    assert_true(cnt > 0);
                    if (d->kind == KC_POOL_MAX) {
                        ry[o] = best, rmask[o] = arg;
                        rdx[arg] += dy[o];
                    } else {
                        ry[o] = sum / cnt;
                        for (int ky = 0; ky < d->kh; ky++)
                            for (int kx = 0; kx < d->kw; kx++) {
                                int iy = oy * d->sh - d->pad_top + ky, ix = ox * d->sw - d->pad_left + kx;
                                if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) continue;
                                rdx[(((size_t)n * d->h + iy) * d->w + ix) * d->c + c] += dy[o] / cnt;
                            }
                    }
                }
    char what[128];
    snprintf(what, sizeof what, "%s pool n%d %dx%dx%d k%d s%d pad %d,%d", d->kind == KC_POOL_MAX ? "max" : "avg",
             d->n, d->h, d->w, d->c, d->kh, d->sh, d->pad_top, d->pad_left);
    assert_int_equal(g_be->pool2d_forward(g_be, d, x, y, mask), KC_STATUS_OK);
    expect_close(what, y, ry, ny, 1e-5, 1e-6);
    if (d->kind == KC_POOL_MAX)
        for (size_t i = 0; i < ny; i++) {
            if (mask[i] != rmask[i]) {
                print_error("%s: mask[%zu] = %d, expected %d\n", what, i, mask[i], rmask[i]);
                fail();
            }
            assert_true(x[mask[i]] == y[i]);
            assert_int_equal(mask[i] % d->c, (int)(i % d->c)); /* same channel */
        }
    for (size_t i = 0; i < nx; i++) dx[i] = 99.0f; /* overwritten */
    assert_int_equal(g_be->pool2d_backward(g_be, d, dy, mask, dx), KC_STATUS_OK);
    expect_close(what, dx, rdx, nx, 1e-5, 1e-6);
    free(x), free(y), free(dy), free(dx), free(mask), free(rmask), free(ry), free(rdx);
}

static void run_pool_case(kc_pool2d_desc d) { run_pool_case_x(d, 0); }

static void test_pool2d(void **state) {
    (void)state;
    rseed(4);
    for (int kind = 0; kind < 2; kind++) {
        run_pool_case(pool_desc(kind, 2, 8, 6, 3, 2, 2, 0));  /* 2x2/2 valid */
        run_pool_case(pool_desc(kind, 2, 7, 9, 2, 3, 2, 1));  /* 3x3/2 same, odd: asymmetric pad */
        run_pool_case(pool_desc(kind, 3, 5, 5, 4, 3, 1, 1));  /* overlapping windows */
        run_pool_case(pool_desc(kind, 1, 7, 7, 1, 2, 3, 0));  /* stride > pool size */
        run_pool_case(pool_desc(kind, 4, 24, 24, 32, 3, 2, 1)); /* large: parallel path */
        run_pool_case_x(pool_desc(kind, 2, 9, 9, 3, 3, 2, 1), 1); /* ties */
    }
    /* max backward without a mask is an error */
    kc_pool2d_desc d = pool_desc(KC_POOL_MAX, 1, 4, 4, 1, 2, 2, 0);
    float buf[16];
    assert_int_equal(g_be->pool2d_backward(g_be, &d, buf, NULL, buf), KC_STATUS_INVALID_ARGUMENT);
}

static void test_global_avg_pool(void **state) {
    (void)state;
    rseed(5);
    const int shapes[][3] = {{3, 25, 7}, {2, 49, 70}, {64, 64, 16}};
    for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++) {
        int n = shapes[s][0], hw = shapes[s][1], c = shapes[s][2];
        size_t nx = (size_t)n * hw * c;
        float *x = falloc(nx), *y = falloc((size_t)n * c), *dy = falloc((size_t)n * c), *dx = falloc(nx);
        double *ry = dalloc((size_t)n * c), *rdx = dalloc(nx);
        fill(x, nx, -1, 3), fill(dy, (size_t)n * c, -1, 1);
        for (int i = 0; i < n; i++)
            for (int p = 0; p < hw; p++)
                for (int j = 0; j < c; j++) {
                    ry[(size_t)i * c + j] += x[((size_t)i * hw + p) * c + j] / (double)hw;
                    rdx[((size_t)i * hw + p) * c + j] = dy[(size_t)i * c + j] / (double)hw;
                }
        assert_int_equal(g_be->global_avg_pool_forward(g_be, x, y, n, hw, c), KC_STATUS_OK);
        expect_close("global_avg_pool_forward", y, ry, (size_t)n * c, 1e-5, 1e-6);
        assert_int_equal(g_be->global_avg_pool_backward(g_be, dy, dx, n, hw, c), KC_STATUS_OK);
        expect_close("global_avg_pool_backward", dx, rdx, nx, 1e-5, 1e-7);
        free(x), free(y), free(dy), free(dx), free(ry), free(rdx);
    }
}

/* ================================================================ batch norm */

static void run_bn_case(int64_t rows, int c, int affine, float offset) {
    size_t nx = (size_t)rows * c;
    float *x = falloc(nx), *y = falloc(nx), *dy = falloc(nx), *dx = falloc(nx);
    float *gamma = falloc(c), *beta = falloc(c), *mm = falloc(c), *mv = falloc(c), *smean = falloc(c),
          *sinv = falloc(c), *dg = falloc(c), *dbt = falloc(c);
    fill(x, nx, 1, 3); /* nonzero mean */
    for (size_t i = 0; i < nx; i += 7) x[i] *= 2.5f;
    for (size_t i = 0; i < nx; i++) x[i] += offset;
    fill(dy, nx, -1, 1), fill(gamma, c, 0.5, 1.5), fill(beta, c, -1, 1), fill(mm, c, -0.5, 0.5), fill(mv, c, 0.5, 2);
    const float momentum = 0.99f, eps = 1e-3f;
    const float *g = affine ? gamma : NULL, *bt = affine ? beta : NULL;
    double *mean = dalloc(c), *var = dalloc(c), *ry = dalloc(nx), *rdx = dalloc(nx), *rmm = dalloc(c),
           *rmv = dalloc(c), *rdg = dalloc(c), *rdb = dalloc(c), *rinv = dalloc(c);
    for (int j = 0; j < c; j++) {
        double s = 0, v = 0;
        for (int64_t r = 0; r < rows; r++) s += x[r * c + j];
        mean[j] = s / rows;
        for (int64_t r = 0; r < rows; r++) v += (x[r * c + j] - mean[j]) * (x[r * c + j] - mean[j]);
        var[j] = v / rows;
        rinv[j] = 1.0 / sqrt(var[j] + eps);
        rmm[j] = mm[j] * (double)momentum + mean[j] * (1.0 - (double)momentum);
        rmv[j] = mv[j] * (double)momentum + var[j] * (1.0 - (double)momentum);
        double gj = g ? g[j] : 1.0, bj = bt ? bt[j] : 0.0;
        double sdy = 0, sdyx = 0;
        for (int64_t r = 0; r < rows; r++) {
            double xh = (x[r * c + j] - mean[j]) * rinv[j];
            ry[r * c + j] = gj * xh + bj;
            sdy += dy[r * c + j];
            sdyx += dy[r * c + j] * xh;
        }
        rdg[j] = sdyx, rdb[j] = sdy;
        for (int64_t r = 0; r < rows; r++) {
            double xh = (x[r * c + j] - mean[j]) * rinv[j];
            rdx[r * c + j] = gj * rinv[j] / rows * (rows * (double)dy[r * c + j] - sdy - xh * sdyx);
        }
    }
    char what[64];
    snprintf(what, sizeof what, "batchnorm rows %lld c %d%s", (long long)rows, c, affine ? "" : " (no affine)");
    assert_int_equal(g_be->batchnorm_forward_train(g_be, x, y, rows, c, g, bt, mm, mv, momentum, eps, smean, sinv),
                     KC_STATUS_OK);
    expect_close(what, y, ry, nx, 1e-4, 1e-5);
    expect_close(what, smean, mean, c, 1e-5, 1e-6);
    expect_close(what, sinv, rinv, c, 1e-5, 1e-6);
    expect_close(what, mm, rmm, c, 1e-5, 1e-6); /* moving statistics */
    expect_close(what, mv, rmv, c, 1e-5, 1e-6);
    for (int j = 0; j < c; j++) dg[j] = dbt[j] = 55.0f;
    assert_int_equal(g_be->batchnorm_backward(g_be, x, dy, dx, rows, c, g, smean, sinv, dg, dbt), KC_STATUS_OK);
    expect_close_scaled(what, dx, rdx, nx, 1e-4);
    expect_close_scaled(what, dg, rdg, c, 1e-4);
    expect_close_scaled(what, dbt, rdb, c, 1e-4);
    /* NULL dgamma/dbeta, dx aliasing dy */
    memcpy(dx, dy, nx * sizeof(float));
    assert_int_equal(g_be->batchnorm_backward(g_be, x, dx, dx, rows, c, g, smean, sinv, NULL, NULL), KC_STATUS_OK);
    expect_close_scaled(what, dx, rdx, nx, 1e-4);
    /* inference with the updated moving statistics */
    for (int j = 0; j < c; j++) {
        double inv = 1.0 / sqrt((double)mv[j] + eps), gj = g ? g[j] : 1.0, bj = bt ? bt[j] : 0.0;
        for (int64_t r = 0; r < rows; r++) ry[r * c + j] = gj * (x[r * c + j] - (double)mm[j]) * inv + bj;
    }
    assert_int_equal(g_be->batchnorm_forward_infer(g_be, x, y, rows, c, g, bt, mm, mv, eps), KC_STATUS_OK);
    expect_close(what, y, ry, nx, 1e-4, 1e-5);
    free(x), free(y), free(dy), free(dx), free(gamma), free(beta), free(mm), free(mv), free(smean), free(sinv);
    free(dg), free(dbt), free(mean), free(var), free(ry), free(rdx), free(rmm), free(rmv), free(rdg), free(rdb);
    free(rinv);
}

static void test_batchnorm(void **state) {
    (void)state;
    rseed(6);
    run_bn_case(10, 3, 1, 0.0f);
    run_bn_case(37, 5, 0, 0.0f);
    run_bn_case(600, 70, 1, 0.0f); /* > 64 channels, parallel path */
    run_bn_case(2000, 16, 0, 0.0f);
    run_bn_case(3000, 96, 1, 0.0f); /* MobileNetV2's widths: one pass, several row blocks per thread */
    run_bn_case(50, 2049, 1, 0.0f); /* wider than one pass: blocks of 64 channels */
    run_bn_case(1000, 40, 1, 100.0f); /* a mean 50x the spread: the sums must not lose the variance */
    float buf[4] = {0};
    assert_int_equal(g_be->batchnorm_forward_train(g_be, buf, buf, 0, 2, NULL, NULL, NULL, NULL, 0.9f, 1e-3f, buf, buf),
                     KC_STATUS_INVALID_ARGUMENT);
}

/* ================================================================ activations */

static double ref_act(kc_act_params a, double x) {
    switch (a.kind) {
    case KC_ACT_LINEAR: return x;
    case KC_ACT_RELU: return x > 0 ? x : 0;
    case KC_ACT_SIGMOID: return 1 / (1 + exp(-x));
    case KC_ACT_TANH: return tanh(x);
    case KC_ACT_ELU: return x > 0 ? x : a.alpha * (exp(x) - 1);
    case KC_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case KC_ACT_LEAKY_RELU: return x > 0 ? x : a.alpha * x;
    case KC_ACT_SILU: return x / (1 + exp(-x));
    case KC_ACT_RELU_GENERAL:
        if (a.beta > 0 && x >= a.beta) return a.beta;
        if (x >= a.gamma) return x;
        return a.alpha * (x - a.gamma);
    default: return NAN;
    }
}
static double ref_dact(kc_act_params a, double x) {
    switch (a.kind) {
    case KC_ACT_LINEAR: return 1;
    case KC_ACT_RELU: return x > 0;
    case KC_ACT_SIGMOID: {
        double s = 1 / (1 + exp(-x));
        return s * (1 - s);
    }
    case KC_ACT_TANH: return 1 - tanh(x) * tanh(x);
    case KC_ACT_ELU: return x > 0 ? 1 : a.alpha * exp(x);
    case KC_ACT_GELU: return 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
    case KC_ACT_LEAKY_RELU: return x > 0 ? 1 : a.alpha;
    case KC_ACT_SILU: {
        double s = 1 / (1 + exp(-x));
        return s * (1 + x * (1 - s));
    }
    case KC_ACT_RELU_GENERAL:
        if (a.beta > 0 && x >= a.beta) return 0;
        if (x >= a.gamma) return 1;
        return a.alpha;
    default: return NAN;
    }
}

static void run_act_case(kc_act_params a, int64_t n, int cols, int x_needed) {
    float *x = falloc(n), *y = falloc(n), *dy = falloc(n), *dx = falloc(n);
    double *ry = dalloc(n), *rdx = dalloc(n);
    fill(x, n, -4, 4), fill(dy, n, -1, 1);
    for (int64_t i = 0; i < n; i++) /* keep clear of the kinks (0, threshold, max_value) */
        if (fabs(x[i]) < 1e-3 || fabs(x[i] - a.gamma) < 1e-3 || fabs(x[i] - a.beta) < 1e-3) x[i] += 0.01f;
    if (a.kind == KC_ACT_SOFTMAX) {
        for (int64_t r = 0; r < n / cols; r++) {
            double m = -INFINITY, s = 0, sdy = 0;
            for (int j = 0; j < cols; j++) m = fmax(m, x[r * cols + j]);
            for (int j = 0; j < cols; j++) s += exp(x[r * cols + j] - m);
            for (int j = 0; j < cols; j++) ry[r * cols + j] = exp(x[r * cols + j] - m) / s;
            for (int j = 0; j < cols; j++) sdy += dy[r * cols + j] * ry[r * cols + j];
            for (int j = 0; j < cols; j++) rdx[r * cols + j] = ry[r * cols + j] * (dy[r * cols + j] - sdy);
        }
    } else {
        for (int64_t i = 0; i < n; i++) ry[i] = ref_act(a, x[i]), rdx[i] = dy[i] * ref_dact(a, x[i]);
    }
    char what[64];
    snprintf(what, sizeof what, "activation %d (%g, %g, %g) n %lld", (int)a.kind, (double)a.alpha, (double)a.beta,
             (double)a.gamma, (long long)n);
    assert_int_equal(g_be->act_forward(g_be, a, x, y, n, cols), KC_STATUS_OK);
    expect_close(what, y, ry, n, 2e-5, 1e-6);
    /* with x */
    assert_int_equal(g_be->act_backward(g_be, a, x, y, dy, dx, n, cols), KC_STATUS_OK);
    expect_close(what, dx, rdx, n, 1e-4, 1e-6);
    /* without x: works from y, or fails cleanly when the kind needs x */
    kc_status s = g_be->act_backward(g_be, a, NULL, y, dy, dx, n, cols);
    if (x_needed) {
        assert_int_equal(s, KC_STATUS_INVALID_ARGUMENT);
    } else {
        assert_int_equal(s, KC_STATUS_OK);
        expect_close(what, dx, rdx, n, 1e-4, 1e-6);
    }
    /* dx aliasing dy, and y aliasing x */
    memcpy(dx, dy, n * sizeof(float));
    assert_int_equal(g_be->act_backward(g_be, a, x, y, dx, dx, n, cols), KC_STATUS_OK);
    expect_close(what, dx, rdx, n, 1e-4, 1e-6);
    assert_int_equal(g_be->act_forward(g_be, a, x, x, n, cols), KC_STATUS_OK);
    expect_close(what, x, ry, n, 2e-5, 1e-6);
    free(x), free(y), free(dy), free(dx), free(ry), free(rdx);
}

static void test_activations(void **state) {
    (void)state;
    rseed(7);
    const struct {
        kc_act_params a;
        int x_needed;
    } cases[] = {
        {{KC_ACT_LINEAR, 0, 0, 0}, 0},
        {{KC_ACT_RELU, 0, 0, 0}, 0},
        {{KC_ACT_SIGMOID, 0, 0, 0}, 0},
        {{KC_ACT_TANH, 0, 0, 0}, 0},
        {{KC_ACT_SOFTMAX, 0, 0, 0}, 0},
        {{KC_ACT_ELU, 1.0f, 0, 0}, 0},
        {{KC_ACT_ELU, 0.5f, 0, 0}, 0},
        {{KC_ACT_GELU, 0, 0, 0}, 1},
        {{KC_ACT_LEAKY_RELU, 0.2f, 0, 0}, 0},
        {{KC_ACT_SILU, 0, 0, 0}, 1},
        {{KC_ACT_RELU_GENERAL, 0, 0, 0}, 0},          /* plain relu */
        {{KC_ACT_RELU_GENERAL, 0.1f, 6.0f, 0.5f}, 0}, /* slope, max_value, threshold */
        {{KC_ACT_RELU_GENERAL, 0, 2.0f, 0}, 0},       /* relu capped at 2 */
        {{KC_ACT_RELU_GENERAL, 0.3f, 0, -0.5f}, 1},   /* negative threshold: needs x */
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(cases); i++) {
        run_act_case(cases[i].a, 7 * 13, 7, cases[i].x_needed);
        run_act_case(cases[i].a, 10 * 4001, 10, cases[i].x_needed); /* parallel path */
    }
    /* softmax rows must divide n */
    float buf[10];
    assert_int_equal(g_be->act_forward(g_be, (kc_act_params){KC_ACT_SOFTMAX}, buf, buf, 10, 3),
                     KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(g_be->act_forward(g_be, (kc_act_params){KC_ACT_COUNT}, buf, buf, 10, 1),
                     KC_STATUS_INVALID_ARGUMENT);
    /* softmax is stable for large logits */
    float big[3] = {1000.0f, 1001.0f, 999.0f}, out[3];
    assert_int_equal(g_be->act_forward(g_be, (kc_act_params){KC_ACT_SOFTMAX}, big, out, 3, 3), KC_STATUS_OK);
    assert_true(isfinite(out[0]) && fabsf(out[0] + out[1] + out[2] - 1.0f) < 1e-6f && out[1] > out[0]);
}

/* ================================================================ dropout */

static void test_dropout(void **state) {
    (void)state;
    rseed(8);
    const int64_t n = 100003;
    float *x = falloc(n), *y = falloc(n), *y2 = falloc(n), *dx = falloc(n);
    uint8_t *mask = malloc(n), *mask2 = malloc(n);
    fill(x, n, -1, 1);
    const float rate = 0.3f;
    assert_int_equal(g_be->dropout_forward(g_be, x, y, mask, n, rate, 42), KC_STATUS_OK);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
        int keep = kc__hash_uniform(42, (uint64_t)i) >= rate; /* the shared, backend-independent mask */
        assert_int_equal(mask[i], keep);
        kept += keep;
        double ref = keep ? x[i] / (1.0 - rate) : 0.0;
        if (fabs(y[i] - ref) > 1e-6 * (fabs(ref) + 1e-6)) {
            print_error("dropout y[%lld] = %g, expected %g\n", (long long)i, (double)y[i], ref);
            fail();
        }
    }
    double frac = (double)(n - kept) / (double)n;
    assert_true(fabs(frac - rate) < 0.01); /* ~0.0015 standard deviation */
    /* same seed: same mask; another seed: another mask */
    assert_int_equal(g_be->dropout_forward(g_be, x, y2, mask2, n, rate, 42), KC_STATUS_OK);
    assert_memory_equal(mask, mask2, n);
    assert_memory_equal(y, y2, n * sizeof(float));
    assert_int_equal(g_be->dropout_forward(g_be, x, y2, mask2, n, rate, 43), KC_STATUS_OK);
    assert_true(memcmp(mask, mask2, n) != 0);
    /* backward: dy scaled where kept */
    assert_int_equal(g_be->dropout_backward(g_be, x, mask, dx, n, rate), KC_STATUS_OK);
    assert_memory_equal(dx, y, n * sizeof(float));
    /* rate 0 keeps everything; rate 1 is an error */
    assert_int_equal(g_be->dropout_forward(g_be, x, y2, mask2, n, 0.0f, 7), KC_STATUS_OK);
    assert_memory_equal(x, y2, n * sizeof(float));
    assert_int_equal(g_be->dropout_forward(g_be, x, y2, mask2, n, 1.0f, 7), KC_STATUS_INVALID_ARGUMENT);
    free(x), free(y), free(y2), free(dx), free(mask), free(mask2);
}

/* ================================================================ elementwise and layout */

static void test_elementwise(void **state) {
    (void)state;
    rseed(9);
    const int64_t sizes[] = {1, 1001, 70001};
    for (size_t s = 0; s < KC_ARRAY_LEN(sizes); s++) {
        int64_t n = sizes[s];
        float *a = falloc(n), *b = falloc(n), *y = falloc(n);
        double *ref = dalloc(n);
        fill(a, n, -2, 2), fill(b, n, -2, 2);
        for (int64_t i = 0; i < n; i++) ref[i] = (double)a[i] + b[i];
        assert_int_equal(g_be->add(g_be, y, a, b, n), KC_STATUS_OK);
        expect_close("add", y, ref, n, 1e-6, 1e-7);
        memcpy(y, b, n * sizeof(float));
        for (int64_t i = 0; i < n; i++) ref[i] = b[i] + 0.25 * a[i];
        assert_int_equal(g_be->axpy(g_be, y, a, 0.25f, n), KC_STATUS_OK);
        expect_close("axpy", y, ref, n, 1e-5, 1e-6);
        for (int64_t i = 0; i < n; i++) ref[i] = -3.0 * y[i];
        assert_int_equal(g_be->scale(g_be, y, -3.0f, n), KC_STATUS_OK);
        expect_close("scale", y, ref, n, 1e-6, 1e-7);
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)a[i] * a[i];
        float out = -1;
        assert_int_equal(g_be->sum_squares(g_be, a, n, &out), KC_STATUS_OK);
        assert_true(fabs(out - ss) <= 1e-6 * ss);
        free(a), free(b), free(y), free(ref);
    }
    float out = -1;
    assert_int_equal(g_be->sum_squares(g_be, NULL, 0, &out), KC_STATUS_OK);
    assert_true(out == 0.0f);
    assert_int_equal(g_be->add(g_be, NULL, NULL, NULL, -1), KC_STATUS_INVALID_ARGUMENT);
}

static void test_bias(void **state) {
    (void)state;
    rseed(10);
    const int shapes[][2] = {{5, 3}, {33, 70}, {4000, 24}, {700, 130}};
    for (size_t s = 0; s < KC_ARRAY_LEN(shapes); s++) {
        int64_t rows = shapes[s][0];
        int cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *y = falloc(n), *bias = falloc(cols), *db = falloc(cols);
        double *ref = dalloc(n), *rdb = dalloc(cols);
        fill(y, n, -1, 1), fill(bias, cols, -1, 1);
        for (size_t i = 0; i < n; i++) ref[i] = (double)y[i] + bias[i % cols], rdb[i % cols] += y[i];
        assert_int_equal(g_be->bias_grad(g_be, y, db, rows, cols), KC_STATUS_OK);
        expect_close_scaled("bias_grad", db, rdb, cols, 1e-5);
        assert_int_equal(g_be->bias_add(g_be, y, bias, rows, cols), KC_STATUS_OK);
        expect_close("bias_add", y, ref, n, 1e-6, 1e-7);
        free(y), free(bias), free(db), free(ref), free(rdb);
    }
}

static void test_copy_strided_and_pad(void **state) {
    (void)state;
    rseed(11);
    /* copy a (5, 3) block from columns 2.. of a (5, 7) matrix into columns 4.. of a (5, 9) one */
    float src[35], dst[45];
    fill(src, 35, -1, 1);
    for (int i = 0; i < 45; i++) dst[i] = -7.0f;
    assert_int_equal(g_be->copy_strided(g_be, dst, 9, 4, src, 7, 2, 5, 3), KC_STATUS_OK);
    for (int r = 0; r < 5; r++)
        for (int j = 0; j < 9; j++) {
            float want = (j >= 4 && j < 7) ? src[r * 7 + 2 + (j - 4)] : -7.0f;
            assert_true(dst[r * 9 + j] == want);
        }
    assert_int_equal(g_be->copy_strided(g_be, dst, 9, 8, src, 7, 2, 5, 3), KC_STATUS_INVALID_ARGUMENT);

    /* pad (2, 5, 4, 3) by top 1, bottom 2, left 3, right 0, and crop back */
    const int n = 2, h = 5, w = 4, c = 3, t = 1, bo = 2, l = 3, ri = 0;
    const int ph = h + t + bo, pw = w + l + ri;
    float x[2 * 5 * 4 * 3], y[2 * 8 * 7 * 3], back[2 * 5 * 4 * 3];
    fill(x, KC_ARRAY_LEN(x), -1, 1);
    for (size_t i = 0; i < KC_ARRAY_LEN(y); i++) y[i] = 5.0f; /* border must be zeroed */
    assert_int_equal(g_be->pad2d_forward(g_be, x, y, n, h, w, c, t, bo, l, ri), KC_STATUS_OK);
    for (int i = 0; i < n; i++)
        for (int py = 0; py < ph; py++)
            for (int px = 0; px < pw; px++)
                for (int ch = 0; ch < c; ch++) {
                    int iy = py - t, ix = px - l;
                    float want = (iy >= 0 && iy < h && ix >= 0 && ix < w) ? x[((i * h + iy) * w + ix) * c + ch] : 0;
                    assert_true(y[((i * ph + py) * pw + px) * c + ch] == want);
                }
    assert_int_equal(g_be->pad2d_backward(g_be, y, back, n, h, w, c, t, bo, l, ri), KC_STATUS_OK);
    assert_memory_equal(back, x, sizeof x);
    assert_int_equal(g_be->pad2d_forward(g_be, x, y, n, h, w, c, -1, 0, 0, 0), KC_STATUS_INVALID_ARGUMENT);
}

/* ================================================================ losses */

static double clipd(double v) {
    const double lo = (double)1e-7f, hi = (double)(1.0f - 1e-7f);
    return v < lo ? lo : (v > hi ? hi : v);
}

static void test_loss_values(void **state) {
    (void)state;
    kc_loss_desc d;
    float loss = -1;
    /* sparse CCE, logits: logsumexp - x[t] */
    float lg[6] = {1, 2, 3, 0.5f, -1, 2}, lab[2] = {2, 0};
    double want = (log(exp(1) + exp(2) + exp(3)) - 3) + (log(exp(0.5) + exp(-1) + exp(2)) - 0.5);
    d = (kc_loss_desc){KC_LOSS_SPARSE_CCE, 2, 3, 1};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, lab, &loss, NULL, 0), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-5 * want);
    assert_true(fabs(loss - (0.40760596444438013 + 1.7413112966571571)) < 1e-5); /* by hand */
    /* sparse CCE, probabilities: normalised by the row sum, then clipped */
    float pr[9] = {0.2f, 0.3f, 0.5f, 0.4f, 0.6f, 1.0f, 1.0f, 0.0f, 0.0f}, lab3[3] = {1, 1, 1};
    want = -log(0.3) - log(0.3) - log(clipd(0.0));
    d = (kc_loss_desc){KC_LOSS_SPARSE_CCE, 3, 3, 0};
    float g[9];
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, pr, lab3, &loss, g, 3), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-5 * want);
    for (int j = 0; j < 3; j++) assert_true(g[6 + j] == 0.0f); /* clipped row: zero gradient */
    /* row 0: d/dp_j = (1/S - [j==t]/p_t) / grad_n, S = 1 */
    assert_true(fabsf(g[0] - (float)(1.0 / 3)) < 1e-6f && fabsf(g[1] - (float)((1.0 - 1 / 0.3) / 3)) < 1e-6f);
    /* CCE probabilities */
    float t3[3] = {0, 0.25f, 0.75f};
    d = (kc_loss_desc){KC_LOSS_CCE, 1, 3, 0};
    want = -(0.25 * log(0.3) + 0.75 * log(0.5));
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, pr, t3, &loss, NULL, 0), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-5 * want);
    /* CCE logits with a one-hot target equals sparse CCE */
    float oh[3] = {0, 0, 1};
    d = (kc_loss_desc){KC_LOSS_CCE, 1, 3, 1};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, oh, &loss, g, 1), KC_STATUS_OK);
    assert_true(fabs(loss - 0.40760596444438013) < 1e-5);
    double e1 = exp(1), e2 = exp(2), e3 = exp(3), se = e1 + e2 + e3;
    assert_true(fabs(g[0] - e1 / se) < 1e-6 && fabs(g[2] - (e3 / se - 1)) < 1e-6); /* softmax - onehot */
    /* BCE probabilities and logits: mean over the last axis */
    float bp[2] = {0.9f, 0.2f}, bt[2] = {1, 0}, bx[2] = {2, -1};
    d = (kc_loss_desc){KC_LOSS_BCE, 1, 2, 0};
    want = (-log(0.9) - log(0.8)) / 2;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, bp, bt, &loss, NULL, 0), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-5 * want);
    d.from_logits = 1;
    want = (log1p(exp(-2.0)) + log1p(exp(-1.0))) / 2;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, bx, bt, &loss, g, 1), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-5 * want);
    assert_true(fabs(g[0] - (1 / (1 + exp(-2.0)) - 1) / 2) < 1e-6);
    /* BCE stable for large logits */
    float bigx[2] = {100.0f, -100.0f};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, bigx, bt, &loss, g, 1), KC_STATUS_OK);
    assert_true(isfinite(loss) && loss < 1e-6f);
    /* BCE clipped probability: loss -log(eps) and zero gradient */
    float bz[2] = {0.0f, 0.2f};
    d.from_logits = 0;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, bz, bt, &loss, g, 1), KC_STATUS_OK);
    want = (-log(clipd(0)) - log(0.8)) / 2;
    assert_true(fabs(loss - want) < 1e-5 * want && g[0] == 0.0f);
    /* MSE / MAE, gradient of the mean over grad_n */
    float mp[3] = {1, 2, 3}, mt[3] = {1.5f, 2, 1};
    d = (kc_loss_desc){KC_LOSS_MSE, 1, 3, 0};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, mp, mt, &loss, g, 4), KC_STATUS_OK);
    assert_true(fabs(loss - 4.25 / 3) < 1e-6);
    assert_true(fabs(g[0] - 2 * (-0.5) / 3 / 4) < 1e-7 && fabs(g[2] - 2 * 2.0 / 3 / 4) < 1e-7);
    d.kind = KC_LOSS_MAE;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, mp, mt, &loss, g, 4), KC_STATUS_OK);
    assert_true(fabs(loss - 2.5 / 3) < 1e-6);
    assert_true(fabs(g[0] + 1.0 / 12) < 1e-7 && g[1] == 0.0f && fabs(g[2] - 1.0 / 12) < 1e-7);
    /* a label out of range is a clear error */
    float badlab[2] = {2, 3};
    d = (kc_loss_desc){KC_LOSS_SPARSE_CCE, 2, 3, 1};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, badlab, &loss, g, 2), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "label 3"));
    float half[2] = {0.5f, 1};
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, half, &loss, g, 2), KC_STATUS_INVALID_ARGUMENT);
    d.kind = KC_LOSS_COUNT;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, lab, &loss, g, 2), KC_STATUS_INVALID_ARGUMENT);
    d.kind = KC_LOSS_MSE;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, lg, lg, &loss, g, 0), KC_STATUS_INVALID_ARGUMENT);
}

/* A large batch takes the parallel path: the sum still matches a serial reference. */
static void test_loss_large(void **state) {
    (void)state;
    rseed(12);
    const int n = 5000, c = 10;
    float *x = falloc((size_t)n * c), *t = falloc(n), *g = falloc((size_t)n * c);
    fill(x, (size_t)n * c, -3, 3);
    for (int i = 0; i < n; i++) t[i] = (float)(int)(urand() * c);
    double want = 0;
    for (int i = 0; i < n; i++) {
        double m = -INFINITY, s = 0;
        for (int j = 0; j < c; j++) m = fmax(m, x[i * c + j]);
        for (int j = 0; j < c; j++) s += exp(x[i * c + j] - m);
        want += m + log(s) - x[i * c + (int)t[i]];
    }
    kc_loss_desc d = {KC_LOSS_SPARSE_CCE, n, c, 1};
    float loss = 0;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, x, t, &loss, g, n), KC_STATUS_OK);
    assert_true(fabs(loss - want) < 1e-6 * want);
    /* each gradient row sums to zero (softmax - onehot) */
    for (int i = 0; i < n; i += 97) {
        double s = 0;
        for (int j = 0; j < c; j++) s += g[i * c + j];
        assert_true(fabs(s) < 1e-9);
    }
    free(x), free(t), free(g);
}

static void test_count_correct(void **state) {
    (void)state;
    float pred[12] = {0.1f, 0.7f, 0.2f, /* argmax 1 */
                      0.5f, 0.5f, 0.0f, /* tie between 0 and 1 */
                      0.3f, 0.3f, 0.4f, /* argmax 2; 0 and 1 tie for second */
                      0.6f, 0.1f, 0.3f};
    float lab[4] = {1, 1, 0, 2};
    float correct = 1.0f; /* added to */
    assert_int_equal(g_be->count_correct(g_be, pred, lab, 4, 3, 1, 1, 0, &correct), KC_STATUS_OK);
    /* row 0 right; row 1: argmax takes the first max (0), so wrong; row 2 wrong; row 3 wrong */
    assert_true(correct == 2.0f);
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, pred, lab, 4, 3, 1, 2, 0, &correct), KC_STATUS_OK);
    /* top 2: row 0 in; row 1 in (tie); row 2: label 0 ties at the boundary -> in; row 3: 0.3 is second -> in */
    assert_true(correct == 4.0f);
    float lab_b[4] = {2, 2, 1, 1};
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, pred, lab_b, 4, 3, 1, 2, 0, &correct), KC_STATUS_OK);
    /* row 0: 0.2 second -> in; row 1: 0.0 third -> out; row 2: 0.3 tie -> in; row 3: 0.1 third -> out */
    assert_true(correct == 2.0f);
    /* non-sparse: argmax of the target row */
    float onehot[12] = {0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0.2f, 0.8f};
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, pred, onehot, 4, 3, 0, 1, 0, &correct), KC_STATUS_OK);
    assert_true(correct == 3.0f); /* rows 0, 1 (first max 0 == label 0), 2 */
    /* binary accuracy, c == 1 */
    float bp[5] = {0.2f, 0.6f, 0.5f, 0.9f, -0.1f}, bt[5] = {0, 1, 1, 0, 0};
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, bp, bt, 5, 1, 0, 1, 0, &correct), KC_STATUS_OK);
    assert_true(correct == 3.0f); /* 0.5 is not > 0.5 */
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, bp, bt, 5, 1, 0, 1, 1, &correct), KC_STATUS_OK);
    assert_true(correct == 3.0f); /* logits: > 0; rows 1, 2, 4 right */
    float bad[4] = {1, 1, 3, 0};
    correct = 0;
    assert_int_equal(g_be->count_correct(g_be, pred, bad, 4, 3, 1, 1, 0, &correct), KC_STATUS_INVALID_ARGUMENT);
    assert_true(correct == 0.0f);
}

/* ================================================================ optimizers */

typedef struct opt_ref {
    double w[5], s0[5], s1[5];
} opt_ref;

static void ref_opt_step(const kc_opt_step *s, opt_ref *r, const float *grad, int n) {
    for (int i = 0; i < n; i++) {
        double g = (double)grad[i] * s->grad_scale, lr = s->lr;
        switch (s->kind) {
        case KC_OPT_SGD:
            if (s->momentum == 0) {
                r->w[i] -= lr * g;
            } else {
                r->s0[i] = s->momentum * r->s0[i] - lr * g;
                r->w[i] += s->nesterov ? s->momentum * r->s0[i] - lr * g : r->s0[i];
            }
            break;
        case KC_OPT_ADAMW: r->w[i] -= lr * s->weight_decay * r->w[i]; /* fall through */
        case KC_OPT_ADAM: {
            double b1 = s->beta_1, b2 = s->beta_2, t = (double)s->t;
            r->s0[i] += (g - r->s0[i]) * (1 - b1);
            r->s1[i] += (g * g - r->s1[i]) * (1 - b2);
            double a = lr * sqrt(1 - pow(b2, t)) / (1 - pow(b1, t));
            r->w[i] -= a * r->s0[i] / (sqrt(r->s1[i]) + s->epsilon);
            break;
        }
        case KC_OPT_RMSPROP: {
            r->s0[i] = s->rho * r->s0[i] + (1 - s->rho) * g * g;
            double inc = lr * g / sqrt(r->s0[i] + s->epsilon);
            if (s->momentum > 0) {
                r->s1[i] = s->momentum * r->s1[i] + inc;
                r->w[i] -= r->s1[i];
            } else {
                r->w[i] -= inc;
            }
            break;
        }
        }
    }
}

static void test_optimizers(void **state) {
    (void)state;
    const kc_opt_step cases[] = {
        {.kind = KC_OPT_SGD, .lr = 0.1f, .grad_scale = 1},
        {.kind = KC_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .grad_scale = 1},
        {.kind = KC_OPT_SGD, .lr = 0.05f, .momentum = 0.9f, .nesterov = 1, .grad_scale = 0.5f},
        {.kind = KC_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-7f, .grad_scale = 1},
        {.kind = KC_OPT_ADAMW, .lr = 1e-2f, .beta_1 = 0.8f, .beta_2 = 0.99f, .epsilon = 1e-7f, .weight_decay = 0.004f,
         .grad_scale = 2},
        {.kind = KC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .epsilon = 1e-7f, .grad_scale = 1},
        {.kind = KC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .momentum = 0.5f, .epsilon = 1e-7f, .grad_scale = 1},
    };
    const float w0[5] = {0.5f, -1.0f, 2.0f, 0.0f, -0.25f};
    const float grads[3][5] = {{0.1f, -0.2f, 0.3f, 1.5f, -0.05f},
                               {-0.4f, 0.25f, 0.1f, 1.0f, 0.0f},
                               {0.2f, -0.1f, -0.3f, 0.5f, 0.8f}};
    for (size_t k = 0; k < KC_ARRAY_LEN(cases); k++) {
        kc_opt_step s = cases[k];
        float w[5], s0[5] = {0}, s1[5] = {0};
        opt_ref r = {{0}};
        memcpy(w, w0, sizeof w);
        for (int i = 0; i < 5; i++) r.w[i] = w0[i];
        for (int step = 1; step <= 3; step++) {
            s.t = step;
            ref_opt_step(&s, &r, grads[step - 1], 5);
            assert_int_equal(g_be->optimizer_step(g_be, &s, w, grads[step - 1], s0, s1, 5), KC_STATUS_OK);
            char what[64];
            snprintf(what, sizeof what, "optimizer %d case %zu step %d", (int)s.kind, k, step);
            expect_close(what, w, r.w, 5, 2e-6, 1e-7);
            expect_close(what, s0, r.s0, 5, 2e-5, 1e-8);
            expect_close(what, s1, r.s1, 5, 2e-5, 1e-8);
        }
    }
    /* hand-computed: Adam's first step moves each weight by about lr * sign(g) */
    {
        kc_opt_step s = {.kind = KC_OPT_ADAM, .lr = 0.01f, .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-7f,
                         .grad_scale = 1, .t = 1};
        float w[2] = {1.0f, 1.0f}, g[2] = {0.5f, -3.0f}, m[2] = {0}, v[2] = {0};
        assert_int_equal(g_be->optimizer_step(g_be, &s, w, g, m, v, 2), KC_STATUS_OK);
        assert_true(fabsf(w[0] - 0.99f) < 1e-6f && fabsf(w[1] - 1.01f) < 1e-6f);
        /* (1 - beta_2 is 0.00099999 in float) */
        assert_true(fabsf(m[0] - 0.05f) < 1e-7f && fabsf(v[1] - 0.009f) < 2e-7f);
        /* SGD with momentum, two steps by hand: v1 = -0.1*1 = -0.1, w = 0.9; v2 = 0.9*-0.1 - 0.1*1 = -0.19 */
        kc_opt_step sg = {.kind = KC_OPT_SGD, .lr = 0.1f, .momentum = 0.9f, .grad_scale = 1};
        float w1 = 1.0f, g1 = 1.0f, v1 = 0.0f;
        assert_int_equal(g_be->optimizer_step(g_be, &sg, &w1, &g1, &v1, NULL, 1), KC_STATUS_OK);
        assert_int_equal(g_be->optimizer_step(g_be, &sg, &w1, &g1, &v1, NULL, 1), KC_STATUS_OK);
        assert_true(fabsf(v1 + 0.19f) < 1e-6f && fabsf(w1 - 0.71f) < 1e-6f);
        /* missing slots are an error */
        assert_int_equal(g_be->optimizer_step(g_be, &s, w, g, NULL, NULL, 2), KC_STATUS_INVALID_ARGUMENT);
    }
    /* large n (parallel path) agrees with one-element (serial) calls */
    {
        const int64_t n = 100000;
        float *w = falloc(n), *g = falloc(n), *m = calloc(n, sizeof(float)), *v = calloc(n, sizeof(float));
        float wr[3], mr[3] = {0}, vr[3] = {0};
        rseed(13);
        fill(w, n, -1, 1), fill(g, n, -1, 1);
        int64_t idx[3] = {0, 50001, n - 1};
        for (int i = 0; i < 3; i++) wr[i] = w[idx[i]];
        kc_opt_step s = {.kind = KC_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-7f,
                         .grad_scale = 1, .t = 1};
        assert_int_equal(g_be->optimizer_step(g_be, &s, w, g, m, v, n), KC_STATUS_OK);
        for (int i = 0; i < 3; i++) {
            float gi = g[idx[i]];
            assert_int_equal(g_be->optimizer_step(g_be, &s, &wr[i], &gi, &mr[i], &vr[i], 1), KC_STATUS_OK);
            assert_true(fabsf(wr[i] - w[idx[i]]) <= 1e-6f * fabsf(wr[i]) + 1e-9f);
            assert_true(fabsf(mr[i] - m[idx[i]]) <= 1e-6f * fabsf(mr[i]) + 1e-12f);
            assert_true(fabsf(vr[i] - v[idx[i]]) <= 1e-6f * fabsf(vr[i]) + 1e-12f);
        }
        free(w), free(g), free(m), free(v);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_and_memory),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_gemm_split),
        cmocka_unit_test(test_gemm_split_option), /* debt2 */
        cmocka_unit_test(test_conv2d),
        cmocka_unit_test(test_conv2d_chunked),
        cmocka_unit_test(test_conv2d_bad_desc),
        cmocka_unit_test(test_pool2d),
        cmocka_unit_test(test_global_avg_pool),
        cmocka_unit_test(test_batchnorm),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_dropout),
        cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_bias),
        cmocka_unit_test(test_copy_strided_and_pad),
        cmocka_unit_test(test_loss_values),
        cmocka_unit_test(test_loss_large),
        cmocka_unit_test(test_count_correct),
        cmocka_unit_test(test_optimizers),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
