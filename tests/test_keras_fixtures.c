/* test_keras_fixtures.c — model files written by real Keras (tests/fixtures/keras, made by
 * tests/fixtures/make_keras_fixtures.py with Keras 3.15 and tf-keras 2.16): kerac loads
 * each one and reproduces Keras's own predictions on the committed inputs within 1e-4.
 *
 * Also: a fixture whose HDF5 global heap is damaged so that libhdf5 1.10 would loop forever
 * or read past its buffer (found by fuzz/fuzz_keras.c) must be refused with a clear error,
 * as .h5 and inside .keras.
 *
 * Four models (the default CNN, a net with BatchNormalization and padding "same" with
 * strides 2, a Functional residual net, a Dense-only net), each as
 *   <m>.keras      Keras 3 archive               predictions <m>_y3.npy
 *   <m>.keras3.h5  Keras 3's legacy HDF5 writer  predictions <m>_y3.npy
 *   <m>.keras2.h5  tf-keras (Keras 2) HDF5       predictions <m>_y2.npy (trained on its own)
 *   <m>.keras2.keras  tf-keras's .keras archive (Keras 2.13 - 2.16's layout), the same
 *                  model                         predictions <m>_y2.npy
 * on the inputs <m>_x.npy. Also checked: the model name, the parameter count Keras
 * reports, and that the comparison can fail: scaling one weight, or resetting one
 * BatchNormalization moving statistic, moves the predictions by more than the tolerance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zip.h>

#include "kerac.h"
#include "weight_index.h"

#define TOL 1e-4

static char g_dir[1024]; /* tests/fixtures/keras */

typedef struct fixture_model {
    const char *stem;        /* file stem: "cnn" */
    const char *model_name;  /* the name Keras gave the model */
    int64_t params;          /* model.count_params() */
} fixture_model;

static const fixture_model k_models[] = {
    {"cnn", "mnist_convnet", 34826},
    {"bn_strides", "bn_strides", 1237},
    {"resnet", "resnet_small", 5220},
    {"dense", "dense_only", 1635},
    /* Keras 3 only: .keras and .keras3.h5 */
    {"depthwise", "depthwise_small", 299},
    {"dropout_func", "dropout_functional", 339},
    /* normalisation and resampling: Keras 3 and tf-keras, all four files */
    {"normscale", "normscale_small", 621},
    {"resample", "resample_small", 329},
    /* broadcasting and activations (Keras 3 only): merges with broadcasting, every activation, operation nodes */
    {"ew_merges", "ew_merges", 506},
    {"ew_acts", "ew_acts", 1771},
    {"ew_mnv3", "ew_mnv3", 455},
    /* broadcasting and activations, Keras 3 and tf-keras */
    {"ew_k2", "ew_k2", 544},
    /* transfer learning (graph): Keras 3 files and a tf-keras .h5 */
    {"frozen_base", "frozen_base", 691},
    {"custom_scale", "custom_scale", 183},
    /* augmentation: Keras 3 .keras only (Keras 3.15 cannot write these layers to .h5) */
    {"augment", "augment_small", 143},
    /* convolutions: Keras 3 and tf-keras */
    {"convs", "convs_small", 6888},
    /* elementwise fixes, Keras 3 and tf-keras: hard_sigmoid as each defines it, LeakyReLU/ELU with 0 */
    {"ew_hsig", "ew_hsig", 779},
    /* regularising layers: Keras 3 files */
    {"regularize", "regularize_small", 843},
    /* nested block: a Sequential and a frozen Functional called as layers (Keras 3 .keras) */
    {"nested", "nested_small", 411},
    {"nested_seq", "nested_seq", 379},
    /* Gaussian noise layers and shared layers: Keras 3 and tf-keras */
    {"gauss_noise", "gauss_noise", 251},
    {"shared", "shared_tower", 357},
    /* nested models in legacy .h5: Keras 3's and tf-keras's files (and the .keras) */
    {"nested_h5", "nested_h5", 647},
    /* tf-keras arithmetic on tensors (TFOpLambda layers): a tf-keras .h5 only */
    {"tf_ops", "tf_ops", 395},
    /* keras-names: CustomScaleLayer in a tf-keras .h5; nested models called twice; a Sequential nesting a model */
    {"custom_scale_tf", "custom_scale_tf", 183},
    {"siamese", "siamese", 222},
    {"seq_nest", "seq_nest", 171},
    /* nested-more: a nested Functional with two inputs and two outputs, called once / twice (+ op nodes) */
    {"nest_multi", "nest_multi", 198},
    {"nest_multi2", "nest_multi2", 303},
    /* nested-deep: `tower` (holding a Sequential `stem`) called twice, at the top / inside `body` */
    {"nest_deep", "nest_deep", 376},
    {"nest_deep2", "nest_deep2", 442},
    {"nest_deep3", "nest_deep3", 181},
    {"nest_wrap", "nest_wrap", 85},
};

/* The entry of k_models with this stem. */
static const fixture_model *model_by_stem(const char *stem) {
    for (size_t i = 0; i < sizeof k_models / sizeof k_models[0]; i++)
        if (strcmp(k_models[i].stem, stem) == 0) return &k_models[i];
    return NULL;
}

/* ---------------------------------------------------------------- a tiny .npy reader */

typedef struct npy {
    int ndim;
    int64_t shape[8];
    int64_t size;
    float *data;             /* (size) */
} npy;

/* A little-endian float32, C-order .npy file (format 1.x or 2.x) as numpy.save writes it. */
static void npy_load(const char *path, npy *a) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open the fixture '%s' (run tests/fixtures/make_keras_fixtures.py?)", path);
    unsigned char pre[12];
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) fail_msg("'%s' is not a .npy file", path);
    size_t hlen;
    if (pre[6] == 1) {
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else {
        if (fread(pre + 10, 1, 2, f) != 2) fail_msg("'%s': truncated header", path);
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    }
    if (hlen > 65536) fail_msg("'%s': header of %zu bytes", path, hlen);
    char hdr[65537];
    if (fread(hdr, 1, hlen, f) != hlen) fail_msg("'%s': truncated header", path);
    hdr[hlen] = '\0';
    if (!strstr(hdr, "'descr': '<f4'")) fail_msg("'%s' is not float32: %s", path, hdr);
    if (!strstr(hdr, "'fortran_order': False")) fail_msg("'%s' is not in C order: %s", path, hdr);
    const char *p = strstr(hdr, "'shape': (");
    if (!p) fail_msg("'%s': no shape in %s", path, hdr);
    p += strlen("'shape': (");
    a->size = 1;
    while (*p && *p != ')') {
        char *end = NULL;
        long long d = strtoll(p, &end, 10);
        if (end == p || d < 0 || a->ndim == 8) fail_msg("'%s': bad shape in %s", path, hdr);
        a->shape[a->ndim++] = d;
        a->size *= d;
        p = end;
        while (*p == ',' || *p == ' ') p++;
    }
    a->data = malloc((size_t)a->size * sizeof(float) + 1);
    assert_non_null(a->data);
    if (fread(a->data, sizeof(float), (size_t)a->size, f) != (size_t)a->size) fail_msg("'%s': truncated data", path);
    char extra;
    if (fread(&extra, 1, 1, f) != 0) fail_msg("'%s': data after the array", path);
    fclose(f);
}

static void npy_free(npy *a) {
    free(a->data);
    a->data = NULL;
}

/* ---------------------------------------------------------------- helpers */

static const char *fpath(const char *stem, const char *suffix) {
    static char buf[8][1200];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s%s", g_dir, stem, suffix);
    return p;
}

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

