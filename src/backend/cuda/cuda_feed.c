/* cuda_feed.c — the input feed of the CUDA backend (kerac_backend.h, "the input feed"):
 * page-locked host memory, and uploads on a copy stream of their own, ordered against the
 * compute stream with two events per staging slot:
 *   ready[slot]  recorded on the copy stream after the slot's uploads; the compute stream
 *                waits for it at feed_acquire, the host at feed_wait
 *   free[slot]   recorded on the compute stream at feed_release; the copy stream waits for
 *                it before the slot's next upload
 * so that the upload of batch k + 1 runs while step k computes and neither stream ever
 * waits for the host. The first upload into a destination the slot has not seen (a new
 * feed's buffers, which the allocator may have recycled from memory that queued compute
 * work still reads) also waits for everything enqueued on the compute stream so far; the
 * allocator forgets a destination when its block is freed (kc__cu_free), so a block that
 * comes back as a destination after serving compute work waits again (cuda_rules.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

kc_status kc__cu_feed_init(kc_backend *be, char *err, size_t err_n) {
    kc_cu_ctx *c = kc__cu(be);
    cudaError_t e = cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->feed_order, cudaEventDisableTiming);
    for (int i = 0; i < KC_FEED_SLOTS && e == cudaSuccess; i++) {
        e = cudaEventCreateWithFlags(&c->feed_ready[i], cudaEventDisableTiming);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&c->feed_free[i], cudaEventDisableTiming);
    }
    if (e != cudaSuccess) {
        cudaGetLastError();
        snprintf(err, err_n, "%s: cannot create the input feed's copy stream and events: %s (%s)", be->device,
                 cudaGetErrorString(e), cudaGetErrorName(e));
        return e == cudaErrorMemoryAllocation ? KC_STATUS_OUT_OF_MEMORY : KC_STATUS_DEVICE;
    }
    return KC_STATUS_OK;
}

void kc__cu_feed_shutdown(kc_cu_ctx *c) {
    if (c->copy_stream) cudaStreamSynchronize(c->copy_stream);
    for (int i = 0; i < c->n_host_blocks; i++) {
        if (c->host_blocks[i].pinned) cudaFreeHost(c->host_blocks[i].ptr);
        else free(c->host_blocks[i].ptr);
    }
    free(c->host_blocks);
    c->host_blocks = NULL;
    c->n_host_blocks = c->cap_host_blocks = 0;
    for (int i = 0; i < KC_FEED_SLOTS; i++) {
        if (c->feed_ready[i]) cudaEventDestroy(c->feed_ready[i]);
        if (c->feed_free[i]) cudaEventDestroy(c->feed_free[i]);
    }
    if (c->feed_order) cudaEventDestroy(c->feed_order);
    if (c->copy_stream) cudaStreamDestroy(c->copy_stream);
    c->copy_stream = NULL;
    cudaGetLastError();
}

/* ---- host memory: page-locked where the driver gives it, else plain (slower, not wrong) */

kc_status kc__cu_host_alloc(kc_backend *be, size_t bytes, void **out) {
    if (!out) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda host_alloc: the output pointer is NULL");
    *out = NULL;
    KC_TRY(kc__cu_enter(be));
    kc_cu_ctx *c = kc__cu(be);
    if (c->n_host_blocks == c->cap_host_blocks) {
        int cap = c->cap_host_blocks ? 2 * c->cap_host_blocks : 8;
        kc_cu_host_block *nb = realloc(c->host_blocks, (size_t)cap * sizeof *nb);
        if (!nb) return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "cuda host_alloc: out of host memory");
        c->host_blocks = nb;
        c->cap_host_blocks = cap;
    }
    void *p = NULL;
    bool pinned = true;
    cudaError_t e = cudaHostAlloc(&p, bytes ? bytes : 1, cudaHostAllocDefault);
    if (e != cudaSuccess) {
        cudaGetLastError();
        pinned = false;
        p = NULL;
        if (!c->warned_pageable) {
            char b[32];
            kc__cu_log(be, KC_LOG_WARNING,
                       "%s: no page-locked host memory for the input feed (cudaHostAlloc of %s: %s); batches are "
                       "copied from pageable memory, more slowly (raise the locked-memory limit, ulimit -l)",
                       be->device, kc__cu_bytes(bytes, b, sizeof b), cudaGetErrorString(e));
            c->warned_pageable = true;
        }
        if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0) p = NULL;
    }
    if (!p) {
        char b[32];
        return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY,
                           "cuda host_alloc: out of host memory for %s of batch staging; lower the batch size",
                           kc__cu_bytes(bytes, b, sizeof b));
    }
    c->host_blocks[c->n_host_blocks++] = (kc_cu_host_block){p, pinned};
    *out = p;
    return KC_STATUS_OK;
}

