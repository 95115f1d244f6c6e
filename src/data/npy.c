/* npy.c — NumPy .npy files (format versions 1, 2 and 3): "\x93NUMPY", major, minor, a
 * little-endian header length (uint16 for v1, uint32 for v2/v3), a Python dict literal
 * {'descr': '<f4', 'fortran_order': False, 'shape': (N, H, W), } and the raw array.
 * Images: uint8, float32 or float64 (narrowed to float32), either byte order, (N, H, W) ->
 * (H, W, 1), (N, H, W, C) or (N, D) -> (D), C order: the rule predict's reader
 * (tools/kerac/npy.c) follows too.
 * Labels: any integer dtype, (N,) or (N, 1): class indices. Anything else of an integer,
 * bool, float32 or float64 dtype is a label tensor (one-hot or float targets, binary
 * targets, per-pixel masks): kept as floats of the stored shape, checked against the
 * model's output and loss when training starts (src/model/targets.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dataset.h"

#define NPY_MAX_RANK 8
#define NPY_MAX_HEADER (1 << 20)

typedef struct npy_file {
    const char *path;
    const char *what;        /* "images" or "labels" */
    FILE *fp;
    int64_t file_bytes;
    int64_t data_offset;     /* bytes before the array */
    char descr[32];          /* '<f4' */
    char order;              /* '<', '>', '|' or '=' */
    char kind;               /* 'u', 'i', 'f', ... */
    int itemsize;
    bool fortran;
    int rank;
    int64_t dims[NPY_MAX_RANK];
} npy_file;

