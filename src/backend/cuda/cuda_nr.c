/* cuda_nr.c — the normalisation and resampling entries of the CUDA backend's table
 * (Rescaling, Normalization, LayerNormalization, GroupNormalization,
 * UpSampling2D, Permute), through the module's own kernels (kernels_nr.cu): arguments
 * checked as the CPU backend checks them, then the launches. */
#include "cuda_internal.h"

static kc_status nr_args(kc_backend *be, const char *what, bool ok, const void *a, const void *b) {
    if (!ok) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: bad sizes (every size must be positive)", what);
    if (!a || !b) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: NULL tensor pointer", what);
    return kc__cu_enter(be);
}

kc_status kc__cu_channel_affine(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *scale,
                                const float *shift) {
    KC_TRY(nr_args(be, "channel_affine", rows > 0 && c > 0, x, y));
    return kc__cu_launched(be, "channel affine", kc__k_channel_affine(&kc__cu(be)->L, x, y, rows, c, scale, shift));
}

kc_status kc__cu_normalize(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *mean,
                           const float *var, int invert) {
    KC_TRY(nr_args(be, "normalize", rows > 0 && c > 0 && var, x, y));
    return kc__cu_launched(be, "normalize", kc__k_normalize(&kc__cu(be)->L, x, y, rows, c, mean, var, invert));
}

kc_status kc__cu_groupnorm_forward(kc_backend *be, const float *x, float *y, int n, int64_t s, int c, int groups,
                                   const float *gamma, const float *beta, float epsilon, float *save_mean,
                                   float *save_inv_std) {
    KC_TRY(nr_args(be, "groupnorm_forward", n > 0 && s > 0 && c > 0 && groups > 0 && c % groups == 0, x, y));
    return kc__cu_launched(be, "group norm forward",
                           kc__k_groupnorm_forward(&kc__cu(be)->L, x, y, n, s, c, groups, gamma, beta, epsilon,
                                                   save_mean, save_inv_std));
}

kc_status kc__cu_groupnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int n, int64_t s,
                                    int c, int groups, const float *gamma, const float *save_mean,
                                    const float *save_inv_std, float *dgamma, float *dbeta) {
    KC_TRY(nr_args(be, "groupnorm_backward",
                   n > 0 && s > 0 && c > 0 && groups > 0 && c % groups == 0 && save_mean && save_inv_std, x, dy));
    return kc__cu_launched(be, "group norm backward",
                           kc__k_groupnorm_backward(&kc__cu(be)->L, x, dy, dx, n, s, c, groups, gamma, save_mean,
                                                    save_inv_std, dgamma, dbeta));
}

static bool rs_ok(const kc_resample2d_desc *d) {
    return d && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0 && d->sh > 0 && d->sw > 0;
}

kc_status kc__cu_upsample2d_forward(kc_backend *be, const kc_resample2d_desc *d, const float *x, float *y) {
    KC_TRY(nr_args(be, "upsample2d_forward", rs_ok(d), x, y));
    return kc__cu_launched(be, "upsample forward", kc__k_upsample2d_forward(&kc__cu(be)->L, d, x, y));
}

kc_status kc__cu_upsample2d_backward(kc_backend *be, const kc_resample2d_desc *d, const float *dy, float *dx) {
    KC_TRY(nr_args(be, "upsample2d_backward", rs_ok(d), dy, dx));
    return kc__cu_launched(be, "upsample backward", kc__k_upsample2d_backward(&kc__cu(be)->L, d, dy, dx));
}

kc_status kc__cu_permute(kc_backend *be, const float *x, float *y, int n, int rank, const int *dims, const int *perm) {
    bool ok = n > 0 && rank >= 1 && rank <= KC_MAX_RANK && dims && perm;
    for (int j = 0; ok && j < rank; j++) ok = perm[j] >= 0 && perm[j] < rank && dims[j] > 0;
    KC_TRY(nr_args(be, "permute", ok, x, y));
    return kc__cu_launched(be, "permute", kc__k_permute(&kc__cu(be)->L, x, y, n, rank, dims, perm));
}
