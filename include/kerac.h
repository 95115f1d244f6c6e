/* kerac.h — Keras-style deep learning in C: the public API.
 *
 * Everything a program needs: build a model (Sequential or Functional), compile it with a
 * loss, an optimizer and metrics, fit / evaluate / predict it on a dataset, and read or
 * write it as Keras's JSON model config.
 *
 * Conventions
 *   - Every fallible call returns kc_status; KC_STATUS_OK (0) is success. kc_last_error()
 *     gives a thread-local sentence naming the object and what to do.
 *   - Results come back through out-parameters. Whoever creates an object destroys it;
 *     every destroy function accepts NULL.
 *   - Options structs are zero-initialised Keras defaults: a field left out means what
 *     Keras means. Booleans whose Keras default is True are tri-state (KC_DEFAULT = 0,
 *     KC_TRUE, KC_FALSE).
 *   - Layouts are Keras's: channels-last NHWC activations, Conv2D kernels (kh, kw, in, out),
 *     Dense kernels (in, out).
 */
#ifndef KERAC_H
#define KERAC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KC_VERSION_MAJOR 0
#define KC_VERSION_MINOR 1
#define KC_VERSION_PATCH 0
#define KC_VERSION_STRING "0.1.0"

/* What libkerac.so exports: the functions declared in this header and kerac_backend.h.
 * The library is compiled with -fvisibility=hidden, so its internals (kc__*) stay out of
 * the dynamic symbol table (tests/check_exports.sh checks it). */
#if defined(__GNUC__) || defined(__clang__)
#define KC_API __attribute__((visibility("default")))
#else
#define KC_API
#endif

/* ---------------------------------------------------------------- status */

typedef enum kc_status {
    KC_STATUS_OK = 0,
    KC_STATUS_INVALID_ARGUMENT, /* a bad option or argument value */
    KC_STATUS_SHAPE,            /* shapes do not fit together */
    KC_STATUS_UNSUPPORTED,      /* valid Keras, not (yet) supported by kerac */
    KC_STATUS_BAD_FILE,         /* a file exists but its content is malformed */
    KC_STATUS_IO,               /* a file cannot be opened, read or written */
    KC_STATUS_OUT_OF_MEMORY,    /* an allocation failed or a memory limit was hit */
    KC_STATUS_STATE,            /* a call out of order (fit before compile, ...) */
    KC_STATUS_DEVICE,           /* a device or backend problem */
    KC_STATUS_NUMERIC,          /* NaN/Inf where a finite value was needed */
    KC_STATUS_INTERRUPTED,      /* a callback asked training to stop with an error */
    KC_STATUS_INTERNAL,         /* a bug in kerac: please report it */
    KC_STATUS_STORAGE           /* writing failed for want of room or a failing disk: no space
                                 * left, quota, file size limit, I/O error (the file that was
                                 * being replaced is intact) */
} kc_status;

/* The message of the last failed call on this thread ("" when none). */
KC_API const char *kc_last_error(void);
/* A short name for a status: "shape", "bad file", ... */
KC_API const char *kc_status_name(kc_status s);
/* Library version string, e.g. "0.1.0". */
KC_API const char *kc_version(void);

/* Evaluate a kc_status expression; on failure return it from the enclosing function. */
#define KC_TRY(expr)                                                                       \
    do {                                                                                   \
        kc_status kc_try_s_ = (expr);                                                      \
        if (kc_try_s_ != KC_STATUS_OK) return kc_try_s_;                                   \
    } while (0)

enum { KC_DEFAULT = 0, KC_TRUE = 1, KC_FALSE = -1 };

/* ---------------------------------------------------------------- logging */

typedef enum kc_log_level {
    KC_LOG_DEBUG = 0,
    KC_LOG_INFO = 1,
    KC_LOG_WARNING = 2,
    KC_LOG_ERROR = 3
} kc_log_level;

typedef void (*kc_log_fn)(kc_log_level level, const char *message, void *user);
/* Route log lines to fn (NULL restores the default: stderr). The level threshold starts
 * from KERAC_LOG_LEVEL (debug|info|warning|error or 0-3), default warning. */
KC_API void kc_log_set_callback(kc_log_fn fn, void *user);
KC_API void kc_log_set_level(kc_log_level level);
KC_API kc_log_level kc_log_get_level(void);
/* Parse "debug"/"info"/"warning"/"error" or "0".."3". */
KC_API kc_status kc_log_level_parse(const char *text, kc_log_level *out);

/* ---------------------------------------------------------------- threads */

/* Threads of every CPU parallel region and of OpenBLAS. n > 0 sets them; 0 (the default)
 * takes KERAC_NUM_THREADS, else OpenMP's default (OMP_NUM_THREADS, else one per core).
 * kc_get_num_threads says the count in force. */
KC_API void kc_set_num_threads(int n);
KC_API int kc_get_num_threads(void);

/* How long a CPU thread that waits for the others (at the end of each parallel loop) spins
 * before it sleeps, in libgomp's spins (its GOMP_SPINCOUNT variable). libgomp's default,
 * 300,000 spins (milliseconds), costs nothing on an idle machine, but when another program
 * runs on the same cores a waiting thread spins away the time its partner needs and CPU
 * training becomes 10-30 times slower (bench/RESULTS.md, "Waiting threads"). This count is
 * 5-10 times faster on a busy machine and within a few percent on an idle one. libgomp reads
 * GOMP_SPINCOUNT once, when it is loaded (before main), so a library cannot set it: the
 * kerac command starts itself again with GOMP_SPINCOUNT=KC_CPU_SPIN_DEFAULT when neither it
 * nor OMP_WAIT_POLICY is in the environment; a program that embeds kerac sets it in its
 * environment (or does the same). */
#define KC_CPU_SPIN_DEFAULT "3000"

/* ---------------------------------------------------------------- shapes */

#define KC_MAX_RANK 4

/* The shape of one example, without the batch dimension: (28, 28, 1) is rank 3. */
typedef struct kc_shape {
    int rank;
    int dim[KC_MAX_RANK];
} kc_shape;

/* ---------------------------------------------------------------- layers */

typedef struct kc_input_opts {
    const char *name;
    int shape[KC_MAX_RANK]; /* per-example shape; trailing zeros end it: {28, 28, 1} */
} kc_input_opts;

typedef struct kc_conv2d_opts {
    const char *name;
    int filters;
    int kernel_size[2];
    int strides[2];           /* default (1, 1) */
    const char *padding;      /* "valid" (default) or "same" */
    int dilation_rate[2];     /* default (1, 1) */
    const char *activation;   /* default "linear" */
    int use_bias;             /* KC_DEFAULT = True */
    const char *kernel_initializer; /* default "glorot_uniform" */
    const char *bias_initializer;   /* default "zeros" */
    int groups;               /* input and output channels in `groups` separate convolutions; 0 = 1 */
} kc_conv2d_opts;

typedef struct kc_depthwise_conv2d_opts { /* DepthwiseConv2D */
    const char *name;
    int kernel_size[2];
    int strides[2];           /* default (1, 1) */
    const char *padding;      /* "valid" (default) or "same" */
    int depth_multiplier;     /* output channels per input channel; default 1 */
    int dilation_rate[2];     /* default (1, 1) */
    const char *activation;   /* default "linear" */
    int use_bias;             /* KC_DEFAULT = True */
    const char *depthwise_initializer; /* default "glorot_uniform" */
    const char *bias_initializer;      /* default "zeros" */
} kc_depthwise_conv2d_opts;

typedef struct kc_dense_opts {
    const char *name;
    int units;
    const char *activation;
    int use_bias;
    const char *kernel_initializer;
    const char *bias_initializer;
} kc_dense_opts;

typedef struct kc_pool2d_opts { /* MaxPooling2D, AveragePooling2D */
    const char *name;
    int pool_size[2];         /* default (2, 2) */
    int strides[2];           /* default: pool_size */
    const char *padding;      /* "valid" (default) or "same" */
} kc_pool2d_opts;

typedef struct kc_global_pool_opts {
    const char *name;
    int keepdims;             /* KC_TRUE keeps (1, 1, C); default False */
} kc_global_pool_opts;

typedef struct kc_flatten_opts {
    const char *name;
} kc_flatten_opts;

typedef struct kc_reshape_opts {
    const char *name;
    int target_shape[KC_MAX_RANK]; /* per-example; -1 once to infer; trailing zeros end it */
} kc_reshape_opts;

/* Dropout's noise_shape (Keras): the mask's shape, counted with the batch axis; an axis
 * of size 1 shares one draw along it (EfficientNet's (None, 1, 1, 1): one per example). */
typedef struct kc_noise_shape {
    int n;                    /* 0: null (a draw per value) */
    int v[KC_MAX_RANK + 1];   /* per axis: 0 = None (the input's size), else the size */
} kc_noise_shape;

typedef struct kc_dropout_opts {
    const char *name;
    float rate;
    uint64_t seed;            /* 0: derived from the model seed */
    kc_noise_shape noise_shape; /* Dropout only */
} kc_dropout_opts;

typedef struct kc_batchnorm_opts {
    const char *name;
    int axis;                 /* only -1 (channels) is supported; 0 means -1 */
    float momentum;           /* default 0.99 */
    float epsilon;            /* default 1e-3 */
    int center;               /* KC_DEFAULT = True (beta) */
    int scale;                /* KC_DEFAULT = True (gamma) */
} kc_batchnorm_opts;

typedef struct kc_activation_opts { /* Activation */
    const char *name;
    const char *activation;
} kc_activation_opts;

typedef struct kc_relu_opts { /* ReLU */
    const char *name;
    float max_value;          /* 0: none */
    float negative_slope;
    float threshold;
} kc_relu_opts;

typedef struct kc_softmax_opts { /* Softmax */
    const char *name;
    int axis;                 /* only -1; 0 means -1 */
} kc_softmax_opts;

typedef struct kc_zeropad2d_opts { /* ZeroPadding2D */
    const char *name;
    int padding[2][2];        /* ((top, bottom), (left, right)); all zero means ((1,1),(1,1)) */
} kc_zeropad2d_opts;


typedef struct kc_merge_opts { /* Add, Concatenate */
    const char *name;
    int axis;                 /* Concatenate: only -1 (channels); 0 means -1 */
} kc_merge_opts;

/* ---- normalisation, scaling, resampling and shape layers */
#define KC_MAX_CONSTS 64
typedef struct kc_consts {    /* a number, or a list of numbers (one per channel) */
    int n;                    /* values in v; 0: not given (Keras's default, or null) */
    int list;                 /* 1: written as a list even for one value */
    float v[KC_MAX_CONSTS];
} kc_consts;

typedef struct kc_axes {      /* an axis or a list of axes (counted with the batch axis, or negative) */
    int n;                    /* 0: Keras's default */
    int list;                 /* 1: written as a list */
    int none;                 /* 1: null (Normalization: one mean and variance for all values) */
    int v[KC_MAX_RANK + 1];
} kc_axes;

