/* report_data.c — what `kerac train --report FILE` records about a run, kept as
 * run.json next to the report so that `kerac report RUN_DIR` can draw it again: the
 * model's layers, the device and the doctor's verdict, the history, every step's loss,
 * images/s and GPU utilisation, the per-layer costs (profiling is on for the run: on the
 * CPU it costs two clock reads per layer) and the memory plan. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

#define MAX_STEP_POINTS 200000

typedef struct step_point {
    int64_t step;
    double t, loss, images_per_second, gpu_util;
} step_point;

struct cli_report {
    kc_callback cb;
    char path[4096];
    double t0, epoch_t0;
    int64_t step, prev_samples;
    double prev_loss_sum, prev_seconds;
    step_point *pts;
    int64_t n, cap;
    bool has_gpu;
};

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static kc_callback_action rep_epoch_begin(kc_model *m, int epoch, void *user) {
    cli_report *r = user;
    r->prev_samples = 0;
    r->prev_loss_sum = 0;
    r->prev_seconds = 0;
    return KC_CONTINUE;
}

/* The step's own loss and images/s, from the epoch's running sums. */
static kc_callback_action rep_batch_end(kc_model *m, const kc_batch_logs *b, void *user) {
    cli_report *r = user;
    r->step++;
    int64_t n = b->samples - r->prev_samples;
    double sum = b->loss * (double)b->samples, dt = b->seconds - r->prev_seconds;
    if (r->n == r->cap && r->cap < MAX_STEP_POINTS) {
        int64_t cap = r->cap ? r->cap * 2 : 1024;
        step_point *p = realloc(r->pts, (size_t)cap * sizeof *p);
        if (p) {
            r->pts = p;
            r->cap = cap;
        }
    }
    if (r->n < r->cap && n > 0)
        r->pts[r->n++] = (step_point){.step = r->step, .t = cli_now() - r->t0,
                                      .loss = (sum - r->prev_loss_sum) / (double)n,
                                      .images_per_second = dt > 0 ? (double)n / dt : NAN,
                                      .gpu_util = b->has_gpu ? b->gpu.utilization : NAN};
    r->has_gpu = r->has_gpu || b->has_gpu;
    r->prev_samples = b->samples;
    r->prev_loss_sum = sum;
    r->prev_seconds = b->seconds;
    return KC_CONTINUE;
}

kc_status cli_report_start(const char *path, kc_model *m, cli_report **out) {
    cli_report *r = calloc(1, sizeof *r);
    if (!r) return KC_STATUS_OUT_OF_MEMORY;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->t0 = cli_now();
    r->cb = (kc_callback){.name = "report", .user = r, .on_epoch_begin = rep_epoch_begin, .on_batch_end = rep_batch_end};
    *out = r;
    return kc_model_set_profiling(m, 1);
}

kc_callback *cli_report_callback(cli_report *r) { return r ? &r->cb : NULL; }

void cli_report_free(cli_report *r) {
    if (!r) return;
    free(r->pts);
    free(r);
}

static json_t *model_json(kc_model *m) {
    json_t *layers = json_array();
    int64_t params = 0, trainable = 0, flops = 0;
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_info li;
        if (kc_model_layer_info(m, i, &li) != KC_STATUS_OK) continue;
        char shape[96];
        cli_shape_str(&li.output_shape, true, shape, sizeof shape);
        json_array_append_new(layers, json_pack("{s:s, s:s, s:s, s:I, s:I}", "name", li.name, "class_name",
                                                li.class_name, "output_shape", shape, "params", (json_int_t)li.params,
                                                "flops", (json_int_t)li.flops));
        params += li.params;
        trainable += li.trainable_params;
        flops += li.flops;
    }
    return json_pack("{s:s, s:I, s:I, s:I, s:o}", "name", kc_model_name(m), "params", (json_int_t)params,
                     "trainable_params", (json_int_t)trainable, "flops", (json_int_t)flops, "layers", layers);
}

static json_t *doctor_json(void) {
    kc_doctor_report *d = NULL;
    kc_doctor_opts o = {.tensorflow_search = KC_FALSE, .start_backend = KC_FALSE};
    if (kc_doctor_run(&o, &d) != KC_STATUS_OK) return json_null();
    static const char *const verdicts[] = {"gpu", "cpu", "broken"};
    int v = (int)kc_doctor_get_verdict(d);
    json_t *j = json_pack("{s:s, s:s, s:s, s:s}", "verdict", v >= 0 && v <= 2 ? verdicts[v] : "?", "device",
                          kc_doctor_device(d), "reason", kc_doctor_reason(d), "fix", kc_doctor_fix(d));
    kc_doctor_report_destroy(d);
    return j;
}

