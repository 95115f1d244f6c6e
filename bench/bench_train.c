/* bench_train.c — kerac side of the CPU benchmarks (see bench/README.md).
 *
 * Workload A (BENCH_WORKLOAD=A, the default): the default CNN (Keras's mnist_convnet,
 * kc_default_cnn) on Fashion-MNIST, through the public API only: Adam lr 1e-3, sparse
 * categorical crossentropy, batch 128.
 * Workload B (BENCH_WORKLOAD=B): the VGG-style CNN with BatchNorm of bench/workloads.h on
 * synthetic 32x32x3 images (fixed seed, held in memory), SGD lr 0.01 momentum 0.9, batch 64;
 * inference over the first 5,000 of those images.
 *
 *   training:  kc_fit for WARMUP + STEPS steps (one epoch, steps_per_epoch); a callback
 *              stamps the clock at the end of step WARMUP-1 and of every later step, so the
 *              rate covers exactly STEPS steps (the loader thread included). With
 *              BENCH_SECONDS > 0 the timed steps go on (over epochs) until that many
 *              wall-clock seconds have passed instead: both sides of bench/run.sh then
 *              measure over the same window whatever their speed.
 *   inference: kc_predict on the 10,000 test images (B: 5,000 synthetic ones) at batch
 *              1000: one warm-up pass, then the median of REPS passes; with
 *              BENCH_INFER_SECONDS > 0, batches of 1000 (one kc_predict each) until that
 *              many wall-clock seconds have passed, the rate over all of them.
 *   spread:    "train_step_rate" and "infer_batch_rate": p10, median and p90 of the rate
 *              of each timed step (images/s) and of each inference batch, inside the run;
 *              BENCH_STEP_LOG=FILE appends each timed step's wall-clock seconds to FILE,
 *              one line per run ("kerac S1 S2 ..."), to see how a slow run is slow.
 *   sgemm:     OpenBLAS's SGEMM rate on this machine with the same threads (1024^3 through
 *              the backend's gemm, median of 5), and the fraction of it that training
 *              reaches: images/s x FLOP per training image / SGEMM FLOP/s.
 *
 * Prints one JSON line on stdout:
 *   {"impl":"kerac","train_images_per_second":..,"infer_images_per_second":..,"threads":2,...}
 * Errors go to stderr with kc_last_error(), exit status 1.
 *
 * Also recorded: start_to_first_step_s (from main() to the end of the first training step:
 * model, datasets, compile, plan and one step), cpu_isa (the CPU kernels' instruction set,
 * kerac_backend.h) and openblas_threads (OpenBLAS's thread count after training: 1 there
 * means every GEMM ran on one thread; see bench/RESULTS.md, "two speeds").
 *
 * Environment: BENCH_CLOCK (wall, or cpu: the process's CPU time), BENCH_WORKLOAD (A or B), BENCH_BATCH (A: 128, B: 64), BENCH_SGEMM (1; 0: no
 * SGEMM probe), BENCH_THREADS (default 2; passed to kc_set_num_threads), BENCH_WARMUP (5),
 * BENCH_STEPS (100), BENCH_SECONDS (0: STEPS steps), BENCH_INFER_SECONDS (0: REPS passes),
 * BENCH_INFER_REPS (5; 0: no inference, its rate printed as 0), BENCH_TRAIN_SPEC (default "fashion-mnist:train"),
 * BENCH_TEST_SPEC (default "fashion-mnist:test"), BENCH_PROFILE (1: every training step profiled
 * and traced, as `kerac train --profile` does for its steps; bench/profile_overhead.sh; the
 * per-layer times per step go to stderr, and the JSON line carries them as "layer_ms": per
 * layer, milliseconds per training step forward and backward, warm-up steps included).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "bench_common.h"
#include "bench_util.h"
#include "workloads.h"

/* OpenBLAS's own query (the library kerac links); weak, so that another BLAS still links */
extern int openblas_get_num_threads(void) __attribute__((weak));

