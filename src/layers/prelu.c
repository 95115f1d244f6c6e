/* prelu.c — PReLU: y = x > 0 ? x : alpha * x with alpha a trainable weight of the input's
 * shape, size 1 along shared_axes (Keras: keras/src/layers/activations/prelu.py; alpha
 * starts at zeros). The backend's broadcasting kernels read alpha in place (elementwise
 * helper). */
#include "layer.h"

typedef struct prelu_cfg {
    const char *init;                   /* static canonical name */
    kc_axes shared;                     /* as given */
    kc_shape alpha;                     /* alpha's shape */
    kc_bcast_desc d;                    /* x (a) and alpha (b); dims[0] set per call */
    int64_t size;
} prelu_cfg;

static kc_status prelu_init(kc_layer *l, const void *opts_) {
    const kc_prelu_opts *o = opts_;
    prelu_cfg *c = l->cfg;
    const char *init = o->alpha_initializer ? o->alpha_initializer : "zeros";
    c->init = kc__init_canonical(init);
    if (!c->init)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: alpha_initializer '%s' is not supported; use one of %s",
                        kc__layer_label(l), init, kc__init_supported);
    c->shared = o->shared_axes;
    if (!c->shared.n) c->shared = (kc_axes){.none = 1}; /* null, as Keras writes it */
    for (int i = 0; i < c->shared.n; i++)
        if (c->shared.v[i] < 1)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "%s: shared_axes holds %d; give axes counted with the batch, from 1", kc__layer_label(l),
                            c->shared.v[i]);
    return KC_STATUS_OK;
}

static void prelu_get_opts(const kc_layer *l, void *opts_) {
    const prelu_cfg *c = l->cfg;
    kc_prelu_opts *o = opts_;
    *o = (kc_prelu_opts){.name = l->name, .alpha_initializer = c->init, .shared_axes = c->shared};
}

static kc_status prelu_build(kc_layer *l) {
    prelu_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    c->alpha = *in;
    for (int i = 0; i < c->shared.n; i++) {
        if (c->shared.v[i] > in->rank)
            return kc__fail(KC_STATUS_SHAPE, "%s: shared axis %d is past the input's last axis (%d, with the batch)",
                            kc__layer_label(l), c->shared.v[i], in->rank);
        c->alpha.dim[c->shared.v[i] - 1] = 1;
    }
    l->out_shape = *in;
    c->size = kc__shape_size(in);
    c->d = (kc_bcast_desc){.rank = in->rank + 1};
    int64_t sx = 1, sa = 1;
    for (int k = in->rank - 1; k >= 0; k--) {
        c->d.dims[k + 1] = in->dim[k];
        c->d.sa[k + 1] = sx;
        c->d.sb[k + 1] = c->alpha.dim[k] == 1 && in->dim[k] != 1 ? 0 : sa;
        sx *= in->dim[k], sa *= c->alpha.dim[k];
    }
    c->d.sa[0] = sx, c->d.sb[0] = 0; /* one alpha for every example */
    int64_t na = kc__shape_size(&c->alpha);
    l->n_weights = 0;
    return kc__layer_add_weight(l, "alpha", c->alpha, true, c->init, na, na);
}

static kc_status prelu_forward(kc_layer *l, const kc_fwd *a) {
    const prelu_cfg *c = l->cfg;
    kc_bcast_desc d = c->d;
    d.dims[0] = a->batch;
    return a->be->binary_forward(a->be, KC_BIN_PRELU, &d, a->x[0], l->w[0].data, a->y);
}

static kc_status prelu_backward(kc_layer *l, const kc_bwd *a) {
    const prelu_cfg *c = l->cfg;
    kc_bcast_desc d = c->d;
    d.dims[0] = a->batch;
    return a->be->binary_backward(a->be, KC_BIN_PRELU, &d, a->x[0], l->w[0].data, a->dy, a->dx[0], l->w[0].grad);
}

static int64_t prelu_flops(const kc_layer *l) { return ((const prelu_cfg *)l->cfg)->size * 2; }

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_prelu_opts, member)
static const kc__field k_keras_keys[] = {
    {"alpha_initializer", KC_F_INIT, KC_F_W, O(alpha_initializer), "zeros", 0},
    KC_KEY_NULL("alpha_regularizer", KC_F_W),
    KC_KEY_NULL("alpha_constraint", KC_F_W),
    {"shared_axes", KC_F_AXES, KC_F_W, O(shared_axes), NULL, 0},
};
#undef O

const kc_layer_ops kc__prelu_ops = {
    .class_name = "PReLU",
    .snake_name = "p_re_lu",
    .cfg_size = sizeof(prelu_cfg),
    .opts_size = sizeof(kc_prelu_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_BROADCAST),
    .init = prelu_init,
    .get_opts = prelu_get_opts,
    .build = prelu_build,
    .forward = prelu_forward,
    .backward = prelu_backward,
    .flops = prelu_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
