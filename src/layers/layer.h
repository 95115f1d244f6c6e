/* layer.h — what a layer kind is: one const kc_layer_ops table per file in src/layers/.
 *
 * A layer instance (kc_layer) is one node of the model graph. Its life:
 *   init(opts)   validate and keep the configuration (from the public kc_*_opts struct)
 *   build()      in_shape[] is known: set out_shape and declare weights
 *   forward()    y = f(x) for a batch, in training or inference mode
 *   backward()   dx (and weight gradients) from dy
 * All math goes through the backend table; a layer never touches memory it did not get
 * from the planner: y/dx from the arena, `aux` (kept from forward to backward) and `ws`
 * (scratch) sized by aux_bytes() and workspace_bytes() before any allocation. */
#ifndef KC_LAYER_H
#define KC_LAYER_H

#include <stdbool.h>

#include "../core/core.h"
#include "kerac_backend.h"
#include "keras_keys.h"
#include "layer_kinds.h"

#define KC_MAX_INPUTS 8
#define KC_MAX_WEIGHTS 4
#define KC_NAME_MAX 128

typedef struct kc_layer kc_layer;

/* One variable of a layer (Keras order: trainable first). */
typedef struct kc_weight {
    char name[24];          /* "kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance" */
    kc_shape shape;         /* full shape, e.g. (3, 3, 1, 32) */
    int64_t size;
    bool trainable;
    const char *init;       /* initializer: its canonical name, static (kc__init_canonical), or a
                               layer's own KC_INIT_CONST string kept in its cfg */
    int64_t fan_in, fan_out;
    float *data;            /* device pointer into the model's parameter slab */
    float *grad;            /* device pointer into the gradient slab (trainable only) */
} kc_weight;

/* issue 13: host memory a layer reuses from call to call (synchronised BatchNormalization's
 * host copies), owned by the model: grown to the largest need, freed with the model. */
typedef struct kc__host_scratch {
    void *p;
    size_t cap;
} kc__host_scratch;

/* Arguments of one forward call. x[i]: (batch, in_shape[i]); y: (batch, out_shape). */
typedef struct kc_fwd {
    kc_backend *be;
    int batch;
    bool training;
    const float *x[KC_MAX_INPUTS];
    float *y;
    void *aux;              /* aux_bytes(batch), kept until backward */
    void *ws;               /* workspace_bytes(batch), scratch for this call only */
    size_t ws_bytes;        /* its size: the plan's, which may be for a larger batch */
    uint64_t seed;          /* per-step, per-layer seed (dropout) */
    /* issue 13: data-parallel with sync_batchnorm: the ranks' collective (else NULL) */
    const kc_collective *sync;
    kc__host_scratch *scratch; /* issue 13: the model's host scratch (with sync) */
    /* an Add's input k from a folded batch norm (bn_folded): that batch norm (else NULL) and its
     * aux; x[k] is then the batch norm's input */
    const kc_layer *fold[KC_MAX_INPUTS];
    const void *fold_aux[KC_MAX_INPUTS];
} kc_fwd;

/* Arguments of one backward call. dx[i] is NULL when input i needs no gradient.
 * Weight gradients go to l->w[k].grad, overwritten. dy may be overwritten (scratch). */
typedef struct kc_bwd {
    kc_backend *be;
    int batch;
    const float *x[KC_MAX_INPUTS];
    const float *y;
    float *dy;
    float *dx[KC_MAX_INPUTS];
    void *aux;
    void *ws;
    size_t ws_bytes;
    const kc_collective *sync; /* issue 13: as kc_fwd's */
    kc__host_scratch *scratch; /* issue 13: as kc_fwd's */
    unsigned dx_add;           /* bit k: dx[k] holds a gradient already, add input k's into it
                                  (only where the layer's dx_adds said it can) */
} kc_bwd;

enum {
    KC_LAYER_INPUT = 1u << 0,   /* the model's input (no forward or backward) */
    KC_LAYER_ALIAS = 1u << 1,   /* y is x's memory and dx is dy's (Flatten, Reshape) */
    KC_LAYER_ALIAS_INFERENCE = 1u << 2, /* outside training y is x's memory and forward is
                                           skipped (Dropout: the identity then) */
    KC_LAYER_NO_TRAINABLE_KEY = 1u << 3, /* Keras's get_config() writes no "trainable" and its
                                            constructor refuses one (SpatialDropout2D) */
};

