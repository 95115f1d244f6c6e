/* tensorflow.c — a TensorFlow installation, found without importing it (importing takes
 * seconds and may itself fail on a broken GPU setup): its build info
 * (tensorflow/python/platform/build_info.py: is_cuda_build, cuda_version, cudnn_version,
 * cuda_compute_capabilities) and its package metadata (*.dist-info/METADATA: name,
 * version, and the nvidia-cudnn-cuNN version that tensorflow[and-cuda] pins).
 *
 * build_info.py holds a Python literal, a dict or (as wheels write it) a
 * collections.OrderedDict of (key, value) pairs; very old versions set variables. All
 * three are read the same way: a known key (quoted or bare) followed by ':', ',' or '=',
 * then a string, True / False, or a list of strings. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "env.h"

/* ---------------------------------------------------------------- build_info.py */

static const char *skip_ws(const char *p) {
    while (*p && (isspace((unsigned char)*p) || *p == '\\')) p++;
    return p;
}

/* A Python string literal at p ('...' or "..."); copies its text; returns the end or NULL. */
static const char *read_str(const char *p, char *out, size_t n) {
    char q = *p;
    if (q != '\'' && q != '"') return NULL;
    p++;
    size_t k = 0;
    while (*p && *p != q) {
        if (*p == '\\' && p[1]) p++;
        if (k + 1 < n) out[k++] = *p;
        p++;
    }
    if (n) out[k] = '\0';
    return *p == q ? p + 1 : NULL;
}

/* The value after a key: kind 's' string, 'b' bool, 'l' list (count in *nl). */
static const char *value_of(const char *text, const char *key, char *sval, size_t sn, int *bval,
                            char (*lval)[16], int lmax, int *nl) {
    size_t klen = strlen(key);
    for (const char *p = text; (p = strstr(p, key)) != NULL; p += klen) {
        char before = p > text ? p[-1] : ' ';
        char after = p[klen];
        bool quoted = (before == '\'' || before == '"') && after == before;
        bool bare = !isalnum((unsigned char)before) && before != '_' && !isalnum((unsigned char)after) && after != '_';
        if (!quoted && !bare) continue;
        const char *v = skip_ws(p + klen + (quoted ? 1 : 0));
        if (*v != ':' && *v != ',' && *v != '=') continue;
        v = skip_ws(v + 1);
        if (*v == '\'' || *v == '"') {
            if (!sval) continue;
            return read_str(v, sval, sn);
        }
        if (!strncmp(v, "True", 4) || !strncmp(v, "False", 5)) {
            if (!bval) continue;
            *bval = v[0] == 'T';
            return v;
        }
        if (*v == '[' || *v == '(') {
            if (!lval) continue;
            char close = *v == '[' ? ']' : ')';
            v = skip_ws(v + 1);
            *nl = 0;
            while (*v && *v != close) {
                char item[64];
                const char *e = read_str(v, item, sizeof item);
                if (!e) return NULL;
                if (*nl < lmax) kc__pathf(lval[(*nl)++], 16, "%s", item);
                v = skip_ws(e);
                if (*v == ',') v = skip_ws(v + 1);
            }
            return *v == close ? v : NULL;
        }
    }
    return NULL;
}

