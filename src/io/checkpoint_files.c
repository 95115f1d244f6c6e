/* checkpoint_files.c — a checkpoint folder's files: DIR/ckpt-<seq>-e<epoch>-s<step>.keras,
 * seq = 1 + the highest seq in DIR. Writes go to "<file>.tmp", are fsynced and renamed
 * (kc__write_file_atomic), then DIR is fsynced; only then are checkpoints beyond `keep`
 * deleted (lowest seq first). Stray "ckpt-*.tmp" files (a crash mid-write) are ignored by
 * readers and removed by the next save. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "checkpoint.h"

#define PREFIX "ckpt-"
#define SUFFIX ".keras"

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p */
static kc_status make_dirs(const char *dir) {
    if (is_dir(dir)) return KC_STATUS_OK;
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory making folder '%s'", dir);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int err = errno;
            kc_status s = kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot make '%s': %s; pick a folder you can "
                                   "write to", dir, p, strerror(err));
            free(p);
            return s;
        }
        p[i] = c;
    }
    free(p);
    if (!is_dir(dir))
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s' is not a folder (a file has that name)", dir);
    return KC_STATUS_OK;
}

/* Make the renames inside dir durable. Filesystems that cannot sync a folder say EINVAL. */
static kc_status sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot open it: %s", dir, strerror(errno));
    int err = fsync(fd) != 0 ? errno : 0;
    close(fd);
    if (err && err != EINVAL && err != EROFS)
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot flush it to disk: %s", dir, strerror(err));
    return KC_STATUS_OK;
}

typedef struct ckpt_file {
    long long seq;
    int epoch;
    long long step;
    char name[96];
} ckpt_file;

/* Digits only, at least one; advances *p. */
static bool read_digits(const char **p, long long *out) {
    const char *s = *p;
    long long v = 0;
    int n = 0;
    while (*s >= '0' && *s <= '9' && n < 18) {
        v = v * 10 + (*s - '0');
        s++;
        n++;
    }
    if (n == 0 || (*s >= '0' && *s <= '9')) return false;
    *p = s;
    *out = v;
    return true;
}

/* "ckpt-<seq>-e<epoch>-s<step>.keras" exactly (a ".keras.tmp" is not one). */
static bool parse_name(const char *name, ckpt_file *f) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0 || strlen(name) >= sizeof f->name) return false;
    const char *p = name + strlen(PREFIX);
    long long seq, epoch, step;
    if (!read_digits(&p, &seq) || strncmp(p, "-e", 2) != 0) return false;
    p += 2;
    if (!read_digits(&p, &epoch) || strncmp(p, "-s", 2) != 0 || epoch > 1000000000LL) return false;
    p += 2;
    if (!read_digits(&p, &step) || strcmp(p, SUFFIX) != 0) return false;
    f->seq = seq;
    f->epoch = (int)epoch;
    f->step = step;
    snprintf(f->name, sizeof f->name, "%s", name);
    return true;
}

/* A temporary left by a checkpoint writer that died: its process is gone (atomic_file.c),
 * or it is an older kerac's "<checkpoint>.tmp". */
static bool is_stray_tmp(const char *name) {
    size_t n = strlen(name), s = strlen(SUFFIX ".tmp");
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return false;
    return kc__tmp_is_stale(name, NULL) || (n > s && strcmp(name + n - s, SUFFIX ".tmp") == 0);
}

static int by_seq_desc(const void *a, const void *b) {
    const ckpt_file *x = a, *y = b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* The checkpoints in dir, newest (highest seq) first; clean: remove stray temporaries. */
static kc_status list_dir(const char *dir, bool clean, ckpt_file **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return kc__fail(KC_STATUS_IO, "cannot read checkpoint folder '%s': %s", dir, strerror(errno));
    ckpt_file *v = NULL;
    int n = 0, cap = 0;
    kc_status s = KC_STATUS_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        ckpt_file f;
        if (parse_name(e->d_name, &f)) {
            if (n == cap) {
                int nc = cap ? cap * 2 : 16;
                ckpt_file *p = realloc(v, (size_t)nc * sizeof *p);
                if (!p) {
                    s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing '%s'", dir);
                    break;
                }
                v = p;
                cap = nc;
            }
            v[n++] = f;
        } else if (clean && is_stray_tmp(e->d_name)) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
        }
    }
    closedir(d);
    if (s != KC_STATUS_OK) {
        free(v);
        return s;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, by_seq_desc);
    *out = v;
    *n_out = n;
    return KC_STATUS_OK;
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for a path in '%s'", dir);
        return NULL;
    }
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* The first of v (newest first) whose every zip entry reads with a matching CRC; -1, with
 * the newest one's error, when none does. Skipping one is said always. */
