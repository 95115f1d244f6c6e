/* image_resize.c — Keras's load_image after decoding: crop or pad to the target's aspect
 * ratio (keras.utils.smart_resize / pad_to_aspect_ratio arithmetic), then TensorFlow's
 * tf.image.resize without antialiasing (pad: tf.image.resize_with_pad, which Keras's loader
 * uses: resize keeping the aspect ratio, then pad): bilinear, nearest and bicubic with half-pixel
 * centres (bicubic: Keys' kernel a = -0.5 from a 1024-entry table, outside taps dropped and
 * the weights renormalised), area as resize_area. Arithmetic in float32 in the same order,
 * so that PNG images agree with Keras to float rounding. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"

/* ---------------------------------------------------------------- kernels */

static void resize_bilinear(const float *src, int ih, int iw, int c, float *dst, int oh, int ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    for (int y = 0; y < oh; y++) {
        const float in_y = ((float)y + 0.5f) * sy - 0.5f, fy = floorf(in_y);
        const int y0 = KC_MAX((int)fy, 0), y1 = KC_MIN((int)ceilf(in_y), ih - 1);
        const float ly = in_y - fy;
        for (int x = 0; x < ow; x++) {
            const float in_x = ((float)x + 0.5f) * sx - 0.5f, fx = floorf(in_x);
            const int x0 = KC_MAX((int)fx, 0), x1 = KC_MIN((int)ceilf(in_x), iw - 1);
            const float lx = in_x - fx;
            const float *tl = src + ((size_t)y0 * iw + x0) * c, *tr = src + ((size_t)y0 * iw + x1) * c;
            const float *bl = src + ((size_t)y1 * iw + x0) * c, *br = src + ((size_t)y1 * iw + x1) * c;
            float *d = dst + ((size_t)y * ow + x) * c;
            for (int k = 0; k < c; k++) {
                const float top = tl[k] + (tr[k] - tl[k]) * lx;
                const float bottom = bl[k] + (br[k] - bl[k]) * lx;
                d[k] = top + (bottom - top) * ly;
            }
        }
    }
}

static void resize_nearest(const float *src, int ih, int iw, int c, float *dst, int oh, int ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    for (int y = 0; y < oh; y++) {
        const int iy = KC_MAX(0, KC_MIN((int)floorf(((float)y + 0.5f) * sy), ih - 1));
        for (int x = 0; x < ow; x++) {
            const int ix = KC_MAX(0, KC_MIN((int)floorf(((float)x + 0.5f) * sx), iw - 1));
            memcpy(dst + ((size_t)y * ow + x) * c, src + ((size_t)iy * iw + ix) * c, (size_t)c * sizeof(float));
        }
    }
}

#define CUBIC_TABLE 1024

typedef struct cubic_taps {
    int idx[4];
    float w[4];
} cubic_taps;

static const float *cubic_table(void) {
    static float table[(CUBIC_TABLE + 1) * 2];
    static _Atomic int ready = 0;
    if (!ready) { /* idempotent: racing threads write the same values */
        const float a = -0.5f;
        for (int i = 0; i <= CUBIC_TABLE; i++) {
            float x = (float)(i * 1.0 / CUBIC_TABLE);
            table[i * 2] = ((a + 2) * x - (a + 3)) * x * x + 1;
            x += 1.0f;
            table[i * 2 + 1] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
        }
        ready = 1;
    }
    return table;
}

static cubic_taps cubic_weights(float scale, int out, int limit) {
    const float *t = cubic_table();
    const float in = ((float)out + 0.5f) * scale - 0.5f;
    const int loc = (int)floorf(in);
    const float delta = in - (float)loc;
    const int off = (int)lrintf(delta * CUBIC_TABLE);
    const float w[4] = {t[off * 2 + 1], t[off * 2], t[(CUBIC_TABLE - off) * 2], t[(CUBIC_TABLE - off) * 2 + 1]};
    cubic_taps r;
    float sum = 0;
    for (int i = 0; i < 4; i++) {
        int want = loc - 1 + i;
        r.idx[i] = KC_MIN(limit - 1, KC_MAX(0, want));
        r.w[i] = r.idx[i] == want ? w[i] : 0.0f;
    }
    sum = r.w[0] + r.w[1] + r.w[2] + r.w[3];
    if (fabsf(sum) >= 1000.0f * 1.17549435e-38f) {
        const float inv = 1.0f / sum;
        for (int i = 0; i < 4; i++) r.w[i] *= inv;
    }
    return r;
}

static void resize_bicubic(const float *src, int ih, int iw, int c, float *dst, int oh, int ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    for (int y = 0; y < oh; y++) {
        const cubic_taps ty = cubic_weights(sy, y, ih);
        for (int x = 0; x < ow; x++) {
            const cubic_taps tx = cubic_weights(sx, x, iw);
            float *d = dst + ((size_t)y * ow + x) * c;
            for (int k = 0; k < c; k++) {
                float col[4];
                for (int i = 0; i < 4; i++) { /* down each of the 4 columns, then across */
                    const float *p = src + (size_t)tx.idx[i] * c + k;
                    col[i] = p[(size_t)ty.idx[0] * iw * c] * ty.w[0] + p[(size_t)ty.idx[1] * iw * c] * ty.w[1] +
                             p[(size_t)ty.idx[2] * iw * c] * ty.w[2] + p[(size_t)ty.idx[3] * iw * c] * ty.w[3];
                }
                d[k] = col[0] * tx.w[0] + col[1] * tx.w[1] + col[2] * tx.w[2] + col[3] * tx.w[3];
            }
        }
    }
}

