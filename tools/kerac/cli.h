/* cli.h — private to the `kerac` command line tool: option parsing, exit codes, progress
 * output and .npy files shared by the subcommands. The tool uses only include/kerac.h. */
#ifndef KERAC_CLI_H
#define KERAC_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kerac.h"

/* ---------------------------------------------------------------- exit codes */

enum {
    CLI_EXIT_OK = 0,
    CLI_EXIT_USAGE = 1,   /* unknown option, missing value, bad number */
    CLI_EXIT_INPUT = 2,   /* bad input file: model, dataset, .npy */
    CLI_EXIT_RUNTIME = 3, /* anything else that fails while running */
    CLI_EXIT_INTERRUPTED = 130 /* train: stopped by Ctrl-C (after saving / evaluating) */
};

/* Where a kc_status came from: loading a model / dataset / input file, or running
 * (compile, fit, evaluate, predict, save). */
typedef enum cli_phase { CLI_PHASE_LOAD, CLI_PHASE_RUN } cli_phase;

/* The one place that maps a library status to the tool's exit code. */
int cli_exit_code(kc_status s, cli_phase phase);
/* Print "kerac: <kc_last_error()>" (or the status name when the message is empty) to
 * stderr and return cli_exit_code(s, phase). */
int cli_fail(kc_status s, cli_phase phase);
/* Print "kerac: <formatted text>" to stderr and return code. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---------------------------------------------------------------- options */

typedef struct cli_args {
    int argc;
    char **argv;
    int i;                  /* index of the current argument */
    const char *cmd;        /* subcommand name for messages: "train" */
    const char *arg;        /* the current argument */
    const char *inline_val; /* text after '=' in "--opt=value", else NULL */
    size_t name_len;        /* length of the option name ("--opt") */
    bool positional;        /* current argument is not an option */
    bool after_dashdash;    /* "--" seen: everything else is positional */
} cli_args;

void cli_args_init(cli_args *a, int argc, char **argv, const char *cmd);
/* Advance to the next argument; false when there is none. */
bool cli_args_next(cli_args *a);
/* Is the current argument the option `name` ("--epochs" or "--epochs=3")? */
bool cli_is(const cli_args *a, const char *name);
bool cli_is_help(const cli_args *a); /* --help or -h */
/* The option's value (inline or the next argument). On error prints a usage message
 * and returns CLI_EXIT_USAGE; 0 on success. */
int cli_value(cli_args *a, const char **out);
int cli_int_value(cli_args *a, long min, long max, long *out);
int cli_u64_value(cli_args *a, uint64_t *out);
int cli_double_value(cli_args *a, double min, double max, bool min_exclusive, double *out);
/* A flag must not carry "=value". */
int cli_flag(cli_args *a);
/* Messages for an unknown option / an unexpected extra positional argument. */
int cli_unknown(const cli_args *a);
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Number parsing with validation (also used by the unit checks). 0 on success, -1 when
 * the text is not a number or is out of range. */
int cli_parse_long(const char *text, long min, long max, long *out);
int cli_parse_u64(const char *text, uint64_t *out);
int cli_parse_double(const char *text, double min, double max, bool min_exclusive, double *out);

/* Split "a,b,c" into at most max pieces, copied into buf (n bytes); returns the count or
 * -1 when there are too many or one is empty. */
int cli_split_list(const char *text, char *buf, size_t n, const char **out, int max);

/* ---------------------------------------------------------------- shapes and checks */

/* "(28, 28, 1)" (with_batch: "(None, 28, 28, 1)") into buf. */
const char *cli_shape_str(const kc_shape *s, bool with_batch, char *buf, size_t n);
int64_t cli_shape_size(const kc_shape *s);
/* Shapes equal, or equal once a trailing 1 is dropped from either: (28, 28) ~ (28, 28, 1). */
bool cli_shape_compatible(const kc_shape *a, const kc_shape *b);
/* Before fit/evaluate: does the data fit the model (input shape, labels vs outputs for
 * the cross-entropy losses)? Prints the problem and returns CLI_EXIT_INPUT, or 0. */
int cli_check_data_fits(kc_model *m, const kc_dataset *d, const char *spec, const char *loss);
/* The test split of a training spec ("fashion-mnist" -> "fashion-mnist:test"), in buf;
 * NULL when the kind of data has none (npy, idx) or the spec already names the test split. */
const char *cli_test_spec(const char *train_spec, char *buf, size_t n);
/* Number with thousands separators: 34826 -> "34,826". */
const char *cli_commas(int64_t v, char *buf, size_t n);

/* ---------------------------------------------------------------- progress */

typedef enum cli_output {
    CLI_OUT_BAR,    /* terminal: Keras-style progress bar updated in place */
    CLI_OUT_LINES,  /* not a terminal: one plain line per epoch */
    CLI_OUT_JSON    /* one JSON object per line */
} cli_output;

