/* keras_h5.c — Keras weights in HDF5: the Keras 3 layout (model.weights.h5 inside a
 * .keras archive, and .weights.h5 files), Keras 2's layout (the /model_weights group of a
 * full-model .h5 file, or the root of a save_weights .h5 file), and the legacy full-model
 * .h5 file itself (root attribute model_config + /model_weights).
 *
 * Keras 3 (keras/src/saving/saving_lib.py): every saveable gets a group with a "vars"
 * subgroup, even when it has no variables: /vars for the model itself, then
 * /layers/<snake_case class name>[_N]/vars/<i> for each of model.layers, numbered per class
 * in model.layers order ("conv2d", "conv2d_1", ...; not the layer names), <i> = "0", "1",
 * ... with the trainable variables first. Keras 3.6+ also puts the object's name on each
 * vars group as the attribute "name"; kerac writes it and never needs it.
 *
 * Keras 2 (hdf5_format.py): /model_weights carries layer_names (every layer, in
 * model.layers order), backend and keras_version; one group per layer name with the
 * attribute weight_names ("conv2d/kernel:0", ...; Keras 3 drops the ":0"), each weight a
 * dataset at that path inside the layer group; an empty top_level_model_weights group.
 *
 * model.layers order: Sequential: the layers after the InputLayer, as added; Functional:
 * Keras's graph order (ops/function.py map_graph): by depth from the output, deepest
 * first, ties by first visit of a depth-first walk from the output through each layer's
 * inputs in order — which is not always the order the layers were added. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "keras_h5_impl.h"
#include "keras_nest.h"

/* ---------------------------------------------------------------- Keras layer order */

void kc__korder_free(korder *o) {
    free(o->layer);
    free(o->path);
    o->layer = NULL;
    o->path = NULL;
    o->n = 0;
}

typedef struct dfs_state {
    const kc_model *m;
    int *visit;              /* (n_layers) first-visit index, -1 unvisited */
    bool *finished;          /* (n_layers) */
    int *post;               /* (n_layers) post-order */
    int n_visit, n_post;
} dfs_state;

static void dfs(dfs_state *d, int node) {
    if (d->finished[node]) return;
    if (d->visit[node] < 0) d->visit[node] = d->n_visit++;
    const kc_layer *l = kc__model_layer(d->m, node);
    if (!(l->ops->flags & KC_LAYER_INPUT))
        for (int k = 0; k < l->n_in; k++) dfs(d, l->in[k]);
    d->finished[node] = true;
    d->post[d->n_post++] = node;
}

/* Sort a[0..n) by depth, deepest first, then by first visit (insertion sort: n is the
 * number of layers). */
static void sort_by_depth(int *a, int n, const int *depth, const int *visit) {
    for (int i = 1; i < n; i++) {
        int x = a[i], j = i - 1;
        while (j >= 0 && (depth[a[j]] < depth[x] || (depth[a[j]] == depth[x] && visit[a[j]] > visit[x]))) {
            a[j + 1] = a[j];
            j--;
        }
        a[j + 1] = x;
    }
}

/* Keras's map_graph: from the output down (reversed post-order), a node's depth is at least
 * its layer's depth so far (a shared layer's calls), which then becomes the node's, and each
 * input's depth is at least the node's + 1. Afterwards, a shared layer's first call holds
 * the layer's depth (the largest) and first visit (the earliest of its calls). */
static void keras_depths(const kc_model *m, dfs_state *d, int *depth, int *layer_depth) {
    int nl = m->n_layers;
    for (int i = d->n_post - 1; i >= 0; i--) {
        int node = d->post[i];
        const kc_layer *l = kc__model_layer(m, node);
        int op = l->shares >= 0 ? l->shares : node;
        if (depth[node] < layer_depth[op]) depth[node] = layer_depth[op];
        layer_depth[op] = depth[node];
        if (l->ops->flags & KC_LAYER_INPUT) continue;
        for (int k = 0; k < l->n_in; k++)
            if (depth[l->in[k]] < depth[node] + 1) depth[l->in[k]] = depth[node] + 1;
    }
    for (int i = 0; i < nl; i++) {
        const kc_layer *l = kc__model_layer(m, i);
        if (l->shares < 0 || d->visit[i] < 0) continue;
        if (d->visit[l->shares] < 0 || d->visit[i] < d->visit[l->shares]) d->visit[l->shares] = d->visit[i];
    }
}

