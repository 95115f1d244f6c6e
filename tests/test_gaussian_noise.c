/* test_gaussian_noise.c — the Gaussian noise layers on the CPU backend: the backend's
 * random_normal (moments and tail fractions of a normal distribution, the series of
 * normal_draw.h against libm's log and cos, values that depend on (seed, index) only: the
 * same for any length and thread count); GaussianNoise (y - x has the stddev asked for,
 * dx = dy) and GaussianDropout (y / x has mean 1 and stddev sqrt(rate / (1 - rate)),
 * dx = dy * y / x); inference is the identity in a model; options out of Keras's range are
 * errors naming the layer and the option. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/normal_draw.h"
#include "kerac.h"
#include "layers/layer.h"
#include "model/model.h"

/* libgomp's, linked through libkerac; absent (NULL) in a build without OpenMP */
void omp_set_num_threads(int n) __attribute__((weak));

typedef struct moments {
    double mean, sd, skew, kurt, within1, within2;
} moments;

static moments moments_of(const float *v, int64_t n) {
    double s = 0, s2 = 0, s3 = 0, s4 = 0;
    int64_t w1 = 0, w2 = 0;
    for (int64_t i = 0; i < n; i++) s += v[i];
    const double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) {
        const double d = v[i] - mean;
        s2 += d * d, s3 += d * d * d, s4 += d * d * d * d;
    }
    const double var = s2 / (double)n, sd = sqrt(var);
    for (int64_t i = 0; i < n; i++) {
        w1 += fabs(v[i] - mean) < sd;
        w2 += fabs(v[i] - mean) < 2 * sd;
    }
    return (moments){mean, sd, s3 / (double)n / (var * sd), s4 / (double)n / (var * var), (double)w1 / (double)n,
                     (double)w2 / (double)n};
}

static void test_random_normal_distribution(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    const int64_t n = 1 << 20;
    float *z = malloc((size_t)n * sizeof(float));
    assert_non_null(z);
    assert_int_equal(be->random_normal(be, z, n, 0.0f, 1.0f, 5), KC_STATUS_OK);
    moments m = moments_of(z, n);
    /* standard errors at n = 2^20: mean 0.001, sd 0.0007, skew 0.0024, kurtosis 0.005 */
    assert_true(fabs(m.mean) < 0.005);
    assert_true(fabs(m.sd - 1.0) < 0.004);
    assert_true(fabs(m.skew) < 0.015);
    assert_true(fabs(m.kurt - 3.0) < 0.03);
    assert_true(fabs(m.within1 - 0.682689) < 0.003);
    assert_true(fabs(m.within2 - 0.954500) < 0.002);
    /* mean and stddev */
    assert_int_equal(be->random_normal(be, z, n, 2.0f, 0.25f, 6), KC_STATUS_OK);
    m = moments_of(z, n);
    assert_true(fabs(m.mean - 2.0) < 0.002);
    assert_true(fabs(m.sd - 0.25) < 0.002);
    /* errors */
    assert_int_equal(be->random_normal(be, z, 4, 0.0f, -1.0f, 1), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "stddev"));
    assert_int_equal(be->random_normal(be, z, -1, 0.0f, 1.0f, 1), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->random_normal(be, NULL, 4, 0.0f, 1.0f, 1), KC_STATUS_INVALID_ARGUMENT);
    free(z);
    kc_backend_destroy(be);
}

/* The branch-free series against Box-Muller computed in double with libm, on the same bits. */
static void test_series_against_libm(void **state) {
    (void)state;
    double worst = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        const uint64_t seed = 0x1234 + i / 50000, p = i >> 1;
        const double u1 = kc__nd_bits24(seed, 2 * p) / 16777216.0, u2 = kc__nd_bits24(seed, 2 * p + 1) / 16777216.0;
        const double r = sqrt(-2.0 * log(1.0 - u1)), t = 2.0 * M_PI * u2;
        const double want = (i & 1) ? r * sin(t) : r * cos(t);
        const double d = fabs((double)kc__normal_draw(seed, i) - want);
        if (d > worst) worst = d;
    }
    if (worst > 2e-6) fail_msg("normal draw vs libm: worst difference %g", worst);
    /* the extremes: u1 = 0 gives r = 0, u1 = 1 - 2^-24 the largest radius */
    assert_true(kc__nd_log_unit(16777216u) == 0.0f);
    assert_true(fabsf(kc__nd_log_unit(1u) + 16.6355323f) < 2e-6f);
    assert_true(fabsf(kc__nd_log_unit(16777215u) + 5.96046466e-8f) < 1e-13f); /* ln(1 - 2^-24) */
    assert_true(fabsf(kc__nd_cos_turns(-0.25f)) < 1e-6f);
    assert_true(fabsf(kc__nd_cos_turns(0.5f) + 1.0f) < 1e-6f);
}

