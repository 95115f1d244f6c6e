/* doctor.c — kc_doctor_run: every fact about kerac's GPU path (env.h's probes), judged
 * into checks (ok / skipped / warning / problem, each problem with a one-sentence fix) and
 * a verdict: the device `--device auto` uses, why, and the exit code of `kerac doctor`.
 *
 * The driver rule implemented (CUDA's "minor version compatibility", CUDA 11 and newer):
 * a driver runs code built with CUDA X.Y when it supports CUDA X.Z:
 *   Z >= Y  fully;
 *   Z <  Y  (same major X) the module's native code (SASS) runs, but PTX written by the
 *           newer compiler cannot be compiled by this driver, so GPUs that need kerac's
 *           PTX fail and CUDA features newer than X.Z are missing: a warning, and a
 *           problem for each GPU that depends on PTX;
 *   driver's major < X: too old, nothing runs: a problem.
 * cuDNN: the major version kerac was built with (the soname, libcudnn.so.9), built for
 * the same CUDA major as kerac (cudnnGetCudartVersion); a minor older than kerac's build
 * is a warning. cuBLAS: the same major. */
#define _GNU_SOURCE
#include <dirent.h>
#include <sched.h>
#include <dlfcn.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "env.h"

#define KC_DOCTOR_MAX_TF 4

typedef struct dcheck {
    char id[32];
    kc_check_status status;
    char *message;
    char *fix;
} dcheck;

struct kc_doctor_report {
    dcheck *checks;
    int n, cap;
    bool oom;
    kc_doctor_verdict verdict;
    char device[192];
    char reason[1024];
    char fix[768];
    /* facts */
    char kerac_path[KC_ENV_PATH];
    kc__module mod;
    kc__nvml nvml;
    kc__driver drv;
    kc__cvd cvd;
    kc__lib cudnn, cublas, nccl;
    bool libs_checked;
    kc__tf tf[KC_DOCTOR_MAX_TF];
    int n_tf;
    bool tf_checked;
    char tf_searched[2048];
    bool start_tried, started;
    char start_device[96];
    char start_error[1024];
};

/* ---------------------------------------------------------------- helpers */

static char *vdup(const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) return NULL;
    return s;
}

/* Add a check; fix may be NULL. Returns its index (-1 out of memory). */
static int add(kc_doctor_report *r, const char *id, kc_check_status st, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int add(kc_doctor_report *r, const char *id, kc_check_status st, const char *fix, const char *fmt, ...) {
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 32;
        dcheck *p = realloc(r->checks, (size_t)cap * sizeof *p);
        if (!p) {
            r->oom = true;
            return -1;
        }
        r->checks = p;
        r->cap = cap;
    }
    dcheck *c = &r->checks[r->n];
    memset(c, 0, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    c->status = st;
    va_list ap;
    va_start(ap, fmt);
    c->message = vdup(fmt, ap);
    va_end(ap);
    c->fix = strdup(fix ? fix : "");
    if (!c->message || !c->fix) {
        free(c->message);
        free(c->fix);
        r->oom = true;
        return -1;
    }
    return r->n++;
}

static const char *bytes_str(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.1f GiB", (double)b / 1073741824.0);
    else snprintf(buf, n, "%.0f MiB", (double)b / 1048576.0);
    return buf;
}

static const char *V(kc__ver v, char *buf) { return kc__ver_str(v, true, buf, 32); }
static const char *V2(kc__ver v, char *buf) { return kc__ver_str(v, false, buf, 32); }

/* "580 or newer (for CUDA 13.0)" / "for CUDA 13.2 or newer" */
static void driver_need(kc__ver cuda, char *buf, size_t n) {
    char v[32];
    const char *br = kc__driver_branch_for((kc__ver){cuda.major, cuda.minor, 0});
    if (br) snprintf(buf, n, "%s or newer (for CUDA %s)", br, V2(cuda, v));
    else snprintf(buf, n, "one for CUDA %s or newer", V2(cuda, v));
}

static bool gpu_usable_driver(const kc_doctor_report *r) {
    return r->drv.found && !r->drv.is_stub && r->drv.init_result == 0;
}

/* The GPU code list in words: "SASS sm_80 sm_90, PTX compute_90". */
static void code_list(const kc__module *m, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    if (m->n_arch == 0) {
        snprintf(buf, n, "architectures '%s' (not a list kerac can check)", m->archs_text[0] ? m->archs_text : "?");
        return;
    }
    used += (size_t)snprintf(buf + used, n - used, "SASS");
    int ns = 0;
    for (int i = 0; i < m->n_arch && used < n; i++)
        if (m->arch[i].sass) {
            used += (size_t)snprintf(buf + used, n - used, " sm_%d%s", m->arch[i].cc,
                                     m->arch[i].variant == 'a' ? "a" : m->arch[i].variant == 'f' ? "f" : "");
            ns++;
        }
    if (!ns && used < n) used += (size_t)snprintf(buf + used, n - used, " none");
    int np = 0;
    for (int i = 0; i < m->n_arch && used < n; i++)
        if (m->arch[i].ptx) {
            used += (size_t)snprintf(buf + used, n - used, "%s compute_%d", np ? "" : ", PTX", m->arch[i].cc);
            np++;
        }
    if (m->min_cc && used < n)
        snprintf(buf + used, n - used, " (compute capability %d.%d and newer)", m->min_cc / 10, m->min_cc % 10);
}

/* ---------------------------------------------------------------- the checks */

static void check_kerac(kc_doctor_report *r) {
    Dl_info info;
    if (dladdr((void *)&kc_doctor_run, &info) && info.dli_fname) {
        char real[KC_ENV_PATH];
        if (realpath(info.dli_fname, real)) snprintf(r->kerac_path, sizeof r->kerac_path, "%s", real);
        else snprintf(r->kerac_path, sizeof r->kerac_path, "%s", info.dli_fname);
    }
    add(r, "kerac", KC_CHECK_OK, NULL, "kerac %s (%s)", kc_version(), r->kerac_path[0] ? r->kerac_path : "?");
}

static void check_module(kc_doctor_report *r) {
    const kc__module *m = &r->mod;
    char a[32], b[32], c[32], codes[512];
    if (!m->found) {
        bool gpu_here = gpu_usable_driver(r) && r->drv.count > 0;
        add(r, "module", gpu_here ? KC_CHECK_PROBLEM : KC_CHECK_OK,
            gpu_here ? "rebuild kerac on a machine with the CUDA toolkit, cuDNN and cuBLAS (cmake -DKERAC_CUDA=ON) "
                       "and install it, or set KERAC_MODULE_PATH to the folder that holds libkerac_cuda.so"
                     : NULL,
            "kerac's CUDA module libkerac_cuda.so is not installed (looked in %s)%s", m->searched,
            gpu_here ? "" : ": this kerac runs on the CPU only");
        return;
    }
    code_list(m, codes, sizeof codes);
    if (!m->has_info) {
        add(r, "module", KC_CHECK_WARNING,
            "install the libkerac_cuda.so built together with this kerac (the same build folder or install prefix)",
            "%s has no kerac build string: it is not a kerac CUDA module, or one from another version", m->path);
        return;
    }
    if (!m->loaded) {
        const char *lib = m->missing_lib[0] ? m->missing_lib : NULL;
        char fix[256];
        if (lib) snprintf(fix, sizeof fix, "make %s findable (see its check below)", lib);
        else snprintf(fix, sizeof fix, "reinstall kerac (the module and libkerac must come from the same build)");
        add(r, "module", KC_CHECK_PROBLEM, fix, "%s (built with CUDA %s, cuDNN %s, cuBLAS %s; %s) cannot be loaded: %s",
            m->path, V(m->cuda, a), V(m->cudnn, b), V(m->cublas, c), codes, m->load_error);
        return;
    }
    char warn[128] = "";
    if (strcmp(m->kerac_version, kc_version()) != 0)
        snprintf(warn, sizeof warn, " (kerac %s: libkerac is %s)", m->kerac_version, kc_version());
    add(r, "module", warn[0] ? KC_CHECK_WARNING : KC_CHECK_OK,
        warn[0] ? "install the libkerac_cuda.so built together with this kerac" : NULL,
        "%s%s: built with CUDA %s, cuDNN %s, cuBLAS %s, no NCCL; GPU code: %s", m->path, warn, V(m->cuda, a),
        V(m->cudnn, b), V(m->cublas, c), codes);
}

/* Driver check; sets *blocking reason/fix when the driver stops the GPU path. */
static void check_driver(kc_doctor_report *r) {
    const kc__driver *d = &r->drv;
    const kc__module *m = &r->mod;
    char need[96], a[32], b[32];
    kc__ver want = m->found && kc__ver_known(m->cuda) ? m->cuda : (kc__ver){13, 0, 0};
    driver_need(want, need, sizeof need);
    if (!d->found) {
        char fix[320];
        snprintf(fix, sizeof fix,
                 "install the NVIDIA driver, %s, and check it with `nvidia-smi`; or train on the CPU with --device cpu",
                 need);
        add(r, "driver", KC_CHECK_PROBLEM, fix, "no NVIDIA driver: libcuda.so.1 not found (%s)", d->error);
        return;
    }
    kc__ver dv = kc__ver_from_cuda_int(d->cuda_version);
    char ver[96] = "";
    if (r->nvml.driver_version[0]) snprintf(ver, sizeof ver, " %s", r->nvml.driver_version);
    if (d->is_stub) {
        char dir[KC_ENV_PATH];
        snprintf(dir, sizeof dir, "%s", d->path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        char fix[KC_ENV_PATH + 200];
        snprintf(fix, sizeof fix, "remove %s from LD_LIBRARY_PATH (it is for linking only) and install the NVIDIA driver",
                 dir);
        add(r, "driver", KC_CHECK_PROBLEM, fix,
            "libcuda.so.1 at %s is the CUDA toolkit's stub library, not the NVIDIA driver", d->path);
        return;
    }
    if (d->init_result != 0 && d->init_result != 100 /* CUDA_ERROR_NO_DEVICE: see the GPU checks */) {
        add(r, "driver", KC_CHECK_PROBLEM,
            "run `nvidia-smi`; after a driver update reboot (the kernel module and libcuda.so.1 must match), and in a "
            "container start it with the GPUs (docker run --gpus all)",
            "the NVIDIA driver%s (libcuda.so.1 at %s, CUDA %s) cannot start: %s", ver, d->path, V2(dv, a),
            d->init_error);
        return;
    }
    if (!m->found || !kc__ver_known(m->cuda)) {
        add(r, "driver", KC_CHECK_OK, NULL, "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s", ver, d->path,
            V2(dv, a));
        return;
    }
    if (!kc__ver_known(dv)) {
        add(r, "driver", KC_CHECK_WARNING, "update the NVIDIA driver",
            "NVIDIA driver%s (libcuda.so.1 at %s) does not say which CUDA it supports", ver, d->path);
        return;
    }
    kc__ver mv = {m->cuda.major, m->cuda.minor, 0};
    if (dv.major < mv.major) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s, or train on the CPU with --device cpu", need);
        add(r, "driver", KC_CHECK_PROBLEM, fix,
            "the NVIDIA driver%s is too old: it supports CUDA up to %s, and kerac's CUDA module needs CUDA %s", ver,
            V2(dv, a), V2(mv, b));
    } else if (dv.major == mv.major && dv.minor < mv.minor) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s to run kerac's PTX too", need);
        add(r, "driver", KC_CHECK_WARNING, fix,
            "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s, kerac's module was built with CUDA %s: it runs "
            "through CUDA's minor-version compatibility (native code only; this driver cannot compile the module's "
            "PTX)",
            ver, d->path, V2(dv, a), V2(mv, b));
    } else {
        add(r, "driver", KC_CHECK_OK, NULL,
            "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s; kerac's module needs CUDA %s", ver, d->path,
            V2(dv, a), V2(mv, b));
    }
}

