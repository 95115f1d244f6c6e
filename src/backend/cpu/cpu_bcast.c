/* cpu_bcast.c — broadcasting binary operations (Multiply, Subtract, Average, Maximum,
 * Minimum, Add, PReLU, operation nodes) and tensor-scalar operations.
 *
 * The index space is collapsed first (axes of size 1 dropped, neighbouring axes merged
 * where both operands step through them alike), so the common cases become one or two
 * axes: same shapes are one contiguous run; squeeze-and-excite's (N,1,1,C) x (N,H,W,C)
 * is (N, HW, C) with a's strides (C, 0, 1). The last axis is the inner row, run by loops
 * specialised on whether each operand steps along it (vectorisable); the broadcast
 * operand is read in place. Backward reduces over a's broadcast axes: rows that write the
 * same part of da stay in one thread (parallel over a's outermost own axis only). */
#include <string.h>

#include "cpu.h"

typedef struct bc {
    int rank;
    int64_t dims[KC_BCAST_MAX_RANK], sa[KC_BCAST_MAX_RANK], sb[KC_BCAST_MAX_RANK];
} bc;

static kc_status bcast_check(const char *what, kc_binop op, const kc_bcast_desc *d) {
    if ((int)op < 0 || op >= KC_BIN_COUNT)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: unknown operation %d", what, (int)op);
    if (!d || d->rank < 1 || d->rank > KC_BCAST_MAX_RANK)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: rank %d is not in 1..%d", what, d ? d->rank : -1,
                        KC_BCAST_MAX_RANK);
    for (int i = 0; i < d->rank; i++)
        if (d->dims[i] < 0 || d->sa[i] < 0 || d->sb[i] < 0)
            return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu %s: negative size or stride on axis %d", what, i);
    return KC_STATUS_OK;
}

/* Drop size-1 axes, merge neighbours both operands step through contiguously (or not at
 * all); always at least one axis. */
static bc collapse(const kc_bcast_desc *d) {
    bc c = {0};
    for (int i = 0; i < d->rank; i++) {
        if (d->dims[i] == 1) continue;
        int k = c.rank - 1;
        if (k >= 0 && c.sa[k] == d->sa[i] * d->dims[i] && c.sb[k] == d->sb[i] * d->dims[i]) {
            c.dims[k] *= d->dims[i];
            c.sa[k] = d->sa[i], c.sb[k] = d->sb[i];
            continue;
        }
        c.dims[c.rank] = d->dims[i], c.sa[c.rank] = d->sa[i], c.sb[c.rank] = d->sb[i];
        c.rank++;
    }
    if (c.rank == 0) c.rank = 1, c.dims[0] = 1, c.sa[0] = 1, c.sb[0] = 1;
    /* a lone element steps by 1 along a size-1 axis: normalise the inner strides to 0/1 */
    int k = c.rank - 1;
    if (c.dims[k] == 1) c.sa[k] = c.sa[k] != 0, c.sb[k] = c.sb[k] != 0;
    return c;
}

static int64_t bc_rows(const bc *c) {
    int64_t r = 1;
    for (int i = 0; i < c->rank - 1; i++) r *= c->dims[i];
    return r;
}

/* Walks the rows (all axes but the last) in order, keeping the offsets of a and b: one
 * division per axis when it starts, additions after. */
typedef struct odo {
    int64_t idx[KC_BCAST_MAX_RANK];
    int64_t oa, ob;
} odo;

static void odo_start(const bc *c, int64_t r, odo *o) {
    o->oa = o->ob = 0;
    for (int i = c->rank - 2; i >= 0; i--) {
        o->idx[i] = r % c->dims[i];
        r /= c->dims[i];
        o->oa += o->idx[i] * c->sa[i], o->ob += o->idx[i] * c->sb[i];
    }
}

static void odo_next(const bc *c, odo *o) {
    for (int i = c->rank - 2; i >= 0; i--) {
        o->oa += c->sa[i], o->ob += c->sb[i];
        if (++o->idx[i] < c->dims[i]) return;
        o->oa -= c->sa[i] * c->dims[i], o->ob -= c->sb[i] * c->dims[i];
        o->idx[i] = 0;
    }
}

/* The four stride cases of one inner row; BODY uses av, bv and j. */
#define ROW4(sa, sb, L, BODY)                                                                                     \
    do {                                                                                                          \
        if ((sa) && (sb)) {                                                                                       \
            for (int64_t j = 0; j < (L); j++) { const float av = a[j], bv = b[j]; (void)av, (void)bv; BODY; }                        \
        } else if (sa) {                                                                                          \
            const float bv = b[0];                                                                                \
            for (int64_t j = 0; j < (L); j++) { const float av = a[j]; (void)av, (void)bv; BODY; }                                   \
        } else if (sb) {                                                                                          \
            const float av = a[0];                                                                                \
            for (int64_t j = 0; j < (L); j++) { const float bv = b[j]; (void)av, (void)bv; BODY; }                                   \
        } else {                                                                                                  \
            const float av = a[0], bv = b[0];                                                                     \
            for (int64_t j = 0; j < (L); j++) { (void)av, (void)bv; BODY; }                                                           \
        }                                                                                                         \
    } while (0)

