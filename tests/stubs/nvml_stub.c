/* nvml_stub.c — a stand-in libnvidia-ml.so.1 (NVML) for the tests: every GPU of
 * stub_gpus.h (whatever CUDA_VISIBLE_DEVICES says, as NVML does) with the readings given
 * there.
 *   KC_STUB_DRIVER_VERSION   nvmlSystemGetDriverVersion's answer (default "580.65.06")
 *   KC_STUB_NVML_INIT        force nvmlInit's result (e.g. 9: driver not loaded) */
#include "stub_gpus.h"

#define EXPORT __attribute__((visibility("default")))

static kc_stub_gpu g_gpu[KC_STUB_MAX];
static int g_n = -1;

EXPORT int nvmlInit_v2(void) {
    int forced = kc_stub_env_int("KC_STUB_NVML_INIT", 0);
    if (forced) return forced;
    g_n = kc_stub_gpus(g_gpu);
    return 0;
}
EXPORT int nvmlInit(void) { return nvmlInit_v2(); }
EXPORT int nvmlShutdown(void) { return 0; }

EXPORT const char *nvmlErrorString(int r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

EXPORT int nvmlSystemGetDriverVersion(char *v, unsigned int len) {
    const char *e = getenv("KC_STUB_DRIVER_VERSION");
    snprintf(v, len, "%s", e && *e ? e : "580.65.06");
    return 0;
}

EXPORT int nvmlDeviceGetCount_v2(unsigned int *n) {
    if (g_n < 0) return 1;
    *n = (unsigned int)g_n;
    return 0;
}

static kc_stub_gpu *dev(void *d) {
    kc_stub_gpu *g = d;
    return g_n >= 0 && g >= g_gpu && g < g_gpu + g_n ? g : NULL;
}

EXPORT int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
    if (g_n < 0) return 1;
    if ((int)i >= g_n || !d) return 2;
    *d = &g_gpu[i];
    return 0;
}

EXPORT int nvmlDeviceGetHandleByPciBusId_v2(const char *id, void **d) {
    unsigned int dom = 0, bus = 0, slot = 0, fn = 0;
    if (g_n < 0) return 1;
    if (!id || sscanf(id, "%x:%x:%x.%x", &dom, &bus, &slot, &fn) != 4 || bus < 1 || (int)bus > g_n) return 6; /* NOT_FOUND */
    *d = &g_gpu[bus - 1];
    return 0;
}

EXPORT int nvmlDeviceGetName(void *d, char *name, unsigned int len) {
    kc_stub_gpu *g = dev(d);
    if (!g) return 2;
    snprintf(name, len, "%s", g->name);
    return 0;
}

EXPORT int nvmlDeviceGetUUID(void *d, char *uuid, unsigned int len) {
    kc_stub_gpu *g = dev(d);
    if (!g) return 2;
    snprintf(uuid, len, "GPU-5757b0b0-0000-0000-0000-%012d", (int)(g - g_gpu));
    return 0;
}

typedef struct {
    unsigned long long total, free, used;
} stub_memory;

EXPORT int nvmlDeviceGetMemoryInfo(void *d, stub_memory *m) {
    kc_stub_gpu *g = dev(d);
    if (!g || !m) return 2;
    m->total = g->total_mib << 20;
    m->free = g->free_mib << 20;
    m->used = m->total - m->free;
    return 0;
}

typedef struct {
    unsigned int gpu, memory;
} stub_util;

EXPORT int nvmlDeviceGetUtilizationRates(void *d, stub_util *u) {
    kc_stub_gpu *g = dev(d);
    if (!g || !u) return 2;
    u->gpu = (unsigned int)g->util;
    u->memory = (unsigned int)g->mem_util;
    return 0;
}

EXPORT int nvmlDeviceGetTemperature(void *d, int sensor, unsigned int *t) {
    kc_stub_gpu *g = dev(d);
    if (!g || !t || sensor != 0) return 2;
    *t = (unsigned int)g->temp;
    return 0;
}

EXPORT int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
    kc_stub_gpu *g = dev(d);
    if (!g || !mw) return 2;
    *mw = (unsigned int)g->power_w * 1000u;
    return 0;
}

EXPORT int nvmlDeviceGetEnforcedPowerLimit(void *d, unsigned int *mw) {
    kc_stub_gpu *g = dev(d);
    if (!g || !mw) return 2;
    *mw = (unsigned int)g->limit_w * 1000u;
    return 0;
}

EXPORT int nvmlDeviceGetCudaComputeCapability(void *d, int *major, int *minor) {
    kc_stub_gpu *g = dev(d);
    if (!g) return 2;
    *major = g->major;
    *minor = g->minor;
    return 0;
}
