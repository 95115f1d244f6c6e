/* Transfer learning: kc_model_set_trainable / _from, Keras's `trainable: false`.
 * Frozen weights do not move in fit and have no gradient or optimizer state; a frozen
 * BatchNormalization keeps its moving statistics (inference mode, as Keras 3); nothing
 * below the lowest trainable layer runs backward; the flag goes through Keras JSON and
 * .keras / .h5 files; a checkpoint resumes only with the trainable set that wrote it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "model/model.h"

#define N 64

/* input (6, 6, 2) -> conv -> bn -> flatten -> dense(8, relu) -> dense(3, softmax) */
static kc_model *small_cnn_on(const char *device) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("tl", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 2}));
    x = kc_apply(m, KC_CONV2D(.name = "block1_conv", .filters = 4, .kernel_size = {3, 3}), x);
    x = kc_apply(m, KC_BATCHNORM(.name = "block1_bn"), x);
    x = kc_apply(m, KC_FLATTEN(), x);
    x = kc_apply(m, KC_DENSE(.name = "head_dense", .units = 8, .activation = "relu"), x);
    x = kc_apply(m, KC_DENSE(.name = "head_out", .units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    assert_int_equal(kc_model_set_device(m, device), KC_STATUS_OK);
    return m;
}

static kc_model *small_cnn(void) { return small_cnn_on("cpu"); }

static kc_dataset *data(void) {
    float *x = malloc(sizeof(float) * N * 72);
    int32_t *y = malloc(sizeof(int32_t) * N);
    kc_rng r;
    kc__rng_seed(&r, 3);
    for (int i = 0; i < N * 72; i++) x[i] = (float)(kc__rng_uniform(&r) * 4 - 1); /* BN sees mean/var far from 0/1 */
    for (int i = 0; i < N; i++) y[i] = i % 3;
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, N, kc__shape_make(3, (int[]){6, 6, 2}), 3, &d), KC_STATUS_OK);
    free(x);
    free(y);
    return d;
}

/* Every weight's values, in kc_model_get_weight order (malloc'd, concatenated). */
static float *snapshot(kc_model *m, int64_t *n_out) {
    int64_t n = 0;
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(m, i, &wi), KC_STATUS_OK);
        n += wi.size;
    }
    float *v = malloc(sizeof(float) * (size_t)n), *p = v;
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        kc_model_weight_info(m, i, &wi);
        assert_int_equal(kc_model_get_weight(m, i, p, wi.size), KC_STATUS_OK);
        p += wi.size;
    }
    *n_out = n;
    return v;
}

/* Which weights changed between two snapshots: a bit per weight index. */
static unsigned moved(kc_model *m, const float *a, const float *b) {
    unsigned bits = 0;
    int64_t off = 0;
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        kc_model_weight_info(m, i, &wi);
        if (memcmp(a + off, b + off, sizeof(float) * (size_t)wi.size) != 0) bits |= 1u << i;
        off += wi.size;
    }
    return bits;
}

static void fit_once(kc_model *m, kc_dataset *d) {
    kc_history *h = NULL;
    kc_fit_opts fo = {.epochs = 1, .batch_size = 16, .seed = 5};
    if (kc_fit(m, d, &fo, &h) != KC_STATUS_OK) fail_msg("fit: %s", kc_last_error());
    kc_history_destroy(h);
}

/* fit_once, and which weights it moved (moved()). */
static unsigned fit_moved(kc_model *m, kc_dataset *d) {
    int64_t n = 0;
    float *before = snapshot(m, &n);
    fit_once(m, d);
    float *after = snapshot(m, &n);
    unsigned bits = moved(m, before, after);
    free(before);
    free(after);
    return bits;
}

static void compile_adam(kc_model *m) {
    kc_compile_opts co = {.optimizer = KC_ADAM(), .loss = "sparse_categorical_crossentropy"};
    if (kc_compile(m, &co) != KC_STATUS_OK) fail_msg("compile: %s", kc_last_error());
}

/* Weights (Keras order): 0 conv kernel, 1 conv bias, 2 gamma, 3 beta, 4 moving_mean,
 * 5 moving_variance, 6-7 head_dense, 8-9 head_out. */
