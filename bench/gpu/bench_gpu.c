/* bench_gpu.c — kerac side of the GPU benchmark (see bench/gpu/README.md). Public API only.
 *
 *   workload A: the default CNN (Keras mnist_convnet: Conv 32 3x3 relu, MaxPool, Conv 64
 *               3x3 relu, MaxPool, Flatten, Dropout 0.5, Dense 10 softmax) on 28x28x1
 *               images, Adam lr 1e-3 (eps 1e-7), batch 128
 *   workload B: a VGG-style CNN on 32x32x3 images (bench/workloads.h, shared with the CPU
 *               benchmark bench_train.c), SGD lr 0.01 momentum 0.9, batch 256
 * Data: synthetic, of the right shape (uniform [0, 1) pixels, uniform labels 0..9, from a
 * fixed seed) held in host memory; kc_fit shuffles it and its loader thread gathers each
 * batch, which is uploaded to the device every step (part of the measured time).
 *
 *   training:  kc_fit for WARMUP + STEPS steps of one epoch; a callback stamps the clock at
 *              the end of step WARMUP-1 and of the last step (kc_fit reads the loss back
 *              after every step, so each stamp follows a device synchronisation).
 *   inference: kc_predict over INFER_N images at batch INFER_BATCH: one warm-up pass, then
 *              the median of REPS passes (host -> device -> host included).
 *   memory:    kc_model_memory_usage: the peak of device memory held by the model's
 *              allocations (weights, gradients, optimizer state, the activation arena,
 *              batch buffers, the backend's scratch), from build to the end. cuDNN's and
 *              cuBLAS's own workspaces and the CUDA context are not in it.
 *
 * fp32 with TF32 off (the CUDA backend's default; KERAC_TF32=1 would allow it).
 * Prints one JSON line on stdout; errors go to stderr (exit 1).
 *
 * Environment: BENCH_WORKLOAD (A or B, default A), BENCH_DEVICE (default cuda),
 * BENCH_WARMUP (10), BENCH_STEPS (A: 200, B: 100), BENCH_INFER_N (A: 10000, B: 10000),
 * BENCH_INFER_BATCH (1000), BENCH_INFER_REPS (5). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "../workloads.h"

enum { MAX_REPS = 50 };

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x > 100000000) return -1;
    return (int)x;
}

typedef struct timer {
    int64_t warmup, last;
    double t_start, t_end, loss;
    int64_t seen;
} timer;

static kc_callback_action on_train_begin(kc_model *m, void *user) {
    (void)m;
    timer *t = user;
    if (t->warmup == 0) t->t_start = now_seconds();
    return KC_CONTINUE;
}

static kc_callback_action on_batch_end(kc_model *m, const kc_batch_logs *logs, void *user) {
    (void)m;
    timer *t = user;
    double now = now_seconds();
    t->seen++;
    if (logs->step == t->warmup - 1) t->t_start = now;
    if (logs->step == t->last) {
        t->t_end = now;
        t->loss = logs->loss;
    }
    return KC_CONTINUE;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int fail(const char *what, kc_status s) {
    fprintf(stderr, "bench_gpu: %s failed (%s): %s\n", what, kc_status_name(s), kc_last_error());
    return 1;
}

int main(void) {
    const char *wl = getenv("BENCH_WORKLOAD");
    const int is_b = wl && (wl[0] == 'B' || wl[0] == 'b');
    const char *device = getenv("BENCH_DEVICE") && *getenv("BENCH_DEVICE") ? getenv("BENCH_DEVICE") : "cuda";
    const int batch = is_b ? 256 : 128;
    const int h = is_b ? 32 : 28, w = h, c = is_b ? 3 : 1;
    const int warmup = env_int("BENCH_WARMUP", 10);
    const int steps = env_int("BENCH_STEPS", is_b ? 100 : 200);
    const int infer_n = env_int("BENCH_INFER_N", 10000);
    const int infer_batch = env_int("BENCH_INFER_BATCH", 1000);
    const int reps = env_int("BENCH_INFER_REPS", 5);
    if (warmup < 0 || steps < 1 || infer_n < 1 || infer_batch < 1 || reps < 1 || reps > MAX_REPS) {
        fprintf(stderr, "bench_gpu: BENCH_WARMUP >= 0, BENCH_STEPS >= 1, BENCH_INFER_N >= 1, BENCH_INFER_BATCH >= 1 "
                        "and 1 <= BENCH_INFER_REPS <= %d are needed (integers)\n", MAX_REPS);
        return 2;
    }
    const int64_t per_image = (int64_t)h * w * c;
    const int64_t n_train = (int64_t)(warmup + steps) * batch; /* one epoch covers every step */

    int rc = 1;
    kc_status s;
    kc_model *m = NULL;
    kc_dataset *train = NULL;
    kc_history *hist = NULL;
    float *x = malloc((size_t)(n_train * per_image) * sizeof(float)); /* (n_train, h, w, c) */
    int32_t *y = malloc((size_t)n_train * sizeof(int32_t));           /* (n_train) */
    float *yi = malloc((size_t)infer_n * 10 * sizeof(float)); /* (infer_n, 10) */
    if (infer_n > n_train) {
        fprintf(stderr, "bench_gpu: BENCH_INFER_N = %d is more than the %lld synthetic images\n", infer_n,
                (long long)n_train);
        free(x), free(y), free(yi);
        return 2;
    }
    if (!x || !y || !yi) {
        fprintf(stderr, "bench_gpu: out of host memory for %lld training images\n", (long long)n_train);
        goto done;
    }
    bench_synthetic(x, y, n_train, per_image);
    const float *xi = x; /* inference: the first infer_n training images */

    if (is_b) {
        m = bench_workload_b();
        if (!m) { rc = fail("workload B model", KC_STATUS_OUT_OF_MEMORY); goto done; }
    } else if ((s = kc_default_cnn(28, 28, 1, 10, &m)) != KC_STATUS_OK) {
        rc = fail("kc_default_cnn", s);
        goto done;
    }
    if ((s = kc_model_set_device(m, device)) != KC_STATUS_OK) { rc = fail("kc_model_set_device", s); goto done; }
    kc_compile_opts co = {.loss = "sparse_categorical_crossentropy"};
    co.optimizer = is_b ? KC_SGD(.learning_rate = 0.01, .momentum = 0.9) : KC_ADAM(.learning_rate = 1e-3);
    if ((s = kc_compile(m, &co)) != KC_STATUS_OK) { rc = fail("kc_compile", s); goto done; }
    if ((s = kc_model_build(m)) != KC_STATUS_OK) { rc = fail("building the model on the device", s); goto done; }
    if ((s = kc_dataset_from_memory(x, y, n_train, (kc_shape){3, {h, w, c}}, 10, &train)) != KC_STATUS_OK) {
        rc = fail("kc_dataset_from_memory", s);
        goto done;
    }

    timer t = {.warmup = warmup, .last = warmup + steps - 1, .t_start = -1, .t_end = -1};
    kc_callback cb = {.name = "bench", .user = &t, .on_train_begin = on_train_begin, .on_batch_end = on_batch_end};
    kc_callback *cbs[] = {&cb};
    s = kc_fit(m, train, &(kc_fit_opts){.epochs = 1, .batch_size = batch, .steps_per_epoch = warmup + steps,
                                        .callbacks = cbs, .num_callbacks = 1, .oom_recovery = KC_FALSE}, &hist);
    if (s != KC_STATUS_OK) { rc = fail("kc_fit", s); goto done; }
    if (t.seen != warmup + steps || t.t_start < 0 || t.t_end <= t.t_start) {
        fprintf(stderr, "bench_gpu: kc_fit ran %lld steps, expected %d\n", (long long)t.seen, warmup + steps);
        goto done;
    }
    const double train_ips = (double)steps * batch / (t.t_end - t.t_start);

    double times[MAX_REPS];
    for (int rep = 0; rep <= reps; rep++) {
        double t0 = now_seconds();
        if ((s = kc_predict(m, xi, infer_n, infer_batch, yi)) != KC_STATUS_OK) { rc = fail("kc_predict", s); goto done; }
        double dt = now_seconds() - t0;
        if (rep > 0) times[rep - 1] = dt;
    }
    qsort(times, (size_t)reps, sizeof times[0], cmp_double);
    const double median = reps % 2 ? times[reps / 2] : 0.5 * (times[reps / 2 - 1] + times[reps / 2]);
    const double infer_ips = (double)infer_n / median;
    double row = 0;
    for (int j = 0; j < 10; j++) row += yi[j];
    if (row < 0.99 || row > 1.01) {
        fprintf(stderr, "bench_gpu: predict row 0 sums to %g, expected 1\n", row);
        goto done;
    }
    size_t peak = 0;
    kc_model_memory_usage(m, &peak, NULL);

    printf("{\"impl\": \"kerac\", \"workload\": \"%s\", \"device\": \"%s\", \"train_images_per_second\": %.1f, "
           "\"infer_images_per_second\": %.1f, \"peak_memory_bytes\": %zu, \"batch_size\": %d, \"warmup_steps\": %d, "
           "\"steps\": %d, \"infer_images\": %d, \"infer_batch_size\": %d, \"mean_loss\": %.4f, \"layout\": \"nhwc\", "
           "\"tf32\": %s, \"version\": \"%s\"}\n",
           is_b ? "B" : "A", kc_model_device(m), train_ips, infer_ips, peak, batch, warmup, steps, infer_n, infer_batch,
           t.loss, getenv("KERAC_TF32") && strcmp(getenv("KERAC_TF32"), "1") == 0 ? "true" : "false", kc_version());
    fflush(stdout);
    rc = 0;
done:
    free(x);
    free(y);
    free(yi);
    kc_history_destroy(hist);
    kc_dataset_destroy(train);
    kc_model_destroy(m);
    return rc;
}
