/* tokenizer.h — the tokenizers of the supported checkpoints, loaded from tokenizer.json or from
 * GGUF metadata:
 *   - byte-level BPE as used by Qwen2/Qwen2.5 and Llama-3 (HF tokenizers' BPE model with the
 *     ByteLevel pre-tokenizer/decoder; GGUF tokenizer.ggml.model "gpt2");
 *   - SentencePiece-style tokenizers of Llama 2, Mistral and Gemma: GGUF "llama" (SentencePiece
 *     BPE, pieces merged by score), and tokenizer.json files with model Unigram or BPE with
 *     byte_fallback, normalizer Prepend("▁") / Replace(" ", "▁"), pre-tokenizer Metaspace or
 *     Gemma's Split(" "), decoders Replace / ByteFallback / Fuse / Strip / Metaspace.
 *
 * Encoding pipeline (the same order as HF tokenizers):
 *   1. added tokens (special and not) are split out of the raw text first, longest match wins;
 *   2. the normalizer (NFC when tokenizer.json says so; for SentencePiece shapes Prepend and
 *      Replace) runs on the remaining pieces;
 *   3. byte-level: the Split pre-tokenizer's regex cuts words: the Qwen2, Llama-3 and GPT-2
 *      regexes run as hand-written matchers, any other verbatim from the file on PCRE2
 *      (UTF+UCP, with \s meaning Unicode White_Space as in Oniguruma, which HF uses);
 *      SentencePiece: Metaspace turns spaces into U+2581 ("▁"), prepends one by its
 *      prepend_scheme and, with `split`, cuts before each;
 *   4. byte-level: each word's bytes are mapped through the ByteLevel table and merged by merge
 *      rank (with `ignore_merges`, a word that is itself in the vocab is taken whole);
 *      SentencePiece: the characters are merged by merge rank (tokenizer.json BPE) or by the
 *      best score of the merged piece (GGUF llama), or segmented by Viterbi over the piece
 *      scores (Unigram); an unknown character becomes its <0xXX> byte tokens (byte_fallback),
 *      else unk (tok_sp.c has the details);
 *   5. the post-processor adds template tokens (e.g. Llama-3's <|begin_of_text|>, Llama-2's
 *      <s>) when asked.
 * A tokenizer is immutable after load and safe to use from many threads.
 *
 * Decoding follows HF's decode(): each token's string (an added token's content, else the model
 * vocab string) goes through the decoder — ByteLevel: the inverse table (a string whose
 * characters are not all in the table decodes to its own bytes, and ASCII special tokens like
 * "<|im_end|>" to themselves); SentencePiece: "▁" -> " ", <0xXX> -> that byte, one leading space
 * of the text dropped (Strip, or GGUF add_space_prefix), Metaspace's first-token rule — and the
 * joined bytes are made valid UTF-8 the way Rust's String::from_utf8_lossy does (one U+FFFD per
 * maximal invalid subsequence).
 *
 * Known differences from HF, all outside what the supported checkpoints use: tokenizer.json's
 * truncation/padding settings are ignored; letter/number classes follow utf8proc's Unicode
 * version for the known regexes and PCRE2's for others (HF: Oniguruma's), which can differ only
 * for recently assigned characters; \S inside a character class keeps PCRE2's meaning; a run of
 * byte tokens that is not valid UTF-8 gives one U+FFFD per maximal invalid subsequence (HF's
 * ByteFallback: one per byte token); with a SentencePiece-style model, added tokens marked
 * `normalized` are matched after Prepend/Replace, and the Metaspace "first" scheme looks at the
 * segment's start in the text.
 * The implementation is in tokenizer.c (core, GGUF), tok_json.c (tokenizer.json) and tok_sp.c
 * (SentencePiece text rules and models).
 */
#ifndef FRUGAL_TOKENIZER_H
#define FRUGAL_TOKENIZER_H

#include "base/base.h"

typedef struct fr_tokenizer fr_tokenizer;

/* From an HF tokenizer.json file (at most 64 MB). Errors name the file and the problem; an
 * unsupported component (a model other than BPE and Unigram, a normalizer other than NFC /
 * Prepend / Replace, a Precompiled normalizer, a WordPiece model, ...) is an error naming it. */
fr_tokenizer *fr_tokenizer_load_json(const char *path, fr_err *err);
/* The same from tokenizer.json text in memory; `name` is used in error messages. */
fr_tokenizer *fr_tokenizer_from_json(const char *name, const char *json, size_t len, fr_err *err);

/* From a GGUF vocabulary (tokenizer.ggml.* keys). With model "llama" (SentencePiece BPE: Llama 2,
 * Mistral, Gemma GGUFs) the tokens are SentencePiece pieces with `scores`: each text segment
 * between control / user-defined / unknown tokens gets a U+2581 prefix (unless no_space_prefix),
 * spaces become U+2581, and adjacent pieces merge by the best score of the merged piece (types
 * normal and user-defined only); a character that is no piece becomes its <0xXX> byte tokens;
 * decoding turns U+2581 into spaces, byte tokens into bytes and drops the first leading space
 * (with the prefix); merges and `pre` are not used. Otherwise (byte-level BPE): `pre` is
 * tokenizer.ggml.pre; known names map
 * to the pre-tokenizer of their tokenizer.json files: "qwen2" / "deepseek-r1-qwen" (Qwen2 regex,
 * NFC), "llama-bpe" / "llama3" / "llama-v3" (Llama-3 regex, ignore_merges), "gpt2" / "gpt-2" /
 * "default" (GPT-2 regex); an unknown name is an error that names it. token_types: 1 normal, 2 unknown, 3 control, 4 user-defined,
 * 5 unused, 6 byte (may be NULL = all normal); control and user-defined tokens are added tokens
 * (matched in the text before BPE), control ones are special. merges: "a b" strings in rank
 * order. token_lens / merge_lens may be NULL for NUL-terminated strings. add_bos: the BOS id is
 * prepended when fr_tokenize is called with add_special. */
