/* test_fold_pad.c — ZeroPadding2D folded into the DepthwiseConv2D that reads it
 * (src/model/fuse.c, fold_pads; the depthwise layer's descriptor takes the unpadded input and
 * the padding), against the same model with the padded copies written
 * (kc_device_opts.cpu_fold_pad = KC_FALSE):
 *   which pads fold   those whose only consumer is a depthwise convolution (stride 2 'valid'
 *                     after ((0, 1), (0, 1)) as MobileNetV2's, asymmetric padding before a
 *                     'same' one, the default (1, 1) before a depth multiplier of 2); not one
 *                     before a Conv2D, nor one with two consumers
 *   the numbers       training loss, every gradient, the moving statistics, inference outputs,
 *                     with 1 and 2 threads; channel counts with and without the vector tail
 *   still a layer     kc_model_layer_info shows each ZeroPadding2D with its padded output shape */
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

/* input (10, 10, 5) -> conv 1x1 (ch) -> bn -> ReLU6 -> pad1 ((0,1),(0,1)) -> depthwise 3x3 s2 valid [folds]
 *   -> bn -> ReLU -> pad2 ((2,1),(1,2)) -> depthwise 3x3 'same' + bias, relu                   [folds]
 *   -> pad3 (1,1) -> depthwise 3x3 s2, multiplier 2                                            [folds]
 *   -> pad4 (1,1) -> conv 3x3 valid                                                             [not: a Conv2D]
 *   -> pad5 (1,1) -> depthwise 3x3 and Add(pad5, depthwise 'same')                              [not: two consumers]
 *   -> global average -> dense(3, softmax) */
static kc_model *model(int fold, int ch) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("fold", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {10, 10, 5}));
    x = kc_apply(m, KC_CONV2D(.filters = ch, .kernel_size = {1, 1}), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    x = kc_apply(m, KC_RELU(.max_value = 6.0f), x);
    x = kc_apply(m, KC_ZEROPAD2D(.name = "pad1", .padding = {{0, 1}, {0, 1}}), x);
    x = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}, .use_bias = KC_FALSE), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    x = kc_apply(m, KC_RELU(), x);
    x = kc_apply(m, KC_ZEROPAD2D(.name = "pad2", .padding = {{2, 1}, {1, 2}}), x);
    x = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same", .activation = "relu"), x);
    x = kc_apply(m, KC_ZEROPAD2D(.name = "pad3"), x);
    x = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}, .depth_multiplier = 2), x);
    x = kc_apply(m, KC_ZEROPAD2D(.name = "pad4"), x);
    x = kc_apply(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}), x);
    kc_node p5 = kc_apply(m, KC_ZEROPAD2D(.name = "pad5"), x);
    kc_node d5 = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same"), p5);
    x = kc_merge(m, KC_ADD(), (kc_node[]){p5, d5}, 2);
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    x = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    kc_device_opts o = {.cpu_fold_pad = fold ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 23), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

static void feed(kc_model *m, float *t) { mp_feed(m, t, B, B * 10 * 10 * 5, -1.0f, 3.0f); }

/* The names of the folded pads. */
static void folded(const kc_model *m, char *names, size_t n) {
    names[0] = 0;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->pad_folded) snprintf(names + strlen(names), n - strlen(names), "%s ", m->layers[i]->name);
}

/* A training step of both (gradients not applied), then inference: the same numbers. */
static void compare(kc_model *a, kc_model *b) {
    float ta[B], tb[B];
    assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
    feed(a, ta), feed(b, tb);
    char na[128], nb[128];
    folded(a, na, sizeof na), folded(b, nb, sizeof nb);
    assert_string_equal(na, "pad1 pad2 pad3 ");
    assert_string_equal(nb, "");
    mp_train_compare(a, b, B);
    a->batch_targets = b->batch_targets = NULL;
    assert_int_equal(kc__model_prepare(a, B, false), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(b, B, false), KC_STATUS_OK);
    feed(a, ta), feed(b, tb);
    folded(a, na, sizeof na);
    assert_string_equal(na, "pad1 pad2 pad3 "); /* inference folds too */
    mp_infer_compare(a, b, B, B * 3);
    a->batch_targets = b->batch_targets = NULL;
}

static void test_fold_matches_copy(void **state) {
    (void)state;
    const int chans[] = {16, 20, 3};
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof chans / sizeof *chans; k++) {
            kc_model *a = model(1, chans[k]), *b = model(0, chans[k]);
            compare(a, b);
            kc_model_destroy(a);
            kc_model_destroy(b);
        }
    }
    omp_set_num_threads(2);
}

/* The padded layers keep their padded output shapes. */
static void test_pads_still_layers(void **state) {
    (void)state;
    kc_model *m = model(1, 16);
    float t[B];
    assert_int_equal(kc__model_prepare(m, B, true), KC_STATUS_OK);
    feed(m, t);
    const int want[5][3] = {{11, 11, 16}, {8, 8, 16}, {10, 10, 16}, {6, 6, 32}, {6, 6, 6}};
    int seen = 0;
    for (int i = 0; i < kc_model_num_layers(m); i++) {
        kc_layer_info li;
        assert_int_equal(kc_model_layer_info(m, i, &li), KC_STATUS_OK);
        if (strcmp(li.class_name, "ZeroPadding2D") != 0) continue;
        assert_int_equal(li.output_shape.rank, 3);
        for (int d = 0; d < 3; d++)
            if (li.output_shape.dim[d] != want[seen][d])
                fail_msg("%s: dim %d is %d, want %d", li.name, d, li.output_shape.dim[d], want[seen][d]);
        seen++;
    }
    assert_int_equal(seen, 5);
    m->batch_targets = NULL;
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_matches_copy),
        cmocka_unit_test(test_pads_still_layers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
