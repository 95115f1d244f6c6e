/* cpu_optim.c — fused optimizer updates, Keras 3 formulas, g = grad * grad_scale, times
 * clipnorm / max(sqrt(*norm_sq), clipnorm) when norm_sq is given (Keras's clip_by_norm).
 *   SGD      momentum 0: w -= lr g
 *            else v = momentum v - lr g (slot0 = v); w += nesterov ? momentum v - lr g : v
 *   Adam     m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2)   (slot0 = m, slot1 = v)
 *            w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
 *   AdamW    w -= lr wd w, then Adam
 *   RMSprop  vel = rho vel + (1 - rho) g^2 (slot0); inc = lr g / sqrt(vel + eps)
 *            momentum > 0: mom = momentum mom + inc (slot1), w -= mom; else w -= inc */
#include <math.h>

#include "cpu.h"

kc_status kc__cpu_optimizer_step(kc_backend *be, const kc_opt_step *s, float *param, const float *grad, float *slot0,
                                 float *slot1, int64_t n) {
    if (!s) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: the step description is NULL");
    if (n < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: negative size %lld", (long long)n);
    if (n == 0) return KC_STATUS_OK;
    if (!param || !grad)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: NULL parameters or gradients");
    const int par = kc__cpu_par(n);
    const float lr = s->lr;
    float gsc = s->grad_scale;
    if (s->norm_sq) {
        const double norm = sqrt((double)*s->norm_sq);
        if (norm > (double)s->clipnorm) gsc *= (float)((double)s->clipnorm / norm);
    }
    switch (s->kind) {
    case KC_OPT_SGD: {
        const float mom = s->momentum;
        if (mom == 0.0f) {
            KC_CPU_PAR_FOR(par, schedule(static),
            for (int64_t i = 0; i < n; i++) { param[i] -= lr * (grad[i] * gsc); });
            return KC_STATUS_OK;
        }
        if (!slot0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: SGD with momentum needs a velocity slot");
        float *v = slot0;
        if (s->nesterov) {
            KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) {
                const float g = grad[i] * gsc;
                v[i] = mom * v[i] - lr * g;
                param[i] += mom * v[i] - lr * g;
            });
        } else {
            KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) {
                const float g = grad[i] * gsc;
                v[i] = mom * v[i] - lr * g;
                param[i] += v[i];
            });
        }
        return KC_STATUS_OK;
    }
    case KC_OPT_ADAM:
    case KC_OPT_ADAMW: {
        if (!slot0 || !slot1)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: Adam needs its m and v slots");
        if (s->t < 1)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: Adam step count t=%lld must start at 1",
                            (long long)s->t);
        const double b1 = s->beta_1, b2 = s->beta_2, t = (double)s->t;
        const float alpha = (float)((double)lr * sqrt(1.0 - pow(b2, t)) / (1.0 - pow(b1, t)));
        const float omb1 = 1.0f - s->beta_1, omb2 = 1.0f - s->beta_2, eps = s->epsilon;
        const float decay = s->kind == KC_OPT_ADAMW ? lr * s->weight_decay : 0.0f;
        float *m = slot0, *v = slot1;
        KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) {
            const float g = grad[i] * gsc;
            float w = param[i];
            w -= w * decay;
            m[i] += (g - m[i]) * omb1;
            v[i] += (g * g - v[i]) * omb2;
            param[i] = w - alpha * m[i] / (sqrtf(v[i]) + eps);
        });
        return KC_STATUS_OK;
    }
    case KC_OPT_RMSPROP: {
        if (!slot0 || (s->momentum > 0.0f && !slot1))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "cpu optimizer_step: RMSprop needs its velocity slot (and a momentum slot when momentum > 0)");
        const float rho = s->rho, omrho = 1.0f - s->rho, eps = s->epsilon, mom = s->momentum;
        float *vel = slot0, *mb = slot1;
        if (mom > 0.0f) {
            KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) {
                const float g = grad[i] * gsc;
                vel[i] = rho * vel[i] + omrho * g * g;
                const float inc = lr * g / sqrtf(vel[i] + eps);
                mb[i] = mom * mb[i] + inc;
                param[i] -= mb[i];
            });
        } else {
            KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) {
                const float g = grad[i] * gsc;
                vel[i] = rho * vel[i] + omrho * g * g;
                param[i] -= lr * g / sqrtf(vel[i] + eps);
            });
        }
        return KC_STATUS_OK;
    }
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu optimizer_step: unknown optimizer kind %d", (int)s->kind);
}
