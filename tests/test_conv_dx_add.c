/* test_conv_dx_add.c — a convolution that is not the first to write its input's gradient adds
 * into it in place (kc_conv2d_desc.accumulate, kc_layer_ops.dx_adds, src/model/plan.c) instead
 * of writing a buffer of its own that is then added in (kc_device_opts.cpu_conv_dx_add =
 * KC_FALSE, the reference).
 *   backend     kc__cpu backward-data with accumulate against overwrite + add, on the 1x1
 *               GEMM (beta = 1), the strided 1x1 and the 3x3 im2col paths (col2im adding), on
 *               every instruction set this processor runs; the Winograd path says it cannot
 *               (conv2d_dx_adds) and refuses accumulate with an error
 *   resnet      ResNet's projection block (x read by two strided 1x1 convolutions) and
 *               identity block (x read by a 1x1 convolution and the Add): which convolutions
 *               add in place, the same loss and gradients as the reference, 1 and 2 threads
 *   winograd    the same model with Winograd at any channel count: a 3x3 consumer on Winograd
 *               keeps its buffer, the others add */
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
#include "model/model.h"
#include "model_pair.h"

#define B 4
#define HW 8
#define C 8

/* ---- the backend */

/* dx = base + backward_data(dy) computed both ways on backend be; returns the largest
 * difference relative to the largest magnitude. */
static double accumulate_vs_add(kc_backend *be, kc_conv2d_desc d) {
    const int64_t nx = (int64_t)d.n * d.h * d.w * d.c, ny = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t nw = (int64_t)d.kh * d.kw * d.c * d.f;
    float *dy = malloc(sizeof(float) * (size_t)ny), *w = malloc(sizeof(float) * (size_t)nw);
    float *base = malloc(sizeof(float) * (size_t)nx), *ref = malloc(sizeof(float) * (size_t)nx);
    float *acc = malloc(sizeof(float) * (size_t)nx);
    unsigned s = 11;
    for (int64_t i = 0; i < ny; i++) dy[i] = mp_rnd(&s) - 0.5f;
    for (int64_t i = 0; i < nw; i++) w[i] = mp_rnd(&s) - 0.5f;
    for (int64_t i = 0; i < nx; i++) base[i] = 2.0f * mp_rnd(&s) - 1.0f;
    const size_t wsb = be->conv2d_workspace(be, &d);
    void *ws = wsb ? malloc(wsb) : NULL;
    d.accumulate = 0;
    assert_int_equal(be->conv2d_backward_data(be, &d, dy, w, ref, ws, wsb), KC_STATUS_OK);
    for (int64_t i = 0; i < nx; i++) ref[i] += base[i];
    memcpy(acc, base, sizeof(float) * (size_t)nx);
    d.accumulate = 1;
    assert_int_equal(be->conv2d_backward_data(be, &d, dy, w, acc, ws, wsb), KC_STATUS_OK);
    double big = 1e-30;
    for (int64_t i = 0; i < nx; i++) big = fmax(big, fabs(ref[i]));
    const double diff = mp_max_abs_diff(acc, ref, nx) / big;
    const double moved = mp_max_abs_diff(acc, base, nx); /* the gradient was added at all */
    assert_true(moved > 1e-3);
    free(dy), free(w), free(base), free(ref), free(acc), free(ws);
    return diff;
}

static kc_conv2d_desc desc(int h, int c, int f, int k, int stride) {
    const int pad = k / 2, oh = (h + 2 * pad - k) / stride + 1;
    return (kc_conv2d_desc){.n = 3, .h = h, .w = h, .c = c, .f = f, .kh = k, .kw = k, .sh = stride, .sw = stride,
                            .dh = 1, .dw = 1, .pad_top = pad, .pad_left = pad, .oh = oh, .ow = oh};
}

static void test_backend(void **state) {
    (void)state;
    static const char *isas[] = {"baseline", "avx2", "avx512"};
    for (int i = 0; i < 3; i++) {
        kc_device_opts o = {.cpu_winograd = KC_FALSE};
        kc_backend *be = NULL;
        o.cpu_isa = i + 1; /* KC_CPU_ISA_BASELINE, _AVX2, _AVX512 */
        if (kc_backend_cpu_create_ex(&o, &be) != KC_STATUS_OK) continue; /* the processor lacks it */
        assert_non_null(be->conv2d_dx_adds);
        const kc_conv2d_desc cases[] = {desc(9, 16, 24, 1, 1), desc(9, 16, 24, 1, 2), desc(9, 8, 16, 3, 1),
                                        desc(7, 40, 24, 3, 2)};
        for (int k = 0; k < 4; k++) {
            assert_true(be->conv2d_dx_adds(be, &cases[k]));
            const double e = accumulate_vs_add(be, cases[k]);
            if (e > 1e-6) fail_msg("%s case %d: accumulate differs from overwrite + add by %g", isas[i], k, e);
        }
        kc_backend_destroy(be);
    }
    /* Winograd (forced at any channel count) cannot add: it says so and refuses */
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_winograd = KC_TRUE}, &be), KC_STATUS_OK);
    kc_conv2d_desc d = desc(8, 16, 16, 3, 1);
    assert_false(be->conv2d_dx_adds(be, &d));
    d.accumulate = 1;
    float x = 0;
    assert_int_equal(be->conv2d_backward_data(be, &d, &x, &x, &x, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "accumulate"));
    kc_backend_destroy(be);
    /* turned off: no hook, so the plan gives every convolution a buffer of its own */
    assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_conv_dx_add = KC_FALSE}, &be), KC_STATUS_OK);
    assert_null(be->conv2d_dx_adds);
    kc_backend_destroy(be);
}

