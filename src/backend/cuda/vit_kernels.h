/* vit_kernels.h — C entry points of the CUDA vision tower's kernels (k_vit_*.cu; the tower in
 * vision.cu and the checks in tests/gpu/vit_check.c call exactly these). Each launches on a
 * stream, checks the launch and returns; nothing synchronises, nothing keeps state.
 *
 * Conventions (as kernels.h): bf16 buffers are uint16_t* bit patterns; the residual stream and
 * every cuBLAS output are f32 rows; the inputs of the matrix products are bf16 rows.
 * Row order is the window order of the tower (vision.cu) unless a function says otherwise.
 */
#ifndef FRUGAL_CUDA_VIT_KERNELS_H
#define FRUGAL_CUDA_VIT_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRK_VIT_MAX_HEAD_DIM 128 /* head_dim accepted by frk_vit_attention */

/* out[i][:] = bf16(norm(x[i]) * w + b) for n rows of E: LayerNorm (mean and variance in fp32,
 * two passes) when b != NULL, else RMSNorm (x * rsqrt(mean(x^2) + eps), then * w, as HF). */
void frk_vit_norm(const float *x, const float *w, const float *b, int n, int E, float eps,
                  uint16_t *out, cudaStream_t st);

/* qkv f32 [n][3 H] (q, k, v blocks of H = n_head * D columns) plus bias [3 H] (or NULL), with
 * every q and k head rotated by the 2D rotary table: cs, sn f32 [n][D/2], pair (k, k + D/2)
 * (HF's rotate_half): x0' = x0 cs - x1 sn, x1' = x1 cs + x0 sn; into out bf16 [n][3 H]. D even. */
void frk_vit_rope(const float *qkv, const float *bias, const float *cs, const float *sn, int n,
                  int n_head, int D, uint16_t *out, cudaStream_t st);

/* Non-causal attention inside variable-length segments: rows cu[s] .. cu[s+1] of segment s
 * (cu int32 [n_seg + 1], increasing, on the device) attend to each other only. q, k, v from
 * qkv bf16 [n][3 H] (frk_vit_rope's output), scores scaled by D^-0.5, on the tensor cores with
 * fp32 accumulators and an online softmax over key tiles of 64 (no score matrix in memory);
 * out bf16 [n][H]. max_len = the longest segment (it sizes the grid). D a multiple of 16,
 * <= FRK_VIT_MAX_HEAD_DIM (fr_cuda_vision_new refuses other head sizes). */
void frk_vit_attention(const uint16_t *qkv, const int32_t *cu, int n_seg, int max_len,
                       int n_head, int D, uint16_t *out, cudaStream_t st);

/* Activations into the next product's bf16 input, biases fused (either may be NULL):
 *   FRK_VIT_SWIGLU      out = silu(a + ba) * (u + bu)            (Qwen2.5-VL MLP: a gate, u up)
 *   FRK_VIT_QUICK_GELU  out = (a + ba) * sigmoid(1.702 (a + ba))  (Qwen2-VL MLP; u unused)
 *   FRK_VIT_GELU        out = gelu_erf(a + ba)                    (the merger; u unused)
 * a, u f32 [n][F]; ba, bu f32 [F]; out bf16 [n][F]. */
enum { FRK_VIT_SWIGLU = 0, FRK_VIT_QUICK_GELU = 1, FRK_VIT_GELU = 2 };
void frk_vit_act(const float *a, const float *ba, const float *u, const float *bu, int n, int F,
                 int kind, uint16_t *out, cudaStream_t st);

/* x[i][:] += t[i][:] + b (b f32 [E] or NULL): a sublayer's output into the residual stream. */
void frk_vit_residual(float *x, const float *t, const float *b, int n, int E, cudaStream_t st);

/* The window reordering of the patch rows: dst row i = bf16(src row win[i / mu] * mu + i % mu),
 * src f32 [n_units * mu][cols] in processor order, win int32 [n_units] (the unit at each window
 * place), dst bf16 [n_units * mu][cols] in window order. */
void frk_vit_gather_rows(const float *src, const int32_t *win, int n_units, int mu, int cols,
                         uint16_t *dst, cudaStream_t st);

/* The same rows made on the device from one 8-bit RGB image rgb [h][w][3] (h = gh * P,
 * w = gw * P, gh and gw multiples of merge) as the processor patchifies it (stages/image/vlproc.h):
 * value lut[c * 256 + v] (fr_vl_proc_lut), rows in the processor's patch order (merge blocks)
 * taken in window order through win, columns (channel, t < T, y, x); dst bf16
 * [n_units * mu][3 T P P]. */
void frk_vit_patchify_u8(const uint8_t *rgb, int w, const float *lut, const int32_t *win,
                         int n_units, int mu, int gw, int merge, int P, int T, uint16_t *dst,
                         cudaStream_t st);

/* Its inverse on the merger's output, bias fused: out[win[i]][:] = y[i][:] + b (b [O] or NULL);
 * y f32 [n_units][O] in window order, out f32 [n_units][O] in the original token order. */
void frk_vit_scatter_rows(const float *y, const float *b, const int32_t *win, int n_units, int O,
                          float *out, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
