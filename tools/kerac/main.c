/* main.c — `kerac`: dispatch to the subcommands, `kerac --help`, `kerac --version`. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac <command> [options]\n"
    "\n"
    "Keras-style deep learning in C.\n"
    "\n"
    "commands:\n"
    "  train [MODEL]             train a model (default: the default CNN) on a dataset\n"
    "  evaluate MODEL --data D   loss and metrics of a model on a dataset\n"
    "  predict MODEL --input X.npy --output Y.npy\n"
    "                            run a model on the examples of a .npy file\n"
    "  summary [MODEL]           layers, output shapes, parameters and FLOPs\n"
    "  convert IN OUT            convert a model file (.keras, .h5, .json)\n"
    "  doctor [--json]           check the GPU stack: which device --device auto uses, and why\n"
    "  monitor                   live GPU readings (utilisation, memory, temperature, power)\n"
    "  profile [MODEL]           per-layer cost of a training step and the bottleneck\n"
    "  report RUN_DIR            the HTML report of a run trained with --report\n"
    "\n"
    "model files: .keras (Keras 3: config and weights), .h5 (Keras 2 HDF5: config and\n"
    "weights), .json (Keras config only: freshly initialised weights).\n"
    "\n"
    "options:\n"
    "  -h, --help                show this help (kerac <command> --help for a command)\n"
    "  --version                 show the version\n"
    "  --log-level L             with any command: debug, info, warning or error (or 0-3;\n"
    "                            default KERAC_LOG_LEVEL, else warning)\n"
    "  --allow-nonfinite-input   with any command: accept NaN and Inf in float32 input data\n"
    "                            (refused by default: they make NaN weights)\n"
    "  --log-device-placement    with any command: at the first training step, one line per\n"
    "                            layer with its device, kernel or cuDNN algorithm and workspace\n"
    "\n"
    "exit codes: 0 success, 1 usage error, 2 bad input file (model, data), 3 failure while\n"
    "running (training, evaluation, saving), 130 training interrupted by Ctrl-C, 143 by\n"
    "SIGTERM.\n"
    "\n"
    "environment: KERAC_NUM_THREADS (CPU threads), KERAC_LOG_LEVEL (debug|info|warning|error),\n"
    "KERAC_DEVICE (cpu|cuda|cuda:N|auto); `kerac doctor --help` lists every variable.\n";

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
} command;

static const command commands[] = {
    {"train", cli_cmd_train},
    {"evaluate", cli_cmd_evaluate},
    {"predict", cli_cmd_predict},
    {"summary", cli_cmd_summary},
    {"convert", cli_cmd_convert},
    {"doctor", cli_cmd_doctor},
    {"monitor", cli_cmd_monitor},
    {"profile", cli_cmd_profile},
    {"report", cli_cmd_report},
};

/* Options every command takes (--log-level L, --log-device-placement): applied here and
 * removed from argv before the command parses the rest. Returns 0 or an exit code. */
static int global_options(int *argc, char **argv) {
    int out = 2;
    for (int i = 2; i < *argc; i++) {
        const char *arg = argv[i];
        if (!strcmp(arg, "--")) { /* the rest is positional */
            while (i < *argc) argv[out++] = argv[i++];
            break;
        }
        if (!strcmp(arg, "--allow-nonfinite-input")) {
            kc_set_allow_nonfinite_input(1);
            continue;
        }
        if (!strcmp(arg, "--log-device-placement")) {
            kc_set_log_device_placement(1);
            continue;
        }
        if (!strncmp(arg, "--log-level", 11) && (arg[11] == '\0' || arg[11] == '=')) {
            const char *v = arg[11] == '=' ? arg + 12 : (i + 1 < *argc ? argv[++i] : NULL);
            kc_log_level level;
            if (!v) return cli_usage_error(argv[1], "option '--log-level' needs a value: debug, info, warning or error");
            if (kc_log_level_parse(v, &level) != KC_STATUS_OK)
                return cli_usage_error(argv[1], "option '--log-level' must be debug, info, warning or error (or 0-3), got '%s'", v);
            kc_log_set_level(level);
            continue;
        }
        argv[out++] = argv[i];
    }
    argv[out] = NULL;
    *argc = out;
    return 0;
}

/* Environment variables the library reads later, checked now: a bad value is the user's
 * setting, not a fault of the model file being loaded when the library meets it. */
static int check_environment(const char *cmd) {
    const char *v = getenv("KERAC_MEMORY_LIMIT");
    size_t bytes;
    if (v && *v && kc_parse_size(v, &bytes) != KC_STATUS_OK)
        return cli_error(CLI_EXIT_USAGE, "environment variable KERAC_MEMORY_LIMIT='%s' is not a memory size (512M, 2G, "
                         "...); fix or unset it (kerac %s)", v, cmd);
    return 0;
}

/* kerac's wait policy for CPU threads (KC_CPU_SPIN_DEFAULT in kerac.h): libgomp reads
 * GOMP_SPINCOUNT when it loads, before main, so the command starts itself again with it set,
 * unless the user chose (GOMP_SPINCOUNT or OMP_WAIT_POLICY set) or this process is not the
 * kerac binary itself (run through ld.so or a tool such as valgrind: /proc/self/exe is then
 * that program). When exec fails, the command goes on with libgomp's default. */
static void wait_policy_default(char **argv) {
    if (getenv("GOMP_SPINCOUNT") || getenv("OMP_WAIT_POLICY")) return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) return;
    self[n] = 0;
    const char *self_base = strrchr(self, '/'), *arg_base = strrchr(argv[0], '/');
    self_base = self_base ? self_base + 1 : self;
    arg_base = arg_base ? arg_base + 1 : argv[0];
    if (strcmp(self_base, arg_base) != 0) return;
    if (setenv("GOMP_SPINCOUNT", KC_CPU_SPIN_DEFAULT, 0) != 0) return;
    execv(self, argv);
    unsetenv("GOMP_SPINCOUNT"); /* not started again: the environment says what libgomp uses */
}

int main(int argc, char **argv) {
    wait_policy_default(argv);
    if (argc < 2) {
        fputs(usage, stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        /* "kerac help train" is "kerac train --help" */
        if (!strcmp(cmd, "help") && argc > 2) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    char *help_argv[] = {argv[2], "--help", NULL};
                    return commands[i].run(2, help_argv);
                }
            return cli_error(CLI_EXIT_USAGE, "unknown command '%s'; commands: train, evaluate, predict, summary, convert, doctor, monitor",
                             argv[2]);
        }
        fputs(usage, stdout);
        return CLI_EXIT_OK;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("kerac %s (library %s)\n", KC_VERSION_STRING, kc_version());
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(cmd, commands[i].name)) {
            int rc = global_options(&argc, argv);
            if (rc) return rc;
            if ((rc = check_environment(cmd))) return rc;
            return commands[i].run(argc - 1, argv + 1);
        }
    if (cmd[0] == '-')
        return cli_error(CLI_EXIT_USAGE, "unknown option '%s'; see 'kerac --help'", cmd);
    return cli_error(CLI_EXIT_USAGE, "unknown command '%s'; commands: train, evaluate, predict, summary, convert, doctor, monitor",
                     cmd);
}
