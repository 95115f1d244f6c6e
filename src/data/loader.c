/* loader.c — the background batch loader (see loader.h).
 *
 * One producer thread walks `order` batch by batch and gathers each batch into a ring of
 * slots; the consumer (the training loop) takes them in order with kc__loader_next. The
 * ring has prefetch + 1 slots: up to `prefetch` batches ready ahead while the consumer
 * still holds the one it is training on. All slots are allocated once in create; nothing
 * is allocated per batch.
 *
 * Counters (under mu): produced = batches filled, consumed = batches handed out, and the
 * consumer holds batch consumed - 1 until its next call. Slots in use = produced -
 * released, where released = consumed - holding; the producer waits while all are in use.
 *
 * prefetch 0 starts no thread: kc__loader_next gathers each batch itself into the one slot
 * (the consumer's thread does the work, as PyTorch's DataLoader with num_workers=0). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/trace.h"
#include "dataset.h"
#include "loader.h"

struct kc_loader {
    const kc_dataset *d;
    int64_t *order;          /* (count) example indices relative to d */
    int64_t count;
    int batch_size;
    int nslots;              /* prefetch + 1 */
    int64_t nbatches;
    int64_t example_size;    /* floats per example */
    float *x;                /* (nslots, batch_size, example_size) */
    int32_t *y;              /* (nslots, batch_size) */
    float *t;                /* (nslots, batch_size, t_size) when the dataset has label tensors, else NULL */
    int64_t t_size;
    kc_batch *slots;         /* (nslots) */

    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t can_fill; /* producer waits: a slot is free, or stop */
    pthread_cond_t can_take; /* consumer waits: a batch is ready, or an error */
    int64_t produced;
    int64_t consumed;
    bool holding;
    bool stop;
    kc_status error;         /* from the producer; its message below */
    char error_msg[KC_ERROR_MAX];

    double wait_seconds;     /* consumer only */
    kc__trace *trace;        /* kc__loader_set_trace; read atomically by the producer */
};

/* Gathers batch b into slot k and describes it there; the trace gets a "load batch" span
 * on the calling thread, which it names "loader" unless *named (then or already). */
static kc_status fill(kc_loader *l, int64_t b, int k, bool *named) {
    int64_t first = b * l->batch_size;
    int n = (int)KC_MIN((int64_t)l->batch_size, l->count - first);
    float *x = l->x + (size_t)k * (size_t)l->batch_size * (size_t)l->example_size; /* (n, example) */
    int32_t *y = l->y + (size_t)k * (size_t)l->batch_size;                         /* (n) */
    float *t = l->t ? l->t + (size_t)k * (size_t)l->batch_size * (size_t)l->t_size : NULL; /* (n, t_size) */
    kc__trace *tr = __atomic_load_n(&l->trace, __ATOMIC_ACQUIRE);
    double t0 = kc__trace_is_open(tr) ? kc__now() : 0;
    kc_status s = kc__dataset_gather(l->d, l->order + first, 0, n, x, y);
    if (s == KC_STATUS_OK && t) s = kc__dataset_gather_targets(l->d, l->order + first, 0, n, t);
    if (t0 > 0) {
        if (!*named) kc__trace_name_thread(tr, "loader");
        *named = true;
        kc__trace_add(tr, "load batch", "data", t0, kc__now(), b);
    }
    if (s == KC_STATUS_OK) l->slots[k] = (kc_batch){.x = x, .y = y, .t = t, .t_size = l->t_size, .n = n, .index = b};
    return s;
}

static void *producer(void *arg) {
    kc_loader *l = arg;
    bool named = false; /* this thread's trace track */
    for (int64_t b = 0; b < l->nbatches; b++) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && l->produced - (l->consumed - (l->holding ? 1 : 0)) >= l->nslots)
            pthread_cond_wait(&l->can_fill, &l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) return NULL;

        /* slot b % nslots is free: the consumer has released every batch before b - nslots + 1 */
        int k = (int)(b % l->nslots);
        kc_status s = fill(l, b, k, &named);

        pthread_mutex_lock(&l->mu);
        if (s != KC_STATUS_OK) {
            l->error = s;
            snprintf(l->error_msg, sizeof l->error_msg, "%s", kc_last_error());
            pthread_cond_broadcast(&l->can_take);
            pthread_mutex_unlock(&l->mu);
            return NULL;
        }
        l->produced++;
        pthread_cond_broadcast(&l->can_take);
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

