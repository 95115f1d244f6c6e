/* cuda_alloc.c — the CUDA backend's caching device allocator.
 *
 * Training allocates a handful of long-lived buffers (parameter slab, gradients, optimizer
 * slots, the activation arena, batch buffers, scratch) and re-plans them when the batch
 * size changes; no step calls cudaMalloc. Three modes (KERAC_GPU_MEMORY):
 *   grow                 cudaMalloc on demand; freed blocks are kept in a cache and reused
 *                        for requests of the same size class (up to 1/8 larger); when
 *                        cudaMalloc fails the cache is returned to the driver and the call
 *                        retried once (the default)
 *   preallocate[=F]      one cudaMalloc of F (default 0.9) of the free memory at start,
 *                        carved first-fit into blocks; nothing more is asked of the driver
 *   limit=SIZE           grow, with a hard cap on the bytes handed out
 * set_memory_limit (kc_model_set_memory_limit, KERAC_MEMORY_LIMIT) caps any mode too; the
 * smaller cap wins. A request that cannot be met is KC_STATUS_OUT_OF_MEMORY with the bytes
 * asked, held and free or allowed, never an abort.
 *
 * Sizes are rounded up to 512 B (under 1 MiB), 64 KiB (under 64 MiB) or 2 MiB, so a block
 * is reused by the next request of about the same size. Every operation that reuses memory
 * runs in order on the backend's single stream, so a block freed while a kernel still
 * reads it is only overwritten by work queued after that kernel. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

static size_t round_size(size_t b) {
    if (b == 0) b = 1;
    if (b < ((size_t)1 << 20)) return (b + 511) & ~(size_t)511;
    if (b < ((size_t)64 << 20)) return (b + 65535) & ~(size_t)65535;
    return (b + ((size_t)2 << 20) - 1) & ~(((size_t)2 << 20) - 1);
}

static kc_cu_alloc *A(kc_backend *be) { return &kc__cu(be)->mem; }

static size_t effective_limit(const kc_cu_alloc *a) {
    if (a->mode_limit && a->user_limit) return KC_CU_MIN(a->mode_limit, a->user_limit);
    return a->mode_limit ? a->mode_limit : a->user_limit;
}

static bool grow_array(void **arr, int *cap, int need, size_t elem) {
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p) return false;
    *arr = p;
    *cap = nc;
    return true;
}

int kc__cu_parse_size(const char *text, size_t *out) {
    if (!text || !*text) return -1;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || !(v >= 0) || v > 1.8e19) return -1;
    double mult = 1;
    switch (*end) {
    case '\0': break;
    case 'b': case 'B': mult = 1; end++; break;
    case 'k': case 'K': mult = 1024.0; end++; break;
    case 'm': case 'M': mult = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mult = 1024.0 * 1024 * 1024; end++; break;
    case 't': case 'T': mult = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: return -1;
    }
    if (mult > 1 && (*end == 'i' || *end == 'I')) end++;
    if (mult > 1 && (*end == 'b' || *end == 'B')) end++;
    if (*end != '\0') return -1;
    double bytes = v * mult;
    if (bytes > 1.8e19) return -1;
    *out = (size_t)bytes;
    return 0;
}

kc_status kc__cu_alloc_init(kc_backend *be, const char *spec, char *err, size_t err_n) {
    kc_cu_alloc *a = A(be);
    memset(a, 0, sizeof *a);
    a->mode = KC_CU_MEM_GROW;
    snprintf(a->spec, sizeof a->spec, "%s", spec && *spec ? spec : "grow");
    if (!spec || !*spec || strcmp(spec, "grow") == 0) return KC_STATUS_OK;
    if (strncmp(spec, "limit=", 6) == 0) {
        size_t lim = 0;
        if (kc__cu_parse_size(spec + 6, &lim) != 0 || lim == 0) {
            snprintf(err, err_n, "GPU memory mode '%s': the limit is not a size like 8G, 512M or 1000000 (bytes)",
                     spec);
            return KC_STATUS_INVALID_ARGUMENT;
        }
        a->mode = KC_CU_MEM_LIMIT;
        a->mode_limit = lim;
        return KC_STATUS_OK;
    }
    if (strcmp(spec, "preallocate") == 0 || strncmp(spec, "preallocate=", 12) == 0) {
        double f = 0.9;
        if (spec[11] == '=') {
            char *end = NULL;
            f = strtod(spec + 12, &end);
            if (end == spec + 12 || *end != '\0' || !(f > 0.0 && f <= 1.0)) {
                snprintf(err, err_n, "GPU memory mode '%s': the fraction must be a number in (0, 1], e.g. "
                         "preallocate=0.8", spec);
                return KC_STATUS_INVALID_ARGUMENT;
            }
        }
        size_t free_b = 0, total_b = 0;
        cudaError_t e = cudaMemGetInfo(&free_b, &total_b);
        if (e != cudaSuccess) {
            cudaGetLastError();
            snprintf(err, err_n, "GPU memory mode '%s': cannot read the free device memory: %s", spec,
                     cudaGetErrorString(e));
            return KC_STATUS_DEVICE;
        }
        size_t want = (size_t)((double)free_b * f) & ~(((size_t)2 << 20) - 1);
        if (want < ((size_t)2 << 20)) want = (size_t)2 << 20;
        void *p = NULL;
        e = cudaMalloc(&p, want);
        if (e != cudaSuccess) {
            cudaGetLastError();
            char b1[32], b2[32];
            snprintf(err, err_n, "GPU memory mode '%s': cannot preallocate %s (%.0f%% of the %s free): %s; ask for a "
                     "smaller fraction", spec, kc__cu_bytes(want, b1, sizeof b1), f * 100.0,
                     kc__cu_bytes(free_b, b2, sizeof b2), cudaGetErrorString(e));
            return KC_STATUS_OUT_OF_MEMORY;
        }
        a->mode = KC_CU_MEM_PREALLOCATE;
        a->fraction = f;
        a->pool = p;
        a->pool_size = want;
        a->reserved = a->peak_reserved = want;
        if (!grow_array((void **)&a->free_ranges, &a->cap_free, 1, sizeof(kc_cu_range))) {
            cudaFree(p);
            a->pool = NULL;
            snprintf(err, err_n, "out of host memory starting the CUDA allocator");
            return KC_STATUS_OUT_OF_MEMORY;
        }
        a->free_ranges[0] = (kc_cu_range){0, want};
        a->n_free = 1;
        return KC_STATUS_OK;
    }
    snprintf(err, err_n, "GPU memory mode '%s' is not grow, preallocate[=FRACTION] or limit=SIZE (e.g. limit=8G)",
             spec);
    return KC_STATUS_INVALID_ARGUMENT;
}

/* ---- the preallocated pool: first fit over sorted, coalesced free ranges */

