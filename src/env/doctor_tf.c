/* doctor_tf.c — the doctor's TensorFlow checks: each installation found (or the one
 * given) against this machine, with the message TensorFlow itself would print: the
 * driver against its CUDA, the GPU libraries it dlopens, cuDNN's version against the one
 * it was built with (or tensorflow[and-cuda] pins), and the GPUs it has code for. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* ---- TensorFlow */

/* Sonames TensorFlow loads for a CUDA major (the CUDA 11 and 12 wheels). */
static int tf_sonames(const kc__tf *tf, char (*out)[48], int max) {
    int n = 0, cm = tf->cuda.major;
    int dnn = kc__ver_known(tf->cudnn) ? tf->cudnn.major : (cm >= 12 ? 9 : 8);
    if (cm < 11 || max < 8) return 0;
    snprintf(out[n++], 48, "libcudart.so.%d", cm == 11 ? 11 : cm);
    snprintf(out[n++], 48, "libcublas.so.%d", cm);
    snprintf(out[n++], 48, "libcublasLt.so.%d", cm);
    snprintf(out[n++], 48, "libcufft.so.%d", cm == 11 ? 10 : 11);
    snprintf(out[n++], 48, "libcusparse.so.%d", cm);
    snprintf(out[n++], 48, "libcusolver.so.11");
    snprintf(out[n++], 48, "libcurand.so.10");
    snprintf(out[n++], 48, "libcudnn.so.%d", dnn);
    return n;
}

/* Where TensorFlow would find a library: its nvidia/<package>/lib wheels, LD_LIBRARY_PATH, the
 * loader's cache, the usual folders. The path into out (without loading anything). */
static bool tf_find_lib(const kc__tf *tf, const char *soname, char *out, size_t n) {
    static const char *const pkgs[] = {"cuda_runtime", "cublas", "cufft", "cusparse", "cusolver", "curand", "cudnn",
                                       "nccl", "cuda_nvrtc", "nvjitlink"};
    char p[KC_ENV_PATH + 128];
    for (size_t i = 0; tf->site[0] && i < sizeof pkgs / sizeof pkgs[0]; i++) {
        kc__pathf(p, sizeof p, "%s/nvidia/%s/lib/%s", tf->site, pkgs[i], soname);
        if (kc__file_exists(p)) {
            kc__pathf(out, n, "%s", p);
            return true;
        }
    }
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (llp && *llp) {
        char buf[8192];
        snprintf(buf, sizeof buf, "%s", llp);
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            kc__pathf(p, sizeof p, "%s/%s", d, soname);
            if (kc__file_exists(p)) {
                kc__pathf(out, n, "%s", p);
                return true;
            }
        }
    }
    char cached[1][KC_ENV_PATH];
    if (kc__ldcache_find(soname, cached, 1) == 1 && kc__file_exists(cached[0])) {
        snprintf(out, n, "%s", cached[0]);
        return true;
    }
    /* what this process can load (the loader's default folders, or --library-path) */
    void *h = kc__dl_loaded(soname);
    if (!h) h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (h && kc__dl_path(h, out, n)) return true;
    static const char *const dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/local/cuda/lib64", "/usr/lib64", "/usr/lib"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dirs[i], soname);
        if (kc__file_exists(p)) {
            kc__pathf(out, n, "%s", p);
            return true;
        }
    }
    return false;
}

/* The first entry of dir whose name starts with prefix, into out. */
static bool find_prefixed(const char *dir, const char *prefix, char *out, size_t n) {
    DIR *d = opendir(dir);
    if (!d) return false;
    struct dirent *e;
    bool found = false;
    size_t pl = strlen(prefix);
    while (!found && (e = readdir(d)) != NULL)
        if (!strncmp(e->d_name, prefix, pl)) {
            snprintf(out, n, "%s", e->d_name);
            found = true;
        }
    closedir(d);
    return found;
}

/* cuDNN's version beside TensorFlow: the nvidia-cudnn-cuNN wheel's metadata folder
 * (nvidia_cudnn_cu12-9.3.0.75.dist-info), or the file the soname points to
 * (libcudnn.so.9.3.0). */
static kc__ver tf_cudnn_version(const kc__tf *tf, const char *path) {
    kc__ver v = kc__ver_none();
    char nv[KC_ENV_PATH + 32];
    snprintf(nv, sizeof nv, "%s/nvidia/", tf->site);
    if (tf->site[0] && !strncmp(path, nv, strlen(nv))) {
        for (int cu = 11; cu <= 13 && !kc__ver_known(v); cu++) {
            char prefix[64], name[256];
            snprintf(prefix, sizeof prefix, "nvidia_cudnn_cu%d-", cu);
            if (find_prefixed(tf->site, prefix, name, sizeof name)) v = kc__ver_parse(name + strlen(prefix));
        }
    }
    if (!kc__ver_known(v)) {
        char real[KC_ENV_PATH];
        if (realpath(path, real)) {
            const char *so = strstr(real, ".so.");
            if (so) {
                kc__ver f = kc__ver_parse(so + 4);
                if (kc__ver_known(f) && (f.minor || f.patch)) v = f;
            }
        }
    }
    return v;
}

