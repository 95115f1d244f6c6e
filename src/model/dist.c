/* dist.c — data-parallel training over a kc_collective (kc_fit_opts.collective): the
 * start-up agreement (same kerac version and model on every rank, rank 0's weights), the
 * sampler's slice of each epoch's order, the gradient all-reduce and the reduction of the
 * loss and metric sums. fit.c calls these at its hook points; with no collective (or one
 * rank) every one of them does nothing. All ranks make the same calls in the same order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dist.h"

bool kc__dist_on(const kc_collective *c) { return c && c->size > 1; }
int kc__dist_size(const kc_collective *c) { return kc__dist_on(c) ? c->size : 1; }

/* A collective call's failure as a kerac status naming what was being done. */
static kc_status coll_fail(const kc_collective *c, kc_status s, const char *doing) {
    const char *why = c->error ? c->error(c->ctx) : "";
    return kc__fail(s == KC_STATUS_OK ? KC_STATUS_IO : s,
                    "rank %d of %d: %s failed: %s; another rank may have stopped or died (see its messages), "
                    "restart the run from its last checkpoint", c->rank, c->size, doing, why && *why ? why : "?");
}

static uint64_t hash_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull; /* FNV-1a */
    return h;
}

/* The model's identity: its Keras config and every weight's name and shape. */
static kc_status model_hash(kc_model *m, uint64_t *out) {
    char *json = NULL;
    KC_TRY(kc_model_to_json(m, 3, &json));
    uint64_t h = hash_bytes(0xcbf29ce484222325ull, json, strlen(json));
    kc_free(json);
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) {
            const kc_weight *w = &m->layers[i]->w[k];
            h = hash_bytes(h, w->name, strlen(w->name));
            h = hash_bytes(h, &w->shape.rank, sizeof w->shape.rank);
            h = hash_bytes(h, w->shape.dim, (size_t)w->shape.rank * sizeof w->shape.dim[0]);
            bool trains = kc__weight_trains(m->layers[i], w);
            h = hash_bytes(h, &trains, sizeof trains);
        }
    *out = h;
    return KC_STATUS_OK;
}

/* GPU ranks: the gradients summed by the backend's device collective (NCCL) rather than
 * through the host. Every rank checks that it can; when one cannot (no NCCL), all go
 * through the host and the caller's collective, with a warning naming the rank and why.
 * Rank 0's communicator id reaches the others over the caller's collective. */
typedef struct dev_id {
    int32_t ok;
    char id[128];
    char why[400];
} dev_id;

static kc_status device_coll_start(kc_model *m, const kc_collective *c) {
    kc_backend *be = m->be;
    m->dist_device = false;
    if (!be->coll_unique_id || !be->coll_init || !be->coll_allreduce_sum || !be->coll_join) return KC_STATUS_OK;
    if (m->dist_device_ranks == c->size) /* a later fit of the same ranks: the communicator is there */
        return m->dist_device = true, KC_STATUS_OK;
    dev_id me = {0};
    kc_status s = be->coll_unique_id(be, c->rank == 0 ? me.id : NULL, sizeof me.id);
    me.ok = s == KC_STATUS_OK;
    if (!me.ok) snprintf(me.why, sizeof me.why, "%s", kc_last_error());
    dev_id *all = kc__calloc((size_t)c->size, sizeof *all, "the ranks' communicator ids");
    if (!all) return KC_STATUS_OUT_OF_MEMORY;
    s = c->allgather(c->ctx, &me, all, sizeof me);
    if (s != KC_STATUS_OK) s = coll_fail(c, s, "exchanging the device communicator's id");
    int bad = -1;
    for (int r = 0; r < c->size && s == KC_STATUS_OK && bad < 0; r++)
        if (!all[r].ok) bad = r;
    if (s == KC_STATUS_OK && bad >= 0)
        kc__log_always(KC_LOG_WARNING, "rank %d cannot sum the gradients on the %s device (%s); all ranks send them "
                       "through the host instead (slower)", bad, be->name, all[bad].why);
    else if (s == KC_STATUS_OK && (s = be->coll_init(be, all[0].id, sizeof all[0].id, c->size, c->rank)) ==
                                      KC_STATUS_OK) {
        m->dist_device = true;
        m->dist_device_ranks = c->size;
        if (c->rank == 0 && be->coll_describe)
            kc__log_always(KC_LOG_INFO, "the gradients are summed on the devices: %s", be->coll_describe(be));
    } else if (s != KC_STATUS_OK && bad < 0)
        s = kc__wrap(s, "rank %d of %d: joining the device communicator: ", c->rank, c->size);
    free(all);
    return s;
}

