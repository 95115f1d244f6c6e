/* omp.h — the fuzz build compiles kerac without OpenMP (the pragmas are ignored and every
 * kernel runs on one thread): deterministic, faster under the sanitizers, and no OpenMP
 * runtime for clang needed. These are the serial answers of the OpenMP calls kerac makes. */
#ifndef KC_FUZZ_OMP_STUB_H
#define KC_FUZZ_OMP_STUB_H
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
static inline int omp_get_num_procs(void) { return 1; }
static inline void omp_set_num_threads(int n) { (void)n; }
#endif
