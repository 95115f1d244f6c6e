/* test_cuda_rules.c — the CUDA module's decisions that need no GPU (src/backend/cuda/
 * cuda_rules.c, compiled into this test without CUDA): cuDNN statuses (refusals by
 * category, out-of-memory), which convolution candidate runs in a workspace and what the
 * planner is told, when KERAC_CUDNN_BENCHMARK measures, the bounded convolution cache, and
 * the input feed's barrier bookkeeping. The numbers are cuDNN 9's (cudnn_graph_v9.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "backend/cuda/cuda_rules.h"

static void test_dnn_status(void **state) {
    (void)state;
    /* refusals: the NOT_SUPPORTED group, sub-codes included */
    assert_true(kc__cu_dnn_refused(3000));
    assert_true(kc__cu_dnn_refused(3002)); /* _SHAPE */
    assert_true(kc__cu_dnn_refused(3004)); /* _LAYOUT */
    assert_true(kc__cu_dnn_refused(3010)); /* _SHARED_MEMORY_INSUFFICIENT */
    assert_true(kc__cu_dnn_refused(3011)); /* _PADDING */
    assert_true(kc__cu_dnn_refused(3014));
    assert_false(kc__cu_dnn_refused(0));
    assert_false(kc__cu_dnn_refused(2000)); /* BAD_PARAM */
    assert_false(kc__cu_dnn_refused(4004));
    assert_false(kc__cu_dnn_refused(5000));
    /* out of memory: the host's (4003, the old ALLOC_FAILED) and the device's (4004) */
    assert_int_equal(kc__cu_dnn_status(0), KC_STATUS_OK);
    assert_int_equal(kc__cu_dnn_status(4003), KC_STATUS_OUT_OF_MEMORY);
    assert_int_equal(kc__cu_dnn_status(4004), KC_STATUS_OUT_OF_MEMORY);
    assert_int_equal(kc__cu_dnn_status(4000), KC_STATUS_DEVICE);
    assert_int_equal(kc__cu_dnn_status(3002), KC_STATUS_DEVICE);
    assert_int_equal(kc__cu_dnn_status(1008), KC_STATUS_DEVICE);
    assert_int_equal(kc__cu_dnn_status(5003), KC_STATUS_DEVICE);
}

static kc_cu_dir dir_of(int n, const size_t *ws) {
    kc_cu_dir d = {.n = n};
    for (int i = 0; i < n; i++) {
        d.algo[i] = i;
        d.ws[i] = ws[i];
    }
    return d;
}

static void test_pick(void **state) {
    (void)state;
    size_t borrow = 99;
    kc_cu_dir d = dir_of(3, (size_t[]){4096, 0, 1 << 20});
    assert_int_equal(kc__cu_pick(&d, 8192, &borrow), 0); /* the best ranked fits */
    assert_int_equal(borrow, 0);
    assert_int_equal(kc__cu_pick(&d, 1024, &borrow), 1); /* a short batch: the first that fits */
    assert_int_equal(borrow, 0);
    /* a run-time refusal moves on to the next that fits */
    d.refused[0] = true;
    assert_int_equal(kc__cu_pick(&d, 8192, &borrow), 1);
    d.refused[1] = true;
    /* none left fits the workspace the plan gave: the one needing least, borrowed */
    assert_int_equal(kc__cu_pick(&d, 8192, &borrow), 2);
    assert_int_equal(borrow, 1 << 20);
    d.refused[2] = true;
    assert_int_equal(kc__cu_pick(&d, SIZE_MAX, &borrow), -1);
    assert_int_equal(borrow, 0);
    /* borrowing prefers the least need, the best ranked among equals */
    kc_cu_dir e = dir_of(4, (size_t[]){1 << 22, 1 << 21, 1 << 21, 1 << 23});
    assert_int_equal(kc__cu_pick(&e, 0, &borrow), 1);
    assert_int_equal(borrow, 1 << 21);
    kc_cu_dir none = {0};
    assert_int_equal(kc__cu_pick(&none, 100, &borrow), -1);
}

