/* dist.c — `kerac train` under mpirun / srun: data-parallel training over Open MPI.
 * MPI lives here only (linked into the command, never into libkerac): the launch is
 * detected from the environment, MPI is initialised with MPI_ERRORS_RETURN, and the
 * collective table libkerac's fit calls (kc_collective) is filled with MPI_Allreduce,
 * MPI_Bcast and MPI_Allgather on MPI_COMM_WORLD; MPI error codes come back as kerac
 * statuses with MPI's message. The gradient buckets use MPI_Iallreduce (MPI_Iallgather and
 * a sum in rank order with --deterministic), progressed by MPI_Test from the backward
 * pass; every blocking call runs under the watchdog (dist_watch.c). Built without MPI (KERAC_HAVE_MPI unset), a launch with
 * several ranks is refused instead of training N independent copies. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#ifdef KERAC_HAVE_MPI
#include <mpi.h>
#endif

/* The number of ranks the launcher says this job has (1 when not launched by one). */
static int launched_size(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        long n;
        if (v && !cli_parse_long(v, 1, INT_MAX, &n)) {
            if (i == 3 && !getenv("SLURM_PROCID")) continue; /* inside an allocation, not a task of srun */
            return (int)n;
        }
    }
    return getenv("PMIX_RANK") ? 2 : 1; /* PMIx without a size: let MPI say */
}

int cli_dist_option(cli_args *a, cli_dist *d) {
    bool *flag = cli_is(a, "--drop-remainder") ? &d->drop_remainder
                 : cli_is(a, "--sync-batchnorm") ? &d->sync_batchnorm : NULL;
    if (flag) {
        int rc = cli_flag(a);
        if (!rc) *flag = true;
        return rc;
    }
    if (cli_is(a, "--gpus")) return cli_value(a, &d->gpus);
    if (cli_is(a, "--bucket-size")) return cli_double_value(a, 0, 1 << 20, true, &d->bucket_mb);
    if (cli_is(a, "--collective-timeout")) return cli_double_value(a, 0, 1e7, true, &d->timeout);
    return -1;
}

#ifdef KERAC_HAVE_MPI
static const char *mpi_error(void *ctx) { return ((cli_dist *)ctx)->err; }

static kc_status mpi_status(cli_dist *d, int code, const char *call) {
    if (code == MPI_SUCCESS) return KC_STATUS_OK;
    char msg[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(code, msg, &len);
    snprintf(d->err, sizeof d->err, "%s: %s (MPI error %d)", call, msg, code);
    return KC_STATUS_IO;
}

/* MPI counts are ints: large buffers go in pieces */
#define CHUNK ((int64_t)1 << 30)

/* One blocking MPI call under the watchdog. */
#define WATCHED(d, call, expr) (cli_watch_begin((d), (call)), watched_end((d), (expr)))
static int watched_end(cli_dist *d, int code) {
    cli_watch_end(d);
    return code;
}

/* buf (n elements of type t, size bytes each) summed over the ranks, in place */
static kc_status mpi_sum(cli_dist *d, void *buf, int64_t n, MPI_Datatype t, size_t size) {
    for (int64_t i = 0; i < n; i += CHUNK) {
        int c = (int)(n - i < CHUNK ? n - i : CHUNK);
        void *p = (char *)buf + (size_t)i * size;
        kc_status s = mpi_status(d, WATCHED(d, "MPI_Allreduce", MPI_Allreduce(MPI_IN_PLACE, p, c, t, MPI_SUM,
                                                                                MPI_COMM_WORLD)), "MPI_Allreduce");
        if (s) return s;
    }
    return KC_STATUS_OK;
}

/* --deterministic: every rank's n floats gathered (scratch: size x n), then added in rank
 * order, so that the result does not depend on MPI's reduction algorithm or the ranks'
 * placement. */
static void sum_in_rank_order(const cli_dist *d, float *buf, const float *all, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float v = all[i];
        for (int r = 1; r < d->size; r++) v += all[(int64_t)r * n + i];
        buf[i] = v;
    }
}

