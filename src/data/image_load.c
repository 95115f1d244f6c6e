/* image_load.c — a folder of images as a dataset: the files in Keras's order (image_dir.c)
 * decoded and resized by a pool of threads (float32, scaled to [0, 1]), either once into the
 * cache (in memory here, in a file in image_cache.c) or, without a cache, again each time the
 * loader gathers a batch (kc__image_decode_batch, called by kc__dataset_gather). Each thread
 * takes the next example from a counter and writes only that example, so the result is the
 * same for any number of threads. A bad file is an error naming it (the lowest bad example,
 * whatever thread saw one first: files after it are not decoded), or with skip_bad_images
 * (which needs a cache) a warning per file, and the examples close up. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"

#define KC_IMAGE_MAX_FILE_BYTES ((int64_t)1 << 31)

int kc__image_channels(kc_color_mode c) { return c == KC_COLOR_GRAYSCALE ? 1 : c == KC_COLOR_RGBA ? 4 : 3; }

kc_image_opts kc__image_opts_resolve(const kc_image_opts *o) {
    kc_image_opts r = {0};
    if (o) r = *o;
    if (r.height <= 0) r.height = KC_IMAGE_DEFAULT_SIZE;
    if (r.width <= 0) r.width = KC_IMAGE_DEFAULT_SIZE;
    if (r.max_pixels <= 0) r.max_pixels = KC_IMAGE_DEFAULT_MAX_PIXELS;
    if (r.threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        r.threads = n > 0 ? (int)KC_MIN(n, 64) : 1;
    }
    return r;
}

static kc_status check_opts(const kc_image_opts *o) {
    if (o->height > 16384 || o->width > 16384)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "image size %d x %d is over 16384 on a side", o->height, o->width);
    if ((unsigned)o->color_mode > KC_COLOR_RGBA || (unsigned)o->interpolation > KC_INTERP_AREA ||
        (unsigned)o->label_mode > KC_LABEL_BINARY)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "image options: unknown color mode, interpolation or label mode");
    if (o->crop_to_aspect_ratio && o->pad_to_aspect_ratio)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be set");
    if (o->class_names && o->num_class_names < 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "class_names is given with num_class_names = %d", o->num_class_names);
    return KC_STATUS_OK;
}

/* The whole file into *buf (grown as needed). */
static kc_status read_file(const char *path, uint8_t **buf, size_t *cap, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return kc__fail(KC_STATUS_IO, "cannot read '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > KC_IMAGE_MAX_FILE_BYTES) {
        fclose(f);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s' is not a regular file of at most 2 GiB", path);
    }
    size_t n = (size_t)sb.st_size;
    if (*cap < n + 1) {
        uint8_t *b = realloc(*buf, n + 1);
        if (!b) {
            fclose(f);
            return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
        }
        *buf = b;
        *cap = n + 1;
    }
    size_t got = fread(*buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (err || got != n) return kc__fail(KC_STATUS_IO, "cannot read '%s': short read", path);
    *len = n;
    return KC_STATUS_OK;
}

/* Decode + resize one file into x (h, w, c) floats in [0, 1]. */
static kc_status load_one(const char *path, const kc_image_opts *o, float *x, uint8_t **buf, size_t *cap, float **tmp,
                          size_t *tmp_n) {
    size_t len = 0;
    KC_TRY(read_file(path, buf, cap, &len));
    kc_img im;
    int wh = o->dct_scaling && !o->crop_to_aspect_ratio && !o->pad_to_aspect_ratio ? o->height : 0;
    int ww = wh ? o->width : 0;
    KC_TRY(kc__image_decode(*buf, len, path, kc__image_channels(o->color_mode), o->max_pixels, wh, ww, &im));
    kc_status s = kc__image_resize(&im, o, x, tmp, tmp_n);
    kc__img_free(&im);
    if (s) return s;
    const size_t e = (size_t)o->height * (size_t)o->width * (size_t)im.c;
    for (size_t k = 0; k < e; k++) x[k] = x[k] / 255.0f;
    return KC_STATUS_OK;
}

kc_status kc_image_load(const char *path, const kc_image_opts *opts, float *x) {
    if (!path || !x) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_image_load: path or x is NULL");
    kc_image_opts o = kc__image_opts_resolve(opts);
    KC_TRY(check_opts(&o));
    uint8_t *buf = NULL;
    float *tmp = NULL;
    size_t cap = 0, tmp_n = 0;
    kc_status s = load_one(path, &o, x, &buf, &cap, &tmp, &tmp_n);
    free(buf);
    free(tmp);
    return s;
}

/* ---------------------------------------------------------------- the pool */

typedef struct pool_job {
    const kc_img_meta *meta;
    const int64_t *idx;   /* (n) list indices to decode; NULL: 0..n-1 */
    int64_t n;
    float *x;             /* (n, e): example k at x + k * e */
    int64_t e;
    atomic_llong next;
    char **err;           /* (n) message of a failed example, else NULL */
    kc_status *status;    /* (n) */
    bool skip;            /* go on after a failure (skip_bad_images) */
    atomic_llong first_bad; /* no skipping: the lowest failed k; later files are not decoded */
} pool_job;

static void *pool_worker(void *arg) {
    pool_job *j = arg;
    uint8_t *buf = NULL;
    float *tmp = NULL;
    size_t cap = 0, tmp_n = 0;
    char path[4096];
    for (;;) {
        int64_t k = atomic_fetch_add(&j->next, 1);
        if (k >= j->n || k > atomic_load(&j->first_bad)) break;
        int64_t i = j->idx ? j->idx[k] : k;
        snprintf(path, sizeof path, "%s/%s", j->meta->dir, j->meta->list.files[i]);
        kc_status s = load_one(path, &j->meta->opts, j->x + k * j->e, &buf, &cap, &tmp, &tmp_n);
        if (s) {
            j->status[k] = s;
            j->err[k] = kc__strdup(kc_last_error());
            long long cur = atomic_load(&j->first_bad);
            while (!j->skip && k < cur && !atomic_compare_exchange_weak(&j->first_bad, &cur, k)) {}
        }
    }
    free(buf);
    free(tmp);
    return NULL;
}

/* Each thread takes the next k from the counter and writes only example k: the result is
 * the same for any number of threads. */
static kc_status run_pool(pool_job *j) {
    atomic_init(&j->next, 0);
    atomic_init(&j->first_bad, j->n);
    j->err = calloc((size_t)j->n, sizeof *j->err);
    j->status = calloc((size_t)j->n, sizeof *j->status);
    if (!j->err || !j->status) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory decoding images");
    int threads = (int)KC_MIN((int64_t)j->meta->opts.threads, j->n);
    pthread_t t[64];
    int started = 0;
    for (; started < threads && started < 64; started++)
        if (pthread_create(&t[started], NULL, pool_worker, j) != 0) break;
    if (started == 0) pool_worker(j); /* no thread could start: decode here */
    for (int i = 0; i < started; i++) pthread_join(t[i], NULL);
    return KC_STATUS_OK;
}

static void pool_free(pool_job *j) {
    for (int64_t k = 0; j->err && k < j->n; k++) free(j->err[k]);
    free(j->err);
    free(j->status);
}

/* The first failure, with what to do about it. */
static kc_status first_failure(const pool_job *j, const char *todo) {
    for (int64_t k = 0; k < j->n; k++)
        if (j->status[k])
            return kc__fail(j->status[k], "%s; nothing was trained on; %s", j->err[k] ? j->err[k] : "decoding failed",
                            todo);
    return KC_STATUS_OK;
}

/* After the pool: the first error, or (skipping) warnings and the bad examples removed. */
static kc_status settle(pool_job *j, kc_img_meta *meta, int64_t *kept_idx) {
    kc_img_list *l = &meta->list;
    int64_t bad = 0, kept = 0;
    for (int64_t i = 0; i < l->n; i++) bad += j->status[i] != KC_STATUS_OK;
    if (bad && !j->skip)
        return first_failure(j, "fix or remove the file, or leave bad images out (--on-bad-image skip)");
    for (int64_t i = 0; i < l->n; i++) {
        if (j->status[i]) {
            kc__log_always(KC_LOG_WARNING, "skipping a bad image: %s", j->err[i] ? j->err[i] : l->files[i]);
            free(l->files[i]);
            continue;
        }
        if (kept != i) {
            memmove(j->x + kept * j->e, j->x + i * j->e, (size_t)j->e * sizeof(float));
            l->files[kept] = l->files[i];
        }
        if (kept_idx) kept_idx[kept] = i;
        l->labels[kept++] = l->labels[i];
    }
    l->n = kept;
    meta->skipped = bad;
    if (bad) kc__log_always(KC_LOG_WARNING, "%lld bad image%s skipped, %lld kept", (long long)bad, bad == 1 ? "" : "s",
                            (long long)kept);
    if (kept == 0) return kc__fail(KC_STATUS_BAD_FILE, "every image in '%s' is bad (%lld skipped)", meta->dir, (long long)bad);
    return KC_STATUS_OK;
}

kc_status kc__image_decode_list(kc_img_meta *meta, float *x, int64_t *kept) {
    pool_job j = {.meta = meta, .n = meta->list.n, .x = x, .e = 0, .skip = meta->opts.skip_bad_images != 0};
    j.e = (int64_t)meta->opts.height * meta->opts.width * kc__image_channels(meta->opts.color_mode);
    kc_status s = run_pool(&j);
    if (!s) s = settle(&j, meta, kept);
    pool_free(&j);
    return s;
}

kc_status kc__image_decode_batch(const kc_img_meta *meta, const int64_t *idx, int64_t n, float *x) {
    pool_job j = {.meta = meta, .idx = idx, .n = n, .x = x};
    j.e = (int64_t)meta->opts.height * meta->opts.width * kc__image_channels(meta->opts.color_mode);
    kc_status s = run_pool(&j);
    if (!s) s = first_failure(&j, "fix or remove the file, or cache the images (--cache or --cache FILE) and "
                                  "leave bad ones out (--on-bad-image skip)");
    pool_free(&j);
    return s;
}

/* Available host memory (MemAvailable), or 0 when unknown. */
static uint64_t available_memory(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1) break;
    if (f) fclose(f);
    return (uint64_t)kb * 1024u;
}

