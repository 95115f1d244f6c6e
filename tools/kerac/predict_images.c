/* predict_images.c — `kerac predict MODEL --input photo.jpg|DIR`: each image read as the
 * model was trained (the image options saved with it; else sized from its input shape),
 * and the top-k classes printed by name with their probabilities. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"

bool cli_is_image_path(const char *path) {
    static const char *const ext[] = {".jpg", ".jpeg", ".png", ".bmp", ".gif"};
    size_t n = strlen(path);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t e = strlen(ext[i]);
        if (n >= e && strcasecmp(path + n - e, ext[i]) == 0) return true;
    }
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The image files of a folder (not its subfolders), sorted; or the one file given. */
static int list_inputs(const char *input, char ***files, int *n) {
    struct stat sb;
    *files = NULL;
    *n = 0;
    if (stat(input, &sb) != 0) return cli_error(CLI_EXIT_INPUT, "cannot read '%s': no such file or folder", input);
    if (!S_ISDIR(sb.st_mode)) {
        *files = malloc(sizeof **files);
        if (!*files || !((*files)[0] = strdup(input))) return cli_error(CLI_EXIT_RUNTIME, "out of memory");
        *n = 1;
        return 0;
    }
    DIR *d = opendir(input);
    if (!d) return cli_error(CLI_EXIT_INPUT, "cannot read the folder '%s'", input);
    int cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(input) + strlen(e->d_name) + 2;
        char *p = malloc(len);
        if (!p) break;
        snprintf(p, len, "%s/%s", input, e->d_name);
        if (e->d_name[0] == '.' || stat(p, &sb) != 0 || S_ISDIR(sb.st_mode) || !cli_is_image_path(p)) {
            free(p);
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **f = realloc(*files, (size_t)cap * sizeof *f);
            if (!f) {
                free(p);
                break;
            }
            *files = f;
        }
        (*files)[(*n)++] = p;
    }
    closedir(d);
    if (*n == 0) return cli_error(CLI_EXIT_INPUT, "no .jpg, .jpeg, .png, .bmp or .gif files in '%s'", input);
    qsort(*files, (size_t)*n, sizeof **files, cmp_str);
    return 0;
}

/* How to read images for model m: as it was trained, or sized from its input shape. */
int cli_model_image_opts(kc_model *m, kc_image_opts *o, int *classes) {
    kc_shape in, out;
    kc_status s;
    if ((s = kc_model_input_shape(m, &in)) || (s = kc_model_output_shape(m, &out))) return cli_fail(s, CLI_PHASE_LOAD);
    *classes = (int)cli_shape_size(&out);
    if (kc_model_image_opts(m, o)) return 0;
    int c = in.rank == 3 ? in.dim[2] : 1;
    if ((in.rank != 2 && in.rank != 3) || (c != 1 && c != 3 && c != 4))
        return cli_error(CLI_EXIT_INPUT, "model '%s' does not take images (its input has %d dimensions)", kc_model_name(m),
                         in.rank);
    *o = (kc_image_opts){.height = in.dim[0], .width = in.dim[1]};
    o->color_mode = c == 1 ? KC_COLOR_GRAYSCALE : c == 4 ? KC_COLOR_RGBA : KC_COLOR_RGB;
    return 0;
}

static void print_top(const char *file, const float *p, int classes, int k, const kc_image_opts *o, bool json) {
    int idx[64];
    k = k < classes ? k : classes;
    for (int j = 0; j < k; j++) { /* selection of the k largest, ties to the lower index */
        int best = -1;
        for (int c = 0; c < classes; c++) {
            bool used = false;
            for (int q = 0; q < j && !used; q++) used = idx[q] == c;
            if (!used && (best < 0 || p[c] > p[best])) best = c;
        }
        idx[j] = best;
    }
    if (json) {
        fputs("{\"file\": ", stdout);
        cli_json_string(stdout, file);
        fputs(", \"top\": [", stdout);
    } else {
        printf("%s:", file);
    }
    for (int j = 0; j < k; j++) {
        char fallback[32];
        const char *name = idx[j] < o->num_class_names && o->class_names ? o->class_names[idx[j]] : NULL;
        if (!name) snprintf(fallback, sizeof fallback, "class %d", idx[j]);
        if (json) {
            printf("%s{\"class\": ", j ? ", " : "");
            cli_json_string(stdout, name ? name : fallback);
            printf(", \"index\": %d, \"probability\": ", idx[j]);
            cli_json_number(stdout, p[idx[j]]);
            fputs("}", stdout);
        } else {
            printf("%s %s %.4f", j ? "," : "", name ? name : fallback, p[idx[j]]);
        }
    }
    puts(json ? "]}" : "");
}

int cli_predict_images(kc_model *m, const char *input, int top_k, bool json) {
    kc_image_opts o;
    int classes = 0, n = 0, rc;
    char **files = NULL;
    if ((rc = cli_model_image_opts(m, &o, &classes)) || (rc = list_inputs(input, &files, &n))) return rc;
    int64_t e = (int64_t)o.height * o.width * (o.color_mode == KC_COLOR_GRAYSCALE ? 1 : o.color_mode == KC_COLOR_RGBA ? 4 : 3);
    float *x = malloc((size_t)e * sizeof(float)), *p = malloc((size_t)classes * sizeof(float));
    if (!x || !p) rc = cli_error(CLI_EXIT_RUNTIME, "out of memory");
    for (int i = 0; !rc && i < n; i++) {
        kc_status s = kc_image_load(files[i], &o, x);
        if (!s) {
            s = kc_predict(m, x, 1, 1, p);
            if (s == KC_STATUS_STATE) { /* the library wants a compiled model: Keras's defaults */
                kc_compile_opts co = {0};
                if ((s = kc_compile(m, &co)) == KC_STATUS_OK) s = kc_predict(m, x, 1, 1, p);
            }
            if (s) rc = cli_fail(s, CLI_PHASE_RUN);
        } else {
            rc = cli_fail(s, CLI_PHASE_LOAD);
        }
        if (!rc) print_top(files[i], p, classes, top_k, &o, json);
    }
    for (int i = 0; i < n; i++) free(files[i]);
    free(files);
    free(x);
    free(p);
    return rc;
}
