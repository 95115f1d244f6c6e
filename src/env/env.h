/* env.h — private to libkerac: what this machine offers kerac's GPU path, found at run time.
 *
 * Nothing here links against NVIDIA libraries: libcuda.so.1 (the driver), libnvidia-ml.so.1
 * (NVML), cuDNN, cuBLAS and NCCL are dlopen'ed, and the few functions used are declared in
 * the .c files that call them. A library that is missing is a finding, never a failure.
 * Handles are never dlclose'd: the CUDA module uses the same libraries, and unloading them
 * would drop memory they keep for the life of the process.
 *
 *   dl.c         dlopen helpers, the path of a loaded library, ELF dynamic section
 *                (DT_NEEDED, RUNPATH), strings inside a file, /etc/ld.so.cache lookups
 *   cvd.c        CUDA_VISIBLE_DEVICES, parsed with CUDA's rules
 *   driver.c     libcuda.so.1: version, cuInit, the GPUs CUDA sees
 *   nvml.c       libnvidia-ml.so.1: driver version, every physical GPU, readings; the
 *                sampling thread (kc_monitor_*)
 *   libs.c       cuDNN, cuBLAS, NCCL: which file the loader finds and its version
 *   module.c     kerac's CUDA module: where it is, what it was built with (without
 *                loading it), its GPU code (SASS/PTX) against a compute capability
 *   tensorflow.c TensorFlow installations and their build_info.py
 *   doctor*.c    the checks, the verdict and their text / JSON forms (kc_doctor_*; the
 *                files are listed in doctor.h)
 *   policy.c     kc_backend_open (the device policy) and its reason, the input-bound
 *                verdict, the GPU monitor of a device
 * src/env only probes and diagnoses: what a model observes while it runs (placement lines,
 * GPU readings during fit) is src/model/device.c.
 */
#ifndef KC_ENV_H
#define KC_ENV_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/core.h"
#include "kerac_backend.h"

#define KC_ENV_PATH 1024
#define KC_ENV_MAX_GPUS 16
#define KC_ENV_MAX_ARCHS 32

/* ---------------------------------------------------------------- versions */

typedef struct kc__ver {
    int major, minor, patch; /* major < 0: unknown */
} kc__ver;

static inline kc__ver kc__ver_none(void) { return (kc__ver){-1, 0, 0}; }
static inline bool kc__ver_known(kc__ver v) { return v.major >= 0; }
/* "13.0.88", "12.5", "9" -> version; unknown when the text does not start with a number. */
kc__ver kc__ver_parse(const char *text);
/* A CUDA version number (cuDriverGetVersion, cudnnGetCudartVersion): 12080 -> 12.8. */
kc__ver kc__ver_from_cuda_int(long v);
/* <0, 0, >0 comparing major, minor, patch. */
int kc__ver_cmp(kc__ver a, kc__ver b);
/* "13.0.88" (patch shown when show_patch), "13.0", "?" when unknown. */
const char *kc__ver_str(kc__ver v, bool show_patch, char *buf, size_t n);

/* ---------------------------------------------------------------- dl.c */

/* dlopen (RTLD_NOW | RTLD_LOCAL) a soname or path; NULL with dlerror's text in err. */
void *kc__dl_open(const char *name, char *err, size_t n);
/* The already-loaded library of that soname (RTLD_NOLOAD), or NULL. */
void *kc__dl_loaded(const char *soname);
/* The file a handle was loaded from, resolved (realpath); false when unknown. */
bool kc__dl_path(void *handle, char *out, size_t n);
void *kc__dl_sym(void *handle, const char *name);
/* ELF dynamic section of a shared object: DT_NEEDED names and RUNPATH (or RPATH).
 * Returns the number of needed names (at most max), -1 when the file is not a readable
 * 64-bit ELF object. */
int kc__elf_dynamic(const char *path, char (*needed)[64], int max, char *runpath, size_t rn);
/* Find the first NUL-terminated string in the file that starts with prefix; copy it
 * (truncated to n). */
