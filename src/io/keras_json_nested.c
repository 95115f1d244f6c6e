/* keras_json_nested.c — models nested inside a Functional model (a Sequential or Functional
 * called as a layer, as Keras 3 writes keras.io's augmentation block and a transfer-learning
 * base model), inlined into the outer graph before the reader builds it.
 *
 * Each nested model's layers take its place: its InputLayer is dropped and its first layers
 * read the tensor the nested model was called on; the layers that read the nested model
 * read its output layer instead. The inner layers keep their names (a name already taken
 * gets the nested model's name in front: "base_conv2d"); a nested model with "trainable":
 * false freezes its layers. Each inlined layer gets the path of its weights in Keras 3's
 * model.weights.h5, which scopes them under the nested model: "functional/layers/conv2d"
 * (nested models numbered per class in the outer "layers" order, the inner layers per class
 * in the inner order, as Keras's model.layers), and the name of the outermost nested model,
 * whose group holds its weights in a legacy .h5 (keras_h5_legacy.c). Keras 2 configs (tf-keras
 * .h5) are read the same way; their references to a nested model's call (node 1: the nested
 * model's own graph is node 0) become references to the inlined output layer's node 0.
 * Each nested model (its class, name, parent, call's training argument, InputLayer name) and
 * each inlined layer's place in it (its nested model, its name there) are kept on the model
 * (kc_model.nests, kc_layer.keras_nest / keras_inner), so that saves write the nesting back
 * (keras_nest.c). */
#include <stdio.h>
#include <string.h>

#include "../model/model.h"
#include "keras_json_read.h"

typedef struct flat {
    json_t *out;   /* the new outer "layers" */
    json_t *used;  /* every name in out (and every outer name), as keys */
    json_t *paths; /* inlined layer name -> [weight path, .h5 group, nested model, inner name] */
    json_t *nests; /* the nested models, in the order met: {name, sequential, parent, training, input} */
} flat;

static bool is_nested(const json_t *e) {
    const char *c = json_string_value(json_object_get(e, "class_name"));
    return c && (!strcmp(c, "Sequential") || !strcmp(c, "Functional") || !strcmp(c, "Model"));
}

static bool is_input(const json_t *e) {
    const char *c = json_string_value(json_object_get(e, "class_name"));
    return c && !strcmp(c, "InputLayer");
}

/* Renames every layer reference in v (keras_history of Keras 3 tensors, [name, i, j] of
 * Keras 2 nodes and of input/output_layers) through map. */
static void rename_refs(json_t *v, const json_t *map) {
    if (json_is_array(v)) {
        const char *s = json_string_value(json_array_get(v, 0));
        const json_t *to = s ? json_object_get(map, s) : NULL;
        if (to && json_array_size(v) >= 3) { /* the inlined layer is called once: its node 0 */
            json_array_set(v, 0, (json_t *)to);
            json_array_set_new(v, 1, json_integer(0));
        }
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) rename_refs(x, map);
    } else if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) rename_refs(x, map);
    }
}

static json_t *tensor_node(const char *from) {
    return json_pack("[{s:[{s:s,s:{s:[sii]}}],s:{}}]", "args", "class_name", "__keras_tensor__", "config",
                     "keras_history", from, 0, 0, "kwargs");
}

/* The per-class name of the k-th layer of class stem in a model's layers: "conv2d_1". */
static void numbered(json_t *counts, const char *stem, char *buf, size_t n) {
    json_int_t k = json_integer_value(json_object_get(counts, stem));
    json_object_set_new(counts, stem, json_integer(k + 1));
    if (k == 0) snprintf(buf, n, "%s", stem);
    else snprintf(buf, n, "%s_%d", stem, (int)k);
}

static const char *stem_of(const json_t *e) {
    if (is_nested(e))
        return strcmp(json_string_value(json_object_get(e, "class_name")), "Sequential") ? "functional" : "sequential";
    const kc_layer_ops *ops = kc__layer_find(json_string_value(json_object_get(e, "class_name")));
    return ops ? ops->snake_name : "layer";
}

