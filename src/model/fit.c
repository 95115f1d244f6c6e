/* fit.c — Keras's fit / evaluate / predict loops and the per-epoch history.
 *
 * fit: per epoch, the training examples (validation split taken off the end first, as
 * Keras does) are shuffled with the seed, a loader thread gathers the next batches while
 * the current one trains, and each step is forward -> loss -> backward -> update on the
 * model's backend. The input feed (feed.h) uploads batch k + 1 while step k computes, and
 * one host read per step (its only synchronisation) brings back the loss and metrics.
 * The caller's hooks (fit_hooks.h: kc_fit passes the checkpoints' table from
 * ../io/checkpoint_fit.c) are told after each step and each epoch; a resume restores the
 * model, replays the finished epochs' shuffles and starts the loader at the saved step of
 * the saved epoch's order. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../data/loader.h"
#include "device.h"
#include "dist.h"
#include "feed.h"
#include "fit_hooks.h"
#include "replicas.h"

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
    return kc__check_labels(m, d, what);
}

/* The step's loss sum and metric counts: the one host read (and wait) of a step. */
static kc_status read_scalars(kc_model *m, float *host) {
    return m->be->to_host(m->be, host, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
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
    const int tile = kc__model_infer_tile(m, bs); /* each batch runs in tiles of this many, as predict (tile.c) */
    KC_TRY(kc__model_prepare(m, tile, false));
    kc__feed own = {0};
    if (!feed) KC_TRY(kc__feed_open(m, bs, true, feed = &own));
    kc_loader *ld = NULL;
    kc_status s = kc__loader_create(d, NULL, n, bs, 2, &ld);
    const kc_batch *b = NULL;
    int slot = -1, rows = 0;
    if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
    if (s == KC_STATUS_OK && b) s = kc__feed_put(feed, b->x, b->y, b->t, b->t_size, rows = b->n, &slot);
    while (s == KC_STATUS_OK && b) {
        float sc[KC_SCALAR_COUNT];
        s = kc__feed_acquire(feed, slot);
        if (s == KC_STATUS_OK) s = m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
        for (int off = 0; off < rows && s == KC_STATUS_OK; off += tile) { /* the sums add up over the tiles */
            const int t = KC_MIN(tile, rows - off);
            s = kc__feed_select(feed, slot, off, t);
            if (s == KC_STATUS_OK) s = kc__model_forward(m, t, false, 0);
            if (s == KC_STATUS_OK) s = kc__model_accumulate_metrics(m, t); /* the loss overwritten, counts added */
            if (s == KC_STATUS_OK)
                s = m->be->axpy(m->be, m->dev_scalars + KC_SCALAR_STEP_LOSS, m->dev_scalars + KC_SCALAR_LOSS, 1.0f, 1);
        }
        if (s == KC_STATUS_OK) s = kc__feed_release(feed, slot);
        int done = rows, next = -1;
        if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b); /* the next batch travels while this one computes */
        if (s == KC_STATUS_OK && b) s = kc__feed_put(feed, b->x, b->y, b->t, b->t_size, rows = b->n, &next);
        if (s == KC_STATUS_OK) s = read_scalars(m, sc);
        if (s != KC_STATUS_OK) break;
        const double per = 1.0 / kc__model_positions(m); /* sums over positions -> per example */
        acc->loss_sum += sc[KC_SCALAR_STEP_LOSS] * per; /* the tiles' losses summed */
        for (int i = 0; i < m->n_metrics; i++) acc->correct[i] += sc[KC_SCALAR_METRICS + i] * per;
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

kc_status kc_model_check_data(kc_model *m, const kc_dataset *d) {
    KC_TRY(check_ready(m, "kc_model_check_data"));
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_check_data: the dataset is NULL");
    return check_data(m, d, "the data's");
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

/* Predict's outputs of t examples (in the model's output buffer) into y. */
static kc_status outputs_to_host(kc_model *m, int t, int64_t out_size, float *y) {
    return m->be->to_host(m->be, y, kc__model_output_buffer(m), (size_t)t * (size_t)out_size * sizeof(float));
}

/* in tiles (a backend whose inference runs in tiles: the CPU) each tile's inputs go
 * from the caller's array straight into the plan's input buffer, one copy while the next
 * layers still find them in cache; the feed (staging copy, upload, then the plan's input: three
 * copies on the CPU) pays only where uploads overlap the compute, on a device. The tiles split
 * each batch evenly as kc__model_infer_tile says. */
static kc_status predict_tiled(kc_model *m, const float *x, int64_t n, int bs, int tile, int64_t in_size,
                               int64_t out_size, float *y) {
    for (int64_t i = 0; i < n; i += bs) {
        const int b = (int)KC_MIN((int64_t)bs, n - i);
        for (int off = 0; off < b; off += tile) {
            const int t = KC_MIN(tile, b - off);
            KC_TRY(m->be->to_device(m->be, kc__model_input_buffer(m), x + (i + off) * in_size,
                                    (size_t)t * (size_t)in_size * sizeof(float)));
            KC_TRY(kc__model_forward(m, t, false, 0));
            KC_TRY(kc__model_finish_outputs(m, t));
            KC_TRY(outputs_to_host(m, t, out_size, y + (i + off) * out_size));
        }
    }
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
    const int tile = kc__model_infer_tile(m, bs); /* each batch runs in tiles of this many (tile.c) */
    KC_TRY(kc__model_prepare(m, tile, false));
    int64_t in_size = kc__shape_size(&m->layers[0]->out_shape);
    int64_t out_size = kc__shape_size(&m->layers[kc__model_output(m)]->out_shape);
    if (tile < bs) return predict_tiled(m, x, n, bs, tile, in_size, out_size, y);
    kc__feed f;
    KC_TRY(kc__feed_open(m, bs, false, &f));
    int slot = -1;
    kc_status s = kc__feed_put(&f, x, NULL, NULL, 0, bs, &slot);
    for (int64_t i = 0; i < n && s == KC_STATUS_OK; i += bs) {
        int b = (int)KC_MIN((int64_t)bs, n - i), next = -1;
        s = kc__feed_acquire(&f, slot);
        if (s == KC_STATUS_OK) s = kc__feed_select(&f, slot, 0, b);
        if (s == KC_STATUS_OK) s = kc__model_forward(m, b, false, 0);
        if (s == KC_STATUS_OK) s = kc__model_finish_outputs(m, b);
        if (s == KC_STATUS_OK) s = kc__feed_release(&f, slot);
        if (s == KC_STATUS_OK && i + bs < n) /* the next batch travels while this one computes */
            s = kc__feed_put(&f, x + (i + bs) * in_size, NULL, NULL, 0, (int)KC_MIN((int64_t)bs, n - i - bs), &next);
        if (s == KC_STATUS_OK) s = outputs_to_host(m, b, out_size, y + i * out_size);
        slot = next;
    }
    kc__feed_close(&f);
    return s;
}

/* ---------------------------------------------------------------- a training step */

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
static kc_status train_step(kc_model *m, kc__feed *f, int slot, int n, int mb, uint64_t step_seed,
                            const kc_collective *coll) {
    int k = (n + mb - 1) / mb;
    KC_TRY(kc__model_prepare(m, mb, true));
    if (k > 1) KC_TRY(ensure_accum(m));
    KC_TRY(kc__model_prepare_update(m));
    KC_TRY(kc__feed_acquire(f, slot));
    KC_TRY(m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float)));
    for (int j = 0; j < k; j++) {
        int off = j * mb, rows = KC_MIN(mb, n - off);
        uint64_t seed = j == 0 ? step_seed : kc__hash64(step_seed ^ (uint64_t)j);
        KC_TRY(kc__feed_select(f, slot, off, rows));
        KC_TRY(kc__model_forward(m, rows, true, seed));
        if (k == 1) KC_TRY(kc__dist_overlap_begin(m, coll, m->dist_bucket_bytes, m->grads)); /* during backward */
        kc_status s = kc__model_backward_update(m, rows, n, false);
        m->dist_active = m->dist_active && s == KC_STATUS_OK;
        KC_TRY(s);
        if (k == 1) continue;
        KC_TRY(m->be->axpy(m->be, m->dev_scalars + KC_SCALAR_STEP_LOSS, m->dev_scalars + KC_SCALAR_LOSS, 1.0f, 1));
        if (m->n_trainable == 0) continue;
        if (j == 0) KC_TRY(m->be->copy(m->be, m->accum, m->grads, (size_t)m->n_trainable * sizeof(float)));
        else KC_TRY(m->be->axpy(m->be, m->accum, m->grads, 1.0f, m->n_trainable));
    }
    float *g = k > 1 ? m->accum : m->grads;
    /* accumulated: the same buckets, after the last micro-batch (every rank makes the same
     * collective calls whatever its micro-batch, e.g. after an out-of-memory recovery) */
    if (k > 1) KC_TRY(kc__dist_overlap_begin(m, coll, m->dist_bucket_bytes, m->accum));
    bool overlapped = false;
    KC_TRY(kc__dist_overlap_finish(m, &overlapped));
    if (m->n_trainable > 0 && !overlapped) KC_TRY(kc__dist_average_grads(m, coll, g)); /* the ranks' mean */
    if (m->n_trainable > 0) KC_TRY(kc__model_apply_gradients(m, g));
    return kc__feed_release(f, slot);
}

/* The step's loss sum and metric counts into sums (the step's one wait for the device). */
static kc_status read_step(kc_model *m, int n, int mb, double *sums, const kc_collective *coll) {
    float sc[KC_SCALAR_COUNT];
    KC_TRY(read_scalars(m, sc));
    double d[1 + KC_MAX_METRICS] = {(n + mb - 1) / mb > 1 ? sc[KC_SCALAR_STEP_LOSS] : sc[KC_SCALAR_LOSS]};
    for (int i = 0; i < m->n_metrics; i++) d[1 + i] = sc[KC_SCALAR_METRICS + i];
    for (int i = 0; i <= m->n_metrics; i++) d[i] /= kc__model_positions(m); /* sums over positions -> per example */
    KC_TRY(kc__dist_sum(coll, d, 1 + m->n_metrics, "the all-reduce of the loss and metrics"));
    for (int i = 0; i <= m->n_metrics; i++) sums[i] += d[i];
    return KC_STATUS_OK;
}

/* train_step with out-of-memory recovery: on KC_STATUS_OUT_OF_MEMORY free the step's
 * memory, halve the micro-batch (doubling the accumulation: the batch is unchanged) and
 * retry the same step from its start. */
static kc_status train_step_recovering(kc_model *m, kc__feed *f, int slot, int n, int *mb, int batch_size,
                                       bool recover, uint64_t step_seed, const kc_collective *coll) {
    for (;;) {
        kc_status s = train_step(m, f, slot, n, *mb, step_seed, coll);
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

/* The training position handed to the hooks. */
static kc__fit_pos fit_pos(int epoch, int64_t step, int64_t seen, const double *sums, double lr, int mb,
                           const kc_rng *rng) {
    kc__fit_pos p = {.epoch = epoch, .step = step, .seen = seen, .epoch_lr = lr, .micro_batch = mb, .rng = *rng};
    memcpy(p.sums, sums, sizeof p.sums);
    return p;
}

/* ---------------------------------------------------------------- fit */

/* One kc__fit_run: its options (defaults filled in), data, sizes and running state. */
typedef struct fit_run {
    kc_model *m;
    kc_fit_opts o;
    const kc__fit_hooks *hooks;
    void *hrun;                   /* the hooks' state of this run (NULL: no more hook calls) */
    kc_history *h;
    const kc_dataset *trp, *valp; /* training data (after the split), validation data */
    kc_dataset *tr, *val;         /* the slices of a validation split (owned) */
    kc__feed feed;
    kc__fit_env fe;               /* GPU readings, placement lines, the input-bound verdict */
    int64_t n, steps, per_epoch;  /* training examples, steps per epoch, examples per epoch */
    int bs, mb;                   /* batch size, micro-batch */
    bool recover, stop;
    uint64_t seed;
    kc_rng rng;                   /* the shuffle generator */
    int64_t *order;               /* (n_data) the data order, reshuffled per epoch */
    /* data-parallel (o.collective over several ranks): n is this rank's share of n_data
     * examples, bs its share of the global batch, ord its positions of order */
    const kc_collective *coll;
    int64_t n_data;
    int64_t *ord;
    const kc__fit_pos *rp;        /* where a resume continues (NULL: from the start) */
} fit_run;

typedef enum cb_event { CB_TRAIN_BEGIN, CB_EPOCH_BEGIN, CB_BATCH_END, CB_EPOCH_END, CB_TRAIN_END } cb_event;

/* Every callback's handler of one event, in order. KC_STOP_TRAINING stops the fit after
 * this batch or epoch; the first callback to ask is the history's stop reason. */
static void dispatch(fit_run *r, cb_event ev, int epoch, const kc_batch_logs *bl, const kc_epoch_logs *el) {
    for (int k = 0; k < r->o.num_callbacks; k++) {
        kc_callback *cb = r->o.callbacks[k];
        kc_callback_action a = KC_CONTINUE;
        switch (ev) {
        case CB_TRAIN_BEGIN: a = cb->on_train_begin ? cb->on_train_begin(r->m, cb->user) : a; break;
        case CB_EPOCH_BEGIN: a = cb->on_epoch_begin ? cb->on_epoch_begin(r->m, epoch, cb->user) : a; break;
        case CB_BATCH_END: a = cb->on_batch_end ? cb->on_batch_end(r->m, bl, cb->user) : a; break;
        case CB_EPOCH_END: a = cb->on_epoch_end ? cb->on_epoch_end(r->m, el, cb->user) : a; break;
        case CB_TRAIN_END:
            if (cb->on_train_end) cb->on_train_end(r->m, cb->user);
            break;
        }
        if (a != KC_STOP_TRAINING) continue;
        r->stop = true;
        if (!r->h->stop_reason[0])
            snprintf(r->h->stop_reason, sizeof r->h->stop_reason, "%s", cb->name && *cb->name ? cb->name : "callback");
    }
}

/* The fit options with their defaults (after the hooks' fit_opts: a resume takes the
 * checkpoint's where opts leave them unset), checked. */
static kc_status fit_options(fit_run *r, const kc_fit_opts *opts) {
    kc_fit_opts o = opts ? *opts : (kc_fit_opts){0};
    if (r->hooks && r->hooks->fit_opts) KC_TRY(r->hooks->fit_opts(r->hooks->user, r->m, &o));
    if (o.epochs == 0) o.epochs = 1;
    if (o.batch_size == 0) o.batch_size = 32;
    if (o.prefetch == 0) o.prefetch = 2;
    if (o.grad_accum == 0) o.grad_accum = 1;
    if (o.max_batch_size == 0) o.max_batch_size = 4096;
    if (o.epochs < 0 || (o.batch_size < 0 && o.batch_size != KC_BATCH_SIZE_AUTO) || o.prefetch < KC_PREFETCH_NONE ||
        o.steps_per_epoch < 0 || o.grad_accum < 0 || o.max_batch_size < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: epochs (%d), batch_size (%d), prefetch (%d; KC_PREFETCH_NONE "
                        "for none), grad_accum (%d), max_batch_size and steps_per_epoch must not be negative",
                        o.epochs, o.batch_size, o.prefetch, o.grad_accum);
    if (o.batch_size > 0 && o.grad_accum > o.batch_size)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: grad_accum %d is more than the batch size %d; each of the "
                        "micro-batches needs at least one example", o.grad_accum, o.batch_size);
    if (o.validation_split < 0 || o.validation_split >= 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: validation_split = %g must be in [0, 1)", o.validation_split);
    if (o.num_callbacks > 0 && !o.callbacks)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: num_callbacks is %d but callbacks is NULL", o.num_callbacks);
    r->o = o;
    r->recover = kc__bool3(o.oom_recovery, true);
    /* synchronised BatchNormalization: a micro-batch halved on one rank alone would change
     * the number of its collective calls, so out-of-memory recovery stays off */
    if (kc__dist_on(o.collective) && o.sync_batchnorm == KC_TRUE) r->recover = false;
    return KC_STATUS_OK;
}

/* Keras's validation split: the last validation_split of the data, taken off before
 * any shuffling. Sets the training and validation data of the run. */
static kc_status split_validation(fit_run *r, const kc_dataset *train) {
    r->valp = r->o.validation_data;
    int64_t n_all = kc_dataset_size(train);
    if (!r->valp && r->o.validation_split > 0) {
        int64_t split_at = (int64_t)((double)n_all * (1.0 - r->o.validation_split));
        if (split_at <= 0 || split_at >= n_all)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: validation_split %g leaves no %s examples (%lld in all)",
                            r->o.validation_split, split_at <= 0 ? "training" : "validation", (long long)n_all);
        KC_TRY(kc_dataset_slice(train, 0, split_at, &r->tr));
        KC_TRY(kc_dataset_slice(train, split_at, n_all - split_at, &r->val));
        r->valp = r->val;
    }
    r->trp = r->tr ? r->tr : train;
    r->n = kc_dataset_size(r->trp);
    return KC_STATUS_OK;
}

/* KC_BATCH_SIZE_AUTO: the largest planned size that fits, confirmed by one real step (the
 * feed, prepare, a forward pass) and stepped down by 8 while that runs out of memory.
 * Leaves the feed open for that size. */
static kc_status choose_batch_size(fit_run *r) {
    kc_model *m = r->m;
    kc_fit_opts *o = &r->o;
    char reason[512];
    int cap = (int)KC_MIN((int64_t)o->max_batch_size, (r->n + 7) / 8 * 8);
    kc_status s = kc__auto_batch_size(m, cap, o->grad_accum, &o->batch_size, reason, sizeof reason);
    while (s == KC_STATUS_OK) {
        s = kc__feed_open(m, (int)KC_MIN((int64_t)o->batch_size, r->n), true, &r->feed);
        if (s == KC_STATUS_OK) s = kc__model_prepare(m, o->batch_size, true);
        if (s == KC_STATUS_OK) s = kc__model_forward(m, o->batch_size, false, 0);
        if (s != KC_STATUS_OUT_OF_MEMORY || o->batch_size <= 8) break;
        kc__feed_close(&r->feed);
        release_step_memory(m);
        o->batch_size -= 8;
        snprintf(reason, sizeof reason, "auto batch size %d: the planned size did not fit in a real step",
                 o->batch_size);
        s = KC_STATUS_OK;
    }
    if (s == KC_STATUS_OK) kc__log_always(KC_LOG_INFO, "%s", reason);
    if (s == KC_STATUS_OK && o->grad_accum > o->batch_size) o->grad_accum = o->batch_size;
    return s;
}

/* Data-parallel: this rank's share of the data and batch, then the ranks' agreement on
 * the model and rank 0's weights (dist.c). Nothing without a collective. */
static kc_status dist_start(fit_run *r) {
    r->coll = r->o.collective;
    r->n_data = r->n;
    r->m->dist_bucket_bytes = r->o.bucket_bytes;
    r->m->sync_bn = kc__dist_on(r->coll) && r->o.sync_batchnorm == KC_TRUE ? r->coll : NULL;
    KC_TRY(kc__dist_geometry(r->coll, r->n_data, r->o.batch_size, r->o.drop_remainder == KC_TRUE, &r->n,
                             &r->o.batch_size));
    return kc__dist_begin(r->m, r->coll, r->n_data);
}

/* The run's sizes, history, data order and feed; then the hooks' begin (on a resume: the
 * model's state, the finished epochs' shuffles and logs, where to continue). */
static kc_status fit_start(fit_run *r) {
    kc_model *m = r->m;
    r->bs = (int)KC_MIN((int64_t)r->o.batch_size, r->n);
    r->mb = (r->bs + r->o.grad_accum - 1) / r->o.grad_accum;
    r->steps = (r->n + r->bs - 1) / r->bs;
    if (r->o.steps_per_epoch > 0 && r->o.steps_per_epoch < r->steps) r->steps = r->o.steps_per_epoch;
    r->per_epoch = KC_MIN(r->n, r->steps * r->bs);
    r->h = kc__calloc(1, sizeof *r->h, "the training history");
    r->order = kc__calloc((size_t)r->n_data, sizeof(int64_t), "the shuffle order");
    r->ord = kc__dist_on(r->coll) ? kc__calloc((size_t)r->n, sizeof(int64_t), "the rank's order") : r->order;
    if (!r->h || !r->order || !r->ord) return KC_STATUS_OUT_OF_MEMORY;
    if (!r->feed.m) KC_TRY(kc__feed_open(m, r->bs, true, &r->feed));
    kc_history *h = r->h;
    snprintf(h->device, sizeof h->device, "%s", kc_model_device(m));
    snprintf(h->device_reason, sizeof h->device_reason, "%s", kc_model_device_reason(m));
    h->n_metrics = m->n_metrics;
    for (int i = 0; i < m->n_metrics; i++)
        snprintf(h->metric_names[i], sizeof h->metric_names[i], "%s", m->metrics[i].name);
    r->seed = r->o.seed ? r->o.seed : m->seed;
    kc__rng_seed(&r->rng, r->seed);
    for (int64_t i = 0; i < r->n_data; i++) r->order[i] = i;
    if (!r->hooks || !r->hooks->begin) return KC_STATUS_OK;
    /* data-parallel: the global geometry, so that one process can resume the run */
    kc__fit_geom geom = {.num_examples = r->n_data, .batch_size = r->bs * kc__dist_size(r->coll),
                         .micro_batch = r->mb, .steps = r->steps,
                         .epochs = r->o.epochs, .seed = r->seed, .shuffle = kc__bool3(r->o.shuffle, true),
                         .has_val = r->valp != NULL, .validation_split = r->o.validation_split};
    kc__fit_resume res = {0};
    KC_TRY(r->hooks->begin(r->hooks->user, m, &r->o, &geom, &r->rng, r->order, &r->hrun, &res));
    for (int i = 0; i < res.n_history; i++) KC_TRY(history_append(h, &res.history[i]));
    r->rp = res.pos;
    if (r->rp) r->mb = KC_MIN(r->rp->micro_batch, r->bs); /* another number of ranks: at most the share */
    return KC_STATUS_OK;
}

/* One epoch's running state. */
typedef struct epoch_run {
    int epoch;
    kc_rng rng_start;                /* the shuffle generator before this epoch's shuffle */
    double sums[1 + KC_MAX_METRICS]; /* loss sum and metric counts so far */
    int64_t seen, step;
    double lr, t0;                   /* the learning rate logged for the epoch, its start */
} epoch_run;

/* The epoch's steps from e->step on (a resume may start mid-epoch), each followed by the
 * on_batch_end callbacks and the after_step hook; *waited: the loader's wait. */
static kc_status run_steps(fit_run *r, epoch_run *e, double *waited) {
    kc_model *m = r->m;
    int64_t skip = KC_MIN(r->per_epoch, e->step * r->bs);
    kc_loader *ld = NULL;
    kc_status s = kc__loader_create(r->trp, r->ord + skip, r->per_epoch - skip, r->bs,
                                      r->o.prefetch == KC_PREFETCH_NONE ? 0 : r->o.prefetch, &ld);
    if (s == KC_STATUS_OK && m->trace) kc__loader_set_trace(ld, m->trace);
    const kc_batch *b = NULL;
    int slot = -1, rows = 0;
    if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
    if (s == KC_STATUS_OK && b) s = kc__feed_put(&r->feed, b->x, b->y, b->t, b->t_size, rows = b->n, &slot);
    while (s == KC_STATUS_OK && !r->stop && b) {
        uint64_t step_seed = kc__hash64(r->seed + 0x51ed27u * (uint64_t)(m->opt.iterations + 1));
        if (kc__dist_on(r->coll) && r->coll->rank > 0) step_seed = kc__hash64(step_seed ^ (uint64_t)r->coll->rank);
        kc__dist_doing(r->coll, "training", e->epoch, e->step);
        int done = rows, next = -1;
        double t_step = kc__trace_step_begin(m), tt;
        s = train_step_recovering(m, &r->feed, slot, done, &r->mb, r->bs, r->recover, step_seed, r->coll);
        /* the next batch travels while this step computes; then the step's one wait */
        tt = kc__trace_t0(m);
        if (s == KC_STATUS_OK) s = kc__loader_next(ld, &b);
        kc__trace_span(m, "wait for data", "data", tt);
        tt = kc__trace_t0(m);
        if (s == KC_STATUS_OK && b) s = kc__feed_put(&r->feed, b->x, b->y, b->t, b->t_size, rows = b->n, &next);
        kc__trace_span(m, "upload next batch", "copy", tt);
        tt = kc__trace_t0(m);
        if (s == KC_STATUS_OK) s = read_step(m, done, r->mb, e->sums, r->coll);
        kc__trace_span(m, "wait for device", "sync", tt);
        if (s != KC_STATUS_OK) break;
        slot = next;
        e->seen += (int64_t)done * kc__dist_size(r->coll); /* over the ranks */
        kc_batch_logs bl = {.epoch = e->epoch, .step = e->step, .steps = r->steps, .loss = e->sums[0] / (double)e->seen,
                            .seconds = kc__now() - e->t0, .samples = e->seen};
        for (int i = 0; i < m->n_metrics; i++) bl.metrics[i] = e->sums[1 + i] / (double)e->seen;
        kc__fit_env_step(&r->fe, m, r->mb, &bl);
        e->step++;
        tt = kc__trace_t0(m);
        dispatch(r, CB_BATCH_END, e->epoch, &bl, NULL);
        if ((s = kc__dist_any(r->coll, &r->stop)) != KC_STATUS_OK) break; /* a stop on one rank stops all */
        kc__trace_span(m, "callbacks", "callbacks", tt);
        kc__trace_step_end(m, t_step);
        if (r->hrun && r->hooks->after_step) {
            kc__fit_pos p = fit_pos(e->epoch, e->step, e->seen, e->sums, e->lr, r->mb, &e->rng_start);
            s = r->hooks->after_step(r->hrun, m, &p, &bl, r->h->epochs, r->h->n);
        }
    }
    kc__trace_step_end(m, -1); /* a step cut short by an error leaves no span */
    *waited = ld ? kc__loader_wait_seconds(ld) : 0;
    kc__loader_destroy(ld);
    return s;
}

/* The epoch's logs (validation included), its history entry, the on_epoch_end callbacks
 * and the after_epoch hook. */
static kc_status end_epoch(fit_run *r, const epoch_run *e, double waited) {
    kc_model *m = r->m;
    int64_t seen = e->seen;
    kc_epoch_logs el = {.epoch = e->epoch, .steps = e->step, .lr = e->lr, .batch_size = r->bs * kc__dist_size(r->coll),
                        .micro_batch = r->mb,
                        .grad_accum = (r->bs + r->mb - 1) / r->mb};
    el.loss = seen ? e->sums[0] / (double)seen : NAN;
    for (int i = 0; i < m->n_metrics; i++) el.metrics[i] = seen ? e->sums[1 + i] / (double)seen : NAN;
    el.seconds = kc__now() - e->t0;
    el.images_per_second = el.seconds > 0 ? (double)seen / el.seconds : 0;
    kc__fit_env_epoch_end(&r->fe, m, waited, &el);
    kc__dist_doing(r->coll, "ending the epoch (validation, callbacks)", e->epoch, e->step - 1);
    if (r->valp && seen > 0) {
        eval_acc va;
        KC_TRY(run_eval(m, r->valp, r->mb, &r->feed, &va)); /* the micro-batch: known to fit */
        el.has_val = 1;
        el.val_loss = va.samples ? va.loss_sum / (double)va.samples : NAN;
        for (int i = 0; i < m->n_metrics; i++)
            el.val_metrics[i] = va.samples ? va.correct[i] / (double)va.samples : NAN;
    }
    KC_TRY(history_append(r->h, &el));
    dispatch(r, CB_EPOCH_END, e->epoch, NULL, &el);
    KC_TRY(kc__dist_any(r->coll, &r->stop));
    if (!r->hrun || !r->hooks->after_epoch) return KC_STATUS_OK;
    /* a complete epoch: the next one starts; else where it was cut short */
    bool complete = e->step >= r->steps;
    double zero[1 + KC_MAX_METRICS] = {0};
    kc__fit_pos p = complete ? fit_pos(e->epoch + 1, 0, 0, zero, 0, r->mb, &r->rng)
                             : fit_pos(e->epoch, e->step, e->seen, e->sums, e->lr, r->mb, &e->rng_start);
    return r->hooks->after_epoch(r->hrun, m, &p, complete, r->stop, &el, r->h->epochs,
                                 complete ? r->h->n : r->h->n - 1);
}

static kc_status run_epoch(fit_run *r, int epoch) {
    kc_model *m = r->m;
    dispatch(r, CB_EPOCH_BEGIN, epoch, NULL, NULL);
    if (r->stop) return KC_STATUS_OK;
    epoch_run e = {.epoch = epoch, .rng_start = r->rng}; /* for checkpoints: this epoch's order replays from it */
    if (kc__bool3(r->o.shuffle, true)) kc__shuffle_i64(&r->rng, r->order, r->n_data);
    if (r->ord != r->order) kc__dist_slice(r->coll, r->order, r->n_data, r->n, r->ord); /* this rank's share */
    e.t0 = kc__now();
    kc__fit_env_epoch_begin(&r->fe);
    e.lr = kc__optimizer_lr(&m->opt, m->opt.iterations);
    if (r->rp && epoch == r->rp->epoch) { /* resumed mid-epoch: the rest of this epoch's order */
        e.step = r->rp->step;
        e.seen = r->rp->seen;
        memcpy(e.sums, r->rp->sums, sizeof e.sums);
        if (e.step > 0) e.lr = r->rp->epoch_lr;
    }
    double waited = 0;
    KC_TRY(run_steps(r, &e, &waited));
    return end_epoch(r, &e, waited);
}

kc_status kc__fit_run(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                      kc_history **out) {
    if (m && m->n_replicas > 1) return kc__fit_replicas(m, train, opts, hooks, out); /* several devices */
    return kc__fit_one(m, train, opts, hooks, out);
}

kc_status kc__fit_one(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                      kc_history **out) {
    KC_TRY(check_ready(m, "fit"));
    if (!train) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: training dataset is NULL");
    fit_run r = {.m = m, .hooks = hooks};
    KC_TRY(fit_options(&r, opts));
    if (out) *out = NULL;
    KC_TRY(check_data(m, train, "training data"));
    kc_status s = split_validation(&r, train);
    if (s != KC_STATUS_OK) {
        kc_dataset_destroy(r.tr);
        return s;
    }
    if (r.valp) s = check_data(m, r.valp, "validation data");
    if (s == KC_STATUS_OK) s = dist_start(&r);
    kc__fit_env_begin(&r.fe, m);
    if (s == KC_STATUS_OK && r.o.batch_size == KC_BATCH_SIZE_AUTO) s = choose_batch_size(&r);
    if (s == KC_STATUS_OK) s = fit_start(&r);
    if (s == KC_STATUS_OK) {
        dispatch(&r, CB_TRAIN_BEGIN, 0, NULL, NULL);
        if (r.hrun && hooks->train_begun) hooks->train_begun(r.hrun, m); /* resumed: the callbacks' own states */
        for (int epoch = r.rp ? r.rp->epoch : 0; epoch < r.o.epochs && !r.stop && s == KC_STATUS_OK; epoch++)
            s = run_epoch(&r, epoch);
        dispatch(&r, CB_TRAIN_END, 0, NULL, NULL);
    }
    kc__feed_close(&r.feed);
    kc__fit_env_end(&r.fe, m);
    if (r.hrun && hooks->end) hooks->end(r.hrun);
    if (r.ord != r.order) free(r.ord);
    free(r.order);
    kc_dataset_destroy(r.tr);
    kc_dataset_destroy(r.val);
    if (s == KC_STATUS_OK && out) *out = r.h;
    else kc_history_destroy(r.h);
    return s;
}
