/* test_data.c — datasets (IDX raw/gz, MNIST/Fashion-MNIST directories, CIFAR-10 binary,
 * .npy, memory, slices) and the background loader. Fixture files are written at run time
 * into a mkdtemp directory. */
#define _GNU_SOURCE
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "kerac.h"
#include "core/core.h"
#include "data/dataset.h"
#include "data/loader.h"

static char g_dir[256];

static const char *tmp(const char *name) {
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

static void write_raw(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static void write_gz(const char *path, const void *data, size_t n) {
    gzFile gz = gzopen(path, "wb");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, data, (unsigned)n), (int)n);
    assert_int_equal(gzclose(gz), Z_OK);
}

static void write_file(const char *path, const void *data, size_t n, bool gz) {
    if (gz) write_gz(path, data, n);
    else write_raw(path, data, n);
}

static uint8_t pix(int i, int k) { return (uint8_t)((i * 31 + k * 7) % 256); }

/* IDX bytes: magic 0 0 type rank, big-endian dims, payload (malloc'd, *len set). */
static uint8_t *idx_bytes(int type, int rank, const uint32_t *dims, const uint8_t *payload, size_t payload_len,
                          size_t *len) {
    *len = 4 + 4 * (size_t)rank + payload_len;
    uint8_t *b = malloc(*len);
    assert_non_null(b);
    b[0] = 0, b[1] = 0, b[2] = (uint8_t)type, b[3] = (uint8_t)rank;
    for (int i = 0; i < rank; i++) {
        b[4 + 4 * i] = (uint8_t)(dims[i] >> 24);
        b[5 + 4 * i] = (uint8_t)(dims[i] >> 16);
        b[6 + 4 * i] = (uint8_t)(dims[i] >> 8);
        b[7 + 4 * i] = (uint8_t)dims[i];
    }
    if (payload_len) memcpy(b + 4 + 4 * rank, payload, payload_len);
    return b;
}

/* An IDX images file of n images h x w with pix() values (payload cut to `payload` bytes
 * when >= 0), and a labels file of `nl` labels lab[i]. */
static void write_idx_images(const char *path, int n, int h, int w, long payload, bool gz) {
    size_t full = (size_t)n * h * w, len;
    uint8_t *px = malloc(full + 1);
    assert_non_null(px);
    for (int i = 0; i < n; i++)
        for (int k = 0; k < h * w; k++) px[(size_t)i * h * w + k] = pix(i, k);
    uint8_t *b = idx_bytes(8, 3, (uint32_t[]){(uint32_t)n, (uint32_t)h, (uint32_t)w}, px,
                           payload >= 0 ? (size_t)payload : full, &len);
    write_file(path, b, len, gz);
    free(b);
    free(px);
}

static void write_idx_labels(const char *path, int n, const uint8_t *lab, bool gz) {
    size_t len;
    uint8_t *b = idx_bytes(8, 1, (uint32_t[]){(uint32_t)n}, lab, (size_t)n, &len);
    write_file(path, b, len, gz);
    free(b);
}

static const uint8_t k_labels[8] = {3, 0, 7, 1, 255, 2, 9, 4};

/* .npy: version 1/2/3 header padded to 64 bytes, then data. */
static void write_npy(const char *path, int version, const char *descr, const char *fortran, const char *shape,
                      const void *data, size_t n) {
    char dict[256];
    int dl = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }", descr, fortran, shape);
    size_t pre = version == 1 ? 10 : 12;
    size_t hlen = (size_t)dl + 1;
    while ((pre + hlen) % 64) hlen++;
    uint8_t *b = malloc(pre + hlen + n);
    assert_non_null(b);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)version, b[7] = 0;
    if (version == 1) b[8] = (uint8_t)hlen, b[9] = (uint8_t)(hlen >> 8);
    else b[8] = (uint8_t)hlen, b[9] = (uint8_t)(hlen >> 8), b[10] = 0, b[11] = 0;
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, (size_t)dl);
    b[pre + hlen - 1] = '\n';
    if (n) memcpy(b + pre + hlen, data, n);
    write_raw(path, b, pre + hlen + n);
    free(b);
}

/* Open spec, expect status s, a NULL dataset and every key word in the message. */
static void expect_open_fails(const char *spec, kc_status s, const char *w1, const char *w2) {
    kc_dataset *d = (kc_dataset *)(uintptr_t)1;
    kc_status got = kc_dataset_open(spec, &d);
    const char *msg = kc_last_error();
    if (getenv("KERAC_TEST_VERBOSE")) print_message("%s\n  -> %s\n", spec ? spec : "(null)", msg);
    if (got != s || (w1 && !strstr(msg, w1)) || (w2 && !strstr(msg, w2)))
        print_error("spec '%s': status %d (want %d), message: %s\n", spec, got, s, msg);
    assert_int_equal(got, s);
    assert_null(d);
    if (w1) assert_non_null(strstr(msg, w1));
    if (w2) assert_non_null(strstr(msg, w2));
}

static kc_dataset *open_ok(const char *spec) {
    kc_dataset *d = NULL;
    kc_status s = kc_dataset_open(spec, &d);
    if (s != KC_STATUS_OK) print_error("spec '%s': %s\n", spec, kc_last_error());
    assert_int_equal(s, KC_STATUS_OK);
    assert_non_null(d);
    return d;
}

/* Check a dataset of IDX images made by write_idx_images / write_idx_labels. */
static void check_idx_dataset(kc_dataset *d, int n, int h, int w) {
    assert_int_equal(kc_dataset_size(d), n);
    kc_shape s = kc_dataset_shape(d);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dim[0], h);
    assert_int_equal(s.dim[1], w);
    assert_int_equal(s.dim[2], 1);
    int maxl = 0;
    for (int i = 0; i < n; i++) maxl = KC_MAX(maxl, k_labels[i]);
    assert_int_equal(kc_dataset_num_classes(d), maxl + 1);
    float *x = malloc(sizeof(float) * n * h * w);
    int32_t y[8];
    assert_int_equal(kc_dataset_read(d, 0, n, x, y), KC_STATUS_OK);
    for (int i = 0; i < n; i++) {
        assert_int_equal(y[i], k_labels[i]);
        for (int k = 0; k < h * w; k++) assert_true(x[i * h * w + k] == (float)pix(i, k) / 255.0f);
    }
    free(x);
}

