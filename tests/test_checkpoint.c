/* test_checkpoint.c — training checkpoints (kc_fit_opts.checkpoint_dir / resume_from).
 *
 *  - resume is bit-identical: a run stopped by a callback at an awkward step, its model
 *    destroyed, and resumed from the checkpoint folder ends with the same weights
 *    (BatchNormalization's moving statistics included), optimizer slots, iteration count
 *    and history (every loss, bit for bit) as a run never interrupted. Three cases: Adam
 *    resuming into a freshly built model from a mid-epoch step checkpoint; SGD (momentum,
 *    Nesterov) from the checkpoint written where an epoch was cut short, with the model
 *    made by kc_checkpoint_load and the fit options taken from the checkpoint; RMSprop
 *    (momentum) with gradient accumulation and a learning-rate schedule from a checkpoint
 *    taken at the last step of an epoch (before its validation). All with Dropout and
 *    BatchNormalization, and a model seed that is not the default (dropout seeds).
 *  - the file: a Keras 3 archive with optimizer/vars/<i> as Keras keeps them (iteration
 *    int64 first, learning rate, then the slots), a compile_config, the state entry.
 *  - keep and save_best_only (min and max monitors), names and ordering by seq, a second
 *    run into the same folder, option errors.
 *  - rejected: a checkpoint of a different model (layers or config), another optimizer,
 *    other data, another batch size, a damaged file, a plain .keras file, an empty
 *    folder, an unwritable folder — each a clear message naming the file.
 *  - crash safety: this program re-executed as a child that writes checkpoints without
 *    pause is killed with SIGKILL 20 times at random moments; after each kill every
 *    checkpoint left loads, the newest is never a temporary, and the next save removes
 *    stray temporaries. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <hdf5.h>
#include <jansson.h>
#include <zip.h>

#include "kerac.h"
#include "model/model.h"

/* ---------------------------------------------------------------- helpers */

static char g_dir[256];

static const char *tpath(const char *name) {
    static char buf[32][512];
    static int k;
    char *p = buf[k++ % 32];
    snprintf(p, 512, "%s/%s", g_dir, name);
    return p;
}

static void must(kc_status s, const char *what) {
    if (s != KC_STATUS_OK) fail_msg("%s: %s: %s", what, kc_status_name(s), kc_last_error());
}

static void expect_error(kc_status got, kc_status want, const char *const *words) {
    if (got != want)
        fail_msg("expected status '%s', got '%s': %s", kc_status_name(want), kc_status_name(got), kc_last_error());
    for (int i = 0; words && words[i]; i++)
        if (!strstr(kc_last_error(), words[i])) fail_msg("message lacks '%s': %s", words[i], kc_last_error());
}

#define WORDS(...) ((const char *const[]){__VA_ARGS__, NULL})

static void rm_rf(const char *path) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    assert_int_equal(system(cmd), 0);
}

/* Names in dir ending with suffix, sorted; returns the count. */
static int list_names(const char *dir, const char *suffix, char names[][128], int max) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        if (a >= b && a < 128 && strcmp(e->d_name + a - b, suffix) == 0 && n < max) memcpy(names[n++], e->d_name, a + 1);
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char t[128];
            memcpy(t, names[j], 128);
            memcpy(names[j], names[j - 1], 128);
            memcpy(names[j - 1], t, 128);
        }
    return n;
}

/* The highest sequence number among dir's ckpt-*.keras files (0: none). */
static long long newest_seq(const char *dir) {
    char names[64][128];
    int n = list_names(dir, ".keras", names, 64);
    long long best = 0;
    for (int i = 0; i < n; i++)
        if (strncmp(names[i], "ckpt-", 5) == 0 && atoll(names[i] + 5) > best) best = atoll(names[i] + 5);
    return best;
}

/* 61 examples of 8 features, 3 classes (a linear rule plus noise): 48 train / 13 val
 * with validation_split 0.2; batch 7 -> 7 steps per epoch, the last one of 6. */
#define N_EX 61
#define N_FEAT 8
static kc_dataset *make_data(int n) {
    float *x = malloc((size_t)n * N_FEAT * sizeof(float));
    int32_t *y = malloc((size_t)n * sizeof(int32_t));
    assert_non_null(x);
    assert_non_null(y);
    uint32_t r = 12345;
    for (int i = 0; i < n; i++) {
        float s = 0;
        for (int j = 0; j < N_FEAT; j++) {
            r = r * 1664525u + 1013904223u;
            float v = (float)(r >> 8) / 16777216.0f * 2.0f - 1.0f;
            x[i * N_FEAT + j] = v;
            s += v * (float)(j % 3 - 1);
        }
        y[i] = s > 0.4f ? 2 : s < -0.4f ? 0 : 1;
    }
    kc_dataset *d = NULL;
    must(kc_dataset_from_memory(x, y, n, (kc_shape){1, {N_FEAT}}, 3, &d), "dataset");
    free(x);
    free(y);
    return d;
}

