/* cuda_conv.h — private to the CUDA module's cuDNN convolutions: the per-shape entry that
 * cuda_conv.c (the shape cache, the calls) and cuda_conv_algo.c (the algorithm and
 * workspace choice) share. */
#ifndef KERAC_CUDA_CONV_H
#define KERAC_CUDA_CONV_H

#include "cuda_internal.h"

enum { DIR_FWD = 0, DIR_BWD_DATA = 1, DIR_BWD_FILTER = 2 };

typedef kc_cu_dir conv_dir; /* cuda_rules.h */

struct kc_cu_conv {
    kc_conv2d_desc d; /* the key, with groups */
    int groups;       /* 1, or a grouped convolution's (cudnnSetConvolutionGroupCount) */
    cudnnTensorDescriptor_t xd, yd;
    cudnnFilterDescriptor_t wd;
    cudnnConvolutionDescriptor_t cd;
    bool padded;
    int hp, wp;       /* padded input size */
    conv_dir dir[3];
    size_t off_pad, off_algo, total;
    uint64_t last_use, plan_stamp; /* ctx clocks: last call, last conv2d_workspace */
    bool warned_borrow;
    kc_status status; /* a failure while setting up: repeated by every call */
    char msg[512];
};

/* The buffers of one call (cudnnFind*Ex runs the convolution on them). */
typedef struct conv_bufs {
    const void *in0, *in1; /* forward: x, w; backward-data: w, dy; backward-filter: x, dy */
    void *out;             /* y, dx, dw */
    void *ws;
    size_t ws_bytes;
} conv_bufs;

/* ---- cuda_conv.c */
/* Record a set-up failure in the entry (returned by every later call) and return it. */
kc_status kc__cu_conv_fail(kc_backend *be, kc_cu_conv *e, kc_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A cuDNN call of an entry's set-up: its failure recorded in the entry and returned. */
#define DNN(e_, what, call)                                                                                       \
    do {                                                                                                          \
        cudnnStatus_t st_ = (call);                                                                               \
        if (st_ != CUDNN_STATUS_SUCCESS)                                                                          \
            return kc__cu_conv_fail(be, (e_), kc__cu_dnn_status((int)st_), "%s: cuDNN %s failed: %s", be->device, \
                                    what, cudnnGetErrorString(st_));                                              \
    } while (0)

/* ---- cuda_conv_algo.c */
const char *kc__cu_conv_dir_name(int dir); /* "forward", "backward-data", "backward-filter" */
const char *kc__cu_conv_algo_name(int dir, int algo);
const char *kc__cu_conv_math_name(int math);
/* The workspace's slices before cuDNN's part: the transposed kernel at 0, the padded input
 * at *off_pad (may be NULL); returns their bytes. */
size_t kc__cu_conv_slices(const kc_conv2d_desc *d, int groups, bool padded, int hp, int wp, size_t *off_pad);
/* Ranks and accepts each direction's algorithms by cuDNN's heuristics; sets the offsets and
 * the workspace total. A failure is recorded in the entry. */
kc_status kc__cu_conv_choose(kc_backend *be, kc_cu_conv *e);
/* The workspace total from the candidates not refused (after a refusal at run time). */
void kc__cu_conv_update_total(kc_cu_ctx *c, kc_cu_conv *e);
/* KERAC_CUDNN_BENCHMARK: measures the direction's algorithms on this call's buffers when
 * this entry is the one to measure (once, at the batch size planned last). */
void kc__cu_conv_measure_maybe(kc_backend *be, kc_cu_conv *e, int dir, const conv_bufs *b);

#endif