static kc_status walk(flat *f, const json_t *layers, json_t *map, const char *prefix, bool frozen, const char *model,
                      const char *group, int nest);

/* The tensor a nested model entry is called on (its only input), after renaming: Keras 3's
 * {"args": [tensor], "kwargs": {...}} or Keras 2's [["layer", 0, 0, {kwargs}]]; *training:
 * the call's training argument (-1: none, 0: False, 1: True). */
static kc_status nested_input(const json_t *e, const char *name, const char **from, int *training) {
    const json_t *nodes = json_object_get(e, "inbound_nodes");
    const json_t *node = json_array_get(nodes, 0), *h = NULL, *kw = NULL;
    size_t n_args = 0;
    if (json_is_array(node)) {
        n_args = json_array_size(node);
        h = json_array_get(node, 0);
        kw = json_array_get(h, 3);
    } else {
        const json_t *args = json_object_get(node, "args");
        n_args = json_array_size(args);
        h = json_object_get(json_object_get(json_array_get(args, 0), "config"), "keras_history");
        kw = json_object_get(node, "kwargs");
    }
    const json_t *t = json_object_get(kw, "training");
    *training = json_is_boolean(t) ? json_is_true(t) : -1;
    *from = json_string_value(json_array_get(h, 0));
    if (json_array_size(nodes) != 1 || n_args != 1 || !*from)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "nested model '%s' is not called once on one tensor; kerac inlines nested models called "
                            "once on one input",
                        name);
    return KC_STATUS_OK;
}

/* A nested Sequential's layers as a Functional "layers" list: a chain from input `in`. */
static kc_status seq_as_layers(const json_t *cfg, const char *model, const char *in, json_t **out, const char **last) {
    const json_t *ls = json_object_get(cfg, "layers");
    if (!json_is_array(ls) || json_array_size(ls) == 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "nested Sequential '%s' has no \"layers\" list", model);
    *out = json_array();
    const char *prev = in;
    size_t i;
    json_t *e;
    json_array_foreach(ls, i, e) {
        if (is_input(e)) continue;
        const char *n = kc__json_entry_name(e);
        if (!n)
            return kc__fail(KC_STATUS_BAD_FILE, PFX "layer #%zu of nested Sequential '%s' has no name", i, model);
        json_t *c = json_deep_copy(e);
        json_object_set_new(c, "name", json_string(n));
        json_object_set_new(c, "inbound_nodes", tensor_node(prev));
        json_array_append_new(*out, c);
        prev = n;
    }
    *last = prev;
    return KC_STATUS_OK;
}

/* Inlines nested model entry e (path `path`, inside outermost nested model `group` and
 * nested model `parent`) into f; map[its name] = its output layer. */