static bool driver_older_minor(const kc_doctor_report *r) {
    kc__ver dv = kc__ver_from_cuda_int(r->drv.cuda_version);
    const kc__module *m = &r->mod;
    if (!kc__ver_known(dv) || !m->found || !kc__ver_known(m->cuda)) return false;
    return dv.major == m->cuda.major && dv.minor < m->cuda.minor;
}

static void lib_fix(const char *what, int major, kc__ver cuda, char *fix, size_t n) {
    int cm = kc__ver_known(cuda) ? cuda.major : 13;
    if (!strcmp(what, "cuDNN"))
        snprintf(fix, n,
                 "install cuDNN %d for CUDA %d (e.g. `pip install nvidia-cudnn-cu%d` and add its nvidia/cudnn/lib "
                 "folder to LD_LIBRARY_PATH, or NVIDIA's cudnn%d-cuda-%d package)",
                 major, cm, cm, major, cm);
    else
        snprintf(fix, n,
                 "install cuBLAS %d (part of the CUDA %d toolkit: NVIDIA's libcublas-%d-* package, or the pip wheel "
                 "of cuBLAS for CUDA %d) and make libcublas.so.%d findable (LD_LIBRARY_PATH or ldconfig)",
                 major, cm, cm, cm, major);
}

static void check_lib(kc_doctor_report *r, const kc__lib *l, int major, kc__ver built) {
    const kc__module *m = &r->mod;
    char a[32], b[32], c[32], fix[512];
    const char *id = !strcmp(l->what, "cuDNN") ? "cudnn" : "cublas";
    if (!m->found) {
        if (l->found)
            add(r, id, KC_CHECK_OK, NULL, "%s %s at %s (not used: no CUDA module)", l->what, V(l->version, a), l->path);
        else
            add(r, id, KC_CHECK_SKIPPED, NULL, "%s not found (not needed: no CUDA module)", l->soname);
        return;
    }
    lib_fix(l->what, major, m->cuda, fix, sizeof fix);
    if (!l->found) {
        if (l->other_soname[0])
            add(r, id, KC_CHECK_PROBLEM, fix,
                "%s not found; the loader finds %s %s (%s at %s, for CUDA %s) instead, which kerac's module cannot use "
                "(it needs %s %d)",
                l->soname, l->what, V(l->other_version, a), l->other_soname, l->other_path, V2(l->other_cuda, b),
                l->what, major);
        else
            add(r, id, KC_CHECK_PROBLEM, fix, "%s %d not found: %s", l->what, major, l->error);
        return;
    }
    if (kc__ver_known(l->version) && l->version.major != major) {
        add(r, id, KC_CHECK_PROBLEM, fix, "%s at %s is %s %s, but kerac's module was built with %s %s", l->soname,
            l->path, l->what, V(l->version, a), l->what, V(built, b));
        return;
    }
    if (l->part_error[0]) { /* cuDNN 9 without its convolution library: no Conv2D would run */
        char fix2[KC_ENV_PATH + 256];
        snprintf(fix2, sizeof fix2, "install the complete cuDNN %d (libcudnn_cnn.so.%d and the other libcudnn_*.so.%d "
                 "files beside %s; they need libz.so.1)", major, major, major, l->path);
        add(r, id, KC_CHECK_PROBLEM, fix2, "%s %s at %s cannot load its convolution library (%s)", l->what,
            V(l->version, a), l->path, l->part_error);
        return;
    }
    if (kc__ver_known(l->cuda) && kc__ver_known(m->cuda) && l->cuda.major != m->cuda.major) {
        char fix2[1600];
        if (!strcmp(l->what, "cuDNN"))
            snprintf(fix2, sizeof fix2,
                     "install the cuDNN %d build for CUDA %d (e.g. `pip install nvidia-cudnn-cu%d`, or NVIDIA's "
                     "cudnn%d-cuda-%d package) and put it before %s on the library path",
                     major, m->cuda.major, m->cuda.major, major, m->cuda.major, l->path);
        else
            snprintf(fix2, sizeof fix2, "%s", fix);
        add(r, id, KC_CHECK_PROBLEM, fix2, "%s %s at %s is built for CUDA %s, but kerac's module uses CUDA %s", l->what,
            V(l->version, a), l->path, V2(l->cuda, b), V2(m->cuda, c));
        return;
    }
    if (kc__ver_known(built) && kc__ver_known(l->version) && l->version.minor < built.minor) {
        char fix2[256];
        snprintf(fix2, sizeof fix2, "update %s to %d.%d or newer", l->what, built.major, built.minor);
        add(r, id, KC_CHECK_WARNING, fix2, "%s %s at %s is older than the %s %s kerac's module was built with",
            l->what, V(l->version, a), l->path, l->what, V(built, b));
        return;
    }
    add(r, id, KC_CHECK_OK, NULL, "%s %s (for CUDA %s) at %s; kerac's module was built with %s %s", l->what,
        V(l->version, a), V2(l->cuda, b), l->path, l->what, V(built, c));
}