/* The driver against the CUDA TensorFlow was built with; 1 when that is a problem. */
static int tf_check_driver(kc_doctor_report *r, const kc__tf *tf, const char *name) {
    char a[32], b[32], need[96], fix[256];
    const kc__driver *d = &r->drv;
    kc__ver dv = kc__ver_from_cuda_int(d->cuda_version);
    kc__doc_driver_need((kc__ver){tf->cuda.major, tf->cuda.minor, 0}, need, sizeof need);
    if (!d->found || d->is_stub) {
        snprintf(fix, sizeof fix, "install the NVIDIA driver, %s", need);
        kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"Could not load dynamic library 'libcuda.so.1'\": no NVIDIA driver, so TensorFlow runs on the CPU",
            name);
        return 1;
    }
    if (!kc__ver_known(dv) || !kc__ver_known(tf->cuda) || dv.major > tf->cuda.major ||
        (dv.major == tf->cuda.major && dv.minor >= tf->cuda.minor))
        return 0;
    snprintf(fix, sizeof fix, "update the NVIDIA driver to %s", need);
    if (dv.major < tf->cuda.major) {
        kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"CUDA driver version is insufficient for CUDA runtime version\": the driver supports CUDA %s, "
            "TensorFlow was built with CUDA %s",
            name, kc__doc_v2(dv, a), kc__doc_v(tf->cuda, b));
        return 1;
    }
    kc__doc_add(r, "tensorflow", KC_CHECK_WARNING, fix,
        "%s: the driver supports CUDA %s, TensorFlow was built with CUDA %s: minor-version compatibility runs its "
        "native code, but its PTX (for GPUs newer than its list) cannot be compiled",
        name, kc__doc_v2(dv, a), kc__doc_v(tf->cuda, b));
    return 0;
}

/* The GPU libraries TensorFlow dlopens, and the cuDNN it finds against the one it wants;
 * the number of problems added. */
static int tf_check_libs(kc_doctor_report *r, const kc__tf *tf, const char *name, const char *pin) {
    char b[32], c[32];
    int problems = 0;
    char sonames[8][48];
    int ns = tf_sonames(tf, sonames, 8);
    char missing[512] = "";
    size_t mu = 0;
    char dnn_path[KC_ENV_PATH] = "";
    for (int i = 0; i < ns; i++) {
        char p[KC_ENV_PATH];
        if (tf_find_lib(tf, sonames[i], p, sizeof p)) {
            if (!strncmp(sonames[i], "libcudnn.so.", 12)) snprintf(dnn_path, sizeof dnn_path, "%s", p);
            continue;
        }
        mu += (size_t)snprintf(missing + mu, sizeof missing - mu, "%s%s", mu ? ", " : "", sonames[i]);
    }
    if (missing[0]) {
        char fix[320];
        if (kc__ver_known(tf->cudnn_pin))
            snprintf(fix, sizeof fix,
                     "pip install 'tensorflow[and-cuda]%s' (it installs nvidia-cudnn-cu%d==%s and the CUDA %d libraries "
                     "beside TensorFlow)",
                     pin, tf->cuda.major, tf->cudnn_pin_text, tf->cuda.major);
        else
            snprintf(fix, sizeof fix, "pip install 'tensorflow[and-cuda]%s', or install CUDA %d and cuDNN %d", pin,
                     tf->cuda.major, tf->cudnn.major);
        kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"Cannot dlopen some GPU libraries ... Skipping registering GPU devices\": %s not found (in %s/nvidia/*/lib "
            "or on the loader's path)",
            name, missing, tf->site);
        problems++;
    }
    if (!dnn_path[0]) return problems;
    kc__ver have = tf_cudnn_version(tf, dnn_path);
    kc__ver want = kc__ver_known(tf->cudnn_pin) ? tf->cudnn_pin : tf->cudnn;
    if (kc__ver_known(have) && kc__ver_known(want) &&
        (have.major != want.major || (kc__ver_known(tf->cudnn_pin) && have.minor < want.minor))) {
        char fix[256];
        if (tf->cudnn_pin_text[0])
            snprintf(fix, sizeof fix, "install cuDNN %d.%d or a newer %d.x for CUDA %d (pip install nvidia-cudnn-cu%d==%s)",
                     want.major, want.minor, want.major, tf->cuda.major, tf->cuda.major, tf->cudnn_pin_text);
        else
            snprintf(fix, sizeof fix, "install cuDNN %d for CUDA %d", want.major, tf->cuda.major);
        kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"Loaded runtime CuDNN library: %s but source was compiled with: %s. CuDNN library needs to have "
            "matching major version and equal or higher minor version\" (%s)",
            name, kc__doc_v(have, b), kc__doc_v(want, c), dnn_path);
        problems++;
    }
    return problems;
}

