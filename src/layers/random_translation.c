/* random_translation.c — RandomTranslation: in training each image shifts by a draw from
 * height_factor times its height and one from width_factor times its width (Keras 3's
 * translation matrix), read with the fill mode and interpolation; the identity in inference.
 * The gradient is the resampling's adjoint. Its config is RandomZoom's (random_zoom.c). */
#include "augment.h"

typedef struct translation_cfg {
    kc__aug_head head;
    float hf[2], wf[2];
    kc_factor height_factor, width_factor;
} translation_cfg;

static void translation_draw(const kc_layer *l, kc_rng *rng, int n, float *m) {
    const translation_cfg *c = l->cfg;
    for (int i = 0; i < n; i++, m += 6) {
        float ty = kc__aug_uniform(rng, c->hf) * (float)c->head.d.h;
        float tx = kc__aug_uniform(rng, c->wf) * (float)c->head.d.w;
        m[0] = 1.0f, m[1] = 0.0f, m[2] = -tx;
        m[3] = 0.0f, m[4] = 1.0f, m[5] = -ty;
    }
}

static kc_status translation_init(kc_layer *l, const void *opts_) {
    const kc_random_zoom_opts *o = opts_;
    translation_cfg *c = l->cfg;
    KC_TRY(kc__aug_axis_factor(l, "height_factor", o->height_factor, false, c->hf));
    KC_TRY(kc__aug_axis_factor(l, "width_factor", o->width_factor, false, c->wf));
    c->height_factor = o->height_factor, c->width_factor = o->width_factor;
    return kc__aug_head_init(l, &c->head, o->fill_mode, o->interpolation, o->fill_value, o->seed, translation_draw);
}

static void translation_get_opts(const kc_layer *l, void *opts_) {
    const translation_cfg *c = l->cfg;
    *(kc_random_zoom_opts *)opts_ = (kc_random_zoom_opts){
        .name = l->name, .height_factor = c->height_factor, .width_factor = c->width_factor,
        .fill_mode = kc__aug_fill_name(c->head.fill), .interpolation = kc__aug_interp_name(c->head.interp),
        .fill_value = c->head.fill_value, .seed = c->head.seed};
}

const kc_layer_ops kc__random_translation_ops = {
    .class_name = "RandomTranslation",
    .snake_name = "random_translation",
    .cfg_size = sizeof(translation_cfg),
    .opts_size = sizeof(kc_random_zoom_opts),
    .init = translation_init,
    .get_opts = translation_get_opts,
    KC_AUG_HEAD_FNS,
    KC_KERAS_KEYS(kc__aug_zoom_keys),
};
