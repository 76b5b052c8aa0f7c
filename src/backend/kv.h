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
 * Automatic prefix caching (optional): with fr_kv_prefix_enable, full blocks are
 * published under a hash of their content (chained over token ids: each block's key covers the
 * previous block's key, its own token ids and whatever else shaped its K/V, such as image feature
 * rows and M-RoPE positions). A later sequence whose prefix has the same keys takes those blocks
 * into its table read-only (fr_seq_share) instead of recomputing them; every block then counts its
 * holders. A block no sequence holds any more stays cached and joins an LRU list; a reservation
 * takes free blocks first and evicts the least recently released cached block only when none is
 * left. Shared blocks are full and never written again: a sequence writes positions >= n_pos
 * only, and a shared prefix ends on a block boundary. Without the cache every call below behaves
 * as it always did (no holder counts, release pushes straight back to the free stack).
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
    struct fr_kv_prefix *prefix; /* the prefix cache, or NULL when off */
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
 * the pool has too few blocks available (free, or cached and unheld: those are evicted, least
 * recently released first). */
int fr_seq_reserve(fr_seq *s, fr_kv_pool *p, int n_pos_total);
/* Give all blocks back to the pool and reset to empty (the table is freed too: a zeroed fr_seq
 * needs no other clean-up). With the prefix cache a block another sequence still holds stays
 * with it, and a cached block nobody holds joins the LRU list; the others become free. */
void fr_seq_release(fr_seq *s, fr_kv_pool *p);
/* Blocks needed to hold n positions. */
static inline int fr_kv_blocks_needed(const fr_kv_pool *p, int n) {
    return (n + p->block_size - 1) / p->block_size;
}

/* ---- automatic prefix caching ---- */

/* What names one full block's content. */
typedef struct fr_kv_block_key {
    uint64_t hash;   /* fr_kv_block_hash(parent, tokens, block_size, extra) */
    uint64_t parent; /* the previous block's hash, or the root seed for block 0 */
    uint64_t extra;  /* hash of the inputs besides the token ids (image rows, M-RoPE positions)
                        of the block's positions; 0 = none */
} fr_kv_block_key;

/* The root seed of a chain: block 0's parent. `salt` (0 = none) separates requests that must not
 * share blocks (a per-request cache salt). */
uint64_t fr_kv_chain_root(uint64_t salt);
/* The hash of one block: parent, its n token ids and extra, mixed so that any change to any of
 * them changes the result (64 bits; a lookup also compares the stored ids and keys, so a
 * collision can only ever share a block whose ids, parent and extra hash are all equal). */
uint64_t fr_kv_block_hash(uint64_t parent, const int32_t *tokens, int n, uint64_t extra);
/* Incremental 64-bit mixing for `extra` and content hashes: h' = mix(h, v). */
uint64_t fr_kv_hash_mix(uint64_t h, uint64_t v);
/* Hash of `n` bytes (image feature rows). */
uint64_t fr_kv_hash_bytes(const void *data, size_t n);

typedef struct fr_kv_prefix_stats {
    int cached;         /* blocks published in the cache (held or not) */
    int evictable;      /* cached blocks no sequence holds (the LRU list) */
    uint64_t evictions; /* cached blocks reused for other content */
} fr_kv_prefix_stats;

/* Turns the cache on for this pool. Returns 0, or -1 when out of memory (the pool unchanged).
 * Call while no sequence holds blocks. */
int fr_kv_prefix_enable(fr_kv_pool *p);
/* Turns it off and frees it (cached blocks become free). Call when no sequence holds blocks;
 * fr_kv_pool_free does it too. Harmless when off. */
void fr_kv_prefix_disable(fr_kv_pool *p);
static inline bool fr_kv_prefix_on(const fr_kv_pool *p) { return p->prefix != NULL; }
/* Blocks a reservation can take now: free ones plus cached blocks no sequence holds. */
int fr_kv_pool_available(const fr_kv_pool *p);
/* The longest run of leading blocks found in the cache: keys[i] names block i, whose token ids
 * are tokens[i*block_size .. (i+1)*block_size). Fills ids[0..k) and returns k (0 when off). Only
 * reads: the blocks are taken with fr_seq_share before the next reservation can evict them. */
int fr_kv_prefix_match(const fr_kv_pool *p, const fr_kv_block_key *keys, const int32_t *tokens,
                       int n, int *ids);
/* Of ids[0..n) (cached blocks), how many no sequence holds (they count as available now and
 * stop counting once shared). */
int fr_kv_prefix_unheld(const fr_kv_pool *p, const int *ids, int n);
/* Puts the n cached blocks ids at the start of the empty table of s, one more holder each, and
 * sets s->n_pos = n * block_size. The cache must be on and s empty. */
void fr_seq_share(fr_seq *s, fr_kv_pool *p, const int *ids, int n);
/* Publishes s's block `i` (full, its K/V written) under key, with its block_size token ids.
 * Returns true when published; false when the cache is off, the block is already published, or
 * another block already has that hash (this one then stays private and is freed on release). */
bool fr_kv_prefix_publish(fr_kv_pool *p, const fr_seq *s, int i, const fr_kv_block_key *key,
                          const int32_t *tokens);
/* Blocks of s that only s holds: what releasing s makes available. */
int fr_seq_sole_blocks(const fr_seq *s, const fr_kv_pool *p);
void fr_kv_prefix_stats_get(const fr_kv_pool *p, fr_kv_prefix_stats *st);

#endif
