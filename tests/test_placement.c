/* test_placement.c — what a model learns from its backend (src/model/device.c) and the two
 * backend entries behind it (kerac_backend.h, ABI 3):
 *   - describe on the CPU names the kernel that runs: each label is checked against the
 *     kernel's behaviour, not against the rule that chose it (the direct kernel's forward
 *     needs no workspace and its backward-filter does; a 1x1 convolution needs none in
 *     either; im2col + GEMM needs one in both). The cases include a first convolution with
 *     24 filters on one channel: a small patch, but not a multiple of 16 filters, so it runs
 *     im2col + GEMM (the placement log used to call it the direct kernel);
 *   - the placement lines use the backend's describe, with the layer's descriptor and the
 *     plan's workspace, on the CPU and through a wrapper that stands in for a GPU backend;
 *   - supports: a backend that lacks an operation makes the model fail when it is built (or,
 *     for the loss and the optimizer, compiled), with the layer named, before any training;
 *   - the fit hooks, on the CPU: placement lines once, GPU readings absent, the input-bound
 *     verdict. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "backend/cpu/cpu.h"
#include "layers/layer.h"
#include "model/device.h"
#include "model/model.h"

static void expect_in(const char *text, const char *word, int line) {
    if (!text || !strstr(text, word)) fail_msg("line %d: expected \"%s\" in: %s", line, word, text ? text : "(null)");
}
#define EXPECT_IN(text, word) expect_in((text), (word), __LINE__)

typedef struct captured {
    char text[16384];
} captured;

static void capture(kc_log_level level, const char *msg, void *user) {
    (void)level;
    captured *c = user;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "%s\n", msg);
}

/* ---------------------------------------------------------------- the CPU's kernels */

typedef enum { RAN_1X1, RAN_DIRECT, RAN_IM2COL } ran_kernel;

/* Which kernel the CPU runs for d, from what its calls do without a workspace. */
static ran_kernel kernel_that_runs(kc_backend *be, const kc_conv2d_desc *d) {
    size_t nx = (size_t)d->n * d->h * d->w * d->c, ny = (size_t)d->n * d->oh * d->ow * d->f;
    size_t nw = (size_t)d->kh * d->kw * d->c * d->f;
    float *x = calloc(nx, sizeof(float)), *y = calloc(ny, sizeof(float)), *w = calloc(nw, sizeof(float));
    float *dw = calloc(nw, sizeof(float));
    assert_true(x && y && w && dw);
    bool fwd = be->conv2d_forward(be, d, x, w, NULL, y, NULL, 0) == KC_STATUS_OK;
    bool bwf = be->conv2d_backward_filter(be, d, x, y, dw, NULL, NULL, 0) == KC_STATUS_OK;
    free(x);
    free(y);
    free(w);
    free(dw);
    if (fwd && bwf) return RAN_1X1;
    if (fwd) return RAN_DIRECT;
    assert_false(bwf); /* no kernel needs a workspace forward and none backward */
    return RAN_IM2COL;
}

static ran_kernel kernel_of_label(const char *label) {
    if (strstr(label, "cpu 1x1 conv")) return RAN_1X1;
    if (strstr(label, "cpu direct conv")) return RAN_DIRECT;
    if (strstr(label, "cpu winograd")) return RAN_IM2COL; /* like im2col: a workspace forward and backward */
    if (!strstr(label, "cpu im2col+gemm")) fail_msg("not a CPU convolution label: %s", label);
    return RAN_IM2COL;
}

static kc_conv2d_desc conv(int n, int h, int w, int c, int f, int k, int stride, int pad) {
    int oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
    return (kc_conv2d_desc){.n = n, .h = h, .w = w, .c = c, .f = f, .kh = k, .kw = k, .sh = stride, .sw = stride,
                            .dh = 1, .dw = 1, .pad_top = pad, .pad_left = pad, .oh = oh, .ow = ow};
}