/* opts.cache resolved: AUTO is MEMORY when the decoded images fit in half the available
 * memory, else NONE; MEMORY that does not fit, or skipping bad files without a cache, is
 * refused with what to do. */
static kc_status resolve_cache(kc_img_meta *meta, size_t bytes) {
    kc_image_cache c = meta->opts.cache;
    uint64_t avail = available_memory();
    bool fits = avail == 0 || bytes <= avail / 2;
    char need[64];
    snprintf(need, sizeof need, "%.1f MiB", (double)bytes / 1048576.0);
    if (c == KC_IMAGE_CACHE_AUTO && !fits && !meta->opts.skip_bad_images)
        kc__log_always(KC_LOG_WARNING, "the decoded images of '%s' (%s) do not fit in half the available memory "
                       "(%.1f MiB): they are decoded again every epoch; --cache FILE decodes them once into a file",
                       meta->dir, need, (double)avail / 1048576.0);
    if (c == KC_IMAGE_CACHE_AUTO) c = fits ? KC_IMAGE_CACHE_MEMORY : KC_IMAGE_CACHE_NONE;
    if (c == KC_IMAGE_CACHE_MEMORY && !fits)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "the decoded images of '%s' need %s, over half the available memory "
                        "(%.1f MiB); cache them in a file (--cache FILE) or decode them per batch (--no-cache)",
                        meta->dir, need, (double)avail / 1048576.0);
    if (c == KC_IMAGE_CACHE_FILE && (!meta->opts.cache_file || !*meta->opts.cache_file))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "image cache FILE without a file name (cache_file)");
    if (c == KC_IMAGE_CACHE_NONE && meta->opts.skip_bad_images)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "leaving bad images out (--on-bad-image skip) needs the images "
                        "decoded once before training: cache them (--cache%s, %s of decoded images)",
                        fits ? " or --cache FILE" : " FILE", need);
    meta->cache = c;
    if (c == KC_IMAGE_CACHE_FILE && !(meta->cache_file = kc__strdup(meta->opts.cache_file)))
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    meta->opts.cache = c;
    meta->opts.cache_file = meta->cache_file;
    return KC_STATUS_OK;
}

