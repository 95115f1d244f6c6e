/* image_decode.c — image files to uint8 pixels with Debian's libraries: JPEG with
 * libjpeg-turbo's TurboJPEG API, PNG with libpng, GIF (first frame) with giflib, BMP with
 * stb_image (libstb-dev; the only maintained Debian C library with a small BMP reader).
 * The format is told by the first bytes, as TensorFlow's decode_image does. */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>
#include <png.h>
#include <turbojpeg.h>

#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_HDR
#define STBI_NO_LINEAR
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

#include "image.h"

void kc__img_free(kc_img *im) {
    if (!im) return;
    free(im->px);
    im->px = NULL;
}

static kc_status alloc_px(kc_img *out, int h, int w, int c, const char *name) {
    out->h = h;
    out->w = w;
    out->c = c;
    out->px = malloc((size_t)h * (size_t)w * (size_t)c);
    if (!out->px)
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "'%s': out of host memory for a %d x %d image", name, w, h);
    return KC_STATUS_OK;
}

static kc_status check_pixels(int64_t w, int64_t h, int64_t max_pixels, const char *name) {
    if (w < 1 || h < 1)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': the image is %lld x %lld pixels", name, (long long)w, (long long)h);
    if (w * h > max_pixels)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': the image is %lld x %lld = %lld pixels, over the limit of %lld "
                        "(a decompression bomb?); raise the pixel limit (--max-pixels) if the image is genuine",
                        name, (long long)w, (long long)h, (long long)(w * h), (long long)max_pixels);
    return KC_STATUS_OK;
}

/* ---------------------------------------------------------------- JPEG */

static kc_status decode_jpeg(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                             int want_h, int want_w, kc_img *out) {
    tjhandle tj = tjInitDecompress();
    if (!tj) return kc__fail(KC_STATUS_OUT_OF_MEMORY, "'%s': cannot start the JPEG decoder", name);
    int w = 0, h = 0, sub = 0, cs = 0;
    kc_status s = KC_STATUS_OK;
    if (tjDecompressHeader3(tj, buf, (unsigned long)len, &w, &h, &sub, &cs) != 0) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': not a readable JPEG: %s", name, tjGetErrorStr2(tj));
        goto done;
    }
    if ((s = check_pixels(w, h, max_pixels, name))) goto done;
    int ow = w, oh = h;
    if (want_h > 0 && want_w > 0) { /* the smallest DCT scale that stays at least the target size */
        int nsf = 0;
        tjscalingfactor *sf = tjGetScalingFactors(&nsf);
        for (int i = 0; sf && i < nsf; i++) {
            if (sf[i].num != 1 || sf[i].denom > 8) continue;
            int sw = TJSCALED(w, sf[i]), sh = TJSCALED(h, sf[i]);
            if (sw >= want_w && sh >= want_h && sw * sh < ow * oh) {
                ow = sw;
                oh = sh;
            }
        }
    }
    int pf = channels == 1 ? TJPF_GRAY : channels == 3 ? TJPF_RGB : TJPF_RGBA;
    if ((s = alloc_px(out, oh, ow, channels, name))) goto done;
    /* TensorFlow's decode_jpeg uses the fast integer DCT by default; a warning (a truncated
     * file) is an error there too */
    if (tjDecompress2(tj, buf, (unsigned long)len, out->px, ow, 0, oh, pf, TJFLAG_FASTDCT | TJFLAG_STOPONWARNING) != 0) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt JPEG: %s", name, tjGetErrorStr2(tj));
        kc__img_free(out);
    }
done:
    tjDestroy(tj);
    return s;
}

/* ---------------------------------------------------------------- PNG */

typedef struct png_src {
    const uint8_t *buf;
    size_t len, pos;
    char err[200];
    jmp_buf jmp;
} png_src;

static void png_read_mem(png_structp p, png_bytep data, png_size_t n) {
    png_src *src = png_get_io_ptr(p);
    if (n > src->len - src->pos) png_error(p, "the file is truncated");
    memcpy(data, src->buf + src->pos, n);
    src->pos += n;
}

static void png_on_error(png_structp p, png_const_charp msg) {
    png_src *src = png_get_error_ptr(p);
    snprintf(src->err, sizeof src->err, "%s", msg);
    longjmp(src->jmp, 1);
}

static void png_on_warning(png_structp p, png_const_charp msg) { (void)p, (void)msg; }

