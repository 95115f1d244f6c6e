/* cuda_backend.c — the CUDA backend module's entry point (kc_backend_module_init), its
 * checks of the driver, the GPU, cuDNN and cuBLAS, the function table, and the copies
 * between host and device (error reporting: cuda_errors.c).
 *
 * Start-up order, each step with its own message when it fails (the loader prefixes "the
 * cuda backend cannot start: "):
 *   1. ABI and device name ("cuda", "cuda:N")
 *   2. cuDNN: the loaded libcudnn's major version and the CUDA it was built for, and its
 *      sub-libraries (graph, ops, cnn: loaded now, not at the first convolution)
 *   3. cuBLAS: the loaded libcublas's major version
 *   4. the driver: cudaGetDeviceCount (cudart is linked statically and loads libcuda.so.1
 *      itself, so "no driver" is an error here, not a failure to load the module)
 *   5. the device index (listing the GPUs that exist, CUDA_VISIBLE_DEVICES named) and its
 *      compute capability against the architectures this module was compiled for
 *   6. stream, cuBLAS and cuDNN handles, the caller's options (kc_device_opts), the
 *      allocator (its gpu_memory mode)
 *   7. a probe kernel that proves the module's code runs on this GPU.
 * Each step is a function below; kc_backend_module_init runs them in this order.
 *
 * Copies: to_device stages up to 64 MiB through one of two pinned host buffers and
 * returns at once (the source may be reused right away); to_host waits for the stream.
 * The host synchronises only in to_host, sync and destroy (mem_info's cudaMemGetInfo does
 * not wait for the stream). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "kerac_cuda_build.h"

#define KC_CU_STAGE_MAX ((size_t)64 << 20)

/* ---------------------------------------------------------------- the device-side label check */

/* After the stream has been synchronised: a bad label a kernel reported (cuda_kernels.h). */
static kc_status check_flag(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    if (!c->flag_armed) return KC_STATUS_OK;
    c->flag_armed = false;
    if (c->hflag[0] == 0) return KC_STATUS_OK;
    int code = c->hflag[0], row = c->hflag[1], classes = c->hflag[3];
    float label;
    memcpy(&label, &c->hflag[2], sizeof label);
    memset(c->hflag, 0, 4 * sizeof(int));
    cudaMemsetAsync(c->dflag, 0, 4 * sizeof(int), c->stream);
    return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT,
                       "%s: label %g of example %d is not a class index in [0, %d); labels must be integers 0..%d "
                       "matching the %d output units",
                       code == 1 ? "sparse_categorical_crossentropy" : "accuracy", (double)label, row, classes,
                       classes - 1, classes);
}

/* Wait for the stream (bringing back the label flag when a kernel may have set it). */
static kc_status wait_stream(kc_backend *be, const char *what) {
    kc_cu_ctx *c = kc__cu(be);
    if (c->flag_armed) KC_CU_TRY_CUDA(be, what, cudaMemcpyAsync(c->hflag, c->dflag, 4 * sizeof(int),
                                                                cudaMemcpyDeviceToHost, c->stream));
    KC_CU_TRY_CUDA(be, what, cudaStreamSynchronize(c->stream));
    return check_flag(be);
}

/* ---------------------------------------------------------------- memory operations */

