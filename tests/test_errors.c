/* test_errors.c — error codes (base.h fr_err_code) and the one mapping from code to HTTP status
 * and OpenAI error type (serve/error.h):
 *
 *   - fr_err_set gives FR_ERR_INTERNAL, fr_err_setc the code, fr_err_prefix keeps it; every code
 *     has its own name; cancel reasons map to their codes; fr_read_file says not found / too
 *     large by code;
 *   - the mapping table, and fr_api_error_from_err's JSON ({"error": {"message", "type",
 *     "param", "code"}} with the code's name); the answers to refused admissions;
 *   - every raising site of the image and audio decoders (limits, declared and sniffed types,
 *     corrupt and truncated data) sets its code, asserted on the code alone, never the wording;
 *   - the same media through the real server (fr_server_start on a loopback port with the tiny
 *     Qwen2 fixture), on both doors that take media: /v1/assist and image_url / input_audio parts
 *     of /v1/chat/completions: 413 for over a limit, 415 for a type we do not take, 400 for
 *     malformed, with the JSON code of the failure.
 */
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "serve/api.h"
#include "serve/error.h"
#include "serve/serve.h"
#include "stages/audio/audio.h"
#include "stages/image/image.h"
#include "stages/ocr/docgen.h"
#include "t.h"

#define MODEL "tests/fixtures/qwen2-tiny"

/* ---- the code itself ---------------------------------------------------------------------- */

TEST(err_code_is_set_where_raised_and_kept_by_prefix) {
    fr_err e;
    memset(&e, 0, sizeof e);
    CHECK_EQ_INT(e.code, FR_ERR_INTERNAL); /* a zeroed error is internal */
    fr_err_setc(&e, FR_ERR_TOO_LARGE, "x %d", 1);
    CHECK_EQ_INT(e.code, FR_ERR_TOO_LARGE);
    CHECK_STR(e.msg, "x 1");
    fr_err_prefix(&e, "image");
    CHECK_EQ_INT(e.code, FR_ERR_TOO_LARGE);
    CHECK_STR(e.msg, "image: x 1");
    fr_err_set(&e, "plain"); /* the ~hundreds of plain sites: internal */
    CHECK_EQ_INT(e.code, FR_ERR_INTERNAL);
    fr_err_setc(NULL, FR_ERR_NOT_FOUND, "nothing happens");
    fr_err_set(NULL, "nothing happens");

    static const char *const names[FR_ERR_N_CODES] = {
        "internal", "bad_request", "too_large", "unsupported_media",
        "not_found", "unavailable", "timeout", "cancelled"};
    for (int c = 0; c < FR_ERR_N_CODES; c++) CHECK_STR(fr_err_code_name((fr_err_code)c), names[c]);
    CHECK_STR(fr_err_code_name((fr_err_code)99), "internal");

    CHECK_EQ_INT(fr_cancel_reason_code(FR_CANCEL_CLIENT_GONE), FR_ERR_CANCELLED);
    CHECK_EQ_INT(fr_cancel_reason_code(FR_CANCEL_SHUTDOWN), FR_ERR_UNAVAILABLE);
    CHECK_EQ_INT(fr_cancel_reason_code(FR_CANCEL_DEADLINE), FR_ERR_TIMEOUT);
    CHECK_EQ_INT(fr_cancel_reason_code(FR_CANCEL_TIMEOUT), FR_ERR_TIMEOUT);

    /* file lookups: a missing file is "not found", one over the cap "too large" */
    CHECK(fr_read_file("tests/fixtures/no-such-file", 100, NULL, &e) == NULL);
    CHECK_EQ_INT(e.code, FR_ERR_NOT_FOUND);
    CHECK(fr_read_file("tests/fixtures/corpus-en.txt", 10, NULL, &e) == NULL);
    CHECK_EQ_INT(e.code, FR_ERR_TOO_LARGE);
    fr_mmap m;
    CHECK_EQ_INT(fr_mmap_open(&m, "tests/fixtures/no-such-file", &e), -1);
    CHECK_EQ_INT(e.code, FR_ERR_NOT_FOUND);
}

