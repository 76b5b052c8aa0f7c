/* tokmask.h — token masks for grammar-constrained decoding: which tokens of the vocabulary keep
 * the output inside a grammar (grammar.h), as a bitset the sampler applies
 * (fr_sampler_apply_mask).
 *
 *   fr_tokvocab *v = fr_tokvocab_new(tok, n_vocab, eos_ids, n_eos);   // once per model
 *   fr_tokmask *m = fr_tokmask_new(v, grammar);                        // once per request
 *   for (;;) { fr_tokmask_fill(m, bits); fr_sampler_apply_mask(logits, bits, n_vocab);
 *              id = fr_sample(...); fr_tokmask_accept(m, id); if (fr_tokmask_terminal(m)) break; }
 *
 * Speed (the XGrammar idea, done our way): the vocabulary's token bytes sit in a byte trie kept
 * in preorder (a node and the index after its subtree), so a walk prunes a dead prefix with all
 * its tokens at once. The tokens a stack's top frame accepts by itself — without popping below
 * it — depend on that frame only, so per frame (fr_gframe_key) a cache keeps the bitset of
 * tokens accepted for sure and the "uncertain" ones whose bytes pop the frame, grouped by the
 * bytes left after the pop; a step ORs the cached bitset and checks each group once against the
 * stack below the frame. String bodies use bitsets of plain tokens by character count and one
 * entry per vocabulary; the caches are shared by the requests of one grammar (fr_maskcache).
 * Tokens longer than FR_TOKMASK_TRIE_DEPTH bytes are checked one by one. Special tokens are
 * never allowed, except the EOS ids once the value may end. tokmask.c has the details.
 *
 * Reference: fr_tokmask_fill_ref feeds every token's bytes through the whole state (tests
 * compare the two bit for bit).
 *
 * Thread-safety: a vocabulary is immutable and shared; a mask is used by one thread at a time.
 */
#ifndef FRUGAL_ENGINE_TOKMASK_H
#define FRUGAL_ENGINE_TOKMASK_H

#include "engine/grammar.h"
#include "model/tokenizer.h"

#define FR_TOKMASK_TRIE_DEPTH 48 /* longest token kept in the trie, in bytes (longer: checked one by one) */
#define FR_TOKMASK_CACHE 128     /* cached frames per grammar */

typedef struct fr_tokvocab fr_tokvocab;
typedef struct fr_tokmask fr_tokmask;
typedef struct fr_maskcache fr_maskcache;

/* n_vocab: the model's rows (ids the tokenizer lacks are never allowed); eos: the ids that end
 * generation. Never fails (allocation failure aborts). */
fr_tokvocab *fr_tokvocab_new(const fr_tokenizer *t, int n_vocab, const int *eos, int n_eos);
void fr_tokvocab_free(fr_tokvocab *v);
int fr_tokvocab_n(const fr_tokvocab *v);
int fr_tokvocab_trie_nodes(const fr_tokvocab *v);

/* Words of a mask of v's ids: (n_vocab + 31) / 32. */
int fr_tokmask_words(const fr_tokvocab *v);

/* A matcher at the grammar's start. v and g are borrowed and must outlive it. */
fr_tokmask *fr_tokmask_new(const fr_tokvocab *v, const fr_grammar *g);
void fr_tokmask_free(fr_tokmask *m);
/* The per-frame cache of one grammar, shared by the matchers of equal grammars
 * (fr_grammar_fingerprint): what a frame accepts depends on the grammar and the vocabulary
 * only, so requests with the same schema start warm. Used by one thread at a time. */
fr_maskcache *fr_maskcache_new(void);
void fr_maskcache_free(fr_maskcache *c);
/* A matcher using cache c (borrowed: it must outlive the matcher; NULL = a cache of its own). */
fr_tokmask *fr_tokmask_new_shared(const fr_tokvocab *v, const fr_grammar *g, fr_maskcache *c);
/* The allowed tokens of the current state into mask (fr_tokmask_words words). */
void fr_tokmask_fill(fr_tokmask *m, uint32_t *mask);
/* The same by brute force: every token's bytes through the whole state. */
void fr_tokmask_fill_ref(fr_tokmask *m, uint32_t *mask);
/* Advance by token id. false (state unchanged) when id is not allowed. */
bool fr_tokmask_accept(fr_tokmask *m, int id);
/* Bytes of the shortest completion after id, or -1 when id is not allowed (state unchanged). */
int fr_tokmask_need_after(fr_tokmask *m, int id);
int fr_tokmask_need(const fr_tokmask *m);
/* Complete and nothing may follow: the engine ends the request. */
bool fr_tokmask_terminal(const fr_tokmask *m);
/* Cache counters (tests, bench). */
void fr_tokmask_stats(const fr_tokmask *m, long *hits, long *misses);

#endif
