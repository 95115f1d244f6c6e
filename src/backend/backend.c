/* backend.c — a backend by its exact device name, without any policy:
 *   "cpu"                    the built-in CPU backend
 *   "cuda", "gpu", "cuda:N"  the CUDA module (module.c); any failure is an error with its reason
 * The device policy ("auto": the GPU when it works, else the CPU with the reason) is
 * kc_backend_open, in ../env/policy.c: it needs the diagnosis of src/env, which sits
 * above the backends. */
#include <string.h>

#include "../core/core.h"
#include "backend.h"
#include "module.h"

void kc_backend_destroy(kc_backend *be) {
    if (be && be->destroy) be->destroy(be);
}

bool kc__backend_is_cuda_name(const char *d) {
    return strcmp(d, "cuda") == 0 || strcmp(d, "gpu") == 0 || strncmp(d, "cuda:", 5) == 0;
}

kc_status kc__backend_open_exact(const char *device, const kc_device_opts *opts, kc_backend **out) {
    *out = NULL;
    if (strcmp(device, "cpu") == 0) return kc_backend_cpu_create_ex(opts, out);
    if (kc__backend_is_cuda_name(device))
        return kc__backend_module_open("cuda", strcmp(device, "gpu") == 0 ? "cuda" : device, opts, out);
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "device '%s' is not one of cpu, cuda, cuda:N, auto", device);
}
