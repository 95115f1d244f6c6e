/* model.h — the model graph and its training state, private to libkerac.
 *
 * A model is a list of layers in topological order (a Sequential model is a Functional
 * graph whose layers each take the previous one). Node id == layer index. */
#ifndef KC_MODEL_H
#define KC_MODEL_H

#include "../core/trace.h"
#include "../backend/backend.h"
#include "../layers/layer.h"
#include "../train/train.h"
#include "name_index.h"
#include "plan.h"

typedef struct kc_metric {
    char name[48];           /* Keras history key: "accuracy", "top_k_accuracy", ... */
    int k;                   /* top-k (1 for accuracy) */
    bool sparse;             /* targets are class indices */
} kc_metric;

/* The step's scalars on the device (kc_model.dev_scalars): what each float holds. */
typedef enum kc_scalar_slot {
    KC_SCALAR_LOSS = 0,                              /* loss sum of the last loss call */
    KC_SCALAR_METRICS = 1,                           /* + i: metric i's count (added up) */
    KC_SCALAR_STEP_LOSS = KC_SCALAR_METRICS + KC_MAX_METRICS, /* loss sum over a step's micro-batches */
    KC_SCALAR_NORM_SQ,                               /* global_clipnorm's sum of squares */
    KC_SCALAR_COUNT
} kc_scalar_slot;
_Static_assert(KC_SCALAR_STEP_LOSS >= KC_SCALAR_METRICS + KC_MAX_METRICS && KC_SCALAR_NORM_SQ < KC_SCALAR_COUNT,
               "the metric counts run into the step's loss: size the slots from KC_MAX_METRICS");

/* keras-save: a model that was nested in the model read from a Keras file (a Sequential or
 * Functional called as a layer), which kerac inlined; kept so that a save writes it nested
 * again (src/io/keras_nest.c). Its layers point to it with kc_layer.keras_nest. */
#define KC_NEST_MAX_IO 8 /* the most inputs or outputs of a nested model saved nested again */
typedef struct kc__nest {
    char name[KC_NAME_MAX];
    bool sequential;         /* Sequential, else Functional */
    int parent;              /* 1-based index of the nested model holding it, 0: the model */
    int training;            /* its call's training argument: -1 none, 0 False, 1 True */
    int calls;               /* its inbound nodes: how many times each call of its parent calls it */
    char input[KC_NAME_MAX]; /* the name of its InputLayer (the first, where it has several) */
    bool multi;              /* several inputs or outputs that cannot be written back: saved flat */
    /* its inputs and outputs, in Keras's order (keras_nest.c finds them at each call): input i
     * is InputLayer in_name[i], read by its layer in_user[i] (inner name) at that layer's input
     * in_slot[i]; output j is the output of its layer out_name[j] */
    int n_in, n_out;
    char in_name[KC_NEST_MAX_IO][KC_NAME_MAX], in_user[KC_NEST_MAX_IO][KC_NAME_MAX];
    int in_slot[KC_NEST_MAX_IO];
    char out_name[KC_NEST_MAX_IO][KC_NAME_MAX];
} kc__nest;

struct kc_model {
    char name[KC_NAME_MAX];
    bool sequential;
    kc_layer **layers;
    int n_layers, cap_layers;
    kc__name_index names;    /* the layers' names, hashed (name_index.c) */
    int output;              /* node id of the output, -1: the last layer */
    kc_status err;           /* first builder error (sticky) */
    char errmsg[KC_ERROR_MAX];
    uint64_t seed;
    kc_rng rng;              /* shuffling and per-step seeds */

    /* the device options (kc_model_set_device_opts, the loaders' opts), else (dev_set false)
     * the environment's, read when the model is built; kc_model_set_device overrides the
     * device name (device_req), kc_model_set_memory_limit the memory limit */
    kc__device_opts_copy dev;
    bool dev_set;
    char device_req[64];     /* kc_model_set_device ("": dev's or the environment's) */
    char device_reason[1024]; /* why it runs where it runs (kc_model_device_reason) */

