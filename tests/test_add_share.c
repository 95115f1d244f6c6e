/* test_add_share.c — an Add's inputs share its gradient buffer (src/model/plan.c,
 * plan_share_add): which inputs share, and the same loss and gradients as the same model with
 * the sharing prevented (an identity Reshape before each input of each Add: the Add then reads
 * an alias group, which never shares, so its backward copies dy as before).
 *   resnet_blocks   a projection block (Add(bn_sc, bn6): both share) and an identity block
 *                   (Add(x, bn3): both share, x's other consumer runs its backward after bn3's)
 *   one_only        Add(x, bn) where x has a consumer whose backward would add into the shared
 *                   buffer before bn reads it: only x shares; Add(bn_a, bn_b) where bn_b has
 *                   another consumer: only bn_a; an Add whose own gradient is shared: none
 *   same_input      Add(x, x): one input shares, the other is added in as before
 * Each model trains one step on 1 and 2 threads, shared against not shared. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "model/model.h"
#include "model_pair.h"

#define B 4
#define HW 6
#define C 8

/* Input i of an Add; through an identity Reshape when the sharing is to be prevented. */
static kc_node in_of(kc_model *m, kc_node x, int prevent) {
    if (!prevent) return x;
    return kc_apply(m, KC_RESHAPE(.target_shape = {HW, HW, C}), x);
}

static kc_node add2(kc_model *m, kc_node a, kc_node b, int prevent, const char *name) {
    return kc_merge(m, KC_ADD(.name = name), (kc_node[]){in_of(m, a, prevent), in_of(m, b, prevent)}, 2);
}

static kc_node conv_bn(kc_model *m, kc_node x, const char *bn, int relu) {
    x = kc_apply(m, KC_CONV2D(.filters = C, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(.name = bn), x);
    return relu ? kc_apply(m, KC_ACTIVATION(.activation = "relu"), x) : x;
}

static kc_model *finish(kc_model *m, kc_node x) {
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    x = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x);
    assert_int_equal(kc_set_output(m, x), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 23), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

static kc_node input(kc_model *m) { return kc_input(m, KC_INPUT(.shape = {HW, HW, 3})); }

static kc_node relu(kc_model *m, kc_node x, const char *name) {
    return kc_apply(m, KC_ACTIVATION(.name = name, .activation = "relu"), x);
}

/* ResNet's two blocks: projection (Add(bn_sc, bn6)), then identity (Add(x, bn3), x the
 * projection block's ReLU, also read by the identity block's first convolution). */
static kc_model *resnet_blocks(int prevent) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("resnet_blocks", &m), KC_STATUS_OK);
    kc_node x = conv_bn(m, input(m), "bn0", 1);
    kc_node sc = conv_bn(m, x, "bn_sc", 0);
    kc_node r = conv_bn(m, x, "bn4", 1);
    r = conv_bn(m, r, "bn6", 0);
    x = relu(m, add2(m, sc, r, prevent, "add_projection"), "relu_p");
    r = conv_bn(m, x, "bn1", 1);
    r = conv_bn(m, r, "bn3", 0);
    x = relu(m, add2(m, x, r, prevent, "add_identity"), "relu_i");
    return finish(m, x);
}

/* Add(stem, bn1) with the stem also read by "late", whose backward runs before bn1's: only the
 * stem shares; Add(bn_a, bn_b) with bn_b also read by a ReLU: only bn_a shares. The other Adds
 * take a ReLU or a convolution first (their first input shares). */
static kc_model *one_only(int prevent) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("one_only", &m), KC_STATUS_OK);
    kc_node x = kc_apply(m, KC_CONV2D(.name = "stem", .filters = C, .kernel_size = {3, 3}, .padding = "same"),
                         input(m));
    kc_node r = conv_bn(m, x, "bn1", 0);
    kc_node late = kc_apply(m, KC_CONV2D(.filters = C, .kernel_size = {1, 1}, .name = "late"), x);
    kc_node a = add2(m, x, r, prevent, "add_late");
    kc_node y = add2(m, late, a, prevent, "add_join");
    kc_node ba = conv_bn(m, y, "bn_a", 0), bb = conv_bn(m, y, "bn_b", 0);
    kc_node rb = relu(m, bb, "relu_b");
    kc_node z = add2(m, ba, bb, prevent, "add_ab");
    z = add2(m, rb, z, prevent, "add_rb");
    return finish(m, z);
}

static kc_model *same_input(int prevent) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("same_input", &m), KC_STATUS_OK);
    kc_node x = conv_bn(m, input(m), "bn1", 0);
    kc_node s = in_of(m, x, prevent);
    x = kc_merge(m, KC_ADD(.name = "add_twice"), (kc_node[]){s, s}, 2);
    return finish(m, x);
}

typedef kc_model *(*build_fn)(int prevent);

typedef struct pair {
    const char *layer, *add;
    bool shared;
} pair;

/* One training step of the model shared and not shared, on 1 and 2 threads: which inputs share
 * (none where prevented), the same loss and gradients. */
static void compare(build_fn build, const pair *want, int n) {
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        kc_model *a = build(0), *b = build(1);
        assert_int_equal(kc__model_prepare(a, B, true), KC_STATUS_OK);
        assert_int_equal(kc__model_prepare(b, B, true), KC_STATUS_OK);
        for (int i = 0; i < n; i++) {
            if (mp_dy_shared(a, want[i].layer, want[i].add) != want[i].shared)
                fail_msg("%s: %s %s %s's gradient", a->name, want[i].layer, want[i].shared ? "does not share" : "shares",
                         want[i].add);
            assert_false(mp_dy_shared(b, want[i].layer, want[i].add));
        }
        mp_train_compare_destroy(a, b, B, B * HW * HW * 3, -1.0f, 2.0f);
    }
}

static void test_resnet_blocks(void **state) {
    (void)state;
    const pair want[] = {{"bn_sc", "add_projection", true}, {"bn6", "add_projection", true},
                         {"relu_p", "add_identity", true}, {"bn3", "add_identity", true}};
    compare(resnet_blocks, want, 4);
}

static void test_one_only(void **state) {
    (void)state;
    const pair want[] = {{"stem", "add_late", true}, {"bn1", "add_late", false}, {"late", "add_join", true},
                         {"add_late", "add_join", false}, {"bn_a", "add_ab", true}, {"bn_b", "add_ab", false},
                         {"relu_b", "add_rb", true}};
    compare(one_only, want, 7);
}

static void test_same_input(void **state) {
    (void)state;
    const pair want[] = {{"bn1", "add_twice", true}};
    compare(same_input, want, 1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resnet_blocks),
        cmocka_unit_test(test_one_only),
        cmocka_unit_test(test_same_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
