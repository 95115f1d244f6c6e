/* End to end: the default CNN (Keras's mnist_convnet) trained on a Fashion-MNIST subset
 * reaches a stated test accuracy. Stated bounds: 20,000 training images, 2 epochs,
 * batch 128, Adam 1e-3 -> at least 0.80 on the first 2,000 test images. Under the sanitizers (KERAC_SANITIZED=1) the budget is
 * 3,000 images for 1 epoch -> at least 0.60. Skips (77) without the Debian dataset. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "kerac.h"

static void test_default_cnn_fashion_subset(void **state) {
    bool sanitized = getenv("KERAC_SANITIZED") != NULL;
    int64_t n_train = sanitized ? 3000 : 20000;
    int epochs = sanitized ? 1 : 2;
    double want = sanitized ? 0.60 : 0.80;
    kc_dataset *train_all = NULL, *test_all = NULL, *train = NULL, *test = NULL;
    assert_int_equal(kc_dataset_open("fashion-mnist:train", &train_all), KC_STATUS_OK);
    assert_int_equal(kc_dataset_open("fashion-mnist:test", &test_all), KC_STATUS_OK);
    assert_int_equal(kc_dataset_slice(train_all, 0, n_train, &train), KC_STATUS_OK);
    assert_int_equal(kc_dataset_slice(test_all, 0, 2000, &test), KC_STATUS_OK);
    kc_model *m = NULL;
    assert_int_equal(kc_default_cnn(28, 28, 1, 10, &m), KC_STATUS_OK);
    assert_int_equal(kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                                      .loss = "sparse_categorical_crossentropy",
                                                      .metrics = {"accuracy"}}),
                     KC_STATUS_OK);
    kc_history *h = NULL;
    assert_int_equal(kc_fit(m, train, &(kc_fit_opts){.epochs = epochs, .batch_size = 128, .seed = 1}, &h), KC_STATUS_OK);
    kc_eval_result r;
    assert_int_equal(kc_evaluate(m, test, 500, &r), KC_STATUS_OK);
    printf("# fashion subset: train loss %.4f acc %.4f, test loss %.4f acc %.4f, %.0f img/s\n",
           kc_history_epoch(h, epochs - 1)->loss, kc_history_epoch(h, epochs - 1)->metrics[0], r.loss, r.metrics[0],
           kc_history_epoch(h, epochs - 1)->images_per_second);
    if (r.metrics[0] < want) fail_msg("test accuracy %.4f < %.2f", r.metrics[0], want);
    kc_history_destroy(h);
    kc_model_destroy(m);
    kc_dataset_destroy(train);
    kc_dataset_destroy(test);
    kc_dataset_destroy(train_all);
    kc_dataset_destroy(test_all);
}

int main(void) {
    kc_dataset *probe = NULL;
    if (kc_dataset_open("fashion-mnist:test", &probe) != KC_STATUS_OK) {
        printf("SKIP: %s\n", kc_last_error());
        return 77;
    }
    kc_dataset_destroy(probe);
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_default_cnn_fashion_subset)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
