/* upsampling2d.c — UpSampling2D (N, H, W, C) -> (N, H * sh, W * sw, C), nearest (Keras:
 * repeat) or bilinear (Keras: ops.image.resize, half-pixel centres), and Cropping2D
 * (N, H, W, C) -> (N, H - top - bottom, W - left - right, C), a strided copy per example. */
#include <string.h>

#include "layer.h"

typedef struct up_cfg {
    int sh, sw;
    bool bilinear;
    int h, w, c; /* from build */
} up_cfg;

static kc_status up_init(kc_layer *l, const void *opts_) {
    const kc_upsampling2d_opts *o = opts_;
    up_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    c->sh = o->size[0] ? o->size[0] : 2;
    c->sw = o->size[1] ? o->size[1] : c->sh;
    if (c->sh <= 0 || c->sw <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: size must be positive, got (%d, %d)", L, o->size[0], o->size[1]);
    const char *ip = o->interpolation ? o->interpolation : "nearest";
    if (strcmp(ip, "nearest") == 0) c->bilinear = false;
    else if (strcmp(ip, "bilinear") == 0) c->bilinear = true;
    else
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: interpolation '%s' is not supported; kerac has 'nearest' and "
                        "'bilinear'", L, ip);
    return KC_STATUS_OK;
}

static void up_get_opts(const kc_layer *l, void *opts_) {
    const up_cfg *c = l->cfg;
    *(kc_upsampling2d_opts *)opts_ = (kc_upsampling2d_opts){
        .name = l->name, .size = {c->sh, c->sw}, .interpolation = c->bilinear ? "bilinear" : "nearest"};
}

static kc_status up_build(kc_layer *l) {
    up_cfg *c = l->cfg;
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->h = l->in_shape[0].dim[0], c->w = l->in_shape[0].dim[1], c->c = l->in_shape[0].dim[2];
    l->out_shape = kc__shape_make(3, (int[]){c->h * c->sh, c->w * c->sw, c->c});
    return KC_STATUS_OK;
}

static kc_resample2d_desc up_desc(const up_cfg *c, int batch) {
    return (kc_resample2d_desc){.n = batch, .h = c->h, .w = c->w, .c = c->c, .sh = c->sh, .sw = c->sw,
                                .bilinear = c->bilinear};
}

static kc_status up_forward(kc_layer *l, const kc_fwd *a) {
    kc_resample2d_desc d = up_desc(l->cfg, a->batch);
    return a->be->upsample2d_forward(a->be, &d, a->x[0], a->y);
}

static kc_status up_backward(kc_layer *l, const kc_bwd *a) {
    if (!a->dx[0]) return KC_STATUS_OK;
    kc_resample2d_desc d = up_desc(l->cfg, a->batch);
    return a->be->upsample2d_backward(a->be, &d, a->dy, a->dx[0]);
}

static int64_t up_flops(const kc_layer *l) {
    const up_cfg *c = l->cfg;
    return (int64_t)c->h * c->sh * c->w * c->sw * c->c * (c->bilinear ? 6 : 1);
}

/* ---------------------------------------------------------------- Cropping2D */

typedef struct crop_cfg {
    int top, bottom, left, right;
    int h, w, c, oh, ow; /* from build */
} crop_cfg;

static kc_status crop_init(kc_layer *l, const void *opts_) {
    const kc_cropping2d_opts *o = opts_;
    crop_cfg *c = l->cfg;
    c->top = o->cropping[0][0], c->bottom = o->cropping[0][1], c->left = o->cropping[1][0],
    c->right = o->cropping[1][1];
    if (c->top < 0 || c->bottom < 0 || c->left < 0 || c->right < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: cropping ((%d, %d), (%d, %d)) must not be negative",
                        kc__layer_label(l), c->top, c->bottom, c->left, c->right);
    return KC_STATUS_OK;
}

