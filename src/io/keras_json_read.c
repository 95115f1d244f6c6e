/* keras_json_read.c — Keras's JSON model config (model.to_json(), config.json of a .keras
 * file, model_config of an .h5 file) into a kerac model, through the public builder.
 *
 * Accepted: Keras 2 (class_name/config/keras_version/backend, "batch_input_shape",
 * inbound_nodes [[["conv2d", 0, 0, {}]]], Keras 2.0's Sequential config as a bare list of
 * layers) and Keras 3 ("module", "registered_name", "build_config", "compile_config",
 * "batch_shape", DTypePolicy objects, inbound_nodes [{"args": [...], "kwargs": {}}]).
 *
 * Strict: a class, a config key or a value kerac does not implement is an error that names
 * the layer, the key and the value — never silently dropped. The per-class key tables are
 * in each layer kind's file (src/layers, ops->keras_keys). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io.h"

#define PFX "model JSON: "

typedef struct parsed_layer {
    const kc_layer_ops *ops;     /* the layer kind (class name or alias) */
    const char *name;          /* the layer name ("" when the file gives none) */
    char label[KC_NAME_MAX + 64]; /* "layer 'conv2d' (Conv2D)" for messages */
    kc__layer_opts opts;
    bool has_batch_shape;      /* batch_input_shape / batch_shape / input_shape on a non-input layer */
    int batch_shape[KC_MAX_RANK];
    int axis;                  /* > 0: a Keras 2 style axis to check against the input rank */
} parsed_layer;

typedef struct pending_axis {
    kc_node node;
    int axis;
} pending_axis;

typedef struct reader {
    kc_model *m;
    int n;                     /* entries in "layers" */
    const char **names;        /* (n) name of each entry in the file */
    kc_node *nodes;            /* (n) node made from each entry, -1 until made */
    pending_axis *axes;        /* (n) at most one axis per layer */
    int n_axes;
} reader;

/* ---------------------------------------------------------------- small helpers */

/* A JSON value as short text for messages. */
static const char *jtext(const json_t *v, char *buf, size_t n) {
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

static const char *type_name(const json_t *v) {
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

static kc_status bad_type(const parsed_layer *pl, const char *key, const char *want, const json_t *v) {
    char b[128];
    return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' must be %s, got %s %s", pl->label, key, want, type_name(v),
                    jtext(v, b, sizeof b));
}

static kc_status unsupported_value(const parsed_layer *pl, const char *key, const json_t *v, const char *only) {
    char b[128];
    return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s = %s is not supported by kerac (it implements only %s)",
                    pl->label, key, jtext(v, b, sizeof b), only);
}

static bool in_list(const char *key, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, list[i]) == 0) return true;
    return false;
}

/* Every key of obj must be in list; `what` names the object in the message. */
static kc_status check_keys(const json_t *obj, const char *const *list, size_t n, const char *what) {
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
    if (!json_is_integer(v)) return bad_type(pl, key, "an integer", v);
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
        return bad_type(pl, key, "an integer or a list of two integers", v);
    }
    if (out[0] < 1 || out[1] < 1) {
        char b[128];
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' must be positive, got %s", pl->label, key,
                        jtext(v, b, sizeof b));
    }
    return KC_STATUS_OK;
}

/* A list of dimensions without the batch one: ints, no null. */
static kc_status get_dims(const parsed_layer *pl, const char *key, const json_t *list, size_t first, int out[KC_MAX_RANK]) {
    char b[128];
    size_t n = json_array_size(list);
    if (n <= first)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: '%s' = %s has no dimensions; kerac needs at least one",
                        pl->label, key, jtext(list, b, sizeof b));
    if (n - first > KC_MAX_RANK)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: '%s' = %s has %zu dimensions; kerac supports at most %d",
                        pl->label, key, jtext(list, b, sizeof b), n - first, KC_MAX_RANK);
    memset(out, 0, KC_MAX_RANK * sizeof *out);
    for (size_t i = first; i < n; i++) {
        const json_t *d = json_array_get(list, i);
        if (json_is_null(d))
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "%s: '%s' = %s has a variable (null) dimension; kerac needs every dimension except "
                                "the batch one fixed",
                            pl->label, key, jtext(list, b, sizeof b));
        KC_TRY(get_int(pl, key, d, &out[i - first]));
        if (out[i - first] == 0)
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' = %s has a zero dimension", pl->label, key,
                            jtext(list, b, sizeof b));
    }
    return KC_STATUS_OK;
}