static kc_status cu_to_device(kc_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda to_device: NULL %s pointer for %zu bytes",
                           dst ? "source" : "destination", bytes);
    KC_TRY(kc__cu_enter(be));
    kc_cu_ctx *c = kc__cu(be);
    if (bytes <= KC_CU_STAGE_MAX) {
        kc_cu_stage *st = &c->stage[c->stage_next];
        c->stage_next ^= 1;
        if (st->pending) { /* the copy that last read this buffer must be done */
            KC_CU_TRY_CUDA(be, "to_device: waiting for a staging buffer", cudaEventSynchronize(st->done));
            st->pending = false;
        }
        if (st->cap < bytes) {
            if (st->host) cudaFreeHost(st->host);
            st->host = NULL;
            st->cap = 0;
            size_t cap = (KC_CU_MAX(bytes, (size_t)1 << 20) + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
            if (cudaHostAlloc(&st->host, cap, cudaHostAllocDefault) == cudaSuccess) st->cap = cap;
            else {
                cudaGetLastError(); /* no pinned memory: copy from pageable memory below */
                st->host = NULL;
            }
        }
        if (st->host) {
            memcpy(st->host, src, bytes);
            KC_CU_TRY_CUDA(be, "to_device", cudaMemcpyAsync(dst, st->host, bytes, cudaMemcpyHostToDevice, c->stream));
            cudaError_t e = cudaEventRecord(st->done, c->stream);
            if (e != cudaSuccess) { /* unprotected staging buffer: wait for the copy instead */
                cudaStreamSynchronize(c->stream);
                return kc__cu_cuda_fail(be, "to_device (event)", e);
            }
            st->pending = true;
            return kc__cu_launched(be, "to_device", cudaSuccess);
        }
    }
    /* large (or no pinned memory): copy from the caller's memory and wait, so that it may be
     * reused as soon as this returns */
    KC_CU_TRY_CUDA(be, "to_device", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    return wait_stream(be, "to_device");
}

static kc_status cu_to_host(kc_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda to_host: NULL %s pointer for %zu bytes",
                           dst ? "source" : "destination", bytes);
    KC_TRY(kc__cu_enter(be));
    kc_cu_ctx *c = kc__cu(be);
    KC_CU_TRY_CUDA(be, "to_host", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    return wait_stream(be, "to_host");
}

static kc_status cu_copy(kc_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda copy: NULL %s pointer for %zu bytes",
                           dst ? "source" : "destination", bytes);
    if (dst == src) return KC_STATUS_OK;
    KC_TRY(kc__cu_enter(be));
    KC_CU_TRY_CUDA(be, "copy", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, kc__cu(be)->stream));
    return kc__cu_launched(be, "copy", cudaSuccess);
}

static kc_status cu_memset0(kc_backend *be, void *dst, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda memset0: NULL pointer for %zu bytes", bytes);
    KC_TRY(kc__cu_enter(be));
    KC_CU_TRY_CUDA(be, "memset0", cudaMemsetAsync(dst, 0, bytes, kc__cu(be)->stream));
    return kc__cu_launched(be, "memset0", cudaSuccess);
}

static kc_status cu_sync(kc_backend *be) {
    KC_TRY(kc__cu_enter(be));
    return wait_stream(be, "sync");
}

