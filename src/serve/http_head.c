/* http_head.c — strict request-head parser (see http_head.h for what it refuses and why).
 *
 * One pass over the bytes, line by line: the request line, then fields until the blank line.
 * Every index is checked against `len` before it is read, and the scan never looks past
 * max_head_bytes, so the work is O(max_head_bytes) whatever the input. The framing rules
 * (Content-Length, Transfer-Encoding, Host) are checked once the head is complete.
 */
#include "serve/http_head.h"

#include <string.h>
#include <strings.h>

static bool is_tchar(unsigned char c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int refuse(fr_http_head *h, int status, const char *code, const char *detail) {
    h->status = status;
    h->code = code;
    h->detail = detail;
    return FR_HEAD_BAD;
}

/* Finds the CRLF that ends the line starting at `at`. Returns its offset (of CR), -1 when the
 * line is not complete within `len`, -2 on a bare CR or LF or a NUL. */
static long line_end(const char *b, size_t at, size_t len) {
    for (size_t i = at; i < len; i++) {
        if (b[i] == '\n') return -2;
        if (b[i] == '\r') {
            if (i + 1 >= len) return -1;
            return b[i + 1] == '\n' ? (long)i : -2;
        }
    }
    return -1;
}

static bool eq_ci(const char *a, size_t n, const char *lit) {
    return strlen(lit) == n && !strncasecmp(a, lit, n);
}

static int parse_request_line(const char *b, size_t n, fr_http_head *h) {
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)b[i])) i++;
    if (i == 0 || i > 32 || i >= n || b[i] != ' ')
        return refuse(h, 400, "bad_request_line", "The request line is not METHOD SP TARGET SP VERSION.");
    h->method = b;
    h->method_len = i;
    size_t t0 = ++i;
    while (i < n && (unsigned char)b[i] > 0x20 && (unsigned char)b[i] < 0x7f) i++;
    if (i == t0 || i >= n || b[i] != ' ')
        return refuse(h, 400, "bad_request_line", "The request target is empty or holds bytes outside printable ASCII.");
    const char *tgt = b + t0;
    size_t tlen = i - t0;
    if (tgt[0] != '/' && !(tlen == 1 && tgt[0] == '*'))
        return refuse(h, 400, "bad_request_line", "The request target must be an absolute path (origin form).");
    size_t plen = 0;
    while (plen < tlen && tgt[plen] != '?' && tgt[plen] != '#') plen++;
    i++;
    const char *v = b + i;
    size_t vlen = n - i;
    if (vlen != 8 || memcmp(v, "HTTP/", 5) || v[6] != '.' || v[5] < '0' || v[5] > '9' ||
        v[7] < '0' || v[7] > '9')
        return refuse(h, 400, "bad_request_line", "The request line does not end in HTTP/1.0 or HTTP/1.1.");
    if (v[5] != '1' || v[7] > '1')
        return refuse(h, 505, "http_version_not_supported", "Only HTTP/1.0 and HTTP/1.1 are served.");
    h->path = tgt;
    h->path_len = plen;
    h->minor = v[7] - '0';
    h->line_done = true;
    return FR_HEAD_DONE;
}

/* One field line b[0..n) (no CRLF). */
static int parse_field(const char *b, size_t n, const fr_http_limits *lim, fr_http_head *h) {
    if (n && (b[0] == ' ' || b[0] == '\t'))
        return refuse(h, 400, "bad_header", "Folded header lines (obs-fold) are not accepted.");
    size_t i = 0;
    while (i < n && is_tchar((unsigned char)b[i])) i++;
    if (i == 0 || i >= n || b[i] != ':')
        return refuse(h, 400, "bad_header", "A header name holds a byte that is not a token character, or has no colon.");
    size_t name_len = i++;
    while (i < n && (b[i] == ' ' || b[i] == '\t')) i++;
    size_t v0 = i;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)b[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return refuse(h, 400, "bad_header", "A header value holds a NUL or another control byte.");
    }
    size_t v1 = n;
    while (v1 > v0 && (b[v1 - 1] == ' ' || b[v1 - 1] == '\t')) v1--;
    int max = lim->max_fields > 0 && lim->max_fields < FR_HEAD_MAX_FIELDS ? lim->max_fields
                                                                          : FR_HEAD_MAX_FIELDS;
    if (h->n_fields >= max)
        return refuse(h, 431, "request_header_fields_too_large", "The request has too many header fields.");
    fr_http_field *f = &h->fields[h->n_fields++];
    f->name = b;
    f->name_len = name_len;
    f->value = b + v0;
    f->value_len = v1 - v0;
    return FR_HEAD_DONE;
}

