/* test_keras_files.c — Keras model files: .keras archives, Keras 2 .h5 model files and
 * weights-only .weights.h5 / .h5 files. Round trips of a Sequential CNN with
 * BatchNormalization (non-trainable weights) and of a Functional residual net whose layers
 * were added in another order than Keras's graph order: identical weights and identical
 * predictions after save + load. The files are opened here with libzip and HDF5 directly
 * to check the zip entries, the HDF5 paths, attributes and dataset shapes against the
 * layout Keras writes. A hand-made Keras 3 legacy .h5 file (variable-length strings,
 * weight names without ":0", layer_names split in two) checks the reader's leniency.
 * Bad files: truncated zip, no config.json, npz weights, no weights, garbage HDF5, a
 * weight of the wrong shape, a missing variable, an unknown layer class, a file from
 * another model, saving into a missing folder or over a folder (no file left behind). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <jansson.h>
#include <zip.h>

#include "kerac.h"
#include "weight_index.h"

/* ---------------------------------------------------------------- helpers */

static char g_dir[256]; /* a scratch folder for this run */

static const char *tpath(const char *name) {
    static char buf[64][512];
    static int k;
    char *p = buf[k++ % 64];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

static void expect_error(kc_status got, kc_status want, const char *const *words) {
    if (got != want)
        fail_msg("expected status '%s', got '%s': %s", kc_status_name(want), kc_status_name(got), kc_last_error());
    for (int i = 0; words && words[i]; i++)
        if (!strstr(kc_last_error(), words[i])) fail_msg("message lacks '%s': %s", words[i], kc_last_error());
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static bool exists(const char *path) { return access(path, F_OK) == 0; }

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

static void spit(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s", path);
    assert_int_equal(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* Random weights everywhere (positive moving variances) so that a round trip that loses
 * or mixes up a weight changes the predictions. */
static void randomize(kc_model *m, uint32_t seed) {
    uint32_t x = seed * 2654435761u + 1;
    for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
        kc_weight_info wi;
        must(kc_model_weight_info(m, g, &wi), "weight_info");
        float *v = malloc((size_t)wi.size * sizeof *v);
        assert_non_null(v);
        bool positive = strcmp(wi.name, "moving_variance") == 0 || strcmp(wi.name, "gamma") == 0;
        for (int64_t i = 0; i < wi.size; i++) {
            x = x * 1664525u + 1013904223u;
            float u = (float)(x >> 8) / 16777216.0f; /* [0, 1) */
            v[i] = positive ? 0.5f + u : (u - 0.5f) * 0.8f;
        }
        must(kc_model_set_weight(m, g, v, wi.size), "set_weight");
        free(v);
    }
}

/* Sequential CNN: Conv2D, BatchNormalization, MaxPooling2D, Conv2D, Flatten, Dropout, Dense. */
static kc_model *seq_cnn(void) {
    kc_model *m = NULL;
    must(kc_sequential("seq_cnn", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {8, 8, 2}));
    kc_add(m, KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .padding = "same", .activation = "relu"));
    kc_add(m, KC_BATCHNORM());
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.25f));
    must(kc_add(m, KC_DENSE(.units = 3, .activation = "softmax")), "add dense");
    must(kc_model_build(m), "build seq_cnn");
    randomize(m, 1);
    return m;
}

/* Functional residual net, the shortcut added first: kerac's order is
 * input, conv2d (1x1 shortcut), conv2d_1, batch_normalization, re_lu, conv2d_2, add,
 * global_average_pooling2d, dense; Keras's graph order puts the shortcut after conv2d_2. */
static kc_model *resnet(void) {
    kc_model *m = NULL;
    must(kc_functional("resnet", &m), "functional");
    kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 3}));
    kc_node s = kc_apply(m, KC_CONV2D(.filters = 5, .kernel_size = {1, 1}), x);
    kc_node a = kc_apply(m, KC_CONV2D(.filters = 5, .kernel_size = {3, 3}, .padding = "same"), x);
    a = kc_apply(m, KC_BATCHNORM(), a);
    a = kc_apply(m, KC_RELU(), a);
    kc_node b = kc_apply(m, KC_CONV2D(.filters = 5, .kernel_size = {3, 3}, .padding = "same"), a);
    kc_node y = kc_merge(m, KC_ADD(), (kc_node[]){b, s}, 2);
    y = kc_apply(m, KC_GLOBALAVGPOOL2D(), y);
    y = kc_apply(m, KC_DENSE(.units = 4, .activation = "softmax"), y);
    must(kc_set_output(m, y), "set_output");
    must(kc_model_build(m), "build resnet");
    randomize(m, 2);
    return m;
}

static float *inputs(kc_model *m, int n) {
    kc_shape s;
    must(kc_model_input_shape(m, &s), "input_shape");
    int64_t size = 1;
    for (int i = 0; i < s.rank; i++) size *= s.dim[i];
    float *x = malloc((size_t)(n * size) * sizeof *x);
    assert_non_null(x);
    for (int64_t i = 0; i < n * size; i++) x[i] = (float)((i * 7919) % 113) / 113.0f - 0.4f;
    return x;
}

/* predictions for n examples (malloc'd) and their count of floats */
static float *predict(kc_model *m, const float *x, int n, int64_t *count) {
    kc_shape s;
    must(kc_model_output_shape(m, &s), "output_shape");
    int64_t size = 1;
    for (int i = 0; i < s.rank; i++) size *= s.dim[i];
    float *y = malloc((size_t)(n * size) * sizeof *y);
    assert_non_null(y);
    must(kc_predict(m, x, n, 4, y), "predict");
    *count = n * size;
    return y;
}

