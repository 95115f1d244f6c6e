/* bench_conv.c — the CPU backend's convolution kernels shape by shape, one against the
 * others in one process: Winograd F(2x2,3x3), F(3x3,3x3), F(4x4,3x3) and im2col + GEMM (the
 * same backend created with cpu_winograd_tile 2, 3, 4 and cpu_winograd off), each pass
 * (forward, backward-data, backward-filter) timed alternately 2, 3, 4, im2col, 2, ... and
 * reported as medians and their ratios (speedup: im2col / F(2x2), speedup3: im2col /
 * F(3x3), speedup4: im2col / F(4x4), f4_vs_f2: F(2x2) / F(4x4)), with the multiply-add rate
 * of the im2col path as GFLOP/s (and each Winograd's in direct-convolution FLOP, its
 * "effective" rate); "chosen" names the kernel the default backend picks for the shape.
 * Alternating in one process keeps the ratios meaningful on a shared, loaded machine, where
 * absolute times are noise. Output: one JSON line per shape and pass.
 *
 *   bench_conv [REPS]          (default 15 alternations; KERAC_CPU_ISA picks the kernels,
 *                              BENCH_CLOCK=cpu times CPU time instead of the wall clock,
 *                              BENCH_SHAPES=TEXT only the shapes whose name holds TEXT)
 * Winograd runs with cpu_winograd = KC_TRUE: at any channel count, where the default keeps
 * im2col below KC_CPU_WINOGRAD_MIN_C / KC_CPU_WINOGRAD4_MIN_C channels.
 *
 * Shapes: the 3x3 stride-1 convolutions of workloads A and B (bench/README.md) and of
 * ResNet50 / MobileNetV2 at 96x96 (batch 32). Build: cmake --build build --target bench_conv */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "bench_util.h"

enum { NB = 4 }; /* the kernels compared: F(2x2), F(3x3), F(4x4), im2col */

typedef struct shape {
    const char *name;
    int n, h, w, c, f, pad;
} shape;

static const shape k_shapes[] = {
    {"A conv2d_1 (13x13, 32->64, valid)", 128, 13, 13, 32, 64, 0},
    {"B conv 1.2 (32x32, 32->32, same)", 64, 32, 32, 32, 32, 1},
    {"B conv 2.1 (16x16, 32->64, same)", 64, 16, 16, 32, 64, 1},
    {"B conv 2.2 (16x16, 64->64, same)", 64, 16, 16, 64, 64, 1},
    {"B conv 3.1 (8x8, 64->128, same)", 64, 8, 8, 64, 128, 1},
    {"B conv 3.2 (8x8, 128->128, same)", 64, 8, 8, 128, 128, 1},
    {"B block1 (32x32, 64->64, same)", 64, 32, 32, 64, 64, 1},
    {"B block2 (16x16, 128->128, same)", 64, 16, 16, 128, 128, 1},
    {"B block3 (8x8, 256->256, same)", 64, 8, 8, 256, 256, 1},
    {"ResNet50 stage2 (24x24, 64->64)", 32, 24, 24, 64, 64, 1},
    {"ResNet50 stage3 (12x12, 128->128)", 32, 12, 12, 128, 128, 1},
    {"ResNet50 stage4 (6x6, 256->256)", 32, 6, 6, 256, 256, 1},
    {"ResNet50 stage5 (3x3, 512->512)", 32, 3, 3, 512, 512, 1},
    {"ResNet50 stage5 at 160x160 (5x5, 512->512)", 32, 5, 5, 512, 512, 1},
    {"ResNet50 stage5 at 224x224 (7x7, 512->512)", 32, 7, 7, 512, 512, 1},
    {"ResNet50 stage4 at 224x224 (14x14, 256->256)", 32, 14, 14, 256, 256, 1},
    {"ResNet50 stage4 at 160x160 (10x10, 256->256)", 32, 10, 10, 256, 256, 1},
    {"small (16x16, 16->16, same)", 64, 16, 16, 16, 16, 1},
    {"batch 2 (8x8, 64->64)", 2, 8, 8, 64, 64, 1},
    {"batch 2 (8x8, 256->256)", 2, 8, 8, 256, 256, 1},
    {"batch 8 (6x6, 256->256)", 8, 6, 6, 256, 256, 1},
    {"batch 8 (3x3, 512->512)", 8, 3, 3, 512, 512, 1},
    {"batch 128 (3x3, 512->512)", 128, 3, 3, 512, 512, 1},
};

