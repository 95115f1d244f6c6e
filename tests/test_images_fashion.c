/* test_images_fashion.c — Fashion-MNIST as folders of images, made at test time from
 * Debian's IDX files: PNG with class folders "0".."9" and JPEG (quality 95) with the class
 * names ("Ankle boot", "Bag", ...: sorted, they are in another order than the labels).
 *   - PNG is lossless: every example decoded from the folder is, bit for bit, the IDX
 *     example its file came from (so fit sees identical batches for the same order). The
 *     training folder has no cache: the decode threads fill every batch fit's loader reads.
 *   - The default CNN trained from the PNG folder for 2 epochs reaches at least 0.85 on
 *     PNG test images, and on the JPEG test folder read with --class-names in label order.
 * Stated budget (2 cores): KERAC_FASHION_IMAGES training images (default 30,000), batch 32,
 * Adam 1e-3, seed 7, 2 threads, evaluated on the first 2,000 test images (PNG and JPEG).
 * Measured (the same training from IDX, which the PNG folder equals bit for bit; seeds 1 and
 * 4): 0.8645 and 0.8690 on these 2,000 images, where 20,000 images gave 0.8540 (seed 7).
 * On all 10,000 test images the same models give 0.8533 and 0.8606: that set is harder, and
 * holding the bar there needs more training data (all 60,000; not measured yet). 30,000
 * images take about 6 CPU-minutes (far more on a loaded machine).
 * Under the sanitizers (KERAC_SANITIZED=1): 2,000 images, 1 epoch, bar 0.60. Skips (77)
 * without the Debian dataset. */
#define _GNU_SOURCE
#include <ftw.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <png.h>
#include <turbojpeg.h>

#include "kerac.h"

static const char *const class_names[10] = {"T-shirt_top", "Trouser", "Pullover", "Dress", "Coat",
                                            "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
static char g_tmp[256];

static void write_png(const char *path, const uint8_t *px) {
    png_image img = {.version = PNG_IMAGE_VERSION, .width = 28, .height = 28, .format = PNG_FORMAT_GRAY};
    if (!png_image_write_to_file(&img, path, 0, px, 0, NULL)) fail_msg("writing '%s': %s", path, img.message);
}

static void write_jpeg(tjhandle tj, const char *path, const uint8_t *px) {
    unsigned char *buf = NULL;
    unsigned long len = 0;
    if (tjCompress2(tj, px, 28, 0, 28, TJPF_GRAY, &buf, &len, TJSAMP_GRAY, 95, 0) != 0)
        fail_msg("writing '%s': %s", path, tjGetErrorStr2(tj));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    tjFree(buf);
}

/* Examples [0, n) of an IDX dataset as <dir>/png/<label>/<i>.png and <dir>/jpeg/<name>/<i>.jpg. */
static void make_folders(const kc_dataset *d, int64_t n, const char *dir) {
    char path[512];
    float *x = malloc((size_t)n * 784 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    assert_true(x && y);
    assert_int_equal(kc_dataset_read(d, 0, n, x, y), KC_STATUS_OK);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/png", dir);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/jpeg", dir);
    mkdir(path, 0755);
    for (int c = 0; c < 10; c++) {
        snprintf(path, sizeof path, "%s/png/%d", dir, c);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/jpeg/%s", dir, class_names[c]);
        mkdir(path, 0755);
    }
    tjhandle tj = tjInitCompress();
    assert_non_null(tj);
    uint8_t px[784];
    for (int64_t i = 0; i < n; i++) {
        for (int k = 0; k < 784; k++) px[k] = (uint8_t)lrintf(x[i * 784 + k] * 255.0f);
        snprintf(path, sizeof path, "%s/png/%d/%05lld.png", dir, y[i], (long long)i);
        write_png(path, px);
        snprintf(path, sizeof path, "%s/jpeg/%s/%05lld.jpg", dir, class_names[y[i]], (long long)i);
        write_jpeg(tj, path, px);
    }
    tjDestroy(tj);
    free(x);
    free(y);
}

static kc_status open_folder(const char *dir, const char *sub, bool names_in_label_order, kc_image_cache cache,
                             kc_dataset **out) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, sub);
    kc_image_opts o = {.height = 28, .width = 28, .color_mode = KC_COLOR_GRAYSCALE, .seed = 42, .cache = cache};
    if (names_in_label_order) {
        o.class_names = class_names;
        o.num_class_names = 10;
    }
    return kc_dataset_open_images(path, &o, out);
}