static kc_status cu_mem_info(kc_backend *be, kc_mem_info *out) {
    if (!out) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda mem_info: the output pointer is NULL");
    KC_TRY(kc__cu_enter(be));
    size_t free_b = 0, total_b = 0;
    KC_CU_TRY_CUDA(be, "cudaMemGetInfo", cudaMemGetInfo(&free_b, &total_b));
    kc_cu_alloc *a = &kc__cu(be)->mem;
    free_b += kc__cu_alloc_spare(be); /* what the allocator holds but could hand out */
    size_t lim = a->mode_limit && a->user_limit ? KC_CU_MIN(a->mode_limit, a->user_limit)
                                                : (a->mode_limit ? a->mode_limit : a->user_limit);
    if (lim) {
        total_b = KC_CU_MIN(total_b, lim);
        size_t left = lim > a->in_use ? lim - a->in_use : 0;
        free_b = KC_CU_MIN(free_b, left);
    }
    if (free_b > total_b) free_b = total_b;
    out->free_bytes = free_b;
    out->total_bytes = total_b;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- create and destroy */

static void ctx_release(kc_cu_ctx *c) {
    if (!c) return;
    if (c->be && c->be->ctx == c) {
        cudaSetDevice(c->dev);
        if (c->stream) cudaStreamSynchronize(c->stream);
        kc__cu_conv_shutdown(c->be);
        kc__cu_alloc_shutdown(c->be); /* the scratch block goes with it */
    }
    kc__cu_feed_shutdown(c);
    kc__cu_nccl_shutdown(c);
    kc__cu_timing_shutdown(c);
    for (int i = 0; i < 2; i++) {
        if (c->stage[i].host) cudaFreeHost(c->stage[i].host);
        if (c->stage[i].done) cudaEventDestroy(c->stage[i].done);
    }
    if (c->dflag) cudaFree(c->dflag);
    if (c->hflag) cudaFreeHost(c->hflag);
    if (c->dnn) cudnnDestroy(c->dnn);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaGetLastError();
    free(c);
}

static void cu_destroy(kc_backend *be) {
    if (!be) return;
    kc_cu_ctx *c = kc__cu(be);
    if (c) {
        char b1[32], b2[32];
        kc__cu_log(be, KC_LOG_DEBUG, "%s: peak device memory held %s (%s taken from the driver at the peak)",
                   be->device, kc__cu_bytes(c->mem.peak, b1, sizeof b1), kc__cu_bytes(c->mem.peak_reserved, b2, sizeof b2));
        ctx_release(c);
    }
    free(be);
}

static const char *lib_path(void *symbol) {
    Dl_info info;
    if (symbol && dladdr(symbol, &info) && info.dli_fname) return info.dli_fname;
    return "?";
}

static bool env_on(const char *name) {
    const char *v = getenv(name);
    return v && *v && strcmp(v, "0") != 0 && strcasecmp(v, "false") != 0 && strcasecmp(v, "no") != 0 &&
           strcasecmp(v, "off") != 0;
}

static kc_status init_fail(char *err, size_t n, kc_status s, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static kc_status init_fail(char *err, size_t n, kc_status s, const char *fmt, ...) {
    if (err && n) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
    }
    return s;
}

/* Why cudaGetDeviceCount failed, in words a user can act on. */
static kc_status driver_problem(cudaError_t e, char *err, size_t n) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        return init_fail(err, n, KC_STATUS_DEVICE,
                         "no NVIDIA driver: libcuda.so.1 cannot be loaded (%s); install the NVIDIA driver (CUDA %d.%d "
                         "needs driver 580 or newer), or run on the CPU with --device cpu",
                         why ? why : "not found", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    }
    dlclose(h);
    int dv = 0;
    cudaDriverGetVersion(&dv);
    cudaGetLastError();
    if (e == cudaErrorInsufficientDriver || (dv > 0 && dv < CUDART_VERSION))
        return init_fail(err, n, KC_STATUS_DEVICE,
                         "the NVIDIA driver is too old: it supports CUDA up to %d.%d, and this kerac_cuda module needs "
                         "CUDA %d.%d (driver 580 or newer); update the driver, or run on the CPU with --device cpu",
                         dv / 1000, (dv % 1000) / 10, CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
    if (e == cudaErrorNoDevice)
        return init_fail(err, n, KC_STATUS_DEVICE, "no CUDA GPU is visible (%s)%s%s%s", cudaGetErrorString(e),
                         cvd ? "; CUDA_VISIBLE_DEVICES='" : "", cvd ? cvd : "",
                         cvd ? "' hides the others: unset it or list a GPU that exists" : "");
    return init_fail(err, n, KC_STATUS_DEVICE,
                     "CUDA cannot start: %s (%s; driver CUDA version %d.%d)%s%s%s; check `nvidia-smi`", cudaGetErrorString(e),
                     cudaGetErrorName(e), dv / 1000, (dv % 1000) / 10, cvd ? "; CUDA_VISIBLE_DEVICES='" : "",
                     cvd ? cvd : "", cvd ? "'" : "");
}

/* cuDNN 9's libcudnn.so.9 is a shim that loads its sub-libraries at first use (graph, ops,
 * and cnn for the convolutions, which needs libz). Loading them here (the version checks
 * do, without a GPU: a missing libcudnn_cnn.so.9 is CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_
 * UNAVAILABLE) makes a machine that lacks one fail at start-up, where `kerac doctor` and
 * --device auto report it, rather than at the first Conv2D. */
static kc_status dnn_sublibraries(char *err, size_t n) {
    static const struct {
        const char *name, *call;
        cudnnStatus_t (*check)(void);
    } part[] = {{"graph", "cudnnGraphVersionCheck", cudnnGraphVersionCheck},
                {"ops", "cudnnOpsVersionCheck", cudnnOpsVersionCheck},
                {"cnn", "cudnnCnnVersionCheck", cudnnCnnVersionCheck}};
    for (size_t i = 0; i < sizeof part / sizeof part[0]; i++) {
        cudnnStatus_t st = part[i].check();
        if (st == CUDNN_STATUS_SUCCESS) continue;
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        return init_fail(err, n, KC_STATUS_DEVICE,
                         "cuDNN at %s cannot load its %s library libcudnn_%s.so.%d (%s: %s%s%s): install the complete "
                         "cuDNN %d for CUDA %d (its libcudnn_*.so.%d files side by side; they need libz.so.1)",
                         lib_path((void *)cudnnGetVersion), part[i].name, part[i].name, CUDNN_MAJOR, part[i].call,
                         cudnnGetErrorString(st), detail[0] ? ": " : "", detail, CUDNN_MAJOR, CUDART_VERSION / 1000,
                         CUDNN_MAJOR);
    }
    return KC_STATUS_OK;
}

__attribute__((visibility("default"))) const char *kc_backend_module_info(void) {
    return "kerac_cuda " KC_CUDA_BUILD_KERAC_VERSION ": CUDA " KC_CUDA_BUILD_CUDA_VERSION ", cuDNN " KC_CUDA_BUILD_CUDNN_VERSION
           ", cuBLAS " KC_CUDA_BUILD_CUBLAS_VERSION ", architectures " KC_CUDA_BUILD_ARCHS;
}

/* 1. The device name: "cuda" (device 0) or "cuda:N". */
static kc_status parse_device(const char *device, int *idx, char *err, size_t err_size) {
    *idx = 0;
    if (device && *device && strcmp(device, "cuda") != 0) {
        const char *p = strncmp(device, "cuda:", 5) == 0 ? device + 5 : NULL;
        char *end = NULL;
        long v = p && *p >= '0' && *p <= '9' ? strtol(p, &end, 10) : -1;
        if (!p || v < 0 || v > 1024 || !end || *end != '\0')
            return init_fail(err, err_size, KC_STATUS_INVALID_ARGUMENT,
                             "device '%s' is not cuda or cuda:N (N = 0, 1, ...)", device);
        *idx = (int)v;
    }
    return KC_STATUS_OK;
}

/* 2.-3. cuDNN and cuBLAS as the loader found them. */
static kc_status check_libraries(char *err, size_t err_size) {
    /* cuDNN: the library the loader found must be the major version compiled against,
     * built for this CUDA major version */
    size_t dnn_v = cudnnGetVersion();
    int dnn_major = dnn_v >= 10000 ? (int)(dnn_v / 10000) : (int)(dnn_v / 1000);
    if (dnn_major != CUDNN_MAJOR)
        return init_fail(err, err_size, KC_STATUS_DEVICE,
                         "%s is cuDNN version %zu, but this module was built with cuDNN %s: install cuDNN %d for "
                         "CUDA %d",
                         lib_path((void *)cudnnGetVersion), dnn_v, KC_CUDA_BUILD_CUDNN_VERSION, CUDNN_MAJOR,
                         CUDART_VERSION / 1000);
    size_t dnn_rt = cudnnGetCudartVersion();
    if (dnn_rt / 1000 != CUDART_VERSION / 1000)
        return init_fail(err, err_size, KC_STATUS_DEVICE,
                         "%s (cuDNN %zu.%zu.%zu) was built for CUDA %zu.%zu, but this module uses CUDA %d.%d: install "
                         "the cuDNN %d build for CUDA %d (e.g. the nvidia-cudnn-cu%d wheel)",
                         lib_path((void *)cudnnGetVersion), dnn_v / 10000, (dnn_v % 10000) / 100, dnn_v % 100,
                         dnn_rt / 1000, (dnn_rt % 1000) / 10, CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10,
                         CUDNN_MAJOR, CUDART_VERSION / 1000, CUDART_VERSION / 1000);
    kc_status s = dnn_sublibraries(err, err_size);
    if (s != KC_STATUS_OK) return s;

    /* cuBLAS */
    int blas_major = 0;
    if (cublasGetProperty(MAJOR_VERSION, &blas_major) != CUBLAS_STATUS_SUCCESS || blas_major != CUBLAS_VER_MAJOR)
        return init_fail(err, err_size, KC_STATUS_DEVICE,
                         "%s is cuBLAS %d, but this module was built with cuBLAS %s: install cuBLAS %d",
                         lib_path((void *)cublasGetProperty), blas_major, KC_CUDA_BUILD_CUBLAS_VERSION, CUBLAS_VER_MAJOR);
    return KC_STATUS_OK;
}

/* 4.-5. The driver, the GPUs, the device index and its architecture. */
static kc_status check_gpu(int idx, struct cudaDeviceProp *prop, char *err, size_t err_size) {
    /* the driver and the GPUs */
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return driver_problem(e, err, err_size);
    }
    if (count == 0) return driver_problem(cudaErrorNoDevice, err, err_size);

    /* the device index and its architecture */
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (idx >= count) {
        char list[512] = "";
        for (int i = 0; i < count && strlen(list) < sizeof list - 80; i++) {
            struct cudaDeviceProp p;
            size_t used = strlen(list);
            if (cudaGetDeviceProperties(&p, i) == cudaSuccess)
                snprintf(list + used, sizeof list - used, "%scuda:%d (%s)", i ? ", " : "", i, p.name);
            else
                snprintf(list + used, sizeof list - used, "%scuda:%d", i ? ", " : "", i);
        }
        cudaGetLastError();
        return init_fail(err, err_size, KC_STATUS_DEVICE, "cuda:%d does not exist; this machine has %d GPU%s: %s%s%s%s",
                         idx, count, count == 1 ? "" : "s", list,
                         cvd ? " (CUDA_VISIBLE_DEVICES='" : "", cvd ? cvd : "",
                         cvd ? "' limits and renumbers the GPUs kerac can see)" : "");
    }
    e = cudaGetDeviceProperties(prop, idx);
    if (e != cudaSuccess) {
        cudaGetLastError();
        return init_fail(err, err_size, KC_STATUS_DEVICE, "cuda:%d: cannot read the device properties: %s", idx,
                         cudaGetErrorString(e));
    }
    const int cc = prop->major * 10 + prop->minor;
    if (cc < KC_CUDA_BUILD_MIN_CC)
        return init_fail(err, err_size, KC_STATUS_DEVICE,
                         "cuda:%d (%s) has compute capability %d.%d; this kerac_cuda module has code for %s only "
                         "(compute capability %d.%d and newer): rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=%d",
                         idx, prop->name, prop->major, prop->minor, KC_CUDA_BUILD_ARCHS, KC_CUDA_BUILD_MIN_CC / 10,
                         KC_CUDA_BUILD_MIN_CC % 10, cc);

    return KC_STATUS_OK;
}

