/* h5_gheap.c — the global heap checks of h5_gheap.h.
 *
 * A collection: "GCOL", version 1, 3 reserved bytes, its size (a length field, header
 * included); then objects: index (2), references (2), reserved (4), size (a length field),
 * the data padded to 8 bytes (index 0 is the free space: its size covers its header, no
 * padding). A variable-length string in an attribute is, on disk: its length (4 bytes), the
 * collection's address (an address field) and the object's index (4 bytes). libhdf5 1.10
 * (Debian 12) checks none of it in a release build.
 *
 * The attribute's raw bytes are only reachable inside libhdf5's type conversion, so kerac
 * registers a conversion function for variable-length strings from a file into memory that,
 * during kc__h5_read_vlen_strings, checks every string's reference and then hands the same
 * call to libhdf5's own conversion (found with H5Tfind beforehand). */
#include <stdbool.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_gheap.h"
#include "h5util.h"

#define GCOL_MAGIC "GCOL"
#define CONV_NAME "kerac checked vlen string"

typedef struct byte_src {
    const uint8_t *mem; /* (len) the file in memory, or NULL */
    int fd;             /* else the file */
    uint64_t len;
    unsigned lsize;     /* bytes of a length field (8 in every Keras file) */
} byte_src;

static bool src_read(const byte_src *b, uint64_t off, uint8_t *dst, size_t n) {
    if (off > b->len || n > b->len - off) return false;
    if (b->mem) {
        memcpy(dst, b->mem + off, n);
        return true;
    }
    return pread(b->fd, dst, n, (off_t)off) == (ssize_t)n;
}

static uint64_t le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* Walks the collection at `off` as libhdf5 does. Returns false when libhdf5 would loop
 * forever or read past it; else true, with *size the object `want`'s size (-1: absent; the
 * last one wins, as in libhdf5) when want > 0. *loadable is false when libhdf5 refuses to
 * load the collection at all (wrong version or size). */
static bool gcol_walk(const byte_src *b, uint64_t off, unsigned want, int64_t *size, bool *loadable) {
    uint8_t h[8 + 8], o[8 + 8];
    const unsigned hdr = 8 + b->lsize;
    *size = -1;
    *loadable = false;
    if (!src_read(b, off, h, hdr) || memcmp(h, GCOL_MAGIC, 4) != 0 || h[4] != 1) return true;
    uint64_t csize = le(h + 8, b->lsize);
    if (csize < hdr || csize > b->len - off) return true;
    *loadable = true;
    uint64_t end = off + csize;
    for (uint64_t p = off + hdr; p < end;) {
        if (end - p < hdr) return true; /* free space too small for an object header */
        if (!src_read(b, p, o, hdr)) return true;
        unsigned idx = (unsigned)le(o, 2);
        uint64_t osize = le(o + 8, b->lsize);
        if (idx != 0) { /* an object: its data must fit in the collection */
            if (osize > end - p - hdr) return false;
            if (idx == want) *size = (int64_t)osize;
            p += hdr + ((osize + 7) & ~(uint64_t)7);
        } else { /* the free space: libhdf5 steps by its size, header included (0: forever) */
            if (osize < hdr) return false;
            p += osize;
        }
    }
    return true;
}

static int64_t find_damaged(const byte_src *b) {
    enum { CHUNK = 1 << 20 };
    uint8_t *buf = b->mem ? NULL : malloc(CHUNK);
    if (!b->mem && !buf) return -1; /* out of memory: skip the check */
    int64_t hit = -1, sz;
    bool loadable;
    for (uint64_t at = 0; at < b->len && hit < 0;) {
        size_t n = b->len - at < CHUNK ? (size_t)(b->len - at) : CHUNK;
        const uint8_t *win = b->mem ? b->mem + at : buf;
        if (!b->mem && !src_read(b, at, buf, n)) break;
        for (const uint8_t *q = win, *e = win + n; hit < 0 && (q = memchr(q, 'G', (size_t)(e - q))) != NULL; q++)
            if (e - q >= 4 && memcmp(q, GCOL_MAGIC, 4) == 0 && !gcol_walk(b, at + (uint64_t)(q - win), 0, &sz, &loadable))
                hit = (int64_t)(at + (uint64_t)(q - win));
        if (n < CHUNK) break;
        at += n - 3; /* "GCOL" across the chunk boundary */
    }
    free(buf);
    return hit;
}

int64_t kc__h5_find_damaged_gcol_fd(int fd, uint64_t len) {
    byte_src b = {NULL, fd, len, 8};
    return find_damaged(&b);
}

int64_t kc__h5_find_damaged_gcol_mem(const void *mem, uint64_t len) {
    byte_src b = {mem, -1, len, 8};
    return find_damaged(&b);
}

/* ---------------------------------------------------------------- checked vlen reads */

typedef struct gheap_ctx {
    byte_src src;
    uint64_t base; /* where address 0 is (after a user block) */
    char why[200]; /* what is damaged, when the check refused */
} gheap_ctx;

static __thread gheap_ctx *g_ctx;
static H5T_conv_t g_lib_conv; /* libhdf5's variable-length conversion */