/* Draw i depends on (seed, i) only: a prefix of a longer call, any thread count. */
static void test_random_normal_reproducible(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    const int64_t n = 300001, m = 1001;
    float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
    float *c = malloc((size_t)m * sizeof(float));
    assert_true(a && b && c);
    assert_int_equal(be->random_normal(be, a, n, 0.5f, 0.3f, 77), KC_STATUS_OK);
    assert_int_equal(be->random_normal(be, c, m, 0.5f, 0.3f, 77), KC_STATUS_OK);
    assert_memory_equal(a, c, (size_t)m * sizeof(float));
    if (omp_set_num_threads) omp_set_num_threads(1);
    assert_int_equal(be->random_normal(be, b, n, 0.5f, 0.3f, 77), KC_STATUS_OK);
    if (omp_set_num_threads) omp_set_num_threads(3);
    assert_memory_equal(a, b, (size_t)n * sizeof(float));
    assert_int_equal(be->random_normal(be, b, n, 0.5f, 0.3f, 77), KC_STATUS_OK);
    assert_memory_equal(a, b, (size_t)n * sizeof(float));
    assert_int_equal(be->random_normal(be, b, n, 0.5f, 0.3f, 78), KC_STATUS_OK);
    int64_t same = 0;
    for (int64_t i = 0; i < n; i++) same += a[i] == b[i];
    assert_true(same < n / 1000); /* another seed, other numbers */
    free(a);
    free(b);
    free(c);
    kc_backend_destroy(be);
}

typedef struct run {
    kc_backend *be;
    kc_layer *l;
    int64_t n;
    float *x, *y, *dy, *dx;
    void *aux;
} run;

static void run_layer(run *r, const kc_layer_spec *spec, int batch, int per_example, bool training, uint64_t seed) {
    memset(r, 0, sizeof *r);
    assert_int_equal(kc_backend_cpu_create(&r->be), KC_STATUS_OK);
    if (kc__layer_create(spec, &r->l) != KC_STATUS_OK) fail_msg("create: %s", kc_last_error());
    kc_layer *l = r->l;
    snprintf(l->name, sizeof l->name, "noise");
    l->n_in = 1;
    l->in_shape[0] = (kc_shape){1, {per_example}};
    if (l->ops->build(l) != KC_STATUS_OK) fail_msg("build: %s", kc_last_error());
    r->n = (int64_t)batch * per_example;
    r->x = calloc((size_t)r->n, sizeof(float));
    r->y = calloc((size_t)r->n, sizeof(float));
    r->dy = calloc((size_t)r->n, sizeof(float));
    r->dx = calloc((size_t)r->n, sizeof(float));
    assert_true(r->x && r->y && r->dy && r->dx);
    for (int64_t i = 0; i < r->n; i++) r->x[i] = 1.0f + (float)(i % 5) / 4.0f, r->dy[i] = 0.5f - (float)(i % 3);
    size_t aux = l->ops->aux_bytes ? l->ops->aux_bytes(l, batch) : 0;
    r->aux = aux ? malloc(aux) : NULL;
    kc_fwd a = {.be = r->be, .batch = batch, .training = training, .y = r->y, .aux = r->aux, .seed = seed};
    a.x[0] = r->x;
    if (l->ops->forward(l, &a) != KC_STATUS_OK) fail_msg("forward: %s", kc_last_error());
    if (!training) return;
    kc_bwd b = {.be = r->be, .batch = batch, .dy = r->dy, .aux = r->aux, .y = r->y};
    b.x[0] = r->x;
    b.dx[0] = r->dx;
    if (l->ops->backward(l, &b) != KC_STATUS_OK) fail_msg("backward: %s", kc_last_error());
}

static void free_run(run *r) {
    free(r->x), free(r->y), free(r->dy), free(r->dx), free(r->aux);
    kc__layer_destroy(r->l);
    kc_backend_destroy(r->be);
}

