/* keras_json_read.c — Keras's JSON model config (model.to_json(), config.json of a .keras
 * file, model_config of an .h5 file) into a kerac model, through the public builder.
 *
 * Accepted: Keras 2 (class_name/config/keras_version/backend, "batch_input_shape",
 * inbound_nodes [[["conv2d", 0, 0, {}]]], Keras 2.0's Sequential config as a bare list of
 * layers) and Keras 3 ("module", "registered_name", "build_config", "compile_config",
 * "batch_shape", DTypePolicy objects, inbound_nodes [{"args": [...], "kwargs": {}}]).
 *
 * Strict: a class, a config key or a value kerac does not implement is an error that names
 * the layer, the key and the value — never silently dropped. One layer entry is read in
 * keras_json_layer.c, through the key tables in each kind's file (ops->keras_keys). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keras_json_read.h"

typedef struct pending_axis {
    kc_node node;
    int axis;
} pending_axis;

typedef struct reader {
    kc_model *m;
    int n;                     /* entries in "layers" */
    const char **names;        /* (n) name of each entry in the file */
    int *ncalls, *first, *made; /* (n) each entry's calls (a shared layer has several), where its
                                   nodes start in `nodes`, how many are made */
    kc_node *nodes;            /* (the calls) the node made for each call of each entry, -1 until made */
    pending_axis *axes;        /* (n) at most one axis per layer */
    int n_axes;
    const kc_device_opts *dev; /* the device options to build on (NULL: the environment's) */
    kc_status (*before_alloc)(kc_model *m, void *user); /* set on the model before its build */
    void *before_alloc_user;
    bool frozen;               /* the model's "trainable": false */
    int flavour;               /* 2: written by Keras 2 (tf-keras), 3: by Keras 3 (file_flavour) */
    json_t *paths;             /* inlined nested-model layer -> Keras 3 weight path, or NULL */
    json_t *nests;             /* the nested models inlined: [{name, class, parent, training, input}], or NULL */
    json_t *owned;             /* a config made here (a Sequential nesting models, as Functional) */
} reader;

/* Which Keras wrote the config: its keras_version when it has one (to_json), else Keras 2's
 * "batch_input_shape" (Keras 3 writes "batch_shape") on any layer; Keras 3 otherwise. */
static int file_flavour(const json_t *root) {
    const char *version = json_string_value(json_object_get(root, "keras_version"));
    if (version && (version[0] == '1' || version[0] == '2') && version[1] == '.') return 2;
    if (version && version[0] >= '3' && version[0] <= '9') return 3;
    const json_t *config = json_object_get(root, "config");
    const json_t *layers = json_is_array(config) ? config : json_object_get(config, "layers");
    size_t i;
    const json_t *entry;
    json_array_foreach((json_t *)layers, i, entry) {
        if (json_object_get(json_object_get(entry, "config"), "batch_input_shape")) return 2;
    }
    return 3;
}

/* Activation names whose meaning differs between the flavours: a Keras 2 file's
 * "hard_sigmoid" is tf-keras's clip(0.2 x + 0.5, 0, 1), kerac's "hard_sigmoid_k2". */
static void keras2_activations(const reader *r, parsed_layer *pl) {
    if (r->flavour != 2 || !pl->ops) return;
    for (int i = 0; i < pl->ops->n_keras_keys; i++) {
        const kc__field *f = &pl->ops->keras_keys[i];
        if (f->kind != KC_F_ACT || f->off == KC_F_NO_OFFSET) continue;
        const char **a = (const char **)((char *)&pl->opts + f->off);
        if (*a && strcmp(*a, "hard_sigmoid") == 0) *a = "hard_sigmoid_k2";
    }
}

static kc_layer_spec spec_of(const parsed_layer *pl) { return (kc_layer_spec){pl->ops->class_name, &pl->opts}; }

/* A builder failure, with the JSON prefix. */
static kc_status builder_error(kc_model *m, kc_status s) {
    if (s == KC_STATUS_OK) s = kc_model_status(m);
    if (s == KC_STATUS_OK) s = KC_STATUS_INTERNAL;
    return kc__wrap(s, PFX);
}

