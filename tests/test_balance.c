/* test_balance.c — the CPU kernels hand out work in chunks as threads come free (cpu.h,
 * KC_CPU_BALANCED; the GEMM split's slices; Winograd's chunks and its filter-gradient
 * groups), and the result must not depend on which thread ran which chunk.
 *
 * Each case runs this program again (/proc/self/exe --child MODE) with KERAC_NUM_THREADS=3
 * on this 2-core machine, so that the threads come free in a different order from run to
 * run, and with KERAC_CPU_BALANCE set or not (read once per process). The child builds a
 * small VGG-style model whose layers take those paths (3x3 convolutions from 32 channels on
 * Winograd F(4x4), a 1x1 convolution over 18,432 rows through the GEMM split, batch norm,
 * pooling, softmax), then either predicts only ("predict") or trains 6 steps and predicts
 * ("train"), and prints an FNV-1a hash of the predictions and of every weight.
 *   - trained three times with balancing: the same bits each time (no sum depends on the
 *     thread that computed it);
 *   - predictions with and without balancing: the same bits (a forward chunk's arithmetic
 *     does not depend on the chunking). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <inttypes.h>

#include "child_run.h"
#include "kerac.h"

enum { N = 64, H = 24, C = 3, BATCH = 32 };

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static kc_model *model(void) {
    kc_model *m = NULL;
    if (kc_sequential("balance", &m) != KC_STATUS_OK) return NULL;
    kc_add(m, KC_INPUT(.shape = {H, H, C}));
    kc_add(m, KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .padding = "same"));
    kc_add(m, KC_BATCHNORM());
    kc_add(m, KC_ACTIVATION(.activation = "relu"));
    kc_add(m, KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .padding = "same")); /* Winograd F(4x4) */
    kc_add(m, KC_BATCHNORM());
    kc_add(m, KC_ACTIVATION(.activation = "relu"));
    kc_add(m, KC_CONV2D(.filters = 32, .kernel_size = {1, 1})); /* 18,432 x 32 x 32: the GEMM split */
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_CONV2D(.filters = 64, .kernel_size = {3, 3}, .padding = "same", .activation = "relu"));
    kc_add(m, KC_GLOBALAVGPOOL2D());
    kc_add(m, KC_DENSE(.units = 10, .activation = "softmax"));
    return m;
}

static int child(const char *mode) {
    const int train = !strcmp(mode, "train");
    float *x = malloc(sizeof(float) * N * H * H * C), *y = malloc(sizeof(float) * N * 10);
    int32_t *lab = malloc(sizeof(int32_t) * N);
    kc_model *m = model();
    kc_dataset *d = NULL;
    int ok = x && y && lab && m;
    for (int i = 0; ok && i < N * H * H * C; i++) x[i] = (float)((i * 37) % 101) / 50.5f - 1.0f;
    for (int i = 0; ok && i < N; i++) lab[i] = (i * 7) % 10;
    ok = ok && kc_model_set_seed(m, 11) == KC_STATUS_OK &&
         kc_compile(m, &(kc_compile_opts){.optimizer = KC_SGD(.learning_rate = 0.05, .momentum = 0.9)}) ==
             KC_STATUS_OK &&
         kc_dataset_from_memory(x, lab, N, (kc_shape){3, {H, H, C}}, 10, &d) == KC_STATUS_OK;
    if (ok && train)
        ok = kc_fit(m, d, &(kc_fit_opts){.epochs = 3, .batch_size = BATCH, .seed = 3}, NULL) == KC_STATUS_OK;
    ok = ok && kc_predict(m, x, N, BATCH, y) == KC_STATUS_OK;
    uint64_t hp = 1469598103934665603ull, hw = hp;
    if (ok) hp = fnv(hp, y, sizeof(float) * N * 10);
    for (int i = 0; ok && i < kc_model_num_weights(m); i++) {
        kc_weight_info info;
        ok = kc_model_weight_info(m, i, &info) == KC_STATUS_OK;
        float *w = ok ? malloc(sizeof(float) * (size_t)info.size) : NULL;
        ok = ok && w && kc_model_get_weight(m, i, w, info.size) == KC_STATUS_OK;
        if (ok) hw = fnv(hw, w, sizeof(float) * (size_t)info.size);
        free(w);
    }
    if (!ok) fprintf(stderr, "child: %s\n", kc_last_error());
    printf("predict=%016" PRIx64 " weights=%016" PRIx64 "\n", hp, hw);
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    free(x), free(y), free(lab);
    return ok ? 0 : 1;
}

/* Runs the child (mode) with KERAC_NUM_THREADS=3 and KERAC_CPU_BALANCE=balance; its hashes. */
static void run_child(const char *mode, int balance, uint64_t *predict, uint64_t *weights) {
    char line[128];
    child_run("test_balance", mode, (const char *[]){"KERAC_NUM_THREADS", "KERAC_CPU_BALANCE", "OMP_NUM_THREADS", NULL},
              (const char *[]){"KERAC_NUM_THREADS=3", balance ? "KERAC_CPU_BALANCE=1" : "KERAC_CPU_BALANCE=0", NULL},
              line, sizeof line);
    assert_int_equal(sscanf(line, "predict=%" SCNx64 " weights=%" SCNx64, predict, weights), 2);
    print_message("  %s, KERAC_CPU_BALANCE=%d: %s", mode, balance, line);
}

static void training_is_reproducible(void **state) {
    (void)state;
    uint64_t p0, w0, p, w;
    run_child("train", 1, &p0, &w0);
    for (int r = 0; r < 2; r++) {
        run_child("train", 1, &p, &w);
        assert_true(w == w0); /* every weight, bit for bit */
        assert_true(p == p0);
    }
}

static void forward_does_not_depend_on_chunks(void **state) {
    (void)state;
    uint64_t p1, w1, p0, w0;
    run_child("predict", 1, &p1, &w1);
    run_child("predict", 0, &p0, &w0);
    assert_true(w1 == w0); /* the same initial weights */
    assert_true(p1 == p0);
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--child")) return child(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(training_is_reproducible),
        cmocka_unit_test(forward_does_not_depend_on_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
