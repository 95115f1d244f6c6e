/* test_fuse_bn_relu.c — BatchNormalization + ReLU in one pass (src/model/fuse.c and the CPU
 * backend's batchnorm_relu_* in cpu_norm.c), against the two layers run apart:
 *   kernels_match_apart   every kernel set this processor runs: the fused forward (training and
 *                         inference) and backward against batchnorm_* followed by act_* (ReLU,
 *                         ReLU(max_value)), dgamma and dbeta included; 1 and 2 threads, channel
 *                         counts from 3 to 2100 (the blocked path for more than 2048), few rows
 *                         (serial) and many (parallel); the backward without y (its mask
 *                         recomputed from x) against the one with y, bit for bit
 *   model_matches_unfused the same model with and without the fusion (kc_device_opts
 *                         .cpu_fuse_bn_relu = KC_FALSE): which pairs fuse, the loss, every
 *                         gradient, the moving statistics, inference outputs; with a frozen
 *                         BatchNormalization too
 * (test_model_grad.c checks a fused model's gradients against finite differences.) */
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
#include "model/model.h"
#include "model_pair.h"

#define B 6


/* One shape on one backend: the fused entries against the separate ones. */
static void check_kernels(kc_backend *be, int64_t rows, int c, float relu_max, unsigned seed) {
    const int64_t n = rows * c;
    float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
    float *y1 = malloc(sizeof(float) * (size_t)n), *y2 = malloc(sizeof(float) * (size_t)n);
    float *g = malloc(sizeof(float) * (size_t)n), *dx1 = malloc(sizeof(float) * (size_t)n);
    float *dx2 = malloc(sizeof(float) * (size_t)n);
    float *p = malloc(sizeof(float) * 12 * (size_t)c);
    float *gamma = p, *beta = p + c, *mm1 = p + 2 * c, *mv1 = p + 3 * c, *mm2 = p + 4 * c, *mv2 = p + 5 * c;
    float *sm1 = p + 6 * c, *si1 = p + 7 * c, *sm2 = p + 8 * c, *si2 = p + 9 * c, *dg1 = p + 10 * c, *db1 = p + 11 * c;
    float *dg2 = malloc(sizeof(float) * (size_t)c), *db2 = malloc(sizeof(float) * (size_t)c);
    for (int64_t i = 0; i < n; i++) x[i] = 3.0f * mp_rnd(&seed) - 1.0f, dy[i] = mp_rnd(&seed) - 0.5f;
    for (int j = 0; j < c; j++) {
        gamma[j] = 0.5f + mp_rnd(&seed), beta[j] = mp_rnd(&seed) - 0.3f;
        mm1[j] = mm2[j] = mp_rnd(&seed) - 0.5f, mv1[j] = mv2[j] = 0.5f + mp_rnd(&seed);
    }
    const kc_act_params act = relu_max > 0.0f ? (kc_act_params){KC_ACT_RELU_GENERAL, 0.0f, relu_max, 0.0f}
                                              : (kc_act_params){KC_ACT_RELU, 0.0f, 0.0f, 0.0f};
    /* training forward */
    assert_int_equal(be->batchnorm_forward_train(be, x, y1, rows, c, gamma, beta, mm1, mv1, 0.9f, 1e-3f, sm1, si1),
                     KC_STATUS_OK);
    assert_int_equal(be->act_forward(be, act, y1, y1, n, c), KC_STATUS_OK);
    assert_int_equal(be->batchnorm_relu_forward_train(be, x, y2, rows, c, gamma, beta, mm2, mv2, 0.9f, 1e-3f, sm2,
                                                      si2, relu_max),
                     KC_STATUS_OK);
    int clipped = 0, zero = 0;
    for (int64_t i = 0; i < n; i++) clipped += relu_max > 0.0f && y1[i] == relu_max, zero += y1[i] == 0.0f;
    assert_true(zero > 0);
    if (relu_max > 0.0f && n >= 256) assert_true(clipped > 0); /* the clip is exercised */
    if (mp_max_abs_diff(y1, y2, n) > 1e-6 || mp_max_abs_diff(mm1, mm2, c) > 1e-7 ||
        mp_max_abs_diff(mv1, mv2, c) > 1e-7 || mp_max_abs_diff(sm1, sm2, c) > 0 || mp_max_abs_diff(si1, si2, c) > 0)
        fail_msg("%s, %lld rows x %d, relu_max %g: training forward differs (y by %g)", kc_backend_cpu_isa(be),
                 (long long)rows, c, (double)relu_max, mp_max_abs_diff(y1, y2, n));
    /* backward: the ReLU's then the batch norm's, against the fused one (dx may be dy's memory) */
    assert_int_equal(be->act_backward(be, act, NULL, y1, dy, g, n, c), KC_STATUS_OK);
    assert_int_equal(be->batchnorm_backward(be, x, g, dx1, rows, c, gamma, sm1, si1, dg1, db1), KC_STATUS_OK);
    assert_int_equal(
        be->batchnorm_relu_backward(be, x, y2, dy, dx2, rows, c, gamma, beta, sm2, si2, dg2, db2, relu_max),
        KC_STATUS_OK);
    double scale = 1e-30;
    for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs(dx1[i]));
    if (mp_max_abs_diff(dx1, dx2, n) > 1e-6 * scale || mp_max_abs_diff(dg1, dg2, c) > 1e-5 ||
        mp_max_abs_diff(db1, db2, c) > 1e-5)
        fail_msg("%s, %lld rows x %d, relu_max %g: backward differs (dx %g of %g, dgamma %g, dbeta %g)",
                 kc_backend_cpu_isa(be), (long long)rows, c, (double)relu_max, mp_max_abs_diff(dx1, dx2, n), scale,
                 mp_max_abs_diff(dg1, dg2, c), mp_max_abs_diff(db1, db2, c));
    /* scale2t: without y the mask comes from x, recomputed as the forward computed y: the same
     * floats as the y-masked backward (the reference), bit for bit, in place too */
    float *dx3 = malloc(sizeof(float) * (size_t)n), *dg3 = malloc(sizeof(float) * (size_t)c);
    float *db3 = malloc(sizeof(float) * (size_t)c);
    assert_int_equal(
        be->batchnorm_relu_backward(be, x, NULL, dy, dx3, rows, c, gamma, beta, sm2, si2, dg3, db3, relu_max),
        KC_STATUS_OK);
    if (mp_max_abs_diff(dx2, dx3, n) > 0 || mp_max_abs_diff(dg2, dg3, c) > 0 || mp_max_abs_diff(db2, db3, c) > 0)
        fail_msg("%s, %lld rows x %d, relu_max %g: the mask from x differs from y's (dx %g, dgamma %g, dbeta %g)",
                 kc_backend_cpu_isa(be), (long long)rows, c, (double)relu_max, mp_max_abs_diff(dx2, dx3, n),
                 mp_max_abs_diff(dg2, dg3, c), mp_max_abs_diff(db2, db3, c));
    memcpy(dx3, dy, sizeof(float) * (size_t)n);
    assert_int_equal(
        be->batchnorm_relu_backward(be, x, NULL, dx3, dx3, rows, c, gamma, beta, sm2, si2, dg3, db3, relu_max),
        KC_STATUS_OK);
    assert_true(mp_max_abs_diff(dx2, dx3, n) == 0);
    free(dx3), free(dg3), free(db3);
    memcpy(dx2, dy, sizeof(float) * (size_t)n); /* in place: dx is dy */
    assert_int_equal(
        be->batchnorm_relu_backward(be, x, y2, dx2, dx2, rows, c, gamma, beta, sm2, si2, dg2, db2, relu_max),
        KC_STATUS_OK);
    assert_true(mp_max_abs_diff(dx1, dx2, n) <= 1e-6 * scale);
    /* inference */
    assert_int_equal(be->batchnorm_forward_infer(be, x, y1, rows, c, gamma, beta, mm1, mv1, 1e-3f), KC_STATUS_OK);
    assert_int_equal(be->act_forward(be, act, y1, y1, n, c), KC_STATUS_OK);
    assert_int_equal(be->batchnorm_relu_forward_infer(be, x, y2, rows, c, gamma, beta, mm1, mv1, 1e-3f, relu_max),
                     KC_STATUS_OK);
    if (mp_max_abs_diff(y1, y2, n) > 1e-6)
        fail_msg("%s: inference differs by %g", kc_backend_cpu_isa(be), mp_max_abs_diff(y1, y2, n));
    free(x), free(dy), free(y1), free(y2), free(g), free(dx1), free(dx2), free(p), free(dg2), free(db2);
}

