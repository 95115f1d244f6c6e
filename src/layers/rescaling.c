/* rescaling.c — Rescaling (y = x * scale + offset) and Normalization (Keras's
 * preprocessing layer: y = (x - mean) / max(sqrt(variance), 1e-7), or its inverse), both
 * over the last axis: a scalar or one value per channel. Their constants from the config
 * travel to the backend in the workspace (uploaded at each call, stream-ordered);
 * Normalization without mean/variance in its config has Keras's weights mean, variance
 * (per channel, or scalars for axis None) and count instead. */
#include "layer.h"

typedef struct scale_cfg {
    kc_consts scale, offset;   /* Rescaling; Normalization: mean, variance (n 0: weights) */
    kc_axes axis;              /* Normalization */
    bool invert, none;         /* Normalization: invert; axis None (one value for all) */
    int c;                     /* values per row: the channels, or 1 when every constant is a scalar
                                  (always <= KC_MAX_CONSTS where constants are uploaded) */
    int64_t rows;              /* rows per example */
} scale_cfg;

static kc_status check_consts(const kc_layer *l, const char *key, const kc_consts *v) {
    if (v->n < 0 || v->n > KC_MAX_CONSTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s has %d values; kerac takes 1 to %d", kc__layer_label(l),
                        key, v->n, KC_MAX_CONSTS);
    return KC_STATUS_OK;
}

static kc_status rescaling_init(kc_layer *l, const void *opts_) {
    const kc_rescaling_opts *o = opts_;
    scale_cfg *c = l->cfg;
    if (o->scale.n == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: scale is required (a number, or one per channel)",
                        kc__layer_label(l));
    KC_TRY(check_consts(l, "scale", &o->scale));
    KC_TRY(check_consts(l, "offset", &o->offset));
    c->scale = o->scale;
    c->offset = o->offset;
    if (c->offset.n == 0) c->offset = (kc_consts){.n = 1, .v = {0.0f}};
    return KC_STATUS_OK;
}

static void rescaling_get_opts(const kc_layer *l, void *opts_) {
    const scale_cfg *c = l->cfg;
    *(kc_rescaling_opts *)opts_ = (kc_rescaling_opts){.name = l->name, .scale = c->scale, .offset = c->offset};
}

/* The per-channel length of a constant must be 1 or the channels. */
static kc_status check_len(const kc_layer *l, const char *key, const kc_consts *v, int ch) {
    char b[96];
    if (v->n != 0 && v->n != 1 && v->n != ch)
        return kc__fail(KC_STATUS_SHAPE, "%s: %s has %d values, which does not broadcast to input %s (%d channels)",
                        kc__layer_label(l), key, v->n, kc__shape_str(&l->in_shape[0], true, b, sizeof b), ch);
    return KC_STATUS_OK;
}

static kc_status rescaling_build(kc_layer *l) {
    scale_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    const int ch = in->rank ? in->dim[in->rank - 1] : 1;
    KC_TRY(check_len(l, "scale", &c->scale, ch));
    KC_TRY(check_len(l, "offset", &c->offset, ch));
    c->c = c->scale.n > 1 || c->offset.n > 1 ? ch : 1;
    c->rows = kc__shape_size(in) / c->c;
    l->out_shape = *in;
    return KC_STATUS_OK;
}

static size_t consts_ws_bytes(const kc_layer *l, int batch, kc_backend *be) {
    (void)batch, (void)be;
    const scale_cfg *c = l->cfg;
    return 2 * (size_t)c->c * sizeof(float);
}