typedef struct kc_layer_ops {
    const char *class_name;     /* Keras class name: "Conv2D" */
    const char *alias;          /* another spelling Keras accepts ("Convolution2D"), or NULL */
    const char *snake_name;     /* auto-name stem and .keras path: "conv2d" */
    size_t cfg_size;            /* bytes of the private configuration */
    size_t opts_size;           /* sizeof the public kc_*_opts */
    int min_inputs, max_inputs;
    unsigned flags;
    /* Validate opts (the public kc_*_opts) into l->cfg; messages name the layer. */
    kc_status (*init)(kc_layer *l, const void *opts);
    /* The configuration back as the public opts struct (normalised: defaults filled in,
     * strings are static names). Used to write Keras JSON. */
    void (*get_opts)(const kc_layer *l, void *opts);
    kc_status (*build)(kc_layer *l);
    size_t (*aux_bytes)(const kc_layer *l, int batch);        /* may be NULL: 0 */
    size_t (*workspace_bytes)(const kc_layer *l, int batch, kc_backend *be); /* may be NULL */
    kc_status (*forward)(kc_layer *l, const kc_fwd *a);
    kc_status (*backward)(kc_layer *l, const kc_bwd *a);
    int64_t (*flops)(const kc_layer *l);                      /* per example; may be NULL */
    /* The layer's activation (Conv2D, Dense, Activation, Softmax, ReLU); NULL for others. */
    kc_act_params (*activation)(const kc_layer *l);
    /* Where Keras finds a class it does not export from keras.layers (the custom layers of
     * keras.applications): the "module" and "registered_name" Keras 3 writes; NULL for
     * the others ("keras.layers", null). */
    const char *keras_module, *registered_name;
    /* Its Keras config keys (keras_keys.h; KC_KERAS_KEYS(table)); none for Add. */
    const kc__field *keras_keys;
    int n_keras_keys;
    /* The backend operations forward and backward may call (KC_OP_BIT(KC_OP_...) of each;
     * memory copies aside): the model checks them against the backend's supports when it
     * is built and names the layer it cannot run. The lowest is the layer's main kernel,
     * the one the placement log asks the backend to describe. */
    unsigned backend_ops;
    /* The main kernel's descriptor for a batch into desc (KC_OP_CONV2D: a kc_conv2d_desc,
     * KC_OP_POOL2D: a kc_pool2d_desc), for the backend's describe; NULL when it takes none. */
    void (*backend_desc)(const kc_layer *l, int batch, void *desc);
    /* Whether backward can add the gradient of input k into dx[k] (kc_bwd.dx_add) instead of
     * overwriting it, at this batch on backend be; NULL: never (the plan then gives it a buffer
     * of its own and adds that in). */
    bool (*dx_adds)(const kc_layer *l, int k, int batch, kc_backend *be);
} kc_layer_ops;

