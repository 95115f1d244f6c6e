/* test_fit_hooks.c — the hook table of kc__fit_run (src/model/fit_hooks.h), through which
 * the checkpoints (and anything else that keeps a fit's state) see a fit:
 *  - a fit with a recording table and a recording callback sees every event once, in the
 *    documented order, interleaved with the callbacks as documented, with the positions
 *    and history counts the checkpoints rely on; fit_opts runs before the defaults;
 *  - a callback that stops mid-epoch: after_step still sees that step, after_epoch says
 *    the epoch is incomplete and where it was cut;
 *  - begin without a run: no later hook is called;
 *  - an error from after_step ends the fit with that error, and end and on_train_end
 *    still run;
 *  - a resume position from begin: training starts there and the history starts with the
 *    epochs begin hands over. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "model/fit_hooks.h"

#define N_EX 20
#define N_FEAT 4
#define BATCH 8 /* 3 steps per epoch: 8, 8, 4 */

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

static kc_dataset *make_data(void) {
    float x[N_EX * N_FEAT];
    int32_t y[N_EX];
    for (int i = 0; i < N_EX; i++) {
        for (int j = 0; j < N_FEAT; j++) x[i * N_FEAT + j] = (float)((i * 7 + j * 3) % 11) / 11.0f - 0.5f;
        y[i] = i % 3;
    }
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, N_EX, (kc_shape){1, {N_FEAT}}, 3, &d), "dataset");
    return d;
}

static kc_model *make_model(void) {
    kc_model *m = NULL;
    must(kc_sequential("hooked", &m), "sequential");
    kc_add(m, KC_INPUT(.shape = {N_FEAT}));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD()}), "compile");
    return m;
}

/* ---------------------------------------------------------------- the recorder */

typedef struct recorder {
    char log[128][48];
    int n;
    bool no_run;             /* begin returns no run */
    int fail_at_step;        /* after_step fails at this step number of the run (1-based; 0: never) */
    int steps_seen;
    int stop_at_step;        /* the callback stops training at this step (1-based; 0: never) */
    kc__fit_resume resume;   /* what begin hands back */
    int run_token;           /* begin's run points here */
} recorder;

static void note(recorder *r, const char *fmt, ...) {
    assert_true(r->n < 128);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->log[r->n++], sizeof r->log[0], fmt, ap);
    va_end(ap);
}

static recorder *of_run(void *run) {
    return (recorder *)((char *)run - offsetof(recorder, run_token));
}

static kc_status h_fit_opts(void *user, const kc_model *m, kc_fit_opts *o) {
    note(user, "fit_opts epochs=%d", o->epochs);
    if (o->epochs == 0) o->epochs = 2; /* before the defaults: kc_fit's own default is 1 */
    return KC_STATUS_OK;
}

static kc_status h_begin(void *user, kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng,
                         int64_t *order, void **run, kc__fit_resume *res) {
    recorder *r = user;
    note(r, "begin n=%lld bs=%d steps=%lld epochs=%d", (long long)g->num_examples, g->batch_size,
         (long long)g->steps, g->epochs);
    if (!r->no_run) {
        *run = &r->run_token;
        *res = r->resume;
    }
    return KC_STATUS_OK;
}

static void h_train_begun(void *run, kc_model *m) { note(of_run(run), "train_begun"); }

static kc_status h_after_step(void *run, kc_model *m, const kc__fit_pos *p, const kc_batch_logs *bl,
                              const kc_epoch_logs *hist, int n_hist) {
    recorder *r = of_run(run);
    note(r, "after_step e%d s%lld seen=%lld hist=%d", p->epoch, (long long)p->step, (long long)p->seen, n_hist);
    assert_int_equal(bl->step + 1, p->step);
    if (++r->steps_seen == r->fail_at_step) return kc__fail(KC_STATUS_IO, "the disk is full (test)");
    return KC_STATUS_OK;
}