static double max_abs_diff(const float *a, const float *b, int64_t n) {
    double d = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = (double)a[i] - (double)b[i];
        if (e < 0) e = -e;
        if (!(e <= d)) d = e; /* NaN wins */
    }
    return d;
}

static int64_t model_params(kc_model *m) {
    int64_t total = 0;
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_info li;
        must(kc_model_layer_info(m, i, &li), "layer_info");
        total += li.params;
    }
    return total;
}

/* Outputs of m on x, checked against the shape of want; malloc'd. */
static float *predict(kc_model *m, const npy *x, const npy *want, const char *file) {
    kc_shape in, out;
    must(kc_model_input_shape(m, &in), "input_shape");
    must(kc_model_output_shape(m, &out), "output_shape");
    if (x->ndim != in.rank + 1) fail_msg("%s: inputs of rank %d for a model taking rank %d", file, x->ndim - 1, in.rank);
    for (int i = 0; i < in.rank; i++)
        if (x->shape[i + 1] != in.dim[i])
            fail_msg("%s: input dimension %d is %lld in the fixture but %d in the model", file, i + 1,
                     (long long)x->shape[i + 1], in.dim[i]);
    if (want->ndim != out.rank + 1 || want->shape[0] != x->shape[0])
        fail_msg("%s: Keras's predictions have rank %d for %lld examples; kerac's output rank is %d", file,
                 want->ndim - 1, (long long)want->shape[0], out.rank);
    for (int i = 0; i < out.rank; i++)
        if (want->shape[i + 1] != out.dim[i])
            fail_msg("%s: output dimension %d is %lld in Keras but %d in kerac", file, i + 1,
                     (long long)want->shape[i + 1], out.dim[i]);
    float *y = malloc((size_t)want->size * sizeof(float) + 1);
    assert_non_null(y);
    must(kc_predict(m, x->data, x->shape[0], 3, y), file); /* batch 3: a full and a partial batch */
    return y;
}

/* The comparison must be able to fail: change weight g (scale it, or for a moving
 * statistic move it away from its trained value) and require a visible change. */
static void check_sensitive(kc_model *m, int g, const npy *x, const npy *want, const char *file) {
    kc_weight_info wi;
    must(kc_model_weight_info(m, g, &wi), "weight_info");
    float *w = malloc((size_t)wi.size * sizeof(float)), *orig = malloc((size_t)wi.size * sizeof(float));
    assert_non_null(w);
    assert_non_null(orig);
    must(kc_model_get_weight(m, g, orig, wi.size), "get_weight");
    bool var = strcmp(wi.name, "moving_variance") == 0, mean = strcmp(wi.name, "moving_mean") == 0;
    for (int64_t i = 0; i < wi.size; i++) w[i] = var ? 1.0f : mean ? 0.0f : orig[i] * 1.25f;
    must(kc_model_set_weight(m, g, w, wi.size), "set_weight");
    float *y = predict(m, x, want, file);
    double d = max_abs_diff(y, want->data, want->size);
    if (!(d > 10 * TOL))
        fail_msg("%s: changing layer '%s' weight '%s' moved the predictions by only %.3g: the fixture cannot tell a "
                 "wrong weight from a right one",
                 file, wi.layer, wi.name, d);
    must(kc_model_set_weight(m, g, orig, wi.size), "set_weight");
    free(y);
    free(w);
    free(orig);
}

/* Load one fixture file, compare with Keras's predictions; returns the max difference. */
static double check_file(const fixture_model *fm, const char *ext, const char *ysuffix, bool sensitivity) {
    const char *file = fpath(fm->stem, ext);
    npy x, want;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    npy_load(fpath(fm->stem, ysuffix), &want);
    kc_model *m = NULL;
    must(kc_model_load(file, &m), file);
    assert_string_equal(kc_model_name(m), fm->model_name);
    if (model_params(m) != fm->params)
        fail_msg("%s: kerac counts %lld parameters, Keras %lld", file, (long long)model_params(m), (long long)fm->params);
    float *y = predict(m, &x, &want, file);
    double d = max_abs_diff(y, want.data, want.size);
    print_message("  %-24s max |kerac - Keras| = %.3g over %lld outputs\n", strrchr(file, '/') + 1, d,
                  (long long)want.size);
    if (!(d <= TOL)) fail_msg("%s: kerac's predictions differ from Keras's by %.3g (> %g)", file, d, TOL);
    if (sensitivity) {
        check_sensitive(m, 0, &x, &want, file); /* the first kernel */
        int last_stat = -1;
        for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
            kc_weight_info wi;
            must(kc_model_weight_info(m, g, &wi), "weight_info");
            if (!wi.trainable) last_stat = g;
        }
        if (last_stat >= 0) {
            check_sensitive(m, last_stat, &x, &want, file);     /* moving_variance of the last BN */
            check_sensitive(m, last_stat - 1, &x, &want, file); /* its moving_mean */
        }
    }
    free(y);
    kc_model_destroy(m);
    npy_free(&x);
    npy_free(&want);
    return d;
}

/* ---------------------------------------------------------------- tests */

static void run_model(const fixture_model *fm) {
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", false);
    check_file(fm, ".keras2.h5", "_y2.npy", true);
    check_file(fm, ".keras2.keras", "_y2.npy", false);
}

static void test_default_cnn(void **state) {
    (void)state;
    run_model(model_by_stem("cnn"));
}

static void test_bn_strides(void **state) {
    (void)state;
    run_model(model_by_stem("bn_strides"));
}

static void test_resnet(void **state) {
    (void)state;
    run_model(model_by_stem("resnet"));
}

static void test_dense(void **state) {
    (void)state;
    run_model(model_by_stem("dense"));
}

/* DepthwiseConv2D with each option, ZeroPadding2D with tuple paddings, ReLU(6.) and relu6,
 * BatchNormalization with MobileNetV2's epsilon and momentum, Add, and a Functional Dropout
 * (whose nodes carry training=false). */
static void test_depthwise(void **state) {
    (void)state;
    check_file(model_by_stem("depthwise"), ".keras", "_y3.npy", true);
    check_file(model_by_stem("depthwise"), ".keras3.h5", "_y3.npy", true);
}

/* Dropout in a Functional model: Keras 3 records training=false in its nodes. */
static void test_dropout_functional(void **state) {
    (void)state;
    check_file(model_by_stem("dropout_func"), ".keras", "_y3.npy", true);
    check_file(model_by_stem("dropout_func"), ".keras3.h5", "_y3.npy", false);
}

/* normalisation and resampling. Rescaling (per channel and scalar), Normalization (adapted weights
 * mean/variance/count, config mean/variance, invert), LayerNormalization (last axis, axes
 * [1, 2, 3], center/scale off), GroupNormalization (groups 4, -1, 2; center/scale off),
 * BatchNormalization with center or scale off, Dense on (N, H, W, C), GlobalMaxPooling2D. */
static void test_normscale(void **state) {
    (void)state;
    run_model(model_by_stem("normscale"));
}

/* UpSampling2D (nearest, bilinear, uneven factors), Cropping2D (and none), Max/Average
 * pooling with 'same' and 'valid', Permute (rank 3 and 2), the global poolings with
 * keepdims, RepeatVector, Dense on (N, T, F). */
static void test_resample(void **state) {
    (void)state;
    run_model(model_by_stem("resample"));
}
/* broadcasting and activations: Multiply, Subtract, Average, Maximum, Minimum and Add with Keras's
 * broadcasting ((N,1,1,C) x (N,H,W,C), (N,H,W,1), (N,C) against rank 4); every activation by
 * name and as a layer (PReLU's alpha weights, LeakyReLU, ELU, ReLU's options); and a
 * MobileNetV3Small-style block whose hard-swish, hard-sigmoid and arithmetic are Keras 3
 * operation nodes (its .keras3.h5 has them without modules). */
