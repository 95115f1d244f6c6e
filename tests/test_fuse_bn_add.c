/* test_fuse_bn_add.c — a training batch norm folded into the Add that reads it
 * (src/model/fuse.c, bn_folded; the backend's bn_add_relu), against the same model with the
 * fold off (kc_device_opts.cpu_fuse_bn_add = KC_FALSE, the reference):
 *   kernel   kc__cpu bn_add_relu against the batch norm's own forward (batch statistics and
 *            moving ones) then add / add_relu, bit for bit: a map on either input or both,
 *            with and without the ReLU and its clip, in place, wide channels (blocks), on
 *            every instruction set this processor runs; batchnorm_forward_train without y
 *            leaves the statistics the full forward leaves; bad maps refused
 *   blocks   ResNet's projection (a batch norm on both inputs) and identity blocks, an Add ->
 *            ReLU(max_value=6), a plain Add, a frozen batch norm (its moving map), and batch
 *            norms that must not fold (read twice; followed by a ReLU; the model's output):
 *            which fold, the placement line, the loss, every gradient and the moving
 *            statistics after one training step bit for bit, on 1 and 2 threads; no fold in an
 *            inference plan */
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
#include "model/device.h"
#include "model/model.h"
#include "model_pair.h"

#define B 4
#define HW 6
#define C 8

static float *rnd_floats(int64_t n, unsigned *s, float lo, float span) {
    float *p = malloc(sizeof(float) * (size_t)n);
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = span * mp_rnd(s) + lo;
    return p;
}

/* the reference: each mapped input through the batch norm's forward, then add and the ReLU */
static void reference(kc_backend *be, float *y, const float *x0, const kc_bn_fold *f0, const float *x1,
                      const kc_bn_fold *f1, int64_t rows, int c, int relu, float relu_max, float *t0, float *t1) {
    const float *in[2] = {x0, x1};
    const kc_bn_fold *f[2] = {f0, f1};
    float *t[2] = {t0, t1};
    for (int k = 0; k < 2; k++) {
        if (!f[k]) {
            memcpy(t[k], in[k], sizeof(float) * (size_t)(rows * c));
            continue;
        }
        if (f[k]->inv_std) { /* batch statistics: y = (x - mean) * gamma * inv_std + beta, from the forward */
            float *mean = malloc(sizeof(float) * (size_t)c), *inv = malloc(sizeof(float) * (size_t)c);
            assert_int_equal(be->batchnorm_forward_train(be, in[k], t[k], rows, c, f[k]->gamma, f[k]->beta, NULL, NULL,
                                                         0.9f, f[k]->epsilon, mean, inv),
                             KC_STATUS_OK);
            assert_true(mp_max_abs_diff(mean, f[k]->mean, c) == 0.0 && mp_max_abs_diff(inv, f[k]->inv_std, c) == 0.0);
            free(mean), free(inv);
        } else {
            assert_int_equal(be->batchnorm_forward_infer(be, in[k], t[k], rows, c, f[k]->gamma, f[k]->beta,
                                                         f[k]->mean, f[k]->var, f[k]->epsilon),
                             KC_STATUS_OK);
        }
    }
    if (relu)
        assert_int_equal(be->add_relu(be, y, t0, t1, rows * c, relu_max), KC_STATUS_OK);
    else
        assert_int_equal(be->add(be, y, t0, t1, rows * c), KC_STATUS_OK);
}