typedef struct rank_id {
    char version[24];
    uint64_t model;
    int64_t examples;
} rank_id;

/* Every rank runs the same kerac on the same model and data size; then rank 0's weights. */
kc_status kc__dist_begin(kc_model *m, const kc_collective *c, int64_t n_examples) {
    if (!kc__dist_on(c)) return KC_STATUS_OK;
    if (c->rank < 0 || c->rank >= c->size || !c->allreduce_sum_f32 || !c->allreduce_sum_f64 || !c->broadcast ||
        !c->allgather)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: the collective's rank %d / size %d or functions are "
                        "not set", c->rank, c->size);
    rank_id me = {.examples = n_examples};
    snprintf(me.version, sizeof me.version, "%s", kc_version());
    KC_TRY(model_hash(m, &me.model));
    rank_id *all = kc__calloc((size_t)c->size, sizeof *all, "the ranks' identities");
    if (!all) return KC_STATUS_OUT_OF_MEMORY;
    kc_status s = c->allgather(c->ctx, &me, all, sizeof me);
    if (s != KC_STATUS_OK) s = coll_fail(c, s, "exchanging the kerac version and model hash");
    for (int r = 1; r < c->size && s == KC_STATUS_OK; r++) {
        if (strcmp(all[r].version, all[0].version) != 0)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "rank %d runs kerac %s but rank 0 runs kerac %s; every rank "
                         "must run the same kerac", r, all[r].version, all[0].version);
        else if (all[r].model != all[0].model)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "rank %d's model differs from rank 0's (model hash %016llx "
                         "vs %016llx over the config and weight shapes); give every rank the same model file",
                         r, (unsigned long long)all[r].model, (unsigned long long)all[0].model);
        else if (all[r].examples != all[0].examples)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "rank %d has %lld training examples but rank 0 has %lld; give "
                         "every rank the same data", r, (long long)all[r].examples, (long long)all[0].examples);
    }
    free(all);
    if (s != KC_STATUS_OK || m->n_params == 0) return s;
    size_t bytes = (size_t)m->n_params * sizeof(float);
    float *w = kc__calloc(1, bytes, "the weights to broadcast");
    if (!w) return KC_STATUS_OUT_OF_MEMORY;
    s = m->be->to_host(m->be, w, m->params, bytes);
    if (s == KC_STATUS_OK && (s = c->broadcast(c->ctx, w, bytes, 0)) != KC_STATUS_OK)
        s = coll_fail(c, s, "broadcasting rank 0's initial weights");
    if (s == KC_STATUS_OK) s = m->be->to_device(m->be, m->params, w, bytes);
    free(w);
    return s == KC_STATUS_OK ? device_coll_start(m, c) : s;
}

kc_status kc__dist_geometry(const kc_collective *c, int64_t n, int batch_size, bool drop_remainder,
                            int64_t *n_local, int *bs_local) {
    *n_local = n;
    *bs_local = batch_size;
    if (!kc__dist_on(c)) return KC_STATUS_OK;
    if (batch_size == KC_BATCH_SIZE_AUTO)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: batch size auto is not supported with %d ranks; give "
                        "the global batch size (a multiple of %d)", c->size, c->size);
    if (batch_size % c->size != 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: the batch size %d is the global batch and must split "
                        "evenly over the %d ranks; use a multiple of %d (e.g. %d)", batch_size, c->size, c->size,
                        (batch_size / c->size + 1) * c->size);
    *n_local = drop_remainder ? n / c->size : (n + c->size - 1) / c->size;
    *bs_local = batch_size / c->size;
    if (*n_local <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: %lld training examples leave none for each of %d ranks "
                        "with drop_remainder", (long long)n, c->size);
    return KC_STATUS_OK;
}