bool kc__tf_parse_build_info(const char *text, kc__tf *tf) {
    tf->parsed = false;
    tf->is_cuda_build = tf->is_rocm_build = false;
    tf->cuda = tf->cudnn = kc__ver_none();
    tf->n_archs = 0;
    tf->parse_error[0] = '\0';
    const char *start = strstr(text, "build_info");
    if (!start) start = text;
    int b = 0;
    bool any = false;
    if (value_of(start, "is_cuda_build", NULL, 0, &b, NULL, 0, NULL)) tf->is_cuda_build = b, any = true;
    if (value_of(start, "is_rocm_build", NULL, 0, &b, NULL, 0, NULL)) tf->is_rocm_build = b, any = true;
    char s[64];
    if (value_of(start, "cuda_version", s, sizeof s, NULL, NULL, 0, NULL) ||
        value_of(start, "cuda_version_number", s, sizeof s, NULL, NULL, 0, NULL))
        tf->cuda = kc__ver_parse(s), any = true;
    if (value_of(start, "cudnn_version", s, sizeof s, NULL, NULL, 0, NULL) ||
        value_of(start, "cudnn_version_number", s, sizeof s, NULL, NULL, 0, NULL))
        tf->cudnn = kc__ver_parse(s), any = true;
    int n = 0;
    if (value_of(start, "cuda_compute_capabilities", NULL, 0, NULL, tf->archs, KC_TF_MAX_CC, &n)) tf->n_archs = n;
    if (!any) {
        snprintf(tf->parse_error, sizeof tf->parse_error, "no is_cuda_build or cuda_version in it");
        return false;
    }
    if (!tf->is_cuda_build && kc__ver_known(tf->cuda) && !strstr(start, "is_cuda_build")) tf->is_cuda_build = true;
    tf->parsed = true;
    return true;
}

/* "sm_50" -> 50 (*ptx false), "compute_80" -> 80 (*ptx true); 0 when not an architecture. */
static int arch_cc(const char *a, bool *ptx) {
    int cc = 0;
    if (sscanf(a, "sm_%d", &cc) == 1) *ptx = false;
    else if (sscanf(a, "compute_%d", &cc) == 1) *ptx = true;
    else return 0;
    return cc;
}

int kc__tf_min_cc(const kc__tf *tf) {
    int min = 0;
    for (int i = 0; i < tf->n_archs; i++) {
        bool ptx;
        int cc = arch_cc(tf->archs[i], &ptx);
        if (cc && (!min || cc < min)) min = cc;
    }
    return min;
}

bool kc__tf_runs_on(const kc__tf *tf, int cc) {
    if (tf->n_archs == 0) return true; /* not recorded: cannot tell */
    for (int i = 0; i < tf->n_archs; i++) {
        bool ptx;
        int a = arch_cc(tf->archs[i], &ptx);
        if (!a) continue;
        if (ptx ? a <= cc : (a / 10 == cc / 10 && a <= cc)) return true;
    }
    return false;
}

/* ---------------------------------------------------------------- files */

static char *read_text(const char *path, size_t max) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *b = malloc(max + 1);
    size_t n = b ? fread(b, 1, max, f) : 0;
    fclose(f);
    if (b) b[n] = '\0';
    return b;
}

static bool is_tf_name(const char *name) {
    static const char *const names[] = {"tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel",
                                        "tensorflow-aarch64", "tensorflow-rocm", "tf-nightly", "tf-nightly-cpu",
                                        "tf-nightly-gpu", "intel-tensorflow"};
    char norm[64];
    size_t k = 0;
    for (; name[k] && k + 1 < sizeof norm; k++) norm[k] = name[k] == '_' ? '-' : (char)tolower((unsigned char)name[k]);
    norm[k] = '\0';
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(norm, names[i])) return true;
    return false;
}

