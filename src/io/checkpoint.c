/* checkpoint.c — training checkpoints: kc_fit writes them (kc_fit_opts.checkpoint_dir)
 * and continues from them (kc_fit_opts.resume_from); kc_checkpoint_load makes a model
 * from one.
 *
 * A checkpoint is a Keras 3 .keras archive (keras_archive.c) with three additions:
 *   - config.json carries a "compile_config" (optimizer, loss, metrics) as Keras writes it,
 *     so keras.saving.load_model(path) compiles the model and loads the optimizer state;
 *   - model.weights.h5 holds the optimizer's variables where Keras 3 keeps them,
 *     optimizer/vars/<i>: 0 the iteration count (int64 scalar), 1 the learning rate
 *     (float32 scalar; absent when a schedule drives it, as in Keras), then the slots in
 *     the order Keras builds them from model.trainable_variables (layers in model.layers
 *     order, each layer's trainable weights in order): Adam/AdamW momentum, velocity per
 *     variable (interleaved); SGD with momentum: momentum per variable; RMSprop: every
 *     velocity, then every momentum (when momentum > 0). Checked against Keras 3.15.
 *   - kerac_training_state.json: everything else a bit-identical resume needs (below).
 *
 * kerac_training_state.json (version 1):
 *   model            name, config_hash (FNV-1a of the compact Keras 3 config: "a
 *                    checkpoint of a different model" is detected by it), the model seed
 *                    and every layer's dropout seed, a per-layer summary for messages
 *   compile          kerac's compile options (optimizer with its schedule, loss, metrics)
 *   optimizer_state  iterations, lr_scale (ReduceLROnPlateau), the number of variables
 *   fit              epochs asked for, batch size, training examples, steps per epoch,
 *                    seed, shuffle, validation split
 *   position         epoch, step done in it, examples seen, the epoch's loss and metric
 *                    sums so far, the epoch's logged learning rate, the micro-batch, the
 *                    shuffle generator's state at the start of the epoch (before its
 *                    shuffle). The epoch's order itself is rebuilt by replaying the
 *                    shuffles from the seed; the generator state checks the replay.
 *   checkpoint       the checkpoint options and the best monitored value
 *   history          the finished epochs' logs
 * Doubles are written with 17 significant digits, so they read back bit for bit.
 *
 * Files: DIR/ckpt-<seq>-e<epoch>-s<step>.keras, seq = 1 + the highest seq in DIR. A run
 * that writes checkpoints holds DIR's lock (dir_lock.c) from start to end: a second run is
 * refused. Writes go to a temporary of their own, are fsynced and renamed
 * (kc__write_file_atomic), then DIR is fsynced; only then are checkpoints beyond `keep`
 * deleted (lowest seq first). Temporaries of a run that died are ignored by readers and
 * removed by the next save (atomic_file.c). The newest checkpoint that reads (every zip
 * entry's CRC checked) is the one resumed: a damaged newer one is skipped with a warning. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "checkpoint.h"
#include "dir_lock.h"
#include "h5util.h"

#define STATE_ENTRY "kerac_training_state.json"
#define STATE_FORMAT "kerac-training-state"
#define STATE_VERSION 1
#define PREFIX "ckpt-"
#define SUFFIX ".keras"

int kc__optimizer_slots(kc_opt_kind kind, double momentum);

/* ---------------------------------------------------------------- small helpers */

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static json_t *jhex(uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
    return json_string(buf);
}

/* A JSON number; NaN and infinities (which JSON lacks) are null. */
static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static const char *opt_name(kc_opt_kind k) {
    switch (k) {
    case KC_OPT_SGD: return "sgd";
    case KC_OPT_ADAM: return "adam";
    case KC_OPT_ADAMW: return "adamw";
    case KC_OPT_RMSPROP: return "rmsprop";
    }
    return "?";
}

/* Keras's mode "auto": max for accuracies ("acc" in the name), min otherwise. */
static bool monitor_is_max(const char *monitor) { return strstr(monitor, "acc") != NULL; }

/* ---------------------------------------------------------------- folders */

static bool is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir -p */
static kc_status make_dirs(const char *dir) {
    if (is_dir(dir)) return KC_STATUS_OK;
    size_t n = strlen(dir);
    char *p = malloc(n + 1);
    if (!p) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory making folder '%s'", dir);
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] != '/' && p[i] != '\0') continue;
        char c = p[i];
        p[i] = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST) {
            int err = errno;
            kc_status s = kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot make '%s': %s; pick a folder you can "
                                   "write to", dir, p, strerror(err));
            free(p);
            return s;
        }
        p[i] = c;
    }
    free(p);
    if (!is_dir(dir))
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s' is not a folder (a file has that name)", dir);
    return KC_STATUS_OK;
}

/* Make the renames inside dir durable. Filesystems that cannot sync a folder say EINVAL. */
static kc_status sync_dir(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot open it: %s", dir, strerror(errno));
    int err = fsync(fd) != 0 ? errno : 0;
    close(fd);
    if (err && err != EINVAL && err != EROFS)
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s': cannot flush it to disk: %s", dir, strerror(err));
    return KC_STATUS_OK;
}

typedef struct ckpt_file {
    long long seq;
    int epoch;
    long long step;
    char name[96];
} ckpt_file;

/* Digits only, at least one; advances *p. */
static bool read_digits(const char **p, long long *out) {
    const char *s = *p;
    long long v = 0;
    int n = 0;
    while (*s >= '0' && *s <= '9' && n < 18) {
        v = v * 10 + (*s - '0');
        s++;
        n++;
    }
    if (n == 0 || (*s >= '0' && *s <= '9')) return false;
    *p = s;
    *out = v;
    return true;
}

/* "ckpt-<seq>-e<epoch>-s<step>.keras" exactly (a ".keras.tmp" is not one). */
static bool parse_name(const char *name, ckpt_file *f) {
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0 || strlen(name) >= sizeof f->name) return false;
    const char *p = name + strlen(PREFIX);
    long long seq, epoch, step;
    if (!read_digits(&p, &seq) || strncmp(p, "-e", 2) != 0) return false;
    p += 2;
    if (!read_digits(&p, &epoch) || strncmp(p, "-s", 2) != 0 || epoch > 1000000000LL) return false;
    p += 2;
    if (!read_digits(&p, &step) || strcmp(p, SUFFIX) != 0) return false;
    f->seq = seq;
    f->epoch = (int)epoch;
    f->step = step;
    snprintf(f->name, sizeof f->name, "%s", name);
    return true;
}

/* A temporary left by a checkpoint writer that died: its process is gone (atomic_file.c),
 * or it is an older kerac's "<checkpoint>.tmp". */
static bool is_stray_tmp(const char *name) {
    size_t n = strlen(name), s = strlen(SUFFIX ".tmp");
    if (strncmp(name, PREFIX, strlen(PREFIX)) != 0) return false;
    return kc__tmp_is_stale(name, NULL) || (n > s && strcmp(name + n - s, SUFFIX ".tmp") == 0);
}

static int by_seq_desc(const void *a, const void *b) {
    const ckpt_file *x = a, *y = b;
    return x->seq < y->seq ? 1 : x->seq > y->seq ? -1 : 0;
}

/* The checkpoints in dir, newest (highest seq) first; clean: remove stray temporaries. */
static kc_status list_dir(const char *dir, bool clean, ckpt_file **out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    DIR *d = opendir(dir);
    if (!d) return kc__fail(KC_STATUS_IO, "cannot read checkpoint folder '%s': %s", dir, strerror(errno));
    ckpt_file *v = NULL;
    int n = 0, cap = 0;
    kc_status s = KC_STATUS_OK;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        ckpt_file f;
        if (parse_name(e->d_name, &f)) {
            if (n == cap) {
                int nc = cap ? cap * 2 : 16;
                ckpt_file *p = realloc(v, (size_t)nc * sizeof *p);
                if (!p) {
                    s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory listing '%s'", dir);
                    break;
                }
                v = p;
                cap = nc;
            }
            v[n++] = f;
        } else if (clean && is_stray_tmp(e->d_name)) {
            char path[4096];
            if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path) unlink(path);
        }
    }
    closedir(d);
    if (s != KC_STATUS_OK) {
        free(v);
        return s;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, by_seq_desc);
    *out = v;
    *n_out = n;
    return KC_STATUS_OK;
}

static char *join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) {
        kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory for a path in '%s'", dir);
        return NULL;
    }
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

/* The first of v (newest first) whose every zip entry reads with a matching CRC; -1, with
 * the newest one's error, when none does. Skipping one is said always. */
static int newest_readable(const char *dir, const ckpt_file *v, int count) {
    char first[512] = "", path[4096];
    for (int i = 0; i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, v[i].name);
        kc_status s = kc__keras_archive_verify(path);
        if (s == KC_STATUS_OK && i > 0)
            kc__log_always(KC_LOG_WARNING, "resuming from '%s', the newest checkpoint that reads: %s", path, first);
        if (s == KC_STATUS_OK) return i;
        if (i == 0) snprintf(first, sizeof first, "%s", kc_last_error());
    }
    kc__fail(KC_STATUS_BAD_FILE, "%s; no checkpoint in '%s' reads", first, dir);
    return -1;
}

