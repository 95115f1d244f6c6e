/* module.c — dlopen of a backend module and the ABI handshake. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/core.h"
#include "module.h"

/* The directory this library was loaded from (for modules installed beside it). */
static bool self_dir(char *buf, size_t n) {
    Dl_info info;
    if (!dladdr((void *)&kc__backend_module_open, &info) || !info.dli_fname) return false;
    snprintf(buf, n, "%s", info.dli_fname);
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    *slash = '\0';
    return true;
}

kc_status kc__backend_module_open(const char *kind, const char *device, const kc_device_opts *opts, kc_backend **out) {
    char file[64], path[4096], tried[8400] = "";
    snprintf(file, sizeof file, "libkerac_%s.so", kind);
    void *h = NULL;
    const char *env = getenv("KERAC_MODULE_PATH");
    char dir[4096];
    const char *dirs[2] = {env && *env ? env : NULL, self_dir(dir, sizeof dir) ? dir : NULL};
    char first_err[1024] = "";
    for (int i = 0; i < 2 && !h; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/%s", dirs[i], file);
        h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            size_t used = strlen(tried);
            snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", path);
            /* a module that exists but cannot load (a missing libcudnn.so.9, whose message
             * also says "No such file") is the real reason */
            if (!first_err[0] && e && (access(path, F_OK) == 0 || strncmp(e, path, strlen(path)) != 0))
                snprintf(first_err, sizeof first_err, "%s", e);
        }
    }
    if (!h) {
        h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            /* "libkerac_x.so: cannot open ..." means the loader has no such module; any other
             * text is about a module it found */
            if (!first_err[0] && e && strncmp(e, file, strlen(file)) != 0)
                snprintf(first_err, sizeof first_err, "%s", e);
        }
    }
    if (!h) {
        if (first_err[0])
            return kc__fail(KC_STATUS_DEVICE, "the %s backend module cannot be loaded: %s", kind, first_err);
        return kc__fail(KC_STATUS_DEVICE,
                        "the %s backend module %s is not installed (looked in %s%sthe loader path); this kerac was "
                        "built without %s, or the module was not installed beside libkerac",
                        kind, file, tried, tried[0] ? ", " : "", kind);
    }
    kc_backend_module_init_fn init = (kc_backend_module_init_fn)dlsym(h, KC_BACKEND_MODULE_ENTRY);
    if (!init) {
        const char *e = dlerror();
        kc_status s = kc__fail(KC_STATUS_DEVICE, "the %s backend module has no symbol %s (%s); it is not a kerac module "
                               "or is from another version", kind, KC_BACKEND_MODULE_ENTRY, e ? e : "?");
        dlclose(h);
        return s;
    }
    char err[1024] = "";
    kc_backend *be = NULL;
    kc_status s = init(KC_BACKEND_ABI, device, &be, err, sizeof err, opts);
    if (s != KC_STATUS_OK || !be) {
        /* Not dlclose'd: an initialisation that ran has loaded the GPU libraries (cuDNN,
         * cuBLAS, the CUDA runtime's state), and unloading them would drop memory they
         * allocated for the life of the process (reported as leaks) and tear down runtime
         * state; the next open of this module reuses the handle. */
        s = kc__fail(s != KC_STATUS_OK ? s : KC_STATUS_DEVICE, "the %s backend cannot start: %s", kind,
                     err[0] ? err : "no reason given");
        return s;
    }
    if (be->abi != KC_BACKEND_ABI || be->struct_size != sizeof(kc_backend)) {
        int abi = be->abi;
        size_t sz = be->struct_size;
        if (be->destroy) be->destroy(be); /* the module's own, as kc_backend_destroy would */
        dlclose(h);
        return kc__fail(KC_STATUS_DEVICE, "the %s backend module speaks ABI %d (table of %zu bytes); this libkerac "
                        "needs ABI %d (%zu bytes): install the module built with this kerac", kind, abi, sz,
                        KC_BACKEND_ABI, sizeof(kc_backend));
    }
    /* the module reports errors and log lines through this library's state */
    be->host_fail = kc__fail;
    be->host_log = kc__log;
    /* The handle stays open for the life of the process: the backend's code lives in it. */
    *out = be;
    return KC_STATUS_OK;
}