/* Dense -> BatchNormalization -> Dropout -> Dense(softmax), seed 77 (not the default). */
static kc_model *make_model(int hidden, const char *act) {
    kc_model *m = NULL;
    must(kc_sequential("ckpt_net", &m), "sequential");
    must(kc_model_set_seed(m, 77), "seed");
    kc_add(m, KC_INPUT(.shape = {N_FEAT}));
    kc_add(m, KC_DENSE(.units = hidden, .activation = act));
    kc_add(m, KC_BATCHNORM(.momentum = 0.8f));
    kc_add(m, KC_DROPOUT(.rate = 0.25f));
    kc_add(m, KC_DENSE(.units = 3, .activation = "softmax"));
    must(kc_model_build(m), "build");
    return m;
}

static kc_model *make_compiled(const kc_optimizer_opts *opt) {
    kc_model *m = make_model(12, "relu");
    must(kc_compile(m, &(kc_compile_opts){.optimizer = *opt, .metrics = {"accuracy"}}), "compile");
    return m;
}

/* Stops training after `at` steps (counted over the whole run). */
typedef struct stopper {
    int64_t at, count;
} stopper;
static kc_callback_action stop_batch(kc_model *m, const kc_batch_logs *l, void *user) {
    (void)m;
    (void)l;
    stopper *s = user;
    return ++s->count == s->at ? KC_STOP_TRAINING : KC_CONTINUE;
}

/* Every weight, both optimizer slots, the iteration count and the history must be equal
 * bit for bit. */
static void expect_same_state(kc_model *a, kc_model *b, const kc_history *ha, const kc_history *hb) {
    int nw = kc_model_num_weights(a);
    assert_int_equal(nw, kc_model_num_weights(b));
    for (int g = 0; g < nw; g++) {
        kc_weight_info wa, wb;
        must(kc_model_weight_info(a, g, &wa), "info");
        must(kc_model_weight_info(b, g, &wb), "info");
        assert_int_equal(wa.size, wb.size);
        float *x = malloc((size_t)wa.size * sizeof(float)), *y = malloc((size_t)wa.size * sizeof(float));
        must(kc_model_get_weight(a, g, x, wa.size), "get");
        must(kc_model_get_weight(b, g, y, wb.size), "get");
        if (memcmp(x, y, (size_t)wa.size * sizeof(float)) != 0) {
            int64_t i = 0;
            while (x[i] == y[i]) i++;
            fail_msg("layer '%s' weight '%s' differs at %lld: %.9g vs %.9g", wa.layer, wa.name, (long long)i, x[i], y[i]);
        }
        free(x);
        free(y);
    }
    assert_int_equal(a->opt.iterations, b->opt.iterations);
    assert_int_equal(a->n_trainable, b->n_trainable);
    size_t bytes = (size_t)a->n_trainable * sizeof(float);
    assert_true((a->slot0 == NULL) == (b->slot0 == NULL));
    assert_true((a->slot1 == NULL) == (b->slot1 == NULL));
    if (a->slot0) assert_memory_equal(a->slot0, b->slot0, bytes);
    if (a->slot1) assert_memory_equal(a->slot1, b->slot1, bytes);
    assert_true(a->opt.lr_scale == b->opt.lr_scale);
    assert_int_equal(kc_history_epochs(ha), kc_history_epochs(hb));
    for (int e = 0; e < kc_history_epochs(ha); e++) {
        const kc_epoch_logs *x = kc_history_epoch(ha, e), *y = kc_history_epoch(hb, e);
        assert_int_equal(x->epoch, y->epoch);
        assert_int_equal(x->steps, y->steps);
        if (x->loss != y->loss || x->val_loss != y->val_loss || x->metrics[0] != y->metrics[0] ||
            x->val_metrics[0] != y->val_metrics[0] || x->lr != y->lr)
            fail_msg("epoch %d logs differ: loss %.17g/%.17g val_loss %.17g/%.17g acc %.17g/%.17g lr %.17g/%.17g", e,
                     x->loss, y->loss, x->val_loss, y->val_loss, x->metrics[0], y->metrics[0], x->lr, y->lr);
    }
}

typedef struct resume_case {
    const char *dir;
    kc_optimizer_opts opt;
    int64_t every;            /* checkpoint_every_steps */
    int grad_accum;
    int64_t stop_at;          /* global step the callback stops at */
    bool load_from_checkpoint; /* kc_checkpoint_load + options from the checkpoint */
    const char *expect_newest;/* "e0001-s000001": the position of the checkpoint resumed from */
} resume_case;