static kc_status get_batch_shape(const parsed_layer *pl, const char *key, const json_t *v, int out[KC_MAX_RANK]) {
    if (!json_is_array(v)) return bad_type(pl, key, "a list such as [null, 28, 28, 1]", v);
    const json_t *batch = json_array_get(v, 0);
    if (batch && !json_is_null(batch)) {
        if (!json_is_integer(batch)) return bad_type(pl, key, "a list starting with null or the batch size", v);
        kc__log(KC_LOG_INFO, PFX "%s: '%s' fixes the batch size to %lld; kerac takes the batch size from fit/predict",
                pl->label, key, (long long)json_integer_value(batch));
    }
    return get_dims(pl, key, v, 1, out);
}

/* dtype: null, "float32", or a policy object {"class_name": "DTypePolicy", "config": {"name": ...}}. */
static kc_status check_dtype(const parsed_layer *pl, const char *key, const json_t *v) {
    const char *name = NULL;
    if (json_is_null(v)) return KC_STATUS_OK;
    if (json_is_string(v)) name = json_string_value(v);
    else if (json_is_object(v)) name = json_string_value(json_object_get(json_object_get(v, "config"), "name"));
    if (!name) return bad_type(pl, key, "a dtype name or a DTypePolicy object", v);
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
    if (!json_is_object(v)) return bad_type(pl, key, "an initializer name or object", v);
    static const char *const obj_keys[] = {"module", "class_name", "config", "registered_name"};
    const char *cls = json_string_value(json_object_get(v, "class_name"));
    const json_t *cfg = json_object_get(v, "config");
    if (!cls || (cfg && !json_is_object(cfg) && !json_is_null(cfg)))
        return bad_type(pl, key, "an initializer object {\"class_name\": ..., \"config\": {...}}", v);
    char what[KC_NAME_MAX + 96];
    snprintf(what, sizeof what, "%s: %s", pl->label, key);
    KC_TRY(check_keys(v, obj_keys, KC_ARRAY_LEN(obj_keys), what));
    const kc__initializer *k = NULL;
    bool variance_scaling = strcmp(cls, "VarianceScaling") == 0;
    if (variance_scaling) {
        k = init_from_variance_scaling(cfg);
        if (!k)
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "%s: %s = %s is not supported; kerac implements the VarianceScaling variants %s",
                            pl->label, key, jtext(v, b, sizeof b), kc__init_supported);
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
            if (!json_is_integer(cv)) return bad_type(pl, "seed", "null or an integer", cv);
            kc__log(KC_LOG_INFO,
                    PFX "%s: %s %s has seed %lld; kerac draws initial weights from the model seed "
                        "(kc_model_set_seed) instead",
                    pl->label, key, cls, (long long)json_integer_value(cv));
            continue;
        }
        if (variance_scaling && (strcmp(ckey, "scale") == 0 || strcmp(ckey, "mode") == 0 ||
                                 strcmp(ckey, "distribution") == 0))
            continue;
        /* Keras 3.15+ writes fan axes for the variance-scaling family; null means the
         * default fan computation, which is what kerac does */
        if ((strcmp(ckey, "input_axes") == 0 || strcmp(ckey, "output_axes") == 0) && json_is_null(cv)) continue;
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s: %s %s has the option '%s' = %s, which kerac does not implement",
                        pl->label, key, cls, ckey, jtext(cv, b, sizeof b));
    }
    *out = k->name;
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- one config key */