static void same_predictions(kc_model *a, kc_model *b) {
    float *x = inputs(a, 6);
    int64_t na = 0, nb = 0;
    float *ya = predict(a, x, 6, &na), *yb = predict(b, x, 6, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(ya, yb, (size_t)na * sizeof(float));
    free(x);
    free(ya);
    free(yb);
}

static float *weight_values(kc_model *m, int g, int64_t *size) {
    kc_weight_info wi;
    must(kc_model_weight_info(m, g, &wi), "weight_info");
    float *v = malloc((size_t)wi.size * sizeof *v);
    assert_non_null(v);
    must(kc_model_get_weight(m, g, v, wi.size), "get_weight");
    *size = wi.size;
    return v;
}

static void same_weights(kc_model *a, kc_model *b) {
    int n = kc_model_num_weights(a);
    assert_int_equal(n, kc_model_num_weights(b));
    for (int g = 0; g < n; g++) {
        kc_weight_info wa, wb;
        must(kc_model_weight_info(a, g, &wa), "weight_info");
        must(kc_model_weight_info(b, g, &wb), "weight_info");
        assert_string_equal(wa.layer, wb.layer);
        assert_string_equal(wa.name, wb.name);
        assert_int_equal(wa.size, wb.size);
        assert_int_equal(wa.trainable, wb.trainable);
        int64_t sa, sb;
        float *va = weight_values(a, g, &sa), *vb = weight_values(b, g, &sb);
        assert_memory_equal(va, vb, (size_t)sa * sizeof(float));
        free(va);
        free(vb);
    }
}

/* ---------------------------------------------------------------- zip and HDF5 probes */

/* The bytes of one zip entry (NULL when absent). */
static char *zip_entry(const char *path, const char *name, size_t *len) {
    int err = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &err);
    if (!za) fail_msg("zip_open %s: %d", path, err);
    zip_stat_t st;
    char *buf = NULL;
    if (zip_stat(za, name, 0, &st) == 0) {
        buf = malloc((size_t)st.size + 1);
        assert_non_null(buf);
        zip_file_t *f = zip_fopen(za, name, 0);
        assert_non_null(f);
        assert_int_equal(zip_fread(f, buf, st.size), (zip_int64_t)st.size);
        zip_fclose(f);
        buf[st.size] = '\0';
        *len = (size_t)st.size;
    }
    zip_discard(za);
    return buf;
}

/* A zip archive with the given entries (data NULL: skipped). */
static void write_zip(const char *path, const char *const *names, char *const *data, const size_t *lens, int n) {
    unlink(path);
    int err = 0;
    zip_t *za = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    assert_non_null(za);
    for (int i = 0; i < n; i++) {
        if (!data[i]) continue;
        zip_source_t *s = zip_source_buffer(za, data[i], lens[i], 0);
        assert_non_null(s);
        assert_true(zip_file_add(za, names[i], s, ZIP_FL_ENC_UTF_8) >= 0);
    }
    assert_int_equal(zip_close(za), 0);
}

/* Rebuild archive `src` as `dst` with entry `name` replaced by (data, len) (NULL: removed). */
static void rezip(const char *src, const char *dst, const char *name, char *data, size_t len) {
    static const char *const names[3] = {"metadata.json", "config.json", "model.weights.h5"};
    char *d[3];
    size_t l[3];
    for (int i = 0; i < 3; i++) {
        if (!strcmp(names[i], name)) {
            d[i] = data;
            l[i] = len;
        } else {
            d[i] = zip_entry(src, names[i], &l[i]);
        }
    }
    write_zip(dst, names, d, l, 3);
    for (int i = 0; i < 3; i++)
        if (strcmp(names[i], name)) free(d[i]);
}

typedef struct pathlist {
    char *v[256];
    int n;
} pathlist;

static herr_t collect_cb(hid_t g, const char *name, const H5L_info_t *info, void *op) {
    (void)g;
    (void)info;
    pathlist *p = op;
    if (p->n < 256) p->v[p->n++] = strdup(name);
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every link path in the file, sorted, compared with the expected list. */
static void check_paths(hid_t f, const char *const *want) {
    pathlist p = {{0}, 0};
    assert_true(H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, collect_cb, &p) >= 0);
    qsort(p.v, (size_t)p.n, sizeof p.v[0], cmp_str);
    int nw = 0;
    while (want[nw]) nw++;
    const char **w = malloc((size_t)nw * sizeof *w);
    memcpy(w, want, (size_t)nw * sizeof *w);
    qsort(w, (size_t)nw, sizeof *w, cmp_str);
    for (int i = 0; i < p.n || i < nw; i++) {
        const char *got = i < p.n ? p.v[i] : "(none)", *exp = i < nw ? w[i] : "(none)";
        if (strcmp(got, exp)) fail_msg("HDF5 path #%d: got '%s', expected '%s'", i, got, exp);
    }
    for (int i = 0; i < p.n; i++) free(p.v[i]);
    free(w);
}

/* Dataset shape and float32 type; values into dst when not NULL. */
static void check_dataset(hid_t f, const char *path, int rank, const int *dims, float *dst) {
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) fail_msg("no dataset '%s'", path);
    hid_t t = H5Dget_type(d), s = H5Dget_space(d);
    assert_true(H5Tequal(t, H5T_IEEE_F32LE) > 0);
    hsize_t got[8];
    assert_int_equal(H5Sget_simple_extent_ndims(s), rank);
    H5Sget_simple_extent_dims(s, got, NULL);
    for (int i = 0; i < rank; i++)
        if ((int)got[i] != dims[i]) fail_msg("'%s' dim %d is %d, expected %d", path, i, (int)got[i], dims[i]);
    if (dst) assert_true(H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) >= 0);
    H5Tclose(t);
    H5Sclose(s);
    H5Dclose(d);
}

