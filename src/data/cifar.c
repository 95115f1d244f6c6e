/* cifar.c — CIFAR-10's binary version: data_batch_1..5.bin (train) and test_batch.bin
 * (test), each a run of 3073-byte records: 1 label byte (0-9), then the 32x32 image as
 * three 1024-byte planes (red, green, blue). kerac stores examples channels-last
 * (32, 32, 3) as Keras does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"

enum { CIFAR_SIDE = 32, CIFAR_PLANE = 32 * 32, CIFAR_IMAGE = 3 * 32 * 32, CIFAR_RECORD = 1 + 3 * 32 * 32 };
#define CIFAR_HINT "download CIFAR-10's binary version (cifar-10-binary.tar.gz) and unpack it there"

/* One file's records into x (records, 32, 32, 3) and y (records). */
static kc_status cifar_read_file(const char *path, int64_t records, uint8_t *x, int32_t *y, uint8_t *buf,
                                 int64_t buf_records) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return kc__fail(KC_STATUS_IO, "cifar10: cannot open '%s': %s", path, strerror(errno));
    kc_status s = KC_STATUS_OK;
    for (int64_t r0 = 0; r0 < records && s == KC_STATUS_OK; r0 += buf_records) {
        int64_t nr = KC_MIN(buf_records, records - r0);
        size_t want = (size_t)nr * CIFAR_RECORD;
        if (fread(buf, 1, want, fp) != want) {
            s = ferror(fp) ? kc__fail(KC_STATUS_IO, "cifar10: reading '%s' failed: %s", path, strerror(errno))
                           : kc__fail(KC_STATUS_BAD_FILE, "cifar10: '%s' became shorter while it was "
                                      "being read; read it again", path);
            break;
        }
        for (int64_t r = 0; r < nr; r++) {
            const uint8_t *rec = buf + r * CIFAR_RECORD; /* label, then (3, 32, 32) */
            if (rec[0] > 9) {
                s = kc__fail(KC_STATUS_BAD_FILE, "cifar10: record %lld of '%s' has label %d; CIFAR-10 "
                             "labels are 0-9 (is this CIFAR-100's binary format, or not a CIFAR file?)",
                             (long long)(r0 + r), path, rec[0]);
                break;
            }
            y[r0 + r] = rec[0];
            uint8_t *dst = x + (r0 + r) * CIFAR_IMAGE; /* (32, 32, 3) */
            for (int p = 0; p < CIFAR_PLANE; p++)
                for (int c = 0; c < 3; c++) dst[p * 3 + c] = rec[1 + c * CIFAR_PLANE + p];
        }
    }
    fclose(fp);
    return s;
}

kc_status kc__cifar10_load(const char *dir, bool train, kc_dataset **out) {
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return kc__fail(KC_STATUS_IO, "cifar10: cannot open the directory '%s': %s; " CIFAR_HINT, dir,
                        strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return kc__fail(KC_STATUS_IO, "cifar10: '%s' is not a directory", dir);

    /* the archive unpacks into cifar-10-batches-bin/: accept its parent too */
    char base[4096], path[4200];
    snprintf(base, sizeof base, "%s", dir);
    snprintf(path, sizeof path, "%s/%s", dir, train ? "data_batch_1.bin" : "test_batch.bin");
    if (stat(path, &sb) != 0) {
        snprintf(path, sizeof path, "%s/cifar-10-batches-bin/%s", dir, train ? "data_batch_1.bin" : "test_batch.bin");
        if (stat(path, &sb) == 0) snprintf(base, sizeof base, "%s/cifar-10-batches-bin", dir);
    }

    const int nfiles = train ? 5 : 1;
    char paths[5][4200];
    int64_t records[5], total = 0;
    for (int i = 0; i < nfiles; i++) {
        if (train) snprintf(paths[i], sizeof paths[i], "%s/data_batch_%d.bin", base, i + 1);
        else snprintf(paths[i], sizeof paths[i], "%s/test_batch.bin", base);
        if (stat(paths[i], &sb) != 0)
            return kc__fail(KC_STATUS_IO, "cifar10: cannot open '%s': %s; " CIFAR_HINT, paths[i], strerror(errno));
        if (S_ISDIR(sb.st_mode))
            return kc__fail(KC_STATUS_IO, "cifar10: cannot read '%s': %s", paths[i], strerror(EISDIR));
        int64_t size = (int64_t)sb.st_size;
        if (size == 0) return kc__fail(KC_STATUS_BAD_FILE, "cifar10: '%s' is empty; " CIFAR_HINT, paths[i]);
        if (size % CIFAR_RECORD != 0)
            return kc__fail(KC_STATUS_BAD_FILE, "cifar10: '%s' has %lld bytes, not a whole number of "
                            "%d-byte CIFAR-10 records (truncated, or not the binary version?)", paths[i],
                            (long long)size, CIFAR_RECORD);
        records[i] = size / CIFAR_RECORD;
        total += records[i];
    }

    char source[4300];
    snprintf(source, sizeof source, "cifar10:%s:%s", dir, train ? "train" : "test");
    kc_ds_storage *st = NULL;
    KC_TRY(kc__ds_storage_create(KC_DS_U8, total, kc__shape_make(3, (int[]){CIFAR_SIDE, CIFAR_SIDE, 3}),
                                 source, &st));
    const int64_t buf_records = 512;
    uint8_t *buf = kc__calloc((size_t)buf_records, CIFAR_RECORD, "a CIFAR-10 read buffer"); /* (512, 3073) */
    kc_status s = buf ? KC_STATUS_OK : KC_STATUS_OUT_OF_MEMORY;
    int64_t at = 0;
    for (int i = 0; i < nfiles && s == KC_STATUS_OK; i++) {
        s = cifar_read_file(paths[i], records[i], st->x_u8 + at * CIFAR_IMAGE, st->y + at, buf, buf_records);
        at += records[i];
    }
    free(buf);
    if (s != KC_STATUS_OK) {
        kc__ds_storage_free(st);
        return s;
    }
    return kc__ds_storage_finish(st, 0, out);
}