/* The transformations that give `channels` uint8 channels, as TensorFlow's decode_png. */
static void png_setup(png_structp p, png_infop info, int channels) {
    int ct = png_get_color_type(p, info), depth = png_get_bit_depth(p, info);
    bool trns = png_get_valid(p, info, PNG_INFO_tRNS) != 0;
    if (ct == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(p);
    if (ct == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(p);
    if (depth == 16) png_set_strip_16(p);
    bool color = ct == PNG_COLOR_TYPE_PALETTE || (ct & PNG_COLOR_MASK_COLOR);
    bool alpha = (ct & PNG_COLOR_MASK_ALPHA) || trns;
    if (trns && channels == 4) png_set_tRNS_to_alpha(p);
    if (channels == 1) {
        if (color) png_set_rgb_to_gray_fixed(p, 1, 29900, 58700); /* TensorFlow: ITU-R 601 weights */
        if (ct & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(p);
    } else {
        if (!color) png_set_gray_to_rgb(p);
        if (channels == 3 && (ct & PNG_COLOR_MASK_ALPHA)) png_set_strip_alpha(p);
        if (channels == 4 && !alpha) png_set_add_alpha(p, 0xff, PNG_FILLER_AFTER);
    }
    png_set_interlace_handling(p);
    png_read_update_info(p, info);
}

static kc_status decode_png(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                            kc_img *out) {
    png_src src = {.buf = buf, .len = len};
    png_structp p = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = p ? png_create_info_struct(p) : NULL;
    png_bytep *volatile rows = NULL; /* set after setjmp: volatile, so that a longjmp keeps it */
    if (!info) {
        png_destroy_read_struct(&p, NULL, NULL);
        return kc__fail(KC_STATUS_OUT_OF_MEMORY, "'%s': cannot start the PNG decoder", name);
    }
    kc_status s = KC_STATUS_OK;
    if (setjmp(src.jmp)) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt PNG: %s", name, src.err);
        goto done;
    }
    png_set_read_fn(p, &src, png_read_mem);
    png_set_crc_action(p, PNG_CRC_DEFAULT, PNG_CRC_DEFAULT);
    png_set_user_limits(p, 0x7fffffff, 0x7fffffff);
    png_read_info(p, info);
    int w = (int)png_get_image_width(p, info), h = (int)png_get_image_height(p, info);
    if ((s = check_pixels(w, h, max_pixels, name))) goto done;
    png_setup(p, info, channels);
    if ((int)png_get_channels(p, info) != channels || png_get_bit_depth(p, info) != 8) {
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': PNG of color type %d, depth %d cannot be read as %d channels", name,
                     png_get_color_type(p, info), png_get_bit_depth(p, info), channels);
        goto done;
    }
    if ((s = alloc_px(out, h, w, channels, name))) goto done;
    rows = malloc((size_t)h * sizeof *rows);
    if (!rows) {
        s = kc__fail(KC_STATUS_OUT_OF_MEMORY, "'%s': out of host memory", name);
        goto done;
    }
    for (int y = 0; y < h; y++) rows[y] = out->px + (size_t)y * (size_t)w * (size_t)channels;
    png_read_image(p, rows);
    png_read_end(p, NULL);
done:
    if (s) kc__img_free(out);
    free(rows);
    png_destroy_read_struct(&p, &info, NULL);
    return s;
}

/* ---------------------------------------------------------------- GIF (first frame) */

typedef struct gif_src {
    const uint8_t *buf;
    size_t len, pos;
} gif_src;

static int gif_read_mem(GifFileType *g, GifByteType *data, int n) {
    gif_src *src = g->UserData;
    size_t k = KC_MIN((size_t)n, src->len - src->pos);
    memcpy(data, src->buf + src->pos, k);
    src->pos += k;
    return (int)k;
}

/* Paint frame 0 on the canvas; outside it and transparent pixels are 0, as in TensorFlow. */
static kc_status gif_paint(GifFileType *g, const char *name, int channels, kc_img *out) {
    SavedImage *im = &g->SavedImages[0];
    ColorMapObject *cm = im->ImageDesc.ColorMap ? im->ImageDesc.ColorMap : g->SColorMap;
    GraphicsControlBlock gcb = {.TransparentColor = NO_TRANSPARENT_COLOR};
    DGifSavedExtensionToGCB(g, 0, &gcb);
    int left = im->ImageDesc.Left, top = im->ImageDesc.Top, iw = im->ImageDesc.Width, ih = im->ImageDesc.Height;
    if (!cm) return kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt GIF: no color map", name);
    if (left < 0 || top < 0 || left + iw > g->SWidth || top + ih > g->SHeight)
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt GIF: the first frame lies outside the %d x %d canvas",
                        name, g->SWidth, g->SHeight);
    KC_TRY(alloc_px(out, g->SHeight, g->SWidth, channels, name));
    memset(out->px, 0, (size_t)out->h * (size_t)out->w * (size_t)channels);
    for (int y = 0; y < ih; y++) {
        for (int x = 0; x < iw; x++) {
            int ci = im->RasterBits[(size_t)y * (size_t)iw + (size_t)x];
            if (ci == gcb.TransparentColor) continue;
            if (ci >= cm->ColorCount) {
                kc__img_free(out);
                return kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt GIF: color index %d outside the color map of %d",
                                name, ci, cm->ColorCount);
            }
            GifColorType c = cm->Colors[ci];
            uint8_t *d = out->px + ((size_t)(top + y) * (size_t)out->w + (size_t)(left + x)) * (size_t)channels;
            if (channels == 1) {
                d[0] = (uint8_t)((c.Red * 299 + c.Green * 587 + c.Blue * 114 + 500) / 1000);
            } else {
                d[0] = c.Red, d[1] = c.Green, d[2] = c.Blue;
                if (channels == 4) d[3] = 255;
            }
        }
    }
    return KC_STATUS_OK;
}

