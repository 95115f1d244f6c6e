/* keras_json_values.c — config values that are numbers or lists:
 * kc_consts (Rescaling's scale and offset, Normalization's mean and variance: null, a
 * number, a list of numbers, or the {"class_name": "__numpy__" | "__tensor__", "config":
 * {"value": ...}} Keras 3 writes for arrays) and kc_axes (null, an axis or a list), read
 * into the kind's options and written back as Keras does. */
#include <stdio.h>
#include <string.h>

#include "keras_json_read.h"
#include "keras_json_values.h"

kc_status kc__json_read_consts(const parsed_layer *pl, const char *key, const json_t *v, kc_consts *out) {
    *out = (kc_consts){0};
    if (json_is_null(v)) return KC_STATUS_OK;
    if (json_is_object(v)) { /* a serialised array: its value */
        const json_t *cls = json_object_get(v, "class_name"), *cfg = json_object_get(v, "config");
        const char *cn = json_is_string(cls) ? json_string_value(cls) : "";
        if ((strcmp(cn, "__numpy__") != 0 && strcmp(cn, "__tensor__") != 0) || !json_is_object(cfg))
            return kc__json_bad_type(pl, key, "a number or a list of numbers", v);
        v = json_object_get(cfg, "value");
        if (!v) return kc__json_bad_type(pl, key, "a number or a list of numbers", v);
    }
    if (json_is_number(v)) {
        out->n = 1;
        out->v[0] = (float)json_number_value(v);
        return KC_STATUS_OK;
    }
    if (!json_is_array(v)) return kc__json_bad_type(pl, key, "a number or a list of numbers", v);
    size_t n = json_array_size(v);
    if (n == 0 || n > KC_MAX_CONSTS) {
        char b[64];
        snprintf(b, sizeof b, "a list of 1 to %d numbers (one per channel)", KC_MAX_CONSTS);
        return kc__json_unsupported_value(pl, key, v, b);
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_number(e)) return kc__json_bad_type(pl, key, "a list of numbers", v);
        out->v[i] = (float)json_number_value(e);
    }
    out->n = (int)n;
    out->list = 1;
    return KC_STATUS_OK;
}

kc_status kc__json_read_axes(const parsed_layer *pl, const char *key, const json_t *v, kc_axes *out) {
    *out = (kc_axes){0};
    if (json_is_null(v)) {
        out->none = 1;
        return KC_STATUS_OK;
    }
    if (json_is_integer(v)) {
        out->n = 1;
        out->v[0] = (int)json_integer_value(v);
        return KC_STATUS_OK;
    }
    if (!json_is_array(v)) return kc__json_bad_type(pl, key, "an integer or a list of integers", v);
    size_t n = json_array_size(v);
    if (n > KC_MAX_RANK) return kc__json_unsupported_value(pl, key, v, "at most 4 axes");
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!json_is_integer(e) || json_integer_value(e) < -8 || json_integer_value(e) > 8)
            return kc__json_bad_type(pl, key, "a list of axes", v);
        out->v[i] = (int)json_integer_value(e);
    }
    out->n = (int)n;
    out->list = 1;
    if (n == 0) out->none = 1; /* (): Keras's Normalization reads it as None */
    return KC_STATUS_OK;
}

json_t *kc__json_write_consts(const kc_consts *c, json_t *(*num)(float)) {
    if (c->n == 0) return json_null();
    if (c->n == 1 && !c->list) return num(c->v[0]);
    json_t *a = json_array();
    for (int i = 0; a && i < c->n; i++)
        if (json_array_append_new(a, num(c->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *kc__json_write_axes(const kc_axes *x) {
    if (x->none) return json_null();
    if (x->n == 1 && !x->list) return json_integer(x->v[0]);
    json_t *a = json_array();
    for (int i = 0; a && i < x->n; i++)
        if (json_array_append_new(a, json_integer(x->v[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

kc_status kc__json_read_noise_shape(const parsed_layer *pl, const char *key, const json_t *v, kc_noise_shape *out) {
    *out = (kc_noise_shape){0};
    if (json_is_null(v)) return KC_STATUS_OK;
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    if (n < 1 || n > KC_MAX_RANK + 1) return kc__json_bad_type(pl, key, "null or a list of null / sizes (with the batch axis)", v);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (json_is_null(e)) continue;
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > INT32_MAX)
            return kc__json_bad_type(pl, key, "a list of null or positive sizes", v);
        out->v[i] = (int)json_integer_value(e);
    }
    out->n = (int)n;
    return KC_STATUS_OK;
}

json_t *kc__json_write_noise_shape(const kc_noise_shape *x) {
    if (x->n == 0) return json_null();
    json_t *a = json_array();
    for (int i = 0; a && i < x->n; i++)
        if (json_array_append_new(a, x->v[i] ? json_integer(x->v[i]) : json_null()) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}
