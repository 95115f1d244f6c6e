/* write_error.c — failed writes as one line (write_error.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "write_error.h"

kc_status kc__write_fail(int err, const char *path, const char *intact) {
    const char *what;
    kc_status s = KC_STATUS_STORAGE;
    switch (err) {
    case ENOSPC: what = "no space left on device"; break;
    case EDQUOT: what = "disk quota exceeded"; break;
    case EFBIG: what = "file too large (the file system's or the process's file size limit)"; break;
    case EIO: what = "input/output error (a failing disk?)"; break;
    default:
        what = strerror(err ? err : EIO);
        s = KC_STATUS_IO;
        break;
    }
    char left[600];
    if (intact) snprintf(left, sizeof left, "%s", intact);
    else snprintf(left, sizeof left, "'%s' was left as it was", path);
    return kc__fail(s, "%s writing '%s'; %s", what, path, left);
}