kc_status kc_checkpoint_latest(const char *dir, char *path, size_t n) {
    if (!dir || !*dir || !path || n == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_latest: the folder or the output is empty");
    ckpt_file *v = NULL;
    int count = 0;
    KC_TRY(list_dir(dir, false, &v, &count));
    if (count == 0) {
        free(v);
        return kc__fail(KC_STATUS_IO, "no checkpoint in '%s' (no " PREFIX "*" SUFFIX " file); train with a checkpoint "
                        "folder first", dir);
    }
    int use = newest_readable(dir, v, count);
    if (use < 0) {
        free(v);
        return KC_STATUS_BAD_FILE; /* the newest one's error */
    }
    int w = snprintf(path, n, "%s/%s", dir, v[use].name);
    free(v);
    if (w < 0 || (size_t)w >= n)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_latest: a path in '%s' is longer than %zu bytes",
                        dir, n);
    return KC_STATUS_OK;
}

/* A checkpoint file, or a folder's newest (malloc'd). */
static kc_status resolve(const char *path, char **file) {
    *file = NULL;
    if (!path || !*path) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "checkpoint: the path is empty");
    if (is_dir(path)) {
        char buf[4096];
        KC_TRY(kc_checkpoint_latest(path, buf, sizeof buf));
        *file = kc__strdup(buf);
    } else {
        if (access(path, R_OK) != 0)
            return kc__fail(KC_STATUS_IO, "cannot open checkpoint '%s': %s", path, strerror(errno));
        *file = kc__strdup(path);
    }
    return *file ? KC_STATUS_OK : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
}

/* ---------------------------------------------------------------- the model's identity */

static kc_status config_hash(kc_model *m, uint64_t *out) {
    char *text = NULL;
    KC_TRY(kc__model_to_json_flags(m, 3, JSON_COMPACT, &text));
    *out = fnv1a(text);
    free(text);
    return KC_STATUS_OK;
}

/* [[name, class, [[dims], ...]], ...] */
static json_t *layer_summary(const kc_model *m) {
    json_t *a = json_array();
    for (int i = 0; i < m->n_layers; i++) {
        const kc_layer *l = m->layers[i];
        json_t *e = json_array(), *ws = json_array();
        json_array_append_new(e, json_string(l->name));
        json_array_append_new(e, json_string(l->ops->class_name));
        for (int k = 0; k < l->n_weights; k++) {
            json_t *d = json_array();
            for (int r = 0; r < l->w[k].shape.rank; r++) json_array_append_new(d, json_integer(l->w[k].shape.dim[r]));
            json_array_append_new(ws, d);
        }
        json_array_append_new(e, ws);
        json_array_append_new(a, e);
    }
    return a;
}

static void describe_layer(json_t *e, char *buf, size_t n) {
    const char *name = json_string_value(json_array_get(e, 0)), *cls = json_string_value(json_array_get(e, 1));
    size_t used = (size_t)snprintf(buf, n, "'%s' (%s", name ? name : "?", cls ? cls : "?");
    json_t *ws = json_array_get(e, 2), *d;
    size_t i;
    json_array_foreach(ws, i, d) {
        if (used >= n) break;
        used += (size_t)snprintf(buf + used, n - used, "%s(", i ? ", " : ": weights ");
        for (size_t r = 0; r < json_array_size(d) && used < n; r++)
            used += (size_t)snprintf(buf + used, n - used, "%s%lld", r ? ", " : "",
                                     (long long)json_integer_value(json_array_get(d, r)));
        if (used < n) used += (size_t)snprintf(buf + used, n - used, "%s)", json_array_size(d) == 1 ? "," : "");
    }
    if (used < n) snprintf(buf + used, n - used, ")");
}

/* The error for a checkpoint of another model: the first layer that differs. */
static kc_status different_model(const char *path, const kc_model *m, json_t *saved) {
    json_t *mine = layer_summary(m);
    size_t ns = json_array_size(saved), nm = json_array_size(mine);
    char a[512], b[512];
    kc_status s = KC_STATUS_OK;
    for (size_t i = 0; i < ns && i < nm && s == KC_STATUS_OK; i++) {
        json_t *x = json_array_get(saved, i), *y = json_array_get(mine, i);
        if (json_equal(x, y)) continue;
        describe_layer(x, a, sizeof a);
        describe_layer(y, b, sizeof b);
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: its layer %zu is %s but model '%s' has %s; resume "
                     "with the model that wrote it (or start a new run)", path, i, a, m->name, b);
    }
    if (s == KC_STATUS_OK && ns != nm)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: it has %zu layers, model '%s' has %zu; resume with "
                     "the model that wrote it (or start a new run)", path, ns, m->name, nm);
    if (s == KC_STATUS_OK)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is a checkpoint of a different model: model '%s' has the same layers and weight shapes but "
                     "another config (a name, an activation or an option differs); resume with the model that wrote it",
                     path, m->name);
    json_decref(mine);
    return s;
}

/* ---------------------------------------------------------------- optimizer variables */

/* The trainable weights in Keras's model.trainable_variables order; *out (malloc'd). */
static kc_status keras_trainable(kc_model *m, kc_weight ***out, int *n_out) {
    *out = NULL;
    *n_out = 0;
    int *order = kc__calloc((size_t)KC_MAX(m->n_layers, 1), sizeof(int), "layer order");
    int total = 0;
    for (int i = 0; i < m->n_layers; i++) total += m->layers[i]->n_weights;
    kc_weight **w = kc__calloc((size_t)KC_MAX(total, 1), sizeof *w, "the trainable weights");
    if (!order || !w) {
        free(order);
        free(w);
        return KC_STATUS_OUT_OF_MEMORY;
    }
    int n_order = 0, n = 0;
    kc_status s = kc__keras_layer_order(m, order, &n_order);
    for (int i = 0; i < n_order && s == KC_STATUS_OK; i++) {
        kc_layer *l = m->layers[order[i]];
        for (int k = 0; k < l->n_weights; k++)
            if (l->w[k].trainable) w[n++] = &l->w[k];
    }
    free(order);
    if (s != KC_STATUS_OK) {
        free(w);
        return s;
    }
    *out = w;
    *n_out = n;
    return KC_STATUS_OK;
}

/* Which slab holds Keras variable j (after iteration and learning_rate) of nw weights:
 * its slot and weight index. */
static void keras_slot(kc_opt_kind kind, int j, int nw, int *slot, int *weight) {
    if (kind == KC_OPT_ADAM || kind == KC_OPT_ADAMW) { /* interleaved momentum, velocity */
        *slot = j % 2;
        *weight = j / 2;
    } else { /* SGD: momentums; RMSprop: velocities, then momentums */
        *slot = j / KC_MAX(nw, 1);
        *weight = j % KC_MAX(nw, 1);
    }
}

static bool has_lr_variable(const kc_model *m) { return m->opt.opts.schedule == NULL; }

static int n_keras_vars(const kc_model *m, int nw) {
    return 1 + (has_lr_variable(m) ? 1 : 0) + kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum) * nw;
}

static kc_status write_optimizer(kc_model *m, int64_t file, void *user) {
    (void)user;
    hid_t f = (hid_t)file;
    kc_weight **w = NULL;
    int nw = 0;
    KC_TRY(keras_trainable(m, &w, &nw));
    int64_t max_size = 1;
    for (int i = 0; i < nw; i++) max_size = KC_MAX(max_size, w[i]->size);
    float *host = malloc((size_t)max_size * sizeof(float)); /* (max weight size) */
    hid_t g = H5I_INVALID_HID;
    kc_status s = host ? kc__h5_make_group(f, "optimizer/vars", &g)
                       : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory saving the optimizer state");
    if (s == KC_STATUS_OK) s = kc__h5_put_vlen_string(g, "name", opt_name(m->opt.kind));
    if (s == KC_STATUS_OK) { /* 0: the iteration count, an int64 scalar */
        hid_t sp = H5Screate(H5S_SCALAR);
        hid_t ds = sp < 0 ? H5I_INVALID_HID
                          : H5Dcreate2(g, "0", H5T_STD_I64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        int64_t it = m->opt.iterations;
        if (ds < 0 || H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it) < 0) {
            char why[256];
            s = kc__fail(KC_STATUS_INTERNAL, "HDF5: cannot write dataset 'optimizer/vars/0' (%s)",
                         kc__h5_reason(why, sizeof why));
        }
        if (ds >= 0) H5Dclose(ds);
        if (sp >= 0) H5Sclose(sp);
    }
    int idx = 1;
    if (s == KC_STATUS_OK && has_lr_variable(m)) {
        float lr = (float)kc__optimizer_lr(&m->opt, m->opt.iterations);
        kc_shape scalar = {0};
        s = kc__h5_put_f32(g, "1", &scalar, &lr);
        idx = 2;
    }
    int nvars = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum) * nw;
    for (int j = 0; j < nvars && s == KC_STATUS_OK; j++) {
        int slot, wi;
        keras_slot(m->opt.kind, j, nw, &slot, &wi);
        float *base = slot == 0 ? m->slot0 : m->slot1;
        char key[16];
        snprintf(key, sizeof key, "%d", idx + j);
        s = m->be->to_host(m->be, host, base + (w[wi]->data - m->params), (size_t)w[wi]->size * sizeof(float));
        if (s == KC_STATUS_OK) s = kc__h5_put_f32(g, key, &w[wi]->shape, host);
    }
    if (g >= 0) H5Gclose(g);
    free(host);
    free(w);
    return s;
}

/* Read and check optimizer/vars of an open checkpoint into host copies of the two slot
 * slabs (n_trainable each, zero where no weight lies) and the iteration count. */