/* A string attribute as text: fixed (scalar or element i of an array) or variable length. */
static char *attr_string(hid_t obj, const char *name, int i, bool *is_vlen, int *count) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) fail_msg("no attribute '%s'", name);
    hid_t t = H5Aget_type(a), s = H5Aget_space(a);
    int n = (int)H5Sget_simple_extent_npoints(s);
    if (count) *count = n;
    char *out = NULL;
    if (H5Tget_class(t) != H5T_STRING) {
        assert_int_equal(n, 0); /* only the empty-list float64 array is not a string */
        out = strdup("");
        if (is_vlen) *is_vlen = false;
    } else if (H5Tis_variable_str(t) > 0) {
        char **v = calloc((size_t)n, sizeof *v);
        assert_true(H5Aread(a, t, v) >= 0);
        out = strdup(v[i]);
        H5Dvlen_reclaim(t, s, H5P_DEFAULT, v);
        free(v);
        if (is_vlen) *is_vlen = true;
    } else {
        size_t w = H5Tget_size(t);
        char *buf = calloc((size_t)n, w);
        assert_true(H5Aread(a, t, buf) >= 0);
        out = strndup(buf + (size_t)i * w, w);
        free(buf);
        if (is_vlen) *is_vlen = false;
    }
    H5Tclose(t);
    H5Sclose(s);
    H5Aclose(a);
    return out;
}

static void check_string_list(hid_t obj, const char *name, const char *const *want) {
    int n = 0, nw = 0;
    while (want[nw]) nw++;
    bool vlen = true;
    free(attr_string(obj, name, 0, &vlen, &n));
    assert_int_equal(n, nw);
    if (nw) assert_false(vlen); /* Keras writes lists of bytes: fixed-length strings */
    for (int i = 0; i < nw; i++) {
        char *s = attr_string(obj, name, i, NULL, NULL);
        if (strcmp(s, want[i])) fail_msg("%s[%d] is '%s', expected '%s'", name, i, s, want[i]);
        free(s);
    }
}

static hid_t h5_open_bytes_as_file(const char *bytes, size_t len, const char *name) {
    const char *p = tpath(name);
    spit(p, bytes, len);
    hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    return f;
}

/* ---------------------------------------------------------------- .keras */

static const char *const k_seq_paths[] = {
    "vars", "layers",
    "layers/conv2d", "layers/conv2d/vars", "layers/conv2d/vars/0", "layers/conv2d/vars/1",
    "layers/batch_normalization", "layers/batch_normalization/vars",
    "layers/batch_normalization/vars/0", "layers/batch_normalization/vars/1",
    "layers/batch_normalization/vars/2", "layers/batch_normalization/vars/3",
    "layers/max_pooling2d", "layers/max_pooling2d/vars",
    "layers/conv2d_1", "layers/conv2d_1/vars", "layers/conv2d_1/vars/0", "layers/conv2d_1/vars/1",
    "layers/flatten", "layers/flatten/vars", "layers/dropout", "layers/dropout/vars",
    "layers/dense", "layers/dense/vars", "layers/dense/vars/0", "layers/dense/vars/1", NULL};

static void test_keras_sequential(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *m2 = NULL;
    const char *path = tpath("seq.keras");
    must(kc_model_save(m, path), "save .keras");
    assert_false(exists(tpath("seq.keras.tmp")));
    must(kc_model_load(path, &m2), "load .keras");
    same_weights(m, m2);
    same_predictions(m, m2);
    assert_string_equal(kc_model_name(m2), "seq_cnn");

    /* the zip: three stored entries in Keras's order */
    int err = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    assert_non_null(za);
    assert_int_equal(zip_get_num_entries(za, 0), 3);
    const char *order[3] = {"metadata.json", "config.json", "model.weights.h5"};
    for (int i = 0; i < 3; i++) {
        zip_stat_t st;
        assert_int_equal(zip_stat_index(za, (zip_uint64_t)i, 0, &st), 0);
        assert_string_equal(st.name, order[i]);
        assert_int_equal(st.comp_method, ZIP_CM_STORE);
    }
    zip_discard(za);
    size_t len = 0;
    char *meta = zip_entry(path, "metadata.json", &len);
    json_t *j = json_loads(meta, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "keras_version")), "3.6.0");
    const char *date = json_string_value(json_object_get(j, "date_saved"));
    assert_non_null(date); /* "YYYY-MM-DD@HH:MM:SS" */
    assert_int_equal(strlen(date), 19);
    assert_true(date[4] == '-' && date[7] == '-' && date[10] == '@' && date[13] == ':' && date[16] == ':');
    assert_int_equal(json_object_size(j), 2);
    json_decref(j);
    free(meta);
    char *config = zip_entry(path, "config.json", &len);
    j = json_loads(config, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "class_name")), "Sequential");
    assert_string_equal(json_string_value(json_object_get(j, "module")), "keras");
    assert_null(json_object_get(j, "compile_config"));
    assert_non_null(strstr(config, "\"batch_shape\": [null, 8, 8, 2]"));
    json_decref(j);
    free(config);

    /* the weights file: exactly Keras 3's tree, float32, trainable before non-trainable */
    char *h5 = zip_entry(path, "model.weights.h5", &len);
    assert_memory_equal(h5, "\x89HDF\r\n\x1a\n", 8);
    hid_t f = h5_open_bytes_as_file(h5, len, "seq_weights.h5");
    free(h5);
    check_paths(f, k_seq_paths);
    check_dataset(f, "layers/conv2d/vars/0", 4, (int[]){3, 3, 2, 4}, NULL);
    check_dataset(f, "layers/conv2d/vars/1", 1, (int[]){4}, NULL);
    check_dataset(f, "layers/conv2d_1/vars/0", 4, (int[]){3, 3, 4, 6}, NULL);
    check_dataset(f, "layers/dense/vars/0", 2, (int[]){24, 3}, NULL);
    const char *bn[4] = {"gamma", "beta", "moving_mean", "moving_variance"};
    for (int i = 0; i < 4; i++) {
        char p[64];
        float got[4];
        int64_t n = 0;
        snprintf(p, sizeof p, "layers/batch_normalization/vars/%d", i);
        check_dataset(f, p, 1, (int[]){4}, got);
        float *want = weight_values(m, weight_index(m, "batch_normalization", bn[i]), &n);
        assert_memory_equal(got, want, sizeof got);
        free(want);
    }
    hid_t g = H5Gopen2(f, "layers/conv2d_1/vars", H5P_DEFAULT);
    bool vlen = false;
    char *name = attr_string(g, "name", 0, &vlen, NULL);
    assert_string_equal(name, "conv2d_1");
    assert_true(vlen);
    free(name);
    H5Gclose(g);
    g = H5Gopen2(f, "vars", H5P_DEFAULT);
    name = attr_string(g, "name", 0, NULL, NULL);
    assert_string_equal(name, "seq_cnn");
    free(name);
    H5Gclose(g);
    H5Fclose(f);

    /* the weights of a .keras file into another model of the same architecture */
    kc_model *m3 = seq_cnn();
    randomize(m3, 99);
    must(kc_model_load_weights(m3, path), "load_weights .keras");
    same_weights(m, m3);
    kc_model_destroy(m3);
    kc_model_destroy(m2);
    kc_model_destroy(m);
}

