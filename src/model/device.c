/* device.c — what a model asks of its backend (every operation its layers call) and what it
 * observes of it during fit (placement lines, GPU readings, the input-bound verdict); see
 * device.h. The kernel names come from the backend's own describe entry, so they are the
 * kernels the backend runs. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../env/env.h"
#include "device.h"

/* ---------------------------------------------------------------- operations */

static const char *const g_op_words[KC_OP_COUNT] = {
    [KC_OP_CONV2D] = "convolution",
    [KC_OP_POOL2D] = "pooling",
    [KC_OP_GLOBAL_AVG_POOL] = "global average pooling",
    [KC_OP_GEMM] = "matrix product (gemm, bias)",
    [KC_OP_BATCHNORM] = "batch normalization",
    [KC_OP_DROPOUT] = "dropout",
    [KC_OP_PAD2D] = "zero padding",
    [KC_OP_ACTIVATION] = "activation",
    [KC_OP_ELEMENTWISE] = "elementwise",
    [KC_OP_LOSS] = "loss",
    [KC_OP_OPTIMIZER] = "optimizer",
    [KC_OP_DEPTHWISE] = "depthwise convolution",
};

static bool has_op(kc_backend *be, kc_op op) { return be->supports && be->supports(be, op); }

kc_status kc__model_check_backend(const kc_model *m, bool training) {
    kc_backend *be = m->be;
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        for (int op = 0; op < KC_OP_COUNT; op++)
            if ((l->ops->backend_ops & KC_OP_BIT(op)) && !has_op(be, (kc_op)op))
                return kc__fail(KC_STATUS_UNSUPPORTED,
                                "model '%s': layer '%s' (%s) needs the %s operations, which the %s backend (%s) does "
                                "not have; run the model on another device (the CPU has every operation)",
                                m->name, l->name, l->ops->class_name, g_op_words[op], be->name, be->device);
    }
    const kc_op train_ops[2] = {KC_OP_LOSS, KC_OP_OPTIMIZER};
    for (int k = 0; training && k < 2; k++)
        if (!has_op(be, train_ops[k]))
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            "model '%s': training needs the %s operations, which the %s backend (%s) does not have; "
                            "run the model on another device (the CPU has every operation)",
                            m->name, g_op_words[train_ops[k]], be->name, be->device);
    return KC_STATUS_OK;
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

static const char *bytes_text(size_t b, char *buf, size_t n) {
    if (b >= ((size_t)1 << 30)) snprintf(buf, n, "%.2f GiB", (double)b / 1073741824.0);
    else if (b >= ((size_t)1 << 20)) snprintf(buf, n, "%.1f MiB", (double)b / 1048576.0);
    else if (b >= 1024) snprintf(buf, n, "%.1f KiB", (double)b / 1024.0);
    else snprintf(buf, n, "%zu B", b);
    return buf;
}

/* The backend's words for the layer's main kernel (the lowest of its backend_ops). */
static void kernel_words(kc_backend *be, const kc_layer *l, int batch, size_t ws_bytes, char *buf, size_t n) {
    const kc_op op = (kc_op)__builtin_ctz(l->ops->backend_ops);
    union {
        kc_conv2d_desc conv;
        kc_pool2d_desc pool;
    } desc;
    const void *d = NULL;
    if (l->ops->backend_desc) {
        l->ops->backend_desc(l, batch, &desc);
        d = &desc;
    }
    if (!be->describe) {
        snprintf(buf, n, "%s (the backend does not describe its kernels)", g_op_words[op]);
        return;
    }
    kc__saved_error saved;
    kc__error_save(&saved);
    if (be->describe(be, op, d, ws_bytes, buf, n) != KC_STATUS_OK)
        snprintf(buf, n, "%s, not described: %s", g_op_words[op], kc_last_error());
    kc__error_restore(&saved);
}

