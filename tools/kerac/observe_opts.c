/* observe_opts.c — the options of `kerac train` that let a user see the run:
 *   --csv FILE [--csv-append]             Keras's CSVLogger
 *   --tensorboard DIR                     Keras's TensorBoard callback layout
 *     [--tensorboard-update-freq N|epoch] [--histogram-freq N]
 *   --check-numerics                      stop at the first layer with NaN/Inf
 *   --profile FILE [--profile-steps A:B]  Chrome trace of steps A..B
 *   --report FILE                         a self-contained HTML run report (report_*.c)
 * Parsed here, turned into callbacks and model settings before fit, and the files written
 * after it, so that cmd_train.c only calls in. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "report.h"

int cli_observe_option(cli_args *a, cli_observe_opts *o) {
    int rc;
    if (cli_is(a, "--csv")) return cli_value(a, &o->csv);
    if (cli_is(a, "--csv-append")) {
        if ((rc = cli_flag(a))) return rc;
        o->csv_append = true;
        return 0;
    }
    if (cli_is(a, "--tensorboard")) return cli_value(a, &o->tensorboard);
    if (cli_is(a, "--tensorboard-update-freq")) {
        const char *v;
        if ((rc = cli_value(a, &v))) return rc;
        o->has_update_freq = true;
        if (strcmp(v, "epoch") == 0) o->update_freq = 0;
        else if (strcmp(v, "batch") == 0) o->update_freq = 1;
        else if (cli_parse_long(v, 1, 1L << 40, &o->update_freq))
            return cli_usage_error(a->cmd, "option '--tensorboard-update-freq' needs a number of steps (1 or "
                                   "more), 'batch' or 'epoch', got '%s'", v);
        return 0;
    }
    if (cli_is(a, "--histogram-freq")) return cli_int_value(a, 0, 1000000, &o->histogram_freq);
    if (cli_is(a, "--check-numerics")) {
        if ((rc = cli_flag(a))) return rc;
        o->check_numerics = true;
        return 0;
    }
    if (cli_is(a, "--profile")) return cli_value(a, &o->profile);
    if (cli_is(a, "--report")) return cli_value(a, &o->report);
    if (cli_is(a, "--profile-steps")) {
        const char *v;
        if ((rc = cli_value(a, &v))) return rc;
        char *end = NULL;
        long first = strtol(v, &end, 10), last = 0;
        bool ok = end != v && *end == ':' && first >= 1;
        if (ok) {
            const char *p = end + 1;
            last = strtol(p, &end, 10);
            ok = end != p && *end == '\0' && last >= first;
        }
        if (!ok)
            return cli_usage_error(a->cmd, "option '--profile-steps' needs A:B, the first and last step to trace "
                                   "(counted from 1, A <= B), got '%s'", v);
        o->profile_first = first;
        o->profile_last = last;
        o->has_profile_steps = true;
        return 0;
    }
    return -1;
}

int cli_observe_check(const char *cmd, const cli_observe_opts *o) {
    if (o->csv_append && !o->csv) return cli_usage_error(cmd, "'--csv-append' needs '--csv FILE'");
    if ((o->has_update_freq || o->histogram_freq) && !o->tensorboard)
        return cli_usage_error(cmd, "'--tensorboard-update-freq' and '--histogram-freq' need '--tensorboard DIR'");
    if (o->has_profile_steps && !o->profile)
        return cli_usage_error(cmd, "'--profile-steps' needs '--profile FILE'");
    return 0;
}

int cli_observe_start(const cli_observe_opts *o, kc_model *m, cli_observe *ob) {
    memset(ob, 0, sizeof *ob);
    kc_status s = KC_STATUS_OK;
    if (o->csv && (s = kc_csv_logger(o->csv, o->csv_append, &ob->cbs[ob->n])) == KC_STATUS_OK) ob->n++;
    if (s == KC_STATUS_OK && o->tensorboard) {
        kc_tensorboard_opts to = {.log_dir = o->tensorboard, .update_freq = o->update_freq,
                                  .histogram_freq = (int)o->histogram_freq};
        if ((s = kc_tensorboard(&to, &ob->cbs[ob->n])) == KC_STATUS_OK) ob->n++;
    }
    if (s == KC_STATUS_OK && o->check_numerics) s = kc_model_set_check_numerics(m, 1);
    if (s == KC_STATUS_OK && o->profile)
        s = kc_model_trace_steps(m, o->has_profile_steps ? o->profile_first : 2,
                                 o->has_profile_steps ? o->profile_last : 11);
    if (s == KC_STATUS_OK && o->report && (s = cli_report_start(o->report, m, &ob->report)) == KC_STATUS_OK)
        ob->cbs[ob->n++] = cli_report_callback(ob->report);
    if (s != KC_STATUS_OK) {
        int rc = cli_fail(s, CLI_PHASE_RUN);
        cli_observe_end(ob);
        return rc;
    }
    return 0;
}

int cli_observe_finish(const cli_observe_opts *o, kc_model *m, const kc_history *h, cli_observe *ob, bool quiet) {
    kc_status s;
    if (o->profile) {
        if ((s = kc_model_write_trace(m, o->profile))) return cli_fail(s, CLI_PHASE_RUN);
        if (!quiet)
            printf("wrote the trace of %lld spans to '%s' (open it in https://ui.perfetto.dev or chrome://tracing)\n",
                   (long long)kc_model_trace_spans(m), o->profile);
    }
    if (o->report && h) {
        int rc = cli_report_finish(ob->report, m, h, o->data);
        if (rc) return rc;
        if (!quiet) printf("wrote the run report to '%s' (open it in a browser)\n", o->report);
    }
    return 0;
}

void cli_observe_end(cli_observe *ob) {
    for (int i = 0; i < ob->n; i++) kc_callback_destroy(ob->cbs[i]); /* the report's has no destroy */
    ob->n = 0;
    cli_report_free(ob->report);
    ob->report = NULL;
}
