/* fuzz_json.c — libFuzzer target: Keras's JSON model config reader (kc_model_from_json).
 * The input is the JSON text. Checked beyond "no crash, no leak, no undefined behaviour":
 * every failure has a message and is not an internal error, and a config the reader
 * accepts is written back (Keras 3 and Keras 2 flavours), read again and written the same. */
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_setup();
    return 0;
}

static void roundtrip(kc_model *m, int flavour) {
    char *a = NULL, *b = NULL;
    kc_model *again = NULL;
    kc_status s = kc_model_to_json(m, flavour, &a);
    if (s == KC_STATUS_OUT_OF_MEMORY) return;
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "a model read from JSON cannot be written (flavour %d): %s\n", flavour, kc_last_error());
        abort();
    }
    s = kc_model_from_json(a, strlen(a), &again);
    if (s == KC_STATUS_OUT_OF_MEMORY) goto done;
    if (s != KC_STATUS_OK) {
        fprintf(stderr, "kerac cannot read its own JSON (flavour %d): %s\n%s\n", flavour, kc_last_error(), a);
        abort();
    }
    if (kc_model_to_json(again, flavour, &b) == KC_STATUS_OK && strcmp(a, b) != 0) {
        fprintf(stderr, "JSON written, read and written again differs (flavour %d):\n%s\n%s\n", flavour, a, b);
        abort();
    }
done:
    kc_free(a);
    kc_free(b);
    kc_model_destroy(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    kc_model *m = NULL;
    kc_status s = kc_model_from_json((const char *)data, size, &m);
    fuzz_check_error(s);
    if (s == KC_STATUS_OK) {
        roundtrip(m, 3);
        roundtrip(m, 2);
    } else if (m) {
        fprintf(stderr, "kc_model_from_json failed but returned a model\n");
        abort();
    }
    kc_model_destroy(m);
    return 0;
}
