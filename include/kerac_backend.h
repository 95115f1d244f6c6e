/* kerac_backend.h — the backend plugin ABI: a versioned table of buffer operations and
 * coarse kernels. Layers, losses and optimizers call only this table; they never see
 * CUDA or the CPU's threading. The CPU backend (always built in) is the reference every
 * other backend is tested against. A backend module (libkerac_cuda.so) exports
 *     kc_status kc_backend_module_init(int abi, const char *device, kc_backend **out,
 *                                      char *err, size_t err_size, const kc_device_opts *opts);
 * (kc_backend_module_init_fn below): on failure it writes the reason into err. abi comes
 * first and opts last: a module built for another ABI reads abi, refuses it through err
 * and never touches opts.
 *
 * Buffers are device pointers (float * even where the host cannot dereference them).
 * Tensors are dense, row-major, channels-last: activations (N, H, W, C), conv kernels
 * (KH, KW, C, F), dense kernels (IN, OUT). Kernels never allocate: scratch memory comes
 * from the caller as `ws` of ws_bytes, at least what the matching *_workspace function
 * asked for the call's own descriptor. A call may get a workspace planned for a larger
 * batch (the last, short batch of an epoch): the backend must then stay within ws_bytes
 * (a GPU backend picks an algorithm that fits) or fail, never write past it.
 * No CUDA header here; the ABI is plain C.
 */
#ifndef KERAC_BACKEND_H
#define KERAC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "kerac.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 2: the input feed (host_alloc .. feed_wait), on-device gradient clipping (kc_opt_step's
 * norm_sq / clipnorm), the workspace's size passed to the convolutions, and
 * kc_conv2d_desc.relu
 * 3: supports and describe (what a backend has, and which kernel it runs for a call)
 * 4: kc_device_opts passed to the module's entry point (the GPU options come from the
 * caller; the module no longer reads the environment for them)
 * 5: the depthwise and grouped convolutions take a workspace (depthwise_workspace,
 * grouped_conv_workspace) like conv2d's
 * 6: batchnorm_relu_backward takes beta (y may be NULL: the mask is recomputed from x);
 *    cpu_gemm_split, infer_tile_bytes and fold_pad_depthwise at the end of kc_backend
 * 7: add_relu and conv2d_dx_adds at the end of kc_backend; kc_conv2d_desc.accumulate
 * 8: cpu_gemm_small at the end of kc_backend
 * 9: batchnorm_dx_in_place at the end of kc_backend
 * 10: bn_add_relu at the end of kc_backend (kc_bn_fold); batchnorm_forward_train with y NULL */
#define KC_BACKEND_ABI 10
/* staging slots of the input feed: batch k + 1 is copied while step k computes */
#define KC_FEED_SLOTS 2

typedef enum kc_act {
    KC_ACT_LINEAR = 0,
    KC_ACT_RELU,
    KC_ACT_SIGMOID,
    KC_ACT_TANH,
    KC_ACT_SOFTMAX, /* over the last axis */
    KC_ACT_ELU,
    KC_ACT_GELU,       /* Keras default approximate=False: x * Phi(x) */
    KC_ACT_LEAKY_RELU, /* alpha = negative slope */
    KC_ACT_SILU,
    KC_ACT_RELU_GENERAL, /* ReLU layer: alpha = negative_slope, beta = max_value (0: none), gamma = threshold */
    /* broadcasting and activations: Keras 3's other activations (keras/src/activations/activations.py) */
    KC_ACT_HARD_SIGMOID, /* relu6(x + 3) / 6 (Keras 3's definition) */
    KC_ACT_HARD_SILU,    /* x * relu6(x + 3) / 6 (hard_swish) */
    KC_ACT_SOFTPLUS,     /* log(1 + exp(x)) */
    KC_ACT_SOFTSIGN,     /* x / (1 + |x|) */
    KC_ACT_SELU,         /* scale * elu(x, alpha) with Keras's constants */
    KC_ACT_MISH,         /* x * tanh(softplus(x)) */
    KC_ACT_EXPONENTIAL,  /* exp(x) */
    KC_ACT_LOG_SOFTMAX,  /* over the last axis (rows of `cols`) */
    KC_ACT_GELU_TANH,    /* gelu(approximate=True): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    /* elementwise fixes block */
    KC_ACT_HARD_SIGMOID_K2, /* clip(0.2 x + 0.5, 0, 1): tf-keras (Keras 2)'s hard_sigmoid */
    KC_ACT_COUNT
} kc_act;

typedef struct kc_act_params {
    kc_act kind;
    float alpha, beta, gamma;
} kc_act_params;

typedef struct kc_conv2d_desc {
    int n, h, w, c;        /* input (N, H, W, C) */
    int f, kh, kw;         /* kernel (KH, KW, C, F) */
    int sh, sw;            /* strides */
    int dh, dw;            /* dilation */
    int pad_top, pad_left; /* zero padding before; after is implied by oh, ow */
    int oh, ow;            /* output (N, OH, OW, F) */
    int relu;              /* 1: conv2d_forward writes max(0, conv + b), as the ReLU pass of
                              act_forward would (the layer's fused activation, one pass less);
                              the backward passes ignore it */
    int accumulate;        /* 1: conv2d_backward_data adds the input gradient into dx (dx +=)
                              instead of overwriting it; only where the backend's
                              conv2d_dx_adds says it can for this descriptor */
} kc_conv2d_desc;

/* Broadcasting binary operations: y = a op b. */
typedef enum kc_binop {
    KC_BIN_ADD = 0,
    KC_BIN_SUB,
    KC_BIN_MUL,
    KC_BIN_DIV,
    KC_BIN_MAX,   /* backward: the gradient goes to a where a >= b, else to b */
    KC_BIN_MIN,   /* backward: to a where a <= b, else to b */
    KC_BIN_PRELU, /* y = a > 0 ? a : b * a (PReLU: b is alpha) */
    KC_BIN_COUNT
} kc_binop;

