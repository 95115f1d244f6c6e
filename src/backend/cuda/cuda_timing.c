/* cuda_timing.c — device timing for profiles and traces (kerac_backend.h, "device timing"):
 * CUDA events recorded on the compute and copy streams and read back as seconds after a
 * reference event, so that a layer's time is what the GPU spent on it, not the host's
 * launch time. Events are created as marks first need them (at most KC_CU_TIMING_MARKS,
 * kept until the backend is destroyed) and reused after each timing_begin. */
#include "cuda_internal.h"

static cudaStream_t stream_of(kc_cu_ctx *c, int stream) {
    return stream == KC_STREAM_COMPUTE ? c->stream : stream == KC_STREAM_COPY ? c->copy_stream : NULL;
}

kc_status kc__cu_timing_begin(kc_backend *be) {
    kc_cu_ctx *c = kc__cu(be);
    if (!c->tm_ref) KC_CU_TRY_CUDA(be, "timing_begin: creating an event", cudaEventCreate(&c->tm_ref));
    KC_CU_TRY_CUDA(be, "timing_begin", cudaEventRecord(c->tm_ref, c->stream));
    c->tm_n = 0;
    return KC_STATUS_OK;
}

int kc__cu_timing_mark(kc_backend *be, int stream) {
    kc_cu_ctx *c = kc__cu(be);
    cudaStream_t s = stream_of(c, stream);
    if (!s || !c->tm_ref || c->tm_n >= KC_CU_TIMING_MARKS) return -1;
    if (!c->tm_ev[c->tm_n] && cudaEventCreate(&c->tm_ev[c->tm_n]) != cudaSuccess) {
        cudaGetLastError();
        c->tm_ev[c->tm_n] = NULL;
        return -1;
    }
    if (cudaEventRecord(c->tm_ev[c->tm_n], s) != cudaSuccess) {
        cudaGetLastError();
        return -1;
    }
    return c->tm_n++;
}

kc_status kc__cu_timing_read(kc_backend *be, double *seconds, int n) {
    kc_cu_ctx *c = kc__cu(be);
    if (n > c->tm_n) return kc__cu_fail(be, KC_STATUS_INTERNAL, "timing_read: %d marks asked, %d recorded", n, c->tm_n);
    for (int i = 0; i < n; i++) {
        float ms = 0;
        KC_CU_TRY_CUDA(be, "timing_read (wait)", cudaEventSynchronize(c->tm_ev[i]));
        KC_CU_TRY_CUDA(be, "timing_read", cudaEventElapsedTime(&ms, c->tm_ref, c->tm_ev[i]));
        seconds[i] = (double)ms / 1e3;
    }
    return KC_STATUS_OK;
}

void kc__cu_timing_shutdown(kc_cu_ctx *c) {
    for (int i = 0; i < KC_CU_TIMING_MARKS; i++)
        if (c->tm_ev[i]) cudaEventDestroy(c->tm_ev[i]);
    if (c->tm_ref) cudaEventDestroy(c->tm_ref);
    c->tm_ref = NULL;
}
