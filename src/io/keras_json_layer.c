/* keras_json_layer.c — one layer entry of Keras's JSON model config: its class, found in
 * the registry (class name or alias), and every config key, read through the kind's key
 * table (ops->keras_keys, in the kind's file in src/layers) and the keys every layer has
 * (keras_layers.c), into the kind's public options; and the value checks and messages the
 * model reader (keras_json_read.c) shares. A class, key or value kerac does not implement
 * is an error that names the layer, the key and the value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keras_json_read.h"
#include "keras_json_values.h"

/* ---------------------------------------------------------------- small helpers */

/* A JSON value as short text for messages. */
const char *kc__json_text(const json_t *v, char *buf, size_t n) {
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    if (!s) {
        snprintf(buf, n, "%s", v ? "(unprintable)" : "(missing)");
        return buf;
    }
    if (strlen(s) > 80) snprintf(buf, n, "%.77s...", s);
    else snprintf(buf, n, "%s", s);
    free(s);
    return buf;
}

const char *kc__json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "a value";
}

kc_status kc__json_bad_type(const parsed_layer *pl, const char *key, const char *want, const json_t *v) {
    char b[128];
    return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' must be %s, got %s %s", pl->label, key, want, kc__json_type_name(v),
                    kc__json_text(v, b, sizeof b));
}

kc_status kc__json_unsupported_value(const parsed_layer *pl, const char *key, const json_t *v, const char *only) {
    char b[128];
    return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s = %s is not supported by kerac (it implements only %s)",
                    pl->label, key, kc__json_text(v, b, sizeof b), only);
}

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0) return true;
    return false;
}

/* Every key of obj must be in list; `what` names the object in the message. */
kc_status kc__json_check_keys(const json_t *obj, const char *const *list, size_t n, const char *what) {
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        if (!in_list(key, list, n)) {
            char known[512];
            size_t used = 0;
            known[0] = '\0';
            for (size_t i = 0; i < n && used < sizeof known; i++)
                used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", list[i]);
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s has the key '%s', which kerac does not know (known: %s)",
                            what, key, known);
        }
    }
    return KC_STATUS_OK;
}

/* Does v equal one of the '|'-separated JSON texts in lit? */
static bool fixed_matches(const json_t *v, const char *lit) {
    char alt[64];
    while (lit && *lit) {
        const char *bar = strchr(lit, '|');
        size_t len = bar ? (size_t)(bar - lit) : strlen(lit);
        snprintf(alt, sizeof alt, "%.*s", (int)len, lit);
        json_t *want = json_loads(alt, JSON_DECODE_ANY, NULL);
        bool eq = want && json_equal((json_t *)v, want);
        json_decref(want);
        if (eq) return true;
        lit = bar ? bar + 1 : NULL;
    }
    return false;
}

/* The first alternative of a FIXED literal, for messages: "\"channels_last\"". */
static const char *fixed_first(const char *lit, char *buf, size_t n) {
    const char *bar = strchr(lit, '|');
    snprintf(buf, n, "%.*s", (int)(bar ? (size_t)(bar - lit) : strlen(lit)), lit);
    return buf;
}

static kc_status get_int(const parsed_layer *pl, const char *key, const json_t *v, int *out) {
    if (!json_is_integer(v)) return kc__json_bad_type(pl, key, "an integer", v);
    json_int_t x = json_integer_value(v);
    if (x < -(1 << 30) || x > (1 << 30))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' = %lld is out of range", pl->label, key, (long long)x);
    *out = (int)x;
    return KC_STATUS_OK;
}

/* An int n or a list of two ints; each must be positive. */
static kc_status get_int2(const parsed_layer *pl, const char *key, const json_t *v, int out[2]) {
    if (json_is_integer(v)) {
        KC_TRY(get_int(pl, key, v, &out[0]));
        out[1] = out[0];
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        KC_TRY(get_int(pl, key, json_array_get(v, 0), &out[0]));
        KC_TRY(get_int(pl, key, json_array_get(v, 1), &out[1]));
    } else {
        return kc__json_bad_type(pl, key, "an integer or a list of two integers", v);
    }
    if (out[0] < 1 || out[1] < 1) {
        char b[128];
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' must be positive, got %s", pl->label, key,
                        kc__json_text(v, b, sizeof b));
    }
    return KC_STATUS_OK;
}

