/* tokenizer.c — byte-level BPE (HF tokenizers' BPE model + ByteLevel), see tokenizer.h.
 *
 * Design.
 *   Both loaders (tok_json.c for tokenizer.json, fr_tokenizer_from_vocab below for GGUF) describe
 *   the tokenizer in a neutral tok_build (model vocab, merges, added tokens, regex stages, flags,
 *   template ids) and fr_tok_build_finish() turns it into the immutable fr_tokenizer:
 *     - per id: the stored string, the decoded bytes (the ByteLevel decoder's per-token rule,
 *       applied to added tokens' content too, as HF's decode does), flags (model / added /
 *       special); all strings live in one blob;
 *     - hash maps: model-vocab string -> id, added content -> added index, and
 *       (left id, right id) -> (rank, merged id) for the merges;
 *     - two byte tries of added tokens (matched on the raw text / on the normalized text, by the
 *       tokens' `normalized` flag), searched leftmost-longest like HF's aho-corasick;
 *     - the pre-tokenizer as a list of stages. A stage whose regex is byte-for-byte the GPT-2,
 *       Llama-3 or Qwen2 one runs a hand-written matcher (split_known: the alternatives in the
 *       regex's order, Unicode classes from utf8proc); any other regex runs on PCRE2 (UTF+UCP,
 *       JIT when available) with `\s`/`\S` rewritten to Oniguruma's Unicode definition
 *       (White_Space: U+0009-000D, U+0085, Z*) — HF uses Oniguruma. Tests and the fuzzer check
 *       the matchers against PCRE2.
 *   NFC runs only on the segments around characters it may change (fr_tok_nfc); most text is
 *   left alone without calling utf8proc.
 *   Encoding state lives in a per-call tok_ctx (PCRE2 match data, BPE scratch, a word cache for
 *   texts of 2 KB and more), so a loaded tokenizer is shared read-only between threads.
 *   BPE per word: symbols in a linked list over an array and a binary min-heap of candidate
 *   merges keyed (rank, position) — the lowest rank merges first, leftmost on ties, exactly HF's
 *   Word::merge_all — O(n log n) per word; a popped entry whose pair changed since it was queued
 *   is skipped (a rank names exactly one pair).
 *   Decoding replaces invalid UTF-8 by U+FFFD per maximal invalid subsequence, the rule of Rust's
 *   String::from_utf8_lossy; the streaming decoder holds back only an incomplete-but-valid prefix.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "model/tok_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ------------------------------------------------------------------------------------------ */
/* Small helpers                                                                               */

/* 64-bit hash of a byte string (multiply-mix over 8-byte words). */
static uint64_t tok_hash(const void *p, size_t n) {
    const uint8_t *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    for (size_t i = 0; i < n; i++) w |= (uint64_t)s[i] << (8 * i);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 32);
}

/* Decode one UTF-8 character of s[0..n) (n >= 1). Returns its length and sets *cp, or 0 when the
 * bytes are not a valid character. */
static int tok_utf8_dec(const uint8_t *s, size_t n, uint32_t *cp) {
    uint8_t b = s[0];
    if (b < 0x80) { *cp = b; return 1; }
    int len;
    uint32_t c, lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) { len = 2; c = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) {
        len = 3; c = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4; c = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else return 0;
    if ((size_t)len > n) return 0;
    for (int i = 1; i < len; i++) {
        uint8_t x = s[i];
        if (x < lo || x > hi) return 0;
        lo = 0x80; hi = 0xBF;
        c = (c << 6) | (x & 0x3F);
    }
    *cp = c;
    return len;
}

/* fr_utf8_valid with an ASCII fast path (8 bytes at a time): the same acceptance (no overlongs,
 * no surrogates, nothing above U+10FFFF). */
bool fr_tok_utf8_valid(const char *s, size_t n) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        int l = tok_utf8_dec(p + i, n - i, &cp);
        if (!l) return false;
        i += (size_t)l;
    }
    return true;
}

