/* bench_util.h — the small helpers the CPU benchmark programs share: the clock they time
 * with (BENCH_CLOCK=cpu: the process's CPU time, all its threads, the measure that survives
 * a loaded machine with one thread; the wall clock otherwise), medians, and integer and
 * string settings from the environment, and the OpenBLAS kernel set. Header-only: each program includes it once. */
#ifndef KERAC_BENCH_UTIL_H
#define KERAC_BENCH_UTIL_H

#include <stdlib.h>
#include <string.h>
#include <time.h>

static clockid_t bench_clock_id = CLOCK_MONOTONIC;

/* Sets the clock from BENCH_CLOCK ("wall", the default, or "cpu"); 1 when it is the CPU
 * clock, -1 for any other value (the caller reports it). */
static inline int bench_clock_from_env(void) {
    const char *v = getenv("BENCH_CLOCK");
    if (!v || !*v || !strcmp(v, "wall")) return 0;
    if (strcmp(v, "cpu") != 0) return -1;
    bench_clock_id = CLOCK_PROCESS_CPUTIME_ID;
    return 1;
}

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(bench_clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The wall clock (CLOCK_MONOTONIC) whatever BENCH_CLOCK says: what windows are measured in. */
static inline double bench_now_wall(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* An integer setting: fallback when unset or empty, -1000000 when it does not parse or is
 * out of +-1e6 (the caller rejects it). */
static inline int bench_env_int(const char *name, int fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (*end != '\0' || x < -1000000 || x > 1000000) return -1000000;
    return (int)x;
}

/* A number of seconds: fallback when unset or empty, -1 when it does not parse or is
 * outside [0, 1e6] (the caller rejects it). */
static inline double bench_env_seconds(const char *name, double fallback) {
    const char *v = getenv(name);
    if (!v || !*v) return fallback;
    char *end = NULL;
    double x = strtod(v, &end);
    return *end != '\0' || !(x >= 0 && x <= 1e6) ? -1 : x;
}

/* OpenBLAS's kernel set ("Haswell", "SkylakeX", ...; OPENBLAS_CORETYPE forces one): a weak
 * reference, so that a program linked with another BLAS still builds and says "?". */
extern char *openblas_get_corename(void) __attribute__((weak));
static inline const char *bench_openblas_corename(void) {
    return openblas_get_corename ? openblas_get_corename() : "?";
}

static inline const char *bench_env_str(const char *name, const char *fallback) {
    const char *v = getenv(name);
    return v && *v ? v : fallback;
}

#endif
