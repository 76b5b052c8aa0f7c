/* exif.c — the EXIF Orientation reader and the flips / rotations (see exif.h). Written from the
 * EXIF 2.3 / TIFF 6.0 layouts and the JPEG, PNG and WebP container formats; every offset is
 * checked against the end of its block before it is read. */
#include "stages/image/exif.h"

#include <string.h>

/* A bounded reader of one byte order. */
typedef struct tiff_rd {
    const uint8_t *p;
    size_t n;
    int le; /* 1: "II" little-endian, 0: "MM" big-endian */
} tiff_rd;

static int rd16(const tiff_rd *t, size_t off, uint32_t *v) {
    if (off > t->n || t->n - off < 2) return -1;
    const uint8_t *b = t->p + off;
    *v = t->le ? (uint32_t)b[0] | (uint32_t)b[1] << 8 : (uint32_t)b[0] << 8 | b[1];
    return 0;
}

static int rd32(const tiff_rd *t, size_t off, uint32_t *v) {
    if (off > t->n || t->n - off < 4) return -1;
    const uint8_t *b = t->p + off;
    *v = t->le ? (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24
               : (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return 0;
}

int fr_exif_orientation(const uint8_t *p, size_t n) {
    if (!p) return 1;
    if (n >= 6 && !memcmp(p, "Exif\0\0", 6)) p += 6, n -= 6;
    if (n < 8) return 1;
    tiff_rd t = {p, n, 0};
    if (p[0] == 'I' && p[1] == 'I') t.le = 1;
    else if (!(p[0] == 'M' && p[1] == 'M')) return 1;
    uint32_t magic, ifd, count;
    if (rd16(&t, 2, &magic) || magic != 42 || rd32(&t, 4, &ifd) || rd16(&t, ifd, &count)) return 1;
    for (uint32_t i = 0; i < count; i++) {
        size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        uint32_t tag, type, cnt, v;
        if (rd16(&t, e, &tag) || rd16(&t, e + 2, &type) || rd32(&t, e + 4, &cnt) ||
            rd32(&t, e + 8, &v))
            return 1; /* the entries run past the block */
        if (tag != 0x0112) continue;
        if (cnt != 1) return 1;
        if (type == 3) rd16(&t, e + 8, &v); /* SHORT: the first two bytes of the value field */
        else if (type != 4) return 1;       /* LONG: all four */
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

static uint32_t be32(const uint8_t *b) {
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}
static uint32_t le32(const uint8_t *b) {
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int jpeg_orientation(const uint8_t *d, size_t n) {
    if (n < 4 || d[0] != 0xFF || d[1] != 0xD8) return 1;
    size_t i = 2;
    while (i + 4 <= n) {
        if (d[i] != 0xFF) return 1;
        uint8_t m = d[i + 1];
        if (m == 0xFF) { /* fill byte */
            i++;
            continue;
        }
        if (m == 0xD8 || m == 0x01 || (m >= 0xD0 && m <= 0xD7)) { /* no length */
            i += 2;
            continue;
        }
        if (m == 0xDA || m == 0xD9) return 1; /* scan data or the end: no more headers */
        size_t len = (size_t)d[i + 2] << 8 | d[i + 3];
        if (len < 2 || len > n - i - 2) return 1;
        if (m == 0xE1 && len >= 8 && !memcmp(d + i + 4, "Exif\0\0", 6))
            return fr_exif_orientation(d + i + 4, len - 2);
        i += 2 + len;
    }
    return 1;
}

static int png_orientation(const uint8_t *d, size_t n) {
    size_t i = 8; /* the signature was sniffed */
    while (i + 12 <= n) {
        size_t len = be32(d + i);
        if (len > n - i - 12) return 1;
        const uint8_t *type = d + i + 4;
        if (!memcmp(type, "eXIf", 4)) return fr_exif_orientation(d + i + 8, len);
        if (!memcmp(type, "IEND", 4)) return 1;
        i += 12 + len;
    }
    return 1;
}

static int webp_orientation(const uint8_t *d, size_t n) {
    if (n < 12 || memcmp(d, "RIFF", 4) || memcmp(d + 8, "WEBP", 4)) return 1;
    size_t end = (size_t)le32(d + 4);
    end = end > n - 8 ? n : end + 8;
    size_t i = 12;
    while (i + 8 <= end) {
        size_t len = le32(d + i + 4);
        if (len > end - i - 8) return 1;
        if (!memcmp(d + i, "EXIF", 4)) return fr_exif_orientation(d + i + 8, len);
        i += 8 + len + (len & 1);
    }
    return 1;
}

int fr_img_file_orientation(const uint8_t *data, size_t len, fr_img_format fmt) {
    if (!data) return 1;
    switch (fmt) {
    case FR_IMG_JPEG: return jpeg_orientation(data, len);
    case FR_IMG_PNG: return png_orientation(data, len);
    case FR_IMG_WEBP: return webp_orientation(data, len);
    default: return 1;
    }
}

void fr_image_orient(const fr_image *img, int o, fr_image *out) {
    uint32_t w = img->width, h = img->height, c = img->channels;
    if (o < 1 || o > 8) o = 1;
    bool swap = o >= 5;
    out->width = swap ? h : w;
    out->height = swap ? w : h;
    out->channels = c;
    size_t bytes = (size_t)w * h * c;
    out->pix = fr_xmalloc(bytes ? bytes : 1);
    uint32_t ow = out->width, oh = out->height;
    for (uint32_t oy = 0; oy < oh; oy++)
        for (uint32_t ox = 0; ox < ow; ox++) {
            uint32_t sx, sy; /* the stored pixel shown at (ox, oy) */
            switch (o) {
            case 2: sx = w - 1 - ox, sy = oy; break;          /* mirror left-right */
            case 3: sx = w - 1 - ox, sy = h - 1 - oy; break;  /* rotate 180 */
            case 4: sx = ox, sy = h - 1 - oy; break;          /* mirror top-bottom */
            case 5: sx = oy, sy = ox; break;                  /* transpose */
            case 6: sx = oy, sy = h - 1 - ox; break;          /* rotate 90 clockwise */
            case 7: sx = w - 1 - oy, sy = h - 1 - ox; break;  /* transverse */
            case 8: sx = w - 1 - oy, sy = ox; break;          /* rotate 90 counter-clockwise */
            default: sx = ox, sy = oy; break;
            }
            memcpy(out->pix + ((size_t)oy * ow + ox) * c, img->pix + ((size_t)sy * w + sx) * c, c);
        }
}
