/* test_augment.c — the augmentation and preprocessing layers (RandomFlip, RandomRotation,
 * RandomZoom, RandomTranslation, RandomCrop, CenterCrop, RandomContrast, RandomBrightness,
 * Resizing) and their CPU kernels.
 *
 *  - fixed-parameter transforms against Keras 3.15 (jax backend): tests/fixtures/augment/
 *    reference.json, made by make_reference.py there: affine_transform at the matrices the
 *    random layers build (every fill mode x interpolation), Resizing (bilinear / nearest,
 *    crop_to_aspect_ratio, pad_to_aspect_ratio), CenterCrop, the colour formulas; within 1e-5
 *  - the statistics of the training draws: flip rate, rotation angles, translations, crop
 *    offsets, brightness deltas and contrast factors inside Keras's ranges and spread over
 *    them, and the same draws for the same seed
 *  - inference: the random kinds are the identity in a model's predict
 *  - the errors of bad options
 * Gradients are checked in test_gradcheck_layers.c, GPU parity in test_cuda_backend.c. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "kerac.h"
#include "layers/layer.h"

static json_t *g_ref;
static float *g_x; /* the reference input (N, H, W, C) */
static int g_n, g_h, g_w, g_c;

static float *floats_of(const json_t *a, size_t *n) {
    *n = json_array_size(a);
    float *v = malloc(*n * sizeof(float) + 1);
    assert_non_null(v);
    for (size_t i = 0; i < *n; i++) v[i] = (float)json_number_value(json_array_get(a, i));
    return v;
}

static int setup(void **state) {
    (void)state;
    const char *src = getenv("KERAC_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/augment/reference.json", src ? src : "..");
    json_error_t e;
    g_ref = json_load_file(path, 0, &e);
    if (!g_ref) {
        fprintf(stderr, "cannot read %s: %s\n", path, e.text);
        return -1;
    }
    const json_t *shape = json_object_get(g_ref, "input_shape");
    g_n = (int)json_integer_value(json_array_get(shape, 0)), g_h = (int)json_integer_value(json_array_get(shape, 1));
    g_w = (int)json_integer_value(json_array_get(shape, 2)), g_c = (int)json_integer_value(json_array_get(shape, 3));
    size_t n;
    g_x = floats_of(json_object_get(g_ref, "input"), &n);
    return n == (size_t)g_n * g_h * g_w * g_c ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    json_decref(g_ref);
    free(g_x);
    return 0;
}

static void expect_close(const float *got, const json_t *c, double tol, const char *what, int index) {
    size_t n;
    float *want = floats_of(json_object_get(c, "output"), &n);
    for (size_t i = 0; i < n; i++)
        if (!(fabs((double)got[i] - want[i]) <= tol * (1.0 + fabs(want[i]))))
            fail_msg("case %d (%s): value %zu is %.7g, Keras %.7g", index, what, i, (double)got[i], (double)want[i]);
    free(want);
}

/* ---------------------------------------------------------------- fixed transforms vs Keras */

static int fill_of(const char *s) {
    return !strcmp(s, "reflect") ? KC_FILL_REFLECT : !strcmp(s, "wrap") ? KC_FILL_WRAP
                                                     : !strcmp(s, "constant") ? KC_FILL_CONSTANT : KC_FILL_NEAREST;
}

