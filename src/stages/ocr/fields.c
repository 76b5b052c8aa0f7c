/* fields.c — key-field extraction from OCR text; see fields.h. */
#include "stages/ocr/fields.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <stdint.h>
#include <utf8proc.h>

#include "base/base.h"

#define LINE_MAX_BYTES 512

static void fields_currency(const char *text, const char *amount_line, size_t amount_len,
                            char *out, size_t cap);
static bool ascii_alpha(unsigned char c);

/* A line squeezed (whitespace removed, ASCII lowered) with a map back to the original bytes. */
typedef struct sq_line {
    char s[LINE_MAX_BYTES];    /* squeezed text */
    int map[LINE_MAX_BYTES];   /* original offset of each squeezed byte */
    int n;                     /* squeezed length */
    const char *orig;          /* original line start */
    int orig_len;              /* original line length */
} sq_line;

static void squeeze(const char *line, int len, sq_line *q) {
    q->n = 0;
    q->orig = line;
    q->orig_len = len;
    for (int i = 0; i < len && q->n < LINE_MAX_BYTES - 1; i++) {
        unsigned char c = (unsigned char)line[i];
        if (c == ' ' || c == '\t' || c == '\r') continue;
        q->s[q->n] = (char)(c < 0x80 ? tolower(c) : c);
        q->map[q->n++] = i;
    }
    q->s[q->n] = 0;
}

/* Skip separators (":", "：", "#", ".", "-") after a label; returns squeezed offset. */
static int skip_sep(const sq_line *q, int k) {
    for (;;) {
        if (k < q->n && (q->s[k] == ':' || q->s[k] == '#' || q->s[k] == '.' || q->s[k] == ';'))
            k++;
        else if (k + 3 <= q->n && !memcmp(q->s + k, "\xef\xbc\x9a", 3)) k += 3; /* fullwidth : */
        else return k;
    }
}

/* Original text from squeezed offset k to the end of the line. */
static const char *orig_from(const sq_line *q, int k) {
    return k < q->n ? q->orig + q->map[k] : q->orig + q->orig_len;
}

/* ---- labels ------------------------------------------------------------------------------------ */

#define LABEL_CPS 24 /* longest label in code points */

/* Decode UTF-8 s[0..n) into code points cp[] with their byte offsets off[] (off[count] = n).
 * Invalid bytes become U+FFFD of one byte. Returns the count (at most cap). */
static int utf8_decode(const char *s, int n, uint32_t *cp, int *off, int cap) {
    int c = 0, i = 0;
    while (i < n && c < cap) {
        utf8proc_int32_t u = 0;
        utf8proc_ssize_t l = utf8proc_iterate((const utf8proc_uint8_t *)s + i, n - i, &u);
        if (l <= 0) u = 0xFFFD, l = 1;
        off[c] = i;
        cp[c++] = (uint32_t)u;
        i += (int)l;
    }
    off[c] = i;
    return c;
}

/* Levenshtein distance of a[0..na) and b[0..nb), both at most LABEL_CPS + 1 long. */
static int edit_distance(const uint32_t *a, int na, const uint32_t *b, int nb) {
    int row[LABEL_CPS + 3];
    for (int j = 0; j <= nb; j++) row[j] = j;
    for (int i = 1; i <= na; i++) {
        int diag = row[0];
        row[0] = i;
        for (int j = 1; j <= nb; j++) {
            int up = row[j];
            int v = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < v) v = up + 1;
            if (row[j - 1] + 1 < v) v = row[j - 1] + 1;
            row[j] = v;
            diag = up;
        }
    }
    return row[nb];
}

/* A label may be matched with one edit (OCR misreads a character: "收吉方" for "收款方", drops one:
 * "票号码" for "发票号码") when it is long enough that one edit leaves it recognisable: 3 or more
 * CJK code points, or 7 or more ASCII letters. Shorter labels match exactly only. */
static bool label_fuzzy_ok(const uint32_t *cp, int n) {
    bool cjk = n > 0 && cp[0] >= 0x2E80;
    /* a label with punctuation ("receipt#", "no.") is exact only: one edit would drop the mark
     * and leave a plain word ("Receipt" is a title, not the label "receipt#") */
    for (int i = 0; i < n; i++)
        if (cp[i] < 0x80 && !((cp[i] | 32) >= 'a' && (cp[i] | 32) <= 'z')) return false;
    return n <= LABEL_CPS && (cjk ? n >= 3 : n >= 7);
}

/* Whether a one-edit label window s[st..st+m) of the squeezed line (ns code points) stands where
 * a label stands: at the start of the line, or followed by something that is not an ASCII letter
 * (a separator, a digit, the end of the line). A word inside a name ("Ironbridge SuppliesLLC",
 * one edit from "supplier") is no label. */
static bool label_fuzzy_place(const uint32_t *s, int ns, int st, int m) {
    if (st == 0 || st + m >= ns) return true;
    uint32_t c = s[st + m];
    return !(c < 0x80 && (c | 32) >= 'a' && (c | 32) <= 'z');
}

/* Find the first label of labels[] (priority order) in the squeezed line: exact first, then
 * within one edit (label_fuzzy_ok), where the window must be closer to the label than to any
 * of neg[] (words one edit away that mean something else: 发票代码 for 发票号码, 付款方 for
 * 收款方). Returns the squeezed byte offset just past the match and sets *which, or -1. */
