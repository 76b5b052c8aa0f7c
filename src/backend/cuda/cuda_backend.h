/* cuda_backend.h — the decoder on one CUDA GPU (C API; implementation in engine.cu).
 *
 * An fr_cuda holds, on one device: the weights (uploaded once: bf16, or weight-only INT8/INT4
 * with group 128), one paged KV pool (bf16 or int8 with per-block scales) allocated once at start
 * from the free memory by a fraction, and all scratch for max_tokens tokens per forward. Nothing
 * is allocated per step. Decode batches (one token per sequence) replay a CUDA graph captured per
 * batch-size bucket (1, 2, 4, ... max_seqs; padding rows go to a reserved trash block).
 *
 * Batches and block tables are every backend's (backend/batch.h, kv.h): an fr_batch of tokens with
 * positions and fr_seq block tables; block ids index the device pool. Block 0 of the pool is
 * reserved (the trash block for padding), so valid ids are 1 .. n_blocks-1; fr_backend (backend.h)
 * hands out blocks with that rule through fr_seq_reserve. As on the CPU, a forward advances each
 * sequence's n_pos, and logits come back in batch order for the tokens with logits[i] = 1.
 *
 * Not thread-safe: one engine thread calls everything.
 */
#ifndef FRUGAL_CUDA_BACKEND_H
#define FRUGAL_CUDA_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

#include "backend/batch.h"
#include "backend/sampler.h"

typedef enum fr_cuda_wtype { FR_CUDA_W_BF16 = 0, FR_CUDA_W_INT8 = 1, FR_CUDA_W_INT4 = 2 } fr_cuda_wtype;

typedef struct fr_cuda_config {
    int device;            /* CUDA ordinal */
    fr_cuda_wtype weights; /* storage of the linear layers (embedding table stays bf16) */
    int kv_int8;           /* 1: int8 KV cache with per-(block, layer, head) scales */
    float kv_fraction;     /* share of the free memory left after weights and scratch (0.9) */
    size_t kv_bytes;       /* > 0: pool of exactly this many bytes instead */
    int max_tokens;        /* tokens per forward (prefill chunk); default 512 */
    int max_seqs;          /* largest decode batch captured as a graph; default 64 */
    int max_ctx;           /* positions per sequence; default min(n_ctx_train, 8192) */
    int use_graphs;        /* 1 (default): replay captured decode graphs */
    int prefill_mma;       /* 1 (default): tensor-core prefill attention where supported */
    int rope_freq_bf16;    /* round rotary frequencies to bf16 (see fr_decoder_opts) */
    int fuse;              /* decode steps of few rows through the streamed, fused linear layers
                            * (frk_gemv_stream: RMSNorm, SwiGLU, RoPE + KV store inside): 1
                            * (default; measured faster for every weight format on an H200,
                            * bench/GPU-NOTES.md); 0 never (one kernel per operation); -1 for
                            * INT8/INT4 weights only. Env FRUGAL_CUDA_FUSE overrides at creation. */
    int attn_merge;        /* 1: split attention merges in its last block (no combine kernel);
                            * 0 (default, measured faster at batch 1). Env FRUGAL_CUDA_ATTN_MERGE. */
    int attn_prefetch;     /* 1: the decode attention kernel's threads prefetch the output
                            * projection's weights into L2 while they wait for the qkv product;
                            * 0 (default: measured 1-3 % slower at batch 1 on an H200).
                            * Env FRUGAL_CUDA_ATTN_PF. */
    long long l2_ahead;    /* decode steps of <= 4 rows: bytes of the next layer's qkv weights
                            * (after the last layer, of the LM head) that the attention kernel
                            * moves into L2 after its dependency wait, their scales first; 0 off.
                            * Env FRUGAL_CUDA_L2_AHEAD (bytes). */
    long long l2_ahead_gu; /* likewise, bytes of this layer's gate/up weights; 0 off.
                            * Env FRUGAL_CUDA_L2_AHEAD_GU. */
    int l2_ahead_last;     /* 1: those prefetches carry the L2 evict_last hint.
                            * Env FRUGAL_CUDA_L2_AHEAD_LAST. */
} fr_cuda_config;

typedef struct fr_cuda_mem {
    size_t total, free_now;   /* device memory */
    size_t weights, kv, scratch;
    int kv_blocks;            /* blocks in the pool, block 0 (reserved) included */
    size_t kv_block_bytes;    /* bytes per block (K + V, all layers, scales included) */
} fr_cuda_mem;

typedef struct fr_cuda fr_cuda;

fr_cuda_config fr_cuda_config_default(void);
/* Number of usable CUDA devices (0 when there is no GPU or no driver; never aborts). */
int fr_cuda_device_count(void);

/* Upload the model (F32 / Q8_0 / Q4_0 tensors are converted on the host). */
fr_cuda *fr_cuda_new(const fr_model *m, const fr_cuda_config *cfg, fr_err *err);
/* Random weights generated on the device with the shapes of hp (benchmarks). */
fr_cuda *fr_cuda_new_random(const fr_hparams *hp, const fr_cuda_config *cfg, uint64_t seed,
                            fr_err *err);
void fr_cuda_free(fr_cuda *c);

void fr_cuda_mem_info(const fr_cuda *c, fr_cuda_mem *out);
const char *fr_cuda_device_name(const fr_cuda *c);
const fr_hparams *fr_cuda_hparams(const fr_cuda *c);

