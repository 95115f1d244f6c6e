/* random_color.c — RandomContrast and RandomBrightness (one config: factor, value_range,
 * seed). In training, per image:
 *   RandomContrast   y = (x - mean) * f + mean, f drawn from [1 - lower, 1 + upper] (factor
 *                    bounded to [0, 1] as Keras 3 does), mean per channel over the image
 *   RandomBrightness y = x + d, d drawn from factor * (value_range's width)
 * then clipped to value_range; the identity in inference. Gradients pass except where the
 * output is clipped (the contrast's through its mean too). */
#include <math.h>

#include "augment.h"

typedef struct color_cfg {
    kc_color2d_desc d;
    float factor[2];
    float range[2];
    uint64_t seed;
} color_cfg;

static kc_status color_init(kc_layer *l, const kc_random_color_opts *o, float lo, float hi) {
    color_cfg *c = l->cfg;
    KC_TRY(kc__aug_factor(l, "factor", o->factor, lo, hi, c->factor));
    float a = o->value_range[0], b = o->value_range[1];
    if (a == 0.0f && b == 0.0f) b = 255.0f;
    if (!isfinite(a) || !isfinite(b) || a == b)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: value_range (%g, %g) must be two different finite numbers",
                        kc__layer_label(l), (double)a, (double)b);
    c->range[0] = fminf(a, b), c->range[1] = fmaxf(a, b);
    c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static kc_status contrast_init(kc_layer *l, const void *opts) {
    color_cfg *c = l->cfg;
    c->d.contrast = 1;
    return color_init(l, opts, 0.0f, 1.0f);
}

static kc_status brightness_init(kc_layer *l, const void *opts) {
    color_cfg *c = l->cfg;
    c->d.contrast = 0;
    return color_init(l, opts, -1.0f, 1.0f);
}

static void color_get_opts(const kc_layer *l, void *opts_) {
    const color_cfg *c = l->cfg;
    *(kc_random_color_opts *)opts_ = (kc_random_color_opts){.name = l->name,
                                                            .factor = KC_FACTOR_PAIR(c->factor[0], c->factor[1]),
                                                            .value_range = {c->range[0], c->range[1]},
                                                            .seed = c->seed};
}

static kc_status color_build(kc_layer *l) {
    color_cfg *c = l->cfg;
    int s[3] = {0, 0, 0};
    l->n_weights = 0;
    KC_TRY(kc__aug_image_shape(l, s));
    c->d.hw = s[0] * s[1], c->d.c = s[2], c->d.lo = c->range[0], c->d.hi = c->range[1];
    l->out_shape = l->in_shape[0];
    return KC_STATUS_OK;
}

static void color_draw(const kc_layer *l, kc_rng *rng, int n, float *p) {
    const color_cfg *c = l->cfg;
    for (int i = 0; i < n; i++, p += 2) {
        if (c->d.contrast) {
            float r[2] = {1.0f - c->factor[0], 1.0f + c->factor[1]};
            p[0] = kc__aug_uniform(rng, r), p[1] = 0.0f;
        } else {
            p[0] = 1.0f, p[1] = kc__aug_uniform(rng, c->factor) * (c->range[1] - c->range[0]);
        }
    }
}

static size_t color_aux_bytes(const kc_layer *l, int batch) {
    (void)l;
    return kc__aug_params_bytes(batch, 2);
}

static kc_status color_forward(kc_layer *l, const kc_fwd *a) {
    const color_cfg *c = l->cfg;
    return kc__aug_color_forward(l, a, &c->d, color_draw);
}

static kc_status color_backward(kc_layer *l, const kc_bwd *a) {
    const color_cfg *c = l->cfg;
    return kc__aug_color_backward(l, a, &c->d);
}

static int64_t color_flops(const kc_layer *l) { return 3 * kc__shape_size(&l->out_shape); }

#define O(member) offsetof(kc_random_color_opts, member)
static const kc__field k_contrast_keys[] = {
    KC_AUG_KEYS_HEAD,
    {"factor", KC_F_FACTOR, KC_F_W, O(factor), NULL, 0},
    {"value_range", KC_F_FLOAT_PAIR, KC_F_W3, O(value_range), "[0, 255]", 0},
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
};
static const kc__field k_brightness_keys[] = {
    KC_AUG_KEYS_HEAD,
    {"factor", KC_F_FACTOR, KC_F_W, O(factor), NULL, 0},
    {"value_range", KC_F_FLOAT_PAIR, KC_F_W, O(value_range), "[0, 255]", 0},
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
};
#undef O

#define COLOR_FNS                                                                                  \
    .cfg_size = sizeof(color_cfg), .opts_size = sizeof(kc_random_color_opts), .min_inputs = 1,     \
    .max_inputs = 1, .flags = KC_LAYER_ALIAS_INFERENCE, .backend_ops = KC_OP_BIT(KC_OP_COLOR2D),   \
    .get_opts = color_get_opts, .build = color_build, .aux_bytes = color_aux_bytes,                \
    .forward = color_forward, .backward = color_backward, .flops = color_flops

const kc_layer_ops kc__random_contrast_ops = {
    .class_name = "RandomContrast",
    .snake_name = "random_contrast",
    .init = contrast_init,
    COLOR_FNS,
    KC_KERAS_KEYS(k_contrast_keys),
};

const kc_layer_ops kc__random_brightness_ops = {
    .class_name = "RandomBrightness",
    .snake_name = "random_brightness",
    .init = brightness_init,
    COLOR_FNS,
    KC_KERAS_KEYS(k_brightness_keys),
};
