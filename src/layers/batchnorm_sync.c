/* batchnorm_sync.c — synchronised BatchNormalization for data-parallel training: the
 * batch statistics are those of the global batch, as one process with the whole batch
 * would have them. Forward: each rank's per-channel sum and sum of squares (and its row
 * count) are summed over the ranks (allreduce_sum_f64), giving the global mean and mean
 * of squares, hence the biased variance; the moving statistics follow them (the Keras 3
 * rule, as the backends). Backward: dx = gamma * inv_std * (dy - S(dy) / N - xhat *
 * S(dy * xhat) / N) with S the sums over every rank's rows and N their count; dgamma and
 * dbeta are this rank's own sums (the gradient all-reduce averages them).
 * Each rank's dy is its own batch-mean loss's (size times the global one's share), so
 * after the ranks' mean every gradient is exactly the global batch's.
 * The arithmetic runs on the host in double precision: the buffers are copied through
 * to_host / to_device (cheap on the CPU backend; a GPU pays two copies per layer) into the
 * model's host scratch (kc_fwd.scratch), allocated once, not on every call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batchnorm_sync.h"

/* One call's host memory, carved from the model's scratch (kc_fwd.scratch), which grows to
 * the largest layer's need on the first step and is reused after that: 2c + (2c + 1)
 * doubles, then the floats (2 * rows * c + 6c). */
typedef struct bn_host {
    double *d;
    float *f;
} bn_host;

static kc_status host_scratch(kc__host_scratch *sc, const kc__bn_sync_args *b, bn_host *out) {
    size_t nd = (size_t)(4 * b->c + 1), nf = (size_t)(2 * b->rows * b->c + 6 * b->c);
    size_t bytes = nd * sizeof(double) + nf * sizeof(float);
    if (!sc) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "synchronised BatchNormalization: no host scratch given");
    if (sc->cap < bytes) {
        void *p = realloc(sc->p, bytes);
        if (!p)
            return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for synchronised BatchNormalization "
                            "(%zu bytes)", bytes);
        sc->p = p;
        sc->cap = bytes;
    }
    memset(sc->p, 0, nd * sizeof(double));
    out->d = sc->p;
    out->f = (float *)(out->d + nd);
    return KC_STATUS_OK;
}

/* n floats of a device buffer into *cur (NULL device buffer: *out NULL); *cur moves on. */
static kc_status host_copy(kc_backend *be, const float *dev, int64_t n, float **cur, float **out) {
    *out = NULL;
    if (!dev) return KC_STATUS_OK;
    *out = *cur;
    *cur += n;
    return be->to_host(be, *out, dev, (size_t)n * sizeof(float));
}

/* v (2c + 1) summed over the ranks. */
static kc_status sum_ranks(const kc_collective *c, double *v, int n) {
    kc_status s = c->allreduce_sum_f64(c->ctx, v, n);
    if (s == KC_STATUS_OK) return s;
    const char *why = c->error ? c->error(c->ctx) : "";
    return kc__fail(s, "rank %d of %d: the all-reduce of BatchNormalization's statistics failed: %s; another rank "
                    "may have stopped or died (see its messages), restart the run from its last checkpoint",
                    c->rank, c->size, why && *why ? why : "?");
}

/* v: 2c + 1 zeroed doubles of scratch */
static kc_status forward_stats(const kc_fwd *a, const kc__bn_sync_args *b, const float *x, double *v, double *mean,
                               double *var) {
    int c = b->c;
    for (int64_t r = 0; r < b->rows; r++)
        for (int j = 0; j < c; j++) {
            double t = x[r * c + j];
            v[j] += t;
            v[c + j] += t * t;
        }
    v[2 * c] = (double)b->rows;
    kc_status s = sum_ranks(a->sync, v, 2 * c + 1);
    for (int j = 0; s == KC_STATUS_OK && j < c; j++) {
        mean[j] = v[j] / v[2 * c];
        var[j] = fmax(v[c + j] / v[2 * c] - mean[j] * mean[j], 0.0);
    }
    return s;
}

