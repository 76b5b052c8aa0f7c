/* image.c — format detection, header probes, limit checks, decoders and small encoders.
 *
 * Design: see image.h. Every decoder first runs fr_img_probe (magic + header dimensions + limits)
 * and only then allocates width*height*channels bytes, so a hostile header never drives an
 * allocation. Library error paths: libpng's simplified API reports through png_image.message,
 * libjpeg through a setjmp/longjmp error manager (max_memory_to_use capped), libtiff through
 * per-handle TIFFOpenOptions handlers (no global handler is installed), libwebp through status
 * codes. The encoders are small helpers for tests, fuzz seeds and the document generator.
 */
#include "stages/image/image.h"

#include "stages/image/exif.h"

#include <ctype.h>
#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which needs FILE */
#include <jpeglib.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <tiffio.h>
#include <webp/decode.h>
#include <webp/encode.h>

void fr_img_limits_default(fr_img_limits *l) {
    l->max_bytes = FR_IMG_DEFAULT_MAX_BYTES;
    l->max_side = FR_IMG_DEFAULT_MAX_SIDE;
    l->max_pixels = FR_IMG_DEFAULT_MAX_PIXELS;
}

static fr_img_limits resolve_limits(const fr_img_limits *lim) {
    fr_img_limits l;
    fr_img_limits_default(&l);
    if (lim) {
        if (lim->max_bytes) l.max_bytes = lim->max_bytes;
        if (lim->max_side) l.max_side = lim->max_side;
        if (lim->max_pixels) l.max_pixels = lim->max_pixels;
    }
    return l;
}

fr_img_format fr_img_sniff(const uint8_t *d, size_t n) {
    if (!d) return FR_IMG_UNKNOWN;
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return FR_IMG_PNG;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return FR_IMG_JPEG;
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return FR_IMG_WEBP;
    if (n >= 4 && (!memcmp(d, "II*\0", 4) || !memcmp(d, "MM\0*", 4) || !memcmp(d, "II+\0", 4) ||
                   !memcmp(d, "MM\0+", 4)))
        return FR_IMG_TIFF;
    return FR_IMG_UNKNOWN;
}

fr_img_format fr_img_format_from_media_type(const char *mt) {
    if (!mt) return FR_IMG_UNKNOWN;
    while (*mt == ' ') mt++;
    size_t n = strcspn(mt, "; ");
    static const struct { const char *name; fr_img_format f; } tab[] = {
        {"image/png", FR_IMG_PNG},   {"image/jpeg", FR_IMG_JPEG}, {"image/jpg", FR_IMG_JPEG},
        {"image/pjpeg", FR_IMG_JPEG}, {"image/webp", FR_IMG_WEBP}, {"image/tiff", FR_IMG_TIFF},
        {"image/tif", FR_IMG_TIFF},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(tab); i++)
        if (strlen(tab[i].name) == n && !strncasecmp(mt, tab[i].name, n)) return tab[i].f;
    return FR_IMG_UNKNOWN;
}

const char *fr_img_format_name(fr_img_format f) {
    switch (f) {
    case FR_IMG_PNG: return "PNG";
    case FR_IMG_JPEG: return "JPEG";
    case FR_IMG_WEBP: return "WebP";
    case FR_IMG_TIFF: return "TIFF";
    default: return "unknown";
    }
}

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static uint32_t be16(const uint8_t *p) { return (uint32_t)p[0] << 8 | p[1]; }

/* PNG: the first chunk must be IHDR (13 bytes). */
static int png_dims(const uint8_t *d, size_t n, uint32_t *w, uint32_t *h, fr_err *err) {
    if (n < 33) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "truncated PNG header (%zu bytes)", n);
        return -1;
    }
    if (be32(d + 8) != 13 || memcmp(d + 12, "IHDR", 4)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt PNG: first chunk is not IHDR");
        return -1;
    }
    *w = be32(d + 16);
    *h = be32(d + 20);
    return 0;
}

