/* bgdrop.h — before the ViT: find the merge units of a document image that are plain
 * background, so that the encoder and the LLM skip them.
 *
 * Usage:
 *   fr_vision_bg_params p = fr_vision_bg_default_params();      // C 3, T 2, P 14, merge 2
 *   int64_t *kept = malloc(units * sizeof *kept);                // units = n_patches / merge^2
 *   fr_vision_bg_report rep;
 *   int64_t k = fr_vision_bg_select(pix, n_patches, patch_dim, gt, gh, gw, &p, kept, &rep, &err);
 *   // kept[0..k): merge units in increasing order; unit u is patch rows [u*m*m, (u+1)*m*m) of
 *   // the pixel values and LLM image token u (the merger's output row u). The ViT runs on the
 *   // kept rows only; each kept token keeps its original M-RoPE position.
 *
 * Input: the preprocessed pixel values exactly as Qwen2VLImageProcessor emits them, rows
 * [grid_t * grid_h * grid_w, C * T * P * P] ordered (t, h / m, w / m, m, m), so the m * m rows of
 * one merge unit are consecutive, and each row is channel-major (C, then T, P, P).
 *
 * Criterion (docs/VISION.md, "Background patches"): per merge unit and channel, the minimum,
 * maximum and mean of its m*m*T*P*P values. A unit is flat when every channel's range is within
 * eps. The background colour is the most common mean among flat units (means binned by eps per
 * channel; the bin with most units, ties to the lower bin; its units' means averaged). A unit is
 * droppable when every value of every channel lies within eps of the background colour. If the
 * droppable units are fewer than min_share of all units the image has no document background
 * and nothing is dropped; if every unit is droppable, the first is kept (at least one token).
 * eps is in the normalised units of the pixel values: the default 0.08 is about 5.5 of 255
 * intensity levels at CLIP's std (~0.27), above resampling and JPEG noise on a flat page and
 * well below the contrast of the faintest printed text.
 *
 * Cost: one pass over the pixel values, then O(units log units).
 * Thread safety: a pure function of its arguments.
 */
#ifndef FRUGAL_VISION_BGDROP_H
#define FRUGAL_VISION_BGDROP_H

#include <stdint.h>

#include "base/base.h"

#define FR_VISION_BG_MAX_CHANNELS 4
#define FR_VISION_BG_MAX_PATCHES (1 << 22)

/* The layout of the pixel rows and the thresholds. */
typedef struct fr_vision_bg_params {
    int channels;    /* C, 1 .. FR_VISION_BG_MAX_CHANNELS; default 3 */
    int temporal;    /* T, the temporal patch size; default 2 */
    int patch;       /* P, the patch side; default 14 */
    int merge;       /* m, the merge side (m x m patches = one LLM token); default 2 */
    float eps;       /* tolerance in normalised pixel units, >= 0; default 0.08 */
    float min_share; /* in [0, 1]: least share of droppable units to drop any; default 0.3 */
} fr_vision_bg_params;

fr_vision_bg_params fr_vision_bg_default_params(void);

/* What one call found. */
typedef struct fr_vision_bg_report {
    int64_t units;   /* merge units of the image */
    int64_t flat;    /* units whose every channel is within eps of its own mean's range */
    int64_t dropped; /* units dropped (units - kept) */
    float share;     /* droppable units / units (before the min_share and keep-one rules) */
    float background[FR_VISION_BG_MAX_CHANNELS]; /* the background colour (normalised) */
    double ms;       /* wall time */
} fr_vision_bg_report;

/* Finds the kept merge units (criterion above). kept: capacity n_patches / merge^2. rep:
 * optional. Returns the kept count (>= 1), or -1 with err (FR_ERR_BAD_REQUEST: NULL buffers,
 * a grid side < 1 or not a multiple of merge (h, w), n_patches != t * h * w or over
 * FR_VISION_BG_MAX_PATCHES, patch_dim != C * T * P * P, a parameter out of range). Values that
 * are not finite are never background. */
int64_t fr_vision_bg_select(const float *pixels, int64_t n_patches, int64_t patch_dim,
                            int grid_t, int grid_h, int grid_w, const fr_vision_bg_params *p,
                            int64_t *kept, fr_vision_bg_report *rep, fr_err *err);

#endif
