/* test_keras_nest.c — kerac saves the models nested in a Keras model nested again: the
 * config (each nested model's class, name, trainable, layers with their original names, its
 * call and training argument) and the weights (Keras 3's scoped paths in model.weights.h5,
 * one /model_weights group per nested model in a legacy .h5) are those of the file Keras
 * wrote, for the nested fixtures written by Keras 3 (.keras, legacy .h5) and tf-keras (.h5);
 * a model fine-tuned by kerac keeps them; kerac reads its own files back the same. Also nested
 * models called twice (siamese) and a nested Functional with two inputs and two outputs,
 * called once (nest_multi) and twice with operation nodes inside (nest_multi2): their calls,
 * InputLayers and the outputs read by tensor index as in Keras's file. */
#include <setjmp.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <hdf5.h>
#include <jansson.h>
#include <zip.h>

#include "io/h5util.h"
#include "kerac.h"

static char g_dir[1024]; /* tests/fixtures/keras */
static char g_tmp[64];

/* dir/name, in one of 8 rotating buffers */
static const char *in_dir(const char *dir, const char *name) {
    static char buf[8][1200];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static const char *fixture(const char *name) { return in_dir(g_dir, name); }
static const char *scratch(const char *name) { return in_dir(g_tmp, name); }

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

/* One member of a .keras archive, NUL-terminated (*len: its size). */
static char *zip_member(const char *path, const char *member, size_t *len) {
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    if (!z) fail_msg("cannot open %s as a zip archive", path);
    zip_stat_t st;
    if (zip_stat(z, member, 0, &st) != 0) fail_msg("%s has no %s", path, member);
    char *buf = malloc(st.size + 1);
    zip_file_t *f = zip_fopen(z, member, 0);
    assert_non_null(f);
    assert_true(zip_fread(f, buf, st.size) == (zip_int64_t)st.size);
    zip_fclose(f);
    zip_close(z);
    buf[st.size] = '\0';
    if (len) *len = st.size;
    return buf;
}

/* The model config of a .keras archive or of a legacy .h5 (its model_config attribute). */
static json_t *model_config(const char *path) {
    char *text = NULL;
    if (strstr(path, ".keras") && strcmp(path + strlen(path) - 6, ".keras") == 0) {
        text = zip_member(path, "config.json", NULL);
    } else {
        hid_t f = H5I_INVALID_HID;
        must(kc__h5_open_path(path, &f), path);
        must(kc__h5_get_string(f, "model_config", &text), "model_config");
        H5Fclose(f);
    }
    json_error_t e;
    json_t *root = json_loads(text, 0, &e);
    if (!root) fail_msg("%s: unreadable config: %s", path, e.text);
    free(text);
    return root;
}

static void cat(char *out, size_t n, const char *s) { snprintf(out + strlen(out), n - strlen(out), "%s", s); }

/* A layer reference as "name/node/tensor": Keras 3's keras_history or Keras 2's [name, node, tensor, kwargs]. */
static void ref_text(const json_t *v, char *out, size_t n) {
    if (json_is_object(v) && json_object_get(v, "config")) v = json_object_get(json_object_get(v, "config"), "keras_history");
    char b[200];
    snprintf(b, sizeof b, "%s/%d/%d", json_string_value(json_array_get(v, 0)), (int)json_integer_value(json_array_get(v, 1)),
             (int)json_integer_value(json_array_get(v, 2)));
    cat(out, n, b);
}

/* The references and the training argument of each node of an entry. */
static void nodes_text(const json_t *nodes, char *out, size_t n) {
    size_t i, j;
    json_t *node, *a;
    json_array_foreach(nodes, i, node) {
        cat(out, n, " <-");
        const json_t *kw = NULL;
        if (json_is_array(node)) { /* Keras 2 */
            json_array_foreach(node, j, a) {
                ref_text(a, out, n);
                cat(out, n, ",");
                kw = json_array_get(a, 3);
            }
        } else {
            json_array_foreach(json_object_get(node, "args"), j, a) {
                if (json_is_array(a)) {
                    size_t q;
                    json_t *t;
                    json_array_foreach(a, q, t) ref_text(t, out, n), cat(out, n, ",");
                } else if (json_is_object(a)) {
                    ref_text(a, out, n);
                    cat(out, n, ",");
                }
            }
            kw = json_object_get(node, "kwargs");
        }
        const json_t *t = json_object_get(kw, "training");
        if (t) cat(out, n, json_is_true(t) ? " training=True" : " training=False");
    }
}

/* The model's skeleton: every entry's class, name and calls, and each nested model's
 * trainable, inputs, outputs and entries, recursively (the model's own trainable: kerac's
 * Keras 2 flavour has never written it). */
static void skeleton(const json_t *model, bool nested, char *out, size_t n) {
    const json_t *cfg = json_object_get(model, "config"), *t = json_object_get(cfg, "trainable");
    cat(out, n, "{");
    if (t && nested) cat(out, n, json_is_true(t) ? "trainable " : "frozen ");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(cfg, "layers"), i, e) {
        const char *name = json_string_value(json_object_get(json_object_get(e, "config"), "name"));
        cat(out, n, json_string_value(json_object_get(e, "class_name")));
        cat(out, n, ":");
        cat(out, n, name ? name : "?");
        nodes_text(json_object_get(e, "inbound_nodes"), out, n);
        if (json_object_get(json_object_get(e, "config"), "layers")) skeleton(e, true, out, n);
        cat(out, n, "; ");
    }
    const json_t *io[2] = {json_object_get(cfg, "input_layers"), json_object_get(cfg, "output_layers")};
    for (int k = 0; k < 2; k++) {
        if (!io[k]) continue;
        cat(out, n, k ? " out=" : " in=");
        if (!json_is_array(json_array_get(io[k], 0))) ref_text(io[k], out, n);
        for (size_t q = 0; json_is_array(json_array_get(io[k], 0)) && q < json_array_size(io[k]); q++) {
            ref_text(json_array_get(io[k], q), out, n);
            cat(out, n, ",");
        }
    }
    cat(out, n, "}");
}