/* A CUDA call of the start-up: on failure, the message (naming the call) and its status. */
#define STEP_CUDA(what, call)                                                                                      \
    do {                                                                                                           \
        cudaError_t e_ = (call);                                                                                   \
        if (e_ != cudaSuccess) {                                                                                   \
            cudaGetLastError();                                                                                    \
            return init_fail(err, err_size,                                                                        \
                             e_ == cudaErrorMemoryAllocation ? KC_STATUS_OUT_OF_MEMORY : KC_STATUS_DEVICE,         \
                             "%s: %s failed: %s (%s)", be->device, what, cudaGetErrorString(e_), cudaGetErrorName(e_)); \
        }                                                                                                          \
    } while (0)

/* 6. The context: streams, events, the input feed, the options, cuBLAS, cuDNN and the
 * allocator. On failure the caller releases what was made (ctx_release). */
static kc_status ctx_start(kc_backend *be, int idx, const kc_device_opts *opts, char *err, size_t err_size) {
    kc_cu_ctx *c = be->ctx;
    kc_status s;
    STEP_CUDA("cudaSetDevice", cudaSetDevice(idx));
    STEP_CUDA("cudaStreamCreate", cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    for (int i = 0; i < 2; i++)
        STEP_CUDA("cudaEventCreate", cudaEventCreateWithFlags(&c->stage[i].done, cudaEventDisableTiming));
    s = kc__cu_feed_init(be, err, err_size);
    if (s != KC_STATUS_OK) return s;
    c->L.stream = c->stream;
    c->L.max_blocks = c->sm_count * 16;

    /* the caller's options (kc_device_opts: libkerac read the environment for them) */
    c->benchmark = opts->cudnn_benchmark == KC_TRUE;
    c->deterministic = opts->deterministic == KC_TRUE;
    c->tf32 = opts->tf32 == KC_TRUE;
    c->ws_limit = opts->cudnn_workspace_limit ? opts->cudnn_workspace_limit : (size_t)1 << 30;
    c->debug_sync = env_on("KERAC_CUDA_DEBUG_SYNC"); /* a debugging switch of the module's own */
    /* grouped and depthwise convolutions: cuDNN first unless cudnn_grouped is KC_FALSE
     * (KERAC_CUDNN_GROUPED=0: the module's own kernels only, an escape hatch, and how the
     * parity test reaches them) */
    c->dnn_grouped = opts->cudnn_grouped != KC_FALSE;

    cublasStatus_t bs = cublasCreate(&c->blas);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        return init_fail(err, err_size, KC_STATUS_DEVICE, "%s: cuBLAS cannot start (cublasCreate: %s, %s)", be->device,
                         kc__cu_cublas_status_text(bs), lib_path((void *)cublasCreate_v2));
    }
    /* on the module's stream (else cuBLAS would run unordered against it), plain fp32 unless
     * KERAC_TF32=1 (CUBLAS_DEFAULT_MATH does not use TF32 for SGEMM) */
    bs = cublasSetStream(c->blas, c->stream);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(c->blas, c->tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        return init_fail(err, err_size, KC_STATUS_DEVICE, "%s: cuBLAS set-up failed (stream or math mode: %s)",
                         be->device, kc__cu_cublas_status_text(bs));
    }

    cudnnStatus_t ds = cudnnCreate(&c->dnn);
    if (ds != CUDNN_STATUS_SUCCESS) {
        char detail[256] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        c->dnn = NULL;
        return init_fail(err, err_size, KC_STATUS_DEVICE, "%s: cuDNN cannot start (cudnnCreate: %s%s%s; library %s)",
                         be->device, cudnnGetErrorString(ds), detail[0] ? ": " : "", detail,
                         lib_path((void *)cudnnGetVersion));
    }
    ds = cudnnSetStream(c->dnn, c->stream);
    if (ds != CUDNN_STATUS_SUCCESS) {
        return init_fail(err, err_size, KC_STATUS_DEVICE, "%s: cudnnSetStream failed: %s", be->device,
                         cudnnGetErrorString(ds));
    }

    return kc__cu_alloc_init(be, opts->gpu_memory, err, err_size);
}