static void test_keras_functional_order(void **state) {
    (void)state;
    kc_model *m = resnet(), *m2 = NULL;
    const char *path = tpath("res.keras");
    must(kc_model_save(m, path), "save .keras");
    must(kc_model_load(path, &m2), "load .keras");
    same_weights(m, m2);
    same_predictions(m, m2);

    size_t len = 0;
    char *h5 = zip_entry(path, "model.weights.h5", &len);
    hid_t f = h5_open_bytes_as_file(h5, len, "res_weights.h5");
    free(h5);
    static const char *const want[] = {
        "vars", "layers",
        "layers/input_layer", "layers/input_layer/vars",
        "layers/conv2d", "layers/conv2d/vars", "layers/conv2d/vars/0", "layers/conv2d/vars/1",
        "layers/batch_normalization", "layers/batch_normalization/vars",
        "layers/batch_normalization/vars/0", "layers/batch_normalization/vars/1",
        "layers/batch_normalization/vars/2", "layers/batch_normalization/vars/3",
        "layers/re_lu", "layers/re_lu/vars",
        "layers/conv2d_1", "layers/conv2d_1/vars", "layers/conv2d_1/vars/0", "layers/conv2d_1/vars/1",
        "layers/conv2d_2", "layers/conv2d_2/vars", "layers/conv2d_2/vars/0", "layers/conv2d_2/vars/1",
        "layers/add", "layers/add/vars",
        "layers/global_average_pooling2d", "layers/global_average_pooling2d/vars",
        "layers/dense", "layers/dense/vars", "layers/dense/vars/0", "layers/dense/vars/1", NULL};
    check_paths(f, want);
    /* Keras's graph order: the 3x3 main-path convolutions first, the 1x1 shortcut last */
    float k3[3 * 3 * 3 * 5], k1[3 * 5];
    check_dataset(f, "layers/conv2d/vars/0", 4, (int[]){3, 3, 3, 5}, k3);
    check_dataset(f, "layers/conv2d_1/vars/0", 4, (int[]){3, 3, 5, 5}, NULL);
    check_dataset(f, "layers/conv2d_2/vars/0", 4, (int[]){1, 1, 3, 5}, k1);
    int64_t n = 0;
    float *w3 = weight_values(m, weight_index(m, "conv2d_1", "kernel"), &n);
    assert_memory_equal(k3, w3, sizeof k3);
    free(w3);
    float *w1 = weight_values(m, weight_index(m, "conv2d", "kernel"), &n);
    assert_memory_equal(k1, w1, sizeof k1);
    free(w1);
    hid_t g = H5Gopen2(f, "layers/conv2d_2/vars", H5P_DEFAULT);
    char *name = attr_string(g, "name", 0, NULL, NULL);
    assert_string_equal(name, "conv2d"); /* the kerac layer name of the shortcut */
    free(name);
    H5Gclose(g);
    H5Fclose(f);
    kc_model_destroy(m2);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- Keras 2 .h5 */

static void test_h5_roundtrip(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *r = resnet(), *m2 = NULL, *r2 = NULL;
    const char *path = tpath("seq.h5"), *rpath = tpath("res.H5");
    must(kc_model_save(m, path), "save .h5");
    must(kc_model_save(r, rpath), "save .H5");
    assert_false(exists(tpath("seq.h5.tmp")));
    must(kc_model_load(path, &m2), "load .h5");
    must(kc_model_load(rpath, &r2), "load .H5");
    same_weights(m, m2);
    same_predictions(m, m2);
    same_weights(r, r2);
    same_predictions(r, r2);

    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    bool vlen = false;
    char *s = attr_string(f, "keras_version", 0, &vlen, NULL);
    assert_string_equal(s, "2.15.0");
    assert_true(vlen);
    free(s);
    s = attr_string(f, "backend", 0, NULL, NULL);
    assert_string_equal(s, "tensorflow");
    free(s);
    s = attr_string(f, "model_config", 0, &vlen, NULL);
    assert_false(vlen);
    json_t *j = json_loads(s, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "class_name")), "Sequential");
    assert_null(json_object_get(j, "keras_version")); /* model.get_config() only */
    assert_null(json_object_get(j, "module"));       /* Keras 2 flavour */
    assert_non_null(strstr(s, "\"batch_input_shape\": [null, 8, 8, 2]"));
    json_decref(j);
    free(s);
    hid_t mw = H5Gopen2(f, "model_weights", H5P_DEFAULT);
    assert_true(mw >= 0);
    check_string_list(mw, "layer_names",
                      WORDS("conv2d", "batch_normalization", "max_pooling2d", "conv2d_1", "flatten", "dropout", "dense"));
    s = attr_string(mw, "keras_version", 0, &vlen, NULL);
    assert_string_equal(s, "2.15.0");
    assert_false(vlen);
    free(s);
    hid_t g = H5Gopen2(mw, "conv2d", H5P_DEFAULT);
    check_string_list(g, "weight_names", WORDS("conv2d/kernel:0", "conv2d/bias:0"));
    H5Gclose(g);
    g = H5Gopen2(mw, "batch_normalization", H5P_DEFAULT);
    check_string_list(g, "weight_names",
                      WORDS("batch_normalization/gamma:0", "batch_normalization/beta:0",
                            "batch_normalization/moving_mean:0", "batch_normalization/moving_variance:0"));
    H5Gclose(g);
    g = H5Gopen2(mw, "max_pooling2d", H5P_DEFAULT);
    static const char *const none[] = {NULL};
    check_string_list(g, "weight_names", none);
    H5Gclose(g);
    g = H5Gopen2(mw, "top_level_model_weights", H5P_DEFAULT);
    assert_true(g >= 0);
    check_string_list(g, "weight_names", none);
    H5Gclose(g);
    check_dataset(mw, "conv2d/conv2d/kernel:0", 4, (int[]){3, 3, 2, 4}, NULL);
    check_dataset(mw, "dense/dense/bias:0", 1, (int[]){3}, NULL);
    float mv[4];
    int64_t n = 0;
    check_dataset(mw, "batch_normalization/batch_normalization/moving_variance:0", 1, (int[]){4}, mv);
    float *want = weight_values(m, weight_index(m, "batch_normalization", "moving_variance"), &n);
    assert_memory_equal(mv, want, sizeof mv);
    free(want);
    H5Gclose(mw);
    H5Fclose(f);

    /* Functional: layer_names include the InputLayer, in Keras's graph order */
    f = H5Fopen(rpath, H5F_ACC_RDONLY, H5P_DEFAULT);
    mw = H5Gopen2(f, "model_weights", H5P_DEFAULT);
    check_string_list(mw, "layer_names",
                      WORDS("input_layer", "conv2d_1", "batch_normalization", "re_lu", "conv2d_2", "conv2d", "add",
                            "global_average_pooling2d", "dense"));
    H5Gclose(mw);
    H5Fclose(f);

    /* .keras -> .h5 -> .keras keeps everything */
    kc_model *r3 = NULL;
    must(kc_model_save(r2, tpath("res2.keras")), "save .keras");
    must(kc_model_load(tpath("res2.keras"), &r3), "load .keras");
    same_weights(r, r3);
    kc_model_destroy(r3);
    kc_model_destroy(r2);
    kc_model_destroy(m2);
    kc_model_destroy(r);
    kc_model_destroy(m);
}

