/* keras_json_write.c — a kerac model as Keras's JSON model config, in the Keras 3 or the
 * Keras 2 flavour, with every default key Keras writes for each layer class so that real
 * Keras loads it (keras.models.model_from_json / tf.keras.models.model_from_json).
 *
 * The options come back from each layer through ops->get_opts (the public kc_*_opts
 * struct); the kinds' key tables (ops->keras_keys) say where each key's value lives and
 * which flavour writes it. Floats are written as their shortest float32 decimal ("0.99", not
 * "0.9900000095367432"), as Python writes the float Keras holds. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io.h"
#include "keras_json_read.h"
#include "keras_json_values.h"
#include "keras_nest.h"

typedef struct writer {
    const kc_model *m;
    int flavour;               /* 2 or 3 */
    bool ok;                   /* false once an allocation failed */
    kc_status err;             /* a layer option this flavour cannot express (act_name's error) */
    const kc__nesting *ng;     /* the model's nested models (ng->on: written nested) */
    int scope;                 /* the nested model being written (0: the model) */
} writer;

/* A layer's name in the model being written: inside a nested model, its name there. */
static const char *own_name(const writer *w, const kc_layer *l) {
    return w->ng->on && l->keras_nest ? l->keras_inner : l->name;
}

/* The index of x in v[0..n), else 0. */
static int index_of(const int *v, int n, int x) {
    for (int i = 0; i < n; i++)
        if (v[i] == x) return i;
    return 0;
}

/* How the model being written refers to node's output: a layer of its own (its call),
 * the nested model holding it (Keras 3 numbers its calls from node 0, Keras 2 from 1: its graph
 * is node 0; *tensor: which of its outputs), or, for a node outside the nested model being
 * written, that model's InputLayer for it. */
static const char *ref_name(const writer *w, int node, int *call, int *tensor) {
    const kc_layer *l = kc__model_layer(w->m, node);
    *call = kc__model_call_index(w->m, node);
    *tensor = 0;
    if (!w->ng->on) return l->name;
    int c = kc__nest_child(w->m, node, w->scope);
    if (c == 0) return own_name(w, l);
    if (c > 0) { /* its output's call, counted in one call of the model being written */
        int g = kc__nest_call_in(w->m, w->ng, node, c);
        *tensor = index_of(KC__NEST_IO(w->ng, call_out, c, g), kc__nest_n_out(w->m, c), node);
        *call = g % w->ng->local[c] + (w->flavour == 2);
        return w->m->nests[c - 1].name;
    }
    *call = 0;
    const kc__nest *nt = &w->m->nests[w->scope - 1];
    if (kc__nest_n_in(w->m, w->scope) == 1) return nt->input;
    return nt->in_name[index_of(KC__NEST_IO(w->ng, call_in, w->scope, 0), nt->n_in, node)];
}

static void put(writer *w, json_t *obj, const char *key, json_t *v) {
    if (!v || !obj || json_object_set_new(obj, key, v) != 0) w->ok = false;
}

static void push(writer *w, json_t *arr, json_t *v) {
    if (!v || !arr || json_array_append_new(arr, v) != 0) w->ok = false;
}

/* The shortest decimal that reads back as the same float32, as a JSON real. */
static json_t *jfloat(float v) {
    char buf[32];
    for (int p = 6; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)v);
        if (strtof(buf, NULL) == v) break;
    }
    return json_real(strtod(buf, NULL));
}

/* [null, d1, d2, ...] (with_batch) or [d1, d2, ...] */
static json_t *shape_list(writer *w, const int *dims, int rank, bool with_batch) {
    json_t *a = json_array();
    if (with_batch) push(w, a, json_null());
    for (int i = 0; i < rank; i++) push(w, a, json_integer(dims[i]));
    return a;
}

static int dims_rank(const int *dims) {
    int r = 0;
    while (r < KC_MAX_RANK && dims[r] != 0) r++;
    return r;
}

static json_t *kshape(writer *w, const kc_shape *s) { return shape_list(w, s->dim, s->rank, true); }

static json_t *int_pair(writer *w, int a, int b) {
    json_t *p = json_array();
    push(w, p, json_integer(a));
    push(w, p, json_integer(b));
    return p;
}