static kc_status read_field(parsed_layer *pl, const kc__field *f, const char *key, const json_t *v) {
    void *dst = f->off == KC_F_NO_OFFSET ? NULL : (char *)&pl->opts + f->off;
    char b[128];
    switch (f->kind) {
    case KC_F_NAME:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_string(v)) return bad_type(pl, key, "a string", v);
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
        if (!json_is_number(v)) return bad_type(pl, key, "a number", v);
        *(float *)dst = (float)json_number_value(v);
        return KC_STATUS_OK;
    case KC_F_MAX_VALUE:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_number(v)) return bad_type(pl, key, "null or a number", v);
        if (json_number_value(v) <= 0.0) return unsupported_value(pl, key, v, "null or a positive number");
        *(float *)dst = (float)json_number_value(v);
        return KC_STATUS_OK;
    case KC_F_BOOL:
        if (!json_is_boolean(v)) return bad_type(pl, key, "true or false", v);
        *(int *)dst = json_is_true(v) ? KC_TRUE : KC_FALSE;
        return KC_STATUS_OK;
    case KC_F_STR:
        if (!json_is_string(v)) return bad_type(pl, key, "a string", v);
        *(const char **)dst = json_string_value(v);
        return KC_STATUS_OK;
    case KC_F_ACT:
        if (json_is_null(v)) *(const char **)dst = "linear";
        else if (json_is_string(v)) *(const char **)dst = json_string_value(v);
        else return unsupported_value(pl, key, v, "activations given by name, such as \"relu\"");
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
        if (!json_is_array(v)) return bad_type(pl, key, "a list of integers", v);
        if (dst) return get_dims(pl, key, v, 0, (int *)dst);
        KC_TRY(get_dims(pl, key, v, 0, pl->batch_shape)); /* input_shape on a first layer */
        pl->has_batch_shape = true;
        return KC_STATUS_OK;
    case KC_F_BATCH_SHAPE:
        if (dst) return get_batch_shape(pl, key, v, (int *)dst);
        KC_TRY(get_batch_shape(pl, key, v, pl->batch_shape));
        pl->has_batch_shape = true;
        return KC_STATUS_OK;
    case KC_F_SEED:
        if (json_is_null(v)) return KC_STATUS_OK;
        if (!json_is_integer(v) || json_integer_value(v) < 0) return bad_type(pl, key, "null or a non-negative integer", v);
        *(uint64_t *)dst = (uint64_t)json_integer_value(v);
        return KC_STATUS_OK;
    case KC_F_PAD2: {
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
            return bad_type(pl, key, "an integer, (rows, cols) or ((top, bottom), (left, right))", v);
        }
        if (p[0][0] < 0 || p[0][1] < 0 || p[1][0] < 0 || p[1][1] < 0)
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: '%s' = %s is negative", pl->label, key, jtext(v, b, sizeof b));
        if (!p[0][0] && !p[0][1] && !p[1][0] && !p[1][1])
            return unsupported_value(pl, key, v, "a padding with at least one non-zero side");
        return KC_STATUS_OK;
    }
    case KC_F_AXIS: {
        const json_t *a = v;
        if (json_is_array(v) && json_array_size(v) == 1) a = json_array_get(v, 0); /* Keras 2: [3] */
        if (!json_is_integer(a)) return bad_type(pl, key, "an integer", v);
        json_int_t x = json_integer_value(a);
        if (x == -1) {
            *(int *)dst = -1;
            return KC_STATUS_OK;
        }
        if (x <= 0 || x > KC_MAX_RANK) return unsupported_value(pl, key, v, "the last (channels) axis, -1");
        pl->axis = (int)x; /* checked against the input rank once shapes are known */
        *(int *)dst = -1;
        return KC_STATUS_OK;
    }
    case KC_F_FIXED:
        if (!fixed_matches(v, f->lit)) return unsupported_value(pl, key, v, fixed_first(f->lit, b, sizeof b));
        return KC_STATUS_OK;
    case KC_F_DTYPE:
        return check_dtype(pl, key, v);
    case KC_F_IGNORE:
        return KC_STATUS_OK;
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
static const char *entry_name(const json_t *entry) {
    const char *n = json_string_value(json_object_get(entry, "name"));
    if (!n) n = json_string_value(json_object_get(json_object_get(entry, "config"), "name"));
    return n;
}

