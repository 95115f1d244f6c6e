/* head.c — `kerac train --head SPEC`: a new classification head on a saved model (a base
 * saved with include_top=False, or any model whose output is to be fed on), through the
 * public API only: the model's Keras config gets the head's layers appended (after the
 * output, which they take in turn), the combined model is built from that config, and the
 * base's weights are copied over (they come first in Keras's weight order: the head's
 * layers are the last ones). The base's layers are frozen, Keras's
 * `base_model.trainable = False`, unless the caller unfreezes some afterwards.
 *
 * SPEC is a comma-separated list of layers, each CLASS[:ARG...], an ARG being KEY=VALUE or,
 * for the classes below, a positional value: Dense:UNITS[:ACTIVATION], Dropout:RATE,
 * Activation:NAME. VALUE is read as JSON when it is one (10, 0.5, true, [2, 2]), else as a
 * string. Or SPEC is a .json file holding a list of Keras layer entries
 * ({"class_name": "Dense", "config": {"units": 10, ...}}). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "cli.h"

/* Positional arguments of a few classes, in order. */
static const struct {
    const char *cls;
    const char *keys[2];
} k_positional[] = {
    {"Dense", {"units", "activation"}},
    {"Dropout", {"rate", NULL}},
    {"Activation", {"activation", NULL}},
};

static json_t *value_of(const char *text) {
    json_t *v = json_loads(text, JSON_DECODE_ANY, NULL);
    return v ? v : json_string(text);
}

/* One CLASS[:ARG...] item into a Keras layer entry. */
static kc_status parse_item(char *item, json_t **out) {
    char *save = NULL, *cls = strtok_r(item, ":", &save);
    if (!cls || !*cls) return KC_STATUS_INVALID_ARGUMENT;
    json_t *cfg = json_object(), *e = json_pack("{s:s}", "class_name", cls);
    int pos = 0;
    for (char *arg; (arg = strtok_r(NULL, ":", &save)) != NULL; pos++) {
        char *eq = strchr(arg, '=');
        const char *key = NULL;
        if (eq) {
            *eq = '\0';
            key = arg;
            arg = eq + 1;
        } else {
            for (size_t i = 0; i < sizeof k_positional / sizeof k_positional[0]; i++)
                if (strcmp(k_positional[i].cls, cls) == 0 && pos < 2) key = k_positional[i].keys[pos];
        }
        if (!key || !*key) {
            json_decref(cfg);
            json_decref(e);
            return KC_STATUS_INVALID_ARGUMENT;
        }
        json_object_set_new(cfg, key, value_of(arg));
    }
    json_object_set_new(e, "config", cfg);
    *out = e;
    return KC_STATUS_OK;
}

/* The head's layer entries, from SPEC (a list) or a .json file. */
static kc_status head_layers(const char *spec, json_t **out) {
    size_t n = strlen(spec);
    if (n > 5 && strcmp(spec + n - 5, ".json") == 0) {
        json_error_t err;
        json_t *list = json_load_file(spec, 0, &err);
        if (!list) {
            cli_error(CLI_EXIT_INPUT, "--head %s: line %d: %s", spec, err.line, err.text);
            return KC_STATUS_BAD_FILE;
        }
        if (!json_is_array(list) || json_array_size(list) == 0) {
            json_decref(list);
            cli_error(CLI_EXIT_INPUT, "--head %s: the file must hold a list of Keras layer entries", spec);
            return KC_STATUS_BAD_FILE;
        }
        *out = list;
        return KC_STATUS_OK;
    }
    char *copy = strdup(spec), *save = NULL;
    json_t *list = json_array();
    kc_status s = KC_STATUS_OK;
    for (char *item = strtok_r(copy, ",", &save); item && s == KC_STATUS_OK; item = strtok_r(NULL, ",", &save)) {
        json_t *e = NULL;
        if ((s = parse_item(item, &e)) == KC_STATUS_OK) json_array_append_new(list, e);
    }
    free(copy);
    if (s != KC_STATUS_OK || json_array_size(list) == 0) {
        json_decref(list);
        cli_usage_error("train", "'--head %s': give layers as CLASS[:ARG...] separated by commas, an ARG being "
                        "KEY=VALUE or, for Dense:UNITS[:ACTIVATION], Dropout:RATE and Activation:NAME, a value; "
                        "or a .json file", spec);
        return KC_STATUS_INVALID_ARGUMENT;
    }
    *out = list;
    return KC_STATUS_OK;
}

