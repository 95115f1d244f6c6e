/* act.c — activations by Keras name. */
#include <string.h>

#include "layer.h"

static const char *const k_act_names[KC_ACT_COUNT] = {
    [KC_ACT_LINEAR] = "linear", [KC_ACT_RELU] = "relu",      [KC_ACT_SIGMOID] = "sigmoid",
    [KC_ACT_TANH] = "tanh",     [KC_ACT_SOFTMAX] = "softmax", [KC_ACT_ELU] = "elu",
    [KC_ACT_GELU] = "gelu",     [KC_ACT_LEAKY_RELU] = "leaky_relu", [KC_ACT_SILU] = "silu",
    [KC_ACT_RELU_GENERAL] = "relu", [KC_ACT_HARD_SIGMOID] = "hard_sigmoid", [KC_ACT_HARD_SILU] = "hard_silu",
    [KC_ACT_SOFTPLUS] = "softplus", [KC_ACT_SOFTSIGN] = "softsign", [KC_ACT_SELU] = "selu", [KC_ACT_MISH] = "mish",
    [KC_ACT_EXPONENTIAL] = "exponential", [KC_ACT_LOG_SOFTMAX] = "log_softmax", [KC_ACT_GELU_TANH] = "gelu_approximate",
    [KC_ACT_HARD_SIGMOID_K2] = "hard_sigmoid_k2",
};

#define KC_ACT_SUPPORTED                                                                                           \
    "linear, relu, relu6, sigmoid, tanh, softmax, log_softmax, elu, selu, gelu, leaky_relu, silu (swish), "      \
    "hard_sigmoid, hard_sigmoid_k2, hard_silu (hard_swish), softplus, softsign, mish, exponential"

/* Names that map to one kind with no parameters (Keras 3's spellings and aliases). */
static const struct {
    const char *name;
    kc_act kind;
} k_plain[] = {
    {"relu", KC_ACT_RELU},          {"sigmoid", KC_ACT_SIGMOID},         {"tanh", KC_ACT_TANH},
    {"softmax", KC_ACT_SOFTMAX},    {"gelu", KC_ACT_GELU},               {"silu", KC_ACT_SILU},
    {"swish", KC_ACT_SILU},         {"hard_sigmoid", KC_ACT_HARD_SIGMOID}, {"hard_silu", KC_ACT_HARD_SILU},
    {"hard_swish", KC_ACT_HARD_SILU}, {"softplus", KC_ACT_SOFTPLUS},     {"softsign", KC_ACT_SOFTSIGN},
    {"selu", KC_ACT_SELU},          {"mish", KC_ACT_MISH},               {"exponential", KC_ACT_EXPONENTIAL},
    {"log_softmax", KC_ACT_LOG_SOFTMAX},
    /* gelu(approximate=True) has no Keras name (Keras serialises only the exact "gelu"):
     * kerac's own, for the C API */
    {"gelu_approximate", KC_ACT_GELU_TANH},
    /* tf-keras's hard_sigmoid, clip(0.2 x + 0.5, 0, 1): the Keras JSON reader maps a Keras 2
     * file's "hard_sigmoid" to it, and the Keras 2 writer writes it back as "hard_sigmoid" */
    {"hard_sigmoid_k2", KC_ACT_HARD_SIGMOID_K2},
};

kc_status kc__act_parse(const char *name, kc_act_params *out) {
    kc_act_params p = {KC_ACT_LINEAR, 0.0f, 0.0f, 0.0f};
    if (!name || !name[0] || strcmp(name, "linear") == 0) p.kind = KC_ACT_LINEAR;
    else if (strcmp(name, "relu6") == 0) p.kind = KC_ACT_RELU_GENERAL, p.beta = 6.0f; /* min(max(x, 0), 6) */
    else if (strcmp(name, "elu") == 0) p.kind = KC_ACT_ELU, p.alpha = 1.0f;
    else if (strcmp(name, "leaky_relu") == 0) p.kind = KC_ACT_LEAKY_RELU, p.alpha = 0.2f;
    else {
        size_t i = 0;
        while (i < sizeof k_plain / sizeof k_plain[0] && strcmp(name, k_plain[i].name) != 0) i++;
        if (i < sizeof k_plain / sizeof k_plain[0]) p.kind = k_plain[i].kind;
    }
    if (p.kind == KC_ACT_LINEAR && name && name[0] && strcmp(name, "linear") != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED, "activation '%s' is not supported; use one of " KC_ACT_SUPPORTED,
                        name);
    if (out) *out = p;
    return KC_STATUS_OK;
}

const char *kc__act_name(const kc_act_params *a) {
    if (!a || a->kind < 0 || a->kind >= KC_ACT_COUNT) return "linear";
    if (a->kind == KC_ACT_RELU_GENERAL && a->alpha == 0.0f && a->beta == 6.0f && a->gamma == 0.0f) return "relu6";
    return k_act_names[a->kind];
}

bool kc__act_needs_input(kc_act kind) {
    switch (kind) {
    case KC_ACT_GELU: case KC_ACT_SILU: case KC_ACT_HARD_SIGMOID: case KC_ACT_HARD_SILU: case KC_ACT_SOFTPLUS:
    case KC_ACT_SOFTSIGN: case KC_ACT_SELU: case KC_ACT_MISH: case KC_ACT_GELU_TANH: case KC_ACT_HARD_SIGMOID_K2:
        return true;
    default: return false;
    }
}

int64_t kc__act_flops(kc_act kind) {
    switch (kind) {
    case KC_ACT_LINEAR: return 0;
    case KC_ACT_RELU: return 1;
    case KC_ACT_LEAKY_RELU: return 2;
    case KC_ACT_RELU_GENERAL: return 3;
    case KC_ACT_SIGMOID: return 4;
    case KC_ACT_TANH: return 5;
    case KC_ACT_ELU: return 4;
    case KC_ACT_SOFTMAX: return 5;
    case KC_ACT_SILU: return 5;
    case KC_ACT_GELU: return 8;
    case KC_ACT_HARD_SIGMOID: case KC_ACT_HARD_SIGMOID_K2: return 3;
    case KC_ACT_HARD_SILU: return 4;
    case KC_ACT_SOFTSIGN: return 3;
    case KC_ACT_SOFTPLUS: case KC_ACT_SELU: case KC_ACT_EXPONENTIAL: return 4;
    case KC_ACT_MISH: return 10;
    case KC_ACT_LOG_SOFTMAX: return 5;
    case KC_ACT_GELU_TANH: return 10;
    default: return 1;
    }
}