static void check_nccl(kc_doctor_report *r) {
    char a[32];
    if (r->nccl.found)
        add(r, "nccl", KC_CHECK_OK, NULL, "NCCL %s at %s (not used: this kerac trains on one GPU)",
            V(r->nccl.version, a), r->nccl.path);
    else
        add(r, "nccl", KC_CHECK_SKIPPED, NULL, "libnccl.so.2 not found (only multi-GPU training would use it)");
}

/* "GPU 0 (NVIDIA H200), GPU 1 (...)" from NVML */
static void physical_list(const kc_doctor_report *r, char *buf, size_t n) {
    size_t used = 0;
    buf[0] = '\0';
    if (!r->nvml.ok) return;
    used += (size_t)snprintf(buf, n, "%d GPU%s: ", r->nvml.count, r->nvml.count == 1 ? "" : "s");
    for (int i = 0; i < r->nvml.count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d %s", i ? ", " : "", i, r->nvml.gpu[i].name);
}

static void check_visible(kc_doctor_report *r) {
    const kc__cvd *v = &r->cvd;
    char phys[512];
    physical_list(r, phys, sizeof phys);
    if (!v->set) {
        if (gpu_usable_driver(r))
            add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES is not set: kerac sees every GPU (%d)",
                r->drv.count);
        else
            add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES is not set");
        return;
    }
    if (v->hides_on_purpose) {
        add(r, "visible_devices", KC_CHECK_WARNING, "unset CUDA_VISIBLE_DEVICES (or list a GPU) to train on the GPU",
            "CUDA_VISIBLE_DEVICES='%s' hides every GPU%s%s%s: kerac runs on the CPU", v->text, phys[0] ? " (" : "",
            phys, phys[0] ? ")" : "");
        return;
    }
    if (v->bad >= 0) {
        bool none = v->n_visible == 0;
        char fix[256];
        snprintf(fix, sizeof fix, "set CUDA_VISIBLE_DEVICES to GPUs that exist%s%s, or unset it",
                 r->nvml.ok ? " (" : "", r->nvml.ok ? "see `nvidia-smi -L`)" : "");
        add(r, "visible_devices", none ? KC_CHECK_PROBLEM : KC_CHECK_WARNING, fix,
            "CUDA_VISIBLE_DEVICES='%s': entry '%s' %s, so it and the entries after it are ignored; kerac sees %d GPU%s",
            v->text, v->bad_text, v->bad_why, v->n_visible, v->n_visible == 1 ? "" : "s");
        return;
    }
    char map[512] = "";
    size_t used = 0;
    for (int i = 0; i < v->n_visible && used < sizeof map; i++) {
        if (v->visible[i] >= 0)
            used += (size_t)snprintf(map + used, sizeof map - used, "%sGPU %d is cuda:%d", i ? ", " : "", v->visible[i], i);
        else
            used += (size_t)snprintf(map + used, sizeof map - used, "%sentry %d is cuda:%d", i ? ", " : "", i, i);
    }
    add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES='%s': kerac sees %d GPU%s (%s)", v->text,
        v->n_visible, v->n_visible == 1 ? "" : "s", map);
}

static void check_gpus(kc_doctor_report *r) {
    const kc__driver *d = &r->drv;
    const kc__module *m = &r->mod;
    if (!gpu_usable_driver(r)) {
        if (d->found && d->init_result == 100) {
            if (r->cvd.set && (r->cvd.hides_on_purpose || r->cvd.bad >= 0))
                add(r, "gpus", KC_CHECK_SKIPPED, NULL, "no GPU visible: see CUDA_VISIBLE_DEVICES");
            else
                add(r, "gpus", KC_CHECK_PROBLEM,
                    "run `nvidia-smi`; in a container, start it with the GPUs (docker run --gpus all); check that the "
                    "GPU is seated and powered",
                    "the NVIDIA driver sees no GPU (%s)", d->init_error);
        } else {
            add(r, "gpus", KC_CHECK_SKIPPED, NULL, "not checked: %s",
                !d->found ? "no NVIDIA driver" : d->is_stub ? "no real driver" : "the driver cannot start");
        }
        return;
    }
    if (d->count == 0) {
        add(r, "gpus", KC_CHECK_PROBLEM, "run `nvidia-smi`", "the NVIDIA driver reports no GPU");
        return;
    }
    bool old_minor = driver_older_minor(r);
    for (int i = 0; i < d->count; i++) {
        kc__gpu *g = &r->drv.gpu[i];
        int cc = g->cc_major * 10 + g->cc_minor;
        g->support = kc__module_support(m, cc, !old_minor, &g->code_cc);
        char id[16], mem[128], t[32], f[32];
        snprintf(id, sizeof id, "gpu:%d", g->index);
        if (g->has_free)
            snprintf(mem, sizeof mem, "%s (%s free)", bytes_str(g->total, t, sizeof t), bytes_str(g->free, f, sizeof f));
        else
            snprintf(mem, sizeof mem, "%s", bytes_str(g->total, t, sizeof t));
        char head[384];
        snprintf(head, sizeof head, "cuda:%d %s, compute capability %d.%d, %s", g->index, g->name, g->cc_major,
                 g->cc_minor, mem);
        char fix[320];
        switch (g->support) {
        case KC__SUPPORT_SASS:
            add(r, id, KC_CHECK_OK, NULL, "%s: runs kerac's native code (sm_%d)", head, g->code_cc);
            break;
        case KC__SUPPORT_PTX:
            add(r, id, KC_CHECK_OK, NULL,
                "%s: runs kerac's PTX (compute_%d), compiled by the driver at first use (the first start is slower; "
                "-DCMAKE_CUDA_ARCHITECTURES=%d-real adds native code)",
                head, g->code_cc, cc);
            break;
        case KC__SUPPORT_PTX_OLD_DRIVER: {
            char need[96];
            driver_need(m->cuda, need, sizeof need);
            snprintf(fix, sizeof fix, "update the NVIDIA driver to %s, or rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=%d-real",
                     need, cc);
            add(r, id, KC_CHECK_PROBLEM, fix,
                "%s: kerac has only PTX for it (compute_%d), and this driver is older than the CUDA compiler that made it",
                head, g->code_cc);
            break;
        }
        case KC__SUPPORT_NONE: {
            int tk = kc__toolkit_min_cc(m->cuda);
            char v[32];
            if (tk && cc < tk)
                snprintf(fix, sizeof fix,
                         "CUDA %d cannot compile for compute capability %d.%d (its oldest is %d.%d): train on the CPU "
                         "with --device cpu, or use a newer GPU",
                         m->cuda.major, g->cc_major, g->cc_minor, tk / 10, tk % 10);
            else
                snprintf(fix, sizeof fix, "rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=%d-real (CUDA %s can compile for it)",
                         cc, V2(m->cuda, v));
            add(r, id, KC_CHECK_PROBLEM, fix, "%s: not supported: compute capability %d.%d, kerac needs %d.%d or newer",
                head, g->cc_major, g->cc_minor, m->min_cc / 10, m->min_cc % 10);
            break;
        }
        default:
            add(r, id, m->found ? KC_CHECK_WARNING : KC_CHECK_OK, m->found ? "install a kerac module built with a list of architectures" : NULL,
                "%s: %s", head, m->found ? "cannot tell whether kerac's code runs on it (its architectures are not a list)"
                                         : "no CUDA module to run on it");
        }
    }
}

/* ---- environment */

typedef struct env_doc {
    const char *name, *what;
} env_doc;

static const env_doc kerac_vars[] = {
    {"KERAC_DEVICE", "the device when none is given (cpu, cuda, cuda:N, auto)"},
    {"KERAC_LOG_LEVEL", "the log threshold (debug, info, warning, error or 0-3)"},
    {"KERAC_LOG_DEVICE_PLACEMENT", "1: one line per layer with its device and kernel at the first step"},
    {"KERAC_NUM_THREADS", "CPU threads"},
    {"KERAC_MODULE_PATH", "the folder searched first for libkerac_cuda.so"},
    {"KERAC_MEMORY_LIMIT", "a cap on the model's device memory"},
    {"KERAC_GPU_MEMORY", "GPU memory mode: grow, preallocate[=F], limit=SIZE"},
    {"KERAC_CUDNN_BENCHMARK", "1: time every cuDNN convolution algorithm, keep the fastest"},
    {"KERAC_DETERMINISTIC", "1: deterministic cuDNN algorithms only"},
    {"KERAC_TF32", "1: allow TF32 tensor cores"},
    {"KERAC_CUDNN_WORKSPACE_LIMIT", "the most workspace one convolution algorithm may use"},
    {"KERAC_CUDA_DEBUG_SYNC", "1: synchronise after every GPU kernel (slow; for debugging)"},
};

