/* lm.c — speech text normaliser, dictionary word set, Kneser-Ney trigram builder, ARPA writer,
 * word edit distance. See lm.h for the model definition.
 *
 * N-gram counts live in open-addressing hash maps keyed by packed word ids (21 bits per word,
 * so at most 2^21 distinct words), with one map per order. Probabilities are computed order by
 * order from the adjusted counts; each written n-gram's probability is stored next to its key so
 * the higher order can interpolate with it and back-off weights can be computed exactly.
 */
#include "stages/asr/lm.h"

#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- normaliser */

static const char *const small_words[20] = {
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen"};
static const char *const tens_words[10] = {"", "", "twenty", "thirty", "forty", "fifty",
                                           "sixty", "seventy", "eighty", "ninety"};

static void put_word(fr_buf *out, const char *w) {
    if (out->len && out->data[out->len - 1] != ' ') fr_buf_puts(out, " ");
    fr_buf_puts(out, w);
}

/* n < 1000, n > 0 */
static void say_hundreds(fr_buf *out, unsigned n) {
    if (n >= 100) {
        put_word(out, small_words[n / 100]);
        put_word(out, "hundred");
        n %= 100;
    }
    if (n >= 20) {
        put_word(out, tens_words[n / 10]);
        if (n % 10) put_word(out, small_words[n % 10]);
    } else if (n > 0) {
        put_word(out, small_words[n]);
    }
}

static void say_number(fr_buf *out, unsigned long n) {
    if (n == 0) {
        put_word(out, "zero");
        return;
    }
    static const char *const scale[] = {"", "thousand", "million"};
    unsigned parts[3] = {(unsigned)(n % 1000), (unsigned)(n / 1000 % 1000),
                         (unsigned)(n / 1000000 % 1000)};
    for (int i = 2; i >= 0; i--) {
        if (!parts[i]) continue;
        say_hundreds(out, parts[i]);
        if (i) put_word(out, scale[i]);
    }
}

static void say_digits(fr_buf *out, const char *d, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (isdigit((unsigned char)d[i])) put_word(out, small_words[d[i] - '0']);
}

/* Turn the last word written (a cardinal) into an ordinal: "two" -> "second". */
static void make_ordinal(fr_buf *out) {
    size_t s = out->len;
    while (s > 0 && out->data[s - 1] != ' ') s--;
    char last[32];
    size_t n = out->len - s;
    if (n == 0 || n >= sizeof last) return;
    memcpy(last, out->data + s, n);
    last[n] = 0;
    static const char *const irr[][2] = {{"one", "first"},   {"two", "second"}, {"three", "third"},
                                         {"five", "fifth"},  {"eight", "eighth"}, {"nine", "ninth"},
                                         {"twelve", "twelfth"}};
    out->len = s;
    for (size_t i = 0; i < FR_ARRAY_LEN(irr); i++)
        if (!strcmp(last, irr[i][0])) {
            fr_buf_puts(out, irr[i][1]);
            return;
        }
    if (last[n - 1] == 'y') {
        last[n - 1] = 0;
        fr_buf_printf(out, "%sieth", last);
    } else {
        fr_buf_printf(out, "%sth", last);
    }
}

static int utf8_at(const unsigned char *p, const char *seq) {
    return !strncmp((const char *)p, seq, strlen(seq));
}

void fr_asr_normalize(const char *text, fr_buf *out) {
    const unsigned char *p = (const unsigned char *)text;
    const char *currency = NULL; /* a currency word waiting for its amount */
    fr_buf_puts(out, "");
    while (*p) {
        if (isalpha(*p)) {
            if (out->len && out->data[out->len - 1] != ' ') fr_buf_puts(out, " ");
            while (*p) {
                if (isalpha(*p)) {
                    char c = (char)tolower(*p++);
                    fr_buf_append(out, &c, 1);
                } else if ((*p == '\'' && isalpha(p[1])) ||
                           (utf8_at(p, "\xe2\x80\x99") && isalpha(p[3]))) {
                    fr_buf_append(out, "'", 1);
                    p += *p == '\'' ? 1 : 3;
                } else {
                    break;
                }
            }
            fr_buf_puts(out, " ");
            if (currency) put_word(out, currency), currency = NULL;
            continue;
        }
        if (isdigit(*p)) {
            const unsigned char *s = p;
            char digits[64];
            size_t nd = 0;
            /* integer part with optional thousands commas "1,000" */
            while (isdigit(*p) || (*p == ',' && isdigit(p[1]) && isdigit(p[2]) && isdigit(p[3]) &&
                                   !isdigit(p[4]))) {
                if (isdigit(*p) && nd < sizeof digits - 1) digits[nd++] = (char)*p;
                p++;
            }
            digits[nd] = 0;
            const unsigned char *frac = NULL;
            size_t nf = 0;
            if (*p == '.' && isdigit(p[1])) {
                frac = ++p;
                while (isdigit(*p)) p++, nf++;
            }
            if (nd > 9 || (nd > 1 && digits[0] == '0')) {
                say_digits(out, (const char *)s, (size_t)(p - s));
            } else {
                say_number(out, strtoul(digits, NULL, 10));
                if (!currency && frac) {
                    put_word(out, "point");
                    say_digits(out, (const char *)frac, nf);
                }
            }
            if ((p[0] == 's' && p[1] == 't') || (p[0] == 'n' && p[1] == 'd') ||
                (p[0] == 'r' && p[1] == 'd') || (p[0] == 't' && p[1] == 'h')) {
                if (!isalpha(p[2])) {
                    make_ordinal(out);
                    p += 2;
                }
            }
            if (currency) {
                put_word(out, currency);
                currency = NULL;
                if (frac && nf == 2 && strncmp((const char *)frac, "00", 2)) {
                    say_number(out, strtoul((const char *)frac, NULL, 10) % 100);
                    put_word(out, "cents");
                }
            }
            fr_buf_puts(out, " ");
            continue;
        }
        if (*p == '$') currency = "dollars";
        else if (utf8_at(p, "\xc2\xa3")) currency = "pounds";
        else if (utf8_at(p, "\xe2\x82\xac")) currency = "euros";
        else if (*p == '%') put_word(out, "percent");
        else if (*p == '&') put_word(out, "and");
        else if (*p == '@') put_word(out, "at");
        else if (*p == '+') put_word(out, "plus");
        if (*p >= 0x80) {
            p++;
            while ((*p & 0xC0) == 0x80) p++;
        } else {
            p++;
        }
        if (out->len && out->data[out->len - 1] != ' ') fr_buf_puts(out, " ");
    }
    if (currency) put_word(out, currency);
    /* squeeze spaces */
    size_t w = 0;
    for (size_t i = 0; i < out->len; i++) {
        if (out->data[i] == ' ' && (w == 0 || out->data[w - 1] == ' ')) continue;
        out->data[w++] = out->data[i];
    }
    while (w && out->data[w - 1] == ' ') w--;
    out->len = w;
    fr_buf_cstr(out);
    out->data[w] = 0;
}

/* ---------------------------------------------------------------- string hash set / vocab */

static uint64_t fnv(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* Open-addressing string → id table. */
typedef struct strtab {
    char **keys;  /* slot → owned string or NULL */
    int32_t *ids; /* slot → id */
    size_t cap;   /* slots (power of two) */
    size_t n;     /* strings stored */
    char **byid;  /* id → string (shared with keys) */
} strtab;

static void strtab_grow(strtab *t);
static int32_t strtab_find(const strtab *t, const char *s) {
    if (!t->cap) return -1;
    for (size_t i = fnv(s) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
        if (!t->keys[i]) return -1;
        if (!strcmp(t->keys[i], s)) return t->ids[i];
    }
}
static int32_t strtab_add(strtab *t, const char *s) {
    int32_t id = strtab_find(t, s);
    if (id >= 0) return id;
    if ((t->n + 1) * 2 > t->cap) strtab_grow(t);
    size_t i = fnv(s) & (t->cap - 1);
    while (t->keys[i]) i = (i + 1) & (t->cap - 1);
    t->keys[i] = fr_xstrdup(s);
    t->ids[i] = (int32_t)t->n;
    t->byid = fr_xrealloc(t->byid, (t->n + 1) * sizeof(char *));
    t->byid[t->n] = t->keys[i];
    return (int32_t)t->n++;
}
static void strtab_grow(strtab *t) {
    size_t nc = t->cap ? t->cap * 2 : 1024;
    char **nk = fr_xcalloc(nc, sizeof(char *));
    int32_t *ni = fr_xcalloc(nc, sizeof(int32_t));
    for (size_t i = 0; i < t->cap; i++) {
        if (!t->keys[i]) continue;
        size_t j = fnv(t->keys[i]) & (nc - 1);
        while (nk[j]) j = (j + 1) & (nc - 1);
        nk[j] = t->keys[i];
        ni[j] = t->ids[i];
    }
    free(t->keys);
    free(t->ids);
    t->keys = nk;
    t->ids = ni;
    t->cap = nc;
}
static void strtab_free(strtab *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->keys[i]);
    free(t->keys);
    free(t->ids);
    free(t->byid);
}

struct fr_wordset {
    strtab t; /* the words */
};

fr_wordset *fr_wordset_load_dict(const char *path, fr_err *err) {
    size_t len;
    char *txt = fr_read_file(path, (size_t)64 << 20, &len, err);
    if (!txt) return NULL;
    fr_wordset *s = fr_xcalloc(1, sizeof *s);
    char *line = txt;
    while (line && *line) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        char *sp = line;
        while (*sp && *sp != ' ' && *sp != '\t') sp++;
        *sp = 0;
        char *par = strchr(line, '(');
        if (par && par != line) *par = 0;
        if (*line) strtab_add(&s->t, line);
        line = nl ? nl + 1 : NULL;
    }
    free(txt);
    if (!s->t.n) {
        fr_err_set(err, "%s: no words in dictionary", path);
        fr_wordset_free(s);
        return NULL;
    }
    return s;
}
int fr_wordset_has(const fr_wordset *s, const char *w) { return strtab_find(&s->t, w) >= 0; }
size_t fr_wordset_size(const fr_wordset *s) { return s->t.n; }
void fr_wordset_free(fr_wordset *s) {
    if (!s) return;
    strtab_free(&s->t);
    free(s);
}

