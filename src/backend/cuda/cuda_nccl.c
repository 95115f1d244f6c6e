/* cuda_nccl.c — the CUDA backend's device collectives (kc_backend.coll_*) for
 * data-parallel training: NCCL's all-reduce on the gradient buckets, straight from and
 * into device memory. NCCL is not linked: libnccl.so.2 is dlopen'ed at the first call
 * (as libkerac dlopens the other NVIDIA libraries it only reports on), and the handful of
 * its functions used are declared here from NCCL's documented C API (ncclUniqueId is 128
 * opaque bytes; ncclFloat32 = 7, ncclSum = 0, ncclSuccess = 0, ncclInProgress = 7).
 * The all-reduces run on a stream of their own: each waits (an event) for the compute
 * stream's work enqueued before it, so the backward pass of the layers below a bucket
 * goes on while NCCL sums it; coll_join makes the compute stream wait for them all. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

typedef struct {
    char internal[128];
} kc_nccl_id;
typedef struct kc_nccl_comm_s *kc_nccl_comm;
enum { KC_NCCL_SUCCESS = 0, KC_NCCL_IN_PROGRESS = 7, KC_NCCL_FLOAT32 = 7, KC_NCCL_SUM = 0 };

typedef struct kc_cu_nccl {
    void *lib;
    int (*get_version)(int *);
    int (*get_unique_id)(kc_nccl_id *);
    int (*comm_init_rank)(kc_nccl_comm *, int, kc_nccl_id, int);
    int (*all_reduce)(const void *, void *, size_t, int, int, kc_nccl_comm, cudaStream_t);
    int (*comm_destroy)(kc_nccl_comm);
    int (*async_error)(kc_nccl_comm, int *);
    const char *(*error_string)(int);
    kc_nccl_comm comm;
    cudaStream_t stream;
    cudaEvent_t ready, done;
    int nranks, rank, version;
    bool started; /* an all-reduce since the last join */
    char desc[96];
} kc_cu_nccl;

static kc_status nccl_fail(kc_backend *be, kc_cu_nccl *n, const char *call, int r) {
    return kc__cu_fail(be, KC_STATUS_DEVICE, "%s failed: %s (NCCL error %d); check the other ranks' messages, and "
                       "NCCL_DEBUG=INFO for NCCL's own account", call, n->error_string ? n->error_string(r) : "?", r);
}

/* Load libnccl.so.2 and its functions (once). */
static kc_status nccl_load(kc_backend *be, kc_cu_nccl **out) {
    kc_cu_ctx *c = kc__cu(be);
    if (c->nccl) return *out = c->nccl, KC_STATUS_OK;
    kc_cu_nccl *n = calloc(1, sizeof *n);
    if (!n) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory for NCCL's state");
    n->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *why = dlerror();
        free(n);
        return kc__cu_fail(be, KC_STATUS_DEVICE, "NCCL is needed for data-parallel training on GPUs, but libnccl.so.2 "
                           "cannot be loaded (%s); install NCCL 2 for CUDA %d (e.g. `pip install nvidia-nccl-cu%d` "
                           "or NVIDIA's libnccl2 package) and check it with `kerac doctor`", why ? why : "not found",
                           CUDART_VERSION / 1000, CUDART_VERSION / 1000);
    }
    *(void **)&n->get_version = dlsym(n->lib, "ncclGetVersion");
    *(void **)&n->get_unique_id = dlsym(n->lib, "ncclGetUniqueId");
    *(void **)&n->comm_init_rank = dlsym(n->lib, "ncclCommInitRank");
    *(void **)&n->all_reduce = dlsym(n->lib, "ncclAllReduce");
    *(void **)&n->comm_destroy = dlsym(n->lib, "ncclCommDestroy");
    *(void **)&n->async_error = dlsym(n->lib, "ncclCommGetAsyncError");
    *(void **)&n->error_string = dlsym(n->lib, "ncclGetErrorString");
    if (!n->get_version || !n->get_unique_id || !n->comm_init_rank || !n->all_reduce || !n->comm_destroy) {
        dlclose(n->lib);
        free(n);
        return kc__cu_fail(be, KC_STATUS_DEVICE, "libnccl.so.2 lacks ncclGetUniqueId / ncclCommInitRank / "
                           "ncclAllReduce: it is not NCCL 2; install NCCL 2 for CUDA %d", CUDART_VERSION / 1000);
    }
    n->get_version(&n->version);
    c->nccl = n;
    *out = n;
    return KC_STATUS_OK;
}

