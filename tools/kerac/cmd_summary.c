/* cmd_summary.c — `kerac summary [MODEL]`: a table like Keras's model.summary(), with a
 * FLOPs column (per example). */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac summary [MODEL] [--input-shape H,W,C] [--classes N] [--batch-size N]\n"
    "                     [--optimizer NAME] [--grad-accum K] [--data SPEC]\n"
    "\n"
    "Print the layers of a model like Keras's model.summary(): output shapes, parameter\n"
    "counts and forward FLOPs per example (multiply-adds x 2).\n"
    "\n"
    "  MODEL                 a model file: .keras, .h5 or .json (Keras config); without\n"
    "                        it, the default CNN\n"
    "  --input-shape H,W,C   the default CNN's input shape (default 28,28,1)\n"
    "  --classes N           the default CNN's number of classes (default 10)\n"
    "  --batch-size N        also print the memory one training step needs at this batch\n"
    "                        size (planned from the graph, nothing is allocated)\n"
    "  --optimizer NAME      optimizer assumed for that plan (default adam)\n"
    "  --grad-accum K        micro-batches per step: plans micro-batch N/K\n"
    "  --device D            the device to plan for (cpu, cuda, cuda:N, auto; default cpu):\n"
    "                        its kernels' workspaces differ\n"
    "  --data SPEC           also print the host memory of a dataset (held in memory, or\n"
    "                        read on demand from a memory-mapped file); images:DIR takes the\n"
    "                        image options of train (--image-size, --color-mode, ...)\n"
    "  -h, --help            show this help\n";

#define MAX_INPUT_LINES 8

typedef struct row {
    char name[160];    /* "conv2d (Conv2D)" */
    char shape[96];    /* "(None, 26, 26, 32)" */
    char params[32];   /* "320" */
    char flops[32];    /* "389,376" */
    int n_inputs;
    char inputs[MAX_INPUT_LINES][96]; /* "conv2d[0][0]" */
    const kc_layer_info *layer;       /* its layer (a shared layer's first call) */
    int64_t flops_sum;                /* over the layer's calls */
} row;

/* The row of a shared layer's first call (the same name, call 0), for its later call l. */
static row *first_call_row(row *rows, int nrows, const kc_layer_info *l) {
    for (int i = 0; i < nrows; i++)
        if (rows[i].layer && rows[i].layer->call == 0 && strcmp(rows[i].layer->name, l->name) == 0) return &rows[i];
    return NULL;
}

/* Keras 3's size text: "136.04 KB" for 34,826 float32 parameters. */
static const char *fmt_bytes(int64_t params, char *buf, size_t n) {
    double b = (double)params * 4.0;
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (b >= 1024.0 && u < 4) {
        b /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.2f %s", b, units[u]);
    return buf;
}

static const char *fmt_flops(int64_t flops, char *buf, size_t n) {
    static const char *const units[] = {"", "K", "M", "G", "T"};
    double v = (double)flops;
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        u++;
    }
    snprintf(buf, n, "%.2f %sFLOPs", v, units[u]);
    return buf;
}

static void rule(char c, int width) {
    for (int i = 0; i < width; i++) putchar(c);
    putchar('\n');
}

static void print_cells(const char *const *cells, const int *w, int ncol) {
    for (int c = 0; c < ncol; c++) {
        if (c + 1 < ncol)
            printf(" %-*s", w[c] - 1, cells[c]);
        else
            printf(" %s", cells[c]);
    }
    putchar('\n');
}

