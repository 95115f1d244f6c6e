/* test_shared.c — shared layers (a layer called at several nodes, kc_apply_shared):
 * the weights are stored and counted once; the shared weight's gradient is the sum of the
 * gradients its calls would have as separate layers with the same values (compared with
 * such a model) and matches finite differences of the loss; training moves one set of
 * weights with one optimizer state; the Keras JSON has one entry per layer whose
 * inbound_nodes list the calls, references name the call ("tower", 1, 0), and it reads
 * back (a later call may take a layer listed after it); calls whose inputs the weights do
 * not fit, a shared layer in a Sequential model and calls of an InputLayer are errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"

#define B 4

/* x (5) -> pa, pb (Dense 4 each) -> the shared Dense "tower" (3, tanh) on both ->
 * Subtract -> Dense 2 softmax. shared = false: two Dense layers "tower", "tower_b". */
static kc_model *siamese(bool shared) {
    kc_model *m = NULL;
    assert_int_equal(kc_functional("siamese", &m), KC_STATUS_OK);
    assert_int_equal(kc_model_set_seed(m, 5), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {5}));
    kc_node a = kc_apply(m, KC_DENSE(.name = "pa", .units = 4, .activation = "relu"), x);
    kc_node b = kc_apply(m, KC_DENSE(.name = "pb", .units = 4), x);
    kc_node ta = kc_apply(m, KC_DENSE(.name = "tower", .units = 3, .activation = "tanh"), a);
    kc_node tb = shared ? kc_apply_shared(m, ta, &b, 1)
                        : kc_apply(m, KC_DENSE(.name = "tower_b", .units = 3, .activation = "tanh"), b);
    kc_node d = kc_merge(m, KC_SUBTRACT(.name = "diff"), (kc_node[]){ta, tb}, 2);
    kc_node o = kc_apply(m, KC_DENSE(.name = "head", .units = 2, .activation = "softmax"), d);
    assert_true(o >= 0);
    assert_int_equal(kc_set_output(m, o), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.loss = "sparse_categorical_crossentropy", .optimizer = KC_SGD()}),
                     KC_STATUS_OK);
    return m;
}

/* Keras's parameter count: the layers' (the slab pads each weight) */
static int64_t total_params(kc_model *m) {
    int64_t total = 0;
    for (int i = 0; i < kc_model_num_layers(m); i++) {
        kc_layer_info li;
        assert_int_equal(kc_model_layer_info(m, i, &li), KC_STATUS_OK);
        total += li.params;
    }
    return total;
}

static const kc_layer *layer_named(const kc_model *m, const char *name) {
    for (int i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i]->name, name) == 0) return m->layers[i]; /* the first call */
    fail_msg("no layer '%s'", name);
    return NULL;
}

static void copy_layer_weights(kc_model *dst, const char *dname, kc_model *src, const char *sname) {
    const kc_layer *d = layer_named(dst, dname), *s = layer_named(src, sname);
    assert_int_equal(d->n_weights, s->n_weights);
    for (int k = 0; k < d->n_weights; k++) memcpy(d->w[k].data, s->w[k].data, (size_t)d->w[k].size * sizeof(float));
}

static float g_x[B * 5], g_t[B];

/* forward + loss gradient (no update) on the fixed batch; the model's loss */
static double grads(kc_model *m) {
    assert_int_equal(kc__model_prepare(m, B, true), KC_STATUS_OK);
    memcpy(kc__model_input_buffer(m), g_x, sizeof g_x);
    m->batch_targets = g_t;
    m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
    assert_int_equal(kc__model_forward(m, B, true, 42), KC_STATUS_OK);
    assert_int_equal(kc__model_backward_update(m, B, B, false), KC_STATUS_OK);
    float s = 0;
    m->be->to_host(m->be, &s, m->dev_scalars + KC_SCALAR_LOSS, sizeof s);
    return s / B;
}

