/* optimizer.c — optimizer options with Keras's defaults, and learning-rate schedules
 * (Keras's ExponentialDecay, CosineDecay, PiecewiseConstantDecay). The update itself is
 * one fused backend kernel over the parameter slab (kc_backend.optimizer_step). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "train.h"

static kc_status bad(const char *what, double v, const char *hint) {
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "optimizer: %s = %g is invalid; %s", what, v, hint);
}

kc_status kc__optimizer_init(kc_optimizer_state *o, const kc_optimizer_opts *in) {
    free(o->boundaries);
    free(o->values);
    memset(o, 0, sizeof *o);
    kc_optimizer_opts p = *in;
    const char *name = p.name && *p.name ? p.name : "adam";
    if (strcasecmp(name, "sgd") == 0) {
        o->kind = KC_OPT_SGD;
        p.name = kc__optimizer_name(o->kind);
        if (p.learning_rate == 0) p.learning_rate = 0.01;
    } else if (strcasecmp(name, "adam") == 0 || strcasecmp(name, "adamw") == 0) {
        o->kind = strcasecmp(name, "adam") == 0 ? KC_OPT_ADAM : KC_OPT_ADAMW;
        p.name = kc__optimizer_name(o->kind);
        if (p.learning_rate == 0) p.learning_rate = 0.001;
        if (p.beta_1 == 0) p.beta_1 = 0.9;
        if (p.beta_2 == 0) p.beta_2 = 0.999;
        if (o->kind == KC_OPT_ADAMW && p.weight_decay == 0) p.weight_decay = 0.004;
    } else if (strcasecmp(name, "rmsprop") == 0) {
        o->kind = KC_OPT_RMSPROP;
        p.name = kc__optimizer_name(o->kind);
        if (p.learning_rate == 0) p.learning_rate = 0.001;
        if (p.rho == 0) p.rho = 0.9;
    } else {
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "optimizer '%s' is not one of sgd, adam, adamw, rmsprop", name);
    }
    if (p.epsilon == 0) p.epsilon = 1e-7;
    if (!(p.learning_rate > 0)) return bad("learning_rate", p.learning_rate, "it must be > 0");
    if (p.momentum < 0 || p.momentum >= 1) return bad("momentum", p.momentum, "it must be in [0, 1)");
    if (p.beta_1 < 0 || p.beta_1 >= 1) return bad("beta_1", p.beta_1, "it must be in [0, 1)");
    if (p.beta_2 < 0 || p.beta_2 >= 1) return bad("beta_2", p.beta_2, "it must be in [0, 1)");
    if (p.rho < 0 || p.rho >= 1) return bad("rho", p.rho, "it must be in [0, 1)");
    if (p.epsilon < 0) return bad("epsilon", p.epsilon, "it must be >= 0");
    if (p.weight_decay < 0) return bad("weight_decay", p.weight_decay, "it must be >= 0");
    if (p.clipnorm < 0) return bad("clipnorm", p.clipnorm, "it must be >= 0 (0: no clipping)");
    if (p.global_clipnorm < 0) return bad("global_clipnorm", p.global_clipnorm, "it must be >= 0 (0: no clipping)");
    if (p.clipnorm > 0 && p.global_clipnorm > 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "optimizer '%s': clipnorm and global_clipnorm are both set; choose one (Keras allows only one)",
                        p.name);
    if (p.weight_decay > 0 && o->kind != KC_OPT_ADAMW)
        return kc__fail(KC_STATUS_UNSUPPORTED, "optimizer '%s': weight_decay is supported with adamw only", p.name);

    const char *sch = p.schedule && *p.schedule ? p.schedule : NULL;
    if (sch) {
        if (strcmp(sch, "exponential_decay") == 0 || strcmp(sch, "cosine_decay") == 0) {
            if (p.decay_steps <= 0)
                return kc__fail(KC_STATUS_INVALID_ARGUMENT, "schedule '%s' needs decay_steps > 0", sch);
            if (strcmp(sch, "exponential_decay") == 0 && !(p.decay_rate > 0))
                return kc__fail(KC_STATUS_INVALID_ARGUMENT, "schedule 'exponential_decay' needs decay_rate > 0");
            if (p.alpha < 0 || p.alpha > 1)
                return kc__fail(KC_STATUS_INVALID_ARGUMENT, "schedule 'cosine_decay': alpha = %g must be in [0, 1]", p.alpha);
        } else if (strcmp(sch, "piecewise_constant") == 0) {
            int nb = p.num_boundaries;
            if (nb <= 0 || !p.boundaries || !p.values)
                return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                "schedule 'piecewise_constant' needs num_boundaries > 0, boundaries[n] and values[n + 1]");
            o->boundaries = malloc((size_t)nb * sizeof(int64_t));
            o->values = malloc((size_t)(nb + 1) * sizeof(double));
            if (!o->boundaries || !o->values) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "optimizer: out of memory");
            memcpy(o->boundaries, p.boundaries, (size_t)nb * sizeof(int64_t));
            memcpy(o->values, p.values, (size_t)(nb + 1) * sizeof(double));
            for (int i = 1; i < nb; i++)
                if (o->boundaries[i] <= o->boundaries[i - 1])
                    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                    "schedule 'piecewise_constant': boundaries must increase (%lld after %lld)",
                                    (long long)o->boundaries[i], (long long)o->boundaries[i - 1]);
            p.boundaries = o->boundaries;
            p.values = o->values;
        } else {
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "schedule '%s' is not one of exponential_decay, cosine_decay, piecewise_constant", sch);
        }
        /* keep a static name: the caller's string may not outlive compile */
        p.schedule = strcmp(sch, "exponential_decay") == 0 ? "exponential_decay"
                     : strcmp(sch, "cosine_decay") == 0    ? "cosine_decay"
                                                           : "piecewise_constant";
    } else {
        p.schedule = NULL;
    }
    o->opts = p;
    o->lr_scale = 1.0;
    return KC_STATUS_OK;
}

