/* random_zoom.c — RandomZoom: in training each image is scaled about its centre, the
 * height by 1 + a draw from height_factor and the width by 1 + a draw from width_factor (or
 * by the height's when width_factor is not given), as Keras 3's zoom matrix; a positive
 * factor zooms out. The identity in inference; the gradient is the resampling's adjoint. */
#include "augment.h"

typedef struct zoom_cfg {
    kc__aug_head head;
    float hf[2], wf[2];
    kc_factor height_factor, width_factor; /* as given, for the config */
} zoom_cfg;

static void zoom_draw(const kc_layer *l, kc_rng *rng, int n, float *m) {
    const zoom_cfg *c = l->cfg;
    for (int i = 0; i < n; i++, m += 6) {
        float hz = 1.0f + kc__aug_uniform(rng, c->hf);
        float wz = c->width_factor.given ? 1.0f + kc__aug_uniform(rng, c->wf) : hz;
        m[0] = wz, m[1] = 0.0f, m[2] = 0.5f * (float)(c->head.d.w - 1) * (1.0f - wz);
        m[3] = 0.0f, m[4] = hz, m[5] = 0.5f * (float)(c->head.d.h - 1) * (1.0f - hz);
    }
}

static kc_status zoom_init(kc_layer *l, const void *opts_) {
    const kc_random_zoom_opts *o = opts_;
    zoom_cfg *c = l->cfg;
    KC_TRY(kc__aug_axis_factor(l, "height_factor", o->height_factor, true, c->hf));
    if (o->width_factor.given) KC_TRY(kc__aug_axis_factor(l, "width_factor", o->width_factor, true, c->wf));
    c->height_factor = o->height_factor, c->width_factor = o->width_factor;
    return kc__aug_head_init(l, &c->head, o->fill_mode, o->interpolation, o->fill_value, o->seed, zoom_draw);
}

static void zoom_get_opts(const kc_layer *l, void *opts_) {
    const zoom_cfg *c = l->cfg;
    *(kc_random_zoom_opts *)opts_ = (kc_random_zoom_opts){
        .name = l->name, .height_factor = c->height_factor, .width_factor = c->width_factor,
        .fill_mode = kc__aug_fill_name(c->head.fill), .interpolation = kc__aug_interp_name(c->head.interp),
        .fill_value = c->head.fill_value, .seed = c->head.seed};
}

/* RandomZoom's and RandomTranslation's keys (the same config). */
#define O(member) offsetof(kc_random_zoom_opts, member)
const kc__field kc__aug_zoom_keys[KC_AUG_ZOOM_NKEYS] = {
    KC_AUG_KEYS_HEAD,
    {"height_factor", KC_F_FACTOR, KC_F_W, O(height_factor), NULL, 0},
    {"width_factor", KC_F_FACTOR, KC_F_W, O(width_factor), NULL, 0},
    {"fill_mode", KC_F_STR, KC_F_W, O(fill_mode), "reflect", 0},
    {"interpolation", KC_F_STR, KC_F_W, O(interpolation), "bilinear", 0},
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
    {"fill_value", KC_F_FLOAT, KC_F_W, O(fill_value), NULL, 0},
};
#undef O

const kc_layer_ops kc__random_zoom_ops = {
    .class_name = "RandomZoom",
    .snake_name = "random_zoom",
    .cfg_size = sizeof(zoom_cfg),
    .opts_size = sizeof(kc_random_zoom_opts),
    .init = zoom_init,
    .get_opts = zoom_get_opts,
    KC_AUG_HEAD_FNS,
    KC_KERAS_KEYS(kc__aug_zoom_keys),
};