/* The storage: decoded into memory, into a cache file, or labels only (decoded per batch). */
static kc_status make_storage(kc_img_meta *meta, const char *dir, kc_ds_storage **out) {
    const int c = kc__image_channels(meta->opts.color_mode);
    kc_shape shape = {.rank = 3, .dim = {meta->opts.height, meta->opts.width, c}};
    char source[512];
    snprintf(source, sizeof source, "images:%s", dir);
    const size_t bytes = (size_t)meta->list.n * (size_t)meta->opts.height * (size_t)meta->opts.width * (size_t)c * 4;
    KC_TRY(resolve_cache(meta, bytes));
    if (meta->cache == KC_IMAGE_CACHE_FILE) return kc__image_cache_file(meta, shape, source, out);
    kc_ds_storage *st = NULL;
    if (meta->cache == KC_IMAGE_CACHE_NONE) KC_TRY(kc__ds_storage_create_labels(meta->list.n, shape, source, &st));
    else KC_TRY(kc__ds_storage_create(KC_DS_F32, meta->list.n, shape, source, &st));
    kc_status s = meta->cache == KC_IMAGE_CACHE_MEMORY ? kc__image_decode_list(meta, st->x_f32, NULL) : KC_STATUS_OK;
    if (s) {
        kc__ds_storage_free(st);
        return s;
    }
    st->n = meta->list.n;
    memcpy(st->y, meta->list.labels, (size_t)st->n * sizeof(int32_t));
    *out = st;
    return KC_STATUS_OK;
}