static kc_status inline_model(flat *f, const json_t *e, json_t *map, const char *path, bool frozen, const char *group,
                              int parent) {
    const char *name = kc__json_entry_name(e);
    const json_t *cfg = json_object_get(e, "config");
    const char *from = NULL, *out_name = NULL, *in_name = NULL;
    int training = -1;
    if (!name || !json_is_object(cfg)) return kc__fail(KC_STATUS_BAD_FILE, PFX "a nested model has no name or config");
    KC_TRY(nested_input(e, name, &from, &training));
    if (json_is_false(json_object_get(cfg, "trainable"))) frozen = true;
    json_t *inner = json_object(); /* inner name -> new name */
    json_t *ls = NULL;
    kc_status s = KC_STATUS_OK;
    bool seq = !strcmp(json_string_value(json_object_get(e, "class_name")), "Sequential");
    if (seq) {
        s = seq_as_layers(cfg, name, from, &ls, &out_name);
        const json_t *first = json_array_get(json_object_get(cfg, "layers"), 0);
        in_name = is_input(first) ? kc__json_entry_name(first) : NULL;
    } else {
        ls = json_incref(json_object_get(cfg, "layers"));
        const json_t *in = json_object_get(cfg, "input_layers"), *o = json_object_get(cfg, "output_layers");
        bool many = (json_is_array(json_array_get(in, 0)) && json_array_size(in) != 1) ||
                    (json_is_array(json_array_get(o, 0)) && json_array_size(o) != 1);
        if (json_is_array(json_array_get(in, 0))) in = json_array_get(in, 0);
        if (json_is_array(json_array_get(o, 0))) o = json_array_get(o, 0);
        in_name = json_string_value(json_array_get(in, 0));
        out_name = json_string_value(json_array_get(o, 0));
        if (!in_name || !out_name || many || !json_is_array(ls))
            s = kc__fail(KC_STATUS_UNSUPPORTED, PFX "nested model '%s' needs one input and one output layer", name);
        else json_object_set_new(inner, in_name, json_string(from));
    }
    char in_buf[KC_NAME_MAX];
    snprintf(in_buf, sizeof in_buf, "%s_input", name); /* tf-keras's name for a Sequential's input */
    json_array_append_new(f->nests, json_pack("{s:s,s:b,s:i,s:i,s:s}", "name", name, "sequential", seq, "parent",
                                              parent, "training", training, "input", in_name ? in_name : in_buf));
    int nest = (int)json_array_size(f->nests);
    if (s == KC_STATUS_OK) s = walk(f, ls, inner, path, frozen, name, group ? group : name, nest);
    if (s == KC_STATUS_OK) {
        const json_t *to = json_object_get(inner, out_name);
        if (!to) s = kc__fail(KC_STATUS_BAD_FILE, PFX "nested model '%s': its output layer '%s' is not among its layers",
                              name, out_name);
        else json_object_set(map, name, (json_t *)to);
    }
    json_decref(ls);
    json_decref(inner);
    return s;
}

/* A layer name not yet used: `name`, else "<model>_<name>", else with a number. */
static void unique_name(const flat *f, const char *model, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s", name);
    if (!json_object_get(f->used, buf)) return;
    snprintf(buf, n, "%s_%s", model, name);
    for (int k = 2; json_object_get(f->used, buf); k++) snprintf(buf, n, "%s_%s_%d", model, name, k);
}

static kc_status walk(flat *f, const json_t *layers, json_t *map, const char *prefix, bool frozen, const char *model,
                      const char *group, int nest) {
    json_t *counts = json_object();
    size_t i;
    json_t *e;
    kc_status s = KC_STATUS_OK;
    json_array_foreach(layers, i, e) {
        const char *name = kc__json_entry_name(e);
        char here[2 * KC_NAME_MAX], path[sizeof here + KC_NAME_MAX];
        numbered(counts, stem_of(e), here, sizeof here);
        if (prefix) snprintf(path, sizeof path, "%s/layers/%s", prefix, here);
        else snprintf(path, sizeof path, "%s", here);
        if (prefix && is_input(e)) continue; /* the caller mapped it to the outer tensor */
        json_t *c = json_deep_copy(e);
        rename_refs(json_object_get(c, "inbound_nodes"), map);
        if (is_nested(e)) s = inline_model(f, c, map, path, frozen, group, nest);
        else if (!name) s = kc__fail(KC_STATUS_BAD_FILE, PFX "layer #%zu of nested model '%s' has no name", i, model);
        if (s != KC_STATUS_OK || is_nested(e)) {
            json_decref(c);
            if (s != KC_STATUS_OK) break;
            continue;
        }
        char nn[KC_NAME_MAX];
        if (prefix) unique_name(f, model, name, nn, sizeof nn);
        else snprintf(nn, sizeof nn, "%s", name);
        if (json_object_get(c, "name")) json_object_set_new(c, "name", json_string(nn));
        json_t *cfg = json_object_get(c, "config");
        if (json_is_object(cfg) && json_object_get(cfg, "name")) json_object_set_new(cfg, "name", json_string(nn));
        if (frozen && json_is_object(cfg)) json_object_set_new(cfg, "trainable", json_false());
        json_object_set_new(f->used, nn, json_true());
        if (prefix) json_object_set_new(f->paths, nn, json_pack("[ssis]", path, group, nest, name));
        json_object_set_new(map, name, json_string(nn));
        json_array_append_new(f->out, c);
    }
    json_decref(counts);
    return s;
}

