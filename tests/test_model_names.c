/* test_model_names.c — layer names at scale: a model of 100,000 layers loads from JSON in
 * linear time (adding a layer searched every earlier name: 80k layers took 28 s, 400k did not
 * finish in 120 s), duplicate names are still refused at any depth, and automatic names
 * ("dense", "dense_1", ...) skip names taken explicitly, as Keras's do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "kerac.h"

enum { N = 100000 };

/* A Keras 3 Sequential config: Input (4), then n Dense(2) layers named d0, d1, ...; with
 * dup >= 0, layer `dup` is named like layer 0. */
static char *big_config(int n, int dup) {
    size_t cap = (size_t)n * 96 + 512, used = 0;
    char *s = malloc(cap);
    assert_non_null(s);
    used += (size_t)snprintf(s, cap, "{\"class_name\": \"Sequential\", \"config\": {\"name\": \"deep\", \"layers\": ["
                                     "{\"class_name\": \"InputLayer\", \"config\": {\"batch_shape\": [null, 4], "
                                     "\"name\": \"input\"}}");
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(s + used, cap - used,
                                 ", {\"class_name\": \"Dense\", \"config\": {\"name\": \"d%d\", \"units\": 2}}",
                                 i == dup ? 0 : i);
    snprintf(s + used, cap - used, "]}}");
    return s;
}

static void test_many_layers_load_in_linear_time(void **state) {
    (void)state;
    char *text = big_config(N, -1);
    clock_t t0 = clock();
    kc_model *m = NULL;
    kc_status s = kc_model_from_json(text, strlen(text), &m);
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (s != KC_STATUS_OK) fail_msg("loading %d layers: %s", N, kc_last_error());
    assert_int_equal(kc_model_num_layers(m), N + 1);
    kc_model_destroy(m);
    free(text);
    printf("  %d layers from JSON: %.2f s of CPU time\n", N, cpu);
    /* quadratic: about 45 s of CPU for 100k layers in a release build; linear: well under
     * 1 s (under the sanitizers, a few seconds) */
    if (cpu > 30) fail_msg("loading %d layers took %.1f s of CPU time: adding a layer is not O(1)", N, cpu);
}

static void test_duplicate_name_deep_down(void **state) {
    (void)state;
    char *text = big_config(N / 10, N / 10 - 1);
    kc_model *m = NULL;
    kc_status s = kc_model_from_json(text, strlen(text), &m);
    free(text);
    assert_int_equal(s, KC_STATUS_INVALID_ARGUMENT);
    if (!strstr(kc_last_error(), "layer name 'd0' is used twice")) fail_msg("message: %s", kc_last_error());
    kc_model_destroy(m);
}

static void test_auto_names_skip_taken(void **state) {
    (void)state;
    kc_model *m = NULL;
    assert_int_equal(kc_sequential("auto", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_DENSE(.units = 2));                    /* dense */
    kc_add(m, KC_DENSE(.units = 2, .name = "dense_2")); /* taken explicitly */
    kc_add(m, KC_DENSE(.units = 2));                    /* dense_1 */
    kc_add(m, KC_DENSE(.units = 2));                    /* dense_3: dense_2 is taken */
    for (int i = 0; i < 5000; i++) kc_add(m, KC_DENSE(.units = 2));
    assert_int_equal(kc_add(m, KC_DENSE(.units = 2, .name = "dense_4000")), KC_STATUS_INVALID_ARGUMENT);
    kc_model_destroy(m);
    assert_int_equal(kc_sequential("auto", &m), KC_STATUS_OK);
    kc_add(m, KC_INPUT(.shape = {4}));
    kc_add(m, KC_DENSE(.units = 2));
    kc_add(m, KC_DENSE(.units = 2, .name = "dense_2"));
    kc_add(m, KC_DENSE(.units = 2));
    kc_add(m, KC_DENSE(.units = 2));
    assert_int_equal(kc_model_status(m), KC_STATUS_OK);
    const char *want[] = {"dense", "dense_2", "dense_1", "dense_3"};
    for (int i = 0; i < 4; i++) {
        kc_layer_info li;
        assert_int_equal(kc_model_layer_info(m, i + 1, &li), KC_STATUS_OK);
        assert_string_equal(li.name, want[i]);
    }
    kc_model_destroy(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_many_layers_load_in_linear_time),
        cmocka_unit_test(test_duplicate_name_deep_down),
        cmocka_unit_test(test_auto_names_skip_taken),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