/* nested: the layers inlined from a nested model go by their path inside it (keras_path,
 * as Keras 3 wrote the file being read) and the others are numbered without them;
 * otherwise every layer is numbered as in the flattened model (what kerac writes). */
kc_status kc__h5_keras_order(const kc_model *m, korder *o, bool nested) {
    int nl = m->n_layers;
    memset(o, 0, sizeof *o);
    o->layer = kc__calloc((size_t)nl, sizeof *o->layer, "layer order");
    o->path = kc__calloc((size_t)nl, sizeof *o->path, "layer paths");
    if (!o->layer || !o->path) {
        kc__korder_free(o);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    if (m->sequential) {
        for (int i = 0; i < nl; i++)
            if (!(kc__model_layer(m, i)->ops->flags & KC_LAYER_INPUT)) o->layer[o->n++] = i;
    } else {
        dfs_state d = {m, calloc((size_t)nl, sizeof(int)), calloc((size_t)nl, sizeof(bool)),
                       calloc((size_t)nl, sizeof(int)), 0, 0};
        int *depth = calloc(2 * (size_t)nl, sizeof(int)); /* each node's, then each layer's */
        if (!d.visit || !d.finished || !d.post || !depth) {
            free(d.visit);
            free(d.finished);
            free(d.post);
            free(depth);
            kc__korder_free(o);
            return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory ordering the layers of model '%s'", m->name);
        }
        for (int i = 0; i < nl; i++) d.visit[i] = -1;
        dfs(&d, kc__model_output(m));
        keras_depths(m, &d, depth, depth + nl);
        /* a shared layer is one entry of model.layers: its first call's node, at its layer's
         * depth and first visit (keras_depths) */
        for (int i = 0; i < d.n_post; i++)
            if (kc__model_layer(m, d.post[i])->shares < 0) o->layer[o->n++] = d.post[i];
        sort_by_depth(o->layer, o->n, depth + nl, d.visit);
        /* a layer the output does not reach (the builder rejects these) keeps its place at the end */
        for (int i = 0; i < nl; i++)
            if (d.visit[i] < 0 && kc__model_layer(m, i)->shares < 0) o->layer[o->n++] = i;
        free(d.visit);
        free(d.finished);
        free(d.post);
        free(depth);
    }
    int kept = 0; /* nested: an operation node of a nested model's later call is its first call's entry */
    for (int i = 0; i < o->n; i++)
        if (!nested || kc__nest_call(m, o->layer[i]) == 0) o->layer[kept++] = o->layer[i];
    o->n = kept;
    for (int i = 0; i < o->n; i++) {
        const kc_layer *l = kc__model_layer(m, o->layer[i]);
        if (nested && l->keras_path[0]) {
            snprintf(o->path[i], sizeof o->path[i], "%s", l->keras_path);
            continue;
        }
        const char *stem = l->ops->snake_name;
        int k = 0;
        for (int j = 0; j < i; j++) {
            const kc_layer *lj = kc__model_layer(m, o->layer[j]);
            if (strcmp(lj->ops->snake_name, stem) == 0 && !(nested && lj->keras_path[0])) k++;
        }
        if (k == 0) snprintf(o->path[i], sizeof o->path[i], "%s", stem);
        else snprintf(o->path[i], sizeof o->path[i], "%s_%d", stem, k);
    }
    return KC_STATUS_OK;
}

/* The weights of layer li in Keras order (trainable first): index into l->w, and the
 * model-wide index that kc_model_get_weight / kc_model_set_weight take. */
int kc__h5_layer_weights(const kc_model *m, int li, int widx[KC_MAX_WEIGHTS], int gidx[KC_MAX_WEIGHTS]) {
    int base = 0;
    for (int i = 0; i < li; i++) base += kc__model_layer(m, i)->n_weights;
    const kc_layer *l = kc__model_layer(m, li);
    int n = 0;
    for (int t = 1; t >= 0; t--)
        for (int k = 0; k < l->n_weights; k++)
            if (l->w[k].trainable == (t == 1)) {
                widx[n] = k;
                gidx[n] = base + n;
                n++;
            }
    return n;
}

kc_status kc__staging_init(kc_model *m, staging *st) {
    st->n = kc_model_num_weights(m);
    int64_t total = 0;
    st->offset = kc__calloc((size_t)st->n + 1, sizeof *st->offset, "weight offsets");
    if (!st->offset) return KC_STATUS_OUT_OF_MEMORY;
    for (int g = 0; g < st->n; g++) {
        kc_weight_info wi;
        KC_TRY(kc_model_weight_info(m, g, &wi));
        st->offset[g] = total;
        total += wi.size;
    }
    st->offset[st->n] = total;
    st->data = malloc((size_t)(total ? total : 1) * sizeof(float));
    if (!st->data) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for %lld weights of model '%s'",
                                   (long long)total, m->name);
    return KC_STATUS_OK;
}