static void crop_get_opts(const kc_layer *l, void *opts_) {
    const crop_cfg *c = l->cfg;
    *(kc_cropping2d_opts *)opts_ =
        (kc_cropping2d_opts){.name = l->name, .cropping = {{c->top, c->bottom}, {c->left, c->right}}};
}

static kc_status crop_build(kc_layer *l) {
    crop_cfg *c = l->cfg;
    char b[96];
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->h = l->in_shape[0].dim[0], c->w = l->in_shape[0].dim[1], c->c = l->in_shape[0].dim[2];
    c->oh = c->h - c->top - c->bottom, c->ow = c->w - c->left - c->right;
    if (c->oh < 1 || c->ow < 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: cropping ((%d, %d), (%d, %d)) leaves nothing of input %s",
                        kc__layer_label(l), c->top, c->bottom, c->left, c->right,
                        kc__shape_str(&l->in_shape[0], true, b, sizeof b));
    l->out_shape = kc__shape_make(3, (int[]){c->oh, c->ow, c->c});
    return KC_STATUS_OK;
}

/* The window of each example: to_big 0 copies it out of x into y, 1 back into dx. */
static kc_status crop_copy(const crop_cfg *c, kc_backend *be, int batch, float *small, float *big, int to_big) {
    const int64_t in_sz = (int64_t)c->h * c->w * c->c, out_sz = (int64_t)c->oh * c->ow * c->c;
    const int big_ld = c->w * c->c, small_ld = c->ow * c->c, off = c->left * c->c;
    for (int n = 0; n < batch; n++) {
        float *s = small + n * out_sz, *g = big + n * in_sz + (int64_t)c->top * big_ld;
        if (to_big) KC_TRY(be->copy_strided(be, g, big_ld, off, s, small_ld, 0, c->oh, small_ld));
        else KC_TRY(be->copy_strided(be, s, small_ld, 0, g, big_ld, off, c->oh, small_ld));
    }
    return KC_STATUS_OK;
}

static kc_status crop_forward(kc_layer *l, const kc_fwd *a) {
    return crop_copy(l->cfg, a->be, a->batch, a->y, (float *)a->x[0], 0);
}

static kc_status crop_backward(kc_layer *l, const kc_bwd *a) {
    const crop_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    KC_TRY(a->be->memset0(a->be, a->dx[0], (size_t)a->batch * c->h * c->w * c->c * sizeof(float)));
    return crop_copy(c, a->be, a->batch, a->dy, a->dx[0], 1);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_up_keys[] = {
    {"size", KC_F_INT2, KC_F_W, offsetof(kc_upsampling2d_opts, size), NULL, 2},
    KC_KEY_CHANNELS_LAST(KC_F_W),
    {"interpolation", KC_F_STR, KC_F_W, offsetof(kc_upsampling2d_opts, interpolation), "nearest", 0},
};
static const kc__field k_crop_keys[] = {
    {"cropping", KC_F_CROP2, KC_F_W, offsetof(kc_cropping2d_opts, cropping), NULL, 0},
    KC_KEY_CHANNELS_LAST(KC_F_W),
};

const kc_layer_ops kc__upsampling2d_ops = {
    .class_name = "UpSampling2D",
    .snake_name = "up_sampling2d",
    .cfg_size = sizeof(up_cfg),
    .opts_size = sizeof(kc_upsampling2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_RESAMPLE),
    .init = up_init,
    .get_opts = up_get_opts,
    .build = up_build,
    .forward = up_forward,
    .backward = up_backward,
    .flops = up_flops,
    KC_KERAS_KEYS(k_up_keys),
};

const kc_layer_ops kc__cropping2d_ops = {
    .class_name = "Cropping2D",
    .snake_name = "cropping2d",
    .cfg_size = sizeof(crop_cfg),
    .opts_size = sizeof(kc_cropping2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE),
    .init = crop_init,
    .get_opts = crop_get_opts,
    .build = crop_build,
    .forward = crop_forward,
    .backward = crop_backward,
    KC_KERAS_KEYS(k_crop_keys),
};