/* ---------------------------------------------------------------- u64 → slot map */

typedef struct u64map {
    uint64_t *keys; /* key + 1 (0 = empty) */
    double *val;    /* count, later probability */
    size_t cap, n;  /* slots, used */
} u64map;

static size_t mix(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return (size_t)k;
}
static void u64map_grow(u64map *m) {
    size_t nc = m->cap ? m->cap * 2 : 4096;
    uint64_t *nk = fr_xcalloc(nc, sizeof(uint64_t));
    double *nv = fr_xcalloc(nc, sizeof(double));
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = mix(m->keys[i]) & (nc - 1);
        while (nk[j]) j = (j + 1) & (nc - 1);
        nk[j] = m->keys[i];
        nv[j] = m->val[i];
    }
    free(m->keys);
    free(m->val);
    m->keys = nk;
    m->val = nv;
    m->cap = nc;
}
/* slot of key, inserting it with value 0 when absent */
static size_t u64map_slot(u64map *m, uint64_t key) {
    if ((m->n + 1) * 2 > m->cap) u64map_grow(m);
    uint64_t k = key + 1;
    size_t i = mix(k) & (m->cap - 1);
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->keys[i] = k, m->val[i] = 0, m->n++;
    return i;
}
static void u64map_add(u64map *m, uint64_t key, double v) {
    size_t i = u64map_slot(m, key);
    m->val[i] += v;
}
static void u64map_set(u64map *m, uint64_t key, double v) {
    size_t i = u64map_slot(m, key);
    m->val[i] = v;
}
static double *u64map_get(const u64map *m, uint64_t key) {
    if (!m->cap) return NULL;
    uint64_t k = key + 1;
    for (size_t i = mix(k) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (!m->keys[i]) return NULL;
        if (m->keys[i] == k) return &m->val[i];
    }
}
static void u64map_free(u64map *m) {
    free(m->keys);
    free(m->val);
    memset(m, 0, sizeof *m);
}

