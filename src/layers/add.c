/* add.c — Add: y = x0 + x1 + ... (2 to 8 inputs), with Keras's broadcasting (merge_ew.c). */
#include "layer.h"

static kc_status add_init(kc_layer *l, const void *opts) {
    kc__merge_cfg *c = l->cfg;
    c->op = KC_BIN_ADD, c->average = false;
    return KC_STATUS_OK;
}

static void add_get_opts(const kc_layer *l, void *opts) { *(kc_merge_opts *)opts = (kc_merge_opts){.name = l->name}; }

static kc_status add_build(kc_layer *l) { return kc__merge_build(l, l->cfg); }
/* With relu_after (src/model/fuse.c: two inputs of the output's shape) the ReLU after it too.
 * An input from a folded batch norm (a->fold[k], fuse.c) is that batch norm's input, normalised
 * here as it is read (bn_add_relu). */
static kc_status add_forward(kc_layer *l, const kc_fwd *a) {
    const kc__merge_cfg *c = l->cfg;
    if (a->fold[0] || a->fold[1]) {
        kc_bn_fold f[2];
        int ch = 0;
        for (int k = 0; k < 2; k++)
            if (a->fold[k]) ch = kc__bn_fold_of(a->fold[k], a->fold_aux[k], a->training, &f[k]);
        const int64_t n = (int64_t)a->batch * c->size;
        return a->be->bn_add_relu(a->be, a->y, a->x[0], a->fold[0] ? &f[0] : NULL, a->x[1], a->fold[1] ? &f[1] : NULL,
                                  n / ch, ch, l->relu_after, l->relu_max);
    }
    if (l->relu_after) return a->be->add_relu(a->be, a->y, a->x[0], a->x[1], (int64_t)a->batch * c->size, l->relu_max);
    return kc__merge_forward(l, l->cfg, a);
}
static kc_status add_backward(kc_layer *l, const kc_bwd *a) { return kc__merge_backward(l, l->cfg, a); }

static int64_t add_flops(const kc_layer *l) {
    const kc__merge_cfg *c = l->cfg;
    return c->size * (l->n_in - 1);
}

const kc_layer_ops kc__add_ops = {
    .class_name = "Add",
    .snake_name = "add",
    .cfg_size = sizeof(kc__merge_cfg),
    .opts_size = sizeof(kc_merge_opts),
    .min_inputs = 2,
    .max_inputs = KC_MAX_INPUTS,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE) | KC_OP_BIT(KC_OP_BROADCAST),
    .init = add_init,
    .get_opts = add_get_opts,
    .build = add_build,
    .forward = add_forward,
    .backward = add_backward,
    .flops = add_flops,
};
