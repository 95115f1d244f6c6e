/* checkpoint_state.c — kerac_training_state.json: everything beyond the .keras archive
 * that a bit-identical resume needs. Version 1:
 *   model            name, config_hash (FNV-1a of the compact Keras 3 config: "a
 *                    checkpoint of a different model" is detected by it), the model seed
 *                    and every layer's dropout seed, a per-layer summary for messages
 *   compile          kerac's compile options (optimizer with its schedule, loss, metrics)
 *   optimizer_state  iterations, lr_scale (ReduceLROnPlateau), the number of variables
 *   fit              epochs asked for, batch size, training examples, steps per epoch,
 *                    seed, shuffle, validation split
 *   position         epoch, step done in it, examples seen, the epoch's loss and metric
 *                    sums so far, the epoch's logged learning rate, the micro-batch, the
 *                    shuffle generator's state at the start of the epoch (before its
 *                    shuffle). The epoch's order itself is rebuilt by replaying the
 *                    shuffles from the seed; the generator state checks the replay.
 *   checkpoint       the checkpoint options and the best monitored value
 *   history          the finished epochs' logs
 *   callbacks        the callbacks' own states, by position (absent before kerac 0.2)
 * Doubles are written with 17 significant digits, so they read back bit for bit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

#define STATE_ENTRY KC_CKPT_STATE_ENTRY
#define STATE_FORMAT "kerac-training-state"
#define STATE_VERSION 1

/* ---------------------------------------------------------------- writing */

static json_t *jhex(uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
    return json_string(buf);
}

json_t *kc__ckpt_jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *rng_json(const kc_rng *r) {
    json_t *a = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(a, jhex(r->s[i]));
    return a;
}

static json_t *doubles_json(const double *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, kc__ckpt_jnum(v[i]));
    return a;
}

static json_t *epoch_json(const kc_epoch_logs *e, int n_metrics) {
    json_t *o = json_object();
    json_object_set_new(o, "epoch", json_integer(e->epoch));
    json_object_set_new(o, "steps", json_integer(e->steps));
    json_object_set_new(o, "loss", kc__ckpt_jnum(e->loss));
    json_object_set_new(o, "metrics", doubles_json(e->metrics, n_metrics));
    json_object_set_new(o, "has_val", json_boolean(e->has_val));
    json_object_set_new(o, "val_loss", kc__ckpt_jnum(e->val_loss));
    json_object_set_new(o, "val_metrics", doubles_json(e->val_metrics, n_metrics));
    json_object_set_new(o, "lr", kc__ckpt_jnum(e->lr));
    json_object_set_new(o, "seconds", kc__ckpt_jnum(e->seconds));
    json_object_set_new(o, "images_per_second", kc__ckpt_jnum(e->images_per_second));
    json_object_set_new(o, "batch_size", json_integer(e->batch_size));
    json_object_set_new(o, "micro_batch", json_integer(e->micro_batch));
    json_object_set_new(o, "grad_accum", json_integer(e->grad_accum));
    return o;
}

static json_t *compile_json(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(kc__optimizer_name(m->opt.kind)));
    json_object_set_new(o, "learning_rate", kc__ckpt_jnum(p->learning_rate));
    json_object_set_new(o, "momentum", kc__ckpt_jnum(p->momentum));
    json_object_set_new(o, "nesterov", json_integer(p->nesterov));
    json_object_set_new(o, "beta_1", kc__ckpt_jnum(p->beta_1));
    json_object_set_new(o, "beta_2", kc__ckpt_jnum(p->beta_2));
    json_object_set_new(o, "epsilon", kc__ckpt_jnum(p->epsilon));
    json_object_set_new(o, "weight_decay", kc__ckpt_jnum(p->weight_decay));
    json_object_set_new(o, "rho", kc__ckpt_jnum(p->rho));
    json_object_set_new(o, "clipnorm", kc__ckpt_jnum(p->clipnorm));
    json_object_set_new(o, "global_clipnorm", kc__ckpt_jnum(p->global_clipnorm));
    json_object_set_new(o, "schedule", p->schedule ? json_string(p->schedule) : json_null());
    json_object_set_new(o, "decay_steps", json_integer(p->decay_steps));
    json_object_set_new(o, "decay_rate", kc__ckpt_jnum(p->decay_rate));
    json_object_set_new(o, "staircase", json_integer(p->staircase));
    json_object_set_new(o, "alpha", kc__ckpt_jnum(p->alpha));
    json_t *b = json_array(), *v = json_array();
    for (int i = 0; p->schedule && i < p->num_boundaries; i++)
        json_array_append_new(b, json_integer(m->opt.boundaries[i]));
    for (int i = 0; p->schedule && i <= p->num_boundaries && p->num_boundaries > 0; i++)
        json_array_append_new(v, kc__ckpt_jnum(m->opt.values[i]));
    json_object_set_new(o, "boundaries", b);
    json_object_set_new(o, "values", v);
    json_t *c = json_object(), *metrics = json_array();
    int top_k = 0;
    for (int i = 0; i < m->n_metrics; i++) {
        json_array_append_new(metrics, json_string(m->metrics[i].name));
        if (m->metrics[i].k > 1) top_k = m->metrics[i].k;
    }
    json_object_set_new(c, "optimizer", o);
    json_object_set_new(c, "loss", json_string(kc_loss_name(m->loss)));
    json_object_set_new(c, "from_logits", json_boolean(m->from_logits));
    json_object_set_new(c, "metrics", metrics);
    json_object_set_new(c, "top_k", json_integer(top_k));
    return c;
}

