/* image_cache.c — a folder of images cached in a file (like tf.data's cache(filename)): the
 * images are decoded once by the pool of threads straight into a memory-mapped file (the
 * kernel writes pages out as they fill, so datasets larger than memory work), then read back
 * memory-mapped while training. A later run with the same files (names, labels, sizes,
 * modification times, in the same order) and the same decoding options maps the file as it
 * is and decodes nothing.
 *
 * Layout: a 64-byte header, the kept examples (n_kept, h, w, c) float32, then the list
 * indices of the kept examples (n_kept int64; fewer than the files when bad ones were
 * skipped). The file is written under a temporary name and renamed into place. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

#define CACHE_MAGIC "KCIMGC01"
#define CACHE_HEADER 64

typedef struct cache_header {
    char magic[8];
    uint64_t fingerprint; /* of the files and the decoding options */
    int64_t n_all;        /* files listed */
    int64_t n_kept;       /* examples stored */
    int64_t e;            /* floats per example */
    int64_t reserved[3];
} cache_header;

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* The files (names, labels, sizes, times, order) and the options that change the pixels. */
static uint64_t fingerprint(const kc_img_meta *m) {
    const kc_image_opts *o = &m->opts;
    int32_t k[9] = {o->height, o->width, (int32_t)o->color_mode, (int32_t)o->interpolation, o->crop_to_aspect_ratio,
                    o->pad_to_aspect_ratio, o->dct_scaling, o->skip_bad_images, 1 /* format */};
    uint64_t h = fnv(14695981039346656037ull, k, sizeof k);
    h = fnv(h, &o->max_pixels, sizeof o->max_pixels);
    char path[4096];
    for (int64_t i = 0; i < m->list.n; i++) {
        h = fnv(h, m->list.files[i], strlen(m->list.files[i]) + 1);
        h = fnv(h, &m->list.labels[i], sizeof m->list.labels[i]);
        snprintf(path, sizeof path, "%s/%s", m->dir, m->list.files[i]);
        struct stat sb;
        int64_t t[3] = {-1, -1, -1};
        if (stat(path, &sb) == 0) {
            t[0] = (int64_t)sb.st_size;
            t[1] = (int64_t)sb.st_mtim.tv_sec;
            t[2] = (int64_t)sb.st_mtim.tv_nsec;
        }
        h = fnv(h, t, sizeof t);
    }
    return h;
}

/* Keep only the list entries kept[0..n_kept) (ascending list indices). */
static void keep_only(kc_img_meta *m, const int64_t *kept, int64_t n_kept) {
    kc_img_list *l = &m->list;
    int64_t k = 0;
    for (int64_t i = 0; i < l->n; i++) {
        if (k < n_kept && kept[k] == i) {
            l->files[k] = l->files[i];
            l->labels[k++] = l->labels[i];
        } else {
            free(l->files[i]);
        }
    }
    m->skipped = l->n - n_kept;
    l->n = n_kept;
}

/* An existing cache file for these files and options: 1 (list trimmed to what it holds), 0
 * when there is none or it does not match. */
static int try_reuse(kc_img_meta *m, uint64_t fp, int64_t e) {
    FILE *f = fopen(m->cache_file, "rb");
    if (!f) return 0;
    cache_header h;
    struct stat sb;
    int ok = fread(&h, sizeof h, 1, f) == 1 && memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.fingerprint == fp &&
             h.n_all == m->list.n && h.e == e && h.n_kept >= 1 && h.n_kept <= h.n_all && fstat(fileno(f), &sb) == 0 &&
             (int64_t)sb.st_size == CACHE_HEADER + h.n_kept * e * 4 + h.n_kept * 8;
    int64_t *kept = ok ? malloc((size_t)h.n_kept * sizeof *kept) : NULL;
    ok = kept && fseek(f, (long)(CACHE_HEADER + h.n_kept * e * 4), SEEK_SET) == 0 &&
         fread(kept, sizeof *kept, (size_t)h.n_kept, f) == (size_t)h.n_kept;
    for (int64_t i = 0; ok && i < h.n_kept; i++) ok = kept[i] >= (i ? kept[i - 1] + 1 : 0) && kept[i] < h.n_all;
    fclose(f);
    if (ok) keep_only(m, kept, h.n_kept);
    free(kept);
    return ok;
}

/* Decode every file into a new cache file (a temporary name renamed into place). */
static kc_status build(kc_img_meta *m, uint64_t fp, int64_t e) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp-%ld", m->cache_file, (long)getpid());
    const int64_t n = m->list.n;
    const size_t data = (size_t)n * (size_t)e * 4, len = CACHE_HEADER + data + (size_t)n * 8;
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return kc__fail(KC_STATUS_IO, "cannot create the image cache '%s': %s; pick a writable place (--cache FILE)",
                        tmp, strerror(errno));
    int64_t *kept = malloc((size_t)n * sizeof *kept);
    void *map = MAP_FAILED;
    kc_status s = KC_STATUS_OK;
    if (!kept) s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    else if (ftruncate(fd, (off_t)len) != 0 ||
             (map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        s = kc__fail(KC_STATUS_IO, "cannot make the image cache '%s' of %.1f MiB: %s", tmp, (double)len / 1048576.0,
                     strerror(errno));
    if (!s) s = kc__image_decode_list(m, (float *)(void *)((uint8_t *)map + CACHE_HEADER), kept);
    if (!s) {
        const int64_t nk = m->list.n; /* after skipping */
        cache_header h = {.fingerprint = fp, .n_all = n, .n_kept = nk, .e = e};
        memcpy(h.magic, CACHE_MAGIC, 8);
        memcpy(map, &h, sizeof h);
        memcpy((uint8_t *)map + CACHE_HEADER + (size_t)nk * (size_t)e * 4, kept, (size_t)nk * 8);
        if (msync(map, len, MS_SYNC) != 0 || ftruncate(fd, (off_t)(CACHE_HEADER + (size_t)nk * ((size_t)e * 4 + 8))))
            s = kc__fail(KC_STATUS_IO, "cannot write the image cache '%s': %s", tmp, strerror(errno));
    }
    if (map != MAP_FAILED) munmap(map, len);
    if (close(fd) != 0 && !s) s = kc__fail(KC_STATUS_IO, "cannot write the image cache '%s': %s", tmp, strerror(errno));
    if (!s && rename(tmp, m->cache_file) != 0)
        s = kc__fail(KC_STATUS_IO, "cannot rename '%s' to '%s': %s", tmp, m->cache_file, strerror(errno));
    if (s) unlink(tmp);
    free(kept);
    return s;
}

kc_status kc__image_cache_file(kc_img_meta *m, kc_shape shape, const char *source, kc_ds_storage **out) {
    const int64_t e = (int64_t)shape.dim[0] * shape.dim[1] * shape.dim[2];
    const uint64_t fp = fingerprint(m);
    m->cache_reused = try_reuse(m, fp, e);
    if (!m->cache_reused) KC_TRY(build(m, fp, e));
    kc_ds_storage *st = NULL;
    KC_TRY(kc__ds_storage_create_mapped(KC_DS_F32, m->list.n, shape, source, m->cache_file, CACHE_HEADER, &st));
    memcpy(st->y, m->list.labels, (size_t)m->list.n * sizeof(int32_t));
    *out = st;
    return KC_STATUS_OK;
}
