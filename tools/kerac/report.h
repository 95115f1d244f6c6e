/* report.h — the HTML run report (report_data.c records a run into run.json,
 * report_html.c draws a run.json as one self-contained HTML page). Private to the tool. */
#ifndef KERAC_REPORT_H
#define KERAC_REPORT_H

#include <jansson.h>

#include "kerac.h"

typedef struct cli_report cli_report;

/* Before fit: the recorder (its callback goes to fit) and per-layer profiling on. */
kc_status cli_report_start(const char *path, kc_model *m, cli_report **out);
kc_callback *cli_report_callback(cli_report *r);
/* After fit: run.json in the report's folder, then the report. 0 or an exit code. */
int cli_report_finish(cli_report *r, kc_model *m, const kc_history *h, const char *data_spec);
void cli_report_free(cli_report *r);

/* Draw a run (run.json's content) into an HTML file. 0 or an exit code. */
int cli_report_write_html(json_t *run, const char *path);

#endif /* KERAC_REPORT_H */
