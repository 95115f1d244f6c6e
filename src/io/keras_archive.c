/* keras_archive.c — Keras 3 .keras files: a zip archive (entries stored, not compressed,
 * as Python's zipfile writes them by default) holding
 *   metadata.json     {"keras_version": "3.6.0", "date_saved": "2025-01-31@12:00:00"}
 *   config.json       the model config (Keras 3 flavour, json.dumps separators)
 *   model.weights.h5  the weights in Keras 3's layout (keras_h5.c)
 * The archive is built in memory and written atomically (temporary file, fsync, rename).
 * Training checkpoints (checkpoint_*.c) are such archives with extras: a compile_config in
 * config.json, the optimizer's variables in model.weights.h5 and one more entry.
 * Reading checks the archive's consistency, builds the model from config.json and reads
 * every weight with its shape checked. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zip.h>

#include "checkpoint.h"
#include "h5util.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "checkpoint.h passes HDF5 ids as int64_t");

#define CONFIG_ENTRY "config.json"
#define METADATA_ENTRY "metadata.json"
#define WEIGHTS_ENTRY "model.weights.h5"
#define NPZ_ENTRY "model.weights.npz"

/* ---------------------------------------------------------------- reading */

static kc_status open_archive(const char *path, zip_t **out) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return kc__fail(KC_STATUS_IO, "cannot open '%s': %s", path, strerror(errno));
    fclose(f);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, code);
        kc_status s = code == ZIP_ER_OPEN || code == ZIP_ER_READ || code == ZIP_ER_NOENT
                          ? kc__fail(KC_STATUS_IO, "cannot read '%s': %s", path, zip_error_strerror(&ze))
                          : kc__fail(KC_STATUS_BAD_FILE,
                                     "'%s' is not a valid .keras file (a zip archive): %s; the file is damaged or "
                                     "was not written by Keras 3",
                                     path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return s;
    }
    *out = za;
    return KC_STATUS_OK;
}

/* After an entry's last byte: libzip compares the CRC only when a read reaches the end, so
 * read once more; the data must end there and its CRC must match the archive's. */
static kc_status entry_end(zip_file_t *zf, const char *path, const char *name) {
    char extra;
    zip_int64_t r = zip_fread(zf, &extra, 1);
    if (r == 0) return KC_STATUS_OK;
    if (r > 0)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': entry '%s' holds more data than its size says; the file is damaged",
                        path, name);
    zip_error_t *e = zip_file_get_error(zf);
    if (zip_error_code_zip(e) == ZIP_ER_CRC)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': entry '%s' fails its CRC check; the file is damaged", path, name);
    return kc__fail(KC_STATUS_BAD_FILE, "'%s': cannot read entry '%s': %s; the file is damaged", path, name,
                    zip_file_strerror(zf));
}

/* What an entry may claim before it is read (its size in the central directory, zip_stat):
 * the JSON entries are a few KB to a few MB for real models, so 64 MiB is far beyond any of
 * them; the weights get 16 GiB (4 G float32 parameters, more than one machine trains with
 * kerac) or the memory limit (kc_device_opts.memory_limit, --memory-limit) when one is set,
 * since every byte of them becomes a parameter. */
#define KC_JSON_ENTRY_MAX ((zip_uint64_t)64 << 20)
#define KC_WEIGHTS_ENTRY_MAX ((zip_uint64_t)16 << 30)
#define KC_ENTRY_CHUNK ((zip_uint64_t)1 << 20)

static zip_uint64_t entry_max(const char *name, size_t memory_limit) {
    size_t n = strlen(name);
    if (n >= 5 && !strcmp(name + n - 5, ".json")) return KC_JSON_ENTRY_MAX;
    return memory_limit && memory_limit < KC_WEIGHTS_ENTRY_MAX ? (zip_uint64_t)memory_limit : KC_WEIGHTS_ENTRY_MAX;
}

