/* cpu_isa.h — one build, kernels for several instruction sets (run-time dispatch).
 *
 * The kernel files of the CPU backend (KERAC_CPU_KERNELS in CMakeLists.txt) are compiled
 * once for the x86-64 baseline (or the host's own baseline elsewhere) into libkerac's main
 * objects, and on x86-64 twice more: with -march=x86-64-v3 (AVX2 + FMA) and
 * KC_CPU_ISA=avx2, and with -march=x86-64-v4 (AVX-512) and KC_CPU_ISA=avx512. In those two
 * compilations every external kernel name below gets the suffix _avx2 or _avx512, so the
 * three copies live side by side; kc_backend_cpu_create_ex (cpu_backend.c) asks the
 * processor (cpuid) which it can run and fills the backend's table from one copy
 * (kc__cpu_fill_kernels). Nothing outside the kernel files names a kernel directly: only
 * the table does. A .c file of src/backend/cpu/ that is not in that list compiles for the
 * baseline only: its functions keep their names (one copy), so it must not define a name
 * listed here. */
#ifndef KC_BACKEND_CPU_ISA_H
#define KC_BACKEND_CPU_ISA_H

#ifdef KC_CPU_ISA
#define KC_CPU_CAT2(a, b) a##_##b
#define KC_CPU_CAT(a, b) KC_CPU_CAT2(a, b)
#define KC_CPU_STR2(a) #a
#define KC_CPU_STR(a) KC_CPU_STR2(a)
#define KC_CPU_ISA_NAME KC_CPU_STR(KC_CPU_ISA)
#define KC_CPU_RENAME(f) KC_CPU_CAT(f, KC_CPU_ISA)

