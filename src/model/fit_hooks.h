/* fit_hooks.h — private: what kc__fit_run tells an observer that keeps the training
 * state (the checkpoints of src/io/checkpoint_fit.c), as a table of functions that the
 * caller passes in. src/model calls them and includes nothing above it; the public
 * kc_fit is the checkpoints' entry (src/io/checkpoint_fit.c), which passes their table.
 *
 * The order of events in one kc__fit_run:
 *   fit_opts (before the defaults) -> begin (data split, batch size chosen) ->
 *   the callbacks' on_train_begin -> train_begun ->
 *   per step: the callbacks' on_batch_end -> after_step;
 *   per epoch: the callbacks' on_epoch_end -> after_epoch ->
 *   the callbacks' on_train_end -> end.
 * begin's *run goes to every later hook; with run NULL none of them is called. end is
 * called whenever begin returned a run, whatever happened after it. */
#ifndef KC_FIT_HOOKS_H
#define KC_FIT_HOOKS_H

#include <stdbool.h>
#include <stdint.h>

#include "model.h"

/* The shape of one fit call, known once the data is split and the batch size chosen. */
typedef struct kc__fit_geom {
    int64_t num_examples;    /* training examples (after the validation split) */
    int batch_size;          /* examples per optimizer step */
    int micro_batch;         /* examples per forward/backward */
    int64_t steps;           /* steps per epoch */
    int epochs;              /* epochs asked for */
    uint64_t seed;           /* the shuffle and dropout seed of the run */
    bool shuffle;
    bool has_val;            /* validation data or split: val_* monitors exist */
    double validation_split;
} kc__fit_geom;

/* Where training stands: the next step to run is `step` of `epoch` (0-based). */
typedef struct kc__fit_pos {
    int epoch;
    int64_t step;            /* steps done in `epoch` */
    int64_t seen;            /* examples seen in `epoch` */
    double sums[1 + KC_MAX_METRICS]; /* loss sum and metric counts over `epoch` so far */
    double epoch_lr;         /* the learning rate logged for `epoch` (its value at the epoch start) */
    int micro_batch;         /* after any out-of-memory halving */
    kc_rng rng;              /* the shuffle generator at the start of `epoch`, before its shuffle */
} kc__fit_pos;

/* Where begin says training continues (a resume); all zero: from the start. */
typedef struct kc__fit_resume {
    const kc__fit_pos *pos;          /* NULL: epoch 0, step 0 */
    const kc_epoch_logs *history;    /* the epochs finished before pos (the history's start) */
    int n_history;
} kc__fit_resume;

typedef struct kc__fit_hooks {
    void *user;              /* given to fit_opts and begin */
    /* Before kc__fit_run fills in its defaults: may set the options o leaves unset. */
    kc_status (*fit_opts)(void *user, const kc_model *m, kc_fit_opts *o);
    /* After the data split and the batch size: rng and order as set up for epoch 0 (a
     * resume replays the finished epochs' shuffles on them). *run: the state for the
     * hooks below (NULL: no more calls); *resume: where to continue. */
    kc_status (*begin)(void *user, kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng,
                       int64_t *order, void **run, kc__fit_resume *resume);
    /* Right after the callbacks' on_train_begin. */
    void (*train_begun)(void *run, kc_model *m);
    /* After a step and its on_batch_end (pos: after it; bl: its running logs). hist: the
     * finished epochs, in order. An error ends the fit with it. */
    kc_status (*after_step)(void *run, kc_model *m, const kc__fit_pos *pos, const kc_batch_logs *bl,
                            const kc_epoch_logs *hist, int n_hist);
    /* After an epoch's on_epoch_end. complete: every step ran, pos is the start of the next
     * epoch; else pos is where the epoch was cut short. stopping: training ends there
     * (a callback, Ctrl-C, SIGTERM). el: its logs (the last of hist when complete). */
    kc_status (*after_epoch)(void *run, kc_model *m, const kc__fit_pos *pos, bool complete, bool stopping,
                             const kc_epoch_logs *el, const kc_epoch_logs *hist, int n_hist);
    void (*end)(void *run);
} kc__fit_hooks;

/* kc_fit, telling hooks (NULL: none) what happens. */
kc_status kc__fit_run(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                      kc_history **out);

#endif /* KC_FIT_HOOKS_H */