    /* weights: built once */
    bool built;
    /* called once by the build after every layer knows its weight shapes and before any
     * parameter is allocated (a loader checks the file's shapes here); an error stops the
     * build (kc__model_hook_before_alloc) */
    kc_status (*before_alloc)(kc_model *m, void *user);
    void *before_alloc_user;
    kc_backend *be;
    float *params;           /* (n_params): trainable weights first, then non-trainable */
    float *grads;            /* (n_trainable) */
    float *slot0, *slot1;    /* optimizer state, (n_trainable) each when needed */
    float *accum;            /* (n_trainable) gradient sum over micro-batches (grad_accum > 1) */
    size_t memory_limit;     /* device bytes kerac may hold (0: none) */
    bool memory_limit_set;   /* set by kc_model_set_memory_limit: the device options' limit does not override it */
    int64_t n_params, n_trainable;
    int n_trainable_weights; /* weights (kernels, biases, ...) in the trainable range */
    bool frozen;             /* Keras's model.trainable = False (trainable.c): written in the config */
    float *dev_norms;        /* (n_trainable_weights) per-weight gradient norms for clipnorm, on first use */
    float *view_grads;       /* shared layers: the gradients of the later calls' views that train (shared.c) */

    /* compile */
    bool compiled;
    kc_loss_kind loss;
    bool from_logits;        /* model outputs logits (from_logits=True) */
    bool fused_loss;         /* softmax/sigmoid output folded into the loss */
    int n_metrics;
    kc_metric metrics[KC_MAX_METRICS];
    kc_optimizer_state opt;

    /* profiling (kc_model_set_profiling): per layer, seconds and calls */
    bool profiling;
    double *prof_fwd, *prof_bwd;   /* (n_layers) */
    int64_t *prof_fwd_n, *prof_bwd_n;
    double prof_loss, prof_opt;
    /* tracing (kc_model_trace_steps, observe.c): spans of the optimizer steps trace_first..
     * trace_last (1-based); `tracing` is true inside a traced step */
    kc__trace *trace;
    int64_t trace_first, trace_last, trace_step;
    bool tracing;
    bool check_numerics;     /* kc_model_set_check_numerics */
    /* device timing (devtime.c): on a backend with timing marks, the spans of the current
     * pass, read back from the device at its end */
    struct kc__devspan *dev_spans;
    int n_dev_spans, cap_dev_spans;
    bool dev_timing;         /* a reference mark is set, at host time dev_ref */
    double dev_ref;
    double *dev_seconds;     /* (cap_dev_spans * 2) scratch of the read */

    /* execution: the plan and its arena for the current (batch, mode) */
    kc_plan plan;
    void *arena;             /* device memory of plan.arena_bytes */
    size_t arena_cap;
    float *dev_scalars;      /* (KC_SCALAR_COUNT) the step's scalars on the device, by kc_scalar_slot */
    float *dist_host;        /* (n_trainable) data-parallel: the gradients in host memory for the all-reduce */
    struct kc__dist_ov *dist_ov; /* data-parallel: the gradient buckets (dist.c) */
    bool dist_active;        /* inside a step whose backward starts the buckets' all-reduce */
    int64_t dist_bucket_bytes; /* kc_fit_opts.bucket_bytes of the run */
    bool dist_device;        /* the gradients are summed by the backend's collective (NCCL) */
    int dist_device_ranks;   /* the ranks of the backend's communicator, once made (0: none) */
    const kc_collective *sync_bn; /* data-parallel with sync_batchnorm: BatchNormalization's statistics */
    kc__host_scratch host_scratch; /* the layers' host scratch (kc_fwd.scratch), freed with the model */
    /* issue 13, several devices in one process (replicas.c): replica i of the model trains on
     * replica_dev[i] (replica 0: this model); the other replicas, made by the first fit */
    char (*replica_dev)[24];
    int n_replicas;
    struct kc__replicas *replicas;
    const float *batch_targets; /* targets of the rows being computed, (batch, target width),
                                   device memory of the input feed (feed.h) */