static double loss_only(kc_model *m) {
    memcpy(kc__model_input_buffer(m), g_x, sizeof g_x);
    m->be->memset0(m->be, m->dev_scalars, KC_SCALAR_COUNT * sizeof(float));
    assert_int_equal(kc__model_forward(m, B, true, 42), KC_STATUS_OK);
    assert_int_equal(kc__model_accumulate_metrics(m, B), KC_STATUS_OK);
    float s = 0;
    m->be->to_host(m->be, &s, m->dev_scalars + KC_SCALAR_LOSS, sizeof s);
    return (double)s / B;
}

static void fill_batch(void) {
    kc_rng r;
    kc__rng_seed(&r, 3);
    for (int i = 0; i < B * 5; i++) g_x[i] = (float)(kc__rng_uniform(&r) * 2 - 1);
    for (int i = 0; i < B; i++) g_t[i] = (float)(i % 2);
}

static void test_counts_once(void **state) {
    (void)state;
    kc_model *m = siamese(true), *u = siamese(false);
    /* pa 24 + pb 24 + tower 15 + head 8: the shared model has tower's parameters once */
    assert_int_equal(total_params(m), 71);
    assert_int_equal(total_params(u), 71 + 15);
    assert_int_equal(kc_model_num_weights(m) + 2, kc_model_num_weights(u));
    int64_t total = 0;
    int calls = 0;
    for (int i = 0; i < kc_model_num_layers(m); i++) {
        kc_layer_info li;
        assert_int_equal(kc_model_layer_info(m, i, &li), KC_STATUS_OK);
        total += li.params;
        if (strcmp(li.name, "tower") == 0) {
            assert_int_equal(li.params, li.call == 0 ? 15 : 0);
            calls++;
        }
        if (strcmp(li.name, "diff") == 0) assert_int_equal(li.input_calls[1], 1); /* tower[1][0] */
    }
    assert_int_equal(calls, 2);
    assert_int_equal(total, 71);
    kc_model_destroy(m);
    kc_model_destroy(u);
}

/* The shared kernel's gradient is the sum of the two separate layers' (same values). */
static void test_gradient_is_the_sum(void **state) {
    (void)state;
    fill_batch();
    kc_model *m = siamese(true), *u = siamese(false);
    const char *names[] = {"pa", "pb", "head"};
    for (int i = 0; i < 3; i++) copy_layer_weights(u, names[i], m, names[i]);
    copy_layer_weights(u, "tower", m, "tower");
    copy_layer_weights(u, "tower_b", m, "tower");
    double lm = grads(m), lu = grads(u);
    assert_true(fabs(lm - lu) < 1e-6);
    const kc_layer *t = layer_named(m, "tower"), *t1 = layer_named(u, "tower"), *t2 = layer_named(u, "tower_b");
    double largest = 0;
    for (int k = 0; k < t->n_weights; k++)
        for (int64_t i = 0; i < t->w[k].size; i++) {
            double want = (double)t1->w[k].grad[i] + t2->w[k].grad[i];
            largest = fmax(largest, fabs(want));
            if (fabs(t->w[k].grad[i] - want) > 1e-6 + 1e-5 * fabs(want))
                fail_msg("tower %s[%lld]: gradient %g, the two calls' sum %g (%g + %g)", t->w[k].name, (long long)i,
                         (double)t->w[k].grad[i], want, (double)t1->w[k].grad[i], (double)t2->w[k].grad[i]);
        }
    assert_true(largest > 1e-3); /* the comparison can fail */
    /* and either call alone is not the sum: both calls contribute */
    double d1 = 0;
    for (int64_t i = 0; i < t->w[0].size; i++) d1 = fmax(d1, fabs(t->w[0].grad[i] - t1->w[0].grad[i]));
    assert_true(d1 > 1e-4);
    /* finite differences of the loss on the shared kernel (both calls see the change) */
    for (int s = 0; s < 6; s++) {
        const kc_weight *w = &t->w[s % 2];
        int64_t idx = (int64_t)(s * 5) % w->size;
        float old = w->data[idx], eps = 3e-3f;
        double ana = w->grad[idx];
        w->data[idx] = old + eps;
        double lp = loss_only(m);
        w->data[idx] = old - eps;
        double ln = loss_only(m);
        w->data[idx] = old;
        double num = (lp - ln) / (2.0 * eps);
        if (fabs(ana - num) > 3e-2 * fmax(fabs(ana), fabs(num)) + 2e-4)
            fail_msg("tower %s[%lld]: analytic %g, numeric %g", w->name, (long long)idx, ana, num);
    }
    m->batch_targets = u->batch_targets = NULL;
    kc_model_destroy(m);
    kc_model_destroy(u);
}