/* Transfer-Encoding value: a list of codings; only one `chunked` is served. */
static int parse_te(const char *v, size_t n, fr_http_head *h) {
    int chunked = 0;
    size_t i = 0;
    for (;;) {
        while (i < n && (v[i] == ' ' || v[i] == '\t')) i++;
        size_t a = i;
        while (i < n && v[i] != ',') i++;
        size_t e = i;
        while (e > a && (v[e - 1] == ' ' || v[e - 1] == '\t')) e--;
        if (e == a) return refuse(h, 400, "bad_framing", "Transfer-Encoding has an empty element.");
        if (eq_ci(v + a, e - a, "chunked")) chunked++;
        else
            return refuse(h, 501, "unsupported_transfer_coding",
                          "Only the chunked transfer coding is supported.");
        if (i >= n) break;
        i++; /* the comma */
    }
    if (chunked > 1)
        return refuse(h, 400, "bad_framing", "Transfer-Encoding names chunked more than once.");
    h->chunked = true;
    return FR_HEAD_DONE;
}

static int check_framing(const fr_http_limits *lim, fr_http_head *h) {
    int n_cl = fr_http_head_count(h, "Content-Length");
    int n_te = fr_http_head_count(h, "Transfer-Encoding");
    int n_host = fr_http_head_count(h, "Host");
    if (h->minor == 1 && n_host != 1)
        return refuse(h, 400, "bad_host", n_host ? "The request has more than one Host header."
                                                 : "HTTP/1.1 requests must carry a Host header.");
    if (h->minor == 0 && n_host > 1)
        return refuse(h, 400, "bad_host", "The request has more than one Host header.");
    if (n_cl > 1)
        return refuse(h, 400, "bad_framing", "The request has more than one Content-Length.");
    if (n_te > 1)
        return refuse(h, 400, "bad_framing", "The request has more than one Transfer-Encoding.");
    if (n_cl && n_te)
        return refuse(h, 400, "bad_framing", "Transfer-Encoding and Content-Length together are ambiguous.");
    if (n_cl) {
        size_t n;
        const char *v = fr_http_head_get(h, "Content-Length", &n);
        if (n == 0 || n > 19)
            return refuse(h, 400, "bad_framing", "Content-Length must be 1 to 19 decimal digits.");
        unsigned long long x = 0;
        for (size_t i = 0; i < n; i++) {
            if (v[i] < '0' || v[i] > '9')
                return refuse(h, 400, "bad_framing", "Content-Length must be 1 to 19 decimal digits.");
            x = x * 10 + (unsigned)(v[i] - '0');
        }
        if (x > (unsigned long long)9223372036854775807LL)
            return refuse(h, 400, "bad_framing", "Content-Length is out of range.");
        if (lim->max_body_bytes && x > lim->max_body_bytes)
            return refuse(h, 413, "request_too_large", "The request body exceeds the size limit.");
        h->content_length = (long long)x;
    }
    if (n_te) {
        if (h->minor == 0)
            return refuse(h, 400, "bad_framing", "Transfer-Encoding is not allowed on HTTP/1.0.");
        size_t n;
        const char *v = fr_http_head_get(h, "Transfer-Encoding", &n);
        if (parse_te(v, n, h) != FR_HEAD_DONE) return FR_HEAD_BAD;
    }
    if (h->minor == 0 && !n_cl &&
        (fr_http_head_method_is(h, "POST") || fr_http_head_method_is(h, "PUT")))
        return refuse(h, 411, "length_required", "An HTTP/1.0 request with a body needs Content-Length.");
    return FR_HEAD_DONE;
}

