/* test_device_graceful.c — the GPU failure paths, on a machine without a GPU (and with one):
 * each way the CUDA backend can be unavailable gives its own message, device "auto" then
 * runs on the CPU with a warning naming the reason, and device "cuda" stops with it.
 *
 *   module_missing        KERAC_MODULE_PATH points to an empty directory and no module is
 *                         beside the test or on the loader's path: "not installed", naming
 *                         the directory searched.
 *   stub_without_cudnn    a stand-in libkerac_cuda.so, compiled here with the system cc,
 *                         that needs a libcudnn.so.9 which is then deleted: the message
 *                         names libcudnn.so.9 ("cannot be loaded"). The check runs in a
 *                         child started through the dynamic loader with --inhibit-cache, so
 *                         a cuDNN that the machine's ld.so.cache knows (this one has
 *                         /usr/local/cuda/lib in ld.so.conf) cannot stand in for the deleted
 *                         stub; LD_LIBRARY_PATH entries holding a libcudnn.so.9 are dropped.
 *   module_abi_mismatch   stand-in modules (compiled here) whose table is of the previous ABI,
 *                         or of this ABI with another size: the loader refuses each, naming
 *                         both ABIs and sizes.
 *   real_without_cudnn    the same with the real module (when this build made one, in
 *                         KERAC_BINARY_DIR), cuBLAS left reachable: the message names
 *                         libcudnn.so.9. Skipped, saying why, when the module's RUNPATH
 *                         itself holds a cuDNN (nothing can hide it then).
 *   real_without_cudnn_cnn  the real module beside this machine's libcudnn.so.9 and its graph
 *                         and ops libraries but not libcudnn_cnn.so.9 (links in a temporary
 *                         directory): start-up loads cuDNN's sub-libraries before it looks
 *                         for a driver, so it fails naming libcudnn_cnn.so.9, GPU or not.
 *   no_driver             the real module, loaded here: with no libcuda.so.1 on the machine
 *                         its initialisation says "no NVIDIA driver" and names libcuda.so.1;
 *                         with a GPU it opens, and a device index that does not exist lists
 *                         the GPUs that do.
 *   model_auto_and_cuda   kc_model_set_device: "auto" builds on the CPU and logs a warning
 *                         with the reason; "cuda" fails the build with KC_STATUS_DEVICE and
 *                         the same reason; the device cannot change once built.
 * Cases that cannot run here say why (cmocka skip). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "kerac.h"
#include "kerac_backend.h"

extern char **environ;

/* ---------------------------------------------------------------- helpers */

static void make_temp_dir(char *buf, size_t n, const char *tag) {
    const char *tmp = getenv("TMPDIR");
    snprintf(buf, n, "%s/kerac-graceful-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    assert_non_null(mkdtemp(buf));
}

static void remove_tree(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) print_message("    (could not remove %s)\n", dir);
}

static int file_exists(const char *path) { return access(path, F_OK) == 0; }

/* The real module of this build, or NULL. */
static const char *real_module_dir(char *buf, size_t n) {
    const char *bin = getenv("KERAC_BINARY_DIR");
    if (!bin || !*bin) return NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/libkerac_cuda.so", bin);
    if (!file_exists(path)) return NULL;
    snprintf(buf, n, "%s", bin);
    return buf;
}

/* Whether the loader would find a module without any path (installed system-wide), or one
 * sits beside this test program (module.c looks there too). */
static const char *module_found_elsewhere(void) {
    void *h = dlopen("libkerac_cuda.so", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) {
        /* RTLD_NOLOAD only finds loaded ones; ask the loader for real (it fails fast when absent) */
        h = dlopen("libkerac_cuda.so", RTLD_LAZY | RTLD_LOCAL);
    }
    if (h) {
        dlclose(h);
        return "a libkerac_cuda.so is on the dynamic loader's path";
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len > 0) {
        self[len] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            snprintf(slash + 1, sizeof self - (size_t)(slash + 1 - self), "libkerac_cuda.so");
            if (file_exists(self)) return "a libkerac_cuda.so sits beside this test program";
        }
    }
    return NULL;
}

static int contains(const char *s, const char *word) { return s && strstr(s, word) != NULL; }