kc_status kc__bn_sync_forward(const kc_fwd *a, const kc__bn_sync_args *b) {
    kc_backend *be = a->be;
    int c = b->c;
    int64_t n = b->rows * c;
    float *x = NULL, *mm = NULL, *mv = NULL, *g = NULL, *bt = NULL;
    bn_host h;
    KC_TRY(host_scratch(a->scratch, b, &h));
    double *mean = h.d, *var = h.d + c;
    float *st = h.f, *cur = h.f + 2 * c;
    kc_status s = host_copy(be, a->x[0], n, &cur, &x);
    if (s == KC_STATUS_OK) s = host_copy(be, b->moving_mean, c, &cur, &mm);
    if (s == KC_STATUS_OK) s = host_copy(be, b->moving_var, c, &cur, &mv);
    if (s == KC_STATUS_OK) s = host_copy(be, b->gamma, c, &cur, &g);
    if (s == KC_STATUS_OK) s = host_copy(be, b->beta, c, &cur, &bt);
    if (s == KC_STATUS_OK) s = forward_stats(a, b, x, h.d + 2 * c, mean, var);
    if (s == KC_STATUS_OK) {
        for (int j = 0; j < c; j++) {
            st[j] = (float)mean[j];
            st[c + j] = (float)(1.0 / sqrt(var[j] + (double)b->epsilon));
            if (mm) mm[j] = mm[j] * b->momentum + (float)mean[j] * (1.0f - b->momentum);
            if (mv) mv[j] = mv[j] * b->momentum + (float)var[j] * (1.0f - b->momentum);
        }
        for (int64_t i = 0; i < n; i++) {
            int j = (int)(i % c);
            x[i] = (x[i] - st[j]) * st[c + j] * (g ? g[j] : 1.0f) + (bt ? bt[j] : 0.0f);
        }
        s = be->to_device(be, a->y, x, (size_t)n * sizeof(float));
    }
    if (s == KC_STATUS_OK) s = be->to_device(be, b->save_mean, st, (size_t)c * sizeof(float));
    if (s == KC_STATUS_OK) s = be->to_device(be, b->save_inv_std, st + c, (size_t)c * sizeof(float));
    if (s == KC_STATUS_OK && mm) s = be->to_device(be, b->moving_mean, mm, (size_t)c * sizeof(float));
    if (s == KC_STATUS_OK && mv) s = be->to_device(be, b->moving_var, mv, (size_t)c * sizeof(float));
    return s;
}

/* dx from the ranks' sums v (2c + 1: S(dy), S(dy * xhat), N); x becomes dx. */
static void backward_dx(const kc__bn_sync_args *b, const double *v, float *x, const float *dy, const float *g,
                        const float *mean, const float *inv) {
    int c = b->c;
    double N = v[2 * c];
    for (int64_t i = 0; i < b->rows * c; i++) {
        int j = (int)(i % c);
        double xhat = ((double)x[i] - mean[j]) * inv[j];
        x[i] = (float)((g ? g[j] : 1.0) * inv[j] * ((double)dy[i] - v[j] / N - xhat * v[c + j] / N));
    }
}

kc_status kc__bn_sync_backward(const kc_bwd *a, const kc__bn_sync_args *b, float *dx) {
    kc_backend *be = a->be;
    int c = b->c;
    int64_t n = b->rows * c;
    float *x = NULL, *dy = NULL, *g = NULL, *mean = NULL, *inv = NULL;
    bn_host h;
    KC_TRY(host_scratch(a->scratch, b, &h));
    double *v = h.d;
    float *loc = h.f, *cur = h.f + 2 * c;
    kc_status s = host_copy(be, a->x[0], n, &cur, &x);
    if (s == KC_STATUS_OK) s = host_copy(be, a->dy, n, &cur, &dy);
    if (s == KC_STATUS_OK) s = host_copy(be, b->gamma, c, &cur, &g);
    if (s == KC_STATUS_OK) s = host_copy(be, b->save_mean, c, &cur, &mean);
    if (s == KC_STATUS_OK) s = host_copy(be, b->save_inv_std, c, &cur, &inv);
    if (s == KC_STATUS_OK) {
        for (int64_t i = 0; i < n; i++) {
            int j = (int)(i % c);
            v[j] += dy[i];
            v[c + j] += dy[i] * (((double)x[i] - mean[j]) * inv[j]);
        }
        v[2 * c] = (double)b->rows;
        for (int j = 0; j < c; j++) {
            loc[j] = (float)v[c + j]; /* dgamma: this rank's */
            loc[c + j] = (float)v[j]; /* dbeta */
        }
        s = sum_ranks(a->sync, v, 2 * c + 1);
    }
    if (s == KC_STATUS_OK && b->dgamma) s = be->to_device(be, b->dgamma, loc, (size_t)c * sizeof(float));
    if (s == KC_STATUS_OK && b->dbeta) s = be->to_device(be, b->dbeta, loc + c, (size_t)c * sizeof(float));
    if (s == KC_STATUS_OK) {
        backward_dx(b, v, x, dy, g, mean, inv);
        s = be->to_device(be, dx, x, (size_t)n * sizeof(float));
    }
    return s;
}
