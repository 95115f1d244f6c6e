/* policy.c — the device policy and the small pieces around it that the model and the CLI call:
 *   - kc_backend_open: "cpu", "cuda", "cuda:N" exactly (any failure is an error with its
 *     reason), or "auto": the CUDA module when it loads and initialises, else the CPU with
 *     a warning that always shows and names the reason (from the doctor's checks);
 *   - the reason a model runs where it runs (thread-local, set by kc_backend_open);
 *   - the input-bound verdict of an epoch;
 *   - device placement lines (--log-device-placement): one per layer at the first step,
 *     with the CPU kernel or the cuDNN algorithm the CUDA module chose, and its workspace;
 *   - the GPU monitor of a model's device during fit. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../layers/layer.h"
#include "env.h"

/* ---------------------------------------------------------------- device reason */

static _Thread_local char g_reason[1024];

void kc__env_note_device_reason(const char *reason) { snprintf(g_reason, sizeof g_reason, "%s", reason ? reason : ""); }
const char *kc__env_device_reason(void) { return g_reason; }

void kc__env_note_open(const char *requested, const kc_backend *be) {
    const char *d = requested && *requested ? requested : "cpu";
    if (!be) kc__env_note_device_reason("");
    else if (!strcmp(d, "auto"))
        snprintf(g_reason, sizeof g_reason, "auto: %s works", be->device);
    else
        snprintf(g_reason, sizeof g_reason, "device %s was asked for (or is the default: --device auto uses a working "
                 "GPU)", d);
}

const char *kc__env_auto_fallback(const char *module_error, char *why, size_t n) {
    kc__env_fallback_reason(module_error, why, n);
    snprintf(g_reason, sizeof g_reason, "no GPU: %s; run `kerac doctor`", why);
    return why;
}

/* ---------------------------------------------------------------- the device policy */

kc_status kc_backend_open(const char *device, kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_open: the output pointer is NULL");
    *out = NULL;
    const char *d = device && *device ? device : "cpu";
    kc__env_note_device_reason("");
    if (strcmp(d, "auto") != 0) {
        kc_status s = kc__backend_open_exact(d, out);
        if (s == KC_STATUS_OK) kc__env_note_open(d, *out);
        return s;
    }
    kc_status s = kc__backend_open_exact("cuda", out);
    if (s == KC_STATUS_OK) {
        kc__env_note_open(d, *out);
        return s;
    }
    char why[1024];
    kc__env_auto_fallback(kc_last_error(), why, sizeof why);
    kc__log_always(KC_LOG_WARNING, "no GPU: %s; training on the CPU (run `kerac doctor` for the whole check)", why);
    return kc_backend_cpu_create(out);
}

/* ---------------------------------------------------------------- input-bound verdict */

int kc_input_bound_verdict(double wait_s, double epoch_s, const char *device, char *buf, size_t n) {
    if (buf && n) buf[0] = '\0';
    if (!(epoch_s > 0) || !(wait_s >= 0.05)) return 0;
    double frac = wait_s / epoch_s;
    if (frac > 1) frac = 1;
    if (frac < 0.10) return 0;
    bool gpu = device && (!strncmp(device, "cuda", 4) || !strncmp(device, "gpu", 3));
    if (buf && n)
        snprintf(buf, n, "the %s waited for data %.0f%% of the step time; raise --prefetch or use more loader threads",
                 gpu ? "GPU" : "CPU", frac * 100.0);
    return 1;
}

/* ---------------------------------------------------------------- placement */

static int g_placement = -1; /* -1: not read from KERAC_LOG_DEVICE_PLACEMENT yet */

void kc_set_log_device_placement(int on) { g_placement = on ? 1 : 0; }

int kc_get_log_device_placement(void) {
    if (g_placement < 0) {
        const char *e = getenv("KERAC_LOG_DEVICE_PLACEMENT");
        g_placement = e && *e && strcmp(e, "0") != 0 && strcasecmp(e, "false") != 0 && strcasecmp(e, "off") != 0;
    }
    return g_placement;
}

/* Placement capture: while a fit runs with placement logging on, the backend's host_log
 * (the CUDA module logs through it) is swapped for capture_log, which keeps the lines that
 * describe a convolution's algorithms (bounded, for the life of the process: a later fit
 * of the same model reuses the algorithms chosen before) and logs every line as before. */
