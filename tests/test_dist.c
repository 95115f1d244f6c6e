/* test_dist.c — data-parallel training's library side (src/model/dist.c, kc_fit with a
 * kc_collective), in one process: a stand-in collective plays rank 0 of 2, whose rank 1
 * either mirrors it or replays what another run sent (another model, other data); its
 * all-reduce can fail on a chosen call. The sampler's slices and the batch split are
 * checked directly. The real MPI runs are in tests/cli/distributed.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "model/dist.h"

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s", what, kc_last_error());
}

/* ---- the stand-in collective: rank 0 of 2 */
typedef struct fake {
    unsigned char sent[256], replay[256]; /* what rank 0 sent to allgather; rank 1's in replay mode */
    size_t bytes;
    bool replaying;
    int f32_calls, fail_f32_at, f64_calls, bcasts;
} fake;

static kc_status fake_f32(void *ctx, float *buf, int64_t n) {
    fake *f = ctx;
    if (++f->f32_calls == f->fail_f32_at) return KC_STATUS_IO;
    for (int64_t i = 0; i < n; i++) buf[i] *= 2; /* rank 1 had the same values */
    return KC_STATUS_OK;
}
static kc_status fake_f64(void *ctx, double *buf, int64_t n) {
    ((fake *)ctx)->f64_calls++;
    for (int64_t i = 0; i < n; i++) buf[i] *= 2;
    return KC_STATUS_OK;
}
static kc_status fake_bcast(void *ctx, void *buf, size_t bytes, int root) {
    (void)buf;
    (void)bytes;
    assert_int_equal(root, 0);
    ((fake *)ctx)->bcasts++;
    return KC_STATUS_OK;
}
static kc_status fake_gather(void *ctx, const void *send, void *recv, size_t bytes) {
    fake *f = ctx;
    assert_true(bytes <= sizeof f->sent);
    memcpy(f->sent, send, bytes);
    f->bytes = bytes;
    memcpy(recv, send, bytes);
    memcpy((char *)recv + bytes, f->replaying ? f->replay : send, bytes);
    return KC_STATUS_OK;
}
static const char *fake_error(void *ctx) {
    (void)ctx;
    return "fake network down";
}
static kc_collective collective(fake *f) {
    return (kc_collective){.rank = 0, .size = 2, .ctx = f, .allreduce_sum_f32 = fake_f32, .allreduce_sum_f64 = fake_f64,
                           .broadcast = fake_bcast, .allgather = fake_gather, .error = fake_error};
}

static kc_dataset *make_data(int n) {
    float *x = malloc((size_t)n * 6 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < n * 6; i++) x[i] = (float)((i * 37) % 11) / 11.0f;
    for (int i = 0; i < n; i++) y[i] = i % 3;
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, n, (kc_shape){1, {6}}, 3, &d), "dataset");
    free(x);
    free(y);
    return d;
}

static kc_model *make_model(int hidden) {
    kc_model *m = NULL;
    must(kc_sequential("dp_net", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {6}));
    kc_add(m, KC_DENSE(.units = hidden, .activation = "relu"));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "sgd"}, .metrics = {"accuracy"}}), "compile");
    return m;
}

/* fit 1 epoch of data n with the global batch bs over the stand-in collective */
static kc_status fit_with(fake *f, int hidden, int n, int bs, kc_history **h) {
    kc_model *m = make_model(hidden);
    kc_dataset *d = make_data(n);
    kc_collective c = collective(f);
    kc_fit_opts o = {.epochs = 1, .batch_size = bs, .seed = 3, .collective = &c};
    kc_status s = kc_fit(m, d, &o, h);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    return s;
}

/* DistributedSampler: rank r takes positions r, r + R, ...; the tail padded by wrapping
 * or dropped; every position is taken once (padding: the first ones twice). */