/* 7. The probe: this GPU runs the module's code. */
static kc_status probe(kc_backend *be, char *err, size_t err_size) {
    kc_cu_ctx *c = be->ctx;
    kc_status s = KC_STATUS_DEVICE;
    cudaError_t e;
    STEP_CUDA("cudaMalloc (flags)", cudaMalloc((void **)&c->dflag, 4 * sizeof(int)));
    STEP_CUDA("cudaHostAlloc (flags)", cudaHostAlloc((void **)&c->hflag, 4 * sizeof(int), cudaHostAllocDefault));
    STEP_CUDA("cudaMemset (flags)", cudaMemsetAsync(c->dflag, 0, 4 * sizeof(int), c->stream));
    e = kc__k_probe(&c->L, c->dflag);
    if (e == cudaSuccess) e = cudaMemcpyAsync(c->hflag, c->dflag, sizeof(int), cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess || c->hflag[0] != 0x6b657261) {
        cudaGetLastError();
        if (e == cudaErrorNoKernelImageForDevice || e == cudaErrorInvalidDeviceFunction)
            s = init_fail(err, err_size, KC_STATUS_DEVICE,
                          "%s has compute capability %d.%d and this kerac_cuda module has no code for it (built for "
                          "%s): rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=%d",
                          be->device, c->cc_major, c->cc_minor, KC_CUDA_BUILD_ARCHS, c->cc_major * 10 + c->cc_minor);
        else if (e == cudaErrorUnsupportedPtxVersion)
            s = init_fail(err, err_size, KC_STATUS_DEVICE,
                          "%s: the NVIDIA driver is older than the CUDA %s compiler that built this module's code "
                          "(%s); update the driver",
                          be->device, KC_CUDA_BUILD_CUDA_VERSION, cudaGetErrorString(e));
        else
            s = init_fail(err, err_size, KC_STATUS_DEVICE, "%s: a test kernel failed: %s (%s)", be->device,
                          e != cudaSuccess ? cudaGetErrorString(e) : "wrong result",
                          e != cudaSuccess ? cudaGetErrorName(e) : "the GPU returned another value");
        return s;
    }
    c->hflag[0] = 0;
    STEP_CUDA("cudaMemset (flags)", cudaMemsetAsync(c->dflag, 0, 4 * sizeof(int), c->stream));
    return KC_STATUS_OK;
}
#undef STEP_CUDA

