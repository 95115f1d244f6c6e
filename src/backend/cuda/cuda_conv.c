/* cuda_conv.c — 2-D convolution through cuDNN (the v7-style calls, still in cuDNN 9; this
 * file and cuda_conv_algo.c, which chooses the algorithms, are the only ones that know
 * them, so moving to the graph API stays local).
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
 * Algorithms: chosen per shape by cuda_conv_algo.c (cuDNN's heuristics, or measured with
 * KERAC_CUDNN_BENCHMARK=1); a call runs the first not refused that fits its workspace.
 *
 * Statuses: cuDNN's failed allocations (host 4003, device 4004) are out of memory: the
 * shape is not remembered as broken, and fit's recovery runs. Every other set-up failure
 * is remembered and repeated by each later call of that shape. At most KC_CU_CONV_CACHE
 * shapes are kept; the one used least recently goes first.
 *
 * Workspace (conv2d_workspace, and the grouped convolutions' below), from a 256-byte aligned start:
 *   [kernel (F, K) transposed][padded input (N, HP, WP, C), only when padded][cuDNN's]
 * cuDNN's part is the largest need of the three directions: the best-ranked candidate not
 * refused (under KERAC_CUDNN_BENCHMARK before measuring: the largest, so that measuring
 * can try every candidate); it is recomputed after a refusal or a measurement. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_conv.h"

_Static_assert((int)KC_DNN_NOT_SUPPORTED == (int)CUDNN_STATUS_NOT_SUPPORTED &&
                   KC_DNN_CATEGORY((int)CUDNN_STATUS_NOT_SUPPORTED_PADDING) == (int)CUDNN_STATUS_NOT_SUPPORTED &&
                   (int)KC_DNN_HOST_ALLOCATION_FAILED == (int)CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED &&
                   (int)KC_DNN_DEVICE_ALLOCATION_FAILED == (int)CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED &&
                   (int)KC_DNN_SUBLIBRARY_LOADING_FAILED == (int)CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED,
               "cuda_rules.h's cuDNN statuses differ from cudnn_graph_v9.h");

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

kc_status kc__cu_conv_fail(kc_backend *be, kc_cu_conv *e, kc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->status = s;
    return kc__cu_fail(be, s, "%s", e->msg);
}

static kc_status make_descriptors(kc_backend *be, kc_cu_conv *e) {
    const kc_conv2d_desc *d = &e->d;
    DNN(e, "cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&e->xd));
    DNN(e, "cudnnCreateTensorDescriptor", cudnnCreateTensorDescriptor(&e->yd));
    DNN(e, "cudnnCreateFilterDescriptor", cudnnCreateFilterDescriptor(&e->wd));
    DNN(e, "cudnnCreateConvolutionDescriptor", cudnnCreateConvolutionDescriptor(&e->cd));
    DNN(e, "cudnnSetTensor4dDescriptor (output)",
        cudnnSetTensor4dDescriptor(e->yd, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, d->n, d->f, d->oh, d->ow));
    /* KRSC: (F, KH, KW, C / groups) */
    DNN(e, "cudnnSetFilter4dDescriptor",
        cudnnSetFilter4dDescriptor(e->wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, d->f, d->c / e->groups, d->kh, d->kw));
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
        if (e->groups > 1)
            DNN(e, "cudnnSetConvolutionGroupCount", cudnnSetConvolutionGroupCount(e->cd, e->groups));
        int on = 0, oc = 0, oh = 0, ow = 0;
        cudnnStatus_t st = cudnnGetConvolution2dForwardOutputDim(e->cd, e->xd, e->wd, &on, &oc, &oh, &ow);
        if (st == CUDNN_STATUS_SUCCESS && on == d->n && oc == d->f && oh == d->oh && ow == d->ow) return KC_STATUS_OK;
    }
    return kc__cu_conv_fail(be, e, KC_STATUS_UNSUPPORTED,
                            "%s: cuDNN cannot express this convolution (input %dx%d, kernel %dx%d, strides %dx%d, dilation "
                            "%dx%d, pad %d,%d, output %dx%d)",
                            be->device, d->h, d->w, d->kh, d->kw, d->sh, d->sw, d->dh, d->dw, d->pad_top, d->pad_left,
                            d->oh, d->ow);
}

