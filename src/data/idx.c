/* idx.c — IDX files (LeCun's MNIST format, also Fashion-MNIST): big-endian header
 * 0x00 0x00 TYPE RANK, then RANK big-endian uint32 dimensions, then the data. kerac reads
 * uint8 images (rank 3: N, H, W -> examples (H, W, 1)) and uint8 labels (rank 1: N), raw
 * or gzipped (zlib's gzread reads both). Raw images are memory-mapped (read on demand, as
 * .npy images are); gzipped ones are decompressed into memory. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"

/* deflate never compresses better than about 1032:1; a header promising more than that
 * from a small .gz file is lying (or the file is truncated). */
#define KC_DEFLATE_MAX_RATIO 1032
/* The most image data kerac loads from one IDX file: 16 GiB (2.7 M MNIST-sized training
 * sets); a header declaring more is refused before anything is allocated. A gzipped file
 * is inflated to exactly what its header declares, never further (idx_check_end). */
#define KC_IDX_MAX_BYTES ((int64_t)16 << 30)

typedef struct idx_file {
    const char *path;
    const char *what;     /* "images" or "labels" */
    gzFile gz;
    int64_t file_bytes;   /* size on disk */
    int rank;
    int64_t dims[3];      /* (N, H, W) or (N) */
    int64_t header_bytes; /* 4 + 4 * rank */
} idx_file;

static const char *idx_type_name(int t) {
    switch (t) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "short";
    case 0x0C: return "int";
    case 0x0D: return "float";
    case 0x0E: return "double";
    }
    return "unknown type";
}

/* Why the last gz read came up short: a zlib error (corrupt/truncated .gz), an errno, or
 * plain end of file. */
static kc_status gz_short_read(idx_file *f, const char *part, int64_t want, int64_t got) {
    int errnum = Z_OK;
    const char *msg = gzerror(f->gz, &errnum);
    if (errnum == Z_ERRNO)
        return kc__fail(KC_STATUS_IO, "reading %s file '%s' failed: %s", f->what, f->path, strerror(errno));
    if (errnum != Z_OK && errnum != Z_BUF_ERROR)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is a corrupt gzip file (zlib: %s); download "
                        "it again", f->what, f->path, msg);
    return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated: its %s should be %lld bytes but "
                    "the file ends after %lld%s; download it again", f->what, f->path, part,
                    (long long)want, (long long)got, errnum == Z_BUF_ERROR ? " (gzip stream cut short)" : "");
}

/* Read exactly n bytes (n may exceed gzread's unsigned int). */
static kc_status gz_read_exact(idx_file *f, const char *part, void *buf, int64_t n) {
    int64_t got = 0;
    while (got < n) {
        unsigned chunk = (unsigned)KC_MIN(n - got, (int64_t)1 << 30);
        int r = gzread(f->gz, (uint8_t *)buf + got, chunk);
        if (r <= 0) return gz_short_read(f, part, n, got);
        got += r;
    }
    return KC_STATUS_OK;
}

static kc_status idx_open(idx_file *f, const char *path, const char *what, const char *hint) {
    memset(f, 0, sizeof *f);
    f->path = path;
    f->what = what;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kc__fail(KC_STATUS_IO, "cannot open %s file '%s': %s%s", what, path, strerror(errno), hint);
    struct stat sb;
    int e = fstat(fd, &sb) != 0 ? errno : S_ISDIR(sb.st_mode) ? EISDIR : 0;
    if (e) {
        close(fd);
        return kc__fail(KC_STATUS_IO, "cannot read %s file '%s': %s", what, path, strerror(e));
    }
    f->file_bytes = (int64_t)sb.st_size;
    f->gz = gzdopen(fd, "rb");
    if (!f->gz) {
        close(fd);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory opening '%s'", path);
    }
    gzbuffer(f->gz, 1u << 17);
    return KC_STATUS_OK;
}

static void idx_close(idx_file *f) {
    if (f->gz) gzclose(f->gz);
    f->gz = NULL;
}

