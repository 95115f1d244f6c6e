/* cmd_train.c — `kerac train`: fit a model (the default CNN, a model file, or a saved model
 * and its weights with --init-from) on a dataset, evaluate it on the dataset's test split
 * and optionally save it (.keras, .h5, .weights.h5 or .json, by extension). */
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac train [MODEL] [options]\n"
    "\n"
    "Train a model on a dataset, then evaluate it on the dataset's test split.\n"
    "Without MODEL, trains the default CNN (Keras's mnist_convnet) sized from the data.\n"
    "MODEL is a model file: .json (Keras config: training starts from fresh weights),\n"
    ".keras (Keras 3) or .h5 (Keras 2 HDF5): training starts from the saved weights.\n"
    "\n"
    "  --init-from FILE        start from the model and weights saved in FILE (.keras or\n"
    "                          .h5) instead of the default CNN: fine-tune / resume training\n"
    "  --data SPEC             training data (default fashion-mnist):\n"
    "                            fashion-mnist[:DIR]  mnist:DIR  cifar10:DIR\n"
    "                            npy:X.npy,Y.npy  idx:IMAGES,LABELS  images:DIR\n"
    "                          fashion-mnist, mnist and cifar10 are also evaluated on their\n"
    "                          test split after training; npy, idx and images data have none\n"
    "  --test-data SPEC        evaluate on this data after training (e.g. images:TESTDIR)\n"
    "  --epochs N              epochs (default 3)\n"
    "  --batch-size N|auto     examples per optimizer step (default 128); auto: the largest\n"
    "                          multiple of 8 whose planned memory fits the device's free memory\n"
    "                          (less 10%) or --memory-limit, confirmed by one real step\n"
    "  --max-batch-size N      cap for --batch-size auto (default 4096)\n"
    "  --grad-accum K          run each batch as K micro-batches and sum their gradients:\n"
    "                          the same update, a K times smaller memory footprint\n"
    "                          (BatchNormalization statistics are per micro-batch)\n"
    "  --memory-limit SIZE     cap on what kerac allocates on its device, the CPU included\n"
    "                          (512M, 2G, ...; default KERAC_MEMORY_LIMIT or none)\n"
    "  --no-oom-recovery       stop at an out-of-memory error instead of halving the\n"
    "                          micro-batch (and doubling the accumulation) and going on\n"
    "  --optimizer NAME        sgd, adam, adamw or rmsprop (default adam)\n"
    "  --lr X                  learning rate (default: Keras's for the optimizer: 0.01 for\n"
    "                          sgd, 0.001 for the others)\n"
    "  --loss NAME             default: the loss MODEL was compiled with in Keras (its\n"
    "                          compile_config), else sparse_categorical_crossentropy\n"
    "                          (README: labels and targets per loss)\n"
    "  --from-logits           the model outputs logits (Keras's from_logits=True)\n"
    "  --metrics A[,B...]      default accuracy\n"
    "  --head SPEC             put a new head on MODEL's output (a base saved with\n"
    "                          include_top=False) and freeze MODEL's own layers: SPEC is\n"
    "                          CLASS[:ARG...],... as GlobalAveragePooling2D,Dropout:0.2,\n"
    "                          Dense:10:softmax (an ARG is KEY=VALUE, or the units and\n"
    "                          activation of Dense, the rate of Dropout, the name of\n"
    "                          Activation), or a .json file with a list of Keras layer entries\n"
    "  --freeze L[,L...]       do not train these layers (Keras's trainable = False): each L is\n"
    "                          a layer name or, when no layer has it, a prefix (block1_);\n"
    "                          their weights stay, BatchNormalization among them runs in\n"
    "                          inference mode. Layers the model file marks frozen stay so\n"
    "  --trainable-from L      train layer L and every layer after it (frozen in the file or\n"
    "                          not), freeze the ones before: fine-tuning the top of a network;\n"
    "                          --freeze applies after it. --save keeps which layers are frozen\n"
    "  --validation-split F    fraction of the training data held out for validation, taken\n"
    "                          from its end (default 0.1 for the default CNN, 0 for a model file)\n"
    "  --seed N                seed for weights, dropout and shuffling\n"
    "  --threads N             CPU threads (default and 0: KERAC_NUM_THREADS, else OMP_NUM_THREADS, else all cores)\n"
    CLI_DEVICE_USAGE
    CLI_OBSERVE_USAGE
    CLI_DIST_USAGE
    "  --save FILE             save the trained model, format by extension: .keras (Keras 3),\n"
    "                          .h5 (Keras 2 HDF5), .weights.h5 (weights only) or .json\n"
    "                          (the model config only, no weights)\n"
    "  --checkpoint DIR        write checkpoints to DIR while training (made if missing):\n"
    "                          DIR/ckpt-<seq>-e<epoch>-s<step>.keras, Keras 3 model files that\n"
    "                          also hold the optimizer state and kerac's training state;\n"
    "                          each is written to a temporary file and renamed into place\n"
    "  --checkpoint-every N|epoch  every N optimizer steps, or at each epoch end (default)\n"
    "  --keep K                keep the K newest checkpoints (default 1)\n"
    "  --save-best-only        write a checkpoint only when --monitor improved\n"
    "  --monitor NAME          what --save-best-only compares: val_loss (default), loss,\n"
    "                          accuracy, val_accuracy, ... (higher is better for names with\n"
    "                          \"acc\", lower for the others)\n"
    "  --resume DIR            continue the run checkpointed in DIR (its newest checkpoint;\n"
    "                          or give a checkpoint file): model, weights, optimizer, data\n"
    "                          order, position and history. --epochs is the total (default:\n"
    "                          the run's); batch size, seed and validation split are the\n"
    "                          run's. Checkpoints go on into DIR (or --checkpoint) as the\n"
    "                          run wrote them (--checkpoint-every, --keep, ... override).\n"
    "                          On the CPU the result is bit-identical to an uninterrupted run\n"
    "  --json                  one JSON object per line on stdout: one per epoch\n"
    "                          ({\"epoch\", \"loss\", \"accuracy\", \"val_loss\", \"val_accuracy\", \"lr\",\n"
    "                          \"images_per_second\", \"seconds\"}), then {\"test_loss\", \"test_accuracy\"}\n"
    "                          when there is a test split\n"
    "  --quiet                 no per-epoch output, only the final results\n"
    "  -h, --help              show this help\n"
    "\n" CLI_IMAGE_USAGE
    "\n"
    "On a terminal a progress bar shows each epoch; otherwise one line per epoch is printed.\n"
    "Ctrl-C stops training after the current step; the model is still saved and evaluated,\n"
    "and the exit code is 130. SIGTERM (what Slurm and Kubernetes send) does the same without\n"
    "the evaluation, and the exit code is 143. A second signal ends the program at once.\n"
    "With --checkpoint, a checkpoint is written where training stopped, so --resume goes on\n"
    "from there.\n"
    "Exit codes: 0 success, 1 usage error, 2 bad model or data file, 3 training failure,\n"
    "130 interrupted (Ctrl-C), 143 stopped by SIGTERM.\n";

