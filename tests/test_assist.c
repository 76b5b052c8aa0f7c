/* test_assist.c — the assist handler (serve/assist.h) both doors call: exact stages per route
 * (fake media stages), the bad-input list → 4xx with clear messages, BANKING77-like queries →
 * expected intents, masking, every accepted request answered. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include <dirent.h>
#include <unistd.h>

#include "serve/assist.h"
#include "stages/image/image.h"
#include "stages/nlu/intent_train.h"
#include "stages/ocr/docgen.h"
#include "t.h"

/* fontconfig (under cairo, used by docgen) keeps its caches for the life of the process */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig\n"; }

/* fake media stages: "density" comes from the image's 9th byte (0..255 → 0..1) */
static void *f_img(void *ctx, const uint8_t *d, size_t n, const char *mime, fr_assist_media_err *e) {
    (void)ctx; (void)mime;
    if (n < 16) {
        e->code = "invalid_image";
        fr_err_setc(&e->err, FR_ERR_BAD_REQUEST, "image: truncated PNG");
        return NULL;
    }
    uint8_t *p = malloc(1);
    *p = d[8];
    return p;
}
static double f_density(void *ctx, void *img) { (void)ctx; return *(uint8_t *)img / 255.0; }
static int f_ocr(void *ctx, void *img, const fr_assist_bound *b, fr_assist_ocr *o,
                 fr_assist_media_err *e) {
    (void)ctx; (void)img; (void)b; (void)e;
    o->text = strdup("Invoice No: INV-77\nTotal: 12.00 EUR");
    o->n_lines = 1;
    o->lines = calloc(1, sizeof *o->lines);
    o->lines[0].text = strdup("Invoice No: INV-77");
    o->lines[0].confidence = 0.9f;
    return 0;
}
static void f_free(void *ctx, void *p) { (void)ctx; free(p); }
static void *f_aud(void *ctx, const uint8_t *d, size_t n, const char *mime, fr_assist_media_err *e) {
    (void)ctx; (void)d; (void)mime;
    if (n > 1000) {
        e->code = "media_too_large";
        fr_err_setc(&e->err, FR_ERR_TOO_LARGE, "audio: 7200 s exceeds the 600 s limit");
        return NULL;
    }
    return malloc(1);
}
static char *f_asr(void *ctx, void *a, const fr_assist_bound *b, fr_assist_media_err *e) {
    (void)ctx; (void)a; (void)b; (void)e;
    return strdup("my card has not arrived yet");
}

static fr_assist *mk(void) {
    fr_assist_config c;
    fr_assist_config_init(&c);
    fr_err err = {0};
    fr_assist *a = fr_assist_new(&c, &err);
    fr_assist_config_free(&c);
    if (!a) fprintf(stderr, "  %s\n", err.msg);
    fr_assist_media m = {0};
    m.image_decode = f_img;
    m.image_density = f_density;
    m.ocr = f_ocr;
    m.image_free = f_free;
    m.audio_decode = f_aud;
    m.asr = f_asr;
    m.audio_free = f_free;
    if (a) fr_assist_set_media(a, &m);
    return a;
}

/* base64 of a fake PNG whose 9th byte is `dens` (16 bytes, or n bytes of zeros after). */
static char *png_b64(int dens) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint8_t b[18] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', (uint8_t)dens, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    char *o = malloc(32);
    size_t j = 0;
    for (size_t i = 0; i < 18; i += 3) {
        uint32_t v = (uint32_t)b[i] << 16 | (uint32_t)b[i + 1] << 8 | b[i + 2];
        o[j++] = tbl[v >> 18 & 63]; o[j++] = tbl[v >> 12 & 63];
        o[j++] = tbl[v >> 6 & 63]; o[j++] = tbl[v & 63];
    }
    o[j] = 0;
    return o;
}

static cJSON *call(fr_assist *a, const char *body, int *status) {
    char *js = NULL;
    *status = fr_assist_handle(a, body, strlen(body), NULL, &js);
    cJSON *o = cJSON_Parse(js);
    free(js);
    return o;
}

