/* image_stage.h — the image side of routing, in one call for the router: decode (with limits and
 * media-type check), estimate text density, decide OCR-on/vision-off or vision-on/OCR-off, and run
 * OCR when the route says so.
 *
 * Design: the density estimate runs on the decoded gray image before any OCR or vision work, takes
 * a few milliseconds, and its score, threshold and decision are returned so the router can report
 * them in `route`. force_ocr / force_vision override the estimate (the decision reason says so).
 * The OCR itself runs on an fr_ocr_pool shared by the request threads.
 *
 * Thread safety: fr_image_stage_run may run on many threads at once with one shared pool.
 */
#ifndef FRUGAL_OCR_IMAGE_STAGE_H
#define FRUGAL_OCR_IMAGE_STAGE_H

#include <stdbool.h>

#include "stages/image/density.h"
#include "stages/image/image.h"
#include "stages/ocr/ocr.h"

typedef struct fr_image_stage_cfg {
    fr_img_limits limits; /* decode limits (zeros = defaults) */
    float threshold;      /* density threshold; <= 0 = FR_DENSITY_DEFAULT_THRESHOLD */
    bool force_ocr;       /* run OCR whatever the estimate says */
    bool force_vision;    /* never run OCR (vision route) whatever the estimate says */
} fr_image_stage_cfg;

typedef struct fr_image_stage_result {
    fr_img_info info;      /* detected format and size */
    fr_density density;    /* the estimate (score, parts, ms) */
    float threshold;       /* threshold used */
    bool ocr_on;           /* true: OCR ran, vision off; false: vision on, OCR skipped */
    char reason[128];      /* e.g. "text density 0.82 >= 0.35" */
    fr_ocr_result ocr;     /* filled when ocr_on */
    double decode_ms;      /* decode time */
    double ocr_ms;         /* OCR time (0 when skipped) */
    fr_image gray;         /* the decoded gray image (kept for a vision stage; freed by _free) */
} fr_image_stage_result;

/* data/len: raw image bytes (base64 already decoded); declared: media type or NULL.
 * pool may be NULL only when force_vision is set. 0 on success, -1 with err set: a bad image is a
 * client error (HTTP 4xx), the message says why. */
int fr_image_stage_run(fr_ocr_pool *pool, const uint8_t *data, size_t len, const char *declared,
                       const fr_image_stage_cfg *cfg, fr_image_stage_result *res, fr_err *err);
void fr_image_stage_result_free(fr_image_stage_result *res);
/* The result as a new JSON object (the caller owns it: cJSON_Delete); never NULL:
 * {"format":..,"width":..,"height":..,"density":{"score":..,"threshold":..,"text_tiles":..,
 *  "picture_tiles":..,"paper":..,"ms":..},"ocr_on":..,"reason":..,"decode_ms":..,"ocr_ms":..,
 *  "ocr":{...} (fr_ocr_result_json) or null}; density figures to 0.001, times to 0.01 ms. */
struct cJSON *fr_image_stage_json(const fr_image_stage_result *res);

#endif
