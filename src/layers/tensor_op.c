/* tensor_op.c — TensorOp: a Keras 3 operation node of a Functional model (elementwise
 * helper). Keras 3 records `x + 3`, `x * (1 / 6)`, `2 - x`, `a * b`, keras.ops.multiply(a, b)
 * as nodes of keras.src.ops.numpy classes (Add, Subtract, Multiply, Divide, TrueDivide,
 * Maximum, Minimum) whose arguments are two tensors, or a tensor and a number in either
 * order (src/io/keras_json_write.c writes them back so). Two tensors broadcast as the
 * merges do (merge_ew.c); their ranks must match. */
#include <math.h>
#include <string.h>

#include "layer.h"

typedef struct tensor_op_cfg {
    kc__merge_cfg m; /* two tensors */
    int op_index;    /* in k_ops */
    int scalar_side; /* 0: two tensors, 1: tensor op scalar, 2: scalar op tensor */
    float scalar;
} tensor_op_cfg;

/* The operations, by kerac's name (kc_tensor_op_opts.op) and Keras's class name. */
static const struct {
    const char *name, *keras_class;
    kc_binop op;
} k_ops[] = {
    {"add", "Add", KC_BIN_ADD},           {"subtract", "Subtract", KC_BIN_SUB}, {"multiply", "Multiply", KC_BIN_MUL},
    {"divide", "Divide", KC_BIN_DIV},     {"true_divide", "TrueDivide", KC_BIN_DIV},
    {"maximum", "Maximum", KC_BIN_MAX},   {"minimum", "Minimum", KC_BIN_MIN},
};
#define N_OPS ((int)(sizeof k_ops / sizeof k_ops[0]))
#define OPS_LIST "add, subtract, multiply, divide, true_divide, maximum, minimum"

const char *kc__tensor_op_keras_class(const char *op) {
    for (int i = 0; i < N_OPS; i++)
        if (op && strcmp(op, k_ops[i].name) == 0) return k_ops[i].keras_class;
    return NULL;
}

const char *kc__tensor_op_from_keras_class(const char *cls) {
    for (int i = 0; i < N_OPS; i++)
        if (cls && strcmp(cls, k_ops[i].keras_class) == 0) return k_ops[i].name;
    return NULL;
}

static kc_status tensor_op_init(kc_layer *l, const void *opts_) {
    const kc_tensor_op_opts *o = opts_;
    tensor_op_cfg *c = l->cfg;
    c->op_index = -1;
    for (int i = 0; i < N_OPS; i++)
        if (o->op && strcmp(o->op, k_ops[i].name) == 0) c->op_index = i;
    if (c->op_index < 0)
        return kc__fail(KC_STATUS_UNSUPPORTED, "%s: operation '%s' is not supported; use one of " OPS_LIST,
                        kc__layer_label(l), o->op ? o->op : "(none)");
    if (o->scalar_side < 0 || o->scalar_side > 2)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT,
                        "%s: scalar_side must be 0 (two tensors), 1 (tensor op scalar) or 2 (scalar op tensor), got %d",
                        kc__layer_label(l), o->scalar_side);
    if (!isfinite(o->scalar))
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: the scalar must be finite", kc__layer_label(l));
    c->scalar_side = o->scalar_side, c->scalar = o->scalar;
    c->m.op = k_ops[c->op_index].op, c->m.average = false;
    return KC_STATUS_OK;
}

static void tensor_op_get_opts(const kc_layer *l, void *opts_) {
    const tensor_op_cfg *c = l->cfg;
    *(kc_tensor_op_opts *)opts_ = (kc_tensor_op_opts){
        .name = l->name, .op = k_ops[c->op_index].name, .scalar_side = c->scalar_side, .scalar = c->scalar};
}

static kc_status tensor_op_build(kc_layer *l) {
    tensor_op_cfg *c = l->cfg;
    const char *L = kc__layer_label(l);
    const int want = c->scalar_side ? 1 : 2;
    if (l->n_in != want)
        return kc__fail(KC_STATUS_INVALID_ARGUMENT, "%s: takes %d tensor%s (scalar_side %d), got %d", L, want,
                        want == 1 ? "" : "s", c->scalar_side, l->n_in);
    if (c->scalar_side) {
        l->n_weights = 0;
        l->out_shape = l->in_shape[0];
        c->m.size = kc__shape_size(&l->out_shape);
        return KC_STATUS_OK;
    }
    if (l->in_shape[0].rank != l->in_shape[1].rank)
        return kc__fail(KC_STATUS_UNSUPPORTED,
                        "%s: the two tensors have ranks %d and %d; kerac broadcasts tensors of the same rank only", L,
                        l->in_shape[0].rank + 1, l->in_shape[1].rank + 1);
    return kc__merge_build(l, &c->m);
}

static kc_status tensor_op_forward(kc_layer *l, const kc_fwd *a) {
    const tensor_op_cfg *c = l->cfg;
    if (!c->scalar_side) return kc__merge_forward(l, &c->m, a);
    return a->be->scalar_forward(a->be, c->m.op, a->x[0], c->scalar, c->scalar_side == 2, a->y,
                                 (int64_t)a->batch * c->m.size);
}

static kc_status tensor_op_backward(kc_layer *l, const kc_bwd *a) {
    const tensor_op_cfg *c = l->cfg;
    if (!c->scalar_side) return kc__merge_backward(l, &c->m, a);
    if (!a->dx[0]) return KC_STATUS_OK;
    return a->be->scalar_backward(a->be, c->m.op, a->x[0], c->scalar, c->scalar_side == 2, a->dy, a->dx[0],
                                  (int64_t)a->batch * c->m.size);
}

static size_t tensor_op_workspace(const kc_layer *l, int batch, kc_backend *be) { return 0; }

static int64_t tensor_op_flops(const kc_layer *l) { return ((const tensor_op_cfg *)l->cfg)->m.size; }

const kc_layer_ops kc__tensor_op_ops = {
    .class_name = "TensorOp",
    .snake_name = "tensor_op",
    .cfg_size = sizeof(tensor_op_cfg),
    .opts_size = sizeof(kc_tensor_op_opts),
    .min_inputs = 1,
    .max_inputs = 2,
    .backend_ops = KC_OP_BIT(KC_OP_ELEMENTWISE) | KC_OP_BIT(KC_OP_BROADCAST),
    .init = tensor_op_init,
    .get_opts = tensor_op_get_opts,
    .build = tensor_op_build,
    .workspace_bytes = tensor_op_workspace,
    .forward = tensor_op_forward,
    .backward = tensor_op_backward,
    .flops = tensor_op_flops,
};
