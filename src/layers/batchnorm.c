/* batchnorm.c — BatchNormalization over the last axis (channels):
 *   training:  y = gamma * (x - mean_B) / sqrt(var_B + eps) + beta, with the batch's
 *              statistics; the moving statistics follow them (backend, Keras 3 rule);
 *   inference: the same with moving_mean and moving_variance.
 * aux keeps the batch mean and 1/sqrt(var + eps) of the training forward for the backward.
 * A frozen layer (trainable: false) runs in inference mode in training too, as Keras 3's
 * BatchNormalization does; its backward is then dx = dy * gamma / sqrt(moving_var + eps).
 * With relu_after (src/model/fuse.c) it also applies the ReLU that consumes it: y is the
 * ReLU's output and dy the gradient with respect to it. Folded into the Add that reads it
 * (bn_folded, fuse.c), it only takes the batch statistics: the Add normalises its input as it
 * adds (kc__bn_fold_of, add.c), and y is never written. */
#include "batchnorm_sync.h"
#include "layer.h"

typedef struct bn_cfg {
    int axis;             /* as given: -1, or the last axis counted with the batch */
    float momentum, epsilon;
    bool center, scale;
    int c;                /* channels, from build */
    int64_t rows;         /* rows per example: product of the leading axes */
    int iw_mean, iw_var;  /* index of moving_mean / moving_variance in l->w */
} bn_cfg;

