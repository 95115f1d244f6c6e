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
 * to_host / to_device (cheap on the CPU backend; a GPU pays two copies per layer). */
#include <math.h>
#include <stdlib.h>

#include "batchnorm_sync.h"

/* Host copies of n floats of each device buffer given (NULL: skipped). */
static kc_status host_copy(kc_backend *be, const float *dev, int64_t n, float **out) {
    *out = NULL;
    if (!dev) return KC_STATUS_OK;
    float *h = kc__calloc((size_t)n, sizeof(float), "synchronised BatchNormalization");
    if (!h) return KC_STATUS_OUT_OF_MEMORY;
    kc_status s = be->to_host(be, h, dev, (size_t)n * sizeof(float));
    if (s != KC_STATUS_OK) {
        free(h);
        return s;
    }
    *out = h;
    return KC_STATUS_OK;
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

static kc_status forward_stats(const kc_fwd *a, const kc__bn_sync_args *b, const float *x, double *mean,
                               double *var) {
    int c = b->c;
    double *v = kc__calloc((size_t)(2 * c + 1), sizeof(double), "synchronised BatchNormalization");
    if (!v) return KC_STATUS_OUT_OF_MEMORY;
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
    free(v);
    return s;
}

kc_status kc__bn_sync_forward(const kc_fwd *a, const kc__bn_sync_args *b) {
    kc_backend *be = a->be;
    int c = b->c;
    int64_t n = b->rows * c;
    float *x = NULL, *mm = NULL, *mv = NULL, *g = NULL, *bt = NULL;
    double *mean = kc__calloc((size_t)c, 2 * sizeof(double), "synchronised BatchNormalization");
    float *st = kc__calloc((size_t)c, 2 * sizeof(float), "synchronised BatchNormalization");
    kc_status s = mean && st ? host_copy(be, a->x[0], n, &x) : KC_STATUS_OUT_OF_MEMORY;
    if (s == KC_STATUS_OK) s = host_copy(be, b->moving_mean, c, &mm);
    if (s == KC_STATUS_OK) s = host_copy(be, b->moving_var, c, &mv);
    if (s == KC_STATUS_OK) s = host_copy(be, b->gamma, c, &g);
    if (s == KC_STATUS_OK) s = host_copy(be, b->beta, c, &bt);
    double *var = mean ? mean + c : NULL;
    if (s == KC_STATUS_OK) s = forward_stats(a, b, x, mean, var);
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
    free(mean);
    free(st);
    free(x);
    free(mm);
    free(mv);
    free(g);
    free(bt);
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
    double *v = kc__calloc((size_t)(2 * c + 1), sizeof(double), "synchronised BatchNormalization");
    float *loc = kc__calloc((size_t)c, 2 * sizeof(float), "synchronised BatchNormalization");
    kc_status s = v && loc ? host_copy(be, a->x[0], n, &x) : KC_STATUS_OUT_OF_MEMORY;
    if (s == KC_STATUS_OK) s = host_copy(be, a->dy, n, &dy);
    if (s == KC_STATUS_OK) s = host_copy(be, b->gamma, c, &g);
    if (s == KC_STATUS_OK) s = host_copy(be, b->save_mean, c, &mean);
    if (s == KC_STATUS_OK) s = host_copy(be, b->save_inv_std, c, &inv);
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
    free(v);
    free(loc);
    free(x);
    free(dy);
    free(g);
    free(mean);
    free(inv);
    return s;
}
