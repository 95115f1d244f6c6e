/* test_depthwise.c — the CPU backend's depthwise convolution (cpu_depthwise.c) against a
 * plain reference written here (direct loops in double, one output at a time), for every
 * option: kernel shapes, strides, dilation, 'same' padding (TensorFlow's: the extra row or
 * column after), depth multipliers, bias or none, the fused ReLU; small and large enough
 * to run on all threads; and the descriptor errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/cpu/cpu.h"
#include "core/core.h"
#include "kerac.h"
#include "layers/layer.h"

static kc_backend *B;

static kc_conv2d_desc desc(int n, int h, int w, int c, int mult, int kh, int kw, int sh, int sw, int dh, int dw,
                           bool same) {
    kc_conv2d_desc d = {.n = n, .h = h, .w = w, .c = c, .f = c * mult, .kh = kh, .kw = kw, .sh = sh, .sw = sw,
                        .dh = dh, .dw = dw};
    kc__conv_out_size(h, kh, sh, dh, same, &d.oh, &d.pad_top);
    kc__conv_out_size(w, kw, sw, dw, same, &d.ow, &d.pad_left);
    return d;
}

/* x index of output (n, oy, ox) under tap (r, s), or -1 in the padding */
static int64_t ref_x(const kc_conv2d_desc *d, int n, int oy, int ox, int r, int s, int ch) {
    int iy = oy * d->sh - d->pad_top + r * d->dh, ix = ox * d->sw - d->pad_left + s * d->dw;
    if (iy < 0 || iy >= d->h || ix < 0 || ix >= d->w) return -1;
    return (((int64_t)n * d->h + iy) * d->w + ix) * d->c + ch;
}

/* y, dx, dw, db by the definition: y[n,oy,ox,k] = b[k] + sum_{r,s} x[n,iy,ix,k/M] w[r,s,k] */
static void reference(const kc_conv2d_desc *d, const float *x, const float *w, const float *b, const float *dy,
                      double *y, double *dx, double *dw, double *db) {
    const int m = d->f / d->c;
    memset(dx, 0, sizeof(double) * (size_t)d->n * d->h * d->w * d->c);
    memset(dw, 0, sizeof(double) * (size_t)d->kh * d->kw * d->f);
    memset(db, 0, sizeof(double) * (size_t)d->f);
    for (int n = 0; n < d->n; n++)
        for (int oy = 0; oy < d->oh; oy++)
            for (int ox = 0; ox < d->ow; ox++)
                for (int k = 0; k < d->f; k++) {
                    int64_t o = (((int64_t)n * d->oh + oy) * d->ow + ox) * d->f + k;
                    double acc = b ? b[k] : 0.0;
                    db[k] += dy[o];
                    for (int r = 0; r < d->kh; r++)
                        for (int s = 0; s < d->kw; s++) {
                            int64_t xi = ref_x(d, n, oy, ox, r, s, k / m);
                            if (xi < 0) continue;
                            int64_t wi = ((int64_t)r * d->kw + s) * d->f + k;
                            acc += (double)x[xi] * w[wi];
                            dx[xi] += (double)dy[o] * w[wi];
                            dw[wi] += (double)dy[o] * x[xi];
                        }
                    y[o] = d->relu && acc < 0 ? 0.0 : acc;
                }
}

static void close_to(const char *what, const char *name, const float *got, const double *want, int64_t n) {
    for (int64_t i = 0; i < n; i++)
        if (fabs(got[i] - want[i]) > 1e-4 * (1.0 + fabs(want[i])))
            fail_msg("%s %s[%lld] = %.7g, reference %.7g", what, name, (long long)i, got[i], want[i]);
}

