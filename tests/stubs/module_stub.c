/* module_stub.c — a stand-in libkerac_cuda.so for the doctor's tests: it needs
 * libcudnn.so.9 and libcublas.so.13 (so that a missing cuDNN makes it fail to load as the
 * real module does), carries the real module's kind of build string, and "starts" by
 * asking the stand-in driver for cuda:0's name (after cuDNN's cnn library check, as the
 * real module does): a kc_backend (of the ABI it was built with) with no operations, which
 * its supports entry says.
 *   KC_STUB_MODULE_INFO         kc_backend_module_info's answer (default: the string below)
 *   KC_STUB_MODULE_INIT_ERROR   make kc_backend_module_init fail with this message */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kerac_backend.h"

#define EXPORT __attribute__((visibility("default")))

extern size_t cudnnGetVersion(void);
extern int cudnnCnnVersionCheck(void);
extern int cublasGetProperty(int type, int *value);

static const char k_info[] = "kerac_cuda 0.1.0: CUDA 13.0.88, cuDNN 9.19.0, cuBLAS 13.1.0, architectures 80-real "
                             "90-real 100-real 120-real 90-virtual";

EXPORT const char *kc_backend_module_info(void) {
    const char *e = getenv("KC_STUB_MODULE_INFO");
    return e && *e ? e : k_info;
}

static void stub_destroy(kc_backend *be) { free(be); }

static int stub_supports(kc_backend *be, kc_op op) {
    (void)be;
    (void)op;
    return 0;
}

EXPORT kc_status kc_backend_module_init(int abi, const char *device, kc_backend **out, char *err, size_t n,
                                        const kc_device_opts *opts) {
    (void)device;
    (void)opts;
    const char *fail = getenv("KC_STUB_MODULE_INIT_ERROR");
    if (fail && *fail) {
        snprintf(err, n, "%s", fail);
        return KC_STATUS_DEVICE;
    }
    int blas_major = 0; /* both calls keep the dependencies real */
    if (cudnnGetVersion() == 0 || cublasGetProperty(0, &blas_major) != 0) return KC_STATUS_DEVICE;
    if (cudnnCnnVersionCheck() != 0) { /* as the real module's start-up */
        snprintf(err, n, "cuDNN cannot load its cnn library libcudnn_cnn.so.9 (stub module)");
        return KC_STATUS_DEVICE;
    }
    void *cu = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int (*init)(unsigned) = cu ? (int (*)(unsigned))dlsym(cu, "cuInit") : NULL;
    int (*name)(char *, int, int) = cu ? (int (*)(char *, int, int))dlsym(cu, "cuDeviceGetName") : NULL;
    char gpu[96] = "?";
    if (!init || !name || init(0) != 0 || name(gpu, (int)sizeof gpu, 0) != 0) {
        snprintf(err, n, "no NVIDIA driver: libcuda.so.1 cannot be loaded (stub module)");
        return KC_STATUS_DEVICE;
    }
    kc_backend *be = calloc(1, sizeof *be);
    if (!be) return KC_STATUS_OUT_OF_MEMORY;
    (void)abi; /* the loader checks the table's ABI, as it does the real module's */
    be->abi = KC_BACKEND_ABI;
    be->struct_size = sizeof *be;
    be->name = "cuda";
    snprintf(be->device, sizeof be->device, "cuda:0 (%.48s)", gpu);
    be->destroy = stub_destroy;
    be->supports = stub_supports;
    *out = be;
    return KC_STATUS_OK;
}
