/* cmd_predict.c — `kerac predict MODEL --input X.npy --output Y.npy`: run a model on the
 * examples of a .npy file and write its outputs as float32 .npy. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac predict MODEL --input X.npy --output Y.npy [--batch-size N]\n"
    "       kerac predict MODEL --input photo.jpg|DIR [--top-k K] [--json]\n"
    "\n"
    "Run a model on every example of X.npy and write the outputs to Y.npy (float32); or on\n"
    "an image (JPEG, PNG, BMP, GIF) or every image in a folder, read as the model was trained\n"
    "(a model trained on images:DIR saved its image size, colour mode and class names; other\n"
    "models: sized from their input), and print the top classes by name with probabilities.\n"
    "\n"
    "  MODEL              a model file: .keras (Keras 3) or .h5 (Keras 2 HDF5) with its\n"
    "                     weights, or .json (the model config only: its weights are the\n"
    "                     freshly initialised ones)\n"
    "  --input X.npy      examples, shape (N, <model input shape>), float32, float64 or uint8\n"
    "                     (uint8 is scaled to [0, 1] as for training); a trailing channel of\n"
    "                     1 may be left out: (N, 28, 28) for a (28, 28, 1) model\n"
    "  --output Y.npy     where to write the outputs, shape (N, <model output shape>)\n"
    "  --batch-size N     examples per step (default 128)\n"
    "  --top-k K          images: the K most probable classes (default 3)\n"
    "  --json             images: one JSON object per image: {\"file\", \"top\": [{\"class\",\n"
    "                     \"index\", \"probability\"}]}\n"
    "  --quiet            do not print what was written\n"
    "  --device D         where to run: cpu, cuda, cuda:N or auto (default:\n"
    "                     KERAC_DEVICE, else cpu); auto uses the GPU when it\n"
    "                     works, else the CPU with a warning that says why\n"
    "  --gpu-memory MODE  grow (default), preallocate[=FRACTION] or limit=SIZE\n"
    "  --cudnn-benchmark  time every cuDNN convolution algorithm, keep the fastest\n"
    "  --deterministic    deterministic cuDNN algorithms only\n"
    "  --cpu-isa SET      the CPU kernels: auto, baseline, avx2 or avx512\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit codes: 0 success, 1 usage error, 2 bad model or input file, 3 failure while running.\n";

int cli_cmd_predict(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "predict");
    const char *path = NULL, *in_path = NULL, *out_path = NULL;
    long batch = 128;
    bool quiet = false, json = false;
    long top_k = 3;
    cli_device_opts dev = {0};
    int rc;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        } else if (a.positional) {
            if (path) return cli_unknown(&a);
            path = a.arg;
        } else if (cli_is(&a, "--input")) {
            if ((rc = cli_value(&a, &in_path))) return rc;
        } else if (cli_is(&a, "--output")) {
            if ((rc = cli_value(&a, &out_path))) return rc;
        } else if (cli_is(&a, "--batch-size")) {
            if ((rc = cli_int_value(&a, 1, 1 << 20, &batch))) return rc;
        } else if (cli_is(&a, "--top-k")) {
            if ((rc = cli_int_value(&a, 1, 64, &top_k))) return rc;
        } else if (cli_is(&a, "--json")) {
            if ((rc = cli_flag(&a))) return rc;
            json = true;
        } else if (cli_is(&a, "--quiet") || cli_is(&a, "-q")) {
            if ((rc = cli_flag(&a))) return rc;
            quiet = true;
        } else if ((rc = cli_device_option(&a, &dev)) >= 0) {
            if (rc) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!path) return cli_usage_error(a.cmd, "missing the MODEL file");
    if (!in_path) return cli_usage_error(a.cmd, "missing '--input X.npy'");
    bool images = cli_is_image_path(in_path);
    if (!out_path && !images) return cli_usage_error(a.cmd, "missing '--output Y.npy'");

    kc_model *m = NULL;
    cli_npy x = {0};
    float *y = NULL; /* (n, output shape) */
    kc_status s;
    char err[512], sa[96], sb[96];
    kc_device_opts o;
    if ((rc = cli_device_resolve(&dev, &o)) || (rc = cli_load_model(path, &o, &m))) goto done;
    if (images) {
        rc = cli_predict_images(m, in_path, (int)top_k, json);
        goto done;
    }
    if (cli_npy_read(in_path, &x, err, sizeof err)) {
        rc = cli_error(CLI_EXIT_INPUT, "%s", err);
        goto done;
    }
    kc_shape in, out, ex = {0};
    if ((s = kc_model_input_shape(m, &in)) || (s = kc_model_output_shape(m, &out))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    bool fits = x.ndim >= 2 && x.ndim - 1 <= KC_MAX_RANK;
    if (fits) {
        ex.rank = x.ndim - 1;
        for (int i = 1; i < x.ndim; i++) ex.dim[i - 1] = (int)x.shape[i];
        fits = cli_shape_compatible(&ex, &in);
    }
    if (!fits) {
        char have[160];
        size_t len = (size_t)snprintf(have, sizeof have, "(");
        for (int i = 0; i < x.ndim && len < sizeof have; i++)
            len += (size_t)snprintf(have + len, sizeof have - len, "%s%lld", i ? ", " : "", (long long)x.shape[i]);
        if (len < sizeof have) snprintf(have + len, sizeof have - len, ")");
        rc = cli_error(CLI_EXIT_INPUT, "'%s' has shape %s but model '%s' takes inputs of shape %s; give an array of shape %s",
                       in_path, have, kc_model_name(m), cli_shape_str(&in, false, sa, sizeof sa),
                       cli_shape_str(&in, true, sb, sizeof sb));
        goto done;
    }
    int64_t n = x.shape[0];
    int64_t out_size = cli_shape_size(&out);
    y = malloc((size_t)(n * out_size) * sizeof(float) + 1);
    if (!y) {
        rc = cli_error(CLI_EXIT_RUNTIME, "out of memory for %lld outputs", (long long)(n * out_size));
        goto done;
    }
    if (n > 0) {
        s = kc_predict(m, x.data, n, (int)batch, y);
        if (s == KC_STATUS_STATE) {
            /* the library wants a compiled model: compile with Keras's defaults and retry */
            kc_compile_opts co = {0};
            if ((s = kc_compile(m, &co)) == KC_STATUS_OK) s = kc_predict(m, x.data, n, (int)batch, y);
        }
        if (s) {
            rc = cli_fail(s, CLI_PHASE_RUN);
            goto done;
        }
    }
    int64_t shape[1 + KC_MAX_RANK];
    shape[0] = n;
    for (int i = 0; i < out.rank; i++) shape[1 + i] = out.dim[i];
    if (cli_npy_write(out_path, y, 1 + out.rank, shape, err, sizeof err)) {
        rc = cli_error(CLI_EXIT_INPUT, "%s", err);
        goto done;
    }
    if (!quiet) {
        kc_shape full = out;
        printf("wrote '%s': %lld x %s float32\n", out_path, (long long)n, cli_shape_str(&full, false, sa, sizeof sa));
    }
    rc = CLI_EXIT_OK;
done:
    free(y);
    cli_npy_free(&x);
    kc_model_destroy(m);
    return rc;
}
