/* keras_json_read.h — private to the Keras JSON reader (keras_json_read.c: the model,
 * Sequential and Functional; keras_json_layer.c: one layer entry, its class and config keys
 * into a kc_layer_spec, and the checks and messages both use). */
#ifndef KC_KERAS_JSON_READ_H
#define KC_KERAS_JSON_READ_H

#include <jansson.h>

#include "io.h"

#define PFX "model JSON: "

typedef struct parsed_layer {
    const kc_layer_ops *ops;     /* the layer kind (class name or alias) */
    const char *name;          /* the layer name ("" when the file gives none) */
    const char *cls;           /* its "class_name" as the file spells it */
    char label[KC_NAME_MAX + 64]; /* "layer 'conv2d' (Conv2D)" for messages */
    kc__layer_opts opts;
    bool has_batch_shape;      /* batch_input_shape / batch_shape / input_shape on a non-input layer */
    int batch_shape[KC_MAX_RANK];
    int axis;                  /* > 0: a Keras 2 style axis to check against the input rank */
    bool frozen;               /* "trainable": false */
} parsed_layer;

/* One entry of "layers": its class (through the registry: class name or alias) and every
 * config key through the kind's key table, the base keys and the extra keys; an unknown
 * class, key or value is an error naming the layer. */
kc_status kc__json_parse_layer(const json_t *entry, int index, parsed_layer *pl);
/* The name a layer entry goes by: its "name", else its config's "name", else NULL. */
const char *kc__json_entry_name(const json_t *entry);

/* A JSON value as short text for messages (into buf). */
const char *kc__json_text(const json_t *v, char *buf, size_t n);
/* "an object", "a list", ... */
const char *kc__json_type_name(const json_t *v);
/* The errors for a value of the wrong type, and for a value other than the only one kerac
 * implements; both name the layer (pl->label) and the key. */
kc_status kc__json_bad_type(const parsed_layer *pl, const char *key, const char *want, const json_t *v);
kc_status kc__json_unsupported_value(const parsed_layer *pl, const char *key, const json_t *v, const char *only);
/* Every key of obj is in list, else an error naming `what` and the key. */
kc_status kc__json_check_keys(const json_t *obj, const char *const *list, size_t n, const char *what);
/* [null, d1, d2, ...] into out (per-example dims, trailing zeros). */
kc_status kc__json_batch_shape(const parsed_layer *pl, const char *key, const json_t *v, int out[KC_MAX_RANK]);
/* "float32" or a float32 DTypePolicy. */
kc_status kc__json_check_dtype(const parsed_layer *pl, const char *key, const json_t *v);

/* Keras 3 operation nodes (keras_json_ops.c): whether an entry of
 * "layers" is one (its module is keras.src.ops...), and the entry as a TensorOp layer with
 * its tensor arguments (targs: the JSON keras tensors, n_tensors of them, in order). */
bool kc__json_is_op_node(const json_t *entry);
kc_status kc__json_parse_op_node(const json_t *entry, int index, parsed_layer *pl, const json_t *targs[2],
                                 int *n_tensors);

/* Nested models (keras_json_nested.c): inlines every Sequential/Functional entry of a
 * Functional config's "layers" into it, in place; *paths (NULL when there was none) maps
 * each inlined layer's name to [its Keras 3 weight path ("functional/layers/conv2d"), the
 * name of the outermost nested model it came from (its group in a legacy .h5), the nested
 * model holding it (1-based into *nests), its name there]; *nests lists the nested models
 * ({"name", "sequential", "parent", "training", "input"}), kept on the model by
 * kc__json_keep_nests so that a save writes them nested again (keras_nest.c). */
kc_status kc__json_inline_nested(json_t *config, json_t **paths, json_t **nests);
kc_status kc__json_keep_nests(kc_model *m, const json_t *nests);
/* keras-save: tf-keras's TFOpLambda "function" for a TensorOp operation ("math.multiply"),
 * NULL when tf-keras has none that kerac reads (keras_json_ops.c). */
const char *kc__json_tf_function(const char *op);
/* Whether a "layers" list has a nested model; a Sequential config (starting with its
 * InputLayer) as the equivalent Functional config (*out, new), to inline its nested models. */
bool kc__json_has_nested(const json_t *layers);
kc_status kc__json_sequential_as_functional(const json_t *config, json_t **out);

#endif /* KC_KERAS_JSON_READ_H */
