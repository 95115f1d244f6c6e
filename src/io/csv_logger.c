/* csv_logger.c — Keras's CSVLogger as a kc_callback: one row per epoch, columns "epoch"
 * (0-based, as Keras writes it) then the history keys sorted by name (loss, the metrics,
 * val_loss, val_<metric>), values in Python's shortest round-trip form, "NA" where an
 * epoch has no value for a key. With append, rows go after an existing file's and the
 * header is written only when the file is empty. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"
#include "logs.h"

typedef struct csv_logger {
    kc_callback cb;
    FILE *f;
    char path[1024];
    bool header_done, warned;
    int n_keys;
    char keys[2 + 2 * KC_MAX_METRICS][56];
} csv_logger;

void kc__fmt_shortest(char *buf, size_t n, double v) {
    if (!buf || n == 0) return;
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v > 0 ? "inf" : "-inf");
        return;
    }
    for (int p = 15; p <= 17; p++) { /* the fewest digits that read back as the same double */
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v) return;
    }
}

static int cmp_key(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static void csv_write_error(csv_logger *c) {
    if (c->warned) return;
    c->warned = true;
    kc__log_always(KC_LOG_WARNING, "CSVLogger: cannot write '%s' (%s); the CSV log stops here", c->path,
                   strerror(errno));
}

static kc_callback_action csv_epoch_end(kc_model *m, const kc_epoch_logs *e, void *user) {
    csv_logger *c = user;
    if (!c->header_done) { /* the keys of the first epoch, as Keras takes them */
        c->n_keys = 0;
        snprintf(c->keys[c->n_keys++], sizeof c->keys[0], "loss");
        for (int i = 0; i < m->n_metrics; i++) snprintf(c->keys[c->n_keys++], sizeof c->keys[0], "%s", m->metrics[i].name);
        if (e->has_val) {
            int n = c->n_keys;
            for (int i = 0; i < n; i++) snprintf(c->keys[c->n_keys++], sizeof c->keys[0], "val_%s", c->keys[i]);
        }
        qsort(c->keys, (size_t)c->n_keys, sizeof c->keys[0], cmp_key);
        if (ftell(c->f) == 0) {
            fputs("epoch", c->f);
            for (int i = 0; i < c->n_keys; i++) fprintf(c->f, ",%s", c->keys[i]);
            fputs("\r\n", c->f); /* Python's csv module ends rows with \r\n */
        }
        c->header_done = true;
    }
    fprintf(c->f, "%d", e->epoch);
    for (int i = 0; i < c->n_keys; i++) {
        double v;
        char buf[40];
        if (kc__epoch_logs_value(m, e, c->keys[i], &v)) kc__fmt_shortest(buf, sizeof buf, v);
        else snprintf(buf, sizeof buf, "NA");
        fprintf(c->f, ",%s", buf);
    }
    fputs("\r\n", c->f);
    if (fflush(c->f) != 0 || ferror(c->f)) csv_write_error(c);
    return KC_CONTINUE;
}

static void csv_destroy(kc_callback *cb) {
    csv_logger *c = (csv_logger *)cb;
    if (c->f && fclose(c->f) != 0) csv_write_error(c);
    free(c);
}

kc_status kc_csv_logger(const char *path, int append, kc_callback **out) {
    if (!path || !*path || !out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "CSVLogger: path or out is NULL");
    csv_logger *c = kc__calloc(1, sizeof *c, "CSVLogger");
    if (!c) return KC_STATUS_OUT_OF_MEMORY;
    snprintf(c->path, sizeof c->path, "%s", path);
    c->f = fopen(path, append ? "ab" : "wb");
    if (!c->f) {
        int err = errno;
        free(c);
        return kc__fail(KC_STATUS_IO, "CSVLogger: cannot open '%s' for writing (%s); check that its folder exists "
                        "and is writable", path, strerror(err));
    }
    fseek(c->f, 0, SEEK_END);
    c->cb = (kc_callback){.name = "CSVLogger", .user = c, .on_epoch_end = csv_epoch_end, .destroy = csv_destroy};
    *out = &c->cb;
    return KC_STATUS_OK;
}
