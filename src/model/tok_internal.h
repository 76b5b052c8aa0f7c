/* tok_internal.h — private to the tokenizer sources (tokenizer.c, tok_json.c, tok_sp.c).
 *
 * A loader fills a tok_build (the neutral description of a tokenizer: model kind, model vocab
 * with scores, merges, added tokens, pre-tokenizer stages or SentencePiece text rules,
 * post-processor ids, decoder rules) with strings that point into its own input, and
 * fr_tok_build_finish() copies what it needs into an immutable fr_tokenizer.
 */
#ifndef FRUGAL_TOK_INTERNAL_H
#define FRUGAL_TOK_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>

#include "model/tokenizer.h"

#define FR_TOK_MAX_FILE (64u << 20)     /* tokenizer.json size limit */
#define FR_TOK_MAX_VOCAB (1 << 22)      /* ids must be below this */
#define FR_TOK_MAX_TOKEN_LEN (1 << 16)  /* bytes in one token string */
#define FR_TOK_MAX_STAGES 8             /* pre-tokenizer regex stages */
#define FR_TOK_MAX_TEMPLATE 16          /* post-processor ids before / after the text */

/* ---- the build description ---- */

typedef struct tb_str {
    const char *s; /* bytes (not necessarily NUL-terminated), NULL = absent */
    size_t n;      /* byte count */
} tb_str;

typedef struct tb_vocab {
    const char *s; /* token string as stored (ByteLevel-mapped, or with U+2581 for SentencePiece) */
    size_t n;      /* its byte length */
    int32_t id;    /* its id, 0 <= id < FR_TOK_MAX_VOCAB */
    double score;  /* SentencePiece / Unigram score (0 for byte-level BPE) */
    bool piece;    /* FR_TOKM_SPM: may be a merge result (GGUF type normal or user-defined) */
} tb_vocab;

/* Model kinds. */
enum {
    FR_TOKM_BPE = 0, /* HF BPE by merge rank (byte-level, or on characters with byte_fallback) */
    FR_TOKM_SPM,     /* SentencePiece BPE as GGUF `llama` stores it: merge by the best score */
    FR_TOKM_UNIGRAM, /* HF Unigram: Viterbi over the vocab scores */
};

/* How a SentencePiece-style tokenizer prepends U+2581 to a text segment (between added tokens). */
enum {
    FR_SPP_NONE = 0, /* never */
    FR_SPP_PREPEND,  /* normalizer Prepend: every non-empty segment (GGUF add_space_prefix) */
    FR_SPP_ALWAYS,   /* Metaspace "always": unless it starts with U+2581 already */
    FR_SPP_FIRST,    /* Metaspace "first": the same, only for the segment at the text's start */
};

/* Decoder rules of SentencePiece-style tokenizers (bit set; 0 = the ByteLevel decoder). */
enum {
    FR_SPD_SP = 1,      /* a SentencePiece decoder is in use (not ByteLevel) */
    FR_SPD_SPACE = 2,   /* U+2581 -> ' ' in each token (Replace, Metaspace) */
    FR_SPD_BYTES = 4,   /* <0xXX> tokens -> their byte (ByteFallback) */
    FR_SPD_STRIP1 = 8,  /* one leading ' ' of the text is removed (Strip after Fuse) */
    FR_SPD_MSFIRST = 16 /* Metaspace decoder: the first token's U+2581s are dropped */
};

typedef struct tb_merge {
    tb_str a, b; /* left and right token strings; rank = index in the list */
} tb_merge;

typedef struct tb_added {
    tb_str s;          /* content */
    int32_t id;        /* id */
    bool special;      /* special token (skipped by skip_special, control in GGUF) */
    bool lstrip;       /* absorbs whitespace on its left */
    bool rstrip;       /* absorbs whitespace on its right */
    bool single_word;  /* only matches when not inside a word */
    bool normalized;   /* matched in the normalized text (else in the raw text) */
} tb_added;

typedef struct tb_stage {
    tb_str re;         /* regex (or literal) that isolates pieces; re.s NULL: no split */
    bool literal;      /* re is a plain string (Split pattern.String) */
    bool prefix_space; /* prepend ' ' to each piece not starting with one, before splitting */
} tb_stage;

