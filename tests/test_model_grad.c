/* Whole-model gradient check: the planner's buffer reuse, alias groups (Flatten),
 * fan-out gradient accumulation (a residual Add, a branch used twice) and the fused
 * softmax + cross-entropy must give the same gradient as finite differences of the
 * model's loss. Float32 kernels, objective accumulated in double; central differences
 * with eps = 3e-3 on sampled weights; bound: |a - n| <= 3e-2 * max(|a|, |n|) + 2e-3.
 * Where the loss has a kink within eps (a ReLU's input at or near 0: the two one-sided
 * differences disagree by more than the bound) the analytic gradient takes ReLU'(0) = 0 as
 * Keras does and a central difference half of each side: such a sample only has to lie
 * between the two one-sided slopes (within the bound), and at most a quarter may be such. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"

#define B 4

/* The finite differences' step: 3e-3, small because max pooling has kinks; smaller where
 * ReLUs follow batch norms (test_bn_relu_fused: at 3e-3 the unfused model fails too). */
static float g_eps = 3e-3f;

static double model_loss(kc_model *m) {
    m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
    assert_int_equal(kc__model_forward(m, B, true, 42), KC_STATUS_OK);
    assert_int_equal(kc__model_accumulate_metrics(m, B), KC_STATUS_OK);
    float s = 0;
    m->be->to_host(m->be, &s, m->dev_scalars + KC_SCALAR_LOSS, sizeof s);
    return (double)s / B;
}

static void check_model(kc_model *m, const char *loss, int classes) {
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = loss, .optimizer = KC_SGD()}), KC_STATUS_OK);
    assert_int_equal(kc__model_prepare(m, B, true), KC_STATUS_OK);
    kc_shape in;
    kc_model_input_shape(m, &in);
    int64_t n_in = kc__shape_size(&in);
    float *x = kc__model_input_buffer(m);
    kc_rng r;
    kc__rng_seed(&r, 7);
    for (int64_t i = 0; i < B * n_in; i++) x[i] = (float)(kc__rng_uniform(&r) * 2 - 1);
    int w = kc__model_target_width(m);
    float *t = calloc((size_t)B * (size_t)w, sizeof(float)); /* targets (the CPU's device memory is host memory) */
    for (int i = 0; i < B; i++) {
        if (w == 1) t[i] = (float)(i % classes);
        else
            for (int c = 0; c < w; c++) t[i * w + c] = (c == i % classes) ? 1.0f : 0.0f;
    }
    m->batch_targets = t;
    /* analytic */
    m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
    assert_int_equal(kc__model_forward(m, B, true, 42), KC_STATUS_OK);
    assert_int_equal(kc__model_backward_update(m, B, B, false), KC_STATUS_OK);
    float *grad = malloc((size_t)m->n_trainable * sizeof(float));
    memcpy(grad, m->grads, (size_t)m->n_trainable * sizeof(float));
    /* numeric, on every trainable weight of every layer, sampled */
    const double l0 = model_loss(m); /* the loss at the weights: the one-sided differences */
    int checked = 0, kinks = 0;
    for (int li = 0; li < m->n_layers; li++) {
        kc_layer *l = m->layers[li];
        for (int k = 0; k < l->n_weights; k++) {
            kc_weight *wt = &l->w[k];
            if (!kc__weight_trains(l, wt)) continue;
            for (int s = 0; s < 6; s++) {
                int64_t idx = (int64_t)kc__rng_below(&r, (uint64_t)wt->size);
                float old = wt->data[idx];
                const float eps = g_eps;
                wt->data[idx] = old + eps;
                double lp = model_loss(m);
                wt->data[idx] = old - eps;
                double lm = model_loss(m);
                wt->data[idx] = old;
                double num = (lp - lm) / (2.0 * eps);
                double ana = grad[wt->grad - m->grads + idx];
                double tol = 3e-2 * fmax(fabs(ana), fabs(num)) + 2e-3;
                double right = (lp - l0) / eps, left = (l0 - lm) / eps;
                if (fabs(ana - num) > tol && fabs(right - left) > tol && ana >= fmin(left, right) - tol &&
                    ana <= fmax(left, right) + tol) {
                    kinks++; /* not differentiable within eps of here; ana between the two slopes */
                    continue;
                }
                if (fabs(ana - num) > tol)
                    fail_msg("layer '%s' weight '%s'[%lld]: analytic %g, numeric %g", l->name, wt->name, (long long)idx,
                             ana, num);
                checked++;
            }
        }
    }
    assert_true(checked > 0);
    assert_true(kinks * 3 <= checked); /* at most a quarter of the samples skipped */
    free(grad);
    m->batch_targets = NULL;
    free(t);
}

