/* replicas.c — MirroredStrategy's single-process form (kc_model_set_gpus, `kerac train
 * --gpus`): one replica of the model per device inside one process. Each replica is
 * trained by kc__fit_one in a thread of its own as one rank of an in-process kc_collective
 * (the threads meet at a barrier; a sum is computed in rank order, each thread summing its
 * own slice of every rank's buffer), so the data-parallel step of dist.c runs as it does
 * over MPI, from the same code: the sampler's slice of each epoch's order, the split of
 * the global batch, rank 0's weights broadcast at the start, the gradients summed in
 * buckets overlapped with backward (on GPUs by NCCL, one communicator per GPU, each joined
 * by its own thread with ncclCommInitRank: NCCL's one-device-per-thread form), the loss and
 * metric sums, sync_batchnorm. Replica 0 is the model itself, in the calling thread: the
 * callbacks, checkpoints and history are its own. The other replicas get the hooks too
 * (a resume loads the checkpoint into every replica, as every MPI rank does) without a
 * checkpoint folder; the hooks are called under one mutex (a checkpoint's HDF5 reads are
 * not made from two threads at once). A replica that fails stops the others at their next
 * meeting, with its message. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../env/env.h"
#include "dist.h"
#include "replicas.h"

/* ---------------------------------------------------------------- the in-process collective */

typedef struct tc_shared {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int n, count;
    unsigned gen;
    int failed;                   /* the first replica that failed, -1: none */
    char why[KC_ERROR_MAX];       /* its message */
    void *ptr[KC_MAX_REPLICAS];   /* each rank's buffer of the current call */
} tc_shared;

typedef struct tc_rank {
    tc_shared *sh;
    int rank;
    char err[KC_ERROR_MAX];
} tc_rank;

static const char *tc_error(void *ctx) { return ((tc_rank *)ctx)->err; }

/* Every rank arrives; fails (for all) once a replica has failed. */
static kc_status tc_barrier(tc_rank *t) {
    tc_shared *sh = t->sh;
    pthread_mutex_lock(&sh->mu);
    unsigned gen = sh->gen;
    if (sh->failed < 0 && ++sh->count == sh->n) {
        sh->count = 0;
        sh->gen++;
        pthread_cond_broadcast(&sh->cv);
    } else {
        while (sh->gen == gen && sh->failed < 0) pthread_cond_wait(&sh->cv, &sh->mu);
    }
    bool failed = sh->gen == gen && sh->failed >= 0;
    if (failed)
        snprintf(t->err, sizeof t->err, "replica %d stopped: %.900s", sh->failed, sh->why);
    pthread_mutex_unlock(&sh->mu);
    return failed ? KC_STATUS_IO : KC_STATUS_OK;
}

static void tc_abort(tc_shared *sh, int rank, const char *why) {
    pthread_mutex_lock(&sh->mu);
    if (sh->failed < 0) {
        sh->failed = rank;
        snprintf(sh->why, sizeof sh->why, "%s", why);
    }
    pthread_cond_broadcast(&sh->cv);
    pthread_mutex_unlock(&sh->mu);
}

/* buf (n floats, or doubles with f64) summed over the ranks: every rank sums its slice of
 * the elements over all ranks' buffers in rank order and writes it into all of them. */
static kc_status tc_sum(tc_rank *t, void *buf, int64_t n, bool f64) {
    tc_shared *sh = t->sh;
    sh->ptr[t->rank] = buf;
    KC_TRY(tc_barrier(t));
    int64_t lo = n * t->rank / sh->n, hi = n * (t->rank + 1) / sh->n;
    for (int64_t i = lo; i < hi; i++) {
        if (f64) {
            double s = 0;
            for (int r = 0; r < sh->n; r++) s += ((double *)sh->ptr[r])[i];
            for (int r = 0; r < sh->n; r++) ((double *)sh->ptr[r])[i] = s;
        } else {
            float s = 0;
            for (int r = 0; r < sh->n; r++) s += ((float *)sh->ptr[r])[i];
            for (int r = 0; r < sh->n; r++) ((float *)sh->ptr[r])[i] = s;
        }
    }
    return tc_barrier(t);
}

static kc_status tc_sum_f32(void *ctx, float *buf, int64_t n) { return tc_sum(ctx, buf, n, false); }
static kc_status tc_sum_f64(void *ctx, double *buf, int64_t n) { return tc_sum(ctx, buf, n, true); }

