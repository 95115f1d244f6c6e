/* image_opts.c — the options of folders of images (--data images:DIR), shared by train,
 * evaluate and predict, and opening data specs with them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

bool cli_is_images_spec(const char *spec) { return spec && strncmp(spec, "images:", 7) == 0; }

static int parse_size(cli_args *a, cli_image_opts *io) {
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    char buf[64];
    const char *parts[2];
    int n = cli_split_list(v, buf, sizeof buf, parts, 2);
    long h = 0, w = 0;
    if (n < 1 || cli_parse_long(parts[0], 1, 16384, &h) || (n == 2 && cli_parse_long(parts[1], 1, 16384, &w)))
        return cli_usage_error(a->cmd, "--image-size '%s' is not HEIGHT,WIDTH (or one number for both), each 1..16384",
                               v);
    io->o.height = (int)h;
    io->o.width = (int)(n == 2 ? w : h);
    return 0;
}

static int parse_named(cli_args *a, int (*parse)(const char *), const char *what, const char *choices, int *out) {
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    int k = parse(v);
    if (k < 0) return cli_usage_error(a->cmd, "%s '%s' is not one of %s", what, v, choices);
    *out = k;
    return 0;
}

static int parse_on_bad(const char *s) { return strcmp(s, "error") == 0 ? 0 : strcmp(s, "skip") == 0 ? 1 : -1; }

static int parse_classes(cli_args *a, cli_image_opts *io) {
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    int n = cli_split_list(v, io->class_buf, sizeof io->class_buf, io->class_ptrs, CLI_MAX_CLASSES);
    if (n < 1) return cli_usage_error(a->cmd, "--class-names '%s': give NAME,NAME,... (at most %d, none empty)", v,
                                      CLI_MAX_CLASSES);
    io->o.class_names = io->class_ptrs;
    io->o.num_class_names = n;
    return 0;
}

/* --cache (in memory), --cache FILE or --cache=FILE (in a file). The next argument is the
 * file unless it is an option; a model file there is refused rather than overwritten. */
static int parse_cache(cli_args *a, cli_image_opts *io) {
    const char *f = a->inline_val;
    if (!f && a->i + 1 < a->argc && a->argv[a->i + 1][0] && a->argv[a->i + 1][0] != '-') f = a->argv[++a->i];
    io->o.cache = f ? KC_IMAGE_CACHE_FILE : KC_IMAGE_CACHE_MEMORY;
    io->o.cache_file = f;
    if (f && !*f) return cli_usage_error(a->cmd, "--cache= needs a file name (or --cache alone for memory)");
    if (f && (cli_ends_with(f, ".keras") || cli_ends_with(f, ".h5")))
        return cli_usage_error(a->cmd, "--cache '%s' looks like a model file; name the cache file (e.g. "
                               "--cache images.cache) or put the model path before --cache", f);
    return 0;
}

int cli_image_option(cli_args *a, cli_image_opts *io) {
    int rc, k = 0;
    long n = 0;
    if (cli_is(a, "--image-size")) return parse_size(a, io);
    if (cli_is(a, "--color-mode")) {
        rc = parse_named(a, kc_color_mode_parse, "--color-mode", "grayscale, rgb, rgba", &k);
        io->o.color_mode = (kc_color_mode)k;
        return rc;
    }
    if (cli_is(a, "--interpolation")) {
        rc = parse_named(a, kc_interpolation_parse, "--interpolation", "bilinear, nearest, bicubic, area", &k);
        io->o.interpolation = (kc_interpolation)k;
        return rc;
    }
    if (cli_is(a, "--label-mode")) {
        rc = parse_named(a, kc_label_mode_parse, "--label-mode", "int, categorical, binary", &k);
        io->o.label_mode = (kc_label_mode)k;
        io->has_label_mode = true;
        return rc;
    }
    if (cli_is(a, "--on-bad-image")) {
        rc = parse_named(a, parse_on_bad, "--on-bad-image", "error, skip", &k);
        io->o.skip_bad_images = k;
        return rc;
    }
    if (cli_is(a, "--class-names")) return parse_classes(a, io);
    if (cli_is(a, "--crop-to-aspect-ratio") || cli_is(a, "--pad-to-aspect-ratio") || cli_is(a, "--follow-links") ||
        cli_is(a, "--jpeg-dct-scaling")) {
        if ((rc = cli_flag(a))) return rc;
        const char *f = a->arg + 2;
        if (f[0] == 'c') io->o.crop_to_aspect_ratio = 1;
        else if (f[0] == 'p') io->o.pad_to_aspect_ratio = 1;
        else if (f[0] == 'f') io->o.follow_links = 1;
        else io->o.dct_scaling = 1;
        if (io->o.crop_to_aspect_ratio && io->o.pad_to_aspect_ratio)
            return cli_usage_error(a->cmd, "--crop-to-aspect-ratio and --pad-to-aspect-ratio cannot both be given");
        return 0;
    }
    if (cli_is(a, "--cache")) return parse_cache(a, io);
    if (cli_is(a, "--no-cache")) {
        io->o.cache = KC_IMAGE_CACHE_NONE;
        return cli_flag(a);
    }
    if (cli_is(a, "--loader-threads")) {
        if ((rc = cli_int_value(a, 1, 256, &n))) return rc;
        io->o.threads = (int)n;
        return 0;
    }
    if (cli_is(a, "--max-pixels")) {
        if ((rc = cli_int_value(a, 1, 1L << 40, &n))) return rc;
        io->o.max_pixels = n;
        return 0;
    }
    return -1;
}

kc_status cli_open_data(const char *spec, const cli_image_opts *io, uint64_t seed, kc_dataset **out) {
    if (!cli_is_images_spec(spec)) return kc_dataset_open(spec, out);
    kc_image_opts o = io ? io->o : (kc_image_opts){0};
    o.seed = seed;
    return kc_dataset_open_images(spec + 7, &o, out); /* it warns of each skipped file and the count */
}

const char *cli_label_mode_loss(kc_label_mode m) {
    return m == KC_LABEL_CATEGORICAL ? "categorical_crossentropy"
           : m == KC_LABEL_BINARY    ? "binary_crossentropy"
                                     : "sparse_categorical_crossentropy";
}

int cli_images_split(kc_dataset **train, double fraction, kc_dataset **val) {
    kc_dataset *tr = NULL;
    kc_status s = kc_dataset_split_tail(*train, fraction, &tr, val);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    kc_dataset_destroy(*train);
    *train = tr;
    return 0;
}

int cli_images_fit_model(kc_model *m, const kc_dataset *d, const char *spec) {
    kc_shape in, ds = kc_dataset_shape(d);
    kc_image_opts o;
    kc_status s = kc_model_input_shape(m, &in);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    int want = in.rank == 3 ? in.dim[2] : in.rank == 2 ? 1 : 0, have = ds.dim[2];
    if (want && want != have) {
        const char *mode = want == 1 ? "grayscale" : want == 3 ? "rgb" : want == 4 ? "rgba" : NULL;
        return cli_error(CLI_EXIT_INPUT, "model '%s' takes images of %d channel%s but '%s' was read as %d (--color-mode "
                         "%s)%s%s", kc_model_name(m), want, want == 1 ? "" : "s", spec, have,
                         have == 1 ? "grayscale" : have == 3 ? "rgb" : "rgba", mode ? "; use --color-mode " : "",
                         mode ? mode : "");
    }
    if (kc_dataset_image_opts(d, &o) && (s = kc_model_set_image_opts(m, &o))) return cli_fail(s, CLI_PHASE_RUN);
    return 0;
}