static void stages(cJSON *o, char *out, size_t cap) {
    out[0] = 0;
    const cJSON *s;
    cJSON *run = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "route"), "stages_run");
    cJSON_ArrayForEach(s, run) {
        if (out[0]) strncat(out, ",", cap - strlen(out) - 1);
        strncat(out, s->valuestring, cap - strlen(out) - 1);
    }
}

static const char *skip_reason(cJSON *o, const char *stage) {
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(cJSON_GetObjectItem(o, "route"), "stages_skipped"))
        if (!strcmp(cJSON_GetObjectItem(s, "stage")->valuestring, stage))
            return cJSON_GetObjectItem(s, "reason")->valuestring;
    return NULL;
}

TEST(each_route_runs_exactly_its_stages) {
    fr_assist *a = mk();
    CHECK(a != NULL);
    if (!a) return;
    char body[512], b[256];
    int st;
    cJSON *o = call(a, "{\"text\":\"I am still waiting on my card\"}", &st);
    CHECK_EQ_INT(st, 200);
    stages(o, b, sizeof b);
    CHECK_STR(b, "nlu,template");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "name")->valuestring, "card_arrival");
    cJSON_Delete(o);
    o = call(a, "{\"audio\":\"UklGRgAAAABXQVZFZm10IA==\"}", &st);
    CHECK_EQ_INT(st, 200);
    stages(o, b, sizeof b);
    CHECK_STR(b, "decode_audio,asr,nlu,template");
    CHECK_STR(cJSON_GetObjectItem(o, "transcript")->valuestring, "my card has not arrived yet");
    CHECK_STR(skip_reason(o, "ocr"), "no image");
    cJSON_Delete(o);
    char *img = png_b64(230);
    snprintf(body, sizeof body, "{\"image\":\"data:image/png;base64,%s\"}", img);
    o = call(a, body, &st);
    CHECK_EQ_INT(st, 200);
    stages(o, b, sizeof b);
    CHECK_STR(b, "decode_image,density,ocr,nlu,template");
    CHECK(strstr(skip_reason(o, "vision"), "mostly text") != NULL);
    CHECK_STR(skip_reason(o, "asr"), "no audio");
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "route"), "density") != NULL);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "route"), "threshold") != NULL);
    cJSON_Delete(o);
    free(img);
    img = png_b64(10);
    snprintf(body, sizeof body, "{\"text\":\"what is this?\",\"image\":\"%s\"}", img);
    o = call(a, body, &st);
    CHECK_EQ_INT(st, 200);
    stages(o, b, sizeof b);
    CHECK_STR(b, "decode_image,density,nlu,template");
    CHECK(strstr(skip_reason(o, "vision"), "unavailable") != NULL);
    CHECK(strstr(skip_reason(o, "ocr"), "picture") != NULL);
    cJSON_Delete(o);
    free(img);
    fr_assist_free(a);
}

TEST(media_stage_missing_is_reported_unavailable) {
    fr_assist *a = mk();
    if (!a) return;
    fr_assist_media m = {0};
    m.why_audio = "unavailable: audio decoding stage not built into this server";
    fr_assist_set_media(a, &m);
    int st;
    char b[256];
    cJSON *o = call(a, "{\"text\":\"hi\",\"audio\":\"UklGRgAAAABXQVZFZm10IA==\"}", &st);
    CHECK_EQ_INT(st, 200);
    stages(o, b, sizeof b);
    CHECK_STR(b, "nlu,template");
    CHECK_STR(skip_reason(o, "decode_audio"), "unavailable: audio decoding stage not built into this server");
    cJSON_Delete(o);
    fr_assist_free(a);
}