struct kc_layer {
    const kc_layer_ops *ops;
    char name[KC_NAME_MAX];
    void *cfg;                  /* ops->cfg_size bytes, owned */
    int index;                  /* node id in the model */
    int n_in;
    int in[KC_MAX_INPUTS];      /* producer node ids */
    kc_shape in_shape[KC_MAX_INPUTS];
    kc_shape out_shape;
    int n_weights;
    kc_weight w[KC_MAX_WEIGHTS];
    uint64_t seed;              /* layer seed (dropout), from the model seed */
    /* Set by the model when this (output) layer's softmax/sigmoid activation is folded
     * into the loss: forward then stops at the pre-activation (logits) and backward
     * starts from the gradient with respect to it. Layers with an activation (Conv2D,
     * Dense, Activation, Softmax) honour it; the model applies the activation itself
     * for predictions. */
    bool defer_act;
    /* Keras's `trainable: false` on the layer (kc_model_set_trainable): its weights get no
     * gradient (w->grad is NULL: backward skips their gradient) and no optimizer state;
     * BatchNormalization then runs in inference mode, in training too (Keras 3). */
    bool frozen;
    /* Where Keras 3 keeps this layer's weights when it came from a nested model and was
     * inlined by the reader ("functional/layers/conv2d"); "" otherwise (keras_h5.c). */
    char keras_path[2 * KC_NAME_MAX];
    /* Shared layers (Keras: one layer called at several nodes). A later call is a node of
     * its own, with the layer's name, kind and options; `shares` is the node of the first
     * call, whose weights it uses (-1: a layer's only or first call). Such a node owns no
     * weights (n_weights is 0, so nothing that lists the model's weights sees them twice):
     * w[0..n_views) are views of the first call's weights, each with a gradient buffer of
     * its own that the model adds into the first call's after the backward pass. */
    int shares;
    int n_views;
    int calls;                  /* on a first call: how many later calls share its weights */
    /* The name of the outermost nested model it came from, its group in a legacy .h5's
     * /model_weights (keras_h5_legacy.c); "" for a layer of the model itself. */
    char keras_h5_group[KC_NAME_MAX];
    /* BatchNormalization + ReLU fusion, set by the model for each plan
     * (src/model/fuse.c). On the BatchNormalization: relu_after, it applies the ReLU of its
     * only consumer itself (relu_max: that ReLU's upper clip, 0 for none), so its y is the
     * ReLU's output and its dy the gradient with respect to that; on the ReLU: absorbed, its
     * y and dy are the producer's memory and it has no forward or backward of its own. */
    bool relu_after, absorbed;
    float relu_max;
    /* Add + ReLU fusion (src/model/fuse.c): the Add has relu_after and relu_max as above (its y is
     * the ReLU's output; its backward does not read y); on the ReLU: fwd_absorbed, no forward of
     * its own, its y is the Add's memory, but it keeps its dy and its backward (the mask from y). */
    bool fwd_absorbed;
    /* a training BatchNormalization folded into the Add that reads it (src/model/fuse.c):
     * bn_folded, its forward only takes the batch statistics (its y is never written); the
     * Add's forward reads the batch norm's input and normalises it as it adds (kc_fwd.fold) */
    bool bn_folded;
    /* a ZeroPadding2D folded into the DepthwiseConv2D that reads it (src/model/fuse.c).
     * On the ZeroPadding2D: pad_folded (and absorbed: its y and dy are its input's memory, it has
     * no forward and no backward); on the depthwise convolution: fold_h, fold_w, the unpadded
     * input's size (0: nothing folded), and fold_top, fold_left, the padding it adds before its own
     * (the padding after is implied by the output size, as in kc_conv2d_desc). */
    bool pad_folded;
    int fold_h, fold_w, fold_top, fold_left;
    /* keras-save: the nested model it came from (1-based into kc_model.nests, 0: the model
     * itself) and its name there (the reader may have prefixed l->name), so that a save
     * writes the nesting back (src/io/keras_nest.c) */
    int keras_nest;
    char keras_inner[KC_NAME_MAX];
    /* keras-save: a TensorOp read from tf-keras's TFOpLambda, written back as one in the
     * Keras 2 flavour (keras_json_write.c) */
    bool keras_tf_op;
    /* keras-names: the class name as the Keras file read spelled it (tf-keras's registered
     * "Custom>CustomScaleLayer", an alias such as "Convolution2D") and the flavour of that
     * config (2 or 3; 0: built in kerac). The JSON writer writes it back unchanged in that
     * flavour and ops->class_name otherwise. */
    char keras_class[KC_NAME_MAX];
    int keras_class_flavour;
};

/* Whether training updates this weight: a trainable variable of a layer that is not frozen. */
static inline bool kc__weight_trains(const kc_layer *l, const kc_weight *w) { return w->trainable && !l->frozen; }
/* Whether the node has a weight that trains, its own or (a shared layer's later call) a view. */
static inline bool kc__layer_trains(const kc_layer *l) {
    for (int k = 0; k < l->n_weights + l->n_views; k++)
        if (kc__weight_trains(l, &l->w[k])) return true;
    return false;
}

/* Declare a weight during build(). fan_in/fan_out feed the glorot/he initializers. */
kc_status kc__layer_add_weight(kc_layer *l, const char *name, kc_shape shape, bool trainable,
                               const char *init, int64_t fan_in, int64_t fan_out);