#define EXPECT_WORD(msg, word)                                                                               \
    do {                                                                                                     \
        if (!contains((msg), (word))) fail_msg("expected \"%s\" in the message: %s", (word), (msg));         \
    } while (0)

/* ---- the child: open a device and print what happened */

static int child_main(const char *device) {
    kc_backend *be = NULL;
    kc_status s = kc_backend_open(device, &be);
    if (s == KC_STATUS_OK) {
        printf("OPENED %s\n", be->device);
        kc_backend_destroy(be);
    } else {
        printf("FAILED %d: %s\n", (int)s, kc_last_error());
    }
    fflush(stdout);
    return 0;
}

/* The program interpreter (dynamic loader) of this executable. */
static int find_interp(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    char *out = data;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_INTERP) {
            snprintf(out, 4096, "%s", (const char *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr));
            return 1;
        }
    return 1; /* only the first object (the executable) */
}

/* LD_LIBRARY_PATH without the directories that hold a libcudnn.so.9, then extra in front. */
static void filtered_library_path(char *out, size_t n, const char *extra) {
    out[0] = '\0';
    if (extra && *extra) snprintf(out, n, "%s", extra);
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (!llp) return;
    char buf[8192];
    snprintf(buf, sizeof buf, "%s", llp);
    for (char *save = NULL, *dir = strtok_r(buf, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/libcudnn.so.9", dir);
        if (file_exists(probe)) continue;
        size_t used = strlen(out);
        snprintf(out + used, n - used, "%s%s", used ? ":" : "", dir);
    }
}

/* Run this program as a child through the loader with --inhibit-cache, opening `device` with
 * KERAC_MODULE_PATH=module_dir; its output (one line) into out. Returns 0 when it ran. */
static int run_child(const char *module_dir, const char *libpath, const char *device, char *out, size_t n) {
    char interp[4096] = "", self[4096];
    dl_iterate_phdr(find_interp, interp);
    if (!interp[0]) snprintf(interp, sizeof interp, "/lib64/ld-linux-x86-64.so.2");
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return -1;
    self[len] = '\0';
    int fd[2];
    if (pipe(fd) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[0]);
        close(fd[1]);
        /* the environment without LD_LIBRARY_PATH / KERAC_MODULE_PATH, then the module dir */
        static char *envp[4096];
        int k = 0;
        for (char **e = environ; *e && k < 4090; e++)
            if (strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0 && strncmp(*e, "KERAC_MODULE_PATH=", 18) != 0) envp[k++] = *e;
        static char mp[4200];
        snprintf(mp, sizeof mp, "KERAC_MODULE_PATH=%s", module_dir);
        envp[k++] = mp;
        envp[k] = NULL;
        char *argv[10];
        int a = 0;
        argv[a++] = interp;
        argv[a++] = (char *)"--inhibit-cache";
        if (libpath && *libpath) {
            argv[a++] = (char *)"--library-path";
            argv[a++] = (char *)libpath;
        }
        argv[a++] = self;
        argv[a++] = (char *)"--graceful-child";
        argv[a++] = (char *)device;
        argv[a] = NULL;
        execve(interp, argv, envp);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    while (got < n - 1 && (r = read(fd[0], out + got, n - 1 - got)) > 0) got += (size_t)r;
    out[got] = '\0';
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The RUNPATH (or RPATH) of an ELF64 shared object, "" when none; -1 when unreadable. */
static int elf_runpath(const char *path, char *out, size_t n) {
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = size > 0 ? malloc((size_t)size) : NULL;
    int ok = b && fread(b, 1, (size_t)size, f) == (size_t)size;
    fclose(f);
    if (!ok || (size_t)size < sizeof(Elf64_Ehdr) || memcmp(b, ELFMAG, SELFMAG) != 0 || b[EI_CLASS] != ELFCLASS64) {
        free(b);
        return -1;
    }
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)b;
    if (eh->e_shoff + (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr) > (uint64_t)size) {
        free(b);
        return -1;
    }
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(b + eh->e_shoff);
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC || sh[i].sh_link >= eh->e_shnum) continue;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        const Elf64_Dyn *d = (const Elf64_Dyn *)(b + sh[i].sh_offset);
        size_t nd = sh[i].sh_size / sizeof(Elf64_Dyn);
        for (size_t k = 0; k < nd && d[k].d_tag != DT_NULL; k++)
            if ((d[k].d_tag == DT_RUNPATH || d[k].d_tag == DT_RPATH) && d[k].d_un.d_val < str->sh_size)
                snprintf(out, n, "%s", (const char *)(b + str->sh_offset + d[k].d_un.d_val));
    }
    free(b);
    return 0;
}