/* ================================================================ the options
 * One row of k_train_opts per option: a value stored at an offset of train_args (checked
 * against a range for numbers), or a function for the options that need more. A new option
 * is a field of train_args, a row here and its lines in `usage`. */

static volatile sig_atomic_t interrupted = 0;
static volatile sig_atomic_t interrupt_signal = 0; /* SIGINT or SIGTERM */

static void on_sigint(int sig) {
    interrupted = 1;
    interrupt_signal = sig;
    signal(sig, SIG_DFL); /* a second Ctrl-C (or SIGTERM) ends the program */
}

static const char *interrupt_name(void) { return interrupt_signal == SIGTERM ? "SIGTERM" : "Ctrl-C"; }

typedef struct train_args {
    const char *model_path;
    const char *init_from;
    const char *data;
    long epochs, batch_size, threads;
    const char *optimizer;
    double lr;
    double validation_split;
    bool has_validation_split;
    uint64_t seed;
    bool has_seed, has_threads;
    const char *save;
    const char *loss;
    const char *metrics[KC_MAX_METRICS];
    int n_metrics;
    char metrics_buf[256];
    bool json, quiet;
    const char *checkpoint, *resume, *monitor; /* checkpoints */
    long keep, every;                          /* every: steps, 0 = each epoch */
    bool has_every, has_keep, save_best_only, has_epochs, has_batch_size, has_compile;
    bool batch_auto, no_oom_recovery;
    long max_batch_size, grad_accum;
    size_t memory_limit; /* --memory-limit, when has_memory_limit */
    bool has_memory_limit;
    cli_device_opts dev;
    cli_image_opts img;    /* --data images:DIR */
    const char *test_data; /* --test-data */
    const char *freeze, *trainable_from, *head; /* transfer learning */
    bool has_loss, from_logits;
    cli_observe_opts obs;
    cli_dist dist;
} train_args;

typedef enum opt_kind {
    OPT_STRING, /* const char * */
    OPT_LONG,   /* long in [min, max] */
    OPT_DOUBLE, /* double in [min, max] (min excluded when min_exclusive) */
    OPT_U64,    /* uint64_t */
    OPT_FLAG,   /* bool, set to true */
    OPT_FUNC    /* parse(a, t) does it all */
} opt_kind;

typedef struct train_opt {
    const char *name, *alias;
    opt_kind kind;
    size_t field;  /* offsetof(train_args, the value) */
    size_t given;  /* GIVEN(a bool of train_args set when the option is given), or 0 */
    double min, max;
    bool min_exclusive;
    bool compile;  /* an option of kc_compile: --resume refuses it */
    int (*parse)(cli_args *a, train_args *t);
} train_opt;

#define AT(f) offsetof(train_args, f)
#define GIVEN(f) (offsetof(train_args, f) + 1) /* + 1: a row left without one has 0 */

