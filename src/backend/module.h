/* module.h — loading a backend module (a shared library) at run time. */
#ifndef KC_BACKEND_MODULE_H
#define KC_BACKEND_MODULE_H

#include "kerac_backend.h"

/* Load lib<kerac_kind>.so ("cuda" -> libkerac_cuda.so) and initialise it for device with
 * the device options opts (never NULL; passed to the module's entry point).
 * Search order: $KERAC_MODULE_PATH (a directory), the directory of libkerac itself, then
 * the dynamic loader's own path. Errors name the module, the path tried, dlerror() and,
 * from the module, the library or version that failed. */
kc_status kc__backend_module_open(const char *kind, const char *device, const kc_device_opts *opts, kc_backend **out);

#endif /* KC_BACKEND_MODULE_H */
