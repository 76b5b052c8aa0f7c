/* cpu.h — the CPU backend: reference ops, fast kernels, the CPU's own quantised weight formats
 * and a small persistent thread pool.
 *
 * Two tiers of every op:
 *   - fr_ref_*: plain C, never optimised, double accumulators where a reduction is involved. They
 *     are the truth that every fast path (this file's kernels, a later CUDA backend) is tested
 *     against, and they document the exact function each op computes.
 *   - fr_cpu_*: the fast paths the decoder runs (AVX2/FMA/F16C, multithreaded over output rows).
 *
 * Determinism: every fast kernel computes each output element with a reduction order that depends
 * only on the element's own inputs and on the reduced length — never on how many tokens are in
 * the call, where the element sits in a tile, or which thread computed it. A row's result is
 * therefore bit-identical whether it is computed alone (decode, M = 1) or among many (prefill,
 * batched decode). Concretely, for a dot product of length K:
 *   F32 weights: one 8-lane accumulator, acc = fma(w[k..k+7], x[k..k+7], acc) for k = 0, 8, ...,
 *     then a fixed horizontal sum ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). GGUF Q8_0/Q4_0 weights are
 *     first dequantised exactly (q*d has at most 8+11 significant bits, so it is exact in fp32) and
 *     then go through the same F32 kernel: the result equals the F32 kernel on dequantised weights.
 *   Own q8/q4 weights: the activation row is quantised per group of 32 to int8 (scale amax/127,
 *     round half away from zero), group dot products are exact int32 sums, and the groups are
 *     combined in float in group order (see fr_ref_matmul for the exact expression).
 *
 * Own formats (fr_model_quantize; values past FR_DTYPE_COUNT so they never collide with a file
 * dtype; fr_dtype_name/fr_dtype_row_size of the loader do not know them: use fr_cpu_dtype_name and
 * fr_cpu_row_bytes). A row of n elements (n % 32 == 0), nb = n/32 groups, stored row after row
 * with a stride rounded up to 64 bytes so every row starts cache-line aligned. The group scales
 * come first (padded to 32 bytes), so a kernel reads each row front to back and W as one linear
 * stream, which is what the prefetchers follow:
 *   FR_DTYPE_Q8: [nb x f16 d][pad][n x int8 q]                   x = q * d
 *   FR_DTYPE_Q4: [nb x f16 d][nb x f16 m][pad][nb x 16 bytes]    x = q * d + m, q in 0..15;
 *                group g byte j: low nibble = element 32g+j, high nibble = element 32g+j+16.
 */
#ifndef FRUGAL_CPU_H
#define FRUGAL_CPU_H

#include "model/model.h"

#define FR_DTYPE_Q8 ((fr_dtype)(FR_DTYPE_COUNT + 1)) /* own 8-bit, group 32, f16 scale */
#define FR_DTYPE_Q4 ((fr_dtype)(FR_DTYPE_COUNT + 2)) /* own 4-bit, group 32, f16 scale + min */

#define FR_QK 32 /* elements per quantisation group (all quantised formats here) */

/* GGUF block layouts (see model.h). */
typedef struct fr_block_q8_0 {
    uint16_t d;       /* f16 scale */
    int8_t qs[FR_QK]; /* x = qs[j] * d */
} fr_block_q8_0;
typedef struct fr_block_q4_0 {
    uint16_t d;                /* f16 scale */
    uint8_t qs[FR_QK / 2];     /* low nibble = element j, high = j + 16; x = (q - 8) * d */
} fr_block_q4_0;

/* Bytes before the quants in a row of n elements of an own format (the scale area). */
static inline size_t fr_own_head_bytes(fr_dtype t, int64_t n) {
    size_t nb = (size_t)n / FR_QK, h = (t == FR_DTYPE_Q4 ? 4 : 2) * nb;
    return (h + 31) / 32 * 32;
}

/* Name of any dtype, own formats included. */
const char *fr_cpu_dtype_name(fr_dtype t);
/* Bytes of one stored row of n elements (own formats: padded stride). 0 if unsupported. */
size_t fr_cpu_row_bytes(fr_dtype t, int64_t n);
/* True when the matmul kernels take this weight dtype. */
bool fr_cpu_dtype_supported(fr_dtype t);

/* Quantise one row of n floats (n % 32 == 0) into dst (fr_cpu_row_bytes(t, n) bytes) in an own
 * format (FR_DTYPE_Q8 / FR_DTYPE_Q4), or GGUF FR_DTYPE_Q8_0 / FR_DTYPE_Q4_0 (as ggml does). */