static kc_status read_optimizer(kc_model *m, hid_t f, const char *path, float **slab0, float **slab1, int64_t *iters) {
    *slab0 = *slab1 = NULL;
    kc_weight **w = NULL;
    int nw = 0;
    KC_TRY(keras_trainable(m, &w, &nw));
    int want = n_keras_vars(m, nw);
    long have = kc__h5_group_size(f, "optimizer/vars");
    kc_status s = KC_STATUS_OK;
    if (have != want)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s': model.weights.h5 has %ld optimizer variables (optimizer/vars) but %s with %d trainable "
                     "weights needs %d; the checkpoint is damaged or belongs to another optimizer",
                     path, have < 0 ? 0 : have, opt_name(m->opt.kind), nw, want);
    if (s == KC_STATUS_OK) {
        hid_t ds = H5Dopen2(f, "optimizer/vars/0", H5P_DEFAULT);
        hid_t sp = ds < 0 ? H5I_INVALID_HID : H5Dget_space(ds);
        hid_t ty = ds < 0 ? H5I_INVALID_HID : H5Dget_type(ds);
        int64_t it = -1;
        if (ds < 0 || sp < 0 || ty < 0 || H5Tget_class(ty) != H5T_INTEGER || H5Sget_simple_extent_npoints(sp) != 1 ||
            H5Dread(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, &it) < 0 || it < 0)
            s = kc__fail(KC_STATUS_BAD_FILE, "'%s': optimizer/vars/0 (the iteration count) is not a non-negative "
                         "integer scalar; the checkpoint is damaged", path);
        if (ty >= 0) H5Tclose(ty);
        if (sp >= 0) H5Sclose(sp);
        if (ds >= 0) H5Dclose(ds);
        *iters = it;
    }
    size_t slab = (size_t)KC_MAX(m->n_trainable, 1);
    int slots = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum);
    if (s == KC_STATUS_OK) {
        *slab0 = slots >= 1 ? kc__calloc(slab, sizeof(float), "optimizer state") : NULL;
        *slab1 = slots >= 2 ? kc__calloc(slab, sizeof(float), "optimizer state") : NULL;
        if ((slots >= 1 && !*slab0) || (slots >= 2 && !*slab1)) s = KC_STATUS_OUT_OF_MEMORY;
    }
    int first = has_lr_variable(m) ? 2 : 1;
    for (int j = 0; j < slots * nw && s == KC_STATUS_OK; j++) {
        int slot, wi;
        keras_slot(m->opt.kind, j, nw, &slot, &wi);
        char key[40], what[400];
        snprintf(key, sizeof key, "optimizer/vars/%d", first + j);
        const kc_layer *owner = NULL;
        for (int i = 0; i < m->n_layers && !owner; i++)
            if (w[wi] >= m->layers[i]->w && w[wi] < m->layers[i]->w + m->layers[i]->n_weights) owner = m->layers[i];
        snprintf(what, sizeof what, "'%s': optimizer variable %d (the %s slot of layer '%s' weight '%s')", path,
                 first + j, slot == 0 ? "first" : "second", owner ? owner->name : "?", w[wi]->name);
        float *dst = (slot == 0 ? *slab0 : *slab1) + (w[wi]->data - m->params);
        s = kc__h5_read_weight(f, key, &w[wi]->shape, dst, what);
    }
    free(w);
    if (s != KC_STATUS_OK) {
        free(*slab0);
        free(*slab1);
        *slab0 = *slab1 = NULL;
    }
    return s;
}

/* ---------------------------------------------------------------- Keras compile_config */

static json_t *keras_object(const char *module, const char *cls, json_t *config) {
    json_t *o = json_object();
    json_object_set_new(o, "module", json_string(module));
    json_object_set_new(o, "class_name", json_string(cls));
    json_object_set_new(o, "config", config);
    json_object_set_new(o, "registered_name", json_null());
    return o;
}

/* A float32 value as Keras prints it (the variable's value widened to double). */
static json_t *jf32(double v) { return jnum((double)(float)v); }

static json_t *keras_lr(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    if (!p->schedule) return jf32(p->learning_rate * m->opt.lr_scale);
    json_t *c = json_object();
    if (strcmp(p->schedule, "exponential_decay") == 0) {
        json_object_set_new(c, "initial_learning_rate", jnum(p->learning_rate));
        json_object_set_new(c, "decay_steps", json_integer(p->decay_steps));
        json_object_set_new(c, "decay_rate", jnum(p->decay_rate));
        json_object_set_new(c, "staircase", json_boolean(p->staircase > 0));
        json_object_set_new(c, "name", json_string("ExponentialDecay"));
        return keras_object("keras.optimizers.schedules", "ExponentialDecay", c);
    }
    if (strcmp(p->schedule, "cosine_decay") == 0) {
        json_object_set_new(c, "initial_learning_rate", jnum(p->learning_rate));
        json_object_set_new(c, "decay_steps", json_integer(p->decay_steps));
        json_object_set_new(c, "alpha", jnum(p->alpha));
        json_object_set_new(c, "name", json_string("CosineDecay"));
        json_object_set_new(c, "warmup_target", json_null());
        json_object_set_new(c, "warmup_steps", json_integer(0));
        return keras_object("keras.optimizers.schedules", "CosineDecay", c);
    }
    json_t *b = json_array(), *v = json_array();
    for (int i = 0; i < p->num_boundaries; i++) json_array_append_new(b, json_integer(m->opt.boundaries[i]));
    for (int i = 0; i <= p->num_boundaries; i++) json_array_append_new(v, jnum(m->opt.values[i]));
    json_object_set_new(c, "boundaries", b);
    json_object_set_new(c, "values", v);
    json_object_set_new(c, "name", json_string("PiecewiseConstant"));
    return keras_object("keras.optimizers.schedules", "PiecewiseConstantDecay", c);
}

static json_t *keras_optimizer(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    static const char *const cls[] = {"SGD", "Adam", "AdamW", "RMSprop"};
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(opt_name(m->opt.kind)));
    json_object_set_new(c, "learning_rate", keras_lr(m));
    json_object_set_new(c, "weight_decay", m->opt.kind == KC_OPT_ADAMW ? jnum(p->weight_decay) : json_null());
    json_object_set_new(c, "clipnorm", p->clipnorm > 0 ? jnum(p->clipnorm) : json_null());
    json_object_set_new(c, "global_clipnorm", p->global_clipnorm > 0 ? jnum(p->global_clipnorm) : json_null());
    json_object_set_new(c, "clipvalue", json_null());
    json_object_set_new(c, "use_ema", json_false());
    json_object_set_new(c, "ema_momentum", json_real(0.99));
    json_object_set_new(c, "ema_overwrite_frequency", json_null());
    json_object_set_new(c, "loss_scale_factor", json_null());
    json_object_set_new(c, "gradient_accumulation_steps", json_null());
    switch (m->opt.kind) {
    case KC_OPT_SGD:
        json_object_set_new(c, "momentum", jnum(p->momentum));
        json_object_set_new(c, "nesterov", json_boolean(p->nesterov > 0));
        break;
    case KC_OPT_ADAM:
    case KC_OPT_ADAMW:
        json_object_set_new(c, "beta_1", jnum(p->beta_1));
        json_object_set_new(c, "beta_2", jnum(p->beta_2));
        json_object_set_new(c, "epsilon", jnum(p->epsilon));
        json_object_set_new(c, "amsgrad", json_false());
        break;
    case KC_OPT_RMSPROP:
        json_object_set_new(c, "rho", jnum(p->rho));
        json_object_set_new(c, "momentum", jnum(p->momentum));
        json_object_set_new(c, "epsilon", jnum(p->epsilon));
        json_object_set_new(c, "centered", json_false());
        break;
    }
    return keras_object("keras.optimizers", cls[m->opt.kind], c);
}

static json_t *keras_loss(const kc_model *m) {
    const char *name = kc_loss_name(m->loss);
    static const struct {
        kc_loss_kind kind;
        const char *cls;
    } ce[] = {{KC_LOSS_SPARSE_CCE, "SparseCategoricalCrossentropy"},
              {KC_LOSS_CCE, "CategoricalCrossentropy"},
              {KC_LOSS_BCE, "BinaryCrossentropy"}};
    for (size_t i = 0; m->from_logits && i < KC_ARRAY_LEN(ce); i++)
        if (ce[i].kind == m->loss) {
            json_t *c = json_object();
            json_object_set_new(c, "name", json_string(name));
            json_object_set_new(c, "reduction", json_string("sum_over_batch_size"));
            json_object_set_new(c, "from_logits", json_true());
            return keras_object("keras.losses", ce[i].cls, c);
        }
    return json_string(name);
}

static json_t *keras_metric(const kc_metric *mt) {
    if (mt->k <= 1) return json_string(mt->name);
    const char *name = mt->sparse ? "sparse_top_k_categorical_accuracy" : "top_k_categorical_accuracy";
    if (mt->k == 5) return json_string(name);
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name));
    json_object_set_new(c, "dtype", json_string("float32"));
    json_object_set_new(c, "k", json_integer(mt->k));
    return keras_object("keras.metrics", mt->sparse ? "SparseTopKCategoricalAccuracy" : "TopKCategoricalAccuracy", c);
}

/* Keras's compile_config (Python json.dumps separators), malloc'd. */
static char *keras_compile_config(const kc_model *m) {
    json_t *cc = json_object(), *metrics = json_array();
    json_object_set_new(cc, "optimizer", keras_optimizer(m));
    json_object_set_new(cc, "loss", keras_loss(m));
    json_object_set_new(cc, "loss_weights", json_null());
    for (int i = 0; i < m->n_metrics; i++) json_array_append_new(metrics, keras_metric(&m->metrics[i]));
    json_object_set_new(cc, "metrics", metrics);
    json_object_set_new(cc, "weighted_metrics", json_null());
    json_object_set_new(cc, "run_eagerly", json_false());
    json_object_set_new(cc, "steps_per_execution", json_integer(1));
    json_object_set_new(cc, "jit_compile", json_false());
    char *text = json_dumps(cc, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17));
    json_decref(cc);
    return text;
}

