/* test_cpu_copy.c — the CPU backend's copy and memset0 (cpu_backend.c): from 1 MiB on, split
 * over the threads (scale2t). Against memmove / memset on 1 and 2 threads, at sizes around
 * the split's threshold and not multiples of 64 bytes, unaligned pointers, and overlapping
 * blocks (which stay one memmove). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <omp.h>

#include "kerac_backend.h"

static void fill(unsigned char *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (unsigned char)(seed >> 24);
    }
}

static void test_copy_and_clear(void **state) {
    (void)state;
    const size_t sizes[] = {1, 1000, (1u << 20) - 4, 1u << 20, (1u << 20) + 4, 3u * 1000 * 1000 + 7, 9u << 20};
    const size_t max = (9u << 20) + 256;
    unsigned char *a = malloc(max), *b = malloc(max), *ref = malloc(max);
    assert_non_null(a), assert_non_null(b), assert_non_null(ref);
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    for (int threads = 1; threads <= 2; threads++) {
        omp_set_num_threads(threads);
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
            for (size_t off = 0; off < 8; off += 3) {
                const size_t n = sizes[k];
                fill(a, max, 1u + (unsigned)k), fill(b, max, 7u + (unsigned)off);
                memcpy(ref, b, max);
                memmove(ref + off, a + 5, n);
                assert_int_equal(be->copy(be, b + off, a + 5, n), KC_STATUS_OK);
                assert_memory_equal(b, ref, max);
                memset(ref + 3, 0, n);
                assert_int_equal(be->memset0(be, b + 3, n), KC_STATUS_OK);
                assert_memory_equal(b, ref, max);
                /* overlapping: forward and backward by 100 bytes */
                memcpy(ref, b, max);
                memmove(ref + 100, ref, n);
                assert_int_equal(be->copy(be, b + 100, b, n), KC_STATUS_OK);
                assert_memory_equal(b, ref, max);
                memmove(ref, ref + 100, n);
                assert_int_equal(be->copy(be, b, b + 100, n), KC_STATUS_OK);
                assert_memory_equal(b, ref, max);
            }
    }
    assert_int_equal(be->copy(be, NULL, a, 8), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(be->memset0(be, NULL, 8), KC_STATUS_INVALID_ARGUMENT);
    kc_backend_destroy(be);
    free(a), free(b), free(ref);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_copy_and_clear)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
