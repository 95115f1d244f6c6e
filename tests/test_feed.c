/* The input feed (src/model/feed.h; kerac_backend.h, "the input feed") against a backend
 * that takes the protocol at its word: a "lagging" wrapper around the CPU backend whose
 * uploads happen as late as the protocol allows (when the slot is acquired or waited on),
 * whose device destinations hold NaN from the moment an upload is asked until it lands
 * and again from the slot's release on (when the next upload may overwrite them), and
 * which records every breach of the protocol (an upload into a slot still in use, a
 * source that is not host_alloc'd memory). A GPU's copy stream can land a copy at any time
 * in that window; the CPU backend lands it at the earliest, this wrapper at the latest. So
 * training, evaluation and prediction through it must give the CPU's results bit for bit:
 * reading a batch before it is acquired, reusing host memory before a copy has read it,
 * or reading a slot after releasing it would all change them.
 *
 * The last two tests show that the wrapper does catch such mistakes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "model/feed.h"
#include "model/model.h"

/* ---- the lagging backend */

typedef struct lag_copy {
    void *dst;
    const void *src;
    size_t bytes;
} lag_copy;

static struct lag {
    kc_backend *inner;
    lag_copy pending[KC_FEED_SLOTS][8];
    int n_pending[KC_FEED_SLOTS];
    lag_copy landed[KC_FEED_SLOTS][8]; /* the slot's device regions, poisoned again on release */
    int n_landed[KC_FEED_SLOTS];
    int in_use[KC_FEED_SLOTS]; /* acquired and not yet released */
    void *host[16];
    size_t host_bytes[16];
    int uploads, acquires, releases, waits, late_copies;
    int host_waits; /* to_host and sync: the calls where a device would make the host wait */
    int violations;
    char violation[256];
} L;

static void violate(const char *fmt, ...) {
    if (L.violations++ == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(L.violation, sizeof L.violation, fmt, ap);
        va_end(ap);
    }
}

static void land(int slot) {
    for (int i = 0; i < L.n_pending[slot]; i++) {
        memcpy(L.pending[slot][i].dst, L.pending[slot][i].src, L.pending[slot][i].bytes);
        L.late_copies++;
        if (L.n_landed[slot] < 8) L.landed[slot][L.n_landed[slot]++] = L.pending[slot][i];
    }
    L.n_pending[slot] = 0;
}

static bool is_host_block(const void *p, size_t bytes) {
    for (int i = 0; i < 16; i++)
        if (L.host[i] && (const char *)p >= (char *)L.host[i] &&
            (const char *)p + bytes <= (char *)L.host[i] + L.host_bytes[i])
            return true;
    return false;
}

static kc_status lag_host_alloc(kc_backend *be, size_t bytes, void **out) {
    kc_status s = L.inner->host_alloc(L.inner, bytes, out);
    if (s != KC_STATUS_OK) return s;
    for (int i = 0; i < 16; i++)
        if (!L.host[i]) {
            L.host[i] = *out;
            L.host_bytes[i] = bytes;
            return KC_STATUS_OK;
        }
    violate("more than 16 host blocks");
    return KC_STATUS_OK;
}

static void lag_host_free(kc_backend *be, void *p) {
    for (int i = 0; i < 16; i++)
        if (p && L.host[i] == p) L.host[i] = NULL;
    L.inner->host_free(L.inner, p);
}

static kc_status lag_upload(kc_backend *be, int slot, void *dst, const void *src, size_t bytes) {
    L.uploads++;
    if (L.in_use[slot]) violate("upload into slot %d while it is in use (acquired, not released)", slot);
    if (!is_host_block(src, bytes)) violate("upload from memory that host_alloc did not give");
    if (L.n_pending[slot] == 8) land(slot);
    memset(dst, 0xff, bytes); /* NaN until the copy lands */
    L.pending[slot][L.n_pending[slot]++] = (lag_copy){dst, src, bytes};
    return KC_STATUS_OK;
}

static kc_status lag_acquire(kc_backend *be, int slot) {
    L.acquires++;
    land(slot);
    L.in_use[slot] = 1;
    return KC_STATUS_OK;
}

