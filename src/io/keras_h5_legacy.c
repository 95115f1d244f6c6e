/* keras_h5_legacy.c — Keras 2's weights layout (hdf5_format.py in tf-keras,
 * legacy/saving/legacy_h5_format.py in Keras 3): the /model_weights group of a full-model
 * .h5 file, or the root of a save_weights .h5 file.
 *
 * The group carries layer_names (every layer of model.layers, in order), backend and
 * keras_version, and one group per layer name with the attribute weight_names; each weight
 * is a dataset at that path inside the layer group ("conv2d/kernel:0"; Keras 3 drops the
 * ":0"). Both Keras versions load by position: the layers with weights, in order, take the
 * groups with weight_names, in order, and a layer's weights take its group's datasets in
 * the order of weight_names (the names themselves are not read back).
 *
 * A model nested in the model (a Sequential or Functional called as a layer) is one entry
 * of layer_names and one group, named as the nested model; its weight_names list the
 * weights of all its layers (nested models inside it too, flattened) in Keras's
 * `trainable_weights + non_trainable_weights` order: first every weight that trains, layer
 * by layer in the nested model's order, then every weight that does not (a frozen nested
 * model: all of them, layer by layer). Keras 3 names them by their variable paths
 * ("augmentation/aug_conv/kernel", "conv/kernel"), tf-keras by the inner layer
 * ("aug_conv/kernel:0"). kerac reads that layout into the inlined layers (each knows its
 * top nested model, kc_layer.keras_h5_group) and writes it so again (keras_nest.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keras_h5_impl.h"
#include "keras_nest.h"

static int by_name(const void *a, const void *b) {
    return strcmp(**(const char *const *const *)a, **(const char *const *const *)b);
}

/* The weight names and data of nested model k in its group: those that train, then the
 * others, layer by layer in its order; each named by its path inside k ("conv/kernel:0",
 * "inner/conv/kernel:0" for a model nested in it). */
static kc_status nest_group(const kc_model *m, int k, hid_t lg, const staging *st) {
    int *ls = malloc(((size_t)m->n_layers + 1) * sizeof *ls), *base = calloc((size_t)m->n_layers + 1, sizeof *base);
    int n = ls && base ? kc__nest_layers(m, k, ls) : 0, nw = 0;
    for (int i = 1; base && i < m->n_layers; i++) base[i] = base[i - 1] + kc__model_layer(m, i - 1)->n_weights;
    char (*wn)[4 * KC_NAME_MAX] = NULL;
    const char **wp = NULL;
    const kc_shape **sh = NULL;
    int *g = NULL;
    int total = base ? base[m->n_layers - 1] + kc__model_layer(m, m->n_layers - 1)->n_weights : 0;
    if (ls && base) {
        wn = calloc((size_t)total + 1, sizeof *wn);
        wp = calloc((size_t)total + 1, sizeof *wp);
        g = calloc((size_t)total + 1, sizeof *g);
        sh = calloc((size_t)total + 1, sizeof *sh);
    }
    kc_status s = wn && wp && g && sh ? KC_STATUS_OK : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving '%s'", m->name);
    for (int pass = 1; pass >= 0 && s == KC_STATUS_OK; pass--)
        for (int i = 0; i < n; i++) {
            const kc_layer *l = kc__model_layer(m, ls[i]);
            char scope[2 * KC_NAME_MAX] = "";
            for (int c = l->keras_nest; c != k && c > 0; c = m->nests[c - 1].parent) {
                char t[sizeof scope];
                snprintf(t, sizeof t, "%s/%s", m->nests[c - 1].name, scope);
                snprintf(scope, sizeof scope, "%s", t);
            }
            for (int q = 0; q < l->n_weights; q++)
                if (kc__weight_trains(l, &l->w[q]) == (pass == 1)) {
                    snprintf(wn[nw], sizeof wn[nw], "%s%s/%s:0", scope, l->keras_inner, l->w[q].name);
                    wp[nw] = wn[nw];
                    sh[nw] = &l->w[q].shape;
                    g[nw++] = base[ls[i]] + q;
                }
        }
    if (s == KC_STATUS_OK) s = kc__h5_put_fixed_strings(lg, "weight_names", wp, nw);
    for (int j = 0; j < nw && s == KC_STATUS_OK; j++) s = kc__h5_put_f32(lg, wn[j], sh[j], kc__staged(st, g[j]));
    free(ls);
    free(base);
    free(wn);
    free(wp);
    free(sh);
    free(g);
    return s;
}