#define kc__cpu_fill_kernels KC_CPU_RENAME(kc__cpu_fill_kernels)
#define kc__cpu_colsum KC_CPU_RENAME(kc__cpu_colsum)
#define kc__cpu_colsum_gs KC_CPU_RENAME(kc__cpu_colsum_gs)
#define kc__cpu_conv_kernel KC_CPU_RENAME(kc__cpu_conv_kernel)
#define kc__cpu_conv2d_describe KC_CPU_RENAME(kc__cpu_conv2d_describe)
#define kc__cpu_gemm KC_CPU_RENAME(kc__cpu_gemm)
#define kc__cpu_sgemm KC_CPU_RENAME(kc__cpu_sgemm)
#define kc__cpu_gemm_threads KC_CPU_RENAME(kc__cpu_gemm_threads)
#define kc__cpu_gemm_small_applies KC_CPU_RENAME(kc__cpu_gemm_small_applies)
#define kc__cpu_gemm_small KC_CPU_RENAME(kc__cpu_gemm_small)
#define kc__cpu_gemm_small_bias_relu KC_CPU_RENAME(kc__cpu_gemm_small_bias_relu)
#define kc__cpu_conv2d_workspace KC_CPU_RENAME(kc__cpu_conv2d_workspace)
#define kc__cpu_conv2d_forward KC_CPU_RENAME(kc__cpu_conv2d_forward)
#define kc__cpu_conv2d_backward_data KC_CPU_RENAME(kc__cpu_conv2d_backward_data)
#define kc__cpu_conv2d_dx_adds KC_CPU_RENAME(kc__cpu_conv2d_dx_adds)
#define kc__cpu_conv2d_backward_filter KC_CPU_RENAME(kc__cpu_conv2d_backward_filter)
#define kc__cpu_winograd_applies KC_CPU_RENAME(kc__cpu_winograd_applies)
#define kc__cpu_blocked_applies KC_CPU_RENAME(kc__cpu_blocked_applies)
#define kc__cpu_blocked_workspace KC_CPU_RENAME(kc__cpu_blocked_workspace)
#define kc__cpu_blocked_forward KC_CPU_RENAME(kc__cpu_blocked_forward)
#define kc__cpu_blocked_backward_filter KC_CPU_RENAME(kc__cpu_blocked_backward_filter)
#define kc__cpu_winograd_workspace KC_CPU_RENAME(kc__cpu_winograd_workspace)
#define kc__cpu_winograd_tile_of KC_CPU_RENAME(kc__cpu_winograd_tile_of)
#define kc__cpu_winograd_may_apply KC_CPU_RENAME(kc__cpu_winograd_may_apply)
#define kc__cpu_winograd_forward KC_CPU_RENAME(kc__cpu_winograd_forward)
#define kc__cpu_winograd_backward_data KC_CPU_RENAME(kc__cpu_winograd_backward_data)
#define kc__cpu_winograd_backward_filter KC_CPU_RENAME(kc__cpu_winograd_backward_filter)
#define kc__cpu_binary_forward KC_CPU_RENAME(kc__cpu_binary_forward)
#define kc__cpu_binary_backward KC_CPU_RENAME(kc__cpu_binary_backward)
#define kc__cpu_scalar_forward KC_CPU_RENAME(kc__cpu_scalar_forward)
#define kc__cpu_scalar_backward KC_CPU_RENAME(kc__cpu_scalar_backward)
#define kc__cpu_groupnorm_forward KC_CPU_RENAME(kc__cpu_groupnorm_forward)
#define kc__cpu_groupnorm_backward KC_CPU_RENAME(kc__cpu_groupnorm_backward)
#define kc__cpu_channel_affine KC_CPU_RENAME(kc__cpu_channel_affine)
#define kc__cpu_normalize KC_CPU_RENAME(kc__cpu_normalize)
#define kc__cpu_bilinear_tap KC_CPU_RENAME(kc__cpu_bilinear_tap)
#define kc__cpu_upsample2d_forward KC_CPU_RENAME(kc__cpu_upsample2d_forward)
#define kc__cpu_upsample2d_backward KC_CPU_RENAME(kc__cpu_upsample2d_backward)
#define kc__cpu_permute KC_CPU_RENAME(kc__cpu_permute)
#define kc__cpu_sample2d_forward KC_CPU_RENAME(kc__cpu_sample2d_forward)
#define kc__cpu_sample2d_backward KC_CPU_RENAME(kc__cpu_sample2d_backward)
#define kc__cpu_color2d_forward KC_CPU_RENAME(kc__cpu_color2d_forward)
#define kc__cpu_color2d_backward KC_CPU_RENAME(kc__cpu_color2d_backward)
#define kc__cpu_grouped_conv_forward KC_CPU_RENAME(kc__cpu_grouped_conv_forward)
#define kc__cpu_grouped_conv_backward_data KC_CPU_RENAME(kc__cpu_grouped_conv_backward_data)
#define kc__cpu_grouped_conv_backward_filter KC_CPU_RENAME(kc__cpu_grouped_conv_backward_filter)
/* Gaussian noise layers */
#define kc__cpu_random_normal KC_CPU_RENAME(kc__cpu_random_normal)
#define kc__cpu_depthwise_forward KC_CPU_RENAME(kc__cpu_depthwise_forward)
#define kc__cpu_depthwise_backward_data KC_CPU_RENAME(kc__cpu_depthwise_backward_data)
#define kc__cpu_depthwise_backward_filter KC_CPU_RENAME(kc__cpu_depthwise_backward_filter)
#define kc__cpu_dw3_channels KC_CPU_RENAME(kc__cpu_dw3_channels)
#define kc__cpu_dw3_width KC_CPU_RENAME(kc__cpu_dw3_width)
#define kc__cpu_dw3_forward_row KC_CPU_RENAME(kc__cpu_dw3_forward_row)
#define kc__cpu_dw3_backward_data_row KC_CPU_RENAME(kc__cpu_dw3_backward_data_row)
#define kc__cpu_dw3_filter_chunk KC_CPU_RENAME(kc__cpu_dw3_filter_chunk)
#define kc__cpu_dw3_filter_rows KC_CPU_RENAME(kc__cpu_dw3_filter_rows)
#define kc__cpu_depthwise_workspace KC_CPU_RENAME(kc__cpu_depthwise_workspace)
#define kc__cpu_pool2d_forward KC_CPU_RENAME(kc__cpu_pool2d_forward)
#define kc__cpu_pool2d_backward KC_CPU_RENAME(kc__cpu_pool2d_backward)
#define kc__cpu_global_avg_pool_forward KC_CPU_RENAME(kc__cpu_global_avg_pool_forward)
#define kc__cpu_global_avg_pool_backward KC_CPU_RENAME(kc__cpu_global_avg_pool_backward)
#define kc__cpu_batchnorm_forward_train KC_CPU_RENAME(kc__cpu_batchnorm_forward_train)
#define kc__cpu_batchnorm_forward_infer KC_CPU_RENAME(kc__cpu_batchnorm_forward_infer)
#define kc__cpu_batchnorm_backward KC_CPU_RENAME(kc__cpu_batchnorm_backward)
#define kc__cpu_batchnorm_relu_forward_train KC_CPU_RENAME(kc__cpu_batchnorm_relu_forward_train)
#define kc__cpu_batchnorm_relu_forward_infer KC_CPU_RENAME(kc__cpu_batchnorm_relu_forward_infer)
#define kc__cpu_batchnorm_relu_backward KC_CPU_RENAME(kc__cpu_batchnorm_relu_backward)
#define kc__cpu_act_forward KC_CPU_RENAME(kc__cpu_act_forward)
#define kc__cpu_act_backward KC_CPU_RENAME(kc__cpu_act_backward)
#define kc__cpu_loss_forward_backward KC_CPU_RENAME(kc__cpu_loss_forward_backward)
#define kc__cpu_count_correct KC_CPU_RENAME(kc__cpu_count_correct)
#define kc__cpu_optimizer_step KC_CPU_RENAME(kc__cpu_optimizer_step)
#define kc__cpu_bias_add KC_CPU_RENAME(kc__cpu_bias_add)
#define kc__cpu_bias_grad KC_CPU_RENAME(kc__cpu_bias_grad)
#define kc__cpu_dropout_forward KC_CPU_RENAME(kc__cpu_dropout_forward)
#define kc__cpu_dropout_backward KC_CPU_RENAME(kc__cpu_dropout_backward)
#define kc__cpu_add KC_CPU_RENAME(kc__cpu_add)
#define kc__cpu_add_relu KC_CPU_RENAME(kc__cpu_add_relu)
#define kc__cpu_bn_add_relu KC_CPU_RENAME(kc__cpu_bn_add_relu)
#define kc__cpu_axpy KC_CPU_RENAME(kc__cpu_axpy)
#define kc__cpu_scale KC_CPU_RENAME(kc__cpu_scale)
#define kc__cpu_copy_strided KC_CPU_RENAME(kc__cpu_copy_strided)
#define kc__cpu_pad2d_forward KC_CPU_RENAME(kc__cpu_pad2d_forward)
#define kc__cpu_pad2d_backward KC_CPU_RENAME(kc__cpu_pad2d_backward)
#define kc__cpu_sum_squares KC_CPU_RENAME(kc__cpu_sum_squares)
#else
#define KC_CPU_ISA_NAME "baseline"
#endif

/* Floats in one vector register of this copy's instruction set: 16 (AVX-512), 8 (AVX,
 * AVX2), 4 (the SSE baseline). For the kernels written with GCC vector types. */
#if defined(__AVX512F__)
#define KC_CPU_VW 16
#elif defined(__AVX__)
#define KC_CPU_VW 8
#else
#define KC_CPU_VW 4
#endif

#endif /* KC_BACKEND_CPU_ISA_H */