static void test_cpu_describe_names_the_kernel_run(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    const struct {
        kc_conv2d_desc d;
        ran_kernel want;
        int tile; /* the Winograd tile the label names (0: none) */
    } cases[] = {
        {conv(4, 12, 12, 1, 32, 3, 1, 0), RAN_DIRECT}, /* the default CNN's first layer */
        {conv(4, 12, 12, 1, 24, 3, 1, 0), RAN_IM2COL}, /* small patch, 24 filters: not the direct kernel */
        {conv(4, 12, 12, 3, 16, 3, 1, 1), RAN_DIRECT}, /* RGB, 27 <= 32 */
        {conv(4, 12, 12, 4, 16, 3, 1, 0), RAN_IM2COL}, /* 36 > 32 */
        {conv(4, 12, 12, 8, 16, 3, 1, 0), RAN_IM2COL},
        {conv(4, 12, 12, 8, 4, 1, 1, 0), RAN_1X1},
        {conv(4, 12, 12, 8, 32, 1, 2, 0), RAN_DIRECT}, /* 1x1 kernel, stride 2: not one GEMM */
        {conv(4, 12, 12, 40, 8, 1, 2, 0), RAN_IM2COL}, /* the same with 40 channels */
        {conv(4, 12, 12, 1, 300, 3, 1, 0), RAN_IM2COL},
        {conv(4, 12, 12, 1, 256, 3, 1, 0), RAN_DIRECT},
        {conv(4, 12, 12, 1, 512, 3, 1, 0), RAN_DIRECT}, /* the old label said im2col past 256 filters */
        /* Winograd (3x3 stride 1) by cost (cpu.h, KC_CPU_WINOGRAD_U_TILES): */
        {conv(32, 8, 8, 64, 64, 3, 1, 1), RAN_IM2COL, 4},   /* 4 F(4x4) tiles an image */
        {conv(32, 12, 12, 32, 32, 3, 1, 1), RAN_IM2COL, 4}, /* F(4x4) from 32 channels */
        {conv(32, 6, 6, 32, 32, 3, 1, 1), RAN_IM2COL, 3},   /* 6x6 outputs: 4 F(3x3) tiles, 4 F(4x4) wasting 44 % */
        {conv(32, 6, 6, 16, 32, 3, 1, 1), RAN_IM2COL, 0},   /* 16 channels: too narrow */
        {conv(2, 8, 8, 64, 64, 3, 1, 1), RAN_IM2COL, 0},    /* 2 images: transforming U costs more */
        {conv(8, 3, 3, 512, 512, 3, 1, 1), RAN_IM2COL, 0},  /* one F(3x3) tile an image: U dominates */
        {conv(32, 3, 3, 512, 512, 3, 1, 1), RAN_IM2COL, 3}, /* ResNet50's stage 5 at 96x96 */
        {conv(128, 3, 3, 512, 512, 3, 1, 1), RAN_IM2COL, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const kc_conv2d_desc *d = &cases[i].d;
        char label[256];
        size_t ws = be->conv2d_workspace(be, d);
        assert_int_equal(be->describe(be, KC_OP_CONV2D, d, ws, label, sizeof label), KC_STATUS_OK);
        ran_kernel ran = kernel_that_runs(be, d);
        print_message("    %dx%dx%d, %d filters %dx%d stride %d: %s\n", d->h, d->w, d->c, d->f, d->kh, d->kw, d->sh,
                      label);
        if (kernel_of_label(label) != ran)
            fail_msg("case %zu: the label says \"%s\" but the kernel that runs is %s", i, label,
                     ran == RAN_1X1 ? "the 1x1 GEMM" : ran == RAN_DIRECT ? "the direct kernel" : "im2col + GEMM");
        assert_int_equal(ran, cases[i].want);
        char want_label[32];
        snprintf(want_label, sizeof want_label, "cpu winograd F(%dx%d,3x3)", cases[i].tile, cases[i].tile);
        assert_int_equal(strstr(label, "cpu winograd") != NULL, cases[i].tile != 0);
        if (cases[i].tile) EXPECT_IN(label, want_label);
    }
    /* a call with too little workspace would fail: so does its description */
    kc_conv2d_desc d = conv(4, 12, 12, 8, 16, 3, 1, 0);
    char label[256];
    assert_int_equal(be->describe(be, KC_OP_CONV2D, &d, 16, label, sizeof label), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_IN(kc_last_error(), "too small");
    assert_int_equal(be->describe(be, KC_OP_CONV2D, NULL, 0, label, sizeof label), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->describe(be, KC_OP_COUNT, NULL, 0, label, sizeof label), KC_STATUS_INVALID_ARGUMENT);
    kc_pool2d_desc p = {.kind = KC_POOL_AVG};
    assert_int_equal(be->describe(be, KC_OP_POOL2D, &p, 0, label, sizeof label), KC_STATUS_OK);
    assert_string_equal(label, "cpu average pooling");
    assert_int_equal(be->describe(be, KC_OP_GEMM, NULL, 0, label, 8), KC_STATUS_OK); /* truncated, terminated */
    assert_string_equal(label, "cpu gem");
    for (int op = 0; op < KC_OP_COUNT; op++) assert_int_equal(be->supports(be, (kc_op)op), 1);
    assert_int_equal(be->supports(be, KC_OP_COUNT), 0);
    kc_backend_destroy(be);
}

/* ---------------------------------------------------------------- placement lines */

static kc_model *placement_model(void) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("p", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {12, 12, 1}));
    kc_add(m, KC_CONV2D(.name = "first", .filters = 24, .kernel_size = {3, 3})); /* 3*3*1, 24 filters: im2col */
    kc_add(m, KC_CONV2D(.name = "wide", .filters = 16, .kernel_size = {3, 3}));  /* 3*3*24: im2col */
    kc_add(m, KC_CONV2D(.name = "pointwise", .filters = 4, .kernel_size = {1, 1})); /* 1x1 */
    kc_add(m, KC_MAXPOOL2D(.name = "pool"));
    kc_add(m, KC_FLATTEN(.name = "flat"));
    assert_int_equal(kc_add(m, KC_DENSE(.name = "out", .units = 3)), KC_STATUS_OK);
    return m;
}

