/* test_gradcheck_layers.c — finite-difference gradient checks of every layer kind on the
 * CPU backend, used directly (no model): kc__layer_create, build, host buffers, forward,
 * backward.
 *
 * Objective: L = sum(y * r) with a fixed random r, accumulated in double. The analytic
 * gradients come from backward with dy = r (a fresh copy each time: dy is scratch); the
 * numeric ones from central differences (L(v + eps) - L(v - eps)) / (2 eps) on sampled
 * entries of every input and every trainable weight.
 *
 * Bound: |analytic - numeric| <= rel * max(|analytic|, |numeric|) + abs, with rel = 2e-2
 * and abs = 2e-3 unless a case says otherwise (float32 forward, so the numeric side carries
 * about 1e-7 * sum|y * r| / eps of rounding noise; the sizes are kept small for that).
 *
 * Kinks (relu, leaky_relu, ReLU thresholds, max pooling) are kept away from: inputs of
 * elementwise layers are drawn at least `margin` from every kink, max-pool inputs are
 * distinct values 1e-2 apart (no ties, eps 1e-3 cannot change a window's argmax), and for
 * fused activations the pre-activation (forward with defer_act) is checked to stay at
 * least `margin` from 0 and the data is redrawn otherwise.
 *
 * InputLayer has no math to check (it has no forward). Flatten and Reshape are aliases:
 * like the model, the harness makes y the memory of x and dx the memory of dy, so their
 * check covers the alias contract and the sizes. */
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

#define MAX_SAMPLES 24

enum input_kind {
    IN_UNIFORM = 0, /* uniform in [-1, 1] */
    IN_DISTINCT,    /* shuffled distinct values 1e-2 apart (max pooling) */
    IN_AWAY,        /* uniform in [-2, 2], at least margin away from each kink */
};

typedef struct gc_case {
    const char *what;
    const kc_layer_spec *spec;
    int n_in;
    kc_shape in[KC_MAX_INPUTS];
    int batch;
    float eps;           /* 0: 1e-2 */
    float rel, abs;      /* 0: 2e-2, 2e-3 */
    bool training;
    uint64_t seed;
    enum input_kind input;
    int n_kinks;
    float kinks[2];
    float margin;        /* distance kept from kinks (0: 10 * eps) */
    bool fused_kink;     /* the layer's fused activation has a kink at 0 (relu, leaky_relu) */
    float range;         /* IN_AWAY draws from [-range, range] (0: 2) */
} gc_case;

typedef struct harness {
    kc_backend *be;
    kc_layer *l;
    int batch;
    bool alias;
    int64_t xn[KC_MAX_INPUTS], yn;
    float *x[KC_MAX_INPUTS]; /* (batch, in_shape[i]) */
    float *y;                /* (batch, out_shape) */
    float *r;                /* (batch, out_shape) fixed random weights of the objective */
    float *dy;               /* (batch, out_shape) scratch copy of r */
    float *dx[KC_MAX_INPUTS];
    void *aux, *ws;
    size_t ws_bytes;
    uint64_t seed;           /* dropout seed */
    bool training;
} harness;

static float *alloc_f(int64_t n) {
    float *p = kc__malloc_aligned((size_t)(n > 0 ? n : 1) * sizeof(float), "test buffer");
    assert_non_null(p);
    memset(p, 0, (size_t)(n > 0 ? n : 1) * sizeof(float));
    return p;
}

static float unif(kc_rng *g, float lo, float hi) { return lo + (hi - lo) * (float)kc__rng_uniform(g); }

static void fill_input(const gc_case *c, kc_rng *g, float *x, int64_t n) {
    float margin = c->margin > 0 ? c->margin : 10.0f * (c->eps > 0 ? c->eps : 1e-2f);
    switch (c->input) {
    case IN_UNIFORM:
        for (int64_t i = 0; i < n; i++) x[i] = unif(g, -1.0f, 1.0f);
        break;
    case IN_DISTINCT: {
        int64_t *perm = malloc((size_t)n * sizeof *perm);
        assert_non_null(perm);
        for (int64_t i = 0; i < n; i++) perm[i] = i;
        kc__shuffle_i64(g, perm, n);
        for (int64_t i = 0; i < n; i++) x[i] = (float)(perm[i] - n / 2) * 1e-2f;
        free(perm);
        break;
    }
    case IN_AWAY:
        for (int64_t i = 0; i < n; i++) {
            float v;
            bool ok;
            do {
                const float r = c->range > 0 ? c->range : 2.0f;
                v = unif(g, -r, r);
                ok = true;
                for (int k = 0; k < c->n_kinks; k++) ok = ok && fabsf(v - c->kinks[k]) >= margin;
            } while (!ok);
            x[i] = v;
        }
        break;
    }
}

static void fill_weights(kc_layer *l, kc_rng *g) {
    for (int k = 0; k < l->n_weights; k++) {
        kc_weight *w = &l->w[k];
        for (int64_t i = 0; i < w->size; i++) {
            if (strcmp(w->name, "gamma") == 0) w->data[i] = unif(g, 0.5f, 1.5f);
            else if (strcmp(w->name, "moving_mean") == 0) w->data[i] = 0.0f;
            else if (strcmp(w->name, "moving_variance") == 0) w->data[i] = 1.0f;
            else if (strcmp(w->name, "variance") == 0) w->data[i] = unif(g, 0.5f, 2.0f); /* Normalization */
            else w->data[i] = unif(g, -0.5f, 0.5f);
        }
    }
}