static void skeleton_of(const char *path, char *out, size_t n) {
    json_t *root = model_config(path);
    out[0] = '\0';
    skeleton(root, false, out, n);
    json_decref(root);
}

/* ---------------------------------------------------------------- weights */

typedef struct dset {
    char path[256];
    float *v;
    hssize_t n;
} dset;

typedef struct dsets {
    dset d[256];
    int n;
    const char *under; /* only paths starting so */
} dsets;

static herr_t visit(hid_t g, const char *name, const H5L_info_t *info, void *data) {
    (void)info;
    dsets *ds = data;
    if (strncmp(name, ds->under, strlen(ds->under)) != 0) return 0;
    hid_t o = H5Oopen(g, name, H5P_DEFAULT);
    if (o < 0) return 0;
    if (H5Iget_type(o) == H5I_DATASET && ds->n < 256) {
        dset *d = &ds->d[ds->n++];
        snprintf(d->path, sizeof d->path, "%s", name);
        hid_t sp = H5Dget_space(o);
        d->n = H5Sget_simple_extent_npoints(sp);
        H5Sclose(sp);
        d->v = malloc((size_t)d->n * sizeof(float) + 1);
        assert_true(H5Dread(o, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, d->v) >= 0);
    }
    H5Oclose(o);
    return 0;
}

static void dsets_free(dsets *ds) {
    for (int i = 0; i < ds->n; i++) free(ds->d[i].v);
    ds->n = 0;
}

/* Every dataset under `under` of the weights of `path` (.keras: its model.weights.h5). */
static void read_dsets(const char *path, const char *under, dsets *ds) {
    hid_t f = H5I_INVALID_HID;
    char *image = NULL;
    size_t len = 0;
    if (strcmp(path + strlen(path) - 6, ".keras") == 0) {
        image = zip_member(path, "model.weights.h5", &len);
        must(kc__h5_open_image(image, len, &f), path);
    } else {
        must(kc__h5_open_path(path, &f), path);
    }
    ds->n = 0;
    ds->under = under;
    H5Lvisit(f, H5_INDEX_NAME, H5_ITER_INC, visit, ds);
    H5Fclose(f);
    free(image);
}

