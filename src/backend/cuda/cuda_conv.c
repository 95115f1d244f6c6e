/* cuda_conv.c — 2-D convolution through cuDNN (the v7-style calls, still in cuDNN 9; this
 * file is the only one that knows them, so moving to the graph API stays local).
 *
 * Layouts: activations are NHWC (CUDNN_TENSOR_NHWC). Keras kernels are HWIO (KH, KW, C, F),
 * which cuDNN does not take; its NHWC filter layout is KRSC (F, KH, KW, C). Read as matrices,
 * HWIO is (K, F) and KRSC is (F, K) with the same K = (kh, kw, c) order, so each call
 * transposes the kernel into the workspace (forward, backward-data) or the filter gradient
 * out of it (backward-filter): a few KB to a few MB per call.
 *
 * Padding: cuDNN pads symmetrically. When pad_top/pad_left with the caller's output size
 * (TensorFlow's "same" can pad one more row at the bottom) is not what symmetric padding
 * gives, the input is copied into a zero-padded (or cropped) buffer in the workspace and
 * the convolution runs unpadded; backward-data crops its result back.
 *
 * Algorithms: chosen once per shape (the whole kc_conv2d_desc, batch included) when
 * conv2d_workspace first sees it, by cuDNN's heuristics (cudnnGet*_v7) or, with
 * KERAC_CUDNN_BENCHMARK=1, by timing every algorithm (cudnnFind*). KERAC_DETERMINISTIC=1
 * keeps deterministic ones only; unless KERAC_TF32=1, tensor-op results are skipped and
 * the math type is CUDNN_FMA_MATH (plain fp32: CUDNN_DEFAULT_MATH lets Ampere and newer
 * use TF32). Each candidate must report a workspace size for the final math type and fit
 * KERAC_CUDNN_WORKSPACE_LIMIT; the accepted ones are kept in order. A call runs the first
 * of them (from the one in use) that fits the workspace the caller gave (ws_bytes): the
 * short last batch of an epoch gets a workspace planned for the full batch, and cuDNN may
 * rank for it an algorithm that needs more. A call that cuDNN refuses at run time
 * (NOT_SUPPORTED) moves on to the next one that fits. The choice is logged at debug level
 * (KERAC_LOG_LEVEL=debug).
 *
 * Workspace (conv2d_workspace), from a 256-byte aligned start:
 *   [kernel (F, K) transposed][padded input (N, HP, WP, C), only when padded][cuDNN's] */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

#define KC_CU_MAX_CAND 16

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2 };
static const char *dir_name[3] = {"forward", "backward-data", "backward-filter"};

typedef struct conv_dir {
    int n;                                /* accepted candidates, best first */
    int algo[KC_CU_MAX_CAND];
    cudnnMathType_t math[KC_CU_MAX_CAND];
    size_t ws[KC_CU_MAX_CAND];
    bool refused[KC_CU_MAX_CAND];         /* cuDNN said NOT_SUPPORTED at run time */
} conv_dir;

struct kc_cu_conv {
    kc_conv2d_desc d; /* the key */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    bool padded;
    int hp, wp;       /* padded input size */
    conv_dir dir[3];
    size_t off_pad, off_algo, algo_ws, total;
    kc_status status; /* a failure while setting up: repeated by every call */
    char msg[512];
};

typedef struct perf {
    int algo;
    cudnnStatus_t status;
    float time;
    size_t memory;
    cudnnDeterminism_t det;
    cudnnMathType_t math;
} perf;

