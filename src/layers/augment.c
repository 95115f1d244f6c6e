/* augment.c — what the augmentation and preprocessing kinds share (augment.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"

kc_status kc__aug_image_shape(const kc_layer *l, int hwc[3]) {
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    if (in->rank != 3)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects images (H, W, C), got %s", kc__layer_label(l),
                        kc__shape_str(in, true, b, sizeof b));
    hwc[0] = in->dim[0], hwc[1] = in->dim[1], hwc[2] = in->dim[2];
    return KC_STATUS_OK;
}

static const char *const k_fill[] = {"reflect", "wrap", "constant", "nearest"};
static const char *const k_interp[] = {"nearest", "bilinear"};

kc_status kc__aug_parse_fill(const kc_layer *l, const char *fill_mode, int *fill) {
    if (!fill_mode || !*fill_mode) fill_mode = "reflect";
    for (int i = 0; i < 4; i++)
        if (!strcmp(fill_mode, k_fill[i])) return *fill = i, KC_STATUS_OK;
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "%s: fill_mode '%s' is not supported (supported: reflect, wrap, constant, nearest)",
                    kc__layer_label(l), fill_mode);
}

kc_status kc__aug_parse_interp(const kc_layer *l, const char *interpolation, int *interp) {
    if (!interpolation || !*interpolation) interpolation = "bilinear";
    if (!strcmp(interpolation, "bilinear")) return *interp = KC_SAMPLE_BILINEAR, KC_STATUS_OK;
    if (!strcmp(interpolation, "nearest")) return *interp = KC_SAMPLE_ROUND, KC_STATUS_OK;
    return kc__fail(KC_STATUS_UNSUPPORTED, "%s: interpolation '%s' is not supported (supported: bilinear, nearest)",
                    kc__layer_label(l), interpolation);
}

const char *kc__aug_fill_name(int fill) { return fill >= 0 && fill < 4 ? k_fill[fill] : "reflect"; }
const char *kc__aug_interp_name(int interp) { return interp == KC_SAMPLE_BILINEAR ? "bilinear" : k_interp[0]; }

kc_status kc__aug_factor(const kc_layer *l, const char *opt, kc_factor f, float lo, float hi, float out[2]) {
    if (f.given == 2) {
        if (!(f.lower <= hi && f.upper >= lo) || !isfinite(f.lower) || !isfinite(f.upper))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s (%g, %g) must be a pair of numbers in [%g, %g]",
                            kc__layer_label(l), opt, (double)f.lower, (double)f.upper, (double)lo, (double)hi);
        out[0] = fminf(f.lower, f.upper), out[1] = fmaxf(f.lower, f.upper);
        return KC_STATUS_OK;
    }
    if (f.given != 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s is required (a number or a pair of numbers)",
                        kc__layer_label(l), opt);
    if (!(f.lower >= lo && f.lower <= hi))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s %g must be in [%g, %g]", kc__layer_label(l), opt,
                        (double)f.lower, (double)lo, (double)hi);
    float a = fabsf(f.lower);
    out[0] = fmaxf(-a, lo), out[1] = a;
    return KC_STATUS_OK;
}

kc_status kc__aug_axis_factor(const kc_layer *l, const char *opt, kc_factor f, bool open_low, float out[2]) {
    float v[2] = {f.lower, f.given == 2 ? f.upper : f.lower};
    if (f.given != 1 && f.given != 2)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s is required (a number or a pair of numbers)",
                        kc__layer_label(l), opt);
    for (int i = 0; i < 2; i++)
        if (!(v[i] <= 1.0f && (open_low ? v[i] > -1.0f : v[i] >= -1.0f)))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: %s value %g must be in %s-1, 1]", kc__layer_label(l), opt,
                            (double)v[i], open_low ? "(" : "[");
    if (f.given == 1) out[0] = -fabsf(v[0]), out[1] = fabsf(v[0]);
    else out[0] = fminf(v[0], v[1]), out[1] = fmaxf(v[0], v[1]);
    return KC_STATUS_OK;
}

static void desc_base(int h, int w, int c, int oh, int ow, kc_sample2d_desc *d) {
    *d = (kc_sample2d_desc){.h = h, .w = w, .c = c, .oh = oh, .ow = ow, .ch = h, .cw = w,
                            .interp = KC_SAMPLE_ROUND, .fill = KC_FILL_NEAREST, .m = {1, 0, 0, 0, 1, 0}};
}

void kc__aug_resize_desc(int h, int w, int c, int oh, int ow, int aspect, int interp, float fill_value,
                         kc_sample2d_desc *d) {
    desc_base(h, w, c, oh, ow, d);
    if (aspect == 1) { /* Keras: int(float(width * target_height) / target_width), at least 1 */
        d->ch = KC_MAX(KC_MIN(h, (int)((double)w * oh / ow)), 1);
        d->cw = KC_MAX(KC_MIN(w, (int)((double)h * ow / oh)), 1);
        d->top = -(int)((double)(h - d->ch) / 2), d->left = -(int)((double)(w - d->cw) / 2);
    } else if (aspect == 2) { /* Keras pads the same amount on both sides, the height first */
        int ph = KC_MAX(h, (int)((double)w * oh / ow)), pw = KC_MAX(w, (int)((double)h * ow / oh));
        int top = (int)((double)(ph - h) / 2), left = (int)((double)(pw - w) / 2);
        if (top > 0) d->top = top, d->ch = h + 2 * top;
        else if (left > 0) d->left = left, d->cw = w + 2 * left;
    }
    d->interp = interp, d->fill_value = fill_value;
    float sx = (float)d->cw / (float)ow, sy = (float)d->ch / (float)oh; /* half-pixel centres */
    d->m[0] = sx, d->m[2] = 0.5f * sx - 0.5f, d->m[4] = sy, d->m[5] = 0.5f * sy - 0.5f;
}

