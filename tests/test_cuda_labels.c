/* test_cuda_labels.c — label tensors on the GPU against the CPU: the Keras fixtures of
 * tests/fixtures/labels (binary heads, one-hot targets, per-pixel masks, per-pixel binary
 * masks, regression targets) evaluated and trained for two epochs (batches of 4 and a
 * short one of 2, no shuffling) from the same weights on both devices; then the loss and
 * accuracy entries on segmentation-sized rows (batch * H * W rows of a few classes), the
 * shape the model gives them for a per-pixel head.
 *
 * Without a usable GPU this prints "SKIP: no GPU: <reason>" and exits 77 (ctest SKIP).
 * Bounds: evaluate's loss 1e-5 relative, accuracy equal; losses after training 1e-4
 * relative; predictions after training 1e-4 relative to their largest value; the backend
 * entries' loss value 1e-5, gradient 1e-5 (relative L2), counts equal. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "cuda_test.h"

static kc_backend *G, *C;

static const char *const k_cases[] = {"binary_sigmoid", "binary_logits", "onehot_cce", "mask_sparse",
                                      "mask_sparse_logits", "mask_binary", "pixel_mse"};

static void case_path(char *buf, size_t n, const char *name, const char *file) {
    const char *src = getenv("KERAC_SOURCE_DIR");
    snprintf(buf, n, "%s/tests/fixtures/labels/%s/%s", src ? src : "..", name, file);
}

static double rel(double a, double b) { return fabs(a - b) / fmax(fabs(b), 1e-12); }

/* Evaluate, train two epochs, predict: one device. */
static void run_on(const char *name, const char *device, kc_dataset *d, double *ev, double *tr, float *pred) {
    char path[1024];
    case_path(path, sizeof path, name, "keras.json");
    json_t *meta = json_load_file(path, 0, NULL);
    assert_non_null(meta);
    case_path(path, sizeof path, name, "model.keras");
    kc_model *m = NULL;
    kc_device_opts dev = {.device = device};
    OK(kc_model_load_ex(path, &dev, &m));
    kc_compile_opts co = {.optimizer = KC_SGD(.learning_rate = 0.1),
                          .loss = json_string_value(json_object_get(meta, "loss_name")),
                          .from_logits = json_is_true(json_object_get(meta, "from_logits")) ? KC_TRUE : KC_DEFAULT,
                          .metrics = {"accuracy"}};
    OK(kc_compile(m, &co));
    kc_eval_result r;
    OK(kc_evaluate(m, d, 4, &r));
    ev[0] = r.loss, ev[1] = r.metrics[0];
    kc_fit_opts fo = {.epochs = 2, .batch_size = 4, .shuffle = KC_FALSE};
    kc_history *h = NULL;
    OK(kc_fit(m, d, &fo, &h));
    tr[0] = kc_history_epoch(h, 0)->loss, tr[1] = kc_history_epoch(h, 1)->loss;
    kc_history_destroy(h);
    kc_shape xs = kc_dataset_shape(d);
    int64_t in = 1, n = kc_dataset_size(d);
    for (int i = 0; i < xs.rank; i++) in *= xs.dim[i];
    float *x = malloc((size_t)(n * in) * sizeof(float));
    OK(kc_dataset_read(d, 0, n, x, NULL));
    OK(kc_predict(m, x, n, 4, pred));
    free(x);
    kc_model_destroy(m);
    json_decref(meta);
}

static void test_fixtures(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        char x[1024], y[1024], spec[2100];
        case_path(x, sizeof x, k_cases[i], "x.npy");
        case_path(y, sizeof y, k_cases[i], "after.npy"); /* only for the output's size */
        kc_dataset *d = NULL, *o = NULL;
        snprintf(spec, sizeof spec, "npy:%s,%s", x, y);
        OK(kc_dataset_open(spec, &o));
        case_path(y, sizeof y, k_cases[i], "y.npy");
        snprintf(spec, sizeof spec, "npy:%s,%s", x, y);
        OK(kc_dataset_open(spec, &d));
        kc_shape os = kc_dataset_target_shape(o);
        int64_t per = 1, n = kc_dataset_size(d);
        for (int j = 0; j < os.rank; j++) per *= os.dim[j];
        float *pc = calloc((size_t)(n * per), sizeof(float)), *pg = calloc((size_t)(n * per), sizeof(float));
        double evc[2], evg[2], trc[2], trg[2];
        run_on(k_cases[i], "cpu", d, evc, trc, pc);
        run_on(k_cases[i], "cuda", d, evg, trg, pg);
        double diff = 0, scale = 1e-12;
        for (int64_t j = 0; j < n * per; j++) {
            diff = fmax(diff, fabs((double)pg[j] - pc[j]));
            scale = fmax(scale, fabs((double)pc[j]));
        }
        printf("  %-20s evaluate loss %.3g accuracy %g/%g; epoch losses %.3g %.3g; predictions %.3g\n", k_cases[i],
               rel(evg[0], evc[0]), evg[1], evc[1], rel(trg[0], trc[0]), rel(trg[1], trc[1]), diff / scale);
        assert_true(rel(evg[0], evc[0]) <= 1e-5);
        assert_true(evg[1] == evc[1]);
        assert_true(rel(trg[0], trc[0]) <= 1e-4 && rel(trg[1], trc[1]) <= 1e-4);
        assert_true(diff <= 1e-4 * scale);
        free(pc), free(pg);
        kc_dataset_destroy(d);
        kc_dataset_destroy(o);
    }
}