static int find_label_neg(const sq_line *q, const char *const *labels, size_t nl,
                          const char *const *neg, size_t nneg, size_t *which) {
    /* labels are looked for with the digits OCR reads for letters inside a word folded back
     * ("Tota1" is "total", "Se11er" "seller"): a 1 or 0 right after a letter; same offsets */
    char f[LINE_MAX_BYTES];
    for (int i = 0; i <= q->n; i++) {
        char c = q->s[i];
        bool after = i > 0 && f[i - 1] >= 'a' && f[i - 1] <= 'z';
        f[i] = after && c == '1' ? 'l' : after && c == '0' ? 'o' : c;
    }
    for (size_t i = 0; i < nl; i++) {
        const char *p = strstr(f, labels[i]);
        if (p) {
            *which = i;
            return (int)(p - f) + (int)strlen(labels[i]);
        }
    }
    uint32_t s[LINE_MAX_BYTES];
    int off[LINE_MAX_BYTES + 1];
    int ns = utf8_decode(f, q->n, s, off, LINE_MAX_BYTES);
    for (size_t i = 0; i < nl; i++) {
        uint32_t lab[LABEL_CPS + 1];
        int loff[LABEL_CPS + 2];
        int nlab = utf8_decode(labels[i], (int)strlen(labels[i]), lab, loff, LABEL_CPS + 1);
        if (!label_fuzzy_ok(lab, nlab)) continue;
        int min_m = nlab - 1 < 3 ? 3 : nlab - 1;
        for (int st = 0; st < ns; st++) {
            for (int m = nlab + 1; m >= min_m; m--) { /* longest window first */
                if (st + m > ns) continue;
                if (edit_distance(lab, nlab, s + st, m) > 1) continue;
                /* the window's ends must be label characters (no edit at the edges) */
                if (s[st] != lab[0] && s[st + m - 1] != lab[nlab - 1]) continue;
                if (!label_fuzzy_place(s, ns, st, m)) continue;
                bool other = false;
                for (size_t k = 0; k < nneg && !other; k++) {
                    uint32_t ng[LABEL_CPS + 1];
                    int noff[LABEL_CPS + 2];
                    int nn = utf8_decode(neg[k], (int)strlen(neg[k]), ng, noff, LABEL_CPS + 1);
                    for (int mm = nn - 1; mm <= nn + 1 && !other; mm++)
                        for (int t = st - 1; t <= st + 1 && !other; t++)
                            if (t >= 0 && mm > 0 && t + mm <= ns &&
                                edit_distance(ng, nn, s + t, mm) == 0)
                                other = true;
                    if (edit_distance(ng, nn, s + st, m) <= edit_distance(lab, nlab, s + st, m))
                        other = true;
                }
                if (other) continue;
                *which = i;
                return off[st + m];
            }
        }
    }
    return -1;
}

static int find_label(const sq_line *q, const char *const *labels, size_t nl, size_t *which) {
    return find_label_neg(q, labels, nl, NULL, 0, which);
}

void fr_fields_norm_id(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (isspace(c)) continue;
        out[n++] = (char)toupper(c);
    }
    out[n] = 0;
}

void fr_fields_norm_payee(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; *s && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80) {
            /* drop fullwidth punctuation (U+FF00 block) and ideographic punctuation (U+3000 block) */
            if ((c == 0xEF && (unsigned char)s[1] == 0xBC) || (c == 0xE3 && (unsigned char)s[1] == 0x80)) {
                s += 2;
                continue;
            }
            out[n++] = (char)c;
        } else if (isalnum(c)) out[n++] = (char)tolower(c);
    }
    out[n] = 0;
}

/* Digits with separators from p: '.', ',', ';' (OCR reads a bold comma as ';'), '\''. The
 * decimal mark is the last '.' or ',' followed by one or two digits (both conventions:
 * "1,234.56", "1.234,56", "1234,5"); every other separator groups thousands ("1,234" and
 * "1.234" are 1234). More than two decimals after a '.' that is the only separator are cut to
 * two ("12.3456" -> "12.34"). */
static bool amount_at(const char *p, char *out, size_t cap) {
    char run[64];
    size_t n = 0;
    while (n < sizeof run - 1 && (isdigit((unsigned char)*p) || *p == '.' || *p == ',' ||
                                  *p == ';' || *p == '\''))
        run[n++] = *p++;
    while (n && !isdigit((unsigned char)run[n - 1])) n--;
    run[n] = 0;
    if (!n) return false;
    int last = -1, nsep = 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)run[i])) {
            if (i == 0 || !isdigit((unsigned char)run[i - 1])) continue; /* ",;" counts once */
            nsep++;
            last = (int)i;
        }
    int dec = -1;
    if (last >= 0 && (run[last] == '.' || run[last] == ',')) {
        size_t tail = n - (size_t)last - 1;
        if (tail == 1 || tail == 2) dec = last;
        else if (tail > 3 && run[last] == '.' && nsep == 1) dec = last;
    }
    char ip[48], fp[3] = "00";
    size_t ni = 0;
    for (int i = 0; i < (dec >= 0 ? dec : (int)n) && ni < sizeof ip - 1; i++)
        if (isdigit((unsigned char)run[i])) ip[ni++] = run[i];
    ip[ni] = 0;
    if (dec >= 0) {
        fp[0] = run[dec + 1];
        fp[1] = dec + 2 < (int)n ? run[dec + 2] : '0';
    }
    const char *ipp = ip;
    while (ipp[0] == '0' && ipp[1]) ipp++;
    snprintf(out, cap, "%s.%s", ni ? ipp : "0", fp);
    return true;
}

bool fr_fields_norm_amount(const char *in, char *out, size_t cap) {
    /* squeeze spaces ("1 234,50"), map fullwidth comma/full stop (U+FF0C, U+FF0E) to ASCII */
    char s[LINE_MAX_BYTES];
    size_t m = 0;
    for (const char *c = in; *c && m < sizeof s - 1; c++) {
        if (*c == ' ' || *c == '\t') continue;
        if ((unsigned char)c[0] == 0xEF && (unsigned char)c[1] == 0xBC &&
            ((unsigned char)c[2] == 0x8C || (unsigned char)c[2] == 0x8E)) {
            s[m++] = (unsigned char)c[2] == 0x8C ? ',' : '.';
            c += 2;
            continue;
        }
        s[m++] = *c;
    }
    s[m] = 0;
    for (const char *p = s; *p; p++)
        if (isdigit((unsigned char)*p)) return amount_at(p, out, cap);
    return false;
}

static const char *const MONTHS[12] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};

static int month_at(const char *p) {
    for (int m = 0; m < 12; m++)
        if (!strncasecmp(p, MONTHS[m], 3)) return m + 1;
    return 0;
}

static const char *const MONTH_NAMES[12] = {"january", "february", "march", "april", "may",
                                             "june", "july", "august", "september", "october",
                                             "november", "december"};

/* The month whose name (full, or its first 3 or more letters) is exactly the run of letters at
 * p, or 0. */
static int month_word(const char *p) {
    size_t n = 0;
    while (isalpha((unsigned char)p[n])) n++;
    if (n < 3) return 0;
    for (int m = 0; m < 12; m++)
        if (n <= strlen(MONTH_NAMES[m]) && !strncasecmp(p, MONTH_NAMES[m], n)) return m + 1;
    return 0;
}