const char *kc__placement_describe(kc_backend *be, const kc_layer *l, int batch, size_t ws_bytes, char *buf, size_t n) {
    const char *dev = be ? be->device : "?";
    size_t ws = l->ops->workspace_bytes && be ? l->ops->workspace_bytes(l, batch, be) : 0;
    char kernel[768], wsb[32];
    if (l->ops->flags & KC_LAYER_INPUT)
        snprintf(kernel, sizeof kernel, "the input (batch copied to %s)", dev);
    else if (!l->ops->backend_ops || (l->ops->flags & KC_LAYER_ALIAS))
        snprintf(kernel, sizeof kernel, "no kernel (a view of its input)");
    else if (l->pad_folded)
        snprintf(kernel, sizeof kernel, "no kernel (the depthwise convolution after it pads as it reads)");
    else if (l->absorbed)
        snprintf(kernel, sizeof kernel, "no kernel (the batch norm before it applies it, one pass for both)");
    else if (l->bn_folded && be) { /* fuse.c: the Add after it normalises */
        char k2[640];
        kernel_words(be, l, batch, ws_bytes ? ws_bytes : ws, k2, sizeof k2);
        snprintf(kernel, sizeof kernel, "forward: the batch statistics only (the Add after it normalises as it "
                 "reads, one pass for both); %s", k2);
    } else if (!be)
        snprintf(kernel, sizeof kernel, "no backend yet");
    else if (l->fwd_absorbed) { /* an Add + ReLU (fuse.c): the Add computes it, its backward runs */
        char bwd[640];
        kernel_words(be, l, batch, ws_bytes ? ws_bytes : ws, bwd, sizeof bwd);
        snprintf(kernel, sizeof kernel, "no forward kernel (the Add before it applies it, one pass for both); "
                 "backward: %s", bwd);
    } else
        kernel_words(be, l, batch, ws_bytes ? ws_bytes : ws, kernel, sizeof kernel);
    snprintf(buf, n, "placement: %s (%s) on %s: %s; workspace %s", l->name, l->ops->class_name, dev, kernel,
             bytes_text(ws, wsb, sizeof wsb));
    return buf;
}

void kc__placement_layer(kc_backend *be, const kc_layer *l, int batch, size_t ws_bytes) {
    if (!l || !kc_get_log_device_placement()) return;
    char line[1536];
    kc__placement_describe(be, l, batch, ws_bytes, line, sizeof line);
    kc__log_always(KC_LOG_INFO, "%s", line);
}

/* ---------------------------------------------------------------- fit hooks */

void kc__fit_env_begin(kc__fit_env *e, kc_model *m) {
    memset(e, 0, sizeof *e);
    if (!m || !m->be) return;
    kc__env_device_monitor(m->be->device, &e->mon);
}

void kc__fit_env_epoch_begin(kc__fit_env *e) { kc_monitor_reset(e->mon); }

void kc__fit_env_step(kc__fit_env *e, kc_model *m, int micro_batch, kc_batch_logs *bl) {
    if (!e->placed && m && m->be) {
        e->placed = true;
        if (kc_get_log_device_placement())
            for (int i = 0; i < m->n_layers; i++)
                kc__placement_layer(m->be, m->layers[i], micro_batch, m->plan.workspace_bytes);
    }
    if (bl) bl->has_gpu = kc_monitor_latest(e->mon, 0, &bl->gpu);
}

void kc__fit_env_epoch_end(kc__fit_env *e, kc_model *m, double input_wait_seconds, kc_epoch_logs *el) {
    el->input_wait_seconds = input_wait_seconds;
    el->has_gpu = kc_monitor_summary(e->mon, 0, &el->gpu);
    char verdict[256];
    if (kc_input_bound_verdict(input_wait_seconds, el->seconds, m && m->be ? m->be->device : "cpu", verdict, sizeof verdict))
        kc__log(KC_LOG_INFO, "model '%s', epoch %d: %s", m ? m->name : "?", el->epoch + 1, verdict);
}

void kc__fit_env_end(kc__fit_env *e, kc_model *m) {
    (void)m;
    kc_monitor_stop(e->mon);
    e->mon = NULL;
}
