/* global_avgpool2d.c — GlobalAveragePooling2D and GlobalMaxPooling2D: (H, W, C) -> (C), or
 * (1, 1, C) with keepdims. The max is max pooling with one (H, W) window: the backend's
 * pool2d, whose argmax mask (aux) routes the gradient. */
#include "layer.h"

typedef struct gap_cfg {
    bool keepdims;
    int h, w, hw, c; /* from build */
} gap_cfg;

static kc_status gap_init(kc_layer *l, const void *opts_) {
    const kc_global_pool_opts *o = opts_;
    gap_cfg *c = l->cfg;
    c->keepdims = kc__bool3(o->keepdims, false);
    return KC_STATUS_OK;
}

static void gap_get_opts(const kc_layer *l, void *opts_) {
    const gap_cfg *c = l->cfg;
    *(kc_global_pool_opts *)opts_ = (kc_global_pool_opts){.name = l->name, .keepdims = c->keepdims ? KC_TRUE : KC_FALSE};
}

static kc_status gap_build(kc_layer *l) {
    gap_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->h = in->dim[0], c->w = in->dim[1];
    c->hw = in->dim[0] * in->dim[1];
    c->c = in->dim[2];
    l->out_shape = c->keepdims ? kc__shape_make(3, (int[]){1, 1, c->c}) : kc__shape_make(1, (int[]){c->c});
    return KC_STATUS_OK;
}

static kc_status gap_forward(kc_layer *l, const kc_fwd *a) {
    const gap_cfg *c = l->cfg;
    return a->be->global_avg_pool_forward(a->be, a->x[0], a->y, a->batch, c->hw, c->c);
}

static kc_status gap_backward(kc_layer *l, const kc_bwd *a) {
    const gap_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    return a->be->global_avg_pool_backward(a->be, a->dy, a->dx[0], a->batch, c->hw, c->c);
}

static int64_t gap_flops(const kc_layer *l) {
    const gap_cfg *c = l->cfg;
    return (int64_t)c->hw * c->c;
}

/* ---- GlobalMaxPooling2D */

static kc_pool2d_desc gmp_desc(const gap_cfg *c, int batch) {
    return (kc_pool2d_desc){.kind = KC_POOL_MAX, .n = batch, .h = c->h, .w = c->w, .c = c->c, .kh = c->h,
                            .kw = c->w, .sh = c->h, .sw = c->w, .oh = 1, .ow = 1};
}

static void gmp_backend_desc(const kc_layer *l, int batch, void *desc) {
    *(kc_pool2d_desc *)desc = gmp_desc(l->cfg, batch);
}

static size_t gmp_aux_bytes(const kc_layer *l, int batch) {
    const gap_cfg *c = l->cfg;
    return (size_t)batch * c->c * sizeof(int32_t); /* argmax mask (N, C) */
}

static kc_status gmp_forward(kc_layer *l, const kc_fwd *a) {
    kc_pool2d_desc d = gmp_desc(l->cfg, a->batch);
    return a->be->pool2d_forward(a->be, &d, a->x[0], a->y, a->training ? (int32_t *)a->aux : NULL);
}

static kc_status gmp_backward(kc_layer *l, const kc_bwd *a) {
    if (!a->dx[0]) return KC_STATUS_OK;
    kc_pool2d_desc d = gmp_desc(l->cfg, a->batch);
    return a->be->pool2d_backward(a->be, &d, a->dy, a->aux, a->dx[0]);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_global_pool_opts, member)
static const kc__field k_keras_keys[] = {
    KC_KEY_CHANNELS_LAST(KC_F_W),
    {"keepdims", KC_F_BOOL, KC_F_W, O(keepdims), NULL, 0},
};
#undef O

const kc_layer_ops kc__global_avgpool2d_ops = {
    .class_name = "GlobalAveragePooling2D",
    .alias = "GlobalAvgPool2D",
    .snake_name = "global_average_pooling2d",
    .cfg_size = sizeof(gap_cfg),
    .opts_size = sizeof(kc_global_pool_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_GLOBAL_AVG_POOL),
    .init = gap_init,
    .get_opts = gap_get_opts,
    .build = gap_build,
    .forward = gap_forward,
    .backward = gap_backward,
    .flops = gap_flops,
    KC_KERAS_KEYS(k_keras_keys),
};

const kc_layer_ops kc__global_maxpool2d_ops = {
    .class_name = "GlobalMaxPooling2D",
    .alias = "GlobalMaxPool2D",
    .snake_name = "global_max_pooling2d",
    .cfg_size = sizeof(gap_cfg),
    .opts_size = sizeof(kc_global_pool_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_POOL2D),
    .backend_desc = gmp_backend_desc,
    .init = gap_init,
    .get_opts = gap_get_opts,
    .build = gap_build,
    .aux_bytes = gmp_aux_bytes,
    .forward = gmp_forward,
    .backward = gmp_backward,
    .flops = gap_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