/* Whether a numeric date may end at p: no digit follows, or a time of day does, fused to it by a
 * reader that drops the space ("03/10/202012:53"). */
static bool date_end(const char *p) {
    if (!isdigit((unsigned char)p[0])) return true;
    int i = isdigit((unsigned char)p[1]) ? 2 : 1;
    return p[i] == ':' && isdigit((unsigned char)p[i + 1]) && isdigit((unsigned char)p[i + 2]) &&
           !isdigit((unsigned char)p[i + 3]);
}

static bool valid_ymd(int y, int m, int d) {
    return y >= 1900 && y <= 2100 && m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

/* The date in s (see fields.h). A numeric date with the year last and both leading numbers
 * 12 or less ("03/05/2024", "03-05-2024") is day first unless month_first; *ambiguous says it was
 * such a date. Dotted ones ("03.05.2024") are always day first. */
static bool date_parse(const char *s, bool month_first, char *out, size_t cap, bool *ambiguous) {
    /* work on a squeezed copy: "2024 年 03 月 15 日" -> "2024年03月15日" */
    char b[LINE_MAX_BYTES];
    size_t n = 0;
    if (ambiguous) *ambiguous = false;
    for (const char *p = s; *p && n < sizeof b - 1; p++)
        if (*p != ' ' && *p != '\t') b[n++] = *p;
    b[n] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = b + i;
        int y = 0, m = 0, d = 0, k = 0;
        char s1 = 0, s2 = 0;
        if (isdigit((unsigned char)*p) && (i == 0 || !isdigit((unsigned char)p[-1]))) {
            /* YYYY-MM-DD, YYYY/M/D, YYYY.MM.DD, YYYY年M月D日 */
            if ((sscanf(p, "%4d%c%2d%c%2d%n", &y, &s1, &m, &s2, &d, &k) == 5 && s1 == s2 &&
                 (s1 == '-' || s1 == '/' || s1 == '.')) ||
                sscanf(p, "%4d\xe5\xb9\xb4%2d\xe6\x9c\x88%2d%n", &y, &m, &d, &k) == 3) {
                if (y >= 1000 && valid_ymd(y, m, d) && date_end(p + k)) goto ok;
            }
            /* DD/MM/YYYY, DD.MM.YYYY, DD-MM-YYYY (MM/DD/YYYY when the first is over 12 or
             * when month_first for an ambiguous one) */
            int a = 0, c = 0;
            if (sscanf(p, "%2d%c%2d%c%4d%n", &a, &s1, &c, &s2, &y, &k) == 5 && s1 == s2 &&
                (s1 == '/' || s1 == '.' || s1 == '-') && y >= 1000 && date_end(p + k)) {
                /* a dotted date is day first wherever it is written (15.03.2024, 05.03.2024):
                 * the month-first convention writes slashes */
                bool amb = a <= 12 && c <= 12 && a != c && s1 != '.';
                if (a > 12 || a == c || (c <= 12 && (s1 == '.' || !month_first))) d = a, m = c;
                else d = c, m = a;
                if (valid_ymd(y, m, d)) {
                    if (ambiguous) *ambiguous = amb;
                    goto ok;
                }
            }
            /* DDMonthYYYY (squeezed "15March2024", "5Mar.2024") */
            int dd = 0, kk = 0, mm = 0;
            if (sscanf(p, "%2d%n", &dd, &kk) == 1) {
                mm = month_at(p + kk);
                if (!mm && dd >= 10 && dd % 10 == 0 && !strncasecmp(p + kk, "ct", 2)) {
                    /* "40ctober2025": the O of October read as 0 and taken into the day */
                    char oct[16] = "o";
                    size_t l = 1;
                    for (const char *r = p + kk; isalpha((unsigned char)*r) && l < sizeof oct - 1;
                         r++)
                        oct[l++] = *r;
                    oct[l] = 0;
                    if (month_word(oct) == 10) mm = 10, dd /= 10;
                }
            }
            if (mm > 0) {
                const char *q = p + kk;
                while (isalpha((unsigned char)*q)) q++;
                if (*q == '.') q++;
                if (*q == ',') q++;
                if (sscanf(q, "%4d", &y) == 1 && valid_ymd(y, mm, dd)) {
                    d = dd;
                    m = mm;
                    goto ok;
                }
            }
        } else if (isalpha((unsigned char)*p) && (m = month_at(p)) > 0 &&
                   (i == 0 || !isalpha((unsigned char)p[-1]) || month_word(p) > 0)) {
            /* MonthDD,YYYY ("March5,2024", "Mar.5,2024"); inside a word only when the letters
             * from here are a month's name (the reader fused it to the word before it:
             * "StudioDateJun25,2023") */
            const char *q = p;
            while (isalpha((unsigned char)*q)) q++;
            if (*q == '.') q++;
            if (sscanf(q, "%2d,%4d", &d, &y) == 2 && valid_ymd(y, m, d)) goto ok;
        }
        continue;
    ok:
        snprintf(out, cap, "%04d-%02d-%02d", y, m, d);
        return true;
    }
    return false;
}

/* Order of an ambiguous numeric date from the page's own evidence: another numeric date on the
 * page whose first number is over 12 says day first, whose second is over 12 says month first;
 * without one, month first on a dollar invoice, day first otherwise (GBP, EUR, unknown). */
static bool date_month_first(const char *text, const char *currency) {
    int day_first = 0, month_first = 0;
    for (const char *p = text; *p; p++) {
        if (!isdigit((unsigned char)*p) || (p > text && isdigit((unsigned char)p[-1]))) continue;
        int a = 0, c = 0, y = 0, k = 0;
        char s1 = 0, s2 = 0;
        if (sscanf(p, "%2d%c%2d%c%4d%n", &a, &s1, &c, &s2, &y, &k) == 5 && s1 == s2 &&
            (s1 == '/' || s1 == '.' || s1 == '-') && y >= 1900 && y <= 2100 &&
            date_end(p + k) && a >= 1 && c >= 1 && a <= 31 && c <= 31) {
            if (a > 12 && c <= 12) day_first++;
            else if (c > 12 && a <= 12) month_first++;
        }
    }
    if (day_first != month_first) return month_first > day_first;
    return !strcmp(currency, "USD");
}

