/* policy.c — the device policy and the small pieces around it that the model and the CLI call:
 *   - kc_backend_open: "cpu", "cuda", "cuda:N" exactly (any failure is an error with its
 *     reason), or "auto": the CUDA module when it loads and initialises, else the CPU with
 *     a warning that always shows and names the reason (from the doctor's checks);
 *   - the reason a model runs where it runs (thread-local, set by kc_backend_open);
 *   - the input-bound verdict of an epoch;
 *   - the GPU monitor of a device ("cuda:N ..."), found through its PCI bus id in NVML.
 * What a fit observes with them (placement lines, readings in its logs) is src/model's
 * (device.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../backend/cpu/cpu_blas.h"
#include "env.h"

/* ---------------------------------------------------------------- device reason */

static _Thread_local char g_reason[1024];

void kc__env_note_device_reason(const char *reason) { snprintf(g_reason, sizeof g_reason, "%s", reason ? reason : ""); }
const char *kc__env_device_reason(void) { return g_reason; }

void kc__env_note_open(const char *requested, const kc_backend *be) {
    const char *d = requested && *requested ? requested : "cpu";
    if (!be) kc__env_note_device_reason("");
    else if (!strcmp(d, "auto"))
        snprintf(g_reason, sizeof g_reason, "auto: %s works", be->device);
    else
        snprintf(g_reason, sizeof g_reason, "device %s was asked for (or is the default: --device auto uses a working "
                 "GPU)", d);
}

const char *kc__env_auto_fallback(const char *module_error, char *why, size_t n) {
    kc__env_fallback_reason(module_error, why, n);
    snprintf(g_reason, sizeof g_reason, "no GPU: %s; run `kerac doctor`", why);
    return why;
}

/* ---------------------------------------------------------------- the device policy */

static kc_status open_policy(const char *d, const kc_device_opts *opts, kc_backend **out) {
    kc__env_note_device_reason("");
    if (strcmp(d, "auto") != 0) {
        kc_status s = kc__backend_open_exact(d, opts, out);
        if (s == KC_STATUS_OK) kc__env_note_open(d, *out);
        return s;
    }
    kc_status s = kc__backend_open_exact("cuda", opts, out);
    if (s == KC_STATUS_OK) {
        kc__env_note_open(d, *out);
        return s;
    }
    char why[960]; /* leaves room for the reason's own words around it */
    kc__env_auto_fallback(kc_last_error(), why, sizeof why);
    kc__log_always(KC_LOG_WARNING, "no GPU: %s; training on the CPU (run `kerac doctor` for the whole check)", why);
    return kc_backend_cpu_create_ex(opts, out);
}

/* A CPU backend whose OpenBLAS runs kernels below kerac's own (OPENBLAS_CORETYPE=Haswell on
 * an AVX-512 processor...: src/backend/cpu/cpu_blas.c): nothing fails, GEMMs run at up to
 * half speed, so it is said, once a process, as a warning (the doctor says it too). */
static void warn_blas_below(const kc_backend *be) {
    static int said;
    char why[KC_ERROR_MAX];
    if (kc__cpu_blas_below_backend(be, why, sizeof why) && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        kc__log(KC_LOG_WARNING, "cpu backend: %s", why);
}

kc_status kc_backend_open_ex(const kc_device_opts *opts, kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_open: the output pointer is NULL");
    *out = NULL;
    kc_device_opts env;
    if (!opts) {
        KC_TRY(kc_device_opts_default(&env));
        opts = &env;
    }
    KC_TRY(open_policy(opts->device && *opts->device ? opts->device : "cpu", opts, out));
    if (opts->memory_limit) (*out)->set_memory_limit(*out, opts->memory_limit);
    warn_blas_below(*out);
    return KC_STATUS_OK;
}

kc_status kc_backend_open(const char *device, kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_open: the output pointer is NULL");
    *out = NULL;
    kc_device_opts o;
    KC_TRY(kc_device_opts_default(&o));
    o.device = device;
    return kc_backend_open_ex(&o, out);
}

/* ---------------------------------------------------------------- input-bound verdict */

int kc_input_bound_verdict(double wait_s, double epoch_s, const char *device, char *buf, size_t n) {
    if (buf && n) buf[0] = '\0';
    if (!(epoch_s > 0) || !(wait_s >= 0.05)) return 0;
    double frac = wait_s / epoch_s;
    if (frac > 1) frac = 1;
    if (frac < 0.10) return 0;
    bool gpu = device && (!strncmp(device, "cuda", 4) || !strncmp(device, "gpu", 3));
    if (buf && n)
        snprintf(buf, n, "the %s waited for data %.0f%% of the step time; raise --prefetch or use more loader threads",
                 gpu ? "GPU" : "CPU", frac * 100.0);
    return 1;
}

/* ---------------------------------------------------------------- the monitor of a device */

void kc__env_device_monitor(const char *device, kc_monitor **out) {
    *out = NULL;
    if (!device || strncmp(device, "cuda:", 5) != 0) return;
    int cuda = atoi(device + 5);
    char pci[32];
    if (!kc__driver_pci(cuda, pci, sizeof pci)) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: its PCI bus id is not known", device);
        return;
    }
    int idx = kc__nvml_index_by_pci(NULL, pci);
    if (idx < 0) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: NVML (libnvidia-ml.so.1) does not list it", device);
        return;
    }
    kc__saved_error saved;
    kc__error_save(&saved);
    if (kc_monitor_start(idx, 0.5, out) != KC_STATUS_OK) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: %s", device, kc_last_error());
        *out = NULL;
    }
    kc__error_restore(&saved);
}
