/* test_layer_kinds.c — every kind of the one list (src/layers/layer_kinds.h) has all its
 * pieces: an ops table with the required entries and its public options size, a registry
 * entry reachable by Keras class name and alias, Keras config keys that point inside its
 * options struct, and a JSON write -> read round trip (both flavours, and with the alias
 * as class name) that gives back the same configuration. A kind added to the list
 * without one of these, or without a sample below, fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "io/io.h"
#include "kerac.h"

typedef struct kind {
    const char *id;
    const kc_layer_ops *ops;
    size_t opts_size; /* sizeof its public options struct, as the list names it */
} kind;

#define KIND_ENTRY(id, opts_type) {#id, &kc__##id##_ops, sizeof(opts_type)},
static const kind k_kinds[] = {KC_LAYER_KINDS(KIND_ENTRY)};
#undef KIND_ENTRY

/* ---------------------------------------------------------------- the ops tables */

static void check_keys(const kind *k) {
    const kc_layer_ops *o = k->ops;
    assert_true(o->n_keras_keys >= 0);
    if ((o->keras_keys == NULL) != (o->n_keras_keys == 0))
        fail_msg("%s: keras_keys and n_keras_keys disagree (use KC_KERAS_KEYS(table))", k->id);
    for (int i = 0; i < o->n_keras_keys; i++) {
        const kc__field *f = &o->keras_keys[i];
        if (!f->key || !f->key[0]) fail_msg("%s: key %d has no name", k->id, i);
        if (f->kind < KC_F_NAME || f->kind >= KC_F__END) fail_msg("%s: key '%s' has no valid kind", k->id, f->key);
        if (f->flags & ~(unsigned)(KC_F_W | KC_F_AXIS_LIST2)) fail_msg("%s: key '%s' has unknown flags", k->id, f->key);
        if (f->off != KC_F_NO_OFFSET && f->off >= k->opts_size)
            fail_msg("%s: key '%s' points past its options struct (offset %zu, size %zu)", k->id, f->key, f->off,
                     k->opts_size);
        if (f->kind == KC_F_FIXED && !f->lit) fail_msg("%s: fixed key '%s' has no accepted value", k->id, f->key);
    }
}

static void test_ops_complete(void **state) {
    (void)state;
    assert_int_equal(kc__layer_kind_count(), (int)KC_ARRAY_LEN(k_kinds));
    int inputs = 0;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++) {
        const kind *k = &k_kinds[i];
        const kc_layer_ops *o = k->ops;
        /* the registry is the list, in its order */
        assert_ptr_equal(kc__layer_kind((int)i), o);
        if (!o->class_name || !o->class_name[0] || !o->snake_name || !o->snake_name[0])
            fail_msg("%s: class_name and snake_name are required", k->id);
        if (o->opts_size != k->opts_size)
            fail_msg("%s: opts_size %zu is not the size of the options struct in layer_kinds.h (%zu)", k->id,
                     o->opts_size, k->opts_size);
        if (o->cfg_size == 0) fail_msg("%s: cfg_size is 0", k->id);
        if (!o->init || !o->get_opts || !o->build || !o->forward || !o->backward)
            fail_msg("%s: init, get_opts, build, forward and backward are required", k->id);
        if (o->min_inputs < 0 || o->min_inputs > o->max_inputs || o->max_inputs > KC_MAX_INPUTS)
            fail_msg("%s: inputs %d..%d", k->id, o->min_inputs, o->max_inputs);
        if (o->flags & KC_LAYER_INPUT) inputs++;
        check_keys(k);
        /* reachable by class name and alias */
        assert_ptr_equal(kc__layer_find(o->class_name), o);
        if (o->alias) {
            assert_ptr_equal(kc__layer_find(o->alias), o);
            assert_string_not_equal(o->alias, o->class_name);
        }
        /* no name, alias or snake name taken twice */
        for (size_t j = 0; j < i; j++) {
            const kc_layer_ops *p = k_kinds[j].ops;
            const char *mine[] = {o->class_name, o->alias}, *theirs[] = {p->class_name, p->alias};
            for (int a = 0; a < 2; a++)
                for (int b = 0; b < 2; b++)
                    if (mine[a] && theirs[b] && strcmp(mine[a], theirs[b]) == 0)
                        fail_msg("%s and %s both answer to '%s'", k->id, k_kinds[j].id, mine[a]);
            if (strcmp(o->snake_name, p->snake_name) == 0)
                fail_msg("%s and %s share the snake name '%s'", k->id, k_kinds[j].id, o->snake_name);
        }
    }
    assert_int_equal(inputs, 1); /* the JSON reader and writer treat the one input kind apart */
}

