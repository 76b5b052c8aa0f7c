/* fields.h — invoice/receipt key fields from OCR text: invoice number, amount, currency, date,
 * payee.
 *
 * Design: line-oriented label matching on a copy of each line with whitespace removed and ASCII
 * lowered (tesseract puts spaces between CJK characters and sometimes inside words), with an index
 * map back to the original line so values keep their spaces. Labels (English and Chinese) are tried
 * in priority order; "subtotal"/"小计" lines never give the amount. Dates in the common forms
 * (2024-03-15, 2024/03/15, 15/03/2024, 15.03.2024, Mar 15, 2024, 15 March 2024, 2024年3月15日)
 * become ISO 8601; a dotted numeric date is day first. Labels matched with one OCR edit must stand
 * where labels stand (line start, or before a non-letter), so a word inside a name is no label.
 * The currency is an ISO 4217 code read from the amount line (symbol, code or word: $ US$ € £ ¥ ￥
 * ₹ ₩ ..., USD EUR GBP CNY RMB ..., dollars euros pounds yuan yen ..., 元 人民币 美元 欧元 英镑 日元
 * 円), else from a "currency"/"币种" line, else from the first one on a line that holds a number; a bare ¥
 * is CNY unless the document also names the yen (JPY, yen, 円, 日元).
 * fr_fields_norm_* give the normalised forms the evaluation compares exactly.
 *
 * Thread safety: pure functions.
 */
#ifndef FRUGAL_OCR_FIELDS_H
#define FRUGAL_OCR_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct fr_fields {
    char invoice_no[64]; /* as read, "" if not found */
    char amount[32];     /* normalised decimal, "1210.00"; "" if not found */
    char currency[4];    /* ISO 4217 code, "USD"; "" if the document names none */
    char date[16];       /* ISO 8601 "2024-03-15"; "" if not found */
    char payee[128];     /* as read, trimmed; "" if not found */
} fr_fields;

/* Extract the fields from OCR text (lines separated by '\n'). */
void fr_fields_extract(const char *text, fr_fields *out);

/* ISO 4217 code of the first currency symbol, code or word in s[0..n) (*at gets its byte
 * offset when at is not NULL), or "" (static strings). Codes count only as whole upper-case
 * words, words only as whole words. */
const char *fr_fields_currency_in(const char *s, size_t n, size_t *at);

/* Normalised comparison forms (written into out, cap bytes). */
void fr_fields_norm_id(const char *s, char *out, size_t cap);    /* upper-case, no spaces */
void fr_fields_norm_payee(const char *s, char *out, size_t cap); /* lower alnum + non-ASCII */
/* Decimal with two places from "1,234.5" / "¥1234.50" / "USD 1 234.50"; false if none. */
bool fr_fields_norm_amount(const char *s, char *out, size_t cap);
/* ISO date from any supported form; false if none. */
bool fr_fields_norm_date(const char *s, char *out, size_t cap);

#endif