/* ---------------------------------------------------------------- the training state */

/* Settings and running values of one fit call. */
/* One callback's state in a checkpoint (kc_callback.get_state / set_state). */
typedef struct ckpt_callback {
    char name[64];
    double v[KC_CALLBACK_STATE_MAX];
    int n;                   /* -1: the callback keeps no state */
} ckpt_callback;

struct kc__ckpt {
    char *dir;               /* NULL: not writing checkpoints */
    int64_t every;           /* 0: epoch ends */
    int keep;
    bool best_only;
    char monitor[64];
    bool max_mode;
    double best;
    bool has_best;
    kc__fit_geom geom;
    kc_callback *const *cbs; /* the run's callbacks (their states are saved) */
    int n_cbs;
    /* resume */
    bool resumed;
    kc__fit_pos pos;
    kc_epoch_logs *hist;
    int n_hist;
    ckpt_callback *saved_cbs; /* the checkpoint's callback states */
    int n_saved_cbs;
    int lock_fd;              /* the folder's lock (dir_lock.c), or -1 */
    int64_t saved_at;         /* the global step of the last checkpoint written, or -1 */
};

static json_t *rng_json(const kc_rng *r) {
    json_t *a = json_array();
    for (int i = 0; i < 4; i++) json_array_append_new(a, jhex(r->s[i]));
    return a;
}

static json_t *doubles_json(const double *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, jnum(v[i]));
    return a;
}

static json_t *epoch_json(const kc_epoch_logs *e, int n_metrics) {
    json_t *o = json_object();
    json_object_set_new(o, "epoch", json_integer(e->epoch));
    json_object_set_new(o, "steps", json_integer(e->steps));
    json_object_set_new(o, "loss", jnum(e->loss));
    json_object_set_new(o, "metrics", doubles_json(e->metrics, n_metrics));
    json_object_set_new(o, "has_val", json_boolean(e->has_val));
    json_object_set_new(o, "val_loss", jnum(e->val_loss));
    json_object_set_new(o, "val_metrics", doubles_json(e->val_metrics, n_metrics));
    json_object_set_new(o, "lr", jnum(e->lr));
    json_object_set_new(o, "seconds", jnum(e->seconds));
    json_object_set_new(o, "images_per_second", jnum(e->images_per_second));
    json_object_set_new(o, "batch_size", json_integer(e->batch_size));
    json_object_set_new(o, "micro_batch", json_integer(e->micro_batch));
    json_object_set_new(o, "grad_accum", json_integer(e->grad_accum));
    return o;
}

static json_t *compile_json(const kc_model *m) {
    const kc_optimizer_opts *p = &m->opt.opts;
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(opt_name(m->opt.kind)));
    json_object_set_new(o, "learning_rate", jnum(p->learning_rate));
    json_object_set_new(o, "momentum", jnum(p->momentum));
    json_object_set_new(o, "nesterov", json_integer(p->nesterov));
    json_object_set_new(o, "beta_1", jnum(p->beta_1));
    json_object_set_new(o, "beta_2", jnum(p->beta_2));
    json_object_set_new(o, "epsilon", jnum(p->epsilon));
    json_object_set_new(o, "weight_decay", jnum(p->weight_decay));
    json_object_set_new(o, "rho", jnum(p->rho));
    json_object_set_new(o, "clipnorm", jnum(p->clipnorm));
    json_object_set_new(o, "global_clipnorm", jnum(p->global_clipnorm));
    json_object_set_new(o, "schedule", p->schedule ? json_string(p->schedule) : json_null());
    json_object_set_new(o, "decay_steps", json_integer(p->decay_steps));
    json_object_set_new(o, "decay_rate", jnum(p->decay_rate));
    json_object_set_new(o, "staircase", json_integer(p->staircase));
    json_object_set_new(o, "alpha", jnum(p->alpha));
    json_t *b = json_array(), *v = json_array();
    for (int i = 0; p->schedule && i < p->num_boundaries; i++)
        json_array_append_new(b, json_integer(m->opt.boundaries[i]));
    for (int i = 0; p->schedule && i <= p->num_boundaries && p->num_boundaries > 0; i++)
        json_array_append_new(v, jnum(m->opt.values[i]));
    json_object_set_new(o, "boundaries", b);
    json_object_set_new(o, "values", v);
    json_t *c = json_object(), *metrics = json_array();
    int top_k = 0;
    for (int i = 0; i < m->n_metrics; i++) {
        json_array_append_new(metrics, json_string(m->metrics[i].name));
        if (m->metrics[i].k > 1) top_k = m->metrics[i].k;
    }
    json_object_set_new(c, "optimizer", o);
    json_object_set_new(c, "loss", json_string(kc_loss_name(m->loss)));
    json_object_set_new(c, "from_logits", json_boolean(m->from_logits));
    json_object_set_new(c, "metrics", metrics);
    json_object_set_new(c, "top_k", json_integer(top_k));
    return c;
}

static kc_status state_json(const kc__ckpt *c, kc_model *m, const kc__fit_pos *p, const kc_epoch_logs *hist, int n_hist,
                            char **out) {
    *out = NULL;
    uint64_t hash = 0;
    KC_TRY(config_hash(m, &hash));
    json_t *root = json_object(), *model = json_object(), *seeds = json_array();
    json_object_set_new(root, "format", json_string(STATE_FORMAT));
    json_object_set_new(root, "version", json_integer(STATE_VERSION));
    json_object_set_new(root, "kerac_version", json_string(kc_version()));
    json_object_set_new(model, "name", json_string(m->name));
    json_object_set_new(model, "config_hash", jhex(hash));
    json_object_set_new(model, "seed", jhex(m->seed));
    for (int i = 0; i < m->n_layers; i++) json_array_append_new(seeds, jhex(m->layers[i]->seed));
    json_object_set_new(model, "layer_seeds", seeds);
    json_object_set_new(model, "layers", layer_summary(m));
    json_object_set_new(root, "model", model);
    json_object_set_new(root, "compile", compile_json(m));

    kc_weight **w = NULL;
    int nw = 0;
    kc_status s = keras_trainable(m, &w, &nw);
    free(w);
    json_t *os = json_object();
    json_object_set_new(os, "iterations", json_integer(m->opt.iterations));
    json_object_set_new(os, "lr_scale", jnum(m->opt.lr_scale));
    json_object_set_new(os, "variables", json_integer(n_keras_vars(m, nw)));
    json_object_set_new(root, "optimizer_state", os);

    const kc__fit_geom *g = &c->geom;
    json_t *fit = json_object();
    json_object_set_new(fit, "epochs", json_integer(g->epochs));
    json_object_set_new(fit, "batch_size", json_integer(g->batch_size));
    json_object_set_new(fit, "num_examples", json_integer(g->num_examples));
    json_object_set_new(fit, "steps_per_epoch", json_integer(g->steps));
    json_object_set_new(fit, "seed", jhex(g->seed));
    json_object_set_new(fit, "shuffle", json_boolean(g->shuffle));
    json_object_set_new(fit, "validation_split", jnum(g->validation_split));
    json_object_set_new(fit, "has_validation", json_boolean(g->has_val));
    json_object_set_new(root, "fit", fit);

    json_t *pos = json_object();
    json_object_set_new(pos, "epoch", json_integer(p->epoch));
    json_object_set_new(pos, "step", json_integer(p->step));
    json_object_set_new(pos, "global_step", json_integer((json_int_t)p->epoch * g->steps + p->step));
    json_object_set_new(pos, "seen", json_integer(p->seen));
    json_object_set_new(pos, "sums", doubles_json(p->sums, 1 + m->n_metrics));
    json_object_set_new(pos, "epoch_lr", jnum(p->epoch_lr));
    json_object_set_new(pos, "micro_batch", json_integer(p->micro_batch));
    json_object_set_new(pos, "rng", rng_json(&p->rng));
    json_object_set_new(root, "position", pos);

    json_t *ck = json_object();
    json_object_set_new(ck, "every_steps", json_integer(c->every));
    json_object_set_new(ck, "keep", json_integer(c->keep));
    json_object_set_new(ck, "save_best_only", json_boolean(c->best_only));
    json_object_set_new(ck, "monitor", json_string(c->monitor));
    json_object_set_new(ck, "mode", json_string(c->max_mode ? "max" : "min"));
    json_object_set_new(ck, "best", c->has_best ? jnum(c->best) : json_null());
    json_object_set_new(root, "checkpoint", ck);

    json_t *h = json_array();
    for (int i = 0; i < n_hist; i++) json_array_append_new(h, epoch_json(&hist[i], m->n_metrics));
    json_object_set_new(root, "history", h);

    json_t *cbs = json_array(); /* the callbacks' own states, by position */
    for (int i = 0; i < c->n_cbs; i++) {
        const kc_callback *cb = c->cbs[i];
        json_t *e = json_object();
        json_object_set_new(e, "name", json_string(cb && cb->name ? cb->name : ""));
        double v[KC_CALLBACK_STATE_MAX];
        int n = cb && cb->get_state ? cb->get_state(cb->user, v, KC_CALLBACK_STATE_MAX) : -1;
        json_object_set_new(e, "state", n >= 0 ? doubles_json(v, KC_MIN(n, KC_CALLBACK_STATE_MAX)) : json_null());
        json_array_append_new(cbs, e);
    }
    json_object_set_new(root, "callbacks", cbs);

    char *text = s == KC_STATUS_OK ? json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17))
                                   : NULL;
    json_decref(root);
    if (s == KC_STATUS_OK && !text)
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing the training state of model '%s'", m->name);
    *out = text;
    return s;
}