/* Refuse entry `name` when its stated size is unreadable or over `max`, before it is read. */
static kc_status entry_size(zip_t *za, const char *path, const char *name, zip_uint64_t max, zip_stat_t *st,
                            bool *present) {
    zip_stat_init(st);
    *present = zip_stat(za, name, 0, st) == 0;
    if (!*present) return KC_STATUS_OK;
    if (!(st->valid & ZIP_STAT_SIZE))
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': the size of entry '%s' is unreadable; the file is damaged", path, name);
    if (st->size > max) {
        char mib[48] = "";
        if (max % ((zip_uint64_t)1 << 20) == 0) snprintf(mib, sizeof mib, " = %llu MiB", (unsigned long long)(max >> 20));
        return kc__fail(KC_STATUS_BAD_FILE,
                        "'%s': entry '%s' says it holds %llu bytes, over %s (%llu bytes%s); the file is damaged or "
                        "not a real model",
                        path, name, (unsigned long long)st->size,
                        max == KC_JSON_ENTRY_MAX      ? "the limit for a JSON entry"
                        : max == KC_WEIGHTS_ENTRY_MAX ? "the limit for the weights"
                                                      : "the memory limit",
                        (unsigned long long)max, mib);
    }
    return KC_STATUS_OK;
}

/* The whole entry `name` (NUL-terminated, malloc'd), refused over `max` bytes before it is
 * read and read in bounded chunks, never past its stated size. *present = false (OK) when
 * absent. */
static kc_status read_entry(zip_t *za, const char *path, const char *name, zip_uint64_t max, char **data, size_t *len,
                            bool *present) {
    *data = NULL;
    *len = 0;
    zip_stat_t st;
    KC_TRY(entry_size(za, path, name, max, &st, present));
    if (!*present) return KC_STATUS_OK;
    char *buf = malloc((size_t)st.size + 1);
    if (!buf)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for entry '%s' of '%s' (%llu bytes)", name, path,
                        (unsigned long long)st.size);
    zip_file_t *zf = zip_fopen(za, name, 0);
    if (!zf) {
        free(buf);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': cannot open entry '%s': %s", path, name, zip_strerror(za));
    }
    zip_uint64_t got = 0;
    while (got < st.size) {
        zip_int64_t r = zip_fread(zf, buf + got, KC_MIN(st.size - got, KC_ENTRY_CHUNK));
        if (r < 0) {
            kc_status s = kc__fail(KC_STATUS_BAD_FILE, "'%s': cannot read entry '%s': %s; the file is damaged", path, name,
                                   zip_file_strerror(zf));
            zip_fclose(zf);
            free(buf);
            return s;
        }
        if (r == 0) break;
        got += (zip_uint64_t)r;
    }
    kc_status crc = got == st.size ? entry_end(zf, path, name) : KC_STATUS_OK;
    zip_fclose(zf);
    if (crc != KC_STATUS_OK) {
        free(buf);
        return crc;
    }
    if (got != st.size) {
        free(buf);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': entry '%s' is truncated (%llu of %llu bytes)", path, name,
                        (unsigned long long)got, (unsigned long long)st.size);
    }
    buf[got] = '\0';
    *data = buf;
    *len = (size_t)got;
    return KC_STATUS_OK;
}

/* model.weights.h5 of an open archive (refused over `max` bytes), as an in-memory HDF5 file. */
static kc_status open_weights(zip_t *za, const char *path, zip_uint64_t max, hid_t *f) {
    *f = H5I_INVALID_HID;
    char *h5 = NULL;
    size_t len = 0;
    bool present = false;
    KC_TRY(read_entry(za, path, WEIGHTS_ENTRY, max, &h5, &len, &present));
    if (!present) {
        if (zip_name_locate(za, NPZ_ENTRY, 0) >= 0)
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            "'%s' stores its weights as " NPZ_ENTRY " (saved with weights_format=\"npz\"); kerac reads "
                            WEIGHTS_ENTRY " only: re-save the model in Keras with the default weights format",
                            path);
        return kc__fail(KC_STATUS_BAD_FILE, "'%s' has no " WEIGHTS_ENTRY " entry: the model's weights are missing", path);
    }
    kc_status s = kc__h5_open_image(h5, len, f);
    free(h5);
    if (s != KC_STATUS_OK) return kc__wrap(s, "'%s': " WEIGHTS_ENTRY ": ", path);
    return KC_STATUS_OK;
}

/* The model's before_alloc hook: the saved shapes against the config's, before any
 * parameter is allocated (a config asking for far more than the file holds stops here);
 * the message is kept to be given as it is, not as a config error. */
typedef struct shape_check {
    hid_t f;
    const char *label;
    bool failed;
    char msg[KC_ERROR_MAX];
} shape_check;

