/* args.c — shared helpers of the kerac tool: option parsing, validated numbers, the
 * status -> exit code mapping, shape text and the data-vs-model checks. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* ---------------------------------------------------------------- exit codes */

int cli_exit_code(kc_status s, cli_phase phase) {
    switch (s) {
    case KC_STATUS_OK:
        return CLI_EXIT_OK;
    case KC_STATUS_BAD_FILE:
    case KC_STATUS_IO:
        return CLI_EXIT_INPUT;
    case KC_STATUS_UNSUPPORTED:
    case KC_STATUS_SHAPE:
    case KC_STATUS_INVALID_ARGUMENT:
        /* from loading a model or a dataset these mean the file is unusable */
        return phase == CLI_PHASE_LOAD ? CLI_EXIT_INPUT : CLI_EXIT_RUNTIME;
    default:
        return CLI_EXIT_RUNTIME;
    }
}

int cli_fail(kc_status s, cli_phase phase) {
    const char *msg = kc_last_error();
    if (msg && msg[0])
        fprintf(stderr, "kerac: %s\n", msg);
    else
        fprintf(stderr, "kerac: failed (%s)\n", kc_status_name(s));
    return cli_exit_code(s, phase);
}

int cli_error(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("kerac: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return code;
}

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "kerac %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "; see 'kerac %s --help'\n", cmd);
    va_end(ap);
    return CLI_EXIT_USAGE;
}

/* ---------------------------------------------------------------- numbers */

static bool all_space(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return *s == '\0';
}

int cli_parse_long(const char *text, long min, long max, long *out) {
    if (!text || !text[0] || text[0] == ' ') return -1;
    errno = 0;
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (errno || end == text || !all_space(end)) return -1;
    if (v < min || v > max) return -1;
    *out = v;
    return 0;
}

int cli_parse_u64(const char *text, uint64_t *out) {
    if (!text || !text[0] || text[0] == '-' || text[0] == '+' || text[0] == ' ') return -1;
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || !all_space(end)) return -1;
    *out = (uint64_t)v;
    return 0;
}

int cli_parse_double(const char *text, double min, double max, bool min_exclusive, double *out) {
    if (!text || !text[0] || text[0] == ' ') return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(text, &end);
    if (errno || end == text || !all_space(end) || !isfinite(v)) return -1;
    if (v < min || v > max || (min_exclusive && v == min)) return -1;
    *out = v;
    return 0;
}

int cli_split_list(const char *text, char *buf, size_t n, const char **out, int max) {
    size_t len = strlen(text);
    if (len + 1 > n) return -1;
    memcpy(buf, text, len + 1);
    int count = 0;
    char *p = buf;
    for (;;) {
        char *comma = strchr(p, ',');
        if (comma) *comma = '\0';
        if (!*p || count == max) return -1;
        out[count++] = p;
        if (!comma) break;
        p = comma + 1;
    }
    return count;
}

/* ---------------------------------------------------------------- options */

void cli_args_init(cli_args *a, int argc, char **argv, const char *cmd) {
    memset(a, 0, sizeof *a);
    a->argc = argc;
    a->argv = argv;
    a->i = 0; /* argv[0] is the subcommand itself */
    a->cmd = cmd;
}

bool cli_args_next(cli_args *a) {
    for (;;) {
        a->i++;
        if (a->i >= a->argc) return false;
        a->arg = a->argv[a->i];
        a->inline_val = NULL;
        a->name_len = 0;
        if (!a->after_dashdash && strcmp(a->arg, "--") == 0) {
            a->after_dashdash = true;
            continue;
        }
        /* "-" alone and everything after "--" are positional */
        a->positional = a->after_dashdash || a->arg[0] != '-' || a->arg[1] == '\0';
        if (!a->positional) {
            const char *eq = strchr(a->arg, '=');
            if (eq && a->arg[1] == '-') {
                a->inline_val = eq + 1;
                a->name_len = (size_t)(eq - a->arg);
            } else {
                a->name_len = strlen(a->arg);
            }
        }
        return true;
    }
}

