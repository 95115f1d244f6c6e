/* .npy images and raw (not gzipped) IDX images are memory-mapped, not loaded: a dataset
 * larger than RAM trains, and the host footprint reported by kc_dataset_memory is the
 * labels only. Gzipped IDX images are decompressed into memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zlib.h>

#include "kerac.h"

static void write_npy(const char *path, const char *descr, const char *shape, const void *data, size_t bytes) {
    char header[128];
    int n = snprintf(header, sizeof header, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", descr, shape);
    int total = 10 + n + 1;
    int pad = (64 - total % 64) % 64;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    unsigned short hlen = (unsigned short)(n + pad + 1);
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fwrite(&hlen, 2, 1, f);
    fwrite(header, 1, (size_t)n, f);
    for (int i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_npy_images_are_mapped(void **state) {
    char dir[] = "/tmp/kerac_mmap_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char xp[256], yp[256], spec[600];
    snprintf(xp, sizeof xp, "%s/x.npy", dir);
    snprintf(yp, sizeof yp, "%s/y.npy", dir);
    enum { N = 300, H = 6, W = 5 };
    float *x = malloc(sizeof(float) * N * H * W);
    long long y[N];
    for (int i = 0; i < N * H * W; i++) x[i] = (float)i * 0.25f;
    for (int i = 0; i < N; i++) y[i] = i % 7;
    write_npy(xp, "<f4", "(300, 6, 5)", x, sizeof(float) * N * H * W);
    write_npy(yp, "<i8", "(300,)", y, sizeof y);
    snprintf(spec, sizeof spec, "npy:%s,%s", xp, yp);
    kc_dataset *d = NULL, *tail = NULL;
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_OK);
    size_t resident = 0, mapped = 0;
    assert_int_equal(kc_dataset_memory(d, &resident, &mapped), KC_STATUS_OK);
    assert_int_equal(mapped, sizeof(float) * N * H * W);  /* images: on demand */
    assert_int_equal(resident, sizeof(int32_t) * N);      /* labels only */
    /* a slice keeps the mapping alive after its parent is gone */
    assert_int_equal(kc_dataset_slice(d, 250, 50, &tail), KC_STATUS_OK);
    kc_dataset_destroy(d);
    unlink(xp); /* the mapping outlives the file's name too */
    float got[2 * H * W];
    int32_t lab[2];
    assert_int_equal(kc_dataset_read(tail, 10, 2, got, lab), KC_STATUS_OK);
    assert_memory_equal(got, x + (size_t)260 * H * W, sizeof got);
    assert_int_equal(lab[0], 260 % 7);
    kc_dataset_destroy(tail);
    /* uint8 images: mapped, scaled on read */
    unsigned char u8[N * H * W];
    for (int i = 0; i < N * H * W; i++) u8[i] = (unsigned char)(i % 256);
    write_npy(xp, "|u1", "(300, 6, 5, 1)", u8, sizeof u8);
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_memory(d, &resident, &mapped), KC_STATUS_OK);
    assert_int_equal(mapped, sizeof u8);
    assert_int_equal(kc_dataset_read(d, 1, 1, got, NULL), KC_STATUS_OK);
    for (int i = 0; i < H * W; i++) assert_true(got[i] == (float)((H * W + i) % 256) / 255.0f);
    kc_dataset_destroy(d);
    /* big-endian floats cannot be mapped as they are: read and swapped into memory */
    for (int i = 0; i < N * H * W; i++) {
        unsigned char *b = (unsigned char *)&x[i], t0 = b[0], t1 = b[1];
        b[0] = b[3], b[3] = t0, b[1] = b[2], b[2] = t1;
    }
    write_npy(xp, ">f4", "(300, 6, 5)", x, sizeof(float) * N * H * W);
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_memory(d, &resident, &mapped), KC_STATUS_OK);
    assert_int_equal(mapped, 0);
    assert_int_equal(resident, sizeof(float) * N * H * W + sizeof(int32_t) * N);
    assert_int_equal(kc_dataset_read(d, 0, 1, got, NULL), KC_STATUS_OK);
    assert_true(got[3] == 0.75f);
    kc_dataset_destroy(d);
    unlink(xp);
    unlink(yp);
    rmdir(dir);
    free(x);
}