enum { INFER_BATCH = 1000, MAX_REPS = 100, B_INFER = 5000 };

/* OpenBLAS's SGEMM in GFLOP/s through the backend's gemm: n^3, median of 5 after one warm-up. */
static double sgemm_gflops(kc_backend *be, int n) {
    float *a = calloc((size_t)n * n, sizeof(float)), *b = calloc((size_t)n * n, sizeof(float));
    float *c = calloc((size_t)n * n, sizeof(float));
    double t[5], rate = 0;
    if (a && b && c) {
        for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 17) * 0.01f;
        int ok = 1;
        for (int r = -1; r < 5 && ok; r++) {
            double t0 = bench_now();
            ok = be->gemm(be, 0, 0, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n) == KC_STATUS_OK;
            if (r >= 0) t[r] = bench_now() - t0;
        }
        if (ok) {
            rate = 2.0 * n * n * (double)n / bench_median(t, 5) * 1e-9;
        }
    }
    free(a), free(b), free(c);
    return rate;
}

/* Workload B's data: n synthetic images (the first B_INFER also serve inference). */
static kc_status open_synthetic(int64_t n, float **x, kc_dataset **out) {
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    *x = malloc((size_t)n * 32 * 32 * 3 * sizeof(float));
    if (!*x || !y) {
        free(y);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    bench_synthetic(*x, y, n, 32 * 32 * 3);
    kc_status s = kc_dataset_from_memory(*x, y, n, (kc_shape){3, {32, 32, 3}}, 10, out);
    free(y); /* copied by the dataset */
    return s;
}

/* ", \"layer_ms\": {\"name\": [forward, backward], ...}": milliseconds per training step */
static void print_layer_ms(const kc_model *m, int steps, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, ", \"layer_ms\": {");
    kc_layer_timing lt;
    for (int i = 0; at < n && kc_model_layer_timing(m, i, &lt) == KC_STATUS_OK; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s\"%s\": [%.3f, %.3f]", i ? ", " : "", lt.name,
                               1e3 * lt.forward_seconds / steps, 1e3 * lt.backward_seconds / steps);
    if (at < n) snprintf(buf + at, n - at, "}");
}

/* The process's anonymous memory backed by transparent huge pages, in KiB (Linux; -1 when
 * unknown): shows whether the plan's arena got them (KERAC_CPU_HUGEPAGES). */
