/* dropout.c — Dropout: in training, zero each value with probability `rate` and scale the
 * rest by 1 / (1 - rate); the mask (uint8, one per value) stays in aux for the backward.
 * In inference (or with rate 0) it is a copy. */
#include "layer.h"

typedef struct dropout_cfg {
    float rate;
    uint64_t seed;
    int64_t size; /* values per example, from build */
} dropout_cfg;

static kc_status dropout_init(kc_layer *l, const void *opts_) {
    const kc_dropout_opts *o = opts_;
    dropout_cfg *c = l->cfg;
    if (!(o->rate >= 0.0f && o->rate < 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: rate must be in [0, 1), got %g", kc__layer_label(l),
                        (double)o->rate);
    c->rate = o->rate;
    c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void dropout_get_opts(const kc_layer *l, void *opts_) {
    const dropout_cfg *c = l->cfg;
    *(kc_dropout_opts *)opts_ = (kc_dropout_opts){.name = l->name, .rate = c->rate, .seed = c->seed};
}

static kc_status dropout_build(kc_layer *l) {
    dropout_cfg *c = l->cfg;
    l->n_weights = 0;
    l->out_shape = l->in_shape[0];
    c->size = kc__shape_size(&l->in_shape[0]);
    return KC_STATUS_OK;
}

static size_t dropout_aux_bytes(const kc_layer *l, int batch) {
    const dropout_cfg *c = l->cfg;
    return c->rate > 0.0f ? (size_t)batch * (size_t)c->size : 0; /* mask (N, size) uint8 */
}

static kc_status dropout_forward(kc_layer *l, const kc_fwd *a) {
    const dropout_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    if (a->training && c->rate > 0.0f) {
        if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no mask buffer in training", kc__layer_label(l));
        return a->be->dropout_forward(a->be, a->x[0], a->y, a->aux, n, c->rate, a->seed);
    }
    if (a->y == a->x[0]) return KC_STATUS_OK;
    return a->be->copy(a->be, a->y, a->x[0], (size_t)n * sizeof(float));
}

/* Backward assumes the forward ran in training mode (the only mode with a backward). */
static kc_status dropout_backward(kc_layer *l, const kc_bwd *a) {
    const dropout_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    int64_t n = (int64_t)a->batch * c->size;
    if (c->rate > 0.0f) return a->be->dropout_backward(a->be, a->dy, a->aux, a->dx[0], n, c->rate);
    if (a->dx[0] == a->dy) return KC_STATUS_OK;
    return a->be->copy(a->be, a->dx[0], a->dy, (size_t)n * sizeof(float));
}

static int64_t dropout_flops(const kc_layer *l) {
    const dropout_cfg *c = l->cfg;
    return c->size;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_dropout_opts, member)
static const kc__field k_keras_keys[] = {
    {"rate", KC_F_FLOAT, KC_F_W, O(rate), NULL, 0},
    {"seed", KC_F_SEED, KC_F_W3, O(seed), NULL, 0},       /* Keras 3 order */
    KC_KEY_NULL("noise_shape", KC_F_W),
    {"seed", KC_F_SEED, KC_F_W2, O(seed), NULL, 0},       /* Keras 2 order */
};
#undef O

const kc_layer_ops kc__dropout_ops = {
    .class_name = "Dropout",
    .snake_name = "dropout",
    .flags = KC_LAYER_ALIAS_INFERENCE,
    .cfg_size = sizeof(dropout_cfg),
    .opts_size = sizeof(kc_dropout_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_DROPOUT),
    .init = dropout_init,
    .get_opts = dropout_get_opts,
    .build = dropout_build,
    .aux_bytes = dropout_aux_bytes,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .flops = dropout_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