static void fwd_row(kc_binop op, const float *a, int64_t sa, const float *b, int64_t sb, float *y, int64_t L) {
    switch (op) {
    case KC_BIN_ADD: ROW4(sa, sb, L, y[j] = av + bv); break;
    case KC_BIN_SUB: ROW4(sa, sb, L, y[j] = av - bv); break;
    case KC_BIN_MUL: ROW4(sa, sb, L, y[j] = av * bv); break;
    case KC_BIN_DIV: ROW4(sa, sb, L, y[j] = av / bv); break;
    case KC_BIN_MAX: ROW4(sa, sb, L, y[j] = av >= bv ? av : bv); break;
    case KC_BIN_MIN: ROW4(sa, sb, L, y[j] = av <= bv ? av : bv); break;
    case KC_BIN_PRELU: ROW4(sa, sb, L, y[j] = av > 0.0f ? av : bv * av); break;
    case KC_BIN_COUNT: break;
    }
}

kc_status kc__cpu_binary_forward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                 const float *b, float *y) {
    (void)be;
    KC_TRY(bcast_check("binary_forward", op, d));
    if (!a || !b || !y) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu binary_forward: NULL a, b or y");
    const bc c = collapse(d);
    const int64_t L = c.dims[c.rank - 1], rows = bc_rows(&c), sa = c.sa[c.rank - 1], sb = c.sb[c.rank - 1];
    const int par = kc__cpu_par(rows * L) && rows > 1;
    const int64_t per = 64, chunks = (rows + per - 1) / per; /* rows of one odometer walk */
    KC_CPU_PAR_FOR(par, schedule(static), for (int64_t k = 0; k < chunks; k++) {
        odo o;
        odo_start(&c, k * per, &o);
        for (int64_t r = k * per; r < rows && r < (k + 1) * per; r++, odo_next(&c, &o))
            fwd_row(op, a + o.oa, sa, b + o.ob, sb, y + r * L, L);
    });
    return KC_STATUS_OK;
}

/* The gradient of one row into g (a's side when !side_b): g[j] (own) or g[0] (broadcast,
 * summed). DA/DB: the partial derivatives of y with respect to a and b. */
#define GRAD_ROW(ss, EXPR)                                                                                        \
    do {                                                                                                          \
        if (ss) {                                                                                                 \
            ROW4(sa, sb, L, g[j] += dy[j] * (EXPR));                                                              \
        } else {                                                                                                  \
            float acc = 0.0f;                                                                                     \
            ROW4(sa, sb, L, acc += dy[j] * (EXPR));                                                               \
            g[0] += acc;                                                                                          \
        }                                                                                                         \
    } while (0)

static void grad_row(kc_binop op, int side_b, const float *a, int64_t sa, const float *b, int64_t sb,
                     const float *dy, float *g, int64_t L) {
    const int64_t ss = side_b ? sb : sa;
    switch (op) {
    case KC_BIN_ADD: GRAD_ROW(ss, 1.0f); break;
    case KC_BIN_SUB: GRAD_ROW(ss, side_b ? -1.0f : 1.0f); break;
    case KC_BIN_MUL:
        if (side_b) GRAD_ROW(ss, av);
        else GRAD_ROW(ss, bv);
        break;
    case KC_BIN_DIV:
        if (side_b) GRAD_ROW(ss, -av / (bv * bv));
        else GRAD_ROW(ss, 1.0f / bv);
        break;
    case KC_BIN_MAX:
        if (side_b) GRAD_ROW(ss, av >= bv ? 0.0f : 1.0f);
        else GRAD_ROW(ss, av >= bv ? 1.0f : 0.0f);
        break;
    case KC_BIN_MIN:
        if (side_b) GRAD_ROW(ss, av <= bv ? 0.0f : 1.0f);
        else GRAD_ROW(ss, av <= bv ? 1.0f : 0.0f);
        break;
    case KC_BIN_PRELU:
        if (side_b) GRAD_ROW(ss, av > 0.0f ? 0.0f : av);
        else GRAD_ROW(ss, av > 0.0f ? 1.0f : bv);
        break;
    case KC_BIN_COUNT: break;
    }
}

/* One side's gradient: g (that operand's size) zeroed, then every row added in. Rows are
 * split among threads by the outermost axis the operand steps through, when that axis is
 * the first (rows of different threads then never write the same part of g). */
