/* cpu_noise.c — the CPU backend's normal random numbers (GaussianNoise, GaussianDropout):
 * draw i of a seed from src/backend/normal_draw.h, so the values depend on (seed, i) only,
 * not on the thread count, and the CUDA kernel gives the same ones. The draw has no
 * branches or library calls but sqrt: the loop vectorises where the instruction set has
 * 64-bit vector multiplies for the hash (the AVX-512 copy; the others run it scalar). */
#include "../normal_draw.h"
#include "cpu.h"

kc_status kc__cpu_random_normal(kc_backend *be, float *y, int64_t n, float mean, float stddev, uint64_t seed) {
    (void)be;
    if (n < 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu random_normal: negative size %lld", (long long)n);
    if (n == 0) return KC_STATUS_OK;
    if (!y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu random_normal: NULL output");
    if (!(stddev >= 0.0f) || !isfinite(stddev) || !isfinite(mean))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu random_normal: mean %g and stddev %g must be finite, stddev >= 0",
                        (double)mean, (double)stddev);
    KC_CPU_PAR_FOR(kc__cpu_par(n), simd schedule(static), for (int64_t i = 0; i < n; i++) { y[i] = mean + stddev * kc__normal_draw(seed, (uint64_t)i); });
    return KC_STATUS_OK;
}
