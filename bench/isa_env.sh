# bench/isa_env.sh — sourced by bench/run.sh and bench/finetune/run.sh: CPU_ISA restricts
# both sides of a run to one instruction set, to measure an AVX2-only machine on an AVX-512 one.
#
#   CPU_ISA=auto     (default) each side picks its best kernels for this processor
#   CPU_ISA=avx2     kerac: KERAC_CPU_ISA=avx2; PyTorch: oneDNN at most AVX2
#                    (ONEDNN_MAX_CPU_ISA, DNNL_MAX_CPU_ISA: oneDNN 2.6 reads both) and
#                    ATen's AVX2 kernels (ATEN_CPU_CAPABILITY); OpenBLAS in both:
#                    OPENBLAS_CORETYPE=Haswell (its AVX2 kernels) unless OPENBLAS_CORETYPE is set
#   CPU_ISA=avx512   kerac: KERAC_CPU_ISA=avx512; PyTorch and OpenBLAS as they choose
#
# Under auto and avx512 an OPENBLAS_CORETYPE inherited from the environment is dropped (with
# a line on stderr): it would pin both sides' OpenBLAS to that core type's kernels, below
# this processor's on a machine that sets Haswell on an AVX-512 processor (bench/RESULTS.md,
# "OpenBLAS's core type"; kerac warns about it, and `kerac doctor` has a blas line).
#
# Sets ISA_ENV (an array of VAR=value for both programs) and CPU_ISA; each program records
# in its JSON line what it ran (kerac: cpu_isa, openblas_corename; PyTorch: onednn_isa,
# aten_capability, openblas_corename), so the restriction is checked, not assumed.
CPU_ISA="${CPU_ISA:-auto}"
ISA_ENV=()
case "$CPU_ISA" in
    auto) ;;
    avx2)
        ISA_ENV=(KERAC_CPU_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2
                 "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}") ;;
    avx512) ISA_ENV=(KERAC_CPU_ISA=avx512) ;;
    *) echo "run.sh: CPU_ISA must be auto, avx2 or avx512, got '$CPU_ISA'" >&2; exit 2 ;;
esac
if [ "$CPU_ISA" != avx2 ] && [ -n "${OPENBLAS_CORETYPE:-}" ]; then
    echo "run.sh: CPU_ISA=$CPU_ISA: OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE from the environment is dropped, so that OpenBLAS picks its kernels for this processor on both sides (CPU_ISA=avx2 keeps it)" >&2
    unset OPENBLAS_CORETYPE
fi
