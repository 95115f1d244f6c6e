/* fuzz_image.c — libFuzzer target: the image decoders (JPEG through TurboJPEG, PNG through
 * libpng, GIF through giflib, BMP through stb_image) and Keras's resize after them. The
 * first input byte chooses the channels (1, 3, 4), the interpolation and crop / pad; the
 * rest is the file. An image that decodes has the size and channels asked for, and its
 * resized values are finite and in [0, 255] (bicubic overshoots, as TensorFlow's does: its
 * kernel has negative lobes, so within [-100, 355]). Images over 2^20 pixels are refused before
 * decoding (the decompression-bomb limit), which keeps memory bounded. */
#include <math.h>

#include "data/image.h"
#include "fuzz_common.h"

KC_FUZZ_INITIALIZE

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int sel = data[0], channels = sel % 3 == 0 ? 1 : sel % 3 == 1 ? 3 : 4;
    kc_image_opts o = {.height = 7 + (sel >> 6), .width = 9, .interpolation = (kc_interpolation)((sel >> 2) % 4)};
    o.crop_to_aspect_ratio = (sel >> 4) % 3 == 1;
    o.pad_to_aspect_ratio = (sel >> 4) % 3 == 2;
    kc_img im;
    kc_status s = kc__image_decode(data + 1, size - 1, "fuzz", channels, 1 << 20, (sel & 0x80) ? o.height : 0, o.width, &im);
    fuzz_check_error(s);
    if (s != KC_STATUS_OK) return 0;
    if (!im.px || im.c != channels || im.h < 1 || im.w < 1 || (int64_t)im.h * im.w > (1 << 20)) abort();
    float out[10 * 9 * 4], *tmp = NULL;
    size_t tmp_n = 0;
    s = kc__image_resize(&im, &o, out, &tmp, &tmp_n);
    fuzz_check_error(s);
    const float lo = o.interpolation == KC_INTERP_BICUBIC ? -100.0f : 0.0f, hi = 255.0f - lo + 1e-3f;
    for (int k = 0; s == KC_STATUS_OK && k < o.height * o.width * channels; k++)
        if (!(out[k] >= lo && out[k] <= hi)) {
            fprintf(stderr, "resized value %g out of [%g, %g] at %d\n", out[k], lo, hi, k);
            abort();
        }
    free(tmp);
    kc__img_free(&im);
    return 0;
}
