/* targets.c — a dataset's labels as the compiled loss's targets, and whether they fit.
 *
 * The output (batch, ..., K) is seen as rows = batch * P positions of K values (P = output
 * size / K: 1 for a Dense head, H * W for a per-pixel head). Every loss runs on those rows
 * (kc_loss_desc n = batch * P, c = K) and the per-example loss is their mean, which is
 * Keras's value: sparse/categorical cross-entropy per position then the mean over all of
 * them; binary cross-entropy, MSE and MAE the mean over the last axis then over the rest
 * (equal to the mean over everything). The accuracy is counted per row the same way
 * (binary at 0.5 when K == 1, else argmax against the index or the target's argmax), so
 * fit and evaluate divide the loss and metric sums by P.
 *
 * Targets per example: sparse_categorical_crossentropy takes P class indices; the other
 * losses the output's values (batch, P * K). Class-index datasets (one int per example)
 * become one-hot rows or the index itself (a single output); label tensors are copied as
 * they are, once their shape has been checked against the output here. */
#include <stdio.h>
#include <string.h>

#include "model.h"

static const kc_shape *out_shape(const kc_model *m) { return &m->layers[kc__model_output(m)]->out_shape; }

int kc__model_positions(const kc_model *m) {
    const kc_shape *o = out_shape(m);
    int64_t k = o->rank ? o->dim[o->rank - 1] : 1;
    return (int)(kc__shape_size(o) / (k > 0 ? k : 1));
}

int kc__model_target_width(const kc_model *m) {
    if (!m->compiled) return 1;
    if (m->loss == KC_LOSS_SPARSE_CCE) return kc__model_positions(m);
    return (int)kc__shape_size(out_shape(m));
}

/* Class labels -> the loss's targets: indices (sparse), one-hot rows, or the label
 * itself for a single output (binary / regression). */
void kc__labels_to_targets(const kc_model *m, const int32_t *labels, int n, float *t) {
    int w = kc__model_target_width(m);
    if (w == 1) {
        for (int i = 0; i < n; i++) t[i] = (float)labels[i];
        return;
    }
    memset(t, 0, (size_t)n * (size_t)w * sizeof(float));
    for (int i = 0; i < n; i++)
        if (labels[i] >= 0 && labels[i] < w) t[(size_t)i * w + labels[i]] = 1.0f;
}

/* "(N, 32, 32, 3)": a per-example shape with the batch axis in front. */
static const char *batch_str(const kc_shape *s, char *buf, size_t n) {
    size_t used = (size_t)snprintf(buf, n, "(N");
    for (int i = 0; i < s->rank && used < n; i++) used += (size_t)snprintf(buf + used, n - used, ", %d", s->dim[i]);
    if (used < n) snprintf(buf + used, n - used, ")");
    return buf;
}

/* Keras's squeeze_or_expand_to_same_rank: equal shapes, or one is the other plus a last axis of 1. */
static bool same_up_to_last_one(const kc_shape *a, const kc_shape *b) {
    if (kc__shape_eq(a, b)) return true;
    const kc_shape *lo = a->rank < b->rank ? a : b, *hi = a->rank < b->rank ? b : a;
    if (hi->rank != lo->rank + 1 || hi->dim[hi->rank - 1] != 1) return false;
    for (int i = 0; i < lo->rank; i++)
        if (lo->dim[i] != hi->dim[i]) return false;
    return true;
}

/* The output without its class axis: one class index per position ((K) -> (1)). */
static kc_shape positions_shape(const kc_shape *o) {
    kc_shape pos = *o;
    pos.rank--;
    if (pos.rank == 0) pos.dim[pos.rank++] = 1;
    return pos;
}

/* Labels that are one class index per example (kc_dataset_num_classes of them). */
static kc_status check_indices(kc_model *m, const kc_dataset *d, const char *what) {
    const kc_shape *o = out_shape(m);
    const char *loss = kc_loss_name(m->loss);
    int classes = kc_dataset_num_classes(d), outputs = (int)kc__shape_size(o), p = kc__model_positions(m);
    char ob[96];
    bool classify = m->loss == KC_LOSS_SPARSE_CCE || m->loss == KC_LOSS_CCE;
    if (classify && p > 1) {
        kc_shape pos = positions_shape(o);
        char pb[96];
        return kc__fail(KC_STATUS_SHAPE,
                        "%s labels are one class index per example (N,), but model '%s' outputs %s: %s there "
                        "needs a class index per position, integer labels of shape %s (a segmentation mask)",
                        what, m->name, batch_str(o, ob, sizeof ob), loss, batch_str(&pos, pb, sizeof pb));
    }
    if (classify && classes > outputs)
        return kc__fail(KC_STATUS_SHAPE,
                        "%s labels go up to %d but model '%s' has %d outputs; a label must be below the number of "
                        "classes (make the last Dense layer %d units)", what, classes - 1, m->name, outputs, classes);
    if (m->loss == KC_LOSS_BCE && outputs == 1 && classes > 2)
        return kc__fail(KC_STATUS_SHAPE, "%s labels go up to %d but binary_crossentropy with one output needs 0/1 labels",
                        what, classes - 1);
    return KC_STATUS_OK;
}

kc_status kc__check_labels(kc_model *m, const kc_dataset *d, const char *what) {
    kc_shape t = kc_dataset_target_shape(d);
    if (t.rank == 0) return check_indices(m, d, what);
    const kc_shape *o = out_shape(m);
    const char *loss = kc_loss_name(m->loss);
    char tb[96], ob[96];
    batch_str(&t, tb, sizeof tb);
    batch_str(o, ob, sizeof ob);
    if (m->loss == KC_LOSS_SPARSE_CCE) {
        kc_shape pos = positions_shape(o);
        if (!same_up_to_last_one(&t, &pos)) {
            char pb[96];
            return kc__fail(KC_STATUS_SHAPE,
                            "%s labels have shape %s but model '%s' outputs %s: %s needs one class index per "
                            "position, shape %s (a last axis of 1 may be added); for one-hot or probability "
                            "targets of the output's shape use categorical_crossentropy", what, tb, m->name, ob,
                            loss, batch_str(&pos, pb, sizeof pb));
        }
        int classes = kc_dataset_num_classes(d), k = o->dim[o->rank - 1];
        if (classes == 0)
            return kc__fail(KC_STATUS_SHAPE,
                            "%s labels hold values that are not class indices (negative or fractional); %s needs "
                            "integers 0..%d: for one-hot or probability targets use categorical_crossentropy, for "
                            "regression targets mean_squared_error", what, loss, k - 1);
        if (classes > k)
            return kc__fail(KC_STATUS_SHAPE,
                            "%s labels go up to %d but model '%s' outputs %d classes per position (%s); make the "
                            "last layer %d units (filters) or fix the labels", what, classes - 1, m->name, k, ob,
                            classes);
        return KC_STATUS_OK;
    }
    if (!same_up_to_last_one(&t, o)) {
        bool indices = kc_dataset_num_classes(d) > 0 && kc__shape_size(&t) == kc__model_positions(m);
        return kc__fail(KC_STATUS_SHAPE, "%s labels have shape %s but model '%s' outputs %s: %s needs targets of "
                        "the output's shape%s", what, tb, m->name, ob, loss,
                        indices ? "; these look like class indices: use sparse_categorical_crossentropy (--loss)"
                                : " (a last axis of 1 may be left out)");
    }
    return KC_STATUS_OK;
}