/* Create a standalone layer from a public spec (kind looked up by class name, opts
 * validated by init). The name is opts->name or "" (the model assigns auto names). */
kc_status kc__layer_create(const kc_layer_spec *spec, kc_layer **out);
void kc__layer_destroy(kc_layer *l);

/* Registry: every layer kind of layer_kinds.h, looked up by Keras class name (aliases
 * accepted). */
const kc_layer_ops *kc__layer_find(const char *class_name);
int kc__layer_kind_count(void);
const kc_layer_ops *kc__layer_kind(int i);
/* "InputLayer, Conv2D, ..." (every kind's class name) into buf. */
const char *kc__layer_class_list(char *buf, size_t n);

/* Activations by Keras name ("relu", "softmax", ...; NULL or "" means linear). */
kc_status kc__act_parse(const char *name, kc_act_params *out);
const char *kc__act_name(const kc_act_params *a);
/* Whether the backward of this activation needs its input x (else y suffices). */
bool kc__act_needs_input(kc_act kind);
int64_t kc__act_flops(kc_act kind); /* rough per-element cost, for summaries */

/* Initializers by Keras name; validated at init. */
typedef struct kc__initializer {
    const char *name, *class_name; /* "glorot_uniform", "GlorotUniform" */
    int has_seed;                  /* its Keras config is {"seed": null} (else {}) */
    /* a general VarianceScaling (class_name "VarianceScaling"; NULL mode for the others):
     * its Keras config keys, written back as they were read */
    double vs_scale;
    const char *vs_mode, *vs_distribution;
    int is_constant;               /* Keras's Constant: every value vs_scale */
} kc__initializer;
/* Keras's Constant(value): its canonical name "constant(VALUE)", interned as the general
 * VarianceScaling ones (NULL when 64 distinct ones are already kept). */
const kc__initializer *kc__init_constant(double value);
/* A general VarianceScaling (EfficientNet's fan_out ones): its canonical name
 * "variance_scaling(SCALE,MODE,DISTRIBUTION)", kept for the process's life (at most 64
 * distinct ones); NULL with the reason in *why when a parameter is not Keras's. */
const kc__initializer *kc__init_variance_scaling(double scale, const char *mode, const char *distribution,
                                                 const char **why);
/* By snake name, class name or Keras's short spelling ("zero", "one"); NULL if unknown. */
const kc__initializer *kc__init_find(const char *name);
/* "glorot_uniform, glorot_normal, ..., ones": every name, in the table's order. */
extern const char kc__init_supported[];
bool kc__init_known(const char *name);
/* A weight initializer "const:VALUE" (kc__layer_add_weight, kc__init_fill): every value is
 * VALUE (LayerScale's init_values); not a name users give. */
#define KC_INIT_CONST "const:"
/* Fill n floats (host memory) following a Keras initializer. */
kc_status kc__init_fill(const char *name, float *dst, int64_t n, int64_t fan_in, int64_t fan_out,
                        kc_rng *rng);

/* Padding by Keras name. */
kc_status kc__padding_parse(const kc_layer *l, const char *padding, bool *same);
/* Output size and leading pad of one spatial axis, as Keras/TensorFlow compute them. */
void kc__conv_out_size(int in, int k, int stride, int dilation, bool same, int *out, int *pad_before);

/* The window of a convolution kind (Conv2D, DepthwiseConv2D, SeparableConv2D,
 * Conv2DTranspose), in its cfg: kernel size, strides, dilation and padding from the public
 * options (an int n for (n, n); zero strides / dilation for Keras's (1, 1)), validated as
 * Keras does; at build the input (h, w, c), the output (oh, ow) and the leading padding
 * (kc__conv_win_build; Conv2DTranspose sizes its output itself). */
typedef struct kc__conv_win {
    int kh, kw, sh, sw, dh, dw;
    bool same;
    int h, w, c, oh, ow, pad_top, pad_left; /* from build */
} kc__conv_win;
kc_status kc__conv_win_init(const kc_layer *l, const int kernel_size[2], const int strides[2],
                            const int dilation_rate[2], const char *padding, kc__conv_win *g);
