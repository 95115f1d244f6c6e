/* h5util.c — small HDF5 helpers for the Keras file formats: quiet error handling, files
 * held in memory (the core driver), string attributes in every form h5py writes them
 * (fixed- and variable-length, scalar and 1-D, Keras's name0/name1 split), and float32
 * weight datasets with a shape check. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "h5_gheap.h"
#include "h5util.h"

/* Attributes Keras splits into name0, name1, ... (HDF5's object header limit). */
#define KC_H5_ATTR_LIMIT 64512
/* In-memory files get a name no file can have: the core driver refuses an image whose
 * name exists on disk, and HDF5 treats two open files with one name as the same file. */
#define KC_H5_IMAGE_DIR "/nonexistent-kerac-memory"

void kc__h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

void kc__h5_silence_begin(kc__h5_silence *q) {
    H5E_auto2_t func = NULL;
    void *data = NULL;
    q->saved = H5Eget_auto2(H5E_DEFAULT, &func, &data) >= 0;
    q->func = (void (*)(void))func;
    q->data = data;
    kc__h5_quiet();
}

void kc__h5_silence_end(const kc__h5_silence *q) {
    if (q->saved) H5Eset_auto2(H5E_DEFAULT, (H5E_auto2_t)q->func, q->data);
}

typedef struct h5_walk {
    char outer[160], inner[160];
    int n;
} h5_walk;

static herr_t walk_cb(unsigned n, const H5E_error2_t *e, void *data) {
    h5_walk *w = data;
    const char *d = e && e->desc && e->desc[0] ? e->desc : NULL;
    if (!d) return 0;
    if (w->n == 0) snprintf(w->inner, sizeof w->inner, "%s", d); /* upward: innermost first */
    snprintf(w->outer, sizeof w->outer, "%s", d);
    w->n++;
    (void)n;
    return 0;
}

const char *kc__h5_reason(char *buf, size_t n) {
    h5_walk w = {{0}, {0}, 0};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, walk_cb, &w);
    H5Eclear2(H5E_DEFAULT);
    if (w.n == 0) snprintf(buf, n, "unknown HDF5 error");
    else if (w.n == 1 || strcmp(w.outer, w.inner) == 0) snprintf(buf, n, "%s", w.inner);
    else snprintf(buf, n, "%s: %s", w.outer, w.inner);
    return buf;
}

static const char *obj_name(hid_t obj, char *buf, size_t n) {
    ssize_t len = H5Iget_name(obj, buf, n);
    if (len <= 0) snprintf(buf, n, "/");
    return buf;
}

/* ---------------------------------------------------------------- files */

static unsigned long g_image_counter;

static void image_name(char *buf, size_t n) {
    snprintf(buf, n, KC_H5_IMAGE_DIR "/%ld-%lu.h5", (long)getpid(), __atomic_fetch_add(&g_image_counter, 1, __ATOMIC_RELAXED));
}