static kc_status decode_gif(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                            kc_img *out) {
    gif_src src = {.buf = buf, .len = len};
    int err = 0;
    GifFileType *g = DGifOpen(&src, gif_read_mem, &err);
    if (!g) return kc__fail(KC_STATUS_BAD_FILE, "'%s': not a readable GIF: %s", name, GifErrorString(err));
    kc_status s = check_pixels(g->SWidth, g->SHeight, max_pixels, name);
    if (!s && DGifSlurp(g) != GIF_OK && g->ImageCount < 1)
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt GIF: %s", name, GifErrorString(g->Error));
    else if (!s && g->ImageCount < 1)
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': the GIF has no frame", name);
    else if (!s && !g->SavedImages[0].RasterBits)
        s = kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt GIF: the first frame has no pixels", name);
    if (!s) s = gif_paint(g, name, channels, out);
    DGifCloseFile(g, &err);
    return s;
}

/* ---------------------------------------------------------------- BMP */

static kc_status decode_bmp(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                            kc_img *out) {
    if (len > 0x7fffffff) return kc__fail(KC_STATUS_BAD_FILE, "'%s': the BMP file is over 2 GiB", name);
    int w = 0, h = 0, c = 0;
    if (!stbi_info_from_memory(buf, (int)len, &w, &h, &c))
        return kc__fail(KC_STATUS_BAD_FILE, "'%s': not a readable BMP: %s", name, stbi_failure_reason());
    KC_TRY(check_pixels(w, h, max_pixels, name));
    uint8_t *px = stbi_load_from_memory(buf, (int)len, &w, &h, &c, channels);
    if (!px) return kc__fail(KC_STATUS_BAD_FILE, "'%s': corrupt BMP: %s", name, stbi_failure_reason());
    kc_status s = alloc_px(out, h, w, channels, name);
    if (s) {
        stbi_image_free(px);
        return s;
    }
    memcpy(out->px, px, (size_t)h * (size_t)w * (size_t)channels);
    stbi_image_free(px);
    return KC_STATUS_OK;
}

kc_status kc__image_decode(const uint8_t *buf, size_t len, const char *name, int channels, int64_t max_pixels,
                           int want_h, int want_w, kc_img *out) {
    memset(out, 0, sizeof *out);
    if (channels != 1 && channels != 3 && channels != 4)
        return kc__fail(KC_STATUS_INTERNAL, "'%s': %d channels asked of the decoder", name, channels);
    if (len >= 3 && buf[0] == 0xff && buf[1] == 0xd8 && buf[2] == 0xff)
        return decode_jpeg(buf, len, name, channels, max_pixels, want_h, want_w, out);
    if (len >= 8 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0) return decode_png(buf, len, name, channels, max_pixels, out);
    if (len >= 6 && (memcmp(buf, "GIF87a", 6) == 0 || memcmp(buf, "GIF89a", 6) == 0))
        return decode_gif(buf, len, name, channels, max_pixels, out);
    if (len >= 2 && buf[0] == 'B' && buf[1] == 'M') return decode_bmp(buf, len, name, channels, max_pixels, out);
    if (len == 0) return kc__fail(KC_STATUS_BAD_FILE, "'%s': the file is empty", name);
    return kc__fail(KC_STATUS_BAD_FILE, "'%s': not a JPEG, PNG, GIF or BMP image (its first bytes are none of "
                    "theirs)", name);
}