/* An initializer object: {"module": "keras.initializers", "class_name": "GlorotUniform",
 * "config": {"seed": null}, "registered_name": null} (Keras 2: class_name and config only). */
static json_t *initializer(writer *w, const char *name) {
    const kc__initializer *k = kc__init_find(name);
    if (!k) return json_string(name); /* not reached: layers keep canonical names */
    json_t *o = json_object(), *cfg = json_object();
    if (k->is_constant) put(w, cfg, "value", json_real(k->vs_scale));
    if (k->vs_mode) { /* a general VarianceScaling: its keys in Keras's order */
        put(w, cfg, "scale", json_real(k->vs_scale));
        put(w, cfg, "mode", json_string(k->vs_mode));
        put(w, cfg, "distribution", json_string(k->vs_distribution));
    }
    if (k->has_seed) put(w, cfg, "seed", json_null());
    if (w->flavour == 3) put(w, o, "module", json_string("keras.initializers"));
    put(w, o, "class_name", json_string(k->class_name));
    put(w, o, "config", cfg);
    if (w->flavour == 3) put(w, o, "registered_name", json_null());
    return o;
}

/* The activation name the flavour's Keras reads with kerac's meaning, else an error naming
 * the layer (w->err) and NULL: never a file that Keras reads differently or not at all.
 * tf-keras 2.16 reads relu6, log_softmax and leaky_relu (tf.nn's), swish for silu. */
static const char *act_name(writer *w, const kc_layer *l, const char *s) {
    if (!s) return NULL;
    const char *why = NULL;
    if (strcmp(s, "gelu_approximate") == 0)
        why = "Keras serialises only the exact gelu (gelu(approximate=True) has no name in a config); use \"gelu\"";
    else if (w->flavour == 2 && strcmp(s, "silu") == 0)
        return "swish"; /* tf-keras's name */
    else if (w->flavour == 2 && strcmp(s, "hard_sigmoid_k2") == 0)
        return "hard_sigmoid";
    else if (w->flavour == 2 && strcmp(s, "hard_sigmoid") == 0)
        why = "tf-keras's hard_sigmoid is clip(0.2 x + 0.5, 0, 1), not Keras 3's relu6(x + 3) / 6; save in the Keras 3 "
              "flavour (.keras)";
    else if (w->flavour == 2 && strcmp(s, "hard_silu") == 0)
        why = "tf-keras has no hard_silu (hard_swish); save in the Keras 3 flavour (.keras)";
    else if (w->flavour == 3 && strcmp(s, "hard_sigmoid_k2") == 0)
        why = "it is tf-keras's hard_sigmoid, clip(0.2 x + 0.5, 0, 1), which Keras 3 does not have; save in the "
              "Keras 2 flavour (.h5)";
    if (!why) return s;
    if (w->err == KC_STATUS_OK)
        w->err = kc__fail(KC_STATUS_UNSUPPORTED, "model JSON: layer '%s' (%s): activation '%s' cannot be written for "
                                                 "Keras %d: %s",
                          l->name, l->ops->class_name, s, w->flavour, why);
    return NULL;
}