kc_status kc__h5_open_path(const char *path, hid_t *out) {
    char why[400];
    *out = H5I_INVALID_HID;
    kc__h5_quiet();
    FILE *f = fopen(path, "rb");
    if (!f) return kc__fail(KC_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
    char sig[8] = {0};
    size_t got = fread(sig, 1, sizeof sig, f);
    struct stat sb;
    int64_t bad = -1;
    if (fstat(fileno(f), &sb) == 0 && S_ISREG(sb.st_mode)) bad = kc__h5_find_damaged_gcol_fd(fileno(f), (uint64_t)sb.st_size);
    fclose(f);
    if (bad >= 0)
        return kc__fail(KC_STATUS_BAD_FILE,
                        "'%s' is a damaged HDF5 file: the global heap collection at byte %lld holds an object whose "
                        "size does not fit it, which libhdf5 cannot read safely",
                        path, (long long)bad);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot make file access properties (%s)", kc__h5_reason(why, sizeof why));
#if H5_VERSION_GE(1, 10, 7)
    H5Pset_file_locking(fapl, 1, 1); /* lock where the file system can; never fail for it */
#endif
    hid_t h = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (h < 0) kc__h5_reason(why, sizeof why); /* before any other call clears the stack */
    H5Pclose(fapl);
    if (h < 0) {
        if (got < 8 || memcmp(sig, "\x89HDF\r\n\x1a\n", 8) != 0)
            return kc__fail(KC_STATUS_BAD_FILE, "'%s' is not an HDF5 file (%s); a Keras .h5 file starts with the HDF5 signature",
                            path, why);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s' is a damaged HDF5 file: %s", path, why);
    }
    *out = h;
    return KC_STATUS_OK;
}

kc_status kc__h5_open_image(const void *data, size_t len, hid_t *out) {
    char why[400], name[96];
    *out = H5I_INVALID_HID;
    kc__h5_quiet();
    if (len == 0) return kc__fail(KC_STATUS_BAD_FILE, "the HDF5 file is empty (0 bytes)");
    int64_t bad = kc__h5_find_damaged_gcol_mem(data, len);
    if (bad >= 0)
        return kc__fail(KC_STATUS_BAD_FILE,
                        "it is a damaged HDF5 file: the global heap collection at byte %lld holds an object whose size "
                        "does not fit it, which libhdf5 cannot read safely",
                        (long long)bad);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, 1 << 16, 0) < 0 || H5Pset_file_image(fapl, (void *)data, len) < 0) {
        kc__h5_reason(why, sizeof why);
        if (fapl >= 0) H5Pclose(fapl);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "HDF5: cannot hold a %zu-byte file in memory (%s)", len, why);
    }
    image_name(name, sizeof name);
    hid_t h = H5Fopen(name, H5F_ACC_RDONLY, fapl);
    if (h < 0) kc__h5_reason(why, sizeof why);
    H5Pclose(fapl);
    if (h < 0) {
        if (len < 8 || memcmp(data, "\x89HDF\r\n\x1a\n", 8) != 0)
            return kc__fail(KC_STATUS_BAD_FILE, "it is not an HDF5 file (%s)", why);
        return kc__fail(KC_STATUS_BAD_FILE, "it is a damaged HDF5 file (%s)", why);
    }
    *out = h;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- objects */

/* Every prefix of a relative path must exist for H5Lexists to answer instead of failing. */
bool kc__h5_exists(hid_t loc, const char *path) {
    char buf[1024];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) return false;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char c = buf[i];
        buf[i] = '\0';
        htri_t e = H5Lexists(loc, buf, H5P_DEFAULT);
        buf[i] = c;
        if (e <= 0) {
            H5Eclear2(H5E_DEFAULT);
            return false;
        }
    }
    return true;
}

static H5I_type_t object_type(hid_t loc, const char *path) {
    if (!kc__h5_exists(loc, path)) return H5I_BADID;
    hid_t o = H5Oopen(loc, path, H5P_DEFAULT);
    if (o < 0) {
        H5Eclear2(H5E_DEFAULT);
        return H5I_BADID;
    }
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    return t;
}

bool kc__h5_is_group(hid_t loc, const char *path) { return object_type(loc, path) == H5I_GROUP; }

bool kc__h5_has_attr(hid_t obj, const char *name) {
    htri_t e = H5Aexists(obj, name);
    if (e < 0) H5Eclear2(H5E_DEFAULT);
    return e > 0;
}

long kc__h5_group_size(hid_t loc, const char *path) {
    if (!kc__h5_is_group(loc, path)) return -1;
    hid_t g = H5Gopen2(loc, path, H5P_DEFAULT);
    if (g < 0) {
        H5Eclear2(H5E_DEFAULT);
        return -1;
    }
    H5G_info_t info;
    long n = H5Gget_info(g, &info) < 0 ? -1 : (long)info.nlinks;
    H5Gclose(g);
    if (n < 0) H5Eclear2(H5E_DEFAULT);
    return n;
}

static hid_t intermediate_lcpl(void) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
    return lcpl;
}

