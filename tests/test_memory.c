/* Memory: the plan against the measured peak, the automatic batch size under a memory
 * limit, gradient accumulation, and out-of-memory recovery (all on the CPU, with
 * kc_model_set_memory_limit standing in for a small GPU). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"

/* ---- models and data */

static kc_model *default_cnn(void) {
    kc_model *m = NULL;
    assert_int_equal(kc_default_cnn(28, 28, 1, 10, &m), KC_STATUS_OK);
    return m;
}

static kc_model *vgg_small(void) {
    kc_model *m = NULL;
    kc_sequential("vgg", &m);
    kc_add(m, KC_INPUT(.shape = {32, 32, 3}));
    int filters[] = {32, 32, 0, 64, 64, 0, 128, 128};
    for (int i = 0; i < 8; i++) {
        if (!filters[i]) {
            kc_add(m, KC_MAXPOOL2D());
            continue;
        }
        kc_add(m, KC_CONV2D(.filters = filters[i], .kernel_size = {3, 3}, .padding = "same"));
        kc_add(m, KC_BATCHNORM());
        kc_add(m, KC_RELU());
    }
    kc_add(m, KC_GLOBALAVGPOOL2D());
    assert_int_equal(kc_add(m, KC_DENSE(.units = 10)), KC_STATUS_OK);
    return m;
}

static kc_model *residual(void) {
    kc_model *m = NULL;
    kc_functional("res", &m);
    kc_node x = kc_input(m, KC_INPUT(.shape = {16, 16, 3}));
    kc_node a = kc_apply(m, KC_CONV2D(.filters = 16, .kernel_size = {3, 3}, .padding = "same", .activation = "relu"), x);
    kc_node b = kc_apply(m, KC_CONV2D(.filters = 16, .kernel_size = {3, 3}, .padding = "same"), a);
    kc_node bn = kc_apply(m, KC_BATCHNORM(), b);
    kc_node s = kc_merge(m, KC_ADD(), (kc_node[]){a, bn}, 2);
    kc_node r = kc_apply(m, KC_RELU(), s);
    kc_node c = kc_apply(m, KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same"), r);
    kc_node g = kc_apply(m, KC_GLOBALAVGPOOL2D(), c);
    kc_node d = kc_apply(m, KC_DENSE(.units = 10, .activation = "softmax"), g);
    assert_int_equal(kc_set_output(m, d), KC_STATUS_OK);
    return m;
}

/* normalisation and resampling: every normalisation and resampling kind in one graph */
static kc_model *norm_resample(void) {
    kc_model *m = NULL;
    kc_functional("normresample", &m);
    kc_node x = kc_input(m, KC_INPUT(.shape = {16, 16, 3}));
    x = kc_apply(m, KC_RESCALING(.scale = {3, 1, {2.0f, 1.0f, 0.5f}}), x);
    x = kc_apply(m, KC_NORMALIZATION(), x);
    x = kc_apply(m, KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_LAYERNORM(), x);
    x = kc_apply(m, KC_GROUPNORM(.groups = 4), x);
    x = kc_apply(m, KC_UPSAMPLING2D(.interpolation = "bilinear"), x);
    x = kc_apply(m, KC_CROPPING2D(.cropping = {{1, 1}, {2, 0}}), x);
    x = kc_apply(m, KC_MAXPOOL2D(.padding = "same"), x);
    x = kc_apply(m, KC_PERMUTE(.dims = {2, 1, 3}), x);
    x = kc_apply(m, KC_GLOBALMAXPOOL2D(), x);
    x = kc_apply(m, KC_REPEAT_VECTOR(.n = 2), x);
    x = kc_apply(m, KC_FLATTEN(), x);
    assert_int_equal(kc_set_output(m, kc_apply(m, KC_DENSE(.units = 10, .activation = "softmax"), x)), KC_STATUS_OK);
    return m;
}

static kc_dataset *random_images(int n, int h, int w, int c, int classes) {
    float *x = malloc((size_t)n * h * w * c * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    uint64_t s = 12345;
    for (size_t i = 0; i < (size_t)n * h * w * c; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((s >> 40) & 0xffff) / 65536.0f;
    }
    for (int i = 0; i < n; i++) y[i] = i % classes;
    kc_dataset *d = NULL;
    kc_shape shape = {3, {h, w, c}};
    assert_int_equal(kc_dataset_from_memory(x, y, n, shape, classes, &d), KC_STATUS_OK);
    free(x);
    free(y);
    return d;
}

/* ---- the plan against the measured peak (within 10%, as promised) */

static void check_plan(kc_model *(*make)(void), int h, int w, int c, const char *name) {
    int batches[] = {8, 32, 96};
    kc_dataset *d = random_images(96, h, w, c, 10);
    for (int i = 0; i < 3; i++) {
        kc_model *m = make();
        assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(), .metrics = {"accuracy"}}), KC_STATUS_OK);
        kc_memory_plan p;
        assert_int_equal(kc_model_plan_memory(m, batches[i], 1, 1, &p), KC_STATUS_OK);
        assert_true(p.arena <= p.activations + p.activation_gradients + p.workspace);
        assert_true(p.device_total == p.parameters + p.gradients + p.optimizer_state + p.arena + p.batch_buffers);
        assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = batches[i], .steps_per_epoch = 1}, NULL),
                         KC_STATUS_OK);
        size_t peak = 0, in_use = 0;
        assert_int_equal(kc_model_memory_usage(m, &peak, &in_use), KC_STATUS_OK);
        double err = fabs((double)peak - (double)p.device_total) / (double)peak;
        printf("# %s batch %3d: planned %9zu bytes, measured peak %9zu (%.2f%%)\n", name, batches[i], p.device_total,
               peak, 100 * err);
        if (err > 0.10) fail_msg("%s batch %d: plan %zu vs peak %zu", name, batches[i], p.device_total, peak);
        kc_model_destroy(m);
    }
    kc_dataset_destroy(d);
}