typedef struct kc_rescaling_opts { /* Rescaling: y = x * scale + offset */
    const char *name;
    kc_consts scale;          /* required: a number or one per channel */
    kc_consts offset;         /* default 0 */
} kc_rescaling_opts;

typedef struct kc_normalization_opts { /* Normalization (preprocessing) */
    const char *name;
    kc_axes axis;             /* default (-1,): the last axis; null: one value for all */
    kc_consts mean, variance; /* both given, or neither (then weights mean/variance/count) */
    int invert;               /* KC_TRUE: y = mean + x * std; default False */
} kc_normalization_opts;

typedef struct kc_layernorm_opts { /* LayerNormalization */
    const char *name;
    kc_axes axis;             /* default -1; a list of trailing axes */
    float epsilon;            /* default 1e-3 */
    int center, scale;        /* default True */
    int rms_scaling;          /* only False (Keras 3 key) */
} kc_layernorm_opts;

typedef struct kc_groupnorm_opts { /* GroupNormalization */
    const char *name;
    int groups;               /* default 32; -1: one group per channel */
    int axis;                 /* only -1 (channels); 0 means -1 */
    float epsilon;            /* default 1e-3 */
    int center, scale;        /* default True */
} kc_groupnorm_opts;

typedef struct kc_upsampling2d_opts { /* UpSampling2D */
    const char *name;
    int size[2];              /* default (2, 2) */
    const char *interpolation; /* "nearest" (default) or "bilinear" */
} kc_upsampling2d_opts;

typedef struct kc_cropping2d_opts { /* Cropping2D */
    const char *name;
    int cropping[2][2];       /* ((top, bottom), (left, right)); default none */
} kc_cropping2d_opts;

typedef struct kc_permute_opts { /* Permute */
    const char *name;
    int dims[KC_MAX_RANK];    /* a permutation of 1..rank (the batch axis stays) */
} kc_permute_opts;

typedef struct kc_repeat_vector_opts { /* RepeatVector: (F) -> (n, F) */
    const char *name;
    int n;
} kc_repeat_vector_opts;
/* ---- the custom layers keras.applications registers */
typedef struct kc_custom_scale_opts { /* InceptionResNetV2's CustomScaleLayer: x0 + x1 * scale */
    const char *name;
    float scale;              /* required by Keras (no default): 0 means 0 */
} kc_custom_scale_opts;

/* broadcasting and activations: activation layers and operation nodes */
typedef struct kc_leaky_relu_opts { /* LeakyReLU */
    const char *name;
    float negative_slope;     /* 0 means Keras's default, 0.3 (Keras 2 calls it alpha), unless: */
    int negative_slope_given; /* non-zero: negative_slope as given, even 0 (a file's explicit 0) */
} kc_leaky_relu_opts;

typedef struct kc_elu_opts { /* ELU */
    const char *name;
    float alpha;              /* 0 means Keras's default, 1.0, unless: */
    int alpha_given;          /* non-zero: alpha as given, even 0 (a file's explicit 0) */
} kc_elu_opts;

typedef struct kc_prelu_opts { /* PReLU: y = x > 0 ? x : alpha * x, alpha a weight */
    const char *name;
    const char *alpha_initializer; /* NULL: "zeros" */
    kc_axes shared_axes;           /* axes counted with the batch (1 = first after it) along which alpha
                                      is shared (size 1); none by default */
} kc_prelu_opts;

/* A Keras 3 operation node of a Functional model (`x + 3`, `x * (1 / 6)`, `a * b`,
 * keras.ops.multiply(a, b)): class TensorOp. */
typedef struct kc_tensor_op_opts {
    const char *name;
    const char *op;           /* "add", "subtract", "multiply", "divide", "maximum", "minimum" */
    int scalar_side;          /* 0: two tensors; 1: tensor op scalar; 2: scalar op tensor */
    float scalar;
} kc_tensor_op_opts;
/* augmentation: image augmentation (random in training, the identity in inference) and
 * preprocessing (Resizing, CenterCrop: always applied) layers, with Keras 3's options. */
/* A Keras augmentation factor: not given (Keras's null), a number f, or a pair (lower, upper). */
typedef struct kc_factor {
    float lower, upper;
    int given;                /* 0: not given; 1: a number (lower = upper = f); 2: a pair */
} kc_factor;
#define KC_FACTOR(f) {(f), (f), 1} /* in initializers; (kc_factor)KC_FACTOR(f) elsewhere */
#define KC_FACTOR_PAIR(a, b) {(a), (b), 2}

typedef struct kc_random_flip_opts { /* RandomFlip */
    const char *name;
    const char *mode;         /* "horizontal", "vertical", default "horizontal_and_vertical" */
    uint64_t seed;            /* 0: derived from the model seed */
} kc_random_flip_opts;

typedef struct kc_random_rotation_opts { /* RandomRotation */
    const char *name;
    kc_factor factor;         /* fractions of a full turn: f means (-f, f) */
    const char *fill_mode;    /* "reflect" (default), "wrap", "constant", "nearest" */
    const char *interpolation; /* "bilinear" (default), "nearest" */
    float fill_value;
    uint64_t seed;
} kc_random_rotation_opts;

typedef struct kc_random_zoom_opts { /* RandomZoom, RandomTranslation */
    const char *name;
    kc_factor height_factor;  /* required; f means (-f, f) */
    kc_factor width_factor;   /* RandomZoom: not given means as the height; RandomTranslation: required */
    const char *fill_mode;    /* as RandomRotation */
    const char *interpolation;
    float fill_value;
    uint64_t seed;
} kc_random_zoom_opts;

typedef struct kc_crop_opts { /* RandomCrop, CenterCrop */
    const char *name;
    int height, width;        /* the output size, required */
    uint64_t seed;            /* RandomCrop only */
} kc_crop_opts;

typedef struct kc_random_color_opts { /* RandomContrast, RandomBrightness */
    const char *name;
    kc_factor factor;         /* required */
    float value_range[2];     /* (0, 0) means Keras's (0, 255) */
    uint64_t seed;
} kc_random_color_opts;

typedef struct kc_resizing_opts { /* Resizing */
    const char *name;
    int height, width;        /* required */
    const char *interpolation; /* "bilinear" (default), "nearest" */
    int crop_to_aspect_ratio; /* KC_TRUE / KC_FALSE (default) */
    int pad_to_aspect_ratio;
    const char *fill_mode;    /* only "constant" (Keras's only choice) */
    float fill_value;
    int antialias;            /* only false */
} kc_resizing_opts;
/* ---- convolutions (SeparableConv2D, Conv2DTranspose) */
typedef struct kc_separable_conv2d_opts { /* SeparableConv2D: depthwise, then a 1x1 convolution */
    const char *name;
    int filters;
    int kernel_size[2];
    int strides[2];           /* default (1, 1) */
    const char *padding;      /* "valid" (default) or "same" */
    int depth_multiplier;     /* default 1 */
    int dilation_rate[2];     /* default (1, 1) */
    const char *activation;   /* default "linear" */
    int use_bias;             /* KC_DEFAULT = True */
    const char *depthwise_initializer; /* default "glorot_uniform" */
    const char *pointwise_initializer; /* default "glorot_uniform" */
    const char *bias_initializer;      /* default "zeros" */
} kc_separable_conv2d_opts;

/* An optional pair of integers: Keras's None when `set` is 0. */
typedef struct kc_opt_int2 {
    int set;
    int v[2];
} kc_opt_int2;

typedef struct kc_conv2d_transpose_opts { /* Conv2DTranspose; kernel (kh, kw, filters, in) */
    const char *name;
    int filters;
    int kernel_size[2];
    int strides[2];           /* default (1, 1) */
    const char *padding;      /* "valid" (default) or "same" */
    kc_opt_int2 output_padding; /* default None (Keras's output size rule); each < its stride */
    int dilation_rate[2];     /* default (1, 1) */
    const char *activation;   /* default "linear" */
    int use_bias;             /* KC_DEFAULT = True */
    const char *kernel_initializer; /* default "glorot_uniform" */
    const char *bias_initializer;   /* default "zeros" */
} kc_conv2d_transpose_opts;

/* regularising layers (SpatialDropout2D shares kc_dropout_opts) */
typedef struct kc_stochastic_depth_opts { /* ConvNeXt's StochasticDepth (drop path) */
    const char *name;
    float drop_path_rate;     /* in [0, 1); one draw per example, in training only */
} kc_stochastic_depth_opts;
typedef struct kc_layer_scale_opts { /* ConvNeXt's LayerScale: y = x * gamma (per channel) */
    const char *name;
    float init_values;        /* gamma's starting value (Keras: Constant(init_values)) */
    int projection_dim;       /* the input's last axis; required */
} kc_layer_scale_opts;
/* Gaussian noise layers (active in training only, the identity in inference) */
typedef struct kc_gaussian_noise_opts { /* GaussianNoise: y = x + stddev * N(0, 1) */
    const char *name;
    float stddev;             /* in [0, 1] (Keras 3's range) */
    uint64_t seed;            /* 0: derived from the model seed */
} kc_gaussian_noise_opts;
typedef struct kc_gaussian_dropout_opts { /* GaussianDropout: y = x * N(1, rate / (1 - rate)) */
    const char *name;
    float rate;               /* in [0, 1) */
    uint64_t seed;            /* 0: derived from the model seed */
} kc_gaussian_dropout_opts;

/* A layer kind and its options. Make one with the KC_<LAYER>(...) macros below, which
 * take designated initializers: KC_CONV2D(.filters = 32, .kernel_size = {3, 3}). */
typedef struct kc_layer_spec {
    const char *class_name; /* Keras class name: "Conv2D" */
    const void *opts;       /* the matching kc_*_opts */
} kc_layer_spec;