bool fr_fields_norm_date(const char *s, char *out, size_t cap) {
    return date_parse(s, false, out, cap, NULL);
}

static void copy_trim(char *dst, size_t cap, const char *s, const char *end) {
    while (s < end && (*s == ' ' || *s == '\t' || *s == ':')) s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    size_t n = FR_MIN((size_t)(end - s), cap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
}

/* The text as the extractor reads it (malloc'd): NFKC (fullwidth digits, letters and
 * punctuation become ASCII: "１２３，４５" -> "123,45", "：" -> ":", "№" -> "No", "￥" -> "¥"),
 * then dashes U+2010..U+2015 and U+2212 become '-'. Invalid UTF-8 is kept as it is. */
/* Whether the '/' at r (in t) is a decimal point read as a slash: after a figure with a group
 * separator ("9,113/18", "1.234/50") and before exactly two figures, so never in a date. */
static bool slash_is_point(const char *t, const char *r) {
    if (!isdigit((unsigned char)r[1]) || !isdigit((unsigned char)r[2]) || isdigit((unsigned char)r[3]) ||
        r[3] == '/')
        return false;
    int d = 0;
    const char *p = r;
    while (p > t && isdigit((unsigned char)p[-1])) p--, d++;
    return d == 3 && p - t >= 2 && (p[-1] == ',' || p[-1] == '.') && isdigit((unsigned char)p[-2]);
}

static char *fields_normalise(const char *text) {
    char *t = (char *)utf8proc_NFKC((const utf8proc_uint8_t *)text);
    if (!t) {
        size_t n = strlen(text);
        t = malloc(n + 1);
        if (!t) return NULL;
        memcpy(t, text, n + 1);
    }
    char *w = t;
    for (const char *r = t; *r;) {
        unsigned char c0 = (unsigned char)r[0], c1 = c0 ? (unsigned char)r[1] : 0,
                      c2 = c1 ? (unsigned char)r[2] : 0;
        if (c0 == 0xE2 && ((c1 == 0x80 && c2 >= 0x90 && c2 <= 0x95) || (c1 == 0x88 && c2 == 0x92))) {
            *w++ = '-';
            r += 3;
        } else if (c0 == '1' && r - t >= 2 && islower((unsigned char)r[-1]) &&
                   islower((unsigned char)r[-2]) && !isalnum(c1)) {
            /* an l read as 1 at the end of a word ("Tota1:", "Subtota1") */
            *w++ = 'l';
            r++;
        } else if (c0 == '/' && slash_is_point(t, r)) {
            *w++ = '.';
            r++;
        } else if (c0 == 'l' && (r == t || !isalnum((unsigned char)r[-1])) && islower(c1) &&
                   !strchr("aeiouylb", (int)c1) && islower(c2)) {
            /* a capital I read as l at a word's start, before a consonant no English word
             * starts "l" with ("lnvoice", "lronbridge", "lnc.") */
            *w++ = 'I';
            r++;
        } else *w++ = *r++;
    }
    *w = 0;
    return t;
}

/* The invoice number at s (up to end): the first token of [A-Za-z0-9-/_.] holding a digit,
 * trailing '.' dropped. A dash read as '.' is repaired where the pattern says so: a letter
 * prefix then digit groups ("INV.2024.0042"), or a token whose other separators are dashes
 * ("INV-2024.0042"); a '.' between digits alone ("12.345") stays. Returns false if none. */
static bool invoice_token(const char *s, const char *end, char *out, size_t cap) {
    while (s < end && (*s == ' ' || *s == ':' || *s == '#' || *s == '.')) s++;
    const char *t = s;
    while (t < end && (isalnum((unsigned char)*t) || *t == '-' || *t == '/' || *t == '_' ||
                       *t == '.'))
        t++;
    while (t > s && (t[-1] == '.' || t[-1] == '-')) t--;
    bool digit = false, dash = false, dot = false;
    for (const char *c = s; c < t; c++) {
        digit |= isdigit((unsigned char)*c) != 0;
        dash |= *c == '-';
        dot |= *c == '.';
    }
    if (!digit || t - s < 2) return false;
    copy_trim(out, cap, s, t);
    if (dot) {
        /* letter prefix then '.'-separated digits: every '.' after the prefix is a dash */
        size_t i = 0;
        while (isalpha((unsigned char)out[i])) i++;
        bool prefix_then_digits = i > 0 && out[i] == '.';
        for (size_t j = i; out[j] && prefix_then_digits; j++)
            prefix_then_digits = isdigit((unsigned char)out[j]) || out[j] == '.' || out[j] == '-';
        if (prefix_then_digits || dash)
            for (char *c = out; *c; c++)
                if (*c == '.') *c = '-';
    }
    /* a letter prefix with an O or I read as a figure ("N0-2020-3565", "1NV-2019-4542"): a
     * prefix of 2-4 before the first dash, holding a capital, whose other characters are 0 and 1 */
    char *dsh = strchr(out, '-');
    if (dsh && dsh - out >= 2 && dsh - out <= 4) {
        bool cap_seen = false, only = true;
        for (char *c = out; c < dsh; c++) {
            cap_seen |= isupper((unsigned char)*c) != 0;
            only &= isupper((unsigned char)*c) || *c == '0' || *c == '1';
        }
        if (cap_seen && only)
            for (char *c = out; c < dsh; c++)
                if (*c == '0' || *c == '1') *c = *c == '0' ? 'O' : 'I';
    }
    return true;
}

/* Digits the reader gives for letters inside a name, put back: a run of 0 and 1 between two
 * ASCII letters, or at a word's start before a lower-case letter, is the letters O/o and l
 * ("0utfitters" -> "Outfitters", "Se11er" -> "Seller"); digits beside digits or spaces stay
 * ("Studio 54", "3M"). In place. */
static void name_letters(char *s) {
    for (size_t i = 0; s[i]; i++) {
        if (s[i] != '0' && s[i] != '1') continue;
        size_t e = i;
        while (s[e] == '0' || s[e] == '1') e++;
        bool before = i > 0 && ascii_alpha((unsigned char)s[i - 1]);
        bool word_start = i == 0 || s[i - 1] == ' ';
        bool after_lower = s[e] >= 'a' && s[e] <= 'z';
        if ((before && ascii_alpha((unsigned char)s[e])) || (word_start && after_lower)) {
            bool upper = word_start || (before && isupper((unsigned char)s[i - 1]) &&
                                        isupper((unsigned char)s[e]));
            for (size_t j = i; j < e; j++)
                s[j] = s[j] == '0' ? (upper ? 'O' : 'o') : (upper && j == i && word_start ? 'I' : 'l');
        }
        i = e - 1;
    }
}

/* Whether squeezed offset k of q starts a word in the original line (its first byte, or after a
 * byte that is no ASCII letter or digit). */
static bool word_start(const sq_line *q, int k) {
    if (k < 0 || k >= q->n) return false;
    int o = q->map[k];
    return o == 0 || !isalnum((unsigned char)q->orig[o - 1]);
}

/* Offset of a number label ("No." starting a word, then a figure or a letter prefix and a dash)
 * in q at or after k, or -1. */
static int number_label_at(const sq_line *q, int k) {
    for (const char *p = strstr(q->s + k, "no."); p; p = strstr(p + 1, "no.")) {
        int at = (int)(p - q->s), r = at + 3;
        while (r < q->n && isalpha((unsigned char)q->s[r]) && r - at < 8) r++;
        if (word_start(q, at) && r < q->n && (isdigit((unsigned char)q->s[r]) || q->s[r] == '-'))
            return at;
    }
    return -1;
}

/* Whether a label found at k of q cuts a payee: one that starts a word; without words also one
 * run into the text before it, which starts with a capital ("Acme LtdDate:") or is not ASCII
 * (a CJK label); not a lower-case stretch inside a name ("GraniteLogistics" holds "tel"). */
static bool stop_label_at(const sq_line *q, int k, bool words) {
    if (word_start(q, k)) return true;
    if (words) return false;
    const unsigned char c = (unsigned char)q->orig[q->map[k]];
    return isupper(c) || c >= 0x80;
}

/* Payee text: the rest of the line, cut before another field's label ("Acme Ltd Date: ...",
 * "Acme Ltd No. 80053529"); words: only labels that start a word count (a first line taken as
 * the payee: "Granite Logistics" holds "tel"). */
static void payee_value(const sq_line *q, int k, bool words, char *out, size_t cap) {
    static const char *const STOP[] = {
        "date", "invoice", "total", "amount", "billto", "tel",
        "\xe6\x97\xa5\xe6\x9c\x9f",             /* 日期 */
        "\xe5\x8f\x91\xe7\xa5\xa8",             /* 发票 */
        "\xe8\xb4\xad\xe4\xb9\xb0\xe6\x96\xb9", /* 购买方 */
        "\xe9\x87\x91\xe9\xa2\x9d",             /* 金额 */
        "\xe7\xba\xb3\xe7\xa8\x8e",             /* 纳税 (纳税人识别号) */
        "\xe5\x9c\xb0\xe5\x9d\x80",             /* 地址 */
        "\xe7\x94\xb5\xe8\xaf\x9d",             /* 电话 */
    };
    int stop = q->n;
    for (size_t i = 0; i < FR_ARRAY_LEN(STOP); i++)
        for (const char *p = strstr(q->s + k, STOP[i]); p; p = strstr(p + 1, STOP[i]))
            if (p - q->s > k && p - q->s < stop && stop_label_at(q, (int)(p - q->s), words)) {
                stop = (int)(p - q->s);
                break;
            }
    int nl = number_label_at(q, k);
    if (nl > k && nl < stop) stop = nl;
    const char *end = stop < q->n ? q->orig + q->map[stop] : q->orig + q->orig_len;
    copy_trim(out, cap, orig_from(q, k), end);
    name_letters(out);
}

void fr_fields_extract(const char *text_in, fr_fields *out) {
    memset(out, 0, sizeof *out);
    if (!text_in) return;
    char *text = fields_normalise(text_in);
    if (!text) return;
    static const char *const L_INV[] = {
        "invoiceno", "invoicenumber", "invoice#", "receiptno", "receiptnumber", "receipt#",
        "\xe5\x8f\x91\xe7\xa5\xa8\xe5\x8f\xb7\xe7\xa0\x81",         /* 发票号码 */
        "\xe5\x8f\x91\xe7\xa5\xa8\xe5\x8f\xb7",                     /* 发票号 */
        "\xe6\x94\xb6\xe6\x8d\xae\xe5\x8f\xb7",                     /* 收据号 */
        "\xe5\x8d\x95\xe5\x8f\xb7",                                 /* 单号 */
        "invoice", "no.",
    };
    static const char *const N_INV[] = {
        "\xe5\x8f\x91\xe7\xa5\xa8\xe4\xbb\xa3\xe7\xa0\x81",         /* 发票代码: the code */
        "invoicedate", "invoicetotal",
    };
    static const char *const L_AMT[] = {
        "\xe5\xb0\x8f\xe5\x86\x99",                                 /* 小写 (the figures) */
        "amountdue", "totaldue", "balancedue", "grandtotal", "totalamount", "amountpayable",
        "\xe4\xbb\xb7\xe7\xa8\x8e\xe5\x90\x88\xe8\xae\xa1",         /* 价税合计 */
        "\xe5\x90\x88\xe8\xae\xa1\xe9\x87\x91\xe9\xa2\x9d",         /* 合计金额 */
        "\xe5\xba\x94\xe4\xbb\x98\xe9\x87\x91\xe9\xa2\x9d",         /* 应付金额 */
        "\xe6\x80\xbb\xe9\x87\x91\xe9\xa2\x9d",                     /* 总金额 */
        "total",
        "\xe5\x90\x88\xe8\xae\xa1",                                 /* 合计 */
        "\xe6\x80\xbb\xe8\xae\xa1",                                 /* 总计 */
        "\xe9\x87\x91\xe9\xa2\x9d",                                 /* 金额 */
        "amount",
    };
    static const char *const N_AMT[] = {"subtotal", "amountpaid"};
    static const char *const L_DATE[] = {
        "issuedate", "invoicedate", "\xe5\xbc\x80\xe7\xa5\xa8\xe6\x97\xa5\xe6\x9c\x9f", /* 开票日期 */
        "date", "\xe6\x97\xa5\xe6\x9c\x9f",                                             /* 日期 */
    };
    static const char *const N_DATE[] = {"duedate", "\xe5\x88\xb0\xe6\x9c\x9f"}; /* 到期 */
    static const char *const L_PAYEE[] = {
        "payee", "merchant", "seller", "vendor", "supplier", "payto",
        "\xe9\x94\x80\xe5\x94\xae\xe6\x96\xb9\xe5\x90\x8d\xe7\xa7\xb0", /* 销售方名称 */
        "\xe6\x94\xb6\xe6\xac\xbe\xe6\x96\xb9",                         /* 收款方 */
        "\xe6\x94\xb6\xe6\xac\xbe\xe4\xba\xba",                         /* 收款人 */
        "\xe6\x94\xb6\xe6\xac\xbe\xe5\x8d\x95\xe4\xbd\x8d",             /* 收款单位 */
        "\xe9\x94\x80\xe5\x94\xae\xe6\x96\xb9",                         /* 销售方 */
        "\xe5\x95\x86\xe6\x88\xb7",                                     /* 商户 */
        "from",
    };
    static const char *const N_PAYEE[] = {
        "\xe4\xbb\x98\xe6\xac\xbe\xe6\x96\xb9",                         /* 付款方 */
        "\xe4\xbb\x98\xe6\xac\xbe\xe4\xba\xba",                         /* 付款人 */
        "\xe8\xb4\xad\xe4\xb9\xb0\xe6\x96\xb9\xe5\x90\x8d\xe7\xa7\xb0", /* 购买方名称: the buyer */
        "\xe8\xb4\xad\xe4\xb9\xb0\xe6\x96\xb9",                         /* 购买方 */
        "billto", "shipto",
        "\xe6\x94\xb6\xe6\xac\xbe\xe6\x94\xb6\xe6\x8d\xae",         /* 收款收据: a receipt's title */
    };
    size_t best_amt = FR_ARRAY_LEN(L_AMT), best_date = FR_ARRAY_LEN(L_DATE) + 1;
    const char *amt_line = NULL; /* the line the amount came from */
    int amt_len = 0;
    size_t pending_amt = SIZE_MAX; /* a label whose value is on the next line */
    bool pending_inv = false;
    char first_line[128] = "";
    char date_line[LINE_MAX_BYTES] = "", any_date_line[LINE_MAX_BYTES] = "";
    sq_line q;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        int len = (int)FR_MIN(e - p, LINE_MAX_BYTES - 1);
        squeeze(p, len, &q);
        size_t w;
        int k;
        if (q.n) {
            const char *end = q.orig + q.orig_len;
            if (!out->invoice_no[0] && pending_inv)
                invoice_token(q.orig, end, out->invoice_no, sizeof out->invoice_no);
            pending_inv = false;
            if (!out->invoice_no[0] &&
                (k = find_label_neg(&q, L_INV, FR_ARRAY_LEN(L_INV), N_INV, FR_ARRAY_LEN(N_INV),
                                    &w)) >= 0) {
                /* "invoice" and "no." alone: only with a number right after them */
                bool weak = !strcmp(L_INV[w], "invoice") || !strcmp(L_INV[w], "no.");
                /* "No." at the line's start, or starting a word after another column's text
                 * ("Acme Trading Ltd  No. 80053529": a header row joined into one line) */
                if (weak && !strcmp(L_INV[w], "no.") && k != 3 && !word_start(&q, k - 3)) k = -1;
                if (weak && k >= 0 && k < q.n && isalpha((unsigned char)q.s[k])) {
                    /* "No." then letters: only a number's own prefix ("No.NO-2024-1932") */
                    int r = 0;
                    while (k + r < q.n && isalpha((unsigned char)q.s[k + r])) r++;
                    char nx = k + r < q.n ? q.s[k + r] : 0;
                    if (r > 4 || (nx != '-' && !isdigit((unsigned char)nx))) k = -1;
                }
                if (k >= 0) {
                    k = skip_sep(&q, k);
                    if (!invoice_token(orig_from(&q, k), end, out->invoice_no,
                                       sizeof out->invoice_no) && !weak && k >= q.n)
                        pending_inv = true;
                }
            }
            bool sub = strstr(q.s, "subtotal") || strstr(q.s, "\xe5\xb0\x8f\xe8\xae\xa1"); /* 小计 */
            char a[32];
            if (pending_amt < best_amt && !sub && fr_fields_norm_amount(q.s, a, sizeof a)) {
                const char *c = q.s;
                while (*c && !isdigit((unsigned char)*c)) c++;
                if (c - q.s <= 6) { /* the value line starts with the number (or a symbol) */
                    snprintf(out->amount, sizeof out->amount, "%s", a);
                    best_amt = pending_amt;
                    amt_line = q.orig;
                    amt_len = q.orig_len;
                }
            }
            pending_amt = SIZE_MAX;
            if (!sub &&
                (k = find_label_neg(&q, L_AMT, FR_ARRAY_LEN(L_AMT), N_AMT, FR_ARRAY_LEN(N_AMT),
                                    &w)) >= 0 &&
                w < best_amt) {
                char rest[LINE_MAX_BYTES]; /* the rest of this line only */
                copy_trim(rest, sizeof rest, orig_from(&q, k), end);
                if (fr_fields_norm_amount(rest, a, sizeof a)) {
                    snprintf(out->amount, sizeof out->amount, "%s", a);
                    best_amt = w;
                    amt_line = q.orig;
                    amt_len = q.orig_len;
                } else pending_amt = w;
            }
            bool due = false;
            for (size_t i = 0; i < FR_ARRAY_LEN(N_DATE); i++) due |= strstr(q.s, N_DATE[i]) != NULL;
            if ((k = find_label(&q, L_DATE, FR_ARRAY_LEN(L_DATE), &w)) >= 0 &&
                w + (due ? 1 : 0) < best_date) {
                char tmp[LINE_MAX_BYTES], d[16];
                copy_trim(tmp, sizeof tmp, orig_from(&q, k), end);
                if (fr_fields_norm_date(tmp, d, sizeof d)) {
                    best_date = w + (due ? 1 : 0);
                    snprintf(date_line, sizeof date_line, "%s", tmp);
                }
            }
            if (!any_date_line[0]) {
                char tmp[LINE_MAX_BYTES], d[16];
                copy_trim(tmp, sizeof tmp, q.orig, end);
                if (fr_fields_norm_date(tmp, d, sizeof d))
                    snprintf(any_date_line, sizeof any_date_line, "%s", tmp);
            }
            if (!out->payee[0] &&
                (k = find_label_neg(&q, L_PAYEE, FR_ARRAY_LEN(L_PAYEE), N_PAYEE,
                                    FR_ARRAY_LEN(N_PAYEE), &w)) >= 0 &&
                (strcmp(L_PAYEE[w], "from") || k == 4)) {
                k = skip_sep(&q, k);
                /* 销售方 名称: ... */
                if (k + 6 <= q.n && !memcmp(q.s + k, "\xe5\x90\x8d\xe7\xa7\xb0", 6))
                    k = skip_sep(&q, k + 6);
                payee_value(&q, k, false, out->payee, sizeof out->payee);
            }
            if (!first_line[0]) {
                bool title = !strcmp(q.s, "invoice") || !strcmp(q.s, "receipt") ||
                             strstr(q.s, "\xe5\x8f\x91\xe7\xa5\xa8") ||  /* 发票 */
                             !strcmp(q.s, "\xe6\x94\xb6\xe6\x8d\xae");    /* 收据 */
                bool letters = false;
                for (int i = 0; i < q.n; i++)
                    letters |= isalpha((unsigned char)q.s[i]) || (unsigned char)q.s[i] >= 0x80;
                if (!title && letters && q.n >= 4) /* cut before another column's label */
                    payee_value(&q, 0, true, first_line, sizeof first_line);
            }
        }
        p = *e ? e + 1 : e;
    }
    if (!out->payee[0]) {
        memcpy(out->payee, first_line, sizeof first_line);
        name_letters(out->payee);
    }
    fields_currency(text, amt_line, (size_t)amt_len, out->currency, sizeof out->currency);
    /* an ambiguous numeric date takes the page's order (see date_month_first) */
    const char *dl = date_line[0] ? date_line : any_date_line;
    if (dl[0]) date_parse(dl, date_month_first(text, out->currency), out->date, sizeof out->date, NULL);
    free(text);
}