/* The operations table. */
static void set_ops(kc_backend *be) {
    be->abi = KC_BACKEND_ABI;
    be->struct_size = sizeof *be;
    be->name = "cuda";
    be->destroy = cu_destroy;

    be->alloc = kc__cu_alloc;
    be->free = kc__cu_free;
    be->to_device = cu_to_device;
    be->to_host = cu_to_host;
    be->copy = cu_copy;
    be->memset0 = cu_memset0;
    be->sync = cu_sync;
    be->mem_info = cu_mem_info;
    be->host_alloc = kc__cu_host_alloc;
    be->host_free = kc__cu_host_free;
    be->feed_upload = kc__cu_feed_upload;
    be->feed_acquire = kc__cu_feed_acquire;
    be->feed_release = kc__cu_feed_release;
    be->feed_wait = kc__cu_feed_wait;

    be->gemm = kc__cu_gemm;
    be->bias_add = kc__cu_bias_add;
    be->bias_grad = kc__cu_bias_grad;

    be->conv2d_workspace = kc__cu_conv2d_workspace;
    be->conv2d_forward = kc__cu_conv2d_forward;
    be->conv2d_backward_data = kc__cu_conv2d_backward_data;
    be->conv2d_backward_filter = kc__cu_conv2d_backward_filter;

    be->pool2d_forward = kc__cu_pool2d_forward;
    be->pool2d_backward = kc__cu_pool2d_backward;
    be->global_avg_pool_forward = kc__cu_gap_forward;
    be->global_avg_pool_backward = kc__cu_gap_backward;

    be->batchnorm_forward_train = kc__cu_bn_forward_train;
    be->batchnorm_forward_infer = kc__cu_bn_forward_infer;
    be->batchnorm_backward = kc__cu_bn_backward;

    be->act_forward = kc__cu_act_forward;
    be->act_backward = kc__cu_act_backward;

    be->dropout_forward = kc__cu_dropout_forward;
    be->dropout_backward = kc__cu_dropout_backward;

    be->add = kc__cu_add;
    be->axpy = kc__cu_axpy;
    be->scale = kc__cu_scale;
    be->copy_strided = kc__cu_copy_strided;
    be->pad2d_forward = kc__cu_pad2d_forward;
    be->pad2d_backward = kc__cu_pad2d_backward;

    be->loss_forward_backward = kc__cu_loss_forward_backward;
    be->count_correct = kc__cu_count_correct;
    be->optimizer_step = kc__cu_optimizer_step;
    be->sum_squares = kc__cu_sum_squares;

    be->depthwise_workspace = kc__cu_depthwise_workspace;
    be->depthwise_forward = kc__cu_depthwise_forward;
    be->depthwise_backward_data = kc__cu_depthwise_backward_data;
    be->depthwise_backward_filter = kc__cu_depthwise_backward_filter;
    be->channel_affine = kc__cu_channel_affine; /* normalisation and resampling */
    be->normalize = kc__cu_normalize;
    be->groupnorm_forward = kc__cu_groupnorm_forward;
    be->groupnorm_backward = kc__cu_groupnorm_backward;
    be->upsample2d_forward = kc__cu_upsample2d_forward;
    be->upsample2d_backward = kc__cu_upsample2d_backward;
    be->permute = kc__cu_permute;
    be->binary_forward = kc__cu_binary_forward; /* broadcasting and activations */
    be->binary_backward = kc__cu_binary_backward;
    be->scalar_forward = kc__cu_scalar_forward;
    be->scalar_backward = kc__cu_scalar_backward;
    /* augmentation */
    be->sample2d_forward = kc__cu_sample2d_forward;
    be->sample2d_backward = kc__cu_sample2d_backward;
    be->color2d_forward = kc__cu_color2d_forward;
    be->color2d_backward = kc__cu_color2d_backward;
    /* convolutions */
    be->grouped_conv_workspace = kc__cu_dnn_grouped_workspace;
    be->grouped_conv_forward = kc__cu_grouped_conv_forward;
    be->grouped_conv_backward_data = kc__cu_grouped_conv_backward_data;
    be->grouped_conv_backward_filter = kc__cu_grouped_conv_backward_filter;

    be->memory_stats = kc__cu_memory_stats;
    be->reset_peak = kc__cu_reset_peak;
    be->set_memory_limit = kc__cu_set_memory_limit;
    be->release_cache = kc__cu_release_cache;

    be->supports = kc__cu_supports;
    be->describe = kc__cu_describe;

    /* issue 13: NCCL collectives (cuda_nccl.c) */
    be->coll_unique_id = kc__cu_coll_unique_id;
    be->coll_init = kc__cu_coll_init;
    be->coll_allreduce_sum = kc__cu_coll_allreduce_sum;
    be->coll_join = kc__cu_coll_join;
    be->coll_describe = kc__cu_coll_describe;

    be->timing_begin = kc__cu_timing_begin;
    be->timing_mark = kc__cu_timing_mark;
    be->timing_read = kc__cu_timing_read;

    be->random_normal = kc__cu_random_normal; /* Gaussian noise layers */
}

