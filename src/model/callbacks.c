/* callbacks.c — Keras's EarlyStopping, ReduceLROnPlateau and TerminateOnNaN, built on the
 * public kc_callback interface that users implement too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

void kc_callback_destroy(kc_callback *cb) {
    if (cb && cb->destroy) cb->destroy(cb);
}

/* The value of a monitored quantity in epoch logs ("loss", "val_loss", "accuracy",
 * "val_accuracy", any compiled metric name with or without "val_"). */
static bool monitor_value(const kc_model *m, const kc_epoch_logs *e, const char *name, double *out) {
    bool val = strncmp(name, "val_", 4) == 0;
    const char *base = val ? name + 4 : name;
    if (val && !e->has_val) return false;
    if (strcmp(base, "loss") == 0) {
        *out = val ? e->val_loss : e->loss;
        return true;
    }
    for (int i = 0; i < m->n_metrics; i++)
        if (strcmp(base, m->metrics[i].name) == 0) {
            *out = val ? e->val_metrics[i] : e->metrics[i];
            return true;
        }
    return false;
}

static kc_status parse_mode(const char *mode, const char *monitor, bool *maximize) {
    if (!mode || !*mode || strcmp(mode, "auto") == 0) {
        *maximize = strstr(monitor, "acc") != NULL;
        return KC_STATUS_OK;
    }
    if (strcmp(mode, "min") == 0 || strcmp(mode, "max") == 0) {
        *maximize = mode[1] == 'a';
        return KC_STATUS_OK;
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "callback mode '%s' is not one of auto, min, max", mode);
}

/* ---------------------------------------------------------------- EarlyStopping */

typedef struct early_stopping {
    kc_callback cb;
    kc_early_stopping_opts o;
    char monitor[64];
    bool maximize, warned;
    double best;
    int wait;
    float *best_weights; /* (n_params) host copy when restore_best_weights */
    int64_t best_n;
    bool have_best;
    bool weights_lost;   /* resumed after a best epoch whose weights are not in the checkpoint */
} early_stopping;

static bool improved(double v, double best, double min_delta, bool maximize) {
    return maximize ? v - min_delta > best : v + min_delta < best;
}

static kc_callback_action es_train_begin(kc_model *m, void *user) {
    early_stopping *es = user;
    es->wait = 0;
    es->have_best = false;
    es->weights_lost = false;
    es->best = es->maximize ? -INFINITY : INFINITY;
    return KC_CONTINUE;
}

/* state: best (NaN: none yet), wait, have_best */
static int es_get_state(void *user, double *v, int max) {
    early_stopping *es = user;
    if (max < 3) return 0;
    v[0] = es->best;
    v[1] = es->wait;
    v[2] = es->have_best;
    return 3;
}

static void es_set_state(kc_model *m, void *user, const double *v, int n) {
    early_stopping *es = user;
    if (n < 3) return;
    es->best = isnan(v[0]) ? (es->maximize ? -INFINITY : INFINITY) : v[0];
    es->wait = (int)v[1];
    es->have_best = v[2] != 0;
    es->weights_lost = es->have_best && es->o.restore_best_weights > 0;
}

static kc_callback_action es_epoch_end(kc_model *m, const kc_epoch_logs *e, void *user) {
    early_stopping *es = user;
    double v;
    if (!monitor_value(m, e, es->monitor, &v)) {
        if (!es->warned)
            kc__log_always(KC_LOG_WARNING, "EarlyStopping: '%s' is not available (no validation data?); it does nothing",
                           es->monitor);
        es->warned = true;
        return KC_CONTINUE;
    }
    /* Keras 3's order: count the epoch, then reset on improvement (over the best, and
     * over the baseline when one is set), else stop once patience epochs have passed. */
    es->wait++;
    if (improved(v, es->best, fabs(es->o.min_delta), es->maximize)) {
        es->best = v;
        es->have_best = true;
        es->weights_lost = false;
        if (es->o.restore_best_weights > 0) {
            if (!es->best_weights || es->best_n != m->n_params) {
                free(es->best_weights);
                es->best_weights = malloc((size_t)m->n_params * sizeof(float));
                es->best_n = m->n_params;
            }
            if (es->best_weights)
                m->be->to_host(m->be, es->best_weights, m->params, (size_t)m->n_params * sizeof(float));
        }
        if (es->o.baseline == 0 || improved(v, es->o.baseline, 0, es->maximize)) es->wait = 0;
        return KC_CONTINUE;
    }
    if (es->wait >= es->o.patience && e->epoch > 0) {
        if (es->o.restore_best_weights > 0 && es->weights_lost)
            kc__log_always(KC_LOG_WARNING,
                           "EarlyStopping: the best epoch (%s = %g) came before the resume and checkpoints do not "
                           "keep its weights; the last weights stay",
                           es->monitor, es->best);
        else if (es->o.restore_best_weights > 0 && es->best_weights && es->have_best) {
            m->be->to_device(m->be, m->params, es->best_weights, (size_t)m->n_params * sizeof(float));
            kc__log(KC_LOG_INFO, "EarlyStopping: restored the weights of the best epoch (%s = %g)", es->monitor, es->best);
        }
        return KC_STOP_TRAINING;
    }
    return KC_CONTINUE;
}

static void es_destroy(kc_callback *cb) {
    early_stopping *es = (early_stopping *)cb;
    free(es->best_weights);
    free(es);
}