static void test_slices(void **state) {
    (void)state;
    int64_t order[10], out[4];
    for (int i = 0; i < 10; i++) order[i] = 100 + i;
    int count[10] = {0};
    for (int r = 0; r < 3; r++) {
        fake f = {0};
        kc_collective c = collective(&f);
        c.size = 3;
        c.rank = r;
        int64_t nl;
        int bl;
        must(kc__dist_geometry(&c, 10, 6, false, &nl, &bl), "geometry");
        assert_int_equal(nl, 4);
        assert_int_equal(bl, 2);
        kc__dist_slice(&c, order, 10, nl, out);
        for (int i = 0; i < nl; i++) {
            assert_int_equal(out[i], order[(i * 3 + r) % 10]);
            count[out[i] - 100]++;
        }
        must(kc__dist_geometry(&c, 10, 6, true, &nl, &bl), "geometry, drop");
        assert_int_equal(nl, 3);
    }
    for (int i = 0; i < 10; i++) assert_int_equal(count[i], i < 2 ? 2 : 1);
}

static void test_batch_split_refused(void **state) {
    (void)state;
    fake f = {0};
    kc_collective c = collective(&f);
    int64_t nl;
    int bl;
    assert_int_equal(kc__dist_geometry(&c, 40, 7, false, &nl, &bl), KC_STATUS_INVALID_ARGUMENT);
    assert_non_null(strstr(kc_last_error(), "must split evenly over the 2 ranks"));
    assert_int_equal(kc__dist_geometry(&c, 40, KC_BATCH_SIZE_AUTO, false, &nl, &bl), KC_STATUS_INVALID_ARGUMENT);
    must(kc__dist_geometry(NULL, 40, 7, false, &nl, &bl), "no collective");
    assert_int_equal(nl, 40);
    assert_int_equal(bl, 7);
    kc_history *h = NULL;
    assert_int_equal(fit_with(&f, 5, 40, 7, &h), KC_STATUS_INVALID_ARGUMENT);
    assert_null(h);
}

/* 40 examples, global batch 8 over 2 ranks: 20 each, 4 a step, 5 steps; one gradient
 * all-reduce and one broadcast of the weights; the history counts the global batch. */
static void test_fit_steps(void **state) {
    (void)state;
    fake f = {0};
    kc_history *h = NULL;
    must(fit_with(&f, 5, 40, 8, &h), "fit");
    const kc_epoch_logs *e = kc_history_epoch(h, 0);
    assert_int_equal(e->steps, 5);
    assert_int_equal(e->batch_size, 8);
    assert_int_equal(f.f32_calls, 5);
    assert_int_equal(f.bcasts, 1);
    assert_true(f.f64_calls >= 10); /* the step's sums and the stop agreement */
    kc_history_destroy(h);
}

/* rank 1 replays what a run of (hidden_1, n_1) sent; rank 0 runs (hidden_0, n_0) */
static void expect_refusal(int hidden_1, int n_1, int hidden_0, int n_0, const char *message) {
    fake f = {0};
    kc_history *h = NULL;
    must(fit_with(&f, hidden_1, n_1, 8, &h), "rank 1's run");
    kc_history_destroy(h);
    memcpy(f.replay, f.sent, f.bytes);
    f.replaying = true;
    assert_int_equal(fit_with(&f, hidden_0, n_0, 8, &h), KC_STATUS_INVALID_ARGUMENT);
    if (!strstr(kc_last_error(), message)) fail_msg("'%s' does not say '%s'", kc_last_error(), message);
    must(fit_with(&f, hidden_1, n_1, 8, &h), "the same run as rank 1's");
    kc_history_destroy(h);
}

static void test_refuses_other_model(void **state) {
    (void)state;
    expect_refusal(6, 40, 5, 40, "rank 1's model differs from rank 0's");
}

static void test_refuses_other_data(void **state) {
    (void)state;
    expect_refusal(5, 40, 5, 42, "rank 1 has 40 training examples but rank 0 has 42");
}

static void test_collective_error(void **state) {
    (void)state;
    fake f = {.fail_f32_at = 3};
    kc_history *h = NULL;
    assert_int_equal(fit_with(&f, 5, 40, 8, &h), KC_STATUS_IO);
    assert_null(h);
    const char *e = kc_last_error();
    assert_non_null(strstr(e, "rank 0 of 2: the all-reduce of the gradients failed: fake network down"));
}

/* ---- the bucketed all-reduce: a stand-in non-blocking sum (rank 1 mirrors rank 0) that
 * finishes at its second test, or at wait */
