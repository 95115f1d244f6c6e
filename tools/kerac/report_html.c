/* report_html.c — a run (run.json's content) as one self-contained HTML page: inline CSS,
 * charts as inline SVG (readable without JavaScript, none is used), no network, no
 * external font. Sections: the run, device and doctor's verdict, loss and metric curves
 * for training and validation per epoch, loss and images/s (and GPU utilisation) per
 * step, the per-layer cost table, the model summary and the memory plan. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

#define CW 640 /* chart size and margins */
#define CH 260
#define ML 70
#define MR 16
#define MT 34
#define MB 40
#define MAX_POINTS 1500

typedef struct series {
    const char *name, *color;
    int n;
    double *x, *y;
} series;

static void esc(FILE *f, const char *s) {
    for (; s && *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

static const char *jstr(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}
static double jnum(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* The finite range of the series' x and y, widened where it is a single value. */
static void ranges(const series *s, int ns, double *x0, double *x1, double *y0, double *y1) {
    *x0 = *y0 = INFINITY;
    *x1 = *y1 = -INFINITY;
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) continue;
            *x0 = fmin(*x0, s[k].x[i]), *x1 = fmax(*x1, s[k].x[i]);
            *y0 = fmin(*y0, s[k].y[i]), *y1 = fmax(*y1, s[k].y[i]);
        }
    if (!isfinite(*x0)) *x0 = 0, *x1 = 1, *y0 = 0, *y1 = 1;
    if (*x1 <= *x0) *x0 -= 1, *x1 += 1;
    double pad = (*y1 - *y0) * 0.05;
    if (pad <= 0) pad = fabs(*y0) > 0 ? fabs(*y0) * 0.1 : 1;
    bool positive = *y0 >= 0;
    *y0 -= pad, *y1 += pad;
    if (positive && *y0 < 0) *y0 = 0; /* images/s, utilisation: no axis below zero */
}

/* Decimals for tick labels of an axis spanning `span`: about three significant digits. */
static int decimals(double span) {
    int d = span > 0 ? 2 - (int)floor(log10(span)) : 0;
    return d < 0 ? 0 : d > 6 ? 6 : d;
}

/* Axes with 5 value ticks on y; on x, whole-number ticks for whole-number data (epochs,
 * steps), else 5 evenly spaced. */
static void axes(FILE *f, const char *xlabel, bool whole_x, double x0, double x1, double y0, double y1) {
    int pw = CW - ML - MR, ph = CH - MT - MB;
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#999\"/>\n", ML, MT, pw, ph);
    for (int i = 0; i <= 4; i++) {
        double yv = y0 + (y1 - y0) * i / 4, py = MT + ph - ph * i / 4.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>", ML, py, ML + pw, py);
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" class=\"tick\">%.*f</text>\n", ML - 6, py + 4,
                decimals(y1 - y0), yv);
    }
    double step = whole_x ? fmax(1, ceil((x1 - x0) / 5)) : (x1 - x0) / 4;
    for (double xv = whole_x ? ceil(x0) : x0; xv <= x1 + 1e-9; xv += step)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" class=\"tick\">%.*f</text>\n",
                ML + pw * (xv - x0) / (x1 - x0), CH - MB + 16, whole_x ? 0 : decimals(x1 - x0), xv);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" class=\"axis\">", ML + pw / 2, CH - 6);
    esc(f, xlabel);
    fputs("</text>\n", f);
}

static bool whole_numbers(const series *s, int ns) {
    for (int k = 0; k < ns; k++)
        for (int i = 0; i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && s[k].x[i] != floor(s[k].x[i])) return false;
    return true;
}

/* One SVG line chart; every series a <path class="series"> (markers where there are few
 * points), non-finite points leave a gap. */