kc_status kc__h5_make_group(hid_t loc, const char *path, hid_t *out) {
    char why[400];
    hid_t lcpl = intermediate_lcpl();
    hid_t g = lcpl < 0 ? H5I_INVALID_HID : H5Gcreate2(loc, path, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    if (g < 0) kc__h5_reason(why, sizeof why);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (g < 0) return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot create group '%s' (%s)", path, why);
    if (out) *out = g;
    else H5Gclose(g);
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- string attributes */

void kc__strlist_free(kc__strlist *l) {
    if (!l) return;
    for (int i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static kc_status strlist_push(kc__strlist *l, const char *s, size_t len) {
    char **v = realloc(l->v, (size_t)(l->n + 1) * sizeof *v);
    if (!v) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading string attributes");
    l->v = v;
    char *c = malloc(len + 1);
    if (!c) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading string attributes");
    memcpy(c, s, len);
    c[len] = '\0';
    l->v[l->n++] = c;
    return KC_STATUS_OK;
}

/* Append the strings of one attribute to l. */
static kc_status read_attr_strings(hid_t obj, const char *name, kc__strlist *l) {
    char why[400], on[256];
    kc_status s = KC_STATUS_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) {
        kc__h5_reason(why, sizeof why);
        return kc__fail(KC_STATUS_BAD_FILE, "cannot open attribute '%s' of '%s' (%s)", name, obj_name(obj, on, sizeof on),
                        why);
    }
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a), mt = H5I_INVALID_HID;
    void *buf = NULL;
    hssize_t count = 0;
    if (ft < 0 || sp < 0) {
        kc__h5_reason(why, sizeof why);
        s = kc__fail(KC_STATUS_BAD_FILE, "cannot read attribute '%s' of '%s' (%s)", name, obj_name(obj, on, sizeof on),
                     why);
        goto done;
    }
    H5S_class_t sc = H5Sget_simple_extent_type(sp);
    int nd = H5Sget_simple_extent_ndims(sp);
    count = sc == H5S_NULL ? 0 : H5Sget_simple_extent_npoints(sp);
    if (nd < 0 || nd > 1 || count < 0 || count > (1 << 24)) {
        s = kc__fail(KC_STATUS_BAD_FILE, "attribute '%s' of '%s' is not a list of strings (%d dimensions)", name,
                     obj_name(obj, on, sizeof on), nd);
        goto done;
    }
    if (count == 0) goto done; /* Keras writes an empty list as an empty float64 array */
    if (H5Tget_class(ft) != H5T_STRING) {
        s = kc__fail(KC_STATUS_BAD_FILE, "attribute '%s' of '%s' holds %lld values that are not strings", name,
                     obj_name(obj, on, sizeof on), (long long)count);
        goto done;
    }
    mt = H5Tcopy(H5T_C_S1);
    H5T_cset_t cset = H5Tget_cset(ft);
    if (mt < 0 || (cset >= 0 && H5Tset_cset(mt, cset) < 0)) {
        s = kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot make a string type (%s)", kc__h5_reason(why, sizeof why));
        goto done;
    }
    if (H5Tis_variable_str(ft) > 0) {
        char **p = calloc((size_t)count, sizeof *p);
        if (!p || H5Tset_size(mt, H5T_VARIABLE) < 0) {
            free(p);
            s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading attribute '%s'", name);
            goto done;
        }
        buf = p;
        if (kc__h5_read_vlen_strings(a, mt, p, why, sizeof why) < 0) {
            s = kc__fail(KC_STATUS_BAD_FILE, "cannot read attribute '%s' of '%s' (%s)", name, obj_name(obj, on, sizeof on),
                         why);
            goto done;
        }
        for (hssize_t i = 0; i < count && s == KC_STATUS_OK; i++) s = strlist_push(l, p[i] ? p[i] : "", p[i] ? strlen(p[i]) : 0);
        H5Dvlen_reclaim(mt, sp, H5P_DEFAULT, p);
    } else {
        size_t width = H5Tget_size(ft);
        if (width == 0 || width > (1u << 26) || (size_t)count * width > (1u << 30)) {
            s = kc__fail(KC_STATUS_BAD_FILE, "attribute '%s' of '%s' has a bad string size %zu", name,
                         obj_name(obj, on, sizeof on), width);
            goto done;
        }
        H5T_str_t pad = H5Tget_strpad(ft);
        char *p = calloc((size_t)count, width);
        if (!p || H5Tset_size(mt, width) < 0 || H5Tset_strpad(mt, pad) < 0) {
            free(p);
            s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading attribute '%s'", name);
            goto done;
        }
        buf = p;
        if (H5Aread(a, mt, p) < 0) {
            kc__h5_reason(why, sizeof why);
            s = kc__fail(KC_STATUS_BAD_FILE, "cannot read attribute '%s' of '%s' (%s)", name, obj_name(obj, on, sizeof on),
                         why);
            goto done;
        }
        for (hssize_t i = 0; i < count && s == KC_STATUS_OK; i++) {
            const char *e = p + (size_t)i * width;
            size_t len = strnlen(e, width);
            if (pad == H5T_STR_SPACEPAD)
                while (len > 0 && e[len - 1] == ' ') len--;
            s = strlist_push(l, e, len);
        }
    }
done:
    free(buf); /* the fixed-width text, or the pointer array of reclaimed vlen strings */
    if (mt >= 0) H5Tclose(mt);
    if (ft >= 0) H5Tclose(ft);
    if (sp >= 0) H5Sclose(sp);
    H5Aclose(a);
    return s;
}

kc_status kc__h5_get_strings(hid_t obj, const char *name, kc__strlist *out, bool *found) {
    out->v = NULL;
    out->n = 0;
    *found = false;
    if (kc__h5_has_attr(obj, name)) {
        *found = true;
        kc_status s = read_attr_strings(obj, name, out);
        if (s != KC_STATUS_OK) kc__strlist_free(out);
        return s;
    }
    char part[256];
    for (int k = 0;; k++) {
        snprintf(part, sizeof part, "%s%d", name, k);
        if (!kc__h5_has_attr(obj, part)) break;
        *found = true;
        kc_status s = read_attr_strings(obj, part, out);
        if (s != KC_STATUS_OK) {
            kc__strlist_free(out);
            return s;
        }
    }
    return KC_STATUS_OK;
}

kc_status kc__h5_get_string(hid_t obj, const char *name, char **out) {
    char on[256];
    *out = NULL;
    if (!kc__h5_has_attr(obj, name)) return KC_STATUS_OK;
    kc__strlist l = {0};
    KC_TRY(read_attr_strings(obj, name, &l));
    if (l.n != 1) {
        int n = l.n;
        kc__strlist_free(&l);
        return kc__fail(KC_STATUS_BAD_FILE, "attribute '%s' of '%s' holds %d strings; expected one", name,
                        obj_name(obj, on, sizeof on), n);
    }
    *out = l.v[0];
    free(l.v);
    return KC_STATUS_OK;
}

static kc_status write_attr(hid_t obj, const char *name, hid_t type, hid_t space, const void *data) {
    char why[400], on[256];
    hid_t a = type < 0 || space < 0 ? H5I_INVALID_HID : H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = a < 0 ? -1 : H5Awrite(a, type, data);
    if (e < 0) kc__h5_reason(why, sizeof why);
    if (a >= 0) H5Aclose(a);
    if (e < 0)
        return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot write attribute '%s' of '%s' (%s)", name,
                        obj_name(obj, on, sizeof on), why);
    return KC_STATUS_OK;
}

kc_status kc__h5_put_vlen_string(hid_t obj, const char *name, const char *value) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0)) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    hid_t sp = H5Screate(H5S_SCALAR);
    kc_status s = write_attr(obj, name, t, sp, &value);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    return s;
}

