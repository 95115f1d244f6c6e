/* fuzz_keras.c — libFuzzer target: the Keras model file readers (kc_model_load on a file).
 * Three input forms:
 *   - bytes starting with "PK": a .keras file itself (the zip layer, libzip);
 *   - bytes starting with the HDF5 signature: a Keras 2 full-model .h5 file (model_config
 *     and layer_names / weight_names attributes, /model_weights);
 *   - otherwise a .keras archive's entries, split by KC_FUZZ_SEP: config.json,
 *     model.weights.h5, metadata.json; the target zips them (an empty part is a missing
 *     entry), so that the mutations reach the config and the HDF5 weights past the zip
 *     checksums.
 * A model that loads is saved again as .keras and .h5, and both must load; no HDF5 object
 * may be left open by any call. */
#include <hdf5.h>
#include <zip.h>

#include "fuzz_common.h"

/* No HDF5 object (file, group, dataset, attribute, type, space) may stay open after a call:
 * one left open keeps its file and HDF5's caches alive, a leak per input. */
static void check_hdf5_closed(const char *after) {
    ssize_t n = H5Fget_obj_count((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL);
    if (n != 0) {
        fprintf(stderr, "%zd HDF5 objects are still open after %s:\n", n, after);
        hid_t ids[16];
        ssize_t k = H5Fget_obj_ids((hid_t)H5F_OBJ_ALL, H5F_OBJ_ALL, 16, ids);
        for (ssize_t i = 0; i < k; i++) {
            char name[256] = "?";
            H5Iget_name(ids[i], name, sizeof name);
            fprintf(stderr, "  id %lld type %d name '%s'\n", (long long)ids[i], (int)H5Iget_type(ids[i]), name);
        }
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_setup();
    /* HDF5 keeps freed blocks on free lists and hands them out again: a block leaked by
     * one call would carry the allocation stack of an earlier one. Free them at once, so
     * that a leak report (and fuzz/lsan.supp) names the call that really leaked. */
    H5open();
    H5set_free_list_limits(0, 0, 0, 0, 0, 0);
    return 0;
}

static void make_archive(const char *path, const uint8_t *data, size_t size) {
    static const char *const names[3] = {"config.json", "model.weights.h5", "metadata.json"};
    fuzz_part parts[3];
    fuzz_split(data, size, parts, 3);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!za) abort();
    for (int i = 0; i < 3; i++) {
        if (parts[i].len == 0) continue;
        zip_source_t *src = zip_source_buffer(za, parts[i].data, parts[i].len, 0);
        zip_int64_t idx = src ? zip_file_add(za, names[i], src, ZIP_FL_OVERWRITE) : -1;
        if (idx < 0) abort();
        zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0);
    }
    if (zip_close(za) != 0) abort();
    if (access(path, F_OK) != 0) fuzz_write(path, (const uint8_t *)"", 0); /* libzip writes no empty archive */
}

static void reload(kc_model *m, const char *path) {
    kc_status s = kc_model_save(m, path);
    check_hdf5_closed("kc_model_save");
    if (s == KC_STATUS_OUT_OF_MEMORY) return;
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "a loaded model cannot be saved as '%s': %s\n", path, kc_last_error());
        abort();
    }
    kc_model *again = NULL;
    s = kc_model_load(path, &again);
    check_hdf5_closed("kc_model_load of a file kerac wrote");
    if (s != KC_STATUS_OK && s != KC_STATUS_OUT_OF_MEMORY) {
        fprintf(stderr, "kerac cannot load the '%s' it wrote: %s\n", path, kc_last_error());
        abort();
    }
    kc_model_destroy(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_path("model.keras");
    if (size >= 8 && memcmp(data, "\x89HDF\r\n\x1a\n", 8) == 0) {
        path = fuzz_path("model.h5");
        fuzz_write(path, data, size);
    } else if (size >= 2 && data[0] == 'P' && data[1] == 'K') {
        fuzz_write(path, data, size);
    } else {
        make_archive(path, data, size);
    }
    kc_model *m = NULL;
    kc_status s = kc_model_load(path, &m);
    check_hdf5_closed("kc_model_load");
    fuzz_check_error(s);
    if (s == KC_STATUS_OK) {
        reload(m, fuzz_path("again.keras"));
        reload(m, fuzz_path("again.h5"));
    }
    kc_model_destroy(m);
    return 0;
}