static kc_status det_sum_f32(cli_dist *d, float *buf, int64_t n) {
    if (n * d->size > CHUNK) return mpi_status(d, MPI_ERR_COUNT, "MPI_Allgather (--deterministic)");
    float *all = malloc((size_t)(n * d->size) * sizeof(float));
    if (!all) return mpi_status(d, MPI_ERR_NO_MEM, "MPI_Allgather (--deterministic)");
    kc_status s = mpi_status(d, WATCHED(d, "MPI_Allgather", MPI_Allgather(buf, (int)n, MPI_FLOAT, all, (int)n,
                                                                           MPI_FLOAT, MPI_COMM_WORLD)),
                             "MPI_Allgather");
    if (!s) sum_in_rank_order(d, buf, all, n);
    free(all);
    return s;
}

static kc_status mpi_sum_f32(void *ctx, float *buf, int64_t n) {
    cli_dist *d = ctx;
    return d->deterministic ? det_sum_f32(d, buf, n) : mpi_sum(d, buf, n, MPI_FLOAT, 4);
}
static kc_status mpi_sum_f64(void *ctx, double *buf, int64_t n) { return mpi_sum(ctx, buf, n, MPI_DOUBLE, 8); }

static kc_status mpi_bcast(void *ctx, void *buf, size_t bytes, int root) {
    for (size_t i = 0; i < bytes; i += (size_t)CHUNK) {
        int c = (int)(bytes - i < (size_t)CHUNK ? bytes - i : (size_t)CHUNK);
        kc_status s = mpi_status(ctx, WATCHED((cli_dist *)ctx, "MPI_Bcast", MPI_Bcast((char *)buf + i, c, MPI_BYTE,
                                                                                         root, MPI_COMM_WORLD)),
                                 "MPI_Bcast");
        if (s) return s;
    }
    return KC_STATUS_OK;
}

static kc_status mpi_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    if (bytes > (size_t)INT_MAX) return mpi_status(ctx, MPI_ERR_COUNT, "MPI_Allgather");
    return mpi_status(ctx, WATCHED((cli_dist *)ctx, "MPI_Allgather",
                                   MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE,
                                                 MPI_COMM_WORLD)), "MPI_Allgather");
}

static void mpi_doing(void *ctx, const char *what) { cli_watch_doing(ctx, what); }

/* ---- non-blocking sums (the gradient buckets, overlapped with the backward pass):
 * slot k of the request table holds one until test or wait saw it finish. */
static kc_status req_slot(cli_dist *d, int *out) {
    for (int k = 0; k < d->n_reqs; k++)
        if (!d->req_buf[k]) return *out = k, KC_STATUS_OK;
    if (d->n_reqs == d->cap_reqs) {
        int cap = d->cap_reqs ? 2 * d->cap_reqs : 16;
        MPI_Request *r = realloc(d->reqs, (size_t)cap * sizeof *r);
        if (r) d->reqs = r;
        float **b = realloc(d->req_buf, (size_t)cap * sizeof *b);
        if (b) d->req_buf = b;
        float **sc = realloc(d->req_scratch, (size_t)cap * sizeof *sc);
        if (sc) d->req_scratch = sc;
        int64_t *n = realloc(d->req_n, (size_t)cap * sizeof *n);
        if (n) d->req_n = n;
        if (!r || !b || !sc || !n) return mpi_status(d, MPI_ERR_NO_MEM, "the requests of MPI_Iallreduce");
        d->cap_reqs = cap;
    }
    d->req_buf[d->n_reqs] = NULL;
    *out = d->n_reqs++;
    return KC_STATUS_OK;
}