static kc_status check_shapes(kc_model *m, void *user) {
    shape_check *c = user;
    kc_status s = kc__keras3_weights_check(m, c->f, c->label);
    if (s != KC_STATUS_OK) {
        c->failed = true;
        snprintf(c->msg, sizeof c->msg, "%s", kc_last_error());
    }
    return s;
}

/* The model of config.json, its shapes checked against the open weights file before it
 * allocates anything. */
static kc_status model_from_config(zip_t *za, const char *path, const kc_device_opts *dev, shape_check *c,
                                   kc_model **m) {
    char *config = NULL;
    size_t len = 0;
    bool present = false;
    KC_TRY(read_entry(za, path, CONFIG_ENTRY, KC_JSON_ENTRY_MAX, &config, &len, &present));
    if (!present)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s' has no " CONFIG_ENTRY " entry, so it is not a Keras 3 model file", path);
    kc_status s = kc__model_from_json_hooked(config, len, dev, check_shapes, c, m);
    free(config);
    if (s != KC_STATUS_OK && c->failed) return kc__fail(s, "%s", c->msg);
    if (s != KC_STATUS_OK) kc__wrap(s, "'%s': " CONFIG_ENTRY ": ", path);
    return s;
}

kc_status kc__keras_archive_load(const char *path, const kc_device_opts *dev, kc_model **out) {
    *out = NULL;
    kc__h5_quiet();
    zip_t *za = NULL;
    KC_TRY(open_archive(path, &za));
    kc_model *m = NULL;
    const size_t limit = dev ? dev->memory_limit : 0;
    /* every entry's stated size is checked before any is read or the model is built */
    kc_status s = KC_STATUS_OK;
    const char *const entries[] = {CONFIG_ENTRY, METADATA_ENTRY, WEIGHTS_ENTRY};
    for (size_t i = 0; i < KC_ARRAY_LEN(entries) && s == KC_STATUS_OK; i++) {
        zip_stat_t st;
        bool present;
        s = entry_size(za, path, entries[i], entry_max(entries[i], limit), &st, &present);
    }
    shape_check c = {.f = H5I_INVALID_HID};
    char label[1100];
    snprintf(label, sizeof label, "'%s': " WEIGHTS_ENTRY, path);
    c.label = label;
    if (s == KC_STATUS_OK && zip_name_locate(za, CONFIG_ENTRY, 0) < 0)
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s' has no " CONFIG_ENTRY " entry, so it is not a Keras 3 model file", path);
    if (s == KC_STATUS_OK) s = open_weights(za, path, entry_max(WEIGHTS_ENTRY, limit), &c.f);
    if (s == KC_STATUS_OK) s = model_from_config(za, path, dev, &c, &m);
    if (s == KC_STATUS_OK) {
        char *meta = NULL;
        size_t mlen = 0;
        bool has_meta = false;
        if (read_entry(za, path, METADATA_ENTRY, KC_JSON_ENTRY_MAX, &meta, &mlen, &has_meta) == KC_STATUS_OK &&
            has_meta) {
            kc__log(KC_LOG_DEBUG, "'%s': %s", path, meta);
            s = kc__metadata_read(m, path, meta, mlen);
        }
        free(meta);
        if (s == KC_STATUS_OK) kc__clear_error();
        if (s == KC_STATUS_OK) s = kc__keras3_weights_read(m, c.f, label);
    }
    if (c.f >= 0) H5Fclose(c.f);
    zip_discard(za);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(m);
        return s;
    }
    *out = m;
    return KC_STATUS_OK;
}

kc_status kc__keras_archive_load_weights(kc_model *m, const char *path) {
    kc__h5_quiet();
    KC_TRY(kc_model_build(m));
    zip_t *za = NULL;
    KC_TRY(open_archive(path, &za));
    hid_t f = H5I_INVALID_HID;
    kc_status s = open_weights(za, path, KC_WEIGHTS_ENTRY_MAX, &f);
    zip_discard(za);
    if (s != KC_STATUS_OK) return s;
    char label[1100];
    snprintf(label, sizeof label, "'%s': " WEIGHTS_ENTRY, path);
    s = kc__keras3_weights_read(m, f, label);
    H5Fclose(f);
    return s;
}

/* ---------------------------------------------------------------- writing */