/* ---------------------------------------------------------------- the cases */

static void test_module_missing(void **state) {
    (void)state;
    const char *why = module_found_elsewhere();
    if (why) {
        print_message("    SKIP: %s, so 'not installed' cannot be produced here\n", why);
        skip();
    }
    char dir[4096];
    make_temp_dir(dir, sizeof dir, "empty");
    setenv("KERAC_MODULE_PATH", dir, 1);
    kc_backend *be = NULL;
    kc_status s = kc_backend_open("cuda", &be);
    assert_null(be);
    assert_int_equal(s, KC_STATUS_DEVICE);
    const char *msg = kc_last_error();
    print_message("    message: %s\n", msg);
    EXPECT_WORD(msg, "not installed");
    EXPECT_WORD(msg, "libkerac_cuda.so");
    EXPECT_WORD(msg, dir);
    s = kc_backend_open("cuda:1", &be); /* the same for an explicit index */
    assert_int_equal(s, KC_STATUS_DEVICE);
    EXPECT_WORD(kc_last_error(), "not installed");
    unsetenv("KERAC_MODULE_PATH");
    remove_tree(dir);
}

static void test_stub_without_cudnn(void **state) {
    (void)state;
    char dir[4096], cmd[16384], path[4200];
    make_temp_dir(dir, sizeof dir, "stub");
    snprintf(path, sizeof path, "%s/dnn", dir);
    mkdir(path, 0700);
    snprintf(path, sizeof path, "%s/mod", dir);
    mkdir(path, 0700);
    FILE *f;
    snprintf(path, sizeof path, "%s/dnn/stub.c", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("int kc_stub_cudnn_version(void) { return 91900; }\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/mod/mod.c", dir);
    assert_non_null(f = fopen(path, "w"));
    fputs("extern int kc_stub_cudnn_version(void);\n"
          "int kc_backend_module_init(int abi, const char *d, void **out, char *err, unsigned long n,\n"
          "                           const void *opts) {\n"
          "    (void)abi; (void)d; (void)out; (void)err; (void)n; (void)opts; return kc_stub_cudnn_version(); }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cc -shared -fPIC -o dnn/libcudnn.so.9 -Wl,-soname,libcudnn.so.9 dnn/stub.c && "
             "cc -shared -fPIC -o mod/libkerac_cuda.so mod/mod.c -Ldnn -Wl,--no-as-needed -l:libcudnn.so.9 && "
             "rm dnn/libcudnn.so.9",
             dir);
    if (system(cmd) != 0) {
        remove_tree(dir);
        print_message("    SKIP: the system C compiler (cc) could not build the stub module\n");
        skip();
    }
    char mod[4200], libpath[8192], out[4096];
    snprintf(mod, sizeof mod, "%s/mod", dir);
    filtered_library_path(libpath, sizeof libpath, NULL);
    int rc = run_child(mod, libpath, "cuda", out, sizeof out);
    remove_tree(dir);
    print_message("    child: %s", out);
    if (rc != 0) fail_msg("the child process did not run: %s", out);
    EXPECT_WORD(out, "FAILED");
    EXPECT_WORD(out, "cannot be loaded");
    EXPECT_WORD(out, "libcudnn.so.9");
}

/* A module of another ABI (or another table size), compiled here with the system cc: the
 * loader refuses it with both versions named, after letting the module free its table. */
static void test_module_abi_mismatch(void **state) {
    (void)state;
    const char *src = getenv("KERAC_SOURCE_DIR");
    if (!src || !*src) {
        print_message("    SKIP: KERAC_SOURCE_DIR is not set (run through ctest)\n");
        skip();
    }
    char dir[4096], path[4200], cmd[16384];
    make_temp_dir(dir, sizeof dir, "abi");
    snprintf(path, sizeof path, "%s/mod.c", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#include <stdlib.h>\n#include \"kerac_backend.h\"\n"
          "static int destroyed;\n"
          "static void destroy(kc_backend *be) { destroyed++; free(be); }\n"
          "__attribute__((visibility(\"default\"))) kc_status kc_backend_module_init(int abi, const char *d,\n"
          "        kc_backend **out, char *err, size_t n) {\n"
          "    (void)abi; (void)d; (void)err; (void)n;\n"
          "    kc_backend *be = calloc(1, sizeof *be);\n"
          "    if (!be) return KC_STATUS_OUT_OF_MEMORY;\n"
          "    be->abi = MOD_ABI; be->struct_size = sizeof *be + MOD_EXTRA; be->name = \"cuda\";\n"
          "    be->destroy = destroy; *out = be; return KC_STATUS_OK; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir old big && cc -shared -fPIC -I'%s/include' -DMOD_ABI=%d -DMOD_EXTRA=0 -o "
             "old/libkerac_cuda.so mod.c && cc -shared -fPIC -I'%s/include' -DMOD_ABI=%d -DMOD_EXTRA=8 -o "
             "big/libkerac_cuda.so mod.c",
             dir, src, KC_BACKEND_ABI - 1, src, KC_BACKEND_ABI);
    if (system(cmd) != 0) {
        remove_tree(dir);
        print_message("    SKIP: the system C compiler (cc) could not build the stand-in modules\n");
        skip();
    }
    char want[128];
    snprintf(want, sizeof want, "this libkerac needs ABI %d (%zu bytes)", KC_BACKEND_ABI, sizeof(kc_backend));
    kc_backend *be = NULL;
    snprintf(path, sizeof path, "%s/old", dir);
    setenv("KERAC_MODULE_PATH", path, 1);
    assert_int_equal(kc_backend_open("cuda", &be), KC_STATUS_DEVICE);
    assert_null(be);
    print_message("    message: %s\n", kc_last_error());
    char speaks[128];
    snprintf(speaks, sizeof speaks, "speaks ABI %d (table of %zu bytes)", KC_BACKEND_ABI - 1, sizeof(kc_backend));
    EXPECT_WORD(kc_last_error(), speaks);
    EXPECT_WORD(kc_last_error(), want);
    EXPECT_WORD(kc_last_error(), "install the module built with this kerac");
    snprintf(path, sizeof path, "%s/big", dir);
    setenv("KERAC_MODULE_PATH", path, 1);
    assert_int_equal(kc_backend_open("cuda:0", &be), KC_STATUS_DEVICE);
    assert_null(be);
    snprintf(speaks, sizeof speaks, "speaks ABI %d (table of %zu bytes)", KC_BACKEND_ABI, sizeof(kc_backend) + 8);
    EXPECT_WORD(kc_last_error(), speaks);
    EXPECT_WORD(kc_last_error(), want);
    unsetenv("KERAC_MODULE_PATH");
    remove_tree(dir);
}

/* Whether the module's own RUNPATH holds a libcudnn.so.9 (the loader cannot be kept from it). */
static bool runpath_holds_cudnn(const char *mod_path, char *rp, size_t n) {
    assert_int_equal(elf_runpath(mod_path, rp, n), 0);
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", rp);
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char probe[4200];
        snprintf(probe, sizeof probe, "%s/libcudnn.so.9", d);
        if (file_exists(probe)) return true;
    }
    return false;
}

