/* test_normresample.c — the normalisation and resampling kinds (Rescaling, Normalization,
 * LayerNormalization, GroupNormalization, UpSampling2D, Cropping2D, GlobalMaxPooling2D,
 * Permute, RepeatVector):
 *   - the CPU kernels against plain references written here: bilinear upsampling by JAX's
 *     definition (triangle weights over the pixels inside the image, renormalised: a
 *     different formulation from the kernel's clamped taps), nearest by index arithmetic,
 *     group normalisation in double, permutation by index arithmetic; sizes small and
 *     large enough to run on all threads;
 *   - the option errors, from the C API and from Keras JSON (name the layer and option);
 *   - Keras 3's serialised arrays ({"class_name": "__numpy__"}) as Rescaling's scale. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/core.h"
#include "kerac.h"
#include "layers/layer.h"

static kc_backend *B;
static kc_rng R;

static float *rnd(int64_t n) {
    float *p = malloc((size_t)n * sizeof(float));
    assert_non_null(p);
    for (int64_t i = 0; i < n; i++) p[i] = (float)(kc__rng_uniform(&R) * 4.0 - 2.0);
    return p;
}

static void close_to(const char *what, const float *a, const double *ref, int64_t n, double tol) {
    for (int64_t i = 0; i < n; i++)
        if (!(fabs(a[i] - ref[i]) <= tol * (1.0 + fabs(ref[i]))))
            fail_msg("%s: value %lld is %.8g, the reference %.8g", what, (long long)i, a[i], ref[i]);
}

/* JAX's resize weights for output o of an axis: triangle kernel at the half-pixel source,
 * over the inputs inside the image, renormalised */
static void jax_weights(int o, int factor, int in, double *w) {
    double src = (o + 0.5) / factor - 0.5, sum = 0;
    for (int i = 0; i < in; i++) {
        w[i] = fmax(0.0, 1.0 - fabs(src - i));
        sum += w[i];
    }
    for (int i = 0; i < in; i++) w[i] /= sum;
}

static void upsample_case(int n, int h, int w, int c, int sh, int sw, int bilinear) {
    kc_resample2d_desc d = {.n = n, .h = h, .w = w, .c = c, .sh = sh, .sw = sw, .bilinear = bilinear};
    const int oh = h * sh, ow = w * sw;
    const int64_t xn = (int64_t)n * h * w * c, yn = (int64_t)n * oh * ow * c;
    float *x = rnd(xn), *y = malloc((size_t)yn * sizeof(float)), *dy = rnd(yn), *dx = malloc((size_t)xn * sizeof(float));
    double *ry = calloc((size_t)yn, sizeof(double)), *rdx = calloc((size_t)xn, sizeof(double));
    double *wy = malloc((size_t)h * sizeof(double)), *wx = malloc((size_t)w * sizeof(double));
    assert_true(y && dx && ry && rdx && wy && wx);
    for (int e = 0; e < n; e++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++) {
                if (bilinear) jax_weights(oy, sh, h, wy), jax_weights(ox, sw, w, wx);
                for (int iy = 0; iy < h; iy++)
                    for (int ix = 0; ix < w; ix++) {
                        double f = bilinear ? wy[iy] * wx[ix] : (iy == oy / sh && ix == ox / sw);
                        if (f == 0.0) continue;
                        for (int k = 0; k < c; k++) {
                            int64_t yi = (((int64_t)e * oh + oy) * ow + ox) * c + k, xi = (((int64_t)e * h + iy) * w + ix) * c + k;
                            ry[yi] += f * x[xi];
                            rdx[xi] += f * dy[yi];
                        }
                    }
            }
    char what[96];
    assert_int_equal(B->upsample2d_forward(B, &d, x, y), KC_STATUS_OK);
    snprintf(what, sizeof what, "upsample %s %dx%dx%dx%d by (%d, %d) forward", bilinear ? "bilinear" : "nearest", n, h,
             w, c, sh, sw);
    close_to(what, y, ry, yn, 1e-5);
    assert_int_equal(B->upsample2d_backward(B, &d, dy, dx), KC_STATUS_OK);
    snprintf(what, sizeof what, "upsample %s %dx%dx%dx%d by (%d, %d) backward", bilinear ? "bilinear" : "nearest", n,
             h, w, c, sh, sw);
    close_to(what, dx, rdx, xn, 1e-5);
    free(x), free(y), free(dy), free(dx), free(ry), free(rdx), free(wy), free(wx);
}

