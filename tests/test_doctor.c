/* test_doctor.c — kerac doctor, the device policy's reason, GPU readings and the small
 * parsers behind them, on a machine without a GPU.
 *
 * The scenarios run the doctor in a child process started through the dynamic loader with
 * --inhibit-cache --library-path DIR, where DIR holds a chosen subset of the stand-in
 * NVIDIA libraries built in <build>/tests/stubs (tests/stubs/: libcuda.so.1,
 * libnvidia-ml.so.1, libcudnn.so.9 / .8, libcublas.so.13) and KERAC_MODULE_PATH points to
 * a stand-in libkerac_cuda.so that needs libcudnn.so.9 and libcublas.so.13; the stand-ins'
 * answers (GPUs, versions) come from KC_STUB_* variables. With the loader's cache
 * inhibited, the machine's own cuDNN (in /etc/ld.so.cache here) cannot stand in for a
 * missing one. The stand-in driver runs no kernels: in the healthy case the verdict "GPU"
 * rests on the doctor's checks and on the stand-in module's start, not on real GPU work.
 * Each scenario checks the verdict, its reason and fix, and the fix of the check that
 * blocks, in the text and in the JSON; and that kc__env_fallback_reason (device "auto"'s
 * warning) gives the same reason.
 *
 * In-process cases: CUDA_VISIBLE_DEVICES parsing, versions, the module's build string and
 * which GPUs its code runs on, TensorFlow's build_info.py on the fixtures of real wheels
 * (tests/fixtures/tensorflow), the input-bound verdict. (Device placement lines and the
 * fit hooks are src/model's: tests/test_placement.c.) */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <ftw.h>
#include <jansson.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "env/doctor.h"
#include "env/env.h"
#include "kerac.h"

extern char **environ;

/* ---------------------------------------------------------------- helpers */

static const char *src_dir(void) {
    const char *s = getenv("KERAC_SOURCE_DIR");
    return s && *s ? s : "..";
}

/* The stand-ins' folders; false (skip) outside ctest, a failure when ctest's build lacks them. */
static bool stub_dirs(char *lib, char *mod, size_t n) {
    const char *bin = getenv("KERAC_BINARY_DIR");
    if (!bin || !*bin) {
        print_message("    SKIP: KERAC_BINARY_DIR is not set (run through ctest)\n");
        return false;
    }
    snprintf(lib, n, "%s/tests/stubs/lib", bin);
    snprintf(mod, n, "%s/tests/stubs/module", bin);
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/libcuda.so.1", lib);
    if (access(probe, F_OK) == 0) {
        snprintf(probe, sizeof probe, "%s/libkerac_cuda.so", mod);
        if (access(probe, F_OK) == 0) return true;
    }
    fail_msg("the stand-in libraries are not built in %s and %s (tests/CMakeLists.txt builds them)", lib, mod);
    return false;
}

static void expect_in(const char *text, const char *word, int line) {
    if (!text || !strstr(text, word)) fail_msg("line %d: expected \"%s\" in:\n%s", line, word, text ? text : "(null)");
}
#define EXPECT_IN(text, word) expect_in((text), (word), __LINE__)

static int find_interp(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    char *out = data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP) {
            snprintf(out, 4096, "%s", (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
            return 1;
        }
    return 1;
}

/* Run this program as "--doctor-child MODE" through the loader, with only libdir's
 * libraries, KERAC_MODULE_PATH=moddir and the extra "KEY=VALUE" variables (NULL ends the
 * list). Output (stdout + stderr) into a malloc'd string. */
static char *run_child(const char *mode, const char *libdir, const char *moddir, const char *const *extra) {
    char interp[4096] = "", self[4096];
    dl_iterate_phdr(find_interp, interp);
    if (!interp[0]) snprintf(interp, sizeof interp, "/lib64/ld-linux-x86-64.so.2");
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(len > 0);
    self[len] = '\0';
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        static char *envp[4096];
        int k = 0;
        for (char **e = environ; *e && k < 4000; e++)
            if (strncmp(*e, "LD_LIBRARY_PATH=", 16) && strncmp(*e, "KERAC_", 6) && strncmp(*e, "KC_STUB_", 8) &&
                strncmp(*e, "CUDA_", 5))
                envp[k++] = *e;
        static char mp[4200];
        snprintf(mp, sizeof mp, "KERAC_MODULE_PATH=%s", moddir);
        envp[k++] = mp;
        for (int i = 0; extra && extra[i] && k < 4090; i++) envp[k++] = (char *)extra[i];
        envp[k] = NULL;
        char *argv[] = {interp, "--inhibit-cache", "--library-path", (char *)libdir, self, "--doctor-child",
                        (char *)mode, NULL};
        execve(interp, argv, envp);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, got = 0;
    char *out = malloc(cap);
    assert_non_null(out);
    ssize_t r;
    while ((r = read(fd[0], out + got, cap - 1 - got)) > 0) {
        got += (size_t)r;
        if (got + 1 >= cap) {
            cap *= 2;
            out = realloc(out, cap);
            assert_non_null(out);
        }
    }
    out[got] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail_msg("the child did not finish (status %d):\n%s", status, out);
    return out;
}

/* A temporary folder with links to the named stand-ins ("cuda nvml cudnn9 cublas13"). */
static void stub_subset(const char *libs, const char *stubs, char *dir, size_t n) {
    snprintf(dir, n, "%s/kerac-doctor-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(dir));
    static const struct {
        const char *key, *file;
    } map[] = {{"cuda", "libcuda.so.1"},       {"nvml", "libnvidia-ml.so.1"},  {"cudnn9", "libcudnn.so.9"},
               {"cudnn8", "libcudnn.so.8"},    {"cublas13", "libcublas.so.13"},
               {"nccl13", "libnccl.so.2"},     {"nccl12", "../lib-nccl12/libnccl.so.2"}};
    char buf[256];
    snprintf(buf, sizeof buf, "%s", libs);
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        bool ok = false;
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(map[i].key, t)) {
                char from[4200], to[4200];
                snprintf(from, sizeof from, "%s/%s", stubs, map[i].file);
                const char *base = strrchr(map[i].file, '/'); /* linked under its own name */
                snprintf(to, sizeof to, "%s/%s", dir, base ? base + 1 : map[i].file);
                assert_int_equal(symlink(from, to), 0);
                ok = true;
            }
        if (!ok) fail_msg("unknown stub '%s'", t);
    }
}