static void run_keras3(const fixture_model *fm, bool h5_sensitivity) {
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", h5_sensitivity);
}

static void test_ew_merges(void **state) { run_keras3(model_by_stem("ew_merges"), false); }
static void test_ew_acts(void **state) { run_keras3(model_by_stem("ew_acts"), false); }
static void test_ew_mnv3(void **state) { run_keras3(model_by_stem("ew_mnv3"), true); }
/* written by Keras 3 and by tf-keras (LeakyReLU's alpha key, "swish"): all four files */
static void test_ew_k2(void **state) { run_model(model_by_stem("ew_k2")); }

/* Layers saved with trainable=False (a Conv2D, its BatchNormalization and the next Conv2D;
 * the second BatchNormalization trains): kerac reads the flag from each file and counts
 * Keras's trainable parameters (43 of 691, model.trainable_weights in Keras). */
static void test_frozen_base(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("frozen_base");
    assert_non_null(fm);
    const char *exts[][2] = {{".keras", "_y3.npy"}, {".keras3.h5", "_y3.npy"}, {".keras2.h5", "_y2.npy"}};
    for (int e = 0; e < 3; e++) {
        check_file(fm, exts[e][0], exts[e][1], e == 0);
        kc_model *m = NULL;
        must(kc_model_load(fpath(fm->stem, exts[e][0]), &m), exts[e][0]);
        int64_t trainable = 0;
        char frozen[256] = "";
        for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
            kc_layer_info li;
            must(kc_model_layer_info(m, i, &li), "layer_info");
            trainable += li.trainable_params;
            if (!li.trainable) snprintf(frozen + strlen(frozen), sizeof frozen - strlen(frozen), "%s ", li.name);
        }
        assert_int_equal(trainable, 43);
        assert_string_equal(frozen, "base_conv1 base_bn1 base_conv2 ");
        kc_model_destroy(m);
    }
}

/* InceptionResNetV2's CustomScaleLayer (module keras.src.applications.inception_resnet_v2),
 * scale 0.17 on a branch and -0.5 on the input. */
static void test_custom_scale(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("custom_scale");
    assert_non_null(fm);
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", false);
}

/* augmentation: every augmentation / preprocessing kind (the random ones are the identity
 * in inference; three Resizing set-ups, CenterCrop and RandomCrop change the images). */
static void test_augment_layers(void **state) {
    (void)state;
    check_file(model_by_stem("augment"), ".keras", "_y3.npy", true);
}

/* Conv2D with groups and dilation (groups == channels with a 7x7 kernel, as ConvNeXt),
 * SeparableConv2D and Conv2DTranspose with every option, from Keras 3 and tf-keras; the
 * tf-keras predictions come from its own training run, so they differ from Keras 3's. */
static void test_convolutions(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("convs");
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", true);
    check_file(fm, ".keras2.h5", "_y2.npy", false);
    check_file(fm, ".keras2.keras", "_y2.npy", false);
    npy a, b;
    npy_load(fpath(fm->stem, "_y3.npy"), &a);
    npy_load(fpath(fm->stem, "_y2.npy"), &b);
    assert_true(max_abs_diff(a.data, b.data, a.size) > 10 * TOL);
    npy x;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    kc_model *m = NULL; /* every convolution's kernels move the predictions */
    must(kc_model_load(fpath(fm->stem, ".keras"), &m), "convs.keras");
    for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
        kc_weight_info wi;
        must(kc_model_weight_info(m, g, &wi), "weight_info");
        if (wi.shape.rank == 4) check_sensitive(m, g, &x, &a, "convs.keras");
    }
    kc_model_destroy(m);
    npy_free(&x);
    npy_free(&a);
    npy_free(&b);
}
/* the same config names hard_sigmoid: Keras 3's relu6(x + 3) / 6 in the Keras 3 files,
 * tf-keras's clip(0.2 x + 0.5, 0, 1) in the tf-keras ones; LeakyReLU(0) and ELU(0) stay 0 */
static void test_ew_hsig(void **state) { run_model(model_by_stem("ew_hsig")); }

/* The Keras 3 and Keras 2 fixtures come from separate training runs: their predictions
 * must differ (else the y2/y3 files could be mixed up without any test noticing). */
static void test_fixtures_distinct(void **state) {
    (void)state;
    /* the models written by both Keras 3 and tf-keras, each by its own training run */
    static const char *const both[] = {"cnn",   "bn_strides", "resnet",      "dense", "normscale",
                                       "resample", "ew_k2", "convs", "gauss_noise", "shared"};
    for (size_t j = 0; j < sizeof both / sizeof both[0]; j++) {
        const char *stem = model_by_stem(both[j])->stem;
        npy a, b;
        npy_load(fpath(stem, "_y3.npy"), &a);
        npy_load(fpath(stem, "_y2.npy"), &b);
        assert_int_equal(a.size, b.size);
        double d = max_abs_diff(a.data, b.data, a.size);
        if (!(d > 10 * TOL)) fail_msg("%s: the Keras 3 and Keras 2 predictions agree within %.3g", stem, d);
        npy_free(&a);
        npy_free(&b);
    }
}

/* ---------------------------------------------------------------- Gaussian noise, shared layers */

/* GaussianNoise / GaussianDropout with and without seeds: the identity in inference. */
static void test_gauss_noise(void **state) {
    (void)state;
    run_model(model_by_stem("gauss_noise"));
}

/* A Siamese tower (Conv2D, BatchNormalization, Dense called on two crops; the Dense a third
 * time on a layer made after its second call): each layer once, every call computed; scaling
 * the shared Dense's kernel or its BatchNormalization's statistics moves the predictions. */
static void test_shared_layers(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("shared");
    run_model(fm);
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras"), &m), "shared.keras");
    int later = 0, rows = 0;
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_info li;
        must(kc_model_layer_info(m, i, &li), "layer_info");
        later += li.call > 0;
        rows += li.call == 0;
        if (strcmp(li.name, "tower_dense") == 0 && li.call > 0) assert_int_equal(li.params, 0);
    }
    assert_int_equal(later, 1 + 1 + 2); /* tower_conv, tower_bn: one more call each; tower_dense: two */
    assert_int_equal(rows, 12);         /* Keras's model.layers */
    npy x, want;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    npy_load(fpath(fm->stem, "_y3.npy"), &want);
    for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
        kc_weight_info wi;
        must(kc_model_weight_info(m, g, &wi), "weight_info");
        if (strncmp(wi.layer, "tower_", 6) == 0 && strcmp(wi.name, "bias") != 0 && strcmp(wi.name, "beta") != 0)
            check_sensitive(m, g, &x, &want, "shared.keras");
    }
    npy_free(&x);
    npy_free(&want);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- nested models */

/* The layers of m, space-separated, and the frozen ones. */
static void layer_names(kc_model *m, char *all, char *frozen, size_t n) {
    all[0] = frozen[0] = '\0';
    for (int i = 0, k = kc_model_num_layers(m); i < k; i++) {
        kc_layer_info li;
        must(kc_model_layer_info(m, i, &li), "layer_info");
        snprintf(all + strlen(all), n - strlen(all), "%s ", li.name);
        if (!li.trainable) snprintf(frozen + strlen(frozen), n - strlen(frozen), "%s ", li.name);
    }
}

