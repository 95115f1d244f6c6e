/* keras_nest.h — the nested models of a model read from a Keras file (kc_model.nests), as the
 * writers see them: which layers each holds, what it is called on, what it gives, and the
 * order of its entries (keras_nest.c). */
#ifndef KC_KERAS_NEST_H
#define KC_KERAS_NEST_H

#include "keras_h5_impl.h"

/* The nesting of a model as saved: n nested models (1-based as kc_layer.keras_nest), each
 * called on node in[k] and giving node out[k]; `on` false: the model is saved flat. */
typedef struct kc__nesting {
    bool on;
    bool sequential;         /* on, and a Sequential config's model whose entries still form a chain
                                from its InputLayer to its output: written as a Sequential */
    int n;
    int *in, *out;           /* (n + 1), index 0 unused: where its first call reads and gives */
    int *calls;              /* (n + 1): how many times each is called (a siamese network's base: 2) */
    int *local;              /* (n + 1): how many times each is called in one call of its parent
                                (calls[k] / calls[parent]); its call c lies in its parent's call c / local[k] */
    int max_calls;
    int *call_in, *call_out; /* call c of nested model k reads call_in[.. + i] at its input i and gives
                                call_out[.. + j] as its output j: KC__NEST_IO(ng, call_in, k, c)[i] */
    korder order;            /* the layers in Keras's model.layers order, with their Keras 3 weight
                                paths (on: the nested models' layers at their kc_layer.keras_path) */
} kc__nesting;

#define KC__NEST_IO(ng, a, k, c) ((ng)->a + ((size_t)(k) * (size_t)(ng)->max_calls + (size_t)(c)) * KC_NEST_MAX_IO)

/* How many inputs (outputs) nested model k has: its n_in (n_out) where it has several, else 1. */
static inline int kc__nest_n_in(const kc_model *m, int k) { return m->nests[k - 1].n_in > 1 ? m->nests[k - 1].n_in : 1; }
static inline int kc__nest_n_out(const kc_model *m, int k) { return m->nests[k - 1].n_out > 1 ? m->nests[k - 1].n_out : 1; }

/* Whether the model keeps its nesting: it has nested models, each called on its inputs and
 * read through its outputs at each call; one called several times (its layers shared layers,
 * called once per call) is called the same number of times in each call of its parent, each
 * call within one call of its parent (a graph changed since, where that no longer holds, is
 * saved flat, as before). ng->order is filled either way. */
kc_status kc__nesting_init(const kc_model *m, kc__nesting *ng);
void kc__nesting_free(kc__nesting *ng);

/* Node `node` seen from nested model `scope` (0: the model): 0 when it is a layer of scope
 * itself, k > 0 when it lies in nested model k, a child of scope, and -1 when it lies
 * outside scope. */
int kc__nest_child(const kc_model *m, int node, int scope);

/* Which call of its nested model node belongs to: a shared layer's call, or, for an operation
 * node (made anew at each call of its nested model, with the same inner name), how many layers
 * of that nested model before it have its inner name; 0 for a layer of the model itself. */
int kc__nest_call(const kc_model *m, int node);

/* Which call of nested model k (holding node's layer, or an ancestor of the nested model
 * holding it) node belongs to: its own nested model's call, divided through the nesting. */
int kc__nest_call_in(const kc_model *m, const kc__nesting *ng, int node, int k);

/* The entries of `scope` in the model's layer order (a nested model where its first layer
 * comes): items[i] >= 0 a layer (node id, first calls only), < 0 the nested model -items[i];
 * returns how many (items: m->n_layers entries). */
int kc__nest_items(const kc_model *m, int scope, int *items);

/* The layers of nested model `scope`, its nested models' included, in its order (that of
 * its `weights`); returns how many (out: m->n_layers entries). */
int kc__nest_layers(const kc_model *m, int scope, int *out);

/* The Keras whose file gave the model the nested models it keeps (2: tf-keras, 3), else 0. */
int kc__nesting_flavour(const kc_model *m);

/* Whether a nested model's layers are all frozen (its "trainable": false). */
bool kc__nest_frozen(const kc_model *m, int scope);

#endif /* KC_KERAS_NEST_H */
