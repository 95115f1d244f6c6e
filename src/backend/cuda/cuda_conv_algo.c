/* cuda_conv_algo.c — which cuDNN algorithm each convolution direction runs, and the
 * workspace that takes (cuda_conv.c holds the shape cache and runs the calls).
 *
 * Algorithms: ranked once per shape (the whole kc_conv2d_desc, batch included) when
 * conv2d_workspace first sees it, by cuDNN's heuristics (cudnnGet*_v7). With
 * KERAC_CUDNN_BENCHMARK=1 a shape is then measured (cudnnFind*Ex: every algorithm timed,
 * in the workspace kerac's plan gave, so nothing is allocated behind the allocator's
 * back) at its first run, once, and only at the batch size planned last for its geometry:
 * not for each size --batch-size auto probes, nor for a short last batch.
 * KERAC_DETERMINISTIC=1 keeps deterministic ones only (without it cuDNN may rank backward
 * algorithms that use atomics first, and measuring picks by time: results may differ in
 * the last bits from run to run); unless KERAC_TF32=1, tensor-op results are skipped and
 * the math type is CUDNN_FMA_MATH (plain fp32: CUDNN_DEFAULT_MATH lets Ampere and newer
 * use TF32). Each candidate must report a workspace size for the final math type and fit
 * KERAC_CUDNN_WORKSPACE_LIMIT; the accepted ones are kept in order. A call runs the first
 * that cuDNN has not refused and that fits the workspace the caller gave (ws_bytes): the
 * short last batch of an epoch gets a workspace planned for the full batch, and cuDNN may
 * rank for it an algorithm that needs more. A refusal at run time (any status of the
 * NOT_SUPPORTED group) moves on to the next one, for good (cuda_rules.c: kc__cu_pick).
 * When none left fits (the plan predates a refusal, or a set-up that ran out of memory),
 * the call takes the workspace from the allocator (stream-ordered, freed after the call)
 * rather than fail; out of memory there is KC_STATUS_OUT_OF_MEMORY, and fit's recovery
 * re-plans. The choice is logged at debug level (KERAC_LOG_LEVEL=debug). */
#include <stdio.h>
#include <string.h>

#include "cuda_conv.h"

typedef struct perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} perf;

const char *kc__cu_conv_dir_name(int dir) {
    static const char *name[3] = {"forward", "backward-data", "backward-filter"};
    return dir >= 0 && dir < 3 ? name[dir] : "?";
}

