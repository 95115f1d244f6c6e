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

/* A layer's inner name (a shared layer's later call: its first call's). */
static const char *inner_of(const kc_model *m, int node) {
    const kc_layer *l = kc__model_layer(m, node);
    return l->shares >= 0 ? kc__model_layer(m, l->shares)->keras_inner : l->keras_inner;
}

int kc__nest_call(const kc_model *m, int node) {
    const kc_layer *l = kc__model_layer(m, node);
    if (l->shares >= 0 || l->keras_nest <= 0) return kc__model_call_index(m, node);
    int k = 0;
    for (int i = 0; i < node; i++) {
        const kc_layer *p = kc__model_layer(m, i);
        k += p->shares < 0 && p->keras_nest == l->keras_nest && strcmp(p->keras_inner, l->keras_inner) == 0;
    }
    return k;
}

int kc__nest_call_in(const kc_model *m, const kc__nesting *ng, int node, int k) {
    int d = nest_of(m, node), c = kc__nest_call(m, node);
    for (int hops = 0; d > 0 && d != k && d <= ng->n && hops <= ng->n; hops++) {
        c /= ng->local[d] > 0 ? ng->local[d] : 1;
        d = m->nests[d - 1].parent;
    }
    return c;
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
        if (kc__model_layer(m, node)->shares >= 0 || (c == 0 && kc__nest_call(m, node) > 0))
            continue; /* a later call: written with its layer, or the nested model's later call */
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

static bool listed(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return true;
    return false;
}

/* Whether every outer node that call c of nested model k reads is in in[0..n_in) and every
 * node of it read outside (or the model's output) in out[0..n_out), its layers reading no
 * other call's; fill (n_in = n_out = 1): *in / *out, -1 so far, take the first one met. */
static bool call_edges(const kc_model *m, const kc__nesting *ng, int k, int c, int *in, int n_in, int *out, int n_out,
                       bool fill) {
    int last = kc__model_output(m);
    for (int j = 0; j <= m->n_layers; j++) {
        bool model_out = j == m->n_layers; /* the model's output, read outside */
        const kc_layer *l = model_out ? NULL : kc__model_layer(m, j);
        bool inside = !model_out && kc__nest_child(m, j, k) >= 0;
        if (inside && kc__nest_call_in(m, ng, j, k) != c) continue;
        for (int q = 0; q < (model_out ? 1 : l->n_in); q++) {
            int x = model_out ? last : l->in[q];
            bool x_inside = kc__nest_child(m, x, k) >= 0;
            if (x_inside && kc__nest_call_in(m, ng, x, k) != c) {
                if (inside) return false; /* a layer of call c reads another call's */
                continue;
            }
            int *v = inside && !x_inside ? in : !inside && x_inside ? out : NULL;
            if (!v) continue;
            if (fill && *v < 0) *v = x;
            if (!listed(v, v == in ? n_in : n_out, x)) return false;
        }
    }
    return true;
}

/* Where call c of nested model k reads and gives: *in, *out; false when it reads several
 * tensors, is read at several layers, or its layers read another call's. */
static bool nest_ends(const kc_model *m, const kc__nesting *ng, int k, int c, int *in, int *out) {
    *in = *out = -1;
    return call_edges(m, ng, k, c, in, 1, out, 1, true) && *in >= 0 && *out >= 0;
}

/* Whether nested model k (called ng->calls[k] times) is called as often in each call of its
 * parent (ng->local[k] times; its parent's calls known: parents come first) and its layers once
 * per call: each of its own layers has one node per call (a shared layer's call, or an operation
 * node made anew at each call under the same inner name). That its call c lies in its parent's
 * call c / local[k] is call_edges's check (of the parent's calls: none reads another call's). */
static bool nest_calls_ok(const kc_model *m, kc__nesting *ng, int k) {
    int p = m->nests[k - 1].parent, pc = p > 0 ? ng->calls[p] : 1;
    if (ng->calls[k] < 1) /* it holds nested models only: its calls as read */
        ng->calls[k] = pc * (m->nests[k - 1].calls > 0 ? m->nests[k - 1].calls : 1);
    if (ng->calls[k] % pc != 0 || ng->calls[k] > ng->max_calls) return false;
    ng->local[k] = ng->calls[k] / pc;
    if (ng->calls[k] == 1) return true;
    for (int i = 0; i < m->n_layers; i++) { /* each layer: one node per call */
        if (nest_of(m, i) != k || kc__nest_call(m, i) != 0) continue;
        int n = 0;
        for (int j = i; j < m->n_layers; j++) n += nest_of(m, j) == k && strcmp(inner_of(m, j), inner_of(m, i)) == 0;
        if (n != ng->calls[k]) return false;
    }
    return true;
}

/* How many times each nested model is called (ng->calls, ng->max_calls), and the arrays. */
static bool nest_alloc(const kc_model *m, kc__nesting *ng) {
    ng->calls = calloc((size_t)ng->n + 1, sizeof *ng->calls);
    if (!ng->calls) return false;
    ng->max_calls = 1;
    for (int i = 0; i < m->n_layers; i++) {
        int k = nest_of(m, i), c = kc__nest_call(m, i) + 1;
        if (k > 0 && k <= ng->n && c > ng->calls[k]) ng->calls[k] = c;
        if (c > ng->max_calls) ng->max_calls = c;
    }
    size_t cells = ((size_t)ng->n + 1) * (size_t)ng->max_calls * KC_NEST_MAX_IO;
    ng->local = calloc((size_t)ng->n + 1, sizeof *ng->local);
    ng->in = calloc((size_t)ng->n + 1, sizeof *ng->in);
    ng->out = calloc((size_t)ng->n + 1, sizeof *ng->out);
    ng->call_in = calloc(cells, sizeof *ng->call_in);
    ng->call_out = calloc(cells, sizeof *ng->call_out);
    return ng->local && ng->in && ng->out && ng->call_in && ng->call_out;
}

/* Node of call c of the layer of nested model k named `inner` there, or -1. */
static int call_node(const kc_model *m, int k, const char *inner, int c) {
    for (int n = 0; n < m->n_layers; n++)
        if (nest_of(m, n) == k && kc__nest_call(m, n) == c && strcmp(inner_of(m, n), inner) == 0) return n;
    return -1;
}

/* The ends of call c of nested model k with several inputs or outputs: input i where its
 * layer in_user[i] reads it (distinct outer nodes), output j its layer out_name[j]'s output;
 * false when the graph reads or gives anything else at that call. */
static bool multi_ends(const kc_model *m, const kc__nesting *ng, int k, int c, int *in, int *out) {
    const kc__nest *nt = &m->nests[k - 1];
    for (int i = 0; i < nt->n_in; i++) {
        int u = call_node(m, k, nt->in_user[i], c);
        if (u < 0 || nt->in_slot[i] >= kc__model_layer(m, u)->n_in) return false;
        in[i] = kc__model_layer(m, u)->in[nt->in_slot[i]];
        if (kc__nest_child(m, in[i], k) >= 0 || listed(in, i, in[i])) return false;
    }
    for (int j = 0; j < nt->n_out; j++)
        if ((out[j] = call_node(m, k, nt->out_name[j], c)) < 0) return false;
    return call_edges(m, ng, k, c, in, nt->n_in, out, nt->n_out, false);
}

/* Every call of nested model k: its ends (ng->call_in / call_out; ng->in / out: call 0's first). */
static bool nest_all_ends(const kc_model *m, kc__nesting *ng, int k) {
    bool multi = kc__nest_n_in(m, k) > 1 || kc__nest_n_out(m, k) > 1;
    for (int c = 0; c < ng->calls[k]; c++) {
        int *in = KC__NEST_IO(ng, call_in, k, c), *out = KC__NEST_IO(ng, call_out, k, c);
        if (multi ? !multi_ends(m, ng, k, c, in, out) : !nest_ends(m, ng, k, c, in, out)) return false;
    }
    ng->in[k] = KC__NEST_IO(ng, call_in, k, 0)[0];
    ng->out[k] = KC__NEST_IO(ng, call_out, k, 0)[0];
    return !multi || !m->nests[k - 1].sequential;
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
    int *items = malloc(((size_t)m->n_layers + 1) * sizeof *items);
    if (!items || !nest_alloc(m, ng)) {
        free(items);
        kc__nesting_free(ng);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving the nested models of '%s'", m->name);
    }
    bool ok = nest_of(m, 0) == 0;
    for (int i = 0; i < m->n_layers && ok; i++) {
        const kc_layer *l = kc__model_layer(m, i);
        ok = l->keras_nest >= 0 && l->keras_nest <= ng->n;
        /* a later call: of a layer of the model, or of a nested model called again */
        if (ok && l->shares >= 0) ok = nest_of(m, i) == 0 || ng->calls[nest_of(m, i)] > 1;
    }
    for (int k = 1; k <= ng->n && ok; k++) { /* the calls first: the ends see calls through the nesting */
        int p = m->nests[k - 1].parent;
        ok = p >= 0 && p < k && !m->nests[k - 1].multi && nest_calls_ok(m, ng, k);
    }
    for (int k = 1; k <= ng->n && ok; k++)
        ok = nest_all_ends(m, ng, k) && (!m->nests[k - 1].sequential || nest_chain(m, ng, k, items));
    ng->sequential = ok && m->keras_sequential && nest_chain(m, ng, 0, items);
    free(items);
    ng->on = ok;
    if (!ok)
        kc__log(KC_LOG_INFO, "model '%s': its nested models do not each take one tensor and give one at each call; "
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
    free(ng->calls);
    free(ng->local);
    free(ng->call_in);
    free(ng->call_out);
    ng->calls = ng->local = ng->call_in = ng->call_out = NULL;
    kc__korder_free(&ng->order);
    ng->in = ng->out = NULL;
}
