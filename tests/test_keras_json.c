/* test_keras_json.c — Keras's JSON model config: reading Keras 2 and Keras 3 files
 * (Sequential, Keras 2.0's bare list, Functional with Add and Concatenate), writing both
 * flavours, read -> write -> read round trips, byte-stable output, model files, and every
 * error case with its status and message. Fixtures: tests/fixtures/json/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "io/io.h"
#include "kerac.h"

/* ---------------------------------------------------------------- helpers */

static char *fixture_text(const char *name) {
    char path[2048];
    const char *src = getenv("KERAC_SOURCE_DIR");
    if (src && *src) {
        snprintf(path, sizeof path, "%s/tests/fixtures/json/%s", src, name);
    } else { /* beside this file */
        const char *f = __FILE__, *slash = strrchr(f, '/');
        snprintf(path, sizeof path, "%.*s/fixtures/json/%s", slash ? (int)(slash - f) : 1, slash ? f : ".", name);
    }
    char *text = NULL;
    size_t len = 0;
    if (kc__read_file(path, &text, &len) != KC_STATUS_OK) fail_msg("fixture: %s", kc_last_error());
    return text;
}

/* text with the first `find` replaced by `repl` (the test fails when `find` is absent) */
static char *replace_first(const char *text, const char *find, const char *repl) {
    const char *at = strstr(text, find);
    if (!at) fail_msg("fixture does not contain '%s'", find);
    size_t n = strlen(text), nf = strlen(find), nr = strlen(repl);
    char *out = malloc(n - nf + nr + 1);
    assert_non_null(out);
    size_t pre = (size_t)(at - text);
    memcpy(out, text, pre);
    memcpy(out + pre, repl, nr);
    memcpy(out + pre + nr, at + nf, n - pre - nf + 1);
    return out;
}

static kc_model *load_text(const char *text) {
    kc_model *m = NULL;
    kc_status s = kc_model_from_json(text, strlen(text), &m);
    if (s != KC_STATUS_OK) fail_msg("kc_model_from_json: %s: %s", kc_status_name(s), kc_last_error());
    assert_non_null(m);
    return m;
}

static kc_model *load_fixture(const char *name) {
    char *text = fixture_text(name);
    kc_model *m = load_text(text);
    free(text);
    return m;
}

static char *to_json(kc_model *m, int flavour) {
    char *out = NULL;
    kc_status s = kc_model_to_json(m, flavour, &out);
    if (s != KC_STATUS_OK) fail_msg("kc_model_to_json(%d): %s: %s", flavour, kc_status_name(s), kc_last_error());
    assert_non_null(out);
    return out;
}

typedef struct want_layer {
    const char *name, *class_name;
    int rank, dims[4];
    int64_t params;
} want_layer;

static void check_layers(kc_model *m, const want_layer *w, int n) {
    assert_int_equal(kc_model_num_layers(m), n);
    for (int i = 0; i < n; i++) {
        kc_layer_info info;
        assert_int_equal(kc_model_layer_info(m, i, &info), KC_STATUS_OK);
        assert_string_equal(info.name, w[i].name);
        assert_string_equal(info.class_name, w[i].class_name);
        assert_int_equal(info.output_shape.rank, w[i].rank);
        for (int d = 0; d < w[i].rank; d++) assert_int_equal(info.output_shape.dim[d], w[i].dims[d]);
        assert_int_equal(info.params, w[i].params);
    }
}

static void check_inputs(kc_model *m, int index, int n, const char *const *names) {
    kc_layer_info info;
    assert_int_equal(kc_model_layer_info(m, index, &info), KC_STATUS_OK);
    assert_int_equal(info.num_inputs, n);
    for (int k = 0; k < n; k++) assert_string_equal(info.inputs[k], names[k]);
}

static void same_str(const char *a, const char *b) {
    if (!a || !b) assert_ptr_equal(a, b);
    else assert_string_equal(a, b);
}

/* Every option the JSON tables know, compared field by field. */
static void same_opts(const kc_layer_ops *ops, const kc__layer_opts *a, const kc__layer_opts *b) {
    same_str(a->input_layer.name, b->input_layer.name);
    for (int i = 0; i < ops->n_keras_keys; i++) {
        const kc__field *f = &ops->keras_keys[i];
        if (f->off == KC_F_NO_OFFSET) continue;
        const char *pa = (const char *)a + f->off, *pb = (const char *)b + f->off;
        switch (f->kind) {
        case KC_F_INT:
        case KC_F_BOOL:
        case KC_F_AXIS: assert_int_equal(*(const int *)pa, *(const int *)pb); break;
        case KC_F_INT2:
        case KC_F_POOL_STRIDES: assert_memory_equal(pa, pb, 2 * sizeof(int)); break;
        case KC_F_FLOAT:
        case KC_F_FLOAT_GIVEN:
        case KC_F_MAX_VALUE: assert_true(*(const float *)pa == *(const float *)pb); break;
        case KC_F_NAME:
        case KC_F_STR:
        case KC_F_ACT:
        case KC_F_INIT: same_str(*(const char *const *)pa, *(const char *const *)pb); break;
        case KC_F_SHAPE:
        case KC_F_BATCH_SHAPE: assert_memory_equal(pa, pb, KC_MAX_RANK * sizeof(int)); break;
        case KC_F_SEED: assert_true(*(const uint64_t *)pa == *(const uint64_t *)pb); break;
        case KC_F_PAD2: assert_memory_equal(pa, pb, 4 * sizeof(int)); break;
        default: break;
        }
    }
}

