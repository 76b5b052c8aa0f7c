/* fuzz_image.c — libFuzzer harness for the image decoders (src/stages/image): any bytes, any
 * declared media type, gray or RGB output. The first input byte picks the declared type (none,
 * png, jpeg, webp, tiff, gif) and the output channels; the rest is the image. Limits are lowered
 * (4 MP, 4096 px a side) so that the fuzzer explores parsers rather than big allocations. Bit 5
 * of the first byte asks for alpha dropped (FR_IMG_DECODE_ALPHA_DROP). On success the decoded
 * image must have the probed size (width and height swapped when the file's EXIF orientation is
 * 5..8); on failure the message must be set. The text-density estimate runs on every decoded
 * image. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "stages/image/density.h"
#include "stages/image/exif.h"
#include "stages/image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const types[] = {NULL, "image/png", "image/jpeg", "image/webp", "image/tiff",
                                        "image/gif"};
    const char *declared = types[data[0] % 6];
    uint32_t ch = (data[0] >> 4) & 1 ? 3 : 1;
    fr_img_limits lim = {8u << 20, 4096, 4000000};
    fr_img_info info;
    fr_err err = {0};
    int prc = fr_img_probe(data + 1, size - 1, declared, &lim, &info, &err);
    fr_image img;
    err.msg[0] = 0;
    unsigned flags = (data[0] >> 5) & 1 ? FR_IMG_DECODE_ALPHA_DROP : 0;
    int rc = fr_img_decode_flags(data + 1, size - 1, declared, &lim, ch, flags, &img, &err);
    if (rc == 0) {
        bool swap = fr_img_file_orientation(data + 1, size - 1, info.format) >= 5;
        if (prc != 0 || img.width != (swap ? info.height : info.width) ||
            img.height != (swap ? info.width : info.height) || img.channels != ch)
            __builtin_trap();
        fr_density d;
        fr_density_measure(&img, &d);
        if (!(d.score >= 0 && d.score <= 1)) __builtin_trap();
        fr_image_free(&img);
    } else if (!err.msg[0] || img.pix) {
        __builtin_trap();
    }
    return 0;
}