int fr_http_head_parse(const char *buf, size_t len, const fr_http_limits *lim, fr_http_head *h) {
    memset(h, 0, sizeof *h);
    h->content_length = -1;
    size_t cap = lim->max_head_bytes ? lim->max_head_bytes : 16384;
    size_t scan = len < cap ? len : cap;
    size_t at = 0;
    bool first = true;
    for (;;) {
        long e = line_end(buf, at, scan);
        if (e == -2) {
            /* a NUL is reported as such; a lone CR or LF as bad line endings */
            return refuse(h, 400, first ? "bad_request_line" : "bad_header",
                          "Lines must end in CRLF (a bare CR or LF was found).");
        }
        if (e == -1) {
            /* a NUL or control byte is refused at once, not when its line completes */
            for (size_t i = at; i < scan; i++) {
                unsigned char c = (unsigned char)buf[i];
                if ((c < 0x20 && c != '\t' && c != '\r') || c == 0x7f)
                    return refuse(h, 400, first ? "bad_request_line" : "bad_header",
                                  "The request head holds a NUL or another control byte.");
            }
            if (len >= cap)
                return refuse(h, 431, "request_header_fields_too_large",
                              "The request head exceeds the size limit.");
            return FR_HEAD_MORE;
        }
        size_t n = (size_t)e - at;
        const char *line = buf + at;
        at = (size_t)e + 2;
        if (first) {
            if (parse_request_line(line, n, h) != FR_HEAD_DONE) return FR_HEAD_BAD;
            first = false;
            continue;
        }
        if (n == 0) break; /* the blank line */
        if (parse_field(line, n, lim, h) != FR_HEAD_DONE) return FR_HEAD_BAD;
    }
    h->head_len = at;
    if (check_framing(lim, h) != FR_HEAD_DONE) return FR_HEAD_BAD;
    return FR_HEAD_DONE;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

int fr_http_chunks_check(const char *buf, size_t len, const fr_http_limits *lim, fr_http_head *h) {
    size_t at = 0;
    unsigned long long total = 0;
    while (at < len) {
        /* chunk-size [ ; ext ] CRLF */
        size_t i = at;
        while (i < len && buf[i] == '0' && i + 1 < len && hexval(buf[i + 1]) >= 0) i++;
        size_t d0 = i;
        unsigned long long size = 0;
        while (i < len && hexval(buf[i]) >= 0) {
            if (i - d0 >= 15)
                return refuse(h, 400, "bad_chunk", "A chunk size is out of range.");
            size = size * 16 + (unsigned)hexval(buf[i]);
            i++;
        }
        if (i >= len) return 0; /* the line goes on past what arrived */
        if (i == d0) return refuse(h, 400, "bad_chunk", "A chunk line does not start with a hex size.");
        if (buf[i] == ';') {
            for (i++; i < len && buf[i] != '\r'; i++) {
                unsigned char c = (unsigned char)buf[i];
                if ((c < 0x20 && c != '\t') || c == 0x7f)
                    return refuse(h, 400, "bad_chunk", "A chunk extension holds a control byte.");
                if (i - at > 1024) return refuse(h, 400, "bad_chunk", "A chunk line is too long.");
            }
            if (i >= len) return 0;
        }
        if (buf[i] != '\r') return refuse(h, 400, "bad_chunk", "A chunk size holds a byte that is not a hex digit.");
        if (i + 1 >= len) return 0;
        if (buf[i + 1] != '\n') return refuse(h, 400, "bad_chunk", "A chunk line does not end in CRLF.");
        total += size;
        if (lim->max_body_bytes && total > lim->max_body_bytes)
            return refuse(h, 413, "request_too_large", "The request body exceeds the size limit.");
        if (size == 0) return 0; /* the last chunk; trailers are libmicrohttpd's */
        at = i + 2;
        if (len - at < size + 2) return 0; /* its data has not all arrived */
        at += size;
        if (buf[at] != '\r' || buf[at + 1] != '\n')
            return refuse(h, 400, "bad_chunk", "Chunk data is not followed by CRLF.");
        at += 2;
    }
    return 0;
}

const char *fr_http_head_get(const fr_http_head *h, const char *name, size_t *len) {
    size_t n = strlen(name);
    for (int i = 0; i < h->n_fields; i++)
        if (h->fields[i].name_len == n && !strncasecmp(h->fields[i].name, name, n)) {
            if (len) *len = h->fields[i].value_len;
            return h->fields[i].value;
        }
    if (len) *len = 0;
    return NULL;
}

int fr_http_head_count(const fr_http_head *h, const char *name) {
    size_t n = strlen(name);
    int k = 0;
    for (int i = 0; i < h->n_fields; i++)
        if (h->fields[i].name_len == n && !strncasecmp(h->fields[i].name, name, n)) k++;
    return k;
}

bool fr_http_head_method_is(const fr_http_head *h, const char *m) {
    return h->line_done && eq_ci(h->method, h->method_len, m) && !memcmp(h->method, m, h->method_len);
}
