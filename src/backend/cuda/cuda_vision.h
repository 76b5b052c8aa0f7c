/* cuda_vision.h — the Qwen2-VL / Qwen2.5-VL vision tower on one CUDA device: the same function
 * as the CPU tower's fr_vision_forward (backend/cpu/vision.h), with bf16 weights and matrix
 * inputs (cuBLAS, fp32 accumulation) and fp32 residual stream, norms, softmax and outputs.
 *
 *   fr_cuda_vision *cv = fr_cuda_vision_new(model, 0, &err);       // uploads the weights
 *   fr_cuda_vision_forward(cv, pixels, n_patches, grid_thw, n_images, out, &err);
 *   fr_cuda_vision_free(cv);
 *
 * Used by frugal generate / serve on a CUDA device (engine/generate.c, serve/vlm.c); checked by
 * gpu-vision against the CPU tower and HF.
 *
 * Thread safety: one fr_cuda_vision per thread (it owns a stream, a cuBLAS handle and
 * activation buffers that grow to the largest call); the model stays shared read-only.
 * It computes its plan with backend/vision_plan.h (in libfrugal), so it is linked into
 * gpu-e2e, gpu-vision and frugal-cuda, not into gpu-check / gpu-bench.
 */
#ifndef FRUGAL_CUDA_VISION_H
#define FRUGAL_CUDA_VISION_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdint.h>

#include "base/base.h"
#include "model/vision.h"

typedef struct fr_cuda_vision fr_cuda_vision;

/* Upload m's vision tower (bf16 linear weights, f32 norms and biases) to `device`. Returns NULL
 * with err: no vision tower (FR_ERR_UNSUPPORTED), head_dim above 128 or not a multiple of 16
 * (FR_ERR_UNSUPPORTED), a weight not F32 (FR_ERR_UNSUPPORTED), out of device memory
 * (FR_ERR_TOO_LARGE). The model must outlive the handle. */
fr_cuda_vision *fr_cuda_vision_new(const fr_model *m, int device, fr_err *err);
void fr_cuda_vision_free(fr_cuda_vision *cv);

/* fr_vision_forward's contract: pixels (n_patches, patch_dim) host f32, grid_thw (n_images, 3);
 * out host f32 (n_tokens, out_hidden) in the original token order. Synchronous. Returns 0, or
 * -1 with err (invalid grids: FR_ERR_BAD_REQUEST; out of device memory: FR_ERR_TOO_LARGE). */
int fr_cuda_vision_forward(fr_cuda_vision *cv, const float *pixels, int64_t n_patches,
                           const int32_t *grid_thw, int n_images, float *out, fr_err *err);

/* The same on the kept merged units only (fr_vision_forward_kept's contract, backend/cpu/
 * vision.h): keep (n_tokens over all images, 1 = kept) or NULL; out (n_kept, out_hidden). Every
 * unit dropped: FR_ERR_BAD_REQUEST. */
int fr_cuda_vision_forward_kept(fr_cuda_vision *cv, const float *pixels, int64_t n_patches,
                                const int32_t *grid_thw, int n_images, const uint8_t *keep,
                                float *out, fr_err *err);

/* The same for one image given as 8-bit RGB rgb [height][width][3] already at its processor
 * size (height and width multiples of patch * merge: what fr_vl_smart_resize gives; resize
 * first otherwise): lut [3 * 256] is the processor's value table (fr_vl_proc_lut), so the tower
 * sees exactly fr_vl_preprocess's pixels; rescaling, normalising, patchifying and the window
 * order happen on the device (3 bytes a pixel uploaded instead of 4 * 3 * temporal). Output and
 * errors as fr_cuda_vision_forward. */
int fr_cuda_vision_forward_rgb(fr_cuda_vision *cv, const uint8_t *rgb, int height, int width,
                               const float *lut, float *out, fr_err *err);

#ifdef __cplusplus
}
#endif
#endif
