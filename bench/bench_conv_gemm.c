/* bench_conv_gemm.c — ResNet50's GEMM-shaped convolutions at 96x96 (batch 32; a few of MobileNetV2's): each pass of
 * the CPU backend's conv2d (whatever kernel it picks) against one plain SGEMM of the same
 * sizes on contiguous matrices (the backend's gemm: OpenBLAS), timed alternately conv, gemm,
 * conv, gemm, ... in one process. One JSON line per shape and pass: the medians, each
 * side's GFLOP/s (2 x multiply-adds of the convolution / time) and their ratio
 * (of_gemm: the fraction of the SGEMM rate the convolution pass reaches). The forward pass
 * adds a bias (ResNet50's convolutions have one), the GEMM does not.
 *
 *   bench_conv_gemm [REPS]     (default 9; KERAC_CPU_ISA picks the kernels, BENCH_CLOCK=cpu
 *                              times the process's CPU time, BENCH_SHAPES=TEXT only the
 *                              shapes whose name holds TEXT)
 * BENCH_SPLIT_AB=1: the "gemm" side is the same convolution pass with the backend's
 * cpu_gemm_split at 0 (OpenBLAS's own threading instead of its split of big GEMMs across the
 * threads; on for the conv side, whatever KERAC_CPU_GEMM_SPLIT says),
 * so of_gemm is the split's speed-up, measured alternately in one process.
 * BENCH_SMALL_AB=1: likewise with the backend's cpu_gemm_small at 0 on the "gemm" side (every
 * GEMM to OpenBLAS instead of kerac's own tiles for a small dimension, cpu_gemm_small.c; on for
 * the conv side), so of_gemm is the tiles' speed-up.
 * BENCH_COLD=1: before each timed call, 64 MiB of other memory are read through, so the
 * operands come from memory as in a training step (a backward pass reads the activations its
 * forward pass wrote long before); untimed.
 *
 * The GEMM of each pass, rows = N*OH*OW, K = KH*KW*C:
 *   forward (rows, K) x (K, F); backward-data (rows, F) x (F, K); backward-filter (K, rows) x (rows, F).
 * Build: cmake --build build --target bench_conv_gemm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"
#include "kerac_backend.h"
#include "bench_util.h"

typedef struct shape {
    const char *name;
    int n, h, w, c, f, k, s, pad; /* input N, H, W, C; F filters k x k, stride s, padding before */
} shape;

static const shape k_shapes[] = {
    {"stem 7x7/2 (102x102 padded, 3->64)", 32, 102, 102, 3, 64, 7, 2, 0},
    {"1x1 stage2 (24x24, 64->64)", 32, 24, 24, 64, 64, 1, 1, 0},
    {"1x1 stage2 (24x24, 64->256)", 32, 24, 24, 64, 256, 1, 1, 0},
    {"1x1 stage2 (24x24, 256->64)", 32, 24, 24, 256, 64, 1, 1, 0},
    {"1x1/2 stage3 (24x24, 256->128)", 32, 24, 24, 256, 128, 1, 2, 0},
    {"1x1/2 stage3 shortcut (24x24, 256->512)", 32, 24, 24, 256, 512, 1, 2, 0},
    {"1x1 stage3 (12x12, 512->128)", 32, 12, 12, 512, 128, 1, 1, 0},
    {"1x1 stage4 (6x6, 1024->256)", 32, 6, 6, 1024, 256, 1, 1, 0},
    {"1x1/2 stage4 shortcut (12x12, 512->1024)", 32, 12, 12, 512, 1024, 1, 2, 0},
    {"1x1 stage5 (3x3, 2048->512)", 32, 3, 3, 2048, 512, 1, 1, 0},
    {"1x1/2 stage5 shortcut (6x6, 1024->2048)", 32, 6, 6, 1024, 2048, 1, 2, 0},
    /* the 3x3 maps of stage 5 go to im2col (Winograd saves too little there): rows = 288 */
    {"3x3 stage5 (3x3, 512->512)", 32, 3, 3, 512, 512, 3, 1, 1},
    /* MobileNetV2's 1x1 convolutions at 96x96 go through the same GEMM paths */
    {"MobileNetV2 1x1 (48x48, 32->16)", 32, 48, 48, 32, 16, 1, 1, 0},
    {"MobileNetV2 1x1 (48x48, 16->96)", 32, 48, 48, 16, 96, 1, 1, 0},
    {"MobileNetV2 1x1 (24x24, 96->24)", 32, 24, 24, 96, 24, 1, 1, 0},
    {"MobileNetV2 1x1 (24x24, 24->144)", 32, 24, 24, 24, 144, 1, 1, 0},
    {"MobileNetV2 1x1 (24x24, 144->24)", 32, 24, 24, 144, 24, 1, 1, 0},
    {"MobileNetV2 1x1 (6x6, 576->96)", 32, 6, 6, 576, 96, 1, 1, 0},
    {"MobileNetV2 1x1 (12x12, 192->32)", 32, 12, 12, 192, 32, 1, 1, 0},
    {"MobileNetV2 1x1 (6x6, 64->384)", 32, 6, 6, 64, 384, 1, 1, 0},
    {"MobileNetV2 1x1 (3x3, 960->160)", 32, 3, 3, 960, 160, 1, 1, 0},
    {"MobileNetV2 1x1 (3x3, 320->1280)", 32, 3, 3, 320, 1280, 1, 1, 0},
};

