/* shared.c — shared layers: a layer called at several nodes (Keras: one layer object, one
 * entry of a Functional config whose inbound_nodes list several calls).
 *
 * Each call is a node of the graph (kc_apply_shared makes the later ones, with the first
 * call's kind, options and name). The first call owns the weights; a later call owns none
 * (n_weights 0, so the parameter slab, the optimizer, the files and the parameter counts see
 * each weight once) and has views of them (w[0..n_views)): the same data, and, when they
 * train, gradient buffers of its own in view_grads. Layers overwrite their weight gradients
 * in backward; after the first call's place in the backward pass (the last of its calls to
 * run there: calls come later in topological order, and backward runs from the last node
 * down), the first call's gradients become the sum over every call whose backward ran. */
#include <stdio.h>

#include "model.h"

kc_status kc__model_shared_build(kc_model *m, kc_layer *l) {
    const kc_layer *p = m->layers[l->shares];
    char a[96], b[96], c[96], d[96];
    if (l->n_weights != p->n_weights)
        return kc__fail(KC_STATUS_SHAPE, "%s: its call on %s makes %d weights, its first call on %s %d",
                        kc__layer_label(l), kc__shape_str(&l->in_shape[0], true, a, sizeof a), l->n_weights,
                        kc__shape_str(&p->in_shape[0], true, b, sizeof b), p->n_weights);
    for (int k = 0; k < l->n_weights; k++)
        if (!kc__shape_eq(&l->w[k].shape, &p->w[k].shape))
            return kc__fail(KC_STATUS_SHAPE,
                            "%s is called on inputs its weights do not fit: %s needs '%s' of shape %s, but its first "
                            "call (on %s) made it %s; a shared layer's calls need inputs of compatible shapes",
                            kc__layer_label(l), kc__shape_str(&l->in_shape[0], true, a, sizeof a), l->w[k].name,
                            kc__shape_str(&l->w[k].shape, false, b, sizeof b),
                            kc__shape_str(&p->in_shape[0], true, c, sizeof c),
                            kc__shape_str(&p->w[k].shape, false, d, sizeof d));
    l->n_views = l->n_weights;
    l->n_weights = 0;
    return KC_STATUS_OK;
}

kc_status kc__model_shared_link(kc_model *m) {
    m->be->free(m->be, m->view_grads);
    m->view_grads = NULL;
    int64_t total = 0;
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        if (l->shares < 0) continue;
        const kc_layer *p = m->layers[l->shares];
        l->frozen = p->frozen; /* trainability is the layer's, not the call's */
        for (int k = 0; k < l->n_views; k++)
            if (kc__weight_trains(l, &l->w[k])) total += l->w[k].size;
    }
    if (total > 0) KC_TRY(m->be->alloc(m->be, (size_t)total * sizeof(float), (void **)&m->view_grads));
    int64_t at = 0;
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        if (l->shares < 0) continue;
        const kc_layer *p = m->layers[l->shares];
        for (int k = 0; k < l->n_views; k++) {
            l->w[k].data = p->w[k].data;
            l->w[k].grad = NULL;
            if (kc__weight_trains(l, &l->w[k])) {
                l->w[k].grad = m->view_grads + at;
                at += l->w[k].size;
            }
        }
    }
    if (total > 0) KC_TRY(m->be->memset0(m->be, m->view_grads, (size_t)total * sizeof(float)));
    return KC_STATUS_OK;
}

/* Whether node c's backward is called in this plan (exec.c's rule). */
static bool runs_backward(const kc_model *m, int c) {
    const kc_layer *l = m->layers[c];
    if ((l->ops->flags & KC_LAYER_INPUT) || kc__layer_is_alias(l, true)) return false;
    return m->plan.dy_off[c] != KC_PLAN_NONE && m->plan.needs_grad[c];
}

kc_status kc__model_shared_fold(kc_model *m, int j, bool ran) {
    const kc_layer *p = m->layers[j];
    if (p->calls == 0 || !kc__layer_trains(p)) return KC_STATUS_OK;
    for (int k = 0; k < p->n_weights; k++) {
        const kc_weight *w = &p->w[k];
        if (!w->grad) continue;
        bool have = ran;
        for (int c = j + 1; c < m->n_layers; c++) {
            const kc_layer *l = m->layers[c];
            if (l->shares != j || !runs_backward(m, c)) continue;
            const float *g = l->w[k].grad;
            if (have) KC_TRY(m->be->add(m->be, w->grad, w->grad, g, w->size));
            else KC_TRY(m->be->copy(m->be, w->grad, g, (size_t)w->size * sizeof(float)));
            have = true;
        }
        if (!have) KC_TRY(m->be->memset0(m->be, w->grad, (size_t)w->size * sizeof(float)));
    }
    return KC_STATUS_OK;
}

int kc__model_call_index(const kc_model *m, int node) {
    int p = m->layers[node]->shares, k = 0;
    if (p < 0) return 0;
    for (int c = p + 1; c <= node; c++) k += m->layers[c]->shares == p;
    return k;
}
