/* plan.cu — the one table of kernel configurations of the CUDA decoder.
 *
 * For each weight format and each decode-step product (frk_product: the fused qkv projection,
 * the output projection, gate/up, down, the LM head) one configuration of the streamed kernel
 * (k_stream.cu; kernels.h frk_stream_plan), and per format the decode attention's cluster size
 * (k_attn.cu). Every row is the winner of a measurement of the whole batch-1 decode step on an
 * H200 (Llama-3-8B shape, bench/gpu/bench.c); each row names the section of bench/gpu/NOTES.md
 * with the figures (winner and losers) and the raw log under bench/gpu/results. The experiments
 * themselves (the other consumers, stage sizes, loaders, register caps) live in dev/cuda (see
 * dev/cuda/README.md), not in the product.
 *
 * What does not vary by product is fixed in k_stream.cu: 16 KiB stages through the bulk-copy
 * engine, at most 4 in flight per block, two blocks per SM, all of the unified L1 as shared
 * memory, the one-row RMSNorm prologue with the row in registers.
 *
 * The table is constant: the decoder reads it per call, tests walk every row of it.
 */
#include "backend/cuda/kernels.h"

/* Rows: FRK_P_QKV, FRK_P_O, FRK_P_GU, FRK_P_DOWN, FRK_P_HEAD. Fields: {consumer, prewait, tmap}. */
static const frk_stream_plan plan_bf16[FRK_P_COUNT] = {
    /* bf16 has one consumer; stages held back past the wait so the prologue's reads of the
     * previous kernel's output do not queue behind the weights: +0.6 % (NOTES §2 "Issue the
     * weights early", runs 54, 57; h200-sweeps-prewait-norm-row.txt) */
    {0, 2, 0}, /* qkv */
    {0, 0, 0}, /* o */
    {0, 2, 0}, /* gate/up */
    {0, 2, 0}, /* down */
    {0, 0, 0}, /* LM head */
};
static const frk_stream_plan plan_int8[FRK_P_COUNT] = {
    /* qkv: the producer-warp consumer at three blocks per SM, so the 384 row tiles go in one
     * round: 420.6 vs 416.9 tok/s; the others free-running (NOTES §3 "The consumer is chosen per
     * product"; h200-sweeps-int-consumer-per-product.txt). Prewaits: +2.4 % (NOTES §2). */
    {FRK_QC_PW3, 2, 0},  /* qkv */
    {FRK_QC_FREE, 0, 0}, /* o */
    {FRK_QC_FREE, 3, 0}, /* gate/up */
    {FRK_QC_FREE, 3, 0}, /* down */
    {FRK_QC_FREE, 0, 0}, /* LM head */
};
static const frk_stream_plan plan_int4[FRK_P_COUNT] = {
    /* qkv, o: the producer-warp consumer with a block barrier per stage; gate/up, down and the
     * head (the longest streams): free-running with the zero point folded out: 578.3 vs 557.3
     * tok/s for FREE everywhere (NOTES §3, run 48); down moved from PW to FREE_ZF when the rows
     * were re-measured on the restructured kernels: 601.0 / 605.9 vs 599.9 / 598.6 tok/s, every
     * other single-row change lost 0.3-2 % (NOTES §3; h200-int4-plan-rows-remeasured.txt). qkv
     * with the longer blocks first: +0.8 % there, -2 % when every product does it (NOTES §2
     * "Tile map", runs 40, 47). Prewaits: +4.6 % (NOTES §2). */
    {FRK_QC_PW, 2, 1},      /* qkv */
    {FRK_QC_PW, 1, 0},      /* o */
    {FRK_QC_FREE_ZF, 2, 0}, /* gate/up */
    {FRK_QC_FREE_ZF, 2, 0}, /* down */
    {FRK_QC_FREE_ZF, 0, 0}, /* LM head */
};

extern "C" const frk_stream_plan *frk_plan_stream(int bits, int p) {
    if (p < 0 || p >= FRK_P_COUNT) p = FRK_P_O;
    return bits == 4 ? &plan_int4[p] : bits == 8 ? &plan_int8[p] : &plan_bf16[p];
}

/* The decode attention (<= 4 tokens, bf16 cache) as one cluster kernel: 8 blocks a cluster with
 * bf16 weights, 16 with INT weights (NOTES §4, runs 34 and 48; h200-attn-cluster-carveout.log). */
extern "C" int frk_plan_attn_cluster(int bits) { return bits == 16 ? 8 : 16; }
