/* png.c — a minimal PNG encoder for the audit's heatmap: 8-bit RGB, no interlace, filter 0 on
 * every row, one IDAT compressed with zlib (compress2), CRCs with zlib's crc32. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "meter/audit.h"

static void put32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Append a chunk (length, type, data, CRC over type + data). */
static void chunk(fr_buf *o, const char *type, const unsigned char *data, size_t n) {
    unsigned char hdr[8];
    put32(hdr, (uint32_t)n);
    memcpy(hdr + 4, type, 4);
    fr_buf_append(o, hdr, 8);
    if (n) fr_buf_append(o, data, n);
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, (const Bytef *)type, 4);
    if (n) crc = crc32(crc, data, (uInt)n);
    unsigned char c[4];
    put32(c, (uint32_t)crc);
    fr_buf_append(o, c, 4);
}

unsigned char *fr_meter_png_encode(const unsigned char *rgb, int w, int h, size_t *len) {
    if (w <= 0 || h <= 0 || w > 16384 || h > 16384) return NULL;
    size_t stride = (size_t)w * 3, raw_n = (stride + 1) * (size_t)h;
    unsigned char *raw = fr_xmalloc(raw_n);
    for (int y = 0; y < h; y++) {
        raw[(size_t)y * (stride + 1)] = 0; /* filter: none */
        memcpy(raw + (size_t)y * (stride + 1) + 1, rgb + (size_t)y * stride, stride);
    }
    uLongf zn = compressBound((uLong)raw_n);
    unsigned char *z = fr_xmalloc(zn);
    if (compress2(z, &zn, raw, (uLong)raw_n, 9) != Z_OK) {
        free(raw);
        free(z);
        return NULL;
    }
    free(raw);
    fr_buf o = {0};
    static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    fr_buf_append(&o, sig, 8);
    unsigned char ihdr[13];
    put32(ihdr, (uint32_t)w);
    put32(ihdr + 4, (uint32_t)h);
    ihdr[8] = 8;  /* bit depth */
    ihdr[9] = 2;  /* colour type: RGB */
    ihdr[10] = 0; /* deflate */
    ihdr[11] = 0; /* adaptive filtering */
    ihdr[12] = 0; /* no interlace */
    chunk(&o, "IHDR", ihdr, 13);
    chunk(&o, "IDAT", z, zn);
    chunk(&o, "IEND", NULL, 0);
    free(z);
    *len = o.len;
    return (unsigned char *)o.data;
}
