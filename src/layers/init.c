/* init.c — Keras weight initializers (glorot/he/lecun, zeros, ones, general
 * VarianceScaling) on host memory. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

/* Keras's truncated normal keeps N(0, 1) inside +-2 stddev; dividing the wanted stddev by
 * the stddev of that truncated distribution restores the variance. */
#define KC_TRUNC_STDDEV 0.87962566103423978

typedef enum { I_ZEROS, I_ONES, I_GLOROT_U, I_GLOROT_N, I_HE_U, I_HE_N, I_LECUN_U, I_LECUN_N } init_kind;

/* The initializers kerac implements: Keras snake name, class name, whether Keras's config
 * of it carries a seed (src/io writes {"class_name": ..., "config": {"seed": null}}). */
static const struct {
    kc__initializer info;
    init_kind kind;
} k_inits[] = {
    {{"glorot_uniform", "GlorotUniform", 1}, I_GLOROT_U}, {{"glorot_normal", "GlorotNormal", 1}, I_GLOROT_N},
    {{"he_uniform", "HeUniform", 1}, I_HE_U},             {{"he_normal", "HeNormal", 1}, I_HE_N},
    {{"lecun_uniform", "LecunUniform", 1}, I_LECUN_U},    {{"lecun_normal", "LecunNormal", 1}, I_LECUN_N},
    {{"zeros", "Zeros", 0}, I_ZEROS},                     {{"ones", "Ones", 0}, I_ONES},
};

const char kc__init_supported[] = "glorot_uniform, glorot_normal, he_uniform, he_normal, lecun_uniform, "
                                  "lecun_normal, zeros, ones, Constant (any value), VarianceScaling (any scale > 0; mode fan_in, "
                                  "fan_out or fan_avg; distribution truncated_normal, untruncated_normal or uniform)";

/* ---- general VarianceScaling: interned once per distinct (scale, mode, distribution), so
 * that layers keep a static name as for the others */

#define KC_VS_MAX 64
static const char *const k_vs_modes[] = {"fan_in", "fan_out", "fan_avg"};
static const char *const k_vs_dists[] = {"truncated_normal", "untruncated_normal", "uniform"};
static struct {
    kc__initializer info;
    char name[96];
    int mode, dist;
} k_vs[KC_VS_MAX];
static int k_vs_n;
static pthread_mutex_t k_vs_mu = PTHREAD_MUTEX_INITIALIZER;

static int vs_index(const char *s, const char *const *list, int n) {
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, list[i]) == 0) return i;
    return -1;
}

const kc__initializer *kc__init_variance_scaling(double scale, const char *mode, const char *distribution,
                                                 const char **why) {
    /* Keras 2 wrote "normal" for the truncated one */
    if (distribution && strcmp(distribution, "normal") == 0) distribution = "truncated_normal";
    int m = vs_index(mode, k_vs_modes, 3), d = vs_index(distribution, k_vs_dists, 3);
    *why = !(scale > 0.0) || !isfinite(scale) ? "its scale must be a positive number"
           : m < 0                            ? "its mode must be fan_in, fan_out or fan_avg"
           : d < 0 ? "its distribution must be truncated_normal, untruncated_normal or uniform" : NULL;
    if (*why) return NULL;
    char name[96];
    snprintf(name, sizeof name, "variance_scaling(%.17g,%s,%s)", scale, k_vs_modes[m], k_vs_dists[d]);
    const kc__initializer *out = NULL;
    pthread_mutex_lock(&k_vs_mu);
    for (int i = 0; i < k_vs_n && !out; i++)
        if (strcmp(k_vs[i].name, name) == 0) out = &k_vs[i].info;
    if (!out && k_vs_n < KC_VS_MAX) {
        int i = k_vs_n;
        memcpy(k_vs[i].name, name, sizeof name);
        k_vs[i].mode = m, k_vs[i].dist = d;
        k_vs[i].info = (kc__initializer){.name = k_vs[i].name, .class_name = "VarianceScaling", .has_seed = 1,
                                         .vs_scale = scale, .vs_mode = k_vs_modes[m],
                                         .vs_distribution = k_vs_dists[d]};
        k_vs_n = i + 1; /* published after the entry is complete */
        out = &k_vs[i].info;
    }
    pthread_mutex_unlock(&k_vs_mu);
    if (!out) *why = "more than 64 distinct VarianceScaling initializers in one process";
    return out;
}

