/* test_regularize.c — statistics of the regularising layers on the CPU backend:
 * SpatialDropout2D drops whole channels of each example (one draw per (example, channel)),
 * StochasticDepth whole examples, at about their rate, the kept values scaled by
 * 1 / (1 - rate); the mask follows the seed; inference is the identity. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "layers/layer.h"

typedef struct run {
    kc_backend *be;
    kc_layer *l;
    int batch;
    int64_t n;
    float *x, *y, *dy, *dx;
    void *aux;
} run;

/* x = 1 + (i mod 7) / 10: no zero inputs, so a zero output is a dropped value. */
static void setup_run(run *r, const kc_layer_spec *spec, kc_shape in, int batch) {
    memset(r, 0, sizeof *r);
    assert_int_equal(kc_backend_cpu_create(&r->be), KC_STATUS_OK);
    if (kc__layer_create(spec, &r->l) != KC_STATUS_OK) fail_msg("create: %s", kc_last_error());
    kc_layer *l = r->l;
    snprintf(l->name, sizeof l->name, "reg");
    l->n_in = 1;
    l->in_shape[0] = in;
    if (l->ops->build(l) != KC_STATUS_OK) fail_msg("build: %s", kc_last_error());
    r->batch = batch;
    r->n = (int64_t)batch * kc__shape_size(&in);
    r->x = calloc((size_t)r->n, sizeof(float));
    r->y = calloc((size_t)r->n, sizeof(float));
    r->dy = calloc((size_t)r->n, sizeof(float));
    r->dx = calloc((size_t)r->n, sizeof(float));
    assert_true(r->x && r->y && r->dy && r->dx);
    for (int64_t i = 0; i < r->n; i++) r->x[i] = 1.0f + (float)(i % 7) / 10.0f, r->dy[i] = 2.0f;
    size_t aux = l->ops->aux_bytes(l, batch);
    r->aux = aux ? kc__malloc_aligned(aux, "aux") : NULL;
}

static void teardown_run(run *r) {
    free(r->x);
    free(r->y);
    free(r->dy);
    free(r->dx);
    free(r->aux);
    kc__layer_destroy(r->l);
    kc_backend_destroy(r->be);
}

static void forward(run *r, bool training, uint64_t seed) {
    kc_fwd a = {.be = r->be, .batch = r->batch, .training = training, .y = r->y, .aux = r->aux, .seed = seed};
    a.x[0] = r->x;
    if (r->l->ops->forward(r->l, &a) != KC_STATUS_OK) fail_msg("forward: %s", kc_last_error());
}

static void backward(run *r) {
    kc_bwd a = {.be = r->be, .batch = r->batch, .dy = r->dy, .aux = r->aux};
    a.x[0] = r->x;
    a.y = r->y;
    a.dx[0] = r->dx;
    if (r->l->ops->backward(r->l, &a) != KC_STATUS_OK) fail_msg("backward: %s", kc_last_error());
}

/* Checks that each group of `s` positions sharing a draw (stride `stride` apart, groups at
 * `group_base(g)`) is all kept (y = x / (1 - rate), dx = dy / (1 - rate)) or all dropped;
 * returns the fraction dropped. View: (batch, s, c), a draw per (example, channel). */
static double check_groups(const run *r, int64_t s, int64_t c, float rate) {
    const float k = 1.0f / (1.0f - rate);
    int64_t dropped = 0, groups = (int64_t)r->batch * c;
    for (int64_t g = 0; g < groups; g++) {
        int64_t e = g / c, ch = g % c;
        int64_t first = e * s * c + ch;
        bool drop = r->y[first] == 0.0f;
        dropped += drop;
        for (int64_t p = 0; p < s; p++) {
            int64_t i = first + p * c;
            float want = drop ? 0.0f : r->x[i] * k, want_dx = drop ? 0.0f : 2.0f * k;
            if (fabsf(r->y[i] - want) > 1e-5f * fabsf(want) + 1e-7f)
                fail_msg("group %lld position %lld: y %g, want %g (the whole group %s)", (long long)g, (long long)p,
                         (double)r->y[i], (double)want, drop ? "dropped" : "kept");
            if (fabsf(r->dx[i] - want_dx) > 1e-5f * want_dx + 1e-7f)
                fail_msg("group %lld position %lld: dx %g, want %g", (long long)g, (long long)p, (double)r->dx[i],
                         (double)want_dx);
        }
    }
    return (double)dropped / (double)groups;
}

static void test_spatial_dropout_channels(void **state) {
    (void)state;
    const float rate = 0.3f;
    run r;
    setup_run(&r, KC_SPATIAL_DROPOUT2D(.rate = rate), (kc_shape){3, {4, 5, 16}}, 200); /* 3200 draws */
    forward(&r, true, 99);
    backward(&r);
    double frac = check_groups(&r, 20, 16, rate);
    /* binomial sd = sqrt(0.3 * 0.7 / 3200) = 0.0081: 5 sd */
    if (fabs(frac - rate) > 0.041) fail_msg("dropped fraction %g, want %g", frac, (double)rate);
    /* another seed gives another mask; the same seed the same one */
    float *y1 = malloc((size_t)r.n * sizeof(float));
    assert_non_null(y1);
    memcpy(y1, r.y, (size_t)r.n * sizeof(float));
    forward(&r, true, 99);
    assert_memory_equal(y1, r.y, (size_t)r.n * sizeof(float));
    forward(&r, true, 100);
    assert_true(memcmp(y1, r.y, (size_t)r.n * sizeof(float)) != 0);
    free(y1);
    /* inference: the identity */
    forward(&r, false, 99);
    assert_memory_equal(r.x, r.y, (size_t)r.n * sizeof(float));
    teardown_run(&r);
}