TEST(bad_inputs_get_clear_4xx) {
    fr_assist *a = mk();
    if (!a) return;
    static const struct { const char *body; int status; const char *needle; } cases[] = {
        {"{\"image\":\"!!!notbase64\"}", 400, "not valid base64"},
        {"{\"image\":\"\"}", 400, "empty"},
        {"{\"audio\":\"\"}", 400, "empty"},
        {"{\"image\":\"data:image/gif;base64,R0lGODlh\"}", 415, "not accepted"},
        {"{\"image\":\"data:image/jpeg;base64,iVBORw0KGgoAAAAAAAAAAA==\"}", 415, "declared image/jpeg but the data is PNG"},
        {"{\"image\":\"UklGRgAAAABXQVZFZm10IA==\"}", 415, "holds WAV data"},
        {"{\"audio\":\"iVBORw0KGgoAAAAAAAAAAA==\"}", 415, "holds PNG data"},
        {"{\"image\":\"iVBORw0KGgoAAAA=\"}", 400, "truncated"},
        {"{\"text\":5}", 400, "text must be a string"},
        {"{\"ticket\":[1,2]}", 400, "ticket must be a JSON object"},
        {"{\"history\":{}}", 400, "history must be an array"},
        {"{\"history\":[5]}", 400, "history[0]"},
        {"{\"priority\":\"P9\",\"text\":\"x\"}", 400, "priority"},
        {"{\"top_k\":0,\"text\":\"x\"}", 400, "top_k"},
        {"[1,2]", 400, "JSON object"},
        {"{\"text\":\"x\"", 400, "not valid JSON"},
        {"{}", 400, "nothing to work on"},
        {"\xff\xfe", 400, "UTF-8"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        int st;
        cJSON *o = call(a, cases[i].body, &st);
        const cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
        if (st != cases[i].status || !cJSON_IsString(msg) || !strstr(msg->valuestring, cases[i].needle))
            fprintf(stderr, "  case %zu: %d %s\n", i, st, cJSON_IsString(msg) ? msg->valuestring : "?");
        CHECK_EQ_INT(st, cases[i].status);
        CHECK(cJSON_IsString(msg) && strstr(msg->valuestring, cases[i].needle));
        cJSON_Delete(o);
    }
    /* a ticket nested 10,000 deep: refused by the depth scan, before cJSON */
    size_t n = 10000;
    char *deep = malloc(2 * n + 64);
    strcpy(deep, "{\"ticket\":");
    size_t j = strlen(deep);
    memset(deep + j, '[', n); /* the scan refuses it before any closing bracket matters */
    deep[j + n] = 0;
    int st;
    cJSON *o = call(a, deep, &st);
    CHECK_EQ_INT(st, 400);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "code")->valuestring, "nesting_too_deep");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "param")->valuestring, "ticket");
    cJSON_Delete(o);
    free(deep);
    /* over the size limit: refused from the encoded length, never decoded */
    size_t big = 30u * 1000u * 1000u;
    char *b = malloc(big + 32);
    memcpy(b, "{\"image\":\"", 10);
    memset(b + 10, 'A', big);
    memcpy(b + 10 + big, "\"}", 3);
    o = call(a, b, &st);
    CHECK_EQ_INT(st, 413);
    cJSON_Delete(o);
    free(b);
    /* media stage errors keep their status; two-hour recording */
    char *lng = malloc(4000);
    strcpy(lng, "{\"audio\":\"UklGRgAAAABXQVZF");
    for (int i = 0; i < 400; i++) strcat(lng, "AAAA");
    strcat(lng, "\"}");
    o = call(a, lng, &st);
    CHECK_EQ_INT(st, 413);
    cJSON_Delete(o);
    free(lng);
    /* and it keeps serving */
    o = call(a, "{\"text\":\"how do I change my PIN?\"}", &st);
    CHECK_EQ_INT(st, 200);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "name")->valuestring, "change_pin");
    cJSON_Delete(o);
    fr_assist_free(a);
}

