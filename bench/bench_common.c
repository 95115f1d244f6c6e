/* bench_common.c — the timed kc_fit, the CPU probe and the settings the benchmarks share
 * (bench_common.h). */
#include "bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench_util.h"

static double seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static kc_callback_action on_train_begin(kc_model *m, void *user) {
    bench_timer *t = user;
    if (t->warmup == 0) {
        t->t_start = t->t_end = seconds(CLOCK_MONOTONIC);
        t->c_start = t->c_end = seconds(CLOCK_PROCESS_CPUTIME_ID);
    }
    if (t->warmup == 0 && t->profile && kc_model_set_profiling(m, 1) != KC_STATUS_OK) return KC_STOP_TRAINING;
    return KC_CONTINUE;
}

/* Keeps one timed step's seconds on both clocks; 0 when out of memory. */
static int keep_step(bench_timer *t, double dt, double dc) {
    if (t->timed >= t->step_cap) {
        const int64_t cap = t->step_cap ? 2 * t->step_cap : 1024;
        double *a = realloc(t->step_t, (size_t)cap * sizeof *a);
        if (a) t->step_t = a;
        double *b = a ? realloc(t->step_c, (size_t)cap * sizeof *b) : NULL;
        if (b) t->step_c = b;
        if (!a || !b) return 0;
        t->step_cap = cap;
    }
    t->step_t[t->timed] = dt, t->step_c[t->timed] = dc;
    t->timed++;
    return 1;
}

static kc_callback_action on_batch_end(kc_model *m, const kc_batch_logs *logs, void *user) {
    bench_timer *t = user;
    const double now = seconds(CLOCK_MONOTONIC), cpu = seconds(CLOCK_PROCESS_CPUTIME_ID);
    const int64_t step = t->seen++; /* over all epochs */
    if (step == 0) t->t_first = now, t->c_first = cpu;
    if (step == t->warmup - 1) {
        if (t->profile && kc_model_set_profiling(m, 1) != KC_STATUS_OK) return KC_STOP_TRAINING;
        t->t_start = seconds(CLOCK_MONOTONIC), t->c_start = seconds(CLOCK_PROCESS_CPUTIME_ID);
        t->t_end = t->t_start, t->c_end = t->c_start;
        return KC_CONTINUE;
    }
    if (step < t->warmup) return KC_CONTINUE;
    if (!keep_step(t, now - t->t_end, cpu - t->c_end)) return KC_STOP_TRAINING;
    t->t_end = now, t->c_end = cpu, t->loss = logs->loss;
    const int done = t->window > 0 ? now - t->t_start >= t->window : step == t->last;
    if (done) t->last = step;
    return done ? KC_STOP_TRAINING : KC_CONTINUE;
}

int bench_fail(const char *prog, const char *what, kc_status s) {
    fprintf(stderr, "%s: %s failed (%s): %s\n", prog, what, kc_status_name(s), kc_last_error());
    return 1;
}

int bench_fit_timed(const char *prog, kc_model *m, kc_dataset *data, int batch, int warmup, int steps,
                    bench_timer *t, kc_history **hist) {
    const int window = t->window > 0;
    *t = (bench_timer){.warmup = warmup, .last = window ? INT64_MAX : warmup + steps - 1, .t_start = -1, .t_end = -1,
                       .profile = t->profile, .window = t->window};
    const int64_t per_pass = kc_dataset_size(data) / batch;
    kc_callback cb = {.user = t, .on_train_begin = on_train_begin, .on_batch_end = on_batch_end};
    kc_callback *cbs[] = {&cb};
    /* a window: epochs of every full batch until the callback stops the fit */
    kc_status s = kc_fit(m, data, &(kc_fit_opts){.epochs = window ? 1 << 20 : 1, .batch_size = batch,
                                                 .steps_per_epoch = window ? per_pass : warmup + steps,
                                                 .prefetch = bench_env_int("BENCH_PREFETCH", 0),
                                                 .callbacks = cbs, .num_callbacks = 1}, hist);
    if (s != KC_STATUS_OK) return bench_fail(prog, "kc_fit", s);
    if (t->seen != t->last + 1 || t->timed < 1 || t->t_end <= t->t_start) {
        fprintf(stderr, "%s: kc_fit ran %lld steps, expected %s %d (callback timing incomplete, or out of memory)\n",
                prog, (long long)t->seen, window ? "more than" : "", window ? warmup : warmup + steps);
        return 1;
    }
    return 0;
}