typedef struct cli_progress {
    cli_output mode;
    bool quiet;           /* no per-epoch / per-batch output */
    int epochs;           /* total, for "Epoch 1/3" */
    FILE *out;
    double last_draw;     /* monotonic seconds of the last bar update */
    int last_len;         /* length of the last bar line (to blank leftovers) */
    volatile sig_atomic_t *interrupt; /* set by SIGINT: ask fit to stop */
    kc_callback cb;
} cli_progress;

/* Initialise and return the callback to hand to kc_fit. */
kc_callback *cli_progress_init(cli_progress *p, cli_output mode, bool quiet, int epochs,
                               volatile sig_atomic_t *interrupt);
/* Write a JSON string literal (quoted, escaped). */
void cli_json_string(FILE *f, const char *s);
/* Write a JSON number; NaN/Inf become null. */
void cli_json_number(FILE *f, double v);
/* ', "<prefix><metric name>": value' for the model's first n metrics. */
void cli_json_metrics(FILE *f, kc_model *m, const char *prefix, const double *values, int n);
/* "<prefix>loss: 0.5123 - <prefix>accuracy: 0.8123 (10000 examples, 1.2s)" on stdout. */
void cli_print_eval(kc_model *m, const kc_eval_result *r, const char *prefix);
/* A loss or metric value as Keras prints it: "0.5123", "1.2340e-05". */
int cli_fmt_value(char *buf, size_t n, double v);
/* Monotonic seconds. */
double cli_now(void);

/* ---------------------------------------------------------------- .npy */

typedef enum cli_npy_dtype { CLI_NPY_F32, CLI_NPY_F64, CLI_NPY_U8 } cli_npy_dtype;

typedef struct cli_npy {
    int ndim;
    int64_t shape[8];
    int64_t count;        /* product of shape */
    float *data;          /* (count) converted to float32; uint8 scaled to [0, 1] */
    cli_npy_dtype dtype;  /* what the file held */
} cli_npy;

/* Read a C-order little-endian float32 / float64 / uint8 array. On failure writes a
 * message naming the file into err (n bytes) and returns -1 (the file cannot be read)
 * or -2 (its content is malformed or unsupported). */
int cli_npy_read(const char *path, cli_npy *out, char *err, size_t n);
void cli_npy_free(cli_npy *a);
/* Write a float32 array of the given shape. 0 or -1 (message in err). */
int cli_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, char *err,
                  size_t n);

/* ---------------------------------------------------------------- device (device_opts.c) */

typedef struct cli_device_opts {
    const char *device;     /* --device: cpu, cuda, cuda:N, auto (NULL: KERAC_DEVICE, else cpu) */
    const char *gpu_memory; /* --gpu-memory: grow, preallocate[=F], limit=SIZE */
    bool cudnn_benchmark;   /* --cudnn-benchmark */
    bool deterministic;     /* --deterministic */
} cli_device_opts;

/* Help lines of the device options, for the subcommands' usage text. */
#define CLI_DEVICE_USAGE                                                                              \
    "  --device D              where to run: cpu, cuda, cuda:N or auto (default: KERAC_DEVICE,\n"    \
    "                          else cpu); auto uses the GPU when it works and otherwise the CPU,\n"  \
    "                          with a warning that says why; cuda stops with the reason instead\n"  \
    "  --gpu-memory MODE       GPU memory: grow (default), preallocate[=FRACTION] (default 0.9 of\n" \
    "                          the free memory, taken at start) or limit=SIZE (e.g. limit=8G)\n"    \
    "  --cudnn-benchmark       time every cuDNN convolution algorithm on the first step and keep\n"  \
    "                          the fastest (default: cuDNN's heuristics)\n"                         \
    "  --deterministic         deterministic cuDNN algorithms only (same results run to run)\n"

/* The current option, if it is a device option: 0 when parsed, an exit code on error, -1
 * when it is not one. */
int cli_device_option(cli_args *a, cli_device_opts *d);
/* The device options of a command: the environment's (kc_device_opts_default) with the
 * ones given on the command line over them. 0, or the exit code after printing why. */
int cli_device_resolve(const cli_device_opts *d, kc_device_opts *out);
/* A model file loaded and built on dev: 0, or the exit code after printing why. */
int cli_load_model(const char *path, const kc_device_opts *dev, kc_model **m);

/* ---------------------------------------------------------------- subcommands */

int cli_cmd_train(int argc, char **argv);
int cli_cmd_evaluate(int argc, char **argv);
int cli_cmd_predict(int argc, char **argv);
int cli_cmd_summary(int argc, char **argv);
int cli_cmd_convert(int argc, char **argv);
int cli_cmd_doctor(int argc, char **argv);  /* exit code: the verdict (0 GPU, 1 CPU, 2 broken) */
int cli_cmd_monitor(int argc, char **argv);

#endif /* KERAC_CLI_H */