/* An IDX file: magic 0x000008RR, RANK big-endian uint32 dimensions, the bytes. */
static void write_idx(const char *path, bool gz, int rank, const unsigned *dims, const unsigned char *data,
                      size_t bytes) {
    unsigned char head[16] = {0, 0, 8, (unsigned char)rank};
    for (int i = 0; i < rank; i++)
        for (int b = 0; b < 4; b++) head[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    if (gz) {
        gzFile f = gzopen(path, "wb");
        assert_non_null(f);
        assert_int_equal(gzwrite(f, head, 4 + 4 * rank), 4 + 4 * rank);
        assert_int_equal(gzwrite(f, data, (unsigned)bytes), (int)bytes);
        gzclose(f);
        return;
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(head, 1, 4 + 4 * (size_t)rank, f);
    fwrite(data, 1, bytes, f);
    fclose(f);
}

static void test_idx_raw_images_are_mapped(void **state) {
    char dir[] = "/tmp/kerac_mmap_XXXXXX";
    assert_non_null(mkdtemp(dir));
    enum { N = 200, H = 7, W = 9 };
    static unsigned char img[N * H * W], lab[N];
    for (int i = 0; i < N * H * W; i++) img[i] = (unsigned char)(i * 7 % 256);
    for (int i = 0; i < N; i++) lab[i] = (unsigned char)(i % 10);
    char xp[256], yp[256], spec[600];
    snprintf(xp, sizeof xp, "%s/images-idx3-ubyte", dir);
    snprintf(yp, sizeof yp, "%s/labels-idx1-ubyte", dir);
    write_idx(xp, false, 3, (unsigned[]){N, H, W}, img, sizeof img);
    write_idx(yp, false, 1, (unsigned[]){N}, lab, sizeof lab);
    snprintf(spec, sizeof spec, "idx:%s,%s", xp, yp);
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_OK);
    size_t resident = 0, mapped = 0;
    assert_int_equal(kc_dataset_memory(d, &resident, &mapped), KC_STATUS_OK);
    assert_int_equal(mapped, sizeof img);               /* images: on demand */
    assert_int_equal(resident, sizeof(int32_t) * N);    /* labels only */
    float got[H * W];
    int32_t y = -1;
    assert_int_equal(kc_dataset_read(d, 123, 1, got, &y), KC_STATUS_OK);
    for (int i = 0; i < H * W; i++) assert_true(got[i] == (float)img[123 * H * W + i] / 255.0f);
    assert_int_equal(y, 123 % 10);
    kc_dataset_destroy(d);
    /* a raw file longer than its header says is still an error (checked before mapping) */
    FILE *f = fopen(xp, "ab");
    fputc(0, f);
    fclose(f);
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_BAD_FILE);
    assert_non_null(strstr(kc_last_error(), "header"));
    /* gzipped: decompressed into memory, the same values */
    snprintf(xp, sizeof xp, "%s/images-idx3-ubyte.gz", dir);
    write_idx(xp, true, 3, (unsigned[]){N, H, W}, img, sizeof img);
    snprintf(spec, sizeof spec, "idx:%s,%s", xp, yp);
    assert_int_equal(kc_dataset_open(spec, &d), KC_STATUS_OK);
    assert_int_equal(kc_dataset_memory(d, &resident, &mapped), KC_STATUS_OK);
    assert_int_equal(mapped, 0);
    assert_int_equal(resident, sizeof img + sizeof(int32_t) * N);
    assert_int_equal(kc_dataset_read(d, 123, 1, got, &y), KC_STATUS_OK);
    for (int i = 0; i < H * W; i++) assert_true(got[i] == (float)img[123 * H * W + i] / 255.0f);
    kc_dataset_destroy(d);
    unlink(xp);
    snprintf(xp, sizeof xp, "%s/images-idx3-ubyte", dir);
    unlink(xp);
    unlink(yp);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_npy_images_are_mapped),
                                       cmocka_unit_test(test_idx_raw_images_are_mapped)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