    /* trained on a folder of images: how its images were read and its class names
     * (kc_model_set_image_opts; saved in .keras metadata by src/io/image_meta.c) */
    bool has_image_opts;
    kc_image_opts image_opts;  /* class_names points to image_classes */
    char **image_classes;      /* (image_opts.num_class_names) */

    /* the loss of the file's Keras compile_config ("" when none): kc_model_saved_loss */
    char saved_loss[48];
    int saved_from_logits;

    /* keras-save: the nested models of the Keras file it was read from (kc__nest), and the
     * Keras that wrote that file (2: tf-keras, 3: Keras 3, 0: not read from a Keras config):
     * a legacy .h5 save writes the nesting in that Keras's form */
    kc__nest *nests;
    int n_nests;
    int keras_from;
    /* keras-names: read from a Sequential config that nests models (inlined as a Functional
     * graph); saved as a Sequential again while its entries still form a chain (keras_nest.c) */
    bool keras_sequential;
};

/* Sticky builder error: record the first failure in the model. Returns s. */
kc_status kc__model_fail(kc_model *m, kc_status s);

/* Layer access for io/ and tools (read-only). */
static inline const kc_layer *kc__model_layer(const kc_model *m, int i) { return m->layers[i]; }
int kc__model_output(const kc_model *m);

/* Build: shapes, weights, initial values (idempotent). */
kc_status kc__model_build(kc_model *m);
/* Make the plan + arena ready for a batch size and mode (re-plans only when they change). */
kc_status kc__model_prepare(kc_model *m, int batch, bool training);
/* One forward pass over the prepared plan; x is the device input batch. */
kc_status kc__model_forward(kc_model *m, int batch, bool training, uint64_t step_seed);
/* Input of the next forward, (batch, input shape), device memory inside the arena. */
float *kc__model_input_buffer(kc_model *m);
/* Output buffer of the last forward, (batch, output shape), device memory. With a fused
 * loss it holds logits until kc__model_finish_outputs applies the activation. */
float *kc__model_output_buffer(kc_model *m);
kc_status kc__model_finish_outputs(kc_model *m, int batch);
/* Loss + backward (+ optimizer update when apply) for the batch already forwarded, with
 * targets in m->batch_targets. The gradient is of the loss summed over the batch divided
 * by grad_n. Writes the batch loss sum to dev_scalars[KC_SCALAR_LOSS] and adds metric
 * counts to dev_scalars[KC_SCALAR_METRICS + i]. */
kc_status kc__model_backward_update(kc_model *m, int batch, int grad_n, bool apply);
/* What the update needs beyond the plan (clipnorm's per-weight norms): allocated before a
 * step's first kernel, so that running out of memory there retries nothing half-done. */
kc_status kc__model_prepare_update(kc_model *m);
/* One optimizer update of the parameters with these gradients ((n_trainable), device). */
kc_status kc__model_apply_gradients(kc_model *m, const float *grads);
/* tile.c: the examples an inference pass over a batch of `batch` runs at a time,
 * each tile through every layer while its activations stay in the caches; batch: no tiles. */
int kc__model_infer_tile(const kc_model *m, int batch);
/* Loss and metric counts only (evaluate). */
kc_status kc__model_accumulate_metrics(kc_model *m, int batch);

/* ---- trainable.c: which weights train (transfer learning) */
/* The parameter slab (trainable weights first, kc__weight_trains), the gradient slab, and
 * each weight's data/grad pointers; values are not set. Called by the build. */
kc_status kc__model_alloc_weights(kc_model *m);

/* ---- shared.c: shared layers (a layer called at several nodes) */
/* After a later call's build: its weights must be its first call's (shapes), and become
 * views of them (n_views; n_weights 0). */
kc_status kc__model_shared_build(kc_model *m, kc_layer *l);
/* Point every later call's views at its first call's weights, with gradient buffers of
 * their own (view_grads); called whenever the parameter slab is laid out. */
