"""isa_probe.py — what PyTorch's libraries really run on this processor (bench/isa_env.sh):
oneDNN's effective instruction set, ATen's CPU capability and OpenBLAS's kernel set, asked
of the libraries this process has loaded (after `import torch`)."""
import ctypes
import re

import torch

# dnnl_cpu_isa_t of oneDNN 2.6 (dnnl_types.h)
_DNNL_ISA = {0x0: "all", 0x1: "sse41", 0x3: "avx", 0x7: "avx2", 0x407: "avx2_vnni", 0xf: "avx512_mic",
             0x1f: "avx512_mic_4ops", 0x27: "avx512_core", 0x67: "avx512_core_vnni",
             0xe7: "avx512_core_bf16", 0x3e7: "avx512_core_amx"}


def _lib(name):
    try:
        return ctypes.CDLL(name)  # the copy torch already loaded: same soname, same handle
    except OSError:
        return None


def isa_fields():
    """{"onednn_isa", "aten_capability", "openblas_corename"}; "?" where a library does not say."""
    out = {"onednn_isa": "?", "aten_capability": "?", "openblas_corename": "?"}
    dnnl = _lib("libdnnl.so.2")
    if dnnl is not None and hasattr(dnnl, "dnnl_get_effective_cpu_isa"):
        v = dnnl.dnnl_get_effective_cpu_isa()
        out["onednn_isa"] = _DNNL_ISA.get(v, hex(v))
    m = re.search(r"CPU capability usage: (\S+)", torch.__config__.show())
    if m:
        out["aten_capability"] = m.group(1)
    blas = _lib("libopenblas.so.0")
    if blas is not None and hasattr(blas, "openblas_get_corename"):
        blas.openblas_get_corename.restype = ctypes.c_char_p
        out["openblas_corename"] = blas.openblas_get_corename().decode()
    return out
