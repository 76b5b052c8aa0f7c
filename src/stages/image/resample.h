/* resample.h — bicubic resizing of 8-bit images, equal to PIL's Image.resize(BICUBIC).
 *
 * The algorithm is Pillow's convolution resampler, written here from its description:
 *   - separable: a horizontal pass into an 8-bit intermediate image holding only the source rows
 *     the vertical pass will read, then a vertical pass (each pass is skipped when its size does
 *     not change);
 *   - for each output position x the source centre is (x + 0.5) * scale with scale = in / out;
 *     the filter is stretched by max(scale, 1), so the support is 2 * max(scale, 1) pixels each
 *     side; the window is [(int)(centre - support + 0.5), (int)(centre + support + 0.5)) clipped
 *     to the image; the weights are the cubic kernel (a = -0.5) at (i - centre + 0.5) / max(scale, 1),
 *     computed in double and divided by their sum;
 *   - the weights become integers with 22 fractional bits (rounded half away from zero); each
 *     output sample is (sum of weight * sample + 2^21) >> 22, clipped to 0..255.
 * Results are bit-equal to Pillow 9.4 on the references in tests/fixtures/ref/resample-pil
 * (tests/test_resample.c; the measured tolerance is stated there and in docs/VISION.md).
 *
 *   fr_image out; fr_err err = {0};
 *   if (fr_img_resize_bicubic(&rgb, 448, 336, &out, &err)) ... err.msg ...
 *   ... fr_image_free(&out);
 *
 * Thread-safe; allocates only the output, the intermediate and the weight tables.
 */
#ifndef FRUGAL_IMAGE_RESAMPLE_H
#define FRUGAL_IMAGE_RESAMPLE_H

#include <stdint.h>

#include "base/base.h"
#include "stages/image/image.h"

/* Largest output side fr_img_resize_bicubic accepts (the decoder's default side cap). */
#define FR_RESAMPLE_MAX_SIDE 16384u

/* Resizes in (1 or 3 channels, any size >= 1x1) to out_w x out_h (1..FR_RESAMPLE_MAX_SIDE each)
 * with PIL's bicubic filter. 0, or -1 with err set (FR_ERR_BAD_REQUEST for a bad size or image,
 * FR_ERR_INTERNAL when memory runs out) and *out zeroed. *out owns its pixels
 * (fr_image_free). The same size gives an exact copy, as PIL does. */
int fr_img_resize_bicubic(const fr_image *in, uint32_t out_w, uint32_t out_h, fr_image *out,
                          fr_err *err);

#endif
