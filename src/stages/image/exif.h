/* exif.h — the EXIF Orientation tag (0x0112) of JPEG, PNG and WebP files, and applying it.
 *
 * The EXIF block is a TIFF structure: a byte-order mark ("II" little- or "MM" big-endian), 42, the
 * offset of IFD0, then IFD0's entry count and 12-byte entries (tag, type, count, value or offset).
 * Orientation is a SHORT (LONG is taken too) with count 1 whose value 1..8 says how the stored
 * pixels must be flipped / rotated to be shown upright (PIL.ImageOps.exif_transpose's table:
 * 2 mirror left-right, 3 rotate 180, 4 mirror top-bottom, 5 transpose, 6 rotate 90 clockwise,
 * 7 transverse, 8 rotate 90 counter-clockwise). Every read is bounds-checked against the block;
 * a malformed block means "no orientation" (1), never an error: a photo with a broken EXIF
 * still decodes, as PIL shows it.
 *
 * Where the block is found: JPEG, the first APP1 segment starting "Exif\0\0" before the first
 * SOS; PNG, the first eXIf chunk; WebP, the EXIF chunk of an extended (VP8X) file. A leading
 * "Exif\0\0" inside a PNG or WebP chunk is skipped as PIL skips it.
 *
 * Thread-safe; no allocation except fr_image_orient's output.
 */
#ifndef FRUGAL_IMAGE_EXIF_H
#define FRUGAL_IMAGE_EXIF_H

#include <stddef.h>
#include <stdint.h>

#include "stages/image/image.h"

/* Orientation 1..8 from a TIFF-structured EXIF block (p starts at the byte-order mark, or at
 * "Exif\0\0" before it); 1 when the tag is absent, out of range or the block is malformed. */
int fr_exif_orientation(const uint8_t *p, size_t n);

/* Orientation 1..8 of a JPEG, PNG or WebP file (the container walked with bounds checks); 1 for
 * other formats or when there is none. */
int fr_img_file_orientation(const uint8_t *data, size_t len, fr_img_format fmt);

/* img shown upright for orientation o (1..8; anything else is 1) into *out (a copy for 1). */
void fr_image_orient(const fr_image *img, int o, fr_image *out);

#endif