static void test_plan_matches_peak(void **state) {
    check_plan(default_cnn, 28, 28, 1, "default CNN");
    check_plan(vgg_small, 32, 32, 3, "VGG-style");
    check_plan(residual, 16, 16, 3, "residual");
    check_plan(norm_resample, 16, 16, 3, "normalisation and resampling");
}

/* The arena reuses memory: a deep chain needs far less than the sum of its buffers. */
static void test_plan_reuses_gradients(void **state) {
    kc_model *m = vgg_small();
    kc_memory_plan p;
    assert_int_equal(kc_model_plan_memory(m, 64, 1, 1, &p), KC_STATUS_OK);
    assert_true(p.arena < p.activations + p.activation_gradients);
    kc_memory_plan inf;
    assert_int_equal(kc_model_plan_memory(m, 64, 0, 1, &inf), KC_STATUS_OK);
    assert_true(inf.arena < p.arena);            /* inference frees activations early */
    assert_int_equal(inf.activation_gradients, 0);
    kc_memory_plan p2;
    assert_int_equal(kc_model_plan_memory(m, 128, 1, 1, &p2), KC_STATUS_OK);
    assert_true(p2.arena > p.arena);
    kc_model_destroy(m);
}

/* ---- auto batch size under a memory limit */

static void test_auto_batch_under_limit(void **state) {
    kc_dataset *d = random_images(512, 28, 28, 1, 10);
    kc_model *probe = default_cnn();
    kc_compile(probe, NULL);
    kc_memory_plan p200;
    kc_model_plan_memory(probe, 200, 1, 1, &p200);
    kc_model_destroy(probe);
    size_t limit = p200.device_total + 1000; /* 200 fits, 208 should not */

    kc_model *m = default_cnn();
    kc_model_set_memory_limit(m, limit);
    kc_compile(m, NULL);
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.batch_size = KC_BATCH_SIZE_AUTO, .steps_per_epoch = 1}, &h),
                     KC_STATUS_OK);
    int chosen = kc_history_epoch(h, 0)->batch_size;
    kc_memory_plan pc, pn;
    kc_model_plan_memory(m, chosen, 1, 1, &pc);
    kc_model_plan_memory(m, chosen + 8, 1, 1, &pn);
    printf("# auto batch %d under a %zu-byte limit (plan %zu; %d needs %zu)\n", chosen, limit, pc.device_total,
           chosen + 8, pn.device_total);
    assert_int_equal(chosen, 200);
    assert_true(pc.device_total <= limit && pn.device_total > limit);
    kc_history_destroy(h);
    kc_model_destroy(m);

    /* the next multiple of 8 does not fit (recovery off: a plain out-of-memory error) */
    m = default_cnn();
    kc_model_set_memory_limit(m, limit);
    kc_compile(m, NULL);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.batch_size = chosen + 8, .steps_per_epoch = 1, .oom_recovery = KC_FALSE},
                            NULL),
                     KC_STATUS_OUT_OF_MEMORY);
    assert_non_null(strstr(kc_last_error(), "memory limit"));
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---- gradient accumulation gives the batch's update */

