/* test_observe.c — seeing a run from inside: the numerics check (a NaN injected into a
 * chosen layer's forward output, at a chosen step, and into a chosen layer's backward
 * output through a backend wrapper, is found and named; a healthy run is unchanged by the
 * check; without it nothing stops) and the trace API (the steps asked for, every layer's
 * forward and backward in each, valid JSON). */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "model/model.h"

/* ---- a CPU backend whose dropout backward writes a NaN: a fault in one layer's backward */
static kc_backend *poison_inner;

static kc_status poison_dropout_backward(kc_backend *be, const float *dy, const uint8_t *mask, float *dx, int64_t n,
                                         float rate) {
    KC_TRY(poison_inner->dropout_backward(poison_inner, dy, mask, dx, n, rate));
    dx[n / 2] = NAN;
    return KC_STATUS_OK;
}

static void poison_destroy(kc_backend *be) {
    poison_inner->destroy(poison_inner);
    free(be);
}

static kc_backend *poison_backend(void) {
    assert_int_equal(kc_backend_cpu_create(&poison_inner), KC_STATUS_OK);
    kc_backend *be = malloc(sizeof *be);
    *be = *poison_inner;
    be->destroy = poison_destroy;
    be->dropout_backward = poison_dropout_backward;
    return be;
}

/* 'hidden' is tanh: a ReLU would turn a NaN pre-activation into 0 in the forward output
 * (the check then finds it in the backward pass, where the NaN weight meets the gradient) */
static kc_model *small_cnn(bool poison) {
    kc_model *m = NULL;
    kc_sequential("observe_cnn", &m);
    if (poison) m->be = poison_backend();
    kc_add(m, KC_INPUT(.shape = {12, 12, 1}));
    kc_add(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_MAXPOOL2D());
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.25));
    kc_add(m, KC_DENSE(.name = "hidden", .units = 16, .activation = "tanh"));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 4, .activation = "softmax")), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(), .metrics = {"accuracy"}}), KC_STATUS_OK);
    return m;
}

static kc_dataset *images(int n) {
    float *x = malloc((size_t)n * 144 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    uint64_t seed = 7;
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)(i * 7 % 4);
        for (int j = 0; j < 144; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            x[i * 144 + j] = 0.5f * (float)((seed >> 40) & 0xffff) / 65536.0f + (j % 4 == y[i] ? 0.5f : 0.0f);
        }
    }
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, (kc_shape){3, {12, 12, 1}}, 4, &d), KC_STATUS_OK);
    free(x);
    free(y);
    return d;
}

/* A callback that writes a NaN into layer 'hidden''s kernel after a given step. */
typedef struct injector {
    int64_t after_step; /* 0-based step of epoch 0 */
} injector;

static kc_callback_action inject_nan(kc_model *m, const kc_batch_logs *b, void *user) {
    injector *in = user;
    if (b->epoch != 0 || b->step != in->after_step) return KC_CONTINUE;
    for (int i = 0, n = kc_model_num_weights(m); i < n; i++) {
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(m, i, &wi), KC_STATUS_OK);
        if (strcmp(wi.layer, "hidden") || strcmp(wi.name, "kernel")) continue;
        float *w = malloc((size_t)wi.size * sizeof(float));
        assert_int_equal(kc_model_get_weight(m, i, w, wi.size), KC_STATUS_OK);
        w[5] = NAN;
        assert_int_equal(kc_model_set_weight(m, i, w, wi.size), KC_STATUS_OK);
        free(w);
    }
    return KC_CONTINUE;
}

static kc_status fit_injected(kc_model *m, kc_dataset *d, int64_t after_step, kc_history **h) {
    injector in = {.after_step = after_step};
    kc_callback cb = {.name = "inject", .user = &in, .on_batch_end = inject_nan};
    kc_callback *cbs[1] = {&cb};
    return kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 16, .seed = 1, .callbacks = cbs, .num_callbacks = 1},
                  h);
}

