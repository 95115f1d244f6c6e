/* model.c — building the graph: Sequential and Functional builders, sticky errors,
 * auto names, shape inference, weights (one slab) and introspection. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../env/env.h"
#include "device.h"
#include "dist.h"
#include "model.h"
#include "replicas.h"

#define KC_DEFAULT_SEED 1337u

static kc_status model_create(const char *name, bool sequential, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model: the output pointer is NULL");
    *out = NULL;
    kc_model *m = kc__calloc(1, sizeof *m, "a model");
    if (!m) return KC_STATUS_OUT_OF_MEMORY;
    snprintf(m->name, sizeof m->name, "%s", name && *name ? name : (sequential ? "sequential" : "functional"));
    m->sequential = sequential;
    m->output = -1;
    m->seed = KC_DEFAULT_SEED;
    kc__rng_seed(&m->rng, m->seed);
    *out = m;
    return KC_STATUS_OK;
}

kc_status kc_sequential(const char *name, kc_model **out) { return model_create(name, true, out); }
kc_status kc_functional(const char *name, kc_model **out) { return model_create(name, false, out); }

static void model_free_device(kc_model *m) {
    if (!m->be) return;
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    m->be->free(m->be, m->slot0);
    m->be->free(m->be, m->slot1);
    m->be->free(m->be, m->accum);
    m->be->free(m->be, m->arena);
    m->be->free(m->be, m->dev_scalars);
    m->be->free(m->be, m->dev_norms);
    m->be->free(m->be, m->view_grads);
    m->view_grads = NULL;
    m->params = m->grads = m->slot0 = m->slot1 = m->accum = NULL;
    m->arena = NULL;
    m->dev_scalars = m->dev_norms = NULL;
    m->batch_targets = NULL;
}

void kc_model_destroy(kc_model *m) {
    if (!m) return;
    model_free_device(m);
    kc_backend_destroy(m->be);
    for (int i = 0; i < m->n_layers; i++) kc__layer_destroy(m->layers[i]);
    free(m->layers);
    kc__name_index_free(&m->names);
    kc__plan_free(&m->plan);
    free(m->opt.boundaries);
    free(m->opt.values);
    free(m->prof_fwd);
    free(m->prof_bwd);
    free(m->prof_fwd_n);
    free(m->prof_bwd_n);
    for (int i = 0; m->image_classes && i < m->image_opts.num_class_names; i++) free(m->image_classes[i]);
    free(m->image_classes);
    free(m->nests);
    kc__observe_free(m);
    free(m->dist_host);
    kc__dist_ov_free(m->dist_ov);
    free(m->host_scratch.p);
    kc__replicas_free(m);
    free(m);
}

kc_status kc__model_fail(kc_model *m, kc_status s) {
    if (m && m->err == KC_STATUS_OK && s != KC_STATUS_OK) {
        m->err = s;
        snprintf(m->errmsg, sizeof m->errmsg, "%s", kc_last_error());
    }
    return s;
}

kc_status kc_model_status(const kc_model *m) { return m ? m->err : KC_STATUS_INVALID_ARGUMENT; }
const char *kc_model_error(const kc_model *m) { return m ? m->errmsg : "model is NULL"; }
const char *kc_model_name(const kc_model *m) { return m ? m->name : ""; }
int kc_model_num_layers(const kc_model *m) { return m ? m->n_layers : 0; }

kc_status kc_model_set_seed(kc_model *m, uint64_t seed) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_seed: model is NULL");
    if (m->built)
        return kc__fail(KC_STATUS_STATE, "model '%s': set the seed before the model is built (weights exist already)",
                        m->name);
    m->seed = seed ? seed : KC_DEFAULT_SEED;
    kc__rng_seed(&m->rng, m->seed);
    return KC_STATUS_OK;
}

static int find_layer(const kc_model *m, const char *name) { return kc__name_find(&m->names, m->layers, name); }

/* Keras auto names: "conv2d", "conv2d_1", "conv2d_2", ... (the search for a free one goes
 * on from where the last one of the kind stopped) */
