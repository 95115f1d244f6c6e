/* test_cpu_isa.c — the CPU kernels' instruction sets, chosen at run time (cpu_isa.h):
 *   each_set_matches_baseline  every set this processor runs (forced with
 *                              kc_device_opts.cpu_isa, as KERAC_CPU_ISA does) gives the
 *                              baseline kernels' results, to float rounding, for the
 *                              convolutions (direct, im2col, 1x1, Winograd; all passes),
 *                              depthwise, pooling, batch norm, activations, the optimizer,
 *                              the loss, bias gradients, dropout and sums of squares; the
 *                              sets the processor lacks are reported as skipped
 *   refused_when_missing       a set beyond what the processor runs is KC_STATUS_UNSUPPORTED
 *                              with the reason (when this processor lacks one), an unknown
 *                              one KC_STATUS_INVALID_ARGUMENT
 *   environment                KERAC_CPU_ISA, KERAC_CPU_WINOGRAD and KERAC_CPU_WINOGRAD_TILE
 *                              reach kc_device_opts and kc_backend_cpu_create's backend
 *                              (read in one place); a bad value names the variable
 *   open_ex_picks_it           kc_backend_open_ex with cpu_isa runs that set
 *   blas_below                 OpenBLAS's core types map to their instruction sets; one below
 *                              kerac's set is reported with its cause (OPENBLAS_CORETYPE, or
 *                              an OpenBLAS that does not know the processor) and its fix, one
 *                              at or above it, or a name it does not know, is not; a baseline
 *                              backend is never below OpenBLAS; kc_backend_open_ex warns once
 *                              a process through the log (cpu_blas.c) */
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
#include "backend/cpu/cpu_blas.h"
#include "kerac.h"
#include "kerac_backend.h"

#define ISA_TOL 2e-5 /* relative to the largest magnitude: FMA contraction and other sums orders */

static unsigned g_seed = 11;

static float *rnd(size_t n) {
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(&g_seed) / (float)RAND_MAX * 2.0f - 1.0f;
    return p;
}

static void close_to(const char *what, const char *isa, const float *a, const float *b, size_t n) {
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - (double)b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    if (e / m > ISA_TOL) fail_msg("%s on %s: max difference %.3g of max %.3g against the baseline", what, isa, e, m);
}

/* one kernel call on both backends, on copies of the same outputs, then compared */
typedef struct pair {
    kc_backend *ref, *be;
    const char *isa;
} pair;

static kc_conv2d_desc conv(int n, int h, int w, int c, int f, int k, int stride, int pad) {
    int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
    return (kc_conv2d_desc){.n = n, .h = h, .w = w, .c = c, .f = f, .kh = k, .kw = k, .sh = stride, .sw = stride,
                            .dh = 1, .dw = 1, .pad_top = pad, .pad_left = pad, .oh = oh, .ow = ow};
}

static void convs(const pair *p) {
    const kc_conv2d_desc ds[] = {conv(3, 12, 12, 1, 32, 3, 1, 0), conv(2, 11, 11, 8, 12, 3, 1, 1),
                                 conv(2, 9, 9, 8, 20, 1, 1, 0), conv(2, 10, 10, 24, 32, 3, 1, 1),
                                 conv(2, 9, 9, 6, 10, 3, 2, 1)};
    for (size_t k = 0; k < sizeof ds / sizeof ds[0]; k++) {
        const kc_conv2d_desc *d = &ds[k];
        const size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->f;
        const size_t nw = (size_t)d->kh * d->kw * d->c * d->f;
        float *x = rnd(nx), *w = rnd(nw), *b = rnd((size_t)d->f), *dy = rnd(ny);
        float *out[2][4];
        for (int s = 0; s < 2; s++) {
            kc_backend *be = s ? p->be : p->ref;
            const size_t wsb = be->conv2d_workspace(be, d);
            void *ws = malloc(wsb ? wsb : 1);
            out[s][0] = malloc(ny * 4), out[s][1] = malloc(nx * 4), out[s][2] = malloc(nw * 4);
            out[s][3] = malloc((size_t)d->f * 4);
            assert_int_equal(be->conv2d_forward(be, d, x, w, b, out[s][0], ws, wsb), KC_STATUS_OK);
            assert_int_equal(be->conv2d_backward_data(be, d, dy, w, out[s][1], ws, wsb), KC_STATUS_OK);
            assert_int_equal(be->conv2d_backward_filter(be, d, x, dy, out[s][2], out[s][3], ws, wsb), KC_STATUS_OK);
            free(ws);
        }
        const size_t sizes[4] = {ny, nx, nw, (size_t)d->f};
        static const char *const names[4] = {"conv forward", "conv backward-data", "conv backward-filter", "conv bias"};
        for (int i = 0; i < 4; i++) close_to(names[i], p->isa, out[1][i], out[0][i], sizes[i]);
        for (int s = 0; s < 2; s++)
            for (int i = 0; i < 4; i++) free(out[s][i]);
        free(x), free(w), free(b), free(dy);
    }
}