/* The window's members of a kind's options struct, from g (inside its compound literal). */
#define KC_CONV_WIN_OPTS(g)                                                                        \
    .kernel_size = {(g).kh, (g).kw}, .strides = {(g).sh, (g).sw}, .padding = (g).same ? "same" : "valid", \
    .dilation_rate = {(g).dh, (g).dw}

/* KC_STATUS_SHAPE with what to do unless l's input is an image (H, W, C). */
kc_status kc__layer_need_hwc(const kc_layer *l);

/* The window's input (H, W, C) (in_shape[0], checked to be rank 3), output (OH, OW) and
 * leading padding (top, left); a clear error when the input is too small. */
kc_status kc__conv_win_build(const kc_layer *l, kc__conv_win *g);
/* The backend's descriptor of the window with f output channels (and the fused ReLU). */
kc_conv2d_desc kc__conv_win_desc(const kc__conv_win *g, int batch, int f, bool relu);

/* ---- helpers shared by the layer files (additive, layers helper) */
/* "Conv2D 'c1'" (or "Conv2D" while the layer has no name yet), for error messages;
 * thread-local rotating buffers, valid until a few more calls. */
const char *kc__layer_label(const kc_layer *l);
/* The canonical Keras snake name of an initializer ("GlorotUniform" -> "glorot_uniform"),
 * a static string; NULL when unknown. */
const char *kc__init_canonical(const char *name);
/* Fused activation of Conv2D / Dense over y (n values, rows of `cols` for softmax):
 * forward saves the pre-activation into pre when kc__act_needs_input and pre is given (NULL
 * outside training, where no backward follows), then applies the activation in place; backward turns dy into the gradient
 * of the pre-activation, in place. Linear is a no-op. */
kc_status kc__fused_act_forward(kc_backend *be, const kc_act_params *a, float *y, float *pre,
                                int64_t n, int cols);
kc_status kc__fused_act_backward(kc_backend *be, const kc_act_params *a, const float *pre,
                                 const float *y, float *dy, int64_t n, int cols);

/* Conv2D's and Dense's shared options: activation, use_bias and the two initializers
 * (validated; the initializer names come back as static canonical names). */
kc_status kc__parse_weighted(const kc_layer *l, const char *activation, int use_bias, const char *kernel_init,
                             const char *bias_init, kc_act_params *act, bool *bias, const char **kinit,
                             const char **binit);

/* Their Keras config keys around activity_regularizer, which Conv2D writes in both
 * flavours and Dense in Keras 2 only; opts_type has activation, use_bias and the two
 * initializers. */
#define KC_WEIGHTED_KEYS_HEAD(opts_type)                                                           \
    {"activation", KC_F_ACT, KC_F_W, offsetof(opts_type, activation), "linear", 0},                \
    {"use_bias", KC_F_BOOL, KC_F_W, offsetof(opts_type, use_bias), NULL, 1},                       \
    {"kernel_initializer", KC_F_INIT, KC_F_W, offsetof(opts_type, kernel_initializer), "glorot_uniform", 0}, \
    {"bias_initializer", KC_F_INIT, KC_F_W, offsetof(opts_type, bias_initializer), "zeros", 0},    \
    KC_KEY_NULL("kernel_regularizer", KC_F_W), KC_KEY_NULL("bias_regularizer", KC_F_W)
#define KC_WEIGHTED_KEYS_TAIL                                                                      \
    KC_KEY_NULL("kernel_constraint", KC_F_W), KC_KEY_NULL("bias_constraint", KC_F_W),              \
    KC_KEY_NULL("lora_rank", 0), KC_KEY_IGNORE("lora_alpha")

/* The window keys of the convolution kinds (Conv2D, Conv2DTranspose, DepthwiseConv2D,
 * SeparableConv2D), in Keras's order: kernel_size, strides, padding, the kind's own keys
 * there (the variadic part: Conv2DTranspose's output_padding, each with its comma),
 * data_format, dilation_rate; opts_type has the four members. */
