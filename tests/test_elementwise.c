/* test_elementwise.c — the broadcasting merges, PReLU, the activation layers and Keras 3's
 * operation nodes:
 *   - the CPU backend's broadcasting kernels (cpu_bcast.c) against a plain reference written
 *     here (one output at a time, gradients by their definition in double), for every
 *     operation and the shapes that matter, small and large enough to run on all threads;
 *   - the activations against Keras 3's formulas at chosen points (values computed here
 *     from the definitions in keras/src/activations/activations.py);
 *   - Keras's shape rule for merges (base_merge.py) and its errors, PReLU's alpha shape,
 *     TensorOp's checks, and the Keras JSON errors (an unsupported operation, a regulariser). */
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

#include "bcast_desc.h"

#include "core/core.h"
#include "kerac.h"
#include "layers/layer.h"

static kc_backend *B;

static void assert_contains(const char *s, const char *part) {
    if (!s || !strstr(s, part)) fail_msg("'%s' does not contain '%s'", s ? s : "(null)", part);
}

/* ---------------------------------------------------------------- broadcasting kernels */

static double ref_op(kc_binop op, double a, double b) {
    switch (op) {
    case KC_BIN_ADD: return a + b;
    case KC_BIN_SUB: return a - b;
    case KC_BIN_MUL: return a * b;
    case KC_BIN_DIV: return a / b;
    case KC_BIN_MAX: return a >= b ? a : b;
    case KC_BIN_MIN: return a <= b ? a : b;
    case KC_BIN_PRELU: return a > 0 ? a : b * a;
    default: return NAN;
    }
}

/* d op / d a (side 0) or d b (side 1), by definition */
static double ref_grad(kc_binop op, int side, double a, double b) {
    switch (op) {
    case KC_BIN_ADD: return 1;
    case KC_BIN_SUB: return side ? -1 : 1;
    case KC_BIN_MUL: return side ? a : b;
    case KC_BIN_DIV: return side ? -a / (b * b) : 1 / b;
    case KC_BIN_MAX: return side ? (a >= b ? 0 : 1) : (a >= b ? 1 : 0);
    case KC_BIN_MIN: return side ? (a <= b ? 0 : 1) : (a <= b ? 1 : 0);
    case KC_BIN_PRELU: return side ? (a > 0 ? 0 : a) : (a > 0 ? 1 : b);
    default: return NAN;
    }
}

static float *frand(int64_t n, float lo, float hi, uint64_t seed) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(p);
    uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        p[i] = lo + (hi - lo) * (float)((s >> 11) * (1.0 / 9007199254740992.0));
    }
    return p;
}

/* y = a op b over dims (rank r) with a's and b's shapes (1 where broadcast); the backend's
 * forward and both gradients against the reference. */
static void bcast_case(kc_binop op, int r, const int64_t *dims, const int64_t *as, const int64_t *bs) {
    int64_t an, bn, yn;
    kc_bcast_desc d = bcast_desc(r, dims, as, bs, &an, &bn, &yn);
    float *a = frand(an, -2, 2, 1), *b = frand(bn, 0.5f, 2, 2), *dy = frand(yn, -1, 1, 3);
    float *y = malloc((size_t)yn * 4), *da = malloc((size_t)an * 4), *db = malloc((size_t)bn * 4);
    double *rda = calloc((size_t)an, 8), *rdb = calloc((size_t)bn, 8);
    assert_true(y && da && db && rda && rdb);
    assert_int_equal(B->binary_forward(B, op, &d, a, b, y), KC_STATUS_OK);
    assert_int_equal(B->binary_backward(B, op, &d, a, b, dy, da, db), KC_STATUS_OK);
    for (int64_t i = 0; i < yn; i++) {
        int64_t rem = i, ia = 0, ib = 0;
        for (int k = r - 1; k >= 0; k--) {
            const int64_t q = rem % dims[k];
            rem /= dims[k];
            ia += q * d.sa[k], ib += q * d.sb[k];
        }
        const double want = ref_op(op, a[ia], b[ib]);
        if (fabs(y[i] - want) > 1e-6 * (1 + fabs(want)))
            fail_msg("op %d rank %d: y[%lld] = %g, want %g", (int)op, r, (long long)i, (double)y[i], want);
        rda[ia] += dy[i] * ref_grad(op, 0, a[ia], b[ib]);
        rdb[ib] += dy[i] * ref_grad(op, 1, a[ia], b[ib]);
    }
    for (int64_t i = 0; i < an; i++)
        if (fabs(da[i] - rda[i]) > 1e-4 * (1 + fabs(rda[i])))
            fail_msg("op %d rank %d: da[%lld] = %g, want %g", (int)op, r, (long long)i, (double)da[i], rda[i]);
    for (int64_t i = 0; i < bn; i++)
        if (fabs(db[i] - rdb[i]) > 1e-4 * (1 + fabs(rdb[i])))
            fail_msg("op %d rank %d: db[%lld] = %g, want %g", (int)op, r, (long long)i, (double)db[i], rdb[i]);
    free(a), free(b), free(dy), free(y), free(da), free(db), free(rda), free(rdb);
}