/* After a release the next upload may overwrite the slot at any moment: NaN from now on. */
static kc_status lag_release(kc_backend *be, int slot) {
    L.releases++;
    L.in_use[slot] = 0;
    land(slot);
    for (int i = 0; i < L.n_landed[slot]; i++) memset(L.landed[slot][i].dst, 0xff, L.landed[slot][i].bytes);
    L.n_landed[slot] = 0;
    return KC_STATUS_OK;
}

static kc_status lag_wait(kc_backend *be, int slot) {
    L.waits++;
    land(slot);
    return KC_STATUS_OK;
}

static kc_status lag_to_host(kc_backend *be, void *dst, const void *src, size_t bytes) {
    L.host_waits++;
    return L.inner->to_host(be, dst, src, bytes);
}

static kc_status lag_sync(kc_backend *be) {
    L.host_waits++;
    return L.inner->sync(be);
}

static void lag_destroy(kc_backend *be) {
    L.inner->destroy(L.inner);
    free(be);
}

/* The CPU backend's table with the feed replaced (the CPU's own entries keep its ctx). */
static kc_backend *lag_backend(void) {
    memset(&L, 0, sizeof L);
    assert_int_equal(kc_backend_cpu_create(&L.inner), KC_STATUS_OK);
    kc_backend *be = malloc(sizeof *be);
    *be = *L.inner;
    be->name = "lag";
    be->destroy = lag_destroy;
    be->host_alloc = lag_host_alloc;
    be->host_free = lag_host_free;
    be->feed_upload = lag_upload;
    be->feed_acquire = lag_acquire;
    be->feed_release = lag_release;
    be->feed_wait = lag_wait;
    be->to_host = lag_to_host;
    be->sync = lag_sync;
    return be;
}

/* ---- models and data */

static kc_model *small_cnn(bool lag) {
    kc_model *m = NULL;
    kc_sequential("feed_cnn", &m);
    if (lag) m->be = lag_backend();
    kc_add(m, KC_INPUT(.shape = {12, 12, 1}));
    kc_add(m, KC_CONV2D(.filters = 6, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_BATCHNORM());
    kc_add(m, KC_MAXPOOL2D());
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.25));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 4, .activation = "softmax")), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(), .metrics = {"accuracy"}}), KC_STATUS_OK);
    return m;
}

static kc_dataset *images(int n, uint64_t seed) {
    float *x = malloc((size_t)n * 144 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        y[i] = (int32_t)(i * 7 % 4);
        for (int j = 0; j < 144; j++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            float noise = (float)((seed >> 40) & 0xffff) / 65536.0f;
            x[i * 144 + j] = 0.5f * noise + (j % 4 == y[i] ? 0.5f : 0.0f); /* learnable */
        }
    }
    kc_dataset *d = NULL;
    assert_int_equal(kc_dataset_from_memory(x, y, n, (kc_shape){3, {12, 12, 1}}, 4, &d), KC_STATUS_OK);
    free(x);
    free(y);
    return d;
}

#define MAXW 4096

static int64_t weights_of(kc_model *m, float *dst) {
    int64_t at = 0;
    for (int i = 0; i < kc_model_num_weights(m); i++) {
        kc_weight_info wi;
        kc_model_weight_info(m, i, &wi);
        assert_true(at + wi.size <= MAXW);
        assert_int_equal(kc_model_get_weight(m, i, dst + at, wi.size), KC_STATUS_OK);
        at += wi.size;
    }
    return at;
}

typedef struct run_result {
    float w[MAXW];
    int64_t nw;
    double loss[3], acc[3], val_loss[3];
    kc_eval_result ev;
    float pred[67 * 4];
} run_result;

