/* cpu_norm.c — batch normalization over (rows, c): rows = N*H*W (or N for Dense
 * outputs), statistics per channel (the last axis).
 *
 * Training uses the batch mean and the biased batch variance (sums in double, of float
 * partial sums over blocks of BN_ROW_BLOCK rows), saves
 * mean and inv_std = 1/sqrt(var + eps) for backward and updates the moving statistics
 * as Keras 3: moving = moving * momentum + batch * (1 - momentum).
 * gamma NULL means 1 (scale=False), beta NULL means 0 (center=False).
 * Up to BN_ONE_PASS channels are processed together (one walk over the rows for the sums,
 * one for the normalisation), wider inputs in blocks of KC_CPU_RED_COLS; the per-channel
 * coefficients live on the stack; rows run in parallel. A training call (forward or backward) is one
 * parallel region per block of channels: sums, barrier, coefficients, barrier, the pass over the
 * rows (bn_run; before: a region with an ordered reduction, then a second one); no region
 * at all where it would get one thread (kc__cpu_team, as KC_CPU_PAR_FOR: one thread, or nested).
 * The _relu entries are the same with a ReLU after the normalisation: the
 * forward clips in the normalising pass, the backward masks dy where the ReLU passed
 * nothing while it sums and while it writes dx, so neither needs a pass of its own.
 * given no y, the backward recomputes the ReLU's input from x with the forward's
 * own expression and coefficients (the same floats, so the same mask) instead of reading y:
 * 5 streams over the activations instead of 7 (sums: x, dy; pass: x, dy, dx). */
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "cpu.h"

