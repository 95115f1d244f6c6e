/* exec.c — running the plan: forward, loss, backward and the optimizer update of one
 * step, on whatever backend the model uses. No allocation here: every buffer is an
 * offset in the arena that kc__model_prepare sized beforehand. */
#include <math.h>
#include <string.h>

#include "dist.h"
#include "model.h"

#define AT(off) ((float *)((char *)m->arena + (off)))
#define AT_OR_NULL(off) ((off) == KC_PLAN_NONE ? NULL : (void *)((char *)m->arena + (off)))

/* ---- profiling and tracing. On a backend with timing marks (devtime.c) each span is two
 * marks on the compute stream, read at the pass's end; else synchronise so that an
 * asynchronous backend is timed per layer on the host's clock. Both off, a step pays one
 * test of two flags per layer. */
typedef struct prof_mark {
    double t0;
    int mark; /* >= 0: a device mark */
} prof_mark;
static inline bool timed(const kc_model *m) { return m->profiling || m->tracing; }
static prof_mark prof_start(kc_model *m) {
    int k = kc__devtime_mark(m, KC_STREAM_COMPUTE);
    if (k >= 0) return (prof_mark){.mark = k};
    m->be->sync(m->be);
    return (prof_mark){.t0 = kc__now(), .mark = -1};
}
/* The span since p: added to *acc (profiling) and to the trace (tracing) as name/cat. */
static void prof_stop(kc_model *m, prof_mark p, double *acc, const char *name, const char *cat) {
    if (p.mark >= 0) {
        kc__devtime_span(m, p.mark, KC_STREAM_COMPUTE, m->profiling ? acc : NULL, name, cat);
        return;
    }
    m->be->sync(m->be);
    double t1 = kc__now();
    if (m->profiling && acc) *acc += t1 - p.t0;
    if (m->tracing) kc__trace_add(m->trace, name, cat, p.t0, t1, m->trace_step);
}
static void prof_layer(kc_model *m, prof_mark p, int i, bool fwd) {
    prof_stop(m, p, !m->prof_fwd ? NULL : fwd ? &m->prof_fwd[i] : &m->prof_bwd[i], m->layers[i]->name,
              fwd ? "forward" : "backward");
    if (m->profiling && m->prof_fwd) (fwd ? m->prof_fwd_n : m->prof_bwd_n)[i]++;
}
#define PROF_START(m) (timed(m) ? prof_start(m) : (prof_mark){0, -1})

kc_status kc_model_set_profiling(kc_model *m, int on) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_profiling: model is NULL");
    if (on && !m->prof_fwd) {
        int n = KC_MAX(m->n_layers, 1);
        m->prof_fwd = kc__calloc((size_t)n, sizeof(double), "profiling");
        m->prof_bwd = kc__calloc((size_t)n, sizeof(double), "profiling");
        m->prof_fwd_n = kc__calloc((size_t)n, sizeof(int64_t), "profiling");
        m->prof_bwd_n = kc__calloc((size_t)n, sizeof(int64_t), "profiling");
        if (!m->prof_fwd || !m->prof_bwd || !m->prof_fwd_n || !m->prof_bwd_n) return KC_STATUS_OUT_OF_MEMORY;
    }
    if (on && m->built == false) KC_TRY(kc__model_build(m));
    m->profiling = on != 0;
    return KC_STATUS_OK;
}

kc_status kc_model_layer_timing(const kc_model *m, int index, kc_layer_timing *out) {
    if (!m || !out || index < 0 || index >= m->n_layers)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_layer_timing: layer index %d out of range", index);
    const kc_layer *l = m->layers[index];
    *out = (kc_layer_timing){.name = l->name, .class_name = l->ops->class_name};
    if (m->prof_fwd) {
        out->forward_seconds = m->prof_fwd[index];
        out->backward_seconds = m->prof_bwd[index];
        out->forward_calls = m->prof_fwd_n[index];
        out->backward_calls = m->prof_bwd_n[index];
    }
    return KC_STATUS_OK;
}

kc_status kc_model_step_overhead(const kc_model *m, double *loss_s, double *opt_s) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_step_overhead: model is NULL");
    if (loss_s) *loss_s = m->prof_loss;
    if (opt_s) *opt_s = m->prof_opt;
    return KC_STATUS_OK;
}