static void test_stochastic_depth_examples(void **state) {
    (void)state;
    const float rate = 0.25f;
    run r;
    setup_run(&r, KC_STOCHASTIC_DEPTH(.drop_path_rate = rate), (kc_shape){3, {3, 2, 4}}, 2000);
    forward(&r, true, 5);
    backward(&r);
    double frac = check_groups(&r, 24, 1, rate);
    /* binomial sd = sqrt(0.25 * 0.75 / 2000) = 0.0097: 5 sd */
    if (fabs(frac - rate) > 0.049) fail_msg("dropped fraction %g, want %g", frac, (double)rate);
    forward(&r, false, 5);
    assert_memory_equal(r.x, r.y, (size_t)r.n * sizeof(float));
    teardown_run(&r);
}

/* Dropout's noise_shape: (None, 1, 1, None) draws per (example, channel) as
 * SpatialDropout2D, (None, 1, 1, 1) per example as EfficientNet's blocks; sizes other than
 * None, 1 and the input's are refused at build. */
static void test_dropout_noise_shape(void **state) {
    (void)state;
    const float rate = 0.3f;
    run r;
    setup_run(&r, KC_DROPOUT(.rate = rate, .noise_shape = {4, {0, 1, 1, 0}}), (kc_shape){3, {4, 5, 16}}, 200);
    forward(&r, true, 11);
    backward(&r);
    double frac = check_groups(&r, 20, 16, rate);
    if (fabs(frac - rate) > 0.041) fail_msg("(None, 1, 1, None): dropped fraction %g, want %g", frac, (double)rate);
    forward(&r, false, 11);
    assert_memory_equal(r.x, r.y, (size_t)r.n * sizeof(float));
    teardown_run(&r);
    setup_run(&r, KC_DROPOUT(.rate = 0.25f, .noise_shape = {4, {0, 1, 1, 1}}), (kc_shape){3, {3, 2, 4}}, 2000);
    forward(&r, true, 12);
    backward(&r);
    frac = check_groups(&r, 24, 1, 0.25f);
    if (fabs(frac - 0.25) > 0.049) fail_msg("(None, 1, 1, 1): dropped fraction %g, want 0.25", frac);
    teardown_run(&r);
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_DROPOUT(.name = "d", .rate = 0.5f, .noise_shape = {4, {0, 2, 1, 1}}), &l),
                     KC_STATUS_OK);
    l->in_shape[0] = (kc_shape){3, {4, 5, 16}};
    l->n_in = 1;
    assert_int_equal(l->ops->build(l), KC_STATUS_SHAPE);
    assert_non_null(strstr(kc_last_error(), "noise_shape"));
    kc__layer_destroy(l);
}

static void test_bad_options(void **state) {
    (void)state;
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(KC_SPATIAL_DROPOUT2D(.name = "sd", .rate = 1.0f), &l),
                     KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "rate"));
    assert_int_equal(kc__layer_create(KC_STOCHASTIC_DEPTH(.drop_path_rate = -0.5f), &l), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "drop_path_rate"));
    /* SpatialDropout2D wants (H, W, C) examples */
    assert_int_equal(kc__layer_create(KC_SPATIAL_DROPOUT2D(.rate = 0.5f), &l), KC_STATUS_OK);
    l->n_in = 1;
    l->in_shape[0] = (kc_shape){1, {10}};
    assert_int_equal(l->ops->build(l), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "SpatialDropout2D"));
    kc__layer_destroy(l);
}

/* LayerScale's gamma starts at init_values (Keras: Constant(init_values)), one per channel;
 * projection_dim must be the input's last axis. */
static void test_layer_scale_init(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("ls", &m), KC_STATUS_OK);
    assert_int_equal(kc_add(m, KC_INPUT(.shape = {2, 3, 6})), KC_STATUS_OK);
    assert_int_equal(kc_add(m, KC_LAYER_SCALE(.name = "scale", .init_values = -0.375f, .projection_dim = 6)),
                     KC_STATUS_OK);
    if (kc_model_build(m) != KC_STATUS_OK) fail_msg("build: %s", kc_last_error());
    assert_int_equal(kc_model_num_weights(m), 1);
    kc_weight_info wi;
    assert_int_equal(kc_model_weight_info(m, 0, &wi), KC_STATUS_OK);
    assert_string_equal(wi.name, "gamma");
    assert_int_equal(wi.size, 6);
    assert_true(wi.trainable);
    float g[6];
    assert_int_equal(kc_model_get_weight(m, 0, g, 6), KC_STATUS_OK);
    for (int i = 0; i < 6; i++) assert_float_equal(g[i], -0.375f, 0.0f);
    kc_model_destroy(m);
    /* a projection_dim that is not the channels */
    assert_int_equal(kc_sequential("ls2", &m), KC_STATUS_OK);
    assert_int_equal(kc_add(m, KC_INPUT(.shape = {2, 3, 6})), KC_STATUS_OK);
    kc_add(m, KC_LAYER_SCALE(.name = "scale", .init_values = 1.0f, .projection_dim = 4));
    assert_int_not_equal(kc_model_build(m), KC_STATUS_OK);
    assert_non_null(strstr(kc_last_error(), "projection_dim is 4"));
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spatial_dropout_channels),
        cmocka_unit_test(test_stochastic_depth_examples),
        cmocka_unit_test(test_dropout_noise_shape),
        cmocka_unit_test(test_bad_options),
        cmocka_unit_test(test_layer_scale_init),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