const char *kc__cu_conv_algo_name(int dir, int a) {
    static const char *fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *bd[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *bf[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    if (dir == DIR_FWD) return a >= 0 && a < 8 ? fwd[a] : "?";
    if (dir == DIR_BWD_DATA) return a >= 0 && a < 6 ? bd[a] : "?";
    return a >= 0 && a < 7 ? bf[a] : "?";
}

const char *kc__cu_conv_math_name(int m) {
    switch ((cudnnMathType_t)m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op (conversion)";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

/* cuDNN's ranked list of algorithms for one direction: its heuristics (b NULL), or timed
 * on the call's buffers in its workspace (b). */
static cudnnStatus_t rank(kc_cu_ctx *c, kc_cu_conv *e, int dir, const conv_bufs *b, perf *out, int *n) {
    int got = 0;
    cudnnStatus_t st;
    *n = 0;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[KC_CU_MAX_CAND];
        st = b ? cudnnFindConvolutionForwardAlgorithmEx(c->dnn, e->xd, b->in0, e->wd, b->in1, e->cd, e->yd, b->out,
                                                        KC_CU_MAX_CAND, &got, p, b->ws, b->ws_bytes)
               : cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, e->xd, e->wd, e->cd, e->yd, KC_CU_MAX_CAND, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            out[i] = (perf){(int)p[i].algo, p[i].status, p[i].time, p[i].memory, p[i].determinism, p[i].mathType};
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[KC_CU_MAX_CAND];
        st = b ? cudnnFindConvolutionBackwardDataAlgorithmEx(c->dnn, e->wd, b->in0, e->yd, b->in1, e->cd, e->xd, b->out,
                                                             KC_CU_MAX_CAND, &got, p, b->ws, b->ws_bytes)
               : cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, e->wd, e->yd, e->cd, e->xd, KC_CU_MAX_CAND, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            out[i] = (perf){(int)p[i].algo, p[i].status, p[i].time, p[i].memory, p[i].determinism, p[i].mathType};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[KC_CU_MAX_CAND];
        st = b ? cudnnFindConvolutionBackwardFilterAlgorithmEx(c->dnn, e->xd, b->in0, e->yd, b->in1, e->cd, e->wd,
                                                               b->out, KC_CU_MAX_CAND, &got, p, b->ws, b->ws_bytes)
               : cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->dnn, e->xd, e->yd, e->cd, e->wd, KC_CU_MAX_CAND, &got,
                                                               p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            out[i] = (perf){(int)p[i].algo, p[i].status, p[i].time, p[i].memory, p[i].determinism, p[i].mathType};
    }
    if (st == CUDNN_STATUS_SUCCESS) *n = got;
    return st;
}

static cudnnStatus_t ws_size(kc_cu_ctx *c, kc_cu_conv *e, int dir, int algo, size_t *sz) {
    *sz = 0;
    if (dir == DIR_FWD)
        return cudnnGetConvolutionForwardWorkspaceSize(c->dnn, e->xd, e->wd, e->cd, e->yd,
                                                       (cudnnConvolutionFwdAlgo_t)algo, sz);
    if (dir == DIR_BWD_DATA)
        return cudnnGetConvolutionBackwardDataWorkspaceSize(c->dnn, e->wd, e->yd, e->cd, e->xd,
                                                            (cudnnConvolutionBwdDataAlgo_t)algo, sz);
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(c->dnn, e->xd, e->yd, e->cd, e->wd,
                                                          (cudnnConvolutionBwdFilterAlgo_t)algo, sz);
}

/* Keep the ranked candidates of one direction that pass the filters (status, determinism,
 * math type) and report a workspace size within cap, in cuDNN's order. */
static void accept(kc_backend *be, kc_cu_conv *e, int dir, const perf *p, int np, int pass, size_t cap,
                   int *skipped_det, int *skipped_ws) {
    kc_cu_ctx *c = kc__cu(be);
    conv_dir *cd = &e->dir[dir];
    for (int i = 0; i < np && cd->n < KC_CU_MAX_CAND; i++) {
        if (p[i].status != CUDNN_STATUS_SUCCESS) continue;
        if (c->deterministic && p[i].det != CUDNN_DETERMINISTIC) {
            (*skipped_det)++;
            continue;
        }
        if (!c->tf32 && (p[i].math == CUDNN_TENSOR_OP_MATH || p[i].math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
            continue;
        const cudnnMathType_t math = c->tf32 ? p[i].math : pass == 0 ? CUDNN_FMA_MATH : CUDNN_DEFAULT_MATH;
        bool dup = false;
        for (int k = 0; k < cd->n; k++) dup = dup || (cd->algo[k] == p[i].algo && cd->math[k] == (int)math);
        if (dup) continue;
        size_t sz = 0;
        if (cudnnSetConvolutionMathType(e->cd, math) != CUDNN_STATUS_SUCCESS) continue;
        if (ws_size(c, e, dir, p[i].algo, &sz) != CUDNN_STATUS_SUCCESS) continue;
        if (sz > cap) {
            (*skipped_ws)++;
            continue;
        }
        cd->algo[cd->n] = p[i].algo;
        cd->math[cd->n] = (int)math;
        cd->ws[cd->n] = sz;
        cd->n++;
    }
}

/* Accept from a ranking: plain fp32 (FMA math) unless TF32 is allowed; only when that
 * finds nothing, cuDNN's default math for fp32 (which may use TF32 on Ampere and newer),
 * with a warning, rather than no convolution at all. */
static void accept_ranked(kc_backend *be, kc_cu_conv *e, int dir, const perf *p, int np, size_t cap, int *skipped_det,
                          int *skipped_ws) {
    kc_cu_ctx *c = kc__cu(be);
    accept(be, e, dir, p, np, 0, cap, skipped_det, skipped_ws);
    if (e->dir[dir].n > 0 || c->tf32) return;
    kc__cu_log(be, KC_LOG_WARNING,
               "%s: cuDNN has no plain-fp32 (FMA) %s algorithm for convolution input %dx%dx%dx%d, kernel %dx%d, %d "
               "filters; using its default math, which may round through TF32",
               be->device, kc__cu_conv_dir_name(dir), e->d.n, e->d.h, e->d.w, e->d.c, e->d.kh, e->d.kw, e->d.f);
    accept(be, e, dir, p, np, 1, cap, skipped_det, skipped_ws);
}

/* What conv2d_workspace reports, from the candidates not refused (cuda_rules.c). */
void kc__cu_conv_update_total(kc_cu_ctx *c, kc_cu_conv *e) {
    size_t need[3];
    for (int dir = 0; dir < 3; dir++) need[dir] = kc__cu_dir_need(&e->dir[dir], c->benchmark);
    e->total = kc__cu_conv_total(e->off_algo, need);
}

static void log_choice(kc_backend *be, const kc_cu_conv *e, const char *how) {
    kc_cu_ctx *c = kc__cu(be);
    const kc_conv2d_desc *d = &e->d;
    char w[3][32], wt[32];
    int k[3];
    for (int i = 0; i < 3; i++) { /* the best-ranked candidate not refused */
        k[i] = 0;
        while (k[i] < e->dir[i].n - 1 && e->dir[i].refused[k[i]]) k[i]++;
        kc__cu_bytes(e->dir[i].ws[k[i]], w[i], sizeof w[i]);
    }
    kc__cu_log(be, KC_LOG_DEBUG,
               "%s conv2d N=%d %dx%dx%d -> %dx%dx%d (kernel %dx%d, strides %dx%d, dilation %dx%d, pad %d,%d%s): "
               "forward %s [%s, %s], backward-data %s [%s, %s], backward-filter %s [%s, %s]; %s%s; workspace %s",
               be->device, d->n, d->h, d->w, d->c, d->oh, d->ow, d->f, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw,
               d->pad_top, d->pad_left, e->padded ? ", explicit asymmetric padding" : "",
               kc__cu_conv_algo_name(0, e->dir[0].algo[k[0]]), kc__cu_conv_math_name(e->dir[0].math[k[0]]), w[0],
               kc__cu_conv_algo_name(1, e->dir[1].algo[k[1]]), kc__cu_conv_math_name(e->dir[1].math[k[1]]), w[1],
               kc__cu_conv_algo_name(2, e->dir[2].algo[k[2]]), kc__cu_conv_math_name(e->dir[2].math[k[2]]), w[2], how,
               c->deterministic ? ", deterministic only" : "", kc__cu_bytes(e->total, wt, sizeof wt));
}

/* The bytes of the workspace's slices: the kernel (F, KH, KW, C / groups), at 0, and the
 * padded input (all C channels), at *off_pad; cuDNN's part follows them. */
size_t kc__cu_conv_slices(const kc_conv2d_desc *d, int groups, bool padded, int hp, int wp, size_t *off_pad) {
    const size_t kernel = kc__cu_conv_fixed(d->n, d->c / groups, d->f, d->kh, d->kw, false, 0, 0);
    if (off_pad) *off_pad = kernel;
    return kernel + kc__cu_conv_fixed(d->n, d->c, 0, d->kh, d->kw, padded, hp, wp);
}

kc_status kc__cu_conv_choose(kc_backend *be, kc_cu_conv *e) {
    kc_cu_ctx *c = kc__cu(be);
    const cudnnMathType_t base_math = c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (int dir = 0; dir < 3; dir++) {
        conv_dir *cd = &e->dir[dir];
        memset(cd, 0, sizeof *cd);
        perf p[KC_CU_MAX_CAND];
        int np = 0;
        DNN(e, "cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(e->cd, base_math));
        cudnnStatus_t st = rank(c, e, dir, NULL, p, &np);
        if (st != CUDNN_STATUS_SUCCESS)
            return kc__cu_conv_fail(be, e, kc__cu_dnn_status((int)st),
                                    "%s: cuDNN could not rank the %s convolution algorithms (cudnnGet*_v7): %s", be->device,
                                    kc__cu_conv_dir_name(dir), cudnnGetErrorString(st));
        int skipped_det = 0, skipped_ws = 0;
        accept_ranked(be, e, dir, p, np, c->ws_limit, &skipped_det, &skipped_ws);
        if (cd->n == 0)
            return kc__cu_conv_fail(be, e, KC_STATUS_UNSUPPORTED,
                                    "%s: cuDNN offers no usable %s algorithm for convolution input %dx%dx%dx%d, kernel "
                                    "%dx%d, %d filters, strides %dx%d, dilation %dx%d (%d ranked%s%s)",
                                    be->device, kc__cu_conv_dir_name(dir), e->d.n, e->d.h, e->d.w, e->d.c, e->d.kh,
                                    e->d.kw, e->d.f,
                                    e->d.sh, e->d.sw, e->d.dh, e->d.dw, np,
                                    skipped_det ? "; KERAC_DETERMINISTIC=1 excluded some: try without --deterministic" : "",
                                    skipped_ws ? "; some need more workspace than KERAC_CUDNN_WORKSPACE_LIMIT allows" : "");
    }
    e->off_algo = kc__cu_conv_slices(&e->d, e->groups, e->padded, e->hp, e->wp, &e->off_pad);
    kc__cu_conv_update_total(c, e);
    log_choice(be, e, c->benchmark ? "cuDNN heuristics, measured at the first run (KERAC_CUDNN_BENCHMARK)"
                                   : "cuDNN heuristics");
    return KC_STATUS_OK;
}

/* The same convolution but for the batch size. */
static bool same_geometry(const kc_conv2d_desc *a, const kc_conv2d_desc *b) {
    kc_conv2d_desc x = *a, y = *b;
    x.n = y.n = 0;
    return memcmp(&x, &y, sizeof x) == 0;
}

/* KERAC_CUDNN_BENCHMARK: time the direction's algorithms on this call's buffers, in the
 * workspace the plan gave; the measured ranking replaces the heuristics' (kept when
 * measuring fails or finds nothing usable). Once per entry, whatever the outcome. */
static void measure(kc_backend *be, kc_cu_conv *e, int dir, const conv_bufs *b) {
    kc_cu_ctx *c = kc__cu(be);
    conv_dir *cd = &e->dir[dir];
    cd->measured = true;
    perf p[KC_CU_MAX_CAND];
    int np = 0, skipped_det = 0, skipped_ws = 0;
    cudnnStatus_t st = cudnnSetConvolutionMathType(e->cd, c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH);
    if (st == CUDNN_STATUS_SUCCESS) st = rank(c, e, dir, b, p, &np);
    if (st != CUDNN_STATUS_SUCCESS) {
        kc__cu_log(be, KC_LOG_WARNING, "%s: KERAC_CUDNN_BENCHMARK: measuring the %s convolution algorithms failed (%s); "
                   "cuDNN's heuristics stay", be->device, kc__cu_conv_dir_name(dir), cudnnGetErrorString(st));
        return;
    }
    conv_dir keep = *cd;
    memset(cd, 0, sizeof *cd);
    cd->measured = true;
    accept_ranked(be, e, dir, p, np, KC_CU_MIN(c->ws_limit, b->ws_bytes), &skipped_det, &skipped_ws);
    if (cd->n == 0) *cd = keep;
    kc__cu_conv_update_total(c, e);
    log_choice(be, e, "measured (KERAC_CUDNN_BENCHMARK)");
}

/* Whether the entry is measured now: the batch size planned last for its geometry. */
static bool measure_now(kc_cu_ctx *c, const kc_cu_conv *e, int dir) {
    if (!c->benchmark || e->dir[dir].measured) return false;
    uint64_t newest = 0;
    for (int i = 0; i < c->n_conv; i++)
        if (c->conv[i]->groups == e->groups && same_geometry(&c->conv[i]->d, &e->d)) newest = KC_CU_MAX(newest, c->conv[i]->plan_stamp);
    return kc__cu_find_now(c->benchmark, e->dir[dir].measured, e->plan_stamp, newest);
}

void kc__cu_conv_measure_maybe(kc_backend *be, kc_cu_conv *e, int dir, const conv_bufs *b) {
    if (measure_now(kc__cu(be), e, dir)) measure(be, e, dir, b);
}