TEST(banking77_queries_get_expected_intents_and_masked_slots) {
    fr_assist *a = mk();
    if (!a) return;
    static const char *const q[][2] = {
        {"I lost my card, someone stole my wallet", "lost_or_stolen_card"},
        {"How do I top up with a bank transfer?", "top_up_by_bank_transfer_charge"},
        {"I want to close my account", "terminate_account"},
        {"Why is my card payment still pending?", "pending_card_payment"},
        {"The ATM swallowed my card", "card_swallowed"},
        {"I forgot my passcode", "passcode_forgotten"},
        {"Can I use Apple Pay?", "apple_pay_or_google_pay"},
        {"What is the exchange rate?", "exchange_rate"},
    };
    int hit = 0;
    for (size_t i = 0; i < FR_ARRAY_LEN(q); i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"text\":\"%s\",\"top_k\":3}", q[i][0]);
        int st;
        cJSON *o = call(a, body, &st);
        CHECK_EQ_INT(st, 200);
        const char *got = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "name")->valuestring;
        if (!strcmp(got, q[i][1])) hit++;
        else fprintf(stderr, "  '%s' → %s (expected %s)\n", q[i][0], got, q[i][1]);
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(o, "alternatives")), 2);
        cJSON_Delete(o);
    }
    CHECK(hit >= 7);
    int st;
    cJSON *o = call(a, "{\"text\":\"card 4111 1111 1111 1111 was charged 25 EUR twice\"}", &st);
    char *js = cJSON_PrintUnformatted(o);
    CHECK(strstr(js, "4111 1111") == NULL);
    CHECK(strstr(js, "**** 1111") != NULL);
    CHECK(strstr(js, "\"name\":\"card_number\"") != NULL);
    CHECK(strstr(js, "25.00 EUR") != NULL);
    free(js);
    cJSON_Delete(o);
    fr_assist_free(a);
}

static char *b64(const uint8_t *d, size_t n) {
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(n / 3 * 4 + 8);
    size_t j = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        o[j++] = tbl[v >> 18 & 63]; o[j++] = tbl[v >> 12 & 63];
        o[j++] = tbl[v >> 6 & 63]; o[j++] = tbl[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        o[j++] = tbl[v >> 18 & 63]; o[j++] = tbl[v >> 12 & 63];
        o[j++] = i + 1 < n ? tbl[v >> 6 & 63] : '=';
        o[j++] = '=';
    }
    o[j] = 0;
    return o;
}

/* the slot of that name from that source, or NULL */
static const cJSON *slot_of(const cJSON *o, const char *name, const char *source) {
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(o, "slots")) {
        const cJSON *n = cJSON_GetObjectItem(s, "name"), *src = cJSON_GetObjectItem(s, "source");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name) && cJSON_IsString(src) &&
            !strcmp(src->valuestring, source))
            return s;
    }
    return NULL;
}

/* A generated invoice (docgen, real OCR through the default media stages) with a question that
 * refers to it: the document's fields are slots from the image, the reply uses the amount. */
