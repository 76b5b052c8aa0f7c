/* fuzz_http_head.c — libFuzzer harness for the strict request-head parser
 * (src/serve/http_head.c) that the connection guard runs on peeked bytes.
 *
 * Properties checked on every input (besides ASan/UBSan's memory and overflow checks):
 *   - a refusal has a status in {400, 411, 413, 431, 501, 505}, a code and a detail;
 *   - a complete head ends with CRLF CRLF at head_len <= len, every field name and value lies
 *     inside the head, names are tokens, values hold no control byte but HTAB and have no
 *     surrounding whitespace; Content-Length is within the limit; HTTP/1.1 has exactly one Host;
 *   - incremental consistency (the guard re-parses a growing prefix): every proper prefix of a
 *     complete head parses as "more" (never "done", never a refusal), so a head accepted in
 *     the end was never refused on the way;
 *   - the chunk checker never reads past its bytes and only refuses with 400 or 413.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "serve/http_head.h"

static const fr_http_limits LIM = {.max_head_bytes = 2048, .max_fields = 24,
                                   .max_body_bytes = 100000};

static void check(int c) {
    if (!c) abort();
}

static int is_tchar(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a heap copy of exactly `size` bytes: ASan catches any read past the end */
    char *buf = malloc(size ? size : 1);
    if (size) memcpy(buf, data, size);
    fr_http_head h;
    int r = fr_http_head_parse(buf, size, &LIM, &h);
    check(r == FR_HEAD_BAD || r == FR_HEAD_MORE || r == FR_HEAD_DONE);
    if (r == FR_HEAD_BAD) {
        check(h.status == 400 || h.status == 411 || h.status == 413 || h.status == 431 ||
              h.status == 501 || h.status == 505);
        check(h.code && h.detail);
    }
    if (r == FR_HEAD_DONE) {
        check(h.head_len >= 4 && h.head_len <= size && h.head_len <= LIM.max_head_bytes);
        check(!memcmp(buf + h.head_len - 4, "\r\n\r\n", 4));
        check(h.line_done && h.minor >= 0 && h.minor <= 1);
        check(h.path >= buf && h.path + h.path_len <= buf + h.head_len);
        for (int i = 0; i < h.n_fields; i++) {
            const fr_http_field *f = &h.fields[i];
            check(f->name >= buf && f->name + f->name_len <= buf + h.head_len);
            check(f->value >= buf && f->value + f->value_len <= buf + h.head_len);
            check(f->name_len > 0);
            for (size_t k = 0; k < f->name_len; k++) check(is_tchar((unsigned char)f->name[k]));
            for (size_t k = 0; k < f->value_len; k++) {
                unsigned char c = (unsigned char)f->value[k];
                check(c >= 0x20 || c == '\t');
                check(c != 0x7f);
            }
            if (f->value_len) {
                check(f->value[0] != ' ' && f->value[0] != '\t');
                check(f->value[f->value_len - 1] != ' ' && f->value[f->value_len - 1] != '\t');
            }
        }
        check(h.content_length < 0 || (unsigned long long)h.content_length <= LIM.max_body_bytes);
        check(!(h.content_length >= 0 && h.chunked));
        if (h.minor == 1) check(fr_http_head_count(&h, "Host") == 1);
        /* every proper prefix is "more" */
        size_t step = h.head_len > 256 ? h.head_len / 97 + 1 : 1;
        for (size_t n = 0; n < h.head_len; n += step) {
            fr_http_head p;
            check(fr_http_head_parse(buf, n, &LIM, &p) == FR_HEAD_MORE);
        }
        if (h.chunked) {
            fr_http_head c = h;
            int cr = fr_http_chunks_check(buf + h.head_len, size - h.head_len, &LIM, &c);
            check(cr == 0 || (cr == -1 && (c.status == 400 || c.status == 413)));
        }
    }
    /* the chunk checker on raw bytes too */
    fr_http_head c;
    memset(&c, 0, sizeof c);
    int cr = fr_http_chunks_check(buf, size, &LIM, &c);
    check(cr == 0 || (cr == -1 && (c.status == 400 || c.status == 413)));
    free(buf);
    return 0;
}