static json_t *field_value(writer *w, const kc_layer *l, const kc__layer_opts *o, const kc__field *f) {
    const void *src = f->off == KC_F_NO_OFFSET ? NULL : (const char *)o + f->off;
    switch (f->kind) {
    case KC_F_NAME:
        return json_string(own_name(w, l));
    case KC_F_INT:
        return json_integer(*(const int *)src);
    case KC_F_INT2: {
        const int *a = src;
        int v0 = a[0] ? a[0] : (int)f->def;
        int v1 = a[1] ? a[1] : v0;
        return int_pair(w, v0, v1);
    }
    case KC_F_POOL_STRIDES: {
        const int *a = src, *pool = o->maxpool2d.pool_size; /* both pooling kinds: kc_pool2d_opts */
        int p0 = pool[0] ? pool[0] : 2;
        int p1 = pool[1] ? pool[1] : p0;
        if (!a[0]) return int_pair(w, p0, p1);
        return int_pair(w, a[0], a[1] ? a[1] : a[0]);
    }
    case KC_F_FLOAT:
    case KC_F_FLOAT_GIVEN: {
        float v = *(const float *)src;
        bool given = f->kind == KC_F_FLOAT_GIVEN && *(const int *)((const char *)o + f->given_off);
        return jfloat(v == 0.0f && !given ? (float)f->def : v);
    }
    case KC_F_MAX_VALUE: {
        float v = *(const float *)src;
        return v > 0.0f ? jfloat(v) : json_null();
    }
    case KC_F_BOOL:
        return json_boolean(kc__bool3(*(const int *)src, f->def != 0));
    case KC_F_STR:
    case KC_F_ACT: {
        const char *s = *(const char *const *)src;
        if (f->kind == KC_F_ACT && s && *s && !(s = act_name(w, l, s))) return json_null();
        return json_string(s && *s ? s : f->lit);
    }
    case KC_F_INIT: {
        const char *s = *(const char *const *)src;
        return initializer(w, s ? s : f->lit);
    }
    case KC_F_FIXED_INIT:
        return initializer(w, f->lit);
    case KC_F_SHAPE: {
        const int *d = src;
        return shape_list(w, d, dims_rank(d), false);
    }
    case KC_F_BATCH_SHAPE: {
        const int *d = src;
        return shape_list(w, d, dims_rank(d), true);
    }
    case KC_F_SEED: {
        uint64_t s = *(const uint64_t *)src;
        return s ? json_integer((json_int_t)(s & 0x7fffffffffffffffull)) : json_null();
    }
    case KC_F_PAD2: {
        const int(*p)[2] = src;
        bool zero = !p[0][0] && !p[0][1] && !p[1][0] && !p[1][1];
        json_t *a = json_array();
        push(w, a, zero ? int_pair(w, 1, 1) : int_pair(w, p[0][0], p[0][1]));
        push(w, a, zero ? int_pair(w, 1, 1) : int_pair(w, p[1][0], p[1][1]));
        return a;
    }
    case KC_F_AXIS:
        if ((f->flags & KC_F_AXIS_LIST2) && w->flavour == 2) { /* Keras 2 writes the built axis: [3] */
            json_t *a = json_array();
            push(w, a, json_integer(l->in_shape[0].rank));
            return a;
        }
        return json_integer(-1);
    case KC_F_FIXED: {
        char first[64];
        const char *bar = strchr(f->lit, '|');
        snprintf(first, sizeof first, "%.*s", (int)(bar ? (size_t)(bar - f->lit) : strlen(f->lit)), f->lit);
        return json_loads(first, JSON_DECODE_ANY, NULL);
    }
    case KC_F_DTYPE:
        return json_string("float32");
    case KC_F_IGNORE:
    case KC_F__END:
        return NULL;
    case KC_F_CONSTS:
        return kc__json_write_consts(src, jfloat);
    case KC_F_AXES:
        return kc__json_write_axes(src);
    case KC_F_NOISE_SHAPE:
        return kc__json_write_noise_shape(src);
    case KC_F_CROP2: {
        const int(*p)[2] = src;
        json_t *a = json_array();
        push(w, a, int_pair(w, p[0][0], p[0][1]));
        push(w, a, int_pair(w, p[1][0], p[1][1]));
        return a;
    }
    case KC_F_FACTOR: { /* augmentation */
        const kc_factor *k = src;
        if (k->given == 1) return jfloat(k->lower);
        if (k->given != 2) return json_null();
        json_t *a = json_array();
        push(w, a, jfloat(k->lower));
        push(w, a, jfloat(k->upper));
        return a;
    }
    case KC_F_FLOAT_PAIR: {
        const float *p = src;
        if (p[0] == 0.0f && p[1] == 0.0f) return json_loads(f->lit, JSON_DECODE_ANY, NULL);
        json_t *a = json_array();
        push(w, a, jfloat(p[0]));
        push(w, a, jfloat(p[1]));
        return a;
    }
    case KC_F_OPT_INT2: { /* convolutions */
        const kc_opt_int2 *a = src;
        return a->set ? int_pair(w, a->v[0], a->v[1]) : json_null();
    }
    }
    return NULL;
}

