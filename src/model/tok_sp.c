/* tok_sp.c — SentencePiece-style tokenizers (Llama 2, Mistral, Gemma): text rules, models,
 * decoder rules. See tokenizer.h for the overview and tok_internal.h for the build description.
 *
 * Design. A segment of raw text between added tokens goes through the same steps as in HF
 * tokenizers, written from their documented behaviour:
 *   1. normalizer: Prepend("▁") (every non-empty segment; GGUF add_space_prefix does the same,
 *      llama.cpp prefixes a space to every text fragment) and Replace(" ", "▁");
 *   2. added tokens whose `normalized` flag is set are split out of the normalized text;
 *   3. Metaspace pre-tokenizer: spaces to "▁", "▁" prepended by prepend_scheme ("always":
 *      unless the piece starts with "▁"; "first": the same, only at the start of the text),
 *      and with `split` a new piece before every "▁";
 *   4. the model, per piece:
 *      - FR_TOKM_BPE with byte_fallback: symbols are characters (their vocab ids; an unknown
 *        character becomes its <0xXX> byte tokens, else unk, consecutive unks fused), merged by
 *        merge rank with tokenizer.c's BPE loop;
 *      - FR_TOKM_SPM (GGUF `llama`): symbols are characters; repeatedly the adjacent pair whose
 *        concatenation is a vocab piece with the highest score is merged (leftmost on ties), a
 *        max-heap of candidates with stale entries skipped; a final symbol that is not a piece
 *        becomes its byte tokens (or unk);
 *      - FR_TOKM_UNIGRAM: Viterbi over character positions, every vocab piece starting at a
 *        position is an edge weighted by its score (looked up for the vocabulary's distinct
 *        piece lengths only), an unknown character an edge of
 *        (min score - 10); ties keep the first (shortest) edge; consecutive unknowns are fused
 *        and become byte tokens with byte_fallback, else unk.
 * Decoding (fr_tok_sp_decode, applied per token at build time): "▁" -> " ", <0xXX> -> its byte;
 * the first-token rules (Strip, Metaspace) are applied by the decoders in tokenizer.c.
 */
#include "model/tok_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MS "\xE2\x96\x81" /* U+2581, SentencePiece's meta space */
#define MS_LEN 3

static bool is_ms(const char *s, size_t n) { return n >= MS_LEN && !memcmp(s, MS, MS_LEN); }

/* ---- decoding ---- */

/* The byte of a "<0xXX>" token string (hex digits in either case), or -1. */
static int byte_token(const char *s, size_t n) {
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
              : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

size_t fr_tok_sp_decode(int sp_dec, bool first, const char *s, size_t n, char *out) {
    int b = (sp_dec & FR_SPD_BYTES) ? byte_token(s, n) : -1;
    if (b >= 0) {
        out[0] = (char)b;
        return 1;
    }
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if ((sp_dec & FR_SPD_SPACE) && is_ms(s + i, n - i)) {
            if (!(first && (sp_dec & FR_SPD_MSFIRST))) out[o++] = ' ';
            i += MS_LEN;
            continue;
        }
        out[o++] = s[i++];
    }
    return o;
}

/* ---- build ---- */

/* The distinct piece lengths, ascending: the Viterbi tries only these at each position, so a
 * vocabulary with one very long piece does not make every position try every length. */
static void piece_lengths(fr_tokenizer *t, const tok_build *b) {
    uint8_t *seen = fr_xcalloc((size_t)t->max_vocab_len + 1, 1);
    int k = 0;
    for (size_t i = 0; i < b->n_vocab; i++) {
        size_t l = b->vocab[i].n;
        if (l && !seen[l]) seen[l] = 1, k++;
    }
    t->piece_lens = fr_xmalloc(((size_t)k + 1) * sizeof *t->piece_lens);
    for (uint32_t l = 1; l <= t->max_vocab_len; l++)
        if (seen[l]) t->piece_lens[t->n_piece_lens++] = l;
    free(seen);
}