/* The two constants, expanded to c values each, into the workspace (device memory). */
static kc_status upload(const kc_layer *l, kc_backend *be, void *ws, size_t ws_bytes, float **a, float **b) {
    const scale_cfg *c = l->cfg;
    float h[2 * KC_MAX_CONSTS];
    size_t bytes = 2 * (size_t)c->c * sizeof(float);
    if (!ws || ws_bytes < bytes || c->c > KC_MAX_CONSTS)
        return kc__fail(KC_STATUS_INTERNAL, "%s: no workspace for its constants", kc__layer_label(l));
    for (int k = 0; k < c->c; k++) {
        h[k] = c->scale.n == 1 ? c->scale.v[0] : c->scale.v[k];
        h[c->c + k] = c->offset.n == 1 ? c->offset.v[0] : c->offset.v[k];
    }
    *a = ws, *b = (float *)ws + c->c;
    return be->to_device(be, ws, h, bytes);
}

static kc_status rescaling_forward(kc_layer *l, const kc_fwd *a) {
    const scale_cfg *c = l->cfg;
    float *s, *o;
    KC_TRY(upload(l, a->be, a->ws, a->ws_bytes, &s, &o));
    return a->be->channel_affine(a->be, a->x[0], a->y, (int64_t)a->batch * c->rows, c->c, s, o);
}

static kc_status rescaling_backward(kc_layer *l, const kc_bwd *a) {
    const scale_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    float *s, *o;
    KC_TRY(upload(l, a->be, a->ws, a->ws_bytes, &s, &o));
    return a->be->channel_affine(a->be, a->dy, a->dx[0], (int64_t)a->batch * c->rows, c->c, s, NULL);
}

static int64_t affine_flops(const kc_layer *l) {
    const scale_cfg *c = l->cfg;
    return 2 * c->rows * c->c;
}

/* ---------------------------------------------------------------- Normalization */

static kc_status norm_init(kc_layer *l, const void *opts_) {
    const kc_normalization_opts *o = opts_;
    scale_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    c->axis = o->axis;
    c->none = o->axis.none != 0;
    if (!c->none && o->axis.n == 0) c->axis = (kc_axes){.n = 1, .list = 1, .v = {-1}};
    if (!c->none && c->axis.n != 1)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis with %d axes is not supported; kerac normalises over the "
                        "last axis (-1) or all values (None)", L, c->axis.n);
    if ((o->mean.n == 0) != (o->variance.n == 0))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: give both mean and variance, or neither", L);
    KC_TRY(check_consts(l, "mean", &o->mean));
    KC_TRY(check_consts(l, "variance", &o->variance));
    if (o->mean.n != o->variance.n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: mean has %d values and variance %d; they must match", L,
                        o->mean.n, o->variance.n);
    for (int k = 0; k < o->variance.n; k++)
        if (o->variance.v[k] < 0.0f)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: variance %g is negative", L, (double)o->variance.v[k]);
    c->scale = o->mean, c->offset = o->variance;
    c->invert = kc__bool3(o->invert, false);
    return KC_STATUS_OK;
}

static void norm_get_opts(const kc_layer *l, void *opts_) {
    const scale_cfg *c = l->cfg;
    *(kc_normalization_opts *)opts_ = (kc_normalization_opts){
        .name = l->name, .axis = c->axis, .mean = c->scale, .variance = c->offset,
        .invert = c->invert ? KC_TRUE : KC_FALSE};
}

static kc_status norm_build(kc_layer *l) {
    scale_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (!c->none) {
        int ax = c->axis.v[0];
        if (in->rank < 1 || (ax != -1 && ax != in->rank))
            return kc__fail(KC_STATUS_UNSUPPORTED, "%s: axis %d of input %s is not supported; only the last axis (-1) "
                            "or None is", kc__layer_label(l), ax, kc__shape_str(in, true, b, sizeof b));
    }
    c->c = c->none ? 1 : in->dim[in->rank - 1];
    l->out_shape = *in;
    if (c->scale.n) {
        if (c->none && c->scale.n != 1)
            return kc__fail(KC_STATUS_SHAPE, "%s: axis None takes one mean and variance, got %d", kc__layer_label(l),
                            c->scale.n);
        KC_TRY(check_len(l, "mean", &c->scale, c->c));
        if (c->scale.n == 1) c->c = 1; /* scalars: one value for all */
    }
    c->rows = kc__shape_size(in) / c->c;
    if (c->scale.n) return KC_STATUS_OK;
    kc_shape cs = c->none ? kc__shape_make(0, NULL) : kc__shape_make(1, (int[]){c->c});
    KC_TRY(kc__layer_add_weight(l, "mean", cs, false, "zeros", c->c, c->c));
    KC_TRY(kc__layer_add_weight(l, "variance", cs, false, "ones", c->c, c->c));
    return kc__layer_add_weight(l, "count", kc__shape_make(0, NULL), false, "zeros", 1, 1);
}

