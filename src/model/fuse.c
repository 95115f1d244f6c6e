/* fuse.c — a BatchNormalization followed by a ReLU runs as one pass over the
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
 * two layers everywhere else (weights, summaries, saved models).
 *
 * a ZeroPadding2D whose only consumer is a DepthwiseConv2D (MobileNetV2's four before
 * its stride-2 depthwise convolutions) is folded into it when the backend asks for it
 * (fold_pad_depthwise; the CPU's, unless kc_device_opts.cpu_fold_pad = KC_FALSE,
 * KERAC_CPU_FOLD_PAD=0): the convolution reads the unpadded input, with the padding added to its
 * own before (pad_top, pad_left) and the padding after implied by its output size, so the padded
 * copy is never written (forward) nor cut back (backward). An execution change only: the
 * ZeroPadding2D stays a layer with its own output shape in summaries and saved models.
 *
 * an Add of two inputs of its own shape whose only consumer is a ReLU (as above; ResNet's 16
 * block ends) computes max(a + b, 0) in its one pass when the backend has add_relu (the CPU's,
 * unless kc_device_opts.cpu_fuse_add_relu = KC_FALSE, KERAC_CPU_FUSE_ADD_RELU=0): the ReLU has
 * no forward and its y is the Add's memory (fwd_absorbed), but it keeps its own dy and its
 * backward, which masks from y as before (an Add's backward reads no y; its gradient is the
 * masked one, which its inputs may share, src/model/plan.c).
 *
 * In a training plan, a BatchNormalization whose only consumer is such an Add (two inputs of
 * its own shape; ResNet's 16 block ends, and the 4 projection shortcuts) is folded into it
 * when the backend has bn_add_relu (the CPU's, unless kc_device_opts.cpu_fuse_bn_add =
 * KC_FALSE, KERAC_CPU_FUSE_BN_ADD=0): the batch norm's forward only takes the batch statistics
 * (bn_folded), and the Add reads the batch norm's input and normalises it as it adds (and
 * applies its ReLU), so the batch norm's output is neither written nor read: two passes over
 * the activations less. The backward is unchanged: the batch norm's reads x, not y, and the
 * Add's reads neither. Training plans only: there the batch norm's input stays alive for its
 * backward anyway, so the Add may read it later; not with synchronised statistics (their
 * forward normalises in its own pass). */
#include "model.h"

/* Whether l is a layer of its own: not a shared layer's call, not sharing its weights. */
static bool unshared(const kc_layer *l) { return l->shares < 0 && l->calls == 0; }

/* Whether layer l is a ReLU that a fused batch norm can apply, and its upper clip (0: none). */
static bool fusable_relu(const kc_layer *l, float *relu_max) {
    if ((l->ops != &kc__relu_ops && l->ops != &kc__activation_ops) || !l->ops->activation || l->n_in != 1 ||
        !unshared(l) || l->defer_act)
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

/* ZeroPadding2D -> DepthwiseConv2D, see the top of the file. */
static void fold_pads(kc_model *m) {
    if (!m->be || !m->be->fold_pad_depthwise) return;
    const int out = kc__model_output(m);
    for (int j = 1; j < m->n_layers; j++) {
        kc_layer *d = m->layers[j];
        if (d->ops != &kc__depthwise_conv2d_ops || d->n_in != 1 || !unshared(d)) continue;
        const int i = d->in[0];
        kc_layer *p = m->layers[i];
        if (p->ops != &kc__zeropad2d_ops || p->n_in != 1 || i == out || !unshared(p) || consumers(m, i) != 1) continue;
        kc_zeropad2d_opts o;
        p->ops->get_opts(p, &o);
        p->pad_folded = p->absorbed = true;
        d->fold_h = p->in_shape[0].dim[0], d->fold_w = p->in_shape[0].dim[1];
        d->fold_top = o.padding[0][0], d->fold_left = o.padding[1][0];
    }
}

/* Whether node i is a BatchNormalization (bn) or an Add of two inputs of its own shape (add)
 * that can apply the ReLU after it. */
static bool bn_fusable(const kc_model *m, int i) {
    return m->layers[i]->ops == &kc__batchnorm_ops && unshared(m->layers[i]);
}

static bool add_fusable(const kc_model *m, int i) {
    const kc_layer *l = m->layers[i];
    if (l->ops != &kc__add_ops || l->n_in != 2 || !unshared(l)) return false;
    const kc__merge_cfg *c = l->cfg;
    return c->same[0] && c->same[1] && !c->average;
}

/* Each fusable ReLU whose producer passes can_fuse, is not the model's output and has no other
 * consumer: the producer applies it (relu_after, relu_max); the ReLU is absorbed (BatchNormalization:
 * no forward, no backward) or only its forward is (fwd_only: Add). */
static void fuse_relus(kc_model *m, bool (*can_fuse)(const kc_model *, int), bool fwd_only) {
    const int out = kc__model_output(m);
    for (int j = 1; j < m->n_layers; j++) {
        kc_layer *r = m->layers[j];
        float relu_max;
        if (!fusable_relu(r, &relu_max)) continue;
        const int i = r->in[0];
        if (!can_fuse(m, i) || i == out || consumers(m, i) != 1) continue;
        m->layers[i]->relu_after = true;
        m->layers[i]->relu_max = relu_max;
        if (fwd_only)
            r->fwd_absorbed = true;
        else
            r->absorbed = true;
    }
}

/* BatchNormalization -> Add, see the top of the file. */
static void fold_bns(kc_model *m) {
    const int out = kc__model_output(m);
    for (int j = 1; j < m->n_layers; j++) {
        if (!add_fusable(m, j)) continue;
        for (int k = 0; k < 2; k++) {
            const int i = m->layers[j]->in[k];
            kc_layer *b = m->layers[i];
            if (!bn_fusable(m, i) || b->relu_after || i == out || consumers(m, i) != 1) continue;
            if (m->layers[j]->in[1 - k] == i) continue; /* Add(bn, bn): read twice */
            b->bn_folded = true;
        }
    }
}

void kc__model_fuse(kc_model *m, bool training) {
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        l->relu_after = l->absorbed = l->pad_folded = l->fwd_absorbed = l->bn_folded = false;
        l->relu_max = 0.0f;
        l->fold_h = l->fold_w = l->fold_top = l->fold_left = 0;
    }
    fold_pads(m);
    const kc_backend *be = m->be;
    if (be && be->add_relu) fuse_relus(m, add_fusable, true);
    if (be && be->batchnorm_relu_forward_train && be->batchnorm_relu_forward_infer && be->batchnorm_relu_backward)
        fuse_relus(m, bn_fusable, false);
    if (training && be && be->bn_add_relu && !m->sync_bn) fold_bns(m); /* after: a BN + ReLU is not folded */
}