kc_status kc_early_stopping(const kc_early_stopping_opts *opts, kc_callback **out) {
    kc_early_stopping_opts o = opts ? *opts : (kc_early_stopping_opts){0};
    if (o.patience < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "EarlyStopping: patience %d is negative", o.patience);
    early_stopping *es = kc__calloc(1, sizeof *es, "EarlyStopping");
    if (!es) return KC_STATUS_OUT_OF_MEMORY;
    snprintf(es->monitor, sizeof es->monitor, "%s", o.monitor && *o.monitor ? o.monitor : "val_loss");
    kc_status s = parse_mode(o.mode, es->monitor, &es->maximize);
    if (s != KC_STATUS_OK) {
        free(es);
        return s;
    }
    es->o = o;
    es->cb = (kc_callback){.name = "EarlyStopping", .user = es, .on_train_begin = es_train_begin,
                           .on_epoch_end = es_epoch_end, .destroy = es_destroy, .get_state = es_get_state,
                           .set_state = es_set_state};
    *out = &es->cb;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- ReduceLROnPlateau */

typedef struct reduce_lr {
    kc_callback cb;
    kc_reduce_lr_opts o;
    char monitor[64];
    bool maximize, warned;
    double best;
    int wait, cooldown;
} reduce_lr;

static kc_callback_action rl_train_begin(kc_model *m, void *user) {
    reduce_lr *r = user;
    r->best = r->maximize ? -INFINITY : INFINITY;
    r->wait = r->cooldown = 0;
    return KC_CONTINUE;
}

/* state: best (NaN: none yet), wait, cooldown (the learning-rate scale is the optimizer's,
 * checkpointed with it) */
static int rl_get_state(void *user, double *v, int max) {
    reduce_lr *r = user;
    if (max < 3) return 0;
    v[0] = r->best;
    v[1] = r->wait;
    v[2] = r->cooldown;
    return 3;
}

static void rl_set_state(kc_model *m, void *user, const double *v, int n) {
    reduce_lr *r = user;
    if (n < 3) return;
    r->best = isnan(v[0]) ? (r->maximize ? -INFINITY : INFINITY) : v[0];
    r->wait = (int)v[1];
    r->cooldown = (int)v[2];
}

static kc_callback_action rl_epoch_end(kc_model *m, const kc_epoch_logs *e, void *user) {
    reduce_lr *r = user;
    double v;
    if (!monitor_value(m, e, r->monitor, &v)) {
        if (!r->warned)
            kc__log_always(KC_LOG_WARNING, "ReduceLROnPlateau: '%s' is not available (no validation data?); it does nothing",
                           r->monitor);
        r->warned = true;
        return KC_CONTINUE;
    }
    if (r->cooldown > 0) {
        r->cooldown--;
        r->wait = 0;
    }
    if (improved(v, r->best, r->o.min_delta, r->maximize)) {
        r->best = v;
        r->wait = 0;
    } else if (r->cooldown == 0 && ++r->wait >= r->o.patience) {
        double lr = kc__optimizer_lr(&m->opt, m->opt.iterations);
        if (lr > r->o.min_lr) {
            double new_lr = KC_MAX(lr * r->o.factor, r->o.min_lr);
            m->opt.lr_scale *= new_lr / lr;
            kc__log(KC_LOG_INFO, "ReduceLROnPlateau: learning rate %g -> %g", lr, new_lr);
            r->cooldown = r->o.cooldown;
            r->wait = 0;
        }
    }
    return KC_CONTINUE;
}

static void rl_destroy(kc_callback *cb) { free(cb); }

kc_status kc_reduce_lr_on_plateau(const kc_reduce_lr_opts *opts, kc_callback **out) {
    kc_reduce_lr_opts o = opts ? *opts : (kc_reduce_lr_opts){0};
    if (o.factor == 0) o.factor = 0.1;
    if (o.patience == 0) o.patience = 10;
    if (o.min_delta == 0) o.min_delta = 1e-4;
    if (!(o.factor > 0 && o.factor < 1))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "ReduceLROnPlateau: factor %g must be in (0, 1)", o.factor);
    if (o.patience < 0 || o.cooldown < 0 || o.min_lr < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "ReduceLROnPlateau: patience, cooldown and min_lr must not be negative");
    reduce_lr *r = kc__calloc(1, sizeof *r, "ReduceLROnPlateau");
    if (!r) return KC_STATUS_OUT_OF_MEMORY;
    snprintf(r->monitor, sizeof r->monitor, "%s", o.monitor && *o.monitor ? o.monitor : "val_loss");
    kc_status s = parse_mode(o.mode, r->monitor, &r->maximize);
    if (s != KC_STATUS_OK) {
        free(r);
        return s;
    }
    r->o = o;
    r->cb = (kc_callback){.name = "ReduceLROnPlateau", .user = r, .on_train_begin = rl_train_begin,
                          .on_epoch_end = rl_epoch_end, .destroy = rl_destroy, .get_state = rl_get_state,
                          .set_state = rl_set_state};
    *out = &r->cb;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- TerminateOnNaN */

static kc_callback_action nan_batch_end(kc_model *m, const kc_batch_logs *b, void *user) {
    if (isfinite(b->loss)) return KC_CONTINUE;
    kc__log_always(KC_LOG_WARNING, "TerminateOnNaN: batch %lld of epoch %d has loss %g; training stops",
                   (long long)b->step + 1, b->epoch + 1, b->loss);
    return KC_STOP_TRAINING;
}

kc_status kc_terminate_on_nan(kc_callback **out) {
    kc_callback *cb = kc__calloc(1, sizeof *cb, "TerminateOnNaN");
    if (!cb) return KC_STATUS_OUT_OF_MEMORY;
    *cb = (kc_callback){.name = "TerminateOnNaN", .on_batch_end = nan_batch_end, .destroy = rl_destroy};
    *out = cb;
    return KC_STATUS_OK;
}
