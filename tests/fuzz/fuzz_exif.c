/* fuzz_exif.c — libFuzzer harness for the EXIF Orientation reader and the container walks that
 * find the EXIF block (src/stages/image/exif.c).
 *
 * The first input byte (mod 4) picks what the rest is: 0 a TIFF-structured EXIF block, 1 a JPEG,
 * 2 a PNG, 3 a WebP file (copied to a buffer of exactly its size so that AddressSanitizer sees a
 * read past the end). The orientation found must be 1..8; a 5x3 test image oriented by it must
 * have the right size (sides swapped for 5..8), the same multiset of pixels, and orienting it
 * back by the inverse orientation must give the original.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/image/exif.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    size_t n = size - 1;
    uint8_t *b = malloc(n ? n : 1);
    if (n) memcpy(b, data + 1, n);
    int o;
    switch (data[0] % 4) {
    case 0: o = fr_exif_orientation(b, n); break;
    case 1: o = fr_img_file_orientation(b, n, FR_IMG_JPEG); break;
    case 2: o = fr_img_file_orientation(b, n, FR_IMG_PNG); break;
    default: o = fr_img_file_orientation(b, n, FR_IMG_WEBP); break;
    }
    free(b);
    if (o < 1 || o > 8) abort();
    uint8_t pix[15];
    for (int i = 0; i < 15; i++) pix[i] = (uint8_t)i;
    fr_image img = {.pix = pix, .width = 5, .height = 3, .channels = 1}, up, back;
    fr_image_orient(&img, o, &up);
    if ((o >= 5) != (up.width == 3) || up.width * up.height != 15) abort();
    unsigned seen = 0;
    for (int i = 0; i < 15; i++) seen |= 1u << up.pix[i];
    if (seen != 0x7fff) abort();
    static const int inverse[9] = {0, 1, 2, 3, 4, 5, 8, 7, 6};
    fr_image_orient(&up, inverse[o], &back);
    if (back.width != 5 || memcmp(back.pix, pix, 15)) abort();
    fr_image_free(&up);
    fr_image_free(&back);
    return 0;
}
