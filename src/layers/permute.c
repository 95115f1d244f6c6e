/* permute.c — Permute (the axes of each example reordered; dims counts from 1, the batch
 * axis stays) through the backend's permute, and RepeatVector ((F) -> (n, F)) through
 * strided copies: forward copies x into each of the n slots, backward sums the slots. */
#include "layer.h"

typedef struct permute_cfg {
    int dims[KC_MAX_RANK]; /* 1-based, as Keras */
    int rank;
    int perm[KC_MAX_RANK], inv[KC_MAX_RANK]; /* 0-based; from build */
    int in_dims[KC_MAX_RANK], out_dims[KC_MAX_RANK];
} permute_cfg;

static kc_status permute_init(kc_layer *l, const void *opts_) {
    const kc_permute_opts *o = opts_;
    permute_cfg *c = l->cfg;
    bool seen[KC_MAX_RANK + 1] = {false};
    c->rank = 0;
    while (c->rank < KC_MAX_RANK && o->dims[c->rank] != 0) c->rank++;
    if (c->rank == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: dims is required: a permutation of 1..rank",
                        kc__layer_label(l));
    for (int i = 0; i < c->rank; i++) {
        int d = o->dims[i];
        if (d < 1 || d > c->rank || seen[d])
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: dims must be a permutation of 1..%d (the batch axis 0 "
                            "stays), got %d at position %d", kc__layer_label(l), c->rank, d, i);
        seen[d] = true;
        c->dims[i] = d;
    }
    return KC_STATUS_OK;
}

static void permute_get_opts(const kc_layer *l, void *opts_) {
    const permute_cfg *c = l->cfg;
    kc_permute_opts o = {.name = l->name};
    for (int i = 0; i < c->rank; i++) o.dims[i] = c->dims[i];
    *(kc_permute_opts *)opts_ = o;
}

static kc_status permute_build(kc_layer *l) {
    permute_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (in->rank != c->rank)
        return kc__fail(KC_STATUS_SHAPE, "%s: dims has %d axes and input %s has %d", kc__layer_label(l), c->rank,
                        kc__shape_str(in, true, b, sizeof b), in->rank);
    for (int i = 0; i < c->rank; i++) {
        c->perm[i] = c->dims[i] - 1;
        c->inv[c->perm[i]] = i;
        c->in_dims[i] = in->dim[i];
        c->out_dims[i] = in->dim[c->perm[i]];
    }
    l->out_shape = kc__shape_make(c->rank, c->out_dims);
    return KC_STATUS_OK;
}

static kc_status permute_forward(kc_layer *l, const kc_fwd *a) {
    const permute_cfg *c = l->cfg;
    return a->be->permute(a->be, a->x[0], a->y, a->batch, c->rank, c->in_dims, c->perm);
}

static kc_status permute_backward(kc_layer *l, const kc_bwd *a) {
    const permute_cfg *c = l->cfg;
    if (!a->dx[0]) return KC_STATUS_OK;
    return a->be->permute(a->be, a->dy, a->dx[0], a->batch, c->rank, c->out_dims, c->inv);
}

/* ---------------------------------------------------------------- RepeatVector */

typedef struct repeat_cfg {
    int n, f;
} repeat_cfg;

static kc_status repeat_init(kc_layer *l, const void *opts_) {
    const kc_repeat_vector_opts *o = opts_;
    repeat_cfg *c = l->cfg;
    if (o->n <= 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: n must be a positive integer, got %d", kc__layer_label(l), o->n);
    c->n = o->n;
    return KC_STATUS_OK;
}

static void repeat_get_opts(const kc_layer *l, void *opts_) {
    const repeat_cfg *c = l->cfg;
    *(kc_repeat_vector_opts *)opts_ = (kc_repeat_vector_opts){.name = l->name, .n = c->n};
}

static kc_status repeat_build(kc_layer *l) {
    repeat_cfg *c = l->cfg;
    const kc_shape *in = &l->in_shape[0];
    char b[96];
    l->n_weights = 0;
    if (in->rank != 1)
        return kc__fail(KC_STATUS_SHAPE, "%s: expects input (features,), got %s", kc__layer_label(l),
                        kc__shape_str(in, true, b, sizeof b));
    c->f = in->dim[0];
    l->out_shape = kc__shape_make(2, (int[]){c->n, c->f});
    return KC_STATUS_OK;
}

static size_t repeat_ws_bytes(const kc_layer *l, int batch, kc_backend *be) {
    (void)be;
    const repeat_cfg *c = l->cfg;
    return c->n > 1 ? (size_t)batch * c->f * sizeof(float) : 0;
}

static kc_status repeat_forward(kc_layer *l, const kc_fwd *a) {
    const repeat_cfg *c = l->cfg;
    for (int r = 0; r < c->n; r++)
        KC_TRY(a->be->copy_strided(a->be, a->y, c->n * c->f, r * c->f, a->x[0], c->f, 0, a->batch, c->f));
    return KC_STATUS_OK;
}

static kc_status repeat_backward(kc_layer *l, const kc_bwd *a) {
    const repeat_cfg *c = l->cfg;
    float *dx = a->dx[0], *t = a->ws;
    if (!dx) return KC_STATUS_OK;
    const int64_t sz = (int64_t)a->batch * c->f;
    if (c->n > 1 && (!t || a->ws_bytes < (size_t)sz * sizeof(float)))
        return kc__fail(KC_STATUS_INTERNAL, "%s: no workspace for the gradient", kc__layer_label(l));
    KC_TRY(a->be->copy_strided(a->be, dx, c->f, 0, a->dy, c->n * c->f, 0, a->batch, c->f));
    for (int r = 1; r < c->n; r++) {
        KC_TRY(a->be->copy_strided(a->be, t, c->f, 0, a->dy, c->n * c->f, r * c->f, a->batch, c->f));
        KC_TRY(a->be->axpy(a->be, dx, t, 1.0f, sz));
    }
    return KC_STATUS_OK;
}

/* The Keras config keys (keras_keys.h), in the order get_config() writes them. */
static const kc__field k_permute_keys[] = {
    {"dims", KC_F_SHAPE, KC_F_W, offsetof(kc_permute_opts, dims), NULL, 0},
};
static const kc__field k_repeat_keys[] = {
    {"n", KC_F_INT, KC_F_W, offsetof(kc_repeat_vector_opts, n), NULL, 0},
};

const kc_layer_ops kc__permute_ops = {
    .class_name = "Permute",
    .snake_name = "permute",
    .cfg_size = sizeof(permute_cfg),
    .opts_size = sizeof(kc_permute_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_RESAMPLE),
    .init = permute_init,
    .get_opts = permute_get_opts,
    .build = permute_build,
    .forward = permute_forward,
    .backward = permute_backward,
    KC_KERAS_KEYS(k_permute_keys),
};

const kc_layer_ops kc__repeat_vector_ops = {
    .class_name = "RepeatVector",
    .snake_name = "repeat_vector",
    .cfg_size = sizeof(repeat_cfg),
    .opts_size = sizeof(kc_repeat_vector_opts),
    .min_inputs = 1,
    .max_inputs = 1,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE),
    .init = repeat_init,
    .get_opts = repeat_get_opts,
    .build = repeat_build,
    .workspace_bytes = repeat_ws_bytes,
    .forward = repeat_forward,
    .backward = repeat_backward,
    KC_KERAS_KEYS(k_repeat_keys),
};
