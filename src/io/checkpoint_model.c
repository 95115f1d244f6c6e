/* checkpoint_model.c — a checkpoint's model: its identity (the config hash that tells a
 * checkpoint of another model, and the layer summary that says which layer differs),
 * restoring weights, optimizer state and seeds into a model, and the public
 * kc_checkpoint_load / kc_checkpoint_read_info. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "h5util.h"

#define STATE_ENTRY KC_CKPT_STATE_ENTRY

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

kc_status kc__ckpt_config_hash(kc_model *m, uint64_t *out) {
    char *text = NULL;
    KC_TRY(kc__model_to_json_flags(m, 3, JSON_COMPACT, &text));
    *out = fnv1a(text);
    free(text);
    return KC_STATUS_OK;
}

json_t *kc__ckpt_layer_summary(const kc_model *m) {
    json_t *a = json_array();
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        json_t *e = json_array(), *ws = json_array();
        json_array_append_new(e, json_string(l->name));
        json_array_append_new(e, json_string(l->ops->class_name));
        for (int k = 0; k < l->n_weights; k++) {
            json_t *d = json_array();
            for (int r = 0; r < l->w[k].shape.rank; r++) json_array_append_new(d, json_integer(l->w[k].shape.dim[r]));
            json_array_append_new(ws, d);
        }
        json_array_append_new(e, ws);
        if (l->frozen) json_array_append_new(e, json_string("frozen")); /* only then: older checkpoints match */
        json_array_append_new(a, e);
    }
    return a;
}

static void describe_layer(json_t *e, char *buf, size_t n) {
    const char *name = json_string_value(json_array_get(e, 0)), *cls = json_string_value(json_array_get(e, 1));
    size_t used = (size_t)snprintf(buf, n, "'%s' (%s", name ? name : "?", cls ? cls : "?");
    json_t *ws = json_array_get(e, 2), *d;
    size_t i;
    json_array_foreach(ws, i, d) {
        if (used >= n) break;
        used += (size_t)snprintf(buf + used, n - used, "%s(", i ? ", " : ": weights ");
        for (size_t r = 0; r < json_array_size(d) && used < n; r++)
            used += (size_t)snprintf(buf + used, n - used, "%s%lld", r ? ", " : "",
                                     (long long)json_integer_value(json_array_get(d, r)));
        if (used < n) used += (size_t)snprintf(buf + used, n - used, "%s)", json_array_size(d) == 1 ? "," : "");
    }
    if (used < n) snprintf(buf + used, n - used, "%s)", json_array_size(e) > 3 ? ", frozen" : "");
}

/* The error for a checkpoint of another model: the first layer that differs. */
static kc_status different_model(const char *path, const kc_model *m, json_t *saved) {
    json_t *mine = kc__ckpt_layer_summary(m);
    size_t ns = json_array_size(saved), nm = json_array_size(mine);
    char a[512], b[512];
    kc_status s = KC_STATUS_OK;
    for (size_t i = 0; i < ns && i < nm && s == KC_STATUS_OK; i++) {
        json_t *x = json_array_get(saved, i), *y = json_array_get(mine, i);
        if (json_equal(x, y)) continue;
        describe_layer(x, a, sizeof a);
        describe_layer(y, b, sizeof b);
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: its layer %zu is %s but model '%s' has %s; resume "
                     "with the model that wrote it, with the same layers frozen (or start a new run from the "
                     "checkpoint's model)", path, i, a, m->name, b);
    }
    if (s == KC_STATUS_OK && ns != nm)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: it has %zu layers, model '%s' has %zu; resume with "
                     "the model that wrote it (or start a new run)", path, ns, m->name, nm);
    if (s == KC_STATUS_OK)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: model '%s' has the same layers and weight shapes but "
                     "another config (a name, an activation or an option differs); resume with the model that wrote it",
                     path, m->name);
    json_decref(mine);
    return s;
}

