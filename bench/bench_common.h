/* bench_common.h — what the benchmarks (bench_train.c, finetune/bench_finetune.c,
 * bench_infer.c) share: kc_fit timed by a callback over the steps after the warm-up, the
 * probe of the CPU kernel set kerac runs, and the parsing of their settings. Public API (kerac.h) and the backend ABI (kerac_backend.h).
 * Compiled with bench_common.c into each of those programs (bench/CMakeLists.txt). */
#ifndef KERAC_BENCH_COMMON_H
#define KERAC_BENCH_COMMON_H

#include <stdint.h>

#include "kerac.h"
#include "kerac_backend.h"

/* What bench_fit_timed measured, in seconds on two clocks: t_* the wall clock
 * (CLOCK_MONOTONIC), c_* the process's CPU time (all its threads). */
typedef struct bench_timer {
    int64_t warmup;  /* steps before the clock starts */
    int64_t last;    /* index of the last step (INT64_MAX in a window: not known ahead) */
    int64_t seen;    /* steps completed */
    int64_t timed;   /* steps completed after the warm-up */
    double t_start;  /* end of step warmup-1 (train begin when warmup == 0) */
    double t_end;    /* end of the last step */
    double t_first;  /* end of the first step */
    double c_start;  /* the same three moments in CPU time */
    double c_end;
    double c_first;
    double loss;     /* the running mean loss kc_fit reports after the last step */
    double *step_t;  /* each timed step's seconds, wall clock and CPU time (timed of them; */
    double *step_c;  /*   bench_timer_free releases them) */
    int64_t step_cap;
    int profile;     /* set by the caller: per-layer profiling switched on at the end of the
                        warm-up, so the layer timings cover the timed steps only */
    double window;   /* set by the caller: > 0 runs timed steps until this many wall-clock
                        seconds have passed since the warm-up's end (the steps argument is
                        then ignored); 0 runs exactly the steps asked */
} bench_timer;

/* kc_fit over data for warmup + steps steps of batch-sized batches, with a callback that
 * stamps both clocks at the end of step warmup-1 and of every later step (and there
 * switches profiling on when t->profile). With t->window > 0 the timed steps go on, over
 * as many epochs as it takes, until t->window wall-clock seconds have passed.
 * Returns 0, or 1 after printing to stderr (prefixed "PROG: ") why: kc_fit failed, or it
 * ran another number of steps than asked. */
int bench_fit_timed(const char *prog, kc_model *m, kc_dataset *data, int batch, int warmup, int steps,
                    bench_timer *t, kc_history **hist);
void bench_timer_free(bench_timer *t);

/* The 10th, 50th and 90th percentiles of images / seconds[i] over n samples (nearest rank;
 * zeros when n is 0): the rate's spread inside one run. */
void bench_rate_percentiles(const double *seconds, int64_t n, double images, double out[3]);

/* ", \"KEY\": {\"p10\": .., \"median\": .., \"p90\": .., \"n\": ..}" into buf: the per-sample
 * rates of bench_rate_percentiles, for the JSON lines. */
void bench_rate_json(char *buf, size_t size, const char *key, const double *seconds, int64_t n, double images);

/* Training images per second of the timed steps: of wall-clock time, or with cpu_clock of
 * the process's CPU time */
double bench_timer_images_per_second(const bench_timer *t, int batch, int cpu_clock);

/* A default CPU backend (kc_device_opts_default) to ask about the machine; *isa becomes its
 * kernel set ("avx2", "avx512", ...; "?" when no backend could be made). The caller
 * destroys the backend (NULL when none). */
kc_backend *bench_cpu_probe(const char **isa);

/* Prints "PROG: WHAT failed (STATUS): kc_last_error()" to stderr; returns 1 */
int bench_fail(const char *prog, const char *what, kc_status s);

/* ---- debt2: the command line and settings bench_infer and bench_finetune share, parsed in
 * one place. The caller fills in the defaults; a field below 0 (BENCH_ARG_NONE) is a setting
 * the program does not take, left unread. bench_args_parse reads BENCH_THREADS, BENCH_BATCH,
 * BENCH_WARMUP, BENCH_STEPS, BENCH_PROFILE (1: on) and BENCH_CLOCK (wall or cpu; bench_util.h's
 * clock is static, each program's own: it calls bench_clock_from_env, valid then), checks them (threads, batch, steps >= 1, warmup >= 0) and the number of
 * positional arguments argv[1..] (min_pos to max_pos), and sets the threads
 * (kc_set_num_threads). Returns 0, or 2 after printing "usage: USAGE" and what was
 * wrong to stderr (the exit status the programs give a usage error). */
#define BENCH_ARG_NONE (-1)
typedef struct bench_args {
    int threads;   /* BENCH_THREADS */
    int batch;     /* BENCH_BATCH */
    int warmup;    /* BENCH_WARMUP: steps before the clock starts */
    int steps;     /* BENCH_STEPS: timed steps */
    int profile;   /* BENCH_PROFILE=1 */
    int cpu_clock; /* BENCH_CLOCK=cpu (0: wall) */
    int npos;      /* positional arguments */
    char **pos;
} bench_args;
int bench_args_parse(bench_args *a, const char *usage, int argc, char **argv, int min_pos, int max_pos);
/* Positional argument i as an integer (atoi, as the programs always read them), fallback
 * when there are not that many. */
int bench_arg_int(const bench_args *a, int i, int fallback);

#endif
