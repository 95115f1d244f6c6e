/* dataset.c — datasets: shared storage, views (slices), reading examples, and the spec
 * strings of kc_dataset_open. The file formats live in idx.c, cifar.c and npy.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "dataset.h"

#define KC_FASHION_MNIST_DEFAULT_DIR "/usr/share/datasets/fashion-mnist"
#define KC_SPEC_FORMS                                                                         \
    "fashion-mnist[:train|:test], fashion-mnist:DIR[:train|:test], mnist:DIR[:train|:test], " \
    "cifar10:DIR[:train|:test], npy:X.npy,Y.npy, idx:IMAGES,LABELS, images:DIR"

/* ---------------------------------------------------------------- storage */

/* The fields every storage sets. */
static void storage_init(kc_ds_storage *st, kc_ds_dtype dtype, int64_t n, kc_shape shape, int64_t e, const char *source) {
    atomic_init(&st->refs, 0);
    st->dtype = dtype;
    st->n = n;
    st->shape = shape;
    st->example_size = e;
    st->fault_index = -1;
    snprintf(st->source, sizeof st->source, "%s", source);
}

kc_status kc__ds_storage_create(kc_ds_dtype dtype, int64_t n, kc_shape shape, const char *source,
                                kc_ds_storage **out) {
    *out = NULL;
    if (n < 1) return kc__fail(KC_STATUS_INTERNAL, "dataset %s: storage for %lld examples", source, (long long)n);
    if (shape.rank < 1 || shape.rank > KC_MAX_RANK)
        return kc__fail(KC_STATUS_INTERNAL, "dataset %s: example rank %d", source, shape.rank);
    int64_t e = 1;
    for (int i = 0; i < shape.rank; i++) {
        if (shape.dim[i] < 1) return kc__fail(KC_STATUS_INTERNAL, "dataset %s: dimension %d", source, shape.dim[i]);
        e *= shape.dim[i]; /* each dim < 2^31 and rank <= 4 ... checked below against size_t */
        if (e > ((int64_t)1 << 40)) break;
    }
    size_t elem = dtype == KC_DS_U8 ? 1 : sizeof(float);
    if (e > ((int64_t)1 << 40) || (uint64_t)n > (SIZE_MAX / 2) / elem / (uint64_t)e)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "dataset %s: %lld examples of %lld values do not fit in memory", source,
                        (long long)n, (long long)e);
    kc_ds_storage *st = kc__calloc(1, sizeof *st, "a dataset");
    if (!st) return KC_STATUS_OUT_OF_MEMORY;
    storage_init(st, dtype, n, shape, e, source ? source : "memory");
    size_t xbytes = (size_t)n * (size_t)e * elem;
    void *x = kc__malloc_aligned(xbytes, "dataset images");
    st->y = x ? kc__malloc_aligned((size_t)n * sizeof(int32_t), "dataset labels") : NULL;
    if (!x || !st->y) {
        free(x);
        free(st->y);
        free(st);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "dataset %s: out of host memory for %lld examples (%.1f MiB); free memory "
                        "or use a smaller dataset", source, (long long)n, (double)xbytes / 1048576.0);
    }
    if (dtype == KC_DS_U8) st->x_u8 = x;
    else st->x_f32 = x;
    *out = st;
    return KC_STATUS_OK;
}

