/* fit.c — Keras's fit / evaluate / predict loops and the per-epoch history.
 *
 * fit: per epoch, the training examples (validation split taken off the end first, as
 * Keras does) are shuffled with the seed, a loader thread gathers the next batches while
 * the current one trains, and each step is forward -> loss -> backward -> update on the
 * model's backend. The input feed (feed.h) uploads batch k + 1 while step k computes, and
 * one host read per step (its only synchronisation) brings back the loss and metrics.
 * Checkpoints (../io/checkpoint.c) hook in after each step and each epoch; a resume
 * restores the model, replays the finished epochs' shuffles and starts the loader at the
 * saved step of the saved epoch's order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/loader.h"
#include "../env/env.h"
#include "../io/checkpoint.h"
#include "feed.h"
#include "model.h"

struct kc_history {
    char device[64];          /* kc_model_device when fit ran */
    char device_reason[1024]; /* kc_model_device_reason */
    int n, cap;
    kc_epoch_logs *epochs;
    int n_metrics;
    char metric_names[KC_MAX_METRICS][48];
    char stop_reason[64];
};

int kc_history_epochs(const kc_history *h) { return h ? h->n : 0; }
const kc_epoch_logs *kc_history_epoch(const kc_history *h, int e) {
    return h && e >= 0 && e < h->n ? &h->epochs[e] : NULL;
}
int kc_history_num_metrics(const kc_history *h) { return h ? h->n_metrics : 0; }
const char *kc_history_metric_name(const kc_history *h, int i) {
    return h && i >= 0 && i < h->n_metrics ? h->metric_names[i] : NULL;
}
const char *kc_history_stop_reason(const kc_history *h) { return h ? h->stop_reason : ""; }
const char *kc_history_device(const kc_history *h) { return h ? h->device : ""; }
const char *kc_history_device_reason(const kc_history *h) { return h ? h->device_reason : ""; }
void kc_history_destroy(kc_history *h) {
    if (!h) return;
    free(h->epochs);
    free(h);
}

static kc_status history_append(kc_history *h, const kc_epoch_logs *e) {
    if (h->n == h->cap) {
        int cap = h->cap ? h->cap * 2 : 16;
        kc_epoch_logs *p = realloc(h->epochs, (size_t)cap * sizeof *p);
        if (!p) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "fit: out of memory growing the history");
        h->epochs = p;
        h->cap = cap;
    }
    h->epochs[h->n++] = *e;
    return KC_STATUS_OK;
}

/* Checks that a dataset fits the model: example shape and label range. */
static kc_status check_data(kc_model *m, const kc_dataset *d, const char *what) {
    kc_shape in = m->layers[0]->out_shape, ds = kc_dataset_shape(d);
    if (!kc__shape_eq(&in, &ds)) {
        char a[64], b[64];
        return kc__fail(KC_STATUS_SHAPE,
                        "%s examples have shape %s but model '%s' expects input %s; pick data that matches the "
                        "model's InputLayer or change its shape", what, kc__shape_str(&ds, false, a, sizeof a), m->name,
                        kc__shape_str(&in, false, b, sizeof b));
    }
    int classes = kc_dataset_num_classes(d);
    int outputs = (int)kc__shape_size(&m->layers[kc__model_output(m)]->out_shape);
    bool classify = m->loss == KC_LOSS_SPARSE_CCE || m->loss == KC_LOSS_CCE;
    if (classify && classes > outputs)
        return kc__fail(KC_STATUS_SHAPE,
                        "%s labels go up to %d but model '%s' has %d outputs; a label must be below the number of "
                        "classes (make the last Dense layer %d units)", what, classes - 1, m->name, outputs, classes);
    if (m->loss == KC_LOSS_BCE && outputs == 1 && classes > 2)
        return kc__fail(KC_STATUS_SHAPE, "%s labels go up to %d but binary_crossentropy with one output needs 0/1 labels",
                        what, classes - 1);
    return KC_STATUS_OK;
}

/* The step's loss sum and metric counts: the one host read (and wait) of a step. */
static kc_status read_scalars(kc_model *m, float *host) {
    return m->be->to_host(m->be, host, m->dev_scalars, 8 * sizeof(float));
}

