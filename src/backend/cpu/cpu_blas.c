/* cpu_blas.c — which kernels the BLAS under kerac runs, and whether they use less of the
 * processor than kerac's own kernels do.
 *
 * kerac's large GEMMs (im2col convolutions, 1x1 convolutions past the small tiles, Dense)
 * run in OpenBLAS, which picks its own kernels at run time: by its core type, detected from
 * the processor or forced by OPENBLAS_CORETYPE. When that core type is below the instruction
 * set kerac's kernels run (OPENBLAS_CORETYPE=Haswell left in a shell or a container image,
 * or an OpenBLAS older than the processor), those GEMMs run AVX2 code on an AVX-512
 * processor: measured on a Zen 5 with Debian's OpenBLAS 0.3.21, ResNet50 fine-tuning took
 * 1.38 s a step with Haswell's kernels against 1.01 s with the ones OpenBLAS detects
 * (bench/RESULTS.md, "OpenBLAS's core type"). Nothing fails, so nothing said why: this
 * names the cause and the fix. */
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "cpu.h"
#include "cpu_blas.h"

/* OpenBLAS's own query (cblas.h declares it); weak, so another BLAS links too */
extern char *openblas_get_corename(void) __attribute__((weak));

const char *kc__cpu_blas_core(void) { return openblas_get_corename ? openblas_get_corename() : NULL; }

int kc__cpu_blas_core_isa(const char *core) {
    static const char *const avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    static const char *const avx2[] = {"Haswell", "Zen", "Excavator"};
    static const char *const older[] = {"Katmai",   "Coppermine",   "Northwood", "Prescott",  "Banias",
                                        "Atom",     "Core2",        "Penryn",    "Dunnington", "Nehalem",
                                        "Athlon",   "Opteron",      "Opteron_SSE3", "Barcelona", "Nano",
                                        "Sandybridge", "Bobcat",    "Bulldozer", "Piledriver", "Steamroller"};
    if (!core) return -1;
    for (size_t i = 0; i < sizeof avx512 / sizeof avx512[0]; i++)
        if (!strcasecmp(core, avx512[i])) return KC_CPU_ISA_AVX512;
    for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++)
        if (!strcasecmp(core, avx2[i])) return KC_CPU_ISA_AVX2;
    for (size_t i = 0; i < sizeof older / sizeof older[0]; i++)
        if (!strcasecmp(core, older[i])) return KC_CPU_ISA_BASELINE;
    return -1;
}

bool kc__cpu_blas_below(int isa, const char *core, const char *coretype_env, char *why, size_t n) {
    const int blas = kc__cpu_blas_core_isa(core);
    if (blas < 0 || blas >= isa) return false;
    const char *blas_set = blas == KC_CPU_ISA_AVX2 ? "AVX2" : "SSE/AVX";
    const char *cpu_set = isa == KC_CPU_ISA_AVX512 ? "AVX-512" : "AVX2";
    if (coretype_env && *coretype_env)
        snprintf(why, n,
                 "OpenBLAS runs its %s kernels (%s), as OPENBLAS_CORETYPE=%s asks, below kerac's own (%s): "
                 "its GEMMs (im2col and 1x1 convolutions, Dense) run at up to half speed; unset OPENBLAS_CORETYPE "
                 "(OpenBLAS then picks this processor's kernels), or set KERAC_CPU_ISA=%s too if the "
                 "restriction is meant",
                 core, blas_set, coretype_env, cpu_set, kc__cpu_isa_label(blas));
    else
        snprintf(why, n,
                 "OpenBLAS runs its %s kernels (%s), below kerac's own (%s): this OpenBLAS does not know the "
                 "processor, and its GEMMs (im2col and 1x1 convolutions, Dense) run at up to half speed; set "
                 "OPENBLAS_CORETYPE=%s, or install a newer OpenBLAS",
                 core, blas_set, cpu_set, isa == KC_CPU_ISA_AVX512 ? "SkylakeX" : "Haswell");
    return true;
}

bool kc__cpu_blas_below_backend(const kc_backend *be, char *why, size_t n) {
    const int isa = kc__cpu_backend_isa(be);
    return isa >= 0 && kc__cpu_blas_below(isa, kc__cpu_blas_core(), getenv("OPENBLAS_CORETYPE"), why, n);
}
