/* test_infer_tile.c — inference in tiles of the batch (src/model/tile.c, kc_predict in fit.c):
 *   tile_size             the tile the default CNN gets at batch 1000 (its first pooling's input
 *                         + output fit the CPU's budget 38 times: 27 tiles of 38), no
 *                         tiles when switched off (kc_device_opts.cpu_infer_tile = KC_FALSE),
 *                         for small batches, or for a model whose weights fill the budget
 *   predict_matches_whole the default CNN with and without tiles, the same seed: predict on
 *                         1,037 images at batch 500 (a partial last batch and a partial last
 *                         tile) gives the same probabilities, and the tiled model's inference
 *                         plan really is a tile; a training step afterwards plans the whole
 *                         batch (training never runs in tiles) and gives both the same loss
 *   evaluate_matches_whole evaluate (infer-b: in tiles too) on 1,037 labelled images at batch
 *                         500: the same loss and accuracy within 1e-5, the tiled model's plan a
 *                         tile of 36
 *   memory_plan_counts_tile the inference memory plan (kc_model_plan_memory, `kerac summary`)
 *                         at batch 1000 is the tile's (38): the same arena as a batch of 38,
 *                         far less than the untiled model's; training's plan keeps its batch */
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
                                                     .metrics = {"accuracy"}, .optimizer = KC_SGD(.learning_rate = 0.01)}),
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

static kc_dataset *labelled(int n, unsigned seed, float **x_out, int32_t **y_out) {
    float *x = malloc(sizeof(float) * (size_t)n * 784);
    int32_t *y = malloc(sizeof(int32_t) * (size_t)n);
    assert_non_null(x), assert_non_null(y);
    for (int i = 0; i < n * 784; i++) x[i] = rnd(&seed);
    for (int i = 0; i < n; i++) y[i] = (int32_t)((seed = seed * 1664525u + 1013904223u) >> 16) % 10;
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, kc__shape_make(3, (int[]){28, 28, 1}), 10, &d), KC_STATUS_OK);
    *x_out = x, *y_out = y;
    return d;
}

static void test_evaluate_matches_whole(void **state) {
    (void)state;
    enum { N = 1037, BATCH = 500 };
    kc_model *a = cnn(1), *b = cnn(0);
    float *x = NULL;
    int32_t *y = NULL;
    kc_dataset *d = labelled(N, 7, &x, &y);
    kc_eval_result ra, rb;
    assert_int_equal(kc_evaluate(a, d, BATCH, &ra), KC_STATUS_OK);
    assert_false(a->plan.training);
    assert_int_equal(a->plan.batch, 36); /* 500: 14 tiles of 36 (the last 32) */
    assert_int_equal(kc_evaluate(b, d, BATCH, &rb), KC_STATUS_OK);
    assert_int_equal(b->plan.batch, BATCH);
    assert_int_equal(ra.samples, N), assert_int_equal(rb.samples, N);
    assert_int_equal(ra.num_metrics, 1), assert_int_equal(rb.num_metrics, 1);
    if (fabs(ra.loss - rb.loss) > 1e-5 * fabs(rb.loss))
        fail_msg("tiled and whole-batch evaluate: loss %.9g vs %.9g", ra.loss, rb.loss);
    for (int i = 0; i < ra.num_metrics; i++) assert_true(fabs(ra.metrics[i] - rb.metrics[i]) <= 1e-5);
    assert_true(ra.loss > 0.5); /* untrained: near ln 10, not a sum of a few tiles */
    kc_dataset_destroy(d);
    free(x), free(y);
    kc_model_destroy(a);
    kc_model_destroy(b);
}

static void test_memory_plan_counts_tile(void **state) {
    (void)state;
    kc_model *on = cnn(1), *off = cnn(0);
    kc_memory_plan p1000, p38, whole, train_on, train_off;
    assert_int_equal(kc_model_plan_memory(on, 1000, 0, 1, &p1000), KC_STATUS_OK);
    assert_int_equal(kc_model_plan_memory(on, 38, 0, 1, &p38), KC_STATUS_OK);
    assert_int_equal(kc_model_plan_memory(off, 1000, 0, 1, &whole), KC_STATUS_OK);
    assert_int_equal(p1000.batch_size, 1000);
    assert_int_equal(p1000.tile, 38), assert_int_equal(p38.tile, 38), assert_int_equal(whole.tile, 1000);
    assert_int_equal(p1000.arena, p38.arena);
    assert_int_equal(p1000.activations, p38.activations);
    print_message("inference plan at 1000: tiles of %d, arena %zu (untiled %zu), device total %zu (untiled %zu)\n",
                  p1000.tile, p1000.arena, whole.arena, p1000.device_total, whole.device_total);
    assert_true(p1000.activations * 20 < whole.activations); /* 1000 / 38: 26x fewer activations */
    assert_true(p1000.arena * 10 < whole.arena);               /* less so with the workspace */
    assert_true(p1000.device_total < whole.device_total);
    /* training plans the whole batch, tiles or not */
    assert_int_equal(kc_model_plan_memory(on, 256, 1, 1, &train_on), KC_STATUS_OK);
    assert_int_equal(kc_model_plan_memory(off, 256, 1, 1, &train_off), KC_STATUS_OK);
    assert_int_equal(train_on.tile, 256);
    assert_int_equal(train_on.arena, train_off.arena);
    kc_model_destroy(on);
    kc_model_destroy(off);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tile_size),
        cmocka_unit_test(test_predict_matches_whole),
        cmocka_unit_test(test_evaluate_matches_whole),
        cmocka_unit_test(test_memory_plan_counts_tile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
