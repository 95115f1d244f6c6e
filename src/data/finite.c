/* finite.c — float32 inputs must be finite: one NaN pixel passes through a convolution and
 * leaves NaN weights behind (a ReLU can hide it from the reported loss), so a dataset file
 * holding NaN or Inf is refused when it is opened, unless the caller says it means it. */
#include <math.h>
#include <stdatomic.h>

#include "dataset.h"

static atomic_int g_allow;

void kc_set_allow_nonfinite_input(int allow) { atomic_store(&g_allow, allow ? 1 : 0); }

kc_status kc__ds_check_finite(const float *x, int64_t n, int64_t e, const char *what, const char *path) {
    if (atomic_load(&g_allow)) return KC_STATUS_OK;
    for (int64_t i = 0; i < n; i++) {
        const float *ex = x + i * e;
        for (int64_t j = 0; j < e; j++)
            if (!isfinite(ex[j]))
                return kc__fail(KC_STATUS_BAD_FILE,
                                "%s file '%s' holds %s at example %lld (value %lld of it): a non-finite input "
                                "makes NaN weights; clean the data, or pass --allow-nonfinite-input "
                                "(kc_set_allow_nonfinite_input) if you mean it",
                                what, path, isnan(ex[j]) ? "NaN" : "Inf", (long long)i, (long long)j);
    }
    return KC_STATUS_OK;
}
