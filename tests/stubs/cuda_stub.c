/* cuda_stub.c — a stand-in libcuda.so.1 (the NVIDIA driver's CUDA library) for the tests:
 * it answers the driver calls kerac's doctor makes with the GPUs of stub_gpus.h.
 *   KC_STUB_DRIVER_CUDA   cuDriverGetVersion's answer (default 13000: CUDA 13.0)
 *   KC_STUB_CUINIT        force cuInit's result (e.g. 999); default 0, or 100
 *                         (CUDA_ERROR_NO_DEVICE) when no GPU is visible
 * It cannot run anything: there are no contexts, memory or kernels. */
#include "stub_gpus.h"

#define EXPORT __attribute__((visibility("default")))

static kc_stub_gpu g_gpu[KC_STUB_MAX];
static int g_vis[KC_STUB_MAX];
static int g_nvis = -1; /* -1: cuInit not called (or failed) */

EXPORT int cuInit(unsigned int flags) {
    (void)flags;
    int forced = kc_stub_env_int("KC_STUB_CUINIT", 0);
    if (forced) return forced;
    int n = kc_stub_gpus(g_gpu);
    int v = kc_stub_visible(n, g_vis);
    if (v == 0) return 100; /* CUDA_ERROR_NO_DEVICE */
    g_nvis = v;
    return 0;
}

EXPORT int cuDriverGetVersion(int *v) {
    if (!v) return 1;
    *v = kc_stub_env_int("KC_STUB_DRIVER_CUDA", 13000);
    return 0;
}

EXPORT int cuDeviceGetCount(int *n) {
    if (!n) return 1;
    if (g_nvis < 0) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
    *n = g_nvis;
    return 0;
}

EXPORT int cuDeviceGet(int *dev, int ordinal) {
    if (g_nvis < 0) return 3;
    if (!dev || ordinal < 0 || ordinal >= g_nvis) return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

static const kc_stub_gpu *gpu_of(int dev) {
    return g_nvis >= 0 && dev >= 0 && dev < g_nvis ? &g_gpu[g_vis[dev]] : NULL;
}

EXPORT int cuDeviceGetName(char *name, int len, int dev) {
    const kc_stub_gpu *g = gpu_of(dev);
    if (!g) return 101;
    snprintf(name, (size_t)len, "%s", g->name);
    return 0;
}

EXPORT int cuDeviceGetAttribute(int *pi, int attrib, int dev) {
    const kc_stub_gpu *g = gpu_of(dev);
    if (!g || !pi) return 101;
    switch (attrib) {
    case 75: *pi = g->major; break;  /* COMPUTE_CAPABILITY_MAJOR */
    case 76: *pi = g->minor; break;  /* COMPUTE_CAPABILITY_MINOR */
    case 16: *pi = 132; break;       /* MULTIPROCESSOR_COUNT */
    case 33: *pi = g_vis[dev] + 1; break; /* PCI_BUS_ID */
    default: *pi = 0;
    }
    return 0;
}

EXPORT int cuDeviceTotalMem_v2(size_t *bytes, int dev) {
    const kc_stub_gpu *g = gpu_of(dev);
    if (!g || !bytes) return 101;
    *bytes = (size_t)g->total_mib << 20;
    return 0;
}

EXPORT int cuDeviceTotalMem(size_t *bytes, int dev) { return cuDeviceTotalMem_v2(bytes, dev); }

EXPORT int cuDeviceGetPCIBusId(char *id, int len, int dev) {
    const kc_stub_gpu *g = gpu_of(dev);
    if (!g || !id) return 101;
    snprintf(id, (size_t)len, "0000:%02X:00.0", g_vis[dev] + 1);
    return 0;
}

EXPORT int cuGetErrorName(int e, const char **s) {
    switch (e) {
    case 0: *s = "CUDA_SUCCESS"; break;
    case 3: *s = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case 100: *s = "CUDA_ERROR_NO_DEVICE"; break;
    case 101: *s = "CUDA_ERROR_INVALID_DEVICE"; break;
    case 999: *s = "CUDA_ERROR_UNKNOWN"; break;
    default: *s = NULL; return 1;
    }
    return 0;
}

EXPORT int cuGetErrorString(int e, const char **s) {
    switch (e) {
    case 0: *s = "no error"; break;
    case 3: *s = "initialization error"; break;
    case 100: *s = "no CUDA-capable device is detected"; break;
    case 101: *s = "invalid device ordinal"; break;
    case 999: *s = "unknown error"; break;
    default: *s = NULL; return 1;
    }
    return 0;
}
