/* test_mask.c — the masker (src/base/mask.c): card numbers by Luhn and IBANs by checksum, with
 * every separator, space, invisible character and digit form of issue 15; no cap on matches;
 * non-numbers (dates, amounts, phone numbers, invoice numbers, Luhn failures) left alone; the
 * output the same length as the input and valid UTF-8; and the callers that now use it (log
 * lines, the ledger's field masker, the slot masker). */
#include <cjson/cJSON.h>
#include <unistd.h>

#include "base/base.h"
#include "base/mask.h"
#include "meter/ledger.h"
#include "serve/api.h"
#include "serve/assist.h"
#include "stages/nlu/slots.h"
#include "t.h"

/* Mask `in` and compare with `want`; also check the count, the length and UTF-8 validity. */
static void expect(const char *in, const char *want, int count) {
    size_t n = strlen(in);
    char *out = malloc(n + 1);
    int got = fr_mask(in, n, out);
    CHECK_STR(out, want);
    CHECK_EQ_INT(strlen(out), n);
    CHECK(fr_utf8_valid(out, strlen(out)));
    if (got != count) fprintf(stderr, "  input [%s]\n", in);
    CHECK_EQ_INT(got, count);
    free(out);
}

TEST(cards_with_every_separator) {
    expect("card 4111 1111 1111 1111 ok", "card **** **** **** 1111 ok", 1);
    expect("5500-0000-0000-0004", "****-****-****-0004", 1);
    expect("4111111111111111", "************1111", 1);
    expect("a 4111.1111.1111.1111.", "a ****.****.****.1111.", 1);
    expect("4111/1111/1111/1111", "****/****/****/1111", 1);
    expect("4111  1111   1111  1111", "****  ****   ****  1111", 1);
    expect("4111 - 1111 - 1111 - 1111", "**** - **** - **** - 1111", 1);
    expect("x4111111111111111y", "x************1111y", 1); /* glued to letters */
    /* 13 and 19 digits (Luhn-valid) */
    expect("4222222222222", "*********2222", 1);
    expect("6011 0000 0000 0000 001", "**** **** **** ***0 001", 1);
}

TEST(cards_in_unicode_disguise) {
    /* no-break space, narrow no-break space, en space, ideographic space */
    expect("4111\xc2\xa0" "1111\xc2\xa0" "1111\xc2\xa0" "1111", "****\xc2\xa0****\xc2\xa0****\xc2\xa0" "1111", 1);
    expect("4111\xe2\x80\xaf" "1111\xe2\x80\x82" "1111\xe3\x80\x80" "1111",
           "****\xe2\x80\xaf****\xe2\x80\x82****\xe3\x80\x80" "1111", 1);
    /* zero-width space, joiner, word joiner, BOM, soft hyphen inside and between the groups */
    expect("41\xe2\x80\x8b" "11 1111\xe2\x81\xa0" "1111\xef\xbb\xbf" "11\xc2\xad" "11",
           "**\xe2\x80\x8b** ****\xe2\x81\xa0****\xef\xbb\xbf" "11\xc2\xad" "11", 1);
    expect("4111\xe2\x80\x8d" "1111\xe2\x80\x8c" "1111\xe2\x80\x8b" "1111",
           "****\xe2\x80\x8d****\xe2\x80\x8c****\xe2\x80\x8b" "1111", 1);
    /* fullwidth digits (U+FF11...) become fullwidth asterisks: same byte length */
    expect("\xef\xbc\x94\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91 \xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91 "
           "\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91 \xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91",
           "\xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a \xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a "
           "\xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a\xef\xbc\x8a \xef\xbc\x91\xef\xbc\x91\xef\xbc\x91\xef\xbc\x91",
           1);
    /* fullwidth hyphen-minus and full stop as separators, mixed with ASCII digits */
    expect("4111\xef\xbc\x8d" "1111\xef\xbc\x8e" "1111-1111", "****\xef\xbc\x8d****\xef\xbc\x8e****-1111", 1);
    /* a combining mark on a digit does not hide it; it is masked with its digit */
    expect("4\xcc\xb8" "111 1111 1111 1111", "****** **** **** 1111", 1);
}