kc_status kc__cu_coll_unique_id(kc_backend *be, void *id, size_t bytes) {
    kc_cu_nccl *n = NULL;
    if (!id) return nccl_load(be, &n); /* only whether NCCL is there */
    if (bytes < sizeof(kc_nccl_id))
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "coll_unique_id: %zu bytes, NCCL's id needs %zu", bytes,
                           sizeof(kc_nccl_id));
    KC_TRY(kc__cu_enter(be));
    KC_TRY(nccl_load(be, &n));
    int r = n->get_unique_id((kc_nccl_id *)id);
    return r == KC_NCCL_SUCCESS ? KC_STATUS_OK : nccl_fail(be, n, "ncclGetUniqueId", r);
}

kc_status kc__cu_coll_init(kc_backend *be, const void *id, size_t bytes, int nranks, int rank) {
    kc_cu_nccl *n = NULL;
    if (bytes < sizeof(kc_nccl_id) || nranks < 1 || rank < 0 || rank >= nranks)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "coll_init: rank %d of %d, %zu id bytes", rank, nranks,
                           bytes);
    KC_TRY(kc__cu_enter(be));
    KC_TRY(nccl_load(be, &n));
    if (n->comm) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "coll_init: this backend already has a communicator");
    if (!n->stream) KC_CU_TRY_CUDA(be, "cudaStreamCreateWithFlags (NCCL)",
                                   cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    if (!n->ready) KC_CU_TRY_CUDA(be, "cudaEventCreate", cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    if (!n->done) KC_CU_TRY_CUDA(be, "cudaEventCreate", cudaEventCreateWithFlags(&n->done, cudaEventDisableTiming));
    kc_nccl_id uid;
    memcpy(&uid, id, sizeof uid);
    int r = n->comm_init_rank(&n->comm, nranks, uid, rank);
    if (r != KC_NCCL_SUCCESS) {
        n->comm = NULL;
        return nccl_fail(be, n, "ncclCommInitRank", r);
    }
    n->nranks = nranks;
    n->rank = rank;
    int v = n->version;
    snprintf(n->desc, sizeof n->desc, "NCCL %d.%d.%d, rank %d of %d", v >= 20900 ? v / 10000 : v / 1000,
             v >= 20900 ? (v % 10000) / 100 : (v % 1000) / 100, v % 100, rank, nranks);
    return KC_STATUS_OK;
}

kc_status kc__cu_coll_allreduce_sum(kc_backend *be, float *buf, int64_t count) {
    kc_cu_ctx *c = kc__cu(be);
    kc_cu_nccl *n = c->nccl;
    if (!n || !n->comm) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "coll_allreduce_sum before coll_init");
    if (count <= 0) return KC_STATUS_OK;
    KC_TRY(kc__cu_enter(be));
    KC_CU_TRY_CUDA(be, "cudaEventRecord (NCCL)", cudaEventRecord(n->ready, c->stream));
    KC_CU_TRY_CUDA(be, "cudaStreamWaitEvent (NCCL)", cudaStreamWaitEvent(n->stream, n->ready, 0));
    int r = n->all_reduce(buf, buf, (size_t)count, KC_NCCL_FLOAT32, KC_NCCL_SUM, n->comm, n->stream);
    if (r != KC_NCCL_SUCCESS && r != KC_NCCL_IN_PROGRESS) return nccl_fail(be, n, "ncclAllReduce", r);
    n->started = true;
    return KC_STATUS_OK;
}

kc_status kc__cu_coll_join(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    kc_cu_nccl *n = c->nccl;
    if (!n || !n->comm || !n->started) return KC_STATUS_OK;
    KC_TRY(kc__cu_enter(be));
    KC_CU_TRY_CUDA(be, "cudaEventRecord (NCCL)", cudaEventRecord(n->done, n->stream));
    KC_CU_TRY_CUDA(be, "cudaStreamWaitEvent (NCCL)", cudaStreamWaitEvent(c->stream, n->done, 0));
    n->started = false;
    int async = KC_NCCL_SUCCESS;
    if (n->async_error && n->async_error(n->comm, &async) == KC_NCCL_SUCCESS && async != KC_NCCL_SUCCESS &&
        async != KC_NCCL_IN_PROGRESS)
        return nccl_fail(be, n, "ncclAllReduce (reported by ncclCommGetAsyncError)", async);
    return KC_STATUS_OK;
}

const char *kc__cu_coll_describe(kc_backend *be) {
    kc_cu_nccl *n = kc__cu(be)->nccl;
    return n && n->comm ? n->desc : "";
}

void kc__cu_nccl_shutdown(kc_cu_ctx *c) {
    kc_cu_nccl *n = c->nccl;
    if (!n) return;
    if (n->comm) {
        if (n->stream) cudaStreamSynchronize(n->stream);
        n->comm_destroy(n->comm);
    }
    if (n->ready) cudaEventDestroy(n->ready);
    if (n->done) cudaEventDestroy(n->done);
    if (n->stream) cudaStreamDestroy(n->stream);
    /* libnccl stays loaded: its threads may outlive the communicator */
    free(n);
    c->nccl = NULL;
}
