/* pool2d.c — MaxPooling2D and AveragePooling2D (NHWC). Max pooling keeps the argmax of
 * each window in aux for the backward. With padding 'same' the padded cells never win a
 * max and are not counted in an average, as in TensorFlow. */
#include "layer.h"

typedef struct pool_cfg {
    kc_pool_kind kind;
    int ph, pw, sh, sw;
    bool same;
    /* from build */
    int h, w, c, oh, ow, pad_top, pad_left;
} pool_cfg;

static void pair(const int in[2], int def0, int def1, int out[2]) {
    if (in[0] == 0 && in[1] == 0) out[0] = def0, out[1] = def1;
    else if (in[1] == 0) out[0] = out[1] = in[0];
    else out[0] = in[0], out[1] = in[1];
}

static kc_status pool_init_kind(kc_layer *l, const void *opts_, kc_pool_kind kind) {
    const kc_pool2d_opts *o = opts_;
    pool_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    int p[2], s[2];
    c->kind = kind;
    pair(o->pool_size, 2, 2, p);
    if (p[0] <= 0 || p[1] <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: pool_size must be positive, got (%d, %d)", L, o->pool_size[0],
                        o->pool_size[1]);
    pair(o->strides, p[0], p[1], s);
    if (s[0] <= 0 || s[1] <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: strides must be positive, got (%d, %d)", L, o->strides[0],
                        o->strides[1]);
    c->ph = p[0], c->pw = p[1], c->sh = s[0], c->sw = s[1];
    return kc__padding_parse(l, o->padding, &c->same);
}

static kc_status maxpool_init(kc_layer *l, const void *o) { return pool_init_kind(l, o, KC_POOL_MAX); }
static kc_status avgpool_init(kc_layer *l, const void *o) { return pool_init_kind(l, o, KC_POOL_AVG); }

static void pool_get_opts(const kc_layer *l, void *opts_) {
    const pool_cfg *c = l->cfg;
    *(kc_pool2d_opts *)opts_ = (kc_pool2d_opts){
        .name = l->name,
        .pool_size = {c->ph, c->pw},
        .strides = {c->sh, c->sw},
        .padding = c->same ? "same" : "valid",
    };
}

static kc_status pool_build(kc_layer *l) {
    pool_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->h = in->dim[0], c->w = in->dim[1], c->c = in->dim[2];
    kc__conv_out_size(c->h, c->ph, c->sh, 1, c->same, &c->oh, &c->pad_top);
    kc__conv_out_size(c->w, c->pw, c->sw, 1, c->same, &c->ow, &c->pad_left);
    if (c->oh < 1 || c->ow < 1)
        return kc__fail(KC_STATUS_SHAPE,
                        "%s: input %s is smaller than pool_size (%d, %d) with padding 'valid'; use padding 'same' or a "
                        "smaller pool_size",
                        kc__layer_label(l), kc__shape_str(in, true, b, sizeof b), c->ph, c->pw);
    l->out_shape = kc__shape_make(3, (int[]){c->oh, c->ow, c->c});
    return KC_STATUS_OK;
}

static kc_pool2d_desc pool_desc(const pool_cfg *c, int batch) {
    return (kc_pool2d_desc){.kind = c->kind, .n = batch, .h = c->h, .w = c->w, .c = c->c, .kh = c->ph,
                            .kw = c->pw, .sh = c->sh, .sw = c->sw, .pad_top = c->pad_top,
                            .pad_left = c->pad_left, .oh = c->oh, .ow = c->ow};
}

static void pool_backend_desc(const kc_layer *l, int batch, void *desc) {
    *(kc_pool2d_desc *)desc = pool_desc(l->cfg, batch);
}

static size_t pool_aux_bytes(const kc_layer *l, int batch) {
    const pool_cfg *c = l->cfg;
    if (c->kind != KC_POOL_MAX) return 0;
    return (size_t)batch * c->oh * c->ow * c->c * sizeof(int32_t); /* argmax mask (N, OH, OW, C) */
}

static kc_status pool_forward(kc_layer *l, const kc_fwd *a) {
    const pool_cfg *c = l->cfg;
    kc_pool2d_desc d = pool_desc(c, a->batch);
    /* the argmax mask only for a backward to come */
    int32_t *mask = c->kind == KC_POOL_MAX && a->training ? (int32_t *)a->aux : NULL;
    return a->be->pool2d_forward(a->be, &d, a->x[0], a->y, mask);
}

static kc_status pool_backward(kc_layer *l, const kc_bwd *a) {
    const pool_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    kc_pool2d_desc d = pool_desc(c, a->batch);
    return a->be->pool2d_backward(a->be, &d, a->dy, c->kind == KC_POOL_MAX ? (const int32_t *)a->aux : NULL,
                                  a->dx[0]);
}

static int64_t pool_flops(const kc_layer *l) {
    const pool_cfg *c = l->cfg;
    return (int64_t)c->oh * c->ow * c->c * c->ph * c->pw;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_pool2d_opts, member)
static const kc__field k_keras_keys[] = {
    {"pool_size", KC_F_INT2, KC_F_W, O(pool_size), NULL, 2},
    {"padding", KC_F_STR, KC_F_W, O(padding), "valid", 0},
    {"strides", KC_F_POOL_STRIDES, KC_F_W, O(strides), NULL, 0},
    KC_KEY_CHANNELS_LAST(KC_F_W),
};
#undef O

const kc_layer_ops kc__maxpool2d_ops = {
    .class_name = "MaxPooling2D",
    .alias = "MaxPool2D",
    .snake_name = "max_pooling2d",
    .cfg_size = sizeof(pool_cfg),
    .opts_size = sizeof(kc_pool2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_POOL2D),
    .backend_desc = pool_backend_desc,
    .init = maxpool_init,
    .get_opts = pool_get_opts,
    .build = pool_build,
    .aux_bytes = pool_aux_bytes,
    .forward = pool_forward,
    .backward = pool_backward,
    .flops = pool_flops,
    KC_KERAS_KEYS(k_keras_keys),
};

const kc_layer_ops kc__avgpool2d_ops = {
    .class_name = "AveragePooling2D",
    .alias = "AvgPool2D",
    .snake_name = "average_pooling2d",
    .cfg_size = sizeof(pool_cfg),
    .opts_size = sizeof(kc_pool2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_POOL2D),
    .backend_desc = pool_backend_desc,
    .init = avgpool_init,
    .get_opts = pool_get_opts,
    .build = pool_build,
    .aux_bytes = pool_aux_bytes,
    .forward = pool_forward,
    .backward = pool_backward,
    .flops = pool_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
