/* cmd_profile.c — `kerac profile`: where a training step's time goes, per layer. Trains
 * the model on random data of its input shape for --warmup steps, then --steps more with
 * per-layer timing on (kc_model_set_profiling), and prints a table sorted by cost: forward
 * and backward ms per step, share of the step, FLOPs, achieved GFLOP/s and its fraction of
 * the matrix-multiply rate measured on the same device (a Dense layer of 1024 x 1024 units
 * on 512 examples, through the library's own GEMM path), and memory (the layer's output
 * at this batch size plus its weights); then the step's total, images/s and the
 * bottleneck: a layer, the input pipeline or host overhead. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac profile [MODEL] [options]\n"
    "\n"
    "Time one training step per layer: forward and backward ms, share of the step, FLOPs,\n"
    "achieved GFLOP/s and its fraction of this device's measured matrix-multiply rate, and\n"
    "memory, sorted by cost, then the step's total, images/s and the bottleneck. The model\n"
    "trains on random data of its input shape (compiled with adam and sparse categorical\n"
    "cross-entropy, as kerac train does). Without MODEL: the default CNN for 28x28x1 images\n"
    "and 10 classes (Keras's mnist_convnet). MODEL is a .json, .keras or .h5 file.\n"
    "\n"
    "  --batch-size N          examples per step (default 128)\n"
    "  --steps N               timed steps (default 20)\n"
    "  --warmup N              untimed steps first (default 3)\n"
    CLI_DEVICE_USAGE
    "  --threads N             CPU threads (default: KERAC_NUM_THREADS, else OMP_NUM_THREADS, else all cores)\n"
    "  --json                  one JSON object instead of the table\n"
    "  -h, --help              show this help\n"
    "\n"
    "FLOPs count multiplies and adds (2 per multiply-add); backward is twice forward for\n"
    "Conv2D and Dense (input and weight gradients; once where no input gradient is needed)\n"
    "and once forward for the other layers. Timing synchronises the device around each\n"
    "layer, so the step is slightly slower than in kerac train.\n";

typedef struct prof_args {
    const char *model_path;
    long batch, steps, warmup, threads;
    bool json, has_threads;
    cli_device_opts dev;
} prof_args;

typedef struct prof_row {
    kc_layer_info info;
    double fwd_ms, bwd_ms, share, gflops, gemm_frac;
    int64_t fwd_flops, bwd_flops, memory;
} prof_row;

typedef struct prof_result {
    prof_row *rows;
    int n;
    double step_ms, loss_ms, opt_ms, other_ms, images_per_second, wait_share, gemm_gflops;
    char bottleneck[256];
} prof_result;

static int parse(int argc, char **argv, prof_args *p) {
    cli_args a;
    cli_args_init(&a, argc, argv, "profile");
    int rc;
    while (cli_args_next(&a)) {
        bool help = false;
        if ((rc = cli_help_or_positional(&a, usage, &p->model_path, &help)) >= 0) {
            if (rc || help) return rc ? rc : -1;
        } else if (cli_is(&a, "--batch-size")) {
            if ((rc = cli_int_value(&a, 1, 1 << 16, &p->batch))) return rc;
        } else if (cli_is(&a, "--steps")) {
            if ((rc = cli_int_value(&a, 1, 100000, &p->steps))) return rc;
        } else if (cli_is(&a, "--warmup")) {
            if ((rc = cli_int_value(&a, 0, 100000, &p->warmup))) return rc;
        } else if (cli_is(&a, "--threads")) {
            if ((rc = cli_int_value(&a, 0, 4096, &p->threads))) return rc;
            p->has_threads = true;
        } else if (cli_is(&a, "--json")) {
            if ((rc = cli_flag(&a))) return rc;
            p->json = true;
        } else if ((rc = cli_device_option(&a, &p->dev)) >= 0) {
            if (rc) return rc;
        } else {
            return cli_unknown(&a);
        }
    }
    return 0;
}

/* GFLOP/s of a 512 x 1024 x 1024 matrix multiply on the model's device (the best of 5). */
static double gemm_rate(const kc_device_opts *dev) {
    enum { N = 512, K = 1024, U = 1024 };
    kc_model *g = NULL;
    double best = 0;
    kc_sequential("gemm_rate", &g);
    kc_add(g, KC_INPUT(.shape = {K}));
    kc_add(g, KC_DENSE(.units = U, .use_bias = KC_FALSE));
    float *x = calloc((size_t)N * K, sizeof(float)), *y = malloc((size_t)N * U * sizeof(float));
    for (int64_t i = 0; x && i < (int64_t)N * K; i++) x[i] = (float)((i * 7919) % 97) / 97.0f;
    if (x && y && kc_model_set_device_opts(g, dev) == KC_STATUS_OK && kc_model_build(g) == KC_STATUS_OK &&
        kc_predict(g, x, N, N, y) == KC_STATUS_OK) /* the first call plans and allocates */
        for (int r = 0; r < 5; r++) {
            double t0 = cli_now();
            if (kc_predict(g, x, N, N, y) != KC_STATUS_OK) break;
            double dt = cli_now() - t0;
            if (dt > 0) best = fmax(best, 2.0 * N * K * U / dt / 1e9);
        }
    free(x);
    free(y);
    kc_model_destroy(g);
    return best;
}