static long anon_huge_kib(void) {
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

/* Inference in a window: batches of INFER_BATCH from x (n images, passes over them in turn),
 * one kc_predict each, until `window` wall-clock seconds have passed. *ips: images per
 * second over all of them and *seconds their time (on bench_now's clock: wall or CPU time); *batch_s (malloc'ed,
 * *count of them): each batch's seconds on that clock. */
static kc_status infer_for(kc_model *m, const float *x, int64_t n, int64_t per_image, double window, float *y,
                           double *ips, double *seconds, double **batch_s, int64_t *count) {
    int64_t cap = 0, k = 0, images = 0;
    double *v = NULL, total = 0;
    const double w0 = bench_now_wall();
    kc_status s = KC_STATUS_OK;
    for (int64_t at = 0; s == KC_STATUS_OK && (k == 0 || bench_now_wall() - w0 < window); at = (at + INFER_BATCH) % n) {
        const int64_t b = n - at < INFER_BATCH ? n - at : INFER_BATCH;
        if (k == cap) {
            double *nv = realloc(v, sizeof *v * (size_t)(cap = cap ? 2 * cap : 256));
            if (!nv) { s = KC_STATUS_OUT_OF_MEMORY; break; }
            v = nv;
        }
        const double t0 = bench_now();
        s = kc_predict(m, x + at * per_image, b, INFER_BATCH, y + at * 10);
        v[k++] = (bench_now() - t0) * INFER_BATCH / (double)b, total += v[k - 1] * b / INFER_BATCH, images += b;
    }
    *ips = total > 0 ? (double)images / total : 0;
    *seconds = total;
    *batch_s = v, *count = k;
    return s;
}

static int fail(const char *what, kc_status s) { return bench_fail("bench_train", what, s); }

int main(void) {
    const char *wl = bench_env_str("BENCH_WORKLOAD", "A");
    const int is_b = !strcmp(wl, "B") || !strcmp(wl, "b");
    if (!is_b && strcmp(wl, "A") && strcmp(wl, "a")) {
        fprintf(stderr, "bench_train: BENCH_WORKLOAD must be A or B, not '%s'\n", wl);
        return 2;
    }
    int threads = bench_env_int("BENCH_THREADS", 2);
    int batch = bench_env_int("BENCH_BATCH", is_b ? 64 : 128);
    int warmup = bench_env_int("BENCH_WARMUP", 5);
    int steps = bench_env_int("BENCH_STEPS", 100);
    int reps = bench_env_int("BENCH_INFER_REPS", 5);
    const double window = bench_env_seconds("BENCH_SECONDS", 0);
    const double infer_window = bench_env_seconds("BENCH_INFER_SECONDS", 0);
    const int probe_sgemm = bench_env_int("BENCH_SGEMM", 1) != 0;
    const char *train_spec = bench_env_str("BENCH_TRAIN_SPEC", "fashion-mnist:train");
    const char *test_spec = bench_env_str("BENCH_TEST_SPEC", "fashion-mnist:test");
    if (threads < 1 || batch < 1 || warmup < 0 || steps < 1 || reps < 0 || reps > MAX_REPS || window < 0 ||
        infer_window < 0) {
        fprintf(stderr, "bench_train: need BENCH_THREADS >= 1, BENCH_BATCH >= 1, BENCH_WARMUP >= 0, BENCH_STEPS >= 1, "
                        "0 <= BENCH_INFER_REPS <= %d (integers), BENCH_SECONDS and BENCH_INFER_SECONDS >= 0\n", MAX_REPS);
        return 2;
    }
    const int cpu_clock = bench_clock_from_env();
    if (cpu_clock < 0) {
        fprintf(stderr, "bench_train: BENCH_CLOCK is 'wall' (default) or 'cpu', not '%s'\n", getenv("BENCH_CLOCK"));
        return 2;
    }
    const double t_main = bench_now();
    kc_set_num_threads(threads);

    int rc = 1;
    kc_status s;
    kc_model *m = NULL;
    kc_dataset *train = NULL, *test = NULL;
    kc_history *hist = NULL;
    float *x = NULL;  /* (n_test, 28, 28, 1); B: the synthetic images (n, 32, 32, 3) */
    float *y = NULL;  /* (n_test, 10) */
    float *bx = NULL; /* B's synthetic images */
    bench_timer t = {0};
    double infer_ips = 0, infer_s = 0, *batch_s = NULL; /* seconds of each timed inference batch */
    int64_t n_batch = 0;

    if (is_b) {
        if (!(m = bench_workload_b())) { rc = fail("workload B model", KC_STATUS_OUT_OF_MEMORY); goto done; }
        s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.01, .momentum = 0.9),
                                             .loss = "sparse_categorical_crossentropy"});
    } else if ((s = kc_default_cnn(28, 28, 1, 10, &m)) == KC_STATUS_OK) {
        s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                             .loss = "sparse_categorical_crossentropy"});
    }
    if (s != KC_STATUS_OK) { rc = fail("building and compiling the model", s); goto done; }
    const int profile = bench_env_int("BENCH_PROFILE", 0) == 1;
    if (profile && ((s = kc_model_set_profiling(m, 1)) || (s = kc_model_trace_steps(m, 1, 1 << 30)))) {
        rc = fail("profiling", s);
        goto done;
    }
    if (is_b) {
        const int64_t n_b = (int64_t)(warmup + steps) * batch > B_INFER ? (int64_t)(warmup + steps) * batch : B_INFER;
        if ((s = open_synthetic(n_b, &bx, &train)) != KC_STATUS_OK) { rc = fail("synthetic data", s); goto done; }
    } else {
        if ((s = kc_dataset_open(train_spec, &train)) != KC_STATUS_OK) { rc = fail(train_spec, s); goto done; }
        if ((s = kc_dataset_open(test_spec, &test)) != KC_STATUS_OK) { rc = fail(test_spec, s); goto done; }
    }

    int64_t per_pass = kc_dataset_size(train) / batch;
    if (window > 0 ? per_pass < 1 : warmup + steps > per_pass) {
        fprintf(stderr, "bench_train: BENCH_WARMUP + BENCH_STEPS = %d is more than the %lld full batches "
                        "of %s; lower them\n", warmup + steps, (long long)per_pass, train_spec);
        rc = 2;
        goto done;
    }

    /* ---- training */
    t.window = window;
    if (bench_fit_timed("bench_train", m, train, batch, warmup, steps, &t, &hist)) goto done;
    double train_ips = bench_timer_images_per_second(&t, batch, cpu_clock);
    if (profile) { /* per-layer milliseconds per step (wall clock) on stderr */
        const int64_t total = warmup + steps;
        for (int i = 0;; i++) {
            kc_layer_timing lt;
            if (kc_model_layer_timing(m, i, &lt) != KC_STATUS_OK) break;
            fprintf(stderr, "bench_train: %-24s %-20s forward %7.2f ms backward %7.2f ms\n", lt.name, lt.class_name,
                    1e3 * lt.forward_seconds / (double)total, 1e3 * lt.backward_seconds / (double)total);
        }
    }
    const long huge_kib = anon_huge_kib(); /* while the training plan is still held */
    if (getenv("BENCH_STEP_LOG") && *getenv("BENCH_STEP_LOG")) {
        FILE *lf = fopen(getenv("BENCH_STEP_LOG"), "a");
        if (!lf) { fprintf(stderr, "bench_train: cannot open BENCH_STEP_LOG %s\n", getenv("BENCH_STEP_LOG")); goto done; }
        fprintf(lf, "kerac");
        for (int64_t i = 0; i < t.timed; i++) fprintf(lf, " %.6f", t.step_t[i]);
        fprintf(lf, "\n");
        fclose(lf);
    }
    char layer_ms[2048] = ""; /* read now: inference adds forward calls */
    if (profile) print_layer_ms(m, warmup + steps, layer_ms, sizeof layer_ms);

    /* ---- inference */
    int64_t n = is_b ? B_INFER : kc_dataset_size(test);
    if (reps == 0) goto report;
    if (is_b) {
        x = bx, bx = NULL;
        y = malloc((size_t)(n * 10) * sizeof *y);
        if (!y) { fprintf(stderr, "bench_train: out of memory\n"); goto done; }
        goto predict;
    }
    kc_shape in_shape = kc_dataset_shape(test);
    int64_t per_example = 1;
    for (int i = 0; i < in_shape.rank; i++) per_example *= in_shape.dim[i];
    if (per_example != 28 * 28 * 1) {
        fprintf(stderr, "bench_train: %s has %lld values per image, expected 784\n", test_spec,
                (long long)per_example);
        goto done;
    }
    x = malloc((size_t)(n * per_example) * sizeof *x);
    y = malloc((size_t)(n * 10) * sizeof *y);
    if (!x || !y) { fprintf(stderr, "bench_train: out of memory for %lld test images\n", (long long)n); goto done; }
    if ((s = kc_dataset_read(test, 0, n, x, NULL)) != KC_STATUS_OK) { rc = fail("kc_dataset_read", s); goto done; }

