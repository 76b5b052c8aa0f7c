/* fuzz_mask.c — libFuzzer harness for the masker (src/base/mask.c).
 *
 * The first byte picks the mode. Odd: the rest is the text, as is. Even: the rest is a program
 * that writes the text: each byte either copies a few raw bytes, or writes a Luhn-valid card
 * number of 13-19 digits or a valid IBAN (check digits computed here), each character in one of
 * several forms (ASCII, fullwidth, mathematical, superscript, circled digits; upper / lower /
 * fullwidth letters) with separators (spaces, no-break and other Unicode spaces, dots, slashes,
 * dashes, runs of them) and invisible characters (zero-width space / joiners, word joiner, BOM,
 * soft hyphen, combining marks) between them, so the mutator reaches real numbers.
 *
 * Property, checked on the output by a checker written here independently of the masker: the
 * output normalised with utf8proc (NFKC, default-ignorables and marks stripped) holds no
 * Luhn-valid run of 13-19 digits (digit groups joined by separator runs of at most
 * FR_MASK_MAX_SEP characters, starting and ending at group boundaries) and no valid IBAN
 * (registry country code and length, mod 97 == 1), whatever surrounds it. Also: the output is
 * valid UTF-8 of exactly the input's length, every byte is the input's or part of a mask
 * character ('*', U+FF0A) or a '?' for an invalid input byte, and masking the output again
 * changes nothing. Build and run: `make fuzz` (tests/fuzz/README.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/base.h"
#include "base/mask.h"

/* A failed check: say which, show the output, stop. */
#define FAIL(what)                                                                           \
    do {                                                                                     \
        fprintf(stderr, "fuzz_mask: %s (line %d)\n", what, __LINE__);                        \
        abort();                                                                             \
    } while (0)

/* ---- the independent checker ---- */

static const char countries[] =
    "AD24AE23AL28AT20AZ28BA20BE16BG22BH22BI27BR29BY28CH21CR22CY28CZ24DE22DJ27DK18DO28EE20EG29"
    "ES24FI18FK18FO18FR27GB22GE22GI23GL18GR27GT28HN28HR21HU28IE22IL23IQ23IS26IT27JO30KW30KZ20"
    "LB28LC32LI21LT20LU20LV21LY25MC27MD24ME22MK19MN20MR27MT31MU30NI28NL18NO15OM23PK24PL28PS29"
    "QA29RO24RU33SA24SC31SD18SE24SI19SK24SM27SO23ST25SV28TL23TN24TR26UA29VA22VG24XK20YE30";
#define N_COUNTRIES ((int)(sizeof countries - 1) / 4)

static int country_len(int a, int b) {
    for (int i = 0; i < N_COUNTRIES; i++)
        if (countries[4 * i] == a && countries[4 * i + 1] == b)
            return (countries[4 * i + 2] - '0') * 10 + countries[4 * i + 3] - '0';
    return 0;
}

static int is_digit(int32_t c) { return c >= '0' && c <= '9'; }
static int is_alpha(int32_t c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); }
static int is_alnum(int32_t c) { return is_digit(c) || is_alpha(c); }
static int is_sep(int32_t c) {
    return c == ' ' || c == '\t' || c == '.' || c == '/' || c == '-' || (c >= 0x2010 && c <= 0x2015) ||
           c == 0x2212 || (c > 0x7f && utf8proc_category(c) == UTF8PROC_CATEGORY_ZS);
}

/* Next index after i (an alnum) that is alnum across at most one separator run, or -1. */
static long next_after(const int32_t *c, long n, long i) {
    long j = i + 1, seps = 0;
    while (j < n && is_sep(c[j])) {
        if (++seps > FR_MASK_MAX_SEP) return -1;
        j++;
    }
    return j < n && is_alnum(c[j]) ? j : -1;
}

static int luhn_ok(const int *d, int n) {
    int s = 0;
    for (int i = 0; i < n; i++) {
        int v = d[n - 1 - i];
        if (i % 2) v = v * 2 > 9 ? v * 2 - 9 : v * 2;
        s += v;
    }
    return s % 10 == 0;
}

static int upper(int32_t c) { return c >= 'a' && c <= 'z' ? (int)(c - 32) : (int)c; }

