/* zeropad2d.c — ZeroPadding2D: (H, W, C) -> (H + top + bottom, W + left + right, C). */
#include "layer.h"

typedef struct zeropad_cfg {
    int top, bottom, left, right;
    int h, w, c; /* from build */
} zeropad_cfg;

static kc_status zeropad_init(kc_layer *l, const void *opts_) {
    const kc_zeropad2d_opts *o = opts_;
    zeropad_cfg *c = l->cfg;
    int t = o->padding[0][0], b = o->padding[0][1], le = o->padding[1][0], r = o->padding[1][1];
    if (t < 0 || b < 0 || le < 0 || r < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: padding ((%d, %d), (%d, %d)) must not be negative",
                        kc__layer_label(l), t, b, le, r);
    if (t == 0 && b == 0 && le == 0 && r == 0) t = b = le = r = 1; /* Keras default padding=(1, 1) */
    c->top = t, c->bottom = b, c->left = le, c->right = r;
    return KC_STATUS_OK;
}

static void zeropad_get_opts(const kc_layer *l, void *opts_) {
    const zeropad_cfg *c = l->cfg;
    *(kc_zeropad2d_opts *)opts_ =
        (kc_zeropad2d_opts){.name = l->name, .padding = {{c->top, c->bottom}, {c->left, c->right}}};
}

static kc_status zeropad_build(kc_layer *l) {
    zeropad_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    l->n_weights = 0;
    KC_TRY(kc__layer_need_hwc(l));
    c->h = in->dim[0], c->w = in->dim[1], c->c = in->dim[2];
    l->out_shape = kc__shape_make(3, (int[]){c->h + c->top + c->bottom, c->w + c->left + c->right, c->c});
    return KC_STATUS_OK;
}

static kc_status zeropad_forward(kc_layer *l, const kc_fwd *a) {
    const zeropad_cfg *c = l->cfg;
    return a->be->pad2d_forward(a->be, a->x[0], a->y, a->batch, c->h, c->w, c->c, c->top, c->bottom, c->left,
                                c->right);
}

static kc_status zeropad_backward(kc_layer *l, const kc_bwd *a) {
    const zeropad_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    return a->be->pad2d_backward(a->be, a->dy, a->dx[0], a->batch, c->h, c->w, c->c, c->top, c->bottom, c->left,
                                 c->right);
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_zeropad2d_opts, member)
static const kc__field k_keras_keys[] = {
    {"padding", KC_F_PAD2, KC_F_W, O(padding), NULL, 0},
    KC_KEY_CHANNELS_LAST(KC_F_W),
};
#undef O

const kc_layer_ops kc__zeropad2d_ops = {
    .class_name = "ZeroPadding2D",
    .snake_name = "zero_padding2d",
    .cfg_size = sizeof(zeropad_cfg),
    .opts_size = sizeof(kc_zeropad2d_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_PAD2D),
    .init = zeropad_init,
    .get_opts = zeropad_get_opts,
    .build = zeropad_build,
    .forward = zeropad_forward,
    .backward = zeropad_backward,
    KC_KERAS_KEYS(k_keras_keys),
};
