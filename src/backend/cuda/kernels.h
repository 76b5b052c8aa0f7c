/* kernels.h — C entry points of the CUDA backend's kernels (each launches on a stream, checks the
 * launch, and returns; nothing synchronises). The decoder (decoder.cu) and the kernel-comparison
 * program (tests/gpu/gpu_check.c) both call these, so what is tested is exactly what runs.
 *
 * No entry point keeps settings between calls: everything a launch depends on comes in its
 * arguments (the kernel configuration of a streamed product in frk_gemv_args.plan, chosen from
 * the table in plan.cu). The only process-wide state are per-device caches of facts and of
 * idempotent set-up (SM count, cudaFuncSetAttribute done once per kernel and device, whether a
 * cluster shape can be scheduled), which are the same for every decoder on that device.
 * Programmatic dependent launch is always on for the decode-chain kernels.
 *
 * Conventions
 *   - 16-bit buffers are passed as uint16_t* (bf16 bit patterns) so this header stays plain C.
 *   - Activations: residual stream f32 [T][E]; GEMM/GEMV inputs bf16 [T][K]; GEMV outputs f32.
 *   - Linear weights are row-major [M][K] (out rows × in cols, as in model.h) in bf16, or, for
 *     INT8/INT4, in the tile-permuted "fragment" layout documented at frk_quant_pack below.
 *   - Paged KV cache: K and V pools, each [n_blocks][n_layer][Hkv][BS][D] (BS = 16 tokens per
 *     block) of bf16 or int8; for int8 one f32 scale per (block, layer, head) in kscale/vscale
 *     [n_blocks][n_layer][Hkv]. Block tables: int32 [n_seq][bt_stride], entry i = pool block
 *     holding positions [16 i, 16 i + 16) of that sequence.
 */
#ifndef FRUGAL_CUDA_KERNELS_H
#define FRUGAL_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRK_BLOCK 16   /* KV tokens per block */

#define FRK_CHUNK 64   /* keys per attention work chunk (4 KV blocks; 16 for split decode of <= 4 tokens) */
#define FRK_GROUP 128  /* weight-only quantisation group along K */
#define FRK_TL_W 8     /* timeline probe words per launch (cuda_util.cuh tl_mark_by) */

/* x[t][:] = f32(table[tokens[t]][:]); table bf16 [V][E]. */
void frk_embed(const uint16_t *table, const int32_t *tokens, int T, int E, float *x, cudaStream_t st);

/* out[i][:] = bf16(x[r][:] * rsqrt(mean(x[r]^2) + eps) * w), r = rows ? rows[i] : i, i < n. */
void frk_rmsnorm(const float *x, const float *w, const int32_t *rows, int n, int E, float eps,
                 uint16_t *out, cudaStream_t st);

/* Rotary embedding and KV store for T tokens.
 *   qkv    f32 [T][(H + 2 Hkv) D]  (q heads, then k heads, then v heads), bias f32 [(H+2Hkv)D] or NULL
 *   pos    int32 [T]; inv_freq f64 [D/2] (theta^(-2i/D) / freq_factor[i]); or, when cos_tab is
 *          set, the tables cos_tab/sin_tab f32 [positions][D/2] (float(cos(p * inv_freq[i])) in
 *          double, as the CPU decoder's table) are read instead of computing sincos
 *   qout   bf16 [T][H D]  roped queries
 *   kv mode A (kc != NULL, bf16 cache): K (roped) and V are written to the cache at
 *          block_tables[tok_seq[t] * bt_stride + pos/16], slot pos % 16, for layer `layer`.
 *   kv mode B (kc == NULL): roped K and V go to kvnew bf16 [T][2][Hkv D] (for frk_kv_store_i8).
 * interleaved = 1 rotates pairs (2i, 2i+1), 0 rotates halves (i, i + D/2). */