/* JPEG: walk the marker segments up to the first SOFn. */
static int jpeg_dims(const uint8_t *d, size_t n, uint32_t *w, uint32_t *h, fr_err *err) {
    size_t i = 2;
    while (i < n) {
        if (d[i] != 0xFF) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt JPEG: expected a marker at byte %zu", i);
            return -1;
        }
        while (i < n && d[i] == 0xFF) i++;
        if (i >= n) break;
        uint8_t m = d[i++];
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue; /* no payload */
        if (m == 0xD9 || m == 0xDA) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt JPEG: no frame header before %s",
                        m == 0xDA ? "the scan" : "the end");
            return -1;
        }
        if (i + 2 > n) break;
        uint32_t len = be16(d + i);
        if (len < 2) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt JPEG: bad segment length");
            return -1;
        }
        bool sof = (m >= 0xC0 && m <= 0xCF) && m != 0xC4 && m != 0xC8 && m != 0xCC;
        if (sof) {
            if (len < 8 || i + 7 > n) break;
            *h = be16(d + i + 3);
            *w = be16(d + i + 5);
            return 0;
        }
        i += len;
    }
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "truncated JPEG: no frame header");
    return -1;
}

/* ---- libtiff from memory ---------------------------------------------------------------------- */

typedef struct tiff_mem {
    const uint8_t *data; /* the encoded bytes */
    size_t len;          /* their count */
    size_t pos;          /* read position */
    fr_err *err;         /* first error message lands here */
    bool failed;         /* an error was reported */
} tiff_mem;

static tmsize_t tm_read(thandle_t h, void *buf, tmsize_t n) {
    tiff_mem *m = h;
    if (n < 0) return -1;
    size_t left = m->pos < m->len ? m->len - m->pos : 0;
    size_t k = FR_MIN((size_t)n, left);
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return (tmsize_t)k;
}
static tmsize_t tm_write(thandle_t h, void *buf, tmsize_t n) { return -1; }
static toff_t tm_seek(thandle_t h, toff_t off, int whence) {
    tiff_mem *m = h;
    uint64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? m->pos : m->len;
    if (off > UINT64_MAX - base) return (toff_t)-1;
    uint64_t p = base + off;
    if (p > SIZE_MAX) return (toff_t)-1;
    m->pos = (size_t)p;
    return p;
}
static int tm_close(thandle_t h) { return 0; }
static toff_t tm_size(thandle_t h) { return ((tiff_mem *)h)->len; }
static int tm_map(thandle_t h, void **base, toff_t *size) { return 0; }
static void tm_unmap(thandle_t h, void *base, toff_t size) {}
static int tm_error(TIFF *tif, void *ud, const char *module, const char *fmt, va_list ap) {
    tiff_mem *m = ud;
    if (!m->failed && m->err) {
        char tmp[400];
        vsnprintf(tmp, sizeof tmp, fmt, ap);
        fr_err_setc(m->err, FR_ERR_BAD_REQUEST, "corrupt TIFF: %s", tmp);
    }
    m->failed = true;
    return 1;
}
static int tm_warn(TIFF *tif, void *ud, const char *module, const char *fmt, va_list ap) {
    return 1; /* swallowed */
}

static TIFF *tiff_open(tiff_mem *m, const fr_img_limits *l) {
    TIFFOpenOptions *o = TIFFOpenOptionsAlloc();
    if (!o) return NULL;
    TIFFOpenOptionsSetErrorHandlerExtR(o, tm_error, m);
    TIFFOpenOptionsSetWarningHandlerExtR(o, tm_warn, m);
    /* one strip/tile buffer or the RGBA raster: never above the pixel cap * 4 (+ slack) */
    uint64_t cap = l->max_pixels * 4 + (1u << 20);
    TIFFOpenOptionsSetMaxSingleMemAlloc(o, (tmsize_t)FR_MIN(cap, (uint64_t)INT64_MAX));
    TIFF *t = TIFFClientOpenExt("mem", "rm", m, tm_read, tm_write, tm_seek, tm_close, tm_size,
                                tm_map, tm_unmap, o);
    TIFFOpenOptionsFree(o);
    return t;
}

static int tiff_dims(const uint8_t *d, size_t n, const fr_img_limits *l, uint32_t *w, uint32_t *h,
                     fr_err *err) {
    tiff_mem m = {d, n, 0, err, false};
    TIFF *t = tiff_open(&m, l);
    if (!t) {
        if (!m.failed) fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt TIFF: cannot read the header");
        return -1;
    }
    uint32_t ww = 0, hh = 0;
    int ok = TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &ww) && TIFFGetField(t, TIFFTAG_IMAGELENGTH, &hh);
    TIFFClose(t);
    if (!ok) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt TIFF: no image dimensions");
        return -1;
    }
    *w = ww;
    *h = hh;
    return 0;
}

