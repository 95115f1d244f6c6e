/* checkpoint_keras.c — what Keras 3 reads in a checkpoint, so that
 * keras.saving.load_model(path) compiles the model and loads the optimizer state:
 *   - config.json's "compile_config" (optimizer, loss, metrics) as Keras writes it;
 *   - model.weights.h5's optimizer variables where Keras 3 keeps them, optimizer/vars/<i>:
 *     0 the iteration count (int64 scalar), 1 the learning rate (float32 scalar; absent
 *     when a schedule drives it, as in Keras), then the slots in the order Keras builds
 *     them from model.trainable_variables (layers in model.layers order, each layer's
 *     trainable weights in order): Adam/AdamW momentum, velocity per variable
 *     (interleaved); SGD with momentum: momentum per variable; RMSprop: every velocity,
 *     then every momentum (when momentum > 0). Checked against Keras 3.15. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "h5util.h"

/* The trainable weights in Keras's model.trainable_variables order; *out (malloc'd). */
static kc_status keras_trainable(kc_model *m, kc_weight ***out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    int *order = kc__calloc((size_t)KC_MAX(m->n_layers, 1), sizeof(int), "layer order");
    int total = 0;
    for (int i = 0; i < m->n_layers; i++) total += m->layers[i]->n_weights;
    kc_weight **w = kc__calloc((size_t)KC_MAX(total, 1), sizeof *w, "the trainable weights");
    if (!order || !w) {
        free(order);
        free(w);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    int n_order = 0, n = 0;
    kc_status s = kc__keras_layer_order(m, order, &n_order);
    for (int i = 0; i < n_order && s == KC_STATUS_OK; i++) {
        kc_layer *l = m->layers[order[i]];
        for (int k = 0; k < l->n_weights; k++)
            if (kc__weight_trains(l, &l->w[k])) w[n++] = &l->w[k];
    }
    free(order);
    if (s != KC_STATUS_OK) {
        free(w);
        return s;
    }
    *out = w;
    *n_out = n;
    return KC_STATUS_OK;
}

/* Which slab holds Keras variable j (after iteration and learning_rate) of nw weights:
 * its slot and weight index. */
static void keras_slot(kc_opt_kind kind, int j, int nw, int *slot, int *weight) {
    if (kind == KC_OPT_ADAM || kind == KC_OPT_ADAMW) { /* interleaved momentum, velocity */
        *slot = j % 2;
        *weight = j / 2;
    } else { /* SGD: momentums; RMSprop: velocities, then momentums */
        *slot = j / KC_MAX(nw, 1);
        *weight = j % KC_MAX(nw, 1);
    }
}

static bool has_lr_variable(const kc_model *m) { return m->opt.opts.schedule == NULL; }

static int n_keras_vars(const kc_model *m, int nw) {
    return 1 + (has_lr_variable(m) ? 1 : 0) + kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum) * nw;
}

kc_status kc__ckpt_optimizer_vars(kc_model *m, int *n) {
    kc_weight **w = NULL;
    int nw = 0;
    kc_status s = keras_trainable(m, &w, &nw);
    free(w);
    *n = n_keras_vars(m, nw);
    return s;
}