/* Random examples of the model's input shape, labels below its number of outputs. */
static kc_status random_data(kc_model *m, int64_t n, kc_dataset **out) {
    kc_shape in, o;
    KC_TRY(kc_model_input_shape(m, &in));
    KC_TRY(kc_model_output_shape(m, &o));
    int64_t size = cli_shape_size(&in), classes = cli_shape_size(&o);
    if (classes < 2) classes = 2;
    float *x = malloc((size_t)(n * size) * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    kc_status s = KC_STATUS_OUT_OF_MEMORY;
    if (x && y) {
        uint64_t r = 12345;
        for (int64_t i = 0; i < n * size; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            x[i] = (float)(r >> 40) / 16777216.0f;
        }
        for (int64_t i = 0; i < n; i++) y[i] = (int32_t)(i % classes);
        s = kc_dataset_from_memory(x, y, n, in, (int)classes, out);
    }
    free(x);
    free(y);
    return s;
}

/* Backward FLOPs: input and weight gradients for Conv2D and Dense (only the weights'
 * where the layer reads the model's input), one forward's worth for the others. */
static int64_t backward_flops(const kc_layer_info *l, bool first) {
    bool gemm = !strcmp(l->class_name, "Conv2D") || !strcmp(l->class_name, "Dense");
    return gemm ? (first ? 1 : 2) * l->flops : l->flops;
}

static void find_bottleneck(prof_result *r) {
    const prof_row *top = r->n > 0 ? &r->rows[0] : NULL;
    double other = r->step_ms > 0 ? r->other_ms / r->step_ms : 0;
    if (r->wait_share >= 0.10)
        snprintf(r->bottleneck, sizeof r->bottleneck, "the input pipeline: the step waited for data %.0f%% of the "
                 "time; raise the loader's prefetch", 100 * r->wait_share);
    else if (top && other > top->share)
        snprintf(r->bottleneck, sizeof r->bottleneck, "host overhead: %.0f%% of the step is outside the layers, "
                 "the loss and the optimizer (more examples per step amortise it)", 100 * other);
    else if (top)
        snprintf(r->bottleneck, sizeof r->bottleneck, "layer '%s' (%s): %.0f%% of the step at %.1f GFLOP/s, %.0f%% "
                 "of the matrix-multiply rate", top->info.name, top->info.class_name, 100 * top->share,
                 top->gflops, 100 * top->gemm_frac);
}

static int cmp_cost(const void *a, const void *b) {
    const prof_row *x = a, *y = b;
    double cx = x->fwd_ms + x->bwd_ms, cy = y->fwd_ms + y->bwd_ms;
    return cx < cy ? 1 : cx > cy ? -1 : 0;
}

/* Per-layer rows from the profiling counters of the timed run. */
static kc_status collect(kc_model *m, const kc_epoch_logs *e, long batch, prof_result *r) {
    int n = kc_model_num_layers(m);
    r->rows = calloc((size_t)n, sizeof *r->rows);
    if (!r->rows) return KC_STATUS_OUT_OF_MEMORY;
    double steps = (double)e->steps, in_layers = 0;
    r->step_ms = 1e3 * e->seconds / steps;
    r->images_per_second = e->images_per_second;
    r->wait_share = e->seconds > 0 ? e->input_wait_seconds / e->seconds : 0;
    bool first = true;
    for (int i = 0; i < n; i++) {
        prof_row *row = &r->rows[r->n];
        kc_layer_timing t;
        KC_TRY(kc_model_layer_info(m, i, &row->info));
        KC_TRY(kc_model_layer_timing(m, i, &t));
        if (!strcmp(row->info.class_name, "InputLayer")) continue;
        row->fwd_ms = 1e3 * t.forward_seconds / steps;
        row->bwd_ms = 1e3 * t.backward_seconds / steps;
        in_layers += row->fwd_ms + row->bwd_ms;
        row->fwd_flops = row->info.flops * batch;
        row->bwd_flops = t.backward_calls > 0 ? backward_flops(&row->info, first) * batch : 0;
        if (row->info.params > 0) first = false;
        double ms = row->fwd_ms + row->bwd_ms;
        row->share = r->step_ms > 0 ? ms / r->step_ms : 0;
        row->gflops = ms > 0 ? (double)(row->fwd_flops + row->bwd_flops) / (ms * 1e6) : 0;
        row->gemm_frac = r->gemm_gflops > 0 ? row->gflops / r->gemm_gflops : 0;
        row->memory = 4 * (cli_shape_size(&row->info.output_shape) * batch + row->info.params);
        r->n++;
    }
    double loss_s, opt_s;
    KC_TRY(kc_model_step_overhead(m, &loss_s, &opt_s));
    r->loss_ms = 1e3 * loss_s / steps;
    r->opt_ms = 1e3 * opt_s / steps;
    r->other_ms = fmax(0, r->step_ms - in_layers - r->loss_ms - r->opt_ms);
    qsort(r->rows, (size_t)r->n, sizeof *r->rows, cmp_cost);
    find_bottleneck(r);
    return KC_STATUS_OK;
}

static void print_table(kc_model *m, const prof_args *p, const prof_result *r) {
    printf("profile of '%s' on %s: batch size %ld, %ld steps after %ld warm-up\n", kc_model_name(m), kc_model_device(m),
           p->batch, p->steps, p->warmup);
    printf("matrix-multiply rate measured: %.1f GFLOP/s\n\n", r->gemm_gflops);
    printf("%-34s %10s %10s %7s %12s %12s %9s %9s %10s\n", "layer (type)", "fwd ms", "bwd ms", "share", "fwd FLOPs",
           "bwd FLOPs", "GFLOP/s", "of GEMM", "memory MiB");
    for (int i = 0; i < r->n; i++) {
        const prof_row *w = &r->rows[i];
        char name[64], ff[32], bf[32];
        snprintf(name, sizeof name, "%s (%s)", w->info.name, w->info.class_name);
        printf("%-34.34s %10.3f %10.3f %6.1f%% %12s %12s %9.1f %8.1f%% %10.2f\n", name, w->fwd_ms, w->bwd_ms,
               100 * w->share, cli_commas(w->fwd_flops, ff, sizeof ff), cli_commas(w->bwd_flops, bf, sizeof bf),
               w->gflops, 100 * w->gemm_frac, (double)w->memory / 1048576.0);
    }
    printf("%-34s %10.3f %10s %6.1f%%\n", "loss", r->loss_ms, "", 100 * r->loss_ms / r->step_ms);
    printf("%-34s %10.3f %10s %6.1f%%\n", "optimizer update", r->opt_ms, "", 100 * r->opt_ms / r->step_ms);
    printf("%-34s %10.3f %10s %6.1f%%\n", "other (data, copies, host)", r->other_ms, "", 100 * r->other_ms / r->step_ms);
    printf("\nstep: %.3f ms, %.0f images/s\nbottleneck: %s\n", r->step_ms, r->images_per_second, r->bottleneck);
}

static void json_kv(const char *key, double v, bool comma) {
    printf("\"%s\": ", key);
    cli_json_number(stdout, v);
    if (comma) fputs(", ", stdout);
}

static void print_json(kc_model *m, const prof_args *p, const prof_result *r) {
    fputs("{\"model\": ", stdout);
    cli_json_string(stdout, kc_model_name(m));
    fputs(", \"device\": ", stdout);
    cli_json_string(stdout, kc_model_device(m));
    printf(", \"batch_size\": %ld, \"steps\": %ld, ", p->batch, p->steps);
    json_kv("step_ms", r->step_ms, true);
    json_kv("images_per_second", r->images_per_second, true);
    json_kv("gemm_gflops", r->gemm_gflops, true);
    json_kv("loss_ms", r->loss_ms, true);
    json_kv("optimizer_ms", r->opt_ms, true);
    json_kv("other_ms", r->other_ms, true);
    fputs("\"bottleneck\": ", stdout);
    cli_json_string(stdout, r->bottleneck);
    fputs(", \"layers\": [", stdout);
    for (int i = 0; i < r->n; i++) {
        const prof_row *w = &r->rows[i];
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        cli_json_string(stdout, w->info.name);
        fputs(", \"class_name\": ", stdout);
        cli_json_string(stdout, w->info.class_name);
        printf(", \"forward_flops\": %lld, \"backward_flops\": %lld, \"memory_bytes\": %lld, ",
               (long long)w->fwd_flops, (long long)w->bwd_flops, (long long)w->memory);
        json_kv("forward_ms", w->fwd_ms, true);
        json_kv("backward_ms", w->bwd_ms, true);
        json_kv("share", w->share, true);
        json_kv("gflops", w->gflops, true);
        json_kv("gemm_fraction", w->gemm_frac, false);
        fputs("}", stdout);
    }
    fputs("]}\n", stdout);
}

/* Warm up, then the timed steps with profiling on; the rows into r. */
static int run_profile(kc_model *m, const prof_args *p, prof_result *r) {
    kc_dataset *d = NULL;
    kc_history *h = NULL;
    kc_status s = random_data(m, p->batch * (p->warmup > p->steps ? p->warmup : p->steps), &d);
    kc_fit_opts fo = {.epochs = 1, .batch_size = (int)p->batch, .seed = 1, .shuffle = KC_FALSE};
    if (s == KC_STATUS_OK && p->warmup > 0) {
        fo.steps_per_epoch = p->warmup;
        s = kc_fit(m, d, &fo, NULL);
    }
    if (s == KC_STATUS_OK) s = kc_model_set_profiling(m, 1);
    fo.steps_per_epoch = p->steps;
    if (s == KC_STATUS_OK) s = kc_fit(m, d, &fo, &h);
    if (s == KC_STATUS_OK) s = collect(m, kc_history_epoch(h, 0), p->batch, r);
    kc_history_destroy(h);
    kc_dataset_destroy(d);
    return s ? cli_fail(s, CLI_PHASE_RUN) : 0;
}

int cli_cmd_profile(int argc, char **argv) {
    prof_args p = {.batch = 128, .steps = 20, .warmup = 3};
    int rc = parse(argc, argv, &p);
    if (rc) return rc < 0 ? CLI_EXIT_OK : rc;
    if (p.has_threads) kc_set_num_threads((int)p.threads);
    kc_device_opts dev;
    if ((rc = cli_device_resolve(&p.dev, &dev))) return rc;
    kc_model *m = NULL;
    kc_status s = p.model_path ? kc_model_load_ex(p.model_path, &dev, &m) : kc_default_cnn(28, 28, 1, 10, &m);
    if (!s && !p.model_path) s = kc_model_set_device_opts(m, &dev);
    if (s) {
        kc_model_destroy(m);
        return cli_fail(s, CLI_PHASE_LOAD);
    }
    prof_result r = {0};
    kc_compile_opts co = {.optimizer = {.name = "adam"}, .loss = "sparse_categorical_crossentropy",
                          .metrics = {"accuracy"}};
    if ((s = kc_model_build(m)) || (s = kc_compile(m, &co))) {
        rc = cli_fail(s, CLI_PHASE_LOAD);
        goto done;
    }
    r.gemm_gflops = gemm_rate(&dev);
    if ((rc = run_profile(m, &p, &r))) goto done;
    if (p.json) print_json(m, &p, &r);
    else print_table(m, &p, &r);
done:
    free(r.rows);
    kc_model_destroy(m);
    return rc;
}