int fr_img_probe(const uint8_t *data, size_t len, const char *declared, const fr_img_limits *lim,
                 fr_img_info *info, fr_err *err) {
    fr_img_limits l = resolve_limits(lim);
    memset(info, 0, sizeof *info);
    if (!data || len == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "empty image (zero bytes)");
        return -1;
    }
    if (len > l.max_bytes) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "image too large: %zu bytes (limit %zu)", len,
                    l.max_bytes);
        return -1;
    }
    fr_img_format f = fr_img_sniff(data, len);
    if (declared && *declared) {
        fr_img_format df = fr_img_format_from_media_type(declared);
        if (df == FR_IMG_UNKNOWN) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED,
                        "unsupported image media type '%.64s' (PNG, JPEG, WebP, TIFF)", declared);
            return -1;
        }
        if (f != FR_IMG_UNKNOWN && df != f) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "declared %s but the data is %s (magic bytes)",
                        fr_img_format_name(df), fr_img_format_name(f));
            return -1;
        }
        if (f == FR_IMG_UNKNOWN) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED, "declared %s but the data has no %s signature",
                        fr_img_format_name(df), fr_img_format_name(df));
            return -1;
        }
    }
    uint32_t w = 0, h = 0;
    int rc;
    switch (f) {
    case FR_IMG_PNG: rc = png_dims(data, len, &w, &h, err); break;
    case FR_IMG_JPEG: rc = jpeg_dims(data, len, &w, &h, err); break;
    case FR_IMG_WEBP: {
        int ww = 0, hh = 0;
        rc = WebPGetInfo(data, len, &ww, &hh) ? 0 : -1;
        if (rc) fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated WebP header");
        w = (uint32_t)ww;
        h = (uint32_t)hh;
        break;
    }
    case FR_IMG_TIFF: rc = tiff_dims(data, len, &l, &w, &h, err); break;
    default:
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "unrecognised image format (supported: PNG, JPEG, WebP, TIFF)");
        return -1;
    }
    if (rc) return -1;
    info->format = f;
    info->width = w;
    info->height = h;
    if (w == 0 || h == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt %s: zero width or height",
                    fr_img_format_name(f));
        return -1;
    }
    if (w > l.max_side || h > l.max_side) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "image too large: %ux%u pixels (limit %u per side)", w,
                    h, l.max_side);
        return -1;
    }
    if ((uint64_t)w * h > l.max_pixels) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "image too large: %ux%u = %.1f megapixels (limit %.1f)",
                    w, h, (double)w * h / 1e6, (double)l.max_pixels / 1e6);
        return -1;
    }
    return 0;
}

/* ---- pixel helpers ---------------------------------------------------------------------------- */

static inline uint8_t luma(uint32_t r, uint32_t g, uint32_t b) {
    return (uint8_t)((77 * r + 150 * g + 29 * b + 128) >> 8);
}

/* RGBA row -> gray or RGB composited onto white. */
static void from_rgba(const uint8_t *src, size_t npix, uint32_t ch, uint8_t *dst) {
    for (size_t i = 0; i < npix; i++) {
        const uint8_t *s = src + 4 * i;
        uint32_t a = s[3], ia = 255 - a;
        uint32_t r = (s[0] * a + 255 * ia + 127) / 255;
        uint32_t g = (s[1] * a + 255 * ia + 127) / 255;
        uint32_t b = (s[2] * a + 255 * ia + 127) / 255;
        if (ch == 1) dst[i] = luma(r, g, b);
        else {
            dst[3 * i] = (uint8_t)r;
            dst[3 * i + 1] = (uint8_t)g;
            dst[3 * i + 2] = (uint8_t)b;
        }
    }
}

/* ---- decoders --------------------------------------------------------------------------------- */