void kc__staging_free(staging *st) {
    free(st->data);
    free(st->offset);
    st->data = NULL;
    st->offset = NULL;
}

kc_status kc__staging_commit(kc_model *m, const staging *st) {
    for (int g = 0; g < st->n; g++)
        KC_TRY(kc_model_set_weight(m, g, kc__staged(st, g), st->offset[g + 1] - st->offset[g]));
    return KC_STATUS_OK;
}

kc_status kc__staging_fill(kc_model *m, const staging *st) {
    for (int g = 0; g < st->n; g++)
        KC_TRY(kc_model_get_weight(m, g, kc__staged(st, g), st->offset[g + 1] - st->offset[g]));
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- Keras 3 layout */

kc_status kc__keras3_weights_write(kc_model *m, hid_t file) {
    KC_TRY(kc_model_build(m));
    kc__nesting ng; /* a model read with nested models: their layers under their scopes */
    staging st = {0};
    KC_TRY(kc__nesting_init(m, &ng));
    korder o = ng.order;
    kc_status s = kc__staging_init(m, &st);
    if (s == KC_STATUS_OK) s = kc__staging_fill(m, &st);
    hid_t g = H5I_INVALID_HID;
    if (s == KC_STATUS_OK) s = kc__h5_make_group(file, "vars", &g);
    if (s == KC_STATUS_OK) {
        s = kc__h5_put_vlen_string(g, "name", m->name);
        H5Gclose(g);
    }
    for (int i = 0; i < o.n && s == KC_STATUS_OK; i++) {
        const kc_layer *l = kc__model_layer(m, o.layer[i]);
        char path[sizeof o.path[0] + 16];
        snprintf(path, sizeof path, "layers/%s/vars", o.path[i]);
        s = kc__h5_make_group(file, path, &g);
        if (s != KC_STATUS_OK) break;
        s = kc__h5_put_vlen_string(g, "name", l->name);
        int widx[KC_MAX_WEIGHTS], gidx[KC_MAX_WEIGHTS];
        int nw = kc__h5_layer_weights(m, o.layer[i], widx, gidx);
        for (int j = 0; j < nw && s == KC_STATUS_OK; j++) {
            char key[12]; /* any int: "-2147483648" */
            snprintf(key, sizeof key, "%d", j);
            s = kc__h5_put_f32(g, key, &l->w[widx[j]].shape, kc__staged(&st, gidx[j]));
        }
        H5Gclose(g);
    }
    kc__staging_free(&st);
    kc__nesting_free(&ng);
    return s;
}

/* Every variable of every layer: shape-checked, and read into st (NULL: checked only). */
static kc_status keras3_walk(kc_model *m, hid_t file, const char *label, staging *st) {
    /* Keras 2.13 wrote the same tree under another name (Keras 3 remaps it too) */
    const char *base = "layers";
    if (!kc__h5_is_group(file, "layers") && kc__h5_is_group(file, "_layer_checkpoint_dependencies"))
        base = "_layer_checkpoint_dependencies";
    /* a model read from a nested Keras 3 config: the nested layout when the file has it
     * (as Keras wrote it), the flattened one otherwise (as kerac writes it) */
    bool nested = false;
    for (int i = 0; i < m->n_layers && !nested; i++) {
        const kc_layer *l = kc__model_layer(m, i);
        char g[3 * KC_NAME_MAX];
        snprintf(g, sizeof g, "%s/%s", base, l->keras_path);
        nested = l->keras_path[0] && kc__h5_is_group(file, g);
    }
    korder o;
    KC_TRY(kc__h5_keras_order(m, &o, nested));
    kc_status s = KC_STATUS_OK;
    for (int i = 0; i < o.n && s == KC_STATUS_OK; i++) {
        const kc_layer *l = kc__model_layer(m, o.layer[i]);
        char vars[3 * KC_NAME_MAX + 96];
        snprintf(vars, sizeof vars, "%s/%s/vars", base, o.path[i]);
        int widx[KC_MAX_WEIGHTS], gidx[KC_MAX_WEIGHTS];
        int nw = kc__h5_layer_weights(m, o.layer[i], widx, gidx);
        long have = kc__h5_group_size(file, vars);
        if (nw > 0 && have < 0) {
            s = kc__fail(KC_STATUS_BAD_FILE,
                         "%s has no group '%s' for layer '%s' (%s, %d weights); the weights do not belong to this model",
                         label, vars, l->name, l->ops->class_name, nw);
            break;
        }
        for (int j = 0; j < nw && s == KC_STATUS_OK; j++) {
            char path[3 * KC_NAME_MAX + 112], what[KC_NAME_MAX + 160];
            snprintf(path, sizeof path, "%s/%d", vars, j);
            snprintf(what, sizeof what, "layer '%s' (%s) weight '%s'", l->name, l->ops->class_name, l->w[widx[j]].name);
            s = kc__h5_read_weight(file, path, &l->w[widx[j]].shape, st ? kc__staged(st, gidx[j]) : NULL, what);
            if (s != KC_STATUS_OK) kc__wrap(s, "%s: ", label);
        }
        if (s == KC_STATUS_OK && have > nw)
            s = kc__fail(KC_STATUS_BAD_FILE,
                         "%s: '%s' holds %ld variables but layer '%s' (%s) has %d; the weights do not belong to this model",
                         label, vars, have, l->name, l->ops->class_name, nw);
    }
    kc__korder_free(&o);
    return s;
}

kc_status kc__keras3_weights_check(kc_model *m, hid_t file, const char *label) {
    return keras3_walk(m, file, label, NULL);
}

kc_status kc__keras3_weights_read(kc_model *m, hid_t file, const char *label) {
    KC_TRY(kc_model_build(m));
    staging st = {0};
    kc_status s = kc__staging_init(m, &st);
    if (s == KC_STATUS_OK) s = keras3_walk(m, file, label, &st);
    if (s == KC_STATUS_OK) s = kc__staging_commit(m, &st);
    kc__staging_free(&st);
    return s;
}


/* ---------------------------------------------------------------- writing files */

/* Fill a new HDF5 file with fill(m, root) in memory, then write it over path atomically;
 * on any failure path is untouched. */
static kc_status write_h5_file(kc_model *m, const char *path, bool big_attrs,
                               kc_status (*fill)(kc_model *m, hid_t root, void *ctx), void *ctx) {
    KC_TRY(kc_model_build(m));
    size_t expect = 0;
    for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
        kc_weight_info wi;
        if (kc_model_weight_info(m, g, &wi) == KC_STATUS_OK) expect += (size_t)wi.size * sizeof(float) + 1024;
    }
    hid_t f = H5I_INVALID_HID;
    void *image = NULL;
    size_t len = 0;
    kc_status s = kc__h5_create_file(expect, big_attrs, &f);
    if (s == KC_STATUS_OK) {
        s = fill(m, f, ctx);
        if (s == KC_STATUS_OK) s = kc__h5_close_image(f, &image, &len);
        else kc__h5_discard(f);
    }
    if (s != KC_STATUS_OK) return kc__wrap(s, "saving '%s': ", path);
    s = kc__write_file_atomic(path, image, len);
    free(image);
    return s;
}