kc_status kc__ckpt_state_json(const kc__ckpt *c, kc_model *m, const kc__fit_pos *p, const kc_epoch_logs *hist,
                              int n_hist, char **out) {
    *out = NULL;
    uint64_t hash = 0;
    KC_TRY(kc__ckpt_config_hash(m, &hash));
    json_t *root = json_object(), *model = json_object(), *seeds = json_array();
    json_object_set_new(root, "format", json_string(STATE_FORMAT));
    json_object_set_new(root, "version", json_integer(STATE_VERSION));
    json_object_set_new(root, "kerac_version", json_string(kc_version()));
    json_object_set_new(model, "name", json_string(m->name));
    json_object_set_new(model, "config_hash", jhex(hash));
    json_object_set_new(model, "seed", jhex(m->seed));
    for (int i = 0; i < m->n_layers; i++) json_array_append_new(seeds, jhex(m->layers[i]->seed));
    json_object_set_new(model, "layer_seeds", seeds);
    json_object_set_new(model, "layers", kc__ckpt_layer_summary(m));
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "compile", compile_json(m));

    int n_vars = 0;
    kc_status s = kc__ckpt_optimizer_vars(m, &n_vars);
    json_t *os = json_object();
    json_object_set_new(os, "iterations", json_integer(m->opt.iterations));
    json_object_set_new(os, "lr_scale", kc__ckpt_jnum(m->opt.lr_scale));
    json_object_set_new(os, "variables", json_integer(n_vars));
    json_object_set_new(root, "optimizer_state", os);

    const kc__fit_geom *g = &c->geom;
    json_t *fit = json_object();
    json_object_set_new(fit, "epochs", json_integer(g->epochs));
    json_object_set_new(fit, "batch_size", json_integer(g->batch_size));
    json_object_set_new(fit, "num_examples", json_integer(g->num_examples));
    json_object_set_new(fit, "steps_per_epoch", json_integer(g->steps));
    json_object_set_new(fit, "seed", jhex(g->seed));
    json_object_set_new(fit, "shuffle", json_boolean(g->shuffle));
    json_object_set_new(fit, "validation_split", kc__ckpt_jnum(g->validation_split));
    json_object_set_new(fit, "has_validation", json_boolean(g->has_val));
    json_object_set_new(root, "fit", fit);

    json_t *pos = json_object();
    json_object_set_new(pos, "epoch", json_integer(p->epoch));
    json_object_set_new(pos, "step", json_integer(p->step));
    json_object_set_new(pos, "global_step", json_integer((json_int_t)p->epoch * g->steps + p->step));
    json_object_set_new(pos, "seen", json_integer(p->seen));
    json_object_set_new(pos, "sums", doubles_json(p->sums, 1 + m->n_metrics));
    json_object_set_new(pos, "epoch_lr", kc__ckpt_jnum(p->epoch_lr));
    json_object_set_new(pos, "micro_batch", json_integer(p->micro_batch));
    json_object_set_new(pos, "rng", rng_json(&p->rng));
    json_object_set_new(root, "position", pos);

    json_t *ck = json_object();
    json_object_set_new(ck, "every_steps", json_integer(c->every));
    json_object_set_new(ck, "keep", json_integer(c->keep));
    json_object_set_new(ck, "save_best_only", json_boolean(c->best_only));
    json_object_set_new(ck, "monitor", json_string(c->monitor));
    json_object_set_new(ck, "mode", json_string(c->max_mode ? "max" : "min"));
    json_object_set_new(ck, "best", c->has_best ? kc__ckpt_jnum(c->best) : json_null());
    json_object_set_new(root, "checkpoint", ck);

    json_t *h = json_array();
    for (int i = 0; i < n_hist; i++) json_array_append_new(h, epoch_json(&hist[i], m->n_metrics));
    json_object_set_new(root, "history", h);

    json_t *cbs = json_array(); /* the callbacks' own states, by position */
    for (int i = 0; i < c->n_cbs; i++) {
        const kc_callback *cb = c->cbs[i];
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(cb && cb->name ? cb->name : ""));
        double v[KC_CALLBACK_STATE_MAX];
        int n = cb && cb->get_state ? cb->get_state(cb->user, v, KC_CALLBACK_STATE_MAX) : -1;
        json_object_set_new(e, "state", n >= 0 ? doubles_json(v, KC_MIN(n, KC_CALLBACK_STATE_MAX)) : json_null());
        json_array_append_new(cbs, e);
    }
    json_object_set_new(root, "callbacks", cbs);

    char *text = s == KC_STATUS_OK ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
                                   : NULL;
    json_decref(root);
    if (s == KC_STATUS_OK && !text)
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing the training state of model '%s'", m->name);
    *out = text;
    return s;
}