/* The folder of a library the loader finds here ("" when none). It stays loaded: unloading
 * cuBLAS drops memory it keeps for the life of the process, which LeakSanitizer reports. */
static void loaded_dir(const char *soname, char *dir, size_t n) {
    dir[0] = '\0';
    void *h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    struct link_map *lm = NULL;
    if (!h || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) return;
    snprintf(dir, n, "%s", lm->l_name);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else dir[0] = '\0';
}

/* The real module started in a child whose loader finds only the links made in a temporary
 * folder: cuBLAS's files (so that the first library missed is cuDNN's) and `dnn_files` from
 * dnn_dir. Skips, saying why, when this cannot be arranged here. */
static void real_module_child(const char *dnn_dir, const char *dnn_files, char *out, size_t n) {
    char bin[4096];
    if (!real_module_dir(bin, sizeof bin)) {
        print_message("    SKIP: this build has no libkerac_cuda.so (no CUDA toolkit); the stub case covers the "
                      "message\n");
        skip();
    }
    char mod_path[4200], rp[4096];
    snprintf(mod_path, sizeof mod_path, "%s/libkerac_cuda.so", bin);
    if (runpath_holds_cudnn(mod_path, rp, sizeof rp)) {
        print_message("    SKIP: the module's RUNPATH (%s) holds libcudnn.so.9; the stub case covers the message\n", rp);
        skip();
    }
    char blas_dir[4096];
    loaded_dir("libcublas.so.13", blas_dir, sizeof blas_dir);
    if (!blas_dir[0]) loaded_dir("libcublas.so.12", blas_dir, sizeof blas_dir);
    if (!blas_dir[0]) {
        print_message("    SKIP: libcublas cannot be loaded here\n");
        skip();
    }
    char dir[4096], cmd[16384];
    make_temp_dir(dir, sizeof dir, "blas");
    snprintf(cmd, sizeof cmd, "for f in '%s'/libcublas*.so*; do ln -s \"$f\" '%s'/; done", blas_dir, dir);
    if (dnn_files[0])
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " && for f in %s; do ln -s '%s'/\"$f\" '%s'/; done",
                 dnn_files, dnn_dir, dir);
    assert_int_equal(system(cmd), 0);
    char libpath[8192];
    filtered_library_path(libpath, sizeof libpath, dir);
    int rc = run_child(bin, libpath, "cuda", out, n);
    remove_tree(dir);
    print_message("    child: %s", out);
    if (rc != 0) fail_msg("the child process did not run: %s", out);
}

