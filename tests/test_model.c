/* The model API: builders and their errors, compile, fit on learnable synthetic data,
 * history, callbacks, evaluate/predict agreement, weights, schedules, reproducibility. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "model/model.h"

/* ---- helpers */

/* Two Gaussian-ish blobs per class in 8 dimensions: linearly separable. */
static kc_dataset *blobs(int n, int classes, uint64_t seed) {
    float *x = malloc((size_t)n * 8 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    kc_rng r;
    kc__rng_seed(&r, seed);
    for (int i = 0; i < n; i++) {
        y[i] = i % classes;
        for (int d = 0; d < 8; d++) x[i * 8 + d] = (float)(0.3 * kc__rng_normal(&r) + (d == y[i] ? 1.5 : 0.0));
    }
    kc_dataset *ds = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, (kc_shape){1, {8}}, classes, &ds), KC_STATUS_OK);
    free(x);
    free(y);
    return ds;
}

static kc_model *mlp(int classes, const char *out_act) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("mlp", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {8}));
    kc_add(m, KC_DENSE(.units = 16, .activation = "relu"));
    assert_int_equal(kc_add(m, KC_DENSE(.units = classes, .activation = out_act)), KC_STATUS_OK);
    return m;
}

/* ---- builders */

static void test_builder_errors_are_sticky(void **state) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential(NULL, &m), KC_STATUS_OK);
    assert_string_equal(kc_model_name(m), "sequential");
    /* first layer must be an input */
    assert_int_equal(kc_add(m, KC_DENSE(.units = 3)), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KC_INPUT"));
    /* later calls fail with the first error, and compile reports it */
    assert_int_equal(kc_add(m, KC_INPUT(.shape = {4})), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KC_INPUT"));
    assert_int_equal(kc_model_status(m), KC_STATUS_INVALID_ARGUMENT);
    kc_model_destroy(m);
}

/* kc__error_save / kc__error_restore: a probe that fails in between leaves the caller's
 * message as it was, even one of the longest length. */
static void test_saved_error(void **state) {
    char longest[KC_ERROR_MAX];
    memset(longest, 'x', sizeof longest - 1);
    longest[sizeof longest - 1] = '\0';
    const char *texts[] = {"", "loading 'a.keras': no such file", longest};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        kc__fail(KC_STATUS_IO, "%s", texts[i]);
        kc__saved_error saved;
        kc__error_save(&saved);
        kc_log_level l;
        assert_int_not_equal(kc_log_level_parse("loud", &l), KC_STATUS_OK); /* a probe that fails */
        assert_string_not_equal(kc_last_error(), texts[i]);
        kc__error_restore(&saved);
        assert_string_equal(kc_last_error(), texts[i]);
    }
}

static void test_auto_names_and_duplicates(void **state) {
    kc_model *m = NULL;
    kc_sequential("n", &m);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_DENSE(.units = 3));
    kc_add(m, KC_DENSE(.units = 3));
    kc_add(m, KC_DENSE(.units = 2, .name = "head"));
    kc_layer_info li;
    assert_int_equal(kc_model_layer_info(m, 1, &li), KC_STATUS_OK);
    assert_string_equal(li.name, "dense");
    assert_int_equal(kc_model_layer_info(m, 2, &li), KC_STATUS_OK);
    assert_string_equal(li.name, "dense_1");
    assert_int_equal(li.params, 3 * 3 + 3);
    kc_model_destroy(m);

    kc_functional("dup", &m);
    kc_node x = kc_input(m, KC_INPUT(.shape = {4}));
    kc_node a = kc_apply(m, KC_DENSE(.units = 3, .name = "same"), x);
    kc_node b = kc_apply(m, KC_DENSE(.units = 3, .name = "same"), a);
    assert_true(a >= 0);
    assert_true(b < 0);
    assert_non_null(strstr(kc_model_error(m), "'same' is used twice"));
    kc_model_destroy(m);
}