kc_status kc_dataset_open_images(const char *dir, const kc_image_opts *opts, kc_dataset **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_open_images: out is NULL");
    *out = NULL;
    if (!dir || !*dir) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_open_images: no folder given");
    kc_img_meta *meta = kc__calloc(1, sizeof *meta, "image dataset");
    if (!meta) return KC_STATUS_OUT_OF_MEMORY;
    meta->opts = kc__image_opts_resolve(opts);
    meta->opts.cache_file = NULL; /* the caller's string: resolve_cache keeps a copy */
    if (opts) meta->opts.cache_file = opts->cache_file;
    kc_status s = check_opts(&meta->opts);
    if (!s && !(meta->dir = kc__strdup(dir))) s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    if (!s) s = kc__image_list(dir, &meta->opts, &meta->list);
    if (!s && meta->opts.label_mode == KC_LABEL_BINARY && meta->list.num_classes != 2)
        s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "label mode 'binary' needs exactly 2 classes; '%s' has %d; use "
                     "'int' or 'categorical'", dir, meta->list.num_classes);
    kc_ds_storage *st = NULL;
    if (!s) s = make_storage(meta, dir, &st);
    if (s) {
        kc__img_meta_free(meta);
        return s;
    }
    meta->opts.class_names = (const char *const *)meta->list.classes;
    meta->opts.num_class_names = meta->list.num_classes;
    st->img = meta;
    return kc__ds_storage_finish(st, meta->list.num_classes, out);
}

void kc__img_meta_free(kc_img_meta *m) {
    if (!m) return;
    kc__image_list_free(&m->list);
    free(m->dir);
    free(m->cache_file);
    free(m);
}

/* ---------------------------------------------------------------- queries */

kc_status kc_dataset_split_tail(const kc_dataset *d, double fraction, kc_dataset **train, kc_dataset **val) {
    if (!d || !train || !val) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_split_tail: NULL argument");
    *train = *val = NULL;
    if (!(fraction > 0 && fraction < 1))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "validation split %g is not in (0, 1)", fraction);
    int64_t n = kc_dataset_size(d), nv = (int64_t)(fraction * (double)n);
    if (nv < 1 || nv >= n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "validation split %g of %lld examples leaves %lld for validation "
                        "and %lld for training; both need at least one", fraction, (long long)n, (long long)nv,
                        (long long)(n - nv));
    KC_TRY(kc_dataset_slice(d, 0, n - nv, train));
    kc_status s = kc_dataset_slice(d, n - nv, nv, val);
    if (s) {
        kc_dataset_destroy(*train);
        *train = NULL;
    }
    return s;
}

const char *kc_dataset_class_name(const kc_dataset *d, int i) {
    if (!d || !d->st->img || i < 0 || i >= d->st->img->list.num_classes) return NULL;
    return d->st->img->list.classes[i];
}

int kc_dataset_image_opts(const kc_dataset *d, kc_image_opts *out) {
    if (!d || !d->st->img) return 0;
    if (out) *out = d->st->img->opts;
    return 1;
}

int64_t kc_dataset_skipped(const kc_dataset *d) { return d && d->st->img ? d->st->img->skipped : 0; }

int kc_dataset_image_cache(const kc_dataset *d, size_t *bytes, const char **file) {
    const kc_img_meta *m = d ? d->st->img : NULL;
    if (bytes) *bytes = m && m->cache != KC_IMAGE_CACHE_NONE ? (size_t)d->st->n * (size_t)d->st->example_size * 4 : 0;
    if (file) *file = m ? m->cache_file : NULL;
    return m ? (int)m->cache : -1;
}

const char *kc_dataset_file(const kc_dataset *d, int64_t i) {
    if (!d || !d->st->img || i < 0 || i >= d->count) return NULL;
    return d->st->img->list.files[d->start + i];
}

/* ---------------------------------------------------------------- names */

static const char *const interp_names[] = {"bilinear", "nearest", "bicubic", "area"};
static const char *const color_names[] = {"rgb", "grayscale", "rgba"};
static const char *const label_names[] = {"int", "categorical", "binary"};

static int find_name(const char *s, const char *const *names, int n) {
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0) return i;
    return -1;
}

int kc_interpolation_parse(const char *s) { return find_name(s, interp_names, 4); }
int kc_color_mode_parse(const char *s) { return find_name(s, color_names, 3); }
int kc_label_mode_parse(const char *s) { return find_name(s, label_names, 3); }
const char *kc_interpolation_name(kc_interpolation i) { return (unsigned)i < 4 ? interp_names[i] : "?"; }
const char *kc_color_mode_name(kc_color_mode c) { return (unsigned)c < 3 ? color_names[c] : "?"; }
const char *kc_label_mode_name(kc_label_mode l) { return (unsigned)l < 3 ? label_names[l] : "?"; }
