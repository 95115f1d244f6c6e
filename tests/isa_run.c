/* isa_run.c — runs a test program on one set of CPU kernels (tests/CMakeLists.txt, the
 * "isa" tests): `isa_run ISA PROGRAM [ARGS...]` with ISA baseline, avx2 or avx512.
 *
 * When this processor runs ISA (the library's own rule, kc__cpu_isa_best), it sets
 * KERAC_CPU_ISA=ISA and replaces itself with PROGRAM, so every backend the program makes
 * runs that set's kernels and the program's comparisons against the reference kernels
 * test that copy. When it does not, it says so and exits 77: ctest reports the test as
 * skipped, not passed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "kerac.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: isa_run baseline|avx2|avx512 PROGRAM [ARGS...]\n");
        return 2;
    }
    int want = 0;
    for (int isa = KC_CPU_ISA_BASELINE; isa <= KC_CPU_ISA_AVX512; isa++)
        if (!strcmp(argv[1], kc__cpu_isa_label(isa))) want = isa;
    if (!want) {
        fprintf(stderr, "isa_run: '%s' is not baseline, avx2 or avx512\n", argv[1]);
        return 2;
    }
    const int best = kc__cpu_isa_best();
    if (want > best) {
        printf("isa_run: skipped: this processor does not run the %s kernels (it runs %s at best), so %s is not run "
               "on them\n",
               argv[1], kc__cpu_isa_label(best), argv[2]);
        return 77;
    }
    if (setenv("KERAC_CPU_ISA", argv[1], 1) != 0) {
        perror("isa_run: setenv");
        return 1;
    }
    printf("isa_run: %s with KERAC_CPU_ISA=%s\n", argv[2], argv[1]);
    fflush(stdout);
    execv(argv[2], argv + 2);
    perror("isa_run: execv");
    return 1;
}