static void remove_tree(const char *dir) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) print_message("    (could not remove %s)\n", dir);
}

/* ---------------------------------------------------------------- the child */

static int child_doctor(void) {
    kc_doctor_opts o = {.tensorflow_search = KC_FALSE, .tensorflow = getenv("KC_TEST_TF")};
    kc_doctor_report *r = NULL;
    if (kc_doctor_run(&o, &r) != KC_STATUS_OK) {
        printf("DOCTOR FAILED: %s\n", kc_last_error());
        return 0;
    }
    char *text = NULL, *json = NULL;
    kc_doctor_text(r, &text);
    kc_doctor_json(r, &json);
    char reason[1024];
    kc__env_fallback_reason("MODULE ERROR", reason, sizeof reason);
    printf("%s\n----JSON----\n%s\n----REASON----\n%s\n----END----\n", text ? text : "", json ? json : "", reason);
    kc_free(text);
    kc_free(json);
    kc_doctor_report_destroy(r);
    return 0;
}

static int child_monitor(void) {
    kc_gpu_reading g[8];
    int n = 0;
    if (kc_gpu_readings(g, 8, &n) != KC_STATUS_OK) {
        printf("READINGS FAILED: %s\n", kc_last_error());
        return 0;
    }
    for (int i = 0; i < n; i++)
        printf("reading %d cuda %d name %s util %.0f memutil %.0f used %.0f total %.0f temp %.0f power %.0f limit %.0f\n",
               g[i].index, g[i].cuda_index, g[i].name, g[i].utilization, g[i].memory_utilization,
               g[i].memory_used / 1048576.0, g[i].memory_total / 1048576.0, g[i].temperature, g[i].power,
               g[i].power_limit);
    kc_monitor *mon = NULL;
    if (kc_monitor_start(-1, 0.01, &mon) != KC_STATUS_OK) {
        printf("MONITOR FAILED: %s\n", kc_last_error());
        return 0;
    }
    usleep(80 * 1000);
    kc_gpu_reading s;
    for (int i = 0; i < kc_monitor_num_gpus(mon); i++)
        if (kc_monitor_summary(mon, i, &s))
            printf("summary %d samples>1 %d util %.0f used %.0f temp %.0f\n", s.index, s.samples > 1, s.utilization,
                   s.memory_used / 1048576.0, s.temperature);
    kc_monitor_reset(mon);
    kc_monitor_stop(mon);
    /* the monitor fit starts for a model on cuda:0 */
    kc__env_device_monitor("cuda:0 (x)", &mon);
    kc_gpu_reading l;
    int tries = 0;
    while (mon && !kc_monitor_latest(mon, 0, &l) && tries++ < 200) usleep(5000);
    if (mon) printf("fit monitor gpus %d index %d cuda %d\n", kc_monitor_num_gpus(mon), l.index, l.cuda_index);
    else printf("fit monitor none\n");
    kc_monitor_stop(mon);
    return 0;
}

/* ---------------------------------------------------------------- scenarios */

typedef struct scenario {
    const char *name;
    const char *libs;
    const char *env[8];
    int exit_code;
    const char *device;     /* the verdict's device */
    const char *reason;     /* in the verdict's reason */
    const char *check;      /* a check that must have check_status */
    kc_check_status check_status;
    const char *fix;        /* in that check's fix; in the verdict's fix too when it is not GPU */
    const char *also;       /* another text expected in the report (NULL: none) */
} scenario;

#define H200 "NVIDIA H200,9.0,143771,140000,87,45,64,250,700"