#define KC_LAYER_SPEC_(cls, type, ...) (&(const kc_layer_spec){cls, &(const type){__VA_ARGS__}})
#define KC_INPUT(...) KC_LAYER_SPEC_("InputLayer", kc_input_opts, __VA_ARGS__)
#define KC_CONV2D(...) KC_LAYER_SPEC_("Conv2D", kc_conv2d_opts, __VA_ARGS__)
#define KC_DEPTHWISE_CONV2D(...) KC_LAYER_SPEC_("DepthwiseConv2D", kc_depthwise_conv2d_opts, __VA_ARGS__)
#define KC_DENSE(...) KC_LAYER_SPEC_("Dense", kc_dense_opts, __VA_ARGS__)
#define KC_MAXPOOL2D(...) KC_LAYER_SPEC_("MaxPooling2D", kc_pool2d_opts, __VA_ARGS__)
#define KC_AVGPOOL2D(...) KC_LAYER_SPEC_("AveragePooling2D", kc_pool2d_opts, __VA_ARGS__)
#define KC_GLOBALAVGPOOL2D(...) KC_LAYER_SPEC_("GlobalAveragePooling2D", kc_global_pool_opts, __VA_ARGS__)
#define KC_FLATTEN(...) KC_LAYER_SPEC_("Flatten", kc_flatten_opts, __VA_ARGS__)
#define KC_RESHAPE(...) KC_LAYER_SPEC_("Reshape", kc_reshape_opts, __VA_ARGS__)
#define KC_DROPOUT(...) KC_LAYER_SPEC_("Dropout", kc_dropout_opts, __VA_ARGS__)
#define KC_BATCHNORM(...) KC_LAYER_SPEC_("BatchNormalization", kc_batchnorm_opts, __VA_ARGS__)
#define KC_ACTIVATION(...) KC_LAYER_SPEC_("Activation", kc_activation_opts, __VA_ARGS__)
#define KC_RELU(...) KC_LAYER_SPEC_("ReLU", kc_relu_opts, __VA_ARGS__)
#define KC_SOFTMAX(...) KC_LAYER_SPEC_("Softmax", kc_softmax_opts, __VA_ARGS__)
#define KC_ZEROPAD2D(...) KC_LAYER_SPEC_("ZeroPadding2D", kc_zeropad2d_opts, __VA_ARGS__)
#define KC_ADD(...) KC_LAYER_SPEC_("Add", kc_merge_opts, __VA_ARGS__)
#define KC_CONCATENATE(...) KC_LAYER_SPEC_("Concatenate", kc_merge_opts, __VA_ARGS__)
/* normalisation and resampling */
#define KC_RESCALING(...) KC_LAYER_SPEC_("Rescaling", kc_rescaling_opts, __VA_ARGS__)
#define KC_NORMALIZATION(...) KC_LAYER_SPEC_("Normalization", kc_normalization_opts, __VA_ARGS__)
#define KC_LAYERNORM(...) KC_LAYER_SPEC_("LayerNormalization", kc_layernorm_opts, __VA_ARGS__)
#define KC_GROUPNORM(...) KC_LAYER_SPEC_("GroupNormalization", kc_groupnorm_opts, __VA_ARGS__)
#define KC_UPSAMPLING2D(...) KC_LAYER_SPEC_("UpSampling2D", kc_upsampling2d_opts, __VA_ARGS__)
#define KC_CROPPING2D(...) KC_LAYER_SPEC_("Cropping2D", kc_cropping2d_opts, __VA_ARGS__)
#define KC_GLOBALMAXPOOL2D(...) KC_LAYER_SPEC_("GlobalMaxPooling2D", kc_global_pool_opts, __VA_ARGS__)
#define KC_PERMUTE(...) KC_LAYER_SPEC_("Permute", kc_permute_opts, __VA_ARGS__)
#define KC_REPEAT_VECTOR(...) KC_LAYER_SPEC_("RepeatVector", kc_repeat_vector_opts, __VA_ARGS__)
/* broadcasting and activations */
#define KC_MULTIPLY(...) KC_LAYER_SPEC_("Multiply", kc_merge_opts, __VA_ARGS__)
#define KC_SUBTRACT(...) KC_LAYER_SPEC_("Subtract", kc_merge_opts, __VA_ARGS__)
#define KC_AVERAGE(...) KC_LAYER_SPEC_("Average", kc_merge_opts, __VA_ARGS__)
#define KC_MAXIMUM(...) KC_LAYER_SPEC_("Maximum", kc_merge_opts, __VA_ARGS__)
#define KC_MINIMUM(...) KC_LAYER_SPEC_("Minimum", kc_merge_opts, __VA_ARGS__)
#define KC_LEAKY_RELU(...) KC_LAYER_SPEC_("LeakyReLU", kc_leaky_relu_opts, __VA_ARGS__)
#define KC_ELU(...) KC_LAYER_SPEC_("ELU", kc_elu_opts, __VA_ARGS__)
#define KC_PRELU(...) KC_LAYER_SPEC_("PReLU", kc_prelu_opts, __VA_ARGS__)
#define KC_TENSOR_OP(...) KC_LAYER_SPEC_("TensorOp", kc_tensor_op_opts, __VA_ARGS__)
/* transfer learning */
#define KC_CUSTOM_SCALE(...) KC_LAYER_SPEC_("CustomScaleLayer", kc_custom_scale_opts, __VA_ARGS__)
/* augmentation */
#define KC_RANDOM_FLIP(...) KC_LAYER_SPEC_("RandomFlip", kc_random_flip_opts, __VA_ARGS__)
#define KC_RANDOM_ROTATION(...) KC_LAYER_SPEC_("RandomRotation", kc_random_rotation_opts, __VA_ARGS__)
#define KC_RANDOM_ZOOM(...) KC_LAYER_SPEC_("RandomZoom", kc_random_zoom_opts, __VA_ARGS__)
#define KC_RANDOM_TRANSLATION(...) KC_LAYER_SPEC_("RandomTranslation", kc_random_zoom_opts, __VA_ARGS__)
#define KC_RANDOM_CROP(...) KC_LAYER_SPEC_("RandomCrop", kc_crop_opts, __VA_ARGS__)
#define KC_CENTER_CROP(...) KC_LAYER_SPEC_("CenterCrop", kc_crop_opts, __VA_ARGS__)
#define KC_RANDOM_CONTRAST(...) KC_LAYER_SPEC_("RandomContrast", kc_random_color_opts, __VA_ARGS__)
#define KC_RANDOM_BRIGHTNESS(...) KC_LAYER_SPEC_("RandomBrightness", kc_random_color_opts, __VA_ARGS__)
#define KC_RESIZING(...) KC_LAYER_SPEC_("Resizing", kc_resizing_opts, __VA_ARGS__)
/* convolutions */
#define KC_SEPARABLE_CONV2D(...) KC_LAYER_SPEC_("SeparableConv2D", kc_separable_conv2d_opts, __VA_ARGS__)
#define KC_CONV2D_TRANSPOSE(...) KC_LAYER_SPEC_("Conv2DTranspose", kc_conv2d_transpose_opts, __VA_ARGS__)
/* regularising layers */
#define KC_SPATIAL_DROPOUT2D(...) KC_LAYER_SPEC_("SpatialDropout2D", kc_dropout_opts, __VA_ARGS__)
#define KC_STOCHASTIC_DEPTH(...) KC_LAYER_SPEC_("StochasticDepth", kc_stochastic_depth_opts, __VA_ARGS__)
#define KC_LAYER_SCALE(...) KC_LAYER_SPEC_("LayerScale", kc_layer_scale_opts, __VA_ARGS__)
/* Gaussian noise layers */
#define KC_GAUSSIAN_NOISE(...) KC_LAYER_SPEC_("GaussianNoise", kc_gaussian_noise_opts, __VA_ARGS__)
#define KC_GAUSSIAN_DROPOUT(...) KC_LAYER_SPEC_("GaussianDropout", kc_gaussian_dropout_opts, __VA_ARGS__)

/* ---------------------------------------------------------------- models */

typedef struct kc_model kc_model;

/* A node is one layer's output inside a model; negative means "no node" (an earlier
 * builder call failed: the model remembers the first error and kc_compile reports it). */
typedef int kc_node;

KC_API kc_status kc_sequential(const char *name, kc_model **out); /* name NULL: "sequential" */
KC_API kc_status kc_functional(const char *name, kc_model **out); /* name NULL: "functional" */
KC_API void kc_model_destroy(kc_model *m);

/* Sequential: append a layer after the last one. The first layer must be KC_INPUT. */
KC_API kc_status kc_add(kc_model *m, const kc_layer_spec *spec);
/* Functional: an input, a layer applied to one node, a merge of several nodes. */
KC_API kc_node kc_input(kc_model *m, const kc_layer_spec *input_spec);
KC_API kc_node kc_apply(kc_model *m, const kc_layer_spec *spec, kc_node x);
KC_API kc_node kc_merge(kc_model *m, const kc_layer_spec *spec, const kc_node *xs, int n);
/* Shared layers: call the layer of node `layer` again, on xs[0..n) (Keras: one layer object
 * called at several nodes: a Siamese tower, one Dense on two branches). The new node has the
 * layer's name and options and uses its weights: they are stored, saved and counted once,
 * their gradient is the sum over the calls and they have one optimizer state. Each call
 * has its own output shape; the weights' shapes must fit every call (checked at build). */
KC_API kc_node kc_apply_shared(kc_model *m, kc_node layer, const kc_node *xs, int n);
/* Functional: the output node (default: the last layer added). */
KC_API kc_status kc_set_output(kc_model *m, kc_node y);
/* The first error recorded by a builder call (KC_STATUS_OK when none); its message. */
KC_API kc_status kc_model_status(const kc_model *m);
KC_API const char *kc_model_error(const kc_model *m);

/* Where a model runs and how its device is set up. A model is placed on its device when it
 * is built, and loading a model file builds it, so the options go to the loaders
 * (kc_model_load_ex, kc_model_from_json_ex, kc_checkpoint_load_ex) or, for a model made
 * with kc_sequential / kc_functional / kc_default_cnn, to kc_model_set_device_opts before
 * it is built. Zero-initialised means: the CPU, no memory cap, the GPU's defaults. */
/* cpu-speed: the CPU backend's vector kernels. One build carries kernels for the x86-64
 * baseline, AVX2 + FMA (x86-64-v3) and AVX-512 (x86-64-v4) and runs the best the processor
 * has (AUTO); a named set the processor lacks is an error when the backend is created. */
typedef enum kc_cpu_isa { KC_CPU_ISA_AUTO = 0, KC_CPU_ISA_BASELINE, KC_CPU_ISA_AVX2, KC_CPU_ISA_AVX512 } kc_cpu_isa;

