/* cmd_train.c — `kerac train`: fit a model (the default CNN, a model file, or a saved model
 * and its weights with --init-from) on a dataset, evaluate it on the dataset's test split
 * and optionally save it (.keras, .h5, .weights.h5 or .json, by extension). */
#include <signal.h>
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
    "  --loss NAME             default sparse_categorical_crossentropy\n"
    "  --metrics A[,B...]      default accuracy\n"
    "  --validation-split F    fraction of the training data held out for validation, taken\n"
    "                          from its end (default 0.1 for the default CNN, 0 for a model file)\n"
    "  --seed N                seed for weights, dropout and shuffling\n"
    "  --threads N             CPU threads (default: all cores; 0 = all)\n"
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
    const char *memory_limit;
    cli_device_opts dev;
    cli_image_opts img;     /* --data images:DIR */
    const char *test_data;  /* --test-data */
    bool has_loss;
    cli_observe_opts obs;
    cli_dist dist;
} train_args;

static int parse(int argc, char **argv, train_args *t) {
    cli_args a;
    cli_args_init(&a, argc, argv, "train");
    int rc;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return -1;
        } else if (a.positional) {
            if (t->model_path) return cli_unknown(&a);
            t->model_path = a.arg;
        } else if (cli_is(&a, "--data")) {
            if ((rc = cli_value(&a, &t->data))) return rc;
        } else if (cli_is(&a, "--test-data")) {
            if ((rc = cli_value(&a, &t->test_data))) return rc;
        } else if ((rc = cli_image_option(&a, &t->img)) >= 0) {
            if (rc) return rc;
        } else if (cli_is(&a, "--init-from")) {
            if ((rc = cli_value(&a, &t->init_from))) return rc;
        } else if (cli_is(&a, "--epochs")) {
            if ((rc = cli_int_value(&a, 1, 1000000, &t->epochs))) return rc;
            t->has_epochs = true;
        } else if (cli_is(&a, "--batch-size")) {
            const char *v = NULL;
            if ((rc = cli_value(&a, &v))) return rc;
            if (strcmp(v, "auto") == 0)
                t->batch_auto = true;
            else if (cli_parse_long(v, 1, 1 << 20, &t->batch_size))
                return cli_usage_error(a.cmd, "option '--batch-size' needs a whole number from 1 to %d or 'auto', got '%s'",
                                       1 << 20, v);
            t->has_batch_size = true;
        } else if (cli_is(&a, "--max-batch-size")) {
            if ((rc = cli_int_value(&a, 8, 1 << 20, &t->max_batch_size))) return rc;
        } else if (cli_is(&a, "--grad-accum")) {
            if ((rc = cli_int_value(&a, 1, 1 << 16, &t->grad_accum))) return rc;
        } else if (cli_is(&a, "--memory-limit")) {
            if ((rc = cli_value(&a, &t->memory_limit))) return rc;
            size_t bytes;
            if (kc_parse_size(t->memory_limit, &bytes) != KC_STATUS_OK)
                return cli_usage_error(a.cmd, "%s", kc_last_error());
        } else if (cli_is(&a, "--no-oom-recovery")) {
            if ((rc = cli_flag(&a))) return rc;
            t->no_oom_recovery = true;
        } else if (cli_is(&a, "--optimizer")) {
            if ((rc = cli_value(&a, &t->optimizer))) return rc;
            t->has_compile = true;
            if (strcmp(t->optimizer, "sgd") && strcmp(t->optimizer, "adam") && strcmp(t->optimizer, "adamw") &&
                strcmp(t->optimizer, "rmsprop"))
                return cli_usage_error(a.cmd, "unknown optimizer '%s'; use sgd, adam, adamw or rmsprop",
                                       t->optimizer);
        } else if (cli_is(&a, "--lr") || cli_is(&a, "--learning-rate")) {
            if ((rc = cli_double_value(&a, 0, 1e6, true, &t->lr))) return rc;
            t->has_compile = true;
        } else if (cli_is(&a, "--validation-split")) {
            if ((rc = cli_double_value(&a, 0, 0.99, false, &t->validation_split))) return rc;
            t->has_validation_split = true;
        } else if (cli_is(&a, "--seed")) {
            if ((rc = cli_u64_value(&a, &t->seed))) return rc;
            t->has_seed = true;
        } else if (cli_is(&a, "--threads")) {
            if ((rc = cli_int_value(&a, 0, 4096, &t->threads))) return rc;
            t->has_threads = true;
        } else if (cli_is(&a, "--save")) {
            if ((rc = cli_value(&a, &t->save))) return rc;
        } else if (cli_is(&a, "--loss")) {
            if ((rc = cli_value(&a, &t->loss))) return rc;
            t->has_loss = true;
            t->has_compile = true;
        } else if (cli_is(&a, "--metrics")) {
            const char *v;
            if ((rc = cli_value(&a, &v))) return rc;
            t->n_metrics = cli_split_list(v, t->metrics_buf, sizeof t->metrics_buf, t->metrics, KC_MAX_METRICS);
            if (t->n_metrics < 0)
                return cli_usage_error(a.cmd, "option '--metrics' needs 1 to %d names separated by commas, got '%s'",
                                       KC_MAX_METRICS, v);
            t->has_compile = true;
        } else if (cli_is(&a, "--checkpoint")) {
            if ((rc = cli_value(&a, &t->checkpoint))) return rc;
        } else if (cli_is(&a, "--checkpoint-every")) {
            const char *v;
            if ((rc = cli_value(&a, &v))) return rc;
            if (strcmp(v, "epoch") == 0) t->every = 0;
            else if (cli_parse_long(v, 1, 1L << 40, &t->every))
                return cli_usage_error(a.cmd, "option '--checkpoint-every' needs a number of steps (1 or more) or "
                                       "'epoch', got '%s'", v);
            t->has_every = true;
        } else if (cli_is(&a, "--keep")) {
            if ((rc = cli_int_value(&a, 1, 1000000, &t->keep))) return rc;
            t->has_keep = true;
        } else if (cli_is(&a, "--save-best-only")) {
            if ((rc = cli_flag(&a))) return rc;
            t->save_best_only = true;
        } else if (cli_is(&a, "--monitor")) {
            if ((rc = cli_value(&a, &t->monitor))) return rc;
        } else if (cli_is(&a, "--resume")) {
            if ((rc = cli_value(&a, &t->resume))) return rc;
        } else if (cli_is(&a, "--json")) {
            if ((rc = cli_flag(&a))) return rc;
            t->json = true;
        } else if (cli_is(&a, "--quiet") || cli_is(&a, "-q")) {
            if ((rc = cli_flag(&a))) return rc;
            t->quiet = true;
        } else if ((rc = cli_device_option(&a, &t->dev)) >= 0) {
            if (rc) return rc;
        } else if ((rc = cli_observe_option(&a, &t->obs)) >= 0) {
            if (rc) return rc;
        } else if ((rc = cli_dist_option(&a, &t->dist)) >= 0) {
            if (rc) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    if ((rc = cli_observe_check(a.cmd, &t->obs))) return rc;
    if (t->init_from && t->model_path)
        return cli_usage_error(a.cmd, "give either a MODEL file or '--init-from FILE', not both");
    if (t->resume && (t->model_path || t->init_from))
        return cli_usage_error(a.cmd, "'--resume' takes the model from the checkpoint; give no MODEL or --init-from "
                               "with it");
    if (t->resume && t->has_compile)
        return cli_usage_error(a.cmd, "'--resume' goes on with the checkpoint's optimizer, loss and metrics; drop "
                               "--optimizer, --lr, --loss and --metrics");
    if (!t->checkpoint && !t->resume && (t->has_every || t->has_keep || t->save_best_only || t->monitor))
        return cli_usage_error(a.cmd, "--checkpoint-every, --keep, --save-best-only and --monitor need "
                               "'--checkpoint DIR' (or '--resume DIR')");
    if (t->grad_accum > 1 && !t->batch_auto && (t->has_batch_size || !t->resume) && t->grad_accum > t->batch_size)
        return cli_usage_error(a.cmd, "'--grad-accum %ld' splits each batch into %ld micro-batches, more than the %ld "
                               "examples of a batch (--batch-size)", t->grad_accum, t->grad_accum, t->batch_size);
    if (t->monitor && !t->save_best_only)
        return cli_usage_error(a.cmd, "'--monitor' names what --save-best-only compares; add --save-best-only");
    if (t->init_from) {
        size_t n = strlen(t->init_from);
        if (n >= 5 && !strcasecmp(t->init_from + n - 5, ".json"))
            return cli_usage_error(a.cmd,
                                   "'--init-from %s': a .json file holds no weights; give it as MODEL to train it from "
                                   "fresh weights, or give a .keras or .h5 file",
                                   t->init_from);
    }
    return 0;
}