/* Numbers by value (0 and 0.0 alike), lists element by element, the rest as jansson. */
static bool same_value(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (!json_is_array(a) || !json_is_array(b)) return json_equal((json_t *)a, (json_t *)b);
    if (json_array_size(a) != json_array_size(b)) return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!same_value(json_array_get(a, i), json_array_get(b, i))) return false;
    return true;
}

/* Field t[i] is a Keras-3-only key (no Keras 2 key for the same option): away from Keras's
 * default, tf-keras has no such option (RandomContrast's value_range, Resizing's
 * pad_to_aspect_ratio, LayerNormalization's rms_scaling), so the Keras 2 flavour cannot
 * express the layer (w->err; a legacy .h5 is then written as Keras 3's own). */
static void check_keras3_only(writer *w, const kc_layer *l, const kc__layer_opts *o, const kc__field *t, int n, int i) {
    const kc__field *f = &t[i];
    for (int j = 0; j < n; j++)
        if (j != i && t[j].off == f->off && (t[j].flags & KC_F_W2)) return; /* written under its Keras 2 key */
    json_t *def = NULL;
    if (f->kind == KC_F_BOOL) def = json_boolean(f->def != 0);
    else if (f->kind == KC_F_FLOAT) def = json_real(f->def);
    else if (f->kind == KC_F_STR && f->lit) def = json_string(f->lit);
    else if (f->kind == KC_F_FLOAT_PAIR && f->lit) def = json_loads(f->lit, JSON_DECODE_ANY, NULL);
    if (!def) return;
    json_t *v = field_value(w, l, o, f);
    if (v && !same_value(v, def) && w->err == KC_STATUS_OK) {
        char b[64];
        w->err = kc__fail(KC_STATUS_UNSUPPORTED,
                          "model JSON: layer '%s' (%s): option '%s' = %s has no tf-keras equivalent; it can be "
                          "written for Keras 3 only",
                          l->name, l->ops->class_name, f->key, kc__json_text(v, b, sizeof b));
    }
    json_decref(v);
    json_decref(def);
}

static void put_fields(writer *w, json_t *cfg, const kc_layer *l, const kc__layer_opts *o, const kc__field *t, int n) {
    unsigned want = w->flavour == 3 ? KC_F_W3 : KC_F_W2;
    for (int i = 0; i < n; i++) {
        if (t[i].flags & want) put(w, cfg, t[i].key, field_value(w, l, o, &t[i]));
        else if (w->flavour == 2 && (t[i].flags & KC_F_W3) && t[i].off != KC_F_NO_OFFSET) check_keras3_only(w, l, o, t, n, i);
    }
}

/* A Keras 3 call argument naming the output of layer `node`. */
static json_t *keras_tensor(writer *w, int node) {
    const kc_layer *src = kc__model_layer(w->m, node);
    json_t *t = json_object(), *cfg = json_object(), *hist = json_array();
    int call = 0, tensor = 0;
    push(w, hist, json_string(ref_name(w, node, &call, &tensor)));
    push(w, hist, json_integer(call)); /* a shared layer's call */
    push(w, hist, json_integer(tensor));
    put(w, cfg, "shape", kshape(w, &src->out_shape));
    put(w, cfg, "dtype", json_string("float32"));
    put(w, cfg, "keras_history", hist);
    put(w, t, "class_name", json_string("__keras_tensor__"));
    put(w, t, "config", cfg);
    return t;
}

/* One call of a layer: the node l (a layer's first call, or a later call of a shared layer). */
static void inbound_node(writer *w, const kc_layer *l, json_t *nodes) {
    if (w->flavour == 2) { /* [["conv2d", 0, 0, {}], ...] */
        json_t *node = json_array();
        for (int k = 0; k < l->n_in; k++) {
            json_t *ref = json_array();
            int call = 0, tensor = 0;
            push(w, ref, json_string(ref_name(w, l->in[k], &call, &tensor)));
            push(w, ref, json_integer(call));
            push(w, ref, json_integer(tensor));
            push(w, ref, json_object());
            push(w, node, ref);
        }
        push(w, nodes, node);
        return;
    }
    /* {"args": [tensor] or [[tensor, tensor]], "kwargs": {}} */
    json_t *node = json_object(), *args = json_array();
    if (kc__keras_is_merge(l->ops)) {
        json_t *list = json_array();
        for (int k = 0; k < l->n_in; k++) push(w, list, keras_tensor(w, l->in[k]));
        push(w, args, list);
    } else {
        push(w, args, keras_tensor(w, l->in[0]));
    }
    put(w, node, "args", args);
    put(w, node, "kwargs", json_object());
    push(w, nodes, node);
}

