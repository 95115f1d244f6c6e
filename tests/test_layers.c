/* test_layers.c — layer kinds used directly (no model): registry, shape inference, weight
 * declarations, defaults written back by get_opts, every invalid option's error, batch norm
 * and dropout numerics, initializer statistics, flops. The CPU backend runs the math. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "layers/layer.h"

#define SHAPE(...) kc__shape_make((int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), (int[]){__VA_ARGS__})

/* Create a layer, give it input shapes and build it. Returns build's (or create's) status;
 * *out is the layer when creation succeeded (destroy it), NULL otherwise. */
static kc_status make(const kc_layer_spec *spec, const char *name, int n_in, const kc_shape *in, kc_layer **out) {
    *out = NULL;
    kc_status s = kc__layer_create(spec, out);
    if (s != KC_STATUS_OK) return s;
    if (name) snprintf((*out)->name, sizeof (*out)->name, "%s", name);
    (*out)->n_in = n_in;
    for (int i = 0; i < n_in; i++) (*out)->in_shape[i] = in[i];
    return (*out)->ops->build(*out);
}

/* make() that must succeed. */
static kc_layer *must(const kc_layer_spec *spec, int n_in, const kc_shape *in) {
    kc_layer *l = NULL;
    kc_status s = make(spec, "t", n_in, in, &l);
    if (s != KC_STATUS_OK) fail_msg("%s: %s", spec->class_name, kc_last_error());
    return l;
}

static void assert_shape(kc_shape got, kc_shape want) {
    char a[96], b[96];
    if (!kc__shape_eq(&got, &want))
        fail_msg("shape %s, expected %s", kc__shape_str(&got, false, a, sizeof a), kc__shape_str(&want, false, b, sizeof b));
}

static void assert_contains(const char *hay, const char *needle) {
    if (!hay || !strstr(hay, needle)) fail_msg("message \"%s\" does not contain \"%s\"", hay ? hay : "(null)", needle);
}

static int64_t params_of(const kc_layer *l) {
    int64_t n = 0;
    for (int k = 0; k < l->n_weights; k++) n += l->w[k].size;
    return n;
}

/* ---------------------------------------------------------------- registry */

static void test_registry(void **state) {
    static const char *const names[] = {"InputLayer", "Conv2D", "Dense", "MaxPooling2D", "AveragePooling2D",
                                        "GlobalAveragePooling2D", "Flatten", "Reshape", "Dropout",
                                        "BatchNormalization", "Activation", "ReLU", "Softmax", "ZeroPadding2D",
                                        "Add", "Concatenate", "DepthwiseConv2D",
                                        /* normalisation and resampling */
                                        "Rescaling", "Normalization", "LayerNormalization",
                                        "GroupNormalization", "UpSampling2D", "Cropping2D",
                                        "GlobalMaxPooling2D", "Permute", "RepeatVector",
                                        /* merges, activation layers, operation nodes */
                                        "Multiply", "Subtract", "Average", "Maximum", "Minimum", "LeakyReLU", "ELU",
                                        "PReLU", "TensorOp",
                                        /* keras.applications' custom layers */ "CustomScaleLayer",
                                        /* augmentation and preprocessing */
                                        "RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                                        "RandomCrop", "CenterCrop", "RandomContrast", "RandomBrightness", "Resizing",
                                        /* convolutions */
                                        "SeparableConv2D", "Conv2DTranspose",
                                        /* regularising layers */ "SpatialDropout2D", "StochasticDepth",
                                        "LayerScale",
                                        /* Gaussian noise layers */ "GaussianNoise", "GaussianDropout"};
    assert_int_equal(kc__layer_kind_count(), (int)KC_ARRAY_LEN(names));
    /* tf-keras's InceptionResNetV2 names its custom layer with the default package */
    assert_ptr_equal(kc__layer_find("Custom>CustomScaleLayer"), kc__layer_find("CustomScaleLayer"));
    assert_ptr_equal(kc__layer_find("Custom>LayerScale"), kc__layer_find("LayerScale"));
    assert_null(kc__layer_find("Custom>Dense"));
    assert_null(kc__layer_find("Custom>"));
    for (size_t i = 0; i < KC_ARRAY_LEN(names); i++) {
        const kc_layer_ops *o = kc__layer_find(names[i]);
        assert_non_null(o);
        assert_string_equal(o->class_name, names[i]);
        assert_non_null(o->snake_name);
        assert_non_null(o->init);
        assert_non_null(o->get_opts);
        assert_non_null(o->build);
        assert_non_null(o->forward);
        assert_non_null(o->backward);
        assert_true(o->cfg_size > 0 && o->opts_size >= sizeof(const char *));
    }
    for (int i = 0; i < kc__layer_kind_count(); i++) {
        const kc_layer_ops *o = kc__layer_kind(i);
        assert_non_null(o);
        assert_ptr_equal(kc__layer_find(o->class_name), o);
    }
    assert_null(kc__layer_kind(-1));
    assert_null(kc__layer_kind(kc__layer_kind_count()));
    assert_ptr_equal(kc__layer_find("Convolution2D"), &kc__conv2d_ops);
    assert_ptr_equal(kc__layer_find("MaxPool2D"), &kc__maxpool2d_ops);
    assert_ptr_equal(kc__layer_find("AvgPool2D"), &kc__avgpool2d_ops);
    assert_ptr_equal(kc__layer_find("GlobalAvgPool2D"), &kc__global_avgpool2d_ops);
    assert_ptr_equal(kc__layer_find("InputLayer"), &kc__input_layer_ops);
    assert_null(kc__layer_find("LSTM"));
    assert_null(kc__layer_find("conv2d_typo"));
    assert_null(kc__layer_find(NULL));
    assert_true(kc__input_layer_ops.flags & KC_LAYER_INPUT);
    assert_true(kc__flatten_ops.flags & KC_LAYER_ALIAS);
    assert_true(kc__reshape_ops.flags & KC_LAYER_ALIAS);
    assert_int_equal(kc__add_ops.min_inputs, 2);
    assert_int_equal(kc__add_ops.max_inputs, 8);
    /* the layers with an activation report it */
    assert_non_null(kc__conv2d_ops.activation);
    assert_non_null(kc__dense_ops.activation);
    assert_non_null(kc__activation_ops.activation);
    assert_non_null(kc__softmax_ops.activation);
    assert_non_null(kc__relu_ops.activation);
    assert_null(kc__maxpool2d_ops.activation);
}

