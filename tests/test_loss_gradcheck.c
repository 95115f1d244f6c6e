/* test_loss_gradcheck.c — central finite differences against the analytic gradients of
 * the CPU backend: every loss in both from_logits modes, every activation's backward
 * (with and without x where the kind allows it), and batch normalization.
 *
 * Method: perturb one float input by +-eps (eps = 1e-3; the step actually taken is the
 * difference of the two rounded floats), run the kernel's forward, accumulate the
 * objective in double, fd = (J+ - J-) / step. Inputs stay away from kinks (|x - kink| >
 * 0.02) and from the clipping range of the probability losses.
 *
 * Bound: |analytic - fd| <= 1e-2 * (max(|analytic|, |fd|) + floor), i.e. relative error
 * below 1e-2, with floor = 1e-2 for losses and activations (so gradients below 1e-2 are
 * held to 1e-4 absolute) and 5e-2 for batch norm (its objective mixes all rows of a
 * channel, so the float rounding noise of fd is larger: ~1e-4). Loss gradients are
 * compared per example (times grad_n), whose magnitudes are O(0.01..1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "kerac.h"
#include "kerac_backend.h"

#define FD_EPS 1e-3f
#define REL_TOL 1e-2

static kc_backend *g_be;
static double g_worst; /* largest relative error seen, reported at the end */

static uint64_t g_rs;
static double urand(void) {
    uint64_t z = (g_rs += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static double urange(double lo, double hi) { return lo + (hi - lo) * urand(); }

static void check_grad(const char *what, int idx, double analytic, double fd, double floor) {
    double scale = fmax(fabs(analytic), fabs(fd)) + floor;
    double rel = fabs(analytic - fd) / scale;
    if (rel > g_worst) g_worst = rel;
    if (!(rel <= REL_TOL)) {
        print_error("%s: element %d: analytic %.8g, finite difference %.8g (relative error %.3g > %.3g)\n", what, idx,
                    analytic, fd, rel, REL_TOL);
        fail();
    }
}

static int group_setup(void **state) {
    (void)state;
    return kc_backend_cpu_create(&g_be) == KC_STATUS_OK ? 0 : -1;
}
static int group_teardown(void **state) {
    (void)state;
    kc_backend_destroy(g_be);
    print_message("gradcheck: worst relative error %.3g (bound %.3g)\n", g_worst, REL_TOL);
    return 0;
}

/* ================================================================ losses */

enum { LN = 4, LC = 5 };

/* Loss of example i alone (n = 1). */
static double row_loss(const kc_loss_desc *d, const float *pred, const float *target, int i) {
    kc_loss_desc d1 = *d;
    d1.n = 1;
    const float *t = d->kind == KC_LOSS_SPARSE_CCE ? target + i : target + (size_t)i * d->c;
    float loss = 0;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d1, pred + (size_t)i * d->c, t, &loss, NULL, 1), KC_STATUS_OK);
    return (double)loss;
}

static void make_loss_inputs(kc_loss_kind kind, int logits, float *pred, float *target) {
    for (int i = 0; i < LN; i++) {
        float *p = pred + i * LC, *t = target + i * LC;
        switch (kind) {
        case KC_LOSS_SPARSE_CCE:
        case KC_LOSS_CCE:
            if (logits) {
                for (int j = 0; j < LC; j++) p[j] = (float)urange(-2, 2);
            } else { /* positive, not summing to 1 (tests the normalisation), far from the clip */
                double s = 0, e[LC];
                for (int j = 0; j < LC; j++) s += (e[j] = exp(urange(-1.5, 1.5)));
                for (int j = 0; j < LC; j++) p[j] = (float)(1.3 * e[j] / s);
            }
            if (kind == KC_LOSS_SPARSE_CCE) {
                target[i] = (float)(int)(urand() * LC);
            } else {
                double s = 0;
                for (int j = 0; j < LC; j++) s += (t[j] = (float)urange(0.05, 1));
                for (int j = 0; j < LC; j++) t[j] = (float)(t[j] / s);
            }
            break;
        case KC_LOSS_BCE:
            for (int j = 0; j < LC; j++) {
                p[j] = logits ? (float)urange(-3, 3) : (float)urange(0.05, 0.95);
                t[j] = (float)urand();
            }
            if (i == 0) t[0] = 1.0f, t[1] = 0.0f; /* hard labels too */
            break;
        case KC_LOSS_MSE:
        case KC_LOSS_MAE:
            for (int j = 0; j < LC; j++) {
                t[j] = (float)urange(-1, 1);
                do p[j] = (float)urange(-1, 1);
                while (fabs(p[j] - t[j]) < 0.02); /* MAE: away from the kink */
            }
            break;
        default: break;
        }
    }
}

