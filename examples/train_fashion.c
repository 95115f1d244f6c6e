/* train_fashion.c — the default CNN on Fashion-MNIST with kerac's C API, built against
 * the installed library:
 *     cc -O2 train_fashion.c $(pkg-config --cflags --libs kerac) -o train_fashion
 * or with CMake (see CMakeLists.txt beside this file). */
#include <stdio.h>

#include <kerac.h>

static kc_status run(int epochs) {
    kc_model *m = NULL;
    kc_dataset *train = NULL, *test = NULL;
    kc_history *h = NULL;
    kc_status s = kc_sequential("fashion_cnn", &m);
    if (s != KC_STATUS_OK) return s;
    /* builder errors are sticky: one check at kc_compile is enough */
    kc_add(m, KC_INPUT(.shape = {28, 28, 1}));
    kc_add(m, KC_CONV2D(.filters = 32, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_CONV2D(.filters = 64, .kernel_size = {3, 3}, .activation = "relu"));
    kc_add(m, KC_MAXPOOL2D(.pool_size = {2, 2}));
    kc_add(m, KC_FLATTEN());
    kc_add(m, KC_DROPOUT(.rate = 0.5f));
    kc_add(m, KC_DENSE(.units = 10, .activation = "softmax"));
    s = kc_compile(m, &(kc_compile_opts){.optimizer = KC_ADAM(.learning_rate = 1e-3),
                                         .loss = "sparse_categorical_crossentropy",
                                         .metrics = {"accuracy"}});
    if (s == KC_STATUS_OK) s = kc_dataset_open("fashion-mnist:train", &train);
    if (s == KC_STATUS_OK) s = kc_dataset_open("fashion-mnist:test", &test);
    if (s == KC_STATUS_OK)
        s = kc_fit(m, train, &(kc_fit_opts){.epochs = epochs, .batch_size = 128, .validation_split = 0.1}, &h);
    if (s == KC_STATUS_OK) {
        for (int e = 0; e < kc_history_epochs(h); e++) {
            const kc_epoch_logs *l = kc_history_epoch(h, e);
            printf("epoch %d: loss %.4f accuracy %.4f val_loss %.4f val_accuracy %.4f (%.0f images/s)\n", e + 1,
                   l->loss, l->metrics[0], l->val_loss, l->val_metrics[0], l->images_per_second);
        }
        kc_eval_result r;
        s = kc_evaluate(m, test, 500, &r);
        if (s == KC_STATUS_OK) printf("test loss %.4f, test accuracy %.4f\n", r.loss, r.metrics[0]);
    }
    if (s == KC_STATUS_OK) s = kc_model_save(m, "fashion_cnn.json");
    kc_history_destroy(h);
    kc_dataset_destroy(train);
    kc_dataset_destroy(test);
    kc_model_destroy(m);
    return s;
}

int main(int argc, char **argv) {
    int epochs = 1;
    if (argc > 1 && sscanf(argv[1], "%d", &epochs) != 1) epochs = 1;
    kc_status s = run(epochs);
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "train_fashion: %s (%s)\n", kc_last_error(), kc_status_name(s));
        return 1;
    }
    return 0;
}