static void test_upsample(void **state) {
    (void)state;
    upsample_case(2, 3, 4, 3, 2, 2, 0);
    upsample_case(1, 2, 3, 2, 3, 2, 0);
    upsample_case(2, 3, 4, 3, 2, 2, 1);
    upsample_case(1, 4, 3, 5, 3, 2, 1);
    upsample_case(1, 1, 2, 2, 4, 3, 1);           /* a single row: every weight on it */
    upsample_case(3, 12, 10, 40, 2, 2, 1);        /* enough for the threads */
    upsample_case(3, 12, 10, 40, 2, 2, 0);
    kc_resample2d_desc bad = {.n = 1, .h = 2, .w = 2, .c = 1, .sh = 0, .sw = 2};
    float v[16] = {0};
    assert_int_equal(B->upsample2d_forward(B, &bad, v, v), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "factors"));
}

static void groupnorm_case(int n, int64_t s, int c, int groups, bool affine) {
    const int64_t tot = n * s * c;
    const int cg = c / groups;
    float *x = rnd(tot), *y = malloc((size_t)tot * sizeof(float)), *gamma = rnd(c), *beta = rnd(c);
    float *mean = malloc((size_t)n * groups * sizeof(float)), *inv = malloc((size_t)n * groups * sizeof(float));
    float *dy = rnd(tot), *dx = malloc((size_t)tot * sizeof(float)), *dg = malloc((size_t)c * sizeof(float)),
          *db = malloc((size_t)c * sizeof(float));
    double *ry = malloc((size_t)tot * sizeof(double)), *rdx = malloc((size_t)tot * sizeof(double));
    double *rdg = calloc((size_t)c, sizeof(double)), *rdb = calloc((size_t)c, sizeof(double));
    assert_true(y && mean && inv && dx && dg && db && ry && rdx && rdg && rdb);
    for (int e = 0; e < n; e++)
        for (int g = 0; g < groups; g++) {
            double m = 0, v = 0, cnt = (double)s * cg, sg = 0, sgx = 0;
#define IDX(r, j) (((int64_t)e * s + (r)) * c + (int64_t)g * cg + (j))
            for (int64_t r = 0; r < s; r++)
                for (int j = 0; j < cg; j++) m += x[IDX(r, j)];
            m /= cnt;
            for (int64_t r = 0; r < s; r++)
                for (int j = 0; j < cg; j++) v += (x[IDX(r, j)] - m) * (x[IDX(r, j)] - m);
            const double is = 1.0 / sqrt(v / cnt + 1e-3);
            for (int64_t r = 0; r < s; r++)
                for (int j = 0; j < cg; j++) {
                    const int k = g * cg + j;
                    const double xh = (x[IDX(r, j)] - m) * is, gv = dy[IDX(r, j)] * (affine ? gamma[k] : 1.0);
                    ry[IDX(r, j)] = affine ? xh * gamma[k] + beta[k] : xh;
                    rdg[k] += dy[IDX(r, j)] * xh;
                    rdb[k] += dy[IDX(r, j)];
                    sg += gv;
                    sgx += gv * xh;
                }
            for (int64_t r = 0; r < s; r++)
                for (int j = 0; j < cg; j++) {
                    const int k = g * cg + j;
                    const double xh = (x[IDX(r, j)] - m) * is, gv = dy[IDX(r, j)] * (affine ? gamma[k] : 1.0);
                    rdx[IDX(r, j)] = is * (gv - sg / cnt - xh * sgx / cnt);
                }
#undef IDX
        }
    char what[96];
    snprintf(what, sizeof what, "groupnorm (%d, %lld, %d) in %d groups", n, (long long)s, c, groups);
    assert_int_equal(B->groupnorm_forward(B, x, y, n, s, c, groups, affine ? gamma : NULL, affine ? beta : NULL, 1e-3f,
                                          mean, inv),
                     KC_STATUS_OK);
    close_to(what, y, ry, tot, 1e-4);
    assert_int_equal(B->groupnorm_backward(B, x, dy, dx, n, s, c, groups, affine ? gamma : NULL, mean, inv, dg, db),
                     KC_STATUS_OK);
    close_to(what, dx, rdx, tot, 1e-3);
    close_to(what, dg, rdg, c, 1e-3);
    close_to(what, db, rdb, c, 1e-4);
    free(x), free(y), free(gamma), free(beta), free(mean), free(inv), free(dy), free(dx), free(dg), free(db);
    free(ry), free(rdx), free(rdg), free(rdb);
}

