/* reshape.c — Reshape to target_shape (per example; one -1 is inferred). An alias. */
#include "layer.h"

typedef struct reshape_cfg {
    int rank;
    int target[KC_MAX_RANK]; /* as given, -1 kept */
} reshape_cfg;

static kc_status reshape_init(kc_layer *l, const void *opts_) {
    const kc_reshape_opts *o = opts_;
    reshape_cfg *c = l->cfg;
    int rank = 0, infer = 0;
    while (rank < KC_MAX_RANK && o->target_shape[rank] != 0) rank++;
    for (int i = 0; i < KC_MAX_RANK; i++) {
        int d = o->target_shape[i];
        if (i > rank && d != 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "%s: target_shape has a zero at dimension %d before a non-zero one; dimensions must be "
                            "positive or a single -1",
                            kc__layer_label(l), rank);
        if (i < rank && d < -1)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                            "%s: target_shape dimension %d is %d; dimensions must be positive or a single -1",
                            kc__layer_label(l), i, d);
        if (i < rank && d == -1) infer++;
    }
    if (rank == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: target_shape is empty; give it, e.g. .target_shape = {28, 28, 1}",
                        kc__layer_label(l));
    if (infer > 1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: target_shape may hold at most one -1 (inferred), it has %d",
                        kc__layer_label(l), infer);
    c->rank = rank;
    for (int i = 0; i < rank; i++) c->target[i] = o->target_shape[i];
    return KC_STATUS_OK;
}

static void reshape_get_opts(const kc_layer *l, void *opts_) {
    const reshape_cfg *c = l->cfg;
    kc_reshape_opts *o = opts_;
    *o = (kc_reshape_opts){.name = l->name};
    for (int i = 0; i < c->rank; i++) o->target_shape[i] = c->target[i];
}

static kc_status reshape_build(kc_layer *l) {
    const reshape_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b1[96], b2[96];
    l->n_weights = 0;
    int64_t n = kc__shape_size(in), known = 1;
    int infer = -1;
    for (int i = 0; i < c->rank; i++) {
        if (c->target[i] == -1) infer = i;
        else known *= c->target[i];
    }
    kc_shape out = kc__shape_make(c->rank, c->target);
    if (infer >= 0) {
        if (known <= 0 || n % known != 0 || n / known > INT32_MAX) goto mismatch;
        out.dim[infer] = (int)(n / known);
    }
    if (kc__shape_size(&out) != n) goto mismatch;
    l->out_shape = out;
    return KC_STATUS_OK;
mismatch:
    return kc__fail(KC_STATUS_SHAPE,
                    "%s: cannot reshape input %s (%lld values) to target_shape %s; the sizes must match",
                    kc__layer_label(l), kc__shape_str(in, true, b1, sizeof b1), (long long)n,
                    kc__shape_str(&out, false, b2, sizeof b2));
}

static kc_status alias_forward(kc_layer *l, const kc_fwd *a) { return KC_STATUS_OK; }
static kc_status alias_backward(kc_layer *l, const kc_bwd *a) { return KC_STATUS_OK; }

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
#define O(member) offsetof(kc_reshape_opts, member)
static const kc__field k_keras_keys[] = {
    {"target_shape", KC_F_SHAPE, KC_F_W, O(target_shape), NULL, 0},
};
#undef O

const kc_layer_ops kc__reshape_ops = {
    .class_name = "Reshape",
    .snake_name = "reshape",
    .cfg_size = sizeof(reshape_cfg),
    .opts_size = sizeof(kc_reshape_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .flags = KC_LAYER_ALIAS,
    .init = reshape_init,
    .get_opts = reshape_get_opts,
    .build = reshape_build,
    .forward = alias_forward,
    .backward = alias_backward,
    KC_KERAS_KEYS(k_keras_keys),
};
