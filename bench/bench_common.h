/* bench_common.h — what the training benchmarks (bench_train.c, finetune/bench_finetune.c)
 * share: kc_fit timed by a callback over the steps after the warm-up, and the probe of the
 * CPU kernel set kerac runs. Public API (kerac.h) and the backend ABI (kerac_backend.h).
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
    int64_t last;    /* index of the last step */
    int64_t seen;    /* steps completed */
    double t_start;  /* end of step warmup-1 (train begin when warmup == 0) */
    double t_end;    /* end of the last step */
    double t_first;  /* end of the first step */
    double c_start;  /* the same three moments in CPU time */
    double c_end;
    double c_first;
    double loss;     /* the running mean loss kc_fit reports after the last step */
} bench_timer;

/* kc_fit over data for warmup + steps steps in one epoch of batch-sized batches, with a
 * callback that stamps both clocks at the end of step warmup-1 and of the last step.
 * Returns 0, or 1 after printing to stderr (prefixed "PROG: ") why: kc_fit failed, or it
 * ran another number of steps than asked. */
int bench_fit_timed(const char *prog, kc_model *m, kc_dataset *data, int batch, int warmup, int steps,
                    bench_timer *t, kc_history **hist);

/* Training images per second of the timed steps: of wall-clock time, or with cpu_clock of
 * the process's CPU time */
double bench_timer_images_per_second(const bench_timer *t, int batch, int cpu_clock);

/* A default CPU backend (kc_device_opts_default) to ask about the machine; *isa becomes its
 * kernel set ("avx2", "avx512", ...; "?" when no backend could be made). The caller
 * destroys the backend (NULL when none). */
kc_backend *bench_cpu_probe(const char **isa);

/* Prints "PROG: WHAT failed (STATUS): kc_last_error()" to stderr; returns 1 */
int bench_fail(const char *prog, const char *what, kc_status s);

#endif
