/* cuda_test.h — the set-up the GPU tests share (test_cuda_backend.c, test_cuda_grouped.c,
 * test_cuda_labels.c, test_dist_gpu.c, test_gpu_trace.c): the module found in the build
 * folder, plain fp32, the CUDA backend opened or the test skipped (ctest's exit 77), the
 * CPU reference backend, and OK() for calls that must succeed. Include after <cmocka.h>. */
#ifndef KC_TEST_CUDA_TEST_H
#define KC_TEST_CUDA_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "kerac.h"
#include "kerac_backend.h"

/* A backend or API call that must succeed: the failure names the call, status and error. */
#define OK(expr)                                                                                             \
    do {                                                                                                     \
        kc_status s_ = (expr);                                                                               \
        if (s_ != KC_STATUS_OK) fail_msg("%s failed (%s): %s", #expr, kc_status_name(s_), kc_last_error()); \
    } while (0)

/* The module from the build folder (ctest sets KERAC_BINARY_DIR), KERAC_TF32 unset (plain
 * fp32: the module's default), then the CUDA backend into *gpu and, when cpu is not NULL,
 * the CPU backend into *cpu. Returns 0 when all opened; else what main returns: 77 after
 * "SKIP: no GPU: <reason>", 1 when the CPU backend failed (the GPU one is closed again). */
static inline int cuda_test_open(kc_backend **gpu, kc_backend **cpu) {
    const char *bin = getenv("KERAC_BINARY_DIR");
    if (bin && *bin) setenv("KERAC_MODULE_PATH", bin, 0);
    unsetenv("KERAC_TF32");
    if (kc_backend_open("cuda", gpu) != KC_STATUS_OK) {
        printf("SKIP: no GPU: %s\n", kc_last_error());
        return 77;
    }
    if (cpu && kc_backend_cpu_create(cpu) != KC_STATUS_OK) {
        printf("cannot create the CPU backend: %s\n", kc_last_error());
        kc_backend_destroy(*gpu);
        *gpu = NULL;
        return 1;
    }
    return 0;
}

#endif /* KC_TEST_CUDA_TEST_H */
