/* spatial_dropout.c — dropout with one draw per (example, channel) or per example, broadcast
 * over the rest of the example: SpatialDropout2D (Keras: noise_shape (N, 1, 1, C)) and
 * ConvNeXt's StochasticDepth (drop path: noise_shape (N, 1, ..., 1)). Both are active in
 * training only and the identity in inference.
 *
 * The input is viewed as (N, S, C) and the mask as (N, 1, C) (C = 1 for StochasticDepth).
 * In training the mask is made with the backend's dropout kernel applied to ones (0 or
 * 1 / (1 - rate), from the layer's seed), then y = x * mask through the broadcasting
 * multiply; the backward is dx = dy * mask. aux holds the float mask, then its uint8 keep
 * flags. No new kernels. */
#include "layer.h"

typedef struct mask_dropout_cfg {
    float rate;
    uint64_t seed;
    int64_t s, c; /* per example: positions sharing a draw, draws */
} mask_dropout_cfg;

static kc_status md_check_rate(const kc_layer *l, const char *key, float rate) {
    if (!(rate >= 0.0f && rate < 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s must be in [0, 1), got %g", kc__layer_label(l), key,
                        (double)rate);
    return KC_STATUS_OK;
}

static size_t md_aux_bytes(const kc_layer *l, int batch) {
    const mask_dropout_cfg *c = l->cfg;
    size_t nc = (size_t)batch * (size_t)c->c;
    return c->rate > 0.0f ? nc * (sizeof(float) + 1) : 0;
}

static kc_bcast_desc md_desc(const mask_dropout_cfg *c, int batch) {
    return (kc_bcast_desc){.rank = 3,
                           .dims = {batch, c->s, c->c},
                           .sa = {c->s * c->c, c->c, 1},
                           .sb = {c->c, 0, 1}};
}

static kc_status md_forward(kc_layer *l, const kc_fwd *a) {
    const mask_dropout_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->s * c->c, nc = (int64_t)a->batch * c->c;
    if (a->training && c->rate > 0.0f) {
        if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no mask buffer in training", kc__layer_label(l));
        float *m = a->aux;
        uint8_t *keep = (uint8_t *)(m + nc);
        KC_TRY(a->be->memset0(a->be, m, (size_t)nc * sizeof(float)));
        KC_TRY(a->be->scalar_forward(a->be, KC_BIN_ADD, m, 1.0f, 0, m, nc));
        KC_TRY(a->be->dropout_forward(a->be, m, m, keep, nc, c->rate, a->seed));
        kc_bcast_desc d = md_desc(c, a->batch);
        return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->x[0], m, a->y);
    }
    if (a->y == a->x[0]) return KC_STATUS_OK;
    return a->be->copy(a->be, a->y, a->x[0], (size_t)n * sizeof(float));
}

/* Backward assumes the forward ran in training mode (the only mode with a backward). */
static kc_status md_backward(kc_layer *l, const kc_bwd *a) {
    const mask_dropout_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    int64_t n = (int64_t)a->batch * c->s * c->c;
    if (c->rate > 0.0f) {
        kc_bcast_desc d = md_desc(c, a->batch);
        return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->dy, a->aux, a->dx[0]);
    }
    if (a->dx[0] == a->dy) return KC_STATUS_OK;
    return a->be->copy(a->be, a->dx[0], a->dy, (size_t)n * sizeof(float));
}

static int64_t md_flops(const kc_layer *l) {
    const mask_dropout_cfg *c = l->cfg;
    return c->s * c->c;
}

/* ---- SpatialDropout2D: one draw per (example, channel) of an (N, H, W, C) input */

