/* model_pair.h — two builds of one model that should compute the same numbers (a fusion on
 * and off: test_fuse_bn_relu.c, test_fold_pad.c): a training step of both, then inference,
 * compared. Include after cmocka.h and model/model.h. */
#ifndef KC_TEST_MODEL_PAIR_H
#define KC_TEST_MODEL_PAIR_H

#include <math.h>
#include <stdbool.h>
#include <string.h>

static inline float mp_rnd(unsigned *s) {
    *s = *s * 1664525u + 1013904223u;
    return (float)((*s >> 8) & 0xffffff) / 16777216.0f;
}

static inline double mp_max_abs_diff(const float *a, const float *b, int64_t n) {
    double m = 0.0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

/* The index of the layer named name (fails the test when there is none). */
static inline int mp_layer_index(const kc_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i]->name, name) == 0) return i;
    fail_msg("no layer %s", name);
    return -1;
}

/* Whether the named layers' gradients are one buffer in m's plan (both are alive where the
 * other's backward reads it, so the same offset means the same buffer). */
static inline bool mp_dy_shared(const kc_model *m, const char *layer, const char *other) {
    const size_t o = m->plan.dy_off[mp_layer_index(m, layer)];
    return o != KC_PLAN_NONE && o == m->plan.dy_off[mp_layer_index(m, other)];
}

/* The batch for a prepared model: n_in inputs in [lo, lo + span), targets i % 3. */
static inline void mp_feed(kc_model *m, float *t, int batch, int64_t n_in, float lo, float span) {
    float *x = kc__model_input_buffer(m);
    unsigned s = 3;
    for (int64_t i = 0; i < n_in; i++) x[i] = span * mp_rnd(&s) + lo;
    for (int i = 0; i < batch; i++) t[i] = (float)(i % 3);
    m->batch_targets = t;
}

static inline double mp_loss_of(kc_model *m, int batch, bool training) {
    m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
    assert_int_equal(kc__model_forward(m, batch, training, 42), KC_STATUS_OK);
    assert_int_equal(kc__model_accumulate_metrics(m, batch), KC_STATUS_OK);
    float s = 0;
    m->be->to_host(m->be, &s, m->dev_scalars + KC_SCALAR_LOSS, sizeof s);
    return (double)s / batch;
}

/* Every weight of a and b (the moving statistics a forward updated too) within tol (0: the
 * same floats). */
static inline void mp_weights_within(kc_model *a, kc_model *b, double tol) {
    for (int i = 0; i < kc_model_num_weights(a); i++) {
        kc_weight_info wi;
        assert_int_equal(kc_model_weight_info(a, i, &wi), KC_STATUS_OK);
        float *va = malloc(sizeof(float) * (size_t)wi.size), *vb = malloc(sizeof(float) * (size_t)wi.size);
        assert_int_equal(kc_model_get_weight(a, i, va, wi.size), KC_STATUS_OK);
        assert_int_equal(kc_model_get_weight(b, i, vb, wi.size), KC_STATUS_OK);
        const double d = mp_max_abs_diff(va, vb, wi.size);
        if (tol == 0.0 ? memcmp(va, vb, sizeof(float) * (size_t)wi.size) != 0 : !(d <= tol))
            fail_msg("weight %d (%s of %s) differs by %g", i, wi.name, wi.layer, d);
        free(va), free(vb);
    }
}

/* Both prepared for training and fed: the loss, every gradient (not applied), the weights (the
 * moving statistics the forward updated); exact: the same floats, else within rounding. */
static inline void mp_train_check(kc_model *a, kc_model *b, int batch, bool exact) {
    const double la = mp_loss_of(a, batch, true), lb = mp_loss_of(b, batch, true);
    assert_int_equal(kc__model_backward_update(a, batch, batch, false), KC_STATUS_OK);
    assert_int_equal(kc__model_backward_update(b, batch, batch, false), KC_STATUS_OK);
    if (exact ? la != lb : !(fabs(la - lb) <= 1e-6 * fabs(lb))) fail_msg("loss %.9g against %.9g", la, lb);
    assert_int_equal(a->n_trainable, b->n_trainable);
    double gmax = 1e-30;
    for (int64_t i = 0; i < b->n_trainable; i++) gmax = fmax(gmax, fabs(b->grads[i]));
    const double gd = mp_max_abs_diff(a->grads, b->grads, a->n_trainable);
    if (exact ? memcmp(a->grads, b->grads, sizeof(float) * (size_t)a->n_trainable) != 0 : gd > 1e-5 * gmax)
        fail_msg("gradients differ by %g (largest %g)", gd, gmax);
    mp_weights_within(a, b, exact ? 0.0 : 1e-6);
}

static inline void mp_train_compare(kc_model *a, kc_model *b, int batch) { mp_train_check(a, b, batch, false); }

/* Both prepared for training (the caller checks their plans in between), fed the same batch
 * (mp_feed), compared (mp_train_compare), then destroyed. */
static inline void mp_train_compare_destroy(kc_model *a, kc_model *b, int batch, int64_t n_in, float lo, float span) {
    float *ta = malloc(sizeof(float) * (size_t)batch), *tb = malloc(sizeof(float) * (size_t)batch);
    mp_feed(a, ta, batch, n_in, lo, span);
    mp_feed(b, tb, batch, n_in, lo, span);
    mp_train_compare(a, b, batch);
    a->batch_targets = b->batch_targets = NULL;
    kc_model_destroy(a);
    kc_model_destroy(b);
    free(ta), free(tb);
}

/* Both prepared for inference and fed: the loss and the n_out output floats. */
static inline void mp_infer_compare(kc_model *a, kc_model *b, int batch, int64_t n_out) {
    const double ia = mp_loss_of(a, batch, false), ib = mp_loss_of(b, batch, false);
    assert_true(fabs(ia - ib) <= 1e-6 * fabs(ib));
    assert_true(mp_max_abs_diff(kc__model_output_buffer(a), kc__model_output_buffer(b), n_out) <= 1e-6);
}

/* Both prepared for inference, fed the same batch (mp_feed), compared (mp_infer_compare), then
 * destroyed. */
static inline void mp_infer_compare_destroy(kc_model *a, kc_model *b, int batch, int64_t n_in, float lo, float span,
                                            int64_t n_out) {
    float *ta = malloc(sizeof(float) * (size_t)batch), *tb = malloc(sizeof(float) * (size_t)batch);
    mp_feed(a, ta, batch, n_in, lo, span);
    mp_feed(b, tb, batch, n_in, lo, span);
    mp_infer_compare(a, b, batch, n_out);
    a->batch_targets = b->batch_targets = NULL;
    kc_model_destroy(a);
    kc_model_destroy(b);
    free(ta), free(tb);
}

#endif /* KC_TEST_MODEL_PAIR_H */
