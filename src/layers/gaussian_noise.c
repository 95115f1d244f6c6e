/* gaussian_noise.c — Keras's GaussianNoise (y = x + stddev * z) and GaussianDropout
 * (y = x * (1 + sqrt(rate / (1 - rate)) * z)), z standard normal, one draw per value. Both
 * are active in training only and the identity in inference (KC_LAYER_ALIAS_INFERENCE:
 * no buffer, no forward call), as Keras 3's.
 *
 * The draws come from the backend's random_normal on the step's layer seed (counter-based,
 * src/backend/normal_draw.h): the same numbers on every backend and thread count, not
 * Keras's generator (same distribution, other numbers). GaussianNoise writes the noise into
 * y and adds x; its backward is dx = dy. GaussianDropout keeps its factors in aux for the
 * backward, dx = dy * factor; both multiplies through the broadcasting kernel. */
#include <math.h>

#include "layer.h"

typedef struct gauss_cfg {
    float param;   /* GaussianNoise's stddev, GaussianDropout's rate */
    float stddev;  /* of the draws */
    float mean;    /* 0 (additive) or 1 (multiplicative) */
    uint64_t seed;
    int64_t size;  /* values per example */
} gauss_cfg;

static kc_status gauss_build(kc_layer *l) {
    gauss_cfg *c = l->cfg;
    l->n_weights = 0;
    l->out_shape = l->in_shape[0];
    c->size = kc__shape_size(&l->in_shape[0]);
    return KC_STATUS_OK;
}

static int64_t gauss_flops(const kc_layer *l) {
    const gauss_cfg *c = l->cfg;
    return c->size;
}

/* y = a * b, both (batch, size) */
static kc_bcast_desc same_shape(const gauss_cfg *c, int batch) {
    return (kc_bcast_desc){.rank = 2, .dims = {batch, c->size}, .sa = {c->size, 1}, .sb = {c->size, 1}};
}

static kc_status copy_if_needed(kc_backend *be, float *dst, const float *src, int64_t n) {
    if (dst == src) return KC_STATUS_OK;
    return be->copy(be, dst, src, (size_t)n * sizeof(float));
}

static kc_status gauss_forward(kc_layer *l, const kc_fwd *a) {
    const gauss_cfg *c = l->cfg;
    const int64_t n = (int64_t)a->batch * c->size;
    if (!a->training || !(c->stddev > 0.0f)) return copy_if_needed(a->be, a->y, a->x[0], n);
    if (c->mean == 0.0f) { /* GaussianNoise */
        if (a->y == a->x[0]) return kc__fail(KC_STATUS_INTERNAL, "%s: output aliases its input in training", kc__layer_label(l));
        KC_TRY(a->be->random_normal(a->be, a->y, n, 0.0f, c->stddev, a->seed));
        return a->be->add(a->be, a->y, a->y, a->x[0], n);
    }
    if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no noise buffer in training", kc__layer_label(l));
    KC_TRY(a->be->random_normal(a->be, a->aux, n, 1.0f, c->stddev, a->seed));
    kc_bcast_desc d = same_shape(c, a->batch);
    return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->x[0], a->aux, a->y);
}

/* Backward assumes the forward ran in training mode (the only mode with a backward). */
static kc_status gauss_backward(kc_layer *l, const kc_bwd *a) {
    const gauss_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    const int64_t n = (int64_t)a->batch * c->size;
    if (c->mean == 0.0f || !(c->stddev > 0.0f)) return copy_if_needed(a->be, a->dx[0], a->dy, n);
    kc_bcast_desc d = same_shape(c, a->batch);
    return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->dy, a->aux, a->dx[0]);
}

/* ---- GaussianNoise */

static kc_status gn_init(kc_layer *l, const void *opts_) {
    const kc_gaussian_noise_opts *o = opts_;
    gauss_cfg *c = l->cfg;
    if (!(o->stddev >= 0.0f && o->stddev <= 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: stddev must be in [0, 1] (as Keras 3 requires), got %g",
                        kc__layer_label(l), (double)o->stddev);
    c->param = c->stddev = o->stddev;
    c->mean = 0.0f;
    c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void gn_get_opts(const kc_layer *l, void *opts_) {
    const gauss_cfg *c = l->cfg;
    *(kc_gaussian_noise_opts *)opts_ = (kc_gaussian_noise_opts){.name = l->name, .stddev = c->param, .seed = c->seed};
}

static const kc__field k_gn_keys[] = {
    {"stddev", KC_F_FLOAT, KC_F_W, offsetof(kc_gaussian_noise_opts, stddev), NULL, 0},
    {"seed", KC_F_SEED, KC_F_W, offsetof(kc_gaussian_noise_opts, seed), NULL, 0},
};

const kc_layer_ops kc__gaussian_noise_ops = {
    .class_name = "GaussianNoise",
    .snake_name = "gaussian_noise",
    .flags = KC_LAYER_ALIAS_INFERENCE,
    .cfg_size = sizeof(gauss_cfg),
    .opts_size = sizeof(kc_gaussian_noise_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE) | KC_OP_BIT(KC_OP_NOISE),
    .init = gn_init,
    .get_opts = gn_get_opts,
    .build = gauss_build,
    .forward = gauss_forward,
    .backward = gauss_backward,
    .flops = gauss_flops,
    KC_KERAS_KEYS(k_gn_keys),
};

/* ---- GaussianDropout */

static kc_status gd_init(kc_layer *l, const void *opts_) {
    const kc_gaussian_dropout_opts *o = opts_;
    gauss_cfg *c = l->cfg;
    if (!(o->rate >= 0.0f && o->rate < 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: rate must be in [0, 1), got %g (at 1 the noise's stddev sqrt(rate / (1 - rate)) is infinite)",
                        kc__layer_label(l), (double)o->rate);
    c->param = o->rate;
    c->stddev = sqrtf(o->rate / (1.0f - o->rate));
    c->mean = 1.0f;
    c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void gd_get_opts(const kc_layer *l, void *opts_) {
    const gauss_cfg *c = l->cfg;
    *(kc_gaussian_dropout_opts *)opts_ = (kc_gaussian_dropout_opts){.name = l->name, .rate = c->param, .seed = c->seed};
}

static size_t gd_aux_bytes(const kc_layer *l, int batch) {
    const gauss_cfg *c = l->cfg;
    return c->stddev > 0.0f ? (size_t)batch * (size_t)c->size * sizeof(float) : 0; /* the factors */
}

static const kc__field k_gd_keys[] = {
    {"rate", KC_F_FLOAT, KC_F_W, offsetof(kc_gaussian_dropout_opts, rate), NULL, 0},
    {"seed", KC_F_SEED, KC_F_W, offsetof(kc_gaussian_dropout_opts, seed), NULL, 0},
};

const kc_layer_ops kc__gaussian_dropout_ops = {
    .class_name = "GaussianDropout",
    .snake_name = "gaussian_dropout",
    .flags = KC_LAYER_ALIAS_INFERENCE,
    .cfg_size = sizeof(gauss_cfg),
    .opts_size = sizeof(kc_gaussian_dropout_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_BROADCAST) | KC_OP_BIT(KC_OP_NOISE),
    .init = gd_init,
    .get_opts = gd_get_opts,
    .build = gauss_build,
    .aux_bytes = gd_aux_bytes,
    .forward = gauss_forward,
    .backward = gauss_backward,
    .flops = gauss_flops,
    KC_KERAS_KEYS(k_gd_keys),
};
