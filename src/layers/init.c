/* init.c — Keras weight initializers (glorot/he/lecun, zeros, ones) on host memory. */
#include <math.h>
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

const char kc__init_supported[] =
    "glorot_uniform, glorot_normal, he_uniform, he_normal, lecun_uniform, lecun_normal, zeros, ones";

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
    return i < 0 ? NULL : &k_inits[i].info;
}

const char *kc__init_canonical(const char *name) {
    int i = find_init(name);
    return i < 0 ? NULL : k_inits[i].info.name;
}

bool kc__init_known(const char *name) { return find_init(name) >= 0; }

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
    if (i < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "initializer '%s' is not supported; use one of %s",
                        name ? name : "(null)", kc__init_supported);
    if (n < 0 || (n > 0 && !dst))
        return kc__fail(KC_STATUS_INTERNAL, "initializer '%s': no destination for %lld values", name, (long long)n);
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
