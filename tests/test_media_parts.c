/* test_media_parts.c — image_url / input_audio content parts of chat completions: a rendered
 * invoice goes through OCR and its text reaches the prompt; a picture is refused because the
 * vision stage is absent; bad media get the right 4xx. */
#include "t.h"

#include <cjson/cJSON.h>

#include "serve/media_parts.h"
#include "stages/image/image.h"
#include "stages/ocr/docgen.h"

/* fontconfig (used by the document generator through cairo) keeps its cache until exit */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig\n"; }

static char *b64(const uint8_t *d, size_t n) {
    static const char A[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = fr_xmalloc(n / 3 * 4 + 8), *p = o;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        *p++ = A[v >> 18], *p++ = A[(v >> 12) & 63], *p++ = A[(v >> 6) & 63], *p++ = A[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        *p++ = A[v >> 18], *p++ = A[(v >> 12) & 63];
        *p++ = i + 1 < n ? A[(v >> 6) & 63] : '=';
        *p++ = '=';
    }
    *p = 0;
    return o;
}

static cJSON *image_part(const char *mime, const fr_image *img, fr_img_format fmt) {
    fr_buf enc = {0};
    fr_err e;
    CHECK(fr_img_encode(img, fmt, 90, &enc, &e) == 0);
    char *s = b64((const uint8_t *)enc.data, enc.len);
    fr_buf url = {0};
    fr_buf_printf(&url, "data:%s;base64,%s", mime, s);
    cJSON *part = cJSON_CreateObject();
    cJSON_AddStringToObject(part, "type", "image_url");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(part, "image_url"), "url", url.data);
    free(s);
    fr_buf_free(&enc);
    fr_buf_free(&url);
    return part;
}

TEST(document_image_is_read_by_ocr) {
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 11);
    fr_image img;
    fr_doc_truth truth;
    fr_err e;
    CHECK(fr_doc_render(&o, &img, &truth, &e) == 0);
    cJSON *part = image_part("image/png", &img, FR_IMG_PNG);
    fr_buf out = {0};
    fr_api_error err;
    memset(&err, 0, sizeof err);
    int rc = fr_api_media_part_text(part, "image_url", "messages[0].content[1]", &out, &err);
    if (rc) fprintf(stderr, "  %d %s\n", err.status, err.message);
    CHECK_EQ_INT(rc, 0);
    CHECK(out.data && strstr(out.data, truth.invoice_no) != NULL);
    fr_buf_free(&out);
    cJSON_Delete(part);
    fr_image_free(&img);
}

TEST(picture_needs_vision_which_is_absent) {
    fr_image img;
    fr_doc_photo(0, 320, 240, 5, &img);
    cJSON *part = image_part("image/png", &img, FR_IMG_PNG);
    fr_buf out = {0};
    fr_api_error err;
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(fr_api_media_part_text(part, "image_url", "messages[0].content[0]", &out, &err), -1);
    CHECK_EQ_INT(err.status, 400);
    CHECK(strstr(err.message, "vision") != NULL);
    CHECK_STR(err.param, "messages[0].content[0]");
    fr_buf_free(&out);
    cJSON_Delete(part);
    fr_image_free(&img);
}

TEST(bad_media_get_clear_4xx) {
    fr_api_error err;
    fr_buf out = {0};
    const char *bodies[] = {
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,@@@@\"}}",
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,\"}}",
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAA\"}}",
        "{\"type\":\"image_url\",\"image_url\":{\"url\":\"https://example.com/a.png\"}}",
        "{\"type\":\"image_url\",\"image_url\":{\"url\":7}}",
        "{\"type\":\"input_audio\",\"input_audio\":{\"data\":\"UklGRgAAAABXQVZF\",\"format\":\"wav\"}}",
        "{\"type\":\"input_audio\",\"input_audio\":{\"data\":5}}",
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(bodies); i++) {
        cJSON *p = cJSON_Parse(bodies[i]);
        memset(&err, 0, sizeof err);
        const char *type = cJSON_GetObjectItem(p, "type")->valuestring;
        CHECK_EQ_INT(fr_api_media_part_text(p, type, "messages[0].content[0]", &out, &err), -1);
        CHECK(err.status >= 400 && err.status < 500);
        CHECK(err.message[0] != 0);
        cJSON_Delete(p);
    }
    /* declared JPEG, PNG bytes → 415 */
    fr_image img;
    fr_doc_photo(0, 64, 64, 1, &img);
    cJSON *part = image_part("image/jpeg", &img, FR_IMG_PNG);
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(fr_api_media_part_text(part, "image_url", "p", &out, &err), -1);
    CHECK_EQ_INT(err.status, 415);
    cJSON_Delete(part);
    fr_image_free(&img);
    fr_buf_free(&out);
}

int main(void) { return t_main(); }
