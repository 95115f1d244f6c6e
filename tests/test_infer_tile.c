/* test_infer_tile.c — inference in tiles of the batch (src/model/tile.c, kc_predict in fit.c):
 *   tile_size             the tile the default CNN gets at batch 1000 (its first pooling's input
 *                         + output fit the CPU's budget 38 times: 27 tiles of 38), no
 *                         tiles when switched off (kc_device_opts.cpu_infer_tile = KC_FALSE),
 *                         for small batches, or for a model whose weights fill the budget
 *   predict_matches_whole the default CNN with and without tiles, the same seed: predict on
 *                         1,037 images at batch 500 (a partial last batch and a partial last
 *                         tile) gives the same probabilities, and the tiled model's inference
 *                         plan really is a tile; a training step afterwards plans the whole
 *                         batch (training never runs in tiles) and gives both the same loss */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "backend/cpu/cpu.h"
#include "model/model.h"

static kc_model *cnn(int tiles) {
    kc_model *m = NULL;
    assert_int_equal(kc_default_cnn(28, 28, 1, 10, &m), KC_STATUS_OK);
    kc_device_opts o = {.cpu_infer_tile = tiles ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 5), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy",
                                                     .optimizer = KC_SGD(.learning_rate = 0.01)}),
                     KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    return m;
}

static void test_tile_size(void **state) {
    (void)state;
    kc_model *on = cnn(1), *off = cnn(0);
    assert_int_equal(on->be->infer_tile_bytes, KC_CPU_INFER_TILE_BYTES);
    assert_int_equal(off->be->infer_tile_bytes, 0);
    /* max_pooling2d: 26x26x32 in, 13x13x32 out = 27,040 floats an image; 4 MiB holds 38 */
    assert_int_equal(kc__model_infer_tile(on, 1000), 38);
    assert_int_equal(kc__model_infer_tile(on, 76), 38);
    assert_int_equal(kc__model_infer_tile(on, 77), 26); /* 3 tiles, evenly */
    assert_int_equal(kc__model_infer_tile(on, 40), 20);
    assert_int_equal(kc__model_infer_tile(on, 38), 38); /* fits: one tile */
    assert_int_equal(kc__model_infer_tile(on, 31), 31); /* tiles would be under 16 */
    assert_int_equal(kc__model_infer_tile(off, 1000), 1000);
    kc_model_destroy(on);
    kc_model_destroy(off);
    /* weights of 16 MiB: every tile would read them again */
    kc_model *big = NULL;
    assert_int_equal(kc_functional("big", &big), KC_STATUS_OK);
    kc_node x = kc_input(big, KC_INPUT(.shape = {2048}));
    x = kc_apply(big, KC_DENSE(.units = 2048), x);
    assert_int_equal(kc_set_output(big, x), KC_STATUS_OK);
    assert_int_equal(kc_model_build(big), KC_STATUS_OK);
    assert_int_equal(kc__model_infer_tile(big, 1000), 1000);
    kc_model_destroy(big);
}

static float rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static double train_loss(kc_model *m, const float *x, const int32_t *y, int n) {
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, kc__shape_make(3, (int[]){28, 28, 1}), 10, &d), KC_STATUS_OK);
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = n, .shuffle = KC_FALSE}, &h),
                     KC_STATUS_OK);
    assert_true(m->plan.training);
    assert_int_equal(m->plan.batch, n); /* the whole batch: training has no tiles */
    const double loss = kc_history_epoch(h, 0)->loss;
    kc_history_destroy(h);
    kc_dataset_destroy(d);
    return loss;
}

static void test_predict_matches_whole(void **state) {
    (void)state;
    enum { N = 1037, BATCH = 500, TRAIN = 64 };
    kc_model *a = cnn(1), *b = cnn(0);
    float *x = malloc(sizeof(float) * N * 784), *ya = malloc(sizeof(float) * N * 10);
    float *yb = malloc(sizeof(float) * N * 10);
    int32_t labels[TRAIN];
    assert_non_null(x), assert_non_null(ya), assert_non_null(yb);
    unsigned s = 11;
    for (int i = 0; i < N * 784; i++) x[i] = rnd(&s);
    for (int i = 0; i < TRAIN; i++) labels[i] = i % 10;
    assert_int_equal(kc_predict(a, x, N, BATCH, ya), KC_STATUS_OK);
    assert_false(a->plan.training);
    assert_int_equal(a->plan.batch, 36); /* 500: 14 tiles of 36 (the last 32) */
    assert_int_equal(kc_predict(b, x, N, BATCH, yb), KC_STATUS_OK);
    assert_int_equal(b->plan.batch, BATCH);
    double d = 0;
    for (int i = 0; i < N * 10; i++) d = fmax(d, fabs((double)ya[i] - (double)yb[i]));
    if (d > 1e-5) fail_msg("tiled and whole-batch predictions differ by %g", d);
    for (int j = 0; j < 10; j++) assert_true(ya[(N - 1) * 10 + j] > 0.0f); /* the last rows were written */
    const double la = train_loss(a, x, labels, TRAIN), lb = train_loss(b, x, labels, TRAIN);
    assert_true(fabs(la - lb) <= 1e-5 * fabs(lb));
    free(x), free(ya), free(yb);
    kc_model_destroy(a);
    kc_model_destroy(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_size),
        cmocka_unit_test(test_predict_matches_whole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