/* Every string's reference in the buffer of n disk-format elements. */
static bool refs_ok(gheap_ctx *c, size_t esize, size_t n, size_t stride, const uint8_t *buf) {
    const unsigned asize = (unsigned)(esize - 8);
    for (size_t i = 0; i < n; i++) {
        const uint8_t *e = buf + i * (stride ? stride : esize);
        uint64_t len = le(e, 4), addr = le(e + 4, asize);
        unsigned idx = (unsigned)le(e + 4 + asize, 4);
        if (addr == 0) continue; /* no data: libhdf5 reads nothing */
        int64_t size = -1;
        bool loadable = false;
        uint64_t off = c->base + addr;
        if (off < c->base || !gcol_walk(&c->src, off, idx, &size, &loadable) || !loadable) {
            snprintf(c->why, sizeof c->why, "string %zu refers to a global heap collection at byte %llu that is damaged or missing",
                     i, (unsigned long long)off);
            return false;
        }
        if (idx == 0 || size < 0 || (uint64_t)size != len) {
            snprintf(c->why, sizeof c->why,
                     "string %zu refers to object %u of the global heap collection at byte %llu, which %s", i, idx,
                     (unsigned long long)off, size < 0 || idx == 0 ? "it does not hold" : "has another size");
            return false;
        }
    }
    return true;
}

static herr_t checked_conv(hid_t src, hid_t dst, H5T_cdata_t *cd, size_t n, size_t stride, size_t bkg_stride, void *buf,
                           void *bkg, hid_t plist) {
    if (cd->command == H5T_CONV_INIT) {
        /* only disk strings (length + address + index) into C strings (char *) */
        size_t ss = H5Tget_size(src);
        if (H5Tis_variable_str(src) <= 0 || H5Tis_variable_str(dst) <= 0 || H5Tget_size(dst) != sizeof(char *) ||
            ss < 4 + 2 + 4 || ss > 4 + 8 + 4 || ss == sizeof(char *))
            return -1;
    } else if (cd->command == H5T_CONV_CONV && g_ctx && n > 0) {
        if (!buf || !refs_ok(g_ctx, H5Tget_size(src), n, stride, buf)) return -1;
    }
    return g_lib_conv(src, dst, cd, n, stride, bkg_stride, buf, bkg, plist);
}

/* libhdf5's variable-length conversion: what it uses between two variable-length string
 * types (they always convert: their memory may need copying), unless that is its no-op. */
static H5T_conv_t lib_vlen_conv(void) {
    hid_t v = H5Tcopy(H5T_C_S1), fixed = H5Tcopy(H5T_C_S1);
    H5T_conv_t f = NULL, noop = NULL;
    H5T_cdata_t *cd = NULL;
    if (v >= 0 && fixed >= 0 && H5Tset_size(v, H5T_VARIABLE) >= 0) {
        f = H5Tfind(v, v, &cd);
        noop = H5Tfind(fixed, fixed, &cd);
    }
    if (v >= 0) H5Tclose(v);
    if (fixed >= 0) H5Tclose(fixed);
    H5Eclear2(H5E_DEFAULT);
    return f == noop ? NULL : f;
}

/* The file's bytes as libhdf5 reads them: its descriptor (sec2 driver) or its image
 * (core driver). */
static bool file_bytes(hid_t obj, gheap_ctx *c) {
    hid_t f = H5Iget_file_id(obj);
    hid_t fapl = f < 0 ? H5I_INVALID_HID : H5Fget_access_plist(f);
    hid_t fcpl = f < 0 ? H5I_INVALID_HID : H5Fget_create_plist(f);
    hid_t drv = fapl < 0 ? H5I_INVALID_HID : H5Pget_driver(fapl);
    void *h = NULL;
    hsize_t ub = 0, fsize = 0;
    size_t asz = 0, lsz = 0;
    bool ok = fcpl >= 0 && H5Pget_userblock(fcpl, &ub) >= 0 && H5Pget_sizes(fcpl, &asz, &lsz) >= 0 &&
              (lsz == 2 || lsz == 4 || lsz == 8) && H5Fget_vfd_handle(f, fapl, &h) >= 0 && h &&
              H5Fget_filesize(f, &fsize) >= 0;
    struct stat sb;
    if (ok && drv == H5FD_SEC2) {
        int fd = *(int *)h;
        ok = fstat(fd, &sb) == 0;
        c->src = (byte_src){NULL, fd, ok ? (uint64_t)sb.st_size : 0, (unsigned)lsz};
    } else if (ok && drv == H5FD_CORE) {
        c->src = (byte_src){*(const uint8_t **)h, -1, (uint64_t)fsize, (unsigned)lsz};
        ok = c->src.mem != NULL;
    } else {
        ok = false;
    }
    c->base = ub;
    if (fcpl >= 0) H5Pclose(fcpl);
    if (fapl >= 0) H5Pclose(fapl);
    if (f >= 0) H5Fclose(f);
    return ok;
}

/* Registered once, for the life of the process: with no read of kerac's under way the
 * function only hands each call on, so other HDF5 users in the process see libhdf5's
 * behaviour. (Registering around every read would cost a pass over libhdf5's whole table of
 * conversion paths each time, and that table only grows.) */
static bool register_once(void) {
    static bool done;
    if (done) return true;
    g_lib_conv = lib_vlen_conv();
    hid_t t = H5Tcopy(H5T_C_S1);
    done = g_lib_conv && t >= 0 && H5Tset_size(t, H5T_VARIABLE) >= 0 &&
           H5Tregister(H5T_PERS_SOFT, CONV_NAME, t, t, checked_conv) >= 0;
    if (t >= 0) H5Tclose(t);
    H5Eclear2(H5E_DEFAULT);
    return done;
}

int kc__h5_read_vlen_strings(hid_t a, hid_t mt, char **out, char *why, size_t n) {
    gheap_ctx c = {.why = ""};
    if (!register_once() || !file_bytes(a, &c)) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(why, n, "kerac cannot check the variable-length strings of this HDF5 file (its driver or sizes)");
        return -1;
    }
    g_ctx = &c;
    herr_t e = H5Aread(a, mt, out);
    g_ctx = NULL;
    if (e < 0 && c.why[0]) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(why, n, "%s", c.why);
    } else if (e < 0) {
        kc__h5_reason(why, n);
    }
    return e < 0 ? -1 : 0;
}