/* null, or an int n or a list of two ints, each >= 0 (Conv2DTranspose's output_padding). */
static kc_status get_opt_int2(const parsed_layer *pl, const char *key, const json_t *v, kc_opt_int2 *out) {
    if (json_is_null(v)) return KC_STATUS_OK;
    if (json_is_integer(v)) {
        KC_TRY(get_int(pl, key, v, &out->v[0]));
        out->v[1] = out->v[0];
    } else if (json_is_array(v) && json_array_size(v) == 2) {
        KC_TRY(get_int(pl, key, json_array_get(v, 0), &out->v[0]));
        KC_TRY(get_int(pl, key, json_array_get(v, 1), &out->v[1]));
    } else {
        return kc__json_bad_type(pl, key, "null, an integer or a list of two integers", v);
    }
    if (out->v[0] < 0 || out->v[1] < 0) {
        char b[128];
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' must not be negative, got %s", pl->label, key,
                        kc__json_text(v, b, sizeof b));
    }
    out->set = 1;
    return KC_STATUS_OK;
}

/* A list of dimensions without the batch one: ints, no null. */
static kc_status get_dims(const parsed_layer *pl, const char *key, const json_t *list, size_t first, int out[KC_MAX_RANK]) {
    char b[128];
    size_t n = json_array_size(list);
    if (n <= first)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: '%s' = %s has no dimensions; kerac needs at least one",
                        pl->label, key, kc__json_text(list, b, sizeof b));
    if (n - first > KC_MAX_RANK)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: '%s' = %s has %zu dimensions; kerac supports at most %d",
                        pl->label, key, kc__json_text(list, b, sizeof b), n - first, KC_MAX_RANK);
    memset(out, 0, KC_MAX_RANK * sizeof *out);
    for (size_t i = first; i < n; i++) {
        const json_t *d = json_array_get(list, i);
        if (json_is_null(d))
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "%s: '%s' = %s has a variable (null) dimension; kerac needs every dimension except "
                                "the batch one fixed",
                            pl->label, key, kc__json_text(list, b, sizeof b));
        KC_TRY(get_int(pl, key, d, &out[i - first]));
        if (out[i - first] == 0)
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' = %s has a zero dimension", pl->label, key,
                            kc__json_text(list, b, sizeof b));
    }
    return KC_STATUS_OK;
}

kc_status kc__json_batch_shape(const parsed_layer *pl, const char *key, const json_t *v, int out[KC_MAX_RANK]) {
    if (!json_is_array(v)) return kc__json_bad_type(pl, key, "a list such as [null, 28, 28, 1]", v);
    const json_t *batch = json_array_get(v, 0);
    if (batch && !json_is_null(batch)) {
        if (!json_is_integer(batch)) return kc__json_bad_type(pl, key, "a list starting with null or the batch size", v);
        kc__log(KC_LOG_INFO, PFX "%s: '%s' fixes the batch size to %lld; kerac takes the batch size from fit/predict",
                pl->label, key, (long long)json_integer_value(batch));
    }
    return get_dims(pl, key, v, 1, out);
}

