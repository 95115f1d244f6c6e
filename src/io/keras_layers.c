/* keras_layers.c — the config keys of every Keras layer class kerac reads and writes.
 *
 * Each table lists the keys of one class in the order Keras's get_config() writes them,
 * after the name/trainable/dtype header every layer shares. Metadata keys (data_format,
 * groups, regularizers, constraints, ...) are KC_F_FIXED: kerac accepts only the value it
 * implements and writes that value back, so that Keras can load what kerac writes. */
#include <stdio.h>
#include <string.h>

#include "io.h"

#define O(member) offsetof(kc__layer_opts, member)
#define NO KC_F_NO_OFFSET
/* the only value kerac accepts (JSON text; alternatives separated by '|', the first is written) */
#define FIXED(key, lit, flags) {key, KC_F_FIXED, flags, NO, lit, 0}
#define NULL_KEY(key, flags) FIXED(key, "null", flags)
#define CHANNELS_LAST(flags) FIXED("data_format", "\"channels_last\"|null", flags)

static const kc__field k_base[] = {
    {"name", KC_F_NAME, KC_F_W, O(input.name), NULL, 0},
    FIXED("trainable", "true", KC_F_W),
    /* Keras 3 writes {"class_name": "DTypePolicy", ...}; kerac writes the plain string
     * "float32", which every Keras 2 and 3 version reads. */
    {"dtype", KC_F_DTYPE, KC_F_W, NO, NULL, 0},
};

/* Read on any non-input layer, never written: the input shape Keras 2 puts on the first
 * layer of a Sequential model (the reader handles it), and keys newer Keras versions add
 * with a null default. */
static const kc__field k_extra[] = {
    {"batch_input_shape", KC_F_BATCH_SHAPE, 0, NO, NULL, 0},
    {"batch_shape", KC_F_BATCH_SHAPE, 0, NO, NULL, 0},
    {"input_shape", KC_F_SHAPE, 0, NO, NULL, 0},
    NULL_KEY("activity_regularizer", 0),
    NULL_KEY("quantization_config", 0),
};

static const kc__field k_input[] = {
    {"batch_shape", KC_F_BATCH_SHAPE, KC_F_W3, O(input.shape), NULL, 0},
    {"batch_input_shape", KC_F_BATCH_SHAPE, KC_F_W2, O(input.shape), NULL, 0},
    {"dtype", KC_F_DTYPE, KC_F_W, NO, NULL, 0},
    FIXED("sparse", "false|null", KC_F_W),
    FIXED("ragged", "false|null", KC_F_W),
    {"name", KC_F_NAME, KC_F_W, O(input.name), NULL, 0},
    FIXED("optional", "false", KC_F_W3),
    {"shape", KC_F_SHAPE, 0, O(input.shape), NULL, 0},
    {"input_shape", KC_F_SHAPE, 0, O(input.shape), NULL, 0},
    {"batch_size", KC_F_IGNORE, 0, NO, NULL, 0},
};

static const kc__field k_conv2d[] = {
    {"filters", KC_F_INT, KC_F_W, O(conv2d.filters), NULL, 0},
    {"kernel_size", KC_F_INT2, KC_F_W, O(conv2d.kernel_size), NULL, 0},
    {"strides", KC_F_INT2, KC_F_W, O(conv2d.strides), NULL, 1},
    {"padding", KC_F_STR, KC_F_W, O(conv2d.padding), "valid", 0},
    CHANNELS_LAST(KC_F_W),
    {"dilation_rate", KC_F_INT2, KC_F_W, O(conv2d.dilation_rate), NULL, 1},
    FIXED("groups", "1", KC_F_W),
    {"activation", KC_F_ACT, KC_F_W, O(conv2d.activation), "linear", 0},
    {"use_bias", KC_F_BOOL, KC_F_W, O(conv2d.use_bias), NULL, 1},
    {"kernel_initializer", KC_F_INIT, KC_F_W, O(conv2d.kernel_initializer), "glorot_uniform", 0},
    {"bias_initializer", KC_F_INIT, KC_F_W, O(conv2d.bias_initializer), "zeros", 0},
    NULL_KEY("kernel_regularizer", KC_F_W),
    NULL_KEY("bias_regularizer", KC_F_W),
    NULL_KEY("activity_regularizer", KC_F_W),
    NULL_KEY("kernel_constraint", KC_F_W),
    NULL_KEY("bias_constraint", KC_F_W),
    NULL_KEY("lora_rank", 0),
    {"lora_alpha", KC_F_IGNORE, 0, NO, NULL, 0},
};

