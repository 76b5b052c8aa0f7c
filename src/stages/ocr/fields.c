/* fields.c — key-field extraction from OCR text; see fields.h. */
#include "stages/ocr/fields.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/base.h"

#define LINE_MAX_BYTES 512

static void fields_currency(const char *text, const char *amount_line, size_t amount_len,
                            char *out, size_t cap);

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

static int find_label(const sq_line *q, const char *const *labels, size_t nl, size_t *which) {
    for (size_t i = 0; i < nl; i++) {
        const char *p = strstr(q->s, labels[i]);
        if (p) {
            *which = i;
            return (int)(p - q->s) + (int)strlen(labels[i]);
        }
    }
    return -1;
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

bool fr_fields_norm_amount(const char *in, char *out, size_t cap) {
    /* squeeze spaces, map fullwidth comma/full stop (U+FF0C, U+FF0E) to ASCII */
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
    /* first run of digits with optional thousands separators and decimals */
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) continue;
        char digits[40];
        size_t n = 0;
        const char *q = p;
        int frac = -1;
        while (*q && n < sizeof digits - 1) {
            if (isdigit((unsigned char)*q)) {
                digits[n++] = *q;
                if (frac >= 0) frac++;
            } else if ((*q == ',' || *q == ';') && frac < 0) {
                /* thousands separator; OCR often reads a bold comma as ';' or ',;' */
                const char *t = q;
                while (*t == ',' || *t == ';') t++;
                if (!isdigit((unsigned char)*t)) break;
                q = t;
                continue;
            } else if (*q == '.' && frac < 0 && isdigit((unsigned char)q[1])) {
                frac = 0;
                digits[n++] = '.';
            } else break;
            q++;
        }
        digits[n] = 0;
        if (frac < 0) { /* an integer amount */
            snprintf(out, cap, "%s.00", digits);
        } else if (frac == 1) {
            snprintf(out, cap, "%s0", digits);
        } else {
            if (frac > 2) digits[n - (size_t)(frac - 2)] = 0;
            snprintf(out, cap, "%s", digits);
        }
        /* strip leading zeros of the integer part */
        char *o = out;
        while (o[0] == '0' && isdigit((unsigned char)o[1])) memmove(o, o + 1, strlen(o));
        return true;
    }
    return false;
}

static const char *const MONTHS[12] = {"jan", "feb", "mar", "apr", "may", "jun",
                                       "jul", "aug", "sep", "oct", "nov", "dec"};

static int month_at(const char *p) {
    for (int m = 0; m < 12; m++)
        if (!strncasecmp(p, MONTHS[m], 3)) return m + 1;
    return 0;
}

static bool valid_ymd(int y, int m, int d) {
    return y >= 1900 && y <= 2100 && m >= 1 && m <= 12 && d >= 1 && d <= 31;
}

bool fr_fields_norm_date(const char *s, char *out, size_t cap) {
    /* work on a squeezed copy: "2024 年 03 月 15 日" -> "2024年03月15日" */
    char b[LINE_MAX_BYTES];
    size_t n = 0;
    for (const char *p = s; *p && n < sizeof b - 1; p++)
        if (*p != ' ' && *p != '\t') b[n++] = *p;
    b[n] = 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = b + i;
        int y = 0, m = 0, d = 0, k = 0;
        if (isdigit((unsigned char)*p) && (i == 0 || !isdigit((unsigned char)p[-1]))) {
            /* YYYY-MM-DD, YYYY/MM/DD, YYYY.MM.DD, YYYY年MM月DD日 */
            if (sscanf(p, "%4d-%2d-%2d%n", &y, &m, &d, &k) == 3 ||
                sscanf(p, "%4d/%2d/%2d%n", &y, &m, &d, &k) == 3 ||
                sscanf(p, "%4d.%2d.%2d%n", &y, &m, &d, &k) == 3 ||
                sscanf(p, "%4d\xe5\xb9\xb4%2d\xe6\x9c\x88%2d%n", &y, &m, &d, &k) == 3) {
                if (y >= 1000 && valid_ymd(y, m, d)) goto ok;
            }
            /* DD/MM/YYYY */
            if (sscanf(p, "%2d/%2d/%4d%n", &d, &m, &y, &k) == 3 && valid_ymd(y, m, d)) goto ok;
            /* DDMonthYYYY (squeezed "15March2024") */
            int dd = 0, kk = 0;
            if (sscanf(p, "%2d%n", &dd, &kk) == 1 && (m = month_at(p + kk)) > 0) {
                const char *q = p + kk;
                while (isalpha((unsigned char)*q)) q++;
                if (*q == ',') q++;
                if (sscanf(q, "%4d", &y) == 1 && valid_ymd(y, m, dd)) {
                    d = dd;
                    goto ok;
                }
            }
        } else if (isalpha((unsigned char)*p) && (m = month_at(p)) > 0 &&
                   (i == 0 || !isalpha((unsigned char)p[-1]))) {
            /* MonthDD,YYYY */
            const char *q = p;
            while (isalpha((unsigned char)*q)) q++;
            if (sscanf(q, "%2d,%4d", &d, &y) == 2 && valid_ymd(y, m, d)) goto ok;
        }
        continue;
    ok:
        snprintf(out, cap, "%04d-%02d-%02d", y, m, d);
        return true;
    }
    return false;
}

static void copy_trim(char *dst, size_t cap, const char *s, const char *end) {
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    size_t n = FR_MIN((size_t)(end - s), cap - 1);
    memcpy(dst, s, n);
    dst[n] = 0;
}