typedef struct capture {
    kc_backend *be;
    void (*saved)(kc_log_level, const char *, ...);
    struct capture *next;
} capture;

#define KC_PLACEMENT_MAX_LINES 512
static pthread_mutex_t g_cap_mu = PTHREAD_MUTEX_INITIALIZER;
static capture *g_caps;
static char *g_lines[KC_PLACEMENT_MAX_LINES];
static int g_n_lines;

static void capture_log(kc_log_level level, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (strstr(line, " conv2d N=")) {
        pthread_mutex_lock(&g_cap_mu);
        if (g_n_lines < KC_PLACEMENT_MAX_LINES) {
            char *dup = strdup(line);
            if (dup) g_lines[g_n_lines++] = dup;
        }
        pthread_mutex_unlock(&g_cap_mu);
    }
    kc__log(level, "%s", line);
}

void kc__placement_begin(kc_backend *be) {
    if (!be || !kc_get_log_device_placement() || !be->host_log) return; /* the CPU backend logs nothing */
    pthread_mutex_lock(&g_cap_mu);
    bool have = false;
    for (capture *c = g_caps; c && !have; c = c->next) have = c->be == be;
    capture *c = have ? NULL : calloc(1, sizeof *c);
    if (c) {
        c->be = be;
        c->saved = be->host_log;
        c->next = g_caps;
        g_caps = c;
        be->host_log = capture_log;
    }
    pthread_mutex_unlock(&g_cap_mu);
}

void kc__placement_end(kc_backend *be) {
    if (!be) return;
    pthread_mutex_lock(&g_cap_mu);
    for (capture **pp = &g_caps; *pp; pp = &(*pp)->next) {
        capture *c = *pp;
        if (c->be != be) continue;
        be->host_log = c->saved;
        *pp = c->next;
        free(c);
        break;
    }
    pthread_mutex_unlock(&g_cap_mu);
}

/* The captured line about a convolution of this shape on this device (the CUDA module's
 * "<device> conv2d N=.. HxWxC -> OHxOWxF (kernel KHxKW..." text), its part after "): ". */
static bool captured_conv(kc_backend *be, const kc_layer *l, char *out, size_t n) {
    if (l->n_weights < 1 || l->w[0].shape.rank != 4) return false;
    const kc_shape *in = &l->in_shape[0], *o = &l->out_shape;
    if (in->rank != 3 || o->rank != 3) return false;
    char key[160];
    snprintf(key, sizeof key, " %dx%dx%d -> %dx%dx%d (kernel %dx%d", in->dim[0], in->dim[1], in->dim[2], o->dim[0],
             o->dim[1], o->dim[2], l->w[0].shape.dim[0], l->w[0].shape.dim[1]);
    size_t dl = strlen(be->device);
    bool found = false;
    pthread_mutex_lock(&g_cap_mu);
    for (int i = g_n_lines - 1; i >= 0 && !found; i--) {
        if (strncmp(g_lines[i], be->device, dl) != 0) continue;
        const char *p = strstr(g_lines[i], key);
        if (!p) continue;
        const char *colon = strstr(p, "): ");
        snprintf(out, n, "%s", colon ? colon + 3 : p);
        found = true;
    }
    pthread_mutex_unlock(&g_cap_mu);
    return found;
}

static const char *bytes_text(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= ((size_t)1 << 20)) snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%zu B", b);
    return buf;
}

