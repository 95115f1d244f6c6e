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
    CLI_EXIT_INTERRUPTED = 130, /* train: stopped by Ctrl-C (after saving / evaluating) */
    CLI_EXIT_TERMINATED = 143   /* train: stopped by SIGTERM (after saving) */
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
/* --help / -h (prints usage, sets *help) or the command's one positional argument (into
 * *slot; a second one is an error): 0 when handled, an exit code on error, -1 when the
 * argument is an option. */
int cli_help_or_positional(cli_args *a, const char *usage, const char **slot, bool *help);
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

/* `kerac train --head SPEC` (head.c): *m becomes the model with a new head after its output,
 * built on dev, with *m's weights and its own layers frozen. 0 or an exit code (said). */
int cli_model_add_head(kc_model **m, const char *spec, const kc_device_opts *dev);

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
    bool big_endian;      /* it was stored big-endian ('>f4') */
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
    /* cpu-speed */
    int cpu_isa;            /* --cpu-isa: kc_cpu_isa + 1 (0: not given) */
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
    "  --deterministic         deterministic cuDNN algorithms only (same results run to run)\n"  \
    "  --cpu-isa SET           the CPU kernels: auto (default: the best the processor runs),\n"   \
    "                          baseline, avx2 or avx512 (default: KERAC_CPU_ISA)\n"

/* The current option, if it is a device option: 0 when parsed, an exit code on error, -1
 * when it is not one. */
int cli_device_option(cli_args *a, cli_device_opts *d);
/* The device options of a command: the environment's (kc_device_opts_default) with the
 * ones given on the command line over them. 0, or the exit code after printing why. */
int cli_device_resolve(const cli_device_opts *d, kc_device_opts *out);
/* A model file loaded and built on dev: 0, or the exit code after printing why. */
int cli_load_model(const char *path, const kc_device_opts *dev, kc_model **m);

/* ---------------------------------------------------------------- images (image_opts.c) */

#define CLI_MAX_CLASSES 1024

typedef struct cli_image_opts {
    kc_image_opts o;                       /* seed comes from --seed when the data is opened */
    bool has_label_mode;
    char class_buf[16384];
    const char *class_ptrs[CLI_MAX_CLASSES];
} cli_image_opts;

#define CLI_IMAGE_USAGE                                                                                  \
    "Folders of images (--data images:DIR, one subfolder per class; Keras's image_dataset_from_directory):\n" \
    "  --image-size H,W        resize every image to H x W (default 256,256)\n"                         \
    "  --color-mode M          grayscale, rgb (default) or rgba\n"                                       \
    "  --interpolation I       bilinear (default), nearest, bicubic or area (no antialiasing)\n"          \
    "  --crop-to-aspect-ratio  crop the centre to the target's aspect ratio before resizing\n"            \
    "  --pad-to-aspect-ratio   pad with black to the target's aspect ratio before resizing\n"             \
    "  --label-mode M          int (default), categorical or binary: picks the default loss\n"          \
    "  --class-names A,B,...   the classes in this order (default: the subfolders, sorted)\n"            \
    "  --loader-threads N      decode threads (default: one per core); any N gives the same data\n"      \
    "  --cache [FILE]          decode once and keep the images in memory, or in FILE (memory-mapped;\n"  \
    "                          reused while the files and options match); default: in memory when\n"  \
    "                          they fit in half the available memory, else decoded every epoch\n"     \
    "  --no-cache              decode every batch again (memory: the loader's ring only)\n"          \
    "  --on-bad-image A        error (default: stop, naming the file) or skip (warn and leave it out)\n" \
    "  --max-pixels N          refuse larger images (default 100000000)\n"                              \
    "  --follow-links          descend into symlinked folders (loops are reported)\n"                   \
    "  --jpeg-dct-scaling      decode JPEGs at 1/2..1/8 size when the target is that small (faster,\n"   \
    "                          pixels differ from Keras's)\n"

bool cli_is_images_spec(const char *spec);
bool cli_ends_with(const char *s, const char *suffix);
/* The current option, if it is an image option: 0 when parsed, an exit code on error, -1
 * when it is not one. */
int cli_image_option(cli_args *a, cli_image_opts *io);
/* kc_dataset_open, or for images:DIR kc_dataset_open_images with the options and seed. */
kc_status cli_open_data(const char *spec, const cli_image_opts *io, uint64_t seed, kc_dataset **out);
/* The loss that goes with Keras's label_mode. */
const char *cli_label_mode_loss(kc_label_mode m);
/* Keras's validation split of a dataset of images: *train becomes its head, *val its tail
 * (0, or the exit code after printing why). */