static void test_kernels_match_apart(void **state) {
    (void)state;
    const struct {
        int64_t rows;
        int c;
    } cs[] = {{7, 3}, {40, 13}, {2304, 32}, {1152, 144}, {288, 960}, {50, 2100}, {200, 2100}};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
            kc_backend *be = NULL;
            assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_isa = isa}, &be), KC_STATUS_OK);
            for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
                check_kernels(be, cs[k].rows, cs[k].c, 0.0f, 5u + (unsigned)k);
                check_kernels(be, cs[k].rows, cs[k].c, 1.5f, 9u + (unsigned)k);
            }
            kc_backend_destroy(be);
        }
    }
}

/* input (8, 8, 3) -> conv -> bn1 -> ReLU(max 0.5)   [fused]
 *   -> depthwise -> bn2 -> Activation("relu")       [fused]
 *   -> conv 1x1 -> bn3 -> ReLU(negative_slope 0.1)  [not: a slope]
 *   -> bn4 -> ReLU, Add(ReLU, bn4)                  [not: bn4 has two consumers]
 *   -> conv 1x1 -> bn5 -> ReLU                      [fused]
 *   -> global average -> dense(3, softmax) */
static kc_model *model(int fuse) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("fuse", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {8, 8, 3}));
    x = kc_apply(m, KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "bn1"), x);
    x = kc_apply(m, KC_RELU(.max_value = 0.5f), x);
    x = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "bn2"), x);
    x = kc_apply(m, KC_ACTIVATION(.activation = "relu"), x);
    x = kc_apply(m, KC_CONV2D(.filters = 8, .kernel_size = {1, 1}), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "bn3"), x);
    x = kc_apply(m, KC_RELU(.negative_slope = 0.1f), x);
    kc_node b4 = kc_apply(m, KC_BATCHNORM(.name = "bn4"), x);
    kc_node r4 = kc_apply(m, KC_RELU(), b4);
    x = kc_merge(m, KC_ADD(), (kc_node[]){r4, b4}, 2);
    x = kc_apply(m, KC_CONV2D(.filters = 8, .kernel_size = {1, 1}), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "bn5"), x);
    x = kc_apply(m, KC_RELU(), x);
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    x = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    kc_device_opts o = {.cpu_fuse_bn_relu = fuse ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 17), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

