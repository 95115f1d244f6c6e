/* cpu_table.c — the CPU backend's kernel slots and its describe, from the copy of the
 * kernels this file is compiled with (cpu_isa.h: once per instruction set on x86-64;
 * kc_backend_cpu_create_ex picks one copy's kc__cpu_fill_kernels at run time). */
#include <stdio.h>

#include "cpu.h"

static kc_status cpu_describe(kc_backend *be, kc_op op, const void *desc, size_t ws_bytes, char *buf, size_t n) {
    static const char *const name[KC_OP_COUNT] = {
        [KC_OP_GLOBAL_AVG_POOL] = "cpu global average pooling", [KC_OP_GEMM] = "cpu gemm (OpenBLAS)",
        [KC_OP_BATCHNORM] = "cpu batch norm", [KC_OP_DROPOUT] = "cpu dropout", [KC_OP_PAD2D] = "cpu zero padding",
        [KC_OP_ACTIVATION] = "cpu activation", [KC_OP_ELEMENTWISE] = "cpu elementwise", [KC_OP_LOSS] = "cpu loss",
        [KC_OP_OPTIMIZER] = "cpu fused optimizer update", [KC_OP_DEPTHWISE] = "cpu direct depthwise conv",
        [KC_OP_NORM] = "cpu group/layer norm", [KC_OP_RESAMPLE] = "cpu upsampling and permute",
        [KC_OP_BROADCAST] = "cpu broadcasting elementwise",
        [KC_OP_SAMPLE2D] = "cpu image resampling", [KC_OP_COLOR2D] = "cpu image colour",
        [KC_OP_GROUPED_CONV] = "cpu direct grouped conv",
        [KC_OP_NOISE] = "cpu normal random numbers",
    };
    if (!buf || !n) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: no buffer");
    buf[0] = '\0';
    if (op < 0 || op >= KC_OP_COUNT) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: unknown operation %d", (int)op);
    if (op == KC_OP_CONV2D) {
        if (!desc) return kc__fail(KC_STATUS_INVALID_ARGUMENT, "cpu describe: a convolution needs its descriptor");
        return kc__cpu_conv2d_describe(be, desc, ws_bytes, buf, n);
    }
    if (op == KC_OP_POOL2D) {
        const kc_pool2d_desc *p = desc;
        snprintf(buf, n, "cpu %spooling", !p ? "" : p->kind == KC_POOL_MAX ? "max " : "average ");
        return KC_STATUS_OK;
    }
    snprintf(buf, n, "%s", name[op]);
    return KC_STATUS_OK;
}

/* The direct grouped kernels keep their partial sums on the stack: no workspace (depthwise's
 * backward-filter keeps its groups' partial sums in one: kc__cpu_depthwise_workspace). */
static size_t cpu_gc_workspace(kc_backend *be, const kc_conv2d_desc *d, int groups) {
    return (void)be, (void)d, (void)groups, 0;
}

void kc__cpu_fill_kernels(kc_backend *be) {
    be->describe = cpu_describe;
    be->gemm = kc__cpu_gemm;
    be->bias_add = kc__cpu_bias_add;
    be->bias_grad = kc__cpu_bias_grad;

    be->conv2d_workspace = kc__cpu_conv2d_workspace;
    be->conv2d_forward = kc__cpu_conv2d_forward;
    be->conv2d_backward_data = kc__cpu_conv2d_backward_data;
    be->conv2d_dx_adds = kc__cpu_conv2d_dx_adds;
    be->conv2d_backward_filter = kc__cpu_conv2d_backward_filter;

    be->pool2d_forward = kc__cpu_pool2d_forward;
    be->pool2d_backward = kc__cpu_pool2d_backward;
    be->global_avg_pool_forward = kc__cpu_global_avg_pool_forward;
    be->global_avg_pool_backward = kc__cpu_global_avg_pool_backward;

    be->batchnorm_forward_train = kc__cpu_batchnorm_forward_train;
    be->batchnorm_forward_infer = kc__cpu_batchnorm_forward_infer;
    be->batchnorm_backward = kc__cpu_batchnorm_backward;
    be->batchnorm_relu_forward_train = kc__cpu_batchnorm_relu_forward_train;
    be->batchnorm_relu_forward_infer = kc__cpu_batchnorm_relu_forward_infer;
    be->batchnorm_relu_backward = kc__cpu_batchnorm_relu_backward;

    be->act_forward = kc__cpu_act_forward;
    be->act_backward = kc__cpu_act_backward;

    be->dropout_forward = kc__cpu_dropout_forward;
    be->dropout_backward = kc__cpu_dropout_backward;

    be->add = kc__cpu_add;
    be->add_relu = kc__cpu_add_relu;
    be->bn_add_relu = kc__cpu_bn_add_relu;
    be->axpy = kc__cpu_axpy;
    be->scale = kc__cpu_scale;
    be->copy_strided = kc__cpu_copy_strided;
    be->pad2d_forward = kc__cpu_pad2d_forward;
    be->pad2d_backward = kc__cpu_pad2d_backward;

    be->loss_forward_backward = kc__cpu_loss_forward_backward;
    be->count_correct = kc__cpu_count_correct;
    be->optimizer_step = kc__cpu_optimizer_step;
    be->sum_squares = kc__cpu_sum_squares;

    be->depthwise_workspace = kc__cpu_depthwise_workspace;
    be->depthwise_forward = kc__cpu_depthwise_forward;
    be->depthwise_backward_data = kc__cpu_depthwise_backward_data;
    be->depthwise_backward_filter = kc__cpu_depthwise_backward_filter;

    be->channel_affine = kc__cpu_channel_affine;
    be->normalize = kc__cpu_normalize;
    be->groupnorm_forward = kc__cpu_groupnorm_forward;
    be->groupnorm_backward = kc__cpu_groupnorm_backward;
    be->upsample2d_forward = kc__cpu_upsample2d_forward;
    be->upsample2d_backward = kc__cpu_upsample2d_backward;
    be->permute = kc__cpu_permute;

    be->binary_forward = kc__cpu_binary_forward;
    be->binary_backward = kc__cpu_binary_backward;
    be->scalar_forward = kc__cpu_scalar_forward;
    be->scalar_backward = kc__cpu_scalar_backward;

    be->sample2d_forward = kc__cpu_sample2d_forward;
    be->sample2d_backward = kc__cpu_sample2d_backward;
    be->color2d_forward = kc__cpu_color2d_forward;
    be->color2d_backward = kc__cpu_color2d_backward;

    be->grouped_conv_workspace = cpu_gc_workspace;
    be->grouped_conv_forward = kc__cpu_grouped_conv_forward;
    be->grouped_conv_backward_data = kc__cpu_grouped_conv_backward_data;
    be->grouped_conv_backward_filter = kc__cpu_grouped_conv_backward_filter;

    be->random_normal = kc__cpu_random_normal; /* Gaussian noise layers */
}