/* fit (3 epochs, validation data, a short last batch), evaluate, predict */
static void run(bool lag, int grad_accum, run_result *r) {
    kc_dataset *tr = images(200, 1), *va = images(50, 2);
    kc_model *m = small_cnn(lag);
    kc_history *h = NULL;
    kc_fit_opts o = {.epochs = 3, .batch_size = 32, .grad_accum = grad_accum, .validation_data = va, .seed = 5};
    assert_int_equal(kc_fit(m, tr, &o, &h), KC_STATUS_OK);
    for (int e = 0; e < 3; e++) {
        const kc_epoch_logs *el = kc_history_epoch(h, e);
        r->loss[e] = el->loss;
        r->acc[e] = el->metrics[0];
        r->val_loss[e] = el->val_loss;
    }
    kc_history_destroy(h);
    assert_int_equal(kc_evaluate(m, va, 16, &r->ev), KC_STATUS_OK);
    float x[67 * 144];
    for (int i = 0; i < 67 * 144; i++) x[i] = (float)((i * 37) % 101) / 101.0f;
    assert_int_equal(kc_predict(m, x, 67, 20, r->pred), KC_STATUS_OK);
    r->nw = weights_of(m, r->w);
    if (lag) {
        printf("# lagging feed (grad_accum %d): %d uploads, %d landed late, %d acquires, %d releases, %d waits\n",
               grad_accum, L.uploads, L.late_copies, L.acquires, L.releases, L.waits);
        if (L.violations) fail_msg("%d protocol violations; the first: %s", L.violations, L.violation);
        assert_true(L.late_copies > 0 && L.acquires > 0 && L.acquires >= L.releases);
    }
    kc_model_destroy(m);
    kc_dataset_destroy(tr);
    kc_dataset_destroy(va);
}

static void compare(int grad_accum) {
    static run_result a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run(false, grad_accum, &a);
    run(true, grad_accum, &b);
    assert_int_equal(a.nw, b.nw);
    assert_memory_equal(a.w, b.w, (size_t)a.nw * sizeof(float));
    for (int e = 0; e < 3; e++) {
        assert_true(isfinite(a.loss[e]));
        assert_true(a.loss[e] == b.loss[e] && a.acc[e] == b.acc[e] && a.val_loss[e] == b.val_loss[e]);
    }
    assert_true(a.loss[2] < a.loss[0]); /* it learned something */
    assert_true(a.ev.loss == b.ev.loss && a.ev.metrics[0] == b.ev.metrics[0] && a.ev.samples == 50);
    assert_memory_equal(a.pred, b.pred, sizeof a.pred);
}

static void test_lagging_feed_same_results(void **state) { compare(1); }

/* micro-batches are row ranges of the staged batch */
static void test_lagging_feed_grad_accum(void **state) { compare(3); }

/* out-of-memory recovery retries a step on the batch already staged */
static void test_lagging_feed_oom_recovery(void **state) {
    float w[2][MAXW];
    int64_t nw[2];
    for (int lag = 0; lag < 2; lag++) {
        kc_dataset *tr = images(128, 3);
        kc_model *m = small_cnn(lag);
        kc_memory_plan p16, p64;
        assert_int_equal(kc_model_plan_memory(m, 16, 1, 4, &p16), KC_STATUS_OK);
        assert_int_equal(kc_model_plan_memory(m, 64, 1, 1, &p64), KC_STATUS_OK);
        assert_true(p16.device_total < p64.device_total);
        kc_model_set_memory_limit(m, p16.device_total + 256); /* 64 does not fit, 16 x 4 does */
        assert_int_equal(kc_fit(m, tr, &(kc_fit_opts){.epochs = 1, .batch_size = 64, .seed = 9}, NULL), KC_STATUS_OK);
        if (lag && L.violations) fail_msg("%d protocol violations; the first: %s", L.violations, L.violation);
        nw[lag] = weights_of(m, w[lag]);
        kc_model_destroy(m);
        kc_dataset_destroy(tr);
    }
    assert_int_equal(nw[0], nw[1]);
    assert_memory_equal(w[0], w[1], (size_t)nw[0] * sizeof(float));
}

/* One wait for the device per training step (for the loss and metrics), none per layer,
 * micro-batch or clipping. */