static kc_status sd2_init(kc_layer *l, const void *opts_) {
    const kc_dropout_opts *o = opts_;
    mask_dropout_cfg *c = l->cfg;
    KC_TRY(md_check_rate(l, "rate", o->rate));
    c->rate = o->rate;
    c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void sd2_get_opts(const kc_layer *l, void *opts_) {
    const mask_dropout_cfg *c = l->cfg;
    *(kc_dropout_opts *)opts_ = (kc_dropout_opts){.name = l->name, .rate = c->rate, .seed = c->seed};
}

static kc_status sd2_build(kc_layer *l) {
    mask_dropout_cfg *c = l->cfg;
    const kc_shape *s = &l->in_shape[0];
    if (s->rank != 3)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: SpatialDropout2D takes (height, width, channels) inputs, got rank %d per example",
                        kc__layer_label(l), s->rank);
    l->n_weights = 0;
    l->out_shape = *s;
    c->c = s->dim[2];
    c->s = (int64_t)s->dim[0] * s->dim[1];
    return KC_STATUS_OK;
}

#define O(member) offsetof(kc_dropout_opts, member)
static const kc__field k_sd2_keys[] = {
    {"rate", KC_F_FLOAT, KC_F_W, O(rate), NULL, 0},
    KC_KEY_NULL("noise_shape", 0), /* tf-keras writes it; Keras 3 refuses it: read only */
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
    KC_KEY_CHANNELS_LAST(KC_F_W),
};
#undef O

const kc_layer_ops kc__spatial_dropout2d_ops = {
    .class_name = "SpatialDropout2D",
    .snake_name = "spatial_dropout2d",
    .flags = KC_LAYER_ALIAS_INFERENCE | KC_LAYER_NO_TRAINABLE_KEY,
    .cfg_size = sizeof(mask_dropout_cfg),
    .opts_size = sizeof(kc_dropout_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_DROPOUT) | KC_OP_BIT(KC_OP_BROADCAST),
    .init = sd2_init,
    .get_opts = sd2_get_opts,
    .build = sd2_build,
    .aux_bytes = md_aux_bytes,
    .forward = md_forward,
    .backward = md_backward,
    .flops = md_flops,
    KC_KERAS_KEYS(k_sd2_keys),
};

/* ---- StochasticDepth (keras.applications.convnext): one draw per example */

static kc_status sdp_init(kc_layer *l, const void *opts_) {
    const kc_stochastic_depth_opts *o = opts_;
    mask_dropout_cfg *c = l->cfg;
    KC_TRY(md_check_rate(l, "drop_path_rate", o->drop_path_rate));
    c->rate = o->drop_path_rate;
    return KC_STATUS_OK;
}

static void sdp_get_opts(const kc_layer *l, void *opts_) {
    const mask_dropout_cfg *c = l->cfg;
    *(kc_stochastic_depth_opts *)opts_ = (kc_stochastic_depth_opts){.name = l->name, .drop_path_rate = c->rate};
}

static kc_status sdp_build(kc_layer *l) {
    mask_dropout_cfg *c = l->cfg;
    l->n_weights = 0;
    l->out_shape = l->in_shape[0];
    c->c = 1;
    c->s = kc__shape_size(&l->in_shape[0]);
    return KC_STATUS_OK;
}

static const kc__field k_sdp_keys[] = {
    {"drop_path_rate", KC_F_FLOAT, KC_F_W, offsetof(kc_stochastic_depth_opts, drop_path_rate), NULL, 0},
};

const kc_layer_ops kc__stochastic_depth_ops = {
    .class_name = "StochasticDepth",
    .snake_name = "stochastic_depth",
    .keras_module = "keras.src.applications.convnext",
    .registered_name = "StochasticDepth",
    .flags = KC_LAYER_ALIAS_INFERENCE,
    .cfg_size = sizeof(mask_dropout_cfg),
    .opts_size = sizeof(kc_stochastic_depth_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_DROPOUT) | KC_OP_BIT(KC_OP_BROADCAST),
    .init = sdp_init,
    .get_opts = sdp_get_opts,
    .build = sdp_build,
    .aux_bytes = md_aux_bytes,
    .forward = md_forward,
    .backward = md_backward,
    .flops = md_flops,
    KC_KERAS_KEYS(k_sdp_keys),
};
