/* vision.h — the CPU forward pass of a Qwen2-VL / Qwen2.5-VL vision tower (model/vision.h), fp32.
 *
 * Input: pixel values exactly as HF's Qwen2VLImageProcessor emits them, (n_patches, C*T*P*P) rows
 * for all images one after the other, each image's rows in its processor order (merge blocks of
 * merge x merge patches, row-major over blocks), and grid_thw (n_images, 3): frames, patch rows,
 * patch columns per image (n_patches = sum of t*h*w). Output: the merger's features for every
 * image, (n_tokens, out_hidden) with n_tokens = n_patches / merge^2, in the images' original
 * token order (HF's pooler_output: the window permutation of Qwen2.5-VL is undone after the
 * merger). Images never attend to each other (attention runs per frame of each image, HF's
 * cu_seqlens; windows never cross images).
 *
 * Two implementations compute the same function:
 *   - fr_vision_forward_ref: plain C, double accumulators, one thread; the truth;
 *   - fr_vision_forward: the fast path (OpenBLAS matrix products, threaded attention), checked
 *     against the reference by tests/test_vision.c.
 * Both allocate their activations per call (sized by n_patches) and free them before returning.
 *
 * Errors (return -1, err set, out untouched or partly written): no vision tower in the model
 * (FR_ERR_UNSUPPORTED), a grid that does not match n_patches or is not a multiple of the merge
 * size, or too many patches (FR_ERR_BAD_REQUEST), out of memory (FR_ERR_TOO_LARGE).
 */
#ifndef FRUGAL_CPU_VISION_H
#define FRUGAL_CPU_VISION_H

#include "backend/cpu/cpu.h"
#include "backend/vision_plan.h"
#include "model/vision.h"

/* The tower over n_images images: pixels (n_patches, patch_dim), grid_thw (n_images, 3); out
 * (n_tokens, out_hidden). pool: worker threads for attention and element-wise ops, or NULL (the
 * caller's thread only; matrix products use OpenBLAS's own threads either way). Returns 0 or -1. */
int fr_vision_forward(const fr_model *m, fr_pool *pool, const float *pixels, int64_t n_patches,
                      const int32_t *grid_thw, int n_images, float *out, fr_err *err);

/* The same on the kept merged units only: keep (n_tokens over all images, processor order, 1 =
 * kept; see fr_vision_plan_keep) and out (n_kept, out_hidden), the kept tokens in order. Dropped
 * units never enter the tower; a kept one attends to the kept units of its window or frame and
 * keeps its rotary angles. Every unit dropped: FR_ERR_BAD_REQUEST. keep NULL = fr_vision_forward.
 * cancel (may be NULL) is polled before each block; a stop returns -1 with the reason's code
 * (fr_cancel_reason_code: CANCELLED, UNAVAILABLE, TIMEOUT). */
int fr_vision_forward_kept(const fr_model *m, fr_pool *pool, const float *pixels,
                           int64_t n_patches, const int32_t *grid_thw, int n_images,
                           const uint8_t *keep, const fr_cancel *cancel, float *out,
                           fr_err *err);

/* The plain reference of the same function (slow: for tests). */
int fr_vision_forward_ref(const fr_model *m, const float *pixels, int64_t n_patches,
                          const int32_t *grid_thw, int n_images, float *out, fr_err *err);

#endif
