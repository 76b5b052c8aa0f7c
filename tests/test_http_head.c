/* test_http_head.c — the strict request-head parser (serve/http_head.h) alone: the framing
 * list, the bounds (431), chunk lines, field lookups; and the connection guard's per-class slot
 * reserves (serve/guard.h). The same rules against the running server: test_hostile.c. */
#include "serve/guard.h"
#include "serve/http_head.h"
#include "t.h"

#include "base/base.h"

/* ---- the parser alone ---- */

static const fr_http_limits LIM = {.max_head_bytes = 4096, .max_fields = 32,
                                   .max_body_bytes = 1 << 20};

static int head_status(const char *req) {
    fr_http_head h;
    size_t n = strlen(req);
    int r = fr_http_head_parse(req, n, &LIM, &h);
    if (r == FR_HEAD_MORE) return 0;
    if (r == FR_HEAD_DONE && h.chunked &&
        fr_http_chunks_check(req + h.head_len, n - h.head_len, &LIM, &h))
        return h.status;
    return r == FR_HEAD_DONE ? 200 : h.status;
}

TEST(head_parser_framing) {
    CHECK_EQ_INT(head_status("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
    CHECK_EQ_INT(head_status("GET /health HTTP/1.0\r\n\r\n"), 200);
    CHECK_EQ_INT(head_status("GET /health HTTP/1.1\r\nHost: x\r\n"), 0);   /* not complete */
    CHECK_EQ_INT(head_status("GET /hea"), 0);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n"), 501);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked,\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n"), 413);
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\n\r\n"), 400);                      /* no Host */
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.0\r\n\r\n"), 411);
    CHECK_EQ_INT(head_status("POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n"), 200);
    CHECK_EQ_INT(head_status("GET / HTTP/2.0\r\nHost: x\r\n\r\n"), 505);
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\nHost: x\n\n"), 400);                 /* bare LF */
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\nHost : x\r\n\r\n"), 400);          /* space before : */
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("GET http://x/ HTTP/1.1\r\nHost: x\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\nHost: x\r\nX: a\x01" "b\r\n\r\n"), 400);
    CHECK_EQ_INT(head_status("GET / HTTP/1.1\r\nHost: x\r\nX: a\x7f\r\n\r\n"), 400);
    /* a NUL: refused as soon as it is seen, even before the line ends */
    const char nul[] = "GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k\0junk";
    fr_http_head h;
    CHECK_EQ_INT(fr_http_head_parse(nul, sizeof nul - 1, &LIM, &h), FR_HEAD_BAD);
    CHECK_EQ_INT(h.status, 400);
    /* chunk lines */
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n"), 413);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"), 200);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n"), 400);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n00000002;x=y\r\nab\r\n"), 200);
    CHECK_EQ_INT(head_status("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfff"), 200); /* partial */
}

TEST(head_parser_bounds) {
    /* 431: a head over max_head_bytes, or too many fields */
    fr_buf b = {0};
    fr_buf_puts(&b, "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
    for (int i = 0; i < 5000; i++) fr_buf_puts(&b, "a");
    fr_http_head h;
    CHECK_EQ_INT(fr_http_head_parse(b.data, b.len, &LIM, &h), FR_HEAD_BAD);
    CHECK_EQ_INT(h.status, 431);
    CHECK(h.line_done); /* the path is known: the refusal can be accounted */
    b.len = 0;
    fr_buf_puts(&b, "GET / HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 40; i++) fr_buf_puts(&b, "A: b\r\n");
    fr_buf_puts(&b, "\r\n");
    CHECK_EQ_INT(fr_http_head_parse(b.data, b.len, &LIM, &h), FR_HEAD_BAD);
    CHECK_EQ_INT(h.status, 431);
    fr_buf_free(&b);
    /* lookups */
    const char *r = "POST /v1/assist?x=1 HTTP/1.1\r\nhost: h\r\nX-Priority:  P0 \r\n\r\n";
    CHECK_EQ_INT(fr_http_head_parse(r, strlen(r), &LIM, &h), FR_HEAD_DONE);
    CHECK_EQ_INT((int)h.path_len, 10);
    size_t n;
    const char *v = fr_http_head_get(&h, "x-priority", &n);
    CHECK(v && n == 2 && !memcmp(v, "P0", 2));
    CHECK(fr_http_head_method_is(&h, "POST"));
    CHECK_EQ_INT(h.head_len, strlen(r));
}

TEST(tier_reserves) {
    fr_guard_config c = {.max_connections = 256, .reserved = {-1, -1, -1, 0}};
    fr_guard_config_reserves(&c);
    CHECK_EQ_INT(c.reserved[0], 8);
    CHECK_EQ_INT(c.reserved[1], 32);
    CHECK_EQ_INT(c.reserved[2], 16);
    fr_guard_config s = {.max_connections = 3, .reserved = {5, 5, 5, 0}};
    fr_guard_config_reserves(&s);
    CHECK(s.reserved[0] + s.reserved[1] + s.reserved[2] <= 2); /* P2 keeps one slot */
}

int main(void) { return t_main(); }
