/* image.h — untrusted image bytes in, 8-bit gray or RGB pixels out.
 *
 * Design: the caller passes the raw (already base64-decoded) bytes and, optionally, the media type
 * the client declared ("image/png", ...). The real format is detected from the magic bytes only;
 * a declared type that disagrees is an error ("declared image/png but the data is JPEG"), as is an
 * unsupported declared type. Before any pixel buffer is allocated the width and height are read
 * from the header (PNG IHDR, JPEG SOFn, WebP VP8/VP8L/VP8X via WebPGetInfo, TIFF first IFD via
 * libtiff's directory read) and checked against fr_img_limits, so a 100-megapixel image is refused
 * after reading a few dozen bytes. Decoding uses the hardened system libraries from memory (libpng
 * simplified API, libjpeg-turbo with a longjmp error manager and a memory cap, libwebp, libtiff with
 * per-handle error handlers and an allocation cap). Alpha is composited onto white (documents),
 * or dropped as PIL's convert("RGB") drops it (FR_IMG_DECODE_ALPHA_DROP, the vision-language
 * path). The EXIF Orientation of a JPEG (APP1), PNG (eXIf) or WebP (EXIF chunk) is applied, as
 * PIL.ImageOps.exif_transpose applies it (stages/image/exif.h): the decoded image is upright, and
 * for orientations 5..8 its width and height are the stored height and width.
 * Corrupt, truncated or empty data gives a one-line fr_err message, never a crash.
 *
 * Thread safety: no global state is touched (libtiff and libpng errors go to per-call handlers);
 * every function may run on many threads at once.
 */
#ifndef FRUGAL_IMAGE_H
#define FRUGAL_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

typedef enum fr_img_format {
    FR_IMG_UNKNOWN = 0, /* not a supported format */
    FR_IMG_PNG,
    FR_IMG_JPEG,
    FR_IMG_WEBP,
    FR_IMG_TIFF,
} fr_img_format;

/* Limits checked before decoding. Zero in a field means "use the default". */
typedef struct fr_img_limits {
    size_t max_bytes;    /* encoded size cap in bytes (default 20 MB) */
    uint32_t max_side;   /* width and height cap in pixels (default 16384) */
    uint64_t max_pixels; /* width * height cap (default 40 000 000) */
} fr_img_limits;

#define FR_IMG_DEFAULT_MAX_BYTES (20u * 1000u * 1000u)
#define FR_IMG_DEFAULT_MAX_SIDE 16384u
#define FR_IMG_DEFAULT_MAX_PIXELS 40000000ull

/* What the header says, read without decoding pixels. */
typedef struct fr_img_info {
    fr_img_format format; /* detected from the magic bytes */
    uint32_t width;       /* pixels */
    uint32_t height;      /* pixels */
} fr_img_info;

/* A decoded image: rows of width * channels bytes, top row first, no padding. */
typedef struct fr_image {
    uint8_t *pix;      /* [height * width * channels], malloc'd; fr_image_free releases it */
    uint32_t width;    /* pixels */
    uint32_t height;   /* pixels */
    uint32_t channels; /* 1 = gray, 3 = RGB (interleaved) */
} fr_image;

/* Fill *l with the defaults. */
void fr_img_limits_default(fr_img_limits *l);

/* Format from magic bytes (FR_IMG_UNKNOWN if none matches). */
fr_img_format fr_img_sniff(const uint8_t *data, size_t len);
/* Format from a media type ("image/png", "image/jpeg", "image/jpg", "image/webp", "image/tiff",
 * case-insensitive, parameters after ';' ignored); FR_IMG_UNKNOWN if unsupported. */
fr_img_format fr_img_format_from_media_type(const char *media_type);
/* "PNG", "JPEG", "WebP", "TIFF" or "unknown". */
const char *fr_img_format_name(fr_img_format f);

/* Detect the format, check `declared` (NULL or "" = not declared) and the limits (lim may be NULL
 * for the defaults) from the header alone. 0 on success, -1 with err set. */
int fr_img_probe(const uint8_t *data, size_t len, const char *declared, const fr_img_limits *lim,
                 fr_img_info *info, fr_err *err);

/* Probe, then decode to `channels` (1 = gray, 3 = RGB). 0 on success (*out owns its pixels), -1
 * with err set and *out zeroed. */
int fr_img_decode(const uint8_t *data, size_t len, const char *declared, const fr_img_limits *lim,
                  uint32_t channels, fr_image *out, fr_err *err);

/* Flags of fr_img_decode_flags. */
#define FR_IMG_DECODE_ALPHA_DROP 1u /* drop alpha (PIL's convert("RGB")) instead of compositing
                                       onto white; TIFF gives libtiff's premultiplied colours */

/* fr_img_decode with flags (0 = fr_img_decode). */
int fr_img_decode_flags(const uint8_t *data, size_t len, const char *declared,
                        const fr_img_limits *lim, uint32_t channels, unsigned flags, fr_image *out,
                        fr_err *err);

/* Free the pixels (safe on a zeroed image) and zero the struct. */
void fr_image_free(fr_image *img);

/* A gray copy of img (a plain copy when img is already gray). */
void fr_image_to_gray(const fr_image *img, fr_image *out);

/* Rotate a gray or RGB image by 90, 180 or 270 degrees clockwise into *out (0: a copy). */
void fr_image_rotate(const fr_image *img, int degrees_cw, fr_image *out);

/* Encoders (for tests, the document generator and fuzz seeds). Return 0 / -1 with err set;
 * *buf receives the file bytes. quality: JPEG 1..100, WebP 1..100 (ignored elsewhere). */
int fr_img_encode(const fr_image *img, fr_img_format fmt, int quality, fr_buf *buf, fr_err *err);

#endif