static void test_shape_errors(void **state) {
    kc_model *m = NULL;
    kc_functional("bad_add", &m);
    kc_node x = kc_input(m, KC_INPUT(.shape = {4}));
    kc_node a = kc_apply(m, KC_DENSE(.units = 3), x);
    kc_node b = kc_apply(m, KC_DENSE(.units = 5), x);
    kc_node s = kc_merge(m, KC_ADD(), (kc_node[]){a, b}, 2);
    kc_set_output(m, s);
    assert_int_equal(kc_model_build(m), KC_STATUS_SHAPE);
    kc_model_destroy(m);

    /* a layer that feeds nothing */
    kc_functional("dangling", &m);
    x = kc_input(m, KC_INPUT(.shape = {4}));
    a = kc_apply(m, KC_DENSE(.units = 3), x);
    b = kc_apply(m, KC_DENSE(.units = 2), x);
    kc_set_output(m, b);
    assert_int_equal(kc_model_build(m), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "feeds nothing"));
    kc_model_destroy(m);
}

static void test_compile_errors(void **state) {
    kc_model *m = mlp(3, "softmax");
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "hinge"}), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "hinge"));
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "adagrad"}}), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "adagrad"));
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.metrics = {"f1"}}), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.momentum = 1.5)}), KC_STATUS_INVALID_ARGUMENT);
    kc_dataset *d = blobs(64, 3, 1);
    kc_history *h = NULL;
    /* fit before a successful compile */
    assert_int_equal(kc_fit(m, d, NULL, &h), KC_STATUS_STATE);
    assert_non_null(strstr(kc_last_error(), "kc_compile"));
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

static void test_data_mismatch(void **state) {
    kc_model *m = mlp(3, "softmax");
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_OK);
    kc_dataset *d = blobs(40, 5, 2); /* labels up to 4, model has 3 outputs */
    assert_int_equal(kc_fit(m, d, NULL, NULL), KC_STATUS_SHAPE);
    assert_non_null(strstr(kc_last_error(), "labels go up to 4"));
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

/* ---- training */

static void test_fit_learns_and_history(void **state) {
    kc_dataset *d = blobs(600, 4, 3);
    const char *opts[] = {"sgd", "adam", "adamw", "rmsprop"};
    for (int i = 0; i < 4; i++) {
        kc_model *m = mlp(4, "softmax");
        kc_optimizer_opts o = {.name = opts[i], .learning_rate = i == 0 ? 0.1 : 0.01, .momentum = i == 0 ? 0.9 : 0};
        assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = o, .metrics = {"accuracy", "top_k_accuracy"},
                                                          .top_k = 2}),
                         KC_STATUS_OK);
        kc_history *h = NULL;
        kc_status s = kc_fit(m, d, &(kc_fit_opts){.epochs = 5, .batch_size = 32, .validation_split = 0.2, .seed = 9}, &h);
        assert_int_equal(s, KC_STATUS_OK);
        assert_int_equal(kc_history_epochs(h), 5);
        assert_string_equal(kc_history_metric_name(h, 0), "accuracy");
        assert_string_equal(kc_history_metric_name(h, 1), "top_k_accuracy");
        const kc_epoch_logs *first = kc_history_epoch(h, 0), *last = kc_history_epoch(h, 4);
        assert_true(last->loss < first->loss);
        assert_true(last->has_val);
        if (last->val_metrics[0] < 0.95) fail_msg("%s: val accuracy %g < 0.95", opts[i], last->val_metrics[0]);
        assert_true(last->val_metrics[1] >= last->val_metrics[0]);
        assert_int_equal(last->steps, (480 + 31) / 32);
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    kc_dataset_destroy(d);
}

/* KC_PREFETCH_NONE: no loader thread, the training thread gathers each batch; the same
 * batches in the same order, so the same losses to the bit as with the loader thread. */
