/* test_device_opts.c — kc_device_opts: the device options reach the backend through the API,
 * the environment is read in one place (kc_device_opts_default) and only for what the
 * caller did not give, and nothing here needs setenv to choose a device.
 *
 *   env_defaults          kc_device_opts_default maps every KERAC_* device variable to its
 *                         field; unset ones stay zero; a size that does not parse names its
 *                         variable and leaves the other fields filled.
 *   cpu_and_bad_device    with KERAC_DEVICE naming a device that does not exist, a model
 *                         loaded with device "cpu" runs on the CPU, "tpu" is an argument
 *                         error naming 'tpu', and a model given no options fails naming the
 *                         variable's value; the environment is the same afterwards.
 *   memory_limit          opts.memory_limit caps the CPU backend (kc_backend_open_ex) and a
 *                         model built with it.
 *   opts_reach_module     a stand-in CUDA module (tests/stubs/echo_module.c) reports the
 *                         options it got: the caller's over the environment's, the
 *                         environment's when the caller gives none (kc_backend_open, a model
 *                         without options), and through kc_model_from_json_ex.
 *   set_after_build       kc_model_set_device_opts on a built model is a state error. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"

static const char *const k_vars[] = {"KERAC_DEVICE",         "KERAC_GPU_MEMORY",           "KERAC_MEMORY_LIMIT",
                                     "KERAC_CUDNN_BENCHMARK", "KERAC_CUDNN_WORKSPACE_LIMIT", "KERAC_DETERMINISTIC",
                                     "KERAC_TF32",           "KERAC_CUDNN_GROUPED"};

static int clear_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof k_vars / sizeof k_vars[0]; i++) unsetenv(k_vars[i]);
    unsetenv("KERAC_MODULE_PATH");
    return 0;
}

#define EXPECT_WORD(msg, word)                                                                       \
    do {                                                                                             \
        if (!strstr((msg), (word))) fail_msg("expected \"%s\" in the message: %s", (word), (msg)); \
    } while (0)

/* A small model's Keras JSON (built on the CPU whatever the environment says). */
static char *small_json(void) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("small", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 3)), KC_STATUS_OK);
    kc_device_opts cpu = {.device = "cpu"};
    assert_int_equal(kc_model_set_device_opts(m, &cpu), KC_STATUS_OK);
    char *json = NULL;
    assert_int_equal(kc_model_to_json(m, 3, &json), KC_STATUS_OK);
    kc_model_destroy(m);
    return json;
}

static void test_env_defaults(void **state) {
    (void)state;
    kc_device_opts o;
    memset(&o, 0x5a, sizeof o);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_null(o.device);
    assert_null(o.gpu_memory);
    assert_int_equal(o.memory_limit, 0);
    assert_int_equal(o.cudnn_workspace_limit, 0);
    assert_int_equal(o.cudnn_benchmark, KC_DEFAULT);
    assert_int_equal(o.deterministic, KC_DEFAULT);
    assert_int_equal(o.tf32, KC_DEFAULT);
    assert_int_equal(o.cudnn_grouped, KC_DEFAULT);

    setenv("KERAC_DEVICE", "cuda:3", 1);
    setenv("KERAC_GPU_MEMORY", "limit=2G", 1);
    setenv("KERAC_MEMORY_LIMIT", "512M", 1);
    setenv("KERAC_CUDNN_WORKSPACE_LIMIT", "64M", 1);
    setenv("KERAC_CUDNN_BENCHMARK", "1", 1);
    setenv("KERAC_DETERMINISTIC", "yes", 1);
    setenv("KERAC_TF32", "off", 1);
    setenv("KERAC_CUDNN_GROUPED", "0", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_OK);
    assert_string_equal(o.device, "cuda:3");
    assert_string_equal(o.gpu_memory, "limit=2G");
    assert_int_equal(o.memory_limit, (size_t)512 << 20);
    assert_int_equal(o.cudnn_workspace_limit, (size_t)64 << 20);
    assert_int_equal(o.cudnn_benchmark, KC_TRUE);
    assert_int_equal(o.deterministic, KC_TRUE);
    assert_int_equal(o.tf32, KC_FALSE);
    assert_int_equal(o.cudnn_grouped, KC_FALSE);

    setenv("KERAC_MEMORY_LIMIT", "lots", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "KERAC_MEMORY_LIMIT");
    EXPECT_WORD(kc_last_error(), "lots");
    assert_string_equal(o.device, "cuda:3");
    assert_int_equal(o.cudnn_workspace_limit, (size_t)64 << 20);
    setenv("KERAC_MEMORY_LIMIT", "1G", 1);
    setenv("KERAC_CUDNN_WORKSPACE_LIMIT", "-5", 1);
    assert_int_equal(kc_device_opts_default(&o), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "KERAC_CUDNN_WORKSPACE_LIMIT");
    assert_int_equal(kc_device_opts_default(NULL), KC_STATUS_INVALID_ARGUMENT);
    clear_env(NULL);
}