/* A layer on (H, W, C) images run on the reference input (inference unless training). */
static float *run_layer(const kc_layer_spec *spec, int h, int w, int c, int n, const float *x, bool training,
                        uint64_t seed, kc_shape *out) {
    kc_backend *be = NULL;
    kc_layer *l = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    if (kc__layer_create(spec, &l) != KC_STATUS_OK) fail_msg("create: %s", kc_last_error());
    l->n_in = 1;
    l->in_shape[0] = kc__shape_make(3, (int[]){h, w, c});
    if (l->ops->build(l) != KC_STATUS_OK) fail_msg("build: %s", kc_last_error());
    *out = l->out_shape;
    int64_t yn = (int64_t)n * kc__shape_size(&l->out_shape);
    float *y = malloc((size_t)yn * sizeof(float));
    size_t aux_bytes = l->ops->aux_bytes ? l->ops->aux_bytes(l, n) : 0;
    void *aux = aux_bytes ? malloc(aux_bytes) : NULL;
    kc_fwd a = {.be = be, .batch = n, .training = training, .y = y, .aux = aux, .seed = seed};
    a.x[0] = x;
    if (!training && (l->ops->flags & KC_LAYER_ALIAS_INFERENCE)) memcpy(y, x, (size_t)yn * sizeof(float));
    else if (l->ops->forward(l, &a) != KC_STATUS_OK) fail_msg("forward: %s", kc_last_error());
    free(aux);
    kc__layer_destroy(l);
    kc_backend_destroy(be);
    return y;
}

/* Runs one reference case of its kind on the CPU backend into y (the input's size). */
typedef void (*case_fn)(kc_backend *be, const json_t *c, float *y);

/* Every reference case of `kind` through fn, compared with Keras's; returns how many. */
static int run_cases(const char *kind, case_fn fn) {
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    float *y = malloc((size_t)g_n * g_h * g_w * g_c * sizeof(float));
    const json_t *cases = json_object_get(g_ref, "cases");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        if (strcmp(json_string_value(json_object_get(c, "kind")), kind)) continue;
        fn(be, c, y);
        expect_close(y, c, 1e-5, kind, (int)i);
        checked++;
    }
    free(y);
    kc_backend_destroy(be);
    return checked;
}

static void affine_case(kc_backend *be, const json_t *c, float *y) {
    const char *interp = json_string_value(json_object_get(c, "interpolation"));
    kc_sample2d_desc d = {.n = g_n, .h = g_h, .w = g_w, .c = g_c, .oh = g_h, .ow = g_w, .ch = g_h, .cw = g_w,
                          .interp = !strcmp(interp, "bilinear") ? KC_SAMPLE_BILINEAR : KC_SAMPLE_ROUND,
                          .fill = fill_of(json_string_value(json_object_get(c, "fill_mode"))),
                          .fill_value = (float)json_number_value(json_object_get(c, "fill_value"))};
    for (int k = 0; k < 6; k++) d.m[k] = (float)json_number_value(json_array_get(json_object_get(c, "transform"), k));
    assert_int_equal(be->sample2d_forward(be, &d, NULL, g_x, y), KC_STATUS_OK);
}

static void test_affine_reference(void **state) {
    (void)state;
    assert_int_equal(run_cases("affine", affine_case), 48); /* 4 fill modes x 2 interpolations x 6 transforms */
}

static void test_resize_reference(void **state) {
    (void)state;
    const json_t *cases = json_object_get(g_ref, "cases");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *kind = json_string_value(json_object_get(c, "kind"));
        int h = (int)json_integer_value(json_object_get(c, "height")), w = (int)json_integer_value(json_object_get(c, "width"));
        kc_shape out;
        float *y;
        if (!strcmp(kind, "resize")) {
            y = run_layer(KC_RESIZING(.height = h, .width = w,
                                      .interpolation = json_string_value(json_object_get(c, "interpolation")),
                                      .crop_to_aspect_ratio = json_is_true(json_object_get(c, "crop")) ? KC_TRUE : KC_FALSE,
                                      .pad_to_aspect_ratio = json_is_true(json_object_get(c, "pad")) ? KC_TRUE : KC_FALSE,
                                      .fill_value = (float)json_number_value(json_object_get(c, "fill_value"))),
                          g_h, g_w, g_c, g_n, g_x, false, 0, &out);
        } else if (!strcmp(kind, "center_crop")) {
            y = run_layer(KC_CENTER_CROP(.height = h, .width = w), g_h, g_w, g_c, g_n, g_x, false, 0, &out);
        } else {
            continue;
        }
        assert_int_equal(out.dim[0], h);
        assert_int_equal(out.dim[1], w);
        expect_close(y, c, 1e-5, kind, (int)i);
        free(y);
        checked++;
    }
    assert_int_equal(checked, 12);
}