static void auto_name(kc_model *m, kc_layer *l) {
    const char *stem = l->ops->snake_name;
    for (int k = kc__name_stem_next(&m->names, stem);; k++) {
        if (k == 0)
            snprintf(l->name, sizeof l->name, "%s", stem);
        else
            snprintf(l->name, sizeof l->name, "%s_%d", stem, k);
        if (find_layer(m, l->name) < 0) {
            kc__name_stem_set(&m->names, stem, k + 1);
            return;
        }
    }
}

/* Append a layer taking inputs xs[0..n); returns its node id or -1 (error recorded).
 * shares >= 0: a later call of that node's layer (kc_apply_shared), with its name. */
static kc_node add_node_call(kc_model *m, const kc_layer_spec *spec, const kc_node *xs, int n, int shares) {
    if (!m) {
        kc__fail(KC_STATUS_INVALID_ARGUMENT, "model builder: model is NULL");
        return -1;
    }
    if (m->err != KC_STATUS_OK) return -1; /* sticky: an earlier call failed */
    if (m->built) {
        kc__model_fail(m, kc__fail(KC_STATUS_STATE, "model '%s': cannot add layers after the model was built or compiled",
                                   m->name));
        return -1;
    }
    if (!spec || !spec->class_name || !spec->opts) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                   "model '%s': layer spec is NULL; use the KC_<LAYER>(...) macros", m->name));
        return -1;
    }
    kc_layer *l = NULL;
    kc_status s = kc__layer_create(spec, &l);
    if (s != KC_STATUS_OK) {
        kc__model_fail(m, s);
        return -1;
    }
    const char *what = l->name[0] ? l->name : spec->class_name;
    l->shares = shares;
    if (shares >= 0) {
        /* the layer's own name: not indexed, lookups by name find the first call */
    } else if (l->name[0] == '\0') auto_name(m, l);
    else if (find_layer(m, l->name) >= 0) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                   "model '%s': layer name '%s' is used twice; layer names must be unique", m->name,
                                   l->name));
        kc__layer_destroy(l);
        return -1;
    }
    bool is_input = (l->ops->flags & KC_LAYER_INPUT) != 0;
    if (!is_input && (n < l->ops->min_inputs || n > l->ops->max_inputs)) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s '%s': takes %d to %d inputs, got %d",
                                   spec->class_name, what, l->ops->min_inputs, l->ops->max_inputs, n));
        kc__layer_destroy(l);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (xs[i] < 0 || xs[i] >= m->n_layers) {
            kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s '%s': input %d is not a node of model '%s'",
                                       spec->class_name, l->name, i, m->name));
            kc__layer_destroy(l);
            return -1;
        }
        l->in[i] = xs[i];
    }
    l->n_in = is_input ? 0 : n;
    if (m->n_layers == m->cap_layers) {
        int cap = m->cap_layers ? m->cap_layers * 2 : 16;
        kc_layer **p = realloc(m->layers, (size_t)cap * sizeof *p);
        if (!p) {
            kc__model_fail(m, kc__fail(KC_STATUS_OUT_OF_MEMORY, "model '%s': out of memory adding a layer", m->name));
            kc__layer_destroy(l);
            return -1;
        }
        m->layers = p;
        m->cap_layers = cap;
    }
    l->index = m->n_layers;
    m->layers[m->n_layers] = l;
    if (shares < 0 && (s = kc__name_add(&m->names, m->layers, l->index)) != KC_STATUS_OK) {
        kc__model_fail(m, s);
        kc__layer_destroy(l);
        return -1;
    }
    m->n_layers++;
    return l->index;
}

static kc_node add_node(kc_model *m, const kc_layer_spec *spec, const kc_node *xs, int n) {
    return add_node_call(m, spec, xs, n, -1);
}

/* shared layers: another call of the layer of node `layer` (its first call's options and
 * name; weights linked at build, shared.c) */