/* Keras schedules, evaluated at the optimizer's step count (0 for the first update). */
double kc__optimizer_lr(const kc_optimizer_state *o, int64_t step) {
    const kc_optimizer_opts *p = &o->opts;
    double lr = p->learning_rate;
    if (p->schedule) {
        if (strcmp(p->schedule, "exponential_decay") == 0) {
            double e = (double)step / (double)p->decay_steps;
            if (p->staircase > 0) e = floor(e);
            lr = p->learning_rate * pow(p->decay_rate, e);
        } else if (strcmp(p->schedule, "cosine_decay") == 0) {
            double frac = (double)KC_MIN(step, p->decay_steps) / (double)p->decay_steps;
            double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * frac));
            lr = p->learning_rate * ((1.0 - p->alpha) * cosine + p->alpha);
        } else { /* piecewise_constant: values[i] while step <= boundaries[i] (Keras) */
            int i = 0;
            while (i < p->num_boundaries && step > p->boundaries[i]) i++;
            lr = p->values[i];
        }
    }
    return lr * o->lr_scale;
}

int kc__optimizer_slots(kc_opt_kind kind, double momentum) {
    switch (kind) {
    case KC_OPT_SGD: return momentum > 0 ? 1 : 0;
    case KC_OPT_ADAM:
    case KC_OPT_ADAMW: return 2;
    case KC_OPT_RMSPROP: return momentum > 0 ? 2 : 1;
    }
    return 0;
}

const char *kc__optimizer_name(kc_opt_kind kind) {
    switch (kind) {
    case KC_OPT_SGD: return "sgd";
    case KC_OPT_ADAM: return "adam";
    case KC_OPT_ADAMW: return "adamw";
    case KC_OPT_RMSPROP: return "rmsprop";
    }
    return "?";
}