static void setup_harness(harness *h, const gc_case *c) {
    memset(h, 0, sizeof *h);
    assert_int_equal(kc_backend_cpu_create(&h->be), KC_STATUS_OK);
    kc_status s = kc__layer_create(c->spec, &h->l);
    if (s != KC_STATUS_OK) fail_msg("%s: create: %s", c->what, kc_last_error());
    kc_layer *l = h->l;
    snprintf(l->name, sizeof l->name, "gc");
    l->n_in = c->n_in;
    for (int i = 0; i < c->n_in; i++) l->in_shape[i] = c->in[i];
    s = l->ops->build(l);
    if (s != KC_STATUS_OK) fail_msg("%s: build: %s", c->what, kc_last_error());
    h->batch = c->batch;
    h->alias = (l->ops->flags & KC_LAYER_ALIAS) != 0;
    h->training = c->training;
    h->seed = c->seed ? c->seed : 7;
    for (int i = 0; i < c->n_in; i++) {
        h->xn[i] = (int64_t)c->batch * kc__shape_size(&c->in[i]);
        h->x[i] = alloc_f(h->xn[i]);
    }
    h->yn = (int64_t)c->batch * kc__shape_size(&l->out_shape);
    assert_true(!h->alias || h->yn == h->xn[0]);
    h->y = h->alias ? h->x[0] : alloc_f(h->yn);
    h->r = alloc_f(h->yn);
    h->dy = alloc_f(h->yn);
    for (int i = 0; i < c->n_in; i++) h->dx[i] = h->alias ? h->dy : alloc_f(h->xn[i]);
    for (int k = 0; k < l->n_weights; k++) {
        l->w[k].data = alloc_f(l->w[k].size);
        l->w[k].grad = l->w[k].trainable ? alloc_f(l->w[k].size) : NULL;
    }
    size_t aux = l->ops->aux_bytes ? l->ops->aux_bytes(l, c->batch) : 0;
    size_t ws = l->ops->workspace_bytes ? l->ops->workspace_bytes(l, c->batch, h->be) : 0;
    h->aux = aux ? kc__malloc_aligned(aux, "aux") : NULL;
    h->ws = ws ? kc__malloc_aligned(ws, "ws") : NULL;
    h->ws_bytes = ws;
    assert_true(!aux || h->aux);
    assert_true(!ws || h->ws);
}

static void teardown_harness(harness *h) {
    kc_layer *l = h->l;
    for (int k = 0; k < l->n_weights; k++) {
        free(l->w[k].data);
        free(l->w[k].grad);
    }
    for (int i = 0; i < l->n_in; i++) {
        if (!h->alias) free(h->dx[i]);
        free(h->x[i]);
    }
    if (!h->alias) free(h->y);
    free(h->r);
    free(h->dy);
    free(h->aux);
    free(h->ws);
    kc__layer_destroy(l);
    kc_backend_destroy(h->be);
}

static void forward(harness *h) {
    kc_fwd a = {.be = h->be, .batch = h->batch, .training = h->training, .y = h->y, .aux = h->aux, .ws = h->ws, .ws_bytes = h->ws_bytes,
                .seed = h->seed};
    for (int i = 0; i < h->l->n_in; i++) a.x[i] = h->x[i];
    kc_status s = h->l->ops->forward(h->l, &a);
    if (s != KC_STATUS_OK) fail_msg("forward: %s", kc_last_error());
}

static double objective(harness *h) {
    forward(h);
    double L = 0.0;
    for (int64_t i = 0; i < h->yn; i++) L += (double)h->y[i] * (double)h->r[i];
    return L;
}

static void backward(harness *h) {
    memcpy(h->dy, h->r, (size_t)h->yn * sizeof(float));
    kc_bwd a = {.be = h->be, .batch = h->batch, .y = h->y, .dy = h->dy, .aux = h->aux, .ws = h->ws, .ws_bytes = h->ws_bytes};
    for (int i = 0; i < h->l->n_in; i++) {
        a.x[i] = h->x[i];
        a.dx[i] = h->dx[i];
    }
    kc_status s = h->l->ops->backward(h->l, &a);
    if (s != KC_STATUS_OK) fail_msg("backward: %s", kc_last_error());
}

/* Smallest |pre-activation| of a layer with a fused activation (forward with defer_act). */
static float min_abs_preact(harness *h) {
    h->l->defer_act = true;
    forward(h);
    h->l->defer_act = false;
    float m = INFINITY;
    for (int64_t i = 0; i < h->yn; i++) m = fminf(m, fabsf(h->y[i]));
    return m;
}

/* Compare analytic gradient g (n entries of v) with central differences at sampled indices. */
static int check_tensor(harness *h, const gc_case *c, const char *tname, float *v, const float *g, int64_t n,
                        kc_rng *pick, double *worst) {
    float eps = c->eps > 0 ? c->eps : 1e-2f;
    double rel = c->rel > 0 ? c->rel : 2e-2, abs_ = c->abs > 0 ? c->abs : 2e-3;
    int bad = 0, samples = n < MAX_SAMPLES ? (int)n : MAX_SAMPLES;
    for (int s = 0; s < samples; s++) {
        int64_t i = n <= MAX_SAMPLES ? s : (int64_t)kc__rng_below(pick, (uint64_t)n);
        float keep = v[i];
        v[i] = keep + eps;
        double lp = objective(h);
        v[i] = keep - eps;
        double lm = objective(h);
        v[i] = keep;
        double num = (lp - lm) / (2.0 * (double)eps), ana = g[i];
        double err = fabs(num - ana), bound = rel * fmax(fabs(num), fabs(ana)) + abs_;
        if (err / bound > *worst) *worst = err / bound;
        if (err > bound) {
            if (bad < 5)
                print_error("%s: %s[%lld]: analytic %.6g numeric %.6g (error %.3g > bound %.3g)\n", c->what, tname,
                            (long long)i, ana, num, err, bound);
            bad++;
        }
    }
    return bad;
}