static kc_status tc_broadcast(void *ctx, void *buf, size_t bytes, int root) {
    tc_rank *t = ctx;
    t->sh->ptr[t->rank] = buf;
    KC_TRY(tc_barrier(t));
    if (t->rank != root) memcpy(buf, t->sh->ptr[root], bytes);
    return tc_barrier(t);
}

static kc_status tc_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    tc_rank *t = ctx;
    t->sh->ptr[t->rank] = (void *)send;
    KC_TRY(tc_barrier(t));
    for (int r = 0; r < t->sh->n; r++) memcpy((char *)recv + (size_t)r * bytes, t->sh->ptr[r], bytes);
    return tc_barrier(t);
}

/* ---------------------------------------------------------------- the replicas */

typedef struct kc__replicas {
    int n;
    kc_model *m[KC_MAX_REPLICAS]; /* [0]: the model itself (not owned) */
    tc_shared sh;
    tc_rank rk[KC_MAX_REPLICAS];
    kc_collective coll[KC_MAX_REPLICAS];
    pthread_mutex_t hook_mu;      /* the hooks are called by one replica at a time */
} kc__replicas;

/* The replicas and their collective (the devices stay). */
static void replicas_close(kc_model *m) {
    kc__replicas *rs = m->replicas;
    if (!rs) return;
    for (int i = 1; i < rs->n; i++) kc_model_destroy(rs->m[i]);
    pthread_mutex_destroy(&rs->sh.mu);
    pthread_cond_destroy(&rs->sh.cv);
    pthread_mutex_destroy(&rs->hook_mu);
    free(rs);
    m->replicas = NULL;
}

void kc__replicas_free(kc_model *m) {
    replicas_close(m);
    free(m->replica_dev);
    m->replica_dev = NULL;
    m->n_replicas = 0;
}

kc_status kc__model_set_replicas(kc_model *m, const char *const *devices, int n) {
    if (n < 0 || n > KC_MAX_REPLICAS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%d devices: kerac trains on 1 to %d in one process", n,
                        KC_MAX_REPLICAS);
    kc__replicas_free(m);
    if (n <= 1) return KC_STATUS_OK;
    m->replica_dev = kc__calloc((size_t)n, sizeof *m->replica_dev, "the replicas' devices");
    if (!m->replica_dev) return KC_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++) {
        if (strlen(devices[i]) >= sizeof m->replica_dev[i]) {
            kc__replicas_free(m);
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "device name '%.40s' is too long", devices[i]);
        }
        snprintf(m->replica_dev[i], sizeof m->replica_dev[i], "%s", devices[i]);
    }
    m->n_replicas = n;
    return KC_STATUS_OK;
}

/* The GPUs CUDA sees, from the driver (as kerac doctor reads them); 0 with *why. */
static int visible_gpus(char *why, size_t n) {
    kc__driver d;
    memset(&d, 0, sizeof d);
    kc__driver_probe(&d, NULL);
    if (!d.found) snprintf(why, n, "the NVIDIA driver (libcuda.so.1) cannot be loaded: %s", d.error);
    else if (d.count <= 0) snprintf(why, n, "the NVIDIA driver sees no GPU (%s)", d.init_error[0] ? d.init_error : "none");
    return d.found ? d.count : 0;
}