/* Room for one more entry: the least recently used goes when the cache is full. */
static kc_status entry_room(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    if (c->n_conv >= KC_CU_CONV_CACHE) {
        uint64_t use[KC_CU_CONV_CACHE];
        for (int i = 0; i < c->n_conv; i++) use[i] = c->conv[i]->last_use;
        int v = kc__cu_lru_victim(use, c->n_conv, -1);
        entry_free(c->conv[v]);
        c->conv[v] = c->conv[--c->n_conv];
    }
    if (c->n_conv < c->cap_conv) return KC_STATUS_OK;
    int nc = c->cap_conv ? 2 * c->cap_conv : 16;
    kc_cu_conv **p = realloc(c->conv, (size_t)nc * sizeof *p);
    if (!p) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory caching convolution shapes");
    c->conv = p;
    c->cap_conv = nc;
    return KC_STATUS_OK;
}

static kc_cu_conv *entry_find(kc_cu_ctx *c, const kc_conv2d_desc *d, int groups) {
    for (int i = 0; i < c->n_conv; i++)
        if (c->conv[i]->groups == groups && memcmp(&c->conv[i]->d, d, sizeof *d) == 0) return c->conv[i];
    return NULL;
}

/* The entry for a shape: found, or made and its algorithms chosen. */
static kc_status entry_get(kc_backend *be, const kc_conv2d_desc *d, int groups, kc_cu_conv **out) {
    kc_cu_ctx *c = kc__cu(be);
    *out = NULL;
    kc_cu_conv *e = entry_find(c, d, groups);
    if (e) {
        e->last_use = ++c->conv_clock;
        if (e->status != KC_STATUS_OK) return kc__cu_fail(be, e->status, "%s", e->msg);
        *out = e;
        return KC_STATUS_OK;
    }
    KC_TRY(entry_room(be));
    KC_TRY(kc__cu_enter(be));
    e = calloc(1, sizeof *e);
    if (!e) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory caching convolution shapes");
    e->d = *d;
    e->groups = groups;
    e->last_use = ++c->conv_clock;
    c->conv[c->n_conv++] = e; /* kept when set-up fails: the failure is remembered ... */
    kc_status s = make_descriptors(be, e);
    if (s == KC_STATUS_OK) s = kc__cu_conv_choose(be, e);
    if (s == KC_STATUS_OUT_OF_MEMORY) { /* ... unless it may pass later, with memory freed */
        c->n_conv--;
        entry_free(e);
    }
    if (s != KC_STATUS_OK) return s;
    *out = e;
    return KC_STATUS_OK;
}

/* A descriptor the workspace can be sized for (the calls report what is wrong with others). */
static bool ws_desc_ok(const kc_conv2d_desc *d, int groups) {
    return d && d->n > 0 && d->h > 0 && d->w > 0 && d->c > 0 && d->f > 0 && d->kh > 0 && d->kw > 0 && d->oh > 0 &&
           d->ow > 0 && groups > 0 && d->c % groups == 0 && d->f % groups == 0;
}

/* The workspace of a shape into *total, and the status of its set-up: 0 bytes when cuDNN
 * cannot run it (the calls report that, or the grouped ones run the module's kernels). */
static kc_status conv_workspace(kc_backend *be, const kc_conv2d_desc *d, int groups, size_t *total) {
    kc_cu_conv *e = NULL;
    kc_status s = entry_get(be, d, groups, &e);
    *total = 0;
    if (s == KC_STATUS_OK) {
        e->plan_stamp = ++kc__cu(be)->plan_clock; /* the batch size a measurement is for */
        *total = e->total;
    } else if (s == KC_STATUS_OUT_OF_MEMORY) {
        /* out of memory setting up: it may pass later. Reserve the slices kerac knows without
         * cuDNN (padding assumed); a call takes cuDNN's part from the allocator if it must */
        int hp = (d->oh - 1) * d->sh + (d->kh - 1) * d->dh + 1, wp = (d->ow - 1) * d->sw + (d->kw - 1) * d->dw + 1;
        *total = KC_CU_ALIGN + kc__cu_conv_slices(d, groups, true, KC_CU_MAX(hp, d->h), KC_CU_MAX(wp, d->w), NULL);
    }
    return s;
}

size_t kc__cu_conv2d_workspace(kc_backend *be, const kc_conv2d_desc *d) {
    size_t total = 0;
    if (ws_desc_ok(d, 1)) conv_workspace(be, d, 1, &total);
    return total;
}

/* ---------------------------------------------------------------- one call */

