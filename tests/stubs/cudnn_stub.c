/* cudnn_stub.c — a stand-in cuDNN (compiled as libcudnn.so.9 with KC_STUB_MAJOR=9 and as
 * libcudnn.so.8 with KC_STUB_MAJOR=8) that reports a chosen version:
 *   KC_STUB_CUDNN<MAJOR>_VERSION   cudnnGetVersion (default 91900 = 9.19.0; 8907 = 8.9.7)
 *   KC_STUB_CUDNN<MAJOR>_CUDART    cudnnGetCudartVersion (default 13000; 12020 for cuDNN 8)
 *   KC_STUB_CUDNN9_CNN             cuDNN 9 only: cudnnCnnVersionCheck's status (default 0;
 *                                  3009 is what the real one returns without libcudnn_cnn.so.9),
 *                                  with cudnnGetErrorString / cudnnGetLastErrorString to say so */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef KC_STUB_MAJOR
#define KC_STUB_MAJOR 9
#endif
#define KC_STR2(x) #x
#define KC_STR(x) KC_STR2(x)
#define EXPORT __attribute__((visibility("default")))

static size_t env_or(const char *name, size_t def) {
    const char *e = getenv(name);
    return e && *e ? (size_t)strtoull(e, NULL, 10) : def;
}

EXPORT size_t cudnnGetVersion(void) {
    return env_or("KC_STUB_CUDNN" KC_STR(KC_STUB_MAJOR) "_VERSION", KC_STUB_MAJOR >= 9 ? 91900 : 8907);
}

EXPORT size_t cudnnGetCudartVersion(void) {
    return env_or("KC_STUB_CUDNN" KC_STR(KC_STUB_MAJOR) "_CUDART", KC_STUB_MAJOR >= 9 ? 13000 : 12020);
}

#if KC_STUB_MAJOR >= 9
static int cnn_failed;

EXPORT int cudnnCnnVersionCheck(void) {
    int st = (int)env_or("KC_STUB_CUDNN9_CNN", 0);
    cnn_failed = st != 0;
    return st;
}

EXPORT const char *cudnnGetErrorString(int st) {
    if (st == 0) return "CUDNN_STATUS_SUCCESS";
    if (st == 3009) return "CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE";
    return "CUDNN_STATUS_INTERNAL_ERROR";
}

EXPORT void cudnnGetLastErrorString(char *buf, size_t n) {
    if (n) snprintf(buf, n, "%s", cnn_failed ? "Invalid handle. Cannot load symbol cudnnCnnVersionCheck" : "");
}
#endif