/* ---- reading it back */

typedef struct reader {
    const char *path;
    kc_status s;             /* first error */
} reader;

static json_t *field(reader *r, json_t *obj, const char *key) {
    json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
    if (!v && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has no '%s'; the checkpoint is damaged", r->path,
                        key);
    return v;
}

static int64_t get_int(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_integer(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not an integer; the checkpoint is damaged",
                        r->path, key);
    return json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
}

static double num_value(json_t *v) { return json_is_null(v) ? NAN : json_number_value(v); }

static double get_num(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_number(v) && !json_is_null(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a number; the checkpoint is damaged",
                        r->path, key);
    return v ? num_value(v) : NAN;
}

static bool get_bool(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_boolean(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE,
                        "'%s': " STATE_ENTRY ": '%s' is not true or false; the checkpoint is damaged", r->path, key);
    return json_is_true(v);
}

static const char *get_str(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    if (v && !json_is_string(v) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a string; the checkpoint is damaged",
                        r->path, key);
    return json_is_string(v) ? json_string_value(v) : "";
}

static uint64_t hex_value(reader *r, json_t *v, const char *key) {
    const char *t = json_string_value(v);
    char *end = NULL;
    unsigned long long x = t ? strtoull(t, &end, 16) : 0;
    if ((!t || !*t || *end) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE,
                        "'%s': " STATE_ENTRY ": '%s' is not a hexadecimal number; the checkpoint is damaged", r->path,
                        key);
    return (uint64_t)x;
}

static uint64_t get_hex(reader *r, json_t *obj, const char *key) {
    json_t *v = field(r, obj, key);
    return v ? hex_value(r, v, key) : 0;
}

static void get_doubles(reader *r, json_t *obj, const char *key, double *dst, int max) {
    json_t *a = field(r, obj, key);
    if (a && !json_is_array(a) && r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": '%s' is not a list; the checkpoint is damaged",
                        r->path, key);
    for (int i = 0; i < max; i++) dst[i] = 0;
    for (size_t i = 0; json_is_array(a) && i < json_array_size(a) && (int)i < max; i++)
        dst[i] = num_value(json_array_get(a, i));
}

/* A parsed kerac_training_state.json. */
typedef struct ckpt_state {
    char *path;
    json_t *root;
    json_t *layers;          /* borrowed from root */
    json_t *compile;         /* borrowed from root */
    char model_name[KC_NAME_MAX];
    uint64_t config_hash, model_seed;
    uint64_t *layer_seeds;
    int n_layer_seeds;
    kc_opt_kind opt_kind;
    double momentum;
    int64_t iterations;
    double lr_scale;
    int epochs, batch_size;
    int64_t num_examples, steps;
    uint64_t seed;
    bool shuffle;
    double validation_split;
    kc__fit_pos pos;
    bool best_only, has_best;
    int64_t every;
    int keep;
    char monitor[64];
    double best;
    kc_epoch_logs *hist;
    int n_hist;
    ckpt_callback *cbs;      /* absent from checkpoints of kerac 0.1: none */
    int n_cbs;
} ckpt_state;

static void state_free(ckpt_state *st) {
    free(st->path);
    free(st->cbs);
    json_decref(st->root);
    free(st->layer_seeds);
    free(st->hist);
    memset(st, 0, sizeof *st);
}

static kc_status parse_opt_kind(reader *r, const char *name, kc_opt_kind *out) {
    static const kc_opt_kind kinds[] = {KC_OPT_SGD, KC_OPT_ADAM, KC_OPT_ADAMW, KC_OPT_RMSPROP};
    for (size_t i = 0; i < KC_ARRAY_LEN(kinds); i++)
        if (strcmp(name, opt_name(kinds[i])) == 0) {
            *out = kinds[i];
            return KC_STATUS_OK;
        }
    if (r->s == KC_STATUS_OK)
        r->s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": unknown optimizer '%s'; the checkpoint is damaged",
                        r->path, name);
    return r->s;
}

/* Read the training state of the checkpoint file at path. */
static kc_status state_read(const char *path, ckpt_state *st) {
    memset(st, 0, sizeof *st);
    st->path = kc__strdup(path);
    if (!st->path) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory");
    char *text = NULL;
    size_t len = 0;
    bool present = false;
    kc_status s = kc__keras_archive_read_entry(path, STATE_ENTRY, &text, &len, &present);
    if (s == KC_STATUS_OK && !present)
        s = kc__fail(KC_STATUS_BAD_FILE,
                     "'%s' is not a kerac checkpoint: it has no " STATE_ENTRY " entry (a plain .keras model file?); "
                     "load it with kc_model_load / kerac train --init-from", path);
    if (s != KC_STATUS_OK) {
        free(text);
        state_free(st);
        return s;
    }
    json_error_t je;
    st->root = json_loadb(text, len, 0, &je);
    free(text);
    if (!json_is_object(st->root)) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " is not a JSON object (line %d: %s); the checkpoint is "
                     "damaged", path, je.line, st->root ? "not an object" : je.text);
        state_free(st);
        return s;
    }
    reader r = {path, KC_STATUS_OK};
    json_t *root = st->root;
    const char *format = get_str(&r, root, "format");
    int64_t version = get_int(&r, root, "version");
    if (r.s == KC_STATUS_OK && strcmp(format, STATE_FORMAT) != 0)
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has format '%s', not '" STATE_FORMAT "'", path,
                       format);
    if (r.s == KC_STATUS_OK && version != STATE_VERSION)
        r.s = kc__fail(KC_STATUS_UNSUPPORTED, "'%s': training state version %lld; this kerac (%s) reads version %d: "
                       "resume with the kerac that wrote it", path, (long long)version, kc_version(), STATE_VERSION);

    json_t *model = field(&r, root, "model");
    snprintf(st->model_name, sizeof st->model_name, "%s", get_str(&r, model, "name"));
    st->config_hash = get_hex(&r, model, "config_hash");
    st->model_seed = get_hex(&r, model, "seed");
    json_t *seeds = field(&r, model, "layer_seeds");
    st->layers = field(&r, model, "layers");
    if (r.s == KC_STATUS_OK && (!json_is_array(seeds) || !json_is_array(st->layers)))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": the layer list is damaged", path);
    if (r.s == KC_STATUS_OK) {
        st->n_layer_seeds = (int)json_array_size(seeds);
        st->layer_seeds = kc__calloc((size_t)KC_MAX(st->n_layer_seeds, 1), sizeof(uint64_t), "layer seeds");
        if (!st->layer_seeds) r.s = KC_STATUS_OUT_OF_MEMORY;
        for (int i = 0; r.s == KC_STATUS_OK && i < st->n_layer_seeds; i++)
            st->layer_seeds[i] = hex_value(&r, json_array_get(seeds, (size_t)i), "layer_seeds");
    }

    st->compile = field(&r, root, "compile");
    json_t *opt = field(&r, st->compile, "optimizer");
    if (r.s == KC_STATUS_OK) parse_opt_kind(&r, get_str(&r, opt, "name"), &st->opt_kind);
    st->momentum = get_num(&r, opt, "momentum");

    json_t *os = field(&r, root, "optimizer_state");
    st->iterations = get_int(&r, os, "iterations");
    st->lr_scale = get_num(&r, os, "lr_scale");

    json_t *fit = field(&r, root, "fit");
    st->epochs = (int)get_int(&r, fit, "epochs");
    st->batch_size = (int)get_int(&r, fit, "batch_size");
    st->num_examples = get_int(&r, fit, "num_examples");
    st->steps = get_int(&r, fit, "steps_per_epoch");
    st->seed = get_hex(&r, fit, "seed");
    st->shuffle = get_bool(&r, fit, "shuffle");
    st->validation_split = get_num(&r, fit, "validation_split");

    json_t *pos = field(&r, root, "position");
    st->pos.epoch = (int)get_int(&r, pos, "epoch");
    st->pos.step = get_int(&r, pos, "step");
    st->pos.seen = get_int(&r, pos, "seen");
    get_doubles(&r, pos, "sums", st->pos.sums, 1 + KC_MAX_METRICS);
    st->pos.epoch_lr = get_num(&r, pos, "epoch_lr");
    st->pos.micro_batch = (int)get_int(&r, pos, "micro_batch");
    json_t *rng = field(&r, pos, "rng");
    if (r.s == KC_STATUS_OK && (!json_is_array(rng) || json_array_size(rng) != 4))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'rng' is not a list of 4 numbers", path);
    for (size_t i = 0; r.s == KC_STATUS_OK && i < 4; i++)
        st->pos.rng.s[i] = hex_value(&r, json_array_get(rng, i), "rng");

    json_t *ck = field(&r, root, "checkpoint");
    st->best_only = get_bool(&r, ck, "save_best_only");
    st->every = get_int(&r, ck, "every_steps");
    st->keep = (int)get_int(&r, ck, "keep");
    snprintf(st->monitor, sizeof st->monitor, "%s", get_str(&r, ck, "monitor"));
    json_t *best = field(&r, ck, "best");
    st->has_best = json_is_number(best);
    st->best = st->has_best ? json_number_value(best) : NAN;

    json_t *h = field(&r, root, "history");
    if (r.s == KC_STATUS_OK && !json_is_array(h))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'history' is not a list", path);
    if (r.s == KC_STATUS_OK) {
        st->n_hist = (int)json_array_size(h);
        st->hist = kc__calloc((size_t)KC_MAX(st->n_hist, 1), sizeof *st->hist, "the history");
        if (!st->hist) r.s = KC_STATUS_OUT_OF_MEMORY;
    }
    for (int i = 0; r.s == KC_STATUS_OK && i < st->n_hist; i++) {
        json_t *e = json_array_get(h, (size_t)i);
        kc_epoch_logs *l = &st->hist[i];
        l->epoch = (int)get_int(&r, e, "epoch");
        l->steps = get_int(&r, e, "steps");
        l->loss = get_num(&r, e, "loss");
        get_doubles(&r, e, "metrics", l->metrics, KC_MAX_METRICS);
        l->has_val = get_bool(&r, e, "has_val");
        l->val_loss = get_num(&r, e, "val_loss");
        get_doubles(&r, e, "val_metrics", l->val_metrics, KC_MAX_METRICS);
        l->lr = get_num(&r, e, "lr");
        l->seconds = get_num(&r, e, "seconds");
        l->images_per_second = get_num(&r, e, "images_per_second");
        l->batch_size = (int)get_int(&r, e, "batch_size");
        l->micro_batch = (int)get_int(&r, e, "micro_batch");
        l->grad_accum = (int)get_int(&r, e, "grad_accum");
    }
    json_t *cbs = json_object_get(root, "callbacks");
    if (r.s == KC_STATUS_OK && cbs && !json_is_array(cbs))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": 'callbacks' is not a list", path);
    if (r.s == KC_STATUS_OK && json_array_size(cbs) > 0) {
        st->n_cbs = (int)json_array_size(cbs);
        st->cbs = kc__calloc((size_t)st->n_cbs, sizeof *st->cbs, "the callbacks' states");
        if (!st->cbs) r.s = KC_STATUS_OUT_OF_MEMORY;
    }
    for (int i = 0; r.s == KC_STATUS_OK && i < st->n_cbs; i++) {
        json_t *e = json_array_get(cbs, (size_t)i), *v = field(&r, e, "state");
        ckpt_callback *cb = &st->cbs[i];
        snprintf(cb->name, sizeof cb->name, "%s", get_str(&r, e, "name"));
        cb->n = json_is_array(v) ? (int)KC_MIN(json_array_size(v), (size_t)KC_CALLBACK_STATE_MAX) : -1;
        for (int k = 0; k < cb->n; k++) cb->v[k] = num_value(json_array_get(v, (size_t)k));
    }
    if (r.s == KC_STATUS_OK &&
        (st->pos.epoch < 0 || st->pos.step < 0 || st->batch_size < 1 || st->steps < 0 || st->num_examples < 0 ||
         st->iterations < 0 || st->pos.micro_batch < 1 || st->pos.micro_batch > st->batch_size ||
         st->pos.step > st->steps || !(st->lr_scale > 0)))
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": the position or sizes are out of range; the "
                       "checkpoint is damaged", path);
    if (r.s != KC_STATUS_OK) state_free(st);
    return r.s;
}

