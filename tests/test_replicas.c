/* test_replicas.c — several devices in one process (kc_model_set_gpus, src/model/replicas.c)
 * without a GPU: the same path on CPU replicas (kc__model_set_replicas with "cpu" twice):
 * the threads, the in-process collective, the split of the global batch, rank 0's weights,
 * the gradient mean, the reduced metrics, sync_batchnorm. 2 replicas with global batch 16
 * must train the weights 1 model gets with batch 16 and the same seed (within 2e-5), with
 * and without a second fit (the optimizer's state carried to the replicas); the loss they
 * report is the whole batch's. The refusals: a batch that does not split, a collective of
 * several ranks, a replica that cannot be made (named), and kc_model_set_gpus's argument
 * checks; on a machine without a GPU, kc_model_set_gpus says so. The device-collective path
 * (NCCL's place: the buckets enqueued on the backend during backward, the join, the mean on
 * the device) runs on a stand-in: the CPU backend's table with coll_* entries that sum the
 * replicas' buffers in memory; and when one replica "cannot load NCCL", all warn and sum
 * through the host. The GPU run itself is in tests/cli/train_gpus.sh (scripts/gpu-check). */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "model/model.h"
#include "model/replicas.h"

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s", what, kc_last_error());
}

static kc_dataset *make_data(int n) {
    float *x = malloc((size_t)n * 6 * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    assert_non_null(x);
    assert_non_null(y);
    for (int i = 0; i < n * 6; i++) x[i] = (float)((i * 37) % 11) / 11.0f - 0.4f;
    for (int i = 0; i < n; i++) y[i] = (i * 7) % 3;
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, n, (kc_shape){1, {6}}, 3, &d), "dataset");
    free(x);
    free(y);
    return d;
}

/* Dense 16 (relu) [BatchNormalization] Dense 3 (softmax); Adam (a state to carry over) */
static kc_model *make_model(bool bn) {
    kc_model *m = NULL;
    must(kc_sequential("mirrored", &m), "sequential");
    must(kc_model_set_seed(m, 5), "seed");
    kc_add(m, KC_INPUT(.shape = {6}));
    kc_add(m, KC_DENSE(.units = 16, .activation = "relu"));
    if (bn) kc_add(m, KC_BATCHNORM(.momentum = 0.5));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_compile(m, &(kc_compile_opts){.optimizer = {.name = "adam", .learning_rate = 0.01},
                                           .metrics = {"accuracy"}}),
         "compile");
    return m;
}

static void cpu_replicas(kc_model *m, int n) {
    const char *devs[4] = {"cpu", "cpu", "cpu", "cpu"};
    must(kc__model_set_replicas(m, devs, n), "set replicas");
}

/* Every weight of a and b (trainable and not) within tol; returns the largest difference. */
static double compare(kc_model *a, kc_model *b, double tol) {
    double worst = 0;
    assert_int_equal(kc_model_num_weights(a), kc_model_num_weights(b));
    for (int i = 0; i < kc_model_num_weights(a); i++) {
        kc_weight_info wi;
        must(kc_model_weight_info(a, i, &wi), "weight info");
        float *x = malloc((size_t)wi.size * sizeof(float)), *y = malloc((size_t)wi.size * sizeof(float));
        must(kc_model_get_weight(a, i, x, wi.size), "get weight");
        must(kc_model_get_weight(b, i, y, wi.size), "get weight");
        for (int64_t k = 0; k < wi.size; k++) {
            double d = x[k] > y[k] ? x[k] - y[k] : y[k] - x[k];
            if (d > worst) worst = d;
            if (d > tol) fail_msg("%s/%s[%lld]: %.8g vs %.8g", wi.layer, wi.name, (long long)k, x[k], y[k]);
        }
        free(x);
        free(y);
    }
    return worst;
}

static void fit(kc_model *m, kc_dataset *d, int bs, bool sync_bn, kc_history **h) {
    kc_fit_opts o = {.epochs = 2, .batch_size = bs, .seed = 9, .shuffle = KC_TRUE,
                     .sync_batchnorm = sync_bn ? KC_TRUE : KC_DEFAULT};
    must(kc_fit(m, d, &o, h), "fit");
}

static double last_loss(kc_history *h) { return kc_history_epoch(h, kc_history_epochs(h) - 1)->loss; }