static kc_status mpi_isum_f32(void *ctx, float *buf, int64_t n, int *req) {
    cli_dist *d = ctx;
    int k = 0;
    if (n > INT_MAX || (d->deterministic && n * d->size > INT_MAX))
        return mpi_status(d, MPI_ERR_COUNT, "MPI_Iallreduce (make --bucket-size smaller)");
    KC_TRY(req_slot(d, &k));
    MPI_Request *r = (MPI_Request *)d->reqs + k;
    d->req_scratch[k] = NULL;
    int code;
    if (d->deterministic) { /* gathered, added in rank order when it finishes */
        if (!(d->req_scratch[k] = malloc((size_t)(n * d->size) * sizeof(float))))
            return mpi_status(d, MPI_ERR_NO_MEM, "MPI_Iallgather (--deterministic)");
        code = MPI_Iallgather(buf, (int)n, MPI_FLOAT, d->req_scratch[k], (int)n, MPI_FLOAT, MPI_COMM_WORLD, r);
    } else code = MPI_Iallreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, r);
    if (code != MPI_SUCCESS) {
        free(d->req_scratch[k]);
        return mpi_status(d, code, d->deterministic ? "MPI_Iallgather" : "MPI_Iallreduce");
    }
    d->req_buf[k] = buf;
    d->req_n[k] = n;
    *req = k;
    return KC_STATUS_OK;
}

static void req_done(cli_dist *d, int k) {
    if (d->req_scratch[k]) sum_in_rank_order(d, d->req_buf[k], d->req_scratch[k], d->req_n[k]);
    free(d->req_scratch[k]);
    d->req_scratch[k] = NULL;
    d->req_buf[k] = NULL;
}

static kc_status mpi_test(void *ctx, int req, int *done) {
    cli_dist *d = ctx;
    if (req < 0 || req >= d->n_reqs || !d->req_buf[req]) return mpi_status(d, MPI_ERR_REQUEST, "MPI_Test");
    KC_TRY(mpi_status(d, MPI_Test((MPI_Request *)d->reqs + req, done, MPI_STATUS_IGNORE), "MPI_Test"));
    if (*done) req_done(d, req);
    return KC_STATUS_OK;
}

static kc_status mpi_wait(void *ctx, int req) {
    cli_dist *d = ctx;
    if (req < 0 || req >= d->n_reqs || !d->req_buf[req]) return mpi_status(d, MPI_ERR_REQUEST, "MPI_Wait");
    KC_TRY(mpi_status(d, WATCHED(d, "MPI_Wait", MPI_Wait((MPI_Request *)d->reqs + req, MPI_STATUS_IGNORE)),
                      "MPI_Wait (a bucket of the gradients)"));
    req_done(d, req);
    return KC_STATUS_OK;
}

/* Every rank's process id and host, for the watchdog's message. */
static int gather_peers(cli_dist *d) {
    cli_dist_peer me = {.pid = (long)getpid()};
    gethostname(me.host, sizeof me.host - 1);
    if (!(d->peers = calloc((size_t)d->size, sizeof *d->peers)))
        return cli_error(CLI_EXIT_RUNTIME, "out of memory for the ranks' table");
    if (mpi_allgather(d, &me, d->peers, sizeof me))
        return cli_error(CLI_EXIT_RUNTIME, "rank %d: exchanging the ranks' process ids failed: %s", d->rank, d->err);
    return 0;
}
#endif

int cli_dist_start(cli_dist *d) {
    int size = launched_size();
    if (size <= 1) return 0;
#ifndef KERAC_HAVE_MPI
    return cli_error(CLI_EXIT_USAGE, "kerac runs under a launcher with %d ranks, but this kerac was built without "
                     "MPI; install libopenmpi-dev and rebuild, or run one process without mpirun/srun", size);
#else
    int provided = 0, rank = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
        return cli_error(CLI_EXIT_RUNTIME, "MPI_Init_thread failed; check the MPI installation (mpirun --version)");
    d->mpi = true;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    d->coll = (kc_collective){.rank = rank, .size = size, .ctx = d, .allreduce_sum_f32 = mpi_sum_f32,
                              .allreduce_sum_f64 = mpi_sum_f64, .broadcast = mpi_bcast,
                              .allgather = mpi_allgather, .error = mpi_error, .iallreduce_sum_f32 = mpi_isum_f32,
                              .test = mpi_test, .wait = mpi_wait, .doing = mpi_doing};
    d->rank = rank;
    d->size = size;
    if (d->timeout == 0) d->timeout = 300;
    int rc = cli_watch_start(d);
    if (!rc) rc = gather_peers(d);
    if (rc) return rc;
    if (rank != 0) { /* only rank 0 prints progress and results; errors still go to stderr */
        fflush(stdout);
        if (!freopen("/dev/null", "w", stdout))
            return cli_error(CLI_EXIT_RUNTIME, "rank %d: cannot silence its output", rank);
    }
    return 0;
#endif
}