static const char *algo_name(int dir, int a) {
    static const char *fwd[] = {"IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT",
                                "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *bd[] = {"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
    static const char *bf[] = {"ALGO_0", "ALGO_1", "FFT", "ALGO_3", "WINOGRAD", "WINOGRAD_NONFUSED", "FFT_TILING"};
    if (dir == DIR_FWD) return a >= 0 && a < 8 ? fwd[a] : "?";
    if (dir == DIR_BWD_DATA) return a >= 0 && a < 6 ? bd[a] : "?";
    return a >= 0 && a < 7 ? bf[a] : "?";
}

static const char *math_name(cudnnMathType_t m) {
    switch (m) {
    case CUDNN_DEFAULT_MATH: return "default";
    case CUDNN_TENSOR_OP_MATH: return "tensor-op";
    case CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION: return "tensor-op (conversion)";
    case CUDNN_FMA_MATH: return "fma";
    default: return "?";
    }
}

static kc_status conv_check(kc_backend *be, const kc_conv2d_desc *d, const char *what) {
    if (!d) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: the descriptor is NULL", what);
    if (d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 ||
        d->sw <= 0 || d->dh <= 0 || d->dw <= 0 || d->oh <= 0 || d->ow <= 0 || d->pad_top < 0 || d->pad_left < 0)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: bad convolution descriptor (input %dx%dx%dx%d, kernel %dx%dx%dx%d, strides "
                           "%dx%d, dilation %dx%d, pad %d,%d, output %dx%d): every size must be positive and padding "
                           ">= 0",
                           what, d->n, d->h, d->w, d->c, d->kh, d->kw, d->c, d->f, d->sh, d->sw, d->dh, d->dw,
                           d->pad_top, d->pad_left, d->oh, d->ow);
    if ((int64_t)d->n * d->h * d->w * d->c > INT32_MAX || (int64_t)d->n * d->oh * d->ow * d->f > INT32_MAX ||
        (int64_t)d->kh * d->kw * d->c * d->f > INT32_MAX)
        return kc__cu_fail(be, KC_STATUS_UNSUPPORTED,
                           "cuda %s: a tensor of this convolution has more than 2^31 elements; use a smaller batch",
                           what);
    return KC_STATUS_OK;
}

static void entry_free(kc_cu_conv *e) {
    if (!e) return;
    if (e->xd) cudnnDestroyTensorDescriptor(e->xd);
    if (e->yd) cudnnDestroyTensorDescriptor(e->yd);
    if (e->wd) cudnnDestroyFilterDescriptor(e->wd);
    if (e->cd) cudnnDestroyConvolutionDescriptor(e->cd);
    free(e);
}

void kc__cu_conv_shutdown(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    for (int i = 0; i < c->n_conv; i++) entry_free(c->conv[i]);
    free(c->conv);
    c->conv = NULL;
    c->n_conv = c->cap_conv = 0;
}

/* Record a set-up failure in the entry (returned by every later call) and return it. */
static kc_status entry_fail(kc_backend *be, kc_cu_conv *e, kc_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static kc_status entry_fail(kc_backend *be, kc_cu_conv *e, kc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = s;
    return kc__cu_fail(be, s, "%s", e->msg);
}

/* cuDNN's failure as a status: its allocation failures are out-of-memory (not remembered) */
static kc_status dnn_status(cudnnStatus_t st) {
    return st == CUDNN_STATUS_ALLOC_FAILED ? KC_STATUS_OUT_OF_MEMORY : KC_STATUS_DEVICE;
}

#define DNN(e_, what, call)                                                                                       \
    do {                                                                                                          \
        cudnnStatus_t st_ = (call);                                                                               \
        if (st_ != CUDNN_STATUS_SUCCESS)                                                                          \
            return entry_fail(be, (e_), dnn_status(st_), "%s: cuDNN %s failed: %s", be->device, what,            \
                              cudnnGetErrorString(st_));                                                          \
    } while (0)

static kc_status make_descriptors(kc_backend *be, kc_cu_conv *e) {
    const kc_conv2d_desc *d = &e->d;
    DNN(e, "cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&e->xd));
    DNN(e, "cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&e->yd));
    DNN(e, "cudnnCreateFilterDescriptor", cudnnCreateFilterDescriptor(&e->wd));
    DNN(e, "cudnnCreateConvolutionDescriptor", cudnnCreateConvolutionDescriptor(&e->cd));
    DNN(e, "cudnnSetTensor4dDescriptor (output)",
        cudnnSetTensor4dDescriptor(e->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n, d->f, d->oh, d->ow));
    /* KRSC: (F, KH, KW, C) */
    DNN(e, "cudnnSetFilter4dDescriptor",
        cudnnSetFilter4dDescriptor(e->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, d->f, d->c, d->kh, d->kw));
    for (int attempt = 0; attempt < 2; attempt++) {
        e->padded = attempt == 1;
        int h = d->h, w = d->w, ph = d->pad_top, pw = d->pad_left;
        if (e->padded) {
            e->hp = h = (d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1;
            e->wp = w = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1;
            ph = pw = 0;
        }
        DNN(e, "cudnnSetTensor4dDescriptor (input)",
            cudnnSetTensor4dDescriptor(e->xd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n, d->c, h, w));
        DNN(e, "cudnnSetConvolution2dDescriptor",
            cudnnSetConvolution2dDescriptor(e->cd, ph, pw, d->sh, d->sw, d->dh, d->dw, CUDNN_CROSS_CORRELATION,
                                            CUDNN_DATA_FLOAT));
        int on = 0, oc = 0, oh = 0, ow = 0;
        cudnnStatus_t st = cudnnGetConvolution2dForwardOutputDim(e->cd, e->xd, e->wd, &on, &oc, &oh, &ow);
        if (st == CUDNN_STATUS_SUCCESS && on == d->n && oc == d->f && oh == d->oh && ow == d->ow) return KC_STATUS_OK;
    }
    return entry_fail(be, e, KC_STATUS_UNSUPPORTED,
                      "%s: cuDNN cannot express this convolution (input %dx%d, kernel %dx%d, strides %dx%d, dilation "
                      "%dx%d, pad %d,%d, output %dx%d)",
                      be->device, d->h, d->w, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw, d->pad_top, d->pad_left,
                      d->oh, d->ow);
}

/* cuDNN's ranked list of algorithms for one direction: heuristics or measured. */
static cudnnStatus_t query(kc_cu_ctx *c, kc_cu_conv *e, int dir, bool find, perf *out, int *n) {
    int got = 0;
    cudnnStatus_t st;
    *n = 0;
    if (dir == DIR_FWD) {
        cudnnConvolutionFwdAlgoPerf_t p[KC_CU_MAX_CAND];
        st = find ? cudnnFindConvolutionForwardAlgorithm(c->dnn, e->xd, e->wd, e->cd, e->yd, KC_CU_MAX_CAND, &got, p)
                  : cudnnGetConvolutionForwardAlgorithm_v7(c->dnn, e->xd, e->wd, e->cd, e->yd, KC_CU_MAX_CAND, &got, p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            out[i] = (perf){(int)p[i].algo, p[i].status, p[i].time, p[i].memory, p[i].determinism, p[i].mathType};
    } else if (dir == DIR_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t p[KC_CU_MAX_CAND];
        st = find ? cudnnFindConvolutionBackwardDataAlgorithm(c->dnn, e->wd, e->yd, e->cd, e->xd, KC_CU_MAX_CAND, &got, p)
                  : cudnnGetConvolutionBackwardDataAlgorithm_v7(c->dnn, e->wd, e->yd, e->cd, e->xd, KC_CU_MAX_CAND, &got,
                                                                p);
        for (int i = 0; st == CUDNN_STATUS_SUCCESS && i < got; i++)
            out[i] = (perf){(int)p[i].algo, p[i].status, p[i].time, p[i].memory, p[i].determinism, p[i].mathType};
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[KC_CU_MAX_CAND];
        st = find ? cudnnFindConvolutionBackwardFilterAlgorithm(c->dnn, e->xd, e->yd, e->cd, e->wd, KC_CU_MAX_CAND, &got,
                                                                p)
                  : cudnnGetConvolutionBackwardFilterAlgorithm_v7(c->dnn, e->xd, e->yd, e->cd, e->wd, KC_CU_MAX_CAND,
                                                                  &got, p);
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
 * math type) and report a workspace size within the limit, in cuDNN's order. */
static void accept(kc_backend *be, kc_cu_conv *e, int dir, const perf *p, int np, int pass, int *skipped_det,
                   int *skipped_ws) {
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
        for (int k = 0; k < cd->n; k++) dup = dup || (cd->algo[k] == p[i].algo && cd->math[k] == math);
        if (dup) continue;
        size_t sz = 0;
        if (cudnnSetConvolutionMathType(e->cd, math) != CUDNN_STATUS_SUCCESS) continue;
        if (ws_size(c, e, dir, p[i].algo, &sz) != CUDNN_STATUS_SUCCESS) continue;
        if (sz > c->ws_limit) {
            (*skipped_ws)++;
            continue;
        }
        cd->algo[cd->n] = p[i].algo;
        cd->math[cd->n] = math;
        cd->ws[cd->n] = sz;
        cd->n++;
    }
}

static kc_status choose(kc_backend *be, kc_cu_conv *e) {
    kc_cu_ctx *c = kc__cu(be);
    const cudnnMathType_t base_math = c->tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    for (int dir = 0; dir < 3; dir++) {
        conv_dir *cd = &e->dir[dir];
        memset(cd, 0, sizeof *cd);
        perf p[KC_CU_MAX_CAND];
        int np = 0;
        DNN(e, "cudnnSetConvolutionMathType", cudnnSetConvolutionMathType(e->cd, base_math));
        cudnnStatus_t st = query(c, e, dir, c->benchmark, p, &np);
        if (st != CUDNN_STATUS_SUCCESS)
            return entry_fail(be, e, dnn_status(st), "%s: cuDNN could not rank the %s convolution algorithms (%s): %s",
                              be->device, dir_name[dir], c->benchmark ? "cudnnFind*, KERAC_CUDNN_BENCHMARK=1" : "cudnnGet*_v7",
                              cudnnGetErrorString(st));
        int skipped_det = 0, skipped_ws = 0;
        /* pass 0: plain fp32 (FMA math) unless TF32 is allowed; pass 1, only when pass 0
         * found nothing: cuDNN's default math for fp32 (which may use TF32 on Ampere and
         * newer), with a warning, rather than no convolution at all */
        accept(be, e, dir, p, np, 0, &skipped_det, &skipped_ws);
        if (cd->n == 0 && !c->tf32) {
            kc__cu_log(be, KC_LOG_WARNING,
                       "%s: cuDNN has no plain-fp32 (FMA) %s algorithm for convolution input %dx%dx%dx%d, kernel "
                       "%dx%d, %d filters; using its default math, which may round through TF32",
                       be->device, dir_name[dir], e->d.n, e->d.h, e->d.w, e->d.c, e->d.kh, e->d.kw, e->d.f);
            accept(be, e, dir, p, np, 1, &skipped_det, &skipped_ws);
        }
        if (cd->n == 0)
            return entry_fail(be, e, KC_STATUS_UNSUPPORTED,
                              "%s: cuDNN offers no usable %s algorithm for convolution input %dx%dx%dx%d, kernel "
                              "%dx%d, %d filters, strides %dx%d, dilation %dx%d (%d ranked%s%s)",
                              be->device, dir_name[dir], e->d.n, e->d.h, e->d.w, e->d.c, e->d.kh, e->d.kw, e->d.f,
                              e->d.sh, e->d.sw, e->d.dh, e->d.dw, np,
                              skipped_det ? "; KERAC_DETERMINISTIC=1 excluded some: try without --deterministic" : "",
                              skipped_ws ? "; some need more workspace than KERAC_CUDNN_WORKSPACE_LIMIT allows" : "");
    }
    const kc_conv2d_desc *d = &e->d;
    const size_t kdim = (size_t)d->kh * d->kw * d->c;
    e->off_pad = kc__cu_align(kdim * (size_t)d->f * sizeof(float));
    e->off_algo = e->off_pad + (e->padded ? kc__cu_align((size_t)d->n * e->hp * e->wp * d->c * sizeof(float)) : 0);
    e->algo_ws = KC_CU_MAX(e->dir[0].ws[0], KC_CU_MAX(e->dir[1].ws[0], e->dir[2].ws[0]));
    e->total = KC_CU_ALIGN + e->off_algo + kc__cu_align(e->algo_ws);
    char w0[32], w1[32], w2[32], wt[32];
    kc__cu_log(be, KC_LOG_DEBUG,
               "%s conv2d N=%d %dx%dx%d -> %dx%dx%d (kernel %dx%d, strides %dx%d, dilation %dx%d, pad %d,%d%s): "
               "forward %s [%s, %s], backward-data %s [%s, %s], backward-filter %s [%s, %s]; %s%s; workspace %s",
               be->device, d->n, d->h, d->w, d->c, d->oh, d->ow, d->f, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw,
               d->pad_top, d->pad_left, e->padded ? ", explicit asymmetric padding" : "",
               algo_name(0, e->dir[0].algo[0]), math_name(e->dir[0].math[0]), kc__cu_bytes(e->dir[0].ws[0], w0, sizeof w0),
               algo_name(1, e->dir[1].algo[0]), math_name(e->dir[1].math[0]), kc__cu_bytes(e->dir[1].ws[0], w1, sizeof w1),
               algo_name(2, e->dir[2].algo[0]), math_name(e->dir[2].math[0]), kc__cu_bytes(e->dir[2].ws[0], w2, sizeof w2),
               c->benchmark ? "measured (KERAC_CUDNN_BENCHMARK)" : "cuDNN heuristics",
               c->deterministic ? ", deterministic only" : "", kc__cu_bytes(e->total, wt, sizeof wt));
    return KC_STATUS_OK;
}

/* The entry for a shape: found, or made and its algorithms chosen. */
static kc_status entry_get(kc_backend *be, const kc_conv2d_desc *d, kc_cu_conv **out) {
    kc_cu_ctx *c = kc__cu(be);
    *out = NULL;
    for (int i = 0; i < c->n_conv; i++)
        if (memcmp(&c->conv[i]->d, d, sizeof *d) == 0) {
            kc_cu_conv *e = c->conv[i];
            if (e->status != KC_STATUS_OK) return kc__cu_fail(be, e->status, "%s", e->msg);
            *out = e;
            return KC_STATUS_OK;
        }
    if (c->n_conv == c->cap_conv) {
        int nc = c->cap_conv ? 2 * c->cap_conv : 16;
        kc_cu_conv **p = realloc(c->conv, (size_t)nc * sizeof *p);
        if (!p) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory caching convolution shapes");
        c->conv = p;
        c->cap_conv = nc;
    }
    KC_TRY(kc__cu_enter(be));
    kc_cu_conv *e = calloc(1, sizeof *e);
    if (!e) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory caching convolution shapes");
    e->d = *d;
    c->conv[c->n_conv++] = e; /* kept when set-up fails: the failure is remembered ... */
    kc_status s = make_descriptors(be, e);
    if (s == KC_STATUS_OK) s = choose(be, e);
    if (s == KC_STATUS_OUT_OF_MEMORY) { /* ... unless it may pass later, with memory freed */
        c->n_conv--;
        entry_free(e);
    }
    if (s != KC_STATUS_OK) return s;
    *out = e;
    return KC_STATUS_OK;
}

size_t kc__cu_conv2d_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    if (!d || d->n <= 0 || d->h <= 0 || d->w <= 0 || d->c <= 0 || d->f <= 0 || d->kh <= 0 || d->kw <= 0 ||
        d->oh <= 0 || d->ow <= 0)
        return 0;
    kc_cu_conv *e = NULL;
    if (entry_get(be, d, &e) != KC_STATUS_OK) return 0; /* the calls will report the failure */
    return e->total;
}

/* Workspace slices of an entry, and the bytes left for cuDNN's own (*avail); fails when the
 * caller gave none, or too little for the transposed kernel and the padded input. */
static kc_status slices(kc_backend *be, kc_cu_conv *e, void *ws, size_t ws_bytes, const char *what, float **wt,
                        float **pad, void **algo_ws, size_t *avail) {
    if (!ws)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: no workspace given (needs %zu bytes from conv2d_workspace)", what, e->total);
    char *base = (char *)(((uintptr_t)ws + KC_CU_ALIGN - 1) & ~(uintptr_t)(KC_CU_ALIGN - 1));
    size_t fixed = (size_t)(base - (char *)ws) + e->off_algo;
    if (ws_bytes < fixed)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                           "cuda %s: a workspace of %zu bytes is too small (conv2d_workspace asks %zu for this "
                           "convolution)", what, ws_bytes, e->total);
    *wt = (float *)base;
    *pad = (float *)(base + e->off_pad);
    *algo_ws = base + e->off_algo;
    *avail = ws_bytes - fixed;
    return KC_STATUS_OK;
}

static cudnnStatus_t run(kc_cu_ctx *c, kc_cu_conv *e, int dir, int k, const void *in0, const void *in1, void *out,
                         void *algo_ws) {
    const float one = 1.0f, zero = 0.0f;
    conv_dir *cd = &e->dir[dir];
    cudnnStatus_t st = cudnnSetConvolutionMathType(e->cd, cd->math[k]);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (dir == DIR_FWD) /* in0 = x, in1 = w */
        return cudnnConvolutionForward(c->dnn, &one, e->xd, in0, e->wd, in1, e->cd,
                                       (cudnnConvolutionFwdAlgo_t)cd->algo[k], algo_ws, cd->ws[k], &zero, e->yd, out);
    if (dir == DIR_BWD_DATA) /* in0 = w, in1 = dy */
        return cudnnConvolutionBackwardData(c->dnn, &one, e->wd, in0, e->yd, in1, e->cd,
                                            (cudnnConvolutionBwdDataAlgo_t)cd->algo[k], algo_ws, cd->ws[k], &zero, e->xd,
                                            out);
    /* in0 = x, in1 = dy */
    return cudnnConvolutionBackwardFilter(c->dnn, &one, e->xd, in0, e->yd, in1, e->cd,
                                          (cudnnConvolutionBwdFilterAlgo_t)cd->algo[k], algo_ws, cd->ws[k], &zero, e->wd,
                                          out);
}

/* The best-ranked candidate from `from` on that cuDNN has not refused and whose workspace
 * fits avail bytes (-1: none). */
static int fitting(const conv_dir *cd, int from, size_t avail) {
    for (int k = from; k < cd->n; k++)
        if (!cd->refused[k] && cd->ws[k] <= avail) return k;
    return -1;
}

/* Run one direction with the best-ranked algorithm that fits the caller's workspace; one
 * that cuDNN refuses (NOT_SUPPORTED) is not tried again. */
static kc_status run_dir(kc_backend *be, kc_cu_conv *e, int dir, const void *in0, const void *in1, void *out,
                         void *algo_ws, size_t avail) {
    kc_cu_ctx *c = kc__cu(be);
    conv_dir *cd = &e->dir[dir];
    int k = fitting(cd, 0, avail);
    if (k < 0) {
        char b1[32], b2[32];
        size_t least = cd->ws[0];
        int refused = 0;
        for (int i = 0; i < cd->n; i++) {
            least = KC_CU_MIN(least, cd->ws[i]);
            refused += cd->refused[i];
        }
        return kc__cu_fail(be, refused == cd->n ? KC_STATUS_DEVICE : KC_STATUS_INVALID_ARGUMENT,
                           "%s: no %s convolution algorithm for batch %d fits the %s of workspace left (the smallest "
                           "needs %s; %d of %d refused by cuDNN at run time); report this with the "
                           "KERAC_LOG_LEVEL=debug output",
                           be->device, dir_name[dir], e->d.n, kc__cu_bytes(avail, b1, sizeof b1),
                           kc__cu_bytes(least, b2, sizeof b2), refused, cd->n);
    }
    cudnnStatus_t st = run(c, e, dir, k, in0, in1, out, algo_ws);
    while (st == CUDNN_STATUS_NOT_SUPPORTED) {
        int next = fitting(cd, k + 1, avail);
        if (next < 0) break;
        kc__cu_log(be, KC_LOG_WARNING, "%s: cuDNN refused the %s convolution algorithm %s at run time; using %s",
                   be->device, dir_name[dir], algo_name(dir, cd->algo[k]), algo_name(dir, cd->algo[next]));
        cd->refused[k] = true;
        k = next;
        st = run(c, e, dir, k, in0, in1, out, algo_ws);
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        return kc__cu_fail(be, KC_STATUS_DEVICE, "%s: cuDNN convolution %s (%s) failed: %s%s%s", be->device,
                           dir_name[dir], algo_name(dir, cd->algo[k]), cudnnGetErrorString(st),
                           detail[0] ? ": " : "", detail);
    }
    return kc__cu_launched(be, dir == DIR_FWD ? "convolution forward"
                               : dir == DIR_BWD_DATA ? "convolution backward-data" : "convolution backward-filter",
                           cudaSuccess);
}

kc_status kc__cu_conv2d_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_forward"));
    if (!x || !w || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_forward: NULL x, kernel or y");
    kc_cu_conv *e = NULL;
    KC_TRY(entry_get(be, d, &e));
    float *wt = NULL, *pad = NULL;
    void *algo_ws = NULL;
    size_t avail = 0;
    KC_TRY(slices(be, e, ws, ws_bytes, "conv2d_forward", &wt, &pad, &algo_ws, &avail));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const int kdim = d->kh * d->kw * d->c;
    KC_TRY(kc__cu_launched(be, "conv2d forward: kernel transpose", kc__k_transpose(L, w, wt, kdim, d->f)));
    const float *xin = x;
    if (e->padded) {
        KC_TRY(kc__cu_launched(be, "conv2d forward: padding",
                               kc__k_window_copy(L, x, pad, d->n, d->h, d->w, d->c, e->hp, e->wp, d->pad_top,
                                                  d->pad_left)));
        xin = pad;
    }
    KC_TRY(run_dir(be, e, DIR_FWD, xin, wt, y, algo_ws, avail));
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    if (b) KC_TRY(kc__cu_launched(be, "conv2d forward: bias", kc__k_bias_add(L, y, b, rows, d->f)));
    if (d->relu) /* the layer's fused ReLU: the activation kernel, in place */
        return kc__cu_act_forward(be, (kc_act_params){.kind = KC_ACT_RELU}, y, y, rows * d->f, d->f);
    return KC_STATUS_OK;
}

kc_status kc__cu_conv2d_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                      float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_backward_data"));
    if (!dy || !w || !dx)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_backward_data: NULL dy, kernel or dx");
    kc_cu_conv *e = NULL;
    KC_TRY(entry_get(be, d, &e));
    float *wt = NULL, *pad = NULL;
    void *algo_ws = NULL;
    size_t avail = 0;
    KC_TRY(slices(be, e, ws, ws_bytes, "conv2d_backward_data", &wt, &pad, &algo_ws, &avail));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const int kdim = d->kh * d->kw * d->c;
    KC_TRY(kc__cu_launched(be, "conv2d backward-data: kernel transpose", kc__k_transpose(L, w, wt, kdim, d->f)));
    KC_TRY(run_dir(be, e, DIR_BWD_DATA, wt, dy, e->padded ? (void *)pad : (void *)dx, algo_ws, avail));
    if (e->padded)
        return kc__cu_launched(be, "conv2d backward-data: cropping",
                               kc__k_window_crop(L, pad, dx, d->n, d->h, d->w, d->c, e->hp, e->wp, d->pad_top,
                                                  d->pad_left));
    return KC_STATUS_OK;
}

kc_status kc__cu_conv2d_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                        float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_backward_filter"));
    if (!x || !dy || !dw)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_backward_filter: NULL x, dy or dw");
    kc_cu_conv *e = NULL;
    KC_TRY(entry_get(be, d, &e));
    float *dwt = NULL, *pad = NULL;
    void *algo_ws = NULL;
    size_t avail = 0;
    KC_TRY(slices(be, e, ws, ws_bytes, "conv2d_backward_filter", &dwt, &pad, &algo_ws, &avail));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const float *xin = x;
    if (e->padded) {
        KC_TRY(kc__cu_launched(be, "conv2d backward-filter: padding",
                               kc__k_window_copy(L, x, pad, d->n, d->h, d->w, d->c, e->hp, e->wp, d->pad_top,
                                                  d->pad_left)));
        xin = pad;
    }
    KC_TRY(run_dir(be, e, DIR_BWD_FILTER, xin, dy, dwt, algo_ws, avail));
    const int kdim = d->kh * d->kw * d->c;
    /* dW (K, F) = dW^T (F, K) transposed */
    KC_TRY(kc__cu_launched(be, "conv2d backward-filter: kernel transpose", kc__k_transpose(L, dwt, dw, d->f, kdim)));
    if (db) return kc__cu_bias_grad(be, dy, db, (int64_t)d->n * d->oh * d->ow, d->f);
    return KC_STATUS_OK;
}
