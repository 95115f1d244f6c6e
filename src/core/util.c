/* util.c — allocation, shapes, time, threads and string helpers. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core.h"

void *kc__calloc(size_t n, size_t size, const char *what) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s", n * size, what);
    return p;
}

void *kc__malloc_aligned(size_t bytes, const char *what) {
    void *p = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0) {
        kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory allocating %zu bytes for %s", bytes, what);
        return NULL;
    }
    return p;
}

char *kc__strdup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (!d) {
        kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory copying a string");
        return NULL;
    }
    return memcpy(d, s, n);
}

void kc_free(void *p) { free(p); }

int64_t kc__shape_size(const kc_shape *s) {
    int64_t n = 1;
    for (int i = 0; i < s->rank; i++) n *= s->dim[i];
    return n;
}

bool kc__shape_eq(const kc_shape *a, const kc_shape *b) {
    if (a->rank != b->rank) return false;
    for (int i = 0; i < a->rank; i++)
        if (a->dim[i] != b->dim[i]) return false;
    return true;
}

kc_shape kc__shape_make(int rank, const int *dims) {
    kc_shape s = {0};
    s.rank = rank;
    for (int i = 0; i < rank && i < KC_MAX_RANK; i++) s.dim[i] = dims[i];
    return s;
}

const char *kc__shape_str(const kc_shape *s, bool with_batch, char *buf, size_t n) {
    size_t used = 0;
    used += (size_t)snprintf(buf + used, n - used, "(");
    if (with_batch) used += (size_t)snprintf(buf + used, used < n ? n - used : 0, "None%s", s->rank ? ", " : "");
    for (int i = 0; i < s->rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%d%s", s->dim[i], i + 1 < s->rank ? ", " : "");
    if (used < n) snprintf(buf + used, n - used, "%s)", (!with_batch && s->rank == 1) ? "," : "");
    return buf;
}

double kc__now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The one thread count of every CPU parallel region and of OpenBLAS: kc_set_num_threads's if
 * set, else KERAC_NUM_THREADS's, else OpenMP's default for a region (omp_get_max_threads,
 * which honours OMP_NUM_THREADS) as it was before kerac changed it. */
static _Atomic int g_threads; /* kc_set_num_threads; 0: not set */

/* KERAC_NUM_THREADS, read once (the kernels ask at every call): -1 not read yet, 0 unset or
 * not a positive number */
static _Atomic int g_env_threads = -1;

/* OpenMP's own count, read once before kerac sets it: -1 not read yet */
static _Atomic int g_omp_default = -1;

static int omp_default_threads(void) {
    int n = g_omp_default;
    if (n < 0) {
#ifdef _OPENMP
        if (omp_in_parallel()) return 1; /* asked from inside a region: read it later, outside */
        n = omp_get_max_threads();
#else
        n = 1;
#endif
        g_omp_default = n = n > 0 ? n : 1;
    }
    return n;
}

void kc_set_num_threads(int n) {
    (void)omp_default_threads(); /* before omp_set_num_threads below changes it */
    g_threads = n > 0 ? n : 0;
    kc__threads_sync();
}

int kc__num_threads(void) {
    const int set = g_threads;
    if (set > 0) return set;
    int env_threads = g_env_threads;
    if (env_threads < 0) {
        const char *env = getenv("KERAC_NUM_THREADS");
        g_env_threads = env_threads = env && atoi(env) > 0 ? atoi(env) : 0;
    }
    if (env_threads > 0) return env_threads;
    return omp_default_threads();
}

void kc__threads_sync(void) {
#ifdef _OPENMP
    if (omp_in_parallel()) return;
    const int n = kc__num_threads();
    if (omp_get_max_threads() != n) omp_set_num_threads(n);
#endif
}

int kc_get_num_threads(void) { return kc__num_threads(); }

/* KERAC_CPU_BALANCE, read once: -1 not read yet (every thread reads the same environment) */
static _Atomic int g_balance = -1;

int kc__threads_balance(void) {
    int v = g_balance;
    if (v < 0) {
        const char *e = getenv("KERAC_CPU_BALANCE");
        g_balance = v = !(e && !strcmp(e, "0"));
    }
    return v;
}

bool kc__streq(const char *a, const char *b) {
    if (!a || !b) return a == b;
    return strcmp(a, b) == 0;
}

void kc__snprintf(char *buf, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

kc_status kc_parse_size(const char *text, size_t *out) {
    if (!text || !*text || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory size is empty");
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || errno || !(v >= 0) || !isfinite(v))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory size '%s' is not a number with an optional K/M/G/T suffix",
                        text);
    while (isspace((unsigned char)*end)) end++;
    double mult = 1;
    if (*end) {
        switch (toupper((unsigned char)*end)) {
        case 'B': mult = 1; break;
        case 'K': mult = 1024.0; break;
        case 'M': mult = 1024.0 * 1024; break;
        case 'G': mult = 1024.0 * 1024 * 1024; break;
        case 'T': mult = 1024.0 * 1024 * 1024 * 1024; break;
        default:
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory size '%s': unknown unit '%s' (use K, M, G or T)", text,
                            end);
        }
        const char *rest = end + 1;
        if (toupper((unsigned char)*end) != 'B' && (strcasecmp(rest, "") == 0 || strcasecmp(rest, "B") == 0 ||
                                                    strcasecmp(rest, "iB") == 0))
            ;
        else if (toupper((unsigned char)*end) == 'B' && *rest == '\0')
            ;
        else
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory size '%s': unknown unit '%s' (use K, M, G or T)", text,
                            end);
    }
    double bytes = v * mult;
    if (bytes > 1.8e19) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory size '%s' is too large", text);
    *out = (size_t)bytes;
    return KC_STATUS_OK;
}