static void test_fit_prefetch_none(void **state) {
    kc_dataset *d = blobs(300, 4, 3);
    double loss[2][3];
    for (int v = 0; v < 2; v++) {
        kc_model *m = mlp(4, "softmax");
        assert_int_equal(kc_compile(m, NULL), KC_STATUS_OK);
        kc_history *h = NULL;
        assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 3, .batch_size = 16, .seed = 5,
                                                     .prefetch = v ? KC_PREFETCH_NONE : 0}, &h),
                         KC_STATUS_OK);
        for (int e = 0; e < 3; e++) loss[v][e] = kc_history_epoch(h, e)->loss;
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    for (int e = 0; e < 3; e++)
        if (loss[0][e] != loss[1][e]) fail_msg("epoch %d: loss %.9g with the loader thread, %.9g without", e, loss[0][e], loss[1][e]);
    kc_model *m = mlp(4, "softmax");
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_OK);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.prefetch = -2}, NULL), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "KC_PREFETCH_NONE"));
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_binary_and_regression_losses(void **state) {
    kc_dataset *d = blobs(400, 2, 4);
    const char *losses[] = {"binary_crossentropy", "mean_squared_error", "mean_absolute_error"};
    for (int i = 0; i < 3; i++) {
        kc_model *m = mlp(1, i == 0 ? "sigmoid" : "linear");
        assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = losses[i], .metrics = {"accuracy"},
                                                          .optimizer = KC_ADAM(.learning_rate = 0.01)}),
                         KC_STATUS_OK);
        kc_history *h = NULL;
        assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 6, .batch_size = 16}, &h), KC_STATUS_OK);
        const kc_epoch_logs *last = kc_history_epoch(h, kc_history_epochs(h) - 1);
        if (last->metrics[0] < 0.9) fail_msg("%s: accuracy %g < 0.9", losses[i], last->metrics[0]);
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    kc_dataset_destroy(d);
}

static void test_predict_matches_evaluate(void **state) {
    kc_dataset *d = blobs(100, 3, 5);
    kc_model *m = mlp(3, "softmax");
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.metrics = {"accuracy"}}), KC_STATUS_OK);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 10}, NULL), KC_STATUS_OK);
    float *x = malloc(100 * 8 * sizeof(float)), *y = malloc(100 * 3 * sizeof(float));
    int32_t lab[100];
    assert_int_equal(kc_dataset_read(d, 0, 100, x, lab), KC_STATUS_OK);
    assert_int_equal(kc_predict(m, x, 100, 7, y), KC_STATUS_OK);
    double loss = 0;
    int correct = 0;
    for (int i = 0; i < 100; i++) {
        double s = y[i * 3] + y[i * 3 + 1] + y[i * 3 + 2];
        assert_true(fabs(s - 1.0) < 1e-4); /* softmax applied in predict */
        int am = 0;
        for (int c = 1; c < 3; c++)
            if (y[i * 3 + c] > y[i * 3 + am]) am = c;
        correct += am == lab[i];
        loss += -log(fmax(y[i * 3 + lab[i]], 1e-7));
    }
    kc_eval_result r;
    assert_int_equal(kc_evaluate(m, d, 16, &r), KC_STATUS_OK);
    assert_int_equal(r.samples, 100);
    assert_true(fabs(r.loss - loss / 100) < 1e-3);
    assert_true(fabs(r.metrics[0] - correct / 100.0) < 1e-9);
    free(x);
    free(y);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

static void test_reproducible_with_seed(void **state) {
    kc_dataset *d = blobs(200, 3, 6);
    float w[2][8 * 16];
    for (int run = 0; run < 2; run++) {
        kc_model *m = mlp(3, "softmax");
        kc_model_set_seed(m, 77);
        kc_compile(m, NULL);
        assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 16, .seed = 5}, NULL), KC_STATUS_OK);
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(m, 0, &wi), KC_STATUS_OK);
        assert_string_equal(wi.name, "kernel");
        assert_int_equal(wi.size, 8 * 16);
        assert_int_equal(kc_model_get_weight(m, 0, w[run], wi.size), KC_STATUS_OK);
        kc_model_destroy(m);
    }
    assert_memory_equal(w[0], w[1], sizeof w[0]);
    kc_dataset_destroy(d);
}

/* ---- callbacks */