static void test_groupnorm(void **state) {
    (void)state;
    groupnorm_case(2, 6, 8, 4, true);
    groupnorm_case(3, 5, 6, 6, false);     /* instance norm */
    groupnorm_case(40, 1, 7, 1, true);     /* layer norm over the last axis */
    groupnorm_case(4, 64, 96, 32, true);   /* enough for the threads */
    groupnorm_case(3000, 1, 130, 1, true); /* layer norm, many rows, channel blocks */
    float v[8] = {0};
    assert_int_equal(B->groupnorm_forward(B, v, v, 1, 1, 6, 4, NULL, NULL, 1e-3f, NULL, NULL),
                     KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "multiple of groups"));
}

static void test_permute(void **state) {
    (void)state;
    const int dims[3] = {3, 4, 5}, perm[3] = {2, 0, 1}, n = 2;
    const int64_t size = 60;
    float *x = rnd(n * size), *y = malloc((size_t)(n * size) * sizeof(float));
    double *ref = malloc((size_t)(n * size) * sizeof(double));
    assert_true(y && ref);
    for (int e = 0; e < n; e++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 4; b++)
                for (int k = 0; k < 5; k++) /* y[e, k, a, b] = x[e, a, b, k] */
                    ref[e * size + ((int64_t)k * 3 + a) * 4 + b] = x[e * size + ((int64_t)a * 4 + b) * 5 + k];
    assert_int_equal(B->permute(B, x, y, n, 3, dims, perm), KC_STATUS_OK);
    close_to("permute (3, 1, 2)", y, ref, n * size, 0);
    const int bad[3] = {0, 0, 3};
    assert_int_equal(B->permute(B, x, y, n, 3, dims, bad), KC_STATUS_INVALID_ARGUMENT);
    free(x), free(y), free(ref);
}

/* A layer of spec built on input shape `in`: the status, with the error text in kc_last_error. */
static kc_status make(const kc_layer_spec *spec, kc_shape in) {
    kc_layer *l = NULL;
    kc_status s = kc__layer_create(spec, &l);
    if (s == KC_STATUS_OK) {
        snprintf(l->name, sizeof l->name, "x");
        l->n_in = 1;
        l->in_shape[0] = in;
        s = l->ops->build(l);
    }
    kc__layer_destroy(l);
    return s;
}

#define HWC(h, w, c) ((kc_shape){3, {h, w, c}})
#define EXPECT(st, spec, in, text)                                                                                     \
    do {                                                                                                               \
        assert_int_equal(make(spec, in), st);                                                                          \
        if (!strstr(kc_last_error(), text)) fail_msg("error '%s' does not say '%s'", kc_last_error(), text);           \
    } while (0)

static void test_option_errors(void **state) {
    (void)state;
    EXPECT(KC_STATUS_INVALID_ARGUMENT, KC_RESCALING(), HWC(2, 2, 3), "scale is required");
    EXPECT(KC_STATUS_SHAPE, KC_RESCALING(.scale = {2, 1, {1, 2}}), HWC(2, 2, 3), "does not broadcast");
    EXPECT(KC_STATUS_INVALID_ARGUMENT, KC_NORMALIZATION(.mean = {1, 0, {1}}), HWC(2, 2, 3), "both mean and variance");
    EXPECT(KC_STATUS_UNSUPPORTED, KC_NORMALIZATION(.axis = {.n = 1, .v = {1}}), HWC(2, 2, 3), "only the last axis");
    EXPECT(KC_STATUS_UNSUPPORTED, KC_LAYERNORM(.rms_scaling = KC_TRUE), HWC(2, 2, 3), "rms_scaling");
    EXPECT(KC_STATUS_UNSUPPORTED, KC_LAYERNORM(.axis = {1, 0, 0, {1}}), HWC(2, 2, 3), "trailing axes");
    EXPECT(KC_STATUS_SHAPE, KC_LAYERNORM(.axis = {1, 0, 0, {0}}), HWC(2, 2, 3), "batch axis");
    EXPECT(KC_STATUS_SHAPE, KC_GROUPNORM(.groups = 4), HWC(2, 2, 6), "divide the channels");
    EXPECT(KC_STATUS_SHAPE, KC_GROUPNORM(), HWC(2, 2, 16), "in 32 groups");
    EXPECT(KC_STATUS_UNSUPPORTED, KC_GROUPNORM(.axis = 1), HWC(2, 2, 4), "axis 1");
    EXPECT(KC_STATUS_UNSUPPORTED, KC_UPSAMPLING2D(.interpolation = "bicubic"), HWC(2, 2, 4), "'bicubic'");
    EXPECT(KC_STATUS_SHAPE, KC_CROPPING2D(.cropping = {{1, 1}, {0, 0}}), HWC(2, 2, 4), "leaves nothing");
    EXPECT(KC_STATUS_INVALID_ARGUMENT, KC_PERMUTE(.dims = {1, 1, 3}), HWC(2, 2, 4), "permutation");
    EXPECT(KC_STATUS_SHAPE, KC_PERMUTE(.dims = {2, 1}), HWC(2, 2, 4), "dims has 2 axes");
    EXPECT(KC_STATUS_SHAPE, KC_REPEAT_VECTOR(.n = 2), HWC(2, 2, 4), "expects input (features,)");
    EXPECT(KC_STATUS_SHAPE, KC_GLOBALMAXPOOL2D(), ((kc_shape){1, {5}}), "expects input (H, W, C)");
    /* the shapes Keras gives */
    assert_int_equal(make(KC_LAYERNORM(.axis = {3, 1, 0, {-3, -2, -1}}), HWC(2, 3, 4)), KC_STATUS_OK);
    assert_int_equal(make(KC_GROUPNORM(.groups = -1), HWC(2, 2, 5)), KC_STATUS_OK);
}

