/* tok_internal.h — private to the tokenizer sources (tokenizer.c, tok_json.c).
 *
 * A loader fills a tok_build (the neutral description of a byte-level BPE tokenizer: model vocab,
 * merges, added tokens, pre-tokenizer stages, post-processor ids) with strings that point into
 * its own input, and fr_tok_build_finish() copies what it needs into an immutable fr_tokenizer.
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
    const char *s; /* token string as stored (ByteLevel-mapped) */
    size_t n;      /* its byte length */
    int32_t id;    /* its id, 0 <= id < FR_TOK_MAX_VOCAB */
} tb_vocab;

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
};

/* helpers shared by the loaders */
const char *fr_tok_quote(const char *s, size_t n, char *buf, size_t cap);
const char *fr_tok_gpt2_regex(void);
char *fr_tok_nfc(const char *s, size_t n, size_t *out_n);
bool fr_tok_utf8_valid(const char *s, size_t n); /* fr_utf8_valid, faster on ASCII */
uint32_t fr_tok_byte_to_cp(uint8_t b);
int fr_tok_cp_to_byte(uint32_t cp);

#endif