/* ---------------------------------------------------------------- restoring a model */

/* Weights, optimizer state and seeds of the checkpoint into m (compiled, same
 * architecture). Everything is read and checked before m changes. */
static kc_status restore_model(const ckpt_state *st, kc_model *m) {
    const char *path = st->path;
    uint64_t hash = 0;
    KC_TRY(config_hash(m, &hash));
    if (hash != st->config_hash) return different_model(path, m, st->layers);
    if (!m->compiled)
        return kc__fail(KC_STATUS_STATE, "model '%s' is not compiled; compile it with the checkpoint's optimizer (%s) "
                        "before resuming from '%s', or use kc_checkpoint_load", m->name, opt_name(st->opt_kind), path);
    int want = kc__optimizer_slots(st->opt_kind, st->momentum);
    int have = kc__optimizer_slots(m->opt.kind, m->opt.opts.momentum);
    if (m->opt.kind != st->opt_kind || want != have)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "'%s' was trained with optimizer %s%s but model '%s' is compiled with %s%s; compile it with "
                        "the checkpoint's optimizer to resume", path, opt_name(st->opt_kind),
                        st->momentum > 0 ? " (momentum)" : "", m->name, opt_name(m->opt.kind),
                        m->opt.opts.momentum > 0 ? " (momentum)" : "");
    if (st->n_layer_seeds != m->n_layers)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY " has %d layer seeds for %d layers; the checkpoint is "
                        "damaged", path, st->n_layer_seeds, m->n_layers);
    int64_t file = -1;
    KC_TRY(kc__keras_archive_open_weights(path, &file));
    hid_t f = (hid_t)file;
    float *slab0 = NULL, *slab1 = NULL; /* (n_trainable) each */
    int64_t iters = 0;
    kc_status s = read_optimizer(m, f, path, &slab0, &slab1, &iters);
    if (s == KC_STATUS_OK) {
        char label[4200];
        snprintf(label, sizeof label, "'%s': model.weights.h5", path);
        s = kc__keras3_weights_read(m, f, label);
    }
    H5Fclose(f);
    size_t bytes = (size_t)m->n_trainable * sizeof(float);
    if (s == KC_STATUS_OK && slab0 && bytes) s = m->be->to_device(m->be, m->slot0, slab0, bytes);
    if (s == KC_STATUS_OK && slab1 && bytes) s = m->be->to_device(m->be, m->slot1, slab1, bytes);
    free(slab0);
    free(slab1);
    if (s != KC_STATUS_OK) return s;
    m->opt.iterations = iters;
    m->opt.lr_scale = st->lr_scale;
    m->seed = st->model_seed;
    kc__rng_seed(&m->rng, m->seed);
    for (int i = 0; i < m->n_layers; i++) m->layers[i]->seed = st->layer_seeds[i];
    return KC_STATUS_OK;
}

/* kc_compile with the checkpoint's compile options. */
static kc_status compile_from(const ckpt_state *st, kc_model *m) {
    reader r = {st->path, KC_STATUS_OK};
    json_t *c = st->compile, *o = field(&r, c, "optimizer");
    kc_compile_opts co = {0};
    kc_optimizer_opts *p = &co.optimizer;
    p->name = get_str(&r, o, "name");
    p->learning_rate = get_num(&r, o, "learning_rate");
    p->momentum = get_num(&r, o, "momentum");
    p->nesterov = (int)get_int(&r, o, "nesterov");
    p->beta_1 = get_num(&r, o, "beta_1");
    p->beta_2 = get_num(&r, o, "beta_2");
    p->epsilon = get_num(&r, o, "epsilon");
    p->weight_decay = get_num(&r, o, "weight_decay");
    p->rho = get_num(&r, o, "rho");
    p->clipnorm = get_num(&r, o, "clipnorm");
    json_t *gc = json_object_get(o, "global_clipnorm"); /* absent from checkpoints of kerac 0.1 */
    p->global_clipnorm = gc ? get_num(&r, o, "global_clipnorm") : 0;
    /* the optimizer keeps the schedule's name pointer: give it one that lives on */
    static const char *const schedules[] = {"exponential_decay", "cosine_decay", "piecewise_constant"};
    json_t *sch = field(&r, o, "schedule");
    p->schedule = NULL;
    for (size_t i = 0; json_is_string(sch) && i < KC_ARRAY_LEN(schedules); i++)
        if (strcmp(json_string_value(sch), schedules[i]) == 0) p->schedule = schedules[i];
    if (json_is_string(sch) && !p->schedule && r.s == KC_STATUS_OK)
        r.s = kc__fail(KC_STATUS_BAD_FILE, "'%s': " STATE_ENTRY ": unknown learning-rate schedule '%s'", st->path,
                       json_string_value(sch));
    p->decay_steps = get_int(&r, o, "decay_steps");
    p->decay_rate = get_num(&r, o, "decay_rate");
    p->staircase = (int)get_int(&r, o, "staircase");
    p->alpha = get_num(&r, o, "alpha");
    json_t *b = field(&r, o, "boundaries"), *v = field(&r, o, "values");
    int nb = (int)json_array_size(b);
    int64_t *bounds = nb ? calloc((size_t)nb, sizeof *bounds) : NULL;
    double *values = nb ? calloc((size_t)nb + 1, sizeof *values) : NULL;
    if (nb && (!bounds || !values) && r.s == KC_STATUS_OK)
        r.s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory reading '%s'", st->path);
    for (int i = 0; r.s == KC_STATUS_OK && i < nb; i++)
        bounds[i] = (int64_t)json_integer_value(json_array_get(b, (size_t)i));
    for (int i = 0; r.s == KC_STATUS_OK && nb && i <= nb; i++) values[i] = num_value(json_array_get(v, (size_t)i));
    p->num_boundaries = nb;
    p->boundaries = bounds;
    p->values = values;
    co.loss = get_str(&r, c, "loss");
    co.from_logits = get_bool(&r, c, "from_logits") ? KC_TRUE : KC_DEFAULT;
    co.top_k = (int)get_int(&r, c, "top_k");
    json_t *metrics = field(&r, c, "metrics");
    for (size_t i = 0; json_is_array(metrics) && i < json_array_size(metrics) && i < KC_MAX_METRICS; i++)
        co.metrics[i] = json_string_value(json_array_get(metrics, i));
    /* NaN stands for a missing number: the optimizer's default */
    double *nums[] = {&p->learning_rate, &p->momentum, &p->beta_1, &p->beta_2, &p->epsilon,
                      &p->weight_decay, &p->rho, &p->clipnorm, &p->global_clipnorm, &p->decay_rate, &p->alpha};
    for (size_t i = 0; i < KC_ARRAY_LEN(nums); i++)
        if (isnan(*nums[i])) *nums[i] = 0;
    kc_status s = r.s;
    if (s == KC_STATUS_OK) {
        s = kc_compile(m, &co);
        if (s != KC_STATUS_OK) kc__wrap(s, "compiling the model of '%s': ", st->path);
    }
    free(bounds);
    free(values);
    return s;
}

