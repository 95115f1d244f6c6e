/* npy.c — a minimal NumPy .npy reader (C order, little-endian float32 / float64 / uint8)
 * for `kerac predict` input, and a float32 writer for its output. Plain stdio. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

#define NPY_MAGIC "\x93NUMPY"
#define NPY_MAX_HEADER (1 << 20)

static int npy_err(char *err, size_t n, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return code;
}

static uint32_t le16(const unsigned char *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The text value after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *hdr, const char *key) {
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p) {
        snprintf(pat, sizeof pat, "\"%s\"", key);
        p = strstr(hdr, pat);
    }
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ') p++;
    if (*p != ':') return NULL;
    p++;
    while (*p == ' ') p++;
    return p;
}

/* Parse the header dict: descr, fortran_order, shape. 0 or -2 with a message. */
static int parse_header(const char *path, const char *hdr, cli_npy *a, char *err, size_t n) {
    const char *d = dict_value(hdr, "descr");
    if (!d || (*d != '\'' && *d != '"'))
        return npy_err(err, n, -2, "'%s': the .npy header has no 'descr'; write the file with numpy.save",
                       path);
    char q = *d++;
    char descr[16];
    size_t len = 0;
    while (*d && *d != q && len + 1 < sizeof descr) descr[len++] = *d++;
    descr[len] = '\0';
    if (*d != q)
        return npy_err(err, n, -2, "'%s': the .npy header's 'descr' is malformed", path);
    /* the rule of the datasets' reader (src/data/npy.c): uint8, float32, float64, either order */
    const char *t = strchr("<>|=", descr[0]) && descr[0] ? descr + 1 : descr;
    a->big_endian = descr[0] == '>';
    if (!strcmp(t, "f4"))
        a->dtype = CLI_NPY_F32;
    else if (!strcmp(t, "f8"))
        a->dtype = CLI_NPY_F64;
    else if (!strcmp(t, "u1"))
        a->dtype = CLI_NPY_U8;
    else
        return npy_err(err, n, -2,
                       "'%s': unsupported .npy dtype '%s'; use uint8, float32 or float64 in either byte order "
                       "(x.astype(numpy.float32))",
                       path, descr);

    const char *f = dict_value(hdr, "fortran_order");
    if (!f) return npy_err(err, n, -2, "'%s': the .npy header has no 'fortran_order'", path);
    if (!strncmp(f, "True", 4))
        return npy_err(err, n, -2,
                       "'%s': the array is in Fortran order; save numpy.ascontiguousarray(x) instead", path);
    if (strncmp(f, "False", 5))
        return npy_err(err, n, -2, "'%s': the .npy header's 'fortran_order' is malformed", path);

    const char *s = dict_value(hdr, "shape");
    if (!s || *s != '(') return npy_err(err, n, -2, "'%s': the .npy header has no 'shape' tuple", path);
    s++;
    a->ndim = 0;
    a->count = 1;
    for (;;) {
        while (*s == ' ' || *s == ',') s++;
        if (*s == ')') break;
        if (*s < '0' || *s > '9')
            return npy_err(err, n, -2, "'%s': the .npy header's 'shape' is malformed", path);
        errno = 0;
        char *end;
        long long v = strtoll(s, &end, 10);
        if (errno || v < 0 || v > ((int64_t)1 << 40))
            return npy_err(err, n, -2, "'%s': the .npy header's 'shape' has an invalid dimension", path);
        if (a->ndim == 8)
            return npy_err(err, n, -2, "'%s': arrays with more than 8 dimensions are not supported", path);
        a->shape[a->ndim++] = v;
        if (v != 0 && a->count > ((int64_t)1 << 40) / v)
            return npy_err(err, n, -2, "'%s': the array is too large", path);
        a->count *= v;
        s = end;
        while (*s == ' ') s++;
        if (*s != ',' && *s != ')')
            return npy_err(err, n, -2, "'%s': the .npy header's 'shape' is malformed", path);
    }
    return 0;
}