void kc__dist_slice(const kc_collective *c, const int64_t *order, int64_t n, int64_t n_local, int64_t *out) {
    int r = kc__dist_on(c) ? c->rank : 0, size = kc__dist_on(c) ? c->size : 1;
    for (int64_t i = 0; i < n_local; i++) out[i] = order[(i * size + r) % n]; /* padding: the order's start */
}

kc_status kc__dist_average_grads(kc_model *m, const kc_collective *c, float *grads) {
    if (!kc__dist_on(c) || m->n_trainable == 0) return KC_STATUS_OK;
    if (m->dist_device) { /* on the devices, one all-reduce of the whole slab */
        KC_TRY(m->be->coll_allreduce_sum(m->be, grads, m->n_trainable));
        KC_TRY(m->be->coll_join(m->be));
        return m->be->scale(m->be, grads, 1.0f / (float)c->size, m->n_trainable);
    }
    size_t bytes = (size_t)m->n_trainable * sizeof(float);
    if (!m->dist_host && !(m->dist_host = kc__calloc(1, bytes, "the gradients to all-reduce")))
        return KC_STATUS_OUT_OF_MEMORY; /* once per model: not on every step */
    float *host = m->dist_host;
    kc_status s = m->be->to_host(m->be, host, grads, bytes);
    if (s == KC_STATUS_OK && (s = c->allreduce_sum_f32(c->ctx, host, m->n_trainable)) != KC_STATUS_OK)
        s = coll_fail(c, s, "the all-reduce of the gradients");
    float inv = 1.0f / (float)c->size;
    for (int64_t i = 0; s == KC_STATUS_OK && i < m->n_trainable; i++) host[i] *= inv;
    if (s == KC_STATUS_OK) s = m->be->to_device(m->be, grads, host, bytes);
    return s;
}

kc_status kc__dist_sum(const kc_collective *c, double *v, int n, const char *what) {
    if (!kc__dist_on(c)) return KC_STATUS_OK;
    kc_status s = c->allreduce_sum_f64(c->ctx, v, n);
    return s == KC_STATUS_OK ? s : coll_fail(c, s, what);
}

kc_status kc__dist_any(const kc_collective *c, bool *flag) {
    double v = *flag ? 1 : 0;
    KC_TRY(kc__dist_sum(c, &v, 1, "agreeing whether to stop"));
    *flag = v > 0;
    return KC_STATUS_OK;
}

/* ---- the gradients' all-reduce in buckets, overlapped with the backward pass.
 * The gradient slab holds the trainable weights in layer order, so the backward pass
 * (last layer first) finishes it from the top down: a bucket is the slab range of
 * consecutive layers, cut where it reaches bucket_bytes, and it starts (iallreduce)
 * once the lowest of its layers has run its backward. The buckets depend only on the
 * model, so every rank starts the same ones in the same order. */
typedef struct kc__dist_ov {
    const kc_collective *c;
    int n;              /* buckets */
    int64_t *lo, *hi;   /* bucket b: the slab's [lo, hi) floats */
    int *first_layer;   /* it starts after this layer's backward */
    int *req;
    double *t_start;
    bool *done;
    int started, finished;
    float *grads;       /* the slab summed: m->grads, or the accumulated one (m->accum) */
    float *buf;         /* where the sum happens: the slab itself (cpu) or its host copy */
    bool staged;        /* a device backend: each bucket is copied to the host first */
    bool device;        /* the backend's collective (NCCL) sums the buckets in device memory */
    int64_t bucket_bytes;
} kc__dist_ov;

void kc__dist_ov_free(kc__dist_ov *o) {
    if (!o) return;
    free(o->lo);
    free(o->hi);
    free(o->first_layer);
    free(o->req);
    free(o->t_start);
    free(o->done);
    free(o);
}