static void same_dset(const dset *a, const dset *b, const char *what) {
    if (a->n != b->n || memcmp(a->v, b->v, (size_t)a->n * sizeof(float)) != 0)
        fail_msg("%s: '%s' (%lld values) and '%s' (%lld) differ", what, a->path, (long long)a->n, b->path,
                 (long long)b->n);
}

/* Keras 3's model.weights.h5: the same variables at the same paths (layers/...). */
static void check_keras3_weights(const char *keras, const char *kerac) {
    dsets *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    read_dsets(keras, "layers/", a);
    read_dsets(kerac, "layers/", b);
    if (a->n != b->n) fail_msg("%s has %d variables under layers/, %s has %d", keras, a->n, kerac, b->n);
    for (int i = 0; i < a->n; i++) {
        if (strcmp(a->d[i].path, b->d[i].path) != 0) fail_msg("variable #%d: Keras's '%s', kerac's '%s'", i, a->d[i].path, b->d[i].path);
        same_dset(&a->d[i], &b->d[i], kerac);
    }
    dsets_free(a);
    dsets_free(b);
    free(a);
    free(b);
}

/* A legacy .h5: the same layer_names, and in each layer's (or nested model's) group the same
 * weights in the order of its weight_names (Keras loads by position; names differ between
 * Keras versions). */
static void check_legacy_weights(const char *keras, const char *kerac) {
    hid_t f[2] = {H5I_INVALID_HID, H5I_INVALID_HID};
    must(kc__h5_open_path(keras, &f[0]), keras);
    must(kc__h5_open_path(kerac, &f[1]), kerac);
    kc__strlist names[2] = {{0}, {0}};
    bool found = false;
    for (int k = 0; k < 2; k++) {
        hid_t g = H5Gopen2(f[k], "model_weights", H5P_DEFAULT);
        must(kc__h5_get_strings(g, "layer_names", &names[k], &found), "layer_names");
        H5Gclose(g);
    }
    assert_int_equal(names[0].n, names[1].n);
    for (int i = 0; i < names[0].n; i++) {
        assert_string_equal(names[0].v[i], names[1].v[i]);
        kc__strlist wn[2] = {{0}, {0}};
        hid_t g[2];
        for (int k = 0; k < 2; k++) {
            char p[300];
            snprintf(p, sizeof p, "model_weights/%s", names[k].v[i]);
            g[k] = H5Gopen2(f[k], p, H5P_DEFAULT);
            must(kc__h5_get_strings(g[k], "weight_names", &wn[k], &found), "weight_names");
        }
        if (wn[0].n != wn[1].n) fail_msg("group '%s': Keras lists %d weights, kerac %d", names[0].v[i], wn[0].n, wn[1].n);
        for (int j = 0; j < wn[0].n; j++) {
            dset d[2];
            for (int k = 0; k < 2; k++) {
                snprintf(d[k].path, sizeof d[k].path, "%s", wn[k].v[j]);
                hid_t ds = H5Dopen2(g[k], wn[k].v[j], H5P_DEFAULT);
                assert_true(ds >= 0);
                hid_t sp = H5Dget_space(ds);
                d[k].n = H5Sget_simple_extent_npoints(sp);
                H5Sclose(sp);
                d[k].v = malloc((size_t)d[k].n * sizeof(float) + 1);
                assert_true(H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, d[k].v) >= 0);
                H5Dclose(ds);
            }
            same_dset(&d[0], &d[1], names[0].v[i]);
            free(d[0].v);
            free(d[1].v);
        }
        for (int k = 0; k < 2; k++) {
            H5Gclose(g[k]);
            kc__strlist_free(&wn[k]);
        }
    }
    for (int k = 0; k < 2; k++) {
        kc__strlist_free(&names[k]);
        H5Fclose(f[k]);
    }
}