__attribute__((visibility("default"))) kc_status kc_backend_module_init(int abi, const char *device, kc_backend **out,
                                                                        char *err, size_t err_size,
                                                                        const kc_device_opts *opts) {
    char tmp[8];
    if (!err || err_size == 0) {
        err = tmp;
        err_size = sizeof tmp;
    }
    err[0] = '\0';
    if (!out) return init_fail(err, err_size, KC_STATUS_INVALID_ARGUMENT, "kc_backend_module_init: out is NULL");
    *out = NULL;
    if (abi != KC_BACKEND_ABI)
        return init_fail(err, err_size, KC_STATUS_DEVICE,
                         "this kerac_cuda module speaks backend ABI %d but libkerac speaks ABI %d: install the module "
                         "built with this kerac",
                         KC_BACKEND_ABI, abi);
    const kc_device_opts none = {0};
    if (!opts) opts = &none;

    int idx = 0;
    struct cudaDeviceProp prop;
    kc_status s = parse_device(device, &idx, err, err_size);
    if (s == KC_STATUS_OK) s = check_libraries(err, err_size);
    if (s == KC_STATUS_OK) s = check_gpu(idx, &prop, err, err_size);
    if (s != KC_STATUS_OK) return s;

    kc_backend *be = calloc(1, sizeof *be);
    kc_cu_ctx *c = calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return init_fail(err, err_size, KC_STATUS_OUT_OF_MEMORY, "out of host memory creating the cuda backend");
    }
    be->ctx = c;
    c->be = be;
    c->dev = idx;
    snprintf(c->gpu_name, sizeof c->gpu_name, "%s", prop.name);
    c->cc_major = prop.major;
    c->cc_minor = prop.minor;
    c->sm_count = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    c->total_mem = prop.totalGlobalMem;
    snprintf(be->device, sizeof be->device, "cuda:%d (%.48s)", idx, prop.name);
    s = ctx_start(be, idx, opts, err, err_size);
    if (s == KC_STATUS_OK) s = probe(be, err, err_size);
    if (s != KC_STATUS_OK) {
        ctx_release(c);
        free(be);
        return s;
    }
    set_ops(be);
    *out = be;
    return KC_STATUS_OK;
}
