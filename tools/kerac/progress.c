/* progress.c — what `kerac train` shows while fit runs: a Keras-style progress bar on a
 * terminal, one plain line per epoch otherwise, or one JSON object per epoch. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "cli.h"

#define BAR_WIDTH 30
#define BAR_INTERVAL 0.1 /* seconds between bar redraws (~10 per second) */

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

void cli_json_number(FILE *f, double v) {
    if (!isfinite(v))
        fputs("null", f);
    else
        fprintf(f, "%.6g", v);
}

void cli_json_metrics(FILE *f, kc_model *m, const char *prefix, const double *values, int n) {
    for (int i = 0; i < n && i < KC_MAX_METRICS; i++) {
        char key[96];
        snprintf(key, sizeof key, "%s%s", prefix, kc_model_metric_name(m, i));
        fputs(", ", f);
        cli_json_string(f, key);
        fputs(": ", f);
        cli_json_number(f, values[i]);
    }
}

void cli_print_eval(kc_model *m, const kc_eval_result *r, const char *prefix) {
    char v[32];
    cli_fmt_value(v, sizeof v, r->loss);
    printf("%sloss: %s", prefix, v);
    int nm = r->num_metrics < KC_MAX_METRICS ? r->num_metrics : KC_MAX_METRICS;
    for (int i = 0; i < nm; i++) {
        cli_fmt_value(v, sizeof v, r->metrics[i]);
        printf(" - %s%s: %s", prefix, kc_model_metric_name(m, i), v);
    }
    printf(" (%lld examples, %.1fs)\n", (long long)r->samples, r->seconds);
}

/* "12s", "3:05", "1:02:03" like Keras's ETA. */
static void fmt_eta(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) s = 0;
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, n, "%ld:%02ld:%02ld", t / 3600, (t % 3600) / 60, t % 60);
    else if (t >= 60)
        snprintf(buf, n, "%ld:%02ld", t / 60, t % 60);
    else
        snprintf(buf, n, "%lds", t);
}

/* Keras prints small values in scientific notation: 0.5123, 1.2340e-05. */
int cli_fmt_value(char *buf, size_t n, double v) {
    if (v != 0 && fabs(v) < 1e-3) return snprintf(buf, n, "%.4e", v);
    return snprintf(buf, n, "%.4f", v);
}

/* " - loss: 0.5123 - accuracy: 0.8123" (prefix "val_" for validation) */
static size_t fmt_metrics(char *buf, size_t n, kc_model *m, const char *prefix, double loss,
                          const double *metrics) {
    size_t len = 0;
    char v[32];
    cli_fmt_value(v, sizeof v, loss);
    len += (size_t)snprintf(buf + len, n - len, " - %sloss: %s", prefix, v);
    int nm = kc_model_num_metrics(m);
    if (nm > KC_MAX_METRICS) nm = KC_MAX_METRICS;
    for (int i = 0; i < nm && len < n; i++) {
        cli_fmt_value(v, sizeof v, metrics[i]);
        len += (size_t)snprintf(buf + len, n - len, " - %s%s: %s", prefix, kc_model_metric_name(m, i), v);
    }
    return len < n ? len : n - 1;
}

static void draw_line(cli_progress *p, const char *line, bool final) {
    int len = (int)strlen(line);
    int pad = p->last_len > len ? p->last_len - len : 0;
    fprintf(p->out, "\r%s%*s", line, pad, "");
    if (final) {
        fputc('\n', p->out);
        p->last_len = 0;
    } else {
        p->last_len = len;
    }
    fflush(p->out);
}

/* " - GPU 87% 10.2/80.0 GiB 64C 250W": the fields NVML gave */
static size_t fmt_gpu(char *buf, size_t n, const kc_gpu_reading *g) {
    size_t len = (size_t)snprintf(buf, n, " - GPU");
    if (g->utilization >= 0 && len < n) len += (size_t)snprintf(buf + len, n - len, " %.0f%%", g->utilization);
    if (g->memory_used >= 0 && g->memory_total > 0 && len < n)
        len += (size_t)snprintf(buf + len, n - len, " %.1f/%.1f GiB", g->memory_used / 1073741824.0,
                                g->memory_total / 1073741824.0);
    if (g->temperature >= 0 && len < n) len += (size_t)snprintf(buf + len, n - len, " %.0fC", g->temperature);
    if (g->power >= 0 && len < n) len += (size_t)snprintf(buf + len, n - len, " %.0fW", g->power);
    return len < n ? len : n - 1;
}