kc_status kc__ckpt_restore_model(const kc__ckpt_state *st, kc_model *m) {
    const char *path = st->path;
    uint64_t hash = 0;
    KC_TRY(kc__ckpt_config_hash(m, &hash));
    if (hash != st->config_hash) return different_model(path, m, st->layers);
    if (!m->compiled)
        return kc__fail(KC_STATUS_STATE, "model '%s' is not compiled; compile it with the checkpoint's optimizer (%s) "
                        "before resuming from '%s', or use kc_checkpoint_load", m->name,
                        kc__optimizer_name(st->opt_kind), path);
    int want = kc__optimizer_slots(st->opt_kind, st->momentum);
    int have = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum);
    if (m->opt.kind != st->opt_kind || want != have)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "'%s' was trained with optimizer %s%s but model '%s' is compiled with %s%s; compile it with "
                        "the checkpoint's optimizer to resume", path, kc__optimizer_name(st->opt_kind),
                        st->momentum > 0 ? " (momentum)" : "", m->name, kc__optimizer_name(m->opt.kind),
                        m->opt.opts.momentum > 0 ? " (momentum)" : "");
    if (st->n_layer_seeds != m->n_layers)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has %d layer seeds for %d layers; the checkpoint is "
                        "damaged", path, st->n_layer_seeds, m->n_layers);
    int64_t file = -1;
    KC_TRY(kc__keras_archive_open_weights(path, &file));
    hid_t f = (hid_t)file;
    float *slab0 = NULL, *slab1 = NULL; /* (n_trainable) each */
    int64_t iters = 0;
    kc_status s = kc__ckpt_read_optimizer(m, file, path, &slab0, &slab1, &iters);
    if (s == KC_STATUS_OK) {
        char label[4200];
        snprintf(label, sizeof label, "'%s': model.weights.h5", path);
        s = kc__keras3_weights_read(m, f, label);
    }
    H5Fclose(f);
    size_t bytes = (size_t)m->n_trainable * sizeof(float);
    if (s == KC_STATUS_OK && slab0 && bytes) s = m->be->to_device(m->be, m->slot0, slab0, bytes);
    if (s == KC_STATUS_OK && slab1 && bytes) s = m->be->to_device(m->be, m->slot1, slab1, bytes);
    free(slab0);
    free(slab1);
    if (s != KC_STATUS_OK) return s;
    m->opt.iterations = iters;
    m->opt.lr_scale = st->lr_scale;
    m->seed = st->model_seed;
    kc__rng_seed(&m->rng, m->seed);
    for (int i = 0; i < m->n_layers; i++) m->layers[i]->seed = st->layer_seeds[i];
    return KC_STATUS_OK;
}

kc_status kc_checkpoint_load(const char *path, kc_model **out) { return kc_checkpoint_load_ex(path, NULL, out); }

kc_status kc_checkpoint_load_ex(const char *path, const kc_device_opts *opts, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_load: the output pointer is NULL");
    *out = NULL;
    char *file = NULL;
    KC_TRY(kc__ckpt_resolve(path, &file));
    kc__ckpt_state st;
    kc_status s = kc__ckpt_state_read(file, &st);
    kc_model *m = NULL;
    kc__h5_silence q;
    kc__h5_silence_begin(&q);
    if (s == KC_STATUS_OK) s = kc_model_load_ex(file, opts, &m);
    if (s == KC_STATUS_OK) s = kc__ckpt_compile_from(&st, m);
    if (s == KC_STATUS_OK) s = kc__ckpt_restore_model(&st, m);
    kc__h5_silence_end(&q);
    if (st.path) kc__ckpt_state_free(&st); /* kc__ckpt_state_read clears it when it fails */
    free(file);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(m);
        return s;
    }
    *out = m;
    return KC_STATUS_OK;
}

kc_status kc_checkpoint_read_info(const char *path, kc_checkpoint_info *out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_read_info: the output is NULL");
    memset(out, 0, sizeof *out);
    char *file = NULL;
    KC_TRY(kc__ckpt_resolve(path, &file));
    kc__ckpt_state st;
    kc_status s = kc__ckpt_state_read(file, &st);
    free(file);
    if (s != KC_STATUS_OK) return s;
    out->epoch = st.pos.epoch;
    out->step = st.pos.step;
    out->iterations = st.iterations;
    out->epochs = st.epochs;
    out->batch_size = st.batch_size;
    out->num_examples = st.num_examples;
    snprintf(out->optimizer, sizeof out->optimizer, "%s", kc__optimizer_name(st.opt_kind));
    out->checkpoint_every_steps = st.every;
    out->keep = st.keep;
    out->save_best_only = st.best_only ? KC_TRUE : KC_FALSE;
    snprintf(out->monitor, sizeof out->monitor, "%s", st.monitor);
    kc__ckpt_state_free(&st);
    return KC_STATUS_OK;
}
