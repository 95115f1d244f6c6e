/* rng.c — xoshiro256** seeded by splitmix64: fast, reproducible on every platform. */
#include <math.h>

#include "core.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void kc__rng_seed(kc_rng *r, uint64_t seed) {
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&seed);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t kc__rng_u64(kc_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double kc__rng_uniform(kc_rng *r) { return (double)(kc__rng_u64(r) >> 11) * 0x1.0p-53; }

double kc__rng_normal(kc_rng *r) {
    /* Box-Muller; u1 in (0, 1] so log is finite */
    double u1 = 1.0 - kc__rng_uniform(r), u2 = kc__rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

double kc__rng_truncated_normal(kc_rng *r) {
    for (;;) {
        double z = kc__rng_normal(r);
        if (z > -2.0 && z < 2.0) return z;
    }
}

uint64_t kc__rng_below(kc_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = kc__rng_u64(r);
    while (x >= limit);
    return x % n;
}

void kc__shuffle_i64(kc_rng *r, int64_t *a, int64_t n) {
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)kc__rng_below(r, (uint64_t)i + 1);
        int64_t t = a[i];
        a[i] = a[j];
        a[j] = t;
    }
}