typedef struct eval_acc {
    double loss_sum;
    double correct[KC_MAX_METRICS];
    int64_t samples;
} eval_acc;

/* Run the model over a dataset in order (inference mode) and accumulate loss/metrics,
 * through `feed` (slots of at least batch_size) or, when it is NULL, a feed of its own. */
static kc_status run_eval(kc_model *m, const kc_dataset *d, int batch_size, kc__feed *feed, eval_acc *acc) {
    memset(acc, 0, sizeof *acc);
    int64_t n = kc_dataset_size(d);
    if (n <= 0) return KC_STATUS_OK;
    int bs = (int)KC_MIN((int64_t)batch_size, n);
    KC_TRY(kc__model_prepare(m, bs, false));
    kc__feed own = {0};
    if (!feed) KC_TRY(kc__feed_open(m, bs, true, feed = &own));
    kc_loader *ld = NULL;
    kc_status s = kc__loader_create(d, NULL, n, bs, 2, &ld);
    const kc_batch *b = NULL;
    int slot = -1, rows = 0;
    if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
    if (s == KC_STATUS_OK && b) s = kc__feed_put(feed, b->x, b->y, rows = b->n, &slot);
    while (s == KC_STATUS_OK && b) {
        float sc[8];
        s = kc__feed_acquire(feed, slot);
        if (s == KC_STATUS_OK) s = kc__feed_select(feed, slot, 0, rows);
        if (s == KC_STATUS_OK) s = m->be->memset0(m->be, m->dev_scalars, 8 * sizeof(float));
        if (s == KC_STATUS_OK) s = kc__model_forward(m, rows, false, 0);
        if (s == KC_STATUS_OK) s = kc__model_accumulate_metrics(m, rows);
        if (s == KC_STATUS_OK) s = kc__feed_release(feed, slot);
        int done = rows, next = -1;
        if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b); /* the next batch travels while this one computes */
        if (s == KC_STATUS_OK && b) s = kc__feed_put(feed, b->x, b->y, rows = b->n, &next);
        if (s == KC_STATUS_OK) s = read_scalars(m, sc);
        if (s != KC_STATUS_OK) break;
        acc->loss_sum += sc[0];
        for (int i = 0; i < m->n_metrics; i++) acc->correct[i] += sc[1 + i];
        acc->samples += done;
        slot = next;
    }
    kc__loader_destroy(ld);
    kc__feed_close(&own);
    return s;
}

static kc_status check_ready(kc_model *m, const char *what) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: model is NULL", what);
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    if (!m->compiled)
        return kc__fail(KC_STATUS_STATE, "%s: model '%s' is not compiled; call kc_compile first", what, m->name);
    return KC_STATUS_OK;
}

kc_status kc_evaluate(kc_model *m, const kc_dataset *d, int batch_size, kc_eval_result *out) {
    KC_TRY(check_ready(m, "evaluate"));
    if (!d || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "evaluate: dataset or result is NULL");
    if (batch_size <= 0) batch_size = 32;
    KC_TRY(check_data(m, d, "evaluation data"));
    double t0 = kc__now();
    eval_acc acc;
    KC_TRY(run_eval(m, d, batch_size, NULL, &acc));
    memset(out, 0, sizeof *out);
    out->samples = acc.samples;
    out->num_metrics = m->n_metrics;
    if (acc.samples > 0) {
        out->loss = acc.loss_sum / (double)acc.samples;
        for (int i = 0; i < m->n_metrics; i++) out->metrics[i] = acc.correct[i] / (double)acc.samples;
    }
    out->seconds = kc__now() - t0;
    return KC_STATUS_OK;
}