static size_t norm_ws_bytes(const kc_layer *l, int batch, kc_backend *be) {
    const scale_cfg *c = l->cfg;
    return c->scale.n ? consts_ws_bytes(l, batch, be) : 0;
}

/* mean and variance: the weights, or the config's constants uploaded into ws */
static kc_status norm_stats(const kc_layer *l, kc_backend *be, void *ws, size_t ws_bytes, float **m, float **v) {
    const scale_cfg *c = l->cfg;
    if (!c->scale.n) {
        *m = l->w[0].data, *v = l->w[1].data;
        return KC_STATUS_OK;
    }
    return upload(l, be, ws, ws_bytes, m, v);
}

static kc_status norm_forward(kc_layer *l, const kc_fwd *a) {
    const scale_cfg *c = l->cfg;
    float *m, *v;
    KC_TRY(norm_stats(l, a->be, a->ws, a->ws_bytes, &m, &v));
    return a->be->normalize(a->be, a->x[0], a->y, (int64_t)a->batch * c->rows, c->c, m, v, c->invert);
}

static kc_status norm_backward(kc_layer *l, const kc_bwd *a) {
    const scale_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    float *m, *v;
    KC_TRY(norm_stats(l, a->be, a->ws, a->ws_bytes, &m, &v));
    return a->be->normalize(a->be, a->dy, a->dx[0], (int64_t)a->batch * c->rows, c->c, NULL, v, c->invert);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_rescaling_keys[] = {
    {"scale", KC_F_CONSTS, KC_F_W, offsetof(kc_rescaling_opts, scale), NULL, 0},
    {"offset", KC_F_CONSTS, KC_F_W, offsetof(kc_rescaling_opts, offset), NULL, 0},
};
static const kc__field k_norm_keys[] = {
    {"axis", KC_F_AXES, KC_F_W, offsetof(kc_normalization_opts, axis), NULL, 0},
    {"invert", KC_F_BOOL, KC_F_W, offsetof(kc_normalization_opts, invert), NULL, 0},
    {"mean", KC_F_CONSTS, KC_F_W, offsetof(kc_normalization_opts, mean), NULL, 0},
    {"variance", KC_F_CONSTS, KC_F_W, offsetof(kc_normalization_opts, variance), NULL, 0},
};

const kc_layer_ops kc__rescaling_ops = {
    .class_name = "Rescaling",
    .snake_name = "rescaling",
    .cfg_size = sizeof(scale_cfg),
    .opts_size = sizeof(kc_rescaling_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_NORM),
    .init = rescaling_init,
    .get_opts = rescaling_get_opts,
    .build = rescaling_build,
    .workspace_bytes = consts_ws_bytes,
    .forward = rescaling_forward,
    .backward = rescaling_backward,
    .flops = affine_flops,
    KC_KERAS_KEYS(k_rescaling_keys),
};

const kc_layer_ops kc__normalization_ops = {
    .class_name = "Normalization",
    .snake_name = "normalization",
    .cfg_size = sizeof(scale_cfg),
    .opts_size = sizeof(kc_normalization_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_NORM),
    .init = norm_init,
    .get_opts = norm_get_opts,
    .build = norm_build,
    .workspace_bytes = norm_ws_bytes,
    .forward = norm_forward,
    .backward = norm_backward,
    .flops = affine_flops,
    KC_KERAS_KEYS(k_norm_keys),
};