static void run_resume_case(const resume_case *rc) {
    kc_dataset *d = make_data(N_EX);
    kc_fit_opts base = {.epochs = 3, .batch_size = 7, .validation_split = 0.2, .grad_accum = rc->grad_accum,
                        .prefetch = 1};
    /* the reference: never interrupted */
    kc_model *ref = make_compiled(&rc->opt);
    kc_history *href = NULL;
    must(kc_fit(ref, d, &base, &href), "uninterrupted fit");
    assert_int_equal(kc_history_epochs(href), 3);

    /* stopped at an awkward step */
    rm_rf(rc->dir);
    kc_model *m = make_compiled(&rc->opt);
    stopper st = {.at = rc->stop_at};
    kc_callback cb = {.name = "stopper", .user = &st, .on_batch_end = stop_batch};
    kc_callback *cbs[1] = {&cb};
    kc_fit_opts o = base;
    o.checkpoint_dir = rc->dir;
    o.checkpoint_every_steps = rc->every;
    o.keep = 2;
    o.callbacks = cbs;
    o.num_callbacks = 1;
    kc_history *h1 = NULL;
    must(kc_fit(m, d, &o, &h1), "interrupted fit");
    assert_int_equal(st.count, rc->stop_at);
    assert_true(m->opt.iterations == rc->stop_at);
    kc_history_destroy(h1);
    kc_model_destroy(m);

    char newest[1024];
    must(kc_checkpoint_latest(rc->dir, newest, sizeof newest), "latest");
    if (!strstr(newest, rc->expect_newest)) fail_msg("newest checkpoint is %s, expected *%s*", newest, rc->expect_newest);
    char names[16][128];
    int n = list_names(rc->dir, ".keras", names, 16);
    assert_true(n >= 1 && n <= 2);
    assert_int_equal(list_names(rc->dir, ".tmp", names, 16), 0);

    /* resumed in a new model */
    kc_model *r = NULL;
    kc_fit_opts ro = base;
    ro.resume_from = rc->dir;
    ro.checkpoint_dir = rc->dir; /* checkpointing goes on: saves must not change the result */
    ro.checkpoint_every_steps = rc->every;
    ro.keep = 2;
    if (rc->load_from_checkpoint) {
        must(kc_checkpoint_load(rc->dir, &r), "kc_checkpoint_load");
        ro.batch_size = 0; /* taken from the checkpoint */
        ro.validation_split = 0;
        ro.epochs = 0;
    } else {
        r = make_compiled(&rc->opt);
    }
    kc_history *hr = NULL;
    must(kc_fit(r, d, &ro, &hr), "resumed fit");
    expect_same_state(ref, r, href, hr);

    kc_history_destroy(hr);
    kc_history_destroy(href);
    kc_model_destroy(r);
    kc_model_destroy(ref);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- callbacks' state */

/* Stops training at the end of epoch `at` (0-based; -1: never). */
static kc_callback_action stop_epoch(kc_model *m, const kc_epoch_logs *e, void *user) {
    (void)m;
    return e->epoch == *(int *)user ? KC_STOP_TRAINING : KC_CONTINUE;
}

/* EarlyStopping and ReduceLROnPlateau carry their counters across a resume: a run cut
 * after epoch 2 and resumed stops where the uninterrupted one stops, with the same
 * learning rates, weights and history. min_delta 10 makes every epoch after the first
 * "no improvement": EarlyStopping (patience 3) stops at the end of epoch 3; ReduceLROnPlateau
 * (patience 1, cooldown 1) halves the rate at epochs 1 and 3. Without the states the
 * resumed callbacks would start afresh, see epoch 2 as an improvement and go on. */
static void run_with_callbacks(const char *dir, int stop_at, const char *resume, kc_model **out, kc_history **h) {
    kc_dataset *d = make_data(N_EX);
    kc_optimizer_opts opt = KC_SGD(.learning_rate = 0.05, .momentum = 0.9);
    kc_model *m = make_compiled(&opt);
    kc_callback *es = NULL, *rl = NULL;
    must(kc_early_stopping(&(kc_early_stopping_opts){.monitor = "val_loss", .patience = 3, .min_delta = 10}, &es),
         "EarlyStopping");
    must(kc_reduce_lr_on_plateau(&(kc_reduce_lr_opts){.monitor = "val_loss", .patience = 1, .factor = 0.5,
                                                       .min_delta = 10, .cooldown = 1}, &rl),
         "ReduceLROnPlateau");
    int at = stop_at;
    kc_callback stopper_cb = {.name = "stopper", .user = &at, .on_epoch_end = stop_epoch};
    kc_callback *cbs[3] = {es, rl, &stopper_cb};
    kc_fit_opts o = {.epochs = 10, .batch_size = 7, .validation_split = 0.2, .prefetch = 1, .callbacks = cbs,
                     .num_callbacks = 3, .checkpoint_dir = dir, .resume_from = resume};
    must(kc_fit(m, d, &o, h), "fit with callbacks");
    kc_callback_destroy(es);
    kc_callback_destroy(rl);
    kc_dataset_destroy(d);
    *out = m;
}

static void test_resume_keeps_callback_state(void **state) {
    const char *dir = tpath("cb_state");
    rm_rf(dir);
    kc_model *ref = NULL, *cut = NULL, *res = NULL;
    kc_history *href = NULL, *hcut = NULL, *hres = NULL;
    run_with_callbacks(NULL, -1, NULL, &ref, &href);
    assert_int_equal(kc_history_epochs(href), 4); /* stopped by EarlyStopping at epoch 3 */
    assert_string_equal(kc_history_stop_reason(href), "EarlyStopping");
    assert_true(kc_history_epoch(href, 2)->lr < kc_history_epoch(href, 1)->lr); /* halved at the end of epoch 1 */
    run_with_callbacks(dir, 1, NULL, &cut, &hcut);
    assert_int_equal(kc_history_epochs(hcut), 2);
    run_with_callbacks(dir, -1, dir, &res, &hres);
    assert_string_equal(kc_history_stop_reason(hres), "EarlyStopping");
    expect_same_state(ref, res, href, hres);
    kc_history_destroy(href);
    kc_history_destroy(hcut);
    kc_history_destroy(hres);
    kc_model_destroy(ref);
    kc_model_destroy(cut);
    kc_model_destroy(res);
}

/* ---------------------------------------------------------------- (1) bit-identical resume */

static void test_resume_adam_mid_epoch(void **state) {
    (void)state;
    /* checkpoints every 4 steps (7 per epoch); stopped after step 10 (epoch 1, step 3): the
     * stop writes a checkpoint there too, in this mode as in the epoch mode */
    resume_case rc = {.dir = tpath("adam"), .opt = KC_ADAM(.learning_rate = 0.01), .every = 4, .stop_at = 10,
                      .expect_newest = "-e0001-s000003.keras"};
    run_resume_case(&rc);
}

static void test_resume_sgd_cut_epoch(void **state) {
    (void)state;
    /* epoch checkpoints; the run stopped after step 11 (epoch 1, step 4) saves where the
     * epoch was cut short */
    resume_case rc = {.dir = tpath("sgd"), .opt = KC_SGD(.learning_rate = 0.05, .momentum = 0.9, .nesterov = KC_TRUE),
                      .every = 0, .stop_at = 11, .load_from_checkpoint = true, .expect_newest = "-e0001-s000004.keras"};
    run_resume_case(&rc);
}

static void test_resume_rmsprop_epoch_boundary(void **state) {
    (void)state;
    /* every 7 steps = each epoch's last step, before its validation; micro-batches of 4;
     * stopped after step 17 = epoch 2, step 3, where the stop writes its checkpoint */
    resume_case rc = {.dir = tpath("rms"),
                      .opt = KC_RMSPROP(.learning_rate = 0.01, .momentum = 0.5, .schedule = "exponential_decay",
                                        .decay_steps = 5, .decay_rate = 0.7),
                      .every = 7, .grad_accum = 2, .stop_at = 17, .load_from_checkpoint = true,
                      .expect_newest = "-e0002-s000003.keras"};
    run_resume_case(&rc);
}

/* ---------------------------------------------------------------- the file */

static void *zip_entry(const char *path, const char *name, size_t *len) {
    int err = 0;
    zip_t *z = zip_open(path, ZIP_RDONLY, &err);
    assert_non_null(z);
    zip_stat_t st;
    if (zip_stat(z, name, 0, &st) != 0) fail_msg("%s has no entry %s", path, name);
    char *buf = malloc(st.size + 1);
    zip_file_t *f = zip_fopen(z, name, 0);
    assert_non_null(f);
    assert_int_equal(zip_fread(f, buf, st.size), (zip_int64_t)st.size);
    buf[st.size] = 0;
    zip_fclose(f);
    zip_discard(z);
    *len = st.size;
    return buf;
}

static void test_checkpoint_file_layout(void **state) {
    (void)state;
    const char *dir = tpath("layout");
    rm_rf(dir);
    kc_dataset *d = make_data(N_EX);
    kc_model *m = make_compiled(&KC_ADAM(.learning_rate = 0.002));
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 7, .checkpoint_dir = dir}, NULL), "fit");
    char path[1024];
    must(kc_checkpoint_latest(dir, path, sizeof path), "latest");
    /* 61 examples, no split: 9 steps; an epoch checkpoint is "1 epoch done, step 0" */
    assert_non_null(strstr(path, "/ckpt-000001-e0001-s000000.keras"));

    size_t len = 0;
    char *cfg = zip_entry(path, "config.json", &len);
    json_t *root = json_loadb(cfg, len, 0, NULL);
    assert_non_null(root);
    json_t *cc = json_object_get(root, "compile_config");
    assert_non_null(cc);
    json_t *opt = json_object_get(cc, "optimizer");
    assert_string_equal(json_string_value(json_object_get(opt, "class_name")), "Adam");
    assert_true(fabs(json_real_value(json_object_get(json_object_get(opt, "config"), "learning_rate")) - 0.002) < 1e-9);
    assert_string_equal(json_string_value(json_object_get(cc, "loss")), "sparse_categorical_crossentropy");
    json_decref(root);
    free(cfg);

    char *st = zip_entry(path, "kerac_training_state.json", &len);
    root = json_loadb(st, len, 0, NULL);
    assert_non_null(root);
    json_t *pos = json_object_get(root, "position");
    assert_int_equal(json_integer_value(json_object_get(pos, "epoch")), 1);
    assert_int_equal(json_integer_value(json_object_get(pos, "step")), 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(root, "optimizer_state"), "iterations")), 9);
    assert_int_equal(json_array_size(json_object_get(root, "history")), 1);
    json_decref(root);
    free(st);

    /* model.weights.h5: optimizer/vars/0 = iterations (int64), 1 = learning rate, then
     * Adam's momentum and velocity per trainable variable (Dense kernel, bias, BN gamma,
     * beta, Dense_1 kernel, bias): 2 + 12 */
    void *h5 = zip_entry(path, "model.weights.h5", &len);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5Pset_fapl_core(fapl, 4096, 0);
    H5Pset_file_image(fapl, h5, len);
    hid_t f = H5Fopen("ckpt-image.h5", H5F_ACC_RDONLY, fapl);
    assert_true(f >= 0);
    hid_t g = H5Gopen2(f, "optimizer/vars", H5P_DEFAULT);
    assert_true(g >= 0);
    H5G_info_t gi;
    H5Gget_info(g, &gi);
    assert_int_equal(gi.nlinks, 14);
    hid_t ds = H5Dopen2(g, "0", H5P_DEFAULT);
    hid_t ty = H5Dget_type(ds);
    assert_int_equal(H5Tget_class(ty), H5T_INTEGER);
    assert_int_equal(H5Tget_size(ty), 8);
    int64_t it = 0;
    H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it);
    assert_int_equal(it, 9);
    H5Tclose(ty);
    H5Dclose(ds);
    float lr = 0;
    ds = H5Dopen2(g, "1", H5P_DEFAULT);
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, &lr);
    H5Dclose(ds);
    assert_true(lr == 0.002f);
    /* 2 and 3: the first Dense kernel's momentum and velocity (8, 12) = kerac's slots */
    float mom[N_FEAT * 12], vel[N_FEAT * 12];
    ds = H5Dopen2(g, "2", H5P_DEFAULT);
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, mom);
    H5Dclose(ds);
    ds = H5Dopen2(g, "3", H5P_DEFAULT);
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, vel);
    H5Dclose(ds);
    const kc_weight *k0 = &m->layers[1]->w[0];
    assert_memory_equal(mom, m->slot0 + (k0->data - m->params), sizeof mom);
    assert_memory_equal(vel, m->slot1 + (k0->data - m->params), sizeof vel);
    H5Gclose(g);
    H5Fclose(f);
    H5Pclose(fapl);
    free(h5);

    /* a checkpoint is a model file too */
    kc_model *l = NULL;
    must(kc_model_load(path, &l), "kc_model_load of a checkpoint");
    kc_checkpoint_info info;
    must(kc_checkpoint_read_info(dir, &info), "info");
    assert_int_equal(info.epoch, 1);
    assert_int_equal(info.step, 0);
    assert_int_equal(info.iterations, 9);
    assert_int_equal(info.epochs, 1);
    assert_int_equal(info.batch_size, 7);
    assert_int_equal(info.num_examples, N_EX);
    kc_model_destroy(l);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- (2) keep, best only */

