/* core.h — private helpers shared by every part of libkerac: error text, logging, rng,
 * allocation, shapes, timing, threads, strings. Names are kc__ (private across files). */
#ifndef KC_CORE_H
#define KC_CORE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kerac.h"

#define KC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define KC_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KC_MAX(a, b) ((a) > (b) ? (a) : (b))

/* ---- errors: set the thread-local message and return the status */
kc_status kc__fail(kc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefix the current message with context ("loading 'x.json': ") and return s. */
kc_status kc__wrap(kc_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kc__clear_error(void);
#define KC_ERROR_MAX 1024 /* bytes of an error message, NUL included */
/* A copy of the current message, for code that calls something fallible only to look
 * (a probe, a parse of an environment variable) and must leave the caller's error as it
 * was: kc__error_save before, kc__error_restore after. */
typedef struct kc__saved_error {
    char text[KC_ERROR_MAX];
} kc__saved_error;
void kc__error_save(kc__saved_error *e);
void kc__error_restore(const kc__saved_error *e);

/* ---- logging (library code never prints; this routes to the user's callback or stderr) */
void kc__log(kc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool kc__log_enabled(kc_log_level level);
/* Always shown, whatever the level (for warnings that must never be silent). */
void kc__log_always(kc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- allocation helpers that set an error on failure */
void *kc__calloc(size_t n, size_t size, const char *what);
void *kc__malloc_aligned(size_t bytes, const char *what); /* 64-byte aligned, free with free() */
char *kc__strdup(const char *s);

/* ---- random numbers: splitmix64 seeding, xoshiro256** stream */
typedef struct kc_rng {
    uint64_t s[4];
} kc_rng;
void kc__rng_seed(kc_rng *r, uint64_t seed);
uint64_t kc__rng_u64(kc_rng *r);
double kc__rng_uniform(kc_rng *r);              /* [0, 1) */
double kc__rng_normal(kc_rng *r);               /* N(0, 1) */
double kc__rng_truncated_normal(kc_rng *r);     /* N(0, 1) resampled outside +-2 */
uint64_t kc__rng_below(kc_rng *r, uint64_t n);  /* uniform in [0, n) */
void kc__shuffle_i64(kc_rng *r, int64_t *a, int64_t n);
/* Counter-based hash -> uniform float in [0, 1): same on every backend (dropout). */
static inline uint64_t kc__hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static inline float kc__hash_uniform(uint64_t seed, uint64_t i) {
    return (float)(kc__hash64(seed ^ kc__hash64(i)) >> 40) * (1.0f / 16777216.0f);
}

/* ---- shapes */
int64_t kc__shape_size(const kc_shape *s);           /* product of dims (1 for rank 0) */
bool kc__shape_eq(const kc_shape *a, const kc_shape *b);
/* "(None, 26, 26, 32)"-style text into buf; with_batch adds the leading None. */
const char *kc__shape_str(const kc_shape *s, bool with_batch, char *buf, size_t n);
kc_shape kc__shape_make(int rank, const int *dims);

/* ---- time */
double kc__now(void); /* monotonic seconds */

/* ---- threads (OpenMP) */
/* The thread count of every CPU parallel region and of OpenBLAS: kc_set_num_threads's,
 * else KERAC_NUM_THREADS's, else OpenMP's default (omp_get_max_threads at first use, which
 * honours OMP_NUM_THREADS). Regions name it (num_threads clause). */
int kc__num_threads(void);
/* 1 unless KERAC_CPU_BALANCE=0 (read once, beside KERAC_NUM_THREADS: both are the threads'
 * settings, process-wide): whether the CPU kernels hand out work in chunks as threads come
 * free (cpu.h, KC_CPU_BALANCED) or in one equal share per thread, as schedule(static). */
int kc__threads_balance(void);
/* Sets the calling thread's OpenMP count (omp_set_num_threads) to kc__num_threads when it
 * differs, outside parallel regions: OpenBLAS's OpenMP build sizes its team from it at each
 * call. */
void kc__threads_sync(void);

/* ---- strings */
bool kc__streq(const char *a, const char *b);    /* NULL-safe */
/* Keras-style auto names: "conv2d", "conv2d_1", ... */
void kc__snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif /* KC_CORE_H */
