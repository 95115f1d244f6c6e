/* dir_lock.h — private to src/io: an advisory lock on a checkpoint folder, so that two
 * training runs never write (and prune) checkpoints in one folder at once. */
#ifndef KC_DIR_LOCK_H
#define KC_DIR_LOCK_H

#include "../core/core.h"

/* The lock file inside a locked folder. */
#define KC_DIR_LOCK_NAME ".kerac.lock"

/* Lock dir (which exists) for this process: flock on DIR/.kerac.lock, which then names the
 * holder ("pid 1234 on host h"). *fd is the lock, kept until kc__dir_unlock. A folder held by
 * another process: KC_STATUS_STATE, with a message that names it. */
kc_status kc__dir_lock(const char *dir, int *fd);
void kc__dir_unlock(int fd);

#endif /* KC_DIR_LOCK_H */
