/* http_head.h — a strict, bounded parser of an HTTP/1.x request head, used by the connection
 * guard (serve/guard.h) before a connection reaches libmicrohttpd.
 *
 * It reads bytes that are only peeked, so it never owns or copies them: every pointer in
 * fr_http_head points into the caller's buffer. It is stricter than RFC 9112 allows a recipient
 * to be, on purpose: whatever it accepts, libmicrohttpd reads the same way.
 *
 *   fr_http_head h;
 *   fr_http_limits lim = {.max_head_bytes = 16384, .max_fields = 64, .max_body_bytes = 1 << 20};
 *   int r = fr_http_head_parse(buf, n, &lim, &h);
 *   if (r == FR_HEAD_MORE) wait for more bytes;
 *   else if (r == FR_HEAD_BAD) answer h.status (h.code, h.detail);
 *   else if (h.chunked && fr_http_chunks_check(buf + h.head_len, n - h.head_len, &lim, &h))
 *       answer h.status;
 *
 * Refused (status): bytes outside the grammar (CR without LF, bare LF, NUL and other control
 * bytes in names or values, whitespace before a colon, folded lines, a target that is not
 * origin-form or `*`) 400; a version other than HTTP/1.0 or 1.1 505; head over max_head_bytes or
 * more than max_fields fields 431; missing or repeated Host on HTTP/1.1 400; repeated or
 * non-numeric Content-Length 400, over max_body_bytes 413; Transfer-Encoding repeated, with a
 * repeated coding, with an empty list element, on HTTP/1.0 or together with Content-Length 400,
 * naming any coding but `chunked` 501; POST or PUT on HTTP/1.0 without Content-Length 411.
 * Chunk lines (fr_http_chunks_check): a size that is not 1..15 hex digits after leading zeros,
 * a bad extension or line ending 400, a running total over max_body_bytes 413.
 *
 * Thread-safe (no state besides the arguments). No allocation.
 */
#ifndef FRUGAL_SERVE_HTTP_HEAD_H
#define FRUGAL_SERVE_HTTP_HEAD_H

#include <stdbool.h>
#include <stddef.h>

#define FR_HEAD_MAX_FIELDS 128 /* hard cap on fields kept (fr_http_limits.max_fields <= this) */

enum { FR_HEAD_BAD = -1, FR_HEAD_MORE = 0, FR_HEAD_DONE = 1 };

typedef struct fr_http_limits {
    size_t max_head_bytes;              /* request line + fields + blank line (431 over it) */
    int max_fields;                     /* header fields (431 over it) */
    unsigned long long max_body_bytes;  /* Content-Length or chunk total (413 over it) */
} fr_http_limits;

typedef struct fr_http_field {
    const char *name;  /* token, not NUL-terminated */
    size_t name_len;
    const char *value; /* without surrounding whitespace, not NUL-terminated */
    size_t value_len;
} fr_http_field;

typedef struct fr_http_head {
    int status;          /* 0, or the status to answer (400, 411, 413, 431, 501, 505) */
    const char *code;    /* machine code of the refusal ("bad_framing", ...), static */
    const char *detail;  /* one sentence for people, static */
    bool line_done;      /* the request line was read (method, path, minor are set) */
    const char *method;  /* token */
    size_t method_len;
    const char *path;    /* the target up to '?' or '#' */
    size_t path_len;
    int minor;           /* HTTP/1.minor: 0 or 1 */
    size_t head_len;     /* bytes of the head including the blank line (FR_HEAD_DONE) */
    int n_fields;
    fr_http_field fields[FR_HEAD_MAX_FIELDS];
    long long content_length; /* -1 when absent */
    bool chunked;        /* Transfer-Encoding: chunked */
} fr_http_head;

/* Parses buf[0..len). FR_HEAD_DONE: a valid head of h->head_len bytes. FR_HEAD_MORE: valid so
 * far, the head is not complete (h->line_done may already be true). FR_HEAD_BAD: h->status,
 * h->code and h->detail say why (h->line_done tells whether the path is known). */
int fr_http_head_parse(const char *buf, size_t len, const fr_http_limits *lim, fr_http_head *h);

/* Checks the chunked body bytes that follow a head, as far as they go (a partial line is fine).
 * 0 when nothing is wrong so far; -1 with h->status/code/detail set. */
int fr_http_chunks_check(const char *buf, size_t len, const fr_http_limits *lim, fr_http_head *h);

/* The value of the first field named `name` (case-insensitive), its length in *len; NULL when
 * absent. */
const char *fr_http_head_get(const fr_http_head *h, const char *name, size_t *len);
/* How many fields are named `name`. */
int fr_http_head_count(const fr_http_head *h, const char *name);
/* True when the method is `m` (exact, case-sensitive as HTTP methods are). */
bool fr_http_head_method_is(const fr_http_head *h, const char *m);

#endif