int fr_tok_sp_finish(fr_tokenizer *t, const tok_build *b, fr_err *err) {
    for (int by = 0; by < 256; by++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", by);
        t->sp_byte[by] = fr_tok_vocab_id(t, s, 6);
    }
    if (b->model == FR_TOKM_BPE) return 0;
    t->score = fr_xcalloc((size_t)t->n_vocab, sizeof *t->score);
    double lo = INFINITY;
    for (size_t i = 0; i < b->n_vocab; i++) {
        double sc = b->vocab[i].score;
        if (!isfinite(sc)) {
            fr_err_set(err, "%s: vocab id %d has a score that is not finite", b->name,
                       b->vocab[i].id);
            return -1;
        }
        t->score[b->vocab[i].id] = sc;
        lo = fmin(lo, sc);
    }
    t->unk_score = (isfinite(lo) ? lo : 0.0) - 10.0;
    if (b->model == FR_TOKM_UNIGRAM) piece_lengths(t, b);
    if (b->model == FR_TOKM_SPM) {
        t->piece = fr_xcalloc((size_t)t->n_vocab, 1);
        for (size_t i = 0; i < b->n_vocab; i++) t->piece[b->vocab[i].id] = b->vocab[i].piece;
    }
    return 0;
}

/* ---- shared encoding steps ---- */

static void sym_reserve(tok_ctx *c, size_t n) {
    if (n + 1 > c->cap_sym) {
        c->cap_sym = FR_MAX(n + 1, 2 * c->cap_sym);
        c->sym = fr_xrealloc(c->sym, c->cap_sym * sizeof *c->sym);
    }
}

/* Byte tokens for s[0..n) if every byte has one: appended via push (ids) and true. */
static bool have_bytes(const fr_tokenizer *t, const char *s, size_t n) {
    if (!t->byte_fallback) return false;
    for (size_t i = 0; i < n; i++)
        if (t->sp_byte[(uint8_t)s[i]] < 0) return false;
    return true;
}

/* An unknown piece s[0..n): its byte tokens (byte_fallback), else unk, else nothing. */
static void push_unknown(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    if (have_bytes(t, s, n)) {
        for (size_t i = 0; i < n; i++) fr_tok_push(c, t->sp_byte[(uint8_t)s[i]]);
    } else if (t->unk_id >= 0) {
        fr_tok_push(c, t->unk_id);
    }
}

/* ---- BPE on characters (HF BPE with byte_fallback) ---- */

static void sp_bpe(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    sym_reserve(c, n);
    tok_sym *sy = c->sym;
    int32_t m = 0;
    bool prev_unk = false;
    for (size_t i = 0; i < n;) {
        size_t l = FR_MIN((size_t)fr_tok_char_len((uint8_t)s[i]), n - i);
        int32_t id = fr_tok_vocab_id(t, s + i, l);
        if (id >= 0 || have_bytes(t, s + i, l)) {
            for (size_t k = 0; k < (id >= 0 ? 1 : l); k++, m++)
                sy[m] = (tok_sym){id >= 0 ? id : t->sp_byte[(uint8_t)s[i + k]], m - 1, m + 1};
            prev_unk = false;
        } else if (t->unk_id >= 0 && !(t->fuse_unk && prev_unk)) {
            sy[m] = (tok_sym){t->unk_id, m - 1, m + 1};
            m++;
            prev_unk = true;
        }
        i += l;
    }
    fr_tok_bpe_run(c, m);
}

/* ---- SentencePiece BPE by score (GGUF llama) ---- */

typedef struct spm_sym {
    uint32_t off, len;  /* bytes of the piece in the text; len 0 once merged away */
    int32_t prev, next; /* neighbours, -1 at the ends */
} spm_sym;

typedef struct spm_cand {
    uint64_t key; /* (~sortable score) << 32 | left symbol: smallest = best score, leftmost */
    uint32_t len; /* bytes of the merged piece when queued (stale check) */
} spm_cand;

typedef struct spm_heap {
    spm_cand *a;
    size_t n, cap;
} spm_heap;

