/* plan.c — lifetimes and offsets of every buffer of one step, inside one arena.
 *
 * Time line of a step over L nodes (topological order):
 *   forward of node i at t = i, the loss at t = L, backward of node i at t = 2L - i.
 * Buffers and their lifetimes:
 *   y of node i      training: [i, 2L - i] (backward of i and of its consumers read it)
 *                    inference: [i, last consumer] (the output: to the end)
 *   dy of node i     [first write (loss or a consumer's backward), 2L - i]
 *   extra dx         a consumer that is not the first to write dy of its input writes
 *                    into its own buffer at its backward, then adds it in: [t, t]
 *   aux of node i    training: [i, 2L - i]; inference: [i, i]
 *   workspace        one region shared by every node (only one node runs at a time)
 * Flatten and Reshape alias their input: a group of aliased nodes shares one y and
 * one dy, whose lifetime covers every member.
 * Placement: greedy first-fit by decreasing size, each buffer at the lowest offset that
 * overlaps no placed buffer alive at the same time. */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct pbuf {
    size_t bytes;
    int start, end;
    size_t *slot;   /* where to write the offset */
    size_t offset;
} pbuf;

void kc__plan_free(kc_plan *p) {
    free(p->y_off);
    free(p->dy_off);
    free(p->aux_off);
    free(p->ws_off);
    free(p->dx_tmp_off);
    free(p->group);
    memset(p, 0, sizeof *p);
}

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

static int cmp_size_desc(const void *a, const void *b) {
    const pbuf *x = *(const pbuf *const *)a, *y = *(const pbuf *const *)b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return x->start - y->start;
}

static size_t place_all(pbuf *bufs, int n) {
    pbuf **order = malloc((size_t)(n ? n : 1) * sizeof *order);
    pbuf **placed = malloc((size_t)(n ? n : 1) * sizeof *placed);
    if (!order || !placed) {
        free(order);
        free(placed);
        return (size_t)-1;
    }
    for (int i = 0; i < n; i++) order[i] = &bufs[i];
    qsort(order, (size_t)n, sizeof *order, cmp_size_desc);
    size_t total = 0;
    int np = 0;
    for (int i = 0; i < n; i++) {
        pbuf *b = order[i];
        size_t off = 0;
        /* repeat: bump past any live overlapping buffer until none conflicts */
        for (bool moved = true; moved;) {
            moved = false;
            for (int k = 0; k < np; k++) {
                pbuf *q = placed[k];
                if (q->end < b->start || b->end < q->start) continue; /* not alive together */
                if (off + b->bytes <= q->offset || q->offset + q->bytes <= off) continue;
                off = q->offset + q->bytes;
                moved = true;
            }
        }
        b->offset = off;
        placed[np++] = b;
        if (off + b->bytes > total) total = off + b->bytes;
        *b->slot = off;
    }
    free(order);
    free(placed);
    return total;
}

