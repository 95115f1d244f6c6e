/* cublas_stub.c — a stand-in libcublas.so.13 that reports a chosen version:
 *   KC_STUB_CUBLAS_VERSION   "MAJOR.MINOR.PATCH" for cublasGetProperty (default 13.1.0)
 *   KC_STUB_CUBLAS_CUDART    cublasGetCudartVersion (default 13000) */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int cublasGetProperty(int type, int *value) {
    const char *e = getenv("KC_STUB_CUBLAS_VERSION");
    int v[3] = {13, 1, 0};
    if (e && *e) sscanf(e, "%d.%d.%d", &v[0], &v[1], &v[2]);
    if (!value || type < 0 || type > 2) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    *value = v[type];
    return 0;
}

EXPORT size_t cublasGetCudartVersion(void) {
    const char *e = getenv("KC_STUB_CUBLAS_CUDART");
    return e && *e ? (size_t)strtoull(e, NULL, 10) : 13000;
}