/* dtype: null, "float32", or a policy object {"class_name": "DTypePolicy", "config": {"name": ...}}. */
kc_status kc__json_check_dtype(const parsed_layer *pl, const char *key, const json_t *v) {
    const char *name = NULL;
    if (json_is_null(v)) return KC_STATUS_OK;
    if (json_is_string(v)) name = json_string_value(v);
    else if (json_is_object(v)) name = json_string_value(json_object_get(json_object_get(v, "config"), "name"));
    if (!name) return kc__json_bad_type(pl, key, "a dtype name or a DTypePolicy object", v);
    if (strcmp(name, "float32") != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s: %s '%s' is not supported; kerac computes in float32 (mixed precision is not "
                            "implemented yet)",
                        pl->label, key, name);
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- initializers */

static const kc__initializer *init_from_variance_scaling(const json_t *cfg) {
    const json_t *scale = json_object_get(cfg, "scale");
    const char *mode = json_string_value(json_object_get(cfg, "mode"));
    const char *dist = json_string_value(json_object_get(cfg, "distribution"));
    if (!json_is_number(scale) || !mode || !dist) return NULL;
    double s = json_number_value(scale);
    bool uniform = strcmp(dist, "uniform") == 0;
    bool normal = strcmp(dist, "truncated_normal") == 0 || strcmp(dist, "normal") == 0;
    if (!uniform && !normal) return NULL;
    if (s == 1.0 && strcmp(mode, "fan_avg") == 0) return kc__init_find(uniform ? "glorot_uniform" : "glorot_normal");
    if (s == 2.0 && strcmp(mode, "fan_in") == 0) return kc__init_find(uniform ? "he_uniform" : "he_normal");
    if (s == 1.0 && strcmp(mode, "fan_in") == 0) return kc__init_find(uniform ? "lecun_uniform" : "lecun_normal");
    return NULL;
}

/* A VarianceScaling object that is none of the named ones: kerac's general one, written
 * back with the same keys (`why`: the reason when a key is not Keras's). */
static const kc__initializer *init_general_variance_scaling(const json_t *cfg, const char **why) {
    const json_t *scale = json_object_get(cfg, "scale");
    *why = "its scale, mode and distribution must be given";
    if (!json_is_number(scale)) return NULL;
    return kc__init_variance_scaling(json_number_value(scale), json_string_value(json_object_get(cfg, "mode")),
                                     json_string_value(json_object_get(cfg, "distribution")), why);
}

/* "glorot_uniform" or {"class_name": "GlorotUniform", "config": {"seed": null}}; null: the
 * layer's default (*out = NULL). */
static kc_status read_init(const parsed_layer *pl, const char *key, const json_t *v, const char **out) {
    char b[128];
    *out = NULL;
    if (json_is_null(v)) return KC_STATUS_OK;
    if (json_is_string(v)) {
        const kc__initializer *k = kc__init_find(json_string_value(v));
        if (!k)
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s '%s' is not supported; kerac implements %s", pl->label,
                            key, json_string_value(v), kc__init_supported);
        *out = k->name;
        return KC_STATUS_OK;
    }
    if (!json_is_object(v)) return kc__json_bad_type(pl, key, "an initializer name or object", v);
    /* shared_object_id: tf-keras's .keras archive marks an initializer object its layer
     * serialises twice (SeparableConv2D's bias_initializer) */
    static const char *const obj_keys[] = {"module", "class_name", "config", "registered_name", "shared_object_id"};
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    const json_t *cfg = json_object_get(v, "config");
    if (!cls || (cfg && !json_is_object(cfg) && !json_is_null(cfg)))
        return kc__json_bad_type(pl, key, "an initializer object {\"class_name\": ..., \"config\": {...}}", v);
    char what[KC_NAME_MAX + 96];
    snprintf(what, sizeof what, "%s: %s", pl->label, key);
    KC_TRY(kc__json_check_keys(v, obj_keys, KC_ARRAY_LEN(obj_keys), what));
    const kc__initializer *k = NULL;
    bool variance_scaling = strcmp(cls, "VarianceScaling") == 0;
    if (variance_scaling) {
        const char *why = NULL;
        if (!(k = init_from_variance_scaling(cfg)) && !(k = init_general_variance_scaling(cfg, &why)))
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s = %s is not supported: %s", pl->label, key,
                            kc__json_text(v, b, sizeof b), why);
    } else if (strcmp(cls, "Constant") == 0) { /* {"value": v}: kerac's interned constant */
        const json_t *val = cfg ? json_object_get(cfg, "value") : NULL;
        if (!json_is_number(val))
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s = %s: kerac implements Constant with a number value",
                            pl->label, key, kc__json_text(v, b, sizeof b));
        if (!(k = kc__init_constant(json_number_value(val))))
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s: more than 64 distinct Constant or VarianceScaling "
                            "initializers in one process", pl->label, key);
    } else {
        k = kc__init_find(cls);
        if (!k)
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s '%s' is not supported; kerac implements %s", pl->label,
                            key, cls, kc__init_supported);
    }
    const char *ckey;
    json_t *cv;
    json_object_foreach((json_t *)cfg, ckey, cv) {
        if (strcmp(ckey, "seed") == 0 && (k->has_seed || variance_scaling)) {
            if (json_is_null(cv)) continue;
            if (!json_is_integer(cv)) return kc__json_bad_type(pl, "seed", "null or an integer", cv);
            kc__log(KC_LOG_INFO,
                    PFX "%s: %s %s has seed %lld; kerac draws initial weights from the model seed "
                        "(kc_model_set_seed) instead",
                    pl->label, key, cls, (long long)json_integer_value(cv));
            continue;
        }
        if (variance_scaling && (strcmp(ckey, "scale") == 0 || strcmp(ckey, "mode") == 0 ||
                                 strcmp(ckey, "distribution") == 0))
            continue;
        if (k->is_constant && strcmp(ckey, "value") == 0) continue;
        /* Keras 3.15+ writes fan axes for the variance-scaling family; null means the
         * default fan computation, which is what kerac does */
        if ((strcmp(ckey, "input_axes") == 0 || strcmp(ckey, "output_axes") == 0) && json_is_null(cv)) continue;
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s %s has the option '%s' = %s, which kerac does not implement",
                        pl->label, key, cls, ckey, kc__json_text(cv, b, sizeof b));
    }
    *out = k->name;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- one config key */

