/* cpu_groupnorm.c — per-example normalisation kernels (LayerNormalization,
 * GroupNormalization) and the channel-wise affine maps (Rescaling, Normalization).
 *
 * groupnorm: x is (n, s, c), c in `groups` groups of cg = c / groups channels; the
 * statistics of each (example, group) are over its s * cg values, summed in double.
 * Forward runs in parallel over (example, group) pairs; the backward's input gradient the
 * same way, and its per-channel sums (dgamma, dbeta) over all n * s rows in blocks of
 * KC_CPU_RED_COLS channels with deterministic per-thread partials. The inner loops run over
 * contiguous channels, so they vectorise. */
#include <math.h>
#include "cpu.h"

static kc_status gn_check(const char *what, const float *x, int n, int64_t s, int c, int groups) {
    if (!x) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL input", what);
    if (n <= 0 || s <= 0 || c <= 0 || groups <= 0 || c % groups != 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "cpu %s: bad sizes (n %d, s %lld, c %d, groups %d): all positive, c a multiple of groups",
                        what, n, (long long)s, c, groups);
    return KC_STATUS_OK;
}

kc_status kc__cpu_groupnorm_forward(kc_backend *be, const float *x, float *y, int n, int64_t s, int c, int groups,
                                    const float *gamma, const float *beta, float epsilon, float *save_mean,
                                    float *save_inv_std) {
    (void)be;
    KC_TRY(gn_check("groupnorm_forward", x, n, s, c, groups));
    if (!y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu groupnorm_forward: NULL output");
    const int cg = c / groups;
    const int64_t pairs = (int64_t)n * groups;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)n * s * c), schedule(static), for (int64_t p = 0; p < pairs; p++) {
        const int64_t e = p / groups;
        const int g = (int)(p % groups);
        const float *xe = x + e * s * c + (int64_t)g * cg;
        float *ye = y + e * s * c + (int64_t)g * cg;
        double sum = 0, sq = 0;
        for (int64_t r = 0; r < s; r++) {
            const float *xr = xe + r * c;
            for (int j = 0; j < cg; j++) {
                double v = xr[j];
                sum += v;
                sq += v * v;
            }
        }
        const double cnt = (double)s * cg, mean = sum / cnt;
        double var = sq / cnt - mean * mean;
        if (var < 0) var = 0;
        const float inv = (float)(1.0 / sqrt(var + (double)epsilon)), mu = (float)mean;
        if (save_mean) save_mean[p] = mu;
        if (save_inv_std) save_inv_std[p] = inv;
        const float *ga = gamma ? gamma + (int64_t)g * cg : NULL, *be_ = beta ? beta + (int64_t)g * cg : NULL;
        for (int64_t r = 0; r < s; r++) {
            const float *xr = xe + r * c;
            float *yr = ye + r * c;
            for (int j = 0; j < cg; j++) {
                float v = (xr[j] - mu) * inv;
                if (ga) v *= ga[j];
                if (be_) v += be_[j];
                yr[j] = v;
            }
        }
    });
    return KC_STATUS_OK;
}

/* dgamma[k] = sum dy * xhat, dbeta[k] = sum dy over all n * s rows, in blocks of channels. */
static void gn_param_grads(const float *x, const float *dy, int n, int64_t s, int c, int groups, const float *mean,
                           const float *inv, float *dgamma, float *dbeta) {
    for (int c0 = 0; c0 < c; c0 += KC_CPU_RED_COLS) {
        const int cb = KC_MIN(KC_CPU_RED_COLS, c - c0);
        const kc_cpu_groupstats gs = {.mean = mean, .inv = inv, .s = s, .groups = groups, .cg = c / groups, .c0 = c0};
        double sb[KC_CPU_RED_COLS], sg[KC_CPU_RED_COLS];
        kc__cpu_colsum_gs(KC_CPU_COLSUM_DY_XHAT, x + c0, dy + c0, NULL, &gs, (int64_t)n * s, cb, c, sb, sg);
        for (int j = 0; j < cb; j++) {
            if (dgamma) dgamma[c0 + j] = (float)sg[j];
            if (dbeta) dbeta[c0 + j] = (float)sb[j];
        }
    }
}

kc_status kc__cpu_groupnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int n, int64_t s,
                                     int c, int groups, const float *gamma, const float *save_mean,
                                     const float *save_inv_std, float *dgamma, float *dbeta) {
    (void)be;
    KC_TRY(gn_check("groupnorm_backward", x, n, s, c, groups));
    if (!dy || !save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu groupnorm_backward: NULL dy or saved statistics");
    if (dgamma || dbeta) gn_param_grads(x, dy, n, s, c, groups, save_mean, save_inv_std, dgamma, dbeta);
    if (!dx) return KC_STATUS_OK;
    const int cg = c / groups;
    const int64_t pairs = (int64_t)n * groups;
    KC_CPU_PAR_FOR(kc__cpu_par((int64_t)n * s * c), schedule(static), for (int64_t p = 0; p < pairs; p++) {
        const int64_t e = p / groups;
        const int g = (int)(p % groups);
        const int64_t off = e * s * c + (int64_t)g * cg;
        const float *ga = gamma ? gamma + (int64_t)g * cg : NULL;
        const float mu = save_mean[p], inv = save_inv_std[p];
        double sg = 0, sgx = 0; /* sums of g = dy * gamma and of g * xhat */
        for (int64_t r = 0; r < s; r++) {
            const float *xr = x + off + r * c, *dr = dy + off + r * c;
            for (int j = 0; j < cg; j++) {
                const float gv = ga ? dr[j] * ga[j] : dr[j];
                sg += gv;
                sgx += (double)gv * (double)((xr[j] - mu) * inv);
            }
        }
        const double cnt = (double)s * cg;
        const float mg = (float)(sg / cnt), mgx = (float)(sgx / cnt);
        for (int64_t r = 0; r < s; r++) {
            const float *xr = x + off + r * c, *dr = dy + off + r * c;
            float *xo = dx + off + r * c;
            for (int j = 0; j < cg; j++) {
                const float gv = ga ? dr[j] * ga[j] : dr[j];
                xo[j] = inv * (gv - mg - (xr[j] - mu) * inv * mgx);
            }
        }
    });
    return KC_STATUS_OK;
}

kc_status kc__cpu_channel_affine(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *scale,
                                 const float *shift) {
    (void)be;
    if (!x || !y || rows <= 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu channel_affine: NULL buffer or bad size (%lld x %d)",
                        (long long)rows, c);
    KC_CPU_PAR_FOR(kc__cpu_par(rows * c), schedule(static), for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        for (int j = 0; j < c; j++) yr[j] = xr[j] * (scale ? scale[j] : 1.0f) + (shift ? shift[j] : 0.0f);
    });
    return KC_STATUS_OK;
}

/* Keras's backend.epsilon(), the floor of Normalization's standard deviation */
#define NORMALIZE_EPS 1e-7f

kc_status kc__cpu_normalize(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *mean,
                            const float *var, int invert) {
    (void)be;
    if (!x || !y || !var || rows <= 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu normalize: NULL buffer or bad size (%lld x %d)",
                        (long long)rows, c);
    KC_CPU_PAR_FOR(kc__cpu_par(rows * c), schedule(static), for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * c;
        float *yr = y + r * c;
        for (int j = 0; j < c; j++) {
            const float sd = fmaxf(sqrtf(var[j]), NORMALIZE_EPS), m = mean ? mean[j] : 0.0f;
            yr[j] = invert ? m + xr[j] * sd : (xr[j] - m) / sd;
        }
    });
    return KC_STATUS_OK;
}