void fr_cpu_quantize_row(fr_dtype t, const float *src, void *dst, int64_t n);
/* Dequantise / convert one stored row of n elements of any supported dtype into floats. */
void fr_cpu_dequantize_row(fr_dtype t, const void *src, float *dst, int64_t n);
/* Row r of a 2-D tensor's storage. */
static inline const void *fr_cpu_row_ptr(const fr_tensor *w, int64_t r) {
    return (const uint8_t *)w->data + (size_t)r * fr_cpu_row_bytes(w->dtype, w->ne[0]);
}

/* Quantised activations for the own formats: per token, K int8 values, K/32 group scales and the
 * group sums of the int8 values times the scale (for the q4 minimum term). */
void fr_ref_quantize_act(const float *x, int64_t k, int8_t *q, float *d, float *s);

/* ------------------------------------------------------------------ thread pool
 * A fixed set of workers (n_threads - 1 pthreads; the caller is thread 0). fr_pool_run calls
 * fn(ctx, ith, nth) on every thread and returns when all are done. Idle workers spin briefly
 * (so the many short dispatches of a decode step do not pay a wake-up each), then sleep. */
typedef struct fr_pool fr_pool;
typedef void (*fr_pool_fn)(void *ctx, int ith, int nth);
fr_pool *fr_pool_new(int n_threads); /* n_threads <= 0: one per core */
void fr_pool_free(fr_pool *p);
int fr_pool_size(const fr_pool *p);
void fr_pool_run(fr_pool *p, fr_pool_fn fn, void *ctx);

/* ------------------------------------------------------------------ reference ops */
/* out (T, n) = rows tokens[t] of the table w (n_vocab, n), any supported dtype. */
void fr_ref_embed(float *out, const fr_tensor *w, const int32_t *tokens, int T);
/* out (T, n) = x / sqrt(mean(x^2) + eps) * g, per row; g (n). out may equal x. */
void fr_ref_rmsnorm(float *out, const float *x, const float *g, int T, int n, float eps);
/* Rotary embedding in place on x (T, n_head*head_dim) at positions pos (T). Frequency i
 * (0..head_dim/2-1): theta^(-2i/head_dim) / ff[i] (ff may be NULL). Pairs: interleaved (2i,2i+1),
 * else halves (i, i+head_dim/2). Angles in double. */
void fr_ref_rope(float *x, int T, int n_head, int head_dim, const int32_t *pos, float theta,
                 bool interleaved, const float *freq_factors);
/* M-RoPE (Qwen2-VL's apply_multimodal_rotary_pos_emb) in place on x (T, n_head*head_dim):
 * frequency i (as in fr_ref_rope) turns by the token's position rope_pos[s*T + t], s the section
 * of i: 0 (temporal) for i < sect[0], 1 (height) for i < sect[0]+sect[1], else 2 (width); the same
 * section for both elements of a pair. rope_pos (3, T). Angles in double. */
void fr_ref_rope_mrope(float *x, int T, int n_head, int head_dim, const int32_t *rope_pos,
                       const int sect[3], float theta, bool interleaved, const float *freq_factors);
/* out (n) = silu(gate) * up */
void fr_ref_swiglu(float *out, const float *gate, const float *up, int64_t n);
/* In place softmax of x (n), double accumulation. */
void fr_ref_softmax(float *x, int n);
/* y (T, N) = x (T, K) . W^T, W (N, K) of any supported dtype. F32/F16/BF16/Q8_0/Q4_0: dequantised
 * weights, double accumulation. Own q8/q4: the kernel's defined function — activations quantised
 * per group (fr_ref_quantize_act), y = sum_g (dw_g * dx_g) * isum_g [+ mw_g * sx_g for q4], in
 * double. */
void fr_ref_matmul(float *y, const float *x, const fr_tensor *w, int T);

/* A view of one layer of a paged KV cache: position p of a sequence lives in block
 * blocks[p / block_size], slot p % block_size, at k + ((block*n_layer + layer)*block_size + slot)*kv_dim. */
typedef struct fr_kv_view {
    const float *k, *v; /* pool storage: (n_blocks, n_layer, block_size, kv_dim) each */
    int n_layer, layer, block_size, kv_dim;
} fr_kv_view;
static inline const float *fr_kv_at(const float *base, const fr_kv_view *kv, const int *blocks,
                                    int p) {
    size_t b = (size_t)blocks[p / kv->block_size];
    return base + ((b * (size_t)kv->n_layer + (size_t)kv->layer) * (size_t)kv->block_size +
                   (size_t)(p % kv->block_size)) * (size_t)kv->kv_dim;
}
/* Causal GQA attention of one token: q (n_head*head_dim) at position pos attends to positions
 * 0..pos of the sequence with block table `blocks`; out (n_head*head_dim). Head h uses KV head
 * h / (n_head/n_head_kv); scores scaled by 1/sqrt(head_dim); softmax in double. */
