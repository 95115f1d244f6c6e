/* name_index.h — private to src/model: the model's layer names, hashed, so that adding a
 * layer (the duplicate-name check, Keras's automatic names "dense", "dense_1", ...) costs
 * the same for the 400,000th layer as for the first. (A linear search made loading a
 * model quadratic in its layers: 80k layers took 28 s.) */
#ifndef KC_NAME_INDEX_H
#define KC_NAME_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "../core/core.h"

struct kc_layer;

typedef struct kc__name_stem {
    const char *stem; /* a layer kind's snake name (static) */
    int next;         /* the next automatic number to try */
} kc__name_stem;

typedef struct kc__name_index {
    int32_t *slot;        /* (cap) layer index + 1; 0: empty */
    size_t cap, n;        /* cap: a power of two */
    kc__name_stem *stems; /* (n_stems) */
    int n_stems;
} kc__name_index;

/* The index of the layer named `name` in layers[], or -1. */
int kc__name_find(const kc__name_index *ix, struct kc_layer *const *layers, const char *name);
/* Add layers[index] (its name is not in the index yet). */
kc_status kc__name_add(kc__name_index *ix, struct kc_layer *const *layers, int index);
/* Where to start looking for a free automatic name "stem_k" (and, after, where to go on). */
int kc__name_stem_next(kc__name_index *ix, const char *stem);
void kc__name_stem_set(kc__name_index *ix, const char *stem, int next);
void kc__name_index_free(kc__name_index *ix);

#endif /* KC_NAME_INDEX_H */
