/* doctor_report.c — the doctor's report in words (kc_doctor_text: one line per check, its
 * fix under it, the verdict) and as JSON (kc_doctor_json: the verdict, the checks and the
 * facts behind them: module, driver, libraries, GPUs, CUDA_VISIBLE_DEVICES, TensorFlow). */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor.h"

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
        sb_printf(&b, "%-8s %-16s %s\n", kc__doc_status_word(c->status), c->id, c->message);
        if (c->fix[0] && c->status >= KC_CHECK_WARNING) sb_printf(&b, "%-8s %-16s fix: %s\n", "", "", c->fix);
    }
    sb_printf(&b, "\nverdict: %s (exit %d: %s)\n", kc__doc_verdict_word(r->verdict), (int)r->verdict, kc__doc_verdict_meaning(r->verdict));
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

static json_t *json_module(const kc__module *m) {
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
    return mod;
}

static json_t *json_driver(const kc_doctor_report *r) {
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
    return drv;
}

static json_t *json_gpus(const kc__driver *d) {
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
    return gpus;
}

static json_t *json_cvd(const kc__cvd *v) {
    json_t *cvd = json_object();
    json_object_set_new(cvd, "set", json_boolean(v->set));
    json_object_set_new(cvd, "value", v->set ? json_string(v->text) : json_null());
    json_t *vis = json_array();
    for (int i = 0; i < v->n_visible; i++)
        json_array_append_new(vis, v->visible[i] >= 0 ? json_integer(v->visible[i]) : json_null());
    json_object_set_new(cvd, "visible", v->set ? vis : (json_decref(vis), json_null()));
    json_object_set_new(cvd, "ignored_from", v->bad >= 0 ? json_string(v->bad_text) : json_null());
    return cvd;
}

static json_t *json_tf(const kc__tf *tf) {
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
    return o;
}

/* The verdict and the checks, the first two keys of the report. */
static void json_verdict_checks(const kc_doctor_report *r, json_t *root) {
    json_t *v = json_object();
    json_object_set_new(v, "verdict", json_string(kc__doc_verdict_word(r->verdict)));
    json_object_set_new(v, "exit_code", json_integer((int)r->verdict));
    json_object_set_new(v, "meaning", json_string(kc__doc_verdict_meaning(r->verdict)));
    json_object_set_new(v, "device", json_string(r->device));
    json_object_set_new(v, "reason", json_string(r->reason));
    json_object_set_new(v, "fix", json_string(r->fix));
    json_object_set_new(root, "verdict", v);
    json_t *checks = json_array();
    for (int i = 0; i < r->n; i++) {
        json_t *c = json_object();
        json_object_set_new(c, "id", json_string(r->checks[i].id));
        json_object_set_new(c, "status", json_string(kc__doc_status_word(r->checks[i].status)));
        json_object_set_new(c, "message", json_string(r->checks[i].message));
        json_object_set_new(c, "fix", json_string(r->checks[i].fix));
        json_array_append_new(checks, c);
    }
    json_object_set_new(root, "checks", checks);
}

kc_status kc_doctor_json(const kc_doctor_report *r, char **out) {
    if (!r || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_doctor_json: report and out must not be NULL");
    *out = NULL;
    json_t *root = json_object();
    json_object_set_new(root, "kerac_version", json_string(kc_version()));
    json_verdict_checks(r, root);
    /* the facts behind them */
    json_object_set_new(root, "module", json_module(&r->mod));
    json_object_set_new(root, "driver", json_driver(r));
    json_t *libs = json_object();
    if (r->cudnn.soname[0]) json_object_set_new(libs, "cudnn", jlib(&r->cudnn));
    if (r->cublas.soname[0]) json_object_set_new(libs, "cublas", jlib(&r->cublas));
    if (r->nccl.soname[0]) json_object_set_new(libs, "nccl", jlib(&r->nccl));
    json_object_set_new(root, "libraries", libs);
    json_object_set_new(root, "gpus", json_gpus(&r->drv));
    json_object_set_new(root, "cuda_visible_devices", json_cvd(&r->cvd));
    json_t *tfs = json_array();
    for (int i = 0; i < r->n_tf; i++) json_array_append_new(tfs, json_tf(&r->tf[i]));
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