int cli_images_split(kc_dataset **train, double fraction, kc_dataset **val);
/* Before training on a folder of images: the model's input channels match the colour mode
 * (else the exit code after saying which --color-mode to use), and the model takes the
 * image options and class names, to save them with it. */
int cli_images_fit_model(kc_model *m, const kc_dataset *d, const char *spec);
/* predict_images.c: is the path an image file (by extension) or a folder? */
bool cli_is_image_path(const char *path);
/* Print the top-k classes of each image (a file, or the images of a folder). Exit code. */
int cli_predict_images(kc_model *m, const char *input, int top_k, bool json);
/* How to read images for model m: as it was trained (its saved image options and class
 * names), else sized from its input shape; *classes: its output size. Exit code. */
int cli_model_image_opts(kc_model *m, kc_image_opts *o, int *classes);
/* ---------------------------------------------------------------- observing a run (observe_opts.c) */

typedef struct cli_observe_opts {
    const char *csv;          /* --csv FILE */
    bool csv_append;          /* --csv-append */
    const char *tensorboard;  /* --tensorboard DIR */
    long update_freq;         /* --tensorboard-update-freq: 0 = epoch */
    bool has_update_freq;
    long histogram_freq;      /* --histogram-freq */
    bool check_numerics;      /* --check-numerics */
    const char *profile;      /* --profile FILE */
    long profile_first, profile_last; /* --profile-steps A:B (default 2:11) */
    bool has_profile_steps;
    const char *report;       /* --report FILE */
    const char *data;         /* the training data's spec, for the report */
} cli_observe_opts;

#define CLI_OBSERVE_USAGE                                                                              \
    "  --csv FILE              a row per epoch in Keras's CSVLogger format (epoch, then the\n"        \
    "                          history keys sorted: accuracy, loss, val_accuracy, val_loss)\n"      \
    "  --csv-append            add the rows to an existing --csv file\n"                            \
    "  --tensorboard DIR       TensorBoard event files as Keras writes them: DIR/train and\n"      \
    "                          DIR/validation, epoch_loss, epoch_accuracy, epoch_learning_rate,\n" \
    "                          epoch_images_per_second, ... (tensorboard --logdir DIR)\n"           \
    "  --tensorboard-update-freq N|batch|epoch  also batch_loss, ... every N steps\n"              \
    "  --histogram-freq N      weight histograms every N epochs (with --tensorboard)\n"            \
    "  --check-numerics        stop at the first layer whose forward or backward output holds\n"  \
    "                          NaN or Inf, naming the layer, the step and the tensor (slow)\n"     \
    "  --profile FILE          Chrome trace-event JSON of the steps of --profile-steps: each\n"    \
    "                          layer's forward and backward, loss, optimizer, data waits and\n"    \
    "                          copies, one track per thread (open in ui.perfetto.dev)\n"           \
    "  --profile-steps A:B     the steps to trace, counted from 1 (default 2:11)\n"                \
    "  --report FILE           a self-contained HTML report of the run (curves, per-layer cost,\n" \
    "                          model, device, memory plan); its data goes to run.json in FILE's\n" \
    "                          folder, from which `kerac report DIR` draws it again; times\n"    \
    "                          every layer (on a GPU: a synchronise around each)\n"

struct cli_report;
typedef struct cli_observe {
    kc_callback *cbs[4];
    int n;
    struct cli_report *report;
} cli_observe;

/* The current option, if it is one of these: 0 when parsed, an exit code on error, -1 when
 * it is not one. */
int cli_observe_option(cli_args *a, cli_observe_opts *o);
/* After parsing: options that need another one. 0 or the exit code. */
int cli_observe_check(const char *cmd, const cli_observe_opts *o);
/* Before fit: the callbacks (ob->cbs, ob->n) and model settings. 0 or the exit code. */
int cli_observe_start(const cli_observe_opts *o, kc_model *m, cli_observe *ob);
/* After fit: the trace (and report) files. 0 or the exit code. */
int cli_observe_finish(const cli_observe_opts *o, kc_model *m, const kc_history *h, cli_observe *ob, bool quiet);
void cli_observe_end(cli_observe *ob);

/* ---------------------------------------------------------------- subcommands */