static int decode_png(const uint8_t *d, size_t n, uint32_t ch, bool drop, fr_image *o, fr_err *err) {
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&im, d, n)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt PNG: %s", im.message);
        png_image_free(&im);
        return -1;
    }
    if (im.width != o->width || im.height != o->height) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt PNG: inconsistent dimensions");
        png_image_free(&im);
        return -1;
    }
    /* alpha dropped: read with alpha (not composited) and keep the colour channels */
    drop = drop && (im.format & PNG_FORMAT_FLAG_ALPHA);
    uint32_t rc = drop ? ch + 1 : ch;
    im.format = ch == 1 ? (drop ? PNG_FORMAT_GA : PNG_FORMAT_GRAY) : (drop ? PNG_FORMAT_RGBA : PNG_FORMAT_RGB);
    png_color white = {255, 255, 255};
    uint8_t *buf = malloc((size_t)o->width * o->height * rc);
    if (!buf) {
        fr_err_set(err, "out of memory decoding PNG");
        png_image_free(&im);
        return -1;
    }
    if (!png_image_finish_read(&im, &white, buf, (png_int_32)(o->width * rc), NULL)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated PNG: %s", im.message);
        png_image_free(&im);
        free(buf);
        return -1;
    }
    png_image_free(&im);
    if (drop) {
        size_t np = (size_t)o->width * o->height;
        for (size_t i = 0; i < np; i++) memmove(buf + i * ch, buf + i * rc, ch);
    }
    o->pix = buf;
    return 0;
}

typedef struct jerr {
    struct jpeg_error_mgr pub; /* libjpeg's manager (must be first) */
    jmp_buf jb;                /* where error_exit returns to */
    char msg[JMSG_LENGTH_MAX]; /* the formatted message */
} jerr;

static void jerr_exit(j_common_ptr c) {
    jerr *e = (jerr *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}
static void jerr_emit(j_common_ptr c, int level) {
    /* warnings (level -1) are counted; a corrupt-data warning is fatal for us */
    if (level < 0 && c->err->num_warnings++ == 0) {
        jerr *e = (jerr *)c->err;
        c->err->format_message(c, e->msg);
    }
}

static int decode_jpeg(const uint8_t *d, size_t n, uint32_t ch, fr_image *o, fr_err *err) {
    struct jpeg_decompress_struct ci;
    jerr je;
    memset(&ci, 0, sizeof ci);
    memset(&je, 0, sizeof je);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jerr_exit;
    je.pub.emit_message = jerr_emit;
    uint8_t *volatile pix = NULL;
    uint8_t *volatile row = NULL;
    if (setjmp(je.jb)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated JPEG: %s", je.msg);
        jpeg_destroy_decompress(&ci);
        free(pix);
        free(row);
        return -1;
    }
    jpeg_create_decompress(&ci);
    ci.mem->max_memory_to_use = 512l << 20;
    jpeg_mem_src(&ci, d, (unsigned long)n);
    jpeg_read_header(&ci, TRUE);
    if (ci.image_width != o->width || ci.image_height != o->height) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt JPEG: inconsistent dimensions");
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    bool cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    ci.out_color_space = cmyk ? JCS_CMYK : ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&ci);
    uint32_t oc = (uint32_t)ci.output_components;
    pix = malloc((size_t)o->width * o->height * ch);
    row = malloc((size_t)o->width * oc);
    if (!pix || !row) {
        fr_err_set(err, "out of memory decoding JPEG");
        jpeg_destroy_decompress(&ci);
        free(pix);
        free(row);
        return -1;
    }
    while (ci.output_scanline < ci.output_height) {
        uint32_t y = ci.output_scanline;
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&ci, &rp, 1) != 1) break;
        uint8_t *dst = pix + (size_t)y * o->width * ch;
        if (oc == ch) memcpy(dst, row, (size_t)o->width * ch);
        else
            for (uint32_t x = 0; x < o->width; x++) {
                uint32_t r, g, b;
                if (oc == 4) { /* Adobe CMYK is stored inverted */
                    uint32_t k = row[4 * x + 3];
                    r = row[4 * x] * k / 255;
                    g = row[4 * x + 1] * k / 255;
                    b = row[4 * x + 2] * k / 255;
                } else if (oc == 3) {
                    r = row[3 * x], g = row[3 * x + 1], b = row[3 * x + 2];
                } else {
                    r = g = b = row[x];
                }
                if (ch == 1) dst[x] = luma(r, g, b);
                else dst[3 * x] = (uint8_t)r, dst[3 * x + 1] = (uint8_t)g, dst[3 * x + 2] = (uint8_t)b;
            }
    }
    if (je.pub.num_warnings) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated JPEG: %s", je.msg);
        jpeg_destroy_decompress(&ci);
        free(pix);
        free(row);
        return -1;
    }
    jpeg_finish_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    o->pix = pix;
    return 0;
}