static void test_create(void **state) {
    kc_layer *l = (kc_layer *)1;
    assert_int_equal(kc__layer_create(NULL, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_null(l);
    assert_int_equal(kc__layer_create(&(kc_layer_spec){"LSTM", NULL}, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "'LSTM'");
    assert_contains(kc_last_error(), "Conv2D");
    assert_null(l);
    /* NULL opts: Keras defaults; Conv2D has no default filters */
    assert_int_equal(kc__layer_create(&(kc_layer_spec){"Flatten", NULL}, &l), KC_STATUS_OK);
    assert_string_equal(l->name, "");
    kc__layer_destroy(l);
    assert_int_equal(kc__layer_create(&(kc_layer_spec){"Conv2D", NULL}, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_contains(kc_last_error(), "filters");
    /* the name is copied from the opts */
    char name[8] = "abc";
    assert_int_equal(kc__layer_create(KC_DENSE(.name = name, .units = 2), &l), KC_STATUS_OK);
    name[0] = 'X';
    assert_string_equal(l->name, "abc");
    assert_ptr_equal(l->ops, &kc__dense_ops);
    kc__layer_destroy(l);
    char longname[KC_NAME_MAX + 10];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(kc__layer_create(KC_DENSE(.name = longname, .units = 2), &l), KC_STATUS_INVALID_ARGUMENT);
    assert_null(l);
    kc__layer_destroy(NULL);
}

/* ---------------------------------------------------------------- shapes and weights */

static void test_default_cnn_shapes(void **state) {
    kc_layer *in = must(KC_INPUT(.shape = {28, 28, 1}), 0, NULL);
    assert_shape(in->out_shape, SHAPE(28, 28, 1));
    kc_layer *c1 = must(KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .activation = "relu"), 1, &in->out_shape);
    assert_shape(c1->out_shape, SHAPE(26, 26, 32));
    assert_int_equal(c1->n_weights, 2);
    assert_string_equal(c1->w[0].name, "kernel");
    assert_shape(c1->w[0].shape, SHAPE(3, 3, 1, 32));
    assert_int_equal(c1->w[0].fan_in, 9);
    assert_int_equal(c1->w[0].fan_out, 9 * 32);
    assert_string_equal(c1->w[0].init, "glorot_uniform");
    assert_true(c1->w[0].trainable);
    assert_string_equal(c1->w[1].name, "bias");
    assert_shape(c1->w[1].shape, SHAPE(32));
    assert_string_equal(c1->w[1].init, "zeros");
    assert_int_equal(params_of(c1), 320);
    assert_int_equal(c1->ops->flops(c1), 2LL * 26 * 26 * 32 * 3 * 3 * 1);
    kc_layer *p1 = must(KC_MAXPOOL2D(.pool_size = {2, 2}), 1, &c1->out_shape);
    assert_shape(p1->out_shape, SHAPE(13, 13, 32));
    assert_int_equal(p1->n_weights, 0);
    kc_layer *c2 = must(KC_CONV2D(.filters = 64, .kernel_size = {3, 3}, .activation = "relu"), 1, &p1->out_shape);
    assert_shape(c2->out_shape, SHAPE(11, 11, 64));
    assert_int_equal(params_of(c2), 18496);
    kc_layer *p2 = must(KC_MAXPOOL2D(.pool_size = {2, 2}), 1, &c2->out_shape);
    assert_shape(p2->out_shape, SHAPE(5, 5, 64));
    kc_layer *fl = must(KC_FLATTEN(), 1, &p2->out_shape);
    assert_shape(fl->out_shape, SHAPE(1600));
    assert_true(fl->ops->flops == NULL || fl->ops->flops(fl) == 0);
    kc_layer *dr = must(KC_DROPOUT(.rate = 0.5f), 1, &fl->out_shape);
    assert_shape(dr->out_shape, SHAPE(1600));
    kc_layer *d = must(KC_DENSE(.units = 10, .activation = "softmax"), 1, &dr->out_shape);
    assert_shape(d->out_shape, SHAPE(10));
    assert_shape(d->w[0].shape, SHAPE(1600, 10));
    assert_int_equal(params_of(d), 16010);
    assert_int_equal(d->ops->flops(d), 2LL * 1600 * 10);
    /* Keras's mnist_convnet summary: 34,826 parameters */
    assert_int_equal(params_of(c1) + params_of(c2) + params_of(d), 34826);
    kc_layer *all[] = {in, c1, p1, c2, p2, fl, dr, d};
    for (size_t i = 0; i < KC_ARRAY_LEN(all); i++) kc__layer_destroy(all[i]);
}

static void test_conv_out_size(void **state) {
    static const struct {
        int in, k, s, d;
        bool same;
        int out, pad;
    } t[] = {
        {28, 3, 1, 1, false, 26, 0}, {7, 3, 2, 1, false, 3, 0},  {8, 3, 2, 1, false, 3, 0},
        {7, 3, 1, 2, false, 3, 0},   {5, 5, 1, 1, false, 1, 0},  {4, 5, 1, 1, false, 0, 0},
        {7, 3, 2, 1, true, 4, 1},    {6, 3, 2, 1, true, 3, 0},   {5, 4, 1, 1, true, 5, 1},
        {5, 2, 1, 1, true, 5, 0},    {7, 3, 1, 2, true, 7, 2},   {5, 2, 2, 1, true, 3, 0},
        {1, 3, 1, 1, true, 1, 1},    {13, 2, 2, 1, false, 6, 0}, {6, 4, 2, 1, true, 3, 1},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(t); i++) {
        int out = -1, pad = -1;
        kc__conv_out_size(t[i].in, t[i].k, t[i].s, t[i].d, t[i].same, &out, &pad);
        if (out != t[i].out || pad != t[i].pad)
            fail_msg("in %d k %d s %d d %d %s: out %d pad %d, expected %d %d", t[i].in, t[i].k, t[i].s, t[i].d,
                     t[i].same ? "same" : "valid", out, pad, t[i].out, t[i].pad);
    }
}

static void test_shape_inference(void **state) {
    kc_shape s;
    kc_layer *l;
    /* 'same' with stride 2 on odd sizes: ceil(in / 2) */
    s = SHAPE(7, 9, 3);
    l = must(KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same"), 1, &s);
    assert_shape(l->out_shape, SHAPE(4, 5, 4));
    kc__layer_destroy(l);
    l = must(KC_CONV2D(.filters = 4, .kernel_size = {3}, .strides = {2}), 1, &s); /* {3} means (3, 3) */
    assert_shape(l->out_shape, SHAPE(3, 4, 4));
    assert_shape(l->w[0].shape, SHAPE(3, 3, 3, 4));
    kc__layer_destroy(l);
    l = must(KC_CONV2D(.filters = 2, .kernel_size = {3, 3}, .dilation_rate = {2, 2}), 1, &s);
    assert_shape(l->out_shape, SHAPE(3, 5, 2));
    kc__layer_destroy(l);
    l = must(KC_CONV2D(.filters = 2, .kernel_size = {3, 3}, .use_bias = KC_FALSE), 1, &s);
    assert_int_equal(l->n_weights, 1);
    assert_int_equal(params_of(l), 3 * 3 * 3 * 2);
    kc__layer_destroy(l);
    l = must(KC_MAXPOOL2D(.padding = "same"), 1, &s);
    assert_shape(l->out_shape, SHAPE(4, 5, 3));
    kc__layer_destroy(l);
    l = must(KC_AVGPOOL2D(.pool_size = {3, 3}, .strides = {1, 1}), 1, &s);
    assert_shape(l->out_shape, SHAPE(5, 7, 3));
    kc__layer_destroy(l);
    l = must(KC_GLOBALAVGPOOL2D(), 1, &s);
    assert_shape(l->out_shape, SHAPE(3));
    kc__layer_destroy(l);
    l = must(KC_GLOBALAVGPOOL2D(.keepdims = KC_TRUE), 1, &s);
    assert_shape(l->out_shape, SHAPE(1, 1, 3));
    kc__layer_destroy(l);
    l = must(KC_ZEROPAD2D(.padding = {{1, 2}, {0, 3}}), 1, &s);
    assert_shape(l->out_shape, SHAPE(10, 12, 3));
    kc__layer_destroy(l);
    l = must(KC_ZEROPAD2D(), 1, &s);
    assert_shape(l->out_shape, SHAPE(9, 11, 3));
    kc__layer_destroy(l);
    l = must(KC_RESHAPE(.target_shape = {-1, 3}), 1, &s);
    assert_shape(l->out_shape, SHAPE(63, 3));
    kc__layer_destroy(l);
    l = must(KC_RESHAPE(.target_shape = {9, 7, 3}), 1, &s);
    assert_shape(l->out_shape, SHAPE(9, 7, 3));
    kc__layer_destroy(l);
    l = must(KC_BATCHNORM(), 1, &s);
    assert_shape(l->out_shape, s);
    assert_int_equal(l->n_weights, 4);
    static const char *const bn_names[] = {"gamma", "beta", "moving_mean", "moving_variance"};
    static const bool bn_train[] = {true, true, false, false};
    static const char *const bn_init[] = {"ones", "zeros", "zeros", "ones"};
    for (int k = 0; k < 4; k++) {
        assert_string_equal(l->w[k].name, bn_names[k]);
        assert_int_equal(l->w[k].trainable, bn_train[k]);
        assert_string_equal(l->w[k].init, bn_init[k]);
        assert_shape(l->w[k].shape, SHAPE(3));
    }
    kc__layer_destroy(l);
    l = must(KC_BATCHNORM(.center = KC_FALSE, .axis = 3), 1, &s); /* Keras counts the batch axis */
    assert_int_equal(l->n_weights, 3);
    assert_string_equal(l->w[0].name, "gamma");
    assert_string_equal(l->w[1].name, "moving_mean");
    kc__layer_destroy(l);
    /* Dense on the last axis of any rank */
    s = SHAPE(4, 6, 8);
    l = must(KC_DENSE(.units = 5), 1, &s);
    assert_shape(l->out_shape, SHAPE(4, 6, 5));
    assert_shape(l->w[0].shape, SHAPE(8, 5));
    assert_int_equal(l->ops->flops(l), 2LL * 4 * 6 * 8 * 5);
    kc__layer_destroy(l);
    /* merges */
    kc_shape two[3] = {SHAPE(4, 4, 3), SHAPE(4, 4, 5), SHAPE(4, 4, 3)};
    l = must(KC_CONCATENATE(), 3, two);
    assert_shape(l->out_shape, SHAPE(4, 4, 11));
    kc__layer_destroy(l);
    kc_shape same3[3] = {SHAPE(4, 4, 3), SHAPE(4, 4, 3), SHAPE(4, 4, 3)};
    l = must(KC_ADD(), 3, same3);
    assert_shape(l->out_shape, SHAPE(4, 4, 3));
    kc__layer_destroy(l);
}

static void test_shape_errors(void **state) {
    kc_layer *l = NULL;
    kc_shape flat = SHAPE(784);
    assert_int_equal(make(KC_CONV2D(.filters = 8, .kernel_size = {3, 3}), "c1", 1, &flat, &l), KC_STATUS_SHAPE);
    assert_string_equal(kc_last_error(),
                        "Conv2D 'c1': expects input (H, W, C), got (None, 784); add a Reshape or check input_shape");
    kc__layer_destroy(l);
    kc_shape small = SHAPE(2, 2, 1);
    assert_int_equal(make(KC_CONV2D(.filters = 8, .kernel_size = {3, 3}), "c2", 1, &small, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Conv2D 'c2'");
    assert_contains(kc_last_error(), "(None, 2, 2, 1)");
    kc__layer_destroy(l);
    assert_int_equal(make(KC_MAXPOOL2D(.pool_size = {3, 3}), "p", 1, &small, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "MaxPooling2D 'p'");
    kc__layer_destroy(l);
    assert_int_equal(make(KC_MAXPOOL2D(), "p", 1, &flat, &l), KC_STATUS_SHAPE);
    kc__layer_destroy(l);
    assert_int_equal(make(KC_GLOBALAVGPOOL2D(), "g", 1, &flat, &l), KC_STATUS_SHAPE);
    kc__layer_destroy(l);
    assert_int_equal(make(KC_ZEROPAD2D(), "z", 1, &flat, &l), KC_STATUS_SHAPE);
    kc__layer_destroy(l);
    kc_shape s = SHAPE(5, 5, 3);
    assert_int_equal(make(KC_RESHAPE(.target_shape = {7, 11}), "r", 1, &s, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Reshape 'r'");
    assert_contains(kc_last_error(), "(None, 5, 5, 3)");
    assert_contains(kc_last_error(), "(7, 11)");
    kc__layer_destroy(l);
    assert_int_equal(make(KC_RESHAPE(.target_shape = {-1, 7}), "r", 1, &s, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "(-1, 7)");
    kc__layer_destroy(l);
    kc_shape mism[2] = {SHAPE(4, 4, 3), SHAPE(4, 4, 5)};
    assert_int_equal(make(KC_ADD(), "a", 2, mism, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Add 'a'");
    assert_contains(kc_last_error(), "(None, 4, 4, 3)");
    assert_contains(kc_last_error(), "(None, 4, 4, 5)");
    kc__layer_destroy(l);
    kc_shape cm[2] = {SHAPE(4, 4, 3), SHAPE(4, 5, 3)};
    assert_int_equal(make(KC_CONCATENATE(), "cat", 2, cm, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Concatenate 'cat'");
    assert_contains(kc_last_error(), "(None, 4, 5, 3)");
    kc__layer_destroy(l);
    kc_shape rk[2] = {SHAPE(4, 3), SHAPE(12)};
    assert_int_equal(make(KC_CONCATENATE(), "cat", 2, rk, &l), KC_STATUS_SHAPE);
    kc__layer_destroy(l);
    /* axes other than the last are not supported (Keras counts the batch axis) */
    assert_int_equal(make(KC_BATCHNORM(.axis = 2), "bn", 1, &s, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "BatchNormalization 'bn'");
    assert_contains(kc_last_error(), "axis");
    kc__layer_destroy(l);
    kc_shape s2 = SHAPE(3, 4);
    assert_int_equal(make(KC_SOFTMAX(.axis = 1), "sm", 1, &s2, &l), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "axis");
    kc__layer_destroy(l);
    assert_int_equal(make(KC_SOFTMAX(.axis = 2), "sm", 1, &s2, &l), KC_STATUS_OK);
    kc__layer_destroy(l);
    assert_int_equal(make(KC_CONCATENATE(.axis = 1), "cat", 2, (kc_shape[]){s2, s2}, &l), KC_STATUS_UNSUPPORTED);
    kc__layer_destroy(l);
    /* an unnamed layer is named by its class */
    assert_int_equal(make(KC_CONV2D(.filters = 8, .kernel_size = {3, 3}), NULL, 1, &flat, &l), KC_STATUS_SHAPE);
    assert_contains(kc_last_error(), "Conv2D: expects input");
    kc__layer_destroy(l);
}

/* ---------------------------------------------------------------- defaults and errors */

static void test_defaults(void **state) {
    kc_shape s = SHAPE(8, 8, 3);
    kc_layer *l;

    l = must(KC_CONV2D(.name = "c", .filters = 4, .kernel_size = {3, 3}), 1, &s);
    kc_conv2d_opts co;
    memset(&co, 0xab, sizeof co);
    l->ops->get_opts(l, &co);
    assert_string_equal(co.name, "t");
    assert_int_equal(co.filters, 4);
    assert_int_equal(co.kernel_size[0], 3);
    assert_int_equal(co.kernel_size[1], 3);
    assert_int_equal(co.strides[0], 1);
    assert_int_equal(co.strides[1], 1);
    assert_string_equal(co.padding, "valid");
    assert_int_equal(co.dilation_rate[0], 1);
    assert_int_equal(co.dilation_rate[1], 1);
    assert_string_equal(co.activation, "linear");
    assert_int_equal(co.use_bias, KC_TRUE);
    assert_string_equal(co.kernel_initializer, "glorot_uniform");
    assert_string_equal(co.bias_initializer, "zeros");
    kc__layer_destroy(l);
    l = must(KC_CONV2D(.filters = 4, .kernel_size = {2, 2}, .padding = "SAME", .activation = "swish",
                       .use_bias = KC_FALSE, .kernel_initializer = "HeNormal"),
             1, &s);
    l->ops->get_opts(l, &co);
    assert_string_equal(co.padding, "same");
    assert_string_equal(co.activation, "silu");
    assert_int_equal(co.use_bias, KC_FALSE);
    assert_string_equal(co.kernel_initializer, "he_normal");
    assert_string_equal(l->w[0].init, "he_normal");
    kc__layer_destroy(l);

    l = must(KC_DENSE(.units = 7), 1, &s);
    kc_dense_opts dn;
    l->ops->get_opts(l, &dn);
    assert_int_equal(dn.units, 7);
    assert_string_equal(dn.activation, "linear");
    assert_int_equal(dn.use_bias, KC_TRUE);
    assert_string_equal(dn.kernel_initializer, "glorot_uniform");
    assert_string_equal(dn.bias_initializer, "zeros");
    kc__layer_destroy(l);

    kc_pool2d_opts po;
    l = must(KC_MAXPOOL2D(), 1, &s);
    l->ops->get_opts(l, &po);
    assert_int_equal(po.pool_size[0], 2);
    assert_int_equal(po.pool_size[1], 2);
    assert_int_equal(po.strides[0], 2);
    assert_int_equal(po.strides[1], 2);
    assert_string_equal(po.padding, "valid");
    kc__layer_destroy(l);
    l = must(KC_AVGPOOL2D(.pool_size = {3, 3}), 1, &s);
    l->ops->get_opts(l, &po);
    assert_int_equal(po.strides[0], 3); /* strides default to pool_size */
    assert_int_equal(po.strides[1], 3);
    kc__layer_destroy(l);

    kc_global_pool_opts go;
    l = must(KC_GLOBALAVGPOOL2D(), 1, &s);
    l->ops->get_opts(l, &go);
    assert_int_equal(go.keepdims, KC_FALSE);
    kc__layer_destroy(l);

    kc_batchnorm_opts bo;
    l = must(KC_BATCHNORM(), 1, &s);
    l->ops->get_opts(l, &bo);
    assert_int_equal(bo.axis, -1);
    assert_true(fabsf(bo.momentum - 0.99f) < 1e-7f);
    assert_true(fabsf(bo.epsilon - 1e-3f) < 1e-10f);
    assert_int_equal(bo.center, KC_TRUE);
    assert_int_equal(bo.scale, KC_TRUE);
    kc__layer_destroy(l);

    kc_dropout_opts dro;
    l = must(KC_DROPOUT(.rate = 0.25f), 1, &s);
    l->ops->get_opts(l, &dro);
    assert_true(dro.rate == 0.25f);
    kc__layer_destroy(l);

    kc_relu_opts ro;
    l = must(KC_RELU(), 1, &s);
    l->ops->get_opts(l, &ro);
    assert_true(ro.max_value == 0.0f && ro.negative_slope == 0.0f && ro.threshold == 0.0f);
    assert_int_equal(l->ops->activation(l).kind, KC_ACT_RELU);
    kc__layer_destroy(l);
    l = must(KC_RELU(.max_value = 6.0f), 1, &s);
    kc_act_params ap = l->ops->activation(l);
    assert_int_equal(ap.kind, KC_ACT_RELU_GENERAL);
    assert_true(ap.beta == 6.0f && ap.alpha == 0.0f && ap.gamma == 0.0f);
    kc__layer_destroy(l);

    kc_softmax_opts so;
    l = must(KC_SOFTMAX(), 1, &s);
    l->ops->get_opts(l, &so);
    assert_int_equal(so.axis, -1);
    assert_int_equal(l->ops->activation(l).kind, KC_ACT_SOFTMAX);
    kc__layer_destroy(l);

    kc_zeropad2d_opts zo;
    l = must(KC_ZEROPAD2D(), 1, &s);
    l->ops->get_opts(l, &zo);
    assert_int_equal(zo.padding[0][0], 1);
    assert_int_equal(zo.padding[0][1], 1);
    assert_int_equal(zo.padding[1][0], 1);
    assert_int_equal(zo.padding[1][1], 1);
    kc__layer_destroy(l);

    kc_activation_opts ao;
    l = must(KC_ACTIVATION(), 1, &s);
    l->ops->get_opts(l, &ao);
    assert_string_equal(ao.activation, "linear");
    kc__layer_destroy(l);
    l = must(KC_ACTIVATION(.activation = "leaky_relu"), 1, &s);
    l->ops->get_opts(l, &ao);
    assert_string_equal(ao.activation, "leaky_relu");
    assert_true(fabsf(l->ops->activation(l).alpha - 0.2f) < 1e-7f);
    kc__layer_destroy(l);

    kc_input_opts io;
    l = must(KC_INPUT(.name = "in", .shape = {28, 28, 1}), 0, NULL);
    l->ops->get_opts(l, &io);
    assert_int_equal(io.shape[0], 28);
    assert_int_equal(io.shape[2], 1);
    assert_int_equal(io.shape[3], 0);
    kc__layer_destroy(l);

    kc_reshape_opts rso;
    l = must(KC_RESHAPE(.target_shape = {-1, 3}), 1, &s);
    l->ops->get_opts(l, &rso);
    assert_int_equal(rso.target_shape[0], -1);
    assert_int_equal(rso.target_shape[1], 3);
    assert_int_equal(rso.target_shape[2], 0);
    kc__layer_destroy(l);

    kc_merge_opts mo;
    l = must(KC_CONCATENATE(), 2, (kc_shape[]){s, s});
    l->ops->get_opts(l, &mo);
    assert_int_equal(mo.axis, -1);
    kc__layer_destroy(l);
}

typedef struct bad_case {
    const kc_layer_spec *spec;
    kc_status status;
    const char *who;    /* the layer as named in the message */
    const char *option; /* the option named in the message */
} bad_case;

static void test_invalid_options(void **state) {
    const bad_case t[] = {
        {KC_CONV2D(.name = "bad", .filters = 0, .kernel_size = {3, 3}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "filters"},
        {KC_CONV2D(.name = "bad", .filters = -2, .kernel_size = {3, 3}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "filters"},
        {KC_CONV2D(.name = "bad", .filters = 4), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "kernel_size"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, -1}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "kernel_size"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {0, 3}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "kernel_size"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .strides = {-1, 1}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "strides"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .dilation_rate = {0, -1}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "dilation_rate"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .strides = {2, 2}, .dilation_rate = {2, 2}), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "dilation_rate"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .padding = "full"), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "padding 'full'"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .padding = "causal"), KC_STATUS_UNSUPPORTED, "Conv2D 'bad'", "padding 'causal'"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .activation = "swishy"), KC_STATUS_UNSUPPORTED, "Conv2D 'bad'", "activation 'swishy'"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .kernel_initializer = "orthogonal"), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "kernel_initializer 'orthogonal'"},
        {KC_CONV2D(.name = "bad", .filters = 4, .kernel_size = {3, 3}, .bias_initializer = "nope"), KC_STATUS_INVALID_ARGUMENT, "Conv2D 'bad'", "bias_initializer 'nope'"},
        {KC_DENSE(.name = "bad", .units = 0), KC_STATUS_INVALID_ARGUMENT, "Dense 'bad'", "units"},
        {KC_DENSE(.name = "bad", .units = -3), KC_STATUS_INVALID_ARGUMENT, "Dense 'bad'", "units"},
        {KC_DENSE(.name = "bad", .units = 3, .activation = "Relu"), KC_STATUS_UNSUPPORTED, "Dense 'bad'", "activation 'Relu'"},
        {KC_DENSE(.name = "bad", .units = 3, .kernel_initializer = "x"), KC_STATUS_INVALID_ARGUMENT, "Dense 'bad'", "kernel_initializer"},
        {KC_MAXPOOL2D(.name = "bad", .pool_size = {-2, 2}), KC_STATUS_INVALID_ARGUMENT, "MaxPooling2D 'bad'", "pool_size"},
        {KC_MAXPOOL2D(.name = "bad", .strides = {2, -1}), KC_STATUS_INVALID_ARGUMENT, "MaxPooling2D 'bad'", "strides"},
        {KC_AVGPOOL2D(.name = "bad", .padding = "VALIDX"), KC_STATUS_INVALID_ARGUMENT, "AveragePooling2D 'bad'", "padding 'VALIDX'"},
        {KC_DROPOUT(.name = "bad", .rate = 1.0f), KC_STATUS_INVALID_ARGUMENT, "Dropout 'bad'", "rate"},
        {KC_DROPOUT(.name = "bad", .rate = -0.1f), KC_STATUS_INVALID_ARGUMENT, "Dropout 'bad'", "rate"},
        {KC_DROPOUT(.name = "bad", .rate = NAN), KC_STATUS_INVALID_ARGUMENT, "Dropout 'bad'", "rate"},
        {KC_BATCHNORM(.name = "bad", .momentum = 1.5f), KC_STATUS_INVALID_ARGUMENT, "BatchNormalization 'bad'", "momentum"},
        {KC_BATCHNORM(.name = "bad", .epsilon = -1e-3f), KC_STATUS_INVALID_ARGUMENT, "BatchNormalization 'bad'", "epsilon"},
        {KC_BATCHNORM(.name = "bad", .axis = -2), KC_STATUS_UNSUPPORTED, "BatchNormalization 'bad'", "axis"},
        {KC_ACTIVATION(.name = "bad", .activation = "hard_tanh"), KC_STATUS_UNSUPPORTED, "Activation 'bad'", "activation 'hard_tanh'"},
        {KC_RELU(.name = "bad", .max_value = -1.0f), KC_STATUS_INVALID_ARGUMENT, "ReLU 'bad'", "max_value"},
        {KC_RELU(.name = "bad", .negative_slope = -0.1f), KC_STATUS_INVALID_ARGUMENT, "ReLU 'bad'", "negative_slope"},
        {KC_RELU(.name = "bad", .threshold = -0.5f), KC_STATUS_INVALID_ARGUMENT, "ReLU 'bad'", "threshold"},
        {KC_SOFTMAX(.name = "bad", .axis = -2), KC_STATUS_UNSUPPORTED, "Softmax 'bad'", "axis"},
        {KC_ZEROPAD2D(.name = "bad", .padding = {{1, -1}, {0, 0}}), KC_STATUS_INVALID_ARGUMENT, "ZeroPadding2D 'bad'", "padding"},
        {KC_RESHAPE(.name = "bad", .target_shape = {-1, -1}), KC_STATUS_INVALID_ARGUMENT, "Reshape 'bad'", "target_shape"},
        {KC_RESHAPE(.name = "bad", .target_shape = {4, -3}), KC_STATUS_INVALID_ARGUMENT, "Reshape 'bad'", "target_shape"},
        {KC_RESHAPE(.name = "bad", .target_shape = {4, 0, 3}), KC_STATUS_INVALID_ARGUMENT, "Reshape 'bad'", "target_shape"},
        {KC_RESHAPE(.name = "bad"), KC_STATUS_INVALID_ARGUMENT, "Reshape 'bad'", "target_shape"},
        {KC_INPUT(.name = "bad"), KC_STATUS_INVALID_ARGUMENT, "InputLayer 'bad'", "shape"},
        {KC_INPUT(.name = "bad", .shape = {28, -1}), KC_STATUS_INVALID_ARGUMENT, "InputLayer 'bad'", "shape"},
        {KC_INPUT(.name = "bad", .shape = {28, 0, 1}), KC_STATUS_INVALID_ARGUMENT, "InputLayer 'bad'", "shape"},
        {KC_CONCATENATE(.name = "bad", .axis = -3), KC_STATUS_UNSUPPORTED, "Concatenate 'bad'", "axis"},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(t); i++) {
        kc_layer *l = (kc_layer *)1;
        kc__clear_error();
        kc_status s = kc__layer_create(t[i].spec, &l);
        if (s != t[i].status)
            fail_msg("case %zu (%s %s): status %d, expected %d (%s)", i, t[i].who, t[i].option, (int)s,
                     (int)t[i].status, kc_last_error());
        assert_null(l);
        assert_contains(kc_last_error(), t[i].who);
        assert_contains(kc_last_error(), t[i].option);
    }
}

static void test_padding_parse(void **state) {
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_CONV2D(.name = "c1", .filters = 1, .kernel_size = {1, 1}), &l), KC_STATUS_OK);
    bool same = true;
    assert_int_equal(kc__padding_parse(l, NULL, &same), KC_STATUS_OK);
    assert_false(same);
    assert_int_equal(kc__padding_parse(l, "valid", &same), KC_STATUS_OK);
    assert_false(same);
    assert_int_equal(kc__padding_parse(l, "same", &same), KC_STATUS_OK);
    assert_true(same);
    assert_int_equal(kc__padding_parse(l, "full", &same), KC_STATUS_INVALID_ARGUMENT);
    assert_string_equal(kc_last_error(), "Conv2D 'c1': padding 'full' is not one of valid, same");
    kc__layer_destroy(l);
}

static void test_activations(void **state) {
    static const struct {
        const char *name, *canon;
        kc_act kind;
        float alpha;
        bool needs_x;
    } t[] = {
        {NULL, "linear", KC_ACT_LINEAR, 0, false},       {"", "linear", KC_ACT_LINEAR, 0, false},
        {"linear", "linear", KC_ACT_LINEAR, 0, false},   {"relu", "relu", KC_ACT_RELU, 0, false},
        {"sigmoid", "sigmoid", KC_ACT_SIGMOID, 0, false}, {"tanh", "tanh", KC_ACT_TANH, 0, false},
        {"softmax", "softmax", KC_ACT_SOFTMAX, 0, false}, {"elu", "elu", KC_ACT_ELU, 1.0f, false},
        {"gelu", "gelu", KC_ACT_GELU, 0, true},          {"leaky_relu", "leaky_relu", KC_ACT_LEAKY_RELU, 0.2f, false},
        {"silu", "silu", KC_ACT_SILU, 0, true},          {"swish", "silu", KC_ACT_SILU, 0, true},
        /* broadcasting and activations */
        {"relu6", "relu6", KC_ACT_RELU_GENERAL, 0, false},
        {"hard_sigmoid", "hard_sigmoid", KC_ACT_HARD_SIGMOID, 0, true},
        {"hard_silu", "hard_silu", KC_ACT_HARD_SILU, 0, true}, {"hard_swish", "hard_silu", KC_ACT_HARD_SILU, 0, true},
        {"softplus", "softplus", KC_ACT_SOFTPLUS, 0, true}, {"softsign", "softsign", KC_ACT_SOFTSIGN, 0, true},
        {"selu", "selu", KC_ACT_SELU, 0, true},          {"mish", "mish", KC_ACT_MISH, 0, true},
        {"exponential", "exponential", KC_ACT_EXPONENTIAL, 0, false},
        {"log_softmax", "log_softmax", KC_ACT_LOG_SOFTMAX, 0, false},
        {"gelu_approximate", "gelu_approximate", KC_ACT_GELU_TANH, 0, true},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(t); i++) {
        kc_act_params p = {KC_ACT_COUNT, -1, -1, -1};
        assert_int_equal(kc__act_parse(t[i].name, &p), KC_STATUS_OK);
        assert_int_equal(p.kind, t[i].kind);
        assert_true(p.alpha == t[i].alpha);
        assert_string_equal(kc__act_name(&p), t[i].canon);
        assert_int_equal(kc__act_needs_input(p.kind), t[i].needs_x);
        assert_true(kc__act_flops(p.kind) >= 0);
    }
    assert_int_equal(kc__act_parse("hard_tanh", NULL), KC_STATUS_UNSUPPORTED);
    assert_contains(kc_last_error(), "'hard_tanh'");
    assert_contains(kc_last_error(), "mish");
    assert_contains(kc_last_error(), "leaky_relu");
    assert_contains(kc_last_error(), "gelu");
    kc_act_params g = {KC_ACT_RELU_GENERAL, 0.1f, 6.0f, 0.0f};
    assert_string_equal(kc__act_name(&g), "relu");
}

static void test_add_weight(void **state) {
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_DENSE(.name = "d", .units = 2), &l), KC_STATUS_OK);
    kc_shape s = SHAPE(3);
    for (int k = 0; k < KC_MAX_WEIGHTS; k++)
        assert_int_equal(kc__layer_add_weight(l, "w", s, true, "zeros", 3, 3), KC_STATUS_OK);
    assert_int_equal(l->n_weights, KC_MAX_WEIGHTS);
    assert_int_equal(kc__layer_add_weight(l, "w5", s, true, "zeros", 3, 3), KC_STATUS_INTERNAL);
    assert_contains(kc_last_error(), "Dense 'd'");
    assert_int_equal(l->n_weights, KC_MAX_WEIGHTS);
    l->n_weights = 0;
    assert_int_equal(kc__layer_add_weight(l, "w", s, true, "bogus", 3, 3), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(l->n_weights, 0);
    kc__layer_destroy(l);
}

/* ---------------------------------------------------------------- numerics */

typedef struct run_ctx {
    kc_backend *be;
    kc_layer *l;
    float *wbuf[KC_MAX_WEIGHTS];
    void *aux, *ws;
    size_t ws_bytes;
} run_ctx;

static void ctx_alloc(run_ctx *c, kc_layer *l, int batch) {
    memset(c, 0, sizeof *c);
    assert_int_equal(kc_backend_cpu_create(&c->be), KC_STATUS_OK);
    c->l = l;
    for (int k = 0; k < l->n_weights; k++) {
        l->w[k].data = calloc((size_t)l->w[k].size, sizeof(float));
        l->w[k].grad = l->w[k].trainable ? calloc((size_t)l->w[k].size, sizeof(float)) : NULL;
        assert_non_null(l->w[k].data);
    }
    size_t aux = l->ops->aux_bytes ? l->ops->aux_bytes(l, batch) : 0;
    size_t ws = l->ops->workspace_bytes ? l->ops->workspace_bytes(l, batch, c->be) : 0;
    c->aux = aux ? kc__malloc_aligned(aux, "aux") : NULL;
    c->ws = ws ? kc__malloc_aligned(ws, "ws") : NULL;
    c->ws_bytes = ws;
}

static void ctx_free(run_ctx *c) {
    for (int k = 0; k < c->l->n_weights; k++) {
        free(c->l->w[k].data);
        free(c->l->w[k].grad);
    }
    free(c->aux);
    free(c->ws);
    kc_backend_destroy(c->be);
    kc__layer_destroy(c->l);
}

static void fwd(run_ctx *c, int batch, bool training, const float *x, float *y, uint64_t seed) {
    kc_fwd a = {.be = c->be, .batch = batch, .training = training, .x = {x}, .y = y, .aux = c->aux, .ws = c->ws, .ws_bytes = c->ws_bytes,
                .seed = seed};
    kc_status s = c->l->ops->forward(c->l, &a);
    if (s != KC_STATUS_OK) fail_msg("forward: %s", kc_last_error());
}

static void test_batchnorm_inference(void **state) {
    enum { N = 4, H = 3, W = 2, C = 5 };
    kc_shape s = SHAPE(H, W, C);
    kc_layer *l = must(KC_BATCHNORM(.epsilon = 1e-2f), 1, &s);
    run_ctx c;
    ctx_alloc(&c, l, N);
    kc_rng g;
    kc__rng_seed(&g, 3);
    float *gamma = l->w[0].data, *beta = l->w[1].data, *mm = l->w[2].data, *mv = l->w[3].data;
    for (int j = 0; j < C; j++) {
        gamma[j] = (float)(0.5 + kc__rng_uniform(&g));
        beta[j] = (float)(kc__rng_uniform(&g) - 0.5);
        mm[j] = (float)(2.0 * kc__rng_uniform(&g) - 1.0);
        mv[j] = (float)(0.2 + 2.0 * kc__rng_uniform(&g));
    }
    float x[N * H * W * C], y[N * H * W * C]; /* (N, H, W, C) */
    for (int i = 0; i < N * H * W * C; i++) x[i] = (float)(3.0 * kc__rng_uniform(&g) - 1.5);
    float mm0[C], mv0[C];
    memcpy(mm0, mm, sizeof mm0);
    memcpy(mv0, mv, sizeof mv0);
    fwd(&c, N, false, x, y, 0);
    for (int i = 0; i < N * H * W * C; i++) {
        int j = i % C;
        double want = gamma[j] * (x[i] - mm[j]) / sqrt((double)mv[j] + 1e-2) + beta[j];
        if (fabs(y[i] - want) > 1e-5 * (1.0 + fabs(want))) fail_msg("y[%d] = %g, expected %g", i, y[i], want);
    }
    /* inference leaves the moving statistics alone */
    assert_memory_equal(mm, mm0, sizeof mm0);
    assert_memory_equal(mv, mv0, sizeof mv0);

    /* training: batch statistics, and moving = moving * 0.99 + batch * 0.01 (biased variance) */
    fwd(&c, N, true, x, y, 0);
    const int rows = N * H * W;
    for (int j = 0; j < C; j++) {
        double mean = 0, var = 0;
        for (int r = 0; r < rows; r++) mean += x[r * C + j];
        mean /= rows;
        for (int r = 0; r < rows; r++) var += (x[r * C + j] - mean) * (x[r * C + j] - mean);
        var /= rows;
        for (int r = 0; r < rows; r++) {
            double want = gamma[j] * (x[r * C + j] - mean) / sqrt(var + 1e-2) + beta[j];
            if (fabs(y[r * C + j] - want) > 1e-4 * (1.0 + fabs(want)))
                fail_msg("training y[%d, %d] = %g, expected %g", r, j, y[r * C + j], want);
        }
        assert_true(fabs(mm[j] - (0.99 * mm0[j] + 0.01 * mean)) < 1e-5);
        assert_true(fabs(mv[j] - (0.99 * mv0[j] + 0.01 * var)) < 1e-5);
    }
    ctx_free(&c);
}

static void test_dropout(void **state) {
    enum { N = 10, D = 1000 };
    kc_shape s = SHAPE(D);
    const float rate = 0.3f;
    kc_layer *l = must(KC_DROPOUT(.rate = rate), 1, &s);
    run_ctx c;
    ctx_alloc(&c, l, N);
    assert_non_null(c.aux);
    float *x = malloc(N * D * sizeof(float)), *y = malloc(N * D * sizeof(float)), *y2 = malloc(N * D * sizeof(float));
    assert_true(x && y && y2);
    for (int i = 0; i < N * D; i++) x[i] = 1.0f + (float)(i % 7);
    /* inference: identity */
    fwd(&c, N, false, x, y, 5);
    assert_memory_equal(x, y, N * D * sizeof(float));
    /* training: about `rate` zeroed, the rest scaled by 1 / (1 - rate) */
    fwd(&c, N, true, x, y, 5);
    int zeros = 0;
    for (int i = 0; i < N * D; i++) {
        if (y[i] == 0.0f) zeros++;
        else if (fabsf(y[i] - x[i] / (1.0f - rate)) > 1e-5f * x[i]) fail_msg("kept y[%d] = %g, x = %g", i, y[i], x[i]);
    }
    double frac = (double)zeros / (N * D);
    if (fabs(frac - rate) > 0.02) fail_msg("dropped fraction %.4f, expected %.2f", frac, rate);
    /* the same seed gives the same mask, another seed another one */
    fwd(&c, N, true, x, y2, 5);
    assert_memory_equal(y, y2, N * D * sizeof(float));
    fwd(&c, N, true, x, y2, 6);
    assert_true(memcmp(y, y2, N * D * sizeof(float)) != 0);
    ctx_free(&c);
    /* rate 0 in training is a copy and needs no mask */
    l = must(KC_DROPOUT(), 1, &s);
    ctx_alloc(&c, l, N);
    assert_null(c.aux);
    fwd(&c, N, true, x, y, 5);
    assert_memory_equal(x, y, N * D * sizeof(float));
    ctx_free(&c);
    free(x);
    free(y);
    free(y2);
}

/* Backward without dx (the layer after the input) gives the same weight gradients. */
static void test_backward_without_dx(void **state) {
    const kc_layer_spec *specs[] = {
        KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .activation = "gelu"),
        KC_DENSE(.units = 4, .activation = "tanh"),
        KC_BATCHNORM(),
    };
    for (size_t t = 0; t < KC_ARRAY_LEN(specs); t++) {
        enum { N = 2 };
        kc_shape s = SHAPE(5, 4, 2);
        kc_layer *l = must(specs[t], 1, &s);
        run_ctx c;
        ctx_alloc(&c, l, N);
        kc_rng g;
        kc__rng_seed(&g, 11);
        for (int k = 0; k < l->n_weights; k++)
            for (int64_t i = 0; i < l->w[k].size; i++)
                l->w[k].data[i] = strstr(l->w[k].name, "variance") ? 1.0f : (float)(kc__rng_uniform(&g) - 0.5);
        int64_t xn = N * kc__shape_size(&s), yn = N * kc__shape_size(&l->out_shape);
        float *x = malloc(xn * sizeof(float)), *y = malloc(yn * sizeof(float)), *dy = malloc(yn * sizeof(float));
        float *r = malloc(yn * sizeof(float)), *dx = malloc(xn * sizeof(float)), *g1[KC_MAX_WEIGHTS] = {0};
        assert_true(x && y && dy && r && dx);
        for (int64_t i = 0; i < xn; i++) x[i] = (float)(2.0 * kc__rng_uniform(&g) - 1.0);
        for (int64_t i = 0; i < yn; i++) r[i] = (float)(2.0 * kc__rng_uniform(&g) - 1.0);
        for (int pass = 0; pass < 2; pass++) {
            fwd(&c, N, true, x, y, 0);
            memcpy(dy, r, yn * sizeof(float));
            kc_bwd a = {.be = c.be, .batch = N, .x = {x}, .y = y, .dy = dy, .dx = {pass ? NULL : dx},
                        .aux = c.aux, .ws = c.ws, .ws_bytes = c.ws_bytes};
            assert_int_equal(l->ops->backward(l, &a), KC_STATUS_OK);
            for (int k = 0; k < l->n_weights; k++) {
                if (!l->w[k].grad) continue;
                if (pass == 0) {
                    g1[k] = malloc(l->w[k].size * sizeof(float));
                    memcpy(g1[k], l->w[k].grad, l->w[k].size * sizeof(float));
                    memset(l->w[k].grad, 0, l->w[k].size * sizeof(float));
                } else {
                    for (int64_t i = 0; i < l->w[k].size; i++)
                        if (fabsf(g1[k][i] - l->w[k].grad[i]) > 1e-5f * (1.0f + fabsf(g1[k][i])))
                            fail_msg("%s: %s grad[%lld] differs without dx", l->ops->class_name, l->w[k].name,
                                     (long long)i);
                }
            }
        }
        for (int k = 0; k < KC_MAX_WEIGHTS; k++) free(g1[k]);
        free(x), free(y), free(dy), free(r), free(dx);
        ctx_free(&c);
    }
}

/* defer_act: Conv2D/Dense stop at the pre-activation (logits) and skip its backward. */
static void test_defer_act(void **state) {
    enum { N = 3, D = 6, U = 4 };
    kc_shape s = SHAPE(D);
    kc_layer *l = must(KC_DENSE(.units = U, .activation = "softmax"), 1, &s);
    run_ctx c;
    ctx_alloc(&c, l, N);
    for (int64_t i = 0; i < l->w[0].size; i++) l->w[0].data[i] = 0.1f * (float)((i * 7) % 11) - 0.5f;
    float x[N * D], y[N * U], logits[N * U];
    for (int i = 0; i < N * D; i++) x[i] = 0.2f * (float)(i % 5) - 0.4f;
    fwd(&c, N, false, x, y, 0);
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int j = 0; j < U; j++) sum += y[n * U + j];
        assert_true(fabs(sum - 1.0) < 1e-5);
    }
    l->defer_act = true;
    fwd(&c, N, false, x, logits, 0);
    for (int n = 0; n < N; n++) {
        double m = -INFINITY, z = 0;
        for (int j = 0; j < U; j++) m = fmax(m, logits[n * U + j]);
        for (int j = 0; j < U; j++) z += exp(logits[n * U + j] - m);
        for (int j = 0; j < U; j++) assert_true(fabs(exp(logits[n * U + j] - m) / z - y[n * U + j]) < 1e-5);
    }
    ctx_free(&c);
}

/* Conv2D forward against a direct loop with TensorFlow's padding ('same': the extra pad
 * row/column goes at the end), for strides, dilation and even kernels. */
static void test_conv_forward_reference(void **state) {
    const struct {
        int h, w, c, f, kh, kw, sh, sw, dh, dw;
        const char *padding;
    } t[] = {
        {5, 6, 2, 3, 4, 4, 2, 2, 1, 1, "same"}, {5, 5, 2, 2, 2, 2, 1, 1, 1, 1, "same"},
        {7, 6, 1, 2, 3, 2, 2, 1, 1, 1, "valid"}, {7, 7, 2, 2, 3, 3, 1, 1, 2, 2, "same"},
        {7, 7, 2, 2, 3, 3, 1, 1, 2, 1, "valid"},
    };
    for (size_t ti = 0; ti < KC_ARRAY_LEN(t); ti++) {
        enum { N = 2 };
        kc_shape s = SHAPE(t[ti].h, t[ti].w, t[ti].c);
        kc_layer *l = must(KC_CONV2D(.filters = t[ti].f, .kernel_size = {t[ti].kh, t[ti].kw},
                                     .strides = {t[ti].sh, t[ti].sw}, .dilation_rate = {t[ti].dh, t[ti].dw},
                                     .padding = t[ti].padding),
                           1, &s);
        run_ctx c;
        ctx_alloc(&c, l, N);
        kc_rng g;
        kc__rng_seed(&g, 17 + ti);
        float *k = l->w[0].data, *b = l->w[1].data; /* (KH, KW, C, F), (F) */
        for (int64_t i = 0; i < l->w[0].size; i++) k[i] = (float)(kc__rng_uniform(&g) - 0.5);
        for (int64_t i = 0; i < l->w[1].size; i++) b[i] = (float)(kc__rng_uniform(&g) - 0.5);
        int64_t xn = N * kc__shape_size(&s), yn = N * kc__shape_size(&l->out_shape);
        float *x = malloc(xn * sizeof(float)), *y = malloc(yn * sizeof(float));
        assert_true(x && y);
        for (int64_t i = 0; i < xn; i++) x[i] = (float)(kc__rng_uniform(&g) - 0.5);
        fwd(&c, N, false, x, y, 0);
        const int H = t[ti].h, W = t[ti].w, C = t[ti].c, F = t[ti].f;
        const int OH = l->out_shape.dim[0], OW = l->out_shape.dim[1];
        bool same = strcmp(t[ti].padding, "same") == 0;
        int eh = (t[ti].kh - 1) * t[ti].dh + 1, ew = (t[ti].kw - 1) * t[ti].dw + 1;
        int pt = same ? KC_MAX((OH - 1) * t[ti].sh + eh - H, 0) / 2 : 0;
        int pl = same ? KC_MAX((OW - 1) * t[ti].sw + ew - W, 0) / 2 : 0;
        for (int n = 0; n < N; n++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++)
                    for (int f = 0; f < F; f++) {
                        double acc = b[f];
                        for (int i = 0; i < t[ti].kh; i++)
                            for (int j = 0; j < t[ti].kw; j++) {
                                int ih = oh * t[ti].sh + i * t[ti].dh - pt, iw = ow * t[ti].sw + j * t[ti].dw - pl;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                for (int ch = 0; ch < C; ch++)
                                    acc += (double)x[((n * H + ih) * W + iw) * C + ch] *
                                           k[((i * t[ti].kw + j) * C + ch) * F + f];
                            }
                        float got = y[((n * OH + oh) * OW + ow) * F + f];
                        if (fabs(got - acc) > 1e-5)
                            fail_msg("case %zu: y[%d,%d,%d,%d] = %g, expected %g", ti, n, oh, ow, f, got, acc);
                    }
        free(x);
        free(y);
        ctx_free(&c);
    }
}

/* Pooling with padding 'same' as TensorFlow: padded cells never win a max and are not
 * counted in an average. */
static void test_pool_same_semantics(void **state) {
    enum { N = 1, H = 3, W = 3, C = 2 };
    kc_shape s = SHAPE(H, W, C);
    float x[N * H * W * C], y[N * 2 * 2 * C];
    for (int i = 0; i < N * H * W * C; i++) x[i] = -1.0f - (float)i; /* all negative */
    kc_layer *l = must(KC_MAXPOOL2D(.padding = "same"), 1, &s);
    assert_shape(l->out_shape, SHAPE(2, 2, C));
    run_ctx c;
    ctx_alloc(&c, l, N);
    fwd(&c, N, false, x, y, 0);
    /* window (1, 1) covers only x[2, 2] */
    assert_true(y[(1 * 2 + 1) * C + 0] == x[(2 * W + 2) * C + 0]);
    for (int i = 0; i < N * 2 * 2 * C; i++) assert_true(y[i] < 0.0f);
    ctx_free(&c);
    for (int i = 0; i < N * H * W * C; i++) x[i] = 1.0f;
    l = must(KC_AVGPOOL2D(.padding = "same"), 1, &s);
    ctx_alloc(&c, l, N);
    fwd(&c, N, false, x, y, 0);
    for (int i = 0; i < N * 2 * 2 * C; i++) assert_true(fabsf(y[i] - 1.0f) < 1e-6f);
    ctx_free(&c);
}

static void test_initializers(void **state) {
    enum { N = 200000 };
    float *v = malloc(N * sizeof(float));
    assert_non_null(v);
    kc_rng g;
    kc__rng_seed(&g, 2024);
    /* glorot_uniform: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)), variance limit^2 / 3 */
    assert_int_equal(kc__init_fill("glorot_uniform", v, N, 100, 50, &g), KC_STATUS_OK);
    double limit = sqrt(6.0 / 150.0), sum = 0, sq = 0, mx = 0;
    for (int i = 0; i < N; i++) {
        sum += v[i], sq += (double)v[i] * v[i];
        mx = fmax(mx, fabs(v[i]));
    }
    assert_true(mx <= limit);
    assert_true(mx > 0.99 * limit);
    double mean = sum / N, var = sq / N - mean * mean;
    assert_true(fabs(mean) < 0.01 * limit);
    if (fabs(var / (limit * limit / 3.0) - 1.0) > 0.05) fail_msg("glorot_uniform variance %g", var);
    /* he_normal: truncated normal with stddev sqrt(2 / fan_in) after the truncation correction */
    assert_int_equal(kc__init_fill("he_normal", v, N, 200, 7, &g), KC_STATUS_OK);
    double sd = sqrt(2.0 / 200.0);
    sum = sq = mx = 0;
    for (int i = 0; i < N; i++) {
        sum += v[i], sq += (double)v[i] * v[i];
        mx = fmax(mx, fabs(v[i]));
    }
    mean = sum / N;
    double got_sd = sqrt(sq / N - mean * mean);
    if (fabs(got_sd / sd - 1.0) > 0.05) fail_msg("he_normal stddev %g, expected %g", got_sd, sd);
    assert_true(mx <= 2.0 * sd / 0.87962566103423978 + 1e-6);
    /* glorot_normal and he_uniform */
    assert_int_equal(kc__init_fill("glorot_normal", v, N, 30, 70, &g), KC_STATUS_OK);
    sd = sqrt(2.0 / 100.0);
    sq = 0;
    for (int i = 0; i < N; i++) sq += (double)v[i] * v[i];
    if (fabs(sqrt(sq / N) / sd - 1.0) > 0.05) fail_msg("glorot_normal stddev %g, expected %g", sqrt(sq / N), sd);
    assert_int_equal(kc__init_fill("HeUniform", v, N, 24, 1, &g), KC_STATUS_OK);
    limit = sqrt(6.0 / 24.0);
    mx = 0;
    for (int i = 0; i < N; i++) mx = fmax(mx, fabs(v[i]));
    assert_true(mx <= limit && mx > 0.99 * limit);
    assert_int_equal(kc__init_fill("zeros", v, 100, 1, 1, NULL), KC_STATUS_OK);
    for (int i = 0; i < 100; i++) assert_true(v[i] == 0.0f);
    assert_int_equal(kc__init_fill("ones", v, 100, 1, 1, NULL), KC_STATUS_OK);
    for (int i = 0; i < 100; i++) assert_true(v[i] == 1.0f);
    /* same seed, same values */
    float a[16], b[16];
    kc__rng_seed(&g, 9);
    kc__init_fill("glorot_uniform", a, 16, 4, 4, &g);
    kc__rng_seed(&g, 9);
    kc__init_fill("glorot_uniform", b, 16, 4, 4, &g);
    assert_memory_equal(a, b, sizeof a);
    assert_true(kc__init_known("glorot_uniform") && kc__init_known("GlorotUniform") && kc__init_known("he_normal"));
    assert_false(kc__init_known("orthogonal") || kc__init_known(NULL));
    assert_int_equal(kc__init_fill("orthogonal", v, 10, 1, 1, &g), KC_STATUS_INVALID_ARGUMENT);
    assert_contains(kc_last_error(), "'orthogonal'");
    assert_string_equal(kc__init_canonical("Zeros"), "zeros");
    free(v);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry),          cmocka_unit_test(test_create),
        cmocka_unit_test(test_default_cnn_shapes), cmocka_unit_test(test_conv_out_size),
        cmocka_unit_test(test_shape_inference),   cmocka_unit_test(test_shape_errors),
        cmocka_unit_test(test_defaults),          cmocka_unit_test(test_invalid_options),
        cmocka_unit_test(test_padding_parse),     cmocka_unit_test(test_activations),
        cmocka_unit_test(test_add_weight),        cmocka_unit_test(test_batchnorm_inference),
        cmocka_unit_test(test_dropout),           cmocka_unit_test(test_backward_without_dx),
        cmocka_unit_test(test_defer_act),         cmocka_unit_test(test_initializers),
        cmocka_unit_test(test_conv_forward_reference), cmocka_unit_test(test_pool_same_semantics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