typedef struct kc_device_opts {
    const char *device;           /* "cpu", "cuda" (= "gpu"), "cuda:N" or "auto"; NULL or "": "cpu".
                                   * "cuda" never falls back; "auto" falls back to the CPU with a
                                   * warning that names the reason */
    const char *gpu_memory;       /* GPU memory: "grow" (NULL or ""), "preallocate" (0.9 of the free
                                   * memory, taken at start), "preallocate=FRACTION", "limit=SIZE" */
    size_t memory_limit;          /* cap on what kerac allocates on the device, the CPU included
                                   * (0: none) */
    size_t cudnn_workspace_limit; /* the largest cuDNN workspace (0: 1 GiB) */
    int cudnn_benchmark;          /* KC_TRUE: time every cuDNN convolution algorithm on the first
                                   * step and keep the fastest (default: cuDNN's heuristics) */
    int deterministic;            /* KC_TRUE: deterministic cuDNN algorithms only */
    int tf32;                     /* KC_TRUE: allow TF32 tensor-core math in cuBLAS and cuDNN
                                   * (default: plain fp32) */
    /* cpu-speed: the CPU's kernels */
    int cpu_isa;                  /* kc_cpu_isa: KC_CPU_ISA_AUTO (0) the best the processor runs */
    int cpu_winograd;             /* KC_FALSE: no Winograd for 3x3 stride-1 convolutions, im2col +
                                   * GEMM instead; default: Winograd where it applies and wins
                                   * (enough channels); KC_TRUE: at any channel count */
    /* speed-b: Winograd's output tile */
    int cpu_winograd_tile;        /* 2, 3, 4: F(2x2,3x3), F(3x3,3x3), F(4x4,3x3) only; 0: per shape */
    /* workload A: the CPU's direct convolutions */
    int cpu_conv_blocked;         /* KC_FALSE: no register-blocked direct convolutions (stride 1, at
                                   * most 32 channels in and 64 out), im2col + GEMM instead */
    int cpu_hugepages;            /* KC_FALSE: no transparent huge pages asked for the CPU's
                                   * blocks of 4 MiB or more (the plan's arena) */
    int cudnn_grouped;            /* KC_FALSE: grouped and depthwise convolutions on the GPU by the
                                   * CUDA module's own kernels only (default: cuDNN first) */
    /* fusion of BatchNormalization with the ReLU after it */
    int cpu_fuse_bn_relu;         /* KC_FALSE: a BatchNormalization whose only consumer is a ReLU
                                   * (ReLU layer, ReLU(max_value), Activation("relu")) runs apart
                                   * from it; default: one pass over the activations for both */
    /* ZeroPadding2D folded into the DepthwiseConv2D after it */
    int cpu_fold_pad;             /* KC_FALSE: a ZeroPadding2D whose only consumer is a depthwise
                                   * convolution writes its padded copy; default: the convolution
                                   * reads the unpadded input and pads as it goes */
    /* inference (predict, evaluate) in tiles of the batch that stay in the caches */
    int cpu_infer_tile;           /* KC_FALSE: every layer runs on the whole batch; default: the
                                   * CPU runs a batch in tiles of examples whose activations fit
                                   * its caches, each tile through all layers (same results) */
    /* the CPU's split of tall, skinny GEMMs across the threads */
    int cpu_gemm_split;           /* KC_FALSE: every GEMM is one OpenBLAS call on OpenBLAS's own
                                   * threading; default: a GEMM with m or k >= 4096 and n <= 256
                                   * runs as one single-threaded call per thread on fixed slices
                                   * of C (kc_backend.cpu_gemm_split) */
    /* a convolution's input gradient added in place where another consumer wrote it first */
    int cpu_conv_dx_add;          /* KC_FALSE: such a convolution writes its input gradient into a
                                   * buffer of its own that is then added in (a pass more);
                                   * default: the CPU's backward-data adds into the gradient
                                   * (GEMM with beta = 1, col2im adding; not Winograd) */
    /* fusion of an Add with the ReLU after it */
    int cpu_fuse_add_relu;        /* KC_FALSE: an Add of two same-shape inputs whose only consumer
                                   * is a ReLU runs apart from it; default: the Add's pass applies
                                   * the ReLU (the ReLU keeps its backward) */
    /* kerac's own tiles for GEMMs with a small dimension */
    int cpu_gemm_small;           /* KC_FALSE: every GEMM goes to OpenBLAS; default: a GEMM whose
                                   * C has at most 256 columns (512 for some on AVX-512) and
                                   * whose other sizes fit (kc_backend.cpu_gemm_small) runs on
                                   * register tiles read straight from the operands: the 1x1
                                   * convolutions' GEMMs */
    /* fusion of a batch norm's normalisation into the Add that reads it */
    int cpu_fuse_bn_add;          /* KC_FALSE: a training batch norm whose only consumer is an Add
                                   * of two same-shape inputs writes its output, which the Add
                                   * reads; default: the batch norm only takes its statistics and
                                   * the Add's pass normalises as it reads (and applies its ReLU) */
} kc_device_opts;

/* The options from the environment, the only place kerac reads them: KERAC_DEVICE,
 * KERAC_GPU_MEMORY, KERAC_MEMORY_LIMIT, KERAC_CUDNN_WORKSPACE_LIMIT (sizes like 512M, 2G),
 * KERAC_CUDNN_BENCHMARK, KERAC_DETERMINISTIC, KERAC_TF32 (1/true/yes/on), KERAC_CPU_ISA
 * (auto, baseline, avx2, avx512: the CPU kernels, kc_cpu_isa), KERAC_CPU_WINOGRAD (0: off, 1: at
 * any channel count),
 * KERAC_CPU_WINOGRAD_TILE (auto, 2, 3 or 4: cpu_winograd_tile), KERAC_CPU_CONV_BLOCKED (0: off),
 * KERAC_CPU_HUGEPAGES (0: off), KERAC_CUDNN_GROUPED (0: off), KERAC_CPU_FUSE_BN_RELU (0: off),
 * KERAC_CPU_FOLD_PAD (0: off), KERAC_CPU_INFER_TILE (0: off), KERAC_CPU_GEMM_SPLIT (0: off),
 * KERAC_CPU_CONV_DX_ADD (0: off), KERAC_CPU_FUSE_ADD_RELU (0: off), KERAC_CPU_GEMM_SMALL (0: off),
 * KERAC_CPU_FUSE_BN_ADD (0: off); an unset
 * variable leaves its zero default. The strings point into the environment: copy them
 * before changing it (kerac copies what it keeps). A size that does not parse is
 * KC_STATUS_INVALID_ARGUMENT naming the variable (*out then has every other field). A
 * model given no options reads these when it is built. */
KC_API kc_status kc_device_opts_default(kc_device_opts *out);
/* Before the model is built: use these options (copied) instead of the environment's; NULL
 * goes back to the environment's. The whole set replaces what kc_model_set_device and
 * kc_model_set_memory_limit set before it. */
KC_API kc_status kc_model_set_device_opts(kc_model *m, const kc_device_opts *opts);
/* Only the device ("cpu", "cuda", "cuda:N", "auto"), the other options staying as they are
 * (kc_model_set_device_opts, else the environment's). Before the model is built. */
KC_API kc_status kc_model_set_device(kc_model *m, const char *device);
/* The device in use once built ("cpu", "cuda:0 (NVIDIA H200)"), "" before. */
KC_API const char *kc_model_device(const kc_model *m);
/* issue 13: several GPUs in one process (MirroredStrategy's form). kc_fit trains one replica
 * of the model per GPU cuda:ids[i], each in a thread of its own: every global batch
 * (kc_fit_opts.batch_size, a multiple of n) is split evenly across them, the gradients are
 * summed by NCCL (one communicator per GPU; through the host with a warning when
 * libnccl.so.2 cannot be loaded) in buckets overlapped with the backward pass, every replica
 * applies the same update, BatchNormalization statistics are each replica's own unless
 * kc_fit_opts.sync_batchnorm, the loss and metrics are over the whole batch, and the
 * callbacks, checkpoints and history are the model's (replica 0's) alone. The model itself
 * is replica 0 on cuda:ids[0]: call this before it is built, or after building it there.
 * ids NULL and n 0: every GPU CUDA sees. n 1: cuda:ids[0] alone (no replicas). Errors: an
 * index listed twice or that does not exist, no GPU at all. Not together with a
 * kc_fit_opts.collective of several ranks (one GPU per rank there). */
KC_API kc_status kc_model_set_gpus(kc_model *m, const int *ids, int n);

/* Seed for weight initialisation, dropout and shuffling (default 0 -> fixed seed 1337). */
KC_API kc_status kc_model_set_seed(kc_model *m, uint64_t seed);

/* Introspection (valid once the graph is complete; building happens lazily). */
KC_API kc_status kc_model_build(kc_model *m); /* infer shapes, create and initialise weights */
KC_API const char *kc_model_name(const kc_model *m);
KC_API int kc_model_num_layers(const kc_model *m);
typedef struct kc_layer_info {
    const char *name;
    const char *class_name;
    kc_shape output_shape;    /* per example */
    int64_t params;           /* all parameters */
    int64_t trainable_params;
    int64_t flops;            /* forward multiply-adds x 2, per example */
    int num_inputs;
    const char *inputs[8];    /* names of the layers feeding this one */
    int trainable;            /* 0: frozen (kc_model_set_trainable, Keras's trainable: false) */
    /* shared layers (kc_apply_shared): which call of its layer this node is (0: the first or
     * only one, where its parameters are counted; k > 0: a later call, params 0), and which
     * call of each input's layer it takes (Keras's node index, "conv2d[1][0]") */
    int call;
    int input_calls[8];
} kc_layer_info;
KC_API kc_status kc_model_layer_info(kc_model *m, int index, kc_layer_info *out);
KC_API kc_status kc_model_input_shape(kc_model *m, kc_shape *out);
KC_API kc_status kc_model_output_shape(kc_model *m, kc_shape *out);

/* Transfer learning: which layers train (Keras's layer.trainable and model.trainable).
 * A frozen layer's weights get no gradient and no optimizer state, and its
 * BatchNormalization runs in inference mode in training too (as Keras 3); no backward runs
 * below the lowest trainable layer. The flag is part of the model: Keras JSON, .keras and
 * .h5 files read and write it ("trainable": false).
 * kc_model_set_trainable: name NULL or "" is the whole model (model.trainable: every layer,
 * and the model's own flag); otherwise the layer of that name or, when none has it, every
 * layer whose name starts with it ("block5_"); no match is KC_STATUS_INVALID_ARGUMENT.
 * kc_model_set_trainable_from: the layers before `name` (in model order) are frozen, it and
 * every later one train (Keras's `for layer in model.layers[:i]: layer.trainable = False`).
 * Either may be called at any time: on a built model the parameter slab is laid out again
 * (values kept); on a compiled model the optimizer's state restarts (zeroed slots, iteration
 * 0), as Keras's recompile after changing `trainable` does. */
KC_API kc_status kc_model_set_trainable(kc_model *m, const char *name, int trainable);
KC_API kc_status kc_model_set_trainable_from(kc_model *m, const char *name);

/* Weights: every variable in Keras order (per layer: trainable first, then the rest);
 * kc_weight_info.trainable says whether training updates it (0 in a frozen layer). */
KC_API int kc_model_num_weights(kc_model *m);
typedef struct kc_weight_info {
    const char *layer;        /* layer name */
    const char *name;         /* "kernel", "bias", "gamma", "beta", "moving_mean", ... */
    kc_shape shape;           /* full variable shape (not per example) */
    int64_t size;
    int trainable;
} kc_weight_info;
KC_API kc_status kc_model_weight_info(kc_model *m, int index, kc_weight_info *out);
KC_API kc_status kc_model_get_weight(kc_model *m, int index, float *dst, int64_t size);
KC_API kc_status kc_model_set_weight(kc_model *m, int index, const float *src, int64_t size);

/* Per-layer timing: when on, every forward and backward call of a layer is timed (the
 * backend is synchronised around each call, so this slows GPU training a little). */
KC_API kc_status kc_model_set_profiling(kc_model *m, int on);
typedef struct kc_layer_timing {
    const char *name;
    const char *class_name;
    double forward_seconds;   /* summed over calls */
    double backward_seconds;
    int64_t forward_calls, backward_calls;
} kc_layer_timing;
KC_API kc_status kc_model_layer_timing(const kc_model *m, int index, kc_layer_timing *out);
/* Time spent outside the layers in training steps: loss, optimizer, batch copies. */
KC_API kc_status kc_model_step_overhead(const kc_model *m, double *loss_seconds, double *optimizer_seconds);