static json_t *history_json(kc_model *m, const kc_history *h) {
    json_t *a = json_array();
    for (int e = 0; e < kc_history_epochs(h); e++) {
        const kc_epoch_logs *l = kc_history_epoch(h, e);
        json_t *o = json_pack("{s:i, s:o, s:o, s:o, s:o, s:i}", "epoch", l->epoch + 1, "loss", num(l->loss), "lr",
                              num(l->lr), "images_per_second", num(l->images_per_second), "seconds", num(l->seconds),
                              "batch_size", l->batch_size);
        for (int i = 0; i < kc_history_num_metrics(h); i++) {
            char key[96];
            json_object_set_new(o, kc_history_metric_name(h, i), num(l->metrics[i]));
            snprintf(key, sizeof key, "val_%s", kc_history_metric_name(h, i));
            if (l->has_val) json_object_set_new(o, key, num(l->val_metrics[i]));
        }
        if (l->has_val) json_object_set_new(o, "val_loss", num(l->val_loss));
        if (l->has_gpu) json_object_set_new(o, "gpu_utilization", num(l->gpu.utilization));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *steps_json(const cli_report *r) {
    json_t *a = json_array();
    for (int64_t i = 0; i < r->n; i++) {
        const step_point *p = &r->pts[i];
        json_t *o = json_pack("{s:I, s:o, s:o, s:o}", "step", (json_int_t)p->step, "t", num(p->t), "loss", num(p->loss),
                              "images_per_second", num(p->images_per_second));
        if (r->has_gpu) json_object_set_new(o, "gpu_utilization", num(p->gpu_util));
        json_array_append_new(a, o);
    }
    return a;
}

static json_t *costs_json(kc_model *m) {
    json_t *a = json_array();
    double loss_s = 0, opt_s = 0;
    kc_model_step_overhead(m, &loss_s, &opt_s);
    for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
        kc_layer_timing t;
        if (kc_model_layer_timing(m, i, &t) != KC_STATUS_OK || (t.forward_calls == 0 && t.backward_calls == 0)) continue;
        json_array_append_new(a, json_pack("{s:s, s:s, s:o, s:o}", "name", t.name, "class_name", t.class_name,
                                           "forward_ms", num(t.forward_calls ? 1e3 * t.forward_seconds / (double)t.forward_calls : 0),
                                           "backward_ms", num(t.backward_calls ? 1e3 * t.backward_seconds / (double)t.backward_calls : 0)));
    }
    return a;
}

static json_t *memory_json(kc_model *m, int batch) {
    kc_memory_plan p;
    if (batch <= 0 || kc_model_plan_memory(m, batch, 1, 1, &p) != KC_STATUS_OK) return json_null();
    return json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "batch_size", p.batch_size, "parameters",
                     (json_int_t)p.parameters, "gradients", (json_int_t)p.gradients, "optimizer_state",
                     (json_int_t)p.optimizer_state, "activations", (json_int_t)p.activations, "activation_gradients",
                     (json_int_t)p.activation_gradients, "workspace", (json_int_t)p.workspace, "arena",
                     (json_int_t)p.arena, "batch_buffers", (json_int_t)p.batch_buffers, "device_total",
                     (json_int_t)p.device_total, "host_pipeline", (json_int_t)p.host_pipeline);
}

/* RUN_DIR/run.json from the report's path: the folder of FILE. */
static void run_json_path(const char *report, char *buf, size_t n) {
    const char *slash = strrchr(report, '/');
    if (!slash) snprintf(buf, n, "run.json");
    else snprintf(buf, n, "%.*s/run.json", (int)(slash - report), report);
}

int cli_report_finish(cli_report *r, kc_model *m, const kc_history *h, const char *data_spec) {
    int epochs = kc_history_epochs(h);
    int batch = epochs > 0 ? kc_history_epoch(h, epochs - 1)->micro_batch : 0;
    json_t *metrics = json_array();
    for (int i = 0; i < kc_history_num_metrics(h); i++) json_array_append_new(metrics, json_string(kc_history_metric_name(h, i)));
    json_t *run = json_pack("{s:i, s:o, s:s, s:s, s:o, s:s, s:s, s:i, s:o, s:o, s:o, s:o, s:o}", "kerac_run", 1, "model",
                            model_json(m), "device", kc_history_device(h), "device_reason", kc_history_device_reason(h),
                            "doctor", doctor_json(), "data", data_spec ? data_spec : "", "stop_reason",
                            kc_history_stop_reason(h), "batch_size", epochs > 0 ? kc_history_epoch(h, 0)->batch_size : 0,
                            "metrics", metrics, "history", history_json(m, h), "steps", steps_json(r), "layer_costs",
                            costs_json(m), "memory", memory_json(m, batch));
    if (!run) return cli_error(CLI_EXIT_RUNTIME, "out of memory building the run report");
    char jpath[4200];
    run_json_path(r->path, jpath, sizeof jpath);
    int rc = 0;
    if (json_dump_file(run, jpath, JSON_INDENT(1) | JSON_REAL_PRECISION(9)) != 0)
        rc = cli_error(CLI_EXIT_RUNTIME, "cannot write '%s'; check that the folder exists and is writable", jpath);
    json_decref(run);
    /* drawn from the file, as `kerac report` draws it: the same page either way */
    json_error_t err;
    run = rc ? NULL : json_load_file(jpath, 0, &err);
    if (!rc && !run) rc = cli_error(CLI_EXIT_RUNTIME, "cannot read back '%s' (%s)", jpath, err.text);
    if (!rc) rc = cli_report_write_html(run, r->path);
    json_decref(run);
    return rc;
}