static void test_numerics_forward_nan_named(void **state) {
    kc_dataset *d = images(96);
    kc_model *m = small_cnn(false);
    assert_int_equal(kc_model_set_check_numerics(m, 1), KC_STATUS_OK);
    /* NaN written after step 2 (0-based 1): step 3 is the first to see it */
    assert_int_equal(fit_injected(m, d, 1, NULL), KC_STATUS_NUMERIC);
    const char *e = kc_last_error();
    assert_non_null(strstr(e, "output of layer 'hidden' (Dense)"));
    assert_non_null(strstr(e, "training step 3"));
    assert_non_null(strstr(e, "in forward"));
    kc_model_destroy(m);
    /* without the check, nothing stops: the loss just turns NaN */
    m = small_cnn(false);
    kc_history *h = NULL;
    assert_int_equal(fit_injected(m, d, 1, &h), KC_STATUS_OK);
    assert_true(isnan(kc_history_epoch(h, 0)->loss));
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_numerics_backward_nan_named(void **state) {
    kc_dataset *d = images(64);
    kc_model *m = small_cnn(true);
    assert_int_equal(kc_model_set_check_numerics(m, 1), KC_STATUS_OK);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 16, .seed = 1}, NULL), KC_STATUS_NUMERIC);
    const char *e = kc_last_error();
    assert_non_null(strstr(e, "gradient of input 0 ('flatten') of layer 'dropout' (Dropout)"));
    assert_non_null(strstr(e, "training step 1"));
    assert_non_null(strstr(e, "in backward"));
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_numerics_healthy_run_unchanged(void **state) {
    kc_dataset *d = images(96);
    double loss[2][2];
    for (int check = 0; check < 2; check++) {
        kc_model *m = small_cnn(false);
        kc_model_set_seed(m, 4);
        assert_int_equal(kc_model_set_check_numerics(m, check), KC_STATUS_OK);
        kc_history *h = NULL;
        kc_status s = kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 16, .validation_split = 0.25, .seed = 2}, &h);
        assert_int_equal(s, KC_STATUS_OK);
        loss[check][0] = kc_history_epoch(h, 1)->loss;
        loss[check][1] = kc_history_epoch(h, 1)->val_loss;
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    assert_memory_equal(loss[0], loss[1], sizeof loss[0]);
    kc_dataset_destroy(d);
}

static void test_trace_steps(void **state) {
    kc_dataset *d = images(96); /* 6 steps of 16 */
    kc_model *m = small_cnn(false);
    char path[64];
    snprintf(path, sizeof path, "trace-%d.json", (int)getpid());
    assert_int_equal(kc_model_write_trace(m, path), KC_STATUS_STATE);
    assert_int_equal(kc_model_trace_steps(m, 0, 3), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_model_trace_steps(m, 4, 3), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_model_trace_steps(m, 2, 3), KC_STATUS_OK);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 16, .seed = 1}, NULL), KC_STATUS_OK);
    assert_int_equal(kc_model_write_trace(m, path), KC_STATUS_OK);
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    assert_non_null(root);
    json_t *ev = json_object_get(root, "traceEvents");
    assert_true(json_is_array(ev));
    int steps = 0, step_sum = 0, fwd_hidden = 0, bwd_conv = 0, opt = 0, meta = 0;
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *cat = json_string_value(json_object_get(e, "cat"));
        if (!cat) { /* metadata: the process's and the threads' names */
            assert_string_equal(json_string_value(json_object_get(e, "ph")), "M");
            meta++;
            continue;
        }
        int step = (int)json_integer_value(json_object_get(json_object_get(e, "args"), "step"));
        if (!strcmp(cat, "step")) steps++, step_sum += step;
        if (!strcmp(cat, "forward") && !strcmp(name, "hidden")) fwd_hidden++;
        if (!strcmp(cat, "backward") && !strcmp(name, "conv2d")) bwd_conv++;
        if (!strcmp(cat, "optimizer")) opt++;
        if (strcmp(cat, "data") && step != 2 && step != 3) fail_msg("span %s (%s) of step %d", name, cat, step);
    }
    assert_int_equal(steps, 2);
    assert_int_equal(step_sum, 5);
    assert_int_equal(fwd_hidden, 2);
    assert_int_equal(bwd_conv, 2);
    assert_int_equal(opt, 2);
    assert_int_equal(kc_model_trace_spans(m), (int64_t)json_array_size(ev) - meta);
    json_decref(root);
    remove(path);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numerics_forward_nan_named),
        cmocka_unit_test(test_numerics_backward_nan_named),
        cmocka_unit_test(test_numerics_healthy_run_unchanged),
        cmocka_unit_test(test_trace_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
