/* test_step_allocs.c — a training step allocates nothing (issue 17: "allocations per step:
 * zero"), and what a step costs the host where the kernels cost nothing.
 *
 * This program replaces malloc, calloc, realloc, free and the aligned allocators for the
 * whole process (glibc's own entry points, __libc_malloc & co., do the work), so every heap
 * allocation is seen: kerac's (its code and its loader thread, directly or through libc)
 * must be none, and so must libgomp's: kerac enters no OpenMP region that would run on one
 * thread (libgomp mallocs and frees a team for each such region, kc__cpu_par and
 * KC_CPU_PAR_FOR in cpu.h). OpenBLAS's (an OpenBLAS frame on the call stack) are counted and
 * printed per step: its threaded GEMMs malloc a job array per call (DESIGN.md, "Allocations
 * per step"); with one thread there must be none either. kc_fit
 * runs 1 + N steps; a callback switches counting on at the end of the first step (which
 * plans and sizes everything) and off at the end of the last, so the count covers N whole
 * steps (forward, backward, optimizer, the loader thread's next batches, the callbacks):
 *   workload_a_steps    the default CNN (Conv, MaxPool, Dropout, Dense, Adam), batch 32
 *   batchnorm_steps     Conv + BatchNorm + ReLU twice, MaxPool, GlobalAveragePooling, Dense,
 *                       SGD with momentum, batch 16
 *   each_isa_steps      the default CNN again under each kernel set the processor runs
 *                       (kc_device_opts.cpu_isa): the copies must not differ
 *   blocked_one_thread  workload A's conv2d_1 (32 -> 64, 3x3 on 13x13) on the
 *                       register-blocked kernels (cpu_conv_blocked.c; each kernel set that
 *                       has them), forward and backward-filter on one thread: no libgomp
 *                       allocation (no OpenMP region entered) and none of kerac's (debt2)
 *   host_overhead       a one-Dense model on 8 features, batch 8, one thread (the kernels
 *                       cost next to nothing): microseconds of CPU time per step (the
 *                       process's: the loader thread's too), printed with the wall clock's
 *                       (the figures bench/RESULTS.md records), checked to stay under 2 ms
 * KC_TEST_ALLOC_TRACE=1 prints the call stack of every counted allocation on stderr.
 * Under AddressSanitizer (whose allocator this replacement would bypass) it exits 77. */
#if defined(KC_TEST_SANITIZED) /* the sanitized build (tests/CMakeLists.txt) */
#elif defined(__SANITIZE_ADDRESS__)
#define KC_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KC_TEST_SANITIZED 1
#endif
#endif

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <link.h>
#include <execinfo.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "backend/cpu/cpu.h"
#include "kerac.h"

/* ---------------------------------------------------------------- the counting allocator */

#ifndef KC_TEST_SANITIZED
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);
#endif

static atomic_int g_counting;
static atomic_long g_allocs;      /* kerac's allocations while counting (its code, or libc for it) */
static atomic_size_t g_bytes;     /* their bytes */
static atomic_size_t g_first;     /* the size of the first one (a hint at who made it) */
static atomic_long g_runtime;     /* allocations made inside libgomp or OpenBLAS while counting */
static atomic_long g_gomp;        /* of those, libgomp's with no OpenBLAS frame on the stack */

/* The code of libgomp and OpenBLAS: an allocation with one of them on its call stack is
 * theirs (libgomp allocates a team for every parallel region that runs on one thread, the
 * OpenMP `if` clause false: kerac must enter none; OpenBLAS a job array per threaded GEMM),
 * not kerac's. */
typedef struct code_range {
    uintptr_t lo, hi;
    int blas; /* OpenBLAS's, else libgomp's */
} code_range;
static code_range g_runtime_code[8];
static int g_n_runtime_code;

static int note_runtime(struct dl_phdr_info *info, size_t size, void *user) {
    (void)size, (void)user;
    if (!strstr(info->dlpi_name, "libgomp") && !strstr(info->dlpi_name, "libopenblas")) return 0;
    for (int i = 0; i < info->dlpi_phnum && g_n_runtime_code < 8; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X)) continue;
        g_runtime_code[g_n_runtime_code++] = (code_range){info->dlpi_addr + ph->p_vaddr,
                                                          info->dlpi_addr + ph->p_vaddr + ph->p_memsz,
                                                          strstr(info->dlpi_name, "libopenblas") != NULL};
    }
    return 0;
}

static int g_trace; /* KC_TEST_ALLOC_TRACE=1: each counted allocation's call stack on stderr */
static _Thread_local int t_inside; /* in counted() already (backtrace itself) */

