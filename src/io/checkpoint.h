/* checkpoint.h — private to src/io: training checkpoints, in files by job, and the
 * .keras archive hooks they are built on (keras_archive.c, keras_h5.c).
 *
 * A checkpoint is a .keras archive (Keras 3 can load it) with
 *   config.json                 the model config plus a Keras "compile_config"
 *   model.weights.h5            the weights, and the optimizer's variables where Keras 3
 *                               keeps them: optimizer/vars/<i> (iteration, learning_rate
 *                               unless a schedule drives it, then the slots per trainable
 *                               variable in Keras's order)
 *   kerac_training_state.json   the rest of the training state (checkpoint_state.c)
 * in DIR/ckpt-<seq>-e<epoch>-s<step>.keras.
 *
 *   checkpoint_files.c   the files: naming, listing, the newest, the folder, pruning
 *   checkpoint_keras.c   what Keras reads: compile_config, optimizer/vars
 *   checkpoint_state.c   kerac_training_state.json: writer and reader
 *   checkpoint_model.c   a checkpoint's model: identity, restore, kc_checkpoint_load/_read_info
 *   checkpoint_fit.c     kc_fit: the fit hooks (src/model/fit_hooks.h) that write and resume */
#ifndef KC_CHECKPOINT_H
#define KC_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../model/fit_hooks.h"

#define KC_CKPT_STATE_ENTRY "kerac_training_state.json"

/* ---------------------------------------------------------------- checkpoint_files.c */

/* A checkpoint file, or a folder's newest (malloc'd). */
kc_status kc__ckpt_resolve(const char *path, char **file);
/* Make the folder (mkdir -p) and check that it takes files. */
kc_status kc__ckpt_probe_dir(const char *dir);
/* The path (malloc'd) of the next checkpoint in dir: seq = 1 + the highest there. Removes
 * stray temporaries of interrupted writes. */
kc_status kc__ckpt_next_path(const char *dir, int epoch, int64_t step, char **path);
/* After a checkpoint was written into dir: flush the folder, delete all but the keep
 * newest, flush again. */
kc_status kc__ckpt_prune(const char *dir, int keep);

/* ---------------------------------------------------------------- checkpoint_keras.c */

/* Keras's compile_config of m (Python json.dumps separators), malloc'd; NULL: out of memory. */
char *kc__ckpt_compile_config(const kc_model *m);
/* How many optimizer/vars m's optimizer has (Keras's count). */
kc_status kc__ckpt_optimizer_vars(kc_model *m, int *n);
/* kc__archive_extras.write_h5: optimizer/vars into an open model.weights.h5. */
kc_status kc__ckpt_write_optimizer(kc_model *m, int64_t file, void *user);
/* Read and check optimizer/vars of an open checkpoint into host copies of the two slot
 * slabs (n_trainable each, zero where no weight lies; malloc'd) and the iteration count. */
kc_status kc__ckpt_read_optimizer(kc_model *m, int64_t file, const char *path, float **slab0, float **slab1,
                                  int64_t *iters);

/* ---------------------------------------------------------------- the state of a fit */

/* One callback's state in a checkpoint (kc_callback.get_state / set_state). */
typedef struct kc__ckpt_callback {
    char name[64];
    double v[KC_CALLBACK_STATE_MAX];
    int n;                   /* -1: the callback keeps no state */
} kc__ckpt_callback;

/* The checkpointing of one fit call (checkpoint_fit.c; checkpoint_state.c writes it). */
typedef struct kc__ckpt {
    char *dir;               /* NULL: not writing checkpoints */
    int64_t every;           /* 0: epoch ends */
    int keep;
    bool best_only;
    char monitor[64];
    bool max_mode;
    double best;
    bool has_best;
    kc__fit_geom geom;
    kc_callback *const *cbs; /* the run's callbacks (their states are saved) */
    int n_cbs;
    /* resume */
    bool resumed;
    kc__fit_pos pos;
    kc_epoch_logs *hist;
    int n_hist;
    kc__ckpt_callback *saved_cbs; /* the checkpoint's callback states */
    int n_saved_cbs;
    int lock_fd;             /* the folder's lock (dir_lock.c), or -1 */
    int64_t saved_at;        /* the global step of the last checkpoint written, or -1 */
} kc__ckpt;

/* ---------------------------------------------------------------- checkpoint_state.c */

/* A parsed kerac_training_state.json. */
typedef struct kc__ckpt_state {
    char *path;
    json_t *root;
    json_t *layers;          /* borrowed from root */
    json_t *compile;         /* borrowed from root */
    char model_name[KC_NAME_MAX];
    uint64_t config_hash, model_seed;
    uint64_t *layer_seeds;
    int n_layer_seeds;
    kc_opt_kind opt_kind;
    double momentum;
    int64_t iterations;
    double lr_scale;
    int epochs, batch_size;
    int64_t num_examples, steps;
    uint64_t seed;
    bool shuffle;
    double validation_split;
    kc__fit_pos pos;
    bool best_only, has_best;
    int64_t every;
    int keep;
    char monitor[64];
    double best;
    kc_epoch_logs *hist;
    int n_hist;
    kc__ckpt_callback *cbs;  /* absent from checkpoints of kerac 0.1: none */
    int n_cbs;
} kc__ckpt_state;

/* kerac_training_state.json for position p of the run c (malloc'd text). */
kc_status kc__ckpt_state_json(const kc__ckpt *c, kc_model *m, const kc__fit_pos *p, const kc_epoch_logs *hist,
                              int n_hist, char **out);
/* Read the training state of the checkpoint file at path (kc__ckpt_state_free it). */
kc_status kc__ckpt_state_read(const char *path, kc__ckpt_state *st);
void kc__ckpt_state_free(kc__ckpt_state *st);
/* kc_compile with the checkpoint's compile options. */
kc_status kc__ckpt_compile_from(const kc__ckpt_state *st, kc_model *m);
/* A JSON number; NaN and infinities (which JSON lacks) are null. */
json_t *kc__ckpt_jnum(double v);

/* ---------------------------------------------------------------- checkpoint_model.c */

/* FNV-1a of the compact Keras 3 config: tells a checkpoint of another model. */
kc_status kc__ckpt_config_hash(kc_model *m, uint64_t *out);
/* [[name, class, [[dims], ...]], ...] for the messages about another model. */
json_t *kc__ckpt_layer_summary(const kc_model *m);
/* Weights, optimizer state and seeds of the checkpoint into m (compiled, same
 * architecture). Everything is read and checked before m changes. */
kc_status kc__ckpt_restore_model(const kc__ckpt_state *st, kc_model *m);

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
/* Entry `name` of the .keras archive at path (NUL-terminated, malloc'd); *present is
 * false (status OK) when there is no such entry. */
/* Read every entry of the .keras archive at path to its end: BAD_FILE naming the first
 * entry whose CRC does not match (or that cannot be read). */
kc_status kc__keras_archive_verify(const char *path);
kc_status kc__keras_archive_read_entry(const char *path, const char *name, char **data, size_t *len, bool *present);
/* model.weights.h5 of the archive as a read-only HDF5 file in memory (H5Fclose it). */
kc_status kc__keras_archive_open_weights(const char *path, int64_t *file);
/* Model layer indices in Keras's model.layers order (keras_h5.c): order has room for
 * n_layers; *n gets the count. Keras builds the optimizer's variables in this order. */
kc_status kc__keras_layer_order(const kc_model *m, int *order, int *n);

#endif /* KC_CHECKPOINT_H */