/* One layer's group: weight_names and the weights. */
static kc_status layer_group(kc_model *m, int li, hid_t lg, const staging *st) {
    const kc_layer *l = kc__model_layer(m, li);
    int widx[KC_MAX_WEIGHTS], gidx[KC_MAX_WEIGHTS];
    int nw = kc__h5_layer_weights(m, li, widx, gidx);
    char wn[KC_MAX_WEIGHTS][KC_NAME_MAX + 40];
    const char *wp[KC_MAX_WEIGHTS];
    for (int j = 0; j < nw; j++) {
        snprintf(wn[j], sizeof wn[j], "%s/%s:0", l->name, l->w[widx[j]].name);
        wp[j] = wn[j];
    }
    kc_status s = kc__h5_put_fixed_strings(lg, "weight_names", wp, nw);
    for (int j = 0; j < nw && s == KC_STATUS_OK; j++)
        s = kc__h5_put_f32(lg, wn[j], &l->w[widx[j]].shape, kc__staged(st, gidx[j]));
    return s;
}

/* layer_names, backend, keras_version on `group`; a group per layer (a model read with
 * nested models: per nested model too, as Keras writes them) with weight_names and the
 * weights; an empty top_level_model_weights group. */
kc_status kc__legacy_weights_write(kc_model *m, hid_t group) {
    KC_TRY(kc_model_build(m));
    kc__nesting ng;
    staging st = {0};
    KC_TRY(kc__nesting_init(m, &ng));
    int *items = calloc((size_t)m->n_layers + 1, sizeof *items), n = 0;
    const char **names = calloc((size_t)m->n_layers + 1, sizeof *names);
    const char ***sorted = calloc((size_t)m->n_layers + 1, sizeof *sorted);
    kc_status s = names && sorted && items ? kc__staging_init(m, &st)
                                           : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    if (s == KC_STATUS_OK) s = kc__staging_fill(m, &st);
    if (s == KC_STATUS_OK && ng.on) n = kc__nest_items(m, 0, items);
    if (ng.sequential && n > 0) memmove(items, items + 1, (size_t)--n * sizeof *items); /* a Sequential's layers: no InputLayer */
    for (int i = 0; s == KC_STATUS_OK && !ng.on && i < ng.order.n; i++) items[n++] = ng.order.layer[i];
    for (int i = 0; s == KC_STATUS_OK && i < n; i++) {
        names[i] = items[i] >= 0 ? kc__model_layer(m, items[i])->name : m->nests[-items[i] - 1].name;
        sorted[i] = &names[i];
    }
    if (s == KC_STATUS_OK) s = kc__h5_put_fixed_strings(group, "layer_names", names, n);
    if (s == KC_STATUS_OK) s = kc__h5_put_fixed_string(group, "backend", "tensorflow");
    if (s == KC_STATUS_OK) s = kc__h5_put_fixed_string(group, "keras_version", KC_KERAS2_VERSION);
    /* Keras creates the layer groups sorted by name */
    if (s == KC_STATUS_OK) qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    for (int i = 0; i < n && s == KC_STATUS_OK; i++) {
        int it = items[sorted[i] - names];
        hid_t lg = H5I_INVALID_HID;
        s = kc__h5_make_group(group, *sorted[i], &lg);
        if (s != KC_STATUS_OK) break;
        s = it >= 0 ? layer_group(m, it, lg, &st) : nest_group(m, -it, lg, &st);
        H5Gclose(lg);
    }
    if (s == KC_STATUS_OK) {
        hid_t tg = H5I_INVALID_HID;
        s = kc__h5_make_group(group, "top_level_model_weights", &tg);
        if (s == KC_STATUS_OK) {
            s = kc__h5_put_fixed_strings(tg, "weight_names", NULL, 0);
            H5Gclose(tg);
        }
    }
    free(sorted);
    free(names);
    free(items);
    kc__staging_free(&st);
    kc__nesting_free(&ng);
    return s;
}

typedef struct file_layer {
    const char *name;
    kc__strlist weights;     /* weight_names */
} file_layer;