kc_node kc_apply_shared(kc_model *m, kc_node layer, const kc_node *xs, int n) {
    if (!m || m->err != KC_STATUS_OK) return add_node(m, NULL, xs, n); /* the usual error, or sticky */
    if (layer < 0 || layer >= m->n_layers) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_apply_shared: node %d is not a node of model '%s'",
                                   layer, m->name));
        return -1;
    }
    kc_layer *p = m->layers[layer];
    if (p->shares >= 0) p = m->layers[p->shares]; /* a call of a call: the same layer */
    if (m->sequential || strcmp(p->ops->class_name, "TensorOp") == 0) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                   "kc_apply_shared: %s; shared layers are layers of a Functional model (kc_functional)",
                                   m->sequential ? "the model is Sequential" : "an operation node is not a layer"));
        return -1;
    }
    if (p->ops->flags & KC_LAYER_INPUT) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                   "kc_apply_shared: '%s' is an InputLayer, which is not called on tensors", p->name));
        return -1;
    }
    if (n < 0 || n > KC_MAX_INPUTS || (!xs && n > 0)) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_apply_shared: %d inputs (at most %d)", n,
                                   KC_MAX_INPUTS));
        return -1;
    }
    void *opts = kc__calloc(1, p->ops->opts_size, "layer options");
    if (!opts) {
        kc__model_fail(m, KC_STATUS_OUT_OF_MEMORY);
        return -1;
    }
    p->ops->get_opts(p, opts);
    kc_layer_spec spec = {p->ops->class_name, opts};
    kc_node id = add_node_call(m, &spec, xs, n, p->index);
    free(opts);
    if (id < 0) return id;
    kc_layer *c = m->layers[id];
    c->frozen = p->frozen;
    snprintf(c->keras_path, sizeof c->keras_path, "%s", p->keras_path);
    p->calls++;
    return id;
}

kc_status kc_add(kc_model *m, const kc_layer_spec *spec) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_add: model is NULL");
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    if (!m->sequential)
        return kc__model_fail(m, kc__fail(KC_STATUS_STATE,
                                          "model '%s' is Functional: use kc_input/kc_apply/kc_merge, not kc_add", m->name));
    bool is_input = spec && spec->class_name && strcmp(spec->class_name, "InputLayer") == 0;
    if (m->n_layers == 0 && !is_input)
        return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                          "model '%s': the first layer must be KC_INPUT(.shape = {...}) so that shapes are known",
                                          m->name));
    if (m->n_layers > 0 && is_input)
        return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                          "model '%s': a Sequential model has one InputLayer, first", m->name));
    kc_node prev = m->n_layers - 1;
    kc_node id = add_node(m, spec, &prev, is_input ? 0 : 1);
    return id < 0 ? m->err : KC_STATUS_OK;
}

kc_node kc_input(kc_model *m, const kc_layer_spec *spec) {
    if (m && spec && spec->class_name && strcmp(spec->class_name, "InputLayer") != 0) {
        kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_input: expects KC_INPUT(...), got %s",
                                   spec->class_name));
        return -1;
    }
    if (m && !m->sequential) {
        for (int i = 0; i < m->n_layers; i++)
            if (m->layers[i]->ops->flags & KC_LAYER_INPUT) {
                kc__model_fail(m, kc__fail(KC_STATUS_UNSUPPORTED,
                                           "model '%s': kerac supports one input per model; '%s' is already the input",
                                           m->name, m->layers[i]->name));
                return -1;
            }
    }
    return add_node(m, spec, NULL, 0);
}

kc_node kc_apply(kc_model *m, const kc_layer_spec *spec, kc_node x) { return add_node(m, spec, &x, 1); }

kc_node kc_merge(kc_model *m, const kc_layer_spec *spec, const kc_node *xs, int n) {
    if (n > KC_MAX_INPUTS || n < 0 || (!xs && n > 0)) {
        if (m)
            kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_merge: %d inputs (at most %d)", n, KC_MAX_INPUTS));
        return -1;
    }
    return add_node(m, spec, xs, n);
}

kc_status kc_set_output(kc_model *m, kc_node y) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_set_output: model is NULL");
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    if (y < 0 || y >= m->n_layers)
        return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s': output node %d does not exist",
                                          m->name, y));
    m->output = y;
    return KC_STATUS_OK;
}