static const char *env_doc_of(const char *name) {
    for (size_t i = 0; i < sizeof kerac_vars / sizeof kerac_vars[0]; i++)
        if (!strcmp(kerac_vars[i].name, name)) return kerac_vars[i].what;
    return NULL;
}

extern char **environ;

static void check_env(kc_doctor_report *r) {
    int shown = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "KERAC_", 6) != 0) continue;
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        const char *val = eq + 1;
        const char *doc = env_doc_of(name);
        shown++;
        if (!doc) {
            add(r, "env", KC_CHECK_WARNING, "check the spelling: the variables kerac reads are listed in `kerac doctor --help`",
                "%s='%s' is not a variable kerac reads", name, val);
            continue;
        }
        if (!strcmp(name, "KERAC_DEVICE")) {
            bool ok = !strcmp(val, "cpu") || !strcmp(val, "cuda") || !strcmp(val, "gpu") || !strcmp(val, "auto") ||
                      (!strncmp(val, "cuda:", 5) && val[5] && strspn(val + 5, "0123456789") == strlen(val + 5));
            if (!ok) {
                add(r, "env", KC_CHECK_PROBLEM, "set KERAC_DEVICE to cpu, cuda, cuda:N or auto",
                    "KERAC_DEVICE='%s' is not cpu, cuda, cuda:N or auto: building a model fails", val);
                continue;
            }
            int idx = !strncmp(val, "cuda:", 5) ? atoi(val + 5) : 0;
            bool wants_gpu = !strncmp(val, "cuda", 4) || !strcmp(val, "gpu");
            if (wants_gpu && (!gpu_usable_driver(r) || r->drv.count == 0)) {
                add(r, "env", KC_CHECK_WARNING, "set KERAC_DEVICE=auto (the GPU when it works, else the CPU) or cpu",
                    "KERAC_DEVICE='%s': models fail to build here (no usable GPU: see the driver and GPU checks)", val);
                continue;
            }
            if (wants_gpu && idx >= r->drv.count) {
                add(r, "env", KC_CHECK_PROBLEM, "set KERAC_DEVICE to a GPU that exists (cuda:0 ...) or to auto",
                    "KERAC_DEVICE='%s': kerac sees %d GPU%s, so models fail to build", val, r->drv.count,
                    r->drv.count == 1 ? "" : "s");
                continue;
            }
            add(r, "env", KC_CHECK_OK, NULL, "KERAC_DEVICE='%s': %s%s", val, doc,
                !strcmp(val, "cpu") ? "; models run on the CPU unless --device says otherwise" : "");
            continue;
        }
        if (!strcmp(name, "KERAC_LOG_LEVEL")) {
            kc_log_level l;
            char saved[KC_ERROR_MAX];
            snprintf(saved, sizeof saved, "%s", kc_last_error());
            bool ok = kc_log_level_parse(val, &l) == KC_STATUS_OK;
            kc__fail(KC_STATUS_OK, "%s", saved);
            if (!ok) {
                add(r, "env", KC_CHECK_WARNING, "set KERAC_LOG_LEVEL to debug, info, warning or error (or 0-3)",
                    "KERAC_LOG_LEVEL='%s' is not a log level: kerac uses warning", val);
                continue;
            }
        }
        if (!strcmp(name, "KERAC_CUDA_DEBUG_SYNC") && strcmp(val, "0") != 0 && val[0]) {
            add(r, "env", KC_CHECK_WARNING, "unset KERAC_CUDA_DEBUG_SYNC unless you are tracking a GPU fault",
                "%s='%s': %s", name, val, doc);
            continue;
        }
        add(r, "env", KC_CHECK_OK, NULL, "%s='%s': %s", name, val, doc);
    }
    const char *clb = getenv("CUDA_LAUNCH_BLOCKING");
    if (clb && strcmp(clb, "0") != 0 && clb[0]) {
        shown++;
        add(r, "env", KC_CHECK_WARNING, "unset CUDA_LAUNCH_BLOCKING unless you are debugging",
            "CUDA_LAUNCH_BLOCKING='%s': every GPU kernel runs synchronously (slow)", clb);
    }
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (order) {
        shown++;
        add(r, "env", KC_CHECK_OK, NULL, "CUDA_DEVICE_ORDER='%s': %s", order,
            !strcmp(order, "PCI_BUS_ID") ? "cuda:N follows nvidia-smi's numbering"
                                         : "cuda:0 is the fastest GPU (nvidia-smi numbers by PCI bus)");
    }
    if (!shown) add(r, "env", KC_CHECK_OK, NULL, "no KERAC_* or CUDA_* variable changes kerac's behaviour");
}

/* ---- the CPU: when other processes keep the cores busy, OpenMP threads that wait
 * actively (libgomp's default) make CPU training many times slower (bench/RESULTS.md:
 * on 2 cores with 2 busy processes, 330 img/s actively, about 2,800 passively). */
bool kc__cpu_busy(double load, long cores, const char *wait_policy) {
    bool passive = wait_policy && !strcasecmp(wait_policy, "passive");
    return load >= 0 && cores > 0 && load >= (double)cores && !passive;
}

static void check_cpu(kc_doctor_report *r) {
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = -1;
        fclose(f);
    }
    const char *wp = getenv("OMP_WAIT_POLICY");
    int threads = kc_get_num_threads();
    if (kc__cpu_busy(load, cores, wp)) {
        add(r, "cpu", KC_CHECK_WARNING,
            "for CPU training while other work shares the cores, set OMP_WAIT_POLICY=passive (or use fewer --threads)",
            "load average %.1f (last minute) on %ld CPU core%s: other processes keep them busy, and kerac's %d OpenMP thread%s wait "
            "actively (%s), which makes CPU training many times slower in that case",
            load, cores, cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s",
            wp ? "OMP_WAIT_POLICY is not passive" : "libgomp's default");
        return;
    }
    if (load >= 0)
        add(r, "cpu", KC_CHECK_OK, NULL, "%ld CPU core%s, kerac uses %d thread%s, load %.1f%s%s", cores,
            cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", load, wp ? "; OMP_WAIT_POLICY=" : "", wp ? wp : "");
    else
        add(r, "cpu", KC_CHECK_OK, NULL, "%ld CPU core%s, kerac uses %d thread%s", cores, cores == 1 ? "" : "s",
            threads, threads == 1 ? "" : "s");
}

/* A CUDA toolkit's stubs folder (<toolkit>/lib64/stubs: the link-time libcuda.so). */
static bool toolkit_stubs_dir(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n < 6 || strncmp(dir + n - 6, "/stubs", 6) != 0) return false;
    char p[KC_ENV_PATH + 64];
    kc__pathf(p, sizeof p, "%.*s/../libcudart.so", (int)n, dir);
    if (kc__file_exists(p)) return true;
    kc__pathf(p, sizeof p, "%.*s/../libcudart_static.a", (int)n, dir);
    return kc__file_exists(p);
}