predict:;
    double times[MAX_REPS];
    for (int r = 0; r <= reps; r++) { /* pass 0 is a warm-up */
        double t0 = bench_now();
        if ((s = kc_predict(m, x, n, INFER_BATCH, y)) != KC_STATUS_OK) { rc = fail("kc_predict", s); goto done; }
        double dt = bench_now() - t0;
        if (r > 0) times[r - 1] = dt;
        if (infer_window > 0) break; /* the warm-up pass only */
    }
    if (infer_window > 0) {
        if ((s = infer_for(m, x, n, is_b ? 32 * 32 * 3 : 28 * 28, infer_window, y, &infer_ips, &infer_s, &batch_s, &n_batch)) != KC_STATUS_OK) {
            rc = fail("kc_predict", s);
            goto done;
        }
    } else {
        for (int r = 0; r < reps; r++) infer_s += times[r];
        infer_ips = (double)n / bench_median(times, reps);
        batch_s = malloc(sizeof *batch_s * (size_t)reps); /* a pass's seconds per batch of 1000 */
        for (int r = 0; batch_s && r < reps; r++) batch_s[r] = times[r] * INFER_BATCH / (double)n;
        n_batch = batch_s ? reps : 0;
    }

    /* sanity: the softmax rows sum to 1 */
    double row = 0;
    for (int j = 0; j < 10; j++) row += y[j];
    if (row < 0.99 || row > 1.01) {
        fprintf(stderr, "bench_train: kc_predict output row 0 sums to %g, expected 1\n", row);
        goto done;
    }