/* What the layer made for pl keeps of its entry: the frozen flag, the class name as read. */
static void note_layer(reader *r, const parsed_layer *pl, kc_node node) {
    kc_layer *l = r->m->layers[node];
    l->frozen = pl->frozen;
    if (pl->cls) snprintf(l->keras_class, sizeof l->keras_class, "%s", pl->cls);
    l->keras_class_flavour = r->flavour;
    if (pl->axis > 0) r->axes[r->n_axes++] = (pending_axis){node, pl->axis};
}

/* ---------------------------------------------------------------- Sequential */

static const char *const k_seq_keys[] = {"name", "layers", "trainable", "dtype", "build_input_shape"};

/* The model's own keys; *frozen: "trainable": false (Keras's model.trainable = False). */
static kc_status check_model_header(const json_t *config, const char *what, bool *frozen) {
    parsed_layer pl = {0};
    snprintf(pl.label, sizeof pl.label, "%s", what);
    const json_t *t = json_object_get(config, "trainable");
    if (t && !json_is_boolean(t)) return kc__json_bad_type(&pl, "trainable", "true or false", t);
    *frozen = t && json_is_false(t);
    const json_t *d = json_object_get(config, "dtype");
    if (d) KC_TRY(kc__json_check_dtype(&pl, "dtype", d));
    const json_t *n = json_object_get(config, "name");
    if (n && !json_is_string(n) && !json_is_null(n)) return kc__json_bad_type(&pl, "name", "a string", n);
    return KC_STATUS_OK;
}

static kc_status read_sequential(reader *r, const json_t *config) {
    const json_t *layers = config;
    const char *name = NULL;
    const json_t *build_shape = NULL;
    if (json_is_object(config)) {
        KC_TRY(kc__json_check_keys(config, k_seq_keys, KC_ARRAY_LEN(k_seq_keys), "the Sequential config"));
        KC_TRY(check_model_header(config, "the Sequential model", &r->frozen));
        name = json_string_value(json_object_get(config, "name"));
        layers = json_object_get(config, "layers");
        build_shape = json_object_get(config, "build_input_shape");
        if (json_is_null(build_shape)) build_shape = NULL;
    }
    if (!json_is_array(layers))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Sequential config has no \"layers\" list (got %s)",
                        layers ? kc__json_type_name(layers) : "nothing");
    if (json_array_size(layers) == 0) return kc__fail(KC_STATUS_BAD_FILE, PFX "the Sequential model has no layers");
    KC_TRY(kc_sequential(name, &r->m));
    size_t i;
    const json_t *entry;
    json_array_foreach((json_t *)layers, i, entry) {
        parsed_layer pl;
        KC_TRY(kc__json_parse_layer(entry, (int)i, &pl));
        keras2_activations(r, &pl);
        bool input = kc__keras_is_input(pl.ops);
        if (i == 0 && !input) {
            /* Keras 2 puts the input shape on the first layer; Keras 3 in build_input_shape */
            kc_input_opts in = {0};
            if (pl.has_batch_shape) {
                memcpy(in.shape, pl.batch_shape, sizeof in.shape);
            } else if (build_shape) {
                parsed_layer model = {0};
                snprintf(model.label, sizeof model.label, "the Sequential model");
                KC_TRY(kc__json_batch_shape(&model, "build_input_shape", build_shape, in.shape));
            } else {
                return kc__fail(KC_STATUS_UNSUPPORTED,
                                PFX "the Sequential model has no input shape: its first %s has no batch_input_shape / "
                                    "batch_shape / input_shape and the config has no build_input_shape; build the model in Keras "
                                    "(or give it an Input) before saving",
                                pl.label);
            }
            kc_status s = kc_add(r->m, KC_INPUT(.shape = {in.shape[0], in.shape[1], in.shape[2], in.shape[3]}));
            if (s != KC_STATUS_OK) return builder_error(r->m, s);
        }
        kc_layer_spec spec = spec_of(&pl);
        kc_status s = kc_add(r->m, &spec);
        if (s != KC_STATUS_OK) return builder_error(r->m, s);
        note_layer(r, &pl, kc_model_num_layers(r->m) - 1);
    }
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- Functional */