bool kc__file_find_string(const char *path, const char *prefix, char *out, size_t n);
/* The files /etc/ld.so.cache maps a soname to (x86-64 / this architecture), at most max. */
int kc__ldcache_find(const char *soname, char (*paths)[KC_ENV_PATH], int max);
/* snprintf for paths and messages that may be long: false when the text was truncated. */
bool kc__pathf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool kc__file_exists(const char *path);
bool kc__dir_exists(const char *path);
/* The doctor's CPU check: other processes keep the cores busy (a one-minute load average
 * at least the core count) while OpenMP threads wait actively: OMP_WAIT_POLICY not passive
 * and GOMP_SPINCOUNT (either may be NULL: unset) not a count of at most 100,000 spins. */
bool kc__cpu_busy(double load, long cores, const char *wait_policy, const char *spin_count);

/* ---------------------------------------------------------------- cvd.c */

typedef struct kc__cvd {
    bool set;                /* CUDA_VISIBLE_DEVICES is in the environment */
    char text[256];
    int n_tokens;
    int n_visible;           /* entries accepted before the first bad one */
    int visible[KC_ENV_MAX_GPUS]; /* physical GPU (NVML index) of cuda:i; -1 unknown (no NVML) */
    int bad;                 /* index of the entry that ends the list, -1 none */
    char bad_text[64];
    char bad_why[256];       /* "names GPU 3, which does not exist (this machine has 1 GPU: 0)" */
    bool hides_on_purpose;   /* "", "-1", "none", "NoDevFiles": no GPU wanted */
} kc__cvd;

/* Parse text with CUDA's rules: comma-separated GPU indices or UUIDs (GPU-..., a unique
 * prefix is enough; MIG-... instances are accepted as they are); the list ends at the
 * first entry that is not a GPU of this machine (out of range, repeated, not a number or
 * UUID), and only the entries before it are visible, in the order given. physical is the
 * number of GPUs the driver has (-1 unknown: then an index is accepted as it is); uuids
 * (physical of them, may be NULL) their UUIDs. */
void kc__cvd_parse(const char *text, int physical, const char (*uuids)[96], kc__cvd *out);

/* ---------------------------------------------------------------- nvml.c */

typedef struct kc__nvml_gpu {
    char name[96];
    char uuid[96];
    char pci[32];            /* "00000000:01:00.0" */
    int cc_major, cc_minor;  /* 0 when NVML cannot tell */
    size_t total, free, used;
    bool has_memory;
} kc__nvml_gpu;

typedef struct kc__nvml {
    bool found;              /* libnvidia-ml.so.1 loaded */
    char path[KC_ENV_PATH];
    char error[512];         /* why not found / init failed */
    bool ok;                 /* nvmlInit worked */
    char driver_version[48]; /* "580.65.06" */
    int count;               /* physical GPUs */
    kc__nvml_gpu gpu[KC_ENV_MAX_GPUS];
} kc__nvml;

/* NVML's view of the machine (every physical GPU, whatever CUDA_VISIBLE_DEVICES says). */
void kc__nvml_probe(kc__nvml *out);
/* NVML index of the GPU at this PCI bus id ("0000:01:00.0"), -1 when none. */
int kc__nvml_index_by_pci(const kc__nvml *n, const char *pci);

/* ---------------------------------------------------------------- driver.c */

typedef enum kc__support {
    KC__SUPPORT_UNKNOWN = 0,  /* no module, or its architectures are not known */
    KC__SUPPORT_SASS,         /* native code for this GPU */
    KC__SUPPORT_PTX,          /* PTX the driver compiles at first use */
    KC__SUPPORT_PTX_OLD_DRIVER, /* only PTX, and the driver is older than the compiler that made it */
    KC__SUPPORT_NONE          /* neither */
} kc__support;

typedef struct kc__gpu {
    int index;               /* cuda:N, as CUDA numbers it (after CUDA_VISIBLE_DEVICES) */
    int nvml;                /* NVML index, -1 unknown */
    char name[128];
    int cc_major, cc_minor;
    int sm_count;
    size_t total, free;
    bool has_free;           /* free memory known (NVML) */
    char pci[32];
    kc__support support;
    int code_cc;             /* the compute capability of the code that runs on it (SASS or PTX) */
} kc__gpu;