static void run_loss_gradcheck(kc_loss_kind kind, int logits) {
    float pred[LN * LC], target[LN * LC], grad[LN * LC];
    make_loss_inputs(kind, logits, pred, target);
    kc_loss_desc d = {kind, LN, LC, logits};
    float loss = 0;
    assert_int_equal(g_be->loss_forward_backward(g_be, &d, pred, target, &loss, grad, LN), KC_STATUS_OK);
    char what[64];
    snprintf(what, sizeof what, "loss %d from_logits %d", (int)kind, logits);
    /* the batch sum is the sum of the per-example losses */
    double sum = 0;
    for (int i = 0; i < LN; i++) sum += row_loss(&d, pred, target, i);
    assert_true(fabs(loss - sum) <= 1e-5 * fabs(sum) + 1e-7);
    assert_true(loss > 0);
    for (int i = 0; i < LN; i++)
        for (int j = 0; j < LC; j++) {
            const int k = i * LC + j;
            const float orig = pred[k];
            pred[k] = orig + FD_EPS;
            const float up = pred[k];
            const double jp = row_loss(&d, pred, target, i);
            pred[k] = orig - FD_EPS;
            const float dn = pred[k];
            const double jm = row_loss(&d, pred, target, i);
            pred[k] = orig;
            const double fd = (jp - jm) / ((double)up - (double)dn);
            check_grad(what, k, (double)grad[k] * LN, fd, 1e-2); /* grad is of the mean over LN */
        }
}

static void test_loss_gradients(void **state) {
    (void)state;
    g_rs = 21;
    for (int kind = 0; kind < KC_LOSS_COUNT; kind++)
        for (int logits = 0; logits < 2; logits++) run_loss_gradcheck((kc_loss_kind)kind, logits);
}

/* ================================================================ activations */

enum { AR = 3, AC = 6, AN = AR * AC };

static double act_objective(kc_act_params a, const float *x, const double *w) {
    float y[AN];
    assert_int_equal(g_be->act_forward(g_be, a, x, y, AN, AC), KC_STATUS_OK);
    double j = 0;
    for (int i = 0; i < AN; i++) j += w[i] * (double)y[i];
    return j;
}

static void run_act_gradcheck(kc_act_params a, int x_needed) {
    float x[AN], y[AN], dy[AN], dx[AN], dx2[AN];
    double w[AN];
    for (int i = 0; i < AN; i++) {
        double v;
        do v = urange(-2.5, 2.5);
        while (fabs(v) < 0.02 || fabs(v - a.gamma) < 0.02 || (a.beta > 0 && fabs(v - a.beta) < 0.02));
        x[i] = (float)v;
        w[i] = urange(-1, 1);
        dy[i] = (float)w[i];
    }
    assert_int_equal(g_be->act_forward(g_be, a, x, y, AN, AC), KC_STATUS_OK);
    assert_int_equal(g_be->act_backward(g_be, a, x, y, dy, dx, AN, AC), KC_STATUS_OK);
    if (!x_needed) { /* from y alone: the same gradient */
        assert_int_equal(g_be->act_backward(g_be, a, NULL, y, dy, dx2, AN, AC), KC_STATUS_OK);
        for (int i = 0; i < AN; i++) assert_true(fabsf(dx2[i] - dx[i]) <= 1e-5f * fabsf(dx[i]) + 1e-6f);
    }
    char what[64];
    snprintf(what, sizeof what, "activation %d (%g, %g, %g)", (int)a.kind, (double)a.alpha, (double)a.beta,
             (double)a.gamma);
    for (int i = 0; i < AN; i++) {
        const float orig = x[i];
        x[i] = orig + FD_EPS;
        const float up = x[i];
        const double jp = act_objective(a, x, w);
        x[i] = orig - FD_EPS;
        const float dn = x[i];
        const double jm = act_objective(a, x, w);
        x[i] = orig;
        check_grad(what, i, dx[i], (jp - jm) / ((double)up - (double)dn), 1e-2);
    }
}