int cli_npy_read(const char *path, cli_npy *a, char *err, size_t n) {
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (!f) return npy_err(err, n, -1, "cannot open '%s': %s", path, strerror(errno));
    unsigned char pre[12];
    char *hdr = NULL;
    void *raw = NULL;
    int rc = 0;
    if (fread(pre, 1, 10, f) != 10 || memcmp(pre, NPY_MAGIC, 6) != 0) {
        rc = npy_err(err, n, -2, "'%s' is not a .npy file (bad magic); write it with numpy.save", path);
        goto done;
    }
    uint32_t hlen;
    if (pre[6] == 1) {
        hlen = le16(pre + 8);
    } else if (pre[6] == 2 || pre[6] == 3) {
        if (fread(pre + 10, 1, 2, f) != 2) {
            rc = npy_err(err, n, -2, "'%s': truncated .npy header", path);
            goto done;
        }
        hlen = le32(pre + 8);
    } else {
        rc = npy_err(err, n, -2, "'%s': unsupported .npy format version %d.%d", path, pre[6], pre[7]);
        goto done;
    }
    if (hlen == 0 || hlen > NPY_MAX_HEADER) {
        rc = npy_err(err, n, -2, "'%s': the .npy header length %u is invalid", path, hlen);
        goto done;
    }
    hdr = malloc(hlen + 1);
    if (!hdr) {
        rc = npy_err(err, n, -1, "'%s': out of memory", path);
        goto done;
    }
    if (fread(hdr, 1, hlen, f) != hlen) {
        rc = npy_err(err, n, -2, "'%s': truncated .npy header", path);
        goto done;
    }
    hdr[hlen] = '\0';
    if ((rc = parse_header(path, hdr, a, err, n))) goto done;
    size_t esize = a->dtype == CLI_NPY_F64 ? 8 : a->dtype == CLI_NPY_F32 ? 4 : 1;
    size_t count = (size_t)a->count;
    long here = ftell(f);
    if (here >= 0 && fseek(f, 0, SEEK_END) == 0) {
        long end = ftell(f);
        if (end >= here && (uint64_t)(end - here) < (uint64_t)count * esize) {
            rc = npy_err(err, n, -2, "'%s' is truncated: the header promises %lld values (%llu bytes), "
                         "the file holds %ld bytes of data", path, (long long)a->count,
                         (unsigned long long)count * esize, end - here);
            goto done;
        }
        fseek(f, here, SEEK_SET);
    }
    raw = malloc(count * esize + 1);
    a->data = malloc(count * sizeof(float) + 1); /* (count) */
    if (!raw || !a->data) {
        rc = npy_err(err, n, -1, "'%s': out of memory for %lld values", path, (long long)a->count);
        goto done;
    }
    if (fread(raw, esize, count, f) != count) {
        rc = npy_err(err, n, -2, "'%s' is truncated: the header promises %lld values", path,
                     (long long)a->count);
        goto done;
    }
    if (fgetc(f) != EOF) {
        rc = npy_err(err, n, -2, "'%s' has data after its %lld values; is the header's shape right?", path,
                     (long long)a->count);
        goto done;
    }
    for (size_t i = 0; i < count; i++) {
        unsigned char *p = (unsigned char *)raw + i * esize;
        for (size_t x = 0, y = esize - 1; a->big_endian && x < y; x++, y--) { /* to the host's order */
            unsigned char c = p[x];
            p[x] = p[y];
            p[y] = c;
        }
        if (a->dtype == CLI_NPY_U8) {
            a->data[i] = (float)p[0] * (1.0f / 255.0f);
        } else if (a->dtype == CLI_NPY_F32) {
            float v;
            memcpy(&v, p, 4);
            a->data[i] = v;
        } else {
            double v;
            memcpy(&v, p, 8);
            a->data[i] = (float)v;
        }
    }
done:
    free(raw);
    free(hdr);
    fclose(f);
    if (rc) {
        free(a->data);
        a->data = NULL;
    }
    return rc;
}

void cli_npy_free(cli_npy *a) {
    if (!a) return;
    free(a->data);
    a->data = NULL;
}

int cli_npy_write(const char *path, const float *data, int ndim, const int64_t *shape, char *err,
                  size_t n) {
    char dict[256];
    size_t len = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    int64_t count = 1;
    for (int i = 0; i < ndim; i++) {
        len += (size_t)snprintf(dict + len, sizeof dict - len, "%lld,%s", (long long)shape[i],
                                i + 1 < ndim ? " " : "");
        count *= shape[i];
    }
    if (ndim > 1) len--; /* numpy writes (3, 4) but (3,) */
    len += (size_t)snprintf(dict + len, sizeof dict - len, "), }");
    /* pad with spaces so that magic + version + length + header is a multiple of 64,
     * ending with '\n' */
    size_t total = 10 + len + 1;
    size_t padded = (total + 63) / 64 * 64;
    char header[320];
    memcpy(header, NPY_MAGIC, 6);
    header[6] = 1;
    header[7] = 0;
    uint32_t hlen = (uint32_t)(padded - 10);
    header[8] = (char)(hlen & 0xff);
    header[9] = (char)(hlen >> 8);
    memcpy(header + 10, dict, len);
    memset(header + 10 + len, ' ', padded - total);
    header[padded - 1] = '\n';

    FILE *f = fopen(path, "wb");
    if (!f) return npy_err(err, n, -1, "cannot create '%s': %s", path, strerror(errno));
    bool ok = fwrite(header, 1, padded, f) == padded;
    /* float32 little-endian: this tool runs on little-endian hosts (x86-64, aarch64) */
    if (ok && count > 0) ok = fwrite(data, sizeof(float), (size_t)count, f) == (size_t)count;
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        remove(path);
        return npy_err(err, n, -1, "cannot write '%s': %s", path, strerror(errno));
    }
    return 0;
}
