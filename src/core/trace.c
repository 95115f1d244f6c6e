/* trace.c — the span recorder behind kc_model_trace_steps (see trace.h). Spans go into one
 * growing array under a mutex (a profiled step adds a few dozen); times are kept as
 * integer nanoseconds from the recorder's creation so that a child printed in
 * microseconds never seems to end after its parent. */
#include "trace.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KC_TRACE_MAX_EVENTS (1 << 22)
#define KC_TRACE_MAX_THREADS 64
#define KC_TRACE_TRACK_TID 0x40000000 /* tids of named tracks (device streams); Linux's are below */

typedef struct span {
    const char *name, *cat;
    int64_t t0, t1; /* ns since the recorder's origin */
    int64_t step;
    int tid;
} span;

struct kc__trace {
    pthread_mutex_t mu;
    double origin;
    int open;
    span *ev;
    int64_t n, cap;
    bool dropped;
    int n_threads;
    int tids[KC_TRACE_MAX_THREADS];
    const char *thread_names[KC_TRACE_MAX_THREADS];
};

static int this_tid(void) { return (int)syscall(SYS_gettid); }

kc_status kc__trace_create(kc__trace **out) {
    kc__trace *t = kc__calloc(1, sizeof *t, "the trace recorder");
    if (!t) return KC_STATUS_OUT_OF_MEMORY;
    pthread_mutex_init(&t->mu, NULL);
    t->origin = kc__now();
    *out = t;
    return KC_STATUS_OK;
}

void kc__trace_destroy(kc__trace *t) {
    if (!t) return;
    pthread_mutex_destroy(&t->mu);
    free(t->ev);
    free(t);
}

void kc__trace_set_open(kc__trace *t, bool open) { __atomic_store_n(&t->open, open ? 1 : 0, __ATOMIC_RELEASE); }
bool kc__trace_is_open(const kc__trace *t) { return t && __atomic_load_n(&t->open, __ATOMIC_ACQUIRE); }

void kc__trace_name_thread(kc__trace *t, const char *name) {
    int tid = this_tid();
    pthread_mutex_lock(&t->mu);
    int i = 0;
    while (i < t->n_threads && t->tids[i] != tid) i++;
    if (i < KC_TRACE_MAX_THREADS) {
        t->tids[i] = tid;
        t->thread_names[i] = name;
        if (i == t->n_threads) t->n_threads++;
    }
    pthread_mutex_unlock(&t->mu);
}

static void add_span(kc__trace *t, const char *track, const char *name, const char *cat, double t0, double t1,
                     int64_t step) {
    span e = {.name = name, .cat = cat, .t0 = (int64_t)((t0 - t->origin) * 1e9),
              .t1 = (int64_t)((t1 - t->origin) * 1e9), .step = step, .tid = track ? 0 : this_tid()};
    pthread_mutex_lock(&t->mu);
    if (track) { /* a named track: a made-up tid above any thread's, named like a thread */
        int i = 0;
        while (i < t->n_threads && !(t->tids[i] >= KC_TRACE_TRACK_TID && strcmp(t->thread_names[i], track) == 0)) i++;
        if (i == t->n_threads && i < KC_TRACE_MAX_THREADS) {
            t->tids[i] = KC_TRACE_TRACK_TID + i;
            t->thread_names[i] = track;
            t->n_threads++;
        }
        e.tid = i < KC_TRACE_MAX_THREADS ? t->tids[i] : KC_TRACE_TRACK_TID - 1;
    }
    if (t->n == t->cap && t->cap < KC_TRACE_MAX_EVENTS) {
        int64_t cap = t->cap ? t->cap * 2 : 4096;
        span *p = realloc(t->ev, (size_t)cap * sizeof *p);
        if (p) {
            t->ev = p;
            t->cap = cap;
        }
    }
    if (t->n < t->cap) t->ev[t->n++] = e;
    else t->dropped = true;
    pthread_mutex_unlock(&t->mu);
}

void kc__trace_add(kc__trace *t, const char *name, const char *cat, double t0, double t1, int64_t step) {
    add_span(t, NULL, name, cat, t0, t1, step);
}

void kc__trace_add_track(kc__trace *t, const char *track, const char *name, const char *cat, double t0, double t1,
                         int64_t step) {
    add_span(t, track, name, cat, t0, t1, step);
}

int64_t kc__trace_count(const kc__trace *t) { return t ? t->n : 0; }

static void put_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* nanoseconds as microseconds with three decimals, exactly */
static void put_us(FILE *f, int64_t ns) {
    if (ns < 0) {
        fputc('-', f);
        ns = -ns;
    }
    fprintf(f, "%lld.%03lld", (long long)(ns / 1000), (long long)(ns % 1000));
}

kc_status kc__trace_write(const kc__trace *t, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return kc__fail(KC_STATUS_IO, "cannot write the trace to '%s' (%s)", path, strerror(errno));
    int pid = (int)getpid();
    fputs("{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n", f);
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": 0, \"args\": {\"name\": \"kerac\"}}", pid);
    for (int i = 0; i < t->n_threads; i++) {
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": %d, \"args\": {\"name\": ", pid,
                t->tids[i]);
        put_json_string(f, t->thread_names[i]);
        fputs("}}", f);
    }
    for (int64_t i = 0; i < t->n; i++) {
        const span *e = &t->ev[i];
        fputs(",\n{\"name\": ", f);
        put_json_string(f, e->name);
        fputs(", \"cat\": ", f);
        put_json_string(f, e->cat);
        fputs(", \"ph\": \"X\", \"ts\": ", f);
        put_us(f, e->t0);
        fputs(", \"dur\": ", f);
        put_us(f, e->t1 - e->t0);
        fprintf(f, ", \"pid\": %d, \"tid\": %d, \"args\": {\"step\": %lld}}", pid, e->tid, (long long)e->step);
    }
    fputs("\n]}\n", f);
    bool ok = fflush(f) == 0 && !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        int err = errno;
        remove(tmp);
        return kc__fail(KC_STATUS_IO, "cannot write the trace to '%s' (%s)", path, strerror(err));
    }
    if (t->dropped)
        kc__log_always(KC_LOG_WARNING, "the trace holds only its first %d spans; profile fewer steps",
                       KC_TRACE_MAX_EVENTS);
    return KC_STATUS_OK;
}