typedef struct fr_vocab_spec {
    int n_tokens;                /* tokenizer.ggml.tokens count; ids are 0..n_tokens-1 */
    const char *const *tokens;   /* token strings (byte-level mapped, as stored) */
    const size_t *token_lens;    /* their byte lengths, or NULL */
    const int32_t *token_types;  /* tokenizer.ggml.token_type, or NULL */
    int n_merges;                /* tokenizer.ggml.merges count */
    const char *const *merges;   /* "left right" strings, rank order */
    const size_t *merge_lens;    /* their byte lengths, or NULL */
    const char *pre;             /* tokenizer.ggml.pre, or NULL for "default" */
    int bos_id, eos_id, pad_id;  /* -1 when absent (pad_id is not used by the tokenizer) */
    bool add_bos;                /* tokenizer.ggml.add_bos_token */
    /* tokenizer.ggml.model "llama" (SentencePiece BPE) only: */
    const char *model;           /* tokenizer.ggml.model: NULL or "gpt2" byte-level, "llama" */
    const float *scores;         /* tokenizer.ggml.scores, or NULL (all 0) */
    bool add_eos;                /* tokenizer.ggml.add_eos_token: EOS appended with add_special */
    bool no_space_prefix;        /* tokenizer.ggml.add_space_prefix = false */
} fr_vocab_spec;
fr_tokenizer *fr_tokenizer_from_vocab(const fr_vocab_spec *spec, fr_err *err);

void fr_tokenizer_free(fr_tokenizer *t);

/* Encode UTF-8 text. add_special: apply the post-processor (BOS for Llama-3), as HF's
 * Tokenizer.encode(text) does by default. Returns 0 and a malloc'd array in *ids, or -1 with err
 * set (e.g. invalid UTF-8). */
int fr_tokenize(const fr_tokenizer *t, const char *text, size_t len, bool add_special,
                int32_t **ids, size_t *n_ids, fr_err *err);

int fr_tokenizer_n_vocab(const fr_tokenizer *t);
int fr_tokenizer_bos(const fr_tokenizer *t); /* -1 if none */
int fr_tokenizer_eos(const fr_tokenizer *t); /* -1 if none */
/* Id of a token given its exact (stored) string, e.g. "<|im_end|>"; -1 if absent. */
int fr_tokenizer_find(const fr_tokenizer *t, const char *token);
bool fr_tokenizer_is_special(const fr_tokenizer *t, int id); /* control / special added token */
/* Content string of a special/added token (e.g. "<|begin_of_text|>"), else NULL. */
const char *fr_tokenizer_token_str(const fr_tokenizer *t, int id);

/* The raw bytes a token decodes to (the ByteLevel inverse of its string, as above; for ASCII
 * special tokens their content). Returns the byte count written (<= cap; a longer token is
 * cut), or -1 for an id out of range. */
int fr_token_bytes(const fr_tokenizer *t, int id, char *out, size_t cap);
/* The same without copying: a pointer into the tokenizer (valid while it lives) and the length;
 * NULL for an id out of range. */
const char *fr_token_data(const fr_tokenizer *t, int id, size_t *len);

/* Decode ids to text like HF's decode(ids, skip_special_tokens): bytes joined, invalid UTF-8
 * replaced by U+FFFD; ids out of range are skipped. Returns a malloc'd string. */
char *fr_detokenize(const fr_tokenizer *t, const int32_t *ids, size_t n, bool skip_special);
/* The same, appended to *out (keeps NUL bytes that a C string would cut). */
void fr_detokenize_append(const fr_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                          fr_buf *out);

/* Streaming decoder: feed one id at a time; emits only complete UTF-8 characters, holding back a
 * partial sequence until the next token completes it (or it can never be valid, then U+FFFD).
 * The concatenation of all pushes and the flush equals fr_detokenize of the same ids.
 * Zero-initialise it (fr_detok d = {0}) before the first push. */
typedef struct fr_detok {
    char pend[8]; /* bytes of an incomplete UTF-8 sequence (at most 3) */
    int n_pend;   /* how many */
    int n_tok;    /* tokens decoded so far (SentencePiece decoders treat the first specially) */
} fr_detok;
/* Appends decoded text for `id` to *out. */
void fr_detok_push(const fr_tokenizer *t, fr_detok *d, int id, bool skip_special, fr_buf *out);
/* End of stream: a held-back incomplete sequence becomes U+FFFD; d is ready for reuse. */
void fr_detok_flush(fr_detok *d, fr_buf *out);

#endif
