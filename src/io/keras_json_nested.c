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
    json_t *made;  /* an inlined layer's weight path -> its entry in out (a later call adds its nodes there) */
    json_t *nestid; /* a nested model's weight path -> its index in nests (1-based) */
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
 * Keras 2 nodes and of input/output_layers) through map: map[name][i] is the [name, node]
 * that node i of the layer or nested model became (a layer of a nested model called k times
 * has k times its nodes; a nested model's call is its output layer's node of that call), or,
 * for a nested model with several outputs, the list of their [name, node, tensor index],
 * which the reference's tensor index picks from. */
static void rename_refs(json_t *v, const json_t *map) {
    if (json_is_array(v)) {
        const char *s = json_string_value(json_array_get(v, 0));
        const json_t *to = s ? json_object_get(map, s) : NULL;
        const json_t *node = json_array_get(v, 1);
        to = to && json_is_integer(node) ? json_array_get(to, (size_t)json_integer_value(node)) : NULL;
        if (json_is_array(json_array_get(to, 0))) /* a nested model's outputs: by tensor index */
            to = json_array_get(to, (size_t)json_integer_value(json_array_get(v, 2)));
        if (json_is_array(to) && json_array_size(v) >= 3) {
            json_array_set(v, 0, json_array_get(to, 0));
            json_array_set(v, 1, json_array_get(to, 1));
            if (json_array_size(to) >= 3) json_array_set(v, 2, json_array_get(to, 2));
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

/* Where walk is: the nested model (its name, its .h5 group, its index in nests: 0 for the
 * model), its weight path ("" for the model) and frozen flag, and which call of it this is
 * (counted over every call of the nested models holding it). */
typedef struct scope {
    const char *model, *group, *prefix;
    int nest, call;
    bool frozen;
} scope;

static kc_status walk(flat *f, const json_t *layers, json_t *map, const scope *sc);

/* One tensor argument as [layer, node, tensor index] (Keras 3's __keras_tensor__ or Keras 2's
 * [layer, node, index, kwargs]), else NULL. */
static json_t *arg_ref(const json_t *a) {
    const json_t *h = json_is_object(a) ? json_object_get(json_object_get(a, "config"), "keras_history") : a;
    const json_t *layer = json_array_get(h, 0), *at = json_array_get(h, 1), *t = json_array_get(h, 2);
    if (!json_is_string(layer) || !json_is_integer(at)) return NULL;
    return json_pack("[OOI]", layer, at, json_is_integer(t) ? json_integer_value(t) : (json_int_t)0);
}

/* The tensors call k of a nested model entry takes (its n_in inputs, in order), after
 * renaming: Keras 3's {"args": [tensor] or [[tensor, ...]], "kwargs": {...}} or Keras 2's
 * [["layer", 0, 0, {kwargs}], ...]; *from: a list of [layer, node, tensor index];
 * *training: the call's training argument (-1: none, 0: False, 1: True). */
static kc_status nested_input(const json_t *e, const char *name, size_t k, size_t n_in, json_t **from, int *training) {
    const json_t *node = json_array_get(json_object_get(e, "inbound_nodes"), k), *args = node, *kw = NULL;
    if (json_is_array(node)) {
        kw = json_array_get(json_array_get(node, 0), 3);
    } else {
        args = json_object_get(node, "args");
        if (json_array_size(args) == 1 && json_is_array(json_array_get(args, 0))) args = json_array_get(args, 0);
        kw = json_object_get(node, "kwargs");
    }
    const json_t *t = json_object_get(kw, "training");
    *training = json_is_boolean(t) ? json_is_true(t) : -1;
    *from = json_array();
    size_t i;
    json_t *a, *r;
    json_array_foreach(args, i, a) if ((r = arg_ref(a))) json_array_append_new(*from, r);
    if (json_array_size(*from) != n_in || json_array_size(args) != n_in)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "nested model '%s' has %zu input%s but its call #%zu passes %zu tensor argument%s; kerac "
                            "inlines a nested model called on one tensor per input (a list in input order, not a "
                            "dict or a constant): call it so in Keras, or build its layers into the outer model",
                        name, n_in, n_in == 1 ? "" : "s", k, json_array_size(args), json_array_size(args) == 1 ? "" : "s");
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

/* ["name", node, index] or [["name", node, index], ...] as a list of [name, node, index]
 * (NULL: malformed). */
static json_t *io_refs(const json_t *io) {
    json_t *out = json_array(), *r;
    if (json_is_string(json_array_get(io, 0))) {
        if ((r = arg_ref(io))) json_array_append_new(out, r);
        else json_array_clear(out);
        return json_array_size(out) ? out : (json_decref(out), NULL);
    }
    size_t i;
    json_t *x;
    json_array_foreach(io, i, x) {
        if (!(r = arg_ref(x))) {
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, r);
    }
    return json_array_size(out) ? out : (json_decref(out), NULL);
}

/* A nested model's layers as a Functional "layers" list (a Sequential's: a chain from its
 * input `start`), its inputs (*ins: [name, 0, 0] each, in order) and outputs (*outs). */
static kc_status nested_layers(const json_t *cfg, const char *name, bool seq, const char *start, json_t **ls,
                               json_t **ins, json_t **outs) {
    *ls = *ins = *outs = NULL;
    if (seq) {
        const json_t *first = json_array_get(json_object_get(cfg, "layers"), 0);
        const char *in = is_input(first) ? kc__json_entry_name(first) : NULL, *last = NULL;
        KC_TRY(seq_as_layers(cfg, name, in ? in : start, ls, &last));
        *ins = json_pack("[[sii]]", in ? in : start, 0, 0);
        *outs = json_pack("[[sii]]", last, 0, 0);
        return KC_STATUS_OK;
    }
    *ls = json_incref(json_object_get(cfg, "layers"));
    *ins = io_refs(json_object_get(cfg, "input_layers"));
    *outs = io_refs(json_object_get(cfg, "output_layers"));
    if (!*ins || !*outs || !json_is_array(*ls))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "nested model '%s' has no \"layers\" list or no readable "
                                            "\"input_layers\" / \"output_layers\"",
                        name);
    return KC_STATUS_OK;
}

/* The index in f->nests of the nested model at `path`, recorded at its first call (multi:
 * several inputs or outputs). */
static int nest_index(flat *f, const char *path, const char *name, bool seq, const scope *parent, int training,
                      const char *input, json_t *io) {
    const json_t *id = json_object_get(f->nestid, path);
    if (id) return (int)json_integer_value(id);
    json_t *e = json_pack("{s:s,s:b,s:i,s:i,s:s}", "name", name, "sequential", seq, "parent", parent->nest, "training",
                          training, "input", input);
    json_object_update(e, io);
    json_array_append_new(f->nests, e);
    int k = (int)json_array_size(f->nests);
    json_object_set_new(f->nestid, path, json_integer(k));
    return k;
}

/* The tensor references of a layer entry's first call, in order (Keras 3: its args, a list
 * flattened; Keras 2: its refs): a list of [layer, node, index]. */
static json_t *first_call_refs(const json_t *e) {
    const json_t *node = json_array_get(json_object_get(e, "inbound_nodes"), 0), *args = node;
    if (json_is_object(node)) args = json_object_get(node, "args");
    json_t *out = json_array(), *r;
    size_t i, j;
    json_t *a, *b;
    json_array_foreach(args, i, a) {
        if (json_is_array(a) && !json_is_string(json_array_get(a, 0))) {
            json_array_foreach(a, j, b) if ((r = arg_ref(b))) json_array_append_new(out, r);
        } else if ((r = arg_ref(a))) {
            json_array_append_new(out, r);
        }
    }
    return out;
}

/* A nested model's inputs and outputs as the writers need them (keras_nest.c): {"multi":
 * whether it has several, "ins": [[InputLayer, a layer reading it, at which input], ...],
 * "outs": [output layer, ...]}; "ins"/"outs" left out where they cannot be written back
 * (an input nothing reads, an output not a layer's first output). */
static json_t *nest_io(const json_t *ls, const json_t *ins, const json_t *outs) {
    bool multi = json_array_size(ins) != 1 || json_array_size(outs) != 1, ok = true;
    json_t *io = json_pack("{s:b}", "multi", multi), *in_list = json_array(), *out_list = json_array();
    size_t i, j, q;
    json_t *r, *e, *ref;
    json_array_foreach(ins, i, r) {
        const char *in = json_string_value(json_array_get(r, 0));
        json_t *user = NULL;
        json_array_foreach(ls, j, e) {
            json_t *refs = is_input(e) ? json_array() : first_call_refs(e);
            json_array_foreach(refs, q, ref) if (!user && !strcmp(json_string_value(json_array_get(ref, 0)), in))
                user = json_pack("[ssI]", in, kc__json_entry_name(e), (json_int_t)q);
            json_decref(refs);
        }
        ok = ok && user;
        if (user) json_array_append_new(in_list, user);
    }
    json_array_foreach(outs, i, r) {
        ok = ok && json_integer_value(json_array_get(r, 1)) == 0 && json_integer_value(json_array_get(r, 2)) == 0;
        json_array_append(out_list, json_array_get(r, 0));
    }
    if (ok && json_array_size(ins) <= KC_NEST_MAX_IO && json_array_size(outs) <= KC_NEST_MAX_IO) {
        json_object_set(io, "ins", in_list);
        json_object_set(io, "outs", out_list);
    }
    json_decref(in_list);
    json_decref(out_list);
    return io;
}

/* Call k of nested model `name` (its layers ls, inputs ins, outputs outs) on the tensors
 * `from` (owned): walks its layers with its inputs mapped to them; *to: the [name, node,
 * index] its one output became, or the list of those of its several outputs. */
static kc_status inline_call(flat *f, const json_t *ls, const json_t *ins, const json_t *outs, json_t *from,
                             const scope *sc, json_t **to) {
    json_t *inner = json_object(); /* inner name -> [[new name, node, index], ...] (by node) */
    size_t i;
    json_t *r;
    json_array_foreach(ins, i, r) json_object_set_new(inner, json_string_value(json_array_get(r, 0)),
                                                      json_pack("[O]", json_array_get(from, i)));
    json_decref(from);
    kc_status s = walk(f, ls, inner, sc);
    *to = json_array();
    json_array_foreach(outs, i, r) {
        if (s != KC_STATUS_OK) break;
        const char *o = json_string_value(json_array_get(r, 0));
        const json_t *t = json_array_get(json_object_get(inner, o), (size_t)json_integer_value(json_array_get(r, 1)));
        if (!t)
            s = kc__fail(KC_STATUS_BAD_FILE, PFX "nested model '%s': its output layer '%s' is not among its layers",
                         sc->model, o);
        else
            json_array_append_new(*to, json_pack("[OOO]", json_array_get(t, 0), json_array_get(t, 1),
                                                 json_array_get(r, 2)));
    }
    if (s == KC_STATUS_OK && json_array_size(outs) == 1) {
        json_t *one = json_incref(json_array_get(*to, 0));
        json_decref(*to);
        *to = one;
    }
    json_decref(inner);
    return s;
}

/* Inlines nested model entry e (at `path`, inside the model or nested model `parent`) into f,
 * once per call: the first call makes its layers' entries, each later call adds a node to
 * each of them (a shared layer's call: the same weights). map[its name][node] = the output
 * layer's node of that call, or the list of its outputs' (tf-keras numbers a nested model's
 * calls from 1: its own graph is node 0). */
static kc_status inline_model(flat *f, const json_t *e, json_t *map, const char *path, const scope *parent) {
    const char *name = kc__json_entry_name(e);
    const json_t *cfg = json_object_get(e, "config"), *nodes = json_object_get(e, "inbound_nodes");
    if (!name || !json_is_object(cfg)) return kc__fail(KC_STATUS_BAD_FILE, PFX "a nested model has no name or config");
    size_t calls = json_array_size(nodes);
    if (calls == 0)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "nested model '%s' is not called on any tensor; kerac inlines "
                                               "nested models where they are called", name);
    bool seq = !strcmp(json_string_value(json_object_get(e, "class_name")), "Sequential");
    char in_buf[KC_NAME_MAX];
    snprintf(in_buf, sizeof in_buf, "%s_input", name); /* tf-keras's name for a Sequential's input */
    json_t *ls = NULL, *ins = NULL, *outs = NULL, *calls_out = json_array();
    kc_status s = nested_layers(cfg, name, seq, in_buf, &ls, &ins, &outs);
    scope sc = {name, parent->group ? parent->group : name, path, 0, 0, parent->frozen};
    if (json_is_false(json_object_get(cfg, "trainable"))) sc.frozen = true;
    if (json_is_array(json_array_get(nodes, 0))) json_array_append_new(calls_out, json_null());
    for (size_t k = 0; k < calls && s == KC_STATUS_OK; k++) {
        json_t *from = NULL, *to = NULL;
        int training = -1;
        s = nested_input(e, name, k, json_array_size(ins), &from, &training);
        if (s != KC_STATUS_OK) {
            json_decref(from);
            break;
        }
        sc.call = parent->call * (int)calls + (int)k;
        json_t *io = nest_io(ls, ins, outs);
        sc.nest = nest_index(f, path, name, seq, parent, training, json_string_value(json_array_get(json_array_get(ins, 0), 0)),
                             io);
        json_decref(io);
        json_object_set_new(json_array_get(f->nests, (size_t)sc.nest - 1), "calls", json_integer((json_int_t)calls));
        s = inline_call(f, ls, ins, outs, from, &sc, &to);
        if (s == KC_STATUS_OK) json_array_append_new(calls_out, to);
        else json_decref(to);
    }
    if (s == KC_STATUS_OK) json_object_set(map, name, calls_out);
    json_decref(calls_out);
    json_decref(ls);
    json_decref(ins);
    json_decref(outs);
    return s;
}

/* A layer name not yet used: `name`, else "<model>_<name>", else with a number. */
static void unique_name(const flat *f, const char *model, const char *name, char *buf, size_t n) {
    snprintf(buf, n, "%s", name);
    if (!json_object_get(f->used, buf)) return;
    snprintf(buf, n, "%s_%s", model, name);
    for (int k = 2; json_object_get(f->used, buf); k++) snprintf(buf, n, "%s_%s_%d", model, name, k);
}

/* Layer entry c (its references renamed; owned) at `path` of scope sc into f: a new entry at
 * the first call of its nested model, its nodes added to that entry at a later call (an
 * operation node, which has no weights and one node: a new entry each call); map[name] gets
 * the new name and the nodes of this call. */
static void inline_layer(flat *f, json_t *c, json_t *map, const char *path, const char *name, const scope *sc) {
    json_t *nodes = json_object_get(c, "inbound_nodes");
    size_t n = KC_MAX(json_array_size(nodes), 1);
    bool op = kc__json_is_op_node(c);
    json_t *made = op ? NULL : json_object_get(f->made, path);
    char nn[KC_NAME_MAX];
    if (made) { /* a later call of its nested model */
        snprintf(nn, sizeof nn, "%s", kc__json_entry_name(made));
        if (nodes) json_array_extend(json_object_get(made, "inbound_nodes"), nodes);
        json_decref(c);
    } else {
        if (sc->prefix) unique_name(f, sc->model, name, nn, sizeof nn);
        else snprintf(nn, sizeof nn, "%s", name);
        if (json_object_get(c, "name")) json_object_set_new(c, "name", json_string(nn));
        json_t *cfg = json_object_get(c, "config");
        if (json_is_object(cfg) && json_object_get(cfg, "name")) json_object_set_new(cfg, "name", json_string(nn));
        if (sc->frozen && json_is_object(cfg)) json_object_set_new(cfg, "trainable", json_false());
        json_object_set_new(f->used, nn, json_true());
        if (sc->prefix) {
            json_object_set_new(f->paths, nn, json_pack("[ssis]", path, sc->group, sc->nest, name));
            json_object_set(f->made, path, c);
        }
        json_array_append_new(f->out, c);
    }
    if (!sc->prefix) return; /* the model's own layers keep their names and nodes */
    json_t *to = json_array();
    size_t at = op ? 0 : (size_t)sc->call * n; /* this call's first node */
    for (size_t j = 0; j < n; j++) json_array_append_new(to, json_pack("[sI]", nn, (json_int_t)(at + j)));
    json_object_set_new(map, name, to);
}

static kc_status walk(flat *f, const json_t *layers, json_t *map, const scope *sc) {
    json_t *counts = json_object();
    size_t i;
    json_t *e;
    kc_status s = KC_STATUS_OK;
    json_array_foreach(layers, i, e) {
        const char *name = kc__json_entry_name(e);
        char here[2 * KC_NAME_MAX], path[sizeof here + KC_NAME_MAX];
        numbered(counts, stem_of(e), here, sizeof here);
        if (sc->prefix) snprintf(path, sizeof path, "%s/layers/%s", sc->prefix, here);
        else snprintf(path, sizeof path, "%s", here);
        if (sc->prefix && is_input(e)) continue; /* the caller mapped it to the outer tensor */
        json_t *c = json_deep_copy(e);
        rename_refs(json_object_get(c, "inbound_nodes"), map);
        if (!is_nested(e) && name) {
            inline_layer(f, c, map, path, name, sc);
            continue;
        }
        if (is_nested(e)) s = inline_model(f, c, map, path, sc);
        else s = kc__fail(KC_STATUS_BAD_FILE, PFX "layer #%zu of nested model '%s' has no name", i, sc->model);
        json_decref(c);
        if (s != KC_STATUS_OK) break;
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
    flat f = {json_array(), json_object(), json_object(), json_array(), json_object(), json_object()};
    json_array_foreach(layers, i, e) {
        const char *n = kc__json_entry_name(e);
        if (n && !is_nested(e)) json_object_set_new(f.used, n, json_true());
    }
    json_t *map = json_object();
    const scope top = {"", NULL, NULL, 0, 0, false};
    kc_status s = walk(&f, layers, map, &top);
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
    json_decref(f.made);
    json_decref(f.nestid);
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
        k->multi = json_is_true(json_object_get(e, "multi"));
        const json_t *ins = json_object_get(e, "ins"), *outs = json_object_get(e, "outs");
        if (k->multi && (!ins || !outs)) continue; /* saved flat */
        k->multi = false;
        k->n_in = (int)json_array_size(ins);
        k->n_out = (int)json_array_size(outs);
        for (int q = 0; q < k->n_in; q++) {
            const json_t *r = json_array_get(ins, (size_t)q);
            snprintf(k->in_name[q], KC_NAME_MAX, "%s", json_string_value(json_array_get(r, 0)));
            snprintf(k->in_user[q], KC_NAME_MAX, "%s", json_string_value(json_array_get(r, 1)));
            k->in_slot[q] = (int)json_integer_value(json_array_get(r, 2));
        }
        for (int q = 0; q < k->n_out; q++)
            snprintf(k->out_name[q], KC_NAME_MAX, "%s", json_string_value(json_array_get(outs, (size_t)q)));
        k->parent = (int)json_integer_value(json_object_get(e, "parent"));
        k->training = (int)json_integer_value(json_object_get(e, "training"));
        k->calls = (int)json_integer_value(json_object_get(e, "calls"));
    }
    return KC_STATUS_OK;
}
