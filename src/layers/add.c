/* add.c — Add: y = x0 + x1 + ... (2 to 8 inputs of identical shape). */
#include "layer.h"

typedef struct add_cfg {
    int64_t size; /* values per example */
} add_cfg;

static kc_status add_init(kc_layer *l, const void *opts) { return KC_STATUS_OK; }

static void add_get_opts(const kc_layer *l, void *opts) { *(kc_merge_opts *)opts = (kc_merge_opts){.name = l->name}; }

static kc_status add_build(kc_layer *l) {
    add_cfg *c = l->cfg;
    char b1[96], b2[96];
    l->n_weights = 0;
    if (l->n_in < 2 || l->n_in > KC_MAX_INPUTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: needs 2 to %d inputs, got %d", kc__layer_label(l),
                        KC_MAX_INPUTS, l->n_in);
    for (int i = 1; i < l->n_in; i++)
        if (!kc__shape_eq(&l->in_shape[i], &l->in_shape[0]))
            return kc__fail(KC_STATUS_SHAPE, "%s: input %d has shape %s but input 0 has %s; Add needs identical shapes",
                            kc__layer_label(l), i, kc__shape_str(&l->in_shape[i], true, b1, sizeof b1),
                            kc__shape_str(&l->in_shape[0], true, b2, sizeof b2));
    l->out_shape = l->in_shape[0];
    c->size = kc__shape_size(&l->out_shape);
    return KC_STATUS_OK;
}

static kc_status add_forward(kc_layer *l, const kc_fwd *a) {
    const add_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    KC_TRY(a->be->add(a->be, a->y, a->x[0], a->x[1], n));
    for (int i = 2; i < l->n_in; i++) KC_TRY(a->be->axpy(a->be, a->y, a->x[i], 1.0f, n));
    return KC_STATUS_OK;
}

static kc_status add_backward(kc_layer *l, const kc_bwd *a) {
    const add_cfg *c = l->cfg;
    size_t bytes = (size_t)a->batch * (size_t)c->size * sizeof(float);
    for (int i = 0; i < l->n_in; i++)
        if (a->dx[i] && a->dx[i] != a->dy) KC_TRY(a->be->copy(a->be, a->dx[i], a->dy, bytes));
    return KC_STATUS_OK;
}

static int64_t add_flops(const kc_layer *l) {
    const add_cfg *c = l->cfg;
    return c->size * (l->n_in - 1);
}

const kc_layer_ops kc__add_ops = {
    .class_name = "Add",
    .snake_name = "add",
    .cfg_size = sizeof(add_cfg),
    .opts_size = sizeof(kc_merge_opts),
    .min_inputs = 2,
    .max_inputs = KC_MAX_INPUTS,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE),
    .init = add_init,
    .get_opts = add_get_opts,
    .build = add_build,
    .forward = add_forward,
    .backward = add_backward,
    .flops = add_flops,
};