/* The METADATA of the TensorFlow distribution in site: name, version, cuDNN pin. */
static void read_metadata(const char *site, kc__tf *tf) {
    DIR *d = opendir(site);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 11 || strcmp(e->d_name + len - 10, ".dist-info") != 0) continue;
        if (strncasecmp(e->d_name, "tensorflow", 10) != 0 && strncasecmp(e->d_name, "tf_nightly", 10) != 0 &&
            strncasecmp(e->d_name, "intel_tensorflow", 16) != 0)
            continue;
        char path[KC_ENV_PATH + 300];
        snprintf(path, sizeof path, "%s/%s/METADATA", site, e->d_name);
        char *text = read_text(path, 1 << 20);
        if (!text) continue;
        char name[64] = "", version[32] = "";
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            if (!strncmp(line, "Name: ", 6)) sscanf(line + 6, "%63s", name);
            else if (!strncmp(line, "Version: ", 9)) sscanf(line + 9, "%31s", version);
            else if (!strncmp(line, "Requires-Dist: nvidia-cudnn-cu", 30)) {
                const char *eq = strstr(line, "==");
                if (eq) {
                    tf->cudnn_pin = kc__ver_parse(eq + 2);
                    sscanf(eq + 2, "%31[0-9.]", tf->cudnn_pin_text);
                }
            } else if (!line[0] || line[0] == '\r') {
                break; /* the description follows the headers */
            }
        }
        free(text);
        if (is_tf_name(name)) {
            snprintf(tf->package, sizeof tf->package, "%s", name);
            snprintf(tf->version, sizeof tf->version, "%s", version);
            break;
        }
        tf->cudnn_pin = kc__ver_none();
        tf->cudnn_pin_text[0] = '\0';
    }
    closedir(d);
}

bool kc__tf_read(const char *path, kc__tf *tf) {
    memset(tf, 0, sizeof *tf);
    tf->cuda = tf->cudnn = tf->cudnn_pin = kc__ver_none();
    char site[KC_ENV_PATH] = "", bi[KC_ENV_PATH + 64] = "";
    char real[KC_ENV_PATH];
    if (!realpath(path, real)) {
        snprintf(tf->site, sizeof tf->site, "%s", path);
        snprintf(tf->parse_error, sizeof tf->parse_error, "%s does not exist", path);
        return false;
    }
    if (kc__file_exists(real)) { /* .../tensorflow/python/platform/build_info.py */
        snprintf(bi, sizeof bi, "%s", real);
        const char *tail = "/tensorflow/python/platform/build_info.py";
        size_t n = strlen(real), t = strlen(tail);
        if (n > t && !strcmp(real + n - t, tail)) snprintf(site, sizeof site, "%.*s", (int)(n - t), real);
    } else {
        snprintf(bi, sizeof bi, "%s/tensorflow/python/platform/build_info.py", real);
        if (kc__file_exists(bi)) {
            snprintf(site, sizeof site, "%s", real);
        } else {
            snprintf(bi, sizeof bi, "%s/python/platform/build_info.py", real); /* the package folder */
            if (kc__file_exists(bi)) {
                snprintf(site, sizeof site, "%s", real);
                char *slash = strrchr(site, '/');
                if (slash) *slash = '\0';
            } else {
                snprintf(tf->site, sizeof tf->site, "%s", real);
                kc__pathf(tf->parse_error, sizeof tf->parse_error,
                         "no tensorflow/python/platform/build_info.py in %s", real);
                return false;
            }
        }
    }
    snprintf(tf->site, sizeof tf->site, "%s", site[0] ? site : real);
    snprintf(tf->build_info, sizeof tf->build_info, "%s", bi);
    char *text = read_text(bi, 1 << 20);
    if (!text) {
        snprintf(tf->parse_error, sizeof tf->parse_error, "cannot read %s", bi);
        return false;
    }
    bool ok = kc__tf_parse_build_info(text, tf);
    free(text);
    if (site[0]) read_metadata(site, tf);
    return ok;
}

/* ---------------------------------------------------------------- search */

typedef struct search {
    kc__tf *out;
    int max, n;
    char *searched;
    size_t sn;
    char seen[32][KC_ENV_PATH];
    int n_seen;
} search;

static void consider(search *s, const char *site) {
    char real[KC_ENV_PATH];
    if (!realpath(site, real) || !kc__dir_exists(real)) return;
    for (int i = 0; i < s->n_seen; i++)
        if (!strcmp(s->seen[i], real)) return;
    if (s->n_seen < 32) snprintf(s->seen[s->n_seen++], KC_ENV_PATH, "%s", real);
    size_t used = strlen(s->searched);
    if (used + strlen(real) + 3 < s->sn) snprintf(s->searched + used, s->sn - used, "%s%s", used ? ", " : "", real);
    char bi[KC_ENV_PATH + 64];
    snprintf(bi, sizeof bi, "%s/tensorflow/python/platform/build_info.py", real);
    if (!kc__file_exists(bi) || s->n >= s->max) return;
    kc__tf_read(real, &s->out[s->n]);
    s->n++;
}