TEST(fusion_invoice_image_and_question) {
    fr_assist_config c;
    fr_assist_config_init(&c);
    fr_err err = {0};
    fr_assist *a = fr_assist_new(&c, &err);
    fr_assist_config_free(&c);
    CHECK(a != NULL);
    if (!a) return;
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 4242);
    fr_image img = {0};
    fr_doc_truth truth;
    CHECK(fr_doc_render(&o, &img, &truth, &err) == 0);
    fr_buf png = {0};
    CHECK(fr_img_encode(&img, FR_IMG_PNG, 0, &png, &err) == 0);
    char *b = b64((const uint8_t *)png.data, png.len);
    size_t bl = strlen(b) + 256;
    char *body = malloc(bl);
    snprintf(body, bl, "{\"text\":\"Can you check the amount on this invoice?\","
             "\"image\":\"data:image/png;base64,%s\"}", b);
    int st;
    cJSON *r = call(a, body, &st);
    CHECK_EQ_INT(st, 200);
    char stg[256];
    stages(r, stg, sizeof stg);
    CHECK(strstr(stg, "ocr,nlu") != NULL);
    const cJSON *amt = slot_of(r, "amount", "image"), *cur = slot_of(r, "currency", "image");
    CHECK(amt != NULL);
    CHECK(cur != NULL);
    char want[64];
    snprintf(want, sizeof want, "%s %s", truth.amount, truth.currency);
    if (amt) CHECK_STR(cJSON_GetObjectItem(amt, "value")->valuestring, want);
    if (cur) CHECK_STR(cJSON_GetObjectItem(cur, "value")->valuestring, truth.currency);
    CHECK(slot_of(r, "invoice_number", "image") != NULL);
    CHECK(slot_of(r, "date", "image") != NULL);
    const cJSON *resp = cJSON_GetObjectItem(r, "response");
    CHECK(cJSON_IsString(resp) && strstr(resp->valuestring, truth.amount) != NULL);
    const cJSON *in = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "intent"), "input");
    CHECK(cJSON_IsString(in) && !strcmp(in->valuestring, "text+image"));
    if (!cJSON_IsString(resp) || !strstr(resp->valuestring, truth.amount)) {
        char *js = cJSON_PrintUnformatted(r);
        fprintf(stderr, "  truth %s %s; response %.3000s\n", truth.amount, truth.currency, js);
        free(js);
    }
    cJSON_Delete(r);
    /* the same image with a question of its own that does not mention it: fields are still
     * slots from the image, but the intent is the question's */
    snprintf(body, bl, "{\"text\":\"How do I change my PIN?\",\"image\":\"%s\"}", b);
    r = call(a, body, &st);
    CHECK_EQ_INT(st, 200);
    CHECK(slot_of(r, "amount", "image") != NULL);
    in = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "intent"), "input");
    CHECK(cJSON_IsString(in) && !strcmp(in->valuestring, "text"));
    const cJSON *iname = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "intent"), "name");
    CHECK(cJSON_IsString(iname));
    if (cJSON_IsString(iname)) CHECK_STR(iname->valuestring, "change_pin");
    cJSON_Delete(r);
    free(body);
    free(b);
    fr_buf_free(&png);
    fr_image_free(&img);
    fr_assist_free(a);
}

/* slot sources: typed text "text", transcript "audio" */
TEST(slot_sources_text_and_audio) {
    fr_assist *a = mk();
    if (!a) return;
    int st;
    cJSON *o = call(a, "{\"text\":\"I paid 20 EUR\",\"audio\":\"UklGRgAAAABXQVZFZm10IA==\"}", &st);
    CHECK_EQ_INT(st, 200);
    const cJSON *s = slot_of(o, "amount", "text");
    CHECK(s != NULL);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "input")->valuestring, "text+audio");
    cJSON_Delete(o);
    fr_assist_free(a);
}

/* One text through the handler; 1 when the answer is out_of_scope + handoff, 0 when it is an
 * in-scope intent + template, -1 otherwise (any other shape is a failure). */
static int text_verdict(fr_assist *a, const char *text) {
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "text", text);
    char *body = cJSON_PrintUnformatted(b);
    cJSON_Delete(b);
    int st;
    cJSON *o = call(a, body, &st);
    free(body);
    const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "name");
    const cJSON *src = cJSON_GetObjectItem(o, "response_source");
    int r = -1;
    if (st == 200 && cJSON_IsString(n) && cJSON_IsString(src)) {
        bool oos = !strcmp(n->valuestring, "out_of_scope");
        if (oos && !strcmp(src->valuestring, "handoff")) r = 1;
        if (!oos && !strcmp(src->valuestring, "template")) r = 0;
    }
    cJSON_Delete(o);
    return r;
}

static fr_assist *mk_real(void) {
    fr_assist_config c;
    fr_assist_config_init(&c);
    fr_err err = {0};
    fr_assist *a = fr_assist_new(&c, &err);
    fr_assist_config_free(&c);
    if (!a) fprintf(stderr, "  %s\n", err.msg);
    return a;
}

/* Out of scope, no LLM configured: "hello", keyboard mash, text-free photos (real decoding,
 * density and, where the density says text, OCR) and the held-out negatives (data/oos/eval,
 * categories never used for training or tuning) get intent out_of_scope and a hand-off. */