static int opt_batch_size(cli_args *a, train_args *t) {
    const char *v = NULL;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (strcmp(v, "auto") == 0)
        t->batch_auto = true;
    else if (cli_parse_long(v, 1, 1 << 20, &t->batch_size))
        return cli_usage_error(a->cmd, "option '--batch-size' needs a whole number from 1 to %d or 'auto', got '%s'",
                               1 << 20, v);
    t->has_batch_size = true;
    return 0;
}

static int opt_memory_limit(cli_args *a, train_args *t) {
    const char *v = NULL;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (kc_parse_size(v, &t->memory_limit) != KC_STATUS_OK) return cli_usage_error(a->cmd, "%s", kc_last_error());
    return 0;
}

static int opt_optimizer(cli_args *a, train_args *t) {
    int rc = cli_value(a, &t->optimizer);
    if (rc) return rc;
    static const char *const known[] = {"sgd", "adam", "adamw", "rmsprop"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(t->optimizer, known[i]) == 0) return 0;
    return cli_usage_error(a->cmd, "unknown optimizer '%s'; use sgd, adam, adamw or rmsprop", t->optimizer);
}

static int opt_metrics(cli_args *a, train_args *t) {
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    t->n_metrics = cli_split_list(v, t->metrics_buf, sizeof t->metrics_buf, t->metrics, KC_MAX_METRICS);
    if (t->n_metrics < 0)
        return cli_usage_error(a->cmd, "option '--metrics' needs 1 to %d names separated by commas, got '%s'",
                               KC_MAX_METRICS, v);
    return 0;
}

static int opt_checkpoint_every(cli_args *a, train_args *t) {
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (strcmp(v, "epoch") == 0) t->every = 0;
    else if (cli_parse_long(v, 1, 1L << 40, &t->every))
        return cli_usage_error(a->cmd, "option '--checkpoint-every' needs a number of steps (1 or more) or "
                               "'epoch', got '%s'", v);
    t->has_every = true;
    return 0;
}

static const train_opt k_train_opts[] = {
    {"--data", NULL, OPT_STRING, AT(data)},
    {"--test-data", NULL, OPT_STRING, AT(test_data)},
    {"--init-from", NULL, OPT_STRING, AT(init_from)},
    {"--epochs", NULL, OPT_LONG, AT(epochs), GIVEN(has_epochs), 1, 1000000},
    {"--batch-size", NULL, OPT_FUNC, .parse = opt_batch_size},
    {"--max-batch-size", NULL, OPT_LONG, AT(max_batch_size), 0, 8, 1 << 20},
    {"--grad-accum", NULL, OPT_LONG, AT(grad_accum), 0, 1, 1 << 16},
    {"--memory-limit", NULL, OPT_FUNC, AT(memory_limit), GIVEN(has_memory_limit), .parse = opt_memory_limit},
    {"--no-oom-recovery", NULL, OPT_FLAG, AT(no_oom_recovery)},
    {"--optimizer", NULL, OPT_FUNC, .compile = true, .parse = opt_optimizer},
    {"--lr", "--learning-rate", OPT_DOUBLE, AT(lr), 0, 0, 1e6, true, .compile = true},
    {"--head", NULL, OPT_STRING, AT(head)},
    {"--freeze", NULL, OPT_STRING, AT(freeze)},
    {"--trainable-from", NULL, OPT_STRING, AT(trainable_from)},
    {"--validation-split", NULL, OPT_DOUBLE, AT(validation_split), GIVEN(has_validation_split), 0, 0.99},
    {"--seed", NULL, OPT_U64, AT(seed), GIVEN(has_seed)},
    {"--threads", NULL, OPT_LONG, AT(threads), GIVEN(has_threads), 0, 4096},
    {"--save", NULL, OPT_STRING, AT(save)},
    {"--loss", NULL, OPT_STRING, AT(loss), GIVEN(has_loss), .compile = true},
    {"--metrics", NULL, OPT_FUNC, .compile = true, .parse = opt_metrics},
    {"--from-logits", NULL, OPT_FLAG, AT(from_logits), .compile = true},
    {"--checkpoint", NULL, OPT_STRING, AT(checkpoint)},
    {"--checkpoint-every", NULL, OPT_FUNC, .parse = opt_checkpoint_every},
    {"--keep", NULL, OPT_LONG, AT(keep), GIVEN(has_keep), 1, 1000000},
    {"--save-best-only", NULL, OPT_FLAG, AT(save_best_only)},
    {"--monitor", NULL, OPT_STRING, AT(monitor)},
    {"--resume", NULL, OPT_STRING, AT(resume)},
    {"--json", NULL, OPT_FLAG, AT(json)},
    {"--quiet", "-q", OPT_FLAG, AT(quiet)},
};