/* Same layers, options, shapes, parameters and wiring. */
static void same_model(kc_model *a, kc_model *b) {
    assert_string_equal(kc_model_name(a), kc_model_name(b));
    assert_int_equal(a->sequential, b->sequential);
    assert_int_equal(kc_model_num_layers(a), kc_model_num_layers(b));
    assert_int_equal(kc__model_output(a), kc__model_output(b));
    for (int i = 0; i < kc_model_num_layers(a); i++) {
        kc_layer_info ia, ib;
        assert_int_equal(kc_model_layer_info(a, i, &ia), KC_STATUS_OK);
        assert_int_equal(kc_model_layer_info(b, i, &ib), KC_STATUS_OK);
        assert_string_equal(ia.name, ib.name);
        assert_string_equal(ia.class_name, ib.class_name);
        assert_int_equal(ia.output_shape.rank, ib.output_shape.rank);
        assert_memory_equal(ia.output_shape.dim, ib.output_shape.dim, sizeof ia.output_shape.dim);
        assert_int_equal(ia.params, ib.params);
        assert_int_equal(ia.trainable_params, ib.trainable_params);
        assert_int_equal(ia.num_inputs, ib.num_inputs);
        for (int k = 0; k < ia.num_inputs; k++) assert_string_equal(ia.inputs[k], ib.inputs[k]);
        const kc_layer *la = kc__model_layer(a, i), *lb = kc__model_layer(b, i);
        kc__layer_opts oa, ob;
        memset(&oa, 0, sizeof oa);
        memset(&ob, 0, sizeof ob);
        la->ops->get_opts(la, &oa);
        lb->ops->get_opts(lb, &ob);
        const kc_layer_ops *ops = kc__layer_find(ia.class_name);
        assert_non_null(ops);
        same_opts(ops, &oa, &ob);
    }
}

/* read -> write(f) -> read gives the same model; write is byte-stable; the other flavour
 * agrees too. */
static void check_round_trip(kc_model *m) {
    for (int f = 2; f <= 3; f++) {
        char *w1 = to_json(m, f);
        kc_model *m2 = load_text(w1);
        same_model(m, m2);
        char *w2 = to_json(m2, f);
        assert_string_equal(w1, w2);
        char *other1 = to_json(m, 5 - f), *other2 = to_json(m2, 5 - f);
        assert_string_equal(other1, other2);
        free(other1);
        free(other2);
        free(w2);
        free(w1);
        kc_model_destroy(m2);
    }
}

static json_t *parse(const char *text) {
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);
    if (!j) fail_msg("writer output is not JSON: line %d: %s", e.line, e.text);
    return j;
}

/* ---------------------------------------------------------------- reading */

static const want_layer k_cnn_layers[] = {
    {"input_1", "InputLayer", 3, {28, 28, 1}, 0},
    {"conv2d", "Conv2D", 3, {26, 26, 32}, 320},
    {"max_pooling2d", "MaxPooling2D", 3, {13, 13, 32}, 0},
    {"conv2d_1", "Conv2D", 3, {11, 11, 64}, 18496},
    {"max_pooling2d_1", "MaxPooling2D", 3, {5, 5, 64}, 0},
    {"flatten", "Flatten", 1, {1600}, 0},
    {"dropout", "Dropout", 1, {1600}, 0},
    {"dense", "Dense", 1, {10}, 16010},
};

static void test_keras2_sequential(void **state) {
    (void)state;
    kc_model *m = load_fixture("keras2_sequential_cnn.json");
    check_layers(m, k_cnn_layers, 8);
    assert_string_equal(kc_model_name(m), "mnist_convnet");
    assert_true(m->sequential);
    const kc_layer *conv = kc__model_layer(m, 1);
    kc_conv2d_opts o;
    conv->ops->get_opts(conv, &o);
    assert_int_equal(o.filters, 32);
    assert_int_equal(o.kernel_size[0], 3);
    assert_string_equal(o.activation, "relu");
    assert_string_equal(o.kernel_initializer, "glorot_uniform");
    const kc_layer *drop = kc__model_layer(m, 6);
    kc_dropout_opts d;
    drop->ops->get_opts(drop, &d);
    assert_true(d.rate == 0.5f);
    check_round_trip(m);
    kc_model_destroy(m);
}

static char g_info[4096];
static void capture_log(kc_log_level level, const char *msg, void *user) {
    (void)user;
    if (level == KC_LOG_INFO && strlen(g_info) + strlen(msg) + 2 < sizeof g_info) {
        strcat(g_info, msg);
        strcat(g_info, "\n");
    }
}

static void test_keras3_sequential(void **state) {
    (void)state;
    g_info[0] = '\0';
    kc_log_level old = kc_log_get_level();
    kc_log_set_callback(capture_log, NULL);
    kc_log_set_level(KC_LOG_INFO);
    kc_model *m = load_fixture("keras3_sequential_cnn.json");
    kc_log_set_callback(NULL, NULL);
    kc_log_set_level(old);
    /* the initializer's seed is accepted and said at info level */
    assert_non_null(strstr(g_info, "conv2d"));
    assert_non_null(strstr(g_info, "seed 42"));
    want_layer w[8];
    memcpy(w, k_cnn_layers, sizeof w);
    w[0].name = "input_layer";
    check_layers(m, w, 8);
    const kc_layer *conv = kc__model_layer(m, 1);
    kc_conv2d_opts o;
    conv->ops->get_opts(conv, &o);
    assert_string_equal(o.kernel_initializer, "he_normal"); /* {"class_name": "HeNormal", ...} */
    assert_string_equal(o.bias_initializer, "zeros");
    check_round_trip(m);
    kc_model_destroy(m);
}

