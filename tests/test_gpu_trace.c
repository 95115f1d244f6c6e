/* test_gpu_trace.c — on the GPU, profiles and traces time layers with CUDA events: a
 * traced step's layer spans lie on a "GPU compute stream" track (not the training loop's),
 * one after another inside the step, each layer's forward and backward there; the batch
 * uploads on a "GPU copy stream" track; the profile's per-layer seconds (read from the
 * events) are positive and add up to less than the wall time. Without a usable GPU this
 * prints "SKIP: no GPU: <reason>" and exits 77; scripts/gpu-check runs it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "cuda_test.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct track_span {
    const char *name;
    double t0, t1; /* microseconds */
    int step;
} track_span;

/* The tid of the track named `name` (thread_name metadata), or -1. */
static long long track_tid(json_t *ev, const char *name) {
    size_t i;
    json_t *e;
    json_array_foreach(ev, i, e) {
        const char *n = json_string_value(json_object_get(e, "name"));
        const char *a = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
        if (n && a && strcmp(n, "thread_name") == 0 && strcmp(a, name) == 0)
            return (long long)json_integer_value(json_object_get(e, "tid"));
    }
    return -1;
}

/* The "X" spans of track tid (at most cap). */
static int spans_of(json_t *ev, long long tid, track_span *out, int cap) {
    size_t i;
    json_t *e;
    int n = 0;
    json_array_foreach(ev, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        if (!ph || strcmp(ph, "X") || json_integer_value(json_object_get(e, "tid")) != tid || n == cap) continue;
        double ts = json_number_value(json_object_get(e, "ts")), dur = json_number_value(json_object_get(e, "dur"));
        out[n++] = (track_span){.name = json_string_value(json_object_get(e, "name")), .t0 = ts, .t1 = ts + dur,
                                .step = (int)json_integer_value(json_object_get(json_object_get(e, "args"), "step"))};
    }
    return n;
}

static int has(const track_span *s, int n, const char *name, int step) {
    for (int i = 0; i < n; i++)
        if (strcmp(s[i].name, name) == 0 && s[i].step == step) return 1;
    return 0;
}

static void test_gpu_layer_spans(void **state) {
    (void)state;
    const int n = 8 * 32;
    float *x = calloc((size_t)n * 784, sizeof(float));
    int32_t *y = calloc((size_t)n, sizeof(int32_t));
    for (int i = 0; i < n; i++) {
        y[i] = i % 10;
        for (int p = 0; p < 784; p++) x[(size_t)i * 784 + p] = (float)((p / 78) == y[i]) + 0.01f * (float)(p % 7);
    }
    kc_dataset *ds = NULL;
    OK(kc_dataset_from_memory(x, y, n, (kc_shape){.rank = 3, .dim = {28, 28, 1}}, 10, &ds));
    kc_model *m = NULL;
    OK(kc_default_cnn(28, 28, 1, 10, &m));
    OK(kc_model_set_device(m, "cuda"));
    OK(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                        .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}}));
    OK(kc_model_set_profiling(m, 1));
    OK(kc_model_trace_steps(m, 3, 4));
    kc_history *h = NULL;
    double t0 = now();
    OK(kc_fit(m, ds, &(kc_fit_opts){.epochs = 1, .batch_size = 32, .seed = 1}, &h));
    double wall = now() - t0;
    char path[64];
    snprintf(path, sizeof path, "gpu-trace-%d.json", (int)getpid());
    OK(kc_model_write_trace(m, path));
    json_error_t err;
    json_t *root = json_load_file(path, 0, &err);
    assert_non_null(root);
    json_t *ev = json_object_get(root, "traceEvents");
    long long compute = track_tid(ev, "GPU compute stream"), copy = track_tid(ev, "GPU copy stream");
    long long loop = track_tid(ev, "training loop");
    assert_true(compute >= 0 && copy >= 0 && loop >= 0);
    static track_span cs[4096], ls[4096], ps[256];
    int nc = spans_of(ev, compute, cs, 4096), nl = spans_of(ev, loop, ls, 4096), np = spans_of(ev, copy, ps, 256);
    double sum = 0;
    for (int step = 3; step <= 4; step++) {
        const track_span *st = NULL;
        for (int i = 0; i < nl; i++)
            if (strcmp(ls[i].name, "step") == 0 && ls[i].step == step) st = &ls[i];
        assert_non_null(st);
        for (int i = 0; i < kc_model_num_layers(m); i++) {
            kc_layer_timing t;
            OK(kc_model_layer_timing(m, i, &t));
            if (t.forward_calls == 0) continue;
            if (!has(cs, nc, t.name, step)) fail_msg("step %d: no forward span of '%s' on the GPU track", step, t.name);
            if (has(ls, nl, t.name, step)) fail_msg("step %d: '%s' is timed on the host's track", step, t.name);
            if (step == 3) {
                assert_true(t.forward_seconds > 0);
                sum += t.forward_seconds + t.backward_seconds;
            }
        }
        assert_true(has(cs, nc, "loss", step) && has(cs, nc, "optimizer update", step));
        double last = 0;
        for (int i = 0; i < nc; i++) { /* in order, one after another, inside the step (1 ms slack) */
            if (cs[i].step != step) continue;
            if (cs[i].t0 < st->t0 - 1000 || cs[i].t1 > st->t1 + 1000)
                fail_msg("'%s' [%.1f, %.1f] is outside step %d [%.1f, %.1f]", cs[i].name, cs[i].t0, cs[i].t1, step,
                         st->t0, st->t1);
            assert_true(cs[i].t0 >= last - 1.0);
            last = cs[i].t1;
        }
    }
    assert_true(has(ps, np, "upload batch", 3) && has(ps, np, "upload batch", 4));
    printf("    %d GPU compute spans, %d copy spans; layers %.4f s of %.4f s wall\n", nc, np, sum, wall);
    assert_true(sum > 0 && sum < wall);
    json_decref(root);
    unlink(path);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(ds);
    free(x);
    free(y);
}

int main(void) {
    kc_backend *g = NULL;
    int open_rc = cuda_test_open(&g, NULL);
    if (open_rc) return open_rc;
    kc_backend_destroy(g);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_gpu_layer_spans)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