/* ---- whole models */

static kc_node conv_bn(kc_model *m, kc_node x, const char *name, int k, int stride, int relu) {
    x = kc_apply(m, KC_CONV2D(.name = name, .filters = C, .kernel_size = {k, k}, .strides = {stride, stride},
                              .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    return relu ? kc_apply(m, KC_ACTIVATION(.activation = "relu"), x) : x;
}

/* stem; projection block (x read by "sc" and "p1", both strided 1x1); identity block (x read
 * by "i1" and the Add); a last 3x3 read twice ("t1", "t2"). */
static kc_model *resnet(int dx_add, int winograd) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("resnet_dx_add", &m), KC_STATUS_OK);
    kc_node x = conv_bn(m, kc_input(m, KC_INPUT(.shape = {HW, HW, 3})), "stem", 3, 1, 1);
    kc_node sc = conv_bn(m, x, "sc", 1, 2, 0);
    kc_node r = conv_bn(m, x, "p1", 1, 2, 1);
    r = conv_bn(m, r, "p2", 3, 1, 0);
    x = kc_apply(m, KC_ACTIVATION(.activation = "relu"), kc_merge(m, KC_ADD(), (kc_node[]){sc, r}, 2));
    r = conv_bn(m, x, "i1", 1, 1, 1);
    r = conv_bn(m, r, "i2", 1, 1, 0);
    x = kc_apply(m, KC_ACTIVATION(.activation = "relu"), kc_merge(m, KC_ADD(), (kc_node[]){x, r}, 2));
    kc_node t1 = conv_bn(m, x, "t1", 3, 1, 1), t2 = conv_bn(m, x, "t2", 3, 1, 1);
    x = kc_merge(m, KC_ADD(), (kc_node[]){t1, t2}, 2);
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    x = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    kc_device_opts o = {.cpu_conv_dx_add = dx_add ? KC_DEFAULT : KC_FALSE, .cpu_winograd = winograd ? KC_TRUE : 0};
    assert_int_equal(kc_model_set_device_opts(m, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 29), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

/* For each named convolution: "add" if it adds its input gradient in place, "tmp" if it writes a
 * buffer of its own that is added in, "first" if it is the first writer; separated by spaces. */
static void how_each_writes(const kc_model *m, const char *const *names, int n, char *out, size_t cap) {
    const kc_plan *p = &m->plan;
    out[0] = 0;
    for (int k = 0; k < n; k++)
        for (int i = 0; i < m->n_layers; i++) {
            if (strcmp(m->layers[i]->name, names[k]) != 0) continue;
            const bool add = p->dx_add[i * KC_MAX_INPUTS], tmp = p->dx_tmp_off[i * KC_MAX_INPUTS] != KC_PLAN_NONE;
            assert_false(add && tmp);
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", k ? " " : "", add ? "add" : tmp ? "tmp" : "first");
        }
}

static void compare(int winograd, const char *want) {
    static const char *const names[] = {"sc", "p1", "i1", "t1", "t2"};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        kc_model *a = resnet(1, winograd), *b = resnet(0, winograd);
        assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
        assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
        char got[128];
        how_each_writes(a, names, 5, got, sizeof got);
        assert_string_equal(got, want);
        how_each_writes(b, names, 5, got, sizeof got);
        if (strstr(got, "add")) fail_msg("the reference adds in place: %s", got);
        assert_true(a->plan.gradient_bytes < b->plan.gradient_bytes || !strstr(want, "add"));
        mp_train_compare_destroy(a, b, B, B * HW * HW * 3, -1.0f, 2.0f);
    }
}

/* sc (index below p1) writes after p1; i1 after the Add (which shares); t1 after t2 */
static void test_resnet(void **state) {
    (void)state;
    compare(0, "add first add add first");
}

static void test_winograd(void **state) {
    (void)state;
    compare(1, "add first add tmp first");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_backend),
        cmocka_unit_test(test_resnet),
        cmocka_unit_test(test_winograd),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
