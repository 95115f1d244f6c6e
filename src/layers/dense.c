/* dense.c — Dense: y = act(x @ kernel + bias) over the last axis of any rank. */
#include "layer.h"

typedef struct dense_cfg {
    int units;
    bool use_bias;
    kc_act_params act;
    const char *kernel_init, *bias_init;
    /* from build */
    int in;          /* last input axis */
    int64_t rows;    /* rows per example: product of the leading axes */
} dense_cfg;

static kc_status dense_init(kc_layer *l, const void *opts_) {
    const kc_dense_opts *o = opts_;
    dense_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    if (o->units <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: units must be a positive integer, got %d", L, o->units);
    c->units = o->units;
    return kc__parse_weighted(l, o->activation, o->use_bias, o->kernel_initializer, o->bias_initializer, &c->act,
                              &c->use_bias, &c->kernel_init, &c->bias_init);
}

static void dense_get_opts(const kc_layer *l, void *opts_) {
    const dense_cfg *c = l->cfg;
    *(kc_dense_opts *)opts_ = (kc_dense_opts){
        .name = l->name,
        .units = c->units,
        .activation = kc__act_name(&c->act),
        .use_bias = c->use_bias ? KC_TRUE : KC_FALSE,
        .kernel_initializer = c->kernel_init,
        .bias_initializer = c->bias_init,
    };
}

static kc_status dense_build(kc_layer *l) {
    dense_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (in->rank < 1 || in->dim[in->rank - 1] < 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects an input with a last axis, got %s; check input_shape",
                        kc__layer_label(l), kc__shape_str(in, true, b, sizeof b));
    c->in = in->dim[in->rank - 1];
    c->rows = kc__shape_size(in) / c->in;
    l->out_shape = *in;
    l->out_shape.dim[in->rank - 1] = c->units;
    KC_TRY(kc__layer_add_weight(l, "kernel", kc__shape_make(2, (int[]){c->in, c->units}), true, c->kernel_init,
                                c->in, c->units));
    if (c->use_bias)
        KC_TRY(kc__layer_add_weight(l, "bias", kc__shape_make(1, (int[]){c->units}), true, c->bias_init, c->in,
                                    c->units));
    return KC_STATUS_OK;
}

static size_t dense_aux_bytes(const kc_layer *l, int batch) {
    const dense_cfg *c = l->cfg;
    if (!kc__act_needs_input(c->act.kind)) return 0;
    return (size_t)batch * (size_t)c->rows * c->units * sizeof(float); /* pre-activation (rows, units) */
}

static kc_status dense_forward(kc_layer *l, const kc_fwd *a) {
    const dense_cfg *c = l->cfg;
    kc_backend *be = a->be;
    int64_t rows = (int64_t)a->batch * c->rows;
    if (rows > INT32_MAX) return kc__fail(KC_STATUS_UNSUPPORTED, "%s: %lld rows do not fit one GEMM; use a smaller batch",
                                          kc__layer_label(l), (long long)rows);
    /* y (rows, units) = x (rows, in) @ kernel (in, units) */
    KC_TRY(be->gemm(be, 0, 0, (int)rows, c->units, c->in, 1.0f, a->x[0], c->in, l->w[0].data, c->units, 0.0f, a->y,
                    c->units));
    if (c->use_bias) KC_TRY(be->bias_add(be, a->y, l->w[1].data, rows, c->units));
    if (l->defer_act) return KC_STATUS_OK; /* the loss takes the logits */
    return kc__fused_act_forward(be, &c->act, a->y, a->training ? a->aux : NULL, rows * c->units, c->units);
}

static kc_status dense_backward(kc_layer *l, const kc_bwd *a) {
    const dense_cfg *c = l->cfg;
    kc_backend *be = a->be;
    int64_t rows = (int64_t)a->batch * c->rows;
    if (!l->defer_act)
        KC_TRY(kc__fused_act_backward(be, &c->act, a->aux, a->y, a->dy, rows * c->units, c->units));
    /* dkernel (in, units) = x^T (in, rows) @ dy (rows, units) */
    if (l->w[0].grad)
        KC_TRY(be->gemm(be, 1, 0, c->in, c->units, (int)rows, 1.0f, a->x[0], c->in, a->dy, c->units, 0.0f,
                        l->w[0].grad, c->units));
    if (c->use_bias && l->w[1].grad) KC_TRY(be->bias_grad(be, a->dy, l->w[1].grad, rows, c->units));
    /* dx (rows, in) = dy (rows, units) @ kernel^T (units, in) */
    if (a->dx[0])
        KC_TRY(be->gemm(be, 0, 1, (int)rows, c->in, c->units, 1.0f, a->dy, c->units, l->w[0].data, c->units, 0.0f,
                        a->dx[0], c->in));
    return KC_STATUS_OK;
}

static kc_act_params dense_activation(const kc_layer *l) { return ((const dense_cfg *)l->cfg)->act; }

static int64_t dense_flops(const kc_layer *l) {
    const dense_cfg *c = l->cfg;
    return 2 * c->rows * c->in * c->units;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_dense_opts, member)
static const kc__field k_keras_keys[] = {
    {"units", KC_F_INT, KC_F_W, O(units), NULL, 0},
    KC_WEIGHTED_KEYS_HEAD(kc_dense_opts),
    KC_KEY_NULL("activity_regularizer", KC_F_W2), /* Keras 3's Dense writes it only when set */
    KC_WEIGHTED_KEYS_TAIL,
};
#undef O

const kc_layer_ops kc__dense_ops = {
    .class_name = "Dense",
    .snake_name = "dense",
    .cfg_size = sizeof(dense_cfg),
    .opts_size = sizeof(kc_dense_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_GEMM) | KC_OP_BIT(KC_OP_ACTIVATION),
    .init = dense_init,
    .get_opts = dense_get_opts,
    .build = dense_build,
    .aux_bytes = dense_aux_bytes,
    .forward = dense_forward,
    .backward = dense_backward,
    .flops = dense_flops,
    .activation = dense_activation,
    KC_KERAS_KEYS(k_keras_keys),
};