/* 1 when the normalised text c[0..n) still holds a card number or an IBAN. */
static int leaks(const int32_t *c, long n) {
    for (long s = 0; s < n; s++) {
        if (!is_digit(c[s]) || (s > 0 && is_digit(c[s - 1]))) continue;
        int d[40], nd = 0;
        long j = s;
        while (j >= 0 && nd <= 19) {
            while (j < n && is_digit(c[j]) && nd < 40) d[nd++] = (int)(c[j++] - '0');
            if (nd >= 13 && nd <= 19 && luhn_ok(d, nd)) return 1;
            if (j >= n || is_digit(c[j])) break;
            j = next_after(c, n, j - 1);
            if (j >= 0 && !is_digit(c[j])) break;
        }
    }
    for (long s = 0; s < n; s++) {
        if (!is_alpha(c[s])) continue;
        int32_t a[34];
        int na = 0;
        for (long j = s; j >= 0 && na < 34; j = next_after(c, n, j)) a[na++] = c[j];
        if (na < 4 || !is_alpha(a[1]) || !is_digit(a[2]) || !is_digit(a[3])) continue;
        int want = country_len(upper(a[0]), upper(a[1]));
        if (!want || na < want) continue;
        int m = 0;
        for (int k = 0; k < want; k++) {
            int32_t ch = a[(k + 4) % want];
            m = is_digit(ch) ? (m * 10 + (int)(ch - '0')) % 97 : (m * 100 + upper(ch) - 'A' + 10) % 97;
        }
        if (m == 1) return 1;
    }
    return 0;
}

/* ---- the text writer (even modes) ---- */

typedef struct rd {
    const uint8_t *p;
    size_t n, i;
} rd;
static unsigned next(rd *r) { return r->i < r->n ? r->p[r->i++] : 0; }

static void put_cp(fr_buf *b, utf8proc_int32_t cp) {
    uint8_t u[4];
    utf8proc_ssize_t k = utf8proc_encode_char(cp, u);
    fr_buf_append(b, u, (size_t)k);
}

static const char *const seps[] = {" ", "  ", ".", "/", "-", " - ", "\xc2\xa0", "\xe2\x80\xaf",
                                   "\xe3\x80\x80", "\xe2\x80\x89", "\xe2\x80\x93", "\xef\xbc\x8d",
                                   "\t", "\xc2\xa0\xc2\xa0", ". ", "          "};
static const char *const invis[] = {"\xe2\x80\x8b", "\xe2\x80\x8c", "\xe2\x80\x8d", "\xe2\x81\xa0",
                                    "\xef\xbb\xbf", "\xc2\xad", "\xcc\x81", "\xcc\xb8"};

static void put_digit(fr_buf *b, int d, unsigned form) {
    static const utf8proc_int32_t sup[10] = {0x2070, 0xB9, 0xB2, 0xB3, 0x2074, 0x2075, 0x2076, 0x2077, 0x2078, 0x2079};
    switch (form % 6) {
    case 0: case 1: put_cp(b, '0' + d); break;
    case 2: put_cp(b, 0xFF10 + d); break;                    /* fullwidth */
    case 3: put_cp(b, 0x1D7CE + d); break;                   /* mathematical bold */
    case 4: put_cp(b, sup[d]); break;                        /* superscript */
    default: put_cp(b, d ? 0x2460 + d - 1 : 0x24EA); break;  /* circled */
    }
}

static void put_letter(fr_buf *b, int L, unsigned form) {
    switch (form % 3) {
    case 0: put_cp(b, L); break;
    case 1: put_cp(b, L + 32); break;
    default: put_cp(b, 0xFF21 + L - 'A'); break; /* fullwidth */
    }
}

/* Between two characters of a number: nothing, a separator or an invisible character. */
static void put_gap(fr_buf *b, rd *r, unsigned style) {
    unsigned g = next(r);
    if ((g & 3) == 0 || !(style & 1)) return;
    if (g & 4) fr_buf_puts(b, invis[(g >> 3) % FR_ARRAY_LEN(invis)]);
    else fr_buf_puts(b, seps[(g >> 3) % FR_ARRAY_LEN(seps)]);
}

static void write_card(fr_buf *b, rd *r) {
    unsigned h = next(r);
    int n = 13 + (int)(h % 7), d[19];
    for (int i = 0; i < n - 1; i++) d[i] = (int)(next(r) % 10);
    for (d[n - 1] = 0; !luhn_ok(d, n); d[n - 1]++) {}
    unsigned style = next(r), form = style >> 1;
    for (int i = 0; i < n; i++) {
        put_digit(b, d[i], form & 0x80 ? next(r) : form);
        if (i + 1 < n && ((style & 2) ? (i % 4 == 3) : 1)) put_gap(b, r, style);
    }
}