kc_status kc__ds_storage_create_labels(int64_t n, kc_shape shape, const char *source, kc_ds_storage **out) {
    *out = NULL;
    int64_t e = 1;
    for (int i = 0; i < shape.rank; i++) e *= shape.dim[i];
    kc_ds_storage *st = kc__calloc(1, sizeof *st, "a dataset");
    if (!st) return KC_STATUS_OUT_OF_MEMORY;
    st->y = kc__malloc_aligned((size_t)KC_MAX(n, 1) * sizeof(int32_t), "dataset labels");
    if (!st->y) {
        free(st);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    storage_init(st, KC_DS_F32, n, shape, e, source);
    *out = st;
    return KC_STATUS_OK;
}

kc_status kc__ds_storage_create_mapped(kc_ds_dtype dtype, int64_t n, kc_shape shape, const char *source,
                                       const char *path, int64_t offset, kc_ds_storage **out) {
    *out = NULL;
    size_t elem = dtype == KC_DS_U8 ? 1 : sizeof(float);
    if (offset < 0 || offset % (int64_t)elem)
        return kc__fail(KC_STATUS_INTERNAL, "dataset %s: data offset %lld is not aligned", source, (long long)offset);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return kc__fail(KC_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return kc__fail(KC_STATUS_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    kc_ds_storage *st = kc__calloc(1, sizeof *st, "a dataset");
    if (!st) {
        close(fd);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    int64_t e = 1;
    for (int i = 0; i < shape.rank; i++) e *= shape.dim[i];
    if ((int64_t)sb.st_size < offset + n * e * (int64_t)elem) {
        close(fd);
        free(st);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s' is shorter than the data it declares", path);
    }
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int map_errno = errno;
    close(fd); /* the mapping keeps the file */
    if (map == MAP_FAILED) {
        free(st);
        return kc__fail(KC_STATUS_IO, "cannot memory-map '%s' (%.1f MiB): %s", path, (double)sb.st_size / 1048576.0,
                        strerror(map_errno));
    }
    st->y = kc__malloc_aligned((size_t)n * sizeof(int32_t), "dataset labels");
    if (!st->y) {
        munmap(map, (size_t)sb.st_size);
        free(st);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    storage_init(st, dtype, n, shape, e, source ? source : path);
    st->map = map;
    st->map_len = (size_t)sb.st_size;
    if (dtype == KC_DS_U8) st->x_u8 = (uint8_t *)map + offset;
    else st->x_f32 = (float *)(void *)((uint8_t *)map + offset);
    *out = st;
    return KC_STATUS_OK;
}

void kc__ds_storage_free(kc_ds_storage *st) {
    if (!st) return;
    if (st->map) {
        munmap(st->map, st->map_len);
    } else {
        free(st->x_u8);
        free(st->x_f32);
    }
    free(st->y);
    free(st->t);
    kc__img_meta_free(st->img);
    free(st);
}

kc_status kc_dataset_memory(const kc_dataset *d, size_t *resident, size_t *mapped) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_memory: the dataset is NULL");
    const kc_ds_storage *st = d->st;
    size_t elem = st->dtype == KC_DS_U8 ? 1 : sizeof(float);
    size_t x = st->x_u8 || st->x_f32 ? (size_t)st->n * (size_t)st->example_size * elem : 0; /* 0: decoded per batch */
    size_t y = (size_t)st->n * (sizeof(int32_t) + (st->t ? (size_t)st->t_size * sizeof(float) : 0));
    if (resident) *resident = y + (st->map ? 0 : x);
    if (mapped) *mapped = st->map ? x : 0;
    return KC_STATUS_OK;
}

kc_status kc__ds_storage_add_targets(kc_ds_storage *st, kc_shape t_shape) {
    int64_t e = 1;
    for (int i = 0; i < t_shape.rank; i++) e *= t_shape.dim[i];
    if (t_shape.rank < 1 || e < 1 || (uint64_t)st->n > (SIZE_MAX / 4) / sizeof(float) / (uint64_t)e)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "dataset %s: %lld examples of %lld label values do not fit in memory",
                        st->source, (long long)st->n, (long long)e);
    st->t = kc__malloc_aligned((size_t)st->n * (size_t)e * sizeof(float), "dataset labels");
    if (!st->t) return KC_STATUS_OUT_OF_MEMORY;
    st->t_shape = t_shape;
    st->t_size = e;
    memset(st->y, 0, (size_t)st->n * sizeof(int32_t));
    return KC_STATUS_OK;
}

/* The largest class label (y, or t when every value of t is an integer >= 0); -1 when none. */
static int32_t max_label(kc_ds_storage *st) {
    int32_t max = -1;
    if (!st->t) {
        for (int64_t i = 0; i < st->n; i++)
            if (st->y[i] > max) max = st->y[i];
        return max;
    }
    float fmax = -1.0f;
    st->t_integral = true;
    for (int64_t i = 0; i < st->n * st->t_size; i++) {
        float v = st->t[i];
        if (!(v >= 0.0f && v < 2147483647.0f && v == (float)(int32_t)v)) st->t_integral = false;
        else if (v > fmax) fmax = v;
    }
    return st->t_integral ? (int32_t)fmax : -1;
}

kc_status kc__ds_storage_finish(kc_ds_storage *st, int num_classes, kc_dataset **out) {
    *out = NULL;
    int32_t max = max_label(st);
    kc_dataset *d = kc__calloc(1, sizeof *d, "a dataset");
    if (!d) {
        kc__ds_storage_free(st);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    st->num_classes = KC_MAX(num_classes, max + 1);
    atomic_store(&st->refs, 1);
    d->st = st;
    d->start = 0;
    d->count = st->n;
    *out = d;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- reading */

kc_status kc__dataset_gather(const kc_dataset *d, const int64_t *idx, int64_t first, int64_t n,
                             float *x, int32_t *y) {
    const kc_ds_storage *st = d->st;
    const int64_t e = st->example_size;
    int64_t *jdx = NULL; /* (n) storage indices to decode */
    for (int64_t i = 0; i < n; i++) {
        int64_t j = d->start + (idx ? idx[i] : first + i); /* index into the storage */
        if (j == st->fault_index) {
            free(jdx);
            return kc__fail(KC_STATUS_IO, "dataset %s: reading example %lld failed (injected test fault)",
                            st->source, (long long)(j - d->start));
        }
        if (x && st->img && !st->x_f32) { /* images without a cache: decoded below */
            if (!jdx && !(jdx = malloc((size_t)n * sizeof *jdx)))
                return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory gathering a batch");
            jdx[i] = j;
        } else if (x) {
            float *dst = x + i * e; /* (e) */
            if (st->dtype == KC_DS_U8) {
                const uint8_t *src = st->x_u8 + j * e; /* (e) */
                for (int64_t k = 0; k < e; k++) dst[k] = (float)src[k] / 255.0f;
            } else {
                memcpy(dst, st->x_f32 + j * e, (size_t)e * sizeof(float));
            }
        }
        if (y) y[i] = st->y[j];
    }
    kc_status s = jdx ? kc__image_decode_batch(st->img, jdx, n, x) : KC_STATUS_OK;
    free(jdx);
    return s;
}

kc_status kc__dataset_gather_targets(const kc_dataset *d, const int64_t *idx, int64_t first, int64_t n, float *t) {
    const kc_ds_storage *st = d->st;
    const int64_t e = st->t ? st->t_size : 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = d->start + (idx ? idx[i] : first + i); /* index into the storage */
        if (st->t) memcpy(t + i * e, st->t + j * e, (size_t)e * sizeof(float));
        else t[i] = (float)st->y[j];
    }
    return KC_STATUS_OK;
}

int64_t kc__dataset_example_size(const kc_dataset *d) { return d ? d->st->example_size : 0; }

void kc__dataset_set_fault(kc_dataset *d, int64_t index) {
    if (d) d->st->fault_index = index < 0 ? -1 : d->start + index;
}

/* ---------------------------------------------------------------- public API */

/* A shape argument of rank 1..KC_MAX_RANK with positive dimensions. */
static kc_status check_shape(const char *fn, const char *what, kc_shape s, const char *pass) {
    if (s.rank < 1 || s.rank > KC_MAX_RANK)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s rank %d is not 1..%d; pass %s", fn, what, s.rank,
                        KC_MAX_RANK, pass);
    for (int i = 0; i < s.rank; i++)
        if (s.dim[i] < 1)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s dimension %d is %d; every dimension must be >= 1",
                            fn, what, i, s.dim[i]);
    return KC_STATUS_OK;
}

kc_status kc_dataset_from_memory(const float *x, const int32_t *y, int64_t n, kc_shape shape,
                                 int num_classes, kc_dataset **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: out is NULL");
    *out = NULL;
    if (!x || !y)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: %s is NULL; pass the "
                        "examples x (n, shape...) and their labels y (n)", !x ? "x" : "y");
    if (n < 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: n = %lld; a dataset "
                        "needs at least one example", (long long)n);
    KC_TRY(check_shape("kc_dataset_from_memory", "shape", shape, "the shape of one example, e.g. (28, 28, 1)"));
    if (num_classes < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: num_classes = %d; pass "
                        "0 to use max label + 1", num_classes);
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: label y[%lld] = %d "
                            "is negative; class labels must be >= 0", (long long)i, y[i]);
        if (num_classes > 0 && y[i] >= num_classes)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory: label y[%lld] = %d "
                            "is not below num_classes = %d", (long long)i, y[i], num_classes);
    }
    kc_ds_storage *st = NULL;
    KC_TRY(kc__ds_storage_create(KC_DS_F32, n, shape, "memory", &st));
    memcpy(st->x_f32, x, (size_t)n * (size_t)st->example_size * sizeof(float));
    memcpy(st->y, y, (size_t)n * sizeof(int32_t));
    return kc__ds_storage_finish(st, num_classes, out);
}