typedef struct conv_call {
    kc_cu_conv *e;
    float *wt, *pad;   /* the transposed kernel (or its gradient), the padded input */
    void *algo_ws;     /* cuDNN's part of the caller's workspace */
    size_t avail;      /* its bytes */
    void *borrowed[2]; /* blocks taken from the allocator for this call: slices, cuDNN's */
} conv_call;

/* A block of the allocator for this call (the previous one in that place goes back; the
 * allocator is stream-ordered, so later work only reuses it after this call's). */
static kc_status borrow(kc_backend *be, conv_call *cc, int which, size_t bytes, const char *why) {
    kc__cu_free(be, cc->borrowed[which]);
    cc->borrowed[which] = NULL;
    KC_TRY(kc__cu_alloc(be, KC_CU_MAX(bytes, (size_t)1), &cc->borrowed[which]));
    if (!cc->e->warned_borrow) {
        char b[32];
        cc->e->warned_borrow = true;
        kc__cu_log(be, KC_LOG_WARNING,
                   "%s: convolution N=%d %dx%dx%d -> %dx%dx%d needs more workspace than planned (%s: %s); taking it "
                   "from the allocator for each call until the model is planned again",
                   be->device, cc->e->d.n, cc->e->d.h, cc->e->d.w, cc->e->d.c, cc->e->d.oh, cc->e->d.ow, cc->e->d.f,
                   why, kc__cu_bytes(bytes, b, sizeof b));
    }
    return KC_STATUS_OK;
}

static void call_end(kc_backend *be, conv_call *cc) {
    for (int i = 0; i < 2; i++) kc__cu_free(be, cc->borrowed[i]);
}

/* The entry and the workspace slices of a call; the caller's workspace when it holds the
 * transposed kernel and the padded input, else (a plan made before the set-up could ask
 * cuDNN) a block from the allocator. */
static kc_status call_begin(kc_backend *be, const kc_conv2d_desc *d, int groups, void *ws, size_t ws_bytes,
                            conv_call *cc) {
    memset(cc, 0, sizeof *cc);
    KC_TRY(entry_get(be, d, groups, &cc->e));
    kc_cu_conv *e = cc->e;
    char *base = ws ? (char *)(((uintptr_t)ws + KC_CU_ALIGN - 1) & ~(uintptr_t)(KC_CU_ALIGN - 1)) : NULL;
    size_t fixed = base ? (size_t)(base - (char *)ws) + e->off_algo : SIZE_MAX;
    if (!base || ws_bytes < fixed) {
        KC_TRY(borrow(be, cc, 0, e->off_algo, ws ? "the workspace given is smaller than the kernel and padding slices"
                                                 : "no workspace given"));
        base = cc->borrowed[0]; /* the allocator's blocks start on 256 bytes */
        fixed = e->off_algo;
        ws_bytes = fixed;
    }
    cc->wt = (float *)base;
    cc->pad = (float *)(base + e->off_pad);
    cc->algo_ws = base + e->off_algo;
    cc->avail = ws_bytes - fixed;
    return KC_STATUS_OK;
}

static cudnnStatus_t run(kc_cu_ctx *c, kc_cu_conv *e, int dir, int k, const conv_bufs *b) {
    const float one = 1.0f, zero = 0.0f;
    conv_dir *cd = &e->dir[dir];
    cudnnStatus_t st = cudnnSetConvolutionMathType(e->cd, (cudnnMathType_t)cd->math[k]);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    if (dir == DIR_FWD) /* in0 = x, in1 = w */
        return cudnnConvolutionForward(c->dnn, &one, e->xd, b->in0, e->wd, b->in1, e->cd,
                                       (cudnnConvolutionFwdAlgo_t)cd->algo[k], b->ws, cd->ws[k], &zero, e->yd, b->out);
    if (dir == DIR_BWD_DATA) /* in0 = w, in1 = dy */
        return cudnnConvolutionBackwardData(c->dnn, &one, e->wd, b->in0, e->yd, b->in1, e->cd,
                                            (cudnnConvolutionBwdDataAlgo_t)cd->algo[k], b->ws, cd->ws[k], &zero, e->xd,
                                            b->out);
    /* in0 = x, in1 = dy */
    return cudnnConvolutionBackwardFilter(c->dnn, &one, e->xd, b->in0, e->yd, b->in1, e->cd,
                                          (cudnnConvolutionBwdFilterAlgo_t)cd->algo[k], b->ws, cd->ws[k], &zero, e->wd,
                                          b->out);
}

/* Run one direction with the best-ranked algorithm not refused that fits the workspace
 * (cuda_rules.c: kc__cu_pick); a refusal moves on to the next, for good. */