/* m (a copy kerac wrote, at `label`) predicts fixture stem's inputs as Keras did (ysuffix). */
static void check_predicts(kc_model *m, const char *stem, const char *ysuffix, const char *label) {
    npy x, want;
    npy_load(fpath(stem, "_x.npy"), &x);
    npy_load(fpath(stem, ysuffix), &want);
    float *y = predict(m, &x, &want, label);
    double d = max_abs_diff(y, want.data, want.size);
    if (!(d <= TOL)) fail_msg("%s: differs from Keras's predictions (%s%s) by %.3g", label, stem, ysuffix, d);
    free(y);
    npy_free(&x);
    npy_free(&want);
}

/* Checks fixture fm's .keras against Keras, and its layers and frozen layers; the model. */
static kc_model *load_nested(const fixture_model *fm, const char *want_all, const char *want_frozen) {
    check_file(fm, ".keras", "_y3.npy", true);
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras"), &m), fm->stem);
    char all[512], frozen[512];
    layer_names(m, all, frozen, sizeof all);
    assert_string_equal(all, want_all);
    assert_string_equal(frozen, want_frozen);
    return m;
}

/* nested block: the augmentation Sequential and the frozen base Functional are inlined
 * (their InputLayers dropped; the base's "conv" clashes with the head's and becomes
 * "base_conv"), their weights read from model.weights.h5's nested groups (the sensitivity
 * checks move the first kernel, aug_conv's, and the base's BatchNormalization statistics);
 * kerac saves the flattened model, which it reads back with the same predictions. */
static void test_nested_models(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("nested");
    kc_model *m = load_nested(fm, "input_layer_1 flip scale aug_conv base_conv bn relu conv pool head ",
                              "base_conv bn relu ");
    char all[512], frozen[512];
    char dir[] = "/tmp/kerac-nested-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/flat.keras", dir);
    must(kc_model_save(m, path), "save");
    kc_model *back = NULL;
    must(kc_model_load(path, &back), "reload");
    layer_names(back, all, frozen, sizeof all);
    assert_string_equal(frozen, "base_conv bn relu ");
    check_predicts(back, fm->stem, "_y3.npy", path);
    kc_model_destroy(back);
    kc_model_destroy(m);
    unlink(path);
    rmdir(dir);
}

/* The same blocks in a Sequential outer model: read as the same Functional model (no name
 * clash here: the base's "conv" keeps its name). */
static void test_nested_in_sequential(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("nested_seq");
    kc_model_destroy(load_nested(fm, "input_layer_1 flip scale aug_conv conv bn relu pool head ", "conv bn relu "));
}

/* A Functional model whose nested Sequential "inner" (one Dense) is called on `args`, and
 * the same nesting inside a Sequential outer model: the correct ones load (the Sequential as
 * the same Functional model), the others are clear errors. */
#define NEST_T(h) "{\"class_name\": \"__keras_tensor__\", \"config\": {\"keras_history\": [\"" h "\", 0, 0]}}"
#define NEST_INNER "\"class_name\": \"Sequential\", \"name\": \"inner\", \"config\": {\"name\": \"inner\", " \
    "\"layers\": [{\"class_name\": \"Dense\", \"config\": {\"name\": \"d\", \"units\": 2}}]}"
#define NEST_FUNC(nodes) "{\"class_name\": \"Functional\", \"config\": {\"name\": \"outer\", \"layers\": [" \
    "{\"class_name\": \"InputLayer\", \"name\": \"in\", \"config\": {\"name\": \"in\", \"batch_shape\": [null, 3]}}," \
    "{" NEST_INNER ", \"inbound_nodes\": " nodes "}], " \
    "\"input_layers\": [[\"in\", 0, 0]], \"output_layers\": [[\"inner\", 0, 0]]}}"

static void test_nested_errors(void **state) {
    (void)state;
    static const struct {
        const char *json, *want;
        kc_status status;
    } cases[] = {
        {NEST_FUNC("[{\"args\": [" NEST_T("in") "], \"kwargs\": {}}]"), NULL, KC_STATUS_OK},
        {NEST_FUNC("[]"), "nested model 'inner' is not called on any tensor", KC_STATUS_UNSUPPORTED},
        {NEST_FUNC("[{\"args\": [[" NEST_T("in") ", " NEST_T("in") "]]}]"), "has 1 input but its call #0 passes 2 tensor arguments",
         KC_STATUS_UNSUPPORTED},
        {"{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": \"InputLayer\", "
         "\"config\": {\"name\": \"in\", \"batch_shape\": [null, 3]}}, {" NEST_INNER "}]}}",
         NULL, KC_STATUS_OK},
        {"{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{" NEST_INNER "}]}}",
         "starts with no named InputLayer", KC_STATUS_UNSUPPORTED},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kc_model *m = NULL;
        kc_status s = kc_model_from_json(cases[c].json, strlen(cases[c].json), &m);
        if (s != cases[c].status)
            fail_msg("case %zu: %s, want %s: %s", c, kc_status_name(s), kc_status_name(cases[c].status), kc_last_error());
        if (cases[c].want && !strstr(kc_last_error(), cases[c].want))
            fail_msg("case %zu: the message lacks '%s': %s", c, cases[c].want, kc_last_error());
        if (s == KC_STATUS_OK) {
            kc_layer_info li;
            must(kc_model_layer_info(m, 1, &li), "layer_info");
            assert_string_equal(li.name, "d");
            assert_int_equal(li.params, 8);
        }
        kc_model_destroy(m);
    }
}

/* Nested models in legacy .h5 (Keras 3's model.save("x.h5") and tf-keras's): each nested
 * model is one group of /model_weights, named as the model, holding the weights of all its
 * layers (a Sequential nested in the "block" Functional too) in Keras's legacy order: those
 * that train first (block's frozen_conv and the BatchNormalization statistics come after
 * block_bn's gamma and beta), then the others. The sensitivity checks move the first kernel
 * (aug_conv, in the "augmentation" group) and the last BatchNormalization statistics. The
 * layer names: the inner "conv"/"bn" clash with the outer ones and get the nested model's
 * name in front. kerac writes the flattened model to .h5 and reads it back the same. */
static void test_nested_h5(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("nested_h5");
    static const char want_all[] = "flip scale aug_conv aug_bn inner_conv inner_bn frozen_conv block_bn block_add "
                                   "base_conv base_bn relu conv bn pool head ";
    check_file(fm, ".keras", "_y3.npy", false);
    check_file(fm, ".keras3.h5", "_y3.npy", true);
    check_file(fm, ".keras2.h5", "_y2.npy", false);
    char dir[] = "/tmp/kerac-nested-h5-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/flat.h5", dir);
    static const char *const files[][2] = {{".keras3.h5", "_y3.npy"}, {".keras2.h5", "_y2.npy"}};
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        kc_model *m = NULL, *back = NULL;
        must(kc_model_load(fpath(fm->stem, files[f][0]), &m), files[f][0]);
        char all[512], frozen[512];
        layer_names(m, all, frozen, sizeof all);
        assert_string_equal(strchr(all, ' ') + 1, want_all); /* after the InputLayer, which each Keras names */
        assert_string_equal(frozen, "frozen_conv base_conv base_bn relu ");
        if (f == 1) { /* the "block" group's order: frozen_conv and block_bn's statistics after the weights that train */
            npy x, want;
            npy_load(fpath(fm->stem, "_x.npy"), &x);
            npy_load(fpath(fm->stem, "_y2.npy"), &want);
            for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
                kc_weight_info wi;
                must(kc_model_weight_info(m, g, &wi), "weight_info");
                if ((!strcmp(wi.layer, "frozen_conv") && !strcmp(wi.name, "kernel")) ||
                    (!strcmp(wi.layer, "block_bn") && !strcmp(wi.name, "moving_variance")) ||
                    (!strcmp(wi.layer, "inner_bn") && !strcmp(wi.name, "moving_mean")))
                    check_sensitive(m, g, &x, &want, files[f][0]);
            }
            npy_free(&x);
            npy_free(&want);
        }
        must(kc_model_save(m, path), "save .h5");
        must(kc_model_load(path, &back), "reload .h5");
        layer_names(back, all, frozen, sizeof all);
        assert_string_equal(frozen, "frozen_conv base_conv base_bn relu ");
        check_predicts(back, fm->stem, files[f][1], path);
        kc_model_destroy(back);
        kc_model_destroy(m);
    }
    unlink(path);
    rmdir(dir);
}

