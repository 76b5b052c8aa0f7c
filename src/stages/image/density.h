/* density.h — a cheap "is this image mostly text?" estimate, computed before OCR or vision.
 *
 * Design: the gray image is box-downscaled by an integer factor so that at most ~150 000 pixels
 * remain (a 1 MP photo costs well under a few milliseconds). The paper level is the brightest
 * strong mode of the histogram; "ink" is anything much darker than the paper. The image is cut into
 * 16x16 tiles; a tile is
 *   - blank     when nearly all its pixels are paper and it holds almost no ink;
 *   - text-like when most pixels are paper, ink covers 2..50 %, and its rows cross ink several
 *               times (stroke structure: at least a quarter of the rows have two or more ink runs);
 *   - pictorial otherwise (textures, gradients, edges of shapes, photos).
 * score = text / (text + pictorial), scaled down when fewer than 2 % of tiles hold anything and
 * multiplied by the fraction of the page that is paper-coloured (documents are mostly background).
 * Light text on a dark background is handled by also scoring the inverted image and keeping the
 * larger score. route: score >= threshold -> OCR on / vision off, else vision on / OCR off.
 *
 * Thread safety: pure functions of their arguments.
 */
#ifndef FRUGAL_IMAGE_DENSITY_H
#define FRUGAL_IMAGE_DENSITY_H

#include <stdbool.h>

#include "stages/image/image.h"

/* The text density at or above which an image is "mostly text" (OCR) rather than a picture
 * (vision): the one default for the density stage (as a float), the route, /v1/assist and the
 * chat media parts (as a double). */
#define FR_DENSITY_DEFAULT_THRESHOLD 0.35

/* The measurement and its parts (for the route report and tuning). */
typedef struct fr_density {
    float score;         /* text-density estimate in [0,1] */
    float text_tiles;    /* fraction of all tiles that are text-like */
    float picture_tiles; /* fraction of all tiles that are pictorial */
    float paper;         /* fraction of pixels within a few levels of the paper level */
    int paper_level;     /* gray level of the background mode */
    bool inverted;       /* the score came from the inverted image (light text on dark) */
    double ms;           /* time spent, milliseconds */
} fr_density;

/* Measure an image (gray or RGB). */
void fr_density_measure(const fr_image *img, fr_density *out);

/* true = OCR on / vision off; false = vision on / OCR off. threshold <= 0 uses the default. */
bool fr_density_route_ocr(const fr_density *d, float threshold);

#endif