const kc__initializer *kc__init_constant(double value) {
    char name[96];
    snprintf(name, sizeof name, "constant(%.17g)", value);
    const kc__initializer *out = NULL;
    pthread_mutex_lock(&k_vs_mu);
    for (int i = 0; i < k_vs_n && !out; i++)
        if (strcmp(k_vs[i].name, name) == 0) out = &k_vs[i].info;
    if (!out && k_vs_n < KC_VS_MAX) {
        int i = k_vs_n;
        memcpy(k_vs[i].name, name, sizeof name);
        k_vs[i].info = (kc__initializer){.name = k_vs[i].name, .class_name = "Constant", .vs_scale = value,
                                         .is_constant = 1};
        k_vs_n = i + 1;
        out = &k_vs[i].info;
    }
    pthread_mutex_unlock(&k_vs_mu);
    return out;
}

/* "variance_scaling(SCALE,MODE,DIST)" or "constant(VALUE)" -> its entry (interned on first
 * sight); NULL if the name is of neither form. */
static const kc__initializer *vs_find(const char *name) {
    static const char pfx[] = "variance_scaling(", cpfx[] = "constant(";
    if (name && strncmp(name, cpfx, sizeof cpfx - 1) == 0) {
        char *end;
        double v = strtod(name + sizeof cpfx - 1, &end);
        return end != name + sizeof cpfx - 1 && end[0] == ')' && !end[1] ? kc__init_constant(v) : NULL;
    }
    if (!name || strncmp(name, pfx, sizeof pfx - 1) != 0) return NULL;
    char buf[96], *mode, *dist, *end;
    snprintf(buf, sizeof buf, "%s", name + sizeof pfx - 1);
    double scale = strtod(buf, &end);
    if (end == buf || *end != ',') return NULL;
    mode = end + 1;
    if (!(dist = strchr(mode, ','))) return NULL;
    *dist++ = '\0';
    if (!(end = strchr(dist, ')')) || end[1]) return NULL;
    *end = '\0';
    const char *why;
    return kc__init_variance_scaling(scale, mode, dist, &why);
}

static kc_status vs_fill(const kc__initializer *k, float *dst, int64_t n, double fi, double fo, kc_rng *rng) {
    if (k->is_constant) {
        for (int64_t j = 0; j < n; j++) dst[j] = (float)k->vs_scale;
        return KC_STATUS_OK;
    }
    if (n > 0 && !rng) return kc__fail(KC_STATUS_INTERNAL, "initializer '%s' needs a random generator", k->name);
    double fan = strcmp(k->vs_mode, "fan_in") == 0 ? fi : strcmp(k->vs_mode, "fan_out") == 0 ? fo : (fi + fo) / 2.0;
    double var = k->vs_scale / (fan < 1.0 ? 1.0 : fan);
    if (strcmp(k->vs_distribution, "uniform") == 0) {
        double limit = sqrt(3.0 * var);
        for (int64_t j = 0; j < n; j++) dst[j] = (float)((2.0 * kc__rng_uniform(rng) - 1.0) * limit);
    } else if (strcmp(k->vs_distribution, "truncated_normal") == 0) {
        double stddev = sqrt(var) / KC_TRUNC_STDDEV;
        for (int64_t j = 0; j < n; j++) dst[j] = (float)(kc__rng_truncated_normal(rng) * stddev);
    } else {
        double stddev = sqrt(var);
        for (int64_t j = 0; j < n; j++) dst[j] = (float)(kc__rng_normal(rng) * stddev);
    }
    return KC_STATUS_OK;
}