static kc_status run_dir(kc_backend *be, conv_call *cc, int dir, const void *in0, const void *in1, void *out) {
    kc_cu_ctx *c = kc__cu(be);
    kc_cu_conv *e = cc->e;
    conv_dir *cd = &e->dir[dir];
    conv_bufs b = {in0, in1, out, cc->algo_ws, cc->avail};
    kc__cu_conv_measure_maybe(be, e, dir, &b);
    size_t more = 0;
    int k = kc__cu_pick(cd, cc->avail, &more), last = -1;
    cudnnStatus_t st = CUDNN_STATUS_NOT_SUPPORTED;
    while (k >= 0) {
        b.ws = cc->algo_ws;
        if (more) {
            KC_TRY(borrow(be, cc, 1, more, "the plan predates a refused algorithm or a set-up retried"));
            b.ws = cc->borrowed[1];
        }
        st = run(c, e, dir, last = k, &b);
        if (!kc__cu_dnn_refused((int)st)) break;
        cd->refused[k] = true;
        kc__cu_conv_update_total(c, e); /* the next plan reserves what the remaining ones need */
        k = kc__cu_pick(cd, cc->avail, &more);
        kc__cu_log(be, KC_LOG_WARNING, "%s: cuDNN refused the %s convolution algorithm %s at run time (%s)%s%s",
                   be->device, kc__cu_conv_dir_name(dir), kc__cu_conv_algo_name(dir, cd->algo[last]),
                   cudnnGetErrorString(st), k >= 0 ? "; using " : "", k >= 0 ? kc__cu_conv_algo_name(dir, cd->algo[k]) : "");
    }
    if (st != CUDNN_STATUS_SUCCESS) {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        kc_status s = kc__cu_dnn_status((int)st);
        return kc__cu_fail(be, s, "%s: cuDNN convolution %s (%s%s) failed: %s%s%s%s", be->device,
                           kc__cu_conv_dir_name(dir),
                           last >= 0 ? kc__cu_conv_algo_name(dir, cd->algo[last]) : "no algorithm",
                           k < 0 ? ", every candidate refused" : "", cudnnGetErrorString(st), detail[0] ? ": " : "",
                           detail,
                           s == KC_STATUS_OUT_OF_MEMORY ? "; lower the batch size"
                           : k < 0                      ? "; report this with the KERAC_LOG_LEVEL=debug output"
                                                        : "");
    }
    return kc__cu_launched(be, dir == DIR_FWD ? "convolution forward"
                               : dir == DIR_BWD_DATA ? "convolution backward-data" : "convolution backward-filter",
                           cudaSuccess);
}

/* The three directions, for groups 1 (conv2d_*) and grouped convolutions (below). */
static kc_status conv_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x, const float *w,
                              const float *b, float *y, void *ws, size_t ws_bytes) {
    conv_call cc;
    KC_TRY(call_begin(be, d, groups, ws, ws_bytes, &cc));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const int kdim = d->kh * d->kw * (d->c / groups);
    kc_status s = kc__cu_launched(be, "conv2d forward: kernel transpose", kc__k_transpose(L, w, cc.wt, kdim, d->f));
    const float *xin = x;
    if (s == KC_STATUS_OK && cc.e->padded) {
        s = kc__cu_launched(be, "conv2d forward: padding", kc__k_window_copy(L, x, cc.pad, d->n, d->h, d->w, d->c,
                                                                             cc.e->hp, cc.e->wp, d->pad_top, d->pad_left));
        xin = cc.pad;
    }
    if (s == KC_STATUS_OK) s = run_dir(be, &cc, DIR_FWD, xin, cc.wt, y);
    call_end(be, &cc);
    KC_TRY(s);
    const int64_t rows = (int64_t)d->n * d->oh * d->ow;
    if (b) KC_TRY(kc__cu_launched(be, "conv2d forward: bias", kc__k_bias_add(L, y, b, rows, d->f)));
    if (d->relu) /* the layer's fused ReLU: the activation kernel, in place */
        return kc__cu_act_forward(be, (kc_act_params){.kind = KC_ACT_RELU}, y, y, rows * d->f, d->f);
    return KC_STATUS_OK;
}