TEST(out_of_scope_gets_a_handoff) {
    fr_assist *a = mk_real();
    CHECK(a != NULL);
    if (!a) return;
    CHECK_EQ_INT(text_verdict(a, "hello"), 1);
    CHECK_EQ_INT(text_verdict(a, "asdf qwerty zxcv"), 1);
    int st;
    cJSON *o = call(a, "{\"text\":\"hello\"}", &st);
    CHECK_STR(skip_reason(o, "llm"), "no LLM configured: hand-off reply");
    CHECK(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "reason")));
    cJSON_Delete(o);
    /* photos without text: never a card-payment (or any intent's) reply */
    for (int kind = 0; kind < FR_DOC_PHOTO_KINDS; kind++) {
        for (int with_text = 0; with_text < 2; with_text++) {
            fr_image img = {0};
            fr_doc_photo(kind, 400, 300, 77 + (uint64_t)kind, &img);
            fr_buf png = {0};
            fr_err err = {0};
            CHECK(fr_img_encode(&img, FR_IMG_PNG, 0, &png, &err) == 0);
            char *b = b64((const uint8_t *)png.data, png.len);
            size_t bl = strlen(b) + 128;
            char *body = malloc(bl);
            snprintf(body, bl, "{%s\"image\":\"%s\"}", with_text ? "\"text\":\"what is this?\"," : "", b);
            o = call(a, body, &st);
            CHECK_EQ_INT(st, 200);
            const cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "intent"), "name");
            const cJSON *src = cJSON_GetObjectItem(o, "response_source");
            bool ok = cJSON_IsString(n) && !strcmp(n->valuestring, "out_of_scope") &&
                      cJSON_IsString(src) && !strcmp(src->valuestring, "handoff");
            if (!ok) {
                char *js = cJSON_PrintUnformatted(o);
                fprintf(stderr, "  photo kind %d (text %d): %.600s\n", kind, with_text, js);
                free(js);
            }
            CHECK(ok);
            cJSON_Delete(o);
            free(body);
            free(b);
            fr_buf_free(&png);
            fr_image_free(&img);
        }
    }
    /* the held-out negatives: at least 90 % out of scope (the target), every one a hand-off */
    DIR *dp = opendir("data/oos/eval");
    CHECK(dp != NULL);
    size_t n = 0, flagged = 0, other = 0;
    struct dirent *de;
    while (dp && (de = readdir(dp))) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".txt")) continue;
        char path[512];
        snprintf(path, sizeof path, "data/oos/eval/%s", de->d_name);
        fr_intent_data d = {0};
        fr_err err = {0};
        CHECK(fr_intent_data_add_lines(&d, path, "out_of_scope", &err) == 0);
        for (size_t i = 0; i < d.n; i++) {
            int v = text_verdict(a, d.texts[i]);
            flagged += v == 1;
            other += v < 0;
            n++;
        }
        fr_intent_data_free(&d);
    }
    if (dp) closedir(dp);
    fprintf(stderr, "  held-out negatives: %zu of %zu out of scope (%.1f %%)\n", flagged, n,
            n ? 100.0 * (double)flagged / (double)n : 0);
    CHECK(n >= 300);
    CHECK(flagged * 10 >= n * 9);
    CHECK_EQ_INT((int)other, 0);
    fr_assist_free(a);
}

/* In scope: the BANKING77 validation rows (seed 1, 10 %, never trained on) get a template; at
 * most 2 % are flagged out of scope (the target). */
TEST(in_scope_validation_rows_get_a_template) {
    fr_assist *a = mk_real();
    if (!a) return;
    fr_intent_data d;
    fr_err err = {0};
    CHECK(fr_intent_data_load_csv(&d, "data/banking77/train.csv", &err) == 0);
    if (!d.n) return;
    uint8_t *val = malloc(d.n);
    fr_intent_split(&d, 0.1, 1, val);
    size_t n = 0, flagged = 0, other = 0;
    for (size_t i = 0; i < d.n; i++) {
        if (!val[i]) continue;
        int v = text_verdict(a, d.texts[i]);
        flagged += v == 1;
        other += v < 0;
        n++;
    }
    fprintf(stderr, "  in-scope validation rows: %zu of %zu flagged (%.2f %%)\n", flagged, n,
            n ? 100.0 * (double)flagged / (double)n : 0);
    CHECK(n > 1000);
    CHECK(flagged * 50 <= n);
    CHECK_EQ_INT((int)other, 0);
    free(val);
    fr_intent_data_free(&d);
    fr_assist_free(a);
}

