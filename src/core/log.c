/* log.c — log lines go to the user's callback, or to stderr by default. The threshold
 * comes from KERAC_LOG_LEVEL (debug|info|warning|error or 0-3), default warning. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "core.h"

static kc_log_fn g_fn;
static void *g_user;
static int g_level = -1; /* -1: not read from the environment yet */

kc_status kc_log_level_parse(const char *t, kc_log_level *out) {
    static const char *names[] = {"debug", "info", "warning", "error"};
    if (!t) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "log level is missing");
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(t, names[i]) == 0 || (t[0] == '0' + i && t[1] == '\0')) {
            *out = (kc_log_level)i;
            return KC_STATUS_OK;
        }
    }
    if (strcasecmp(t, "warn") == 0) {
        *out = KC_LOG_WARNING;
        return KC_STATUS_OK;
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "log level '%s' is not one of debug, info, warning, error (or 0-3)", t);
}

kc_log_level kc_log_get_level(void) {
    if (g_level < 0) {
        kc_log_level l = KC_LOG_WARNING;
        const char *env = getenv("KERAC_LOG_LEVEL");
        if (env && *env) {
            kc__saved_error saved;
            kc__error_save(&saved);
            if (kc_log_level_parse(env, &l) != KC_STATUS_OK) l = KC_LOG_WARNING;
            kc__error_restore(&saved);
        }
        g_level = (int)l;
    }
    return (kc_log_level)g_level;
}

void kc_log_set_level(kc_log_level level) { g_level = (int)level; }

void kc_log_set_callback(kc_log_fn fn, void *user) {
    g_fn = fn;
    g_user = user;
}

bool kc__log_enabled(kc_log_level level) { return (int)level >= (int)kc_log_get_level(); }

static void emit(kc_log_level level, const char *fmt, va_list ap) {
    static const char *tags[] = {"debug", "info", "warning", "error"};
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    if (g_fn) {
        g_fn(level, line, g_user);
        return;
    }
    fprintf(stderr, "kerac %s: %s\n", tags[level], line);
}

void kc__log(kc_log_level level, const char *fmt, ...) {
    if (!kc__log_enabled(level)) return;
    va_list ap;
    va_start(ap, fmt);
    emit(level, fmt, ap);
    va_end(ap);
}

void kc__log_always(kc_log_level level, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emit(level, fmt, ap);
    va_end(ap);
}