static bool host_little_endian(void) {
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Does data stored with byte order `order` need swapping on this host? */
static bool needs_swap(char order, int itemsize) {
    if (itemsize == 1 || order == '|' || order == '=') return false;
    return (order == '<') != host_little_endian();
}

static void swap_bytes(uint8_t *p, int64_t count, int size) {
    for (int64_t i = 0; i < count; i++, p += size)
        for (int a = 0, b = size - 1; a < b; a++, b--) {
            uint8_t t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* ---- the header dict */

static kc_status bad_header(const npy_file *f, const char *text, const char *at, const char *why) {
    int off = (int)(at - text), len = (int)strlen(text);
    while (len > 0 && (text[len - 1] == ' ' || text[len - 1] == '\n')) len--;
    return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has a malformed .npy header (%s at character %d "
                    "of \"%.*s\"); write it with numpy.save", f->what, f->path, why, off, KC_MIN(len, 120), text);
}

static void skip_ws(const char **p) {
    while (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r') (*p)++;
}

static bool parse_quoted(const char **p, char *out, size_t n) {
    char q = **p;
    if (q != '\'' && q != '"') return false;
    const char *s = *p + 1, *e = strchr(s, q);
    if (!e || (size_t)(e - s) >= n) return false;
    memcpy(out, s, (size_t)(e - s));
    out[e - s] = '\0';
    *p = e + 1;
    return true;
}

static kc_status parse_header(npy_file *f, const char *text) {
    const char *p = text;
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws(&p);
    if (*p != '{') return bad_header(f, text, p, "expected '{'");
    p++;
    for (;;) {
        skip_ws(&p);
        if (*p == '}') break;
        char key[32];
        if (!parse_quoted(&p, key, sizeof key)) return bad_header(f, text, p, "expected a quoted key");
        skip_ws(&p);
        if (*p != ':') return bad_header(f, text, p, "expected ':'");
        p++;
        skip_ws(&p);
        if (strcmp(key, "descr") == 0) {
            if (*p == '[')
                return kc__fail(KC_STATUS_UNSUPPORTED, "%s file '%s' holds a structured array (dtype %.60s); "
                                "kerac reads plain arrays: save one field as its own array", f->what, f->path, p);
            if (!parse_quoted(&p, f->descr, sizeof f->descr)) return bad_header(f, text, p, "expected a dtype string");
            have_descr = true;
        } else if (strcmp(key, "fortran_order") == 0) {
            if (strncmp(p, "True", 4) == 0) f->fortran = true, p += 4;
            else if (strncmp(p, "False", 5) == 0) f->fortran = false, p += 5;
            else return bad_header(f, text, p, "expected True or False");
            have_fortran = true;
        } else if (strcmp(key, "shape") == 0) {
            if (*p != '(') return bad_header(f, text, p, "expected a shape tuple");
            p++;
            f->rank = 0;
            for (;;) {
                skip_ws(&p);
                if (*p == ')') break;
                if (*p < '0' || *p > '9') return bad_header(f, text, p, "expected a dimension");
                int64_t v = 0;
                while (*p >= '0' && *p <= '9') {
                    if (v > (INT64_MAX - 9) / 10) return bad_header(f, text, p, "dimension too large");
                    v = v * 10 + (*p++ - '0');
                }
                if (*p == 'L') p++; /* Python 2 longs */
                if (f->rank == NPY_MAX_RANK) return bad_header(f, text, p, "too many dimensions");
                f->dims[f->rank++] = v;
                skip_ws(&p);
                if (*p == ',') p++;
                else if (*p != ')') return bad_header(f, text, p, "expected ',' or ')'");
            }
            p++;
            have_shape = true;
        } else {
            return bad_header(f, text, p, "unexpected key");
        }
        skip_ws(&p);
        if (*p == ',') p++;
        else if (*p != '}') return bad_header(f, text, p, "expected ',' or '}'");
    }
    if (!have_descr || !have_fortran || !have_shape)
        return bad_header(f, text, p, !have_descr ? "no 'descr'" : !have_fortran ? "no 'fortran_order'" : "no 'shape'");

    /* descr: [byte order] kind size, e.g. '<f4', '|u1', 'i8' */
    const char *d = f->descr;
    f->order = '|';
    if (*d == '<' || *d == '>' || *d == '|' || *d == '=') f->order = *d++;
    f->kind = *d ? *d++ : '?';
    char *end = NULL;
    long size = strtol(d, &end, 10);
    if (end == d || *end != '\0' || size < 1 || size > 16) f->kind = '?'; /* unsupported below */
    f->itemsize = (int)size;
    return KC_STATUS_OK;
}

static kc_status npy_open(npy_file *f, const char *path, const char *what) {
    memset(f, 0, sizeof *f);
    f->path = path;
    f->what = what;
    f->fp = fopen(path, "rb");
    if (!f->fp) return kc__fail(KC_STATUS_IO, "cannot open %s file '%s': %s", what, path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f->fp), &sb) != 0)
        return kc__fail(KC_STATUS_IO, "cannot read %s file '%s': %s", what, path, strerror(errno));
    if (S_ISDIR(sb.st_mode))
        return kc__fail(KC_STATUS_IO, "cannot read %s file '%s': %s", what, path, strerror(EISDIR));
    f->file_bytes = (int64_t)sb.st_size;
    uint8_t pre[12];
    size_t got = fread(pre, 1, 10, f->fp);
    if (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is not a .npy file: it does not start with the "
                        "header magic \\x93NUMPY; write it with numpy.save", what, path);
    int major = pre[6];
    int64_t hlen;
    if (major == 1) {
        hlen = pre[8] | (int64_t)pre[9] << 8;
        f->data_offset = 10 + hlen;
    } else if (major == 2 || major == 3) {
        if (fread(pre + 10, 1, 2, f->fp) != 2)
            return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated inside its .npy header", what, path);
        hlen = pre[8] | (int64_t)pre[9] << 8 | (int64_t)pre[10] << 16 | (int64_t)pre[11] << 24;
        f->data_offset = 12 + hlen;
    } else {
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s file '%s' is .npy format version %d.%d; kerac reads "
                        "versions 1, 2 and 3", what, path, major, pre[7]);
    }
    if (hlen > NPY_MAX_HEADER || f->data_offset > f->file_bytes)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has a malformed .npy header: its length %lld "
                        "does not fit in the %lld-byte file", what, path, (long long)hlen,
                        (long long)f->file_bytes);
    char *text = malloc((size_t)hlen + 1);
    if (!text) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
    kc_status s = KC_STATUS_OK;
    if (fread(text, 1, (size_t)hlen, f->fp) != (size_t)hlen)
        s = kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated inside its .npy header", what, path);
    if (s == KC_STATUS_OK) {
        text[hlen] = '\0';
        if (strlen(text) != (size_t)hlen)
            s = kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has a malformed .npy header (a NUL byte "
                         "inside); write it with numpy.save", what, path);
        else
            s = parse_header(f, text);
    }
    free(text);
    return s;
}

static void npy_close(npy_file *f) {
    if (f->fp) fclose(f->fp);
    f->fp = NULL;
}