static void depthwise_and_pool(const pair *p) {
    kc_conv2d_desc d = conv(2, 9, 9, 8, 16, 3, 1, 1); /* depth multiplier 2 */
    const size_t nx = (size_t)2 * 9 * 9 * 8, ny = (size_t)2 * 9 * 9 * 16, nw = (size_t)9 * 16;
    float *x = rnd(nx), *w = rnd(nw), *b = rnd(16), *dy = rnd(ny);
    float *y[2], *dx[2], *dw[2], *db[2];
    for (int s = 0; s < 2; s++) {
        kc_backend *be = s ? p->be : p->ref;
        y[s] = malloc(ny * 4), dx[s] = malloc(nx * 4), dw[s] = malloc(nw * 4), db[s] = malloc(16 * 4);
        assert_int_equal(be->depthwise_forward(be, &d, x, w, b, y[s], NULL, 0), KC_STATUS_OK);
        assert_int_equal(be->depthwise_backward_data(be, &d, dy, w, dx[s], NULL, 0), KC_STATUS_OK);
        assert_int_equal(be->depthwise_backward_filter(be, &d, x, dy, dw[s], db[s], NULL, 0), KC_STATUS_OK);
    }
    close_to("depthwise forward", p->isa, y[1], y[0], ny);
    close_to("depthwise backward-data", p->isa, dx[1], dx[0], nx);
    close_to("depthwise backward-filter", p->isa, dw[1], dw[0], nw);
    kc_pool2d_desc pd = {.kind = KC_POOL_MAX, .n = 2, .h = 9, .w = 9, .c = 8, .kh = 2, .kw = 2, .sh = 2, .sw = 2,
                         .oh = 4, .ow = 4};
    int32_t *mask[2];
    for (int s = 0; s < 2; s++) {
        kc_backend *be = s ? p->be : p->ref;
        mask[s] = malloc((size_t)2 * 4 * 4 * 8 * sizeof(int32_t));
        assert_int_equal(be->pool2d_forward(be, &pd, x, y[s], mask[s]), KC_STATUS_OK);
        assert_int_equal(be->pool2d_backward(be, &pd, dy, mask[s], dx[s]), KC_STATUS_OK);
    }
    close_to("max pool forward", p->isa, y[1], y[0], 2 * 4 * 4 * 8);
    close_to("max pool backward", p->isa, dx[1], dx[0], nx);
    for (int s = 0; s < 2; s++) free(y[s]), free(dx[s]), free(dw[s]), free(db[s]), free(mask[s]);
    free(x), free(w), free(b), free(dy);
}