/* The augmentation fixture saved as .h5: RandomContrast's value_range (0, 1) and Resizing's
 * pad_to_aspect_ratio have no tf-keras key, so kerac writes Keras 3's own .h5 (the Keras 2
 * flavour used to drop them: the file predicted 0.004 away from Keras). */
static void test_augment_h5(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("augment");
    kc_model *m = NULL, *back = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras"), &m), "augment.keras");
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 2, &json), KC_STATUS_UNSUPPORTED);
    if (!strstr(kc_last_error(), "layer 'contrast' (RandomContrast): option 'value_range'"))
        fail_msg("the Keras 2 writer's message does not name RandomContrast's value_range: %s", kc_last_error());
    char dir[] = "/tmp/kerac-augment-h5-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/augment.h5", dir);
    must(kc_model_save(m, path), "save .h5");
    must(kc_model_load(path, &back), "reload .h5");
    check_predicts(back, fm->stem, "_y3.npy", path);
    kc_model_destroy(back);
    kc_model_destroy(m);
    unlink(path);
    rmdir(dir);
}

/* ---------------------------------------------------------------- keras-names */

/* Whether config JSON `json` names class `cls` (as "class_name": "cls"). */
static bool has_class(const char *json, const char *cls) {
    char key[128];
    snprintf(key, sizeof key, "\"class_name\": \"%s\"", cls);
    return strstr(json, key) != NULL;
}

/* The class names as read: tf-keras writes InceptionResNetV2's layer as its registered
 * "Custom>CustomScaleLayer" and finds it only by that name, Keras 3 only by the plain one.
 * kerac writes each layer's class as the file it read spelled it, in that file's flavour
 * (the Keras 2 config of its .h5), and its own name otherwise: the tf-keras file's .h5 and
 * JSON keep "Custom>", its Keras 3 config and a Keras 3 file's configs do not. */
static void test_class_names_as_read(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("custom_scale_tf");
    check_file(fm, ".keras2.h5", "_y2.npy", true);
    kc_model *m = NULL, *back = NULL, *again = NULL, *k3 = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras2.h5"), &m), "custom_scale_tf.keras2.h5");
    char *k2 = NULL, *j3 = NULL, *twice = NULL, *h5json = NULL;
    must(kc_model_to_json(m, 2, &k2), "to_json 2");
    must(kc_model_to_json(m, 3, &j3), "to_json 3");
    assert_true(has_class(k2, "Custom>CustomScaleLayer"));
    assert_false(has_class(k2, "CustomScaleLayer"));
    assert_null(strstr(j3, "Custom>"));
    assert_true(has_class(j3, "CustomScaleLayer"));
    must(kc_model_from_json(k2, strlen(k2), &again), "from_json"); /* kerac's JSON round trip */
    must(kc_model_to_json(again, 2, &twice), "to_json again");
    assert_string_equal(twice, k2);
    char dir[] = "/tmp/kerac-names-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/cs.h5", dir);
    must(kc_model_save(m, path), "save .h5");
    must(kc_model_load(path, &back), "reload .h5");
    check_predicts(back, fm->stem, "_y2.npy", path);
    must(kc_model_to_json(back, 2, &h5json), "to_json of the .h5");
    assert_true(has_class(h5json, "Custom>CustomScaleLayer"));
    /* a Keras 3 file: the plain name in both flavours */
    must(kc_model_load(fpath("custom_scale", ".keras"), &k3), "custom_scale.keras");
    kc_free(k2);
    kc_free(j3);
    must(kc_model_to_json(k3, 2, &k2), "to_json 2 (Keras 3 file)");
    must(kc_model_to_json(k3, 3, &j3), "to_json 3 (Keras 3 file)");
    assert_null(strstr(k2, "Custom>"));
    assert_null(strstr(j3, "Custom>"));
    assert_true(has_class(k2, "CustomScaleLayer"));
    kc_free(k2);
    kc_free(j3);
    kc_free(twice);
    kc_free(h5json);
    kc_model_destroy(k3);
    kc_model_destroy(back);
    kc_model_destroy(again);
    kc_model_destroy(m);
    unlink(path);
    rmdir(dir);
}

/* Fine-tunes m on x (labels i % 3, inputs of shape `in`; 3 epochs of Adam): weight g moves and
 * the parameter count stays `params`; kerac's .keras and .h5 copies of the trained model
 * predict as it does. */
static void fine_tune_round_trip(kc_model *m, int g, const npy *x, const npy *want, kc_shape in, int64_t params) {
    kc_weight_info wi;
    must(kc_model_weight_info(m, g, &wi), "weight_info");
    float *before = malloc((size_t)wi.size * sizeof(float)), *after = malloc((size_t)wi.size * sizeof(float));
    assert_non_null(before);
    assert_non_null(after);
    must(kc_model_get_weight(m, g, before, wi.size), "get_weight");
    int32_t y[16];
    for (int64_t i = 0; i < x->shape[0] && i < 16; i++) y[i] = (int32_t)(i % 3); /* as <stem>_labels.npy */
    kc_dataset *ds = NULL;
    must(kc_dataset_from_memory(x->data, y, x->shape[0], in, 3, &ds), "dataset");
    must(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM()}), "compile");
    must(kc_fit(m, ds, &(kc_fit_opts){.epochs = 3, .batch_size = 2, .seed = 1}, NULL), "fit");
    must(kc_model_get_weight(m, g, after, wi.size), "get_weight");
    assert_true(max_abs_diff(before, after, wi.size) > 1e-4);
    assert_int_equal(model_params(m), params);
    float *trained = predict(m, x, want, "trained");
    char dir[] = "/tmp/kerac-names-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    static const char *const exts[] = {"t.keras", "t.h5"};
    for (size_t e = 0; e < 2; e++) {
        snprintf(path, sizeof path, "%s/%s", dir, exts[e]);
        kc_model *back = NULL;
        must(kc_model_save(m, path), "save");
        must(kc_model_load(path, &back), "reload");
        float *yb = predict(back, x, want, path);
        if (!(max_abs_diff(yb, trained, want->size) <= 1e-6)) fail_msg("%s: predicts otherwise than the model saved", path);
        assert_int_equal(model_params(back), params);
        free(yb);
        kc_model_destroy(back);
        unlink(path);
    }
    rmdir(dir);
    free(trained);
    free(before);
    free(after);
    kc_dataset_destroy(ds);
}

/* A nested model called twice (siamese: Functional `base` and Sequential `proj`, each on two
 * tensors; Keras 3 numbers the calls 0 and 1, tf-keras 1 and 2): inlined once, each inner
 * layer a shared layer with a second call (one set of weights, Keras's 222 parameters). Both
 * calls of the base's conv move the output (its kernel's sensitivity); kc_fit trains that
 * one set (the later calls own no weights; the kernel moves), and kerac's .keras and .h5
 * copies of the trained model predict as it does. Before keras-names: "nested model 'proj'
 * is not called once on one tensor". */
