/* fields.c — key-field extraction from OCR text; see fields.h. */
#include "stages/ocr/fields.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

#define LINE_MAX_BYTES 512

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
}