/* Forward; logits_out (n_wanted, n_vocab) f32 on the host. */
int fr_cuda_forward(fr_cuda *c, const fr_batch *b, float *logits_out, fr_err *err);
/* Forward and sample on the device: ids_out[i] for each token with logits[i] = 1. sp (one per
 * wanted row, or one for all when n_sp == 1), counters: per-row draw counters (e.g. tokens
 * generated so far), or NULL for 0. logits_out may be NULL. */
int fr_cuda_forward_sample(fr_cuda *c, const fr_batch *b, const fr_sampling *sp, int n_sp,
                           const uint64_t *counters, int32_t *ids_out, float *logits_out,
                           fr_err *err);
/* Pipelined decode, one step ahead of the host: fr_cuda_submit queues a forward with sampling on
 * the device (every row sampled, as fr_cuda_forward_sample with logits_out NULL) and returns
 * without waiting; the sequences advance at once, so the next step can be submitted before
 * this one's ids are read. feed = 1 takes each row's token from the previous submitted step's
 * sampled id of the same row, on the device (same row count; b->tokens must still hold valid
 * ids, e.g. 0, and are ignored). fr_cuda_collect waits for the oldest submitted step and writes
 * its ids (returns how many, or -1). At most two steps are in flight; the synchronous calls
 * refuse to run while any is. A caller that stops a sequence on a collected id must account for
 * the one step already queued after it (its position was advanced). */
int fr_cuda_submit(fr_cuda *c, const fr_batch *b, const fr_sampling *sp, int n_sp,
                   const uint64_t *counters, int feed, fr_err *err);
int fr_cuda_collect(fr_cuda *c, int32_t *ids_out, fr_err *err);
/* Wait for all work (for timing). */
void fr_cuda_sync(fr_cuda *c);
/* Switch decode-graph replay on or off (benchmarks compare the two). */
void fr_cuda_set_graphs(fr_cuda *c, int on);
/* Programmatic dependent launch on/off, and the batch-1 bf16 GEMV variant (kernels.h); both are
 * process-wide (env FRUGAL_CUDA_PDL, FRUGAL_CUDA_GEMV at creation) and drop captured graphs. */
void fr_cuda_set_pdl(fr_cuda *c, int on);
void fr_cuda_set_gemv_variant(fr_cuda *c, int v);
/* Fused decode path on/off (fr_cuda_config.fuse) and the streamed GEMV's L2 prefetch per block
 * in bytes (kernels.h frk_set_stream_l2pf; env FRUGAL_CUDA_L2PF at creation); drop graphs. */
void fr_cuda_set_fuse(fr_cuda *c, int on);
void fr_cuda_set_attn_merge(fr_cuda *c, int on);
/* Most splits of a decode token's keys over blocks (1..64, default 64; env FRUGAL_CUDA_SPLIT). */
void fr_cuda_set_split_cap(fr_cuda *c, int n);
void fr_cuda_set_l2pf(fr_cuda *c, int bytes);
void fr_cuda_set_attn_prefetch(fr_cuda *c, int on);
/* INT weights, measurement: the streamed consumer variant per product (qkv, o, gate/up, down, LM
 * head; k_stream.cu's V bits, 0 or NULL the format's default; env FRUGAL_CUDA_QVARS=a,b,c,d,e);
 * a process-wide frk_set_stream_qvar overrides it. Drops graphs. */
void fr_cuda_set_qvars(fr_cuda *c, const int v[5]);
void fr_cuda_get_qvars(const fr_cuda *c, int v[5]);
/* Measurement: per product the stages each streamed block issues before its dependency wait
 * (the rest after its prologue's reads; 0 or NULL all in flight; env FRUGAL_CUDA_PREWAITS). Drops
 * graphs. */
void fr_cuda_set_prewait(fr_cuda *c, const int v[5]);
/* fr_cuda_config.l2_ahead, l2_ahead_gu, l2_ahead_last (measurement); drops graphs. */
void fr_cuda_set_l2_ahead(fr_cuda *c, long long qkv_bytes, long long gu_bytes, int evict_last);
/* The LM head as RMSNorm + GEMV kernels instead of the streamed product (measurement; env
 * FRUGAL_CUDA_HEAD_GEMV); drops graphs. */
void fr_cuda_set_head_gemv(fr_cuda *c, int on);
/* Timeline probes of the fused decode path (measurement): on, each forward records per launch
 * slot (per layer: qkv, attention, combine, o, gate/up, down; then the LM head) %globaltimer
 * marks: the first and last block's entry, past its dependency wait and end, the last block's
 * prologue end and last stage's arrival (latest marks as complements; ~0 where a slot did not
 * run). Returns the slot count (on), 0 (off) or -1;
 * drops graphs. fr_cuda_trace_read copies up to max_words words (FR_CUDA_TRACE_W per slot: the
 * fields of cuda_util.cuh tl_mark_by) after a forward. */
#define FR_CUDA_TRACE_W 8
int fr_cuda_set_trace(fr_cuda *c, int on);
int fr_cuda_trace_read(fr_cuda *c, unsigned long long *out, int max_words);

/* Statistics since creation. */
typedef struct fr_cuda_stats {
    long forwards, graph_replays, graph_captures, tokens;
} fr_cuda_stats;
void fr_cuda_get_stats(const fr_cuda *c, fr_cuda_stats *s);

#ifdef __cplusplus
}
#endif
#endif