/* ---------------------------------------------------------------- tests */

static char *keras_version_of(const char *h5) {
    hid_t f = H5I_INVALID_HID;
    char *v = NULL;
    must(kc__h5_open_path(h5, &f), h5);
    must(kc__h5_get_string(f, "keras_version", &v), "keras_version");
    H5Fclose(f);
    return v;
}

/* Each Keras fixture converted by kerac: the same config skeleton (the nested models' class,
 * name, trainable, layers and calls: base(x, training=False)) and the same weights as the
 * file Keras wrote, in the flavour of that file; converted again, the same file. */
static void test_nested_saved_nested(void **state) {
    (void)state;
    static const struct {
        const char *from, *to, *again;
    } cases[] = {
        {"nested.keras", "nested.keras", "nested2.keras"},
        {"nested_h5.keras", "nested_h5.keras", "nested_h52.keras"},
        {"nested_h5.keras3.h5", "nested_h5.keras3.h5", "nested_h52.keras3.h5"},
        {"nested_h5.keras2.h5", "nested_h5.keras2.h5", "nested_h52.keras2.h5"},
        /* nested-more: nested models called twice (siamese's base and proj) */
        {"siamese.keras", "siamese.keras", "siamese2.keras"},
        {"siamese.keras3.h5", "siamese.keras3.h5", "siamese2.keras3.h5"},
        {"siamese.keras2.h5", "siamese.keras2.h5", "siamese2.keras2.h5"},
        /* a nested Functional with two inputs and two outputs */
        {"nest_multi.keras", "nest_multi.keras", "nest_multi_2.keras"},
        {"nest_multi.keras3.h5", "nest_multi.keras3.h5", "nest_multi_2.keras3.h5"},
        {"nest_multi.keras2.h5", "nest_multi.keras2.h5", "nest_multi_2.keras2.h5"},
        /* the same called twice, with operation nodes inside (Keras 3 ops / tf-keras TFOpLambda) */
        {"nest_multi2.keras", "nest_multi2.keras", "nest_multi2_2.keras"},
        {"nest_multi2.keras3.h5", "nest_multi2.keras3.h5", "nest_multi2_2.keras3.h5"},
        {"nest_multi2.keras2.h5", "nest_multi2.keras2.h5", "nest_multi2_2.keras2.h5"},
        /* nested-deep: `tower` (holding a Sequential `stem`) called twice, in the model itself
         * (nest_deep) or in a nested Functional `body` (nest_deep2) */
        {"nest_deep.keras", "nest_deep.keras", "nest_deep_2.keras"},
        {"nest_deep.keras3.h5", "nest_deep.keras3.h5", "nest_deep_2.keras3.h5"},
        {"nest_deep.keras2.h5", "nest_deep.keras2.h5", "nest_deep_2.keras2.h5"},
        {"nest_deep2.keras", "nest_deep2.keras", "nest_deep2_2.keras"},
        {"nest_deep2.keras3.h5", "nest_deep2.keras3.h5", "nest_deep2_2.keras3.h5"},
        {"nest_deep2.keras2.h5", "nest_deep2.keras2.h5", "nest_deep2_2.keras2.h5"},
        /* each level called twice in its parent: body in the model, tower in body, stem in tower */
        {"nest_deep3.keras", "nest_deep3.keras", "nest_deep3_2.keras"},
        {"nest_deep3.keras3.h5", "nest_deep3.keras3.h5", "nest_deep3_2.keras3.h5"},
        {"nest_deep3.keras2.h5", "nest_deep3.keras2.h5", "nest_deep3_2.keras2.h5"},
        /* a nested model holding only a nested model, called twice */
        {"nest_wrap.keras", "nest_wrap.keras", "nest_wrap_2.keras"},
        {"nest_wrap.keras3.h5", "nest_wrap.keras3.h5", "nest_wrap_2.keras3.h5"},
        {"nest_wrap.keras2.h5", "nest_wrap.keras2.h5", "nest_wrap_2.keras2.h5"},
    };
    static char want[16384], got[16384];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        kc_model *m = NULL, *back = NULL;
        must(kc_model_load(fixture(cases[c].from), &m), cases[c].from);
        must(kc_model_save(m, scratch(cases[c].to)), "save");
        skeleton_of(fixture(cases[c].from), want, sizeof want);
        skeleton_of(scratch(cases[c].to), got, sizeof got);
        if (strcmp(want, got) != 0) {
            fprintf(stderr, "%s saved by kerac:\n  Keras: %s\n  kerac: %s\n", cases[c].from, want, got);
            fail_msg("%s: kerac's config differs from Keras's", cases[c].from);
        }
        if (strstr(cases[c].to, ".keras3.h5") || strstr(cases[c].to, ".keras2.h5")) {
            check_legacy_weights(fixture(cases[c].from), scratch(cases[c].to));
            char *v = keras_version_of(scratch(cases[c].to));
            assert_int_equal(v[0], strstr(cases[c].to, ".keras3.h5") ? '3' : '2'); /* the flavour of the file it came from */
            free(v);
        } else {
            check_keras3_weights(fixture(cases[c].from), scratch(cases[c].to));
        }
        must(kc_model_load(scratch(cases[c].to), &back), "reload");
        must(kc_model_save(back, scratch(cases[c].again)), "save again");
        skeleton_of(scratch(cases[c].again), got, sizeof got);
        if (strcmp(want, got) != 0) fail_msg("%s saved twice:\n  Keras: %s\n  kerac: %s", cases[c].from, want, got);
        kc_model_destroy(back);
        kc_model_destroy(m);
        unlink(scratch(cases[c].to));
        unlink(scratch(cases[c].again));
    }
}