typedef struct nb {
    fake f;
    float *buf[16];
    int64_t n[16];
    int tests[16], started, waits, test_calls;
    bool done[16];
} nb;

static void nb_finish(nb *b, int k) {
    for (int64_t i = 0; i < b->n[k]; i++) b->buf[k][i] *= 2;
    b->done[k] = true;
}
static kc_status nb_isum(void *ctx, float *buf, int64_t n, int *req) {
    nb *b = ctx;
    assert_true(b->started < 16);
    int k = b->started++;
    b->buf[k] = buf;
    b->n[k] = n;
    b->tests[k] = 0;
    b->done[k] = false;
    *req = k;
    return KC_STATUS_OK;
}
static kc_status nb_test(void *ctx, int req, int *done) {
    nb *b = ctx;
    b->test_calls++;
    if (!b->done[req] && ++b->tests[req] >= 2) nb_finish(b, req);
    *done = b->done[req];
    return KC_STATUS_OK;
}
static kc_status nb_wait(void *ctx, int req) {
    nb *b = ctx;
    b->waits++;
    if (!b->done[req]) nb_finish(b, req);
    return KC_STATUS_OK;
}

/* Input 6 -> Dense 5 -> Dense 4 -> Dense 3: the slab holds 48 + 48 + 32 floats (64-byte
 * aligned starts); a 1-byte bucket gives one bucket per layer, last layer first, started
 * during the backward pass (the first ones are tested before the last starts); the
 * weights are the blocking all-reduce's. */
static void fit_buckets(nb *b, int64_t bucket_bytes, bool overlap, float *probe_out) {
    kc_model *m = NULL;
    must(kc_sequential("dp_buckets", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {6}));
    kc_add(m, KC_DENSE(.units = 5, .activation = "relu"));
    kc_add(m, KC_DENSE(.units = 4, .activation = "relu"));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "sgd"}}), "compile");
    kc_dataset *d = make_data(40);
    kc_collective c = collective(&b->f);
    c.ctx = b;
    if (overlap) c.iallreduce_sum_f32 = nb_isum, c.test = nb_test, c.wait = nb_wait;
    kc_fit_opts o = {.epochs = 1, .batch_size = 40, .seed = 3, .collective = &c, .bucket_bytes = bucket_bytes};
    kc_history *h = NULL;
    must(kc_fit(m, d, &o, &h), "fit");
    float x[6] = {0.1f, 0.5f, 0.2f, 0.9f, 0.3f, 0.7f};
    must(kc_predict(m, x, 1, 1, probe_out), "predict");
    kc_history_destroy(h);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
}

static void test_buckets(void **state) {
    (void)state;
    nb b = {0}, one = {0}, blocking = {0};
    float p[3], p1[3], pb[3];
    fit_buckets(&b, 1, true, p);
    assert_int_equal(b.started, 3); /* 1 step (batch 40 over 2 ranks: 20 each, one step) */
    assert_int_equal(b.n[0], 32);   /* the last layer's kernel (15 -> 16) and bias (3 -> 16) */
    assert_int_equal(b.n[1], 48);
    assert_int_equal(b.n[2], 48);
    assert_true(b.buf[0] > b.buf[1] && b.buf[1] > b.buf[2]); /* reverse-layer order, from the slab's top */
    assert_int_equal(b.buf[1] + 48, b.buf[0]);
    assert_true(b.test_calls >= 2); /* progressed from the backward pass */
    fit_buckets(&one, (int64_t)4 << 20, true, p1); /* the default size: one bucket */
    assert_int_equal(one.started, 1);
    assert_int_equal(one.n[0], 128);
    fit_buckets(&blocking, 0, false, pb);
    assert_int_equal(blocking.f.f32_calls, 1);
    for (int i = 0; i < 3; i++) {
        assert_float_equal(p[i], pb[i], 0);
        assert_float_equal(p1[i], pb[i], 0);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slices),         cmocka_unit_test(test_batch_split_refused),
        cmocka_unit_test(test_fit_steps),      cmocka_unit_test(test_refuses_other_model),
        cmocka_unit_test(test_refuses_other_data), cmocka_unit_test(test_collective_error),
        cmocka_unit_test(test_buckets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
