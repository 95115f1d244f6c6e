/* doctor_host.c — the doctor's checks of the host around the GPU stack: the KERAC_* and
 * CUDA_* environment variables, the CPU (cores, load, OpenMP's wait policy, OpenBLAS's kernels) and
 * LD_LIBRARY_PATH (toolkit stubs, other CUDA versions, NVIDIA libraries it brings in). */
#define _GNU_SOURCE
#include <sched.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "backend/cpu/cpu_blas.h"
#include "doctor.h"

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
    {"KERAC_CPU_ISA", "the CPU kernels: auto, baseline, avx2, avx512"},
    {"KERAC_CPU_WINOGRAD", "0: no Winograd for 3x3 convolutions on the CPU (im2col + GEMM)"},
    /* issue 17, workload A (CPU speed) */
    {"KERAC_CPU_CONV_BLOCKED", "0: no register-blocked direct convolutions on the CPU (im2col + GEMM)"},
    {"KERAC_CPU_HUGEPAGES", "0: no transparent huge pages asked for the CPU's large blocks (the arena)"},
    /* the other variables kerac reads (device options, the dataset folder) */
    {"KERAC_CPU_WINOGRAD_TILE", "Winograd's output tile on the CPU: auto, 2, 3 or 4"},
    {"KERAC_CUDNN_GROUPED", "0: grouped and depthwise convolutions on the GPU by kerac's own kernels, not cuDNN"},
    {"KERAC_CPU_FUSE_BN_RELU", "0: a BatchNormalization and the ReLU after it as two passes on the CPU"},
    {"KERAC_CPU_FOLD_PAD", "0: a ZeroPadding2D before a DepthwiseConv2D writes its padded copy on the CPU"},
    {"KERAC_CPU_INFER_TILE", "0: inference on the CPU runs each layer on the whole batch (no cache-sized tiles)"},
    {"KERAC_CPU_GEMM_SPLIT", "0: tall, skinny GEMMs on OpenBLAS's threading, not split across the threads"},
    /* the convolutions' backward-data adding into a gradient in place */
    {"KERAC_CPU_CONV_DX_ADD", "0: a convolution's input gradient through a buffer of its own and an add pass on the CPU"},
    {"KERAC_CPU_FUSE_ADD_RELU", "0: an Add and the ReLU after it as two forward passes on the CPU"},
    {"KERAC_CPU_FUSE_BN_ADD", "0: a training batch norm writes its output before the Add reads it, on the CPU"},
    {"KERAC_CPU_GEMM_SMALL", "0: GEMMs with a small dimension (1x1 convolutions) on OpenBLAS, not kerac's own tiles"},
    {"KERAC_CPU_BALANCE", "0: CPU threads take one equal share of each loop, not chunks as they come free"},
    {"KERAC_FASHION_MNIST_DIR", "the folder of the Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)"},
};

const char *kc__doc_env_doc(const char *name) {
    for (size_t i = 0; i < sizeof kerac_vars / sizeof kerac_vars[0]; i++)
        if (!strcmp(kerac_vars[i].name, name)) return kerac_vars[i].what;
    return NULL;
}

extern char **environ;