/* ---------------------------------------------------------------- reading */

typedef struct reader {
    const char *path;
    kc_status s;             /* first error */
} reader;

static json_t *field(reader *r, json_t *obj, const char *key) {
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has no '%s'; the checkpoint is damaged", r->path,
                        key);
    return v;
}

static int64_t get_int(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_integer(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not an integer; the checkpoint is damaged",
                        r->path, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static double num_value(json_t *v) { return json_is_null(v) ? NAN : json_number_value(v); }

static double get_num(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_number(v) && !json_is_null(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a number; the checkpoint is damaged",
                        r->path, key);
    return v ? num_value(v) : NAN;
}

static bool get_bool(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_boolean(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE,
                        "'%s': " STATE_ENTRY ": '%s' is not true or false; the checkpoint is damaged", r->path, key);
    return json_is_true(v);
}

static const char *get_str(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_string(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a string; the checkpoint is damaged",
                        r->path, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static uint64_t hex_value(reader *r, json_t *v, const char *key) {
    const char *t = json_string_value(v);
    char *end = NULL;
    unsigned long long x = t ? strtoull(t, &end, 16) : 0;
    if ((!t || !*t || *end) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE,
                        "'%s': " STATE_ENTRY ": '%s' is not a hexadecimal number; the checkpoint is damaged", r->path,
                        key);
    return (uint64_t)x;
}

static uint64_t get_hex(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    return v ? hex_value(r, v, key) : 0;
}

static void get_doubles(reader *r, json_t *obj, const char *key, double *dst, int max) {
    json_t *a = field(r, obj, key);
    if (a && !json_is_array(a) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a list; the checkpoint is damaged",
                        r->path, key);
    for (int i = 0; i < max; i++) dst[i] = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a) && (int)i < max; i++)
        dst[i] = num_value(json_array_get(a, i));
}


void kc__ckpt_state_free(kc__ckpt_state *st) {
    free(st->path);
    free(st->cbs);
    json_decref(st->root);
    free(st->layer_seeds);
    free(st->hist);
    memset(st, 0, sizeof *st);
}

static kc_status parse_opt_kind(reader *r, const char *name, kc_opt_kind *out) {
    static const kc_opt_kind kinds[] = {KC_OPT_SGD, KC_OPT_ADAM, KC_OPT_ADAMW, KC_OPT_RMSPROP};
    for (size_t i = 0; i < KC_ARRAY_LEN(kinds); i++)
        if (strcmp(name, kc__optimizer_name(kinds[i])) == 0) {
            *out = kinds[i];
            return KC_STATUS_OK;
        }
    if (r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": unknown optimizer '%s'; the checkpoint is damaged",
                        r->path, name);
    return r->s;
}

/* The entry's JSON into st->root (st->path set); on failure st is freed. */
static kc_status load_root(const char *path, kc__ckpt_state *st) {
    memset(st, 0, sizeof *st);
    st->path = kc__strdup(path);
    if (!st->path) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    char *text = NULL;
    size_t len = 0;
    bool present = false;
    kc_status s = kc__keras_archive_read_entry(path, STATE_ENTRY, &text, &len, &present);
    if (s == KC_STATUS_OK && !present)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is not a kerac checkpoint: it has no " STATE_ENTRY " entry (a plain .keras model file?); "
                     "load it with kc_model_load / kerac train --init-from", path);
    if (s != KC_STATUS_OK) {
        free(text);
        kc__ckpt_state_free(st);
        return s;
    }
    json_error_t je;
    st->root = json_loadb(text, len, 0, &je);
    free(text);
    if (!json_is_object(st->root)) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " is not a JSON object (line %d: %s); the checkpoint is "
                     "damaged", path, je.line, st->root ? "not an object" : je.text);
        kc__ckpt_state_free(st);
        return s;
    }
    return KC_STATUS_OK;
}