kc_status kc__ckpt_write_optimizer(kc_model *m, int64_t file, void *user) {
    (void)user;
    hid_t f = (hid_t)file;
    kc_weight **w = NULL;
    int nw = 0;
    KC_TRY(keras_trainable(m, &w, &nw));
    int64_t max_size = 1;
    for (int i = 0; i < nw; i++) max_size = KC_MAX(max_size, w[i]->size);
    float *host = malloc((size_t)max_size * sizeof(float)); /* (max weight size) */
    hid_t g = H5I_INVALID_HID;
    kc_status s = host ? kc__h5_make_group(f, "optimizer/vars", &g)
                       : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving the optimizer state");
    if (s == KC_STATUS_OK) s = kc__h5_put_vlen_string(g, "name", kc__optimizer_name(m->opt.kind));
    if (s == KC_STATUS_OK) { /* 0: the iteration count, an int64 scalar */
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t ds = sp < 0 ? H5I_INVALID_HID
                          : H5Dcreate2(g, "0", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int64_t it = m->opt.iterations;
        if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it) < 0) {
            char why[256];
            s = kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot write dataset 'optimizer/vars/0' (%s)",
                         kc__h5_reason(why, sizeof why));
        }
        if (ds >= 0) H5Dclose(ds);
        if (sp >= 0) H5Sclose(sp);
    }
    int idx = 1;
    if (s == KC_STATUS_OK && has_lr_variable(m)) {
        float lr = (float)kc__optimizer_lr(&m->opt, m->opt.iterations);
        kc_shape scalar = {0};
        s = kc__h5_put_f32(g, "1", &scalar, &lr);
        idx = 2;
    }
    int nvars = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum) * nw;
    for (int j = 0; j < nvars && s == KC_STATUS_OK; j++) {
        int slot, wi;
        keras_slot(m->opt.kind, j, nw, &slot, &wi);
        float *base = slot == 0 ? m->slot0 : m->slot1;
        char key[16];
        snprintf(key, sizeof key, "%d", idx + j);
        s = m->be->to_host(m->be, host, base + (w[wi]->data - m->params), (size_t)w[wi]->size * sizeof(float));
        if (s == KC_STATUS_OK) s = kc__h5_put_f32(g, key, &w[wi]->shape, host);
    }
    if (g >= 0) H5Gclose(g);
    free(host);
    free(w);
    return s;
}

kc_status kc__ckpt_read_optimizer(kc_model *m, int64_t file, const char *path, float **slab0, float **slab1,
                                  int64_t *iters) {
    hid_t f = (hid_t)file;
    *slab0 = *slab1 = NULL;
    kc_weight **w = NULL;
    int nw = 0;
    KC_TRY(keras_trainable(m, &w, &nw));
    int want = n_keras_vars(m, nw);
    long have = kc__h5_group_size(f, "optimizer/vars");
    kc_status s = KC_STATUS_OK;
    if (have != want)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s': model.weights.h5 has %ld optimizer variables (optimizer/vars) but %s with %d trainable "
                     "weights needs %d; the checkpoint is damaged or belongs to another optimizer",
                     path, have < 0 ? 0 : have, kc__optimizer_name(m->opt.kind), nw, want);
    if (s == KC_STATUS_OK) {
        hid_t ds = H5Dopen2(f, "optimizer/vars/0", H5P_DEFAULT);
        hid_t sp = ds < 0 ? H5I_INVALID_HID : H5Dget_space(ds);
        hid_t ty = ds < 0 ? H5I_INVALID_HID : H5Dget_type(ds);
        int64_t it = -1;
        if (ds < 0 || sp < 0 || ty < 0 || H5Tget_class(ty) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1 ||
            H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it) < 0 || it < 0)
            s = kc__fail(KC_STATUS_BAD_FILE, "'%s': optimizer/vars/0 (the iteration count) is not a non-negative "
                         "integer scalar; the checkpoint is damaged", path);
        if (ty >= 0) H5Tclose(ty);
        if (sp >= 0) H5Sclose(sp);
        if (ds >= 0) H5Dclose(ds);
        *iters = it;
    }
    size_t slab = (size_t)KC_MAX(m->n_trainable, 1);
    int slots = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum);
    if (s == KC_STATUS_OK) {
        *slab0 = slots >= 1 ? kc__calloc(slab, sizeof(float), "optimizer state") : NULL;
        *slab1 = slots >= 2 ? kc__calloc(slab, sizeof(float), "optimizer state") : NULL;
        if ((slots >= 1 && !*slab0) || (slots >= 2 && !*slab1)) s = KC_STATUS_OUT_OF_MEMORY;
    }
    int first = has_lr_variable(m) ? 2 : 1;
    for (int j = 0; j < slots * nw && s == KC_STATUS_OK; j++) {
        int slot, wi;
        keras_slot(m->opt.kind, j, nw, &slot, &wi);
        char key[40], what[400];
        snprintf(key, sizeof key, "optimizer/vars/%d", first + j);
        const kc_layer *owner = NULL;
        for (int i = 0; i < m->n_layers && !owner; i++)
            if (w[wi] >= m->layers[i]->w && w[wi] < m->layers[i]->w + m->layers[i]->n_weights) owner = m->layers[i];
        snprintf(what, sizeof what, "'%s': optimizer variable %d (the %s slot of layer '%s' weight '%s')", path,
                 first + j, slot == 0 ? "first" : "second", owner ? owner->name : "?", w[wi]->name);
        float *dst = (slot == 0 ? *slab0 : *slab1) + (w[wi]->data - m->params);
        s = kc__h5_read_weight(f, key, &w[wi]->shape, dst, what);
    }
    free(w);
    if (s != KC_STATUS_OK) {
        free(*slab0);
        free(*slab1);
        *slab0 = *slab1 = NULL;
    }
    return s;
}

