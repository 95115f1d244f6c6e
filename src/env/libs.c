/* libs.c — cuDNN, cuBLAS and NCCL as the dynamic loader finds them at run time: the file
 * (the copy already loaded by the CUDA module when there is one, else what dlopen finds
 * now), its version and the CUDA version it was built for, read from the library itself
 * (cudnnGetVersion / cudnnGetCudartVersion, cublasGetProperty / cublasGetCudartVersion,
 * ncclGetVersion; NCCL's CUDA from its banner "NCCL version 2.21.5+cuda12.4" in the file); for
 * cuDNN 9, whether its convolution library loads (cudnnCnnVersionCheck). */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"

kc__ver kc__cudnn_version(long v) {
    if (v <= 0) return kc__ver_none();
    if (v >= 10000) return (kc__ver){(int)(v / 10000), (int)((v % 10000) / 100), (int)(v % 100)}; /* cuDNN 9+ */
    return (kc__ver){(int)(v / 1000), (int)((v % 1000) / 100), (int)(v % 100)};                 /* cuDNN <= 8 */
}

/* The loaded copy of soname, or dlopen it; the path into path. */
static void *open_lib(const char *soname, char *path, size_t pn, char *err, size_t en) {
    void *h = kc__dl_loaded(soname);
    if (!h) h = kc__dl_open(soname, err, en);
    if (h && !kc__dl_path(h, path, pn)) snprintf(path, pn, "%s", soname);
    return h;
}

typedef size_t (*size_fn)(void);

static void read_cudnn(void *h, kc__ver *version, kc__ver *cuda) {
    size_fn ver = (size_fn)kc__dl_sym(h, "cudnnGetVersion");
    size_fn rt = (size_fn)kc__dl_sym(h, "cudnnGetCudartVersion");
    *version = ver ? kc__cudnn_version((long)ver()) : kc__ver_none();
    *cuda = rt ? kc__ver_from_cuda_int((long)rt()) : kc__ver_none();
}

typedef int (*status_fn)(void);
typedef const char *(*status_text_fn)(int);
typedef void (*last_error_fn)(char *, size_t);

/* cuDNN 9 loads its convolution library (libcudnn_cnn.so.9, which needs libz) at first use;
 * its version check loads it now, as the CUDA module does at start-up. */
static void read_cudnn_cnn(void *h, char *err, size_t n) {
    status_fn check = (status_fn)kc__dl_sym(h, "cudnnCnnVersionCheck");
    if (!check) return; /* not cuDNN 9 */
    int st = check();
    if (st == 0) return;
    status_text_fn text = (status_text_fn)kc__dl_sym(h, "cudnnGetErrorString");
    last_error_fn last = (last_error_fn)kc__dl_sym(h, "cudnnGetLastErrorString");
    char detail[256] = "";
    if (last) last(detail, sizeof detail);
    snprintf(err, n, "cudnnCnnVersionCheck: %s%s%s", text ? text(st) : "failed", detail[0] ? ": " : "", detail);
}

void kc__lib_cudnn(int major, kc__lib *out) {
    memset(out, 0, sizeof *out);
    out->what = "cuDNN";
    out->version = out->cuda = out->other_version = out->other_cuda = kc__ver_none();
    snprintf(out->soname, sizeof out->soname, "libcudnn.so.%d", major);
    void *h = open_lib(out->soname, out->path, sizeof out->path, out->error, sizeof out->error);
    if (h) {
        out->found = true;
        read_cudnn(h, &out->version, &out->cuda);
        if (out->version.major == major) read_cudnn_cnn(h, out->part_error, sizeof out->part_error);
        return;
    }
    /* another major version, to say what is there instead */
    static const int others[] = {8, 9, 10, 7};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        if (others[i] == major) continue;
        char so[64], path[KC_ENV_PATH], err[256];
        snprintf(so, sizeof so, "libcudnn.so.%d", others[i]);
        void *o = open_lib(so, path, sizeof path, err, sizeof err);
        if (!o) continue;
        snprintf(out->other_soname, sizeof out->other_soname, "%s", so);
        snprintf(out->other_path, sizeof out->other_path, "%s", path);
        read_cudnn(o, &out->other_version, &out->other_cuda);
        break;
    }
}

