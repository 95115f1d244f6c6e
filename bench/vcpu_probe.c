/* vcpu_probe: how fast each CPU runs, window by window, while all of them run at once.
 *
 * One thread per CPU (the first THREADS CPUs this process may use, pinned), each running a
 * register-only FMA loop (AVX-512, else AVX2+FMA, else scalar), then loads from a buffer in
 * its L2 cache, then loads from a 64 MiB buffer (memory), and counting its rate in windows
 * of WINDOW_MS milliseconds for SECONDS seconds each. On a dedicated machine every CPU
 * runs at the same rate in every window. On a virtual machine each virtual CPU may share its
 * physical core with another guest's thread now and then, and its rate drops for that
 * window, independently of the others. A parallel loop split evenly between the threads
 * (schedule(static)) then runs at the slowest thread's rate: the probe reports how much of
 * the CPUs' summed rate that leaves ("static share": the mean over windows of
 * threads * min / sum) and how the per-window rates spread.
 *
 *   vcpu_probe [SECONDS (2)] [THREADS (all allowed CPUs, at most 64)] [WINDOW_MS (50)]
 *
 * Prints one JSON line (bench/run.sh records it beside its rounds). No kerac code: this
 * measures the machine, not the library. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { MAX_THREADS = 64, MAX_WINDOWS = 4096, REPS = 256 };

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* REPS x 8 independent FMA chains over registers; returns flops done */
__attribute__((target("avx512f"))) static double fma_avx512(float *sink) {
    __m512 x[8], m = _mm512_set1_ps(0.9999999f), a = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < 8; i++) x[i] = _mm512_set1_ps(1.0f + (float)i * 1e-7f);
    for (int r = 0; r < REPS; r++)
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) x[i] = _mm512_fmadd_ps(x[i], m, a); /* unrolled: x stays in registers */
    for (int i = 1; i < 8; i++) x[0] = _mm512_add_ps(x[0], x[i]);
    *sink += _mm512_reduce_add_ps(x[0]);
    return (double)REPS * 8 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double fma_avx2(float *sink) {
    __m256 x[8], m = _mm256_set1_ps(0.9999999f), a = _mm256_set1_ps(1e-7f);
    for (int i = 0; i < 8; i++) x[i] = _mm256_set1_ps(1.0f + (float)i * 1e-7f);
    for (int r = 0; r < REPS; r++)
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) x[i] = _mm256_fmadd_ps(x[i], m, a);
    for (int i = 1; i < 8; i++) x[0] = _mm256_add_ps(x[0], x[i]);
    float v[8];
    _mm256_storeu_ps(v, x[0]);
    *sink += v[0];
    return (double)REPS * 8 * 8 * 2;
}

static double fma_scalar(float *sink) {
    float x[8];
    for (int i = 0; i < 8; i++) x[i] = 1.0f + (float)i * 1e-7f;
    for (int r = 0; r < REPS; r++)
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) x[i] = x[i] * 0.9999999f + 1e-7f;
    *sink += x[0] + x[7];
    return (double)REPS * 8 * 2;
}

/* Reads L2_FLOATS floats of buf from *at on (wrapping at its end: a buffer in the core's L2
 * cache, or one of MEM_FLOATS that only memory holds) into 8 vector sums; returns bytes
 * read: the load side of the core and the memory, which memory-bound kernels (batch norm,
 * depthwise, pooling, Winograd's transforms) lean on. */
typedef float v8f __attribute__((vector_size(32)));
enum { L2_FLOATS = 128 * 1024, MEM_FLOATS = 16 * 1024 * 1024 }; /* 512 KiB; 64 MiB */
static double read_buf(const float *buf, size_t floats, size_t *at, float *sink) {
    v8f acc[8] = {{0}};
    const v8f *v = (const v8f *)(buf + *at);
    for (int i = 0; i < L2_FLOATS / 8; i += 8)
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) acc[j] += v[i + j];
    for (int j = 1; j < 8; j++) acc[0] += acc[j];
    *sink += acc[0][0];
    *at = (*at + L2_FLOATS) % floats;
    return (double)L2_FLOATS * sizeof(float);
}

typedef struct probe {
    int cpu, windows;
    double window_s, t_start;
    double (*kernel)(float *);
    const float *buf;        /* NULL: the FMA kernel; else read_buf over its floats */
    size_t floats, at;
    double rate[MAX_WINDOWS]; /* G per second per window: FLOP (FMA) or bytes (L2) */
    float sink;
} probe;