/* Training updates the one set of weights; both calls use them. */
static void test_training_moves_one_set(void **state) {
    (void)state;
    fill_batch();
    kc_model *m = siamese(true);
    const kc_layer *t = layer_named(m, "tower");
    const kc_layer *c = NULL;
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->shares == t->index) c = m->layers[i];
    assert_non_null(c);
    assert_int_equal(c->n_weights, 0);
    assert_int_equal(c->n_views, 2);
    float before = t->w[0].data[0];
    double l0 = grads(m);
    assert_int_equal(kc__model_apply_gradients(m, m->grads), KC_STATUS_OK);
    assert_true(t->w[0].data[0] != before);
    assert_true(c->w[0].data == t->w[0].data); /* the later call reads the updated kernel */
    for (int step = 0; step < 30; step++) {
        grads(m);
        assert_int_equal(kc__model_apply_gradients(m, m->grads), KC_STATUS_OK);
    }
    assert_true(grads(m) < l0);
    m->batch_targets = NULL;
    kc_model_destroy(m);
}

static int occurrences(const char *text, const char *what) {
    int n = 0;
    size_t len = strlen(what);
    for (size_t i = 0; text[i]; i++) n += strncmp(text + i, what, len) == 0;
    return n;
}

/* Freezing the layer (by its name) freezes every call: no gradients, weights unchanged. */
static void test_freeze_shared(void **state) {
    (void)state;
    fill_batch();
    kc_model *m = siamese(true);
    assert_int_equal(kc_model_set_trainable(m, "tower", 0), KC_STATUS_OK);
    const kc_layer *t = layer_named(m, "tower");
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i]->shares == t->index) {
            assert_true(m->layers[i]->frozen);
            assert_null(m->layers[i]->w[0].grad);
        }
    assert_null(m->view_grads);
    float k0 = t->w[0].data[3], p0 = layer_named(m, "pb")->w[0].data[0];
    for (int step = 0; step < 3; step++) {
        grads(m);
        assert_int_equal(kc__model_apply_gradients(m, m->grads), KC_STATUS_OK);
    }
    assert_true(t->w[0].data[3] == k0);
    assert_true(layer_named(m, "pb")->w[0].data[0] != p0); /* pb trains through the frozen tower's second call */
    m->batch_targets = NULL;
    kc_model_destroy(m);
}

static char *to_json(kc_model *m, int flavour) {
    char *j = NULL;
    if (kc_model_to_json(m, flavour, &j) != KC_STATUS_OK) fail_msg("to_json: %s", kc_last_error());
    return j;
}

static void test_json_round_trip(void **state) {
    (void)state;
    fill_batch();
    for (int flavour = 2; flavour <= 3; flavour++) {
        kc_model *m = siamese(true);
        char *j = to_json(m, flavour);
        /* one "tower" entry, whose inbound_nodes hold both calls; diff takes call 1 */
        assert_int_equal(occurrences(j, "\"class_name\": \"Dense\""), 4); /* pa, pb, tower, head */
        assert_non_null(strstr(j, flavour == 3 ? "[\"tower\", 1, 0]" : "[\"tower\", 1, 0, {}]"));
        kc_model *back = NULL;
        if (kc_model_from_json(j, strlen(j), &back) != KC_STATUS_OK) fail_msg("from_json: %s", kc_last_error());
        assert_int_equal(kc_model_num_layers(back), kc_model_num_layers(m));
        assert_int_equal(total_params(back), 71);
        int shared = 0;
        for (int i = 0; i < back->n_layers; i++) shared += back->layers[i]->shares >= 0;
        assert_int_equal(shared, 1);
        char *again = to_json(back, flavour);
        assert_string_equal(j, again);
        kc_free(again);
        kc_free(j);
        kc_model_destroy(back);
        kc_model_destroy(m);
    }
}