static kc_status conv_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                    const float *w, float *dx, void *ws, size_t ws_bytes) {
    conv_call cc;
    KC_TRY(call_begin(be, d, groups, ws, ws_bytes, &cc));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const int kdim = d->kh * d->kw * (d->c / groups);
    kc_status s = kc__cu_launched(be, "conv2d backward-data: kernel transpose",
                                  kc__k_transpose(L, w, cc.wt, kdim, d->f));
    if (s == KC_STATUS_OK) s = run_dir(be, &cc, DIR_BWD_DATA, cc.wt, dy, cc.e->padded ? (void *)cc.pad : (void *)dx);
    if (s == KC_STATUS_OK && cc.e->padded)
        s = kc__cu_launched(be, "conv2d backward-data: cropping", kc__k_window_crop(L, cc.pad, dx, d->n, d->h, d->w,
                                                                                    d->c, cc.e->hp, cc.e->wp,
                                                                                    d->pad_top, d->pad_left));
    call_end(be, &cc);
    return s;
}

static kc_status conv_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                      const float *dy, float *dw, float *db, void *ws, size_t ws_bytes) {
    conv_call cc;
    KC_TRY(call_begin(be, d, groups, ws, ws_bytes, &cc));
    const kc_cu_launch *L = &kc__cu(be)->L;
    const float *xin = x;
    kc_status s = KC_STATUS_OK;
    if (cc.e->padded) {
        s = kc__cu_launched(be, "conv2d backward-filter: padding",
                            kc__k_window_copy(L, x, cc.pad, d->n, d->h, d->w, d->c, cc.e->hp, cc.e->wp, d->pad_top,
                                              d->pad_left));
        xin = cc.pad;
    }
    if (s == KC_STATUS_OK) s = run_dir(be, &cc, DIR_BWD_FILTER, xin, dy, cc.wt);
    const int kdim = d->kh * d->kw * (d->c / groups);
    /* dW (K, F) = dW^T (F, K) transposed */
    if (s == KC_STATUS_OK)
        s = kc__cu_launched(be, "conv2d backward-filter: kernel transpose", kc__k_transpose(L, cc.wt, dw, d->f, kdim));
    call_end(be, &cc);
    KC_TRY(s);
    if (db) return kc__cu_bias_grad(be, dy, db, (int64_t)d->n * d->oh * d->ow, d->f);
    return KC_STATUS_OK;
}

kc_status kc__cu_conv2d_forward(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_forward"));
    if (!x || !w || !y) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_forward: NULL x, kernel or y");
    return conv_forward(be, d, 1, x, w, b, y, ws, ws_bytes);
}

kc_status kc__cu_conv2d_backward_data(kc_backend *be, const kc_conv2d_desc *d, const float *dy, const float *w,
                                      float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_backward_data"));
    if (!dy || !w || !dx)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_backward_data: NULL dy, kernel or dx");
    return conv_backward_data(be, d, 1, dy, w, dx, ws, ws_bytes);
}

kc_status kc__cu_conv2d_backward_filter(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *dy,
                                        float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(conv_check(be, d, "conv2d_backward_filter"));
    if (!x || !dy || !dw)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda conv2d_backward_filter: NULL x, dy or dw");
    return conv_backward_filter(be, d, 1, x, dy, dw, db, ws, ws_bytes);
}

/* ---------------------------------------------------------------- grouped convolutions
 * Conv2D with groups > 1 and DepthwiseConv2D (groups = C) through cuDNN's group count, the
 * arguments checked by the callers (cuda_conv_grouped.c, cuda_depthwise.c). Their workspace
 * is planned as conv2d's (grouped_conv_workspace, depthwise_workspace: the same layout), and
 * 0 bytes when the module's own kernels run the shape (they need none). A shape cuDNN cannot
 * run (set-up refused, no usable algorithm, every one refused at run time) answers
 * KC_STATUS_UNSUPPORTED, is remembered (later calls answer at once) and logged once at debug
 * level: the caller runs the module's own kernels (kernels_grouped.cu). Out of memory is
 * returned as it is.
 * kc_device_opts.cudnn_grouped = KC_FALSE (KERAC_CUDNN_GROUPED=0) sends every shape to the module's kernels. */
static kc_status grouped_gate(kc_backend *be, const kc_conv2d_desc *d, int groups) {
    kc_cu_ctx *c = kc__cu(be);
    if (!c->dnn_grouped) return KC_STATUS_UNSUPPORTED;
    const kc_cu_conv *e = entry_find(c, d, groups);
    return e && e->status != KC_STATUS_OK && e->status != KC_STATUS_OUT_OF_MEMORY ? KC_STATUS_UNSUPPORTED
                                                                                  : KC_STATUS_OK;
}