static void test_broadcast_kernels(void **state) {
    (void)state;
    static const struct {
        int r;
        int64_t y[5], a[5], b[5];
    } t[] = {
        {4, {3, 5, 4, 7}, {3, 5, 4, 7}, {3, 5, 4, 7}},        /* same shapes */
        {4, {3, 5, 4, 7}, {3, 5, 4, 7}, {3, 1, 1, 7}},        /* squeeze-and-excite */
        {4, {3, 5, 4, 7}, {3, 1, 1, 7}, {3, 5, 4, 7}},        /* the other way round */
        {4, {3, 5, 4, 7}, {3, 5, 4, 1}, {3, 5, 4, 7}},        /* one channel against many */
        {4, {3, 5, 4, 7}, {3, 5, 4, 7}, {1, 1, 1, 7}},        /* PReLU with shared axes */
        {4, {3, 5, 4, 7}, {3, 5, 1, 1}, {3, 1, 4, 7}},        /* both broadcast */
        {3, {2, 1, 9}, {2, 1, 9}, {2, 1, 1}},                 /* size-1 axes of the output */
        {1, {13}, {13}, {13}},
        {4, {32, 24, 24, 96}, {32, 24, 24, 96}, {32, 1, 1, 96}}, /* MobileNet-sized: every thread */
        {4, {32, 24, 24, 96}, {32, 24, 24, 1}, {32, 24, 24, 96}},
    };
    for (int op = 0; op < KC_BIN_COUNT; op++)
        for (size_t i = 0; i < KC_ARRAY_LEN(t); i++) bcast_case((kc_binop)op, t[i].r, t[i].y, t[i].a, t[i].b);
    kc_bcast_desc bad = {.rank = 0};
    float v = 1;
    assert_int_equal(B->binary_forward(B, KC_BIN_ADD, &bad, &v, &v, &v), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->binary_forward(B, KC_BIN_COUNT, &bad, &v, &v, &v), KC_STATUS_INVALID_ARGUMENT);
}