typedef struct frk_rope_args {
    const float *qkv, *bias;
    const int32_t *pos, *tok_seq, *block_tables;
    const double *inv_freq;
    const float *cos_tab, *sin_tab; /* optional [positions][D/2] */
    int T, H, Hkv, D, interleaved, bt_stride, layer, n_layer;
    uint16_t *qout;
    uint16_t *kc, *vc;     /* bf16 pools, or NULL */
    uint16_t *kvnew;       /* staging when kc == NULL */
    int pair_rows;         /* 1: qkv holds each rotation pair (i0, i1) of a q/k head in adjacent
                            * columns 2i, 2i+1 (the engine's row order, see frk_gemv_stream);
                            * 0: columns in the model's order */
} frk_rope_args;
void frk_rope_kv(const frk_rope_args *a, cudaStream_t st);
/* frk_rope_kv for M-RoPE (k_mrope.cu): rotation pair i takes its angle from position row
 * r = 0 (t) for i < sect[0], 1 (h) for i < sect[0] + sect[1], else 2 (w), read from
 * rope_pos int32 [3][rp_stride] (row r of token t at r * rp_stride + t) through cos_tab / sin_tab
 * (required); the KV slot is still pos[t]. sect[0] + sect[1] + sect[2] == D / 2. */
void frk_mrope_kv(const frk_rope_args *a, const int32_t *rope_pos, int rp_stride, const int sect[3],
                  cudaStream_t st);

/* INT8 KV store. Each segment covers all new tokens of one sequence inside one KV block (so one
 * CUDA block owns each cache block and its scale):
 *   seg int32 [n_seg][4] = {tok_seq index s, block index within the sequence, first slot, count};
 *   its j-th token (slot first + j) is kvnew row rows[seg_start[i] + j].
 * Scales are per (block, layer, head) and only grow: when new values exceed the block's scale,
 * the slots already stored are requantised to the new scale (symmetric int8, |q| <= 127). */
void frk_kv_store_i8(const uint16_t *kvnew, const int32_t *seg, const int32_t *seg_start,
                     const int32_t *rows, int n_seg,
                     const int32_t *block_tables, int bt_stride, int layer, int n_layer, int Hkv,
                     int D, int8_t *kc, int8_t *vc, float *kscale, float *vscale, cudaStream_t st);

/* Attention of T query tokens over the paged cache (a token at position p attends to 0..p of its
 * sequence; its own K/V must already be stored). q bf16 [T][H D]; out bf16 [T][H D].
 * n_split > 1 splits each token's keys over n_split blocks (flash-decoding) and combines the
 * partials (part f32 [T][H][n_split][D + 2] scratch) in a second kernel; n_split = 1 writes out
 * directly. kv_int8 selects the int8 pools (kscale/vscale used) instead of bf16. G = H / Hkv <= 8,
 * D in {8, 16, 32, 64, 128, 256}. With the bf16 cache the decode kernels load the K/V rows that
 * earlier steps stored before their dependency wait, the rows of this step after it. */
typedef struct frk_attn_args {
    const uint16_t *q;
    const void *kc, *vc;
    const float *kscale, *vscale;
    const int32_t *pos, *tok_seq, *block_tables;
    int T, H, Hkv, D, bt_stride, layer, n_layer, kv_int8, n_split;
    float *part;
    uint16_t *out;
    unsigned long long *trace; /* optional timeline probes: FRK_TL_W words attention, then combine */
    /* Decode attention (T <= 4, split, bf16 cache, D in {64, 128}, H / Hkv <= 16) as one kernel
     * of thread-block clusters that merge their ranges in distributed shared memory: the cluster
     * size 16 (8 where the device cannot schedule 16), 8, or 0 (k_attn and k_attn_combine); the
     * decoder takes it from frk_plan_attn_cluster */
    int cluster;
} frk_attn_args;
void frk_attention(const frk_attn_args *a, cudaStream_t st);
int frk_attention_cluster_size(const frk_attn_args *a); /* the cluster size it takes, or 0 */
/* Prefill attention for one run of `T` consecutive tokens of a single sequence (positions
 * pos0 .. pos0+T-1, the cache holding 0 .. pos0+T-1): tensor-core tiles (mma.sync bf16),
 * D in {64, 128}, bf16 KV only. Same output as frk_attention. */
void frk_attention_prefill(const frk_attn_args *a, int pos0, cudaStream_t st);
int frk_attention_prefill_supported(int D, int G, int kv_int8);

/* act[t][i] = bf16(silu(gu[t][2i]) * gu[t][2i+1]); gu f32 [T][2F] (gate/up rows interleaved). */
void frk_swiglu(const float *gu, int T, int F, uint16_t *act, cudaStream_t st);

