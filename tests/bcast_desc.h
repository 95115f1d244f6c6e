/* bcast_desc.h — for the tests of the broadcasting kernels (test_elementwise.c,
 * test_cuda_backend.c): the kc_bcast_desc of y = a op b over dims (rank r), a and b given
 * by their shapes (rank-aligned, 1 where broadcast), and the three sizes. */
#ifndef KC_TEST_BCAST_DESC_H
#define KC_TEST_BCAST_DESC_H

#include "kerac_backend.h"

static inline kc_bcast_desc bcast_desc(int r, const int64_t *dims, const int64_t *as, const int64_t *bs,
                                       int64_t *an, int64_t *bn, int64_t *yn) {
    kc_bcast_desc d = {.rank = r};
    *an = *bn = *yn = 1;
    for (int k = r - 1; k >= 0; k--) {
        d.dims[k] = dims[k];
        d.sa[k] = as[k] == 1 && dims[k] != 1 ? 0 : *an;
        d.sb[k] = bs[k] == 1 && dims[k] != 1 ? 0 : *bn;
        *an *= as[k], *bn *= bs[k], *yn *= dims[k];
    }
    return d;
}

#endif /* KC_TEST_BCAST_DESC_H */
