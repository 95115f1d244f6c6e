/* cmd_convert.c — `kerac convert IN OUT`: a model file in another format, chosen by the
 * file extensions (.keras, .h5, .json; .weights.h5 as output). */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac convert IN OUT [--quiet]\n"
    "\n"
    "Convert a model file to another format; the formats come from the file extensions:\n"
    "  .keras        Keras 3 archive: model config and weights (keras.saving.load_model)\n"
    "  .h5, .hdf5    Keras 2 HDF5 model: config and weights (tf.keras.models.load_model;\n"
    "                Keras 3 reads it too)\n"
    "  .json         the model config only (model.to_json()): no weights\n"
    "  .weights.h5   OUT only: the weights only, Keras 3 layout (model.load_weights)\n"
    "\n"
    "A .json IN has no weights: OUT then gets freshly initialised weights.\n"
    "A .json OUT keeps the architecture only: the weights of IN are not written.\n"
    "kerac says so on stderr in both cases.\n"
    "\n"
    "  -q, --quiet   do not print what was written\n"
    "  -h, --help    show this help\n"
    "\n"
    "Exit codes: 0 success, 1 usage error, 2 bad input file or unwritable OUT, 3 other failure.\n";

typedef enum file_kind { KIND_UNKNOWN, KIND_JSON, KIND_KERAS, KIND_H5, KIND_WEIGHTS } file_kind;

static bool ends_with_ci(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls > lx && strcasecmp(s + ls - lx, suffix) == 0 && s[ls - lx - 1] != '/';
}

static file_kind kind_of(const char *path) {
    if (ends_with_ci(path, ".weights.h5")) return KIND_WEIGHTS;
    if (ends_with_ci(path, ".keras")) return KIND_KERAS;
    if (ends_with_ci(path, ".h5") || ends_with_ci(path, ".hdf5")) return KIND_H5;
    if (ends_with_ci(path, ".json")) return KIND_JSON;
    return KIND_UNKNOWN;
}

static const char *kind_name(file_kind k) {
    switch (k) {
    case KIND_JSON: return "Keras JSON config";
    case KIND_KERAS: return "Keras 3 archive";
    case KIND_H5: return "Keras 2 HDF5 model";
    case KIND_WEIGHTS: return "Keras 3 weights";
    default: return "unknown";
    }
}

int cli_cmd_convert(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "convert");
    const char *in = NULL, *out = NULL;
    bool quiet = false;
    int rc;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        } else if (a.positional) {
            if (!in) in = a.arg;
            else if (!out) out = a.arg;
            else return cli_unknown(&a);
        } else if (cli_is(&a, "--quiet") || cli_is(&a, "-q")) {
            if ((rc = cli_flag(&a))) return rc;
            quiet = true;
        } else {
            return cli_unknown(&a);
        }
    }
    if (!in || !out) return cli_usage_error(a.cmd, "give an input and an output file: kerac convert IN OUT");
    file_kind ki = kind_of(in), ko = kind_of(out);
    if (ki == KIND_UNKNOWN)
        return cli_usage_error(a.cmd, "'%s' has no model file extension; IN must be .keras, .h5, .hdf5 or .json", in);
    if (ki == KIND_WEIGHTS)
        return cli_usage_error(a.cmd,
                               "'%s' holds weights only, without the model config; convert a .keras, .h5 or .json "
                               "file",
                               in);
    if (ko == KIND_UNKNOWN)
        return cli_usage_error(a.cmd, "'%s' has no model file extension; OUT must be .keras, .h5, .hdf5, .json or "
                                      ".weights.h5", out);

    kc_model *m = NULL;
    kc_status s = kc_model_load(in, &m);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    if ((s = kc_model_build(m))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    if (ki == KIND_JSON && ko != KIND_JSON)
        fprintf(stderr, "kerac: note: '%s' is a model config without weights: '%s' gets freshly initialised weights\n",
                in, out);
    if (ko == KIND_JSON && ki != KIND_JSON)
        fprintf(stderr, "kerac: note: '%s' is a .json model config: it keeps the architecture only, the weights of '%s' "
                        "are not written\n",
                out, in);
    if ((s = kc_model_save(m, out))) {
        rc = cli_fail(s, CLI_PHASE_RUN);
        goto done;
    }
    if (!quiet) {
        int64_t params = 0;
        for (int i = 0, n = kc_model_num_layers(m); i < n; i++) {
            kc_layer_info li;
            if (kc_model_layer_info(m, i, &li) == KC_STATUS_OK) params += li.params;
        }
        char p[32];
        printf("converted '%s' (%s) to '%s' (%s): model '%s', %d layers, %s parameters\n", in, kind_name(ki), out,
               kind_name(ko), kc_model_name(m), kc_model_num_layers(m), cli_commas(params, p, sizeof p));
    }
    rc = CLI_EXIT_OK;
done:
    kc_model_destroy(m);
    return rc;
}
