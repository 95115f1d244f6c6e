/* dropout.c — Dropout: in training, zero each value with probability `rate` and scale the
 * rest by 1 / (1 - rate); the mask (uint8, one per value) stays in aux for the backward.
 * In inference (or with rate 0) it is a copy.
 * With a noise_shape that has axes of size 1 (EfficientNet's (None, 1, 1, 1)), the draws
 * are made over the noise shape (the backend's dropout kernel applied to ones: 0 or
 * 1 / (1 - rate)) and broadcast along those axes by the broadcasting multiply; aux then
 * holds that float mask and its uint8 keep flags. */
#include "layer.h"

typedef struct dropout_cfg {
    float rate;
    uint64_t seed;
    kc_noise_shape noise;
    int64_t size;      /* values per example, from build */
    bool shared;       /* the noise shape has axes of size 1 */
    int rank;          /* per example */
    int64_t dims[KC_MAX_RANK], mdims[KC_MAX_RANK]; /* the example's and the mask's shapes */
    int64_t mask_size; /* draws per example */
} dropout_cfg;

static kc_status dropout_init(kc_layer *l, const void *opts_) {
    const kc_dropout_opts *o = opts_;
    dropout_cfg *c = l->cfg;
    if (!(o->rate >= 0.0f && o->rate < 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: rate must be in [0, 1), got %g", kc__layer_label(l),
                        (double)o->rate);
    c->rate = o->rate;
    c->seed = o->seed;
    c->noise = o->noise_shape;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void dropout_get_opts(const kc_layer *l, void *opts_) {
    const dropout_cfg *c = l->cfg;
    *(kc_dropout_opts *)opts_ =
        (kc_dropout_opts){.name = l->name, .rate = c->rate, .seed = c->seed, .noise_shape = c->noise};
}

/* noise_shape against the input: the batch axis None, every other axis None, 1 or its size */
static kc_status dropout_noise(kc_layer *l, dropout_cfg *c, const kc_shape *in) {
    c->shared = false;
    c->rank = in->rank;
    c->mask_size = 1;
    for (int i = 0; i < in->rank; i++) c->dims[i] = c->mdims[i] = in->dim[i];
    if (c->noise.n == 0) return KC_STATUS_OK;
    if (c->noise.n != in->rank + 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: noise_shape has %d axes but the input has %d (with the batch axis)",
                        kc__layer_label(l), c->noise.n, in->rank + 1);
    if (c->noise.v[0] != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: noise_shape's batch axis must be None (got %d)",
                        kc__layer_label(l), c->noise.v[0]);
    for (int i = 0; i < in->rank; i++) {
        int v = c->noise.v[i + 1];
        if (v == 1 && in->dim[i] != 1) c->mdims[i] = 1, c->shared = true;
        else if (v != 0 && v != in->dim[i])
            return kc__fail(KC_STATUS_SHAPE, "%s: noise_shape axis %d is %d; it must be None, 1 or the input's %d",
                            kc__layer_label(l), i + 1, v, in->dim[i]);
        c->mask_size *= c->mdims[i];
    }
    return KC_STATUS_OK;
}

static kc_status dropout_build(kc_layer *l) {
    dropout_cfg *c = l->cfg;
    l->n_weights = 0;
    l->out_shape = l->in_shape[0];
    c->size = kc__shape_size(&l->in_shape[0]);
    return dropout_noise(l, c, &l->in_shape[0]);
}

static size_t dropout_aux_bytes(const kc_layer *l, int batch) {
    const dropout_cfg *c = l->cfg;
    if (!(c->rate > 0.0f)) return 0;
    if (c->shared) return (size_t)batch * (size_t)c->mask_size * (sizeof(float) + 1); /* mask, keep flags */
    return (size_t)batch * (size_t)c->size; /* mask (N, size) uint8 */
}

/* x (N, dims) against the mask (N, mdims), broadcast where the mask's axis is 1 */
static kc_bcast_desc dropout_desc(const dropout_cfg *c, int batch) {
    kc_bcast_desc d = {.rank = c->rank + 1};
    d.dims[0] = batch;
    int64_t sa = 1, sb = 1;
    for (int i = c->rank - 1; i >= 0; i--) {
        d.dims[i + 1] = c->dims[i];
        d.sa[i + 1] = sa, d.sb[i + 1] = c->mdims[i] == 1 && c->dims[i] != 1 ? 0 : sb;
        sa *= c->dims[i], sb *= c->mdims[i];
    }
    d.sa[0] = sa, d.sb[0] = sb;
    return d;
}

static kc_status dropout_shared_forward(const dropout_cfg *c, const kc_fwd *a) {
    int64_t nm = (int64_t)a->batch * c->mask_size;
    float *m = a->aux;
    uint8_t *keep = (uint8_t *)(m + nm);
    KC_TRY(a->be->memset0(a->be, m, (size_t)nm * sizeof(float)));
    KC_TRY(a->be->scalar_forward(a->be, KC_BIN_ADD, m, 1.0f, 0, m, nm));
    KC_TRY(a->be->dropout_forward(a->be, m, m, keep, nm, c->rate, a->seed));
    kc_bcast_desc d = dropout_desc(c, a->batch);
    return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->x[0], m, a->y);
}

static kc_status dropout_forward(kc_layer *l, const kc_fwd *a) {
    const dropout_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    if (a->training && c->rate > 0.0f) {
        if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no mask buffer in training", kc__layer_label(l));
        if (c->shared) return dropout_shared_forward(c, a);
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
    if (c->rate > 0.0f && c->shared) {
        kc_bcast_desc d = dropout_desc(c, a->batch);
        return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->dy, a->aux, a->dx[0]);
    }
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
    {"noise_shape", KC_F_NOISE_SHAPE, KC_F_W, O(noise_shape), NULL, 0},
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
    .backend_ops = KC_OP_BIT(KC_OP_DROPOUT) | KC_OP_BIT(KC_OP_BROADCAST),
    .init = dropout_init,
    .get_opts = dropout_get_opts,
    .build = dropout_build,
    .aux_bytes = dropout_aux_bytes,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .flops = dropout_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