static void test_frozen_base_does_not_move(void **state) {
    (void)state;
    kc_model *m = small_cnn();
    kc_dataset *d = data();
    compile_adam(m); /* then freeze: a compiled model's optimizer restarts on the new set */
    int64_t full = m->n_trainable;
    kc_memory_plan mp_full, mp;
    assert_int_equal(kc_model_plan_memory(m, 16, 1, 1, &mp_full), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "block1_", 0), KC_STATUS_OK); /* a prefix: conv and bn */
    kc_layer_info li;
    assert_int_equal(kc_model_layer_info(m, 2, &li), KC_STATUS_OK);
    assert_string_equal(li.name, "block1_bn");
    assert_int_equal(li.trainable, 0);
    assert_int_equal(li.trainable_params, 0);
    assert_int_equal(li.params, 16);
    /* the trainable range (and the optimizer's slots) hold the head only */
    assert_true(m->n_trainable < full);
    int64_t head = 0;
    for (int i = 4; i <= 5; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) head += (m->layers[i]->w[k].size + 15) & ~15;
    assert_int_equal(m->n_trainable, head);
    assert_null(m->layers[1]->w[0].grad);
    assert_int_equal(kc_model_plan_memory(m, 16, 1, 1, &mp), KC_STATUS_OK);
    assert_true(mp.optimizer_state < mp_full.optimizer_state); /* Adam's two slots, head only */
    assert_true(mp.optimizer_state <= 2 * (size_t)head * 4 + 1024);

    /* conv kernel/bias, gamma/beta and the frozen BN's moving statistics stay; the head moves */
    assert_int_equal(fit_moved(m, d), 0x3c0u);
    /* unfreeze the conv block only (Keras: layer.trainable = True): its weights move now */
    assert_int_equal(kc_model_set_trainable(m, "block1_conv", 1), KC_STATUS_OK);
    assert_int_equal(fit_moved(m, d), 0x3c3u);
    /* and the BN: gamma/beta train, the moving statistics follow the batches again */
    assert_int_equal(kc_model_set_trainable(m, "block1_bn", 1), KC_STATUS_OK);
    assert_int_equal(fit_moved(m, d), 0x3ffu);
    assert_int_equal(m->n_trainable, full);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

/* The whole model frozen: nothing moves, no backward runs, no gradient slab exists. */
static void test_whole_model_frozen(void **state) {
    (void)state;
    kc_model *m = small_cnn();
    kc_dataset *d = data();
    assert_int_equal(kc_model_set_trainable(m, NULL, 0), KC_STATUS_OK); /* before build */
    compile_adam(m);
    assert_int_equal(m->n_trainable, 0);
    assert_null(m->grads);
    assert_int_equal(kc_model_set_profiling(m, 1), KC_STATUS_OK);
    assert_int_equal(fit_moved(m, d), 0);
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer_timing t;
        kc_model_layer_timing(m, i, &t);
        assert_int_equal(t.backward_calls, 0);
    }
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    assert_non_null(strstr(json, "\"name\": \"tl\", \"trainable\": false"));
    kc_model *r = NULL;
    assert_int_equal(kc_model_from_json(json, strlen(json), &r), KC_STATUS_OK);
    for (int i = 1; i < r->n_layers; i++) assert_true(r->layers[i]->frozen);
    kc_free(json);
    kc_model_destroy(r);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

/* --trainable-from: backward runs only from that layer up (profiling counts the calls), and
 * the layers below get no gradient buffer. */
static void test_trainable_from_skips_backward(void **state) {
    (void)state;
    kc_model *m = small_cnn();
    kc_dataset *d = data();
    compile_adam(m);
    kc_memory_plan all, top;
    assert_int_equal(kc_model_plan_memory(m, 16, 1, 1, &all), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable_from(m, "head_out"), KC_STATUS_OK);
    assert_int_equal(kc_model_plan_memory(m, 16, 1, 1, &top), KC_STATUS_OK);
    assert_true(top.activation_gradients < all.activation_gradients);
    assert_true(top.gradients < all.gradients);
    assert_int_equal(kc_model_set_profiling(m, 1), KC_STATUS_OK);
    fit_once(m, d);
    for (int i = 1; i < m->n_layers; i++) {
        kc_layer_timing t;
        kc_model_layer_timing(m, i, &t);
        if (i == 5) assert_true(t.backward_calls > 0);
        else assert_int_equal(t.backward_calls, 0);
    }
    assert_int_equal(kc_model_set_trainable_from(m, "nope"), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "'nope'"));
    assert_int_equal(kc_model_set_trainable(m, "zzz", 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "starts with"));
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

/* "trainable": false goes through JSON and the files, weights unchanged and in Keras's order. */
static void test_files_keep_the_flag(void **state) {
    (void)state;
    kc_model *m = small_cnn();
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "block1_bn", 0), KC_STATUS_OK);
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    assert_non_null(strstr(json, "\"name\": \"block1_bn\", \"trainable\": false, \"dtype\""));
    assert_non_null(strstr(json, "\"name\": \"block1_conv\", \"trainable\": true, \"dtype\""));
    kc_free(json);
    int64_t n = 0;
    float *w0 = snapshot(m, &n);
    const char *exts[] = {".keras", ".h5"};
    for (int e = 0; e < 2; e++) {
        char path[256];
        snprintf(path, sizeof path, "test_trainable_%d%s", (int)getpid(), exts[e]);
        if (kc_model_save(m, path) != KC_STATUS_OK) fail_msg("save %s: %s", path, kc_last_error());
        kc_model *r = NULL;
        if (kc_model_load(path, &r) != KC_STATUS_OK) fail_msg("load %s: %s", path, kc_last_error());
        remove(path);
        assert_true(r->layers[2]->frozen);
        assert_false(r->layers[1]->frozen);
        assert_int_equal(r->n_trainable, m->n_trainable);
        float *w1 = snapshot(r, &n);
        assert_int_equal(moved(r, w0, w1), 0);
        free(w1);
        kc_model_destroy(r);
    }
    free(w0);
    kc_model_destroy(m);
}

