/* random_rotation.c — RandomRotation: in training each image turns about its centre by an
 * angle drawn uniformly from factor * 360 degrees (Keras 3's affine matrix, centre
 * ((W - 1) / 2, (H - 1) / 2)), read with the fill mode and interpolation; the identity in
 * inference. The gradient is the resampling's adjoint. */
#include <math.h>

#include "augment.h"

typedef struct rotation_cfg {
    kc__aug_head head;
    float factor[2];
} rotation_cfg;

static void rotation_draw(const kc_layer *l, kc_rng *rng, int n, float *m) {
    const rotation_cfg *c = l->cfg;
    const float cx = 0.5f * (float)(c->head.d.w - 1), cy = 0.5f * (float)(c->head.d.h - 1);
    for (int i = 0; i < n; i++, m += 6) {
        float turn = kc__aug_uniform(rng, c->factor);
        float rad = turn * 360.0f * (float)(M_PI / 180.0), co = cosf(rad), si = sinf(rad);
        m[0] = co, m[1] = -si, m[2] = cx - cx * co + cy * si;
        m[3] = si, m[4] = co, m[5] = cy - cx * si - cy * co;
    }
}

static kc_status rotation_init(kc_layer *l, const void *opts_) {
    const kc_random_rotation_opts *o = opts_;
    rotation_cfg *c = l->cfg;
    KC_TRY(kc__aug_factor(l, "factor", o->factor, -1.0f, 1.0f, c->factor));
    return kc__aug_head_init(l, &c->head, o->fill_mode, o->interpolation, o->fill_value, o->seed, rotation_draw);
}

static void rotation_get_opts(const kc_layer *l, void *opts_) {
    const rotation_cfg *c = l->cfg;
    *(kc_random_rotation_opts *)opts_ = (kc_random_rotation_opts){
        .name = l->name, .factor = KC_FACTOR_PAIR(c->factor[0], c->factor[1]),
        .fill_mode = kc__aug_fill_name(c->head.fill), .interpolation = kc__aug_interp_name(c->head.interp),
        .fill_value = c->head.fill_value, .seed = c->head.seed};
}

#define O(member) offsetof(kc_random_rotation_opts, member)
static const kc__field k_keras_keys[] = {
    KC_AUG_KEYS_HEAD,
    {"factor", KC_F_FACTOR, KC_F_W, O(factor), NULL, 0},
    {"fill_mode", KC_F_STR, KC_F_W, O(fill_mode), "reflect", 0},
    {"fill_value", KC_F_FLOAT, KC_F_W, O(fill_value), NULL, 0},
    {"interpolation", KC_F_STR, KC_F_W, O(interpolation), "bilinear", 0},
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
};
#undef O

const kc_layer_ops kc__random_rotation_ops = {
    .class_name = "RandomRotation",
    .snake_name = "random_rotation",
    .cfg_size = sizeof(rotation_cfg),
    .opts_size = sizeof(kc_random_rotation_opts),
    .init = rotation_init,
    .get_opts = rotation_get_opts,
    KC_AUG_HEAD_FNS,
    KC_KERAS_KEYS(k_keras_keys),
};