static const scenario scenarios[] = {
    {"no driver", "cudnn9 cublas13", {"KC_STUB_GPUS=" H200}, 1, "cpu", "no NVIDIA driver: libcuda.so.1 not found", "driver",
     KC_CHECK_PROBLEM, "install the NVIDIA driver, 580 or newer (for CUDA 13.0)", "skipped  gpus             not checked: no NVIDIA driver"},
    {"driver too old", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KC_STUB_DRIVER_CUDA=12040", "KC_STUB_DRIVER_VERSION=550.54.14"}, 2, "cpu",
     "the NVIDIA driver 550.54.14 is too old: it supports CUDA up to 12.4, and kerac's CUDA module needs CUDA 13.0",
     "driver", KC_CHECK_PROBLEM, "update the NVIDIA driver to 580 or newer (for CUDA 13.0)", NULL},
    {"cuDNN 8 instead of 9", "cuda nvml cudnn8 cublas13", {"KC_STUB_GPUS=" H200}, 2, "cpu",
     "libcudnn.so.9 not found; the loader finds cuDNN 8.9.7 (libcudnn.so.8 at ", "cudnn", KC_CHECK_PROBLEM,
     "install cuDNN 9 for CUDA 13 (e.g. `pip install nvidia-cudnn-cu13`", "cannot be loaded: libcudnn.so.9"},
    {"cuDNN for CUDA 12", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KC_STUB_CUDNN9_VERSION=90100", "KC_STUB_CUDNN9_CUDART=12080"}, 2, "cpu",
     "cuDNN 9.1.0 at ", "cudnn", KC_CHECK_PROBLEM, "install the cuDNN 9 build for CUDA 13",
     "is built for CUDA 12.8, but kerac's module uses CUDA 13.0"},
    {"cuDNN without its convolution library", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=" H200, "KC_STUB_CUDNN9_CNN=3009"},
     2, "cpu",
     "cannot load its convolution library (cudnnCnnVersionCheck: CUDNN_STATUS_NOT_SUPPORTED_SUBLIBRARY_UNAVAILABLE: "
     "Invalid handle. Cannot load symbol cudnnCnnVersionCheck)", "cudnn", KC_CHECK_PROBLEM,
     "install the complete cuDNN 9 (libcudnn_cnn.so.9 and the other libcudnn_*.so.9 files beside ", NULL},
    {"cuDNN missing", "cuda nvml cublas13", {"KC_STUB_GPUS=" H200}, 2, "cpu",
     "cuDNN 9 not found: libcudnn.so.9: cannot open shared object file", "cudnn", KC_CHECK_PROBLEM,
     "install cuDNN 9 for CUDA 13", "problem  module"},
    {"GPU too old for CUDA 13", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=Tesla K40m,3.5,11441"}, 1, "cpu",
     "cuda:0 (Tesla K40m) is not supported: compute capability 3.5, kerac needs 8.0 or newer", "gpu:0",
     KC_CHECK_PROBLEM, "CUDA 13 cannot compile for compute capability 3.5 (its oldest is 7.5)", NULL},
    {"GPU kerac was not built for", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=Tesla T4,7.5,15360"}, 2, "cpu",
     "cuda:0 (Tesla T4) is not supported: compute capability 7.5, kerac needs 8.0 or newer", "gpu:0",
     KC_CHECK_PROBLEM, "rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=75-real", NULL},
    {"CUDA_VISIBLE_DEVICES hides every GPU", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=" H200, "CUDA_VISIBLE_DEVICES="},
     1, "cpu", "CUDA_VISIBLE_DEVICES='' hides every GPU", "visible_devices", KC_CHECK_WARNING,
     "unset CUDA_VISIBLE_DEVICES", NULL},
    {"CUDA_VISIBLE_DEVICES names a missing GPU", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "CUDA_VISIBLE_DEVICES=3"}, 2, "cpu",
     "CUDA_VISIBLE_DEVICES='3' names GPU 3, which does not exist (this machine has 1 GPU: 0)", "visible_devices",
     KC_CHECK_PROBLEM, "set CUDA_VISIBLE_DEVICES to GPUs that exist", NULL},
    {"healthy", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=" H200}, 0, "cuda:0 (NVIDIA H200)",
     "cuda:0 (NVIDIA H200, compute capability 9.0) passed every check and the CUDA backend starts on it", "gpu:0",
     KC_CHECK_OK, "", "cuda:0 NVIDIA H200, compute capability 9.0, 140.4 GiB (136.7 GiB free): runs kerac's native code (sm_90)"},
    {"healthy, CUDA_VISIBLE_DEVICES reorders and ends early", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=Tesla K40m,3.5,11441;" H200, "CUDA_VISIBLE_DEVICES=1,5,0"}, 0, "cuda:0 (NVIDIA H200)",
     "passed every check", "visible_devices", KC_CHECK_WARNING, "set CUDA_VISIBLE_DEVICES to GPUs that exist",
     "entry '5' names GPU 5, which does not exist (this machine has 2 GPUs: 0, 1), so it and the entries after it are ignored; kerac sees 1 GPU"},
    {"unsupported cuda:0 beside a supported cuda:1", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=Tesla T4,7.5,15360;" H200}, 2, "cpu", "cuda:0 (Tesla T4) is not supported", "gpu:0",
     KC_CHECK_PROBLEM, "rebuild kerac with -DCMAKE_CUDA_ARCHITECTURES=75-real", "use --device cuda:1 (NVIDIA H200), which kerac supports"},
    {"older driver minor: native code runs", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KC_STUB_MODULE_INFO=kerac_cuda 0.1.0: CUDA 13.2.40, cuDNN 9.19.0, cuBLAS 13.1.0, architectures 80-real 90-real 100-real 120-real 90-virtual"},
     0, "cuda:0 (NVIDIA H200)", "passed every check", "driver", KC_CHECK_WARNING,
     "update the NVIDIA driver to one for CUDA 13.2 or newer", "through CUDA's minor-version compatibility"},
    {"older driver minor: PTX cannot be compiled", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=NVIDIA Thor,11.0,131072", "KC_STUB_MODULE_INFO=kerac_cuda 0.1.0: CUDA 13.2.40, cuDNN 9.19.0, cuBLAS 13.1.0, architectures 80-real 90-real 100-real 120-real 90-virtual"},
     2, "cpu", "cuda:0 (NVIDIA Thor) needs kerac's PTX, and the NVIDIA driver is older than the CUDA that made it",
     "gpu:0", KC_CHECK_PROBLEM, "update the NVIDIA driver to one for CUDA 13.2 or newer", NULL},
    {"PTX on a newer GPU", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=NVIDIA Thor,11.0,131072"}, 0,
     "cuda:0 (NVIDIA Thor)", "passed every check", "gpu:0", KC_CHECK_OK, "",
     "runs kerac's PTX (compute_90), compiled by the driver at first use"},
    {"backend fails to start", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KC_STUB_MODULE_INIT_ERROR=cuda:0: a test kernel failed: unspecified launch failure"}, 2,
     "cpu", "the CUDA backend does not start on cuda:0: the cuda backend cannot start: cuda:0: a test kernel failed",
     "backend", KC_CHECK_PROBLEM, "run `nvidia-smi`", NULL},
    {"toolkit stub instead of the driver", "cuda nvml cudnn9 cublas13", {"KC_STUB_GPUS=" H200, "KC_STUB_CUINIT=34"}, 2,
     "cpu", "is the CUDA toolkit's stub library, not the NVIDIA driver", "driver", KC_CHECK_PROBLEM,
     "from LD_LIBRARY_PATH (it is for linking only) and install the NVIDIA driver", NULL},
    {"driver that cannot start", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KC_STUB_CUINIT=999", "KERAC_DEVICE=cuda"}, 2, "cpu",
     "cannot start: CUDA_ERROR_UNKNOWN: unknown error", "driver", KC_CHECK_PROBLEM, "reboot",
     "warning  env              KERAC_DEVICE='cuda': models fail to build here (no usable GPU"},
    {"NCCL for the module's CUDA", "cuda nvml cudnn9 cublas13 nccl13", {"KC_STUB_GPUS=" H200}, 0,
     "cuda:0 (NVIDIA H200)", "passed every check", "nccl", KC_CHECK_OK, "",
     "NCCL 2.21.5 (for CUDA 13.0) at "},
    {"NCCL for another CUDA", "cuda nvml cudnn9 cublas13 nccl12", {"KC_STUB_GPUS=" H200}, 0, "cuda:0 (NVIDIA H200)",
     "passed every check", "nccl", KC_CHECK_WARNING, "install NCCL 2 for CUDA 13 (e.g. `pip install nvidia-nccl-cu13`",
     "is built for CUDA 12.4, but kerac's module uses CUDA 13.0"},
    {"KERAC_DEVICE names a GPU that does not exist", "cuda nvml cudnn9 cublas13",
     {"KC_STUB_GPUS=" H200, "KERAC_DEVICE=cuda:2", "KERAC_DEVCIE=auto"}, 0, "cuda:0 (NVIDIA H200)", "passed every check",
     "env", KC_CHECK_PROBLEM, "set KERAC_DEVICE to a GPU that exists",
     "warning  env              KERAC_DEVCIE='auto' is not a variable kerac reads"},
};

