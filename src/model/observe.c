/* observe.c — what lets a user see a training run from inside: Chrome traces of chosen
 * steps (kc_model_trace_steps: spans of every layer's forward and backward, the loss, the
 * optimizer update, data waits and uploads, on the training loop's and the loader's
 * tracks) and the numerics check (kc_model_set_check_numerics: the first layer whose
 * forward or backward output holds NaN or Inf stops training, named with the step and
 * the tensor, like tf.debugging.enable_check_numerics).
 *
 * The check copies each output to the host in 64 KiB pieces through the backend's
 * to_host, so it works on every backend without a kernel of its own (and costs a copy
 * per layer: a debugging mode). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

kc_status kc_model_trace_steps(kc_model *m, int64_t first, int64_t last) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_trace_steps: model is NULL");
    if (first < 1 || last < first)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "trace steps %lld:%lld: give 1 <= first <= last (steps are "
                        "counted from 1 over the run)", (long long)first, (long long)last);
    if (!m->trace) KC_TRY(kc__trace_create(&m->trace));
    m->trace_first = first;
    m->trace_last = last;
    kc__trace_name_thread(m->trace, "training loop");
    return KC_STATUS_OK;
}

kc_status kc_model_write_trace(const kc_model *m, const char *path) {
    if (!m || !path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_write_trace: model or path is NULL");
    if (!m->trace)
        return kc__fail(KC_STATUS_STATE, "model '%s' has no trace; call kc_model_trace_steps before kc_fit", m->name);
    return kc__trace_write(m->trace, path);
}

int64_t kc_model_trace_spans(const kc_model *m) { return m ? kc__trace_count(m->trace) : 0; }

kc_status kc_model_set_check_numerics(kc_model *m, int on) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_check_numerics: model is NULL");
    m->check_numerics = on != 0;
    return KC_STATUS_OK;
}

void kc__observe_free(kc_model *m) {
    kc__devtime_free(m);
    kc__trace_destroy(m->trace);
    m->trace = NULL;
}

double kc__trace_step_begin(kc_model *m) {
    if (!m->trace) return 0;
    int64_t step = m->opt.iterations + 1;
    m->trace_step = step;
    m->tracing = step >= m->trace_first && step <= m->trace_last;
    kc__trace_set_open(m->trace, m->tracing);
    return m->tracing ? kc__now() : 0;
}

void kc__trace_step_end(kc_model *m, double t0) {
    if (!m->tracing) return;
    if (t0 < 0) { /* closed without a span */
        m->tracing = false;
        kc__trace_set_open(m->trace, false);
        return;
    }
    kc__devtime_flush(m); /* the uploads on the copy stream; a failure shows at the next step */
    kc__trace_add(m->trace, "step", "step", t0, kc__now(), m->trace_step);
    m->tracing = false;
    kc__trace_set_open(m->trace, false);
}

/* ---------------------------------------------------------------- numerics */

/* Counts NaN and Inf among n device floats; *first the index of the first one. */
static kc_status count_nonfinite(kc_model *m, const float *dev, int64_t n, int64_t *nans, int64_t *infs,
                                 int64_t *first) {
    enum { CHUNK = 16384 };
    float host[CHUNK];
    *nans = *infs = 0;
    *first = -1;
    for (int64_t off = 0; off < n; off += CHUNK) {
        int64_t k = KC_MIN((int64_t)CHUNK, n - off);
        KC_TRY(m->be->to_host(m->be, host, dev + off, (size_t)k * sizeof(float)));
        for (int64_t i = 0; i < k; i++) {
            if (isfinite(host[i])) continue;
            if (*first < 0) *first = off + i;
            if (isnan(host[i])) (*nans)++;
            else (*infs)++;
        }
    }
    return KC_STATUS_OK;
}

static kc_status check_tensor(kc_model *m, const kc_layer *l, bool training, const char *pass, const char *tensor,
                              const float *dev, int64_t n) {
    int64_t nans, infs, first;
    KC_TRY(count_nonfinite(m, dev, n, &nans, &infs, &first));
    if (nans + infs == 0) return KC_STATUS_OK;
    char when[96];
    if (training) snprintf(when, sizeof when, "at training step %lld", (long long)(m->opt.iterations + 1));
    else snprintf(when, sizeof when, "in inference after training step %lld", (long long)m->opt.iterations);
    return kc__fail(KC_STATUS_NUMERIC,
                    "check-numerics: the %s of layer '%s' (%s) holds %lld NaN and %lld Inf of %lld values (the "
                    "first at index %lld) %s, in %s; the layers before it were finite: look at its weights, its "
                    "input range and the learning rate",
                    tensor, l->name, l->ops->class_name, (long long)nans, (long long)infs, (long long)n,
                    (long long)first, when, pass);
}

kc_status kc__numerics_forward(kc_model *m, int layer, int batch, bool training, const float *y) {
    const kc_layer *l = m->layers[layer];
    return check_tensor(m, l, training, "forward", "output", y, (int64_t)batch * kc__shape_size(&l->out_shape));
}

kc_status kc__numerics_backward(kc_model *m, int layer, int batch, const kc_bwd *a) {
    const kc_layer *l = m->layers[layer];
    for (int k = 0; k < l->n_in; k++) {
        if (!a->dx[k]) continue;
        char what[200];
        snprintf(what, sizeof what, "gradient of input %d ('%s')", k, m->layers[l->in[k]]->name);
        KC_TRY(check_tensor(m, l, true, "backward", what, a->dx[k], kc__plan_node_elems(m, l->in[k], batch)));
    }
    for (int k = 0; k < l->n_weights; k++) {
        const kc_weight *w = &l->w[k];
        if (!w->trainable || !w->grad) continue;
        char what[64];
        snprintf(what, sizeof what, "gradient of its %s", w->name);
        KC_TRY(check_tensor(m, l, true, "backward", what, w->grad, w->size));
    }
    return KC_STATUS_OK;
}