typedef int (*prop_fn)(int type, int *value);

static void read_cublas(void *h, kc__ver *version, kc__ver *cuda) {
    prop_fn prop = (prop_fn)kc__dl_sym(h, "cublasGetProperty");
    size_fn rt = (size_fn)kc__dl_sym(h, "cublasGetCudartVersion");
    int v[3] = {-1, 0, 0};
    if (prop)
        for (int i = 0; i < 3; i++) /* MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL */
            if (prop(i, &v[i]) != 0) v[i] = i == 0 ? -1 : 0;
    *version = (kc__ver){v[0], v[1], v[2]};
    *cuda = rt ? kc__ver_from_cuda_int((long)rt()) : kc__ver_none();
}

void kc__lib_cublas(int major, kc__lib *out) {
    memset(out, 0, sizeof *out);
    out->what = "cuBLAS";
    out->version = out->cuda = out->other_version = out->other_cuda = kc__ver_none();
    snprintf(out->soname, sizeof out->soname, "libcublas.so.%d", major);
    void *h = open_lib(out->soname, out->path, sizeof out->path, out->error, sizeof out->error);
    if (h) {
        out->found = true;
        read_cublas(h, &out->version, &out->cuda);
        return;
    }
    for (int m = major + 1; m >= major - 2 && m >= 10; m--) {
        if (m == major) continue;
        char so[64], path[KC_ENV_PATH], err[256];
        snprintf(so, sizeof so, "libcublas.so.%d", m);
        void *o = open_lib(so, path, sizeof path, err, sizeof err);
        if (!o) continue;
        snprintf(out->other_soname, sizeof out->other_soname, "%s", so);
        snprintf(out->other_path, sizeof out->other_path, "%s", path);
        read_cublas(o, &out->other_version, &out->other_cuda);
        break;
    }
}

typedef int (*nccl_ver_fn)(int *);

/* The CUDA an NCCL build is for: "+cudaMAJOR.MINOR" after "NCCL version " in its file
 * (NCCL prints that banner at start-up, and keeps it as one string). */
static kc__ver nccl_cuda(const char *path) {
    kc__ver v = kc__ver_none();
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0) return v;
    if (fstat(fd, &st) == 0 && st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            static const char key[] = "NCCL version ";
            const char *at = p, *end = (const char *)p + st.st_size;
            while ((at = memmem(at, (size_t)(end - at), key, sizeof key - 1))) {
                at += sizeof key - 1;
                char text[48];
                size_t n = KC_MIN((size_t)(end - at), sizeof text - 1);
                memcpy(text, at, n);
                text[n] = 0;
                const char *plus = strstr(text, "+cuda");
                int a = 0, b = 0;
                if (plus && sscanf(plus, "+cuda%d.%d", &a, &b) == 2) {
                    v = (kc__ver){a, b, 0};
                    break;
                }
            }
            munmap(p, (size_t)st.st_size);
        }
    }
    close(fd);
    return v;
}

void kc__lib_nccl(kc__lib *out) {
    memset(out, 0, sizeof *out);
    out->what = "NCCL";
    out->version = out->cuda = out->other_version = out->other_cuda = kc__ver_none();
    snprintf(out->soname, sizeof out->soname, "libnccl.so.2");
    void *h = open_lib(out->soname, out->path, sizeof out->path, out->error, sizeof out->error);
    if (!h) return;
    out->found = true;
    nccl_ver_fn fn = (nccl_ver_fn)kc__dl_sym(h, "ncclGetVersion");
    int v = 0;
    if (fn && fn(&v) == 0 && v > 0) {
        if (v >= 20900) out->version = (kc__ver){v / 10000, (v % 10000) / 100, v % 100};
        else out->version = (kc__ver){v / 1000, (v % 1000) / 100, v % 100};
    }
    out->cuda = nccl_cuda(out->path);
}