static inline void counted(size_t n) {
    if (!atomic_load_explicit(&g_counting, memory_order_relaxed) || t_inside) return;
    t_inside = 1;
    void *pc[24]; /* backtrace was primed in main: it does not allocate here */
    const int depth = backtrace(pc, 24);
    int runtime = 0, blas = 0;
    for (int i = 0; i < depth; i++)
        for (int r = 0; r < g_n_runtime_code; r++)
            if ((uintptr_t)pc[i] >= g_runtime_code[r].lo && (uintptr_t)pc[i] < g_runtime_code[r].hi) {
                runtime = 1;
                blas |= g_runtime_code[r].blas;
            }
    if (runtime) {
        atomic_fetch_add(&g_runtime, 1);
        if (!blas) atomic_fetch_add(&g_gomp, 1);
    } else {
        if (atomic_fetch_add(&g_allocs, 1) == 0) atomic_store(&g_first, n);
        atomic_fetch_add(&g_bytes, n);
    }
    if (g_trace) { /* backtrace_symbols_fd does not allocate */
        fprintf(stderr, "allocation of %zu bytes (%s):\n", n, blas ? "OpenBLAS" : runtime ? "libgomp" : "kerac");
        backtrace_symbols_fd(pc, depth, 2);
    }
    t_inside = 0;
}

#ifndef KC_TEST_SANITIZED
void *malloc(size_t n) {
    counted(n);
    return __libc_malloc(n);
}
void *calloc(size_t k, size_t n) {
    counted(k * n);
    return __libc_calloc(k, n);
}
void *realloc(void *p, size_t n) {
    counted(n);
    return __libc_realloc(p, n);
}
void free(void *p) {
    __libc_free(p);
}
void *memalign(size_t a, size_t n) {
    counted(n);
    return __libc_memalign(a, n);
}
void *aligned_alloc(size_t a, size_t n) {
    counted(n);
    return __libc_memalign(a, n);
}
int posix_memalign(void **out, size_t a, size_t n) {
    counted(n);
    void *p = __libc_memalign(a, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
#endif

/* ---------------------------------------------------------------- a fit with a counting window */

typedef struct window {
    int steps;     /* the fit's steps: counting from the end of step 1 to the end of this one */
    int seen;
    double t0, t1; /* the wall clock at those two ends */
    double c0, c1; /* the process's CPU time (all its threads) at those two ends */
} window;

static double now(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kc_callback_action on_batch_end(kc_model *m, const kc_batch_logs *logs, void *user) {
    (void)m, (void)logs;
    window *w = user;
    w->seen++;
    if (w->seen == 1) {
        atomic_store(&g_allocs, 0);
        atomic_store(&g_bytes, 0);
        atomic_store(&g_runtime, 0);
        atomic_store(&g_gomp, 0);
        w->t0 = now(CLOCK_MONOTONIC);
        w->c0 = now(CLOCK_PROCESS_CPUTIME_ID);
        atomic_store(&g_counting, 1);
    } else if (w->seen == w->steps) {
        atomic_store(&g_counting, 0);
        w->t1 = now(CLOCK_MONOTONIC);
        w->c1 = now(CLOCK_PROCESS_CPUTIME_ID);
    }
    return KC_CONTINUE;
}

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

/* n images of shape (h, w, c), labels 0..9, from a fixed seed */
static kc_dataset *synthetic(int64_t n, int h, int w, int c) {
    size_t per = (size_t)h * (size_t)w * (size_t)c;
    float *x = __builtin_malloc((size_t)n * per * sizeof *x);
    int32_t *y = __builtin_malloc((size_t)n * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    unsigned r = 7;
    for (size_t i = 0; i < (size_t)n * per; i++) x[i] = (float)rand_r(&r) / (float)RAND_MAX;
    for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(i % 10);
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, n, (kc_shape){3, {h, w, c}}, 10, &d), "dataset");
    __builtin_free(x);
    __builtin_free(y);
    return d;
}

/* Trains m for steps steps of batch examples; returns the allocations of steps 2..steps and
 * puts the seconds they took into secs (wall clock, CPU time). */
static long fit_counting(kc_model *m, kc_dataset *d, int batch, int steps, double secs[2]) {
    window w = {.steps = steps};
    kc_callback cb = {.name = "alloc_counter", .user = &w, .on_batch_end = on_batch_end};
    kc_callback *cbs[1] = {&cb};
    kc_history *h = NULL;
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = batch, .steps_per_epoch = steps,
                                     .callbacks = cbs, .num_callbacks = 1}, &h), "fit");
    atomic_store(&g_counting, 0);
    kc_history_destroy(h);
    assert_int_equal(w.seen, steps);
    if (secs) secs[0] = w.t1 - w.t0, secs[1] = w.c1 - w.c0;
    return atomic_load(&g_allocs);
}

