/* keras_json_values.h — numbers-or-lists config values (keras_json_values.c). */
#ifndef KC_KERAS_JSON_VALUES_H
#define KC_KERAS_JSON_VALUES_H

#include <jansson.h>

#include "keras_json_read.h"

kc_status kc__json_read_consts(const parsed_layer *pl, const char *key, const json_t *v, kc_consts *out);
kc_status kc__json_read_axes(const parsed_layer *pl, const char *key, const json_t *v, kc_axes *out);
/* num writes one float (the writer's shortest round-trip real); NULL when out of memory */
json_t *kc__json_write_consts(const kc_consts *c, json_t *(*num)(float));
json_t *kc__json_write_axes(const kc_axes *x);
kc_status kc__json_read_noise_shape(const parsed_layer *pl, const char *key, const json_t *v, kc_noise_shape *out);
json_t *kc__json_write_noise_shape(const kc_noise_shape *x);

#endif /* KC_KERAS_JSON_VALUES_H */
