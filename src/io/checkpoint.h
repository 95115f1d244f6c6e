/* checkpoint.h — private: training checkpoints (checkpoint.c) as kc_fit uses them, and
 * the .keras archive hooks they are built on (keras_archive.c, keras_h5.c).
 *
 * A checkpoint is a .keras archive (Keras 3 can load it) with
 *   config.json                 the model config plus a Keras "compile_config"
 *   model.weights.h5            the weights, and the optimizer's variables where Keras 3
 *                               keeps them: optimizer/vars/<i> (iteration, learning_rate
 *                               unless a schedule drives it, then the slots per trainable
 *                               variable in Keras's order)
 *   kerac_training_state.json   the rest of the training state (see checkpoint.c)
 * in DIR/ckpt-<seq>-e<epoch>-s<step>.keras. kc_fit calls the hooks below. */
#ifndef KC_CHECKPOINT_H
#define KC_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include "../model/model.h"

/* ---------------------------------------------------------------- kc_fit's side */

typedef struct kc__ckpt kc__ckpt;

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

/* Before kc_fit fills in its defaults: with o->resume_from, the batch size, seed,
 * shuffle, validation split, steps per epoch and epochs the checkpoint was trained with
 * go into the fields o leaves unset (0 / KC_DEFAULT); a field set to another value is an
 * error naming the checkpoint. No-op without resume_from. */
kc_status kc__ckpt_fit_opts(const kc_model *m, kc_fit_opts *o);

/* When o asks for checkpoints or a resume (else *out = NULL): check the options, make
 * the folder, and on resume restore the model (weights, optimizer state, seeds), replay
 * the shuffles of the finished epochs on (rng, order) — both as kc_fit set them up for
 * epoch 0 — and keep the position for kc__ckpt_resume_pos. */
kc_status kc__ckpt_open(kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng, int64_t *order,
                        kc__ckpt **out);
/* The position to continue from (NULL when not resuming), and the epochs finished
 * before it (their logs, for the history). */
const kc__fit_pos *kc__ckpt_resume_pos(const kc__ckpt *c);
/* On resume, right after the callbacks' on_train_begin: their states from the checkpoint
 * (by position and name; a warning when the lists differ). No-op otherwise. */
void kc__ckpt_restore_callbacks(kc__ckpt *c, kc_model *m);
int kc__ckpt_history(const kc__ckpt *c, const kc_epoch_logs **out);

/* After a step (pos: after it; bl: its running logs) and after an epoch's end callbacks
 * (complete: every step ran, pos is the start of the next epoch; else pos is where the
 * epoch was cut short; stopping: training ends there, before its last epoch: a checkpoint
 * is written in every mode). hist: the finished epochs, in order. Saves when due. */
kc_status kc__ckpt_after_step(kc__ckpt *c, kc_model *m, const kc__fit_pos *pos, const kc_batch_logs *bl,
                              const kc_epoch_logs *hist, int n_hist);
kc_status kc__ckpt_after_epoch(kc__ckpt *c, kc_model *m, const kc__fit_pos *pos, bool complete, bool stopping,
                               const kc_epoch_logs *el, const kc_epoch_logs *hist, int n_hist);
void kc__ckpt_close(kc__ckpt *c);

/* ---------------------------------------------------------------- archive hooks */

/* Extra content for a .keras archive (keras_archive.c). HDF5 ids are int64_t (hid_t). */
typedef struct kc__archive_extras {
    const char *compile_config;   /* JSON object text added to config.json as "compile_config" */
    /* more groups in model.weights.h5 after the weights (the optimizer's variables) */
    kc_status (*write_h5)(kc_model *m, int64_t file, void *user);
    void *user;
    size_t h5_bytes;              /* about how much write_h5 adds */
    int n_entries;                /* more zip entries */
    const char *const *names;
    const char *const *data;
    const size_t *lens;
} kc__archive_extras;

/* kc__keras_archive_save with extras (NULL: the same as it). Atomic like it. */
kc_status kc__keras_archive_save_ex(kc_model *m, const char *path, const kc__archive_extras *x);
/* Read every entry of the .keras archive at path to its end: BAD_FILE naming the first
 * entry whose CRC does not match (or that cannot be read). */
kc_status kc__keras_archive_verify(const char *path);
/* Entry `name` of the .keras archive at path (NUL-terminated, malloc'd); *present is
 * false (status OK) when there is no such entry. */
kc_status kc__keras_archive_read_entry(const char *path, const char *name, char **data, size_t *len, bool *present);
/* model.weights.h5 of the archive as a read-only HDF5 file in memory (H5Fclose it). */
kc_status kc__keras_archive_open_weights(const char *path, int64_t *file);
/* Model layer indices in Keras's model.layers order (keras_h5.c): order has room for
 * n_layers; *n gets the count. Keras builds the optimizer's variables in this order. */
kc_status kc__keras_layer_order(const kc_model *m, int *order, int *n);

#endif /* KC_CHECKPOINT_H */