static void *pool_take(kc_cu_alloc *a, size_t sz) {
    for (int i = 0; i < a->n_free; i++) {
        kc_cu_range *r = &a->free_ranges[i];
        if (r->size < sz) continue;
        void *p = a->pool + r->off;
        r->off += sz;
        r->size -= sz;
        if (r->size == 0) {
            memmove(r, r + 1, (size_t)(a->n_free - i - 1) * sizeof *r);
            a->n_free--;
        }
        return p;
    }
    return NULL;
}

static size_t pool_largest(const kc_cu_alloc *a) {
    size_t m = 0;
    for (int i = 0; i < a->n_free; i++) m = KC_CU_MAX(m, a->free_ranges[i].size);
    return m;
}

static void pool_give(kc_cu_alloc *a, void *p, size_t sz) {
    size_t off = (size_t)((char *)p - a->pool);
    int k = 0;
    while (k < a->n_free && a->free_ranges[k].off < off) k++;
    bool prev = k > 0 && a->free_ranges[k - 1].off + a->free_ranges[k - 1].size == off;
    bool next = k < a->n_free && off + sz == a->free_ranges[k].off;
    if (prev && next) {
        a->free_ranges[k - 1].size += sz + a->free_ranges[k].size;
        memmove(&a->free_ranges[k], &a->free_ranges[k + 1], (size_t)(a->n_free - k - 1) * sizeof(kc_cu_range));
        a->n_free--;
    } else if (prev) {
        a->free_ranges[k - 1].size += sz;
    } else if (next) {
        a->free_ranges[k].off = off;
        a->free_ranges[k].size += sz;
    } else {
        if (!grow_array((void **)&a->free_ranges, &a->cap_free, a->n_free + 1, sizeof(kc_cu_range))) return; /* leaks the range */
        memmove(&a->free_ranges[k + 1], &a->free_ranges[k], (size_t)(a->n_free - k) * sizeof(kc_cu_range));
        a->free_ranges[k] = (kc_cu_range){off, sz};
        a->n_free++;
    }
}