/* The error for an unknown class names every kind (the list fits the message). */
static void test_unknown_class_lists_every_kind(void **state) {
    (void)state;
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(&(kc_layer_spec){"NoSuchLayer", NULL}, &l), KC_STATUS_UNSUPPORTED);
    assert_null(l);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", kc_last_error());
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++)
        if (!strstr(msg, k_kinds[i].ops->class_name))
            fail_msg("'%s' missing from the list in \"%s\"", k_kinds[i].ops->class_name, msg);
}

/* ---------------------------------------------------------------- JSON round trip */

/* One model per kind: n_in tensors of shape (6, 6, 3) into the kind's layer, with options away from
 * their defaults where the kind has any. The input kind's sample is the model's input
 * itself, followed by a Flatten. */
typedef struct sample {
    const kc_layer_ops *ops;
    const kc_layer_spec *spec;
    int n_in;
} sample;

static const sample k_samples[] = {
    {&kc__input_layer_ops, KC_INPUT(.name = "the_input", .shape = {6, 6, 3}), 0},
    {&kc__conv2d_ops,
     KC_CONV2D(.name = "c", .filters = 4, .kernel_size = {3, 2}, .strides = {1, 2}, .padding = "same",
               .dilation_rate = {1, 1}, .activation = "relu", .use_bias = KC_FALSE, .kernel_initializer = "he_normal",
               .bias_initializer = "ones"),
     1},
    {&kc__dense_ops,
     KC_DENSE(.name = "d", .units = 5, .activation = "tanh", .kernel_initializer = "lecun_uniform",
              .bias_initializer = "glorot_normal"),
     1},
    {&kc__maxpool2d_ops, KC_MAXPOOL2D(.name = "mp", .pool_size = {2, 3}, .strides = {1, 1}, .padding = "same"), 1},
    {&kc__avgpool2d_ops, KC_AVGPOOL2D(.name = "ap", .pool_size = {3, 3}), 1},
    {&kc__global_avgpool2d_ops, KC_GLOBALAVGPOOL2D(.name = "gap", .keepdims = KC_TRUE), 1},
    {&kc__flatten_ops, KC_FLATTEN(.name = "f"), 1},
    {&kc__reshape_ops, KC_RESHAPE(.name = "r", .target_shape = {3, -1}), 1},
    {&kc__dropout_ops, KC_DROPOUT(.name = "drop", .rate = 0.25f, .seed = 7), 1},
    {&kc__batchnorm_ops, KC_BATCHNORM(.name = "bn", .momentum = 0.9f, .epsilon = 0.01f, .center = KC_FALSE), 1},
    {&kc__activation_ops, KC_ACTIVATION(.name = "act", .activation = "sigmoid"), 1},
    {&kc__relu_ops, KC_RELU(.name = "relu", .max_value = 6.0f, .negative_slope = 0.125f, .threshold = 0.5f), 1},
    {&kc__softmax_ops, KC_SOFTMAX(.name = "sm", .axis = -1), 1},
    {&kc__zeropad2d_ops, KC_ZEROPAD2D(.name = "zp", .padding = {{1, 2}, {0, 1}}), 1},
    {&kc__add_ops, KC_ADD(.name = "sum"), 2},
    {&kc__concatenate_ops, KC_CONCATENATE(.name = "cat", .axis = -1), 3},
    {&kc__depthwise_conv2d_ops,
     KC_DEPTHWISE_CONV2D(.name = "dw", .kernel_size = {3, 2}, .strides = {2, 1}, .padding = "same",
                         .depth_multiplier = 2, .activation = "relu", .use_bias = KC_FALSE,
                         .depthwise_initializer = "he_uniform", .bias_initializer = "ones"),
     1},
    /* normalisation and resampling */
    {&kc__rescaling_ops, KC_RESCALING(.name = "rs", .scale = {3, 1, {0.5f, 2.0f, -1.0f}}, .offset = {1, 0, {0.25f}}), 1},
    {&kc__normalization_ops,
     KC_NORMALIZATION(.name = "norm", .mean = {3, 1, {1.0f, 2.0f, 3.0f}}, .variance = {3, 1, {4.0f, 0.25f, 1.0f}},
                      .invert = KC_TRUE),
     1},
    {&kc__layernorm_ops, KC_LAYERNORM(.name = "ln", .axis = {2, 1, 0, {2, 3}}, .epsilon = 0.01f, .center = KC_FALSE), 1},
    {&kc__groupnorm_ops, KC_GROUPNORM(.name = "gn", .groups = 3, .epsilon = 0.05f, .scale = KC_FALSE), 1},
    {&kc__upsampling2d_ops, KC_UPSAMPLING2D(.name = "up", .size = {2, 3}, .interpolation = "bilinear"), 1},
    {&kc__cropping2d_ops, KC_CROPPING2D(.name = "crop", .cropping = {{1, 0}, {2, 1}}), 1},
    {&kc__global_maxpool2d_ops, KC_GLOBALMAXPOOL2D(.name = "gmp", .keepdims = KC_TRUE), 1},
    {&kc__permute_ops, KC_PERMUTE(.name = "perm", .dims = {2, 1, 3}), 1},
    {&kc__repeat_vector_ops, KC_REPEAT_VECTOR(.name = "rep", .n = 3), 1},
    /* broadcasting and activations */
    {&kc__multiply_ops, KC_MULTIPLY(.name = "prod"), 3},
    {&kc__subtract_ops, KC_SUBTRACT(.name = "diff"), 2},
    {&kc__average_ops, KC_AVERAGE(.name = "mean"), 3},
    {&kc__maximum_ops, KC_MAXIMUM(.name = "hi"), 2},
    {&kc__minimum_ops, KC_MINIMUM(.name = "lo"), 2},
    {&kc__leaky_relu_ops, KC_LEAKY_RELU(.name = "leaky", .negative_slope = 0.125f), 1},
    {&kc__elu_ops, KC_ELU(.name = "elu_l", .alpha = 0.5f), 1},
    {&kc__prelu_ops, KC_PRELU(.name = "prelu", .alpha_initializer = "ones", .shared_axes = {.n = 2, .list = 1, .v = {1, 2}}), 1},
    {&kc__tensor_op_ops, KC_TENSOR_OP(.name = "plus3", .op = "add", .scalar_side = 1, .scalar = 3.0f), 1},
    /* transfer learning */
    {&kc__custom_scale_ops, KC_CUSTOM_SCALE(.name = "scale", .scale = 0.17f), 2},
    /* augmentation */
    {&kc__random_flip_ops, KC_RANDOM_FLIP(.name = "flip", .mode = "horizontal", .seed = 11), 1},
    {&kc__random_rotation_ops,
     KC_RANDOM_ROTATION(.name = "rot", .factor = KC_FACTOR_PAIR(-0.25f, 0.125f), .fill_mode = "constant",
                        .interpolation = "nearest", .fill_value = 0.5f, .seed = 3),
     1},
    {&kc__random_zoom_ops,
     KC_RANDOM_ZOOM(.name = "zoom", .height_factor = KC_FACTOR(0.25f), .width_factor = KC_FACTOR_PAIR(-0.5f, 0.125f),
                    .fill_mode = "wrap", .seed = 4),
     1},
    {&kc__random_translation_ops,
     KC_RANDOM_TRANSLATION(.name = "shift", .height_factor = KC_FACTOR(0.5f), .width_factor = KC_FACTOR(0.25f),
                           .fill_mode = "nearest", .fill_value = 2.0f),
     1},
    {&kc__random_crop_ops, KC_RANDOM_CROP(.name = "rcrop", .height = 4, .width = 5, .seed = 9), 1},
    {&kc__center_crop_ops, KC_CENTER_CROP(.name = "ccrop", .height = 3, .width = 4), 1},
    {&kc__random_contrast_ops, KC_RANDOM_CONTRAST(.name = "contrast", .factor = KC_FACTOR(0.5f), .seed = 5), 1},
    {&kc__random_brightness_ops,
     KC_RANDOM_BRIGHTNESS(.name = "bright", .factor = KC_FACTOR_PAIR(-0.25f, 0.5f), .value_range = {-1, 1}, .seed = 2),
     1},
    {&kc__resizing_ops,
     KC_RESIZING(.name = "resize", .height = 4, .width = 9, .interpolation = "nearest",
                 .crop_to_aspect_ratio = KC_TRUE),
     1},
    /* convolutions */
    {&kc__separable_conv2d_ops,
     KC_SEPARABLE_CONV2D(.name = "sep", .filters = 4, .kernel_size = {3, 2}, .strides = {2, 1}, .padding = "same",
                         .depth_multiplier = 2, .activation = "relu6", .use_bias = KC_FALSE,
                         .depthwise_initializer = "he_uniform", .pointwise_initializer = "lecun_normal",
                         .bias_initializer = "ones"),
     1},
    {&kc__conv2d_transpose_ops,
     KC_CONV2D_TRANSPOSE(.name = "up", .filters = 2, .kernel_size = {3, 2}, .strides = {2, 3}, .padding = "same",
                         .output_padding = {1, {1, 0}}, .activation = "tanh", .kernel_initializer = "he_normal",
                         .bias_initializer = "ones"),
     1},
    /* regularising layers */
    {&kc__spatial_dropout2d_ops, KC_SPATIAL_DROPOUT2D(.name = "sdrop", .rate = 0.25f, .seed = 7), 1},
    {&kc__stochastic_depth_ops, KC_STOCHASTIC_DEPTH(.name = "sdepth", .drop_path_rate = 0.2f), 1},
    {&kc__layer_scale_ops, KC_LAYER_SCALE(.name = "lscale", .init_values = 0.25f, .projection_dim = 3), 1},
    /* Gaussian noise layers */
    {&kc__gaussian_noise_ops, KC_GAUSSIAN_NOISE(.name = "gnoise", .stddev = 0.3f, .seed = 9), 1},
    {&kc__gaussian_dropout_ops, KC_GAUSSIAN_DROPOUT(.name = "gdrop", .rate = 0.4f, .seed = 11), 1},
};

