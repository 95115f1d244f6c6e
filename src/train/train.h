/* train.h — private: the optimizer's options and state, learning-rate schedules and the
 * number of state slots per weight (optimizer.c).
 *
 * src/train sits below src/model: it sees only src/core and the public headers
 * (include/kerac.h; include/kerac_backend.h for kc_opt_kind, which the backends' update
 * kernels share), never a model, a layer or a backend. The update itself is a backend
 * kernel that src/model calls (kc_backend.optimizer_step) with what this state says. */
#ifndef KC_TRAIN_H
#define KC_TRAIN_H

#include "../core/core.h"
#include "kerac_backend.h"

typedef struct kc_optimizer_state {
    kc_opt_kind kind;
    kc_optimizer_opts opts;  /* normalised: defaults filled in; schedule arrays owned below */
    int64_t *boundaries;
    double *values;
    double lr_scale;         /* ReduceLROnPlateau multiplies the schedule by this */
    int64_t iterations;      /* optimizer steps taken (Keras's optimizer.iterations) */
} kc_optimizer_state;

/* Keras's defaults for the options left 0, checked (messages name the option); o owns
 * copies of the schedule's arrays. */
kc_status kc__optimizer_init(kc_optimizer_state *o, const kc_optimizer_opts *in);
/* Current learning rate (schedule x lr_scale) at the given optimizer step. */
double kc__optimizer_lr(const kc_optimizer_state *o, int64_t step);
/* The optimizer's name as Keras spells it in configs ("sgd", "adam", "adamw", "rmsprop"). */
const char *kc__optimizer_name(kc_opt_kind kind);
/* State slabs (n_trainable floats each) the optimizer keeps: 0, 1 or 2. */
int kc__optimizer_slots(kc_opt_kind kind, double momentum);

#endif /* KC_TRAIN_H */