static kc_status bn_check(const char *what, const float *x, const float *y, int64_t rows, int c) {
    if (rows <= 0 || c <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: bad size (%lld rows, %d channels); both must be positive",
                        what, (long long)rows, c);
    if (!x || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: NULL input or output", what);
    return KC_STATUS_OK;
}

/* One pass over all channels when there are at most BN_ONE_PASS of them (ResNet50's 2048): the sums of
 * every channel from one walk over the rows, and the normalisation in one more; wider inputs go in blocks
 * of KC_CPU_RED_COLS channels, one walk over the rows per block (the coefficients on the stack). */
#define BN_ONE_PASS 2048
/* Rows summed in float before each addition into the double totals. */
#define BN_ROW_BLOCK 32

/* The ReLU of the fused entries: on, and its upper clip (INFINITY when none); for a backward
 * without y, the forward's coefficients per channel of the block (k2 = gamma * inv_std,
 * k3 = beta): the ReLU's input was (x - mean) * k2 + k3. */
typedef struct bn_relu {
    int on;
    float hi;
    const float *k2, *k3;
} bn_relu;
static bn_relu bn_relu_of(float relu_max) { return (bn_relu){1, relu_max > 0.0f ? relu_max : INFINITY, NULL, NULL}; }
static const bn_relu BN_NO_RELU = {0, INFINITY, NULL, NULL};

/* The fused ReLU's mask, a vector of channels at a time: dy where 0 < v < hi, else 0, from a
 * plain load and a bitwise AND. The scalar loops' `v > 0 && v < hi ? dy : 0` compiles to a
 * load of dy under the mask (vmovups {k}{z}), and so does the AND unless the loaded vector
 * passes through an empty asm first (bn_ld): on a Zen 5 the backward with the masked loads
 * took 5.1 ms for 73,728 x 96 floats, 3.0 ms without (bench/RESULTS.md, "Batch norm's
 * ReLU mask"). NaN in v gives 0 both ways; the tails stay scalar. */
#define BN_VW KC_CPU_VW
typedef float bn_vf __attribute__((vector_size(BN_VW * sizeof(float))));
typedef int32_t bn_vi __attribute__((vector_size(BN_VW * sizeof(float))));
static inline bn_vf bn_ld(const float *p) {
    bn_vf v;
    memcpy(&v, p, sizeof v);
#if defined(__x86_64__) || defined(__i386__)
    __asm__("" : "+v"(v)); /* a value in a register: not to be folded into a masked load */
#endif
    return v;
}
static inline void bn_st(float *p, bn_vf v) { memcpy(p, &v, sizeof v); }
static inline bn_vf bn_mask(bn_vf g, bn_vf v, bn_vf hi) {
    return (bn_vf)((bn_vi)g & ((bn_vi)(v > (bn_vf){0}) & (bn_vi)(v < hi)));
}

/* A column block of a (rows, ld) matrix: columns [c0, c0 + cb). */
typedef struct bn_cols {
    int64_t rows;
    int ld, c0, cb;
} bn_cols;

/* Float sums over rows [r0, re) into f1, f2 (see bn_sums); dy rows masked by the ReLU's y when rl.on. */
static void bn_sums_rows(const float *a, const float *dy, const float *y, bn_relu rl, const float *p, bn_cols k,
                         int64_t r0, int64_t re, float *f1, float *f2) {
    const int cb = k.cb;
    for (int64_t r = r0; r < re; r++) {
        const float *ar = a + r * k.ld + k.c0;
        if (!dy) {
            for (int j = 0; j < cb; j++) {
                const float v = ar[j] - p[j];
                f1[j] += v, f2[j] += v * v;
            }
            continue;
        }
        const float *gr = dy + r * k.ld + k.c0;
        const bn_vf hi = (bn_vf){0} + rl.hi;
        int j = 0;
        if (rl.on && !y) { /* the mask from x: p is the forward's mean */
            for (; j + BN_VW <= cb; j += BN_VW) {
                const bn_vf xc = bn_ld(ar + j) - bn_ld(p + j), v = xc * bn_ld(rl.k2 + j) + bn_ld(rl.k3 + j);
                const bn_vf g = bn_mask(bn_ld(gr + j), v, hi);
                bn_st(f1 + j, bn_ld(f1 + j) + g), bn_st(f2 + j, bn_ld(f2 + j) + g * xc);
            }
            for (; j < cb; j++) {
                const float xc = ar[j] - p[j], v = xc * rl.k2[j] + rl.k3[j];
                const float g = v > 0.0f && v < rl.hi ? gr[j] : 0.0f;
                f1[j] += g, f2[j] += g * xc;
            }
        } else if (rl.on) {
            const float *yr = y + r * k.ld + k.c0;
            for (; j + BN_VW <= cb; j += BN_VW) {
                const bn_vf g = bn_mask(bn_ld(gr + j), bn_ld(yr + j), hi);
                bn_st(f1 + j, bn_ld(f1 + j) + g), bn_st(f2 + j, bn_ld(f2 + j) + g * (bn_ld(ar + j) - bn_ld(p + j)));
            }
            for (; j < cb; j++) {
                const float g = yr[j] > 0.0f && yr[j] < rl.hi ? gr[j] : 0.0f;
                f1[j] += g, f2[j] += g * (ar[j] - p[j]);
            }
        } else {
            for (; j < cb; j++) f1[j] += gr[j], f2[j] += gr[j] * (ar[j] - p[j]);
        }
    }
}

/* One batch-norm call on a block of channels, as ONE parallel region: each thread sums its
 * rows, a barrier, the threads' sums added per channel in thread order and turned into the per-channel
 * coefficients (the channels split across the threads), a barrier, and each thread's pass over its rows.
 * The sums: with p[j] a centre per channel, s1 = sum_r (a - p), s2 = sum_r (a - p)^2 (forward, p = the
 * first row, so that the float partial sums do not lose the variance to a large mean), or s1 = sum_r g,
 * s2 = sum_r g * (a - p), g = dy masked by the ReLU's y when rl.on (backward, p = the mean). A thread
 * sums in float over blocks of BN_ROW_BLOCK rows, then in double; the rows a thread gets depend only on
 * the thread count, so the result is the same from run to run for a fixed count. */
typedef struct bn_job {
    int backward;
    const float *x, *y, *dy; /* x; y: the fused ReLU's output (backward with rl.on) */
    float *out;              /* forward: y; backward: dx (may be dy) */
    bn_cols k;
    bn_relu rl;
    const float *p; /* the centres, cb */
    /* the layer's parameters and statistics, indexed by channel (c0 + j) */
    const float *gamma, *beta, *save_inv_std;
    float *moving_mean, *moving_var, *save_mean_out, *save_inv_out, *dgamma, *dbeta;
    float momentum, epsilon;
    /* the coefficients, cb each: forward y = (x - c1) * c2 + c3; backward dx = c1 * g + c2 * (x - p) + c3 */
    float *c1, *c2, *c3;
} bn_job;

/* Channel j's coefficients from its sums. */
static void bn_coef(const bn_job *b, int j, double s1, double s2) {
    const int ch = b->k.c0 + j;
    const double rows = (double)b->k.rows;
    if (!b->backward) {
        const double d = s1 / rows, m = (double)b->p[j] + d;
        double var = s2 / rows - d * d;
        if (var < 0) var = 0;
        const float inv = (float)(1.0 / sqrt(var + (double)b->epsilon));
        b->c1[j] = (float)m;
        b->save_mean_out[ch] = (float)m;
        b->save_inv_out[ch] = inv;
        b->c2[j] = (b->gamma ? b->gamma[ch] : 1.0f) * inv;
        b->c3[j] = b->beta ? b->beta[ch] : 0.0f;
        if (b->moving_mean) b->moving_mean[ch] = b->moving_mean[ch] * b->momentum + (float)m * (1.0f - b->momentum);
        if (b->moving_var) b->moving_var[ch] = b->moving_var[ch] * b->momentum + (float)var * (1.0f - b->momentum);
        return;
    }
    /* dx = g*inv * (dy - mean(dy) - xhat * mean(dy * xhat)), xhat = (x - mean) * inv
     *    = k1 * dy + k2 * (x - mean) + k3 */
    const double inv = b->save_inv_std[ch], g = b->gamma ? b->gamma[ch] : 1.0;
    const double dg = s2 * inv; /* sum dy * xhat */
    if (b->dgamma) b->dgamma[ch] = (float)dg;
    if (b->dbeta) b->dbeta[ch] = (float)s1;
    b->c1[j] = (float)(g * inv);
    b->c2[j] = (float)(-g * inv * inv * dg / rows);
    b->c3[j] = (float)(-g * inv * s1 / rows);
}

/* Rows [r0, r1): forward y = (x - c1) * c2 + c3, clipped to [0, hi] when rl.on; backward
 * dx = c1 * g + c2 * (x - p) + c3, g = dy masked by the ReLU's y when rl.on. */
static void bn_pass(const bn_job *b, int64_t r0, int64_t r1) {
    const int cb = b->k.cb;
    const float *c1 = b->c1, *c2 = b->c2, *c3 = b->c3, *p = b->p;
    const float hi = b->rl.hi;
    for (int64_t r = r0; r < r1; r++) {
        const size_t at = (size_t)r * b->k.ld + b->k.c0;
        const float *xr = b->x + at;
        float *o = b->out + at;
        if (!b->backward) {
            if (b->rl.on) /* compares, not fminf/fmaxf: those keep NaN rules that do not vectorise */
                for (int j = 0; j < cb; j++) {
                    const float v = (xr[j] - c1[j]) * c2[j] + c3[j], q = v > 0.0f ? v : 0.0f;
                    o[j] = q < hi ? q : hi;
                }
            else
                for (int j = 0; j < cb; j++) o[j] = (xr[j] - c1[j]) * c2[j] + c3[j];
            continue;
        }
        const float *gr = b->dy + at;
        const bn_vf hiv = (bn_vf){0} + hi;
        int j = 0;
        if (b->rl.on && !b->y) {
            const float *k2 = b->rl.k2, *k3 = b->rl.k3;
            for (; j + BN_VW <= cb; j += BN_VW) {
                const bn_vf xc = bn_ld(xr + j) - bn_ld(p + j), v = xc * bn_ld(k2 + j) + bn_ld(k3 + j);
                const bn_vf g = bn_mask(bn_ld(gr + j), v, hiv);
                bn_st(o + j, bn_ld(c1 + j) * g + bn_ld(c2 + j) * xc + bn_ld(c3 + j));
            }
            for (; j < cb; j++) {
                const float xc = xr[j] - p[j], v = xc * k2[j] + k3[j];
                const float g = v > 0.0f && v < hi ? gr[j] : 0.0f;
                o[j] = c1[j] * g + c2[j] * xc + c3[j];
            }
        } else if (b->rl.on) {
            const float *yr = b->y + at;
            for (; j + BN_VW <= cb; j += BN_VW) {
                const bn_vf g = bn_mask(bn_ld(gr + j), bn_ld(yr + j), hiv);
                bn_st(o + j, bn_ld(c1 + j) * g + bn_ld(c2 + j) * (bn_ld(xr + j) - bn_ld(p + j)) + bn_ld(c3 + j));
            }
            for (; j < cb; j++) {
                const float g = yr[j] > 0.0f && yr[j] < hi ? gr[j] : 0.0f;
                o[j] = c1[j] * g + c2[j] * (xr[j] - p[j]) + c3[j];
            }
        } else {
            for (; j < cb; j++) o[j] = c1[j] * gr[j] + c2[j] * (xr[j] - p[j]) + c3[j];
        }
    }
}

/* The pass over every row, inside the team's region (or on this thread alone): in chunks
 * taken as threads come free (KC_CPU_BALANCED's size; one per thread with
 * KERAC_CPU_BALANCE=0). Each row's output depends on that row only. */
static void bn_pass_balanced(const bn_job *b) {
    const int64_t rows = b->k.rows, chunk = kc__cpu_chunk(rows), chunks = (rows + chunk - 1) / chunk;
#pragma omp for schedule(dynamic, 1)
    for (int64_t q = 0; q < chunks; q++) bn_pass(b, q * chunk, KC_MIN(rows, (q + 1) * chunk));
}

/* Thread t of tn's part of the job: its sums (into d1, d2, published in part[t]), the coefficients of its
 * channels from every thread's sums, its rows' pass. Barriers between (none when tn == 1). */
static void bn_team(const bn_job *b, int t, int tn, const double **part, double *d1, double *d2) {
    const int cb = b->k.cb;
    float f1[BN_ONE_PASS], f2[BN_ONE_PASS];
    for (int j = 0; j < cb; j++) d1[j] = d2[j] = 0.0;
    const int64_t r_lo = b->k.rows * t / tn, r_hi = b->k.rows * (t + 1) / tn;
    const float *a = b->x, *dy = b->backward ? b->dy : NULL;
    for (int64_t r0 = r_lo; r0 < r_hi; r0 += BN_ROW_BLOCK) {
        for (int j = 0; j < cb; j++) f1[j] = f2[j] = 0.0f;
        bn_sums_rows(a, dy, b->y, b->rl, b->p, b->k, r0, KC_MIN(r_hi, r0 + BN_ROW_BLOCK), f1, f2);
        for (int j = 0; j < cb; j++) d1[j] += f1[j], d2[j] += f2[j];
    }
    part[2 * t] = d1, part[2 * t + 1] = d2;
#pragma omp barrier
    for (int j = cb * t / tn; j < cb * (t + 1) / tn; j++) {
        double s1 = 0.0, s2 = 0.0;
        for (int i = 0; i < tn; i++) s1 += part[2 * i][j], s2 += part[2 * i + 1][j];
        bn_coef(b, j, s1, s2);
    }
#pragma omp barrier
    if (b->out) bn_pass_balanced(b); /* no output: the statistics only (bn_add_relu normalises) */
}

/* Runs a job on the team (one parallel region), or on this thread when it is small. */
static void bn_run(bn_job *b) {
    float c1[BN_ONE_PASS], c2[BN_ONE_PASS], c3[BN_ONE_PASS];
    b->c1 = c1, b->c2 = c2, b->c3 = c3;
    int team = 1;
#ifdef _OPENMP
    if (kc__cpu_par(b->k.rows * b->k.cb) && kc__cpu_team()) team = kc__num_threads();
#endif
    const double *part[2 * team];
#pragma omp parallel num_threads(team) if (team > 1)
    {
        int t = 0, tn = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        tn = omp_get_num_threads();
#endif
        double d1[BN_ONE_PASS], d2[BN_ONE_PASS];
        bn_team(b, t, tn, part, d1, d2);
    }
}

/* Channels per walk over the rows: all of them, or blocks of KC_CPU_RED_COLS. */
static int bn_block(int c) { return c <= BN_ONE_PASS ? c : KC_CPU_RED_COLS; }

/* y[r, c0+j] = (x[r, c0+j] - sub[j]) * mul[j] + add[j] for j < cb, clipped to [0, hi] when rl.on (inference). */
static void bn_apply(const float *x, float *y, bn_cols k, const float *sub, const float *mul, const float *add,
                     bn_relu rl) {
    const bn_job b = {.x = x, .out = y, .k = k, .rl = rl, .c1 = (float *)sub, .c2 = (float *)mul, .c3 = (float *)add};
#pragma omp parallel num_threads(kc__num_threads()) if (kc__cpu_par(k.rows * k.cb) && kc__cpu_team())
    bn_pass_balanced(&b);
}

static kc_status bn_forward_train(const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, float *moving_mean, float *moving_var, float momentum,
                                  float epsilon, float *save_mean, float *save_inv_std, bn_relu rl) {
    /* y NULL (not with the ReLU): the statistics only, for bn_add_relu */
    KC_TRY(bn_check("batchnorm_forward_train", x, (y || rl.on) ? y : x, rows, c));
    if (!save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: NULL save_mean or save_inv_std");
    if (!(epsilon > 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_train: epsilon %g must be > 0",
                        (double)epsilon);
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        bn_job b = {.x = x, .out = y, .k = {rows, c, c0, KC_MIN(bw, c - c0)}, .rl = rl, .p = x + c0, /* first row */
                    .gamma = gamma, .beta = beta, .moving_mean = moving_mean, .moving_var = moving_var,
                    .save_mean_out = save_mean, .save_inv_out = save_inv_std, .momentum = momentum,
                    .epsilon = epsilon};
        bn_run(&b);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, float *moving_mean,
                                          float *moving_var, float momentum, float epsilon, float *save_mean,
                                          float *save_inv_std) {
    return bn_forward_train(x, y, rows, c, gamma, beta, moving_mean, moving_var, momentum, epsilon, save_mean,
                            save_inv_std, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_forward_train(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, float *moving_mean,
                                               float *moving_var, float momentum, float epsilon, float *save_mean,
                                               float *save_inv_std, float relu_max) {
    return bn_forward_train(x, y, rows, c, gamma, beta, moving_mean, moving_var, momentum, epsilon, save_mean,
                            save_inv_std, bn_relu_of(relu_max));
}

static kc_status bn_forward_infer(const float *x, float *y, int64_t rows, int c, const float *gamma,
                                  const float *beta, const float *moving_mean, const float *moving_var,
                                  float epsilon, bn_relu rl) {
    KC_TRY(bn_check("batchnorm_forward_infer", x, y, rows, c));
    if (!moving_mean || !moving_var)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_forward_infer: NULL moving mean or variance");
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        const bn_cols k = {rows, c, c0, KC_MIN(bw, c - c0)};
        float mul[BN_ONE_PASS], add[BN_ONE_PASS];
        for (int j = 0; j < k.cb; j++) {
            const int ch = c0 + j;
            const float inv = 1.0f / sqrtf(moving_var[ch] + epsilon);
            mul[j] = (gamma ? gamma[ch] : 1.0f) * inv;
            add[j] = beta ? beta[ch] : 0.0f;
        }
        bn_apply(x, y, k, moving_mean + c0, mul, add, rl);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                          const float *gamma, const float *beta, const float *moving_mean,
                                          const float *moving_var, float epsilon) {
    return bn_forward_infer(x, y, rows, c, gamma, beta, moving_mean, moving_var, epsilon, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_forward_infer(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                               const float *gamma, const float *beta, const float *moving_mean,
                                               const float *moving_var, float epsilon, float relu_max) {
    return bn_forward_infer(x, y, rows, c, gamma, beta, moving_mean, moving_var, epsilon, bn_relu_of(relu_max));
}

static kc_status bn_backward(const float *x, const float *y, const float *dy, float *dx, int64_t rows, int c,
                             const float *gamma, const float *beta, const float *save_mean,
                             const float *save_inv_std, float *dgamma, float *dbeta, bn_relu rl) {
    KC_TRY(bn_check("batchnorm_backward", x, dx, rows, c));
    if (!dy || !save_mean || !save_inv_std)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu batchnorm_backward: NULL dy or saved statistics");
    const int bw = bn_block(c);
    float k2[BN_ONE_PASS], k3[BN_ONE_PASS]; /* the mask's coefficients when there is no y */
    for (int c0 = 0; c0 < c; c0 += bw) {
        bn_job b = {.backward = 1, .x = x, .y = y, .dy = dy, .out = dx, .k = {rows, c, c0, KC_MIN(bw, c - c0)},
                    .rl = rl, .p = save_mean + c0, .gamma = gamma, .save_inv_std = save_inv_std, .dgamma = dgamma,
                    .dbeta = dbeta};
        if (rl.on && !y) { /* as bn_coef's forward coefficients: c2 = gamma * inv, c3 = beta */
            for (int j = 0; j < b.k.cb; j++) {
                const int ch = c0 + j;
                k2[j] = (gamma ? gamma[ch] : 1.0f) * save_inv_std[ch];
                k3[j] = beta ? beta[ch] : 0.0f;
            }
            b.rl.k2 = k2, b.rl.k3 = k3;
        }
        bn_run(&b);
    }
    return KC_STATUS_OK;
}

kc_status kc__cpu_batchnorm_backward(kc_backend *be, const float *x, const float *dy, float *dx, int64_t rows, int c,
                                     const float *gamma, const float *save_mean, const float *save_inv_std,
                                     float *dgamma, float *dbeta) {
    return bn_backward(x, NULL, dy, dx, rows, c, gamma, NULL, save_mean, save_inv_std, dgamma, dbeta, BN_NO_RELU);
}

kc_status kc__cpu_batchnorm_relu_backward(kc_backend *be, const float *x, const float *y, const float *dy, float *dx,
                                          int64_t rows, int c, const float *gamma, const float *beta,
                                          const float *save_mean, const float *save_inv_std, float *dgamma,
                                          float *dbeta, float relu_max) {
    return bn_backward(x, y, dy, dx, rows, c, gamma, beta, save_mean, save_inv_std, dgamma, dbeta,
                       bn_relu_of(relu_max));
}

/* ---- a batch norm's normalisation, the Add that reads it and the ReLU after (bn_add_relu) */

/* Input k's map over channels [c0, c0 + cb) in the forward's form v = (x - sub) * mul + add,
 * with the same float operations as bn_coef (training) and bn_forward_infer (moving
 * statistics), so v is the batch norm's own output bit for bit. An input without a map is
 * read as it is (fold_job's NULL sub). */
static void fold_coef(const kc_bn_fold *f, int c0, int cb, float *sub, float *mul, float *add) {
    for (int j = 0; j < cb; j++) {
        const int ch = c0 + j;
        const float inv = f->inv_std ? f->inv_std[ch] : 1.0f / sqrtf(f->var[ch] + f->epsilon);
        sub[j] = f->mean[ch];
        mul[j] = (f->gamma ? f->gamma[ch] : 1.0f) * inv;
        add[j] = f->beta ? f->beta[ch] : 0.0f;
    }
}

typedef struct fold_job {
    const float *x0, *x1;
    float *y;
    bn_cols k;
    const float *s0, *m0, *a0, *s1, *m1, *a1; /* NULL s: that input as it is */
    int relu;
    float hi;
} fold_job;

/* Rows [r0, r1): y = A0(x0) + A1(x1), then the ReLU, as the batch norm's pass and add_relu. */
static void fold_pass(const fold_job *b, int64_t r0, int64_t r1) {
    const int cb = b->k.cb;
    const float *s0 = b->s0, *m0 = b->m0, *a0 = b->a0, *s1 = b->s1, *m1 = b->m1, *a1 = b->a1;
    const float hi = b->hi;
    for (int64_t r = r0; r < r1; r++) {
        const size_t at = (size_t)r * b->k.ld + b->k.c0;
        const float *p = b->x0 + at, *q = b->x1 + at;
        float *o = b->y + at;
        for (int j = 0; j < cb; j++) {
            const float u = s0 ? (p[j] - s0[j]) * m0[j] + a0[j] : p[j];
            const float v = s1 ? (q[j] - s1[j]) * m1[j] + a1[j] : q[j];
            const float w = u + v;
            o[j] = !b->relu ? w : w > 0.0f ? (w < hi ? w : hi) : 0.0f;
        }
    }
}

kc_status kc__cpu_bn_add_relu(kc_backend *be, float *y, const float *x0, const kc_bn_fold *f0, const float *x1,
                              const kc_bn_fold *f1, int64_t rows, int c, int relu, float relu_max) {
    KC_TRY(bn_check("bn_add_relu", x0, y, rows, c));
    if (!x1) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bn_add_relu: NULL second input");
    const kc_bn_fold *f[2] = {f0, f1};
    for (int i = 0; i < 2; i++)
        if (f[i] && (!f[i]->mean || (!f[i]->inv_std && (!f[i]->var || !(f[i]->epsilon > 0.0f)))))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "cpu bn_add_relu: input %d's batch norm has no mean, or neither inv_std nor a variance "
                            "with a positive epsilon",
                            i);
    if (relu && !(relu_max >= 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu bn_add_relu: relu_max %g is negative", (double)relu_max);
    const int bw = bn_block(c);
    for (int c0 = 0; c0 < c; c0 += bw) {
        const bn_cols k = {rows, c, c0, KC_MIN(bw, c - c0)};
        float s0[BN_ONE_PASS], m0[BN_ONE_PASS], a0[BN_ONE_PASS], s1[BN_ONE_PASS], m1[BN_ONE_PASS], a1[BN_ONE_PASS];
        if (f0) fold_coef(f0, c0, k.cb, s0, m0, a0);
        if (f1) fold_coef(f1, c0, k.cb, s1, m1, a1);
        const fold_job b = {.x0 = x0, .x1 = x1, .y = y, .k = k, .s0 = f0 ? s0 : NULL, .m0 = m0, .a0 = a0,
                            .s1 = f1 ? s1 : NULL, .m1 = m1, .a1 = a1, .relu = relu,
                            .hi = relu_max > 0.0f ? relu_max : INFINITY};
        const int64_t chunk = kc__cpu_chunk(rows), chunks = (rows + chunk - 1) / chunk;
        KC_CPU_PAR_FOR(kc__cpu_par(rows * k.cb), schedule(dynamic, 1), for (int64_t q = 0; q < chunks; q++) {
            fold_pass(&b, q * chunk, KC_MIN(rows, (q + 1) * chunk));
        });
    }
    return KC_STATUS_OK;
}
