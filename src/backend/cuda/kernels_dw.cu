// kernels_dw.cu — depthwise convolution (DepthwiseConv2D), NHWC, kernel (KH, KW, F) with
// F = C * M: output channel k reads input channel k / M. That is the grouped convolution of
// kernels_grouped.cu with C groups (one input channel and M filters each, the same kernel
// layout), so these launch its kernels; their sums mirror cpu_depthwise.c's:
//   forward          one thread per output value: the sum over the kernel taps in tap order
//   backward_data    one thread per input value: a gather over the output pixels whose
//                    windows cover it (no atomics)
//   backward_filter  one block per (tap or bias, 32 channels): 32 x 8 threads sum over the
//                    batch's output pixels in double, then combine their 8 partials in a
//                    fixed order, so results are the same from run to run
#include <stdint.h>

#include "cuda_kernels.h"

extern "C" cudaError_t kc__k_dw_forward(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x,
                                         const float *w, const float *b, float *y) {
    return kc__k_gc_forward(L, d, d->c, x, w, b, y);
}

extern "C" cudaError_t kc__k_dw_backward_data(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *dy,
                                               const float *w, float *dx) {
    return kc__k_gc_backward_data(L, d, d->c, dy, w, dx);
}

extern "C" cudaError_t kc__k_dw_backward_filter(const kc_cu_launch *L, const kc_conv2d_desc *d, const float *x,
                                                 const float *dy, float *dw, float *db) {
    return kc__k_gc_backward_filter(L, d, d->c, x, dy, dw, db);
}
