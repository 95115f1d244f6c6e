/* test_fuse_add_relu.c — an Add and the ReLU after it in one forward pass (src/model/fuse.c,
 * the backend's add_relu), against the same model with the fusion off
 * (kc_device_opts.cpu_fuse_add_relu = KC_FALSE, the reference):
 *   kernel   kc__cpu add_relu against add then the ReLU, with and without an upper clip,
 *            in place, on every instruction set this processor runs; a negative clip refused
 *   blocks   ResNet's projection and identity blocks (Add -> Activation("relu")), an Add ->
 *            ReLU(max_value=6), and Adds that must not fuse (read twice; the model's output;
 *            three inputs; broadcasting): which fuse, the ReLU's y in the Add's memory, the
 *            loss and every gradient of one training step, then inference, on 1 and 2 threads */
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

static void test_kernel(void **state) {
    (void)state;
    enum { N = 100003 };
    float *a = malloc(sizeof(float) * N), *b = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    float *ref = malloc(sizeof(float) * N);
    unsigned s = 5;
    for (int i = 0; i < N; i++) a[i] = 8.0f * mp_rnd(&s) - 4.0f, b[i] = 8.0f * mp_rnd(&s) - 4.0f;
    for (int isa = 1; isa <= 3; isa++) {
        kc_backend *be = NULL;
        if (kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_isa = isa}, &be) != KC_STATUS_OK) continue;
        assert_non_null(be->add_relu);
        for (int clip = 0; clip <= 1; clip++) {
            const float mx = clip ? 3.0f : 0.0f;
            const kc_act_params act = clip ? (kc_act_params){.kind = KC_ACT_RELU_GENERAL, .beta = mx}
                                           : (kc_act_params){.kind = KC_ACT_RELU};
            assert_int_equal(be->add(be, ref, a, b, N), KC_STATUS_OK);
            assert_int_equal(be->act_forward(be, act, ref, ref, N, C), KC_STATUS_OK);
            assert_int_equal(be->add_relu(be, y, a, b, N, mx), KC_STATUS_OK);
            assert_true(mp_max_abs_diff(y, ref, N) == 0.0);
            memcpy(y, a, sizeof(float) * N); /* in place */
            assert_int_equal(be->add_relu(be, y, y, b, N, mx), KC_STATUS_OK);
            assert_true(mp_max_abs_diff(y, ref, N) == 0.0);
        }
        assert_int_equal(be->add_relu(be, y, a, b, N, -1.0f), KC_STATUS_INVALID_ARGUMENT);
        assert_non_null(strstr(kc_last_error(), "relu_max"));
        kc_backend_destroy(be);
    }
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_fuse_add_relu = KC_FALSE}, &be), KC_STATUS_OK);
    assert_null(be->add_relu);
    kc_backend_destroy(be);
    free(a), free(b), free(y), free(ref);
}

static kc_node conv_bn(kc_model *m, kc_node x, int relu) {
    x = kc_apply(m, KC_CONV2D(.filters = C, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    return relu ? kc_apply(m, KC_ACTIVATION(.activation = "relu"), x) : x;
}

static kc_node add(kc_model *m, const char *name, kc_node a, kc_node b) {
    return kc_merge(m, KC_ADD(.name = name), (kc_node[]){a, b}, 2);
}

static kc_model *blocks(int fuse) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("add_relu_blocks", &m), KC_STATUS_OK);
    kc_node x = conv_bn(m, kc_input(m, KC_INPUT(.shape = {HW, HW, 3})), 1);
    kc_node sc = conv_bn(m, x, 0), r = conv_bn(m, conv_bn(m, x, 1), 0);
    x = kc_apply(m, KC_ACTIVATION(.name = "relu_p", .activation = "relu"), add(m, "add_p", sc, r));
    r = conv_bn(m, conv_bn(m, x, 1), 0);
    x = kc_apply(m, KC_ACTIVATION(.name = "relu_i", .activation = "relu"), add(m, "add_i", x, r));
    r = conv_bn(m, x, 0);
    x = kc_apply(m, KC_RELU(.name = "relu6", .max_value = 6.0f), add(m, "add_6", x, r));
    kc_node twice = add(m, "add_twice", x, conv_bn(m, x, 0)); /* read by a ReLU and the next Add */
    kc_node t = add(m, "add_next", kc_apply(m, KC_RELU(.name = "relu_t"), twice), twice);
    kc_node three = kc_merge(m, KC_ADD(.name = "add_three"), (kc_node[]){t, x, r}, 3);
    three = kc_apply(m, KC_RELU(.name = "relu_3"), three);
    kc_node g = kc_apply(m, KC_GLOBALAVGPOOL2D(.keepdims = true), three);
    kc_node bc = kc_apply(m, KC_RELU(.name = "relu_bc"), add(m, "add_bcast", three, g));
    kc_node o = kc_apply(m, KC_GLOBALAVGPOOL2D(), bc);
    o = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), o);
    assert_int_equal(kc_set_output(m, o), KC_STATUS_OK);
    kc_device_opts d = {.cpu_fuse_add_relu = fuse ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &d), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 31), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

/* The fused Adds' names, and check that each fused ReLU's y is its Add's memory. */
static void fused(const kc_model *m, char *names, size_t n) {
    names[0] = 0;
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        if (!l->fwd_absorbed) continue;
        assert_true(m->layers[l->in[0]]->relu_after);
        assert_true(m->plan.y_off[i] == m->plan.y_off[l->in[0]]);
        char line[1536]; /* the placement log says where its forward went */
        kc__placement_describe(m->be, l, B, 0, line, sizeof line);
        assert_non_null(strstr(line, "no forward kernel (the Add before it applies it"));
        snprintf(names + strlen(names), n - strlen(names), "%s ", m->layers[l->in[0]]->name);
    }
}

static void test_blocks(void **state) {
    (void)state;
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (int training = 1; training >= 0; training--) {
            kc_model *a = blocks(1), *b = blocks(0);
            assert_int_equal(kc__model_prepare(a, B, training), KC_STATUS_OK);
            assert_int_equal(kc__model_prepare(b, B, training), KC_STATUS_OK);
            char got[256];
            fused(a, got, sizeof got);
            assert_string_equal(got, "add_p add_i add_6 ");
            fused(b, got, sizeof got);
            assert_string_equal(got, "");
            if (training) {
                assert_true(a->plan.activation_bytes < b->plan.activation_bytes);
                mp_train_compare_destroy(a, b, B, B * HW * HW * 3, -1.0f, 2.0f);
                continue;
            }
            mp_infer_compare_destroy(a, b, B, B * HW * HW * 3, -1.0f, 2.0f, B * 3);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernel),
        cmocka_unit_test(test_blocks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
