/* tensorboard.c — Keras's TensorBoard callback: event files that TensorBoard reads, in
 * Keras's layout (LOG_DIR/train and LOG_DIR/validation, tags epoch_loss, epoch_accuracy,
 * epoch_learning_rate, batch_loss with update_freq, weight histograms with
 * histogram_freq), plus kerac's own scalars (images/s, seconds, input wait, GPU
 * utilisation and memory).
 *
 * An event file is a sequence of TFRecords: the length (uint64, little-endian), its
 * masked CRC-32C, the serialized Event message, the message's masked CRC-32C. The
 * messages are encoded by protobuf-c from our own minimal schema (tb_event.proto: the
 * fields TensorBoard reads, with TensorFlow's field numbers). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "../model/model.h"
#include "logs.h"
#include "tb_event.pb-c.h"

/* ---------------------------------------------------------------- CRC-32C */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1; /* reflected Castagnoli */
        crc_table[i] = c;
    }
}

uint32_t kc__crc32c(const void *data, size_t n) {
    if (!crc_table[1]) crc_init(); /* idempotent: a race writes the same values */
    const uint8_t *p = data;
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) c = crc_table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

uint32_t kc__crc32c_masked(const void *data, size_t n) {
    uint32_t c = kc__crc32c(data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

/* ---------------------------------------------------------------- event files */

typedef struct tb_file {
    FILE *f;
    char path[1200];
} tb_file;

typedef struct tensorboard {
    kc_callback cb;
    kc_tensorboard_opts o;
    char dir[1024];
    tb_file train, val;
    int64_t global_step;
    bool warned;
} tensorboard;

static double wall_now(void) {
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void tb_warn(tensorboard *t, const tb_file *f) {
    if (t && t->warned) return;
    if (t) t->warned = true;
    kc__log_always(KC_LOG_WARNING, "TensorBoard: cannot write '%s' (%s); the event log stops here", f->path,
                   strerror(errno));
}

/* One TFRecord holding the event; false on a write error. */
static bool tb_write(tb_file *f, const KcEvent *ev) {
    size_t n = kc_event__get_packed_size(ev);
    uint8_t head[12], tail[4];
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) return false;
    kc_event__pack(ev, buf);
    for (int i = 0; i < 8; i++) head[i] = (uint8_t)((uint64_t)n >> (8 * i));
    put_u32(head + 8, kc__crc32c_masked(head, 8));
    put_u32(tail, kc__crc32c_masked(buf, n));
    bool ok = fwrite(head, 1, 12, f->f) == 12 && fwrite(buf, 1, n, f->f) == n && fwrite(tail, 1, 4, f->f) == 4;
    free(buf);
    return ok;
}

/* DIR/<sub>/events.out.tfevents.<time>.<host>.<pid>.<n>.v2, begun with the version event. */
static kc_status tb_open(const char *dir, const char *sub, tb_file *f) {
    static int counter;
    char d[1100], host[256] = "localhost";
    snprintf(d, sizeof d, "%s/%s", dir, sub);
    if (mkdir(d, 0777) != 0 && errno != EEXIST)
        return kc__fail(KC_STATUS_IO, "TensorBoard: cannot make the folder '%s' (%s)", d, strerror(errno));
    gethostname(host, sizeof host - 1);
    double now = wall_now();
    snprintf(f->path, sizeof f->path, "%s/events.out.tfevents.%lld.%s.%d.%d.v2", d, (long long)now, host,
             (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
    f->f = fopen(f->path, "wb");
    if (!f->f)
        return kc__fail(KC_STATUS_IO, "TensorBoard: cannot create '%s' (%s); check that the folder is writable",
                        f->path, strerror(errno));
    KcEvent ev = KC_EVENT__INIT;
    ev.wall_time = now;
    ev.what_case = KC_EVENT__WHAT_FILE_VERSION;
    ev.file_version = "brain.Event:2";
    if (!tb_write(f, &ev) || fflush(f->f) != 0) {
        tb_warn(NULL, f);
        return kc__fail(KC_STATUS_IO, "TensorBoard: cannot write '%s'", f->path);
    }
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- summaries */

/* Scalars collected for one event (one step of one writer). */
typedef struct tb_scalars {
    int n;
    KcSummaryValue v[8 + 2 * KC_MAX_METRICS];
    KcSummaryValue *pv[8 + 2 * KC_MAX_METRICS];
    char tags[8 + 2 * KC_MAX_METRICS][64];
} tb_scalars;

static void add_scalar(tb_scalars *s, const char *prefix, const char *name, double value) {
    if (s->n >= (int)(sizeof s->v / sizeof s->v[0])) return;
    KcSummaryValue *v = &s->v[s->n];
    kc_summary_value__init(v);
    snprintf(s->tags[s->n], sizeof s->tags[0], "%s%s", prefix, name);
    v->tag = s->tags[s->n];
    v->value_case = KC_SUMMARY_VALUE__VALUE_SIMPLE_VALUE;
    v->simple_value = (float)value;
    s->pv[s->n] = v;
    s->n++;
}

static void write_values(tensorboard *t, tb_file *f, int64_t step, KcSummaryValue **values, size_t n) {
    if (!f->f || n == 0) return;
    KcSummary sum = KC_SUMMARY__INIT;
    sum.n_value = n;
    sum.value = values;
    KcEvent ev = KC_EVENT__INIT;
    ev.wall_time = wall_now();
    ev.step = step;
    ev.what_case = KC_EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    if (!tb_write(f, &ev) || fflush(f->f) != 0) tb_warn(t, f);
}

static void write_scalars(tensorboard *t, tb_file *f, int64_t step, tb_scalars *s) {
    write_values(t, f, step, s->pv, (size_t)s->n);
}

/* A histogram of one weight in 30 equal buckets over [min, max], as TensorBoard draws them. */
static void write_histogram(tensorboard *t, int64_t step, const char *tag, const float *w, int64_t n) {
    enum { NB = 30 };
    double lim[NB], cnt[NB] = {0}, lo = INFINITY, hi = -INFINITY, sum = 0, sq = 0;
    for (int64_t i = 0; i < n; i++) {
        double v = w[i];
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        sq += v * v;
    }
    if (n == 0 || !isfinite(lo) || !isfinite(hi)) return;
    double width = hi > lo ? (hi - lo) / NB : 1.0;
    for (int b = 0; b < NB; b++) lim[b] = b == NB - 1 ? hi : lo + width * (b + 1);
    for (int64_t i = 0; i < n; i++) {
        int b = hi > lo ? (int)((w[i] - lo) / width) : 0;
        cnt[b < 0 ? 0 : b >= NB ? NB - 1 : b] += 1;
    }
    KcHistogram h = KC_HISTOGRAM__INIT;
    h.min = lo, h.max = hi, h.num = (double)n, h.sum = sum, h.sum_squares = sq;
    h.n_bucket_limit = NB, h.bucket_limit = lim, h.n_bucket = NB, h.bucket = cnt;
    KcSummaryValue v = KC_SUMMARY_VALUE__INIT, *pv = &v;
    v.tag = (char *)tag;
    v.value_case = KC_SUMMARY_VALUE__VALUE_HISTO;
    v.histo = &h;
    write_values(t, &t->train, step, &pv, 1);
}

static void write_histograms(tensorboard *t, kc_model *m, int64_t step) {
    for (int i = 0, n = kc_model_num_weights(m); i < n; i++) {
        kc_weight_info wi;
        if (kc_model_weight_info(m, i, &wi) != KC_STATUS_OK) continue;
        float *w = malloc((size_t)wi.size * sizeof(float));
        if (w && kc_model_get_weight(m, i, w, wi.size) == KC_STATUS_OK) {
            char tag[200];
            snprintf(tag, sizeof tag, "%s/%s/histogram", wi.layer, wi.name);
            write_histogram(t, step, tag, w, wi.size);
        }
        free(w);
    }
}

/* ---------------------------------------------------------------- the callback */

static kc_callback_action tb_batch_end(kc_model *m, const kc_batch_logs *b, void *user) {
    tensorboard *t = user;
    t->global_step++;
    if (t->o.update_freq <= 0 || t->global_step % t->o.update_freq != 0) return KC_CONTINUE;
    tb_scalars s = {0};
    add_scalar(&s, "batch_", "loss", b->loss);
    for (int i = 0; i < m->n_metrics; i++) add_scalar(&s, "batch_", m->metrics[i].name, b->metrics[i]);
    if (b->seconds > 0) add_scalar(&s, "batch_", "images_per_second", (double)b->samples / b->seconds);
    if (b->has_gpu) {
        add_scalar(&s, "batch_", "gpu_utilization", b->gpu.utilization);
        add_scalar(&s, "batch_", "gpu_memory_used", b->gpu.memory_used);
    }
    write_scalars(t, &t->train, t->global_step, &s);
    return KC_CONTINUE;
}

static kc_callback_action tb_epoch_end(kc_model *m, const kc_epoch_logs *e, void *user) {
    tensorboard *t = user;
    tb_scalars s = {0};
    add_scalar(&s, "epoch_", "loss", e->loss);
    for (int i = 0; i < m->n_metrics; i++) add_scalar(&s, "epoch_", m->metrics[i].name, e->metrics[i]);
    add_scalar(&s, "epoch_", "learning_rate", e->lr);
    add_scalar(&s, "epoch_", "images_per_second", e->images_per_second);
    add_scalar(&s, "epoch_", "seconds", e->seconds);
    add_scalar(&s, "epoch_", "input_wait_seconds", e->input_wait_seconds);
    if (e->has_gpu) {
        add_scalar(&s, "epoch_", "gpu_utilization", e->gpu.utilization);
        add_scalar(&s, "epoch_", "gpu_memory_used", e->gpu.memory_used);
    }
    write_scalars(t, &t->train, e->epoch, &s);
    if (t->o.histogram_freq > 0 && e->epoch % t->o.histogram_freq == 0) write_histograms(t, m, e->epoch);
    if (e->has_val) {
        if (!t->val.f && tb_open(t->dir, "validation", &t->val) != KC_STATUS_OK) {
            kc__log_always(KC_LOG_WARNING, "%s", kc_last_error());
            return KC_CONTINUE;
        }
        tb_scalars v = {0};
        add_scalar(&v, "epoch_", "loss", e->val_loss);
        for (int i = 0; i < m->n_metrics; i++) add_scalar(&v, "epoch_", m->metrics[i].name, e->val_metrics[i]);
        write_scalars(t, &t->val, e->epoch, &v);
    }
    return KC_CONTINUE;
}

static void tb_destroy(kc_callback *cb) {
    tensorboard *t = (tensorboard *)cb;
    if (t->train.f) fclose(t->train.f);
    if (t->val.f) fclose(t->val.f);
    free(t);
}

kc_status kc_tensorboard(const kc_tensorboard_opts *opts, kc_callback **out) {
    if (!opts || !opts->log_dir || !*opts->log_dir || !out)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "TensorBoard: log_dir is not set");
    if (opts->update_freq < 0 || opts->histogram_freq < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "TensorBoard: update_freq (%lld) and histogram_freq (%d) must "
                        "not be negative", (long long)opts->update_freq, opts->histogram_freq);
    if (mkdir(opts->log_dir, 0777) != 0 && errno != EEXIST)
        return kc__fail(KC_STATUS_IO, "TensorBoard: cannot make the log folder '%s' (%s)", opts->log_dir,
                        strerror(errno));
    tensorboard *t = kc__calloc(1, sizeof *t, "TensorBoard");
    if (!t) return KC_STATUS_OUT_OF_MEMORY;
    t->o = *opts;
    snprintf(t->dir, sizeof t->dir, "%s", opts->log_dir);
    t->o.log_dir = t->dir;
    kc_status s = tb_open(t->dir, "train", &t->train);
    if (s != KC_STATUS_OK) {
        free(t);
        return s;
    }
    t->cb = (kc_callback){.name = "TensorBoard", .user = t, .on_batch_end = tb_batch_end,
                          .on_epoch_end = tb_epoch_end, .destroy = tb_destroy};
    *out = &t->cb;
    return KC_STATUS_OK;
}