static hid_t fixed_string_type(size_t width) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, width ? width : 1) < 0 || H5Tset_strpad(t, H5T_STR_NULLPAD) < 0 ||
                   H5Tset_cset(t, H5T_CSET_ASCII) < 0)) {
        H5Tclose(t);
        t = H5I_INVALID_HID;
    }
    return t;
}

kc_status kc__h5_put_fixed_string(hid_t obj, const char *name, const char *value) {
    size_t len = strlen(value);
    hid_t t = fixed_string_type(len);
    hid_t sp = H5Screate(H5S_SCALAR);
    char one = '\0';
    kc_status s = write_attr(obj, name, t, sp, len ? (const void *)value : &one);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    return s;
}

/* strings [first, first + n) as one fixed-width 1-D attribute */
static kc_status put_fixed_chunk(hid_t obj, const char *name, const char *const *v, int first, int n, size_t width) {
    char *buf = calloc((size_t)n, width);
    if (!buf) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing attribute '%s'", name);
    for (int i = 0; i < n; i++) memcpy(buf + (size_t)i * width, v[first + i], strlen(v[first + i]));
    hid_t t = fixed_string_type(width);
    hsize_t dims[1] = {(hsize_t)n};
    hid_t sp = H5Screate_simple(1, dims, NULL);
    kc_status s = write_attr(obj, name, t, sp, buf);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    free(buf);
    return s;
}

kc_status kc__h5_put_fixed_strings(hid_t obj, const char *name, const char *const *v, int n) {
    if (n == 0) { /* numpy's empty list: float64, shape (0,) */
        hsize_t dims[1] = {0};
        hid_t sp = H5Screate_simple(1, dims, NULL);
        double none = 0;
        kc_status s = write_attr(obj, name, H5T_IEEE_F64LE, sp, &none);
        if (sp >= 0) H5Sclose(sp);
        return s;
    }
    size_t width = 1;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(v[i]);
        if (len > KC_H5_ATTR_LIMIT)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "the name '%.40s...' is longer than %d bytes, too long for HDF5",
                            v[i], KC_H5_ATTR_LIMIT);
        if (len > width) width = len;
    }
    /* as numpy.array_split: k chunks, the first n % k one element longer */
    int k = 1;
    while ((size_t)((n + k - 1) / k) * width > KC_H5_ATTR_LIMIT) k++;
    if (k == 1) return put_fixed_chunk(obj, name, v, 0, n, width);
    int first = 0;
    for (int c = 0; c < k; c++) {
        int len = n / k + (c < n % k ? 1 : 0);
        char part[256];
        snprintf(part, sizeof part, "%s%d", name, c);
        KC_TRY(put_fixed_chunk(obj, part, v, first, len, width));
        first += len;
    }
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- float datasets */

