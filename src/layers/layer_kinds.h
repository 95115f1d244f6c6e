/* layer_kinds.h — the one list of layer kinds. Everything that enumerates kinds is made
 * from it: the registry (registry.c), the extern declarations of the ops tables
 * (layer.h), the union of public options structs that src/io reads Keras JSON into (io.h),
 * and the test that checks every kind is complete (tests/test_layer_kinds.c).
 *
 * X(id, opts_type): the kind's ops table is `kc__<id>_ops`, defined in its own file in
 * src/layers/ (which also holds its Keras class name, alias and config keys); opts_type is
 * its public options struct in include/kerac.h. The order is the registry's order: the
 * order of the "supported: ..." lists in error messages.
 *
 * Adding a kind: DESIGN.md, "Adding a layer kind". */
#ifndef KC_LAYER_KINDS_H
#define KC_LAYER_KINDS_H

#define KC_LAYER_KINDS(X)                              \
    X(input_layer, kc_input_opts)                      \
    X(conv2d, kc_conv2d_opts)                          \
    X(dense, kc_dense_opts)                            \
    X(maxpool2d, kc_pool2d_opts)                       \
    X(avgpool2d, kc_pool2d_opts)                       \
    X(global_avgpool2d, kc_global_pool_opts)           \
    X(flatten, kc_flatten_opts)                        \
    X(reshape, kc_reshape_opts)                        \
    X(dropout, kc_dropout_opts)                        \
    X(batchnorm, kc_batchnorm_opts)                    \
    X(activation, kc_activation_opts)                  \
    X(relu, kc_relu_opts)                              \
    X(softmax, kc_softmax_opts)                        \
    X(zeropad2d, kc_zeropad2d_opts)                    \
    X(add, kc_merge_opts)                              \
    X(concatenate, kc_merge_opts)                      \
    X(depthwise_conv2d, kc_depthwise_conv2d_opts)     \
    /* normalisation and resampling */                        \
    X(rescaling, kc_rescaling_opts)                  \
    X(normalization, kc_normalization_opts)          \
    X(layernorm, kc_layernorm_opts)                  \
    X(groupnorm, kc_groupnorm_opts)                  \
    X(upsampling2d, kc_upsampling2d_opts)            \
    X(cropping2d, kc_cropping2d_opts)                \
    X(global_maxpool2d, kc_global_pool_opts)         \
    X(permute, kc_permute_opts)                      \
    X(repeat_vector, kc_repeat_vector_opts)          \
    /* merges, activation layers, operation nodes */   \
    X(multiply, kc_merge_opts)                         \
    X(subtract, kc_merge_opts)                         \
    X(average, kc_merge_opts)                          \
    X(maximum, kc_merge_opts)                          \
    X(minimum, kc_merge_opts)                          \
    X(leaky_relu, kc_leaky_relu_opts)                  \
    X(elu, kc_elu_opts)                                \
    X(prelu, kc_prelu_opts)                            \
    X(tensor_op, kc_tensor_op_opts)                    \
    /* keras.applications' custom layers */            \
    X(custom_scale, kc_custom_scale_opts)              \
    /* augmentation and preprocessing */               \
    X(random_flip, kc_random_flip_opts)                \
    X(random_rotation, kc_random_rotation_opts)        \
    X(random_zoom, kc_random_zoom_opts)                \
    X(random_translation, kc_random_zoom_opts)         \
    X(random_crop, kc_crop_opts)                       \
    X(center_crop, kc_crop_opts)                       \
    X(random_contrast, kc_random_color_opts)           \
    X(random_brightness, kc_random_color_opts)         \
    X(resizing, kc_resizing_opts)                      \
    /* convolutions */                                 \
    X(separable_conv2d, kc_separable_conv2d_opts)      \
    X(conv2d_transpose, kc_conv2d_transpose_opts)    \
    /* regularising layers */                          \
    X(spatial_dropout2d, kc_dropout_opts)              \
    X(stochastic_depth, kc_stochastic_depth_opts)     \
    X(layer_scale, kc_layer_scale_opts)               \
    /* Gaussian noise layers */                      \
    X(gaussian_noise, kc_gaussian_noise_opts)         \
    X(gaussian_dropout, kc_gaussian_dropout_opts)

#endif /* KC_LAYER_KINDS_H */
