/* test_images.c — folders of images (kc_dataset_open_images): pixel agreement with real
 * Keras 3 (tests/fixtures/images, made by make_fixture.py: every interpolation and colour
 * mode at two sizes, crop and pad to the aspect ratio), the seeded validation split, the
 * same data for any number of decode threads, and bad input: corrupt and truncated files,
 * skipping them, empty folders, pixel limits, symlink loops. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "kerac.h"
#include "data/image.h"

static char g_fix[1024]; /* tests/fixtures/images */
static char g_tmp[256];  /* a scratch folder */

static const char *fix(const char *name) {
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_fix, name);
    return buf[k];
}

static const char *tmp(const char *name) {
    static char buf[8][600];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_tmp, name);
    return buf[k];
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open '%s'", path);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)len, f), (size_t)len);
    b[len] = '\0';
    fclose(f);
    if (n) *n = (size_t)len;
    return b;
}

static void spit(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* Every line of a text file must be the dataset's file list, in order. */
static void check_files(const kc_dataset *d, const char *list_path) {
    char *text = slurp(list_path, NULL);
    int64_t i = 0;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"), i++) {
        const char *f = kc_dataset_file(d, i);
        if (!f || strcmp(f, line) != 0) fail_msg("%s: example %lld is '%s', Keras has '%s'", list_path, (long long)i, f ? f : "(none)", line);
    }
    assert_int_equal(i, kc_dataset_size(d));
    free(text);
}

static bool ends_with_ci(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* One fixture configuration: kerac's batch against Keras's, within tolerance per format. */
static void check_config(const char *cfg, const char *folder, kc_image_opts o) {
    char path[1400];
    kc_dataset *d = NULL;
    o.no_shuffle = 1;
    o.threads = 3;
    if (kc_dataset_open_images(fix(folder), &o, &d)) fail_msg("%s: %s", cfg, kc_last_error());
    snprintf(path, sizeof path, "%s/keras_%s.txt", g_fix, cfg);
    check_files(d, path);
    snprintf(path, sizeof path, "%s/keras_%s.f32", g_fix, cfg);
    size_t bytes = 0;
    float *want = (float *)(void *)slurp(path, &bytes);
    int64_t n = kc_dataset_size(d), e = (int64_t)o.height * o.width * kc__image_channels(o.color_mode);
    assert_int_equal(bytes, (size_t)(n * e) * sizeof(float));
    float *x = malloc((size_t)(n * e) * sizeof(float));
    assert_non_null(x);
    assert_int_equal(kc_dataset_read(d, 0, n, x, NULL), KC_STATUS_OK);
    for (int64_t i = 0; i < n; i++) {
        const char *f = kc_dataset_file(d, i);
        bool jpeg = ends_with_ci(f, ".jpg") || ends_with_ci(f, ".jpeg");
        double worst = 0;
        int64_t at = 0;
        for (int64_t k = 0; k < e; k++) {
            double diff = fabs((double)x[i * e + k] * 255.0 - (double)want[i * e + k]);
            if (diff > worst) worst = diff, at = k;
        }
        /* lossless formats: float rounding only; JPEG: decoders may differ by one level */
        double tol = jpeg ? 1.0 + 1e-3 : 2e-3;
        if (worst > tol)
            fail_msg("%s: '%s' differs from Keras by %.4f grey levels (tolerance %g) at element %lld: kerac %.4f, Keras %.4f",
                     cfg, f, worst, tol, (long long)at, x[i * e + at] * 255.0, want[i * e + at]);
    }
    free(x);
    free(want);
    kc_dataset_destroy(d);
}

static void test_keras_pixels(void **state) {
    (void)state;
    static const int sizes[2][2] = {{16, 20}, {37, 29}};
    static const char *const modes[] = {"grayscale", "rgb", "rgba"};
    static const char *const folders[] = {"gray", "mixed", "png"};
    static const char *const interps[] = {"bilinear", "nearest", "bicubic", "area"};
    int checked = 0;
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 3; m++)
            for (int i = 0; i < 4; i++) {
                char cfg[128];
                snprintf(cfg, sizeof cfg, "%s_%dx%d_%s", modes[m], sizes[s][0], sizes[s][1], interps[i]);
                kc_image_opts o = {.height = sizes[s][0], .width = sizes[s][1]};
                o.color_mode = (kc_color_mode)kc_color_mode_parse(modes[m]);
                o.interpolation = (kc_interpolation)kc_interpolation_parse(interps[i]);
                check_config(cfg, folders[m], o);
                checked++;
            }
    kc_image_opts crop = {.height = 24, .width = 24, .crop_to_aspect_ratio = 1};
    check_config("rgb_24x24_bilinear_crop", "mixed", crop);
    kc_image_opts pad = {.height = 24, .width = 24, .pad_to_aspect_ratio = 1};
    check_config("rgb_24x24_bilinear_pad", "mixed", pad);
    assert_int_equal(checked, 24);
}