void kc__cu_host_free(kc_backend *be, void *p) {
    if (!p) return;
    kc_cu_ctx *c = kc__cu(be);
    for (int i = 0; i < c->n_host_blocks; i++) {
        if (c->host_blocks[i].ptr != p) continue;
        if (c->host_blocks[i].pinned) cudaFreeHost(p);
        else free(p);
        c->host_blocks[i] = c->host_blocks[--c->n_host_blocks];
        return;
    }
    kc__cu_log(be, KC_LOG_WARNING, "cuda host_free: %p was not given by host_alloc; not freed", p);
}

/* ---- the slots */

static kc_status check_slot(kc_backend *be, const char *what, int slot) {
    if (slot < 0 || slot >= KC_FEED_SLOTS)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda %s: feed slot %d is not in [0, %d)", what, slot,
                           KC_FEED_SLOTS);
    return kc__cu_enter(be);
}

kc_status kc__cu_feed_upload(kc_backend *be, int slot, void *dst, const void *src, size_t bytes) {
    KC_TRY(check_slot(be, "feed_upload", slot));
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda feed_upload: NULL %s pointer for %zu bytes",
                           dst ? "source" : "destination", bytes);
    kc_cu_ctx *c = kc__cu(be);
    if (kc__cu_feed_mark(&c->feed_marks, slot, dst)) { /* a new destination: after all compute work so far */
        cudaError_t e = cudaEventRecord(c->feed_order, c->stream);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(c->copy_stream, c->feed_order, 0);
        if (e != cudaSuccess) {
            kc__cu_feed_forget(&c->feed_marks, dst, 1); /* not ordered: the next upload tries again */
            return kc__cu_cuda_fail(be, "feed_upload (order)", e);
        }
    }
    if (c->feed_free_set[slot]) /* the work that read this slot's last batch comes first */
        KC_CU_TRY_CUDA(be, "feed_upload (wait)", cudaStreamWaitEvent(c->copy_stream, c->feed_free[slot], 0));
    KC_CU_TRY_CUDA(be, "feed_upload", cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->copy_stream));
    KC_CU_TRY_CUDA(be, "feed_upload (record)", cudaEventRecord(c->feed_ready[slot], c->copy_stream));
    c->feed_ready_set[slot] = true;
    if (c->debug_sync) KC_CU_TRY_CUDA(be, "feed_upload", cudaStreamSynchronize(c->copy_stream));
    return KC_STATUS_OK;
}

kc_status kc__cu_feed_acquire(kc_backend *be, int slot) {
    KC_TRY(check_slot(be, "feed_acquire", slot));
    kc_cu_ctx *c = kc__cu(be);
    if (c->feed_ready_set[slot])
        KC_CU_TRY_CUDA(be, "feed_acquire", cudaStreamWaitEvent(c->stream, c->feed_ready[slot], 0));
    return KC_STATUS_OK;
}

kc_status kc__cu_feed_release(kc_backend *be, int slot) {
    KC_TRY(check_slot(be, "feed_release", slot));
    kc_cu_ctx *c = kc__cu(be);
    KC_CU_TRY_CUDA(be, "feed_release", cudaEventRecord(c->feed_free[slot], c->stream));
    c->feed_free_set[slot] = true;
    return KC_STATUS_OK;
}

kc_status kc__cu_feed_wait(kc_backend *be, int slot) {
    KC_TRY(check_slot(be, "feed_wait", slot));
    kc_cu_ctx *c = kc__cu(be);
    if (c->feed_ready_set[slot]) KC_CU_TRY_CUDA(be, "feed_wait", cudaEventSynchronize(c->feed_ready[slot]));
    return KC_STATUS_OK;
}