static void check_ld_library_path(kc_doctor_report *r) {
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (!llp || !*llp) {
        add(r, "ld_library_path", KC_CHECK_OK, NULL,
            "LD_LIBRARY_PATH is not set: the loader finds libraries through RUNPATHs and /etc/ld.so.cache");
        return;
    }
    char sonames[10][64];
    int ns = 0;
    snprintf(sonames[ns++], 64, "libcuda.so.1");
    snprintf(sonames[ns++], 64, "libnvidia-ml.so.1");
    snprintf(sonames[ns++], 64, "%s", r->cudnn.soname[0] ? r->cudnn.soname : "libcudnn.so.9");
    snprintf(sonames[ns++], 64, "libcudnn.so.8");
    snprintf(sonames[ns++], 64, "%s", r->cublas.soname[0] ? r->cublas.soname : "libcublas.so.13");
    snprintf(sonames[ns++], 64, "libnccl.so.2");
    snprintf(sonames[ns++], 64, "libkerac_cuda.so");
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", llp);
    bool first_has[10] = {false};
    int entries = 0, relevant = 0;
    char *save = NULL;
    for (char *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        entries++;
        if (!kc__dir_exists(dir)) continue;
        char held[512] = "", shadows[1024] = "";
        size_t hu = 0, su = 0;
        bool stub = false;
        for (int i = 0; i < ns; i++) {
            char p[KC_ENV_PATH + 80];
            snprintf(p, sizeof p, "%s/%s", dir, sonames[i]);
            if (!kc__file_exists(p)) continue;
            hu += (size_t)snprintf(held + hu, sizeof held - hu, "%s%s", hu ? ", " : "", sonames[i]);
            if (i == 0 && toolkit_stubs_dir(dir)) stub = true;
            char real[KC_ENV_PATH];
            if (!realpath(p, real)) snprintf(real, sizeof real, "%.1000s", p);
            if (first_has[i]) {
                su += (size_t)snprintf(shadows + su, sizeof shadows - su, "%s%s is shadowed by an earlier entry",
                                       su ? "; " : "", sonames[i]);
                continue;
            }
            first_has[i] = true;
            char cached[2][KC_ENV_PATH];
            int nc = kc__ldcache_find(sonames[i], cached, 2);
            for (int k = 0; k < nc; k++) {
                char creal[KC_ENV_PATH];
                if (!realpath(cached[k], creal)) snprintf(creal, sizeof creal, "%.1000s", cached[k]);
                if (strcmp(creal, real) != 0 && su < sizeof shadows)
                    su += (size_t)snprintf(shadows + su, sizeof shadows - su, "%sits %s shadows %s", su ? "; " : "",
                                           sonames[i], cached[k]);
            }
        }
        if (!held[0]) {
            char p[KC_ENV_PATH + 32];
            snprintf(p, sizeof p, "%s/libcuda.so", dir);
            if (!toolkit_stubs_dir(dir) || !kc__file_exists(p)) continue;
            relevant++;
            char fix[KC_ENV_PATH + 80];
            snprintf(fix, sizeof fix, "remove %s from LD_LIBRARY_PATH: it is for linking, not for running", dir);
            add(r, "ld_library_path", KC_CHECK_WARNING, fix,
                "LD_LIBRARY_PATH entry %s holds the CUDA toolkit's stub libcuda.so: a program that loads libcuda.so "
                "gets it instead of the NVIDIA driver",
                dir);
            continue;
        }
        relevant++;
        if (stub) {
            char fix[KC_ENV_PATH + 80];
            snprintf(fix, sizeof fix, "remove %s from LD_LIBRARY_PATH: it is for linking, not for running", dir);
            add(r, "ld_library_path", KC_CHECK_PROBLEM, fix,
                "LD_LIBRARY_PATH entry %s holds the CUDA toolkit's stub libcuda.so.1, which hides the NVIDIA driver",
                dir);
            continue;
        }
        /* a library of a failing check that comes from this entry */
        bool bad = false;
        const kc__lib *libs[2] = {&r->cudnn, &r->cublas};
        for (int k = 0; k < 2; k++) {
            const kc__lib *l = libs[k];
            size_t dl = strlen(dir);
            bool from_here = l->found && !strncmp(l->path, dir, dl) && l->path[dl] == '/';
            bool wrong = l->found && r->mod.found && kc__ver_known(r->mod.cuda) && kc__ver_known(l->cuda) &&
                         l->cuda.major != r->mod.cuda.major;
            if (from_here && wrong) bad = true;
        }
        if (bad) {
            char fix[KC_ENV_PATH + 100];
            snprintf(fix, sizeof fix, "remove %s from LD_LIBRARY_PATH or put the right libraries before it", dir);
            add(r, "ld_library_path", KC_CHECK_WARNING, fix,
                "LD_LIBRARY_PATH entry %s holds %s%s%s, the copy that fails its check above", dir, held,
                shadows[0] ? "; " : "", shadows);
        } else {
            add(r, "ld_library_path", KC_CHECK_OK, NULL, "LD_LIBRARY_PATH entry %s holds %s%s%s", dir, held,
                shadows[0] ? "; " : "", shadows);
        }
    }
    if (!relevant)
        add(r, "ld_library_path", KC_CHECK_OK, NULL, "LD_LIBRARY_PATH (%d entr%s) holds no NVIDIA or kerac library",
            entries, entries == 1 ? "y" : "ies");
}

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

static void check_one_tf(kc_doctor_report *r, const kc__tf *tf) {
    char a[32], b[32], c[32];
    char name[1300];
    snprintf(name, sizeof name, "TensorFlow %s (%s, %s)", tf->version[0] ? tf->version : "(version unknown)",
             tf->package[0] ? tf->package : "package unknown", tf->site);
    if (!tf->parsed) {
        add(r, "tensorflow", KC_CHECK_WARNING, "reinstall TensorFlow (pip install --force-reinstall tensorflow)",
            "%s: its build info cannot be read: %s", name, tf->parse_error);
        return;
    }
    char pin[64] = "";
    if (tf->version[0]) snprintf(pin, sizeof pin, "==%s", tf->version);
    if (!tf->is_cuda_build) {
        char fix[256];
        snprintf(fix, sizeof fix, "pip install 'tensorflow[and-cuda]%s' (Linux) for the GPU build%s", pin,
                 tf->package[0] && strcmp(tf->package, "tensorflow") ? " (and uninstall this package)" : "");
        add(r, "tensorflow", KC_CHECK_WARNING, fix, "%s is a CPU-only build%s: it never uses a GPU", name,
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
    int problems = 0;
    /* the driver */
    const kc__driver *d = &r->drv;
    kc__ver dv = kc__ver_from_cuda_int(d->cuda_version);
    char need[96];
    driver_need((kc__ver){tf->cuda.major, tf->cuda.minor, 0}, need, sizeof need);
    if (!d->found || d->is_stub) {
        char fix[256];
        snprintf(fix, sizeof fix, "install the NVIDIA driver, %s", need);
        add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"Could not load dynamic library 'libcuda.so.1'\": no NVIDIA driver, so TensorFlow runs on the CPU",
            name);
        problems++;
    } else if (kc__ver_known(dv) && kc__ver_known(tf->cuda) && dv.major < tf->cuda.major) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s", need);
        add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"CUDA driver version is insufficient for CUDA runtime version\": the driver supports CUDA %s, "
            "TensorFlow was built with CUDA %s",
            name, V2(dv, a), V(tf->cuda, b));
        problems++;
    } else if (kc__ver_known(dv) && kc__ver_known(tf->cuda) && dv.major == tf->cuda.major && dv.minor < tf->cuda.minor) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s", need);
        add(r, "tensorflow", KC_CHECK_WARNING, fix,
            "%s: the driver supports CUDA %s, TensorFlow was built with CUDA %s: minor-version compatibility runs its "
            "native code, but its PTX (for GPUs newer than its list) cannot be compiled",
            name, V2(dv, a), V(tf->cuda, b));
    }
    /* the libraries it dlopens */
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
        add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
            "%s: \"Cannot dlopen some GPU libraries ... Skipping registering GPU devices\": %s not found (in %s/nvidia/*/lib "
            "or on the loader's path)",
            name, missing, tf->site);
        problems++;
    }
    if (dnn_path[0]) {
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
            add(r, "tensorflow", KC_CHECK_PROBLEM, fix,
                "%s: \"Loaded runtime CuDNN library: %s but source was compiled with: %s. CuDNN library needs to have "
                "matching major version and equal or higher minor version\" (%s)",
                name, V(have, b), V(want, c), dnn_path);
            problems++;
        }
    }
    /* the GPUs */
    if (gpu_usable_driver(r)) {
        int tmin = kc__tf_min_cc(tf);
        for (int i = 0; i < d->count; i++) {
            const kc__gpu *g = &d->gpu[i];
            int cc = g->cc_major * 10 + g->cc_minor;
            if (kc__tf_runs_on(tf, cc)) continue;
            add(r, "tensorflow", KC_CHECK_PROBLEM,
                "use a TensorFlow release built for this GPU's compute capability (older releases cover older GPUs), "
                "or another GPU",
                "%s: \"Ignoring visible gpu device (device: %d, name: %s, compute capability: %d.%d). The minimum "
                "required Cuda capability is %d.%d\" (it has code for %s)",
                name, g->index, g->name, g->cc_major, g->cc_minor, tmin / 10, tmin % 10, archs);
            problems++;
        }
    }
    if (!problems)
        add(r, "tensorflow", KC_CHECK_OK, NULL, "%s: built for CUDA %s, cuDNN %s, GPUs %s; its libraries and the driver fit",
            name, V(tf->cuda, a), cudnn_txt, archs);
}