/* A model_config over 64 KiB needs HDF5's dense attribute storage. */
static void test_h5_big_config(void **state) {
    (void)state;
    kc_model *m = NULL, *m2 = NULL;
    must(kc_sequential("deep", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {4}));
    for (int i = 0; i < 160; i++) kc_add(m, KC_DENSE(.units = 4, .activation = "relu"));
    must(kc_add(m, KC_DENSE(.units = 2)), "add");
    must(kc_model_build(m), "build");
    randomize(m, 3);
    char *text = NULL;
    must(kc_model_to_json(m, 2, &text), "to_json");
    assert_true(strlen(text) > 65536);
    kc_free(text);
    must(kc_model_save(m, tpath("deep.h5")), "save big .h5");
    must(kc_model_load(tpath("deep.h5"), &m2), "load big .h5");
    same_weights(m, m2);
    kc_model_destroy(m2);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- weights only */

static void test_weights_only(void **state) {
    (void)state;
    kc_model *m = resnet(), *m2 = resnet(), *m3 = NULL;
    randomize(m2, 77);
    const char *path = tpath("res.weights.h5");
    must(kc_model_save(m, path), "save .weights.h5");
    must(kc_model_load_weights(m2, path), "load_weights .weights.h5");
    same_weights(m, m2);
    same_predictions(m, m2);
    expect_error(kc_model_load(path, &m3), KC_STATUS_INVALID_ARGUMENT, WORDS("res.weights.h5", "weights-only"));
    assert_null(m3);
    /* the same tree as inside a .keras archive */
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    check_dataset(f, "layers/conv2d_2/vars/0", 4, (int[]){1, 1, 3, 5}, NULL);
    assert_true(H5Lexists(f, "layers/add", H5P_DEFAULT) > 0);
    H5Fclose(f);

    /* Keras 2 save_weights layout: layer_names at the root */
    const char *p2 = tpath("res_k2weights.h5");
    randomize(m2, 78);
    must(kc_model_save_weights(m, p2), "save_weights .h5");
    f = H5Fopen(p2, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Aexists(f, "layer_names") > 0);
    check_dataset(f, "conv2d/conv2d/kernel:0", 4, (int[]){1, 1, 3, 5}, NULL);
    H5Fclose(f);
    must(kc_model_load_weights(m2, p2), "load_weights Keras 2 layout");
    same_weights(m, m2);
    /* a full .h5 model file gives its weights too */
    must(kc_model_save(m, tpath("res_full.h5")), "save .h5");
    randomize(m2, 79);
    must(kc_model_load_weights(m2, tpath("res_full.h5")), "load_weights from a full .h5");
    same_weights(m, m2);

    /* weights of another model: an error, and the model keeps its weights */
    kc_model *other = seq_cnn();
    randomize(m2, 80);
    kc_model *before = resnet();
    randomize(before, 80);
    must(kc_model_save(other, tpath("seq_other.keras")), "save");
    expect_error(kc_model_load_weights(m2, tpath("seq_other.keras")), KC_STATUS_BAD_FILE,
                 WORDS("seq_other.keras", "model.weights.h5"));
    same_weights(m2, before);
    must(kc_model_save(other, tpath("seq2.h5")), "save");
    expect_error(kc_model_load_weights(m2, tpath("seq2.h5")), KC_STATUS_BAD_FILE, WORDS("seq2.h5", "do not belong"));
    same_weights(m2, before);
    expect_error(kc_model_load_weights(m2, tpath("m.json")), KC_STATUS_INVALID_ARGUMENT, WORDS("m.json"));
    expect_error(kc_model_save_weights(m2, tpath("m.keras")), KC_STATUS_INVALID_ARGUMENT, WORDS(".weights.h5"));
    kc_model_destroy(before);
    kc_model_destroy(other);
    kc_model_destroy(m2);
    kc_model_destroy(m);
}

/* A .h5 file as Keras 3 writes the legacy format, made by hand: variable-length strings
 * everywhere, weight names without ":0", layer_names split into layer_names0/1, a Keras 3
 * model_config. */
static hid_t vstr_type(void) {
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    return t;
}

static void put_vstrs(hid_t obj, const char *name, const char **v, int n) {
    hid_t t = vstr_type();
    hsize_t d[1] = {(hsize_t)n};
    hid_t s = n ? H5Screate_simple(1, d, NULL) : H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(H5Awrite(a, t, v) >= 0);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

static void put_f32(hid_t loc, const char *path, int rank, const hsize_t *dims, const float *v) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    hid_t s = H5Screate_simple(rank, dims, NULL);
    hid_t d = H5Dcreate2(loc, path, H5T_IEEE_F32LE, s, lcpl, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    assert_true(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(d);
    H5Sclose(s);
    H5Pclose(lcpl);
}

static const char k3_config[] =
    "{\"module\": \"keras\", \"class_name\": \"Sequential\", \"config\": {\"name\": \"mlp\", \"trainable\": true, "
    "\"dtype\": {\"module\": \"keras\", \"class_name\": \"DTypePolicy\", \"config\": {\"name\": \"float32\"}, "
    "\"registered_name\": null}, \"layers\": [{\"module\": \"keras.layers\", \"class_name\": \"InputLayer\", "
    "\"config\": {\"batch_shape\": [null, 4], \"dtype\": \"float32\", \"sparse\": false, \"name\": \"input_layer\"}, "
    "\"registered_name\": null}, {\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": {\"name\": "
    "\"dense\", \"trainable\": true, \"dtype\": \"float32\", \"units\": 3, \"activation\": \"relu\", \"use_bias\": "
    "true}, \"registered_name\": null}, {\"module\": \"keras.layers\", \"class_name\": \"Dense\", \"config\": "
    "{\"name\": \"dense_1\", \"trainable\": true, \"dtype\": \"float32\", \"units\": 2, \"activation\": \"linear\", "
    "\"use_bias\": true}, \"registered_name\": null}]}}";

static void test_h5_keras3_legacy_lenient(void **state) {
    (void)state;
    const char *path = tpath("k3legacy.h5");
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(f >= 0);
    const char *ver[1] = {"3.3.3"}, *be[1] = {"tensorflow"}, *cfg[1] = {k3_config};
    put_vstrs(f, "keras_version", ver, 0);
    put_vstrs(f, "backend", be, 0);
    put_vstrs(f, "model_config", cfg, 0);
    hid_t mw = H5Gcreate2(f, "model_weights", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *n0[1] = {"dense"}, *n1[1] = {"dense_1"};
    put_vstrs(mw, "layer_names0", n0, 1);
    put_vstrs(mw, "layer_names1", n1, 1);
    put_vstrs(mw, "keras_version", ver, 0);
    float k0[4 * 3], b0[3], k1[3 * 2], b1[2];
    for (int i = 0; i < 12; i++) k0[i] = 0.1f * (float)(i - 5);
    for (int i = 0; i < 3; i++) b0[i] = 0.01f * (float)i;
    for (int i = 0; i < 6; i++) k1[i] = -0.2f * (float)(i - 2);
    for (int i = 0; i < 2; i++) b1[i] = 0.5f;
    hid_t g = H5Gcreate2(mw, "dense", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *w0[2] = {"sequential/dense/kernel", "sequential/dense/bias"};
    put_vstrs(g, "weight_names", w0, 2);
    put_f32(g, w0[0], 2, (hsize_t[]){4, 3}, k0);
    put_f32(g, w0[1], 1, (hsize_t[]){3}, b0);
    H5Gclose(g);
    g = H5Gcreate2(mw, "dense_1", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    const char *w1[2] = {"dense_1/kernel", "dense_1/bias"};
    put_vstrs(g, "weight_names", w1, 2);
    put_f32(g, w1[0], 2, (hsize_t[]){3, 2}, k1);
    put_f32(g, w1[1], 1, (hsize_t[]){2}, b1);
    H5Gclose(g);
    H5Gclose(mw);
    H5Fclose(f);

    kc_model *m = NULL;
    must(kc_model_load(path, &m), "load a Keras 3 legacy .h5");
    assert_string_equal(kc_model_name(m), "mlp");
    int64_t n = 0;
    float *v = weight_values(m, weight_index(m, "dense", "kernel"), &n);
    assert_int_equal(n, 12);
    assert_memory_equal(v, k0, sizeof k0);
    free(v);
    v = weight_values(m, weight_index(m, "dense_1", "bias"), &n);
    assert_memory_equal(v, b1, sizeof b1);
    free(v);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- bad files */

static void test_bad_archives(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *out = NULL;
    char good[512];
    snprintf(good, sizeof good, "%s", tpath("good.keras"));
    must(kc_model_save(m, good), "save");
    size_t len = 0;
    char *bytes = slurp(good, &len);

    /* truncated: the central directory is gone */
    const char *p = tpath("trunc.keras");
    spit(p, bytes, len / 2);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("trunc.keras", "zip"));
    assert_null(out);
    /* not a zip at all */
    p = tpath("text.keras");
    spit(p, "hello, this is not a zip archive", 32);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("text.keras", "not a valid .keras"));
    /* missing */
    expect_error(kc_model_load(tpath("missing.keras"), &out), KC_STATUS_IO, WORDS("missing.keras", "No such file"));

    /* no config.json */
    p = tpath("noconfig.keras");
    rezip(good, p, "config.json", NULL, 0);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("noconfig.keras", "config.json"));
    /* no weights; npz weights */
    p = tpath("noweights.keras");
    rezip(good, p, "model.weights.h5", NULL, 0);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("noweights.keras", "model.weights.h5"));
    {
        size_t cl = 0;
        char *cfg = zip_entry(good, "config.json", &cl);
        const char *names[2] = {"config.json", "model.weights.npz"};
        char *data[2] = {cfg, (char *)"PK npz"};
        size_t lens[2] = {cl, 6};
        p = tpath("npz.keras");
        write_zip(p, names, data, lens, 2);
        expect_error(kc_model_load(p, &out), KC_STATUS_UNSUPPORTED, WORDS("npz.keras", "model.weights.npz"));
        free(cfg);
    }
    /* garbage in place of the HDF5 weights */
    p = tpath("garbage_weights.keras");
    char junk[512];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 37 + 11);
    rezip(good, p, "model.weights.h5", junk, sizeof junk);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("garbage_weights.keras", "model.weights.h5", "HDF5"));
    /* an unknown layer class in config.json */
    {
        size_t cl = 0;
        char *cfg = zip_entry(good, "config.json", &cl);
        char *at = strstr(cfg, "\"Flatten\"");
        assert_non_null(at);
        size_t pre = (size_t)(at - cfg);
        char *bad = malloc(cl + 16);
        memcpy(bad, cfg, pre);
        strcpy(bad + pre, "\"FancyLayer\"");
        strcat(bad, at + strlen("\"Flatten\""));
        p = tpath("fancy.keras");
        rezip(good, p, "config.json", bad, strlen(bad));
        expect_error(kc_model_load(p, &out), KC_STATUS_UNSUPPORTED, WORDS("fancy.keras", "config.json", "FancyLayer"));
        free(bad);
        free(cfg);
    }

    /* a weight of the wrong shape: rewrite layers/dense/vars/0 as (5, 3) */
    {
        size_t wl = 0;
        char *h5 = zip_entry(good, "model.weights.h5", &wl);
        const char *hp = tpath("edit.h5");
        spit(hp, h5, wl);
        free(h5);
        hid_t f = H5Fopen(hp, H5F_ACC_RDWR, H5P_DEFAULT);
        assert_true(f >= 0);
        assert_true(H5Ldelete(f, "layers/dense/vars/0", H5P_DEFAULT) >= 0);
        float z[15] = {0};
        put_f32(f, "layers/dense/vars/0", 2, (hsize_t[]){5, 3}, z);
        H5Fclose(f);
        h5 = slurp(hp, &wl);
        p = tpath("shape.keras");
        rezip(good, p, "model.weights.h5", h5, wl);
        expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE,
                     WORDS("shape.keras", "model.weights.h5", "layer 'dense'", "'kernel'", "(5, 3)", "(24, 3)"));
        free(h5);
        /* a missing variable: remove layers/conv2d/vars/1 */
        h5 = zip_entry(good, "model.weights.h5", &wl);
        spit(hp, h5, wl);
        free(h5);
        f = H5Fopen(hp, H5F_ACC_RDWR, H5P_DEFAULT);
        assert_true(H5Ldelete(f, "layers/conv2d/vars/1", H5P_DEFAULT) >= 0);
        H5Fclose(f);
        h5 = slurp(hp, &wl);
        p = tpath("missingvar.keras");
        rezip(good, p, "model.weights.h5", h5, wl);
        expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE,
                     WORDS("missingvar.keras", "layers/conv2d/vars/1", "'bias'", "missing"));
        free(h5);
    }
    assert_null(out);
    free(bytes);
    kc_model_destroy(m);
}

