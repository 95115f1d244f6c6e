/* layernorm.c — LayerNormalization and GroupNormalization: per-example normalisation
 * with a learned per-value affine map, both through the backend's groupnorm kernels.
 *   LayerNormalization over trailing axes A (default the last): each (example, leading
 *     position) row of the prod(A) values is normalised; gamma and beta have A's shape.
 *   GroupNormalization over the channels split in groups: each (example, group) is
 *     normalised over all its positions and channels; gamma and beta are per channel.
 * Statistics: mean and biased variance, y = (x - mean) * rsqrt(var + epsilon) * gamma + beta.
 * aux keeps the per-(row or group) mean and 1/std of the training forward for backward. */
#include "layer.h"

typedef struct gnorm_cfg {
    kc_axes axis;          /* LayerNormalization, as given */
    int groups;            /* GroupNormalization as given (-1: one per channel); built value below */
    float epsilon;
    bool center, scale;
    /* from build: x is (batch * n1, s, c) in `g` groups */
    int64_t n1, s;
    int c, g;
} gnorm_cfg;

static kc_status common_init(kc_layer *l, gnorm_cfg *c, float epsilon, int center, int scale) {
    c->epsilon = epsilon == 0.0f ? 1e-3f : epsilon;
    if (!(c->epsilon > 0.0f))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: epsilon must be positive, got %g", kc__layer_label(l),
                        (double)epsilon);
    c->center = kc__bool3(center, true);
    c->scale = kc__bool3(scale, true);
    return KC_STATUS_OK;
}

static kc_status ln_init(kc_layer *l, const void *opts_) {
    const kc_layernorm_opts *o = opts_;
    gnorm_cfg *c = l->cfg;
    if (kc__bool3(o->rms_scaling, false))
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: rms_scaling=True is not supported by kerac; only False is",
                        kc__layer_label(l));
    if (o->axis.none || o->axis.n < 0 || o->axis.n > KC_MAX_RANK)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: axis must be an axis or a list of 1 to %d axes",
                        kc__layer_label(l), KC_MAX_RANK);
    c->axis = o->axis;
    if (c->axis.n == 0) c->axis = (kc_axes){.n = 1, .v = {-1}};
    c->g = 1;
    return common_init(l, c, o->epsilon, o->center, o->scale);
}

static void ln_get_opts(const kc_layer *l, void *opts_) {
    const gnorm_cfg *c = l->cfg;
    *(kc_layernorm_opts *)opts_ = (kc_layernorm_opts){
        .name = l->name, .axis = c->axis, .epsilon = c->epsilon, .center = c->center ? KC_TRUE : KC_FALSE,
        .scale = c->scale ? KC_TRUE : KC_FALSE, .rms_scaling = KC_FALSE};
}

static kc_status add_affine(kc_layer *l, const gnorm_cfg *c, kc_shape ps) {
    int64_t n = kc__shape_size(&ps);
    if (c->scale) KC_TRY(kc__layer_add_weight(l, "gamma", ps, true, "ones", n, n));
    if (c->center) KC_TRY(kc__layer_add_weight(l, "beta", ps, true, "zeros", n, n));
    return KC_STATUS_OK;
}

static kc_status ln_build(kc_layer *l) {
    gnorm_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    bool use[KC_MAX_RANK] = {false};
    for (int i = 0; i < c->axis.n; i++) {
        int a = c->axis.v[i] < 0 ? c->axis.v[i] + in->rank + 1 : c->axis.v[i]; /* counted with the batch axis */
        if (a < 1 || a > in->rank || use[a - 1])
            return kc__fail(KC_STATUS_SHAPE, "%s: axis %d is not a distinct axis of input %s (the batch axis 0 "
                            "cannot be normalised over)", kc__layer_label(l), c->axis.v[i],
                            kc__shape_str(in, true, b, sizeof b));
        use[a - 1] = true;
    }
    int first = in->rank - c->axis.n;
    for (int i = first; i < in->rank; i++)
        if (!use[i])
            return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axes that are not the trailing axes of input %s are not "
                            "supported", kc__layer_label(l), kc__shape_str(in, true, b, sizeof b));
    kc_shape ps = kc__shape_make(c->axis.n, in->dim + first);
    c->c = (int)kc__shape_size(&ps);
    c->n1 = kc__shape_size(in) / c->c;
    c->s = 1;
    l->out_shape = *in;
    return add_affine(l, c, ps);
}

static kc_status gn_init(kc_layer *l, const void *opts_) {
    const kc_groupnorm_opts *o = opts_;
    gnorm_cfg *c = l->cfg;
    if (o->axis != 0 && o->axis != -1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d is not supported; only the channels axis (-1) is",
                        kc__layer_label(l), o->axis);
    c->groups = o->groups == 0 ? 32 : o->groups;
    if (c->groups < -1 || c->groups == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: groups must be positive or -1, got %d", kc__layer_label(l),
                        o->groups);
    return common_init(l, c, o->epsilon, o->center, o->scale);
}

static void gn_get_opts(const kc_layer *l, void *opts_) {
    const gnorm_cfg *c = l->cfg;
    *(kc_groupnorm_opts *)opts_ = (kc_groupnorm_opts){
        .name = l->name, .groups = c->groups, .axis = -1, .epsilon = c->epsilon,
        .center = c->center ? KC_TRUE : KC_FALSE, .scale = c->scale ? KC_TRUE : KC_FALSE};
}