/* ---------------------------------------------------------------- builder */

#define W_BOS 0
#define W_EOS 1
#define W_UNK 2
#define IDBITS 21
#define IDMASK ((1ull << IDBITS) - 1)
#define K2(a, b) (((uint64_t)(a) << IDBITS) | (uint64_t)(b))
#define K3(a, b, c) (((uint64_t)(a) << (2 * IDBITS)) | ((uint64_t)(b) << IDBITS) | (uint64_t)(c))

struct fr_lm_builder {
    const fr_wordset *vocab; /* allowed words or NULL */
    strtab words;            /* word ↔ id; 0 <s>, 1 </s>, 2 <unk> */
    u64map c3, c2;           /* raw trigram / bigram counts */
    size_t sentences;        /* sentences added */
    size_t tokens, oov;      /* words added, of which <unk> */
};

fr_lm_builder *fr_lm_builder_new(const fr_wordset *vocab) {
    fr_lm_builder *b = fr_xcalloc(1, sizeof *b);
    b->vocab = vocab;
    strtab_add(&b->words, "<s>");
    strtab_add(&b->words, "</s>");
    strtab_add(&b->words, "<unk>");
    return b;
}

void fr_lm_add_words(fr_lm_builder *b, const char *words) {
    int32_t ids[256];
    size_t n = 0;
    ids[n++] = W_BOS;
    const char *p = words;
    while (*p && n < FR_ARRAY_LEN(ids) - 1) {
        while (*p == ' ') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ' ') e++;
        char w[64];
        size_t l = (size_t)(e - p);
        int32_t id = W_UNK;
        if (l < sizeof w) {
            memcpy(w, p, l);
            w[l] = 0;
            if (!b->vocab || fr_wordset_has(b->vocab, w)) id = strtab_add(&b->words, w);
        }
        if (id == W_UNK) b->oov++;
        b->tokens++;
        ids[n++] = id;
        p = e;
    }
    if (n == 1) return; /* empty sentence */
    FR_ASSERT(b->words.n < IDMASK);
    ids[n++] = W_EOS;
    b->sentences++;
    for (size_t i = 1; i < n; i++) {
        u64map_add(&b->c2, K2(ids[i - 1], ids[i]), 1);
        if (i >= 2) u64map_add(&b->c3, K3(ids[i - 2], ids[i - 1], ids[i]), 1);
    }
}