/* The file's layers that have weights, in layer_names order (fl: names.n + 1 entries). */
static kc_status file_layers(hid_t group, const char *gname, const char *label, kc__strlist *names, file_layer **fl,
                             int *n_fl) {
    bool found = false;
    *fl = NULL;
    *n_fl = 0;
    kc_status s = kc__h5_get_strings(group, "layer_names", names, &found);
    if (s != KC_STATUS_OK) return kc__wrap(s, "%s: ", label);
    if (!found)
        return kc__fail(KC_STATUS_BAD_FILE, "%s: '%s' has no 'layer_names' attribute; it is not a Keras weights group",
                        label, gname);
    char *version = NULL;
    s = kc__h5_get_string(group, "keras_version", &version);
    bool has_version = version != NULL;
    free(version);
    if (s != KC_STATUS_OK) return kc__wrap(s, "%s: ", label);
    if (!has_version)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "%s: '%s' has no keras_version attribute, so it was written by Keras 1, whose kernels are "
                        "laid out differently; kerac reads files from Keras 2 and 3: load and re-save the model with "
                        "Keras 2",
                        label, gname);
    *fl = calloc((size_t)names->n + 1, sizeof **fl);
    if (!*fl) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading %s", label);
    for (int i = 0; i < names->n; i++) {
        if (!kc__h5_is_group(group, names->v[i]))
            return kc__fail(KC_STATUS_BAD_FILE, "%s: layer_names lists '%s' but '%s' has no such group", label,
                            names->v[i], gname);
        hid_t lg = H5Gopen2(group, names->v[i], H5P_DEFAULT);
        file_layer f = {names->v[i], {0}};
        bool wfound = false;
        s = lg < 0 ? kc__fail(KC_STATUS_BAD_FILE, "%s: cannot open group '%s'", label, names->v[i])
                   : kc__h5_get_strings(lg, "weight_names", &f.weights, &wfound);
        if (lg >= 0) H5Gclose(lg);
        if (s != KC_STATUS_OK) return kc__wrap(s, "%s: ", label);
        if (f.weights.n > 0) (*fl)[(*n_fl)++] = f;
        else kc__strlist_free(&f.weights);
    }
    return KC_STATUS_OK;
}

/* One group of the layout as the model sees it: a layer with weights, or a model nested in
 * the model (its group holds the weights of all the layers inlined from it). Its weights
 * are entries first .. first + n - 1 of the units' arrays. */
typedef struct unit {
    const char *name;        /* the layer's name, or the nested model's */
    bool nested;
    int first, n;
} unit;

typedef struct units {
    unit *u;
    int n;
    int *layer, *widx, *gidx; /* per weight: layer index, index in its w[], model-wide index */
} units;

static void units_free(units *us) {
    free(us->u);
    free(us->layer);
    free(us->widx);
    free(us->gidx);
}

static void unit_add(units *us, int li, int k, int g, int *used) {
    us->layer[*used] = li;
    us->widx[*used] = k;
    us->gidx[*used] = g;
    (*used)++;
}

/* The weights of nested model `name` (its inlined layers, in the model's layer order, which
 * is the nested model's): those that train, then the others, as Keras's legacy order. */
static void nested_unit(const kc_model *m, const char *name, const int *base, units *us, int *used) {
    for (int pass = 1; pass >= 0; pass--)
        for (int li = 0; li < m->n_layers; li++) {
            const kc_layer *l = kc__model_layer(m, li);
            if (strcmp(l->keras_h5_group, name) != 0) continue;
            for (int k = 0; k < l->n_weights; k++)
                if (kc__weight_trains(l, &l->w[k]) == (pass == 1)) unit_add(us, li, k, base[li] + k, used);
        }
}

/* The model's units in Keras's model.layers order (a nested model where its first layer in
 * that order comes). */
static kc_status make_units(const kc_model *m, units *us) {
    korder o;
    KC_TRY(kc__h5_keras_order(m, &o, false));
    int total = 0, used = 0;
    int *base = calloc((size_t)m->n_layers + 1, sizeof *base);
    for (int i = 0; base && i < m->n_layers; i++) {
        base[i] = total;
        total += kc__model_layer(m, i)->n_weights;
    }
    us->n = 0;
    us->u = calloc((size_t)o.n + 1, sizeof *us->u);
    us->layer = calloc((size_t)total + 1, sizeof(int));
    us->widx = calloc((size_t)total + 1, sizeof(int));
    us->gidx = calloc((size_t)total + 1, sizeof(int));
    kc_status s = base && us->u && us->layer && us->widx && us->gidx
                      ? KC_STATUS_OK
                      : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory ordering the weights of '%s'", m->name);
    for (int i = 0; i < o.n && s == KC_STATUS_OK; i++) {
        const kc_layer *l = kc__model_layer(m, o.layer[i]);
        if (l->n_weights == 0) continue;
        bool nested = l->keras_h5_group[0] != '\0', seen = false;
        const char *name = nested ? l->keras_h5_group : l->name;
        for (int k = 0; k < us->n && !seen; k++) seen = us->u[k].nested == nested && !strcmp(us->u[k].name, name);
        if (seen) continue;
        unit *u = &us->u[us->n++];
        *u = (unit){name, nested, used, 0};
        if (nested) {
            nested_unit(m, name, base, us, &used);
        } else {
            int widx[KC_MAX_WEIGHTS], gidx[KC_MAX_WEIGHTS];
            int nw = kc__h5_layer_weights(m, o.layer[i], widx, gidx);
            for (int j = 0; j < nw; j++) unit_add(us, o.layer[i], widx[j], gidx[j], &used);
        }
        u->n = used - u->first;
    }
    free(base);
    kc__korder_free(&o);
    return s;
}