typedef struct tensor_ref {
    const char *name;
    json_int_t node_index, tensor_index;
} tensor_ref;

/* [name, node_index, tensor_index] or [name, node_index, tensor_index, kwargs] */
static bool parse_history(const json_t *h, tensor_ref *out) {
    if (!json_is_array(h) || json_array_size(h) < 3 || json_array_size(h) > 4) return false;
    out->name = json_string_value(json_array_get(h, 0));
    if (!out->name || !json_is_integer(json_array_get(h, 1)) || !json_is_integer(json_array_get(h, 2))) return false;
    out->node_index = json_integer_value(json_array_get(h, 1));
    out->tensor_index = json_integer_value(json_array_get(h, 2));
    return true;
}

static kc_status check_ref(const parsed_layer *pl, const tensor_ref *t) {
    if (t->node_index < 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s takes call #%lld of layer '%s'; calls count from 0", pl->label,
                        (long long)t->node_index, t->name);
    if (t->tensor_index != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s takes output %lld of layer '%s'; kerac layers have one output", pl->label,
                        (long long)t->tensor_index, t->name);
    return KC_STATUS_OK;
}

static kc_status add_ref(const parsed_layer *pl, const tensor_ref *t, tensor_ref *refs, int *n) {
    KC_TRY(check_ref(pl, t));
    if (*n >= KC_MAX_INPUTS)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s has more than %d inputs", pl->label, KC_MAX_INPUTS);
    refs[(*n)++] = *t;
    return KC_STATUS_OK;
}

/* A Keras 3 call argument: {"class_name": "__keras_tensor__", "config": {"keras_history": [...]}} */
static kc_status keras_tensor_ref(const parsed_layer *pl, const json_t *arg, tensor_ref *out) {
    char b[128];
    const char *cls = json_string_value(json_object_get(arg, "class_name"));
    if (!cls || strcmp(cls, "__keras_tensor__") != 0 ||
        !parse_history(json_object_get(json_object_get(arg, "config"), "keras_history"), out))
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called with %s, which is not a Keras tensor; kerac supports layers called on the "
                            "outputs of other layers only",
                        pl->label, kc__json_text(arg, b, sizeof b));
    return KC_STATUS_OK;
}

/* The call arguments of a node. Keras 3 records `training` (true, false or null) in each
 * node of a layer whose call takes it (Dropout, BatchNormalization, ...) as it was while
 * the model was built; when the model runs, Keras overrides it with the mode of the call
 * (fit: training, predict: inference), as kerac does, so any boolean is accepted. `mask`
 * null is what Keras writes for layers without masking. Anything else changes what the
 * layer computes and is refused. */
static kc_status check_call_kwargs(const parsed_layer *pl, const json_t *kwargs) {
    char b[128];
    if (!kwargs || json_is_null(kwargs)) return KC_STATUS_OK;
    if (!json_is_object(kwargs)) return kc__json_bad_type(pl, "kwargs", "an object", kwargs);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)kwargs, key, v) {
        if (json_is_null(v)) continue;
        if (strcmp(key, "training") == 0 && json_is_boolean(v)) continue;
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called with the argument %s=%s; kerac accepts only the call arguments Keras "
                            "records itself (training=true/false/null, other arguments null); call the layer "
                            "without it",
                        pl->label, key, kc__json_text(v, b, sizeof b));
    }
    return KC_STATUS_OK;
}

/* The inputs of call `call` of a layer from its "inbound_nodes" (Keras 2 or 3 form; a shared
 * layer has one node per call). */
