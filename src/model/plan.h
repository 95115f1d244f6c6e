/* plan.h — the memory plan of one step: every activation, gradient, aux and workspace
 * buffer of the graph gets an offset inside one arena, computed from buffer lifetimes
 * before anything is allocated. The arena is allocated once per (batch, mode) and reused
 * by every step: no allocation on the forward or backward path. */
#ifndef KC_PLAN_H
#define KC_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kerac.h"

#define KC_PLAN_NONE ((size_t)-1)

typedef struct kc_plan {
    int batch;
    bool training;
    int n_nodes;
    size_t *y_off;    /* (n_nodes) output of node i */
    size_t *dy_off;   /* (n_nodes) gradient of node i's output (training; NONE otherwise) */
    size_t *aux_off;  /* (n_nodes) forward-to-backward buffer (NONE when 0 bytes) */
    size_t *ws_off;   /* (n_nodes) scratch during node i's forward/backward (NONE when 0) */
    size_t *dx_tmp_off; /* (n_nodes * KC_MAX_INPUTS) where node i's backward writes dx of
                           input k when it is not the first writer of that gradient (then
                           added into dy of the input); NONE: write dy directly */
    bool *dx_add;       /* (n_nodes * KC_MAX_INPUTS) node i's backward is not the first writer of
                           input k's gradient but adds into it itself (kc_layer_ops.dx_adds):
                           no dx_tmp buffer, no add pass */
    int *group;       /* (n_nodes) alias group: the node whose y/dy memory node i uses */
    bool *needs_grad; /* (n_nodes) training: node i or a node upstream of it has weights that
                         train, so its output needs a gradient and its backward runs; false
                         below the lowest trainable layer (frozen layers, the input) */
    size_t arena_bytes;
    /* breakdown, for summaries and the memory report */
    size_t activation_bytes; /* sum of all y buffers before reuse */
    size_t gradient_bytes;   /* sum of all dy buffers before reuse */
    size_t aux_bytes;        /* sum of aux buffers */
    size_t workspace_bytes;  /* largest scratch */
} kc_plan;

struct kc_model;
/* Plan one step of model m for a batch size and mode (training keeps activations for
 * backward and plans gradients). Layers must be built. */
kc_status kc__plan_build(struct kc_model *m, int batch, bool training, kc_plan *p);
void kc__plan_free(kc_plan *p);
/* mark each BatchNormalization + ReLU pair that runs as one pass, and the other fusions of
 * fuse.c (a training plan's batch norms folded into their Add among them; every plan build
 * does it first, from the graph, the backend and whether the plan is for training). */
void kc__model_fuse(struct kc_model *m, bool training);
/* the floats of node i's y (and dy) memory for a batch: its alias group's, which for a
 * folded ZeroPadding2D (fuse.c) is its unpadded input's, not its own output shape's. */
int64_t kc__plan_node_elems(const struct kc_model *m, int i, int batch);

#endif /* KC_PLAN_H */