TEST(code_maps_to_one_status_and_type) {
    static const struct {
        fr_err_code c;
        int status;
        const char *type;
    } tab[] = {
        {FR_ERR_BAD_REQUEST, 400, "invalid_request_error"},
        {FR_ERR_NOT_FOUND, 404, "invalid_request_error"},
        {FR_ERR_TOO_LARGE, 413, "invalid_request_error"},
        {FR_ERR_UNSUPPORTED, 415, "invalid_request_error"},
        {FR_ERR_CANCELLED, 499, "invalid_request_error"},
        {FR_ERR_INTERNAL, 500, "server_error"},
        {FR_ERR_UNAVAILABLE, 503, "server_error"},
        {FR_ERR_TIMEOUT, 504, "timeout_error"},
    };
    CHECK_EQ_INT((int)FR_ARRAY_LEN(tab), FR_ERR_N_CODES);
    for (size_t i = 0; i < FR_ARRAY_LEN(tab); i++) {
        CHECK_EQ_INT(fr_http_status_of(tab[i].c), tab[i].status);
        CHECK_STR(fr_http_error_type_of(tab[i].c), tab[i].type);
        /* the same message under every code: only the code decides */
        fr_err e;
        fr_err_setc(&e, tab[i].c, "image too large, unsupported, declared, limit");
        fr_api_error ae;
        fr_api_error_from_err(&ae, &e, NULL, "image");
        CHECK_EQ_INT(ae.status, tab[i].status);
        char *js = fr_api_error_json(&ae);
        cJSON *j = cJSON_Parse(js);
        const cJSON *o = cJSON_GetObjectItem(j, "error");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "code")), fr_err_code_name(tab[i].c));
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "type")), tab[i].type);
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "param")), "image");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "message")),
                  "image too large, unsupported, declared, limit");
        cJSON_Delete(j);
        free(js);
        /* a more specific JSON code the caller knows replaces the name, not the status */
        fr_api_error_from_err(&ae, &e, "ocr_timeout", NULL);
        CHECK_EQ_INT(ae.status, tab[i].status);
        CHECK_STR(ae.code, "ocr_timeout");
    }
    CHECK_EQ_INT(fr_http_status_of((fr_err_code)99), 500);
}

TEST(admission_refusals_map_in_one_place) {
    static const struct {
        fr_admit v;
        int status;
        const char *type, *code;
    } tab[] = {
        {FR_ADMIT_QUEUE_FULL, 429, "rate_limit_error", "queue_full"},
        {FR_ADMIT_OVERLOAD, 429, "rate_limit_error", "overload"},
        {FR_ADMIT_DEADLINE, 429, "rate_limit_error", "deadline"},
        {FR_ADMIT_TOO_LARGE, 400, "invalid_request_error", "context_length_exceeded"},
        {FR_ADMIT_CLOSED, 503, "server_error", "shutting_down"},
        {FR_ADMIT_INVALID, 400, "invalid_request_error", "invalid_image_input"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(tab); i++) {
        fr_admission adm = {.verdict = tab[i].v, .retry_after_s = 2};
        snprintf(adm.msg, sizeof adm.msg, "refused %d", (int)i);
        fr_api_error e;
        fr_api_error_from_admission(&e, &adm);
        CHECK_EQ_INT(e.status, tab[i].status);
        CHECK_STR(e.type, tab[i].type);
        CHECK_STR(e.code, tab[i].code);
        CHECK_STR(e.message, adm.msg);
    }
}

/* ---- media that fail at each raising site ---------------------------------------------------- */

static void put32be(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)(v >> 24), p[1] = (uint8_t)(v >> 16), p[2] = (uint8_t)(v >> 8), p[3] = (uint8_t)v;
}
static void put32le(uint8_t *p, uint32_t v) {
    p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8), p[2] = (uint8_t)(v >> 16), p[3] = (uint8_t)(v >> 24);
}
static void put16le(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* A PNG signature + IHDR claiming w x h, and a few bytes of nothing after it. */
static size_t png_head(uint8_t *b, uint32_t w, uint32_t h) {
    static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    memset(b, 0, 64);
    memcpy(b, sig, 8);
    put32be(b + 8, 13);
    memcpy(b + 12, "IHDR", 4);
    put32be(b + 16, w);
    put32be(b + 20, h);
    b[24] = 8; /* bit depth */
    b[25] = 0; /* gray */
    return 48;
}

/* A real PNG / JPEG of a small photo-like image (caller frees). */
static fr_buf encoded(fr_img_format f) {
    fr_image img;
    fr_doc_photo(0, 64, 48, 3, &img);
    fr_buf b = {0};
    fr_err e = {0};
    if (fr_img_encode(&img, f, 90, &b, &e)) printf("  encode: %s\n", e.msg);
    fr_image_free(&img);
    return b;
}

/* A PCM WAV header: ch channels at rate Hz, 16-bit, claiming data_bytes of samples, followed by
 * have_bytes of silence. */
static size_t wav(uint8_t *b, uint16_t ch, uint32_t rate, uint32_t data_bytes, uint32_t have_bytes) {
    memcpy(b, "RIFF", 4);
    put32le(b + 4, 36 + have_bytes);
    memcpy(b + 8, "WAVEfmt ", 8);
    put32le(b + 16, 16);
    put16le(b + 20, 1);
    put16le(b + 22, ch);
    put32le(b + 24, rate);
    put32le(b + 28, rate * ch * 2);
    put16le(b + 32, (uint16_t)(ch * 2));
    put16le(b + 34, 16);
    memcpy(b + 36, "data", 4);
    put32le(b + 40, data_bytes);
    memset(b + 44, 0, have_bytes);
    return 44 + (size_t)have_bytes;
}

/* Ogg's CRC (polynomial 0x04c11db7, not reflected, over the page with its CRC field zero). */
static uint32_t ogg_crc(const uint8_t *p, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint32_t)(i >= 22 && i < 26 ? 0 : p[i]) << 24;
        for (int k = 0; k < 8; k++) c = (c & 0x80000000u) ? (c << 1) ^ 0x04c11db7u : c << 1;
    }
    return c;
}