#define KC_CONV_WINDOW_KEYS(opts_type, ...)                                                        \
    {"kernel_size", KC_F_INT2, KC_F_W, offsetof(opts_type, kernel_size), NULL, 0},                 \
    {"strides", KC_F_INT2, KC_F_W, offsetof(opts_type, strides), NULL, 1},                         \
    {"padding", KC_F_STR, KC_F_W, offsetof(opts_type, padding), "valid", 0}, __VA_ARGS__           \
    KC_KEY_CHANNELS_LAST(KC_F_W),                                                                  \
    {"dilation_rate", KC_F_INT2, KC_F_W, offsetof(opts_type, dilation_rate), NULL, 1}

/* A standalone activation layer (Activation, ReLU, Softmax): its cfg starts with this
 * header, which its init fills with the activation; build, forward, backward, flops and
 * activation are then these shared functions. */
typedef struct kc__act_layer_cfg {
    kc_act_params act;
    int64_t size;           /* values per example */
    int cols;               /* last axis (softmax rows) */
} kc__act_layer_cfg;
kc_status kc__act_layer_build(kc_layer *l);
kc_status kc__act_layer_forward(kc_layer *l, const kc_fwd *a);
kc_status kc__act_layer_backward(kc_layer *l, const kc_bwd *a);
int64_t kc__act_layer_flops(const kc_layer *l);
kc_act_params kc__act_layer_activation(const kc_layer *l);
/* In their ops tables, after .build: */
#define KC_ACT_LAYER_FNS                                                                           \
    .forward = kc__act_layer_forward, .backward = kc__act_layer_backward, .flops = kc__act_layer_flops, \
    .activation = kc__act_layer_activation

/* The elementwise merges with Keras's broadcasting (merge_ew.c; Add, Subtract, Multiply,
 * Average, Maximum, Minimum): their cfg. */
typedef struct kc__merge_cfg {
    kc_binop op;         /* ADD (also Average), SUB, MUL, MAX, MIN */
    bool average;        /* then divided by the number of inputs */
    int64_t size;        /* output values per example */
    int rank;            /* axes with the batch */
    int64_t dims[KC_BCAST_MAX_RANK];                  /* output shape, dims[0] (batch) set per call */
    int64_t full[KC_BCAST_MAX_RANK];                  /* the output's strides */
    int64_t strides[KC_MAX_INPUTS][KC_BCAST_MAX_RANK]; /* each input's, 0 where broadcast; [0]: per example */
    bool same[KC_MAX_INPUTS];                         /* input i has the output's shape */
} kc__merge_cfg;
/* A folded BatchNormalization's map for the Add that reads it (batchnorm.c; bn_folded): its
 * channels and, in *f, the batch's statistics from aux (training, not frozen) or the moving
 * ones. */
int kc__bn_fold_of(const kc_layer *bn, const void *aux, bool training, kc_bn_fold *f);
kc_status kc__merge_build(kc_layer *l, kc__merge_cfg *c);
kc_status kc__merge_forward(kc_layer *l, const kc__merge_cfg *c, const kc_fwd *a);
kc_status kc__merge_backward(kc_layer *l, const kc__merge_cfg *c, const kc_bwd *a);
size_t kc__merge_workspace(const kc_layer *l, const kc__merge_cfg *c, int batch);

/* TensorOp's operations by Keras 3 class ("Add", "TrueDivide", ...) and back; NULL if none. */
const char *kc__tensor_op_keras_class(const char *op);
const char *kc__tensor_op_from_keras_class(const char *cls);

/* Tri-state booleans: KC_DEFAULT means def. */
/* y is x's memory in this mode (no forward call, no buffer of its own); in training, no
 * backward call either (dx is dy's memory). */
static inline bool kc__layer_is_alias(const kc_layer *l, bool training) {
    return (l->ops->flags & KC_LAYER_ALIAS) || l->absorbed ||
           (!training && (l->ops->flags & KC_LAYER_ALIAS_INFERENCE));
}
static inline bool kc__bool3(int v, bool def) { return v == KC_DEFAULT ? def : v > 0; }

/* The ops table of each kind of layer_kinds.h (defined in its own file). */
#define KC__LAYER_OPS_EXTERN(id, opts_type) extern const kc_layer_ops kc__##id##_ops;
KC_LAYER_KINDS(KC__LAYER_OPS_EXTERN)
#undef KC__LAYER_OPS_EXTERN

#endif /* KC_LAYER_H */
