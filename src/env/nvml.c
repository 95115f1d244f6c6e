/* nvml.c — NVML (libnvidia-ml.so.1, part of the NVIDIA driver), loaded at run time: the
 * driver's version, every physical GPU (whatever CUDA_VISIBLE_DEVICES says), and readings
 * (utilisation, memory, temperature, power); the sampling thread behind kc_monitor_*.
 * NVML is initialised once per process and left initialised (nvmlShutdown would race
 * with a monitor thread of another model). */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "env.h"

/* ---- the few NVML declarations used (nvml.h is not needed to build kerac) */
typedef int nvmlReturn_t; /* NVML_SUCCESS = 0 */
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;
#define KC_NVML_SUCCESS 0
#define KC_NVML_TEMPERATURE_GPU 0

static struct {
    pthread_once_t once;
    void *h;
    char path[KC_ENV_PATH];
    char error[512];
    bool ok;
    nvmlReturn_t (*init)(void);
    const char *(*error_string)(nvmlReturn_t);
    nvmlReturn_t (*driver_version)(char *, unsigned int);
    nvmlReturn_t (*count)(unsigned int *);
    nvmlReturn_t (*by_index)(unsigned int, nvmlDevice_t *);
    nvmlReturn_t (*by_pci)(const char *, nvmlDevice_t *);
    nvmlReturn_t (*name)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*uuid)(nvmlDevice_t, char *, unsigned int);
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t *);
    nvmlReturn_t (*util)(nvmlDevice_t, nvmlUtilization_t *);
    nvmlReturn_t (*temp)(nvmlDevice_t, int, unsigned int *);
    nvmlReturn_t (*power)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned int *);
    nvmlReturn_t (*cc)(nvmlDevice_t, int *, int *);
} N = {.once = PTHREAD_ONCE_INIT};

static const char *nvml_err(nvmlReturn_t r) {
    const char *s = N.error_string ? N.error_string(r) : NULL;
    return s ? s : "unknown NVML error";
}

static void nvml_load(void) {
    N.h = kc__dl_open("libnvidia-ml.so.1", N.error, sizeof N.error);
    if (!N.h) return;
    kc__dl_path(N.h, N.path, sizeof N.path);
#define SYM(field, name) *(void **)(&N.field) = kc__dl_sym(N.h, name)
    SYM(init, "nvmlInit_v2");
    if (!N.init) SYM(init, "nvmlInit");
    SYM(error_string, "nvmlErrorString");
    SYM(driver_version, "nvmlSystemGetDriverVersion");
    SYM(count, "nvmlDeviceGetCount_v2");
    if (!N.count) SYM(count, "nvmlDeviceGetCount");
    SYM(by_index, "nvmlDeviceGetHandleByIndex_v2");
    if (!N.by_index) SYM(by_index, "nvmlDeviceGetHandleByIndex");
    SYM(by_pci, "nvmlDeviceGetHandleByPciBusId_v2");
    SYM(name, "nvmlDeviceGetName");
    SYM(uuid, "nvmlDeviceGetUUID");
    SYM(memory, "nvmlDeviceGetMemoryInfo");
    SYM(util, "nvmlDeviceGetUtilizationRates");
    SYM(temp, "nvmlDeviceGetTemperature");
    SYM(power, "nvmlDeviceGetPowerUsage");
    SYM(power_limit, "nvmlDeviceGetEnforcedPowerLimit");
    SYM(cc, "nvmlDeviceGetCudaComputeCapability");
#undef SYM
    if (!N.init || !N.count || !N.by_index) {
        kc__pathf(N.error, sizeof N.error, "%s lacks nvmlInit / nvmlDeviceGetCount / nvmlDeviceGetHandleByIndex",
                 N.path[0] ? N.path : "libnvidia-ml.so.1");
        return;
    }
    nvmlReturn_t r = N.init();
    if (r != KC_NVML_SUCCESS) {
        snprintf(N.error, sizeof N.error, "nvmlInit failed: %s (NVML error %d)", nvml_err(r), r);
        return;
    }
    N.ok = true;
}