static void norm_act_optim(const pair *p) {
    const int rows = 300, c = 24;
    const size_t n = (size_t)rows * c;
    float *x = rnd(n), *dy = rnd(n), *gamma = rnd(c), *beta = rnd(c);
    float *y[2], *dx[2], *st[2][6];
    for (int s = 0; s < 2; s++) {
        kc_backend *be = s ? p->be : p->ref;
        y[s] = malloc(n * 4), dx[s] = malloc(n * 4);
        for (int i = 0; i < 6; i++) st[s][i] = calloc((size_t)c, 4);
        assert_int_equal(be->batchnorm_forward_train(be, x, y[s], rows, c, gamma, beta, st[s][0], st[s][1], 0.9f,
                                                     1e-3f, st[s][2], st[s][3]),
                         KC_STATUS_OK);
        assert_int_equal(be->batchnorm_backward(be, x, dy, dx[s], rows, c, gamma, st[s][2], st[s][3], st[s][4],
                                                st[s][5]),
                         KC_STATUS_OK);
    }
    close_to("batch norm forward", p->isa, y[1], y[0], n);
    close_to("batch norm backward", p->isa, dx[1], dx[0], n);
    for (int i = 0; i < 6; i++) close_to("batch norm statistics", p->isa, st[1][i], st[0][i], (size_t)c);
    const kc_act kinds[] = {KC_ACT_RELU, KC_ACT_SIGMOID, KC_ACT_TANH, KC_ACT_SOFTMAX, KC_ACT_ELU, KC_ACT_GELU,
                            KC_ACT_SILU};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        kc_act_params a = {.kind = kinds[k], .alpha = 1.0f};
        for (int s = 0; s < 2; s++) {
            kc_backend *be = s ? p->be : p->ref;
            assert_int_equal(be->act_forward(be, a, x, y[s], (int64_t)n, c), KC_STATUS_OK);
            assert_int_equal(be->act_backward(be, a, x, y[s], dy, dx[s], (int64_t)n, c), KC_STATUS_OK);
        }
        close_to("activation forward", p->isa, y[1], y[0], n);
        close_to("activation backward", p->isa, dx[1], dx[0], n);
    }
    kc_opt_step step = {.kind = KC_OPT_ADAM, .lr = 1e-3f, .beta_1 = 0.9f, .beta_2 = 0.999f, .epsilon = 1e-7f,
                        .t = 3, .grad_scale = 1.0f};
    float sq[2];
    for (int s = 0; s < 2; s++) {
        kc_backend *be = s ? p->be : p->ref;
        memcpy(y[s], x, n * 4);
        memset(dx[s], 0, n * 4);
        float *v = calloc(n, 4);
        assert_int_equal(be->optimizer_step(be, &step, y[s], dy, dx[s], v, (int64_t)n), KC_STATUS_OK);
        free(v);
        assert_int_equal(be->bias_grad(be, dy, st[s][0], rows, c), KC_STATUS_OK);
        assert_int_equal(be->sum_squares(be, x, (int64_t)n, &sq[s]), KC_STATUS_OK);
    }
    close_to("adam step", p->isa, y[1], y[0], n);
    close_to("bias gradient", p->isa, st[1][0], st[0][0], (size_t)c);
    close_to("sum of squares", p->isa, &sq[1], &sq[0], 1);
    for (int s = 0; s < 2; s++) {
        free(y[s]), free(dx[s]);
        for (int i = 0; i < 6; i++) free(st[s][i]);
    }
    free(x), free(dy), free(gamma), free(beta);
}

static void loss_and_dropout(const pair *p) {
    const int n = 64, c = 10;
    float *pred = rnd((size_t)n * c), *target = calloc((size_t)n, 4), loss[2], *dp[2];
    for (int i = 0; i < n; i++) target[i] = (float)(i % c);
    kc_loss_desc ld = {.kind = KC_LOSS_SPARSE_CCE, .n = n, .c = c, .from_logits = 1};
    uint8_t *mask[2];
    float *y[2];
    for (int s = 0; s < 2; s++) {
        kc_backend *be = s ? p->be : p->ref;
        dp[s] = malloc((size_t)n * c * 4);
        assert_int_equal(be->loss_forward_backward(be, &ld, pred, target, &loss[s], dp[s], n), KC_STATUS_OK);
        mask[s] = malloc((size_t)n * c), y[s] = malloc((size_t)n * c * 4);
        assert_int_equal(be->dropout_forward(be, pred, y[s], mask[s], (int64_t)n * c, 0.3f, 99), KC_STATUS_OK);
    }
    close_to("loss", p->isa, &loss[1], &loss[0], 1);
    close_to("loss gradient", p->isa, dp[1], dp[0], (size_t)n * c);
    assert_memory_equal(mask[1], mask[0], (size_t)n * c);
    close_to("dropout", p->isa, y[1], y[0], (size_t)n * c);
    for (int s = 0; s < 2; s++) free(dp[s]), free(mask[s]), free(y[s]);
    free(pred), free(target);
}