void fr_fields_extract(const char *text, fr_fields *out) {
    memset(out, 0, sizeof *out);
    if (!text) return;
    static const char *const L_INV[] = {
        "invoiceno", "invoicenumber", "invoice#", "receiptno", "receiptnumber", "receipt#",
        "\xe5\x8f\x91\xe7\xa5\xa8\xe5\x8f\xb7\xe7\xa0\x81",         /* 发票号码 */
        "\xe5\x8f\x91\xe7\xa5\xa8\xe5\x8f\xb7",                     /* 发票号 */
        "\xe6\x94\xb6\xe6\x8d\xae\xe5\x8f\xb7",                     /* 收据号 */
        "\xe5\x8d\x95\xe5\x8f\xb7",                                 /* 单号 */
    };
    static const char *const L_AMT[] = {
        "amountdue", "totaldue", "grandtotal", "total",
        "\xe4\xbb\xb7\xe7\xa8\x8e\xe5\x90\x88\xe8\xae\xa1",         /* 价税合计 */
        "\xe5\x90\x88\xe8\xae\xa1\xe9\x87\x91\xe9\xa2\x9d",         /* 合计金额 */
        "\xe5\x90\x88\xe8\xae\xa1",                                 /* 合计 */
        "\xe6\x80\xbb\xe8\xae\xa1",                                 /* 总计 */
    };
    static const char *const L_DATE[] = {"date", "\xe6\x97\xa5\xe6\x9c\x9f"}; /* 日期 */
    static const char *const L_PAYEE[] = {
        "payee", "merchant", "seller",
        "\xe6\x94\xb6\xe6\xac\xbe\xe6\x96\xb9",                     /* 收款方 */
        "\xe6\x94\xb6\xe6\xac\xbe\xe5\x8d\x95\xe4\xbd\x8d",         /* 收款单位 */
        "\xe5\x95\x86\xe6\x88\xb7",                                 /* 商户 */
    };
    size_t best_amt = FR_ARRAY_LEN(L_AMT);
    const char *amt_line = NULL; /* the line the amount came from */
    int amt_len = 0;
    char first_line[128] = "";
    char any_date[16] = "";
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
            if (!out->invoice_no[0] && (k = find_label(&q, L_INV, FR_ARRAY_LEN(L_INV), &w)) >= 0) {
                k = skip_sep(&q, k);
                /* the id: first token of [A-Za-z0-9-/] holding a digit */
                const char *s = orig_from(&q, k), *end = q.orig + q.orig_len;
                while (s < end && (*s == ' ' || *s == ':')) s++;
                const char *t = s;
                while (t < end && (isalnum((unsigned char)*t) || *t == '-' || *t == '/')) t++;
                bool digit = false;
                for (const char *c = s; c < t; c++) digit |= isdigit((unsigned char)*c) != 0;
                if (digit) copy_trim(out->invoice_no, sizeof out->invoice_no, s, t);
            }
            bool sub = strstr(q.s, "subtotal") || strstr(q.s, "\xe5\xb0\x8f\xe8\xae\xa1"); /* 小计 */
            if (!sub && (k = find_label(&q, L_AMT, FR_ARRAY_LEN(L_AMT), &w)) >= 0 && w <= best_amt) {
                char a[32];
                if (fr_fields_norm_amount(orig_from(&q, k), a, sizeof a)) {
                    snprintf(out->amount, sizeof out->amount, "%s", a);
                    best_amt = w;
                    amt_line = q.orig;
                    amt_len = q.orig_len;
                }
            }
            if (!out->date[0] && find_label(&q, L_DATE, FR_ARRAY_LEN(L_DATE), &w) >= 0) {
                char tmp[LINE_MAX_BYTES];
                copy_trim(tmp, sizeof tmp, q.orig, q.orig + q.orig_len);
                fr_fields_norm_date(tmp, out->date, sizeof out->date);
            }
            if (!any_date[0]) {
                char tmp[LINE_MAX_BYTES];
                copy_trim(tmp, sizeof tmp, q.orig, q.orig + q.orig_len);
                fr_fields_norm_date(tmp, any_date, sizeof any_date);
            }
            if (!out->payee[0] && (k = find_label(&q, L_PAYEE, FR_ARRAY_LEN(L_PAYEE), &w)) >= 0) {
                k = skip_sep(&q, k);
                copy_trim(out->payee, sizeof out->payee, orig_from(&q, k), q.orig + q.orig_len);
            }
            if (!first_line[0]) {
                bool title = !strcmp(q.s, "invoice") || !strcmp(q.s, "receipt") ||
                             !strcmp(q.s, "\xe5\x8f\x91\xe7\xa5\xa8") ||  /* 发票 */
                             !strcmp(q.s, "\xe6\x94\xb6\xe6\x8d\xae");    /* 收据 */
                bool letters = false;
                for (int i = 0; i < q.n; i++)
                    letters |= isalpha((unsigned char)q.s[i]) || (unsigned char)q.s[i] >= 0x80;
                if (!title && letters && q.n >= 4)
                    copy_trim(first_line, sizeof first_line, q.orig, q.orig + q.orig_len);
            }
        }
        p = *e ? e + 1 : e;
    }
    if (!out->date[0]) memcpy(out->date, any_date, sizeof any_date);
    if (!out->payee[0]) memcpy(out->payee, first_line, sizeof first_line);
    fields_currency(text, amt_line, (size_t)amt_len, out->currency, sizeof out->currency);
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