/* 2 replicas x 8 = 1 model x 16: the same weights and loss, twice in a row */
static void test_two_replicas_match_one(void **state) {
    (void)state;
    kc_dataset *d = make_data(96);
    kc_model *one = make_model(false), *two = make_model(false);
    cpu_replicas(two, 2);
    for (int round = 0; round < 2; round++) {
        kc_history *h1 = NULL, *h2 = NULL;
        fit(one, d, 16, false, &h1);
        fit(two, d, 16, false, &h2);
        double w = compare(one, two, 2e-5);
        printf("round %d: max |1 model - 2 replicas| = %.3g, loss %.6f vs %.6f\n", round, w, last_loss(h1),
               last_loss(h2));
        assert_true(kc_history_epochs(h2) == 2);
        assert_true(kc_history_epoch(h2, 0)->batch_size == 16); /* the global batch */
        assert_float_equal(last_loss(h1), last_loss(h2), 1e-5);
        kc_history_destroy(h1);
        kc_history_destroy(h2);
    }
    kc_model_destroy(one);
    kc_model_destroy(two);
    kc_dataset_destroy(d);
}

/* sync_batchnorm over 2 replicas = 1 model's statistics and weights; without it they differ */
static void test_sync_batchnorm(void **state) {
    (void)state;
    kc_dataset *d = make_data(64);
    kc_model *one = make_model(true), *sync = make_model(true), *own = make_model(true);
    cpu_replicas(sync, 2);
    cpu_replicas(own, 2);
    fit(one, d, 16, false, NULL);
    fit(sync, d, 16, true, NULL);
    fit(own, d, 16, false, NULL);
    printf("sync_batchnorm: max |1 model - 2 replicas| = %.3g\n", compare(one, sync, 5e-5));
    double worst = compare(one, own, 1e9);
    printf("without it: %.3g\n", worst);
    assert_true(worst > 1e-4);
    kc_model_destroy(one);
    kc_model_destroy(sync);
    kc_model_destroy(own);
    kc_dataset_destroy(d);
}

static void expect_error(kc_status s, const char *needle) {
    assert_int_not_equal(s, KC_STATUS_OK);
    if (!strstr(kc_last_error(), needle)) fail_msg("expected '%s' in: %s", needle, kc_last_error());
}

