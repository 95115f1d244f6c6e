/* tile.c — inference in tiles of the batch. A batch of 1000 small images runs each
 * layer over the whole batch: workload A's first convolution writes 86.5 MB that its max
 * pooling then reads back from memory, and so on down the network. Run as tiles of T
 * examples instead, each tile through every layer (the plan built for T), the activations of
 * a tile stay in the caches between the layers: the fusion of a convolution with its pooling
 * (and of everything after), without a fused kernel per pair of layers. Inference only: no
 * layer's inference output depends on the other examples of its batch, so the results are
 * those of the whole batch (up to the summation order inside the kernels); training keeps its
 * batch (batch statistics, one gradient).
 *
 * T is the largest count whose biggest layer (input + output activations) fits the backend's
 * kc_backend.infer_tile_bytes, spread evenly over the batch. No tiles where the backend asks
 * none (0: the GPU), or where fewer than KC_TILE_MIN examples fit or the weights alone fill
 * the budget: each tile reads all weights again, and tiny tiles pay each layer's fixed cost
 * (a parallel region) too often. */
#include "model.h"

#define KC_TILE_MIN 16

int kc__model_infer_tile(const kc_model *m, int batch) {
    const size_t budget = m->be ? m->be->infer_tile_bytes : 0;
    if (budget == 0 || batch < 2 * KC_TILE_MIN || (size_t)m->n_params * sizeof(float) > budget / 2) return batch;
    int64_t peak = 1; /* floats per example of the largest layer's inputs and output together */
    for (int i = 1; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        if ((l->ops->flags & KC_LAYER_INPUT) || kc__layer_is_alias(l, false)) continue;
        int64_t act = kc__shape_size(&l->out_shape);
        for (int k = 0; k < l->n_in; k++) act += kc__shape_size(&m->layers[l->in[k]]->out_shape);
        peak = KC_MAX(peak, act);
    }
    const int64_t fit = (int64_t)(budget / sizeof(float)) / peak;
    if (fit < KC_TILE_MIN) return batch;
    if (fit >= batch) return batch;
    const int64_t tiles = (batch + fit - 1) / fit;
    return (int)((batch + tiles - 1) / tiles); /* A: 38 fit, 1000 = 27 tiles of 38 (the last 12) */
}