static int tok_utf8_enc(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the 68 others to
 * U+0100.. in byte order. */
static bool tok_bl_printable(uint32_t b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
uint32_t fr_tok_byte_to_cp(uint8_t b) {
    if (tok_bl_printable(b)) return b;
    if (b <= 0x20) return 256u + b;
    if (b >= 0x7F && b <= 0xA0) return 256u + 33u + (b - 0x7Fu);
    return 256u + 67u; /* 0xAD */
}
int fr_tok_cp_to_byte(uint32_t cp) {
    if (cp < 256) return tok_bl_printable(cp) ? (int)cp : -1;
    if (cp >= 256 + 68) return -1;
    uint32_t k = cp - 256;
    if (k < 33) return (int)k;
    if (k < 67) return (int)(0x7F + (k - 33));
    return 0xAD;
}

/* Unicode White_Space (Rust's char::is_whitespace, Oniguruma's \s). */
static bool tok_is_ws(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* Rust regex's Unicode \w, approximated with general categories (letters, marks, decimal and
 * letter numbers, connector punctuation, ZWNJ/ZWJ). */
static bool tok_is_word(uint32_t c) {
    if (c == 0x200C || c == 0x200D) return true;
    switch (utf8proc_category((utf8proc_int32_t)c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_PC:
        return true;
    default:
        return false;
    }
}

/* Last character of valid UTF-8 s[0..n) (n >= 1). */
static uint32_t tok_last_char(const char *s, size_t n, size_t *start) {
    size_t i = n - 1;
    while (i > 0 && ((uint8_t)s[i] & 0xC0) == 0x80) i--;
    uint32_t cp = 0;
    if (!tok_utf8_dec((const uint8_t *)s + i, n - i, &cp)) cp = 0xFFFD;
    if (start) *start = i;
    return cp;
}

/* A printable, quoted, shortened copy of a token for error messages. */
const char *fr_tok_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0;
    buf[o++] = '"';
    for (size_t i = 0; i < n && o + 8 < cap; i++) {
        uint8_t c = (uint8_t)s[i];
        if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') buf[o++] = (char)c;
        else o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        if (i + 1 < n && o + 8 >= cap) {
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
    }
    buf[o++] = '"';
    buf[o] = 0;
    return buf;
}

/* ------------------------------------------------------------------------------------------ */
/* String map: open addressing; a slot holds (hash high 32 bits << 32) | (value + 1).            */

typedef const char *(*tok_key_fn)(const fr_tokenizer *t, uint32_t v, uint32_t *len);

static const char *key_vocab(const fr_tokenizer *t, uint32_t v, uint32_t *len) {
    *len = t->ent[v].str_len;
    return t->blob + t->ent[v].str_off;
}
static const char *key_added(const fr_tokenizer *t, uint32_t v, uint32_t *len) {
    *len = t->added[v].len;
    return t->blob + t->added[v].off;
}

static void smap_init(tok_smap *m, size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 16) cap *= 2;
    m->slot = fr_xcalloc(cap, sizeof *m->slot);
    m->mask = (uint32_t)(cap - 1);
}

static int64_t smap_get(const fr_tokenizer *t, const tok_smap *m, tok_key_fn key, const char *s,
                        size_t n) {
    if (!m->slot) return -1;
    uint64_t h = tok_hash(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t e = m->slot[i];
        if (!e) return -1;
        if ((uint32_t)(e >> 32) != tag) continue;
        uint32_t v = (uint32_t)e - 1, kl;
        const char *k = key(t, v, &kl);
        if (kl == n && memcmp(k, s, n) == 0) return v;
    }
}

/* Insert or replace (the last insertion of a key wins, like a serde HashMap). */
static void smap_put(const fr_tokenizer *t, tok_smap *m, tok_key_fn key, const char *s, size_t n,
                     uint32_t v) {
    uint64_t h = tok_hash(s, n);
    uint32_t tag = (uint32_t)(h >> 32);
    for (uint32_t i = (uint32_t)h & m->mask;; i = (i + 1) & m->mask) {
        uint64_t e = m->slot[i];
        if (e && (uint32_t)(e >> 32) == tag) {
            uint32_t kl;
            const char *k = key(t, (uint32_t)e - 1, &kl);
            if (kl == n && memcmp(k, s, n) == 0) {
                m->slot[i] = ((uint64_t)tag << 32) | (v + 1);
                return;
            }
            continue;
        }
        if (!e) {
            m->slot[i] = ((uint64_t)tag << 32) | (v + 1);
            return;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Merge map: (left << 32 | right) -> (rank, merged id).                                        */

static inline uint32_t merge_slot0(uint64_t key, uint32_t mask) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 40) & mask;
}

static inline const tok_merge *merge_get(const fr_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = merge_slot0(key, t->merge_mask);; i = (i + 1) & t->merge_mask) {
        const tok_merge *m = &t->merges[i];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

static void merge_put(fr_tokenizer *t, int32_t a, int32_t b, uint32_t rank, int32_t out) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    for (uint32_t i = merge_slot0(key, t->merge_mask);; i = (i + 1) & t->merge_mask) {
        tok_merge *m = &t->merges[i];
        if (m->key == key || m->key == UINT64_MAX) {
            m->key = key;
            m->rank = rank;
            m->out = out;
            return;
        }
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Added-token tries                                                                            */

static void trie_add(tok_matcher *m, const char *s, size_t n, int32_t added_idx, int *cap) {
    FR_ASSERT(n > 0);
    uint8_t b0 = (uint8_t)s[0];
    if (m->root[b0] < 0) {
        if (m->n_nodes == *cap) {
            *cap = *cap ? *cap * 2 : 64;
            m->nodes = fr_xrealloc(m->nodes, (size_t)*cap * sizeof *m->nodes);
        }
        m->nodes[m->n_nodes] = (tok_trie_node){-1, -1, -1, b0};
        m->root[b0] = m->n_nodes++;
    }
    int32_t nd = m->root[b0];
    for (size_t i = 1; i < n; i++) {
        uint8_t b = (uint8_t)s[i];
        int32_t ch = m->nodes[nd].child;
        while (ch >= 0 && m->nodes[ch].byte != b) ch = m->nodes[ch].sibling;
        if (ch < 0) {
            if (m->n_nodes == *cap) {
                *cap *= 2;
                m->nodes = fr_xrealloc(m->nodes, (size_t)*cap * sizeof *m->nodes);
            }
            ch = m->n_nodes++;
            m->nodes[ch] = (tok_trie_node){-1, m->nodes[nd].child, -1, b};
            m->nodes[nd].child = ch;
        }
        nd = ch;
    }
    m->nodes[nd].added = added_idx; /* a later duplicate replaces an earlier one */
}

/* ------------------------------------------------------------------------------------------ */
/* Regex                                                                                        */

/* Rewrites \s and \S to Oniguruma's Unicode meaning (White_Space = U+0009-000D, U+0085, Z*).
 * PCRE2's UCP \s also matches U+180E; the class below does not. \S inside a class is left as is. */
static void regex_rewrite(const char *re, size_t n, fr_buf *out) {
    static const char ws_in[] = "\\x{9}-\\x{d}\\x{85}\\p{Z}";
    static const char ws_out[] = "[\\x{9}-\\x{d}\\x{85}\\p{Z}]";
    static const char nws_out[] = "[^\\x{9}-\\x{d}\\x{85}\\p{Z}]";
    bool in_class = false;
    size_t i = 0;
    while (i < n) {
        char c = re[i];
        if (c == '\\' && i + 1 < n) {
            char d = re[i + 1];
            if (d == 'Q') { /* \Q...\E quotes literally */
                size_t j = i + 2;
                while (j < n && !(re[j] == '\\' && j + 1 < n && re[j + 1] == 'E')) j++;
                j = j < n ? j + 2 : n;
                fr_buf_append(out, re + i, j - i);
                i = j;
                continue;
            }
            if (d == 's') {
                fr_buf_puts(out, in_class ? ws_in : ws_out);
                i += 2;
                continue;
            }
            if (d == 'S' && !in_class) {
                fr_buf_puts(out, nws_out);
                i += 2;
                continue;
            }
            fr_buf_append(out, re + i, 2);
            i += 2;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            fr_buf_append(out, re + i, 1);
            i++;
            if (i < n && re[i] == '^') fr_buf_append(out, re + i++, 1);
            if (i < n && re[i] == ']') fr_buf_append(out, re + i++, 1);
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && re[i + 1] == ':') { /* [:alpha:] */
            size_t j = i + 2;
            while (j + 1 < n && !(re[j] == ':' && re[j + 1] == ']')) j++;
            j = j + 1 < n ? j + 2 : n;
            fr_buf_append(out, re + i, j - i);
            i = j;
            continue;
        }
        if (in_class && c == ']') in_class = false;
        fr_buf_append(out, re + i, 1);
        i++;
    }
}

static pcre2_code *regex_compile(const char *name, const char *re, size_t n, bool literal,
                                 fr_err *err) {
    int ec = 0;
    PCRE2_SIZE eo = 0;
    pcre2_code *code;
    if (literal) {
        code = pcre2_compile((PCRE2_SPTR)re, n, PCRE2_UTF | PCRE2_LITERAL, &ec, &eo, NULL);
    } else {
        fr_buf b = {0};
        regex_rewrite(re, n, &b);
        code = pcre2_compile((PCRE2_SPTR)(b.data ? b.data : ""), b.len, PCRE2_UTF | PCRE2_UCP, &ec,
                             &eo, NULL);
        fr_buf_free(&b);
    }
    if (!code) {
        PCRE2_UCHAR msg[200];
        pcre2_get_error_message(ec, msg, sizeof msg);
        char q[80];
        fr_err_set(err, "%s: pre-tokenizer regex %s: %s", name, fr_tok_quote(re, n, q, sizeof q),
                   (const char *)msg);
        return NULL;
    }
    (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); /* falls back to the interpreter */
    return code;
}

/* The pre-tokenizer regexes of known checkpoints (tokenizer.json verbatim). */
#define FR_RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define FR_RE_QWEN2                                                                              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*" \
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define FR_RE_LLAMA3                                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"                       \
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* ------------------------------------------------------------------------------------------ */
/* Hand-written splitters for the known regexes                                                 */

enum { CL_L = 1, CL_N = 2, CL_WS = 4, CL_NL = 8 }; /* \p{L}, \p{N}, \s, [\r\n]; 0 = other */

static inline int cp_class(uint32_t cp) {
    if (cp < 0x80) {
        if ((uint32_t)((cp | 0x20) - 'a') < 26) return CL_L;
        if ((uint32_t)(cp - '0') < 10) return CL_N;
        if (cp == '\n' || cp == '\r') return CL_WS | CL_NL;
        if (cp == ' ' || (cp >= 9 && cp <= 13)) return CL_WS;
        return 0;
    }
    if ((cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xAC00 && cp <= 0xD7A3) ||
        (cp >= 0x3041 && cp <= 0x3096) || (cp >= 0x30A1 && cp <= 0x30FA))
        return CL_L; /* CJK ideographs, Hangul syllables, kana: all Lo */
    if (tok_is_ws(cp)) return CL_WS;
    int c = utf8proc_category((utf8proc_int32_t)cp);
    if (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) return CL_L;
    if (c >= UTF8PROC_CATEGORY_ND && c <= UTF8PROC_CATEGORY_NO) return CL_N;
    return 0;
}

/* The character at s[i] (valid UTF-8, i < n): its code point and length. */
static inline size_t cp_at(const uint8_t *s, size_t i, uint32_t *cp) {
    uint8_t b = s[i];
    if (b < 0x80) { *cp = b; return 1; }
    if (b < 0xE0) { *cp = (uint32_t)(b & 0x1F) << 6 | (s[i + 1] & 0x3F); return 2; }
    if (b < 0xF0) {
        *cp = (uint32_t)(b & 0x0F) << 12 | (uint32_t)(s[i + 1] & 0x3F) << 6 | (s[i + 2] & 0x3F);
        return 3;
    }
    *cp = (uint32_t)(b & 0x07) << 18 | (uint32_t)(s[i + 1] & 0x3F) << 12 |
          (uint32_t)(s[i + 2] & 0x3F) << 6 | (s[i + 3] & 0x3F);
    return 4;
}

static inline int class_at(const uint8_t *s, size_t i, size_t *len) {
    uint32_t cp;
    *len = cp_at(s, i, &cp);
    return cp_class(cp);
}

/* End of the run of characters whose class satisfies (class & mask) == want, from i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int mask, int want) {
    while (i < n) {
        size_t l;
        if ((class_at(s, i, &l) & mask) != want) break;
        i += l;
    }
    return i;
}

/* Contractions 's 't 're 've 'm 'll 'd after the apostrophe at i (case-insensitively when
 * `fold`, where U+017F LONG S matches s as in Unicode case folding). Returns the end or 0. */
static size_t contraction(const uint8_t *s, size_t n, size_t i, bool fold) {
    if (i + 1 >= n) return 0;
    uint32_t c1, c2;
    size_t l1 = cp_at(s, i + 1, &c1);
    if (fold) c1 = c1 == 0x17F ? 's' : (c1 >= 'A' && c1 <= 'Z') ? c1 | 0x20 : c1;
    if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 1 + l1;
    if ((c1 == 'r' || c1 == 'v' || c1 == 'l') && i + 1 + l1 < n) {
        size_t l2 = cp_at(s, i + 1 + l1, &c2);
        if (fold && c2 >= 'A' && c2 <= 'Z') c2 |= 0x20;
        if (c2 == (c1 == 'l' ? 'l' : 'e')) return i + 1 + l1 + l2;
    }
    return 0;
}

/* Whitespace alternatives from i (a whitespace character): `\s*[\r\n]+` when `nl`, then
 * `\s+(?!\S)`, then `\s+`. */
static size_t split_ws(const uint8_t *s, size_t n, size_t i, bool nl) {
    size_t e = i, last = i, nl_end = 0;
    while (e < n) {
        size_t l;
        int k = class_at(s, e, &l);
        if (!(k & CL_WS)) break;
        last = e;
        e += l;
        if (k & CL_NL) nl_end = e;
    }
    if (nl && nl_end) return nl_end;
    if (e == n || last == i) return e;
    return last; /* leave the last whitespace character to go with what follows */
}

/* End of the piece that the known regex `kind` matches at i. These regexes match at every
 * position (each character is a letter, a number, whitespace or other), so pieces are
 * contiguous; alternatives are tried in the regex's order with its greedy/backtracking result. */
static size_t split_known(int kind, const uint8_t *s, size_t n, size_t i) {
    size_t l0, l1 = 0, e;
    uint32_t c0;
    l0 = cp_at(s, i, &c0);
    int k0 = cp_class(c0), k1 = -1;
    size_t p1 = i + l0;
    if (p1 < n) k1 = class_at(s, p1, &l1);
    if (c0 == '\'' && (e = contraction(s, n, i, kind != FR_SPLIT_GPT2))) return e;
    if (kind == FR_SPLIT_GPT2) {
        /* ` ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+` */
        if (c0 == ' ' && k1 >= 0 && !(k1 & CL_WS))
            return run_end(s, n, p1, CL_L | CL_N | CL_WS, k1);
        if (!(k0 & CL_WS)) return run_end(s, n, i, CL_L | CL_N | CL_WS, k0);
        return split_ws(s, n, i, false);
    }
    /* `[^\r\n\p{L}\p{N}]?\p{L}+` */
    if (k0 & CL_L) return run_end(s, n, i, CL_L, CL_L);
    if (!(k0 & (CL_NL | CL_N)) && k1 >= 0 && (k1 & CL_L)) return run_end(s, n, p1, CL_L, CL_L);
    /* `\p{N}{1,3}` (Llama-3) or `\p{N}` (Qwen2) */
    if (k0 & CL_N) {
        e = p1;
        if (kind == FR_SPLIT_LLAMA3)
            for (int k = 1; k < 3 && k1 >= 0 && (k1 & CL_N); k++) {
                e += l1;
                if (e < n) k1 = class_at(s, e, &l1);
                else k1 = -1;
            }
        return e;
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    size_t j = c0 == ' ' && k1 == 0 ? p1 : i;
    if (j == p1 || k0 == 0) {
        e = run_end(s, n, j, CL_L | CL_N | CL_WS, 0);
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }
    /* `\s*[\r\n]+|\s+(?!\S)|\s+` */
    return split_ws(s, n, i, true);
}

/* ------------------------------------------------------------------------------------------ */
/* NFC                                                                                          */

/* NFC-inert code points at or above U+0300: canonical combining class 0, NFC_QC=Yes and never
 * the second character of a canonical composition (including Hangul's algorithmic one: the V
 * and T jamo U+1161-1175, U+11A8-11C2 are excluded), so NFC leaves them alone and a
 * normalization boundary lies before each. Runs of at least 64 such assigned code points
 * (Unicode 14 data; unassigned ones count as not inert, so newer marks still go through
 * utf8proc); everything below U+0300 is inert too. Merging or dropping ranges only costs
 * speed, never correctness. */
static const uint32_t fr_nfc_inert[][2] = {
    {0x3A3, 0x482}, {0x488, 0x52F}, {0x671, 0x6D5}, {0x74D, 0x7B1}, {0x103B, 0x108C},
    {0x10D0, 0x1160}, {0x1176, 0x11A7}, {0x11C3, 0x1248}, {0x1318, 0x135A}, {0x13A0, 0x13F5}, {0x1400, 0x169C}, {0x16A0, 0x16F8},
    {0x1780, 0x17D1}, {0x1820, 0x1878}, {0x18B0, 0x18F5}, {0x1A1E, 0x1A5E}, {0x1D00, 0x1DBF},
    {0x1E00, 0x1F15}, {0x2002, 0x2064}, {0x212C, 0x218B}, {0x2190, 0x2328}, {0x232B, 0x2426},
    {0x2460, 0x2ADB}, {0x2ADD, 0x2B73}, {0x2B97, 0x2CEE}, {0x2E00, 0x2E5D}, {0x2E9B, 0x2EF3},
    {0x2F00, 0x2FD5}, {0x3041, 0x3096}, {0x309B, 0x30FF}, {0x3131, 0x318E}, {0x3190, 0x31E3},
    {0x3220, 0xA48C}, {0xA4D0, 0xA62B}, {0xA6A0, 0xA6EF}, {0xA700, 0xA7CA}, {0xA880, 0xA8C3},
    {0xAA5C, 0xAAAF}, {0xAB70, 0xABEC}, {0xAC00, 0xD7A3}, {0xD800, 0xF8FF}, {0xFB4F, 0xFBC2},
    {0xFBD3, 0xFD8F}, {0xFE00, 0xFE0F}, {0xFE76, 0xFEFC}, {0xFF01, 0xFFBE}, {0x10080, 0x100FA}, {0x10137, 0x1018E},
    {0x10400, 0x1049D}, {0x10600, 0x10736}, {0x10857, 0x1089E}, {0x10A60, 0x10A9F},
    {0x10C00, 0x10C48}, {0x11000, 0x11045}, {0x11180, 0x111BF}, {0x11400, 0x11441},
    {0x118A0, 0x118F2}, {0x11A50, 0x11A98}, {0x11AB0, 0x11AF8}, {0x11FFF, 0x12399},
    {0x12400, 0x1246E}, {0x12480, 0x12543}, {0x12F90, 0x12FF2}, {0x13000, 0x1342E},
    {0x14400, 0x14646}, {0x16800, 0x16A38}, {0x16A6E, 0x16ABE}, {0x16E40, 0x16E9A},
    {0x16F00, 0x16F4A}, {0x17000, 0x187F7}, {0x18800, 0x18CD5}, {0x1B000, 0x1B122},
    {0x1B170, 0x1B2FB}, {0x1BC00, 0x1BC6A}, {0x1CF50, 0x1CFC3}, {0x1D000, 0x1D0F5},
    {0x1D200, 0x1D241}, {0x1D300, 0x1D356}, {0x1D400, 0x1D454}, {0x1D456, 0x1D49C},
    {0x1D4C5, 0x1D505}, {0x1D552, 0x1D6A5}, {0x1D6A8, 0x1D7CB}, {0x1D7CE, 0x1DA8B},
    {0x1E800, 0x1E8C4}, {0x1E900, 0x1E943}, {0x1EC71, 0x1ECB4}, {0x1F030, 0x1F093},
    {0x1F100, 0x1F1AD}, {0x1F300, 0x1F6D7}, {0x1F700, 0x1F773}, {0x1F780, 0x1F7D8},
    {0x1F900, 0x1FA53}, {0x1FB00, 0x1FB92}, {0x20000, 0x2A6DF}, {0x2A700, 0x2B738},
    {0x2B740, 0x2B81D}, {0x2B820, 0x2CEA1}, {0x2CEB0, 0x2EBE0}, {0x30000, 0x3134A},
    {0xE0020, 0xE007F}, {0xE0100, 0xE01EF}, {0xF0000, 0xFFFFD}, {0x100000, 0x10FFFD},
};

static bool nfc_inert(uint32_t cp) {
    if (cp < 0x300) return true;
    size_t lo = 0, hi = FR_ARRAY_LEN(fr_nfc_inert);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < fr_nfc_inert[mid][0]) hi = mid;
        else if (cp > fr_nfc_inert[mid][1]) lo = mid + 1;
        else return true;
    }
    return false;
}

/* NFC of valid UTF-8. Returns NULL when the text is unchanged, else a malloc'd string.
 * Only the segments around characters that NFC may change go through utf8proc: a segment runs
 * from the inert character before such a character (a boundary) to the next inert one. */
char *fr_tok_nfc(const char *s, size_t n, size_t *out_n) {
    const uint8_t *p = (const uint8_t *)s;
    fr_buf out = {0};
    size_t i = 0, copied = 0, last_inert = SIZE_MAX;
    bool any = false;
    while (i < n) {
        if (p[i] < 0x80) {
            last_inert = i++;
            continue;
        }
        uint32_t cp = 0;
        int l = tok_utf8_dec(p + i, n - i, &cp);
        if (!l) l = 1; /* cannot happen for valid input */
        if (nfc_inert(cp)) {
            last_inert = i;
            i += (size_t)l;
            continue;
        }
        size_t start = last_inert != SIZE_MAX && last_inert >= copied ? last_inert : copied;
        size_t end = i + (size_t)l;
        while (end < n) {
            int l2 = tok_utf8_dec(p + end, n - end, &cp);
            if (!l2 || nfc_inert(cp)) break;
            end += (size_t)l2;
        }
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t r = utf8proc_map(p + start, (utf8proc_ssize_t)(end - start), &dst,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (r >= 0) {
            fr_buf_append(&out, s + copied, start - copied);
            fr_buf_append(&out, dst, (size_t)r);
            copied = end;
            any = true;
        }
        free(dst);
        i = end;
    }
    if (!any) {
        fr_buf_free(&out);
        return NULL;
    }
    fr_buf_append(&out, s + copied, n - copied);
    fr_buf_puts(&out, "");
    *out_n = out.len;
    return out.data;
}

/* ------------------------------------------------------------------------------------------ */
/* Building                                                                                     */

void fr_tok_build_free(tok_build *b) {
    free(b->vocab);
    free(b->merges);
    free(b->added);
    memset(b, 0, sizeof *b);
}

void fr_tokenizer_free(fr_tokenizer *t) {
    if (!t) return;
    free(t->ent);
    free(t->blob);
    free(t->vocab.slot);
    free(t->added_map.slot);
    free(t->added);
    free(t->m_raw.nodes);
    free(t->m_norm.nodes);
    free(t->merges);
    free(t->score);
    free(t->piece);
    free(t->piece_lens);
    for (int i = 0; i < t->n_stages; i++) pcre2_code_free(t->stages[i].re);
    free(t);
}

static uint32_t blob_add(fr_buf *blob, const char *s, size_t n) {
    uint32_t off = (uint32_t)blob->len;
    fr_buf_append(blob, s, n);
    fr_buf_append(blob, "", 1);
    return off;
}

/* Decoded bytes of a token string: the ByteLevel inverse when every character is in the table,
 * else the string's own bytes (HF's ByteLevel decoder does the same per token). */
static size_t bl_decode(const char *s, size_t n, char *out) {
    size_t o = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        int l = tok_utf8_dec((const uint8_t *)s + i, n - i, &cp);
        int b = l ? fr_tok_cp_to_byte(cp) : -1;
        if (b < 0) {
            memcpy(out, s, n);
            return n;
        }
        out[o++] = (char)b;
        i += (size_t)l;
    }
    return o;
}

fr_tokenizer *fr_tok_build_finish(const tok_build *b, fr_err *err) {
    const char *name = b->name;
    char q[96];
    /* ids and their range */
    int64_t max_id = -1;
    for (size_t i = 0; i < b->n_vocab; i++) max_id = FR_MAX(max_id, b->vocab[i].id);
    for (size_t i = 0; i < b->n_added; i++) max_id = FR_MAX(max_id, b->added[i].id);
    if (max_id < 0) {
        fr_err_set(err, "%s: empty vocabulary", name);
        return NULL;
    }
    if (max_id >= FR_TOK_MAX_VOCAB) {
        fr_err_set(err, "%s: token id %lld out of range (limit %d)", name, (long long)max_id,
                   FR_TOK_MAX_VOCAB);
        return NULL;
    }
    int n_vocab = (int)max_id + 1;
    if ((size_t)n_vocab > 4 * (b->n_vocab + b->n_added) + 4096) {
        fr_err_set(err, "%s: token ids are too sparse (max id %lld for %zu tokens)", name,
                   (long long)max_id, b->n_vocab + b->n_added);
        return NULL;
    }
    for (int i = 0; i < b->n_prefix + b->n_suffix; i++) {
        int32_t id = i < b->n_prefix ? b->prefix[i] : b->suffix[i - b->n_prefix];
        if (id < 0 || id >= n_vocab) {
            fr_err_set(err, "%s: post-processor token id %d out of range (vocab size %d)", name, id,
                       n_vocab);
            return NULL;
        }
    }
    if (b->bos >= n_vocab || b->eos >= n_vocab) {
        fr_err_set(err, "%s: %s id %d out of range (vocab size %d)", name,
                   b->bos >= n_vocab ? "bos" : "eos", b->bos >= n_vocab ? b->bos : b->eos, n_vocab);
        return NULL;
    }

    fr_tokenizer *t = fr_xcalloc(1, sizeof *t);
    t->n_vocab = n_vocab;
    t->ent = fr_xcalloc((size_t)n_vocab, sizeof *t->ent);
    t->bos = b->bos;
    t->eos = b->eos;
    t->ignore_merges = b->ignore_merges;
    t->nfc = b->nfc;
    t->fuse_unk = b->fuse_unk;
    t->unk_id = -1;
    t->model = b->model;
    t->byte_fallback = b->byte_fallback;
    t->sp = b->sp;
    t->sp_prepend = b->sp_prepend;
    t->sp_space = b->sp_space;
    t->ms = b->ms;
    t->ms_prepend = b->ms_prepend;
    t->ms_split = b->ms_split;
    t->sp_dec = b->sp_dec;
    memset(t->m_raw.root, 0xFF, sizeof t->m_raw.root);
    memset(t->m_norm.root, 0xFF, sizeof t->m_norm.root);
    fr_buf blob = {0};
    char *tmp = NULL;

    /* model vocab */
    size_t max_len = 0;
    for (size_t i = 0; i < b->n_vocab; i++) {
        const tb_vocab *v = &b->vocab[i];
        if (v->n > FR_TOK_MAX_TOKEN_LEN) {
            fr_err_set(err, "%s: vocab token %s too long (%zu bytes)", name,
                       fr_tok_quote(v->s, v->n, q, sizeof q), v->n);
            goto fail;
        }
        tok_entry *e = &t->ent[v->id];
        if (e->flags & FR_TOKF_MODEL) {
            fr_err_set(err, "%s: vocab id %d given to two tokens (%s and another)", name, v->id,
                       fr_tok_quote(v->s, v->n, q, sizeof q));
            goto fail;
        }
        e->flags |= FR_TOKF_MODEL;
        e->str_off = blob_add(&blob, v->s, v->n);
        e->str_len = (uint32_t)v->n;
        max_len = FR_MAX(max_len, v->n);
    }
    t->max_vocab_len = (uint32_t)max_len;

    /* added tokens */
    if (b->n_added) t->added = fr_xcalloc(b->n_added, sizeof *t->added);
    for (size_t i = 0; i < b->n_added; i++) {
        const tb_added *a = &b->added[i];
        if (a->s.n == 0 || a->s.n > FR_TOK_MAX_TOKEN_LEN) {
            fr_err_set(err, "%s: added token id %d has %s content", name, a->id,
                       a->s.n ? "too long a" : "an empty");
            goto fail;
        }
        tok_entry *e = &t->ent[a->id];
        if (e->flags & FR_TOKF_ADDED) {
            fr_err_set(err, "%s: added token id %d listed twice", name, a->id);
            goto fail;
        }
        tok_added *d = &t->added[t->n_added++];
        d->id = a->id;
        d->off = blob_add(&blob, a->s.s, a->s.n);
        d->len = (uint32_t)a->s.n;
        d->special = a->special;
        d->lstrip = a->lstrip;
        d->rstrip = a->rstrip;
        d->single_word = a->single_word;
        d->normalized = a->normalized;
        d->moff = d->off;
        d->mlen = d->len;
        if (a->normalized && t->nfc) {
            if (!fr_utf8_valid(a->s.s, a->s.n)) {
                fr_err_set(err, "%s: added token id %d is not valid UTF-8", name, a->id);
                goto fail;
            }
            size_t nn = 0;
            char *ns = fr_tok_nfc(a->s.s, a->s.n, &nn);
            if (ns) {
                if (nn == 0) {
                    free(ns);
                    fr_err_set(err, "%s: added token id %d normalizes to nothing", name, a->id);
                    goto fail;
                }
                d->moff = blob_add(&blob, ns, nn);
                d->mlen = (uint32_t)nn;
                free(ns);
            }
        }
        e->flags |= FR_TOKF_ADDED | (a->special ? FR_TOKF_SPECIAL : 0);
        e->con_off = d->off;
        e->con_len = d->len;
        if (!(e->flags & FR_TOKF_MODEL)) {
            e->str_off = d->off;
            e->str_len = d->len;
        }
    }

    /* decoded bytes: HF's decode() hands every token's string (an added token's content, else
     * the model's) to the ByteLevel decoder, which maps it back to bytes */
    tmp = fr_xmalloc(2 * FR_TOK_MAX_TOKEN_LEN + 8);
    for (int id = 0; id < n_vocab; id++) {
        tok_entry *e = &t->ent[id];
        if (!(e->flags & (FR_TOKF_ADDED | FR_TOKF_MODEL))) continue;
        bool added = e->flags & FR_TOKF_ADDED;
        const char *ts = blob.data + (added ? e->con_off : e->str_off);
        size_t tl = added ? e->con_len : e->str_len;
        size_t dl = b->sp_dec ? fr_tok_sp_decode(b->sp_dec, false, ts, tl, tmp)
                              : bl_decode(ts, tl, tmp);
        e->dec_off = blob_add(&blob, tmp, dl);
        e->dec_len = (uint32_t)dl;
    }
    if (blob.len > UINT32_MAX - 1) {
        fr_err_set(err, "%s: vocabulary too large", name);
        goto fail;
    }
    t->blob = blob.data;
    blob.data = NULL;
    if (!t->blob) t->blob = fr_xstrdup("");

    /* maps */
    smap_init(&t->vocab, b->n_vocab);
    for (size_t i = 0; i < b->n_vocab; i++) {
        const tok_entry *e = &t->ent[b->vocab[i].id];
        smap_put(t, &t->vocab, key_vocab, t->blob + e->str_off, e->str_len,
                 (uint32_t)b->vocab[i].id);
    }
    smap_init(&t->added_map, (size_t)t->n_added);
    int cap_raw = 0, cap_norm = 0;
    for (int i = 0; i < t->n_added; i++) {
        const tok_added *d = &t->added[i];
        smap_put(t, &t->added_map, key_added, t->blob + d->off, d->len, (uint32_t)i);
        /* content that is not valid UTF-8 (possible in GGUF) could cut the text inside a
         * character; HF cannot hold such a token, so it is never matched (it still decodes) */
        if (!fr_utf8_valid(t->blob + d->off, d->len)) continue;
        if (d->normalized)
            trie_add(&t->m_norm, t->blob + d->moff, d->mlen, i, &cap_norm);
        else
            trie_add(&t->m_raw, t->blob + d->off, d->len, i, &cap_raw);
    }

    /* byte symbols */
    for (int by = 0; by < 256; by++) {
        char s[4];
        int l = tok_utf8_enc(fr_tok_byte_to_cp((uint8_t)by), s);
        t->bl_len[by] = (uint8_t)l;
        memcpy(t->bl_utf8[by], s, 2);
        t->byte_id[by] = (int32_t)smap_get(t, &t->vocab, key_vocab, s, (size_t)l);
    }
    if (b->unk.s) {
        int64_t u = smap_get(t, &t->vocab, key_vocab, b->unk.s, b->unk.n);
        if (u < 0) {
            fr_err_set(err, "%s: unk_token %s is not in the vocab", name,
                       fr_tok_quote(b->unk.s, b->unk.n, q, sizeof q));
            goto fail;
        }
        t->unk_id = (int32_t)u;
    }
    if (b->model == FR_TOKM_UNIGRAM && b->unk_id >= 0) {
        if (b->unk_id >= n_vocab || !(t->ent[b->unk_id].flags & FR_TOKF_MODEL)) {
            fr_err_set(err, "%s: unk_id %d is not in the vocab", name, b->unk_id);
            goto fail;
        }
        t->unk_id = b->unk_id;
    }
    if (fr_tok_sp_finish(t, b, err)) goto fail;

    /* merges */
    {
        size_t cap = 16;
        while (cap < 2 * b->n_merges + 16) cap *= 2;
        t->merges = fr_xmalloc(cap * sizeof *t->merges);
        for (size_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
        t->merge_mask = (uint32_t)(cap - 1);
        for (size_t r = 0; r < b->n_merges; r++) {
            const tb_merge *m = &b->merges[r];
            if (m->a.n > FR_TOK_MAX_TOKEN_LEN || m->b.n > FR_TOK_MAX_TOKEN_LEN) {
                fr_err_set(err, "%s: merges[%zu]: token too long", name, r);
                goto fail;
            }
            int64_t ia = smap_get(t, &t->vocab, key_vocab, m->a.s, m->a.n);
            int64_t ib = smap_get(t, &t->vocab, key_vocab, m->b.s, m->b.n);
            if (ia < 0 || ib < 0) {
                const tb_str *bad = ia < 0 ? &m->a : &m->b;
                fr_err_set(err, "%s: merges[%zu]: token %s is not in the vocab", name, r,
                           fr_tok_quote(bad->s, bad->n, q, sizeof q));
                goto fail;
            }
            memcpy(tmp, m->a.s, m->a.n);
            memcpy(tmp + m->a.n, m->b.s, m->b.n);
            int64_t io = smap_get(t, &t->vocab, key_vocab, tmp, m->a.n + m->b.n);
            if (io < 0) {
                fr_err_set(err, "%s: merges[%zu]: merged token %s is not in the vocab", name, r,
                           fr_tok_quote(tmp, m->a.n + m->b.n, q, sizeof q));
                goto fail;
            }
            merge_put(t, (int32_t)ia, (int32_t)ib, (uint32_t)r, (int32_t)io);
        }
        t->n_merges = (int)b->n_merges;
    }

    /* pre-tokenizer stages */
    for (int i = 0; i < b->n_stages; i++) {
        const tb_stage *s = &b->stages[i];
        tok_stage *d = &t->stages[t->n_stages++];
        d->prefix_space = s->prefix_space;
        if (s->re.s && !s->literal) {
            static const struct { const char *re; int kind; } known[] = {
                {FR_RE_GPT2, FR_SPLIT_GPT2}, {FR_RE_LLAMA3, FR_SPLIT_LLAMA3},
                {FR_RE_QWEN2, FR_SPLIT_QWEN2}};
            for (size_t k = 0; k < FR_ARRAY_LEN(known); k++)
                if (s->re.n == strlen(known[k].re) && !memcmp(s->re.s, known[k].re, s->re.n))
                    d->fast = known[k].kind;
        }
        if (s->re.s) {
            d->re = regex_compile(name, s->re.s, s->re.n, s->literal, err);
            if (!d->re) goto fail;
        }
    }

    /* post-processor */
    t->n_prefix = b->n_prefix;
    t->n_suffix = b->n_suffix;
    memcpy(t->prefix, b->prefix, sizeof t->prefix);
    memcpy(t->suffix, b->suffix, sizeof t->suffix);
    free(tmp);
    return t;

fail:
    free(tmp);
    fr_buf_free(&blob);
    fr_tokenizer_free(t);
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* GGUF vocabulary                                                                              */

const char *fr_tok_gpt2_regex(void) { return FR_RE_GPT2; }

/* tokenizer.ggml.pre names -> the pre-tokenizer of the matching tokenizer.json. */
static const struct {
    const char *name;    /* tokenizer.ggml.pre value */
    const char *regex;   /* Split regex */
    bool nfc;            /* NFC normalizer */
    bool ignore_merges;  /* BPE ignore_merges */
} fr_tok_pre_table[] = {
    {"qwen2", FR_RE_QWEN2, true, false},
    {"deepseek-r1-qwen", FR_RE_QWEN2, true, false}, /* llama.cpp's alias of qwen2 */
    {"llama-bpe", FR_RE_LLAMA3, false, true},
    {"llama3", FR_RE_LLAMA3, false, true},
    {"llama-v3", FR_RE_LLAMA3, false, true},
    {"gpt2", FR_RE_GPT2, false, false},
    {"gpt-2", FR_RE_GPT2, false, false},
    {"default", FR_RE_GPT2, false, false},
};

/* The vocabulary of a GGUF `llama` (SentencePiece) tokenizer: every token in the model vocab
 * with its score, control / unknown / user-defined ones also added tokens (matched in the text
 * first, control and unknown ones special). */
static int spm_vocab(const fr_vocab_spec *spec, tok_build *b, fr_err *err) {
    for (int i = 0; i < spec->n_tokens; i++) {
        const char *s = spec->tokens[i];
        if (!s) {
            fr_err_set(err, "gguf vocab: token %d missing", i);
            return -1;
        }
        size_t n = spec->token_lens ? spec->token_lens[i] : strlen(s);
        int32_t ty = spec->token_types ? spec->token_types[i] : 1;
        double sc = spec->scores ? (double)spec->scores[i] : 0.0;
        b->vocab[b->n_vocab++] = (tb_vocab){s, n, i, sc, ty == 1 || ty == 4};
        if ((ty == 2 || ty == 3 || ty == 4) && n > 0)
            b->added[b->n_added++] = (tb_added){{s, n}, i, ty != 4, false, false, false, false};
        if (ty == 2 && !b->unk.s) b->unk = (tb_str){s, n};
    }
    b->model = FR_TOKM_SPM;
    b->byte_fallback = b->sp = b->sp_space = true;
    b->sp_prepend = spec->no_space_prefix ? FR_SPP_NONE : FR_SPP_PREPEND;
    b->sp_dec = FR_SPD_SP | FR_SPD_SPACE | FR_SPD_BYTES | (spec->no_space_prefix ? 0 : FR_SPD_STRIP1);
    return 0;
}

/* A GGUF byte-level BPE vocabulary: tokens (control / user-defined as added tokens), merges. */
static int bpe_vocab(const fr_vocab_spec *spec, int pi, tok_build *b, fr_err *err) {
    char q[96];
    for (int i = 0; i < spec->n_tokens; i++) {
        const char *s = spec->tokens[i];
        if (!s) {
            fr_err_set(err, "gguf vocab: token %d missing", i);
            return -1;
        }
        size_t n = spec->token_lens ? spec->token_lens[i] : strlen(s);
        int32_t ty = spec->token_types ? spec->token_types[i] : 1;
        if (ty == 3 || ty == 4) {
            if (n == 0) {
                fr_err_set(err, "gguf vocab: %s token %d is empty", ty == 3 ? "control" : "user",
                           i);
                return -1;
            }
            b->added[b->n_added++] = (tb_added){{s, n}, i, ty == 3, false, false, false, false};
        } else {
            b->vocab[b->n_vocab++] = (tb_vocab){s, n, i, 0.0, true};
        }
    }
    for (int i = 0; i < spec->n_merges; i++) {
        const char *m = spec->merges[i];
        size_t n = m ? (spec->merge_lens ? spec->merge_lens[i] : strlen(m)) : 0;
        const char *sp = m ? memchr(m, ' ', n) : NULL;
        if (!sp || memchr(sp + 1, ' ', n - (size_t)(sp - m) - 1)) {
            fr_err_set(err, "gguf vocab: merge %d %s is not \"a b\"", i,
                       m ? fr_tok_quote(m, n, q, sizeof q) : "(null)");
            return -1;
        }
        b->merges[b->n_merges++] = (tb_merge){{m, (size_t)(sp - m)}, {sp + 1, n - (size_t)(sp - m) - 1}};
    }
    b->ignore_merges = fr_tok_pre_table[pi].ignore_merges;
    b->nfc = fr_tok_pre_table[pi].nfc;
    b->stages[0].re.s = fr_tok_pre_table[pi].regex;
    b->stages[0].re.n = strlen(fr_tok_pre_table[pi].regex);
    b->n_stages = 1;
    return 0;
}

fr_tokenizer *fr_tokenizer_from_vocab(const fr_vocab_spec *spec, fr_err *err) {
    char q[96];
    const char *model = spec->model ? spec->model : "gpt2";
    bool llama = !strcmp(model, "llama");
    if (!llama && strcmp(model, "gpt2") != 0) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "gguf vocab: tokenizer model %s is not supported "
                    "(gpt2, llama)", fr_tok_quote(model, strlen(model), q, sizeof q));
        return NULL;
    }
    const char *pre = llama || !spec->pre ? "default" : spec->pre;
    int pi = -1;
    for (size_t i = 0; i < FR_ARRAY_LEN(fr_tok_pre_table); i++)
        if (!strcmp(pre, fr_tok_pre_table[i].name)) pi = (int)i;
    if (pi < 0) {
        fr_err_set(err, "gguf vocab: unknown pre-tokenizer %s (tokenizer.ggml.pre)",
                   fr_tok_quote(pre, strlen(pre), q, sizeof q));
        return NULL;
    }
    if (spec->n_tokens <= 0 || spec->n_tokens > FR_TOK_MAX_VOCAB || !spec->tokens) {
        fr_err_set(err, "gguf vocab: bad token count %d", spec->n_tokens);
        return NULL;
    }
    if (spec->n_merges < 0 || (spec->n_merges > 0 && !spec->merges)) {
        fr_err_set(err, "gguf vocab: bad merge count %d", spec->n_merges);
        return NULL;
    }
    tok_build b = {0};
    b.name = "gguf vocab";
    b.vocab = fr_xcalloc((size_t)spec->n_tokens, sizeof *b.vocab);
    b.added = fr_xcalloc((size_t)spec->n_tokens, sizeof *b.added);
    b.merges = fr_xcalloc((size_t)spec->n_merges + 1, sizeof *b.merges);
    b.unk_id = -1;
    fr_tokenizer *t = NULL;
    if (llama ? spm_vocab(spec, &b, err) : bpe_vocab(spec, pi, &b, err)) goto done;
    if (spec->bos_id < -1 || spec->bos_id >= spec->n_tokens || spec->eos_id < -1 ||
        spec->eos_id >= spec->n_tokens) {
        fr_err_set(err, "gguf vocab: bos/eos id (%d/%d) out of range (%d tokens)", spec->bos_id,
                   spec->eos_id, spec->n_tokens);
        goto done;
    }
    b.bos = spec->bos_id;
    b.eos = spec->eos_id;
    if (spec->add_bos) {
        if (spec->bos_id < 0) {
            fr_err_set(err, "gguf vocab: add_bos_token is set but there is no bos id");
            goto done;
        }
        b.prefix[b.n_prefix++] = spec->bos_id;
    }
    if (spec->add_eos && spec->eos_id >= 0) b.suffix[b.n_suffix++] = spec->eos_id;
    t = fr_tok_build_finish(&b, err);
done:
    fr_tok_build_free(&b);
    return t;
}

/* ------------------------------------------------------------------------------------------ */
/* Encoding                                                                                     */

#define FR_TOK_CACHE_MAX_WORD 64   /* longer words are not cached */
#define FR_TOK_CACHE_MIN_TEXT 2048 /* shorter texts use no cache */

static inline void ctx_push(tok_ctx *c, int32_t id) {
    if (c->n_ids == c->cap_ids) {
        c->cap_ids = c->cap_ids ? c->cap_ids * 2 : 64;
        c->ids = fr_xrealloc(c->ids, c->cap_ids * sizeof *c->ids);
    }
    c->ids[c->n_ids++] = id;
}

void fr_tok_push(tok_ctx *c, int32_t id) { ctx_push(c, id); }

int32_t fr_tok_vocab_id(const fr_tokenizer *t, const char *s, size_t n) {
    return (int32_t)smap_get(t, &t->vocab, key_vocab, s, n);
}

int fr_tok_char_len(uint8_t b) {
    return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
}

/* Min-heap of candidate merges; a key orders by rank, then by position (leftmost first). */
static void heap_push(tok_ctx *c, size_t *n, uint64_t x) {
    if (*n == c->cap_heap) {
        c->cap_heap = c->cap_heap ? c->cap_heap * 2 : 64;
        c->heap = fr_xrealloc(c->heap, c->cap_heap * sizeof *c->heap);
    }
    uint64_t *h = c->heap;
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= x) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = x;
}

static uint64_t heap_pop(tok_ctx *c, size_t *n) {
    uint64_t *h = c->heap, top = h[0], x = h[--*n];
    size_t i = 0, m = *n;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= m) break;
        if (l + 1 < m && h[l + 1] < h[l]) l++;
        if (x <= h[l]) break;
        h[i] = h[l];
        i = l;
    }
    if (m) h[i] = x;
    return top;
}

static inline void cand_push(tok_ctx *c, size_t *nh, uint32_t pos, int32_t a, int32_t b) {
    const tok_merge *m = merge_get(c->t, a, b);
    if (m) heap_push(c, nh, (uint64_t)m->rank << 32 | pos);
}

/* Merges the m symbols of c->sym by rank (see the design note); appends the ids. */
void fr_tok_bpe_run(tok_ctx *c, int32_t m) {
    const fr_tokenizer *t = c->t;
    tok_sym *s = c->sym;
    if (m == 0) return;
    s[m - 1].next = -1;
    if (m > 1) {
        size_t nh = 0;
        for (int32_t i = 0; i + 1 < m; i++) cand_push(c, &nh, (uint32_t)i, s[i].id, s[i + 1].id);
        while (nh) {
            uint64_t top = heap_pop(c, &nh);
            uint32_t pos = (uint32_t)top, rank = (uint32_t)(top >> 32);
            tok_sym *l = &s[pos];
            if (l->id < 0 || l->next < 0) continue;
            tok_sym *r = &s[l->next];
            /* a stale entry: the pair here changed since it was queued (a rank names one pair) */
            const tok_merge *mg = merge_get(t, l->id, r->id);
            if (!mg || mg->rank != rank) continue;
            l->id = mg->out;
            r->id = -1;
            l->next = r->next;
            if (l->next >= 0) s[l->next].prev = (int32_t)pos;
            if (l->prev >= 0) cand_push(c, &nh, (uint32_t)l->prev, s[l->prev].id, l->id);
            if (l->next >= 0) cand_push(c, &nh, pos, l->id, s[l->next].id);
        }
    }
    for (int32_t i = 0; i >= 0; i = s[i].next) ctx_push(c, s[i].id);
}

/* BPE of one word (raw bytes, each mapped through the ByteLevel table). Appends its ids. */
static void bpe_merge(tok_ctx *c, const uint8_t *w, size_t n) {
    const fr_tokenizer *t = c->t;
    if (n + 1 > c->cap_sym) {
        c->cap_sym = FR_MAX(n + 1, 2 * c->cap_sym);
        c->sym = fr_xrealloc(c->sym, c->cap_sym * sizeof *c->sym);
    }
    tok_sym *s = c->sym;
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) {
            if (t->unk_id < 0) continue; /* HF drops characters it cannot represent */
            if (t->fuse_unk && m > 0 && s[m - 1].id == t->unk_id) continue;
            id = t->unk_id;
        }
        s[m] = (tok_sym){id, m - 1, m + 1};
        m++;
    }
    fr_tok_bpe_run(c, m);
}

