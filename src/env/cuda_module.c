/* cuda_module.c — kerac's CUDA backend module (libkerac_cuda.so) seen from outside: where
 * kc_backend_open would find it, what it was built with (its build string, read from the
 * file so that a module whose libraries are missing still says it), the libraries it
 * needs (DT_NEEDED) and whether it loads; and which GPUs its code runs on.
 *
 * The build string is kc_backend_module_info()'s text, e.g.
 *   "kerac_cuda 0.1.0: CUDA 13.0.88, cuDNN 9.19.0, cuBLAS 13.1.0, architectures 80-real
 *    90-real 100-real 120-real 90-virtual"
 * where the architectures are CMAKE_CUDA_ARCHITECTURES: "NN-real" is native code (SASS)
 * for compute capability N.N, "NN-virtual" is PTX, a plain "NN" both; "NNa" code runs on
 * that exact GPU only, "NNf" on its family (same major).
 *
 * Which code a GPU of compute capability X.Y runs (CUDA's compatibility rules):
 *   SASS for A.B runs when A == X and B <= Y (same major, not newer; "a": A.B == X.Y);
 *   PTX for A.B is compiled by the driver at first use when A.B <= X.Y, and only by a
 *   driver at least as new as the CUDA compiler that wrote it. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "env.h"

#define KC_MODULE_FILE "libkerac_cuda.so"

/* ---------------------------------------------------------------- tables */

int kc__toolkit_min_cc(kc__ver cuda) {
    if (!kc__ver_known(cuda)) return 0;
    if (cuda.major >= 13) return 75;
    if (cuda.major == 12) return 50;
    if (cuda.major == 11) return 35;
    return 30;
}

const char *kc__driver_branch_for(kc__ver c) {
    static const struct {
        int major, minor;
        const char *branch;
    } t[] = {{11, 0, "450"}, {11, 1, "455"}, {11, 2, "460"}, {11, 3, "465"}, {11, 4, "470"}, {11, 5, "495"},
             {11, 6, "510"}, {11, 7, "515"}, {11, 8, "520"}, {12, 0, "525"}, {12, 1, "530"}, {12, 2, "535"},
             {12, 3, "545"}, {12, 4, "550"}, {12, 5, "555"}, {12, 6, "560"}, {12, 8, "570"}, {12, 9, "575"},
             {13, 0, "580"}};
    if (!kc__ver_known(c)) return NULL;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].major == c.major && t[i].minor == c.minor) return t[i].branch;
    return NULL;
}

/* ---------------------------------------------------------------- build string */

static bool read_ver_after(const char *s, const char *key, kc__ver *out) {
    const char *p = strstr(s, key);
    if (!p) return false;
    *out = kc__ver_parse(p + strlen(key));
    return kc__ver_known(*out);
}

bool kc__module_parse_info(const char *info, kc__module *m) {
    m->cuda = m->cudnn = m->cublas = kc__ver_none();
    m->n_arch = 0;
    m->min_cc = 0;
    m->kerac_version[0] = m->archs_text[0] = '\0';
    if (strncmp(info, "kerac_cuda ", 11) != 0) return false;
    sscanf(info + 11, "%31[^:]", m->kerac_version);
    bool ok = read_ver_after(info, ": CUDA ", &m->cuda);
    read_ver_after(info, ", cuDNN ", &m->cudnn);
    read_ver_after(info, ", cuBLAS ", &m->cublas);
    const char *a = strstr(info, "architectures ");
    if (a) {
        snprintf(m->archs_text, sizeof m->archs_text, "%s", a + 14);
        char buf[256];
        snprintf(buf, sizeof buf, "%s", a + 14);
        char *save = NULL;
        for (char *tok = strtok_r(buf, " ;,", &save); tok && m->n_arch < KC_ENV_MAX_ARCHS;
             tok = strtok_r(NULL, " ;,", &save)) {
            if (!isdigit((unsigned char)tok[0])) { /* "native", "all", "all-major": not a list */
                m->n_arch = 0;
                break;
            }
            char *end = NULL;
            long cc = strtol(tok, &end, 10);
            kc__arch x = {.cc = (int)cc, .sass = true, .ptx = true};
            if (*end == 'a' || *end == 'f') x.variant = *end++;
            if (!strcmp(end, "-real")) x.ptx = false;
            else if (!strcmp(end, "-virtual")) x.sass = false;
            else if (*end) continue;
            m->arch[m->n_arch++] = x;
        }
    }
    for (int i = 0; i < m->n_arch; i++)
        if (!m->min_cc || m->arch[i].cc < m->min_cc) m->min_cc = m->arch[i].cc;
    return ok;
}

kc__support kc__module_support(const kc__module *m, int cc, bool driver_ok, int *code_cc) {
    if (code_cc) *code_cc = 0;
    if (!m || m->n_arch == 0 || cc <= 0) return KC__SUPPORT_UNKNOWN;
    int best_sass = 0, best_ptx = 0;
    for (int i = 0; i < m->n_arch; i++) {
        const kc__arch *a = &m->arch[i];
        if (a->sass) {
            bool runs = a->variant == 'a' ? a->cc == cc : (a->cc / 10 == cc / 10 && a->cc <= cc);
            if (runs && a->cc > best_sass) best_sass = a->cc;
        }
        if (a->ptx && a->variant != 'a' && a->cc <= cc && (a->variant != 'f' || a->cc / 10 == cc / 10) &&
            a->cc > best_ptx)
            best_ptx = a->cc;
    }
    if (best_sass) {
        if (code_cc) *code_cc = best_sass;
        return KC__SUPPORT_SASS;
    }
    if (best_ptx) {
        if (code_cc) *code_cc = best_ptx;
        return driver_ok ? KC__SUPPORT_PTX : KC__SUPPORT_PTX_OLD_DRIVER;
    }
    return KC__SUPPORT_NONE;
}

