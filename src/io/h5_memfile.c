/* h5_memfile.c — new HDF5 files made in memory (HDF5's core driver, no backing store) and
 * handed to the writer as bytes, so that writing them to disk — and its failures: a full
 * disk, a quota, a size limit — is kerac's own (atomic_file.c), with its own errno.
 *
 * The bytes are taken at H5Fclose, when the file is complete: the core driver gives its
 * buffer back through the file image callbacks, and the file's length is the end-of-file
 * address in its superblock (the buffer is larger: it grows in increments). H5Fget_file_image
 * on the open file is no substitute: with 1.8 object headers (big_attrs) libhdf5 1.10.8
 * gives an image whose metadata checksums do not match. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5util.h"

typedef struct mem_capture {
    void *mem;   /* the buffer, kept at close */
    size_t size; /* its allocated size */
    hid_t file;
    struct mem_capture *next;
} mem_capture;

/* The open files made here (the callbacks' data cannot be had back from the file). */
static mem_capture *g_open;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void track(mem_capture *c) {
    pthread_mutex_lock(&g_lock);
    c->next = g_open;
    g_open = c;
    pthread_mutex_unlock(&g_lock);
}

static mem_capture *untrack(hid_t file) {
    pthread_mutex_lock(&g_lock);
    mem_capture **pp = &g_open, *c;
    while ((c = *pp) != NULL && c->file != file) pp = &c->next;
    if (c) *pp = c->next;
    pthread_mutex_unlock(&g_lock);
    return c;
}

static void *cap_malloc(size_t size, H5FD_file_image_op_t op, void *u) {
    (void)op;
    void *p = malloc(size);
    if (p) ((mem_capture *)u)->size = size;
    return p;
}

static void *cap_memcpy(void *dst, const void *src, size_t size, H5FD_file_image_op_t op, void *u) {
    (void)op;
    (void)u;
    return memcpy(dst, src, size);
}

static void *cap_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *u) {
    (void)op;
    void *p = realloc(ptr, size);
    if (p) ((mem_capture *)u)->size = size;
    return p;
}

static herr_t cap_free(void *ptr, H5FD_file_image_op_t op, void *u) {
    mem_capture *c = u;
    if (op == H5FD_FILE_IMAGE_OP_FILE_CLOSE && ptr && !c->mem) c->mem = ptr;
    else free(ptr);
    return 0;
}

static void *cap_udata_copy(void *u) { return u; } /* one capture, shared by the property copies */
static herr_t cap_udata_free(void *u) {
    (void)u;
    return 0;
}

static unsigned long g_counter;

kc_status kc__h5_create_file(size_t expected_bytes, bool big_attrs, hid_t *out) {
    char why[400], name[96];
    *out = H5I_INVALID_HID;
    kc__h5_quiet();
    size_t inc = expected_bytes + (1u << 16);
    if (inc > ((size_t)1 << 30)) inc = (size_t)1 << 30;
    mem_capture *c = calloc(1, sizeof *c);
    if (!c) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for a new HDF5 file");
    H5FD_file_image_callbacks_t cb = {cap_malloc, cap_memcpy, cap_realloc, cap_free, cap_udata_copy, cap_udata_free, c};
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0 || H5Pset_fapl_core(fapl, inc, 0) < 0 || H5Pset_file_image_callbacks(fapl, &cb) < 0 ||
        (big_attrs && H5Pset_libver_bounds(fapl, H5F_LIBVER_V18, H5F_LIBVER_LATEST) < 0)) {
        kc__h5_reason(why, sizeof why);
        if (fapl >= 0) H5Pclose(fapl);
        free(c);
        return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot set up a file in memory (%s)", why);
    }
    snprintf(name, sizeof name, "/nonexistent-kerac-memory/new-%ld-%lu.h5", (long)getpid(),
             __atomic_fetch_add(&g_counter, 1, __ATOMIC_RELAXED));
    hid_t h = H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (h < 0) kc__h5_reason(why, sizeof why);
    H5Pclose(fapl);
    if (h < 0) {
        free(c);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "HDF5: cannot make a file in memory (%s)", why);
    }
    c->file = h;
    track(c);
    *out = h;
    return KC_STATUS_OK;
}

static uint64_t rd_le(const uint8_t *p, unsigned n) {
    uint64_t v = 0;
    for (unsigned i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* The file's length: base address + end-of-file address, from its superblock (versions 0
 * and 1: after the base and free-space addresses; 2 and 3: after the base and extension
 * addresses); 0 when it cannot be read. */
static uint64_t superblock_end(const uint8_t *p, size_t n) {
    if (n < 48 || memcmp(p, "\x89HDF\r\n\x1a\n", 8) != 0) return 0;
    unsigned ver = p[8], sa = ver >= 2 ? p[9] : p[13];
    size_t at = ver == 0 ? 24 : ver == 1 ? 28 : 12;
    if (ver > 3 || sa != 8 || at + 3 * 8 > n) return 0;
    return rd_le(p + at, 8) + rd_le(p + at + 16, 8);
}

kc_status kc__h5_close_image(hid_t file, void **data, size_t *len) {
    char why[400];
    *data = NULL;
    *len = 0;
    mem_capture *c = untrack(file);
    herr_t e = H5Fclose(file);
    if (e < 0 || !c || !c->mem) {
        kc__h5_reason(why, sizeof why);
        if (c) free(c->mem);
        free(c);
        return kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot finish a file made in memory (%s)", c ? why : "not one");
    }
    uint64_t end = superblock_end(c->mem, c->size);
    *data = c->mem;
    *len = end > 0 && end <= c->size ? (size_t)end : c->size;
    free(c);
    return KC_STATUS_OK;
}

void kc__h5_discard(hid_t file) {
    mem_capture *c = untrack(file);
    H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    if (c) free(c->mem);
    free(c);
}