static void kernel_on(kc_backend *be, int64_t rows, int c, unsigned seed) {
    const int64_t n = rows * c;
    unsigned s = seed;
    float *x0 = rnd_floats(n, &s, -2.0f, 4.0f), *x1 = rnd_floats(n, &s, -2.0f, 4.0f);
    float *gamma = rnd_floats(c, &s, 0.5f, 1.0f), *beta = rnd_floats(c, &s, -0.5f, 1.0f);
    float *mmean = rnd_floats(c, &s, -0.5f, 1.0f), *mvar = rnd_floats(c, &s, 0.5f, 1.0f);
    float *mean = malloc(sizeof(float) * (size_t)c), *inv = malloc(sizeof(float) * (size_t)c);
    float *y = malloc(sizeof(float) * (size_t)n), *ref = malloc(sizeof(float) * (size_t)n);
    float *t0 = malloc(sizeof(float) * (size_t)n), *t1 = malloc(sizeof(float) * (size_t)n);
    assert_true(mean && inv && y && ref && t0 && t1);
    /* the statistics only: the same as the full forward's */
    float *m1 = malloc(sizeof(float) * (size_t)c), *v1 = malloc(sizeof(float) * (size_t)c);
    float *m2 = malloc(sizeof(float) * (size_t)c), *v2 = malloc(sizeof(float) * (size_t)c);
    float *mean2 = malloc(sizeof(float) * (size_t)c), *inv2 = malloc(sizeof(float) * (size_t)c);
    memcpy(m1, mmean, sizeof(float) * (size_t)c), memcpy(m2, mmean, sizeof(float) * (size_t)c);
    memcpy(v1, mvar, sizeof(float) * (size_t)c), memcpy(v2, mvar, sizeof(float) * (size_t)c);
    assert_int_equal(be->batchnorm_forward_train(be, x0, t0, rows, c, gamma, beta, m1, v1, 0.9f, 1e-3f, mean, inv),
                     KC_STATUS_OK);
    assert_int_equal(be->batchnorm_forward_train(be, x0, NULL, rows, c, gamma, beta, m2, v2, 0.9f, 1e-3f, mean2, inv2),
                     KC_STATUS_OK);
    assert_true(mp_max_abs_diff(mean, mean2, c) == 0.0 && mp_max_abs_diff(inv, inv2, c) == 0.0);
    assert_true(mp_max_abs_diff(m1, m2, c) == 0.0 && mp_max_abs_diff(v1, v2, c) == 0.0);
    /* x1's batch statistics too (each map's statistics are its own input's) */
    float *mean1 = malloc(sizeof(float) * (size_t)c), *inv1 = malloc(sizeof(float) * (size_t)c);
    assert_true(mean1 && inv1);
    assert_int_equal(be->batchnorm_forward_train(be, x1, NULL, rows, c, gamma, NULL, NULL, NULL, 0.9f, 1e-3f, mean1, inv1),
                     KC_STATUS_OK);
    const kc_bn_fold batch = {.mean = mean, .inv_std = inv, .gamma = gamma, .beta = beta, .epsilon = 1e-3f};
    const kc_bn_fold batch1 = {.mean = mean1, .inv_std = inv1, .gamma = gamma, .epsilon = 1e-3f}; /* center=False */
    const kc_bn_fold moving = {.mean = mmean, .var = mvar, .beta = beta, .epsilon = 1e-3f};     /* scale=False */
    const kc_bn_fold *maps[][2] = {{&batch, NULL}, {NULL, &batch1}, {&batch, &batch1}, {&batch, &moving}, {&moving, NULL}};
    for (size_t i = 0; i < KC_ARRAY_LEN(maps); i++)
        for (int relu = 0; relu <= 2; relu++) {
            const float mx = relu == 2 ? 1.5f : 0.0f;
            reference(be, ref, x0, maps[i][0], x1, maps[i][1], rows, c, relu > 0, mx, t0, t1);
            assert_int_equal(be->bn_add_relu(be, y, x0, maps[i][0], x1, maps[i][1], rows, c, relu > 0, mx),
                             KC_STATUS_OK);
            if (mp_max_abs_diff(y, ref, n) != 0.0)
                fail_msg("%lld x %d, maps %zu, relu %d: %g off the batch norm then the Add", (long long)rows, c, i,
                         relu, mp_max_abs_diff(y, ref, n));
            memcpy(y, x1, sizeof(float) * (size_t)n); /* y over the second input */
            assert_int_equal(be->bn_add_relu(be, y, x0, maps[i][0], y, maps[i][1], rows, c, relu > 0, mx),
                             KC_STATUS_OK);
            assert_true(mp_max_abs_diff(y, ref, n) == 0.0);
        }
    const kc_bn_fold bad = {.mean = mean, .epsilon = 1e-3f}; /* neither inv_std nor var */
    assert_int_equal(be->bn_add_relu(be, y, x0, &bad, x1, NULL, rows, c, 1, 0.0f), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "inv_std"));
    assert_int_equal(be->bn_add_relu(be, y, x0, &batch, x1, NULL, rows, c, 1, -1.0f), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->bn_add_relu(be, y, x0, &batch, NULL, NULL, rows, c, 1, 0.0f), KC_STATUS_INVALID_ARGUMENT);
    free(x0), free(x1), free(gamma), free(beta), free(mmean), free(mvar), free(mean), free(inv), free(y), free(ref);
    free(t0), free(t1), free(m1), free(v1), free(m2), free(v2), free(mean2), free(inv2), free(mean1), free(inv1);
}