/* ---- linear layers ---- */
enum { FRK_OUT_STORE = 0, FRK_OUT_ACC = 1, FRK_OUT_SWIGLU = 2, FRK_OUT_ROPE = 3 };
/* y = W x for nb <= 4 inputs (own GEMV: 16-byte loads, 2 rows per warp, fp32 accumulate).
 * W bf16 [M][K] (K % 8 == 0); x bf16 [nb][ldx]; out f32 [nb][ldo] (STORE: =, ACC: +=) or for
 * SWIGLU bf16 [nb][ldo] with out[n][i] = silu(y[2i]) * y[2i+1]. */
void frk_gemv_bf16(const uint16_t *W, int M, int K, const uint16_t *x, int ldx, int nb, void *out,
                   int ldo, int mode, cudaStream_t st);

/* Weight-only INT8/INT4, group 128 along K, per (row, group) f16 scale s and integer zero z:
 * w = (q - z) * s, q in [0, 2^bits). Tile-permuted layout (see k_quant.cu): rows in tiles of 16,
 * K padded to Kp = 128 * ceil(K / 128); per tile and 16-wide k-step each lane of a warp holds
 * exactly its mma.sync A-fragment, so one 16-byte coalesced load per lane feeds 2 (int8) or 4
 * (int4) k-steps. Scale words sz u32 [Mt][NG][16] = f16 bits of s | f16 bits of (1024 + z) << 16. */
size_t frk_quant_bytes(int M, int K, int bits);   /* bytes of the packed q */
size_t frk_quant_sz_count(int M, int K);          /* u32 scale words */
/* Host: quantise f32 rows w [M][K] to plain q [M][Kp] (one byte per value), s (f16 bits) and z
 * [M][NG] (asymmetric min/max per group; padding values get q = z). */
void frk_quant_rows(const float *w, int M, int K, int bits, uint8_t *q, uint16_t *s, uint8_t *z);
/* Host: plain (q, s, z) -> packed + sz. */
void frk_quant_pack(const uint8_t *q, const uint16_t *s, const uint8_t *z, int M, int K, int bits,
                    void *packed, uint32_t *sz);
/* Device: random packed weights (bench): q uniform, z = 2^(bits-1), s = amp / 2^(bits-1). */
void frk_quant_random(void *packed, uint32_t *sz, int M, int K, int bits, float amp, uint64_t seed,
                      cudaStream_t st);
/* y = W x for nb <= 64 inputs on the tensor cores (mma.sync f16, fp32 accumulate), modes as
 * frk_gemv_bf16; x bf16 [nb][ldx]. */
void frk_gemv_q(const void *packed, const uint32_t *sz, int M, int K, int bits, const uint16_t *x,
                int ldx, int nb, void *out, int ldo, int mode, cudaStream_t st);
/* Packed -> bf16 row-major [M][K] (for prefill GEMMs through cuBLAS). */
void frk_dequant_q(const void *packed, const uint32_t *sz, int M, int K, int bits, uint16_t *out,
                   cudaStream_t st);

/* ---- streamed matrix-vector products (k_stream.cu) ----
 * The decode-step linear layer for a few rows (bf16: nb <= 4; INT8/INT4: nb <= 8), with the
 * work that surrounds it fused in:
 *   input   bf16 rows x [nb][ldx], or (xf != NULL) RMSNorm of residual rows xf[rows ? rows[n] : n]
 *           ([.][K] f32) with weight nw: each block normalises the rows itself into shared memory,
 *           rounding to bf16 exactly where frk_rmsnorm does;
 *   weights streamed HBM -> shared memory by the bulk-copy engine (cp.async.bulk, mbarrier
 *           completion), 4 stages of 16 KiB in flight per block, two blocks per SM (three for
 *           FRK_QC_PW3) over contiguous ranges of rows; plan.prewait stages are issued before
 *           the dependency wait (programmatic dependent launch), the rest after the prologue;
 *   output  STORE / ACC / SWIGLU as frk_gemv_bf16, or ROPE: the fused qkv projection with rows in
 *           pair order (each rotation pair of a q/k head in adjacent rows 2i, 2i+1; v rows as
 *           is): bias, rotary embedding and the K/V store (bf16 cache or int8 staging) of
 *           frk_rope_kv (rope fields; rope.qkv unused) happen in the epilogue.
 * bits = 16 (bf16 row-major [M][K]) or 8 / 4 (packed as frk_quant_pack). */

/* The consumer of the INT kernels (k_stream_q). All have a ninth, producer warp that issues the
 * bulk copies and runs the tile epilogues, load a stage's fragments into registers before the
 * arithmetic (early release), and hold the activations in mma B-fragment order. */