/* ---------------------------------------------------------------- IDX */

static void test_idx_raw_and_gz(void **state) {
    (void)state;
    for (int gz = 0; gz < 2; gz++) {
        const char *im = tmp(gz ? "i.gz" : "i.raw"), *lb = tmp(gz ? "l.gz" : "l.raw");
        write_idx_images(im, 5, 3, 4, -1, gz);
        write_idx_labels(lb, 5, k_labels, gz);
        char spec[1200];
        snprintf(spec, sizeof spec, "idx:%s,%s", im, lb);
        kc_dataset *d = open_ok(spec);
        check_idx_dataset(d, 5, 3, 4);
        assert_int_equal(kc_dataset_num_classes(d), 256); /* label 255 is fine */
        /* scaling: exact ends */
        float x[12];
        int32_t y;
        assert_int_equal(kc_dataset_read(d, 4, 1, x, NULL), KC_STATUS_OK);
        assert_true(x[0] == (float)pix(4, 0) / 255.0f);
        assert_int_equal(kc_dataset_read(d, 4, 1, NULL, &y), KC_STATUS_OK);
        assert_int_equal(y, 255);
        kc_dataset_destroy(d);
    }
    /* 0 and 255 read as exactly 0 and 1 */
    uint8_t px[4] = {0, 255, 128, 1}, lab[1] = {0};
    size_t len;
    uint8_t *b = idx_bytes(8, 3, (uint32_t[]){1, 2, 2}, px, 4, &len);
    write_raw(tmp("ends.idx"), b, len);
    free(b);
    write_idx_labels(tmp("ends.lab"), 1, lab, false);
    char spec[1200];
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("ends.idx"), tmp("ends.lab"));
    kc_dataset *d = open_ok(spec);
    float x[4];
    assert_int_equal(kc_dataset_read(d, 0, 1, x, NULL), KC_STATUS_OK);
    assert_true(x[0] == 0.0f && x[1] == 1.0f && x[2] == 128.0f / 255.0f && x[3] == 1.0f / 255.0f);
    assert_int_equal(kc_dataset_num_classes(d), 1);
    kc_dataset_destroy(d);
}

static void make_mnist_dir(const char *dir) {
    mkdir(dir, 0755);
    char a[600], b[600];
    snprintf(a, sizeof a, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(b, sizeof b, "%s/train-labels-idx1-ubyte.gz", dir);
    write_idx_images(a, 6, 2, 3, -1, true);
    write_idx_labels(b, 6, k_labels, true);
    snprintf(a, sizeof a, "%s/t10k-images-idx3-ubyte", dir);
    snprintf(b, sizeof b, "%s/t10k-labels-idx1-ubyte", dir);
    write_idx_images(a, 4, 2, 3, -1, false);
    write_idx_labels(b, 4, k_labels, false);
}

static void test_mnist_dirs(void **state) {
    (void)state;
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp("mnist"));
    make_mnist_dir(dir);
    char spec[700];
    const struct { const char *fmt; int n; } cases[] = {
        {"mnist:%s", 6}, {"mnist:%s:train", 6}, {"mnist:%s:test", 4},
        {"fashion-mnist:%s", 6}, {"fashion-mnist:%s:test", 4},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(cases); i++) {
        snprintf(spec, sizeof spec, cases[i].fmt, dir);
        kc_dataset *d = open_ok(spec);
        check_idx_dataset(d, cases[i].n, 2, 3);
        kc_dataset_destroy(d);
    }
    /* the environment variable moves the default directory */
    char *old = getenv("KERAC_FASHION_MNIST_DIR") ? strdup(getenv("KERAC_FASHION_MNIST_DIR")) : NULL;
    setenv("KERAC_FASHION_MNIST_DIR", dir, 1);
    kc_dataset *d = open_ok("fashion-mnist");
    assert_int_equal(kc_dataset_size(d), 6);
    kc_dataset_destroy(d);
    d = open_ok("fashion-mnist:test");
    check_idx_dataset(d, 4, 2, 3);
    kc_dataset_destroy(d);
    d = open_ok("fashion-mnist:train");
    assert_int_equal(kc_dataset_size(d), 6);
    kc_dataset_destroy(d);
    /* missing Fashion-MNIST: the fix is in the message */
    mkdir(tmp("empty"), 0755);
    setenv("KERAC_FASHION_MNIST_DIR", tmp("empty"), 1);
    expect_open_fails("fashion-mnist:test", KC_STATUS_IO, "apt-get install dataset-fashion-mnist",
                      "KERAC_FASHION_MNIST_DIR");
    expect_open_fails("fashion-mnist:test", KC_STATUS_IO, "t10k-images-idx3-ubyte", "No such file");
    setenv("KERAC_FASHION_MNIST_DIR", tmp("no-such-dir"), 1);
    expect_open_fails("fashion-mnist", KC_STATUS_IO, "no-such-dir", "apt-get install dataset-fashion-mnist");
    if (old) setenv("KERAC_FASHION_MNIST_DIR", old, 1);
    else unsetenv("KERAC_FASHION_MNIST_DIR");
    free(old);
    /* an unknown split */
    snprintf(spec, sizeof spec, "mnist:%s:validation", dir);
    expect_open_fails(spec, KC_STATUS_INVALID_ARGUMENT, "validation", "train");
}

/* A gzip file of stored (uncompressed) blocks: head, then body. */
static void write_gz_stored(const char *path, const void *head, size_t hn, const void *body, size_t bn) {
    gzFile gz = gzopen(path, "wb0");
    assert_non_null(gz);
    assert_int_equal(gzwrite(gz, head, (unsigned)hn), (int)hn);
    assert_int_equal(gzwrite(gz, body, (unsigned)bn), (int)bn);
    assert_int_equal(gzclose(gz), Z_OK);
}