static const kc__field k_dense[] = {
    {"units", KC_F_INT, KC_F_W, O(dense.units), NULL, 0},
    {"activation", KC_F_ACT, KC_F_W, O(dense.activation), "linear", 0},
    {"use_bias", KC_F_BOOL, KC_F_W, O(dense.use_bias), NULL, 1},
    {"kernel_initializer", KC_F_INIT, KC_F_W, O(dense.kernel_initializer), "glorot_uniform", 0},
    {"bias_initializer", KC_F_INIT, KC_F_W, O(dense.bias_initializer), "zeros", 0},
    NULL_KEY("kernel_regularizer", KC_F_W),
    NULL_KEY("bias_regularizer", KC_F_W),
    NULL_KEY("activity_regularizer", KC_F_W2), /* Keras 3's Dense writes it only when set */
    NULL_KEY("kernel_constraint", KC_F_W),
    NULL_KEY("bias_constraint", KC_F_W),
    NULL_KEY("lora_rank", 0),
    {"lora_alpha", KC_F_IGNORE, 0, NO, NULL, 0},
};

static const kc__field k_pool2d[] = {
    {"pool_size", KC_F_INT2, KC_F_W, O(pool2d.pool_size), NULL, 2},
    {"padding", KC_F_STR, KC_F_W, O(pool2d.padding), "valid", 0},
    {"strides", KC_F_POOL_STRIDES, KC_F_W, O(pool2d.strides), NULL, 0},
    CHANNELS_LAST(KC_F_W),
};

static const kc__field k_global_pool[] = {
    CHANNELS_LAST(KC_F_W),
    {"keepdims", KC_F_BOOL, KC_F_W, O(global_pool.keepdims), NULL, 0},
};

static const kc__field k_flatten[] = {
    CHANNELS_LAST(KC_F_W),
};

static const kc__field k_reshape[] = {
    {"target_shape", KC_F_SHAPE, KC_F_W, O(reshape.target_shape), NULL, 0},
};

static const kc__field k_dropout[] = {
    {"rate", KC_F_FLOAT, KC_F_W, O(dropout.rate), NULL, 0},
    {"seed", KC_F_SEED, KC_F_W3, O(dropout.seed), NULL, 0},       /* Keras 3 order */
    NULL_KEY("noise_shape", KC_F_W),
    {"seed", KC_F_SEED, KC_F_W2, O(dropout.seed), NULL, 0},       /* Keras 2 order */
};

static const kc__field k_batchnorm[] = {
    {"axis", KC_F_AXIS, KC_F_W | KC_F_AXIS_LIST2, O(batchnorm.axis), NULL, 0},
    {"momentum", KC_F_FLOAT, KC_F_W, O(batchnorm.momentum), NULL, 0.99},
    {"epsilon", KC_F_FLOAT, KC_F_W, O(batchnorm.epsilon), NULL, 1e-3},
    {"center", KC_F_BOOL, KC_F_W, O(batchnorm.center), NULL, 1},
    {"scale", KC_F_BOOL, KC_F_W, O(batchnorm.scale), NULL, 1},
    {"beta_initializer", KC_F_FIXED_INIT, KC_F_W, NO, "zeros", 0},
    {"gamma_initializer", KC_F_FIXED_INIT, KC_F_W, NO, "ones", 0},
    {"moving_mean_initializer", KC_F_FIXED_INIT, KC_F_W, NO, "zeros", 0},
    {"moving_variance_initializer", KC_F_FIXED_INIT, KC_F_W, NO, "ones", 0},
    NULL_KEY("beta_regularizer", KC_F_W),
    NULL_KEY("gamma_regularizer", KC_F_W),
    NULL_KEY("beta_constraint", KC_F_W),
    NULL_KEY("gamma_constraint", KC_F_W),
    FIXED("synchronized", "false", KC_F_W3),
    FIXED("renorm", "false", 0),
    NULL_KEY("renorm_clipping", 0),
    {"renorm_momentum", KC_F_IGNORE, 0, NO, NULL, 0}, /* unused while renorm is false */
    NULL_KEY("virtual_batch_size", 0),
    NULL_KEY("adjustment", 0),
    {"fused", KC_F_IGNORE, 0, NO, NULL, 0},           /* a TensorFlow kernel choice */
};

static const kc__field k_activation[] = {
    {"activation", KC_F_ACT, KC_F_W, O(activation.activation), "linear", 0},
};