static void test_keras20_list(void **state) {
    (void)state;
    kc_model *m = load_fixture("keras20_sequential_list.json");
    /* the input shape rides on the first layer: an InputLayer comes first */
    static const want_layer w[] = {
        {"input_layer", "InputLayer", 3, {28, 28, 1}, 0},
        {"conv2d_1", "Conv2D", 3, {28, 28, 8}, 80},
        {"max_pooling2d_1", "MaxPooling2D", 3, {14, 14, 8}, 0},
        {"flatten_1", "Flatten", 1, {1568}, 0},
        {"dense_1", "Dense", 1, {10}, 15680}, /* use_bias false */
    };
    check_layers(m, w, 5);
    const kc_layer *conv = kc__model_layer(m, 1);
    kc_conv2d_opts o;
    conv->ops->get_opts(conv, &o);
    assert_int_equal(o.kernel_size[0], 3); /* "kernel_size": 3 */
    assert_int_equal(o.kernel_size[1], 3);
    assert_int_equal(o.strides[1], 1);
    assert_string_equal(o.padding, "same");
    assert_string_equal(o.kernel_initializer, "glorot_uniform"); /* VarianceScaling(1, fan_avg, uniform) */
    const kc_layer *pool = kc__model_layer(m, 2);
    kc_pool2d_opts p;
    pool->ops->get_opts(pool, &p);
    assert_int_equal(p.pool_size[1], 2);
    assert_int_equal(p.strides[0], 2); /* null: pool_size */
    const kc_layer *dense = kc__model_layer(m, 4);
    kc_dense_opts d;
    dense->ops->get_opts(dense, &d);
    assert_string_equal(d.kernel_initializer, "he_normal"); /* VarianceScaling(2, fan_in, normal) */
    assert_int_equal(d.use_bias, KC_FALSE);
    check_round_trip(m);
    kc_model_destroy(m);
}

/* EfficientNet's initializers: VarianceScaling with mode fan_out (2.0 truncated normal for
 * the convolutions, 1/3 uniform for the head) and Constant; the weights follow the
 * formula, and the writer gives the keys back. */
static double weight_std(kc_model *m, int index) {
    kc_weight_info wi;
    assert_int_equal(kc_model_weight_info(m, index, &wi), KC_STATUS_OK);
    float *w = malloc((size_t)wi.size * sizeof *w);
    assert_non_null(w);
    assert_int_equal(kc_model_get_weight(m, index, w, wi.size), KC_STATUS_OK);
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < wi.size; i++) s += w[i], s2 += (double)w[i] * w[i];
    free(w);
    double mean = s / (double)wi.size;
    return sqrt(s2 / (double)wi.size - mean * mean);
}

static void test_variance_scaling_general(void **state) {
    (void)state;
    static const char text[] =
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"vs\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 16, 16, 32], \"name\": \"in\"}},"
        "{\"class_name\": \"Conv2D\", \"config\": {\"name\": \"stem\", \"filters\": 96, \"kernel_size\": [3, 3],"
        " \"kernel_initializer\": {\"module\": \"keras.initializers\", \"class_name\": \"VarianceScaling\","
        " \"config\": {\"scale\": 2.0, \"mode\": \"fan_out\", \"distribution\": \"truncated_normal\", \"seed\": null},"
        " \"registered_name\": null}}},"
        "{\"class_name\": \"Flatten\", \"config\": {\"name\": \"flat\"}},"
        "{\"class_name\": \"Dense\", \"config\": {\"name\": \"head\", \"units\": 500,"
        " \"kernel_initializer\": {\"class_name\": \"VarianceScaling\", \"config\": {\"scale\": 0.3333333333333333,"
        " \"mode\": \"fan_out\", \"distribution\": \"uniform\", \"seed\": null}},"
        " \"bias_initializer\": {\"class_name\": \"Constant\", \"config\": {\"value\": 0.25}}}}]}}";
    kc_model *m = load_text(text);
    const kc_layer *conv = kc__model_layer(m, 1);
    kc_conv2d_opts o;
    conv->ops->get_opts(conv, &o);
    assert_string_equal(o.kernel_initializer, "variance_scaling(2,fan_out,truncated_normal)");
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    /* conv: fan_out = 3 * 3 * 96; dense: fan_out = 500 (fan_in 14 * 14 * 96 would give 0.0024) */
    double want_conv = sqrt(2.0 / (3 * 3 * 96)), want_dense = sqrt(1.0 / 3.0 / 500);
    double got_conv = weight_std(m, 0), got_dense = weight_std(m, 2);
    if (fabs(got_conv / want_conv - 1) > 0.05 || fabs(got_dense / want_dense - 1) > 0.05)
        fail_msg("VarianceScaling spreads %g (want %g) and %g (want %g)", got_conv, want_conv, got_dense, want_dense);
    float bias[500]; /* Constant(0.25), EfficientNetV2's head bias */
    assert_int_equal(kc_model_get_weight(m, 3, bias, 500), KC_STATUS_OK);
    for (int i = 0; i < 500; i++) assert_true(bias[i] == 0.25f);
    for (int flavour = 2; flavour <= 3; flavour++) {
        char *j = to_json(m, flavour);
        assert_non_null(strstr(j, "\"Constant\""));
        assert_non_null(strstr(j, "\"fan_out\""));
        assert_non_null(strstr(j, "\"truncated_normal\""));
        assert_non_null(strstr(j, "\"uniform\""));
        kc_model *back = load_text(j);
        const kc_layer *c2 = kc__model_layer(back, 1);
        c2->ops->get_opts(c2, &o);
        assert_string_equal(o.kernel_initializer, "variance_scaling(2,fan_out,truncated_normal)");
        kc_model_destroy(back);
        free(j);
    }
    kc_model_destroy(m);
    char *bad = replace_first(text, "\"fan_out\"", "\"fan_sideways\"");
    kc_model *mb = NULL;
    assert_int_equal(kc_model_from_json(bad, strlen(bad), &mb), KC_STATUS_UNSUPPORTED);
    assert_non_null(strstr(kc_last_error(), "fan_in, fan_out or fan_avg"));
    assert_null(mb);
    free(bad);
}