/* A gzipped IDX whose header declares more than 16 GiB of images is refused before
 * anything is allocated, even when the file is big enough for deflate's best ratio (stored
 * blocks, 17 MiB on disk); a gzip stream that inflates past the header's size is refused. */
static void test_idx_gz_bounds(void **state) {
    (void)state;
    const uint32_t n = 1u << 20, hw = 129; /* 17.4 GB declared */
    size_t len;
    uint8_t *zeros = calloc(1, (size_t)17 << 20);
    assert_non_null(zeros);
    uint8_t *b = idx_bytes(8, 3, (uint32_t[]){n, hw, hw}, NULL, 0, &len);
    write_gz_stored(tmp("big.gz"), b, len, zeros, (size_t)17 << 20);
    free(b);
    b = idx_bytes(8, 1, (uint32_t[]){n}, NULL, 0, &len);
    write_gz_stored(tmp("big-labels.gz"), b, len, zeros, n); /* complete labels */
    free(b);
    free(zeros);
    char spec[1200];
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("big.gz"), tmp("big-labels.gz"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "big.gz", "over the 16 GiB");

    /* more data in the gzip stream than the header declares */
    uint8_t px[5 * 3 * 4 + 7] = {0};
    b = idx_bytes(8, 3, (uint32_t[]){5, 3, 4}, px, sizeof px, &len);
    write_gz(tmp("extra.gz"), b, len);
    free(b);
    write_idx_labels(tmp("extra-labels.gz"), 5, k_labels, true);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("extra.gz"), tmp("extra-labels.gz"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "extra.gz", "data after the 60 bytes");
}

static void test_idx_bad_files(void **state) {
    (void)state;
    char spec[1200], lb[512];
    snprintf(lb, sizeof lb, "%s", tmp("bad.lab"));
    write_idx_labels(lb, 5, k_labels, false);

    /* missing */
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("missing-images"), lb);
    expect_open_fails(spec, KC_STATUS_IO, "missing-images", "No such file");
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("bad.lab"), tmp("missing-labels"));
    write_idx_images(tmp("ok.img"), 5, 3, 4, -1, false);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("ok.img"), tmp("missing-labels"));
    expect_open_fails(spec, KC_STATUS_IO, "missing-labels", "No such file");

    /* wrong magic */
    uint8_t junk[128] = {0x12, 0x34, 0x08, 0x03};
    write_raw(tmp("magic.img"), junk, sizeof junk);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("magic.img"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "magic", "magic.img");
    /* wrong type code (float data) */
    size_t len;
    uint8_t *b = idx_bytes(0x0D, 3, (uint32_t[]){5, 3, 4}, NULL, 0, &len);
    write_raw(tmp("type.img"), b, len);
    free(b);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("type.img"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "type code 0x0d", "type.img");
    /* the two files swapped */
    snprintf(spec, sizeof spec, "idx:%s,%s", lb, tmp("ok.img"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "holds labels", "bad.lab");
    /* too short for a header */
    write_raw(tmp("short.img"), "\0\0", 2);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("short.img"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "short.img", "2 bytes");

    /* truncated images: raw, gzipped, and a cut gzip stream */
    write_idx_images(tmp("trunc.img"), 5, 3, 4, 50, false);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("trunc.img"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "truncated", "trunc.img");
    write_idx_images(tmp("trunc.img.gz"), 5, 3, 4, 50, true);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("trunc.img.gz"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "truncated", "trunc.img.gz");
    {
        /* a valid gzip file cut in half */
        write_idx_images(tmp("cut.gz"), 5, 30, 40, -1, true);
        struct stat sb;
        assert_int_equal(stat(tmp("cut.gz"), &sb), 0);
        assert_int_equal(truncate(tmp("cut.gz"), sb.st_size / 2), 0);
        snprintf(spec, sizeof spec, "idx:%s,%s", tmp("cut.gz"), lb);
        expect_open_fails(spec, KC_STATUS_BAD_FILE, "cut.gz", "truncated");
    }
    /* a huge N in a tiny gzip file: rejected before allocating */
    b = idx_bytes(8, 3, (uint32_t[]){2000000000u, 28, 28}, NULL, 0, &len);
    write_gz(tmp("huge.gz"), b, len);
    free(b);
    b = idx_bytes(8, 1, (uint32_t[]){2000000000u}, NULL, 0, &len);
    write_gz(tmp("huge-labels.gz"), b, len);
    free(b);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("huge.gz"), tmp("huge-labels.gz"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "huge.gz", NULL);
    /* extra data after the declared images */
    b = idx_bytes(8, 3, (uint32_t[]){5, 3, 4}, junk, 60 + 5, &len);
    write_raw(tmp("extra.img"), b, len);
    free(b);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("extra.img"), lb);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "do not match", "extra.img");

    /* image and label counts differ */
    write_idx_labels(tmp("four.lab"), 4, k_labels, true);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("ok.img"), tmp("four.lab"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "5 images", "4 labels");
    /* N = 0 */
    b = idx_bytes(8, 3, (uint32_t[]){0, 3, 4}, NULL, 0, &len);
    write_raw(tmp("zero.img"), b, len);
    free(b);
    write_idx_labels(tmp("zero.lab"), 0, k_labels, false);
    snprintf(spec, sizeof spec, "idx:%s,%s", tmp("zero.img"), tmp("zero.lab"));
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "no examples", "zero.img");
    /* a directory where a file should be */
    snprintf(spec, sizeof spec, "idx:%s,%s", g_dir, lb);
    expect_open_fails(spec, KC_STATUS_IO, "directory", NULL);
}

/* ---------------------------------------------------------------- CIFAR-10 */

static uint8_t cifar_val(int r, int c, int h, int w) { return (uint8_t)((r * 5 + c * 50 + h * 3 + w) % 256); }

