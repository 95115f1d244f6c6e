/* cpu_backend.c — the CPU backend's function table, its creation and destruction, the
 * memory operations (device memory is host memory here), and what it says of itself
 * (supports, describe). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu.h"

/* ---- memory
 * Every block carries a 64-byte header holding its size, so that the backend knows the
 * bytes it holds (memory_stats) and can enforce a limit (set_memory_limit, the CPU side
 * of --memory-limit). The counters are atomic: datasets and loaders never allocate here,
 * but a user may drive two models from two threads. */

typedef struct cpu_mem {
    _Atomic size_t in_use, peak;
    size_t limit; /* 0: none */
} cpu_mem;

#define KC_CPU_HEADER 64

static cpu_mem *mem_of(kc_backend *be) { return (cpu_mem *)be->ctx; }

static double mib(size_t b) { return (double)b / (1024.0 * 1024.0); }

kc_status kc__cpu_alloc(kc_backend *be, size_t bytes, void **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend alloc: the output pointer is NULL");
    *out = NULL;
    size_t rounded = (bytes + 63) & ~(size_t)63;
    if (rounded < bytes || rounded + KC_CPU_HEADER < rounded) /* overflow */
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "cpu backend: cannot allocate %zu bytes of host memory (size overflow); reduce the "
                        "batch size or the model size",
                        bytes);
    cpu_mem *mem = mem_of(be);
    size_t held = mem->in_use;
    if (mem->limit && held + rounded > mem->limit)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "out of memory: %zu bytes (%.1f MiB) asked with %.1f MiB held, over the memory limit of "
                        "%.1f MiB; raise --memory-limit or lower the batch size",
                        bytes, mib(bytes), mib(held), mib(mem->limit));
    void *p = NULL;
    if (posix_memalign(&p, 64, rounded + KC_CPU_HEADER) != 0 || !p)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "cpu backend: out of host memory allocating %zu bytes (%.1f MiB); reduce the batch "
                        "size or free memory",
                        bytes, mib(bytes));
    *(size_t *)p = rounded;
    size_t now = __atomic_add_fetch((size_t *)&mem->in_use, rounded, __ATOMIC_SEQ_CST);
    size_t pk = mem->peak;
    while (now > pk && !__atomic_compare_exchange_n((size_t *)&mem->peak, &pk, now, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    *out = (char *)p + KC_CPU_HEADER;
    return KC_STATUS_OK;
}

void kc__cpu_free(kc_backend *be, void *p) {
    if (!p) return;
    char *base = (char *)p - KC_CPU_HEADER;
    mem_of(be)->in_use -= *(size_t *)base;
    free(base);
}

static void cpu_memory_stats(kc_backend *be, size_t *in_use, size_t *peak) {
    if (in_use) *in_use = mem_of(be)->in_use;
    if (peak) *peak = mem_of(be)->peak;
}
static void cpu_reset_peak(kc_backend *be) { mem_of(be)->peak = mem_of(be)->in_use; }
static void cpu_set_memory_limit(kc_backend *be, size_t bytes) { mem_of(be)->limit = bytes; }
static void cpu_release_cache(kc_backend *be) {}

static kc_status cpu_copy_checked(const char *what, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend %s: NULL %s pointer for %zu bytes", what,
                        dst ? "source" : "destination", bytes);
    if (dst != src) memmove(dst, src, bytes);
    return KC_STATUS_OK;
}

kc_status kc__cpu_to_device(kc_backend *be, void *dst, const void *src, size_t bytes) {
    return cpu_copy_checked("to_device", dst, src, bytes);
}

kc_status kc__cpu_to_host(kc_backend *be, void *dst, const void *src, size_t bytes) {
    return cpu_copy_checked("to_host", dst, src, bytes);
}

kc_status kc__cpu_copy(kc_backend *be, void *dst, const void *src, size_t bytes) {
    return cpu_copy_checked("copy", dst, src, bytes);
}

kc_status kc__cpu_memset0(kc_backend *be, void *dst, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend memset0: NULL pointer for %zu bytes", bytes);
    memset(dst, 0, bytes);
    return KC_STATUS_OK;
}

kc_status kc__cpu_sync(kc_backend *be) { return KC_STATUS_OK; }

/* ---- the input feed: host memory is device memory, so uploads are plain copies, done at
 * once, and there is no other stream to order against. */

static kc_status cpu_host_alloc(kc_backend *be, size_t bytes, void **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend host_alloc: the output pointer is NULL");
    *out = NULL;
    void *p = NULL;
    if (posix_memalign(&p, 64, bytes ? bytes : 1) != 0 || !p)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "cpu backend: out of host memory allocating %zu bytes (%.1f MiB) of batch staging; reduce "
                        "the batch size or free memory",
                        bytes, mib(bytes));
    *out = p;
    return KC_STATUS_OK;
}