kc_status kc_checkpoint_load(const char *path, kc_model **out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_load: the output pointer is NULL");
    *out = NULL;
    char *file = NULL;
    KC_TRY(resolve(path, &file));
    ckpt_state st;
    kc_status s = state_read(file, &st);
    kc_model *m = NULL;
    kc__h5_silence q;
    kc__h5_silence_begin(&q);
    if (s == KC_STATUS_OK) s = kc_model_load(file, &m);
    if (s == KC_STATUS_OK) s = compile_from(&st, m);
    if (s == KC_STATUS_OK) s = restore_model(&st, m);
    kc__h5_silence_end(&q);
    if (st.path) state_free(&st); /* state_read clears it when it fails */
    free(file);
    if (s != KC_STATUS_OK) {
        kc_model_destroy(m);
        return s;
    }
    *out = m;
    return KC_STATUS_OK;
}

kc_status kc_checkpoint_read_info(const char *path, kc_checkpoint_info *out) {
    if (!out) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "kc_checkpoint_read_info: the output is NULL");
    memset(out, 0, sizeof *out);
    char *file = NULL;
    KC_TRY(resolve(path, &file));
    ckpt_state st;
    kc_status s = state_read(file, &st);
    free(file);
    if (s != KC_STATUS_OK) return s;
    out->epoch = st.pos.epoch;
    out->step = st.pos.step;
    out->iterations = st.iterations;
    out->epochs = st.epochs;
    out->batch_size = st.batch_size;
    out->num_examples = st.num_examples;
    snprintf(out->optimizer, sizeof out->optimizer, "%s", opt_name(st.opt_kind));
    out->checkpoint_every_steps = st.every;
    out->keep = st.keep;
    out->save_best_only = st.best_only ? KC_TRUE : KC_FALSE;
    snprintf(out->monitor, sizeof out->monitor, "%s", st.monitor);
    state_free(&st);
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- kc_fit's hooks */

static kc_status mismatch(const char *path, const char *what, double ckpt, double asked, const char *hint) {
    return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                    "resuming from '%s': it was trained with %s %g but fit asks for %g; %s", path, what, ckpt, asked,
                    hint);
}

kc_status kc__ckpt_fit_opts(const kc_model *m, kc_fit_opts *o) {
    (void)m;
    if (!o->resume_from) return KC_STATUS_OK;
    char *file = NULL;
    KC_TRY(resolve(o->resume_from, &file));
    ckpt_state st;
    kc_status s = state_read(file, &st);
    free(file);
    if (s != KC_STATUS_OK) return s;
    const char *p = st.path;
    const char *leave = "leave it unset to take the checkpoint's, or start a new run";
    if (o->batch_size == 0 || o->batch_size == KC_BATCH_SIZE_AUTO) o->batch_size = st.batch_size;
    else if (o->batch_size != st.batch_size) s = mismatch(p, "batch_size", st.batch_size, o->batch_size, leave);
    if (s == KC_STATUS_OK) {
        if (o->seed == 0) o->seed = st.seed;
        else if (o->seed != st.seed)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained with seed %llu but fit asks "
                         "for seed %llu; %s", p, (unsigned long long)st.seed, (unsigned long long)o->seed, leave);
    }
    if (s == KC_STATUS_OK) {
        if (o->shuffle == KC_DEFAULT) o->shuffle = st.shuffle ? KC_TRUE : KC_FALSE;
        else if ((o->shuffle > 0) != st.shuffle)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained with shuffle %s but fit asks "
                         "for shuffle %s; %s", p, st.shuffle ? "on" : "off", st.shuffle ? "off" : "on", leave);
    }
    if (s == KC_STATUS_OK && !o->validation_data) {
        if (o->validation_split == 0) o->validation_split = st.validation_split;
        else if (o->validation_split != st.validation_split)
            s = mismatch(p, "validation_split", st.validation_split, o->validation_split, leave);
    }
    if (s == KC_STATUS_OK) {
        if (o->steps_per_epoch == 0) o->steps_per_epoch = st.steps;
        else if (o->steps_per_epoch != st.steps)
            s = mismatch(p, "steps_per_epoch", (double)st.steps, (double)o->steps_per_epoch, leave);
    }
    if (s == KC_STATUS_OK && o->epochs == 0) o->epochs = st.epochs;
    state_free(&st);
    return s;
}

static bool known_monitor(const kc_model *m, const char *name, bool val_ok) {
    if (strncmp(name, "val_", 4) == 0) {
        if (!val_ok) return false;
        name += 4;
    }
    if (strcmp(name, "loss") == 0) return true;
    for (int i = 0; i < m->n_metrics; i++)
        if (strcmp(name, m->metrics[i].name) == 0) return true;
    return false;
}

static kc_status check_options(kc__ckpt *c, const kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g) {
    if (o->checkpoint_every_steps < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: checkpoint_every_steps = %lld must be >= 0 (0: every epoch)",
                        (long long)o->checkpoint_every_steps);
    if (o->keep < 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: keep = %d must be >= 1 (0: the default 1)", o->keep);
    c->every = o->checkpoint_every_steps;
    c->keep = o->keep ? o->keep : 1;
    c->best_only = o->save_best_only > 0;
    const char *mon = o->monitor && *o->monitor ? o->monitor : "val_loss";
    if (strlen(mon) >= sizeof c->monitor)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: monitor '%.40s...' is too long", mon);
    snprintf(c->monitor, sizeof c->monitor, "%s", mon);
    c->max_mode = monitor_is_max(mon);
    c->best = c->max_mode ? -INFINITY : INFINITY;
    if (c->best_only && !o->checkpoint_dir)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: save_best_only needs a checkpoint_dir");
    if (!c->best_only) return KC_STATUS_OK;
    if (c->every > 0 && strncmp(mon, "val_", 4) == 0)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "fit: monitor '%s' is only known at the end of an epoch, but checkpoints are written every "
                        "%lld steps; monitor 'loss' or a metric, or checkpoint every epoch "
                        "(checkpoint_every_steps = 0)",
                        mon, (long long)c->every);
    if (!known_monitor(m, mon, g->has_val)) {
        char names[400] = "loss";
        size_t used = strlen(names);
        for (int i = 0; i < m->n_metrics && used < sizeof names; i++)
            used += (size_t)snprintf(names + used, sizeof names - used, ", %s", m->metrics[i].name);
        if (g->has_val && c->every == 0 && used < sizeof names)
            snprintf(names + used, sizeof names - used, " and val_ of each");
        bool val_missing = strncmp(mon, "val_", 4) == 0 && !g->has_val;
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "fit: monitor '%s' is not among the logs of model '%s' (%s)%s", mon,
                        m->name, names, val_missing ? "; val_ logs need validation data or a split" : "");
    }
    return KC_STATUS_OK;
}

/* Check that the checkpoint's folder takes files: make it, write and remove a probe. */
static kc_status probe_dir(const char *dir) {
    KC_TRY(make_dirs(dir));
    char name[64];
    snprintf(name, sizeof name, PREFIX "probe-%ld.tmp", (long)getpid());
    char *p = join(dir, name);
    if (!p) return KC_STATUS_OUT_OF_MEMORY;
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    int err = fd < 0 ? errno : 0;
    if (fd >= 0) close(fd);
    unlink(p);
    free(p);
    if (err)
        return kc__fail(KC_STATUS_IO, "checkpoint folder '%s' is not writable: %s; pick a folder you can write to", dir,
                        strerror(err));
    return KC_STATUS_OK;
}