static void cache_grow(tok_ctx *c) {
    uint32_t old_cap = c->cache ? c->cache_mask + 1 : 0;
    uint32_t cap = old_cap ? old_cap * 2 : 1024;
    tok_centry *nc = fr_xcalloc(cap, sizeof *nc);
    for (uint32_t i = 0; i < old_cap; i++) {
        tok_centry *e = &c->cache[i];
        if (!e->hash) continue;
        uint32_t j = (uint32_t)e->hash & (cap - 1);
        while (nc[j].hash) j = (j + 1) & (cap - 1);
        nc[j] = *e;
    }
    free(c->cache);
    c->cache = nc;
    c->cache_mask = cap - 1;
}

static void bpe_word(tok_ctx *c, const char *w, size_t n) {
    const fr_tokenizer *t = c->t;
    if (n == 1) {
        int32_t id = t->byte_id[(uint8_t)w[0]];
        if (id >= 0) ctx_push(c, id);
        else if (t->unk_id >= 0) ctx_push(c, t->unk_id);
        return;
    }
    if (t->ignore_merges && n <= t->max_vocab_len) {
        /* a word that is itself in the vocab is taken whole */
        if (2 * n > c->cap_map) {
            c->cap_map = FR_MAX(2 * n, 2 * c->cap_map);
            c->map = fr_xrealloc(c->map, c->cap_map);
        }
        size_t ml = 0;
        for (size_t i = 0; i < n && ml <= t->max_vocab_len; i++) {
            uint8_t b = (uint8_t)w[i];
            c->map[ml] = t->bl_utf8[b][0];
            if (t->bl_len[b] == 2) c->map[ml + 1] = t->bl_utf8[b][1];
            ml += t->bl_len[b];
        }
        if (ml <= t->max_vocab_len) {
            int64_t id = smap_get(t, &t->vocab, key_vocab, c->map, ml);
            if (id >= 0) {
                ctx_push(c, (int32_t)id);
                return;
            }
        }
    }
    if (!c->cache || n > FR_TOK_CACHE_MAX_WORD) {
        bpe_merge(c, (const uint8_t *)w, n);
        return;
    }
    uint64_t h = tok_hash(w, n) | 1;
    uint32_t i = (uint32_t)h & c->cache_mask;
    for (;; i = (i + 1) & c->cache_mask) {
        tok_centry *e = &c->cache[i];
        if (!e->hash) break;
        if (e->hash == h && e->wlen == n && !memcmp(c->warena.data + e->woff, w, n)) {
            const int32_t *ids = (const int32_t *)(void *)(c->iarena.data + e->ioff);
            for (uint32_t k = 0; k < e->ilen; k++) ctx_push(c, ids[k]);
            return;
        }
    }
    size_t before = c->n_ids;
    bpe_merge(c, (const uint8_t *)w, n);
    if (c->warena.len + n > UINT32_MAX / 2 || c->iarena.len > UINT32_MAX / 2) return;
    tok_centry e = {h, (uint32_t)c->warena.len, (uint32_t)n, (uint32_t)c->iarena.len,
                    (uint32_t)(c->n_ids - before)};
    fr_buf_append(&c->warena, w, n);
    fr_buf_append(&c->iarena, c->ids + before, (c->n_ids - before) * sizeof(int32_t));
    c->cache[i] = e;
    if (++c->cache_used * 2 > c->cache_mask) cache_grow(c);
}

