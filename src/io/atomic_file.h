/* atomic_file.h — private to src/io: replacing a file in one step (temporary file, fsync,
 * rename, fsync of the folder), safe with several writers of the same path.
 *
 * Every writer gets its own temporary name, "<path>.<host>-<pid>-<n>.tmp" (host: a hash of
 * the host name), created with O_EXCL, so two processes saving to one path never write into
 * each other's file: the last rename wins and the file is always one writer's complete
 * output. A temporary left by a writer that died (SIGKILL, power loss) is removed by the
 * next save to the same path from the same host, once its process is gone. */
#ifndef KC_ATOMIC_FILE_H
#define KC_ATOMIC_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "../core/core.h"

/* Create a new, empty temporary file for path (see above); *tmp is malloc'd. Removes the
 * stale temporaries of path first. */
kc_status kc__tmp_create(const char *path, char **tmp);
/* fsync tmp, rename it over path, fsync path's folder. On failure tmp is removed and path
 * is unchanged. */
kc_status kc__tmp_commit(const char *tmp, const char *path);
/* Write data (len bytes) to path atomically: a new temporary, fsync, rename, fsync of the
 * folder. On failure path is unchanged and no temporary remains. */
kc_status kc__write_file_atomic(const char *path, const void *data, size_t len);
/* Write all of data to fd (restarting after EINTR): 0, or the errno. */
int kc__write_all(int fd, const void *data, size_t len);
/* Is `name` (a file name, no folder) a temporary of `base` left by a process of this host
 * that no longer runs? (base NULL: of any file.) */
bool kc__tmp_is_stale(const char *name, const char *base);
/* Remove the stale temporaries of every file in dir whose name starts with prefix. */
void kc__tmp_clean_stale(const char *dir, const char *prefix);

#endif /* KC_ATOMIC_FILE_H */