static void cpu_host_free(kc_backend *be, void *p) { free(p); }

static kc_status cpu_feed_slot(const char *what, int slot) {
    if (slot < 0 || slot >= KC_FEED_SLOTS)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend %s: feed slot %d is not in [0, %d)", what, slot,
                        KC_FEED_SLOTS);
    return KC_STATUS_OK;
}

static kc_status cpu_feed_upload(kc_backend *be, int slot, void *dst, const void *src, size_t bytes) {
    KC_TRY(cpu_feed_slot("feed_upload", slot));
    return cpu_copy_checked("feed_upload", dst, src, bytes);
}
static kc_status cpu_feed_acquire(kc_backend *be, int slot) { return cpu_feed_slot("feed_acquire", slot); }
static kc_status cpu_feed_release(kc_backend *be, int slot) { return cpu_feed_slot("feed_release", slot); }
static kc_status cpu_feed_wait(kc_backend *be, int slot) { return cpu_feed_slot("feed_wait", slot); }

/* A "Key:   123 kB" line of /proc/meminfo, in bytes; 0 when absent. */
static size_t meminfo_field(const char *text, const char *key) {
    const char *p = strstr(text, key);
    if (!p) return 0;
    p += strlen(key);
    unsigned long long kb = strtoull(p, NULL, 10);
    return (size_t)kb * 1024;
}

/* A number in a one-line file (cgroup limits); 0 when missing or "max". */
static size_t read_size_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    char buf[64] = {0};
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    if (got == 0 || buf[0] < '0' || buf[0] > '9') return 0;
    return (size_t)strtoull(buf, NULL, 10);
}

kc_status kc__cpu_mem_info(kc_backend *be, kc_mem_info *out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend mem_info: the output pointer is NULL");
    size_t total = 0, avail = 0;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f) {
        char text[4096];
        size_t got = fread(text, 1, sizeof text - 1, f);
        fclose(f);
        text[got] = '\0';
        total = meminfo_field(text, "MemTotal:");
        avail = meminfo_field(text, "MemAvailable:");
        if (!avail) avail = meminfo_field(text, "MemFree:");
    }
    if (!total) {
        long pages = sysconf(_SC_PHYS_PAGES), avpages = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
        if (pages > 0 && psize > 0) total = (size_t)pages * (size_t)psize;
        if (avpages > 0 && psize > 0) avail = (size_t)avpages * (size_t)psize;
    }
    if (!total)
        return kc__fail(KC_STATUS_DEVICE,
                        "cpu backend: cannot read the host memory size (/proc/meminfo and sysconf failed)");
    /* a container's memory limit (cgroup v2) is the real ceiling */
    size_t limit = read_size_file("/sys/fs/cgroup/memory.max");
    if (limit > 0 && limit < total) {
        size_t used = read_size_file("/sys/fs/cgroup/memory.current");
        total = limit;
        size_t left = used < limit ? limit - used : 0;
        if (left < avail) avail = left;
    }
    if (avail > total) avail = total;
    out->free_bytes = avail;
    out->total_bytes = total;
    return KC_STATUS_OK;
}

/* ---- what the backend has and runs */

static int cpu_supports(kc_backend *be, kc_op op) {
    (void)be;
    return op >= 0 && op < KC_OP_COUNT; /* the reference backend has every operation */
}

static kc_status cpu_describe(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n) {
    static const char *const name[KC_OP_COUNT] = {
        [KC_OP_GLOBAL_AVG_POOL] = "cpu global average pooling", [KC_OP_GEMM] = "cpu gemm (OpenBLAS)",
        [KC_OP_BATCHNORM] = "cpu batch norm", [KC_OP_DROPOUT] = "cpu dropout", [KC_OP_PAD2D] = "cpu zero padding",
        [KC_OP_ACTIVATION] = "cpu activation", [KC_OP_ELEMENTWISE] = "cpu elementwise", [KC_OP_LOSS] = "cpu loss",
        [KC_OP_OPTIMIZER] = "cpu fused optimizer update", [KC_OP_DEPTHWISE] = "cpu direct depthwise conv",
        [KC_OP_NORM] = "cpu group/layer norm", [KC_OP_RESAMPLE] = "cpu upsampling and permute",
        [KC_OP_GROUPED_CONV] = "cpu direct grouped conv",
    };
    if (!buf || !n) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: no buffer");
    buf[0] = '\0';
    if (!cpu_supports(be, op)) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: unknown operation %d", (int)op);
    if (op == KC_OP_CONV2D) {
        if (!desc) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: a convolution needs its descriptor");
        return kc__cpu_conv2d_describe(be, desc, ws_bytes, buf, n);
    }
    if (op == KC_OP_POOL2D) {
        const kc_pool2d_desc *p = desc;
        snprintf(buf, n, "cpu %spooling", !p ? "" : p->kind == KC_POOL_MAX ? "max " : "average ");
        return KC_STATUS_OK;
    }
    snprintf(buf, n, "%s", name[op]);
    return KC_STATUS_OK;
}

