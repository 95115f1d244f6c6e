/* random_crop.c — RandomCrop: in training, when the images are larger than (height, width)
 * on both axes, one crop of that size at a random place (drawn per batch, as Keras 3 does);
 * otherwise, and in inference, the largest centred crop of the target's aspect ratio resized
 * (bilinear) to (height, width): tf-keras's inference behaviour. (Keras 3.15 returns the
 * input unchanged in inference, whatever its size, which contradicts the layer's own output
 * shape; kerac keeps the declared shape.) The gradient is the resampling's adjoint. */
#include "augment.h"

typedef struct crop_cfg {
    kc_sample2d_desc fixed; /* the centred crop + resize */
    kc_sample2d_desc crop;  /* the random crop (offsets per image in aux) */
    bool random;            /* the input is larger on both axes */
    int height, width;
    uint64_t seed;
} crop_cfg;

static kc_status crop_size(kc_layer *l, const kc_crop_opts *o) {
    if (o->height <= 0 || o->width <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: height and width must be positive, got %d x %d",
                        kc__layer_label(l), o->height, o->width);
    return KC_STATUS_OK;
}

static kc_status crop_init(kc_layer *l, const void *opts_) {
    const kc_crop_opts *o = opts_;
    crop_cfg *c = l->cfg;
    KC_TRY(crop_size(l, o));
    c->height = o->height, c->width = o->width, c->seed = o->seed;
    if (o->seed) l->seed = o->seed;
    return KC_STATUS_OK;
}

static void crop_get_opts(const kc_layer *l, void *opts_) {
    const crop_cfg *c = l->cfg;
    *(kc_crop_opts *)opts_ = (kc_crop_opts){.name = l->name, .height = c->height, .width = c->width, .seed = c->seed};
}

static kc_status crop_build(kc_layer *l) {
    crop_cfg *c = l->cfg;
    int s[3] = {0, 0, 0};
    l->n_weights = 0;
    KC_TRY(kc__aug_image_shape(l, s));
    c->random = s[0] > c->height && s[1] > c->width;
    kc__aug_resize_desc(s[0], s[1], s[2], c->height, c->width, 1, KC_SAMPLE_BILINEAR, 0.0f, &c->fixed);
    kc__aug_crop_desc(s[0], s[1], s[2], c->height, c->width, 0, 0, &c->crop);
    c->crop.ch = s[0], c->crop.cw = s[1]; /* the transform moves the window: the canvas is the image */
    l->out_shape = kc__shape_make(3, (int[]){c->height, c->width, s[2]});
    return KC_STATUS_OK;
}

static void crop_draw(const kc_layer *l, kc_rng *rng, int n, float *m) {
    const crop_cfg *c = l->cfg;
    int top = (int)kc__rng_below(rng, (uint64_t)(c->crop.h - c->height + 1));
    int left = (int)kc__rng_below(rng, (uint64_t)(c->crop.w - c->width + 1));
    for (int i = 0; i < n; i++, m += 6) {
        m[0] = 1.0f, m[1] = 0.0f, m[2] = (float)left;
        m[3] = 0.0f, m[4] = 1.0f, m[5] = (float)top;
    }
}

static size_t crop_aux_bytes(const kc_layer *l, int batch) {
    const crop_cfg *c = l->cfg;
    return c->random ? kc__aug_params_bytes(batch, 6) : 0;
}

static kc_status crop_forward(kc_layer *l, const kc_fwd *a) {
    const crop_cfg *c = l->cfg;
    if (a->training && c->random) return kc__aug_sample_forward(l, a, &c->crop, crop_draw);
    return kc__aug_sample_forward(l, a, &c->fixed, NULL);
}

static kc_status crop_backward(kc_layer *l, const kc_bwd *a) {
    const crop_cfg *c = l->cfg;
    return c->random ? kc__aug_sample_backward(l, a, &c->crop, true) : kc__aug_sample_backward(l, a, &c->fixed, false);
}

static int64_t crop_flops(const kc_layer *l) {
    const crop_cfg *c = l->cfg;
    return kc__aug_sample_flops(l, c->fixed.interp);
}

#define O(member) offsetof(kc_crop_opts, member)
static const kc__field k_keras_keys[] = { /* CenterCrop's are the first three */
    KC_AUG_KEYS_HEAD,
    {"height", KC_F_INT, KC_F_W, O(height), NULL, 0},
    {"width", KC_F_INT, KC_F_W, O(width), NULL, 0},
    {"seed", KC_F_SEED, KC_F_W, O(seed), NULL, 0},
};
#undef O

const kc_layer_ops kc__random_crop_ops = {
    .class_name = "RandomCrop",
    .snake_name = "random_crop",
    .cfg_size = sizeof(crop_cfg),
    .opts_size = sizeof(kc_crop_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_SAMPLE2D),
    .init = crop_init,
    .get_opts = crop_get_opts,
    .build = crop_build,
    .aux_bytes = crop_aux_bytes,
    .forward = crop_forward,
    .backward = crop_backward,
    .flops = crop_flops,
    KC_KERAS_KEYS(k_keras_keys),
};

/* ---- CenterCrop: the centred (height, width) crop when the images are at least that large
 * on both axes, else Keras's smart_resize (the largest centred crop of the target's aspect
 * ratio, resized bilinearly); always applied. */

static kc_status center_build(kc_layer *l) {
    crop_cfg *c = l->cfg;
    int s[3] = {0, 0, 0};
    l->n_weights = 0;
    KC_TRY(kc__aug_image_shape(l, s));
    c->random = false;
    if (s[0] >= c->height && s[1] >= c->width)
        kc__aug_crop_desc(s[0], s[1], s[2], c->height, c->width, (s[0] - c->height) / 2, (s[1] - c->width) / 2,
                          &c->fixed);
    else kc__aug_resize_desc(s[0], s[1], s[2], c->height, c->width, 1, KC_SAMPLE_BILINEAR, 0.0f, &c->fixed);
    l->out_shape = kc__shape_make(3, (int[]){c->height, c->width, s[2]});
    return KC_STATUS_OK;
}

const kc_layer_ops kc__center_crop_ops = {
    .class_name = "CenterCrop",
    .snake_name = "center_crop",
    .cfg_size = sizeof(crop_cfg),
    .opts_size = sizeof(kc_crop_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_SAMPLE2D),
    .init = crop_init,
    .get_opts = crop_get_opts,
    .build = center_build,
    .forward = crop_forward,
    .backward = crop_backward,
    .flops = crop_flops,
    .keras_keys = k_keras_keys, /* RandomCrop's without the seed */
    .n_keras_keys = 3,
};