/* Unfreezing the base's top (Keras's fine-tuning recipe) in kerac: the saved base is still
 * a nested Functional, no longer frozen as a whole, its bottom layer frozen and the others
 * not; a model read from Keras 3 goes to .h5 as Keras 3's own. */
static void test_nested_fine_tuned(void **state) {
    (void)state;
    kc_model *m = NULL;
    must(kc_model_load(fixture("nested.keras"), &m), "nested.keras");
    must(kc_model_set_trainable_from(m, "bn"), "trainable from bn");
    must(kc_model_save(m, scratch("tuned.h5")), "save");
    char *v = keras_version_of(scratch("tuned.h5"));
    assert_int_equal(v[0], '3');
    free(v);
    json_t *root = model_config(scratch("tuned.h5"));
    const json_t *base = NULL;
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(json_object_get(root, "config"), "layers"), i, e)
        if (!strcmp(json_string_value(json_object_get(e, "name")), "base")) base = e;
    assert_non_null(base);
    assert_string_equal(json_string_value(json_object_get(base, "class_name")), "Functional");
    const json_t *cfg = json_object_get(base, "config");
    assert_true(json_is_true(json_object_get(cfg, "trainable")));
    static const char *const want[][2] = {{"input_layer", NULL}, {"conv", "false"}, {"bn", "true"}, {"relu", "true"}};
    const json_t *ls = json_object_get(cfg, "layers");
    assert_int_equal(json_array_size(ls), 4);
    for (size_t k = 0; k < 4; k++) {
        const json_t *c = json_object_get(json_array_get(ls, k), "config");
        assert_string_equal(json_string_value(json_object_get(c, "name")), want[k][0]);
        if (want[k][1]) assert_int_equal(json_is_true(json_object_get(c, "trainable")), !strcmp(want[k][1], "true"));
    }
    json_decref(root);
    kc_model_destroy(m);
    unlink(scratch("tuned.h5"));
}

/* A flat model is written as before: its one model, no nested entry. */
static void test_flat_stays_flat(void **state) {
    (void)state;
    kc_model *m = NULL;
    must(kc_model_load(fixture("resnet.keras"), &m), "resnet.keras");
    char *a = NULL;
    must(kc_model_to_json(m, 3, &a), "to_json");
    int models = 0;
    for (const char *p = a; (p = strstr(p, "\"class_name\": \"Functional\"")); p++) models++;
    assert_int_equal(models, 1);
    assert_null(strstr(a, "\"class_name\": \"Sequential\""));
    kc_free(a);
    kc_model_destroy(m);
}

