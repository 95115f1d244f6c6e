/* device_opts.c — the options that choose and tune the device, shared by train, evaluate
 * and predict:
 *   --device D            cpu, cuda, cuda:N or auto
 *   --gpu-memory MODE     grow | preallocate[=FRACTION] | limit=SIZE
 *   --cudnn-benchmark     time every cuDNN convolution algorithm, keep the fastest
 *   --deterministic       deterministic cuDNN algorithms only
 * The device goes to KERAC_DEVICE before any model is made or loaded (a .keras / .h5 file
 * builds its model while loading, so kc_model_set_device would come too late for it) and to
 * kc_model_set_device for a model not built yet. The GPU options are the environment
 * variables the CUDA module reads when it starts (KERAC_GPU_MEMORY, KERAC_CUDNN_BENCHMARK,
 * KERAC_DETERMINISTIC); on the CPU they change nothing. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static bool valid_device(const char *d) {
    if (!strcmp(d, "cpu") || !strcmp(d, "cuda") || !strcmp(d, "gpu") || !strcmp(d, "auto")) return true;
    if (strncmp(d, "cuda:", 5) != 0 || !d[5]) return false;
    for (const char *p = d + 5; *p; p++)
        if (*p < '0' || *p > '9') return false;
    return strlen(d + 5) <= 4;
}

static bool valid_gpu_memory(const char *v) {
    if (!strcmp(v, "grow") || !strcmp(v, "preallocate")) return true;
    if (!strncmp(v, "preallocate=", 12)) {
        char *end = NULL;
        double f = strtod(v + 12, &end);
        return end != v + 12 && *end == '\0' && f > 0.0 && f <= 1.0;
    }
    if (!strncmp(v, "limit=", 6)) {
        size_t b = 0;
        return kc_parse_size(v + 6, &b) == KC_STATUS_OK && b > 0;
    }
    return false;
}

int cli_device_option(cli_args *a, cli_device_opts *d) {
    int rc;
    if (cli_is(a, "--device")) {
        if ((rc = cli_value(a, &d->device))) return rc;
        if (!valid_device(d->device))
            return cli_usage_error(a->cmd, "option '--device' must be cpu, cuda, cuda:N or auto, got '%s'", d->device);
        return 0;
    }
    if (cli_is(a, "--gpu-memory")) {
        if ((rc = cli_value(a, &d->gpu_memory))) return rc;
        if (!valid_gpu_memory(d->gpu_memory))
            return cli_usage_error(a->cmd,
                                   "option '--gpu-memory' must be grow, preallocate, preallocate=FRACTION (0 < F <= 1) "
                                   "or limit=SIZE (e.g. limit=8G), got '%s'",
                                   d->gpu_memory);
        return 0;
    }
    if (cli_is(a, "--cudnn-benchmark")) {
        if ((rc = cli_flag(a))) return rc;
        d->cudnn_benchmark = true;
        return 0;
    }
    if (cli_is(a, "--deterministic")) {
        if ((rc = cli_flag(a))) return rc;
        d->deterministic = true;
        return 0;
    }
    return -1;
}

void cli_device_apply(const cli_device_opts *d) {
    if (d->device) setenv("KERAC_DEVICE", d->device, 1);
    if (d->gpu_memory) setenv("KERAC_GPU_MEMORY", d->gpu_memory, 1);
    if (d->cudnn_benchmark) setenv("KERAC_CUDNN_BENCHMARK", "1", 1);
    if (d->deterministic) setenv("KERAC_DETERMINISTIC", "1", 1);
}

int cli_device_set(kc_model *m, const cli_device_opts *d) {
    if (!d->device || kc_model_device(m)[0]) return 0; /* none asked, or built already (on KERAC_DEVICE) */
    kc_status s = kc_model_set_device(m, d->device);
    return s ? cli_fail(s, CLI_PHASE_RUN) : 0;
}