/* ---- the table */

static void cpu_destroy(kc_backend *be) {
    free(be->ctx);
    free(be);
}

kc_status kc_backend_cpu_create(kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_cpu_create: the output pointer is NULL");
    *out = NULL;
    kc_backend *be = calloc(1, sizeof *be);
    if (!be) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory creating the cpu backend");
    be->abi = KC_BACKEND_ABI;
    be->struct_size = sizeof *be;
    be->name = "cpu";
    snprintf(be->device, sizeof be->device, "cpu");
    be->ctx = calloc(1, sizeof(cpu_mem));
    if (!be->ctx) {
        free(be);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory creating the cpu backend");
    }
    be->destroy = cpu_destroy;
    be->memory_stats = cpu_memory_stats;
    be->reset_peak = cpu_reset_peak;
    be->set_memory_limit = cpu_set_memory_limit;
    be->release_cache = cpu_release_cache;
    be->supports = cpu_supports;
    be->describe = cpu_describe;
    be->host_fail = kc__fail; /* the CPU backend lives inside libkerac: the host services are its own */
    be->host_log = kc__log;

    be->alloc = kc__cpu_alloc;
    be->free = kc__cpu_free;
    be->to_device = kc__cpu_to_device;
    be->to_host = kc__cpu_to_host;
    be->copy = kc__cpu_copy;
    be->memset0 = kc__cpu_memset0;
    be->sync = kc__cpu_sync;
    be->mem_info = kc__cpu_mem_info;
    be->host_alloc = cpu_host_alloc;
    be->host_free = cpu_host_free;
    be->feed_upload = cpu_feed_upload;
    be->feed_acquire = cpu_feed_acquire;
    be->feed_release = cpu_feed_release;
    be->feed_wait = cpu_feed_wait;

    be->gemm = kc__cpu_gemm;
    be->bias_add = kc__cpu_bias_add;
    be->bias_grad = kc__cpu_bias_grad;

    be->conv2d_workspace = kc__cpu_conv2d_workspace;
    be->conv2d_forward = kc__cpu_conv2d_forward;
    be->conv2d_backward_data = kc__cpu_conv2d_backward_data;
    be->conv2d_backward_filter = kc__cpu_conv2d_backward_filter;

    be->pool2d_forward = kc__cpu_pool2d_forward;
    be->pool2d_backward = kc__cpu_pool2d_backward;
    be->global_avg_pool_forward = kc__cpu_global_avg_pool_forward;
    be->global_avg_pool_backward = kc__cpu_global_avg_pool_backward;

    be->batchnorm_forward_train = kc__cpu_batchnorm_forward_train;
    be->batchnorm_forward_infer = kc__cpu_batchnorm_forward_infer;
    be->batchnorm_backward = kc__cpu_batchnorm_backward;

    be->act_forward = kc__cpu_act_forward;
    be->act_backward = kc__cpu_act_backward;

    be->dropout_forward = kc__cpu_dropout_forward;
    be->dropout_backward = kc__cpu_dropout_backward;

    be->add = kc__cpu_add;
    be->axpy = kc__cpu_axpy;
    be->scale = kc__cpu_scale;
    be->copy_strided = kc__cpu_copy_strided;
    be->pad2d_forward = kc__cpu_pad2d_forward;
    be->pad2d_backward = kc__cpu_pad2d_backward;

    be->loss_forward_backward = kc__cpu_loss_forward_backward;
    be->count_correct = kc__cpu_count_correct;
    be->optimizer_step = kc__cpu_optimizer_step;
    be->sum_squares = kc__cpu_sum_squares;

    be->depthwise_forward = kc__cpu_depthwise_forward;
    be->depthwise_backward_data = kc__cpu_depthwise_backward_data;
    be->depthwise_backward_filter = kc__cpu_depthwise_backward_filter;
    /* convolutions */
    be->grouped_conv_forward = kc__cpu_grouped_conv_forward;
    be->grouped_conv_backward_data = kc__cpu_grouped_conv_backward_data;
    be->grouped_conv_backward_filter = kc__cpu_grouped_conv_backward_filter;

    be->channel_affine = kc__cpu_channel_affine; /* normresample block */
    be->normalize = kc__cpu_normalize;
    be->groupnorm_forward = kc__cpu_groupnorm_forward;
    be->groupnorm_backward = kc__cpu_groupnorm_backward;
    be->upsample2d_forward = kc__cpu_upsample2d_forward;
    be->upsample2d_backward = kc__cpu_upsample2d_backward;
    be->permute = kc__cpu_permute;

    *out = be;
    return KC_STATUS_OK;
}

