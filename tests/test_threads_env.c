/* test_threads_env.c — one thread count everywhere: every CPU parallel region and OpenBLAS
 * run kerac's count (kc_set_num_threads, else KERAC_NUM_THREADS, else OpenMP's default,
 * which honours OMP_NUM_THREADS), whatever OpenMP's own count says.
 *
 * OpenMP reads OMP_NUM_THREADS when the program starts, so each case runs this program
 * again (/proc/self/exe --child [N]) with its own environment: OMP_NUM_THREADS and
 * KERAC_NUM_THREADS removed and the case's settings added. The child trains the default CNN
 * for a few steps (kc_fit: convolutions, pooling, dense GEMMs, Adam), predicts, and runs a
 * 512x512x512 GEMM through the CPU backend (one OpenBLAS call, which OpenBLAS's OpenMP build
 * would run on a team of omp_get_max_threads), then prints kc_get_num_threads() and the threads the process has
 * (/proc/self/task). libgomp starts a team's extra threads at its first region of that size
 * and keeps them for the next regions, and kc_fit's loader thread has ended by then, so the
 * process holds one thread when every region ran on one thread, and N when the regions ran
 * N-thread teams. With N given, the child calls kc_set_num_threads(N) first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>

#include "child_run.h"
#include "kerac.h"
#include "kerac_backend.h"

static int task_count(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

#define CHILD_N 512 /* examples: 4 steps of 128 */

/* C = A B, 512 x 512 x 512, through a default CPU backend's gemm; 1 when it ran */
static int big_gemm(void) {
    enum { G = 512 };
    kc_device_opts o;
    kc_backend *be = NULL;
    float *a = calloc((size_t)G * G, sizeof *a), *b = calloc((size_t)G * G, sizeof *b), *c = malloc(sizeof *c * G * G);
    int ok = a && b && c && kc_device_opts_default(&o) == KC_STATUS_OK &&
             kc_backend_cpu_create_ex(&o, &be) == KC_STATUS_OK &&
             be->gemm(be, 0, 0, G, G, G, 1.0f, a, G, b, G, 0.0f, c, G) == KC_STATUS_OK;
    kc_backend_destroy(be);
    free(a), free(b), free(c);
    return ok;
}

static int child(int set_threads) {
    if (set_threads > 0) kc_set_num_threads(set_threads);
    kc_model *m = NULL;
    kc_dataset *d = NULL;
    float *x = malloc(sizeof(float) * CHILD_N * 28 * 28), *y = malloc(sizeof(float) * CHILD_N * 10);
    int32_t *lab = malloc(sizeof(int32_t) * CHILD_N);
    int ok = x && y && lab;
    for (int i = 0; ok && i < CHILD_N * 28 * 28; i++) x[i] = (float)((i * 37) % 101) / 101.0f;
    for (int i = 0; ok && i < CHILD_N; i++) lab[i] = i % 10;
    ok = ok && kc_default_cnn(28, 28, 1, 10, &m) == KC_STATUS_OK &&
         kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                          .loss = "sparse_categorical_crossentropy"}) == KC_STATUS_OK &&
         kc_dataset_from_memory(x, lab, CHILD_N, (kc_shape){3, {28, 28, 1}}, 10, &d) == KC_STATUS_OK &&
         kc_fit(m, d, &(kc_fit_opts){.epochs = 1, .batch_size = 128}, NULL) == KC_STATUS_OK &&
         kc_predict(m, x, CHILD_N, 256, y) == KC_STATUS_OK && big_gemm();
    if (!ok) fprintf(stderr, "child: %s\n", kc_last_error());
    printf("threads=%d tasks=%d\n", kc_get_num_threads(), task_count());
    kc_dataset_destroy(d);
    kc_model_destroy(m);
    free(x), free(y), free(lab);
    return ok ? 0 : 1;
}

/* Runs the child with the environment minus OMP_NUM_THREADS and KERAC_NUM_THREADS plus
 * set[] ("NAME=VALUE", NULL-terminated); *threads and *tasks from its line. */
static void run_child(const char *const *set, const char *set_threads, int *threads, int *tasks) {
    char line[128];
    child_run("test_threads_env", set_threads, (const char *[]){"OMP_NUM_THREADS", "KERAC_NUM_THREADS", NULL}, set,
              line, sizeof line);
    assert_int_equal(sscanf(line, "threads=%d tasks=%d", threads, tasks), 2);
}

static void expect(const char *const *set, const char *set_threads, int threads, int tasks) {
    int got_threads = -1, got_tasks = -1;
    run_child(set, set_threads, &got_threads, &got_tasks);
    print_message("  %s %s%s: kc_get_num_threads %d, process threads %d\n", set[0] ? set[0] : "",
                  set[0] && set[1] ? set[1] : "", set_threads ? " + kc_set_num_threads" : "", got_threads, got_tasks);
    assert_int_equal(got_threads, threads);
    assert_int_equal(got_tasks, tasks);
}

/* KERAC_NUM_THREADS=1, OMP_NUM_THREADS unset: OpenMP would run a team per core */
static void kerac_one_omp_unset(void **state) {
    (void)state;
    expect((const char *[]){"KERAC_NUM_THREADS=1", NULL}, NULL, 1, 1);
}

/* KERAC_NUM_THREADS=1 over OMP_NUM_THREADS=4: kerac's count wins in every region */
static void kerac_one_omp_four(void **state) {
    (void)state;
    expect((const char *[]){"KERAC_NUM_THREADS=1", "OMP_NUM_THREADS=4", NULL}, NULL, 1, 1);
}

/* OMP_NUM_THREADS alone is kerac's count too */
static void omp_only(void **state) {
    (void)state;
    expect((const char *[]){"OMP_NUM_THREADS=1", NULL}, NULL, 1, 1);
    expect((const char *[]){"OMP_NUM_THREADS=3", NULL}, NULL, 3, 3);
}

/* KERAC_NUM_THREADS=3 over OMP_NUM_THREADS=1: the regions run teams of 3 */
static void kerac_three_omp_one(void **state) {
    (void)state;
    expect((const char *[]){"KERAC_NUM_THREADS=3", "OMP_NUM_THREADS=1", NULL}, NULL, 3, 3);
}

/* kc_set_num_threads over both variables */
static void set_over_env(void **state) {
    (void)state;
    expect((const char *[]){"KERAC_NUM_THREADS=3", "OMP_NUM_THREADS=3", NULL}, "1", 1, 1);
    expect((const char *[]){"OMP_NUM_THREADS=1", NULL}, "2", 2, 2);
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "--child")) return child(argc >= 3 ? atoi(argv[2]) : 0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(kerac_one_omp_unset), cmocka_unit_test(kerac_one_omp_four), cmocka_unit_test(omp_only),
        cmocka_unit_test(kerac_three_omp_one), cmocka_unit_test(set_over_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
