/* keras_h5_impl.h — private to the Keras HDF5 weights code: keras_h5.c (Keras's layer
 * order, staging, the Keras 3 layout, the files) and keras_h5_legacy.c (Keras 2's layout,
 * with the groups of nested models). */
#ifndef KC_KERAS_H5_IMPL_H
#define KC_KERAS_H5_IMPL_H

#include "h5util.h"

/* A model's layers in Keras's model.layers order, with their Keras 3 weight paths. */
typedef struct korder {
    int n;
    int *layer;              /* (n) model layer index, in Keras's model.layers order */
    char (*path)[2 * KC_NAME_MAX + 16]; /* (n) Keras 3 name: "conv2d", "conv2d_1", ... */
} korder;

/* nested: the layers inlined from a nested model go by their path inside it (keras_path);
 * otherwise every layer is numbered as in the flattened model. */
kc_status kc__h5_keras_order(const kc_model *m, korder *o, bool nested);
void kc__korder_free(korder *o);

/* The weights of layer li in Keras order (trainable first): index into l->w, and the
 * model-wide index that kc_model_get_weight / kc_model_set_weight take; returns how many. */
int kc__h5_layer_weights(const kc_model *m, int li, int widx[KC_MAX_WEIGHTS], int gidx[KC_MAX_WEIGHTS]);

/* Host copies of every weight, staged so that a load either sets all of them or none. */
typedef struct staging {
    float *data;             /* (n_params) */
    int64_t *offset;         /* (n_weights + 1) where weight g starts in data */
    int n;
} staging;

kc_status kc__staging_init(kc_model *m, staging *st);
void kc__staging_free(staging *st);
static inline float *kc__staged(const staging *st, int g) { return st->data + st->offset[g]; }
kc_status kc__staging_commit(kc_model *m, const staging *st);   /* staged values into the model */
kc_status kc__staging_fill(kc_model *m, const staging *st);     /* the model's values into st */

/* Keras 2's layout under `group` (keras_h5_legacy.c): /model_weights of a full-model file,
 * or the root of a weights file; `gname` and `label` name them in messages. */
kc_status kc__legacy_weights_write(kc_model *m, hid_t group);
kc_status kc__legacy_weights_read(kc_model *m, hid_t group, const char *gname, const char *label);

#endif /* KC_KERAS_H5_IMPL_H */
