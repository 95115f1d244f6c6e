/* cuda_rules.c — the CUDA module's decisions that need no GPU (cuda_rules.h). Plain C: no
 * CUDA or cuDNN header, so tests/test_cuda_rules.c compiles it on any machine. */
#include "cuda_rules.h"

#include <string.h>

/* ---------------------------------------------------------------- cuDNN statuses */

bool kc__cu_dnn_refused(int st) { return KC_DNN_CATEGORY(st) == KC_DNN_NOT_SUPPORTED; }

kc_status kc__cu_dnn_status(int st) {
    if (st == KC_DNN_SUCCESS) return KC_STATUS_OK;
    if (st == KC_DNN_HOST_ALLOCATION_FAILED || st == KC_DNN_DEVICE_ALLOCATION_FAILED) return KC_STATUS_OUT_OF_MEMORY;
    return KC_STATUS_DEVICE;
}

/* ---------------------------------------------------------------- candidates and workspace */

int kc__cu_pick(const kc_cu_dir *d, size_t avail, size_t *borrow) {
    *borrow = 0;
    int least = -1;
    for (int k = 0; k < d->n; k++) {
        if (d->refused[k]) continue;
        if (d->ws[k] <= avail) return k;
        if (least < 0 || d->ws[k] < d->ws[least]) least = k;
    }
    if (least >= 0) *borrow = d->ws[least];
    return least;
}

size_t kc__cu_dir_need(const kc_cu_dir *d, bool benchmark) {
    size_t need = 0;
    for (int k = 0; k < d->n; k++) {
        if (d->refused[k]) continue;
        if (!benchmark || d->measured) return d->ws[k];
        if (d->ws[k] > need) need = d->ws[k];
    }
    return need;
}

static size_t align256(size_t b) { return (b + 255) & ~(size_t)255; }

size_t kc__cu_conv_fixed(int n, int c, int f, int kh, int kw, bool padded, int hp, int wp) {
    size_t kernel = align256((size_t)kh * (size_t)kw * (size_t)c * (size_t)f * sizeof(float));
    size_t pad = padded ? align256((size_t)n * (size_t)hp * (size_t)wp * (size_t)c * sizeof(float)) : 0;
    return kernel + pad;
}

size_t kc__cu_conv_total(size_t off_algo, const size_t need[3]) {
    size_t most = need[0];
    if (need[1] > most) most = need[1];
    if (need[2] > most) most = need[2];
    return 256 + off_algo + align256(most);
}

bool kc__cu_find_now(bool benchmark, bool measured, uint64_t plan_stamp, uint64_t newest_plan_stamp) {
    return benchmark && !measured && plan_stamp != 0 && plan_stamp == newest_plan_stamp;
}

int kc__cu_lru_victim(const uint64_t *last_use, int n, int keep) {
    int v = -1;
    for (int i = 0; i < n; i++)
        if (i != keep && (v < 0 || last_use[i] < last_use[v])) v = i;
    return v;
}

/* ---------------------------------------------------------------- the input feed */

bool kc__cu_feed_mark(kc_cu_feed_marks *m, int slot, const void *dst) {
    const void **d = m->dst[slot];
    for (int i = 0; i < KC_CU_FEED_MARKS; i++)
        if (d[i] == dst) return false;
    memmove(&d[1], &d[0], (KC_CU_FEED_MARKS - 1) * sizeof *d);
    d[0] = dst;
    return true;
}

void kc__cu_feed_forget(kc_cu_feed_marks *m, const void *base, size_t size) {
    const uintptr_t lo = (uintptr_t)base, hi = lo + size;
    for (int s = 0; s < KC_FEED_SLOTS; s++) {
        const void **d = m->dst[s];
        int k = 0;
        for (int i = 0; i < KC_CU_FEED_MARKS; i++) { /* keep the others, in order */
            uintptr_t p = (uintptr_t)d[i];
            if (d[i] && p >= lo && p < hi) continue;
            d[k++] = d[i];
        }
        while (k < KC_CU_FEED_MARKS) d[k++] = NULL;
    }
}