static kc_model *sample_model(const sample *s) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("kinds", &m), KC_STATUS_OK);
    kc_node y;
    if (s->ops->flags & KC_LAYER_INPUT) {
        y = kc_apply(m, KC_FLATTEN(.name = "after"), kc_input(m, s->spec));
    } else {
        kc_node xs[KC_MAX_INPUTS]; /* one model input; a merge takes it and branches of it */
        xs[0] = kc_input(m, KC_INPUT(.shape = {6, 6, 3}));
        if (s->ops == &kc__repeat_vector_ops) xs[0] = kc_apply(m, KC_FLATTEN(), xs[0]); /* takes (features,) */
        for (int i = 1; i < s->n_in; i++) xs[i] = kc_apply(m, KC_ACTIVATION(.activation = "relu"), xs[0]);
        y = s->n_in > 1 ? kc_merge(m, s->spec, xs, s->n_in) : kc_apply(m, s->spec, xs[0]);
    }
    kc_status st = kc_set_output(m, y);
    if (st == KC_STATUS_OK) st = kc_model_build(m);
    if (st != KC_STATUS_OK) fail_msg("%s sample: %s", s->ops->class_name, kc_last_error());
    return m;
}

static char *json_of(kc_model *m, int flavour) {
    char *out = NULL;
    if (kc_model_to_json(m, flavour, &out) != KC_STATUS_OK) fail_msg("to_json(%d): %s", flavour, kc_last_error());
    return out;
}

