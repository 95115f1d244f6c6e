/* cpu_blas.h — the kernels the BLAS under kerac runs (cpu_blas.c), for the CPU backend's
 * warning and the doctor's check. */
#ifndef KC_CPU_BLAS_H
#define KC_CPU_BLAS_H

#include <stdbool.h>
#include <stddef.h>

/* OpenBLAS's core type ("Haswell", "SkylakeX"...), as openblas_get_corename says; NULL
 * under another BLAS. */
const char *kc__cpu_blas_core(void);
/* That core type as a kc_cpu_isa (kerac.h); -1 for a name it does not know. */
int kc__cpu_blas_core_isa(const char *core);
/* Whether the core type is below kerac's instruction set `isa` (a kc_cpu_isa, not AUTO);
 * if so, the reason and the fix, as one line "<reason>; <fix>", in why. coretype_env is
 * OPENBLAS_CORETYPE's value (NULL when unset), which the fix depends on. */
bool kc__cpu_blas_below(int isa, const char *core, const char *coretype_env, char *why, size_t n);
/* The same for a CPU backend's kernels, OpenBLAS's core type and OPENBLAS_CORETYPE as they
 * are; false for another backend. */
struct kc_backend;
bool kc__cpu_blas_below_backend(const struct kc_backend *be, char *why, size_t n);

#endif
