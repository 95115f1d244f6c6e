/* cmd_monitor.c — `kerac monitor [--interval S] [--count N]`: a live table of every GPU,
 * one row per GPU per sample, like `nvidia-smi dmon` (NVML readings: utilisation, memory,
 * temperature, power). Ctrl-C ends it. */
#include <math.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac monitor [--interval S] [--count N]\n"
    "\n"
    "Print the GPUs' readings every S seconds, one row per GPU, like `nvidia-smi dmon`:\n"
    "  gpu    NVML's index (nvidia-smi's numbering)\n"
    "  cuda   the cuda:N kerac would use for it here (- when CUDA_VISIBLE_DEVICES hides it)\n"
    "  sm%    share of the time a kernel ran; mem%: share of the time memory was read or written\n"
    "  used/total MiB, temp C, power/limit W\n"
    "A value NVML cannot read is shown as -.\n"
    "\n"
    "options:\n"
    "  --interval S   seconds between samples (default 1; at least 0.05)\n"
    "  --count N      stop after N samples (default: until Ctrl-C)\n"
    "  -h, --help     show this help\n"
    "\n"
    "exit codes: 0 done, 1 usage error, 3 no NVML (no NVIDIA driver: see `kerac doctor`).\n";

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig) {
    (void)sig;
    g_stop = 1;
}

static void field(char *buf, size_t n, double v, const char *fmt) {
    if (v < 0 || !isfinite(v)) snprintf(buf, n, "-");
    else snprintf(buf, n, fmt, v);
}

int cli_cmd_monitor(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "monitor");
    double interval = 1.0;
    long count = 0;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        }
        int rc;
        if (cli_is(&a, "--interval")) {
            if ((rc = cli_double_value(&a, 0.05, 3600, false, &interval))) return rc;
        } else if (cli_is(&a, "--count")) {
            if ((rc = cli_int_value(&a, 1, 1000000000L, &count))) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    kc_gpu_reading r[16];
    int n = 0;
    kc_status s = kc_gpu_readings(r, 16, &n);
    if (s != KC_STATUS_OK) return cli_fail(s, CLI_PHASE_RUN);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, &old);
    printf("# %3s %4s  %-24s %4s %4s %16s %5s %13s\n", "gpu", "cuda", "name", "sm%", "mem%", "used/total MiB", "temp",
           "power/limit W");
    for (long k = 0; !g_stop && (count == 0 || k < count); k++) {
        if (k > 0) {
            s = kc_gpu_readings(r, 16, &n);
            if (s != KC_STATUS_OK) break;
        }
        for (int i = 0; i < n; i++) {
            char cuda[16], sm[8], mem[8], used[16], total[16], temp[8], pw[16], lim[16], mt[40], pt[40];
            if (r[i].cuda_index >= 0) snprintf(cuda, sizeof cuda, "%d", r[i].cuda_index);
            else snprintf(cuda, sizeof cuda, "-");
            field(sm, sizeof sm, r[i].utilization, "%.0f");
            field(mem, sizeof mem, r[i].memory_utilization, "%.0f");
            field(used, sizeof used, r[i].memory_used >= 0 ? r[i].memory_used / 1048576.0 : -1, "%.0f");
            field(total, sizeof total, r[i].memory_total >= 0 ? r[i].memory_total / 1048576.0 : -1, "%.0f");
            field(temp, sizeof temp, r[i].temperature, "%.0f");
            field(pw, sizeof pw, r[i].power, "%.0f");
            field(lim, sizeof lim, r[i].power_limit, "%.0f");
            snprintf(mt, sizeof mt, "%s/%s", used, total);
            snprintf(pt, sizeof pt, "%s/%s", pw, lim);
            printf("  %3d %4s  %-24.24s %4s %4s %16s %5s %13s\n", r[i].index, cuda, r[i].name, sm, mem, mt, temp, pt);
        }
        fflush(stdout);
        if (count && k + 1 >= count) break;
        struct timespec ts = {(time_t)interval, (long)((interval - floor(interval)) * 1e9)};
        while (!g_stop && nanosleep(&ts, &ts) != 0) {
        }
    }
    sigaction(SIGINT, &old, NULL);
    if (s != KC_STATUS_OK) return cli_fail(s, CLI_PHASE_RUN);
    return CLI_EXIT_OK;
}
