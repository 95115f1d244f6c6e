/* memory.c — the memory plan of a step (before allocating), measured usage, the memory
 * limit, and the automatic batch size. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "model.h"


kc_status kc_model_set_memory_limit(kc_model *m, size_t bytes) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_memory_limit: model is NULL");
    m->memory_limit = bytes;
    m->memory_limit_set = true;
    if (m->be) m->be->set_memory_limit(m->be, bytes);
    return KC_STATUS_OK;
}

kc_status kc_model_memory_usage(kc_model *m, size_t *peak, size_t *in_use) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_memory_usage: model is NULL");
    KC_TRY(kc__model_build(m));
    m->be->memory_stats(m->be, in_use, peak);
    return KC_STATUS_OK;
}

static size_t f32(int64_t n) { return (size_t)n * sizeof(float); }

/* Bytes the backend really allocates for a request (the CPU rounds to 64). */
static size_t rounded(size_t b) { return (b + 63) & ~(size_t)63; }

kc_status kc_model_plan_memory(kc_model *m, int batch, int training, int grad_accum, kc_memory_plan *out) {
    if (!m || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_plan_memory: model or output is NULL");
    if (batch <= 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "memory plan: batch size %d must be positive", batch);
    KC_TRY(kc__model_build(m));
    kc_plan p = {0};
    const int tile = training ? batch : kc__model_infer_tile(m, batch); /* what predict and evaluate run */
    KC_TRY(kc__plan_build(m, tile, training != 0, &p));
    memset(out, 0, sizeof *out);
    out->batch_size = batch;
    out->tile = tile;
    out->training = training != 0;
    out->parameters = rounded(f32(m->n_params ? m->n_params : 1));
    int slots = m->compiled ? kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum) : 2;
    if (m->n_trainable > 0) {
        out->gradients = rounded(f32(m->n_trainable)) * (grad_accum > 1 && training ? 2 : 1);
        out->optimizer_state = (size_t)slots * rounded(f32(m->n_trainable));
    }
    out->activations = p.activation_bytes + p.aux_bytes;
    out->activation_gradients = p.gradient_bytes;
    out->workspace = p.workspace_bytes;
    out->arena = p.arena_bytes;
    /* the input feed (feed.h): KC_FEED_SLOTS whole batches (micro-batch x accumulation) of
     * inputs and targets, on the device and page-locked on the host; the step scalars; the
     * per-weight norms of clipnorm */
    int width = m->compiled ? kc__model_target_width(m) : 1;
    int64_t in = kc__shape_size(&m->layers[0]->out_shape);
    int64_t whole = (int64_t)batch * (training && grad_accum > 1 ? grad_accum : 1);
    out->batch_buffers = rounded(KC_SCALAR_COUNT * sizeof(float)) +
                         KC_FEED_SLOTS * (rounded(f32(whole * in)) + rounded(f32(whole * width)));
    if (m->compiled && m->opt.opts.clipnorm > 0 && training)
        out->batch_buffers += rounded(f32(m->n_trainable_weights));
    out->device_total = out->parameters + out->gradients + out->optimizer_state + out->arena + out->batch_buffers;
    out->host_pipeline = 3 * ((size_t)batch * (size_t)in * sizeof(float) + (size_t)batch * sizeof(int32_t)) +
                         KC_FEED_SLOTS * (size_t)whole * (size_t)(in + width) * sizeof(float);
    kc__plan_free(&p);
    return KC_STATUS_OK;
}

/* Device bytes kerac may still use: the memory limit if set (exact), else the device's
 * free memory plus what kerac holds, less a 10% margin for other users and fragmentation. */
kc_status kc__memory_budget(kc_model *m, size_t *budget, char *why, size_t why_n) {
    size_t held = 0;
    m->be->memory_stats(m->be, &held, NULL);
    if (m->memory_limit) {
        *budget = m->memory_limit;
        snprintf(why, why_n, "memory limit %.1f MiB", (double)m->memory_limit / 1048576.0);
        return KC_STATUS_OK;
    }
    kc_mem_info mi = {0};
    KC_TRY(m->be->mem_info(m->be, &mi));
    size_t avail = mi.free_bytes + held;
    *budget = (size_t)((double)avail * 0.9);
    snprintf(why, why_n, "%.1f GiB of %.1f GiB free on %s, less a 10%% margin", (double)avail / 1073741824.0,
             (double)mi.total_bytes / 1073741824.0, m->be->device);
    return KC_STATUS_OK;
}

/* The largest multiple of 8 (at most cap) whose planned training footprint fits. */
kc_status kc__auto_batch_size(kc_model *m, int cap, int grad_accum, int *out, char *reason, size_t reason_n) {
    size_t budget = 0;
    char why[160];
    KC_TRY(kc__memory_budget(m, &budget, why, sizeof why));
    if (cap < 8) cap = 8;
    /* the footprint grows with the batch: binary search over multiples of 8 */
    int lo = 0, hi = cap / 8; /* lo fits (0 = none), hi is the largest candidate */
    size_t best_total = 0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        kc_memory_plan pl;
        KC_TRY(kc_model_plan_memory(m, mid * 8, 1, grad_accum, &pl));
        if (pl.device_total <= budget) {
            lo = mid;
            best_total = pl.device_total;
        } else {
            hi = mid - 1;
        }
    }
    if (lo == 0) {
        kc_memory_plan pl;
        KC_TRY(kc_model_plan_memory(m, 8, 1, grad_accum, &pl));
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "auto batch size: even batch 8 needs %.1f MiB and only %.1f MiB may be used (%s); raise the "
                        "memory limit or use a smaller model", (double)pl.device_total / 1048576.0,
                        (double)budget / 1048576.0, why);
    }
    *out = lo * 8;
    snprintf(reason, reason_n, "auto batch size %d: needs %.1f MiB of %.1f MiB usable (%s)", *out,
             (double)best_total / 1048576.0, (double)budget / 1048576.0, why);
    return KC_STATUS_OK;
}