/* Chrome trace-event JSON of training steps first..last (1-based, counted over the run,
 * inclusive): per thread one track with spans of the step, each layer's forward and
 * backward, the loss, the optimizer update, waiting for data, uploading the next batch,
 * waiting for the device and the callbacks; the loader thread's "load batch". Call before
 * kc_fit; the traced steps are timed like kc_model_set_profiling (the backend is
 * synchronised around each layer). kc_model_write_trace writes what was recorded (it
 * opens in Perfetto or chrome://tracing); kc_model_trace_spans counts it. */
KC_API kc_status kc_model_trace_steps(kc_model *m, int64_t first, int64_t last);
KC_API kc_status kc_model_write_trace(const kc_model *m, const char *path);
KC_API int64_t kc_model_trace_spans(const kc_model *m);

/* Check numerics (like tf.debugging.enable_check_numerics): every layer's forward output
 * and, in training, its input and weight gradients are checked for NaN and Inf; the first
 * one found fails the call (fit, evaluate, predict) with KC_STATUS_NUMERIC naming the
 * layer, the training step and the tensor. Each output is copied to the host: slow, for
 * debugging. Off by default (TerminateOnNaN then stops at a non-finite loss). */
KC_API kc_status kc_model_set_check_numerics(kc_model *m, int on);

/* ---------------------------------------------------------------- memory */

/* What one training (or inference) step needs on the model's device, computed from the
 * graph before anything is allocated. Activation and gradient buffers are placed in one
 * arena by lifetime, so `arena` is less than the sum of its parts. */
typedef struct kc_memory_plan {
    int batch_size;              /* examples per (micro-)batch */
    int training;
    size_t parameters;           /* every weight, non-trainable included */
    size_t gradients;            /* weight gradients (x2 with gradient accumulation) */
    size_t optimizer_state;      /* Adam's m and v, momentum, ... */
    size_t activations;          /* layer outputs and forward state kept for backward, summed */
    size_t activation_gradients; /* gradients of layer outputs, summed */
    size_t workspace;            /* the largest layer scratch (im2col, ...) */
    size_t arena;                /* activations + their gradients + workspace after reuse */
    size_t batch_buffers;        /* the input feed's 2 batches of inputs and targets, step scalars */
    size_t device_total;         /* the peak: parameters + gradients + optimizer state + arena + batch buffers */
    size_t host_pipeline;        /* host: the loader's ring (prefetch 2) and the feed's page-locked batches */
    /* inference runs a batch as tiles of this many examples (predict and evaluate on
     * the CPU, kc_device_opts.cpu_infer_tile); activations, workspace and arena are a tile's.
     * batch_size when there are no tiles, and for training. */
    int tile;
} kc_memory_plan;

/* Plan a step at batch_size (training or inference; grad_accum > 1 adds the accumulation
 * buffer). Before kc_compile, the optimizer is assumed to be Adam (two slots). Inference
 * plans the tile it runs (out->tile). */
KC_API kc_status kc_model_plan_memory(kc_model *m, int batch_size, int training, int grad_accum, kc_memory_plan *out);
/* Bytes the model's device allocations held at their peak since the model was built (the
 * arena's and the weights' high-water mark), and now. */
KC_API kc_status kc_model_memory_usage(kc_model *m, size_t *peak, size_t *in_use);
/* Cap what the model may allocate on its device, the CPU included (0: no cap; default:
 * kc_device_opts.memory_limit, from KERAC_MEMORY_LIMIT for a model given no options). */
KC_API kc_status kc_model_set_memory_limit(kc_model *m, size_t bytes);
/* "512M", "2G", "1.5GiB", "1000000" (bytes): K/M/G/T are powers of 1024. */
KC_API kc_status kc_parse_size(const char *text, size_t *out);

/* ---------------------------------------------------------------- compile */

typedef struct kc_optimizer_opts {
    const char *name;         /* "sgd", "adam", "adamw", "rmsprop" (default "adam") */
    double learning_rate;     /* 0: Keras default (0.01 for sgd, 0.001 otherwise) */
    double momentum;          /* sgd (default 0), rmsprop (default 0) */
    int nesterov;             /* sgd: KC_TRUE */
    double beta_1, beta_2;    /* adam/adamw: default 0.9, 0.999 */
    double epsilon;           /* default 1e-7 */
    double weight_decay;      /* adamw: default 0.004 */
    double rho;               /* rmsprop: default 0.9 */
    double clipnorm;          /* each weight's gradient clipped to this norm, as Keras (0: none) */
    double global_clipnorm;   /* all gradients scaled so that their joint norm is at most this (0: none) */
    /* learning-rate schedule: "" / NULL (constant), "exponential_decay", "cosine_decay",
     * "piecewise_constant" */
    const char *schedule;
    int64_t decay_steps;      /* exponential / cosine */
    double decay_rate;        /* exponential */
    int staircase;            /* exponential: KC_TRUE */
    double alpha;             /* cosine: final fraction (default 0) */
    int num_boundaries;       /* piecewise: boundaries (steps) and num_boundaries+1 values */
    const int64_t *boundaries;
    const double *values;
} kc_optimizer_opts;

#define KC_SGD(...) ((kc_optimizer_opts){.name = "sgd", __VA_ARGS__})
#define KC_ADAM(...) ((kc_optimizer_opts){.name = "adam", __VA_ARGS__})
#define KC_ADAMW(...) ((kc_optimizer_opts){.name = "adamw", __VA_ARGS__})
#define KC_RMSPROP(...) ((kc_optimizer_opts){.name = "rmsprop", __VA_ARGS__})

#define KC_MAX_METRICS 4
typedef struct kc_compile_opts {
    kc_optimizer_opts optimizer;
    /* "sparse_categorical_crossentropy" (default), "categorical_crossentropy",
     * "binary_crossentropy", "mean_squared_error" ("mse"), "mean_absolute_error" ("mae") */
    const char *loss;
    int from_logits;          /* KC_TRUE: the model outputs logits */
    /* "accuracy" (binary when the output's last axis is 1, else sparse or categorical, as
     * Keras chooses; per position for a per-pixel output),
     * "sparse_categorical_accuracy", "categorical_accuracy", "top_k_accuracy" /
     * "sparse_top_k_categorical_accuracy" (k = top_k, default 5) */
    const char *metrics[KC_MAX_METRICS];
    int top_k;
} kc_compile_opts;

KC_API kc_status kc_compile(kc_model *m, const kc_compile_opts *opts);

/* ---------------------------------------------------------------- data */

typedef struct kc_dataset kc_dataset;

/* Open a dataset by spec:
 *   "fashion-mnist[:train|:test]"   Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
 *   "mnist:DIR[:train|:test]"       IDX files (raw or .gz) in DIR, Keras/LeCun names
 *   "fashion-mnist:DIR[:train|:test]"
 *   "cifar10:DIR[:train|:test]"     CIFAR-10 binary batches (data_batch_N.bin, test_batch.bin)
 *   "npy:X.npy,Y.npy"               uint8 or float32 images (N, H, W[, C]); integer labels (N,),
 *                                   or label tensors of any dtype (one-hot, binary, masks, targets)
 *   "idx:IMAGES,LABELS"             a pair of IDX files
 *   "images:DIR"                    a folder of images, one subfolder per class (default options
 *                                   of kc_dataset_open_images)
 * uint8 images are scaled to [0, 1]. */
KC_API kc_status kc_dataset_open(const char *spec, kc_dataset **out);
/* Float32 images holding NaN or Inf are refused when a dataset file is opened (BAD_FILE
 * naming the file and the first such example: one NaN pixel leaves NaN weights). allow = 1
 * accepts them, for the whole process (kerac --allow-nonfinite-input). */
KC_API void kc_set_allow_nonfinite_input(int allow);
/* A dataset from memory (copied): x is (n, shape...) float32, y is (n,) class indices. */
KC_API kc_status kc_dataset_from_memory(const float *x, const int32_t *y, int64_t n, kc_shape shape,
                                 int num_classes, kc_dataset **out);
/* Examples [start, start + count) as a new dataset sharing the same storage. */
KC_API kc_status kc_dataset_slice(const kc_dataset *d, int64_t start, int64_t count, kc_dataset **out);
KC_API void kc_dataset_destroy(kc_dataset *d);
KC_API int64_t kc_dataset_size(const kc_dataset *d);
KC_API kc_shape kc_dataset_shape(const kc_dataset *d);
KC_API int kc_dataset_num_classes(const kc_dataset *d); /* max label + 1 */
/* Host memory behind a dataset (shared by its slices): bytes held in memory, and bytes
 * read on demand from a memory-mapped file (.npy images and raw IDX images are mapped, not
 * loaded: datasets larger than RAM work; gzipped IDX and CIFAR files are read into memory). */
KC_API kc_status kc_dataset_memory(const kc_dataset *d, size_t *resident, size_t *mapped);
/* Copy examples [start, start + count) into x (count, shape...) and y (count), either may be NULL. */
KC_API kc_status kc_dataset_read(const kc_dataset *d, int64_t start, int64_t count, float *x, int32_t *y);
/* ---- label tensors: targets other than one class index per example (one-hot or float
 * targets (N, K), binary targets (N,) / (N, 1) as floats, per-pixel class masks (N, H, W),
 * regression targets of the output's shape). kc_fit / kc_evaluate check them against the
 * model's output and loss (see README, "Labels and targets"). */
/* One example's labels as stored, e.g. (K) or (H, W); rank 0 for class indices (y). */
KC_API kc_shape kc_dataset_target_shape(const kc_dataset *d);
/* Labels of examples [start, start + count) as floats into t (count, target shape...);
 * class indices are written as floats (one per example). */
KC_API kc_status kc_dataset_read_targets(const kc_dataset *d, int64_t start, int64_t count, float *t);
/* A dataset from memory (copied) with label tensors t (n, target_shape...). */
KC_API kc_status kc_dataset_from_memory_targets(const float *x, const float *t, int64_t n, kc_shape shape,
                                                kc_shape target_shape, kc_dataset **out);
/* Whether d fits compiled model m as kc_fit / kc_evaluate will check it: the example shape,
 * and the labels against the output and the loss (SHAPE naming both shapes and what to do). */
KC_API kc_status kc_model_check_data(kc_model *m, const kc_dataset *d);
/* The loss a loaded .keras / .json file was compiled with in Keras (its compile_config:
 * "binary_crossentropy" or BinaryCrossentropy(from_logits=True) ...): 1 with *loss (owned
 * by the model, Keras's snake_case name) and *from_logits set, 0 when the file has none or
 * one kerac does not know. kerac train / evaluate use it when --loss is not given. */
KC_API int kc_model_saved_loss(const kc_model *m, const char **loss, int *from_logits);