typedef enum frk_qcons {
    FRK_QC_PW = 0,  /* one block barrier per stage; INT4 dequantised with one shift per word */
    FRK_QC_FREE,    /* as PW without the block barrier: consumers release each slot on its own
                     * "empty" mbarrier, tile partials reach the producer through mbarriers */
    FRK_QC_FREE_ZF, /* as FREE, with the zero point folded out (per-group activation sums) */
    FRK_QC_PW3,     /* PW at three blocks per SM (<= 72 registers, as many stages as fit, <= 4);
                     * PW at two where three blocks' stages do not fit */
} frk_qcons;
/* The kernel configuration of one streamed product (the decoder takes it from plan.cu). */
typedef struct frk_stream_plan {
    int qcons;   /* INT weights: frk_qcons (INT4: PW or FREE_ZF; INT8: PW, FREE or PW3);
                  * ignored for bf16 */
    int prewait; /* stages issued before the dependency wait (the rest right after the
                  * prologue's reads of the previous kernel's output); 0 all that are in flight */
    int tmap;    /* row tiles to blocks: 0 an even spread (a block with one more tile every
                  * NRT % grid blocks); 1 the blocks with one more tile first, so that with two
                  * blocks per SM (block b beside b + SMs) no SM holds two of them while another
                  * holds none */
} frk_stream_plan;
/* The products of a decoder layer (and the LM head), the rows of the plan table. */
typedef enum frk_product { FRK_P_QKV, FRK_P_O, FRK_P_GU, FRK_P_DOWN, FRK_P_HEAD, FRK_P_COUNT } frk_product;
/* plan.cu: the measured configuration of product p (frk_product) for weights of `bits` (16, 8,
 * 4); never NULL for those. */
const frk_stream_plan *frk_plan_stream(int bits, int p);
/* plan.cu: the decode attention's cluster size for the decoder with weights of `bits`. */
int frk_plan_attn_cluster(int bits);
/* Whether k_stream_q has the consumer qcons for `bits` (the ones the plan table uses). */
int frk_stream_qcons_supported(int bits, int qcons);

typedef struct frk_gemv_args {
    const void *W;
    const uint32_t *sz;
    int M, K, bits;
    const uint16_t *x;
    int ldx;
    const float *xf, *nw;
    const int32_t *rows;
    float eps;
    int nb;
    void *out;
    int ldo, mode;
    frk_rope_args rope;
    unsigned long long *trace; /* optional timeline probes [FRK_TL_W] (cuda_util.cuh tl_mark) */
    frk_stream_plan plan;      /* the kernel configuration (frk_plan_stream) */
} frk_gemv_args;
int frk_gemv_stream_supported(int M, int K, int bits, int nb);
void frk_gemv_stream(const frk_gemv_args *a, cudaStream_t st);

/* ---- fills ---- */
/* bf16 [n] uniform in [-amp, amp] + offset from a counter hash (never zeros). */
void frk_fill_bf16(uint16_t *p, size_t n, float amp, float offset, uint64_t seed, cudaStream_t st);
void frk_fill_f32(float *p, size_t n, float amp, float offset, uint64_t seed, cudaStream_t st);
void frk_fill_u32(uint32_t *p, size_t n, uint32_t value, cudaStream_t st);

/* ---- sampling ---- */
/* ids[r] = argmax(logits[r][:V]) (lowest index among ties; NaN counts as -inf). */
void frk_argmax(const float *logits, int R, int V, int32_t *ids, cudaStream_t st);
/* Per-row sampling: temperature (<= 0: greedy), top_k (0 = off), top_p (>= 1 = off), min_p
 * (0 = off), applied in that order (top-k set, then the smallest top-p nucleus of it, then min_p
 * relative to the best), then one draw from hash(seed, counter, row). */
typedef struct frk_sample_params {
    float temperature, top_p, min_p;
    int top_k;
    uint64_t seed, counter;
} frk_sample_params;
void frk_sample(const float *logits, int R, int V, const frk_sample_params *params /* device [R] */,
                int32_t *ids, cudaStream_t st);
/* The uniform draw in [0, 1) the sampler uses for (seed, counter, row) (host copy, for tests). */
double frk_sample_uniform(uint64_t seed, uint64_t counter, int row);

#ifdef __cplusplus
}
#endif
#endif
