/* checkpoint_fit.c — kc_fit with checkpoints: the fit hooks (../model/fit_hooks.h) that
 * write a checkpoint when one is due (kc_fit_opts.checkpoint_dir, every N steps or at
 * epoch ends, optionally only when the monitored value improves) and continue a run from
 * one (kc_fit_opts.resume_from: the model's state, the finished epochs' shuffles, the
 * position, the history and the callbacks' states). src/model calls these through the
 * table; nothing in src/model includes src/io. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "dir_lock.h"
#include "h5util.h"

/* Keras's mode "auto": max for accuracies ("acc" in the name), min otherwise. */
static bool monitor_is_max(const char *monitor) { return strstr(monitor, "acc") != NULL; }

static kc_status mismatch(const char *path, const char *what, double ckpt, double asked, const char *hint) {
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "resuming from '%s': it was trained with %s %g but fit asks for %g; %s", path, what, ckpt, asked,
                    hint);
}

/* fit_opts hook: with o->resume_from, the batch size, seed, shuffle, validation split,
 * steps per epoch and epochs the checkpoint was trained with go into the fields o leaves
 * unset (0 / KC_DEFAULT); a field set to another value is an error naming the checkpoint. */
static kc_status fit_opts(void *user, const kc_model *m, kc_fit_opts *o) {
    (void)user;
    (void)m;
    if (!o->resume_from) return KC_STATUS_OK;
    char *file = NULL;
    KC_TRY(kc__ckpt_resolve(o->resume_from, &file));
    kc__ckpt_state st;
    kc_status s = kc__ckpt_state_read(file, &st);
    free(file);
    if (s != KC_STATUS_OK) return s;
    const char *p = st.path;
    const char *leave = "leave it unset to take the checkpoint's, or start a new run";
    if (o->batch_size == 0 || o->batch_size == KC_BATCH_SIZE_AUTO) o->batch_size = st.batch_size;
    else if (o->batch_size != st.batch_size) s = mismatch(p, "batch_size", st.batch_size, o->batch_size, leave);
    if (s == KC_STATUS_OK) {
        if (o->seed == 0) o->seed = st.seed;
        else if (o->seed != st.seed)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained with seed %llu but fit asks "
                         "for seed %llu; %s", p, (unsigned long long)st.seed, (unsigned long long)o->seed, leave);
    }
    if (s == KC_STATUS_OK) {
        if (o->shuffle == KC_DEFAULT) o->shuffle = st.shuffle ? KC_TRUE : KC_FALSE;
        else if ((o->shuffle > 0) != st.shuffle)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained with shuffle %s but fit asks "
                         "for shuffle %s; %s", p, st.shuffle ? "on" : "off", st.shuffle ? "off" : "on", leave);
    }
    if (s == KC_STATUS_OK && !o->validation_data) {
        if (o->validation_split == 0) o->validation_split = st.validation_split;
        else if (o->validation_split != st.validation_split)
            s = mismatch(p, "validation_split", st.validation_split, o->validation_split, leave);
    }
    if (s == KC_STATUS_OK) {
        if (o->steps_per_epoch == 0) o->steps_per_epoch = st.steps;
        else if (o->steps_per_epoch != st.steps)
            s = mismatch(p, "steps_per_epoch", (double)st.steps, (double)o->steps_per_epoch, leave);
    }
    if (s == KC_STATUS_OK && o->epochs == 0) o->epochs = st.epochs;
    kc__ckpt_state_free(&st);
    return s;
}

static bool known_monitor(const kc_model *m, const char *name, bool val_ok) {
    if (strncmp(name, "val_", 4) == 0) {
        if (!val_ok) return false;
        name += 4;
    }
    if (strcmp(name, "loss") == 0) return true;
    for (int i = 0; i < m->n_metrics; i++)
        if (strcmp(name, m->metrics[i].name) == 0) return true;
    return false;
}