static void test_gaussian_noise_layer(void **state) {
    (void)state;
    run r;
    run_layer(&r, KC_GAUSSIAN_NOISE(.stddev = 0.4f), 64, 1000, true, 3);
    float *d = malloc((size_t)r.n * sizeof(float));
    assert_non_null(d);
    for (int64_t i = 0; i < r.n; i++) d[i] = r.y[i] - r.x[i];
    moments m = moments_of(d, r.n);
    assert_true(fabs(m.mean) < 0.004 && fabs(m.sd - 0.4) < 0.004);
    assert_memory_equal(r.dx, r.dy, (size_t)r.n * sizeof(float)); /* additive noise: dx = dy */
    float *first = malloc((size_t)r.n * sizeof(float));
    assert_non_null(first);
    memcpy(first, r.y, (size_t)r.n * sizeof(float));
    free_run(&r);
    run_layer(&r, KC_GAUSSIAN_NOISE(.stddev = 0.4f), 64, 1000, true, 3); /* same seed, same noise */
    assert_memory_equal(first, r.y, (size_t)r.n * sizeof(float));
    free_run(&r);
    run_layer(&r, KC_GAUSSIAN_NOISE(.stddev = 0.4f), 64, 1000, false, 3); /* inference: the identity */
    assert_memory_equal(r.x, r.y, (size_t)r.n * sizeof(float));
    free_run(&r);
    free(d);
    free(first);
}

static void test_gaussian_dropout_layer(void **state) {
    (void)state;
    run r;
    const float rate = 0.3f, sd = sqrtf(rate / (1 - rate));
    run_layer(&r, KC_GAUSSIAN_DROPOUT(.rate = rate), 50, 1200, true, 4);
    float *f = malloc((size_t)r.n * sizeof(float));
    assert_non_null(f);
    for (int64_t i = 0; i < r.n; i++) f[i] = r.y[i] / r.x[i];
    moments m = moments_of(f, r.n);
    assert_true(fabs(m.mean - 1.0) < 0.005 && fabs(m.sd - sd) < 0.005);
    for (int64_t i = 0; i < r.n; i++)
        if (fabsf(r.dx[i] - r.dy[i] * f[i]) > 1e-5f * (1 + fabsf(r.dx[i])))
            fail_msg("dx[%lld] = %g, want dy * factor = %g", (long long)i, (double)r.dx[i], (double)(r.dy[i] * f[i]));
    free_run(&r);
    run_layer(&r, KC_GAUSSIAN_DROPOUT(.rate = rate), 50, 1200, false, 4);
    assert_memory_equal(r.x, r.y, (size_t)r.n * sizeof(float));
    free_run(&r);
    free(f);
}

static void expect_error(const kc_layer_spec *spec, const char *want) {
    kc_layer *l = NULL;
    assert_int_equal(kc__layer_create(spec, &l), KC_STATUS_INVALID_ARGUMENT);
    if (!strstr(kc_last_error(), want)) fail_msg("error '%s' does not say '%s'", kc_last_error(), want);
}

static void test_options(void **state) {
    (void)state;
    expect_error(KC_GAUSSIAN_NOISE(.name = "gn", .stddev = 1.5f), "GaussianNoise 'gn': stddev must be in [0, 1]");
    expect_error(KC_GAUSSIAN_NOISE(.stddev = -0.1f), "stddev");
    expect_error(KC_GAUSSIAN_DROPOUT(.name = "gd", .rate = 1.0f), "GaussianDropout 'gd': rate must be in [0, 1)");
    expect_error(KC_GAUSSIAN_DROPOUT(.rate = -0.5f), "rate");
}

/* In a model: predictions are the input's (the identity in inference); the noise is drawn
 * in training (fit changes nothing about that), and the JSON round trip keeps the options. */
static void test_in_model(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("noisy", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {6}));
    kc_add(m, KC_GAUSSIAN_NOISE(.stddev = 0.5f, .seed = 12));
    kc_add(m, KC_GAUSSIAN_DROPOUT(.rate = 0.2f));
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    float x[12], y[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i - 5.5f;
    assert_int_equal(kc_predict(m, x, 2, 2, y), KC_STATUS_OK);
    assert_memory_equal(x, y, sizeof x);
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    assert_non_null(strstr(json, "\"class_name\": \"GaussianNoise\""));
    assert_non_null(strstr(json, "\"stddev\": 0.5"));
    assert_non_null(strstr(json, "\"seed\": 12"));
    assert_non_null(strstr(json, "\"rate\": 0.2"));
    kc_model *back = NULL;
    assert_int_equal(kc_model_from_json(json, strlen(json), &back), KC_STATUS_OK);
    assert_string_equal(kc__model_layer(back, 1)->ops->class_name, "GaussianNoise");
    assert_string_equal(kc__model_layer(back, 2)->ops->class_name, "GaussianDropout");
    kc_free(json);
    kc_model_destroy(back);
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_normal_distribution),
        cmocka_unit_test(test_series_against_libm),
        cmocka_unit_test(test_random_normal_reproducible),
        cmocka_unit_test(test_gaussian_noise_layer),
        cmocka_unit_test(test_gaussian_dropout_layer),
        cmocka_unit_test(test_options),
        cmocka_unit_test(test_in_model),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
