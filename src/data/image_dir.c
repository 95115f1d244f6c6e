/* image_dir.c — the files of a folder of images in Keras's order (index_directory): class
 * subfolders sorted (hidden ones skipped), inside each class every folder's files sorted by
 * the folder's path then the name, image extensions only (any case), then the list shuffled
 * with numpy's legacy RandomState(seed).shuffle (MT19937, bounded draws by masking), which
 * makes the validation split pick the same files as Keras's. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "image.h"

/* ---------------------------------------------------------------- numpy's shuffle */

typedef struct mt19937 {
    uint32_t s[624];
    int i;
} mt19937;

static void mt_seed(mt19937 *m, uint32_t seed) {
    m->s[0] = seed;
    for (int i = 1; i < 624; i++) m->s[i] = 1812433253u * (m->s[i - 1] ^ (m->s[i - 1] >> 30)) + (uint32_t)i;
    m->i = 624;
}

static uint32_t mt_next(mt19937 *m) {
    if (m->i >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (m->s[k] & 0x80000000u) | (m->s[(k + 1) % 624] & 0x7fffffffu);
            m->s[k] = m->s[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        m->i = 0;
    }
    uint32_t y = m->s[m->i++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

void kc__numpy_shuffle_perm(uint32_t seed, int64_t n, int64_t *perm) {
    mt19937 m;
    mt_seed(&m, seed);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i >= 1; i--) {
        uint64_t mask = (uint64_t)i, j;
        for (int b = 1; b < 64; b <<= 1) mask |= mask >> b;
        if ((uint64_t)i <= 0xffffffffu) {
            while ((j = (mt_next(&m) & mask)) > (uint64_t)i) {}
        } else {
            while ((j = ((((uint64_t)mt_next(&m) << 32) | mt_next(&m)) & mask)) > (uint64_t)i) {}
        }
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

/* ---------------------------------------------------------------- string lists */

typedef struct strlist {
    char **v;
    int64_t n, cap;
} strlist;

static kc_status sl_push(strlist *l, char *s) {
    if (!s) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
    if (l->n == l->cap) {
        int64_t cap = l->cap ? l->cap * 2 : 64;
        char **v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            free(s);
            return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return KC_STATUS_OK;
}

static void sl_free(strlist *l) {
    for (int64_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void sort_strs(char **v, int64_t n) {
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_str); /* v may be NULL when n == 0 */
}

static char *join(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = malloc(na + nb + 2);
    if (!s) return NULL;
    memcpy(s, a, na);
    s[na] = '/';
    memcpy(s + na + 1, b, nb + 1);
    if (na == 0) memmove(s, s + 1, nb + 1);
    return s;
}

static bool is_image_name(const char *name) {
    static const char *const ext[] = {".bmp", ".gif", ".jpeg", ".jpg", ".png"};
    size_t n = strlen(name);
    for (size_t i = 0; i < KC_ARRAY_LEN(ext); i++) {
        size_t e = strlen(ext[i]);
        if (n >= e && strcasecmp(name + n - e, ext[i]) == 0) return true;
    }
    return false;
}

/* ---------------------------------------------------------------- the walk */

typedef struct walk {
    const char *root;      /* the folder given */
    bool follow;
    dev_t dev[64];         /* the folders being walked, to catch symlink loops */
    ino_t ino[64];
    int depth;
    strlist dirs;          /* relative folder paths, each with its files listed after sorting */
} walk;

/* Collect rel (a folder under root) and the folders below it into w->dirs. */
static kc_status walk_dir(walk *w, const char *rel) {
    char *abs = join(w->root, rel);
    if (!abs) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
    struct stat sb;
    if (stat(abs, &sb) != 0) {
        kc_status s = kc__fail(KC_STATUS_IO, "cannot read the folder '%s': %s", abs, strerror(errno));
        free(abs);
        return s;
    }
    for (int i = 0; i < w->depth; i++)
        if (w->dev[i] == sb.st_dev && w->ino[i] == sb.st_ino) {
            kc_status s = kc__fail(KC_STATUS_BAD_FILE, "symlink loop: the folder '%s' is '%s' again (a link points "
                                   "back up the tree); remove the link or do not follow links", abs,
                                   w->dirs.v[0]);
            free(abs);
            return s;
        }
    if (w->depth == (int)KC_ARRAY_LEN(w->dev)) {
        free(abs);
        return kc__fail(KC_STATUS_BAD_FILE, "folder '%s/%s' is nested over %d levels deep", w->root, rel, w->depth);
    }
    DIR *d = opendir(abs);
    if (!d) {
        kc_status s = kc__fail(KC_STATUS_IO, "cannot read the folder '%s': %s", abs, strerror(errno));
        free(abs);
        return s;
    }
    w->dev[w->depth] = sb.st_dev;
    w->ino[w->depth++] = sb.st_ino;
    kc_status s = sl_push(&w->dirs, kc__strdup(rel));
    strlist subs = {0};
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char *p = join(abs, e->d_name);
        struct stat ls, fs;
        bool is_link = p && lstat(p, &ls) == 0 && S_ISLNK(ls.st_mode);
        bool is_dir = p && stat(p, &fs) == 0 && S_ISDIR(fs.st_mode);
        free(p);
        if (is_dir && (!is_link || w->follow)) s = sl_push(&subs, join(rel, e->d_name));
    }
    closedir(d);
    free(abs);
    for (int64_t i = 0; !s && i < subs.n; i++) s = walk_dir(w, subs.v[i]);
    sl_free(&subs);
    w->depth--;
    return s;
}

/* The image files directly in the folder rel, sorted, appended to files. */
static kc_status list_files(const char *root, const char *rel, strlist *files) {
    char *abs = join(root, rel);
    DIR *d = abs ? opendir(abs) : NULL;
    if (!d) {
        kc_status s = abs ? kc__fail(KC_STATUS_IO, "cannot read the folder '%s': %s", abs, strerror(errno))
                          : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
        free(abs);
        return s;
    }
    int64_t first = files->n;
    kc_status s = KC_STATUS_OK;
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (!is_image_name(e->d_name)) continue;
        char *p = join(abs, e->d_name);
        struct stat sb;
        bool is_dir = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (!is_dir) s = sl_push(files, join(rel, e->d_name));
    }
    closedir(d);
    free(abs);
    if (!s && files->n - first > 1) sort_strs(files->v + first, files->n - first);
    return s;
}

static kc_status list_class(const char *root, const char *cls, bool follow, strlist *files) {
    walk w = {.root = root, .follow = follow};
    kc_status s = walk_dir(&w, cls);
    if (!s) sort_strs(w.dirs.v, w.dirs.n);
    for (int64_t i = 0; !s && i < w.dirs.n; i++) s = list_files(root, w.dirs.v[i], files);
    sl_free(&w.dirs);
    return s;
}

/* The class subfolders, sorted, hidden ones left out. */
static kc_status list_classes(const char *dir, strlist *out) {
    DIR *d = opendir(dir);
    if (!d) {
        struct stat sb;
        if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "'%s' is not a folder; give a folder with one subfolder "
                            "of images per class", dir);
        return kc__fail(KC_STATUS_IO, "cannot read the image folder '%s': %s", dir, strerror(errno));
    }
    kc_status s = KC_STATUS_OK;
    struct dirent *e;
    while (!s && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = join(dir, e->d_name);
        struct stat sb;
        bool is_dir = p && stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
        free(p);
        if (is_dir) s = sl_push(out, kc__strdup(e->d_name));
    }
    closedir(d);
    if (!s) sort_strs(out->v, out->n);
    return s;
}

/* Explicit class names: the same set as the subfolders (Keras's rule), in the given order. */
static kc_status order_classes(const char *dir, const kc_image_opts *o, strlist *cls) {
    if (!o->class_names) return KC_STATUS_OK;
    bool same = o->num_class_names == cls->n;
    for (int i = 0; same && i < o->num_class_names; i++) {
        bool found = false;
        for (int64_t j = 0; j < cls->n && !found; j++) found = o->class_names[i] && strcmp(o->class_names[i], cls->v[j]) == 0;
        same = found;
    }
    if (!same)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "the class names given (%d) are not the subfolders of '%s' (%lld, "
                        "first '%s'); name each subfolder once", o->num_class_names, dir, (long long)cls->n,
                        cls->n ? cls->v[0] : "");
    for (int i = 0; i < o->num_class_names; i++) {
        char *c = kc__strdup(o->class_names[i]);
        if (!c) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
        free(cls->v[i]);
        cls->v[i] = c;
    }
    return KC_STATUS_OK;
}

static kc_status list_all(const char *dir, const kc_image_opts *o, strlist *cls, strlist *files, int32_t **labels) {
    KC_TRY(list_classes(dir, cls));
    if (cls->n == 0)
        return kc__fail(KC_STATUS_BAD_FILE, "the image folder '%s' has no subfolders; put each class's images in "
                        "a subfolder named after the class: %s/<class>/<image>.jpg", dir, dir);
    KC_TRY(order_classes(dir, o, cls));
    int64_t cap = 0;
    for (int64_t c = 0; c < cls->n; c++) {
        int64_t before = files->n;
        KC_TRY(list_class(dir, cls->v[c], o->follow_links, files));
        if (files->n == before)
            kc__log_always(KC_LOG_WARNING, "the class folder '%s/%s' has no images (.jpg .jpeg .png .bmp .gif); "
                           "the class is kept, with no examples", dir, cls->v[c]);
        if (files->n > cap) {
            cap = files->cap;
            int32_t *l = realloc(*labels, (size_t)cap * sizeof *l);
            if (!l) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
            *labels = l;
        }
        for (int64_t i = before; i < files->n; i++) (*labels)[i] = (int32_t)c;
    }
    if (files->n == 0)
        return kc__fail(KC_STATUS_BAD_FILE, "no images in '%s': its %lld class subfolder%s (first '%s') hold no "
                        ".jpg, .jpeg, .png, .bmp or .gif files", dir, (long long)cls->n, cls->n == 1 ? "" : "s",
                        cls->v[0]);
    return KC_STATUS_OK;
}

kc_status kc__image_list(const char *dir, const kc_image_opts *o, kc_img_list *out) {
    memset(out, 0, sizeof *out);
    strlist cls = {0}, files = {0};
    int32_t *labels = NULL;
    int64_t *perm = NULL;
    kc_status s = list_all(dir, o, &cls, &files, &labels);
    if (!s && !o->no_shuffle) {
        if (o->seed > 0xffffffffu)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "seed %llu is over 2^32 - 1 (numpy's limit, which Keras's file "
                         "shuffle uses); give a smaller seed", (unsigned long long)o->seed);
        perm = s ? NULL : malloc((size_t)files.n * sizeof *perm);
        char **v = perm ? malloc((size_t)files.n * sizeof *v) : NULL;
        int32_t *l = v ? malloc((size_t)files.n * sizeof *l) : NULL;
        if (!s && !l) s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing image files");
        if (!s) {
            kc__numpy_shuffle_perm((uint32_t)o->seed, files.n, perm);
            for (int64_t i = 0; i < files.n; i++) v[i] = files.v[perm[i]], l[i] = labels[perm[i]];
            free(files.v);
            free(labels);
            files.v = v;
            labels = l;
        } else {
            free(v);
            free(l);
        }
    }
    free(perm);
    if (s) {
        sl_free(&cls);
        sl_free(&files);
        free(labels);
        return s;
    }
    out->files = files.v;
    out->n = files.n;
    out->labels = labels;
    out->classes = cls.v;
    out->num_classes = (int)cls.n;
    return KC_STATUS_OK;
}

void kc__image_list_free(kc_img_list *l) {
    if (!l) return;
    for (int64_t i = 0; i < l->n; i++) free(l->files[i]);
    for (int i = 0; i < l->num_classes; i++) free(l->classes[i]);
    free(l->files);
    free(l->labels);
    free(l->classes);
    memset(l, 0, sizeof *l);
}
