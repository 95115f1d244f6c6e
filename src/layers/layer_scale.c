/* layer_scale.c — ConvNeXt's LayerScale (keras.applications.convnext): y = x * gamma, gamma a
 * trainable per-channel weight of projection_dim values (the input's last axis), starting at
 * init_values (Keras: initializers.Constant(init_values)). The broadcasting multiply reads
 * gamma in place and gives its gradient (the sum over every other axis). */
#include <math.h>
#include <stdio.h>

#include "layer.h"

typedef struct layer_scale_cfg {
    float init_values;
    int projection_dim;
    int64_t rows; /* per example: positions sharing gamma */
    char init[32];        /* its weight's initializer, KC_INIT_CONST "VALUE" (the weight points here) */
} layer_scale_cfg;

static kc_status ls_init(kc_layer *l, const void *opts_) {
    const kc_layer_scale_opts *o = opts_;
    layer_scale_cfg *c = l->cfg;
    if (o->projection_dim <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: projection_dim must be positive (the input's channels), got %d",
                        kc__layer_label(l), o->projection_dim);
    if (!isfinite(o->init_values))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: init_values must be a finite number", kc__layer_label(l));
    c->init_values = o->init_values;
    c->projection_dim = o->projection_dim;
    return KC_STATUS_OK;
}

static void ls_get_opts(const kc_layer *l, void *opts_) {
    const layer_scale_cfg *c = l->cfg;
    *(kc_layer_scale_opts *)opts_ =
        (kc_layer_scale_opts){.name = l->name, .init_values = c->init_values, .projection_dim = c->projection_dim};
}

static kc_status ls_build(kc_layer *l) {
    layer_scale_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    if (in->rank < 1 || in->dim[in->rank - 1] != c->projection_dim)
        return kc__fail(KC_STATUS_SHAPE, "%s: projection_dim is %d but the input's last axis has %d values",
                        kc__layer_label(l), c->projection_dim, in->rank < 1 ? 0 : in->dim[in->rank - 1]);
    l->out_shape = *in;
    c->rows = kc__shape_size(in) / c->projection_dim;
    l->n_weights = 0;
    snprintf(c->init, sizeof c->init, KC_INIT_CONST "%.9g", (double)c->init_values);
    return kc__layer_add_weight(l, "gamma", (kc_shape){1, {c->projection_dim}}, true, c->init, c->projection_dim,
                                c->projection_dim);
}

/* x as (batch * rows, C) times gamma (C) */
static kc_bcast_desc ls_desc(const layer_scale_cfg *c, int batch) {
    return (kc_bcast_desc){
        .rank = 2, .dims = {(int64_t)batch * c->rows, c->projection_dim}, .sa = {c->projection_dim, 1}, .sb = {0, 1}};
}

static kc_status ls_forward(kc_layer *l, const kc_fwd *a) {
    kc_bcast_desc d = ls_desc(l->cfg, a->batch);
    return a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->x[0], l->w[0].data, a->y);
}

static kc_status ls_backward(kc_layer *l, const kc_bwd *a) {
    kc_bcast_desc d = ls_desc(l->cfg, a->batch);
    return a->be->binary_backward(a->be, KC_BIN_MUL, &d, a->x[0], l->w[0].data, a->dy, a->dx[0], l->w[0].grad);
}

static int64_t ls_flops(const kc_layer *l) {
    const layer_scale_cfg *c = l->cfg;
    return c->rows * c->projection_dim;
}

#define O(member) offsetof(kc_layer_scale_opts, member)
static const kc__field k_keras_keys[] = {
    {"init_values", KC_F_FLOAT, KC_F_W, O(init_values), NULL, 0},
    {"projection_dim", KC_F_INT, KC_F_W, O(projection_dim), NULL, 0},
};
#undef O

const kc_layer_ops kc__layer_scale_ops = {
    .class_name = "LayerScale",
    .snake_name = "layer_scale",
    .keras_module = "keras.src.applications.convnext",
    .registered_name = "LayerScale",
    .cfg_size = sizeof(layer_scale_cfg),
    .opts_size = sizeof(kc_layer_scale_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_BROADCAST),
    .init = ls_init,
    .get_opts = ls_get_opts,
    .build = ls_build,
    .forward = ls_forward,
    .backward = ls_backward,
    .flops = ls_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