/* A missing templates file is an error when the handler is made (the stdin door exits 1), and
 * the server's handler answers 503 with the reason (logged at start) instead of generic
 * replies. */
TEST(missing_templates_file_is_an_error_at_start) {
    fr_assist_config c;
    fr_assist_config_init(&c);
    free(c.templates);
    c.templates = strdup("/nonexistent/reply-templates.json");
    fr_err err = {0};
    fr_assist *a = fr_assist_new(&c, &err);
    fr_assist_config_free(&c);
    CHECK(a == NULL);
    CHECK(strstr(err.msg, "templates") && strstr(err.msg, "/nonexistent/reply-templates.json"));
    fr_assist_free(a);
    char cfg[] = "/tmp/frugal-assist-cfg-XXXXXX", cfg2[] = "/tmp/frugal-assist-cfg-XXXXXX";
    int fd = mkstemp(cfg);
    CHECK(fd >= 0);
    const char *js = "{\"templates\":\"/nonexistent/reply-templates.json\"}";
    CHECK(write(fd, js, strlen(js)) == (ssize_t)strlen(js));
    close(fd);
    setenv("FRUGAL_ASSIST_CONFIG", cfg, 1);
    a = fr_assist_for_server(NULL, NULL, NULL);
    unsetenv("FRUGAL_ASSIST_CONFIG");
    unlink(cfg);
    int st;
    cJSON *o = call(a, "{\"text\":\"hello\"}", &st);
    CHECK_EQ_INT(st, 503);
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
    CHECK(cJSON_IsString(m) && strstr(m->valuestring, "reply templates file"));
    cJSON_Delete(o);
    fr_assist_free(a);
    /* a typo in the settings file: the message names the file, the line and the key */
    fd = mkstemp(cfg2);
    CHECK(fd >= 0);
    const char *typo = "{\"llm\": false,\n \"top_kk\": 3}";
    CHECK(write(fd, typo, strlen(typo)) == (ssize_t)strlen(typo));
    close(fd);
    setenv("FRUGAL_ASSIST_CONFIG", cfg2, 1);
    a = fr_assist_for_server(NULL, NULL, NULL);
    unsetenv("FRUGAL_ASSIST_CONFIG");
    unlink(cfg2);
    o = call(a, "{\"text\":\"hello\"}", &st);
    CHECK_EQ_INT(st, 503);
    m = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "error"), "message");
    char want[200];
    snprintf(want, sizeof want, "%s:2: top_kk: unknown key", cfg2);
    CHECK(cJSON_IsString(m) && strstr(m->valuestring, want));
    cJSON_Delete(o);
    fr_assist_free(a);
    fr_assist_config c2;
    fr_assist_config_init(&c2);
    fr_err e2 = {0};
    CHECK_EQ_INT(fr_assist_config_apply_json(&c2, "{\"top_k\": 2.5}", 14, &e2), -1);
    CHECK_STR(e2.msg, "assist config: line 1: top_k: must be an integer in 1..20");
    fr_assist_config_free(&c2);
}

TEST(helpers) {
    uint8_t out[16];
    size_t bad = 0;
    CHECK_EQ_INT(fr_assist_base64_decode("aGVsbG8=", 8, out, &bad), 5);
    CHECK(!memcmp(out, "hello", 5));
    CHECK_EQ_INT(fr_assist_base64_decode("aGVsbG8", 7, out, &bad), 5);
    CHECK_EQ_INT(fr_assist_base64_decode("aGV\nsbG8=", 9, out, &bad), 5);
    CHECK_EQ_INT(fr_assist_base64_decode("a", 1, out, &bad), -1);
    CHECK_EQ_INT(fr_assist_base64_decode("aG=V", 4, out, &bad), -1);
    char k[16];
    CHECK_EQ_INT(fr_assist_json_depth("{\"a\":\"[[[\",\"t\":[[1]]}", 21, 10, k, sizeof k), 3);
    CHECK_STR(k, "t");
}

int main(void) { return t_main(); }