static void run_case(void **state) {
    const gc_case *c = *state;
    harness h;
    setup_harness(&h, c);
    kc_layer *l = h.l;
    kc_rng g;
    kc__rng_seed(&g, 1234);
    float eps = c->eps > 0 ? c->eps : 1e-2f;
    float margin = c->margin > 0 ? c->margin : 10.0f * eps;
    int tries = 0;
    for (;;) {
        for (int i = 0; i < l->n_in; i++) fill_input(c, &g, h.x[i], h.xn[i]);
        fill_weights(l, &g);
        if (!c->fused_kink || min_abs_preact(&h) >= margin) break;
        if (++tries > 200) fail_msg("%s: could not draw data away from the activation's kink", c->what);
    }
    for (int64_t i = 0; i < h.yn; i++) h.r[i] = unif(&g, -1.0f, 1.0f);

    /* analytic: copy dx and weight gradients out before the numeric passes reuse buffers. A
     * backward follows a training forward (layers keep state for it only then: masks,
     * pre-activations); the cases not marked training give the same outputs in both modes. */
    bool mode = h.training;
    h.training = true;
    objective(&h);
    backward(&h);
    h.training = mode;
    float *gx[KC_MAX_INPUTS] = {0}, *gw[KC_MAX_WEIGHTS] = {0};
    for (int i = 0; i < l->n_in; i++) {
        gx[i] = alloc_f(h.xn[i]);
        memcpy(gx[i], h.dx[i], (size_t)h.xn[i] * sizeof(float));
    }
    for (int k = 0; k < l->n_weights; k++) {
        if (!l->w[k].trainable) continue;
        gw[k] = alloc_f(l->w[k].size);
        memcpy(gw[k], l->w[k].grad, (size_t)l->w[k].size * sizeof(float));
    }

    kc_rng pick;
    kc__rng_seed(&pick, 99);
    int bad = 0, checked = 0;
    double worst = 0.0;
    for (int i = 0; i < l->n_in; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "x%d", i);
        bad += check_tensor(&h, c, nm, h.x[i], gx[i], h.xn[i], &pick, &worst);
        checked++;
    }
    for (int k = 0; k < l->n_weights; k++) {
        if (!l->w[k].trainable) continue;
        bad += check_tensor(&h, c, l->w[k].name, l->w[k].data, gw[k], l->w[k].size, &pick, &worst);
        checked++;
    }
    for (int i = 0; i < l->n_in; i++) free(gx[i]);
    for (int k = 0; k < l->n_weights; k++) free(gw[k]);
    teardown_harness(&h);
    if (getenv("KC_GC_VERBOSE")) printf("    %-40s worst error/bound %.3f\n", c->what, worst);
    if (bad) fail_msg("%s: %d gradient entries out of bounds (worst error/bound %.3g)", c->what, bad, worst);
    assert_true(checked >= 1);
}

/* ---------------------------------------------------------------- the cases */

#define S1(a) {1, {a}}
#define S2(a, b) {2, {a, b}}
#define S3(a, b, c) {3, {a, b, c}}

#define ACT_CASES(LAYER, MAKE, shape, bt)                                                                      \
    {LAYER " linear", MAKE("linear"), 1, {shape}, bt},                                                         \
    {LAYER " relu", MAKE("relu"), 1, {shape}, bt, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f},          \
    {LAYER " sigmoid", MAKE("sigmoid"), 1, {shape}, bt},                                                       \
    {LAYER " tanh", MAKE("tanh"), 1, {shape}, bt},                                                             \
    {LAYER " softmax", MAKE("softmax"), 1, {shape}, bt},                                                       \
    {LAYER " elu", MAKE("elu"), 1, {shape}, bt, .fused_kink = true, .margin = 5e-2f},                           \
    {LAYER " gelu", MAKE("gelu"), 1, {shape}, bt},                                                             \
    {LAYER " leaky_relu", MAKE("leaky_relu"), 1, {shape}, bt, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f}, \
    {LAYER " silu", MAKE("silu"), 1, {shape}, bt}

#define EW_ACT_CASES(LAYER, MAKE, shape, bt)                                                                   \
    {LAYER " hard_silu", MAKE("hard_silu"), 1, {shape}, bt},                                                   \
    {LAYER " hard_sigmoid", MAKE("hard_sigmoid"), 1, {shape}, bt},                                             \
    {LAYER " softplus", MAKE("softplus"), 1, {shape}, bt},                                                     \
    {LAYER " softsign", MAKE("softsign"), 1, {shape}, bt, .fused_kink = true, .margin = 5e-2f},                 \
    {LAYER " selu", MAKE("selu"), 1, {shape}, bt, .fused_kink = true, .margin = 5e-2f},                         \
    {LAYER " mish", MAKE("mish"), 1, {shape}, bt},                                                             \
    {LAYER " exponential", MAKE("exponential"), 1, {shape}, bt},                                               \
    {LAYER " log_softmax", MAKE("log_softmax"), 1, {shape}, bt},                                               \
    {LAYER " relu6", MAKE("relu6"), 1, {shape}, bt, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f}

#define DENSE_ACT(a) KC_DENSE(.units = 5, .activation = a)
#define CONV_ACT(a) KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .activation = a)
#define DW_ACT(a) KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .activation = a)
#define ACTL(a) KC_ACTIVATION(.activation = a)