/* The body between two markers of the child's output (malloc'd). */
static char *section(const char *out, const char *from, const char *to) {
    const char *a = strstr(out, from);
    if (!a) return NULL;
    a += strlen(from);
    const char *b = strstr(a, to);
    if (!b) return NULL;
    return strndup(a, (size_t)(b - a));
}

static const char *status_words[] = {"ok", "skipped", "warning", "problem"};

static void check_scenario(const scenario *sc, const char *out) {
    char *text = section(out, "", "----JSON----");
    char *json = section(out, "----JSON----\n", "----REASON----");
    char *reason = section(out, "----REASON----\n", "\n----END----");
    if (!text || !json || !reason) fail_msg("[%s] malformed child output:\n%s", sc->name, out);
    /* text */
    static const char *words[] = {"gpu", "cpu", "broken"};
    char want[160];
    snprintf(want, sizeof want, "verdict: %s (exit %d", words[sc->exit_code], sc->exit_code);
    EXPECT_IN(text, want);
    EXPECT_IN(text, sc->reason);
    snprintf(want, sizeof want, "\n%-8s %-16s ", status_words[sc->check_status], sc->check);
    EXPECT_IN(text, want);
    if (sc->fix[0]) {
        EXPECT_IN(text, sc->fix);
        if (sc->exit_code != 0) EXPECT_IN(strstr(text, "\nverdict: "), sc->fix); /* the verdict's fix line */
    }
    if (sc->also) EXPECT_IN(text, sc->also);
    /* JSON */
    json_error_t err;
    json_t *root = json_loads(json, 0, &err);
    if (!root) fail_msg("[%s] the JSON does not parse (%s, line %d):\n%s", sc->name, err.text, err.line, json);
    json_t *v = json_object_get(root, "verdict");
    assert_int_equal(json_integer_value(json_object_get(v, "exit_code")), sc->exit_code);
    assert_string_equal(json_string_value(json_object_get(v, "verdict")), words[sc->exit_code]);
    assert_string_equal(json_string_value(json_object_get(v, "device")), sc->device);
    EXPECT_IN(json_string_value(json_object_get(v, "reason")), sc->reason);
    if (sc->exit_code != 0 && sc->fix[0]) EXPECT_IN(json_string_value(json_object_get(v, "fix")), sc->fix);
    if (sc->exit_code == 0) assert_string_equal(json_string_value(json_object_get(v, "fix")), "");
    json_t *checks = json_object_get(root, "checks");
    bool found = false;
    for (size_t i = 0; i < json_array_size(checks); i++) {
        json_t *c = json_array_get(checks, i);
        const char *st = json_string_value(json_object_get(c, "status"));
        const char *fix = json_string_value(json_object_get(c, "fix"));
        if (!strcmp(st, "problem") || !strcmp(st, "warning")) assert_true(fix && fix[0]); /* every problem has its fix */
        if (strcmp(json_string_value(json_object_get(c, "id")), sc->check) != 0) continue;
        if (strcmp(st, status_words[sc->check_status]) != 0) continue;
        if (sc->fix[0] && !strstr(fix, sc->fix)) continue;
        found = true;
    }
    if (!found) fail_msg("[%s] no %s check '%s' with fix '%s' in the JSON:\n%s", sc->name, status_words[sc->check_status],
                         sc->check, sc->fix, json);
    json_decref(root);
    /* device auto's reason: the doctor's when it finds the blocker, else the module's error */
    if (sc->exit_code == 0 || strstr(sc->reason, "does not start")) assert_string_equal(reason, "MODULE ERROR");
    else EXPECT_IN(reason, sc->reason);
    free(text);
    free(json);
    free(reason);
}

static void test_scenarios(void **state) {
    (void)state;
    char lib[4096], mod[4096];
    if (!stub_dirs(lib, mod, sizeof lib)) skip();
    for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
        const scenario *sc = &scenarios[i];
        char dir[4096];
        stub_subset(sc->libs, lib, dir, sizeof dir);
        char *out = run_child("doctor", dir, mod, sc->env);
        remove_tree(dir);
        print_message("    %-52s exit %d\n", sc->name, sc->exit_code);
        if (getenv("KC_TEST_VERBOSE")) print_message("%s\n", out);
        check_scenario(sc, out);
        free(out);
    }
}