static void test_nested_called_twice(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("siamese");
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", false);
    check_file(fm, ".keras2.h5", "_y2.npy", true);
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras2.h5"), &m), "siamese.keras2.h5");
    char all[512], frozen[512];
    layer_names(m, all, frozen, sizeof all);
    assert_string_equal(all, "image mix proj_conv proj_conv proj_bn proj_bn conv conv bn bn relu relu gap gap emb emb "
                             "diff cat head "); /* every call a node */
    int later = 0;
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_info li;
        must(kc_model_layer_info(m, i, &li), "layer_info");
        if (li.call > 0) assert_int_equal(li.params, 0);
        later += li.call > 0;
    }
    assert_int_equal(later, 7); /* proj's 2 layers and base's 5, once more each */
    npy x, want;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    npy_load(fpath(fm->stem, "_y2.npy"), &want);
    int g = weight_index(m, "conv", "kernel");
    check_sensitive(m, g, &x, &want, "siamese.keras2.h5");
    check_sensitive(m, weight_index(m, "proj_conv", "kernel"), &x, &want, "siamese.keras2.h5");
    fine_tune_round_trip(m, g, &x, &want, (kc_shape){3, {8, 8, 3}}, 222);
    npy_free(&x);
    npy_free(&want);
    kc_model_destroy(m);
}

/* Sequential([Input, Functional base, Dense]) from Keras 3 and tf-keras: kerac inlines the
 * base (a Functional graph inside), and saves the model as Keras does, a Sequential whose
 * layers are the base (a Functional entry without name or inbound_nodes) and the Dense, in
 * its JSON, its .keras and the legacy .h5 (layer_names without the InputLayer); kerac reads
 * its copies back with Keras's predictions. Before keras-names the outer model was written
 * as a Functional. */
static void test_sequential_nesting_saved(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("seq_nest");
    static const char *const files[][2] = {{".keras", "_y3.npy"}, {".keras3.h5", "_y3.npy"}, {".keras2.h5", "_y2.npy"}};
    char dir[] = "/tmp/kerac-names-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    for (size_t f = 0; f < 3; f++) {
        check_file(fm, files[f][0], files[f][1], f != 1);
        kc_model *m = NULL;
        must(kc_model_load(fpath(fm->stem, files[f][0]), &m), files[f][0]);
        for (int flavour = 2; flavour <= 3; flavour++) {
            char *json = NULL;
            must(kc_model_to_json(m, flavour, &json), "to_json");
            if (!strstr(json, "\"class_name\": \"Sequential\", \"config\": {\"name\": \"seq_nest\"") || !has_class(json, "Functional") || strstr(json, "\"name\": \"head\", \"inbound_nodes\"") ||
                strstr(json, "\"name\": \"base\", \"inbound_nodes\""))
                fail_msg("%s: flavour %d is not Keras's Sequential nesting a Functional: %.300s", files[f][0], flavour, json);
            kc_free(json);
        }
        static const char *const exts[] = {"s.keras", "s.h5"};
        for (size_t e = 0; e < 2; e++) {
            snprintf(path, sizeof path, "%s/%s", dir, exts[e]);
            kc_model *back = NULL;
            char *json = NULL;
            must(kc_model_save(m, path), "save");
            must(kc_model_load(path, &back), "reload");
            check_predicts(back, fm->stem, files[f][1], path);
            must(kc_model_to_json(back, 3, &json), "to_json");
            assert_non_null(strstr(json, "\"class_name\": \"Sequential\", \"config\": {\"name\": \"seq_nest\""));
            kc_free(json);
            kc_model_destroy(back);
            unlink(path);
        }
        kc_model_destroy(m);
    }
    rmdir(dir);
}

/* nested-more: a nested Functional `base` with two inputs and two outputs (Keras 3's call
 * args [[a, b]], tf-keras's node [[a], [b]]; the outer layers read base's outputs by tensor
 * index), called once (nest_multi) and twice (nest_multi2, whose base also holds the Keras 3
 * operation nodes x * 0.5 + 1, tf-keras's two TFOpLambda layers): kerac reproduces Keras's
 * predictions from .keras, .keras3.h5 and .keras2.h5; the second output's Dense (o2) and, in
 * nest_multi2, the second call's input layer (pre_b2) move them; a fine-tune moves base's
 * weights, and kerac's .keras and .h5 copies (nested again: test_keras_nest.c) predict as
 * the model. Keras reloads
 * those copies with the same predictions (make_keras_fixtures.py --stage nestmulti_check3 /
 * _check2). A call passing fewer tensors than base has inputs is a clear error. Before
 * nested-more: "nested model 'base' needs one input and one output layer". */
static void test_nested_multi_io(void **state) {
    (void)state;
    static const char *const stems[] = {"nest_multi", "nest_multi2"};
    static const char *const files[][2] = {{".keras", "_y3.npy"}, {".keras3.h5", "_y3.npy"}, {".keras2.h5", "_y2.npy"}};
    for (size_t k = 0; k < 2; k++) {
        const fixture_model *fm = model_by_stem(stems[k]);
        for (size_t f = 0; f < 3; f++) check_file(fm, files[f][0], files[f][1], f != 1);
        kc_model *m = NULL;
        must(kc_model_load(fpath(fm->stem, k ? ".keras" : ".keras2.h5"), &m), fm->stem);
        npy x, want;
        npy_load(fpath(fm->stem, "_x.npy"), &x);
        npy_load(fpath(fm->stem, k ? "_y3.npy" : "_y2.npy"), &want);
        check_sensitive(m, weight_index(m, "o2", "kernel"), &x, &want, fm->stem);
        if (k) {
            check_sensitive(m, weight_index(m, "pre_b2", "kernel"), &x, &want, fm->stem);
            char all[512], frozen[512];
            layer_names(m, all, frozen, sizeof all);
            assert_string_equal(all, "x pre_a pre_b pre_a2 pre_b2 da da db db sum sum multiply add o1 o2 o2 "
                                     "base_multiply base_add o1 diff cat head ");
        }
        fine_tune_round_trip(m, weight_index(m, "da", "kernel"), &x, &want, (kc_shape){1, {8}}, fm->params);
        npy_free(&x);
        npy_free(&want);
        kc_model_destroy(m);
    }
    static const char bad[] =
        "{\"class_name\": \"Functional\", \"config\": {\"name\": \"outer\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"in\", \"config\": {\"name\": \"in\", \"batch_shape\": [null, 3]}},"
        "{\"class_name\": \"Functional\", \"name\": \"two\", \"config\": {\"name\": \"two\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"a\", \"config\": {\"name\": \"a\", \"batch_shape\": [null, 3]}},"
        "{\"class_name\": \"InputLayer\", \"name\": \"b\", \"config\": {\"name\": \"b\", \"batch_shape\": [null, 3]}},"
        "{\"class_name\": \"Add\", \"name\": \"s\", \"config\": {\"name\": \"s\"}, \"inbound_nodes\": "
        "[{\"args\": [[" NEST_T("a") ", " NEST_T("b") "]]}]}],"
        " \"input_layers\": [[\"a\", 0, 0], [\"b\", 0, 0]], \"output_layers\": [[\"s\", 0, 0]]},"
        " \"inbound_nodes\": [{\"args\": [" NEST_T("in") "]}]}],"
        " \"input_layers\": [[\"in\", 0, 0]], \"output_layers\": [[\"two\", 0, 0]]}}";
    kc_model *m = NULL;
    assert_int_equal(kc_model_from_json(bad, strlen(bad), &m), KC_STATUS_UNSUPPORTED);
    if (!strstr(kc_last_error(), "nested model 'two' has 2 inputs but its call #0 passes 1 tensor argument"))
        fail_msg("unclear error: %s", kc_last_error());
    assert_null(m);
}