/* one pass of one kernel: 0 forward, 1 backward-data, 2 backward-filter; seconds */
static double run(kc_backend *be, const kc_conv2d_desc *d, int pass, float *x, float *w, float *y, void *ws,
                  size_t wsb) {
    double t0 = bench_now();
    kc_status s = pass == 0   ? be->conv2d_forward(be, d, x, w, NULL, y, ws, wsb)
                  : pass == 1 ? be->conv2d_backward_data(be, d, y, w, x, ws, wsb)
                              : be->conv2d_backward_filter(be, d, x, y, w, NULL, ws, wsb);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv: %s\n", kc_last_error());
        exit(1);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 15;
    (void)bench_clock_from_env(); /* anything but "cpu" keeps the wall clock */
    if (reps < 1) reps = 1;
    kc_device_opts o;
    if (kc_device_opts_default(&o) != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv: %s\n", kc_last_error());
        return 1;
    }
    kc_device_opts opt[NB + 1] = {o, o, o, o, o}; /* the last: the default, to name its choice */
    for (int b = 0; b < 3; b++) opt[b].cpu_winograd = KC_TRUE, opt[b].cpu_winograd_tile = 2 + b;
    opt[3].cpu_winograd = KC_FALSE;
    kc_backend *be[NB + 1] = {NULL}; /* 0: F(2x2), 1: F(3x3), 2: F(4x4), 3: im2col, 4: default */
    for (int b = 0; b <= NB; b++)
        if (kc_backend_cpu_create_ex(&opt[b], &be[b]) != KC_STATUS_OK) {
            fprintf(stderr, "bench_conv: %s\n", kc_last_error());
            return 1;
        }
    static const char *const pass_name[3] = {"forward", "backward_data", "backward_filter"};
    for (size_t k = 0; k < sizeof k_shapes / sizeof k_shapes[0]; k++) {
        const shape *s = &k_shapes[k];
        if (getenv("BENCH_SHAPES") && !strstr(s->name, getenv("BENCH_SHAPES"))) continue;
        kc_conv2d_desc d = {.n = s->n, .h = s->h, .w = s->w, .c = s->c, .f = s->f, .kh = 3, .kw = 3, .sh = 1,
                            .sw = 1, .dh = 1, .dw = 1, .pad_top = s->pad, .pad_left = s->pad,
                            .oh = s->h + 2 * s->pad - 2, .ow = s->w + 2 * s->pad - 2};
        size_t nx = (size_t)d.n * d.h * d.w * d.c, ny = (size_t)d.n * d.oh * d.ow * d.f, nw = (size_t)9 * d.c * d.f;
        size_t wsb[NB];
        void *ws[NB];
        for (int b = 0; b < NB; b++) {
            wsb[b] = be[b]->conv2d_workspace(be[b], &d);
            if (!(ws[b] = malloc(wsb[b] + 1))) return 1;
        }
        float *x = calloc(nx, 4), *w = calloc(nw, 4), *y = calloc(ny, 4);
        if (!x || !w || !y) return 1;
        for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
        for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 7) * 0.05f - 0.15f;
        const double flop = 2.0 * (double)ny * 9.0 * d.c;
        char chosen[256] = "?"; /* the default backend's placement label */
        if (be[NB]->describe(be[NB], KC_OP_CONV2D, &d, be[NB]->conv2d_workspace(be[NB], &d), chosen, sizeof chosen) !=
            KC_STATUS_OK)
            snprintf(chosen, sizeof chosen, "?");
        for (int pass = 0; pass < 3; pass++) {
            double *t[NB], med[NB];
            for (int b = 0; b < NB; b++) {
                if (!(t[b] = malloc(sizeof(double) * (size_t)reps))) return 1;
                run(be[b], &d, pass, x, w, y, ws[b], wsb[b]); /* warm-up */
            }
            for (int r = 0; r < reps; r++)
                for (int b = 0; b < NB; b++) t[b][r] = run(be[b], &d, pass, x, w, y, ws[b], wsb[b]);
            for (int b = 0; b < NB; b++) med[b] = bench_median(t[b], reps);
            printf("{\"shape\":\"%s\",\"pass\":\"%s\",\"isa\":\"%s\",\"chosen\":\"%s\",\"winograd_ms\":%.3f,"
                   "\"winograd3_ms\":%.3f,\"winograd4_ms\":%.3f,\"im2col_ms\":%.3f,\"speedup\":%.3f,\"speedup3\":%.3f,"
                   "\"speedup4\":%.3f,\"f4_vs_f2\":%.3f,\"im2col_gflops\":%.1f,\"winograd_effective_gflops\":%.1f,"
                   "\"winograd3_effective_gflops\":%.1f,\"winograd4_effective_gflops\":%.1f,\"reps\":%d,"
                   "\"clock\":\"%s\"}\n",
                   s->name, pass_name[pass], kc_backend_cpu_isa(be[0]), chosen,
                   1e3 * med[0], 1e3 * med[1], 1e3 * med[2], 1e3 * med[3], med[3] / med[0], med[3] / med[1],
                   med[3] / med[2], med[0] / med[2], flop / med[3] * 1e-9, flop / med[0] * 1e-9, flop / med[1] * 1e-9,
                   flop / med[2] * 1e-9, reps, bench_clock_id == CLOCK_MONOTONIC ? "wall" : "cpu");
            fflush(stdout);
            for (int b = 0; b < NB; b++) free(t[b]);
        }
        free(x), free(w), free(y);
        for (int b = 0; b < NB; b++) free(ws[b]);
    }
    for (int b = 0; b <= NB; b++) kc_backend_destroy(be[b]);
    return 0;
}