static int apply_opt(const train_opt *o, cli_args *a, train_args *t) {
    char *field = (char *)t + o->field;
    int rc = 0;
    switch (o->kind) {
    case OPT_STRING: rc = cli_value(a, (const char **)(void *)field); break;
    case OPT_LONG: rc = cli_int_value(a, (long)o->min, (long)o->max, (long *)(void *)field); break;
    case OPT_DOUBLE: rc = cli_double_value(a, o->min, o->max, o->min_exclusive, (double *)(void *)field); break;
    case OPT_U64: rc = cli_u64_value(a, (uint64_t *)(void *)field); break;
    case OPT_FLAG:
        if (!(rc = cli_flag(a))) *(bool *)(void *)field = true;
        break;
    case OPT_FUNC: rc = o->parse(a, t); break;
    }
    if (rc) return rc;
    if (o->given) *(bool *)(void *)((char *)t + o->given - 1) = true;
    if (o->compile) t->has_compile = true;
    return 0;
}

/* The options that go together, checked once all are read. */
static int check_args(const train_args *t) {
    if (t->init_from && t->model_path)
        return cli_usage_error("train", "give either a MODEL file or '--init-from FILE', not both");
    if (t->resume && (t->model_path || t->init_from))
        return cli_usage_error("train", "'--resume' takes the model from the checkpoint; give no MODEL or --init-from "
                               "with it");
    if (t->head && !t->model_path && !t->init_from)
        return cli_usage_error("train", "'--head' puts a head on a saved model: give MODEL (or --init-from FILE)");
    if (t->resume && (t->freeze || t->trainable_from || t->head))
        return cli_usage_error("train", "'--resume' goes on with the layers the checkpoint trained; to change them, "
                               "start a new run from the checkpoint with '--init-from CHECKPOINT' and --freeze or "
                               "--trainable-from");
    if (t->resume && t->has_compile)
        return cli_usage_error("train", "'--resume' goes on with the checkpoint's optimizer, loss and metrics; drop "
                               "--optimizer, --lr, --loss and --metrics");
    if (!t->checkpoint && !t->resume && (t->has_every || t->has_keep || t->save_best_only || t->monitor))
        return cli_usage_error("train", "--checkpoint-every, --keep, --save-best-only and --monitor need "
                               "'--checkpoint DIR' (or '--resume DIR')");
    if (t->grad_accum > 1 && !t->batch_auto && (t->has_batch_size || !t->resume) && t->grad_accum > t->batch_size)
        return cli_usage_error("train", "'--grad-accum %ld' splits each batch into %ld micro-batches, more than the %ld "
                               "examples of a batch (--batch-size)", t->grad_accum, t->grad_accum, t->batch_size);
    if (t->monitor && !t->save_best_only)
        return cli_usage_error("train", "'--monitor' names what --save-best-only compares; add --save-best-only");
    if (t->init_from) {
        size_t n = strlen(t->init_from);
        if (n >= 5 && !strcasecmp(t->init_from + n - 5, ".json"))
            return cli_usage_error("train",
                                   "'--init-from %s': a .json file holds no weights; give it as MODEL to train it from "
                                   "fresh weights, or give a .keras or .h5 file",
                                   t->init_from);
    }
    return 0;
}

/* 0, -1 after --help, or the exit code of a usage error. */
static int parse(int argc, char **argv, train_args *t) {
    cli_args a;
    cli_args_init(&a, argc, argv, "train");
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return -1;
        }
        if (a.positional) {
            if (t->model_path) return cli_unknown(&a);
            t->model_path = a.arg;
            continue;
        }
        const train_opt *o = NULL;
        for (size_t i = 0; i < sizeof k_train_opts / sizeof k_train_opts[0] && !o; i++)
            if (cli_is(&a, k_train_opts[i].name) || (k_train_opts[i].alias && cli_is(&a, k_train_opts[i].alias)))
                o = &k_train_opts[i];
        int rc = o ? apply_opt(o, &a, t) : cli_device_option(&a, &t->dev);
        if (rc < 0) rc = cli_image_option(&a, &t->img);
        if (rc < 0) rc = cli_observe_option(&a, &t->obs);
        if (rc < 0) rc = cli_dist_option(&a, &t->dist);
        if (rc < 0) return cli_unknown(&a); /* none of the train, device, image, observe or dist options */
        if (rc) return rc;
    }
    int rc = cli_observe_check(a.cmd, &t->obs);
    return rc ? rc : check_args(t);
}

/* ================================================================ the run
 * cli_cmd_train runs these steps in order, each on the train_run they share, and stops at
 * the first that fails (its exit code, after saying why). */

typedef struct train_run {
    train_args *t;
    kc_device_opts dev;                        /* where the model is built */
    kc_dataset *train, *test, *val;            /* val: images, Keras's split (the tail) */
    const char *test_spec;                     /* the data's test split, or NULL */
    char test_buf[1024];
    const char *model_file;                    /* MODEL or --init-from, or NULL */
    kc_model *m;
    kc_history *h;
    char ckpt_file[4096], ckpt_dir[4096];      /* --resume: the checkpoint and its folder */
    kc_checkpoint_info info;                   /* --resume: where the run stands */
    cli_output mode;
    double split;                              /* validation split */
    bool rank0;                                /* data-parallel: rank 0 alone writes and prints */
    char rank_device[16];                      /* data-parallel: this rank's GPU (cuda:<local rank>), or
                                                  --gpus's first */
    int gpu_ids[64], n_gpus;                   /* --gpus (n_gpus 0: all) */
    cli_observe obs;
} train_run;