/* Read and check the header of an IDX file of uint8 data and the given rank (3 or 1). */
static kc_status idx_header(idx_file *f, int want_rank) {
    uint8_t m[4];
    int r = gzread(f->gz, m, 4);
    if (r != 4) {
        int errnum = Z_OK;
        gzerror(f->gz, &errnum);
        if (r < 0 || (errnum != Z_OK && errnum != Z_BUF_ERROR)) return gz_short_read(f, "header", 4, 0);
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is not an IDX file: it has only %d bytes; "
                        "download it again", f->what, f->path, r);
    }
    uint32_t magic = (uint32_t)m[0] << 24 | (uint32_t)m[1] << 16 | (uint32_t)m[2] << 8 | m[3];
    const char *expect = want_rank == 3 ? "0x00000803 (uint8 images N x H x W)" : "0x00000801 (uint8 labels)";
    if (m[0] != 0 || m[1] != 0)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is not an IDX file: its magic number is "
                        "0x%08x, expected %s", f->what, f->path, magic, expect);
    if (m[2] != 0x08)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has IDX type code 0x%02x (%s) in its magic "
                        "number 0x%08x; kerac reads unsigned byte (0x08) data, expected %s", f->what,
                        f->path, m[2], idx_type_name(m[2]), magic, expect);
    if (m[3] != want_rank) {
        if (want_rank == 3 && m[3] == 1)
            return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' holds labels (magic 0x00000801), not "
                            "images; give the images file first: idx:IMAGES,LABELS", f->path);
        if (want_rank == 1 && m[3] == 3)
            return kc__fail(KC_STATUS_BAD_FILE, "labels file '%s' holds images (magic 0x00000803), not "
                            "labels; give the labels file second: idx:IMAGES,LABELS", f->path);
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has rank %d (magic 0x%08x), expected %s",
                        f->what, f->path, m[3], magic, expect);
    }
    f->rank = want_rank;
    uint8_t d[12];
    KC_TRY(gz_read_exact(f, "header", d, 4 * want_rank));
    for (int i = 0; i < want_rank; i++) {
        uint32_t v = (uint32_t)d[4 * i] << 24 | (uint32_t)d[4 * i + 1] << 16 | (uint32_t)d[4 * i + 2] << 8 |
                     d[4 * i + 3];
        if (v == 0)
            return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has %s = 0 in its header; %s",
                            f->what, f->path, i == 0 ? "N (examples)" : i == 1 ? "height" : "width",
                            i == 0 ? "it holds no examples" : "an image needs at least one pixel");
        if (v > INT_MAX)
            return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has dimension %d = %u in its header, "
                            "too large to be real", f->what, f->path, i, v);
        f->dims[i] = v;
    }
    f->header_bytes = 4 + 4 * want_rank;
    return KC_STATUS_OK;
}

/* Check that the file can hold `bytes` of data after its header before allocating them:
 * exactly for a raw file, by deflate's best ratio for a gzipped one. */
static kc_status idx_check_size(idx_file *f, int64_t bytes) {
    if (gzdirect(f->gz)) {
        int64_t have = f->file_bytes - f->header_bytes;
        if (have < bytes)
            return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated: its header declares %lld "
                            "bytes of data but the file holds %lld; download it again", f->what,
                            f->path, (long long)bytes, (long long)have);
        if (have > bytes)
            return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has %lld bytes after the %lld bytes of data "
                            "its header declares; the header dimensions do not match the file size",
                            f->what, f->path, (long long)(have - bytes), (long long)bytes);
    } else if (bytes / KC_DEFLATE_MAX_RATIO > f->file_bytes) {
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated or its header is wrong: it "
                        "declares %lld bytes of data, more than a %lld-byte gzip file can hold",
                        f->what, f->path, (long long)bytes, (long long)f->file_bytes);
    }
    return KC_STATUS_OK;
}

/* After the data: nothing more may follow. */
static kc_status idx_check_end(idx_file *f, int64_t bytes) {
    uint8_t extra;
    int r = gzread(f->gz, &extra, 1);
    if (r > 0)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has data after the %lld bytes its header "
                        "declares; the header dimensions do not match the file size", f->what,
                        f->path, (long long)bytes);
    int errnum = Z_OK;
    const char *msg = gzerror(f->gz, &errnum);
    if (errnum == Z_ERRNO)
        return kc__fail(KC_STATUS_IO, "reading %s file '%s' failed: %s", f->what, f->path, strerror(errno));
    if (errnum != Z_OK)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is a corrupt or truncated gzip file (zlib: "
                        "%s); download it again", f->what, f->path, msg);
    return KC_STATUS_OK;
}