static kc_status parse_layer(const json_t *entry, int index, parsed_layer *pl) {
    memset(pl, 0, sizeof *pl);
    if (!json_is_object(entry))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "entry %d of \"layers\" is %s, not a layer object", index,
                        type_name(entry));
    const char *cls = json_string_value(json_object_get(entry, "class_name"));
    const char *name = entry_name(entry);
    pl->name = name ? name : "";
    if (name) snprintf(pl->label, sizeof pl->label, "layer '%s' (%s)", name, cls ? cls : "no class");
    else snprintf(pl->label, sizeof pl->label, "layer #%d (%s)", index, cls ? cls : "no class");
    if (!cls) return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no \"class_name\"", pl->label);
    KC_TRY(check_keys(entry, k_entry_keys, KC_ARRAY_LEN(k_entry_keys), pl->label));
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
                        name ? name : "?", cls, nested ? " (a model nested inside a model; flatten it)" : "",
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
        KC_TRY(read_field(pl, f, key, v));
    }
    if (input && pl->opts.input_layer.shape[0] == 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no shape: give \"batch_shape\" (Keras 3) or "
                                            "\"batch_input_shape\" (Keras 2)", pl->label);
    return KC_STATUS_OK;
}

static kc_layer_spec spec_of(const parsed_layer *pl) { return (kc_layer_spec){pl->ops->class_name, &pl->opts}; }

/* A builder failure, with the JSON prefix. */
static kc_status builder_error(kc_model *m, kc_status s) {
    if (s == KC_STATUS_OK) s = kc_model_status(m);
    if (s == KC_STATUS_OK) s = KC_STATUS_INTERNAL;
    return kc__wrap(s, PFX);
}

static void note_axis(reader *r, const parsed_layer *pl, kc_node node) {
    if (pl->axis > 0) r->axes[r->n_axes++] = (pending_axis){node, pl->axis};
}

/* ---------------------------------------------------------------- Sequential */

static const char *const k_seq_keys[] = {"name", "layers", "trainable", "dtype", "build_input_shape"};

static kc_status check_model_header(const json_t *config, const char *what) {
    parsed_layer pl = {0};
    snprintf(pl.label, sizeof pl.label, "%s", what);
    const json_t *t = json_object_get(config, "trainable");
    if (t && !json_is_true(t)) return unsupported_value(&pl, "trainable", t, "true");
    const json_t *d = json_object_get(config, "dtype");
    if (d) KC_TRY(check_dtype(&pl, "dtype", d));
    const json_t *n = json_object_get(config, "name");
    if (n && !json_is_string(n) && !json_is_null(n)) return bad_type(&pl, "name", "a string", n);
    return KC_STATUS_OK;
}

static kc_status read_sequential(reader *r, const json_t *config) {
    const json_t *layers = config;
    const char *name = NULL;
    const json_t *build_shape = NULL;
    if (json_is_object(config)) {
        KC_TRY(check_keys(config, k_seq_keys, KC_ARRAY_LEN(k_seq_keys), "the Sequential config"));
        KC_TRY(check_model_header(config, "the Sequential model"));
        name = json_string_value(json_object_get(config, "name"));
        layers = json_object_get(config, "layers");
        build_shape = json_object_get(config, "build_input_shape");
        if (json_is_null(build_shape)) build_shape = NULL;
    }
    if (!json_is_array(layers))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Sequential config has no \"layers\" list (got %s)",
                        layers ? type_name(layers) : "nothing");
    if (json_array_size(layers) == 0) return kc__fail(KC_STATUS_BAD_FILE, PFX "the Sequential model has no layers");
    KC_TRY(kc_sequential(name, &r->m));
    size_t i;
    const json_t *entry;
    json_array_foreach((json_t *)layers, i, entry) {
        parsed_layer pl;
        KC_TRY(parse_layer(entry, (int)i, &pl));
        bool input = kc__keras_is_input(pl.ops);
        if (i == 0 && !input) {
            /* Keras 2 puts the input shape on the first layer; Keras 3 in build_input_shape */
            kc_input_opts in = {0};
            if (pl.has_batch_shape) {
                memcpy(in.shape, pl.batch_shape, sizeof in.shape);
            } else if (build_shape) {
                parsed_layer model = {0};
                snprintf(model.label, sizeof model.label, "the Sequential model");
                KC_TRY(get_batch_shape(&model, "build_input_shape", build_shape, in.shape));
            } else {
                return kc__fail(KC_STATUS_UNSUPPORTED,
                                PFX "the Sequential model has no input shape: its first %s has no batch_input_shape / "
                                    "batch_shape / input_shape and the config has no build_input_shape; build the model in Keras "
                                    "(or give it an Input) before saving",
                                pl.label);
            }
            kc_status s = kc_add(r->m, KC_INPUT(.shape = {in.shape[0], in.shape[1], in.shape[2], in.shape[3]}));
            if (s != KC_STATUS_OK) return builder_error(r->m, s);
        }
        kc_layer_spec spec = spec_of(&pl);
        kc_status s = kc_add(r->m, &spec);
        if (s != KC_STATUS_OK) return builder_error(r->m, s);
        note_axis(r, &pl, kc_model_num_layers(r->m) - 1);
    }
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- Functional */