static void test_each_set_matches_baseline(void **state) {
    (void)state;
    kc_backend *ref = NULL;
    kc_device_opts base = {.cpu_isa = KC_CPU_ISA_BASELINE};
    assert_int_equal(kc_backend_cpu_create_ex(&base, &ref), KC_STATUS_OK);
    assert_string_equal(kc_backend_cpu_isa(ref), "baseline");
    const int best = kc__cpu_isa_best();
    for (int isa = KC_CPU_ISA_BASELINE; isa <= KC_CPU_ISA_AVX512; isa++) {
        if (isa > best) {
            print_message("    %s: skipped, this processor lacks it (its kernels compile and link)\n",
                          kc__cpu_isa_label(isa));
            continue;
        }
        kc_device_opts o = {.cpu_isa = isa};
        pair p = {.ref = ref, .isa = kc__cpu_isa_label(isa)};
        assert_int_equal(kc_backend_cpu_create_ex(&o, &p.be), KC_STATUS_OK);
        assert_string_equal(kc_backend_cpu_isa(p.be), p.isa);
        kc_conv2d_desc d = conv(2, 10, 10, 8, 12, 3, 1, 1);
        char label[256]; /* the table's own copy describes the convolution: its set in the label */
        assert_int_equal(p.be->describe(p.be, KC_OP_CONV2D, &d, p.be->conv2d_workspace(p.be, &d), label, sizeof label),
                         KC_STATUS_OK);
        assert_non_null(strstr(label, p.isa));
        convs(&p);
        depthwise_and_pool(&p);
        norm_act_optim(&p);
        loss_and_dropout(&p);
        print_message("    %s: every kernel matches the baseline\n", p.isa);
        kc_backend_destroy(p.be);
    }
    kc_backend *autob = NULL;
    assert_int_equal(kc_backend_cpu_create(&autob), KC_STATUS_OK);
    assert_string_equal(kc_backend_cpu_isa(autob), kc__cpu_isa_label(best));
    kc_backend_destroy(autob);
    kc_backend_destroy(ref);
}

static void test_refused_when_missing(void **state) {
    (void)state;
    kc_backend *be = NULL;
    kc_device_opts bad = {.cpu_isa = 9};
    assert_int_equal(kc_backend_cpu_create_ex(&bad, &be), KC_STATUS_INVALID_ARGUMENT);
    assert_null(be);
    if (kc__cpu_isa_best() < KC_CPU_ISA_AVX512) {
        kc_device_opts o = {.cpu_isa = KC_CPU_ISA_AVX512};
        assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_UNSUPPORTED);
        assert_non_null(strstr(kc_last_error(), "avx512 kernels were asked for"));
    } else {
        print_message("    this processor runs every set: nothing to refuse\n");
    }
    assert_null(kc_backend_cpu_isa(NULL));
}

