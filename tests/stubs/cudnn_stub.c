/* cudnn_stub.c — a stand-in cuDNN (compiled as libcudnn.so.9 with KC_STUB_MAJOR=9 and as
 * libcudnn.so.8 with KC_STUB_MAJOR=8) that reports a chosen version:
 *   KC_STUB_CUDNN<MAJOR>_VERSION   cudnnGetVersion (default 91900 = 9.19.0; 8907 = 8.9.7)
 *   KC_STUB_CUDNN<MAJOR>_CUDART    cudnnGetCudartVersion (default 13000; 12020 for cuDNN 8) */
#include <stddef.h>
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