/* ---- grow / limit */

void kc__cu_release_cache(kc_backend *be) {
    kc_cu_alloc *a = A(be);
    if (a->n_cache == 0) return;
    kc__cu_enter(be);
    for (int i = 0; i < a->n_cache; i++) {
        cudaFree(a->cache[i].ptr);
        a->reserved -= a->cache[i].size;
    }
    cudaGetLastError();
    a->n_cache = 0;
    a->cached = 0;
}

kc_status kc__cu_alloc(kc_backend *be, size_t bytes, void **out) {
    if (!out) return kc__cu_fail(be, KC_STATUS_INVALID_ARGUMENT, "cuda backend alloc: the output pointer is NULL");
    *out = NULL;
    kc_cu_alloc *a = A(be);
    char b1[32], b2[32], b3[32], b4[32];
    size_t sz = round_size(bytes);
    if (sz < bytes)
        return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "%s: cannot allocate %zu bytes of device memory (size overflow)",
                           be->device, bytes);
    if (!grow_array((void **)&a->live, &a->cap_live, a->n_live + 1, sizeof(kc_cu_block)))
        return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY, "out of host memory tracking device blocks");
    size_t lim = effective_limit(a);
    if (lim && a->in_use + sz > lim)
        return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY,
                           "%s: out of memory: %zu bytes (%s) asked with %s held, over the memory limit of %s (%s); "
                           "raise the limit or lower the batch size",
                           be->device, bytes, kc__cu_bytes(bytes, b1, sizeof b1), kc__cu_bytes(a->in_use, b2, sizeof b2),
                           kc__cu_bytes(lim, b3, sizeof b3),
                           a->mode_limit == lim ? "KERAC_GPU_MEMORY / --gpu-memory" : "the model's memory limit");
    KC_TRY(kc__cu_enter(be));
    void *p = NULL;
    if (a->mode == KC_CU_MEM_PREALLOCATE) {
        p = pool_take(a, sz);
        if (!p)
            return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY,
                               "%s: out of memory: %zu bytes (%s) asked, and the preallocated pool of %s "
                               "(KERAC_GPU_MEMORY=%s) has %s held and at most %s in one piece; preallocate a larger "
                               "fraction, use --gpu-memory grow, or lower the batch size",
                               be->device, bytes, kc__cu_bytes(bytes, b1, sizeof b1),
                               kc__cu_bytes(a->pool_size, b2, sizeof b2), a->spec, kc__cu_bytes(a->in_use, b3, sizeof b3),
                               kc__cu_bytes(pool_largest(a), b4, sizeof b4));
    } else {
        int best = -1;
        for (int i = 0; i < a->n_cache; i++) {
            size_t s = a->cache[i].size;
            if (s >= sz && s <= sz + sz / 8 && (!lim || a->in_use + s <= lim) && /* the limit holds for what is handed out */
                (best < 0 || s < a->cache[best].size))
                best = i;
        }
        if (best >= 0) {
            p = a->cache[best].ptr;
            sz = a->cache[best].size;
            a->cached -= sz;
            a->cache[best] = a->cache[--a->n_cache];
        } else {
            cudaError_t e = cudaMalloc(&p, sz);
            if (e != cudaSuccess) {
                cudaGetLastError(); /* an allocation failure is not sticky: clear it */
                kc__cu_release_cache(be);
                e = cudaMalloc(&p, sz);
            }
            if (e != cudaSuccess) {
                cudaGetLastError();
                size_t free_b = 0, total_b = 0;
                cudaMemGetInfo(&free_b, &total_b);
                cudaGetLastError();
                if (e != cudaErrorMemoryAllocation)
                    return kc__cu_cuda_fail(be, "cudaMalloc", e);
                return kc__cu_fail(be, KC_STATUS_OUT_OF_MEMORY,
                                   "%s: out of device memory: %zu bytes (%s) asked, %s free of %s, kerac holds %s; "
                                   "lower the batch size (--batch-size auto finds one that fits) or stop other "
                                   "programs using this GPU",
                                   be->device, bytes, kc__cu_bytes(bytes, b1, sizeof b1),
                                   kc__cu_bytes(free_b, b2, sizeof b2), kc__cu_bytes(total_b, b3, sizeof b3),
                                   kc__cu_bytes(a->in_use, b4, sizeof b4));
            }
            a->reserved += sz;
            if (a->reserved > a->peak_reserved) a->peak_reserved = a->reserved;
        }
    }
    a->live[a->n_live++] = (kc_cu_block){p, sz};
    a->in_use += sz;
    if (a->in_use > a->peak) a->peak = a->in_use;
    *out = p;
    return KC_STATUS_OK;
}

