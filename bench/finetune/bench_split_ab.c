/* bench_split_ab.c — one training run of a fine-tuning model (MobileNetV2 or ResNet50 from
 * make_models.py) in which the CPU backend's split of tall, skinny GEMMs across the threads
 * (kc__cpu_sgemm, cpu_gemm_conv.c) is switched on and off from one step to the next
 * (kc_backend.cpu_gemm_split of the model's backend, read at each GEMM call), in the order
 * A B B A A B B A ... so that a
 * slow patch of the machine falls on both. Comparing the two in one process, step by step,
 * keeps the ratio meaningful where separate runs differ by 10 % from one to the next.
 *
 *   bench_split_ab MODEL.keras
 *
 * BENCH_THREADS (2), BENCH_BATCH (32), BENCH_WARMUP (2 steps, not counted), BENCH_PAIRS (8:
 * steps of each variant). Prints one JSON line: the median wall-clock and CPU seconds per
 * step of each variant and their ratios (off / on: above 1 when the split is faster).
 * Public API only (kerac.h, and kerac_backend.h's kc_model_backend for the switch). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "../bench_util.h"

enum { CLASSES = 10, MAX_STEPS = 512 };

typedef struct ab_state {
    int warmup, total;
    double wall[MAX_STEPS], cpu[MAX_STEPS];
    int on[MAX_STEPS]; /* the split was on in this step */
    double w0, c0;
} ab_state;

static double now_of(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* step s (counted from the first timed one) runs the split when s % 4 is 0 or 3: A B B A */
static int split_on(int s) { return s % 4 == 0 || s % 4 == 3; }

static void set_for_step(kc_model *m, const ab_state *st, int step) {
    const int s = step - st->warmup;
    kc_model_backend(m)->cpu_gemm_split = s < 0 || split_on(s);
}

static kc_callback_action ab_begin(kc_model *m, void *user) {
    set_for_step(m, user, 0);
    return KC_CONTINUE;
}

static kc_callback_action ab_batch_end(kc_model *m, const kc_batch_logs *logs, void *user) {
    ab_state *st = user;
    const double w = now_of(CLOCK_MONOTONIC), c = now_of(CLOCK_PROCESS_CPUTIME_ID);
    const int s = (int)logs->step - st->warmup;
    if (s >= 0 && s < MAX_STEPS) {
        st->wall[s] = w - st->w0, st->cpu[s] = c - st->c0;
        st->on[s] = split_on(s);
    }
    st->w0 = w, st->c0 = c;
    set_for_step(m, st, (int)logs->step + 1);
    return KC_CONTINUE;
}

/* median of the steps with on == want */
static double median_of(const ab_state *st, const double *v, int want, int steps) {
    double buf[MAX_STEPS];
    int n = 0;
    for (int s = 0; s < steps; s++)
        if (st->on[s] == want) buf[n++] = v[s];
    return bench_median(buf, n);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: bench_split_ab MODEL.keras\n");
        return 2;
    }
    const int threads = bench_env_int("BENCH_THREADS", 2), batch = bench_env_int("BENCH_BATCH", 32);
    const int warmup = bench_env_int("BENCH_WARMUP", 2), pairs = bench_env_int("BENCH_PAIRS", 8);
    if (threads < 1 || batch < 1 || warmup < 0 || pairs < 1 || 2 * pairs > MAX_STEPS) {
        fprintf(stderr, "bench_split_ab: need BENCH_THREADS, BENCH_BATCH >= 1, BENCH_WARMUP >= 0, 1 <= BENCH_PAIRS <= %d\n",
                MAX_STEPS / 2);
        return 2;
    }
    kc_set_num_threads(threads);
    kc_model *m = NULL;
    kc_dataset *data = NULL;
    kc_history *hist = NULL;
    float *x = NULL;
    int32_t *y = NULL;
    static ab_state st;
    int rc = 1;
    kc_status s = kc_model_load(argv[1], &m);
    if (s == KC_STATUS_OK)
        s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-4, .epsilon = 1e-7),
                                             .loss = "sparse_categorical_crossentropy"});
    kc_shape in = {0};
    if (s == KC_STATUS_OK) s = kc_model_input_shape(m, &in);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_split_ab: %s: %s\n", argv[1], kc_last_error());
        goto done;
    }
    int64_t per = 1;
    for (int i = 0; i < in.rank; i++) per *= in.dim[i];
    const int steps = 2 * pairs;
    const int64_t n = (int64_t)batch * (warmup + steps);
    x = malloc((size_t)(n * per) * sizeof *x);
    y = malloc((size_t)n * sizeof *y);
    if (!x || !y) goto done;
    uint64_t r = 0x9e3779b97f4a7c15ull; /* fixed random images in [-1, 1], labels i * 3 mod 10 */
    for (int64_t i = 0; i < n * per; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(r >> 40) / 8388608.0 - 1.0);
    }
    for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(i * 3 % CLASSES);
    if ((s = kc_dataset_from_memory(x, y, n, in, CLASSES, &data)) != KC_STATUS_OK) {
        fprintf(stderr, "bench_split_ab: dataset: %s\n", kc_last_error());
        goto done;
    }
    st.warmup = warmup, st.total = warmup + steps;
    st.w0 = now_of(CLOCK_MONOTONIC), st.c0 = now_of(CLOCK_PROCESS_CPUTIME_ID);
    kc_callback cb = {.user = &st, .on_train_begin = ab_begin, .on_batch_end = ab_batch_end};
    kc_callback *cbs[] = {&cb};
    s = kc_fit(m, data, &(kc_fit_opts){.epochs = 1, .batch_size = batch, .steps_per_epoch = warmup + steps,
                                       .callbacks = cbs, .num_callbacks = 1}, &hist);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_split_ab: kc_fit: %s\n", kc_last_error());
        goto done;
    }
    const double won = median_of(&st, st.wall, 1, steps), woff = median_of(&st, st.wall, 0, steps);
    const double con = median_of(&st, st.cpu, 1, steps), coff = median_of(&st, st.cpu, 0, steps);
    printf("{\"model\": \"%s\", \"threads\": %d, \"batch\": %d, \"steps_each\": %d, \"split_wall_s\": %.4f, "
           "\"openblas_wall_s\": %.4f, \"wall_ratio\": %.3f, \"split_cpu_s\": %.4f, \"openblas_cpu_s\": %.4f, "
           "\"cpu_ratio\": %.3f, \"split_img_s\": %.2f, \"openblas_img_s\": %.2f}\n",
           argv[1], kc_get_num_threads(), batch, pairs, won, woff, woff / won, con, coff, coff / con, batch / won,
           batch / woff);
    rc = 0;
done:
    kc_history_destroy(hist);
    kc_dataset_destroy(data);
    kc_model_destroy(m);
    free(x), free(y);
    return rc;
}
