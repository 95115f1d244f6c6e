/* backend.h — private: opening a backend by its exact device name (backend.c). */
#ifndef KC_BACKEND_BACKEND_H
#define KC_BACKEND_BACKEND_H

#include <stdbool.h>

#include "kerac_backend.h"

/* "cuda", "gpu" or "cuda:N". */
bool kc__backend_is_cuda_name(const char *device);
/* "cpu", or the CUDA module for a CUDA name; another name is an argument error. No
 * fallback, no notes: kc_backend_open (../env/policy.c) adds the policy. */
kc_status kc__backend_open_exact(const char *device, kc_backend **out);

#endif /* KC_BACKEND_BACKEND_H */
