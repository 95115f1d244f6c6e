/* doctor_gpu.c — the doctor's checks of kerac's GPU stack: kerac itself, its CUDA module
 * (found, loadable, its GPU code), the NVIDIA driver against the module's CUDA, cuDNN,
 * cuBLAS and NCCL, CUDA_VISIBLE_DEVICES, and every GPU (compute capability, memory,
 * whether the module's code runs on it).
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
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* The GPU code list in words: "SASS sm_80 sm_90, PTX compute_90". */
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

void kc__doc_check_kerac(kc_doctor_report *r) {
    Dl_info info;
    if (dladdr((void *)&kc_doctor_run, &info) && info.dli_fname) {
        char real[KC_ENV_PATH];
        if (realpath(info.dli_fname, real)) snprintf(r->kerac_path, sizeof r->kerac_path, "%s", real);
        else snprintf(r->kerac_path, sizeof r->kerac_path, "%s", info.dli_fname);
    }
    kc__doc_add(r, "kerac", KC_CHECK_OK, NULL, "kerac %s (%s)", kc_version(), r->kerac_path[0] ? r->kerac_path : "?");
}

void kc__doc_check_module(kc_doctor_report *r) {
    const kc__module *m = &r->mod;
    char a[32], b[32], c[32], codes[512];
    if (!m->found) {
        bool gpu_here = kc__doc_gpu_usable_driver(r) && r->drv.count > 0;
        kc__doc_add(r, "module", gpu_here ? KC_CHECK_PROBLEM : KC_CHECK_OK,
            gpu_here ? "rebuild kerac on a machine with the CUDA toolkit, cuDNN and cuBLAS (cmake -DKERAC_CUDA=ON) "
                       "and install it, or set KERAC_MODULE_PATH to the folder that holds libkerac_cuda.so"
                     : NULL,
            "kerac's CUDA module libkerac_cuda.so is not installed (looked in %s)%s", m->searched,
            gpu_here ? "" : ": this kerac runs on the CPU only");
        return;
    }
    code_list(m, codes, sizeof codes);
    if (!m->has_info) {
        kc__doc_add(r, "module", KC_CHECK_WARNING,
            "install the libkerac_cuda.so built together with this kerac (the same build folder or install prefix)",
            "%s has no kerac build string: it is not a kerac CUDA module, or one from another version", m->path);
        return;
    }
    if (!m->loaded) {
        const char *lib = m->missing_lib[0] ? m->missing_lib : NULL;
        char fix[256];
        if (lib) snprintf(fix, sizeof fix, "make %s findable (see its check below)", lib);
        else snprintf(fix, sizeof fix, "reinstall kerac (the module and libkerac must come from the same build)");
        kc__doc_add(r, "module", KC_CHECK_PROBLEM, fix, "%s (built with CUDA %s, cuDNN %s, cuBLAS %s; %s) cannot be loaded: %s",
            m->path, kc__doc_v(m->cuda, a), kc__doc_v(m->cudnn, b), kc__doc_v(m->cublas, c), codes, m->load_error);
        return;
    }
    char warn[128] = "";
    if (strcmp(m->kerac_version, kc_version()) != 0)
        snprintf(warn, sizeof warn, " (kerac %s: libkerac is %s)", m->kerac_version, kc_version());
    kc__doc_add(r, "module", warn[0] ? KC_CHECK_WARNING : KC_CHECK_OK,
        warn[0] ? "install the libkerac_cuda.so built together with this kerac" : NULL,
        "%s%s: built with CUDA %s, cuDNN %s, cuBLAS %s, no NCCL; GPU code: %s", m->path, warn, kc__doc_v(m->cuda, a),
        kc__doc_v(m->cudnn, b), kc__doc_v(m->cublas, c), codes);
}