bool cli_is(const cli_args *a, const char *name) {
    return !a->positional && strlen(name) == a->name_len && strncmp(a->arg, name, a->name_len) == 0;
}

bool cli_is_help(const cli_args *a) {
    return !a->positional && (strcmp(a->arg, "--help") == 0 || strcmp(a->arg, "-h") == 0);
}

static void opt_name(const cli_args *a, char *buf, size_t n) {
    size_t len = a->name_len < n - 1 ? a->name_len : n - 1;
    memcpy(buf, a->arg, len);
    buf[len] = '\0';
}

int cli_value(cli_args *a, const char **out) {
    char name[64];
    opt_name(a, name, sizeof name);
    if (a->inline_val) {
        if (!a->inline_val[0]) return cli_usage_error(a->cmd, "option '%s' needs a value", name);
        *out = a->inline_val;
        return 0;
    }
    if (a->i + 1 >= a->argc) return cli_usage_error(a->cmd, "option '%s' needs a value", name);
    const char *v = a->argv[a->i + 1];
    if (!v[0] || (v[0] == '-' && v[1] == '-'))
        return cli_usage_error(a->cmd, "option '%s' needs a value", name);
    a->i++;
    *out = v;
    return 0;
}

int cli_int_value(cli_args *a, long min, long max, long *out) {
    char name[64];
    opt_name(a, name, sizeof name);
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (cli_parse_long(v, min, max, out))
        return cli_usage_error(a->cmd, "option '%s' needs a whole number from %ld to %ld, got '%s'",
                               name, min, max, v);
    return 0;
}

int cli_u64_value(cli_args *a, uint64_t *out) {
    char name[64];
    opt_name(a, name, sizeof name);
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (cli_parse_u64(v, out))
        return cli_usage_error(a->cmd, "option '%s' needs a non-negative whole number, got '%s'", name,
                               v);
    return 0;
}

int cli_double_value(cli_args *a, double min, double max, bool min_exclusive, double *out) {
    char name[64];
    opt_name(a, name, sizeof name);
    const char *v;
    int rc = cli_value(a, &v);
    if (rc) return rc;
    if (cli_parse_double(v, min, max, min_exclusive, out))
        return cli_usage_error(a->cmd, "option '%s' needs a number %s %g and <= %g, got '%s'", name,
                               min_exclusive ? ">" : ">=", min, max, v);
    return 0;
}

int cli_flag(cli_args *a) {
    char name[64];
    opt_name(a, name, sizeof name);
    if (a->inline_val) return cli_usage_error(a->cmd, "option '%s' takes no value", name);
    return 0;
}

int cli_unknown(const cli_args *a) {
    if (a->positional) return cli_usage_error(a->cmd, "unexpected argument '%s'", a->arg);
    char name[64];
    opt_name(a, name, sizeof name);
    return cli_usage_error(a->cmd, "unknown option '%s'", name);
}

/* ---------------------------------------------------------------- shapes */

const char *cli_shape_str(const kc_shape *s, bool with_batch, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf + len, n - len, "(%s", with_batch ? "None" : "");
    for (int i = 0; i < s->rank && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%d", (i || with_batch) ? ", " : "", s->dim[i]);
    if (len < n) len += (size_t)snprintf(buf + len, n - len, "%s)", (!with_batch && s->rank == 1) ? "," : "");
    return buf;
}

int64_t cli_shape_size(const kc_shape *s) {
    int64_t v = 1;
    for (int i = 0; i < s->rank; i++) v *= s->dim[i];
    return v;
}

static kc_shape drop_trailing_one(kc_shape s) {
    if (s.rank > 1 && s.dim[s.rank - 1] == 1) s.rank--;
    return s;
}