static void test_refusals(void **state) {
    (void)state;
    kc_dataset *d = make_data(40);
    kc_model *m = make_model(false);
    cpu_replicas(m, 2);
    expect_error(kc_fit(m, d, &(kc_fit_opts){.batch_size = 15}, NULL), "must split evenly over the 2 ranks");
    kc_collective c = {.rank = 0, .size = 2};
    expect_error(kc_fit(m, d, &(kc_fit_opts){.batch_size = 16, .collective = &c}, NULL), "not supported");
    kc_model_destroy(m);
    /* a replica that cannot be made stops the fit, named */
    m = make_model(false);
    const char *bad[2] = {"cpu", "tpu"};
    must(kc__model_set_replicas(m, bad, 2), "set replicas");
    expect_error(kc_fit(m, d, &(kc_fit_opts){.batch_size = 16}, NULL), "replica on tpu");
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_set_gpus_arguments(void **state) {
    (void)state;
    kc_model *m = make_model(false);
    expect_error(kc_model_set_gpus(m, (int[]){0, 1, 0}, 3), "GPU 0 is listed twice");
    expect_error(kc_model_set_gpus(m, (int[]){-1}, 1), "numbered from 0");
    expect_error(kc_model_set_gpus(m, NULL, 2), "ids is NULL");
    expect_error(kc_model_set_gpus(NULL, NULL, 0), "model is NULL");
    /* this model is built on the CPU: on a GPU machine it is not on cuda:0; without one, no GPU */
    kc_status s = kc_model_set_gpus(m, (int[]){0, 1}, 2);
    assert_int_not_equal(s, KC_STATUS_OK);
    assert_true(strstr(kc_last_error(), "needs NVIDIA GPUs") || strstr(kc_last_error(), "is built on cpu") ||
                strstr(kc_last_error(), "does not exist"));
    printf("kc_model_set_gpus here: %s\n", kc_last_error());
    kc_model_destroy(m);
}

/* ---- a stand-in device collective: the CPU backend with coll_* entries (2 replicas) */
typedef struct fake_dev {
    kc_backend *wrap[2];
    pthread_barrier_t bar;
    float *ptr[2];
    int inits, sums[2], joins[2];
    int64_t floats;
    int refuse_rank; /* this rank "cannot load NCCL" (-1: none) */
} fake_dev;
static fake_dev F;

static int fake_rank(kc_backend *be) { return be == F.wrap[0] ? 0 : 1; }

static kc_status fake_unique_id(kc_backend *be, void *id, size_t bytes) {
    if (fake_rank(be) == F.refuse_rank) return kc__fail(KC_STATUS_DEVICE, "libnccl.so.2 cannot be loaded (stand-in)");
    if (id) snprintf(id, bytes, "fake-id");
    return KC_STATUS_OK;
}
static kc_status fake_init(kc_backend *be, const void *id, size_t bytes, int nranks, int rank) {
    (void)bytes;
    assert_string_equal((const char *)id, "fake-id");
    assert_int_equal(nranks, 2);
    assert_int_equal(rank, fake_rank(be));
    __atomic_fetch_add(&F.inits, 1, __ATOMIC_SEQ_CST);
    return KC_STATUS_OK;
}
static kc_status fake_sum(kc_backend *be, float *buf, int64_t n) {
    int r = fake_rank(be);
    F.ptr[r] = buf;
    F.sums[r]++;
    if (r == 0) F.floats += n;
    pthread_barrier_wait(&F.bar);
    for (int64_t i = r; i < n; i += 2) F.ptr[0][i] = F.ptr[1][i] = F.ptr[0][i] + F.ptr[1][i];
    pthread_barrier_wait(&F.bar);
    return KC_STATUS_OK;
}
static kc_status fake_join(kc_backend *be) {
    F.joins[fake_rank(be)]++;
    return KC_STATUS_OK;
}
static const char *fake_describe(kc_backend *be) {
    (void)be;
    return "a stand-in device collective";
}
/* Give model r's backend the stand-in's coll_* entries (its own CPU entries keep their ctx). */
static kc_backend *wrap(kc_backend *be, int r) {
    kc_backend *w = malloc(sizeof *w);
    assert_non_null(w);
    *w = *be;
    w->name = "fakecoll";
    w->coll_unique_id = fake_unique_id;
    w->coll_init = fake_init;
    w->coll_allreduce_sum = fake_sum;
    w->coll_join = fake_join;
    w->coll_describe = fake_describe;
    F.wrap[r] = w;
    return w;
}

static int warned; /* "cannot sum the gradients on the" warnings */
static void on_log(kc_log_level level, const char *message, void *user) {
    (void)level;
    (void)user;
    if (strstr(message, "cannot sum the gradients on the")) warned++;
}

/* 2 CPU replicas with the stand-in collective on their backends, one bucket per layer */
static void fit_device_coll(int refuse_rank) {
    kc_dataset *d = make_data(96);
    kc_model *one = make_model(false), *two = make_model(false);
    cpu_replicas(two, 2);
    must(kc__replicas_open(two), "replicas");
    memset(&F, 0, sizeof F);
    F.refuse_rank = refuse_rank;
    pthread_barrier_init(&F.bar, NULL, 2);
    kc_backend *inner[2] = {two->be, kc__replica(two, 1)->be};
    two->be = wrap(inner[0], 0);
    kc__replica(two, 1)->be = wrap(inner[1], 1);
    warned = 0;
    kc_log_set_callback(on_log, NULL);
    for (int round = 0; round < 2; round++) {
        kc_fit_opts o = {.epochs = 2, .batch_size = 16, .seed = 9, .bucket_bytes = 1};
        must(kc_fit(one, d, &o, NULL), "fit 1 model");
        must(kc_fit(two, d, &o, NULL), "fit 2 replicas");
        printf("%s, round %d: max |1 model - 2 replicas| = %.3g\n",
               refuse_rank < 0 ? "device collective" : "one replica without it", round, compare(one, two, 2e-5));
    }
    kc_log_set_callback(NULL, NULL);
    const int steps = 2 * 2 * (96 / 16); /* 2 fits of 2 epochs of 6 steps */
    if (refuse_rank < 0) {
        assert_int_equal(F.inits, 2);              /* one communicator per replica, kept for the 2nd fit */
        assert_int_equal(F.sums[0], 2 * steps);    /* a bucket per layer (2 Dense layers), each step */
        assert_int_equal(F.sums[1], 2 * steps);
        assert_int_equal(F.floats, steps * two->n_trainable); /* the whole slab each step */
        assert_int_equal(F.joins[0], steps);
        assert_int_equal(warned, 0);
    } else {
        assert_int_equal(F.inits, 0);
        assert_int_equal(F.sums[0] + F.sums[1], 0); /* through the host and the collective instead */
        assert_true(warned >= 1);
    }
    /* the replica's backend goes back before the models are destroyed */
    free(two->be), two->be = inner[0];
    free(kc__replica(two, 1)->be), kc__replica(two, 1)->be = inner[1];
    pthread_barrier_destroy(&F.bar);
    kc_model_destroy(one);
    kc_model_destroy(two);
    kc_dataset_destroy(d);
}

static void test_device_collective(void **state) {
    (void)state;
    fit_device_coll(-1);
}

static void test_without_device_collective(void **state) {
    (void)state;
    fit_device_coll(1);
}

int main(void) {
    kc_set_num_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_replicas_match_one),
        cmocka_unit_test(test_sync_batchnorm),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_set_gpus_arguments),
        cmocka_unit_test(test_device_collective),
        cmocka_unit_test(test_without_device_collective),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
