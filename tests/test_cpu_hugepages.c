/* test_cpu_hugepages.c — the CPU backend's large blocks (cpu_backend.c): from 4 MiB they
 * start on a 2 MiB boundary (so that transparent huge pages can back them: MADV_HUGEPAGE),
 * smaller ones and a backend created with cpu_hugepages = KC_FALSE keep the plain 64-byte
 * alignment; either way the block is usable end to end, counted and freed. Whether the
 * kernel really gives huge pages depends on the machine (THP "never"), so that is not
 * asserted; bench_train's anon_huge_kib shows it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"

#define MIB ((size_t)1 << 20)

/* the block's start as the allocator sees it: the backend keeps a 64-byte header before it */
static uintptr_t base_of(const void *p) { return (uintptr_t)p - 64; }

static void use_block(kc_backend *be, size_t bytes, int want_huge_aligned) {
    void *p = NULL;
    size_t before = 0, after = 0;
    be->memory_stats(be, &before, NULL);
    assert_int_equal(be->alloc(be, bytes, &p), KC_STATUS_OK);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % 64, 0);
    if (want_huge_aligned) assert_int_equal(base_of(p) % (2 * MIB), 0);
    memset(p, 0x5a, bytes); /* every byte is ours */
    assert_int_equal(((unsigned char *)p)[bytes - 1], 0x5a);
    be->memory_stats(be, &after, NULL);
    assert_true(after >= before + bytes);
    be->free(be, p);
    be->memory_stats(be, &after, NULL);
    assert_int_equal(after, before);
}

static void test_large_blocks_are_2mib_aligned(void **state) {
    (void)state;
    kc_backend *be = NULL;
    assert_int_equal(kc_backend_cpu_create(&be), KC_STATUS_OK);
    use_block(be, 4 * MIB, 1);
    use_block(be, 32 * MIB + 12345, 1);
    use_block(be, 1 * MIB, 0); /* under the threshold: plain */
    kc_backend_destroy(be);
}

static void test_off(void **state) {
    (void)state;
    kc_backend *be = NULL;
    kc_device_opts o = {.cpu_hugepages = KC_FALSE};
    assert_int_equal(kc_backend_cpu_create_ex(&o, &be), KC_STATUS_OK);
    use_block(be, 8 * MIB, 0); /* plain 64-byte alignment (2 MiB only by chance): it works */
    kc_backend_destroy(be);
}

static void test_env(void **state) {
    (void)state;
    kc_device_opts o;
    setenv("KERAC_CPU_HUGEPAGES", "0", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_int_equal(o.cpu_hugepages, KC_FALSE);
    unsetenv("KERAC_CPU_HUGEPAGES");
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_int_equal(o.cpu_hugepages, KC_DEFAULT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_large_blocks_are_2mib_aligned),
        cmocka_unit_test(test_off),
        cmocka_unit_test(test_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