void kc__doc_check_env(kc_doctor_report *r) {
    int shown = 0;
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "KERAC_", 6) != 0) continue;
        const char *eq = strchr(*e, '=');
        if (!eq) continue;
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - *e), *e);
        const char *val = eq + 1;
        const char *doc = kc__doc_env_doc(name);
        shown++;
        if (!doc) {
            kc__doc_add(r, "env", KC_CHECK_WARNING, "check the spelling: the variables kerac reads are listed in `kerac doctor --help`",
                "%s='%s' is not a variable kerac reads", name, val);
            continue;
        }
        if (!strcmp(name, "KERAC_DEVICE")) {
            bool ok = !strcmp(val, "cpu") || !strcmp(val, "cuda") || !strcmp(val, "gpu") || !strcmp(val, "auto") ||
                      (!strncmp(val, "cuda:", 5) && val[5] && strspn(val + 5, "0123456789") == strlen(val + 5));
            if (!ok) {
                kc__doc_add(r, "env", KC_CHECK_PROBLEM, "set KERAC_DEVICE to cpu, cuda, cuda:N or auto",
                    "KERAC_DEVICE='%s' is not cpu, cuda, cuda:N or auto: building a model fails", val);
                continue;
            }
            int idx = !strncmp(val, "cuda:", 5) ? atoi(val + 5) : 0;
            bool wants_gpu = !strncmp(val, "cuda", 4) || !strcmp(val, "gpu");
            if (wants_gpu && (!kc__doc_gpu_usable_driver(r) || r->drv.count == 0)) {
                kc__doc_add(r, "env", KC_CHECK_WARNING, "set KERAC_DEVICE=auto (the GPU when it works, else the CPU) or cpu",
                    "KERAC_DEVICE='%s': models fail to build here (no usable GPU: see the driver and GPU checks)", val);
                continue;
            }
            if (wants_gpu && idx >= r->drv.count) {
                kc__doc_add(r, "env", KC_CHECK_PROBLEM, "set KERAC_DEVICE to a GPU that exists (cuda:0 ...) or to auto",
                    "KERAC_DEVICE='%s': kerac sees %d GPU%s, so models fail to build", val, r->drv.count,
                    r->drv.count == 1 ? "" : "s");
                continue;
            }
            kc__doc_add(r, "env", KC_CHECK_OK, NULL, "KERAC_DEVICE='%s': %s%s", val, doc,
                !strcmp(val, "cpu") ? "; models run on the CPU unless --device says otherwise" : "");
            continue;
        }
        if (!strcmp(name, "KERAC_LOG_LEVEL")) {
            kc_log_level l;
            kc__saved_error saved;
            kc__error_save(&saved);
            bool ok = kc_log_level_parse(val, &l) == KC_STATUS_OK;
            kc__error_restore(&saved);
            if (!ok) {
                kc__doc_add(r, "env", KC_CHECK_WARNING, "set KERAC_LOG_LEVEL to debug, info, warning or error (or 0-3)",
                    "KERAC_LOG_LEVEL='%s' is not a log level: kerac uses warning", val);
                continue;
            }
        }
        if (!strcmp(name, "KERAC_CUDA_DEBUG_SYNC") && strcmp(val, "0") != 0 && val[0]) {
            kc__doc_add(r, "env", KC_CHECK_WARNING, "unset KERAC_CUDA_DEBUG_SYNC unless you are tracking a GPU fault",
                "%s='%s': %s", name, val, doc);
            continue;
        }
        kc__doc_add(r, "env", KC_CHECK_OK, NULL, "%s='%s': %s", name, val, doc);
    }
    const char *clb = getenv("CUDA_LAUNCH_BLOCKING");
    if (clb && strcmp(clb, "0") != 0 && clb[0]) {
        shown++;
        kc__doc_add(r, "env", KC_CHECK_WARNING, "unset CUDA_LAUNCH_BLOCKING unless you are debugging",
            "CUDA_LAUNCH_BLOCKING='%s': every GPU kernel runs synchronously (slow)", clb);
    }
    const char *order = getenv("CUDA_DEVICE_ORDER");
    if (order) {
        shown++;
        kc__doc_add(r, "env", KC_CHECK_OK, NULL, "CUDA_DEVICE_ORDER='%s': %s", order,
            !strcmp(order, "PCI_BUS_ID") ? "cuda:N follows nvidia-smi's numbering"
                                         : "cuda:0 is the fastest GPU (nvidia-smi numbers by PCI bus)");
    }
    if (!shown) kc__doc_add(r, "env", KC_CHECK_OK, NULL, "no KERAC_* or CUDA_* variable changes kerac's behaviour");
}

/* ---- the CPU: when other processes keep the cores busy, OpenMP threads that wait
 * actively (libgomp's default) make CPU training many times slower (bench/RESULTS.md:
 * on 2 cores with 2 busy processes, 330 img/s actively, about 2,800 passively). */
bool kc__cpu_busy(double load, long cores, const char *wait_policy, const char *spin_count) {
    bool passive = wait_policy && !strcasecmp(wait_policy, "passive");
    /* libgomp: GOMP_SPINCOUNT wins over OMP_WAIT_POLICY's spin count; a number with an
     * optional k/M/G/T suffix, or "infinite"/"infinity" (spin forever). A few thousand spins
     * are microseconds (kerac's default, KC_CPU_SPIN_DEFAULT). */
    if (spin_count && *spin_count) {
        char *end;
        double n = strtod(spin_count, &end);
        const char *units = "kMGT";
        const char *u = *end ? strchr(units, *end) : NULL;
        if (u) n *= pow(1000.0, (double)(u - units + 1)), end++;
        passive = end != spin_count && *end == 0 && n >= 0 && n <= 100000;
    }
    return load >= 0 && cores > 0 && load >= (double)cores && !passive;
}

/* "avx512 kernels (the best this processor runs)", or why the asked ones cannot run. */
static bool cpu_kernels_words(char *buf, size_t n, char *blas, size_t nb, bool *blas_below) {
    kc_device_opts o;
    kc__saved_error saved;
    kc__error_save(&saved);
    kc_backend *be = NULL;
    bool ok = kc_device_opts_default(&o) == KC_STATUS_OK && kc_backend_cpu_create_ex(&o, &be) == KC_STATUS_OK;
    if (ok) {
        *blas_below = kc__cpu_blas_below_backend(be, blas, nb);
        snprintf(buf, n, "%s kernels (%s)", kc_backend_cpu_isa(be),
                 o.cpu_isa == KC_CPU_ISA_AUTO ? "the best this processor runs" : "KERAC_CPU_ISA");
    } else
        snprintf(buf, n, "%s", kc_last_error());
    kc_backend_destroy(be);
    kc__error_restore(&saved);
    return ok;
}

/* OpenBLAS's kernels against kerac's (cpu_blas.c): a warning when they are below them;
 * why is kc__cpu_blas_below's "<reason>; <fix>". */