/* Threads per rank when --threads is not given: the cores shared by the ranks on this machine. */
int cli_dist_threads(const cli_dist *d) {
    long local = 1, cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *v = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!v) v = getenv("SLURM_NTASKS_PER_NODE");
    if (!d->size || !v || cli_parse_long(v, 1, INT_MAX, &local)) local = 1;
    return cores > local ? (int)(cores / local) : 1;
}

/* This rank's index among the ranks on its machine (-1: not said by the launcher). */
static int local_rank(void) {
    const char *vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "PMI_LOCAL_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        long v;
        const char *e = getenv(vars[i]);
        if (e && !cli_parse_long(e, 0, INT_MAX, &v)) return (int)v;
    }
    return -1;
}

const char *cli_dist_device(const cli_dist *d, const char *device, char *buf, size_t n) {
    int local = local_rank();
    if (d->size <= 1 || local < 0 || !device || (strcmp(device, "cuda") && strcmp(device, "gpu") && strcmp(device, "auto")))
        return device; /* one process, or a device given by number: as asked */
    kc_gpu_reading g[64];
    int count = 0;
    if (kc_gpu_readings(g, 64, &count) != KC_STATUS_OK || count <= 0)
        return device; /* no GPU that NVML sees: auto goes to the CPU, cuda fails with the reason */
    snprintf(buf, n, "cuda:%d", local % count);
    return buf;
}

int cli_dist_gpus(const cli_dist *d, const char *device, int *ids, int max, int *n, char *buf, size_t bn) {
    *n = 0;
    if (d->size > 1)
        return cli_usage_error("train", "'--gpus' trains on several GPUs in one process, and this is rank %d of %d "
                               "(mpirun, srun): the two together are not supported; under mpirun give each rank "
                               "one GPU with --device cuda (each takes cuda:<its local rank>), or run one process "
                               "with --gpus", d->rank, d->size);
    if (device && strcmp(device, "cuda") && strcmp(device, "gpu") && strcmp(device, "auto"))
        return cli_usage_error("train", "'--gpus' trains on GPUs but the device is '%s'; leave --device out (or "
                               "give cuda) with --gpus", device);
    if (strcmp(d->gpus, "all") != 0) {
        char list[1024];
        const char *items[64];
        int k = cli_split_list(d->gpus, list, sizeof list, items, max < 64 ? max : 64);
        for (int i = 0; i < k; i++) {
            long v;
            if (cli_parse_long(items[i], 0, 1 << 20, &v))
                return cli_usage_error("train", "'--gpus %s': '%s' is not a GPU index (0, 1, ...)", d->gpus, items[i]);
            ids[i] = (int)v;
        }
        if (k <= 0)
            return cli_usage_error("train", "'--gpus' needs GPU indices separated by commas (0,1,...) or all, "
                                   "got '%s'", d->gpus);
        *n = k;
    }
    snprintf(buf, bn, "cuda:%d", *n ? ids[0] : 0);
    return 0;
}

const kc_collective *cli_dist_collective(const cli_dist *d) { return d->size > 1 ? &d->coll : NULL; }

int cli_dist_end(cli_dist *d, int rc) {
#ifdef KERAC_HAVE_MPI
    if (!d->mpi) return rc;
    cli_watch_stop(d);
    free(d->peers);
    free(d->reqs);
    free(d->req_buf);
    free(d->req_scratch);
    free(d->req_n);
    fflush(stdout);
    fflush(stderr);
    /* a rank that fails alone would leave the others waiting in a collective: stop them all */
    if (rc != CLI_EXIT_OK) MPI_Abort(MPI_COMM_WORLD, rc);
    MPI_Finalize();
#else
    (void)d;
#endif
    return rc;
}
