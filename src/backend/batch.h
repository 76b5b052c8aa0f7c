/* batch.h — one forward call's input, the same for every backend (CPU decoder, CUDA).
 *
 * A batch holds tokens from any number of sequences (decode tokens of many sequences and/or a
 * prefill chunk of one): each token carries its sequence and position. Tokens of one sequence
 * must appear in increasing position order, contiguous with what the cache already holds (pos ==
 * seq->n_pos for the first, +1 for each next). K/V of every batch token are written to the cache
 * before attention, and a token at position p attends to positions 0..p of its own sequence. A
 * forward advances each sequence's n_pos and returns logits in batch order for the tokens with
 * logits[i] = 1.
 *
 * Multimodal input (optional; NULL for text): `embd` gives rows used instead of the token
 * embedding (image features after the vision merger), and `rope_pos` gives the M-RoPE positions
 * of a model with hp.mrope_section set (the t/h/w of get_rope_index, model/mrope.h). The KV slot
 * and the causal order stay `pos`; only the rotary angles follow rope_pos. A backend that cannot
 * take them says so through fr_backend_supports (FR_BOP_EMBD_INPUT, FR_BOP_MROPE) and refuses such
 * a batch with FR_ERR_UNSUPPORTED.
 */
#ifndef FRUGAL_BATCH_H
#define FRUGAL_BATCH_H

#include "backend/kv.h"

struct fr_lora;

typedef struct fr_batch {
    int n_tokens;           /* tokens in the batch, 1..max_tokens */
    const int32_t *tokens;  /* (n_tokens) token ids */
    const int32_t *pos;     /* (n_tokens) position of each token in its sequence */
    fr_seq *const *seqs;    /* (n_tokens) the sequence each token belongs to */
    const uint8_t *logits;  /* (n_tokens) 1 = return logits for this token; NULL = every token */
    const float *embd;      /* (n_tokens, n_embd) input rows instead of the token embedding, or
                               NULL; the token ids must still be valid ids */
    const uint8_t *embd_use; /* (n_tokens) 1 = row i of embd replaces token i's embedding, 0 = the
                               token's own; NULL = every row of embd is used */
    const int32_t *rope_pos; /* (3, n_tokens) M-RoPE positions: t row, then h, then w, each in
                               0..max_ctx-1; NULL = all three equal pos (plain RoPE). Needs a model
                               with hp.mrope_section set */
    const struct fr_lora *const *lora; /* (n_tokens) the LoRA adapter of each token (model/lora.h:
                               y += scale B A x on the projections it adapts), NULL entries the
                               base model; NULL = none. Needs FR_BOP_LORA */
} fr_batch;

#endif