kc_status kc__model_prepare(kc_model *m, int batch, bool training) {
    KC_TRY(kc__model_build(m));
    if (m->arena && m->plan.batch == batch && m->plan.training == training) return KC_STATUS_OK;
    KC_TRY(kc__plan_build(m, batch, training, &m->plan));
    if (m->plan.arena_bytes > m->arena_cap) {
        m->be->free(m->be, m->arena);
        m->arena = NULL;
        m->arena_cap = 0;
        kc_status s = m->be->alloc(m->be, m->plan.arena_bytes, &m->arena);
        if (s != KC_STATUS_OK)
            return kc__wrap(s, "model '%s' at batch size %d needs a %.1f MiB arena: ", m->name, batch,
                            (double)m->plan.arena_bytes / 1048576.0);
        m->arena_cap = m->plan.arena_bytes;
    }
    if (!m->dev_scalars) KC_TRY(m->be->alloc(m->be, KC_SCALAR_COUNT * sizeof(float), (void **)&m->dev_scalars));
    return KC_STATUS_OK;
}

float *kc__model_input_buffer(kc_model *m) { return AT(m->plan.y_off[0]); }
float *kc__model_output_buffer(kc_model *m) { return AT(m->plan.y_off[kc__model_output(m)]); }

kc_status kc__model_forward(kc_model *m, int batch, bool training, uint64_t step_seed) {
    const kc_plan *p = &m->plan;
    double tf = kc__trace_t0(m);
    for (int i = 1; i < m->n_layers; i++) {
        kc_layer *l = m->layers[i];
        if ((l->ops->flags & KC_LAYER_INPUT) || kc__layer_is_alias(l, training) || l->fwd_absorbed) continue;
        kc_fwd a = {.be = m->be, .batch = batch, .training = training, .y = AT(p->y_off[i]), .sync = m->sync_bn,
                    .scratch = &m->host_scratch,
                    .aux = AT_OR_NULL(p->aux_off[i]), .ws = AT_OR_NULL(p->ws_off[i]),
                    .ws_bytes = p->ws_off[i] == KC_PLAN_NONE ? 0 : p->workspace_bytes,
                    .seed = kc__hash64(step_seed ^ l->seed)};
        for (int k = 0; k < l->n_in; k++) {
            const int src = l->in[k];
            const kc_layer *bn = m->layers[src];
            if (bn->bn_folded) { /* fuse.c: this Add reads the batch norm's input and normalises it */
                a.fold[k] = bn, a.fold_aux[k] = AT_OR_NULL(p->aux_off[src]);
                a.x[k] = AT(p->y_off[bn->in[0]]);
            } else {
                a.x[k] = AT(p->y_off[src]);
            }
        }
        prof_mark t0 = PROF_START(m);
        kc_status s = l->ops->forward(l, &a);
        if (timed(m)) prof_layer(m, t0, i, true);
        if (s != KC_STATUS_OK) return kc__wrap(s, "forward of layer '%s': ", l->name);
        if (m->check_numerics && !l->bn_folded) KC_TRY(kc__numerics_forward(m, i, batch, training, a.y));
    }
    if (timed(m)) KC_TRY(kc__devtime_flush(m));
    kc__trace_span(m, "forward", "pass", tf);
    return KC_STATUS_OK;
}

/* The loss and metrics run on rows of the output's last axis: batch * positions of them
 * (targets.c); fit and evaluate divide their sums by the positions. */
static kc_loss_desc loss_desc(const kc_model *m, int batch) {
    const kc_layer *o = m->layers[kc__model_output(m)];
    int p = kc__model_positions(m);
    kc_loss_desc d = {.kind = m->loss, .n = batch * p, .c = (int)(kc__shape_size(&o->out_shape) / p),
                      .from_logits = m->from_logits || m->fused_loss};
    return d;
}

/* Binary accuracy compares the output with 0.5 as Keras does, also when the loss takes it
 * as logits (from_logits=True); only a sigmoid folded into the loss (fused_loss: the buffer
 * holds its logits) compares the logits with 0. */