static kc_status parse_inbound(const json_t *entry, int call, const parsed_layer *pl, tensor_ref *refs, int *n) {
    char b[128];
    *n = 0;
    const json_t *nodes = json_object_get(entry, "inbound_nodes");
    if (!nodes || json_is_null(nodes)) return KC_STATUS_OK;
    if (!json_is_array(nodes)) return kc__json_bad_type(pl, "inbound_nodes", "a list", nodes);
    if ((size_t)call >= json_array_size(nodes)) return KC_STATUS_OK;
    const json_t *node = json_array_get(nodes, (size_t)call);
    if (json_is_array(node)) { /* Keras 2: [["conv2d", 0, 0, {}], ...] */
        size_t i;
        const json_t *item;
        json_array_foreach((json_t *)node, i, item) {
            tensor_ref t;
            if (!parse_history(item, &t))
                return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: inbound node entry %s is not [layer, node, tensor, kwargs]",
                                pl->label, kc__json_text(item, b, sizeof b));
            KC_TRY(check_call_kwargs(pl, json_array_get(item, 3)));
            KC_TRY(add_ref(pl, &t, refs, n));
        }
        return KC_STATUS_OK;
    }
    if (!json_is_object(node))
        return kc__json_bad_type(pl, "inbound_nodes", "a list of nodes ([[...]] or [{\"args\": ...}])", nodes);
    /* Keras 3: {"args": [tensor] or [[tensor, tensor]], "kwargs": {}} */
    static const char *const node_keys[] = {"args", "kwargs"};
    KC_TRY(kc__json_check_keys(node, node_keys, KC_ARRAY_LEN(node_keys), pl->label));
    const json_t *args = json_object_get(node, "args");
    if (!json_is_array(args) || json_array_size(args) == 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: its inbound node has no \"args\" list", pl->label);
    if (json_array_size(args) > 1)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called with %zu positional arguments; kerac supports one (a tensor, or a list of "
                            "tensors for a merge layer)",
                        pl->label, json_array_size(args));
    KC_TRY(check_call_kwargs(pl, json_object_get(node, "kwargs")));
    const json_t *a = json_array_get(args, 0);
    if (json_is_array(a)) {
        size_t i;
        const json_t *item;
        json_array_foreach((json_t *)a, i, item) {
            tensor_ref t;
            KC_TRY(keras_tensor_ref(pl, item, &t));
            KC_TRY(add_ref(pl, &t, refs, n));
        }
        return KC_STATUS_OK;
    }
    tensor_ref t;
    KC_TRY(keras_tensor_ref(pl, a, &t));
    return add_ref(pl, &t, refs, n);
}

/* A Keras 3 operation node (keras_json_ops.c) and its tensor arguments. */
static kc_status parse_op_node(const json_t *entry, int i, parsed_layer *pl, tensor_ref *refs, int *n) {
    const json_t *targs[2];
    int nt = 0;
    KC_TRY(kc__json_parse_op_node(entry, i, pl, targs, &nt));
    for (int k = 0; k < nt; k++) {
        tensor_ref t;
        if (json_is_array(targs[k])) { /* tf-keras's TFOpLambda: [layer, node, tensor(, kwargs)] */
            if (!parse_history(targs[k], &t))
                return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: argument %d is not [layer, node, tensor]", pl->label, k);
        } else {
            KC_TRY(keras_tensor_ref(pl, targs[k], &t));
        }
        KC_TRY(add_ref(pl, &t, refs, n));
    }
    return KC_STATUS_OK;
}

/* The node of call t->node_index of the layer called t->name: -1 while it is not made yet. */
static kc_status resolve(const reader *r, const char *who, const tensor_ref *t, kc_node *out) {
    *out = -1;
    for (int i = 0; i < r->n; i++)
        if (r->names[i] && strcmp(r->names[i], t->name) == 0) {
            if (t->node_index >= r->ncalls[i])
                return kc__fail(KC_STATUS_BAD_FILE, PFX "%s takes call #%lld of layer '%s', which is called %d time%s",
                                who, (long long)t->node_index, t->name, r->ncalls[i], r->ncalls[i] == 1 ? "" : "s");
            *out = r->nodes[r->first[i] + t->node_index];
            return KC_STATUS_OK;
        }
    return kc__fail(KC_STATUS_BAD_FILE, PFX "%s refers to layer '%s', which is not in the model's \"layers\"", who,
                    t->name);
}