static void expect_none(const char *what, long n, int steps) {
    const long gomp = atomic_load(&g_gomp), blas = atomic_load(&g_runtime) - gomp;
    print_message("    %s: %ld heap allocations by kerac (%zu bytes) in %d steps after the first; "
                  "%.1f per step inside libgomp, %.1f inside OpenBLAS\n",
                  what, n, atomic_load(&g_bytes), steps, (double)gomp / steps, (double)blas / steps);
    if (n != 0)
        fail_msg("%s: %ld allocations (%zu bytes, the first of %zu) in %d training steps after the first; "
                 "a step must not allocate",
                 what, n, atomic_load(&g_bytes), atomic_load(&g_first), steps);
    if (gomp != 0)
        fail_msg("%s: libgomp allocated %ld times in %d training steps after the first: an OpenMP region that "
                 "runs on one thread (its `if` clause false) makes libgomp malloc a team; test the condition in "
                 "C first (KC_CPU_PAR_FOR, cpu.h). KC_TEST_ALLOC_TRACE=1 shows where",
                 what, gomp, steps);
}

#define STEPS 6

/* isa: a kc_cpu_isa (KC_CPU_ISA_AUTO: the best the processor runs) */
static kc_model *default_cnn(int isa) {
    kc_model *m = NULL;
    must(kc_default_cnn(28, 28, 1, 10, &m), "default cnn");
    must(kc_model_set_device_opts(m, &(kc_device_opts){.cpu_isa = isa}), "device opts");
    must(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                           .loss = "sparse_categorical_crossentropy"}),
         "compile");
    return m;
}

static void workload_a_steps(void **state) {
    (void)state;
    kc_dataset *d = synthetic(32 * STEPS, 28, 28, 1);
    kc_model *m = default_cnn(KC_CPU_ISA_AUTO);
    expect_none("default CNN, Adam, batch 32", fit_counting(m, d, 32, STEPS, NULL), STEPS - 1);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void batchnorm_steps(void **state) {
    (void)state;
    kc_dataset *d = synthetic(16 * STEPS, 16, 16, 3);
    kc_model *m = NULL;
    must(kc_sequential("bn_steps", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {16, 16, 3}));
    for (int i = 0; i < 2; i++) {
        kc_add(m, KC_CONV2D(.filters = 16, .kernel_size = {3, 3}, .padding = "same"));
        kc_add(m, KC_BATCHNORM());
        kc_add(m, KC_ACTIVATION(.activation = "relu"));
    }
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_GLOBALAVGPOOL2D());
    kc_add(m, KC_DENSE(.units = 10, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.01, .momentum = 0.9),
                                           .loss = "sparse_categorical_crossentropy"}),
         "compile");
    expect_none("Conv+BatchNorm+ReLU model, SGD momentum, batch 16", fit_counting(m, d, 16, STEPS, NULL),
                STEPS - 1);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void each_isa_steps(void **state) {
    (void)state;
    kc_dataset *d = synthetic(16 * STEPS, 28, 28, 1);
    for (int isa = KC_CPU_ISA_BASELINE; isa <= KC_CPU_ISA_AVX512; isa++) {
        if (isa > kc__cpu_isa_best()) {
            print_message("    %s kernels: skipped, this processor does not run them\n", kc__cpu_isa_label(isa));
            continue;
        }
        kc_model *m = default_cnn(isa);
        char what[64];
        snprintf(what, sizeof what, "default CNN on the %s kernels", kc__cpu_isa_label(isa));
        expect_none(what, fit_counting(m, d, 16, STEPS, NULL), STEPS - 1);
        kc_model_destroy(m);
    }
    kc_dataset_destroy(d);
}

