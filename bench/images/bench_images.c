/* bench_images.c — kerac's decode + resize throughput on a folder of JPEG photos:
 * kc_dataset_open_images to 224 x 224 RGB with W decode threads (the whole folder into
 * memory, as training does). Prints one JSON line like bench/images/torch_images.py.
 *     bench_images DIR THREADS [dct]   (dct: TurboJPEG's DCT-domain downscaling) */
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
    o.dct_scaling = argc > 3 && strcmp(argv[3], "dct") == 0;
    double t0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    kc_dataset *d = NULL;
    if (kc_dataset_open_images(argv[1], &o, &d)) {
        fprintf(stderr, "bench_images: %s\n", kc_last_error());
        return 2;
    }
    double t = seconds(CLOCK_MONOTONIC) - t0, c = seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    int64_t n = kc_dataset_size(d);
    printf("{\"images\": %lld, \"workers\": %d, \"dct_scaling\": %s, \"seconds\": %.3f, \"cpu_seconds\": %.3f, "
           "\"images_per_second\": %.1f, \"images_per_cpu_second\": %.1f}\n",
           (long long)n, o.threads, o.dct_scaling ? "true" : "false", t, c, (double)n / t, (double)n / c);
    kc_dataset_destroy(d);
    return 0;
}