/* Pre-tokenizer stage `st` on one piece; the pieces of the last stage go to BPE. */
static int pretok(tok_ctx *c, int st, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    if (n == 0) return 0;
    if (st == t->n_stages) {
        bpe_word(c, s, n);
        return 0;
    }
    const tok_stage *g = &t->stages[st];
    char *tmp = NULL;
    int rc = 0;
    if (g->prefix_space && s[0] != ' ') {
        tmp = fr_xmalloc(n + 1);
        tmp[0] = ' ';
        memcpy(tmp + 1, s, n);
        s = tmp;
        n++;
    }
    if (!g->re) {
        rc = pretok(c, st + 1, s, n);
        free(tmp);
        return rc;
    }
    if (g->fast) {
        for (size_t pos = 0; pos < n && !rc;) {
            size_t e = split_known(g->fast, (const uint8_t *)s, n, pos);
            FR_ASSERT(e > pos && e <= n);
            rc = pretok(c, st + 1, s + pos, e - pos);
            pos = e;
        }
        free(tmp);
        return rc;
    }
    if (!c->md[st]) c->md[st] = pcre2_match_data_create_from_pattern(g->re, NULL);
    if (!c->md[st]) {
        fr_err_set(c->err, "tokenize: out of memory");
        free(tmp);
        return -1;
    }
    pcre2_match_data *md = c->md[st];
    size_t off = 0, pos = 0;
    while (pos <= n) {
        int r = pcre2_match(g->re, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, c->mctx);
        if (r == PCRE2_ERROR_JIT_STACKLIMIT && !c->jstack) {
            c->jstack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
            c->mctx = pcre2_match_context_create(NULL);
            if (c->jstack && c->mctx) {
                pcre2_jit_stack_assign(c->mctx, NULL, c->jstack);
                continue;
            }
        }
        if (r == PCRE2_ERROR_NOMATCH) break;
        if (r < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(r, msg, sizeof msg);
            fr_err_set(c->err, "tokenize: pre-tokenizer regex failed: %s", (const char *)msg);
            rc = -1;
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (ms < pos || me < ms || me > n) break; /* \K tricks; cannot happen for sane patterns */
        if (ms > off && (rc = pretok(c, st + 1, s + off, ms - off))) break;
        if (me > ms && (rc = pretok(c, st + 1, s + ms, me - ms))) break;
        off = me;
        if (me == ms) { /* empty match: step one character */
            if (me >= n) break;
            pos = me + 1;
            while (pos < n && ((uint8_t)s[pos] & 0xC0) == 0x80) pos++;
        } else {
            pos = me;
        }
    }
    if (!rc && off < n) rc = pretok(c, st + 1, s + off, n - off);
    free(tmp);
    return rc;
}

typedef int (*tok_gap_fn)(tok_ctx *c, const char *s, size_t n);

/* Splits s on added tokens (leftmost-longest, like HF's aho-corasick), pushing their ids and
 * handing the text between them to `gap`. */
static int split_added(tok_ctx *c, const tok_matcher *m, const char *s, size_t n, tok_gap_fn gap) {
    const fr_tokenizer *t = c->t;
    if (!m->n_nodes) return gap(c, s, n);
    size_t off = 0, i = 0;
    while (i < n) {
        int32_t nd = m->root[(uint8_t)s[i]];
        if (nd < 0) {
            i++;
            continue;
        }
        int32_t best = -1;
        size_t best_end = 0, j = i + 1;
        for (;;) {
            if (m->nodes[nd].added >= 0) {
                best = m->nodes[nd].added;
                best_end = j;
            }
            if (j >= n) break;
            uint8_t b = (uint8_t)s[j];
            int32_t ch = m->nodes[nd].child;
            while (ch >= 0 && m->nodes[ch].byte != b) ch = m->nodes[ch].sibling;
            if (ch < 0) break;
            nd = ch;
            j++;
        }
        if (best < 0) {
            i++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t ms = i, me = best_end;
        if (a->single_word) {
            bool word_before = ms > 0 && tok_is_word(tok_last_char(s, ms, NULL));
            uint32_t cp = 0;
            bool word_after = me < n && tok_utf8_dec((const uint8_t *)s + me, n - me, &cp) &&
                              tok_is_word(cp);
            if (word_before || word_after) { /* not a single word: skip this match */
                i = me;
                continue;
            }
        }
        if (a->lstrip) {
            while (ms > off) {
                size_t st;
                if (!tok_is_ws(tok_last_char(s, ms, &st))) break;
                ms = st;
            }
        }
        if (a->rstrip) {
            uint32_t cp;
            int l;
            while (me < n && (l = tok_utf8_dec((const uint8_t *)s + me, n - me, &cp)) &&
                   tok_is_ws(cp))
                me += (size_t)l;
        }
        if (ms > off) {
            int rc = gap(c, s + off, ms - off);
            if (rc) return rc;
        }
        ctx_push(c, a->id);
        off = i = me;
    }
    return off < n ? gap(c, s + off, n - off) : 0;
}

static int gap_normalized(tok_ctx *c, const char *s, size_t n) { return pretok(c, 0, s, n); }

int fr_tok_split_norm(tok_ctx *c, const char *s, size_t n,
                      int (*gap)(tok_ctx *c, const char *s, size_t n)) {
    return split_added(c, &c->t->m_norm, s, n, gap);
}

static int gap_raw(tok_ctx *c, const char *s, size_t n) {
    if (c->t->sp) return fr_tok_sp_segment(c, s, n);
    size_t nn = 0;
    char *ns = c->t->nfc ? fr_tok_nfc(s, n, &nn) : NULL;
    int rc = split_added(c, &c->t->m_norm, ns ? ns : s, ns ? nn : n, gap_normalized);
    free(ns);
    return rc;
}

int fr_tokenize(const fr_tokenizer *t, const char *text, size_t len, bool add_special,
                int32_t **ids, size_t *n_ids, fr_err *err) {
    *ids = NULL;
    *n_ids = 0;
    if (!text && len) {
        fr_err_set(err, "tokenize: NULL text");
        return -1;
    }
    if (len && !fr_tok_utf8_valid(text, len)) {
        fr_err_set(err, "tokenize: input is not valid UTF-8");
        return -1;
    }
    tok_ctx c = {0};
    c.t = t;
    c.err = err;
    c.text0 = text;
    c.cap_ids = len / 3 + 16;
    c.ids = fr_xmalloc(c.cap_ids * sizeof *c.ids);
    if (len >= FR_TOK_CACHE_MIN_TEXT) cache_grow(&c);
    if (add_special)
        for (int i = 0; i < t->n_prefix; i++) ctx_push(&c, t->prefix[i]);
    int rc = len ? split_added(&c, &t->m_raw, text, len, gap_raw) : 0;
    if (add_special)
        for (int i = 0; i < t->n_suffix; i++) ctx_push(&c, t->suffix[i]);
    for (int i = 0; i < FR_TOK_MAX_STAGES; i++) pcre2_match_data_free(c.md[i]);
    pcre2_match_context_free(c.mctx);
    pcre2_jit_stack_free(c.jstack);
    free(c.sym);
    free(c.heap);
    free(c.map);
    free(c.cache);
    fr_buf_free(&c.warena);
    fr_buf_free(&c.iarena);
    if (rc) {
        free(c.ids);
        return -1;
    }
    *ids = c.ids;
    *n_ids = c.n_ids;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Lookups                                                                                      */

int fr_tokenizer_n_vocab(const fr_tokenizer *t) { return t->n_vocab; }
int fr_tokenizer_bos(const fr_tokenizer *t) { return t->bos; }
int fr_tokenizer_eos(const fr_tokenizer *t) { return t->eos; }

int fr_tokenizer_find(const fr_tokenizer *t, const char *token) {
    if (!token) return -1;
    size_t n = strlen(token);
    int64_t a = smap_get(t, &t->added_map, key_added, token, n);
    if (a >= 0) return t->added[a].id;
    return (int)smap_get(t, &t->vocab, key_vocab, token, n);
}

bool fr_tokenizer_is_special(const fr_tokenizer *t, int id) {
    return id >= 0 && id < t->n_vocab && (t->ent[id].flags & FR_TOKF_SPECIAL);
}

const char *fr_tokenizer_token_str(const fr_tokenizer *t, int id) {
    if (id < 0 || id >= t->n_vocab || !(t->ent[id].flags & FR_TOKF_ADDED)) return NULL;
    return t->blob + t->ent[id].con_off;
}

const char *fr_token_data(const fr_tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->n_vocab) {
        *len = 0;
        return NULL;
    }
    *len = t->ent[id].dec_len;
    return t->blob + t->ent[id].dec_off;
}

int fr_token_bytes(const fr_tokenizer *t, int id, char *out, size_t cap) {
    size_t n;
    const char *p = fr_token_data(t, id, &n);
    if (!p) return -1;
    n = FR_MIN(n, cap);
    if (n) memcpy(out, p, n);
    return (int)n;
}

/* ------------------------------------------------------------------------------------------ */
/* Decoding                                                                                     */

static const char fr_repl[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD */

/* Appends s[0..n) to out with invalid UTF-8 replaced like Rust's from_utf8_lossy: one U+FFFD per
 * maximal prefix of a valid sequence. When !final, an incomplete sequence at the end that could
 * still become valid is not consumed. Returns the bytes consumed. */
static size_t lossy_append(fr_buf *out, const uint8_t *s, size_t n, bool final) {
    size_t i = 0, run = 0; /* run: start of the pending run of valid bytes */
    while (i < n) {
        uint8_t b = s[i];
        if (b < 0x80) {
            i++;
            continue;
        }
        int need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (b >= 0xC2 && b <= 0xDF) need = 1;
        else if (b >= 0xE0 && b <= 0xEF) {
            need = 2;
            if (b == 0xE0) lo = 0xA0;
            if (b == 0xED) hi = 0x9F;
        } else if (b >= 0xF0 && b <= 0xF4) {
            need = 3;
            if (b == 0xF0) lo = 0x90;
            if (b == 0xF4) hi = 0x8F;
        } else need = -1;
        size_t j = i + 1;
        bool bad = need < 0;
        for (int k = 0; k < need && !bad; k++, j++) {
            if (j >= n) { /* incomplete at the end */
                if (!final) {
                    if (i > run) fr_buf_append(out, s + run, i - run);
                    return i;
                }
                bad = true;
                break;
            }
            if (s[j] < lo || s[j] > hi) {
                bad = true;
                break;
            }
            lo = 0x80;
            hi = 0xBF;
        }
        if (bad) {
            if (i > run) fr_buf_append(out, s + run, i - run);
            fr_buf_append(out, fr_repl, 3);
            i = j; /* skip the maximal invalid prefix */
            run = i;
            continue;
        }
        i = j;
    }
    if (n > run) fr_buf_append(out, s + run, n - run);
    return n;
}

/* Token id's decoded bytes as the k-th token of a decode: SentencePiece decoders treat the first
 * one specially (Strip drops one leading space, Metaspace its U+2581s). *own is set to a malloc'd
 * buffer when one was needed (free it). */
static const char *tok_dec(const fr_tokenizer *t, int id, size_t k, size_t *n, char **own) {
    const tok_entry *e = &t->ent[id];
    const char *p = t->blob + e->dec_off;
    *n = e->dec_len;
    *own = NULL;
    if (k > 0 || !t->sp_dec) return p;
    if (t->sp_dec & FR_SPD_MSFIRST) {
        bool added = e->flags & FR_TOKF_ADDED;
        const char *s = t->blob + (added ? e->con_off : e->str_off);
        size_t sl = added ? e->con_len : e->str_len;
        *own = fr_xmalloc(sl + 1);
        *n = fr_tok_sp_decode(t->sp_dec, true, s, sl, *own);
        return *own;
    }
    if ((t->sp_dec & FR_SPD_STRIP1) && *n && p[0] == ' ') {
        (*n)--;
        return p + 1;
    }
    return p;
}

void fr_detokenize_append(const fr_tokenizer *t, const int32_t *ids, size_t n, bool skip_special,
                          fr_buf *out) {
    fr_buf raw = {0};
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        int id = ids[i];
        if (id < 0 || id >= t->n_vocab) continue;
        if (skip_special && (t->ent[id].flags & FR_TOKF_SPECIAL)) continue;
        size_t dl;
        char *own;
        const char *d = tok_dec(t, id, k++, &dl, &own);
        fr_buf_append(&raw, d, dl);
        free(own);
    }
    lossy_append(out, (const uint8_t *)raw.data, raw.len, true);
    fr_buf_free(&raw);
}

char *fr_detokenize(const fr_tokenizer *t, const int32_t *ids, size_t n, bool skip_special) {
    fr_buf out = {0};
    fr_detokenize_append(t, ids, n, skip_special, &out);
    fr_buf_puts(&out, "");
    return fr_buf_cstr(&out);
}

static void detok_bytes(fr_detok *d, const uint8_t *p, size_t n, fr_buf *out);

void fr_detok_push(const fr_tokenizer *t, fr_detok *d, int id, bool skip_special, fr_buf *out) {
    if (id < 0 || id >= t->n_vocab) return;
    if (skip_special && (t->ent[id].flags & FR_TOKF_SPECIAL)) return;
    size_t n;
    char *own;
    const uint8_t *p = (const uint8_t *)tok_dec(t, id, (size_t)d->n_tok++, &n, &own);
    detok_bytes(d, p, n, out);
    free(own);
}

/* Appends the decoded bytes p[0..n) of one token, holding back an incomplete character. */
static void detok_bytes(fr_detok *d, const uint8_t *p, size_t n, fr_buf *out) {
    if (n == 0) return;
    if (d->n_pend <= 0 || d->n_pend > 3) {
        d->n_pend = 0;
        size_t used = lossy_append(out, p, n, false);
        memcpy(d->pend, p + used, n - used);
        d->n_pend = (int)(n - used);
        return;
    }
    /* complete (or break) the pending sequence with at most 3 bytes of this token first */
    uint8_t head[8];
    size_t np = (size_t)d->n_pend, take = FR_MIN(n, (size_t)3);
    memcpy(head, d->pend, np);
    memcpy(head + np, p, take);
    size_t used = lossy_append(out, head, np + take, false);
    if (used < np) { /* still incomplete: the token was shorter than what is missing */
        memcpy(d->pend, head + used, np + take - used);
        d->n_pend = (int)(np + take - used);
        return;
    }
    /* `used` covers the pending bytes and used - np bytes of the token; but bytes of the token
     * consumed there as plain text are fine to skip only if they were consumed */
    size_t from = used - np;
    d->n_pend = 0;
    size_t u2 = lossy_append(out, p + from, n - from, false);
    memcpy(d->pend, p + from + u2, n - from - u2);
    d->n_pend = (int)(n - from - u2);
}

void fr_detok_flush(fr_detok *d, fr_buf *out) {
    if (d->n_pend > 0 && d->n_pend <= (int)sizeof d->pend)
        lossy_append(out, (const uint8_t *)d->pend, (size_t)d->n_pend, true);
    d->n_pend = 0;
    d->n_tok = 0;
}