/* ---------------------------------------------------------------- finding it */

static void add_searched(kc__module *m, const char *dir) {
    size_t used = strlen(m->searched), dl = strlen(dir);
    for (const char *p = m->searched; (p = strstr(p, dir)) != NULL; p += dl) /* already listed */
        if ((p == m->searched || p[-1] == ' ') && (p[dl] == ',' || p[dl] == '\0')) return;
    snprintf(m->searched + used, sizeof m->searched - used, "%s%s", used ? ", " : "", dir);
}

static bool try_dir(kc__module *m, const char *dir) {
    if (!dir || !dir[0]) return false;
    add_searched(m, dir);
    char path[KC_ENV_PATH + 32];
    snprintf(path, sizeof path, "%s/%s", dir, KC_MODULE_FILE);
    if (!kc__file_exists(path)) return false;
    char real[KC_ENV_PATH];
    if (!realpath(path, real)) snprintf(real, sizeof real, "%.1000s", path);
    snprintf(m->path, sizeof m->path, "%s", real);
    m->found = true;
    return true;
}

/* The directory of libkerac (or of the program it is linked into). */
static bool self_dir(char *buf, size_t n) {
    Dl_info info;
    if (!dladdr((void *)&kc__module_probe, &info) || !info.dli_fname) return false;
    char real[KC_ENV_PATH];
    if (!realpath(info.dli_fname, real)) snprintf(real, sizeof real, "%s", info.dli_fname);
    char *slash = strrchr(real, '/');
    if (!slash) return false;
    *slash = '\0';
    snprintf(buf, n, "%s", real);
    return true;
}

static void find_module(kc__module *m) {
    const char *env = getenv("KERAC_MODULE_PATH");
    if (env && *env && try_dir(m, env)) return;
    char dir[KC_ENV_PATH];
    if (self_dir(dir, sizeof dir) && try_dir(m, dir)) return;
    /* the loader's path: LD_LIBRARY_PATH, its cache, the usual directories */
    const char *llp = getenv("LD_LIBRARY_PATH");
    if (llp && *llp) {
        char buf[4096];
        snprintf(buf, sizeof buf, "%s", llp);
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save))
            if (try_dir(m, d)) return;
    }
    char cached[1][KC_ENV_PATH];
    if (kc__ldcache_find(KC_MODULE_FILE, cached, 1) == 1) {
        char *slash = strrchr(cached[0], '/');
        if (slash) {
            *slash = '\0';
            if (try_dir(m, cached[0])) return;
        }
    }
    static const char *const defaults[] = {"/usr/local/lib", "/usr/local/lib64", "/usr/lib/x86_64-linux-gnu",
                                           "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (kc__dir_exists(defaults[i]) && try_dir(m, defaults[i])) return;
}

/* "libcudnn.so.9: cannot open shared object file: ..." -> "libcudnn.so.9" */
static void missing_from_error(const char *err, const char *module_path, char *out, size_t n) {
    out[0] = '\0';
    const char *p = strstr(err, ": cannot open shared object file");
    if (!p) return;
    const char *start = p;
    while (start > err && start[-1] != ' ' && start[-1] != '\t') start--;
    size_t len = (size_t)(p - start);
    if (len == 0 || len >= n) return;
    if (module_path && strlen(module_path) == len && !strncmp(start, module_path, len)) return;
    snprintf(out, n, "%.*s", (int)len, start);
}

typedef const char *(*info_fn)(void);

void kc__module_probe(bool load, kc__module *m) {
    memset(m, 0, sizeof *m);
    m->cuda = m->cudnn = m->cublas = kc__ver_none();
    find_module(m);
    if (!m->found) return;
    /* the libraries it needs */
    int nn = kc__elf_dynamic(m->path, m->needed, 16, m->runpath, sizeof m->runpath);
    m->n_needed = nn > 0 ? nn : 0;
    for (int i = 0; i < m->n_needed; i++) {
        int v = 0;
        if (sscanf(m->needed[i], "libcudnn.so.%d", &v) == 1) m->cudnn_major = v;
        else if (sscanf(m->needed[i], "libcublas.so.%d", &v) == 1) m->cublas_major = v;
    }
    /* what it was built with: from the file, then (loaded) from the module itself */
    char info[512] = "";
    if (kc__file_find_string(m->path, "kerac_cuda ", info, sizeof info) && kc__module_parse_info(info, m)) {
        m->has_info = true;
        snprintf(m->info, sizeof m->info, "%s", info);
    }
    if (load) {
        void *h = kc__dl_open(m->path, m->load_error, sizeof m->load_error);
        if (h) {
            m->loaded = true;
            info_fn fn = (info_fn)kc__dl_sym(h, "kc_backend_module_info");
            const char *text = fn ? fn() : NULL;
            if (text && kc__module_parse_info(text, m)) {
                m->has_info = true;
                snprintf(m->info, sizeof m->info, "%s", text);
            } else if (m->has_info) {
                kc__module_parse_info(m->info, m);
            }
        } else {
            missing_from_error(m->load_error, m->path, m->missing_lib, sizeof m->missing_lib);
        }
    }
    if (!m->cudnn_major && kc__ver_known(m->cudnn)) m->cudnn_major = m->cudnn.major;
    if (!m->cublas_major && kc__ver_known(m->cublas)) m->cublas_major = m->cublas.major;
}