static void check_tensorflow(kc_doctor_report *r, const kc_doctor_opts *o) {
    if (o->tensorflow && o->tensorflow[0]) {
        r->tf_checked = true;
        kc__tf_read(o->tensorflow, &r->tf[0]);
        r->n_tf = 1;
        if (!r->tf[0].build_info[0]) {
            add(r, "tensorflow", KC_CHECK_PROBLEM, "give the site-packages folder that holds tensorflow/, or the package folder",
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
        add(r, "tensorflow", KC_CHECK_SKIPPED, NULL, "no TensorFlow found (looked in %s)",
            r->tf_searched[0] ? r->tf_searched : "no python3 installation");
        return;
    }
    for (int i = 0; i < r->n_tf; i++) check_one_tf(r, &r->tf[i]);
}

/* ---------------------------------------------------------------- verdict */

/* The message of the first check with this id and status (NULL when none). */
static const dcheck *find_check(const kc_doctor_report *r, const char *id, kc_check_status st) {
    for (int i = 0; i < r->n; i++)
        if (!strcmp(r->checks[i].id, id) && r->checks[i].status == st) return &r->checks[i];
    return NULL;
}

static void set_verdict(kc_doctor_report *r, kc_doctor_verdict v, const dcheck *c, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void set_verdict(kc_doctor_report *r, kc_doctor_verdict v, const dcheck *c, const char *fmt, ...) {
    r->verdict = v;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->reason, sizeof r->reason, fmt, ap);
        va_end(ap);
    } else {
        snprintf(r->reason, sizeof r->reason, "%s", c ? c->message : "");
    }
    snprintf(r->fix, sizeof r->fix, "%s", c ? c->fix : "");
    if (v != KC_DOCTOR_GPU) snprintf(r->device, sizeof r->device, "cpu");
}

/* Decide where `--device auto` runs: the first blocking finding, in the order the module
 * and the backend meet them. Returns true when the GPU path passed every check. */
static bool decide(kc_doctor_report *r) {
    const kc__module *m = &r->mod;
    const kc__driver *d = &r->drv;
    const dcheck *c;
    if (!m->found) {
        bool gpu_here = gpu_usable_driver(r) && d->count > 0;
        set_verdict(r, gpu_here ? KC_DOCTOR_BROKEN : KC_DOCTOR_CPU, find_check(r, "module", gpu_here ? KC_CHECK_PROBLEM : KC_CHECK_OK),
                    "kerac's CUDA module libkerac_cuda.so is not installed (looked in %s)", m->searched);
        if (!gpu_here)
            snprintf(r->fix, sizeof r->fix,
                     "build kerac with the CUDA toolkit, cuDNN and cuBLAS (cmake -DKERAC_CUDA=ON) on a machine with an "
                     "NVIDIA GPU");
        return false;
    }
    if (!d->found) {
        set_verdict(r, KC_DOCTOR_CPU, find_check(r, "driver", KC_CHECK_PROBLEM), "no NVIDIA driver: libcuda.so.1 not found");
        return false;
    }
    if ((c = find_check(r, "driver", KC_CHECK_PROBLEM)) != NULL) {
        set_verdict(r, KC_DOCTOR_BROKEN, c, NULL);
        return false;
    }
    if (d->init_result == 100 || d->count == 0) {
        if (r->cvd.set && r->cvd.hides_on_purpose) {
            set_verdict(r, KC_DOCTOR_CPU, find_check(r, "visible_devices", KC_CHECK_WARNING),
                        "CUDA_VISIBLE_DEVICES='%s' hides every GPU", r->cvd.text);
        } else if (r->cvd.set && r->cvd.bad >= 0 && r->cvd.n_visible == 0) {
            set_verdict(r, KC_DOCTOR_BROKEN, find_check(r, "visible_devices", KC_CHECK_PROBLEM),
                        "CUDA_VISIBLE_DEVICES='%s' %s", r->cvd.text, r->cvd.bad_why);
        } else {
            set_verdict(r, KC_DOCTOR_BROKEN, find_check(r, "gpus", KC_CHECK_PROBLEM), "the NVIDIA driver sees no GPU");
        }
        return false;
    }
    if (!m->loaded) {
        const char *lib = m->missing_lib;
        if (!strncmp(lib, "libcudnn", 8) && (c = find_check(r, "cudnn", KC_CHECK_PROBLEM)) != NULL)
            set_verdict(r, KC_DOCTOR_BROKEN, c, NULL);
        else if (!strncmp(lib, "libcublas", 9) && (c = find_check(r, "cublas", KC_CHECK_PROBLEM)) != NULL)
            set_verdict(r, KC_DOCTOR_BROKEN, c, NULL);
        else
            set_verdict(r, KC_DOCTOR_BROKEN, find_check(r, "module", KC_CHECK_PROBLEM),
                        "libkerac_cuda.so cannot be loaded: %s", m->load_error);
        return false;
    }
    if ((c = find_check(r, "cudnn", KC_CHECK_PROBLEM)) != NULL || (c = find_check(r, "cublas", KC_CHECK_PROBLEM)) != NULL) {
        set_verdict(r, KC_DOCTOR_BROKEN, c, NULL);
        return false;
    }
    /* --device auto opens cuda:0 */
    const kc__gpu *g = &d->gpu[0];
    char id[16];
    snprintf(id, sizeof id, "gpu:%d", g->index);
    if (g->support == KC__SUPPORT_NONE || g->support == KC__SUPPORT_PTX_OLD_DRIVER) {
        int cc = g->cc_major * 10 + g->cc_minor;
        int tk = kc__toolkit_min_cc(m->cuda);
        bool hopeless = g->support == KC__SUPPORT_NONE && tk && cc < tk;
        c = find_check(r, id, KC_CHECK_PROBLEM);
        if (g->support == KC__SUPPORT_NONE)
            set_verdict(r, hopeless ? KC_DOCTOR_CPU : KC_DOCTOR_BROKEN, c,
                        "cuda:0 (%s) is not supported: compute capability %d.%d, kerac needs %d.%d or newer", g->name,
                        g->cc_major, g->cc_minor, m->min_cc / 10, m->min_cc % 10);
        else
            set_verdict(r, KC_DOCTOR_BROKEN, c,
                        "cuda:0 (%s) needs kerac's PTX, and the NVIDIA driver is older than the CUDA that made it", g->name);
        /* another GPU that would work */
        for (int i = 1; i < d->count; i++)
            if (d->gpu[i].support == KC__SUPPORT_SASS || d->gpu[i].support == KC__SUPPORT_PTX) {
                size_t used = strlen(r->fix);
                snprintf(r->fix + used, sizeof r->fix - used, "%suse --device cuda:%d (%s), which kerac supports",
                         used ? "; or " : "", i, d->gpu[i].name);
                break;
            }
        return false;
    }
    return true;
}

static void check_backend(kc_doctor_report *r) {
    r->start_tried = true;
    char saved[KC_ERROR_MAX];
    snprintf(saved, sizeof saved, "%s", kc_last_error());
    kc_backend *be = NULL;
    kc_status s = kc_backend_open("cuda", &be);
    if (s == KC_STATUS_OK && be) {
        r->started = true;
        snprintf(r->start_device, sizeof r->start_device, "%s", be->device);
        kc_backend_destroy(be);
        add(r, "backend", KC_CHECK_OK, NULL, "the CUDA backend starts on %s, as --device auto does", r->start_device);
    } else {
        snprintf(r->start_error, sizeof r->start_error, "%s", kc_last_error());
        add(r, "backend", KC_CHECK_PROBLEM,
            "run `nvidia-smi` to see whether another process holds the GPU; if the message names a library or a "
            "version, fix that; otherwise report this output",
            "the CUDA backend does not start: %s", r->start_error);
    }
    kc__fail(KC_STATUS_OK, "%s", saved);
}

/* ---------------------------------------------------------------- run */

/* Every probe and check. quick: only what the verdict needs (no NCCL, environment,
 * TensorFlow, or backend start). */
static void diagnose(kc_doctor_report *r, const kc_doctor_opts *o, bool quick) {
    kc__module_probe(true, &r->mod);
    kc__nvml_probe(&r->nvml);
    kc__driver_probe(&r->drv, &r->nvml);
    const char(*uuids)[96] = NULL;
    char uu[KC_ENV_MAX_GPUS][96];
    if (r->nvml.ok) {
        for (int i = 0; i < r->nvml.count; i++) snprintf(uu[i], 96, "%s", r->nvml.gpu[i].uuid);
        uuids = (const char(*)[96])uu;
    }
    kc__cvd_parse(getenv("CUDA_VISIBLE_DEVICES"), r->nvml.ok ? r->nvml.count : -1, uuids, &r->cvd);
    if (r->mod.found) {
        kc__lib_cudnn(r->mod.cudnn_major ? r->mod.cudnn_major : 9, &r->cudnn);
        kc__lib_cublas(r->mod.cublas_major ? r->mod.cublas_major : 13, &r->cublas);
    } else if (!quick) {
        kc__lib_cudnn(9, &r->cudnn);
        kc__lib_cublas(13, &r->cublas);
    }
    r->libs_checked = true;
    if (!quick) kc__lib_nccl(&r->nccl);

    check_kerac(r);
    check_module(r);
    check_driver(r);
    if (r->mod.found || !quick) {
        check_lib(r, &r->cudnn, r->mod.cudnn_major ? r->mod.cudnn_major : 9, r->mod.cudnn);
        check_lib(r, &r->cublas, r->mod.cublas_major ? r->mod.cublas_major : 13, r->mod.cublas);
    }
    if (!quick) check_nccl(r);
    check_visible(r);
    check_gpus(r);
    if (!quick) {
        check_cpu(r);
        check_env(r);
        check_ld_library_path(r);
        check_tensorflow(r, o);
    }
    snprintf(r->device, sizeof r->device, "cpu");
    if (decide(r)) {
        const kc__gpu *g = &r->drv.gpu[0];
        snprintf(r->device, sizeof r->device, "cuda:0 (%s)", g->name);
        r->verdict = KC_DOCTOR_GPU;
        snprintf(r->reason, sizeof r->reason, "cuda:0 (%s, compute capability %d.%d) passed every check", g->name,
                 g->cc_major, g->cc_minor);
        r->fix[0] = '\0';
        if (!quick && o->start_backend != KC_FALSE) {
            check_backend(r);
            if (!r->started) {
                set_verdict(r, KC_DOCTOR_BROKEN, find_check(r, "backend", KC_CHECK_PROBLEM),
                            "the CUDA backend does not start on cuda:0: %s", r->start_error);
            } else {
                snprintf(r->device, sizeof r->device, "%s", r->start_device);
                snprintf(r->reason, sizeof r->reason, "cuda:0 (%s, compute capability %d.%d) passed every check and the "
                         "CUDA backend starts on it", g->name, g->cc_major, g->cc_minor);
            }
        }
    }
}

kc_status kc_doctor_run(const kc_doctor_opts *opts, kc_doctor_report **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_doctor_run: out is NULL");
    *out = NULL;
    kc_doctor_opts o = opts ? *opts : (kc_doctor_opts){0};
    kc_doctor_report *r = kc__calloc(1, sizeof *r, "the doctor's report");
    if (!r) return KC_STATUS_OUT_OF_MEMORY;
    diagnose(r, &o, false);
    if (r->oom) {
        kc_doctor_report_destroy(r);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of memory writing the doctor's report");
    }
    *out = r;
    return KC_STATUS_OK;
}

const char *kc__env_fallback_reason(const char *module_error, char *buf, size_t n) {
    kc_doctor_report *r = calloc(1, sizeof *r);
    const char *me = module_error && module_error[0] ? module_error : "the CUDA backend cannot start";
    if (!r) {
        snprintf(buf, n, "%s", me);
        return buf;
    }
    char saved[KC_ERROR_MAX];
    snprintf(saved, sizeof saved, "%s", kc_last_error());
    kc_doctor_opts o = {.tensorflow_search = KC_FALSE, .start_backend = KC_FALSE};
    diagnose(r, &o, true);
    if (r->verdict != KC_DOCTOR_GPU && r->reason[0]) snprintf(buf, n, "%s", r->reason);
    else snprintf(buf, n, "%s", me);
    kc_doctor_report_destroy(r);
    kc__fail(KC_STATUS_OK, "%s", saved);
    return buf;
}

/* ---------------------------------------------------------------- accessors */

void kc_doctor_report_destroy(kc_doctor_report *r) {
    if (!r) return;
    for (int i = 0; i < r->n; i++) {
        free(r->checks[i].message);
        free(r->checks[i].fix);
    }
    free(r->checks);
    free(r);
}

int kc_doctor_num_checks(const kc_doctor_report *r) { return r ? r->n : 0; }

kc_status kc_doctor_get_check(const kc_doctor_report *r, int i, kc_doctor_check *out) {
    if (!r || !out || i < 0 || i >= r->n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_doctor_get_check: check %d out of range (the report has %d)", i,
                        r ? r->n : 0);
    *out = (kc_doctor_check){.id = r->checks[i].id, .status = r->checks[i].status, .message = r->checks[i].message,
                             .fix = r->checks[i].fix};
    return KC_STATUS_OK;
}

kc_doctor_verdict kc_doctor_get_verdict(const kc_doctor_report *r) { return r ? r->verdict : KC_DOCTOR_BROKEN; }
const char *kc_doctor_device(const kc_doctor_report *r) { return r ? r->device : ""; }
const char *kc_doctor_reason(const kc_doctor_report *r) { return r ? r->reason : ""; }
const char *kc_doctor_fix(const kc_doctor_report *r) { return r ? r->fix : ""; }

static const char *status_word(kc_check_status s) {
    switch (s) {
    case KC_CHECK_OK: return "ok";
    case KC_CHECK_SKIPPED: return "skipped";
    case KC_CHECK_WARNING: return "warning";
    default: return "problem";
    }
}

static const char *verdict_word(kc_doctor_verdict v) {
    return v == KC_DOCTOR_GPU ? "gpu" : v == KC_DOCTOR_CPU ? "cpu" : "broken";
}

static const char *verdict_meaning(kc_doctor_verdict v) {
    return v == KC_DOCTOR_GPU ? "the GPU path is healthy"
           : v == KC_DOCTOR_CPU ? "only the CPU is usable here"
                                : "the GPU path is installed but broken";
}

/* ---------------------------------------------------------------- text */

typedef struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
    if (b->oom) return;
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (need < 0) return;
    if (b->len + (size_t)need + 1 > b->cap) {
        size_t cap = (b->cap ? b->cap * 2 : 4096) + (size_t)need;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)need;
}