typedef struct counter {
    int batches, epochs, stop_at_epoch;
} counter;
static kc_callback_action cnt_batch(kc_model *m, const kc_batch_logs *l, void *u) {
    ((counter *)u)->batches++;
    return KC_CONTINUE;
}
static kc_callback_action cnt_epoch(kc_model *m, const kc_epoch_logs *l, void *u) {
    counter *c = u;
    c->epochs++;
    return l->epoch + 1 >= c->stop_at_epoch ? KC_STOP_TRAINING : KC_CONTINUE;
}

static void test_user_callback_stops(void **state) {
    kc_dataset *d = blobs(64, 2, 7);
    kc_model *m = mlp(2, "softmax");
    kc_compile(m, NULL);
    counter c = {.stop_at_epoch = 2};
    kc_callback cb = {.name = "mine", .user = &c, .on_batch_end = cnt_batch, .on_epoch_end = cnt_epoch};
    kc_callback *cbs[] = {&cb};
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 10, .batch_size = 16, .callbacks = cbs, .num_callbacks = 1}, &h),
                     KC_STATUS_OK);
    assert_int_equal(c.epochs, 2);
    assert_int_equal(c.batches, 8);
    assert_int_equal(kc_history_epochs(h), 2);
    assert_string_equal(kc_history_stop_reason(h), "mine");
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_early_stopping_and_reduce_lr(void **state) {
    kc_dataset *d = blobs(200, 2, 8);
    kc_model *m = mlp(2, "softmax");
    /* lr 0 is not allowed; a tiny lr makes val_loss plateau within min_delta */
    kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 1e-9)});
    kc_callback *es = NULL, *rl = NULL;
    assert_int_equal(kc_early_stopping(&(kc_early_stopping_opts){.patience = 2, .min_delta = 1e-3}, &es), KC_STATUS_OK);
    assert_int_equal(kc_reduce_lr_on_plateau(&(kc_reduce_lr_opts){.patience = 1, .factor = 0.5}, &rl), KC_STATUS_OK);
    kc_callback *cbs[] = {rl, es};
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 20, .batch_size = 50, .validation_split = 0.25,
                                                 .callbacks = cbs, .num_callbacks = 2}, &h),
                     KC_STATUS_OK);
    /* epoch 0 sets the best; epochs 1 and 2 do not improve by 1e-3: stop after epoch 2 */
    assert_int_equal(kc_history_epochs(h), 3);
    assert_string_equal(kc_history_stop_reason(h), "EarlyStopping");
    /* ReduceLROnPlateau halved the rate after each non-improving epoch */
    double lr0 = kc_history_epoch(h, 0)->lr, lr2 = kc_history_epoch(h, 2)->lr;
    assert_true(fabs(lr2 / lr0 - 0.5) < 1e-6);
    kc_history_destroy(h);
    kc_callback_destroy(es);
    kc_callback_destroy(rl);
    assert_int_equal(kc_early_stopping(&(kc_early_stopping_opts){.mode = "sideways"}, &es), KC_STATUS_INVALID_ARGUMENT);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_terminate_on_nan(void **state) {
    kc_dataset *d = blobs(64, 2, 9);
    kc_model *m = mlp(2, "linear");
    /* an absurd learning rate with MSE diverges to inf/nan */
    kc_compile(m, &(kc_compile_opts){.loss = "mse", .optimizer = KC_SGD(.learning_rate = 1e6)});
    kc_callback *tn = NULL;
    kc_terminate_on_nan(&tn);
    kc_callback *cbs[] = {tn};
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 50, .batch_size = 8, .callbacks = cbs, .num_callbacks = 1}, &h),
                     KC_STATUS_OK);
    assert_true(kc_history_epochs(h) < 50);
    assert_string_equal(kc_history_stop_reason(h), "TerminateOnNaN");
    kc_history_destroy(h);
    kc_callback_destroy(tn);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---- schedules (Keras formulas) */

