/* test_multipart.c — the bounded multipart/form-data parser (serve/multipart.h): the boundary
 * from Content-Type, CRLF framing, quoted names, and each limit with its status and code. */
#include "serve/multipart.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

static const fr_mp_limits LIM = {.max_parts = 4, .max_header_bytes = 256,
                                 .max_part_bytes = 64, .max_total_bytes = 4096};

static int parse(const char *body, fr_mp_part **p, int *n, fr_mp_error *e) {
    return fr_mp_parse(body, strlen(body), "XyZ", &LIM, p, n, e);
}

TEST(mp_boundary) {
    char b[FR_MP_MAX_BOUNDARY + 1];
    fr_mp_error e;
    CHECK_EQ_INT(fr_mp_boundary("multipart/form-data; boundary=abc123", b, &e), 0);
    CHECK(!strcmp(b, "abc123"));
    CHECK_EQ_INT(fr_mp_boundary("Multipart/Form-Data;charset=utf-8; boundary=\"a b:c\"", b, &e), 0);
    CHECK(!strcmp(b, "a b:c"));
    CHECK_EQ_INT(fr_mp_boundary("multipart/form-data", b, &e), -1);
    CHECK(!strcmp(e.code, "missing_boundary"));
    CHECK_EQ_INT(e.status, 400);
    CHECK_EQ_INT(fr_mp_boundary("application/json", b, &e), -1);
    CHECK(!strcmp(e.code, "not_multipart"));
    CHECK_EQ_INT(fr_mp_boundary(NULL, b, &e), -1);
    CHECK_EQ_INT(fr_mp_boundary("multipart/form-data; boundary=\"unterminated", b, &e), -1);
    char longb[200] = "multipart/form-data; boundary=";
    memset(longb + strlen(longb), 'a', 80);
    CHECK_EQ_INT(fr_mp_boundary(longb, b, &e), -1);
    CHECK(!strcmp(e.code, "bad_boundary"));
}

TEST(mp_parts) {
    const char *body = "--XyZ\r\n"
                       "Content-Disposition: form-data; name=\"file\"; filename=\"a \\\"q\\\".wav\"\r\n"
                       "Content-Type: audio/wav\r\n\r\n"
                       "RIFF\r\n--X\r\n"
                       "--XyZ\r\n"
                       "content-disposition: form-data; name=model\r\n\r\n"
                       "whisper-1\r\n"
                       "--XyZ\r\n"
                       "Content-Disposition: form-data; name=\"empty\"\r\n\r\n"
                       "\r\n"
                       "--XyZ--\r\n";
    fr_mp_part *p;
    int n;
    fr_mp_error e;
    CHECK_EQ_INT(parse(body, &p, &n, &e), 0);
    CHECK_EQ_INT(n, 3);
    CHECK(!strcmp(p[0].name, "file"));
    CHECK(!strcmp(p[0].filename, "a \"q\".wav"));
    CHECK(!strcmp(p[0].type, "audio/wav"));
    CHECK_EQ_INT(p[0].len, 9); /* the CRLF before a delimiter belongs to it */
    CHECK(!memcmp(p[0].data, "RIFF\r\n--X", 9));
    const fr_mp_part *m = fr_mp_find(p, n, "model");
    CHECK(m && m->len == 9 && !memcmp(m->data, "whisper-1", 9));
    CHECK_EQ_INT(fr_mp_find(p, n, "empty")->len, 0);
    CHECK(!fr_mp_find(p, n, "nope"));
    free(p);
}

static void refused(const char *body, int status, const char *code) {
    fr_mp_part *p = NULL;
    int n = 0;
    fr_mp_error e = {0};
    CHECK_EQ_INT(parse(body, &p, &n, &e), -1);
    CHECK_EQ_INT(e.status, status);
    CHECK(e.code && !strcmp(e.code, code));
    CHECK(!p);
}

TEST(mp_hostile) {
    refused("no delimiter here", 400, "bad_multipart");
    refused("--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nunterminated", 400, "bad_multipart");
    refused("--XyZ\r\nContent-Disposition: attachment; name=a\r\n\r\nx\r\n--XyZ--", 400, "bad_part_header");
    refused("--XyZ\r\nNoColonHere\r\n\r\nx\r\n--XyZ--", 400, "bad_part_header");
    refused("--XyZ\r\nContent-Type: text/plain\r\n\r\nx\r\n--XyZ--", 400, "bad_part_header");
    refused("--XyZ\r\nContent-Disposition: form-data; name=\"a\r\n\r\nx\r\n--XyZ--", 400, "bad_part_header");
    refused("--XyZ\r\nContent-Disposition: form-data; name=\"\"\r\n\r\nx\r\n--XyZ--", 400, "bad_part_header");
    refused("--XyZ\nContent-Disposition: form-data; name=a\n\nx\n--XyZ--", 400, "bad_multipart");
    char big[1024];
    snprintf(big, sizeof big, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\n%0100d\r\n--XyZ--", 0);
    refused(big, 413, "part_too_large");
    char hdr[1024];
    snprintf(hdr, sizeof hdr, "--XyZ\r\nContent-Disposition: form-data; name=a\r\nX-Pad: %0300d\r\n\r\nx\r\n--XyZ--", 0);
    refused(hdr, 400, "part_header_too_large");
    char many[1024] = "";
    for (int i = 0; i < 5; i++)
        strcat(many, "--XyZ\r\nContent-Disposition: form-data; name=a\r\n\r\nx\r\n");
    strcat(many, "--XyZ--");
    refused(many, 400, "too_many_parts");
    char *huge = calloc(5000, 1);
    memset(huge, 'a', 4999);
    refused(huge, 413, "request_too_large");
    free(huge);
}

/* The one parameter-list reader behind Content-Type and Content-Disposition: the same malformed
 * lists are refused by both, with each header's code. */
TEST(mp_parameter_lists) {
    static const char *const bad[] = {"; name", "; =x", "; name=", "; name=\"open", "name=x",
                                      "; na me=x", "; name=\"a\x01b\""};
    char b[FR_MP_MAX_BOUNDARY + 1];
    fr_mp_error e;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char ct[128], body[256];
        snprintf(ct, sizeof ct, "multipart/form-data%s; boundary=XyZ", bad[i]);
        CHECK_EQ_INT(fr_mp_boundary(ct, b, &e), -1);
        CHECK(!strcmp(e.code, "bad_content_type"));
        snprintf(body, sizeof body, "--XyZ\r\nContent-Disposition: form-data%s\r\n\r\nx\r\n--XyZ--", bad[i]);
        refused(body, 400, "bad_part_header");
    }
    CHECK_EQ_INT(fr_mp_boundary("multipart/form-data; boundary=", b, &e), -1);
    CHECK(!strcmp(e.code, "bad_boundary"));
    CHECK_EQ_INT(fr_mp_boundary("multipart/form-data ; charset = utf-8 ; boundary = \"q\\\"x\"", b, &e), 0);
    CHECK(!strcmp(b, "q\"x"));
    fr_mp_part *p;
    int n;
    CHECK_EQ_INT(parse("--XyZ\r\nContent-Disposition: form-data ; filename = \"f.wav\" ; NAME = file\r\n"
                       "\r\nx\r\n--XyZ--", &p, &n, &e), 0);
    CHECK(n == 1 && !strcmp(p[0].name, "file") && !strcmp(p[0].filename, "f.wav"));
    free(p);
}

int main(void) { return t_main(); }
