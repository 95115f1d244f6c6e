/* dir_lock.c — the checkpoint folder's lock (dir_lock.h). flock locks belong to the open
 * file: they go away when the process ends, however it ends, so a killed run never leaves
 * its folder locked (the lock file itself stays, unlocked). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "dir_lock.h"

kc_status kc__dir_lock(const char *dir, int *fd) {
    *fd = -1;
    char path[4096];
    if (snprintf(path, sizeof path, "%s/" KC_DIR_LOCK_NAME, dir) >= (int)sizeof path)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "checkpoint folder '%s': the path is too long", dir);
    int f = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (f < 0)
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot make its lock file: %s", dir, strerror(errno));
    while (flock(f, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EINTR) continue;
        int err = errno;
        char holder[128] = "";
        ssize_t n = err == EWOULDBLOCK ? pread(f, holder, sizeof holder - 1, 0) : -1;
        close(f);
        if (err != EWOULDBLOCK)
            return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot lock it: %s", dir, strerror(err));
        holder[n > 0 ? n : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        return kc__fail(KC_STATUS_STATE,
                        "checkpoint folder '%s' is in use by another training run (%s); give each run its own "
                        "folder, or wait for that one to end",
                        dir, holder[0] ? holder : "a process that has not said which");
    }
    char me[300], host[256] = "?";
    gethostname(host, sizeof host - 1);
    int n = snprintf(me, sizeof me, "pid %ld on host %s\n", (long)getpid(), host);
    if (ftruncate(f, 0) != 0 || pwrite(f, me, (size_t)n, 0) != n) {
        /* the lock holds all the same; only the name of the holder is missing */
    }
    *fd = f;
    return KC_STATUS_OK;
}

void kc__dir_unlock(int fd) {
    if (fd >= 0) close(fd);
}