/* The format, the version and the model's identity. */
static void read_model(reader *r, kc__ckpt_state *st) {
    json_t *root = st->root;
    const char *format = get_str(r, root, "format");
    int64_t version = get_int(r, root, "version");
    if (r->s == KC_STATUS_OK && strcmp(format, STATE_FORMAT) != 0)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has format '%s', not '" STATE_FORMAT "'", r->path,
                        format);
    if (r->s == KC_STATUS_OK && version != STATE_VERSION)
        r->s = kc__fail(KC_STATUS_UNSUPPORTED, "'%s': training state version %lld; this kerac (%s) reads version %d: "
                        "resume with the kerac that wrote it", r->path, (long long)version, kc_version(),
                        STATE_VERSION);

    json_t *model = field(r, root, "model");
    snprintf(st->model_name, sizeof st->model_name, "%s", get_str(r, model, "name"));
    st->config_hash = get_hex(r, model, "config_hash");
    st->model_seed = get_hex(r, model, "seed");
    json_t *seeds = field(r, model, "layer_seeds");
    st->layers = field(r, model, "layers");
    if (r->s == KC_STATUS_OK && (!json_is_array(seeds) || !json_is_array(st->layers)))
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": the layer list is damaged", r->path);
    if (r->s == KC_STATUS_OK) {
        st->n_layer_seeds = (int)json_array_size(seeds);
        st->layer_seeds = kc__calloc((size_t)KC_MAX(st->n_layer_seeds, 1), sizeof(uint64_t), "layer seeds");
        if (!st->layer_seeds) r->s = KC_STATUS_OUT_OF_MEMORY;
        for (int i = 0; r->s == KC_STATUS_OK && i < st->n_layer_seeds; i++)
            st->layer_seeds[i] = hex_value(r, json_array_get(seeds, (size_t)i), "layer_seeds");
    }
}

/* The compile options, the optimizer's state, the fit's settings, the position and the
 * checkpoint options. */
static void read_run(reader *r, kc__ckpt_state *st) {
    json_t *root = st->root;
    st->compile = field(r, root, "compile");
    json_t *opt = field(r, st->compile, "optimizer");
    if (r->s == KC_STATUS_OK) parse_opt_kind(r, get_str(r, opt, "name"), &st->opt_kind);
    st->momentum = get_num(r, opt, "momentum");

    json_t *os = field(r, root, "optimizer_state");
    st->iterations = get_int(r, os, "iterations");
    st->lr_scale = get_num(r, os, "lr_scale");

    json_t *fit = field(r, root, "fit");
    st->epochs = (int)get_int(r, fit, "epochs");
    st->batch_size = (int)get_int(r, fit, "batch_size");
    st->num_examples = get_int(r, fit, "num_examples");
    st->steps = get_int(r, fit, "steps_per_epoch");
    st->seed = get_hex(r, fit, "seed");
    st->shuffle = get_bool(r, fit, "shuffle");
    st->validation_split = get_num(r, fit, "validation_split");

    json_t *pos = field(r, root, "position");
    st->pos.epoch = (int)get_int(r, pos, "epoch");
    st->pos.step = get_int(r, pos, "step");
    st->pos.seen = get_int(r, pos, "seen");
    get_doubles(r, pos, "sums", st->pos.sums, 1 + KC_MAX_METRICS);
    st->pos.epoch_lr = get_num(r, pos, "epoch_lr");
    st->pos.micro_batch = (int)get_int(r, pos, "micro_batch");
    json_t *rng = field(r, pos, "rng");
    if (r->s == KC_STATUS_OK && (!json_is_array(rng) || json_array_size(rng) != 4))
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'rng' is not a list of 4 numbers", r->path);
    for (size_t i = 0; r->s == KC_STATUS_OK && i < 4; i++)
        st->pos.rng.s[i] = hex_value(r, json_array_get(rng, i), "rng");

    json_t *ck = field(r, root, "checkpoint");
    st->best_only = get_bool(r, ck, "save_best_only");
    st->every = get_int(r, ck, "every_steps");
    st->keep = (int)get_int(r, ck, "keep");
    snprintf(st->monitor, sizeof st->monitor, "%s", get_str(r, ck, "monitor"));
    json_t *best = field(r, ck, "best");
    st->has_best = json_is_number(best);
    st->best = st->has_best ? json_number_value(best) : NAN;
}

