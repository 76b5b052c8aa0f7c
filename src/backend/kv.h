/* kv.h — the paged KV cache's block accounting: one pool of fixed-size blocks (block_size tokens
 * each, 16 by default) shared by all sequences, and per-sequence block tables (fr_seq).
 *
 * The pool is the backend's (fr_backend_kv in backend.h) and the scheduler's view of the cache:
 * on the CPU it also holds the K/V storage the decoder reads and writes (backend/cpu/decoder.h);
 * on CUDA it holds no storage (k = v = NULL) and only hands out ids of blocks that live on the
 * device. Either way fr_seq_reserve / fr_seq_release / n_free work the same.
 *
 * Storage layout (CPU): k, v are (n_blocks, n_layer, block_size, n_head_kv*head_dim) floats, so
 * one block holds all layers of block_size consecutive positions of one sequence.
 *
 * Not thread-safe: one thread (the engine thread) reserves and releases.
 */
#ifndef FRUGAL_KV_H
#define FRUGAL_KV_H

#include "model/model.h"

typedef struct fr_kv_pool {
    int n_blocks;    /* total blocks */
    int block_size;  /* tokens per block */
    int n_layer, n_head_kv, head_dim; /* the model's shape (checked by the CPU decoder) */
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

#endif
