/* keras_layers.c — the config keys every Keras layer has, whatever its class: the
 * name/trainable/dtype header, and keys accepted on any layer but never written.
 *
 * Each kind's own keys are in its file in src/layers (ops->keras_keys, keras_keys.h).
 * Metadata keys (data_format, groups, regularizers, constraints, ...) are KC_F_FIXED:
 * kerac accepts only the value it implements and writes that value back, so that Keras
 * can load what kerac writes. */
#include "io.h"

static const kc__field k_base[] = {
    {"name", KC_F_NAME, KC_F_W, offsetof(kc__layer_opts, input_layer.name), NULL, 0},
    /* read by keras_json_layer.c into the layer's frozen flag, written from it */
    KC_KEY_FIXED("trainable", "true", KC_F_W),
    /* Keras 3 writes {"class_name": "DTypePolicy", ...}; kerac writes the plain string
     * "float32", which every Keras 2 and 3 version reads. */
    {"dtype", KC_F_DTYPE, KC_F_W, KC_F_NO_OFFSET, NULL, 0},
};

/* Read on any non-input layer, never written: the input shape Keras 2 puts on the first
 * layer of a Sequential model (the reader handles it), and keys newer Keras versions add
 * with a null default. */
static const kc__field k_extra[] = {
    {"batch_input_shape", KC_F_BATCH_SHAPE, 0, KC_F_NO_OFFSET, NULL, 0},
    {"batch_shape", KC_F_BATCH_SHAPE, 0, KC_F_NO_OFFSET, NULL, 0},
    {"input_shape", KC_F_SHAPE, 0, KC_F_NO_OFFSET, NULL, 0},
    KC_KEY_NULL("activity_regularizer", 0),
    KC_KEY_NULL("quantization_config", 0),
};

const kc__field *kc__keras_base_fields(int *n) {
    *n = (int)KC_ARRAY_LEN(k_base);
    return k_base;
}

const kc__field *kc__keras_extra_fields(int *n) {
    *n = (int)KC_ARRAY_LEN(k_extra);
    return k_extra;
}
