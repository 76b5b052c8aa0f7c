/* textfeat.c — see textfeat.h. Normalise → char stream → hashed word and char n-grams → sorted,
 * counted keys. */
#include "stages/nlu/textfeat.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/base.h"

#define NORM_OPTS                                                                            \
    (UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_COMPOSE | UTF8PROC_CASEFOLD | UTF8PROC_IGNORE | \
     UTF8PROC_STRIPCC | UTF8PROC_LUMP)

static const uint64_t SEED_WORD = 0x9ae16a3b2f90404fULL;  /* per-group hash seeds: format */
static const uint64_t SEED_CHAR = 0xc3a5c85c97cb3127ULL;
static const uint64_t SEED_BIGRAM = 0xb492b66fbe98f273ULL;
static const uint64_t SEED_TRIGRAM = 0x9ddfea08eb382d69ULL;
static const uint64_t TOKEN_BOS = 0x2545f4914f6cdd1dULL;
static const uint64_t TOKEN_EOS = 0x1b873593cc9e2d51ULL;

const char *fr_feat_cfg_check(const fr_feat_cfg *c) {
    if (c->bucket_bits < 10 || c->bucket_bits > 22) return "bucket_bits must be in 10..22";
    if (c->word_max > 3) return "word n-gram order must be at most 3";
    if (c->char_max > 8) return "char n-gram length must be at most 8";
    if (c->char_max && (c->char_min < 1 || c->char_min > c->char_max))
        return "char n-gram range must satisfy 1 <= min <= max";
    if (!c->word_max && !c->char_max) return "no feature group enabled";
    if (c->flags & ~FR_FEAT_ALL_FLAGS) return "unknown feature flags";
    return NULL;
}

static inline uint64_t fnv_byte(uint64_t h, uint8_t b) { return (h ^ b) * 0x100000001b3ULL; }

static inline uint64_t fnv_cp(uint64_t h, int32_t cp) {
    uint8_t u[4];
    utf8proc_ssize_t n = utf8proc_encode_char(cp, u);
    for (utf8proc_ssize_t i = 0; i < n; i++) h = fnv_byte(h, u[i]);
    return h;
}

static inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void *grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return p;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    *cap = c;
    return fr_xrealloc(p, c * elem);
}

/* Scripts written without spaces: each such code point is a token of its own. */
static bool is_isolated(int32_t c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2FA1F) || (c >= 0xF900 && c <= 0xFAFF) ||
           (c >= 0x3040 && c <= 0x30FF) || (c >= 0x31F0 && c <= 0x31FF) ||
           (c >= 0x0E00 && c <= 0x0E7F);
}

static bool is_word(int32_t c) {
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_NO);
}

