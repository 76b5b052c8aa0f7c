/* decoder.h — the Qwen2/Llama decoder forward pass on the CPU, over a paged KV cache.
 *
 * The KV cache is one pool of fixed-size blocks (block_size tokens each, 16 by default) shared by
 * all sequences; a sequence owns a block table (fr_seq). A forward call processes a batch of
 * tokens from any number of sequences (decode tokens of many sequences and/or a prefill chunk of
 * one): each token carries its sequence and position. Tokens of one sequence must appear in the
 * batch in increasing position order, contiguous with what the cache already holds (pos ==
 * seq->n_pos for the first, +1 for each next). K/V of every batch token are written to the cache
 * before attention, and a token at position p attends to positions 0..p of its own sequence.
 *
 * Results do not depend on batch composition: a sequence's logits are bit-identical whether it
 * runs alone or among others, and a prompt prefilled in chunks gives the same logits as prefilled
 * at once (every row's reductions run in the same order; backend/cpu/cpu.h says how). For that
 * reason the matrix products run on our own kernels, not OpenBLAS, whose sgemm rows differ
 * between M = 1 and M > 1.
 *
 * Threading: fr_decoder_forward is called from one thread (the engine thread); inside, it uses
 * the decoder's own worker pool (one thread per core unless fr_decoder_opts says otherwise). The
 * model is read-only. The forward pass allocates nothing.
 */
#ifndef FRUGAL_DECODER_H
#define FRUGAL_DECODER_H

#include "model/model.h"

typedef struct fr_kv_pool {
    int n_blocks;    /* total blocks */
    int block_size;  /* tokens per block */
    int n_layer, n_head_kv, head_dim; /* the model's shape (checked by fr_decoder_forward) */
    size_t block_bytes; /* bytes of one block (K and V, all layers) */
    float *k, *v;    /* storage: (n_blocks, n_layer, block_size, n_head_kv*head_dim) each */
    int *free_ids;   /* stack of free block ids */
    int n_free;      /* entries of free_ids in use */
} fr_kv_pool;

/* A pool of n_blocks blocks. Returns NULL if the allocation fails. */
fr_kv_pool *fr_kv_pool_new(const fr_hparams *hp, int n_blocks, int block_size);
/* Blocks that fit in `bytes` for this model. */
int fr_kv_pool_blocks_for_bytes(const fr_hparams *hp, int block_size, size_t bytes);
void fr_kv_pool_free(fr_kv_pool *p);

typedef struct fr_seq {
    int *blocks;     /* block table: blocks[i] holds positions [i*bs, (i+1)*bs) */
    int n_blocks, cap_blocks; /* blocks in use / allocated entries of the table */
    int n_pos;       /* positions whose K/V are in the cache */
} fr_seq;

/* Make sure the table covers positions [0, n_pos_total). Returns 0, or -1 (nothing changed) when
 * the pool has too few free blocks. */
int fr_seq_reserve(fr_seq *s, fr_kv_pool *p, int n_pos_total);
/* Give all blocks back to the pool and reset to empty (the table is freed too: a zeroed fr_seq
 * needs no other clean-up). */
void fr_seq_release(fr_seq *s, fr_kv_pool *p);
/* Blocks needed to hold n positions. */
static inline int fr_kv_blocks_needed(const fr_kv_pool *p, int n) {
    return (n + p->block_size - 1) / p->block_size;
}

typedef struct fr_batch {
    int n_tokens;           /* tokens in the batch, 1..max_tokens */
    const int32_t *tokens;  /* (n_tokens) token ids */
    const int32_t *pos;     /* (n_tokens) position of each token in its sequence */
    fr_seq *const *seqs;    /* (n_tokens) the sequence each token belongs to */
    const uint8_t *logits;  /* (n_tokens) 1 = return logits for this token; NULL = every token */
} fr_batch;

typedef struct fr_decoder fr_decoder;

/* Scratch for up to max_tokens tokens per forward and contexts up to max_ctx positions. */
fr_decoder *fr_decoder_new(const fr_model *m, int max_tokens, int max_ctx, fr_err *err);

/* Options of fr_decoder_new_opts; all false/0 gives fr_decoder_new. */
typedef struct fr_decoder_opts {
    bool rope_freq_bf16; /* round each rotary frequency to bf16: reproduces an HF model that was
                            cast with .to(torch.bfloat16), which casts the inv_freq buffer too
                            (HF's from_pretrained in bf16 keeps it fp32, as we do by default) */
    int n_threads;       /* worker threads including the caller; 0 = one per core */
} fr_decoder_opts;
fr_decoder *fr_decoder_new_opts(const fr_model *m, int max_tokens, int max_ctx,
                                const fr_decoder_opts *o, fr_err *err);
void fr_decoder_free(fr_decoder *d);

/* Run the batch. logits_out receives (n_wanted, n_vocab) floats, one row per token with
 * logits[i] = 1, in batch order. Advances each sequence's n_pos. The caller must have reserved
 * cache blocks for every position (fr_seq_reserve). Returns 0, or -1 with err set on bad input
 * (token id out of range, position mismatch, batch too large). */
int fr_decoder_forward(fr_decoder *d, fr_kv_pool *kv, const fr_batch *b, float *logits_out,
                       fr_err *err);

/* Weight-only quantisation on load for the CPU: "q8" (8-bit, group 32, one scale per group) or
 * "q4" (4-bit, group 32, scale and minimum per group). Converts every F32 matrix of the model in
 * place (the model owns the new buffers); the tensors get dtype FR_DTYPE_Q8 / FR_DTYPE_Q4 (values
 * past FR_DTYPE_COUNT, layouts and names in backend/cpu/cpu.h). "none"/"f32"/NULL: no change.
 * m->weight_bytes becomes the bytes streamed per decoded token. Returns 0 or -1 with err. */
int fr_model_quantize(fr_model *m, const char *kind, fr_err *err);

/* ---- sampling ---- */
typedef struct fr_sampling {
    float temperature; /* 0 = greedy */
    int top_k;         /* 0 = off */
    float top_p;       /* 1 = off */
    float min_p;       /* 0 = off */
    uint64_t seed;
} fr_sampling;
fr_sampling fr_sampling_default(void); /* temperature 1, top_k 0, top_p 1, min_p 0, seed 0 */

struct fr_cand;
typedef struct fr_sampler {
    fr_sampling p;
    uint64_t rng[2];   /* xoroshiro128+ state */
    int n_vocab;
    float *probs;      /* (n_vocab) scratch */
    int32_t *idx;      /* (n_vocab) scratch */
    struct fr_cand *cand; /* (n_vocab) (probability, id) candidates scratch */
} fr_sampler;
void fr_sampler_init(fr_sampler *s, const fr_sampling *p, int n_vocab);
void fr_sampler_free(fr_sampler *s);
/* Pick the next token from raw logits (n_vocab). Greedy picks the lowest index among ties. */
int fr_sample(fr_sampler *s, const float *logits);

#endif