/* ZeroPadding2D's padding and Cropping2D's cropping: n, (a, b) or ((t, b), (l, r)); only the
 * padding must have a non-zero side */
static kc_status read_pad2(const parsed_layer *pl, const kc__field *f, const char *key, const json_t *v, void *dst) {
    char b[128];
    int(*p)[2] = dst;
    int a[2], c[2];
    if (json_is_integer(v)) {
        KC_TRY(get_int(pl, key, v, &a[0]));
        p[0][0] = p[0][1] = p[1][0] = p[1][1] = a[0];
    } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_integer(json_array_get(v, 0))) {
        KC_TRY(get_int(pl, key, json_array_get(v, 0), &a[0]));
        KC_TRY(get_int(pl, key, json_array_get(v, 1), &a[1]));
        p[0][0] = p[0][1] = a[0];
        p[1][0] = p[1][1] = a[1];
    } else if (json_is_array(v) && json_array_size(v) == 2 && json_is_array(json_array_get(v, 0)) &&
               json_array_size(json_array_get(v, 0)) == 2 && json_is_array(json_array_get(v, 1)) &&
               json_array_size(json_array_get(v, 1)) == 2) {
        KC_TRY(get_int(pl, key, json_array_get(json_array_get(v, 0), 0), &a[0]));
        KC_TRY(get_int(pl, key, json_array_get(json_array_get(v, 0), 1), &a[1]));
        KC_TRY(get_int(pl, key, json_array_get(json_array_get(v, 1), 0), &c[0]));
        KC_TRY(get_int(pl, key, json_array_get(json_array_get(v, 1), 1), &c[1]));
        p[0][0] = a[0], p[0][1] = a[1], p[1][0] = c[0], p[1][1] = c[1];
    } else {
        return kc__json_bad_type(pl, key, "an integer, (rows, cols) or ((top, bottom), (left, right))", v);
    }
    if (p[0][0] < 0 || p[0][1] < 0 || p[1][0] < 0 || p[1][1] < 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' = %s is negative", pl->label, key, kc__json_text(v, b, sizeof b));
    if (f->kind == KC_F_PAD2 && !p[0][0] && !p[0][1] && !p[1][0] && !p[1][1])
        return kc__json_unsupported_value(pl, key, v, "a padding with at least one non-zero side");
    return KC_STATUS_OK;
}