static kc_model *model_of(const char *text) {
    kc_model *m = NULL;
    if (kc_model_from_json(text, strlen(text), &m) != KC_STATUS_OK) fail_msg("from_json: %s\n%s", kc_last_error(), text);
    return m;
}

/* Same kinds, names, shapes and private configurations, layer by layer: an option the
 * key table does not carry would come back at its default and differ here. */
static void same_layers(const char *what, kc_model *a, kc_model *b) {
    assert_int_equal(kc_model_num_layers(a), kc_model_num_layers(b));
    for (int i = 0; i < kc_model_num_layers(a); i++) {
        const kc_layer *la = kc__model_layer(a, i), *lb = kc__model_layer(b, i);
        assert_ptr_equal(la->ops, lb->ops);
        assert_string_equal(la->name, lb->name);
        assert_true(kc__shape_eq(&la->out_shape, &lb->out_shape));
        if (memcmp(la->cfg, lb->cfg, la->ops->cfg_size) != 0)
            fail_msg("%s: layer '%s' (%s) does not come back with the same configuration", what, la->name,
                     la->ops->class_name);
    }
}

/* Every occurrence of "\"from\"" replaced by "\"to\"" (the class name in each entry). */
static char *with_class(const char *text, const char *from, const char *to) {
    char qf[64], qt[64];
    snprintf(qf, sizeof qf, "\"%s\"", from);
    snprintf(qt, sizeof qt, "\"%s\"", to);
    size_t n = strlen(text), lf = strlen(qf), lt = strlen(qt), count = 0;
    for (size_t r = 0; r < n; r++)
        if (strncmp(text + r, qf, lf) == 0) count++;
    assert_true(count > 0);
    char *out = malloc(n + count * lt + 1);
    assert_non_null(out);
    size_t w = 0, r = 0;
    while (r < n) {
        if (strncmp(text + r, qf, lf) == 0) {
            memcpy(out + w, qt, lt);
            w += lt;
            r += lf;
        } else {
            out[w++] = text[r++];
        }
    }
    out[w] = '\0';
    return out;
}