static void color_case(kc_backend *be, const json_t *c, float *y) {
    float f = (float)json_number_value(json_object_get(c, "f")), dd = (float)json_number_value(json_object_get(c, "d"));
    float params[4] = {f, dd, f, dd};
    kc_color2d_desc d = {.n = g_n, .hw = g_h * g_w, .c = g_c,
                         .contrast = (int)json_integer_value(json_object_get(c, "contrast")),
                         .lo = (float)json_number_value(json_object_get(c, "lo")),
                         .hi = (float)json_number_value(json_object_get(c, "hi"))};
    assert_int_equal(be->color2d_forward(be, &d, params, g_x, y), KC_STATUS_OK);
}

static void test_color_reference(void **state) {
    (void)state;
    assert_int_equal(run_cases("color", color_case), 4);
}

/* ---------------------------------------------------------------- training draws */

#define BIG_N 400

/* One bright pixel at (py, px) of a (h, w) image per example, channel 1. */
static float *dot_images(int n, int h, int w, int py, int px) {
    float *x = calloc((size_t)n * h * w, sizeof(float));
    for (int i = 0; i < n; i++) x[((int64_t)i * h + py) * w + px] = 1.0f;
    return x;
}

/* Where the brightest pixel of image i is. */
static void argmax_pixel(const float *y, int i, int h, int w, int *py, int *px) {
    const float *p = y + (int64_t)i * h * w;
    int best = 0;
    for (int k = 1; k < h * w; k++)
        if (p[k] > p[best]) best = k;
    *py = best / w, *px = best % w;
}

static void test_flip_draws(void **state) {
    (void)state;
    const int h = 5, w = 7;
    float *x = dot_images(BIG_N, h, w, 1, 2);
    kc_shape out;
    float *y = run_layer(KC_RANDOM_FLIP(), h, w, 1, BIG_N, x, true, 99, &out);
    int flipped = 0;
    for (int i = 0; i < BIG_N; i++) {
        int py, px;
        argmax_pixel(y, i, h, w, &py, &px);
        if (py == h - 2 && px == w - 3) flipped++; /* both axes by the same draw, as Keras 3 */
        else if (!(py == 1 && px == 2)) fail_msg("image %d: the dot went to (%d, %d)", i, py, px);
    }
    assert_true(flipped > BIG_N * 0.4 && flipped < BIG_N * 0.6);
    float *y2 = run_layer(KC_RANDOM_FLIP(), h, w, 1, BIG_N, x, true, 99, &out);
    assert_memory_equal(y, y2, (size_t)BIG_N * h * w * sizeof(float)); /* same seed, same draws */
    float *y3 = run_layer(KC_RANDOM_FLIP(), h, w, 1, BIG_N, x, true, 100, &out);
    assert_true(memcmp(y, y3, (size_t)BIG_N * h * w * sizeof(float)) != 0);
    free(y), free(y2), free(y3), free(x);
}