static void test_scalar_kernels(void **state) {
    (void)state;
    const int64_t n = 100003;
    float *x = frand(n, 0.5f, 3, 4), *dy = frand(n, -1, 1, 5), *y = malloc(n * 4), *dx = malloc(n * 4);
    assert_true(y && dx);
    for (int op = 0; op < KC_BIN_COUNT; op++) {
        if (op == KC_BIN_PRELU) {
            assert_int_equal(B->scalar_forward(B, KC_BIN_PRELU, x, 1, 0, y, n), KC_STATUS_INVALID_ARGUMENT);
            continue;
        }
        for (int first = 0; first <= 1; first++) {
            const float s = first ? 1.25f : 2.0f;
            assert_int_equal(B->scalar_forward(B, (kc_binop)op, x, s, first, y, n), KC_STATUS_OK);
            assert_int_equal(B->scalar_backward(B, (kc_binop)op, x, s, first, dy, dx, n), KC_STATUS_OK);
            for (int64_t i = 0; i < n; i += 97) {
                const double want = first ? ref_op((kc_binop)op, s, x[i]) : ref_op((kc_binop)op, x[i], s);
                /* ties of MAX/MIN go to the tensor */
                double g = first ? ref_grad((kc_binop)op, 1, s, x[i]) : ref_grad((kc_binop)op, 0, x[i], s);
                if (op == KC_BIN_MAX) g = x[i] >= s;
                if (op == KC_BIN_MIN) g = x[i] <= s;
                if (fabs(y[i] - want) > 1e-6 * (1 + fabs(want)) || fabs(dx[i] - dy[i] * g) > 1e-5)
                    fail_msg("scalar op %d first %d at %g: y %g (want %g), dx %g (want %g)", op, first, (double)x[i],
                             (double)y[i], want, (double)dx[i], dy[i] * g);
            }
        }
    }
    free(x), free(dy), free(y), free(dx);
}

/* ---------------------------------------------------------------- activations */

static double act_at(const char *name, double x) {
    kc_act_params p;
    assert_int_equal(kc__act_parse(name, &p), KC_STATUS_OK);
    float in = (float)x, out = 0;
    assert_int_equal(B->act_forward(B, p, &in, &out, 1, 1), KC_STATUS_OK);
    return out;
}

static void test_activation_formulas(void **state) {
    (void)state;
    const double sa = 1.67326324, ss = 1.05070098, c = sqrt(2 / M_PI);
    static const double xs[] = {-4.0, -2.5, -0.3, 0.0, 0.7, 2.0, 3.5, 7.0};
    for (size_t i = 0; i < KC_ARRAY_LEN(xs); i++) {
        const double x = xs[i];
        const double relu6 = fmin(fmax(x + 3, 0), 6);
        const double sp = log1p(exp(x));
        const struct {
            const char *name;
            double want;
        } t[] = {
            {"hard_sigmoid", relu6 / 6},                     /* Keras 3: relu6(x + 3) / 6 */
            {"hard_silu", x * relu6 / 6},
            {"hard_swish", x * relu6 / 6},
            {"softplus", sp},
            {"softsign", x / (1 + fabs(x))},
            {"selu", x > 0 ? ss * x : ss * sa * (exp(x) - 1)},
            {"mish", x * tanh(sp)},
            {"exponential", exp(x)},
            {"gelu_approximate", 0.5 * x * (1 + tanh(c * (x + 0.044715 * x * x * x)))},
            {"gelu", 0.5 * x * (1 + erf(x / sqrt(2)))},
            {"relu6", fmin(fmax(x, 0), 6)},
            {"silu", x / (1 + exp(-x))},
            {"leaky_relu", x > 0 ? x : 0.2 * x},
            {"hard_sigmoid_k2", fmin(fmax(0.2 * x + 0.5, 0), 1)}, /* tf-keras: clip(0.2 x + 0.5, 0, 1) */
        };
        for (size_t k = 0; k < KC_ARRAY_LEN(t); k++) {
            const double got = act_at(t[k].name, x);
            if (fabs(got - t[k].want) > 2e-6 * (1 + fabs(t[k].want)))
                fail_msg("%s(%g) = %.9g, Keras's formula gives %.9g", t[k].name, x, got, t[k].want);
        }
    }
    /* log_softmax over a row: x - logsumexp(x) */
    kc_act_params p;
    assert_int_equal(kc__act_parse("log_softmax", &p), KC_STATUS_OK);
    float x[4] = {1.0f, -2.0f, 0.5f, 30.0f}, y[4];
    assert_int_equal(B->act_forward(B, p, x, y, 4, 4), KC_STATUS_OK);
    double m = 30, s = 0;
    for (int j = 0; j < 4; j++) s += exp(x[j] - m);
    for (int j = 0; j < 4; j++) assert_true(fabs(y[j] - (x[j] - m - log(s))) < 1e-5);
}

/* ---------------------------------------------------------------- shapes and options */