/* The index space of a broadcasting binary operation: y's shape (batch first, rank <=
 * KC_BCAST_MAX_RANK) and, per axis, the element strides of a and b in it: a's own
 * row-major strides over the axes it has, 0 along an axis it is broadcast over (size 1
 * there). */
#define KC_BCAST_MAX_RANK 6
typedef struct kc_bcast_desc {
    int rank;
    int64_t dims[KC_BCAST_MAX_RANK];
    int64_t sa[KC_BCAST_MAX_RANK], sb[KC_BCAST_MAX_RANK];
} kc_bcast_desc;

typedef enum kc_pool_kind { KC_POOL_MAX = 0, KC_POOL_AVG = 1 } kc_pool_kind;

typedef struct kc_pool2d_desc {
    kc_pool_kind kind;
    int n, h, w, c;
    int kh, kw, sh, sw;
    int pad_top, pad_left;
    int oh, ow;
} kc_pool2d_desc;

/* UpSampling2D */
typedef struct kc_resample2d_desc {
    int n, h, w, c;        /* input (N, H, W, C) */
    int sh, sw;            /* integer factors: output (N, H * sh, W * sw, C) */
    int bilinear;          /* 0: nearest, 1: bilinear */
} kc_resample2d_desc;

/* The losses, the one list: X(kind, Keras name, Keras short name or NULL). The enum and
 * kc_loss_name() are made from it; kc_compile accepts either name (case-insensitive).
 * Targets: SPARSE_CCE class indices (float-coded ints) with preds (N, C); CCE (N, C)
 * probabilities; BCE (N, C) in [0, 1]; MSE, MAE (N, C). */
#define KC_LOSS_KINDS(X)                                               \
    X(KC_LOSS_SPARSE_CCE, "sparse_categorical_crossentropy", NULL)     \
    X(KC_LOSS_CCE, "categorical_crossentropy", NULL)                   \
    X(KC_LOSS_BCE, "binary_crossentropy", NULL)                        \
    X(KC_LOSS_MSE, "mean_squared_error", "mse")                        \
    X(KC_LOSS_MAE, "mean_absolute_error", "mae")

typedef enum kc_loss_kind {
#define KC__LOSS_ENUM(kind, name, short_name) kind,
    KC_LOSS_KINDS(KC__LOSS_ENUM) /* KC_LOSS_SPARSE_CCE = 0, ... */
#undef KC__LOSS_ENUM
    KC_LOSS_COUNT
} kc_loss_kind;

/* The Keras name of a loss kind ("mean_squared_error"); "unknown loss" outside the list. */
static inline const char *kc_loss_name(kc_loss_kind k) {
    switch (k) {
#define KC__LOSS_CASE(kind, name, short_name) case kind: return name;
    KC_LOSS_KINDS(KC__LOSS_CASE)
#undef KC__LOSS_CASE
    default: return "unknown loss";
    }
}

/* augmentation: image resampling (RandomFlip/Rotation/Zoom/Translation/Crop, Resizing,
 * CenterCrop). Output pixel (oy, ox) of image i reads the canvas at the point
 *     x = m[0] * ox + m[1] * oy + m[2],   y = m[3] * ox + m[4] * oy + m[5]
 * (pixel indices, as Keras's affine_transform), m being image i's six numbers (mats, a
 * device array of n * 6, or d->m for every image when mats is NULL). The canvas is
 * (ch, cw); input pixel (r, s) is canvas pixel (r + top, s + left) (top/left may be
 * negative: the canvas is then a window of the input), the rest of the canvas is
 * fill_value. Taps outside the canvas follow `fill`, as scipy's map_coordinates modes:
 * reflect (d c b a | a b c d | d c b a), wrap, constant (fill_value), nearest (clamp). */
typedef enum kc_fill_mode { KC_FILL_REFLECT = 0, KC_FILL_WRAP, KC_FILL_CONSTANT, KC_FILL_NEAREST } kc_fill_mode;
typedef enum kc_sample_kind {
    KC_SAMPLE_ROUND = 0,   /* the tap at round-half-even(x, y) (map_coordinates order 0) */
    KC_SAMPLE_BILINEAR,    /* four taps, weights from the fractions */
    KC_SAMPLE_FLOOR,       /* the tap at floor(x + 0.5, y + 0.5) (image resize "nearest") */
} kc_sample_kind;
typedef struct kc_sample2d_desc {
    int n, h, w, c;            /* input (N, H, W, C) */
    int oh, ow;                /* output (N, OH, OW, C) */
    int interp;                /* kc_sample_kind */
    int fill;                  /* kc_fill_mode */
    float fill_value;
    int ch, cw, top, left;     /* the canvas and where the input sits in it */
    float m[6];                /* the transform of every image when mats is NULL */
} kc_sample2d_desc;

/* augmentation: per-image colour changes (RandomContrast, RandomBrightness). Image i has
 * params[2i] = f, params[2i + 1] = d (a device array of n * 2):
 *     contrast:  y = (x - mean) * f + mean + d, mean over the image's pixels, per channel
 *     otherwise: y = x * f + d
 * then y is clipped to [lo, hi]. */
typedef struct kc_color2d_desc {
    int n, hw, c;              /* (N, H * W, C) */
    int contrast;
    float lo, hi;
} kc_color2d_desc;