/* A Sequential of one layer (config text) on input (4, 4, 3); the load status. */
static kc_status load_one(const char *cls, const char *cfg, kc_model **out) {
    char text[2048];
    snprintf(text, sizeof text,
             "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"s\", \"layers\": [{\"class_name\": "
             "\"InputLayer\", \"config\": {\"name\": \"in\", \"batch_shape\": [null, 4, 4, 3]}}, {\"class_name\": "
             "\"%s\", \"config\": {\"name\": \"lay\", %s}}]}}",
             cls, cfg);
    *out = NULL;
    return kc_model_from_json(text, strlen(text), out);
}

static void json_error(const char *cls, const char *cfg, const char *text) {
    kc_model *m = NULL;
    kc_status s = load_one(cls, cfg, &m);
    if (s == KC_STATUS_OK) fail_msg("%s {%s} loads; it must fail", cls, cfg);
    if (!strstr(kc_last_error(), text) || !strstr(kc_last_error(), "lay"))
        fail_msg("%s {%s}: error '%s' does not name the layer and '%s'", cls, cfg, kc_last_error(), text);
    kc_model_destroy(m);
}

static void test_keras_json(void **state) {
    (void)state;
    json_error("BatchNormalization", "\"renorm\": true", "renorm");
    json_error("BatchNormalization", "\"synchronized\": true", "synchronized");
    json_error("LayerNormalization", "\"rms_scaling\": true", "rms_scaling");
    json_error("UpSampling2D", "\"interpolation\": \"lanczos3\"", "lanczos3");
    json_error("UpSampling2D", "\"size\": [2, 2], \"data_format\": \"channels_first\"", "data_format");
    json_error("Rescaling", "\"scale\": \"half\"", "scale");
    json_error("Normalization", "\"axis\": [1, 2]", "axis");
    json_error("GroupNormalization", "\"groups\": 2, \"gamma_regularizer\": \"l2\"", "gamma_regularizer");
    /* accepted when off, as Keras 3.15 writes them */
    kc_model *m = NULL;
    assert_int_equal(load_one("BatchNormalization",
                              "\"renorm\": false, \"renorm_clipping\": null, \"renorm_momentum\": 0.99, "
                              "\"synchronized\": false, \"center\": false",
                              &m),
                     KC_STATUS_OK);
    kc_model_destroy(m);
    /* Keras 3's serialised array for a per-channel scale */
    if (load_one("Rescaling",
                 "\"scale\": {\"class_name\": \"__numpy__\", \"config\": {\"value\": [2.0, 4.0, 0.5], \"dtype\": "
                 "\"float32\"}}, \"offset\": 1.0",
                 &m) != KC_STATUS_OK)
        fail_msg("Rescaling with a __numpy__ scale: %s", kc_last_error());
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    float x[48], y[48];
    for (int i = 0; i < 48; i++) x[i] = (float)i;
    assert_int_equal(kc_predict(m, x, 1, 1, y), KC_STATUS_OK);
    const float sc[3] = {2.0f, 4.0f, 0.5f};
    for (int i = 0; i < 48; i++) assert_float_equal(y[i], x[i] * sc[i % 3] + 1.0f, 1e-6);
    kc_model_destroy(m);
}

int main(void) {
    kc__rng_seed(&R, 2024);
    if (kc_backend_cpu_create(&B) != KC_STATUS_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_upsample),      cmocka_unit_test(test_groupnorm), cmocka_unit_test(test_permute),
        cmocka_unit_test(test_option_errors), cmocka_unit_test(test_keras_json),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(B);
    return rc;
}
