/* bench_images.c — kerac's decode + resize throughput on a folder of JPEG photos:
 * kc_dataset_open_images to 224 x 224 RGB with W decode threads. Prints one JSON line like
 * bench/images/torch_images.py.
 *     bench_images DIR THREADS [dct|stream]
 * default: the whole folder decoded once into memory (--cache); dct: the same with
 * TurboJPEG's DCT-domain downscaling; stream: no cache (--no-cache), every batch of 64 read
 * as the loader reads it, decoded by the pool then (what DataLoader's workers do). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kerac.h"

static double seconds(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_images DIR THREADS [dct]\n");
        return 1;
    }
    kc_image_opts o = {.height = 224, .width = 224, .threads = atoi(argv[2]), .no_shuffle = 1};
    const char *mode = argc > 3 ? argv[3] : "memory";
    o.dct_scaling = strcmp(mode, "dct") == 0;
    bool stream = strcmp(mode, "stream") == 0;
    o.cache = stream ? KC_IMAGE_CACHE_NONE : KC_IMAGE_CACHE_MEMORY;
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    kc_dataset *d = NULL;
    kc_status s = kc_dataset_open_images(argv[1], &o, &d);
    int64_t n = s ? 0 : kc_dataset_size(d);
    float *x = stream ? malloc((size_t)64 * 224 * 224 * 3 * sizeof(float)) : NULL;
    for (int64_t i = 0; stream && !s && i < n; i += 64) s = kc_dataset_read(d, i, n - i < 64 ? n - i : 64, x, NULL);
    if (s) {
        fprintf(stderr, "bench_images: %s\n", kc_last_error());
        return 2;
    }
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    printf("{\"images\": %lld, \"workers\": %d, \"mode\": \"%s\", \"seconds\": %.3f, \"cpu_seconds\": %.3f, "
           "\"images_per_second\": %.1f, \"images_per_cpu_second\": %.1f}\n",
           (long long)n, o.threads, mode, t, c, (double)n / t, (double)n / c);
    free(x);
    kc_dataset_destroy(d);
    return 0;
}