static int summarize(kc_model *m) {
    kc_status s = kc_model_build(m);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    int n = kc_model_num_layers(m);
    if (n <= 0) return cli_error(CLI_EXIT_INPUT, "model '%s' has no layers", kc_model_name(m));

    kc_layer_info *info = calloc((size_t)n, sizeof *info);
    row *rows = calloc((size_t)n, sizeof *rows);
    if (!info || !rows) {
        free(info);
        free(rows);
        return cli_error(CLI_EXIT_RUNTIME, "out of memory");
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        s = kc_model_layer_info(m, i, &info[i]);
        if (s) {
            rc = cli_fail(s, CLI_PHASE_LOAD);
            goto done;
        }
    }
    /* A linear chain fed by one InputLayer reads like a Sequential model: Keras leaves the
     * input row and the "Connected to" column out there. */
    bool sequential = n >= 1 && !strcmp(info[0].class_name, "InputLayer");
    for (int i = 1; i < n && sequential; i++)
        if (!strcmp(info[i].class_name, "InputLayer") || info[i].num_inputs != 1 ||
            !info[i].inputs[0] || strcmp(info[i].inputs[0], info[i - 1].name) != 0)
            sequential = false;

    int64_t total = 0, trainable = 0, flops = 0;
    int nrows = 0;
    for (int i = 0; i < n; i++) {
        const kc_layer_info *l = &info[i];
        total += l->params;
        trainable += l->trainable_params;
        flops += l->flops;
        if (sequential && !strcmp(l->class_name, "InputLayer")) continue;
        row *r = l->call > 0 ? first_call_row(rows, nrows, l) : NULL;
        if (!r) { /* a shared layer's later call goes on its layer's row, as Keras shows it */
            r = &rows[nrows++];
            r->layer = l;
            snprintf(r->name, sizeof r->name, "%s (%s)", l->name, l->class_name);
            cli_shape_str(&l->output_shape, true, r->shape, sizeof r->shape);
            cli_commas(l->params, r->params, sizeof r->params);
        }
        r->flops_sum += l->flops;
        cli_commas(r->flops_sum, r->flops, sizeof r->flops);
        for (int k = 0; k < l->num_inputs && k < 8 && r->n_inputs < MAX_INPUT_LINES; k++)
            if (l->inputs[k])
                snprintf(r->inputs[r->n_inputs++], sizeof r->inputs[0], "%s[%d][0]", l->inputs[k], l->input_calls[k]);
    }

    static const char *const head[] = {"Layer (type)", "Output Shape", "Param #", "FLOPs", "Connected to"};
    int ncol = sequential ? 4 : 5;
    int w[5];
    for (int c = 0; c < 5; c++) w[c] = (int)strlen(head[c]) + 3;
    for (int i = 0; i < nrows; i++) {
        const char *cells[4] = {rows[i].name, rows[i].shape, rows[i].params, rows[i].flops};
        for (int c = 0; c < 4; c++)
            if ((int)strlen(cells[c]) + 3 > w[c]) w[c] = (int)strlen(cells[c]) + 3;
        for (int k = 0; k < rows[i].n_inputs; k++)
            if ((int)strlen(rows[i].inputs[k]) + 2 > w[4]) w[4] = (int)strlen(rows[i].inputs[k]) + 2;
    }
    int width = 0;
    for (int c = 0; c < ncol; c++) width += w[c];

    printf("Model: \"%s\"\n", kc_model_name(m));
    rule('_', width);
    print_cells(head, w, ncol);
    rule('=', width);
    for (int i = 0; i < nrows; i++) {
        const row *r = &rows[i];
        const char *cells[5] = {r->name, r->shape, r->params, r->flops, r->n_inputs ? r->inputs[0] : ""};
        print_cells(cells, w, ncol);
        if (!sequential)
            for (int k = 1; k < r->n_inputs; k++) {
                const char *more[5] = {"", "", "", "", r->inputs[k]};
                print_cells(more, w, ncol);
            }
        if (i + 1 < nrows) {
            if (sequential)
                putchar('\n');
            else
                rule('_', width);
        }
    }
    rule('=', width);
    char a[32], b[32];
    printf("Total params: %s (%s)\n", cli_commas(total, a, sizeof a), fmt_bytes(total, b, sizeof b));
    printf("Trainable params: %s (%s)\n", cli_commas(trainable, a, sizeof a), fmt_bytes(trainable, b, sizeof b));
    printf("Non-trainable params: %s (%s)\n", cli_commas(total - trainable, a, sizeof a),
           fmt_bytes(total - trainable, b, sizeof b));
    printf("FLOPs per example: %s (%s)\n", cli_commas(flops, a, sizeof a), fmt_flops(flops, b, sizeof b));
    rule('_', width);
done:
    free(info);
    free(rows);
    return rc;
}