static kc_status add_metrics(kc_model *m, int batch) {
    kc_loss_desc d = loss_desc(m, batch);
    for (int i = 0; i < m->n_metrics; i++)
        KC_TRY(m->be->count_correct(m->be, kc__model_output_buffer(m), m->batch_targets, d.n, d.c, m->metrics[i].sparse,
                                    m->metrics[i].k, m->fused_loss, m->dev_scalars + KC_SCALAR_METRICS + i));
    return KC_STATUS_OK;
}

kc_status kc__model_accumulate_metrics(kc_model *m, int batch) {
    kc_loss_desc d = loss_desc(m, batch);
    KC_TRY(m->be->loss_forward_backward(m->be, &d, kc__model_output_buffer(m), m->batch_targets,
                                        m->dev_scalars + KC_SCALAR_LOSS, NULL, d.n));
    return add_metrics(m, batch);
}

static kc_status backward_node(kc_model *m, int j, int batch);

static kc_status backward(kc_model *m, int batch) {
    const kc_plan *p = &m->plan;
    double tb = kc__trace_t0(m);
    for (int j = m->n_layers - 1; j >= 1; j--) {
        kc_layer *l = m->layers[j];
        if (m->dist_active) KC_TRY(kc__dist_overlap_layer(m, j + 1)); /* layers above j are done */
        bool runs = !(l->ops->flags & KC_LAYER_INPUT) && !kc__layer_is_alias(l, true) &&
                    p->dy_off[j] != KC_PLAN_NONE && /* something downstream needs it */
                    p->needs_grad[j];               /* not frozen with nothing above it training */
        if (runs) KC_TRY(backward_node(m, j, batch));
        if (l->calls) KC_TRY(kc__model_shared_fold(m, j, runs)); /* a shared layer: its calls' sum */
    }
    if (timed(m)) KC_TRY(kc__devtime_flush(m));
    kc__trace_span(m, "backward", "pass", tb);
    return KC_STATUS_OK;
}

/* Node j's backward, then the input gradients of consumers after the first added in. */
static kc_status backward_node(kc_model *m, int j, int batch) {
    const kc_plan *p = &m->plan;
    kc_layer *l = m->layers[j];
    kc_bwd a = {.be = m->be, .batch = batch, .y = AT(p->y_off[j]), .dy = AT(p->dy_off[j]), .sync = m->sync_bn,
                .scratch = &m->host_scratch,
                .aux = AT_OR_NULL(p->aux_off[j]), .ws = AT_OR_NULL(p->ws_off[j]),
                .ws_bytes = p->ws_off[j] == KC_PLAN_NONE ? 0 : p->workspace_bytes};
    for (int k = 0; k < l->n_in; k++) {
        int src = l->in[k];
        a.x[k] = AT(p->y_off[src]);
        if (!p->needs_grad[src]) a.dx[k] = NULL;
        else if (p->dx_tmp_off[j * KC_MAX_INPUTS + k] != KC_PLAN_NONE) a.dx[k] = AT(p->dx_tmp_off[j * KC_MAX_INPUTS + k]);
        else {
            a.dx[k] = AT(p->dy_off[src]);
            if (p->dx_add[j * KC_MAX_INPUTS + k]) a.dx_add |= 1u << k;
        }
    }
    prof_mark t0 = PROF_START(m);
    kc_status s = l->ops->backward(l, &a);
    if (timed(m)) prof_layer(m, t0, j, false);
    if (s != KC_STATUS_OK) return kc__wrap(s, "backward of layer '%s': ", l->name);
    if (m->check_numerics) KC_TRY(kc__numerics_backward(m, j, batch, &a));
    for (int k = 0; k < l->n_in; k++) {
        size_t tmp = p->dx_tmp_off[j * KC_MAX_INPUTS + k];
        if (tmp == KC_PLAN_NONE || !a.dx[k]) continue;
        int src = l->in[k];
        int64_t n = kc__plan_node_elems(m, src, batch);
        KC_TRY(m->be->add(m->be, AT(p->dy_off[src]), AT(p->dy_off[src]), AT(tmp), n));
    }
    return KC_STATUS_OK;
}

