/* test_labels.c — every kind of labels kc_fit / kc_evaluate take, against real Keras 3:
 * binary heads (sigmoid, logits), one-hot and soft targets, per-pixel masks (N, H, W) and
 * (N, H, W, 1), per-pixel binary masks, regression targets. For each case of
 * tests/fixtures/labels (make_label_fixtures.py), the model Keras saved, the labels as a
 * user saves them (.npy), Keras's evaluate() loss and accuracy on the whole batch, and its
 * predictions after one SGD step on that batch: kerac must give the same three. Then the
 * errors for labels that do not fit the output and loss, and label tensors through the
 * validation split and shuffling. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kerac.h"

static const char *const k_cases[] = {"binary_sigmoid", "binary_logits",      "onehot_cce",
                                      "soft_cce_logits", "mask_sparse",       "mask_sparse_logits",
                                      "mask_binary",    "pixel_mse",          "vector_mae"};

static void case_path(char *buf, size_t n, const char *name, const char *file) {
    const char *src = getenv("KERAC_SOURCE_DIR");
    snprintf(buf, n, "%s/tests/fixtures/labels/%s/%s", src ? src : "..", name, file);
}

static kc_dataset *open_npy(const char *name, const char *x, const char *y) {
    char a[1024], b[1024], spec[2100];
    case_path(a, sizeof a, name, x);
    case_path(b, sizeof b, name, y);
    snprintf(spec, sizeof spec, "npy:%s,%s", a, b);
    kc_dataset *d = NULL;
    kc_status s = kc_dataset_open(spec, &d);
    if (s) fprintf(stderr, "%s: %s\n", spec, kc_last_error());
    assert_int_equal(s, KC_STATUS_OK);
    return d;
}

static void run_case(const char *name) {
    char path[1024];
    case_path(path, sizeof path, name, "keras.json");
    json_error_t jerr;
    json_t *meta = json_load_file(path, 0, &jerr);
    assert_non_null(meta);
    const char *loss = json_string_value(json_object_get(meta, "loss_name"));
    int logits = json_is_true(json_object_get(meta, "from_logits"));
    double want_loss = json_number_value(json_object_get(meta, "loss"));
    double want_acc = json_number_value(json_object_get(meta, "accuracy"));
    double lr = json_number_value(json_object_get(meta, "lr"));

    kc_model *m = NULL;
    case_path(path, sizeof path, name, "model.keras");
    assert_int_equal(kc_model_load(path, &m), KC_STATUS_OK);
    kc_dataset *d = open_npy(name, "x.npy", "y.npy");
    int64_t n = kc_dataset_size(d);
    kc_compile_opts co = {.optimizer = KC_SGD(.learning_rate = lr), .loss = loss,
                          .from_logits = logits ? KC_TRUE : KC_DEFAULT, .metrics = {"accuracy"}};
    assert_int_equal(kc_compile(m, &co), KC_STATUS_OK);

    kc_eval_result r;
    kc_status s = kc_evaluate(m, d, (int)n, &r);
    if (s) fprintf(stderr, "%s: %s\n", name, kc_last_error());
    assert_int_equal(s, KC_STATUS_OK);
    printf("%-20s loss kerac %.7f keras %.7f  accuracy kerac %.6f keras %.6f\n", name, r.loss, want_loss,
           r.metrics[0], want_acc);
    assert_true(fabs(r.loss - want_loss) <= 2e-6 * fmax(1.0, fabs(want_loss)));
    assert_true(fabs(r.metrics[0] - want_acc) <= 1e-6);

    /* one SGD step on the whole batch: the gradient's scale (per position, per example) */
    kc_fit_opts fo = {.epochs = 1, .batch_size = (int)n, .shuffle = KC_FALSE};
    kc_history *h = NULL;
    s = kc_fit(m, d, &fo, &h);
    if (s) fprintf(stderr, "%s: %s\n", name, kc_last_error());
    assert_int_equal(s, KC_STATUS_OK);
    assert_true(fabs(kc_history_epoch(h, 0)->loss - want_loss) <= 2e-6 * fmax(1.0, fabs(want_loss))); /* before the step */
    kc_history_destroy(h);
    kc_dataset *after = open_npy(name, "x.npy", "after.npy"); /* Keras's predictions after the step */
    kc_shape ts = kc_dataset_target_shape(after);
    int64_t per = 1;
    for (int i = 0; i < ts.rank; i++) per *= ts.dim[i];
    kc_shape xs = kc_dataset_shape(d);
    int64_t in = 1;
    for (int i = 0; i < xs.rank; i++) in *= xs.dim[i];
    float *x = malloc((size_t)(n * in) * sizeof(float)), *want = malloc((size_t)(n * per) * sizeof(float));
    float *got = malloc((size_t)(n * per) * sizeof(float));
    assert_int_equal(kc_dataset_read(d, 0, n, x, NULL), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read_targets(after, 0, n, want), KC_STATUS_OK);
    assert_int_equal(kc_predict(m, x, n, (int)n, got), KC_STATUS_OK);
    double diff = 0, scale = 1e-12;
    for (int64_t i = 0; i < n * per; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    printf("%-20s after one SGD step: max|kerac - keras| / max|keras| = %.2g\n", name, diff / scale);
    assert_true(diff <= 1e-4 * scale);
    free(x);
    free(want);
    free(got);
    kc_dataset_destroy(after);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    json_decref(meta);
}