void bench_timer_free(bench_timer *t) {
    free(t->step_t), free(t->step_c);
    t->step_t = t->step_c = NULL;
    t->step_cap = 0;
}

double bench_timer_images_per_second(const bench_timer *t, int batch, int cpu_clock) {
    const double dt = cpu_clock ? t->c_end - t->c_start : t->t_end - t->t_start;
    return (double)t->timed * batch / dt;
}

void bench_rate_percentiles(const double *seconds, int64_t n, double images, double out[3]) {
    out[0] = out[1] = out[2] = 0;
    double *r = n > 0 ? malloc((size_t)n * sizeof *r) : NULL;
    if (!r) return;
    for (int64_t i = 0; i < n; i++) r[i] = seconds[i] > 0 ? images / seconds[i] : 0;
    qsort(r, (size_t)n, sizeof *r, bench_cmp_double);
    const double q[3] = {0.1, 0.5, 0.9};
    for (int k = 0; k < 3; k++) {
        int64_t at = (int64_t)(q[k] * (double)n + 0.5) - 1; /* nearest rank */
        out[k] = r[at < 0 ? 0 : at >= n ? n - 1 : at];
    }
    free(r);
}

void bench_rate_json(char *buf, size_t size, const char *key, const double *seconds, int64_t n, double images) {
    double p[3];
    bench_rate_percentiles(seconds, n, images, p);
    snprintf(buf, size, ", \"%s\": {\"p10\": %.1f, \"median\": %.1f, \"p90\": %.1f, \"n\": %lld}", key, p[0], p[1],
             p[2], (long long)n);
}

kc_backend *bench_cpu_probe(const char **isa) {
    kc_backend *probe = NULL;
    kc_device_opts dopts;
    *isa = "?";
    if (kc_device_opts_default(&dopts) == KC_STATUS_OK && kc_backend_cpu_create_ex(&dopts, &probe) == KC_STATUS_OK)
        *isa = kc_backend_cpu_isa(probe);
    return probe;
}

/* One setting: BENCH_ARG_NONE stays (not taken); else the variable over the default, and
 * 1 when it is below lo. */
static int read_setting(const char *name, int *v, int lo) {
    if (*v == BENCH_ARG_NONE) return 0;
    *v = bench_env_int(name, *v);
    return *v < lo;
}

int bench_args_parse(bench_args *a, const char *usage, int argc, char **argv, int min_pos, int max_pos) {
    int bad = read_setting("BENCH_THREADS", &a->threads, 1);
    bad |= read_setting("BENCH_BATCH", &a->batch, 1);
    bad |= read_setting("BENCH_WARMUP", &a->warmup, 0);
    bad |= read_setting("BENCH_STEPS", &a->steps, 1);
    if (a->profile != BENCH_ARG_NONE) a->profile = bench_env_int("BENCH_PROFILE", a->profile) == 1;
    if (a->cpu_clock != BENCH_ARG_NONE && (a->cpu_clock = bench_clock_from_env()) < 0) {
        fprintf(stderr, "usage: %s\nBENCH_CLOCK must be wall or cpu\n", usage);
        return 2;
    }
    if (bad) {
        fprintf(stderr, "usage: %s\nneed BENCH_THREADS, BENCH_BATCH, BENCH_STEPS >= 1 and BENCH_WARMUP >= 0 "
                        "(those it takes)\n", usage);
        return 2;
    }
    a->npos = argc > 1 ? argc - 1 : 0;
    a->pos = argv + 1;
    if (a->npos < min_pos || a->npos > max_pos) {
        fprintf(stderr, "usage: %s\n", usage);
        return 2;
    }
    if (a->threads != BENCH_ARG_NONE) kc_set_num_threads(a->threads);
    return 0;
}

int bench_arg_int(const bench_args *a, int i, int fallback) { return i < a->npos ? atoi(a->pos[i]) : fallback; }