static void write_iban(fr_buf *b, rd *r) {
    int ci = (int)(next(r) % N_COUNTRIES), n = country_len(countries[4 * ci], countries[4 * ci + 1]);
    char s[35];
    s[0] = countries[4 * ci], s[1] = countries[4 * ci + 1], s[2] = s[3] = '0';
    for (int i = 4; i < n; i++) {
        unsigned v = next(r);
        s[i] = (char)(v & 1 ? 'A' + (v >> 1) % 26 : '0' + (v >> 1) % 10);
    }
    int m = 0;
    for (int k = 0; k < n; k++) {
        char ch = s[(k + 4) % n];
        m = is_digit(ch) ? (m * 10 + ch - '0') % 97 : (m * 100 + ch - 'A' + 10) % 97;
    }
    int check = 98 - m;
    s[2] = (char)('0' + check / 10), s[3] = (char)('0' + check % 10);
    unsigned style = next(r), form = style >> 1;
    for (int i = 0; i < n; i++) {
        if (is_digit(s[i])) put_digit(b, s[i] - '0', form & 0x80 ? next(r) : form % 3);
        else put_letter(b, s[i], form & 0x40 ? next(r) : form);
        if (i + 1 < n && ((style & 2) ? (i % 4 == 3) : 1)) put_gap(b, r, style);
    }
}

static void write_text(fr_buf *b, const uint8_t *p, size_t n) {
    rd r = {p, n, 0};
    while (r.i < r.n && b->len < 8192) {
        unsigned op = next(&r);
        switch (op % 4) {
        case 0: write_card(b, &r); break;
        case 1: write_iban(b, &r); break;
        case 2: if (op & 4) fr_buf_puts(b, seps[(op >> 3) % FR_ARRAY_LEN(seps)]);
                else put_digit(b, (int)((op >> 3) % 10), op >> 5); break;
        default:
            for (unsigned k = (op >> 2) % 8; k > 0 && r.i < r.n; k--) {
                uint8_t c = (uint8_t)next(&r);
                fr_buf_append(b, &c, 1);
            }
        }
    }
}

/* ---- the property ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0 || size > 16384) return 0;
    fr_buf in = {0};
    if (data[0] & 1) fr_buf_append(&in, data + 1, size - 1);
    else write_text(&in, data + 1, size - 1);
    fr_buf_cstr(&in);
    size_t n = in.len;
    char *out = fr_xmalloc(n + 1);
    fr_mask(in.data, n, out);
    if (out[n] != 0) FAIL("no NUL after the output");
    if (!fr_utf8_valid(out, n)) FAIL("output is not valid UTF-8");
    for (size_t i = 0; i < n; i++) {
        unsigned char o = (unsigned char)out[i];
        if (i + 2 < n && !memcmp(out + i, "\xef\xbc\x8a", 3) && memcmp(in.data + i, "\xef\xbc\x8a", 3)) {
            i += 2; /* a fullwidth asterisk over a fullwidth character */
            continue;
        }
        if (o == (unsigned char)in.data[i] || o == '*' || o == '?') continue;
        fprintf(stderr, "byte %zu: input %02x, output %02x\n", i, (unsigned char)in.data[i], o);
        FAIL("a byte that is neither the input's nor a mask character");
    }
    /* the property, on the normalised output (NUL bytes cut the text for utf8proc: check each piece) */
    for (size_t a = 0; a < n;) {
        size_t e = a;
        while (e < n && out[e]) e++;
        utf8proc_uint8_t *norm = NULL;
        utf8proc_ssize_t k = utf8proc_map((const utf8proc_uint8_t *)out + a, (utf8proc_ssize_t)(e - a), &norm,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT |
                                              UTF8PROC_IGNORE | UTF8PROC_STRIPMARK);
        if (k < 0) FAIL("utf8proc cannot normalise the output");
        int32_t *cps = fr_xmalloc(((size_t)k + 1) * sizeof *cps);
        long nc = 0;
        for (utf8proc_ssize_t i = 0; i < k;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t l = utf8proc_iterate(norm + i, k - i, &cp);
            if (l <= 0) FAIL("utf8proc output is not UTF-8");
            cps[nc++] = cp;
            i += l;
        }
        if (leaks(cps, nc)) {
            fprintf(stderr, "input:  %s\noutput: %s\n", in.data, out);
            FAIL("a card number or an IBAN survived");
        }
        free(cps);
        free(norm);
        a = e + 1;
    }
    /* masking the output again finds nothing */
    char *again = fr_xmalloc(n + 1);
    if (fr_mask(out, n, again) != 0 || memcmp(again, out, n)) FAIL("masking the output again changed it");
    free(again);
    free(out);
    fr_buf_free(&in);
    return 0;
}