/* Order-preserving map of a float score to 32 bits. */
static uint32_t score_bits(double score) {
    float f = (float)score;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static void spm_heap_push(spm_heap *h, spm_cand x) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 64;
        h->a = fr_xrealloc(h->a, h->cap * sizeof *h->a);
    }
    size_t i = h->n++;
    while (i > 0 && h->a[(i - 1) / 2].key > x.key) {
        h->a[i] = h->a[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->a[i] = x;
}

static spm_cand spm_heap_pop(spm_heap *h) {
    spm_cand top = h->a[0], x = h->a[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= h->n) break;
        if (l + 1 < h->n && h->a[l + 1].key < h->a[l].key) l++;
        if (x.key <= h->a[l].key) break;
        h->a[i] = h->a[l];
        i = l;
    }
    if (h->n) h->a[i] = x;
    return top;
}

/* The piece id of s[0..n) if SPM may use it, else -1. */
static int32_t spm_piece(const fr_tokenizer *t, const char *s, size_t n) {
    int32_t id = fr_tok_vocab_id(t, s, n);
    return id >= 0 && (!t->piece || t->piece[id]) ? id : -1;
}

static void spm_try(const fr_tokenizer *t, const char *s, const spm_sym *y, int32_t l,
                    spm_heap *h) {
    if (l < 0 || y[l].next < 0) return;
    uint32_t len = y[l].len + y[y[l].next].len;
    int32_t id = spm_piece(t, s + y[l].off, len);
    if (id < 0) return;
    uint64_t k = (uint64_t)(~score_bits(t->score[id])) << 32 | (uint32_t)l;
    spm_heap_push(h, (spm_cand){k, len});
}

static void spm(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    spm_sym *y = fr_xmalloc((n + 1) * sizeof *y);
    int32_t m = 0;
    for (size_t i = 0; i < n; m++) {
        uint32_t l = (uint32_t)FR_MIN((size_t)fr_tok_char_len((uint8_t)s[i]), n - i);
        y[m] = (spm_sym){(uint32_t)i, l, m - 1, m + 1};
        i += l;
    }
    if (m) y[m - 1].next = -1;
    spm_heap h = {0};
    for (int32_t i = 0; i + 1 < m; i++) spm_try(t, s, y, i, &h);
    while (h.n) {
        spm_cand top = spm_heap_pop(&h);
        int32_t l = (int32_t)(uint32_t)top.key;
        if (y[l].len == 0 || y[l].next < 0 || y[l].len + y[y[l].next].len != top.len) continue;
        int32_t r = y[l].next;
        y[l].len = top.len;
        y[r].len = 0;
        y[l].next = y[r].next;
        if (y[l].next >= 0) y[y[l].next].prev = l;
        spm_try(t, s, y, y[l].prev, &h);
        spm_try(t, s, y, l, &h);
    }
    for (int32_t i = m ? 0 : -1; i >= 0; i = y[i].next) {
        int32_t id = spm_piece(t, s + y[i].off, y[i].len);
        if (id >= 0) fr_tok_push(c, id);
        else push_unknown(c, s + y[i].off, y[i].len);
    }
    free(h.a);
    free(y);
}

/* ---- Unigram (Viterbi) ---- */

typedef struct vit_node {
    double score;  /* best path score ending here */
    int32_t start; /* start of the last edge, -1 = not reached */
    int32_t id;    /* its token id, -1 = an unknown character */
} vit_node;

/* Relaxes the edge [i, j) with token id (-1: unknown) and score sc. */
static void vit_edge(vit_node *v, size_t i, size_t j, int32_t id, double sc) {
    double cand = v[i].score + sc;
    if (v[j].start < 0 || cand > v[j].score) v[j] = (vit_node){cand, (int32_t)i, id};
}