static void test_environment(void **state) {
    (void)state;
    kc_device_opts o;
    setenv("KERAC_CPU_ISA", "AVX2", 1);
    setenv("KERAC_CPU_WINOGRAD", "0", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_int_equal(o.cpu_isa, KC_CPU_ISA_AVX2);
    assert_int_equal(o.cpu_winograd, KC_FALSE);
    setenv("KERAC_CPU_WINOGRAD_TILE", "4", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_int_equal(o.cpu_winograd_tile, 4);
    setenv("KERAC_CPU_WINOGRAD_TILE", "6", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KERAC_CPU_WINOGRAD_TILE"));
    assert_int_equal(o.cpu_isa, KC_CPU_ISA_AVX2); /* the other fields are still read */
    unsetenv("KERAC_CPU_WINOGRAD_TILE");
    setenv("KERAC_CPU_ISA", "sse9", 1);
    setenv("KERAC_TF32", "1", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KERAC_CPU_ISA"));
    assert_int_equal(o.tf32, KC_TRUE); /* the other fields are still read */
    /* kc_backend_cpu_create (no options) takes the environment's (tests/isa_run.c relies on it) */
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KERAC_CPU_ISA"));
    setenv("KERAC_CPU_ISA", "baseline", 1);
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    assert_string_equal(kc_backend_cpu_isa(be), "baseline");
    kc_backend_destroy(be);
    unsetenv("KERAC_CPU_ISA");
    unsetenv("KERAC_CPU_WINOGRAD");
    unsetenv("KERAC_TF32");
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_int_equal(o.cpu_isa, KC_CPU_ISA_AUTO);
    assert_int_equal(o.cpu_winograd, KC_DEFAULT);
}

static void test_open_ex_picks_it(void **state) {
    (void)state;
    kc_device_opts o = {.device = "cpu", .cpu_isa = KC_CPU_ISA_BASELINE};
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_open_ex(&o, &be), KC_STATUS_OK);
    assert_string_equal(kc_backend_cpu_isa(be), "baseline");
    kc_backend_destroy(be);
}

static int g_warnings;
static char g_warning[2048];
static void count_warnings(kc_log_level level, const char *line, void *user) {
    (void)user;
    if (level != KC_LOG_WARNING || !strstr(line, "OpenBLAS")) return;
    g_warnings++;
    snprintf(g_warning, sizeof g_warning, "%s", line);
}

static void test_blas_below(void **state) {
    (void)state;
    assert_int_equal(kc__cpu_blas_core_isa("SkylakeX"), KC_CPU_ISA_AVX512);
    assert_int_equal(kc__cpu_blas_core_isa("cooperlake"), KC_CPU_ISA_AVX512);
    assert_int_equal(kc__cpu_blas_core_isa("Haswell"), KC_CPU_ISA_AVX2);
    assert_int_equal(kc__cpu_blas_core_isa("Zen"), KC_CPU_ISA_AVX2);
    assert_int_equal(kc__cpu_blas_core_isa("Sandybridge"), KC_CPU_ISA_BASELINE);
    assert_int_equal(kc__cpu_blas_core_isa("Prescott"), KC_CPU_ISA_BASELINE);
    assert_int_equal(kc__cpu_blas_core_isa("neoversen1"), -1);
    assert_int_equal(kc__cpu_blas_core_isa(NULL), -1);

    char why[1024] = "";
    /* forced by the environment: the variable and its value, and both ways out */
    assert_true(kc__cpu_blas_below(KC_CPU_ISA_AVX512, "Haswell", "Haswell", why, sizeof why));
    assert_non_null(strstr(why, "OpenBLAS runs its Haswell kernels (AVX2), as OPENBLAS_CORETYPE=Haswell asks"));
    assert_non_null(strstr(why, "(AVX-512)"));
    assert_non_null(strstr(why, "; unset OPENBLAS_CORETYPE"));
    assert_non_null(strstr(why, "KERAC_CPU_ISA=avx2"));
    /* detected too low: an OpenBLAS older than the processor */
    assert_true(kc__cpu_blas_below(KC_CPU_ISA_AVX512, "Zen", NULL, why, sizeof why));
    assert_non_null(strstr(why, "does not know the processor"));
    assert_non_null(strstr(why, "; set OPENBLAS_CORETYPE=SkylakeX"));
    assert_true(kc__cpu_blas_below(KC_CPU_ISA_AVX2, "Sandybridge", "", why, sizeof why));
    assert_non_null(strstr(why, "set OPENBLAS_CORETYPE=Haswell"));
    assert_true(kc__cpu_blas_below(KC_CPU_ISA_AVX2, "Sandybridge", "Sandybridge", why, sizeof why));
    assert_non_null(strstr(why, "KERAC_CPU_ISA=baseline"));
    /* level or above, or unknown: nothing to say */
    why[0] = 0;
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_AVX512, "SkylakeX", NULL, why, sizeof why));
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_AVX2, "Haswell", "Haswell", why, sizeof why));
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_AVX2, "Cooperlake", NULL, why, sizeof why));
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_BASELINE, "Prescott", NULL, why, sizeof why));
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_AVX512, "armv8", NULL, why, sizeof why));
    assert_false(kc__cpu_blas_below(KC_CPU_ISA_AVX512, NULL, NULL, why, sizeof why));
    assert_string_equal(why, "");

    /* the backend as it runs here: a baseline one is never below; and the open warns
     * (once) exactly when this process's OpenBLAS is below the set it opened */
    kc_backend *be = NULL;
    kc_device_opts o = {.device = "cpu", .cpu_isa = KC_CPU_ISA_BASELINE};
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    assert_false(kc__cpu_blas_below_backend(be, why, sizeof why));
    kc_backend_destroy(be);
    assert_false(kc__cpu_blas_below_backend(NULL, why, sizeof why));
    kc_log_set_callback(count_warnings, NULL);
    o.cpu_isa = KC_CPU_ISA_AUTO;
    int expect = 0;
    for (int i = 0; i < 2; i++) {
        assert_int_equal(kc_backend_open_ex(&o, &be), KC_STATUS_OK);
        if (kc__cpu_blas_below_backend(be, why, sizeof why)) expect = 1;
        kc_backend_destroy(be);
    }
    kc_log_set_callback(NULL, NULL);
    assert_int_equal(g_warnings, expect);
    if (expect) assert_non_null(strstr(g_warning, why));
    print_message("    here: OpenBLAS %s, kerac %s kernels: %s\n", kc__cpu_blas_core() ? kc__cpu_blas_core() : "(none)",
                  kc__cpu_isa_label(kc__cpu_isa_best()), expect ? "warned once" : "no warning");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_set_matches_baseline),
        cmocka_unit_test(test_refused_when_missing),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_open_ex_picks_it),
        cmocka_unit_test(test_blas_below),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