/* The data must be exactly count * itemsize bytes. */
static kc_status npy_check_size(const npy_file *f, int64_t count) {
    int64_t have = f->file_bytes - f->data_offset;
    int64_t want = count * f->itemsize;
    if (have < want)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' is truncated: shape and dtype '%s' need %lld "
                        "bytes of data but the file holds %lld", f->what, f->path, f->descr,
                        (long long)want, (long long)have);
    if (have > want)
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' has %lld bytes after the %lld bytes of data "
                        "its header declares", f->what, f->path, (long long)(have - want), (long long)want);
    return KC_STATUS_OK;
}

static kc_status npy_read(const npy_file *f, void *dst, int64_t bytes) {
    if (fread(dst, 1, (size_t)bytes, f->fp) != (size_t)bytes) {
        if (ferror(f->fp))
            return kc__fail(KC_STATUS_IO, "reading %s file '%s' failed: %s", f->what, f->path, strerror(errno));
        return kc__fail(KC_STATUS_BAD_FILE, "%s file '%s' became shorter while it was being read", f->what, f->path);
    }
    return KC_STATUS_OK;
}

/* count float64 values, in chunks, byte-swapped where needed, narrowed to float32. */
static kc_status npy_read_f64(const npy_file *f, float *dst, int64_t count) {
    enum { CHUNK = 1 << 16 };
    double *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading %s file '%s'", f->what, f->path);
    kc_status s = KC_STATUS_OK;
    for (int64_t at = 0; at < count && s == KC_STATUS_OK; at += CHUNK) {
        int64_t k = KC_MIN((int64_t)CHUNK, count - at);
        s = npy_read(f, buf, k * 8);
        if (s == KC_STATUS_OK && needs_swap(f->order, 8)) swap_bytes((uint8_t *)buf, k, 8);
        for (int64_t i = 0; s == KC_STATUS_OK && i < k; i++) dst[at + i] = (float)buf[i];
    }
    free(buf);
    return s;
}

/* Integer item i of raw (any integer or bool dtype, in the host's byte order) as int64. */
static int64_t int_item(const npy_file *f, const uint8_t *raw, int64_t i) {
    const uint8_t *p = raw + i * f->itemsize;
    bool is_signed = f->kind == 'i';
    switch (f->itemsize) {
    case 1: return is_signed ? (int64_t) * (const int8_t *)p : (int64_t)*p;
    case 2: {
        uint16_t u;
        memcpy(&u, p, 2);
        return is_signed ? (int64_t)(int16_t)u : (int64_t)u;
    }
    case 4: {
        uint32_t u;
        memcpy(&u, p, 4);
        return is_signed ? (int64_t)(int32_t)u : (int64_t)u;
    }
    default: {
        uint64_t u;
        memcpy(&u, p, 8);
        return (!is_signed && u > (uint64_t)INT64_MAX) ? INT64_MAX : (int64_t)u;
    }
    }
}

/* Widen labels of any integer dtype to int32, rejecting negatives. raw: (n) items. */
static kc_status convert_labels(const npy_file *f, const uint8_t *raw, int64_t n, int32_t *y) {
    for (int64_t i = 0; i < n; i++) {
        int64_t v = int_item(f, raw, i);
        if (v < 0)
            return kc__fail(KC_STATUS_BAD_FILE, "labels file '%s' has a negative label %lld at index %lld; "
                            "class labels must be >= 0", f->path, (long long)v, (long long)i);
        if (v >= INT32_MAX)
            return kc__fail(KC_STATUS_BAD_FILE, "labels file '%s' has label %lld at index %lld, too large "
                            "for a class index", f->path, (long long)v, (long long)i);
        y[i] = (int32_t)v;
    }
    return KC_STATUS_OK;
}

static bool is_int_kind(const npy_file *f) {
    return (f->kind == 'i' || f->kind == 'u' || f->kind == 'b') &&
           (f->itemsize == 1 || f->itemsize == 2 || f->itemsize == 4 || f->itemsize == 8) &&
           (f->kind != 'b' || f->itemsize == 1);
}

/* Class indices (N,) / (N, 1) of an integer dtype: the int32 labels y. Else a label tensor. */
static bool class_index_labels(const npy_file *f) {
    return is_int_kind(f) && f->kind != 'b' && (f->rank == 1 || (f->rank == 2 && f->dims[1] == 1));
}