/* records [r0, r0 + n) with label (r % 10) or `label` when >= 0 */
static void write_cifar(const char *path, int r0, int n, int label, long cut) {
    size_t len = (size_t)n * 3073;
    uint8_t *b = malloc(len);
    assert_non_null(b);
    for (int r = 0; r < n; r++) {
        uint8_t *rec = b + (size_t)r * 3073;
        rec[0] = (uint8_t)(label >= 0 ? label : (r0 + r) % 10);
        for (int c = 0; c < 3; c++)
            for (int h = 0; h < 32; h++)
                for (int w = 0; w < 32; w++) rec[1 + c * 1024 + h * 32 + w] = cifar_val(r0 + r, c, h, w);
    }
    write_raw(path, b, cut >= 0 ? (size_t)cut : len);
    free(b);
}

static void check_cifar(kc_dataset *d, int n) {
    assert_int_equal(kc_dataset_size(d), n);
    kc_shape s = kc_dataset_shape(d);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dim[0], 32);
    assert_int_equal(s.dim[1], 32);
    assert_int_equal(s.dim[2], 3);
    float *x = malloc(sizeof(float) * 3072 * n);
    int32_t y[16];
    assert_int_equal(kc_dataset_read(d, 0, n, x, y), KC_STATUS_OK);
    for (int r = 0; r < n; r++) {
        assert_int_equal(y[r], r % 10);
        for (int h = 0; h < 32; h++)
            for (int w = 0; w < 32; w++)
                for (int c = 0; c < 3; c++)
                    assert_true(x[(size_t)r * 3072 + (h * 32 + w) * 3 + c] == (float)cifar_val(r, c, h, w) / 255.0f);
    }
    free(x);
}

static void test_cifar10(void **state) {
    (void)state;
    char dir[512], bad[512];
    snprintf(dir, sizeof dir, "%s", tmp("cifar"));
    mkdir(dir, 0755);
    char p[700], spec[700];
    const int per_file[5] = {2, 1, 1, 1, 1};
    int r0 = 0;
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", dir, i + 1);
        write_cifar(p, r0, per_file[i], -1, -1);
        r0 += per_file[i];
    }
    snprintf(p, sizeof p, "%s/test_batch.bin", dir);
    write_cifar(p, 0, 3, -1, -1);
    snprintf(spec, sizeof spec, "cifar10:%s", dir);
    kc_dataset *d = open_ok(spec);
    check_cifar(d, 6);
    assert_int_equal(kc_dataset_num_classes(d), 6);
    kc_dataset_destroy(d);
    snprintf(spec, sizeof spec, "cifar10:%s:test", dir);
    d = open_ok(spec);
    check_cifar(d, 3);
    kc_dataset_destroy(d);

    /* the parent of cifar-10-batches-bin works too */
    mkdir(tmp("cifar-parent"), 0755);
    mkdir(tmp("cifar-parent/cifar-10-batches-bin"), 0755);
    write_cifar(tmp("cifar-parent/cifar-10-batches-bin/test_batch.bin"), 0, 2, -1, -1);
    snprintf(spec, sizeof spec, "cifar10:%s:test", tmp("cifar-parent"));
    d = open_ok(spec);
    check_cifar(d, 2);
    kc_dataset_destroy(d);

    /* bad: a missing batch, a cut record, a label beyond 9 */
    snprintf(bad, sizeof bad, "%s", tmp("cifar-bad"));
    mkdir(bad, 0755);
    for (int i = 0; i < 5; i++) {
        if (i == 2) continue;
        snprintf(p, sizeof p, "%s/data_batch_%d.bin", bad, i + 1);
        write_cifar(p, 0, 1, -1, -1);
    }
    snprintf(spec, sizeof spec, "cifar10:%s", bad);
    expect_open_fails(spec, KC_STATUS_IO, "data_batch_3.bin", "No such file");
    snprintf(p, sizeof p, "%s/test_batch.bin", bad);
    write_cifar(p, 0, 2, -1, 2 * 3073 - 1);
    snprintf(spec, sizeof spec, "cifar10:%s:test", bad);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "3073", "test_batch.bin");
    write_cifar(p, 0, 2, 10, -1);
    expect_open_fails(spec, KC_STATUS_BAD_FILE, "label 10", "0-9");
    expect_open_fails("cifar10:", KC_STATUS_INVALID_ARGUMENT, "directory", NULL);
}

/* ---------------------------------------------------------------- .npy */

static kc_dataset *open_npy(const char *x, const char *y) {
    char spec[1200];
    snprintf(spec, sizeof spec, "npy:%s,%s", tmp(x), tmp(y));
    return open_ok(spec);
}

static void expect_npy_fails(const char *x, const char *y, kc_status s, const char *w1, const char *w2) {
    char spec[1200];
    snprintf(spec, sizeof spec, "npy:%s,%s", tmp(x), tmp(y));
    expect_open_fails(spec, s, w1, w2);
}