static void chart(FILE *f, const char *id, const char *title, const char *xlabel, const series *s, int ns) {
    double x0, x1, y0, y1;
    ranges(s, ns, &x0, &x1, &y0, &y1);
    int pw = CW - ML - MR, ph = CH - MT - MB;
    fprintf(f, "<figure><svg id=\"%s\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" "
            "width=\"%d\" height=\"%d\" role=\"img\">\n<title>", id, CW, CH, CW, CH);
    esc(f, title);
    fprintf(f, "</title>\n<text x=\"%d\" y=\"20\" class=\"title\">", ML);
    esc(f, title);
    fputs("</text>\n", f);
    axes(f, xlabel, whole_numbers(s, ns), x0, x1, y0, y1);
    for (int k = 0; k < ns; k++) {
        int drawn = 0;
        fprintf(f, "<path class=\"series\" data-name=\"");
        esc(f, s[k].name);
        fprintf(f, "\" fill=\"none\" stroke=\"%s\" stroke-width=\"2\" d=\"", s[k].color);
        bool pen = false;
        for (int i = 0; i < s[k].n; i++) {
            if (!isfinite(s[k].x[i]) || !isfinite(s[k].y[i])) {
                pen = false;
                continue;
            }
            double px = ML + pw * (s[k].x[i] - x0) / (x1 - x0), py = MT + ph - ph * (s[k].y[i] - y0) / (y1 - y0);
            fprintf(f, "%s%.1f %.1f", pen ? " L" : drawn ? " M" : "M", px, py);
            pen = true;
            drawn++;
        }
        fprintf(f, "\" data-points=\"%d\"/>\n", drawn);
        for (int i = 0; s[k].n <= 60 && i < s[k].n; i++)
            if (isfinite(s[k].x[i]) && isfinite(s[k].y[i]))
                fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>", ML + pw * (s[k].x[i] - x0) / (x1 - x0),
                        MT + ph - ph * (s[k].y[i] - y0) / (y1 - y0), s[k].color);
        int lx = CW - MR - 160 * (ns - k); /* the legend: a row above the plot, right-aligned */
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"4\" fill=\"%s\"/><text x=\"%d\" y=\"%d\" class=\"tick\">",
                lx, 14, s[k].color, lx + 16, 19);
        esc(f, s[k].name);
        fputs("</text>\n", f);
    }
    fputs("</svg></figure>\n", f);
}

/* The values of `key` over an array of objects (every stride-th), x from `xkey`. */
static series column(json_t *arr, const char *xkey, const char *key, const char *name, const char *color) {
    size_t n = json_array_size(arr), stride = n > MAX_POINTS ? (n + MAX_POINTS - 1) / MAX_POINTS : 1;
    series s = {.name = name, .color = color, .x = calloc(n + 1, sizeof(double)), .y = calloc(n + 1, sizeof(double))};
    for (size_t i = 0; s.x && s.y && i < n; i += stride) {
        json_t *o = json_array_get(arr, i);
        s.x[s.n] = jnum(o, xkey);
        s.y[s.n++] = jnum(o, key);
    }
    return s;
}

static bool any_finite(const series *s) {
    for (int i = 0; i < s->n; i++)
        if (isfinite(s->y[i])) return true;
    return false;
}

static void free_series(series *s, int n) {
    for (int i = 0; i < n; i++) free(s[i].x), free(s[i].y);
}

/* Loss and each metric per epoch, training and validation. */
static void epoch_charts(FILE *f, json_t *run) {
    json_t *hist = json_object_get(run, "history"), *metrics = json_object_get(run, "metrics");
    size_t nm = json_array_size(metrics);
    for (size_t k = 0; k <= nm; k++) {
        const char *key = k == 0 ? "loss" : json_string_value(json_array_get(metrics, k - 1));
        if (!key) continue;
        char vkey[96], tname[112], vname[112], id[112], title[128];
        snprintf(vkey, sizeof vkey, "val_%s", key);
        snprintf(tname, sizeof tname, "training %s", key);
        snprintf(vname, sizeof vname, "validation %s", key);
        snprintf(id, sizeof id, "epoch-%s", key);
        snprintf(title, sizeof title, "%s by epoch", key);
        series s[2] = {column(hist, "epoch", key, tname, "#1f77b4"), column(hist, "epoch", vkey, vname, "#ff7f0e")};
        chart(f, id, title, "epoch", s, any_finite(&s[1]) ? 2 : 1);
        free_series(s, 2);
    }
}