/* match[u] = the file layer of unit u: by name, or by position as Keras does when a name
 * differs. */
static kc_status match_units(const kc_model *m, const units *us, const file_layer *fl, int n_fl, const char *label,
                             int *match) {
    bool by_pos = false;
    for (int u = 0; u < us->n; u++) {
        match[u] = -1;
        for (int k = 0; k < n_fl && match[u] < 0; k++)
            if (strcmp(fl[k].name, us->u[u].name) == 0) match[u] = k;
        by_pos = by_pos || match[u] < 0;
    }
    if (n_fl != us->n) {
        char list[400];
        size_t used = 0;
        list[0] = '\0';
        for (int k = 0; k < n_fl && used < sizeof list; k++)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", k ? ", " : "", fl[k].name);
        return kc__fail(KC_STATUS_BAD_FILE,
                        "%s: the file has weights for %d layers (%s) but model '%s' has %d layers with weights; the "
                        "weights do not belong to this model",
                        label, n_fl, n_fl ? list : "none", m->name, us->n);
    }
    if (by_pos) {
        kc__log(KC_LOG_INFO, "%s: the layer names differ from model '%s'; matching layers by position, as Keras does",
                label, m->name);
        for (int u = 0; u < us->n; u++) match[u] = u;
    }
    return KC_STATUS_OK;
}

/* Unit u's weights from file layer f into st. */
static kc_status read_unit(const kc_model *m, hid_t group, const units *us, int u, const file_layer *f,
                           const char *label, staging *st) {
    const unit *un = &us->u[u];
    const kc_layer *l0 = kc__model_layer(m, us->layer[un->first]);
    if (f->weights.n != un->n) {
        if (un->nested)
            return kc__fail(KC_STATUS_BAD_FILE,
                            "%s: layer '%s' has %d weights in the file but the layers of nested model '%s' have %d; "
                            "the weights do not belong to this model",
                            label, f->name, f->weights.n, un->name, un->n);
        return kc__fail(KC_STATUS_BAD_FILE,
                        "%s: layer '%s' has %d weights in the file but layer '%s' (%s) has %d; the weights do not "
                        "belong to this model",
                        label, f->name, f->weights.n, l0->name, l0->ops->class_name, un->n);
    }
    hid_t lg = H5Gopen2(group, f->name, H5P_DEFAULT);
    if (lg < 0) return kc__fail(KC_STATUS_BAD_FILE, "%s: cannot open group '%s'", label, f->name);
    kc_status s = KC_STATUS_OK;
    for (int j = 0; j < un->n && s == KC_STATUS_OK; j++) {
        const kc_layer *l = kc__model_layer(m, us->layer[un->first + j]);
        const kc_weight *w = &l->w[us->widx[un->first + j]];
        char what[3 * KC_NAME_MAX + 96];
        snprintf(what, sizeof what, "layer '%s' (%s) weight '%s' (file layer '%s')", l->name, l->ops->class_name,
                 w->name, f->name);
        s = kc__h5_read_weight(lg, f->weights.v[j], &w->shape, kc__staged(st, us->gidx[un->first + j]), what);
        if (s != KC_STATUS_OK) kc__wrap(s, "%s: ", label);
    }
    H5Gclose(lg);
    return s;
}

/* Read the Keras 2 layout under `group` (`gname` for messages: "/model_weights" or "/"). */
kc_status kc__legacy_weights_read(kc_model *m, hid_t group, const char *gname, const char *label) {
    KC_TRY(kc_model_build(m));
    kc__strlist names = {0};
    file_layer *fl = NULL;
    int n_fl = 0, *match = NULL;
    units us = {0};
    staging st = {0};
    kc_status s = file_layers(group, gname, label, &names, &fl, &n_fl);
    if (s == KC_STATUS_OK) s = make_units(m, &us);
    if (s == KC_STATUS_OK) s = kc__staging_init(m, &st);
    if (s == KC_STATUS_OK) {
        match = calloc((size_t)us.n + 1, sizeof *match);
        s = match ? match_units(m, &us, fl, n_fl, label, match)
                  : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading %s", label);
    }
    for (int u = 0; u < us.n && s == KC_STATUS_OK; u++) s = read_unit(m, group, &us, u, &fl[match[u]], label, &st);
    if (s == KC_STATUS_OK) s = kc__staging_commit(m, &st);
    for (int k = 0; fl && k < n_fl; k++) kc__strlist_free(&fl[k].weights);
    free(fl);
    free(match);
    kc__strlist_free(&names);
    units_free(&us);
    kc__staging_free(&st);
    return s;
}
