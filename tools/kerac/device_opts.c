/* device_opts.c — the options that choose and tune the device, shared by train, evaluate
 * and predict:
 *   --device D            cpu, cuda, cuda:N or auto
 *   --gpu-memory MODE     grow | preallocate[=FRACTION] | limit=SIZE
 *   --cudnn-benchmark     time every cuDNN convolution algorithm, keep the fastest
 *   --deterministic       deterministic cuDNN algorithms only
 *   --cpu-isa SET         the CPU kernels' instruction set: auto, baseline, avx2, avx512
 * They go over the environment's defaults (kc_device_opts_default: KERAC_DEVICE,
 * KERAC_GPU_MEMORY, ...) into a kc_device_opts, which the commands give to the model
 * loaders (kc_model_load_ex, kc_checkpoint_load_ex: a .keras / .h5 file builds its model
 * while loading) or to kc_model_set_device_opts. The GPU options change nothing on the CPU. */
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
    if (cli_is(a, "--cpu-isa")) {
        static const char *const sets[] = {"auto", "baseline", "avx2", "avx512"};
        const char *v = NULL;
        if ((rc = cli_value(a, &v))) return rc;
        for (int i = 0; i < 4; i++)
            if (!strcmp(v, sets[i])) {
                d->cpu_isa = i + 1;
                return 0;
            }
        return cli_usage_error(a->cmd, "option '--cpu-isa' must be auto, baseline, avx2 or avx512, got '%s'", v);
    }
    if (cli_is(a, "--deterministic")) {
        if ((rc = cli_flag(a))) return rc;
        d->deterministic = true;
        return 0;
    }
    return -1;
}

int cli_device_resolve(const cli_device_opts *d, kc_device_opts *out) {
    kc_status s = kc_device_opts_default(out);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    if (d->device) out->device = d->device;
    if (d->gpu_memory) out->gpu_memory = d->gpu_memory;
    if (d->cudnn_benchmark) out->cudnn_benchmark = KC_TRUE;
    if (d->deterministic) out->deterministic = KC_TRUE;
    if (d->cpu_isa) out->cpu_isa = d->cpu_isa - 1;
    return 0;
}

int cli_load_model(const char *path, const kc_device_opts *dev, kc_model **m) {
    kc_status s = kc_model_load_ex(path, dev, m);
    if (s == KC_STATUS_OK) s = kc_model_build(*m);
    return s ? cli_fail(s, CLI_PHASE_LOAD) : 0;
}