/* The label tensor's shape per example ((N,) -> (1)) and dtype, or an error naming what fits. */
static kc_status tensor_shape(const npy_file *f, kc_shape *shape) {
    if (!is_int_kind(f) && !(f->kind == 'f' && (f->itemsize == 4 || f->itemsize == 8)))
        return kc__fail(KC_STATUS_UNSUPPORTED, "labels file '%s' has dtype '%s'; kerac reads integer class "
                        "indices or float32/float64 targets: save y.astype('int64') or y.astype('float32')",
                        f->path, f->descr);
    if (f->rank < 1 || f->rank > KC_MAX_RANK + 1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "labels file '%s' has %d dimensions; labels are (N,), (N, K), "
                        "(N, H, W) or (N, H, W, C)", f->path, f->rank);
    if (f->fortran && f->rank > 1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "labels file '%s' is stored in Fortran order; save "
                        "numpy.ascontiguousarray(y)", f->path);
    memset(shape, 0, sizeof *shape);
    int64_t e = 1;
    for (int i = 1; i < f->rank; i++) {
        if (f->dims[i] < 1 || f->dims[i] > INT_MAX || (e *= f->dims[i]) > ((int64_t)1 << 40))
            return kc__fail(KC_STATUS_BAD_FILE, "labels file '%s' has dimension %d = %lld; every example "
                            "dimension must be 1..%d", f->path, i, (long long)f->dims[i], INT_MAX);
        shape->dim[shape->rank++] = (int)f->dims[i];
    }
    if (shape->rank == 0) shape->dim[shape->rank++] = 1; /* (N,) -> (1) */
    return KC_STATUS_OK;
}

/* Read a label tensor of count values into t as floats (byte-swapped where needed). */
static kc_status read_tensor(const npy_file *f, float *t, int64_t count) {
    if (f->kind == 'f' && f->itemsize == 8) return npy_read_f64(f, t, count);
    if (f->kind == 'f') {
        KC_TRY(npy_read(f, t, count * 4));
        if (needs_swap(f->order, 4)) swap_bytes((uint8_t *)t, count, 4);
        return KC_STATUS_OK;
    }
    uint8_t *raw = malloc((size_t)KC_MAX(count, 1) * (size_t)f->itemsize); /* (count) items as stored */
    if (!raw) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading labels file '%s'", f->path);
    kc_status s = npy_read(f, raw, count * f->itemsize);
    if (s == KC_STATUS_OK && needs_swap(f->order, f->itemsize)) swap_bytes(raw, count, f->itemsize);
    for (int64_t i = 0; s == KC_STATUS_OK && i < count; i++) t[i] = (float)int_item(f, raw, i);
    free(raw);
    return s;
}