kc_status kc_doctor_text(const kc_doctor_report *r, char **out) {
    if (!r || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_doctor_text: report and out must not be NULL");
    *out = NULL;
    sbuf b = {0};
    sb_printf(&b, "kerac doctor: kerac %s\n\n", kc_version());
    for (int i = 0; i < r->n; i++) {
        const dcheck *c = &r->checks[i];
        sb_printf(&b, "%-8s %-16s %s\n", status_word(c->status), c->id, c->message);
        if (c->fix[0] && c->status >= KC_CHECK_WARNING) sb_printf(&b, "%-8s %-16s fix: %s\n", "", "", c->fix);
    }
    sb_printf(&b, "\nverdict: %s (exit %d: %s)\n", verdict_word(r->verdict), (int)r->verdict, verdict_meaning(r->verdict));
    if (r->verdict == KC_DOCTOR_GPU)
        sb_printf(&b, "  `--device auto` trains on %s: %s\n", r->device, r->reason);
    else
        sb_printf(&b, "  `--device auto` trains on the CPU: %s\n", r->reason);
    if (r->fix[0]) sb_printf(&b, "  fix: %s\n", r->fix);
    if (b.oom) {
        free(b.p);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of memory writing the doctor's report");
    }
    *out = b.p;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- JSON */

static json_t *jver(kc__ver v) {
    char buf[32];
    return kc__ver_known(v) ? json_string(kc__ver_str(v, true, buf, sizeof buf)) : json_null();
}

static json_t *jstr_or_null(const char *s) { return s && s[0] ? json_string(s) : json_null(); }

static json_t *jlib(const kc__lib *l) {
    json_t *o = json_object();
    json_object_set_new(o, "soname", json_string(l->soname));
    json_object_set_new(o, "found", json_boolean(l->found));
    json_object_set_new(o, "path", jstr_or_null(l->found ? l->path : NULL));
    json_object_set_new(o, "version", jver(l->version));
    json_object_set_new(o, "cuda", jver(l->cuda));
    if (!l->found) json_object_set_new(o, "error", jstr_or_null(l->error));
    if (l->other_soname[0]) {
        json_t *x = json_object();
        json_object_set_new(x, "soname", json_string(l->other_soname));
        json_object_set_new(x, "path", json_string(l->other_path));
        json_object_set_new(x, "version", jver(l->other_version));
        json_object_set_new(x, "cuda", jver(l->other_cuda));
        json_object_set_new(o, "instead", x);
    }
    return o;
}

static const char *support_word(kc__support s) {
    switch (s) {
    case KC__SUPPORT_SASS: return "native";
    case KC__SUPPORT_PTX: return "ptx";
    case KC__SUPPORT_PTX_OLD_DRIVER: return "ptx-driver-too-old";
    case KC__SUPPORT_NONE: return "unsupported";
    default: return "unknown";
    }
}

kc_status kc_doctor_json(const kc_doctor_report *r, char **out) {
    if (!r || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_doctor_json: report and out must not be NULL");
    *out = NULL;
    json_t *root = json_object();
    json_object_set_new(root, "kerac_version", json_string(kc_version()));
    json_t *v = json_object();
    json_object_set_new(v, "verdict", json_string(verdict_word(r->verdict)));
    json_object_set_new(v, "exit_code", json_integer((int)r->verdict));
    json_object_set_new(v, "meaning", json_string(verdict_meaning(r->verdict)));
    json_object_set_new(v, "device", json_string(r->device));
    json_object_set_new(v, "reason", json_string(r->reason));
    json_object_set_new(v, "fix", json_string(r->fix));
    json_object_set_new(root, "verdict", v);
    json_t *checks = json_array();
    for (int i = 0; i < r->n; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "id", json_string(r->checks[i].id));
        json_object_set_new(c, "status", json_string(status_word(r->checks[i].status)));
        json_object_set_new(c, "message", json_string(r->checks[i].message));
        json_object_set_new(c, "fix", json_string(r->checks[i].fix));
        json_array_append_new(checks, c);
    }
    json_object_set_new(root, "checks", checks);
    /* the facts behind them */
    const kc__module *m = &r->mod;
    json_t *mod = json_object();
    json_object_set_new(mod, "found", json_boolean(m->found));
    json_object_set_new(mod, "path", jstr_or_null(m->path));
    json_object_set_new(mod, "searched", json_string(m->searched));
    json_object_set_new(mod, "loaded", json_boolean(m->loaded));
    if (m->found && !m->loaded) json_object_set_new(mod, "load_error", json_string(m->load_error));
    json_object_set_new(mod, "build", jstr_or_null(m->info));
    json_object_set_new(mod, "cuda", jver(m->cuda));
    json_object_set_new(mod, "cudnn", jver(m->cudnn));
    json_object_set_new(mod, "cublas", jver(m->cublas));
    json_object_set_new(mod, "nccl", json_null());
    json_t *sass = json_array(), *ptx = json_array();
    for (int i = 0; i < m->n_arch; i++) {
        char a[24];
        snprintf(a, sizeof a, "%s_%d%s", "sm", m->arch[i].cc, m->arch[i].variant == 'a' ? "a" : m->arch[i].variant == 'f' ? "f" : "");
        if (m->arch[i].sass) json_array_append_new(sass, json_string(a));
        snprintf(a, sizeof a, "compute_%d", m->arch[i].cc);
        if (m->arch[i].ptx) json_array_append_new(ptx, json_string(a));
    }
    json_object_set_new(mod, "sass", sass);
    json_object_set_new(mod, "ptx", ptx);
    json_object_set_new(mod, "min_compute_capability",
                        m->min_cc ? json_real(m->min_cc / 10 + (m->min_cc % 10) / 10.0) : json_null());
    json_object_set_new(root, "module", mod);

    const kc__driver *d = &r->drv;
    json_t *drv = json_object();
    json_object_set_new(drv, "found", json_boolean(d->found));
    json_object_set_new(drv, "path", jstr_or_null(d->path));
    if (!d->found) json_object_set_new(drv, "error", json_string(d->error));
    json_object_set_new(drv, "version", jstr_or_null(r->nvml.driver_version));
    json_object_set_new(drv, "cuda", jver(kc__ver_from_cuda_int(d->cuda_version)));
    json_object_set_new(drv, "is_toolkit_stub", json_boolean(d->is_stub));
    json_object_set_new(drv, "init", d->found ? json_integer(d->init_result) : json_null());
    json_object_set_new(drv, "init_error", jstr_or_null(d->init_error));
    json_object_set_new(drv, "nvml", jstr_or_null(r->nvml.ok ? r->nvml.path : NULL));
    json_object_set_new(drv, "physical_gpus", r->nvml.ok ? json_integer(r->nvml.count) : json_null());
    json_object_set_new(drv, "compatibility_rule",
                        json_string("a driver for CUDA X.Z runs code built with CUDA X.Y: fully when Z >= Y; with Z < Y "
                                    "(CUDA minor-version compatibility) native code only, no PTX from the newer "
                                    "compiler; a driver of an older major runs nothing"));
    json_object_set_new(root, "driver", drv);

    json_t *libs = json_object();
    if (r->cudnn.soname[0]) json_object_set_new(libs, "cudnn", jlib(&r->cudnn));
    if (r->cublas.soname[0]) json_object_set_new(libs, "cublas", jlib(&r->cublas));
    if (r->nccl.soname[0]) json_object_set_new(libs, "nccl", jlib(&r->nccl));
    json_object_set_new(root, "libraries", libs);

    json_t *gpus = json_array();
    for (int i = 0; i < d->count; i++) {
        const kc__gpu *g = &d->gpu[i];
        json_t *o = json_object();
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        json_object_set_new(o, "device", json_integer(g->index));
        json_object_set_new(o, "nvml_index", g->nvml >= 0 ? json_integer(g->nvml) : json_null());
        json_object_set_new(o, "name", json_string(g->name));
        json_object_set_new(o, "compute_capability", json_string(cc));
        json_object_set_new(o, "memory_total", json_integer((json_int_t)g->total));
        json_object_set_new(o, "memory_free", g->has_free ? json_integer((json_int_t)g->free) : json_null());
        json_object_set_new(o, "pci_bus_id", jstr_or_null(g->pci));
        json_object_set_new(o, "kerac_code", json_string(support_word(g->support)));
        json_object_set_new(o, "code_architecture", g->code_cc ? json_integer(g->code_cc) : json_null());
        json_array_append_new(gpus, o);
    }
    json_object_set_new(root, "gpus", gpus);

    json_t *cvd = json_object();
    json_object_set_new(cvd, "set", json_boolean(r->cvd.set));
    json_object_set_new(cvd, "value", r->cvd.set ? json_string(r->cvd.text) : json_null());
    json_t *vis = json_array();
    for (int i = 0; i < r->cvd.n_visible; i++)
        json_array_append_new(vis, r->cvd.visible[i] >= 0 ? json_integer(r->cvd.visible[i]) : json_null());
    json_object_set_new(cvd, "visible", r->cvd.set ? vis : (json_decref(vis), json_null()));
    json_object_set_new(cvd, "ignored_from", r->cvd.bad >= 0 ? json_string(r->cvd.bad_text) : json_null());
    json_object_set_new(root, "cuda_visible_devices", cvd);

    json_t *tfs = json_array();
    for (int i = 0; i < r->n_tf; i++) {
        const kc__tf *tf = &r->tf[i];
        json_t *o = json_object();
        json_object_set_new(o, "site", json_string(tf->site));
        json_object_set_new(o, "build_info", jstr_or_null(tf->build_info));
        json_object_set_new(o, "package", jstr_or_null(tf->package));
        json_object_set_new(o, "version", jstr_or_null(tf->version));
        json_object_set_new(o, "parsed", json_boolean(tf->parsed));
        json_object_set_new(o, "is_cuda_build", json_boolean(tf->is_cuda_build));
        json_object_set_new(o, "cuda_version", jver(tf->cuda));
        json_object_set_new(o, "cudnn_version", kc__ver_known(tf->cudnn) ? json_integer(tf->cudnn.major) : json_null());
        json_object_set_new(o, "cudnn_pinned", jstr_or_null(tf->cudnn_pin_text));
        json_t *ar = json_array();
        for (int k = 0; k < tf->n_archs; k++) json_array_append_new(ar, json_string(tf->archs[k]));
        json_object_set_new(o, "cuda_compute_capabilities", ar);
        json_array_append_new(tfs, o);
    }
    json_object_set_new(root, "tensorflow", r->tf_checked ? tfs : (json_decref(tfs), json_null()));

    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of memory writing the doctor's report as JSON");
    /* json_dumps uses jansson's allocator (malloc by default); copy so kc_free (free) matches */
    char *copy = strdup(text);
    free(text);
    if (!copy) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of memory writing the doctor's report as JSON");
    size_t len = strlen(copy);
    char *nl = realloc(copy, len + 2);
    if (nl) {
        nl[len] = '\n';
        nl[len + 1] = '\0';
        copy = nl;
    }
    *out = copy;
    return KC_STATUS_OK;
}