int kc__model_output(const kc_model *m) { return m->output >= 0 ? m->output : m->n_layers - 1; }

/* ---------------------------------------------------------------- build */

/* The model's device options: its own (or the environment's), then the device and memory
 * limit set one by one. */
static kc_status device_opts(const kc_model *m, kc_device_opts *o) {
    if (m->dev_set) *o = kc__device_opts_view(&m->dev);
    else KC_TRY(kc_device_opts_default(o));
    if (m->device_req[0]) o->device = m->device_req;
    if (m->memory_limit_set) o->memory_limit = m->memory_limit;
    return KC_STATUS_OK;
}

static kc_status ensure_backend(kc_model *m) {
    if (m->be) return KC_STATUS_OK;
    kc_device_opts o;
    kc_status s = device_opts(m, &o);
    if (s == KC_STATUS_OK) s = kc_backend_open_ex(&o, &m->be);
    if (s != KC_STATUS_OK) return kc__wrap(s, "model '%s': ", m->name);
    snprintf(m->device_reason, sizeof m->device_reason, "%s", kc__env_device_reason());
    m->memory_limit = o.memory_limit;
    kc__log(KC_LOG_INFO, "model '%s' runs on %s", m->name, m->be->device);
    return KC_STATUS_OK;
}

static kc_status before_build(const kc_model *m, const char *what) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: model is NULL", what);
    if (m->built)
        return kc__fail(KC_STATUS_STATE, "model '%s': choose the device before the model is built (it runs on %s)",
                        m->name, m->be ? m->be->device : "?");
    return KC_STATUS_OK;
}

kc_status kc_model_set_device_opts(kc_model *m, const kc_device_opts *opts) {
    KC_TRY(before_build(m, "kc_model_set_device_opts"));
    if (!opts) {
        m->dev_set = false;
    } else {
        KC_TRY(kc__device_opts_keep(&m->dev, opts));
        m->dev_set = true;
    }
    /* the whole set replaces what was set one by one */
    m->device_req[0] = '\0';
    m->memory_limit_set = false;
    return KC_STATUS_OK;
}

kc_status kc_model_set_device(kc_model *m, const char *device) {
    KC_TRY(before_build(m, "kc_model_set_device"));
    const char *d = device ? device : "";
    if (strlen(d) >= sizeof m->device_req)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "device name '%.40s...' is too long", d);
    snprintf(m->device_req, sizeof m->device_req, "%s", d);
    return KC_STATUS_OK;
}

const char *kc_model_device(const kc_model *m) { return m && m->be ? m->be->device : ""; }
kc_backend *kc_model_backend(kc_model *m) { return m ? m->be : NULL; }
const char *kc_model_device_reason(const kc_model *m) { return m && m->be ? m->device_reason : ""; }