static void test_real_without_cudnn(void **state) {
    (void)state;
    char out[4096];
    real_module_child("/nonexistent", "", out, sizeof out);
    EXPECT_WORD(out, "FAILED");
    EXPECT_WORD(out, "libcudnn.so.9");
}

static void test_real_without_cudnn_cnn(void **state) {
    (void)state;
    char dnn_dir[4096], probe[4200];
    loaded_dir("libcudnn.so.9", dnn_dir, sizeof dnn_dir);
    snprintf(probe, sizeof probe, "%s/libcudnn_ops.so.9", dnn_dir);
    if (!dnn_dir[0] || !file_exists(probe)) {
        print_message("    SKIP: no cuDNN 9 with its sub-libraries here (%s)\n", dnn_dir[0] ? dnn_dir : "none found");
        skip();
    }
    char out[4096];
    real_module_child(dnn_dir, "libcudnn.so.9 libcudnn_graph.so.9 libcudnn_ops.so.9", out, sizeof out);
    EXPECT_WORD(out, "FAILED");
    EXPECT_WORD(out, "cannot load its cnn library libcudnn_cnn.so.9 (cudnnCnnVersionCheck: ");
    EXPECT_WORD(out, "install the complete cuDNN 9");
}

static void test_no_driver(void **state) {
    (void)state;
    char bin[4096];
    if (!real_module_dir(bin, sizeof bin)) {
        print_message("    SKIP: this build has no libkerac_cuda.so (no CUDA toolkit)\n");
        skip();
    }
    setenv("KERAC_MODULE_PATH", bin, 1);
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    kc_backend *be = NULL;
    kc_status s = kc_backend_open("cuda", &be);
    if (!drv) {
        const char *msg = kc_last_error();
        print_message("    message: %s\n", msg);
        assert_int_equal(s, KC_STATUS_DEVICE);
        assert_null(be);
        EXPECT_WORD(msg, "no NVIDIA driver");
        EXPECT_WORD(msg, "libcuda.so.1");
        EXPECT_WORD(msg, "--device cpu");
        /* an explicit index fails the same way: the driver is checked first */
        assert_int_equal(kc_backend_open("cuda:3", &be), KC_STATUS_DEVICE);
        EXPECT_WORD(kc_last_error(), "libcuda.so.1");
    } else {
        dlclose(drv);
        if (s != KC_STATUS_OK) {
            /* a driver without a usable GPU: whatever the reason, it must be said */
            print_message("    (driver present, no usable GPU) message: %s\n", kc_last_error());
            assert_int_equal(s, KC_STATUS_DEVICE);
            assert_true(strlen(kc_last_error()) > 20);
        } else {
            print_message("    a GPU is present: %s; checking a device index that does not exist\n", be->device);
            assert_non_null(strstr(be->device, "cuda:0"));
            kc_backend_destroy(be);
            be = NULL;
            s = kc_backend_open("cuda:63", &be);
            assert_int_equal(s, KC_STATUS_DEVICE);
            print_message("    message: %s\n", kc_last_error());
            EXPECT_WORD(kc_last_error(), "cuda:63 does not exist");
            EXPECT_WORD(kc_last_error(), "cuda:0 (");
        }
    }
    unsetenv("KERAC_MODULE_PATH");
}

