/* fit_env.c — what kc_fit asks of src/env, in five calls (see env.h, "fit hooks"): the GPU
 * monitor of the model's device (readings in the batch and epoch logs), the device
 * placement lines at the first step, and the input-bound verdict at each epoch's end. */
#include <string.h>

#include "../model/model.h"
#include "env.h"

void kc__fit_env_begin(kc__fit_env *e, kc_model *m) {
    memset(e, 0, sizeof *e);
    if (!m || !m->be) return;
    kc__placement_begin(m->be);
    kc__fit_monitor_start(m->be, &e->mon);
}

void kc__fit_env_epoch_begin(kc__fit_env *e) { kc_monitor_reset(e->mon); }

void kc__fit_env_step(kc__fit_env *e, kc_model *m, int micro_batch, kc_batch_logs *bl) {
    if (!e->placed && m && m->be) {
        e->placed = true;
        if (kc_get_log_device_placement())
            for (int i = 0; i < m->n_layers; i++) kc__placement_layer(m->be, m->layers[i], micro_batch);
    }
    if (bl) bl->has_gpu = kc_monitor_latest(e->mon, 0, &bl->gpu);
}

void kc__fit_env_epoch_end(kc__fit_env *e, kc_model *m, double input_wait_seconds, kc_epoch_logs *el) {
    el->input_wait_seconds = input_wait_seconds;
    el->has_gpu = kc_monitor_summary(e->mon, 0, &el->gpu);
    char verdict[256];
    if (kc_input_bound_verdict(input_wait_seconds, el->seconds, m && m->be ? m->be->device : "cpu", verdict, sizeof verdict))
        kc__log(KC_LOG_INFO, "model '%s', epoch %d: %s", m ? m->name : "?", el->epoch + 1, verdict);
}

void kc__fit_env_end(kc__fit_env *e, kc_model *m) {
    kc_monitor_stop(e->mon);
    e->mon = NULL;
    if (m && m->be) kc__placement_end(m->be);
}