/* Every call of the layer: its first node, then the later calls of a shared layer. */
static json_t *inbound_nodes(writer *w, const kc_layer *l) {
    json_t *nodes = json_array();
    if (l->n_in == 0) return nodes;
    inbound_node(w, l, nodes);
    if (w->scope > 0) return nodes; /* in a nested model: its later calls are the nested model's */
    for (int c = l->index + 1; l->calls && c < w->m->n_layers; c++)
        if (kc__model_layer(w->m, c)->shares == l->index) inbound_node(w, kc__model_layer(w->m, c), nodes);
    return nodes;
}

/* Keras 3 build_config: {"input_shape": [null, ...]} or, for a merge, a list of shapes. */
static json_t *build_config(writer *w, const kc_layer *l) {
    json_t *b = json_object();
    if (kc__keras_is_merge(l->ops)) {
        json_t *list = json_array();
        for (int k = 0; k < l->n_in; k++) push(w, list, kshape(w, &l->in_shape[k]));
        put(w, b, "input_shape", list);
    } else {
        put(w, b, "input_shape", kshape(w, &l->in_shape[0]));
    }
    return b;
}

/* keras-save: a TensorOp read from tf-keras's TFOpLambda, in the Keras 2 flavour, as the
 * TFOpLambda layer tf-keras writes: f(x, y=number) or f(x, y=tensor). */
static kc_status tf_op_entry(writer *w, const kc_layer *l, const kc_tensor_op_opts *o, json_t **out) {
    const char *fn = kc__json_tf_function(o->op);
    if (!fn || o->scalar_side == 2)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "model JSON: layer '%s' (TensorOp %s%s) has no tf-keras TFOpLambda form that kerac writes",
                        l->name, o->op, o->scalar_side == 2 ? " with the number first" : "");
    json_t *e = json_object(), *cfg = json_object(), *ref = json_array(), *kwargs = json_object();
    put(w, cfg, "name", json_string(own_name(w, l)));
    put(w, cfg, "trainable", json_true());
    put(w, cfg, "dtype", json_string("float32"));
    put(w, cfg, "function", json_string(fn));
    put(w, e, "class_name", json_string("TFOpLambda"));
    put(w, e, "config", cfg);
    put(w, e, "name", json_string(own_name(w, l)));
    for (int k = 0; k < l->n_in; k++) { /* [x, 0, 0, {"y": ...}]; y: [layer, node, 0] or the number */
        int call = 0, tensor = 0;
        json_t *r = k == 0 ? ref : json_array();
        push(w, r, json_string(ref_name(w, l->in[k], &call, &tensor)));
        push(w, r, json_integer(call));
        push(w, r, json_integer(tensor));
        if (k > 0) put(w, kwargs, "y", r);
    }
    if (o->scalar_side == 1) put(w, kwargs, "y", jfloat(o->scalar));
    put(w, kwargs, "name", json_null());
    push(w, ref, kwargs);
    json_t *nodes = json_array();
    push(w, nodes, ref);
    put(w, e, "inbound_nodes", nodes);
    *out = e;
    return KC_STATUS_OK;
}

/* A TensorOp as the Keras 3 operation node it was read from (keras_json_ops.c): tensor and
 * number arguments in their order. Written so in both flavours (only Keras 3 has them), but
 * one read from tf-keras's TFOpLambda goes back as one in the Keras 2 flavour. */
