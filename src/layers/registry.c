/* registry.c — every layer kind of layer_kinds.h, looked up by Keras class name or alias;
 * standalone creation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer.h"

#define KC__LAYER_OPS_REF(id, opts_type) &kc__##id##_ops,
static const kc_layer_ops *const k_kinds[] = {KC_LAYER_KINDS(KC__LAYER_OPS_REF)};
#undef KC__LAYER_OPS_REF

const kc_layer_ops *kc__layer_find(const char *class_name) {
    if (!class_name) return NULL;
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++)
        if (strcmp(class_name, k_kinds[i]->class_name) == 0) return k_kinds[i];
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++)
        if (k_kinds[i]->alias && strcmp(class_name, k_kinds[i]->alias) == 0) return k_kinds[i];
    /* tf-keras registers keras.applications' own layers with its default package: InceptionResNetV2
     * writes "Custom>CustomScaleLayer"; only the kinds with a registered name are such classes */
    static const char pkg[] = "Custom>";
    if (strncmp(class_name, pkg, sizeof pkg - 1) == 0)
        for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds); i++)
            if (k_kinds[i]->registered_name && strcmp(class_name + sizeof pkg - 1, k_kinds[i]->registered_name) == 0)
                return k_kinds[i];
    return NULL;
}

int kc__layer_kind_count(void) { return (int)KC_ARRAY_LEN(k_kinds); }

const kc_layer_ops *kc__layer_kind(int i) {
    if (i < 0 || i >= (int)KC_ARRAY_LEN(k_kinds)) return NULL;
    return k_kinds[i];
}

const char *kc__layer_class_list(char *buf, size_t n) {
    size_t used = 0;
    if (n) buf[0] = '\0';
    for (size_t i = 0; i < KC_ARRAY_LEN(k_kinds) && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%s", i ? ", " : "", k_kinds[i]->class_name);
    return buf;
}

kc_status kc__layer_create(const kc_layer_spec *spec, kc_layer **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc__layer_create: out is NULL");
    *out = NULL;
    if (!spec || !spec->class_name)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "layer spec is NULL or has no class name; use KC_CONV2D(...) etc.");
    const kc_layer_ops *ops = kc__layer_find(spec->class_name);
    if (!ops) {
        char list[1024]; /* every class name, with room for many more kinds */
        return kc__fail(KC_STATUS_UNSUPPORTED, "layer class '%s' is not supported by kerac; supported: %s",
                        spec->class_name, kc__layer_class_list(list, sizeof list));
    }
    /* every public opts struct starts with `const char *name`; NULL opts mean all defaults */
    void *zero_opts = NULL;
    const void *opts = spec->opts;
    if (!opts) {
        zero_opts = kc__calloc(1, ops->opts_size, "layer options");
        if (!zero_opts) return KC_STATUS_OUT_OF_MEMORY;
        opts = zero_opts;
    }
    const char *name = *(const char *const *)opts;
    if (name && strlen(name) >= KC_NAME_MAX) {
        free(zero_opts);
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: name '%.40s...' is longer than %d characters",
                        ops->class_name, name, KC_NAME_MAX - 1);
    }
    kc_layer *l = kc__calloc(1, sizeof *l, "a layer");
    if (!l) {
        free(zero_opts);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    l->ops = ops;
    l->index = -1;
    l->shares = -1;
    if (name) snprintf(l->name, sizeof l->name, "%s", name);
    l->cfg = kc__calloc(1, ops->cfg_size, "layer configuration");
    if (!l->cfg) {
        free(l);
        free(zero_opts);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    kc_status s = ops->init ? ops->init(l, opts) : KC_STATUS_OK;
    free(zero_opts);
    if (s != KC_STATUS_OK) {
        kc__layer_destroy(l);
        return s;
    }
    *out = l;
    return KC_STATUS_OK;
}

void kc__layer_destroy(kc_layer *l) {
    if (!l) return;
    free(l->cfg);
    free(l);
}