bool kc__json_has_nested(const json_t *layers) {
    size_t i;
    json_t *e;
    json_array_foreach((json_t *)layers, i, e) if (is_nested(e)) return true;
    return false;
}

kc_status kc__json_sequential_as_functional(const json_t *config, json_t **out) {
    const json_t *first = json_array_get(json_object_get(config, "layers"), 0);
    const char *model = json_string_value(json_object_get(config, "name"));
    const char *in = kc__json_entry_name(first);
    if (!is_input(first) || !in)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "Sequential model '%s' nests models but starts with no named InputLayer; kerac inlines "
                            "the nested models of a Sequential built on keras.Input",
                        model ? model : "?");
    json_t *ls = NULL;
    const char *last = NULL;
    kc_status s = seq_as_layers(config, model ? model : "?", in, &ls, &last);
    if (s != KC_STATUS_OK) {
        json_decref(ls);
        return s;
    }
    json_t *entry = json_deep_copy(first);
    json_object_set_new(entry, "name", json_string(in));
    json_object_set_new(entry, "inbound_nodes", json_array());
    json_array_insert_new(ls, 0, entry);
    *out = json_pack("{s:o,s:[[sii]],s:[[sii]]}", "layers", ls, "input_layers", in, 0, 0, "output_layers", last, 0, 0);
    if (model) json_object_set_new(*out, "name", json_string(model));
    const json_t *t = json_object_get(config, "trainable");
    if (t) json_object_set(*out, "trainable", (json_t *)t);
    return KC_STATUS_OK;
}

kc_status kc__json_inline_nested(json_t *config, json_t **paths, json_t **nests) {
    *paths = NULL;
    *nests = NULL;
    json_t *layers = json_object_get(config, "layers");
    size_t i;
    json_t *e;
    if (!kc__json_has_nested(layers)) return KC_STATUS_OK;
    flat f = {json_array(), json_object(), json_object(), json_array()};
    json_array_foreach(layers, i, e) {
        const char *n = kc__json_entry_name(e);
        if (n && !is_nested(e)) json_object_set_new(f.used, n, json_true());
    }
    json_t *map = json_object();
    kc_status s = walk(&f, layers, map, NULL, false, "", NULL, 0);
    if (s == KC_STATUS_OK) {
        json_object_set(config, "layers", f.out);
        rename_refs(json_object_get(config, "input_layers"), map);
        rename_refs(json_object_get(config, "output_layers"), map);
        *paths = json_incref(f.paths);
        *nests = json_incref(f.nests);
    }
    json_decref(map);
    json_decref(f.out);
    json_decref(f.used);
    json_decref(f.paths);
    json_decref(f.nests);
    return s;
}

kc_status kc__json_keep_nests(kc_model *m, const json_t *nests) {
    size_t n = json_array_size(nests);
    if (n == 0) return KC_STATUS_OK;
    m->nests = kc__calloc(n, sizeof *m->nests, "nested models");
    if (!m->nests) return KC_STATUS_OUT_OF_MEMORY;
    m->n_nests = (int)n;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(nests, i);
        kc__nest *k = &m->nests[i];
        snprintf(k->name, sizeof k->name, "%s", json_string_value(json_object_get(e, "name")));
        snprintf(k->input, sizeof k->input, "%s", json_string_value(json_object_get(e, "input")));
        k->sequential = json_is_true(json_object_get(e, "sequential"));
        k->parent = (int)json_integer_value(json_object_get(e, "parent"));
        k->training = (int)json_integer_value(json_object_get(e, "training"));
    }
    return KC_STATUS_OK;
}