static kc_status bn_init(kc_layer *l, const void *opts_) {
    const kc_batchnorm_opts *o = opts_;
    bn_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    c->axis = o->axis == 0 ? -1 : o->axis;
    if (c->axis < -1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the channels axis (-1) is", L,
                        o->axis);
    c->momentum = o->momentum == 0.0f ? 0.99f : o->momentum;
    if (!(c->momentum > 0.0f && c->momentum <= 1.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: momentum must be in (0, 1], got %g", L, (double)o->momentum);
    c->epsilon = o->epsilon == 0.0f ? 1e-3f : o->epsilon;
    if (!(c->epsilon > 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: epsilon must be positive, got %g", L, (double)o->epsilon);
    c->center = kc__bool3(o->center, true);
    c->scale = kc__bool3(o->scale, true);
    return KC_STATUS_OK;
}

static void bn_get_opts(const kc_layer *l, void *opts_) {
    const bn_cfg *c = l->cfg;
    *(kc_batchnorm_opts *)opts_ = (kc_batchnorm_opts){
        .name = l->name,
        .axis = c->axis,
        .momentum = c->momentum,
        .epsilon = c->epsilon,
        .center = c->center ? KC_TRUE : KC_FALSE,
        .scale = c->scale ? KC_TRUE : KC_FALSE,
    };
}

static kc_status bn_build(kc_layer *l) {
    bn_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (in->rank < 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects an input with a channels axis, got %s", kc__layer_label(l),
                        kc__shape_str(in, true, b, sizeof b));
    if (c->axis != -1 && c->axis != in->rank)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "%s: axis %d of input %s is not supported; only the last axis (-1 or %d) is",
                        kc__layer_label(l), c->axis, kc__shape_str(in, true, b, sizeof b), in->rank);
    c->c = in->dim[in->rank - 1];
    c->rows = kc__shape_size(in) / c->c;
    l->out_shape = *in;
    kc_shape cs = kc__shape_make(1, (int[]){c->c});
    if (c->scale) KC_TRY(kc__layer_add_weight(l, "gamma", cs, true, "ones", c->c, c->c));
    if (c->center) KC_TRY(kc__layer_add_weight(l, "beta", cs, true, "zeros", c->c, c->c));
    c->iw_mean = l->n_weights;
    KC_TRY(kc__layer_add_weight(l, "moving_mean", cs, false, "zeros", c->c, c->c));
    c->iw_var = l->n_weights;
    KC_TRY(kc__layer_add_weight(l, "moving_variance", cs, false, "ones", c->c, c->c));
    return KC_STATUS_OK;
}

static size_t bn_aux_bytes(const kc_layer *l, int batch) {
    const bn_cfg *c = l->cfg;
    return 2 * (size_t)c->c * sizeof(float); /* save_mean (C), save_inv_std (C) */
}

/* the ReLU a fused layer applies (l->relu_after, src/model/fuse.c), for the paths
 * that run it apart (synchronised statistics, a frozen layer's backward). */
static kc_act_params bn_relu_act(const kc_layer *l) {
    return l->relu_max > 0.0f ? (kc_act_params){KC_ACT_RELU_GENERAL, 0.0f, l->relu_max, 0.0f}
                              : (kc_act_params){KC_ACT_RELU, 0.0f, 0.0f, 0.0f};
}

/* dy (scratch) becomes the gradient before the fused ReLU, from the fused output y. */
static kc_status bn_relu_mask(const kc_layer *l, kc_backend *be, const float *y, float *dy, int64_t rows) {
    const bn_cfg *c = l->cfg;
    return be->act_backward(be, bn_relu_act(l), NULL, y, dy, dy, rows * c->c, c->c);
}

static kc_status bn_forward(kc_layer *l, const kc_fwd *a) {
    const bn_cfg *c = l->cfg;
    int64_t rows = (int64_t)a->batch * c->rows;
    const float *gamma = c->scale ? l->w[0].data : NULL;                 /* (C) */
    const float *beta = c->center ? l->w[c->scale ? 1 : 0].data : NULL;  /* (C) */
    float *mm = l->w[c->iw_mean].data, *mv = l->w[c->iw_var].data;      /* (C) each */
    if (l->bn_folded && !(a->training && !l->frozen)) return KC_STATUS_OK; /* the Add applies the moving map */
    if (a->training && !l->frozen) {
        if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no buffer for the batch statistics", kc__layer_label(l));
        float *save_mean = a->aux, *save_inv_std = (float *)a->aux + c->c;
        if (l->bn_folded && !a->sync) /* the statistics only (fuse.c never folds with relu_after) */
            return a->be->batchnorm_forward_train(a->be, a->x[0], NULL, rows, c->c, gamma, beta, mm, mv,
                                                  c->momentum, c->epsilon, save_mean, save_inv_std);
        if (a->sync) { /* data-parallel, sync_batchnorm: the ranks' statistics together (folded: y
                        * is not read; the Add normalises with the statistics saved here) */
            KC_TRY(kc__bn_sync_forward(a, &(kc__bn_sync_args){.rows = rows, .c = c->c, .gamma = gamma, .beta = beta,
                                                              .momentum = c->momentum, .epsilon = c->epsilon,
                                                              .moving_mean = mm, .moving_var = mv,
                                                              .save_mean = save_mean, .save_inv_std = save_inv_std}));
            return l->relu_after ? a->be->act_forward(a->be, bn_relu_act(l), a->y, a->y, rows * c->c, c->c)
                                 : KC_STATUS_OK;
        }
        if (l->relu_after)
            return a->be->batchnorm_relu_forward_train(a->be, a->x[0], a->y, rows, c->c, gamma, beta, mm, mv,
                                                       c->momentum, c->epsilon, save_mean, save_inv_std, l->relu_max);
        return a->be->batchnorm_forward_train(a->be, a->x[0], a->y, rows, c->c, gamma, beta, mm, mv, c->momentum,
                                              c->epsilon, save_mean, save_inv_std);
    }
    if (l->relu_after)
        return a->be->batchnorm_relu_forward_infer(a->be, a->x[0], a->y, rows, c->c, gamma, beta, mm, mv, c->epsilon,
                                                   l->relu_max);
    return a->be->batchnorm_forward_infer(a->be, a->x[0], a->y, rows, c->c, gamma, beta, mm, mv, c->epsilon);
}

int kc__bn_fold_of(const kc_layer *bn, const void *aux, bool training, kc_bn_fold *f) {
    const bn_cfg *c = bn->cfg;
    const bool batch_stats = training && !bn->frozen;
    *f = (kc_bn_fold){.mean = batch_stats ? aux : bn->w[c->iw_mean].data,
                      .inv_std = batch_stats ? (const float *)aux + c->c : NULL,
                      .var = batch_stats ? NULL : bn->w[c->iw_var].data,
                      .gamma = c->scale ? bn->w[0].data : NULL,
                      .beta = c->center ? bn->w[c->scale ? 1 : 0].data : NULL,
                      .epsilon = c->epsilon};
    return c->c;
}

/* Frozen: the forward was the inference one, an affine map per channel; its input gradient
 * is the same map without the shift, the inference kernel run on dy with a zero mean (aux)
 * and no beta. */
static kc_status bn_backward_frozen(kc_layer *l, const kc_bwd *a, int64_t rows, const float *gamma) {
    const bn_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no buffer for the backward", kc__layer_label(l));
    if (l->relu_after) KC_TRY(bn_relu_mask(l, a->be, a->y, a->dy, rows));
    KC_TRY(a->be->memset0(a->be, a->aux, (size_t)c->c * sizeof(float)));
    return a->be->batchnorm_forward_infer(a->be, a->dy, a->dx[0], rows, c->c, gamma, NULL, a->aux,
                                          l->w[c->iw_var].data, c->epsilon);
}

/* After a training forward (batch statistics in aux), or a frozen layer's. */
static kc_status bn_backward(kc_layer *l, const kc_bwd *a) {
    const bn_cfg *c = l->cfg;
    int64_t rows = (int64_t)a->batch * c->rows;
    const float *gamma = c->scale ? l->w[0].data : NULL;
    if (l->frozen) return bn_backward_frozen(l, a, rows, gamma);
    float *dgamma = c->scale ? l->w[0].grad : NULL;
    float *dbeta = c->center ? l->w[c->scale ? 1 : 0].grad : NULL;
    const float *save_mean = a->aux, *save_inv_std = (const float *)a->aux + c->c;
    /* No input gradient wanted (BN right after the input): only dgamma/dbeta are needed,
     * and dy (scratch) takes the unused dx; every entry of dx is written after the
     * per-channel sums, from the same entry of dy, so the aliasing is safe. */
    float *dx = a->dx[0] ? a->dx[0] : a->dy;
    if (a->sync) { /* every rank makes the same collective calls, wanted or not */
        if (l->relu_after) KC_TRY(bn_relu_mask(l, a->be, a->y, a->dy, rows));
        return kc__bn_sync_backward(a, &(kc__bn_sync_args){.rows = rows, .c = c->c, .gamma = gamma,
                                                           .save_mean = (float *)save_mean,
                                                           .save_inv_std = (float *)save_inv_std,
                                                           .dgamma = dgamma, .dbeta = dbeta}, dx);
    }
    if (!a->dx[0] && !dgamma && !dbeta) return KC_STATUS_OK;
    if (l->relu_after) /* no y: the backend recomputes the ReLU's mask from x (two streams less) */
        return a->be->batchnorm_relu_backward(a->be, a->x[0], NULL, a->dy, dx, rows, c->c, gamma,
                                              c->center ? l->w[c->scale ? 1 : 0].data : NULL, save_mean,
                                              save_inv_std, dgamma, dbeta, l->relu_max);
    return a->be->batchnorm_backward(a->be, a->x[0], a->dy, dx, rows, c->c, gamma, save_mean, save_inv_std, dgamma,
                                     dbeta);
}

static int64_t bn_flops(const kc_layer *l) {
    const bn_cfg *c = l->cfg;
    return 4 * c->rows * c->c;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_batchnorm_opts, member)
static const kc__field k_keras_keys[] = {
    {"axis", KC_F_AXIS, KC_F_W | KC_F_AXIS_LIST2, O(axis), NULL, 0},
    {"momentum", KC_F_FLOAT, KC_F_W, O(momentum), NULL, 0.99},
    {"epsilon", KC_F_FLOAT, KC_F_W, O(epsilon), NULL, 1e-3},
    {"center", KC_F_BOOL, KC_F_W, O(center), NULL, 1},
    {"scale", KC_F_BOOL, KC_F_W, O(scale), NULL, 1},
    {"beta_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "zeros", 0},
    {"gamma_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "ones", 0},
    {"moving_mean_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "zeros", 0},
    {"moving_variance_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "ones", 0},
    KC_KEY_NULL("beta_regularizer", KC_F_W),
    KC_KEY_NULL("gamma_regularizer", KC_F_W),
    KC_KEY_NULL("beta_constraint", KC_F_W),
    KC_KEY_NULL("gamma_constraint", KC_F_W),
    KC_KEY_FIXED("synchronized", "false", KC_F_W3),
    KC_KEY_FIXED("renorm", "false", 0),
    KC_KEY_NULL("renorm_clipping", 0),
    KC_KEY_IGNORE("renorm_momentum"), /* unused while renorm is false */
    KC_KEY_NULL("virtual_batch_size", 0),
    KC_KEY_NULL("adjustment", 0),
    KC_KEY_IGNORE("fused"),           /* a TensorFlow kernel choice */
};
#undef O

const kc_layer_ops kc__batchnorm_ops = {
    .class_name = "BatchNormalization",
    .snake_name = "batch_normalization",
    .cfg_size = sizeof(bn_cfg),
    .opts_size = sizeof(kc_batchnorm_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_BATCHNORM) | KC_OP_BIT(KC_OP_ACTIVATION), /* the ReLU: relu_after */
    .init = bn_init,
    .get_opts = bn_get_opts,
    .build = bn_build,
    .aux_bytes = bn_aux_bytes,
    .forward = bn_forward,
    .backward = bn_backward,
    .flops = bn_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