/* The GPUs TensorFlow has no code for; the number of problems added. */
static int tf_check_gpus(kc_doctor_report *r, const kc__tf *tf, const char *name, const char *archs) {
    if (!kc__doc_gpu_usable_driver(r)) return 0;
    const kc__driver *d = &r->drv;
    int problems = 0, tmin = kc__tf_min_cc(tf);
    for (int i = 0; i < d->count; i++) {
        const kc__gpu *g = &d->gpu[i];
        int cc = g->cc_major * 10 + g->cc_minor;
        if (kc__tf_runs_on(tf, cc)) continue;
        kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM,
            "use a TensorFlow release built for this GPU's compute capability (older releases cover older GPUs), "
            "or another GPU",
            "%s: \"Ignoring visible gpu device (device: %d, name: %s, compute capability: %d.%d). The minimum "
            "required Cuda capability is %d.%d\" (it has code for %s)",
            name, g->index, g->name, g->cc_major, g->cc_minor, tmin / 10, tmin % 10, archs);
        problems++;
    }
    return problems;
}

static void check_one_tf(kc_doctor_report *r, const kc__tf *tf) {
    char a[32];
    char name[1300];
    snprintf(name, sizeof name, "TensorFlow %s (%s, %s)", tf->version[0] ? tf->version : "(version unknown)",
             tf->package[0] ? tf->package : "package unknown", tf->site);
    if (!tf->parsed) {
        kc__doc_add(r, "tensorflow", KC_CHECK_WARNING, "reinstall TensorFlow (pip install --force-reinstall tensorflow)",
            "%s: its build info cannot be read: %s", name, tf->parse_error);
        return;
    }
    char pin[64] = "";
    if (tf->version[0]) snprintf(pin, sizeof pin, "==%s", tf->version);
    if (!tf->is_cuda_build) {
        char fix[256];
        snprintf(fix, sizeof fix, "pip install 'tensorflow[and-cuda]%s' (Linux) for the GPU build%s", pin,
                 tf->package[0] && strcmp(tf->package, "tensorflow") ? " (and uninstall this package)" : "");
        kc__doc_add(r, "tensorflow", KC_CHECK_WARNING, fix, "%s is a CPU-only build%s: it never uses a GPU", name,
            tf->is_rocm_build ? " for AMD GPUs (ROCm)" : "");
        return;
    }
    char archs[256] = "";
    size_t au = 0;
    for (int i = 0; i < tf->n_archs && au < sizeof archs; i++)
        au += (size_t)snprintf(archs + au, sizeof archs - au, "%s%s", i ? " " : "", tf->archs[i]);
    char cudnn_txt[64];
    if (kc__ver_known(tf->cudnn_pin)) snprintf(cudnn_txt, sizeof cudnn_txt, "%d (and-cuda pins %s)", tf->cudnn.major, tf->cudnn_pin_text);
    else snprintf(cudnn_txt, sizeof cudnn_txt, "%d", tf->cudnn.major);
    int problems = tf_check_driver(r, tf, name);
    problems += tf_check_libs(r, tf, name, pin);
    problems += tf_check_gpus(r, tf, name, archs);
    if (!problems)
        kc__doc_add(r, "tensorflow", KC_CHECK_OK, NULL, "%s: built for CUDA %s, cuDNN %s, GPUs %s; its libraries and the driver fit",
            name, kc__doc_v(tf->cuda, a), cudnn_txt, archs);
}

void kc__doc_check_tensorflow(kc_doctor_report *r, const kc_doctor_opts *o) {
    if (o->tensorflow && o->tensorflow[0]) {
        r->tf_checked = true;
        kc__tf_read(o->tensorflow, &r->tf[0]);
        r->n_tf = 1;
        if (!r->tf[0].build_info[0]) {
            kc__doc_add(r, "tensorflow", KC_CHECK_PROBLEM, "give the site-packages folder that holds tensorflow/, or the package folder",
                "no TensorFlow at %s: %s", o->tensorflow, r->tf[0].parse_error);
            return;
        }
        check_one_tf(r, &r->tf[0]);
        return;
    }
    if (o->tensorflow_search == KC_FALSE) return;
    r->tf_checked = true;
    r->n_tf = kc__tf_find(r->tf, KC_DOCTOR_MAX_TF, r->tf_searched, sizeof r->tf_searched);
    if (r->n_tf == 0) {
        kc__doc_add(r, "tensorflow", KC_CHECK_SKIPPED, NULL, "no TensorFlow found (looked in %s)",
            r->tf_searched[0] ? r->tf_searched : "no python3 installation");
        return;
    }
    for (int i = 0; i < r->n_tf; i++) check_one_tf(r, &r->tf[i]);
}
