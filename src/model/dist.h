/* dist.h — data-parallel training's hooks in fit (dist.c; kc_fit_opts.collective). */
#ifndef KC_MODEL_DIST_H
#define KC_MODEL_DIST_H

#include "model.h"

/* A collective with more than one rank. */
bool kc__dist_on(const kc_collective *c);
/* The number of ranks (1 without a collective). */
int kc__dist_size(const kc_collective *c);
/* Start-up: all ranks agree on kerac version, model hash and data size; rank 0's weights. */
kc_status kc__dist_begin(kc_model *m, const kc_collective *c, int64_t n_examples);
/* The rank's examples per epoch and batch for n examples and the global batch_size. */
kc_status kc__dist_geometry(const kc_collective *c, int64_t n, int batch_size, bool drop_remainder,
                            int64_t *n_local, int *bs_local);
/* The rank's n_local positions of the epoch's order (n): r, r + size, ... (wrapping). */
void kc__dist_slice(const kc_collective *c, const int64_t *order, int64_t n, int64_t n_local, int64_t *out);
/* grads (n_trainable, device) becomes the mean over the ranks (one fused all-reduce). */
kc_status kc__dist_average_grads(kc_model *m, const kc_collective *c, float *grads);
/* v (n) becomes the sum over the ranks; what names the step in an error. */
kc_status kc__dist_sum(const kc_collective *c, double *v, int n, const char *what);
/* flag becomes true when it is on any rank. */
kc_status kc__dist_any(const kc_collective *c, bool *flag);
/* The bucketed all-reduce overlapped with backward (kc_fit_opts.bucket_bytes) of the slab
 * grads (m->grads, or m->accum with the same layout): begin before the step's backward
 * pass (m->grads), or after the accumulation (m->accum: no overlap, the same buckets),
 * when the collective has iallreduce or the backend a device collective (else it stays
 * off); layer(m, j) from the backward pass when every layer from j up has run; finish
 * after it: the rest start, all are waited for and the mean is in grads, with *used true
 * (false: off, average with kc__dist_average_grads). */
kc_status kc__dist_overlap_begin(kc_model *m, const kc_collective *c, int64_t bucket_bytes, float *grads);
kc_status kc__dist_overlap_layer(kc_model *m, int j);
kc_status kc__dist_overlap_finish(kc_model *m, bool *used);
void kc__dist_ov_free(struct kc__dist_ov *o);
/* Tell the collective's watchdog what this rank does now (what, epoch + 1, step + 1). */
void kc__dist_doing(const kc_collective *c, const char *what, int epoch, int64_t step);

#endif
