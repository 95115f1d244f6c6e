/* cmd_doctor.c — `kerac doctor`: check the whole GPU stack and say which device
 * `--device auto` uses and why (kc_doctor_run). One line per check, a fix after each
 * problem, the verdict last; --json prints the same as one JSON document. The exit code is
 * the verdict. */
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: kerac doctor [--json] [--tensorflow PATH] [--no-tensorflow] [--no-start]\n"
    "\n"
    "Check kerac's GPU path and say which device `--device auto` uses, and why: kerac's CUDA\n"
    "module (what it was built with), the NVIDIA driver, cuDNN / cuBLAS / NCCL as the loader\n"
    "finds them, every GPU (compute capability, memory, whether kerac's code runs on it), the\n"
    "environment variables that change behaviour, and a TensorFlow installation's build\n"
    "against the same machine. One line per check (ok, skipped, warning, problem), each\n"
    "problem followed by its fix; the verdict last.\n"
    "\n"
    "options:\n"
    "  --json              one JSON document with the same content (and the facts behind it)\n"
    "  --tensorflow PATH   check this TensorFlow: a site-packages folder, the tensorflow\n"
    "                      package folder, or its python/platform/build_info.py (default:\n"
    "                      search the python3 on PATH, VIRTUAL_ENV, CONDA_PREFIX, ~/.local,\n"
    "                      /usr/lib/python3/dist-packages)\n"
    "  --no-tensorflow     no TensorFlow check\n"
    "  --no-start          do not start the CUDA backend at the end (the verdict then rests on\n"
    "                      the checks alone)\n"
    "  -h, --help          show this help\n"
    "\n"
    "exit codes: 0 the GPU path is healthy (`--device auto` trains on the GPU); 1 only the CPU\n"
    "is usable and nothing is broken (no NVIDIA driver, CUDA_VISIBLE_DEVICES empty or -1, a\n"
    "GPU too old for any CUDA kerac can be built with); 2 the GPU path is installed but\n"
    "broken (a missing or mismatched cuDNN / cuBLAS, a driver too old for kerac's CUDA, a\n"
    "CUDA module that is missing or cannot load beside a driver, CUDA_VISIBLE_DEVICES naming\n"
    "a GPU that does not exist, a GPU kerac was not built for, a backend that fails to\n"
    "start); 3 the doctor itself failed; 64 usage error.\n"
    "\n"
    "variables kerac reads: KERAC_DEVICE, KERAC_LOG_LEVEL, KERAC_LOG_DEVICE_PLACEMENT,\n"
    "KERAC_NUM_THREADS, KERAC_MODULE_PATH, KERAC_MEMORY_LIMIT, KERAC_GPU_MEMORY,\n"
    "KERAC_CUDNN_BENCHMARK, KERAC_DETERMINISTIC, KERAC_TF32, KERAC_CUDNN_WORKSPACE_LIMIT,\n"
    "KERAC_CUDA_DEBUG_SYNC, KERAC_CPU_ISA, KERAC_CPU_WINOGRAD, KERAC_CPU_WINOGRAD_TILE,\n"
    "KERAC_CPU_CONV_BLOCKED, KERAC_CPU_HUGEPAGES, KERAC_CUDNN_GROUPED, KERAC_CPU_FUSE_BN_RELU,\n"
    "KERAC_CPU_FOLD_PAD, KERAC_CPU_INFER_TILE, KERAC_CPU_GEMM_SPLIT, KERAC_CPU_CONV_DX_ADD,\n"
    "KERAC_CPU_FUSE_ADD_RELU, KERAC_CPU_GEMM_SMALL, "
    "KERAC_FASHION_MNIST_DIR;\n"
    "and CUDA's "
    "CUDA_VISIBLE_DEVICES, CUDA_DEVICE_ORDER.\n";

#define DOCTOR_EXIT_FAILED 3
#define DOCTOR_EXIT_USAGE 64

int cli_cmd_doctor(int argc, char **argv) {
    cli_args a;
    cli_args_init(&a, argc, argv, "doctor");
    bool json = false;
    kc_doctor_opts o = {0};
    while (cli_args_next(&a)) {
        if (cli_is_help(&a)) {
            fputs(usage, stdout);
            return CLI_EXIT_OK;
        }
        int rc = 0;
        if (cli_is(&a, "--json")) {
            rc = cli_flag(&a);
            json = true;
        } else if (cli_is(&a, "--tensorflow")) {
            rc = cli_value(&a, &o.tensorflow);
        } else if (cli_is(&a, "--no-tensorflow")) {
            rc = cli_flag(&a);
            o.tensorflow_search = KC_FALSE;
        } else if (cli_is(&a, "--no-start")) {
            rc = cli_flag(&a);
            o.start_backend = KC_FALSE;
        } else {
            cli_unknown(&a);
            return DOCTOR_EXIT_USAGE;
        }
        if (rc) return DOCTOR_EXIT_USAGE;
    }
    kc_doctor_report *r = NULL;
    kc_status s = kc_doctor_run(&o, &r);
    if (s != KC_STATUS_OK) {
        cli_fail(s, CLI_PHASE_RUN);
        return DOCTOR_EXIT_FAILED;
    }
    char *text = NULL;
    s = json ? kc_doctor_json(r, &text) : kc_doctor_text(r, &text);
    int code = (int)kc_doctor_get_verdict(r);
    kc_doctor_report_destroy(r);
    if (s != KC_STATUS_OK) {
        cli_fail(s, CLI_PHASE_RUN);
        return DOCTOR_EXIT_FAILED;
    }
    fputs(text, stdout);
    fflush(stdout);
    kc_free(text);
    return code;
}