static void test_npy(void **state) {
    (void)state;
    /* v1: uint8 (3, 2, 2) with int64 labels */
    uint8_t xu[12];
    for (int i = 0; i < 12; i++) xu[i] = (uint8_t)(i * 20);
    int64_t y64[3] = {2, 0, 5};
    write_npy(tmp("xu.npy"), 1, "|u1", "False", "(3, 2, 2)", xu, sizeof xu);
    write_npy(tmp("y64.npy"), 1, "<i8", "False", "(3,)", y64, sizeof y64);
    kc_dataset *d = open_npy("xu.npy", "y64.npy");
    kc_shape s = kc_dataset_shape(d);
    assert_int_equal(kc_dataset_size(d), 3);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dim[0], 2);
    assert_int_equal(s.dim[1], 2);
    assert_int_equal(s.dim[2], 1);
    assert_int_equal(kc_dataset_num_classes(d), 6);
    float x[64];
    int32_t y[8];
    assert_int_equal(kc_dataset_read(d, 0, 3, x, y), KC_STATUS_OK);
    for (int i = 0; i < 12; i++) assert_true(x[i] == (float)(i * 20) / 255.0f);
    assert_int_equal(y[0], 2);
    assert_int_equal(y[2], 5);
    kc_dataset_destroy(d);

    /* v2: float32 (2, 2, 2, 3), int32 labels (2, 1) */
    float xf[24];
    for (int i = 0; i < 24; i++) xf[i] = (float)i * -0.375f + 1.0e-3f;
    int32_t y32[2] = {1, 3};
    write_npy(tmp("xf.npy"), 2, "<f4", "False", "(2, 2, 2, 3)", xf, sizeof xf);
    write_npy(tmp("y32.npy"), 2, "<i4", "False", "(2, 1)", y32, sizeof y32);
    d = open_npy("xf.npy", "y32.npy");
    s = kc_dataset_shape(d);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dim[2], 3);
    assert_int_equal(kc_dataset_read(d, 0, 2, x, y), KC_STATUS_OK);
    assert_memory_equal(x, xf, sizeof xf);
    assert_int_equal(y[1], 3);
    kc_dataset_destroy(d);

    /* v3: float32 vectors (4, 5), uint8 labels; big-endian float32 and int16 labels */
    float xv[20];
    uint8_t yu[4] = {0, 1, 1, 0};
    for (int i = 0; i < 20; i++) xv[i] = (float)i + 0.5f;
    write_npy(tmp("xv.npy"), 3, "<f4", "False", "(4, 5)", xv, sizeof xv);
    write_npy(tmp("yu.npy"), 3, "|u1", "False", "(4,)", yu, sizeof yu);
    d = open_npy("xv.npy", "yu.npy");
    s = kc_dataset_shape(d);
    assert_int_equal(s.rank, 1);
    assert_int_equal(s.dim[0], 5);
    assert_int_equal(kc_dataset_num_classes(d), 2);
    assert_int_equal(kc_dataset_read(d, 1, 3, x, y), KC_STATUS_OK);
    assert_memory_equal(x, xv + 5, 15 * sizeof(float));
    kc_dataset_destroy(d);

    uint8_t xbe[20 * 4], ybe[8];
    for (int i = 0; i < 20; i++) {
        uint32_t u;
        memcpy(&u, &xv[i], 4);
        xbe[4 * i] = (uint8_t)(u >> 24), xbe[4 * i + 1] = (uint8_t)(u >> 16);
        xbe[4 * i + 2] = (uint8_t)(u >> 8), xbe[4 * i + 3] = (uint8_t)u;
    }
    const uint16_t yv[4] = {300, 7, 0, 1};
    for (int i = 0; i < 4; i++) ybe[2 * i] = (uint8_t)(yv[i] >> 8), ybe[2 * i + 1] = (uint8_t)yv[i];
    write_npy(tmp("xbe.npy"), 1, ">f4", "False", "(4, 5)", xbe, sizeof xbe);
    write_npy(tmp("ybe.npy"), 1, ">i2", "False", "(4,)", ybe, sizeof ybe);
    d = open_npy("xbe.npy", "ybe.npy");
    assert_int_equal(kc_dataset_read(d, 0, 4, x, y), KC_STATUS_OK);
    assert_memory_equal(x, xv, sizeof xv);
    for (int i = 0; i < 4; i++) assert_int_equal(y[i], yv[i]);
    assert_int_equal(kc_dataset_num_classes(d), 301);
    kc_dataset_destroy(d);
    write_npy(tmp("yu2.npy"), 1, "<u2", "False", "(4,)", yv, sizeof yv);
    d = open_npy("xv.npy", "yu2.npy");
    assert_int_equal(kc_dataset_read(d, 0, 4, NULL, y), KC_STATUS_OK);
    for (int i = 0; i < 4; i++) assert_int_equal(y[i], yv[i]);
    kc_dataset_destroy(d);
}