/* ---- currency ---------------------------------------------------------------------------------- */

/* Symbols and CJK words: matched anywhere (longest first where one is a prefix of another). */
static const struct { const char *k; const char *code; } CUR_SYM[] = {
    {"US$", "USD"}, {"A$", "AUD"}, {"AU$", "AUD"}, {"C$", "CAD"}, {"CA$", "CAD"},
    {"HK$", "HKD"}, {"S$", "SGD"}, {"NZ$", "NZD"}, {"R$", "BRL"}, {"$", "USD"},
    {"\xc2\xa3", "GBP"},         /* £ */
    {"\xe2\x82\xac", "EUR"},     /* € */
    {"\xc2\xa5", "CNY"},         /* ¥ (JPY when the document names the yen) */
    {"\xef\xbf\xa5", "CNY"},     /* ￥ fullwidth */
    {"\xe2\x82\xb9", "INR"},     /* ₹ */
    {"\xe2\x82\xa9", "KRW"},     /* ₩ */
    {"\xe2\x82\xbd", "RUB"},     /* ₽ */
    {"\xe2\x82\xba", "TRY"},     /* ₺ */
    {"\xe2\x82\xaa", "ILS"},     /* ₪ */
    {"\xe0\xb8\xbf", "THB"},     /* ฿ */
    {"\xe4\xba\xba\xe6\xb0\x91\xe5\xb8\x81", "CNY"}, /* 人民币 */
    {"\xe7\xbe\x8e\xe5\x85\x83", "USD"},             /* 美元 */
    {"\xe7\xbe\x8e\xe9\x87\x91", "USD"},             /* 美金 */
    {"\xe6\xac\xa7\xe5\x85\x83", "EUR"},             /* 欧元 */
    {"\xe8\x8b\xb1\xe9\x95\x91", "GBP"},             /* 英镑 */
    {"\xe6\x97\xa5\xe5\x85\x83", "JPY"},             /* 日元 */
    {"\xe6\xb8\xaf\xe5\xb8\x81", "HKD"},             /* 港币 */
    {"\xe5\x85\x83", "CNY"},                         /* 元 (after the longer words) */
    {"\xe5\x86\x86", "JPY"},                         /* 円 */
};