/* The default CNN for the data's example shape (H, W) or (H, W, C). */
static int default_model(train_run *r) {
    kc_shape s = kc_dataset_shape(r->train);
    char buf[96];
    if (s.rank != 2 && s.rank != 3)
        return cli_error(CLI_EXIT_INPUT,
                         "the default CNN needs images of shape (H, W) or (H, W, C), but '%s' has examples of "
                         "shape %s; give a MODEL file for this data",
                         r->t->data, cli_shape_str(&s, false, buf, sizeof buf));
    int classes = kc_dataset_num_classes(r->train);
    if (classes < 2) classes = 2;
    kc_status st = kc_default_cnn(s.dim[0], s.dim[1], s.rank == 3 ? s.dim[2] : 1, classes, &r->m);
    if (!st) st = kc_model_set_device_opts(r->m, &r->dev);
    if (st) return cli_fail(st, CLI_PHASE_LOAD);
    return 0;
}

/* --resume: the newest checkpoint of the folder (or the file given), where it stands, and
 * its model, compiled as it was. The run's epochs, batch size and optimizer go into t. */
static int open_resume(train_run *r) {
    train_args *t = r->t;
    kc_status s;
    struct stat st;
    if (stat(t->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((s = kc_checkpoint_latest(t->resume, r->ckpt_file, sizeof r->ckpt_file))) return cli_fail(s, CLI_PHASE_LOAD);
        snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%s", t->resume);
    } else {
        snprintf(r->ckpt_file, sizeof r->ckpt_file, "%s", t->resume);
        const char *slash = strrchr(t->resume, '/');
        if (!slash) snprintf(r->ckpt_dir, sizeof r->ckpt_dir, ".");
        else if (slash == t->resume) snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "/");
        else snprintf(r->ckpt_dir, sizeof r->ckpt_dir, "%.*s", (int)(slash - t->resume), t->resume);
    }
    kc_checkpoint_info *info = &r->info;
    if ((s = kc_checkpoint_read_info(r->ckpt_file, info))) return cli_fail(s, CLI_PHASE_LOAD);
    if (t->has_batch_size && t->batch_size != info->batch_size)
        return cli_usage_error("train", "the run in '%s' was trained with batch size %d; resume it with that "
                               "--batch-size (or none)", r->ckpt_file, info->batch_size);
    if ((s = kc_checkpoint_load_ex(r->ckpt_file, &r->dev, &r->m))) return cli_fail(s, CLI_PHASE_LOAD);
    if (!t->has_epochs) t->epochs = info->epochs;
    t->batch_size = info->batch_size;
    t->optimizer = info->optimizer;
    /* checkpoints go on as the run wrote them, unless told otherwise */
    if (!t->has_every) t->every = (long)info->checkpoint_every_steps;
    if (!t->has_keep) t->keep = info->keep;
    if (!t->save_best_only && !t->monitor && info->save_best_only == KC_TRUE) {
        t->save_best_only = true;
        t->monitor = info->monitor;
    }
    return 0;
}

/* Step 1: the training data and its test split, opened before anything else so that a bad
 * file fails in seconds, not after training. */
static int open_data(train_run *r) {
    kc_status s;
    train_args *t = r->t;
    uint64_t seed = t->has_seed ? t->seed : 0;
    r->test_spec = t->test_data ? t->test_data : cli_test_spec(t->data, r->test_buf, sizeof r->test_buf);
    if (!t->has_loss && t->img.has_label_mode) t->loss = cli_label_mode_loss(t->img.o.label_mode);
    if ((s = cli_open_data(t->data, &t->img, seed, &r->train))) return cli_fail(s, CLI_PHASE_LOAD);
    if (r->test_spec && (s = cli_open_data(r->test_spec, &t->img, seed, &r->test))) return cli_fail(s, CLI_PHASE_LOAD);
    return 0;
}

/* --trainable-from, then --freeze: which layers train. */
static int set_trainable(train_run *r) {
    const train_args *t = r->t;
    kc_status s = KC_STATUS_OK;
    if (t->trainable_from) s = kc_model_set_trainable_from(r->m, t->trainable_from);
    if (!s && t->freeze) {
        char buf[4096];
        const char *names[256];
        int n = cli_split_list(t->freeze, buf, sizeof buf, names, 256);
        if (n < 0)
            return cli_usage_error("train", "option '--freeze' needs 1 to 256 layer names or prefixes separated by "
                                   "commas, got '%s'", t->freeze);
        for (int i = 0; i < n && !s; i++) s = kc_model_set_trainable(r->m, names[i], 0);
    }
    if (s) return s == KC_STATUS_INVALID_ARGUMENT ? cli_usage_error("train", "%s", kc_last_error())
                                                  : cli_fail(s, CLI_PHASE_LOAD);
    return 0;
}

/* Step 2: the model (a checkpoint's, a file's or the default CNN) built on its device,
 * and the data checked against it. */