static void grad_side(const bc *c, kc_binop op, int side_b, const float *a, const float *b, const float *dy,
                      float *g) {
    const int64_t *s = side_b ? c->sb : c->sa;
    const int64_t L = c->dims[c->rank - 1], rows = bc_rows(c);
    int64_t gsize = 1;
    for (int i = 0; i < c->rank; i++)
        if (s[i]) gsize *= c->dims[i];
    memset(g, 0, (size_t)gsize * sizeof(float));
    const int64_t outer = c->rank > 1 && s[0] ? c->dims[0] : 1, per = rows / outer;
    const int par = kc__cpu_par(rows * L) && outer > 1;
    const float *pa = a ? a : dy, *pb = b ? b : dy; /* ADD and SUB read neither */
    KC_CPU_PAR_FOR(par, schedule(static), for (int64_t k = 0; k < outer; k++) {
        odo o;
        odo_start(c, k * per, &o);
        for (int64_t r = k * per; r < (k + 1) * per; r++, odo_next(c, &o)) {
            const int64_t og = side_b ? o.ob : o.oa;
            /* a stand-in for an operand not read stays within dy: its offsets are < its size */
            grad_row(op, side_b, pa + o.oa, c->sa[c->rank - 1], pb + o.ob, c->sb[c->rank - 1], dy + r * L, g + og, L);
        }
    });
}

kc_status kc__cpu_binary_backward(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                  const float *b, const float *dy, float *da, float *db) {
    (void)be;
    KC_TRY(bcast_check("binary_backward", op, d));
    const int reads = op != KC_BIN_ADD && op != KC_BIN_SUB;
    if (!dy || (reads && (!a || !b)))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu binary_backward: NULL dy, or a or b for an operation that reads them");
    const bc c = collapse(d);
    if (da) grad_side(&c, op, 0, reads ? a : NULL, reads ? b : NULL, dy, da);
    if (db) grad_side(&c, op, 1, reads ? a : NULL, reads ? b : NULL, dy, db);
    return KC_STATUS_OK;
}

/* ---- tensor op scalar */

kc_status kc__cpu_scalar_forward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first, float *y,
                                 int64_t n) {
    (void)be;
    if ((int)op < 0 || op >= KC_BIN_COUNT || op == KC_BIN_PRELU || n < 0 || !x || !y)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu scalar_forward: bad operation %d, size or buffer", (int)op);
    /* s op x is x op' s for every operation but SUB and DIV */
    const int rev = scalar_first && (op == KC_BIN_SUB || op == KC_BIN_DIV);
    const int par = kc__cpu_par(n);
#define SLOOP(EXPR) KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) { const float v = x[i]; y[i] = (EXPR); })
    switch (op) {
    case KC_BIN_ADD: SLOOP(v + s); break;
    case KC_BIN_SUB: if (rev) { SLOOP(s - v); } else { SLOOP(v - s); } break;
    case KC_BIN_MUL: SLOOP(v * s); break;
    case KC_BIN_DIV: if (rev) { SLOOP(s / v); } else { SLOOP(v / s); } break;
    case KC_BIN_MAX: SLOOP(v >= s ? v : s); break;
    case KC_BIN_MIN: SLOOP(v <= s ? v : s); break;
    default: break;
    }
#undef SLOOP
    return KC_STATUS_OK;
}

kc_status kc__cpu_scalar_backward(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first,
                                  const float *dy, float *dx, int64_t n) {
    (void)be;
    if ((int)op < 0 || op >= KC_BIN_COUNT || op == KC_BIN_PRELU || n < 0 || !dy || !dx ||
        (!x && op != KC_BIN_ADD && op != KC_BIN_SUB && op != KC_BIN_MUL && !(op == KC_BIN_DIV && !scalar_first)))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu scalar_backward: bad operation %d, size or buffer", (int)op);
    const int par = kc__cpu_par(n);
#define SLOOP(EXPR) KC_CPU_PAR_FOR(par, schedule(static), for (int64_t i = 0; i < n; i++) { dx[i] = dy[i] * (EXPR); })
    switch (op) {
    case KC_BIN_ADD: if (dx != dy) memmove(dx, dy, (size_t)n * sizeof(float)); break;
    case KC_BIN_SUB: SLOOP(scalar_first ? -1.0f : 1.0f); break;
    case KC_BIN_MUL: SLOOP(s); break;
    case KC_BIN_DIV: if (scalar_first) { SLOOP(-s / (x[i] * x[i])); } else { SLOOP(1.0f / s); } break;
    /* ties go to the tensor, as binary_backward gives them to a */
    case KC_BIN_MAX: SLOOP(x[i] >= s ? 1.0f : 0.0f); break;
    case KC_BIN_MIN: SLOOP(x[i] <= s ? 1.0f : 0.0f); break;
    default: break;
    }
#undef SLOOP
    return KC_STATUS_OK;
}
