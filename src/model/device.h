/* device.h — private: what a model asks of its backend and what it observes of it while it
 * runs (device.c):
 *   - whether the backend has every operation the model's layers call (checked when the
 *     model is built, and the loss and optimizer when it is compiled);
 *   - the device placement lines (--log-device-placement): one per layer at the first
 *     training step, with the kernel the backend says it runs for that layer (its describe
 *     entry) and the layer's workspace;
 *   - the fit hooks: the GPU monitor of the model's device (readings in the batch and epoch
 *     logs), the placement lines, and the input-bound verdict at each epoch's end.
 * The probes behind them (which NVML GPU a device is, the verdict's rule) are src/env's. */
#ifndef KC_MODEL_DEVICE_H
#define KC_MODEL_DEVICE_H

#include <stdbool.h>
#include <stddef.h>

#include "model.h"

/* KC_STATUS_UNSUPPORTED, naming the first layer whose operation m->be lacks (and, when
 * training, the loss's and the optimizer's). */
kc_status kc__model_check_backend(const kc_model *m, bool training);

/* The text of a layer's placement line: "placement: wide (Conv2D) on cpu: cpu im2col+gemm
 * (OpenBLAS, patch 3x3x8, 12 images per chunk); workspace 1.2 MiB". ws_bytes: the workspace
 * a call of the layer gets (the plan's shared region; 0: the layer's own need). */
const char *kc__placement_describe(kc_backend *be, const kc_layer *l, int batch, size_t ws_bytes, char *buf, size_t n);
/* Log that line, whatever the log level, when placement logging is on. */
void kc__placement_layer(kc_backend *be, const kc_layer *l, int batch, size_t ws_bytes);

/* ---- fit hooks (src/model/fit.c). A kc__fit_env lives on kc_fit's stack:
 *   kc__fit_env_begin       once the model is built, before the first training step is
 *                           planned (the GPU monitor of a CUDA device)
 *   kc__fit_env_epoch_begin at each epoch's start (resets the epoch's GPU summary)
 *   kc__fit_env_step        after each optimizer step, before the on_batch_end callbacks:
 *                           the first call logs the placement lines (micro_batch: the batch
 *                           of one forward, with the plan of that step); fills bl's GPU reading
 *   kc__fit_env_epoch_end   after el.seconds is set, before the on_epoch_end callbacks, with
 *                           the loader's kc__loader_wait_seconds: fills el's GPU summary and
 *                           input_wait_seconds, logs the input-bound verdict (info)
 *   kc__fit_env_end         on every way out of kc_fit */
typedef struct kc__fit_env {
    kc_monitor *mon;
    bool placed;
} kc__fit_env;
void kc__fit_env_begin(kc__fit_env *e, kc_model *m);
void kc__fit_env_epoch_begin(kc__fit_env *e);
void kc__fit_env_step(kc__fit_env *e, kc_model *m, int micro_batch, kc_batch_logs *bl);
void kc__fit_env_epoch_end(kc__fit_env *e, kc_model *m, double input_wait_seconds, kc_epoch_logs *el);
void kc__fit_env_end(kc__fit_env *e, kc_model *m);

#endif /* KC_MODEL_DEVICE_H */