/* How much of input cell v lies in [lo, hi). */
static inline float area_part(int v, float lo, float hi, float scale) {
    return (float)v < lo ? ((float)(v + 1) > hi ? scale : (float)(v + 1) - lo)
                         : ((float)(v + 1) > hi ? hi - (float)v : 1.0f);
}

static void resize_area(const float *src, int ih, int iw, int c, float *dst, int oh, int ow) {
    const float sy = (float)ih / (float)oh, sx = (float)iw / (float)ow;
    const float norm = 1.0f / (sy * sx);
    for (int y = 0; y < oh; y++) {
        const float y0 = (float)y * sy, y1 = (float)(y + 1) * sy;
        const int ys = (int)floorf(y0), ye = (int)ceilf(y1);
        for (int x = 0; x < ow; x++) {
            const float x0 = (float)x * sx, x1 = (float)(x + 1) * sx;
            const int xs = (int)floorf(x0), xe = (x1 - (float)xs) > 1 ? (int)ceilf(x1) : xs + 1;
            float *d = dst + ((size_t)y * ow + x) * c;
            for (int k = 0; k < c; k++) {
                float sum_y = 0;
                for (int v = ys; v < ye; v++) {
                    const float *row = src + (size_t)KC_MIN(ih - 1, KC_MAX(0, v)) * iw * c;
                    float sum_x = 0;
                    for (int u = xs; u < xe; u++)
                        sum_x += row[(size_t)KC_MIN(iw - 1, KC_MAX(0, u)) * c + k] * area_part(u, x0, x1, sx);
                    sum_y += sum_x * area_part(v, y0, y1, sy);
                }
                d[k] = sum_y * norm;
            }
        }
    }
}

/* ---------------------------------------------------------------- crop / pad, then resize */

static kc_status grow(float **tmp, size_t *tmp_n, size_t need) {
    if (*tmp_n >= need) return KC_STATUS_OK;
    free(*tmp);
    *tmp = malloc(need * sizeof(float));
    *tmp_n = *tmp ? need : 0;
    return *tmp ? KC_STATUS_OK : kc__fail(KC_STATUS_OUT_OF_MEMORY, "out of host memory resizing an image");
}

static void resize_any(kc_interpolation m, const float *src, int ih, int iw, int c, float *dst, int oh, int ow) {
    if (ih == oh && iw == ow) { /* every method is exact at scale 1 */
        memcpy(dst, src, (size_t)oh * (size_t)ow * (size_t)c * sizeof(float));
        return;
    }
    switch (m) {
    case KC_INTERP_NEAREST: resize_nearest(src, ih, iw, c, dst, oh, ow); break;
    case KC_INTERP_BICUBIC: resize_bicubic(src, ih, iw, c, dst, oh, ow); break;
    case KC_INTERP_AREA: resize_area(src, ih, iw, c, dst, oh, ow); break;
    default: resize_bilinear(src, ih, iw, c, dst, oh, ow); break;
    }
}

kc_status kc__image_resize(const kc_img *in, const kc_image_opts *o, float *out, float **tmp, size_t *tmp_n) {
    const int th = o->height, tw = o->width, c = in->c;
    int h = in->h, w = in->w, y0 = 0, x0 = 0; /* the region of the input used */
    int rh = th, rw = tw, py = 0, px = 0;     /* resized to rh x rw, placed at (py, px) */
    if (o->crop_to_aspect_ratio) {            /* keras.utils.smart_resize */
        int ch = (int)((float)((int64_t)w * th) / (float)tw), cw = (int)((float)((int64_t)h * tw) / (float)th);
        ch = KC_MAX(KC_MIN(h, ch), 1);
        cw = KC_MAX(KC_MIN(w, cw), 1);
        y0 = (int)((float)(h - ch) / 2);
        x0 = (int)((float)(w - cw) / 2);
        h = ch;
        w = cw;
    } else if (o->pad_to_aspect_ratio) {      /* tf.image.resize_with_pad, in float32 as there */
        const float ratio = KC_MAX((float)w / (float)tw, (float)h / (float)th);
        const float fh = (float)h / ratio, fw = (float)w / ratio;
        rh = KC_MAX((int)floorf(fh), 1);
        rw = KC_MAX((int)floorf(fw), 1);
        py = KC_MAX(0, (int)floorf(((float)th - fh) / 2));
        px = KC_MAX(0, (int)floorf(((float)tw - fw) / 2));
        rh = KC_MIN(rh, th - py);
        rw = KC_MIN(rw, tw - px);
    }
    const size_t n_src = (size_t)h * (size_t)w * (size_t)c, n_res = (size_t)rh * (size_t)rw * (size_t)c;
    KC_TRY(grow(tmp, tmp_n, n_src + n_res));
    float *src = *tmp, *res = *tmp + n_src;
    for (int y = 0; y < h; y++) {
        const uint8_t *s = in->px + ((size_t)(y0 + y) * in->w + x0) * c;
        float *d = src + (size_t)y * w * c;
        for (int k = 0; k < w * c; k++) d[k] = (float)s[k];
    }
    if (rh == th && rw == tw) {
        resize_any(o->interpolation, src, h, w, c, out, th, tw);
        return KC_STATUS_OK;
    }
    resize_any(o->interpolation, src, h, w, c, res, rh, rw);
    memset(out, 0, (size_t)th * (size_t)tw * (size_t)c * sizeof(float));
    for (int y = 0; y < rh; y++)
        memcpy(out + ((size_t)(py + y) * tw + px) * c, res + (size_t)y * rw * c, (size_t)rw * c * sizeof(float));
    return KC_STATUS_OK;
}