static void test_schedules(void **state) {
    kc_model *m = mlp(2, "softmax");
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.1,
                                                                             .schedule = "exponential_decay",
                                                                             .decay_steps = 10, .decay_rate = 0.5)}),
                     KC_STATUS_OK);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 0) - 0.1) < 1e-12);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 5) - 0.1 * pow(0.5, 0.5)) < 1e-12);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 20) - 0.025) < 1e-12);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.1,
                                                                             .schedule = "exponential_decay",
                                                                             .decay_steps = 10, .decay_rate = 0.5,
                                                                             .staircase = KC_TRUE)}),
                     KC_STATUS_OK);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 15) - 0.05) < 1e-12);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 0.2, .schedule = "cosine_decay",
                                                                              .decay_steps = 100, .alpha = 0.1)}),
                     KC_STATUS_OK);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 50) - 0.2 * (0.9 * 0.5 + 0.1)) < 1e-9);
    assert_true(fabs(kc__optimizer_lr(&m->opt, 500) - 0.02) < 1e-9);
    int64_t bounds[] = {10, 20};
    double vals[] = {1.0, 0.5, 0.1};
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.schedule = "piecewise_constant",
                                                                             .num_boundaries = 2, .boundaries = bounds,
                                                                             .values = vals)}),
                     KC_STATUS_OK);
    assert_true(kc__optimizer_lr(&m->opt, 10) == 1.0);
    assert_true(kc__optimizer_lr(&m->opt, 11) == 0.5);
    assert_true(kc__optimizer_lr(&m->opt, 21) == 0.1);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.schedule = "cosine_decay")}),
                     KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "decay_steps"));
    kc_model_destroy(m);
}

/* Keras defaults of the optimizers */
static void test_optimizer_defaults(void **state) {
    kc_model *m = mlp(2, "softmax");
    kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "sgd"}});
    assert_true(m->opt.opts.learning_rate == 0.01);
    kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "adamw"}});
    assert_true(m->opt.opts.learning_rate == 0.001 && m->opt.opts.beta_1 == 0.9 && m->opt.opts.beta_2 == 0.999 &&
                m->opt.opts.epsilon == 1e-7 && m->opt.opts.weight_decay == 0.004);
    kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "rmsprop"}});
    assert_true(m->opt.opts.rho == 0.9 && m->opt.opts.learning_rate == 0.001);
    kc_model_destroy(m);
}

/* clipnorm clips each weight's gradient by its own norm (Keras), global_clipnorm all of
 * them by their joint norm. With plain SGD and lr 1 the step is the (clipped) gradient:
 * the unclipped step gives the gradients, and the clipped ones must follow from them. */
