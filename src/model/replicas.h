/* replicas.h — several devices in one process (kc_model_set_gpus; replicas.c): one replica
 * of the model per device, each trained in a thread of its own as one rank of an
 * in-process collective, so that dist.c's data-parallel step runs unchanged. */
#ifndef KC_MODEL_REPLICAS_H
#define KC_MODEL_REPLICAS_H

#include "fit_hooks.h"

#define KC_MAX_REPLICAS 64

/* Train replica i on devices[i] (devices[0]: m's own; n 1 or 0: no replicas). No checks
 * beyond the count and the names' length: kc_model_set_gpus checks the GPUs; the tests
 * give CPU replicas ("cpu") to run the whole path without a GPU. */
kc_status kc__model_set_replicas(kc_model *m, const char *const *devices, int n);
/* kc_fit of a model with replicas (kc__fit_run calls it): kc__fit_one on each replica in
 * its own thread (replica 0, m, in the calling thread with the callbacks and the hooks'
 * checkpoints; the others with the hooks for a resume only), over an in-process collective. */
kc_status kc__fit_replicas(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                           kc_history **out);
/* One fit of one model (fit.c): what kc__fit_run does without replicas. */
kc_status kc__fit_one(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                      kc_history **out);
/* The replicas (made once; kc__fit_replicas calls it), and replica i (0: m; NULL past the
 * last): tests reach the replicas' backends through these. */
kc_status kc__replicas_open(kc_model *m);
kc_model *kc__replica(kc_model *m, int i);
/* With the model: its replicas and their collective. */
void kc__replicas_free(kc_model *m);

#endif
