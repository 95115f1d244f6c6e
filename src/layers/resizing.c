/* resizing.c — Resizing: every image to (height, width), always applied, as Keras 3's
 * resize without antialiasing: half-pixel centres, "bilinear" (the edge pixels repeat) or
 * "nearest" (floor of the centre); crop_to_aspect_ratio takes the largest centred crop of the
 * target's aspect ratio first, pad_to_aspect_ratio pads with fill_value to it first (Keras
 * pads the same on both sides). The gradient is the resampling's adjoint (bilinear: the
 * weights; nearest: the pixel read). */
#include <math.h>
#include <string.h>

#include "augment.h"

typedef struct resizing_cfg {
    kc_sample2d_desc d;
    int height, width, interp, aspect;
    float fill_value;
} resizing_cfg;

static kc_status resizing_init(kc_layer *l, const void *opts_) {
    const kc_resizing_opts *o = opts_;
    resizing_cfg *c = l->cfg;
    const char *label = kc__layer_label(l);
    if (o->height <= 0 || o->width <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: height and width must be positive, got %d x %d", label,
                        o->height, o->width);
    const char *ip = o->interpolation && *o->interpolation ? o->interpolation : "bilinear";
    if (!strcmp(ip, "bilinear")) c->interp = KC_SAMPLE_BILINEAR;
    else if (!strcmp(ip, "nearest")) c->interp = KC_SAMPLE_FLOOR;
    else
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "%s: interpolation '%s' is not supported by kerac (supported: bilinear, nearest)", label, ip);
    bool crop = kc__bool3(o->crop_to_aspect_ratio, false), pad = kc__bool3(o->pad_to_aspect_ratio, false);
    if (crop && pad)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: only one of crop_to_aspect_ratio and pad_to_aspect_ratio can be true",
                        label);
    if (o->fill_mode && *o->fill_mode && strcmp(o->fill_mode, "constant"))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: fill_mode '%s' is not supported (only 'constant')", label,
                        o->fill_mode);
    if (kc__bool3(o->antialias, false))
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: antialias=true is not supported by kerac; use antialias=false",
                        label);
    if (!isfinite(o->fill_value)) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: fill_value must be finite", label);
    c->height = o->height, c->width = o->width, c->aspect = crop ? 1 : pad ? 2 : 0, c->fill_value = o->fill_value;
    return KC_STATUS_OK;
}

static void resizing_get_opts(const kc_layer *l, void *opts_) {
    const resizing_cfg *c = l->cfg;
    *(kc_resizing_opts *)opts_ = (kc_resizing_opts){
        .name = l->name, .height = c->height, .width = c->width,
        .interpolation = c->interp == KC_SAMPLE_BILINEAR ? "bilinear" : "nearest",
        .crop_to_aspect_ratio = c->aspect == 1 ? KC_TRUE : KC_FALSE,
        .pad_to_aspect_ratio = c->aspect == 2 ? KC_TRUE : KC_FALSE, .fill_mode = "constant",
        .fill_value = c->fill_value, .antialias = KC_FALSE};
}

static kc_status resizing_build(kc_layer *l) {
    resizing_cfg *c = l->cfg;
    int s[3] = {0, 0, 0};
    l->n_weights = 0;
    KC_TRY(kc__aug_image_shape(l, s));
    kc__aug_resize_desc(s[0], s[1], s[2], c->height, c->width, c->aspect, c->interp, c->fill_value, &c->d);
    l->out_shape = kc__shape_make(3, (int[]){c->height, c->width, s[2]});
    return KC_STATUS_OK;
}

static kc_status resizing_forward(kc_layer *l, const kc_fwd *a) {
    const resizing_cfg *c = l->cfg;
    return kc__aug_sample_forward(l, a, &c->d, NULL);
}

static kc_status resizing_backward(kc_layer *l, const kc_bwd *a) {
    const resizing_cfg *c = l->cfg;
    return kc__aug_sample_backward(l, a, &c->d, false);
}

static int64_t resizing_flops(const kc_layer *l) {
    const resizing_cfg *c = l->cfg;
    return kc__aug_sample_flops(l, c->interp);
}

#define O(member) offsetof(kc_resizing_opts, member)
static const kc__field k_keras_keys[] = {
    KC_AUG_KEYS_HEAD,
    {"height", KC_F_INT, KC_F_W, O(height), NULL, 0},
    {"width", KC_F_INT, KC_F_W, O(width), NULL, 0},
    {"interpolation", KC_F_STR, KC_F_W, O(interpolation), "bilinear", 0},
    {"crop_to_aspect_ratio", KC_F_BOOL, KC_F_W, O(crop_to_aspect_ratio), NULL, 0},
    {"pad_to_aspect_ratio", KC_F_BOOL, KC_F_W3, O(pad_to_aspect_ratio), NULL, 0},
    {"fill_mode", KC_F_STR, KC_F_W3, O(fill_mode), "constant", 0},
    {"fill_value", KC_F_FLOAT, KC_F_W3, O(fill_value), NULL, 0},
    {"antialias", KC_F_BOOL, KC_F_W3, O(antialias), NULL, 0},
};
#undef O

const kc_layer_ops kc__resizing_ops = {
    .class_name = "Resizing",
    .snake_name = "resizing",
    .cfg_size = sizeof(resizing_cfg),
    .opts_size = sizeof(kc_resizing_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_SAMPLE2D),
    .init = resizing_init,
    .get_opts = resizing_get_opts,
    .build = resizing_build,
    .forward = resizing_forward,
    .backward = resizing_backward,
    .flops = resizing_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