typedef struct kc_loss_desc {
    kc_loss_kind kind;
    int n, c;        /* predictions (N, C) */
    /* 0: preds are probabilities (softmax / sigmoid outputs, clipped to [eps, 1 - eps] as
     * Keras does); 1: preds are logits (from_logits=True, or a softmax/sigmoid output
     * fused into the loss: then the gradient is taken with respect to the logits). */
    int from_logits;
} kc_loss_desc;

typedef enum kc_opt_kind { KC_OPT_SGD = 0, KC_OPT_ADAM, KC_OPT_ADAMW, KC_OPT_RMSPROP } kc_opt_kind;

typedef struct kc_opt_step {
    kc_opt_kind kind;
    float lr;
    float momentum;  /* sgd, rmsprop */
    int nesterov;    /* sgd */
    float beta_1, beta_2, epsilon;
    float weight_decay; /* adamw (decoupled, as Keras: w -= lr * wd * w) */
    float rho;       /* rmsprop */
    int64_t t;       /* 1-based step count, for Adam's bias correction */
    float grad_scale; /* multiply gradients by this first (1: none) */
    /* clipping by norm, on the device (no host round trip): when norm_sq (a device float: the
     * sum of squares of the gradients concerned, from sum_squares) is not NULL, gradients are
     * further multiplied by clipnorm / max(sqrt(*norm_sq), clipnorm), the square root taken
     * in double, as Keras's clip_by_norm. */
    const float *norm_sq;
    float clipnorm;
} kc_opt_step;

/* The operations of the table in groups, as layers use them: a backend has a group when
 * every entry of it works (supports), and says which kernel a call of it runs (describe). */
typedef enum kc_op {
    KC_OP_CONV2D = 0,      /* conv2d_workspace, conv2d_forward, _backward_data, _backward_filter */
    KC_OP_POOL2D,          /* pool2d_forward, pool2d_backward */
    KC_OP_GLOBAL_AVG_POOL, /* global_avg_pool_forward, _backward */
    KC_OP_GEMM,            /* gemm, bias_add, bias_grad */
    KC_OP_BATCHNORM,       /* batchnorm_forward_train, _forward_infer, _backward */
    KC_OP_DROPOUT,         /* dropout_forward, dropout_backward */
    KC_OP_PAD2D,           /* pad2d_forward, pad2d_backward */
    KC_OP_ACTIVATION,      /* act_forward, act_backward */
    KC_OP_ELEMENTWISE,     /* add, axpy, scale, copy_strided */
    KC_OP_LOSS,            /* loss_forward_backward, count_correct */
    KC_OP_OPTIMIZER,       /* optimizer_step, sum_squares */
    KC_OP_DEPTHWISE,       /* depthwise_workspace, depthwise_forward, _backward_data, _backward_filter */
    /* normalisation and resampling */
    KC_OP_NORM,            /* channel_affine, normalize, groupnorm_forward, groupnorm_backward */
    KC_OP_RESAMPLE,        /* upsample2d_forward, upsample2d_backward, permute */
    /* broadcasting and activations */
    KC_OP_BROADCAST,       /* binary_forward, binary_backward, scalar_forward, scalar_backward */
    /* augmentation: image augmentation and resampling layers */
    KC_OP_SAMPLE2D,        /* sample2d_forward, sample2d_backward */
    KC_OP_COLOR2D,         /* color2d_forward, color2d_backward */
    /* convolutions */
    KC_OP_GROUPED_CONV,    /* grouped_conv_workspace, grouped_conv_forward, _backward_data, _backward_filter */
    /* Gaussian noise layers */
    KC_OP_NOISE,           /* random_normal */
    KC_OP_COUNT
} kc_op;
#define KC_OP_BIT(op) (1u << (op))

typedef struct kc_mem_info {
    size_t free_bytes, total_bytes;
} kc_mem_info;

/* One batch norm's per-channel affine map (bn_add_relu): (x - mean) * gamma * inv_std + beta,
 * with inv_std given (training: the batch's, as batchnorm_forward_train saved it) or, where
 * inv_std is NULL, 1 / sqrt(var + epsilon) (inference, or a frozen layer: the moving
 * statistics); gamma NULL means 1, beta NULL 0. Each pointer to c floats. */
typedef struct kc_bn_fold {
    const float *mean, *inv_std, *var, *gamma, *beta;
    float epsilon;
} kc_bn_fold;

typedef struct kc_backend kc_backend;

struct kc_backend {
    int abi;             /* KC_BACKEND_ABI */
    size_t struct_size;  /* sizeof(kc_backend) of the module's build */
    const char *name;    /* "cpu", "cuda" */
    char device[64];     /* "cpu", "cuda:0 (NVIDIA H200)" */
    void *ctx;           /* backend private state */

    void (*destroy)(kc_backend *be);

    /* ---- memory */
    kc_status (*alloc)(kc_backend *be, size_t bytes, void **out); /* 64-byte aligned */
    void (*free)(kc_backend *be, void *p);
    kc_status (*to_device)(kc_backend *be, void *dst, const void *src, size_t bytes);
    kc_status (*to_host)(kc_backend *be, void *dst, const void *src, size_t bytes);
    kc_status (*copy)(kc_backend *be, void *dst, const void *src, size_t bytes); /* no overlap */
    kc_status (*memset0)(kc_backend *be, void *dst, size_t bytes);
    kc_status (*sync)(kc_backend *be);
    kc_status (*mem_info)(kc_backend *be, kc_mem_info *out);

    /* ---- dense algebra: C = alpha * op(A) @ op(B) + beta * C, row-major */
    kc_status (*gemm)(kc_backend *be, int trans_a, int trans_b, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c, int ldc);
    /* y (rows, cols) += bias (cols) broadcast over rows */
    kc_status (*bias_add)(kc_backend *be, float *y, const float *bias, int64_t rows, int cols);
    /* db (cols) = sum over rows of dy (rows, cols) */
    kc_status (*bias_grad)(kc_backend *be, const float *dy, float *db, int64_t rows, int cols);