static void test_residual_functional(void **state) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("res", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 2}));
    kc_node c1 = kc_apply(m, KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .padding = "same", .activation = "tanh"), x);
    kc_node c2 = kc_apply(m, KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .padding = "same"), c1);
    kc_node add = kc_merge(m, KC_ADD(), (kc_node[]){c1, c2}, 2); /* c1 feeds two layers */
    kc_node bn = kc_apply(m, KC_BATCHNORM(), add);
    kc_node cat = kc_merge(m, KC_CONCATENATE(), (kc_node[]){bn, c1}, 2); /* c1 feeds a third */
    kc_node p = kc_apply(m, KC_MAXPOOL2D(), cat);
    kc_node f = kc_apply(m, KC_FLATTEN(), p);
    kc_node d = kc_apply(m, KC_DENSE(.units = 5, .activation = "softmax"), f);
    assert_true(d >= 0);
    assert_int_equal(kc_set_output(m, d), KC_STATUS_OK);
    check_model(m, "sparse_categorical_crossentropy", 5);
    assert_true(m->fused_loss);
    kc_model_destroy(m);
}

static void test_same_node_twice(void **state) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("twice", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {8}));
    kc_node h = kc_apply(m, KC_DENSE(.units = 6, .activation = "sigmoid"), x);
    kc_node a = kc_merge(m, KC_ADD(), (kc_node[]){h, h}, 2);
    kc_node o = kc_apply(m, KC_DENSE(.units = 3), a);
    kc_set_output(m, o);
    check_model(m, "mean_squared_error", 3);
    kc_model_destroy(m);
}

static void test_sequential_cnn_categorical(void **state) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("seq", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {7, 7, 1}));
    kc_add(m, KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .activation = "gelu"));
    kc_add(m, KC_AVGPOOL2D(.pool_size = {2, 2}, .padding = "same"));
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.25f));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 4, .activation = "softmax")), KC_STATUS_OK);
    check_model(m, "categorical_crossentropy", 4);
    kc_model_destroy(m);
}

/* Frozen layers between trainable ones (transfer learning): a frozen BatchNormalization runs
 * in inference mode with non-trivial moving statistics, and the gradient of the trainable
 * layer below it goes through its (and a frozen Dense's) input gradient; a frozen branch
 * next to a trainable one gets no gradient of its own. */
static void test_frozen_between_trainable(void **state) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("frozen_mid", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {6}));
    kc_node a = kc_apply(m, KC_DENSE(.name = "low", .units = 5, .activation = "tanh"), x);
    kc_node side = kc_apply(m, KC_DENSE(.name = "side", .units = 5), x);
    kc_node bn = kc_apply(m, KC_BATCHNORM(.name = "bn"), a);
    kc_node mid = kc_apply(m, KC_DENSE(.name = "mid", .units = 5, .activation = "sigmoid"), bn);
    kc_node ln = kc_apply(m, KC_LAYERNORM(.name = "ln"), mid);
    kc_node add = kc_merge(m, KC_ADD(), (kc_node[]){ln, side}, 2);
    kc_node o = kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), add);
    kc_set_output(m, o);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    float stats[2][5] = {{0.3f, -0.2f, 0.1f, 0.5f, -0.4f}, {0.5f, 2.0f, 1.5f, 0.7f, 3.0f}};
    for (int i = 0; i < 2; i++) memcpy(m->layers[bn]->w[2 + i].data, stats[i], sizeof stats[i]);
    assert_int_equal(kc_model_set_trainable(m, "bn", 0), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "mid", 0), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "side", 0), KC_STATUS_OK);
    assert_int_equal(kc_model_set_trainable(m, "ln", 0), KC_STATUS_OK); /* a frozen LayerNormalization too */
    assert_true(m->layers[bn]->w[2].data[0] == 0.3f); /* kept through the new layout */
    check_model(m, "sparse_categorical_crossentropy", 3);
    assert_null(m->layers[side]->w[0].grad);
    assert_null(m->layers[ln]->w[0].grad);
    assert_true(m->plan.needs_grad[bn] && !m->plan.needs_grad[side]);
    kc_model_destroy(m);
}

/* The middle block of bn_relu_chain. */
enum { TRAINED_BN, FROZEN_BN, FROZEN_BN_TRAINED, FROZEN_CONV, FROZEN_LN };

/* Conv, BN, ReLU(1), depthwise, the middle layer ("mid": a batch norm, or for FROZEN_CONV a
 * 1x1 Conv2D, for FROZEN_LN a LayerNormalization; frozen unless TRAINED_BN), Activation(relu),
 * 1x1 conv, BN, ReLU, pooling, softmax; the BN + ReLU fusion on or off. Its gradient checked. */