/* augmentation: a factor (null, a number or [a, b]) or a pair of numbers. */
static kc_status read_number_pair(parsed_layer *pl, const kc__field *f, const char *key, const json_t *v, void *dst) {
    bool factor = f->kind == KC_F_FACTOR;
    const json_t *a = json_array_get(v, 0), *b = json_array_get(v, 1);
    if (factor && json_is_null(v)) return KC_STATUS_OK;
    if (factor && json_is_number(v)) {
        float x = (float)json_number_value(v);
        *(kc_factor *)dst = (kc_factor)KC_FACTOR(x);
        return KC_STATUS_OK;
    }
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_number(a) || !json_is_number(b))
        return kc__json_bad_type(pl, key, factor ? "null, a number or a pair of numbers" : "a pair of numbers", v);
    if (factor) *(kc_factor *)dst = (kc_factor)KC_FACTOR_PAIR((float)json_number_value(a), (float)json_number_value(b));
    else ((float *)dst)[0] = (float)json_number_value(a), ((float *)dst)[1] = (float)json_number_value(b);
    return KC_STATUS_OK;
}

static kc_status read_field(parsed_layer *pl, const kc__field *f, const char *key, const json_t *v) {
    void *dst = f->off == KC_F_NO_OFFSET ? NULL : (char *)&pl->opts + f->off;
    char b[128];
    switch (f->kind) {
    case KC_F_NAME:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_string(v)) return kc__json_bad_type(pl, key, "a string", v);
        *(const char **)dst = json_string_value(v);
        return KC_STATUS_OK;
    case KC_F_INT:
        return get_int(pl, key, v, (int *)dst);
    case KC_F_INT2:
        return get_int2(pl, key, v, (int *)dst);
    case KC_F_POOL_STRIDES:
        if (json_is_null(v)) return KC_STATUS_OK; /* Keras: strides = pool_size */
        return get_int2(pl, key, v, (int *)dst);
    case KC_F_FLOAT:
    case KC_F_FLOAT_GIVEN:
        if (!json_is_number(v)) return kc__json_bad_type(pl, key, "a number", v);
        *(float *)dst = (float)json_number_value(v);
        if (f->kind == KC_F_FLOAT_GIVEN) *(int *)((char *)&pl->opts + f->given_off) = 1;
        return KC_STATUS_OK;
    case KC_F_MAX_VALUE:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_number(v)) return kc__json_bad_type(pl, key, "null or a number", v);
        if (json_number_value(v) <= 0.0) return kc__json_unsupported_value(pl, key, v, "null or a positive number");
        *(float *)dst = (float)json_number_value(v);
        return KC_STATUS_OK;
    case KC_F_BOOL:
        if (!json_is_boolean(v)) return kc__json_bad_type(pl, key, "true or false", v);
        *(int *)dst = json_is_true(v) ? KC_TRUE : KC_FALSE;
        return KC_STATUS_OK;
    case KC_F_STR:
        if (!json_is_string(v)) return kc__json_bad_type(pl, key, "a string", v);
        *(const char **)dst = json_string_value(v);
        return KC_STATUS_OK;
    case KC_F_ACT:
        if (json_is_null(v)) *(const char **)dst = "linear";
        else if (json_is_string(v)) *(const char **)dst = json_string_value(v);
        else return kc__json_unsupported_value(pl, key, v, "activations given by name, such as \"relu\"");
        return KC_STATUS_OK;
    case KC_F_INIT:
        return read_init(pl, key, v, (const char **)dst);
    case KC_F_FIXED_INIT: {
        const char *name = NULL;
        KC_TRY(read_init(pl, key, v, &name));
        if (name && strcmp(name, f->lit) != 0)
            return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s '%s' is not supported by kerac (it implements only '%s')",
                            pl->label, key, name, f->lit);
        return KC_STATUS_OK;
    }
    case KC_F_SHAPE:
        if (!json_is_array(v)) return kc__json_bad_type(pl, key, "a list of integers", v);
        if (dst) return get_dims(pl, key, v, 0, (int *)dst);
        KC_TRY(get_dims(pl, key, v, 0, pl->batch_shape)); /* input_shape on a first layer */
        pl->has_batch_shape = true;
        return KC_STATUS_OK;
    case KC_F_BATCH_SHAPE:
        if (dst) return kc__json_batch_shape(pl, key, v, (int *)dst);
        if (json_is_array(v) && json_array_size(v) > 1 && json_is_null(json_array_get(v, 1))) {
            /* tf-keras records [null, null, ...] on a layer built before its model (an adapted
             * Normalization): no input shape, which only a Sequential's first layer needs */
            kc__log(KC_LOG_DEBUG, PFX "%s: '%s' with unknown dimensions ignored", pl->label, key);
            return KC_STATUS_OK;
        }
        KC_TRY(kc__json_batch_shape(pl, key, v, pl->batch_shape));
        pl->has_batch_shape = true;
        return KC_STATUS_OK;
    case KC_F_SEED:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_integer(v) || json_integer_value(v) < 0) return kc__json_bad_type(pl, key, "null or a non-negative integer", v);
        *(uint64_t *)dst = (uint64_t)json_integer_value(v);
        return KC_STATUS_OK;
    case KC_F_CONSTS:
        return kc__json_read_consts(pl, key, v, dst);
    case KC_F_AXES:
        return kc__json_read_axes(pl, key, v, dst);
    case KC_F_NOISE_SHAPE:
        return kc__json_read_noise_shape(pl, key, v, dst);
    case KC_F_CROP2: /* as PAD2, zeros allowed */
    case KC_F_PAD2:
        return read_pad2(pl, f, key, v, dst);
    case KC_F_AXIS: {
        const json_t *a = v;
        if (json_is_array(v) && json_array_size(v) == 1) a = json_array_get(v, 0); /* Keras 2: [3] */
        if (!json_is_integer(a)) return kc__json_bad_type(pl, key, "an integer", v);
        json_int_t x = json_integer_value(a);
        if (x == -1) {
            *(int *)dst = -1;
            return KC_STATUS_OK;
        }
        if (x <= 0 || x > KC_MAX_RANK) return kc__json_unsupported_value(pl, key, v, "the last (channels) axis, -1");
        pl->axis = (int)x; /* checked against the input rank once shapes are known */
        *(int *)dst = -1;
        return KC_STATUS_OK;
    }
    case KC_F_FIXED:
        if (!fixed_matches(v, f->lit)) return kc__json_unsupported_value(pl, key, v, fixed_first(f->lit, b, sizeof b));
        return KC_STATUS_OK;
    case KC_F_DTYPE:
        return kc__json_check_dtype(pl, key, v);
    case KC_F_IGNORE:
        return KC_STATUS_OK;
    case KC_F__END:
        break;
    case KC_F_FACTOR:
    case KC_F_FLOAT_PAIR:
        return read_number_pair(pl, f, key, v, dst);
    case KC_F_OPT_INT2: /* convolutions */
        return get_opt_int2(pl, key, v, (kc_opt_int2 *)dst);
    }
    return kc__fail(KC_STATUS_INTERNAL, PFX "%s: key '%s' has no reader", pl->label, key);
}