/* Driver check; sets *blocking reason/fix when the driver stops the GPU path. */
void kc__doc_check_driver(kc_doctor_report *r) {
    const kc__driver *d = &r->drv;
    const kc__module *m = &r->mod;
    char need[96], a[32], b[32];
    kc__ver want = m->found && kc__ver_known(m->cuda) ? m->cuda : (kc__ver){13, 0, 0};
    kc__doc_driver_need(want, need, sizeof need);
    if (!d->found) {
        char fix[320];
        snprintf(fix, sizeof fix,
                 "install the NVIDIA driver, %s, and check it with `nvidia-smi`; or train on the CPU with --device cpu",
                 need);
        kc__doc_add(r, "driver", KC_CHECK_PROBLEM, fix, "no NVIDIA driver: libcuda.so.1 not found (%s)", d->error);
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
        kc__doc_add(r, "driver", KC_CHECK_PROBLEM, fix,
            "libcuda.so.1 at %s is the CUDA toolkit's stub library, not the NVIDIA driver", d->path);
        return;
    }
    if (d->init_result != 0 && d->init_result != 100 /* CUDA_ERROR_NO_DEVICE: see the GPU checks */) {
        kc__doc_add(r, "driver", KC_CHECK_PROBLEM,
            "run `nvidia-smi`; after a driver update reboot (the kernel module and libcuda.so.1 must match), and in a "
            "container start it with the GPUs (docker run --gpus all)",
            "the NVIDIA driver%s (libcuda.so.1 at %s, CUDA %s) cannot start: %s", ver, d->path, kc__doc_v2(dv, a),
            d->init_error);
        return;
    }
    if (!m->found || !kc__ver_known(m->cuda)) {
        kc__doc_add(r, "driver", KC_CHECK_OK, NULL, "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s", ver, d->path,
            kc__doc_v2(dv, a));
        return;
    }
    if (!kc__ver_known(dv)) {
        kc__doc_add(r, "driver", KC_CHECK_WARNING, "update the NVIDIA driver",
            "NVIDIA driver%s (libcuda.so.1 at %s) does not say which CUDA it supports", ver, d->path);
        return;
    }
    kc__ver mv = {m->cuda.major, m->cuda.minor, 0};
    if (dv.major < mv.major) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s, or train on the CPU with --device cpu", need);
        kc__doc_add(r, "driver", KC_CHECK_PROBLEM, fix,
            "the NVIDIA driver%s is too old: it supports CUDA up to %s, and kerac's CUDA module needs CUDA %s", ver,
            kc__doc_v2(dv, a), kc__doc_v2(mv, b));
    } else if (dv.major == mv.major && dv.minor < mv.minor) {
        char fix[256];
        snprintf(fix, sizeof fix, "update the NVIDIA driver to %s to run kerac's PTX too", need);
        kc__doc_add(r, "driver", KC_CHECK_WARNING, fix,
            "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s, kerac's module was built with CUDA %s: it runs "
            "through CUDA's minor-version compatibility (native code only; this driver cannot compile the module's "
            "PTX)",
            ver, d->path, kc__doc_v2(dv, a), kc__doc_v2(mv, b));
    } else {
        kc__doc_add(r, "driver", KC_CHECK_OK, NULL,
            "NVIDIA driver%s (libcuda.so.1 at %s) supports CUDA %s; kerac's module needs CUDA %s", ver, d->path,
            kc__doc_v2(dv, a), kc__doc_v2(mv, b));
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

void kc__doc_check_lib(kc_doctor_report *r, const kc__lib *l, int major, kc__ver built) {
    const kc__module *m = &r->mod;
    char a[32], b[32], c[32], fix[512];
    const char *id = !strcmp(l->what, "cuDNN") ? "cudnn" : "cublas";
    if (!m->found) {
        if (l->found)
            kc__doc_add(r, id, KC_CHECK_OK, NULL, "%s %s at %s (not used: no CUDA module)", l->what, kc__doc_v(l->version, a), l->path);
        else
            kc__doc_add(r, id, KC_CHECK_SKIPPED, NULL, "%s not found (not needed: no CUDA module)", l->soname);
        return;
    }
    lib_fix(l->what, major, m->cuda, fix, sizeof fix);
    if (!l->found) {
        if (l->other_soname[0])
            kc__doc_add(r, id, KC_CHECK_PROBLEM, fix,
                "%s not found; the loader finds %s %s (%s at %s, for CUDA %s) instead, which kerac's module cannot use "
                "(it needs %s %d)",
                l->soname, l->what, kc__doc_v(l->other_version, a), l->other_soname, l->other_path, kc__doc_v2(l->other_cuda, b),
                l->what, major);
        else
            kc__doc_add(r, id, KC_CHECK_PROBLEM, fix, "%s %d not found: %s", l->what, major, l->error);
        return;
    }
    if (kc__ver_known(l->version) && l->version.major != major) {
        kc__doc_add(r, id, KC_CHECK_PROBLEM, fix, "%s at %s is %s %s, but kerac's module was built with %s %s", l->soname,
            l->path, l->what, kc__doc_v(l->version, a), l->what, kc__doc_v(built, b));
        return;
    }
    if (l->part_error[0]) { /* cuDNN 9 without its convolution library: no Conv2D would run */
        char fix2[KC_ENV_PATH + 256];
        snprintf(fix2, sizeof fix2, "install the complete cuDNN %d (libcudnn_cnn.so.%d and the other libcudnn_*.so.%d "
                 "files beside %s; they need libz.so.1)", major, major, major, l->path);
        kc__doc_add(r, id, KC_CHECK_PROBLEM, fix2, "%s %s at %s cannot load its convolution library (%s)", l->what,
            kc__doc_v(l->version, a), l->path, l->part_error);
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
        kc__doc_add(r, id, KC_CHECK_PROBLEM, fix2, "%s %s at %s is built for CUDA %s, but kerac's module uses CUDA %s", l->what,
            kc__doc_v(l->version, a), l->path, kc__doc_v2(l->cuda, b), kc__doc_v2(m->cuda, c));
        return;
    }
    if (kc__ver_known(built) && kc__ver_known(l->version) && l->version.minor < built.minor) {
        char fix2[256];
        snprintf(fix2, sizeof fix2, "update %s to %d.%d or newer", l->what, built.major, built.minor);
        kc__doc_add(r, id, KC_CHECK_WARNING, fix2, "%s %s at %s is older than the %s %s kerac's module was built with",
            l->what, kc__doc_v(l->version, a), l->path, l->what, kc__doc_v(built, b));
        return;
    }
    kc__doc_add(r, id, KC_CHECK_OK, NULL, "%s %s (for CUDA %s) at %s; kerac's module was built with %s %s", l->what,
        kc__doc_v(l->version, a), kc__doc_v2(l->cuda, b), l->path, l->what, kc__doc_v(built, c));
}

/* NCCL: only data-parallel training on GPUs (mpirun / srun with GPU ranks) uses it, to sum
 * the gradients on the devices; without it, or with one for another CUDA, those runs sum
 * them through the host (slower) or fail. */
void kc__doc_check_nccl(kc_doctor_report *r) {
    char a[32], b[32], c[32];
    const kc__lib *l = &r->nccl;
    const kc__module *m = &r->mod;
    if (!l->found) {
        kc__doc_add(r, "nccl", KC_CHECK_SKIPPED, NULL, "libnccl.so.2 not found (only data-parallel training on several "
                    "GPUs uses it; without it their gradients go through the host)");
        return;
    }
    bool mod_cuda = m->found && kc__ver_known(m->cuda);
    if (mod_cuda && kc__ver_known(l->cuda) && l->cuda.major != m->cuda.major) {
        char fix[1400];
        snprintf(fix, sizeof fix, "install NCCL 2 for CUDA %d (e.g. `pip install nvidia-nccl-cu%d`, or NVIDIA's "
                 "libnccl2 package for CUDA %d) and put it before %s on the library path", m->cuda.major,
                 m->cuda.major, m->cuda.major, l->path);
        kc__doc_add(r, "nccl", KC_CHECK_WARNING, fix, "NCCL %s at %s is built for CUDA %s, but kerac's module uses CUDA "
                    "%s: data-parallel training on GPUs would fail to start NCCL", kc__doc_v(l->version, a), l->path,
                    kc__doc_v2(l->cuda, b), kc__doc_v2(m->cuda, c));
        return;
    }
    kc__doc_add(r, "nccl", KC_CHECK_OK, NULL, "NCCL %s (for CUDA %s) at %s%s%s%s: data-parallel training on GPUs sums "
                "the gradients with it", kc__doc_v(l->version, a), kc__ver_known(l->cuda) ? kc__doc_v2(l->cuda, b) : "?",
                l->path, mod_cuda ? "; kerac's module uses CUDA " : "", mod_cuda ? kc__doc_v2(m->cuda, c) : "",
                mod_cuda && kc__ver_known(l->cuda) ? " (matches)" : "");
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

void kc__doc_check_visible(kc_doctor_report *r) {
    const kc__cvd *v = &r->cvd;
    char phys[512];
    physical_list(r, phys, sizeof phys);
    if (!v->set) {
        if (kc__doc_gpu_usable_driver(r))
            kc__doc_add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES is not set: kerac sees every GPU (%d)",
                r->drv.count);
        else
            kc__doc_add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES is not set");
        return;
    }
    if (v->hides_on_purpose) {
        kc__doc_add(r, "visible_devices", KC_CHECK_WARNING, "unset CUDA_VISIBLE_DEVICES (or list a GPU) to train on the GPU",
            "CUDA_VISIBLE_DEVICES='%s' hides every GPU%s%s%s: kerac runs on the CPU", v->text, phys[0] ? " (" : "",
            phys, phys[0] ? ")" : "");
        return;
    }
    if (v->bad >= 0) {
        bool none = v->n_visible == 0;
        char fix[256];
        snprintf(fix, sizeof fix, "set CUDA_VISIBLE_DEVICES to GPUs that exist%s%s, or unset it",
                 r->nvml.ok ? " (" : "", r->nvml.ok ? "see `nvidia-smi -L`)" : "");
        kc__doc_add(r, "visible_devices", none ? KC_CHECK_PROBLEM : KC_CHECK_WARNING, fix,
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
    kc__doc_add(r, "visible_devices", KC_CHECK_OK, NULL, "CUDA_VISIBLE_DEVICES='%s': kerac sees %d GPU%s (%s)", v->text,
        v->n_visible, v->n_visible == 1 ? "" : "s", map);
}

void kc__doc_check_gpus(kc_doctor_report *r) {
    const kc__driver *d = &r->drv;
    const kc__module *m = &r->mod;
    if (!kc__doc_gpu_usable_driver(r)) {
        if (d->found && d->init_result == 100) {
            if (r->cvd.set && (r->cvd.hides_on_purpose || r->cvd.bad >= 0))
                kc__doc_add(r, "gpus", KC_CHECK_SKIPPED, NULL, "no GPU visible: see CUDA_VISIBLE_DEVICES");
            else
                kc__doc_add(r, "gpus", KC_CHECK_PROBLEM,
                    "run `nvidia-smi`; in a container, start it with the GPUs (docker run --gpus all); check that the "
                    "GPU is seated and powered",
                    "the NVIDIA driver sees no GPU (%s)", d->init_error);
        } else {
            kc__doc_add(r, "gpus", KC_CHECK_SKIPPED, NULL, "not checked: %s",
                !d->found ? "no NVIDIA driver" : d->is_stub ? "no real driver" : "the driver cannot start");
        }
        return;
    }
    if (d->count == 0) {
        kc__doc_add(r, "gpus", KC_CHECK_PROBLEM, "run `nvidia-smi`", "the NVIDIA driver reports no GPU");
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
            snprintf(mem, sizeof mem, "%s (%s free)", kc__doc_bytes(g->total, t, sizeof t), kc__doc_bytes(g->free, f, sizeof f));
        else
            snprintf(mem, sizeof mem, "%s", kc__doc_bytes(g->total, t, sizeof t));
        char head[384];
        snprintf(head, sizeof head, "cuda:%d %s, compute capability %d.%d, %s", g->index, g->name, g->cc_major,
                 g->cc_minor, mem);
        char fix[320];
        switch (g->support) {
        case KC__SUPPORT_SASS:
            kc__doc_add(r, id, KC_CHECK_OK, NULL, "%s: runs kerac's native code (sm_%d)", head, g->code_cc);
            break;
        case KC__SUPPORT_PTX:
            kc__doc_add(r, id, KC_CHECK_OK, NULL,
                "%s: runs kerac's PTX (compute_%d), compiled by the driver at first use (the first start is slower; "
                "-DCMAKE_CUDA_ARCHITECTURES=%d-real adds native code)",
                head, g->code_cc, cc);
            break;
        case KC__SUPPORT_PTX_OLD_DRIVER: {
            char need[96];
            kc__doc_driver_need(m->cuda, need, sizeof need);
            snprintf(fix, sizeof fix, "update the NVIDIA driver to %s, or rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=%d-real",
                     need, cc);
            kc__doc_add(r, id, KC_CHECK_PROBLEM, fix,
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
                         cc, kc__doc_v2(m->cuda, v));
            kc__doc_add(r, id, KC_CHECK_PROBLEM, fix, "%s: not supported: compute capability %d.%d, kerac needs %d.%d or newer",
                head, g->cc_major, g->cc_minor, m->min_cc / 10, m->min_cc % 10);
            break;
        }
        default:
            kc__doc_add(r, id, m->found ? KC_CHECK_WARNING : KC_CHECK_OK, m->found ? "install a kerac module built with a list of architectures" : NULL,
                "%s: %s", head, m->found ? "cannot tell whether kerac's code runs on it (its architectures are not a list)"
                                         : "no CUDA module to run on it");
        }
    }
}