static kc_status npy_load_files(npy_file *fx, npy_file *fy, const char *x_path, const char *y_path,
                                kc_dataset **out) {
    KC_TRY(npy_open(fx, x_path, "images"));
    KC_TRY(npy_open(fy, y_path, "labels"));

    /* images: dtype, order, shape */
    kc_ds_dtype dtype;
    bool narrow = false; /* float64 images: read, narrowed to float32 (as predict reads them) */
    if (fx->kind == 'u' && fx->itemsize == 1) dtype = KC_DS_U8;
    else if (fx->kind == 'f' && fx->itemsize == 4) dtype = KC_DS_F32;
    else if (fx->kind == 'f' && fx->itemsize == 8) dtype = KC_DS_F32, narrow = true;
    else
        return kc__fail(KC_STATUS_UNSUPPORTED, "images file '%s' has dtype '%s'; kerac reads uint8, float32 or "
                        "float64 images in either byte order: save x.astype('float32') or x.astype('uint8')",
                        x_path, fx->descr);
    if (fx->fortran && fx->rank > 1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "images file '%s' is stored in Fortran order "
                        "(fortran_order: True); kerac reads C order: save numpy.ascontiguousarray(x)", x_path);
    if (fx->rank < 2 || fx->rank > 4)
        return kc__fail(KC_STATUS_UNSUPPORTED, "images file '%s' has %d dimension%s; kerac reads images "
                        "(N, H, W), (N, H, W, C) or vectors (N, D)", x_path, fx->rank, fx->rank == 1 ? "" : "s");
    const int64_t n = fx->dims[0];
    if (n == 0) return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' holds no examples (N = 0)", x_path);
    kc_shape shape = {0};
    int64_t e = 1;
    for (int i = 1; i < fx->rank; i++) {
        if (fx->dims[i] < 1 || fx->dims[i] > INT_MAX)
            return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' has dimension %d = %lld; every example "
                            "dimension must be 1..%d", x_path, i, (long long)fx->dims[i], INT_MAX);
        shape.dim[shape.rank++] = (int)fx->dims[i];
        e *= fx->dims[i];
        if (e > ((int64_t)1 << 40))
            return kc__fail(KC_STATUS_BAD_FILE, "images file '%s': examples of %lld values are too large "
                            "to be real", x_path, (long long)e);
    }
    if (fx->rank == 3) shape.dim[shape.rank++] = 1; /* (N, H, W) -> (H, W, 1) */
    if (n > ((int64_t)1 << 46) / e)
        return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' declares %lld examples of %lld values, too "
                        "large to be real", x_path, (long long)n, (long long)e);

    /* labels: class indices, or a label tensor */
    const bool indices = class_index_labels(fy);
    kc_shape t_shape = {0};
    if (!indices) KC_TRY(tensor_shape(fy, &t_shape));
    if (fy->rank < 1 || fy->dims[0] != n)
        return kc__fail(KC_STATUS_BAD_FILE, "images file '%s' has %lld examples but labels file '%s' has "
                        "%lld labels; the counts must match", x_path, (long long)n, y_path,
                        (long long)(fy->rank < 1 ? 0 : fy->dims[0]));
    KC_TRY(npy_check_size(fx, n * e));
    int64_t ty = 1; /* label values per example */
    for (int i = 0; i < t_shape.rank; i++) ty *= t_shape.dim[i];
    KC_TRY(npy_check_size(fy, n * ty));

    char source[512];
    snprintf(source, sizeof source, "'%s'", x_path);
    kc_ds_storage *st = NULL;
    /* images in the host's byte order are memory-mapped (read on demand: a dataset larger
     * than RAM trains); others are read and swapped */
    bool map = !narrow && !needs_swap(fx->order, fx->itemsize) && fx->data_offset % fx->itemsize == 0;
    if (map) KC_TRY(kc__ds_storage_create_mapped(dtype, n, shape, source, x_path, fx->data_offset, &st));
    else KC_TRY(kc__ds_storage_create(dtype, n, shape, source, &st));
    uint8_t *raw_y = indices ? malloc((size_t)n * (size_t)fy->itemsize) : NULL; /* (n) labels as stored */
    kc_status s = raw_y || !indices ? KC_STATUS_OK
                                    : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", y_path);
    if (s == KC_STATUS_OK && !indices) s = kc__ds_storage_add_targets(st, t_shape);
    if (s == KC_STATUS_OK && !map && narrow) s = npy_read_f64(fx, st->x_f32, n * e);
    else if (s == KC_STATUS_OK && !map)
        s = npy_read(fx, dtype == KC_DS_U8 ? (void *)st->x_u8 : (void *)st->x_f32, n * e * fx->itemsize);
    if (s == KC_STATUS_OK) s = indices ? npy_read(fy, raw_y, n * fy->itemsize) : read_tensor(fy, st->t, n * ty);
    if (s == KC_STATUS_OK && !map && !narrow && needs_swap(fx->order, fx->itemsize))
        swap_bytes((uint8_t *)st->x_f32, n * e, fx->itemsize);
    if (s == KC_STATUS_OK && indices) {
        if (needs_swap(fy->order, fy->itemsize)) swap_bytes(raw_y, n, fy->itemsize);
        s = convert_labels(fy, raw_y, n, st->y);
    }
    if (s == KC_STATUS_OK && !indices) s = kc__ds_check_finite(st->t, n, ty, "labels", y_path);
    if (s == KC_STATUS_OK && dtype == KC_DS_F32) s = kc__ds_check_finite(st->x_f32, n, e, "images", x_path);
    free(raw_y);
    if (s != KC_STATUS_OK) {
        kc__ds_storage_free(st);
        return s;
    }
    return kc__ds_storage_finish(st, 0, out);
}

kc_status kc__npy_load(const char *x_path, const char *y_path, kc_dataset **out) {
    *out = NULL;
    npy_file fx = {0}, fy = {0};
    kc_status s = npy_load_files(&fx, &fy, x_path, y_path, out);
    npy_close(&fx);
    npy_close(&fy);
    return s;
}
