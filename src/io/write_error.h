/* write_error.h — private to src/io: one kerac line for a failed write, whatever failed
 * (our own write/fsync/rename, or libhdf5's, whose error stack is silenced and whose
 * multi-line text would otherwise reach the user). */
#ifndef KC_WRITE_ERROR_H
#define KC_WRITE_ERROR_H

#include "../core/core.h"

/* The status for errno err while writing path: KC_STATUS_STORAGE for a full or failing
 * disk (ENOSPC, EDQUOT, EFBIG, EIO), else KC_STATUS_IO; the message is one line:
 * "no space left on device writing 'PATH'; INTACT". intact says what is unchanged
 * ("the previous checkpoint 'X' is intact"); NULL: "'PATH' was left as it was". */
kc_status kc__write_fail(int err, const char *path, const char *intact);

#endif /* KC_WRITE_ERROR_H */
