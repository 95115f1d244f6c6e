/* act.c — activations by Keras name. */
#include <string.h>

#include "layer.h"

static const char *const k_act_names[KC_ACT_COUNT] = {
    [KC_ACT_LINEAR] = "linear", [KC_ACT_RELU] = "relu",      [KC_ACT_SIGMOID] = "sigmoid",
    [KC_ACT_TANH] = "tanh",     [KC_ACT_SOFTMAX] = "softmax", [KC_ACT_ELU] = "elu",
    [KC_ACT_GELU] = "gelu",     [KC_ACT_LEAKY_RELU] = "leaky_relu", [KC_ACT_SILU] = "silu",
    [KC_ACT_RELU_GENERAL] = "relu",
};

#define KC_ACT_SUPPORTED "linear, relu, relu6, sigmoid, tanh, softmax, elu, gelu, leaky_relu, silu (swish)"

kc_status kc__act_parse(const char *name, kc_act_params *out) {
    kc_act_params p = {KC_ACT_LINEAR, 0.0f, 0.0f, 0.0f};
    if (!name || !name[0] || strcmp(name, "linear") == 0) p.kind = KC_ACT_LINEAR;
    else if (strcmp(name, "relu") == 0) p.kind = KC_ACT_RELU;
    else if (strcmp(name, "relu6") == 0) p.kind = KC_ACT_RELU_GENERAL, p.beta = 6.0f; /* min(max(x, 0), 6) */
    else if (strcmp(name, "sigmoid") == 0) p.kind = KC_ACT_SIGMOID;
    else if (strcmp(name, "tanh") == 0) p.kind = KC_ACT_TANH;
    else if (strcmp(name, "softmax") == 0) p.kind = KC_ACT_SOFTMAX;
    else if (strcmp(name, "elu") == 0) p.kind = KC_ACT_ELU, p.alpha = 1.0f;
    else if (strcmp(name, "gelu") == 0) p.kind = KC_ACT_GELU;
    else if (strcmp(name, "leaky_relu") == 0) p.kind = KC_ACT_LEAKY_RELU, p.alpha = 0.2f;
    else if (strcmp(name, "silu") == 0 || strcmp(name, "swish") == 0) p.kind = KC_ACT_SILU;
    else
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

bool kc__act_needs_input(kc_act kind) { return kind == KC_ACT_GELU || kind == KC_ACT_SILU; }

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
    default: return 1;
    }
}
