/* name_index.c — an open-addressing hash of layer names (name_index.h). The names live in
 * the layers; the table holds their indices. */
#include <stdlib.h>
#include <string.h>

#include "../layers/layer.h"
#include "name_index.h"

static uint64_t hash(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

int kc__name_find(const kc__name_index *ix, kc_layer *const *layers, const char *name) {
    if (!ix->cap) return -1;
    for (size_t i = hash(name) & (ix->cap - 1);; i = (i + 1) & (ix->cap - 1)) {
        int32_t v = ix->slot[i];
        if (v == 0) return -1;
        if (strcmp(layers[v - 1]->name, name) == 0) return v - 1;
    }
}

static void put(int32_t *slot, size_t cap, kc_layer *const *layers, int index) {
    size_t i = hash(layers[index]->name) & (cap - 1);
    while (slot[i] != 0) i = (i + 1) & (cap - 1);
    slot[i] = index + 1;
}

kc_status kc__name_add(kc__name_index *ix, kc_layer *const *layers, int index) {
    if ((ix->n + 1) * 2 > ix->cap) { /* at most half full */
        size_t cap = ix->cap ? ix->cap * 2 : 64;
        int32_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of memory indexing %zu layer names", ix->n + 1);
        for (size_t i = 0; i < ix->cap; i++)
            if (ix->slot[i]) put(slot, cap, layers, ix->slot[i] - 1);
        free(ix->slot);
        ix->slot = slot;
        ix->cap = cap;
    }
    put(ix->slot, ix->cap, layers, index);
    ix->n++;
    return KC_STATUS_OK;
}

static kc__name_stem *stem_of(kc__name_index *ix, const char *stem, bool make) {
    for (int i = 0; i < ix->n_stems; i++)
        if (ix->stems[i].stem == stem || strcmp(ix->stems[i].stem, stem) == 0) return &ix->stems[i];
    if (!make) return NULL;
    kc__name_stem *p = realloc(ix->stems, (size_t)(ix->n_stems + 1) * sizeof *p);
    if (!p) return NULL;
    ix->stems = p;
    ix->stems[ix->n_stems] = (kc__name_stem){stem, 0};
    return &ix->stems[ix->n_stems++];
}

int kc__name_stem_next(kc__name_index *ix, const char *stem) {
    kc__name_stem *s = stem_of(ix, stem, false);
    return s ? s->next : 0;
}

void kc__name_stem_set(kc__name_index *ix, const char *stem, int next) {
    kc__name_stem *s = stem_of(ix, stem, true);
    if (s) s->next = next; /* out of memory: the next search starts at 0, slower, still right */
}

void kc__name_index_free(kc__name_index *ix) {
    free(ix->slot);
    free(ix->stems);
    *ix = (kc__name_index){0};
}