kc_status kc__model_backward_update(kc_model *m, int batch, int grad_n, bool apply) {
    kc_loss_desc d = loss_desc(m, batch);
    int out = kc__model_output(m);
    prof_mark t0 = PROF_START(m);
    KC_TRY(m->be->loss_forward_backward(m->be, &d, kc__model_output_buffer(m), m->batch_targets,
                                        m->dev_scalars + KC_SCALAR_LOSS, AT(m->plan.dy_off[out]),
                                        grad_n * kc__model_positions(m)));
    KC_TRY(add_metrics(m, batch));
    if (timed(m)) prof_stop(m, t0, &m->prof_loss, "loss", "loss");
    KC_TRY(backward(m, batch));
    if (!apply || m->n_trainable == 0) return KC_STATUS_OK;
    return kc__model_apply_gradients(m, m->grads);
}

/* Clipping happens on the device (sum_squares into device scalars that the fused update
 * reads), so that a step needs no host round trip: global_clipnorm takes one norm over all
 * gradients (dev_scalars[KC_SCALAR_NORM_SQ]); clipnorm, as Keras, one per weight
 * (dev_norms[j]), then one update per weight instead of one over the whole slab. */
kc_status kc__model_prepare_update(kc_model *m) {
    if (m->opt.opts.clipnorm <= 0 || m->dev_norms || m->n_trainable_weights == 0) return KC_STATUS_OK;
    return m->be->alloc(m->be, (size_t)m->n_trainable_weights * sizeof(float), (void **)&m->dev_norms);
}

kc_status kc__model_apply_gradients(kc_model *m, const float *grads) {
    kc_optimizer_state *o = &m->opt;
    prof_mark t0 = PROF_START(m);
    kc_opt_step st = {.kind = o->kind, .lr = (float)kc__optimizer_lr(o, o->iterations),
                      .momentum = (float)o->opts.momentum, .nesterov = o->opts.nesterov > 0,
                      .beta_1 = (float)o->opts.beta_1, .beta_2 = (float)o->opts.beta_2,
                      .epsilon = (float)o->opts.epsilon, .weight_decay = (float)o->opts.weight_decay,
                      .rho = (float)o->opts.rho, .t = o->iterations + 1, .grad_scale = 1.0f};
    if (o->opts.clipnorm > 0) {
        KC_TRY(kc__model_prepare_update(m));
        st.clipnorm = (float)o->opts.clipnorm;
        int j = 0;
        for (int i = 0; i < m->n_layers; i++)
            for (int k = 0; k < m->layers[i]->n_weights; k++) {
                const kc_weight *w = &m->layers[i]->w[k];
                if (!kc__weight_trains(m->layers[i], w)) continue;
                int64_t off = w->grad - m->grads;
                float *slot0 = m->slot0 ? m->slot0 + off : NULL, *slot1 = m->slot1 ? m->slot1 + off : NULL;
                float *norm_sq = m->dev_norms + j++;
                KC_TRY(m->be->sum_squares(m->be, grads + off, w->size, norm_sq));
                st.norm_sq = norm_sq;
                KC_TRY(m->be->optimizer_step(m->be, &st, w->data, grads + off, slot0, slot1, w->size));
            }
    } else {
        if (o->opts.global_clipnorm > 0) {
            KC_TRY(m->be->sum_squares(m->be, grads, m->n_trainable, m->dev_scalars + KC_SCALAR_NORM_SQ));
            st.norm_sq = m->dev_scalars + KC_SCALAR_NORM_SQ;
            st.clipnorm = (float)o->opts.global_clipnorm;
        }
        KC_TRY(m->be->optimizer_step(m->be, &st, m->params, grads, m->slot0, m->slot1, m->n_trainable));
    }
    if (timed(m)) {
        prof_stop(m, t0, &m->prof_opt, "optimizer update", "optimizer");
        KC_TRY(kc__devtime_flush(m));
    }
    o->iterations++;
    return KC_STATUS_OK;
}

kc_status kc__model_finish_outputs(kc_model *m, int batch) {
    if (!m->fused_loss) return KC_STATUS_OK;
    const kc_layer *o = m->layers[kc__model_output(m)];
    int64_t size = kc__shape_size(&o->out_shape);
    int c = (int)(size / kc__model_positions(m)); /* softmax over the last axis (per pixel for a per-pixel head) */
    kc_act_params a = o->ops->activation(o);
    return m->be->act_forward(m->be, a, kc__model_output_buffer(m), kc__model_output_buffer(m), (int64_t)batch * size, c);
}
