/* keras_nest.c — the nested models of a model read from a Keras file, for the writers: the
 * reader inlined them (keras_json_nested.c) and kept, per layer, the nested model holding it
 * and its name there; the writers put the nesting back (keras_json_write.c, keras_h5.c,
 * keras_h5_legacy.c), so that Keras finds model.get_layer("base") in kerac's file.
 *
 * The entries of a model (or nested model) are written in the order of the model's layers,
 * a nested model where its first layer comes: the order the reader inlined them in, which is
 * the order of Keras's config (its model.layers). The layers keep the Keras 3 weight paths
 * the reader gave them (kc_layer.keras_path), which a save writes back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keras_nest.h"

/* The nested model holding node's layer (a shared layer's later call: its first call's). */
static int nest_of(const kc_model *m, int node) {
    const kc_layer *l = kc__model_layer(m, node);
    if (l->shares >= 0) l = kc__model_layer(m, l->shares);
    return l->keras_nest;
}

int kc__nest_child(const kc_model *m, int node, int scope) {
    int c = nest_of(m, node);
    if (c == scope) return 0;
    for (int hops = 0; c > 0 && c <= m->n_nests && hops <= m->n_nests; hops++) {
        if (m->nests[c - 1].parent == scope) return c;
        c = m->nests[c - 1].parent;
    }
    return -1;
}

int kc__nest_items(const kc_model *m, int scope, int *items) {
    int n = 0;
    for (int node = 0; node < m->n_layers; node++) {
        int c = kc__nest_child(m, node, scope);
        if (kc__model_layer(m, node)->shares >= 0) continue; /* a later call: written with its layer */
        bool seen = false;
        for (int j = 0; j < n && c > 0 && !seen; j++) seen = items[j] == -c;
        if (c == 0) items[n++] = node;
        else if (c > 0 && !seen) items[n++] = -c;
    }
    return n;
}

int kc__nest_layers(const kc_model *m, int scope, int *out) {
    int *items = malloc(((size_t)m->n_layers + 1) * sizeof *items);
    if (!items) return 0;
    int n_items = kc__nest_items(m, scope, items), n = 0;
    for (int i = 0; i < n_items; i++) {
        if (items[i] >= 0) out[n++] = items[i];
        else n += kc__nest_layers(m, -items[i], out + n);
    }
    free(items);
    return n;
}

bool kc__nest_frozen(const kc_model *m, int scope) {
    bool any = false;
    for (int i = 0; i < m->n_layers; i++) {
        if (kc__nest_child(m, i, scope) < 0) continue;
        if (!kc__model_layer(m, i)->frozen) return false;
        any = true;
    }
    return any;
}

/* Where nested model k is called and read: ng->in[k], ng->out[k]; false when it is called
 * on several tensors or read at several layers. */
static bool nest_ends(const kc_model *m, kc__nesting *ng, int k) {
    ng->in[k] = ng->out[k] = -1;
    int last = kc__model_output(m);
    for (int j = 0; j < m->n_layers; j++) {
        const kc_layer *l = kc__model_layer(m, j);
        bool inside = kc__nest_child(m, j, k) >= 0;
        for (int q = 0; q < l->n_in; q++) {
            int x = l->in[q];
            bool x_inside = kc__nest_child(m, x, k) >= 0;
            int *end = inside && !x_inside ? &ng->in[k] : !inside && x_inside ? &ng->out[k] : NULL;
            if (end && *end >= 0 && *end != x) return false;
            if (end) *end = x;
        }
    }
    if (kc__nest_child(m, last, k) >= 0) {
        if (ng->out[k] >= 0 && ng->out[k] != last) return false;
        ng->out[k] = last;
    }
    return ng->in[k] >= 0 && ng->out[k] >= 0;
}

/* A Sequential nested model (k > 0) must be a chain from its input to its output; so must the
 * model (k == 0), from its InputLayer, to be written as a Sequential. */
static bool nest_chain(const kc_model *m, const kc__nesting *ng, int k, int *items) {
    int n = kc__nest_items(m, k, items), prev = k ? ng->in[k] : 0;
    if (k == 0 && (n == 0 || items[0] != 0)) return false;
    for (int i = k ? 0 : 1; i < n; i++) {
        const kc_layer *l = items[i] >= 0 ? kc__model_layer(m, items[i]) : NULL;
        int from = l ? (l->n_in == 1 ? l->in[0] : -2) : ng->in[-items[i]];
        if (from != prev) return false;
        prev = l ? items[i] : ng->out[-items[i]];
    }
    return prev == (k ? ng->out[k] : kc__model_output(m));
}

kc_status kc__nesting_init(const kc_model *m, kc__nesting *ng) {
    memset(ng, 0, sizeof *ng);
    if (m->n_nests == 0 || m->sequential) return kc__h5_keras_order(m, &ng->order, false);
    ng->n = m->n_nests;
    ng->in = calloc((size_t)ng->n + 1, sizeof *ng->in);
    ng->out = calloc((size_t)ng->n + 1, sizeof *ng->out);
    int *items = malloc(((size_t)m->n_layers + 1) * sizeof *items);
    if (!ng->in || !ng->out || !items) {
        free(items);
        kc__nesting_free(ng);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving the nested models of '%s'", m->name);
    }
    bool ok = nest_of(m, 0) == 0;
    for (int i = 0; i < m->n_layers && ok; i++) {
        const kc_layer *l = kc__model_layer(m, i);
        ok = l->keras_nest >= 0 && l->keras_nest <= ng->n && (l->shares < 0 || l->keras_nest == 0);
        if (ok && l->shares >= 0) ok = nest_of(m, i) == 0; /* a layer shared inside a nested model: flat */
    }
    for (int k = 1; k <= ng->n && ok; k++) {
        int p = m->nests[k - 1].parent;
        ok = p >= 0 && p < k && !m->nests[k - 1].multi && nest_ends(m, ng, k) && (!m->nests[k - 1].sequential || nest_chain(m, ng, k, items));
    }
    ng->sequential = ok && m->keras_sequential && nest_chain(m, ng, 0, items);
    free(items);
    ng->on = ok;
    if (!ok)
        kc__log(KC_LOG_INFO, "model '%s': its nested models do not each take one tensor and give one at one call; "
                             "saving it flattened", m->name);
    kc_status s = kc__h5_keras_order(m, &ng->order, ok); /* nested: the inlined layers at their keras_path */
    if (s != KC_STATUS_OK) kc__nesting_free(ng);
    return s;
}

int kc__nesting_flavour(const kc_model *m) {
    kc__nesting ng;
    if (m->n_nests == 0 || kc__nesting_init(m, &ng) != KC_STATUS_OK) return 0;
    int f = ng.on ? m->keras_from : 0;
    kc__nesting_free(&ng);
    return f;
}

void kc__nesting_free(kc__nesting *ng) {
    free(ng->in);
    free(ng->out);
    kc__korder_free(&ng->order);
    ng->in = ng->out = NULL;
}