static kc_model *bn_relu_chain(int kind, bool fuse) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("bn_relu", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 3}));
    x = kc_apply(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .padding = "same"), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    x = kc_apply(m, KC_RELU(.max_value = 1.0f), x);
    x = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same"), x);
    if (kind == FROZEN_CONV) x = kc_apply(m, KC_CONV2D(.name = "mid", .filters = 6, .kernel_size = {1, 1}), x);
    else if (kind == FROZEN_LN) x = kc_apply(m, KC_LAYERNORM(.name = "mid"), x);
    else x = kc_apply(m, KC_BATCHNORM(.name = "mid"), x);
    x = kc_apply(m, KC_ACTIVATION(.activation = "relu"), x);
    x = kc_apply(m, KC_CONV2D(.filters = 6, .kernel_size = {1, 1}), x);
    x = kc_apply(m, KC_BATCHNORM(), x);
    x = kc_apply(m, KC_RELU(), x);
    x = kc_apply(m, KC_GLOBALAVGPOOL2D(), x);
    assert_int_equal(kc_set_output(m, kc_apply(m, KC_DENSE(.units = 3, .activation = "softmax"), x)), KC_STATUS_OK);
    kc_device_opts o = {.cpu_fuse_bn_relu = fuse ? KC_DEFAULT : KC_FALSE};
    assert_int_equal(kc_model_set_device_opts(m, &o), KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    if (kind != TRAINED_BN) assert_int_equal(kc_model_set_trainable(m, "mid", 0), KC_STATUS_OK);
    kc_layer *f = m->layers[kc__name_find(&m->names, m->layers, "mid")];
    if (kind == FROZEN_BN_TRAINED) {
        assert_int_equal(f->n_weights, 4); /* gamma, beta, moving_mean, moving_variance */
        for (int j = 0; j < 6; j++) {      /* the CPU's device memory is host memory */
            f->w[0].data[j] = 0.8f + 0.1f * (float)j;
            f->w[1].data[j] = 0.1f;
            f->w[2].data[j] = 0.1f - 0.05f * (float)j;
            f->w[3].data[j] = 0.5f + 0.3f * (float)j;
        }
    }
    g_eps = 5e-4f;
    check_model(m, "sparse_categorical_crossentropy", 3);
    g_eps = 3e-3f;
    assert_int_equal(f->frozen, kind != TRAINED_BN);
    assert_int_equal(f->relu_after, fuse && kind != FROZEN_CONV && kind != FROZEN_LN); /* fused, or not */
    return m;
}

/* mnv2-speed: BatchNormalization + ReLU pairs fused into one pass (src/model/fuse.c): a ReLU
 * with a clip, an Activation("relu"), a plain ReLU; the gradient through the masked
 * batch-norm backward. test_fuse_bn_relu.c compares with the unfused model, a frozen batch
 * norm included. */
static void test_bn_relu_fused(void **state) {
    kc_model *m = bn_relu_chain(TRAINED_BN, true);
    int absorbed = 0;
    for (int i = 0; i < m->n_layers; i++) absorbed += m->layers[i]->absorbed;
    assert_int_equal(absorbed, 3);
    kc_model_destroy(m);
}

/* Keras's fine-tuning recipe: a frozen BatchNormalization (inference mode, moving statistics,
 * no gradients of its own) and its ReLU between trainable blocks with trainable batch norms;
 * the gradient flows through it to the layers below, fused (the frozen layer's backward masks
 * dy) and not. With the default statistics it maps 0 to 0, and the depthwise outputs are
 * exactly 0 where its window sees only zeros of the ReLU below: the ReLU after it sits on its
 * kink, which the checker must tell from a wrong gradient. FROZEN_BN_TRAINED sets statistics
 * as after training, so that the check sees the scale gamma / sqrt(moving_variance + eps). */
static void test_frozen_bn_relu_between_trainable(void **state) {
    for (int fuse = 1; fuse >= 0; fuse--) {
        kc_model_destroy(bn_relu_chain(FROZEN_BN, fuse));
        kc_model_destroy(bn_relu_chain(FROZEN_BN_TRAINED, fuse));
    }
}

/* The same with a frozen Conv2D or LayerNormalization before the ReLU. */
static void test_frozen_conv_ln_relu_between_trainable(void **state) {
    kc_model_destroy(bn_relu_chain(FROZEN_CONV, true));
    kc_model_destroy(bn_relu_chain(FROZEN_LN, true));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bn_relu_fused),
        cmocka_unit_test(test_residual_functional),
        cmocka_unit_test(test_same_node_twice),
        cmocka_unit_test(test_sequential_cnn_categorical),
        cmocka_unit_test(test_frozen_between_trainable),
        cmocka_unit_test(test_frozen_bn_relu_between_trainable),
        cmocka_unit_test(test_frozen_conv_ln_relu_between_trainable),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