static int find_init(const char *name) {
    if (!name) return -1;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_inits); i++)
        if (strcmp(name, k_inits[i].info.name) == 0 || strcmp(name, k_inits[i].info.class_name) == 0) return (int)i;
    if (strcmp(name, "zero") == 0) return find_init("zeros");
    if (strcmp(name, "one") == 0) return find_init("ones");
    return -1;
}

const kc__initializer *kc__init_find(const char *name) {
    int i = find_init(name);
    return i < 0 ? vs_find(name) : &k_inits[i].info;
}

const char *kc__init_canonical(const char *name) {
    const kc__initializer *k = kc__init_find(name);
    return k ? k->name : NULL;
}

bool kc__init_known(const char *name) { return kc__init_find(name) != NULL; }

kc_status kc__init_fill(const char *name, float *dst, int64_t n, int64_t fan_in, int64_t fan_out, kc_rng *rng) {
    if (name && strncmp(name, KC_INIT_CONST, strlen(KC_INIT_CONST)) == 0) { /* a layer's own constant */
        char *end = NULL;
        float v = strtof(name + strlen(KC_INIT_CONST), &end);
        if (!end || *end || n < 0 || (n > 0 && !dst))
            return kc__fail(KC_STATUS_INTERNAL, "initializer '%s': not a constant", name);
        for (int64_t j = 0; j < n; j++) dst[j] = v;
        return KC_STATUS_OK;
    }
    int i = find_init(name);
    const kc__initializer *vs = i < 0 ? vs_find(name) : NULL;
    if (i < 0 && !vs)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "initializer '%s' is not supported; use one of %s",
                        name ? name : "(null)", kc__init_supported);
    if (n < 0 || (n > 0 && !dst))
        return kc__fail(KC_STATUS_INTERNAL, "initializer '%s': no destination for %lld values", name, (long long)n);
    if (vs) return vs_fill(vs, dst, n, fan_in < 1 ? 1.0 : (double)fan_in, fan_out < 1 ? 1.0 : (double)fan_out, rng);
    init_kind k = k_inits[i].kind;
    if ((k != I_ZEROS && k != I_ONES) && !rng)
        return kc__fail(KC_STATUS_INTERNAL, "initializer '%s' needs a random generator", name);
    /* Keras: fans below 1 count as 1 */
    double fi = fan_in < 1 ? 1.0 : (double)fan_in, fo = fan_out < 1 ? 1.0 : (double)fan_out;
    double limit = 0.0, stddev = 0.0;
    bool uniform = false;
    switch (k) {
    case I_ZEROS:
        memset(dst, 0, (size_t)n * sizeof *dst);
        return KC_STATUS_OK;
    case I_ONES:
        for (int64_t j = 0; j < n; j++) dst[j] = 1.0f;
        return KC_STATUS_OK;
    case I_GLOROT_U: uniform = true, limit = sqrt(6.0 / (fi + fo)); break;
    case I_GLOROT_N: stddev = sqrt(2.0 / (fi + fo)) / KC_TRUNC_STDDEV; break;
    case I_HE_U: uniform = true, limit = sqrt(6.0 / fi); break;
    case I_HE_N: stddev = sqrt(2.0 / fi) / KC_TRUNC_STDDEV; break;
    case I_LECUN_U: uniform = true, limit = sqrt(3.0 / fi); break;
    case I_LECUN_N: stddev = sqrt(1.0 / fi) / KC_TRUNC_STDDEV; break;
    }
    if (uniform)
        for (int64_t j = 0; j < n; j++) dst[j] = (float)((2.0 * kc__rng_uniform(rng) - 1.0) * limit);
    else
        for (int64_t j = 0; j < n; j++) dst[j] = (float)(kc__rng_truncated_normal(rng) * stddev);
    return KC_STATUS_OK;
}