static int decode_webp(const uint8_t *d, size_t n, uint32_t ch, bool drop, fr_image *o, fr_err *err) {
    size_t np = (size_t)o->width * o->height;
    uint8_t *rgba = malloc(np * 4);
    if (!rgba) {
        fr_err_set(err, "out of memory decoding WebP");
        return -1;
    }
    if (!WebPDecodeRGBAInto(d, n, rgba, np * 4, (int)(o->width * 4))) {
        free(rgba);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated WebP data");
        return -1;
    }
    o->pix = malloc(np * ch);
    if (!o->pix) {
        free(rgba);
        fr_err_set(err, "out of memory decoding WebP");
        return -1;
    }
    if (drop) {
        for (size_t i = 0; i < np; i++) {
            const uint8_t *s = rgba + 4 * i;
            if (ch == 1) o->pix[i] = luma(s[0], s[1], s[2]);
            else memcpy(o->pix + 3 * i, s, 3);
        }
    } else {
        from_rgba(rgba, np, ch, o->pix);
    }
    free(rgba);
    return 0;
}

static int decode_tiff(const uint8_t *d, size_t n, const fr_img_limits *l, uint32_t ch,
                       bool drop, fr_image *o, fr_err *err) {
    tiff_mem m = {d, n, 0, err, false};
    TIFF *t = tiff_open(&m, l);
    if (!t) {
        if (!m.failed) fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt TIFF: cannot read the header");
        return -1;
    }
    uint32_t w = 0, h = 0;
    TIFFGetField(t, TIFFTAG_IMAGEWIDTH, &w);
    TIFFGetField(t, TIFFTAG_IMAGELENGTH, &h);
    if (w != o->width || h != o->height) {
        TIFFClose(t);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt TIFF: inconsistent dimensions");
        return -1;
    }
    size_t np = (size_t)w * h;
    uint32_t *rgba = malloc(np * 4);
    if (!rgba) {
        TIFFClose(t);
        fr_err_set(err, "out of memory decoding TIFF");
        return -1;
    }
    char emsg[1024] = "";
    if (!TIFFRGBAImageOK(t, emsg)) {
        TIFFClose(t);
        free(rgba);
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "unsupported TIFF: %.300s", emsg);
        return -1;
    }
    int ok = TIFFReadRGBAImageOriented(t, w, h, rgba, ORIENTATION_TOPLEFT, 0);
    TIFFClose(t);
    if (!ok || m.failed) {
        free(rgba);
        if (!m.failed) fr_err_setc(err, FR_ERR_BAD_REQUEST, "corrupt or truncated TIFF data");
        return -1;
    }
    /* TIFFGetR/G/B/A: packed ABGR in host order */
    o->pix = malloc(np * ch);
    uint8_t *tmp = malloc(np * 4);
    if (!o->pix || !tmp) {
        free(rgba);
        free(tmp);
        free(o->pix);
        o->pix = NULL;
        fr_err_set(err, "out of memory decoding TIFF");
        return -1;
    }
    for (size_t i = 0; i < np; i++) {
        tmp[4 * i] = (uint8_t)TIFFGetR(rgba[i]);
        tmp[4 * i + 1] = (uint8_t)TIFFGetG(rgba[i]);
        tmp[4 * i + 2] = (uint8_t)TIFFGetB(rgba[i]);
        tmp[4 * i + 3] = drop ? 255 : (uint8_t)TIFFGetA(rgba[i]);
    }
    from_rgba(tmp, np, ch, o->pix);
    free(tmp);
    free(rgba);
    return 0;
}

int fr_img_decode(const uint8_t *data, size_t len, const char *declared, const fr_img_limits *lim,
                  uint32_t channels, fr_image *out, fr_err *err) {
    return fr_img_decode_flags(data, len, declared, lim, channels, 0, out, err);
}