/* ---- through the model API */

typedef struct captured {
    char text[8192];
    int warnings;
} captured;

static void capture_log(kc_log_level level, const char *message, void *user) {
    captured *c = user;
    if (level < KC_LOG_WARNING) return;
    c->warnings++;
    size_t used = strlen(c->text);
    snprintf(c->text + used, sizeof c->text - used, "%s\n", message);
}

static kc_model *tiny_model(void) {
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("tiny", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 3, .activation = "softmax")), KC_STATUS_OK);
    return m;
}

/* auto -> CPU with a warning carrying `reason`; cuda -> KC_STATUS_DEVICE with it */
static void check_model_paths(const char *reason) {
    captured cap = {.text = ""};
    kc_log_set_callback(capture_log, &cap);
    kc_model *m = tiny_model();
    assert_int_equal(kc_model_set_device(m, "auto"), KC_STATUS_OK);
    kc_status s = kc_model_build(m);
    kc_log_set_callback(NULL, NULL);
    if (s != KC_STATUS_OK) fail_msg("device auto did not fall back to the CPU: %s", kc_last_error());
    assert_string_equal(kc_model_device(m), "cpu");
    print_message("    auto warned: %s", cap.text);
    assert_true(cap.warnings >= 1);
    EXPECT_WORD(cap.text, "no GPU");
    EXPECT_WORD(cap.text, "training on the CPU");
    EXPECT_WORD(cap.text, reason);
    /* the device cannot change once built */
    assert_int_equal(kc_model_set_device(m, "cuda"), KC_STATUS_STATE);
    kc_model_destroy(m);

    m = tiny_model();
    assert_int_equal(kc_model_set_device(m, "cuda"), KC_STATUS_OK);
    s = kc_model_build(m);
    assert_int_equal(s, KC_STATUS_DEVICE);
    print_message("    cuda failed: %s\n", kc_last_error());
    EXPECT_WORD(kc_last_error(), "tiny");
    EXPECT_WORD(kc_last_error(), reason);
    kc_model_destroy(m);
}

static void test_model_auto_and_cuda(void **state) {
    (void)state;
    const char *why = module_found_elsewhere();
    if (why) {
        print_message("    SKIP (module missing variant): %s\n", why);
    } else {
        char dir[4096];
        make_temp_dir(dir, sizeof dir, "model");
        setenv("KERAC_MODULE_PATH", dir, 1);
        check_model_paths("not installed");
        unsetenv("KERAC_MODULE_PATH");
        remove_tree(dir);
    }
    char bin[4096];
    void *drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (drv) dlclose(drv);
    if (real_module_dir(bin, sizeof bin) && !drv) { /* the real module on a machine without the driver */
        setenv("KERAC_MODULE_PATH", bin, 1);
        check_model_paths("libcuda.so.1");
        unsetenv("KERAC_MODULE_PATH");
    } else {
        print_message("    (no-driver variant not run: %s)\n", drv ? "this machine has a driver" : "no real module");
    }
}

int main(int argc, char **argv) {
    if (argc >= 3 && strcmp(argv[1], "--graceful-child") == 0) return child_main(argv[2]);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_module_missing),
        cmocka_unit_test(test_stub_without_cudnn),
        cmocka_unit_test(test_module_abi_mismatch),
        cmocka_unit_test(test_real_without_cudnn),
        cmocka_unit_test(test_real_without_cudnn_cnn),
        cmocka_unit_test(test_no_driver),
        cmocka_unit_test(test_model_auto_and_cuda),
    };
    return cmocka_run_group_tests_name("device_graceful", tests, NULL, NULL);
}