static void step_charts(FILE *f, json_t *run) {
    json_t *steps = json_object_get(run, "steps");
    if (json_array_size(steps) == 0) return;
    series l = column(steps, "step", "loss", "loss of the step's batch", "#2ca02c");
    chart(f, "step-loss", "training loss by step", "step", &l, 1);
    series t[2] = {column(steps, "t", "images_per_second", "images/s", "#9467bd"),
                   column(steps, "t", "gpu_utilization", "GPU utilisation %", "#d62728")};
    chart(f, "throughput", "images/s over time", "seconds since the start", t, 1);
    if (any_finite(&t[1])) chart(f, "gpu", "device utilisation over time", "seconds since the start", &t[1], 1);
    free_series(&l, 1);
    free_series(t, 2);
}

static void row2(FILE *f, const char *k, const char *v) {
    fputs("<tr><th>", f);
    esc(f, k);
    fputs("</th><td>", f);
    esc(f, v);
    fputs("</td></tr>\n", f);
}

static void run_table(FILE *f, json_t *run) {
    json_t *model = json_object_get(run, "model"), *doc = json_object_get(run, "doctor");
    json_t *hist = json_object_get(run, "history");
    char buf[160];
    fputs("<h2>Run</h2><table class=\"kv\">\n", f);
    snprintf(buf, sizeof buf, "%s: %lld parameters (%lld trainable), %lld FLOPs per example", jstr(model, "name"),
             (long long)jnum(model, "params"), (long long)jnum(model, "trainable_params"), (long long)jnum(model, "flops"));
    row2(f, "model", buf);
    row2(f, "data", jstr(run, "data"));
    snprintf(buf, sizeof buf, "%zu epochs, batch size %lld", json_array_size(hist), (long long)jnum(run, "batch_size"));
    row2(f, "training", buf);
    row2(f, "stopped early by", *jstr(run, "stop_reason") ? jstr(run, "stop_reason") : "(ran every epoch)");
    row2(f, "device", jstr(run, "device"));
    row2(f, "why this device", jstr(run, "device_reason"));
    if (json_is_object(doc)) {
        snprintf(buf, sizeof buf, "%s: --device auto uses %s", jstr(doc, "verdict"), jstr(doc, "device"));
        row2(f, "doctor's verdict", buf);
        row2(f, "doctor's reason", jstr(doc, "reason"));
        if (*jstr(doc, "fix")) row2(f, "doctor's fix", jstr(doc, "fix"));
    }
    size_t n = json_array_size(hist);
    if (n > 0) {
        json_t *last = json_array_get(hist, n - 1);
        snprintf(buf, sizeof buf, "loss %.4g, validation loss %.4g, %.0f images/s", jnum(last, "loss"),
                 jnum(last, "val_loss"), jnum(last, "images_per_second"));
        row2(f, "last epoch", buf);
    }
    fputs("</table>\n", f);
}

static double layer_ms(json_t *c) { return jnum(c, "forward_ms") + jnum(c, "backward_ms"); }

static int cmp_cost(const void *a, const void *b) {
    double x = layer_ms(*(json_t *const *)a), y = layer_ms(*(json_t *const *)b);
    return x < y ? 1 : x > y ? -1 : 0;
}