static void test_keras_cases(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) run_case(k_cases[i]);
}

/* ---- label tensors that do not fit: errors naming both shapes and what to do */

/* A per-pixel head (5, 6, 3) on (5, 6, 2) inputs, compiled with loss. */
static kc_model *pixel_model(const char *loss) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("pix", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {5, 6, 2}));
    kc_add(m, KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .padding = "same", .activation = "softmax"));
    kc_compile_opts co = {.loss = loss, .metrics = {"accuracy"}};
    assert_int_equal(kc_compile(m, &co), KC_STATUS_OK);
    return m;
}

static kc_status eval_with(kc_model *m, const float *t, kc_shape ts, int n) {
    float x[4 * 5 * 6 * 2] = {0};
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory_targets(x, t, n, (kc_shape){3, {5, 6, 2}}, ts, &d), KC_STATUS_OK);
    kc_eval_result r;
    kc_status s = kc_evaluate(m, d, n, &r);
    kc_dataset_destroy(d);
    return s;
}

static void expect_error(kc_status s, const char *a, const char *b) {
    assert_int_equal(s, KC_STATUS_SHAPE);
    const char *e = kc_last_error();
    if (!strstr(e, a) || !strstr(e, b)) fprintf(stderr, "message: %s\n", e);
    assert_non_null(strstr(e, a));
    assert_non_null(strstr(e, b));
}

static void test_errors(void **state) {
    (void)state;
    float t[4 * 5 * 6 * 3] = {0};
    kc_model *m = pixel_model("sparse_categorical_crossentropy");
    /* masks of another size */
    expect_error(eval_with(m, t, (kc_shape){2, {5, 5}}, 2), "(N, 5, 5)", "(N, 5, 6, 3)");
    /* fractional values are not class indices */
    t[7] = 0.5f;
    expect_error(eval_with(m, t, (kc_shape){2, {5, 6}}, 2), "not class indices", "categorical_crossentropy");
    t[7] = 3.0f; /* a class the head does not have */
    expect_error(eval_with(m, t, (kc_shape){3, {5, 6, 1}}, 2), "go up to 3", "3 classes per position");
    t[7] = 2.0f; /* fits: (N, H, W, 1) */
    assert_int_equal(eval_with(m, t, (kc_shape){3, {5, 6, 1}}, 2), KC_STATUS_OK);
    /* one class index per example for a per-pixel head */
    float x[2 * 5 * 6 * 2] = {0};
    int32_t y[2] = {0, 1};
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, 2, (kc_shape){3, {5, 6, 2}}, 0, &d), KC_STATUS_OK);
    kc_eval_result r;
    expect_error(kc_evaluate(m, d, 2, &r), "one class index per example", "(N, 5, 6, 3)");
    kc_model_destroy(m);
    /* categorical_crossentropy needs targets of the output's shape */
    m = pixel_model("categorical_crossentropy");
    expect_error(eval_with(m, t, (kc_shape){2, {5, 6}}, 2), "(N, 5, 6)", "sparse_categorical_crossentropy");
    assert_int_equal(eval_with(m, t, (kc_shape){3, {5, 6, 3}}, 2), KC_STATUS_OK);
    kc_model_destroy(m);
    m = pixel_model("mse");
    expect_error(eval_with(m, t, (kc_shape){3, {6, 5, 3}}, 2), "(N, 6, 5, 3)", "output's shape");
    kc_model_destroy(m);
    /* class-index reads of a label-tensor dataset point to the right call */
    assert_int_equal(kc_dataset_read(d, 0, 1, NULL, y), KC_STATUS_OK);
    kc_dataset_destroy(d);
    assert_int_equal(kc_dataset_from_memory_targets(x, t, 2, (kc_shape){3, {5, 6, 2}}, (kc_shape){2, {5, 6}}, &d),
                     KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(d, 0, 1, NULL, y), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "kc_dataset_read_targets"));
    kc_dataset_destroy(d);
}