kc_status kc_dataset_slice(const kc_dataset *d, int64_t start, int64_t count, kc_dataset **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_slice: out is NULL");
    *out = NULL;
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_slice: the dataset is NULL");
    if (start < 0 || count < 0 || start > d->count || count > d->count - start)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_slice: examples [%lld, %lld + %lld) "
                        "are outside dataset %s of %lld examples", (long long)start, (long long)start,
                        (long long)count, d->st->source, (long long)d->count);
    kc_dataset *s = kc__calloc(1, sizeof *s, "a dataset slice");
    if (!s) return KC_STATUS_OUT_OF_MEMORY;
    atomic_fetch_add(&d->st->refs, 1);
    s->st = d->st;
    s->start = d->start + start;
    s->count = count;
    *out = s;
    return KC_STATUS_OK;
}

void kc_dataset_destroy(kc_dataset *d) {
    if (!d) return;
    if (atomic_fetch_sub(&d->st->refs, 1) == 1) kc__ds_storage_free(d->st);
    free(d);
}

int64_t kc_dataset_size(const kc_dataset *d) { return d ? d->count : 0; }

kc_shape kc_dataset_shape(const kc_dataset *d) {
    kc_shape s = {0};
    return d ? d->st->shape : s;
}

int kc_dataset_num_classes(const kc_dataset *d) { return d ? d->st->num_classes : 0; }