/* One Ogg page holding one packet; its size. */
static size_t ogg_page(uint8_t *b, uint8_t flags, uint32_t serial, uint32_t seq,
                       const uint8_t *pkt, uint8_t n) {
    memset(b, 0, 27);
    memcpy(b, "OggS", 4);
    b[5] = flags;
    put32le(b + 14, serial);
    put32le(b + 18, seq);
    b[26] = 1;
    b[27] = n;
    memcpy(b + 28, pkt, n);
    put32le(b + 22, ogg_crc(b, 28 + (size_t)n));
    return 28 + (size_t)n;
}

typedef struct media_case {
    const char *name;   /* what the case is */
    bool audio;         /* audio (else image) */
    uint8_t data[16384]; /* the bytes */
    size_t n;
    const char *mime;   /* declared media type, or NULL */
    fr_err_code code;   /* the code the stage must raise */
    int status;         /* the HTTP status both doors must answer */
    const char *json;   /* the JSON code both doors must answer */
} media_case;

static media_case g_cases[32];
static int g_n_cases;

static media_case *add(const char *name, bool audio, const char *mime, fr_err_code code) {
    media_case *c = &g_cases[g_n_cases++];
    memset(c, 0, sizeof *c);
    c->name = name;
    c->audio = audio;
    c->mime = mime;
    c->code = code;
    c->status = fr_http_status_of(code);
    c->json = code == FR_ERR_TOO_LARGE     ? "media_too_large"
              : code == FR_ERR_UNSUPPORTED ? "unsupported_media_type"
              : audio                      ? "invalid_audio"
                                           : "invalid_image";
    return c;
}