static void one_case(const char *what, kc_conv2d_desc d, bool bias) {
    kc_rng g;
    kc__rng_seed(&g, 5);
    const int64_t xn = (int64_t)d.n * d.h * d.w * d.c, yn = (int64_t)d.n * d.oh * d.ow * d.f;
    const int64_t wn = (int64_t)d.kh * d.kw * d.f;
    float *x = malloc(xn * sizeof(float)), *w = malloc(wn * sizeof(float)), *b = malloc(d.f * sizeof(float));
    float *dy = malloc(yn * sizeof(float)), *y = malloc(yn * sizeof(float)), *dx = malloc(xn * sizeof(float));
    float *dw = malloc(wn * sizeof(float)), *db = malloc(d.f * sizeof(float));
    double *ry = malloc(yn * sizeof(double)), *rdx = malloc(xn * sizeof(double)), *rdw = malloc(wn * sizeof(double));
    double *rdb = malloc(d.f * sizeof(double));
    assert_true(x && w && b && dy && y && dx && dw && db && ry && rdx && rdw && rdb);
    for (int64_t i = 0; i < xn; i++) x[i] = (float)(2 * kc__rng_uniform(&g) - 1);
    for (int64_t i = 0; i < wn; i++) w[i] = (float)(kc__rng_uniform(&g) - 0.5);
    for (int i = 0; i < d.f; i++) b[i] = (float)(kc__rng_uniform(&g) - 0.5);
    for (int64_t i = 0; i < yn; i++) dy[i] = (float)(2 * kc__rng_uniform(&g) - 1);
    reference(&d, x, w, bias ? b : NULL, dy, ry, rdx, rdw, rdb);
    for (int64_t i = 0; i < xn; i++) dx[i] = NAN; /* everything must be overwritten */
    for (int64_t i = 0; i < wn; i++) dw[i] = NAN;
    for (int i = 0; i < d.f; i++) db[i] = NAN;
    if (B->depthwise_forward(B, &d, x, w, bias ? b : NULL, y, NULL, 0) != KC_STATUS_OK) fail_msg("%s: %s", what, kc_last_error());
    assert_int_equal(B->depthwise_backward_data(B, &d, dy, w, dx, NULL, 0), KC_STATUS_OK);
    close_to(what, "y", y, ry, yn);
    close_to(what, "dx", dx, rdx, xn);
    /* backward-filter with the workspace depthwise_workspace asks (3x3: by groups of rows), with
     * one group's room, and with none (by blocks of channels) */
    const size_t wsb = B->depthwise_workspace(B, &d);
    void *ws = malloc(wsb + 1);
    assert_non_null(ws);
    const size_t sizes[3] = {wsb, wsb / (size_t)(KC_MAX(1, kc__num_threads()) * 4), 0};
    for (int v = 0; v < 3; v++) {
        for (int64_t i = 0; i < wn; i++) dw[i] = NAN;
        assert_int_equal(B->depthwise_backward_filter(B, &d, x, dy, dw, bias ? db : NULL, sizes[v] ? ws : NULL,
                                                      sizes[v]),
                         KC_STATUS_OK);
        close_to(what, "dw", dw, rdw, wn);
        if (bias) close_to(what, "db", db, rdb, d.f);
        else
            for (int i = 0; i < d.f; i++) assert_true(isnan(db[i])); /* db NULL: untouched */
    }
    free(ws);
    free(x), free(w), free(b), free(dy), free(y), free(dx), free(dw), free(db);
    free(ry), free(rdx), free(rdw), free(rdb);
}