kc_status kc_model_set_gpus(kc_model *m, const int *ids, int n) {
    if (!m) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_gpus: model is NULL");
    if (n < 0 || n > KC_MAX_REPLICAS || (n > 0 && !ids))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_gpus: %d GPUs%s; give 1 to %d indices, or NULL "
                        "and 0 for every GPU", n, n > 0 && !ids ? " but ids is NULL" : "", KC_MAX_REPLICAS);
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "GPU index %d: GPUs are numbered from 0", ids[i]);
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i])
                return kc__fail(KC_STATUS_INVALID_ARGUMENT, "GPU %d is listed twice; give each GPU once", ids[i]);
    }
    char why[700] = "";
    int count = visible_gpus(why, sizeof why);
    if (count <= 0)
        return kc__fail(KC_STATUS_DEVICE, "training on several GPUs needs NVIDIA GPUs, but %s; `kerac doctor` "
                        "says more", why);
    int all[KC_MAX_REPLICAS];
    if (n == 0) {
        n = KC_MIN(count, KC_MAX_REPLICAS);
        for (int i = 0; i < n; i++) all[i] = i;
        ids = all;
    }
    char devs[KC_MAX_REPLICAS][24];
    const char *names[KC_MAX_REPLICAS];
    for (int i = 0; i < n; i++) {
        if (ids[i] >= count)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "GPU %d does not exist: this machine has %d GPU%s (0 to %d, "
                            "as CUDA numbers them after CUDA_VISIBLE_DEVICES)", ids[i], count, count == 1 ? "" : "s",
                            count - 1);
        snprintf(devs[i], sizeof devs[i], "cuda:%d", ids[i]);
        names[i] = devs[i];
    }
    if (m->built) { /* replica 0 is the model: it must be on the first GPU already */
        const char *d = m->be->device;
        size_t len = strlen(devs[0]);
        if (strncmp(d, devs[0], len) != 0 || (d[len] != '\0' && d[len] != ' '))
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "the model is built on %s, but the first of its GPUs is %s; "
                            "set the GPUs before building it (or build it on %s)", d, devs[0], devs[0]);
    } else {
        KC_TRY(kc_model_set_device(m, devs[0]));
    }
    return kc__model_set_replicas(m, names, n);
}

/* Replica i: m's config on its device, compiled as m (the weights come from rank 0's
 * broadcast at each fit's start). */
static kc_status make_replica(kc_model *m, int i, kc_model **out) {
    char *json = NULL;
    KC_TRY(kc_model_to_json(m, 3, &json));
    kc_device_opts o;
    if (m->dev_set) o = kc__device_opts_view(&m->dev);
    else kc_device_opts_default(&o);
    o.device = m->replica_dev[i];
    kc_model *r = NULL;
    kc_status s = kc_model_from_json_ex(json, strlen(json), &o, &r);
    kc_free(json);
    if (s == KC_STATUS_OK) {
        r->seed = m->seed;
        s = kc__model_build(r);
    }
    kc_compile_opts co = {.optimizer = m->opt.opts, .loss = kc_loss_name(m->loss), .from_logits = m->from_logits};
    co.optimizer.name = kc__optimizer_name(m->opt.kind);
    for (int k = 0; k < m->n_metrics; k++) {
        co.metrics[k] = m->metrics[k].name;
        if (m->metrics[k].k > 1) co.top_k = m->metrics[k].k;
    }
    if (s == KC_STATUS_OK) s = kc_compile(r, &co);
    if (s == KC_STATUS_OK && r->n_trainable != m->n_trainable)
        s = kc__fail(KC_STATUS_INTERNAL, "replica %d has %lld trainable parameters, the model %lld", i,
                     (long long)r->n_trainable, (long long)m->n_trainable);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(r);
        return kc__wrap(s, "making the model's replica on %s: ", m->replica_dev[i]);
    }
    *out = r;
    return KC_STATUS_OK;
}

kc_model *kc__replica(kc_model *m, int i) {
    return m->replicas && i >= 0 && i < m->replicas->n ? m->replicas->m[i] : NULL;
}

kc_status kc__replicas_open(kc_model *m) {
    if (m->replicas) return KC_STATUS_OK;
    if (!m->compiled)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "the model's replicas: compile the model first");
    kc__replicas *rs = kc__calloc(1, sizeof *rs, "the model's replicas");
    if (!rs) return KC_STATUS_OUT_OF_MEMORY;
    pthread_mutex_init(&rs->sh.mu, NULL);
    pthread_cond_init(&rs->sh.cv, NULL);
    pthread_mutex_init(&rs->hook_mu, NULL);
    m->replicas = rs;
    rs->m[0] = m;
    rs->n = 1;
    kc_status s = KC_STATUS_OK;
    for (int i = 1; i < m->n_replicas && s == KC_STATUS_OK; i++)
        if ((s = make_replica(m, i, &rs->m[i])) == KC_STATUS_OK) rs->n++;
    if (s != KC_STATUS_OK) {
        replicas_close(m); /* the next fit tries again */
        return s;
    }
    rs->sh.n = rs->n;
    for (int i = 0; i < rs->n; i++) {
        rs->rk[i] = (tc_rank){.sh = &rs->sh, .rank = i};
        rs->coll[i] = (kc_collective){.rank = i, .size = rs->n, .ctx = &rs->rk[i], .allreduce_sum_f32 = tc_sum_f32,
                                      .allreduce_sum_f64 = tc_sum_f64, .broadcast = tc_broadcast,
                                      .allgather = tc_allgather, .error = tc_error};
    }
    return KC_STATUS_OK;
}