/* GPU readings as JSON fields (", \"gpu_utilization\": 87, ..."); -1 (unknown) is null. */
static void json_gpu(FILE *f, const kc_gpu_reading *g) {
    fputs(", \"gpu_utilization\": ", f);
    cli_json_number(f, g->utilization >= 0 ? g->utilization : NAN);
    fputs(", \"gpu_memory_used\": ", f);
    cli_json_number(f, g->memory_used >= 0 ? g->memory_used : NAN);
    fputs(", \"gpu_memory_total\": ", f);
    cli_json_number(f, g->memory_total >= 0 ? g->memory_total : NAN);
    fputs(", \"gpu_temperature\": ", f);
    cli_json_number(f, g->temperature >= 0 ? g->temperature : NAN);
    fputs(", \"gpu_power\": ", f);
    cli_json_number(f, g->power >= 0 ? g->power : NAN);
}

/* " 211/422 [=========>....................]" */
static size_t fmt_bar(char *buf, size_t n, int64_t done, int64_t total) {
    if (total <= 0) return (size_t)snprintf(buf, n, "%lld", (long long)done);
    char num[24];
    int width = snprintf(num, sizeof num, "%lld", (long long)total);
    size_t len = (size_t)snprintf(buf, n, "%*lld/%lld [", width, (long long)done, (long long)total);
    int filled = (int)((double)done / (double)total * BAR_WIDTH);
    if (filled > BAR_WIDTH) filled = BAR_WIDTH;
    for (int i = 0; i < BAR_WIDTH && len + 2 < n; i++) {
        char c = '.';
        if (i < filled) c = '=';
        if (i == filled - 1 && done < total) c = '>';
        if (i == filled && filled == 0 && done < total) c = '>';
        buf[len++] = c;
    }
    if (len + 2 < n) buf[len++] = ']';
    buf[len] = '\0';
    return len;
}

static kc_callback_action on_epoch_begin(kc_model *m, int epoch, void *user) {
    cli_progress *p = user;
    if (p->mode == CLI_OUT_BAR && !p->quiet) {
        fprintf(p->out, "Epoch %d/%d\n", epoch + 1, p->epochs);
        fflush(p->out);
        p->last_len = 0;
        p->last_draw = 0;
    }
    return p->interrupt && *p->interrupt ? KC_STOP_TRAINING : KC_CONTINUE;
}

static kc_callback_action on_batch_end(kc_model *m, const kc_batch_logs *l, void *user) {
    cli_progress *p = user;
    if (p->mode == CLI_OUT_BAR && !p->quiet) {
        double now = cli_now();
        bool last = l->steps > 0 && l->step + 1 >= l->steps;
        /* the last step's line is drawn by on_epoch_end, with the validation results */
        if (!last && now - p->last_draw >= BAR_INTERVAL) {
            p->last_draw = now;
            char line[512];
            int64_t done = l->step + 1;
            size_t len = fmt_bar(line, sizeof line, done, l->steps);
            if (l->steps > 0 && done > 0) {
                char eta[32];
                fmt_eta(l->seconds / (double)done * (double)(l->steps - done), eta, sizeof eta);
                len += (size_t)snprintf(line + len, sizeof line - len, " - ETA: %s", eta);
            }
            len += fmt_metrics(line + len, sizeof line - len, m, "", l->loss, l->metrics);
            if (l->seconds > 0 && len < sizeof line)
                len += (size_t)snprintf(line + len, sizeof line - len, " - %.0f img/s", (double)l->samples / l->seconds);
            if (l->has_gpu && len < sizeof line) fmt_gpu(line + len, sizeof line - len, &l->gpu);
            draw_line(p, line, false);
        }
    }
    return p->interrupt && *p->interrupt ? KC_STOP_TRAINING : KC_CONTINUE;
}

