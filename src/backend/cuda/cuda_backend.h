/* cuda_backend.h — the decoder on one CUDA GPU (C API; implementation in decoder.cu).
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
 * fr_batch.embd / embd_use (image rows instead of token embeddings) and rope_pos (M-RoPE
 * positions of a model with hp.mrope_section; the KV slot stays pos) are taken as the CPU decoder
 * takes them (decoder.cu says how).
 *
 * Settings: everything that can differ between two decoders is in the fr_cuda_config given at
 * creation and stays with that decoder (fr_cuda_get_config reads it back); a few environment
 * variables, read once at creation, can switch paths off (docs/CUDA.md). Two decoders in one
 * process share nothing but per-device caches of facts (SM count, kernel attributes).
 *
 * Not thread-safe: one engine thread calls everything of a decoder.
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
    int use_graphs;        /* 1 (default): replay captured decode graphs; 0 eager launches.
                            * Env FRUGAL_CUDA_GRAPHS=0 switches it off at creation. */
    int prefill_mma;       /* 1 (default): tensor-core prefill attention where supported.
                            * Env FRUGAL_CUDA_PREFILL_MMA=0. */
    int rope_freq_bf16;    /* round rotary frequencies to bf16 (see fr_decoder_opts) */
    int fuse;              /* 1 (default): decode steps of few rows through the streamed, fused
                            * linear layers (frk_gemv_stream: RMSNorm, SwiGLU, RoPE + KV store
                            * inside; measured faster for every weight format on an H200); 0 one
                            * kernel per operation. Env FRUGAL_CUDA_FUSE=0. */
    int attn_cluster;      /* 1 (default): decode attention of <= 4 tokens with the bf16 cache as
                            * one kernel of thread-block clusters (plan.cu); 0 the split kernel and
                            * its combine. Env FRUGAL_CUDA_ATTN_CLUSTER=0. */
    int trace;             /* 1: timeline probes of the fused decode path (fr_cuda_trace_read);
                            * 0 (default) */
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
/* The decoder's settings as it runs them (the config given at creation, defaults filled in and
 * the environment's off-switches applied). */
void fr_cuda_get_config(const fr_cuda *c, fr_cuda_config *out);
/* Timeline probes of the fused decode path (cfg.trace = 1): each step through
 * fr_cuda_forward_sample / fr_cuda_submit records per launch slot (per layer: qkv, attention,
 * combine, o, gate/up, down; then the LM head) %globaltimer marks: the first and last block's
 * entry, past its dependency wait and end, the last block's prologue end and last stage's arrival
 * (latest marks as complements; ~0 where a slot did not run). fr_cuda_trace_slots: the slot
 * count (0 with cfg.trace off); fr_cuda_trace_read copies up to max_words words (FR_CUDA_TRACE_W
 * per slot: the fields of cuda_util.cuh tl_mark_by) after a step and returns how many. */
#define FR_CUDA_TRACE_W 8
int fr_cuda_trace_slots(const fr_cuda *c);
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
