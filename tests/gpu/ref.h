/* ref.h — plain C references for the CUDA kernels and the CUDA decoder (tests/gpu/gpu_check.c
 * compares the GPU against these; tests/test_backend.c checks them on the CPU in CI).
 *
 * Everything accumulates in double. Where the GPU rounds an intermediate to bf16 (normed
 * activations, roped q, K/V in the cache, attention output, SwiGLU output), the references round
 * at the same place (ref_bf16), so GPU and reference differ only by accumulation order.
 */
#ifndef FRUGAL_GPU_REF_H
#define FRUGAL_GPU_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model/model.h"

float ref_bf16(float x);   /* round to bf16 (nearest even) and back */
float ref_f16(float x);    /* round to f16 and back */

/* out[i][:] = x[i] * rsqrt(mean(x[i]^2) + eps) * w (not rounded). */
void ref_rmsnorm(const float *x, const float *w, int n, int E, float eps, float *out);
/* inv[i] = theta^(-2i/D) / ff[i] (optionally rounded to bf16), as the CPU decoder. */
void ref_inv_freq(double *inv, int D, float theta, const float *ff, bool bf16_freqs);
/* Rotate n_head heads of v [n_head][D] in place at position pos. */
void ref_rope(float *v, int n_head, int D, int pos, const double *inv, bool interleaved);
/* y[n][m] = sum_k W[m][k] x[n][k]. */
void ref_gemv(const float *W, const float *x, int M, int K, int nb, float *y);
/* act[n][i] = silu(y[n][2i]) * y[n][2i+1] (not rounded). */
void ref_swiglu_pairs(const float *y, int nb, int M, float *act);
/* Dequantise plain q/s/z (see frk_quant_rows): W[m][k] = (q - z) * s. */
void ref_dequant(const uint8_t *q, const uint16_t *s, const uint8_t *z, int M, int K, float *W);
/* Attention of one query token: q [H][D] (already roped) over keys/values K, V [ctx][Hkv][D];
 * out [H][D] (not rounded). */
void ref_attention(const float *q, const float *K, const float *V, int ctx, int H, int Hkv, int D,
                   float *out);
/* argmax with the lowest index among ties; NaN is never chosen. */
int ref_argmax(const float *l, int V);
/* The set the GPU sampler draws from (top-k, then top-p nucleus, then min-p); ties at a
 * threshold are all allowed. allowed[V]. Returns the size of the set. */
int ref_sample_set(const float *l, int V, float temperature, int top_k, float top_p, float min_p,
                   unsigned char *allowed);

/* Relative L2 error ||a - b|| / ||b|| over n values; returns +inf if any value of a is NaN/inf
 * where b is finite, so NaN never passes. */
double ref_rel_l2(const float *a, const float *b, size_t n);

/* The CUDA decoder's computation for one sequence, token by token, on the host: logits
 * [n][n_vocab] for tokens[0..n) at positions 0..n-1. `wq` selects the weights the GPU uses:
 * 16 = bf16-rounded, 8 / 4 = dequantised group-128 INT8 / INT4 (frk_quant_rows), 32 = as stored
 * and no bf16 rounding of activations either (the CPU decoder's fp32 computation).
 * quantise(W, M, K, bits, out) is called for wq 8/4 (pass the CUDA host quantiser). */
typedef void (*ref_quant_fn)(const float *W, int M, int K, int bits, float *out);
int ref_forward(const fr_model *m, const int32_t *tokens, int n, int wq, ref_quant_fn quant,
                bool rope_freq_bf16, float *logits);

#endif