typedef struct legacy_ctx {
    const char *config;      /* model_config JSON */
    int flavour;             /* of the config: 2 (tf-keras's file), or 3 (Keras 3's legacy .h5) */
} legacy_ctx;

static kc_status fill_legacy(kc_model *m, hid_t root, void *ctx) {
    const legacy_ctx *c = ctx;
    /* Keras 2's model_metadata: str attributes (h5py: variable-length UTF-8), then the
     * config as bytes (fixed-length) */
    KC_TRY(kc__h5_put_vlen_string(root, "keras_version", c->flavour == 3 ? KC_KERAS3_VERSION : KC_KERAS2_VERSION));
    KC_TRY(kc__h5_put_vlen_string(root, "backend", "tensorflow"));
    KC_TRY(kc__h5_put_fixed_string(root, "model_config", c->config));
    hid_t g = H5I_INVALID_HID;
    KC_TRY(kc__h5_make_group(root, "model_weights", &g));
    kc_status s = kc__legacy_weights_write(m, g);
    H5Gclose(g);
    return s;
}

/* model.get_config() as Keras 2 (or 3) writes it into model_config: {"class_name", "config"}
 * (to_json's keras_version and backend keys are not part of it). */
static kc_status legacy_config(kc_model *m, int flavour, char **out) {
    char *text = NULL;
    KC_TRY(kc__model_to_json_flags(m, flavour, 0, &text));
    json_t *root = json_loads(text, 0, NULL);
    free(text);
    if (!root) return kc__fail(KC_STATUS_INTERNAL, "model '%s': the Keras 2 JSON writer produced unreadable JSON", m->name);
    json_object_del(root, "keras_version");
    json_object_del(root, "backend");
    *out = json_dumps(root, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    if (!*out) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing the config of model '%s'", m->name);
    return KC_STATUS_OK;
}

/* Keras 2's file, which tf-keras and Keras 3 read; a model with an option only Keras 3 has
 * (hard_silu, Keras 3's hard_sigmoid: the Keras 2 writer refuses them) as Keras 3's own
 * legacy .h5 (its config flavour and keras_version), which Keras 3 reads and tf-keras refuses.
 * A model that keeps the nested models of a Keras 3 file is written as Keras 3's .h5 too:
 * each Keras reads only its own nested configs (tf-keras calls a nested model's node 1, Keras
 * 3 its node 0), so the nested models go back in the flavour of the file they came from. */
kc_status kc__legacy_h5_save(kc_model *m, const char *path) {
    legacy_ctx c = {NULL, 2};
    char *config = NULL;
    char why[512];
    bool nested3 = kc__nesting_flavour(m) == 3;
    kc_status s = nested3 ? kc__fail(KC_STATUS_UNSUPPORTED, "its nested models come from a Keras 3 file")
                          : legacy_config(m, 2, &config);
    snprintf(why, sizeof why, "%s", s == KC_STATUS_OK ? "" : kc_last_error());
    if (s == KC_STATUS_UNSUPPORTED && legacy_config(m, 3, &config) == KC_STATUS_OK) {
        kc__log(KC_LOG_INFO, "saving '%s': written as Keras 3's .h5 (tf-keras cannot read this model): %s", path, why);
        c.flavour = 3, s = KC_STATUS_OK;
    } else if (s != KC_STATUS_OK) {
        s = kc__fail(s, "%s", why); /* the Keras 2 writer's reason */
    }
    if (s != KC_STATUS_OK) return kc__wrap(s, "saving '%s': ", path);
    c.config = config;
    /* a config over HDF5's 64 KiB object-header limit needs the HDF5 1.8 file format */
    s = write_h5_file(m, path, strlen(config) > 60000, fill_legacy, &c);
    free(config);
    return s;
}

static kc_status fill_keras3(kc_model *m, hid_t root, void *ctx) {
    (void)ctx;
    return kc__keras3_weights_write(m, root);
}

static kc_status fill_legacy_weights(kc_model *m, hid_t root, void *ctx) {
    (void)ctx;
    return kc__legacy_weights_write(m, root);
}

kc_status kc__weights_h5_save(kc_model *m, const char *path, bool keras3) {
    return write_h5_file(m, path, false, keras3 ? fill_keras3 : fill_legacy_weights, NULL);
}

/* ---------------------------------------------------------------- reading files */

kc_status kc__legacy_h5_load(const char *path, const kc_device_opts *dev, kc_model **out) {
    *out = NULL;
    hid_t f = H5I_INVALID_HID;
    KC_TRY(kc__h5_open_path(path, &f));
    kc_model *m = NULL;
    char *config = NULL;
    char label[1100];
    snprintf(label, sizeof label, "'%s'", path);
    kc_status s = kc__h5_get_string(f, "model_config", &config);
    if (s != KC_STATUS_OK) {
        kc__wrap(s, "%s: ", label);
    } else if (!config) {
        bool weights_only = kc__h5_has_attr(f, "layer_names") || kc__h5_has_attr(f, "layer_names0") ||
                            kc__h5_is_group(f, "layers");
        s = kc__fail(KC_STATUS_BAD_FILE,
                     weights_only ? "%s holds weights only (no 'model_config' attribute): build the model from its config "
                                    "(.json) and load the weights with kc_model_load_weights"
                                  : "%s has no 'model_config' attribute, so it is not a Keras model file",
                     label);
    } else {
        s = kc_model_from_json_ex(config, strlen(config), dev, &m);
        if (s != KC_STATUS_OK) kc__wrap(s, "%s: model_config: ", label);
    }
    if (s == KC_STATUS_OK && !kc__h5_is_group(f, "model_weights"))
        s = kc__fail(KC_STATUS_BAD_FILE, "%s has a model_config but no 'model_weights' group: the weights are missing", label);
    if (s == KC_STATUS_OK) {
        hid_t g = H5Gopen2(f, "model_weights", H5P_DEFAULT);
        s = g < 0 ? kc__fail(KC_STATUS_BAD_FILE, "%s: cannot open group 'model_weights'", label)
                  : kc__legacy_weights_read(m, g, "/model_weights", label);
        if (g >= 0) H5Gclose(g);
    }
    free(config);
    H5Fclose(f);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(m);
        return s;
    }
    *out = m;
    return KC_STATUS_OK;
}

