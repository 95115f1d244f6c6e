/* cpu_loss.c — losses (value and gradient in one pass) and the accuracy count.
 *
 * Per-example losses, as Keras 3 defines them (clip epsilon 1e-7):
 *   SPARSE_CCE  probs:  -log(clip(p[t] / sum(p)))      logits: logsumexp(x) - x[t]
 *   CCE         probs:  -sum_k t_k log(clip(p_k / sum(p)))   logits: -sum_k t_k log_softmax(x)_k
 *   BCE         probs:  mean_c -(t log(clip(p)) + (1-t) log(1 - clip(p)))
 *               logits: mean_c max(x,0) - x t + log1p(exp(-|x|))
 *   MSE, MAE:   mean_c (p-t)^2, mean_c |p-t|
 * A row is one example of a Dense head or one position (pixel) of a per-pixel head: the model
 * passes n = batch * positions rows of the output's last axis (src/model/targets.c).
 * *loss_sum = sum over the n rows (overwritten; the caller accumulates batches), and
 * dpred = d(sum of losses)/d(pred) / grad_n. In probability mode the gradient is that of
 * the clipped formula: zero where the clip is active. Sums are in double. */
#include <math.h>

#include "cpu.h"

#define KC_LOSS_EPS 1e-7f

/* The class index coded in a float label, or -1 when it is not an integer in [0, c). */
static inline int label_index(float t, int c) {
    if (!(t >= 0.0f && t < (float)c)) return -1;
    int i = (int)t;
    return (float)i == t ? i : -1;
}

/* Loss of one example; writes its gradient (times gs) into g when g is not NULL. */
static double loss_row(kc_loss_kind kind, int logits, const float *p, const float *t, float ti_f, int c, float *g,
                       double gs) {
    const double lo = (double)KC_LOSS_EPS, hi = (double)(1.0f - KC_LOSS_EPS);
    switch (kind) {
    case KC_LOSS_SPARSE_CCE:
    case KC_LOSS_CCE: {
        const int sparse = kind == KC_LOSS_SPARSE_CCE;
        const int ti = sparse ? (int)ti_f : -1;
        if (logits) {
            float m = p[0];
            for (int j = 1; j < c; j++) m = p[j] > m ? p[j] : m;
            double s = 0.0;
            for (int j = 0; j < c; j++) s += exp((double)p[j] - (double)m);
            const double lse = (double)m + log(s);
            double loss, tsum = 1.0;
            if (sparse) {
                loss = lse - (double)p[ti];
            } else {
                loss = 0.0;
                tsum = 0.0;
                for (int j = 0; j < c; j++) {
                    loss += (double)t[j] * (lse - (double)p[j]);
                    tsum += (double)t[j];
                }
            }
            if (g) {
                for (int j = 0; j < c; j++) {
                    const double sm = exp((double)p[j] - lse);
                    const double tj = sparse ? (j == ti ? 1.0 : 0.0) : (double)t[j];
                    g[j] = (float)((sm * tsum - tj) * gs);
                }
            }
            return loss;
        }
        double s = 0.0;
        for (int j = 0; j < c; j++) s += (double)p[j];
        if (sparse) {
            const double q = (double)p[ti] / s;
            const int in = q >= lo && q <= hi;
            const double qc = q < lo ? lo : (q > hi ? hi : q);
            if (g) {
                /* d/dp_j -log(p_t / S) = 1/S - [j == t] / p_t */
                for (int j = 0; j < c; j++)
                    g[j] = in ? (float)((1.0 / s - (j == ti ? 1.0 / (double)p[ti] : 0.0)) * gs) : 0.0f;
            }
            return -log(qc);
        }
        double loss = 0.0, tin = 0.0; /* tin: sum of t_k over unclipped k */
        for (int j = 0; j < c; j++) {
            const double q = (double)p[j] / s;
            const double qc = q < lo ? lo : (q > hi ? hi : q);
            loss -= (double)t[j] * log(qc);
            if (q >= lo && q <= hi) tin += (double)t[j];
        }
        if (g) {
            for (int j = 0; j < c; j++) {
                const double q = (double)p[j] / s;
                const int in = q >= lo && q <= hi;
                g[j] = (float)(((in ? -(double)t[j] / (double)p[j] : 0.0) + tin / s) * gs);
            }
        }
        return loss;
    }
    case KC_LOSS_BCE: {
        double loss = 0.0;
        const double gc = gs / c;
        for (int j = 0; j < c; j++) {
            const double x = p[j], tj = t[j];
            if (logits) {
                loss += (x > 0 ? x : 0.0) - x * tj + log1p(exp(-fabs(x)));
                if (g) g[j] = (float)((1.0 / (1.0 + exp(-x)) - tj) * gc);
            } else {
                const int in = x >= lo && x <= hi;
                const double xc = x < lo ? lo : (x > hi ? hi : x);
                loss -= tj * log(xc) + (1.0 - tj) * log(1.0 - xc);
                if (g) g[j] = in ? (float)((-tj / x + (1.0 - tj) / (1.0 - x)) * gc) : 0.0f;
            }
        }
        return loss / c;
    }
    case KC_LOSS_MSE: {
        double loss = 0.0;
        for (int j = 0; j < c; j++) {
            const double e = (double)p[j] - (double)t[j];
            loss += e * e;
            if (g) g[j] = (float)(2.0 * e * gs / c);
        }
        return loss / c;
    }
    case KC_LOSS_MAE: {
        double loss = 0.0;
        for (int j = 0; j < c; j++) {
            const double e = (double)p[j] - (double)t[j];
            loss += fabs(e);
            if (g) g[j] = (float)((e > 0 ? 1.0 : (e < 0 ? -1.0 : 0.0)) * gs / c);
        }
        return loss / c;
    }
    default: return 0.0;
    }
}