void kc__cu_free(kc_backend *be, void *p) {
    if (!p || !be) return;
    kc_cu_alloc *a = A(be);
    int i = a->n_live - 1;
    while (i >= 0 && a->live[i].ptr != p) i--;
    if (i < 0) return; /* not ours: ignore (free has no way to report it) */
    kc_cu_block b = a->live[i];
    a->live[i] = a->live[--a->n_live];
    a->in_use -= b.size;
    /* the block may next serve compute work, then come back as a feed destination */
    kc__cu_feed_forget(&kc__cu(be)->feed_marks, b.ptr, b.size);
    if (a->mode == KC_CU_MEM_PREALLOCATE) {
        pool_give(a, b.ptr, b.size);
        return;
    }
    if (!grow_array((void **)&a->cache, &a->cap_cache, a->n_cache + 1, sizeof(kc_cu_block))) {
        kc__cu_enter(be);
        cudaFree(b.ptr);
        cudaGetLastError();
        a->reserved -= b.size;
        return;
    }
    a->cache[a->n_cache++] = b;
    a->cached += b.size;
}

void kc__cu_memory_stats(kc_backend *be, size_t *in_use, size_t *peak) {
    kc_cu_alloc *a = A(be);
    if (in_use) *in_use = a->in_use;
    if (peak) *peak = a->peak;
}

void kc__cu_reset_peak(kc_backend *be) { A(be)->peak = A(be)->in_use; }

void kc__cu_set_memory_limit(kc_backend *be, size_t bytes) { A(be)->user_limit = bytes; }

size_t kc__cu_alloc_spare(kc_backend *be) {
    kc_cu_alloc *a = A(be);
    if (a->mode == KC_CU_MEM_PREALLOCATE) return a->pool_size - KC_CU_MIN(a->in_use, a->pool_size);
    return a->cached;
}

kc_status kc__cu_scratch(kc_backend *be, size_t bytes, void **out) {
    kc_cu_ctx *c = kc__cu(be);
    if (bytes <= c->scratch_cap && c->scratch) {
        *out = c->scratch;
        return KC_STATUS_OK;
    }
    size_t want = KC_CU_MAX(bytes, KC_CU_MAX(2 * c->scratch_cap, (size_t)64 << 10));
    kc__cu_free(be, c->scratch); /* later work on the stream may reuse it: ordered */
    c->scratch = NULL;
    c->scratch_cap = 0;
    KC_TRY(kc__cu_alloc(be, want, &c->scratch));
    c->scratch_cap = want;
    *out = c->scratch;
    return KC_STATUS_OK;
}

void kc__cu_alloc_shutdown(kc_backend *be) {
    kc_cu_alloc *a = A(be);
    if (a->mode == KC_CU_MEM_PREALLOCATE) {
        if (a->pool) cudaFree(a->pool);
    } else {
        for (int i = 0; i < a->n_live; i++) cudaFree(a->live[i].ptr); /* blocks the host never freed */
        for (int i = 0; i < a->n_cache; i++) cudaFree(a->cache[i].ptr);
    }
    cudaGetLastError();
    free(a->live);
    free(a->cache);
    free(a->free_ranges);
    memset(a, 0, sizeof *a);
}
