/* bench_finetune.c — kerac side of the fine-tuning benchmark (bench/finetune/run.sh).
 *
 *   bench_finetune MODEL.keras
 *
 * Loads a Keras model (MobileNetV2 or ResNet50 written by make_models.py), compiles it with
 * Adam (learning rate 1e-4, epsilon 1e-7) and sparse categorical crossentropy, and trains
 * it on random images in [-1, 1] with random labels (0..9), batch BENCH_BATCH (32), for
 * BENCH_WARMUP (3) + BENCH_STEPS (10) steps in one kc_fit; a callback stamps the clock at
 * the end of step WARMUP-1 and of the last step. BENCH_SECONDS > 0: timed steps until that
 * many wall-clock seconds have passed instead (bench/run.sh's windows). Public API only.
 *
 * Prints one JSON line on stdout:
 *   {"impl": "kerac", "model": ..., "train_images_per_second": ..., "cpu_seconds_per_step": ...}
 * cpu_seconds_per_step is the process's CPU time (all threads) over the timed steps divided
 * by the steps: the work itself, which a loaded machine does not inflate as much as the wall
 * clock.
 *
 * BENCH_PROFILE=1: every layer of the timed steps timed (kc_model_set_profiling, switched on
 * after the warm-up, so first-touch page faults stay out); the per-layer table (forward and
 * backward ms per step) and the sums per layer class go to stderr.
 * BENCH_THREADS (2) goes to kc_set_num_threads. Errors: stderr, exit status 1. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "../bench_common.h"
#include "../bench_util.h"

enum { CLASSES = 10, MAX_CLASSES_SEEN = 64 };

static int fail(const char *what, kc_status s) { return bench_fail("bench_finetune", what, s); }

/* Per-layer forward/backward ms per step, and the sums per layer class, to stderr. */
static void print_profile(const kc_model *m, int64_t calls) {
    const char *cls[MAX_CLASSES_SEEN];
    double fw[MAX_CLASSES_SEEN] = {0}, bw[MAX_CLASSES_SEEN] = {0}, total = 0;
    int ncls = 0;
    fprintf(stderr, "%-32s %-22s %9s %9s\n", "layer", "class", "fwd ms", "bwd ms");
    for (int i = 0; i < kc_model_num_layers(m); i++) {
        kc_layer_timing lt;
        if (kc_model_layer_timing(m, i, &lt) != KC_STATUS_OK) continue;
        double f = 1e3 * lt.forward_seconds / (double)calls, b = 1e3 * lt.backward_seconds / (double)calls;
        fprintf(stderr, "%-32s %-22s %9.3f %9.3f\n", lt.name, lt.class_name, f, b);
        int k = 0;
        while (k < ncls && strcmp(cls[k], lt.class_name) != 0) k++;
        if (k == ncls && ncls < MAX_CLASSES_SEEN) cls[ncls++] = lt.class_name;
        if (k < ncls) fw[k] += f, bw[k] += b;
        total += f + b;
    }
    double loss_s = 0, opt_s = 0;
    kc_model_step_overhead(m, &loss_s, &opt_s);
    fprintf(stderr, "\nper class (ms per step)           fwd       bwd     share\n");
    for (int k = 0; k < ncls; k++)
        fprintf(stderr, "%-30s %9.2f %9.2f %8.1f%%\n", cls[k], fw[k], bw[k], 100.0 * (fw[k] + bw[k]) / total);
    fprintf(stderr, "layers %.2f ms, loss %.2f ms, optimizer %.2f ms per step\n", total,
            1e3 * loss_s / (double)calls, 1e3 * opt_s / (double)calls);
}

int main(int argc, char **argv) {
    bench_args a = {.threads = 2, .batch = 32, .warmup = 3, .steps = 10, .profile = 0, .cpu_clock = BENCH_ARG_NONE};
    if (bench_args_parse(&a, "bench_finetune MODEL.keras", argc, argv, 1, 1)) return 2;
    const double window = bench_env_seconds("BENCH_SECONDS", 0);
    if (window < 0) {
        fprintf(stderr, "bench_finetune: BENCH_SECONDS must be a number of seconds >= 0\n");
        return 2;
    }
    const int warmup = a.warmup, batch = a.batch, profile = a.profile;
    int rc = 1;
    kc_status s;
    kc_model *m = NULL;
    kc_dataset *data = NULL;
    kc_history *hist = NULL;
    float *x = NULL;
    int32_t *y = NULL;
    int steps = a.steps;

    if ((s = kc_model_load(argv[1], &m)) != KC_STATUS_OK) { rc = fail(argv[1], s); goto done; }
    s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-4, .epsilon = 1e-7),
                                         .loss = "sparse_categorical_crossentropy"});
    if (s != KC_STATUS_OK) { rc = fail("kc_compile", s); goto done; }

    kc_shape in;
    if ((s = kc_model_input_shape(m, &in)) != KC_STATUS_OK) { rc = fail("kc_model_input_shape", s); goto done; }
    int64_t per = 1;
    for (int i = 0; i < in.rank; i++) per *= in.dim[i];
    const int64_t n = (int64_t)batch * (warmup + steps);
    x = malloc((size_t)(n * per) * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    if (!x || !y) { fprintf(stderr, "bench_finetune: out of memory for %lld images\n", (long long)n); goto done; }
    uint64_t r = 88172645463325252ull; /* xorshift: fixed data */
    for (int64_t i = 0; i < n * per; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        x[i] = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
    }
    for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(i * 7 % CLASSES);
    if ((s = kc_dataset_from_memory(x, y, n, in, CLASSES, &data)) != KC_STATUS_OK) { rc = fail("dataset", s); goto done; }

    bench_timer t = {.profile = profile, .window = window};
    if (bench_fit_timed("bench_finetune", m, data, batch, warmup, steps, &t, &hist)) goto done;
    steps = (int)t.timed;
    bench_timer_free(&t);
    if (profile) print_profile(m, steps);

    const char *isa;
    kc_backend *probe = bench_cpu_probe(&isa);
    printf("{\"impl\": \"kerac\", \"model\": \"%s\", \"layout\": \"nhwc\", \"train_images_per_second\": %.2f, "
           "\"cpu_seconds_per_step\": %.4f, \"threads\": %d, \"batch_size\": %d, \"warmup_steps\": %d, \"steps\": %d, "
           "\"mean_loss\": %.4f, \"cpu_isa\": \"%s\", \"openblas_corename\": \"%s\", \"profile\": %d, \"version\": \"%s\"}\n",
           argv[1], bench_timer_images_per_second(&t, batch, 0), (t.c_end - t.c_start) / steps,
           kc_get_num_threads(), batch, warmup, steps, t.loss, isa, bench_openblas_corename(), profile, kc_version());
    kc_backend_destroy(probe);
    fflush(stdout);
    rc = 0;
done:
    free(x);
    free(y);
    kc_history_destroy(hist);
    kc_dataset_destroy(data);
    kc_model_destroy(m);
    return rc;
}
