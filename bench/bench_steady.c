/* bench_steady.c — is workload A's training speed a property of the process or of the
 * moment? (bench/README.md, "Steadiness"). One process trains the default CNN (Adam, batch
 * 128, Fashion-MNIST) in FITS consecutive kc_fit calls of STEPS steps each, after a warm-up
 * fit of 5 steps, and prints one JSON line per fit: images/s (wall clock), the process's CPU
 * seconds, and the whole machine's user and steal time over the fit (/proc/stat, in
 * hundredths of a second: steal is time the hypervisor ran something else on our vCPUs).
 * Run several processes: if fits vary as much inside a process as between processes, the
 * cause is the moment (the host), not the process (memory placement, thread placement).
 *
 *   build/bench/bench_steady [FITS] [STEPS]      (default 5 fits of 40 steps)
 * Threads: BENCH_THREADS (default 2). Public API only. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kerac.h"
#include "bench_util.h"

/* Machine-wide user and steal ticks (the "cpu" line of /proc/stat); -1 when unreadable. */
static void stat_ticks(long long *user, long long *steal) {
    long long v[8] = {0};
    *user = *steal = -1;
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return;
    if (fscanf(f, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
               &v[7]) == 8)
        *user = v[0] + v[1], *steal = v[7];
    fclose(f);
}

static double cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    const int fits = argc > 1 ? atoi(argv[1]) : 5, steps = argc > 2 ? atoi(argv[2]) : 40;
    const int threads = bench_env_int("BENCH_THREADS", 2);
    if (fits < 1 || fits > 100 || steps < 1 || steps > 400 || threads < 1) {
        fprintf(stderr, "usage: bench_steady [FITS 1..100] [STEPS 1..400]; BENCH_THREADS >= 1\n");
        return 2;
    }
    kc_set_num_threads(threads);
    kc_model *m = NULL;
    kc_dataset *train = NULL;
    kc_status s = kc_default_cnn(28, 28, 1, 10, &m);
    if (s == KC_STATUS_OK)
        s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                             .loss = "sparse_categorical_crossentropy"});
    if (s == KC_STATUS_OK) s = kc_dataset_open("fashion-mnist:train", &train);
    for (int f = -1; f < fits && s == KC_STATUS_OK; f++) { /* fit -1: the warm-up */
        const int n = f < 0 ? 5 : steps;
        long long u0, st0, u1, st1;
        stat_ticks(&u0, &st0);
        const double t0 = bench_now(), c0 = cpu_now();
        kc_history *h = NULL;
        s = kc_fit(m, train, &(kc_fit_opts){.epochs = 1, .batch_size = 128, .steps_per_epoch = n}, &h);
        const double dt = bench_now() - t0, dc = cpu_now() - c0;
        stat_ticks(&u1, &st1);
        kc_history_destroy(h);
        if (s == KC_STATUS_OK && f >= 0)
            printf("{\"fit\": %d, \"images_per_second\": %.0f, \"cpu_s\": %.3f, \"wall_s\": %.3f, "
                   "\"machine_user_ticks\": %lld, \"machine_steal_ticks\": %lld}\n",
                   f, n * 128.0 / dt, dc, dt, u1 - u0, st1 - st0);
    }
    if (s != KC_STATUS_OK) fprintf(stderr, "bench_steady: %s (%s)\n", kc_last_error(), kc_status_name(s));
    kc_dataset_destroy(train);
    kc_model_destroy(m);
    return s == KC_STATUS_OK ? 0 : 1;
}
