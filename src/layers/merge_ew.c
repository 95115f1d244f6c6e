/* merge_ew.c — the elementwise merges with Keras's broadcasting: Add (add.c), Subtract,
 * Multiply, Average, Maximum, Minimum share this code.
 *
 * Keras's rule (keras/src/layers/merging/base_merge.py): the per-example shapes are
 * aligned at their last axis (a lower-rank input is expanded after the batch axis), and
 * on each axis the sizes must be equal or one of them 1; the output takes the larger.
 * Squeeze-and-excite's (N, 1, 1, C) x (N, H, W, C) is the case that matters. The
 * backend's broadcasting kernels read the smaller input in place; the gradient of an
 * input is summed over the axes it was broadcast along. */
#include "layer.h"

/* Output shape and each input's strides in the output's index space (batch axis first). */
kc_status kc__merge_build(kc_layer *l, kc__merge_cfg *c) {
    char b1[96], b2[96];
    const char *L = kc__layer_label(l);
    l->n_weights = 0;
    if (l->n_in < 2 || l->n_in > KC_MAX_INPUTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: needs 2 to %d inputs, got %d", L, KC_MAX_INPUTS, l->n_in);
    kc_shape out = l->in_shape[0];
    for (int i = 1; i < l->n_in; i++) {
        const kc_shape *s = &l->in_shape[i];
        kc_shape o = out.rank >= s->rank ? out : *s;
        const kc_shape *lo = out.rank >= s->rank ? s : &out;
        for (int k = 0; k < lo->rank; k++) {
            int *d = &o.dim[o.rank - lo->rank + k];
            const int e = lo->dim[k];
            if (*d == e || e == 1) continue;
            if (*d == 1) {
                *d = e;
                continue;
            }
            return kc__fail(KC_STATUS_SHAPE,
                            "%s: input %d has shape %s, which does not broadcast with %s (inputs 0..%d); on each axis, "
                            "counted from the last, the sizes must be equal or one of them 1, as Keras requires",
                            L, i, kc__shape_str(s, true, b1, sizeof b1), kc__shape_str(&out, true, b2, sizeof b2),
                            i - 1);
        }
        out = o;
    }
    l->out_shape = out;
    c->size = kc__shape_size(&out);
    c->rank = out.rank + 1;
    c->dims[0] = 0; /* the batch, set per call */
    for (int k = 0; k < out.rank; k++) c->dims[k + 1] = out.dim[k];
    for (int i = 0; i < l->n_in; i++) {
        const kc_shape *s = &l->in_shape[i];
        int64_t stride = 1;
        c->same[i] = kc__shape_eq(s, &out);
        for (int k = out.rank - 1; k >= 0; k--) {
            const int j = k - (out.rank - s->rank); /* the input's own axis, < 0: expanded */
            const int d = j >= 0 ? s->dim[j] : 1;
            c->strides[i][k + 1] = (d == 1 && out.dim[k] != 1) ? 0 : stride;
            stride *= d;
        }
        c->strides[i][0] = stride; /* per example */
    }
    int64_t stride = 1;
    for (int k = c->rank - 1; k >= 1; k--) c->full[k] = stride, stride *= c->dims[k];
    c->full[0] = c->size;
    return KC_STATUS_OK;
}

/* The descriptor of a op b for a batch; ia / ib: input indices, -1: the full output. */
static kc_bcast_desc desc_of(const kc__merge_cfg *c, int batch, int ia, int ib) {
    kc_bcast_desc d = {.rank = c->rank};
    for (int k = 0; k < c->rank; k++) {
        d.dims[k] = k == 0 ? batch : c->dims[k];
        d.sa[k] = ia < 0 ? c->full[k] : c->strides[ia][k];
        d.sb[k] = ib < 0 ? c->full[k] : c->strides[ib][k];
    }
    return d;
}

kc_status kc__merge_forward(kc_layer *l, const kc__merge_cfg *c, const kc_fwd *a) {
    const int64_t n = (int64_t)a->batch * c->size;
    const kc_binop op = c->op;
    bool same = true;
    for (int i = 0; i < l->n_in; i++) same = same && c->same[i];
    if (same && op == KC_BIN_ADD) { /* the plain sum (Add and Average of identical shapes) */
        KC_TRY(a->be->add(a->be, a->y, a->x[0], a->x[1], n));
        for (int i = 2; i < l->n_in; i++) KC_TRY(a->be->axpy(a->be, a->y, a->x[i], 1.0f, n));
    } else {
        kc_bcast_desc d = desc_of(c, a->batch, 0, 1);
        KC_TRY(a->be->binary_forward(a->be, op, &d, a->x[0], a->x[1], a->y));
        for (int i = 2; i < l->n_in; i++) {
            d = desc_of(c, a->batch, -1, i);
            KC_TRY(a->be->binary_forward(a->be, op, &d, a->y, a->x[i], a->y));
        }
    }
    if (c->average) KC_TRY(a->be->scale(a->be, a->y, 1.0f / (float)l->n_in, n));
    return KC_STATUS_OK;
}

/* Multiply of 3 or more: the product of every input but `skip`, in full, into p. */
static kc_status product_of_others(kc_layer *l, const kc__merge_cfg *c, const kc_bwd *a, int skip, float *p) {
    int o[KC_MAX_INPUTS], m = 0;
    for (int i = 0; i < l->n_in; i++)
        if (i != skip) o[m++] = i;
    kc_bcast_desc d = desc_of(c, a->batch, o[0], o[1]);
    KC_TRY(a->be->binary_forward(a->be, KC_BIN_MUL, &d, a->x[o[0]], a->x[o[1]], p));
    for (int k = 2; k < m; k++) {
        d = desc_of(c, a->batch, -1, o[k]);
        KC_TRY(a->be->binary_forward(a->be, KC_BIN_MUL, &d, p, a->x[o[k]], p));
    }
    return KC_STATUS_OK;
}

kc_status kc__merge_backward(kc_layer *l, const kc__merge_cfg *c, const kc_bwd *a) {
    const kc_binop op = c->op;
    for (int i = 0; i < l->n_in; i++) {
        if (!a->dx[i]) continue;
        if (a->dx[i] == a->dy && !(c->same[i] && op == KC_BIN_ADD && !c->average))
            return kc__fail(KC_STATUS_INTERNAL, "%s: input %d's gradient shares the output gradient's memory",
                            kc__layer_label(l), i);
        const int64_t ni = (int64_t)a->batch * c->strides[i][0];
        if (op == KC_BIN_ADD && c->same[i]) {
            if (a->dx[i] != a->dy) KC_TRY(a->be->copy(a->be, a->dx[i], a->dy, (size_t)ni * sizeof(float)));
        } else if (op == KC_BIN_ADD) {
            kc_bcast_desc d = desc_of(c, a->batch, i, -1);
            KC_TRY(a->be->binary_backward(a->be, KC_BIN_ADD, &d, NULL, NULL, a->dy, a->dx[i], NULL));
        } else if (op == KC_BIN_SUB || op == KC_BIN_DIV) { /* exactly two inputs */
            kc_bcast_desc d = desc_of(c, a->batch, 0, 1);
            KC_TRY(a->be->binary_backward(a->be, op, &d, a->x[0], a->x[1], a->dy, i == 0 ? a->dx[0] : NULL,
                                          i == 1 ? a->dx[1] : NULL));
        } else if (op == KC_BIN_MUL && l->n_in == 2) {
            kc_bcast_desc d = desc_of(c, a->batch, i, 1 - i);
            KC_TRY(a->be->binary_backward(a->be, KC_BIN_MUL, &d, a->x[i], a->x[1 - i], a->dy, a->dx[i], NULL));
        } else if (op == KC_BIN_MUL) {
            KC_TRY(product_of_others(l, c, a, i, a->ws));
            kc_bcast_desc d = desc_of(c, a->batch, i, -1);
            KC_TRY(a->be->binary_backward(a->be, KC_BIN_MUL, &d, a->x[i], a->ws, a->dy, a->dx[i], NULL));
        } else { /* MAX / MIN: to the inputs equal to the output (every one of them on a tie) */
            kc_bcast_desc d = desc_of(c, a->batch, i, -1);
            KC_TRY(a->be->binary_backward(a->be, op, &d, a->x[i], a->y, a->dy, a->dx[i], NULL));
        }
        if (c->average) KC_TRY(a->be->scale(a->be, a->dx[i], 1.0f / (float)l->n_in, ni));
    }
    return KC_STATUS_OK;
}

size_t kc__merge_workspace(const kc_layer *l, const kc__merge_cfg *c, int batch) {
    if (c->op != KC_BIN_MUL || l->n_in <= 2) return 0;
    return (size_t)batch * (size_t)c->size * sizeof(float);
}

/* ---- the kinds besides Add: cfg is a kc__merge_cfg, op set by init */

static kc_status ew_init(kc_layer *l, kc_binop op, bool average) {
    kc__merge_cfg *c = l->cfg;
    c->op = op, c->average = average;
    return KC_STATUS_OK;
}
static kc_status multiply_init(kc_layer *l, const void *o) { return ew_init(l, KC_BIN_MUL, false); }
static kc_status subtract_init(kc_layer *l, const void *o) { return ew_init(l, KC_BIN_SUB, false); }
static kc_status average_init(kc_layer *l, const void *o) { return ew_init(l, KC_BIN_ADD, true); }
static kc_status maximum_init(kc_layer *l, const void *o) { return ew_init(l, KC_BIN_MAX, false); }
static kc_status minimum_init(kc_layer *l, const void *o) { return ew_init(l, KC_BIN_MIN, false); }

static void ew_get_opts(const kc_layer *l, void *opts) { *(kc_merge_opts *)opts = (kc_merge_opts){.name = l->name}; }
static kc_status ew_build(kc_layer *l) {
    kc__merge_cfg *c = l->cfg;
    if (c->op == KC_BIN_SUB && l->n_in != 2)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: Subtract takes exactly 2 inputs, got %d", kc__layer_label(l),
                        l->n_in);
    return kc__merge_build(l, c);
}
static kc_status ew_forward(kc_layer *l, const kc_fwd *a) { return kc__merge_forward(l, l->cfg, a); }
static kc_status ew_backward(kc_layer *l, const kc_bwd *a) { return kc__merge_backward(l, l->cfg, a); }
static size_t ew_workspace(const kc_layer *l, int batch, kc_backend *be) {
    return kc__merge_workspace(l, l->cfg, batch);
}
static int64_t ew_flops(const kc_layer *l) {
    const kc__merge_cfg *c = l->cfg;
    return c->size * (l->n_in - 1 + (c->average ? 1 : 0));
}

