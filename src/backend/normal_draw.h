/* normal_draw.h — the standard normal draw number i of a seed, for the backends'
 * random_normal (GaussianNoise, GaussianDropout). Counter-based like the dropout mask
 * (src/core/core.h's kc__hash_uniform): draw i depends on (seed, i) only, so the values do
 * not depend on the thread count or on the backend. Shared by the CPU kernel
 * (cpu/cpu_noise.c) and the CUDA one (cuda/kernels_ew.cu); plain C that nvcc also compiles.
 *
 * Box-Muller on the pair p = i / 2: u1 = the 24-bit uniform of index 2p, u2 that of
 * 2p + 1; r = sqrt(-2 ln(1 - u1)), and draw 2p is r cos(2 pi u2), draw 2p + 1 is
 * r sin(2 pi u2) = r cos(2 pi (u2 - 1/4)). The logarithm and cosine are series written
 * here without branches or library calls, so that the CPU loop vectorises: 1 - u1 is
 * k / 2^24 with k an integer in [1, 2^24], its logarithm from its exponent and the atanh
 * series of its mantissa in [sqrt(1/2), sqrt(2)) (error below 1e-9), the cosine from the quadrant and
 * Taylor series on [-pi/4, pi/4] (error below 2e-9). |draw| <= sqrt(2 ln 2^24) = 5.77. */
#ifndef KC_NORMAL_DRAW_H
#define KC_NORMAL_DRAW_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define KC_ND_FN static __host__ __device__ inline
#else
#define KC_ND_FN static inline
#endif

KC_ND_FN uint64_t kc__nd_hash64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The top 24 bits of the hash of (seed, i): kc__hash_uniform's value times 2^24. */
KC_ND_FN uint32_t kc__nd_bits24(uint64_t seed, uint64_t i) {
    return (uint32_t)(kc__nd_hash64(seed ^ kc__nd_hash64(i)) >> 40);
}

/* ln(k / 2^24) for an integer k in [1, 2^24] (exact as a float): the exponent is k's less 24,
 * so that near k = 2^24 nothing cancels and the small logarithms keep their precision. */
KC_ND_FN float kc__nd_log_unit(uint32_t k) {
    float x = (float)k;
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    int e = (int)(b >> 23) - 127;
    uint32_t mb = (b & 0x007fffffu) | 0x3f800000u; /* mantissa in [1, 2) */
    float m;
    memcpy(&m, &mb, sizeof m);
    const int big = m > 1.41421356f;
    m *= 1.0f - 0.5f * (float)big; /* arithmetic, not a branch: the loop stays vectorisable */
    e += big;
    const float s = (m - 1.0f) / (m + 1.0f), s2 = s * s; /* |s| <= 0.1716 */
    const float series = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
    return 2.0f * s * series + (float)(e - 24) * 0.693147180559945f;
}

/* cos(2 pi t) for t in [-1/4, 1): quadrant q = round(4 t), then the series of the rest. */
KC_ND_FN float kc__nd_cos_turns(float t) {
    const int q = (int)(4.0f * t + 4.5f) - 4; /* round to nearest, for t >= -1/4 */
    const float a = 6.28318530717959f * (t - 0.25f * (float)q), a2 = a * a; /* |a| <= pi / 4 */
    const float c = 1.0f + a2 * (-1.0f / 2 + a2 * (1.0f / 24 + a2 * (-1.0f / 720 + a2 * (1.0f / 40320 +
                                                                                         a2 * (-1.0f / 3628800)))));
    const float s = a * (1.0f + a2 * (-1.0f / 6 + a2 * (1.0f / 120 + a2 * (-1.0f / 5040 + a2 * (1.0f / 362880)))));
    const int r = q & 3; /* cos(a + r pi / 2): c, -s, -c, s */
    const float odd = (float)(r & 1), sign = 1.0f - 2.0f * (float)(((r + 1) >> 1) & 1);
    return sign * (odd * s + (1.0f - odd) * c);
}

/* Standard normal draw i of seed. */
KC_ND_FN float kc__normal_draw(uint64_t seed, uint64_t i) {
    const uint64_t p = i >> 1;
    const uint32_t k = 16777216u - kc__nd_bits24(seed, 2 * p); /* (1 - u1) * 2^24, in [1, 2^24] */
    const float u2 = (float)kc__nd_bits24(seed, 2 * p + 1) * (1.0f / 16777216.0f);
    const float ln = kc__nd_log_unit(k); /* <= 0 */
    float r2 = -2.0f * ln;
    r2 = r2 > 0.0f ? r2 : 0.0f;
    return sqrtf(r2) * kc__nd_cos_turns(u2 - 0.25f * (float)(i & 1));
}

#endif /* KC_NORMAL_DRAW_H */