static void cost_table(FILE *f, json_t *run) {
    json_t *costs = json_object_get(run, "layer_costs");
    size_t n = json_array_size(costs);
    json_t **rows = n ? calloc(n, sizeof *rows) : NULL;
    if (!rows) return;
    double total = 0;
    for (size_t i = 0; i < n; i++) total += layer_ms(rows[i] = json_array_get(costs, i));
    qsort(rows, n, sizeof *rows, cmp_cost);
    fputs("<h2>Per-layer cost</h2><p>Mean time per call over the run, costliest first (forward calls include "
          "validation).</p>\n<table><tr><th>layer (type)</th><th>forward ms</th><th>backward ms</th><th>share</th>"
          "<th></th></tr>\n", f);
    for (size_t i = 0; i < n; i++) {
        json_t *c = rows[i];
        double share = total > 0 ? layer_ms(c) / total : 0;
        fputs("<tr><td>", f);
        esc(f, jstr(c, "name"));
        fputs(" (", f);
        esc(f, jstr(c, "class_name"));
        fprintf(f, ")</td><td class=\"n\">%.3f</td><td class=\"n\">%.3f</td><td class=\"n\">%.1f%%</td>"
                "<td><div class=\"bar\" style=\"width:%.0fpx\"></div></td></tr>\n",
                jnum(c, "forward_ms"), jnum(c, "backward_ms"), 100 * share, 200 * share);
    }
    fputs("</table>\n", f);
    free(rows);
}

static void summary_table(FILE *f, json_t *run) {
    json_t *layers = json_object_get(json_object_get(run, "model"), "layers"), *l;
    size_t i;
    fputs("<h2>Model summary</h2><table><tr><th>layer (type)</th><th>output shape</th><th>params</th><th>FLOPs</th></tr>\n",
          f);
    json_array_foreach(layers, i, l) {
        fputs("<tr><td>", f);
        esc(f, jstr(l, "name"));
        fputs(" (", f);
        esc(f, jstr(l, "class_name"));
        fputs(")</td><td>", f);
        esc(f, jstr(l, "output_shape"));
        fprintf(f, "</td><td class=\"n\">%lld</td><td class=\"n\">%lld</td></tr>\n", (long long)jnum(l, "params"),
                (long long)jnum(l, "flops"));
    }
    fputs("</table>\n", f);
}

static void memory_table(FILE *f, json_t *run) {
    json_t *mem = json_object_get(run, "memory");
    if (!json_is_object(mem)) return;
    static const char *const keys[] = {"parameters", "gradients", "optimizer_state", "activations",
                                       "activation_gradients", "workspace", "arena", "batch_buffers",
                                       "device_total", "host_pipeline"};
    fprintf(f, "<h2>Memory plan</h2><p>One training step at micro-batch %lld.</p><table>\n",
            (long long)jnum(mem, "batch_size"));
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        fprintf(f, "<tr><th>%s</th><td class=\"n\">%.2f MiB</td></tr>\n", keys[i], jnum(mem, keys[i]) / 1048576.0);
    fputs("</table>\n", f);
}

static const char css[] =
    "body{font-family:sans-serif;margin:24px;color:#222;max-width:1400px}"
    "h1{font-size:22px}h2{font-size:18px;margin-top:28px}"
    "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}"
    "td.n{text-align:right;font-variant-numeric:tabular-nums}.kv th{background:#f6f6f6}"
    ".bar{height:10px;background:#1f77b4}figure{display:inline-block;margin:4px 4px 4px 0}"
    ".chart text{font-family:sans-serif}.tick{font-size:11px;fill:#555}.axis{font-size:12px;fill:#333}"
    ".title{font-size:14px;font-weight:bold;fill:#222}";

int cli_report_write_html(json_t *run, const char *path) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) return cli_error(CLI_EXIT_RUNTIME, "cannot write the report '%s'; check that the folder exists", path);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>kerac run: ", f);
    esc(f, jstr(json_object_get(run, "model"), "name"));
    fprintf(f, "</title>\n<style>%s</style></head><body>\n<h1>kerac run report: ", css);
    esc(f, jstr(json_object_get(run, "model"), "name"));
    fputs("</h1>\n", f);
    run_table(f, run);
    fputs("<h2>Curves</h2>\n", f);
    epoch_charts(f, run);
    step_charts(f, run);
    cost_table(f, run);
    summary_table(f, run);
    memory_table(f, run);
    fputs("</body></html>\n", f);
    bool ok = fflush(f) == 0 && !ferror(f);
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return cli_error(CLI_EXIT_RUNTIME, "cannot write the report '%s'", path);
    }
    return 0;
}