static void test_keep_and_names(void **state) {
    (void)state;
    const char *dir = tpath("keep");
    rm_rf(dir);
    kc_dataset *d = make_data(49); /* 7 steps of 7 */
    kc_model *m = make_compiled(&KC_SGD());
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 7, .checkpoint_dir = dir, .checkpoint_every_steps = 1,
                                      .keep = 3}, NULL), "fit keep 3");
    char names[16][128];
    int n = list_names(dir, ".keras", names, 16);
    assert_int_equal(n, 3);
    assert_string_equal(names[0], "ckpt-000005-e0000-s000005.keras");
    assert_string_equal(names[1], "ckpt-000006-e0000-s000006.keras");
    assert_string_equal(names[2], "ckpt-000007-e0000-s000007.keras");
    /* a second run into the same folder: its checkpoints are the newest, the old go first */
    kc_model_destroy(m);
    m = make_compiled(&KC_SGD());
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 7, .checkpoint_dir = dir}, NULL), "fit keep 1");
    n = list_names(dir, ".keras", names, 16);
    assert_int_equal(n, 1);
    assert_string_equal(names[0], "ckpt-000009-e0002-s000000.keras");
    /* a file that only looks like a checkpoint is never one */
    FILE *f = fopen(tpath("keep/ckpt-000099-e0009-s000000.keras.tmp"), "wb");
    fputs("partial", f);
    fclose(f);
    char latest[1024];
    must(kc_checkpoint_latest(dir, latest, sizeof latest), "latest");
    assert_non_null(strstr(latest, "ckpt-000009-e0002-s000000.keras"));
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void check_best_only(const char *sub, const char *monitor, bool max) {
    const char *dir = tpath(sub);
    rm_rf(dir);
    kc_dataset *d = make_data(N_EX);
    kc_model *m = make_compiled(&KC_SGD(.learning_rate = 0.5));
    kc_history *h = NULL;
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 8, .batch_size = 7, .validation_split = 0.2, .checkpoint_dir = dir,
                                      .save_best_only = KC_TRUE, .monitor = monitor, .keep = 100}, &h), "fit best only");
    /* expected: one checkpoint per epoch that beat every earlier one (strictly) */
    char want[16][128];
    int n_want = 0, seq = 0;
    double best = max ? -INFINITY : INFINITY;
    for (int e = 0; e < kc_history_epochs(h); e++) {
        const kc_epoch_logs *l = kc_history_epoch(h, e);
        double v = strcmp(monitor, "val_loss") == 0 ? l->val_loss : l->val_metrics[0];
        if (max ? v > best : v < best) {
            best = v;
            snprintf(want[n_want++], 128, "ckpt-%06d-e%04d-s000000.keras", ++seq, e + 1);
        }
    }
    if (n_want < 2 || n_want == kc_history_epochs(h))
        fail_msg("monitor %s improved in %d of %d epochs: the test needs some epochs that do not improve", monitor,
                 n_want, kc_history_epochs(h));
    char got[16][128];
    int n = list_names(dir, ".keras", got, 16);
    assert_int_equal(n, n_want);
    for (int i = 0; i < n; i++) assert_string_equal(got[i], want[i]);
    /* the best value travels in the newest checkpoint */
    char latest[1024];
    must(kc_checkpoint_latest(dir, latest, sizeof latest), "latest");
    size_t len = 0;
    char *text = zip_entry(latest, "kerac_training_state.json", &len);
    json_t *root = json_loadb(text, len, 0, NULL);
    json_t *ck = json_object_get(root, "checkpoint");
    assert_string_equal(json_string_value(json_object_get(ck, "mode")), max ? "max" : "min");
    assert_true(json_real_value(json_object_get(ck, "best")) == best);
    json_decref(root);
    free(text);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_save_best_only(void **state) {
    (void)state;
    check_best_only("best_loss", "val_loss", false);
    check_best_only("best_acc", "val_accuracy", true);
    /* every 2 steps, on the running training accuracy: a first checkpoint always, then
     * only improvements, all at even global steps */
    const char *dir = tpath("best_steps");
    rm_rf(dir);
    kc_dataset *d = make_data(N_EX);
    kc_model *m = make_compiled(&KC_SGD(.learning_rate = 0.5));
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 2, .batch_size = 7, .checkpoint_dir = dir, .checkpoint_every_steps = 2,
                                      .save_best_only = KC_TRUE, .monitor = "accuracy", .keep = 100}, NULL), "fit");
    char names[32][128];
    int n = list_names(dir, ".keras", names, 32);
    assert_true(n >= 1 && n < 9); /* 18 steps: 9 chances */
    double prev = -1;
    for (int i = 0; i < n; i++) {
        int epoch = 0;
        long long seq = 0, step = 0;
        assert_int_equal(sscanf(names[i], "ckpt-%lld-e%d-s%lld.keras", &seq, &epoch, &step), 3);
        assert_int_equal((epoch * 9 + step) % 2, 0);
        char path[1024];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) fail_msg("path too long");
        size_t len = 0;
        char *text = zip_entry(path, "kerac_training_state.json", &len);
        json_t *root = json_loadb(text, len, 0, NULL);
        double best = json_real_value(json_object_get(json_object_get(root, "checkpoint"), "best"));
        assert_true(best > prev); /* each one better than the one before */
        prev = best;
        json_decref(root);
        free(text);
    }
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

