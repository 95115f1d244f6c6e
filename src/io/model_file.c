/* model_file.c — kc_model_load / kc_model_save: the format is chosen by the file
 * extension. ".json" is Keras's JSON model config (architecture only, written in the
 * Keras 3 flavour, pretty-printed). ".keras" and ".h5" have a slot in the table and come
 * with their own issue. Writes go to "path.tmp" and are renamed over the path, so a crash
 * or a full disk never leaves a partial model file behind. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

#include "io.h"

kc_status kc__read_file(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return kc__fail(KC_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", path);
    }
    for (;;) {
        if (n + 1 >= cap) {
            char *p = realloc(buf, cap * 2);
            if (!p) {
                free(buf);
                fclose(f);
                return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s' (%zu bytes so far)", path, n);
            }
            buf = p;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int err = errno;
        free(buf);
        fclose(f);
        return kc__fail(KC_STATUS_IO, "cannot read '%s': %s", path, strerror(err ? err : EIO));
    }
    fclose(f);
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return KC_STATUS_OK;
}

kc_status kc__write_file_atomic(const char *path, const char *data, size_t len) {
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s'", path);
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        kc_status s = kc__fail(KC_STATUS_IO, "cannot write '%s' (via '%s'): %s", path, tmp, strerror(errno));
        free(tmp);
        return s;
    }
    int err = 0;
    errno = 0;
    if (fwrite(data, 1, len, f) != len) err = errno ? errno : EIO;
    if (!err && fflush(f) != 0) err = errno ? errno : EIO;
    if (!err && fsync(fileno(f)) != 0) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    if (err) {
        unlink(tmp);
        kc_status s = kc__fail(KC_STATUS_IO, "cannot write '%s': %s; the file was left unchanged", path, strerror(err));
        free(tmp);
        return s;
    }
    if (rename(tmp, path) != 0) {
        err = errno;
        unlink(tmp);
        kc_status s = kc__fail(KC_STATUS_IO, "cannot replace '%s' with '%s': %s", path, tmp, strerror(err));
        free(tmp);
        return s;
    }
    free(tmp);
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- .json */

static kc_status load_json(const char *path, kc_model **out) {
    char *text = NULL;
    size_t len = 0;
    KC_TRY(kc__read_file(path, &text, &len));
    kc_status s = kc_model_from_json(text, len, out);
    free(text);
    if (s != KC_STATUS_OK) return kc__wrap(s, "'%s': ", path);
    return KC_STATUS_OK;
}

static kc_status save_json(kc_model *m, const char *path) {
    char *text = NULL;
    kc_status s = kc__model_to_json_flags(m, 3, JSON_INDENT(2), &text);
    if (s != KC_STATUS_OK) return kc__wrap(s, "saving '%s': ", path);
    size_t len = strlen(text);
    char *with_nl = realloc(text, len + 2); /* end the file with a newline */
    if (!with_nl) {
        free(text);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s'", path);
    }
    with_nl[len] = '\n';
    with_nl[len + 1] = '\0';
    s = kc__write_file_atomic(path, with_nl, len + 1);
    free(with_nl);
    return s;
}

/* ---------------------------------------------------------------- dispatch */

static const kc__model_format k_formats[] = {
    {".json", "Keras JSON model config", load_json, save_json},
    {".keras", "Keras 3 model archive", NULL, NULL},
    {".h5", "Keras HDF5 model file", NULL, NULL},
    {".hdf5", "Keras HDF5 model file", NULL, NULL},
};

const kc__model_format *kc__model_format_for_path(const char *path) {
    if (!path) return NULL;
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    if (!dot || (slash && dot < slash)) return NULL;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_formats); i++)
        if (strcasecmp(dot, k_formats[i].ext) == 0) return &k_formats[i];
    return NULL;
}

static kc_status format_of(const char *path, bool save, const kc__model_format **out) {
    const kc__model_format *f = kc__model_format_for_path(path);
    if (!f) {
        const char *dot = strrchr(path, '.');
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "'%s': unknown model file extension '%s'; use .json (.keras and .h5 are planned)", path,
                        dot && !strchr(dot, '/') ? dot : "(none)");
    }
    if (save ? !f->save : !f->load)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "'%s': %s files (%s) are not supported yet: .keras and .h5 files come with issue 'Keras model "
                        "files'; use .json for now",
                        path, f->ext, f->what);
    *out = f;
    return KC_STATUS_OK;
}

kc_status kc_model_load(const char *path, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load: the output pointer is NULL");
    *out = NULL;
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load: the path is empty");
    const kc__model_format *f = NULL;
    KC_TRY(format_of(path, false, &f));
    return f->load(path, out);
}

kc_status kc_model_save(kc_model *m, const char *path) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save: model is NULL");
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save: the path is empty");
    const kc__model_format *f = NULL;
    KC_TRY(format_of(path, true, &f));
    return f->save(m, path);
}