/* ---------------------------------------------------------------- Keras compile_config */

static json_t *keras_object(const char *module, const char *cls, json_t *config) {
    json_t *o = json_object();
    json_object_set_new(o, "module", json_string(module));
    json_object_set_new(o, "class_name", json_string(cls));
    json_object_set_new(o, "config", config);
    json_object_set_new(o, "registered_name", json_null());
    return o;
}

/* A float32 value as Keras prints it (the variable's value widened to double). */
static json_t *jf32(double v) { return kc__ckpt_jnum((double)(float)v); }

static json_t *keras_lr(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    if (!p->schedule) return jf32(p->learning_rate * m->opt.lr_scale);
    json_t *c = json_object();
    if (strcmp(p->schedule, "exponential_decay") == 0) {
        json_object_set_new(c, "initial_learning_rate", kc__ckpt_jnum(p->learning_rate));
        json_object_set_new(c, "decay_steps", json_integer(p->decay_steps));
        json_object_set_new(c, "decay_rate", kc__ckpt_jnum(p->decay_rate));
        json_object_set_new(c, "staircase", json_boolean(p->staircase > 0));
        json_object_set_new(c, "name", json_string("ExponentialDecay"));
        return keras_object("keras.optimizers.schedules", "ExponentialDecay", c);
    }
    if (strcmp(p->schedule, "cosine_decay") == 0) {
        json_object_set_new(c, "initial_learning_rate", kc__ckpt_jnum(p->learning_rate));
        json_object_set_new(c, "decay_steps", json_integer(p->decay_steps));
        json_object_set_new(c, "alpha", kc__ckpt_jnum(p->alpha));
        json_object_set_new(c, "name", json_string("CosineDecay"));
        json_object_set_new(c, "warmup_target", json_null());
        json_object_set_new(c, "warmup_steps", json_integer(0));
        return keras_object("keras.optimizers.schedules", "CosineDecay", c);
    }
    json_t *b = json_array(), *v = json_array();
    for (int i = 0; i < p->num_boundaries; i++) json_array_append_new(b, json_integer(m->opt.boundaries[i]));
    for (int i = 0; i <= p->num_boundaries; i++) json_array_append_new(v, kc__ckpt_jnum(m->opt.values[i]));
    json_object_set_new(c, "boundaries", b);
    json_object_set_new(c, "values", v);
    json_object_set_new(c, "name", json_string("PiecewiseConstant"));
    return keras_object("keras.optimizers.schedules", "PiecewiseConstantDecay", c);
}