static void test_option_errors(void **state) {
    (void)state;
    kc_dataset *d = make_data(N_EX);
    kc_model *m = make_compiled(&KC_ADAM());
    const char *dir = tpath("opts");
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = dir, .save_best_only = KC_TRUE, .validation_split = 0.2,
                                             .checkpoint_every_steps = 5}, NULL),
                 KC_STATUS_INVALID_ARGUMENT, WORDS("val_loss", "end of an epoch", "every 5 steps"));
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = dir, .save_best_only = KC_TRUE, .monitor = "bogus"}, NULL),
                 KC_STATUS_INVALID_ARGUMENT, WORDS("monitor 'bogus'", "accuracy"));
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = dir, .save_best_only = KC_TRUE}, NULL),
                 KC_STATUS_INVALID_ARGUMENT, WORDS("monitor 'val_loss'", "validation"));
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = dir, .keep = -1}, NULL), KC_STATUS_INVALID_ARGUMENT,
                 WORDS("keep"));
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = dir, .checkpoint_every_steps = -2}, NULL),
                 KC_STATUS_INVALID_ARGUMENT, WORDS("checkpoint_every_steps"));
    /* an unwritable folder (under a regular file) fails before training, naming it */
    FILE *f = fopen(tpath("plainfile"), "wb");
    fclose(f);
    int64_t it = m->opt.iterations;
    expect_error(kc_fit(m, d, &(kc_fit_opts){.checkpoint_dir = tpath("plainfile/sub")}, NULL), KC_STATUS_IO,
                 WORDS("plainfile/sub"));
    assert_int_equal(m->opt.iterations, it);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- (3) rejected checkpoints */