static kc_callback_action on_epoch_end(kc_model *m, const kc_epoch_logs *l, void *user) {
    cli_progress *p = user;
    int nm = kc_model_num_metrics(m);
    if (nm > KC_MAX_METRICS) nm = KC_MAX_METRICS;
    if (p->quiet) return p->interrupt && *p->interrupt ? KC_STOP_TRAINING : KC_CONTINUE;
    if (p->mode == CLI_OUT_JSON) {
        FILE *f = p->out;
        fprintf(f, "{\"epoch\": %d, \"loss\": ", l->epoch + 1);
        cli_json_number(f, l->loss);
        cli_json_metrics(f, m, "", l->metrics, nm);
        if (l->has_val) {
            fputs(", \"val_loss\": ", f);
            cli_json_number(f, l->val_loss);
            cli_json_metrics(f, m, "val_", l->val_metrics, nm);
        }
        fputs(", \"lr\": ", f);
        cli_json_number(f, l->lr);
        fputs(", \"images_per_second\": ", f);
        cli_json_number(f, l->images_per_second);
        fputs(", \"seconds\": ", f);
        cli_json_number(f, l->seconds);
        fputs(", \"device\": ", f);
        cli_json_string(f, kc_model_device(m));
        fputs(", \"device_reason\": ", f);
        cli_json_string(f, kc_model_device_reason(m));
        if (l->has_gpu) json_gpu(f, &l->gpu);
        fputs(", \"input_wait_seconds\": ", f);
        cli_json_number(f, l->input_wait_seconds);
        char verdict[256];
        fputs(", \"input_bound\": ", f);
        if (kc_input_bound_verdict(l->input_wait_seconds, l->seconds, kc_model_device(m), verdict, sizeof verdict))
            cli_json_string(f, verdict);
        else
            fputs("null", f);
        fputs("}\n", f);
        fflush(f);
    } else {
        char line[768];
        size_t len = 0;
        if (p->mode == CLI_OUT_BAR) {
            len = fmt_bar(line, sizeof line, l->steps, l->steps);
            double per_step = l->steps > 0 ? l->seconds / (double)l->steps : 0;
            len += (size_t)snprintf(line + len, sizeof line - len, " - %.0fs %.0fms/step", l->seconds,
                                    per_step * 1e3);
        } else {
            len = (size_t)snprintf(line, sizeof line, "epoch %d/%d - %.*fs - %.0f img/s", l->epoch + 1,
                                   p->epochs, l->seconds < 10 ? 2 : 1, l->seconds, l->images_per_second);
        }
        len += fmt_metrics(line + len, sizeof line - len, m, "", l->loss, l->metrics);
        if (l->has_val) len += fmt_metrics(line + len, sizeof line - len, m, "val_", l->val_loss, l->val_metrics);
        if (p->mode == CLI_OUT_BAR && len < sizeof line)
            len += (size_t)snprintf(line + len, sizeof line - len, " - %.0f img/s", l->images_per_second);
        if (l->has_gpu && len < sizeof line) fmt_gpu(line + len, sizeof line - len, &l->gpu);
        if (p->mode == CLI_OUT_BAR) {
            draw_line(p, line, true);
        } else {
            fprintf(p->out, "%s\n", line);
        }
        /* the input-bound verdict, when the loop waited for data */
        char verdict[256];
        if (kc_input_bound_verdict(l->input_wait_seconds, l->seconds, kc_model_device(m), verdict, sizeof verdict))
            fprintf(p->out, "  %s\n", verdict);
        fflush(p->out);
    }
    return p->interrupt && *p->interrupt ? KC_STOP_TRAINING : KC_CONTINUE;
}

static void on_train_end(kc_model *m, void *user) {
    cli_progress *p = user;
    /* an interrupted epoch leaves a half-drawn bar: end its line */
    if (p->mode == CLI_OUT_BAR && p->last_len > 0) {
        fputc('\n', p->out);
        fflush(p->out);
        p->last_len = 0;
    }
}

kc_callback *cli_progress_init(cli_progress *p, cli_output mode, bool quiet, int epochs,
                               volatile sig_atomic_t *interrupt) {
    memset(p, 0, sizeof *p);
    p->mode = mode;
    p->quiet = quiet;
    p->epochs = epochs;
    p->out = stdout;
    p->interrupt = interrupt;
    p->cb.user = p;
    p->cb.on_epoch_begin = on_epoch_begin;
    p->cb.on_batch_end = on_batch_end;
    p->cb.on_epoch_end = on_epoch_end;
    p->cb.on_train_end = on_train_end;
    return &p->cb;
}