static const kc__field *find_field(const kc__field *t, int n, const char *key) {
    for (int i = 0; i < n; i++)
        if (strcmp(t[i].key, key) == 0) return &t[i];
    return NULL;
}

static kc_status unknown_key(const parsed_layer *pl, const char *key) {
    char known[640];
    size_t used = 0;
    known[0] = '\0';
    int nb = 0;
    const kc__field *base = kc__keras_base_fields(&nb);
    bool input = kc__keras_is_input(pl->ops);
    for (int i = 0; !input && i < nb; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", base[i].key);
    for (int i = 0; i < pl->ops->n_keras_keys && used < sizeof known; i++) {
        if (find_field(pl->ops->keras_keys, i, pl->ops->keras_keys[i].key)) continue; /* listed twice (Dropout seed) */
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", used ? ", " : "", pl->ops->keras_keys[i].key);
    }
    return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: unknown config key '%s'; kerac knows %s", pl->label, key,
                    used ? known : "no keys besides name, trainable and dtype");
}

/* ---------------------------------------------------------------- one layer entry */

static const char *const k_entry_keys[] = {"class_name", "config",      "module",        "registered_name",
                                           "build_config", "compile_config", "name",  "inbound_nodes",
                                           "shared_object_id"};

/* The name a layer entry goes by: its "name", else its config's "name", else NULL. */
const char *kc__json_entry_name(const json_t *entry) {
    const char *n = json_string_value(json_object_get(entry, "name"));
    if (!n) n = json_string_value(json_object_get(json_object_get(entry, "config"), "name"));
    return n;
}