static int open_model(train_run *r) {
    train_args *t = r->t;
    int rc = cli_device_resolve(&t->dev, &r->dev);
    if (rc) return rc;
    if (t->dist.gpus) { /* several GPUs in this process: the model is replica 0, on the first */
        if ((rc = cli_dist_gpus(&t->dist, r->dev.device, r->gpu_ids, 64, &r->n_gpus, r->rank_device,
                                sizeof r->rank_device)))
            return rc;
        r->dev.device = r->rank_device;
    } else {
        r->dev.device = cli_dist_device(&t->dist, r->dev.device, r->rank_device, sizeof r->rank_device);
    }
    t->dist.deterministic = r->dev.deterministic == KC_TRUE; /* the ranks' sums too */
    if (t->has_memory_limit) r->dev.memory_limit = t->memory_limit;
    r->model_file = t->init_from ? t->init_from : t->model_path;
    kc_status s;
    if (t->resume) {
        if ((rc = open_resume(r))) return rc;
    } else if (r->model_file) {
        if ((s = kc_model_load_ex(r->model_file, &r->dev, &r->m))) return cli_fail(s, CLI_PHASE_LOAD);
    } else if ((rc = default_model(r))) {
        return rc;
    }
    /* a loaded model has its weights already: the seed then drives shuffling and dropout */
    if (t->has_seed && !r->model_file && !t->resume && (s = kc_model_set_seed(r->m, t->seed)))
        return cli_fail(s, CLI_PHASE_RUN);
    if ((s = kc_model_build(r->m))) return cli_fail(s, CLI_PHASE_LOAD);
    if (t->head && (rc = cli_model_add_head(&r->m, t->head, &r->dev))) return rc;
    if ((rc = set_trainable(r))) return rc;
    if (t->dist.gpus && (s = kc_model_set_gpus(r->m, r->n_gpus ? r->gpu_ids : NULL, r->n_gpus)))
        return s == KC_STATUS_INVALID_ARGUMENT ? cli_usage_error("train", "--gpus %s: %s", t->dist.gpus, kc_last_error())
                                               : cli_fail(s, CLI_PHASE_LOAD);
    if (cli_is_images_spec(t->data) && (rc = cli_images_fit_model(r->m, r->train, t->data))) return rc;
    if ((rc = cli_check_data_fits(r->m, r->train, t->data, t->loss))) return rc;
    if (r->test && (rc = cli_check_data_fits(r->m, r->test, r->test_spec, t->loss))) return rc;
    return 0;
}

/* Step 3: compile (a resumed model is compiled as it was). */
static int compile_model(train_run *r) {
    train_args *t = r->t;
    if (t->resume) return 0;
    kc_compile_opts co = {.optimizer = {.name = t->optimizer, .learning_rate = t->lr}, .loss = t->loss,
                          .from_logits = t->from_logits ? KC_TRUE : KC_DEFAULT};
    int saved_logits = 0; /* no --loss: the loss the file was compiled with in Keras, when it has one */
    if (!t->has_loss && !t->img.has_label_mode && kc_model_saved_loss(r->m, &co.loss, &saved_logits) && saved_logits)
        co.from_logits = KC_TRUE;
    if (t->n_metrics > 0)
        for (int i = 0; i < t->n_metrics; i++) co.metrics[i] = t->metrics[i];
    else
        co.metrics[0] = "accuracy";
    kc_status s = kc_compile(r->m, &co);
    if (!s) return 0;
    int rc = cli_fail(s, CLI_PHASE_RUN);
    return s == KC_STATUS_INVALID_ARGUMENT ? CLI_EXIT_USAGE : rc; /* a bad --loss / --metrics */
}

/* Step 3b: the labels against the compiled model's output and loss (a binary head, one-hot
 * targets, per-pixel masks ...): refused now, as a bad input, not after the header. */
static int check_labels(train_run *r) {
    kc_status s = kc_model_check_data(r->m, r->train);
    if (!s && r->test) s = kc_model_check_data(r->m, r->test);
    if (!s) return 0;
    cli_fail(s, CLI_PHASE_LOAD);
    return CLI_EXIT_INPUT;
}

/* Step 4, --save: try the format and the folder now, on a scratch file next to the target,
 * so that an unsupported extension or a read-only folder fails before training, not after. */
static int probe_save(train_run *r) {
    const char *save = r->t->save;
    if (!save || !r->rank0) return 0;
    const char *slash = strrchr(save, '/'), *dot = strrchr(save, '.');
    const char *ext = dot && (!slash || dot > slash) ? dot : "";
    char probe[4096];
    if (snprintf(probe, sizeof probe, "%s.kerac-check-%ld%s", save, (long)getpid(), ext) >= (int)sizeof probe)
        return cli_usage_error("train", "the --save path is too long");
    kc_status s = kc_model_save(r->m, probe);
    remove(probe);
    if (!s) return 0;
    /* report it under the name the user gave */
    const char *msg = kc_last_error(), *hit;
    size_t plen = strlen(probe);
    fputs("kerac: ", stderr);
    while ((hit = strstr(msg, probe)) != NULL) {
        fwrite(msg, 1, (size_t)(hit - msg), stderr);
        fputs(save, stderr);
        msg = hit + plen;
    }
    fprintf(stderr, "%s\n", msg);
    return cli_exit_code(s, CLI_PHASE_RUN);
}