static void test_npy_bad(void **state) {
    (void)state;
    float xf[24] = {0};
    int64_t y64[4] = {0, 1, 1, 0};
    write_npy(tmp("nb_y.npy"), 1, "<i8", "False", "(2,)", y64, 2 * sizeof(int64_t));
    /* missing */
    expect_npy_fails("nb_missing.npy", "nb_y.npy", KC_STATUS_IO, "nb_missing.npy", "No such file");
    /* not a .npy file */
    write_raw(tmp("nb_magic.npy"), "PK\3\4 this is a zip file", 24);
    expect_npy_fails("nb_magic.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "NUMPY", "nb_magic.npy");
    /* malformed header dicts */
    write_npy(tmp("nb_hdr.npy"), 1, "<f4", "Maybe", "(2, 3, 4)", xf, sizeof xf);
    expect_npy_fails("nb_hdr.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "header", "True or False");
    write_npy(tmp("nb_hdr2.npy"), 1, "<f4", "False", "[2, 3, 4]", xf, sizeof xf);
    expect_npy_fails("nb_hdr2.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "header", "nb_hdr2.npy");
    {
        uint8_t b[64] = "\x93NUMPY\x01\x00\x30\x00{'descr': '<f4', 'shape': (2,)}";
        memset(b + 41, ' ', 23);
        write_raw(tmp("nb_hdr3.npy"), b, sizeof b);
        expect_npy_fails("nb_hdr3.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "header", "fortran_order");
        uint8_t v9[16] = "\x93NUMPY\x09\x00\x00\x00";
        write_raw(tmp("nb_v9.npy"), v9, sizeof v9);
        expect_npy_fails("nb_v9.npy", "nb_y.npy", KC_STATUS_UNSUPPORTED, "version 9", NULL);
        uint8_t big[16] = "\x93NUMPY\x01\x00\xff\xff";
        write_raw(tmp("nb_len.npy"), big, sizeof big);
        expect_npy_fails("nb_len.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "header", "nb_len.npy");
    }
    /* unsupported dtypes */
    write_npy(tmp("nb_c8.npy"), 1, "<c8", "False", "(2, 3)", xf, 2 * 3 * 8);
    expect_npy_fails("nb_c8.npy", "nb_y.npy", KC_STATUS_UNSUPPORTED, "dtype '<c8'", "float32");
    { /* float64 is read (narrowed to float32), as predict reads it: one rule for both
       * (tests/cli/npy_rule.sh compares the values) */
        const double f8[6] = {0, 0.1, 0.2, 0.3, 0.4, 0.5};
        write_npy(tmp("nb_f8.npy"), 1, "<f8", "False", "(2, 3)", f8, sizeof f8);
        char spec[1200];
        snprintf(spec, sizeof spec, "npy:%s,%s", tmp("nb_f8.npy"), tmp("nb_y.npy"));
        kc_dataset *d = NULL;
        if (kc_dataset_open(spec, &d) != KC_STATUS_OK) fail_msg("float64 images: %s", kc_last_error());
        kc_dataset_destroy(d);
    }
    write_npy(tmp("nb_x.npy"), 1, "<f4", "False", "(2, 3)", xf, 2 * 3 * 4);
    { /* float labels (N,) and integer (N, K) are label tensors (binary / one-hot targets), read
       * as floats of their shape; kc_fit checks them against the model (test_labels.c) */
        write_npy(tmp("nb_yf.npy"), 1, "<f4", "False", "(2,)", xf, 2 * 4);
        write_npy(tmp("nb_y2.npy"), 1, "<i8", "False", "(2, 2)", y64, sizeof y64);
        const char *files[2] = {"nb_yf.npy", "nb_y2.npy"};
        for (int f = 0; f < 2; f++) {
            char spec[1200];
            snprintf(spec, sizeof spec, "npy:%s,%s", tmp("nb_x.npy"), tmp(files[f]));
            kc_dataset *d = NULL;
            if (kc_dataset_open(spec, &d) != KC_STATUS_OK) fail_msg("%s: %s", files[f], kc_last_error());
            kc_shape ts = kc_dataset_target_shape(d);
            float t[4] = {0};
            assert_int_equal(ts.rank, 1);
            assert_int_equal(ts.dim[0], f == 0 ? 1 : 2);
            assert_int_equal(kc_dataset_read_targets(d, 0, 2, t), KC_STATUS_OK);
            for (int i = 0; i < (f == 0 ? 2 : 4); i++) /* int64 widened to float */
                assert_float_equal(t[i], f == 0 ? xf[i] : (float)y64[i], 0);
            kc_dataset_destroy(d);
        }
    }
    write_npy(tmp("nb_yc.npy"), 1, "<c8", "False", "(2,)", xf, 2 * 8);
    expect_npy_fails("nb_x.npy", "nb_yc.npy", KC_STATUS_UNSUPPORTED, "dtype '<c8'", "float32");
    /* Fortran order */
    write_npy(tmp("nb_fo.npy"), 1, "<f4", "True", "(2, 3)", xf, 2 * 3 * 4);
    expect_npy_fails("nb_fo.npy", "nb_y.npy", KC_STATUS_UNSUPPORTED, "Fortran", "nb_fo.npy");
    /* a negative label, named by index */
    int64_t neg[3] = {0, 1, -3};
    write_npy(tmp("nb_x3.npy"), 1, "<f4", "False", "(3, 2)", xf, 3 * 2 * 4);
    write_npy(tmp("nb_neg.npy"), 1, "<i8", "False", "(3,)", neg, sizeof neg);
    expect_npy_fails("nb_x3.npy", "nb_neg.npy", KC_STATUS_BAD_FILE, "index 2", "negative");
    /* truncated data, extra data, count mismatch, N = 0, 1-D images */
    write_npy(tmp("nb_tr.npy"), 1, "<f4", "False", "(2, 3)", xf, 2 * 3 * 4 - 2);
    expect_npy_fails("nb_tr.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "truncated", "nb_tr.npy");
    write_npy(tmp("nb_ex.npy"), 1, "<f4", "False", "(2, 3)", xf, 2 * 3 * 4 + 4);
    expect_npy_fails("nb_ex.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "after", "nb_ex.npy");
    expect_npy_fails("nb_x3.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "3 examples", "2 labels");
    write_npy(tmp("nb_0.npy"), 1, "<f4", "False", "(0, 3)", xf, 0);
    expect_npy_fails("nb_0.npy", "nb_y.npy", KC_STATUS_BAD_FILE, "no examples", NULL);
    write_npy(tmp("nb_1d.npy"), 1, "<f4", "False", "(2,)", xf, 8);
    expect_npy_fails("nb_1d.npy", "nb_y.npy", KC_STATUS_UNSUPPORTED, "(N, H, W)", NULL);
}

static void test_bad_specs(void **state) {
    (void)state;
    expect_open_fails("imagenet:/data", KC_STATUS_INVALID_ARGUMENT, "imagenet:/data", "npy:X.npy,Y.npy");
    expect_open_fails("", KC_STATUS_INVALID_ARGUMENT, "fashion-mnist[:train|:test]", NULL);
    expect_open_fails(NULL, KC_STATUS_INVALID_ARGUMENT, "cifar10:DIR", NULL);
    expect_open_fails("mnist", KC_STATUS_INVALID_ARGUMENT, "directory", "mnist:DIR");
    expect_open_fails("mnist:test", KC_STATUS_INVALID_ARGUMENT, "directory", NULL);
    expect_open_fails("npy:only.npy", KC_STATUS_INVALID_ARGUMENT, "two files", "npy:X.npy,Y.npy");
    expect_open_fails("idx:", KC_STATUS_INVALID_ARGUMENT, "idx:IMAGES,LABELS", NULL);
    expect_open_fails("fashion-mnist::test", KC_STATUS_INVALID_ARGUMENT, "directory", NULL);
    assert_int_equal(kc_dataset_open("mnist:/x", NULL), KC_STATUS_INVALID_ARGUMENT);
}

/* ---------------------------------------------------------------- memory and slices */

static kc_dataset *counting_dataset(int n, int num_classes) {
    float *x = malloc(sizeof(float) * 2 * n); /* (n, 2) */
    int32_t *y = malloc(sizeof(int32_t) * n);
    for (int i = 0; i < n; i++) x[2 * i] = (float)i, x[2 * i + 1] = (float)-i, y[i] = i % 7;
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, (kc_shape){1, {2}}, num_classes, &d), KC_STATUS_OK);
    free(x);
    free(y);
    return d;
}

static void test_memory_and_slices(void **state) {
    (void)state;
    kc_dataset *d = counting_dataset(10, 0);
    assert_int_equal(kc_dataset_size(d), 10);
    assert_int_equal(kc_dataset_num_classes(d), 7);
    kc_dataset *s = NULL, *ss = NULL;
    assert_int_equal(kc_dataset_slice(d, 2, 5, &s), KC_STATUS_OK);
    assert_int_equal(kc_dataset_size(s), 5);
    assert_int_equal(kc_dataset_slice(s, 1, 2, &ss), KC_STATUS_OK);
    float x[20];
    int32_t y[10];
    assert_int_equal(kc_dataset_read(s, 0, 5, x, y), KC_STATUS_OK);
    for (int i = 0; i < 5; i++) assert_true(x[2 * i] == (float)(i + 2) && y[i] == (i + 2) % 7);
    /* the storage outlives the dataset it came from */
    kc_dataset_destroy(d);
    assert_int_equal(kc_dataset_read(ss, 0, 2, x, y), KC_STATUS_OK);
    assert_true(x[0] == 3.0f && x[1] == -3.0f && x[2] == 4.0f && y[1] == 4);
    assert_int_equal(kc_dataset_num_classes(ss), 7); /* computed once, for the whole storage */
    kc_shape sh = kc_dataset_shape(ss);
    assert_int_equal(sh.rank, 1);
    assert_int_equal(sh.dim[0], 2);
    kc_dataset_destroy(s);
    assert_int_equal(kc_dataset_read(ss, 1, 1, x, NULL), KC_STATUS_OK);
    assert_true(x[0] == 4.0f);
    kc_dataset_destroy(ss);

    /* bounds */
    d = counting_dataset(5, 12);
    assert_int_equal(kc_dataset_num_classes(d), 12);
    assert_int_equal(kc_dataset_read(d, -1, 1, x, y), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_read(d, 4, 2, x, y), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "outside"));
    assert_int_equal(kc_dataset_read(d, 0, -1, x, y), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_read(d, 5, 0, x, y), KC_STATUS_OK);
    assert_int_equal(kc_dataset_read(NULL, 0, 1, x, y), KC_STATUS_INVALID_ARGUMENT);
    s = (kc_dataset *)(uintptr_t)1;
    assert_int_equal(kc_dataset_slice(d, 3, 3, &s), KC_STATUS_INVALID_ARGUMENT);
    assert_null(s);
    assert_int_equal(kc_dataset_slice(d, -1, 1, &s), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_slice(d, 0, INT64_MAX, &s), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_slice(d, 5, 0, &s), KC_STATUS_OK);
    assert_int_equal(kc_dataset_size(s), 0);
    kc_dataset_destroy(s);
    kc_dataset_destroy(d);
    kc_dataset_destroy(NULL);
    assert_int_equal(kc_dataset_size(NULL), 0);
    assert_int_equal(kc_dataset_shape(NULL).rank, 0);

    /* bad memory datasets */
    float one[2] = {0};
    int32_t lab[2] = {0, -1}, big[2] = {0, 5};
    kc_shape v2 = {1, {2}};
    d = (kc_dataset *)(uintptr_t)1;
    assert_int_equal(kc_dataset_from_memory(NULL, lab, 1, v2, 0, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_null(d);
    assert_int_equal(kc_dataset_from_memory(one, lab, 0, v2, 0, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_from_memory(one, lab, 1, (kc_shape){0, {0}}, 0, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_from_memory(one, lab, 1, (kc_shape){2, {2, 0}}, 0, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_dataset_from_memory(one, lab, 2, (kc_shape){1, {1}}, 0, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "y[1]"));
    assert_int_equal(kc_dataset_from_memory(one, big, 2, (kc_shape){1, {1}}, 3, &d), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "num_classes"));
    assert_null(d);
}

/* ---------------------------------------------------------------- loader */

static void run_epoch(kc_dataset *d, const int64_t *order, int64_t count, int batch, int prefetch) {
    kc_loader *l = NULL;
    assert_int_equal(kc__loader_create(d, order, count, batch, prefetch, &l), KC_STATUS_OK);
    int n = (int)kc_dataset_size(d);
    int *seen = calloc((size_t)n, sizeof(int));
    const kc_batch *b = NULL;
    int64_t nb = (count + batch - 1) / batch, total = 0;
    for (int64_t k = 0; k < nb; k++) {
        assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
        assert_non_null(b);
        assert_int_equal(b->index, k);
        assert_int_equal(b->n, k + 1 < nb ? batch : count - (nb - 1) * batch);
        for (int j = 0; j < b->n; j++) {
            int idx = (int)b->x[2 * j];
            assert_true(idx >= 0 && idx < n);
            assert_true(b->x[2 * j + 1] == (float)-idx);
            assert_int_equal(b->y[j], idx % 7);
            assert_int_equal(idx, order ? order[total] : total);
            seen[idx]++;
            total++;
        }
    }
    assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
    assert_null(b);
    assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
    assert_null(b);
    assert_int_equal(total, count);
    for (int i = 0; i < n; i++) assert_int_equal(seen[i], order ? 1 : (i < count ? 1 : 0));
    assert_true(kc__loader_wait_seconds(l) >= 0.0);
    kc__loader_destroy(l);
    free(seen);
}

static void test_loader_epoch(void **state) {
    (void)state;
    kc_dataset *d = counting_dataset(103, 0);
    int64_t order[103];
    for (int i = 0; i < 103; i++) order[i] = i;
    kc_rng r;
    kc__rng_seed(&r, 42);
    kc__shuffle_i64(&r, order, 103);
    assert_true(order[0] != 0 || order[1] != 1 || order[2] != 2);
    const int prefetch[] = {0, 1, 4}; /* 0: no thread, kc__loader_next gathers */
    for (int p = 0; p < 3; p++) {
        run_epoch(d, order, 103, 10, prefetch[p]); /* last batch of 3 */
        run_epoch(d, order, 103, 103, prefetch[p]); /* one batch */
        run_epoch(d, order, 103, 200, prefetch[p]); /* one short batch */
        run_epoch(d, NULL, 25, 8, prefetch[p]); /* the first 25 in order, last batch of 1 */
        run_epoch(d, order, 103, 1, prefetch[p]);
    }
    /* a slice: indices are relative to it */
    kc_dataset *s = NULL;
    assert_int_equal(kc_dataset_slice(d, 50, 20, &s), KC_STATUS_OK);
    kc_loader *l = NULL;
    assert_int_equal(kc__loader_create(s, (int64_t[]){19, 0, 5}, 3, 2, 2, &l), KC_STATUS_OK);
    const kc_batch *b = NULL;
    assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
    assert_true(b->n == 2 && b->x[0] == 69.0f && b->x[2] == 50.0f);
    assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
    assert_true(b->n == 1 && b->x[0] == 55.0f);
    kc__loader_destroy(l);
    kc_dataset_destroy(s);
    /* an empty epoch */
    assert_int_equal(kc__loader_create(d, NULL, 0, 4, 2, &l), KC_STATUS_OK);
    assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
    assert_null(b);
    kc__loader_destroy(l);
    kc_dataset_destroy(d);
}

static void test_loader_destroy_mid_epoch(void **state) {
    (void)state;
    kc_dataset *d = counting_dataset(103, 0);
    for (int it = 0; it < 30; it++) {
        int prefetch = it % 3 == 2 ? 0 : it % 2 ? 4 : 1;
        kc_loader *l = NULL;
        assert_int_equal(kc__loader_create(d, NULL, 103, 4, prefetch, &l), KC_STATUS_OK);
        const kc_batch *b = NULL;
        for (int k = 0; k < it % 5; k++) {
            assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
            assert_int_equal(b->index, k);
        }
        if (it % 3 == 0) usleep(200); /* let the producer fill the ring and block */
        kc__loader_destroy(l);
    }
    kc__loader_destroy(NULL);
    kc_dataset_destroy(d);
}

static void test_loader_errors(void **state) {
    (void)state;
    kc_dataset *d = counting_dataset(50, 0);
    kc_loader *l = (kc_loader *)(uintptr_t)1;
    assert_int_equal(kc__loader_create(d, NULL, 50, 0, 2, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_null(l);
    assert_non_null(strstr(kc_last_error(), "batch_size"));
    assert_int_equal(kc__loader_create(d, NULL, 50, 8, -1, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "prefetch"));
    assert_int_equal(kc__loader_create(d, NULL, 51, 8, 2, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc__loader_create(d, (int64_t[]){0, 50}, 2, 8, 2, &l), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "order[1] = 50"));
    assert_int_equal(kc__loader_create(NULL, NULL, 0, 8, 2, &l), KC_STATUS_INVALID_ARGUMENT);

    /* an error in the thread reaches the consumer after the good batches before it */
    kc__dataset_set_fault(d, 30);
    for (int prefetch = 0; prefetch <= 4; prefetch += prefetch ? 3 : 1) { /* 0, 1, 4 */
        assert_int_equal(kc__loader_create(d, NULL, 50, 8, prefetch, &l), KC_STATUS_OK);
        const kc_batch *b = NULL;
        for (int k = 0; k < 3; k++) {
            assert_int_equal(kc__loader_next(l, &b), KC_STATUS_OK);
            assert_int_equal(b->index, k);
        }
        assert_int_equal(kc__loader_next(l, &b), KC_STATUS_IO);
        assert_null(b);
        assert_non_null(strstr(kc_last_error(), "example 30"));
        kc__fail(KC_STATUS_INTERNAL, "something else since"); /* the message is the loader's own */
        assert_int_equal(kc__loader_next(l, &b), KC_STATUS_IO); /* and stays failed */
        assert_non_null(strstr(kc_last_error(), "example 30"));
        kc__loader_destroy(l);
    }
    kc__dataset_set_fault(d, -1);
    run_epoch(d, NULL, 50, 8, 2);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- the real thing */

static void test_fashion_mnist_installed(void **state) {
    (void)state;
    if (access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0) {
        skip();
        return;
    }
    char *old = getenv("KERAC_FASHION_MNIST_DIR") ? strdup(getenv("KERAC_FASHION_MNIST_DIR")) : NULL;
    unsetenv("KERAC_FASHION_MNIST_DIR");
    kc_dataset *d = open_ok("fashion-mnist:test");
    if (old) setenv("KERAC_FASHION_MNIST_DIR", old, 1);
    free(old);
    assert_int_equal(kc_dataset_size(d), 10000);
    kc_shape s = kc_dataset_shape(d);
    assert_int_equal(s.rank, 3);
    assert_int_equal(s.dim[0], 28);
    assert_int_equal(s.dim[1], 28);
    assert_int_equal(s.dim[2], 1);
    assert_int_equal(kc_dataset_num_classes(d), 10);
    float x[784];
    int32_t y;
    assert_int_equal(kc_dataset_read(d, 9999, 1, x, &y), KC_STATUS_OK);
    float mx = 0;
    for (int i = 0; i < 784; i++) {
        assert_true(x[i] >= 0.0f && x[i] <= 1.0f);
        mx = KC_MAX(mx, x[i]);
    }
    assert_true(mx > 0.5f);
    assert_true(y >= 0 && y < 10);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- fixture directory */

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("TMPDIR");
    snprintf(g_dir, sizeof g_dir, "%s/kerac_test_data_XXXXXX", t && *t ? t : "/tmp");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_idx_raw_and_gz),
        cmocka_unit_test(test_mnist_dirs),
        cmocka_unit_test(test_idx_bad_files),
        cmocka_unit_test(test_idx_gz_bounds),
        cmocka_unit_test(test_cifar10),
        cmocka_unit_test(test_npy),
        cmocka_unit_test(test_npy_bad),
        cmocka_unit_test(test_bad_specs),
        cmocka_unit_test(test_memory_and_slices),
        cmocka_unit_test(test_loader_epoch),
        cmocka_unit_test(test_loader_destroy_mid_epoch),
        cmocka_unit_test(test_loader_errors),
        cmocka_unit_test(test_fashion_mnist_installed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
