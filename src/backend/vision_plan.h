/* vision_plan.h — what a Qwen2-VL / Qwen2.5-VL vision tower derives from the image grids alone
 * (HF's vision_utils.get_vision_{position_ids,attention_seqlens,window_index} and the rotary
 * angles), shared by the CPU tower (backend/cpu/vision.h) and the CUDA tower
 * (backend/cuda/cuda_vision.h) so that both compute the same plan by construction.
 * Pure functions of the hyperparameters and the grids; the buffers are the caller's.
 */
#ifndef FRUGAL_BACKEND_VISION_PLAN_H
#define FRUGAL_BACKEND_VISION_PLAN_H

#include "model/vision.h"

#define FR_VISION_MAX_PATCHES (1 << 20) /* patches per call accepted */

/* Tokens after the merger for these grids: sum of t*h*w / merge^2. -1 when a grid is invalid
 * (a dimension < 1, h or w not a multiple of merge, or the total above FR_VISION_MAX_PATCHES). */
int64_t fr_vision_n_tokens(const fr_vision_hparams *hp, const int32_t *grid_thw, int n_images);

/* rot_pos (n_patches, 2): the (row, column) of each patch in processor order (HF's
 * get_vision_position_ids). window_index (n_patches / merge^2): merged unit at each window-order
 * place (HF's get_vision_window_index); cu_window (n_windows + 1, in patches, consecutive
 * duplicates removed) with *n_windows set. window_size 0: identity order, one window per frame.
 * Buffers are the caller's: rot_pos 2*n_patches, window_index n_patches/merge^2, cu_window
 * n_patches/merge^2 + n_images*t + 1 entries. Return 0, or -1 for invalid grids. */
int fr_vision_rot_pos(const fr_vision_hparams *hp, const int32_t *grid_thw, int n_images,
                      int32_t *rot_pos);
int fr_vision_window_index(const fr_vision_hparams *hp, const int32_t *grid_thw, int n_images,
                           int32_t *window_index, int32_t *cu_window, int *n_windows);

/* Background units dropped before the tower (stages/vision/bgdrop.h): keep (n_tok, one per
 * merged unit in processor order, 1 = kept) filters a plan made by fr_vision_window_index in
 * place. win keeps the kept units in window order (*n_kept of them); cu_window and cu_full
 * (n_full + 1 frame boundaries in patches, as made from the grids) are recounted over the kept
 * units, and a window or frame left empty disappears (consecutive equal boundaries are merged).
 * The tower then runs on n_kept * merge^2 patches: each kept patch keeps its rotary angles, so a
 * kept token sees only kept tokens of its window / frame. keep NULL: no change. */
void fr_vision_plan_keep(const fr_vision_hparams *hp, const uint8_t *keep, int64_t n_tok,
                         int32_t *win, int32_t *cu_window, int *n_windows, int32_t *cu_full,
                         int *n_full, int64_t *n_kept);

/* The 2D rotary table of the n patches in window order: cs, sn (n, head_dim/2) = cos / sin of
 * pair k's angle, row * inv[k] for k < head_dim/4, else col * inv[k - head_dim/4], with
 * inv[j] = theta^(-2j/(head_dim/2)) and the angles in float32 as torch computes them (cos / sin
 * in double, rounded). rot_pos and window_index as above; head_dim % 4 == 0, <= 4096. */
void fr_vision_rope_table(const fr_vision_hparams *hp, const int32_t *rot_pos,
                          const int32_t *window_index, int64_t n, float *cs, float *sn);

#endif