/* ---- the backend entries on rows of a per-pixel head: (batch * H * W, classes) */

static float *to_dev(const float *h, int64_t n) {
    void *p = NULL;
    OK(G->alloc(G, (size_t)(n > 0 ? n : 1) * sizeof(float), &p));
    OK(G->to_device(G, p, h, (size_t)n * sizeof(float)));
    return p;
}

static uint32_t g_state = 12345u;
static float unif(float lo, float hi) {
    g_state = g_state * 1664525u + 1013904223u;
    return lo + (hi - lo) * (float)(g_state >> 8) / 16777216.0f;
}

static void rows_case(kc_loss_kind kind, int logits, int rows, int c) {
    int tw = kind == KC_LOSS_SPARSE_CCE ? 1 : c;
    float *pred = malloc((size_t)rows * c * sizeof(float)), *t = malloc((size_t)rows * tw * sizeof(float));
    float *dp = malloc((size_t)rows * c * sizeof(float)), *gdh = malloc((size_t)rows * c * sizeof(float));
    for (int64_t i = 0; i < (int64_t)rows * c; i++) {
        pred[i] = logits ? unif(-4, 4) : unif(0.01f, 0.99f);
        if (kind != KC_LOSS_SPARSE_CCE) t[i] = (float)(unif(0, 1) > 0.5f);
    }
    for (int i = 0; kind == KC_LOSS_SPARSE_CCE && i < rows; i++) t[i] = (float)((int)unif(0, (float)c) % c);
    kc_loss_desc d = {.kind = kind, .n = rows, .c = c, .from_logits = logits};
    float loss = 0, gloss = 0, cnt = 0, gcnt = 0;
    float *gp = to_dev(pred, (int64_t)rows * c), *gt = to_dev(t, (int64_t)rows * tw);
    float *gd = to_dev(dp, (int64_t)rows * c), *gl = to_dev(&loss, 1), *gc = to_dev(&cnt, 1);
    OK(C->loss_forward_backward(C, &d, pred, t, &loss, dp, rows));
    OK(G->loss_forward_backward(G, &d, gp, gt, gl, gd, rows));
    OK(C->count_correct(C, pred, t, rows, c, kind == KC_LOSS_SPARSE_CCE, 1, logits, &cnt));
    OK(G->count_correct(G, gp, gt, rows, c, kind == KC_LOSS_SPARSE_CCE, 1, logits, gc));
    OK(G->to_host(G, &gloss, gl, sizeof gloss));
    OK(G->to_host(G, &gcnt, gc, sizeof gcnt));
    OK(G->to_host(G, gdh, gd, (size_t)rows * c * sizeof(float)));
    double num = 0, den = 0;
    for (int64_t i = 0; i < (int64_t)rows * c; i++) {
        num += ((double)gdh[i] - dp[i]) * ((double)gdh[i] - dp[i]);
        den += (double)dp[i] * dp[i];
    }
    double ge = sqrt(num / fmax(den, 1e-30));
    printf("  %-36s rows %7d c %d: loss %.3g gradient %.3g count %g/%g\n", kc_loss_name(kind), rows, c,
           rel(gloss, loss), ge, (double)gcnt, (double)cnt);
    assert_true(rel(gloss, loss) <= 1e-5 && ge <= 1e-5 && gcnt == cnt);
    G->free(G, gp), G->free(G, gt), G->free(G, gd), G->free(G, gl), G->free(G, gc);
    free(pred), free(t), free(dp), free(gdh);
}

static void test_pixel_rows(void **state) {
    (void)state;
    for (int logits = 0; logits < 2; logits++) {
        rows_case(KC_LOSS_SPARSE_CCE, logits, 8 * 64 * 64, 3); /* U-Net masks */
        rows_case(KC_LOSS_BCE, logits, 8 * 64 * 64, 1);        /* binary masks */
        rows_case(KC_LOSS_BCE, logits, 1000, 1);               /* a binary head */
    }
    rows_case(KC_LOSS_MSE, 0, 8 * 32 * 32, 2);
}

int main(void) {
    int open_rc = cuda_test_open(&G, &C);
    if (open_rc) return open_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_pixel_rows),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    kc_backend_destroy(C);
    kc_backend_destroy(G);
    return rc;
}