static kc_status idx_load_files(idx_file *im, idx_file *lb, const char *images_path,
                                const char *labels_path, const char *hint, kc_dataset **out) {
    KC_TRY(idx_open(im, images_path, "images", hint));
    KC_TRY(idx_header(im, 3));
    KC_TRY(idx_open(lb, labels_path, "labels", hint));
    KC_TRY(idx_header(lb, 1));
    const int64_t n = im->dims[0], h = im->dims[1], w = im->dims[2];
    if (lb->dims[0] != n)
        return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' has %lld images but labels file '%s' has "
                        "%lld labels; the counts must match (are they from the same split?)",
                        images_path, (long long)n, labels_path, (long long)lb->dims[0]);
    if (h * w > ((int64_t)1 << 30) || n > KC_IDX_MAX_BYTES / (h * w))
        return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' declares %lld images of %lld x %lld (%lld bytes), "
                        "over the %lld GiB kerac loads from an IDX file; the header is wrong or the data set "
                        "must be split", images_path, (long long)n, (long long)h, (long long)w,
                        (long long)(n * h * w), (long long)(KC_IDX_MAX_BYTES >> 30));
    const int64_t image_bytes = n * h * w;
    KC_TRY(idx_check_size(im, image_bytes));
    KC_TRY(idx_check_size(lb, n));

    char source[512];
    snprintf(source, sizeof source, "'%s'", images_path);
    kc_ds_storage *st = NULL;
    const kc_shape shape = kc__shape_make(3, (int[]){(int)h, (int)w, 1});
    const bool map = gzdirect(im->gz); /* raw: its exact size was checked above */
    if (map) KC_TRY(kc__ds_storage_create_mapped(KC_DS_U8, n, shape, source, images_path, im->header_bytes, &st));
    else KC_TRY(kc__ds_storage_create(KC_DS_U8, n, shape, source, &st));
    kc_status s = KC_STATUS_OK;
    if (!map) s = gz_read_exact(im, "image data", st->x_u8, image_bytes);
    if (s == KC_STATUS_OK && !map) s = idx_check_end(im, image_bytes);
    /* labels: read the n bytes into the start of y, then widen in place from the end
     * (y[i] at byte 4i never overwrites a byte j > i that is still to be read) */
    uint8_t *raw = (uint8_t *)st->y; /* (n) bytes inside (n) int32 */
    if (s == KC_STATUS_OK) s = gz_read_exact(lb, "label data", raw, n);
    if (s == KC_STATUS_OK) s = idx_check_end(lb, n);
    if (s != KC_STATUS_OK) {
        kc__ds_storage_free(st);
        return s;
    }
    for (int64_t i = n - 1; i >= 0; i--) st->y[i] = raw[i];
    return kc__ds_storage_finish(st, 0, out);
}

kc_status kc__idx_load(const char *images_path, const char *labels_path, const char *hint, kc_dataset **out) {
    idx_file im = {0}, lb = {0};
    kc_status s = idx_load_files(&im, &lb, images_path, labels_path, hint ? hint : "", out);
    idx_close(&im);
    idx_close(&lb);
    return s;
}

/* DIR/<prefix>-<part>-idx<r>-ubyte[.gz] (also Kaggle's <prefix>-<part>.idx<r>-ubyte). */
static kc_status find_idx(const char *kind, const char *dir, const char *prefix, const char *part,
                          int rank, const char *hint, char *path, size_t n) {
    const char *forms[] = {"%s/%s-%s-idx%d-ubyte.gz", "%s/%s-%s-idx%d-ubyte", "%s/%s-%s.idx%d-ubyte"};
    struct stat sb;
    for (size_t i = 0; i < KC_ARRAY_LEN(forms); i++) {
        snprintf(path, n, forms[i], dir, prefix, part, rank);
        if (stat(path, &sb) == 0) return KC_STATUS_OK;
    }
    snprintf(path, n, forms[1], dir, prefix, part, rank);
    return kc__fail(KC_STATUS_IO, "%s: cannot find the %s file '%s' (or '%s.gz'): %s%s", kind, part,
                    path, path, strerror(ENOENT), hint);
}

kc_status kc__mnist_dir_load(const char *kind, const char *dir, bool train, const char *hint, kc_dataset **out) {
    *out = NULL;
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return kc__fail(KC_STATUS_IO, "%s: cannot open the directory '%s': %s%s", kind, dir, strerror(errno), hint);
    if (!S_ISDIR(sb.st_mode))
        return kc__fail(KC_STATUS_IO, "%s: '%s' is not a directory%s", kind, dir, hint);
    const char *prefix = train ? "train" : "t10k";
    char images[4096], labels[4096];
    KC_TRY(find_idx(kind, dir, prefix, "images", 3, hint, images, sizeof images));
    KC_TRY(find_idx(kind, dir, prefix, "labels", 1, hint, labels, sizeof labels));
    kc_status s = kc__idx_load(images, labels, hint, out);
    if (s != KC_STATUS_OK) return kc__wrap(s, "%s:%s: ", kind, train ? "train" : "test");
    return KC_STATUS_OK;
}