/* The first trained weight's slab offset per layer (-1: none; a frozen layer's weights
 * have no gradient). */
static int64_t layer_lo(const kc_model *m, int i) {
    for (int k = 0; k < m->layers[i]->n_weights; k++)
        if (kc__weight_trains(m->layers[i], &m->layers[i]->w[k]) && m->layers[i]->w[k].grad)
            return m->layers[i]->w[k].grad - m->grads;
    return -1;
}

static kc_status ov_plan(kc_model *m, const kc_collective *c, int64_t bucket_bytes, kc__dist_ov **out) {
    kc__dist_ov *o = kc__calloc(1, sizeof *o, "the gradient buckets");
    if (!o) return KC_STATUS_OUT_OF_MEMORY;
    size_t n = (size_t)KC_MAX(m->n_layers, 1);
    o->lo = kc__calloc(n, sizeof *o->lo, "the gradient buckets");
    o->hi = kc__calloc(n, sizeof *o->hi, "the gradient buckets");
    o->first_layer = kc__calloc(n, sizeof *o->first_layer, "the gradient buckets");
    o->req = kc__calloc(n, sizeof *o->req, "the gradient buckets");
    o->t_start = kc__calloc(n, sizeof *o->t_start, "the gradient buckets");
    o->done = kc__calloc(n, sizeof *o->done, "the gradient buckets");
    if (!o->lo || !o->hi || !o->first_layer || !o->req || !o->t_start || !o->done) {
        kc__dist_ov_free(o);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    o->c = c;
    o->bucket_bytes = bucket_bytes;
    int64_t hi = m->n_trainable;
    for (int i = m->n_layers - 1; i >= 0; i--) {
        int64_t lo = layer_lo(m, i);
        if (lo < 0) continue;
        if (o->n > 0 && (o->hi[o->n - 1] - o->lo[o->n - 1]) * (int64_t)sizeof(float) < bucket_bytes) {
            /* the open bucket is not full yet: it grows down to this layer */
            o->lo[o->n - 1] = lo;
            o->first_layer[o->n - 1] = i;
        } else {
            o->lo[o->n] = lo;
            o->hi[o->n] = o->n ? o->lo[o->n - 1] : hi;
            o->first_layer[o->n++] = i;
        }
    }
    *out = o;
    return KC_STATUS_OK;
}

/* Start the buckets whose layers have all run their backward (every layer from j up),
 * then let the started ones progress. */
static kc_status ov_progress(kc_model *m, kc__dist_ov *o, int j) {
    const kc_collective *c = o->c;
    while (o->started < o->n && o->first_layer[o->started] >= j) {
        int b = o->started;
        float *p = o->buf + o->lo[b];
        size_t bytes = (size_t)(o->hi[b] - o->lo[b]) * sizeof(float);
        if (o->device) { /* enqueued on the collective's stream; done at the join */
            double t = kc__trace_t0(m);
            KC_TRY(m->be->coll_allreduce_sum(m->be, o->grads + o->lo[b], o->hi[b] - o->lo[b]));
            kc__trace_span(m, "all-reduce bucket", "collective", t);
            o->done[b] = true;
            o->started++;
            continue;
        }
        if (o->staged) KC_TRY(m->be->to_host(m->be, p, o->grads + o->lo[b], bytes));
        o->t_start[b] = kc__trace_t0(m);
        kc_status s = c->iallreduce_sum_f32(c->ctx, p, o->hi[b] - o->lo[b], &o->req[b]);
        if (s != KC_STATUS_OK) return coll_fail(c, s, "starting a bucket of the gradients' all-reduce");
        o->started++;
    }
    for (int b = o->finished; b < o->started; b++) {
        if (o->done[b]) continue;
        int done = 0;
        kc_status s = c->test(c->ctx, o->req[b], &done);
        if (s != KC_STATUS_OK) return coll_fail(c, s, "the all-reduce of a bucket of the gradients");
        if (!done) continue;
        o->done[b] = true;
        kc__trace_span(m, "all-reduce bucket", "collective", o->t_start[b]);
    }
    while (o->finished < o->started && o->done[o->finished]) o->finished++;
    return KC_STATUS_OK;
}

kc_status kc__dist_overlap_begin(kc_model *m, const kc_collective *c, int64_t bucket_bytes, float *grads) {
    if (!kc__dist_on(c) || m->n_trainable == 0 || (!m->dist_device && (!c->iallreduce_sum_f32 || !c->test ||
                                                                        !c->wait)))
        return KC_STATUS_OK;
    if (bucket_bytes <= 0) bucket_bytes = (int64_t)4 << 20;
    kc__dist_ov *o = m->dist_ov;
    if (o && (o->c != c || o->bucket_bytes != bucket_bytes)) {
        kc__dist_ov_free(o);
        m->dist_ov = o = NULL;
    }
    if (!o) KC_TRY(ov_plan(m, c, bucket_bytes, &m->dist_ov));
    o = m->dist_ov;
    o->device = m->dist_device;
    o->staged = !o->device && strcmp(m->be->name, "cpu") != 0; /* a device's memory: through the host */
    if (o->staged && !m->dist_host &&
        !(m->dist_host = kc__calloc((size_t)m->n_trainable, sizeof(float), "the gradients to all-reduce")))
        return KC_STATUS_OUT_OF_MEMORY;
    o->grads = grads;
    o->buf = o->staged ? m->dist_host : grads;
    o->started = o->finished = 0;
    memset(o->done, 0, (size_t)o->n * sizeof *o->done);
    m->dist_active = true;
    return KC_STATUS_OK;
}

kc_status kc__dist_overlap_layer(kc_model *m, int j) {
    if (!m->dist_active) return KC_STATUS_OK;
    if (m->dist_ov->staged) KC_TRY(m->be->sync(m->be)); /* the layer's gradients are written (NCCL: the
                                                              collective's stream waits on an event instead) */
    return ov_progress(m, m->dist_ov, j);
}

kc_status kc__dist_overlap_finish(kc_model *m, bool *used) {
    *used = m->dist_active;
    if (!m->dist_active) return KC_STATUS_OK;
    m->dist_active = false;
    kc__dist_ov *o = m->dist_ov;
    const kc_collective *c = o->c;
    kc_status s = o->staged ? m->be->sync(m->be) : KC_STATUS_OK;
    if (s == KC_STATUS_OK) s = ov_progress(m, o, 0); /* every layer is done: the rest start */
    if (s == KC_STATUS_OK && o->device) { /* later work waits for NCCL's stream; the mean on the device */
        double t = kc__trace_t0(m);
        s = m->be->coll_join(m->be);
        if (s == KC_STATUS_OK) s = m->be->scale(m->be, o->grads, 1.0f / (float)c->size, m->n_trainable);
        kc__trace_span(m, "wait for all-reduce", "collective", t);
        return s;
    }
    double tw = kc__trace_t0(m);
    for (int b = 0; b < o->started && s == KC_STATUS_OK; b++) {
        if (o->done[b]) continue;
        if ((s = c->wait(c->ctx, o->req[b])) != KC_STATUS_OK) s = coll_fail(c, s, "the all-reduce of the gradients");
        else kc__trace_span(m, "all-reduce bucket", "collective", o->t_start[b]);
    }
    kc__trace_span(m, "wait for all-reduce", "collective", tw);
    if (s != KC_STATUS_OK) return s;
    float inv = 1.0f / (float)c->size;
    for (int64_t i = 0; i < m->n_trainable; i++) o->buf[i] *= inv;
    if (o->staged) s = m->be->to_device(m->be, o->grads, o->buf, (size_t)m->n_trainable * sizeof(float));
    return s;
}

void kc__dist_doing(const kc_collective *c, const char *what, int epoch, int64_t step) {
    if (!kc__dist_on(c) || !c->doing) return;
    char s[96];
    snprintf(s, sizeof s, "%s, epoch %d step %lld", what, epoch + 1, (long long)step + 1);
    c->doing(c->ctx, s);
}