TEST(ibans) {
    expect("GB82 WEST 1234 5698 7654 32", "GB** **** **** **** **54 32", 1);
    expect("iban gb82west12345698765432.", "iban gb****************5432.", 1);
    expect("gb82 West 1234 5698 7654 32", "gb** **** **** **** **54 32", 1);
    expect("IBAN DE89 3704 0044 0532 0130 00, ref", "IBAN DE** **** **** **** **30 00, ref", 1);
    expect("NO93 8601 1117 947", "NO** **** ***7 947", 1);
    expect("FR14 2004 1010 0505 0001 3M02 606", "FR** **** **** **** **** ***2 606", 1);
    /* fullwidth letters and digits */
    expect("\xef\xbc\xa7\xef\xbc\xa2" "82WEST12345698765432", "\xef\xbc\xa7\xef\xbc\xa2****************5432", 1);
    /* wrong checksum, unknown country, wrong length: kept */
    expect("GB83 WEST 1234 5698 7654 32", "GB83 WEST 1234 5698 7654 32", 0);
    expect("ZZ82 WEST 1234 5698 7654 32", "ZZ82 WEST 1234 5698 7654 32", 0);
    expect("GB82 WEST 1234 5698 7654", "GB82 WEST 1234 5698 7654", 0);
}

TEST(no_cap_on_matches) {
    fr_buf in = {0}, want = {0};
    for (int i = 0; i < 40; i++) {
        fr_buf_puts(&in, i & 1 ? "4111 1111 1111 1111; " : "GB82WEST12345698765432; ");
        fr_buf_puts(&want, i & 1 ? "**** **** **** 1111; " : "GB****************5432; ");
    }
    expect(fr_buf_cstr(&in), fr_buf_cstr(&want), 40);
    fr_buf_free(&in);
    fr_buf_free(&want);
}

TEST(non_numbers_left_alone) {
    const char *keep[] = {
        "Invoice INV-2024-00123 dated 2024-03-15, total $1,234.56 (EUR 1.234,56)",
        "call +44 20 7946 0958 or 0044 20 7946 0958 or 004420794609581", /* 12-15 digits, no Luhn */
        "card 4111 1111 1111 1112 was declined",                          /* 16 digits, no Luhn */
        "order 123456789012 and acct 12345678901",                        /* 12 and 11 digits */
        "12345678901234 is an account, 31/12/2024 a date, 12:30:45 a time",
        "41111111111111111111 (20 digits: too long for a card)",
        "tracking 1Z999AA10123456784, ticket #88231, version 1.2.3.4",
        "plain text with no digits at all, caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(keep); i++) expect(keep[i], keep[i], 0);
}

TEST(kept_digits_cannot_form_a_new_card) {
    /* "1111" kept from the card and the 9 digits after it are 13 Luhn-valid digits too */
    expect("4111111111111111 123456786", "**************** *****6786", 2);
}

TEST(invalid_utf8_becomes_valid) {
    expect("\xff" "4111 1111 1111 1111 \xc3", "?**** **** **** 1111 ?", 1);
    expect("\xe2\x80", "??", 0);
    char s[] = "in place: 5500 0000 0000 0004";
    CHECK_EQ_INT(fr_mask_inplace(s), 1);
    CHECK_STR(s, "in place: **** **** **** 0004");
    char *d = fr_mask_dup("x 4111111111111111");
    CHECK_STR(d, "x ************1111");
    free(d);
    CHECK(fr_mask_dup(NULL) == NULL);
    expect("", "", 0);
}

TEST(callers_use_it) {
    /* the ledger's field masker is the same masker now (lowercase IBAN, dots) */
    char a[] = "gb82west12345698765432 and 4111.1111.1111.1111";
    CHECK_EQ_INT(fr_ledger_mask_digits(a), 2);
    CHECK_STR(a, "gb****************5432 and ****.****.****.1111");
    /* the slot masker keeps the last four letters or digits of a span */
    char out[64];
    fr_slot_mask("4111-1111-1111-1234", 19, out, sizeof out);
    CHECK_STR(out, "****-****-****-1234");
    fr_mask_span("GB82WEST12345698765432", 22, 4, out, sizeof out);
    CHECK_STR(out, "******************5432");
}

TEST(log_lines_are_masked) {
    /* fr_log writes to stderr: capture it through a pipe */
    fflush(stderr);
    int fds[2];
    CHECK(pipe(fds) == 0);
    int saved = dup(2);
    dup2(fds[1], 2);
    fr_info("payment card 4111 1111 1111 1111 iban GB82 WEST 1234 5698 7654 32");
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fds[1]);
    char buf[512] = {0};
    ssize_t r = read(fds[0], buf, sizeof buf - 1);
    close(fds[0]);
    CHECK(r > 0);
    CHECK(strstr(buf, "payment card **** **** **** 1111 iban GB** **** **** **** **54 32") != NULL);
    CHECK(strstr(buf, "4111 1111 1111") == NULL);
}