typedef struct tok_build {
    const char *name;               /* file name for error messages */
    tb_vocab *vocab;                /* model vocab (malloc'd array) */
    size_t n_vocab;
    tb_merge *merges;               /* merges in rank order (malloc'd array) */
    size_t n_merges;
    tb_added *added;                /* added tokens (malloc'd array) */
    size_t n_added;
    tb_stage stages[FR_TOK_MAX_STAGES]; /* pre-tokenizer, applied in order */
    int n_stages;
    bool ignore_merges;             /* a word found in the vocab is taken whole */
    bool nfc;                       /* NFC normalizer */
    bool fuse_unk;                  /* consecutive unknown characters give one unk */
    tb_str unk;                     /* unk_token, or s == NULL */
    int32_t unk_id;                 /* Unigram unk_id, -1 = none (BPE uses unk) */
    int model;                      /* FR_TOKM_* */
    bool byte_fallback;             /* unknown characters become <0xXX> tokens */
    bool sp;                        /* SentencePiece text rules below instead of stages */
    int sp_prepend;                 /* FR_SPP_* of the normalizer (PREPEND) */
    bool sp_space;                  /* normalizer Replace(' ', U+2581) */
    bool ms;                        /* Metaspace pre-tokenizer present */
    int ms_prepend;                 /* its FR_SPP_* (ALWAYS, FIRST or NONE) */
    bool ms_split;                  /* it splits before each U+2581 */
    int sp_dec;                     /* FR_SPD_* decoder rules */
    int32_t prefix[FR_TOK_MAX_TEMPLATE], suffix[FR_TOK_MAX_TEMPLATE]; /* template ids */
    int n_prefix, n_suffix;
    int32_t bos, eos;               /* -1 when unknown */
} tok_build;

fr_tokenizer *fr_tok_build_finish(const tok_build *b, fr_err *err);
void fr_tok_build_free(tok_build *b); /* frees the arrays, not the strings */

/* ---- the tokenizer ---- */

enum { FR_TOKF_MODEL = 1, FR_TOKF_ADDED = 2, FR_TOKF_SPECIAL = 4 };

typedef struct tok_entry {
    uint32_t str_off, str_len; /* stored string in blob (model vocab string, else content) */
    uint32_t dec_off, dec_len; /* decoded bytes in blob (NUL-terminated there) */
    uint32_t con_off, con_len; /* added-token content in blob (FR_TOKF_ADDED only) */
    uint8_t flags;             /* FR_TOKF_* */
} tok_entry;

typedef struct tok_added {
    int32_t id;            /* token id */
    uint32_t off, len;     /* content in blob */
    uint32_t moff, mlen;   /* the string matched (NFC of the content for normalized tokens) */
    bool special, lstrip, rstrip, single_word, normalized; /* as in tb_added */
} tok_added;

typedef struct tok_trie_node {
    int32_t child;   /* first child node, -1 if none */
    int32_t sibling; /* next sibling node, -1 if none */
    int32_t added;   /* added-token index ending here, -1 if none */
    uint8_t byte;    /* the byte on the edge into this node */
} tok_trie_node;

typedef struct tok_matcher {
    int32_t root[256];    /* node for each first byte, -1 if no token starts with it */
    tok_trie_node *nodes; /* all nodes */
    int n_nodes;
} tok_matcher;

typedef struct tok_smap {
    uint64_t *slot; /* (hash >> 32) << 32 | (value + 1); 0 = empty */
    uint32_t mask;  /* capacity - 1 (a power of two) */
} tok_smap;

typedef struct tok_merge {
    uint64_t key;  /* left id << 32 | right id; UINT64_MAX = empty slot */
    uint32_t rank; /* merge rank */
    int32_t out;   /* merged token id */
} tok_merge;

/* Hand-written matchers for the regexes of known checkpoints (used when the file's regex is
 * byte-for-byte one of them; PCRE2 otherwise). */
enum { FR_SPLIT_REGEX = 0, FR_SPLIT_GPT2, FR_SPLIT_LLAMA3, FR_SPLIT_QWEN2 };

typedef struct tok_stage {
    pcre2_code *re;    /* compiled split regex (NULL: no split) */
    int fast;          /* FR_SPLIT_*: a hand-written matcher equivalent to re */
    bool prefix_space; /* as in tb_stage */
} tok_stage;

struct fr_tokenizer {
    int n_vocab;               /* max id + 1 */
    tok_entry *ent;            /* per id */
    char *blob;                /* all strings */
    tok_smap vocab;            /* model vocab string -> id */
    tok_smap added_map;        /* added content -> index in added[] */
    tok_added *added;          /* added tokens */
    int n_added;
    tok_matcher m_raw;         /* added tokens matched in the raw text */
    tok_matcher m_norm;        /* added tokens matched in the normalized text */
    tok_merge *merges;         /* merge hash table */
    uint32_t merge_mask;       /* its capacity - 1 */
    int n_merges;
    int32_t byte_id[256];      /* id of each byte's ByteLevel character, -1 if not in vocab */
    char bl_utf8[256][2];      /* each byte's ByteLevel character in UTF-8 */
    uint8_t bl_len[256];       /* its length (1 or 2) */
    uint32_t max_vocab_len;    /* longest model vocab string */
    bool ignore_merges;        /* a word found in the vocab is taken whole */
    bool nfc;                  /* NFC normalizer */
    bool fuse_unk;             /* consecutive unknowns give one unk */
    int32_t unk_id;            /* -1 if none */
    tok_stage stages[FR_TOK_MAX_STAGES]; /* pre-tokenizer */
    int n_stages;
    int32_t prefix[FR_TOK_MAX_TEMPLATE], suffix[FR_TOK_MAX_TEMPLATE]; /* post-processor ids */
    int n_prefix, n_suffix;
    int32_t bos, eos;          /* -1 if unknown */
    /* SentencePiece-style (model != FR_TOKM_BPE or sp set) */
    int model;                 /* FR_TOKM_* */
    bool byte_fallback;        /* unknown characters become <0xXX> tokens */
    bool sp;                   /* the SentencePiece text rules below replace `stages` */
    int sp_prepend;            /* as in tok_build */
    bool sp_space, ms, ms_split;
    int ms_prepend;
    int sp_dec;                /* FR_SPD_* */
    int32_t sp_byte[256];      /* id of each byte's <0xXX> token, -1 if absent */
    double *score;             /* per id (SPM, Unigram); NULL otherwise */
    uint8_t *piece;            /* per id: 1 if SPM may merge into it (NULL: all may) */
    double unk_score;          /* Unigram: score of an unknown character (min score - 10) */
    uint32_t *piece_lens;      /* Unigram: the distinct byte lengths of the pieces, ascending */
    int n_piece_lens;          /* their count (bounds the Viterbi's lookups per position) */
};