kc_status kc__model_shared_link(kc_model *m);
/* After node j's place in the backward pass (ran: its backward was called): when j is a
 * shared layer's first call, its weight gradients become the sum over all its calls. */
kc_status kc__model_shared_fold(kc_model *m, int j, bool ran);
/* Which call of its layer node is: 0 for a layer's first (or only) call, k for its k-th later
 * call (Keras's node_index in keras_history). */
int kc__model_call_index(const kc_model *m, int node);

/* ---- memory.c */
/* Device bytes kerac may still use (the limit, else the free memory less a margin), and
 * the reason in words for messages. */
kc_status kc__memory_budget(kc_model *m, size_t *budget, char *why, size_t why_n);
/* The largest multiple of 8 (at most cap) whose planned training footprint fits; reason:
 * a line for the log. */
kc_status kc__auto_batch_size(kc_model *m, int cap, int grad_accum, int *out, char *reason, size_t reason_n);

/* ---- targets.c: labels as the loss's targets */
/* Positions per example: the output's size over its last axis (1 for a Dense head, H * W
 * per pixel). The loss and metrics run on batch * positions rows of the last axis. */
int kc__model_positions(const kc_model *m);
/* Target floats per example for the compiled loss: positions for sparse labels, else the
 * output size. */
int kc__model_target_width(const kc_model *m);
/* Convert class labels (host) to the loss's target layout (host, (n, width)). */
void kc__labels_to_targets(const kc_model *m, const int32_t *labels, int n, float *targets);
/* Whether d's labels (class indices or label tensors) fit the output and the compiled loss:
 * SHAPE naming both shapes and what to do when not. `what`: "training data", ... */
kc_status kc__check_labels(kc_model *m, const kc_dataset *d, const char *what);

/* ---- observe.c: traces and numerics checks */
/* At a training step's start: opens the trace when this step is traced; returns its start. */
double kc__trace_step_begin(kc_model *m);
/* At its end: the step's span (when traced), and the trace closes. */
void kc__trace_step_end(kc_model *m, double t0);
/* A span [t0, now] of the traced step on the calling thread; nothing when not tracing. */
static inline void kc__trace_span(kc_model *m, const char *name, const char *cat, double t0) {
    if (m->tracing) kc__trace_add(m->trace, name, cat, t0, kc__now(), m->trace_step);
}
static inline double kc__trace_t0(const kc_model *m) { return m->tracing ? kc__now() : 0; }
/* check_numerics: KC_STATUS_NUMERIC naming layer, step and tensor when the layer's forward
 * output (or, for backward, its input gradients and weight gradients) holds NaN or Inf. */
kc_status kc__numerics_forward(kc_model *m, int layer, int batch, bool training, const float *y);
kc_status kc__numerics_backward(kc_model *m, int layer, int batch, const kc_bwd *a);
void kc__observe_free(kc_model *m);
/* ---- devtime.c: layer times from the device's clock where the backend has timing marks
 * (be->timing_mark; the CUDA backend's events), one trace track per device stream. */
/* A mark on the stream after the work enqueued so far (the first one of a pass sets the
 * reference): its id, or -1 when the backend has no marks (then time on the host). */
int kc__devtime_mark(kc_model *m, int stream);
/* A span from mark a to a new mark on the stream: its seconds go to *acc (may be NULL) and,
 * inside a traced step, to the stream's trace track, when the pass is read (flush). */
void kc__devtime_span(kc_model *m, int a, int stream, double *acc, const char *name, const char *cat);
/* Wait for the marks and hand the spans out; nothing to do without marks. */
kc_status kc__devtime_flush(kc_model *m);
void kc__devtime_free(kc_model *m);

/* The value of a history key ("loss", "val_loss", "accuracy", "val_<metric>") in an
 * epoch's logs; false when the epoch has none (callbacks.c). */
bool kc__epoch_logs_value(const kc_model *m, const kc_epoch_logs *e, const char *name, double *out);

#endif /* KC_MODEL_H */