void fr_lm_add_text(fr_lm_builder *b, const char *text) {
    fr_buf nb = {0};
    fr_asr_normalize(text, &nb);
    fr_lm_add_words(b, nb.data);
    fr_buf_free(&nb);
}

void fr_lm_builder_free(fr_lm_builder *b) {
    if (!b) return;
    strtab_free(&b->words);
    u64map_free(&b->c3);
    u64map_free(&b->c2);
    free(b);
}

static double kn_discount(const u64map *a) {
    double n1 = 0, n2 = 0;
    for (size_t i = 0; i < a->cap; i++) {
        if (!a->keys[i]) continue;
        if (a->val[i] == 1) n1++;
        else if (a->val[i] == 2) n2++;
    }
    double d = n1 + 2 * n2 > 0 ? n1 / (n1 + 2 * n2) : 0.5;
    return d < 0.1 ? 0.1 : d > 0.95 ? 0.95 : d;
}

/* one written n-gram */
typedef struct arpa_ent {
    uint64_t key; /* packed ids */
    double p;     /* probability */
    double bow;   /* back-off weight (1 when it is never a context) */
} arpa_ent;

static int ent_cmp(const void *x, const void *y) {
    uint64_t a = ((const arpa_ent *)x)->key, b = ((const arpa_ent *)y)->key;
    return a < b ? -1 : a > b;
}

static int has_unk2(uint64_t k) { return (k & IDMASK) == W_UNK || (k >> IDBITS) == W_UNK; }
static int has_unk3(uint64_t k) { return has_unk2(k & ((1ull << (2 * IDBITS)) - 1)) || (k >> (2 * IDBITS)) == W_UNK; }