static kc_status zip_failure(const char *path, const char *what, const char *why) {
    return kc__fail(KC_STATUS_INTERNAL, "saving '%s': cannot %s the zip archive: %s", path, what, why);
}

/* A zip archive with the given stored entries, built in memory (malloc'd bytes). */
static kc_status make_zip(const char *path, const char *const *names, const char *const *data, const size_t *lens, int n,
                          char **out, size_t *out_len) {
    *out = NULL;
    *out_len = 0;
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    if (!src) {
        kc_status s = zip_failure(path, "start", zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return s;
    }
    zip_t *za = zip_open_from_source(src, ZIP_CREATE | ZIP_TRUNCATE, &ze);
    if (!za) {
        kc_status s = zip_failure(path, "start", zip_error_strerror(&ze));
        zip_error_fini(&ze);
        zip_source_free(src);
        return s;
    }
    zip_error_fini(&ze);
    zip_source_keep(src); /* it holds the result after zip_close */
    time_t now = time(NULL);
    for (int i = 0; i < n; i++) {
        zip_source_t *e = zip_source_buffer(za, data[i], lens[i], 0);
        zip_int64_t idx = e ? zip_file_add(za, names[i], e, ZIP_FL_ENC_UTF_8 | ZIP_FL_OVERWRITE) : -1;
        if (idx < 0) {
            if (e) zip_source_free(e);
            kc_status s = zip_failure(path, "add an entry to", zip_strerror(za));
            zip_discard(za);
            zip_source_free(src);
            return s;
        }
        if (zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0 ||
            zip_file_set_mtime(za, (zip_uint64_t)idx, now, 0) != 0) {
            kc_status s = zip_failure(path, "set up an entry of", zip_strerror(za));
            zip_discard(za);
            zip_source_free(src);
            return s;
        }
    }
    if (zip_close(za) != 0) {
        kc_status s = zip_failure(path, "finish", zip_strerror(za));
        zip_discard(za);
        zip_source_free(src);
        return s;
    }
    zip_stat_t st;
    zip_stat_init(&st);
    char *buf = NULL;
    kc_status s = KC_STATUS_OK;
    if (zip_source_open(src) != 0) {
        s = zip_failure(path, "read back", zip_error_strerror(zip_source_error(src)));
    } else {
        if (zip_source_stat(src, &st) != 0 || !(st.valid & ZIP_STAT_SIZE)) {
            s = zip_failure(path, "measure", zip_error_strerror(zip_source_error(src)));
        } else if (!(buf = malloc((size_t)st.size + 1))) {
            s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s' (%llu bytes)", path,
                         (unsigned long long)st.size);
        } else if (zip_source_read(src, buf, st.size) != (zip_int64_t)st.size) {
            s = zip_failure(path, "read back", zip_error_strerror(zip_source_error(src)));
        }
        zip_source_close(src);
    }
    zip_source_free(src);
    if (s != KC_STATUS_OK) {
        free(buf);
        return s;
    }
    *out = buf;
    *out_len = (size_t)st.size;
    return KC_STATUS_OK;
}

/* config.json + "compile_config": the object text goes in before the closing brace. */
static kc_status add_compile_config(const char *path, char **config, const char *compile_config) {
    size_t n = strlen(*config), c = strlen(compile_config);
    while (n > 0 && (*config)[n - 1] != '}') n--;
    if (n == 0) return kc__fail(KC_STATUS_INTERNAL, "saving '%s': the model config is not a JSON object", path);
    char *out = malloc(n + c + 32);
    if (!out) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s'", path);
    memcpy(out, *config, n - 1);
    sprintf(out + n - 1, ", \"compile_config\": %s}", compile_config);
    free(*config);
    *config = out;
    return KC_STATUS_OK;
}

