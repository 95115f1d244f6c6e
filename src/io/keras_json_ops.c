/* keras_json_ops.c — Keras 3 operation nodes in a Functional config.
 *
 * Keras 3 records arithmetic on symbolic tensors (`x + 3.0`, `x * (1.0 / 6.0)`, `2.0 - x`,
 * `inputs + layer(x)`, keras.ops.multiply(a, b)) as entries of a keras.src.ops class:
 *   {"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"},
 *    "registered_name": "Add", "name": "add",
 *    "inbound_nodes": [{"args": [<keras tensor>, 3.0], "kwargs": {}}]}
 * Each becomes a TensorOp layer (src/layers/tensor_op.c): two tensors, or a tensor and a
 * number in either order. The writer (keras_json_write.c) writes them back in this form.
 *
 * tf-keras 2.x records the same arithmetic as TFOpLambda layers (MobileNetV3's hard_sigmoid,
 * ConvNeXt's residual add) named after the TensorFlow function, the first argument a tensor
 * and the second the keyword argument y (a number or a tensor):
 *   {"class_name": "TFOpLambda", "config": {"name": "tf.math.multiply", "trainable": true,
 *    "dtype": "float32", "function": "math.multiply"}, "name": "tf.math.multiply",
 *    "inbound_nodes": [["re_lu", 0, 0, {"y": 0.16666666666666666, "name": null}]]}
 * They become the same TensorOp layers (written back as Keras 3 operation nodes). */
#include <string.h>

#include "keras_json_read.h"

#define OPS_MODULE "keras.src.ops"

/* By its module; in the legacy .h5 model_config, which has no modules, by its class and its
 * two positional arguments (a merge layer of the same class name takes one: a list). */
bool kc__json_is_op_node(const json_t *entry) {
    const char *tf_cls = json_string_value(json_object_get(entry, "class_name"));
    if (tf_cls && strcmp(tf_cls, "TFOpLambda") == 0) return true;
    const char *mod = json_string_value(json_object_get(entry, "module"));
    if (mod) return strncmp(mod, OPS_MODULE, strlen(OPS_MODULE)) == 0;
    if (!kc__tensor_op_from_keras_class(json_string_value(json_object_get(entry, "class_name")))) return false;
    const json_t *args = json_object_get(json_array_get(json_object_get(entry, "inbound_nodes"), 0), "args");
    return json_is_array(args) && json_array_size(args) == 2;
}

static const char *const k_op_entry_keys[] = {"module", "class_name", "config", "registered_name", "name",
                                              "inbound_nodes"};
static const char *const k_op_config_keys[] = {"name"};
static const char *const k_node_keys[] = {"args", "kwargs"};

/* tf-keras's TensorFlow functions, by TFOpLambda's "function", as TensorOp operations. */
static const struct {
    const char *function, *op;
} k_tf_functions[] = {
    {"__operators__.add", "add"}, {"math.add", "add"},           {"math.subtract", "subtract"},
    {"math.multiply", "multiply"}, {"math.truediv", "true_divide"}, {"math.divide", "true_divide"},
    {"math.maximum", "maximum"},  {"math.minimum", "minimum"},
};

static const char *const k_tf_entry_keys[] = {"module", "class_name", "config", "registered_name", "build_config",
                                              "name", "inbound_nodes"};
const char *kc__json_tf_function(const char *op) {
    for (size_t i = 0; i < KC_ARRAY_LEN(k_tf_functions); i++) /* the first: "__operators__.add" for x + y */
        if (op && strcmp(op, k_tf_functions[i].op) == 0) return k_tf_functions[i].function;
    return NULL;
}

static const char *const k_tf_config_keys[] = {"name", "trainable", "dtype", "function"};
static const char *const k_tf_kwargs_keys[] = {"y", "name"};

static kc_status tf_op_unsupported(const parsed_layer *pl, const char *what, const json_t *v) {
    char b[128];
    return kc__fail(KC_STATUS_UNSUPPORTED,
                    PFX "%s %s %s; kerac reads tf-keras's TFOpLambda of add, subtract, multiply, truediv, "
                        "maximum and minimum called as f(tensor, y=tensor or number)",
                    pl->label, what, kc__json_text(v, b, sizeof b));
}

/* A TFOpLambda entry: inbound_nodes [[layer, 0, 0, {"y": ..., "name": null}]]; targs are the
 * tensors as [layer, node, tensor] lists. */
static kc_status parse_tf_op(const json_t *entry, parsed_layer *pl, const json_t *targs[2], int *n_tensors) {
    KC_TRY(kc__json_check_keys(entry, k_tf_entry_keys, KC_ARRAY_LEN(k_tf_entry_keys), pl->label));
    const json_t *cfg = json_object_get(entry, "config");
    if (!json_is_object(cfg)) return kc__json_bad_type(pl, "config", "an object", cfg);
    KC_TRY(kc__json_check_keys(cfg, k_tf_config_keys, KC_ARRAY_LEN(k_tf_config_keys), pl->label));
    const json_t *dtype = json_object_get(cfg, "dtype");
    if (dtype) KC_TRY(kc__json_check_dtype(pl, "dtype", dtype));
    const char *fn = json_string_value(json_object_get(cfg, "function"));
    kc_tensor_op_opts *o = &pl->opts.tensor_op;
    *o = (kc_tensor_op_opts){.name = pl->name};
    for (size_t i = 0; i < KC_ARRAY_LEN(k_tf_functions); i++)
        if (fn && strcmp(fn, k_tf_functions[i].function) == 0) o->op = k_tf_functions[i].op;
    if (!o->op) return tf_op_unsupported(pl, "calls the function", json_object_get(cfg, "function"));
    const json_t *nodes = json_object_get(entry, "inbound_nodes"), *node = json_array_get(nodes, 0);
    const json_t *kwargs = json_array_get(node, 3), *y = json_object_get(kwargs, "y");
    if (!json_is_array(nodes) || json_array_size(nodes) != 1 || !json_is_array(node) || json_array_size(node) != 4 ||
        !json_is_string(json_array_get(node, 0)) || !json_is_object(kwargs) || !y)
        return tf_op_unsupported(pl, "has the inbound nodes", nodes);
    KC_TRY(kc__json_check_keys(kwargs, k_tf_kwargs_keys, KC_ARRAY_LEN(k_tf_kwargs_keys), pl->label));
    const json_t *name = json_object_get(kwargs, "name");
    if (name && !json_is_null(name)) return tf_op_unsupported(pl, "is called with name=", name);
    targs[(*n_tensors)++] = node; /* [layer, node, tensor, kwargs]: the history and the call's keywords */
    if (json_is_number(y)) {
        o->scalar_side = 1;
        o->scalar = (float)json_number_value(y);
    } else if (json_is_array(y)) {
        targs[(*n_tensors)++] = y;
    } else {
        return tf_op_unsupported(pl, "is called with y=", y);
    }
    return KC_STATUS_OK;
}