static kc_status check_options(kc__ckpt *c, const kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g) {
    if (o->checkpoint_every_steps < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: checkpoint_every_steps = %lld must be >= 0 (0: every epoch)",
                        (long long)o->checkpoint_every_steps);
    if (o->keep < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: keep = %d must be >= 1 (0: the default 1)", o->keep);
    c->every = o->checkpoint_every_steps;
    c->keep = o->keep ? o->keep : 1;
    c->best_only = o->save_best_only > 0;
    const char *mon = o->monitor && *o->monitor ? o->monitor : "val_loss";
    if (strlen(mon) >= sizeof c->monitor)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: monitor '%.40s...' is too long", mon);
    snprintf(c->monitor, sizeof c->monitor, "%s", mon);
    c->max_mode = monitor_is_max(mon);
    c->best = c->max_mode ? -INFINITY : INFINITY;
    if (c->best_only && !o->checkpoint_dir)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: save_best_only needs a checkpoint_dir");
    if (!c->best_only) return KC_STATUS_OK;
    if (c->every > 0 && strncmp(mon, "val_", 4) == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "fit: monitor '%s' is only known at the end of an epoch, but checkpoints are written every "
                        "%lld steps; monitor 'loss' or a metric, or checkpoint every epoch "
                        "(checkpoint_every_steps = 0)",
                        mon, (long long)c->every);
    if (!known_monitor(m, mon, g->has_val)) {
        char names[400] = "loss";
        size_t used = strlen(names);
        for (int i = 0; i < m->n_metrics && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, ", %s", m->metrics[i].name);
        if (g->has_val && c->every == 0 && used < sizeof names)
            snprintf(names + used, sizeof names - used, " and val_ of each");
        bool val_missing = strncmp(mon, "val_", 4) == 0 && !g->has_val;
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: monitor '%s' is not among the logs of model '%s' (%s)%s", mon,
                        m->name, names, val_missing ? "; val_ logs need validation data or a split" : "");
    }
    return KC_STATUS_OK;
}

/* The checkpoint at o->resume_from into c and m: check that it fits this fit call,
 * restore the model (weights, optimizer state, seeds), replay the shuffles of the
 * finished epochs on (rng, order) — both as kc_fit set them up for epoch 0 — and keep the
 * position, the history and the callbacks' states. */
static kc_status resume(kc__ckpt *c, kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng,
                        int64_t *order) {
    char *file = NULL;
    kc__ckpt_state st = {0};
    kc_status s = kc__ckpt_resolve(o->resume_from, &file);
    if (s == KC_STATUS_OK) s = kc__ckpt_state_read(file, &st);
    free(file);
    const char *p = st.path;
    if (s == KC_STATUS_OK && st.num_examples != g->num_examples)
        s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained on %lld examples but the "
                     "training data has %lld; resume with the same data and validation split", p,
                     (long long)st.num_examples, (long long)g->num_examples);
    if (s == KC_STATUS_OK && (st.batch_size != g->batch_size || st.steps != g->steps || st.seed != g->seed ||
                              st.shuffle != g->shuffle))
        s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': batch size %d, %lld steps per epoch, seed "
                     "%llu and shuffle %s there; fit has %d, %lld, %llu and %s", p, st.batch_size,
                     (long long)st.steps, (unsigned long long)st.seed, st.shuffle ? "on" : "off", g->batch_size,
                     (long long)g->steps, (unsigned long long)g->seed, g->shuffle ? "on" : "off");
    if (s == KC_STATUS_OK) {
        kc__h5_silence q;
        kc__h5_silence_begin(&q);
        s = kc__ckpt_restore_model(&st, m);
        kc__h5_silence_end(&q);
    }
    /* the data order of the finished epochs, replayed from the seed (as fit shuffles) */
    if (s == KC_STATUS_OK) {
        for (int e = 0; e < st.pos.epoch && g->shuffle; e++) kc__shuffle_i64(rng, order, g->num_examples);
        if (memcmp(rng->s, st.pos.rng.s, sizeof rng->s) != 0)
            s = kc__fail(KC_STATUS_BAD_FILE, "'%s': the shuffle order of epoch %d cannot be rebuilt from seed %llu "
                         "(the random generator's state differs); the checkpoint is damaged or from another kerac",
                         p, st.pos.epoch + 1, (unsigned long long)g->seed);
    }
    if (s == KC_STATUS_OK) {
        c->resumed = true;
        c->pos = st.pos;
        c->hist = st.hist;
        c->n_hist = st.n_hist;
        st.hist = NULL;
        c->saved_cbs = st.cbs;
        c->n_saved_cbs = st.n_cbs;
        st.cbs = NULL;
        if (c->best_only && st.best_only && st.has_best && strcmp(st.monitor, c->monitor) == 0) {
            c->best = st.best;
            c->has_best = true;
        }
    }
    if (st.path) kc__ckpt_state_free(&st);
    return s;
}