/* Entries whose stated size is over what kerac reads are refused before they are read: a
 * 64 MiB + 1 config.json (spaces, deflated to a few KB) and, with a memory limit, weights
 * larger than the limit; the message names the entry and the limit. */
static void test_archive_entry_limits(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *out = NULL;
    char good[512];
    snprintf(good, sizeof good, "%s", tpath("limits.keras"));
    must(kc_model_save(m, good), "save");
    size_t big = ((size_t)64 << 20) + 1;
    char *spaces = malloc(big);
    assert_non_null(spaces);
    memset(spaces, ' ', big);
    const char *p = tpath("bigconfig.keras");
    rezip(good, p, "config.json", spaces, big);
    free(spaces);
    struct stat sb;
    assert_int_equal(stat(p, &sb), 0);
    assert_true(sb.st_size < (1 << 20)); /* small on disk, 64 MiB inflated */
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE,
                 WORDS("bigconfig.keras", "'config.json'", "67108865 bytes", "JSON entry", "64 MiB"));
    assert_null(out);
    kc_device_opts opts = {0};
    opts.memory_limit = 4096;
    expect_error(kc_model_load_ex(good, &opts, &out), KC_STATUS_BAD_FILE,
                 WORDS("limits.keras", "'model.weights.h5'", "memory limit", "4096 bytes"));
    assert_null(out);
    opts.memory_limit = (size_t)1 << 30; /* a limit the model fits in loads it */
    must(kc_model_load_ex(good, &opts, &out), "load under a 1 GiB limit");
    kc_model_destroy(out);
    kc_model_destroy(m);
}

