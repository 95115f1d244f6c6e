/* conv_check.h — helpers shared by the tests of the CPU backend's convolution kernels
 * (test_winograd.c, test_conv_blocked.c): random data, the relative error against a
 * double-precision reference, and the three passes of one backend on the same inputs.
 * Include after cmocka.h, kerac_backend.h and the C headers it needs (stdlib, math, string). */
#ifndef KC_TESTS_CONV_CHECK_H
#define KC_TESTS_CONV_CHECK_H

/* n values uniform in [-1, 1] from rand_r(seed) */
static float *rnd(size_t n, unsigned *seed) {
    float *p = malloc(n * sizeof(float));
    assert_non_null(p);
    for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX * 2.0f - 1.0f;
    return p;
}

/* max |a - ref| / max |ref| */
static double rel_err(const float *a, const double *ref, size_t n) {
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - ref[i]));
        m = fmax(m, fabs(ref[i]));
    }
    return e / m;
}

typedef struct passes {
    float *y, *dx, *dw, *db;
} passes;

/* forward (with b), backward-data and backward-filter (with db) on be, in a workspace of
 * the size conv2d_workspace asks */
/* the three passes with a workspace of ws_bytes */
static void run_passes_ws(kc_backend *be, const kc_conv2d_desc *d, size_t ws_bytes, const float *x, const float *w,
                          const float *b, const float *dy, passes *out) {
    const size_t kf = (size_t)d->kh * d->kw * d->c * d->f;
    void *ws = malloc(ws_bytes ? ws_bytes : 1);
    out->y = malloc((size_t)d->n * d->oh * d->ow * d->f * sizeof(float));
    out->dx = malloc((size_t)d->n * d->h * d->w * d->c * sizeof(float));
    out->dw = malloc(kf * sizeof(float));
    out->db = malloc((size_t)d->f * sizeof(float));
    assert_true(ws && out->y && out->dx && out->dw && out->db);
    assert_int_equal(be->conv2d_forward(be, d, x, w, b, out->y, ws, ws_bytes), KC_STATUS_OK);
    assert_int_equal(be->conv2d_backward_data(be, d, dy, w, out->dx, ws, ws_bytes), KC_STATUS_OK);
    assert_int_equal(be->conv2d_backward_filter(be, d, x, dy, out->dw, out->db, ws, ws_bytes), KC_STATUS_OK);
    free(ws);
}

/* the three passes with the workspace the backend asks for d */
static void run_passes(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w, const float *b,
                       const float *dy, passes *out) {
    run_passes_ws(be, d, be->conv2d_workspace(be, d), x, w, b, dy, out);
}

static void free_passes(passes *p) {
    free(p->y), free(p->dx), free(p->dw), free(p->db);
}

#endif /* KC_TESTS_CONV_CHECK_H */
