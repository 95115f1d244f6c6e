/* status.c — status names and the thread-local error message. */
#include <stdio.h>
#include <string.h>

#include "core.h"

static _Thread_local char g_error[KC_ERROR_MAX];

const char *kc_last_error(void) { return g_error; }

void kc__clear_error(void) { g_error[0] = '\0'; }

void kc__error_save(kc__saved_error *e) { snprintf(e->text, sizeof e->text, "%s", g_error); }

void kc__error_restore(const kc__saved_error *e) { snprintf(g_error, sizeof g_error, "%s", e->text); }

kc_status kc__fail(kc_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_error, sizeof g_error, fmt, ap);
    va_end(ap);
    return s;
}

kc_status kc__wrap(kc_status s, const char *fmt, ...) {
    char prefix[KC_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0) return s;
    size_t plen = KC_MIN((size_t)n, sizeof g_error - 1);
    size_t olen = strnlen(g_error, sizeof g_error - 1);
    if (plen + olen > sizeof g_error - 1) olen = sizeof g_error - 1 - plen;
    memmove(g_error + plen, g_error, olen); /* the old message moves right, cut at the end */
    memcpy(g_error, prefix, plen);
    g_error[plen + olen] = '\0';
    return s;
}

const char *kc_status_name(kc_status s) {
    switch (s) {
    case KC_STATUS_OK: return "ok";
    case KC_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case KC_STATUS_SHAPE: return "shape mismatch";
    case KC_STATUS_UNSUPPORTED: return "unsupported";
    case KC_STATUS_BAD_FILE: return "bad file";
    case KC_STATUS_IO: return "i/o error";
    case KC_STATUS_OUT_OF_MEMORY: return "out of memory";
    case KC_STATUS_STATE: return "wrong state";
    case KC_STATUS_DEVICE: return "device error";
    case KC_STATUS_NUMERIC: return "numeric error";
    case KC_STATUS_INTERRUPTED: return "interrupted";
    case KC_STATUS_INTERNAL: return "internal error";
    case KC_STATUS_STORAGE: return "storage full or failing";
    }
    return "unknown status";
}

const char *kc_version(void) { return KC_VERSION_STRING; }