static kc_status h_after_epoch(void *run, kc_model *m, const kc__fit_pos *p, bool complete, bool stopping,
                               const kc_epoch_logs *el,
                               const kc_epoch_logs *hist, int n_hist) {
    note(of_run(run), "after_epoch e%d %s pos=e%d s%lld hist=%d", el->epoch, complete ? "complete" : "cut", p->epoch,
         (long long)p->step, n_hist);
    return KC_STATUS_OK;
}

static void h_end(void *run) { note(of_run(run), "end"); }

static const kc__fit_hooks k_table = {.fit_opts = h_fit_opts, .begin = h_begin, .train_begun = h_train_begun,
                                      .after_step = h_after_step, .after_epoch = h_after_epoch, .end = h_end};

static kc_callback_action c_train_begin(kc_model *m, void *u) {
    note(u, "cb train_begin");
    return KC_CONTINUE;
}
static kc_callback_action c_epoch_begin(kc_model *m, int e, void *u) {
    note(u, "cb epoch_begin %d", e);
    return KC_CONTINUE;
}
static kc_callback_action c_batch_end(kc_model *m, const kc_batch_logs *l, void *u) {
    recorder *r = u;
    note(r, "cb batch_end e%d s%lld", l->epoch, (long long)l->step);
    return r->stop_at_step && r->steps_seen + 1 == r->stop_at_step ? KC_STOP_TRAINING : KC_CONTINUE;
}
static kc_callback_action c_epoch_end(kc_model *m, const kc_epoch_logs *l, void *u) {
    note(u, "cb epoch_end %d", l->epoch);
    return KC_CONTINUE;
}
static void c_train_end(kc_model *m, void *u) { note(u, "cb train_end"); }

/* Runs a fit with the recorder's table and callback; returns its status. */
static kc_status run_fit(recorder *r, int epochs, kc_history **h) {
    kc_model *m = make_model();
    kc_dataset *d = make_data();
    kc_callback cb = {.name = "recorder", .user = r, .on_train_begin = c_train_begin, .on_epoch_begin = c_epoch_begin,
                      .on_batch_end = c_batch_end, .on_epoch_end = c_epoch_end, .on_train_end = c_train_end};
    kc_callback *cbs[] = {&cb};
    kc__fit_hooks t = k_table;
    t.user = r;
    kc_fit_opts o = {.epochs = epochs, .batch_size = BATCH, .shuffle = KC_FALSE, .callbacks = cbs, .num_callbacks = 1};
    kc_status s = kc__fit_run(m, d, &o, &t, h);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    return s;
}

static void expect_log(const recorder *r, const char *const *want) {
    int n = 0;
    while (want[n]) n++;
    for (int i = 0; i < r->n || i < n; i++) {
        const char *got = i < r->n ? r->log[i] : "(nothing)", *exp = i < n ? want[i] : "(nothing)";
        if (strcmp(got, exp) != 0) fail_msg("event %d: got '%s', expected '%s'", i, got, exp);
    }
}

#define EVENTS(...) ((const char *const[]){__VA_ARGS__, NULL})

/* ---------------------------------------------------------------- tests */

static void test_events_in_order(void **state) {
    recorder r = {0};
    kc_history *h = NULL;
    must(run_fit(&r, 0, &h), "fit"); /* epochs 0: fit_opts makes it 2 */
    assert_int_equal(kc_history_epochs(h), 2);
    kc_history_destroy(h);
    expect_log(&r, EVENTS("fit_opts epochs=0", "begin n=20 bs=8 steps=3 epochs=2", "cb train_begin", "train_begun",
                          "cb epoch_begin 0",
                          "cb batch_end e0 s0", "after_step e0 s1 seen=8 hist=0",
                          "cb batch_end e0 s1", "after_step e0 s2 seen=16 hist=0",
                          "cb batch_end e0 s2", "after_step e0 s3 seen=20 hist=0",
                          "cb epoch_end 0", "after_epoch e0 complete pos=e1 s0 hist=1",
                          "cb epoch_begin 1",
                          "cb batch_end e1 s0", "after_step e1 s1 seen=8 hist=1",
                          "cb batch_end e1 s1", "after_step e1 s2 seen=16 hist=1",
                          "cb batch_end e1 s2", "after_step e1 s3 seen=20 hist=1",
                          "cb epoch_end 1", "after_epoch e1 complete pos=e2 s0 hist=2",
                          "cb train_end", "end"));
}