typedef struct tensor_ref {
    const char *name;
    json_int_t node_index, tensor_index;
} tensor_ref;

/* [name, node_index, tensor_index] or [name, node_index, tensor_index, kwargs] */
static bool parse_history(const json_t *h, tensor_ref *out) {
    if (!json_is_array(h) || json_array_size(h) < 3 || json_array_size(h) > 4) return false;
    out->name = json_string_value(json_array_get(h, 0));
    if (!out->name || !json_is_integer(json_array_get(h, 1)) || !json_is_integer(json_array_get(h, 2))) return false;
    out->node_index = json_integer_value(json_array_get(h, 1));
    out->tensor_index = json_integer_value(json_array_get(h, 2));
    return true;
}

static kc_status check_ref(const parsed_layer *pl, const tensor_ref *t) {
    if (t->node_index != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s takes call #%lld of layer '%s' (a shared layer, called several times); kerac supports "
                            "each layer being called once",
                        pl->label, (long long)t->node_index, t->name);
    if (t->tensor_index != 0)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s takes output %lld of layer '%s'; kerac layers have one output", pl->label,
                        (long long)t->tensor_index, t->name);
    return KC_STATUS_OK;
}

static kc_status add_ref(const parsed_layer *pl, const tensor_ref *t, tensor_ref *refs, int *n) {
    KC_TRY(check_ref(pl, t));
    if (*n >= KC_MAX_INPUTS)
        return kc__fail(KC_STATUS_UNSUPPORTED, PFX "%s has more than %d inputs", pl->label, KC_MAX_INPUTS);
    refs[(*n)++] = *t;
    return KC_STATUS_OK;
}

/* A Keras 3 call argument: {"class_name": "__keras_tensor__", "config": {"keras_history": [...]}} */
static kc_status keras_tensor_ref(const parsed_layer *pl, const json_t *arg, tensor_ref *out) {
    char b[128];
    const char *cls = json_string_value(json_object_get(arg, "class_name"));
    if (!cls || strcmp(cls, "__keras_tensor__") != 0 ||
        !parse_history(json_object_get(json_object_get(arg, "config"), "keras_history"), out))
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called with %s, which is not a Keras tensor; kerac supports layers called on the "
                            "outputs of other layers only",
                        pl->label, jtext(arg, b, sizeof b));
    return KC_STATUS_OK;
}

static kc_status check_call_kwargs(const parsed_layer *pl, const json_t *kwargs) {
    char b[128];
    if (!kwargs || json_is_null(kwargs)) return KC_STATUS_OK;
    if (!json_is_object(kwargs)) return bad_type(pl, "kwargs", "an object", kwargs);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)kwargs, key, v) {
        if (!json_is_null(v))
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "%s is called with the argument %s=%s; kerac does not support call arguments",
                            pl->label, key, jtext(v, b, sizeof b));
    }
    return KC_STATUS_OK;
}