void kc__aug_crop_desc(int h, int w, int c, int oh, int ow, int top, int left, kc_sample2d_desc *d) {
    desc_base(h, w, c, oh, ow, d);
    d->ch = oh, d->cw = ow, d->top = -top, d->left = -left;
}

void kc__aug_affine_desc(int h, int w, int c, int interp, int fill, float fill_value, kc_sample2d_desc *d) {
    desc_base(h, w, c, h, w, d);
    d->interp = interp, d->fill = fill, d->fill_value = fill_value;
}

size_t kc__aug_params_bytes(int batch, int per) { return (size_t)batch * (size_t)per * sizeof(float); }

/* Draws the batch's parameters and uploads them into aux, KC_AUG_CHUNK images at a time
 * through a buffer on the stack: no host allocation per step. The draws are per image in
 * order from one generator, so the chunking does not change them. */
#define KC_AUG_CHUNK 256
static kc_status upload_params(kc_layer *l, const kc_fwd *a, int per, kc__aug_draw_fn draw) {
    if (!a->aux) return kc__fail(KC_STATUS_INTERNAL, "%s: no parameter buffer in training", kc__layer_label(l));
    float host[KC_AUG_CHUNK * 6];
    if (per > 6) return kc__fail(KC_STATUS_INTERNAL, "%s: %d parameters per image (at most 6)", kc__layer_label(l), per);
    kc_rng rng;
    kc__rng_seed(&rng, a->seed);
    for (int i = 0; i < a->batch; i += KC_AUG_CHUNK) {
        int n = KC_MIN(KC_AUG_CHUNK, a->batch - i);
        draw(l, &rng, n, host);
        KC_TRY(a->be->to_device(a->be, (float *)a->aux + (size_t)i * (size_t)per, host, kc__aug_params_bytes(n, per)));
    }
    return KC_STATUS_OK;
}

kc_status kc__aug_sample_forward(kc_layer *l, const kc_fwd *a, const kc_sample2d_desc *d, kc__aug_draw_fn draw) {
    kc_sample2d_desc dd = *d;
    dd.n = a->batch;
    if (draw) KC_TRY(upload_params(l, a, 6, draw));
    return a->be->sample2d_forward(a->be, &dd, draw ? a->aux : NULL, a->x[0], a->y);
}

kc_status kc__aug_sample_backward(kc_layer *l, const kc_bwd *a, const kc_sample2d_desc *d, bool per_image) {
    (void)l;
    if (!a->dx[0]) return KC_STATUS_OK;
    kc_sample2d_desc dd = *d;
    dd.n = a->batch;
    return a->be->sample2d_backward(a->be, &dd, per_image ? a->aux : NULL, a->dy, a->dx[0]);
}

kc_status kc__aug_color_forward(kc_layer *l, const kc_fwd *a, const kc_color2d_desc *d, kc__aug_draw_fn draw) {
    kc_color2d_desc dd = *d;
    dd.n = a->batch;
    KC_TRY(upload_params(l, a, 2, draw));
    return a->be->color2d_forward(a->be, &dd, a->aux, a->x[0], a->y);
}

kc_status kc__aug_color_backward(kc_layer *l, const kc_bwd *a, const kc_color2d_desc *d) {
    (void)l;
    if (!a->dx[0]) return KC_STATUS_OK;
    kc_color2d_desc dd = *d;
    dd.n = a->batch;
    return a->be->color2d_backward(a->be, &dd, a->aux, a->y, a->dy, a->dx[0]);
}

kc_status kc__aug_head_build(kc_layer *l) {
    kc__aug_head *c = l->cfg;
    int s[3] = {0, 0, 0};
    l->n_weights = 0;
    KC_TRY(kc__aug_image_shape(l, s));
    kc__aug_affine_desc(s[0], s[1], s[2], c->interp, c->fill, c->fill_value, &c->d);
    l->out_shape = l->in_shape[0];
    return KC_STATUS_OK;
}

size_t kc__aug_head_aux_bytes(const kc_layer *l, int batch) {
    (void)l;
    return kc__aug_params_bytes(batch, 6);
}

kc_status kc__aug_head_forward(kc_layer *l, const kc_fwd *a) {
    const kc__aug_head *c = l->cfg;
    return kc__aug_sample_forward(l, a, &c->d, c->draw);
}

kc_status kc__aug_head_backward(kc_layer *l, const kc_bwd *a) {
    const kc__aug_head *c = l->cfg;
    return kc__aug_sample_backward(l, a, &c->d, true);
}

kc_status kc__aug_head_init(kc_layer *l, kc__aug_head *h, const char *fill_mode, const char *interpolation,
                            float fill_value, uint64_t seed, kc__aug_draw_fn draw) {
    KC_TRY(kc__aug_parse_fill(l, fill_mode, &h->fill));
    KC_TRY(kc__aug_parse_interp(l, interpolation, &h->interp));
    if (!isfinite(fill_value))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: fill_value must be finite", kc__layer_label(l));
    h->fill_value = fill_value, h->draw = draw, h->seed = seed;
    if (seed) l->seed = seed;
    return KC_STATUS_OK;
}

int64_t kc__aug_sample_flops(const kc_layer *l, int interp) {
    return (interp == KC_SAMPLE_BILINEAR ? 8 : 1) * kc__shape_size(&l->out_shape);
}

int64_t kc__aug_head_flops(const kc_layer *l) {
    const kc__aug_head *c = l->cfg;
    return kc__aug_sample_flops(l, c->interp);
}