/* prefix/lib/python3.*\/{site,dist}-packages */
static void consider_prefix(search *s, const char *prefix) {
    char lib[KC_ENV_PATH + 16];
    snprintf(lib, sizeof lib, "%s/lib", prefix);
    DIR *d = opendir(lib);
    if (!d) return;
    struct dirent *e;
    char names[16][64];
    int n = 0;
    while ((e = readdir(d)) != NULL && n < 16)
        if (!strncmp(e->d_name, "python3", 7)) kc__pathf(names[n++], 64, "%s", e->d_name);
    closedir(d);
    for (int i = 0; i < n; i++) {
        char site[KC_ENV_PATH + 128];
        kc__pathf(site, sizeof site, "%s/%s/site-packages", lib, names[i]);
        consider(s, site);
        kc__pathf(site, sizeof site, "%s/%s/dist-packages", lib, names[i]);
        consider(s, site);
    }
}

static void dirname_of(const char *path, char *out, size_t n) {
    snprintf(out, n, "%s", path);
    char *slash = strrchr(out, '/');
    if (slash && slash != out) *slash = '\0';
}

int kc__tf_find(kc__tf *out, int max, char *searched, size_t sn) {
    search s = {.out = out, .max = max, .searched = searched, .sn = sn};
    if (sn) searched[0] = '\0';
    const char *venv = getenv("VIRTUAL_ENV"), *conda = getenv("CONDA_PREFIX"), *home = getenv("HOME");
    if (venv && *venv) consider_prefix(&s, venv);
    if (conda && *conda) consider_prefix(&s, conda);
    const char *path = getenv("PATH");
    if (path) {
        char buf[8192];
        snprintf(buf, sizeof buf, "%s", path);
        char *save = NULL;
        for (char *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            char py[KC_ENV_PATH + 16];
            snprintf(py, sizeof py, "%s/python3", d);
            if (access(py, X_OK) != 0) continue;
            char prefix[KC_ENV_PATH];
            dirname_of(d, prefix, sizeof prefix); /* bin/.. : a venv or the installation */
            consider_prefix(&s, prefix);
            char real[KC_ENV_PATH];
            if (realpath(py, real)) { /* a symlink into the real installation */
                char bin[KC_ENV_PATH];
                dirname_of(real, bin, sizeof bin);
                dirname_of(bin, prefix, sizeof prefix);
                consider_prefix(&s, prefix);
            }
            size_t dl = strlen(d);
            if (dl >= 6 && !strcmp(d + dl - 6, "/shims")) { /* pyenv: every installed version */
                char versions[KC_ENV_PATH + 16];
                snprintf(versions, sizeof versions, "%s/versions", prefix);
                DIR *vd = opendir(versions);
                if (vd) {
                    struct dirent *e;
                    char names[16][128];
                    int n = 0;
                    while ((e = readdir(vd)) != NULL && n < 16)
                        if (e->d_name[0] != '.') kc__pathf(names[n++], 128, "%s", e->d_name);
                    closedir(vd);
                    for (int i = 0; i < n; i++) {
                        char p[KC_ENV_PATH + 160];
                        kc__pathf(p, sizeof p, "%s/%s", versions, names[i]);
                        consider_prefix(&s, p);
                    }
                }
            }
        }
    }
    if (home && *home) {
        char local[KC_ENV_PATH];
        snprintf(local, sizeof local, "%s/.local", home);
        consider_prefix(&s, local);
    }
    consider(&s, "/usr/lib/python3/dist-packages");
    consider_prefix(&s, "/usr/local");
    consider_prefix(&s, "/usr");
    return s.n;
}