static void test_planner_need(void **state) {
    (void)state;
    kc_cu_dir d = dir_of(3, (size_t[]){4096, 0, 1 << 20});
    assert_int_equal(kc__cu_dir_need(&d, false), 4096);    /* heuristics: the best ranked */
    assert_int_equal(kc__cu_dir_need(&d, true), 1 << 20);  /* benchmark, before measuring: room for all */
    d.refused[0] = true;                                   /* a refusal changes what a re-plan reserves */
    assert_int_equal(kc__cu_dir_need(&d, false), 0);
    d.refused[1] = true;
    assert_int_equal(kc__cu_dir_need(&d, false), 1 << 20);
    d.refused[2] = true;
    assert_int_equal(kc__cu_dir_need(&d, false), 0);
    kc_cu_dir m = dir_of(2, (size_t[]){300, 5000});
    m.measured = true; /* measured: the measured best */
    assert_int_equal(kc__cu_dir_need(&m, true), 300);

    /* the fixed slices: kernel 3x3x8x16 floats = 4608 B -> 4608 (aligned); padded input
     * 2x9x9x8 floats = 5184 B -> 5376 */
    assert_int_equal(kc__cu_conv_fixed(2, 8, 16, 3, 3, false, 0, 0), 4608);
    assert_int_equal(kc__cu_conv_fixed(2, 8, 16, 3, 3, true, 9, 9), 4608 + 5376);
    assert_int_equal(kc__cu_conv_fixed(1, 1, 1, 1, 1, false, 0, 0), 256);
    size_t need[3] = {1000, 70000, 0};
    assert_int_equal(kc__cu_conv_total(4608, need), 256 + 4608 + 70144);
    size_t zero[3] = {0, 0, 0};
    assert_int_equal(kc__cu_conv_total(256, zero), 512);
}

static void test_find_now(void **state) {
    (void)state;
    assert_true(kc__cu_find_now(true, false, 7, 7));   /* the batch planned last */
    assert_false(kc__cu_find_now(false, false, 7, 7)); /* heuristics */
    assert_false(kc__cu_find_now(true, true, 7, 7));   /* measured once */
    assert_false(kc__cu_find_now(true, false, 3, 7));  /* a probe or a short last batch */
    assert_false(kc__cu_find_now(true, false, 0, 0));  /* never planned */
}

static void test_lru(void **state) {
    (void)state;
    uint64_t use[5] = {9, 3, 12, 3, 40};
    assert_int_equal(kc__cu_lru_victim(use, 5, -1), 1); /* the oldest, the first among equals */
    assert_int_equal(kc__cu_lru_victim(use, 5, 1), 3);  /* never the one asked for */
    assert_int_equal(kc__cu_lru_victim(use, 1, 0), -1);
    assert_int_equal(kc__cu_lru_victim(use, 0, -1), -1);
}

static void test_feed_marks(void **state) {
    (void)state;
    kc_cu_feed_marks m = {0};
    static char block[4096], other[1024];
    assert_true(kc__cu_feed_mark(&m, 0, block));         /* new: waits */
    assert_false(kc__cu_feed_mark(&m, 0, block));        /* seen: only the slot's own event */
    assert_true(kc__cu_feed_mark(&m, 1, block));         /* per slot */
    assert_true(kc__cu_feed_mark(&m, 0, block + 2048));  /* the targets of the same block */
    assert_true(kc__cu_feed_mark(&m, 0, other));
    /* the block is freed (and may be recycled for compute work): forgotten in every slot */
    kc__cu_feed_forget(&m, block, sizeof block);
    assert_true(kc__cu_feed_mark(&m, 0, block));
    assert_true(kc__cu_feed_mark(&m, 1, block));
    assert_true(kc__cu_feed_mark(&m, 0, block + 2048));
    assert_false(kc__cu_feed_mark(&m, 0, other));        /* another block stays known */
    kc__cu_feed_forget(&m, other, 0);                    /* an empty range forgets nothing */
    assert_false(kc__cu_feed_mark(&m, 0, other));
    /* only the newest KC_CU_FEED_MARKS per slot are kept */
    static char many[KC_CU_FEED_MARKS + 1][8];
    kc_cu_feed_marks n = {0};
    for (int i = 0; i <= KC_CU_FEED_MARKS; i++) assert_true(kc__cu_feed_mark(&n, 0, many[i]));
    assert_true(kc__cu_feed_mark(&n, 0, many[0]));       /* the oldest fell out: waits again */
    assert_false(kc__cu_feed_mark(&n, 0, many[KC_CU_FEED_MARKS]));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dnn_status), cmocka_unit_test(test_pick),    cmocka_unit_test(test_planner_need),
        cmocka_unit_test(test_find_now),   cmocka_unit_test(test_lru),     cmocka_unit_test(test_feed_marks),
    };
    return cmocka_run_group_tests_name("cuda_rules", tests, NULL, NULL);
}