kc_status kc__plan_build(kc_model *m, int batch, bool training, kc_plan *p) {
    kc__plan_free(p);
    int L = m->n_layers, out = kc__model_output(m);
    p->batch = batch;
    p->training = training;
    p->n_nodes = L;
    p->y_off = malloc((size_t)L * sizeof(size_t));
    p->dy_off = malloc((size_t)L * sizeof(size_t));
    p->aux_off = malloc((size_t)L * sizeof(size_t));
    p->ws_off = malloc((size_t)L * sizeof(size_t));
    p->dx_tmp_off = malloc((size_t)L * KC_MAX_INPUTS * sizeof(size_t));
    int *group = malloc((size_t)L * sizeof(int));
    int *y_end = malloc((size_t)L * sizeof(int));
    int *dy_start = malloc((size_t)L * sizeof(int));
    pbuf *bufs = calloc((size_t)L * (4 + KC_MAX_INPUTS) + 1, sizeof(pbuf));
    kc_status s = KC_STATUS_OK;
    if (!p->y_off || !p->dy_off || !p->aux_off || !p->ws_off || !p->dx_tmp_off || !group || !y_end || !dy_start ||
        !bufs) {
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "planning model '%s': out of host memory", m->name);
        goto done;
    }
    for (int i = 0; i < L; i++) {
        p->y_off[i] = p->dy_off[i] = p->aux_off[i] = p->ws_off[i] = KC_PLAN_NONE;
        for (int k = 0; k < KC_MAX_INPUTS; k++) p->dx_tmp_off[i * KC_MAX_INPUTS + k] = KC_PLAN_NONE;
    }
    /* alias groups and lifetimes of y */
    for (int i = 0; i < L; i++) {
        const kc_layer *l = m->layers[i];
        group[i] = kc__layer_is_alias(l, training) ? group[l->in[0]] : i;
        y_end[i] = training ? 2 * L - i : (i == out ? L : i);
        dy_start[i] = -1;
    }
    for (int j = 0; j < L; j++) {
        const kc_layer *l = m->layers[j];
        for (int k = 0; k < l->n_in; k++) {
            int g = group[l->in[k]];
            if (!training && j > y_end[g]) y_end[g] = j;
        }
        if (group[j] != j && y_end[j] > y_end[group[j]]) y_end[group[j]] = y_end[j];
    }
    if (!training && y_end[group[out]] < L) y_end[group[out]] = L;
    if (training)
        for (int i = 0; i < L; i++)
            if (group[i] != i && y_end[i] > y_end[group[i]]) y_end[group[i]] = y_end[i];

    int nb = 0;
    size_t act_total = 0, grad_total = 0, aux_total = 0, ws_max = 0;
    for (int i = 0; i < L; i++) {
        const kc_layer *l = m->layers[i];
        if (group[i] == i) {
            size_t bytes = align64((size_t)batch * (size_t)kc__shape_size(&l->out_shape) * sizeof(float));
            bufs[nb++] = (pbuf){bytes, i, y_end[i], &p->y_off[i], 0};
            act_total += bytes;
        }
        /* aux is state kept for the backward: none outside training */
        size_t aux = training && l->ops->aux_bytes ? l->ops->aux_bytes(l, batch) : 0;
        if (aux) {
            bufs[nb++] = (pbuf){align64(aux), i, training ? 2 * L - i : i, &p->aux_off[i], 0};
            aux_total += align64(aux);
        }
        size_t ws = l->ops->workspace_bytes ? l->ops->workspace_bytes(l, batch, m->be) : 0;
        if (ws > ws_max) ws_max = ws;
    }
    if (training) {
        /* dy of each group: first written by the loss (output group) or by the consumer
         * with the latest index (its backward runs first); later writers use their own
         * buffer (dx_tmp) and add. The input group needs no gradient. */
        int g_out = group[out];
        dy_start[g_out] = L;
        for (int j = L - 1; j >= 1; j--) {
            const kc_layer *l = m->layers[j];
            if (l->ops->flags & (KC_LAYER_ALIAS | KC_LAYER_INPUT)) continue;
            for (int k = 0; k < l->n_in; k++) {
                int g = group[l->in[k]];
                if (g == group[0]) continue;
                int t = 2 * L - j;
                if (dy_start[g] < 0) {
                    dy_start[g] = t;
                } else {
                    size_t bytes = align64((size_t)batch * (size_t)kc__shape_size(&m->layers[g]->out_shape) * sizeof(float));
                    bufs[nb++] = (pbuf){bytes, t, t, &p->dx_tmp_off[j * KC_MAX_INPUTS + k], 0};
                    grad_total += bytes;
                }
            }
        }
        for (int g = 1; g < L; g++) {
            if (group[g] != g || dy_start[g] < 0) continue;
            size_t bytes = align64((size_t)batch * (size_t)kc__shape_size(&m->layers[g]->out_shape) * sizeof(float));
            bufs[nb++] = (pbuf){bytes, dy_start[g], 2 * L - g, &p->dy_off[g], 0};
            grad_total += bytes;
        }
        for (int i = 0; i < L; i++)
            if (group[i] != i) p->dy_off[i] = KC_PLAN_NONE; /* resolved below */
    }
    size_t ws_slot = KC_PLAN_NONE;
    if (ws_max) bufs[nb++] = (pbuf){align64(ws_max), 0, 2 * L + 1, &ws_slot, 0};
    size_t total = place_all(bufs, nb);
    if (total == (size_t)-1) {
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "planning model '%s': out of host memory", m->name);
        goto done;
    }
    for (int i = 0; i < L; i++) {
        if (group[i] != i) {
            p->y_off[i] = p->y_off[group[i]];
            p->dy_off[i] = p->dy_off[group[i]];
        }
        p->ws_off[i] = ws_slot;
    }
    p->arena_bytes = total ? total : 64;
    p->activation_bytes = act_total;
    p->gradient_bytes = grad_total;
    p->aux_bytes = aux_total;
    p->workspace_bytes = ws_max;
    p->group = group;
    group = NULL;
done:
    free(group);
    free(y_end);
    free(dy_start);
    free(bufs);
    if (s != KC_STATUS_OK) kc__plan_free(p);
    return s;
}