kc_status kc_predict(kc_model *m, const float *x, int64_t n, int batch_size, float *y) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "predict: model is NULL");
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    if ((!x || !y) && n > 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "predict: x or y is NULL");
    if (batch_size <= 0) batch_size = 32;
    KC_TRY(kc__model_build(m));
    if (n <= 0) return KC_STATUS_OK;
    int bs = (int)KC_MIN((int64_t)batch_size, n);
    KC_TRY(kc__model_prepare(m, bs, false));
    int64_t in_size = kc__shape_size(&m->layers[0]->out_shape);
    int64_t out_size = kc__shape_size(&m->layers[kc__model_output(m)]->out_shape);
    kc__feed f;
    KC_TRY(kc__feed_open(m, bs, false, &f));
    int slot = -1;
    kc_status s = kc__feed_put(&f, x, NULL, (int)KC_MIN((int64_t)bs, n), &slot);
    for (int64_t i = 0; i < n && s == KC_STATUS_OK; i += bs) {
        int b = (int)KC_MIN((int64_t)bs, n - i), next = -1;
        s = kc__feed_acquire(&f, slot);
        if (s == KC_STATUS_OK) s = kc__feed_select(&f, slot, 0, b);
        if (s == KC_STATUS_OK) s = kc__model_forward(m, b, false, 0);
        if (s == KC_STATUS_OK) s = kc__model_finish_outputs(m, b);
        if (s == KC_STATUS_OK) s = kc__feed_release(&f, slot);
        if (s == KC_STATUS_OK && i + bs < n) /* the next batch travels while this one computes */
            s = kc__feed_put(&f, x + (i + bs) * in_size, NULL, (int)KC_MIN((int64_t)bs, n - i - bs), &next);
        if (s == KC_STATUS_OK)
            s = m->be->to_host(m->be, y + i * out_size, kc__model_output_buffer(m),
                               (size_t)b * (size_t)out_size * sizeof(float));
        slot = next;
    }
    kc__feed_close(&f);
    return s;
}

/* ---------------------------------------------------------------- fit */

typedef struct fit_ctx {
    kc_model *m;
    const kc_fit_opts *o;
    kc_history *h;
    bool stop;
} fit_ctx;

static void stop_by(fit_ctx *c, const kc_callback *cb) {
    c->stop = true;
    if (!c->h->stop_reason[0])
        snprintf(c->h->stop_reason, sizeof c->h->stop_reason, "%s", cb->name && *cb->name ? cb->name : "callback");
}

kc_status kc__auto_batch_size(kc_model *m, int cap, int grad_accum, int *out, char *reason, size_t reason_n);
kc_status kc__memory_budget(kc_model *m, size_t *budget, char *why, size_t why_n);

/* The accumulation buffer for grad_accum > 1, allocated on first use. */
static kc_status ensure_accum(kc_model *m) {
    if (m->accum || m->n_trainable == 0) return KC_STATUS_OK;
    return m->be->alloc(m->be, (size_t)m->n_trainable * sizeof(float), (void **)&m->accum);
}

/* Free what the step's plan allocated (arena, accumulation buffer) and the backend's
 * caches, before retrying with a smaller micro-batch. The input feed keeps its batch. */
static void release_step_memory(kc_model *m) {
    m->be->free(m->be, m->arena);
    m->arena = NULL;
    m->arena_cap = 0;
    m->be->free(m->be, m->accum);
    m->accum = NULL;
    kc__plan_free(&m->plan);
    m->be->release_cache(m->be);
}

/* Enqueue one optimizer step over the n examples in feed slot `slot`: micro-batches of mb
 * examples whose gradients (each of the batch-mean loss) are summed, then one update. The
 * loss sum and metric counts stay on the device (read_step). */
static kc_status train_step(kc_model *m, kc__feed *f, int slot, int n, int mb, uint64_t step_seed) {
    int k = (n + mb - 1) / mb;
    KC_TRY(kc__model_prepare(m, mb, true));
    if (k > 1) KC_TRY(ensure_accum(m));
    KC_TRY(kc__model_prepare_update(m));
    KC_TRY(kc__feed_acquire(f, slot));
    KC_TRY(m->be->memset0(m->be, m->dev_scalars, 8 * sizeof(float)));
    for (int j = 0; j < k; j++) {
        int off = j * mb, rows = KC_MIN(mb, n - off);
        uint64_t seed = j == 0 ? step_seed : kc__hash64(step_seed ^ (uint64_t)j);
        KC_TRY(kc__feed_select(f, slot, off, rows));
        KC_TRY(kc__model_forward(m, rows, true, seed));
        KC_TRY(kc__model_backward_update(m, rows, n, false));
        if (k == 1) continue;
        KC_TRY(m->be->axpy(m->be, m->dev_scalars + 5, m->dev_scalars, 1.0f, 1)); /* the step's loss sum */
        if (m->n_trainable == 0) continue;
        if (j == 0) KC_TRY(m->be->copy(m->be, m->accum, m->grads, (size_t)m->n_trainable * sizeof(float)));
        else KC_TRY(m->be->axpy(m->be, m->accum, m->grads, 1.0f, m->n_trainable));
    }
    if (m->n_trainable > 0) KC_TRY(kc__model_apply_gradients(m, k > 1 ? m->accum : m->grads));
    return kc__feed_release(f, slot);
}

