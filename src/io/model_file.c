/* model_file.c — kc_model_load / kc_model_save and the weights-only pair: the format is
 * chosen by the file extension.
 *   .json        Keras's JSON model config (architecture only, written in the Keras 3
 *                flavour, pretty-printed)
 *   .keras       Keras 3 archive: config + weights (keras_archive.c)
 *   .h5 .hdf5    Keras 2 full-model HDF5 file: config + weights (keras_h5.c)
 *   .weights.h5  weights only, Keras 3 layout (kc_model_save writes it; kc_model_load
 *                cannot make a model from it)
 * Writes go to a temporary file of their own, are flushed to disk and renamed over the
 * path (atomic_file.c), so a crash, a full disk or a second writer never leaves a partial
 * model file behind. */
#include <errno.h>
#include <fcntl.h>
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

/* ---------------------------------------------------------------- .json */

static kc_status load_json(const char *path, const kc_device_opts *dev, kc_model **out) {
    char *text = NULL;
    size_t len = 0;
    KC_TRY(kc__read_file(path, &text, &len));
    kc_status s = kc_model_from_json_ex(text, len, dev, out);
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

/* ---------------------------------------------------------------- .weights.h5 */

static kc_status load_weights_only(const char *path, const kc_device_opts *dev, kc_model **out) {
    *out = NULL;
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "'%s' is a weights-only file (.weights.h5) with no model config: load the model from its .json, "
                    ".keras or .h5 file, then its weights with kc_model_load_weights",
                    path);
}

static kc_status save_weights3(kc_model *m, const char *path) { return kc__weights_h5_save(m, path, true); }

/* ---------------------------------------------------------------- dispatch */

static const kc__model_format k_formats[] = {
    {".json", "Keras JSON model config", load_json, save_json},
    {".keras", "Keras 3 model archive", kc__keras_archive_load, kc__keras_archive_save},
    {".weights.h5", "Keras 3 weights file", load_weights_only, save_weights3},
    {".h5", "Keras 2 HDF5 model file", kc__legacy_h5_load, kc__legacy_h5_save},
    {".hdf5", "Keras 2 HDF5 model file", kc__legacy_h5_load, kc__legacy_h5_save},
};

const kc__model_format *kc__model_format_for_path(const char *path) {
    if (!path) return NULL;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t blen = strlen(base);
    const kc__model_format *best = NULL;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_formats); i++) {
        size_t elen = strlen(k_formats[i].ext);
        if (blen >= elen && strcasecmp(base + blen - elen, k_formats[i].ext) == 0 &&
            (!best || elen > strlen(best->ext)))
            best = &k_formats[i];
    }
    return best;
}

static kc_status format_of(const char *path, const kc__model_format **out) {
    const kc__model_format *f = kc__model_format_for_path(path);
    if (!f) /* (the extension itself is not repeated: for a name without one it is nonsense) */
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "'%s': unknown model file extension: use .keras, .h5, .weights.h5 or .json", path);
    *out = f;
    return KC_STATUS_OK;
}

kc_status kc_model_load(const char *path, kc_model **out) { return kc_model_load_ex(path, NULL, out); }

kc_status kc_model_load_ex(const char *path, const kc_device_opts *opts, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load: the output pointer is NULL");
    *out = NULL;
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load: the path is empty");
    const kc__model_format *f = NULL;
    KC_TRY(format_of(path, &f));
    if (f->load == load_json) return f->load(path, opts, out);
    kc__h5_silence q;
    kc__h5_silence_begin(&q);
    kc_status s = f->load(path, opts, out);
    kc__h5_silence_end(&q);
    return s;
}

kc_status kc_model_save(kc_model *m, const char *path) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save: model is NULL");
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save: the path is empty");
    const kc__model_format *f = NULL;
    KC_TRY(format_of(path, &f));
    if (f->save == save_json) return f->save(m, path);
    kc__h5_silence q;
    kc__h5_silence_begin(&q);
    kc_status s = f->save(m, path);
    kc__h5_silence_end(&q);
    return s;
}

/* ---------------------------------------------------------------- weights only */

kc_status kc_model_load_weights(kc_model *m, const char *path) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load_weights: model is NULL");
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_load_weights: the path is empty");
    const kc__model_format *f = kc__model_format_for_path(path);
    bool archive = f && f->load == kc__keras_archive_load;
    if (archive || (f && (f->load == kc__legacy_h5_load || f->load == load_weights_only))) {
        kc__h5_silence q;
        kc__h5_silence_begin(&q);
        kc_status s = archive ? kc__keras_archive_load_weights(m, path) : kc__weights_h5_load(m, path);
        kc__h5_silence_end(&q);
        return s;
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "'%s': weights are read from .weights.h5, .h5 or .keras files%s", path,
                    f ? " (a .json file holds no weights)" : "");
}

kc_status kc_model_save_weights(kc_model *m, const char *path) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save_weights: model is NULL");
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_save_weights: the path is empty");
    const kc__model_format *f = kc__model_format_for_path(path);
    if (f && (f->save == save_weights3 || f->save == kc__legacy_h5_save)) {
        kc__h5_silence q;
        kc__h5_silence_begin(&q);
        kc_status s = kc__weights_h5_save(m, path, f->save == save_weights3);
        kc__h5_silence_end(&q);
        return s;
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "'%s': weights are saved as .weights.h5 (Keras 3 layout) or .h5 (Keras 2 layout)", path);
}