/* Valid UTF-8 of text (invalid bytes → U+FFFD); returns text itself when already valid. */
static const char *fix_utf8(const char *text, size_t len, fr_feat_scratch *s, size_t *out_len) {
    if (fr_utf8_valid(text, len)) {
        *out_len = len;
        return text;
    }
    s->fixed = grow(s->fixed, &s->fixed_cap, len * 3 + 1, 1);
    size_t o = 0, i = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t n = utf8proc_iterate((const uint8_t *)text + i, (utf8proc_ssize_t)(len - i), &cp);
        if (n <= 0) {
            memcpy(s->fixed + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(s->fixed + o, text + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        }
    }
    *out_len = o;
    return s->fixed;
}

/* Normalised code points into s->cps; returns their number (capped). */
static size_t normalize(const char *text, size_t len, fr_feat_scratch *s) {
    /* Only a prefix of long input is looked at (a cut UTF-8 sequence becomes U+FFFD). */
    size_t inlen;
    if (len > (size_t)FR_FEAT_MAX_CODEPOINTS * 4) len = (size_t)FR_FEAT_MAX_CODEPOINTS * 4;
    const char *t = fix_utf8(text, len, s, &inlen);
    size_t cap = inlen + 16;
    for (;;) {
        s->cps = grow(s->cps, &s->cps_cap, cap, sizeof *s->cps);
        utf8proc_ssize_t n = utf8proc_decompose((const uint8_t *)t, (utf8proc_ssize_t)inlen,
                                                s->cps, (utf8proc_ssize_t)s->cps_cap, NORM_OPTS);
        if (n < 0) return 0; /* cannot happen on valid UTF-8; treat as empty */
        if ((size_t)n > s->cps_cap) {
            cap = (size_t)n;
            continue;
        }
        n = utf8proc_normalize_utf32(s->cps, n, NORM_OPTS);
        if (n < 0) return 0;
        return FR_MIN((size_t)n, (size_t)FR_FEAT_MAX_CODEPOINTS);
    }
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

size_t fr_feat_extract(const fr_feat_cfg *cfg, const char *text, size_t len, fr_feat_scratch *s) {
    size_t n = normalize(text, len, s);
    /* Char stream, built in place after the normalised code points: ' ' w w ' ' w ... ' '. */
    s->cps = grow(s->cps, &s->cps_cap, 2 * n + 4, sizeof *s->cps);
    int32_t *in = s->cps, *st = s->cps + n;
    size_t m = 0;
    st[m++] = ' ';
    for (size_t i = 0; i < n; i++) {
        int32_t c = in[i];
        bool w = is_word(c);
        /* an apostrophe between two word characters stays inside the word (don't, it's) */
        if (!w && c == '\'' && i > 0 && i + 1 < n && is_word(in[i - 1]) && is_word(in[i + 1]))
            w = true;
        if (w) {
            if ((cfg->flags & FR_FEAT_DIGITS) && utf8proc_category(c) == UTF8PROC_CATEGORY_ND)
                c = '0';
            st[m++] = c;
        } else if (st[m - 1] != ' ') {
            st[m++] = ' ';
        }
    }
    if (st[m - 1] != ' ') st[m++] = ' ';

    size_t span = cfg->char_max ? cfg->char_max - cfg->char_min + 1 : 0;
    size_t need = m * span + 3 * (m + 2) * (cfg->word_max ? cfg->word_max : 1) + 8;
    s->keys = grow(s->keys, &s->keys_cap, need, sizeof *s->keys);
    uint64_t *keys = s->keys;
    size_t nk = 0;
    uint64_t mask_shift = 64 - cfg->bucket_bits;
    const uint64_t gword = (uint64_t)FR_FEAT_GROUP_WORD << 32, gchar = (uint64_t)FR_FEAT_GROUP_CHAR << 32;

    if (cfg->char_max) {
        for (size_t i = 0; i < m; i++) {
            uint64_t h = 0xcbf29ce484222325ULL ^ SEED_CHAR;
            for (size_t k = 1; k <= cfg->char_max && i + k <= m; k++) {
                int32_t c = st[i + k - 1];
                h = fnv_cp(h, c);
                bool interior_space = (c == ' ' && k > 1);
                if (k >= cfg->char_min && !(k == 1 && c == ' '))
                    keys[nk++] = gchar | (mix64(h) >> mask_shift);
                if (interior_space && (cfg->flags & FR_FEAT_CHAR_WB)) break;
            }
        }
    }
    if (cfg->word_max) {
        /* token hashes: BOS, tokens..., EOS */
        uint64_t prev2 = 0, prev1 = TOKEN_BOS;
        int have2 = 0, have1 = (cfg->flags & FR_FEAT_WORD_BOUNDS) ? 1 : 0;
        size_t i = 0;
        for (;;) {
            uint64_t t;
            bool end = false;
            while (i < m && st[i] == ' ') i++;
            if (i >= m) {
                if (!(cfg->flags & FR_FEAT_WORD_BOUNDS)) break;
                t = TOKEN_EOS;
                end = true;
            } else {
                uint64_t h = 0xcbf29ce484222325ULL ^ SEED_WORD;
                if (is_isolated(st[i])) {
                    h = fnv_cp(h, st[i++]);
                } else {
                    while (i < m && st[i] != ' ' && !is_isolated(st[i])) h = fnv_cp(h, st[i++]);
                }
                t = mix64(h);
                keys[nk++] = gword | (t >> mask_shift);
            }
            if (cfg->word_max >= 2 && have1)
                keys[nk++] = gword | (mix64(prev1 * 31 + t + SEED_BIGRAM) >> mask_shift);
            if (cfg->word_max >= 3 && have2)
                keys[nk++] = gword | (mix64((prev2 * 31 + prev1) * 31 + t + SEED_TRIGRAM) >> mask_shift);
            prev2 = prev1;
            have2 = have1;
            prev1 = t;
            have1 = 1;
            if (end) break;
        }
    }
    FR_ASSERT(nk <= s->keys_cap);
    qsort(keys, nk, sizeof *keys, cmp_u64);
    s->feats = grow(s->feats, &s->feats_cap, nk + 1, sizeof *s->feats);
    size_t nf = 0;
    for (size_t i = 0; i < nk;) {
        size_t j = i + 1;
        while (j < nk && keys[j] == keys[i]) j++;
        s->feats[nf].key = keys[i];
        s->feats[nf].count = (uint32_t)(j - i);
        nf++;
        i = j;
    }
    return nf;
}

void fr_feat_scratch_free(fr_feat_scratch *s) {
    free(s->cps);
    free(s->keys);
    free(s->feats);
    free(s->fixed);
    memset(s, 0, sizeof *s);
}

char *fr_feat_normalize(const char *text, size_t len) {
    fr_feat_scratch s = {0};
    size_t n = normalize(text, len, &s);
    char *out = fr_xmalloc(n * 4 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) o += (size_t)utf8proc_encode_char(s.cps[i], (uint8_t *)out + o);
    out[o] = 0;
    fr_feat_scratch_free(&s);
    return out;
}
