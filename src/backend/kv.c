/* kv.c — the paged KV pool: one allocation of n_blocks blocks for K and one for V, a stack of free
 * block ids, and per-sequence block tables (fr_seq).
 *
 * Storage layout (see kv.h): k, v are (n_blocks, n_layer, block_size, n_head_kv*head_dim)
 * floats, so one block holds all layers of block_size consecutive positions of one sequence.
 * Blocks are handed out lowest id first. A sequence's table grows on reserve and is freed on
 * release, so fr_seq_release is the only clean-up a sequence needs.
 */
#include "backend/kv.h"

#include <stdlib.h>
#include <string.h>

static size_t block_floats(const fr_hparams *hp, int block_size) {
    return (size_t)hp->n_layer * (size_t)block_size * (size_t)hp->n_head_kv * (size_t)hp->head_dim;
}

fr_kv_pool *fr_kv_pool_new(const fr_hparams *hp, int n_blocks, int block_size) {
    if (n_blocks < 1 || block_size < 1 || hp->n_layer < 1 || hp->n_head_kv < 1 || hp->head_dim < 1)
        return NULL;
    size_t bf = block_floats(hp, block_size);
    if ((size_t)n_blocks > SIZE_MAX / sizeof(float) / bf) return NULL;
    fr_kv_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_blocks = n_blocks;
    p->block_size = block_size;
    p->n_layer = hp->n_layer;
    p->n_head_kv = hp->n_head_kv;
    p->head_dim = hp->head_dim;
    p->block_bytes = 2 * bf * sizeof(float);
    p->k = calloc((size_t)n_blocks * bf, sizeof(float));
    p->v = calloc((size_t)n_blocks * bf, sizeof(float));
    p->free_ids = malloc((size_t)n_blocks * sizeof(int));
    if (!p->k || !p->v || !p->free_ids) {
        fr_kv_pool_free(p);
        return NULL;
    }
    for (int i = 0; i < n_blocks; i++) p->free_ids[i] = n_blocks - 1 - i; /* pop gives 0, 1, ... */
    p->n_free = n_blocks;
    return p;
}

int fr_kv_pool_blocks_for_bytes(const fr_hparams *hp, int block_size, size_t bytes) {
    if (block_size < 1) return 0;
    size_t bb = 2 * block_floats(hp, block_size) * sizeof(float);
    if (bb == 0) return 0;
    size_t n = bytes / bb;
    return n > (size_t)INT32_MAX ? INT32_MAX : (int)n;
}

void fr_kv_pool_free(fr_kv_pool *p) {
    if (!p) return;
    free(p->k);
    free(p->v);
    free(p->free_ids);
    free(p);
}

int fr_seq_reserve(fr_seq *s, fr_kv_pool *p, int n_pos_total) {
    int need = fr_kv_blocks_needed(p, n_pos_total) - s->n_blocks;
    if (need <= 0) return 0;
    if (need > p->n_free) return -1;
    if (s->n_blocks + need > s->cap_blocks) {
        int cap = s->cap_blocks ? s->cap_blocks : 8;
        while (cap < s->n_blocks + need) cap *= 2;
        s->blocks = fr_xrealloc(s->blocks, (size_t)cap * sizeof(int));
        s->cap_blocks = cap;
    }
    for (int i = 0; i < need; i++) s->blocks[s->n_blocks++] = p->free_ids[--p->n_free];
    return 0;
}

void fr_seq_release(fr_seq *s, fr_kv_pool *p) {
    for (int i = s->n_blocks - 1; i >= 0; i--) {
        FR_ASSERT(p->n_free < p->n_blocks);
        p->free_ids[p->n_free++] = s->blocks[i];
    }
    free(s->blocks);
    memset(s, 0, sizeof *s);
}
