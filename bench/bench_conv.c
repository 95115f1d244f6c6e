/* bench_conv.c — the CPU backend's convolution kernels shape by shape, one against the
 * other in one process: Winograd F(2x2,3x3) against im2col + GEMM (the same backend
 * created with cpu_winograd off), each pass (forward, backward-data, backward-filter) timed
 * alternately A, B, A, B, ... and reported as medians and their ratio, with the multiply-add
 * rate of the im2col path as GFLOP/s (and Winograd's in direct-convolution FLOP, its "effective" rate). Alternating in one
 * process keeps the ratio meaningful on a shared, loaded machine, where absolute times are
 * noise. Output: one JSON line per shape and pass.
 *
 *   bench_conv [REPS]          (default 15 alternations; KERAC_CPU_ISA picks the kernels,
 *                              BENCH_CLOCK=cpu times CPU time instead of the wall clock)
 *
 * Shapes: the 3x3 stride-1 convolutions of workloads A and B (bench/README.md) and of
 * ResNet50 / MobileNetV2 at 96x96 (batch 32). Build: cmake --build build --target bench_conv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"

typedef struct shape {
    const char *name;
    int n, h, w, c, f, pad;
} shape;

static const shape k_shapes[] = {
    {"A conv2d_1 (13x13, 32->64, valid)", 128, 13, 13, 32, 64, 0},
    {"B block1 (32x32, 64->64, same)", 64, 32, 32, 64, 64, 1},
    {"B block2 (16x16, 128->128, same)", 64, 16, 16, 128, 128, 1},
    {"B block3 (8x8, 256->256, same)", 64, 8, 8, 256, 256, 1},
    {"ResNet50 stage2 (24x24, 64->64)", 32, 24, 24, 64, 64, 1},
    {"ResNet50 stage4 (6x6, 256->256)", 32, 6, 6, 256, 256, 1},
    {"small (16x16, 16->16, same)", 64, 16, 16, 16, 16, 1},
};

/* With OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1, BENCH_CLOCK=cpu times the process's CPU
 * time: the work itself, whatever else the machine runs (the ratio that survives a loaded
 * machine); the default is the wall clock. */
static clockid_t g_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(g_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* one pass of one kernel: 0 forward, 1 backward-data, 2 backward-filter; seconds */
static double run(kc_backend *be, const kc_conv2d_desc *d, int pass, float *x, float *w, float *y, void *ws,
                  size_t wsb) {
    double t0 = now();
    kc_status s = pass == 0   ? be->conv2d_forward(be, d, x, w, NULL, y, ws, wsb)
                  : pass == 1 ? be->conv2d_backward_data(be, d, y, w, x, ws, wsb)
                              : be->conv2d_backward_filter(be, d, x, y, w, NULL, ws, wsb);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv: %s\n", kc_last_error());
        exit(1);
    }
    return now() - t0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    const char *clk = getenv("BENCH_CLOCK");
    if (clk && !strcmp(clk, "cpu")) g_clock = CLOCK_PROCESS_CPUTIME_ID;
    if (reps < 1) reps = 1;
    kc_device_opts o;
    if (kc_device_opts_default(&o) != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv: %s\n", kc_last_error());
        return 1;
    }
    kc_device_opts off = o;
    o.cpu_winograd = KC_TRUE;
    off.cpu_winograd = KC_FALSE;
    kc_backend *be[2] = {NULL, NULL}; /* 0: winograd, 1: im2col */
    if (kc_backend_cpu_create_ex(&o, &be[0]) != KC_STATUS_OK || kc_backend_cpu_create_ex(&off, &be[1]) != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv: %s\n", kc_last_error());
        return 1;
    }
    static const char *const pass_name[3] = {"forward", "backward_data", "backward_filter"};
    for (size_t k = 0; k < sizeof k_shapes / sizeof k_shapes[0]; k++) {
        const shape *s = &k_shapes[k];
        kc_conv2d_desc d = {.n = s->n, .h = s->h, .w = s->w, .c = s->c, .f = s->f, .kh = 3, .kw = 3, .sh = 1,
                            .sw = 1, .dh = 1, .dw = 1, .pad_top = s->pad, .pad_left = s->pad,
                            .oh = s->h + 2 * s->pad - 2, .ow = s->w + 2 * s->pad - 2};
        size_t nx = (size_t)d.n * d.h * d.w * d.c, ny = (size_t)d.n * d.oh * d.ow * d.f, nw = (size_t)9 * d.c * d.f;
        size_t wsb[2] = {be[0]->conv2d_workspace(be[0], &d), be[1]->conv2d_workspace(be[1], &d)};
        float *x = calloc(nx, 4), *w = calloc(nw, 4), *y = calloc(ny, 4);
        void *ws[2] = {malloc(wsb[0] + 1), malloc(wsb[1] + 1)};
        if (!x || !w || !y || !ws[0] || !ws[1]) return 1;
        for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
        for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 7) * 0.05f - 0.15f;
        const double flop = 2.0 * (double)ny * 9.0 * d.c;
        for (int pass = 0; pass < 3; pass++) {
            double *t[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
            for (int b = 0; b < 2; b++) run(be[b], &d, pass, x, w, y, ws[b], wsb[b]); /* warm-up */
            for (int r = 0; r < reps; r++)
                for (int b = 0; b < 2; b++) t[b][r] = run(be[b], &d, pass, x, w, y, ws[b], wsb[b]);
            double mw = median(t[0], reps), mi = median(t[1], reps);
            printf("{\"shape\":\"%s\",\"pass\":\"%s\",\"isa\":\"%s\",\"winograd_ms\":%.3f,\"im2col_ms\":%.3f,"
                   "\"speedup\":%.3f,\"im2col_gflops\":%.1f,\"winograd_effective_gflops\":%.1f,\"reps\":%d,\"clock\":\"%s\"}\n",
                   s->name, pass_name[pass], kc_backend_cpu_isa(be[0]), 1e3 * mw, 1e3 * mi, mi / mw, flop / mi * 1e-9,
                   flop / mw * 1e-9, reps, g_clock == CLOCK_MONOTONIC ? "wall" : "cpu");
            fflush(stdout);
            free(t[0]), free(t[1]);
        }
        free(x), free(w), free(y), free(ws[0]), free(ws[1]);
    }
    kc_backend_destroy(be[0]);
    kc_backend_destroy(be[1]);
    return 0;
}