static kc_status op_node_entry(writer *w, const kc_layer *l, bool functional, json_t **out) {
    kc_tensor_op_opts o;
    l->ops->get_opts(l, &o);
    if (functional && w->flavour == 2 && l->keras_tf_op) return tf_op_entry(w, l, &o, out);
    const char *cls = kc__tensor_op_keras_class(o.op);
    if (!functional || !cls)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "model JSON: layer '%s' (TensorOp) is a Keras 3 operation node, which only a Functional "
                        "model holds; build the model with kc_functional",
                        l->name);
    json_t *e = json_object(), *cfg = json_object(), *nodes = json_array(), *node = json_object(), *args = json_array();
    put(w, e, "module", json_string("keras.src.ops.numpy"));
    put(w, e, "class_name", json_string(cls));
    put(w, cfg, "name", json_string(own_name(w, l)));
    put(w, e, "config", cfg);
    put(w, e, "registered_name", json_string(cls));
    put(w, e, "name", json_string(own_name(w, l)));
    if (o.scalar_side == 2) push(w, args, jfloat(o.scalar));
    for (int k = 0; k < l->n_in; k++) push(w, args, keras_tensor(w, l->in[k]));
    if (o.scalar_side == 1) push(w, args, jfloat(o.scalar));
    put(w, node, "args", args);
    put(w, node, "kwargs", json_object());
    push(w, nodes, node);
    put(w, e, "inbound_nodes", nodes);
    *out = e;
    return KC_STATUS_OK;
}

static kc_status layer_entry(writer *w, const kc_layer *l, bool functional, json_t **out) {
    *out = NULL;
    if (strcmp(l->ops->class_name, "TensorOp") == 0) return op_node_entry(w, l, functional, out);
    if (!l->ops->get_opts)
        return kc__fail(KC_STATUS_UNSUPPORTED, "model JSON: layer '%s' has class %s, which the JSON writer does not know",
                        l->name, l->ops->class_name);
    kc__layer_opts o;
    memset(&o, 0, sizeof o);
    l->ops->get_opts(l, &o);
    json_t *cfg = json_object();
    if (!kc__keras_is_input(l->ops)) {
        int nb = 0;
        const kc__field *base = kc__keras_base_fields(&nb);
        put_fields(w, cfg, l, &o, base, nb);
        if (l->frozen) put(w, cfg, "trainable", json_false()); /* in place: the key keeps its position */
        if (l->ops->flags & KC_LAYER_NO_TRAINABLE_KEY) json_object_del(cfg, "trainable");
    }
    put_fields(w, cfg, l, &o, l->ops->keras_keys, l->ops->n_keras_keys);
    if (w->err != KC_STATUS_OK) {
        json_decref(cfg);
        return w->err;
    }
    json_t *e = json_object();
    if (w->flavour == 3) put(w, e, "module", json_string(l->ops->keras_module ? l->ops->keras_module : "keras.layers"));
    /* the class as the file read spelled it, in that file's flavour (tf-keras finds
     * InceptionResNetV2's layer only as "Custom>CustomScaleLayer", Keras 3 only as the plain
     * name); kerac's name for a layer built in kerac or read from the other flavour */
    bool as_read = l->keras_class[0] && l->keras_class_flavour == w->flavour;
    put(w, e, "class_name", json_string(as_read ? l->keras_class : l->ops->class_name));
    put(w, e, "config", cfg);
    if (w->flavour == 3) {
        put(w, e, "registered_name", l->ops->registered_name ? json_string(l->ops->registered_name) : json_null());
        if (!kc__keras_is_input(l->ops)) put(w, e, "build_config", build_config(w, l));
    }
    if (functional) {
        put(w, e, "name", json_string(own_name(w, l)));
        put(w, e, "inbound_nodes", inbound_nodes(w, l));
    }
    *out = e;
    return KC_STATUS_OK;
}

/* Keras 2: [["name", 0, 0], ...]; Keras 3 writes a model built as keras.Model(x, y) (one
 * tensor each, not lists) as ["name", 0, 0]. Both versions read both forms. */
static json_t *io_layers(writer *w, const int *nodes, int n) {
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *ref = json_array();
        int call = 0, tensor = 0;
        push(w, ref, json_string(ref_name(w, nodes[i], &call, &tensor)));
        push(w, ref, json_integer(call));
        push(w, ref, json_integer(tensor));
        if (w->flavour == 3 && n == 1) {
            json_decref(list);
            return ref;
        }
        push(w, list, ref);
    }
    return list;
}

static kc_status model_object(writer *w, json_t **out);

/* InputLayer i of nested model w->scope: the model's own InputLayer entry, renamed and
 * reshaped to the tensor the nested model takes there. */