static void test_rejections(void **state) {
    (void)state;
    const char *dir = tpath("rej");
    rm_rf(dir);
    kc_dataset *d = make_data(N_EX);
    kc_model *m = make_compiled(&KC_ADAM());
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 7, .checkpoint_dir = dir}, NULL), "fit");
    char ck[1024];
    must(kc_checkpoint_latest(dir, ck, sizeof ck), "latest");

    /* a different model: another layer size, then the same shapes with another activation */
    kc_model *other = make_model(13, "relu");
    must(kc_compile(other, &(kc_compile_opts){.optimizer = KC_ADAM()}), "compile");
    expect_error(kc_fit(other, d, &(kc_fit_opts){.resume_from = dir}, NULL), KC_STATUS_BAD_FILE,
                 WORDS(ck, "different model", "'dense'", "(8, 13)", "(8, 12)"));
    kc_model_destroy(other);
    other = make_model(12, "tanh");
    must(kc_compile(other, &(kc_compile_opts){.optimizer = KC_ADAM()}), "compile");
    float before[N_FEAT * 12], after[N_FEAT * 12];
    must(kc_model_get_weight(other, 0, before, N_FEAT * 12), "get");
    expect_error(kc_fit(other, d, &(kc_fit_opts){.resume_from = ck}, NULL), KC_STATUS_BAD_FILE,
                 WORDS(ck, "different model", "another config"));
    must(kc_model_get_weight(other, 0, after, N_FEAT * 12), "get");
    assert_memory_equal(before, after, sizeof before); /* untouched */
    kc_model_destroy(other);
    /* another optimizer */
    other = make_compiled(&KC_SGD(.momentum = 0.9));
    expect_error(kc_fit(other, d, &(kc_fit_opts){.resume_from = dir}, NULL), KC_STATUS_INVALID_ARGUMENT,
                 WORDS(ck, "adam", "sgd"));
    kc_model_destroy(other);
    /* other data, another batch size */
    kc_dataset *d2 = make_data(N_EX - 5);
    expect_error(kc_fit(m, d2, &(kc_fit_opts){.resume_from = dir}, NULL), KC_STATUS_INVALID_ARGUMENT,
                 WORDS(ck, "61 examples", "56"));
    kc_dataset_destroy(d2);
    expect_error(kc_fit(m, d, &(kc_fit_opts){.resume_from = dir, .batch_size = 8}, NULL), KC_STATUS_INVALID_ARGUMENT,
                 WORDS(ck, "batch_size 7", "8"));

    /* a damaged checkpoint: truncated, then a garbage state entry */
    size_t len = 0;
    FILE *f = fopen(ck, "rb");
    fseek(f, 0, SEEK_END);
    len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    char *bytes = malloc(len);
    assert_int_equal(fread(bytes, 1, len, f), len);
    fclose(f);
    const char *trunc = tpath("rej_bad/ckpt-000001-e0001-s000000.keras");
    mkdir(tpath("rej_bad"), 0777);
    f = fopen(trunc, "wb");
    fwrite(bytes, 1, len / 2, f);
    fclose(f);
    free(bytes);
    kc_model *l = NULL;
    expect_error(kc_checkpoint_load(tpath("rej_bad"), &l), KC_STATUS_BAD_FILE, WORDS(trunc));
    assert_null(l);
    expect_error(kc_fit(m, d, &(kc_fit_opts){.resume_from = trunc}, NULL), KC_STATUS_BAD_FILE, WORDS(trunc));

    const char *garbled = tpath("garbled.keras");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", ck, garbled);
    assert_int_equal(system(cmd), 0);
    int err = 0;
    zip_t *z = zip_open(garbled, 0, &err);
    assert_non_null(z);
    static const char junk[] = "{\"format\": \"kerac-training-state\", \"version\": 1, \"model\": 3}";
    zip_source_t *src = zip_source_buffer(z, junk, strlen(junk), 0);
    assert_true(zip_file_add(z, "kerac_training_state.json", src, ZIP_FL_OVERWRITE) >= 0);
    assert_int_equal(zip_close(z), 0);
    expect_error(kc_checkpoint_load(garbled, &l), KC_STATUS_BAD_FILE, WORDS(garbled, "damaged"));
    expect_error(kc_checkpoint_read_info(garbled, &(kc_checkpoint_info){0}), KC_STATUS_BAD_FILE, WORDS(garbled));

    /* a plain model file is not a checkpoint; an empty folder has none */
    const char *plain = tpath("plain.keras");
    must(kc_model_save(m, plain), "save");
    expect_error(kc_checkpoint_load(plain, &l), KC_STATUS_BAD_FILE, WORDS(plain, "not a kerac checkpoint"));
    mkdir(tpath("empty"), 0777);
    expect_error(kc_fit(m, d, &(kc_fit_opts){.resume_from = tpath("empty")}, NULL), KC_STATUS_IO,
                 WORDS(tpath("empty"), "no checkpoint"));
    expect_error(kc_checkpoint_load(tpath("missing.keras"), &l), KC_STATUS_IO, WORDS("missing.keras"));
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- (4) crash safety */