static void end(void *run);

/* begin hook: when o asks for checkpoints or a resume (else no run): check the options,
 * make the folder, and on resume restore everything (resume above). */
static kc_status begin(void *user, kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng,
                       int64_t *order, void **run, kc__fit_resume *res) {
    (void)user;
    *run = NULL;
    if (!o->checkpoint_dir && !o->resume_from) return KC_STATUS_OK;
    kc__ckpt *c = kc__calloc(1, sizeof *c, "checkpoint state");
    if (!c) return KC_STATUS_OUT_OF_MEMORY;
    c->lock_fd = -1;
    c->saved_at = -1;
    c->geom = *g;
    c->cbs = o->callbacks;
    c->n_cbs = o->num_callbacks;
    kc_status s = check_options(c, m, o, g);
    if (s == KC_STATUS_OK && o->checkpoint_dir) {
        c->dir = kc__strdup(o->checkpoint_dir);
        s = c->dir ? kc__ckpt_probe_dir(c->dir) : KC_STATUS_OUT_OF_MEMORY;
        if (s == KC_STATUS_OK) s = kc__dir_lock(c->dir, &c->lock_fd);
    }
    if (s == KC_STATUS_OK && o->resume_from) s = resume(c, m, o, g, rng, order);
    if (s != KC_STATUS_OK) {
        end(c);
        return s;
    }
    if (c->resumed) *res = (kc__fit_resume){.pos = &c->pos, .history = c->hist, .n_history = c->n_hist};
    *run = c;
    return KC_STATUS_OK;
}

/* A checkpoint not written for want of room (write_error.c said what and where): say what
 * is left to resume from (the newest in dir other than the one that failed). */
static void storage_failed(const char *dir, const char *failed) {
    char msg[700], prev[4096] = "";
    snprintf(msg, sizeof msg, "%s", kc_last_error());
    char *rest = strstr(msg, "; ");
    if (rest) *rest = '\0';
    bool have = kc_checkpoint_latest(dir, prev, sizeof prev) == KC_STATUS_OK && strcmp(prev, failed) != 0;
    if (have) kc__fail(KC_STATUS_STORAGE, "%s; the previous checkpoint '%s' is intact", msg, prev);
    else kc__fail(KC_STATUS_STORAGE, "%s; there is no earlier checkpoint", msg);
}

/* Write a checkpoint for position p, then delete the ones beyond keep. */
static kc_status save(kc__ckpt *c, kc_model *m, const kc__fit_pos *p, const kc_epoch_logs *hist, int n_hist) {
    char *path = NULL, *state = NULL, *cc = NULL;
    KC_TRY(kc__ckpt_next_path(c->dir, p->epoch, p->step, &path));
    kc_status s = kc__ckpt_state_json(c, m, p, hist, n_hist, &state);
    if (s == KC_STATUS_OK && !(cc = kc__ckpt_compile_config(m)))
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing checkpoint '%s'", path);
    if (s == KC_STATUS_OK) {
        const char *names[1] = {KC_CKPT_STATE_ENTRY}, *data[1] = {state};
        size_t lens[1] = {strlen(state)};
        kc__archive_extras x = {.compile_config = cc, .write_h5 = kc__ckpt_write_optimizer,
                                .h5_bytes = (size_t)KC_MAX(m->n_trainable, 1) * 2 * sizeof(float) + 65536,
                                .n_entries = 1, .names = names, .data = data, .lens = lens};
        kc__h5_silence q;
        kc__h5_silence_begin(&q);
        s = kc__keras_archive_save_ex(m, path, &x);
        kc__h5_silence_end(&q);
        if (s == KC_STATUS_STORAGE) storage_failed(c->dir, path);
        else if (s != KC_STATUS_OK) kc__wrap(s, "checkpoint: ");
    }
    if (s == KC_STATUS_OK) s = kc__ckpt_prune(c->dir, c->keep);
    if (s == KC_STATUS_OK) kc__log(KC_LOG_INFO, "checkpoint '%s' written", path);
    if (s == KC_STATUS_OK) c->saved_at = (int64_t)p->epoch * c->geom.steps + p->step;
    free(path);
    free(state);
    free(cc);
    return s;
}