/* ISO codes (and RMB), whole upper-case words only. */
static const char CUR_CODES[][4] = {"USD", "EUR", "GBP", "JPY", "CNY", "RMB", "CHF", "AUD", "CAD",
                                    "HKD", "SGD", "INR", "KRW", "SEK", "NOK", "DKK", "PLN", "CZK",
                                    "HUF", "RUB", "TRY", "ZAR", "BRL", "MXN", "NZD", "AED", "SAR",
                                    "THB", "TWD", "ILS"};

/* Words, case-insensitive, whole words (a plural 's' allowed). */
static const struct { const char *k; const char *code; } CUR_WORDS[] = {
    {"dollar", "USD"}, {"euro", "EUR"},    {"pound", "GBP"},    {"sterling", "GBP"},
    {"yuan", "CNY"},   {"renminbi", "CNY"}, {"yen", "JPY"},     {"rupee", "INR"},
    {"franc", "CHF"},  {"ruble", "RUB"},    {"rouble", "RUB"},  {"zloty", "PLN"},
    {"peso", "MXN"},   {"krona", "SEK"},    {"kronor", "SEK"},  {"krone", "NOK"},
    {"kroner", "NOK"},
    /* not "won", "real", "rand": common English words */
};

static bool ascii_alpha(unsigned char c) { return (c | 32) >= 'a' && (c | 32) <= 'z'; }