static void check_blas(kc_doctor_report *r, bool below, const char *why) {
    const char *core = kc__cpu_blas_core(), *env = getenv("OPENBLAS_CORETYPE");
    if (below) {
        const char *fix = strstr(why, "; ");
        kc__doc_add(r, "blas", KC_CHECK_WARNING, fix ? fix + 2 : "unset OPENBLAS_CORETYPE", "%.*s",
            fix ? (int)(fix - why) : (int)strlen(why), why);
    } else if (!core)
        kc__doc_add(r, "blas", KC_CHECK_OK, NULL, "the BLAS is not OpenBLAS: its kernels are its own choice");
    else
        kc__doc_add(r, "blas", KC_CHECK_OK, NULL, "OpenBLAS runs its %s kernels%s%s%s", core,
            env && *env ? " (OPENBLAS_CORETYPE=" : "", env && *env ? env : "", env && *env ? ")" : "");
}

void kc__doc_check_cpu(kc_doctor_report *r) {
    char kernels[KC_ERROR_MAX], blas[KC_ERROR_MAX];
    bool blas_below = false;
    if (!cpu_kernels_words(kernels, sizeof kernels, blas, sizeof blas, &blas_below)) {
        kc__doc_add(r, "cpu", KC_CHECK_PROBLEM, "unset KERAC_CPU_ISA (or set it to auto)", "%s", kernels);
        return;
    }
    check_blas(r, blas_below, blas);
    cpu_set_t set;
    long cores = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    double load = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &load) != 1) load = -1;
        fclose(f);
    }
    const char *wp = getenv("OMP_WAIT_POLICY"), *spin = getenv("GOMP_SPINCOUNT");
    char waiting[160];
    if (spin && *spin)
        snprintf(waiting, sizeof waiting, "waiting threads spin %s times, then sleep (GOMP_SPINCOUNT%s)", spin,
            !strcmp(spin, KC_CPU_SPIN_DEFAULT) && !wp ? ", kerac's default" : "");
    else if (wp)
        snprintf(waiting, sizeof waiting, "OMP_WAIT_POLICY=%s", wp);
    else
        snprintf(waiting, sizeof waiting, "libgomp's default: waiting threads spin for milliseconds");
    int threads = kc_get_num_threads();
    if (kc__cpu_busy(load, cores, wp, spin)) {
        kc__doc_add(r, "cpu", KC_CHECK_WARNING,
            "for CPU training while other work shares the cores, set GOMP_SPINCOUNT=" KC_CPU_SPIN_DEFAULT
            " (the kerac command's default) or OMP_WAIT_POLICY=passive, or use fewer --threads",
            "load average %.1f (last minute) on %ld CPU core%s: other processes keep them busy, and kerac's %d OpenMP thread%s "
            "wait actively (%s), which makes CPU training many times slower in that case; CPU %s",
            load, cores, cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", waiting, kernels);
        return;
    }
    if (load >= 0)
        kc__doc_add(r, "cpu", KC_CHECK_OK, NULL, "%ld CPU core%s, kerac uses %d thread%s and its %s, load %.1f; %s", cores,
            cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", kernels, load, waiting);
    else
        kc__doc_add(r, "cpu", KC_CHECK_OK, NULL, "%ld CPU core%s, kerac uses %d thread%s and its %s; %s", cores,
            cores == 1 ? "" : "s", threads, threads == 1 ? "" : "s", kernels, waiting);
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

void kc__doc_check_ld_library_path(kc_doctor_report *r) {
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (!llp || !*llp) {
        kc__doc_add(r, "ld_library_path", KC_CHECK_OK, NULL,
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
            kc__doc_add(r, "ld_library_path", KC_CHECK_WARNING, fix,
                "LD_LIBRARY_PATH entry %s holds the CUDA toolkit's stub libcuda.so: a program that loads libcuda.so "
                "gets it instead of the NVIDIA driver",
                dir);
            continue;
        }
        relevant++;
        if (stub) {
            char fix[KC_ENV_PATH + 80];
            snprintf(fix, sizeof fix, "remove %s from LD_LIBRARY_PATH: it is for linking, not for running", dir);
            kc__doc_add(r, "ld_library_path", KC_CHECK_PROBLEM, fix,
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
            kc__doc_add(r, "ld_library_path", KC_CHECK_WARNING, fix,
                "LD_LIBRARY_PATH entry %s holds %s%s%s, the copy that fails its check above", dir, held,
                shadows[0] ? "; " : "", shadows);
        } else {
            kc__doc_add(r, "ld_library_path", KC_CHECK_OK, NULL, "LD_LIBRARY_PATH entry %s holds %s%s%s", dir, held,
                shadows[0] ? "; " : "", shadows);
        }
    }
    if (!relevant)
        kc__doc_add(r, "ld_library_path", KC_CHECK_OK, NULL, "LD_LIBRARY_PATH (%d entr%s) holds no NVIDIA or kerac library",
            entries, entries == 1 ? "y" : "ies");
}