static void test_keras3_functional_resnet(void **state) {
    (void)state;
    kc_model *m = load_fixture("keras3_functional_resnet.json");
    static const want_layer w[] = {
        {"input_layer", "InputLayer", 3, {8, 8, 3}, 0},
        {"conv2d", "Conv2D", 3, {8, 8, 16}, 448},
        {"batch_normalization", "BatchNormalization", 3, {8, 8, 16}, 64},
        {"re_lu", "ReLU", 3, {8, 8, 16}, 0},
        {"conv2d_1", "Conv2D", 3, {8, 8, 16}, 2320},
        {"add", "Add", 3, {8, 8, 16}, 0},
        {"global_average_pooling2d", "GlobalAveragePooling2D", 1, {16}, 0},
        {"dense", "Dense", 1, {10}, 170},
    };
    check_layers(m, w, 8);
    assert_false(m->sequential);
    assert_string_equal(kc_model_name(m), "resnet_block");
    check_inputs(m, 5, 2, (const char *[]){"conv2d_1", "re_lu"});
    check_inputs(m, 4, 1, (const char *[]){"re_lu"});
    check_inputs(m, 1, 1, (const char *[]){"input_layer"});
    assert_int_equal(kc__model_output(m), 7);
    kc_shape out;
    assert_int_equal(kc_model_output_shape(m, &out), KC_STATUS_OK);
    assert_int_equal(out.dim[0], 10);
    check_round_trip(m);

    /* what the Keras 3 writer says about the graph */
    char *text = to_json(m, 3);
    json_t *j = parse(text);
    assert_string_equal(json_string_value(json_object_get(j, "class_name")), "Functional");
    assert_string_equal(json_string_value(json_object_get(j, "module")), "keras.src.models.functional");
    json_t *layers = json_object_get(json_object_get(j, "config"), "layers");
    json_t *add = json_array_get(layers, 5);
    assert_string_equal(json_string_value(json_object_get(add, "name")), "add");
    json_t *args = json_object_get(json_array_get(json_object_get(add, "inbound_nodes"), 0), "args");
    assert_int_equal(json_array_size(args), 1);
    json_t *list = json_array_get(args, 0); /* a merge takes a LIST of tensors */
    assert_true(json_is_array(list));
    assert_int_equal(json_array_size(list), 2);
    json_t *hist = json_object_get(json_object_get(json_array_get(list, 1), "config"), "keras_history");
    assert_string_equal(json_string_value(json_array_get(hist, 0)), "re_lu");
    json_t *bshape = json_object_get(json_object_get(add, "build_config"), "input_shape");
    assert_int_equal(json_array_size(bshape), 2);
    json_t *conv = json_array_get(layers, 1);
    json_t *arg0 = json_array_get(json_object_get(json_array_get(json_object_get(conv, "inbound_nodes"), 0), "args"), 0);
    assert_string_equal(json_string_value(json_object_get(arg0, "class_name")), "__keras_tensor__");
    json_t *shape = json_object_get(json_object_get(arg0, "config"), "shape");
    assert_true(json_is_null(json_array_get(shape, 0)));
    assert_int_equal(json_integer_value(json_array_get(shape, 3)), 3);
    json_t *bn = json_object_get(json_array_get(layers, 2), "config");
    assert_true(json_real_value(json_object_get(bn, "momentum")) == 0.99);
    assert_true(json_real_value(json_object_get(bn, "epsilon")) == 0.001);
    json_t *outs = json_object_get(json_object_get(j, "config"), "output_layers"); /* ["dense", 0, 0] */
    assert_string_equal(json_string_value(json_array_get(outs, 0)), "dense");
    json_t *ins = json_object_get(json_object_get(j, "config"), "input_layers");
    assert_string_equal(json_string_value(json_array_get(ins, 0)), "input_layer");
    json_decref(j);
    assert_non_null(strstr(text, "\"momentum\": 0.99,"));
    assert_non_null(strstr(text, "\"epsilon\": 0.001,"));
    free(text);
    kc_model_destroy(m);
}