#define KC_EW_MERGE(id, cls, snake, max_in)                                                                       \
    const kc_layer_ops kc__##id##_ops = {                                                                         \
        .class_name = cls,                                                                                        \
        .snake_name = snake,                                                                                      \
        .cfg_size = sizeof(kc__merge_cfg),                                                                        \
        .opts_size = sizeof(kc_merge_opts),                                                                       \
        .min_inputs = 2,                                                                                          \
        .max_inputs = max_in,                                                                                     \
        .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE) | KC_OP_BIT(KC_OP_BROADCAST),                                 \
        .init = id##_init,                                                                                        \
        .get_opts = ew_get_opts,                                                                                  \
        .build = ew_build,                                                                                        \
        .workspace_bytes = ew_workspace,                                                                          \
        .forward = ew_forward,                                                                                    \
        .backward = ew_backward,                                                                                  \
        .flops = ew_flops,                                                                                        \
    };
KC_EW_MERGE(multiply, "Multiply", "multiply", KC_MAX_INPUTS)
KC_EW_MERGE(subtract, "Subtract", "subtract", 2)
KC_EW_MERGE(average, "Average", "average", KC_MAX_INPUTS)
KC_EW_MERGE(maximum, "Maximum", "maximum", KC_MAX_INPUTS)
KC_EW_MERGE(minimum, "Minimum", "minimum", KC_MAX_INPUTS)
