/* loader.h — the background batch loader: one thread gathers examples in a given order,
 * scales them to floats and fills a ring of `prefetch` batches while the current batch
 * trains. Host memory only; the model copies each batch to its device. */
#ifndef KC_LOADER_H
#define KC_LOADER_H

#include "../core/core.h"

typedef struct kc_batch {
    const float *x;   /* (n, example shape) */
    const int32_t *y; /* (n) class labels (zeros when t is set) */
    const float *t;   /* (n, t_size) label tensors of a dataset that has them (kc_dataset_target_shape), else NULL */
    int64_t t_size;
    int n;            /* examples in this batch (the last one may be short) */
    int64_t index;    /* 0-based batch number */
} kc_batch;

typedef struct kc_loader kc_loader;

/* Gather d's examples order[0..count) into batches of batch_size (the last one short),
 * prefetch (>= 1) batches ahead on a thread of its own, or (prefetch 0) on the caller's
 * thread inside kc__loader_next. order is copied; NULL means 0..count-1. */
kc_status kc__loader_create(const kc_dataset *d, const int64_t *order, int64_t count, int batch_size,
                            int prefetch, kc_loader **out);
/* Wait for the next batch; *out is NULL after the last one. The batch stays valid until
 * the next call to kc__loader_next or kc__loader_destroy. An I/O error in the thread is
 * returned here. */
kc_status kc__loader_next(kc_loader *l, const kc_batch **out);
/* Seconds the consumer spent waiting in kc__loader_next, gathering included with prefetch 0
 * (input-bound diagnostics). */
double kc__loader_wait_seconds(const kc_loader *l);
/* Spans of the loader thread's work ("load batch") go to t while it is open (NULL: none). */
struct kc__trace;
void kc__loader_set_trace(kc_loader *l, struct kc__trace *t);
/* Stops the thread (also mid-epoch) and frees everything. NULL is fine. */
void kc__loader_destroy(kc_loader *l);

#endif /* KC_LOADER_H */