static void test_rotation_draws(void **state) {
    (void)state;
    const int s = 41, c = 20; /* a dot 15 pixels right of the centre */
    float *x = dot_images(BIG_N, s, s, c, c + 15);
    kc_shape out;
    /* bilinear: a single dot never falls between the output's samples */
    float *y = run_layer(KC_RANDOM_ROTATION(.factor = KC_FACTOR_PAIR(-0.05f, 0.15f), .fill_mode = "constant"),
                         s, s, 1, BIG_N, x, true, 5, &out);
    double lo = 1e9, hi = -1e9, sum = 0.0;
    for (int i = 0; i < BIG_N; i++) {
        int py, px;
        argmax_pixel(y, i, s, s, &py, &px);
        /* output o reads input R(o - c) + c: the dot shows at R^-1 (dot - c) + c, an angle of -theta */
        double deg = -atan2((double)(py - c), (double)(px - c)) * 180.0 / M_PI;
        lo = fmin(lo, deg), hi = fmax(hi, deg), sum += deg;
    }
    /* Keras: angle uniform in [-0.05, 0.15] * 360 = [-18, 54] degrees; 4 degrees of pixel error */
    assert_true(lo >= -18.0 - 4.0 && lo < -18.0 + 8.0);
    assert_true(hi <= 54.0 + 4.0 && hi > 54.0 - 8.0);
    assert_true(fabs(sum / BIG_N - 18.0) < 4.0);
    free(y), free(x);
}

static void test_translation_and_zoom_draws(void **state) {
    (void)state;
    const int h = 21, w = 31;
    float *x = dot_images(BIG_N, h, w, 10, 15);
    kc_shape out;
    float *y = run_layer(KC_RANDOM_TRANSLATION(.height_factor = KC_FACTOR(0.2f), .width_factor = KC_FACTOR_PAIR(0.0f, 0.3f),
                                               .fill_mode = "constant", .interpolation = "nearest"),
                         h, w, 1, BIG_N, x, true, 6, &out);
    int dy_lo = 99, dy_hi = -99, dx_lo = 99, dx_hi = -99;
    for (int i = 0; i < BIG_N; i++) {
        int py, px;
        argmax_pixel(y, i, h, w, &py, &px);
        dy_lo = KC_MIN(dy_lo, py - 10), dy_hi = KC_MAX(dy_hi, py - 10);
        dx_lo = KC_MIN(dx_lo, px - 15), dx_hi = KC_MAX(dx_hi, px - 15);
    }
    /* shifts: height in [-0.2, 0.2] * 21 = [-4.2, 4.2], width in [0, 0.3] * 31 = [0, 9.3] */
    assert_true(dy_lo >= -5 && dy_lo <= -3 && dy_hi <= 5 && dy_hi >= 3);
    assert_true(dx_lo >= 0 && dx_lo <= 1 && dx_hi <= 10 && dx_hi >= 8);
    free(y);
    /* zoom: a dot 10 right of the centre shows at 10 / z; z in [1 - 0.5, 1 + 0.2]... in [0.5, 1.2] */
    float *xz = dot_images(BIG_N, h, w, 10, 25);
    y = run_layer(KC_RANDOM_ZOOM(.height_factor = KC_FACTOR_PAIR(-0.5f, 0.2f), .fill_mode = "constant"), h, w, 1, BIG_N,
                  xz, true, 7, &out);
    double zlo = 9, zhi = 0;
    for (int i = 0; i < BIG_N; i++) {
        int py, px;
        argmax_pixel(y, i, h, w, &py, &px);
        if (y[((int64_t)i * h + py) * w + px] < 0.2f) continue; /* zoomed in so far the dot left the image */
        assert_int_equal(py, 10);
        assert_true(px > 15);
        double z = 10.0 / (px - 15);
        zlo = fmin(zlo, z), zhi = fmax(zhi, z);
    }
    assert_true(zlo < 0.75 && zhi > 1.0 && zhi < 1.35);
    free(y), free(xz), free(x);
}

