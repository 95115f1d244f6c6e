/* test_dist_gpu.c — the CUDA backend's device collective (kc_backend.coll_*, NCCL) with
 * one rank: the communicator made from its own id, an all-reduce of a gradient-sized
 * buffer ordered after the compute stream's work (a scale enqueued just before it) and
 * before the work after coll_join (another scale): the sum over one rank is the value
 * itself, so the result must be exactly x * 3 * 0.5; the description names NCCL.
 * Without a GPU: "SKIP: no GPU: ..." and exit 77; with a GPU but no libnccl.so.2, exit 77
 * too, saying so. The several-rank path runs in tests/cli/distributed_gpu.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cuda_test.h"

static kc_backend *G;

static void test_one_rank_allreduce(void **state) {
    (void)state;
    char id[128];
    OK(G->coll_unique_id(G, id, sizeof id));
    OK(G->coll_init(G, id, sizeof id, 1, 0));
    assert_non_null(strstr(G->coll_describe(G), "NCCL 2."));
    assert_non_null(strstr(G->coll_describe(G), "rank 0 of 1"));
    const int64_t n = 1 << 20;
    float *h = malloc((size_t)n * sizeof(float)), *back = malloc((size_t)n * sizeof(float)), *d = NULL;
    assert_non_null(h);
    assert_non_null(back);
    for (int64_t i = 0; i < n; i++) h[i] = (float)((i * 7919) % 1000) / 8.0f;
    OK(G->alloc(G, (size_t)n * sizeof(float), (void **)&d));
    OK(G->to_device(G, d, h, (size_t)n * sizeof(float)));
    OK(G->scale(G, d, 3.0f, n));
    OK(G->coll_allreduce_sum(G, d, n));
    OK(G->coll_join(G));
    OK(G->scale(G, d, 0.5f, n));
    OK(G->to_host(G, back, d, (size_t)n * sizeof(float)));
    for (int64_t i = 0; i < n; i++)
        if (back[i] != h[i] * 3.0f * 0.5f) fail_msg("element %lld: %g, want %g", (long long)i, back[i], h[i] * 1.5f);
    OK(G->coll_join(G)); /* a join with nothing started */
    assert_int_not_equal(G->coll_init(G, id, sizeof id, 1, 0), KC_STATUS_OK); /* one communicator per backend */
    G->free(G, d);
    free(h);
    free(back);
}

int main(void) {
    int open_rc = cuda_test_open(&G, NULL);
    if (open_rc) return open_rc;
    if (!G->coll_unique_id || G->coll_unique_id(G, NULL, 0) != KC_STATUS_OK) {
        printf("SKIP: no NCCL on this GPU machine: %s\n", G->coll_unique_id ? kc_last_error() : "no coll_* entries");
        kc_backend_destroy(G);
        return 77;
    }
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_one_rank_allreduce)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(G);
    return rc;
}