typedef struct kc__driver {
    bool found;              /* libcuda.so.1 loaded */
    char path[KC_ENV_PATH];
    char error[512];         /* dlerror when not found */
    bool is_stub;            /* the CUDA toolkit's link-time stub (.../stubs/libcuda.so) */
    int cuda_version;        /* cuDriverGetVersion: 13000 = CUDA 13.0; 0 unknown */
    int init_result;         /* cuInit's CUresult */
    char init_error[160];    /* "CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected" */
    int count;               /* GPUs CUDA sees (after CUDA_VISIBLE_DEVICES) */
    kc__gpu gpu[KC_ENV_MAX_GPUS];
} kc__driver;

/* Load libcuda.so.1, read its version, cuInit, and every visible GPU (name, compute
 * capability, memory, PCI bus id). nvml (may be NULL) adds free memory. */
void kc__driver_probe(kc__driver *out, const kc__nvml *nvml);
/* PCI bus id of cuda:index (the driver must have been probed), "" when unknown. */
bool kc__driver_pci(int index, char *out, size_t n);

/* ---------------------------------------------------------------- libs.c */

typedef struct kc__lib {
    const char *what;        /* "cuDNN", "cuBLAS", "NCCL" */
    char soname[64];         /* looked for: "libcudnn.so.9" */
    bool found;
    char path[KC_ENV_PATH];
    kc__ver version;
    kc__ver cuda;            /* the CUDA it was built for (unknown for NCCL) */
    char error[512];         /* why it was not found */
    char part_error[512];    /* cuDNN 9: why its convolution library cannot load (cudnnCnnVersionCheck) */
    /* another major version found when soname was not */
    char other_soname[64];
    char other_path[KC_ENV_PATH];
    kc__ver other_version;
    kc__ver other_cuda;
} kc__lib;

/* cuDNN as libcudnn.so.<major> (another major is looked for when that one is missing). */
void kc__lib_cudnn(int major, kc__lib *out);
/* cuBLAS as libcublas.so.<major>. */
void kc__lib_cublas(int major, kc__lib *out);
/* NCCL as libnccl.so.2. */
void kc__lib_nccl(kc__lib *out);
/* cuDNN's version number (cudnnGetVersion) as a version: 91900 -> 9.19.0, 8907 -> 8.9.7. */
kc__ver kc__cudnn_version(long v);

/* ---------------------------------------------------------------- module.c */

typedef struct kc__arch {
    int cc;                  /* 90 = compute capability 9.0 */
    bool sass, ptx;          /* "90-real": sass; "90-virtual": ptx; "90": both */
    char variant;            /* 0, 'a' (this exact GPU), 'f' (this family) */
} kc__arch;

typedef struct kc__module {
    bool found;
    char path[KC_ENV_PATH];
    char searched[2048];     /* where it was looked for */
    bool has_info;           /* its build string was read */
    char info[512];          /* "kerac_cuda 0.1.0: CUDA 13.0.88, cuDNN 9.19.0, ..." */
    char kerac_version[32];
    kc__ver cuda, cudnn, cublas;
    char archs_text[256];
    kc__arch arch[KC_ENV_MAX_ARCHS];
    int n_arch;
    int min_cc;              /* the oldest compute capability with code (0: unknown) */
    int cudnn_major, cublas_major; /* from DT_NEEDED (libcudnn.so.9), else the build string */
    char needed[16][64];
    int n_needed;
    char runpath[1024];
    bool loaded;
    char load_error[1024];
    char missing_lib[64];    /* the library named in load_error ("libcudnn.so.9"), "" */
} kc__module;

/* Find libkerac_cuda.so where kc_backend_open looks (KERAC_MODULE_PATH, beside libkerac or
 * the program, the loader's path), read its build string, architectures and needed
 * libraries from the file, and (when load) dlopen it to see whether it loads. */
void kc__module_probe(bool load, kc__module *out);
/* Parse a build string ("kerac_cuda 0.1.0: CUDA 13.0.88, cuDNN 9.19.0, cuBLAS 13.1.0,
 * architectures 80-real 90-virtual") into out's version and architecture fields. */