static void test_kernel(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int isa = 1; isa <= 3; isa++) {
            kc_backend *be = NULL;
            if (kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_isa = isa}, &be) != KC_STATUS_OK) continue;
            assert_non_null(be->bn_add_relu);
            kernel_on(be, 1000, 37, 5);    /* channels not a multiple of a vector */
            kernel_on(be, 40, 2100, 9);    /* more channels than one block (2,048) */
            kernel_on(be, 20000, 64, 11);  /* rows over the threads */
            kc_backend_destroy(be);
        }
    }
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_fuse_bn_add = KC_FALSE}, &be), KC_STATUS_OK);
    assert_null(be->bn_add_relu);
    kc_backend_destroy(be);
}

static kc_node conv(kc_model *m, kc_node x) {
    return kc_apply(m, KC_CONV2D(.filters = C, .kernel_size = {3, 3}, .padding = "same"), x);
}

static kc_node bn(kc_model *m, const char *name, kc_node x) { return kc_apply(m, KC_BATCHNORM(.name = name), x); }

static kc_node add(kc_model *m, const char *name, kc_node a, kc_node b) {
    return kc_merge(m, KC_ADD(.name = name), (kc_node[]){a, b}, 2);
}

static kc_node relu(kc_model *m, kc_node x) { return kc_apply(m, KC_ACTIVATION(.activation = "relu"), x); }

static kc_model *blocks(int fold) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("bn_add_blocks", &m), KC_STATUS_OK);
    kc_node x = relu(m, bn(m, "bn_stem", conv(m, kc_input(m, KC_INPUT(.shape = {HW, HW, 3})))));
    /* projection: a batch norm on both inputs */
    kc_node sc = bn(m, "bn_sc", conv(m, x)), r = bn(m, "bn_p3", conv(m, relu(m, bn(m, "bn_p1", conv(m, x)))));
    x = relu(m, add(m, "add_p", sc, r));
    /* identity: the block's input, then the batch norm second */
    x = relu(m, add(m, "add_i", x, bn(m, "bn_i3", conv(m, x))));
    /* the batch norm first, a clipped ReLU after */
    x = kc_apply(m, KC_RELU(.max_value = 6.0f), add(m, "add_6", bn(m, "bn_6", conv(m, x)), x));
    /* a plain Add (no ReLU after) of a frozen batch norm */
    kc_node fr = kc_apply(m, KC_BATCHNORM(.name = "bn_frozen"), conv(m, x));
    x = add(m, "add_plain", x, fr);
    /* must not fold: a batch norm read twice, and one followed by a ReLU */
    kc_node twice = bn(m, "bn_twice", conv(m, x));
    x = add(m, "add_twice", twice, kc_apply(m, KC_ACTIVATION(.activation = "tanh"), twice));
    x = add(m, "add_relu_bn", x, relu(m, bn(m, "bn_relu", conv(m, x))));
    kc_node o = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    o = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), o);
    assert_int_equal(kc_set_output(m, o), KC_STATUS_OK);
    kc_device_opts d = {.cpu_fuse_bn_add = fold ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &d), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 31), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "bn_frozen", 0), KC_STATUS_OK);
    return m;
}

/* The folded batch norms' names; each one's placement line says where its normalisation went. */
static void folded(const kc_model *m, char *names, size_t n) {
    names[0] = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        if (!l->bn_folded) continue;
        char line[1536];
        kc__placement_describe(m->be, l, B, 0, line, sizeof line);
        assert_non_null(strstr(line, "the batch statistics only (the Add after it normalises"));
        snprintf(names + strlen(names), n - strlen(names), "%s ", l->name);
    }
}

/* loss, gradients and every weight (the moving statistics) of one training step: the same bits */
static void train_same(kc_model *a, kc_model *b) {
    float ta[B], tb[B];
    mp_feed(a, ta, B, B * HW * HW * 3, -1.0f, 2.0f);
    mp_feed(b, tb, B, B * HW * HW * 3, -1.0f, 2.0f);
    mp_train_check(a, b, B, true);
    a->batch_targets = b->batch_targets = NULL;
}

static void test_blocks(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        kc_model *a = blocks(1), *b = blocks(0);
        assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
        assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
        char got[256];
        folded(a, got, sizeof got);
        assert_string_equal(got, "bn_sc bn_p3 bn_i3 bn_6 bn_frozen ");
        folded(b, got, sizeof got);
        assert_string_equal(got, "");
        train_same(a, b);
        /* inference: nothing folds (the batch norm's input would not outlive its forward) */
        assert_int_equal(kc__model_prepare(a, B, false), KC_STATUS_OK);
        folded(a, got, sizeof got);
        assert_string_equal(got, "");
        assert_int_equal(kc__model_prepare(b, B, false), KC_STATUS_OK);
        mp_infer_compare_destroy(a, b, B, B * HW * HW * 3, -1.0f, 2.0f, B * 3);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
