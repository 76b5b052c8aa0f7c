/* mask.c — see mask.h for the rules.
 *
 * Design: the input is read once into "clusters" (one code point plus the combining marks after
 * it, or one invalid byte, or one default-ignorable code point) and "units" (the characters of
 * each cluster's NFKC compatibility decomposition, classified as digit, letter, separator or
 * other). Matching runs on the units; masking marks whole clusters, and a masked cluster counts
 * as "other" from then on. Two passes, IBANs first, then cards, each visiting every start
 * position from left to right against the current state: masking only ever turns characters
 * into "other", which can break a later candidate but never complete an earlier one, except by
 * making the kept digits of a card the start of a new digit group; those lie to the right of
 * the masked number and are visited after it. Cards go last because only their group-start rule
 * depends on what precedes them. The output is then written cluster by cluster at the same
 * offsets, which is why it can be written over the input.
 */
#include "base/mask.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/base.h"

enum { U_OTHER = 0, U_DIGIT, U_LETTER, U_SEP };

typedef struct unit {
    uint8_t cls; /* U_* */
    uint8_t val; /* digit 0-9, or letter 'A'-'Z' */
    uint32_t cl; /* cluster index */
} unit;

typedef struct cluster {
    size_t off, len; /* input bytes */
    uint8_t masked;  /* replaced in the output */
    uint8_t invalid; /* an invalid UTF-8 byte: written as '?' */
    uint8_t wide;    /* a fullwidth form (U+FF01-U+FF5E): masked as U+FF0A */
} cluster;

typedef struct text {
    cluster *c;
    size_t nc, cc;
    unit *u;
    size_t nu, cu;
} text;

static void add_cluster(text *t, size_t off, size_t len, int invalid, int wide) {
    if (t->nc == t->cc) {
        t->cc = t->cc ? t->cc * 2 : 64;
        t->c = fr_xrealloc(t->c, t->cc * sizeof *t->c);
    }
    t->c[t->nc++] = (cluster){off, len, 0, (uint8_t)invalid, (uint8_t)wide};
}

static void add_unit(text *t, int cls, int val) {
    if (t->nu == t->cu) {
        t->cu = t->cu ? t->cu * 2 : 64;
        t->u = fr_xrealloc(t->u, t->cu * sizeof *t->u);
    }
    t->u[t->nu++] = (unit){(uint8_t)cls, (uint8_t)val, (uint32_t)(t->nc - 1)};
}

static int is_sep(utf8proc_int32_t cp) {
    if (cp == '.' || cp == '/' || cp == '-' || cp == '\t') return 1;
    if ((cp >= 0x2010 && cp <= 0x2015) || cp == 0x2212) return 1;
    return cp > 0x7f && utf8proc_category(cp) == UTF8PROC_CATEGORY_ZS;
}

static void classify(text *t, utf8proc_int32_t cp) {
    if (cp >= '0' && cp <= '9') add_unit(t, U_DIGIT, cp - '0');
    else if (cp >= 'A' && cp <= 'Z') add_unit(t, U_LETTER, cp);
    else if (cp >= 'a' && cp <= 'z') add_unit(t, U_LETTER, cp - 'a' + 'A');
    else if (cp == ' ' || is_sep(cp)) add_unit(t, U_SEP, 0);
    else add_unit(t, U_OTHER, 0);
}

static int is_mark(utf8proc_int32_t cp) {
    utf8proc_category_t k = utf8proc_category(cp);
    return k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ME;
}

/* Read s[0..n) into clusters and units. */
static void read_text(text *t, const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) { /* ASCII fast path: its own NFKC form */
            add_cluster(t, i, 1, 0, 0);
            classify(t, s[i]);
            i++;
            continue;
        }
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) {
            add_cluster(t, i, 1, 1, 0);
            add_unit(t, U_OTHER, 0);
            i++;
            continue;
        }
        if (utf8proc_get_property(cp)->ignorable) { /* transparent: no unit */
            add_cluster(t, i, (size_t)k, 0, 0);
        } else if (is_mark(cp)) { /* joins the character before it, or is transparent */
            cluster *p = t->nc ? &t->c[t->nc - 1] : NULL;
            if (p && !p->invalid && p->off + p->len == i && t->nu && t->u[t->nu - 1].cl == t->nc - 1)
                p->len += (size_t)k;
            else
                add_cluster(t, i, (size_t)k, 0, 0);
        } else {
            add_cluster(t, i, (size_t)k, 0, cp >= 0xFF01 && cp <= 0xFF5E);
            utf8proc_int32_t d[32];
            int lbc = 0;
            utf8proc_ssize_t nd = utf8proc_decompose_char(
                cp, d, 32, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT | UTF8PROC_IGNORE | UTF8PROC_STRIPMARK, &lbc);
            if (nd < 0 || nd > 32) add_unit(t, U_OTHER, 0);
            else
                for (utf8proc_ssize_t j = 0; j < nd; j++) classify(t, d[j]);
        }
        i += (size_t)k;
    }
}

/* A unit's class with masking applied. */
static int cls(const text *t, size_t i) { return t->c[t->u[i].cl].masked ? U_OTHER : t->u[i].cls; }

/* Index of the next letter or digit after unit i across at most one separator run (i itself a
 * letter or digit), or SIZE_MAX. */
static size_t next_alnum(const text *t, size_t i) {
    size_t j = i + 1;
    for (int seps = 0; j < t->nu && cls(t, j) == U_SEP; j++)
        if (++seps > FR_MASK_MAX_SEP) return SIZE_MAX;
    if (j >= t->nu) return SIZE_MAX;
    int c = cls(t, j);
    return c == U_DIGIT || c == U_LETTER ? j : SIZE_MAX;
}