/* The inputs of a layer from its "inbound_nodes" (Keras 2 or 3 form). */
static kc_status parse_inbound(const json_t *entry, const parsed_layer *pl, tensor_ref *refs, int *n) {
    char b[128];
    *n = 0;
    const json_t *nodes = json_object_get(entry, "inbound_nodes");
    if (!nodes || json_is_null(nodes)) return KC_STATUS_OK;
    if (!json_is_array(nodes)) return bad_type(pl, "inbound_nodes", "a list", nodes);
    if (json_array_size(nodes) == 0) return KC_STATUS_OK;
    if (json_array_size(nodes) > 1)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called %zu times (a shared layer); kerac supports each layer being called once — "
                            "give each call its own layer",
                        pl->label, json_array_size(nodes));
    const json_t *node = json_array_get(nodes, 0);
    if (json_is_array(node)) { /* Keras 2: [["conv2d", 0, 0, {}], ...] */
        size_t i;
        const json_t *item;
        json_array_foreach((json_t *)node, i, item) {
            tensor_ref t;
            if (!parse_history(item, &t))
                return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: inbound node entry %s is not [layer, node, tensor, kwargs]",
                                pl->label, jtext(item, b, sizeof b));
            KC_TRY(check_call_kwargs(pl, json_array_get(item, 3)));
            KC_TRY(add_ref(pl, &t, refs, n));
        }
        return KC_STATUS_OK;
    }
    if (!json_is_object(node))
        return bad_type(pl, "inbound_nodes", "a list of nodes ([[...]] or [{\"args\": ...}])", nodes);
    /* Keras 3: {"args": [tensor] or [[tensor, tensor]], "kwargs": {}} */
    static const char *const node_keys[] = {"args", "kwargs"};
    KC_TRY(check_keys(node, node_keys, KC_ARRAY_LEN(node_keys), pl->label));
    const json_t *args = json_object_get(node, "args");
    if (!json_is_array(args) || json_array_size(args) == 0)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "%s: its inbound node has no \"args\" list", pl->label);
    if (json_array_size(args) > 1)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "%s is called with %zu positional arguments; kerac supports one (a tensor, or a list of "
                            "tensors for a merge layer)",
                        pl->label, json_array_size(args));
    KC_TRY(check_call_kwargs(pl, json_object_get(node, "kwargs")));
    const json_t *a = json_array_get(args, 0);
    if (json_is_array(a)) {
        size_t i;
        const json_t *item;
        json_array_foreach((json_t *)a, i, item) {
            tensor_ref t;
            KC_TRY(keras_tensor_ref(pl, item, &t));
            KC_TRY(add_ref(pl, &t, refs, n));
        }
        return KC_STATUS_OK;
    }
    tensor_ref t;
    KC_TRY(keras_tensor_ref(pl, a, &t));
    return add_ref(pl, &t, refs, n);
}

/* The node of an earlier layer called `name`. */
static kc_status resolve(const reader *r, int upto, const char *who, const char *name, kc_node *out) {
    for (int i = 0; i < upto; i++)
        if (r->names[i] && strcmp(r->names[i], name) == 0 && r->nodes[i] >= 0) {
            *out = r->nodes[i];
            return KC_STATUS_OK;
        }
    for (int i = upto; i < r->n; i++)
        if (r->names[i] && strcmp(r->names[i], name) == 0)
            return kc__fail(KC_STATUS_BAD_FILE,
                            PFX "%s takes its input from layer '%s', which comes later in \"layers\"; kerac needs the "
                                "layers in topological order, as Keras writes them",
                            who, name);
    return kc__fail(KC_STATUS_BAD_FILE, PFX "%s refers to layer '%s', which is not in the model's \"layers\"", who,
                    name);
}

