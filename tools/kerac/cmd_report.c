/* cmd_report.c — `kerac report RUN_DIR`: the HTML run report again, from the run.json that
 * `kerac train --report RUN_DIR/report.html` left in the folder. */
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "report.h"

static const char usage[] =
    "usage: kerac report RUN_DIR [-o FILE]\n"
    "\n"
    "Rebuild the HTML report of a finished run from RUN_DIR/run.json, which\n"
    "`kerac train --report RUN_DIR/report.html` writes. The report is one self-contained\n"
    "HTML file (inline SVG charts, no network): open it in any browser.\n"
    "\n"
    "  -o, --output FILE       where to write it (default RUN_DIR/report.html)\n"
    "  -h, --help              show this help\n";

int cli_cmd_report(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "report");
    const char *dir = NULL, *out = NULL;
    int rc;
    while (cli_args_next(&a)) {
        bool help = false;
        if ((rc = cli_help_or_positional(&a, usage, &dir, &help)) >= 0) {
            if (rc || help) return rc;
        } else if (cli_is(&a, "--output") || cli_is(&a, "-o")) {
            if ((rc = cli_value(&a, &out))) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!dir) return cli_usage_error("report", "give the folder of a run (RUN_DIR, holding run.json)");
    char jpath[4200], hpath[4200];
    snprintf(jpath, sizeof jpath, "%s/run.json", dir);
    snprintf(hpath, sizeof hpath, "%s/report.html", dir);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_error(CLI_EXIT_INPUT, "'%s' is not a folder; give the folder that holds the run's run.json", dir);
    json_error_t err;
    json_t *run = json_load_file(jpath, 0, &err);
    if (!run)
        return cli_error(CLI_EXIT_INPUT, "cannot read '%s' (%s, line %d); it is written by `kerac train --report "
                         "%s/report.html`", jpath, err.text, err.line, dir);
    if (!json_is_object(run) || json_integer_value(json_object_get(run, "kerac_run")) != 1) {
        json_decref(run);
        return cli_error(CLI_EXIT_INPUT, "'%s' is not a kerac run record (no \"kerac_run\": 1)", jpath);
    }
    rc = cli_report_write_html(run, out ? out : hpath);
    json_decref(run);
    if (!rc) printf("wrote the run report to '%s' (open it in a browser)\n", out ? out : hpath);
    return rc;
}