static void blocked_one_thread(void **state) {
    (void)state;
    const kc_conv2d_desc d = {.n = 8, .h = 13, .w = 13, .c = 32, .f = 64, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                              .dh = 1, .dw = 1, .oh = 11, .ow = 11};
    float *x = calloc((size_t)d.n * d.h * d.w * d.c, sizeof *x), *w = calloc((size_t)9 * d.c * d.f, sizeof *w);
    float *y = calloc((size_t)d.n * d.oh * d.ow * d.f, sizeof *y), *dw = calloc((size_t)9 * d.c * d.f, sizeof *dw);
    assert_true(x && w && y && dw);
    const int threads = kc_get_num_threads();
    int ran = 0;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= kc__cpu_isa_best(); isa++) {
        kc_backend *be = NULL;
        /* Winograd off: F(4x4,3x3) would take this shape first */
        must(kc_backend_cpu_create_ex(&(kc_device_opts){.cpu_isa = isa, .cpu_winograd = KC_FALSE}, &be), "cpu backend");
        const size_t wsb = be->conv2d_workspace(be, &d);
        void *ws = malloc(wsb + 1);
        char desc[256] = "";
        must(be->describe(be, KC_OP_CONV2D, &d, wsb, desc, sizeof desc), "describe");
        if (!strstr(desc, "register-blocked")) {
            if (isa >= KC_CPU_ISA_AVX2) fail_msg("%s kernels: not the register-blocked kernel: %s", kc__cpu_isa_label(isa), desc);
            print_message("    %s kernels: no register-blocked convolution here (%s)\n", kc__cpu_isa_label(isa), desc);
        } else {
            kc_set_num_threads(1);
            must(be->conv2d_forward(be, &d, x, w, NULL, y, ws, wsb), "forward"); /* warm-up */
            atomic_store(&g_allocs, 0);
            atomic_store(&g_runtime, 0);
            atomic_store(&g_gomp, 0);
            atomic_store(&g_counting, 1);
            for (int r = 0; r < 3; r++) {
                must(be->conv2d_forward(be, &d, x, w, NULL, y, ws, wsb), "forward");
                must(be->conv2d_backward_filter(be, &d, x, y, dw, NULL, ws, wsb), "backward filter");
            }
            atomic_store(&g_counting, 0);
            kc_set_num_threads(threads);
            char what[96];
            snprintf(what, sizeof what, "register-blocked conv on the %s kernels, one thread", kc__cpu_isa_label(isa));
            expect_none(what, atomic_load(&g_allocs), 3);
            ran++;
        }
        free(ws);
        kc_backend_destroy(be);
    }
    if (!ran) print_message("    no kernel set of this processor has the register-blocked convolutions: skipped\n");
    free(x), free(w), free(y), free(dw);
}

static void host_overhead(void **state) {
    (void)state;
    enum { N = 8 * 400, TINY_STEPS = 400 };
    float *x = __builtin_malloc(N * 8 * sizeof *x);
    int32_t *y = __builtin_malloc(N * sizeof *y);
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < N * 8; i++) x[i] = (float)(i % 13) / 13.0f;
    for (int i = 0; i < N; i++) y[i] = i % 3;
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, N, (kc_shape){1, {8}}, 3, &d), "dataset");
    __builtin_free(x);
    __builtin_free(y);
    kc_model *m = NULL;
    must(kc_sequential("tiny", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {8}));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(), .loss = "sparse_categorical_crossentropy"}),
         "compile");
    double secs[2] = {0, 0};
    const int threads = kc_get_num_threads();
    kc_set_num_threads(1); /* CPU time then counts the work, not OpenMP's waiting */
    long n = fit_counting(m, d, 8, TINY_STEPS, secs);
    kc_set_num_threads(threads);
    const double us = 1e6 * secs[1] / (TINY_STEPS - 1);
    print_message("    host overhead: %.1f us of CPU per step (%.1f us wall clock; Dense 8->3, batch 8, Adam, one "
                  "thread, %d steps)\n",
                  us, 1e6 * secs[0] / (TINY_STEPS - 1), TINY_STEPS - 1);
    expect_none("one-Dense model", n, TINY_STEPS - 1);
    /* one thread: OpenBLAS runs no threaded GEMM either, so nothing at all allocates */
    if (atomic_load(&g_runtime) != 0)
        fail_msg("one-Dense model on one thread: %ld allocations inside OpenBLAS in %d steps; expected none",
                 atomic_load(&g_runtime), TINY_STEPS - 1);
    /* generous: a step that allocates, sleeps or spins goes far beyond */
    if (us > 2000) fail_msg("host overhead %.0f us of CPU per step: over 2 ms for a model that does no work", us);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

int main(void) {
#ifdef KC_TEST_SANITIZED
    printf("test_step_allocs: skipped under AddressSanitizer (it replaces malloc, and so would this test)\n");
    return 77;
#endif
    void *pc[4];
    backtrace(pc, 4); /* loads libgcc's unwinder now, not inside a counted allocation */
    dl_iterate_phdr(note_runtime, NULL);
    g_trace = getenv("KC_TEST_ALLOC_TRACE") && !strcmp(getenv("KC_TEST_ALLOC_TRACE"), "1");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(workload_a_steps),
        cmocka_unit_test(batchnorm_steps),
        cmocka_unit_test(each_isa_steps),
        cmocka_unit_test(blocked_one_thread), /* debt2 */
        cmocka_unit_test(host_overhead),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