int fr_lm_write_arpa(fr_lm_builder *b, int max_order, int min_count3, FILE *f, fr_lm_stats *st,
                     fr_err *err) {
    if (max_order < 2 || max_order > 3) {
        fr_err_set(err, "lm: order must be 2 or 3");
        return -1;
    }
    if (b->sentences == 0) {
        fr_err_set(err, "lm: no training sentences");
        return -1;
    }
    size_t V = b->words.n;
    /* adjusted counts */
    u64map a2 = {0};
    double *a1 = fr_xcalloc(V, sizeof(double));
    if (max_order == 3) {
        for (size_t i = 0; i < b->c3.cap; i++)
            if (b->c3.keys[i]) u64map_add(&a2, (b->c3.keys[i] - 1) & ((1ull << (2 * IDBITS)) - 1), 1);
        for (size_t i = 0; i < b->c2.cap; i++)
            if (b->c2.keys[i] && ((b->c2.keys[i] - 1) >> IDBITS) == W_BOS)
                u64map_set(&a2, b->c2.keys[i] - 1, b->c2.val[i]);
    } else {
        for (size_t i = 0; i < b->c2.cap; i++)
            if (b->c2.keys[i]) u64map_set(&a2, b->c2.keys[i] - 1, b->c2.val[i]);
    }
    for (size_t i = 0; i < a2.cap; i++)
        if (a2.keys[i]) a1[(a2.keys[i] - 1) & IDMASK] += 1;

    /* ---- unigrams ---- */
    double tot1 = 0, types1 = 0;
    for (size_t w = 0; w < V; w++)
        if (a1[w] > 0) tot1 += a1[w], types1++;
    u64map a1m = {0};
    for (size_t w = 0; w < V; w++)
        if (a1[w] > 0) u64map_set(&a1m, w, a1[w]);
    double D1 = kn_discount(&a1m);
    u64map_free(&a1m);
    double *p1 = fr_xcalloc(V, sizeof(double));
    double mass = 0;
    for (size_t w = 1; w < V; w++) { /* <s> never predicted */
        p1[w] = FR_MAX(a1[w] - D1, 0) / tot1 + D1 * types1 / tot1 / (double)(V - 1);
        if (w != W_UNK) mass += p1[w];
    }
    for (size_t w = 1; w < V; w++) p1[w] /= mass; /* renormalise without <unk> */
    p1[W_UNK] = 0;

    /* ---- bigrams ---- */
    double D2 = kn_discount(&a2);
    double *S2 = fr_xcalloc(V, sizeof(double)), *T2 = fr_xcalloc(V, sizeof(double));
    for (size_t i = 0; i < a2.cap; i++) {
        if (!a2.keys[i]) continue;
        uint64_t v = (a2.keys[i] - 1) >> IDBITS;
        S2[v] += a2.val[i];
        T2[v] += 1;
    }
    size_t n2 = 0;
    arpa_ent *e2 = fr_xmalloc((a2.n + 1) * sizeof(arpa_ent));
    double *sum_p2 = fr_xcalloc(V, sizeof(double)), *sum_p1 = fr_xcalloc(V, sizeof(double));
    for (size_t i = 0; i < a2.cap; i++) {
        if (!a2.keys[i]) continue;
        uint64_t k = a2.keys[i] - 1, v = k >> IDBITS, w = k & IDMASK;
        double p = FR_MAX(a2.val[i] - D2, 0) / S2[v] + D2 * T2[v] / S2[v] * p1[w];
        a2.val[i] = p; /* now the bigram probability */
        if (has_unk2(k)) continue;
        e2[n2++] = (arpa_ent){k, p, 1.0};
        sum_p2[v] += p;
        sum_p1[v] += p1[w];
    }
    double *bow1 = fr_xcalloc(V, sizeof(double));
    for (size_t v = 0; v < V; v++)
        bow1[v] = T2[v] > 0 ? FR_MAX(1 - sum_p2[v], 1e-12) / FR_MAX(1 - sum_p1[v], 1e-12) : 1.0;

    /* ---- trigrams ---- */
    size_t n3 = 0;
    arpa_ent *e3 = NULL;
    u64map ctx = {0}; /* (u,v) → S3, T3 via two maps */
    u64map ctxT = {0}, sum3 = {0}, sum2 = {0};
    double D3 = 0;
    if (max_order == 3) {
        D3 = kn_discount(&b->c3);
        for (size_t i = 0; i < b->c3.cap; i++) {
            if (!b->c3.keys[i]) continue;
            uint64_t uv = (b->c3.keys[i] - 1) >> IDBITS;
            u64map_add(&ctx, uv, b->c3.val[i]);
            u64map_add(&ctxT, uv, 1);
        }
        e3 = fr_xmalloc((b->c3.n + 1) * sizeof(arpa_ent));
        for (size_t i = 0; i < b->c3.cap; i++) {
            if (!b->c3.keys[i]) continue;
            uint64_t k = b->c3.keys[i] - 1, uv = k >> IDBITS, vw = k & ((1ull << (2 * IDBITS)) - 1);
            if (has_unk3(k) || b->c3.val[i] < min_count3) continue;
            double S = *u64map_get(&ctx, uv), T = *u64map_get(&ctxT, uv);
            double *pp2 = u64map_get(&a2, vw);
            FR_ASSERT(pp2);
            double p = FR_MAX(b->c3.val[i] - D3, 0) / S + D3 * T / S * *pp2;
            e3[n3++] = (arpa_ent){k, p, 1.0};
            u64map_add(&sum3, uv, p);
            u64map_add(&sum2, uv, *pp2);
        }
        for (size_t i = 0; i < n2; i++) {
            double *s3 = u64map_get(&sum3, e2[i].key);
            if (s3)
                e2[i].bow = FR_MAX(1 - *s3, 1e-12) / FR_MAX(1 - *u64map_get(&sum2, e2[i].key), 1e-12);
        }
    }
    qsort(e2, n2, sizeof *e2, ent_cmp);
    if (n3) qsort(e3, n3, sizeof *e3, ent_cmp);

    size_t n1 = V - 1; /* all but <unk> */
    fprintf(f, "\\data\\\nngram 1=%zu\nngram 2=%zu\n", n1, n2);
    if (max_order == 3) fprintf(f, "ngram 3=%zu\n", n3);
    fprintf(f, "\n\\1-grams:\n");
    char **ws = b->words.byid;
    for (size_t w = 0; w < V; w++) {
        if (w == W_UNK) continue;
        double lp = w == W_BOS ? -99.0 : log10(p1[w]);
        fprintf(f, "%.6f\t%s", lp, ws[w]);
        if (T2[w] > 0 && w != W_EOS) fprintf(f, "\t%.6f", log10(bow1[w]));
        fputc('\n', f);
    }
    fprintf(f, "\n\\2-grams:\n");
    for (size_t i = 0; i < n2; i++) {
        uint64_t k = e2[i].key;
        fprintf(f, "%.6f\t%s %s", log10(e2[i].p), ws[k >> IDBITS], ws[k & IDMASK]);
        if (max_order == 3 && u64map_get(&sum3, k)) fprintf(f, "\t%.6f", log10(e2[i].bow));
        fputc('\n', f);
    }
    if (max_order == 3) {
        fprintf(f, "\n\\3-grams:\n");
        for (size_t i = 0; i < n3; i++) {
            uint64_t k = e3[i].key;
            fprintf(f, "%.6f\t%s %s %s\n", log10(e3[i].p), ws[k >> (2 * IDBITS)],
                    ws[(k >> IDBITS) & IDMASK], ws[k & IDMASK]);
        }
    }
    fprintf(f, "\n\\end\\\n");
    if (st) {
        memset(st, 0, sizeof *st);
        st->sentences = b->sentences;
        st->tokens = b->tokens;
        st->oov_tokens = b->oov;
        st->n[0] = n1;
        st->n[1] = n2;
        st->n[2] = n3;
        st->discount[0] = D1;
        st->discount[1] = D2;
        st->discount[2] = D3;
    }
    free(a1); free(p1); free(S2); free(T2); free(e2); free(e3);
    free(sum_p2); free(sum_p1); free(bow1);
    u64map_free(&a2); u64map_free(&ctx); u64map_free(&ctxT); u64map_free(&sum3); u64map_free(&sum2);
    if (ferror(f)) {
        fr_err_set(err, "lm: write error");
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- WER */

static size_t split_words(const char *s, const char ***out) {
    size_t n = 0, cap = 16;
    const char **v = fr_xmalloc(cap * sizeof(char *));
    const char *p = s;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        if (n == cap) v = fr_xrealloc(v, (cap *= 2) * sizeof(char *));
        v[n++] = p;
        while (*p && *p != ' ') p++;
    }
    *out = v;
    return n;
}
static int word_eq(const char *a, const char *b) {
    while (*a && *a != ' ' && *a == *b) a++, b++;
    return (!*a || *a == ' ') && (!*b || *b == ' ');
}

size_t fr_wer_edits(const char *ref, const char *hyp, size_t *ref_words) {
    const char **r, **h;
    size_t nr = split_words(ref, &r), nh = split_words(hyp, &h);
    size_t *prev = fr_xmalloc((nh + 1) * sizeof(size_t)), *cur = fr_xmalloc((nh + 1) * sizeof(size_t));
    for (size_t j = 0; j <= nh; j++) prev[j] = j;
    for (size_t i = 1; i <= nr; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= nh; j++) {
            size_t sub = prev[j - 1] + !word_eq(r[i - 1], h[j - 1]);
            size_t del = prev[j] + 1, ins = cur[j - 1] + 1;
            cur[j] = FR_MIN(sub, FR_MIN(del, ins));
        }
        size_t *t = prev;
        prev = cur;
        cur = t;
    }
    size_t d = prev[nh];
    free(prev); free(cur); free(r); free(h);
    if (ref_words) *ref_words = nr;
    return d;
}