static kc_status gn_build(kc_layer *l) {
    gnorm_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (in->rank < 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects an input with a channels axis", kc__layer_label(l));
    c->c = in->dim[in->rank - 1];
    c->g = c->groups == -1 ? c->c : c->groups;
    if (c->g > c->c || c->c % c->g != 0)
        return kc__fail(KC_STATUS_SHAPE, "%s: %d channels of input %s cannot be split in %d groups; groups must "
                        "divide the channels", kc__layer_label(l), c->c, kc__shape_str(in, true, b, sizeof b), c->g);
    c->n1 = 1;
    c->s = kc__shape_size(in) / c->c;
    l->out_shape = *in;
    return add_affine(l, c, kc__shape_make(1, (int[]){c->c}));
}

static size_t gnorm_aux_bytes(const kc_layer *l, int batch) {
    const gnorm_cfg *c = l->cfg;
    return 2 * (size_t)batch * c->n1 * c->g * sizeof(float); /* mean, 1/std per (row, group) */
}

static kc_status gnorm_forward(kc_layer *l, const kc_fwd *a) {
    const gnorm_cfg *c = l->cfg;
    const int64_t n = (int64_t)a->batch * c->n1;
    if (n > INT32_MAX) return kc__fail(KC_STATUS_UNSUPPORTED, "%s: too many rows; use a smaller batch", kc__layer_label(l));
    const float *gamma = c->scale ? l->w[0].data : NULL, *beta = c->center ? l->w[c->scale].data : NULL;
    float *mean = a->training ? a->aux : NULL, *inv = a->training ? (float *)a->aux + n * c->g : NULL;
    return a->be->groupnorm_forward(a->be, a->x[0], a->y, (int)n, c->s, c->c, c->g, gamma, beta, c->epsilon, mean,
                                    inv);
}

/* Assumes the forward ran in training mode (the statistics in aux). */
static kc_status gnorm_backward(kc_layer *l, const kc_bwd *a) {
    const gnorm_cfg *c = l->cfg;
    const int64_t n = (int64_t)a->batch * c->n1;
    const float *gamma = c->scale ? l->w[0].data : NULL;
    float *dgamma = c->scale ? l->w[0].grad : NULL, *dbeta = c->center ? l->w[c->scale].grad : NULL;
    if (!a->dx[0] && !dgamma && !dbeta) return KC_STATUS_OK;
    const float *mean = a->aux, *inv = (const float *)a->aux + n * c->g;
    return a->be->groupnorm_backward(a->be, a->x[0], a->dy, a->dx[0], (int)n, c->s, c->c, c->g, gamma, mean, inv,
                                     dgamma, dbeta);
}

static int64_t gnorm_flops(const kc_layer *l) {
    const gnorm_cfg *c = l->cfg;
    return 6 * c->n1 * c->s * c->c;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define GNORM_TAIL_KEYS                                                                                        \
    {"beta_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "zeros", 0},                                \
    {"gamma_initializer", KC_F_FIXED_INIT, KC_F_W, KC_F_NO_OFFSET, "ones", 0},                                \
    KC_KEY_NULL("beta_regularizer", KC_F_W), KC_KEY_NULL("gamma_regularizer", KC_F_W),                         \
    KC_KEY_NULL("beta_constraint", KC_F_W), KC_KEY_NULL("gamma_constraint", KC_F_W)
#define O(member) offsetof(kc_layernorm_opts, member)
static const kc__field k_ln_keys[] = {
    {"axis", KC_F_AXES, KC_F_W, O(axis), NULL, 0},
    {"epsilon", KC_F_FLOAT, KC_F_W, O(epsilon), NULL, 1e-3},
    {"center", KC_F_BOOL, KC_F_W, O(center), NULL, 1},
    {"scale", KC_F_BOOL, KC_F_W, O(scale), NULL, 1},
    {"rms_scaling", KC_F_BOOL, KC_F_W3, O(rms_scaling), NULL, 0},
    GNORM_TAIL_KEYS,
};
#undef O
#define O(member) offsetof(kc_groupnorm_opts, member)
static const kc__field k_gn_keys[] = {
    {"groups", KC_F_INT, KC_F_W, O(groups), NULL, 0},
    {"axis", KC_F_AXIS, KC_F_W, O(axis), NULL, 0},
    {"epsilon", KC_F_FLOAT, KC_F_W, O(epsilon), NULL, 1e-3},
    {"center", KC_F_BOOL, KC_F_W, O(center), NULL, 1},
    {"scale", KC_F_BOOL, KC_F_W, O(scale), NULL, 1},
    GNORM_TAIL_KEYS,
};
#undef O

const kc_layer_ops kc__layernorm_ops = {
    .class_name = "LayerNormalization",
    .snake_name = "layer_normalization",
    .cfg_size = sizeof(gnorm_cfg),
    .opts_size = sizeof(kc_layernorm_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_NORM),
    .init = ln_init,
    .get_opts = ln_get_opts,
    .build = ln_build,
    .aux_bytes = gnorm_aux_bytes,
    .forward = gnorm_forward,
    .backward = gnorm_backward,
    .flops = gnorm_flops,
    KC_KERAS_KEYS(k_ln_keys),
};

const kc_layer_ops kc__groupnorm_ops = {
    .class_name = "GroupNormalization",
    .snake_name = "group_normalization",
    .cfg_size = sizeof(gnorm_cfg),
    .opts_size = sizeof(kc_groupnorm_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_NORM),
    .init = gn_init,
    .get_opts = gn_get_opts,
    .build = gn_build,
    .aux_bytes = gnorm_aux_bytes,
    .forward = gnorm_forward,
    .backward = gnorm_backward,
    .flops = gnorm_flops,
    KC_KERAS_KEYS(k_gn_keys),
};