/* train_begun hook: on resume, the callbacks' states from the checkpoint (by position and
 * name; a warning when the lists differ). */
static void train_begun(void *run, kc_model *m) {
    kc__ckpt *c = run;
    if (!c->resumed) return;
    char lost[160] = ""; /* saved states that find no callback to take them */
    for (int i = 0; i < c->n_saved_cbs; i++) {
        const kc__ckpt_callback *s = &c->saved_cbs[i];
        if (s->n < 0) continue; /* that callback kept no state */
        kc_callback *cb = i < c->n_cbs ? c->cbs[i] : NULL;
        if (cb && cb->set_state && strcmp(s->name, cb->name ? cb->name : "") == 0) {
            cb->set_state(m, cb->user, s->v, s->n);
            continue;
        }
        size_t n = strlen(lost);
        snprintf(lost + n, sizeof lost - n, "%s%s", n ? ", " : "", s->name[0] ? s->name : "(unnamed)");
    }
    if (lost[0])
        kc__log_always(KC_LOG_WARNING,
                       "resuming: the checkpoint holds the state of %s at the same place in the callback list, but "
                       "this run has no such callback there; it starts afresh (pass the same callbacks in the same "
                       "order to keep it)", lost);
}

static void end(void *run) {
    kc__ckpt *c = run;
    if (!c) return;
    kc__dir_unlock(c->lock_fd);
    free(c->dir);
    free(c->saved_cbs);
    free(c->hist);
    free(c);
}

static bool improved(kc__ckpt *c, double v) {
    if (isnan(v)) return false;
    return c->max_mode ? v > c->best : v < c->best;
}

static double monitor_value(const kc__ckpt *c, const kc_model *m, const kc_batch_logs *bl, const kc_epoch_logs *el) {
    const char *name = c->monitor;
    bool val = strncmp(name, "val_", 4) == 0;
    if (val) {
        if (!el || !el->has_val) return NAN;
        name += 4;
    }
    if (strcmp(name, "loss") == 0) return val ? el->val_loss : el ? el->loss : bl->loss;
    for (int i = 0; i < m->n_metrics; i++)
        if (strcmp(name, m->metrics[i].name) == 0)
            return val ? el->val_metrics[i] : el ? el->metrics[i] : bl->metrics[i];
    return NAN;
}

static kc_status after_step(void *run, kc_model *m, const kc__fit_pos *pos, const kc_batch_logs *bl,
                            const kc_epoch_logs *hist, int n_hist) {
    kc__ckpt *c = run;
    if (!c->dir || c->every <= 0) return KC_STATUS_OK;
    int64_t global = (int64_t)pos->epoch * c->geom.steps + pos->step;
    if (global % c->every != 0) return KC_STATUS_OK;
    if (c->best_only) {
        double v = monitor_value(c, m, bl, NULL);
        if (!improved(c, v)) return KC_STATUS_OK;
        c->best = v;
        c->has_best = true;
    }
    return save(c, m, pos, hist, n_hist);
}

static kc_status after_epoch(void *run, kc_model *m, const kc__fit_pos *pos, bool complete, bool stopping,
                             const kc_epoch_logs *el, const kc_epoch_logs *hist, int n_hist) {
    kc__ckpt *c = run;
    if (!c->dir) return KC_STATUS_OK;
    /* training stops (Ctrl-C, SIGTERM, a callback): a checkpoint where it stopped, in either
     * mode, unless that very step was just written */
    bool written = c->saved_at == (int64_t)pos->epoch * c->geom.steps + pos->step;
    if (!complete || (stopping && c->every > 0))
        return c->best_only || written ? KC_STATUS_OK : save(c, m, pos, hist, n_hist);
    if (c->every > 0) return KC_STATUS_OK;
    if (c->best_only) {
        double v = monitor_value(c, m, NULL, el);
        if (!improved(c, v)) return KC_STATUS_OK;
        c->best = v;
        c->has_best = true;
    }
    return save(c, m, pos, hist, n_hist);
}

static const kc__fit_hooks checkpoint_hooks = {.fit_opts = fit_opts, .begin = begin, .train_begun = train_begun,
                                               .after_step = after_step, .after_epoch = after_epoch, .end = end};

kc_status kc_fit(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, kc_history **out) {
    return kc__fit_run(m, train, opts, &checkpoint_hooks, out);
}