static void test_crop_draws(void **state) {
    (void)state;
    const int h = 6, w = 5, n = 300;
    float *x = malloc((size_t)n * h * w * sizeof(float));
    for (int i = 0; i < n * h * w; i++) x[i] = (float)(i % (h * w)); /* pixel value = its index */
    int seen[3][3] = {{0}};
    for (uint64_t seed = 1; seed <= 60; seed++) {
        kc_shape out;
        float *y = run_layer(KC_RANDOM_CROP(.height = 4, .width = 3), h, w, 1, 5, x, true, seed, &out);
        assert_int_equal(out.dim[0], 4);
        int top = (int)y[0] / w, left = (int)y[0] % w;
        assert_true(top >= 0 && top <= 2 && left >= 0 && left <= 2);
        seen[top][left]++;
        for (int i = 0; i < 5; i++) /* one offset for the whole batch, as Keras 3 */
            for (int r = 0; r < 4; r++)
                for (int s = 0; s < 3; s++)
                    assert_float_equal(y[((int64_t)i * 4 + r) * 3 + s], (float)((top + r) * w + left + s), 0);
        free(y);
    }
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++) assert_true(seen[a][b] > 0); /* every offset drawn */
    /* inference: the centred crop of the target's aspect ratio (6 x 4 at (0, 0)), resized
     * bilinearly: output (0, 0) reads (0.25, 1/6) */
    kc_shape out;
    float *y = run_layer(KC_RANDOM_CROP(.height = 4, .width = 3), h, w, 1, 1, x, false, 0, &out);
    assert_float_equal(y[0], 0.25f * (float)w + 1.0f / 6.0f, 1e-5);
    free(y), free(x);
}

static void test_color_draws(void **state) {
    (void)state;
    const int n = BIG_N, hw = 4;
    float *x = malloc((size_t)n * hw * sizeof(float));
    for (int i = 0; i < n * hw; i++) x[i] = (i % hw) < 2 ? 100.0f : 140.0f; /* mean 120 */
    kc_shape out;
    float *y = run_layer(KC_RANDOM_BRIGHTNESS(.factor = KC_FACTOR_PAIR(-0.1f, 0.3f)), 2, 2, 1, n, x, true, 3, &out);
    double lo = 1e9, hi = -1e9, sum = 0;
    for (int i = 0; i < n; i++) {
        double d = y[(int64_t)i * hw] - 100.0;
        assert_float_equal(y[(int64_t)i * hw + 2] - 140.0f, (float)d, 1e-3); /* one delta per image */
        lo = fmin(lo, d), hi = fmax(hi, d), sum += d;
    }
    /* delta uniform in [-0.1, 0.3] * 255 = [-25.5, 76.5] */
    assert_true(lo >= -25.5 && lo < -20 && hi <= 76.5 && hi > 70 && fabs(sum / n - 25.5) < 6);
    free(y);
    y = run_layer(KC_RANDOM_CONTRAST(.factor = KC_FACTOR(0.5f)), 2, 2, 1, n, x, true, 4, &out);
    lo = 1e9, hi = -1e9;
    for (int i = 0; i < n; i++) {
        double f = (y[(int64_t)i * hw + 2] - 120.0) / 20.0; /* (x - mean) * f + mean */
        lo = fmin(lo, f), hi = fmax(hi, f);
    }
    /* Keras 3 bounds the factor to [0, 1]: f = 0.5 gives (0, 0.5), a contrast in [1, 1.5] */
    assert_true(lo >= 1.0 - 1e-4 && lo < 1.05 && hi <= 1.5 + 1e-4 && hi > 1.45);
    free(y), free(x);
}

/* ---------------------------------------------------------------- inference, errors */

static void test_inference_identity(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("aug", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {5, 6, 2}));
    kc_add(m, KC_RANDOM_FLIP());
    kc_add(m, KC_RANDOM_ROTATION(.factor = KC_FACTOR(0.3f)));
    kc_add(m, KC_RANDOM_ZOOM(.height_factor = KC_FACTOR(0.3f)));
    kc_add(m, KC_RANDOM_TRANSLATION(.height_factor = KC_FACTOR(0.3f), .width_factor = KC_FACTOR(0.3f)));
    kc_add(m, KC_RANDOM_CONTRAST(.factor = KC_FACTOR(0.3f)));
    kc_add(m, KC_RANDOM_BRIGHTNESS(.factor = KC_FACTOR(0.3f)));
    kc_add(m, KC_FLATTEN());
    if (kc_compile(m, &(kc_compile_opts){.loss = "mse"}) != KC_STATUS_OK) fail_msg("compile: %s", kc_last_error());
    float *y = malloc((size_t)g_n * g_h * g_w * g_c * sizeof(float));
    if (kc_predict(m, g_x, g_n, 2, y) != KC_STATUS_OK) fail_msg("predict: %s", kc_last_error());
    assert_memory_equal(y, g_x, (size_t)g_n * g_h * g_w * g_c * sizeof(float));
    free(y);
    kc_model_destroy(m);
}

