/* cuda_bcast.c — the broadcasting entries of the CUDA backend's table:
 * arguments checked as cpu_bcast.c checks them, then the kernels of kernels_bcast.cu. */
#include "cuda_internal.h"

static kc_status bc_args(kc_backend *be, const char *what, kc_binop op, const kc_bcast_desc *d) {
    if ((int)op < 0 || op >= KC_BIN_COUNT)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: unknown operation %d", what, (int)op);
    if (!d || d->rank < 1 || d->rank > KC_BCAST_MAX_RANK)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: rank %d is not in 1..%d", what, d ? d->rank : -1,
                           KC_BCAST_MAX_RANK);
    for (int i = 0; i < d->rank; i++)
        if (d->dims[i] < 0 || d->sa[i] < 0 || d->sb[i] < 0)
            return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: negative size or stride on axis %d", what, i);
    return kc__cu_enter(be);
}

kc_status kc__cu_binary_forward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a, const float *b,
                                float *y) {
    KC_TRY(bc_args(be, "binary_forward", op, d));
    if (!a || !b || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda binary_forward: NULL a, b or y");
    return kc__cu_launched(be, "binary forward", kc__k_binary_forward(&kc__cu(be)->L, (int)op, d, a, b, y));
}

kc_status kc__cu_binary_backward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a, const float *b,
                                 const float *dy, float *da, float *db) {
    KC_TRY(bc_args(be, "binary_backward", op, d));
    const int reads = op != KC_BIN_ADD && op != KC_BIN_SUB;
    if (!dy || (reads && (!a || !b)))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda binary_backward: NULL dy, or a or b for an operation that reads them");
    return kc__cu_launched(be, "binary backward",
                           kc__k_binary_backward(&kc__cu(be)->L, (int)op, d, reads ? a : NULL, reads ? b : NULL, dy,
                                                 da, db));
}

static kc_status scalar_args(kc_backend *be, const char *what, kc_binop op, int64_t n, const void *p, const void *q) {
    if ((int)op < 0 || op >= KC_BIN_COUNT || op == KC_BIN_PRELU || n < 0 || !p || !q)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: bad operation %d, size or buffer", what, (int)op);
    return kc__cu_enter(be);
}

kc_status kc__cu_scalar_forward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first, float *y,
                                int64_t n) {
    KC_TRY(scalar_args(be, "scalar_forward", op, n, x, y));
    return kc__cu_launched(be, "scalar forward", kc__k_scalar_forward(&kc__cu(be)->L, (int)op, x, s, scalar_first, y, n));
}

kc_status kc__cu_scalar_backward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first,
                                 const float *dy, float *dx, int64_t n) {
    KC_TRY(scalar_args(be, "scalar_backward", op, n, dy, dx));
    if (!x && op != KC_BIN_ADD && op != KC_BIN_SUB && op != KC_BIN_MUL && !(op == KC_BIN_DIV && !scalar_first))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda scalar_backward: this operation needs x");
    return kc__cu_launched(be, "scalar backward",
                           kc__k_scalar_backward(&kc__cu(be)->L, (int)op, x, s, scalar_first, dy, dx, n));
}
