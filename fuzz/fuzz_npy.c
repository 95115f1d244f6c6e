/* fuzz_npy.c — libFuzzer target: the NumPy .npy reader through
 * kc_dataset_open("npy:X.npy,Y.npy"). The input is the images file and the labels file
 * separated by KC_FUZZ_SEP. A dataset that opens is read: every label below num_classes,
 * uint8 pixels in [0, 1] (float32 images are passed through as stored). */
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_setup();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_part parts[2];
    fuzz_split(data, size, parts, 2);
    const char *xp = fuzz_path("x.npy"), *yp = fuzz_path("y.npy");
    fuzz_write(xp, parts[0].data, parts[0].len);
    fuzz_write(yp, parts[1].data, parts[1].len);
    char spec[900];
    snprintf(spec, sizeof spec, "npy:%s,%s", xp, yp);
    kc_dataset *d = NULL;
    kc_status s = kc_dataset_open(spec, &d);
    fuzz_check_error(s);
    if (s == KC_STATUS_OK) {
        int64_t n = kc_dataset_size(d);
        kc_shape sh = kc_dataset_shape(d);
        int64_t e = 1;
        for (int i = 0; i < sh.rank; i++) e *= sh.dim[i];
        int64_t take = n < 64 ? n : 64;
        if (take * e > (1 << 22)) take = (1 << 22) / e > 0 ? (1 << 22) / e : 1; /* bounded memory */
        float *x = malloc((size_t)(take * e) * sizeof *x + 1);
        int32_t *y = malloc((size_t)take * sizeof *y + 1);
        if (!x || !y) abort();
        if (kc_dataset_read(d, n - take, take, x, y) != KC_STATUS_OK) {
            fprintf(stderr, "an opened dataset cannot be read: %s\n", kc_last_error());
            abort();
        }
        for (int64_t i = 0; i < take; i++)
            if (y[i] < 0 || y[i] >= kc_dataset_num_classes(d)) abort();
        free(x);
        free(y);
    }
    kc_dataset_destroy(d);
    return 0;
}
