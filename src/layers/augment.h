/* augment.h — what the augmentation and preprocessing kinds share (augment.c): option
 * parsing as Keras 3 validates it, the resampling set-ups of Resizing / CenterCrop /
 * RandomCrop, and the forward and backward of a layer that resamples (kc_sample2d_desc) or
 * changes colours (kc_color2d_desc) with per-image random parameters.
 *
 * In training a random kind draws each image's parameters on the host from the step's
 * seed (kc_fwd.seed: the layer seed mixed with the step), uploads them into its aux buffer
 * (kept for the backward) and runs the backend's kernel; in inference it is the identity
 * (KC_LAYER_ALIAS_INFERENCE: no call, no buffer). */
#ifndef KC_LAYERS_AUGMENT_H
#define KC_LAYERS_AUGMENT_H

#include "layer.h"

/* (H, W, C) of in_shape[0], checked to be rank 3. */
kc_status kc__aug_image_shape(const kc_layer *l, int hwc[3]);
/* fill_mode (NULL: "reflect") and interpolation (NULL: "bilinear") as RandomRotation,
 * RandomZoom and RandomTranslation accept them. */
kc_status kc__aug_parse_fill(const kc_layer *l, const char *fill_mode, int *fill);
kc_status kc__aug_parse_interp(const kc_layer *l, const char *interpolation, int *interp);
const char *kc__aug_fill_name(int fill);
const char *kc__aug_interp_name(int interp);
/* Keras's BaseImagePreprocessingLayer._set_factor with bounds [lo, hi]: a number f gives
 * (max(-|f|, lo), |f|), a pair is sorted; `opt` names the option in errors. */
kc_status kc__aug_factor(const kc_layer *l, const char *opt, kc_factor f, float lo, float hi, float out[2]);
/* RandomZoom's / RandomTranslation's per-axis factor: a number f gives (-|f|, |f|), a pair
 * is sorted; each number must lie in (-1, 1] (zoom: open_low) or [-1, 1]. */
kc_status kc__aug_axis_factor(const kc_layer *l, const char *opt, kc_factor f, bool open_low, float out[2]);
/* A number in [a, b): a + u * (b - a). */
static inline float kc__aug_uniform(kc_rng *r, const float range[2]) {
    return range[0] + (float)kc__rng_uniform(r) * (range[1] - range[0]);
}

/* The resampling of (h, w, c) images to (oh, ow): aspect 0 plain, 1 the largest centred
 * crop of the target's aspect ratio first (Keras's crop_to_aspect_ratio / smart_resize), 2
 * padded with fill_value to it first (pad_to_aspect_ratio); interp KC_SAMPLE_BILINEAR or
 * KC_SAMPLE_FLOOR (Keras's "nearest" resize). */
void kc__aug_resize_desc(int h, int w, int c, int oh, int ow, int aspect, int interp, float fill_value,
                         kc_sample2d_desc *d);
/* A crop of (oh, ow) at (top, left) of (h, w, c) images. */
void kc__aug_crop_desc(int h, int w, int c, int oh, int ow, int top, int left, kc_sample2d_desc *d);
/* The same-size resampling of a random transform: canvas = the image. */
void kc__aug_affine_desc(int h, int w, int c, int interp, int fill, float fill_value, kc_sample2d_desc *d);

/* Per-image parameters: `per` numbers for each of n images, drawn on the host. */
typedef void (*kc__aug_draw_fn)(const kc_layer *l, kc_rng *rng, int n, float *params);
size_t kc__aug_params_bytes(int batch, int per);
/* Forward of a resampling layer: with draw, image i's transform comes from it (uploaded
 * into a->aux); without, d->m serves every image. */
kc_status kc__aug_sample_forward(kc_layer *l, const kc_fwd *a, const kc_sample2d_desc *d, kc__aug_draw_fn draw);
kc_status kc__aug_sample_backward(kc_layer *l, const kc_bwd *a, const kc_sample2d_desc *d, bool per_image);
/* Forward and backward of a colour layer (two numbers per image from draw, into a->aux). */
kc_status kc__aug_color_forward(kc_layer *l, const kc_fwd *a, const kc_color2d_desc *d, kc__aug_draw_fn draw);
kc_status kc__aug_color_backward(kc_layer *l, const kc_bwd *a, const kc_color2d_desc *d);

/* The head of the random same-size resamplings' configs (RandomFlip, RandomRotation,
 * RandomZoom, RandomTranslation): their init fills interp, fill, fill_value, draw and seed;
 * build, aux_bytes, forward and backward are then these. */
typedef struct kc__aug_head {
    kc_sample2d_desc d; /* from build */
    int interp, fill;
    float fill_value;
    kc__aug_draw_fn draw;
    uint64_t seed;
} kc__aug_head;
/* The options every random affine kind has (fill_mode, interpolation, fill_value, seed). */
kc_status kc__aug_head_init(kc_layer *l, kc__aug_head *h, const char *fill_mode, const char *interpolation,
                            float fill_value, uint64_t seed, kc__aug_draw_fn draw);
kc_status kc__aug_head_build(kc_layer *l);
size_t kc__aug_head_aux_bytes(const kc_layer *l, int batch);
kc_status kc__aug_head_forward(kc_layer *l, const kc_fwd *a);
kc_status kc__aug_head_backward(kc_layer *l, const kc_bwd *a);
/* Per example, in training: 8 per output value bilinear (4 taps), 1 otherwise. */
int64_t kc__aug_sample_flops(const kc_layer *l, int interp);
int64_t kc__aug_head_flops(const kc_layer *l);
#define KC_AUG_HEAD_FNS                                                                            \
    .flags = KC_LAYER_ALIAS_INFERENCE, .min_inputs = 1, .max_inputs = 1,                           \
    .backend_ops = KC_OP_BIT(KC_OP_SAMPLE2D), .build = kc__aug_head_build,                         \
    .aux_bytes = kc__aug_head_aux_bytes, .forward = kc__aug_head_forward,                          \
    .backward = kc__aug_head_backward, .flops = kc__aug_head_flops

/* RandomZoom's config keys, which RandomTranslation shares (random_zoom.c). */
#define KC_AUG_ZOOM_NKEYS 7
extern const kc__field kc__aug_zoom_keys[KC_AUG_ZOOM_NKEYS];

/* The Keras config keys every image layer of Keras 3 writes first (tf-keras writes none). */
#define KC_AUG_KEYS_HEAD KC_KEY_CHANNELS_LAST(KC_F_W3)

#endif /* KC_LAYERS_AUGMENT_H */