static void feed(kc_model *m, float *t) { mp_feed(m, t, B, B * 8 * 8 * 3, -1.5f, 4.0f); }

/* Names of the fused batch norms, and how many ReLU layers they absorbed. */
static int fused_pairs(const kc_model *m, char *names, size_t n) {
    int absorbed = 0;
    names[0] = 0;
    for (int i = 0; i < m->n_layers; i++) {
        absorbed += m->layers[i]->absorbed;
        if (m->layers[i]->relu_after) snprintf(names + strlen(names), n - strlen(names), "%s ", m->layers[i]->name);
    }
    return absorbed;
}

/* Training step of both models (gradients not applied), then inference: the same numbers. */
static void compare(kc_model *a, kc_model *b) {
    float ta[B], tb[B];
    assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
    feed(a, ta), feed(b, tb);
    char na[256], nb[256];
    assert_int_equal(fused_pairs(a, na, sizeof na), 3);
    assert_string_equal(na, "bn1 bn2 bn5 ");
    assert_int_equal(fused_pairs(b, nb, sizeof nb), 0);
    mp_train_compare(a, b, B);
    a->batch_targets = b->batch_targets = NULL;
    /* inference (the moving statistics) */
    assert_int_equal(kc__model_prepare(a, B, false), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(b, B, false), KC_STATUS_OK);
    feed(a, ta), feed(b, tb);
    mp_infer_compare(a, b, B, B * 3);
    a->batch_targets = b->batch_targets = NULL;
}

static void test_model_matches_unfused(void **state) {
    (void)state;
    kc_model *a = model(1), *b = model(0);
    compare(a, b);
    /* frozen bn1 (inference mode in training, its backward masks dy itself): still fused */
    assert_int_equal(kc_model_set_trainable(a, "bn1", 0), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(b, "bn1", 0), KC_STATUS_OK);
    compare(a, b);
    kc_model_destroy(a);
    kc_model_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_match_apart),
        cmocka_unit_test(test_model_matches_unfused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