static const char *fmt_mem(size_t b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)b;
    int u = 0;
    while (v >= 1024.0 && u < 4) {
        v /= 1024.0;
        u++;
    }
    snprintf(buf, n, u ? "%.2f %s" : "%.0f %s", v, units[u]);
    return buf;
}

/* The planned memory of one training step (kc_model_plan_memory), as a breakdown. */
static void print_image_cache(const kc_dataset *d);

static int print_memory(kc_model *m, long batch, long accum, const char *optimizer, const kc_dataset *d) {
    kc_status s = kc_compile(m, &(kc_compile_opts){.optimizer = {.name = optimizer}});
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    int micro = (int)((batch + accum - 1) / accum);
    kc_memory_plan p, inf;
    s = kc_model_plan_memory(m, micro, 1, (int)accum, &p);
    if (!s) s = kc_model_plan_memory(m, micro, 0, 1, &inf);
    if (s) return cli_fail(s, CLI_PHASE_RUN);
    char b[32];
    printf("\nMemory of one training step, batch size %ld", batch);
    if (accum > 1) printf(" (micro-batch %d x %ld accumulation steps)", micro, accum);
    printf(", optimizer %s, on %s:\n", optimizer, kc_model_device(m));
    const struct {
        const char *what;
        size_t bytes;
    } rows[] = {
        {"parameters", p.parameters},
        {"gradients", p.gradients},
        {"optimizer state", p.optimizer_state},
        {"activations kept for backward (sum)", p.activations},
        {"activation gradients (sum)", p.activation_gradients},
        {"workspace (largest layer)", p.workspace},
        {"arena: the three above after reuse", p.arena},
        {"batch buffers (2 staged batches)", p.batch_buffers},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) printf("  %-40s %12s\n", rows[i].what, fmt_mem(rows[i].bytes, b, sizeof b));
    printf("  %-40s %12s\n", "device total (peak)", fmt_mem(p.device_total, b, sizeof b));
    printf("  %-40s %12s\n", "host: loader ring + feed staging", fmt_mem(p.host_pipeline, b, sizeof b));
    print_image_cache(d);
    char what[64];
    if (inf.tile < inf.batch_size) /* predict and evaluate run the batch in tiles (their plan: a tile's) */
        snprintf(what, sizeof what, "inference in tiles of %d: total", inf.tile);
    else
        snprintf(what, sizeof what, "inference at the same batch: total");
    printf("  %-40s %12s\n", what, fmt_mem(inf.device_total, b, sizeof b));
    return CLI_EXIT_OK;
}

/* The host line of a folder of images' cache of decoded images (nothing for other data). */
static void print_image_cache(const kc_dataset *d) {
    size_t bytes = 0;
    const char *file = NULL;
    int c = d ? kc_dataset_image_cache(d, &bytes, &file) : -1;
    char b[32], what[80];
    if (c == KC_IMAGE_CACHE_MEMORY) snprintf(what, sizeof what, "host: decoded images cached in memory");
    else if (c == KC_IMAGE_CACHE_FILE) snprintf(what, sizeof what, "host: decoded images cached in a file (mapped)");
    else if (c == KC_IMAGE_CACHE_NONE) snprintf(what, sizeof what, "host: no image cache (decoded per batch)");
    else return;
    printf("  %-40s %12s%s%s\n", what, fmt_mem(bytes, b, sizeof b), file ? "  " : "", file ? file : "");
}

