/* stub_gpus.h — the GPUs the stand-in libcuda.so.1 and libnvidia-ml.so.1 (tests/stubs/)
 * pretend to have, from the environment, so that one scenario sets both:
 *
 *   KC_STUB_GPUS="NAME,MAJOR.MINOR,TOTAL_MIB[,FREE_MIB[,UTIL%[,MEM%[,TEMP_C[,POWER_W[,LIMIT_W]]]]]];..."
 *       e.g. "NVIDIA H200,9.0,143771,140000,87,45,64,250,700;Tesla K40m,3.5,11441"
 *   CUDA_VISIBLE_DEVICES   applied by the stand-in libcuda as CUDA does, for indices only:
 *       the listed GPUs in order, up to the first entry that is not a GPU of this list
 *       (not a number, negative, out of range, repeated); "" hides every GPU.
 * GPU i sits on PCI bus i + 1 ("00000000:0i:00.0"), its UUID is "GPU-5757b0b0-0000-0000-0000-00000000000i".
 * Header-only: each stand-in library compiles its own copy. */
#ifndef KC_STUB_GPUS_H
#define KC_STUB_GPUS_H

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KC_STUB_MAX 8

typedef struct kc_stub_gpu {
    char name[96];
    int major, minor;
    unsigned long long total_mib, free_mib;
    int util, mem_util, temp, power_w, limit_w;
} kc_stub_gpu;

static inline int kc_stub_gpus(kc_stub_gpu *g) {
    const char *e = getenv("KC_STUB_GPUS");
    if (!e || !*e) return 0;
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", e);
    int n = 0;
    char *save = NULL;
    for (char *entry = strtok_r(buf, ";", &save); entry && n < KC_STUB_MAX; entry = strtok_r(NULL, ";", &save)) {
        kc_stub_gpu *x = &g[n];
        memset(x, 0, sizeof *x);
        x->util = 50;
        x->mem_util = 20;
        x->temp = 60;
        x->power_w = 200;
        x->limit_w = 700;
        char *f[9] = {0};
        int k = 0;
        char *s2 = NULL;
        for (char *t = strtok_r(entry, ",", &s2); t && k < 9; t = strtok_r(NULL, ",", &s2)) f[k++] = t;
        if (k < 3) continue;
        snprintf(x->name, sizeof x->name, "%s", f[0]);
        sscanf(f[1], "%d.%d", &x->major, &x->minor);
        x->total_mib = strtoull(f[2], NULL, 10);
        x->free_mib = k > 3 ? strtoull(f[3], NULL, 10) : x->total_mib * 9 / 10;
        if (k > 4) x->util = atoi(f[4]);
        if (k > 5) x->mem_util = atoi(f[5]);
        if (k > 6) x->temp = atoi(f[6]);
        if (k > 7) x->power_w = atoi(f[7]);
        if (k > 8) x->limit_w = atoi(f[8]);
        n++;
    }
    return n;
}

/* The physical GPUs CUDA_VISIBLE_DEVICES leaves visible, in CUDA's order; returns the count. */
static inline int kc_stub_visible(int physical, int *vis) {
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) {
        for (int i = 0; i < physical; i++) vis[i] = i;
        return physical;
    }
    char buf[256];
    snprintf(buf, sizeof buf, "%s", cvd);
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t && n < KC_STUB_MAX; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t)) t++;
        char *end = NULL;
        long v = strtol(t, &end, 10);
        if (end == t || (*end && !isspace((unsigned char)*end)) || v < 0 || v >= physical) break;
        int dup = 0;
        for (int i = 0; i < n; i++) dup |= vis[i] == (int)v;
        if (dup) break;
        vis[n++] = (int)v;
    }
    return n;
}

static inline int kc_stub_env_int(const char *name, int def) {
    const char *e = getenv(name);
    return e && *e ? atoi(e) : def;
}

#endif