report:;
    const char *isa;
    kc_backend *probe = bench_cpu_probe(&isa);
    const double sgemm = probe && probe_sgemm ? sgemm_gflops(probe, 1024) : 0;
    const double flop = is_b ? BENCH_B_TRAIN_FLOP : BENCH_A_TRAIN_FLOP;
    char step_rate[160], batch_rate[160];
    bench_rate_json(step_rate, sizeof step_rate, "train_step_rate", cpu_clock ? t.step_c : t.step_t, t.timed, batch);
    bench_rate_json(batch_rate, sizeof batch_rate, "infer_batch_rate", batch_s, n_batch, INFER_BATCH);
    printf("{\"impl\": \"kerac\", \"workload\": \"%s\", \"train_images_per_second\": %.1f, "
           "\"infer_images_per_second\": %.1f, "
           "\"threads\": %d, \"layout\": \"nhwc\", \"warmup_steps\": %d, \"steps\": %d, \"batch_size\": %d, "
           "\"infer_batch_size\": %d, \"infer_images\": %lld, \"mean_loss\": %.4f, \"version\": \"%s\", "
           "\"start_to_first_step_s\": %.3f, \"cpu_isa\": \"%s\", \"openblas_corename\": \"%s\", \"openblas_threads\": %d, \"profile\": %d, "
           "\"train_flop_per_image\": %.4g, \"sgemm_gflops\": %.1f, \"sgemm_fraction\": %.3f, \"clock\": \"%s\", "
           "\"anon_huge_kib\": %ld, \"train_seconds\": %.3f, \"infer_seconds\": %.3f, \"window_s\": %g, "
           "\"infer_window_s\": %g%s%s%s}\n",
           is_b ? "B" : "A", train_ips, infer_ips, kc_get_num_threads(), warmup, (int)t.timed, batch, INFER_BATCH,
           (long long)n, t.loss, kc_version(), (cpu_clock ? t.c_first : t.t_first) - t_main, isa, bench_openblas_corename(),
           openblas_get_num_threads ? openblas_get_num_threads() : -1, profile, flop, sgemm,
           sgemm > 0 ? train_ips * flop * 1e-9 / sgemm : 0.0, cpu_clock ? "cpu" : "wall", huge_kib,
           cpu_clock ? t.c_end - t.c_start : t.t_end - t.t_start, infer_s, window, infer_window,
           step_rate, batch_rate, layer_ms);
    kc_backend_destroy(probe);
    fflush(stdout);
    rc = 0;

done:
    bench_timer_free(&t);
    free(batch_s);
    free(x);
    free(y);
    free(bx);
    kc_history_destroy(hist);
    kc_dataset_destroy(test);
    kc_dataset_destroy(train);
    kc_model_destroy(m);
    return rc;
}