kc_status kc__model_build(kc_model *m) {
    if (m->err != KC_STATUS_OK) return kc__fail(m->err, "%s", m->errmsg);
    if (m->built) return KC_STATUS_OK;
    if (m->n_layers == 0 || !(m->layers[0]->ops->flags & KC_LAYER_INPUT))
        return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                          "model '%s' has no InputLayer; start it with KC_INPUT(.shape = {...})", m->name));
    /* every non-output node must feed something, and inputs must precede (topological) */
    int out = kc__model_output(m);
    for (int i = 0; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        if ((l->ops->flags & KC_LAYER_INPUT) && i != 0)
            return kc__model_fail(m, kc__fail(KC_STATUS_UNSUPPORTED,
                                              "model '%s': kerac supports one input per model ('%s' is a second one)",
                                              m->name, l->name));
        for (int k = 0; k < l->n_in; k++) {
            if (l->in[k] >= i)
                return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                                  "layer '%s': its input '%s' comes later in the model; layers must be "
                                                  "added after their inputs", l->name, m->layers[l->in[k]]->name));
            l->in_shape[k] = m->layers[l->in[k]]->out_shape;
        }
        kc_status s = l->ops->build(l);
        if (s == KC_STATUS_OK && l->shares >= 0) s = kc__model_shared_build(m, l);
        if (s != KC_STATUS_OK) return kc__model_fail(m, s);
        if (kc__shape_size(&l->out_shape) <= 0)
            return kc__model_fail(m, kc__fail(KC_STATUS_SHAPE, "layer '%s': output shape is empty", l->name));
    }
    for (int i = 0; i < m->n_layers; i++) {
        bool used = (i == out);
        for (int j = i + 1; j < m->n_layers && !used; j++)
            for (int k = 0; k < m->layers[j]->n_in; k++)
                if (m->layers[j]->in[k] == i) used = true;
        if (!used)
            return kc__model_fail(m, kc__fail(KC_STATUS_INVALID_ARGUMENT,
                                              "layer '%s' feeds nothing and is not the output of model '%s'",
                                              m->layers[i]->name, m->name));
    }

    if (m->before_alloc) {
        kc_status (*hook)(kc_model *, void *) = m->before_alloc;
        m->before_alloc = NULL;
        KC_TRY(kc__model_fail(m, hook(m, m->before_alloc_user)));
    }
    KC_TRY(kc__model_fail(m, ensure_backend(m)));
    KC_TRY(kc__model_fail(m, kc__model_check_backend(m, false))); /* a layer the backend lacks: its name */
    KC_TRY(kc__model_fail(m, kc__model_alloc_weights(m)));
    int64_t max_size = 1;
    for (int i = 0; i < m->n_layers; i++)
        for (int k = 0; k < m->layers[i]->n_weights; k++) max_size = KC_MAX(max_size, m->layers[i]->w[k].size);
    kc_status s = KC_STATUS_OK;
    /* initial values, drawn in layer order from the model seed (host, then copied) */
    float *host = kc__calloc((size_t)max_size, sizeof(float), "weight initialisation");
    if (!host) return kc__model_fail(m, KC_STATUS_OUT_OF_MEMORY);
    kc_rng init_rng;
    kc__rng_seed(&init_rng, m->seed);
    for (int i = 0; i < m->n_layers && s == KC_STATUS_OK; i++) {
        kc_layer *l = m->layers[i];
        l->seed = kc__hash64(m->seed * 0x100000001b3ull + (uint64_t)i);
        for (int k = 0; k < l->n_weights && s == KC_STATUS_OK; k++) {
            kc_weight *w = &l->w[k];
            s = kc__init_fill(w->init, host, w->size, w->fan_in, w->fan_out, &init_rng);
            if (s == KC_STATUS_OK) s = m->be->to_device(m->be, w->data, host, (size_t)w->size * sizeof(float));
        }
    }
    free(host);
    if (s != KC_STATUS_OK) return kc__model_fail(m, s);
    m->built = true;
    return KC_STATUS_OK;
}

kc_status kc_model_build(kc_model *m) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_build: model is NULL");
    return kc__model_build(m);
}

/* ---------------------------------------------------------------- introspection */

kc_status kc_model_layer_info(kc_model *m, int index, kc_layer_info *out) {
    KC_TRY(kc_model_build(m));
    if (index < 0 || index >= m->n_layers || !out)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s': layer index %d out of range (0..%d)", m->name, index,
                        m->n_layers - 1);
    const kc_layer *l = m->layers[index];
    memset(out, 0, sizeof *out);
    out->name = l->name;
    out->class_name = l->ops->class_name;
    out->output_shape = l->out_shape;
    for (int k = 0; k < l->n_weights; k++) {
        out->params += l->w[k].size;
        if (kc__weight_trains(l, &l->w[k])) out->trainable_params += l->w[k].size;
    }
    out->trainable = !l->frozen;
    out->flops = l->ops->flops ? l->ops->flops(l) : 0;
    out->num_inputs = l->n_in;
    for (int k = 0; k < l->n_in && k < 8; k++) {
        out->inputs[k] = m->layers[l->in[k]]->name;
        out->input_calls[k] = kc__model_call_index(m, l->in[k]);
    }
    out->call = kc__model_call_index(m, index);
    return KC_STATUS_OK;
}