/* The step's loss sum and metric counts into sums (the step's one wait for the device). */
static kc_status read_step(kc_model *m, int n, int mb, double *sums) {
    float sc[8];
    KC_TRY(read_scalars(m, sc));
    sums[0] += (n + mb - 1) / mb > 1 ? sc[5] : sc[0];
    for (int i = 0; i < m->n_metrics; i++) sums[1 + i] += sc[1 + i];
    return KC_STATUS_OK;
}

/* train_step with out-of-memory recovery: on KC_STATUS_OUT_OF_MEMORY free the step's
 * memory, halve the micro-batch (doubling the accumulation: the batch is unchanged) and
 * retry the same step from its start. */
static kc_status train_step_recovering(kc_model *m, kc__feed *f, int slot, int n, int *mb, int batch_size,
                                       bool recover, uint64_t step_seed) {
    for (;;) {
        kc_status s = train_step(m, f, slot, n, *mb, step_seed);
        if (s != KC_STATUS_OUT_OF_MEMORY || !recover) return s;
        char cause[KC_ERROR_MAX];
        snprintf(cause, sizeof cause, "%s", kc_last_error());
        kc_memory_plan pl = {0};
        size_t budget = 0;
        char why[160] = "";
        int k = (batch_size + *mb - 1) / *mb;
        release_step_memory(m);
        kc_model_plan_memory(m, *mb, 1, k, &pl);
        kc__memory_budget(m, &budget, why, sizeof why);
        if (*mb <= 1)
            return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                            "out of memory even at micro-batch 1: a step needs %.1f MiB and %.1f MiB may be used (%s); "
                            "raise the memory limit, free memory or use a smaller model (%s)",
                            (double)pl.device_total / 1048576.0, (double)budget / 1048576.0, why, cause);
        int next = (*mb + 1) / 2;
        int next_k = (batch_size + next - 1) / next;
        kc__log_always(KC_LOG_WARNING,
                       "out of memory at micro-batch %d (a step needs %.1f MiB, %.1f MiB may be used); continuing "
                       "with micro-batch %d x %d accumulation steps, batch size %d unchanged",
                       *mb, (double)pl.device_total / 1048576.0, (double)budget / 1048576.0, next, next_k, batch_size);
        *mb = next;
    }
}

/* The training position handed to the checkpoint hooks. */
static kc__fit_pos fit_pos(int epoch, int64_t step, int64_t seen, const double *sums, double lr, int mb,
                           const kc_rng *rng) {
    kc__fit_pos p = {.epoch = epoch, .step = step, .seen = seen, .epoch_lr = lr, .micro_batch = mb, .rng = *rng};
    memcpy(p.sums, sums, sizeof p.sums);
    return p;
}