const char *fr_fields_currency_in(const char *s, size_t n, size_t *at) {
    for (size_t i = 0; i < n; i++) {
        bool wstart = i == 0 || !ascii_alpha((unsigned char)s[i - 1]);
        for (size_t k = 0; k < FR_ARRAY_LEN(CUR_SYM); k++) {
            size_t l = strlen(CUR_SYM[k].k);
            /* "US$" and the like need a word start; "$" alone does not */
            if (l <= n - i && !memcmp(s + i, CUR_SYM[k].k, l) &&
                (!ascii_alpha((unsigned char)s[i]) || wstart)) {
                if (at) *at = i;
                return CUR_SYM[k].code;
            }
        }
        if (!wstart || !ascii_alpha((unsigned char)s[i])) continue;
        /* a two-letter prefix of a dollar sign with the sign read as S ("USS1,234.50", "HKS 80"):
         * the prefix's code when a figure follows */
        for (size_t k = 0; k < FR_ARRAY_LEN(CUR_SYM); k++) {
            size_t l = strlen(CUR_SYM[k].k), f = i + l;
            if (l < 3 || CUR_SYM[k].k[l - 1] != '$' || l > n - i ||
                memcmp(s + i, CUR_SYM[k].k, l - 1) || s[f - 1] != 'S')
                continue;
            if (f < n && s[f] == ' ') f++;
            if (f < n && isdigit((unsigned char)s[f])) {
                if (at) *at = i;
                return CUR_SYM[k].code;
            }
        }
        size_t e = i;
        while (e < n && ascii_alpha((unsigned char)s[e])) e++;
        size_t wl = e - i;
        if (wl == 3) {
            for (size_t k = 0; k < FR_ARRAY_LEN(CUR_CODES); k++)
                if (!memcmp(s + i, CUR_CODES[k], 3)) {
                    if (at) *at = i;
                    return strcmp(CUR_CODES[k], "RMB") ? CUR_CODES[k] : "CNY";
                }
        }
        for (size_t k = 0; k < FR_ARRAY_LEN(CUR_WORDS); k++) {
            size_t l = strlen(CUR_WORDS[k].k);
            if ((wl == l || (wl == l + 1 && (s[e - 1] | 32) == 's')) &&
                !strncasecmp(s + i, CUR_WORDS[k].k, l)) {
                if (at) *at = i;
                return CUR_WORDS[k].code;
            }
        }
        i = e - 1;
    }
    return "";
}