bool cli_shape_compatible(const kc_shape *a, const kc_shape *b) {
    kc_shape x = drop_trailing_one(*a), y = drop_trailing_one(*b);
    if (x.rank != y.rank) return false;
    for (int i = 0; i < x.rank; i++)
        if (x.dim[i] != y.dim[i]) return false;
    return true;
}

int cli_check_data_fits(kc_model *m, const kc_dataset *d, const char *spec, const char *loss) {
    kc_shape in, out, ds = kc_dataset_shape(d);
    kc_status s = kc_model_input_shape(m, &in);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    char a[96], b[96];
    if (!cli_shape_compatible(&in, &ds))
        return cli_error(CLI_EXIT_INPUT,
                         "model '%s' expects input shape %s but the data '%s' has examples of shape %s; "
                         "use a model built for this data (or other data)",
                         kc_model_name(m), cli_shape_str(&in, false, a, sizeof a), spec,
                         cli_shape_str(&ds, false, b, sizeof b));
    s = kc_model_output_shape(m, &out);
    if (s) return cli_fail(s, CLI_PHASE_LOAD);
    if (!loss) loss = "sparse_categorical_crossentropy";
    kc_shape labels = kc_dataset_target_shape(d); /* label tensors: kc_fit / kc_evaluate check them */
    if (strstr(loss, "crossentropy") && out.rank == 1 && labels.rank == 0) {
        int classes = out.dim[0] == 1 ? 2 : out.dim[0];
        int need = kc_dataset_num_classes(d);
        if (need > classes)
            return cli_error(CLI_EXIT_INPUT,
                             "the data '%s' has class labels up to %d but model '%s' has %d output%s "
                             "(classes 0..%d); labels out of range: give the last layer %d units or fix "
                             "the labels",
                             spec, need - 1, kc_model_name(m), out.dim[0], out.dim[0] == 1 ? "" : "s",
                             classes - 1, need);
    }
    return 0;
}

/* ---------------------------------------------------------------- specs */

bool cli_ends_with(const char *s, const char *suffix) {
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && strcmp(s + ls - lx, suffix) == 0;
}

const char *cli_test_spec(const char *spec, char *buf, size_t n) {
    static const char *const with_test[] = {"fashion-mnist", "mnist", "cifar10"};
    bool known = false;
    for (size_t i = 0; i < sizeof with_test / sizeof with_test[0]; i++) {
        size_t l = strlen(with_test[i]);
        if (strncmp(spec, with_test[i], l) == 0 && (spec[l] == '\0' || spec[l] == ':')) known = true;
    }
    if (!known || cli_ends_with(spec, ":test")) return NULL;
    size_t len = strlen(spec);
    if (cli_ends_with(spec, ":train")) len -= strlen(":train");
    if (len + sizeof ":test" > n) return NULL;
    memcpy(buf, spec, len);
    memcpy(buf + len, ":test", sizeof ":test");
    return buf;
}

const char *cli_commas(int64_t v, char *buf, size_t n) {
    char digits[32];
    bool neg = v < 0;
    uint64_t u = neg ? (uint64_t)(-(v + 1)) + 1 : (uint64_t)v;
    int nd = snprintf(digits, sizeof digits, "%llu", (unsigned long long)u);
    size_t len = 0;
    if (neg && len + 1 < n) buf[len++] = '-';
    for (int i = 0; i < nd && len + 1 < n; i++) {
        if (i > 0 && (nd - i) % 3 == 0 && len + 1 < n) buf[len++] = ',';
        if (len + 1 < n) buf[len++] = digits[i];
    }
    buf[len] = '\0';
    return buf;
}

int cli_help_or_positional(cli_args *a, const char *usage, const char **slot, bool *help) {
    if (cli_is_help(a)) {
        fputs(usage, stdout);
        *help = true;
        return 0;
    }
    if (!a->positional) return -1;
    if (*slot) return cli_unknown(a);
    *slot = a->arg;
    return 0;
}
