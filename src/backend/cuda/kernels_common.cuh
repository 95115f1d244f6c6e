// kernels_common.cuh — what the CUDA backend's kernel files (kernels_*.cu) share: the
// grid-stride loops, the launch with 32- or 64-bit indices, and the grid for n threads.
#ifndef KC_CUDA_KERNELS_COMMON_CUH
#define KC_CUDA_KERNELS_COMMON_CUH

#include <stdint.h>

#include "cuda_kernels.h"

// grid-stride loop over i < n
#define KC_GRID_LOOP(i, n)                                                                                  \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)blockDim.x * gridDim.x)

// the same with an index type I: kernels whose index arithmetic (divisions by the tensor's
// sizes) dominates run with 32-bit indices when the tensor is small enough
#define KC_GRID_LOOP_T(I, i, n)                                                                             \
    for (I i = (I)blockIdx.x * (I)blockDim.x + (I)threadIdx.x; i < (I)(n); i += (I)blockDim.x * (I)gridDim.x)

// launch kernel<int> when n (and n plus one grid of threads) fits 32 bits, else kernel<int64_t>
#define KC_LAUNCH_IDX(kernel, n, blocks, threads, stream, ...)                                              \
    do {                                                                                                    \
        if ((int64_t)(n) < ((int64_t)1 << 30)) kernel<int><<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__); \
        else kernel<int64_t><<<(blocks), (threads), 0, (stream)>>>(__VA_ARGS__);                            \
    } while (0)

// blocks of `threads` for n elements, at most the device's grid (L->max_blocks), at least one
static inline int kc_blocks(const kc_cu_launch *L, int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b > L->max_blocks) b = L->max_blocks;
    return b < 1 ? 1 : (int)b;
}

#endif // KC_CUDA_KERNELS_COMMON_CUH