/* The archive, with the extras of a checkpoint when x is not NULL (checkpoint.h). */
static kc_status archive_save(kc_model *m, const char *path, const kc__archive_extras *x) {
    kc__h5_quiet();
    KC_TRY(kc_model_build(m));
    char *config = NULL, *weights = NULL, *zipped = NULL;
    size_t wlen = 0, zlen = 0;
    /* Python's json.dumps separators (", ", ": "), no compile_config (a plain save keeps
     * no optimizer state; Keras omits the key for an uncompiled model) */
    kc_status s = kc__model_to_json_flags(m, 3, 0, &config);
    if (s == KC_STATUS_OK && x && x->compile_config) s = add_compile_config(path, &config, x->compile_config);
    /* model.weights.h5: made in memory */
    if (s == KC_STATUS_OK) {
        size_t expect = x ? x->h5_bytes : 0;
        for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
            kc_weight_info wi;
            if (kc_model_weight_info(m, g, &wi) == KC_STATUS_OK) expect += (size_t)wi.size * sizeof(float) + 1024;
        }
        hid_t f = H5I_INVALID_HID;
        s = kc__h5_create_file(expect, false, &f);
        if (s == KC_STATUS_OK) {
            s = kc__keras3_weights_write(m, f);
            if (s == KC_STATUS_OK && x && x->write_h5) s = x->write_h5(m, (int64_t)f, x->user);
            if (s == KC_STATUS_OK) s = kc__h5_close_image(f, (void **)&weights, &wlen);
            else kc__h5_discard(f);
        }
    }
    if (s != KC_STATUS_OK) {
        free(config);
        free(weights);
        return kc__wrap(s, "saving '%s': ", path);
    }
    char date[32];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(date, sizeof date, "%Y-%m-%d@%H:%M:%S", &tm);
    char *meta = kc__metadata_json(m, KC_KERAS3_VERSION, date);
    if (!meta) {
        free(config);
        free(weights);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    enum { MAX_ENTRIES = 8 };
    const char *names[MAX_ENTRIES] = {METADATA_ENTRY, CONFIG_ENTRY, WEIGHTS_ENTRY};
    const char *data[MAX_ENTRIES] = {meta, config, weights};
    size_t lens[MAX_ENTRIES] = {strlen(meta), strlen(config), wlen};
    int n_entries = 3;
    for (int i = 0; x && i < x->n_entries && n_entries < MAX_ENTRIES; i++, n_entries++) {
        names[n_entries] = x->names[i];
        data[n_entries] = x->data[i];
        lens[n_entries] = x->lens[i];
    }
    s = make_zip(path, names, data, lens, n_entries, &zipped, &zlen);
    if (s == KC_STATUS_OK) s = kc__write_file_atomic(path, zipped, zlen);
    free(zipped);
    free(weights);
    free(config);
    free(meta);
    return s;
}

kc_status kc__keras_archive_save(kc_model *m, const char *path) { return archive_save(m, path, NULL); }

/* ---------------------------------------------------------------- checkpoint hooks */

kc_status kc__keras_archive_save_ex(kc_model *m, const char *path, const kc__archive_extras *x) {
    return archive_save(m, path, x);
}

kc_status kc__keras_archive_verify(const char *path) {
    zip_t *za = NULL;
    KC_TRY(open_archive(path, &za));
    kc_status s = KC_STATUS_OK;
    char buf[1 << 14];
    zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n && s == KC_STATUS_OK; i++) {
        const char *name = zip_get_name(za, (zip_uint64_t)i, 0);
        zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
        if (!zf) {
            s = kc__fail(KC_STATUS_BAD_FILE, "'%s': cannot open entry '%s': %s; the file is damaged", path,
                         name ? name : "?", zip_strerror(za));
            break;
        }
        zip_int64_t r;
        while ((r = zip_fread(zf, buf, sizeof buf)) > 0) continue;
        if (r < 0) s = entry_end(zf, path, name ? name : "?"); /* the read error, said as entry_end says it */
        zip_fclose(zf);
    }
    zip_discard(za);
    return s;
}

kc_status kc__keras_archive_read_entry(const char *path, const char *name, char **data, size_t *len, bool *present) {
    *data = NULL;
    *len = 0;
    *present = false;
    zip_t *za = NULL;
    KC_TRY(open_archive(path, &za));
    kc_status s = read_entry(za, path, name, entry_max(name, 0), data, len, present);
    zip_discard(za);
    return s;
}

kc_status kc__keras_archive_open_weights(const char *path, int64_t *file) {
    *file = H5I_INVALID_HID;
    kc__h5_quiet();
    zip_t *za = NULL;
    KC_TRY(open_archive(path, &za));
    hid_t f = H5I_INVALID_HID;
    kc_status s = open_weights(za, path, KC_WEIGHTS_ENTRY_MAX, &f);
    zip_discard(za);
    if (s == KC_STATUS_OK) *file = (int64_t)f;
    return s;
}