static kc_status grouped_done(kc_backend *be, const kc_conv2d_desc *d, int groups, kc_status s) {
    if (s == KC_STATUS_OK || s == KC_STATUS_OUT_OF_MEMORY) return s;
    kc_cu_conv *e = entry_find(kc__cu(be), d, groups);
    if (e && e->status == KC_STATUS_OK) { /* refused at run time: remembered too */
        e->status = KC_STATUS_UNSUPPORTED;
        snprintf(e->msg, sizeof e->msg, "%s", kc__cu_last_error());
    }
    kc__cu_log(be, KC_LOG_DEBUG, "%s: grouped convolution N=%d %dx%dx%d -> %dx%dx%d (%d groups, kernel %dx%d) runs on "
               "kerac's own kernels: %s", be->device, d->n, d->h, d->w, d->c, d->oh, d->ow, d->f, groups, d->kh, d->kw,
               kc__cu_last_error());
    return KC_STATUS_UNSUPPORTED;
}

size_t kc__cu_dnn_grouped_workspace(kc_backend *be, const kc_conv2d_desc *d, int groups) {
    size_t total = 0;
    if (!ws_desc_ok(d, groups) || grouped_gate(be, d, groups) != KC_STATUS_OK) return 0;
    kc_status s = conv_workspace(be, d, groups, &total);
    if (s != KC_STATUS_OK) grouped_done(be, d, groups, s); /* the module's kernels: logged here, once */
    return total;
}

kc_status kc__cu_dnn_grouped_forward(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                     const float *w, const float *b, float *y, void *ws, size_t ws_bytes) {
    KC_TRY(grouped_gate(be, d, groups));
    return grouped_done(be, d, groups, conv_forward(be, d, groups, x, w, b, y, ws, ws_bytes));
}

kc_status kc__cu_dnn_grouped_backward_data(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                           const float *w, float *dx, void *ws, size_t ws_bytes) {
    KC_TRY(grouped_gate(be, d, groups));
    return grouped_done(be, d, groups, conv_backward_data(be, d, groups, dy, w, dx, ws, ws_bytes));
}

kc_status kc__cu_dnn_grouped_backward_filter(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                             const float *dy, float *dw, float *db, void *ws, size_t ws_bytes) {
    KC_TRY(grouped_gate(be, d, groups));
    return grouped_done(be, d, groups, conv_backward_filter(be, d, groups, x, dy, dw, db, ws, ws_bytes));
}

/* describe for KC_OP_CONV2D: per direction, the algorithm a call with ws_bytes of workspace
 * (from an aligned start) runs — the one run_dir takes (kc__cu_pick) — with its math type
 * and workspace. */
kc_status kc__cu_conv2d_describe(kc_backend *be, const kc_conv2d_desc *d, size_t ws_bytes, char *buf, size_t n) {
    KC_TRY(conv_check(be, d, "conv2d describe"));
    kc_cu_conv *e = NULL;
    KC_TRY(entry_get(be, d, 1, &e));
    const kc_cu_ctx *c = kc__cu(be);
    const size_t avail = ws_bytes > e->off_algo ? ws_bytes - e->off_algo : 0;
    size_t used = (size_t)snprintf(buf, n, "cuDNN");
    bool measured = false;
    for (int dir = 0; dir < 3 && used < n; dir++) {
        const conv_dir *cd = &e->dir[dir];
        size_t borrow = 0;
        const int k = kc__cu_pick(cd, avail, &borrow);
        char wb[32];
        measured = measured || (c->benchmark && cd->measured);
        if (k < 0)
            used += (size_t)snprintf(buf + used, n - used, "%s %s: every algorithm refused", dir ? "," : "",
                                     kc__cu_conv_dir_name(dir));
        else
            used += (size_t)snprintf(buf + used, n - used, "%s %s %s [%s, %s%s]", dir ? "," : "",
                                     kc__cu_conv_dir_name(dir),
                                     kc__cu_conv_algo_name(dir, cd->algo[k]), kc__cu_conv_math_name(cd->math[k]),
                                     kc__cu_bytes(cd->ws[k], wb, sizeof wb), borrow ? ", beyond the plan" : "");
    }
    if (used < n)
        snprintf(buf + used, n - used, "; %s%s%s", measured ? "measured (KERAC_CUDNN_BENCHMARK)" : "cuDNN heuristics",
                 c->deterministic ? ", deterministic only" : "", e->padded ? ", explicit asymmetric padding" : "");
    return KC_STATUS_OK;
}