static void test_one_wait_per_step(void **state) {
    const char *clips[] = {"none", "clipnorm", "global_clipnorm"};
    for (int clip = 0; clip < 3; clip++) {
        kc_dataset *tr = images(200, 4);
        kc_model *m = NULL;
        kc_sequential("waits", &m);
        m->be = lag_backend();
        kc_add(m, KC_INPUT(.shape = {12, 12, 1}));
        kc_add(m, KC_CONV2D(.filters = 4, .kernel_size = {3, 3}, .activation = "relu"));
        kc_add(m, KC_FLATTEN());
        kc_add(m, KC_DENSE(.units = 4, .activation = "softmax"));
        kc_optimizer_opts opt = KC_ADAM(.clipnorm = clip == 1 ? 0.5 : 0, .global_clipnorm = clip == 2 ? 0.5 : 0);
        assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = opt, .metrics = {"accuracy"}}), KC_STATUS_OK);
        kc_model_memory_usage(m, NULL, NULL); /* builds the model: its weight uploads come first */
        int before = L.host_waits;
        kc_history *h = NULL;
        assert_int_equal(kc_fit(m, tr, &(kc_fit_opts){.epochs = 2, .batch_size = 32, .grad_accum = 2}, &h),
                         KC_STATUS_OK);
        int steps = 2 * 7, waits = L.host_waits - before;
        printf("# %s: %d steps, %d waits for the device\n", clips[clip], steps, waits);
        assert_int_equal(waits, steps);
        assert_true(isfinite(kc_history_epoch(h, 1)->loss));
        kc_history_destroy(h);
        kc_model_destroy(m);
        kc_dataset_destroy(tr);
    }
}

/* ---- the wrapper catches mistakes (so that the tests above can fail) */

static void test_reading_before_acquire_sees_nan(void **state) {
    kc_model *m = small_cnn(true);
    kc__feed f;
    assert_int_equal(kc__model_prepare(m, 8, false), KC_STATUS_OK);
    assert_int_equal(kc__feed_open(m, 8, true, &f), KC_STATUS_OK);
    float x[8 * 144];
    int32_t y[8] = {0};
    for (int i = 0; i < 8 * 144; i++) x[i] = 1.0f;
    int slot = -1;
    assert_int_equal(kc__feed_put(&f, x, y, NULL, 0, 8, &slot), KC_STATUS_OK);
    assert_int_equal(kc__feed_select(&f, slot, 0, 8), KC_STATUS_OK); /* the mistake: no acquire */
    assert_true(isnan(kc__model_input_buffer(m)[0]));
    assert_int_equal(kc__feed_acquire(&f, slot), KC_STATUS_OK); /* the right order */
    assert_int_equal(kc__feed_select(&f, slot, 0, 8), KC_STATUS_OK);
    assert_true(kc__model_input_buffer(m)[0] == 1.0f);
    assert_int_equal(kc__feed_release(&f, slot), KC_STATUS_OK);
    kc__feed_close(&f);
    assert_int_equal(L.violations, 0);
    kc_model_destroy(m);
}

static void test_upload_into_busy_slot_is_a_violation(void **state) {
    kc_model *m = small_cnn(true);
    kc__feed f;
    assert_int_equal(kc__model_prepare(m, 4, false), KC_STATUS_OK);
    assert_int_equal(kc__feed_open(m, 4, true, &f), KC_STATUS_OK);
    float x[4 * 144] = {0};
    int32_t y[4] = {0};
    int s0 = -1, s1 = -1, s2 = -1;
    assert_int_equal(kc__feed_put(&f, x, y, NULL, 0, 4, &s0), KC_STATUS_OK);
    assert_int_equal(kc__feed_acquire(&f, s0), KC_STATUS_OK);
    assert_int_equal(kc__feed_put(&f, x, y, NULL, 0, 4, &s1), KC_STATUS_OK); /* the other slot: fine */
    assert_int_equal(L.violations, 0);
    assert_int_equal(kc__feed_put(&f, x, y, NULL, 0, 4, &s2), KC_STATUS_OK); /* s0 again, not released */
    assert_int_equal(s2, s0);
    assert_true(L.violations > 0);
    assert_non_null(strstr(L.violation, "in use"));
    /* the feed's own argument checks */
    assert_int_equal(kc__feed_put(&f, x, y, NULL, 0, 5, &s2), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "does not fit slots of 4"));
    assert_int_equal(kc__feed_put(&f, x, NULL, NULL, 0, 4, &s2), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc__feed_select(&f, s1, 2, 4), KC_STATUS_INVALID_ARGUMENT);
    kc__feed_close(&f);
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lagging_feed_same_results),
        cmocka_unit_test(test_lagging_feed_grad_accum),
        cmocka_unit_test(test_lagging_feed_oom_recovery),
        cmocka_unit_test(test_one_wait_per_step),
        cmocka_unit_test(test_reading_before_acquire_sees_nan),
        cmocka_unit_test(test_upload_into_busy_slot_is_a_violation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