static void weights_of(kc_model *m, float *dst, int64_t cap) {
    int64_t at = 0;
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        kc_model_weight_info(m, i, &wi);
        assert_true(at + wi.size <= cap);
        kc_model_get_weight(m, i, dst + at, wi.size);
        at += wi.size;
    }
}

static void test_grad_accum_equals_batch(void **state) {
    kc_dataset *d = random_images(256, 12, 12, 1, 4);
    static float w[2][20000];
    for (int run = 0; run < 2; run++) {
        kc_model *m = NULL;
        kc_sequential("acc", &m);
        kc_add(m, KC_INPUT(.shape = {12, 12, 1}));
        kc_add(m, KC_CONV2D(.filters = 8, .kernel_size = {3, 3}, .activation = "relu"));
        kc_add(m, KC_MAXPOOL2D());
        kc_add(m, KC_FLATTEN());
        kc_add(m, KC_DENSE(.units = 4, .activation = "softmax"));
        kc_model_set_seed(m, 3);
        kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.05, .momentum = 0.9)});
        kc_history *h = NULL;
        assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 64, .grad_accum = run ? 4 : 1, .seed = 4},
                                &h),
                         KC_STATUS_OK);
        assert_int_equal(kc_history_epoch(h, 0)->micro_batch, run ? 16 : 64);
        weights_of(m, w[run], 20000);
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    double maxd = 0;
    for (int i = 0; i < 20000; i++) maxd = fmax(maxd, fabs(w[0][i] - w[1][i]));
    printf("# grad accumulation 4 x 16 vs batch 64: max weight difference %.3g\n", maxd);
    assert_true(maxd < 1e-4);
    kc_dataset_destroy(d);
}

/* ---- out-of-memory recovery */

typedef struct log_capture {
    char lines[8][512];
    int n;
} log_capture;

static void capture(kc_log_level level, const char *msg, void *user) {
    log_capture *c = user;
    if (level == KC_LOG_WARNING && c->n < 8) snprintf(c->lines[c->n++], sizeof c->lines[0], "%s", msg);
}