static void cases(void) {
    one_case("3x3 valid", desc(2, 7, 6, 3, 1, 3, 3, 1, 1, 1, 1, false), true);
    one_case("3x3 same", desc(2, 6, 7, 5, 1, 3, 3, 1, 1, 1, 1, true), true);
    one_case("3x3 stride 2 same, even input (pad after)", desc(2, 8, 8, 4, 1, 3, 3, 2, 2, 1, 1, true), false);
    one_case("3x3 stride 2 valid, odd input", desc(1, 9, 9, 4, 1, 3, 3, 2, 2, 1, 1, false), true);
    one_case("2x2 same stride 2", desc(2, 5, 6, 3, 1, 2, 2, 2, 2, 1, 1, true), true);
    one_case("5x3 rect stride (2, 1)", desc(2, 9, 7, 2, 1, 5, 3, 2, 1, 1, 1, false), true);
    one_case("dilation 2 valid", desc(2, 9, 9, 3, 1, 3, 3, 1, 1, 2, 2, false), true);
    one_case("dilation (2, 3) same", desc(1, 8, 10, 3, 1, 3, 3, 1, 1, 2, 3, true), true);
    one_case("multiplier 2", desc(2, 6, 6, 3, 2, 3, 3, 1, 1, 1, 1, false), true);
    one_case("multiplier 3 same stride 2", desc(2, 7, 7, 2, 3, 3, 3, 2, 2, 1, 1, true), true);
    one_case("kernel larger than the input, same", desc(1, 2, 3, 2, 1, 5, 5, 1, 1, 1, 1, true), true);
    one_case("1x1", desc(2, 4, 4, 6, 1, 1, 1, 1, 1, 1, 1, false), true);
    kc_conv2d_desc r = desc(2, 6, 6, 4, 1, 3, 3, 1, 1, 1, 1, true);
    r.relu = 1;
    one_case("fused relu", r, true);
    /* several channel blocks, on all threads (past the parallel threshold) */
    one_case("MobileNetV2-like 16x16x72 stride 1", desc(4, 16, 16, 72, 1, 3, 3, 1, 1, 1, 1, true), false);
    one_case("MobileNetV2-like 17x17x40 stride 2 valid", desc(4, 17, 17, 40, 1, 3, 3, 2, 2, 1, 1, false), false);
    one_case("multiplier 2, 37 channels", desc(3, 12, 12, 37, 2, 3, 3, 1, 1, 1, 1, true), true);
    /* the 3x3 fast path (cpu_depthwise3.c): whole vectors of channels (4, 8 or 16 floats) and a tail, every
     * stride and padding MobileNetV2 uses, images smaller than the window, the fused ReLU */
    one_case("fast 3x3 same, 32 channels", desc(2, 9, 8, 32, 1, 3, 3, 1, 1, 1, 1, true), true);
    one_case("fast 3x3 same, 16 + 4 + 3 channels", desc(2, 7, 9, 23, 1, 3, 3, 1, 1, 1, 1, true), true);
    one_case("fast 3x3 same, strides (2, 1)", desc(2, 9, 8, 32, 1, 3, 3, 2, 1, 1, 1, true), true);
    one_case("fast 3x3 valid, strides (1, 2), 2-pixel-wide output", desc(2, 7, 5, 32, 1, 3, 3, 1, 2, 1, 1, false), false);
    one_case("fast 3x3 same on 1x1 and 2x2 maps", desc(3, 1, 2, 48, 1, 3, 3, 1, 1, 1, 1, true), true);
    one_case("fast 3x3 stride 2 valid, 48 channels", desc(2, 11, 10, 48, 1, 3, 3, 2, 2, 1, 1, false), true);
    one_case("fast 3x3 stride 2 same, 16 channels", desc(3, 8, 7, 16, 1, 3, 3, 2, 2, 1, 1, true), true);
    one_case("fast 3x3 stride (1, 2) same, 8 channels", desc(2, 6, 9, 8, 1, 3, 3, 1, 2, 1, 1, true), false);
    one_case("fast 3x3 same on 2x1 images, 16 channels", desc(2, 2, 1, 16, 1, 3, 3, 1, 1, 1, 1, true), true);
    one_case("fast 3x3 valid on 3x3 images, 64 channels", desc(5, 3, 3, 64, 1, 3, 3, 1, 1, 1, 1, false), true);
    kc_conv2d_desc fr = desc(2, 10, 10, 32, 1, 3, 3, 1, 1, 1, 1, true);
    fr.relu = 1;
    one_case("fast 3x3 fused relu", fr, true);
    one_case("fast 3x3 on all threads, 24x24x96", desc(4, 24, 24, 96, 1, 3, 3, 1, 1, 1, 1, true), true);
}

/* every kernel set this processor runs (KERAC_CPU_ISA's choices), each against the reference */
static void test_against_reference(void **state) {
    (void)state;
    kc_backend *keep = B;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_device_opts o = {.cpu_isa = isa};
        assert_int_equal(kc_backend_cpu_create_ex(&o, &B), KC_STATUS_OK);
        assert_string_equal(kc_backend_cpu_isa(B), kc__cpu_isa_label(isa));
        cases();
        print_message("    %s kernels: every case matches the reference\n", kc__cpu_isa_label(isa));
        kc_backend_destroy(B);
    }
    B = keep;
}

