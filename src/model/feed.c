/* feed.c — the input feed (see feed.h). */
#include <string.h>

#include "feed.h"

kc_status kc__feed_open(kc_model *m, int cap, bool targets, kc__feed *f) {
    memset(f, 0, sizeof *f);
    if (cap <= 0) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "input feed: batch capacity %d must be positive", cap);
    kc_backend *be = m->be;
    f->m = m;
    f->cap = cap;
    f->in_size = kc__shape_size(&m->layers[0]->out_shape);
    f->width = targets ? kc__model_target_width(m) : 0;
    size_t xb = (size_t)cap * (size_t)f->in_size * sizeof(float), tb = (size_t)cap * (size_t)f->width * sizeof(float);
    kc_status s = KC_STATUS_OK;
    for (int i = 0; i < KC_FEED_SLOTS && s == KC_STATUS_OK; i++) {
        s = be->alloc(be, xb, (void **)&f->dev_x[i]);
        if (s == KC_STATUS_OK && tb) s = be->alloc(be, tb, (void **)&f->dev_t[i]);
        if (s == KC_STATUS_OK) s = be->host_alloc(be, xb, (void **)&f->host_x[i]);
        if (s == KC_STATUS_OK && tb) s = be->host_alloc(be, tb, (void **)&f->host_t[i]);
    }
    if (s != KC_STATUS_OK) {
        kc__feed_close(f);
        return kc__wrap(s, "model '%s': the input feed for batches of %d: ", m->name, cap);
    }
    return KC_STATUS_OK;
}

void kc__feed_close(kc__feed *f) {
    if (!f->m) return;
    kc_backend *be = f->m->be;
    for (int i = 0; i < KC_FEED_SLOTS; i++) {
        be->feed_wait(be, i); /* no copy may still read or write the buffers */
        be->free(be, f->dev_x[i]);
        be->free(be, f->dev_t[i]);
        be->host_free(be, f->host_x[i]);
        be->host_free(be, f->host_t[i]);
    }
    f->m->batch_targets = NULL;
    memset(f, 0, sizeof *f);
}

static kc_status check_slot(const kc__feed *f, int slot, const char *what) {
    if (!f->m) return kc__fail(KC_STATUS_STATE, "input feed %s: the feed is not open", what);
    if (slot < 0 || slot >= KC_FEED_SLOTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "input feed %s: slot %d is not in [0, %d)", what, slot, KC_FEED_SLOTS);
    return KC_STATUS_OK;
}

kc_status kc__feed_put(kc__feed *f, const float *x, const int32_t *y, const float *t, int64_t t_size, int n, int *slot) {
    int k = f->next;
    KC_TRY(check_slot(f, k, "put"));
    if (n <= 0 || n > f->cap)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "input feed: a batch of %d examples does not fit slots of %d", n,
                        f->cap);
    if (f->width && !y && !t) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "input feed: this batch needs labels");
    if (f->width && t && t_size != f->width)
        return kc__fail(KC_STATUS_SHAPE, "input feed: labels of %lld values per example for targets of %d; the "
                        "labels were not checked against the model", (long long)t_size, f->width);
    kc_backend *be = f->m->be;
    /* the slot's previous upload must have read the host buffers before they change */
    KC_TRY(be->feed_wait(be, k));
    size_t xb = (size_t)n * (size_t)f->in_size * sizeof(float);
    memcpy(f->host_x[k], x, xb);
    if (f->width && t) memcpy(f->host_t[k], t, (size_t)n * (size_t)f->width * sizeof(float));
    else if (f->width) kc__labels_to_targets(f->m, y, n, f->host_t[k]);
    int mark = f->m->tracing ? kc__devtime_mark(f->m, KC_STREAM_COPY) : -1; /* a traced step: the copy stream's span */
    KC_TRY(be->feed_upload(be, k, f->dev_x[k], f->host_x[k], xb));
    if (f->width)
        KC_TRY(be->feed_upload(be, k, f->dev_t[k], f->host_t[k], (size_t)n * (size_t)f->width * sizeof(float)));
    if (mark >= 0) kc__devtime_span(f->m, mark, KC_STREAM_COPY, NULL, "upload batch", "copy");
    f->n[k] = n;
    f->next = (k + 1) % KC_FEED_SLOTS;
    *slot = k;
    return KC_STATUS_OK;
}

kc_status kc__feed_acquire(kc__feed *f, int slot) {
    KC_TRY(check_slot(f, slot, "acquire"));
    return f->m->be->feed_acquire(f->m->be, slot);
}

kc_status kc__feed_select(kc__feed *f, int slot, int off, int n) {
    KC_TRY(check_slot(f, slot, "select"));
    if (off < 0 || n <= 0 || off + n > f->n[slot] || n > f->m->plan.batch)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "input feed: rows [%d, %d) are not inside the batch of %d or do not fit the plan of %d", off,
                        off + n, f->n[slot], f->m->plan.batch);
    kc_model *m = f->m;
    KC_TRY(m->be->copy(m->be, kc__model_input_buffer(m), f->dev_x[slot] + (int64_t)off * f->in_size,
                       (size_t)n * (size_t)f->in_size * sizeof(float)));
    m->batch_targets = f->width ? f->dev_t[slot] + (int64_t)off * f->width : NULL;
    return KC_STATUS_OK;
}

kc_status kc__feed_release(kc__feed *f, int slot) {
    KC_TRY(check_slot(f, slot, "release"));
    return f->m->be->feed_release(f->m->be, slot);
}