/* IBAN lengths by country (the IBAN registry). */
static const char iban_len[] =
    "AD24AE23AL28AT20AZ28BA20BE16BG22BH22BI27BR29BY28CH21CR22CY28CZ24DE22DJ27DK18DO28EE20EG29"
    "ES24FI18FK18FO18FR27GB22GE22GI23GL18GR27GT28HN28HR21HU28IE22IL23IQ23IS26IT27JO30KW30KZ20"
    "LB28LC32LI21LT20LU20LV21LY25MC27MD24ME22MK19MN20MR27MT31MU30NI28NL18NO15OM23PK24PL28PS29"
    "QA29RO24RU33SA24SC31SD18SE24SI19SK24SM27SO23ST25SV28TL23TN24TR26UA29VA22VG24XK20YE30";

static int iban_length(int a, int b) {
    for (const char *p = iban_len; *p; p += 4)
        if (p[0] == a && p[1] == b) return (p[2] - '0') * 10 + (p[3] - '0');
    return 0;
}

static void mask_unit(text *t, size_t i) { t->c[t->u[i].cl].masked = 1; }

static int iban_pass(text *t) {
    int found = 0;
    for (size_t p = 0; p < t->nu; p++) {
        if (cls(t, p) != U_LETTER) continue;
        size_t idx[34];
        int n = 0;
        for (size_t j = p; j != SIZE_MAX && n < 34; j = next_alnum(t, j)) idx[n++] = j;
        if (n < 15) continue;
        const unit *u = t->u;
        if (cls(t, idx[1]) != U_LETTER || cls(t, idx[2]) != U_DIGIT || cls(t, idx[3]) != U_DIGIT)
            continue;
        int want = iban_length(u[idx[0]].val, u[idx[1]].val);
        if (!want || n < want) continue;
        unsigned mod = 0; /* the BBAN, then country code and check digits; letters are 10..35 */
        for (int k = 0; k < want; k++) {
            const unit *c = &u[idx[(k + 4) % want]];
            mod = c->cls == U_DIGIT ? (mod * 10 + c->val) % 97 : (mod * 100 + (c->val - 'A' + 10)) % 97;
        }
        if (mod != 1) continue;
        for (int k = 2; k < want - 4; k++) mask_unit(t, idx[k]);
        found++;
    }
    return found;
}

static int luhn(const uint8_t *d, int n) {
    int sum = 0;
    for (int k = 0; k < n; k++) {
        int v = d[n - 1 - k];
        if (k & 1) v = v * 2 > 9 ? v * 2 - 9 : v * 2;
        sum += v;
    }
    return sum % 10 == 0;
}

static int card_pass(text *t) {
    int found = 0;
    for (size_t s = 0; s < t->nu; s++) {
        if (cls(t, s) != U_DIGIT || (s > 0 && cls(t, s - 1) == U_DIGIT)) continue; /* group start */
        size_t idx[19];
        uint8_t dig[19];
        int n = 0, best = 0;
        size_t j = s;
        for (;;) {
            if (n == 19) break; /* a twentieth digit: nothing longer can be a card */
            idx[n] = j;
            dig[n++] = t->u[j].val;
            int end = j + 1 >= t->nu || cls(t, j + 1) != U_DIGIT;
            if (!end) {
                j++;
                continue;
            }
            if (n >= 13 && luhn(dig, n)) best = n;
            j = next_alnum(t, j);
            if (j == SIZE_MAX || cls(t, j) != U_DIGIT) break;
        }
        if (!best) continue;
        for (int k = 0; k < best - 4; k++) mask_unit(t, idx[k]);
        found++;
    }
    return found;
}

int fr_mask(const char *in, size_t n, char *out) {
    const uint8_t *s = (const uint8_t *)in;
    int ascii = 1, digits = 0;
    for (size_t i = 0; i < n; i++) {
        ascii &= s[i] < 0x80;
        digits += s[i] >= '0' && s[i] <= '9';
    }
    if (ascii && digits < 2) { /* nothing can match: no card, no IBAN check digits */
        if (out != in) memcpy(out, in, n);
        out[n] = 0;
        return 0;
    }
    text t = {0};
    read_text(&t, s, n);
    int found = iban_pass(&t) + card_pass(&t);
    for (size_t i = 0; i < t.nc; i++) {
        const cluster *c = &t.c[i];
        char *o = out + c->off;
        if (c->masked && c->wide && c->len == 3) memcpy(o, "\xef\xbc\x8a", 3); /* U+FF0A FULLWIDTH ASTERISK */
        else if (c->masked) memset(o, '*', c->len);
        else if (c->invalid) *o = '?';
        else if (out != in) memcpy(o, in + c->off, c->len);
    }
    out[n] = 0;
    free(t.c);
    free(t.u);
    return found;
}

int fr_mask_inplace(char *s) { return fr_mask(s, strlen(s), s); }

char *fr_mask_dup(const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s);
    char *o = fr_xmalloc(n + 1);
    fr_mask(s, n, o);
    return o;
}

size_t fr_mask_span(const char *s, size_t n, int keep, char *out, size_t cap) {
    if (!cap) return 0;
    size_t alnum = 0;
    for (size_t i = 0; i < n; i++) alnum += (s[i] >= '0' && s[i] <= '9') || ((s[i] | 32) >= 'a' && (s[i] | 32) <= 'z');
    size_t seen = 0, o = 0;
    for (size_t i = 0; i < n && o + 1 < cap; i++) {
        char c = s[i];
        if ((c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z')) {
            seen++;
            if (alnum - seen >= (size_t)keep) c = '*';
        }
        out[o++] = c;
    }
    out[o] = 0;
    return o;
}