/* ---- a folder of images (Keras's image_dataset_from_directory) */

typedef enum kc_color_mode { KC_COLOR_RGB = 0, KC_COLOR_GRAYSCALE = 1, KC_COLOR_RGBA = 2 } kc_color_mode;
typedef enum kc_interpolation {
    KC_INTERP_BILINEAR = 0, KC_INTERP_NEAREST = 1, KC_INTERP_BICUBIC = 2, KC_INTERP_AREA = 3
} kc_interpolation;
typedef enum kc_label_mode { KC_LABEL_INT = 0, KC_LABEL_CATEGORICAL = 1, KC_LABEL_BINARY = 2 } kc_label_mode;
/* Where decoded images are kept. MEMORY: decoded once, held in memory as float32 (like
 * tf.data.cache()); FILE: decoded once into opts.cache_file and read back memory-mapped
 * (datasets larger than memory); NONE: decoded again by the pool of threads each time the
 * loader gathers a batch (memory: the loader's ring only). */
typedef enum kc_image_cache {
    KC_IMAGE_CACHE_AUTO = 0, KC_IMAGE_CACHE_MEMORY = 1, KC_IMAGE_CACHE_FILE = 2, KC_IMAGE_CACHE_NONE = 3
} kc_image_cache;

typedef struct kc_image_opts {
    int height, width;             /* 0: Keras's 256 x 256 */
    kc_color_mode color_mode;      /* 1, 3 or 4 channels */
    kc_interpolation interpolation; /* Keras's resize without antialiasing */
    int crop_to_aspect_ratio;      /* central crop to the target's aspect ratio, then resize */
    int pad_to_aspect_ratio;       /* pad with zeros to the target's aspect ratio, then resize */
    kc_label_mode label_mode;      /* stored with the dataset; labels are class indices in all modes */
    const char *const *class_names; /* NULL: the subfolders' names in sorted order; else their order */
    int num_class_names;
    int no_shuffle;                /* keep the sorted file order (Keras: shuffle=False) */
    uint64_t seed;                 /* file order: numpy RandomState(seed).shuffle, as Keras (< 2^32) */
    int follow_links;              /* descend into symlinked folders (loops are detected) */
    int threads;                   /* decode threads; 0: one per core */
    int64_t max_pixels;            /* refuse larger images (decompression bombs); 0: 100 million */
    int skip_bad_images;           /* a corrupt image is a warning and is left out; else an error */
    int dct_scaling;               /* JPEG: decode at 1/2, 1/4, 1/8 size in the DCT when the target
                                    * is at most half the image's size (faster; not Keras's pixels) */
    /* the cache of decoded images (tf.data.cache()) */
    kc_image_cache cache;          /* AUTO (0): in memory when it fits in half the available memory,
                                    * else decoded per batch */
    const char *cache_file;        /* KC_IMAGE_CACHE_FILE: the file (reused while files and options match) */
} kc_image_opts;

/* Decode every image under dir/<class>/... (.jpg .jpeg .png .bmp .gif, any case; other
 * files are ignored) with a pool of threads, resized as opts say, scaled to [0, 1]: once
 * into the cache (opts.cache), or for each batch gathered when there is none. Examples are
 * in Keras's order: files sorted, then shuffled with the seed, so that the validation split
 * of Keras's subset="both" is the tail (kc_dataset_split_tail). opts NULL: the defaults.
 * The same seed gives the same examples for any thread count and any cache. */
KC_API kc_status kc_dataset_open_images(const char *dir, const kc_image_opts *opts, kc_dataset **out);
/* Keras's validation split: the last int(fraction * n) examples are the validation set. */
KC_API kc_status kc_dataset_split_tail(const kc_dataset *d, double fraction, kc_dataset **train, kc_dataset **val);
/* Class i's name (subfolder) for datasets of images, else NULL. */
KC_API const char *kc_dataset_class_name(const kc_dataset *d, int i);
/* The image options a dataset of images was made with (0 for other datasets, 1 when filled). */
KC_API int kc_dataset_image_opts(const kc_dataset *d, kc_image_opts *out);
/* Images left out as corrupt (skip_bad_images). */
KC_API int64_t kc_dataset_skipped(const kc_dataset *d);
/* Where a dataset of images keeps its decoded images (MEMORY, FILE or NONE; -1 for other
 * datasets), with the bytes the cache holds and the cache file (else NULL); either may be NULL. */
KC_API int kc_dataset_image_cache(const kc_dataset *d, size_t *bytes, const char **file);
/* The path (relative to the folder) of example i of a dataset of images, else NULL. */
KC_API const char *kc_dataset_file(const kc_dataset *d, int64_t i);
/* One image file, decoded and resized as opts say: x gets height * width * channels floats in
 * [0, 1] (HWC). */
KC_API kc_status kc_image_load(const char *path, const kc_image_opts *opts, float *x);
/* Parse "bilinear", "grayscale", "categorical"... -1 when unknown. */
KC_API int kc_interpolation_parse(const char *s);
KC_API int kc_color_mode_parse(const char *s);
KC_API int kc_label_mode_parse(const char *s);
KC_API const char *kc_interpolation_name(kc_interpolation i);
KC_API const char *kc_color_mode_name(kc_color_mode c);
KC_API const char *kc_label_mode_name(kc_label_mode l);

/* ---------------------------------------------------------------- GPU doctor, monitoring, placement */

/* `kerac doctor` as a library call: checks kerac's CUDA module (what it was built with,
 * whether it loads), the NVIDIA driver (libcuda.so.1: present, version, enough for the
 * module's CUDA), cuDNN / cuBLAS / NCCL as the loader finds them (path, version, match),
 * every GPU (compute capability, memory, whether the module has code for it), the
 * environment variables that change what happens (CUDA_VISIBLE_DEVICES, KERAC_*,
 * LD_LIBRARY_PATH), a TensorFlow installation's build against the same machine, and ends
 * with the verdict: the device `--device auto` uses, and why. Every NVIDIA library is
 * loaded at run time (dlopen); a missing one is a finding, never an error of the call. */
typedef enum kc_check_status {
    KC_CHECK_OK = 0,
    KC_CHECK_SKIPPED,  /* not checked: what it needs is missing (the message says what) */
    KC_CHECK_WARNING,  /* works, with a caveat; the fix says how to remove it */
    KC_CHECK_PROBLEM   /* breaks the GPU path (or TensorFlow's); the fix says what to do */
} kc_check_status;

typedef struct kc_doctor_check {
    const char *id;      /* "kerac", "module", "driver", "cudnn", "cublas", "nccl", "gpus",
                          * "gpu:N", "visible_devices", "env", "ld_library_path",
                          * "tensorflow", "backend" */
    kc_check_status status;
    const char *message; /* one line */
    const char *fix;     /* one sentence for a warning or a problem, "" otherwise */
} kc_doctor_check;

/* The verdict, also `kerac doctor`'s exit code. */
typedef enum kc_doctor_verdict {
    KC_DOCTOR_GPU = 0,    /* `--device auto` runs on a GPU: every check it needs passed */
    KC_DOCTOR_CPU = 1,    /* only the CPU, and nothing is broken: no NVIDIA driver
                           * (libcuda.so.1 absent), CUDA_VISIBLE_DEVICES empty or -1 (GPUs
                           * hidden on purpose), every GPU older than any CUDA kerac can be
                           * built with supports, or a CPU-only kerac on a machine without
                           * a driver */
    KC_DOCTOR_BROKEN = 2  /* a GPU path is there but broken: the CUDA module is missing
                           * or cannot load beside a driver, cuDNN / cuBLAS missing or of
                           * the wrong version, a driver too old for the module's CUDA or
                           * that cannot start or sees no GPU, the toolkit's stub
                           * libcuda.so in the way, CUDA_VISIBLE_DEVICES naming a GPU that
                           * does not exist, a GPU the module lacks code for (a rebuild
                           * would fix it), or a backend that fails to start */
} kc_doctor_verdict;

typedef struct kc_doctor_opts {
    /* A TensorFlow installation to check: a site-packages folder, the tensorflow package
     * folder or its python/platform/build_info.py. NULL: search the python3 on PATH and the
     * usual places. */
    const char *tensorflow;
    int tensorflow_search;  /* KC_FALSE: no TensorFlow check unless `tensorflow` is set */
    /* When every other check passes, start the CUDA backend as `--device auto` would (a
     * context and a test kernel on cuda:0). KC_FALSE: skip (the verdict then rests on the
     * checks alone). */
    int start_backend;
} kc_doctor_opts;

typedef struct kc_doctor_report kc_doctor_report;
/* Run every check (opts may be NULL). Fails only for bad arguments or out of memory. */
KC_API kc_status kc_doctor_run(const kc_doctor_opts *opts, kc_doctor_report **out);
KC_API void kc_doctor_report_destroy(kc_doctor_report *r);
KC_API int kc_doctor_num_checks(const kc_doctor_report *r);
KC_API kc_status kc_doctor_get_check(const kc_doctor_report *r, int i, kc_doctor_check *out);
KC_API kc_doctor_verdict kc_doctor_get_verdict(const kc_doctor_report *r);
/* The device `--device auto` uses: "cuda:0 (NVIDIA H200)" or "cpu". */
KC_API const char *kc_doctor_device(const kc_doctor_report *r);
/* Why, in one line ("no NVIDIA driver: libcuda.so.1 not found"), and the fix ("" when the
 * GPU is healthy). */
KC_API const char *kc_doctor_reason(const kc_doctor_report *r);
KC_API const char *kc_doctor_fix(const kc_doctor_report *r);
/* The report as text (one line per check, "fix:" lines, the verdict) or as one JSON
 * document with the same content; *out is malloc'd, free it with kc_free. */
KC_API kc_status kc_doctor_text(const kc_doctor_report *r, char **out);
KC_API kc_status kc_doctor_json(const kc_doctor_report *r, char **out);

/* Why the model runs where it runs, once built: "device cpu was asked for", "auto:
 * cuda:0 (NVIDIA H200) passed every check", "no GPU: libcuda.so.1 not found (no NVIDIA
 * driver); run `kerac doctor`"; "" before. */
KC_API const char *kc_model_device_reason(const kc_model *m);

/* GPU readings through NVML (libnvidia-ml.so.1, loaded at run time). A value that NVML
 * cannot give is -1. */
typedef struct kc_gpu_reading {
    int index;                /* NVML's index (nvidia-smi's numbering: every GPU) */
    int cuda_index;           /* cuda:N in this process, -1 when hidden or not known */
    char name[96];
    double utilization;       /* percent of the time a kernel ran */
    double memory_utilization; /* percent of the time device memory was read or written */
    double memory_used, memory_total; /* bytes */
    double temperature;       /* degrees Celsius */
    double power, power_limit; /* watts */
    int samples;              /* readings summarised in this one (1 for a single reading) */
} kc_gpu_reading;

/* One reading of every GPU now, into out (at most max); *n how many. KC_STATUS_DEVICE
 * with the reason when NVML is not there or cannot start. */