static void test_stop_mid_epoch(void **state) {
    recorder r = {.stop_at_step = 2};
    kc_history *h = NULL;
    must(run_fit(&r, 3, &h), "fit");
    assert_string_equal(kc_history_stop_reason(h), "recorder");
    kc_history_destroy(h);
    expect_log(&r, EVENTS("fit_opts epochs=3", "begin n=20 bs=8 steps=3 epochs=3", "cb train_begin", "train_begun",
                          "cb epoch_begin 0",
                          "cb batch_end e0 s0", "after_step e0 s1 seen=8 hist=0",
                          "cb batch_end e0 s1", "after_step e0 s2 seen=16 hist=0",
                          "cb epoch_end 0", "after_epoch e0 cut pos=e0 s2 hist=0",
                          "cb train_end", "end"));
}

static void test_no_run(void **state) {
    recorder r = {.no_run = true};
    kc_history *h = NULL;
    must(run_fit(&r, 1, &h), "fit");
    kc_history_destroy(h);
    expect_log(&r, EVENTS("fit_opts epochs=1", "begin n=20 bs=8 steps=3 epochs=1", "cb train_begin",
                          "cb epoch_begin 0", "cb batch_end e0 s0", "cb batch_end e0 s1", "cb batch_end e0 s2",
                          "cb epoch_end 0", "cb train_end"));
}

static void test_hook_error(void **state) {
    recorder r = {.fail_at_step = 2};
    kc_history *h = (kc_history *)&r; /* must come back NULL */
    assert_int_equal(run_fit(&r, 2, &h), KC_STATUS_IO);
    assert_null(h);
    assert_non_null(strstr(kc_last_error(), "the disk is full (test)"));
    expect_log(&r, EVENTS("fit_opts epochs=2", "begin n=20 bs=8 steps=3 epochs=2", "cb train_begin", "train_begun",
                          "cb epoch_begin 0",
                          "cb batch_end e0 s0", "after_step e0 s1 seen=8 hist=0",
                          "cb batch_end e0 s1", "after_step e0 s2 seen=16 hist=0",
                          "cb train_end", "end"));
}

static void test_resume_position(void **state) {
    kc_epoch_logs past = {.epoch = 0, .steps = 3, .loss = 1.25, .batch_size = BATCH, .micro_batch = BATCH};
    kc__fit_pos pos = {.epoch = 1, .step = 2, .seen = 16, .sums = {20.0}, .epoch_lr = 0.5, .micro_batch = BATCH};
    recorder r = {.resume = {.pos = &pos, .history = &past, .n_history = 1}};
    kc_history *h = NULL;
    must(run_fit(&r, 2, &h), "fit");
    assert_int_equal(kc_history_epochs(h), 2);
    assert_true(kc_history_epoch(h, 0)->loss == 1.25);
    const kc_epoch_logs *e1 = kc_history_epoch(h, 1);
    assert_int_equal(e1->epoch, 1);
    assert_int_equal(e1->steps, 3);
    assert_true(e1->lr == 0.5); /* the saved epoch's logged rate, not the current one */
    kc_history_destroy(h);
    expect_log(&r, EVENTS("fit_opts epochs=2", "begin n=20 bs=8 steps=3 epochs=2", "cb train_begin", "train_begun",
                          "cb epoch_begin 1",
                          "cb batch_end e1 s2", "after_step e1 s3 seen=20 hist=1",
                          "cb epoch_end 1", "after_epoch e1 complete pos=e2 s0 hist=2",
                          "cb train_end", "end"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_events_in_order), cmocka_unit_test(test_stop_mid_epoch),
        cmocka_unit_test(test_no_run),          cmocka_unit_test(test_hook_error),
        cmocka_unit_test(test_resume_position),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