static void check(kc_status s) {
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "bench_conv_gemm: %s\n", kc_last_error());
        exit(1);
    }
}

/* one pass: 0 forward, 1 backward-data, 2 backward-filter; seconds */
static double conv_pass(kc_backend *be, const kc_conv2d_desc *d, int pass, float *x, float *w, const float *b,
                        float *y, void *ws, size_t wsb) {
    double t0 = bench_now();
    check(pass == 0   ? be->conv2d_forward(be, d, x, w, b, y, ws, wsb)
          : pass == 1 ? be->conv2d_backward_data(be, d, y, w, x, ws, wsb)
                      : be->conv2d_backward_filter(be, d, x, y, w, NULL, ws, wsb));
    return bench_now() - t0;
}

/* the same pass as one GEMM on contiguous matrices a (rows, K), b (K, F), c (rows, F) */
static double gemm_pass(kc_backend *be, int pass, int rows, int k, int f, float *a, float *b, float *c) {
    double t0 = bench_now();
    check(pass == 0   ? be->gemm(be, 0, 0, rows, f, k, 1.0f, a, k, b, f, 0.0f, c, f)
          : pass == 1 ? be->gemm(be, 0, 1, rows, k, f, 1.0f, c, f, b, f, 0.0f, a, k)
                      : be->gemm(be, 1, 0, k, f, rows, 1.0f, a, k, c, f, 0.0f, b, f));
    return bench_now() - t0;
}

/* BENCH_COLD: reads a buffer larger than the caches, pushing the operands out of them */
#define EVICT_BYTES ((size_t)64 << 20)
static unsigned char *g_evict;
static volatile unsigned g_evict_sum;
static void evict(void) {
    if (!g_evict) return;
    unsigned s = 0;
    for (size_t i = 0; i < EVICT_BYTES; i += 64) s += g_evict[i];
    g_evict_sum = s;
}

