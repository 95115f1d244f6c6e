/* doctor.h — private to src/env/doctor*.c: the doctor's report and the helpers its
 * check files share.
 *
 *   doctor.c         the report (adding checks), the verdict, the backend start, the run,
 *                    the accessors
 *   doctor_gpu.c     kerac, its CUDA module, the driver, cuDNN / cuBLAS / NCCL,
 *                    CUDA_VISIBLE_DEVICES, every GPU
 *   doctor_host.c    the environment variables, the CPU load, OpenBLAS's kernels,
 *                    LD_LIBRARY_PATH
 *   doctor_tf.c      TensorFlow installations against this machine
 *   doctor_report.c  the report as text and as JSON */
#ifndef KC_ENV_DOCTOR_H
#define KC_ENV_DOCTOR_H

#include <stdio.h>

#include "env.h"

#define KC_DOCTOR_MAX_TF 4

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

/* Add a check; fix may be NULL. Returns its index (-1 out of memory: r->oom is set). */
int kc__doc_add(kc_doctor_report *r, const char *id, kc_check_status st, const char *fix, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static inline const char *kc__doc_bytes(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.1f GiB", (double)b / 1073741824.0);
    else snprintf(buf, n, "%.0f MiB", (double)b / 1048576.0);
    return buf;
}

/* A version as "13.0.88" (kc__doc_v) or "13.0" (kc__doc_v2); buf of 32 bytes. */
static inline const char *kc__doc_v(kc__ver v, char *buf) { return kc__ver_str(v, true, buf, 32); }
static inline const char *kc__doc_v2(kc__ver v, char *buf) { return kc__ver_str(v, false, buf, 32); }

/* "580 or newer (for CUDA 13.0)" / "one for CUDA 13.2 or newer" */
void kc__doc_driver_need(kc__ver cuda, char *buf, size_t n);

static inline bool kc__doc_gpu_usable_driver(const kc_doctor_report *r) {
    return r->drv.found && !r->drv.is_stub && r->drv.init_result == 0;
}

/* The checks, in the order kc_doctor_run adds them (each adds one or more). */
/* What a KERAC_* variable kerac reads does (the env check's words); NULL for a name kerac
 * does not read. */
const char *kc__doc_env_doc(const char *name);
void kc__doc_check_kerac(kc_doctor_report *r);
void kc__doc_check_module(kc_doctor_report *r);
void kc__doc_check_driver(kc_doctor_report *r);
void kc__doc_check_lib(kc_doctor_report *r, const kc__lib *l, int major, kc__ver built);
void kc__doc_check_nccl(kc_doctor_report *r);
void kc__doc_check_visible(kc_doctor_report *r);
void kc__doc_check_gpus(kc_doctor_report *r);
void kc__doc_check_cpu(kc_doctor_report *r);
void kc__doc_check_env(kc_doctor_report *r);
void kc__doc_check_ld_library_path(kc_doctor_report *r);
void kc__doc_check_tensorflow(kc_doctor_report *r, const kc_doctor_opts *o);

/* Words of the text and JSON forms: "ok" / "skipped" / "warning" / "problem"; "gpu" /
 * "cpu" / "broken"; the verdict in a sentence. */
const char *kc__doc_status_word(kc_check_status s);
const char *kc__doc_verdict_word(kc_doctor_verdict v);
const char *kc__doc_verdict_meaning(kc_doctor_verdict v);

#endif /* KC_ENV_DOCTOR_H */