/* Step 5: how the run goes out, and its first lines (not with --json or --quiet). */
static int print_header(train_run *r) {
    const train_args *t = r->t;
    r->mode = t->json ? CLI_OUT_JSON : isatty(fileno(stdout)) ? CLI_OUT_BAR : CLI_OUT_LINES;
    r->split = t->has_validation_split ? t->validation_split : r->model_file || t->resume ? 0.0 : 0.1;
    int rc;
    if (r->split > 0 && cli_is_images_spec(t->data) && (rc = cli_images_split(&r->train, r->split, &r->val))) return rc;
    if (r->mode == CLI_OUT_JSON || t->quiet) return 0;
    char p[32], bs[32], tp[48] = "";
    int64_t params = 0, trainable = 0;
    for (int i = 0, n = kc_model_num_layers(r->m); i < n; i++) {
        kc_layer_info li;
        if (kc_model_layer_info(r->m, i, &li) == KC_STATUS_OK) params += li.params, trainable += li.trainable_params;
    }
    if (t->freeze || t->trainable_from || t->head) { /* say what trains */
        char c[32];
        snprintf(tp, sizeof tp, ", %s trainable", cli_commas(trainable, c, sizeof c));
    }
    printf("training '%s' (%s params%s) on '%s': %lld examples", kc_model_name(r->m), cli_commas(params, p, sizeof p),
           tp, t->data, (long long)kc_dataset_size(r->train));
    if (r->split > 0) printf(", validation split %g", r->split);
    if (t->batch_auto) snprintf(bs, sizeof bs, "auto");
    else snprintf(bs, sizeof bs, "%ld", t->batch_size);
    printf(", %ld epoch%s, batch size %s", t->epochs, t->epochs == 1 ? "" : "s", bs);
    if (t->grad_accum > 1) printf(" (%ld micro-batches)", t->grad_accum);
    printf(", %s, on %s", t->optimizer, kc_model_device(r->m));
    if (t->dist.gpus && (strchr(t->dist.gpus, ',') || strcmp(t->dist.gpus, "all") == 0))
        printf(" and the other GPUs of --gpus %s (one replica each)", t->dist.gpus);
    putchar('\n');
    if (t->resume)
        printf("resuming from '%s': %d of %ld epochs done, %lld steps into the next (%lld optimizer steps)\n",
               r->ckpt_file, r->info.epoch, t->epochs, (long long)r->info.step, (long long)r->info.iterations);
    fflush(stdout);
    return 0;
}

/* The fit options from the command line. */
static void fit_opts(const train_run *r, kc_fit_opts *fo) {
    const train_args *t = r->t;
    fo->epochs = (int)t->epochs;
    fo->batch_size = t->batch_auto ? KC_BATCH_SIZE_AUTO : (int)t->batch_size;
    fo->validation_split = r->split;
    fo->seed = t->has_seed ? t->seed : 0;
    if (r->val) fo->validation_data = r->val, fo->validation_split = 0;
    fo->checkpoint_dir = !r->rank0 ? NULL : t->checkpoint ? t->checkpoint : t->resume ? r->ckpt_dir : NULL;
    fo->checkpoint_every_steps = t->every;
    fo->keep = (int)t->keep;
    fo->save_best_only = t->save_best_only ? KC_TRUE : KC_DEFAULT;
    fo->monitor = t->monitor;
    fo->resume_from = t->resume ? r->ckpt_file : NULL;
    fo->max_batch_size = (int)t->max_batch_size;
    fo->grad_accum = (int)t->grad_accum;
    if (t->no_oom_recovery) fo->oom_recovery = KC_FALSE;
    fo->collective = cli_dist_collective(&t->dist);
    fo->drop_remainder = t->dist.drop_remainder ? KC_TRUE : KC_DEFAULT;
    fo->bucket_bytes = (int64_t)(t->dist.bucket_mb * 1048576.0);
    fo->sync_batchnorm = t->dist.sync_batchnorm ? KC_TRUE : KC_DEFAULT;
}

/* Why training ended before its last epoch, if it did. */
static void report_stop(const train_run *r) {
    int epochs = r->h ? kc_history_epochs(r->h) : 0;
    if (r->mode == CLI_OUT_JSON) {
        if (interrupted)
            fprintf(stderr, "kerac: training interrupted (%s) after %d epoch%s\n", interrupt_name(), epochs,
                    epochs == 1 ? "" : "s");
        return;
    }
    const char *why = r->h ? kc_history_stop_reason(r->h) : "";
    if (interrupted)
        printf("training interrupted (%s) after %d epoch%s\n", interrupt_name(), epochs, epochs == 1 ? "" : "s");
    else if (why && why[0])
        printf("training stopped early by %s after %d epochs\n", why, epochs);
}

/* Step 6: fit, with the progress callback and the observers (--csv, --tensorboard,
 * --profile, --report); Ctrl-C or SIGTERM stops after the current step. */