KC_API kc_status kc_gpu_readings(kc_gpu_reading *out, int max, int *n);

/* A background thread reading one GPU (NVML index; -1: every GPU) every interval seconds
 * (0: 0.5 s). */
typedef struct kc_monitor kc_monitor;
KC_API kc_status kc_monitor_start(int gpu, double interval, kc_monitor **out);
KC_API int kc_monitor_num_gpus(const kc_monitor *mon);
/* The latest reading of the monitor's i-th GPU; 0 when there is none yet (or mon is NULL). */
KC_API int kc_monitor_latest(kc_monitor *mon, int i, kc_gpu_reading *out);
/* Since the last reset: mean utilisation and power, peak memory used and temperature;
 * samples counts the readings. 0 when none. */
KC_API int kc_monitor_summary(kc_monitor *mon, int i, kc_gpu_reading *out);
KC_API void kc_monitor_reset(kc_monitor *mon);
/* Stop the thread and free the monitor; NULL is fine. */
KC_API void kc_monitor_stop(kc_monitor *mon);

/* The input-bound verdict of an epoch: when the training loop waited for the loader's next
 * batch for at least 10% of the epoch (and 50 ms), writes "the GPU waited for data 38% of
 * the step time; raise --prefetch or use more loader threads" ("the CPU" on the CPU:
 * device is kc_model_device's text) into buf and returns 1; else returns 0 and buf is "". */
KC_API int kc_input_bound_verdict(double wait_seconds, double epoch_seconds, const char *device, char *buf, size_t n);

/* Log, at the first training step, one line per layer with its device, kernel (CPU) or
 * cuDNN algorithm (GPU) and workspace, whatever the log level (default: off, or
 * KERAC_LOG_DEVICE_PLACEMENT=1). */
KC_API void kc_set_log_device_placement(int on);
KC_API int kc_get_log_device_placement(void);

/* ---------------------------------------------------------------- training */

typedef struct kc_epoch_logs {
    int epoch;                /* 0-based, like Keras's callbacks (the history prints 1-based) */
    int64_t steps;
    double loss;
    double metrics[KC_MAX_METRICS];
    int has_val;
    double val_loss;
    double val_metrics[KC_MAX_METRICS];
    double lr;
    double seconds;
    double images_per_second;
    int batch_size;           /* examples per optimizer step */
    int micro_batch;          /* examples per forward/backward (batch_size / grad_accum) */
    int grad_accum;
    /* The model's GPU over the epoch (has_gpu 0 on the CPU or without NVML): mean
     * utilisation and power, peak memory used and temperature. */
    int has_gpu;
    kc_gpu_reading gpu;
    /* Seconds the training loop waited for the loader's next batch this epoch (see
     * kc_input_bound_verdict). */
    double input_wait_seconds;
} kc_epoch_logs;

typedef struct kc_batch_logs {
    int epoch;
    int64_t step;             /* 0-based step within the epoch */
    int64_t steps;            /* steps in this epoch */
    double loss;              /* running mean over the epoch so far */
    double metrics[KC_MAX_METRICS];
    double seconds;           /* since the epoch began */
    int64_t samples;          /* seen in this epoch */
    int has_gpu;              /* the model's GPU, latest reading (0 on the CPU or without NVML) */
    kc_gpu_reading gpu;
} kc_batch_logs;

/* What a callback tells fit to do next. */
typedef enum kc_callback_action {
    KC_CONTINUE = 0,
    KC_STOP_TRAINING = 1      /* finish after this epoch/batch, like model.stop_training */
} kc_callback_action;

typedef struct kc_callback {
    const char *name;         /* shown as the history's stop reason when it stops training */
    void *user;
    kc_callback_action (*on_train_begin)(kc_model *m, void *user);
    kc_callback_action (*on_epoch_begin)(kc_model *m, int epoch, void *user);
    kc_callback_action (*on_batch_end)(kc_model *m, const kc_batch_logs *logs, void *user);
    kc_callback_action (*on_epoch_end)(kc_model *m, const kc_epoch_logs *logs, void *user);
    void (*on_train_end)(kc_model *m, void *user);
    /* Set by kerac's built-in callbacks (kc_callback_destroy calls it); NULL in yours. */
    void (*destroy)(struct kc_callback *self);
    /* Optional: the callback's own state, kept in checkpoints (kc_fit_opts.checkpoint_dir)
     * and given back on resume right after on_train_begin. get_state writes at most `max`
     * (KC_CALLBACK_STATE_MAX) numbers and returns how many; set_state receives them
     * (non-finite values come back as NaN). A checkpoint's states go to the callbacks at the
     * same positions with the same names. The built-in callbacks have both; one without
     * them starts afresh on resume. */
    int (*get_state)(void *user, double *state, int max);
    void (*set_state)(kc_model *m, void *user, const double *state, int n);
} kc_callback;

#define KC_CALLBACK_STATE_MAX 16

/* Built-in callbacks (Keras's names and defaults). */
typedef struct kc_early_stopping_opts {
    const char *monitor;      /* default "val_loss" */
    double min_delta;
    int patience;
    const char *mode;         /* "auto" (default), "min", "max" */
    int restore_best_weights; /* KC_TRUE */
    double baseline;          /* 0: none */
} kc_early_stopping_opts;
typedef struct kc_reduce_lr_opts {
    const char *monitor;      /* default "val_loss" */
    double factor;            /* default 0.1 */
    int patience;             /* default 10 */
    const char *mode;
    double min_delta;         /* default 1e-4 */
    int cooldown;
    double min_lr;
} kc_reduce_lr_opts;

/* Each returns a callback that owns its state; free it with kc_callback_destroy. */
KC_API kc_status kc_early_stopping(const kc_early_stopping_opts *opts, kc_callback **out);
KC_API kc_status kc_reduce_lr_on_plateau(const kc_reduce_lr_opts *opts, kc_callback **out);
KC_API kc_status kc_terminate_on_nan(kc_callback **out);
KC_API void kc_callback_destroy(kc_callback *cb);

/* Keras's CSVLogger: a row per epoch ("epoch" 0-based, then the history keys sorted by
 * name: accuracy, loss, val_accuracy, val_loss, ...; "NA" where an epoch has no value).
 * append: add rows to an existing file (its header is kept). The file is opened here:
 * KC_STATUS_IO when it cannot be. */
KC_API kc_status kc_csv_logger(const char *path, int append, kc_callback **out);

/* Keras's TensorBoard callback: event files in log_dir/train and log_dir/validation that
 * TensorBoard reads. Per epoch (step = the 0-based epoch): epoch_loss, epoch_<metric>,
 * epoch_learning_rate, epoch_images_per_second, epoch_seconds, epoch_input_wait_seconds,
 * epoch_gpu_utilization and epoch_gpu_memory_used (bytes; on a GPU with NVML); validation
 * epoch_loss and epoch_<metric> in log_dir/validation. */
typedef struct kc_tensorboard_opts {
    const char *log_dir;      /* made if missing */
    /* 0: per epoch only (Keras's "epoch"); N: also batch_loss, batch_<metric>,
     * batch_images_per_second (and the GPU's) every N optimizer steps, step = the 1-based
     * step counted over the run */
    int64_t update_freq;
    /* N > 0: a histogram of every weight ("<layer>/<weight>/histogram") every N epochs */
    int histogram_freq;
} kc_tensorboard_opts;
KC_API kc_status kc_tensorboard(const kc_tensorboard_opts *opts, kc_callback **out);

typedef struct kc_history kc_history;
KC_API int kc_history_epochs(const kc_history *h);
KC_API const kc_epoch_logs *kc_history_epoch(const kc_history *h, int epoch);
/* Metric names in compile order ("accuracy", ...) as Keras's history keys. */
KC_API int kc_history_num_metrics(const kc_history *h);
KC_API const char *kc_history_metric_name(const kc_history *h, int i);
/* Why training stopped early ("" when it ran all epochs): "EarlyStopping", "TerminateOnNaN", ... */
KC_API const char *kc_history_stop_reason(const kc_history *h);
/* The device the run used (kc_model_device) and why (kc_model_device_reason). */
KC_API const char *kc_history_device(const kc_history *h);
KC_API const char *kc_history_device_reason(const kc_history *h);
KC_API void kc_history_destroy(kc_history *h);

/* Data-parallel training: a collective interface over the processes (ranks) of one run,
 * given to kc_fit in kc_fit_opts.collective. libkerac has no MPI of its own; the caller
 * (the kerac command over Open MPI) fills the table. Each function returns KC_STATUS_OK
 * or a failure status, with a message that error(ctx) returns. Every rank must make the
 * same calls in the same order. */
typedef struct kc_collective {
    int rank, size;           /* this process's rank in [0, size) and the number of ranks */
    void *ctx;
    /* buf (n floats or doubles) becomes the element-wise sum over the ranks */
    kc_status (*allreduce_sum_f32)(void *ctx, float *buf, int64_t n);
    kc_status (*allreduce_sum_f64)(void *ctx, double *buf, int64_t n);
    /* buf (bytes) becomes rank root's */
    kc_status (*broadcast)(void *ctx, void *buf, size_t bytes, int root);
    /* recv (size x bytes) becomes every rank's send (bytes), in rank order */
    kc_status (*allgather)(void *ctx, const void *send, void *recv, size_t bytes);
    const char *(*error)(void *ctx); /* the message of the last failure */
    /* issue 13: overlap and watchdog (each optional: NULL falls back as said).
     * Non-blocking sum of buf (n floats) over the ranks: *req identifies it for test and
     * wait; buf must not be touched until wait returned. NULL: the gradients are summed by
     * allreduce_sum_f32 after the backward pass, without overlap. */
    kc_status (*iallreduce_sum_f32)(void *ctx, float *buf, int64_t n, int *req);
    kc_status (*test)(void *ctx, int req, int *done); /* progress; *done = 1 when finished */
    kc_status (*wait)(void *ctx, int req);
    /* What the collective calls that follow are for ("the all-reduce of the gradients,
     * epoch 2 step 5"): a watchdog names it when a rank stops answering. */
    void (*doing)(void *ctx, const char *what);
} kc_collective;