kc_status kc__json_parse_layer(const json_t *entry, int index, parsed_layer *pl) {
    memset(pl, 0, sizeof *pl);
    if (!json_is_object(entry))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "entry %d of \"layers\" is %s, not a layer object", index,
                        kc__json_type_name(entry));
    const char *cls = json_string_value(json_object_get(entry, "class_name"));
    const char *name = kc__json_entry_name(entry);
    pl->name = name ? name : "";
    pl->cls = cls;
    if (name) snprintf(pl->label, sizeof pl->label, "layer '%s' (%s)", name, cls ? cls : "no class");
    else snprintf(pl->label, sizeof pl->label, "layer #%d (%s)", index, cls ? cls : "no class");
    if (!cls) return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no \"class_name\"", pl->label);
    KC_TRY(kc__json_check_keys(entry, k_entry_keys, KC_ARRAY_LEN(k_entry_keys), pl->label));
    const char *cfg_name = json_string_value(json_object_get(json_object_get(entry, "config"), "name"));
    const char *top_name = json_string_value(json_object_get(entry, "name"));
    if (cfg_name && top_name && strcmp(cfg_name, top_name) != 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: its config names it '%s'; the two names must agree", pl->label,
                        cfg_name);
    pl->ops = kc__layer_find(cls);
    if (!pl->ops) {
        char list[1024]; /* every class name, with room for many more kinds */
        bool nested = strcmp(cls, "Sequential") == 0 || strcmp(cls, "Functional") == 0 || strcmp(cls, "Model") == 0;
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "layer '%s' has class '%s', which kerac does not support%s; supported: %s",
                        name ? name : "?", cls, nested ? " here (kerac inlines nested models in a Functional model or in a Sequential model starting with its InputLayer)" : "",
                        kc__layer_class_list(list, sizeof list));
    }
    snprintf(pl->label, sizeof pl->label, "layer '%s' (%s)", name ? name : "?", pl->ops->class_name);
    const json_t *config = json_object_get(entry, "config");
    if (!json_is_object(config)) return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no \"config\" object", pl->label);
    int nb = 0, nx = 0;
    const kc__field *base = kc__keras_base_fields(&nb);
    const kc__field *extra = kc__keras_extra_fields(&nx);
    bool input = kc__keras_is_input(pl->ops);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)config, key, v) {
        const kc__field *f = find_field(pl->ops->keras_keys, pl->ops->n_keras_keys, key);
        if (!f && !input) f = find_field(base, nb, key);
        if (!f && !input) f = find_field(extra, nx, key);
        if (!f) return unknown_key(pl, key);
        if (!input && strcmp(key, "trainable") == 0) { /* the layer's flag, not an option of its kind */
            if (!json_is_boolean(v)) return kc__json_bad_type(pl, key, "true or false", v);
            pl->frozen = json_is_false(v);
            continue;
        }
        KC_TRY(read_field(pl, f, key, v));
    }
    if (input && pl->opts.input_layer.shape[0] == 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no shape: give \"batch_shape\" (Keras 3) or "
                                            "\"batch_input_shape\" (Keras 2)", pl->label);
    return KC_STATUS_OK;
}