static kc_status nest_input_entry(writer *w, int i, bool functional, json_t **out) {
    const kc__nest *nt = &w->m->nests[w->scope - 1];
    const char *name = kc__nest_n_in(w->m, w->scope) > 1 ? nt->in_name[i] : nt->input;
    KC_TRY(layer_entry(w, kc__model_layer(w->m, 0), functional, out));
    json_t *cfg = json_object_get(*out, "config");
    const char *key = w->flavour == 3 ? "batch_shape" : "batch_input_shape";
    int from = KC__NEST_IO(w->ng, call_in, w->scope, 0)[i];
    put(w, cfg, key, kshape(w, &kc__model_layer(w->m, from)->out_shape));
    put(w, cfg, "name", json_string(name));
    if (functional) put(w, *out, "name", json_string(name));
    return KC_STATUS_OK;
}

/* Nested model k as an entry of the model being written: its model object, and in a
 * Functional (`functional`) its name and its calls, each on the tensor it takes, with the
 * training argument it was called with. */
static kc_status nest_entry(writer *w, int k, bool functional, json_t **out) {
    int scope = w->scope;
    w->scope = k;
    kc_status s = model_object(w, out);
    w->scope = scope;
    if (s != KC_STATUS_OK || !functional) return s;
    const kc__nest *nt = &w->m->nests[k - 1];
    json_t *nodes = json_array();
    for (int c = 0; c < w->ng->local[k]; c++) { /* its calls in one call of the model being written */
        const int *from = KC__NEST_IO(w->ng, call_in, k, c), n_in = kc__nest_n_in(w->m, k);
        json_t *node = NULL;
        if (w->flavour == 2) { /* [[["input_1", 0, 0, {"training": false}], ...]] */
            node = json_array();
            for (int i = 0; i < n_in; i++) {
                int call = 0, tensor = 0;
                json_t *ref = json_array(), *kwargs = json_object();
                if (nt->training >= 0) put(w, kwargs, "training", json_boolean(nt->training));
                push(w, ref, json_string(ref_name(w, from[i], &call, &tensor)));
                push(w, ref, json_integer(call));
                push(w, ref, json_integer(tensor));
                push(w, ref, kwargs);
                push(w, node, ref);
            }
        } else { /* {"args": [tensor] or [[tensor, ...]], "kwargs": {"training": false}} */
            json_t *args = json_array(), *list = n_in > 1 ? json_array() : args, *kwargs = json_object();
            for (int i = 0; i < n_in; i++) push(w, list, keras_tensor(w, from[i]));
            if (n_in > 1) push(w, args, list);
            if (nt->training >= 0) put(w, kwargs, "training", json_boolean(nt->training));
            node = json_object();
            put(w, node, "args", args);
            put(w, node, "kwargs", kwargs);
        }
        push(w, nodes, node);
    }
    put(w, *out, "name", json_string(nt->name));
    put(w, *out, "inbound_nodes", nodes);
    return KC_STATUS_OK;
}

/* The entries of the model being written, in layers: the model's layers in their order, or,
 * when it keeps nested models, its entries (layers and nested models) in Keras's order. */
static kc_status scope_entries(writer *w, bool functional, json_t *layers) {
    const kc_model *m = w->m;
    int *items = malloc(((size_t)m->n_layers + 1) * sizeof *items), n = 0;
    if (!items) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "model JSON: out of memory writing model '%s'", m->name);
    kc_status s = KC_STATUS_OK;
    if (w->ng->on) n = kc__nest_items(m, w->scope, items);
    else
        for (int i = 0; i < m->n_layers; i++) items[n++] = i;
    for (int i = 0; w->scope > 0 && i < kc__nest_n_in(m, w->scope) && s == KC_STATUS_OK; i++) {
        json_t *e = NULL;
        s = nest_input_entry(w, i, functional, &e);
        if (s == KC_STATUS_OK) push(w, layers, e);
    }
    for (int i = 0; i < n && s == KC_STATUS_OK; i++) {
        json_t *e = NULL;
        if (items[i] >= 0 && kc__model_layer(m, items[i])->shares >= 0) continue; /* a later call: written with its layer */
        s = items[i] >= 0 ? layer_entry(w, kc__model_layer(m, items[i]), functional, &e) : nest_entry(w, -items[i], functional, &e);
        if (s == KC_STATUS_OK) push(w, layers, e);
    }
    free(items);
    return s;
}