kc_status kc__h5_put_f32(hid_t loc, const char *path, const kc_shape *shape, const float *data) {
    char why[400];
    hsize_t dims[KC_MAX_RANK];
    for (int i = 0; i < shape->rank; i++) dims[i] = (hsize_t)shape->dim[i];
    hid_t sp = shape->rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(shape->rank, dims, NULL);
    hid_t lcpl = intermediate_lcpl();
    hid_t ds = sp < 0 || lcpl < 0 ? H5I_INVALID_HID
                                  : H5Dcreate2(loc, path, H5T_IEEE_F32LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    herr_t e = ds < 0 ? -1 : H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (e < 0) kc__h5_reason(why, sizeof why);
    if (ds >= 0) H5Dclose(ds);
    if (lcpl >= 0) H5Pclose(lcpl);
    if (sp >= 0) H5Sclose(sp);
    if (e < 0) return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot write dataset '%s' (%s)", path, why);
    return KC_STATUS_OK;
}

/* "(3, 3, 1, 8)", "(8,)" as Python prints a shape */
static const char *dims_str(const hsize_t *d, int rank, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(");
    for (int i = 0; i < rank && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (used < n) snprintf(buf + used, n - used, "%s)", rank == 1 ? "," : "");
    return buf;
}

kc_status kc__h5_read_weight(hid_t loc, const char *path, const kc_shape *want, float *dst, const char *what) {
    char why[400], a[96], b[96];
    if (!kc__h5_exists(loc, path))
        return kc__fail(KC_STATUS_BAD_FILE, "%s is missing: there is no dataset '%s'", what, path);
    hid_t ds = H5Dopen2(loc, path, H5P_DEFAULT);
    if (ds < 0)
        return kc__fail(KC_STATUS_BAD_FILE, "%s: '%s' is not a dataset (%s)", what, path, kc__h5_reason(why, sizeof why));
    kc_status s = KC_STATUS_OK;
    hid_t ft = H5Dget_type(ds), sp = H5Dget_space(ds);
    char *dtype = NULL;
    if (kc__h5_get_string(ds, "dtype", &dtype) == KC_STATUS_OK && dtype && strcmp(dtype, "bfloat16") == 0) {
        s = kc__fail(KC_STATUS_UNSUPPORTED, "%s ('%s') is stored as bfloat16; kerac reads float32 weights: save the model in float32",
                     what, path);
        goto done;
    }
    kc__clear_error();
    /* integers: the counters Keras keeps as int weights (Normalization's count), read as floats */
    if (ft < 0 || sp < 0 || (H5Tget_class(ft) != H5T_FLOAT && H5Tget_class(ft) != H5T_INTEGER)) {
        s = kc__fail(KC_STATUS_BAD_FILE, "%s ('%s') does not hold numbers; Keras weights are float32", what,
                     path);
        goto done;
    }
    hsize_t dims[H5S_MAX_RANK], wd[KC_MAX_RANK];
    int nd = H5Sget_simple_extent_ndims(sp);
    if (nd < 0 || nd > H5S_MAX_RANK || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) {
        s = kc__fail(KC_STATUS_BAD_FILE, "%s ('%s') has an unreadable shape (%s)", what, path, kc__h5_reason(why, sizeof why));
        goto done;
    }
    bool same = nd == want->rank;
    for (int i = 0; i < want->rank; i++) {
        wd[i] = (hsize_t)want->dim[i];
        if (same && dims[i] != wd[i]) same = false;
    }
    if (!same) {
        s = kc__fail(KC_STATUS_BAD_FILE, "%s ('%s') has shape %s in the file but %s in the model; the weights do not belong to this model",
                     what, path, dims_str(dims, nd, a, sizeof a), dims_str(wd, want->rank, b, sizeof b));
        goto done;
    }
    if (dst && H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0)
        s = kc__fail(KC_STATUS_BAD_FILE, "%s: cannot read '%s' (%s)", what, path, kc__h5_reason(why, sizeof why));
done:
    free(dtype);
    if (ft >= 0) H5Tclose(ft);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(ds);
    return s;
}