/* The validation split and shuffling carry label tensors along: the split's val_loss is
 * evaluate()'s on the tail, and a shuffled epoch sees every (example, mask) pair as it is
 * (the loss before any step, at lr 0, equals evaluate()'s). */
static void test_split_and_shuffle(void **state) {
    (void)state;
    enum { N = 10 };
    float x[N * 5 * 6 * 2], t[N * 5 * 6];
    for (int i = 0; i < N * 5 * 6 * 2; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.5f;
    for (int i = 0; i < N * 5 * 6; i++) t[i] = (float)((i * 7 + i / 30) % 3);
    kc_dataset *d = NULL, *tail = NULL;
    assert_int_equal(kc_dataset_from_memory_targets(x, t, N, (kc_shape){3, {5, 6, 2}}, (kc_shape){2, {5, 6}}, &d),
                     KC_STATUS_OK);
    assert_int_equal(kc_dataset_slice(d, 8, 2, &tail), KC_STATUS_OK);
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("pix", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {5, 6, 2}));
    kc_add(m, KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .padding = "same", .activation = "softmax"));
    kc_compile_opts co = {.optimizer = KC_SGD(.learning_rate = 1e-30), .loss = "sparse_categorical_crossentropy",
                          .metrics = {"accuracy"}};
    assert_int_equal(kc_compile(m, &co), KC_STATUS_OK);
    kc_eval_result all, val;
    assert_int_equal(kc_evaluate(m, d, 3, &all), KC_STATUS_OK);
    assert_int_equal(kc_evaluate(m, tail, 2, &val), KC_STATUS_OK);
    kc_dataset *head = NULL;
    assert_int_equal(kc_dataset_slice(d, 0, 8, &head), KC_STATUS_OK);
    kc_eval_result tr;
    assert_int_equal(kc_evaluate(m, head, 8, &tr), KC_STATUS_OK);
    kc_fit_opts fo = {.epochs = 1, .batch_size = 8, .validation_split = 0.2, .seed = 3};
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &fo, &h), KC_STATUS_OK);
    printf("val_loss %.7f evaluate(tail) %.7f; shuffled loss %.7f evaluate(head) %.7f\n", kc_history_epoch(h, 0)->val_loss,
           val.loss, kc_history_epoch(h, 0)->loss, tr.loss);
    assert_true(fabs(kc_history_epoch(h, 0)->val_loss - val.loss) < 1e-5);
    assert_true(fabs(kc_history_epoch(h, 0)->val_metrics[0] - val.metrics[0]) < 1e-6);
    assert_true(fabs(kc_history_epoch(h, 0)->loss - tr.loss) < 1e-5);
    assert_true(fabs(kc_history_epoch(h, 0)->metrics[0] - tr.metrics[0]) < 1e-6);
    assert_true(fabs(all.loss - (8 * tr.loss + 2 * val.loss) / 10) < 1e-5);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(head);
    kc_dataset_destroy(tail);
    kc_dataset_destroy(d);
}

/* The loss of a file's Keras compile_config: BinaryCrossentropy(from_logits=True) as an
 * object, "sparse_categorical_crossentropy" as a name (from its .json config too). */
static void test_saved_loss(void **state) {
    (void)state;
    char path[1024];
    const char *loss = NULL;
    int logits = -1;
    kc_model *m = NULL;
    case_path(path, sizeof path, "binary_logits", "compiled.keras");
    assert_int_equal(kc_model_load(path, &m), KC_STATUS_OK);
    assert_int_equal(kc_model_saved_loss(m, &loss, &logits), 1);
    assert_string_equal(loss, "binary_crossentropy");
    assert_int_equal(logits, 1);
    kc_model_destroy(m);
    case_path(path, sizeof path, "binary_logits", "model.keras"); /* saved before compile */
    assert_int_equal(kc_model_load(path, &m), KC_STATUS_OK);
    assert_int_equal(kc_model_saved_loss(m, &loss, &logits), 0);
    kc_model_destroy(m);
    const char *json = "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": ["
                       "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 3], \"name\": \"in\"}}, "
                       "{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}}]}, "
                       "\"compile_config\": {\"loss\": \"sparse_categorical_crossentropy\", \"optimizer\": \"adam\"}}";
    assert_int_equal(kc_model_from_json(json, strlen(json), &m), KC_STATUS_OK);
    assert_int_equal(kc_model_saved_loss(m, &loss, &logits), 1);
    assert_string_equal(loss, "sparse_categorical_crossentropy");
    assert_int_equal(logits, 0);
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keras_cases),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_split_and_shuffle),
        cmocka_unit_test(test_saved_loss),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