static void test_oom_recovery(void **state) {
    kc_dataset *d = random_images(512, 28, 28, 1, 10);
    kc_model *probe = default_cnn();
    kc_compile(probe, NULL);
    kc_memory_plan p32, p64;
    kc_model_plan_memory(probe, 32, 1, 4, &p32);
    kc_model_plan_memory(probe, 64, 1, 2, &p64);
    kc_model_destroy(probe);
    size_t limit = p32.device_total + 4096; /* fits micro-batch 32 x 4, not 64 x 2 nor 128 */
    assert_true(p64.device_total > limit);

    static float w[2][40000];
    for (int run = 0; run < 2; run++) {
        kc_model *m = default_cnn();
        kc_model_set_seed(m, 11);
        if (run == 0) kc_model_set_memory_limit(m, limit);
        kc_compile(m, NULL);
        log_capture cap = {0};
        kc_log_set_callback(capture, &cap);
        kc_history *h = NULL;
        kc_status s = kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 128, .grad_accum = run ? 4 : 1, .seed = 2}, &h);
        kc_log_set_callback(NULL, NULL);
        assert_int_equal(s, KC_STATUS_OK);
        const kc_epoch_logs *e = kc_history_epoch(h, 0);
        assert_int_equal(e->batch_size, 128);
        assert_int_equal(e->micro_batch, 32);
        assert_int_equal(e->grad_accum, 4);
        assert_int_equal(e->steps, 4);
        if (run == 0) {
            assert_int_equal(cap.n, 2);
            assert_non_null(strstr(cap.lines[0], "out of memory at micro-batch 128"));
            assert_non_null(strstr(cap.lines[0], "continuing with micro-batch 64 x 2 accumulation steps, batch size 128 unchanged"));
            assert_non_null(strstr(cap.lines[1], "out of memory at micro-batch 64"));
            assert_non_null(strstr(cap.lines[1], "continuing with micro-batch 32 x 4 accumulation steps, batch size 128 unchanged"));
            printf("# %s\n# %s\n", cap.lines[0], cap.lines[1]);
            size_t peak = 0;
            kc_model_memory_usage(m, &peak, NULL);
            assert_true(peak <= limit);
        } else {
            assert_int_equal(cap.n, 0);
        }
        weights_of(m, w[run], 40000);
        kc_history_destroy(h);
        kc_model_destroy(m);
    }
    for (int i = 0; i < 40000; i++)
        if (fabs(w[0][i] - w[1][i]) > 1e-6) fail_msg("weight %d: recovered %g, explicit %g", i, w[0][i], w[1][i]);
    kc_dataset_destroy(d);
}

static void test_oom_below_micro_batch_one(void **state) {
    kc_dataset *d = random_images(64, 28, 28, 1, 10);
    kc_model *m = default_cnn();
    kc_compile(m, NULL);
    size_t held = 0;
    kc_model_memory_usage(m, NULL, &held);
    /* weights fit, the input feed does not: a clear error before any step */
    kc_model_set_memory_limit(m, held + 1024);
    assert_int_equal(kc_fit(m, d, &(kc_fit_opts){.batch_size = 16}, NULL), KC_STATUS_OUT_OF_MEMORY);
    assert_non_null(strstr(kc_last_error(), "the input feed for batches of 16"));
    /* weights and the feed (inside the plan's batch buffers) fit, no step does */
    kc_memory_plan p;
    assert_int_equal(kc_model_plan_memory(m, 16, 1, 1, &p), KC_STATUS_OK);
    kc_model_set_memory_limit(m, held + p.batch_buffers + 1024);
    log_capture cap = {0};
    kc_log_set_callback(capture, &cap);
    kc_status s = kc_fit(m, d, &(kc_fit_opts){.batch_size = 16}, NULL);
    kc_log_set_callback(NULL, NULL);
    assert_int_equal(s, KC_STATUS_OUT_OF_MEMORY);
    assert_non_null(strstr(kc_last_error(), "out of memory even at micro-batch 1"));
    assert_int_equal(cap.n, 4); /* 16 -> 8 -> 4 -> 2 -> 1 */
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_parse_size(void **state) {
    size_t b = 0;
    assert_int_equal(kc_parse_size("512M", &b), KC_STATUS_OK);
    assert_true(b == 512ull << 20);
    assert_int_equal(kc_parse_size("1.5GiB", &b), KC_STATUS_OK);
    assert_true(b == 3ull << 29);
    assert_int_equal(kc_parse_size("1000", &b), KC_STATUS_OK);
    assert_true(b == 1000);
    assert_int_equal(kc_parse_size("2k", &b), KC_STATUS_OK);
    assert_true(b == 2048);
    assert_int_equal(kc_parse_size("12X", &b), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_parse_size("-3G", &b), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_parse_size("", &b), KC_STATUS_INVALID_ARGUMENT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_plan_reuses_gradients),
        cmocka_unit_test(test_plan_matches_peak),
        cmocka_unit_test(test_auto_batch_under_limit),
        cmocka_unit_test(test_grad_accum_equals_batch),
        cmocka_unit_test(test_oom_recovery),
        cmocka_unit_test(test_oom_below_micro_batch_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