/* Keras processes a call whose input is not made yet in a later pass: here the shared
 * layer's second call takes "pb", listed after it. */
static void test_json_call_before_its_input(void **state) {
    (void)state;
    const char *j =
        "{\"class_name\": \"Functional\", \"config\": {\"name\": \"f\", \"layers\": ["
        "{\"class_name\": \"InputLayer\", \"name\": \"in\", \"config\": {\"batch_input_shape\": [null, 5], "
        "\"name\": \"in\"}, \"inbound_nodes\": []},"
        "{\"class_name\": \"Dense\", \"name\": \"pa\", \"config\": {\"name\": \"pa\", \"units\": 4}, "
        "\"inbound_nodes\": [[[\"in\", 0, 0, {}]]]},"
        "{\"class_name\": \"Dense\", \"name\": \"tower\", \"config\": {\"name\": \"tower\", \"units\": 3}, "
        "\"inbound_nodes\": [[[\"pa\", 0, 0, {}]], [[\"pb\", 0, 0, {}]]]},"
        "{\"class_name\": \"Dense\", \"name\": \"pb\", \"config\": {\"name\": \"pb\", \"units\": 4}, "
        "\"inbound_nodes\": [[[\"in\", 0, 0, {}]]]},"
        "{\"class_name\": \"Add\", \"name\": \"add\", \"config\": {\"name\": \"add\"}, "
        "\"inbound_nodes\": [[[\"tower\", 0, 0, {}], [\"tower\", 1, 0, {}]]]}],"
        "\"input_layers\": [[\"in\", 0, 0]], \"output_layers\": [[\"add\", 0, 0]]}, \"keras_version\": \"2.16.0\"}";
    kc_model *m = NULL;
    if (kc_model_from_json(j, strlen(j), &m) != KC_STATUS_OK) fail_msg("%s", kc_last_error());
    assert_int_equal(total_params(m), 24 + 24 + 15);
    const kc_layer *out = m->layers[kc__model_output(m)];
    assert_int_equal(m->layers[out->in[1]]->shares, m->layers[out->in[0]]->index);
    /* the output for x is tower(pa(x)) + tower(pb(x)): check against the layers' weights */
    float x[5] = {0.5f, -1, 0.25f, 2, -0.75f}, y[3];
    assert_int_equal(kc_predict(m, x, 1, 1, y), KC_STATUS_OK);
    const kc_layer *pa = layer_named(m, "pa"), *pb = layer_named(m, "pb"), *t = layer_named(m, "tower");
    for (int o = 0; o < 3; o++) {
        double want = 2 * t->w[1].data[o];
        for (int h = 0; h < 4; h++) {
            double ha = pa->w[1].data[h], hb = pb->w[1].data[h];
            for (int i = 0; i < 5; i++) ha += x[i] * pa->w[0].data[i * 4 + h], hb += x[i] * pb->w[0].data[i * 4 + h];
            want += (ha + hb) * t->w[0].data[h * 3 + o];
        }
        assert_true(fabs(y[o] - want) < 1e-5);
    }
    kc_model_destroy(m);
}

/* A convolution shared by inputs of two sizes: each call has its own output shape; the
 * predictions equal those of two separate layers holding the same weights. */