/* A config asking for far more parameters than the file holds (units: 3 -> 50,000,000, a
 * 4.8 GB kernel) is refused by the shape check before any parameter is allocated: under a
 * 1 GiB memory limit the error is the shape mismatch, not running out of memory. */
static void test_archive_shapes_before_alloc(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *out = NULL;
    char good[512];
    snprintf(good, sizeof good, "%s", tpath("units.keras"));
    must(kc_model_save(m, good), "save");
    size_t cl = 0;
    char *cfg = zip_entry(good, "config.json", &cl);
    char *at = strstr(cfg, "\"units\": 3");
    assert_non_null(at);
    char *bad = malloc(cl + 16);
    assert_non_null(bad);
    memcpy(bad, cfg, (size_t)(at - cfg));
    strcpy(bad + (at - cfg), "\"units\": 50000000");
    strcat(bad, at + strlen("\"units\": 3"));
    const char *p = tpath("bigunits.keras");
    rezip(good, p, "config.json", bad, strlen(bad));
    kc_device_opts opts = {0};
    opts.memory_limit = (size_t)1 << 30;
    expect_error(kc_model_load_ex(p, &opts, &out), KC_STATUS_BAD_FILE,
                 WORDS("bigunits.keras", "model.weights.h5", "layer 'dense'", "'kernel'", "(24, 3) in the file",
                       "(24, 50000000) in the model"));
    assert_null(out);
    free(bad);
    free(cfg);
    kc_model_destroy(m);
}