kc_status kc_dataset_read(const kc_dataset *d, int64_t start, int64_t count, float *x, int32_t *y) {
    if (!d) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_read: the dataset is NULL");
    if (start < 0 || count < 0 || start > d->count || count > d->count - start)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_read: examples [%lld, %lld + %lld) "
                        "are outside dataset %s of %lld examples", (long long)start, (long long)start,
                        (long long)count, d->st->source, (long long)d->count);
    if (y && d->st->t)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_read: dataset %s holds label tensors of %lld values "
                        "per example, not class indices; read them with kc_dataset_read_targets",
                        d->st->source, (long long)d->st->t_size);
    return kc__dataset_gather(d, NULL, start, count, x, y);
}

/* ---------------------------------------------------------------- specs */

/* "DIR", "DIR:train", "DIR:test" -> dir (malloc'd) and split. */
static kc_status split_dir(const char *spec, const char *rest, char **dir, bool *train) {
    size_t n = strlen(rest);
    *train = true;
    const char *colon = strrchr(rest, ':');
    if (colon && strcmp(colon, ":train") == 0) {
        n = (size_t)(colon - rest);
    } else if (colon && strcmp(colon, ":test") == 0) {
        n = (size_t)(colon - rest);
        *train = false;
    } else if (colon && !strchr(colon, '/')) {
        /* "DIR:validation": a split we do not know, unless the whole thing is a directory */
        struct stat sb;
        if (stat(rest, &sb) != 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s': split '%s' is neither "
                            "train nor test; accepted forms: " KC_SPEC_FORMS, spec, colon + 1);
    }
    if (n == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s': the directory is empty; "
                        "accepted forms: " KC_SPEC_FORMS, spec);
    *dir = malloc(n + 1);
    if (!*dir) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory parsing a dataset spec");
    memcpy(*dir, rest, n);
    (*dir)[n] = '\0';
    return KC_STATUS_OK;
}

/* "A,B" -> a and b (malloc'd). */
static kc_status split_pair(const char *spec, const char *rest, const char *form, char **a, char **b) {
    const char *comma = strchr(rest, ',');
    if (!comma || comma == rest || comma[1] == '\0')
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s' needs two files: %s",
                        spec, form);
    size_t na = (size_t)(comma - rest);
    *a = malloc(na + 1);
    *b = kc__strdup(comma + 1);
    if (!*a || !*b) {
        free(*a);
        free(*b);
        *a = *b = NULL;
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory parsing a dataset spec");
    }
    memcpy(*a, rest, na);
    (*a)[na] = '\0';
    return KC_STATUS_OK;
}

static bool is_split_word(const char *s) { return strcmp(s, "train") == 0 || strcmp(s, "test") == 0; }

