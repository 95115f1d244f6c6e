/* cpu_backend.c — the CPU backend's creation and destruction, the choice of its kernels'
 * instruction set (cpuid, at run time: cpu_isa.h), the memory operations (device memory is
 * host memory here), and what it supports. The kernel slots and describe: cpu_table.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    int isa;      /* kc_cpu_isa of the kernels in the table */
    int winograd; /* Winograd for the 3x3 stride-1 convolutions that suit it */
    int wg_tile;  /* its output tile: 2, 4, or 0 (chosen per shape) */
    int blocked;  /* the register-blocked direct convolutions (cpu_conv_blocked.c) */
    int huge;     /* blocks of KC_CPU_HUGE_MIN bytes or more: 2 MiB aligned, MADV_HUGEPAGE */
} cpu_mem;

/* Large blocks (a plan's arena; workload A's is 32 MiB) start on a 2 MiB boundary and ask
 * the kernel for transparent huge pages (THP is often "madvise" only): fewer TLB misses, and
 * a physical placement (hence which cache sets the lines use) that no longer differs from
 * process to process in 4 KiB pieces. Blocks under 4 MiB stay as they were, so that the
 * rounding to whole huge pages costs at most a quarter more. kc_device_opts.cpu_hugepages =
 * KC_FALSE (KERAC_CPU_HUGEPAGES=0) turns this off. */
#define KC_CPU_HUGE ((size_t)2 << 20)
#define KC_CPU_HUGE_MIN ((size_t)4 << 20)

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
    const int huge = mem->huge && rounded >= KC_CPU_HUGE_MIN;
    if (posix_memalign(&p, huge ? KC_CPU_HUGE : 64, rounded + KC_CPU_HEADER) != 0 || !p)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY,
                        "cpu backend: out of host memory allocating %zu bytes (%.1f MiB); reduce the batch "
                        "size or free memory",
                        bytes, mib(bytes));
#ifdef MADV_HUGEPAGE
    if (huge) /* advice only: without THP the block works as any other */
        (void)madvise(p, (rounded + KC_CPU_HEADER) & ~(size_t)4095, MADV_HUGEPAGE);
#endif
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

/* a copy (src) or a clear (src NULL) of at least this many bytes between blocks that do
 * not overlap is split over the team, one piece of 64-byte multiples per thread: one thread
 * reaches about two thirds of the two cores' memory bandwidth here (24.6 against 36.5 GB/s). */
#define CPU_PAR_BYTES ((size_t)1 << 20)
static void cpu_bytes(void *dst, const void *src, size_t bytes) {
    const char *s = src;
    char *d = dst;
    const bool overlap = s && d < s + bytes && s < d + bytes;
    if (bytes < CPU_PAR_BYTES || overlap || !kc__cpu_team()) {
        if (s) memmove(d, s, bytes);
        else memset(d, 0, bytes);
        return;
    }
#pragma omp parallel num_threads(kc__num_threads())
    {
        int t = 0, tn = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        tn = omp_get_num_threads();
#endif
        const size_t lo = (bytes * (size_t)t / (size_t)tn) & ~(size_t)63;
        const size_t hi = t == tn - 1 ? bytes : (bytes * (size_t)(t + 1) / (size_t)tn) & ~(size_t)63;
        if (s) memcpy(d + lo, s + lo, hi - lo);
        else memset(d + lo, 0, hi - lo);
    }
}

kc_status kc__cpu_copy(kc_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst || !src)
        return cpu_copy_checked("copy", dst, src, bytes); /* the message */
    if (dst != src) cpu_bytes(dst, src, bytes);
    return KC_STATUS_OK;
}

kc_status kc__cpu_memset0(kc_backend *be, void *dst, size_t bytes) {
    if (bytes == 0) return KC_STATUS_OK;
    if (!dst) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend memset0: NULL pointer for %zu bytes", bytes);
    cpu_bytes(dst, NULL, bytes);
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

/* ---- the instruction set: the copies of the kernels this build has (cpu_isa.h) */

#ifdef KC_CPU_X86_ISAS
void kc__cpu_fill_kernels_avx2(kc_backend *be);
void kc__cpu_fill_kernels_avx512(kc_backend *be);
#endif

int kc__cpu_isa_best(void) {
#ifdef KC_CPU_X86_ISAS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4")) return KC_CPU_ISA_AVX512;
    if (__builtin_cpu_supports("x86-64-v3")) return KC_CPU_ISA_AVX2;
#endif
    return KC_CPU_ISA_BASELINE;
}

const char *kc__cpu_isa_label(int isa) {
    switch (isa) {
    case KC_CPU_ISA_AVX2: return "avx2";
    case KC_CPU_ISA_AVX512: return "avx512";
    case KC_CPU_ISA_BASELINE: return "baseline";
    default: return "auto";
    }
}

static void fill_kernels_for(int isa, kc_backend *be) {
#ifdef KC_CPU_X86_ISAS
    if (isa == KC_CPU_ISA_AVX512) {
        kc__cpu_fill_kernels_avx512(be);
        return;
    }
    if (isa == KC_CPU_ISA_AVX2) {
        kc__cpu_fill_kernels_avx2(be);
        return;
    }
#endif
    kc__cpu_fill_kernels(be);
}

/* The set to run for a request: AUTO -> the best the processor runs; a named one the
 * processor lacks is an error saying what it has. */
static kc_status choose_isa(int want, int *out) {
    const int best = kc__cpu_isa_best();
    if (want < KC_CPU_ISA_AUTO || want > KC_CPU_ISA_AVX512)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu backend: instruction set %d is not a kc_cpu_isa", want);
    if (want == KC_CPU_ISA_AUTO) want = best;
    if (want > best)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "cpu backend: the %s kernels were asked for (KERAC_CPU_ISA or kc_device_opts.cpu_isa) but "
                        "this processor%s runs at most the %s ones; ask for %s or auto",
                        kc__cpu_isa_label(want),
#ifdef KC_CPU_X86_ISAS
                        "",
#else
                        " (or this build, not for x86-64)",
#endif
                        kc__cpu_isa_label(best), kc__cpu_isa_label(best));
    *out = want;
    return KC_STATUS_OK;
}