static void read_history(reader *r, kc__ckpt_state *st) {
    json_t *root = st->root;
    json_t *h = field(r, root, "history");
    if (r->s == KC_STATUS_OK && !json_is_array(h))
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'history' is not a list", r->path);
    if (r->s == KC_STATUS_OK) {
        st->n_hist = (int)json_array_size(h);
        st->hist = kc__calloc((size_t)KC_MAX(st->n_hist, 1), sizeof *st->hist, "the history");
        if (!st->hist) r->s = KC_STATUS_OUT_OF_MEMORY;
    }
    for (int i = 0; r->s == KC_STATUS_OK && i < st->n_hist; i++) {
        json_t *e = json_array_get(h, (size_t)i);
        kc_epoch_logs *l = &st->hist[i];
        l->epoch = (int)get_int(r, e, "epoch");
        l->steps = get_int(r, e, "steps");
        l->loss = get_num(r, e, "loss");
        get_doubles(r, e, "metrics", l->metrics, KC_MAX_METRICS);
        l->has_val = get_bool(r, e, "has_val");
        l->val_loss = get_num(r, e, "val_loss");
        get_doubles(r, e, "val_metrics", l->val_metrics, KC_MAX_METRICS);
        l->lr = get_num(r, e, "lr");
        l->seconds = get_num(r, e, "seconds");
        l->images_per_second = get_num(r, e, "images_per_second");
        l->batch_size = (int)get_int(r, e, "batch_size");
        l->micro_batch = (int)get_int(r, e, "micro_batch");
        l->grad_accum = (int)get_int(r, e, "grad_accum");
    }
}

static void read_callbacks(reader *r, kc__ckpt_state *st) {
    json_t *root = st->root;
    json_t *cbs = json_object_get(root, "callbacks");
    if (r->s == KC_STATUS_OK && cbs && !json_is_array(cbs))
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'callbacks' is not a list", r->path);
    if (r->s == KC_STATUS_OK && json_array_size(cbs) > 0) {
        st->n_cbs = (int)json_array_size(cbs);
        st->cbs = kc__calloc((size_t)st->n_cbs, sizeof *st->cbs, "the callbacks' states");
        if (!st->cbs) r->s = KC_STATUS_OUT_OF_MEMORY;
    }
    for (int i = 0; r->s == KC_STATUS_OK && i < st->n_cbs; i++) {
        json_t *e = json_array_get(cbs, (size_t)i), *v = field(r, e, "state");
        kc__ckpt_callback *cb = &st->cbs[i];
        snprintf(cb->name, sizeof cb->name, "%s", get_str(r, e, "name"));
        cb->n = json_is_array(v) ? (int)KC_MIN(json_array_size(v), (size_t)KC_CALLBACK_STATE_MAX) : -1;
        for (int k = 0; k < cb->n; k++) cb->v[k] = num_value(json_array_get(v, (size_t)k));
    }
}

kc_status kc__ckpt_state_read(const char *path, kc__ckpt_state *st) {
    KC_TRY(load_root(path, st));
    reader r = {st->path, KC_STATUS_OK};
    read_model(&r, st);
    read_run(&r, st);
    read_history(&r, st);
    read_callbacks(&r, st);
    if (r.s == KC_STATUS_OK &&
        (st->pos.epoch < 0 || st->pos.step < 0 || st->batch_size < 1 || st->steps < 0 || st->num_examples < 0 ||
         st->iterations < 0 || st->pos.micro_batch < 1 || st->pos.micro_batch > st->batch_size ||
         st->pos.step > st->steps || !(st->lr_scale > 0)))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": the position or sizes are out of range; the "
                       "checkpoint is damaged", st->path);
    if (r.s != KC_STATUS_OK) kc__ckpt_state_free(st);
    return r.s;
}

