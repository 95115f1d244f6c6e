/* backend.h — private: opening a backend by its exact device name (backend.c). */
#ifndef KC_BACKEND_BACKEND_H
#define KC_BACKEND_BACKEND_H

#include <stdbool.h>

#include "kerac_backend.h"

/* "cuda", "gpu" or "cuda:N". */
bool kc__backend_is_cuda_name(const char *device);
/* "cpu", or the CUDA module for a CUDA name, given opts (never NULL: the GPU options go to
 * the module); another name is an argument error. No fallback, no notes, no memory limit:
 * kc_backend_open_ex (../env/policy.c) adds the policy. */
kc_status kc__backend_open_exact(const char *device, const kc_device_opts *opts, kc_backend **out);

/* A kc_device_opts that owns its strings (a model keeps one): fill it with
 * kc__device_opts_keep (an argument error when a string does not fit), read it back with
 * kc__device_opts_view (whose strings point into the copy). */
typedef struct kc__device_opts_copy {
    kc_device_opts o; /* the numbers; o.device and o.gpu_memory are unused */
    char device[64];
    char gpu_memory[64];
} kc__device_opts_copy;
kc_status kc__device_opts_keep(kc__device_opts_copy *dst, const kc_device_opts *src);
kc_device_opts kc__device_opts_view(const kc__device_opts_copy *c);

#endif /* KC_BACKEND_BACKEND_H */