static const char *g_self;

/* The child: resume from dir when it holds a checkpoint, then write one after every step
 * until killed. */
static int crash_child(const char *dir) {
    kc_set_num_threads(1);
    kc_dataset *d = make_data(28);
    kc_model *m = NULL;
    kc_status s = KC_STATUS_OK;
    char latest[1024];
    bool resume = kc_checkpoint_latest(dir, latest, sizeof latest) == KC_STATUS_OK;
    if (resume) s = kc_checkpoint_load(dir, &m);
    else m = make_compiled(&KC_ADAM());
    if (s == KC_STATUS_OK)
        s = kc_fit(m, d, &(kc_fit_opts){.epochs = 1000000, .batch_size = 7, .checkpoint_dir = dir,
                                        .checkpoint_every_steps = 1, .keep = 2, .resume_from = resume ? dir : NULL},
                   NULL);
    if (s != KC_STATUS_OK) fprintf(stderr, "crash child: %s\n", kc_last_error());
    kc_model_destroy(m);
    kc_dataset_destroy(d);
    return 3;
}

static void test_crash_safety(void **state) {
    (void)state;
    const char *dir = tpath("crash");
    rm_rf(dir);
    srand(20240601);
    int kills_with_tmp = 0, loads = 0;
    long long last_seq = 0;
    for (int round = 0; round < 20; round++) {
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            execl(g_self, g_self, "--crash-child", dir, (char *)NULL);
            _exit(127);
        }
        /* until the child has written a checkpoint past the last round's (so a loaded machine
         * cannot starve the test of progress), then a random moment later: mid-write or not */
        for (int waited = 0; newest_seq(dir) <= last_seq && waited < 30000; waited += 5) {
            if (waitpid(pid, NULL, WNOHANG) == pid) fail_msg("round %d: the child ended by itself", round);
            nanosleep(&(struct timespec){0, 5 * 1000000L}, NULL);
        }
        long ms = (rand() % 140) * (getenv("KERAC_SANITIZED") ? 4 : 1); /* sanitizers slow the child */
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        int status = 0;
        if (waitpid(pid, &status, WNOHANG) == pid) fail_msg("round %d: the child ended by itself (status %d)", round, status);
        kill(pid, SIGKILL);
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

        char names[64][128];
        int n_tmp = list_names(dir, ".tmp", names, 64);
        if (n_tmp > 0) kills_with_tmp++;
        int n = list_names(dir, ".keras", names, 64);
        for (int i = 0; i < n; i++) { /* every checkpoint left is whole */
            char path[1024];
            if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) fail_msg("path too long");
            kc_model *m = NULL;
            kc_checkpoint_info info;
            kc_status s = kc_model_load(path, &m);
            if (s != KC_STATUS_OK) fail_msg("round %d: %s does not load: %s", round, names[i], kc_last_error());
            kc_model_destroy(m);
            must(kc_checkpoint_read_info(path, &info), "info after a kill");
            loads++;
        }
        /* never lose every checkpoint; keep 2 is exceeded only by files whose writer was killed
         * between its rename and its pruning (each later save prunes them) */
        if (last_seq > 0 && n < 1) fail_msg("round %d: no checkpoint left after a kill", round);
        if (n > 0) {
            char latest[1024];
            must(kc_checkpoint_latest(dir, latest, sizeof latest), "latest after a kill");
            assert_null(strstr(latest, ".tmp"));
            long long seq = atoll(strrchr(latest, '/') + 1 + strlen("ckpt-"));
            assert_true(seq >= last_seq); /* progress is never lost */
            last_seq = seq;
        }
    }
    assert_true(last_seq >= 20); /* each round waited for a new checkpoint before its kill */
    print_message("crash safety: 20 kills, %d of them left a temporary behind, %d checkpoints loaded, newest seq %lld\n",
                  kills_with_tmp, loads, last_seq);
    /* the next save (here, in this process) cleans stray temporaries */
    kc_model *m = NULL;
    must(kc_checkpoint_load(dir, &m), "load the newest");
    kc_dataset *d = make_data(28);
    kc_checkpoint_info info;
    must(kc_checkpoint_read_info(dir, &info), "info");
    stopper st = {.at = 1};
    kc_callback cb = {.name = "stopper", .user = &st, .on_batch_end = stop_batch};
    kc_callback *cbs[1] = {&cb};
    must(kc_fit(m, d, &(kc_fit_opts){.epochs = 1000000, .checkpoint_dir = dir, .checkpoint_every_steps = 1,
                                      .resume_from = dir, .callbacks = cbs, .num_callbacks = 1}, NULL), "one more step");
    assert_int_equal(m->opt.iterations, info.iterations + 1);
    char names[64][128];
    assert_int_equal(list_names(dir, ".tmp", names, 64), 0);
    assert_int_equal(list_names(dir, ".keras", names, 64), 1);
    kc_model_destroy(m);
    kc_dataset_destroy(d);
}

/* ---------------------------------------------------------------- main */

static int setup(void **state) {
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/kerac-ckpt-test-XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--crash-child") == 0) return crash_child(argv[2]);
    static char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    g_self = n > 0 ? (self[n] = '\0', self) : argv[0];
    kc_log_set_level(KC_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_adam_mid_epoch),
        cmocka_unit_test(test_resume_sgd_cut_epoch),
        cmocka_unit_test(test_resume_rmsprop_epoch_boundary),
        cmocka_unit_test(test_resume_keeps_callback_state),
        cmocka_unit_test(test_checkpoint_file_layout),
        cmocka_unit_test(test_keep_and_names),
        cmocka_unit_test(test_save_best_only),
        cmocka_unit_test(test_option_errors),
        cmocka_unit_test(test_rejections),
        cmocka_unit_test(test_crash_safety),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
