/* image_meta.c — the image options and class names of a model trained on a folder of
 * images, and the .keras metadata.json that carries them:
 *   {"keras_version": "3.6.0", "date_saved": "...",
 *    "kerac_images": {"class_names": ["cat", "dog"], "image_size": [256, 256],
 *                     "color_mode": "rgb", "interpolation": "bilinear",
 *                     "crop_to_aspect_ratio": false, "pad_to_aspect_ratio": false,
 *                     "label_mode": "int"}}
 * Keras reads only the keys it knows from metadata.json, so the file still loads there. */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "io.h"

static void clear_image_opts(kc_model *m) {
    for (int i = 0; m->image_classes && i < m->image_opts.num_class_names; i++) free(m->image_classes[i]);
    free(m->image_classes);
    m->image_classes = NULL;
    memset(&m->image_opts, 0, sizeof m->image_opts);
    m->has_image_opts = false;
}

kc_status kc_model_set_image_opts(kc_model *m, const kc_image_opts *o) {
    if (!m || !o) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_model_set_image_opts: model or options NULL");
    int n = o->class_names ? o->num_class_names : 0;
    char **classes = n > 0 ? kc__calloc((size_t)n, sizeof *classes, "class names") : NULL;
    if (n > 0 && !classes) return KC_STATUS_OUT_OF_MEMORY;
    for (int i = 0; i < n; i++)
        if (!(classes[i] = kc__strdup(o->class_names[i] ? o->class_names[i] : ""))) {
            for (int k = 0; k < i; k++) free(classes[k]);
            free(classes);
            return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for class names");
        }
    clear_image_opts(m);
    m->image_opts = *o;
    m->image_opts.num_class_names = n;
    m->image_opts.class_names = (const char *const *)classes;
    m->image_opts.cache = KC_IMAGE_CACHE_AUTO; /* how a dataset kept its images, not how the model reads them */
    m->image_opts.cache_file = NULL;
    m->image_classes = classes;
    m->has_image_opts = true;
    return KC_STATUS_OK;
}

int kc_model_image_opts(const kc_model *m, kc_image_opts *out) {
    if (!m || !m->has_image_opts) return 0;
    if (out) *out = m->image_opts;
    return 1;
}

/* ---------------------------------------------------------------- metadata.json */

char *kc__metadata_json(const kc_model *m, const char *keras_version, const char *date) {
    json_t *root = json_object();
    json_object_set_new(root, "keras_version", json_string(keras_version));
    json_object_set_new(root, "date_saved", json_string(date));
    if (m->has_image_opts) {
        const kc_image_opts *o = &m->image_opts;
        json_t *img = json_object(), *names = json_array();
        for (int i = 0; i < o->num_class_names; i++) json_array_append_new(names, json_string(o->class_names[i]));
        json_object_set_new(img, "class_names", names);
        json_object_set_new(img, "image_size", json_pack("[ii]", o->height, o->width));
        json_object_set_new(img, "color_mode", json_string(kc_color_mode_name(o->color_mode)));
        json_object_set_new(img, "interpolation", json_string(kc_interpolation_name(o->interpolation)));
        json_object_set_new(img, "crop_to_aspect_ratio", json_boolean(o->crop_to_aspect_ratio));
        json_object_set_new(img, "pad_to_aspect_ratio", json_boolean(o->pad_to_aspect_ratio));
        json_object_set_new(img, "label_mode", json_string(kc_label_mode_name(o->label_mode)));
        json_object_set_new(root, "kerac_images", img);
    }
    char *text = json_dumps(root, JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text) kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing metadata.json");
    return text;
}

static kc_status bad_meta(const char *path, const char *what) {
    return kc__fail(KC_STATUS_BAD_FILE, "'%s': metadata.json: \"kerac_images\" %s", path, what);
}

static int named(json_t *obj, const char *key, int (*parse)(const char *), int dflt) {
    json_t *v = json_object_get(obj, key);
    if (!v) return dflt;
    return json_is_string(v) ? parse(json_string_value(v)) : -1;
}

kc_status kc__metadata_read(kc_model *m, const char *path, const char *text, size_t len) {
    json_error_t err;
    json_t *root = json_loadb(text, len, 0, &err);
    if (!root || !json_is_object(root)) { /* Keras does not read it either: not an error */
        kc__log(KC_LOG_DEBUG, "'%s': metadata.json is not a JSON object: %s", path, err.text);
        json_decref(root);
        return KC_STATUS_OK;
    }
    json_t *img = json_object_get(root, "kerac_images");
    kc_status s = KC_STATUS_OK;
    if (img) {
        kc_image_opts o = {0};
        json_t *names = json_object_get(img, "class_names"), *size = json_object_get(img, "image_size");
        int c = named(img, "color_mode", kc_color_mode_parse, 1), ip = named(img, "interpolation", kc_interpolation_parse, 0);
        int lm = named(img, "label_mode", kc_label_mode_parse, 0);
        size_t n = json_array_size(names);
        const char **ptrs = n ? calloc(n, sizeof *ptrs) : NULL;
        if (!json_is_object(img) || !json_is_array(names) || n > 100000 || (n && !ptrs)) s = bad_meta(path, "has no class_names list");
        else if (!json_is_array(size) || json_array_size(size) != 2 || !json_is_integer(json_array_get(size, 0)) ||
                 !json_is_integer(json_array_get(size, 1)))
            s = bad_meta(path, "has no image_size [height, width]");
        else if (c < 0 || ip < 0 || lm < 0) s = bad_meta(path, "has an unknown color_mode, interpolation or label_mode");
        for (size_t i = 0; !s && i < n; i++)
            if (!(ptrs[i] = json_string_value(json_array_get(names, i)))) s = bad_meta(path, "class_names holds a non-string");
        if (!s) {
            o.height = (int)json_integer_value(json_array_get(size, 0));
            o.width = (int)json_integer_value(json_array_get(size, 1));
            if (o.height < 1 || o.width < 1 || o.height > 16384 || o.width > 16384) s = bad_meta(path, "image_size is out of range");
        }
        if (!s) {
            o.color_mode = (kc_color_mode)c;
            o.interpolation = (kc_interpolation)ip;
            o.label_mode = (kc_label_mode)lm;
            o.crop_to_aspect_ratio = json_is_true(json_object_get(img, "crop_to_aspect_ratio"));
            o.pad_to_aspect_ratio = json_is_true(json_object_get(img, "pad_to_aspect_ratio"));
            o.class_names = ptrs;
            o.num_class_names = (int)n;
            s = kc_model_set_image_opts(m, &o);
        }
        free(ptrs);
    }
    json_decref(root);
    return s;
}