kc_status kc_dataset_open(const char *spec, kc_dataset **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_open: out is NULL");
    *out = NULL;
    if (!spec || !*spec)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_open: the dataset spec is empty; "
                        "accepted forms: " KC_SPEC_FORMS);
    const char *colon = strchr(spec, ':');
    size_t kind_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *rest = colon ? colon + 1 : NULL;
    char kind[32] = "";
    if (kind_len < sizeof kind) {
        memcpy(kind, spec, kind_len);
        kind[kind_len] = '\0';
    }
    kc_status s;
    char *a = NULL, *b = NULL;
    bool train = true;

    if (strcmp(kind, "fashion-mnist") == 0) {
        if (!rest || is_split_word(rest)) {
            const char *env = getenv("KERAC_FASHION_MNIST_DIR");
            const char *dir = env && *env ? env : KC_FASHION_MNIST_DEFAULT_DIR;
            const char *hint = "; install Debian's dataset-fashion-mnist: apt-get install "
                               "dataset-fashion-mnist, or set KERAC_FASHION_MNIST_DIR to a directory "
                               "with the Fashion-MNIST IDX files";
            return kc__mnist_dir_load("fashion-mnist", dir, !rest || strcmp(rest, "train") == 0, hint, out);
        }
        KC_TRY(split_dir(spec, rest, &a, &train));
        s = kc__mnist_dir_load("fashion-mnist", a, train,
                               "; put the Fashion-MNIST IDX files there, or install Debian's "
                               "dataset-fashion-mnist: apt-get install dataset-fashion-mnist, and use "
                               "the spec fashion-mnist:train", out);
    } else if (strcmp(kind, "mnist") == 0 || strcmp(kind, "cifar10") == 0) {
        bool cifar = kind[0] == 'c';
        if (!rest || !*rest || is_split_word(rest))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s' needs a directory: %s:DIR"
                            "[:train|:test]; accepted forms: " KC_SPEC_FORMS, spec, kind);
        KC_TRY(split_dir(spec, rest, &a, &train));
        s = cifar ? kc__cifar10_load(a, train, out)
                  : kc__mnist_dir_load("mnist", a, train, "; put the MNIST IDX files there", out);
    } else if (strcmp(kind, "npy") == 0) {
        KC_TRY(split_pair(spec, rest ? rest : "", "npy:X.npy,Y.npy", &a, &b));
        s = kc__npy_load(a, b, out);
    } else if (strcmp(kind, "images") == 0) {
        if (!rest || !*rest)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s' needs a folder: images:DIR", spec);
        return kc_dataset_open_images(rest, NULL, out);
    } else if (strcmp(kind, "idx") == 0) {
        KC_TRY(split_pair(spec, rest ? rest : "", "idx:IMAGES,LABELS", &a, &b));
        s = kc__idx_load(a, b, "", out);
    } else {
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "dataset spec '%s' is not understood; accepted "
                        "forms: " KC_SPEC_FORMS, spec);
    }
    free(a);
    free(b);
    return s;
}

/* ---------------------------------------------------------------- label tensors */

kc_shape kc_dataset_target_shape(const kc_dataset *d) {
    kc_shape s = {0};
    return d && d->st->t ? d->st->t_shape : s;
}

kc_status kc_dataset_read_targets(const kc_dataset *d, int64_t start, int64_t count, float *t) {
    if (!d || !t) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_read_targets: the %s is NULL", !d ? "dataset" : "output");
    if (start < 0 || count < 0 || start > d->count || count > d->count - start)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_read_targets: examples [%lld, %lld + %lld) "
                        "are outside dataset %s of %lld examples", (long long)start, (long long)start,
                        (long long)count, d->st->source, (long long)d->count);
    return kc__dataset_gather_targets(d, NULL, start, count, t);
}

kc_status kc_dataset_from_memory_targets(const float *x, const float *t, int64_t n, kc_shape shape,
                                         kc_shape target_shape, kc_dataset **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory_targets: out is NULL");
    *out = NULL;
    if (!x || !t || n < 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_dataset_from_memory_targets: %s; pass the examples x "
                        "(n, shape...), their labels t (n, target_shape...) and n >= 1",
                        !x ? "x is NULL" : !t ? "t is NULL" : "n < 1");
    KC_TRY(check_shape("kc_dataset_from_memory_targets", "shape", shape, "the shape of one example, e.g. (28, 28, 1)"));
    KC_TRY(check_shape("kc_dataset_from_memory_targets", "target shape", target_shape,
                       "the shape of one example's labels, e.g. (1) or (H, W)"));
    kc_ds_storage *st = NULL;
    KC_TRY(kc__ds_storage_create(KC_DS_F32, n, shape, "memory", &st));
    kc_status s = kc__ds_storage_add_targets(st, target_shape);
    if (s != KC_STATUS_OK) {
        kc__ds_storage_free(st);
        return s;
    }
    memcpy(st->x_f32, x, (size_t)n * (size_t)st->example_size * sizeof(float));
    memcpy(st->t, t, (size_t)n * (size_t)st->t_size * sizeof(float));
    s = kc__ds_check_finite(st->t, n, st->t_size, "labels", "memory");
    if (s != KC_STATUS_OK) {
        kc__ds_storage_free(st);
        return s;
    }
    return kc__ds_storage_finish(st, 0, out);
}