static void vit_forward(const fr_tokenizer *t, const char *s, size_t n, vit_node *v) {
    for (size_t i = 0; i < n;) {
        size_t cl = FR_MIN((size_t)fr_tok_char_len((uint8_t)s[i]), n - i);
        bool single = false;
        for (int k = 0; k < t->n_piece_lens && t->piece_lens[k] <= n - i; k++) {
            size_t l = t->piece_lens[k];
            if (i + l < n && ((uint8_t)s[i + l] & 0xC0) == 0x80) continue; /* inside a char */
            int32_t id = fr_tok_vocab_id(t, s + i, l);
            if (id < 0) continue;
            vit_edge(v, i, i + l, id, t->score[id]);
            if (l == cl) single = true;
        }
        if (!single) vit_edge(v, i, i + cl, -1, t->unk_score);
        i += cl;
    }
}

static void unigram(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    vit_node *v = fr_xmalloc((n + 1) * sizeof *v);
    for (size_t i = 0; i <= n; i++) v[i] = (vit_node){0.0, -1, -1};
    v[0].start = 0;
    vit_forward(t, s, n, v);
    /* backtrack into (end, id) pairs, last first */
    size_t k = 0;
    int32_t *ends = fr_xmalloc((n + 1) * sizeof *ends);
    for (size_t j = n; j > 0; j = (size_t)v[j].start) ends[k++] = (int32_t)j;
    size_t start = 0;
    while (k > 0) {
        size_t end = (size_t)ends[--k];
        if (v[end].id >= 0) {
            fr_tok_push(c, v[end].id);
            start = end;
            continue;
        }
        while (k > 0 && v[ends[k - 1]].id < 0) end = (size_t)ends[--k]; /* fuse unknowns */
        push_unknown(c, s + start, end - start);
        start = end;
    }
    free(ends);
    free(v);
}

/* ---- text rules ---- */

static void sp_model(tok_ctx *c, const char *s, size_t n) {
    if (n == 0) return;
    switch (c->t->model) {
    case FR_TOKM_SPM: spm(c, s, n); break;
    case FR_TOKM_UNIGRAM: unigram(c, s, n); break;
    default: sp_bpe(c, s, n); break;
    }
}

/* Appends s[0..n) to out, spaces as U+2581 when `space`. */
static void append_ms(fr_buf *out, const char *s, size_t n, bool space) {
    size_t from = 0;
    for (size_t i = 0; space && i < n; i++) {
        if (s[i] != ' ') continue;
        fr_buf_append(out, s + from, i - from);
        fr_buf_append(out, MS, MS_LEN);
        from = i + 1;
    }
    fr_buf_append(out, s + from, n - from);
}

/* The Metaspace pre-tokenizer on one normalized piece, then the model. */
static int gap_metaspace(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    if (n == 0) return 0;
    if (!t->ms) {
        sp_model(c, s, n);
        return 0;
    }
    fr_buf b = {0};
    bool first = c->norm0 && s == c->norm0;
    bool starts = s[0] == ' ' || is_ms(s, n);
    if (!starts && (t->ms_prepend == FR_SPP_ALWAYS || (t->ms_prepend == FR_SPP_FIRST && first)))
        fr_buf_append(&b, MS, MS_LEN);
    append_ms(&b, s, n, true);
    size_t from = 0;
    for (size_t i = 1; t->ms_split && i < b.len; i++) {
        if (!is_ms(b.data + i, b.len - i)) continue;
        sp_model(c, b.data + from, i - from);
        from = i;
    }
    sp_model(c, b.data + from, b.len - from);
    fr_buf_free(&b);
    return 0;
}

int fr_tok_sp_segment(tok_ctx *c, const char *s, size_t n) {
    const fr_tokenizer *t = c->t;
    bool at0 = s == c->text0;
    if (t->sp_prepend != FR_SPP_PREPEND && !t->sp_space) {
        c->norm0 = at0 ? s : NULL;
        return fr_tok_split_norm(c, s, n, gap_metaspace);
    }
    fr_buf b = {0};
    if (t->sp_prepend == FR_SPP_PREPEND && n) fr_buf_append(&b, MS, MS_LEN);
    append_ms(&b, s, n, t->sp_space);
    c->norm0 = at0 ? b.data : NULL;
    int rc = b.len ? fr_tok_split_norm(c, b.data, b.len, gap_metaspace) : 0;
    c->norm0 = NULL;
    fr_buf_free(&b);
    return rc;
}
