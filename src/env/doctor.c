/* doctor.c — kc_doctor_run: every fact about kerac's GPU path (env.h's probes), judged
 * into checks (ok / skipped / warning / problem, each problem with a one-sentence fix) and
 * a verdict: the device `--device auto` uses, why, and the exit code of `kerac doctor`.
 * The checks live in doctor_gpu.c, doctor_host.c and doctor_tf.c, the text and JSON forms
 * in doctor_report.c (see doctor.h); here: adding a check, the verdict, the backend start,
 * the run and the report's accessors. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

/* ---------------------------------------------------------------- the report */

static char *vdup(const char *fmt, va_list ap) {
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) return NULL;
    return s;
}

int kc__doc_add(kc_doctor_report *r, const char *id, kc_check_status st, const char *fix, const char *fmt, ...) {
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

void kc__doc_driver_need(kc__ver cuda, char *buf, size_t n) {
    char v[32];
    const char *br = kc__driver_branch_for((kc__ver){cuda.major, cuda.minor, 0});
    if (br) snprintf(buf, n, "%s or newer (for CUDA %s)", br, kc__doc_v2(cuda, v));
    else snprintf(buf, n, "one for CUDA %s or newer", kc__doc_v2(cuda, v));
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
        bool gpu_here = kc__doc_gpu_usable_driver(r) && d->count > 0;
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
    kc__saved_error saved;
    kc__error_save(&saved);
    kc_backend *be = NULL;
    kc_status s = kc_backend_open("cuda", &be);
    if (s == KC_STATUS_OK && be) {
        r->started = true;
        snprintf(r->start_device, sizeof r->start_device, "%s", be->device);
        kc_backend_destroy(be);
        kc__doc_add(r, "backend", KC_CHECK_OK, NULL, "the CUDA backend starts on %s, as --device auto does", r->start_device);
    } else {
        snprintf(r->start_error, sizeof r->start_error, "%s", kc_last_error());
        kc__doc_add(r, "backend", KC_CHECK_PROBLEM,
            "run `nvidia-smi` to see whether another process holds the GPU; if the message names a library or a "
            "version, fix that; otherwise report this output",
            "the CUDA backend does not start: %s", r->start_error);
    }
    kc__error_restore(&saved);
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

    kc__doc_check_kerac(r);
    kc__doc_check_module(r);
    kc__doc_check_driver(r);
    if (r->mod.found || !quick) {
        kc__doc_check_lib(r, &r->cudnn, r->mod.cudnn_major ? r->mod.cudnn_major : 9, r->mod.cudnn);
        kc__doc_check_lib(r, &r->cublas, r->mod.cublas_major ? r->mod.cublas_major : 13, r->mod.cublas);
    }
    if (!quick) kc__doc_check_nccl(r);
    kc__doc_check_visible(r);
    kc__doc_check_gpus(r);
    if (!quick) {
        kc__doc_check_cpu(r);
        kc__doc_check_env(r);
        kc__doc_check_ld_library_path(r);
        kc__doc_check_tensorflow(r, o);
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
    kc__saved_error saved;
    kc__error_save(&saved);
    kc_doctor_opts o = {.tensorflow_search = KC_FALSE, .start_backend = KC_FALSE};
    diagnose(r, &o, true);
    if (r->verdict != KC_DOCTOR_GPU && r->reason[0]) snprintf(buf, n, "%s", r->reason);
    else snprintf(buf, n, "%s", me);
    kc_doctor_report_destroy(r);
    kc__error_restore(&saved);
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

const char *kc__doc_status_word(kc_check_status s) {
    switch (s) {
    case KC_CHECK_OK: return "ok";
    case KC_CHECK_SKIPPED: return "skipped";
    case KC_CHECK_WARNING: return "warning";
    default: return "problem";
    }
}

const char *kc__doc_verdict_word(kc_doctor_verdict v) {
    return v == KC_DOCTOR_GPU ? "gpu" : v == KC_DOCTOR_CPU ? "cpu" : "broken";
}

const char *kc__doc_verdict_meaning(kc_doctor_verdict v) {
    return v == KC_DOCTOR_GPU ? "the GPU path is healthy"
           : v == KC_DOCTOR_CPU ? "only the CPU is usable here"
                                : "the GPU path is installed but broken";
}
