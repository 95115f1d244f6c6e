/* trace.h — a recorder of timed spans for Chrome's trace-event format (Perfetto,
 * chrome://tracing): complete events ("ph": "X") per thread, one track per thread and one
 * per named device stream. Any
 * thread may add; names and categories must outlive the recorder (layer names, string
 * literals). */
#ifndef KC_TRACE_H
#define KC_TRACE_H

#include "core.h"

typedef struct kc__trace kc__trace;

kc_status kc__trace_create(kc__trace **out);
void kc__trace_destroy(kc__trace *t);
/* Spans are kept only while the recorder is open (the profiled steps). */
void kc__trace_set_open(kc__trace *t, bool open);
bool kc__trace_is_open(const kc__trace *t);
/* Name the calling thread's track ("training loop", "loader"). */
void kc__trace_name_thread(kc__trace *t, const char *name);
/* One span [t0, t1] (kc__now seconds) on the calling thread's track; step goes to args. */
void kc__trace_add(kc__trace *t, const char *name, const char *cat, double t0, double t1, int64_t step);
/* One span on a named track that is not a thread (a device stream: "GPU compute stream");
 * track must outlive the recorder. */
void kc__trace_add_track(kc__trace *t, const char *track, const char *name, const char *cat, double t0, double t1,
                         int64_t step);
int64_t kc__trace_count(const kc__trace *t);
/* {"traceEvents": [...], "displayTimeUnit": "ms"}: written to path.tmp, then renamed. */
kc_status kc__trace_write(const kc__trace *t, const char *path);

#endif /* KC_TRACE_H */
