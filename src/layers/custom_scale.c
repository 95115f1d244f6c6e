/* custom_scale.c — InceptionResNetV2's CustomScaleLayer (keras/src/applications/
 * inception_resnet_v2.py): y = x0 + x1 * scale, two inputs of one shape, no weights. Keras 3
 * saves it with module "keras.src.applications.inception_resnet_v2" and registered_name
 * "CustomScaleLayer", so that Keras finds the class again; kerac writes the same. */
#include <math.h>

#include "layer.h"

typedef struct custom_scale_cfg {
    float scale;
    int64_t size; /* values per example */
} custom_scale_cfg;

static kc_status cs_init(kc_layer *l, const void *opts) {
    custom_scale_cfg *c = l->cfg;
    c->scale = ((const kc_custom_scale_opts *)opts)->scale;
    if (!isfinite(c->scale))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: scale must be a finite number", kc__layer_label(l));
    return KC_STATUS_OK;
}

static void cs_get_opts(const kc_layer *l, void *opts) {
    const custom_scale_cfg *c = l->cfg;
    *(kc_custom_scale_opts *)opts = (kc_custom_scale_opts){.name = l->name, .scale = c->scale};
}

static kc_status cs_build(kc_layer *l) {
    custom_scale_cfg *c = l->cfg;
    char b1[96], b2[96];
    l->n_weights = 0;
    if (!kc__shape_eq(&l->in_shape[1], &l->in_shape[0]))
        return kc__fail(KC_STATUS_SHAPE, "%s: its inputs have shapes %s and %s; CustomScaleLayer needs one shape",
                        kc__layer_label(l), kc__shape_str(&l->in_shape[0], true, b1, sizeof b1),
                        kc__shape_str(&l->in_shape[1], true, b2, sizeof b2));
    l->out_shape = l->in_shape[0];
    c->size = kc__shape_size(&l->out_shape);
    return KC_STATUS_OK;
}

static kc_status cs_forward(kc_layer *l, const kc_fwd *a) {
    const custom_scale_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    KC_TRY(a->be->copy(a->be, a->y, a->x[0], (size_t)n * sizeof(float)));
    return a->be->axpy(a->be, a->y, a->x[1], c->scale, n);
}

/* dx0 = dy, dx1 = scale * dy */
static kc_status cs_backward(kc_layer *l, const kc_bwd *a) {
    const custom_scale_cfg *c = l->cfg;
    int64_t n = (int64_t)a->batch * c->size;
    size_t bytes = (size_t)n * sizeof(float);
    if (a->dx[0] && a->dx[0] != a->dy) KC_TRY(a->be->copy(a->be, a->dx[0], a->dy, bytes));
    if (!a->dx[1]) return KC_STATUS_OK;
    if (a->dx[1] != a->dy) KC_TRY(a->be->copy(a->be, a->dx[1], a->dy, bytes));
    return a->be->scale(a->be, a->dx[1], c->scale, n);
}

static int64_t cs_flops(const kc_layer *l) { return 2 * ((const custom_scale_cfg *)l->cfg)->size; }

#define O(member) offsetof(kc_custom_scale_opts, member)
static const kc__field k_keras_keys[] = {
    {"scale", KC_F_FLOAT, KC_F_W, O(scale), NULL, 0},
};
#undef O

const kc_layer_ops kc__custom_scale_ops = {
    .class_name = "CustomScaleLayer",
    .snake_name = "custom_scale_layer",
    .keras_module = "keras.src.applications.inception_resnet_v2",
    .registered_name = "CustomScaleLayer",
    .cfg_size = sizeof(custom_scale_cfg),
    .opts_size = sizeof(kc_custom_scale_opts),
    .min_inputs = 2,
    .max_inputs = 2,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE),
    .init = cs_init,
    .get_opts = cs_get_opts,
    .build = cs_build,
    .forward = cs_forward,
    .backward = cs_backward,
    .flops = cs_flops,
    KC_KERAS_KEYS(k_keras_keys),
};