static kc_status make(const kc_layer_spec *spec, int n_in, const kc_shape *in, kc_layer **out) {
    *out = NULL;
    kc_status s = kc__layer_create(spec, out);
    if (s != KC_STATUS_OK) return s;
    snprintf((*out)->name, sizeof (*out)->name, "t");
    (*out)->n_in = n_in;
    for (int i = 0; i < n_in; i++) (*out)->in_shape[i] = in[i];
    return (*out)->ops->build(*out);
}

static kc_shape shp(int rank, int a, int b, int c) { return (kc_shape){rank, {a, b, c}}; }

static void test_merge_shapes(void **state) {
    (void)state;
    kc_layer *l = NULL;
    /* Keras: aligned at the last axis, equal or 1; (C) against (H, W, C) */
    kc_shape in[3] = {shp(3, 4, 4, 8), shp(3, 1, 1, 8), shp(1, 8, 0, 0)};
    assert_int_equal(make(KC_MULTIPLY(), 3, in, &l), KC_STATUS_OK);
    assert_true(kc__shape_eq(&l->out_shape, &in[0]));
    assert_true(l->ops->flops(l) == 4 * 4 * 8 * 2);
    kc__layer_destroy(l);
    kc_shape in2[2] = {shp(3, 4, 1, 8), shp(3, 1, 5, 1)};
    assert_int_equal(make(KC_AVERAGE(), 2, in2, &l), KC_STATUS_OK);
    kc_shape want = shp(3, 4, 5, 8);
    assert_true(kc__shape_eq(&l->out_shape, &want));
    kc__layer_destroy(l);
    kc_shape bad[2] = {shp(3, 4, 4, 8), shp(3, 4, 4, 3)};
    assert_int_equal(make(KC_MAXIMUM(), 2, bad, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Maximum 't'");
    assert_contains(kc_last_error(), "(None, 4, 4, 3)");
    assert_contains(kc_last_error(), "equal or one of them 1");
    kc__layer_destroy(l);
    kc_shape three[3] = {shp(1, 8, 0, 0), shp(1, 8, 0, 0), shp(1, 8, 0, 0)};
    assert_int_equal(make(KC_SUBTRACT(), 3, three, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_contains(kc_last_error(), "exactly 2 inputs");
    kc__layer_destroy(l);
    /* Multiply of 3 needs a workspace for the product of the others; of 2 none */
    assert_int_equal(make(KC_MULTIPLY(), 3, three, &l), KC_STATUS_OK);
    assert_true(l->ops->workspace_bytes(l, 5, B) == 5 * 8 * sizeof(float));
    kc__layer_destroy(l);
    assert_int_equal(make(KC_MULTIPLY(), 2, three, &l), KC_STATUS_OK);
    assert_true(l->ops->workspace_bytes(l, 5, B) == 0);
    kc__layer_destroy(l);
}

static void test_prelu_and_ops(void **state) {
    (void)state;
    kc_layer *l = NULL;
    kc_shape x = shp(3, 5, 6, 4);
    assert_int_equal(make(KC_PRELU(.shared_axes = {.n = 2, .list = 1, .v = {1, 2}}), 1, &x, &l), KC_STATUS_OK);
    kc_shape alpha = shp(3, 1, 1, 4);
    assert_int_equal(l->n_weights, 1);
    assert_string_equal(l->w[0].name, "alpha");
    assert_true(kc__shape_eq(&l->w[0].shape, &alpha));
    assert_string_equal(l->w[0].init, "zeros"); /* Keras's default */
    kc__layer_destroy(l);
    assert_int_equal(make(KC_PRELU(), 1, &x, &l), KC_STATUS_OK);
    assert_true(kc__shape_eq(&l->w[0].shape, &x));
    kc__layer_destroy(l);
    assert_int_equal(make(KC_PRELU(.shared_axes = {.n = 1, .v = {4}}), 1, &x, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "PReLU 't'");
    kc__layer_destroy(l);
    assert_int_equal(make(KC_PRELU(.alpha_initializer = "orthogonal"), 1, &x, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "alpha_initializer 'orthogonal'");
    assert_int_equal(make(KC_LEAKY_RELU(.negative_slope = -1), 1, &x, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_contains(kc_last_error(), "negative_slope");
    assert_int_equal(make(KC_TENSOR_OP(.op = "power", .scalar_side = 1), 1, &x, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "operation 'power'");
    assert_int_equal(make(KC_TENSOR_OP(.op = "add", .scalar_side = 1), 2, (kc_shape[]){x, x}, &l),
                     KC_STATUS_INVALID_ARGUMENT);
    kc__layer_destroy(l);
    kc_shape r2 = shp(2, 6, 4, 0);
    assert_int_equal(make(KC_TENSOR_OP(.op = "multiply"), 2, (kc_shape[]){x, r2}, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "ranks");
    kc__layer_destroy(l);
}

/* A Functional config with one operation node between the input and a Dense. */
static kc_status load_with_node(const char *node_entry, kc_model **m) {
    char text[4096];
    snprintf(text, sizeof text,
             "{\"module\": \"keras.src.models.functional\", \"class_name\": \"Functional\", \"config\": {\"name\": "
             "\"m\", \"trainable\": true, \"layers\": ["
             "{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], "
             "\"dtype\": \"float32\", \"sparse\": false, \"name\": \"x\"}, \"registered_name\": null, \"name\": \"x\", "
             "\"inbound_nodes\": []}, %s], \"input_layers\": [\"x\", 0, 0], \"output_layers\": [\"op\", 0, 0]}, "
             "\"registered_name\": \"Functional\"}",
             node_entry);
    return kc_model_from_json(text, strlen(text), m);
}

#define TENSOR_X "{\"class_name\": \"__keras_tensor__\", \"config\": {\"shape\": [null, 4], \"keras_history\": [\"x\", 0, 0]}}"

static void test_op_node_json(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(load_with_node("{\"module\": \"keras.src.ops.numpy\", \"class_name\": \"TrueDivide\", \"config\": "
                                    "{\"name\": \"op\"}, \"registered_name\": \"TrueDivide\", \"name\": \"op\", "
                                    "\"inbound_nodes\": [{\"args\": [1.5, " TENSOR_X "], \"kwargs\": {}}]}",
                                    &m),
                     KC_STATUS_OK);
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    assert_contains(json, "\"module\": \"keras.src.ops.numpy\", \"class_name\": \"TrueDivide\"");
    assert_contains(json, "\"args\": [1.5, {\"class_name\": \"__keras_tensor__\"");
    free(json);
    kc_model_destroy(m);
    m = NULL;
    assert_int_equal(load_with_node("{\"module\": \"keras.src.ops.numpy\", \"class_name\": \"Power\", \"config\": "
                                    "{\"name\": \"op\"}, \"registered_name\": \"Power\", \"name\": \"op\", "
                                    "\"inbound_nodes\": [{\"args\": [" TENSOR_X ", 2.0], \"kwargs\": {}}]}",
                                    &m),
                     KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "operation 'op' (keras.src.ops.numpy.Power) is not supported");
    assert_int_equal(load_with_node("{\"module\": \"keras.src.ops.numpy\", \"class_name\": \"Add\", \"config\": "
                                    "{\"name\": \"op\"}, \"registered_name\": \"Add\", \"name\": \"op\", "
                                    "\"inbound_nodes\": [{\"args\": [1.0, 2.0], \"kwargs\": {}}]}",
                                    &m),
                     KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "two numbers");
    assert_int_equal(load_with_node("{\"module\": \"keras.layers\", \"class_name\": \"PReLU\", \"config\": {\"name\": "
                                    "\"op\", \"trainable\": true, \"dtype\": \"float32\", \"alpha_initializer\": "
                                    "\"zeros\", \"alpha_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": "
                                    "0.01}}, \"alpha_constraint\": null, \"shared_axes\": null}, \"registered_name\": "
                                    "null, \"name\": \"op\", \"inbound_nodes\": [{\"args\": [" TENSOR_X
                                    "], \"kwargs\": {}}]}",
                                    &m),
                     KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "'op' (PReLU)");
    assert_contains(kc_last_error(), "alpha_regularizer");
}

/* ---------------------------------------------------------------- explicit zeros and flavours */

#define SEQ3(layers)                                                                                               \
    "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "                \
    "\"InputLayer\", \"config\": {\"batch_shape\": [null, 4], \"dtype\": \"float32\", \"sparse\": false, "     \
    "\"name\": \"x\"}}, " layers "]}}"

static void predict4(kc_model *m, const float x[4], float y[4]) {
    assert_int_equal(kc_predict(m, x, 1, 1, y), KC_STATUS_OK);
}

/* LeakyReLU negative_slope 0 and ELU alpha 0 are what a file says, not Keras's defaults. */
static void test_explicit_zero(void **state) {
    (void)state;
    static const char text[] = SEQ3(
        "{\"class_name\": \"LeakyReLU\", \"config\": {\"name\": \"lr\", \"trainable\": true, \"dtype\": "
        "\"float32\", \"negative_slope\": 0.0}}, {\"class_name\": \"ELU\", \"config\": {\"name\": \"e\", "
        "\"trainable\": true, \"dtype\": \"float32\", \"alpha\": 0.0}}");
    kc_model *m = NULL;
    assert_int_equal(kc_model_from_json(text, strlen(text), &m), KC_STATUS_OK);
    const float x[4] = {-2.0f, -1.0f, 1.0f, 2.0f};
    float y[4];
    predict4(m, x, y);
    for (int i = 0; i < 4; i++) assert_true(y[i] == (x[i] > 0 ? x[i] : 0.0f));
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    assert_contains(json, "\"negative_slope\": 0.0");
    assert_contains(json, "\"alpha\": 0.0");
    free(json);
    assert_int_equal(kc_model_to_json(m, 2, &json), KC_STATUS_OK);
    assert_contains(json, "\"LeakyReLU\", \"config\": {\"name\": \"lr\", \"trainable\": true, \"dtype\": \"float32\", "
                          "\"alpha\": 0.0}");
    free(json);
    kc_model_destroy(m);
    /* the C API: 0 alone is Keras's default, 0 with the flag is 0 */
    kc_layer *l = NULL;
    kc_shape s = shp(1, 4, 0, 0);
    const struct {
        kc_layer_spec spec;
        float want;
    } t[] = {
        {*KC_ELU(), 1.0f},
        {*KC_ELU(.alpha_given = 1), 0.0f},
        {*KC_ELU(.alpha = 0.5f), 0.5f},
        {*KC_LEAKY_RELU(), 0.3f},
        {*KC_LEAKY_RELU(.negative_slope_given = 1), 0.0f},
        {*KC_LEAKY_RELU(.negative_slope = 0.1f), 0.1f},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(t); i++) {
        assert_int_equal(make(&t[i].spec, 1, &s, &l), KC_STATUS_OK);
        assert_true(((const kc__act_layer_cfg *)l->cfg)->act.alpha == t[i].want);
        kc__layer_destroy(l);
    }
}

/* Activation layers from a spec, written in one flavour: the JSON, or the save error. */
static kc_status act_json(const char *act, int flavour, char **json) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("s", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_ACTIVATION(.name = "act", .activation = act));
    kc_status s = kc_model_to_json(m, flavour, json);
    kc_model_destroy(m);
    return s;
}

/* tf-keras's hard_sigmoid (clip(0.2 x + 0.5, 0, 1)) differs from Keras 3's; names one
 * Keras cannot read are refused on save, naming the layer and the activation. */
static void test_activation_flavours(void **state) {
    (void)state;
    char *json = NULL;
    /* kerac's Keras 2 file of tf-keras's hard_sigmoid reads back as tf-keras's */
    assert_int_equal(act_json("hard_sigmoid_k2", 2, &json), KC_STATUS_OK);
    assert_contains(json, "\"activation\": \"hard_sigmoid\"");
    assert_null(strstr(json, "_k2"));
    kc_model *m = NULL;
    assert_int_equal(kc_model_from_json(json, strlen(json), &m), KC_STATUS_OK);
    free(json);
    const float x[4] = {-3.0f, -1.0f, 0.5f, 2.0f};
    float y[4];
    predict4(m, x, y);
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], fminf(fmaxf(0.2f * x[i] + 0.5f, 0.0f), 1.0f), 1e-6);
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "layer 'act' (Activation): activation 'hard_sigmoid_k2'");
    kc_model_destroy(m);
    /* a Keras 3 file's hard_sigmoid stays Keras 3's */
    static const char k3[] = SEQ3("{\"class_name\": \"Activation\", \"config\": {\"name\": \"act\", "
                                  "\"trainable\": true, \"dtype\": \"float32\", \"activation\": \"hard_sigmoid\"}}");
    assert_int_equal(kc_model_from_json(k3, strlen(k3), &m), KC_STATUS_OK);
    predict4(m, x, y);
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], fminf(fmaxf(x[i] + 3.0f, 0.0f), 6.0f) / 6.0f, 1e-6);
    assert_int_equal(kc_model_to_json(m, 2, &json), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "layer 'act' (Activation): activation 'hard_sigmoid' cannot be written for Keras 2");
    kc_model_destroy(m);
    /* names tf-keras 2.16 does not know; gelu_approximate, which no Keras config has */
    assert_int_equal(act_json("hard_silu", 2, &json), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "activation 'hard_silu'");
    assert_int_equal(act_json("gelu_approximate", 2, &json), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "layer 'act' (Activation): activation 'gelu_approximate'");
    assert_int_equal(act_json("gelu_approximate", 3, &json), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "activation 'gelu_approximate' cannot be written for Keras 3");
    /* .h5: a model only Keras 3 can express is saved as Keras 3's own .h5 (which Keras 3
     * reads and tf-keras refuses), and reads back the same; one no Keras can express is refused */
    char path[64];
    snprintf(path, sizeof path, "/tmp/kc_test_elementwise_%d.h5", (int)getpid());
    assert_int_equal(kc_sequential("s", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_ACTIVATION(.name = "act", .activation = "hard_silu"));
    assert_int_equal(kc_model_save(m, path), KC_STATUS_OK);
    kc_model_destroy(m);
    assert_int_equal(kc_model_load(path, &m), KC_STATUS_OK);
    predict4(m, x, y);
    for (int i = 0; i < 4; i++) assert_float_equal(y[i], x[i] * fminf(fmaxf(x[i] + 3.0f, 0.0f), 6.0f) / 6.0f, 1e-6);
    kc_model_destroy(m);
    assert_int_equal(kc_sequential("s", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_ACTIVATION(.name = "act", .activation = "gelu_approximate"));
    assert_int_equal(kc_model_save(m, path), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "layer 'act' (Activation): activation 'gelu_approximate'");
    kc_model_destroy(m);
    remove(path);
    /* tf-keras 2.16 reads these (tf.nn's relu6 and log_softmax; swish for silu) */
    static const char *const k2_ok[][2] = {{"relu6", "relu6"}, {"log_softmax", "log_softmax"}, {"silu", "swish"}};
    for (size_t i = 0; i < KC_ARRAY_LEN(k2_ok); i++) {
        assert_int_equal(act_json(k2_ok[i][0], 2, &json), KC_STATUS_OK);
        char want[64];
        snprintf(want, sizeof want, "\"activation\": \"%s\"", k2_ok[i][1]);
        assert_contains(json, want);
        free(json);
    }
}

static int setup(void **state) {
    (void)state;
    return kc_backend_cpu_create(&B) == KC_STATUS_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    kc_backend_destroy(B);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_broadcast_kernels), cmocka_unit_test(test_scalar_kernels),
        cmocka_unit_test(test_activation_formulas), cmocka_unit_test(test_merge_shapes),
        cmocka_unit_test(test_prelu_and_ops),       cmocka_unit_test(test_op_node_json),
        cmocka_unit_test(test_explicit_zero),       cmocka_unit_test(test_activation_flavours),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