void fr_ref_attention(float *out, const float *q, const fr_kv_view *kv, const int *blocks,
                      int pos, int n_head, int n_head_kv, int head_dim);

/* ------------------------------------------------------------------ fast kernels */
/* Scratch of the matmul kernels, sized for up to max_T tokens and inputs of up to max_K. */
typedef struct fr_cpu_scratch {
    int max_T, max_K, n_threads;
    int8_t *xq;   /* (max_T, max_K) quantised activations */
    float *xd;    /* (max_T, max_K/32) activation group scales */
    float *xs;    /* (max_T, max_K/32) group sums of xq times the scale */
    float *deq;   /* (n_threads, FR_CPU_ROWS, max_K) dequantised weight rows per thread */
} fr_cpu_scratch;
#define FR_CPU_ROWS 4 /* weight rows per F32 tile */
fr_cpu_scratch *fr_cpu_scratch_new(int max_T, int max_K, int n_threads);
void fr_cpu_scratch_free(fr_cpu_scratch *s);

/* y (T, N) = x (T, K) . W^T with W (N, K) = w->ne[1] rows of w->ne[0]; any supported dtype except
 * F16/BF16 (converted at load). K % 8 == 0 (F32) or K % 32 == 0 (quantised). T <= s->max_T,
 * K <= s->max_K. Multithreaded over rows of W when pool is not NULL. */
void fr_cpu_matmul(fr_pool *pool, fr_cpu_scratch *s, float *y, const float *x, const fr_tensor *w,
                   int T);
/* The same for n <= 4 matrices sharing the input x (all with K = ws[i]->ne[0]), in one dispatch
 * of the pool: ys[i] (T, N_i) = x . ws[i]^T. Results are those of n fr_cpu_matmul calls. */
void fr_cpu_matmul_n(fr_pool *pool, fr_cpu_scratch *s, int n, float *const *ys, const float *x,
                     const fr_tensor *const *ws, int T);
/* Own q8/q4 kernels: AVX-512 VNNI variants are used when the CPU has them (and FRUGAL_CPU_AVX2 is
 * not set); fr_cpu_use_avx512(false) forces the AVX2 kernels (tests run both). Results of the two
 * differ in the last bits (another summation order), each is independent of the batch. Returns
 * whether the AVX-512 kernels are now in use. Set it before any decoder runs. */
bool fr_cpu_avx512(void);
bool fr_cpu_use_avx512(bool on);
/* Fixed-order 8-lane dot product of length n (n % 8 == 0), as the F32 matmul computes it. */
float fr_cpu_dot(const float *a, const float *b, int n);
/* out (T, n) = rmsnorm of x; sums of squares in the fixed 8-lane order. out may equal x. */
void fr_cpu_rmsnorm(float *out, const float *x, const float *g, int T, int n, float eps);
/* Rotary embedding from precomputed tables cs, sn (n_pos, head_dim/2) (fr_cpu_rope_table). */
void fr_cpu_rope(float *x, int T, int n_head, int head_dim, const int32_t *pos, bool interleaved,
                 const float *cs, const float *sn);
/* M-RoPE from the same tables: frequency i reads the row of rope_pos[s*T + t], s its section
 * (fr_ref_rope_mrope); rope_pos (3, T). With the three rows equal to pos it computes exactly what
 * fr_cpu_rope does (same values, same operations). */
void fr_cpu_rope_mrope(float *x, int T, int n_head, int head_dim, const int32_t *rope_pos,
                       const int sect[3], bool interleaved, const float *cs, const float *sn);
/* cos/sin tables (n_pos, head_dim/2) with the angles of fr_ref_rope; bf16_freqs rounds each
 * frequency to bf16 first (see fr_decoder_opts). */
void fr_cpu_rope_table(float *cs, float *sn, int n_pos, int head_dim, float theta,
                       const float *freq_factors, bool bf16_freqs);
/* Attention for T tokens: q (T, n_head*head_dim), positions pos (T), blocks[t] the block table of
 * token t's sequence; out (T, n_head*head_dim). scores: (n_threads, max_pos+1) scratch. */
void fr_cpu_attention(fr_pool *pool, float *out, const float *q, const fr_kv_view *kv,
                      const int *const *blocks, const int32_t *pos, int T, int n_head,
                      int n_head_kv, int head_dim, float *scores, int scores_stride);
void fr_cpu_swiglu(float *out, const float *gate, const float *up, int64_t n);

/* OpenBLAS: C (M, N) = A (M, K) . B^T with B (N, K), row-major, through cblas_sgemm. Not used by
 * the decoder (its per-row results depend on M, see tests/test_ops.c); kept for comparison. */
void fr_cpu_sgemm_nt(float *c, const float *a, const float *b, int M, int N, int K);

#endif