/* input_layers / output_layers: ["name", 0, 0] or [["name", 0, 0], ...]. */
static kc_status parse_io_layers(const json_t *v, const char *key, tensor_ref *refs, int *n) {
    char b[128];
    parsed_layer pl = {0};
    snprintf(pl.label, sizeof pl.label, "%s", key);
    *n = 0;
    if (json_is_array(v) && json_is_string(json_array_get(v, 0))) {
        if (!parse_history(v, &refs[0])) goto bad;
        *n = 1;
        return check_ref(&pl, &refs[0]);
    }
    if (!json_is_array(v)) goto bad;
    size_t i;
    const json_t *item;
    json_array_foreach((json_t *)v, i, item) {
        tensor_ref t;
        if (!parse_history(item, &t)) goto bad;
        if (*n < KC_MAX_INPUTS) refs[*n] = t;
        (*n)++;
    }
    for (int k = 0; k < *n && k < KC_MAX_INPUTS; k++) KC_TRY(check_ref(&pl, &refs[k]));
    return KC_STATUS_OK;
bad:
    return kc__fail(KC_STATUS_BAD_FILE, PFX "\"%s\" must be [[\"layer\", 0, 0], ...], got %s", key,
                    v ? jtext(v, b, sizeof b) : "nothing");
}

static const char *const k_func_keys[] = {"name", "trainable", "layers", "input_layers", "output_layers"};

static kc_status read_functional(reader *r, const json_t *config) {
    if (!json_is_object(config))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional model's \"config\" is %s, not an object",
                        type_name(config));
    KC_TRY(check_keys(config, k_func_keys, KC_ARRAY_LEN(k_func_keys), "the Functional config"));
    KC_TRY(check_model_header(config, "the Functional model"));
    const json_t *layers = json_object_get(config, "layers");
    if (!json_is_array(layers))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional config has no \"layers\" list (got %s)",
                        layers ? type_name(layers) : "nothing");
    if (json_array_size(layers) == 0) return kc__fail(KC_STATUS_BAD_FILE, PFX "the Functional model has no layers");
    r->n = (int)json_array_size(layers);
    r->names = kc__calloc((size_t)r->n, sizeof *r->names, "layer names");
    r->nodes = kc__calloc((size_t)r->n, sizeof *r->nodes, "layer nodes");
    r->axes = kc__calloc((size_t)r->n, sizeof *r->axes, "layer axes");
    if (!r->names || !r->nodes || !r->axes) return KC_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < r->n; i++) {
        r->names[i] = entry_name(json_array_get(layers, (size_t)i));
        r->nodes[i] = -1;
    }
    KC_TRY(kc_functional(json_string_value(json_object_get(config, "name")), &r->m));
    for (int i = 0; i < r->n; i++) {
        const json_t *entry = json_array_get(layers, (size_t)i);
        parsed_layer pl;
        KC_TRY(parse_layer(entry, i, &pl));
        if (!r->names[i])
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no name; a Functional model refers to layers by name",
                            pl.label);
        tensor_ref refs[KC_MAX_INPUTS];
        int n = 0;
        KC_TRY(parse_inbound(entry, &pl, refs, &n));
        kc_node xs[KC_MAX_INPUTS];
        for (int k = 0; k < n; k++) KC_TRY(resolve(r, i, pl.label, refs[k].name, &xs[k]));
        kc_layer_spec spec = spec_of(&pl);
        kc_node y;
        if (kc__keras_is_input(pl.ops)) {
            if (n > 0)
                return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has inbound nodes; an InputLayer takes no inputs", pl.label);
            y = kc_input(r->m, &spec);
        } else if (n == 0) {
            return kc__fail(KC_STATUS_BAD_FILE, PFX "%s has no inbound_nodes: nothing feeds it", pl.label);
        } else if (n == 1 && !kc__keras_is_merge(pl.ops)) {
            y = kc_apply(r->m, &spec, xs[0]);
        } else {
            y = kc_merge(r->m, &spec, xs, n);
        }
        if (y < 0) return builder_error(r->m, KC_STATUS_OK);
        r->nodes[i] = y;
        note_axis(r, &pl, y);
    }
    tensor_ref refs[KC_MAX_INPUTS];
    int n = 0;
    kc_node node;
    KC_TRY(parse_io_layers(json_object_get(config, "input_layers"), "input_layers", refs, &n));
    if (n != 1)
        return kc__fail(n ? KC_STATUS_UNSUPPORTED : KC_STATUS_BAD_FILE,
                        PFX "the Functional model has %d inputs; kerac supports models with one input", n);
    KC_TRY(resolve(r, r->n, "input_layers", refs[0].name, &node));
    if (!(kc__model_layer(r->m, node)->ops->flags & KC_LAYER_INPUT))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "input_layers names '%s', which is not an InputLayer", refs[0].name);
    KC_TRY(parse_io_layers(json_object_get(config, "output_layers"), "output_layers", refs, &n));
    if (n != 1)
        return kc__fail(n ? KC_STATUS_UNSUPPORTED : KC_STATUS_BAD_FILE,
                        PFX "the Functional model has %d outputs; kerac supports models with one output", n);
    KC_TRY(resolve(r, r->n, "output_layers", refs[0].name, &node));
    kc_status s = kc_set_output(r->m, node);
    return s == KC_STATUS_OK ? s : builder_error(r->m, s);
}