kc_status kc__cpu_loss_forward_backward(kc_backend *be, const kc_loss_desc *d, const float *pred,
                                        const float *target, float *loss_sum, float *dpred, int grad_n) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu loss: the descriptor is NULL");
    if ((int)d->kind < 0 || d->kind >= KC_LOSS_COUNT)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu loss: unknown loss kind %d", (int)d->kind);
    const char *name = kc_loss_name(d->kind);
    const int n = d->n, c = d->c;
    if (n < 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: bad prediction shape (%d, %d)", name, n, c);
    if (dpred && grad_n <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: grad_n is %d; it must be the positive batch size", name,
                        grad_n);
    if (n > 0 && (!pred || !target))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: NULL predictions or targets", name);
    const int sparse = d->kind == KC_LOSS_SPARSE_CCE;
    if (sparse) {
        for (int i = 0; i < n; i++)
            if (label_index(target[i], c) < 0)
                return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                "%s: label %g of example %d is not a class index in [0, %d); labels must be integers "
                                "0..%d matching the %d output units",
                                name, (double)target[i], i, c, c - 1, c);
    }
    const int logits = d->from_logits != 0;
    const double gs = dpred ? 1.0 / (double)grad_n : 0.0;
    double total = 0.0;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)n * c), schedule(static) reduction(+ : total), for (int i = 0; i < n; i++) {
        const float *p = pred + (size_t)i * c;                      /* (c) */
        const float *t = sparse ? NULL : target + (size_t)i * c;    /* (c) */
        float *g = dpred ? dpred + (size_t)i * c : NULL;            /* (c) */
        total += loss_row(d->kind, logits, p, t, sparse ? target[i] : 0.0f, c, g, gs);
    });
    if (loss_sum) *loss_sum = (float)total;
    return KC_STATUS_OK;
}

kc_status kc__cpu_count_correct(kc_backend *be, const float *pred, const float *target, int n, int c, int sparse,
                                int k, int from_logits, float *correct) {
    if (n < 0 || c <= 0 || k < 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu accuracy: bad arguments (n=%d, c=%d, k=%d)", n, c, k);
    if (!correct) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu accuracy: NULL output");
    if (n == 0) return KC_STATUS_OK;
    if (!pred || !target) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu accuracy: NULL predictions or targets");
    int64_t count = 0;
    int bad = -1; /* first example with an invalid label */
    if (c == 1) {
        const float thr = from_logits ? 0.0f : 0.5f;
        for (int i = 0; i < n; i++) count += (pred[i] > thr ? 1.0f : 0.0f) == target[i]; /* Keras: exact 0/1 */
    } else {
        for (int i = 0; i < n; i++) {
            const float *p = pred + (size_t)i * c; /* (c) */
            int label;
            if (sparse) {
                label = label_index(target[i], c);
                if (label < 0) {
                    bad = i;
                    break;
                }
            } else {
                const float *t = target + (size_t)i * c; /* (c) */
                label = 0;
                for (int j = 1; j < c; j++)
                    if (t[j] > t[label]) label = j;
            }
            if (k == 1) { /* argmax, first index on ties (Keras accuracy) */
                int am = 0;
                for (int j = 1; j < c; j++)
                    if (p[j] > p[am]) am = j;
                count += am == label;
            } else { /* in_top_k: ties at the boundary count as in */
                int greater = 0;
                for (int j = 0; j < c; j++) greater += p[j] > p[label];
                count += greater < k;
            }
        }
    }
    if (bad >= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "accuracy: label %g of example %d is not a class index in [0, %d); labels must be integers "
                        "0..%d matching the %d output units",
                        (double)target[bad], bad, c, c - 1, c);
    *correct += (float)count;
    return KC_STATUS_OK;
}