kc_status kc__weights_h5_load(kc_model *m, const char *path) {
    KC_TRY(kc_model_build(m));
    hid_t f = H5I_INVALID_HID;
    KC_TRY(kc__h5_open_path(path, &f));
    char label[1100];
    snprintf(label, sizeof label, "'%s'", path);
    kc_status s;
    if (kc__h5_is_group(f, "model_weights")) {
        hid_t g = H5Gopen2(f, "model_weights", H5P_DEFAULT);
        s = g < 0 ? kc__fail(KC_STATUS_BAD_FILE, "%s: cannot open group 'model_weights'", label)
                  : kc__legacy_weights_read(m, g, "/model_weights", label);
        if (g >= 0) H5Gclose(g);
    } else if (kc__h5_has_attr(f, "layer_names") || kc__h5_has_attr(f, "layer_names0")) {
        s = kc__legacy_weights_read(m, f, "/", label);
    } else if (kc__h5_is_group(f, "layers") || kc__h5_is_group(f, "vars") ||
               kc__h5_is_group(f, "_layer_checkpoint_dependencies")) {
        s = kc__keras3_weights_read(m, f, label);
    } else {
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "%s holds no Keras weights: no 'layers' group (Keras 3), no 'layer_names' attribute (Keras 2 "
                     "weights) and no 'model_weights' group (Keras 2 model)",
                     label);
    }
    H5Fclose(f);
    return s;
}

/* ---------------------------------------------------------------- for the checkpoints */

/* Keras builds the optimizer's variables from model.trainable_variables, which follow
 * model.layers: checkpoints need the same order (declared in checkpoint.h). */
kc_status kc__keras_layer_order(const kc_model *m, int *order, int *n) {
    korder o;
    KC_TRY(kc__h5_keras_order(m, &o, false));
    memcpy(order, o.layer, (size_t)o.n * sizeof *order);
    *n = o.n;
    kc__korder_free(&o);
    return KC_STATUS_OK;
}
