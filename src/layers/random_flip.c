/* random_flip.c — RandomFlip: in training each image is flipped with probability 1/2 (mode
 * "horizontal": left-right, "vertical": top-bottom, "horizontal_and_vertical": both, by the
 * same draw, as Keras 3 does); the identity in inference. The gradient is flipped back. */
#include <string.h>

#include "augment.h"

typedef struct flip_cfg {
    kc__aug_head head;
    bool horizontal, vertical;
} flip_cfg;

static void flip_draw(const kc_layer *l, kc_rng *rng, int n, float *m) {
    const flip_cfg *c = l->cfg;
    for (int i = 0; i < n; i++, m += 6) {
        bool f = kc__rng_uniform(rng) <= 0.5;
        bool h = f && c->horizontal, v = f && c->vertical;
        m[0] = h ? -1.0f : 1.0f, m[1] = 0.0f, m[2] = h ? (float)(c->head.d.w - 1) : 0.0f;
        m[3] = 0.0f, m[4] = v ? -1.0f : 1.0f, m[5] = v ? (float)(c->head.d.h - 1) : 0.0f;
    }
}

static kc_status flip_init(kc_layer *l, const void *opts_) {
    const kc_random_flip_opts *o = opts_;
    flip_cfg *c = l->cfg;
    const char *mode = o->mode && *o->mode ? o->mode : "horizontal_and_vertical";
    c->horizontal = !strcmp(mode, "horizontal") || !strcmp(mode, "horizontal_and_vertical");
    c->vertical = !strcmp(mode, "vertical") || !strcmp(mode, "horizontal_and_vertical");
    if (!c->horizontal && !c->vertical)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: mode '%s' is not one of horizontal, vertical, horizontal_and_vertical",
                        kc__layer_label(l), mode);
    c->head.interp = KC_SAMPLE_ROUND, c->head.fill = KC_FILL_NEAREST, c->head.draw = flip_draw;
    c->head.seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void flip_get_opts(const kc_layer *l, void *opts_) {
    const flip_cfg *c = l->cfg;
    const char *mode = c->horizontal && c->vertical ? "horizontal_and_vertical" : c->horizontal ? "horizontal" : "vertical";
    *(kc_random_flip_opts *)opts_ = (kc_random_flip_opts){.name = l->name, .mode = mode, .seed = c->head.seed};
}

#define O(member) offsetof(kc_random_flip_opts, member)
static const kc__field k_keras_keys[] = {
    KC_AUG_KEYS_HEAD,
    {"seed", KC_F_SEED, KC_F_W3, O(seed), NULL, 0},
    {"mode", KC_F_STR, KC_F_W, O(mode), "horizontal_and_vertical", 0},
    {"seed", KC_F_SEED, KC_F_W2, O(seed), NULL, 0}, /* tf-keras order */
};
#undef O

const kc_layer_ops kc__random_flip_ops = {
    .class_name = "RandomFlip",
    .snake_name = "random_flip",
    .cfg_size = sizeof(flip_cfg),
    .opts_size = sizeof(kc_random_flip_opts),
    .init = flip_init,
    .get_opts = flip_get_opts,
    KC_AUG_HEAD_FNS,
    KC_KERAS_KEYS(k_keras_keys),
};
