/* mrope.h — the prompt side of Qwen2-VL / Qwen2.5-VL images: expanding each image placeholder to
 * the image's token count, and the M-RoPE positions of the whole prompt as HF transformers 5.17
 * computes them (Qwen2_5_VLModel.get_rope_index with get_vision_position_ids).
 *
 * Positions (3 rows: temporal, height, width; each of n entries):
 *   - a run of text tokens continues from the current position p: p, p+1, ... on all three rows;
 *   - a run of image tokens (consecutive ids == image_token_id) takes the next grid (t, h, w) of
 *     patches; with llm_h = h / merge, llm_w = w / merge its t*llm_h*llm_w tokens are laid out
 *     t-major, then rows, then columns: (p + ti, p + hi, p + wi); afterwards
 *     p += max(h, w) / merge (5.17's rule; for t = 1 the same as "max position + 1");
 *   - delta = max over all positions + 1 - n: a token decoded at KV position q has all three
 *     positions q + delta.
 * A text-only prompt gets 0..n-1 on every row and delta 0, as HF's plain positions.
 *
 * Pure functions of their arguments, thread-safe; the only allocation is the expanded id array.
 */
#ifndef FRUGAL_MROPE_H
#define FRUGAL_MROPE_H

#include "base/base.h"

#define FR_VL_MAX_IMAGES 64 /* images per prompt */

/* Tokens image i takes in the LLM: t*h*w / merge^2 (grid in patches). Returns it, or -1 when the
 * grid is not positive, h or w is not a multiple of merge, or the count exceeds INT32_MAX / 4. */
int64_t fr_vl_image_tokens(const int32_t grid_thw[3], int merge);

/* ids (n) with exactly n_images tokens equal to image_token_id: each becomes
 * fr_vl_image_tokens(grid_thw + 3*i, merge) copies of itself, in order. *out is malloc'd (*n_out
 * ids; the caller frees it). Returns 0, or -1 with err (FR_ERR_BAD_REQUEST: the placeholder
 * count differs from n_images or a grid is bad; FR_ERR_TOO_LARGE: over max_out ids). */
int fr_vl_expand_pads(const int32_t *ids, size_t n, int image_token_id, const int32_t *grid_thw,
                      int n_images, int merge, size_t max_out, int32_t **out, size_t *n_out,
                      fr_err *err);

/* HF's get_rope_index for ids (n, pads expanded) and the images' grids (n_images x 3, in prompt
 * order): pos (3, n) as described above (row r at pos + r*n), *delta. Returns 0, or -1 with err
 * FR_ERR_BAD_REQUEST when a run of image tokens does not match its grid's token count or the
 * runs and grids differ in number. */
int fr_vl_rope_index(const int32_t *ids, size_t n, int image_token_id, const int32_t *grid_thw,
                     int n_images, int merge, int32_t *pos, int32_t *delta, fr_err *err);

#endif