static void build_cases(void) {
    if (g_n_cases) return;
    media_case *c;
    /* image: limits */
    c = add("png wider than max_side", false, "image/png", FR_ERR_TOO_LARGE);
    c->n = png_head(c->data, 20000, 10);
    c = add("png over max_pixels", false, NULL, FR_ERR_TOO_LARGE);
    c->n = png_head(c->data, 10000, 10000);
    /* image: types */
    fr_buf png = encoded(FR_IMG_PNG), jpg = encoded(FR_IMG_JPEG);
    if (png.len > sizeof c->data || jpg.len > sizeof c->data) printf("  fixture images too big\n");
    c = add("declared jpeg, png bytes", false, "image/jpeg", FR_ERR_UNSUPPORTED);
    memcpy(c->data, png.data, c->n = FR_MIN(png.len, sizeof c->data));
    c = add("declared png, jpeg bytes", false, "image/png", FR_ERR_UNSUPPORTED);
    memcpy(c->data, jpg.data, c->n = FR_MIN(jpg.len, sizeof c->data));
    c = add("not an image format", false, NULL, FR_ERR_UNSUPPORTED);
    c->n = (size_t)snprintf((char *)c->data, sizeof c->data, "GIF89a is not taken here, at all");
    /* image: malformed */
    c = add("png: first chunk not IHDR", false, "image/png", FR_ERR_BAD_REQUEST);
    c->n = png_head(c->data, 10, 10);
    memcpy(c->data + 12, "IDAT", 4);
    c = add("png: zero width", false, "image/png", FR_ERR_BAD_REQUEST);
    c->n = png_head(c->data, 0, 10);
    c = add("png: truncated pixel data", false, "image/png", FR_ERR_BAD_REQUEST);
    memcpy(c->data, png.data, c->n = FR_MIN(png.len, sizeof c->data) / 2);
    c = add("jpeg: no marker after SOI", false, "image/jpeg", FR_ERR_BAD_REQUEST);
    static const char soi_app0_junk[] =
        "\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00\x12\x34";
    memcpy(c->data, soi_app0_junk, c->n = sizeof soi_app0_junk - 1);
    c = add("webp: corrupt header", false, "image/webp", FR_ERR_BAD_REQUEST);
    static const char webp_junk[] = "RIFF\x30\x00\x00\x00WEBPVP8 \x24\x00\x00\x00garbagegarbagegarbage";
    memcpy(c->data, webp_junk, c->n = sizeof webp_junk - 1);
    fr_buf_free(&png);
    fr_buf_free(&jpg);

    /* audio: limits */
    c = add("wav header claims two hours", true, "audio/wav", FR_ERR_TOO_LARGE);
    c->n = wav(c->data, 1, 16000, 16000u * 2 * 7200, 640);
    c = add("wav with 12 channels", true, "audio/wav", FR_ERR_TOO_LARGE);
    c->n = wav(c->data, 12, 16000, 12 * 2 * 20, 12 * 2 * 20);
    /* audio: types */
    c = add("not an audio format", true, NULL, FR_ERR_UNSUPPORTED);
    c->n = (size_t)snprintf((char *)c->data, sizeof c->data, "ID3 mp3 is not taken here at all");
    static const uint8_t opus[19] = {'O', 'p', 'u', 's', 'H', 'e', 'a', 'd', 1, 1, 0x38, 1,
                                     0x80, 0xbb, 0, 0, 0, 0, 0};
    c = add("ogg holding opus", true, "audio/ogg", FR_ERR_UNSUPPORTED);
    c->n = ogg_page(c->data, 2, 7, 0, opus, sizeof opus);
    static const uint8_t vorbis_id[30] = {1, 'v', 'o', 'r', 'b', 'i', 's', 0, 0, 0, 0, 1,
                                          0x80, 0x3e, 0, 0, 0, 0, 0, 0, 0, 0xfa, 0, 0,
                                          0, 0, 0, 0, 0xb8, 1};
    c = add("ogg with two logical streams", true, "audio/ogg", FR_ERR_UNSUPPORTED);
    c->n = ogg_page(c->data, 2, 7, 0, vorbis_id, sizeof vorbis_id);
    c->n += ogg_page(c->data + c->n, 0, 8, 1, vorbis_id, sizeof vorbis_id);
    /* audio: malformed */
    c = add("wav: truncated samples", true, "audio/wav", FR_ERR_BAD_REQUEST);
    c->n = wav(c->data, 1, 16000, 64000, 100);
    c = add("wav: zero channels", true, "audio/wav", FR_ERR_BAD_REQUEST);
    c->n = wav(c->data, 0, 16000, 640, 640);
    c = add("wav: sample rate 1000 Hz", true, "audio/wav", FR_ERR_BAD_REQUEST);
    c->n = wav(c->data, 1, 1000, 640, 640);
    c = add("ogg: bad checksum", true, "audio/ogg", FR_ERR_BAD_REQUEST);
    c->n = ogg_page(c->data, 2, 7, 0, vorbis_id, sizeof vorbis_id);
    c->data[40] ^= 0x55;
    c = add("ogg: second vorbis header malformed", true, "audio/ogg", FR_ERR_BAD_REQUEST);
    c->n = ogg_page(c->data, 2, 7, 0, vorbis_id, sizeof vorbis_id);
    c->n += ogg_page(c->data + c->n, 0, 7, 1, (const uint8_t *)"\003vorbiz-comment", 15);
}

TEST(each_decoder_site_raises_its_code) {
    build_cases();
    for (int i = 0; i < g_n_cases; i++) {
        const media_case *c = &g_cases[i];
        fr_err e = {0};
        e.code = FR_ERR_N_CODES; /* not a code: a site that sets none shows */
        int rc;
        if (c->audio) {
            fr_audio a;
            memset(&a, 0, sizeof a);
            rc = fr_audio_decode(c->data, c->n, NULL, 16000, &a, &e);
            if (!rc) fr_audio_free(&a);
        } else {
            fr_image img;
            memset(&img, 0, sizeof img);
            rc = fr_img_decode(c->data, c->n, c->mime, NULL, 1, &img, &e);
            if (!rc) fr_image_free(&img);
        }
        if (rc == 0 || (int)e.code != (int)c->code)
            printf("  %s: rc %d, code %s (want %s): %s\n", c->name, rc,
                   fr_err_code_name(e.code), fr_err_code_name(c->code), e.msg);
        CHECK(rc != 0);
        CHECK_EQ_INT(e.code, c->code);
    }
}

