/* batch.h — one forward call's input, the same for every backend (CPU decoder, CUDA).
 *
 * A batch holds tokens from any number of sequences (decode tokens of many sequences and/or a
 * prefill chunk of one): each token carries its sequence and position. Tokens of one sequence
 * must appear in increasing position order, contiguous with what the cache already holds (pos ==
 * seq->n_pos for the first, +1 for each next). K/V of every batch token are written to the cache
 * before attention, and a token at position p attends to positions 0..p of its own sequence. A
 * forward advances each sequence's n_pos and returns logits in batch order for the tokens with
 * logits[i] = 1.
 */
#ifndef FRUGAL_BATCH_H
#define FRUGAL_BATCH_H

#include "backend/kv.h"

typedef struct fr_batch {
    int n_tokens;           /* tokens in the batch, 1..max_tokens */
    const int32_t *tokens;  /* (n_tokens) token ids */
    const int32_t *pos;     /* (n_tokens) position of each token in its sequence */
    fr_seq *const *seqs;    /* (n_tokens) the sequence each token belongs to */
    const uint8_t *logits;  /* (n_tokens) 1 = return logits for this token; NULL = every token */
} fr_batch;

#endif