/* nested-deep: a nested Functional `tower` holding a Sequential `stem` (conv, bn, relu),
 * called twice, in the model itself (nest_deep) or inside a nested Functional `body` called
 * once (nest_deep2), and (nest_deep3, Dense layers) each level called twice in its parent
 * (nest_wrap: a model holding only a nested model, called twice, read as Keras writes it): kerac reproduces Keras's predictions from .keras, .keras3.h5 and
 * .keras2.h5; stem's conv is one shared layer whose weights move the output through both calls,
 * the second call's input layer (mix), stem's BatchNormalization statistics and the frozen
 * proj's kernel move it too; a fine-tune moves stem's conv, and kerac's
 * .keras and .h5 copies predict as the model (saved nested again: test_keras_nest.c; Keras
 * reloads them: make_keras_fixtures.py --stage nestdeep_check3 / _check2). */
static void test_nested_deep(void **state) {
    (void)state;
    static const char *const stems[] = {"nest_deep", "nest_deep2"};
    static const char *const files[][2] = {{".keras", "_y3.npy"}, {".keras3.h5", "_y3.npy"}, {".keras2.h5", "_y2.npy"}};
    for (size_t k = 0; k < 2; k++) {
        const fixture_model *fm = model_by_stem(stems[k]);
        for (size_t f = 0; f < 3; f++) check_file(fm, files[f][0], files[f][1], false); /* proj's bias: 0 */
        kc_model *m = NULL;
        must(kc_model_load(fpath(fm->stem, k ? ".keras" : ".keras2.h5"), &m), fm->stem);
        char all[512], frozen[512];
        layer_names(m, all, frozen, sizeof all);
        assert_string_equal(all, k ? "image pre mix conv conv bn bn relu relu down down gap gap proj proj emb emb "
                                     "diff cat fuse head "
                                   : "image mix conv conv bn bn relu relu down down gap gap proj proj emb emb "
                                     "diff cat head "); /* every call a node */
        assert_string_equal(frozen, "proj proj ");
        npy x, want;
        npy_load(fpath(fm->stem, "_x.npy"), &x);
        npy_load(fpath(fm->stem, k ? "_y3.npy" : "_y2.npy"), &want);
        int g = weight_index(m, "conv", "kernel");
        check_sensitive(m, g, &x, &want, fm->stem);
        check_sensitive(m, weight_index(m, "mix", "kernel"), &x, &want, fm->stem);
        check_sensitive(m, weight_index(m, "bn", "moving_mean"), &x, &want, fm->stem);
        check_sensitive(m, weight_index(m, "bn", "moving_variance"), &x, &want, fm->stem);
        check_sensitive(m, weight_index(m, "proj", "kernel"), &x, &want, fm->stem);
        fine_tune_round_trip(m, g, &x, &want, (kc_shape){3, {8, 8, 3}}, fm->params);
        npy_free(&x);
        npy_free(&want);
        kc_model_destroy(m);
    }
    /* nest_deep3: body called twice, tower twice in body, stem twice in tower */
    const fixture_model *fm = model_by_stem("nest_deep3");
    for (size_t f = 0; f < 3; f++) check_file(fm, files[f][0], files[f][1], f != 1);
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras2.h5"), &m), fm->stem);
    int calls[4] = {0}; /* stem_dense, mix, mix2, mix3 */
    static const char *const names[] = {"stem_dense", "mix", "mix2", "mix3"};
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_info li;
        must(kc_model_layer_info(m, i, &li), "layer_info");
        for (int q = 0; q < 4; q++) calls[q] += !strcmp(li.name, names[q]);
    }
    assert_int_equal(calls[0], 8); /* 2 x 2 x 2 */
    assert_int_equal(calls[1], 4);
    assert_int_equal(calls[2], 2);
    assert_int_equal(calls[3], 1);
    npy x, want;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    npy_load(fpath(fm->stem, "_y2.npy"), &want);
    int g = weight_index(m, "stem_dense", "kernel");
    for (int q = 1; q < 4; q++) check_sensitive(m, weight_index(m, names[q], "kernel"), &x, &want, fm->stem);
    fine_tune_round_trip(m, g, &x, &want, (kc_shape){1, {6}}, fm->params);
    npy_free(&x);
    npy_free(&want);
    kc_model_destroy(m);
    /* nest_wrap: a nested model holding only a nested model (stem), called twice */
    for (size_t f = 0; f < 3; f++) check_file(model_by_stem("nest_wrap"), files[f][0], files[f][1], f != 1);
}

/* ---------------------------------------------------------------- a damaged global heap */

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static uint64_t rd64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

enum { ZERO_FREE_SPACE, OVERSIZED_OBJECT, BAD_INDEX, BAD_LENGTH };

static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

/* Damage every variable-length string that refers to the first global heap collection
 * (on disk: length 4, collection address 8, object index 4): give it an object index the
 * collection does not hold (libhdf5 1.10 indexes past its object table: a segfault, the
 * damage of ../shared/repro/crash-h5hg-read.h5), or a length other than its object's
 * (libhdf5 copies the object into a buffer of the string's length). */
static void damage_string_ref(uint8_t *d, size_t len, int how) {
    size_t gcol = 0;
    while (gcol + 16 <= len && memcmp(d + gcol, "GCOL", 4) != 0) gcol++;
    assert_true(gcol + 16 <= len);
    int found = 0;
    for (size_t p = 0; p + 16 <= len; p++) {
        uint32_t n = rd32(d + p), idx = rd32(d + p + 12);
        if (rd64(d + p + 4) != gcol || n == 0 || n > 100000 || idx == 0 || idx > 1000) continue;
        uint32_t v = how == BAD_INDEX ? 0x79746408u : n + 9;
        for (int b = 0; b < 4; b++) d[p + (how == BAD_INDEX ? 12 : 0) + b] = (uint8_t)(v >> (8 * b));
        found++;
    }
    if (!found) fail_msg("no variable-length string to damage found");
}

/* Damage the first global heap collection ("GCOL"): give its free-space object (index 0)
 * the size 0, with which libhdf5 1.10 never finishes reading the collection, or give its
 * first object a size larger than the collection, with which libhdf5 reads past its buffer. */
static void damage_global_heap(uint8_t *d, size_t len, int how) {
    for (size_t i = 0; i + 16 <= len; i++) {
        if (memcmp(d + i, "GCOL", 4) != 0) continue;
        uint64_t end = i + rd64(d + i + 8);
        for (uint64_t p = i + 16; p + 16 <= end && p + 16 <= len;) {
            unsigned idx = d[p] | d[p + 1] << 8;
            uint64_t size = rd64(d + p + 8);
            if (how == OVERSIZED_OBJECT && idx != 0) {
                uint64_t big = 60000;
                for (int b = 0; b < 8; b++) d[p + 8 + b] = (uint8_t)(big >> (8 * b));
                return;
            }
            if (how == ZERO_FREE_SPACE && idx == 0) {
                memset(d + p + 8, 0, 8);
                return;
            }
            p += 16 + ((size + 7) & ~(uint64_t)7);
        }
    }
    fail_msg("no global heap collection to damage found");
}

/* Load `path` in a child process with a time limit: a hang fails the test instead of
 * blocking it. The load must fail with a bad-file error that names the global heap. */