/* A checkpoint written with one trainable set does not resume with another. */
static void test_resume_needs_the_same_set(void **state) {
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "test_trainable_ckpt_%d", (int)getpid());
    kc_model *m = small_cnn();
    kc_dataset *d = data();
    assert_int_equal(kc_model_set_trainable(m, "block1_", 0), KC_STATUS_OK);
    compile_adam(m);
    kc_history *h = NULL;
    kc_fit_opts fo = {.epochs = 1, .batch_size = 16, .checkpoint_dir = dir};
    if (kc_fit(m, d, &fo, &h) != KC_STATUS_OK) fail_msg("fit: %s", kc_last_error());
    kc_history_destroy(h);
    char ckpt[512];
    assert_int_equal(kc_checkpoint_latest(dir, ckpt, sizeof ckpt), KC_STATUS_OK);
    /* the checkpoint's own model comes back frozen as it was, and resumes */
    kc_model *r = NULL;
    assert_int_equal(kc_checkpoint_load(ckpt, &r), KC_STATUS_OK);
    assert_true(r->layers[1]->frozen && r->layers[2]->frozen && !r->layers[4]->frozen);
    kc_model_destroy(r);
    /* another trainable set: refused, naming the layer */
    kc_model *o = small_cnn();
    compile_adam(o);
    fo.epochs = 2;
    fo.resume_from = ckpt;
    h = NULL;
    kc_status s = kc_fit(o, d, &fo, &h);
    assert_int_equal(s, KC_STATUS_BAD_FILE);
    assert_non_null(strstr(kc_last_error(), "'block1_conv' (Conv2D: weights (3, 3, 2, 4), (4,), frozen)"));
    kc_history_destroy(h);
    kc_model_destroy(o);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

/* The same frozen fine-tuning on the GPU (skipped without one): the weights after one epoch
 * agree with the CPU's (the frozen BatchNormalization's inference-mode backward included),
 * and the frozen ones are bit-identical to where they started. */
static void test_frozen_fit_gpu_matches_cpu(void **state) {
    (void)state;
    kc_backend *probe = NULL;
    if (kc_backend_open("cuda", &probe) != KC_STATUS_OK) {
        print_message("no GPU: %s\n", kc_last_error());
        skip();
    }
    kc_backend_destroy(probe);
    kc_dataset *d = data();
    float *w[2];
    int64_t n = 0;
    float *start = NULL;
    for (int dev = 0; dev < 2; dev++) {
        kc_model *m = small_cnn_on(dev ? "cuda" : "cpu");
        kc_compile_opts co = {.optimizer = KC_SGD(.learning_rate = 0.05), .loss = "sparse_categorical_crossentropy"};
        assert_int_equal(kc_compile(m, &co), KC_STATUS_OK);
        assert_int_equal(kc_model_set_trainable_from(m, "block1_bn"), KC_STATUS_OK);
        assert_int_equal(kc_model_set_trainable(m, "block1_bn", 0), KC_STATUS_OK);
        if (dev == 0) start = snapshot(m, &n);
        fit_once(m, d);
        w[dev] = snapshot(m, &n);
        kc_model_destroy(m);
    }
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = w[0][i] - w[1][i];
        worst = e < 0 ? -e > worst ? -e : worst : e > worst ? e : worst;
    }
    print_message("largest |GPU - CPU| weight after one epoch: %.3g\n", worst);
    assert_true(worst < 1e-4);
    assert_memory_equal(w[1], start, sizeof(float) * 92); /* block1_conv (72 + 4) and block1_bn (4 x 4), frozen */
    free(start);
    free(w[0]);
    free(w[1]);
    kc_dataset_destroy(d);
}

int main(void) {
    kc_set_num_threads(1);
    const char *bin = getenv("KERAC_BINARY_DIR");
    if (bin && *bin) setenv("KERAC_MODULE_PATH", bin, 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frozen_base_does_not_move),
        cmocka_unit_test(test_whole_model_frozen),
        cmocka_unit_test(test_trainable_from_skips_backward),
        cmocka_unit_test(test_files_keep_the_flag),
        cmocka_unit_test(test_resume_needs_the_same_set),
        cmocka_unit_test(test_frozen_fit_gpu_matches_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