static const kc__field k_relu[] = {
    {"max_value", KC_F_MAX_VALUE, KC_F_W, O(relu.max_value), NULL, 0},
    {"negative_slope", KC_F_FLOAT, KC_F_W, O(relu.negative_slope), NULL, 0},
    {"threshold", KC_F_FLOAT, KC_F_W, O(relu.threshold), NULL, 0},
};

static const kc__field k_softmax[] = {
    {"axis", KC_F_AXIS, KC_F_W, O(softmax.axis), NULL, 0},
};

static const kc__field k_zeropad2d[] = {
    {"padding", KC_F_PAD2, KC_F_W, O(zeropad2d.padding), NULL, 0},
    CHANNELS_LAST(KC_F_W),
};

static const kc__field k_concatenate[] = {
    {"axis", KC_F_AXIS, KC_F_W, O(merge.axis), NULL, 0},
};

#define CLASS(name, flags, table) {name, flags, table, (int)KC_ARRAY_LEN(table)}

static const kc__keras_class k_classes[] = {
    CLASS("InputLayer", KC_CLS_INPUT, k_input),
    CLASS("Conv2D", 0, k_conv2d),
    CLASS("Dense", 0, k_dense),
    CLASS("MaxPooling2D", 0, k_pool2d),
    CLASS("AveragePooling2D", 0, k_pool2d),
    CLASS("GlobalAveragePooling2D", 0, k_global_pool),
    CLASS("Flatten", 0, k_flatten),
    CLASS("Reshape", 0, k_reshape),
    CLASS("Dropout", 0, k_dropout),
    CLASS("BatchNormalization", 0, k_batchnorm),
    CLASS("Activation", 0, k_activation),
    CLASS("ReLU", 0, k_relu),
    CLASS("Softmax", 0, k_softmax),
    CLASS("ZeroPadding2D", 0, k_zeropad2d),
    {"Add", KC_CLS_MERGE, NULL, 0},
    CLASS("Concatenate", KC_CLS_MERGE, k_concatenate),
};

/* Other spellings Keras accepts for the same class. */
static const struct {
    const char *alias, *class_name;
} k_aliases[] = {
    {"Convolution2D", "Conv2D"},
    {"MaxPool2D", "MaxPooling2D"},
    {"AvgPool2D", "AveragePooling2D"},
    {"GlobalAvgPool2D", "GlobalAveragePooling2D"},
};

const kc__keras_class *kc__keras_class_find(const char *class_name) {
    if (!class_name) return NULL;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_aliases); i++)
        if (strcmp(class_name, k_aliases[i].alias) == 0) class_name = k_aliases[i].class_name;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_classes); i++)
        if (strcmp(class_name, k_classes[i].class_name) == 0) return &k_classes[i];
    return NULL;
}

int kc__keras_class_count(void) { return (int)KC_ARRAY_LEN(k_classes); }

const kc__keras_class *kc__keras_class_at(int i) {
    return i >= 0 && i < (int)KC_ARRAY_LEN(k_classes) ? &k_classes[i] : NULL;
}

const kc__field *kc__keras_base_fields(int *n) {
    *n = (int)KC_ARRAY_LEN(k_base);
    return k_base;
}

const kc__field *kc__keras_extra_fields(int *n) {
    *n = (int)KC_ARRAY_LEN(k_extra);
    return k_extra;
}

const char *kc__keras_class_list(char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (size_t i = 0; i < KC_ARRAY_LEN(k_classes) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", k_classes[i].class_name);
    return buf;
}

/* The initializers kerac implements (src/layers/init.c), by Keras name and class. */
static const kc__keras_init k_inits[] = {
    {"glorot_uniform", "GlorotUniform", 1}, {"glorot_normal", "GlorotNormal", 1},
    {"he_uniform", "HeUniform", 1},         {"he_normal", "HeNormal", 1},
    {"lecun_uniform", "LecunUniform", 1},   {"lecun_normal", "LecunNormal", 1},
    {"zeros", "Zeros", 0},                  {"ones", "Ones", 0},
};

const kc__keras_init *kc__keras_init_find(const char *name) {
    if (!name) return NULL;
    if (strcmp(name, "zero") == 0) name = "zeros";
    if (strcmp(name, "one") == 0) name = "ones";
    for (size_t i = 0; i < KC_ARRAY_LEN(k_inits); i++)
        if (strcmp(name, k_inits[i].name) == 0 || strcmp(name, k_inits[i].class_name) == 0) return &k_inits[i];
    return NULL;
}