/* input_layers / output_layers: ["name", 0, 0] or [["name", 0, 0], ...]. */
static kc_status parse_io_layers(const json_t *v, const char *key, tensor_ref *refs, int *n) {
    char b[128];
    parsed_layer pl = {0};
    snprintf(pl.label, sizeof pl.label, "%s", key);
    *n = 0;
    if (json_is_array(v) && json_is_string(json_array_get(v, 0))) {
        if (!parse_history(v, &refs[0])) goto bad;
        *n = 1;
        return check_ref(&pl, &refs[0]);
    }
    if (!json_is_array(v)) goto bad;
    size_t i;
    const json_t *item;
    json_array_foreach((json_t *)v, i, item) {
        tensor_ref t;
        if (!parse_history(item, &t)) goto bad;
        if (*n < KC_MAX_INPUTS) refs[*n] = t;
        (*n)++;
    }
    for (int k = 0; k < *n && k < KC_MAX_INPUTS; k++) KC_TRY(check_ref(&pl, &refs[k]));
    return KC_STATUS_OK;
bad:
    return kc__fail(KC_STATUS_BAD_FILE, PFX "\"%s\" must be [[\"layer\", 0, 0], ...], got %s", key,
                    v ? kc__json_text(v, b, sizeof b) : "nothing");
}

/* Each entry's number of calls (an InputLayer and an operation node: one node; a layer: one
 * per inbound node, several for a shared layer), and room for their nodes. */
static kc_status entry_calls(reader *r, const json_t *layers) {
    r->n = (int)json_array_size(layers);
    r->names = kc__calloc((size_t)r->n, sizeof *r->names, "layer names");
    r->ncalls = kc__calloc((size_t)r->n, sizeof *r->ncalls, "layer calls");
    r->first = kc__calloc((size_t)r->n, sizeof *r->first, "layer calls");
    r->made = kc__calloc((size_t)r->n, sizeof *r->made, "layer calls");
    r->axes = kc__calloc((size_t)r->n, sizeof *r->axes, "layer axes");
    if (!r->names || !r->ncalls || !r->first || !r->made || !r->axes) return KC_STATUS_OUT_OF_MEMORY;
    int total = 0;
    for (int i = 0; i < r->n; i++) {
        const json_t *entry = json_array_get(layers, (size_t)i);
        r->names[i] = kc__json_entry_name(entry);
        const json_t *nodes = json_object_get(entry, "inbound_nodes");
        int calls = json_is_array(nodes) ? (int)json_array_size(nodes) : 0;
        const char *cls = json_string_value(json_object_get(entry, "class_name"));
        if (kc__json_is_op_node(entry) || calls == 0 || (cls && strcmp(cls, "InputLayer") == 0)) calls = 1;
        r->ncalls[i] = calls;
        r->first[i] = total;
        total += calls;
    }
    r->nodes = kc__calloc((size_t)KC_MAX(total, 1), sizeof *r->nodes, "layer nodes");
    if (!r->nodes) return KC_STATUS_OUT_OF_MEMORY;
    for (int k = 0; k < total; k++) r->nodes[k] = -1;
    return KC_STATUS_OK;
}

