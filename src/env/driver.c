/* driver.c — the NVIDIA driver's CUDA library (libcuda.so.1), loaded at run time: its
 * version (the newest CUDA it supports), cuInit, and the GPUs CUDA sees after
 * CUDA_VISIBLE_DEVICES (name, compute capability, memory, PCI bus id). The driver API is
 * stable across versions; the few functions used are declared here. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env.h"

typedef int CUresult; /* CUDA_SUCCESS = 0 */
typedef int CUdevice;
#define KC_CU_ATTR_SM_COUNT 16
#define KC_CU_ATTR_CC_MAJOR 75
#define KC_CU_ATTR_CC_MINOR 76

static struct {
    pthread_once_t once;
    void *h;
    char path[KC_ENV_PATH];
    char error[512];
    CUresult init_result;
    CUresult (*init)(unsigned int);
    CUresult (*version)(int *);
    CUresult (*count)(int *);
    CUresult (*get)(CUdevice *, int);
    CUresult (*name)(char *, int, CUdevice);
    CUresult (*attr)(int *, int, CUdevice);
    CUresult (*total)(size_t *, CUdevice);
    CUresult (*pci)(char *, int, CUdevice);
    CUresult (*err_name)(CUresult, const char **);
    CUresult (*err_string)(CUresult, const char **);
} D = {.once = PTHREAD_ONCE_INIT, .init_result = -1};

static void driver_load(void) {
    D.h = kc__dl_open("libcuda.so.1", D.error, sizeof D.error);
    if (!D.h) return;
    kc__dl_path(D.h, D.path, sizeof D.path);
#define SYM(field, name) *(void **)(&D.field) = kc__dl_sym(D.h, name)
    SYM(init, "cuInit");
    SYM(version, "cuDriverGetVersion");
    SYM(count, "cuDeviceGetCount");
    SYM(get, "cuDeviceGet");
    SYM(name, "cuDeviceGetName");
    SYM(attr, "cuDeviceGetAttribute");
    SYM(total, "cuDeviceTotalMem_v2");
    if (!D.total) SYM(total, "cuDeviceTotalMem");
    SYM(pci, "cuDeviceGetPCIBusId");
    SYM(err_name, "cuGetErrorName");
    SYM(err_string, "cuGetErrorString");
#undef SYM
    if (D.init) D.init_result = D.init(0);
}

static bool driver_ready(void) {
    pthread_once(&D.once, driver_load);
    return D.h && D.init_result == 0 && D.count;
}

static void describe(CUresult r, char *buf, size_t n) {
    const char *name = NULL, *text = NULL;
    if (D.err_name) D.err_name(r, &name);
    if (D.err_string) D.err_string(r, &text);
    if (name && text) snprintf(buf, n, "%s: %s", name, text);
    else if (name) snprintf(buf, n, "%s", name);
    else snprintf(buf, n, "CUDA driver error %d", r);
}

bool kc__driver_pci(int index, char *out, size_t n) {
    out[0] = '\0';
    if (!driver_ready() || !D.pci) return false;
    int count = 0;
    if (D.count(&count) != 0 || index < 0 || index >= count) return false;
    CUdevice dev = index;
    if (D.get && D.get(&dev, index) != 0) return false;
    char buf[64] = "";
    if (D.pci(buf, (int)sizeof buf, dev) != 0 || !buf[0]) return false;
    snprintf(out, n, "%s", buf);
    return true;
}

void kc__driver_probe(kc__driver *out, const kc__nvml *nvml) {
    memset(out, 0, sizeof *out);
    pthread_once(&D.once, driver_load);
    out->found = D.h != NULL;
    snprintf(out->error, sizeof out->error, "%s", D.error);
    if (!D.h) return;
    snprintf(out->path, sizeof out->path, "%s", D.path);
    /* the toolkit's link-time stub: .../lib64/stubs/libcuda.so, whose cuInit says
     * CUDA_ERROR_STUB_LIBRARY (34) */
    size_t pl = strlen(D.path);
    out->is_stub = D.init_result == 34 || (pl >= 17 && !strcmp(D.path + pl - 17, "/stubs/libcuda.so"));
    int v = 0;
    if (D.version && D.version(&v) == 0) out->cuda_version = v;
    if (!D.init) {
        out->init_result = -1;
        kc__pathf(out->init_error, sizeof out->init_error, "%s has no cuInit: it is not an NVIDIA driver",
                 D.path[0] ? D.path : "libcuda.so.1");
        return;
    }
    out->init_result = D.init_result;
    if (D.init_result != 0) {
        describe(D.init_result, out->init_error, sizeof out->init_error);
        return;
    }
    int count = 0;
    if (!D.count || D.count(&count) != 0) count = 0;
    if (count > KC_ENV_MAX_GPUS) count = KC_ENV_MAX_GPUS;
    for (int i = 0; i < count; i++) {
        kc__gpu *g = &out->gpu[out->count];
        memset(g, 0, sizeof *g);
        g->index = i;
        g->nvml = -1;
        CUdevice dev = i;
        if (D.get && D.get(&dev, i) != 0) continue;
        if (!D.name || D.name(g->name, (int)sizeof g->name, dev) != 0) snprintf(g->name, sizeof g->name, "GPU %d", i);
        if (D.attr) {
            D.attr(&g->cc_major, KC_CU_ATTR_CC_MAJOR, dev);
            D.attr(&g->cc_minor, KC_CU_ATTR_CC_MINOR, dev);
            D.attr(&g->sm_count, KC_CU_ATTR_SM_COUNT, dev);
        }
        size_t total = 0;
        if (D.total && D.total(&total, dev) == 0) g->total = total;
        if (D.pci) {
            char buf[64] = "";
            if (D.pci(buf, (int)sizeof buf, dev) == 0) snprintf(g->pci, sizeof g->pci, "%s", buf);
        }
        if (nvml && nvml->ok) {
            g->nvml = kc__nvml_index_by_pci(nvml, g->pci);
            if (g->nvml >= 0 && g->nvml < nvml->count && nvml->gpu[g->nvml].has_memory) {
                g->free = nvml->gpu[g->nvml].free;
                g->has_free = true;
            }
        }
        out->count++;
    }
}
