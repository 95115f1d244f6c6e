/* feed.h — the input feed: host batches into the model on its device, one step ahead.
 *
 * A batch is copied (by the host) into one of KC_FEED_SLOTS page-locked host buffers, and
 * from there to the slot's device buffers on the backend's copy stream (kerac_backend.h,
 * "the input feed"), so that batch k + 1 travels while step k computes. The training loop:
 *
 *     put(batch 0) -> slot s
 *     loop:  acquire(s); select(s, rows) ...; the step's kernels ...; release(s)
 *            put(batch k + 1) -> slot s'       (its upload overlaps step k on the device)
 *            read the step's loss              (the step's one synchronisation)
 *
 * The device slots hold whole batches (also with gradient accumulation: micro-batches are
 * row ranges of the slot, copied into the plan's input buffer by select). Their bytes are
 * part of the memory plan's batch buffers (memory.c). */
#ifndef KC_FEED_H
#define KC_FEED_H

#include "model.h"

typedef struct kc__feed {
    kc_model *m;
    int cap;                               /* examples per slot */
    int64_t in_size;                       /* floats per example */
    int width;                             /* target floats per example; 0: no targets (predict) */
    float *host_x[KC_FEED_SLOTS], *host_t[KC_FEED_SLOTS]; /* page-locked host staging */
    float *dev_x[KC_FEED_SLOTS], *dev_t[KC_FEED_SLOTS];   /* device copies */
    int n[KC_FEED_SLOTS];                  /* examples in the slot's batch */
    int next;                              /* the slot the next put fills */
} kc__feed;

/* Slots for batches of up to cap examples, with targets (training, evaluation) or without
 * (predict). On failure nothing stays allocated. */
kc_status kc__feed_open(kc_model *m, int cap, bool targets, kc__feed *f);
/* Waits for the feed's copies, then frees it (a zeroed or closed feed is fine). */
void kc__feed_close(kc__feed *f);
/* Stage n examples (x: (n, input shape); y: class labels, or NULL without targets; t: label
 * tensors (n, t_size) instead of y when the dataset has them, checked by kc__check_labels)
 * in the next slot and start their upload; *slot names it. Returns once the host memory
 * the caller passed may be reused. */
kc_status kc__feed_put(kc__feed *f, const float *x, const int32_t *y, const float *t, int64_t t_size, int n, int *slot);
/* The device work enqueued from now on sees the slot's batch (no host wait). */
kc_status kc__feed_acquire(kc__feed *f, int slot);
/* Rows [off, off + n) of the slot's batch become the model's input (copied into the plan's
 * input buffer, which must be prepared for at least n) and its targets (m->batch_targets). */
kc_status kc__feed_select(kc__feed *f, int slot, int off, int n);
/* The work that reads the slot has all been enqueued: its next upload may follow it. */
kc_status kc__feed_release(kc__feed *f, int slot);

#endif /* KC_FEED_H */
