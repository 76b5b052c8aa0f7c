/* decoder.h — the CPU backend's decoder: the Qwen2/Llama forward pass on the CPU, over a paged KV
 * cache (backend/kv.h: the pool holds the K/V storage) and a batch of tokens from any number of
 * sequences (backend/batch.h says the batch rules). Callers above the backend reach it through
 * backend/backend.h (fr_backend_forward); tests and the CPU benchmark call it directly.
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
#ifndef FRUGAL_CPU_DECODER_H
#define FRUGAL_CPU_DECODER_H

#include "backend/batch.h"
#include "backend/kv.h"
#include "model/model.h"

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

/* Analysis only (`frugal analyze heads`), never set on a serving path: after each layer's
 * attention, fn receives the attention probabilities of every batch row that returns logits
 * (b->logits[row] = 1, or every row when NULL): p (n = pos + 1) = softmax(q k^T / sqrt(head_dim))
 * over positions 0..pos of the row's sequence, for query head `head` (scores and the softmax in
 * double, as fr_ref_attention). Called on the forward's thread, layer by layer, rows in batch
 * order, heads in order; p is the decoder's scratch, valid during the call. fn NULL turns it off
 * (the default: one branch per layer when off). */
typedef void (*fr_attn_probe_fn)(void *user, int layer, int row, int head, const float *p, int n);
void fr_decoder_set_attn_probe(fr_decoder *d, fr_attn_probe_fn fn, void *user);

#endif