/* tf-keras's MobileNetV3 pattern ("/" in the layer names, TFOpLambda hard-swish): kerac's .h5
 * of tf-keras's file is tf-keras's again: each TensorOp a TFOpLambda with tf-keras's function,
 * input and y (a number, or a tensor), the same weights, and kerac reads it back the same. */
static void test_tf_op_lambda_h5(void **state) {
    (void)state;
    const char *from[] = {"tf_slash.keras2.h5", "tf_ops.keras2.h5"};
    for (size_t c = 0; c < sizeof from / sizeof from[0]; c++) {
        kc_model *m = NULL, *back = NULL;
        must(kc_model_load(fixture(from[c]), &m), from[c]);
        must(kc_model_save(m, scratch("tf.h5")), "save");
        char *v = keras_version_of(scratch("tf.h5"));
        assert_int_equal(v[0], '2');
        free(v);
        check_legacy_weights(fixture(from[c]), scratch("tf.h5"));
        json_t *want = model_config(fixture(from[c])), *got = model_config(scratch("tf.h5"));
        const json_t *wl = json_object_get(json_object_get(want, "config"), "layers");
        const json_t *gl = json_object_get(json_object_get(got, "config"), "layers");
        assert_int_equal(json_array_size(wl), json_array_size(gl));
        int n_ops = 0;
        for (size_t i = 0; i < json_array_size(wl); i++) {
            const json_t *a = json_array_get(wl, i), *b = json_array_get(gl, i);
            const char *cls = json_string_value(json_object_get(a, "class_name"));
            assert_string_equal(json_string_value(json_object_get(b, "class_name")), cls);
            if (strcmp(cls, "TFOpLambda") != 0) continue;
            n_ops++;
            const json_t *ca = json_object_get(a, "config"), *cb = json_object_get(b, "config");
            assert_string_equal(json_string_value(json_object_get(cb, "function")),
                                json_string_value(json_object_get(ca, "function")));
            assert_string_equal(json_string_value(json_object_get(b, "name")), json_string_value(json_object_get(a, "name")));
            const json_t *na = json_array_get(json_object_get(a, "inbound_nodes"), 0);
            const json_t *nb = json_array_get(json_object_get(b, "inbound_nodes"), 0);
            assert_string_equal(json_string_value(json_array_get(nb, 0)), json_string_value(json_array_get(na, 0)));
            const json_t *ya = json_object_get(json_array_get(na, 3), "y"), *yb = json_object_get(json_array_get(nb, 3), "y");
            if (json_is_number(ya)) {
                assert_true(json_is_number(yb));
                assert_true(fabs(json_number_value(ya) - json_number_value(yb)) <= 1e-7 * fabs(json_number_value(ya)));
            } else {
                assert_string_equal(json_string_value(json_array_get(yb, 0)), json_string_value(json_array_get(ya, 0)));
            }
        }
        assert_true(n_ops >= 2);
        json_decref(want);
        json_decref(got);
        must(kc_model_load(scratch("tf.h5"), &back), "reload");
        assert_int_equal(kc_model_num_weights(back), kc_model_num_weights(m));
        kc_model_destroy(back);
        kc_model_destroy(m);
        unlink(scratch("tf.h5"));
    }
}

int main(void) {
    const char *src = getenv("KERAC_SOURCE_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/tests/fixtures/keras", src && *src ? src : "..");
    snprintf(g_tmp, sizeof g_tmp, "/tmp/kerac-nest-XXXXXX");
    if (!mkdtemp(g_tmp)) return 1;
    kc_log_set_level(KC_LOG_WARNING);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_saved_nested),
        cmocka_unit_test(test_nested_fine_tuned),
        cmocka_unit_test(test_flat_stays_flat),
        cmocka_unit_test(test_tf_op_lambda_h5),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    rmdir(g_tmp);
    return rc;
}