static void test_errors(void **state) {
    (void)state;
    float v[64] = {0};
    kc_conv2d_desc d = desc(1, 4, 4, 3, 1, 3, 3, 1, 1, 1, 1, false);
    d.f = 4; /* not a multiple of c */
    assert_int_equal(B->depthwise_forward(B, &d, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "multiple"));
    d = desc(1, 4, 4, 3, 1, 3, 3, 1, 1, 1, 1, false);
    assert_int_equal(B->depthwise_backward_data(B, &d, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->depthwise_backward_filter(B, &d, v, v, NULL, NULL, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(B->depthwise_forward(B, NULL, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
    d.oh = 0;
    assert_int_equal(B->depthwise_forward(B, &d, v, v, NULL, v, NULL, 0), KC_STATUS_INVALID_ARGUMENT);
}

/* The layer: shapes, weights (Keras's (KH, KW, C, M) kernel), FLOPs, options and errors. */
static void test_layer(void **state) {
    (void)state;
    kc_shape in = kc__shape_make(3, (int[]){9, 8, 5});
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}, .padding = "same",
                                                          .depth_multiplier = 2),
                                      &l),
                     KC_STATUS_OK);
    l->n_in = 1, l->in_shape[0] = in;
    assert_int_equal(l->ops->build(l), KC_STATUS_OK);
    assert_int_equal(l->out_shape.rank, 3);
    assert_int_equal(l->out_shape.dim[0], 5);
    assert_int_equal(l->out_shape.dim[1], 4);
    assert_int_equal(l->out_shape.dim[2], 10);
    assert_int_equal(l->n_weights, 2);
    assert_string_equal(l->w[0].name, "kernel");
    assert_int_equal(l->w[0].shape.rank, 4);
    assert_int_equal(l->w[0].shape.dim[2], 5);
    assert_int_equal(l->w[0].shape.dim[3], 2);
    assert_int_equal(l->w[1].size, 10);
    assert_int_equal(l->ops->flops(l), 2 * 5 * 4 * 10 * 9);
    kc_depthwise_conv2d_opts o;
    l->ops->get_opts(l, &o);
    assert_int_equal(o.depth_multiplier, 2);
    assert_string_equal(o.padding, "same");
    assert_string_equal(o.depthwise_initializer, "glorot_uniform");
    kc__layer_destroy(l);

    l = NULL;
    assert_int_equal(kc__layer_create(KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .use_bias = KC_FALSE), &l),
                     KC_STATUS_OK);
    l->n_in = 1, l->in_shape[0] = kc__shape_make(3, (int[]){2, 2, 4});
    assert_int_equal(l->ops->build(l), KC_STATUS_SHAPE); /* smaller than the kernel */
    assert_non_null(strstr(kc_last_error(), "smaller than the kernel"));
    l->in_shape[0] = kc__shape_make(1, (int[]){4});
    assert_int_equal(l->ops->build(l), KC_STATUS_SHAPE);
    kc__layer_destroy(l);

    const kc_layer_spec *bad[] = {
        KC_DEPTHWISE_CONV2D(.strides = {1, 1}),
        KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .depth_multiplier = -1),
        KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}, .dilation_rate = {2, 2}),
        KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "causal"),
        KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .activation = "nope"),
        KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .depthwise_initializer = "nope"),
    };
    const char *words[] = {"kernel_size", "depth_multiplier", "dilation_rate", "causal", "nope", "nope"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        l = NULL;
        kc_status s = kc__layer_create(bad[i], &l);
        if (s == KC_STATUS_OK) fail_msg("case %zu accepted", i);
        assert_non_null(strstr(kc_last_error(), words[i]));
        assert_non_null(strstr(kc_last_error(), "DepthwiseConv2D"));
    }
}

/* Keras 3 refuses `groups` in a DepthwiseConv2D (tf-keras writes it; kerac reads it): the
 * Keras 2 flavour (kerac's .h5) must not write it, or Keras 3 cannot load kerac's .h5. */
static void test_json_no_groups(void **state) {
    (void)state;
    for (int flavour = 2; flavour <= 3; flavour++) {
        kc_model *m = NULL;
        assert_int_equal(kc_functional("dw", &m), KC_STATUS_OK);
        kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 3}));
        kc_node y = kc_apply(m, KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .depth_multiplier = 2), x);
        assert_int_equal(kc_set_output(m, y), KC_STATUS_OK);
        assert_int_equal(kc_model_build(m), KC_STATUS_OK);
        char *text = NULL;
        assert_int_equal(kc_model_to_json(m, flavour, &text), KC_STATUS_OK);
        assert_null(strstr(text, "\"groups\""));
        assert_non_null(strstr(text, "\"depth_multiplier\": 2"));
        assert_non_null(strstr(text, "\"depthwise_initializer\""));
        char *with = malloc(strlen(text) + 32); /* and tf-keras's groups: 1 is read */
        const char *at = strstr(text, "\"depth_multiplier\"");
        sprintf(with, "%.*s\"groups\": 1, %s", (int)(at - text), text, at);
        kc_model *back = NULL;
        if (kc_model_from_json(with, strlen(with), &back) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
        kc_model_destroy(back);
        free(with);
        free(text);
        kc_model_destroy(m);
    }
}

int main(void) {
    if (kc_backend_cpu_create(&B) != KC_STATUS_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_layer),
        cmocka_unit_test(test_json_no_groups),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(B);
    return r;
}