/* The optimizer's state as the model's (a later fit continues it on every replica). */
static kc_status sync_optimizer(kc_model *m, kc_model *r) {
    r->opt.iterations = m->opt.iterations;
    r->opt.lr_scale = m->opt.lr_scale;
    float *slots[2][2] = {{m->slot0, r->slot0}, {m->slot1, r->slot1}};
    size_t bytes = (size_t)m->n_trainable * sizeof(float);
    float *host = NULL;
    kc_status s = KC_STATUS_OK;
    for (int k = 0; k < 2 && s == KC_STATUS_OK; k++) {
        if (!slots[k][0] || !slots[k][1] || !bytes) continue;
        if (!host && !(host = kc__calloc(1, bytes, "the optimizer's state"))) return KC_STATUS_OUT_OF_MEMORY;
        s = m->be->to_host(m->be, host, slots[k][0], bytes);
        if (s == KC_STATUS_OK) s = r->be->to_device(r->be, slots[k][1], host, bytes);
    }
    free(host);
    return s;
}

/* ---------------------------------------------------------------- the hooks, one replica at a time */

typedef struct hook_user {
    const kc__fit_hooks *in;
    pthread_mutex_t *mu;
} hook_user;

typedef struct hook_run {
    hook_user u;
    void *run;
} hook_run;

static kc_status h_fit_opts(void *user, const kc_model *m, kc_fit_opts *o) {
    hook_user *u = user;
    if (!u->in->fit_opts) return KC_STATUS_OK;
    pthread_mutex_lock(u->mu);
    kc_status s = u->in->fit_opts(u->in->user, m, o);
    pthread_mutex_unlock(u->mu);
    return s;
}