static void expect_create_error(const kc_layer_spec *spec, const char *needle) {
    kc_layer *l = NULL;
    kc_status s = kc__layer_create(spec, &l);
    if (s == KC_STATUS_OK) {
        kc__layer_destroy(l);
        fail_msg("%s: accepted", spec->class_name);
    }
    if (!strstr(kc_last_error(), needle)) fail_msg("%s: error '%s' lacks '%s'", spec->class_name, kc_last_error(), needle);
}

static void test_bad_options(void **state) {
    (void)state;
    expect_create_error(KC_RANDOM_FLIP(.mode = "diagonal"), "mode 'diagonal'");
    expect_create_error(KC_RANDOM_ROTATION(.fill_mode = "mirror", .factor = KC_FACTOR(0.1f)), "fill_mode 'mirror'");
    expect_create_error(KC_RANDOM_ROTATION(.factor = KC_FACTOR(0.1f), .interpolation = "bicubic"), "interpolation");
    expect_create_error(KC_RANDOM_ROTATION(.name = "r"), "factor is required");
    expect_create_error(KC_RANDOM_ROTATION(.factor = KC_FACTOR(1.5f)), "factor 1.5 must be in [-1, 1]");
    expect_create_error(KC_RANDOM_ZOOM(.height_factor = KC_FACTOR(-1.0f)), "must be in (-1, 1]");
    expect_create_error(KC_RANDOM_TRANSLATION(.height_factor = KC_FACTOR(0.1f)), "width_factor is required");
    expect_create_error(KC_RANDOM_CONTRAST(.factor = KC_FACTOR(-0.2f)), "must be in [0, 1]");
    expect_create_error(KC_RANDOM_BRIGHTNESS(.factor = KC_FACTOR(0.2f), .value_range = {3, 3}), "value_range");
    expect_create_error(KC_RANDOM_CROP(.height = 0, .width = 3), "height and width must be positive");
    expect_create_error(KC_RESIZING(.height = 3, .width = 3, .interpolation = "lanczos3"), "interpolation 'lanczos3'");
    expect_create_error(KC_RESIZING(.height = 3, .width = 3, .antialias = KC_TRUE), "antialias");
    expect_create_error(KC_RESIZING(.height = 3, .width = 3, .crop_to_aspect_ratio = KC_TRUE, .pad_to_aspect_ratio = KC_TRUE),
                        "only one of");
    /* images only */
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_RESIZING(.height = 3, .width = 3), &l), KC_STATUS_OK);
    l->n_in = 1;
    l->in_shape[0] = kc__shape_make(2, (int[]){4, 4});
    assert_int_equal(l->ops->build(l), KC_STATUS_SHAPE);
    assert_non_null(strstr(kc_last_error(), "expects images (H, W, C)"));
    kc__layer_destroy(l);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_affine_reference),   cmocka_unit_test(test_resize_reference),
        cmocka_unit_test(test_color_reference),    cmocka_unit_test(test_flip_draws),
        cmocka_unit_test(test_rotation_draws),     cmocka_unit_test(test_translation_and_zoom_draws),
        cmocka_unit_test(test_crop_draws),         cmocka_unit_test(test_color_draws),
        cmocka_unit_test(test_inference_identity), cmocka_unit_test(test_bad_options),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
