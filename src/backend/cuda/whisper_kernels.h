/* whisper_kernels.h — C entry points of the CUDA Whisper kernels (k_wh_elt.cu, k_wh_attn.cu);
 * whisper.cu and the checks in tests/gpu/whisper_check.c call exactly these. Each launches on a
 * stream, checks the launch and returns; nothing synchronises, nothing keeps state.
 *
 * Conventions (as kernels.h and vit_kernels.h): bf16 buffers are uint16_t* bit patterns; the
 * residual stream and every cuBLAS output are f32 rows; the inputs of the matrix products and
 * the caches are bf16 rows. The residual add is vit_kernels.h's frk_vit_residual.
 */
#ifndef FRUGAL_CUDA_WHISPER_KERNELS_H
#define FRUGAL_CUDA_WHISPER_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRK_WH_MAX_HEAD_DIM 128 /* head size accepted by frk_wh_attention */

/* conv1's im2col (kernel 3, padding 1): col[b * T2 + t][i * 3 + k] = bf16(mel[b][i][t + k - 1])
 * (0 outside 0..T2-1); mel f32 (B, M, T2), col bf16 (B * T2, 3 M). */
void frk_wh_im2col1(const float *mel, int B, int M, int T2, uint16_t *col, cudaStream_t st);

/* conv2's im2col (kernel 3, padding 1, stride 2): col[b * T + t][i * 3 + k] =
 * y[b * T2 + 2 t + k - 1][i] (0 outside), T = T2 / 2; y bf16 (B * T2, d), col bf16 (B * T, 3 d). */
void frk_wh_im2col2(const uint16_t *y, int B, int T2, int d, uint16_t *col, cudaStream_t st);

/* The epilogue of a product: v = a[i][c] + (b ? b[c] : 0), then gelu_erf(v) when gelu, then
 * + add[(i % add_period)][c] when add (the positional embedding); written as f32 to of and / or
 * as bf16 to oh (either may be NULL). a f32 [n][F]; b f32 [F]; add f32 [add_period][F]. */
void frk_wh_bias_act(const float *a, const float *b, int n, int F, int gelu, const float *add,
                     int add_period, float *of, uint16_t *oh, cudaStream_t st);

/* LayerNorm (two-pass fp32 statistics, eps) of n rows of E: y = (x - mean) * rstd * w + b,
 * written as f32 to of and / or bf16 to oh (either may be NULL; of may equal x). */
void frk_wh_layernorm(const float *x, const float *w, const float *b, int n, int E, float eps,
                      float *of, uint16_t *oh, cudaStream_t st);

/* Decoder input: x[r][:] = emb[tok[r]][:] + pos_tab[pos[r]][:]; tok, pos int32 [R] (device);
 * emb bf16 [n_vocab][d]; pos_tab f32 [n_ctx][d]; x f32 [R][d]. */
void frk_wh_embed(const int32_t *tok, const int32_t *pos, const uint16_t *emb,
                  const float *pos_tab, int R, int d, float *x, cudaStream_t st);

/* The self-attention projections of R rows into the caches: qkv f32 [R][3 d] (q, k, v);
 * qh[r] = bf16(q + bq); cache row pos[r] of row r's sequence: K at base[r] + koff + pos[r] * d
 * gets bf16(k), V at base[r] + voff + pos[r] * d gets bf16(v + bv). base: device array of R
 * device pointers (bf16). */
void frk_wh_self_kv(const float *qkv, const float *bq, const float *bv, const int32_t *pos,
                    uint16_t *const *base, size_t koff, size_t voff, int R, int d, uint16_t *qh,
                    cudaStream_t st);

/* Attention of R query rows, each over its own keys, flash-style (online softmax in fp32,
 * no score matrix): row r, head h: q = q[r * ldq + h * D ..] * scale, keys j < len[r] at
 * K = base[r] + koff + j * ldk + h * D, V = base[r] + voff + j * ldk + h * D; out bf16
 * [r * ldo + h * D ..]. One block of 8 warps per (row, head): the warps take every 8th key,
 * the lanes split the head's dimensions, partial states merged at the end. D <= 128. Used by
 * the decoder (self: len = pos + 1; cross: len = n_audio_ctx) and by the encoder when the
 * head size is not a multiple of 16 (otherwise frk_vit_attention). len[r] >= 1. */
void frk_wh_attention(const uint16_t *q, int ldq, const uint16_t *const *base, size_t koff,
                      size_t voff, int ldk, const int32_t *len, int R, int n_head, int D,
                      float scale, uint16_t *out, int ldo, cudaStream_t st);

/* out[r] = the first index of the maximum of logits[r * ld + 0 .. V-1] (NaN never wins). */
void frk_wh_argmax(const float *logits, int R, int V, int ld, int32_t *out, cudaStream_t st);

#ifdef __cplusplus
}
#endif
#endif