TEST(api_errors_are_masked) {
    /* every API error is built by fr_api_error_set: 404 model names, 400 part types, 415 media */
    fr_api_error e;
    fr_api_error_set(&e, 404, "invalid_request_error", "model_not_found", "model",
                     "The model '%s' does not exist", "4111 1111 1111 1111");
    CHECK_STR(e.message, "The model '**** **** **** 1111' does not exist");
    fr_api_error_set(&e, 415, "invalid_request_error", "unsupported_media_type", "image",
                     "declared image/%s but the data is PNG", "gb82west12345698765432");
    CHECK_STR(e.message, "declared image/gb****************5432 but the data is PNG");
    char *js = fr_api_error_json(&e);
    CHECK(js && strstr(js, "west1234") == NULL && strstr(js, "gb****************5432") != NULL);
    free(js);
}

/* The assist handler with media stages that hand back text carrying card numbers: the question,
 * OCR text and lines, transcript and slots of the response must all come out masked. */
static void *m_img(void *ctx, const uint8_t *d, size_t n, const char *mime, fr_assist_media_err *e) {
    (void)ctx, (void)d, (void)n, (void)mime, (void)e;
    return malloc(1);
}
static double m_density(void *ctx, void *img) { (void)ctx, (void)img; return 0.9; }
static int m_ocr(void *ctx, void *img, const fr_assist_bound *b, fr_assist_ocr *o,
                 fr_assist_media_err *e) {
    (void)ctx, (void)img, (void)b, (void)e;
    o->text = strdup("Card: 5500-0000-0000-0004\nIBAN GB82 WEST 1234 5698 7654 32");
    o->n_lines = 2;
    o->lines = calloc(2, sizeof *o->lines);
    o->lines[0].text = strdup("Card: 5500-0000-0000-0004");
    o->lines[1].text = strdup("IBAN GB82 WEST 1234 5698 7654 32");
    return 0;
}
static void m_free(void *ctx, void *p) { (void)ctx, free(p); }
static void *m_aud(void *ctx, const uint8_t *d, size_t n, const char *mime, fr_assist_media_err *e) {
    (void)ctx, (void)d, (void)n, (void)mime, (void)e;
    return malloc(1);
}
static char *m_asr(void *ctx, void *a, const fr_assist_bound *b, fr_assist_media_err *e) {
    (void)ctx, (void)a, (void)b, (void)e;
    return strdup("my card number is 4111 1111 1111 1111");
}

TEST(assist_response_is_masked) {
    fr_assist_config c;
    fr_assist_config_init(&c);
    fr_err err = {0};
    fr_assist *a = fr_assist_new(&c, &err);
    fr_assist_config_free(&c);
    CHECK(a != NULL);
    if (!a) return;
    fr_assist_media m = {.image_decode = m_img, .image_density = m_density, .ocr = m_ocr,
                         .image_free = m_free, .audio_decode = m_aud, .asr = m_asr, .audio_free = m_free};
    fr_assist_set_media(a, &m);
    /* a PNG signature (the handler sniffs the bytes) and a WAV header, base64 */
    const char *body =
        "{\"text\":\"is 4111\u00a01111\u00a01111\u00a01111 or gb82west12345698765432 charged?\","
        "\"image\":\"iVBORw0KGgoAAAAAAAAAAAAAAAAA\",\"audio\":\"UklGRiQAAABXQVZFZm10IBAAAAABAAEA\"}";
    char *js = NULL;
    int st = fr_assist_handle(a, body, strlen(body), NULL, &js);
    CHECK_EQ_INT(st, 200);
    CHECK(js != NULL);
    if (js) {
        const char *clear[] = {"4111 1111", "4111\u00a01111", "4111\xc2\xa0" "1111", "5500-0000", "WEST 1234",
                               "west1234", "GB82", "gb82"};
        for (size_t i = 0; i < FR_ARRAY_LEN(clear); i++)
            if (strstr(js, clear[i])) fprintf(stderr, "  '%s' in clear in %s\n", clear[i], js);
        for (size_t i = 0; i < FR_ARRAY_LEN(clear); i++) CHECK(strstr(js, clear[i]) == NULL);
        cJSON *o = cJSON_Parse(js);
        cJSON *ocr = cJSON_GetObjectItem(o, "ocr");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(ocr, "text")),
                  "Card: ****-****-****-0004\nIBAN GB** **** **** **** **54 32");
        cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(ocr, "lines"), 0);
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "text")), "Card: ****-****-****-0004");
        CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(o, "transcript")),
                  "my card number is **** **** **** 1111");
        const char *q = cJSON_GetStringValue(cJSON_GetObjectItem(o, "question"));
        CHECK(q && strstr(q, "gb****************5432") != NULL && strstr(q, "\xc2\xa0" "1111 or") != NULL);
        cJSON_Delete(o);
    }
    free(js);
    fr_assist_free(a);
}

int main(void) { return t_main(); }
