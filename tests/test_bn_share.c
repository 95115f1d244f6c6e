/* test_bn_share.c — a batch norm's input gradient in the batch norm's own dy buffer
 * (src/model/plan.c, plan_share_bn; the backend's batchnorm_dx_in_place):
 *   kernels_in_place   every kernel set: batchnorm_backward with dx == dy, bit for bit the
 *                      result with dx apart (1 and 2 threads, one-pass and blocked channel
 *                      counts)
 *   model_shares       which inputs share (a convolution read by its batch norm only; not an
 *                      input read by a later layer too, not where the batch norm's dy is an
 *                      Add's, not the model's input), one gradient buffer less, and the same
 *                      loss, gradients and moving statistics as the same model with the
 *                      sharing off (batchnorm_dx_in_place = 0 on its backend); with a frozen
 *                      batch norm too; 1 and 2 threads */
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

#define B 4

static void test_kernels_in_place(void **state) {
    (void)state;
    const int saved = kc_get_num_threads();
    const int64_t rows_of[] = {7, 3000};
    const int c_of[] = {5, 48, 2100};
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_device_opts o = {.cpu_isa = isa};
        kc_backend *be = NULL;
        assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
        assert_int_equal(be->batchnorm_dx_in_place, 1);
        for (int threads = 1; threads <= 2; threads++) {
            kc_set_num_threads(threads);
            for (size_t ir = 0; ir < KC_ARRAY_LEN(rows_of); ir++)
                for (size_t ic = 0; ic < KC_ARRAY_LEN(c_of); ic++) {
                    const int64_t rows = rows_of[ir], n = rows * c_of[ic];
                    const int c = c_of[ic];
                    float *x = malloc(sizeof(float) * (size_t)n), *dy = malloc(sizeof(float) * (size_t)n);
                    float *dx = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
                    float *p = malloc(sizeof(float) * 10 * (size_t)c);
                    assert_true(x && dy && dx && y && p);
                    unsigned s = 5 + (unsigned)(ir * 3 + ic);
                    for (int64_t i = 0; i < n; i++) x[i] = 3.0f * mp_rnd(&s) - 1.0f, dy[i] = mp_rnd(&s) - 0.5f;
                    float *gamma = p, *mm = p + c, *mv = p + 2 * c, *sm = p + 3 * c, *si = p + 4 * c;
                    float *dg1 = p + 5 * c, *db1 = p + 6 * c, *dg2 = p + 7 * c, *db2 = p + 8 * c;
                    for (int j = 0; j < c; j++) gamma[j] = 0.5f + mp_rnd(&s), mm[j] = 0.0f, mv[j] = 1.0f;
                    assert_int_equal(be->batchnorm_forward_train(be, x, y, rows, c, gamma, NULL, mm, mv, 0.9f, 1e-3f,
                                                                 sm, si),
                                     KC_STATUS_OK);
                    assert_int_equal(be->batchnorm_backward(be, x, dy, dx, rows, c, gamma, sm, si, dg1, db1),
                                     KC_STATUS_OK);
                    assert_int_equal(be->batchnorm_backward(be, x, dy, dy, rows, c, gamma, sm, si, dg2, db2),
                                     KC_STATUS_OK);
                    if (memcmp(dx, dy, sizeof(float) * (size_t)n) != 0 ||
                        memcmp(dg1, dg2, sizeof(float) * (size_t)c) != 0 ||
                        memcmp(db1, db2, sizeof(float) * (size_t)c) != 0)
                        fail_msg("%s, %d threads, %lld x %d: the backward in place differs from the one apart",
                                 kc__cpu_isa_label(isa), threads, (long long)rows, c);
                    free(x), free(dy), free(dx), free(y), free(p);
                }
        }
        kc_backend_destroy(be);
    }
    kc_set_num_threads(saved);
}