static float *filled(size_t n, int mod) {
    float *p = malloc(n * sizeof(float) + 4);
    if (!p) exit(1);
    for (size_t i = 0; i < n; i++) p[i] = (float)(i % (size_t)mod) * 0.05f - 0.3f;
    return p;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 9;
    if (reps < 1 || reps > 1000) reps = 9;
    (void)bench_clock_from_env(); /* anything but "cpu" keeps the wall clock */
    const int split_ab = getenv("BENCH_SPLIT_AB") && strcmp(getenv("BENCH_SPLIT_AB"), "1") == 0;
    const int small_ab = getenv("BENCH_SMALL_AB") && strcmp(getenv("BENCH_SMALL_AB"), "1") == 0;
    const int cold = getenv("BENCH_COLD") && strcmp(getenv("BENCH_COLD"), "1") == 0;
    if (cold) {
        g_evict = malloc(EVICT_BYTES);
        if (!g_evict) return 1;
        memset(g_evict, 1, EVICT_BYTES);
    }
    kc_backend *be = NULL;
    check(kc_backend_cpu_create(&be));
    if (split_ab) be->cpu_gemm_split = 1;
    if (small_ab) be->cpu_gemm_small = 1;
    static const char *const pass_name[3] = {"forward", "backward_data", "backward_filter"};
    for (size_t i = 0; i < sizeof k_shapes / sizeof k_shapes[0]; i++) {
        const shape *s = &k_shapes[i];
        if (getenv("BENCH_SHAPES") && !strstr(s->name, getenv("BENCH_SHAPES"))) continue;
        kc_conv2d_desc d = {.n = s->n, .h = s->h, .w = s->w, .c = s->c, .f = s->f, .kh = s->k, .kw = s->k,
                            .sh = s->s, .sw = s->s, .dh = 1, .dw = 1, .pad_top = s->pad, .pad_left = s->pad};
        d.oh = (s->h + 2 * s->pad - s->k) / s->s + 1;
        d.ow = (s->w + 2 * s->pad - s->k) / s->s + 1;
        const int rows = d.n * d.oh * d.ow, kdim = s->k * s->k * s->c;
        char desc[256] = "";
        size_t wsb = be->conv2d_workspace(be, &d);
        void *ws = malloc(wsb + 1);
        if (!ws) return 1;
        if (be->describe) (void)be->describe(be, KC_OP_CONV2D, &d, wsb, desc, sizeof desc);
        float *x = filled((size_t)d.n * d.h * d.w * d.c, 13), *w = filled((size_t)kdim * d.f, 7);
        float *y = filled((size_t)rows * d.f, 11), *bias = filled((size_t)d.f, 5);
        float *a = filled((size_t)rows * kdim, 13), *b = filled((size_t)kdim * d.f, 7), *c = filled((size_t)rows * d.f, 11);
        const double flop = 2.0 * (double)rows * kdim * d.f;
        double *tc = malloc(sizeof(double) * (size_t)reps), *tg = malloc(sizeof(double) * (size_t)reps);
        if (!tc || !tg) return 1;
        for (int pass = 0; pass < 3; pass++) {
            conv_pass(be, &d, pass, x, w, bias, y, ws, wsb); /* warm-up */
            gemm_pass(be, pass, rows, kdim, d.f, a, b, c);
            for (int r = 0; r < reps; r++) {
                evict();
                tc[r] = conv_pass(be, &d, pass, x, w, bias, y, ws, wsb);
                evict();
                if (split_ab || small_ab) {
                    int *sw = split_ab ? &be->cpu_gemm_split : &be->cpu_gemm_small;
                    *sw = 0;
                    tg[r] = conv_pass(be, &d, pass, x, w, bias, y, ws, wsb);
                    *sw = 1;
                } else {
                    tg[r] = gemm_pass(be, pass, rows, kdim, d.f, a, b, c);
                }
            }
            const double mc = bench_median(tc, reps), mg = bench_median(tg, reps);
            printf("{\"shape\":\"%s\",\"pass\":\"%s\",\"isa\":\"%s\",\"conv_ms\":%.3f,\"gemm_ms\":%.3f,"
                   "\"conv_gflops\":%.1f,\"gemm_gflops\":%.1f,\"of_gemm\":%.3f,\"kernel\":\"%s\",\"reps\":%d,"
                   "\"clock\":\"%s\",\"split_ab\":%d,\"small_ab\":%d,\"cold\":%d}\n",
                   s->name, pass_name[pass], kc_backend_cpu_isa(be), 1e3 * mc, 1e3 * mg, flop / mc * 1e-9,
                   flop / mg * 1e-9, mg / mc, desc, reps, bench_clock_id == CLOCK_MONOTONIC ? "wall" : "cpu", split_ab, small_ab,
                   cold);
            fflush(stdout);
        }
        free(tc), free(tg), free(x), free(w), free(y), free(bias), free(a), free(b), free(c), free(ws);
    }
    kc_backend_destroy(be);
    free(g_evict);
    return 0;
}