static void one_sgd_step(double clipnorm, double global_clipnorm, float *w, int64_t *sizes, int *nw) {
    kc_dataset *d = blobs(32, 3, 11);
    kc_model *m = mlp(3, "softmax");
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 1.0, .clipnorm = clipnorm,
                                                                          .global_clipnorm = global_clipnorm)}),
                     KC_STATUS_OK);
    int64_t at = 0;
    *nw = kc_model_num_weights(m);
    float *before = malloc(4096 * sizeof(float));
    for (int i = 0; i < *nw; i++) {
        kc_weight_info wi;
        kc_model_weight_info(m, i, &wi);
        kc_model_get_weight(m, i, before + at, wi.size);
        sizes[i] = wi.size;
        at += wi.size;
    }
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 32, .shuffle = KC_FALSE}, NULL),
                     KC_STATUS_OK);
    at = 0;
    for (int i = 0; i < *nw; i++) {
        kc_model_get_weight(m, i, w + at, sizes[i]);
        for (int64_t j = 0; j < sizes[i]; j++) w[at + j] = before[at + j] - w[at + j]; /* the step */
        at += sizes[i];
    }
    free(before);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_gradient_clipping(void **state) {
    static float g[4096], per[4096], glob[4096];
    int64_t sizes[8];
    int nw = 0;
    one_sgd_step(0, 0, g, sizes, &nw);
    double norms[8] = {0}, total = 0;
    int64_t at = 0;
    for (int i = 0; i < nw; i++) {
        double ss = 0;
        for (int64_t j = 0; j < sizes[i]; j++) ss += (double)g[at + j] * g[at + j];
        norms[i] = sqrt(ss);
        total += ss;
        at += sizes[i];
    }
    total = sqrt(total);
    /* a bound between the smallest and largest weight norms: some clipped, some not */
    double lo = norms[0], hi = norms[0];
    for (int i = 1; i < nw; i++) lo = fmin(lo, norms[i]), hi = fmax(hi, norms[i]);
    assert_true(hi > 1.5 * lo);
    double c = sqrt(lo * hi);
    one_sgd_step(c, 0, per, sizes, &nw);
    one_sgd_step(0, c, glob, sizes, &nw);
    at = 0;
    int clipped = 0;
    for (int i = 0; i < nw; i++) {
        double scale = norms[i] > c ? c / norms[i] : 1.0;
        clipped += norms[i] > c;
        for (int64_t j = 0; j < sizes[i]; j++) {
            double e = g[at + j] * scale, eg = g[at + j] * (total > c ? c / total : 1.0);
            if (fabs(per[at + j] - e) > 1e-5 * (1 + fabs(e)))
                fail_msg("clipnorm: weight %d[%lld] stepped %g, expected %g", i, (long long)j, per[at + j], e);
            if (fabs(glob[at + j] - eg) > 1e-5 * (1 + fabs(eg)))
                fail_msg("global_clipnorm: weight %d[%lld] stepped %g, expected %g", i, (long long)j, glob[at + j], eg);
        }
        at += sizes[i];
    }
    assert_true(clipped > 0 && clipped < nw);
    /* both at once is Keras's error too */
    kc_model *m = mlp(3, "softmax");
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.clipnorm = 1, .global_clipnorm = 1)}),
                     KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "choose one"));
    kc_model_destroy(m);
}

/* Dropout is the identity outside training: its output is its input's memory (no copy,
 * no mask), and predictions do not depend on it. */
static void test_dropout_alias_in_inference(void **state) {
    kc_model *m = NULL;
    kc_sequential("drop", &m);
    kc_add(m, KC_INPUT(.shape = {8}));
    kc_add(m, KC_DENSE(.units = 16, .activation = "relu"));
    kc_add(m, KC_DROPOUT(.rate = 0.5));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 3, .activation = "softmax")), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(m, 4, false), KC_STATUS_OK);
    assert_true(m->plan.y_off[2] == m->plan.y_off[1] && m->plan.aux_off[2] == KC_PLAN_NONE);
    assert_int_equal(kc__model_prepare(m, 4, true), KC_STATUS_OK);
    assert_true(m->plan.y_off[2] != m->plan.y_off[1] && m->plan.aux_off[2] != KC_PLAN_NONE); /* training: a mask */
    float x[4 * 8], y1[4 * 3], y2[4 * 3];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 7) - 3.0f;
    assert_int_equal(kc_predict(m, x, 4, 4, y1), KC_STATUS_OK);
    assert_int_equal(kc_predict(m, x, 4, 2, y2), KC_STATUS_OK);
    assert_memory_equal(y1, y2, sizeof y1);
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builder_errors_are_sticky),
        cmocka_unit_test(test_saved_error),
        cmocka_unit_test(test_auto_names_and_duplicates),
        cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_compile_errors),
        cmocka_unit_test(test_data_mismatch),
        cmocka_unit_test(test_fit_learns_and_history),
        cmocka_unit_test(test_fit_prefetch_none),
        cmocka_unit_test(test_binary_and_regression_losses),
        cmocka_unit_test(test_predict_matches_evaluate),
        cmocka_unit_test(test_reproducible_with_seed),
        cmocka_unit_test(test_user_callback_stops),
        cmocka_unit_test(test_early_stopping_and_reduce_lr),
        cmocka_unit_test(test_terminate_on_nan),
        cmocka_unit_test(test_schedules),
        cmocka_unit_test(test_optimizer_defaults),
        cmocka_unit_test(test_gradient_clipping),
        cmocka_unit_test(test_dropout_alias_in_inference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