/* Call `call` of entry i, when the nodes it takes are made (*made); else nothing yet. */
static kc_status make_call(reader *r, const json_t *entry, int i, int call, bool *made) {
    parsed_layer pl;
    tensor_ref refs[KC_MAX_INPUTS];
    int n = 0;
    *made = false;
    const bool op_node = kc__json_is_op_node(entry);
    if (op_node) KC_TRY(parse_op_node(entry, i, &pl, refs, &n));
    else KC_TRY(kc__json_parse_layer(entry, i, &pl));
    keras2_activations(r, &pl);
    if (!r->names[i])
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no name; a Functional model refers to layers by name", pl.label);
    if (!op_node) KC_TRY(parse_inbound(entry, call, &pl, refs, &n));
    kc_node xs[KC_MAX_INPUTS];
    for (int k = 0; k < n; k++) {
        KC_TRY(resolve(r, pl.label, &refs[k], &xs[k]));
        if (xs[k] < 0) return KC_STATUS_OK; /* its input is not made yet: a later pass */
    }
    kc_layer_spec spec = spec_of(&pl);
    kc_node y;
    if (kc__keras_is_input(pl.ops)) {
        if (n > 0)
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has inbound nodes; an InputLayer takes no inputs", pl.label);
        y = kc_input(r->m, &spec);
    } else if (n == 0) {
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no inbound_nodes: nothing feeds it", pl.label);
    } else if (call > 0) {
        y = kc_apply_shared(r->m, r->nodes[r->first[i]], xs, n); /* the layer's first call is made */
    } else if (n == 1 && (!kc__keras_is_merge(pl.ops) || op_node)) {
        y = kc_apply(r->m, &spec, xs[0]);
    } else {
        y = kc_merge(r->m, &spec, xs, n);
    }
    if (y < 0) return builder_error(r->m, KC_STATUS_OK);
    r->nodes[r->first[i] + call] = y;
    *made = true;
    if (call > 0) return KC_STATUS_OK; /* the rest is the layer's, set at its first call */
    /* [Keras 3 path, .h5 group, nested model, name inside it] */
    const json_t *where = json_object_get(r->paths, r->names[i]);
    const char *path = json_string_value(json_array_get(where, 0)), *group = json_string_value(json_array_get(where, 1));
    const char *inner = json_string_value(json_array_get(where, 3));
    kc_layer *ly = r->m->layers[y];
    if (path) snprintf(ly->keras_path, sizeof ly->keras_path, "%s", path);
    if (group) snprintf(ly->keras_h5_group, sizeof ly->keras_h5_group, "%s", group);
    if (inner) snprintf(ly->keras_inner, sizeof ly->keras_inner, "%s", inner);
    ly->keras_tf_op = op_node && !json_object_get(entry, "module") && r->flavour == 2 &&
                      !strcmp(json_string_value(json_object_get(entry, "class_name")), "TFOpLambda");
    ly->keras_nest = (int)json_integer_value(json_array_get(where, 2));
    note_layer(r, &pl, y);
    return KC_STATUS_OK;
}

/* Every call of every entry, as Keras does: in the order of "layers", each layer's calls in
 * order, a call whose inputs are not made yet waiting for the next pass (a shared layer's
 * later call can take a layer listed after it). */
static kc_status make_nodes(reader *r, const json_t *layers) {
    for (;;) {
        bool progress = false, left = false;
        for (int i = 0; i < r->n; i++) {
            const json_t *entry = json_array_get(layers, (size_t)i);
            while (r->made[i] < r->ncalls[i]) {
                bool made = false;
                KC_TRY(make_call(r, entry, i, r->made[i], &made));
                if (!made) break;
                r->made[i]++;
                progress = true;
            }
            left |= r->made[i] < r->ncalls[i];
        }
        if (!left) return KC_STATUS_OK;
        if (progress) continue;
        for (int i = 0; i < r->n; i++)
            if (r->made[i] < r->ncalls[i])
                return kc__fail(KC_STATUS_BAD_FILE,
                                PFX "layer '%s' (call #%d) takes inputs that no order of the layers computes first: the "
                                    "graph has a cycle",
                                r->names[i] ? r->names[i] : "?", r->made[i]);
    }
}

/* input_layers / output_layers: a made node. */
static kc_status resolve_made(const reader *r, const char *who, const tensor_ref *t, kc_node *out) {
    KC_TRY(resolve(r, who, t, out));
    if (*out < 0) return kc__fail(KC_STATUS_INTERNAL, PFX "%s: layer '%s' was not made", who, t->name);
    return KC_STATUS_OK;
}

static const char *const k_func_keys[] = {"name", "trainable", "layers", "input_layers", "output_layers"};