static int newest_readable(const char *dir, const ckpt_file *v, int count) {
    char first[512] = "", path[4096];
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
        kc_status s = kc__keras_archive_verify(path);
        if (s == KC_STATUS_OK && i > 0)
            kc__log_always(KC_LOG_WARNING, "resuming from '%s', the newest checkpoint that reads: %s", path, first);
        if (s == KC_STATUS_OK) return i;
        if (i == 0) snprintf(first, sizeof first, "%s", kc_last_error());
    }
    kc__fail(KC_STATUS_BAD_FILE, "%s; no checkpoint in '%s' reads", first, dir);
    return -1;
}

kc_status kc_checkpoint_latest(const char *dir, char *path, size_t n) {
    if (!dir || !*dir || !path || n == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_latest: the folder or the output is empty");
    ckpt_file *v = NULL;
    int count = 0;
    KC_TRY(list_dir(dir, false, &v, &count));
    if (count == 0) {
        free(v);
        return kc__fail(KC_STATUS_IO, "no checkpoint in '%s' (no " PREFIX "*" SUFFIX " file); train with a checkpoint "
                        "folder first", dir);
    }
    int use = newest_readable(dir, v, count);
    if (use < 0) {
        free(v);
        return KC_STATUS_BAD_FILE; /* the newest one's error */
    }
    int w = snprintf(path, n, "%s/%s", dir, v[use].name);
    free(v);
    if (w < 0 || (size_t)w >= n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_latest: a path in '%s' is longer than %zu bytes",
                        dir, n);
    return KC_STATUS_OK;
}

kc_status kc__ckpt_resolve(const char *path, char **file) {
    *file = NULL;
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "checkpoint: the path is empty");
    if (is_dir(path)) {
        char buf[4096];
        KC_TRY(kc_checkpoint_latest(path, buf, sizeof buf));
        *file = kc__strdup(buf);
    } else {
        if (access(path, R_OK) != 0)
            return kc__fail(KC_STATUS_IO, "cannot open checkpoint '%s': %s", path, strerror(errno));
        *file = kc__strdup(path);
    }
    return *file ? KC_STATUS_OK : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
}

/* Check that the checkpoint's folder takes files: make it, write and remove a probe. */
kc_status kc__ckpt_probe_dir(const char *dir) {
    KC_TRY(make_dirs(dir));
    char name[64];
    snprintf(name, sizeof name, PREFIX "probe-%ld.tmp", (long)getpid());
    char *p = join(dir, name);
    if (!p) return KC_STATUS_OUT_OF_MEMORY;
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    unlink(p);
    free(p);
    if (err)
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s' is not writable: %s; pick a folder you can write to", dir,
                        strerror(err));
    return KC_STATUS_OK;
}


kc_status kc__ckpt_next_path(const char *dir, int epoch, int64_t step, char **path) {
    ckpt_file *old = NULL;
    int n_old = 0;
    KC_TRY(list_dir(dir, true, &old, &n_old));
    long long seq = n_old ? old[0].seq + 1 : 1;
    free(old);
    char name[128];
    snprintf(name, sizeof name, PREFIX "%06lld-e%04d-s%06lld" SUFFIX, seq, epoch, (long long)step);
    *path = join(dir, name);
    return *path ? KC_STATUS_OK : KC_STATUS_OUT_OF_MEMORY;
}

kc_status kc__ckpt_prune(const char *dir, int keep) {
    KC_TRY(sync_dir(dir));
    /* the new one is in place: now the oldest beyond keep may go */
    ckpt_file *v = NULL;
    int n = 0;
    KC_TRY(list_dir(dir, false, &v, &n));
    bool removed = false;
    for (int i = keep; i < n; i++) {
        char *q = join(dir, v[i].name);
        if (q && unlink(q) == 0) removed = true;
        free(q);
    }
    free(v);
    return removed ? sync_dir(dir) : KC_STATUS_OK;
}