int fr_img_decode_flags(const uint8_t *data, size_t len, const char *declared,
                        const fr_img_limits *lim, uint32_t channels, unsigned flags, fr_image *out,
                        fr_err *err) {
    memset(out, 0, sizeof *out);
    bool drop = flags & FR_IMG_DECODE_ALPHA_DROP;
    if (channels != 1 && channels != 3) {
        fr_err_set(err, "image decode: channels must be 1 or 3");
        return -1;
    }
    fr_img_limits l = resolve_limits(lim);
    fr_img_info info;
    if (fr_img_probe(data, len, declared, &l, &info, err)) return -1;
    out->width = info.width;
    out->height = info.height;
    out->channels = channels;
    int rc;
    switch (info.format) {
    case FR_IMG_PNG: rc = decode_png(data, len, channels, drop, out, err); break;
    case FR_IMG_JPEG: rc = decode_jpeg(data, len, channels, out, err); break;
    case FR_IMG_WEBP: rc = decode_webp(data, len, channels, drop, out, err); break;
    case FR_IMG_TIFF: rc = decode_tiff(data, len, &l, channels, drop, out, err); break;
    default: rc = -1; break;
    }
    if (rc) {
        free(out->pix);
        memset(out, 0, sizeof *out);
        return -1;
    }
    /* shown upright, as PIL.ImageOps.exif_transpose shows it */
    int orient = fr_img_file_orientation(data, len, info.format);
    if (orient != 1) {
        fr_image up;
        fr_image_orient(out, orient, &up);
        fr_image_free(out);
        *out = up;
    }
    return 0;
}

void fr_image_free(fr_image *img) {
    if (!img) return;
    free(img->pix);
    memset(img, 0, sizeof *img);
}

void fr_image_to_gray(const fr_image *img, fr_image *out) {
    size_t np = (size_t)img->width * img->height;
    out->width = img->width;
    out->height = img->height;
    out->channels = 1;
    out->pix = fr_xmalloc(np ? np : 1);
    if (img->channels == 1) memcpy(out->pix, img->pix, np);
    else
        for (size_t i = 0; i < np; i++)
            out->pix[i] = luma(img->pix[3 * i], img->pix[3 * i + 1], img->pix[3 * i + 2]);
}

void fr_image_rotate(const fr_image *img, int deg, fr_image *out) {
    uint32_t w = img->width, h = img->height, c = img->channels;
    deg = ((deg % 360) + 360) % 360;
    bool swap = deg == 90 || deg == 270;
    out->width = swap ? h : w;
    out->height = swap ? w : h;
    out->channels = c;
    size_t n = (size_t)w * h * c;
    out->pix = fr_xmalloc(n ? n : 1);
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint32_t nx, ny;
            switch (deg) {
            case 90: nx = h - 1 - y, ny = x; break;
            case 180: nx = w - 1 - x, ny = h - 1 - y; break;
            case 270: nx = y, ny = w - 1 - x; break;
            default: nx = x, ny = y; break;
            }
            memcpy(out->pix + ((size_t)ny * out->width + nx) * c,
                   img->pix + ((size_t)y * w + x) * c, c);
        }
}

/* ---- encoders --------------------------------------------------------------------------------- */

static int encode_jpeg(const fr_image *img, int q, fr_buf *buf, fr_err *err) {
    struct jpeg_compress_struct ci;
    jerr je;
    memset(&ci, 0, sizeof ci);
    memset(&je, 0, sizeof je);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jerr_exit;
    static _Thread_local unsigned char *m; /* survives the longjmp without volatile games */
    static _Thread_local unsigned long msize;
    m = NULL;
    msize = 0;
    if (setjmp(je.jb)) {
        fr_err_set(err, "JPEG encode: %s", je.msg);
        jpeg_destroy_compress(&ci);
        free(m);
        return -1;
    }
    jpeg_create_compress(&ci);
    jpeg_mem_dest(&ci, &m, &msize);
    ci.image_width = img->width;
    ci.image_height = img->height;
    ci.input_components = (int)img->channels;
    ci.in_color_space = img->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, FR_MAX(1, FR_MIN(100, q)), TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW rp = img->pix + (size_t)ci.next_scanline * img->width * img->channels;
        jpeg_write_scanlines(&ci, &rp, 1);
    }
    jpeg_finish_compress(&ci);
    fr_buf_append(buf, m, msize);
    jpeg_destroy_compress(&ci);
    free(m);
    m = NULL;
    return 0;
}