static bool nvml_ready(void) {
    pthread_once(&N.once, nvml_load);
    return N.ok;
}

void kc__nvml_probe(kc__nvml *out) {
    memset(out, 0, sizeof *out);
    bool ok = nvml_ready();
    out->found = N.h != NULL;
    snprintf(out->path, sizeof out->path, "%s", N.path);
    snprintf(out->error, sizeof out->error, "%s", N.error);
    out->ok = ok;
    if (!ok) return;
    if (N.driver_version) {
        char v[80] = "";
        if (N.driver_version(v, sizeof v) == KC_NVML_SUCCESS) snprintf(out->driver_version, sizeof out->driver_version, "%s", v);
    }
    unsigned int n = 0;
    if (N.count(&n) != KC_NVML_SUCCESS) n = 0;
    if (n > KC_ENV_MAX_GPUS) n = KC_ENV_MAX_GPUS;
    out->count = (int)n;
    for (unsigned int i = 0; i < n; i++) {
        kc__nvml_gpu *g = &out->gpu[i];
        nvmlDevice_t d = NULL;
        if (N.by_index(i, &d) != KC_NVML_SUCCESS) continue;
        char buf[96];
        if (N.name && N.name(d, buf, sizeof buf) == KC_NVML_SUCCESS) snprintf(g->name, sizeof g->name, "%s", buf);
        if (N.uuid && N.uuid(d, buf, sizeof buf) == KC_NVML_SUCCESS) snprintf(g->uuid, sizeof g->uuid, "%s", buf);
        nvmlMemory_t m;
        if (N.memory && N.memory(d, &m) == KC_NVML_SUCCESS) {
            g->total = (size_t)m.total;
            g->free = (size_t)m.free;
            g->used = (size_t)m.used;
            g->has_memory = true;
        }
        int maj = 0, min = 0;
        if (N.cc && N.cc(d, &maj, &min) == KC_NVML_SUCCESS) {
            g->cc_major = maj;
            g->cc_minor = min;
        }
    }
}

int kc__nvml_index_by_pci(const kc__nvml *n, const char *pci) {
    (void)n;
    if (!pci || !pci[0] || !nvml_ready() || !N.by_pci) return -1;
    nvmlDevice_t want = NULL;
    if (N.by_pci(pci, &want) != KC_NVML_SUCCESS || !want) return -1;
    unsigned int count = 0;
    if (N.count(&count) != KC_NVML_SUCCESS) return -1;
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t d = NULL;
        if (N.by_index(i, &d) == KC_NVML_SUCCESS && d == want) return (int)i;
    }
    return -1;
}

/* ---------------------------------------------------------------- readings */

static void read_one(unsigned int index, kc_gpu_reading *r) {
    *r = (kc_gpu_reading){.index = (int)index, .cuda_index = -1, .utilization = -1, .memory_utilization = -1,
                          .memory_used = -1, .memory_total = -1, .temperature = -1, .power = -1, .power_limit = -1,
                          .samples = 1};
    nvmlDevice_t d = NULL;
    if (N.by_index(index, &d) != KC_NVML_SUCCESS) return;
    char buf[96];
    if (N.name && N.name(d, buf, sizeof buf) == KC_NVML_SUCCESS) snprintf(r->name, sizeof r->name, "%s", buf);
    nvmlUtilization_t u;
    if (N.util && N.util(d, &u) == KC_NVML_SUCCESS) {
        r->utilization = u.gpu;
        r->memory_utilization = u.memory;
    }
    nvmlMemory_t m;
    if (N.memory && N.memory(d, &m) == KC_NVML_SUCCESS) {
        r->memory_used = (double)m.used;
        r->memory_total = (double)m.total;
    }
    unsigned int v = 0;
    if (N.temp && N.temp(d, KC_NVML_TEMPERATURE_GPU, &v) == KC_NVML_SUCCESS) r->temperature = v;
    if (N.power && N.power(d, &v) == KC_NVML_SUCCESS) r->power = v / 1000.0;
    if (N.power_limit && N.power_limit(d, &v) == KC_NVML_SUCCESS) r->power_limit = v / 1000.0;
}

