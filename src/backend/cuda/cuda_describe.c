/* cuda_describe.c — what the CUDA backend has (supports: every operation of the table) and
 * which kernel a call runs (describe): the cuDNN algorithm chosen for a convolution
 * (cuda_conv.c, from the choice its calls use), cuBLAS for GEMM, kerac's own kernels for
 * the rest. */
#include <stdio.h>

#include "cuda_internal.h"

int kc__cu_supports(kc_backend *be, kc_op op) {
    (void)be;
    return op >= 0 && op < KC_OP_COUNT;
}

kc_status kc__cu_describe(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n) {
    static const char *const name[KC_OP_COUNT] = {
        [KC_OP_GLOBAL_AVG_POOL] = "global average pooling", [KC_OP_GEMM] = "cuBLAS sgemm",
        [KC_OP_BATCHNORM] = "batch norm", [KC_OP_DROPOUT] = "dropout", [KC_OP_PAD2D] = "zero padding",
        [KC_OP_ACTIVATION] = "activation", [KC_OP_ELEMENTWISE] = "elementwise", [KC_OP_LOSS] = "loss",
        [KC_OP_OPTIMIZER] = "fused optimizer update", [KC_OP_DEPTHWISE] = "depthwise conv",
        [KC_OP_NORM] = "group/layer norm", [KC_OP_RESAMPLE] = "upsampling and permute",
        [KC_OP_BROADCAST] = "broadcasting elementwise",
        /* augmentation */
        [KC_OP_SAMPLE2D] = "image resampling", [KC_OP_COLOR2D] = "image colour",
        [KC_OP_GROUPED_CONV] = "grouped conv",
        [KC_OP_NOISE] = "normal random numbers", /* Gaussian noise layers */
    };
    if (!buf || !n) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda describe: no buffer");
    buf[0] = '\0';
    if (!kc__cu_supports(be, op))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda describe: unknown operation %d", (int)op);
    if (op == KC_OP_CONV2D) {
        if (!desc) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda describe: a convolution needs its descriptor");
        return kc__cu_conv2d_describe(be, desc, ws_bytes, buf, n);
    }
    if (op == KC_OP_POOL2D) {
        const kc_pool2d_desc *p = desc;
        snprintf(buf, n, "kerac CUDA kernel (%spooling)", !p ? "" : p->kind == KC_POOL_MAX ? "max " : "average ");
        return KC_STATUS_OK;
    }
    if (op == KC_OP_GEMM) snprintf(buf, n, "%s", name[op]);
    else snprintf(buf, n, "kerac CUDA kernel (%s)", name[op]);
    return KC_STATUS_OK;
}