static void test_placement_lines_cpu(void **state) {
    (void)state;
    kc_model *m = placement_model();
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    assert_int_equal(m->n_layers, 7);
    char line[1536];
    const char *expect[] = {"placement: input_layer (InputLayer) on cpu: the input (batch copied to cpu)",
                            "placement: first (Conv2D) on cpu: cpu im2col+gemm (OpenBLAS, patch 3x3x1, ",
                            "placement: wide (Conv2D) on cpu: cpu im2col+gemm (OpenBLAS, patch 3x3x24, ",
                            "placement: pointwise (Conv2D) on cpu: cpu 1x1 conv as one gemm (OpenBLAS); workspace 0 B",
                            "placement: pool (MaxPooling2D) on cpu: cpu max pooling; workspace 0 B",
                            "placement: flat (Flatten) on cpu: no kernel (a view of its input); workspace 0 B",
                            "placement: out (Dense) on cpu: cpu gemm (OpenBLAS); workspace 0 B"};
    for (int i = 0; i < m->n_layers; i++) {
        kc__placement_describe(m->be, m->layers[i], 32, 0, line, sizeof line);
        EXPECT_IN(line, expect[i]);
    }
    /* every convolution's label against the kernel that runs for the layer's own descriptor */
    for (int i = 1; i <= 3; i++) {
        kc_conv2d_desc d;
        m->layers[i]->ops->backend_desc(m->layers[i], 32, &d);
        kc__placement_describe(m->be, m->layers[i], 32, 0, line, sizeof line);
        assert_int_equal(kernel_of_label(strstr(line, "on cpu: ") + 8), kernel_that_runs(m->be, &d));
    }
    /* logged only when placement logging is on, whatever the level */
    captured cap = {.text = ""};
    kc_log_set_callback(capture, &cap);
    kc_log_level old = kc_log_get_level();
    kc_log_set_level(KC_LOG_ERROR);
    kc_set_log_device_placement(0);
    kc__placement_layer(m->be, m->layers[1], 32, 0);
    assert_string_equal(cap.text, "");
    kc_set_log_device_placement(1);
    kc__placement_layer(m->be, m->layers[1], 32, 0);
    EXPECT_IN(cap.text, "placement: first (Conv2D) on cpu: cpu im2col+gemm");
    kc_set_log_device_placement(0);
    kc_log_set_level(old);
    kc_log_set_callback(NULL, NULL);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- wrapped backends */

/* The CPU backend's table under another name; supports and describe replaced. */
static struct {
    kc_backend *inner;
    unsigned lacking;    /* KC_OP_BIT of the operations it says it lacks */
    int described;       /* describe calls */
    kc_op last_op;
    kc_conv2d_desc last_conv;
    size_t last_ws;
} W;

static int wrap_supports(kc_backend *be, kc_op op) {
    (void)be;
    return op >= 0 && op < KC_OP_COUNT && !(W.lacking & KC_OP_BIT(op));
}

static kc_status wrap_describe(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n) {
    (void)be;
    W.described++;
    W.last_op = op;
    W.last_ws = ws_bytes;
    if (op == KC_OP_CONV2D) {
        W.last_conv = *(const kc_conv2d_desc *)desc;
        snprintf(buf, n, "gpu algo %d filters, ws %zu", W.last_conv.f, ws_bytes);
        return KC_STATUS_OK;
    }
    if (op == KC_OP_POOL2D) return kc__fail(KC_STATUS_DEVICE, "the stand-in cannot say");
    snprintf(buf, n, "gpu op %d", (int)op);
    return KC_STATUS_OK;
}

static void wrap_destroy(kc_backend *be) {
    kc_backend_destroy(W.inner);
    free(be);
}

static kc_backend *wrapped(const char *device, unsigned lacking) {
    memset(&W, 0, sizeof W);
    W.lacking = lacking;
    assert_int_equal(kc_backend_cpu_create(&W.inner), KC_STATUS_OK);
    kc_backend *be = malloc(sizeof *be);
    assert_non_null(be);
    *be = *W.inner;
    be->name = "wrapped";
    snprintf(be->device, sizeof be->device, "%s", device);
    be->destroy = wrap_destroy;
    be->supports = wrap_supports;
    be->describe = wrap_describe;
    return be;
}

/* The placement lines ask the backend, with the layer's descriptor and the plan's workspace. */
static void test_placement_asks_the_backend(void **state) {
    (void)state;
    kc_model *m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", 0);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    char line[1536];
    kc__placement_describe(m->be, m->layers[2], 32, 12345, line, sizeof line);
    EXPECT_IN(line, "placement: wide (Conv2D) on cuda:0 (stand-in): gpu algo 16 filters, ws 12345; workspace ");
    assert_int_equal(W.last_op, KC_OP_CONV2D);
    assert_int_equal(W.last_conv.n, 32);
    assert_int_equal(W.last_conv.c, 24);
    assert_int_equal(W.last_conv.kh, 3);
    assert_int_equal(W.last_ws, 12345);
    kc__placement_describe(m->be, m->layers[1], 8, 0, line, sizeof line); /* 0: the layer's own workspace */
    assert_int_equal(W.last_conv.n, 8);
    assert_int_equal(W.last_ws, m->layers[1]->ops->workspace_bytes(m->layers[1], 8, m->be));
    kc__placement_describe(m->be, m->layers[6], 32, 0, line, sizeof line);
    EXPECT_IN(line, "placement: out (Dense) on cuda:0 (stand-in): gpu op 3;"); /* KC_OP_GEMM */
    kc__placement_describe(m->be, m->layers[4], 32, 0, line, sizeof line); /* describe fails: said so */
    EXPECT_IN(line, "placement: pool (MaxPooling2D) on cuda:0 (stand-in): pooling, not described: the stand-in cannot say");
    int calls = W.described;
    kc__placement_describe(m->be, m->layers[5], 32, 0, line, sizeof line); /* Flatten: nothing to ask */
    assert_int_equal(W.described, calls);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- supports */

static void test_backend_lacking_an_operation(void **state) {
    (void)state;
    /* no pooling: building the model fails, naming the layer */
    kc_model *m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", KC_OP_BIT(KC_OP_POOL2D));
    kc_status s = kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy"});
    assert_int_equal(s, KC_STATUS_UNSUPPORTED);
    print_message("    %s\n", kc_last_error());
    EXPECT_IN(kc_last_error(), "model 'p': layer 'pool' (MaxPooling2D) needs the pooling operations, which the wrapped "
                               "backend (cuda:0 (stand-in)) does not have");
    assert_false(m->built);
    assert_null(m->params); /* nothing allocated */
    assert_int_equal(kc_model_build(m), KC_STATUS_UNSUPPORTED); /* sticky, as every build error */
    kc_model_destroy(m);

    /* no activation: Dense (and Conv2D) need it even when linear here */
    m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", KC_OP_BIT(KC_OP_ACTIVATION));
    assert_int_equal(kc_model_build(m), KC_STATUS_UNSUPPORTED);
    EXPECT_IN(kc_last_error(), "layer 'first' (Conv2D) needs the activation operations");
    kc_model_destroy(m);

    /* no optimizer: the model builds and predicts; compile says why it cannot train */
    m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", KC_OP_BIT(KC_OP_OPTIMIZER));
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_UNSUPPORTED);
    EXPECT_IN(kc_last_error(), "model 'p': training needs the optimizer operations, which the wrapped backend");
    kc_model_destroy(m);

    /* a backend that does not say what it supports has nothing */
    m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", 0);
    m->be->supports = NULL;
    assert_int_equal(kc_model_build(m), KC_STATUS_UNSUPPORTED);
    EXPECT_IN(kc_last_error(), "layer 'first' (Conv2D) needs the convolution operations");
    kc_model_destroy(m);

    /* a model whose layers the backend has trains */
    m = placement_model();
    m->be = wrapped("cuda:0 (stand-in)", KC_OP_BIT(KC_OP_BATCHNORM) | KC_OP_BIT(KC_OP_DROPOUT));
    assert_int_equal(kc_compile(m, NULL), KC_STATUS_OK);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- fit hooks */

/* The hooks kc_fit calls (src/model/device.c), on the CPU. */
static void test_fit_hooks(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("hooks", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {6, 6, 1}));
    kc_add(m, KC_CONV2D(.name = "c", .filters = 16, .kernel_size = {3, 3}));
    kc_add(m, KC_FLATTEN());
    assert_int_equal(kc_add(m, KC_DENSE(.name = "d", .units = 2, .activation = "softmax")), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy"}), KC_STATUS_OK);
    captured cap = {.text = ""};
    kc_log_set_callback(capture, &cap);
    kc_log_level old = kc_log_get_level();
    kc_log_set_level(KC_LOG_INFO);
    kc_set_log_device_placement(1);
    kc__fit_env e;
    kc__fit_env_begin(&e, m);
    assert_null(e.mon); /* the CPU: no GPU readings */
    kc__fit_env_epoch_begin(&e);
    kc_batch_logs bl = {.has_gpu = 7};
    kc__fit_env_step(&e, m, 16, &bl);
    assert_int_equal(bl.has_gpu, 0);
    kc__fit_env_step(&e, m, 16, &bl); /* placement lines only once */
    kc_epoch_logs el = {.epoch = 0, .seconds = 4.0, .has_gpu = 7};
    kc__fit_env_epoch_end(&e, m, 2.0, &el);
    assert_int_equal(el.has_gpu, 0);
    assert_true(el.input_wait_seconds == 2.0);
    kc__fit_env_end(&e, m);
    kc_set_log_device_placement(0);
    kc_log_set_level(old);
    kc_log_set_callback(NULL, NULL);
    print_message("%s", cap.text);
    EXPECT_IN(cap.text, "placement: c (Conv2D) on cpu: cpu direct conv (patch 3x3x1, 16 filters)");
    EXPECT_IN(cap.text, "placement: d (Dense) on cpu: cpu gemm (OpenBLAS)");
    const char *first = strstr(cap.text, "placement: d (Dense)");
    assert_null(strstr(first + 1, "placement: d (Dense)"));
    EXPECT_IN(cap.text, "model 'hooks', epoch 1: the CPU waited for data 50% of the step time; raise --prefetch or use "
                        "more loader threads");
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_describe_names_the_kernel_run),
        cmocka_unit_test(test_placement_lines_cpu),
        cmocka_unit_test(test_placement_asks_the_backend),
        cmocka_unit_test(test_backend_lacking_an_operation),
        cmocka_unit_test(test_fit_hooks),
    };
    return cmocka_run_group_tests_name("placement", tests, NULL, NULL);
}