/* cuda:N of each NVML index (-1 hidden / unknown), through the PCI bus ids CUDA reports. */
static void cuda_indices(int *map, int n) {
    for (int i = 0; i < n; i++) map[i] = -1;
    for (int c = 0; c < KC_ENV_MAX_GPUS; c++) {
        char pci[32];
        if (!kc__driver_pci(c, pci, sizeof pci)) break;
        int k = kc__nvml_index_by_pci(NULL, pci);
        if (k >= 0 && k < n) map[k] = c;
    }
}

kc_status kc_gpu_readings(kc_gpu_reading *out, int max, int *n) {
    if (n) *n = 0;
    if (!out || max < 0 || !n) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_gpu_readings: out and n must not be NULL");
    if (!nvml_ready())
        return kc__fail(KC_STATUS_DEVICE, "cannot read the GPUs: %s%s; `kerac doctor` checks the whole GPU setup",
                        N.h ? "" : "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded: ", N.error);
    unsigned int count = 0;
    nvmlReturn_t r = N.count(&count);
    if (r != KC_NVML_SUCCESS) return kc__fail(KC_STATUS_DEVICE, "NVML cannot count the GPUs: %s", nvml_err(r));
    int map[KC_ENV_MAX_GPUS];
    int k = (int)count < KC_ENV_MAX_GPUS ? (int)count : KC_ENV_MAX_GPUS;
    cuda_indices(map, k);
    for (int i = 0; i < k && i < max; i++) {
        read_one((unsigned int)i, &out[i]);
        out[i].cuda_index = map[i];
        (*n)++;
    }
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- the monitor thread */

typedef struct mon_acc {
    kc_gpu_reading latest;
    bool has_latest;
    /* since the last reset */
    int samples;
    double util_sum, mem_util_sum, power_sum;
    int util_n, mem_util_n, power_n;
    double mem_peak, temp_peak;
} mon_acc;

struct kc_monitor {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    double interval;
    int n;
    int index[KC_ENV_MAX_GPUS]; /* NVML indices */
    int cuda[KC_ENV_MAX_GPUS];
    mon_acc acc[KC_ENV_MAX_GPUS];
};

static void acc_reset(mon_acc *a) {
    a->samples = 0;
    a->util_sum = a->mem_util_sum = a->power_sum = 0;
    a->util_n = a->mem_util_n = a->power_n = 0;
    a->mem_peak = a->temp_peak = -1;
}

static void sample(kc_monitor *mon) {
    for (int i = 0; i < mon->n; i++) {
        kc_gpu_reading r;
        read_one((unsigned int)mon->index[i], &r);
        r.cuda_index = mon->cuda[i];
        pthread_mutex_lock(&mon->mu);
        mon_acc *a = &mon->acc[i];
        a->latest = r;
        a->has_latest = true;
        a->samples++;
        if (r.utilization >= 0) a->util_sum += r.utilization, a->util_n++;
        if (r.memory_utilization >= 0) a->mem_util_sum += r.memory_utilization, a->mem_util_n++;
        if (r.power >= 0) a->power_sum += r.power, a->power_n++;
        if (r.memory_used > a->mem_peak) a->mem_peak = r.memory_used;
        if (r.temperature > a->temp_peak) a->temp_peak = r.temperature;
        pthread_mutex_unlock(&mon->mu);
    }
}

static void *mon_main(void *arg) {
    kc_monitor *mon = arg;
    pthread_mutex_lock(&mon->mu);
    while (!mon->stop) {
        pthread_mutex_unlock(&mon->mu);
        sample(mon);
        pthread_mutex_lock(&mon->mu);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        double t = (double)until.tv_nsec * 1e-9 + mon->interval;
        until.tv_sec += (time_t)t;
        until.tv_nsec = (long)((t - floor(t)) * 1e9);
        while (!mon->stop && pthread_cond_timedwait(&mon->cv, &mon->mu, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&mon->mu);
    return NULL;
}

kc_status kc_monitor_start(int gpu, double interval, kc_monitor **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_monitor_start: out is NULL");
    *out = NULL;
    if (!(interval >= 0) || interval > 3600)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_monitor_start: interval %g s is not in [0, 3600]", interval);
    if (!nvml_ready())
        return kc__fail(KC_STATUS_DEVICE, "cannot monitor the GPUs: %s%s",
                        N.h ? "" : "NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be loaded: ", N.error);
    unsigned int count = 0;
    if (N.count(&count) != KC_NVML_SUCCESS) count = 0;
    if (count > KC_ENV_MAX_GPUS) count = KC_ENV_MAX_GPUS;
    if (gpu >= (int)count || gpu < -1)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cannot monitor GPU %d: NVML lists %u GPU%s", gpu, count,
                        count == 1 ? "" : "s");
    kc_monitor *mon = kc__calloc(1, sizeof *mon, "the GPU monitor");
    if (!mon) return KC_STATUS_OUT_OF_MEMORY;
    mon->interval = interval > 0 ? interval : 0.5;
    int map[KC_ENV_MAX_GPUS];
    cuda_indices(map, (int)count);
    for (int i = 0; i < (int)count; i++) {
        if (gpu >= 0 && i != gpu) continue;
        mon->index[mon->n] = i;
        mon->cuda[mon->n] = map[i];
        acc_reset(&mon->acc[mon->n]);
        mon->n++;
    }
    pthread_mutex_init(&mon->mu, NULL);
    pthread_cond_init(&mon->cv, NULL);
    if (pthread_create(&mon->thread, NULL, mon_main, mon) != 0) {
        pthread_mutex_destroy(&mon->mu);
        pthread_cond_destroy(&mon->cv);
        free(mon);
        return kc__fail(KC_STATUS_INTERNAL, "cannot start the GPU monitor thread");
    }
    *out = mon;
    return KC_STATUS_OK;
}

int kc_monitor_num_gpus(const kc_monitor *mon) { return mon ? mon->n : 0; }

int kc_monitor_latest(kc_monitor *mon, int i, kc_gpu_reading *out) {
    if (!mon || !out || i < 0 || i >= mon->n) return 0;
    pthread_mutex_lock(&mon->mu);
    int has = mon->acc[i].has_latest;
    if (has) *out = mon->acc[i].latest;
    pthread_mutex_unlock(&mon->mu);
    return has;
}

int kc_monitor_summary(kc_monitor *mon, int i, kc_gpu_reading *out) {
    if (!mon || !out || i < 0 || i >= mon->n) return 0;
    pthread_mutex_lock(&mon->mu);
    const mon_acc *a = &mon->acc[i];
    int has = a->samples > 0;
    if (!has && a->has_latest) { /* nothing since the reset (a short epoch): the latest */
        *out = a->latest;
        pthread_mutex_unlock(&mon->mu);
        return 1;
    }
    if (has) {
        *out = a->latest;
        out->samples = a->samples;
        out->utilization = a->util_n ? a->util_sum / a->util_n : -1;
        out->memory_utilization = a->mem_util_n ? a->mem_util_sum / a->mem_util_n : -1;
        out->power = a->power_n ? a->power_sum / a->power_n : -1;
        out->memory_used = a->mem_peak;
        out->temperature = a->temp_peak;
    }
    pthread_mutex_unlock(&mon->mu);
    return has;
}

void kc_monitor_reset(kc_monitor *mon) {
    if (!mon) return;
    pthread_mutex_lock(&mon->mu);
    for (int i = 0; i < mon->n; i++) acc_reset(&mon->acc[i]);
    pthread_mutex_unlock(&mon->mu);
}

void kc_monitor_stop(kc_monitor *mon) {
    if (!mon) return;
    pthread_mutex_lock(&mon->mu);
    mon->stop = true;
    pthread_cond_signal(&mon->cv);
    pthread_mutex_unlock(&mon->mu);
    pthread_join(mon->thread, NULL);
    pthread_mutex_destroy(&mon->mu);
    pthread_cond_destroy(&mon->cv);
    free(mon);
}