static void refused_in_time(const char *path) {
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60);
        kc_model *m = NULL;
        kc_status s = kc_model_load(path, &m);
        kc_model_destroy(m);
        if (s != KC_STATUS_BAD_FILE || !strstr(kc_last_error(), "global heap")) {
            fprintf(stderr, "%s: status '%s': %s\n", path, kc_status_name(s), kc_last_error());
            _exit(1);
        }
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFSIGNALED(st)) fail_msg("%s: loading it was killed by signal %d (a hang if 14)", path, WTERMSIG(st));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("%s: not refused with a global heap error", path);
}

static void test_damaged_global_heap(void **state) {
    (void)state;
    char dir[] = "/tmp/kerac-fixtures-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char h5[300], keras[300];
    snprintf(h5, sizeof h5, "%s/damaged.h5", dir);
    snprintf(keras, sizeof keras, "%s/damaged.keras", dir);

    /* a Keras 2 .h5 file: its string attributes live in the global heap */
    for (int how = ZERO_FREE_SPACE; how <= BAD_LENGTH; how++) {
        size_t len = 0;
        uint8_t *d = slurp(fpath("dense", ".keras2.h5"), &len);
        if (how <= OVERSIZED_OBJECT) damage_global_heap(d, len, how);
        else damage_string_ref(d, len, how);
        FILE *f = fopen(h5, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(d, 1, len, f), len);
        fclose(f);
        free(d);
        refused_in_time(h5);
    }

    /* a .keras archive whose model.weights.h5 is damaged the same way */
    int err = 0;
    zip_t *in = zip_open(fpath("dense", ".keras"), ZIP_RDONLY, &err);
    assert_non_null(in);
    zip_t *out = zip_open(keras, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(out);
    uint8_t *bufs[8] = {0};
    zip_int64_t n = zip_get_num_entries(in, 0);
    assert_true(n > 0 && n <= 8);
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t zs;
        assert_int_equal(zip_stat_index(in, (zip_uint64_t)i, 0, &zs), 0);
        bufs[i] = malloc(zs.size + 1);
        zip_file_t *zf = zip_fopen_index(in, (zip_uint64_t)i, 0);
        assert_non_null(zf);
        assert_int_equal(zip_fread(zf, bufs[i], zs.size), (zip_int64_t)zs.size);
        zip_fclose(zf);
        if (strcmp(zs.name, "model.weights.h5") == 0) damage_global_heap(bufs[i], zs.size, ZERO_FREE_SPACE);
        zip_source_t *src = zip_source_buffer(out, bufs[i], zs.size, 0);
        assert_true(zip_file_add(out, zs.name, src, ZIP_FL_OVERWRITE) >= 0);
    }
    assert_int_equal(zip_close(out), 0);
    zip_discard(in);
    for (int i = 0; i < 8; i++) free(bufs[i]);
    refused_in_time(keras);

    unlink(h5);
    unlink(keras);
    rmdir(dir);
}

/* regularising layers: SpatialDropout2D and ConvNeXt's StochasticDepth (module
 * keras.src.applications.convnext), the identity in inference: Keras's predictions, which the
 * generator checked equal the same model's without them. */
static void test_regularize_layers(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("regularize");
    assert_non_null(fm);
    check_file(fm, ".keras", "_y3.npy", true);
    check_file(fm, ".keras3.h5", "_y3.npy", false);
    /* Keras's SpatialDropout2D refuses "trainable" and (Keras 3) "noise_shape": kerac writes neither */
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras"), &m), "regularize.keras");
    for (int flavour = 2; flavour <= 3; flavour++) {
        char *json = NULL;
        must(kc_model_to_json(m, flavour, &json), "to_json");
        const char *at = strstr(json, "\"SpatialDropout2D\"");
        assert_non_null(at);
        const char *open = strchr(at, '{'), *close = open ? strchr(open, '}') : NULL;
        assert_non_null(close);
        char cfg[512];
        snprintf(cfg, sizeof cfg, "%.*s", (int)(close - open + 1), open);
        if (strstr(cfg, "trainable") || strstr(cfg, "noise_shape") || !strstr(cfg, "\"rate\": 0.3"))
            fail_msg("flavour %d: SpatialDropout2D config %s", flavour, cfg);
        kc_free(json);
    }
    kc_model_destroy(m);
}

/* tf-keras's TFOpLambda layers (x + 3.0, * (1 / 6), x - 0.25, x / 2.0, x + tensor, x * tensor:
 * MobileNetV3's hard_sigmoid and ConvNeXt's residual add in tf-keras .h5 files) read as
 * TensorOp layers; kerac's own .keras and .h5 of the model read back with the same outputs. */
static void test_tf_ops(void **state) {
    (void)state;
    const fixture_model *fm = model_by_stem("tf_ops");
    check_file(fm, ".keras2.h5", "_y2.npy", true);
    kc_model *m = NULL;
    must(kc_model_load(fpath(fm->stem, ".keras2.h5"), &m), "tf_ops.keras2.h5");
    npy x, want;
    npy_load(fpath(fm->stem, "_x.npy"), &x);
    npy_load(fpath(fm->stem, "_y2.npy"), &want);
    char dir[] = "/tmp/kerac-tfops-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s/saved%s", dir, k ? ".h5" : ".keras");
        must(kc_model_save(m, path), path);
        kc_model *back = NULL;
        must(kc_model_load(path, &back), path);
        float *y = predict(back, &x, &want, path);
        double d = max_abs_diff(y, want.data, want.size);
        if (!(d <= TOL)) fail_msg("%s: kerac's saved model differs from tf-keras by %.3g", path, d);
        free(y);
        kc_model_destroy(back);
        unlink(path);
    }
    rmdir(dir);
    npy_free(&x);
    npy_free(&want);
    kc_model_destroy(m);
}

int main(void) {
    const char *src = getenv("KERAC_SOURCE_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/tests/fixtures/keras", src && *src ? src : "..");
    kc_log_set_level(KC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_cnn),
        cmocka_unit_test(test_bn_strides),
        cmocka_unit_test(test_resnet),
        cmocka_unit_test(test_depthwise),
        cmocka_unit_test(test_dropout_functional),
        cmocka_unit_test(test_ew_merges),
        cmocka_unit_test(test_ew_acts),
        cmocka_unit_test(test_ew_mnv3),
        cmocka_unit_test(test_ew_k2),
        cmocka_unit_test(test_frozen_base),
        cmocka_unit_test(test_custom_scale),
        cmocka_unit_test(test_augment_layers), /* augmentation */
        cmocka_unit_test(test_ew_hsig),
        cmocka_unit_test(test_dense),
        cmocka_unit_test(test_normscale),
        cmocka_unit_test(test_resample),
        cmocka_unit_test(test_fixtures_distinct),
        cmocka_unit_test(test_damaged_global_heap),
        /* convolutions */
        cmocka_unit_test(test_convolutions),
        /* nested models in legacy .h5; the augmentation fixture's .h5 */
        cmocka_unit_test(test_nested_h5),
        cmocka_unit_test(test_augment_h5),
        cmocka_unit_test(test_regularize_layers), /* regularising layers */
        /* nested block */
        cmocka_unit_test(test_nested_models),
        cmocka_unit_test(test_nested_errors),
        cmocka_unit_test(test_nested_in_sequential),
        /* Gaussian noise layers, shared layers */
        cmocka_unit_test(test_gauss_noise),
        cmocka_unit_test(test_shared_layers),
        cmocka_unit_test(test_tf_ops), /* tf-keras TFOpLambda */
        /* keras-names */
        cmocka_unit_test(test_class_names_as_read),
        cmocka_unit_test(test_nested_called_twice),
        cmocka_unit_test(test_sequential_nesting_saved),
        cmocka_unit_test(test_nested_multi_io), /* nested-more */
        cmocka_unit_test(test_nested_deep),     /* nested-deep */
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