static const sample *sample_for(const kc_layer_ops *ops) {
    for (size_t i = 0; i < KC_ARRAY_LEN(k_samples); i++)
        if (k_samples[i].ops == ops) return &k_samples[i];
    return NULL;
}

static void test_json_round_trip(void **state) {
    (void)state;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++) {
        const kc_layer_ops *o = k_kinds[i].ops;
        const sample *s = sample_for(o);
        if (!s) fail_msg("kind %s has no sample in test_layer_kinds.c: add one with non-default options", k_kinds[i].id);
        assert_ptr_equal(kc__layer_find(s->spec->class_name), o); /* its public builder names it */
        kc_model *m = sample_model(s);
        for (int f = 2; f <= 3; f++) {
            char what[96];
            snprintf(what, sizeof what, "%s, Keras %d JSON", o->class_name, f);
            char *t1 = json_of(m, f);
            kc_model *m2 = model_of(t1);
            same_layers(what, m, m2);
            char *t2 = json_of(m2, f);
            assert_string_equal(t1, t2); /* what is read is written back byte for byte */
            if (o->alias) {
                char *aliased = with_class(t1, o->class_name, o->alias);
                kc_model *m3 = model_of(aliased);
                snprintf(what, sizeof what, "%s as %s, Keras %d JSON", o->class_name, o->alias, f);
                same_layers(what, m, m3);
                kc_model_destroy(m3);
                free(aliased);
            }
            kc_model_destroy(m2);
            free(t1);
            free(t2);
        }
        kc_model_destroy(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_complete),
        cmocka_unit_test(test_unknown_class_lists_every_kind),
        cmocka_unit_test(test_json_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
