/* echo_module.c — a stand-in libkerac_cuda.so without dependencies, for test_device_opts:
 * its initialisation fails with a message that spells out the device name and the device
 * options it was given, so that a test sees exactly what reached the module. */
#include <stdio.h>

#include "kerac_backend.h"

__attribute__((visibility("default"))) kc_status kc_backend_module_init(int abi, const char *device, kc_backend **out,
                                                                        char *err, size_t n, const kc_device_opts *o) {
    *out = NULL;
    if (!o) {
        snprintf(err, n, "echo: no options");
        return KC_STATUS_DEVICE;
    }
    snprintf(err, n,
             "echo: abi=%d device=%s gpu_memory=%s memory_limit=%zu workspace=%zu benchmark=%d deterministic=%d "
             "tf32=%d",
             abi, device ? device : "(null)", o->gpu_memory ? o->gpu_memory : "(null)", o->memory_limit,
             o->cudnn_workspace_limit, o->cudnn_benchmark, o->deterministic, o->tf32);
    return KC_STATUS_DEVICE;
}
