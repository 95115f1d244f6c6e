/* bench_infer.c — workload A's inference (kc_predict of the default CNN on the 10,000
 * Fashion-MNIST test images), per layer and per batch size (bench/README.md).
 *
 *   build/bench/bench_infer [REPS] [BATCH...]
 *
 * For each batch size (default 1000), alternating in one process, REPS passes (default 7)
 * after one warm-up pass each; prints one JSON line per batch size with the median images/s.
 * Then, with profiling on, REPS passes at the first batch size and one line per layer with
 * its forward milliseconds per pass (wall clock, or CPU time with BENCH_CLOCK=cpu).
 * The weights are the initialiser's (no training: the arithmetic is the same). Threads:
 * BENCH_THREADS (default 2). Public API only.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "kerac.h"
#include "bench_common.h"
#include "bench_util.h"

enum { MAX_REPS = 101, MAX_BATCHES = 8 };

static int fail(const char *what, kc_status s) {
    fprintf(stderr, "bench_infer: %s: %s (%s)\n", what, kc_last_error(), kc_status_name(s));
    return 1;
}

/* Median seconds of reps passes over n images at batch size b (one warm-up pass first). */
static kc_status time_passes(kc_model *m, const float *x, int64_t n, int b, int reps, float *y, double *median) {
    double t[MAX_REPS];
    for (int r = 0; r <= reps; r++) {
        double t0 = bench_now();
        kc_status s = kc_predict(m, x, n, b, y);
        if (s != KC_STATUS_OK) return s;
        if (r > 0) t[r - 1] = bench_now() - t0;
    }
    *median = bench_median(t, reps);
    return KC_STATUS_OK;
}

int main(int argc, char **argv) {
    char usage[64];
    snprintf(usage, sizeof usage, "bench_infer [REPS 1..%d] [BATCH...]", MAX_REPS - 1);
    bench_args a = {.threads = 2, .batch = BENCH_ARG_NONE, .warmup = BENCH_ARG_NONE, .steps = BENCH_ARG_NONE,
                    .profile = BENCH_ARG_NONE, .cpu_clock = 0};
    if (bench_args_parse(&a, usage, argc, argv, 0, INT_MAX)) return 2;
    (void)bench_clock_from_env(); /* checked: this file's clock */
    const int reps = bench_arg_int(&a, 0, 7), threads = a.threads;
    int batches[MAX_BATCHES] = {1000}, nb = a.npos > 1 ? 0 : 1;
    for (int i = 1; i < a.npos && nb < MAX_BATCHES; i++) batches[nb++] = bench_arg_int(&a, i, 0);
    if (reps < 1 || reps >= MAX_REPS) {
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    for (int i = 0; i < nb; i++)
        if (batches[i] < 1) {
            fprintf(stderr, "bench_infer: batch sizes must be positive\n");
            return 2;
        }
    int rc = 1;
    kc_status s;
    kc_model *m = NULL;
    kc_dataset *test = NULL;
    float *x = NULL, *y = NULL;
    if ((s = kc_default_cnn(28, 28, 1, 10, &m)) != KC_STATUS_OK) return fail("kc_default_cnn", s);
    if ((s = kc_dataset_open("fashion-mnist:test", &test)) != KC_STATUS_OK) {
        rc = fail("fashion-mnist:test", s);
        goto done;
    }
    const int64_t n = kc_dataset_size(test);
    x = malloc((size_t)n * 784 * sizeof *x);
    y = malloc((size_t)n * 10 * sizeof *y);
    if (!x || !y) goto done;
    if ((s = kc_dataset_read(test, 0, n, x, NULL)) != KC_STATUS_OK) {
        rc = fail("kc_dataset_read", s);
        goto done;
    }
    double med[MAX_BATCHES][3];
    for (int round = 0; round < 3; round++) /* batch sizes alternate, 3 rounds */
        for (int i = 0; i < nb; i++)
            if ((s = time_passes(m, x, n, batches[i], reps, y, &med[i][round])) != KC_STATUS_OK) {
                rc = fail("kc_predict", s);
                goto done;
            }
    for (int i = 0; i < nb; i++) {
        printf("{\"batch\": %d, \"threads\": %d, \"clock\": \"%s\", \"images_per_second\": [%.0f, %.0f, %.0f], "
               "\"median\": %.0f}\n",
               batches[i], threads, getenv("BENCH_CLOCK") ? getenv("BENCH_CLOCK") : "wall", n / med[i][0],
               n / med[i][1], n / med[i][2], n / bench_median(med[i], 3));
    }
    if ((s = kc_model_set_profiling(m, 1)) != KC_STATUS_OK) {
        rc = fail("profiling", s);
        goto done;
    }
    double whole;
    if ((s = time_passes(m, x, n, batches[0], reps, y, &whole)) != KC_STATUS_OK) {
        rc = fail("kc_predict", s);
        goto done;
    }
    double sum = 0;
    for (int i = 0;; i++) {
        kc_layer_timing lt;
        if (kc_model_layer_timing(m, i, &lt) != KC_STATUS_OK) break;
        const double ms = lt.forward_calls ? 1e3 * lt.forward_seconds / (reps + 1) : 0;
        sum += ms;
        printf("{\"layer\": \"%s\", \"class\": \"%s\", \"forward_ms_per_pass\": %.2f}\n", lt.name, lt.class_name, ms);
    }
    printf("{\"profiled_pass_ms\": %.2f, \"layers_ms\": %.2f}\n", 1e3 * whole, sum);
    rc = 0;
done:
    free(x);
    free(y);
    kc_dataset_destroy(test);
    kc_model_destroy(m);
    return rc;
}