kc_status kc__json_parse_op_node(const json_t *entry, int index, parsed_layer *pl, const json_t *targs[2],
                                 int *n_tensors) {
    char b[128];
    memset(pl, 0, sizeof *pl);
    *n_tensors = 0;
    const char *cls = json_string_value(json_object_get(entry, "class_name"));
    if (cls && strcmp(cls, "TFOpLambda") == 0) {
        const char *tf_name = kc__json_entry_name(entry);
        pl->name = tf_name ? tf_name : "";
        snprintf(pl->label, sizeof pl->label, "layer '%s' (TFOpLambda)", pl->name);
        if (index >= 0 && !tf_name) return kc__fail(KC_STATUS_BAD_FILE, PFX "%s (entry %d) has no name", pl->label, index);
        KC_TRY(parse_tf_op(entry, pl, targs, n_tensors));
        pl->ops = kc__layer_find("TensorOp");
        return pl->ops ? KC_STATUS_OK : kc__fail(KC_STATUS_INTERNAL, PFX "the TensorOp kind is not registered");
    }
    const char *mod = json_string_value(json_object_get(entry, "module"));
    if (!mod) mod = "keras.src.ops.numpy"; /* the legacy .h5 model_config */
    const char *name = kc__json_entry_name(entry);
    pl->name = name ? name : "";
    snprintf(pl->label, sizeof pl->label, "operation '%s' (%s.%s)", name ? name : "?", mod, cls ? cls : "?");
    if (index >= 0 && !name) return kc__fail(KC_STATUS_BAD_FILE, PFX "%s (entry %d) has no name", pl->label, index);
    KC_TRY(kc__json_check_keys(entry, k_op_entry_keys, KC_ARRAY_LEN(k_op_entry_keys), pl->label));
    const char *op = kc__tensor_op_from_keras_class(cls);
    if (strcmp(mod, "keras.src.ops.numpy") != 0 || !op)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is not supported; kerac implements the keras.src.ops.numpy operations Add, Subtract, "
                            "Multiply, Divide, TrueDivide, Maximum and Minimum on two tensors or a tensor and a number",
                        pl->label);
    const json_t *cfg = json_object_get(entry, "config");
    if (cfg && !json_is_object(cfg)) return kc__json_bad_type(pl, "config", "an object", cfg);
    if (cfg) KC_TRY(kc__json_check_keys(cfg, k_op_config_keys, KC_ARRAY_LEN(k_op_config_keys), pl->label));
    const json_t *nodes = json_object_get(entry, "inbound_nodes");
    if (!json_is_array(nodes) || json_array_size(nodes) != 1 || !json_is_object(json_array_get(nodes, 0)))
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s must have exactly one inbound node {\"args\": [...], \"kwargs\": {}} (an operation "
                            "used once), got %s",
                        pl->label, kc__json_text(nodes, b, sizeof b));
    const json_t *node = json_array_get(nodes, 0), *args = json_object_get(node, "args");
    KC_TRY(kc__json_check_keys(node, k_node_keys, KC_ARRAY_LEN(k_node_keys), pl->label));
    const json_t *kwargs = json_object_get(node, "kwargs");
    if (kwargs && !(json_is_object(kwargs) && json_object_size(kwargs) == 0))
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s is called with keyword arguments %s; kerac supports none",
                        pl->label, kc__json_text(kwargs, b, sizeof b));
    if (!json_is_array(args) || json_array_size(args) != 2)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s has arguments %s; kerac supports exactly two", pl->label,
                        kc__json_text(args, b, sizeof b));
    kc_tensor_op_opts *o = &pl->opts.tensor_op;
    *o = (kc_tensor_op_opts){.name = pl->name, .op = op};
    for (int k = 0; k < 2; k++) {
        const json_t *a = json_array_get(args, (size_t)k);
        if (json_is_number(a)) {
            if (o->scalar_side)
                return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s has two numbers as arguments; nothing to compute on",
                                pl->label);
            o->scalar_side = k == 0 ? 2 : 1;
            o->scalar = (float)json_number_value(a);
        } else {
            targs[(*n_tensors)++] = a;
        }
    }
    pl->ops = kc__layer_find("TensorOp");
    snprintf(pl->label, sizeof pl->label, "operation '%s' (%s)", pl->name, cls);
    return pl->ops ? KC_STATUS_OK : kc__fail(KC_STATUS_INTERNAL, PFX "the TensorOp kind is not registered");
}
