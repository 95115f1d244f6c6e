/* bench_conv_blocked.c — workload A's conv2d_1 (batch 128, 13x13, 32 -> 64, 3x3 valid):
 * the register-blocked direct kernel (cpu_conv_blocked.c) against im2col + OpenBLAS (the
 * same backend created with kc_device_opts.cpu_conv_blocked = KC_FALSE), forward and backward-filter timed
 * alternately A, B, A, B, ... in one process; one JSON line per pass with the medians, their
 * ratio and each side's GFLOP/s (multiply-adds x 2 / time).
 *
 *   bench_conv_blocked [REPS]   (default 21; KERAC_CPU_ISA picks the kernels;
 *                               BENCH_CLOCK=cpu times the process's CPU time: with
 *                               OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 the work itself) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "bench_util.h"

static double run(kc_backend *be, const kc_conv2d_desc *d, int pass, float *x, float *w, float *b, float *y,
                  void *ws, size_t wsb) {
    double t0 = bench_now();
    kc_status s = pass == 0 ? be->conv2d_forward(be, d, x, w, b, y, ws, wsb)
                            : be->conv2d_backward_filter(be, d, x, y, w, b, ws, wsb);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv_blocked: %s\n", kc_last_error());
        exit(1);
    }
    return bench_now() - t0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 21;
    if (reps < 1 || reps > 1000) reps = 21;
    (void)bench_clock_from_env(); /* anything but "cpu" keeps the wall clock */
    kc_device_opts o, off;
    kc_backend *be[2] = {NULL, NULL}; /* 0: blocked, 1: im2col */
    if (kc_device_opts_default(&o) != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv_blocked: %s\n", kc_last_error());
        return 1;
    }
    off = o;
    o.cpu_conv_blocked = KC_TRUE;
    off.cpu_conv_blocked = KC_FALSE;
    if (kc_backend_cpu_create_ex(&o, &be[0]) != KC_STATUS_OK || kc_backend_cpu_create_ex(&off, &be[1]) != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv_blocked: %s\n", kc_last_error());
        return 1;
    }
    kc_conv2d_desc d = {.n = 128, .h = 13, .w = 13, .c = 32, .f = 64, .kh = 3, .kw = 3, .sh = 1, .sw = 1,
                        .dh = 1, .dw = 1, .oh = 11, .ow = 11, .relu = 1};
    size_t nx = (size_t)d.n * d.h * d.w * d.c, ny = (size_t)d.n * d.oh * d.ow * d.f, nw = (size_t)9 * d.c * d.f;
    size_t wsb[2] = {be[0]->conv2d_workspace(be[0], &d), be[1]->conv2d_workspace(be[1], &d)};
    float *x = calloc(nx, 4), *w = calloc(nw, 4), *y = calloc(ny, 4), *b = calloc((size_t)d.f, 4);
    void *ws[2] = {malloc(wsb[0] + 1), malloc(wsb[1] + 1)};
    double *t[2] = {malloc(sizeof(double) * (size_t)reps), malloc(sizeof(double) * (size_t)reps)};
    if (!x || !w || !y || !b || !ws[0] || !ws[1] || !t[0] || !t[1]) return 1;
    for (size_t i = 0; i < nx; i++) x[i] = (float)(i % 13) * 0.1f - 0.6f;
    for (size_t i = 0; i < nw; i++) w[i] = (float)(i % 7) * 0.05f - 0.15f;
    const double flop = 2.0 * (double)ny * 9.0 * d.c;
    static const char *const pass_name[2] = {"forward", "backward_filter"};
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < 2; k++) run(be[k], &d, pass, x, w, b, y, ws[k], wsb[k]); /* warm-up */
        for (int r = 0; r < reps; r++)
            for (int k = 0; k < 2; k++) t[k][r] = run(be[k], &d, pass, x, w, b, y, ws[k], wsb[k]);
        double mb = bench_median(t[0], reps), mi = bench_median(t[1], reps);
        printf("{\"shape\":\"A conv2d_1 (128x13x13, 32->64, 3x3 valid)\",\"pass\":\"%s\",\"isa\":\"%s\","
               "\"blocked_ms\":%.3f,\"im2col_ms\":%.3f,\"speedup\":%.3f,\"blocked_gflops\":%.1f,"
               "\"im2col_gflops\":%.1f,\"reps\":%d,\"clock\":\"%s\"}\n",
               pass_name[pass], kc_backend_cpu_isa(be[0]), 1e3 * mb, 1e3 * mi, mi / mb, flop / mb * 1e-9,
               flop / mi * 1e-9, reps, bench_clock_id == CLOCK_MONOTONIC ? "wall" : "cpu");
    }
    free(x), free(w), free(y), free(b), free(ws[0]), free(ws[1]), free(t[0]), free(t[1]);
    kc_backend_destroy(be[0]);
    kc_backend_destroy(be[1]);
    return 0;
}
