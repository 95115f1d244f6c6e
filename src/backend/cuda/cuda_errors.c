/* cuda_errors.c — the CUDA module's error reporting and logging: CUDA, cuDNN and cuBLAS
 * failures as statuses with messages that say what to do (through the host's error text),
 * log lines through the host's logger, byte counts for messages, and making the backend's
 * GPU current on the calling thread. Every other file of the module reports through these. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda_internal.h"

/* ---------------------------------------------------------------- errors and logging */

const char *kc__cu_bytes(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= ((size_t)1 << 20)) snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%zu B", b);
    return buf;
}

/* the calling thread's last message, for the module's own use (libkerac keeps the user's) */
static __thread char last_msg[1024];

const char *kc__cu_last_error(void) { return last_msg; }

kc_status kc__cu_fail(kc_backend *be, kc_status s, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    memcpy(last_msg, msg, sizeof last_msg);
    if (be && be->host_fail) return be->host_fail(s, "%s", msg);
    return s;
}

void kc__cu_log(kc_backend *be, kc_log_level level, const char *fmt, ...) {
    if (!be || !be->host_log) return;
    char msg[1536];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    be->host_log(level, "%s", msg);
}

/* Errors after which the CUDA context is unusable (the process must restart). */
static bool sticky(cudaError_t e) {
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorLaunchTimeout:
    case cudaErrorECCUncorrectable:
        return true;
    default:
        return false;
    }
}

kc_status kc__cu_cuda_fail(kc_backend *be, const char *what, cudaError_t e) {
    cudaGetLastError(); /* clear a non-sticky error so the next call starts clean */
    if (e == cudaErrorMemoryAllocation) {
        size_t free_b = 0, total_b = 0;
        char b1[32], b2[32];
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY,
                           "%s: %s: out of device memory (%s free of %s); lower the batch size or stop other programs "
                           "using this GPU",
                           be->device, what, kc__cu_bytes(free_b, b1, sizeof b1), kc__cu_bytes(total_b, b2, sizeof b2));
    }
    return kc__cu_fail(be, KC_STATUS_DEVICE, "%s: %s failed: %s (%s)%s", be->device, what, cudaGetErrorString(e),
                       cudaGetErrorName(e),
                       sticky(e) ? "; the GPU context cannot be used after this error: restart the program (run with "
                                   "KERAC_CUDA_DEBUG_SYNC=1 to find the operation that caused it)"
                                 : "");
}

kc_status kc__cu_launched(kc_backend *be, const char *what, cudaError_t e) {
    if (e != cudaSuccess) return kc__cu_cuda_fail(be, what, e);
    kc_cu_ctx *c = kc__cu(be);
    if (c->debug_sync) {
        e = cudaStreamSynchronize(c->stream);
        if (e != cudaSuccess) return kc__cu_cuda_fail(be, what, e);
    }
    return KC_STATUS_OK;
}

kc_status kc__cu_cudnn_fail(kc_backend *be, const char *what, cudnnStatus_t s) {
    char detail[256] = "";
    cudnnGetLastErrorString(detail, sizeof detail);
    return kc__cu_fail(be, kc__cu_dnn_status((int)s), "%s: %s failed: %s%s%s", be->device, what,
                       cudnnGetErrorString(s), detail[0] ? ": " : "", detail);
}

const char *kc__cu_cublas_status_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "cuBLAS not initialised";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown cuBLAS status";
    }
}

kc_status kc__cu_cublas_fail(kc_backend *be, const char *what, cublasStatus_t s) {
    return kc__cu_fail(be, s == CUBLAS_STATUS_ALLOC_FAILED ? KC_STATUS_OUT_OF_MEMORY : KC_STATUS_DEVICE,
                       "%s: %s failed: %s (cuBLAS status %d)", be->device, what, kc__cu_cublas_status_text(s), (int)s);
}

kc_status kc__cu_enter(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    int cur = -1;
    if (cudaGetDevice(&cur) == cudaSuccess && cur == c->dev) return KC_STATUS_OK;
    cudaError_t e = cudaSetDevice(c->dev);
    if (e != cudaSuccess) return kc__cu_cuda_fail(be, "cudaSetDevice", e);
    return KC_STATUS_OK;
}