static void test_keras2_functional_concat(void **state) {
    (void)state;
    kc_model *m = load_fixture("keras2_functional_concat.json");
    static const want_layer w[] = {
        {"input_1", "InputLayer", 3, {16, 16, 3}, 0},
        {"conv2d", "Conv2D", 3, {16, 16, 8}, 32},
        {"conv2d_1", "Conv2D", 3, {16, 16, 8}, 224},
        {"concatenate", "Concatenate", 3, {16, 16, 16}, 0},
        {"batch_normalization", "BatchNormalization", 3, {16, 16, 16}, 48}, /* scale false: beta + 2 moving */
        {"max_pooling2d", "MaxPooling2D", 3, {8, 8, 16}, 0},
        {"flatten", "Flatten", 1, {1024}, 0},
        {"dense", "Dense", 1, {4}, 4100},
    };
    check_layers(m, w, 8);
    check_inputs(m, 3, 2, (const char *[]){"conv2d", "conv2d_1"});
    const kc_layer *bn = kc__model_layer(m, 4);
    kc_batchnorm_opts o;
    bn->ops->get_opts(bn, &o);
    assert_true(o.momentum == 0.9f);
    assert_true(o.epsilon == 1e-5f);
    assert_int_equal(o.scale, KC_FALSE);
    check_round_trip(m);

    char *text = to_json(m, 2);
    json_t *j = parse(text);
    assert_string_equal(json_string_value(json_object_get(j, "keras_version")), "2.15.0");
    assert_string_equal(json_string_value(json_object_get(j, "backend")), "tensorflow");
    assert_null(json_object_get(j, "module"));
    json_t *layers = json_object_get(json_object_get(j, "config"), "layers");
    json_t *in = json_object_get(json_array_get(layers, 0), "config");
    assert_non_null(json_object_get(in, "batch_input_shape"));
    assert_null(json_object_get(in, "batch_shape"));
    json_t *bncfg = json_object_get(json_array_get(layers, 4), "config");
    json_t *axis = json_object_get(bncfg, "axis"); /* Keras 2 writes the built axis */
    assert_true(json_is_array(axis));
    assert_int_equal(json_integer_value(json_array_get(axis, 0)), 3);
    json_t *ins = json_object_get(json_object_get(j, "config"), "input_layers"); /* [["input_1", 0, 0]] */
    assert_string_equal(json_string_value(json_array_get(json_array_get(ins, 0), 0)), "input_1");
    json_t *cat_nodes = json_object_get(json_array_get(layers, 3), "inbound_nodes");
    json_t *ref = json_array_get(json_array_get(json_array_get(cat_nodes, 0), 1), 0);
    assert_string_equal(json_string_value(ref), "conv2d_1");
    json_decref(j);
    assert_non_null(strstr(text, "\"epsilon\": 1e-5,")); /* Python writes 1e-05; jansson drops exponent zeros */
    free(text);
    kc_model_destroy(m);

    /* older Keras 2 calls it "Model" */
    char *base = fixture_text("keras2_functional_concat.json");
    char *as_model = replace_first(base, "\"class_name\": \"Functional\"", "\"class_name\": \"Model\"");
    m = load_text(as_model);
    assert_int_equal(kc_model_num_layers(m), 8);
    kc_model_destroy(m);
    free(as_model);
    free(base);
}

/* A Sequential model without an InputLayer takes its input shape from its first layer
 * (Keras 2's batch_input_shape, input_shape) or from build_input_shape (Keras 3). */
static void test_sequential_input_sources(void **state) {
    (void)state;
    static const char *const texts[] = {
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"Dense\", "
        "\"config\": {\"name\": \"d\", \"units\": 2, \"input_shape\": [5]}}]}}",
        "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"Dense\", "
        "\"config\": {\"name\": \"d\", \"units\": 2, \"batch_input_shape\": [null, 5]}}]}}",
        "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"module\": "
        "\"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}, \"registered_name\": "
        "null}], \"build_input_shape\": [null, 5]}, \"registered_name\": null}",
    };
    static const want_layer w[] = {
        {"input_layer", "InputLayer", 1, {5}, 0},
        {"d", "Dense", 1, {2}, 12},
    };
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        kc_model *m = load_text(texts[i]);
        check_layers(m, w, 2);
        check_round_trip(m);
        kc_model_destroy(m);
    }
}

