/* backend.c — choosing a backend by device name, and the device policy:
 *   "cpu"            the built-in CPU backend
 *   "cuda", "cuda:N" the CUDA module; any failure is an error with its reason
 *   "auto"           the CUDA module when it loads and initialises, else the CPU with a
 *                    warning that always shows and names the reason */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/core.h"
#include "../env/env.h"
#include "kerac_backend.h"
#include "module.h"

void kc_backend_destroy(kc_backend *be) {
    if (be && be->destroy) be->destroy(be);
}

static bool is_cuda_name(const char *d) {
    return strcmp(d, "cuda") == 0 || strcmp(d, "gpu") == 0 || strncmp(d, "cuda:", 5) == 0;
}

kc_status kc_backend_open(const char *device, kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_open: the output pointer is NULL");
    *out = NULL;
    const char *d = device && *device ? device : "cpu";
    kc__env_note_device_reason("");
    if (strcmp(d, "cpu") == 0) {
        kc_status s = kc_backend_cpu_create(out);
        if (s == KC_STATUS_OK) kc__env_note_open(d, *out);
        return s;
    }
    if (is_cuda_name(d)) {
        const char *dev = strcmp(d, "gpu") == 0 ? "cuda" : d;
        kc_status s = kc__backend_module_open("cuda", dev, out);
        if (s == KC_STATUS_OK) kc__env_note_open(d, *out);
        return s;
    }
    if (strcmp(d, "auto") == 0) {
        kc_status s = kc__backend_module_open("cuda", "cuda", out);
        if (s == KC_STATUS_OK) {
            kc__env_note_open(d, *out);
            return s;
        }
        char why[1024];
        kc__env_auto_fallback(kc_last_error(), why, sizeof why);
        kc__log_always(KC_LOG_WARNING, "no GPU: %s; training on the CPU (run `kerac doctor` for the whole check)", why);
        return kc_backend_cpu_create(out);
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "device '%s' is not one of cpu, cuda, cuda:N, auto", d);
}
