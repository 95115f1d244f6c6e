/* cmd_evaluate.c — `kerac evaluate MODEL --data SPEC`: loss and metrics on a dataset. */
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac evaluate MODEL --data SPEC [options]\n"
    "\n"
    "Compute a model's loss and metrics on a dataset.\n"
    "\n"
    "  MODEL                 a model file: .keras (Keras 3) or .h5 (Keras 2 HDF5) with\n"
    "                        its weights, or .json (the model config only: its weights\n"
    "                        are the freshly initialised ones)\n"
    "  --data SPEC           the data: fashion-mnist[:DIR][:test]  mnist:DIR[:test]\n"
    "                        cifar10:DIR[:test]  npy:X.npy,Y.npy  idx:IMAGES,LABELS\n"
    "                        images:DIR (read as the model was trained on its folder)\n"
    "  --batch-size N        examples per step (default 128)\n"
    "  --loss NAME           default: the loss MODEL was compiled with in Keras, else\n"
    "                        sparse_categorical_crossentropy\n"
    "  --from-logits         the model outputs logits (Keras's from_logits=True)\n"
    "  --metrics A[,B...]    default accuracy\n"
    "  --json                print one JSON object: {\"loss\", \"accuracy\", ..., \"samples\", \"seconds\"}\n"
    "  --device D            where to run: cpu, cuda, cuda:N or auto (default:\n"
    "                        KERAC_DEVICE, else cpu); auto uses the GPU when it\n"
    "                        works, else the CPU with a warning that says why\n"
    "  --gpu-memory MODE     grow (default), preallocate[=FRACTION] or limit=SIZE\n"
    "  --cudnn-benchmark     time every cuDNN convolution algorithm, keep the fastest\n"
    "  --deterministic       deterministic cuDNN algorithms only\n"
    "  --cpu-isa SET         the CPU kernels: auto, baseline, avx2 or avx512\n"
    "  -h, --help            show this help\n"
    "\n"
    "Exit codes: 0 success, 1 usage error, 2 bad model or data file, 3 evaluation failure.\n";

int cli_cmd_evaluate(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "evaluate");
    const char *path = NULL, *data = NULL, *loss = "sparse_categorical_crossentropy";
    const char *metrics[KC_MAX_METRICS] = {"accuracy"};
    char metrics_buf[256];
    int n_metrics = 1;
    long batch = 128;
    bool json = false, from_logits = false, has_loss = false;
    cli_device_opts dev = {0};
    int rc;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        } else if (a.positional) {
            if (path) return cli_unknown(&a);
            path = a.arg;
        } else if (cli_is(&a, "--data")) {
            if ((rc = cli_value(&a, &data))) return rc;
        } else if (cli_is(&a, "--batch-size")) {
            if ((rc = cli_int_value(&a, 1, 1 << 20, &batch))) return rc;
        } else if (cli_is(&a, "--loss")) {
            if ((rc = cli_value(&a, &loss))) return rc;
            has_loss = true;
        } else if (cli_is(&a, "--metrics")) {
            const char *v;
            if ((rc = cli_value(&a, &v))) return rc;
            n_metrics = cli_split_list(v, metrics_buf, sizeof metrics_buf, metrics, KC_MAX_METRICS);
            if (n_metrics < 0)
                return cli_usage_error(a.cmd, "option '--metrics' needs 1 to %d names separated by commas, got '%s'",
                                       KC_MAX_METRICS, v);
        } else if (cli_is(&a, "--json")) {
            if ((rc = cli_flag(&a))) return rc;
            json = true;
        } else if (cli_is(&a, "--from-logits")) {
            if ((rc = cli_flag(&a))) return rc;
            from_logits = true;
        } else if ((rc = cli_device_option(&a, &dev)) >= 0) {
            if (rc) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!path) return cli_usage_error(a.cmd, "missing the MODEL file");
    if (!data) return cli_usage_error(a.cmd, "missing '--data SPEC'");

    kc_model *m = NULL;
    kc_dataset *d = NULL;
    kc_status s;
    kc_device_opts o;
    if ((rc = cli_device_resolve(&dev, &o)) || (rc = cli_load_model(path, &o, &m))) goto done;
    kc_image_opts io; /* images:DIR is read as the model was trained */
    int classes;
    if (cli_is_images_spec(data) && (rc = cli_model_image_opts(m, &io, &classes))) goto done;
    if ((s = cli_is_images_spec(data) ? kc_dataset_open_images(data + 7, &io, &d) : kc_dataset_open(data, &d))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    int saved_logits = 0; /* no --loss: the loss the file was compiled with in Keras */
    if (!has_loss && kc_model_saved_loss(m, &loss, &saved_logits) && saved_logits) from_logits = true;
    if ((rc = cli_check_data_fits(m, d, data, loss))) goto done;
    kc_compile_opts co = {.loss = loss, .from_logits = from_logits ? KC_TRUE : KC_DEFAULT};
    for (int i = 0; i < n_metrics; i++) co.metrics[i] = metrics[i];
    if ((s = kc_compile(m, &co))) {
        rc = cli_fail(s, CLI_PHASE_RUN);
        if (s == KC_STATUS_INVALID_ARGUMENT) rc = CLI_EXIT_USAGE; /* a bad --loss / --metrics */
        goto done;
    }
    if ((s = kc_model_check_data(m, d))) { /* labels against the output and loss */
        cli_fail(s, CLI_PHASE_LOAD);
        rc = CLI_EXIT_INPUT;
        goto done;
    }
    kc_eval_result r;
    if ((s = kc_evaluate(m, d, (int)batch, &r))) {
        rc = cli_fail(s, CLI_PHASE_RUN);
        goto done;
    }
    int nm = r.num_metrics < KC_MAX_METRICS ? r.num_metrics : KC_MAX_METRICS;
    if (json) {
        fputs("{\"loss\": ", stdout);
        cli_json_number(stdout, r.loss);
        cli_json_metrics(stdout, m, "", r.metrics, nm);
        printf(", \"samples\": %lld, \"seconds\": ", (long long)r.samples);
        cli_json_number(stdout, r.seconds);
        fputs("}\n", stdout);
    } else {
        cli_print_eval(m, &r, "");
    }
    rc = CLI_EXIT_OK;
done:
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    return rc;
}
