/* concatenate.c — Concatenate along the last axis: inputs (..., C_i) -> (..., sum C_i). */
#include "layer.h"

typedef struct concat_cfg {
    int axis;                  /* as given: -1, or the last axis counted with the batch */
    int64_t rows;              /* rows per example: product of the leading axes */
    int cols[KC_MAX_INPUTS];   /* C_i */
    int off[KC_MAX_INPUTS];    /* column offset of input i in y */
    int total;                 /* sum C_i */
} concat_cfg;

static kc_status concat_init(kc_layer *l, const void *opts_) {
    const kc_merge_opts *o = opts_;
    concat_cfg *c = l->cfg;
    c->axis = o->axis == 0 ? -1 : o->axis;
    if (c->axis < -1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the last axis (-1) is",
                        kc__layer_label(l), o->axis);
    return KC_STATUS_OK;
}

static void concat_get_opts(const kc_layer *l, void *opts_) {
    const concat_cfg *c = l->cfg;
    *(kc_merge_opts *)opts_ = (kc_merge_opts){.name = l->name, .axis = c->axis};
}

static kc_status concat_build(kc_layer *l) {
    concat_cfg *c = l->cfg;
    char b1[96], b2[96];
    l->n_weights = 0;
    if (l->n_in < 1 || l->n_in > KC_MAX_INPUTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: needs 1 to %d inputs, got %d", kc__layer_label(l),
                        KC_MAX_INPUTS, l->n_in);
    const kc_shape *s0 = &l->in_shape[0];
    if (s0->rank < 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: inputs need at least one axis", kc__layer_label(l));
    if (c->axis != -1 && c->axis != s0->rank)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the last axis (-1 or %d) is",
                        kc__layer_label(l), c->axis, s0->rank);
    int r = s0->rank, total = 0;
    for (int i = 0; i < l->n_in; i++) {
        const kc_shape *s = &l->in_shape[i];
        bool ok = s->rank == r;
        for (int k = 0; ok && k < r - 1; k++) ok = s->dim[k] == s0->dim[k];
        if (!ok)
            return kc__fail(KC_STATUS_SHAPE,
                            "%s: input %d has shape %s and input 0 has %s; all axes but the last must match",
                            kc__layer_label(l), i, kc__shape_str(s, true, b1, sizeof b1),
                            kc__shape_str(s0, true, b2, sizeof b2));
        c->cols[i] = s->dim[r - 1];
        c->off[i] = total;
        total += s->dim[r - 1];
    }
    c->total = total;
    c->rows = kc__shape_size(s0) / s0->dim[r - 1];
    l->out_shape = *s0;
    l->out_shape.dim[r - 1] = total;
    return KC_STATUS_OK;
}

static kc_status concat_forward(kc_layer *l, const kc_fwd *a) {
    const concat_cfg *c = l->cfg;
    int64_t rows = (int64_t)a->batch * c->rows;
    for (int i = 0; i < l->n_in; i++)
        KC_TRY(a->be->copy_strided(a->be, a->y, c->total, c->off[i], a->x[i], c->cols[i], 0, rows, c->cols[i]));
    return KC_STATUS_OK;
}

static kc_status concat_backward(kc_layer *l, const kc_bwd *a) {
    const concat_cfg *c = l->cfg;
    int64_t rows = (int64_t)a->batch * c->rows;
    for (int i = 0; i < l->n_in; i++)
        if (a->dx[i])
            KC_TRY(a->be->copy_strided(a->be, a->dx[i], c->cols[i], 0, a->dy, c->total, c->off[i], rows, c->cols[i]));
    return KC_STATUS_OK;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_merge_opts, member)
static const kc__field k_keras_keys[] = {
    {"axis", KC_F_AXIS, KC_F_W, O(axis), NULL, 0},
};
#undef O

const kc_layer_ops kc__concatenate_ops = {
    .class_name = "Concatenate",
    .snake_name = "concatenate",
    .cfg_size = sizeof(concat_cfg),
    .opts_size = sizeof(kc_merge_opts),
    .min_inputs = 2,
    .max_inputs = KC_MAX_INPUTS,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE),
    .init = concat_init,
    .get_opts = concat_get_opts,
    .build = concat_build,
    .forward = concat_forward,
    .backward = concat_backward,
    KC_KERAS_KEYS(k_keras_keys),
};