/* TensorFlow against the stand-in machine: the fixtures of real wheels. */
static void test_tensorflow_scenarios(void **state) {
    (void)state;
    char lib[4096], mod[4096], dir[4096], tf[4200];
    if (!stub_dirs(lib, mod, sizeof lib)) skip();
    /* tensorflow-cpu: a CPU-only build, whatever the machine */
    snprintf(tf, sizeof tf, "KC_TEST_TF=%s/tests/fixtures/tensorflow/tensorflow-cpu-2.16.1", src_dir());
    stub_subset("cuda nvml cudnn9 cublas13", lib, dir, sizeof dir);
    const char *env1[] = {"KC_STUB_GPUS=" H200, tf, NULL};
    char *out = run_child("doctor", dir, mod, env1);
    EXPECT_IN(out, "warning  tensorflow       TensorFlow 2.16.1 (tensorflow-cpu, ");
    EXPECT_IN(out, "is a CPU-only build: it never uses a GPU");
    EXPECT_IN(out, "fix: pip install 'tensorflow[and-cuda]==2.16.1' (Linux) for the GPU build (and uninstall this package)");
    EXPECT_IN(out, "verdict: gpu (exit 0"); /* TensorFlow does not change kerac's verdict */
    free(out);
    remove_tree(dir);

    /* tensorflow 2.15.1 (CUDA 12.2, cuDNN 8) on a machine without a driver */
    snprintf(tf, sizeof tf, "KC_TEST_TF=%s/tests/fixtures/tensorflow/tensorflow-2.15.1", src_dir());
    stub_subset("cudnn9 cublas13", lib, dir, sizeof dir);
    const char *env2[] = {tf, NULL};
    out = run_child("doctor", dir, mod, env2);
    EXPECT_IN(out, "problem  tensorflow       TensorFlow 2.15.1 (tensorflow, ");
    EXPECT_IN(out, "\"Could not load dynamic library 'libcuda.so.1'\": no NVIDIA driver, so TensorFlow runs on the CPU");
    EXPECT_IN(out, "fix: install the NVIDIA driver, 535 or newer (for CUDA 12.2)");
    EXPECT_IN(out, "\"build_info\": \"");
    EXPECT_IN(out, "\"cuda_version\": \"12.2.0\"");
    free(out);
    remove_tree(dir);

    /* tensorflow 2.18.0 (CUDA 12.5.1, cuDNN 9, pins nvidia-cudnn-cu12==9.3.0.75) beside an
     * older cuDNN wheel, on a machine with a GPU it has no code for */
    char site[1024], *cmd = NULL;
    snprintf(site, sizeof site, "%s/kerac-doctor-tf-XXXXXX", getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    assert_non_null(mkdtemp(site));
    assert_true(asprintf(&cmd,
             "cp -r '%s/tests/fixtures/tensorflow/tensorflow-2.18.0/.' '%s/' && mkdir -p '%s/nvidia/cudnn/lib' "
             "'%s/nvidia_cudnn_cu12-9.1.0.70.dist-info' && : > '%s/nvidia/cudnn/lib/libcudnn.so.9'",
             src_dir(), site, site, site, site) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    snprintf(tf, sizeof tf, "KC_TEST_TF=%s", site);
    stub_subset("cuda nvml cudnn9 cublas13", lib, dir, sizeof dir);
    const char *env3[] = {"KC_STUB_GPUS=" H200 ";Tesla K80,3.7,11441", tf, NULL};
    out = run_child("doctor", dir, mod, env3);
    if (getenv("KC_TEST_VERBOSE")) print_message("%s\n", out);
    EXPECT_IN(out, "\"Loaded runtime CuDNN library: 9.1.0 but source was compiled with: 9.3.0. CuDNN library needs to "
                   "have matching major version and equal or higher minor version\"");
    EXPECT_IN(out, "fix: install cuDNN 9.3 or a newer 9.x for CUDA 12 (pip install nvidia-cudnn-cu12==9.3.0.75)");
    EXPECT_IN(out, "\"Ignoring visible gpu device (device: 1, name: Tesla K80, compute capability: 3.7). The minimum "
                   "required Cuda capability is 6.0\"");
    char found[1][KC_ENV_PATH];
    if (kc__ldcache_find("libcudart.so.12", found, 1) == 0) /* else this machine has CUDA 12 */
        EXPECT_IN(out, "\"Cannot dlopen some GPU libraries ... Skipping registering GPU devices\": libcudart.so.12");
    EXPECT_IN(out, "\"cudnn_pinned\": \"9.3.0.75\"");
    EXPECT_IN(out, "verdict: gpu (exit 0"); /* kerac's verdict: cuda:0 is the H200 */
    free(out);
    remove_tree(dir);
    remove_tree(site);
}

/* LD_LIBRARY_PATH entries: what each holds, and the toolkit's stub libcuda.so. The child
 * loads through --library-path, so the variable is only read, not used by the loader. */
static void test_ld_library_path(void **state) {
    (void)state;
    char lib[4096], mod[4096], dir[4096], stubs[4200], *cmd = NULL;
    if (!stub_dirs(lib, mod, sizeof lib)) skip();
    stub_subset("cuda nvml cudnn9 cublas13", lib, dir, sizeof dir);
    snprintf(stubs, sizeof stubs, "%s/cuda/lib64/stubs", dir);
    /* a toolkit's layout: lib64/libcudart_static.a beside lib64/stubs/libcuda.so */
    assert_true(asprintf(&cmd, "mkdir -p '%s' && cp '%s/libcuda.so.1' '%s/libcuda.so' && : > '%s/../libcudart_static.a'",
                         stubs, lib, stubs, stubs) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    char llp[12000];
    snprintf(llp, sizeof llp, "LD_LIBRARY_PATH=%s:/nonexistent/kerac:%s", lib, stubs);
    const char *env[] = {"KC_STUB_GPUS=" H200, llp, NULL};
    char *out = run_child("doctor", dir, mod, env);
    remove_tree(dir);
    char want[8400];
    snprintf(want, sizeof want, "LD_LIBRARY_PATH entry %s holds libcuda.so.1, libnvidia-ml.so.1, libcudnn.so.9, libcudnn.so.8, "
             "libcublas.so.13", lib);
    EXPECT_IN(out, want);
    snprintf(want, sizeof want, "warning  ld_library_path  LD_LIBRARY_PATH entry %s holds the CUDA toolkit's stub libcuda.so", stubs);
    EXPECT_IN(out, want);
    snprintf(want, sizeof want, "fix: remove %s from LD_LIBRARY_PATH: it is for linking, not for running", stubs);
    EXPECT_IN(out, want);
    EXPECT_IN(out, "verdict: gpu (exit 0");
    free(out);
}

static void test_monitor(void **state) {
    (void)state;
    char lib[4096], mod[4096], dir[4096];
    if (!stub_dirs(lib, mod, sizeof lib)) skip();
    stub_subset("cuda nvml", lib, dir, sizeof dir);
    const char *env[] = {"KC_STUB_GPUS=Tesla K40m,3.5,11441,10000,5,1,40,60,235;" H200, "CUDA_VISIBLE_DEVICES=1", NULL};
    char *out = run_child("monitor", dir, mod, env);
    remove_tree(dir);
    print_message("%s", out);
    EXPECT_IN(out, "reading 0 cuda -1 name Tesla K40m util 5 memutil 1 used 1441 total 11441 temp 40 power 60 limit 235\n");
    EXPECT_IN(out, "reading 1 cuda 0 name NVIDIA H200 util 87 memutil 45 used 3771 total 143771 temp 64 power 250 limit 700\n");
    EXPECT_IN(out, "summary 0 samples>1 1 util 5 used 1441 temp 40\n");
    EXPECT_IN(out, "summary 1 samples>1 1 util 87 used 3771 temp 64\n");
    EXPECT_IN(out, "fit monitor gpus 1 index 1 cuda 0\n");
    free(out);
    /* without NVML: a clear error */
    stub_subset("cuda", lib, dir, sizeof dir);
    const char *env2[] = {"KC_STUB_GPUS=" H200, NULL};
    out = run_child("monitor", dir, mod, env2);
    remove_tree(dir);
    EXPECT_IN(out, "READINGS FAILED: cannot read the GPUs: NVML (libnvidia-ml.so.1, part of the NVIDIA driver) cannot be "
                   "loaded: libnvidia-ml.so.1: cannot open shared object file");
    free(out);
}

/* ---------------------------------------------------------------- in process */

static void test_cvd(void **state) {
    (void)state;
    kc__cvd c;
    const char uu[3][96] = {"GPU-aaaa1111-0000", "GPU-bbbb2222-0000", "GPU-aaaa3333-0000"};
    kc__cvd_parse(NULL, 2, NULL, &c);
    assert_false(c.set);
    kc__cvd_parse("", 2, NULL, &c);
    assert_true(c.set && c.hides_on_purpose && c.n_visible == 0);
    kc__cvd_parse("-1", 2, NULL, &c);
    assert_true(c.hides_on_purpose);
    kc__cvd_parse("1,0", 2, NULL, &c);
    assert_int_equal(c.n_visible, 2);
    assert_int_equal(c.visible[0], 1);
    assert_int_equal(c.visible[1], 0);
    assert_int_equal(c.bad, -1);
    kc__cvd_parse("0, 2 ,1", 2, NULL, &c); /* ends at 2: only GPU 0 */
    assert_int_equal(c.n_visible, 1);
    assert_int_equal(c.bad, 1);
    assert_string_equal(c.bad_text, "2");
    EXPECT_IN(c.bad_why, "names GPU 2, which does not exist (this machine has 2 GPUs: 0, 1)");
    kc__cvd_parse("1,1", 2, NULL, &c);
    assert_int_equal(c.n_visible, 1);
    EXPECT_IN(c.bad_why, "repeats GPU 1");
    kc__cvd_parse("0,-1,1", 2, NULL, &c);
    assert_int_equal(c.n_visible, 1);
    kc__cvd_parse("zero", 2, NULL, &c);
    assert_int_equal(c.n_visible, 0);
    EXPECT_IN(c.bad_why, "is not a GPU index or UUID");
    kc__cvd_parse("GPU-bbbb,GPU-aaaa3", 3, uu, &c); /* unique UUID prefixes */
    assert_int_equal(c.n_visible, 2);
    assert_int_equal(c.visible[0], 1);
    assert_int_equal(c.visible[1], 2);
    kc__cvd_parse("GPU-aaaa", 3, uu, &c); /* ambiguous */
    assert_int_equal(c.n_visible, 0);
    EXPECT_IN(c.bad_why, "matches 2 GPUs");
    kc__cvd_parse("7", -1, NULL, &c); /* without NVML an index is taken as given */
    assert_int_equal(c.n_visible, 1);
    assert_int_equal(c.visible[0], 7);
}

static void test_versions_and_module(void **state) {
    (void)state;
    char b[32];
    assert_string_equal(kc__ver_str(kc__ver_parse("13.0.88"), true, b, sizeof b), "13.0.88");
    assert_string_equal(kc__ver_str(kc__ver_parse("12.5"), true, b, sizeof b), "12.5.0");
    assert_false(kc__ver_known(kc__ver_parse("x1")));
    assert_string_equal(kc__ver_str(kc__ver_from_cuda_int(12080), false, b, sizeof b), "12.8");
    assert_string_equal(kc__ver_str(kc__cudnn_version(91900), true, b, sizeof b), "9.19.0");
    assert_string_equal(kc__ver_str(kc__cudnn_version(8907), true, b, sizeof b), "8.9.7");
    assert_true(kc__ver_cmp(kc__ver_parse("13.1"), kc__ver_parse("13.0.99")) > 0);
    assert_string_equal(kc__driver_branch_for(kc__ver_parse("13.0")), "580");
    assert_string_equal(kc__driver_branch_for(kc__ver_parse("12.5.1")), "555");
    assert_null(kc__driver_branch_for(kc__ver_parse("13.7")));

    kc__module m;
    memset(&m, 0, sizeof m);
    assert_true(kc__module_parse_info("kerac_cuda 0.1.0: CUDA 13.0.88, cuDNN 9.19.0, cuBLAS 13.1.0, architectures "
                                      "80-real 90-real 100-real 120-real 90-virtual",
                                      &m));
    assert_string_equal(m.kerac_version, "0.1.0");
    assert_int_equal(m.cuda.major, 13);
    assert_int_equal(m.cudnn.minor, 19);
    assert_int_equal(m.n_arch, 5);
    assert_int_equal(m.min_cc, 80);
    int code = 0;
    assert_int_equal(kc__module_support(&m, 90, true, &code), KC__SUPPORT_SASS);
    assert_int_equal(code, 90);
    assert_int_equal(kc__module_support(&m, 86, true, &code), KC__SUPPORT_SASS); /* sm_80 runs on 8.6 */
    assert_int_equal(code, 80);
    assert_int_equal(kc__module_support(&m, 89, true, &code), KC__SUPPORT_SASS);
    assert_int_equal(kc__module_support(&m, 103, true, &code), KC__SUPPORT_SASS); /* sm_100 on 10.3 */
    assert_int_equal(code, 100);
    assert_int_equal(kc__module_support(&m, 110, true, &code), KC__SUPPORT_PTX); /* compute_90 */
    assert_int_equal(code, 90);
    assert_int_equal(kc__module_support(&m, 110, false, &code), KC__SUPPORT_PTX_OLD_DRIVER);
    assert_int_equal(kc__module_support(&m, 75, true, &code), KC__SUPPORT_NONE);
    assert_int_equal(kc__module_support(&m, 35, true, &code), KC__SUPPORT_NONE);
    /* a plain "86" is both SASS and PTX; "90a" runs on 9.0 only; "native" is not a list */
    assert_true(kc__module_parse_info("kerac_cuda 0.1.0: CUDA 12.4.1, cuDNN 9.1.0, cuBLAS 12.4.5, architectures 86 90a-real", &m));
    assert_int_equal(kc__module_support(&m, 89, true, &code), KC__SUPPORT_SASS);
    assert_int_equal(code, 86);
    assert_int_equal(kc__module_support(&m, 90, true, &code), KC__SUPPORT_SASS);
    assert_int_equal(code, 90);
    assert_int_equal(kc__module_support(&m, 100, true, &code), KC__SUPPORT_PTX); /* 90a is not portable; 86 PTX is */
    assert_int_equal(code, 86);
    assert_true(kc__module_parse_info("kerac_cuda 0.1.0: CUDA 12.4.1, cuDNN 9.1.0, cuBLAS 12.4.5, architectures native", &m));
    assert_int_equal(m.n_arch, 0);
    assert_int_equal(kc__module_support(&m, 90, true, &code), KC__SUPPORT_UNKNOWN);
    assert_false(kc__module_parse_info("something else", &m));
    assert_int_equal(kc__toolkit_min_cc(kc__ver_parse("13.0")), 75);
    assert_int_equal(kc__toolkit_min_cc(kc__ver_parse("12.2")), 50);
}

static void tf_fixture(const char *name, kc__tf *tf) {
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/tensorflow/%s", src_dir(), name);
    if (!kc__tf_read(path, tf)) fail_msg("cannot read %s: %s", path, tf->parse_error);
}

static void test_tensorflow_build_info(void **state) {
    (void)state;
    kc__tf tf;
    char b[32];
    tf_fixture("tensorflow-2.15.1", &tf);
    assert_true(tf.parsed && tf.is_cuda_build && !tf.is_rocm_build);
    assert_string_equal(tf.package, "tensorflow");
    assert_string_equal(tf.version, "2.15.1");
    assert_string_equal(kc__ver_str(tf.cuda, false, b, sizeof b), "12.2");
    assert_int_equal(tf.cudnn.major, 8);
    assert_string_equal(kc__ver_str(tf.cudnn_pin, true, b, sizeof b), "8.9.4");
    assert_int_equal(tf.n_archs, 5);
    assert_string_equal(tf.archs[0], "sm_50");
    assert_string_equal(tf.archs[4], "compute_80");
    assert_int_equal(kc__tf_min_cc(&tf), 50);
    assert_false(kc__tf_runs_on(&tf, 37));
    assert_true(kc__tf_runs_on(&tf, 61));  /* sm_60 */
    assert_true(kc__tf_runs_on(&tf, 90));  /* compute_80 PTX */

    tf_fixture("tensorflow-2.18.0", &tf);
    assert_string_equal(tf.version, "2.18.0");
    assert_string_equal(kc__ver_str(tf.cuda, true, b, sizeof b), "12.5.1");
    assert_int_equal(tf.cudnn.major, 9);
    assert_string_equal(kc__ver_str(tf.cudnn_pin, true, b, sizeof b), "9.3.0");
    assert_int_equal(kc__tf_min_cc(&tf), 60);
    assert_false(kc__tf_runs_on(&tf, 50));

    tf_fixture("tensorflow-cpu-2.16.1", &tf);
    assert_true(tf.parsed);
    assert_false(tf.is_cuda_build);
    assert_string_equal(tf.package, "tensorflow-cpu");
    assert_string_equal(tf.version, "2.16.1");
    assert_false(kc__ver_known(tf.cuda));

    /* the package folder and the file itself work too */
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/tensorflow/tensorflow-2.18.0/tensorflow", src_dir());
    assert_true(kc__tf_read(path, &tf));
    assert_string_equal(tf.version, "2.18.0");
    snprintf(path, sizeof path, "%s/tests/fixtures/tensorflow/tensorflow-2.15.1/tensorflow/python/platform/build_info.py",
             src_dir());
    assert_true(kc__tf_read(path, &tf));
    assert_string_equal(tf.version, "2.15.1");
    /* a folder without TensorFlow, a missing path */
    snprintf(path, sizeof path, "%s/tests/fixtures", src_dir());
    assert_false(kc__tf_read(path, &tf));
    EXPECT_IN(tf.parse_error, "no tensorflow/python/platform/build_info.py in");
    assert_false(kc__tf_read("/nonexistent/site-packages", &tf));
    EXPECT_IN(tf.parse_error, "does not exist");

    /* other spellings of the literal: a dict, and the old variables */
    memset(&tf, 0, sizeof tf);
    assert_true(kc__tf_parse_build_info("build_info = {\"is_cuda_build\": True, \"cuda_version\": \"11.8\", "
                                        "\"cudnn_version\": \"8\", \"cuda_compute_capabilities\": [\"sm_35\", \"compute_80\"]}",
                                        &tf));
    assert_true(tf.is_cuda_build);
    assert_int_equal(tf.cuda.minor, 8);
    assert_int_equal(tf.n_archs, 2);
    assert_true(kc__tf_parse_build_info("is_rocm_build = False\nis_cuda_build = True\ncuda_version_number = '10.1'\n"
                                        "cudnn_version_number = '7'\n",
                                        &tf));
    assert_true(tf.is_cuda_build);
    assert_int_equal(tf.cuda.major, 10);
    assert_int_equal(tf.cudnn.major, 7);
    assert_false(kc__tf_parse_build_info("print('hello')", &tf));
}

static void test_input_bound(void **state) {
    (void)state;
    char buf[256];
    assert_int_equal(kc_input_bound_verdict(3.8, 10.0, "cuda:0 (NVIDIA H200)", buf, sizeof buf), 1);
    assert_string_equal(buf, "the GPU waited for data 38% of the step time; raise --prefetch or use more loader threads");
    assert_int_equal(kc_input_bound_verdict(2.0, 4.0, "cpu", buf, sizeof buf), 1);
    assert_string_equal(buf, "the CPU waited for data 50% of the step time; raise --prefetch or use more loader threads");
    assert_int_equal(kc_input_bound_verdict(0.5, 10.0, "cuda:0", buf, sizeof buf), 0); /* 5%: not input-bound */
    assert_string_equal(buf, "");
    assert_int_equal(kc_input_bound_verdict(0.02, 0.04, "cuda:0", buf, sizeof buf), 0); /* too short to tell */
    assert_int_equal(kc_input_bound_verdict(1.0, 0.0, "cuda:0", buf, sizeof buf), 0);
    assert_int_equal(kc_input_bound_verdict(12.0, 10.0, "cuda:0", buf, sizeof buf), 1); /* capped at 100% */
    EXPECT_IN(buf, "100%");
}

static void test_doctor_api_errors(void **state) {
    (void)state;
    assert_int_equal(kc_doctor_run(NULL, NULL), KC_STATUS_INVALID_ARGUMENT);
    kc_doctor_check c;
    assert_int_equal(kc_doctor_get_check(NULL, 0, &c), KC_STATUS_INVALID_ARGUMENT);
    char *t = NULL;
    assert_int_equal(kc_doctor_text(NULL, &t), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_doctor_json(NULL, &t), KC_STATUS_INVALID_ARGUMENT);
    assert_int_equal(kc_doctor_num_checks(NULL), 0);
    kc_doctor_report_destroy(NULL);
    assert_int_equal(kc_monitor_start(0, -1, NULL), KC_STATUS_INVALID_ARGUMENT);
    kc_monitor *mon = (kc_monitor *)1;
    assert_int_equal(kc_monitor_start(0, -1, &mon), KC_STATUS_INVALID_ARGUMENT);
    assert_null(mon);
    kc_monitor_stop(NULL);
    kc_gpu_reading g;
    assert_int_equal(kc_monitor_latest(NULL, 0, &g), 0);
    assert_int_equal(kc_gpu_readings(NULL, 0, NULL), KC_STATUS_INVALID_ARGUMENT);
}

/* The CPU check's rule (the load itself is the machine's, so the rule is tested apart). */
static void test_cpu_busy_rule(void **state) {
    (void)state;
    assert_true(kc__cpu_busy(2.2, 2, NULL, NULL));        /* as busy as the cores: OpenMP's spinning hurts */
    assert_true(kc__cpu_busy(5.0, 4, "active", NULL));
    assert_false(kc__cpu_busy(1.0, 2, NULL, NULL));       /* room left */
    assert_false(kc__cpu_busy(3.0, 2, "passive", NULL));  /* threads already sleep while they wait */
    assert_false(kc__cpu_busy(3.0, 2, "PASSIVE", NULL));
    assert_false(kc__cpu_busy(-1, 2, NULL, NULL));        /* no /proc/loadavg */
    assert_false(kc__cpu_busy(3.0, 2, NULL, "3000"));     /* kerac's default: microseconds of spinning */
    assert_false(kc__cpu_busy(3.0, 2, "active", "3000")); /* GOMP_SPINCOUNT wins over the policy */
    assert_true(kc__cpu_busy(3.0, 2, NULL, "300000"));    /* libgomp's default count, set by hand */
    assert_true(kc__cpu_busy(3.0, 2, "passive", "infinite"));
    assert_false(kc__cpu_busy(3.0, 2, NULL, "3k"));       /* libgomp's suffixes: 3,000 */
    assert_true(kc__cpu_busy(3.0, 2, NULL, "300k"));
    assert_true(kc__cpu_busy(3.0, 2, NULL, "lots"));      /* not a count: libgomp keeps its default */
}

/* debt2: every KERAC_* variable kerac reads (each "KERAC_..." string literal of the .c files
 * of src/ and tools/: getenv's and kc_device_opts_default's names) is one the doctor's env
 * check knows, so setting it is not reported as a misspelling. */
static int g_vars_found;
static int scan_for_variables(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    (void)st, (void)ftw;
    const size_t len = strlen(path);
    if (type != FTW_F || len < 2 || strcmp(path + len - 2, ".c") != 0) return 0;
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("cannot read %s", path);
    char line[1024];
    while (fgets(line, sizeof line, f))
        for (const char *p = strstr(line, "\"KERAC_"); p; p = strstr(p + 1, "\"KERAC_")) {
            const size_t n = strspn(p + 1, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
            if (p[1 + n] != '"' || n <= 6 || n >= 64) continue; /* a name past the prefix */
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)n, p + 1);
            g_vars_found++;
            if (!kc__doc_env_doc(name)) fail_msg("%s (read in %s) is unknown to the doctor's env check", name, path);
        }
    fclose(f);
    return 0;
}

static void test_variables_known(void **state) {
    (void)state;
    const char *const dirs[] = {"src", "tools"};
    for (int i = 0; i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", src_dir(), dirs[i]);
        if (nftw(path, scan_for_variables, 16, FTW_PHYS) != 0) fail_msg("cannot walk %s (set KERAC_SOURCE_DIR)", path);
    }
    assert_true(g_vars_found >= 20); /* the scan saw the variables */
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--doctor-child")) {
        if (!strcmp(argv[2], "doctor")) return child_doctor();
        if (!strcmp(argv[2], "monitor")) return child_monitor();
        return 2;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cvd),
        cmocka_unit_test(test_versions_and_module),
        cmocka_unit_test(test_tensorflow_build_info),
        cmocka_unit_test(test_input_bound),
        cmocka_unit_test(test_doctor_api_errors),
        cmocka_unit_test(test_scenarios),
        cmocka_unit_test(test_tensorflow_scenarios),
        cmocka_unit_test(test_ld_library_path),
        cmocka_unit_test(test_monitor),
        cmocka_unit_test(test_cpu_busy_rule),
        cmocka_unit_test(test_variables_known), /* debt2 */
    };
    return cmocka_run_group_tests_name("doctor", tests, NULL, NULL);
}