int kc__cpu_backend_isa(const kc_backend *be) {
    if (!be || !be->name || strcmp(be->name, "cpu") != 0 || !be->ctx) return -1;
    return ((const cpu_mem *)be->ctx)->isa;
}

const char *kc_backend_cpu_isa(const kc_backend *be) {
    const int isa = kc__cpu_backend_isa(be);
    return isa < 0 ? NULL : kc__cpu_isa_label(isa);
}

/* ---- the table */

static void cpu_destroy(kc_backend *be) {
    free(be->ctx);
    free(be);
}

int kc__cpu_winograd_enabled(const kc_backend *be) { return be && be->ctx ? ((const cpu_mem *)be->ctx)->winograd : 0; }
int kc__cpu_winograd_tile(const kc_backend *be) { return be && be->ctx ? ((const cpu_mem *)be->ctx)->wg_tile : 0; }
int kc__cpu_blocked_enabled(const kc_backend *be) { return be && be->ctx && ((const cpu_mem *)be->ctx)->blocked; }

/* The environment's options (KERAC_CPU_ISA, KERAC_CPU_WINOGRAD, ...), as a model given none
 * gets: so KERAC_CPU_ISA picks the kernels of every backend a program makes (the tests run
 * each set the processor has that way: tests/isa_run.c). */
kc_status kc_backend_cpu_create(kc_backend **out) {
    kc_device_opts o;
    KC_TRY(kc_device_opts_default(&o));
    return kc_backend_cpu_create_ex(&o, out);
}

kc_status kc_backend_cpu_create_ex(const kc_device_opts *opts, kc_backend **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_backend_cpu_create: the output pointer is NULL");
    *out = NULL;
    int isa = KC_CPU_ISA_BASELINE;
    KC_TRY(choose_isa(opts ? opts->cpu_isa : KC_CPU_ISA_AUTO, &isa));
    const int wg_tile = opts ? opts->cpu_winograd_tile : 0;
    if (wg_tile != 0 && (wg_tile < 2 || wg_tile > 4))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "kc_device_opts.cpu_winograd_tile = %d: use 2 (F(2x2,3x3)), 3 (F(3x3,3x3)), "
                        "4 (F(4x4,3x3)) or 0 (by shape)",
                        wg_tile);
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
    ((cpu_mem *)be->ctx)->isa = isa;
    /* 1: where it wins; 2: asked for (KC_TRUE), at any channel count */
    ((cpu_mem *)be->ctx)->winograd = !opts ? 1 : opts->cpu_winograd == KC_FALSE ? 0 : opts->cpu_winograd == KC_TRUE ? 2 : 1;
    ((cpu_mem *)be->ctx)->wg_tile = wg_tile;
    ((cpu_mem *)be->ctx)->blocked = !opts || opts->cpu_conv_blocked != KC_FALSE;
    ((cpu_mem *)be->ctx)->huge = !opts || opts->cpu_hugepages != KC_FALSE;
    be->destroy = cpu_destroy;
    be->memory_stats = cpu_memory_stats;
    be->reset_peak = cpu_reset_peak;
    be->set_memory_limit = cpu_set_memory_limit;
    be->release_cache = cpu_release_cache;
    be->supports = cpu_supports;
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

    fill_kernels_for(isa, be);
    if (opts && opts->cpu_fuse_bn_relu == KC_FALSE) /* BatchNormalization and its ReLU apart */
        be->batchnorm_relu_forward_train = NULL, be->batchnorm_relu_forward_infer = NULL,
        be->batchnorm_relu_backward = NULL;
    be->fold_pad_depthwise = !(opts && opts->cpu_fold_pad == KC_FALSE);
    /* inference in tiles (src/model/tile.c) */
    be->infer_tile_bytes = opts && opts->cpu_infer_tile == KC_FALSE ? 0 : KC_CPU_INFER_TILE_BYTES;
    be->cpu_gemm_split = !(opts && opts->cpu_gemm_split == KC_FALSE); /* kc__cpu_sgemm */
    be->cpu_gemm_small = !(opts && opts->cpu_gemm_small == KC_FALSE); /* kc__cpu_sgemm */
    be->batchnorm_dx_in_place = 1; /* cpu_norm.c: the pass writes row r after every row's sums */
    if (opts && opts->cpu_conv_dx_add == KC_FALSE) be->conv2d_dx_adds = NULL; /* a buffer of its own, added in */
    if (opts && opts->cpu_fuse_add_relu == KC_FALSE) be->add_relu = NULL;     /* Add and ReLU apart */
    if (opts && opts->cpu_fuse_bn_add == KC_FALSE) be->bn_add_relu = NULL;    /* batch norm and Add apart */
    *out = be;
    return KC_STATUS_OK;
}

