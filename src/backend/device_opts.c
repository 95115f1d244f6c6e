/* device_opts.c — kc_device_opts: where a model runs and how its device is set up.
 * kc_device_opts_default is the one place the device's KERAC_* environment variables are
 * read; everything below it (the backend policy, the CUDA module) gets the options as a
 * struct. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../core/core.h"
#include "backend.h"

static int env_flag(const char *name) {
    const char *v = getenv(name);
    if (!v || !*v) return KC_DEFAULT;
    bool off = !strcmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off");
    return off ? KC_FALSE : KC_TRUE;
}

/* A size variable: 0 when unset; an error naming the variable when it does not parse. */
static kc_status env_size(const char *name, size_t *out) {
    const char *v = getenv(name);
    *out = 0;
    if (!v || !*v) return KC_STATUS_OK;
    kc_status s = kc_parse_size(v, out);
    if (s != KC_STATUS_OK) return kc__wrap(s, "%s: ", name);
    return KC_STATUS_OK;
}

/* KERAC_CPU_ISA: auto (or unset), baseline, avx2, avx512 */
static kc_status env_cpu_isa(int *out) {
    static const char *const names[] = {"auto", "baseline", "avx2", "avx512"};
    const char *v = getenv("KERAC_CPU_ISA");
    *out = KC_CPU_ISA_AUTO;
    if (!v || !*v) return KC_STATUS_OK;
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(v, names[i])) {
            *out = i;
            return KC_STATUS_OK;
        }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "KERAC_CPU_ISA: '%.40s' is not one of auto, baseline, avx2, avx512", v);
}

/* KERAC_CPU_WINOGRAD_TILE: auto (or unset, or 0), 2, 3, 4 */
static kc_status env_winograd_tile(int *out) {
    const char *v = getenv("KERAC_CPU_WINOGRAD_TILE");
    *out = 0;
    if (!v || !*v || !strcasecmp(v, "auto") || !strcmp(v, "0")) return KC_STATUS_OK;
    if (!strcmp(v, "2") || !strcmp(v, "3") || !strcmp(v, "4")) {
        *out = v[0] - '0';
        return KC_STATUS_OK;
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "KERAC_CPU_WINOGRAD_TILE: '%.40s' is not one of auto, 2, 3, 4", v);
}

kc_status kc_device_opts_default(kc_device_opts *out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_device_opts_default: the output pointer is NULL");
    memset(out, 0, sizeof *out);
    const char *dev = getenv("KERAC_DEVICE"), *mem = getenv("KERAC_GPU_MEMORY");
    out->device = dev && *dev ? dev : NULL;
    out->gpu_memory = mem && *mem ? mem : NULL;
    out->cudnn_benchmark = env_flag("KERAC_CUDNN_BENCHMARK");
    out->deterministic = env_flag("KERAC_DETERMINISTIC");
    out->tf32 = env_flag("KERAC_TF32");
    out->cpu_winograd = env_flag("KERAC_CPU_WINOGRAD");
    out->cpu_conv_blocked = env_flag("KERAC_CPU_CONV_BLOCKED");
    out->cpu_hugepages = env_flag("KERAC_CPU_HUGEPAGES");
    out->cudnn_grouped = env_flag("KERAC_CUDNN_GROUPED");
    out->cpu_fuse_bn_relu = env_flag("KERAC_CPU_FUSE_BN_RELU");
    out->cpu_fold_pad = env_flag("KERAC_CPU_FOLD_PAD");
    out->cpu_infer_tile = env_flag("KERAC_CPU_INFER_TILE");
    out->cpu_gemm_split = env_flag("KERAC_CPU_GEMM_SPLIT");
    out->cpu_conv_dx_add = env_flag("KERAC_CPU_CONV_DX_ADD");
    out->cpu_fuse_add_relu = env_flag("KERAC_CPU_FUSE_ADD_RELU");
    out->cpu_fuse_bn_add = env_flag("KERAC_CPU_FUSE_BN_ADD");
    out->cpu_gemm_small = env_flag("KERAC_CPU_GEMM_SMALL");
    /* every variable is read even when one is bad, so *out has every other field */
    kc_status s0 = env_cpu_isa(&out->cpu_isa);
    char isa_err[KC_ERROR_MAX];
    snprintf(isa_err, sizeof isa_err, "%s", kc_last_error());
    kc_status s1 = env_size("KERAC_MEMORY_LIMIT", &out->memory_limit);
    char first[KC_ERROR_MAX];
    snprintf(first, sizeof first, "%s", kc_last_error());
    kc_status s2 = env_size("KERAC_CUDNN_WORKSPACE_LIMIT", &out->cudnn_workspace_limit);
    char second[KC_ERROR_MAX];
    snprintf(second, sizeof second, "%s", kc_last_error());
    kc_status s3 = env_winograd_tile(&out->cpu_winograd_tile);
    if (s0 != KC_STATUS_OK) return kc__fail(s0, "%s", isa_err);
    if (s1 != KC_STATUS_OK) return kc__fail(s1, "%s", first);
    if (s2 != KC_STATUS_OK) return kc__fail(s2, "%s", second);
    return s3;
}

static kc_status copy_string(char *dst, size_t n, const char *src, const char *what) {
    const char *v = src ? src : "";
    if (strlen(v) >= n) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s '%.40s...' is too long", what, v);
    snprintf(dst, n, "%s", v);
    return KC_STATUS_OK;
}

kc_status kc__device_opts_keep(kc__device_opts_copy *dst, const kc_device_opts *src) {
    kc__device_opts_copy c = {.o = *src};
    KC_TRY(copy_string(c.device, sizeof c.device, src->device, "device name"));
    KC_TRY(copy_string(c.gpu_memory, sizeof c.gpu_memory, src->gpu_memory, "GPU memory mode"));
    c.o.device = c.o.gpu_memory = NULL; /* the buffers hold them: kc__device_opts_view */
    *dst = c;
    return KC_STATUS_OK;
}

kc_device_opts kc__device_opts_view(const kc__device_opts_copy *c) {
    kc_device_opts o = c->o;
    o.device = c->device[0] ? c->device : NULL;
    o.gpu_memory = c->gpu_memory[0] ? c->gpu_memory : NULL;
    return o;
}