/* ---- through the real server ------------------------------------------------------------------ */

static int g_port;

/* POST body to path; the status (-1: no answer within 20 s) and the body (malloc'd) in *out. */
static int post(const char *path, const char *body, char **out) {
    *out = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    fr_buf req = {0};
    fr_buf_printf(&req,
                  "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
                  path, strlen(body), body);
    for (size_t off = 0; off < req.len;) {
        ssize_t w = write(fd, req.data + off, req.len - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    fr_buf_free(&req);
    fr_buf r = {0};
    double t0 = fr_time_s();
    while (fr_time_s() - t0 < 20) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 200) <= 0) continue;
        char buf[4096];
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) break;
        fr_buf_append(&r, buf, (size_t)n);
    }
    close(fd);
    fr_buf_append(&r, "", 0);
    char *s = fr_buf_cstr(&r);
    int st = !strncmp(s, "HTTP/1.1 ", 9) ? atoi(s + 9) : -1;
    const char *b = strstr(s, "\r\n\r\n");
    *out = fr_xstrdup(b ? b + 4 : "");
    free(s);
    return st;
}

static void b64(fr_buf *out, const uint8_t *p, size_t n) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);
        char q[4] = {t[v >> 18], t[(v >> 12) & 63], i + 1 < n ? t[(v >> 6) & 63] : '=',
                     i + 2 < n ? t[v & 63] : '='};
        fr_buf_append(out, q, 4);
    }
}

/* The error object's "code" of a response body ("" when none). */
static void json_code(const char *body, char *code, size_t cap) {
    cJSON *j = cJSON_Parse(body);
    const char *c = cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "code"));
    snprintf(code, cap, "%s", c ? c : "");
    cJSON_Delete(j);
}

TEST(real_server_answers_each_media_failure_by_its_code) {
    build_cases();
    fr_serve_config cfg;
    fr_serve_config_init(&cfg);
    cfg.model = fr_xstrdup(MODEL);
    cfg.ledger = fr_xstrdup("");
    cfg.port = 0;
    fr_err err = {0};
    frugal_model *m = frugal_model_load(MODEL, frugal_model_default_params(), NULL);
    CHECK(m != NULL);
    fr_server *s = m ? fr_server_start(&cfg, m, NULL, &err) : NULL;
    if (!s) printf("  server: %s\n", err.msg);
    CHECK(s != NULL);
    if (!s) {
        fr_serve_config_free(&cfg);
        frugal_model_free(m);
        return;
    }
    g_port = fr_server_port(s);
    for (int i = 0; i < g_n_cases; i++) {
        const media_case *c = &g_cases[i];
        fr_buf url = {0};
        if (c->mime) fr_buf_printf(&url, "data:%s;base64,", c->mime);
        b64(&url, c->data, c->n);
        fr_buf_cstr(&url);
        for (int door = 0; door < 2; door++) {
            fr_buf body = {0};
            if (door == 0)
                fr_buf_printf(&body, "{\"%s\":\"%s\"}", c->audio ? "audio" : "image", url.data);
            else if (c->audio)
                fr_buf_printf(&body,
                              "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                              "\"input_audio\",\"input_audio\":{\"data\":\"%s\",\"format\":"
                              "\"wav\"}}]}],\"max_tokens\":1}",
                              url.data);
            else
                fr_buf_printf(&body,
                              "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":"
                              "\"image_url\",\"image_url\":{\"url\":\"%s\"}}]}],\"max_tokens\":1}",
                              url.data);
            const char *path = door == 0 ? "/v1/assist" : "/v1/chat/completions";
            char *resp = NULL;
            int st = post(path, fr_buf_cstr(&body), &resp);
            char code[64];
            json_code(resp, code, sizeof code);
            if (st != c->status || strcmp(code, c->json))
                printf("  %s via %s: %d %s (want %d %s): %.200s\n", c->name, path, st, code,
                       c->status, c->json, resp);
            CHECK_EQ_INT(st, c->status);
            CHECK_STR(code, c->json);
            free(resp);
            fr_buf_free(&body);
        }
        fr_buf_free(&url);
    }
    fr_server_free(s);
    fr_serve_config_free(&cfg);
    frugal_model_free(m);
}

int main(void) { return t_main(); }
