/* batchnorm_sync.h — BatchNormalization with the statistics of every rank together
 * (kc_fit_opts.sync_batchnorm; batchnorm.c calls these when a->sync is set). */
#ifndef KC_LAYERS_BATCHNORM_SYNC_H
#define KC_LAYERS_BATCHNORM_SYNC_H

#include "layer.h"

typedef struct kc__bn_sync_args {
    int64_t rows;            /* this rank's rows (N*H*W) */
    int c;                   /* channels */
    const float *gamma, *beta; /* (c) or NULL */
    float momentum, epsilon;
    float *moving_mean, *moving_var; /* forward: updated from the ranks' statistics */
    float *save_mean, *save_inv_std; /* forward writes, backward reads */
    float *dgamma, *dbeta;   /* backward: this rank's sums (NULL: not wanted) */
} kc__bn_sync_args;

kc_status kc__bn_sync_forward(const kc_fwd *a, const kc__bn_sync_args *b);
/* dx may be a->dy (no input gradient wanted). */
kc_status kc__bn_sync_backward(const kc_bwd *a, const kc__bn_sync_args *b, float *dx);

#endif