bool kc__module_parse_info(const char *info, kc__module *out);
/* What the module's code does on a GPU of compute capability cc (major*10+minor):
 * native SASS (a real architecture of the same major, not newer), PTX (a virtual
 * architecture not newer than cc, compiled by the driver; needs a driver at least as new
 * as the module's CUDA: driver_ok), or nothing. *code_cc: the architecture used. */
kc__support kc__module_support(const kc__module *m, int cc, bool driver_ok, int *code_cc);
/* The oldest compute capability a CUDA toolkit can compile for (13.x: 75, 12.x: 50, 11.x: 35). */
int kc__toolkit_min_cc(kc__ver cuda);
/* The NVIDIA driver branch a CUDA version needs ("580" for 13.0); NULL when not known. */
const char *kc__driver_branch_for(kc__ver cuda);

/* ---------------------------------------------------------------- tensorflow.c */

#define KC_TF_MAX_CC 16
typedef struct kc__tf {
    char site[KC_ENV_PATH];  /* site-packages (or the folder given) */
    char build_info[KC_ENV_PATH]; /* its tensorflow/python/platform/build_info.py */
    char package[64];        /* "tensorflow", "tensorflow-cpu", ... ("" unknown) */
    char version[32];        /* "2.18.0" ("" unknown) */
    bool parsed;
    char parse_error[256];
    bool is_cuda_build, is_rocm_build;
    kc__ver cuda;            /* cuda_version */
    kc__ver cudnn;           /* cudnn_version (TensorFlow records the major only) */
    kc__ver cudnn_pin;       /* nvidia-cudnn-cuXX==... required by tensorflow[and-cuda] */
    char cudnn_pin_text[32]; /* as pinned: "9.3.0.75" */
    char archs[KC_TF_MAX_CC][16]; /* "sm_50", "compute_80" */
    int n_archs;
} kc__tf;

/* Parse build_info.py text (a dict / OrderedDict literal of strings, booleans and lists). */
bool kc__tf_parse_build_info(const char *text, kc__tf *out);
/* Read one installation: path is a site-packages folder, a tensorflow package folder or a
 * build_info.py file. False (with parse_error) when no build info is there. */
bool kc__tf_read(const char *path, kc__tf *out);
/* Search the python3 installations on PATH (and VIRTUAL_ENV, CONDA_PREFIX, ~/.local,
 * /usr/lib/python3/dist-packages, ...) for TensorFlow; at most max; searched (n bytes)
 * lists the folders looked in. */
int kc__tf_find(kc__tf *out, int max, char *searched, size_t n);
/* The oldest compute capability TensorFlow has code for, and whether cc can run it. */
int kc__tf_min_cc(const kc__tf *tf);
bool kc__tf_runs_on(const kc__tf *tf, int cc);

/* ---------------------------------------------------------------- policy.c */

/* The one-line reason device "auto" falls back to the CPU, from the doctor's cheap checks
 * (module, driver, visible GPUs, libraries, compute capability); module_error (the CUDA
 * backend's own error) when those checks find nothing wrong. Writes buf, returns it. */
const char *kc__env_fallback_reason(const char *module_error, char *buf, size_t n);
/* Thread-local record of the last device choice (kc_backend_open): the reason a model
 * runs where it runs. */
void kc__env_note_device_reason(const char *reason);
const char *kc__env_device_reason(void);
/* kc_backend_open's two notes: be opened for requested ("cpu", "cuda:1", "auto": "auto:
 * cuda:0 (NVIDIA H200) works"); and auto's fallback: the reason (kc__env_fallback_reason)
 * into why, noted as "no GPU: <why>; run `kerac doctor`". */
void kc__env_note_open(const char *requested, const kc_backend *be);
const char *kc__env_auto_fallback(const char *module_error, char *why, size_t n);

/* ---- the GPU monitor of a device */
/* A monitor (kc_monitor_start, every 0.5 s) of the GPU a backend device names ("cuda:N
 * (...)"), found through its PCI bus id in NVML; *out NULL (no error, a debug line) on the
 * CPU, without NVML, or when the GPU is not found. */
void kc__env_device_monitor(const char *device, kc_monitor **out);

#endif /* KC_ENV_H */