/* ---- encoding state (tokenizer.c), shared with tok_sp.c ---- */

/* A BPE symbol: a token id in a doubly linked list over the word's array. */
typedef struct tok_sym {
    int32_t id;         /* token id; -1 once merged into its left neighbour */
    int32_t prev, next; /* neighbours' indices, -1 at the ends */
} tok_sym;

/* Word cache entry: a word (bytes in the arena) and its ids (in the ids arena). */
typedef struct tok_centry {
    uint64_t hash;       /* full hash, 0 = empty slot */
    uint32_t woff, wlen; /* word bytes in `warena` */
    uint32_t ioff, ilen; /* ids in `iarena` */
} tok_centry;

/* Per-call encoding state. */
typedef struct tok_ctx {
    const fr_tokenizer *t;
    int32_t *ids;               /* output */
    size_t n_ids, cap_ids;
    pcre2_match_data *md[FR_TOK_MAX_STAGES]; /* per stage, made lazily */
    pcre2_match_context *mctx;  /* with a large JIT stack, made when the default one overflows */
    pcre2_jit_stack *jstack;
    tok_sym *sym;               /* BPE scratch */
    size_t cap_sym;
    uint64_t *heap;             /* candidate merges: rank << 32 | position of the left symbol */
    size_t cap_heap;
    char *map;                  /* a word mapped through the ByteLevel table (ignore_merges) */
    size_t cap_map;
    tok_centry *cache;          /* word cache (NULL: none) */
    uint32_t cache_mask, cache_used;
    fr_buf warena, iarena;      /* cached words and their ids */
    const char *text0;          /* start of the text being encoded */
    const char *norm0;          /* SentencePiece: start of the normalized first segment */
    fr_err *err;
} tok_ctx;

void fr_tok_push(tok_ctx *c, int32_t id);
/* Merges the m symbols in c->sym (ids set, linked in order) by merge rank; appends the ids. */
void fr_tok_bpe_run(tok_ctx *c, int32_t m);
/* Model vocab string -> id, -1 if absent. */
int32_t fr_tok_vocab_id(const fr_tokenizer *t, const char *s, size_t n);
/* UTF-8 length of the character starting with byte b (1 for a stray continuation byte). */
int fr_tok_char_len(uint8_t b);

/* Splits normalized text on the added tokens matched there, handing the gaps to `gap`. */
int fr_tok_split_norm(tok_ctx *c, const char *s, size_t n,
                      int (*gap)(tok_ctx *c, const char *s, size_t n));
/* tok_sp.c: one text segment between added tokens (raw text) of a SentencePiece-style
 * tokenizer: normalizer, added tokens matched in the normalized text, Metaspace, model. */
int fr_tok_sp_segment(tok_ctx *c, const char *s, size_t n);
/* tok_sp.c: build-time parts: byte-token ids, scores, SentencePiece decoded strings. */
int fr_tok_sp_finish(fr_tokenizer *t, const tok_build *b, fr_err *err);
/* The decoded bytes of token string s[0..n) under the SentencePiece decoder rules sp_dec (at
 * most n bytes, written to out); `first`: the first token of a decode (FR_SPD_MSFIRST). */
size_t fr_tok_sp_decode(int sp_dec, bool first, const char *s, size_t n, char *out);

/* helpers shared by the loaders */
const char *fr_tok_quote(const char *s, size_t n, char *buf, size_t cap);
const char *fr_tok_gpt2_regex(void);
char *fr_tok_nfc(const char *s, size_t n, size_t *out_n);
bool fr_tok_utf8_valid(const char *s, size_t n); /* fr_utf8_valid, faster on ASCII */
uint32_t fr_tok_byte_to_cp(uint8_t b);
int fr_tok_cp_to_byte(uint32_t cp);

#endif
