/* trainable.c — which weights train: the parameter slab's layout (trainable weights first,
 * so that the optimizer updates one contiguous range), Keras's layer.trainable /
 * model.trainable (kc_model_set_trainable), and laying the slab out again when the set
 * changes on a built model. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

static int64_t padded(int64_t n) { return (n + 15) & ~(int64_t)15; } /* 64-byte aligned starts */

kc_status kc__model_alloc_weights(kc_model *m) {
    int64_t nt = 0, nn = 0;
    m->n_trainable_weights = 0;
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) {
            const kc_weight *w = &m->layers[i]->w[k];
            if (kc__weight_trains(m->layers[i], w)) {
                nt += padded(w->size);
                m->n_trainable_weights++;
            } else {
                nn += padded(w->size);
            }
        }
    m->n_trainable = nt;
    m->n_params = nt + nn;
    KC_TRY(m->be->alloc(m->be, (size_t)(m->n_params ? m->n_params : 1) * sizeof(float), (void **)&m->params));
    if (nt > 0) KC_TRY(m->be->alloc(m->be, (size_t)nt * sizeof(float), (void **)&m->grads));
    int64_t to = 0, no = nt;
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) {
            kc_weight *w = &m->layers[i]->w[k];
            if (kc__weight_trains(m->layers[i], w)) {
                w->data = m->params + to;
                w->grad = m->grads + to;
                to += padded(w->size);
            } else {
                w->data = m->params + no;
                w->grad = NULL;
                no += padded(w->size);
            }
        }
    KC_TRY(m->be->memset0(m->be, m->params, (size_t)(m->n_params ? m->n_params : 1) * sizeof(float)));
    if (nt) KC_TRY(m->be->memset0(m->be, m->grads, (size_t)nt * sizeof(float)));
    return kc__model_shared_link(m);
}

/* The optimizer's slots for the new trainable range, zeroed (a compiled model). */
static kc_status restart_optimizer(kc_model *m) {
    int slots = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum);
    size_t bytes = (size_t)(m->n_trainable ? m->n_trainable : 1) * sizeof(float);
    if (slots >= 1) KC_TRY(m->be->alloc(m->be, bytes, (void **)&m->slot0));
    if (slots >= 2) KC_TRY(m->be->alloc(m->be, bytes, (void **)&m->slot1));
    if (m->slot0) KC_TRY(m->be->memset0(m->be, m->slot0, bytes));
    if (m->slot1) KC_TRY(m->be->memset0(m->be, m->slot1, bytes));
    m->opt.iterations = 0;
    return KC_STATUS_OK;
}

/* The trainable set of a built model changed: every weight's values through host memory
 * into a new slab of the new layout; what was sized by the old trainable range (gradients,
 * optimizer slots, accumulation, clipnorm norms, the all-reduce buffer) and the plan (its
 * gradients follow the set) go. */
static kc_status relayout(kc_model *m) {
    size_t bytes = (size_t)(m->n_params ? m->n_params : 1) * sizeof(float);
    float *host = kc__calloc(1, bytes, "the weights while the trainable set changes");
    int64_t *old = kc__calloc((size_t)KC_MAX(kc_model_num_weights(m), 1), sizeof *old, "weight offsets");
    kc_status s = host && old ? m->be->to_host(m->be, host, m->params, bytes) : KC_STATUS_OUT_OF_MEMORY;
    int j = 0;
    for (int i = 0; i < m->n_layers && s == KC_STATUS_OK; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) old[j++] = m->layers[i]->w[k].data - m->params;
    if (s == KC_STATUS_OK) {
        float **bufs[] = {&m->params, &m->grads, &m->slot0, &m->slot1, &m->accum, &m->dev_norms};
        for (size_t b = 0; b < sizeof bufs / sizeof bufs[0]; b++) {
            m->be->free(m->be, *bufs[b]);
            *bufs[b] = NULL;
        }
        free(m->dist_host);
        m->dist_host = NULL;
        kc__plan_free(&m->plan);
        s = kc__model_alloc_weights(m);
    }
    j = 0;
    for (int i = 0; i < m->n_layers && s == KC_STATUS_OK; i++)
        for (int k = 0; k < m->layers[i]->n_weights && s == KC_STATUS_OK; k++) {
            kc_weight *w = &m->layers[i]->w[k];
            s = m->be->to_device(m->be, w->data, host + old[j++], (size_t)w->size * sizeof(float));
        }
    if (s == KC_STATUS_OK && m->compiled) s = restart_optimizer(m);
    free(host);
    free(old);
    if (s != KC_STATUS_OK) return kc__model_fail(m, kc__wrap(s, "model '%s': changing which layers train: ", m->name));
    return KC_STATUS_OK;
}

/* Set the flags (changed: whether any weight's trainability changed), then lay out again. */
static kc_status apply_flags(kc_model *m, const bool *frozen) {
    bool changed = false;
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        if (l->shares >= 0) { /* a shared layer's later call: its layer's flag */
            l->frozen = frozen[l->shares];
            continue;
        }
        if (l->frozen == frozen[i]) continue;
        for (int k = 0; k < l->n_weights; k++) changed |= l->w[k].trainable;
        l->frozen = frozen[i];
    }
    return changed && m->built ? relayout(m) : KC_STATUS_OK;
}

static kc_status check_model(kc_model *m, const char *what) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: model is NULL", what);
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    return KC_STATUS_OK;
}

kc_status kc_model_set_trainable(kc_model *m, const char *name, int trainable) {
    KC_TRY(check_model(m, "kc_model_set_trainable"));
    bool *f = kc__calloc((size_t)KC_MAX(m->n_layers, 1), sizeof *f, "layer flags");
    if (!f) return KC_STATUS_OUT_OF_MEMORY;
    bool whole = !name || !name[0];
    int exact = whole ? -1 : kc__name_find(&m->names, m->layers, name), hits = 0;
    size_t n = whole ? 0 : strlen(name);
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        bool hit = whole || (exact >= 0 ? i == exact : strncmp(l->name, name, n) == 0);
        hits += hit;
        f[i] = hit ? !trainable : l->frozen;
    }
    kc_status s = KC_STATUS_OK;
    if (hits == 0)
        s = kc__fail(KC_STATUS_INVALID_ARGUMENT,
                     "model '%s' has no layer named '%s' nor any whose name starts with it (see `kerac summary`)",
                     m->name, name);
    else s = apply_flags(m, f);
    if (s == KC_STATUS_OK && whole) m->frozen = !trainable;
    else if (s == KC_STATUS_OK && trainable) m->frozen = false; /* a layer trains: the model does */
    free(f);
    return s;
}

kc_status kc_model_set_trainable_from(kc_model *m, const char *name) {
    KC_TRY(check_model(m, "kc_model_set_trainable_from"));
    int at = name ? kc__name_find(&m->names, m->layers, name) : -1;
    if (at < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s' has no layer named '%s' (see `kerac summary`)", m->name,
                        name ? name : "(null)");
    bool *f = kc__calloc((size_t)KC_MAX(m->n_layers, 1), sizeof *f, "layer flags");
    if (!f) return KC_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < m->n_layers; i++) f[i] = i < at;
    kc_status s = apply_flags(m, f);
    if (s == KC_STATUS_OK) m->frozen = false;
    free(f);
    return s;
}