/* ---------------------------------------------------------------- the model */

static const char *const k_top_keys[] = {"class_name",    "config",         "module",        "registered_name",
                                         "build_config", "compile_config", "keras_version", "backend"};

static kc_status check_axes(const reader *r) {
    for (int i = 0; i < r->n_axes; i++) {
        const kc_layer *l = kc__model_layer(r->m, r->axes[i].node);
        int last = l->in_shape[0].rank; /* with the batch axis 0 in front */
        if (r->axes[i].axis != last) {
            char b[96];
            return kc__fail(KC_STATUS_UNSUPPORTED,
                            PFX "layer '%s' (%s): axis %d is not the last (channels) axis of its input %s; kerac "
                                "supports only axis -1 (= %d here)",
                            l->name, l->ops->class_name, r->axes[i].axis, kc__shape_str(&l->in_shape[0], true, b, sizeof b),
                            last);
        }
    }
    return KC_STATUS_OK;
}

static kc_status read_model(reader *r, const json_t *root) {
    if (!json_is_object(root))
        return kc__fail(KC_STATUS_BAD_FILE, PFX "the top level is %s; expected {\"class_name\": ..., \"config\": ...}",
                        type_name(root));
    KC_TRY(check_keys(root, k_top_keys, KC_ARRAY_LEN(k_top_keys), "the model"));
    const char *cls = json_string_value(json_object_get(root, "class_name"));
    const json_t *config = json_object_get(root, "config");
    if (!cls) return kc__fail(KC_STATUS_BAD_FILE, PFX "the model has no \"class_name\"");
    if (!config) return kc__fail(KC_STATUS_BAD_FILE, PFX "the %s model has no \"config\"", cls);
    const char *version = json_string_value(json_object_get(root, "keras_version"));
    if (version) kc__log(KC_LOG_DEBUG, PFX "written by Keras %s", version);
    if (strcmp(cls, "Sequential") == 0) {
        /* the bare-list form has no per-layer axis bookkeeping array yet */
        size_t n = json_is_array(config) ? json_array_size(config) : json_array_size(json_object_get(config, "layers"));
        r->axes = kc__calloc(n + 1, sizeof *r->axes, "layer axes");
        if (!r->axes) return KC_STATUS_OUT_OF_MEMORY;
        KC_TRY(read_sequential(r, config));
    } else if (strcmp(cls, "Functional") == 0 || strcmp(cls, "Model") == 0) {
        KC_TRY(read_functional(r, config));
    } else {
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        PFX "model class '%s' is not supported; kerac reads Sequential and Functional models (a "
                            "subclassed model has no usable JSON config)",
                        cls);
    }
    kc_status s = kc_model_build(r->m);
    if (s != KC_STATUS_OK) return kc__wrap(s, PFX);
    return check_axes(r);
}

kc_status kc_model_from_json(const char *text, size_t len, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_from_json: the output pointer is NULL");
    *out = NULL;
    if (!text) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_from_json: text is NULL");
    json_error_t e;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!root)
        return kc__fail(KC_STATUS_BAD_FILE, PFX "line %d, column %d: %s", e.line, e.column, e.text);
    reader r = {0};
    kc_status s = read_model(&r, root);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(r.m);
        r.m = NULL;
    }
    free(r.names);
    free(r.nodes);
    free(r.axes);
    json_decref(root); /* after building: the layers copied what they keep */
    *out = r.m;
    return s;
}