/* The host memory of a dataset: what is held in memory and what is memory-mapped. */
static int print_data_memory(const char *spec, const kc_dataset *d) {
    size_t resident = 0, mapped = 0;
    kc_dataset_memory(d, &resident, &mapped);
    char a[32], b[32], sh[64];
    kc_shape shape = kc_dataset_shape(d);
    printf("\nHost memory of dataset '%s' (%lld examples of %s):\n", spec, (long long)kc_dataset_size(d),
           cli_shape_str(&shape, false, sh, sizeof sh));
    printf("  %-40s %12s\n", "held in memory", fmt_mem(resident, a, sizeof a));
    printf("  %-40s %12s\n", "memory-mapped (read on demand)", fmt_mem(mapped, b, sizeof b));
    print_image_cache(d);
    return CLI_EXIT_OK;
}

int cli_cmd_summary(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "summary");
    const char *path = NULL;
    long shape[3] = {28, 28, 1}, classes = 10, batch = 0, accum = 1;
    const char *optimizer = "adam", *data = NULL;
    cli_device_opts dev = {0};
    static cli_image_opts img; /* --data images:DIR (static: it holds the class-name buffer) */
    bool defaults_changed = false;
    int rc;
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        } else if (a.positional && !path) {
            path = a.arg;
        } else if (cli_is(&a, "--input-shape")) {
            const char *v, *parts[4];
            char buf[128];
            if ((rc = cli_value(&a, &v))) return rc;
            int np = cli_split_list(v, buf, sizeof buf, parts, 3);
            if (np < 2 || cli_parse_long(parts[0], 1, 1 << 16, &shape[0]) ||
                cli_parse_long(parts[1], 1, 1 << 16, &shape[1]) ||
                (np == 3 && cli_parse_long(parts[2], 1, 1 << 16, &shape[2])))
                return cli_usage_error(a.cmd, "option '--input-shape' needs H,W or H,W,C (whole numbers >= 1), got '%s'", v);
            if (np == 2) shape[2] = 1;
            defaults_changed = true;
        } else if (cli_is(&a, "--classes")) {
            if ((rc = cli_int_value(&a, 1, 1 << 20, &classes))) return rc;
            defaults_changed = true;
        } else if (cli_is(&a, "--batch-size")) {
            if ((rc = cli_int_value(&a, 1, 1 << 20, &batch))) return rc;
        } else if (cli_is(&a, "--grad-accum")) {
            if ((rc = cli_int_value(&a, 1, 1 << 20, &accum))) return rc;
        } else if (cli_is(&a, "--optimizer")) {
            if ((rc = cli_value(&a, &optimizer))) return rc;
        } else if (cli_is(&a, "--data")) {
            if ((rc = cli_value(&a, &data))) return rc;
        } else if ((rc = cli_image_option(&a, &img)) >= 0) {
            if (rc) return rc;
        } else if ((rc = cli_device_option(&a, &dev)) >= 0) {
            if (rc) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    if (path && defaults_changed)
        return cli_usage_error(a.cmd, "--input-shape and --classes apply to the default CNN only, not to '%s'", path);

    kc_device_opts o;
    if ((rc = cli_device_resolve(&dev, &o))) return rc;
    kc_model *m = NULL;
    kc_status s = path ? kc_model_load_ex(path, &o, &m)
                       : kc_default_cnn((int)shape[0], (int)shape[1], (int)shape[2], (int)classes, &m);
    if (!s && !path) s = kc_model_set_device_opts(m, &o);
    if (s) {
        kc_model_destroy(m);
        return cli_fail(s, CLI_PHASE_LOAD);
    }
    if ((accum > 1 || strcmp(optimizer, "adam")) && !batch) {
        kc_model_destroy(m);
        return cli_usage_error(a.cmd, "--optimizer and --grad-accum describe the memory plan: add --batch-size N");
    }
    if (accum > batch && batch) {
        kc_model_destroy(m);
        return cli_usage_error(a.cmd, "--grad-accum %ld is more than the batch size %ld", accum, batch);
    }
    kc_dataset *d = NULL;
    rc = summarize(m);
    if (!rc && data && (s = cli_open_data(data, &img, 0, &d))) rc = cli_fail(s, CLI_PHASE_LOAD);
    if (!rc && batch) rc = print_memory(m, batch, accum, optimizer, d);
    if (!rc && data) rc = print_data_memory(data, d);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    return rc;
}
