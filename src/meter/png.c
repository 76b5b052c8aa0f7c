/* png.c — the audit heatmap as a PNG, written by libpng's simplified API (8-bit sRGB RGB, one
 * image in memory): the same library that decodes uploaded images (stages/image). */
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "meter/audit.h"

unsigned char *fr_meter_png_encode(const unsigned char *rgb, int w, int h, size_t *len) {
    if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return NULL;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    if (!png_image_write_get_memory_size(im, n, 0, rgb, 0, NULL) || n == 0) {
        fr_warn("png: %s", im.message);
        png_image_free(&im);
        return NULL;
    }
    unsigned char *out = fr_xmalloc(n);
    if (!png_image_write_to_memory(&im, out, &n, 0, rgb, 0, NULL)) {
        fr_warn("png: %s", im.message);
        png_image_free(&im);
        free(out);
        return NULL;
    }
    png_image_free(&im);
    *len = n;
    return out;
}
