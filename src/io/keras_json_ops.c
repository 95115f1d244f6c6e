/* keras_json_ops.c — Keras 3 operation nodes in a Functional config.
 *
 * Keras 3 records arithmetic on symbolic tensors (`x + 3.0`, `x * (1.0 / 6.0)`, `2.0 - x`,
 * `inputs + layer(x)`, keras.ops.multiply(a, b)) as entries of a keras.src.ops class:
 *   {"module": "keras.src.ops.numpy", "class_name": "Add", "config": {"name": "add"},
 *    "registered_name": "Add", "name": "add",
 *    "inbound_nodes": [{"args": [<keras tensor>, 3.0], "kwargs": {}}]}
 * Each becomes a TensorOp layer (src/layers/tensor_op.c): two tensors, or a tensor and a
 * number in either order. The writer (keras_json_write.c) writes them back in this form. */
#include <string.h>

#include "keras_json_read.h"

#define OPS_MODULE "keras.src.ops"

/* By its module; in the legacy .h5 model_config, which has no modules, by its class and its
 * two positional arguments (a merge layer of the same class name takes one: a list). */
bool kc__json_is_op_node(const json_t *entry) {
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

kc_status kc__json_parse_op_node(const json_t *entry, int index, parsed_layer *pl, const json_t *targs[2],
                                 int *n_tensors) {
    char b[128];
    memset(pl, 0, sizeof *pl);
    *n_tensors = 0;
    const char *cls = json_string_value(json_object_get(entry, "class_name"));
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