/* subset="both" with seed 123 and validation_split 0.25 lists the same files as Keras. */
static void test_keras_split(void **state) {
    (void)state;
    kc_image_opts o = {.height = 8, .width = 8, .seed = 123};
    kc_dataset *d = NULL, *tr = NULL, *va = NULL;
    assert_int_equal(kc_dataset_open_images(fix("mixed"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_num_classes(d), 3);
    assert_string_equal(kc_dataset_class_name(d, 0), "ants");
    assert_string_equal(kc_dataset_class_name(d, 2), "cats");
    assert_null(kc_dataset_class_name(d, 3));
    assert_int_equal(kc_dataset_split_tail(d, 0.25, &tr, &va), KC_STATUS_OK);
    check_files(tr, fix("split_train.txt"));
    check_files(va, fix("split_val.txt"));
    /* labels follow the files: "cats/more/c4.jpg" is class 2 wherever it lands */
    for (int64_t i = 0; i < kc_dataset_size(d); i++) {
        int32_t y;
        assert_int_equal(kc_dataset_read(d, i, 1, NULL, &y), KC_STATUS_OK);
        const char *f = kc_dataset_file(d, i);
        assert_int_equal(y, f[0] == 'a' ? 0 : f[0] == 'b' ? 1 : 2);
    }
    kc_dataset_destroy(tr);
    kc_dataset_destroy(va);
    kc_dataset_destroy(d);
    assert_int_equal(kc_dataset_split_tail(NULL, 0.25, &tr, &va), KC_STATUS_INVALID_ARGUMENT);
}

/* numpy 1.24: l = list(range(10)); RandomState(7).shuffle(l), and the same of 5 with seed 2**32 - 1. */
static void test_numpy_shuffle(void **state) {
    (void)state;
    int64_t p[10];
    kc__numpy_shuffle_perm(7, 10, p);
    const int64_t want7[10] = {8, 5, 0, 2, 1, 9, 7, 3, 6, 4};
    for (int i = 0; i < 10; i++) assert_int_equal(p[i], want7[i]);
    kc__numpy_shuffle_perm(0xffffffffu, 5, p);
    const int64_t want_max[5] = {4, 1, 0, 2, 3};
    for (int i = 0; i < 5; i++) assert_int_equal(p[i], want_max[i]);
}

/* All examples of a dataset, read in a shuffled order (as the loader gathers a batch). */
static float *read_all(const kc_dataset *d, int64_t e, int32_t *y) {
    int64_t n = kc_dataset_size(d);
    float *x = malloc((size_t)(n * e) * sizeof(float)), *one = malloc((size_t)e * sizeof(float));
    assert_non_null(x);
    for (int64_t k = 0; k < n; k++) { /* one at a time, backwards */
        int64_t i = n - 1 - k;
        assert_int_equal(kc_dataset_read(d, i, 1, one, y + i), KC_STATUS_OK);
        memcpy(x + i * e, one, (size_t)e * sizeof(float));
    }
    float *all = malloc((size_t)(n * e) * sizeof(float));
    assert_int_equal(kc_dataset_read(d, 0, n, all, NULL), KC_STATUS_OK); /* a whole batch */
    assert_memory_equal(all, x, (size_t)(n * e) * sizeof(float));
    free(all);
    free(one);
    return x;
}

/* The same examples, to the bit, with 1 and 4 decode threads and each cache: in memory, in
 * a file, and none (decoded by the pool each time a batch is gathered). */
static void test_threads_deterministic(void **state) {
    (void)state;
    const int64_t e = 37 * 29 * 3;
    kc_image_opts o = {.height = 37, .width = 29, .seed = 5, .threads = 1, .interpolation = KC_INTERP_BICUBIC,
                       .cache = KC_IMAGE_CACHE_MEMORY};
    kc_dataset *a = NULL;
    assert_int_equal(kc_dataset_open_images(fix("mixed"), &o, &a), KC_STATUS_OK);
    const int64_t n = kc_dataset_size(a);
    int32_t ya[64], yb[64];
    assert_true(n <= 64);
    float *xa = read_all(a, e, ya);
    size_t bytes = 0, resident = 0, mapped = 0;
    assert_int_equal(kc_dataset_image_cache(a, &bytes, NULL), KC_IMAGE_CACHE_MEMORY);
    assert_int_equal(bytes, (size_t)(n * e) * 4);
    const kc_image_cache modes[] = {KC_IMAGE_CACHE_MEMORY, KC_IMAGE_CACHE_NONE, KC_IMAGE_CACHE_FILE};
    o.cache_file = tmp("mixed.cache");
    for (int m = 0; m < 3; m++)
        for (int t = 1; t <= 4; t += 3) {
            o.cache = modes[m];
            o.threads = t;
            unlink(tmp("mixed.cache")); /* decoded with this thread count, not reused */
            kc_dataset *b = NULL;
            assert_int_equal(kc_dataset_open_images(fix("mixed"), &o, &b), KC_STATUS_OK);
            assert_int_equal(kc_dataset_size(b), n);
            assert_int_equal(kc_dataset_image_cache(b, &bytes, NULL), modes[m]);
            assert_int_equal(bytes, modes[m] == KC_IMAGE_CACHE_NONE ? 0 : (size_t)(n * e) * 4);
            assert_int_equal(kc_dataset_memory(b, &resident, &mapped), KC_STATUS_OK);
            assert_int_equal(resident, (size_t)n * 4 + (modes[m] == KC_IMAGE_CACHE_MEMORY ? bytes : 0));
            assert_int_equal(mapped, modes[m] == KC_IMAGE_CACHE_FILE ? bytes : 0);
            float *xb = read_all(b, e, yb);
            assert_memory_equal(xa, xb, (size_t)(n * e) * sizeof(float));
            assert_memory_equal(ya, yb, (size_t)n * sizeof(int32_t));
            free(xb);
            kc_dataset_destroy(b);
        }
    free(xa);
    kc_dataset_destroy(a);
}

/* ---------------------------------------------------------------- bad input */

static void copy_file(const char *from, const char *to, size_t keep) {
    size_t n = 0;
    char *b = slurp(from, &n);
    spit(to, b, keep && keep < n ? keep : n);
    free(b);
}

/* DIR/x/good.jpg and DIR/y/good.png under the scratch folder. */
static void two_classes(const char *dir) {
    char p[256];
    mkdir(tmp(dir), 0755);
    snprintf(p, sizeof p, "%s/x", dir);
    mkdir(tmp(p), 0755);
    snprintf(p, sizeof p, "%s/y", dir);
    mkdir(tmp(p), 0755);
    snprintf(p, sizeof p, "%s/x/good.jpg", dir);
    copy_file(fix("mixed/ants/a1.jpg"), tmp(p), 0);
    snprintf(p, sizeof p, "%s/y/good.png", dir);
    copy_file(fix("mixed/ants/A3.PNG"), tmp(p), 0);
}

static kc_status open_dir(const char *dir, kc_image_opts o, kc_dataset **d) {
    o.height = o.height ? o.height : 8;
    o.width = o.width ? o.width : 8;
    o.threads = 2;
    return kc_dataset_open_images(dir, &o, d);
}

static void expect_error(const char *dir, kc_image_opts o, kc_status want, const char *text) {
    kc_dataset *d = NULL;
    kc_status s = open_dir(dir, o, &d);
    if (s != want || !strstr(kc_last_error(), text))
        fail_msg("'%s': status %d, message '%s'; want %d and '%s'", dir, s, kc_last_error(), want, text);
    assert_null(d);
}

static void test_bad_files(void **state) {
    (void)state;
    two_classes("bad");
    copy_file(fix("mixed/ants/a1.jpg"), tmp("bad/x/short.jpg"), 300); /* cut inside the headers */
    kc_image_opts o = {0};
    expect_error(tmp("bad"), o, KC_STATUS_BAD_FILE, "bad/x/short.jpg': not a readable JPEG");
    copy_file(fix("mixed/ants/a1.jpg"), tmp("bad/x/short.jpg"), 1400); /* cut inside the pixels */
    expect_error(tmp("bad"), o, KC_STATUS_BAD_FILE, "bad/x/short.jpg': corrupt JPEG: Premature end");
    unlink(tmp("bad/x/short.jpg"));
    spit(tmp("bad/y/text.gif"), "hello, not a gif", 16);
    expect_error(tmp("bad"), o, KC_STATUS_BAD_FILE, "text.gif': not a JPEG, PNG, GIF or BMP");
    unlink(tmp("bad/y/text.gif"));
    copy_file(fix("mixed/ants/A3.PNG"), tmp("bad/y/short.png"), 100);
    expect_error(tmp("bad"), o, KC_STATUS_BAD_FILE, "short.png': corrupt PNG: the file is truncated");
    spit(tmp("bad/y/text.gif"), "hello, not a gif", 16);
    /* two bad files: the one first in the example order, whatever the threads did */
    kc_dataset *d = NULL;
    o.threads = 1;
    kc_status s1 = kc_dataset_open_images(tmp("bad"), &o, &d);
    char first[1024];
    snprintf(first, sizeof first, "%s", kc_last_error());
    for (int t = 2; t <= 4; t++) {
        o.threads = t;
        assert_int_equal(kc_dataset_open_images(tmp("bad"), &o, &d), s1);
        assert_string_equal(kc_last_error(), first);
    }
    o.threads = 0;
    /* skipping: a warning each, a count, the good images kept with their labels */
    o.skip_bad_images = 1;
    assert_int_equal(open_dir(tmp("bad"), o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_size(d), 2);
    assert_int_equal(kc_dataset_skipped(d), 2);
    assert_int_equal(kc_dataset_num_classes(d), 2);
    kc_dataset_destroy(d);
    /* the pixel limit is checked before decoding */
    o.skip_bad_images = 0;
    unlink(tmp("bad/y/short.png"));
    unlink(tmp("bad/y/text.gif"));
    o.max_pixels = 1000;
    expect_error(tmp("bad"), o, KC_STATUS_BAD_FILE, "over the limit of 1000");
}

static void test_bad_folders(void **state) {
    (void)state;
    kc_image_opts o = {0};
    expect_error(tmp("missing"), o, KC_STATUS_IO, "cannot read the image folder");
    mkdir(tmp("empty"), 0755);
    expect_error(tmp("empty"), o, KC_STATUS_BAD_FILE, "has no subfolders");
    mkdir(tmp("empty/a"), 0755);
    mkdir(tmp("empty/b"), 0755);
    spit(tmp("empty/a/readme.txt"), "x", 1);
    expect_error(tmp("empty"), o, KC_STATUS_BAD_FILE, "no images in");
    /* a class with no images is kept (Keras does too), with a warning */
    copy_file(fix("mixed/ants/A3.PNG"), tmp("empty/b/one.png"), 0);
    kc_dataset *d = NULL;
    assert_int_equal(open_dir(tmp("empty"), o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_num_classes(d), 2);
    assert_int_equal(kc_dataset_size(d), 1);
    kc_dataset_destroy(d);
    /* binary labels need two classes; explicit class names must be the subfolders */
    o.label_mode = KC_LABEL_BINARY;
    mkdir(tmp("empty/c"), 0755);
    expect_error(tmp("empty"), o, KC_STATUS_INVALID_ARGUMENT, "needs exactly 2 classes");
    o.label_mode = KC_LABEL_INT;
    const char *names[] = {"c", "b", "zebra"};
    o.class_names = names;
    o.num_class_names = 3;
    expect_error(tmp("empty"), o, KC_STATUS_INVALID_ARGUMENT, "are not the subfolders");
    names[2] = "a";
    assert_int_equal(open_dir(tmp("empty"), o, &d), KC_STATUS_OK);
    assert_string_equal(kc_dataset_class_name(d, 0), "c");
    int32_t y;
    assert_int_equal(kc_dataset_read(d, 0, 1, NULL, &y), KC_STATUS_OK);
    assert_int_equal(y, 1); /* one.png is in b, the second class named */
    kc_dataset_destroy(d);
    /* a symlink loop: ignored unless links are followed, then reported */
    assert_int_equal(symlink("..", tmp("empty/b/loop")), 0);
    o.class_names = NULL;
    assert_int_equal(open_dir(tmp("empty"), o, &d), KC_STATUS_OK);
    kc_dataset_destroy(d);
    o.follow_links = 1;
    expect_error(tmp("empty"), o, KC_STATUS_BAD_FILE, "symlink loop");
}

/* A cache file is read as it is while the files and options match (a value changed in the
 * file shows), and decoded again when an image changes or the options do. */
static void test_cache_file_reuse(void **state) {
    (void)state;
    two_classes("reuse");
    kc_image_opts o = {.height = 6, .width = 5, .threads = 2, .cache = KC_IMAGE_CACHE_FILE,
                       .cache_file = tmp("reuse.cache")};
    unlink(tmp("reuse.cache"));
    kc_dataset *d = NULL;
    float x0[90], x1[90];
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(d, 0, 1, x0, NULL), KC_STATUS_OK);
    kc_dataset_destroy(d);
    /* a model takes how images are read, not where a dataset kept them */
    kc_model *m = NULL;
    kc_image_opts mo;
    assert_int_equal(kc_default_cnn(28, 28, 1, 10, &m), KC_STATUS_OK);
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_image_opts(d, &mo), 1);
    assert_int_equal(mo.cache, KC_IMAGE_CACHE_FILE);
    assert_int_equal(kc_model_set_image_opts(m, &mo), KC_STATUS_OK);
    kc_dataset_destroy(d);
    assert_int_equal(kc_model_image_opts(m, &mo), 1);
    assert_int_equal(mo.cache, KC_IMAGE_CACHE_AUTO);
    assert_null(mo.cache_file);
    assert_int_equal(mo.height, 6);
    kc_model_destroy(m);
    /* change the first cached value: a reused file shows it */
    FILE *f = fopen(tmp("reuse.cache"), "r+b");
    assert_non_null(f);
    float v = 7.0f;
    assert_int_equal(fseek(f, 64, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, sizeof v, 1, f), 1);
    fclose(f);
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(d, 0, 1, x1, NULL), KC_STATUS_OK);
    assert_true(x1[0] == 7.0f);
    assert_memory_equal(x0 + 1, x1 + 1, 89 * sizeof(float));
    kc_dataset_destroy(d);
    /* another size: decoded again */
    o.height = 5;
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    kc_dataset_destroy(d);
    o.height = 6;
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(d, 0, 1, x1, NULL), KC_STATUS_OK);
    assert_memory_equal(x0, x1, sizeof x0);
    kc_dataset_destroy(d);
    /* a changed image: decoded again (the value written above is gone) */
    f = fopen(tmp("reuse.cache"), "r+b");
    assert_int_equal(fseek(f, 64, SEEK_SET), 0);
    assert_int_equal(fwrite(&v, sizeof v, 1, f), 1);
    fclose(f);
    copy_file(fix("mixed/ants/A3.PNG"), tmp("reuse/y/good.png"), 0); /* a new modification time */
    struct timespec ts[2] = {{.tv_sec = 1000000000, .tv_nsec = 0}, {.tv_sec = 1000000000, .tv_nsec = 0}};
    assert_int_equal(utimensat(AT_FDCWD, tmp("reuse/y/good.png"), ts, 0), 0);
    assert_int_equal(kc_dataset_open_images(tmp("reuse"), &o, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(d, 0, 1, x1, NULL), KC_STATUS_OK);
    assert_memory_equal(x0, x1, sizeof x0);
    kc_dataset_destroy(d);
}

/* Without a cache a bad file is found when its batch is gathered: the error names it.
 * Skipping bad files needs a cache; in a file, the skipped ones stay out when it is reused. */
static void test_cache_bad(void **state) {
    (void)state;
    two_classes("cbad");
    spit(tmp("cbad/y/text.gif"), "hello, not a gif", 16);
    kc_image_opts o = {.height = 8, .width = 8, .threads = 2, .no_shuffle = 1, .cache = KC_IMAGE_CACHE_NONE};
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_open_images(tmp("cbad"), &o, &d), KC_STATUS_OK);
    float x[3 * 192];
    assert_int_equal(kc_dataset_read(d, 0, 2, x, NULL), KC_STATUS_OK); /* x/good.jpg, y/good.png */
    assert_int_equal(kc_dataset_read(d, 0, 3, x, NULL), KC_STATUS_BAD_FILE);
    assert_non_null(strstr(kc_last_error(), "cbad/y/text.gif': not a JPEG, PNG, GIF or BMP"));
    kc_dataset_destroy(d);
    o.skip_bad_images = 1;
    expect_error(tmp("cbad"), o, KC_STATUS_INVALID_ARGUMENT, "needs the images decoded once");
    o.cache = KC_IMAGE_CACHE_MEMORY;
    assert_int_equal(open_dir(tmp("cbad"), o, &d), KC_STATUS_OK);
    float xm[2 * 192];
    assert_int_equal(kc_dataset_read(d, 0, 2, xm, NULL), KC_STATUS_OK);
    kc_dataset_destroy(d);
    o.cache = KC_IMAGE_CACHE_FILE;
    o.cache_file = tmp("cbad.cache");
    for (int round = 0; round < 2; round++) { /* made, then reused */
        assert_int_equal(open_dir(tmp("cbad"), o, &d), KC_STATUS_OK);
        assert_int_equal(kc_dataset_size(d), 2);
        assert_int_equal(kc_dataset_skipped(d), 1);
        assert_string_equal(kc_dataset_file(d, 1), "y/good.png");
        assert_int_equal(kc_dataset_read(d, 0, 2, x, NULL), KC_STATUS_OK);
        assert_memory_equal(x, xm, sizeof xm);
        kc_dataset_destroy(d);
    }
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    const char *src = getenv("KERAC_SOURCE_DIR");
    snprintf(g_fix, sizeof g_fix, "%s/tests/fixtures/images", src ? src : "..");
    snprintf(g_tmp, sizeof g_tmp, "/tmp/kerac_images_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numpy_shuffle),   cmocka_unit_test(test_keras_pixels),
        cmocka_unit_test(test_keras_split),     cmocka_unit_test(test_threads_deterministic),
        cmocka_unit_test(test_bad_files),       cmocka_unit_test(test_bad_folders),
        cmocka_unit_test(test_cache_file_reuse), cmocka_unit_test(test_cache_bad),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