static const gc_case k_cases[] = {
    /* Dense: every fused activation, no bias, rank-3 input (applied to the last axis) */
    ACT_CASES("Dense", DENSE_ACT, S1(6), 3),
    {"Dense no bias", KC_DENSE(.units = 4, .use_bias = KC_FALSE), 1, {S1(7)}, 3},
    {"Dense rank-3 input", KC_DENSE(.units = 5), 1, {S3(2, 3, 4)}, 2},
    {"Dense rank-2 input gelu", KC_DENSE(.units = 3, .activation = "gelu"), 1, {S2(3, 4)}, 2},

    /* Conv2D: every fused activation, then strides, dilation, same padding, no bias */
    ACT_CASES("Conv2D", CONV_ACT, S3(5, 5, 2), 2),
    {"Conv2D stride 2", KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .strides = {2, 2}), 1, {S3(7, 7, 2)}, 2},
    {"Conv2D stride (2, 1) rect kernel", KC_CONV2D(.filters = 2, .kernel_size = {3, 2}, .strides = {2, 1}), 1,
     {S3(6, 5, 2)}, 2},
    {"Conv2D dilation 2", KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .dilation_rate = {2, 2}), 1,
     {S3(7, 7, 2)}, 2},
    {"Conv2D same even kernel", KC_CONV2D(.filters = 3, .kernel_size = {2, 2}, .padding = "same"), 1,
     {S3(5, 5, 2)}, 2},
    {"Conv2D same 4x4 stride 2", KC_CONV2D(.filters = 2, .kernel_size = {4, 4}, .strides = {2, 2},
                                          .padding = "same"), 1, {S3(7, 6, 2)}, 2},
    {"Conv2D same dilation 2", KC_CONV2D(.filters = 2, .kernel_size = {3, 3}, .dilation_rate = {2, 2},
                                        .padding = "same"), 1, {S3(5, 5, 2)}, 2},
    {"Conv2D no bias", KC_CONV2D(.filters = 3, .kernel_size = {3, 3}, .use_bias = KC_FALSE), 1, {S3(5, 5, 2)}, 2},

    /* DepthwiseConv2D: every fused activation, then each option */
    ACT_CASES("DepthwiseConv2D", DW_ACT, S3(5, 5, 3), 2),
    {"DepthwiseConv2D multiplier 3", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .depth_multiplier = 3), 1,
     {S3(5, 4, 2)}, 2},
    {"DepthwiseConv2D stride 2", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .strides = {2, 2}), 1, {S3(7, 7, 3)}, 2},
    {"DepthwiseConv2D stride (2, 1) rect kernel multiplier 2",
     KC_DEPTHWISE_CONV2D(.kernel_size = {3, 2}, .strides = {2, 1}, .depth_multiplier = 2), 1, {S3(6, 5, 2)}, 2},
    {"DepthwiseConv2D dilation 2", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .dilation_rate = {2, 2}), 1,
     {S3(7, 7, 2)}, 2},
    {"DepthwiseConv2D same", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same"), 1, {S3(5, 5, 3)}, 2},
    {"DepthwiseConv2D same even kernel stride 2",
     KC_DEPTHWISE_CONV2D(.kernel_size = {2, 2}, .strides = {2, 2}, .padding = "same"), 1, {S3(5, 6, 2)}, 2},
    {"DepthwiseConv2D same dilation 2 multiplier 2",
     KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .dilation_rate = {2, 2}, .padding = "same", .depth_multiplier = 2),
     1, {S3(5, 5, 2)}, 2},
    {"DepthwiseConv2D no bias", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .use_bias = KC_FALSE), 1,
     {S3(5, 5, 3)}, 2},
    {"DepthwiseConv2D 40 channels (blocks)", KC_DEPTHWISE_CONV2D(.kernel_size = {3, 3}, .padding = "same"), 1,
     {S3(3, 3, 40)}, 2},

    /* convolutions: Conv2D groups, SeparableConv2D, Conv2DTranspose, each option */
    {"Conv2D groups 2", KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .groups = 2), 1, {S3(5, 5, 4)}, 2},
    {"Conv2D groups 3 same stride 2 relu", KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .groups = 3,
                                                     .strides = {2, 2}, .padding = "same", .activation = "relu"),
     1, {S3(6, 5, 3)}, 2, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f},
    {"Conv2D groups 2 dilation 2 no bias", KC_CONV2D(.filters = 2, .kernel_size = {3, 3}, .groups = 2,
                                                     .dilation_rate = {2, 2}, .use_bias = KC_FALSE),
     1, {S3(6, 6, 4)}, 2},
    {"Conv2D groups = channels 7x7 same (ConvNeXt)", KC_CONV2D(.filters = 3, .kernel_size = {7, 7}, .groups = 3,
                                                               .padding = "same"),
     1, {S3(5, 5, 3)}, 2},
    {"Conv2D groups = channels, 2 filters each, gelu", KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .groups = 2,
                                                                 .activation = "gelu"),
     1, {S3(4, 4, 2)}, 2},
    {"SeparableConv2D", KC_SEPARABLE_CONV2D(.filters = 3, .kernel_size = {3, 3}), 1, {S3(5, 5, 2)}, 2},
    {"SeparableConv2D relu same", KC_SEPARABLE_CONV2D(.filters = 3, .kernel_size = {3, 3}, .padding = "same",
                                                      .activation = "relu"),
     1, {S3(4, 4, 2)}, 2, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f},
    {"SeparableConv2D multiplier 2 stride 2 no bias",
     KC_SEPARABLE_CONV2D(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 2}, .depth_multiplier = 2,
                         .use_bias = KC_FALSE),
     1, {S3(7, 6, 2)}, 2},
    {"SeparableConv2D dilation 2 same swish",
     KC_SEPARABLE_CONV2D(.filters = 2, .kernel_size = {3, 2}, .dilation_rate = {2, 2}, .padding = "same",
                         .activation = "silu"),
     1, {S3(5, 5, 3)}, 2},
    {"Conv2DTranspose 3x3 stride 2 same", KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3},
                                                              .strides = {2, 2}, .padding = "same"),
     1, {S3(3, 4, 3)}, 2},
    {"Conv2DTranspose 2x2 stride 2 valid relu", KC_CONV2D_TRANSPOSE(.filters = 3, .kernel_size = {2, 2},
                                                                    .strides = {2, 2}, .activation = "relu"),
     1, {S3(3, 3, 2)}, 2, .eps = 1e-3f, .fused_kink = true, .margin = 2e-2f},
    {"Conv2DTranspose output_padding (1, 0) stride (2, 3) no bias",
     KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3}, .strides = {2, 3}, .output_padding = {1, {1, 0}},
                         .use_bias = KC_FALSE),
     1, {S3(3, 3, 2)}, 2},
    {"Conv2DTranspose 4x4 stride 2 same output_padding 1 tanh",
     KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {4, 4}, .strides = {2, 2}, .padding = "same",
                         .output_padding = {1, {1, 1}}, .activation = "tanh"),
     1, {S3(3, 3, 2)}, 2},
    {"Conv2DTranspose dilation 2 same", KC_CONV2D_TRANSPOSE(.filters = 2, .kernel_size = {3, 3},
                                                            .dilation_rate = {2, 2}, .padding = "same"),
     1, {S3(4, 4, 2)}, 2},

    /* pooling */
    {"MaxPooling2D 2x2", KC_MAXPOOL2D(), 1, {S3(6, 6, 3)}, 2, .eps = 1e-3f, .input = IN_DISTINCT},
    {"MaxPooling2D same 3x3 stride 2", KC_MAXPOOL2D(.pool_size = {3, 3}, .strides = {2, 2}, .padding = "same"), 1,
     {S3(5, 5, 2)}, 2, .eps = 1e-3f, .input = IN_DISTINCT},
    {"MaxPooling2D same 2x2 odd input", KC_MAXPOOL2D(.padding = "same"), 1, {S3(5, 5, 2)}, 2, .eps = 1e-3f,
     .input = IN_DISTINCT},
    {"MaxPooling2D overlapping 3x3 stride 1", KC_MAXPOOL2D(.pool_size = {3, 3}, .strides = {1, 1}), 1,
     {S3(5, 4, 2)}, 2, .eps = 1e-3f, .input = IN_DISTINCT},
    {"AveragePooling2D 2x2", KC_AVGPOOL2D(), 1, {S3(6, 6, 3)}, 2},
    {"AveragePooling2D same 3x3 stride 2", KC_AVGPOOL2D(.pool_size = {3, 3}, .strides = {2, 2}, .padding = "same"),
     1, {S3(5, 5, 2)}, 2},
    {"AveragePooling2D same 2x2 odd input", KC_AVGPOOL2D(.padding = "same"), 1, {S3(5, 5, 2)}, 2},
    {"GlobalAveragePooling2D", KC_GLOBALAVGPOOL2D(), 1, {S3(4, 3, 5)}, 2},
    {"GlobalAveragePooling2D keepdims", KC_GLOBALAVGPOOL2D(.keepdims = KC_TRUE), 1, {S3(4, 3, 5)}, 2},

    /* aliases */
    {"Flatten", KC_FLATTEN(), 1, {S3(3, 2, 4)}, 2},
    {"Reshape", KC_RESHAPE(.target_shape = {4, -1}), 1, {S3(3, 2, 4)}, 2},

    /* dropout: training with a fixed seed (the mask is the same in every evaluation) */
    {"Dropout training", KC_DROPOUT(.rate = 0.3f), 1, {S2(5, 6)}, 3, .training = true, .seed = 42},
    {"Dropout rate 0", KC_DROPOUT(), 1, {S1(10)}, 3, .training = true, .seed = 42},

    /* batch norm in training mode: every objective evaluation recomputes batch statistics */
    {"BatchNormalization", KC_BATCHNORM(), 1, {S3(3, 3, 4)}, 3, .training = true},
    {"BatchNormalization dense", KC_BATCHNORM(), 1, {S1(5)}, 8, .training = true},
    {"BatchNormalization no center", KC_BATCHNORM(.center = KC_FALSE), 1, {S3(2, 3, 3)}, 3, .training = true},
    {"BatchNormalization no scale", KC_BATCHNORM(.scale = KC_FALSE), 1, {S3(2, 3, 3)}, 3, .training = true},
    {"BatchNormalization no center no scale", KC_BATCHNORM(.center = KC_FALSE, .scale = KC_FALSE), 1,
     {S3(2, 3, 3)}, 3, .training = true},

    /* Activation layer: every activation, inputs away from 0 */
    {"Activation linear", ACTL("linear"), 1, {S2(3, 4)}, 2},
    {"Activation relu", ACTL("relu"), 1, {S2(3, 4)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    {"Activation sigmoid", ACTL("sigmoid"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation tanh", ACTL("tanh"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation softmax", ACTL("softmax"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation elu", ACTL("elu"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"Activation gelu", ACTL("gelu"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation leaky_relu", ACTL("leaky_relu"), 1, {S2(3, 4)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    {"Activation silu", ACTL("silu"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation swish (alias)", ACTL("swish"), 1, {S1(6)}, 2, .input = IN_AWAY},

    /* ReLU layer: plain, and with max_value, negative_slope and threshold */
    {"ReLU", KC_RELU(), 1, {S3(2, 2, 3)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    {"ReLU general", KC_RELU(.max_value = 1.0f, .negative_slope = 0.1f, .threshold = 0.5f), 1, {S3(2, 2, 3)}, 2,
     .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 2, .kinks = {0.5f, 1.0f}},
    {"ReLU max_value", KC_RELU(.max_value = 0.6f), 1, {S1(12)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 2,
     .kinks = {0.0f, 0.6f}},

    {"Softmax", KC_SOFTMAX(), 1, {S2(2, 5)}, 3},

    {"ZeroPadding2D asymmetric", KC_ZEROPAD2D(.padding = {{1, 2}, {0, 3}}), 1, {S3(3, 2, 2)}, 2},
    {"ZeroPadding2D default", KC_ZEROPAD2D(), 1, {S3(2, 3, 2)}, 2},

    {"Add 2 inputs", KC_ADD(), 2, {S3(2, 2, 3), S3(2, 2, 3)}, 2},
    {"Add 3 inputs", KC_ADD(), 3, {S2(3, 4), S2(3, 4), S2(3, 4)}, 2},
    {"Concatenate 2 inputs", KC_CONCATENATE(), 2, {S3(2, 2, 3), S3(2, 2, 1)}, 2},
    {"Concatenate 3 rank-1 inputs", KC_CONCATENATE(), 3, {S1(2), S1(5), S1(3)}, 3},

    /* normalisation and resampling: normalisation, scaling, resampling and shape */
    {"Rescaling scalar", KC_RESCALING(.scale = {1, 0, {0.5f}}, .offset = {1, 0, {-1.0f}}), 1, {S3(2, 3, 2)}, 2},
    {"Rescaling per channel", KC_RESCALING(.scale = {3, 1, {2.0f, -0.5f, 1.5f}}, .offset = {3, 1, {1, 2, 3}}), 1,
     {S3(2, 2, 3)}, 2},
    {"Normalization config", KC_NORMALIZATION(.mean = {2, 1, {0.5f, -1.0f}}, .variance = {2, 1, {4.0f, 0.5f}}), 1,
     {S3(2, 3, 2)}, 2},
    {"Normalization invert", KC_NORMALIZATION(.mean = {1, 0, {0.5f}}, .variance = {1, 0, {2.0f}},
                                              .invert = KC_TRUE), 1, {S2(3, 4)}, 2},
    {"Normalization weights", KC_NORMALIZATION(), 1, {S3(2, 2, 3)}, 2},
    {"Normalization weights axis None", KC_NORMALIZATION(.axis = {.none = 1}), 1, {S2(2, 3)}, 2},
    {"LayerNormalization", KC_LAYERNORM(), 1, {S3(2, 3, 5)}, 2, .training = true},
    {"LayerNormalization dense", KC_LAYERNORM(.epsilon = 0.1f), 1, {S1(6)}, 3, .training = true},
    {"LayerNormalization axes (2, 3)", KC_LAYERNORM(.axis = {2, 1, 0, {2, 3}}), 1, {S3(2, 3, 4)}, 2,
     .training = true},
    {"LayerNormalization no center", KC_LAYERNORM(.center = KC_FALSE), 1, {S2(3, 4)}, 2, .training = true},
    {"LayerNormalization no scale", KC_LAYERNORM(.scale = KC_FALSE), 1, {S2(3, 4)}, 2, .training = true},
    {"GroupNormalization 2 groups", KC_GROUPNORM(.groups = 2), 1, {S3(2, 3, 4)}, 2, .training = true},
    {"GroupNormalization groups -1", KC_GROUPNORM(.groups = -1, .epsilon = 0.01f), 1, {S3(3, 2, 3)}, 2,
     .training = true},
    {"GroupNormalization one group no center", KC_GROUPNORM(.groups = 1, .center = KC_FALSE), 1, {S3(2, 2, 4)}, 2,
     .training = true},
    {"GroupNormalization no scale", KC_GROUPNORM(.groups = 2, .scale = KC_FALSE), 1, {S3(2, 2, 4)}, 2,
     .training = true},
    {"UpSampling2D nearest", KC_UPSAMPLING2D(), 1, {S3(2, 3, 2)}, 2},
    {"UpSampling2D nearest (3, 2)", KC_UPSAMPLING2D(.size = {3, 2}), 1, {S3(2, 2, 3)}, 2},
    {"UpSampling2D bilinear", KC_UPSAMPLING2D(.interpolation = "bilinear"), 1, {S3(3, 3, 2)}, 2},
    {"UpSampling2D bilinear (3, 2)", KC_UPSAMPLING2D(.size = {3, 2}, .interpolation = "bilinear"), 1,
     {S3(2, 3, 2)}, 2},
    {"Cropping2D", KC_CROPPING2D(.cropping = {{1, 0}, {2, 1}}), 1, {S3(4, 5, 2)}, 2},
    {"Cropping2D none", KC_CROPPING2D(), 1, {S3(2, 3, 2)}, 2},
    {"GlobalMaxPooling2D", KC_GLOBALMAXPOOL2D(), 1, {S3(3, 4, 3)}, 2, .eps = 1e-3f, .input = IN_DISTINCT},
    {"GlobalMaxPooling2D keepdims", KC_GLOBALMAXPOOL2D(.keepdims = KC_TRUE), 1, {S3(2, 3, 2)}, 2, .eps = 1e-3f,
     .input = IN_DISTINCT, .training = true},
    {"Permute (2, 1, 3)", KC_PERMUTE(.dims = {2, 1, 3}), 1, {S3(2, 3, 4)}, 2},
    {"Permute (3, 1, 2)", KC_PERMUTE(.dims = {3, 1, 2}), 1, {S3(2, 3, 4)}, 2},
    {"Permute (2, 1)", KC_PERMUTE(.dims = {2, 1}), 1, {S2(3, 5)}, 2},
    {"RepeatVector", KC_REPEAT_VECTOR(.n = 3), 1, {S1(4)}, 2},
    {"RepeatVector 1", KC_REPEAT_VECTOR(.n = 1), 1, {S1(4)}, 2},
    {"Dense rank-4 input (N, H, W, C)", KC_DENSE(.units = 3), 1, {{4, {2, 2, 2, 3}}}, 2},
    /* broadcasting and activations: Keras 3's other activations, fused and as layers */
    EW_ACT_CASES("Dense", DENSE_ACT, S1(6), 3),
    EW_ACT_CASES("Conv2D", CONV_ACT, S3(4, 4, 2), 2),
    {"Activation relu6", ACTL("relu6"), 1, {S2(3, 4)}, 2, .eps = 1e-3f, .input = IN_AWAY, .range = 8.0f,
     .n_kinks = 2, .kinks = {0.0f, 6.0f}},
    {"Activation hard_sigmoid", ACTL("hard_sigmoid"), 1, {S2(3, 8)}, 2, .eps = 1e-3f, .input = IN_AWAY,
     .range = 5.0f, .n_kinks = 2, .kinks = {-3.0f, 3.0f}},
    {"Activation hard_sigmoid_k2 (tf-keras)", ACTL("hard_sigmoid_k2"), 1, {S2(3, 8)}, 2, .eps = 1e-3f,
     .input = IN_AWAY, .range = 5.0f, .n_kinks = 2, .kinks = {-2.5f, 2.5f}},
    {"Activation hard_silu", ACTL("hard_silu"), 1, {S2(3, 8)}, 2, .eps = 1e-3f, .input = IN_AWAY, .range = 5.0f,
     .n_kinks = 2, .kinks = {-3.0f, 3.0f}},
    {"Activation hard_swish (alias)", ACTL("hard_swish"), 1, {S1(8)}, 2, .eps = 1e-3f, .input = IN_AWAY,
     .range = 5.0f, .n_kinks = 2, .kinks = {-3.0f, 3.0f}},
    {"Activation softplus", ACTL("softplus"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .range = 6.0f},
    {"Activation softsign", ACTL("softsign"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"Activation selu", ACTL("selu"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"Activation mish", ACTL("mish"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .range = 4.0f},
    {"Activation exponential", ACTL("exponential"), 1, {S2(3, 4)}, 2, .input = IN_AWAY},
    {"Activation log_softmax", ACTL("log_softmax"), 1, {S2(3, 5)}, 2, .input = IN_AWAY},
    {"Activation gelu_approximate", ACTL("gelu_approximate"), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .range = 4.0f},
    {"LeakyReLU default", KC_LEAKY_RELU(), 1, {S3(2, 2, 3)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    {"LeakyReLU 0.05", KC_LEAKY_RELU(.negative_slope = 0.05f), 1, {S1(8)}, 2, .eps = 1e-3f, .input = IN_AWAY,
     .n_kinks = 1},
    {"ELU default", KC_ELU(), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"ELU alpha 0.7", KC_ELU(.alpha = 0.7f), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"ELU alpha -0.5", KC_ELU(.alpha = -0.5f), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"LeakyReLU explicit 0", KC_LEAKY_RELU(.negative_slope_given = 1), 1, {S1(8)}, 2, .eps = 1e-3f,
     .input = IN_AWAY, .n_kinks = 1},
    {"ELU explicit alpha 0", KC_ELU(.alpha_given = 1), 1, {S2(3, 4)}, 2, .input = IN_AWAY, .n_kinks = 1},
    {"PReLU", KC_PRELU(), 1, {S3(2, 3, 4)}, 2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    {"PReLU shared_axes (1, 2)", KC_PRELU(.shared_axes = {.n = 2, .list = 1, .v = {1, 2}}), 1, {S3(3, 2, 4)}, 2, .eps = 1e-3f,
     .input = IN_AWAY, .n_kinks = 1},
    {"PReLU shared_axes 3", KC_PRELU(.shared_axes = {.n = 1, .list = 1, .v = {3}}, .alpha_initializer = "ones"), 1, {S3(2, 2, 3)}, 2,
     .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1},
    /* merges with Keras's broadcasting */
    {"Add broadcast (N,1,1,C) + (N,H,W,C)", KC_ADD(), 2, {S3(1, 1, 3), S3(2, 3, 3)}, 2},
    {"Add broadcast rank 1 + rank 3, 3 inputs", KC_ADD(), 3, {S1(3), S3(2, 2, 3), S3(2, 2, 1)}, 2},
    {"Multiply same shapes", KC_MULTIPLY(), 2, {S2(3, 4), S2(3, 4)}, 2},
    {"Multiply squeeze-excite", KC_MULTIPLY(), 2, {S3(3, 2, 4), S3(1, 1, 4)}, 2},
    {"Multiply 3 inputs broadcast", KC_MULTIPLY(), 3, {S3(2, 3, 1), S3(2, 3, 4), S3(1, 3, 4)}, 2},
    {"Subtract", KC_SUBTRACT(), 2, {S2(3, 4), S2(3, 4)}, 2},
    {"Subtract broadcast", KC_SUBTRACT(), 2, {S3(2, 1, 3), S3(2, 4, 1)}, 2},
    {"Average 3 inputs broadcast", KC_AVERAGE(), 3, {S3(2, 2, 3), S3(1, 1, 3), S1(3)}, 2},
    {"Maximum", KC_MAXIMUM(), 2, {S2(3, 4), S2(3, 4)}, 2, .eps = 1e-3f},
    {"Maximum 3 inputs broadcast", KC_MAXIMUM(), 3, {S3(2, 2, 3), S3(1, 1, 3), S3(2, 2, 1)}, 2, .eps = 1e-3f},
    {"Minimum broadcast", KC_MINIMUM(), 2, {S3(2, 3, 1), S3(2, 3, 4)}, 2, .eps = 1e-3f},
    /* Keras 3 operation nodes */
    {"TensorOp x + 3", KC_TENSOR_OP(.op = "add", .scalar_side = 1, .scalar = 3.0f), 1, {S2(3, 4)}, 2},
    {"TensorOp 2 - x", KC_TENSOR_OP(.op = "subtract", .scalar_side = 2, .scalar = 2.0f), 1, {S2(3, 4)}, 2},
    {"TensorOp x - 0.5", KC_TENSOR_OP(.op = "subtract", .scalar_side = 1, .scalar = 0.5f), 1, {S2(3, 4)}, 2},
    {"TensorOp x * (1/6)", KC_TENSOR_OP(.op = "multiply", .scalar_side = 1, .scalar = 1.0f / 6.0f), 1, {S2(3, 4)}, 2},
    {"TensorOp x / 4", KC_TENSOR_OP(.op = "true_divide", .scalar_side = 1, .scalar = 4.0f), 1, {S2(3, 4)}, 2},
    {"TensorOp 1 / x", KC_TENSOR_OP(.op = "divide", .scalar_side = 2, .scalar = 1.0f), 1, {S2(3, 4)}, 2,
     .input = IN_AWAY, .n_kinks = 1, .margin = 0.7f},
    {"TensorOp maximum(x, 0.1)", KC_TENSOR_OP(.op = "maximum", .scalar_side = 1, .scalar = 0.1f), 1, {S2(3, 4)}, 2,
     .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1, .kinks = {0.1f}},
    {"TensorOp minimum(-0.2, x)", KC_TENSOR_OP(.op = "minimum", .scalar_side = 2, .scalar = -0.2f), 1, {S2(3, 4)},
     2, .eps = 1e-3f, .input = IN_AWAY, .n_kinks = 1, .kinks = {-0.2f}},
    {"TensorOp a * b", KC_TENSOR_OP(.op = "multiply"), 2, {S3(2, 2, 3), S3(2, 2, 3)}, 2},
    {"TensorOp a / b broadcast", KC_TENSOR_OP(.op = "true_divide"), 2, {S3(2, 2, 3), S3(1, 1, 3)}, 2,
     .input = IN_AWAY, .n_kinks = 1, .margin = 0.7f},
    {"TensorOp a - b broadcast", KC_TENSOR_OP(.op = "subtract"), 2, {S3(2, 1, 3), S3(2, 2, 3)}, 2},
    /* transfer learning */
    {"CustomScaleLayer", KC_CUSTOM_SCALE(.scale = 0.17f), 2, {S3(2, 2, 3), S3(2, 2, 3)}, 2},
    {"CustomScaleLayer negative scale", KC_CUSTOM_SCALE(.scale = -1.5f), 2, {S2(3, 4), S2(3, 4)}, 2},
    /* augmentation: the resampling is linear in x for the step's parameters (fixed by the
     * seed), so its adjoint is checked for every fill mode and interpolation; the colour
     * layers away from their clipping (a wide value_range) */
    {"RandomFlip training", KC_RANDOM_FLIP(), 1, {S3(4, 5, 2)}, 4, .training = true, .seed = 5},
    {"RandomFlip horizontal", KC_RANDOM_FLIP(.mode = "horizontal"), 1, {S3(3, 4, 2)}, 4, .training = true, .seed = 6},
    {"RandomRotation reflect bilinear", KC_RANDOM_ROTATION(.factor = KC_FACTOR(0.2f)), 1, {S3(6, 5, 2)}, 2,
     .training = true, .seed = 3},
    {"RandomRotation constant nearest", KC_RANDOM_ROTATION(.factor = KC_FACTOR(0.3f), .fill_mode = "constant",
                                                          .interpolation = "nearest", .fill_value = 0.5f),
     1, {S3(5, 6, 2)}, 2, .training = true, .seed = 4},
    {"RandomZoom wrap", KC_RANDOM_ZOOM(.height_factor = KC_FACTOR_PAIR(0.2f, 0.5f), .fill_mode = "wrap"), 1,
     {S3(5, 5, 3)}, 2, .training = true, .seed = 8},
    {"RandomZoom nearest fill, width factor", KC_RANDOM_ZOOM(.height_factor = KC_FACTOR(0.4f),
                                                           .width_factor = KC_FACTOR_PAIR(-0.5f, -0.2f),
                                                           .fill_mode = "nearest"),
     1, {S3(6, 4, 2)}, 2, .training = true, .seed = 9},
    {"RandomTranslation", KC_RANDOM_TRANSLATION(.height_factor = KC_FACTOR(0.3f), .width_factor = KC_FACTOR(0.4f)), 1,
     {S3(5, 6, 2)}, 3, .training = true, .seed = 10},
    {"RandomCrop training", KC_RANDOM_CROP(.height = 3, .width = 4), 1, {S3(6, 7, 2)}, 2, .training = true, .seed = 2},
    {"RandomCrop smaller input (resize)", KC_RANDOM_CROP(.height = 6, .width = 5), 1, {S3(4, 5, 2)}, 2,
     .training = true},
    {"CenterCrop", KC_CENTER_CROP(.height = 3, .width = 2), 1, {S3(6, 5, 2)}, 2},
    {"CenterCrop upsizing (smart resize)", KC_CENTER_CROP(.height = 7, .width = 5), 1, {S3(4, 6, 2)}, 2},
    {"Resizing bilinear up", KC_RESIZING(.height = 7, .width = 9), 1, {S3(3, 4, 2)}, 2},
    {"Resizing bilinear down", KC_RESIZING(.height = 3, .width = 2), 1, {S3(7, 5, 2)}, 2},
    {"Resizing nearest crop", KC_RESIZING(.height = 4, .width = 4, .interpolation = "nearest",
                                          .crop_to_aspect_ratio = KC_TRUE),
     1, {S3(5, 8, 2)}, 2},
    {"Resizing bilinear pad", KC_RESIZING(.height = 4, .width = 8, .pad_to_aspect_ratio = KC_TRUE, .fill_value = 1.0f),
     1, {S3(5, 6, 2)}, 2},
    {"RandomContrast", KC_RANDOM_CONTRAST(.factor = KC_FACTOR(0.5f), .value_range = {-10, 10}), 1, {S3(3, 4, 3)}, 3,
     .training = true, .seed = 12},
    {"RandomBrightness", KC_RANDOM_BRIGHTNESS(.factor = KC_FACTOR(0.3f), .value_range = {-10, 10}), 1, {S3(3, 4, 3)},
     3, .training = true, .seed = 13},
    /* regularising layers: training with a fixed seed (the mask is the same in every evaluation) */
    {"SpatialDropout2D training", KC_SPATIAL_DROPOUT2D(.rate = 0.4f), 1, {S3(3, 2, 4)}, 3, .training = true,
     .seed = 21},
    {"SpatialDropout2D rate 0", KC_SPATIAL_DROPOUT2D(), 1, {S3(2, 2, 3)}, 2, .training = true, .seed = 21},
    {"StochasticDepth training", KC_STOCHASTIC_DEPTH(.drop_path_rate = 0.5f), 1, {S3(2, 3, 2)}, 4,
     .training = true, .seed = 22},
    {"LayerScale (N, H, W, C)", KC_LAYER_SCALE(.init_values = 0.5f, .projection_dim = 3), 1, {S3(2, 3, 3)}, 3},
    {"LayerScale (N, C)", KC_LAYER_SCALE(.init_values = 1e-6f, .projection_dim = 5), 1, {S1(5)}, 4},
    /* Gaussian noise layers: training with a fixed seed (the same noise in every evaluation) */
    {"GaussianNoise training", KC_GAUSSIAN_NOISE(.stddev = 0.7f), 1, {S3(3, 2, 4)}, 3, .training = true, .seed = 31},
    {"GaussianNoise stddev 0", KC_GAUSSIAN_NOISE(), 1, {S2(3, 4)}, 2, .training = true, .seed = 31},
    {"GaussianDropout training", KC_GAUSSIAN_DROPOUT(.rate = 0.6f), 1, {S3(2, 3, 4)}, 3, .training = true,
     .seed = 32},
    {"GaussianDropout rate 0", KC_GAUSSIAN_DROPOUT(), 1, {S1(7)}, 2, .training = true, .seed = 33},
};

int main(void) {
    size_t n = KC_ARRAY_LEN(k_cases);
    struct CMUnitTest *tests = calloc(n, sizeof *tests);
    if (!tests) return 1;
    for (size_t i = 0; i < n; i++) {
        tests[i].name = k_cases[i].what;
        tests[i].test_func = run_case;
        tests[i].initial_state = (void *)&k_cases[i];
    }
    int rc = _cmocka_run_group_tests("gradcheck_layers", tests, n, NULL, NULL);
    free(tests);
    return rc;
}