static json_t *keras_optimizer(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    static const char *const cls[] = {"SGD", "Adam", "AdamW", "RMSprop"};
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(kc__optimizer_name(m->opt.kind)));
    json_object_set_new(c, "learning_rate", keras_lr(m));
    json_object_set_new(c, "weight_decay", m->opt.kind == KC_OPT_ADAMW ? kc__ckpt_jnum(p->weight_decay) : json_null());
    json_object_set_new(c, "clipnorm", p->clipnorm > 0 ? kc__ckpt_jnum(p->clipnorm) : json_null());
    json_object_set_new(c, "global_clipnorm", p->global_clipnorm > 0 ? kc__ckpt_jnum(p->global_clipnorm) : json_null());
    json_object_set_new(c, "clipvalue", json_null());
    json_object_set_new(c, "use_ema", json_false());
    json_object_set_new(c, "ema_momentum", json_real(0.99));
    json_object_set_new(c, "ema_overwrite_frequency", json_null());
    json_object_set_new(c, "loss_scale_factor", json_null());
    json_object_set_new(c, "gradient_accumulation_steps", json_null());
    switch (m->opt.kind) {
    case KC_OPT_SGD:
        json_object_set_new(c, "momentum", kc__ckpt_jnum(p->momentum));
        json_object_set_new(c, "nesterov", json_boolean(p->nesterov > 0));
        break;
    case KC_OPT_ADAM:
    case KC_OPT_ADAMW:
        json_object_set_new(c, "beta_1", kc__ckpt_jnum(p->beta_1));
        json_object_set_new(c, "beta_2", kc__ckpt_jnum(p->beta_2));
        json_object_set_new(c, "epsilon", kc__ckpt_jnum(p->epsilon));
        json_object_set_new(c, "amsgrad", json_false());
        break;
    case KC_OPT_RMSPROP:
        json_object_set_new(c, "rho", kc__ckpt_jnum(p->rho));
        json_object_set_new(c, "momentum", kc__ckpt_jnum(p->momentum));
        json_object_set_new(c, "epsilon", kc__ckpt_jnum(p->epsilon));
        json_object_set_new(c, "centered", json_false());
        break;
    }
    return keras_object("keras.optimizers", cls[m->opt.kind], c);
}

static json_t *keras_loss(const kc_model *m) {
    const char *name = kc_loss_name(m->loss);
    static const struct {
        kc_loss_kind kind;
        const char *cls;
    } ce[] = {{KC_LOSS_SPARSE_CCE, "SparseCategoricalCrossentropy"},
              {KC_LOSS_CCE, "CategoricalCrossentropy"},
              {KC_LOSS_BCE, "BinaryCrossentropy"}};
    for (size_t i = 0; m->from_logits && i < KC_ARRAY_LEN(ce); i++)
        if (ce[i].kind == m->loss) {
            json_t *c = json_object();
            json_object_set_new(c, "name", json_string(name));
            json_object_set_new(c, "reduction", json_string("sum_over_batch_size"));
            json_object_set_new(c, "from_logits", json_true());
            return keras_object("keras.losses", ce[i].cls, c);
        }
    return json_string(name);
}

static json_t *keras_metric(const kc_metric *mt) {
    if (mt->k <= 1) return json_string(mt->name);
    const char *name = mt->sparse ? "sparse_top_k_categorical_accuracy" : "top_k_categorical_accuracy";
    if (mt->k == 5) return json_string(name);
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name));
    json_object_set_new(c, "dtype", json_string("float32"));
    json_object_set_new(c, "k", json_integer(mt->k));
    return keras_object("keras.metrics", mt->sparse ? "SparseTopKCategoricalAccuracy" : "TopKCategoricalAccuracy", c);
}

char *kc__ckpt_compile_config(const kc_model *m) {
    json_t *cc = json_object(), *metrics = json_array();
    json_object_set_new(cc, "optimizer", keras_optimizer(m));
    json_object_set_new(cc, "loss", keras_loss(m));
    json_object_set_new(cc, "loss_weights", json_null());
    for (int i = 0; i < m->n_metrics; i++) json_array_append_new(metrics, keras_metric(&m->metrics[i]));
    json_object_set_new(cc, "metrics", metrics);
    json_object_set_new(cc, "weighted_metrics", json_null());
    json_object_set_new(cc, "run_eagerly", json_false());
    json_object_set_new(cc, "steps_per_execution", json_integer(1));
    json_object_set_new(cc, "jit_compile", json_false());
    char *text = json_dumps(cc, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(cc);
    return text;
}
