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
    return s;
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