/* Euro-area country codes (IBAN and VAT number prefixes). */
static const char EUR_CC[][3] = {"AT", "BE", "CY", "DE", "EE", "ES", "FI", "FR", "GR", "HR", "IE",
                                 "IT", "LT", "LU", "LV", "MT", "NL", "PT", "SI", "SK"};

/* The currency a page implies when it names none on its money lines (a symbol the reader cannot
 * emit, such as PP-OCR's missing € and £): a code or currency word anywhere on the page, else the
 * country of an IBAN or VAT number ("GB29 NWBK ...", "VAT No. DE123456789"): GB -> GBP, a
 * euro-area country -> EUR; else "". */
static const char *currency_hint(const char *text) {
    const char *code = "";
    for (const char *p = text; !code[0] && *p;) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        code = fr_fields_currency_in(p, (size_t)(e - p), NULL);
        if (!strcmp(code, "TRY")) code = ""; /* "TRY AGAIN" on a line without a number */
        p = *e ? e + 1 : e;
    }
    if (code[0]) return code;
    for (const char *p = text; *p; p++) {
        if (!isupper((unsigned char)p[0]) || !isupper((unsigned char)p[1])) continue;
        if (p > text && ascii_alpha((unsigned char)p[-1])) continue;
        /* IBAN: two letters, two check digits, then at least 10 alphanumerics/spaces; VAT: the
         * two letters right after a "VAT" label, then 8+ digits */
        const char *q = p + 2;
        bool iban = isdigit((unsigned char)q[0]) && isdigit((unsigned char)q[1]);
        if (iban) {
            int alnum = 0;
            for (const char *r = q + 2; *r && *r != '\n' && alnum < 10; r++)
                if (isalnum((unsigned char)*r)) alnum++;
                else if (*r != ' ') break;
            iban = alnum >= 10;
        }
        bool vat = false;
        if (!iban) {
            const char *b = p;
            while (b > text && b[-1] != '\n' && p - b < 24) b--;
            char lab[32];
            size_t n = 0;
            for (const char *r = b; r < p && n < sizeof lab - 1; r++)
                lab[n++] = (char)tolower((unsigned char)*r);
            lab[n] = 0;
            int digits = 0;
            for (const char *r = q; isdigit((unsigned char)*r) || *r == ' '; r++)
                digits += isdigit((unsigned char)*r) != 0;
            vat = strstr(lab, "vat") && digits >= 8;
        }
        if (!iban && !vat) continue;
        if (p[0] == 'G' && p[1] == 'B') return "GBP";
        for (size_t k = 0; k < FR_ARRAY_LEN(EUR_CC); k++)
            if (p[0] == EUR_CC[k][0] && p[1] == EUR_CC[k][1]) return "EUR";
    }
    return "";
}

/* The document's currency: the amount line's, else a "currency" line's, else the first one on
 * a line with a number; ¥ becomes JPY when the document names the yen. */
static void fields_currency(const char *text, const char *amount_line, size_t amount_len,
                            char *out, size_t cap) {
    const char *code = amount_line ? fr_fields_currency_in(amount_line, amount_len, NULL) : "";
    size_t tl = strlen(text);
    const char *p = text;
    while (!code[0] && *p) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        sq_line q;
        squeeze(p, (int)FR_MIN(e - p, LINE_MAX_BYTES - 1), &q);
        if (strstr(q.s, "currency") || strstr(q.s, "\xe5\xb8\x81\xe7\xa7\x8d")) /* 币种 */
            code = fr_fields_currency_in(p, (size_t)(e - p), NULL);
        p = *e ? e + 1 : e;
    }
    /* else the first one on a line that holds a number (a money line, not "TRY AGAIN") */
    for (p = text; !code[0] && *p;) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        bool digit = false;
        for (const char *c = p; c < e && !digit; c++) digit = isdigit((unsigned char)*c) != 0;
        if (digit) code = fr_fields_currency_in(p, (size_t)(e - p), NULL);
        p = *e ? e + 1 : e;
    }
    if (!code[0]) code = currency_hint(text);
    if (!strcmp(code, "CNY")) {
        /* a ¥ on a document that names the yen is the yen */
        for (size_t i = 0; i < tl;) {
            size_t at = 0;
            const char *c = fr_fields_currency_in(text + i, tl - i, &at);
            if (!c[0]) break;
            if (!strcmp(c, "JPY")) {
                code = "JPY";
                break;
            }
            i += at + 1;
        }
    }
    snprintf(out, cap, "%s", code);
}