kc_status kc_model_input_shape(kc_model *m, kc_shape *out) {
    KC_TRY(kc_model_build(m));
    *out = m->layers[0]->out_shape;
    return KC_STATUS_OK;
}

kc_status kc_model_output_shape(kc_model *m, kc_shape *out) {
    KC_TRY(kc_model_build(m));
    *out = m->layers[kc__model_output(m)]->out_shape;
    return KC_STATUS_OK;
}

/* weights in Keras order: per layer, trainable first, then non-trainable */
static kc_weight *weight_at(kc_model *m, int index, const kc_layer **owner) {
    int seen = 0;
    for (int pass_layer = 0; pass_layer < m->n_layers; pass_layer++) {
        kc_layer *l = m->layers[pass_layer];
        for (int t = 1; t >= 0; t--)
            for (int k = 0; k < l->n_weights; k++) {
                if (l->w[k].trainable != (t == 1)) continue;
                if (seen++ == index) {
                    if (owner) *owner = l;
                    return &l->w[k];
                }
            }
    }
    return NULL;
}

int kc_model_num_weights(kc_model *m) {
    if (!m || kc_model_build(m) != KC_STATUS_OK) return 0;
    int n = 0;
    for (int i = 0; i < m->n_layers; i++) n += m->layers[i]->n_weights;
    return n;
}

kc_status kc_model_weight_info(kc_model *m, int index, kc_weight_info *out) {
    KC_TRY(kc_model_build(m));
    const kc_layer *l = NULL;
    kc_weight *w = weight_at(m, index, &l);
    if (!w || !out)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s': weight index %d out of range (0..%d)", m->name, index,
                        kc_model_num_weights(m) - 1);
    out->layer = l->name;
    out->name = w->name;
    out->shape = w->shape;
    out->size = w->size;
    out->trainable = kc__weight_trains(l, w);
    return KC_STATUS_OK;
}

kc_status kc_model_get_weight(kc_model *m, int index, float *dst, int64_t size) {
    KC_TRY(kc_model_build(m));
    const kc_layer *l = NULL;
    kc_weight *w = weight_at(m, index, &l);
    if (!w) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s': weight index %d out of range", m->name, index);
    if (size != w->size || !dst)
        return kc__fail(KC_STATUS_SHAPE, "layer '%s' weight '%s' has %lld values, buffer has %lld", l->name, w->name,
                        (long long)w->size, (long long)size);
    return m->be->to_host(m->be, dst, w->data, (size_t)size * sizeof(float));
}

kc_status kc_model_set_weight(kc_model *m, int index, const float *src, int64_t size) {
    KC_TRY(kc_model_build(m));
    const kc_layer *l = NULL;
    kc_weight *w = weight_at(m, index, &l);
    if (!w) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "model '%s': weight index %d out of range", m->name, index);
    if (size != w->size || !src)
        return kc__fail(KC_STATUS_SHAPE, "layer '%s' weight '%s' has %lld values, got %lld", l->name, w->name,
                        (long long)w->size, (long long)size);
    return m->be->to_device(m->be, w->data, src, (size_t)size * sizeof(float));
}

/* ---------------------------------------------------------------- default CNN */

kc_status kc_default_cnn(int h, int w, int c, int classes, kc_model **out) {
    if (h < 10 || w < 10 || c < 1 || classes < 2)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "default CNN: input (%d, %d, %d) with %d classes; needs at least 10x10 images and 2 classes", h, w,
                        c, classes);
    kc_model *m = NULL;
    KC_TRY(kc_sequential("mnist_convnet", &m));
    kc_add(m, KC_INPUT(.shape = {h, w, c}));
    kc_add(m, KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_CONV2D(.filters = 64, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.5f));
    kc_status s = kc_add(m, KC_DENSE(.units = classes, .activation = "softmax"));
    if (s != KC_STATUS_OK) {
        kc_model_destroy(m);
        return s;
    }
    *out = m;
    return KC_STATUS_OK;
}