kc_status kc__ckpt_open(kc_model *m, const kc_fit_opts *o, const kc__fit_geom *g, kc_rng *rng, int64_t *order,
                        kc__ckpt **out) {
    *out = NULL;
    if (!o->checkpoint_dir && !o->resume_from) return KC_STATUS_OK;
    kc__ckpt *c = kc__calloc(1, sizeof *c, "checkpoint state");
    if (!c) return KC_STATUS_OUT_OF_MEMORY;
    c->lock_fd = -1;
    c->saved_at = -1;
    c->geom = *g;
    c->cbs = o->callbacks;
    c->n_cbs = o->num_callbacks;
    kc_status s = check_options(c, m, o, g);
    if (s == KC_STATUS_OK && o->checkpoint_dir) {
        c->dir = kc__strdup(o->checkpoint_dir);
        s = c->dir ? probe_dir(c->dir) : KC_STATUS_OUT_OF_MEMORY;
        if (s == KC_STATUS_OK) s = kc__dir_lock(c->dir, &c->lock_fd);
    }
    if (s == KC_STATUS_OK && o->resume_from) {
        char *file = NULL;
        ckpt_state st = {0};
        s = resolve(o->resume_from, &file);
        if (s == KC_STATUS_OK) s = state_read(file, &st);
        free(file);
        const char *p = st.path;
        if (s == KC_STATUS_OK && st.num_examples != g->num_examples)
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': it was trained on %lld examples but the "
                         "training data has %lld; resume with the same data and validation split", p,
                         (long long)st.num_examples, (long long)g->num_examples);
        if (s == KC_STATUS_OK && (st.batch_size != g->batch_size || st.steps != g->steps || st.seed != g->seed ||
                                  st.shuffle != g->shuffle))
            s = kc__fail(KC_STATUS_INVALID_ARGUMENT, "resuming from '%s': batch size %d, %lld steps per epoch, seed "
                         "%llu and shuffle %s there; fit has %d, %lld, %llu and %s", p, st.batch_size,
                         (long long)st.steps, (unsigned long long)st.seed, st.shuffle ? "on" : "off", g->batch_size,
                         (long long)g->steps, (unsigned long long)g->seed, g->shuffle ? "on" : "off");
        if (s == KC_STATUS_OK) {
            kc__h5_silence q;
            kc__h5_silence_begin(&q);
            s = restore_model(&st, m);
            kc__h5_silence_end(&q);
        }
        /* the data order of the finished epochs, replayed from the seed (as fit shuffles) */
        if (s == KC_STATUS_OK) {
            for (int e = 0; e < st.pos.epoch && g->shuffle; e++) kc__shuffle_i64(rng, order, g->num_examples);
            if (memcmp(rng->s, st.pos.rng.s, sizeof rng->s) != 0)
                s = kc__fail(KC_STATUS_BAD_FILE, "'%s': the shuffle order of epoch %d cannot be rebuilt from seed %llu "
                             "(the random generator's state differs); the checkpoint is damaged or from another kerac",
                             p, st.pos.epoch + 1, (unsigned long long)g->seed);
        }
        if (s == KC_STATUS_OK) {
            c->resumed = true;
            c->pos = st.pos;
            c->hist = st.hist;
            c->n_hist = st.n_hist;
            st.hist = NULL;
            c->saved_cbs = st.cbs;
            c->n_saved_cbs = st.n_cbs;
            st.cbs = NULL;
            if (c->best_only && st.best_only && st.has_best && strcmp(st.monitor, c->monitor) == 0) {
                c->best = st.best;
                c->has_best = true;
            }
        }
        if (st.path) state_free(&st);
    }
    if (s != KC_STATUS_OK) {
        kc__ckpt_close(c);
        return s;
    }
    *out = c;
    return KC_STATUS_OK;
}

const kc__fit_pos *kc__ckpt_resume_pos(const kc__ckpt *c) { return c && c->resumed ? &c->pos : NULL; }

int kc__ckpt_history(const kc__ckpt *c, const kc_epoch_logs **out) {
    *out = c && c->resumed ? c->hist : NULL;
    return c && c->resumed ? c->n_hist : 0;
}

void kc__ckpt_restore_callbacks(kc__ckpt *c, kc_model *m) {
    if (!c || !c->resumed) return;
    char lost[160] = ""; /* saved states that find no callback to take them */
    for (int i = 0; i < c->n_saved_cbs; i++) {
        const ckpt_callback *s = &c->saved_cbs[i];
        if (s->n < 0) continue; /* that callback kept no state */
        kc_callback *cb = i < c->n_cbs ? c->cbs[i] : NULL;
        if (cb && cb->set_state && strcmp(s->name, cb->name ? cb->name : "") == 0) {
            cb->set_state(m, cb->user, s->v, s->n);
            continue;
        }
        size_t n = strlen(lost);
        snprintf(lost + n, sizeof lost - n, "%s%s", n ? ", " : "", s->name[0] ? s->name : "(unnamed)");
    }
    if (lost[0])
        kc__log_always(KC_LOG_WARNING,
                       "resuming: the checkpoint holds the state of %s at the same place in the callback list, but "
                       "this run has no such callback there; it starts afresh (pass the same callbacks in the same "
                       "order to keep it)", lost);
}

void kc__ckpt_close(kc__ckpt *c) {
    if (!c) return;
    kc__dir_unlock(c->lock_fd);
    free(c->dir);
    free(c->saved_cbs);
    free(c->hist);
    free(c);
}

/* A checkpoint not written for want of room (write_error.c said what and where): say what
 * is left to resume from. */
static void storage_failed(const char *dir, const char *previous) {
    char msg[700];
    snprintf(msg, sizeof msg, "%s", kc_last_error());
    char *rest = strstr(msg, "; ");
    if (rest) *rest = '\0';
    if (previous) kc__fail(KC_STATUS_STORAGE, "%s; the previous checkpoint '%s/%s' is intact", msg, dir, previous);
    else kc__fail(KC_STATUS_STORAGE, "%s; there is no earlier checkpoint", msg);
}

/* Write a checkpoint for position p, then delete the ones beyond keep. */
static kc_status save(kc__ckpt *c, kc_model *m, const kc__fit_pos *p, const kc_epoch_logs *hist, int n_hist) {
    ckpt_file *old = NULL;
    int n_old = 0;
    KC_TRY(list_dir(c->dir, true, &old, &n_old));
    long long seq = n_old ? old[0].seq + 1 : 1;
    char name[128];
    snprintf(name, sizeof name, PREFIX "%06lld-e%04d-s%06lld" SUFFIX, seq, p->epoch, (long long)p->step);
    char *path = join(c->dir, name), *state = NULL, *cc = NULL;
    kc_status s = path ? state_json(c, m, p, hist, n_hist, &state) : KC_STATUS_OUT_OF_MEMORY;
    if (s == KC_STATUS_OK && !(cc = keras_compile_config(m)))
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory writing checkpoint '%s'", path);
    if (s == KC_STATUS_OK) {
        const char *names[1] = {STATE_ENTRY}, *data[1] = {state};
        size_t lens[1] = {strlen(state)};
        kc__archive_extras x = {.compile_config = cc, .write_h5 = write_optimizer,
                                .h5_bytes = (size_t)KC_MAX(m->n_trainable, 1) * 2 * sizeof(float) + 65536,
                                .n_entries = 1, .names = names, .data = data, .lens = lens};
        kc__h5_silence q;
        kc__h5_silence_begin(&q);
        s = kc__keras_archive_save_ex(m, path, &x);
        kc__h5_silence_end(&q);
        if (s == KC_STATUS_STORAGE) storage_failed(c->dir, n_old ? old[0].name : NULL);
        else if (s != KC_STATUS_OK) kc__wrap(s, "checkpoint: ");
    }
    /* (kc__write_file_atomic fsynced the folder after its rename) the new one is in place:
     * now the oldest beyond keep may go */
    bool removed = false;
    for (int i = c->keep - 1; s == KC_STATUS_OK && i < n_old; i++) {
        char *q = join(c->dir, old[i].name);
        if (q && unlink(q) == 0) removed = true;
        free(q);
    }
    if (s == KC_STATUS_OK && removed) s = sync_dir(c->dir);
    if (s == KC_STATUS_OK) kc__log(KC_LOG_INFO, "checkpoint '%s' written", path);
    if (s == KC_STATUS_OK) c->saved_at = (int64_t)p->epoch * c->geom.steps + p->step;
    free(old);
    free(path);
    free(state);
    free(cc);
    return s;
}

static bool improved(kc__ckpt *c, double v) {
    if (isnan(v)) return false;
    return c->max_mode ? v > c->best : v < c->best;
}

static double monitor_value(const kc__ckpt *c, const kc_model *m, const kc_batch_logs *bl, const kc_epoch_logs *el) {
    const char *name = c->monitor;
    bool val = strncmp(name, "val_", 4) == 0;
    if (val) {
        if (!el || !el->has_val) return NAN;
        name += 4;
    }
    if (strcmp(name, "loss") == 0) return val ? el->val_loss : el ? el->loss : bl->loss;
    for (int i = 0; i < m->n_metrics; i++)
        if (strcmp(name, m->metrics[i].name) == 0)
            return val ? el->val_metrics[i] : el ? el->metrics[i] : bl->metrics[i];
    return NAN;
}

kc_status kc__ckpt_after_step(kc__ckpt *c, kc_model *m, const kc__fit_pos *pos, const kc_batch_logs *bl,
                              const kc_epoch_logs *hist, int n_hist) {
    if (!c || !c->dir || c->every <= 0) return KC_STATUS_OK;
    int64_t global = (int64_t)pos->epoch * c->geom.steps + pos->step;
    if (global % c->every != 0) return KC_STATUS_OK;
    if (c->best_only) {
        double v = monitor_value(c, m, bl, NULL);
        if (!improved(c, v)) return KC_STATUS_OK;
        c->best = v;
        c->has_best = true;
    }
    return save(c, m, pos, hist, n_hist);
}

kc_status kc__ckpt_after_epoch(kc__ckpt *c, kc_model *m, const kc__fit_pos *pos, bool complete, bool stopping,
                               const kc_epoch_logs *el, const kc_epoch_logs *hist, int n_hist) {
    if (!c || !c->dir) return KC_STATUS_OK;
    /* training stops (Ctrl-C, SIGTERM, a callback): a checkpoint where it stopped, in either
     * mode, unless that very step was just written */
    bool written = c->saved_at == (int64_t)pos->epoch * c->geom.steps + pos->step;
    if (!complete || (stopping && c->every > 0))
        return c->best_only || written ? KC_STATUS_OK : save(c, m, pos, hist, n_hist);
    if (c->every > 0) return KC_STATUS_OK;
    if (c->best_only) {
        double v = monitor_value(c, m, NULL, el);
        if (!improved(c, v)) return KC_STATUS_OK;
        c->best = v;
        c->has_best = true;
    }
    return save(c, m, pos, hist, n_hist);
}