/* A model built with the API, with the classes the fixtures do not cover. */
static void test_api_model_round_trip(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("api_model", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {12, 12, 2}));
    kc_add(m, KC_ZEROPAD2D(.padding = {{1, 2}, {0, 1}}));
    kc_add(m, KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .strides = {2, 2}, .use_bias = KC_FALSE,
                        .kernel_initializer = "he_uniform", .name = "c"));
    kc_add(m, KC_AVGPOOL2D(.pool_size = {2, 2}, .strides = {1, 1}, .padding = "same"));
    kc_add(m, KC_RELU(.max_value = 6.0f, .negative_slope = 0.1f));
    kc_add(m, KC_GLOBALAVGPOOL2D(.keepdims = KC_TRUE));
    kc_add(m, KC_RESHAPE(.target_shape = {-1}));
    kc_add(m, KC_DENSE(.units = 3, .kernel_initializer = "lecun_normal", .bias_initializer = "ones"));
    kc_add(m, KC_ACTIVATION(.activation = "tanh"));
    kc_add(m, KC_DROPOUT(.rate = 0.25f, .seed = 7));
    assert_int_equal(kc_add(m, KC_SOFTMAX()), KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    check_round_trip(m);
    char *text = to_json(m, 3);
    assert_non_null(strstr(text, "\"padding\": [[1, 2], [0, 1]]"));
    assert_non_null(strstr(text, "\"max_value\": 6.0"));
    assert_non_null(strstr(text, "\"negative_slope\": 0.1,"));
    assert_non_null(strstr(text, "\"rate\": 0.25, \"seed\": 7, \"noise_shape\": null"));
    assert_non_null(strstr(text, "\"keepdims\": true"));
    assert_non_null(strstr(text, "\"target_shape\": [-1]"));
    assert_non_null(strstr(text, "\"class_name\": \"HeUniform\""));
    assert_non_null(strstr(text, "\"build_input_shape\": [null, 12, 12, 2]"));
    free(text);
    text = to_json(m, 2);
    assert_non_null(strstr(text, "\"rate\": 0.25, \"noise_shape\": null, \"seed\": 7"));
    assert_non_null(strstr(text, "\"activity_regularizer\": null, \"kernel_constraint\""));
    assert_null(strstr(text, "\"module\""));
    assert_null(strstr(text, "build_config"));
    free(text);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- files */

static void test_files(void **state) {
    (void)state;
    kc_model *m = load_fixture("keras3_functional_resnet.json"), *m2 = NULL;
    char path[256], tmp[300];
    snprintf(path, sizeof path, "test_keras_json_%d.json", (int)getpid());
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    assert_int_equal(kc_model_save(m, path), KC_STATUS_OK);
    assert_int_not_equal(access(path, F_OK), -1);
    assert_int_equal(access(tmp, F_OK), -1); /* no temporary left behind */
    assert_int_equal(kc_model_load(path, &m2), KC_STATUS_OK);
    same_model(m, m2);
    /* pretty-printed Keras 3, 2-space indent, ends with a newline */
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(kc__read_file(path, &text, &len), KC_STATUS_OK);
    assert_true(len > 2 && text[len - 1] == '\n');
    const char *head = "{\n  \"module\": \"keras.src.models.functional\",\n  \"class_name\": \"Functional\",\n";
    assert_memory_equal(text, head, strlen(head));
    free(text);
    /* saving over an existing file replaces it */
    assert_int_equal(kc_model_save(m2, path), KC_STATUS_OK);
    kc_model_destroy(m2);
    m2 = NULL;
    unlink(path);

    assert_int_equal(kc_model_load("no_such_dir/missing_model.json", &m2), KC_STATUS_IO);
    assert_null(m2);
    assert_non_null(strstr(kc_last_error(), "no_such_dir/missing_model.json"));
    assert_non_null(strstr(kc_last_error(), "No such file"));
    assert_int_equal(kc_model_save(m, "/nonexistent_kerac_dir/m.json"), KC_STATUS_IO);
    assert_non_null(strstr(kc_last_error(), "/nonexistent_kerac_dir/m.json"));
    /* .keras and .h5 are implemented (tests/test_keras_files.c): a missing file is an IO error */
    assert_int_equal(kc_model_load("no_such_model.keras", &m2), KC_STATUS_IO);
    assert_non_null(strstr(kc_last_error(), "no_such_model.keras"));
    assert_non_null(kc__model_format_for_path("model.H5"));
    assert_int_equal(kc_model_load("model.txt", &m2), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), ".txt"));
    assert_int_equal(kc_model_load("dir.json/model", &m2), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(kc__model_format_for_path("a/b.JSON"));
    assert_null(kc__model_format_for_path("a.json/b"));

    /* a malformed file names the file and the line */
    snprintf(path, sizeof path, "test_keras_json_bad_%d.json", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\n  \"class_name\": \"Sequential\"\n  \"config\": {}\n}\n", f);
    fclose(f);
    assert_int_equal(kc_model_load(path, &m2), KC_STATUS_BAD_FILE);
    assert_non_null(strstr(kc_last_error(), path));
    assert_non_null(strstr(kc_last_error(), "line 3"));
    unlink(path);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- errors */

typedef struct err_case {
    const char *what;
    const char *fixture;       /* NULL: `find` is the whole text */
    const char *find, *repl;   /* first occurrence in the fixture */
    kc_status status;
    const char *keywords[4];
} err_case;

#define K2SEQ "keras2_sequential_cnn.json"
#define K3SEQ "keras3_sequential_cnn.json"
#define K20 "keras20_sequential_list.json"
#define K3RES "keras3_functional_resnet.json"
#define K2CAT "keras2_functional_concat.json"

static const err_case k_errors[] = {
    {"malformed JSON", NULL, "{\n  \"class_name\": \"Sequential\",\n  \"config\": {\"name\": ]}\n}", NULL,
     KC_STATUS_BAD_FILE, {"model JSON", "line 3, column 22"}},
    {"empty text", NULL, "", NULL, KC_STATUS_BAD_FILE, {"model JSON", "line 1"}},
    {"top level not an object", NULL, "[1, 2]", NULL, KC_STATUS_BAD_FILE, {"top level"}},
    {"unknown class", K2SEQ, "\"class_name\": \"Dropout\"", "\"class_name\": \"LSTM\"", KC_STATUS_UNSUPPORTED,
     {"'dropout'", "'LSTM'", "supported: ", "Conv2D"}},
    /* nested models are inlined (test_keras_fixtures.c); this one has no layers of its own */
    {"nested model", K2SEQ, "\"class_name\": \"Dropout\"", "\"class_name\": \"Sequential\"", KC_STATUS_BAD_FILE,
     {"'dropout'", "nested", "\"layers\""}},
    {"unknown config key", K2SEQ, "\"rate\": 0.5", "\"rate\": 0.5, \"foo\": 1", KC_STATUS_UNSUPPORTED,
     {"'dropout'", "'foo'", "noise_shape"}},
    {"channels_first", K2SEQ, "\"channels_last\"", "\"channels_first\"", KC_STATUS_UNSUPPORTED,
     {"'conv2d'", "data_format", "channels_first", "channels_last"}},
    /* groups are supported; 2 groups of a 1-channel input are not (Keras's rule) */
    {"groups 2", K2SEQ, "\"groups\": 1", "\"groups\": 2", KC_STATUS_SHAPE, {"'conv2d'", "multiple of groups (2)"}},
    {"regularizer", K2SEQ, "\"kernel_regularizer\": null",
     "\"kernel_regularizer\": {\"class_name\": \"L2\", \"config\": {\"l2\": 0.01}}", KC_STATUS_UNSUPPORTED,
     {"'conv2d'", "kernel_regularizer", "L2", "null"}},
    {"constraint", K2SEQ, "\"bias_constraint\": null", "\"bias_constraint\": {\"class_name\": \"MaxNorm\"}",
     KC_STATUS_UNSUPPORTED, {"'conv2d'", "bias_constraint"}},
    {"trainable not a boolean", K2SEQ, "\"trainable\": true", "\"trainable\": \"no\"", KC_STATUS_BAD_FILE,
     {"'conv2d'", "trainable", "true or false"}},
    {"dtype float16", K2SEQ, "\"dtype\": \"float32\", \"filters\"", "\"dtype\": \"float16\", \"filters\"",
     KC_STATUS_UNSUPPORTED, {"'conv2d'", "dtype", "float16"}},
    {"mixed precision policy", K3SEQ, "\"name\": \"float32\"", "\"name\": \"mixed_float16\"", KC_STATUS_UNSUPPORTED,
     {"Sequential model", "dtype", "mixed_float16"}},
    {"noise_shape", K2SEQ, "\"noise_shape\": null", "\"noise_shape\": [1, null]", KC_STATUS_UNSUPPORTED,
     {"'dropout'", "noise_shape"}},
    {"sparse input", K2SEQ, "\"sparse\": false", "\"sparse\": true", KC_STATUS_UNSUPPORTED, {"'input_1'", "sparse"}},
    {"unknown initializer", K2SEQ, "\"GlorotUniform\"", "\"Orthogonal\"", KC_STATUS_UNSUPPORTED,
     {"'conv2d'", "kernel_initializer", "Orthogonal", "glorot_uniform"}},
    {"initializer option", K2SEQ, "{\"seed\": null}", "{\"seed\": null, \"gain\": 2.0}", KC_STATUS_UNSUPPORTED,
     {"'conv2d'", "gain"}},
    {"BN gamma initializer", K3RES, "\"class_name\": \"Ones\"", "\"class_name\": \"Zeros\"", KC_STATUS_UNSUPPORTED,
     {"'batch_normalization'", "gamma_initializer", "'zeros'", "'ones'"}},
    {"BN synchronized", K3RES, "\"synchronized\": false", "\"synchronized\": true", KC_STATUS_UNSUPPORTED,
     {"'batch_normalization'", "synchronized"}},
    {"BN renorm", K3RES, "\"synchronized\": false", "\"synchronized\": false, \"renorm\": true",
     KC_STATUS_UNSUPPORTED, {"'batch_normalization'", "renorm"}},
    {"BN axis not channels", K2CAT, "\"axis\": [3]", "\"axis\": [1]", KC_STATUS_UNSUPPORTED,
     {"'batch_normalization'", "axis 1", "-1"}},
    {"concat axis", K2CAT, "\"axis\": -1", "\"axis\": -2", KC_STATUS_UNSUPPORTED, {"'concatenate'", "axis"}},
    {"filters as a string", K2SEQ, "\"filters\": 32", "\"filters\": \"32\"", KC_STATUS_BAD_FILE,
     {"'conv2d'", "filters", "integer"}},
    {"variable dimension", K2SEQ, "[null, 28, 28, 1]", "[null, null, 28, 1]", KC_STATUS_UNSUPPORTED,
     {"'input_1'", "variable"}},
    {"missing layers", NULL, "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\"}}", NULL,
     KC_STATUS_BAD_FILE, {"Sequential", "\"layers\""}},
    {"functional missing layers", NULL,
     "{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", \"input_layers\": [], \"output_layers\": []}}",
     NULL, KC_STATUS_BAD_FILE, {"Functional", "\"layers\""}},
    {"unknown model config key", K3RES, "\"layers\": [", "\"layerz\": [", KC_STATUS_UNSUPPORTED, {"layerz"}},
    {"missing config", NULL, "{\"class_name\": \"Sequential\"}", NULL, KC_STATUS_BAD_FILE, {"\"config\""}},
    {"unknown model class", K2SEQ, "\"class_name\": \"Sequential\"", "\"class_name\": \"MyModel\"",
     KC_STATUS_UNSUPPORTED, {"MyModel", "Sequential and Functional"}},
    {"no input shape", NULL,
     "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"Dense\", "
     "\"config\": {\"name\": \"d\", \"units\": 2}}]}}",
     NULL, KC_STATUS_UNSUPPORTED, {"'d'", "input shape", "build_input_shape"}},
    {"unknown entry key", K2CAT, "\"name\": \"conv2d\", \"inbound_nodes\"", "\"name\": \"conv2d\", \"x\": 1, \"inbound_nodes\"",
     KC_STATUS_UNSUPPORTED, {"'conv2d'", "'x'"}},
    {"functional unknown layer", K3RES, "\"keras_history\": [\"re_lu\", 0, 0]", "\"keras_history\": [\"nope\", 0, 0]",
     KC_STATUS_BAD_FILE, {"'conv2d_1'", "'nope'"}},
    /* a layer listed before its input is fine (Keras reads it so); a cycle is not */
    {"functional cycle", K2CAT, "[[[\"input_1\", 0, 0, {}]]]", "[[[\"dense\", 0, 0, {}]]]", KC_STATUS_BAD_FILE,
     {"'conv2d'", "cycle"}},
    {"functional unknown output", K2CAT, "\"output_layers\": [[\"dense\"", "\"output_layers\": [[\"densse\"",
     KC_STATUS_BAD_FILE, {"output_layers", "densse"}},
    /* shared layers (test_shared.c): a call nothing takes, a call that does not exist */
    {"shared layer call unused", K2CAT, "[[[\"input_1\", 0, 0, {}]]]",
     "[[[\"input_1\", 0, 0, {}]], [[\"input_1\", 0, 0, {}]]]", KC_STATUS_INVALID_ARGUMENT,
     {"'conv2d'", "feeds nothing"}},
    {"call of a layer that is not made", K2CAT, "[[[\"conv2d\", 0, 0, {}]", "[[[\"conv2d\", 1, 0, {}]",
     KC_STATUS_BAD_FILE, {"'concatenate'", "call #1", "'conv2d'", "called 1 time"}},
    {"several outputs", K2CAT, "\"output_layers\": [[\"dense\", 0, 0]]",
     "\"output_layers\": [[\"dense\", 0, 0], [\"flatten\", 0, 0]]", KC_STATUS_UNSUPPORTED, {"2 outputs", "one output"}},
    {"several inputs", K2CAT, "\"input_layers\": [[\"input_1\", 0, 0]]",
     "\"input_layers\": [[\"input_1\", 0, 0], [\"input_1\", 0, 0]]", KC_STATUS_UNSUPPORTED, {"2 inputs"}},
    {"call kwargs", K3RES, "\"kwargs\": {}", "\"kwargs\": {\"training\": false, \"scale\": 0.5}",
     KC_STATUS_UNSUPPORTED, {"'conv2d'", "scale=0.5", "training"}},
    {"call kwargs training not a bool", K3RES, "\"kwargs\": {}", "\"kwargs\": {\"training\": 1}",
     KC_STATUS_UNSUPPORTED, {"'conv2d'", "training=1"}},
    {"layer without inputs", K2CAT, "\"name\": \"conv2d\", \"inbound_nodes\": [[[\"input_1\", 0, 0, {}]]]",
     "\"name\": \"conv2d\", \"inbound_nodes\": []", KC_STATUS_BAD_FILE, {"'conv2d'", "no inbound_nodes"}},
    {"duplicate key", K2SEQ, "\"filters\": 32", "\"filters\": 32, \"filters\": 16", KC_STATUS_BAD_FILE,
     {"model JSON", "duplicate"}},
};

/* Keras 3 records `training` (and null `mask`) in each node: accepted, ignored. */
static void test_call_kwargs_keras_writes(void **state) {
    (void)state;
    char *base = fixture_text(K3RES);
    const char *forms[] = {"\"kwargs\": {\"training\": false}", "\"kwargs\": {\"training\": true, \"mask\": null}",
                           "\"kwargs\": {\"training\": null}"};
    for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
        char *text = replace_first(base, "\"kwargs\": {}", forms[i]);
        assert_true(strcmp(text, base) != 0);
        kc_model *m = NULL;
        if (kc_model_from_json(text, strlen(text), &m) != KC_STATUS_OK) fail_msg("%s: %s", forms[i], kc_last_error());
        kc_model_destroy(m);
        free(text);
    }
    free(base);
}

