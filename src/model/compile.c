/* compile.c — loss, metrics and optimizer, as Keras's model.compile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "device.h"
#include "model.h"

/* By Keras name or short name (KC_LOSS_KINDS in kerac_backend.h), case-insensitive. */
static kc_status parse_loss(const char *name, kc_loss_kind *out) {
    static const char *const k_short[KC_LOSS_COUNT] = {
#define KC__LOSS_SHORT(kind, keras_name, short_name) short_name,
        KC_LOSS_KINDS(KC__LOSS_SHORT)
#undef KC__LOSS_SHORT
    };
    const char *n = name && *name ? name : kc_loss_name(KC_LOSS_SPARSE_CCE);
    char list[256];
    size_t used = 0;
    list[0] = '\0';
    for (int k = 0; k < KC_LOSS_COUNT; k++) {
        const char *full = kc_loss_name((kc_loss_kind)k), *abbr = k_short[k];
        if (strcasecmp(n, full) == 0 || (abbr && strcasecmp(n, abbr) == 0)) {
            *out = (kc_loss_kind)k;
            return KC_STATUS_OK;
        }
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s%s%s%s", k ? ", " : "", full,
                                     abbr ? " (" : "", abbr ? abbr : "", abbr ? ")" : "");
    }
    return kc__fail(KC_STATUS_INVALID_ARGUMENT, "loss '%s' is not one of %s", n, list);
}

static kc_status parse_metric(const kc_model *m, const char *name, int top_k, kc_metric *out) {
    bool sparse_loss = m->loss == KC_LOSS_SPARSE_CCE;
    memset(out, 0, sizeof *out);
    out->k = 1;
    out->sparse = sparse_loss;
    if (strcasecmp(name, "accuracy") == 0 || strcasecmp(name, "acc") == 0) {
        snprintf(out->name, sizeof out->name, "accuracy");
    } else if (strcasecmp(name, "sparse_categorical_accuracy") == 0) {
        snprintf(out->name, sizeof out->name, "%s", "sparse_categorical_accuracy");
        out->sparse = true;
    } else if (strcasecmp(name, "categorical_accuracy") == 0) {
        snprintf(out->name, sizeof out->name, "%s", "categorical_accuracy");
        out->sparse = false;
    } else if (strcasecmp(name, "top_k_accuracy") == 0 || strcasecmp(name, "sparse_top_k_categorical_accuracy") == 0 ||
               strcasecmp(name, "top_k_categorical_accuracy") == 0) {
        snprintf(out->name, sizeof out->name, "%s", name);
        out->k = top_k > 0 ? top_k : 5;
        if (strcasecmp(name, "top_k_categorical_accuracy") == 0) out->sparse = false;
        else if (strcasecmp(name, "sparse_top_k_categorical_accuracy") == 0) out->sparse = true;
    } else {
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "metric '%s' is not one of accuracy, sparse_categorical_accuracy, categorical_accuracy, "
                        "top_k_accuracy, sparse_top_k_categorical_accuracy", name);
    }
    return KC_STATUS_OK;
}

kc_status kc_compile(kc_model *m, const kc_compile_opts *opts) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_compile: model is NULL");
    kc_compile_opts defaults = {0};
    if (!opts) opts = &defaults;
    KC_TRY(kc__model_build(m));
    KC_TRY(kc__model_check_backend(m, true)); /* the loss's and the optimizer's operations */
    kc_loss_kind loss = KC_LOSS_SPARSE_CCE;
    KC_TRY(parse_loss(opts->loss, &loss));
    kc_optimizer_state opt = {0};
    kc_status s = kc__optimizer_init(&opt, &opts->optimizer);
    if (s != KC_STATUS_OK) {
        free(opt.boundaries);
        free(opt.values);
        return s;
    }
    kc_layer *o = m->layers[kc__model_output(m)];
    /* classes: the output's last axis (a per-pixel head classifies every position) */
    int classes = o->out_shape.rank ? o->out_shape.dim[o->out_shape.rank - 1] : 1;
    if ((loss == KC_LOSS_SPARSE_CCE || loss == KC_LOSS_CCE) && classes < 2)
        s = kc__fail(KC_STATUS_SHAPE, "loss '%s' needs at least 2 classes (the output's last axis); layer '%s' outputs %d",
                     opts->loss ? opts->loss : kc_loss_name(KC_LOSS_SPARSE_CCE), o->name, classes);
    m->loss = loss;
    m->n_metrics = 0;
    for (int i = 0; i < KC_MAX_METRICS && s == KC_STATUS_OK && opts->metrics[i]; i++) {
        s = parse_metric(m, opts->metrics[i], opts->top_k, &m->metrics[m->n_metrics]);
        if (s == KC_STATUS_OK && m->metrics[m->n_metrics].k > classes)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "metric '%s': k = %d is more than the %d outputs",
                         opts->metrics[i], m->metrics[m->n_metrics].k, classes);
        if (s == KC_STATUS_OK) m->n_metrics++;
    }
    if (s != KC_STATUS_OK) {
        free(opt.boundaries);
        free(opt.values);
        return s;
    }
    m->from_logits = opts->from_logits > 0;

    /* Fold a softmax (sigmoid) output into cross-entropy: the gradient is taken with
     * respect to the logits, which is what Keras on TensorFlow does and what keeps the
     * loss finite when a probability underflows. */
    if (o->defer_act) o->defer_act = false;
    m->fused_loss = false;
    if (!m->from_logits && o->ops->activation) {
        kc_act_params a = o->ops->activation(o);
        if (((loss == KC_LOSS_SPARSE_CCE || loss == KC_LOSS_CCE) && a.kind == KC_ACT_SOFTMAX) ||
            (loss == KC_LOSS_BCE && a.kind == KC_ACT_SIGMOID)) {
            m->fused_loss = true;
            o->defer_act = true;
        }
    }
    if (m->from_logits && o->ops->activation) {
        kc_act_params a = o->ops->activation(o);
        if (a.kind == KC_ACT_SOFTMAX || a.kind == KC_ACT_SIGMOID)
            kc__log(KC_LOG_WARNING,
                    "model '%s': from_logits is set but layer '%s' ends with %s; the loss will treat probabilities "
                    "as logits", m->name, o->name, kc__act_name(&a));
    }

    /* optimizer slots (zeroed: a re-compile restarts the optimizer, as in Keras) */
    free(m->opt.boundaries);
    free(m->opt.values);
    m->opt = opt;
    int slots = kc__optimizer_slots(opt.kind, opt.opts.momentum);
    m->be->free(m->be, m->slot0);
    m->be->free(m->be, m->slot1);
    m->slot0 = m->slot1 = NULL;
    size_t bytes = (size_t)(m->n_trainable ? m->n_trainable : 1) * sizeof(float);
    if (slots >= 1) KC_TRY(m->be->alloc(m->be, bytes, (void **)&m->slot0));
    if (slots >= 2) KC_TRY(m->be->alloc(m->be, bytes, (void **)&m->slot1));
    if (m->slot0) KC_TRY(m->be->memset0(m->be, m->slot0, bytes));
    if (m->slot1) KC_TRY(m->be->memset0(m->be, m->slot1, bytes));
    m->compiled = true;
    return KC_STATUS_OK;
}

int kc_model_num_metrics(const kc_model *m) { return m ? m->n_metrics : 0; }
const char *kc_model_metric_name(const kc_model *m, int i) {
    return m && i >= 0 && i < m->n_metrics ? m->metrics[i].name : NULL;
}