static void test_activation_gradients(void **state) {
    (void)state;
    g_rs = 22;
    const struct {
        kc_act_params a;
        int x_needed;
    } cases[] = {
        {{KC_ACT_LINEAR, 0, 0, 0}, 0},
        {{KC_ACT_RELU, 0, 0, 0}, 0},
        {{KC_ACT_SIGMOID, 0, 0, 0}, 0},
        {{KC_ACT_TANH, 0, 0, 0}, 0},
        {{KC_ACT_SOFTMAX, 0, 0, 0}, 0},
        {{KC_ACT_ELU, 1.0f, 0, 0}, 0},
        {{KC_ACT_ELU, 0.3f, 0, 0}, 0},
        {{KC_ACT_GELU, 0, 0, 0}, 1},
        {{KC_ACT_LEAKY_RELU, 0.3f, 0, 0}, 0},
        {{KC_ACT_SILU, 0, 0, 0}, 1},
        {{KC_ACT_RELU_GENERAL, 0, 0, 0}, 0},
        {{KC_ACT_RELU_GENERAL, 0.1f, 1.5f, 0.4f}, 0},
        {{KC_ACT_RELU_GENERAL, 0.2f, 0, -0.6f}, 1},
    };
    for (size_t i = 0; i < KC_ARRAY_LEN(cases); i++) run_act_gradcheck(cases[i].a, cases[i].x_needed);
}

/* ================================================================ batch norm */

enum { BR = 6, BC = 3, BN_ = BR * BC };

typedef struct bn_in {
    float x[BN_], gamma[BC], beta[BC];
    double w[BN_];
} bn_in;

static double bn_objective(const bn_in *in) {
    float y[BN_], mm[BC] = {0}, mv[BC] = {1, 1, 1}, sm[BC], si[BC];
    assert_int_equal(g_be->batchnorm_forward_train(g_be, in->x, y, BR, BC, in->gamma, in->beta, mm, mv, 0.99f, 1e-3f,
                                                   sm, si),
                     KC_STATUS_OK);
    double j = 0;
    for (int i = 0; i < BN_; i++) j += in->w[i] * (double)y[i];
    return j;
}

/* d objective / d *p by central differences */
static double bn_fd(bn_in *in, float *p) {
    const float orig = *p;
    *p = orig + FD_EPS;
    const float up = *p;
    const double jp = bn_objective(in);
    *p = orig - FD_EPS;
    const float dn = *p;
    const double jm = bn_objective(in);
    *p = orig;
    return (jp - jm) / ((double)up - (double)dn);
}

static void test_batchnorm_gradients(void **state) {
    (void)state;
    g_rs = 23;
    bn_in in;
    for (int i = 0; i < BN_; i++) in.x[i] = (float)urange(-2, 2), in.w[i] = urange(-1, 1);
    for (int j = 0; j < BC; j++) in.gamma[j] = (float)urange(0.5, 1.5), in.beta[j] = (float)urange(-1, 1);
    float y[BN_], dy[BN_], dx[BN_], mm[BC] = {0}, mv[BC] = {1, 1, 1}, sm[BC], si[BC], dg[BC], db[BC];
    for (int i = 0; i < BN_; i++) dy[i] = (float)in.w[i];
    assert_int_equal(g_be->batchnorm_forward_train(g_be, in.x, y, BR, BC, in.gamma, in.beta, mm, mv, 0.99f, 1e-3f, sm,
                                                   si),
                     KC_STATUS_OK);
    assert_int_equal(g_be->batchnorm_backward(g_be, in.x, dy, dx, BR, BC, in.gamma, sm, si, dg, db), KC_STATUS_OK);
    for (int i = 0; i < BN_; i++) check_grad("batchnorm dx", i, dx[i], bn_fd(&in, &in.x[i]), 5e-2);
    for (int j = 0; j < BC; j++) {
        check_grad("batchnorm dgamma", j, dg[j], bn_fd(&in, &in.gamma[j]), 5e-2);
        check_grad("batchnorm dbeta", j, db[j], bn_fd(&in, &in.beta[j]), 5e-2);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loss_gradients),
        cmocka_unit_test(test_activation_gradients),
        cmocka_unit_test(test_batchnorm_gradients),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
