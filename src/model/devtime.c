/* devtime.c — layer times from the device's own clock (see model.h). On a backend with
 * timing marks (the CUDA backend: events on its streams) a profiled or traced pass records
 * a mark before and after each layer, the loss and the optimizer update without waiting,
 * and reads them all at the pass's end: one synchronisation per pass instead of one per
 * layer, and times that are the GPU's work, not the host's launches. Marks on the copy
 * stream (the feed's uploads) and the all-reduce stream go to tracks of their own. A
 * reference mark is recorded right after a synchronisation, at a known host time, so that
 * device spans sit on the host's timeline. */
#include <stdlib.h>

#include "model.h"

typedef struct kc__devspan {
    int a, b;          /* marks */
    double *acc;       /* profiling sum, or NULL */
    const char *name, *cat;
    int stream;
    int64_t step;
    bool traced;       /* recorded inside a traced step */
} kc__devspan;

static const char *const k_tracks[] = {"GPU compute stream", "GPU copy stream", "GPU all-reduce stream"};

int kc__devtime_mark(kc_model *m, int stream) {
    kc_backend *be = m->be;
    if (!be->timing_mark) return -1;
    if (!m->dev_timing) {
        if (be->sync(be) != KC_STATUS_OK || be->timing_begin(be) != KC_STATUS_OK) return -1;
        m->dev_ref = kc__now();
        m->dev_timing = true;
    }
    return be->timing_mark(be, stream);
}

void kc__devtime_span(kc_model *m, int a, int stream, double *acc, const char *name, const char *cat) {
    int b = kc__devtime_mark(m, stream);
    if (a < 0 || b < 0) return; /* the marks are full: this span is not timed */
    if (m->n_dev_spans == m->cap_dev_spans) {
        int cap = m->cap_dev_spans ? m->cap_dev_spans * 2 : 256;
        kc__devspan *p = realloc(m->dev_spans, (size_t)cap * sizeof *p);
        double *sec = p ? realloc(m->dev_seconds, (size_t)cap * 2 * sizeof *sec) : NULL;
        if (p) m->dev_spans = p;
        if (!sec) return; /* out of memory: the span is left out of the profile */
        m->dev_seconds = sec;
        m->cap_dev_spans = cap;
    }
    m->dev_spans[m->n_dev_spans++] = (kc__devspan){.a = a, .b = b, .acc = acc, .name = name, .cat = cat,
                                                   .stream = stream, .step = m->trace_step, .traced = m->tracing};
}

kc_status kc__devtime_flush(kc_model *m) {
    if (!m->dev_timing) return KC_STATUS_OK;
    m->dev_timing = false;
    int n = 0;
    for (int i = 0; i < m->n_dev_spans; i++) n = KC_MAX(n, KC_MAX(m->dev_spans[i].a, m->dev_spans[i].b) + 1);
    n = KC_MIN(n, 2 * m->cap_dev_spans); /* marks left without a span beyond that are not read */
    if (n == 0) return KC_STATUS_OK;
    KC_TRY(m->be->timing_read(m->be, m->dev_seconds, n));
    for (int i = 0; i < m->n_dev_spans; i++) {
        const kc__devspan *d = &m->dev_spans[i];
        if (d->a >= n || d->b >= n) continue;
        double t0 = m->dev_ref + m->dev_seconds[d->a], t1 = m->dev_ref + m->dev_seconds[d->b];
        if (d->acc) *d->acc += t1 - t0;
        if (d->traced && m->trace && d->stream >= 0 && d->stream < 3)
            kc__trace_add_track(m->trace, k_tracks[d->stream], d->name, d->cat, t0, t1, d->step);
    }
    m->n_dev_spans = 0;
    return KC_STATUS_OK;
}

void kc__devtime_free(kc_model *m) {
    free(m->dev_spans);
    free(m->dev_seconds);
    m->dev_spans = NULL;
    m->dev_seconds = NULL;
    m->n_dev_spans = m->cap_dev_spans = 0;
}