static void put16(fr_buf *b, uint32_t v) {
    uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    fr_buf_append(b, p, 2);
}
static void put32(fr_buf *b, uint32_t v) {
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    fr_buf_append(b, p, 4);
}

/* Baseline uncompressed little-endian TIFF, one strip. */
static void encode_tiff(const fr_image *img, fr_buf *b) {
    uint32_t c = img->channels, n = img->width * img->height * c;
    uint32_t ntag = c == 3 ? 10 : 9;
    uint32_t ifd = 8, after = ifd + 2 + ntag * 12 + 4;
    uint32_t bps_off = after, data_off = after + (c == 3 ? 6 : 0);
    fr_buf_append(b, "II*\0", 4);
    put32(b, ifd);
    put16(b, ntag);
#define TAG(t, ty, cnt, val) (put16(b, t), put16(b, ty), put32(b, cnt), put32(b, val))
    TAG(256, 4, 1, img->width);
    TAG(257, 4, 1, img->height);
    if (c == 3) TAG(258, 3, 3, bps_off);
    else TAG(258, 3, 1, 8);
    TAG(259, 3, 1, 1);
    TAG(262, 3, 1, c == 3 ? 2 : 1);
    TAG(273, 4, 1, data_off);
    TAG(277, 3, 1, c);
    TAG(278, 4, 1, img->height);
    TAG(279, 4, 1, n);
    if (c == 3) TAG(284, 3, 1, 1);
#undef TAG
    put32(b, 0);
    if (c == 3) put16(b, 8), put16(b, 8), put16(b, 8);
    fr_buf_append(b, img->pix, n);
}

int fr_img_encode(const fr_image *img, fr_img_format fmt, int quality, fr_buf *buf, fr_err *err) {
    if (!img->pix || (img->channels != 1 && img->channels != 3) || !img->width || !img->height) {
        fr_err_set(err, "encode: empty image or bad channel count");
        return -1;
    }
    switch (fmt) {
    case FR_IMG_PNG: {
        png_image im;
        memset(&im, 0, sizeof im);
        im.version = PNG_IMAGE_VERSION;
        im.width = img->width;
        im.height = img->height;
        im.format = img->channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
        png_alloc_size_t sz = 0;
        if (!png_image_write_get_memory_size(im, sz, 0, img->pix, 0, NULL)) {
            fr_err_set(err, "PNG encode: %s", im.message);
            return -1;
        }
        void *mem = fr_xmalloc(sz);
        if (!png_image_write_to_memory(&im, mem, &sz, 0, img->pix, 0, NULL)) {
            free(mem);
            fr_err_set(err, "PNG encode: %s", im.message);
            return -1;
        }
        fr_buf_append(buf, mem, sz);
        free(mem);
        return 0;
    }
    case FR_IMG_JPEG: return encode_jpeg(img, quality, buf, err);
    case FR_IMG_WEBP: {
        uint8_t *rgb = img->pix, *out = NULL;
        if (img->channels == 1) {
            size_t np = (size_t)img->width * img->height;
            rgb = fr_xmalloc(np * 3);
            for (size_t i = 0; i < np; i++) rgb[3 * i] = rgb[3 * i + 1] = rgb[3 * i + 2] = img->pix[i];
        }
        size_t sz = quality >= 100
                        ? WebPEncodeLosslessRGB(rgb, (int)img->width, (int)img->height,
                                                (int)img->width * 3, &out)
                        : WebPEncodeRGB(rgb, (int)img->width, (int)img->height,
                                        (int)img->width * 3, (float)quality, &out);
        if (rgb != img->pix) free(rgb);
        if (!sz) {
            fr_err_set(err, "WebP encode failed");
            return -1;
        }
        fr_buf_append(buf, out, sz);
        WebPFree(out);
        return 0;
    }
    case FR_IMG_TIFF: encode_tiff(img, buf); return 0;
    default: fr_err_set(err, "encode: unsupported format"); return -1;
    }
}