static kc_status read_functional(reader *r, json_t *config) {
    if (!json_is_object(config))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional model's \"config\" is %s, not an object",
                        kc__json_type_name(config));
    KC_TRY(kc__json_check_keys(config, k_func_keys, KC_ARRAY_LEN(k_func_keys), "the Functional config"));
    KC_TRY(kc__json_inline_nested(config, &r->paths, &r->nests));
    KC_TRY(check_model_header(config, "the Functional model", &r->frozen));
    const json_t *layers = json_object_get(config, "layers");
    if (!json_is_array(layers))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional config has no \"layers\" list (got %s)",
                        layers ? kc__json_type_name(layers) : "nothing");
    if (json_array_size(layers) == 0) return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional model has no layers");
    KC_TRY(entry_calls(r, layers));
    KC_TRY(kc_functional(json_string_value(json_object_get(config, "name")), &r->m));
    KC_TRY(make_nodes(r, layers));
    KC_TRY(kc__json_keep_nests(r->m, r->nests));
    tensor_ref refs[KC_MAX_INPUTS];
    int n = 0;
    kc_node node;
    KC_TRY(parse_io_layers(json_object_get(config, "input_layers"), "input_layers", refs, &n));
    if (n != 1)
        return kc__fail(n ? KC_STATUS_UNSUPPORTED : KC_STATUS_BAD_FILE,
                        PFX "the Functional model has %d inputs; kerac supports models with one input", n);
    KC_TRY(resolve_made(r, "input_layers", &refs[0], &node));
    if (!(kc__model_layer(r->m, node)->ops->flags & KC_LAYER_INPUT))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "input_layers names '%s', which is not an InputLayer", refs[0].name);
    KC_TRY(parse_io_layers(json_object_get(config, "output_layers"), "output_layers", refs, &n));
    if (n != 1)
        return kc__fail(n ? KC_STATUS_UNSUPPORTED : KC_STATUS_BAD_FILE,
                        PFX "the Functional model has %d outputs; kerac supports models with one output", n);
    KC_TRY(resolve_made(r, "output_layers", &refs[0], &node));
    kc_status s = kc_set_output(r->m, node);
    return s == KC_STATUS_OK ? s : builder_error(r->m, s);
}

/* ---------------------------------------------------------------- the model */

static const char *const k_top_keys[] = {"class_name",    "config",         "module",        "registered_name",
                                         "build_config", "compile_config", "keras_version", "backend"};

static kc_status check_axes(const reader *r) {
    for (int i = 0; i < r->n_axes; i++) {
        const kc_layer *l = kc__model_layer(r->m, r->axes[i].node);
        int last = l->in_shape[0].rank; /* with the batch axis 0 in front */
        if (r->axes[i].axis != last) {
            char b[96];
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "layer '%s' (%s): axis %d is not the last (channels) axis of its input %s; kerac "
                                "supports only axis -1 (= %d here)",
                            l->name, l->ops->class_name, r->axes[i].axis, kc__shape_str(&l->in_shape[0], true, b, sizeof b),
                            last);
        }
    }
    return KC_STATUS_OK;
}

/* compile_config's loss: "name", or {"class_name": "BinaryCrossentropy", "config":
 * {"from_logits": true, ...}}; a class name becomes its snake_case function name. Kept only
 * when kc_compile knows it (other losses: as if there were none). */
static void read_saved_loss(kc_model *m, const json_t *cc) {
    const json_t *loss = json_object_get(cc, "loss");
    const char *name = json_string_value(loss);
    char buf[sizeof m->saved_loss];
    m->saved_loss[0] = '\0';
    m->saved_from_logits = 0;
    if (!name && json_is_object(loss)) {
        const char *cls = json_string_value(json_object_get(loss, "class_name"));
        size_t n = 0;
        for (const char *c = cls; c && *c && n + 2 < sizeof buf; c++) {
            if (*c >= 'A' && *c <= 'Z' && n > 0) buf[n++] = '_';
            buf[n++] = (char)(*c >= 'A' && *c <= 'Z' ? *c - 'A' + 'a' : *c);
        }
        buf[n] = '\0';
        name = n ? buf : NULL;
        m->saved_from_logits = json_is_true(json_object_get(json_object_get(loss, "config"), "from_logits"));
    }
    for (int k = 0; name && k < KC_LOSS_COUNT; k++)
        if (strcmp(name, kc_loss_name((kc_loss_kind)k)) == 0) snprintf(m->saved_loss, sizeof m->saved_loss, "%s", name);
    if (!m->saved_loss[0] && name) {
        if (strcmp(name, "mse") == 0) snprintf(m->saved_loss, sizeof m->saved_loss, "mean_squared_error");
        if (strcmp(name, "mae") == 0) snprintf(m->saved_loss, sizeof m->saved_loss, "mean_absolute_error");
    }
    if (name && !m->saved_loss[0])
        kc__log(KC_LOG_DEBUG, PFX "the file was compiled with loss '%s', which kerac does not have", name);
}