/* input (6, 6, 3) -> bn0 -> conv c1 -> bn1 -> ReLU      [c1 shares bn1's dy; bn0: the input
 *                                                       takes no gradient, nothing to share]
 *   -> conv c2 -> late = conv(c2), bn2 = bn(c2)       [c2 shares bn2's: bn2 is c2's consumer
 *                                                       with the latest index; late's backward
 *                                                       runs after bn2's and adds into it]
 *   -> add1 = Add(late, bn2) -> conv c3 -> bn3
 *   -> add2 = Add(add1, bn3)                          [bn3's dy is add2's (plan_share_add):
 *                                                       c3 does not share it]
 *   -> ReLU -> conv c4 -> bn4, late2 = conv(c4)
 *                                                      [c4 does not share bn4's: late2, a later
 *                                                       layer, writes c4's dy first]
 *   -> Add(ReLU(bn4), late2) (the ReLU fused into bn4: bn4's dy is its own)
 *   -> global average -> dense(3, softmax) */
static kc_model *model(int in_place, int freeze) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("bn_share", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 3}));
    x = kc_apply(m, KC_BATCHNORM(.name = "bn0"), x);
    x = kc_apply(m, KC_CONV2D(.name = "c1", .filters = 8, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "bn1"), x);
    x = kc_apply(m, KC_RELU(), x);
    kc_node c2 = kc_apply(m, KC_CONV2D(.name = "c2", .filters = 8, .kernel_size = {1, 1}), x);
    kc_node late = kc_apply(m, KC_CONV2D(.name = "late", .filters = 8, .kernel_size = {1, 1}), c2);
    kc_node b2 = kc_apply(m, KC_BATCHNORM(.name = "bn2"), c2);
    kc_node a = kc_merge(m, KC_ADD(.name = "add1"), (kc_node[]){late, b2}, 2);
    kc_node c3 = kc_apply(m, KC_CONV2D(.name = "c3", .filters = 8, .kernel_size = {3, 3}, .padding = "same"), a);
    kc_node b3 = kc_apply(m, KC_BATCHNORM(.name = "bn3"), c3);
    x = kc_merge(m, KC_ADD(.name = "add2"), (kc_node[]){a, b3}, 2);
    x = kc_apply(m, KC_RELU(), x);
    kc_node c4 = kc_apply(m, KC_CONV2D(.name = "c4", .filters = 8, .kernel_size = {1, 1}), x);
    kc_node b4 = kc_apply(m, KC_BATCHNORM(.name = "bn4"), c4);
    kc_node late2 = kc_apply(m, KC_CONV2D(.name = "late2", .filters = 8, .kernel_size = {1, 1}), c4);
    x = kc_merge(m, KC_ADD(.name = "add3"), (kc_node[]){kc_apply(m, KC_RELU(), b4), late2}, 2);
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    x = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 29), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    if (freeze) assert_int_equal(kc_model_set_trainable(m, "bn1", 0), KC_STATUS_OK);
    m->be->batchnorm_dx_in_place = in_place;
    return m;
}

static void test_model_shares(void **state) {
    (void)state;
    const int saved = kc_get_num_threads();
    for (int freeze = 0; freeze <= 1; freeze++)
        for (int threads = 1; threads <= 2; threads++) {
            kc_set_num_threads(threads);
            omp_set_num_threads(threads);
            kc_model *a = model(1, freeze), *b = model(0, freeze);
            assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
            assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
            assert_true(mp_dy_shared(a, "c1", "bn1"));
            assert_true(mp_dy_shared(a, "c2", "bn2"));
            assert_false(mp_dy_shared(a, "c4", "bn4"));
            assert_true(mp_dy_shared(a, "bn3", "add2")); /* bn3's dy is add2's: c3 keeps its own */
            assert_false(mp_dy_shared(a, "c3", "bn3"));
            assert_false(mp_dy_shared(b, "c1", "bn1"));
            assert_false(mp_dy_shared(b, "c2", "bn2"));
            assert_true(a->plan.gradient_bytes < b->plan.gradient_bytes);
            mp_train_compare_destroy(a, b, B, B * 6 * 6 * 3, -1.0f, 3.0f);
        }
    kc_set_num_threads(saved);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_in_place),
        cmocka_unit_test(test_model_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
