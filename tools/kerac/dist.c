/* dist.c — `kerac train` under mpirun / srun: data-parallel training over Open MPI.
 * MPI lives here only (linked into the command, never into libkerac): the launch is
 * detected from the environment, MPI is initialised with MPI_ERRORS_RETURN, and the
 * collective table libkerac's fit calls (kc_collective) is filled with MPI_Allreduce,
 * MPI_Bcast and MPI_Allgather on MPI_COMM_WORLD; MPI error codes come back as kerac
 * statuses with MPI's message. Built without MPI (KERAC_HAVE_MPI unset), a launch with
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
    if (!cli_is(a, "--drop-remainder")) return -1;
    int rc = cli_flag(a);
    if (!rc) d->drop_remainder = true;
    return rc;
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

/* buf (n elements of type t, size bytes each) summed over the ranks, in place */
static kc_status mpi_sum(cli_dist *d, void *buf, int64_t n, MPI_Datatype t, size_t size) {
    for (int64_t i = 0; i < n; i += CHUNK) {
        int c = (int)(n - i < CHUNK ? n - i : CHUNK);
        void *p = (char *)buf + (size_t)i * size;
        kc_status s = mpi_status(d, MPI_Allreduce(MPI_IN_PLACE, p, c, t, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
        if (s) return s;
    }
    return KC_STATUS_OK;
}

static kc_status mpi_sum_f32(void *ctx, float *buf, int64_t n) { return mpi_sum(ctx, buf, n, MPI_FLOAT, 4); }
static kc_status mpi_sum_f64(void *ctx, double *buf, int64_t n) { return mpi_sum(ctx, buf, n, MPI_DOUBLE, 8); }

static kc_status mpi_bcast(void *ctx, void *buf, size_t bytes, int root) {
    for (size_t i = 0; i < bytes; i += (size_t)CHUNK) {
        int c = (int)(bytes - i < (size_t)CHUNK ? bytes - i : (size_t)CHUNK);
        kc_status s = mpi_status(ctx, MPI_Bcast((char *)buf + i, c, MPI_BYTE, root, MPI_COMM_WORLD), "MPI_Bcast");
        if (s) return s;
    }
    return KC_STATUS_OK;
}

static kc_status mpi_allgather(void *ctx, const void *send, void *recv, size_t bytes) {
    if (bytes > (size_t)INT_MAX) return mpi_status(ctx, MPI_ERR_COUNT, "MPI_Allgather");
    return mpi_status(ctx, MPI_Allgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, MPI_COMM_WORLD),
                      "MPI_Allgather");
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
                              .allgather = mpi_allgather, .error = mpi_error};
    d->rank = rank;
    d->size = size;
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

const kc_collective *cli_dist_collective(const cli_dist *d) { return d->size > 1 ? &d->coll : NULL; }

int cli_dist_end(cli_dist *d, int rc) {
#ifdef KERAC_HAVE_MPI
    if (!d->mpi) return rc;
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