static void test_errors(void **state) {
    (void)state;
    char *texts[5] = {0};
    const char *names[5] = {K2SEQ, K3SEQ, K20, K3RES, K2CAT};
    for (int i = 0; i < 5; i++) texts[i] = fixture_text(names[i]);
    for (size_t c = 0; c < sizeof k_errors / sizeof k_errors[0]; c++) {
        const err_case *e = &k_errors[c];
        char *text = NULL;
        if (!e->fixture) {
            text = strdup(e->find);
        } else {
            const char *base = NULL;
            for (int i = 0; i < 5; i++)
                if (strcmp(e->fixture, names[i]) == 0) base = texts[i];
            assert_non_null(base);
            text = replace_first(base, e->find, e->repl);
        }
        kc_model *m = (kc_model *)(uintptr_t)1; /* must come back NULL */
        kc_status s = kc_model_from_json(text, strlen(text), &m);
        if (s != e->status)
            fail_msg("case '%s': status %s, want %s: %s", e->what, kc_status_name(s), kc_status_name(e->status),
                     kc_last_error());
        if (m != NULL) fail_msg("case '%s': *out is not NULL on failure", e->what);
        for (int k = 0; k < 4 && e->keywords[k]; k++)
            if (!strstr(kc_last_error(), e->keywords[k]))
                fail_msg("case '%s': message lacks '%s': %s", e->what, e->keywords[k], kc_last_error());
        free(text);
    }
    for (int i = 0; i < 5; i++) free(texts[i]);

    kc_model *m = NULL;
    assert_int_equal(kc_model_from_json(NULL, 0, &m), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_model_from_json("{}", 2, NULL), KC_STATUS_INVALID_ARGUMENT);
    char *out = (char *)(uintptr_t)1;
    assert_int_equal(kc_model_to_json(NULL, 3, &out), KC_STATUS_INVALID_ARGUMENT);
    assert_null(out);
    m = load_fixture(K2SEQ);
    assert_int_equal(kc_model_to_json(m, 4, &out), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "flavour 4"));
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keras2_sequential),
        cmocka_unit_test(test_keras3_sequential),
        cmocka_unit_test(test_keras20_list),
        cmocka_unit_test(test_variance_scaling_general),
        cmocka_unit_test(test_keras3_functional_resnet),
        cmocka_unit_test(test_keras2_functional_concat),
        cmocka_unit_test(test_sequential_input_sources),
        cmocka_unit_test(test_api_model_round_trip),
        cmocka_unit_test(test_files),
        cmocka_unit_test(test_call_kwargs_keras_writes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