/* The default CNN for the data's example shape (H, W) or (H, W, C). */
static int default_model(const kc_dataset *d, const char *spec, kc_model **m) {
    kc_shape s = kc_dataset_shape(d);
    char buf[96];
    if (s.rank != 2 && s.rank != 3)
        return cli_error(CLI_EXIT_INPUT,
                         "the default CNN needs images of shape (H, W) or (H, W, C), but '%s' has examples of "
                         "shape %s; give a MODEL file for this data",
                         spec, cli_shape_str(&s, false, buf, sizeof buf));
    int classes = kc_dataset_num_classes(d);
    if (classes < 2) classes = 2;
    kc_status st = kc_default_cnn(s.dim[0], s.dim[1], s.rank == 3 ? s.dim[2] : 1, classes, m);
    if (st) return cli_fail(st, CLI_PHASE_LOAD);
    return 0;
}

/* --resume: the newest checkpoint of the folder (or the file given), where it stands, and
 * its model, compiled as it was. The run's epochs, batch size and optimizer go into t. */
static int open_resume(train_args *t, char *file, size_t n, char *dir, size_t dn, kc_checkpoint_info *info,
                       kc_model **m) {
    kc_status s;
    struct stat st;
    if (stat(t->resume, &st) == 0 && S_ISDIR(st.st_mode)) {
        if ((s = kc_checkpoint_latest(t->resume, file, n))) return cli_fail(s, CLI_PHASE_LOAD);
        snprintf(dir, dn, "%s", t->resume);
    } else {
        snprintf(file, n, "%s", t->resume);
        const char *slash = strrchr(t->resume, '/');
        if (!slash) snprintf(dir, dn, ".");
        else if (slash == t->resume) snprintf(dir, dn, "/");
        else snprintf(dir, dn, "%.*s", (int)(slash - t->resume), t->resume);
    }
    if ((s = kc_checkpoint_read_info(file, info))) return cli_fail(s, CLI_PHASE_LOAD);
    if (t->has_batch_size && t->batch_size != info->batch_size)
        return cli_usage_error("train", "the run in '%s' was trained with batch size %d; resume it with that "
                               "--batch-size (or none)", file, info->batch_size);
    if ((s = kc_checkpoint_load(file, m))) return cli_fail(s, CLI_PHASE_LOAD);
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

static void print_eval_human(kc_model *m, const kc_eval_result *r, const char *prefix) {
    char v[32];
    cli_fmt_value(v, sizeof v, r->loss);
    printf("%sloss: %s", prefix, v);
    int nm = r->num_metrics < KC_MAX_METRICS ? r->num_metrics : KC_MAX_METRICS;
    for (int i = 0; i < nm; i++) {
        cli_fmt_value(v, sizeof v, r->metrics[i]);
        printf(" - %s%s: %s", prefix, kc_model_metric_name(m, i), v);
    }
    printf(" (%lld examples, %.1fs)\n", (long long)r->samples, r->seconds);
}

static int train(train_args *p);

int cli_cmd_train(int argc, char **argv) {
    train_args t = {.data = "fashion-mnist", .epochs = 3, .batch_size = 128, .optimizer = "adam",
                    .loss = "sparse_categorical_crossentropy"};
    int rc = parse(argc, argv, &t);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if ((rc = cli_dist_start(&t.dist))) return rc;
    return cli_dist_end(&t.dist, train(&t));
}

static int train(train_args *p) {
    train_args t = *p;
    int rc = 0;
    bool rank0 = t.dist.rank == 0;
    if (!rank0) /* data-parallel: rank 0 alone writes the CSV, TensorBoard, profile and report files */
        t.obs.csv = t.obs.tensorboard = t.obs.profile = t.obs.report = NULL;
    if (t.dist.size > 1 && !t.has_threads) kc_set_num_threads(cli_dist_threads(&t.dist));
    if (t.has_threads) kc_set_num_threads((int)t.threads);
    cli_device_apply(&t.dev);

    kc_dataset *train = NULL, *test = NULL, *val = NULL; /* val: images, Keras's split (the tail) */
    kc_model *m = NULL;
    kc_history *h = NULL;
    cli_observe obs = {0};
    kc_status s;
    char test_buf[1024];
    char ckpt_file[4096] = "", ckpt_dir[4096] = ""; /* --resume */
    kc_checkpoint_info info = {0};
    const char *test_spec = t.test_data ? t.test_data : cli_test_spec(t.data, test_buf, sizeof test_buf);
    if (!t.has_loss && t.img.has_label_mode) t.loss = cli_label_mode_loss(t.img.o.label_mode);

    /* open everything before training so that a bad file fails in seconds, not after */
    if ((s = cli_open_data(t.data, &t.img, t.has_seed ? t.seed : 0, &train))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    if (test_spec && (s = cli_open_data(test_spec, &t.img, t.has_seed ? t.seed : 0, &test))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    const char *model_file = t.init_from ? t.init_from : t.model_path;
    if (t.resume) {
        if ((rc = open_resume(&t, ckpt_file, sizeof ckpt_file, ckpt_dir, sizeof ckpt_dir, &info, &m))) goto done;
    } else if (model_file) {
        if ((s = kc_model_load(model_file, &m))) {
            rc = cli_fail(s, CLI_PHASE_LOAD);
            goto done;
        }
    } else if ((rc = default_model(train, t.data, &m))) {
        goto done;
    }
    /* a loaded model has its weights already: the seed then drives shuffling and dropout */
    if (t.has_seed && !model_file && !t.resume && (s = kc_model_set_seed(m, t.seed))) {
        rc = cli_fail(s, CLI_PHASE_RUN);
        goto done;
    }
    if ((rc = cli_device_set(m, &t.dev))) goto done;
    if (t.memory_limit) {
        size_t bytes = 0;
        kc_parse_size(t.memory_limit, &bytes); /* validated while parsing */
        kc_model_set_memory_limit(m, bytes);
    }
    if ((s = kc_model_build(m))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    if (cli_is_images_spec(t.data) && (rc = cli_images_fit_model(m, train, t.data))) goto done;
    if ((rc = cli_check_data_fits(m, train, t.data, t.loss))) goto done;
    if (test && (rc = cli_check_data_fits(m, test, test_spec, t.loss))) goto done;

    kc_compile_opts co = {.optimizer = {.name = t.optimizer, .learning_rate = t.lr}, .loss = t.loss};
    if (t.n_metrics > 0)
        for (int i = 0; i < t.n_metrics; i++) co.metrics[i] = t.metrics[i];
    else
        co.metrics[0] = "accuracy";
    if (!t.resume && (s = kc_compile(m, &co))) { /* a resumed model is compiled as it was */
        /* a bad --loss / --metrics value is a usage error */
        rc = cli_fail(s, CLI_PHASE_RUN);
        if (s == KC_STATUS_INVALID_ARGUMENT) rc = CLI_EXIT_USAGE;
        goto done;
    }

    /* --save: try the format and the folder now, on a scratch file next to the target, so
     * that an unsupported extension or a read-only folder fails before training, not after */
    if (t.save && rank0) {
        const char *slash = strrchr(t.save, '/'), *dot = strrchr(t.save, '.');
        const char *ext = dot && (!slash || dot > slash) ? dot : "";
        char probe[4096];
        if (snprintf(probe, sizeof probe, "%s.kerac-check-%ld%s", t.save, (long)getpid(), ext) >= (int)sizeof probe) {
            rc = cli_usage_error("train", "the --save path is too long");
            goto done;
        }
        s = kc_model_save(m, probe);
        remove(probe);
        if (s) {
            /* report it under the name the user gave */
            const char *msg = kc_last_error(), *hit;
            size_t plen = strlen(probe);
            fputs("kerac: ", stderr);
            while ((hit = strstr(msg, probe)) != NULL) {
                fwrite(msg, 1, (size_t)(hit - msg), stderr);
                fputs(t.save, stderr);
                msg = hit + plen;
            }
            fprintf(stderr, "%s\n", msg);
            rc = cli_exit_code(s, CLI_PHASE_RUN);
            goto done;
        }
    }

    cli_output mode = t.json ? CLI_OUT_JSON : isatty(fileno(stdout)) ? CLI_OUT_BAR : CLI_OUT_LINES;
    double split = t.has_validation_split ? t.validation_split : model_file || t.resume ? 0.0 : 0.1;
    if (split > 0 && cli_is_images_spec(t.data) && (rc = cli_images_split(&train, split, &val))) goto done;
    if (mode != CLI_OUT_JSON && !t.quiet) {
        char p[32];
        int64_t params = 0;
        for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
            kc_layer_info li;
            if (kc_model_layer_info(m, i, &li) == KC_STATUS_OK) params += li.params;
        }
        printf("training '%s' (%s params) on '%s': %lld examples", kc_model_name(m),
               cli_commas(params, p, sizeof p), t.data, (long long)kc_dataset_size(train));
        if (split > 0) printf(", validation split %g", split);
        char bs[32];
        if (t.batch_auto) snprintf(bs, sizeof bs, "auto");
        else snprintf(bs, sizeof bs, "%ld", t.batch_size);
        printf(", %ld epoch%s, batch size %s", t.epochs, t.epochs == 1 ? "" : "s", bs);
        if (t.grad_accum > 1) printf(" (%ld micro-batches)", t.grad_accum);
        printf(", %s, on %s\n", t.optimizer, kc_model_device(m));
        if (t.resume)
            printf("resuming from '%s': %d of %ld epochs done, %lld steps into the next (%lld optimizer steps)\n",
                   ckpt_file, info.epoch, t.epochs, (long long)info.step, (long long)info.iterations);
        fflush(stdout);
    }

    cli_progress prog;
    kc_callback *cb = cli_progress_init(&prog, mode, t.quiet, (int)t.epochs, &interrupted);
    kc_callback *cbs[1 + sizeof obs.cbs / sizeof obs.cbs[0]] = {cb};
    t.obs.data = t.data;
    if ((rc = cli_observe_start(&t.obs, m, &obs))) goto done;
    for (int i = 0; i < obs.n; i++) cbs[1 + i] = obs.cbs[i];
    kc_fit_opts fo = {.epochs = (int)t.epochs, .batch_size = (int)t.batch_size, .validation_split = split,
                      .seed = t.has_seed ? t.seed : 0, .callbacks = cbs, .num_callbacks = 1 + obs.n};
    if (val) fo.validation_data = val, fo.validation_split = 0;
    fo.checkpoint_dir = !rank0 ? NULL : t.checkpoint ? t.checkpoint : t.resume ? ckpt_dir : NULL;
    fo.checkpoint_every_steps = t.every;
    fo.keep = (int)t.keep;
    fo.save_best_only = t.save_best_only ? KC_TRUE : KC_DEFAULT;
    fo.monitor = t.monitor;
    fo.resume_from = t.resume ? ckpt_file : NULL;
    if (t.batch_auto) fo.batch_size = KC_BATCH_SIZE_AUTO;
    fo.max_batch_size = (int)t.max_batch_size;
    fo.grad_accum = (int)t.grad_accum;
    if (t.no_oom_recovery) fo.oom_recovery = KC_FALSE;
    fo.collective = cli_dist_collective(&t.dist);
    fo.drop_remainder = t.dist.drop_remainder ? KC_TRUE : KC_DEFAULT;
    void (*old_handler)(int) = signal(SIGINT, on_sigint);
    void (*old_term)(int) = signal(SIGTERM, on_sigint);
    s = kc_fit(m, train, &fo, &h);
    signal(SIGINT, old_handler == SIG_ERR ? SIG_DFL : old_handler);
    signal(SIGTERM, old_term == SIG_ERR ? SIG_DFL : old_term);
    if (s) {
        rc = cli_fail(s, CLI_PHASE_RUN);
        goto done;
    }
    if ((rc = cli_observe_finish(&t.obs, m, h, &obs, mode == CLI_OUT_JSON || t.quiet))) goto done;
    if (mode == CLI_OUT_JSON && interrupted) {
        fprintf(stderr, "kerac: training interrupted (%s) after %d epoch%s\n", interrupt_name(), h ? kc_history_epochs(h) : 0,
                h && kc_history_epochs(h) == 1 ? "" : "s");
    } else if (mode != CLI_OUT_JSON) {
        const char *why = h ? kc_history_stop_reason(h) : "";
        if (interrupted)
            printf("training interrupted (%s) after %d epoch%s\n", interrupt_name(), h ? kc_history_epochs(h) : 0,
                   h && kc_history_epochs(h) == 1 ? "" : "s");
        else if (why && why[0])
            printf("training stopped early by %s after %d epochs\n", why, h ? kc_history_epochs(h) : 0);
    }

    if (t.save && rank0) {
        if ((s = kc_model_save(m, t.save))) {
            rc = cli_fail(s, CLI_PHASE_RUN);
            goto done;
        }
        if (mode != CLI_OUT_JSON) {
            size_t n = strlen(t.save);
            bool json = n >= 5 && !strcasecmp(t.save + n - 5, ".json");
            bool weights = n >= 11 && !strcasecmp(t.save + n - 11, ".weights.h5");
            printf("saved model to '%s'%s\n", t.save,
                   json ? " (the model config only, no weights)" : weights ? " (the weights only)" : "");
        }
    }

    if (test && rank0 && interrupt_signal != SIGTERM) { /* a scheduler's grace period is short */
        kc_eval_result r;
        /* evaluate with the micro-batch training used: it is known to fit */
        int eval_batch = (int)t.batch_size;
        if (h && kc_history_epochs(h) > 0) eval_batch = kc_history_epoch(h, kc_history_epochs(h) - 1)->micro_batch;
        if ((s = kc_evaluate(m, test, eval_batch > 0 ? eval_batch : 128, &r))) {
            rc = cli_fail(s, CLI_PHASE_RUN);
            goto done;
        }
        if (mode == CLI_OUT_JSON) {
            fputs("{\"test_loss\": ", stdout);
            cli_json_number(stdout, r.loss);
            int nm = r.num_metrics < KC_MAX_METRICS ? r.num_metrics : KC_MAX_METRICS;
            for (int i = 0; i < nm; i++) {
                char key[96];
                snprintf(key, sizeof key, "test_%s", kc_model_metric_name(m, i));
                fputs(", ", stdout);
                cli_json_string(stdout, key);
                fputs(": ", stdout);
                cli_json_number(stdout, r.metrics[i]);
            }
            fputs("}\n", stdout);
        } else {
            print_eval_human(m, &r, "test_");
        }
    }
    fflush(stdout);
    /* the model was saved and evaluated, but the run did not finish: say so to scripts */
    rc = !interrupted ? CLI_EXIT_OK : interrupt_signal == SIGTERM ? CLI_EXIT_TERMINATED : CLI_EXIT_INTERRUPTED;
done:
    cli_observe_end(&obs);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(test);
    kc_dataset_destroy(val);
    kc_dataset_destroy(train);
    return rc;
}