int cli_cmd_train(int argc, char **argv);
int cli_cmd_evaluate(int argc, char **argv);
int cli_cmd_predict(int argc, char **argv);
int cli_cmd_summary(int argc, char **argv);
int cli_cmd_convert(int argc, char **argv);
int cli_cmd_doctor(int argc, char **argv);  /* exit code: the verdict (0 GPU, 1 CPU, 2 broken) */
int cli_cmd_monitor(int argc, char **argv);
int cli_cmd_profile(int argc, char **argv);
int cli_cmd_report(int argc, char **argv);

/* ---- data-parallel training under mpirun / srun (dist.c, dist_watch.c) */
typedef struct cli_dist_peer {
    long pid;
    char host[64];
} cli_dist_peer;
typedef struct cli_dist {
    bool mpi;            /* MPI initialised */
    int rank, size;      /* size 0: not launched by MPI */
    bool drop_remainder; /* --drop-remainder */
    bool deterministic;  /* the device option --deterministic (KERAC_DETERMINISTIC): sums in rank order */
    bool sync_batchnorm; /* --sync-batchnorm */
    double bucket_mb;    /* --bucket-size (MiB; 0: the library's default) */
    double timeout;      /* --collective-timeout seconds (default 300) */
    const char *gpus;    /* --gpus LIST|all: several GPUs in this one process (kc_model_set_gpus) */
    kc_collective coll;
    char err[512];
    /* the requests of the non-blocking sums (MPI_Request, opaque here), their buffers */
    void *reqs;
    float **req_buf, **req_scratch;
    int64_t *req_n;
    int n_reqs, cap_reqs;
    cli_dist_peer *peers; /* (size) every rank's process and host, for the watchdog */
    struct cli_watch *watch;
} cli_dist;
#define CLI_DIST_USAGE \
    "  --drop-remainder        with several ranks or GPUs: drop the examples that do not split\n" \
    "                          evenly over them (default: pad with the epoch order's start)\n" \
    "  --sync-batchnorm        with several ranks or GPUs: BatchNormalization statistics over\n" \
    "                          all their batches (default: each one's own, as Keras)\n" \
    "  --gpus LIST|all         several GPUs in this one process (0,1,... or all): one replica\n" \
    "                          per GPU, --batch-size split across them, gradients summed by\n" \
    "                          NCCL; not with mpirun/srun ranks (there: one GPU per rank)\n" \
    "  --bucket-size MIB       with several ranks or GPUs: gradient all-reduce bucket (default 4)\n" \
    "  --collective-timeout S  under mpirun/srun: stop when another rank does not answer\n" \
    "                          within S seconds (default 300), naming it\n" \
    "                          (--deterministic under mpirun/srun also sums the ranks'\n" \
    "                          gradients in rank order, whatever MPI's algorithm and buckets)\n"
/* --drop-remainder, ...: 0 taken, -1 not this option, else an exit code. */
int cli_dist_option(cli_args *a, cli_dist *d);
/* Detect a launch with several ranks and initialise MPI; rank > 0's stdout is silenced.
 * 0 or an exit code. */
int cli_dist_start(cli_dist *d);
/* The default number of threads per rank; the collective for kc_fit (NULL: one process). */
int cli_dist_threads(const cli_dist *d);
const kc_collective *cli_dist_collective(const cli_dist *d);
/* --gpus: its list into ids (n of them; 0: all), and the device the model is built on
 * (cuda:<first>, in buf); 0 or an exit code (a bad list, --device cpu, mpirun ranks). */
int cli_dist_gpus(const cli_dist *d, const char *device, int *ids, int max, int *n, char *buf, size_t bn);
/* GPU ranks: device "cuda" ("gpu") or "auto" becomes cuda:<local rank mod the GPUs NVML sees>
 * (the local rank from OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID, ...); else device. */
const char *cli_dist_device(const cli_dist *d, const char *device, char *buf, size_t n);
/* Finalize MPI (or, when rc is not 0, abort every rank); returns rc. */
int cli_dist_end(cli_dist *d, int rc);
/* The watchdog (dist_watch.c): a thread that ends this process, naming the ranks that did
 * not answer and what this one was doing, when a blocking collective call lasts longer
 * than d->timeout. begin/end bracket each blocking call (call: "MPI_Allreduce"). */
int cli_watch_start(cli_dist *d);
void cli_watch_doing(cli_dist *d, const char *what);
void cli_watch_begin(cli_dist *d, const char *call);
void cli_watch_end(cli_dist *d);
void cli_watch_stop(cli_dist *d);

#endif /* KERAC_CLI_H */
