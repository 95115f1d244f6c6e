/* atomic_file.c — unique temporary files, their commit, and the removal of stale ones
 * (atomic_file.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "write_error.h"

static unsigned long g_counter;

/* A short, stable tag of this host: temporaries of another host sharing the folder (NFS)
 * are never taken for stale, whatever their process number. */
static unsigned host_tag(void) {
    static unsigned tag;
    if (tag) return tag;
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    uint32_t h = 2166136261u;
    for (const char *p = host; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    tag = (h & 0xffffffu) | 0x1000000u; /* never 0: 7 hex digits */
    return tag;
}

/* The folder of path ("." for a bare name) and its last component. */
static void split_path(const char *path, char *dir, size_t n, const char **base) {
    const char *slash = strrchr(path, '/');
    *base = slash ? slash + 1 : path;
    if (!slash) snprintf(dir, n, ".");
    else if (slash == path) snprintf(dir, n, "/");
    else snprintf(dir, n, "%.*s", (int)(slash - path), path);
}

bool kc__tmp_is_stale(const char *name, const char *base) {
    size_t n = strlen(name), b = base ? strlen(base) : 0;
    if (n < 5 || strcmp(name + n - 4, ".tmp") != 0) return false;
    /* ".<host>-<pid>-<n>.tmp" at the end, after base */
    const char *dot = name + n - 4;
    const char *p = dot;
    while (p > name && p[-1] != '.') p--;
    if (p == name || (base && ((size_t)(p - 1 - name) != b || strncmp(name, base, b) != 0))) return false;
    unsigned host = 0;
    long pid = 0;
    unsigned long k = 0;
    int used = 0;
    if (sscanf(p, "%7x-%ld-%lu.tm%n", &host, &pid, &k, &used) != 3 || p + used != dot + 3) return false;
    if (host != host_tag() || pid <= 0 || pid == (long)getpid()) return false;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

void kc__tmp_clean_stale(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[4096];
    while ((e = readdir(d)) != NULL) {
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        if (!kc__tmp_is_stale(e->d_name, NULL)) continue;
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
    }
    closedir(d);
}

static void clean_stale_of(const char *path) {
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[4096];
    while ((e = readdir(d)) != NULL)
        if (kc__tmp_is_stale(e->d_name, base) && snprintf(p, sizeof p, "%s/%s", dir, e->d_name) < (int)sizeof p) unlink(p);
    closedir(d);
}

kc_status kc__tmp_create(const char *path, char **tmp) {
    *tmp = NULL;
    clean_stale_of(path);
    size_t n = strlen(path) + 64;
    char *t = malloc(n);
    if (!t) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s'", path);
    for (int tries = 0; tries < 100; tries++) {
        unsigned long k = __atomic_fetch_add(&g_counter, 1, __ATOMIC_RELAXED);
        snprintf(t, n, "%s.%07x-%ld-%lu.tmp", path, host_tag(), (long)getpid(), k);
        int fd = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd >= 0) {
            close(fd);
            *tmp = t;
            return KC_STATUS_OK;
        }
        if (errno != EEXIST) {
            kc_status s = kc__write_fail(errno, path, NULL);
            free(t);
            return s;
        }
    }
    free(t);
    return kc__fail(KC_STATUS_IO, "cannot create a temporary file next to '%s': every name is taken", path);
}

/* fsync the folder of path, where renames become durable; file systems that cannot sync a
 * folder say EINVAL. */
static int sync_parent(const char *path) {
    char dir[4096];
    const char *base;
    split_path(path, dir, sizeof dir, &base);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    int err = fsync(fd) != 0 ? errno : 0;
    close(fd);
    return err == EINVAL || err == EROFS ? 0 : err;
}

kc_status kc__tmp_commit(const char *tmp, const char *path) {
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0 && fsync(fd) != 0) err = errno ? errno : EIO;
    if (fd >= 0) close(fd);
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        unlink(tmp);
        return kc__write_fail(err, path, NULL);
    }
    err = sync_parent(path);
    if (err) return kc__write_fail(err, path, NULL);
    return KC_STATUS_OK;
}

int kc__write_all(int fd, const void *data, size_t len) {
    const char *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len > ((size_t)1 << 30) ? ((size_t)1 << 30) : len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

kc_status kc__write_file_atomic(const char *path, const void *data, size_t len) {
    char *tmp = NULL;
    KC_TRY(kc__tmp_create(path, &tmp));
    int fd = open(tmp, O_WRONLY | O_TRUNC | O_CLOEXEC);
    int err = fd < 0 ? errno : kc__write_all(fd, data, len);
    if (fd >= 0 && close(fd) != 0 && !err) err = errno;
    kc_status s;
    if (err) {
        unlink(tmp);
        s = kc__write_fail(err, path, NULL);
    } else {
        s = kc__tmp_commit(tmp, path);
    }
    free(tmp);
    return s;
}
