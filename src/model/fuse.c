/* fuse.c — mnv2-speed: a BatchNormalization followed by a ReLU runs as one pass over the
 * activations (MobileNetV2 has 35 such pairs, ResNet50 33): the batch norm's kernel clips its
 * output, and in training masks the incoming gradient while it sums, so the ReLU layer has no
 * forward, no backward and no buffer of its own (kc__layer_is_alias: it shares the batch
 * norm's y and dy).
 *
 * Decided each time a plan is built, from the graph and the backend: the batch norm's only
 * consumer is a ReLU layer (ReLU with no negative slope and no threshold, any max_value; or
 * Activation("relu")), neither is a shared layer's call, the batch norm is not the model's
 * output, and the backend has the fused kernels (batchnorm_relu_*; the CPU's, unless
 * kc_device_opts.cpu_fuse_bn_relu = KC_FALSE, KERAC_CPU_FUSE_BN_RELU=0). The two layers stay
 * two layers everywhere else (weights, summaries, saved models). */
#include "model.h"

/* Whether layer l is a ReLU that a fused batch norm can apply, and its upper clip (0: none). */
static bool fusable_relu(const kc_layer *l, float *relu_max) {
    if ((l->ops != &kc__relu_ops && l->ops != &kc__activation_ops) || !l->ops->activation || l->n_in != 1 ||
        l->shares >= 0 || l->calls > 0 || l->defer_act)
        return false;
    const kc_act_params a = l->ops->activation(l);
    if (a.kind == KC_ACT_RELU) {
        *relu_max = 0.0f;
        return true;
    }
    if (a.kind != KC_ACT_RELU_GENERAL || a.alpha != 0.0f || a.gamma != 0.0f || !(a.beta >= 0.0f)) return false;
    *relu_max = a.beta;
    return true;
}

/* How many inputs of the graph's nodes read node i. */
static int consumers(const kc_model *m, int i) {
    int n = 0;
    for (int j = 0; j < m->n_layers; j++)
        for (int k = 0; k < m->layers[j]->n_in; k++) n += m->layers[j]->in[k] == i;
    return n;
}

void kc__model_fuse(kc_model *m) {
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        l->relu_after = l->absorbed = false;
        l->relu_max = 0.0f;
    }
    const kc_backend *be = m->be;
    if (!be || !be->batchnorm_relu_forward_train || !be->batchnorm_relu_forward_infer || !be->batchnorm_relu_backward)
        return;
    const int out = kc__model_output(m);
    for (int j = 1; j < m->n_layers; j++) {
        kc_layer *r = m->layers[j];
        float relu_max;
        if (!fusable_relu(r, &relu_max)) continue;
        const int i = r->in[0];
        kc_layer *b = m->layers[i];
        if (b->ops != &kc__batchnorm_ops || i == out || b->shares >= 0 || b->calls > 0 || consumers(m, i) != 1)
            continue;
        b->relu_after = true;
        b->relu_max = relu_max;
        r->absorbed = true;
    }
}