kc_status kc__ckpt_compile_from(const kc__ckpt_state *st, kc_model *m) {
    reader r = {st->path, KC_STATUS_OK};
    json_t *c = st->compile, *o = field(&r, c, "optimizer");
    kc_compile_opts co = {0};
    kc_optimizer_opts *p = &co.optimizer;
    p->name = get_str(&r, o, "name");
    p->learning_rate = get_num(&r, o, "learning_rate");
    p->momentum = get_num(&r, o, "momentum");
    p->nesterov = (int)get_int(&r, o, "nesterov");
    p->beta_1 = get_num(&r, o, "beta_1");
    p->beta_2 = get_num(&r, o, "beta_2");
    p->epsilon = get_num(&r, o, "epsilon");
    p->weight_decay = get_num(&r, o, "weight_decay");
    p->rho = get_num(&r, o, "rho");
    p->clipnorm = get_num(&r, o, "clipnorm");
    json_t *gc = json_object_get(o, "global_clipnorm"); /* absent from checkpoints of kerac 0.1 */
    p->global_clipnorm = gc ? get_num(&r, o, "global_clipnorm") : 0;
    /* the optimizer keeps the schedule's name pointer: give it one that lives on */
    static const char *const schedules[] = {"exponential_decay", "cosine_decay", "piecewise_constant"};
    json_t *sch = field(&r, o, "schedule");
    p->schedule = NULL;
    for (size_t i = 0; json_is_string(sch) && i < KC_ARRAY_LEN(schedules); i++)
        if (strcmp(json_string_value(sch), schedules[i]) == 0) p->schedule = schedules[i];
    if (json_is_string(sch) && !p->schedule && r.s == KC_STATUS_OK)
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": unknown learning-rate schedule '%s'", st->path,
                       json_string_value(sch));
    p->decay_steps = get_int(&r, o, "decay_steps");
    p->decay_rate = get_num(&r, o, "decay_rate");
    p->staircase = (int)get_int(&r, o, "staircase");
    p->alpha = get_num(&r, o, "alpha");
    json_t *b = field(&r, o, "boundaries"), *v = field(&r, o, "values");
    int nb = (int)json_array_size(b);
    int64_t *bounds = nb ? calloc((size_t)nb, sizeof *bounds) : NULL;
    double *values = nb ? calloc((size_t)nb + 1, sizeof *values) : NULL;
    if (nb && (!bounds || !values) && r.s == KC_STATUS_OK)
        r.s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", st->path);
    for (int i = 0; r.s == KC_STATUS_OK && i < nb; i++)
        bounds[i] = (int64_t)json_integer_value(json_array_get(b, (size_t)i));
    for (int i = 0; r.s == KC_STATUS_OK && nb && i <= nb; i++) values[i] = num_value(json_array_get(v, (size_t)i));
    p->num_boundaries = nb;
    p->boundaries = bounds;
    p->values = values;
    co.loss = get_str(&r, c, "loss");
    co.from_logits = get_bool(&r, c, "from_logits") ? KC_TRUE : KC_DEFAULT;
    co.top_k = (int)get_int(&r, c, "top_k");
    json_t *metrics = field(&r, c, "metrics");
    for (size_t i = 0; json_is_array(metrics) && i < json_array_size(metrics) && i < KC_MAX_METRICS; i++)
        co.metrics[i] = json_string_value(json_array_get(metrics, i));
    /* NaN stands for a missing number: the optimizer's default */
    double *nums[] = {&p->learning_rate, &p->momentum, &p->beta_1, &p->beta_2, &p->epsilon,
                      &p->weight_decay, &p->rho, &p->clipnorm, &p->global_clipnorm, &p->decay_rate, &p->alpha};
    for (size_t i = 0; i < KC_ARRAY_LEN(nums); i++)
        if (isnan(*nums[i])) *nums[i] = 0;
    kc_status s = r.s;
    if (s == KC_STATUS_OK) {
        s = kc_compile(m, &co);
        if (s != KC_STATUS_OK) kc__wrap(s, "compiling the model of '%s': ", st->path);
    }
    free(bounds);
    free(values);
    return s;
}