/* The CPU backend's kernel for a layer, as cpu_gemm_conv.c chooses it. */
static const char *cpu_kernel(const kc_layer *l, char *buf, size_t n) {
    const char *cls = l->ops->class_name;
    if (!strcmp(cls, "Conv2D") && l->n_weights >= 1 && l->w[0].shape.rank == 4) {
        int kh = l->w[0].shape.dim[0], kw = l->w[0].shape.dim[1], c = l->w[0].shape.dim[2], f = l->w[0].shape.dim[3];
        const kc_shape *in = &l->in_shape[0], *o = &l->out_shape;
        bool one = kh == 1 && kw == 1 && in->rank == 3 && o->rank == 3 && in->dim[0] == o->dim[0] && in->dim[1] == o->dim[1];
        if (one) snprintf(buf, n, "cpu 1x1 conv as one gemm (OpenBLAS)");
        else if (kh * kw * c <= 32 && f <= 256) snprintf(buf, n, "cpu direct conv (patch %dx%dx%d)", kh, kw, c);
        else snprintf(buf, n, "cpu im2col+gemm (OpenBLAS, patch %dx%dx%d)", kh, kw, c);
    } else if (!strcmp(cls, "Dense")) {
        snprintf(buf, n, "cpu gemm (OpenBLAS)");
    } else if (!strcmp(cls, "MaxPooling2D") || !strcmp(cls, "AveragePooling2D")) {
        snprintf(buf, n, "cpu %s pooling", cls[0] == 'M' ? "max" : "average");
    } else if (!strcmp(cls, "BatchNormalization")) {
        snprintf(buf, n, "cpu batch norm");
    } else if (l->ops->flags & KC_LAYER_ALIAS) {
        snprintf(buf, n, "no kernel (a view of its input)");
    } else {
        snprintf(buf, n, "cpu elementwise");
    }
    return buf;
}

const char *kc__placement_describe(kc_backend *be, const kc_layer *l, int batch, char *buf, size_t n) {
    const char *dev = be ? be->device : "?";
    bool gpu = be && be->name && strcmp(be->name, "cpu") != 0;
    size_t ws = l->ops->workspace_bytes && be ? l->ops->workspace_bytes(l, batch, be) : 0;
    char kernel[768], wsb[32];
    const char *cls = l->ops->class_name;
    if (l->ops->flags & KC_LAYER_INPUT) {
        snprintf(kernel, sizeof kernel, "the input (batch copied to %s)", dev);
    } else if (!gpu) {
        cpu_kernel(l, kernel, sizeof kernel);
    } else if (!strcmp(cls, "Conv2D")) {
        char algo[640];
        if (captured_conv(be, l, algo, sizeof algo)) snprintf(kernel, sizeof kernel, "cuDNN %s", algo);
        else snprintf(kernel, sizeof kernel, "cuDNN convolution (algorithm chosen per shape; KERAC_LOG_LEVEL=debug shows it)");
    } else if (!strcmp(cls, "Dense")) {
        snprintf(kernel, sizeof kernel, "cuBLAS sgemm");
    } else if (l->ops->flags & KC_LAYER_ALIAS) {
        snprintf(kernel, sizeof kernel, "no kernel (a view of its input)");
    } else {
        snprintf(kernel, sizeof kernel, "kerac CUDA kernels");
    }
    snprintf(buf, n, "placement: %s (%s) on %s: %s; workspace %s", l->name, cls, dev, kernel, bytes_text(ws, wsb, sizeof wsb));
    return buf;
}

void kc__placement_layer(kc_backend *be, const kc_layer *l, int batch) {
    if (!l || !kc_get_log_device_placement()) return;
    char line[1536];
    kc__placement_describe(be, l, batch, line, sizeof line);
    kc__log_always(KC_LOG_INFO, "%s", line);
}

/* ---------------------------------------------------------------- fit monitor */

void kc__fit_monitor_start(const kc_backend *be, kc_monitor **out) {
    *out = NULL;
    if (!be || strncmp(be->device, "cuda:", 5) != 0) return;
    int cuda = atoi(be->device + 5);
    char pci[32];
    if (!kc__driver_pci(cuda, pci, sizeof pci)) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: its PCI bus id is not known", be->device);
        return;
    }
    int idx = kc__nvml_index_by_pci(NULL, pci);
    if (idx < 0) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: NVML (libnvidia-ml.so.1) does not list it", be->device);
        return;
    }
    char saved[KC_ERROR_MAX];
    snprintf(saved, sizeof saved, "%s", kc_last_error());
    if (kc_monitor_start(idx, 0.5, out) != KC_STATUS_OK) {
        kc__log(KC_LOG_DEBUG, "no GPU readings for %s: %s", be->device, kc_last_error());
        *out = NULL;
    }
    kc__fail(KC_STATUS_OK, "%s", saved);
}