kc_status kc_fit(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, kc_history **out) {
    KC_TRY(check_ready(m, "fit"));
    if (!train) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: training dataset is NULL");
    kc_fit_opts o = opts ? *opts : (kc_fit_opts){0};
    KC_TRY(kc__ckpt_fit_opts(m, &o)); /* resume: the checkpoint's batch size, seed, ... where o leaves them unset */
    if (o.epochs == 0) o.epochs = 1;
    if (o.batch_size == 0) o.batch_size = 32;
    if (o.prefetch == 0) o.prefetch = 2;
    if (o.grad_accum == 0) o.grad_accum = 1;
    if (o.max_batch_size == 0) o.max_batch_size = 4096;
    if (o.epochs < 0 || (o.batch_size < 0 && o.batch_size != KC_BATCH_SIZE_AUTO) || o.prefetch < 0 ||
        o.steps_per_epoch < 0 || o.grad_accum < 0 || o.max_batch_size < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: epochs (%d), batch_size (%d), prefetch (%d), grad_accum "
                        "(%d), max_batch_size and steps_per_epoch must not be negative",
                        o.epochs, o.batch_size, o.prefetch, o.grad_accum);
    if (o.batch_size > 0 && o.grad_accum > o.batch_size)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: grad_accum %d is more than the batch size %d; each of the "
                        "micro-batches needs at least one example", o.grad_accum, o.batch_size);
    if (o.validation_split < 0 || o.validation_split >= 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: validation_split = %g must be in [0, 1)", o.validation_split);
    if (o.num_callbacks > 0 && !o.callbacks)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: num_callbacks is %d but callbacks is NULL", o.num_callbacks);
    if (out) *out = NULL;
    KC_TRY(check_data(m, train, "training data"));
    bool recover = kc__bool3(o.oom_recovery, true);

    kc_status s = KC_STATUS_OK;
    kc__ckpt *ck = NULL;
    kc_dataset *tr = NULL, *val = NULL;
    const kc_dataset *valp = o.validation_data;
    int64_t n_all = kc_dataset_size(train);
    if (!valp && o.validation_split > 0) {
        int64_t split_at = (int64_t)((double)n_all * (1.0 - o.validation_split));
        if (split_at <= 0 || split_at >= n_all)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: validation_split %g leaves no %s examples (%lld in all)",
                            o.validation_split, split_at <= 0 ? "training" : "validation", (long long)n_all);
        KC_TRY(kc_dataset_slice(train, 0, split_at, &tr));
        s = kc_dataset_slice(train, split_at, n_all - split_at, &val);
        if (s != KC_STATUS_OK) {
            kc_dataset_destroy(tr);
            return s;
        }
        valp = val;
    }
    if (valp && s == KC_STATUS_OK) s = check_data(m, valp, "validation data");
    const kc_dataset *trp = tr ? tr : train;
    int64_t n = kc_dataset_size(trp);
    kc__fit_env fe; /* GPU readings, placement lines, the input-bound verdict */
    kc__fit_env_begin(&fe, m);
    kc__feed feed = {0};
    if (s == KC_STATUS_OK && o.batch_size == KC_BATCH_SIZE_AUTO) {
        char reason[512];
        int cap = (int)KC_MIN((int64_t)o.max_batch_size, (n + 7) / 8 * 8);
        s = kc__auto_batch_size(m, cap, o.grad_accum, &o.batch_size, reason, sizeof reason);
        /* confirm with one real step (the feed, prepare, a forward pass); step down by 8 on failure */
        while (s == KC_STATUS_OK) {
            s = kc__feed_open(m, (int)KC_MIN((int64_t)o.batch_size, n), true, &feed);
            if (s == KC_STATUS_OK) s = kc__model_prepare(m, o.batch_size, true);
            if (s == KC_STATUS_OK) s = kc__model_forward(m, o.batch_size, false, 0);
            if (s != KC_STATUS_OUT_OF_MEMORY || o.batch_size <= 8) break;
            kc__feed_close(&feed);
            release_step_memory(m);
            o.batch_size -= 8;
            snprintf(reason, sizeof reason, "auto batch size %d: the planned size did not fit in a real step",
                     o.batch_size);
            s = KC_STATUS_OK;
        }
        if (s == KC_STATUS_OK) kc__log_always(KC_LOG_INFO, "%s", reason);
        if (s == KC_STATUS_OK && o.grad_accum > o.batch_size) o.grad_accum = o.batch_size;
    }
    if (s != KC_STATUS_OK) {
        kc__feed_close(&feed);
        kc__fit_env_end(&fe, m);
        kc_dataset_destroy(tr);
        kc_dataset_destroy(val);
        return s;
    }
    int bs = (int)KC_MIN((int64_t)o.batch_size, n);
    int mb = (bs + o.grad_accum - 1) / o.grad_accum; /* micro-batch */
    int64_t steps = (n + bs - 1) / bs;
    if (o.steps_per_epoch > 0 && o.steps_per_epoch < steps) steps = o.steps_per_epoch;
    int64_t per_epoch = KC_MIN(n, steps * bs);

    kc_history *h = kc__calloc(1, sizeof *h, "the training history");
    int64_t *order = kc__calloc((size_t)n, sizeof(int64_t), "the shuffle order");
    if (!h || !order) s = KC_STATUS_OUT_OF_MEMORY;
    if (s == KC_STATUS_OK && !feed.m) s = kc__feed_open(m, bs, true, &feed);
    if (h) {
        snprintf(h->device, sizeof h->device, "%s", kc_model_device(m));
        snprintf(h->device_reason, sizeof h->device_reason, "%s", kc_model_device_reason(m));
    }
    if (s != KC_STATUS_OK) goto done;
    h->n_metrics = m->n_metrics;
    for (int i = 0; i < m->n_metrics; i++) snprintf(h->metric_names[i], sizeof h->metric_names[i], "%s", m->metrics[i].name);

    kc_rng rng;
    uint64_t seed = o.seed ? o.seed : m->seed;
    kc__rng_seed(&rng, seed);
    for (int64_t i = 0; i < n; i++) order[i] = i;
    /* checkpoints; on resume: model state, the shuffles of the finished epochs, the position */
    kc__fit_geom geom = {.num_examples = n, .batch_size = bs, .micro_batch = mb, .steps = steps, .epochs = o.epochs,
                         .seed = seed, .shuffle = kc__bool3(o.shuffle, true), .has_val = valp != NULL,
                         .validation_split = o.validation_split};
    s = kc__ckpt_open(m, &o, &geom, &rng, order, &ck);
    const kc__fit_pos *rp = kc__ckpt_resume_pos(ck);
    const kc_epoch_logs *past = NULL;
    for (int i = 0, np = kc__ckpt_history(ck, &past); i < np && s == KC_STATUS_OK; i++) s = history_append(h, &past[i]);
    if (s != KC_STATUS_OK) goto done;
    if (rp) mb = rp->micro_batch;
    fit_ctx c = {.m = m, .o = &o, .h = h};

    for (int k = 0; k < o.num_callbacks; k++)
        if (o.callbacks[k]->on_train_begin && o.callbacks[k]->on_train_begin(m, o.callbacks[k]->user) == KC_STOP_TRAINING)
            stop_by(&c, o.callbacks[k]);
    kc__ckpt_restore_callbacks(ck, m); /* resumed: the callbacks' own states */

    for (int epoch = rp ? rp->epoch : 0; epoch < o.epochs && !c.stop && s == KC_STATUS_OK; epoch++) {
        for (int k = 0; k < o.num_callbacks; k++)
            if (o.callbacks[k]->on_epoch_begin &&
                o.callbacks[k]->on_epoch_begin(m, epoch, o.callbacks[k]->user) == KC_STOP_TRAINING)
                stop_by(&c, o.callbacks[k]);
        if (c.stop) break;
        kc_rng rng_epoch = rng; /* for checkpoints: this epoch's order replays from it */
        if (kc__bool3(o.shuffle, true)) kc__shuffle_i64(&rng, order, n);
        double t0 = kc__now();
        kc__fit_env_epoch_begin(&fe);
        double sums[1 + KC_MAX_METRICS] = {0};
        int64_t seen = 0, step = 0;
        double lr_epoch = kc__optimizer_lr(&m->opt, m->opt.iterations);
        kc_loader *ld = NULL;
        int64_t skip = 0;
        if (rp && epoch == rp->epoch) { /* resumed mid-epoch: the rest of this epoch's order */
            step = rp->step;
            seen = rp->seen;
            memcpy(sums, rp->sums, sizeof sums);
            if (step > 0) lr_epoch = rp->epoch_lr;
            skip = KC_MIN(per_epoch, step * bs);
        }
        s = kc__loader_create(trp, order + skip, per_epoch - skip, bs, o.prefetch, &ld);
        const kc_batch *b = NULL;
        int slot = -1, rows = 0;
        if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
        if (s == KC_STATUS_OK && b) s = kc__feed_put(&feed, b->x, b->y, rows = b->n, &slot);
        while (s == KC_STATUS_OK && !c.stop && b) {
            uint64_t step_seed = kc__hash64(seed + 0x51ed27u * (uint64_t)(m->opt.iterations + 1));
            int done = rows, next = -1;
            s = train_step_recovering(m, &feed, slot, done, &mb, bs, recover, step_seed);
            /* the next batch travels while this step computes; then the step's one wait */
            if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
            if (s == KC_STATUS_OK && b) s = kc__feed_put(&feed, b->x, b->y, rows = b->n, &next);
            if (s == KC_STATUS_OK) s = read_step(m, done, mb, sums);
            if (s != KC_STATUS_OK) break;
            slot = next;
            seen += done;
            kc_batch_logs bl = {.epoch = epoch, .step = step, .steps = steps, .loss = sums[0] / (double)seen,
                                .seconds = kc__now() - t0, .samples = seen};
            for (int i = 0; i < m->n_metrics; i++) bl.metrics[i] = sums[1 + i] / (double)seen;
            kc__fit_env_step(&fe, m, mb, &bl);
            step++;
            for (int k = 0; k < o.num_callbacks; k++)
                if (o.callbacks[k]->on_batch_end &&
                    o.callbacks[k]->on_batch_end(m, &bl, o.callbacks[k]->user) == KC_STOP_TRAINING)
                    stop_by(&c, o.callbacks[k]);
            if (ck) {
                kc__fit_pos p = fit_pos(epoch, step, seen, sums, lr_epoch, mb, &rng_epoch);
                s = kc__ckpt_after_step(ck, m, &p, &bl, h->epochs, h->n);
                if (s != KC_STATUS_OK) break;
            }
        }
        double waited = ld ? kc__loader_wait_seconds(ld) : 0;
        kc__loader_destroy(ld);
        if (s != KC_STATUS_OK) break;
        kc_epoch_logs el = {.epoch = epoch, .steps = step, .lr = lr_epoch, .batch_size = bs, .micro_batch = mb,
                            .grad_accum = (bs + mb - 1) / mb};
        el.loss = seen ? sums[0] / (double)seen : NAN;
        for (int i = 0; i < m->n_metrics; i++) el.metrics[i] = seen ? sums[1 + i] / (double)seen : NAN;
        el.seconds = kc__now() - t0;
        el.images_per_second = el.seconds > 0 ? (double)seen / el.seconds : 0;
        kc__fit_env_epoch_end(&fe, m, waited, &el);
        if (valp && seen > 0) {
            eval_acc va;
            s = run_eval(m, valp, mb, &feed, &va); /* the micro-batch: known to fit */
            if (s != KC_STATUS_OK) break;
            el.has_val = 1;
            el.val_loss = va.samples ? va.loss_sum / (double)va.samples : NAN;
            for (int i = 0; i < m->n_metrics; i++) el.val_metrics[i] = va.samples ? va.correct[i] / (double)va.samples : NAN;
        }
        s = history_append(h, &el);
        if (s != KC_STATUS_OK) break;
        for (int k = 0; k < o.num_callbacks; k++)
            if (o.callbacks[k]->on_epoch_end && o.callbacks[k]->on_epoch_end(m, &el, o.callbacks[k]->user) == KC_STOP_TRAINING)
                stop_by(&c, o.callbacks[k]);
        if (ck) { /* a complete epoch: the next one starts; else where it was cut short */
            bool complete = step >= steps;
            double zero[1 + KC_MAX_METRICS] = {0};
            kc__fit_pos p = complete ? fit_pos(epoch + 1, 0, 0, zero, 0, mb, &rng)
                                     : fit_pos(epoch, step, seen, sums, lr_epoch, mb, &rng_epoch);
            s = kc__ckpt_after_epoch(ck, m, &p, complete, c.stop, &el, h->epochs, complete ? h->n : h->n - 1);
        }
    }
    for (int k = 0; k < o.num_callbacks; k++)
        if (o.callbacks[k]->on_train_end) o.callbacks[k]->on_train_end(m, o.callbacks[k]->user);
done:
    kc__feed_close(&feed);
    kc__fit_env_end(&fe, m);
    kc__ckpt_close(ck);
    free(order);
    kc_dataset_destroy(tr);
    kc_dataset_destroy(val);
    if (s == KC_STATUS_OK && out) *out = h;
    else kc_history_destroy(h);
    return s;
}