static void test_cpu_and_bad_device(void **state) {
    (void)state;
    char *json = small_json();
    setenv("KERAC_DEVICE", "bogus-env-device", 1);
    kc_model *m = NULL;
    kc_device_opts cpu = {.device = "cpu"};
    assert_int_equal(kc_model_from_json_ex(json, strlen(json), &cpu, &m), KC_STATUS_OK);
    assert_string_equal(kc_model_device(m), "cpu");
    kc_model_destroy(m);

    kc_device_opts tpu = {.device = "tpu"};
    assert_int_equal(kc_model_from_json_ex(json, strlen(json), &tpu, &m), KC_STATUS_INVALID_ARGUMENT);
    assert_null(m);
    EXPECT_WORD(kc_last_error(), "device 'tpu'");

    /* no options: the environment's device, read when the model is built */
    assert_int_equal(kc_model_from_json(json, strlen(json), &m), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "bogus-env-device");
    /* a model file the same way */
    char path[] = "/tmp/kerac-devopts-XXXXXX.json";
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs(json, f);
    fclose(f);
    assert_int_equal(kc_model_load_ex(path, &cpu, &m), KC_STATUS_OK);
    assert_string_equal(kc_model_device(m), "cpu");
    kc_model_destroy(m);
    assert_int_equal(kc_model_load_ex(path, &tpu, &m), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "tpu");
    assert_int_equal(kc_model_load(path, &m), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "bogus-env-device");
    remove(path);

    /* kc_model_set_device overrides the options' device; the options replace it again */
    assert_int_equal(kc_sequential("s", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {2}));
    kc_add(m, KC_DENSE(.units = 1));
    assert_int_equal(kc_model_set_device_opts(m, &tpu), KC_STATUS_OK);
    assert_int_equal(kc_model_set_device(m, "cpu"), KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    assert_string_equal(kc_model_device(m), "cpu");
    kc_model_destroy(m);

    /* nothing here wrote the environment */
    assert_string_equal(getenv("KERAC_DEVICE"), "bogus-env-device");
    assert_null(getenv("KERAC_GPU_MEMORY"));
    kc_free(json);
    clear_env(NULL);
}

static void test_memory_limit(void **state) {
    (void)state;
    kc_backend *be = NULL;
    kc_device_opts o = {.device = "cpu", .memory_limit = (size_t)1 << 20};
    assert_int_equal(kc_backend_open_ex(&o, &be), KC_STATUS_OK);
    void *p = NULL;
    assert_int_equal(be->alloc(be, (size_t)2 << 20, &p), KC_STATUS_OUT_OF_MEMORY);
    assert_int_equal(be->alloc(be, (size_t)256 << 10, &p), KC_STATUS_OK);
    be->free(be, p);
    kc_backend_destroy(be);

    /* the environment's limit when the caller gives no options */
    setenv("KERAC_MEMORY_LIMIT", "1M", 1);
    assert_int_equal(kc_backend_open("cpu", &be), KC_STATUS_OK);
    assert_int_equal(be->alloc(be, (size_t)2 << 20, &p), KC_STATUS_OUT_OF_MEMORY);
    kc_backend_destroy(be);
    unsetenv("KERAC_MEMORY_LIMIT");

    /* a model built with a 1 KiB cap cannot place its weights (4 x 300 floats) */
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("capped", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_DENSE(.units = 300));
    kc_device_opts tiny = {.device = "cpu", .memory_limit = 1024};
    assert_int_equal(kc_model_set_device_opts(m, &tiny), KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OUT_OF_MEMORY);
    kc_model_destroy(m);
}

/* The stand-in module's folder, or skip. */
static void use_echo_module(void) {
    const char *bin = getenv("KERAC_BINARY_DIR");
    if (!bin || !*bin) {
        print_message("    SKIP: KERAC_BINARY_DIR is not set (run through ctest)\n");
        skip();
    }
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/stubs/echo", bin);
    setenv("KERAC_MODULE_PATH", dir, 1);
}

static void test_opts_reach_module(void **state) {
    (void)state;
    use_echo_module();
    kc_backend *be = NULL;
    /* the caller's options, over an environment that says otherwise */
    setenv("KERAC_GPU_MEMORY", "grow", 1);
    setenv("KERAC_CUDNN_BENCHMARK", "0", 1);
    kc_device_opts o = {.device = "cuda:1",
                        .gpu_memory = "preallocate=0.5",
                        .cudnn_workspace_limit = 12345,
                        .cudnn_benchmark = KC_TRUE,
                        .deterministic = KC_TRUE,
                        .tf32 = KC_TRUE};
    assert_int_equal(kc_backend_open_ex(&o, &be), KC_STATUS_DEVICE);
    assert_null(be);
    EXPECT_WORD(kc_last_error(), "echo: abi=");
    EXPECT_WORD(kc_last_error(), "device=cuda:1 gpu_memory=preallocate=0.5 memory_limit=0 workspace=12345 "
                                 "benchmark=1 deterministic=1 tf32=1");
    /* "gpu" is the module's "cuda"; zeroed options reach it as zeroes */
    kc_device_opts gpu = {.device = "gpu"};
    assert_int_equal(kc_backend_open_ex(&gpu, &be), KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "device=cuda gpu_memory=(null) memory_limit=0 workspace=0 benchmark=0 "
                                 "deterministic=0 tf32=0");

    /* no options: the environment's, read by kc_device_opts_default */
    setenv("KERAC_GPU_MEMORY", "limit=1G", 1);
    setenv("KERAC_TF32", "1", 1);
    setenv("KERAC_CUDNN_WORKSPACE_LIMIT", "1K", 1);
    assert_int_equal(kc_backend_open("cuda", &be), KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "device=cuda gpu_memory=limit=1G memory_limit=0 workspace=1024 benchmark=-1 "
                                 "deterministic=0 tf32=1");
    setenv("KERAC_DEVICE", "cuda:2", 1);
    assert_int_equal(kc_backend_open_ex(NULL, &be), KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "device=cuda:2 gpu_memory=limit=1G");

    /* through a model: its own options, or the environment's when built without */
    char *json = small_json();
    kc_model *m = NULL;
    kc_device_opts mo = {.device = "cuda:0", .gpu_memory = "limit=3G", .deterministic = KC_TRUE};
    assert_int_equal(kc_model_from_json_ex(json, strlen(json), &mo, &m), KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "device=cuda:0 gpu_memory=limit=3G");
    EXPECT_WORD(kc_last_error(), "deterministic=1");
    assert_int_equal(kc_model_from_json(json, strlen(json), &m), KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "device=cuda:2 gpu_memory=limit=1G");
    /* "auto" falls back to the CPU, with the module's reason */
    kc_device_opts au = {.device = "auto"};
    assert_int_equal(kc_model_from_json_ex(json, strlen(json), &au, &m), KC_STATUS_OK);
    assert_string_equal(kc_model_device(m), "cpu");
    assert_true(strlen(kc_model_device_reason(m)) > 0);
    kc_model_destroy(m);
    kc_free(json);
    clear_env(NULL);
}

static void test_set_after_build(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("built", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {2}));
    kc_add(m, KC_DENSE(.units = 1));
    kc_device_opts cpu = {.device = "cpu"};
    assert_int_equal(kc_model_set_device_opts(m, &cpu), KC_STATUS_OK);
    assert_int_equal(kc_model_build(m), KC_STATUS_OK);
    assert_int_equal(kc_model_set_device_opts(m, &cpu), KC_STATUS_STATE);
    EXPECT_WORD(kc_last_error(), "before the model is built");
    assert_int_equal(kc_model_set_device_opts(NULL, &cpu), KC_STATUS_INVALID_ARGUMENT);
    kc_device_opts longname = {.device = "cuda:0000000000000000000000000000000000000000000000000000000000000000000"};
    kc_model_destroy(m);
    assert_int_equal(kc_sequential("long", &m), KC_STATUS_OK);
    assert_int_equal(kc_model_set_device_opts(m, &longname), KC_STATUS_INVALID_ARGUMENT);
    EXPECT_WORD(kc_last_error(), "too long");
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_env_defaults, clear_env),
        cmocka_unit_test_setup(test_cpu_and_bad_device, clear_env),
        cmocka_unit_test_setup(test_memory_limit, clear_env),
        cmocka_unit_test_setup(test_opts_reach_module, clear_env),
        cmocka_unit_test_setup(test_set_after_build, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