/* "head_global_average_pooling2d" for GlobalAveragePooling2D, unique in the model. */
static void head_name(const char *cls, json_t *layers, char *buf, size_t n) {
    char stem[128] = "head_";
    size_t k = strlen(stem);
    for (const char *p = cls; *p && k + 2 < sizeof stem; p++) {
        if (isupper((unsigned char)*p) && p != cls && islower((unsigned char)p[-1])) stem[k++] = '_';
        stem[k++] = (char)tolower((unsigned char)*p);
    }
    stem[k] = '\0';
    for (int i = 0;; i++) {
        if (i == 0) snprintf(buf, n, "%s", stem);
        else snprintf(buf, n, "%s_%d", stem, i);
        bool used = false;
        size_t j;
        json_t *e;
        json_array_foreach(layers, j, e) {
            const char *name = json_string_value(json_object_get(json_object_get(e, "config"), "name"));
            if (name && strcmp(name, buf) == 0) used = true;
        }
        if (!used) return;
    }
}

/* The base's config with the head appended; *first: the first head layer's name. */
static kc_status append_head(kc_model *base, json_t *head, char **text, char *first, size_t first_n) {
    char *json = NULL;
    KC_TRY(kc_model_to_json(base, 3, &json));
    json_t *root = json_loads(json, 0, NULL);
    kc_free(json);
    json_t *cfg = json_object_get(root, "config"), *layers = json_object_get(cfg, "layers");
    bool functional = json_object_get(cfg, "output_layers") != NULL;
    const char *prev = kc_model_name(base); /* replaced by the output's name below */
    json_t *out = json_object_get(cfg, "output_layers");
    if (functional) prev = json_string_value(json_is_string(json_array_get(out, 0)) ? json_array_get(out, 0)
                                                                                    : json_array_get(json_array_get(out, 0), 0));
    char name[160];
    size_t i;
    json_t *e;
    json_array_foreach(head, i, e) {
        json_t *c = json_object_get(e, "config");
        if (!json_is_object(c) || !json_is_string(json_object_get(e, "class_name"))) {
            json_decref(root);
            cli_error(CLI_EXIT_INPUT, "--head: layer %zu has no \"class_name\" or \"config\"", i);
            return KC_STATUS_BAD_FILE;
        }
        if (!json_is_string(json_object_get(c, "name"))) {
            head_name(json_string_value(json_object_get(e, "class_name")), layers, name, sizeof name);
            json_object_set_new(c, "name", json_string(name));
        }
        const char *me = json_string_value(json_object_get(c, "name"));
        if (i == 0) snprintf(first, first_n, "%s", me);
        json_t *entry = json_deep_copy(e);
        if (functional) {
            json_object_set_new(entry, "name", json_string(me));
            json_object_set_new(entry, "inbound_nodes", json_pack("[[[s, i, i, {}]]]", prev, 0, 0));
        }
        json_array_append_new(layers, entry);
        prev = json_string_value(json_object_get(json_object_get(entry, "config"), "name"));
    }
    if (functional) json_object_set_new(cfg, "output_layers", json_pack("[s, i, i]", prev, 0, 0));
    *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return *text ? KC_STATUS_OK : KC_STATUS_OUT_OF_MEMORY;
}

/* Copy the base's weights (the first ones of the combined model, in the same order). */
static kc_status copy_weights(kc_model *from, kc_model *to) {
    kc_status s = KC_STATUS_OK;
    for (int i = 0, n = kc_model_num_weights(from); i < n && s == KC_STATUS_OK; i++) {
        kc_weight_info wi;
        if ((s = kc_model_weight_info(from, i, &wi))) break;
        float *buf = malloc((size_t)wi.size * sizeof(float) + 1);
        if (!buf) return KC_STATUS_OUT_OF_MEMORY;
        s = kc_model_get_weight(from, i, buf, wi.size);
        if (!s) s = kc_model_set_weight(to, i, buf, wi.size);
        free(buf);
    }
    return s;
}

int cli_model_add_head(kc_model **m, const char *spec, const kc_device_opts *dev) {
    json_t *head = NULL;
    kc_status s = head_layers(spec, &head);
    if (s) return s == KC_STATUS_INVALID_ARGUMENT ? CLI_EXIT_USAGE : CLI_EXIT_INPUT;
    char *text = NULL, first[160] = "";
    s = append_head(*m, head, &text, first, sizeof first);
    json_decref(head);
    if (s) return s == KC_STATUS_BAD_FILE ? CLI_EXIT_INPUT : cli_fail(s, CLI_PHASE_LOAD);
    kc_model *both = NULL;
    s = kc_model_from_json_ex(text, strlen(text), dev, &both);
    free(text);
    if (!s) s = copy_weights(*m, both);
    if (!s) s = kc_model_set_trainable_from(both, first); /* base_model.trainable = False */
    if (s) {
        kc_model_destroy(both);
        fprintf(stderr, "kerac: --head: %s\n", kc_last_error());
        return cli_exit_code(s, CLI_PHASE_LOAD);
    }
    kc_model_destroy(*m);
    *m = both;
    return 0;
}