/* The model (w->scope 0) or nested model w->scope: {"module", "class_name", "config", ...}. */
static kc_status model_object(writer *w, json_t **out) {
    const kc_model *m = w->m;
    const kc__nest *nt = w->scope ? &m->nests[w->scope - 1] : NULL;
    bool functional = nt ? !nt->sequential : !m->sequential && !w->ng->sequential;
    bool frozen = nt ? kc__nest_frozen(m, w->scope) : m->frozen;
    const kc_shape *in_shape = &kc__model_layer(m, nt ? w->ng->in[w->scope] : 0)->out_shape;
    json_t *layers = json_array();
    *out = NULL;
    kc_status s = scope_entries(w, functional, layers);
    if (s != KC_STATUS_OK) {
        json_decref(layers);
        return s;
    }
    json_t *cfg = json_object();
    put(w, cfg, "name", json_string(nt ? nt->name : m->name));
    if (w->flavour == 3 || (nt && functional)) put(w, cfg, "trainable", json_boolean(!frozen));
    if (w->flavour == 3 && !functional) put(w, cfg, "dtype", json_string("float32"));
    put(w, cfg, "layers", layers);
    if (functional) {
        int first = 0, last = kc__model_output(m);
        put(w, cfg, "input_layers", nt ? io_layers(w, KC__NEST_IO(w->ng, call_in, w->scope, 0), kc__nest_n_in(m, w->scope))
                                       : io_layers(w, &first, 1));
        put(w, cfg, "output_layers", nt ? io_layers(w, KC__NEST_IO(w->ng, call_out, w->scope, 0), kc__nest_n_out(m, w->scope))
                                        : io_layers(w, &last, 1));
    } else if (w->flavour == 3) {
        put(w, cfg, "build_input_shape", kshape(w, in_shape));
    }
    json_t *root = json_object();
    if (w->flavour == 3) put(w, root, "module", json_string(functional ? "keras.src.models.functional" : "keras"));
    put(w, root, "class_name", json_string(functional ? "Functional" : "Sequential"));
    put(w, root, "config", cfg);
    if (w->flavour == 3) {
        put(w, root, "registered_name", functional ? json_string("Functional") : json_null());
        if (!functional || nt) {
            json_t *b = json_object();
            put(w, b, "input_shape", functional ? json_null() : kshape(w, in_shape));
            put(w, root, "build_config", b);
        }
    } else if (!nt) {
        put(w, root, "keras_version", json_string("2.15.0"));
        put(w, root, "backend", json_string("tensorflow"));
    }
    if (!w->ok) {
        json_decref(root);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "model JSON: out of memory writing model '%s'", m->name);
    }
    *out = root;
    return KC_STATUS_OK;
}

kc_status kc__model_to_json_flags(kc_model *m, int flavour, size_t flags, char **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_to_json: the output pointer is NULL");
    *out = NULL;
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_to_json: model is NULL");
    if (flavour != 2 && flavour != 3)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "kc_model_to_json: flavour %d is not 2 (Keras 2, \"batch_input_shape\") or 3 (Keras 3)",
                        flavour);
    KC_TRY(kc_model_build(m)); /* final names and shapes */
    kc__nesting ng;
    KC_TRY(kc__nesting_init(m, &ng));
    writer w = {m, flavour, true, KC_STATUS_OK, &ng, 0};
    json_t *root = NULL;
    kc_status s = model_object(&w, &root);
    kc__nesting_free(&ng);
    KC_TRY(s);
    /* 15 significant digits print each shortest-float decimal back as it was */
    char *text = json_dumps(root, flags | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(15));
    json_decref(root);
    if (!text) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "model JSON: out of memory writing model '%s'", m->name);
    *out = text;
    return KC_STATUS_OK;
}

/* Compact, with Python's ", " and ": " separators, as Keras's to_json(). */
kc_status kc_model_to_json(kc_model *m, int flavour, char **out) { return kc__model_to_json_flags(m, flavour, 0, out); }