static kc_status h_begin(void *user, kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng,
                         int64_t *order, void **run, kc__fit_resume *resume) {
    hook_user *u = user;
    *run = NULL;
    if (!u->in->begin) return KC_STATUS_OK;
    void *in_run = NULL;
    pthread_mutex_lock(u->mu);
    kc_status s = u->in->begin(u->in->user, m, o, g, rng, order, &in_run, resume);
    pthread_mutex_unlock(u->mu);
    if (!in_run) return s;
    hook_run *h = kc__calloc(1, sizeof *h, "the fit hooks' state");
    if (!h) {
        pthread_mutex_lock(u->mu);
        if (u->in->end) u->in->end(in_run);
        pthread_mutex_unlock(u->mu);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    *h = (hook_run){.u = *u, .run = in_run};
    *run = h;
    return s;
}

static void h_train_begun(void *run, kc_model *m) {
    hook_run *h = run;
    if (!h->u.in->train_begun) return;
    pthread_mutex_lock(h->u.mu);
    h->u.in->train_begun(h->run, m);
    pthread_mutex_unlock(h->u.mu);
}

static kc_status h_after_step(void *run, kc_model *m, const kc__fit_pos *pos, const kc_batch_logs *bl,
                              const kc_epoch_logs *hist, int n_hist) {
    hook_run *h = run;
    if (!h->u.in->after_step) return KC_STATUS_OK;
    pthread_mutex_lock(h->u.mu);
    kc_status s = h->u.in->after_step(h->run, m, pos, bl, hist, n_hist);
    pthread_mutex_unlock(h->u.mu);
    return s;
}

static kc_status h_after_epoch(void *run, kc_model *m, const kc__fit_pos *pos, bool complete, bool stopping,
                               const kc_epoch_logs *el, const kc_epoch_logs *hist, int n_hist) {
    hook_run *h = run;
    if (!h->u.in->after_epoch) return KC_STATUS_OK;
    pthread_mutex_lock(h->u.mu);
    kc_status s = h->u.in->after_epoch(h->run, m, pos, complete, stopping, el, hist, n_hist);
    pthread_mutex_unlock(h->u.mu);
    return s;
}

static void h_end(void *run) {
    hook_run *h = run;
    pthread_mutex_lock(h->u.mu);
    if (h->u.in->end) h->u.in->end(h->run);
    pthread_mutex_unlock(h->u.mu);
    free(h);
}

/* ---------------------------------------------------------------- the fit */

typedef struct job {
    kc__replicas *rs;
    int r;
    const kc_dataset *train;
    kc_fit_opts o;
    hook_user hu;
    kc__fit_hooks hooks;
    kc_history *h;
    kc_status s;
    char err[KC_ERROR_MAX];
} job;

static void *job_run(void *p) {
    job *j = p;
    j->s = kc__fit_one(j->rs->m[j->r], j->train, &j->o, j->hu.in ? &j->hooks : NULL, j->r == 0 ? &j->h : NULL);
    if (j->s != KC_STATUS_OK) {
        snprintf(j->err, sizeof j->err, "%s", kc_last_error());
        tc_abort(&j->rs->sh, j->r, j->err);
    }
    return NULL;
}

/* Replica r's fit: the model's options with the collective of rank r; the callbacks and
 * the checkpoint folder are replica 0's alone. */
static void job_init(job *j, kc__replicas *rs, int r, const kc_dataset *train, const kc_fit_opts *opts,
                     const kc__fit_hooks *hooks) {
    *j = (job){.rs = rs, .r = r, .train = train, .o = opts ? *opts : (kc_fit_opts){0}};
    j->o.collective = &rs->coll[r];
    if (r > 0) {
        j->o.callbacks = NULL;
        j->o.num_callbacks = 0;
        j->o.checkpoint_dir = NULL;
    }
    if (!hooks) return;
    j->hu = (hook_user){.in = hooks, .mu = &rs->hook_mu};
    j->hooks = (kc__fit_hooks){.user = &j->hu, .fit_opts = h_fit_opts, .begin = h_begin,
                               .train_begun = h_train_begun, .after_step = h_after_step,
                               .after_epoch = h_after_epoch, .end = h_end};
}

kc_status kc__fit_replicas(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, const kc__fit_hooks *hooks,
                           kc_history **out) {
    if (out) *out = NULL;
    if (opts && kc__dist_on(opts->collective))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: the model trains on %d devices in this process "
                        "(kc_model_set_gpus, --gpus) and is also rank %d of %d ranks (mpirun, srun): the two together "
                        "are not supported; give each rank one GPU instead (mpirun -np N kerac train --device cuda: "
                        "each rank takes cuda:<its local rank>), or run one process with --gpus",
                        m->n_replicas, opts->collective->rank, opts->collective->size);
    if (!m->compiled) return kc__fit_one(m, train, opts, hooks, out); /* its error */
    KC_TRY(kc__replicas_open(m));
    kc__replicas *rs = m->replicas;
    for (int i = 1; i < rs->n; i++) KC_TRY(sync_optimizer(m, rs->m[i]));
    rs->sh.failed = -1;
    rs->sh.count = 0;
    job *jobs = kc__calloc((size_t)rs->n, sizeof *jobs, "the replicas' threads");
    pthread_t *th = kc__calloc((size_t)rs->n, sizeof *th, "the replicas' threads");
    bool *up = kc__calloc((size_t)rs->n, sizeof *up, "the replicas' threads");
    kc_status s = jobs && th && up ? KC_STATUS_OK : KC_STATUS_OUT_OF_MEMORY;
    for (int r = 0; r < rs->n && s == KC_STATUS_OK; r++) job_init(&jobs[r], rs, r, train, opts, hooks);
    for (int r = 1; r < rs->n && s == KC_STATUS_OK; r++) {
        up[r] = pthread_create(&th[r], NULL, job_run, &jobs[r]) == 0;
        if (!up[r]) {
            s = kc__fail(KC_STATUS_INTERNAL, "cannot start the thread of replica %d (%s)", r, m->replica_dev[r]);
            tc_abort(&rs->sh, 0, kc_last_error());
        }
    }
    if (s == KC_STATUS_OK) job_run(&jobs[0]); /* replica 0, the model, in this thread */
    for (int r = 1; r < rs->n && up; r++)
        if (up[r]) pthread_join(th[r], NULL);
    if (s == KC_STATUS_OK) {
        int f = rs->sh.failed;
        if (f < 0 && out) *out = jobs[0].h;
        else kc_history_destroy(jobs[0].h);
        if (f > 0) s = kc__fail(jobs[f].s, "replica %d of %d (%s): %s", f, rs->n, m->replica_dev[f], jobs[f].err);
        else if (f == 0) s = kc__fail(jobs[0].s, "%s", jobs[0].err);
    }
    free(jobs);
    free(th);
    free(up);
    return s;
}
