/* plan.c — lifetimes and offsets of every buffer of one step, inside one arena.
 *
 * Time line of a step over L nodes (topological order):
 *   forward of node i at t = i, the loss at t = L, backward of node i at t = 2L - i.
 * Buffers and their lifetimes:
 *   y of node i      training: [i, 2L - i] (backward of i and of its consumers read it)
 *                    inference: [i, last consumer] (the output: to the end)
 *   dy of node i     [first write (loss or a consumer's backward), 2L - i]
 *   extra dx         a consumer that is not the first to write dy of its input writes
 *                    into its own buffer at its backward, then adds it in: [t, t]; none
 *                    when the layer's backward can add into dy itself (dx_adds: a
 *                    convolution's backward-data with beta = 1)
 *   aux of node i    training: [i, 2L - i]; inference: [i, i]
 *   workspace        one region shared by every node (only one node runs at a time)
 * Flatten and Reshape alias their input: a group of aliased nodes shares one y and
 * one dy, whose lifetime covers every member. A ReLU whose forward the Add before it does
 * (fwd_absorbed, fuse.c) has that Add's y memory, alive as long as either needs it, and a dy
 * of its own.
 * an Add's input gradients are its output gradient. An input whose dy the Add writes
 * first (its consumer with the latest index) shares the Add's dy buffer instead of getting a
 * copy (plan_share_add), when nothing can write that buffer before every sharer has read it:
 * the Add's own dy is not shared further; one input always (only it reads the buffer after the
 * Add's backward, and what its other consumers add in is its own gradient); a second one when
 * the input with the higher index is a BatchNormalization that only the Add reads and that
 * writes nothing into its dy, and every other consumer of the lower one runs its backward after
 * that batch norm's (a lower index). Then the Add's backward copies nothing for them.
 * A batch norm's input likewise shares the batch norm's dy when the backend takes dx == dy
 * (batchnorm_dx_in_place) and the batch norm is its consumer with the latest index
 * (plan_share_bn): the batch norm's backward writes the input's gradient over its own.
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
    free(p->dx_add);
    free(p->group);
    free(p->needs_grad);
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

/* One kc__plan_build call: the graph's lifetimes and the buffers to place. */
typedef struct planner {
    kc_model *m;
    kc_plan *p;
    int L, out, batch;
    bool training;
    int *group;     /* (L) alias group of each node */
    int *y_end;     /* (L) last time each y is alive */
    int *dy_start;  /* (L) first write of each group's dy (-1: none) */
    int *share;     /* (L) the group whose dy buffer each group uses (itself unless plan_share_add) */
    int *dy_end;    /* (L) last time each group's dy buffer is read */
    pbuf *bufs;     /* the buffers to place */
    int nb;
} planner;

static size_t y_bytes(const planner *q, int node) {
    return align64((size_t)q->batch * (size_t)kc__shape_size(&q->m->layers[node]->out_shape) * sizeof(float));
}

/* The plan's arrays (all NONE) and the planner's scratch; false when out of memory. */
static bool plan_alloc(planner *q) {
    kc_plan *p = q->p;
    int L = q->L;
    p->y_off = malloc((size_t)L * sizeof(size_t));
    p->dy_off = malloc((size_t)L * sizeof(size_t));
    p->aux_off = malloc((size_t)L * sizeof(size_t));
    p->ws_off = malloc((size_t)L * sizeof(size_t));
    p->dx_tmp_off = malloc((size_t)L * KC_MAX_INPUTS * sizeof(size_t));
    p->needs_grad = calloc((size_t)L, sizeof(bool));
    p->dx_add = calloc((size_t)L * KC_MAX_INPUTS, sizeof(bool));
    q->group = malloc((size_t)L * sizeof(int));
    q->y_end = malloc((size_t)L * sizeof(int));
    q->dy_start = malloc((size_t)L * sizeof(int));
    q->share = malloc((size_t)L * sizeof(int));
    q->dy_end = malloc((size_t)L * sizeof(int));
    q->bufs = calloc((size_t)L * (4 + KC_MAX_INPUTS) + 1, sizeof(pbuf));
    if (!p->y_off || !p->dy_off || !p->aux_off || !p->ws_off || !p->dx_tmp_off || !p->dx_add || !p->needs_grad ||
        !q->group || !q->y_end ||
        !q->dy_start || !q->share || !q->dy_end || !q->bufs)
        return false;
    for (int i = 0; i < L; i++) {
        p->y_off[i] = p->dy_off[i] = p->aux_off[i] = p->ws_off[i] = KC_PLAN_NONE;
        for (int k = 0; k < KC_MAX_INPUTS; k++) p->dx_tmp_off[i * KC_MAX_INPUTS + k] = KC_PLAN_NONE;
    }
    return true;
}