static int run_fit(train_run *r) {
    cli_progress prog;
    kc_callback *cb = cli_progress_init(&prog, r->mode, r->t->quiet, (int)r->t->epochs, &interrupted);
    kc_callback *cbs[1 + sizeof r->obs.cbs / sizeof r->obs.cbs[0]] = {cb};
    r->t->obs.data = r->t->data;
    int rc = cli_observe_start(&r->t->obs, r->m, &r->obs);
    if (rc) return rc;
    for (int i = 0; i < r->obs.n; i++) cbs[1 + i] = r->obs.cbs[i];
    kc_fit_opts fo = {.callbacks = cbs, .num_callbacks = 1 + r->obs.n};
    fit_opts(r, &fo);
    void (*old_handler)(int) = signal(SIGINT, on_sigint);
    void (*old_term)(int) = signal(SIGTERM, on_sigint);
    kc_status s = kc_fit(r->m, r->train, &fo, &r->h);
    signal(SIGINT, old_handler == SIG_ERR ? SIG_DFL : old_handler);
    signal(SIGTERM, old_term == SIG_ERR ? SIG_DFL : old_term);
    if (s) return cli_fail(s, CLI_PHASE_RUN);
    if ((rc = cli_observe_finish(&r->t->obs, r->m, r->h, &r->obs, r->mode == CLI_OUT_JSON || r->t->quiet))) return rc;
    report_stop(r);
    return 0;
}

/* Step 7: --save. */
static int save_model(train_run *r) {
    const char *save = r->t->save;
    if (!save || !r->rank0) return 0;
    kc_status s = kc_model_save(r->m, save);
    if (s) return cli_fail(s, CLI_PHASE_RUN);
    if (r->mode != CLI_OUT_JSON) {
        size_t n = strlen(save);
        bool json = n >= 5 && !strcasecmp(save + n - 5, ".json");
        bool weights = n >= 11 && !strcasecmp(save + n - 11, ".weights.h5");
        printf("saved model to '%s'%s\n", save,
               json ? " (the model config only, no weights)" : weights ? " (the weights only)" : "");
    }
    return 0;
}

/* Step 8: evaluate on the test split, if the data has one. */
static int evaluate_test(train_run *r) {
    if (r->test && r->rank0 && interrupt_signal != SIGTERM) { /* a scheduler's grace period is short */
        kc_eval_result e;
        /* evaluate with the micro-batch training used: it is known to fit */
        int batch = (int)r->t->batch_size;
        if (r->h && kc_history_epochs(r->h) > 0) batch = kc_history_epoch(r->h, kc_history_epochs(r->h) - 1)->micro_batch;
        kc_status s = kc_evaluate(r->m, r->test, batch > 0 ? batch : 128, &e);
        if (s) return cli_fail(s, CLI_PHASE_RUN);
        if (r->mode == CLI_OUT_JSON) {
            fputs("{\"test_loss\": ", stdout);
            cli_json_number(stdout, e.loss);
            cli_json_metrics(stdout, r->m, "test_", e.metrics, e.num_metrics);
            fputs("}\n", stdout);
        } else {
            cli_print_eval(r->m, &e, "test_");
        }
    }
    fflush(stdout);
    return 0;
}

/* The steps of one process's run (under MPI, each rank's). */
static int train(train_args *t) {
    train_run r = {.t = t, .rank0 = t->dist.rank == 0};
    if (!r.rank0) /* data-parallel: rank 0 alone writes the CSV, TensorBoard, profile and report files */
        t->obs.csv = t->obs.tensorboard = t->obs.profile = t->obs.report = NULL;
    if (t->dist.size > 1 && !t->has_threads) kc_set_num_threads(cli_dist_threads(&t->dist));
    if (t->has_threads) kc_set_num_threads((int)t->threads);

    static int (*const steps[])(train_run *) = {open_data,    open_model, compile_model, check_labels, probe_save,
                                                print_header, run_fit,    save_model,    evaluate_test};
    int rc = 0;
    for (size_t i = 0; i < sizeof steps / sizeof steps[0] && !rc; i++) rc = steps[i](&r);
    /* the model was saved and evaluated, but the run did not finish: say so to scripts */
    if (!rc && interrupted) rc = interrupt_signal == SIGTERM ? CLI_EXIT_TERMINATED : CLI_EXIT_INTERRUPTED;
    cli_observe_end(&r.obs);
    kc_history_destroy(r.h);
    kc_model_destroy(r.m);
    kc_dataset_destroy(r.test);
    kc_dataset_destroy(r.val);
    kc_dataset_destroy(r.train);
    return rc;
}

int cli_cmd_train(int argc, char **argv) {
    train_args t = {.data = "fashion-mnist", .epochs = 3, .batch_size = 128, .optimizer = "adam",
                    .loss = "sparse_categorical_crossentropy"};
    int rc = parse(argc, argv, &t);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = cli_dist_start(&t.dist))) return rc;
    return cli_dist_end(&t.dist, train(&t));
}