kc_status kc__loader_create(const kc_dataset *d, const int64_t *order, int64_t count, int batch_size,
                            int prefetch, kc_loader **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: out is NULL");
    *out = NULL;
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: the dataset is NULL");
    if (batch_size < 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: batch_size = %d; it must be >= 1", batch_size);
    if (prefetch < 0 || prefetch > 1024)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: prefetch = %d; it must be 0..1024", prefetch);
    const int64_t size = kc_dataset_size(d);
    if (count < 0 || (!order && count > size))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: count = %lld examples of dataset %s with %lld",
                        (long long)count, d->st->source, (long long)size);
    for (int64_t i = 0; order && i < count; i++)
        if (order[i] < 0 || order[i] >= size)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: order[%lld] = %lld is outside dataset %s "
                            "of %lld examples", (long long)i, (long long)order[i], d->st->source, (long long)size);

    const int64_t e = kc__dataset_example_size(d);
    const int nslots = prefetch + 1;
    if ((uint64_t)e > (SIZE_MAX / 4) / sizeof(float) / (uint64_t)batch_size / (uint64_t)nslots)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "loader: %d batches of %d examples of %lld values do not "
                        "fit in memory; lower batch_size or prefetch", nslots, batch_size, (long long)e);
    kc_loader *l = kc__calloc(1, sizeof *l, "the batch loader");
    if (!l) return KC_STATUS_OUT_OF_MEMORY;
    l->d = d;
    l->count = count;
    l->batch_size = batch_size;
    l->nslots = nslots;
    l->nbatches = (count + batch_size - 1) / batch_size;
    l->example_size = e;
    l->order = kc__calloc((size_t)KC_MAX(count, 1), sizeof(int64_t), "the loader's example order");
    l->x = l->order ? kc__malloc_aligned((size_t)nslots * (size_t)batch_size * (size_t)e * sizeof(float),
                                         "the loader's batches") : NULL;
    l->y = l->x ? kc__calloc((size_t)nslots * (size_t)batch_size, sizeof(int32_t), "the loader's labels") : NULL;
    l->t_size = d->st->t ? d->st->t_size : 0;
    l->t = l->y && l->t_size ? kc__malloc_aligned((size_t)nslots * (size_t)batch_size * (size_t)l->t_size * sizeof(float),
                                                  "the loader's label tensors") : NULL;
    l->slots = l->y && (l->t || !l->t_size) ? kc__calloc((size_t)nslots, sizeof(kc_batch), "the loader's slots") : NULL;
    if (!l->slots) {
        free(l->order);
        free(l->x);
        free(l->y);
        free(l->t);
        free(l);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < count; i++) l->order[i] = order ? order[i] : i;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->can_fill, NULL);
    pthread_cond_init(&l->can_take, NULL);
    if (prefetch == 0) { /* no thread: kc__loader_next gathers each batch itself */
        *out = l;
        return KC_STATUS_OK;
    }
    int rc = pthread_create(&l->thread, NULL, producer, l);
    if (rc != 0) {
        kc__loader_destroy(l);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "loader: cannot start the loader thread: %s", strerror(rc));
    }
    l->thread_started = true;
    *out = l;
    return KC_STATUS_OK;
}

kc_status kc__loader_next(kc_loader *l, const kc_batch **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: out is NULL");
    *out = NULL;
    if (!l) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loader: the loader is NULL");
    if (!l->thread_started) { /* prefetch 0: gather here, into the one slot; the time counts as waiting */
        l->holding = false;
        if (l->error != KC_STATUS_OK) return kc__fail(l->error, "%s", l->error_msg);
        if (l->consumed == l->nbatches) return KC_STATUS_OK;
        double t0 = kc__now();
        bool named = true;
        kc_status s = fill(l, l->consumed, 0, &named);
        l->wait_seconds += kc__now() - t0;
        if (s != KC_STATUS_OK) { /* kept: a later call says it again */
            l->error = s;
            snprintf(l->error_msg, sizeof l->error_msg, "%s", kc_last_error());
            return s;
        }
        *out = &l->slots[0];
        l->consumed++;
        l->holding = true;
        return KC_STATUS_OK;
    }
    pthread_mutex_lock(&l->mu);
    if (l->holding) { /* give the previous batch's slot back to the producer */
        l->holding = false;
        pthread_cond_signal(&l->can_fill);
    }
    if (l->consumed == l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return KC_STATUS_OK;
    }
    if (l->produced == l->consumed && l->error == KC_STATUS_OK) {
        double t0 = kc__now();
        while (l->produced == l->consumed && l->error == KC_STATUS_OK) pthread_cond_wait(&l->can_take, &l->mu);
        l->wait_seconds += kc__now() - t0;
    }
    if (l->produced > l->consumed) { /* batches made before an error still come first */
        *out = &l->slots[l->consumed % l->nslots];
        l->consumed++;
        l->holding = true;
        pthread_mutex_unlock(&l->mu);
        return KC_STATUS_OK;
    }
    kc_status s = l->error;
    char msg[KC_ERROR_MAX];
    memcpy(msg, l->error_msg, sizeof msg);
    pthread_mutex_unlock(&l->mu);
    return kc__fail(s, "%s", msg);
}

void kc__loader_set_trace(kc_loader *l, kc__trace *t) {
    if (l) __atomic_store_n(&l->trace, t, __ATOMIC_RELEASE);
}

double kc__loader_wait_seconds(const kc_loader *l) { return l ? l->wait_seconds : 0.0; }

void kc__loader_destroy(kc_loader *l) {
    if (!l) return;
    if (l->thread_started) {
        pthread_mutex_lock(&l->mu);
        l->stop = true;
        pthread_cond_broadcast(&l->can_fill);
        pthread_mutex_unlock(&l->mu);
        pthread_join(l->thread, NULL);
    }
    pthread_cond_destroy(&l->can_take);
    pthread_cond_destroy(&l->can_fill);
    pthread_mutex_destroy(&l->mu);
    free(l->slots);
    free(l->x);
    free(l->y);
    free(l->t);
    free(l->order);
    free(l);
}
