/* cache.h — the vision encoder cache: an image seen before skips the ViT.
 *
 * Usage (one cache per loaded vision model; the server shares it between its threads):
 *
 *   fr_vision_cache *c = fr_vision_cache_new(512u << 20, &err);          // 512 MiB budget
 *   fr_vision_key key;
 *   fr_vision_key_make(&key, bytes, n_bytes, min_pixels, max_pixels, &err);
 *   const fr_vision_entry *e = fr_vision_cache_get(c, &key);               // a reference, or NULL
 *   if (!e) {
 *       ... preprocess + ViT + merger -> feat (n, d), grid_thw ...
 *       fr_vision_cache_put(c, &key, feat, n, d, grid_thw, &err);          // copies feat
 *   } else {
 *       ... use e->feat (n, d) and e->grid_thw; prune per question (prune.h) ...
 *       fr_vision_entry_release(e);
 *   }
 *   fr_vision_cache_free(c);
 *
 * Key: the SHA-256 of the image file's bytes (OpenSSL's libcrypto) together with the resolved
 * min_pixels / max_pixels of the preprocessing, since they change the grid and so the features
 * (a per-request override is a different entry). Everything else that changes the features
 * (the model, its processor config) is fixed per cache: one cache per model. The digest also
 * names the image for a KV prefix cache (fr_vision_digest_hex).
 *
 * Value: the merger's output (n, d) fp32 and the image's grid (t, h, w) in patches, before any
 * pruning (pruning is per question and runs after the cache).
 *
 * Memory: LRU under a byte budget; an entry costs n * d * 4 bytes plus a small header, and one
 * larger than the whole budget is not stored. get returns a REFERENCE-COUNTED entry: the cache
 * holds one reference, each get one more; eviction only drops the cache's reference, so an entry
 * a caller still holds stays valid (no use after evict) and is freed by the last release. The
 * budget bounds what the cache holds; entries evicted while still held are their holders'
 * memory until released.
 *
 * Thread safety: every function may be called from any thread at the same time (one mutex
 * around the table, the LRU list and the counters; references are atomic). An entry's contents
 * never change after put. fr_vision_cache_free must not race with other calls on that cache;
 * entries still held after it stay valid until released.
 */
#ifndef FRUGAL_VISION_CACHE_H
#define FRUGAL_VISION_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* SHA-256 of len bytes into out. 0, or -1 with err (FR_ERR_INTERNAL: libcrypto failed). */
int fr_vision_sha256(const void *data, size_t len, uint8_t out[32], fr_err *err);
/* Lowercase hex of a digest, NUL-terminated (65 bytes). */
void fr_vision_digest_hex(const uint8_t digest[32], char out[65]);

/* What identifies one encoder output within a cache. */
typedef struct fr_vision_key {
    uint8_t digest[32];  /* SHA-256 of the image's encoded bytes (as received) */
    int64_t min_pixels;  /* the preprocessing's resolved min_pixels */
    int64_t max_pixels;  /* and max_pixels */
} fr_vision_key;

/* Fills key (the hash of bytes[0..len), len may be 0). 0, or -1 with err (FR_ERR_BAD_REQUEST:
 * NULL bytes with len > 0, min_pixels < 0 or max_pixels < min_pixels; FR_ERR_INTERNAL: the
 * hash failed). */
int fr_vision_key_make(fr_vision_key *key, const void *bytes, size_t len, int64_t min_pixels,
                       int64_t max_pixels, fr_err *err);

/* One cached encoder output; read only for its holders. */
typedef struct fr_vision_entry {
    const float *feat; /* (n, d) the merger's output for the kept tokens */
    int64_t n;         /* image tokens computed (kept) */
    int64_t n_all;     /* image tokens of the grid (n when nothing was dropped) */
    const uint8_t *keep; /* (n_all): 1 for the tokens feat holds, 0 for dropped background
                            units (bgdrop.h); NULL when nothing was dropped */
    int d;             /* feature width (the LLM's hidden size) */
    int grid_thw[3];   /* the image's grid in patches: t, h, w */
} fr_vision_entry;

typedef struct fr_vision_cache fr_vision_cache; /* opaque */

/* What the cache has done since it was made (for the hit-rate metric). */
typedef struct fr_vision_cache_stats {
    uint64_t hits;      /* gets that found their key */
    uint64_t misses;    /* gets that did not */
    uint64_t inserts;   /* puts that stored a new entry */
    uint64_t evictions; /* entries dropped to make room (least recently used first) */
    uint64_t rejected;  /* puts of an entry larger than the whole budget (not stored) */
    int64_t entries;    /* entries held now */
    size_t bytes;       /* bytes held now (<= budget) */
    size_t budget;      /* the byte budget */
} fr_vision_cache_stats;

/* A cache holding at most budget_bytes (>= 1). NULL with err (FR_ERR_BAD_REQUEST for a zero
 * budget, FR_ERR_INTERNAL when the table or the mutex cannot be made). */
fr_vision_cache *fr_vision_cache_new(size_t budget_bytes, fr_err *err);
/* Drops the cache's references and frees it (NULL: nothing). */
void fr_vision_cache_free(fr_vision_cache *c);

/* The entry of key with one more reference (release it), marked most recently used; NULL on a
 * miss (or a NULL cache or key). Counts a hit or a miss. */
const fr_vision_entry *fr_vision_cache_get(fr_vision_cache *c, const fr_vision_key *key);
/* Drops one reference; the last one frees the entry. NULL: nothing. */
void fr_vision_entry_release(const fr_vision_entry *e);

/* Stores a copy of feat (n, d) and grid_thw under key, evicting least recently used entries
 * until it fits. Returns 1 when stored, 0 when not (key already present: that entry is kept and
 * marked most recently used; or the entry is larger than the whole budget: counted as rejected),
 * -1 with err (FR_ERR_BAD_REQUEST: NULL arguments, n < 1, d < 1, a grid side < 1;
 * FR_ERR_INTERNAL: out of memory). */
int fr_vision_cache_put(fr_vision_cache *c, const fr_vision_key *key, const float *feat,
                        int64_t n, int d, const int grid_thw[3], fr_err *err);

/* The same for an image whose background units were dropped before the tower: feat holds the
 * n kept tokens of the n_all of the grid, keep (n_all) says which (its 1s must number n); keep
 * NULL is fr_vision_cache_put (n_all == n). The mask is copied with the rows and counts in the
 * entry's bytes. */
int fr_vision_cache_put_kept(fr_vision_cache *c, const fr_vision_key *key, const float *feat,
                             int64_t n, int d, const int grid_thw[3], const uint8_t *keep,
                             int64_t n_all, fr_err *err);

/* A consistent snapshot of the counters. */
void fr_vision_cache_stats_get(fr_vision_cache *c, fr_vision_cache_stats *out);

#endif
