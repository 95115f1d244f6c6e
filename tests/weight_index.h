/* weight_index.h — for the cmocka tests that read Keras files: the index of a model's weight
 * by its layer and name (include after cmocka.h and kerac.h). */
#ifndef KC_TEST_WEIGHT_INDEX_H
#define KC_TEST_WEIGHT_INDEX_H

#include <string.h>

/* The weight of layer `layer` called `name` (its index for kc_model_get_weight), or fails. */
static int weight_index(kc_model *m, const char *layer, const char *name) {
    for (int g = 0, n = kc_model_num_weights(m); g < n; g++) {
        kc_weight_info wi;
        if (kc_model_weight_info(m, g, &wi) != KC_STATUS_OK) fail_msg("weight_info %d: %s", g, kc_last_error());
        if (!strcmp(wi.layer, layer) && !strcmp(wi.name, name)) return g;
    }
    fail_msg("no weight %s/%s", layer, name);
    return -1;
}

#endif /* KC_TEST_WEIGHT_INDEX_H */