static void test_call_shapes(void **state) {
    (void)state;
    kc_model *ms[2] = {0};
    for (int shared = 0; shared < 2; shared++) {
        kc_model *m = NULL;
        assert_int_equal(kc_functional("sizes", &m), KC_STATUS_OK);
        kc_node x = kc_input(m, KC_INPUT(.shape = {6, 6, 2}));
        kc_node small = kc_apply(m, KC_CROPPING2D(.name = "small", .cropping = {{1, 1}, {2, 0}}), x); /* 4 x 4 */
        kc_node c1 = kc_apply(m, KC_CONV2D(.name = "conv", .filters = 3, .kernel_size = {3, 3}), x);
        kc_node c2 = shared ? kc_apply_shared(m, c1, &small, 1)
                            : kc_apply(m, KC_CONV2D(.name = "conv_b", .filters = 3, .kernel_size = {3, 3}), small);
        kc_node g1 = kc_apply(m, KC_GLOBALAVGPOOL2D(.name = "g1"), c1), g2 = kc_apply(m, KC_GLOBALAVGPOOL2D(.name = "g2"), c2);
        assert_int_equal(kc_set_output(m, kc_merge(m, KC_ADD(.name = "add"), (kc_node[]){g1, g2}, 2)), KC_STATUS_OK);
        assert_int_equal(kc_model_build(m), KC_STATUS_OK);
        ms[shared] = m;
        if (shared) {
            kc_layer_info a, b;
            assert_int_equal(kc_model_layer_info(m, c1, &a), KC_STATUS_OK);
            assert_int_equal(kc_model_layer_info(m, c2, &b), KC_STATUS_OK);
            assert_int_equal(a.output_shape.dim[0], 4); /* (4, 4, 3) */
            assert_int_equal(b.output_shape.dim[0], 2); /* (2, 2, 3) */
            assert_int_equal(b.call, 1);
        }
    }
    copy_layer_weights(ms[0], "conv", ms[1], "conv");
    copy_layer_weights(ms[0], "conv_b", ms[1], "conv");
    float x[2 * 72], y0[6], y1[6];
    for (int i = 0; i < 144; i++) x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
    assert_int_equal(kc_predict(ms[0], x, 2, 2, y0), KC_STATUS_OK);
    assert_int_equal(kc_predict(ms[1], x, 2, 2, y1), KC_STATUS_OK);
    for (int i = 0; i < 6; i++) assert_true(fabsf(y0[i] - y1[i]) < 1e-6f);
    kc_model_destroy(ms[0]);
    kc_model_destroy(ms[1]);
}

static void test_errors(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_functional("bad", &m), KC_STATUS_OK);
    kc_node x = kc_input(m, KC_INPUT(.shape = {5}));
    kc_node a = kc_apply(m, KC_DENSE(.name = "a", .units = 4), x);
    kc_node t = kc_apply(m, KC_DENSE(.name = "t", .units = 3), a);
    kc_node t2 = kc_apply_shared(m, t, &x, 1); /* (5) inputs: t's kernel is (4, 3) */
    kc_set_output(m, kc_merge(m, KC_CONCATENATE(), (kc_node[]){t, t2}, 2));
    assert_int_equal(kc_model_build(m), KC_STATUS_SHAPE);
    assert_non_null(strstr(kc_last_error(), "Dense 't'"));
    assert_non_null(strstr(kc_last_error(), "(4, 3)"));
    assert_non_null(strstr(kc_last_error(), "(5, 3)"));
    kc_model_destroy(m);

    assert_int_equal(kc_functional("bad2", &m), KC_STATUS_OK);
    x = kc_input(m, KC_INPUT(.shape = {5}));
    assert_true(kc_apply_shared(m, x, &x, 1) < 0);
    assert_non_null(strstr(kc_model_error(m), "InputLayer"));
    kc_model_destroy(m);

    assert_int_equal(kc_sequential("seq", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {5}));
    kc_add(m, KC_DENSE(.units = 5));
    kc_node prev = 1;
    assert_true(kc_apply_shared(m, 1, &prev, 1) < 0);
    assert_non_null(strstr(kc_model_error(m), "Sequential"));
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_once),
        cmocka_unit_test(test_gradient_is_the_sum),
        cmocka_unit_test(test_training_moves_one_set),
        cmocka_unit_test(test_freeze_shared),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_call_before_its_input),
        cmocka_unit_test(test_call_shapes),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