    /* ---- convolution (NHWC, HWIO): y = conv(x, w) + b (b may be NULL).
     * conv2d_workspace: the bytes of ws the three calls need for d. A model plans at its
     * largest batch and runs smaller ones (an epoch's last) in the same ws, so the answer must
     * cover d with any smaller batch too (the CPU's, whose kernel for a 3x3 convolution depends
     * on the batch, is the largest any batch up to d's asks). */
    size_t (*conv2d_workspace)(kc_backend *be, const kc_conv2d_desc *d);
    kc_status (*conv2d_forward)(kc_backend *be, const kc_conv2d_desc *d, const float *x,
                                const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
    /* dx = conv_transpose(dy, w) */
    kc_status (*conv2d_backward_data)(kc_backend *be, const kc_conv2d_desc *d, const float *dy,
                                      const float *w, float *dx, void *ws, size_t ws_bytes);
    /* dw = x^T * dy, db = sum(dy) (db may be NULL); both overwritten */
    kc_status (*conv2d_backward_filter)(kc_backend *be, const kc_conv2d_desc *d, const float *x,
                                        const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

    /* ---- pooling; max pooling records argmax indices in mask (int32, N*OH*OW*C) */
    kc_status (*pool2d_forward)(kc_backend *be, const kc_pool2d_desc *d, const float *x, float *y,
                                int32_t *mask);
    kc_status (*pool2d_backward)(kc_backend *be, const kc_pool2d_desc *d, const float *dy,
                                 const int32_t *mask, float *dx);
    /* global average over H, W: x (N, HW, C) -> y (N, C) */
    kc_status (*global_avg_pool_forward)(kc_backend *be, const float *x, float *y, int n, int hw, int c);
    kc_status (*global_avg_pool_backward)(kc_backend *be, const float *dy, float *dx, int n, int hw, int c);

    /* ---- batch normalization over all axes but the last (rows = N*H*W, c channels).
     * training: uses batch statistics, saves mean and inv_std (c each), updates the moving
     * statistics as Keras 3: moving = moving * momentum + batch * (1 - momentum), using the
     * biased batch variance. y NULL: the statistics only (asked only of a backend that has
     * bn_add_relu, which then normalises the layer's output as it reads it). */
    kc_status (*batchnorm_forward_train)(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                         const float *gamma, const float *beta, float *moving_mean,
                                         float *moving_var, float momentum, float epsilon,
                                         float *save_mean, float *save_inv_std);
    kc_status (*batchnorm_forward_infer)(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                         const float *gamma, const float *beta, const float *moving_mean,
                                         const float *moving_var, float epsilon);
    /* dgamma, dbeta overwritten (either may be NULL: center/scale False) */
    kc_status (*batchnorm_backward)(kc_backend *be, const float *x, const float *dy, float *dx,
                                    int64_t rows, int c, const float *gamma, const float *save_mean,
                                    const float *save_inv_std, float *dgamma, float *dbeta);

    /* ---- activations over n values (softmax: rows of `cols`) */
    kc_status (*act_forward)(kc_backend *be, kc_act_params a, const float *x, float *y, int64_t n, int cols);
    /* dx from x, y (forward output) and dy; dx may alias dy */
    kc_status (*act_backward)(kc_backend *be, kc_act_params a, const float *x, const float *y,
                              const float *dy, float *dx, int64_t n, int cols);

    /* ---- dropout: mask from a counter-based hash of (seed, index), identical on every
     * backend; y = x * keep / (1 - rate). mask is uint8 (n). */
    kc_status (*dropout_forward)(kc_backend *be, const float *x, float *y, uint8_t *mask, int64_t n,
                                 float rate, uint64_t seed);
    kc_status (*dropout_backward)(kc_backend *be, const float *dy, const uint8_t *mask, float *dx,
                                  int64_t n, float rate);

    /* ---- elementwise and layout */
    kc_status (*add)(kc_backend *be, float *y, const float *a, const float *b, int64_t n); /* y = a + b */
    kc_status (*axpy)(kc_backend *be, float *y, const float *x, float alpha, int64_t n);    /* y += alpha x */
    kc_status (*scale)(kc_backend *be, float *y, float alpha, int64_t n);
    /* copy (rows, cols) blocks between strided matrices: dst[r*dst_ld + dst_off + j] = src[r*src_ld + src_off + j] */
    kc_status (*copy_strided)(kc_backend *be, float *dst, int dst_ld, int dst_off, const float *src,
                              int src_ld, int src_off, int64_t rows, int cols);
    /* zero padding of (N, H, W, C) to (N, H+t+b, W+l+r, C); backward crops */
    kc_status (*pad2d_forward)(kc_backend *be, const float *x, float *y, int n, int h, int w, int c,
                               int top, int bottom, int left, int right);
    kc_status (*pad2d_backward)(kc_backend *be, const float *dy, float *dx, int n, int h, int w, int c,
                                int top, int bottom, int left, int right);

    /* ---- loss: per-example losses summed into *loss_sum (device float), and the
     * gradient of the MEAN loss over `grad_n` examples into dpred (may be NULL). */
    kc_status (*loss_forward_backward)(kc_backend *be, const kc_loss_desc *d, const float *pred,
                                       const float *target, float *loss_sum, float *dpred, int grad_n);
    /* number of rows whose target class is among the top k of pred (k=1: argmax),
     * added to *correct (device float). targets: class indices if sparse, else (N, C)
     * (argmax taken); c == 1: binary accuracy, Keras's (pred > 0.5) == target, the target
     * exactly 0 or 1 (threshold 0 when from_logits: a sigmoid folded into the loss). The
     * model calls both entries on rows of the output's last axis: (N * positions, C) for
     * a per-pixel head, with one class index (sparse) or C targets per position. */
    kc_status (*count_correct)(kc_backend *be, const float *pred, const float *target, int n, int c,
                               int sparse, int k, int from_logits, float *correct);

    /* ---- optimizer: one fused update over n parameters. slots: m/v/velocity buffers,
     * each n floats (as many as the optimizer needs, NULL for the others). */
    kc_status (*optimizer_step)(kc_backend *be, const kc_opt_step *s, float *param, const float *grad,
                                float *slot0, float *slot1, int64_t n);
    /* *out (device float) = sum of squares of x (for clipnorm and NaN checks) */
    kc_status (*sum_squares)(kc_backend *be, const float *x, int64_t n, float *out);

    /* ---- memory accounting: bytes held through alloc (and by the backend's own internal
     * scratch, if it keeps one: the CUDA backend's reductions) now and at the peak since the last
     * reset_peak; a cap (0: none) past which alloc fails with KC_STATUS_OUT_OF_MEMORY
     * naming the bytes asked, held and allowed; release_cache returns cached free blocks
     * to the system (a no-op where nothing is cached). */
    void (*memory_stats)(kc_backend *be, size_t *in_use, size_t *peak);
    void (*reset_peak)(kc_backend *be);
    void (*set_memory_limit)(kc_backend *be, size_t bytes);
    void (*release_cache)(kc_backend *be);

    /* ---- the input feed: batches go from page-locked host memory to the device on a copy
     * stream of their own while the previous step computes. Staging slots (0 ..
     * KC_FEED_SLOTS - 1) take turns; for each batch the caller does, on the batch's slot:
     *   feed_wait      the host waits until the slot's last uploads have read their host
     *                  sources (which may then be overwritten)
     *   feed_upload    start copying `bytes` from host src (from host_alloc) to device dst
     *                  once the work enqueued before the slot's last feed_release is done;
     *                  returns at once (several per slot are fine)
     *   feed_acquire   work enqueued from now on runs after the slot's uploads (no host wait)
     *   ... the step, reading dst ...
     *   feed_release   the slot's next uploads may overwrite dst once the work enqueued so
     *                  far is done
     * A synchronous backend (the CPU) copies in feed_upload and has nothing to do in the
     * other three. host_alloc'd memory is page-locked where the device has that (else plain
     * memory: uploads are then slower, not wrong); it is not device memory and is not
     * counted by memory_stats. */
    kc_status (*host_alloc)(kc_backend *be, size_t bytes, void **out); /* 64-byte aligned */
    void (*host_free)(kc_backend *be, void *p);
    kc_status (*feed_upload)(kc_backend *be, int slot, void *dst, const void *src, size_t bytes);
    kc_status (*feed_acquire)(kc_backend *be, int slot);
    kc_status (*feed_release)(kc_backend *be, int slot);
    kc_status (*feed_wait)(kc_backend *be, int slot);

    /* ---- what the backend has, and what it runs (ABI 3)
     * supports: 1 when every entry of the group op works here, 0 when the backend lacks it
     * (a model with a layer that needs it then fails when it is built, naming the layer).
     * describe: the kernel a call of op would run, in words, into buf (n bytes, always
     * NUL-terminated): "cpu im2col+gemm (OpenBLAS, patch 3x3x8)", "cuDNN forward
     * IMPLICIT_PRECOMP_GEMM [fma, 1.2 MiB], ...". desc is the call's descriptor
     * (kc_conv2d_desc for KC_OP_CONV2D, kc_pool2d_desc for KC_OP_POOL2D, NULL for the
     * others) and ws_bytes the workspace the call would get, from an aligned start: the
     * answer comes from the same decision the kernels make. Fails, with the reason, when
     * the backend could not run that call (cuDNN cannot set the convolution up). */
    int (*supports)(kc_backend *be, kc_op op);
    kc_status (*describe)(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n);

    /* ---- host services, filled in by the module loader right after a module's init
     * (NULL before that; the built-in CPU backend sets libkerac's own). A module is a separate
     * shared object with no access to libkerac's internals: it reports an error message
     * through libkerac's thread-local error text with host_fail (printf-style; returns s,
     * like kc__fail) and writes log lines (the cuDNN algorithm chosen per convolution at
     * debug level, ...) through libkerac's logger with host_log. */
    kc_status (*host_fail)(kc_status s, const char *fmt, ...);
    void (*host_log)(kc_log_level level, const char *fmt, ...);

    /* ---- depthwise convolution (DepthwiseConv2D), NHWC. The descriptor is Conv2D's with
     * f = c * M (M: the depth multiplier); the kernel is Keras's (KH, KW, C, M), i.e.
     * (KH, KW, F), and output channel k reads input channel k / M only.
     * depthwise_workspace: the bytes of ws the three calls need for d, as conv2d_workspace
     * (0: none; the CPU's 3x3 backward_filter keeps its groups of rows' partial sums there and
     * runs without it by blocks of channels, more slowly; cuDNN's grouped convolution needs it).
     * forward: y = dwconv(x, w) + b (b may be NULL), then max(0, .) when d->relu;
     * backward_data: dx overwritten; backward_filter: dw and db (may be NULL) overwritten. */
    size_t (*depthwise_workspace)(kc_backend *be, const kc_conv2d_desc *d);
    kc_status (*depthwise_forward)(kc_backend *be, const kc_conv2d_desc *d, const float *x, const float *w,
                                   const float *b, float *y, void *ws, size_t ws_bytes);
    kc_status (*depthwise_backward_data)(kc_backend *be, const kc_conv2d_desc *d, const float *dy,
                                         const float *w, float *dx, void *ws, size_t ws_bytes);
    kc_status (*depthwise_backward_filter)(kc_backend *be, const kc_conv2d_desc *d, const float *x,
                                           const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

    /* ---- normalisation and resampling, all channels-last.
     * channel_affine: y[r, k] = x[r, k] * scale[k] + shift[k] over rows x c values; scale or
     * shift may be NULL (1, 0); y may be x.
     * normalize (Keras's Normalization): s[k] = max(sqrt(var[k]), 1e-7);
     * y = (x - mean) / s, or with invert y = mean + x * s; mean may be NULL (0); y may be x.
     * groupnorm_forward: x is (n, s, c) with c split in `groups` groups of c / groups
     * channels; each (example, group) is normalised over its s * c / groups values:
     * y = (x - mu) * rsqrt(var + eps) * gamma[k] + beta[k] (biased variance; gamma, beta
     * (c) may be NULL); save_mean and save_inv_std get (n, groups). LayerNormalization is
     * groups = 1 (with s = 1 and n the rows), GroupNormalization s = H * W.
     * groupnorm_backward: dx (may be NULL) overwritten; dgamma, dbeta (c; may be NULL)
     * overwritten. */
    kc_status (*channel_affine)(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                const float *scale, const float *shift);
    kc_status (*normalize)(kc_backend *be, const float *x, float *y, int64_t rows, int c, const float *mean,
                           const float *var, int invert);
    kc_status (*groupnorm_forward)(kc_backend *be, const float *x, float *y, int n, int64_t s, int c, int groups,
                                   const float *gamma, const float *beta, float epsilon, float *save_mean,
                                   float *save_inv_std);
    kc_status (*groupnorm_backward)(kc_backend *be, const float *x, const float *dy, float *dx, int n, int64_t s,
                                    int c, int groups, const float *gamma, const float *save_mean,
                                    const float *save_inv_std, float *dgamma, float *dbeta);
    /* upsampling of (N, H, W, C) by integer factors (d->sh, d->sw) to (N, OH, OW, C),
     * OH = H * sh: nearest repeats each pixel; bilinear interpolates with half-pixel centres,
     * clamped at the edges (as TensorFlow's and JAX's resize). backward: dx overwritten. */
    kc_status (*upsample2d_forward)(kc_backend *be, const kc_resample2d_desc *d, const float *x, float *y);
    kc_status (*upsample2d_backward)(kc_backend *be, const kc_resample2d_desc *d, const float *dy, float *dx);
    /* y = x with the axes of each example permuted: x is (n, dims[0..rank)), y is (n,
     * dims[perm[0]], ..., dims[perm[rank - 1]]) and y[i_0..] = x[...] with x's axis perm[j]
     * at y's index j (perm counts from 0, without the batch axis); rank <= KC_MAX_RANK */
    kc_status (*permute)(kc_backend *be, const float *x, float *y, int n, int rank, const int *dims,
                         const int *perm);
    /* ---- broadcasting elementwise (broadcasting and activations: Multiply, Subtract, Average,
     * Maximum, Minimum, Add, PReLU, operation nodes). The broadcast operand is read in
     * place, never materialised.
     * binary_forward: y (d->dims) = a op b.
     * binary_backward: da (a's own shape) = the sum over the axes a is broadcast along of
     * dy * dy/da, db likewise; either may be NULL (not wanted); both overwritten. a and b
     * may be NULL where the op's gradient does not read them (ADD, SUB).
     * scalar_forward: y = x op s, or s op x when scalar_first (n values; y may be x).
     * scalar_backward: dx = dy * d(x op s)/dx (or of s op x); dx may be dy. */
    kc_status (*binary_forward)(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                const float *b, float *y);
    kc_status (*binary_backward)(kc_backend *be, kc_binop op, const kc_bcast_desc *d, const float *a,
                                 const float *b, const float *dy, float *da, float *db);
    kc_status (*scalar_forward)(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first, float *y,
                                int64_t n);
    kc_status (*scalar_backward)(kc_backend *be, kc_binop op, const float *x, float s, int scalar_first,
                                 const float *dy, float *dx, int64_t n);
    /* ---- augmentation: image resampling and colour (kc_sample2d_desc, kc_color2d_desc).
     * sample2d_backward overwrites dx with the adjoint of the forward resampling (each tap's
     * weight times dy, summed into the input pixel it read). color2d_backward: dx from y (the
     * clipped output: no gradient where y is at lo or hi) and dy; dx may alias dy. */
    kc_status (*sample2d_forward)(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *x,
                                  float *y);
    kc_status (*sample2d_backward)(kc_backend *be, const kc_sample2d_desc *d, const float *mats, const float *dy,
                                   float *dx);
    kc_status (*color2d_forward)(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *x,
                                 float *y);
    kc_status (*color2d_backward)(kc_backend *be, const kc_color2d_desc *d, const float *params, const float *y,
                                  const float *dy, float *dx);
    /* ---- grouped convolution (Conv2D with 1 < groups), NHWC. The descriptor is Conv2D's;
     * the kernel is Keras's (KH, KW, C / groups, F): output channel k belongs to group
     * g = k / (F / groups) and reads input channels [g * C / groups, (g + 1) * C / groups).
     * grouped_conv_workspace: the bytes of ws the three calls need, as conv2d_workspace (0:
     * none). forward: y = conv(x, w) + b (b may be NULL), then max(0, .) when d->relu;
     * backward_data: dx overwritten; backward_filter: dw and db (may be NULL) overwritten. */
    size_t (*grouped_conv_workspace)(kc_backend *be, const kc_conv2d_desc *d, int groups);
    kc_status (*grouped_conv_forward)(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                      const float *w, const float *b, float *y, void *ws, size_t ws_bytes);
    kc_status (*grouped_conv_backward_data)(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *dy,
                                            const float *w, float *dx, void *ws, size_t ws_bytes);
    kc_status (*grouped_conv_backward_filter)(kc_backend *be, const kc_conv2d_desc *d, int groups, const float *x,
                                              const float *dy, float *dw, float *db, void *ws, size_t ws_bytes);

    /* ---- issue 13: device collectives for data-parallel training (NCCL on the CUDA
     * backend, loaded at run time; NULL on backends without: the gradients then go
     * through the host and the caller's collective). One communicator per backend.
     * coll_unique_id: a new communicator id (opaque, bytes <= 128) for rank 0 to send to
     * the others, or a failure saying why there is none (library missing; id NULL: only
     * that check, for the other ranks); coll_init:
     * join the communicator of nranks (every rank calls it with rank 0's id; it waits for
     * all of them); coll_allreduce_sum: buf (n floats of device memory) becomes the sum
     * over the ranks, started on the collective's own stream once the work enqueued so far
     * is done, so that later work overlaps it (buf must not be written until coll_join);
     * coll_join: later work waits for every all-reduce started so far, and a failure
     * that one reported comes back; coll_describe: "NCCL 2.21.5, 2 ranks" */
    kc_status (*coll_unique_id)(kc_backend *be, void *id, size_t bytes);
    kc_status (*coll_init)(kc_backend *be, const void *id, size_t bytes, int nranks, int rank);
    kc_status (*coll_allreduce_sum)(kc_backend *be, float *buf, int64_t n);
    kc_status (*coll_join)(kc_backend *be);
    const char *(*coll_describe)(kc_backend *be);

    /* ---- device timing for profiles and traces (observe: per-layer times from the device's
     * own clock, one trace track per stream). NULL where the backend runs synchronously (the
     * CPU: host clocks time its work). Streams: KC_STREAM_COMPUTE, KC_STREAM_COPY (the
     * feed's uploads), KC_STREAM_ALLREDUCE.
     *   timing_begin  forget earlier marks and record the reference mark on the compute stream
     *                 (the caller has synchronised, so it is reached at once)
     *   timing_mark   record a mark on `stream` after the work enqueued there so far: its id
     *                 (0, 1, ... since timing_begin), or -1 when the stream does not exist or
     *                 the marks are full (then nothing is recorded)
     *   timing_read   wait for marks 0 .. n-1 and give each one's seconds after the reference */
    kc_status (*timing_begin)(kc_backend *be);
    int (*timing_mark)(kc_backend *be, int stream);
    kc_status (*timing_read)(kc_backend *be, double *seconds, int n);

    /* ---- Gaussian noise layers (GaussianNoise, GaussianDropout): y[i] = mean + stddev * z_i
     * for i in [0, n), z_i the standard normal draw i of seed (src/backend/normal_draw.h:
     * counter-based, the same on every backend and for any thread count) */
    kc_status (*random_normal)(kc_backend *be, float *y, int64_t n, float mean, float stddev, uint64_t seed);

    /* ---- batch normalization with the ReLU that follows it, in one pass over the
     * activations (the model fuses a BatchNormalization whose only consumer is a ReLU; NULL
     * where the backend has no such kernels: the two layers then run apart). The same as the
     * batchnorm entries, then y = min(max(y, 0), relu_max) (relu_max 0: no upper clip); the
     * backward takes that y (the fused output) and dy with respect to it, and masks dy where
     * the ReLU passed nothing (y <= 0, or y >= relu_max) before the batch norm's backward.
     * y may be NULL; the backward then recomputes the ReLU's input from x, gamma, beta
     * and the saved statistics exactly as the forward did (the same mask, without reading y). */
    kc_status (*batchnorm_relu_forward_train)(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                              const float *gamma, const float *beta, float *moving_mean,
                                              float *moving_var, float momentum, float epsilon,
                                              float *save_mean, float *save_inv_std, float relu_max);
    kc_status (*batchnorm_relu_forward_infer)(kc_backend *be, const float *x, float *y, int64_t rows, int c,
                                              const float *gamma, const float *beta, const float *moving_mean,
                                              const float *moving_var, float epsilon, float relu_max);
    kc_status (*batchnorm_relu_backward)(kc_backend *be, const float *x, const float *y, const float *dy, float *dx,
                                         int64_t rows, int c, const float *gamma, const float *beta,
                                         const float *save_mean, const float *save_inv_std, float *dgamma,
                                         float *dbeta, float relu_max);

    /* ---- nonzero when the model should fold a ZeroPadding2D into the DepthwiseConv2D
     * that reads it (the depthwise kernels then read the unpadded input with the padding in
     * pad_top/pad_left and the output size, no padded copy): the CPU's, unless
     * kc_device_opts.cpu_fold_pad = KC_FALSE. */
    int fold_pad_depthwise;

    /* ---- inference in tiles of the batch. The bytes of activations one tile of an
     * inference pass should touch (a layer's input and output for that many examples, about
     * what the caches hold), so that a tile crosses every layer while it is still in cache;
     * 0: whole batches (the GPU). The model decides the tile (src/model/tile.c). */
    size_t infer_tile_bytes;

    /* ---- nonzero when the CPU backend splits a tall, skinny GEMM (m or k >= 4096,
     * n <= 256) across the OpenMP team, one single-threaded OpenBLAS call per thread on a
     * fixed slice of C; 0: every GEMM is one call on OpenBLAS's own threading. Set from
     * kc_device_opts.cpu_gemm_split when the backend is created; read at each GEMM, so a
     * program may change it between steps (bench/finetune/bench_split_ab.c does, on the
     * backend kc_model_backend gives). 0 on other backends. */
    int cpu_gemm_split;

    /* ---- conv2d_backward_data adding into dx (kc_conv2d_desc.accumulate)
     * nonzero when conv2d_backward_data honours accumulate for d, so that a convolution that
     * is not the first to write its input's gradient adds into that gradient in place (no
     * temporary, no add pass: src/model/plan.c). NULL: never. The CPU's (every path but
     * Winograd), unless kc_device_opts.cpu_conv_dx_add = KC_FALSE. */
    int (*conv2d_dx_adds)(kc_backend *be, const kc_conv2d_desc *d);

    /* ---- an Add and the ReLU after it in one pass (src/model/fuse.c)
     * y = max(a + b, 0), then clipped at relu_max when it is above 0; y may alias a or b.
     * NULL: the model runs the two apart. The CPU's, unless kc_device_opts.cpu_fuse_add_relu =
     * KC_FALSE. */
    kc_status (*add_relu)(kc_backend *be, float *y, const float *a, const float *b, int64_t n, float relu_max);

    /* ---- nonzero when the CPU backend runs GEMMs with a small dimension (C at most 256
     * columns, 512 for some on AVX-512; src/backend/cpu/cpu_gemm_small.c says which) on its
     * own register tiles instead of OpenBLAS. Set from kc_device_opts.cpu_gemm_small when
     * the backend is created; read at each GEMM, so a program may change it between steps.
     * 0 on other backends. */
    int cpu_gemm_small;

    /* ---- nonzero when batchnorm_backward and batchnorm_relu_backward take dx == dy (each
     * entry of dx written after the per-channel sums, from the same entry of dy): the model
     * then gives a batch norm's input gradient the batch norm's own dy buffer where it can
     * (src/model/plan.c, plan_share_bn), one buffer less, and the pass writes into the lines
     * it has just read. The CPU's; 0 on the others (the model keeps dx apart). */
    int batchnorm_dx_in_place;

    /* ---- a batch norm's normalisation, the Add that reads it and the ReLU after it in one
     * pass (src/model/fuse.c): y = A0(x0) + A1(x1), each Ak the batch norm fk describes or,
     * where fk is NULL, xk itself; then with relu, max(y, 0), clipped at relu_max when it is
     * above 0. x0, x1 and y are (rows, c); y may alias x0 or x1. The result is the same floats
     * as batchnorm_forward_train or _infer, then add_relu (or add). NULL: the batch norm writes
     * its output and the Add reads it. The CPU's, unless kc_device_opts.cpu_fuse_bn_add =
     * KC_FALSE. */
    kc_status (*bn_add_relu)(kc_backend *be, float *y, const float *x0, const kc_bn_fold *f0, const float *x1,
                             const kc_bn_fold *f1, int64_t rows, int c, int relu, float relu_max);
};
/* the streams of timing_mark */
#define KC_STREAM_COMPUTE 0
#define KC_STREAM_COPY 1
#define KC_STREAM_ALLREDUCE 2

/* The CPU backend (always available), with the environment's CPU options
 * (kc_device_opts_default: KERAC_CPU_ISA, KERAC_CPU_WINOGRAD, ...; a bad value is its error). */
KC_API kc_status kc_backend_cpu_create(kc_backend **out);
/* cpu-speed: the CPU backend with the CPU options of opts (NULL: all defaults, whatever the
 * environment says): cpu_isa, the kernels' instruction set (kc_cpu_isa in kerac.h;
 * KC_CPU_ISA_AUTO: the best the processor runs; a set the processor lacks, or that this build
 * has no kernels for, is KC_STATUS_UNSUPPORTED), and cpu_winograd. */
KC_API kc_status kc_backend_cpu_create_ex(const kc_device_opts *opts, kc_backend **out);
/* The instruction set a CPU backend's kernels use ("baseline", "avx2", "avx512"); NULL for
 * another backend. */
KC_API const char *kc_backend_cpu_isa(const kc_backend *be);
KC_API void kc_backend_destroy(kc_backend *be);

/* A backend by device name: "cpu", "cuda", "cuda:N", or "auto" (a healthy GPU, else the
 * CPU with a warning that names the reason). GPU backends are loadable modules
 * (libkerac_cuda.so, found next to libkerac, in KERAC_MODULE_PATH, or by the loader);
 * a module that is missing or cannot initialise is an error with the exact reason. */
KC_API kc_status kc_backend_open(const char *device, kc_backend **out);
/* The same with every device option (kerac.h): opts->device as above, the GPU options go to
 * the module, memory_limit to set_memory_limit. NULL: the environment's
 * (kc_device_opts_default); kc_backend_open(d) is this with the environment's options and
 * device d. */
KC_API kc_status kc_backend_open_ex(const kc_device_opts *opts, kc_backend **out);
/* the backend a built model runs on (NULL before kc_model_build, or for NULL), owned
 * by the model: for programs that work at the backend level, e.g. to change a switch that
 * is read at each call (cpu_gemm_split) between two steps. Not for destroying. */
KC_API kc_backend *kc_model_backend(kc_model *m);

/* What a module exports (the symbol name is KC_BACKEND_MODULE_ENTRY). opts is never NULL
 * (libkerac passes zeroed options for "all defaults"); its strings live during the call
 * only: the module copies what it keeps. */
typedef kc_status (*kc_backend_module_init_fn)(int abi, const char *device, kc_backend **out, char *err,
                                               size_t err_size, const kc_device_opts *opts);
#define KC_BACKEND_MODULE_ENTRY "kc_backend_module_init"

#ifdef __cplusplus
}
#endif
#endif /* KERAC_BACKEND_H */