typedef struct kc_fit_opts {
    int epochs;               /* default 1 */
    int batch_size;           /* default 32 */
    double validation_split;  /* fraction of the end of the data held out (before shuffling) */
    const kc_dataset *validation_data; /* takes precedence over validation_split */
    int shuffle;              /* KC_DEFAULT = True */
    uint64_t seed;            /* 0: the model's seed */
    int prefetch;             /* batches prepared ahead by the loader thread (default 2);
                                 KC_PREFETCH_NONE: no loader thread, the training thread gathers
                                 each batch before its step */
    kc_callback *const *callbacks;
    int num_callbacks;
    int64_t steps_per_epoch;  /* 0: the whole dataset */
    /* Gradient accumulation: each batch of batch_size examples runs as grad_accum
     * micro-batches whose gradients are summed before one optimizer step: the same update
     * as the whole batch (up to rounding; BatchNormalization statistics are per
     * micro-batch). Default 1. */
    int grad_accum;
    /* batch_size = KC_BATCH_SIZE_AUTO: the largest multiple of 8 whose planned footprint
     * fits the device's free memory (less a 10% safety margin) or the memory limit (exact),
     * confirmed by one real step; capped by max_batch_size (default 4096). */
    int max_batch_size;
    /* Out-of-memory recovery (default on): when an allocation fails during training, free
     * the caches, halve the micro-batch and double grad_accum, so the batch and the
     * learning-rate schedule stay the same, log one warning and go on from the same step;
     * below micro-batch 1, fail. KC_FALSE turns it off. */
    int oom_recovery;

    /* Checkpoints: with checkpoint_dir set (made if missing), fit writes the model and the
     * whole training state to DIR/ckpt-<seq>-e<epoch>-s<step>.keras: <seq> counts the
     * checkpoints written to DIR (the highest is the newest), <epoch> the epochs finished
     * and <step> the steps done in the epoch in progress. Each is a Keras 3 .keras file
     * (config.json with a compile_config; the optimizer's variables in model.weights.h5
     * where Keras keeps them, optimizer/vars/<i>) plus kerac_training_state.json (epoch,
     * step, shuffle generator, seeds, micro-batch, ReduceLROnPlateau's learning-rate scale,
     * best monitored value, history). Every write goes to "<name>.tmp", is fsynced, renamed
     * into place and the folder fsynced; older checkpoints beyond `keep` are deleted only
     * after that, and stray *.tmp files are ignored by readers and removed by the next
     * save: a crash or kill at any moment leaves the previous checkpoint intact. */
    const char *checkpoint_dir;
    /* 0: at the end of every epoch (and where an epoch is cut short by a callback, e.g.
     * Ctrl-C in kerac train); N: after every N optimizer steps (counted over the run). */
    int64_t checkpoint_every_steps;
    int keep;                 /* newest checkpoints kept (default 1) */
    /* KC_TRUE: write a checkpoint only when `monitor` improved on the best value so far
     * (mode auto, as Keras: max for names containing "acc", min otherwise). At epoch
     * ends the monitor is "loss", "val_loss" or a metric ("accuracy", "val_accuracy");
     * with checkpoint_every_steps, "loss" or a metric (the epoch's running mean). */
    int save_best_only;
    const char *monitor;      /* default "val_loss" */
    /* Continue a checkpointed run: a checkpoint file or a folder (its newest checkpoint).
     * The model must have the checkpoint's architecture (else KC_STATUS_BAD_FILE naming
     * the file) and be compiled with the same optimizer; its weights, optimizer state and
     * dropout seeds are restored, the finished epochs' logs start the history, and
     * training goes on from the saved epoch and step to `epochs`. batch_size, seed,
     * shuffle, validation_split, steps_per_epoch and epochs left unset are the
     * checkpoint's; a set one that differs is an error; the micro-batch is the
     * checkpoint's. On the CPU (with the same number of threads) the result is
     * bit-identical to a run never interrupted.
     * Checkpointing goes on only when checkpoint_dir is set (the best value carries over
     * for the same monitor). Callbacks' state is restored for those with get_state /
     * set_state (the built-ins: EarlyStopping's best value and patience count,
     * ReduceLROnPlateau's best value, patience and cooldown counts); EarlyStopping's copy
     * of the best weights (restore_best_weights) is not in the checkpoint: after a resume it
     * can restore only a best epoch reached since. */
    const char *resume_from;
    /* Data-parallel training over collective->size ranks (NULL or size 1: one process).
     * At the start every rank checks that all run the same kerac version and the same
     * model (a hash of its config and weight shapes), naming a rank that differs, and
     * rank 0's weights are broadcast. Each epoch's shuffle is the same on every rank and
     * rank r takes positions r, r + size, ... of it (PyTorch's DistributedSampler); the
     * tail is padded with the order's start so that every rank has ceil(N / size)
     * examples, or dropped (floor(N / size)) with drop_remainder = KC_TRUE. batch_size is
     * the global batch: each rank trains batch_size / size examples per step (a
     * batch_size that size does not divide is an error). After the backward pass the
     * gradient slab is summed over the ranks with one all-reduce and divided by size, so
     * every rank applies the same update; the loss and metrics are summed over the ranks
     * before callbacks see them, and a stop asked by a callback on any rank stops all.
     * Validation runs on every rank over the whole validation set. Checkpoints are the
     * caller's to write on one rank only (checkpoint_dir NULL on the others); they record
     * the global batch size and data order, so a run can be resumed with another number
     * of ranks (every rank gives the same resume_from; the micro-batch is capped at the
     * rank's share of the batch). */
    const kc_collective *collective;
    int drop_remainder;       /* KC_TRUE: see collective */
    /* issue 13: data-parallel overlap and synchronised BatchNormalization.
     * With collective->iallreduce_sum_f32, the gradients are summed in buckets of about
     * bucket_bytes (0: 4 MiB), cut at layer boundaries in the fixed reverse-layer order
     * of the backward pass: a bucket's all-reduce starts as soon as the backward pass has
     * written its last layer, while the layers below it are still computing (one step's
     * micro-batches: only the last one's backward overlaps). KC_TRUE sync_batchnorm:
     * BatchNormalization's batch statistics in training are the ranks' together (the
     * all-reduced per-channel sum, sum of squares and rows, the backward's two sums too),
     * as for one process with the global batch; default: each rank's own, as Keras. */
    int64_t bucket_bytes;
    int sync_batchnorm;
} kc_fit_opts;

#define KC_BATCH_SIZE_AUTO (-1)
#define KC_PREFETCH_NONE (-1)

KC_API kc_status kc_fit(kc_model *m, const kc_dataset *train, const kc_fit_opts *opts, kc_history **out);

/* Checkpoints (kc_fit_opts.checkpoint_dir). The newest checkpoint in dir (the highest
 * <seq>; *.tmp files are never checkpoints) into path (n bytes); KC_STATUS_IO when dir
 * has none. */
KC_API kc_status kc_checkpoint_latest(const char *dir, char *path, size_t n);
/* A model from a checkpoint file or folder (its newest): architecture and weights,
 * compiled as it was (optimizer, loss, metrics), with its optimizer state and seeds.
 * Continue its run with kc_fit and .resume_from = the same path. */
KC_API kc_status kc_checkpoint_load(const char *path, kc_model **out);
/* The same on the device of opts (NULL: the environment's, as kc_checkpoint_load). */
KC_API kc_status kc_checkpoint_load_ex(const char *path, const kc_device_opts *opts, kc_model **out);
typedef struct kc_checkpoint_info {
    int epoch;                /* epochs finished */
    int64_t step;             /* steps done in the epoch in progress */
    int64_t iterations;       /* optimizer steps taken */
    int epochs;               /* epochs the run asked for */
    int batch_size;
    int64_t num_examples;     /* training examples of the run */
    char optimizer[16];       /* "adam", "sgd", "adamw", "rmsprop" */
    /* the run's checkpoint options (kc_fit_opts), to go on with the same */
    int64_t checkpoint_every_steps;
    int keep;
    int save_best_only;       /* KC_TRUE or KC_FALSE */
    char monitor[64];
} kc_checkpoint_info;
/* Where a checkpoint (file or folder: its newest) stands, without loading the model. */
KC_API kc_status kc_checkpoint_read_info(const char *path, kc_checkpoint_info *out);

typedef struct kc_eval_result {
    double loss;
    double metrics[KC_MAX_METRICS];
    int num_metrics;
    int64_t samples;
    double seconds;
} kc_eval_result;
KC_API kc_status kc_evaluate(kc_model *m, const kc_dataset *data, int batch_size, kc_eval_result *out);
/* Outputs for n examples x (n, input shape...) into y (n, output shape...). */
KC_API kc_status kc_predict(kc_model *m, const float *x, int64_t n, int batch_size, float *y);
/* Metric names of a compiled model. */
KC_API int kc_model_num_metrics(const kc_model *m);
KC_API const char *kc_model_metric_name(const kc_model *m, int i);

/* ---------------------------------------------------------------- Keras JSON */

/* Read Keras's JSON model config (model.to_json(): Keras 2 or 3, Sequential or Functional). */
KC_API kc_status kc_model_from_json(const char *text, size_t len, kc_model **out);
/* The same, built on the device of opts (NULL: the environment's, as kc_model_from_json). */
KC_API kc_status kc_model_from_json_ex(const char *text, size_t len, const kc_device_opts *opts, kc_model **out);
/* Write Keras's JSON model config; *out is malloc'd, free it with kc_free. flavour 3 writes
 * Keras 3 ("batch_shape", "module"), 2 writes Keras 2 ("batch_input_shape"). */
KC_API kc_status kc_model_to_json(kc_model *m, int flavour, char **out);
/* Model files, by extension: .keras (Keras 3 archive: config + weights), .h5 / .hdf5
 * (Keras 2 HDF5 model: config + weights; Keras 3's legacy .h5 files load too), .json
 * (config only: loading gives freshly initialised weights). kc_model_save also writes
 * .weights.h5 (weights only). Saving is atomic: a failed save leaves no partial file. */
KC_API kc_status kc_model_load(const char *path, kc_model **out);
/* The same, built (weights read) on the device of opts (NULL: the environment's, as
 * kc_model_load). */
KC_API kc_status kc_model_load_ex(const char *path, const kc_device_opts *opts, kc_model **out);
KC_API kc_status kc_model_save(kc_model *m, const char *path);
/* A model trained on a folder of images keeps how its images were read (size, colour mode,
 * interpolation, crop/pad, label mode) and its class names: kc_model_save writes them into
 * the .keras file's metadata.json under "kerac_images" (a key Keras does not read, so Keras
 * still loads the file) and kc_model_load reads them back. The options are copied. */
KC_API kc_status kc_model_set_image_opts(kc_model *m, const kc_image_opts *opts);
/* 1 and *out filled (class names owned by the model) when the model has them, else 0. */
KC_API int kc_model_image_opts(const kc_model *m, kc_image_opts *out);
/* Weights only, into / from a model of the same architecture (every shape is checked; on
 * failure the model keeps its weights). Load reads .weights.h5 (Keras 3 or Keras 2 layout),
 * .h5 (Keras 2 save_weights or a full model) and .keras; save writes .weights.h5 (Keras 3
 * layout) or .h5 (Keras 2 layout). */
KC_API kc_status kc_model_load_weights(kc_model *m, const char *path);
KC_API kc_status kc_model_save_weights(kc_model *m, const char *path);
KC_API void kc_free(void *p);

/* The default CNN (Keras's mnist_convnet): for (h, w, c) inputs and `classes` outputs. */
KC_API kc_status kc_default_cnn(int h, int w, int c, int classes, kc_model **out);

#ifdef __cplusplus
}
#endif
#endif /* KERAC_H */
