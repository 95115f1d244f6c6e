/* fuzz_common.h — shared pieces of the libFuzzer targets: a private scratch folder for the
 * files the readers open, an input split into several files, and a quiet library.
 *
 * Several-file inputs: the parts are separated by the 8 bytes KC_FUZZ_SEP ("KCSPLIT!");
 * a missing part is an empty file. fuzz/make_corpus.py writes seeds in this form. */
#ifndef KC_FUZZ_COMMON_H
#define KC_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kerac.h"

#define KC_FUZZ_SEP "KCSPLIT!"
#define KC_FUZZ_SEP_LEN 8

static char g_fuzz_dir[256]; /* this process's scratch folder */

static inline void fuzz_quiet(kc_log_level level, const char *message, void *user) {
    (void)level;
    (void)message;
    (void)user;
}

static inline void fuzz_cleanup(void) {
    if (!g_fuzz_dir[0]) return;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_fuzz_dir);
    if (system(cmd) != 0) { /* nothing to do: a scratch folder left behind */
    }
}

/* Once per process: the scratch folder (in /dev/shm when there is one: no disk writes),
 * one thread, a memory cap for models built from fuzzed configs, no log output. */
static inline void fuzz_setup(void) {
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    snprintf(g_fuzz_dir, sizeof g_fuzz_dir, "%s/kerac-fuzz-XXXXXX", base);
    if (!mkdtemp(g_fuzz_dir)) {
        perror("mkdtemp");
        abort();
    }
    atexit(fuzz_cleanup);
    setenv("KERAC_NUM_THREADS", "1", 1);
    setenv("KERAC_MEMORY_LIMIT", "256M", 0);
    setenv("KERAC_DEVICE", "cpu", 1);
    kc_log_set_callback(fuzz_quiet, NULL);
}

/* A path inside the scratch folder. */
static inline const char *fuzz_path(const char *name) {
    static char buf[4][400];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, sizeof buf[0], "%s/%s", g_fuzz_dir, name);
    return p;
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f || (len && fwrite(data, 1, len, f) != len) || fclose(f) != 0) {
        perror(path);
        abort();
    }
}

typedef struct fuzz_part {
    const uint8_t *data;
    size_t len;
} fuzz_part;

/* Split data at KC_FUZZ_SEP into at most n parts; the last part takes the rest. */
static inline void fuzz_split(const uint8_t *data, size_t len, fuzz_part *parts, int n) {
    for (int i = 0; i < n; i++) parts[i] = (fuzz_part){(const uint8_t *)"", 0};
    size_t start = 0;
    for (int i = 0; i < n; i++) {
        size_t end = len;
        if (i < n - 1)
            for (size_t j = start; j + KC_FUZZ_SEP_LEN <= len; j++)
                if (memcmp(data + j, KC_FUZZ_SEP, KC_FUZZ_SEP_LEN) == 0) {
                    end = j;
                    break;
                }
        parts[i] = (fuzz_part){data + start, end - start};
        if (end == len) return;
        start = end + KC_FUZZ_SEP_LEN;
    }
}

/* Every failure must come with a message: a status without one is a bug. KC_FUZZ_VERBOSE=1
 * prints the status and message of each input. */
/* The libFuzzer start-up of a target that needs only fuzz_setup(). */
#define KC_FUZZ_INITIALIZE                                    \
    int LLVMFuzzerInitialize(int *argc, char ***argv) {      \
        (void)argc;                                          \
        (void)argv;                                          \
        fuzz_setup();                                        \
        return 0;                                            \
    }

static inline void fuzz_check_error(kc_status s) {
    if (getenv("KC_FUZZ_VERBOSE")) /* reproducing: what kerac said about the input */
        fprintf(stderr, "kerac: %s%s%s\n", kc_status_name(s), s ? ": " : "", s ? kc_last_error() : "");
    if (s != KC_STATUS_OK && kc_last_error()[0] == '\0') {
        fprintf(stderr, "kerac returned status '%s' with an empty error message\n", kc_status_name(s));
        abort();
    }
    if (s == KC_STATUS_INTERNAL) {
        fprintf(stderr, "kerac reported an internal error (a bug): %s\n", kc_last_error());
        abort();
    }
}

#endif /* KC_FUZZ_COMMON_H */