static int g_h5_prints;
static herr_t count_prints(hid_t stack, void *data) {
    (void)stack;
    (void)data;
    g_h5_prints++;
    return 0;
}

static void test_bad_h5(void **state) {
    (void)state;
    kc_model *m = seq_cnn(), *out = NULL;
    /* garbage bytes; HDF5's error printing stays off during the call and the caller's
     * handler is back after it */
    const char *p = tpath("garbage.h5");
    char junk[2048];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = (char)(i * 131 + 7);
    spit(p, junk, sizeof junk);
    H5Eset_auto2(H5E_DEFAULT, count_prints, NULL);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("garbage.h5", "not an HDF5 file"));
    expect_error(kc_model_load_weights(m, p), KC_STATUS_BAD_FILE, WORDS("garbage.h5"));
    assert_int_equal(g_h5_prints, 0);
    H5E_auto2_t func = NULL;
    void *data = NULL;
    H5Eget_auto2(H5E_DEFAULT, &func, &data);
    assert_true(func == count_prints);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    /* an HDF5 signature followed by garbage */
    memcpy(junk, "\x89HDF\r\n\x1a\n", 8);
    p = tpath("damaged.h5");
    spit(p, junk, sizeof junk);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("damaged.h5", "HDF5"));
    /* a good file cut short */
    char good[512];
    snprintf(good, sizeof good, "%s", tpath("good.h5"));
    must(kc_model_save(m, good), "save");
    size_t len = 0;
    char *bytes = slurp(good, &len);
    p = tpath("short.h5");
    spit(p, bytes, len / 3);
    kc_status s = kc_model_load(p, &out);
    assert_int_equal(s, KC_STATUS_BAD_FILE);
    assert_non_null(strstr(kc_last_error(), "short.h5"));
    free(bytes);
    /* a weight of the wrong shape */
    p = tpath("shape.h5");
    must(kc_model_save(m, p), "save");
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(H5Ldelete(f, "model_weights/conv2d_1/conv2d_1/kernel:0", H5P_DEFAULT) >= 0);
    float z[3 * 3 * 4 * 7] = {0};
    put_f32(f, "model_weights/conv2d_1/conv2d_1/kernel:0", 4, (hsize_t[]){3, 3, 4, 7}, z);
    H5Fclose(f);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE,
                 WORDS("shape.h5", "layer 'conv2d_1'", "'kernel'", "(3, 3, 4, 7)", "(3, 3, 4, 6)"));
    /* weights only, loaded as a model */
    must(kc_model_save_weights(m, tpath("w_only.h5")), "save_weights");
    expect_error(kc_model_load(tpath("w_only.h5"), &out), KC_STATUS_BAD_FILE, WORDS("w_only.h5", "weights only"));
    /* an HDF5 file that is no Keras file */
    p = tpath("plain.h5");
    f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    H5Fclose(f);
    expect_error(kc_model_load(p, &out), KC_STATUS_BAD_FILE, WORDS("plain.h5", "model_config"));
    expect_error(kc_model_load_weights(m, p), KC_STATUS_BAD_FILE, WORDS("plain.h5", "no Keras weights"));
    assert_null(out);
    kc_model_destroy(m);
}

static void test_atomic_saves(void **state) {
    (void)state;
    kc_model *m = seq_cnn();
    const char *exts[] = {".keras", ".h5", ".weights.h5"};
    for (int i = 0; i < 3; i++) {
        char p[600];
        /* into a folder that does not exist */
        snprintf(p, sizeof p, "%s/no_such_dir/m%s", g_dir, exts[i]);
        expect_error(kc_model_save(m, p), KC_STATUS_IO, WORDS("no_such_dir/m"));
        assert_false(exists(tpath("no_such_dir")));
        /* over a folder: the rename fails and the temporary file is removed */
        snprintf(p, sizeof p, "%s/a_folder%s", g_dir, exts[i]);
        assert_int_equal(mkdir(p, 0700), 0);
        kc_status s = kc_model_save(m, p);
        assert_int_equal(s, KC_STATUS_IO);
        assert_non_null(strstr(kc_last_error(), "a_folder"));
        char tmp[640];
        snprintf(tmp, sizeof tmp, "%s.tmp", p);
        assert_false(exists(tmp));
        rmdir(p);
    }
    /* saving over an existing file replaces it whole */
    const char *p = tpath("over.keras");
    spit(p, "old content", 11);
    must(kc_model_save(m, p), "save over a file");
    kc_model *m2 = NULL;
    must(kc_model_load(p, &m2), "load");
    same_weights(m, m2);
    kc_model_destroy(m2);
    kc_model_destroy(m);
}

/* ---------------------------------------------------------------- main */

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "test_keras_files_%d", (int)getpid());
    if (mkdir(g_dir, 0700) != 0) return -1;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* the probes here expect some failures */
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keras_sequential),
        cmocka_unit_test(test_keras_functional_order),
        cmocka_unit_test(test_h5_roundtrip),
        cmocka_unit_test(test_h5_big_config),
        cmocka_unit_test(test_weights_only),
        cmocka_unit_test(test_h5_keras3_legacy_lenient),
        cmocka_unit_test(test_bad_archives),
        cmocka_unit_test(test_archive_entry_limits),
        cmocka_unit_test(test_archive_shapes_before_alloc),
        cmocka_unit_test(test_bad_h5),
        cmocka_unit_test(test_atomic_saves),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