int kc_model_saved_loss(const kc_model *m, const char **loss, int *from_logits) {
    if (!m || !m->saved_loss[0]) return 0;
    if (loss) *loss = m->saved_loss;
    if (from_logits) *from_logits = m->saved_from_logits;
    return 1;
}

static kc_status read_model(reader *r, const json_t *root) {
    if (!json_is_object(root))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the top level is %s; expected {\"class_name\": ..., \"config\": ...}",
                        kc__json_type_name(root));
    KC_TRY(kc__json_check_keys(root, k_top_keys, KC_ARRAY_LEN(k_top_keys), "the model"));
    const char *cls = json_string_value(json_object_get(root, "class_name"));
    const json_t *config = json_object_get(root, "config");
    if (!cls) return kc__fail(KC_STATUS_BAD_FILE, PFX "the model has no \"class_name\"");
    if (!config) return kc__fail(KC_STATUS_BAD_FILE, PFX "the %s model has no \"config\"", cls);
    const char *version = json_string_value(json_object_get(root, "keras_version"));
    if (version) kc__log(KC_LOG_DEBUG, PFX "written by Keras %s", version);
    r->flavour = file_flavour(root);
    if (strcmp(cls, "Sequential") == 0 && kc__json_has_nested(json_object_get(config, "layers"))) {
        json_t *func = NULL; /* models nested in a Sequential: read as the same Functional model */
        KC_TRY(kc__json_sequential_as_functional(config, &func));
        kc_status s = read_functional(r, func);
        r->owned = func;
        KC_TRY(s);
        r->m->keras_sequential = true;
    } else if (strcmp(cls, "Sequential") == 0) {
        /* the bare-list form has no per-layer axis bookkeeping array yet */
        size_t n = json_is_array(config) ? json_array_size(config) : json_array_size(json_object_get(config, "layers"));
        r->axes = kc__calloc(n + 1, sizeof *r->axes, "layer axes");
        if (!r->axes) return KC_STATUS_OUT_OF_MEMORY;
        KC_TRY(read_sequential(r, config));
    } else if (strcmp(cls, "Functional") == 0 || strcmp(cls, "Model") == 0) {
        KC_TRY(read_functional(r, (json_t *)config));
    } else {
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "model class '%s' is not supported; kerac reads Sequential and Functional models (a "
                            "subclassed model has no usable JSON config)",
                        cls);
    }
    r->m->keras_from = r->flavour;
    kc_status s = r->dev ? kc_model_set_device_opts(r->m, r->dev) : KC_STATUS_OK;
    if (s == KC_STATUS_OK && r->frozen) s = kc_model_set_trainable(r->m, NULL, 0); /* every layer, as Keras */
    r->m->before_alloc = r->before_alloc;
    r->m->before_alloc_user = r->before_alloc_user;
    if (s == KC_STATUS_OK) s = kc_model_build(r->m);
    if (s != KC_STATUS_OK) return kc__wrap(s, PFX);
    read_saved_loss(r->m, json_object_get(root, "compile_config"));
    return check_axes(r);
}

kc_status kc_model_from_json(const char *text, size_t len, kc_model **out) {
    return kc_model_from_json_ex(text, len, NULL, out);
}

kc_status kc_model_from_json_ex(const char *text, size_t len, const kc_device_opts *opts, kc_model **out) {
    return kc__model_from_json_hooked(text, len, opts, NULL, NULL, out);
}

kc_status kc__model_from_json_hooked(const char *text, size_t len, const kc_device_opts *opts,
                                     kc_status (*before_alloc)(kc_model *m, void *user), void *user, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_from_json: the output pointer is NULL");
    *out = NULL;
    if (!text) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_from_json: text is NULL");
    json_error_t e;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!root)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "line %d, column %d: %s", e.line, e.column, e.text);
    reader r = {.dev = opts, .before_alloc = before_alloc, .before_alloc_user = user};
    kc_status s = read_model(&r, root);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(r.m);
        r.m = NULL;
    }
    free(r.names);
    free(r.nodes);
    free(r.ncalls);
    free(r.first);
    free(r.made);
    json_decref(r.paths);
    json_decref(r.nests);
    json_decref(r.owned);
    free(r.axes);
    json_decref(root); /* after building: the layers copied what they keep */
    *out = r.m;
    return s;
}