/* Every example of the PNG folder is its IDX example, to the bit, with the IDX label. */
static void check_bit_identical(const kc_dataset *idx, const kc_dataset *png) {
    float a[784], b[784];
    int32_t ya, yb;
    for (int64_t i = 0; i < kc_dataset_size(png); i++) {
        const char *f = kc_dataset_file(png, i); /* "<label>/<index>.png" */
        assert_non_null(f);
        long long src = atoll(strchr(f, '/') + 1);
        assert_int_equal(kc_dataset_read(png, i, 1, b, &yb), KC_STATUS_OK);
        assert_int_equal(kc_dataset_read(idx, src, 1, a, &ya), KC_STATUS_OK);
        if (memcmp(a, b, sizeof a) != 0 || ya != yb) fail_msg("'%s' is not IDX example %lld bit for bit", f, src);
    }
}

static double accuracy(kc_model *m, const kc_dataset *d) {
    kc_eval_result r;
    assert_int_equal(kc_evaluate(m, d, 256, &r), KC_STATUS_OK);
    return r.metrics[0];
}

static void test_fashion_from_folders(void **state) {
    (void)state;
    bool sanitized = getenv("KERAC_SANITIZED") != NULL;
    const char *env = getenv("KERAC_FASHION_IMAGES");
    int64_t n_train = sanitized ? 2000 : env ? atoll(env) : 30000, n_test = 2000;
    int epochs = sanitized ? 1 : 2;
    double bar = sanitized ? 0.60 : 0.85;
    kc_dataset *idx_train = NULL, *idx_test = NULL;
    kc_set_num_threads(2); /* results are reproducible for a given thread count */
    if (kc_dataset_open("fashion-mnist:train", &idx_train) != KC_STATUS_OK) {
        print_message("SKIP: %s\n", kc_last_error());
        exit(77);
    }
    assert_int_equal(kc_dataset_open("fashion-mnist:test", &idx_test), KC_STATUS_OK);
    char train_dir[300], test_dir[300];
    snprintf(train_dir, sizeof train_dir, "%s/train", g_tmp);
    snprintf(test_dir, sizeof test_dir, "%s/test", g_tmp);
    make_folders(idx_train, n_train, train_dir);
    make_folders(idx_test, n_test, test_dir);

    kc_dataset *train = NULL, *test = NULL, *test_jpeg = NULL;
    assert_int_equal(open_folder(train_dir, "png", false, KC_IMAGE_CACHE_NONE, &train), KC_STATUS_OK);
    assert_int_equal(kc_dataset_size(train), n_train);
    check_bit_identical(idx_train, train);
    assert_int_equal(open_folder(test_dir, "png", false, KC_IMAGE_CACHE_AUTO, &test), KC_STATUS_OK);
    assert_int_equal(open_folder(test_dir, "jpeg", true, KC_IMAGE_CACHE_AUTO, &test_jpeg), KC_STATUS_OK);
    assert_string_equal(kc_dataset_class_name(test_jpeg, 9), "Ankle boot");

    kc_model *m = NULL;
    assert_int_equal(kc_default_cnn(28, 28, 1, 10, &m), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 7), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                                      .loss = "sparse_categorical_crossentropy",
                                                      .metrics = {"accuracy"}}),
                     KC_STATUS_OK);
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, train, &(kc_fit_opts){.epochs = epochs, .batch_size = 32, .seed = 7}, &h), KC_STATUS_OK);
    double acc = accuracy(m, test), acc_jpeg = accuracy(m, test_jpeg);
    print_message("%lld PNG images, %d epochs: test accuracy %.4f (PNG), %.4f (JPEG); bar %.2f\n",
                  (long long)n_train, epochs, acc, acc_jpeg, bar);
    assert_true(acc >= bar);
    assert_true(acc_jpeg >= bar);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(train);
    kc_dataset_destroy(test);
    kc_dataset_destroy(test_jpeg);
    kc_dataset_destroy(idx_train);
    kc_dataset_destroy(idx_test);
}

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int main(void) {
    snprintf(g_tmp, sizeof g_tmp, "/tmp/kerac_fashion_images_XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_fashion_from_folders)};
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nftw(g_tmp, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