static void *run(void *arg) {
    probe *p = arg;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(p->cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    for (int w = 0; w < p->windows; w++) {
        /* windows on a common clock, so that window w means the same moment on every CPU */
        const double t0 = p->t_start + w * p->window_s, t1 = t0 + p->window_s;
        while (now() < t0) p->buf ? read_buf(p->buf, p->floats, &p->at, &p->sink) : p->kernel(&p->sink);
        double flops = 0, t;
        do flops += p->buf ? read_buf(p->buf, p->floats, &p->at, &p->sink) : p->kernel(&p->sink);
        while ((t = now()) < t1);
        p->rate[w] = flops / (t - t0) * 1e-9;
    }
    return NULL;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(double *v, int n, double q) { /* v sorted */
    return v[(int)(q * (n - 1) + 0.5)];
}

/* Runs one phase: a thread per CPU, windows starting 50 ms from now on a common clock. */
static int phase_run(probe *p, pthread_t *th, int threads, const int *cpus, int windows, double window_ms,
                     double (*kernel)(float *), const float *bufs, size_t floats) {
    const double start = now() + 0.05; /* every thread started and pinned by then */
    for (int t = 0; t < threads; t++) {
        p[t] = (probe){.cpu = cpus[t], .windows = windows, .window_s = window_ms * 1e-3, .t_start = start,
                       .kernel = kernel, .buf = bufs ? bufs + (size_t)t * floats : NULL, .floats = floats};
        if (pthread_create(&th[t], NULL, run, &p[t]) != 0) {
            for (int u = 0; u < t; u++) pthread_join(th[u], NULL);
            return -1;
        }
    }
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    return 0;
}

/* Prints , "name": {per_cpu, sum, best, static_share}: per window the sum over the CPUs and
 * threads x the slowest (what an even split between the threads gets). */
static int report(const char *name, const probe *p, int threads, int windows) {
    double *sum = calloc((size_t)windows, sizeof(double)), *sorted = calloc((size_t)windows, sizeof(double));
    if (!sum || !sorted) return 0;
    double total_sum = 0, total_low = 0, best = 0;
    for (int w = 0; w < windows; w++) {
        double mn = p[0].rate[w];
        for (int t = 0; t < threads; t++) {
            sum[w] += p[t].rate[w];
            if (p[t].rate[w] < mn) mn = p[t].rate[w];
        }
        total_sum += sum[w];
        total_low += threads * mn;
    }
    printf(", \"%s\": {\"per_cpu\": [", name);
    for (int t = 0; t < threads; t++) {
        memcpy(sorted, p[t].rate, (size_t)windows * sizeof(double));
        qsort(sorted, (size_t)windows, sizeof(double), cmp);
        if (sorted[windows - 1] > best) best = sorted[windows - 1];
        printf("%s{\"cpu\": %d, \"p10\": %.1f, \"median\": %.1f, \"p90\": %.1f}", t ? ", " : "", p[t].cpu,
               pct(sorted, windows, 0.1), pct(sorted, windows, 0.5), pct(sorted, windows, 0.9));
    }
    memcpy(sorted, sum, (size_t)windows * sizeof(double));
    qsort(sorted, (size_t)windows, sizeof(double), cmp);
    printf("], \"sum\": {\"p10\": %.1f, \"median\": %.1f, \"p90\": %.1f}, \"best_cpu\": %.1f, "
           "\"static_share\": %.3f}",
           pct(sorted, windows, 0.1), pct(sorted, windows, 0.5), pct(sorted, windows, 0.9), best,
           total_sum > 0 ? total_low / total_sum : 0.0);
    free(sum), free(sorted);
    return 1;
}

int main(int argc, char **argv) {
    const double seconds = argc > 1 ? atof(argv[1]) : 2.0;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    const double window_ms = argc > 3 ? atof(argv[3]) : 50.0;
    if (seconds <= 0 || window_ms <= 0 || threads < 0) {
        fprintf(stderr, "usage: vcpu_probe [SECONDS (2)] [THREADS (all allowed CPUs)] [WINDOW_MS (50)]\n");
        return 2;
    }
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        perror("vcpu_probe: sched_getaffinity");
        return 1;
    }
    int cpus[MAX_THREADS], ncpu = 0;
    for (int c = 0; c < CPU_SETSIZE && ncpu < MAX_THREADS; c++)
        if (CPU_ISSET(c, &allowed)) cpus[ncpu++] = c;
    if (threads == 0 || threads > ncpu) threads = ncpu;
    int windows = (int)(seconds * 1000.0 / window_ms);
    if (windows < 1) windows = 1;
    if (windows > MAX_WINDOWS) windows = MAX_WINDOWS;

    __builtin_cpu_init();
    const char *isa = __builtin_cpu_supports("avx512f") ? "avx512"
                      : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? "avx2" : "scalar";
    double (*kernel)(float *) = !strcmp(isa, "avx512") ? fma_avx512 : !strcmp(isa, "avx2") ? fma_avx2 : fma_scalar;

    float *bufs = aligned_alloc(64, (size_t)threads * MEM_FLOATS * sizeof(float));
    if (!bufs) {
        fprintf(stderr, "vcpu_probe: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < (size_t)threads * MEM_FLOATS; i++) bufs[i] = (float)(i % 7) * 1e-3f;
    printf("{\"probe\": \"vcpu\", \"isa\": \"%s\", \"threads\": %d, \"window_ms\": %.0f, \"windows\": %d", isa,
           threads, window_ms, windows);
    float sink = 0;
    /* the FMA units (GFLOP/s), the loads from L2 (GB/s), the loads from memory (GB/s), each for SECONDS */
    static const char *const names[3] = {"fma_gflops", "l2_read_gbs", "mem_read_gbs"};
    static const size_t floats[3] = {0, L2_FLOATS, MEM_FLOATS};
    for (int phase = 0; phase < 3; phase++) {
        probe *p = calloc((size_t)threads, sizeof *p);
        pthread_t *th = calloc((size_t)threads, sizeof *th);
        if (!p || !th ||
            phase_run(p, th, threads, cpus, windows, window_ms, kernel, phase ? bufs : NULL, floats[phase]) != 0) {
            fprintf(stderr, "vcpu_probe: out of memory or no thread\n");
            return 1;
        }
        if (!report(names[phase], p, threads, windows)) return 1;
        for (int t = 0; t < threads; t++) sink += p[t].sink;
        free(p), free(th);
    }
    printf("}\n");
    free(bufs);
    return sink == 12345.0f ? 3 : 0; /* keeps the loops */
}