/* Alias groups, and how long each group's y lives. */
static void plan_lifetimes(planner *q) {
    int L = q->L, out = q->out, *group = q->group, *y_end = q->y_end;
    bool training = q->training;
    for (int i = 0; i < L; i++) {
        const kc_layer *l = q->m->layers[i];
        group[i] = kc__layer_is_alias(l, training) ? group[l->in[0]] : i;
        y_end[i] = training ? 2 * L - i : (i == out ? L : i);
        q->dy_start[i] = -1;
        q->share[i] = i;
        q->dy_end[i] = 2 * L - i;
    }
    for (int j = 0; j < L; j++) {
        const kc_layer *l = q->m->layers[j];
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
    for (int i = 0; i < L; i++) { /* a ReLU in its Add's y: the Add's y lives as long as both */
        const kc_layer *l = q->m->layers[i];
        if (!l->fwd_absorbed || group[i] != i) continue;
        const int g = group[l->in[0]];
        if (y_end[i] > y_end[g]) y_end[g] = y_end[i];
    }
}

/* The y buffer of each group and each node's aux; returns the largest workspace. */
static size_t plan_forward_buffers(planner *q) {
    kc_plan *p = q->p;
    int L = q->L;
    size_t ws_max = 0;
    for (int i = 0; i < L; i++) {
        const kc_layer *l = q->m->layers[i];
        if (q->group[i] == i && !l->fwd_absorbed) {
            size_t bytes = y_bytes(q, i);
            q->bufs[q->nb++] = (pbuf){bytes, i, q->y_end[i], &p->y_off[i], 0};
            p->activation_bytes += bytes;
        }
        /* aux is state kept for the backward: none outside training */
        size_t aux = q->training && l->ops->aux_bytes ? l->ops->aux_bytes(l, q->batch) : 0;
        if (aux) {
            q->bufs[q->nb++] = (pbuf){align64(aux), i, q->training ? 2 * L - i : i, &p->aux_off[i], 0};
            p->aux_bytes += align64(aux);
        }
        size_t ws = l->ops->workspace_bytes ? l->ops->workspace_bytes(l, q->batch, q->m->be) : 0;
        if (ws > ws_max) ws_max = ws;
    }
    return ws_max;
}

/* Which nodes need a gradient: those with weights that train, and every node downstream
 * of one. Nothing below the lowest trainable layer gets a gradient buffer or a backward. */
static void plan_needs_grad(planner *q) {
    for (int i = 0; i < q->L; i++) {
        const kc_layer *l = q->m->layers[i];
        bool need = kc__layer_trains(l); /* a shared layer's later call too: its views train */
        for (int k = 0; k < l->n_in && !need; k++) need = q->p->needs_grad[l->in[k]];
        q->p->needs_grad[i] = need;
    }
}

/* How many of layer l's inputs before input k read node i (Add(x, x): only the first may
 * share; the second's copy is added into the shared buffer after the Add's backward). */
static int reads_before(const kc_layer *l, int i, int k) {
    int n = 0;
    for (int k2 = 0; k2 < k; k2++) n += l->in[k2] == i;
    return n;
}

/* How many inputs of the graph's nodes read node i; the largest index of them other than j in *other. */
static int consumers_of(const kc_model *m, int i, int j, int *other) {
    int n = 0;
    *other = -1;
    for (int c = 0; c < m->n_layers; c++)
        for (int k = 0; k < m->layers[c]->n_in; k++)
            if (m->layers[c]->in[k] == i) {
                n++;
                if (c != j && c > *other) *other = c;
            }
    return n;
}

/* A BatchNormalization that writes nothing into its own dy (batchnorm.c uses it as scratch
 * when its input takes no gradient, and masks it in place when a ReLU is fused after it). */
static bool bn_keeps_dy(const planner *q, const kc_layer *l) {
    return l->ops == &kc__batchnorm_ops && !l->relu_after && l->n_in == 1 && q->p->needs_grad[l->in[0]];
}

/* the inputs of Add node j whose dy may share j's dy buffer (see the top of the file);
 * called before j's inputs get their buffers. Sets share[] and extends dy_end[j]. */
static void plan_share_add(planner *q, int j) {
    const kc_layer *l = q->m->layers[j];
    if (l->ops != &kc__add_ops || q->share[j] != j || l->shares >= 0 || l->calls != 0) return;
    const kc__merge_cfg *c = l->cfg;
    int cand[2], nc = 0;
    for (int k = 0; k < l->n_in && nc < 2; k++) {
        const int g = l->in[k];
        const kc_layer *in = q->m->layers[g];
        if (!c->same[k] || q->group[g] != g || q->dy_start[g] >= 0 || !q->p->needs_grad[g] || g == q->group[0] ||
            in->shares >= 0 || in->calls != 0 || reads_before(l, g, k) > 0)
            continue;
        cand[nc++] = g;
    }
    if (nc == 0) return;
    if (nc == 2) { /* the higher-index one must keep its dy and be read by j only, the lower one's
                      other consumers must run their backward after it */
        const int hi = KC_MAX(cand[0], cand[1]), lo = KC_MIN(cand[0], cand[1]);
        int other_hi, other_lo;
        if (!bn_keeps_dy(q, q->m->layers[hi]) || consumers_of(q->m, hi, j, &other_hi) != 1 ||
            (consumers_of(q->m, lo, j, &other_lo), other_lo >= hi) || reads_before(l, lo, l->n_in) > 1)
            nc = 1;
    }
    for (int i = 0; i < nc; i++) {
        q->share[cand[i]] = j;
        if (2 * q->L - cand[i] > q->dy_end[j]) q->dy_end[j] = 2 * q->L - cand[i];
    }
}

/* A batch norm j's input g shares j's dy buffer (plan_share_bn): the backward then writes g's
 * gradient over j's dy (the backend's batchnorm_dx_in_place). When the backend takes dx == dy,
 * j's dy is j's own (not an Add's, whose other input may read it later), j and g are nobody's
 * shared calls or aliases, and j is g's consumer with the latest index (g's dy is first written
 * by j; g's other consumers run their backward after j's and add into it as before). Called
 * before g gets its buffer; extends j's dy to g's backward. One gradient buffer less, and the
 * pass writes into the lines it has just read instead of fetching a buffer's (bench/RESULTS.md,
 * "Batch norm's gradient in place"). */
static void plan_share_bn(planner *q, int j) {
    const kc_layer *l = q->m->layers[j];
    if (l->ops != &kc__batchnorm_ops || !q->m->be || !q->m->be->batchnorm_dx_in_place || q->share[j] != j ||
        q->group[j] != j || l->shares >= 0 || l->calls != 0 || l->n_in != 1)
        return;
    const int g = l->in[0];
    const kc_layer *in = q->m->layers[g];
    if (q->group[g] != g || q->share[g] != g || q->dy_start[g] >= 0 || !q->p->needs_grad[g] || g == q->group[0] ||
        in->shares >= 0 || in->calls != 0)
        return;
    q->share[g] = j;
    if (2 * q->L - g > q->dy_end[j]) q->dy_end[j] = 2 * q->L - g;
}

/* Training: dy of each group is first written by the loss (output group) or by the
 * consumer with the latest index (its backward runs first); later writers use their
 * own buffer (dx_tmp) and add. A node that needs no gradient (plan_needs_grad: the input,
 * frozen layers below every trainable one) gets none. */
static void plan_gradients(planner *q) {
    kc_plan *p = q->p;
    int L = q->L, *group = q->group, *dy_start = q->dy_start;
    plan_needs_grad(q);
    dy_start[group[q->out]] = L;
    for (int j = L - 1; j >= 1; j--) {
        const kc_layer *l = q->m->layers[j];
        if ((l->ops->flags & KC_LAYER_INPUT) || kc__layer_is_alias(l, true) || !p->needs_grad[j]) continue;
        plan_share_add(q, j);
        plan_share_bn(q, j);
        for (int k = 0; k < l->n_in; k++) {
            int g = group[l->in[k]];
            if (g == group[0] || !p->needs_grad[l->in[k]]) continue;
            int t = 2 * L - j;
            if (dy_start[g] < 0) {
                dy_start[g] = t;
            } else if (l->ops->dx_adds && l->ops->dx_adds(l, k, q->batch, q->m->be)) {
                p->dx_add[j * KC_MAX_INPUTS + k] = true;
            } else {
                size_t bytes = y_bytes(q, g);
                q->bufs[q->nb++] = (pbuf){bytes, t, t, &p->dx_tmp_off[j * KC_MAX_INPUTS + k], 0};
                p->gradient_bytes += bytes;
            }
        }
    }
    for (int g = 1; g < L; g++) {
        if (group[g] != g || dy_start[g] < 0 || q->share[g] != g) continue;
        size_t bytes = y_bytes(q, g);
        q->bufs[q->nb++] = (pbuf){bytes, dy_start[g], q->dy_end[g], &p->dy_off[g], 0};
        p->gradient_bytes += bytes;
    }
    for (int i = 0; i < L; i++)
        if (group[i] != i) p->dy_off[i] = KC_PLAN_NONE; /* resolved by plan_place */
}

/* Place every buffer and the shared workspace; aliased nodes take their group's offsets. */
static kc_status plan_place(planner *q, size_t ws_max) {
    kc_plan *p = q->p;
    size_t ws_slot = KC_PLAN_NONE;
    if (ws_max) q->bufs[q->nb++] = (pbuf){align64(ws_max), 0, 2 * q->L + 1, &ws_slot, 0};
    size_t total = place_all(q->bufs, q->nb);
    if (total == (size_t)-1)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "planning model '%s': out of host memory", q->m->name);
    for (int i = 0; i < q->L; i++)
        if (q->group[i] == i && q->share[i] != i) p->dy_off[i] = p->dy_off[q->share[i]];
    for (int i = 0; i < q->L; i++) /* before the aliases below, which may read it */
        if (q->group[i] == i && q->m->layers[i]->fwd_absorbed) p->y_off[i] = p->y_off[q->group[q->m->layers[i]->in[0]]];
    for (int i = 0; i < q->L; i++) {
        if (q->group[i] != i) {
            p->y_off[i] = p->y_off[q->group[i]];
            p->dy_off[i] = p->dy_off[q->group[i]];
        }
        p->ws_off[i] = ws_slot;
    }
    p->arena_bytes = total ? total : 64;
    p->workspace_bytes = ws_max;
    return KC_STATUS_OK;
}

int64_t kc__plan_node_elems(const kc_model *m, int i, int batch) {
    const int g = m->plan.group ? m->plan.group[i] : i;
    return (int64_t)batch * kc__shape_size(&m->layers[g]->out_shape);
}

kc_status kc__plan_build(kc_model *m, int batch, bool training, kc_plan *p) {
    kc__plan_free(p);
    kc__model_fuse(m, training);
    planner q = {.m = m, .p = p, .L = m->n_layers, .out = kc__model_output(m), .batch = batch, .training = training};
    p->batch = batch;
    p->training = training;
    p->n_nodes = q.L;
    kc_status s = KC_STATUS_OK;
    if (!plan_alloc(&q)) {
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "planning model '%s': out of host memory", m->name);
    } else {
        plan_lifetimes(&q);
        size_t ws_max = plan_forward_buffers(&q);
        if (training) plan_gradients(&q);
        s = plan_place(&q, ws_max);
    }
    if (s == KC_STATUS_OK) {
        p->group = q.group;
        q.group = NULL;
    }
    free(q.group);
    free(q.y_end);
    free(q.dy_start);
    free(q.share);
    free(q.dy_end);
    free(q.bufs);
    if (s != KC_STATUS_OK) kc__plan_free(p);
    return s;
}
