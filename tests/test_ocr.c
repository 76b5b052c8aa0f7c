/* test_ocr.c — OCR of generated documents (English invoice fields, a Chinese line), the field
 * extractor on fixed text, the engine pool, and the image stage's route decision. Kept fast: a few
 * small pages, one engine per language. */
#include <cjson/cJSON.h>
#include <stdlib.h>

#include "stages/ocr/docgen.h"
#include "stages/ocr/fields.h"
#include "stages/ocr/image_stage.h"
#include "stages/ocr/ocr.h"
#include "t.h"

/* fontconfig (behind cairo's toy text API in the document generator) keeps its pattern cache
 * until exit; not ours to free. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig\n"; }

TEST(fields_from_text) {
    fr_fields f;
    fr_fields_extract("INVOICE\nAcme Trading Ltd\nPayee: Acme Trading Ltd\nInvoice No: INV-2024-00123\n"
                      "Date: Mar 5, 2024\nOffice chairs 1,100.00\nSubtotal: 1,100.00\n"
                      "Tax (10%): 110.00\nTotal: $1,210.00\n",
                      &f);
    CHECK_STR(f.invoice_no, "INV-2024-00123");
    CHECK_STR(f.amount, "1210.00");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.payee, "Acme Trading Ltd");
    fr_fields_extract("上海联华超市\n收据\n单号 ： R12345678\n日期 ： 2024 年 03 月 15 日\n"
                      "小 计 ： ¥ 100.00\n价税合计: Y4;,755.37\n", &f);
    CHECK_STR(f.invoice_no, "R12345678");
    CHECK_STR(f.amount, "4755.37");
    CHECK_STR(f.date, "2024-03-15");
    CHECK_STR(f.payee, "上海联华超市");
    char a[32];
    CHECK(fr_fields_norm_amount("¥ 1 ，234.5", a, sizeof a) && !strcmp(a, "1234.50"));
    CHECK(fr_fields_norm_amount("USD 12", a, sizeof a) && !strcmp(a, "12.00"));
    char d[16];
    CHECK(fr_fields_norm_date("15 March 2024", d, sizeof d) && !strcmp(d, "2024-03-15"));
    CHECK(fr_fields_norm_date("15/03/2024", d, sizeof d) && !strcmp(d, "2024-03-15"));
    CHECK(!fr_fields_norm_date("no date here 99/99/9999", d, sizeof d));
}

TEST(english_invoice_fields) {
    setenv("OMP_THREAD_LIMIT", "1", 0);
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 42);
    fr_image img;
    fr_doc_truth t;
    fr_err err = {0};
    CHECK(fr_doc_render(&o, &img, &t, &err) == 0);
    fr_ocr_cfg cfg = {.lang = "eng"};
    fr_ocr_engine *e = fr_ocr_engine_new(&cfg, &err);
    CHECK(e != NULL);
    if (!e) {
        fprintf(stderr, "  %s\n", err.msg);
        fr_image_free(&img);
        return;
    }
    fr_ocr_result r;
    CHECK(fr_ocr_run(e, &img, &r, &err) == 0);
    CHECK(r.n_lines >= 8);
    CHECK(r.mean_conf > 60);
    CHECK(strstr(r.text, t.invoice_no) != NULL);
    fr_fields f;
    fr_fields_extract(r.text, &f);
    CHECK_STR(f.invoice_no, t.invoice_no);
    CHECK_STR(f.amount, t.amount);
    CHECK_STR(f.date, t.date);
    printf("  eng invoice: %zu lines, mean conf %.0f, %.0f ms\n", r.n_lines, r.mean_conf, r.ms);
    cJSON *jo = fr_ocr_result_json(&r);
    char *js = cJSON_PrintUnformatted(jo);
    CHECK(strstr(js, "\"lines\":[{\"text\":") != NULL);
    cJSON *back = cJSON_Parse(js); /* valid JSON that gives the text back */
    CHECK(back && cJSON_IsString(cJSON_GetObjectItem(back, "text")) &&
          !strcmp(cJSON_GetObjectItem(back, "text")->valuestring, r.text));
    cJSON_Delete(back);
    free(js);
    cJSON_Delete(jo);
    fr_ocr_result_free(&r);
    /* the same page turned upside down is recovered by the orientation check */
    fr_image rot;
    fr_image_rotate(&img, 180, &rot);
    CHECK(fr_ocr_run(e, &rot, &r, &err) == 0);
    CHECK(r.rotation == 180);
    CHECK(strstr(r.text, t.invoice_no) != NULL);
    printf("  upside-down page: rotation %d, %d passes, %.0f ms\n", r.rotation, r.passes, r.ms);
    fr_ocr_result_free(&r);
    fr_image_free(&rot);
    fr_ocr_engine_free(e);
    fr_image_free(&img);
}

TEST(chinese_line) {
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 7);
    o.chinese = true;
    o.receipt = true;
    fr_image img;
    fr_doc_truth t;
    fr_err err = {0};
    CHECK(fr_doc_render(&o, &img, &t, &err) == 0);
    fr_ocr_cfg cfg = {.lang = "chi_sim"};
    fr_ocr_engine *e = fr_ocr_engine_new(&cfg, &err);
    CHECK(e != NULL);
    if (!e) {
        fprintf(stderr, "  %s\n", err.msg);
        fr_image_free(&img);
        return;
    }
    fr_ocr_result r;
    CHECK(fr_ocr_run(e, &img, &r, &err) == 0);
    fr_fields f;
    fr_fields_extract(r.text, &f);
    char a[128], b[128];
    fr_fields_norm_payee(f.payee, a, sizeof a);
    fr_fields_norm_payee(t.payee, b, sizeof b);
    CHECK_STR(a, b); /* e.g. 上海创达科技有限公司 */
    CHECK(strstr(r.text, "收据") != NULL);
    printf("  chi_sim receipt: payee %s, %.0f ms\n", f.payee, r.ms);
    fr_ocr_result_free(&r);
    fr_ocr_engine_free(e);
    fr_image_free(&img);
}

TEST(stage_routes_and_pool) {
    fr_err err = {0};
    fr_ocr_cfg cfg = {.lang = "eng"};
    fr_ocr_pool *pool = fr_ocr_pool_new(&cfg, 2, &err);
    CHECK(pool != NULL);
    if (!pool) return;
    /* a photo-like PNG: vision route, OCR skipped */
    fr_image ph;
    fr_doc_photo(3, 400, 300, 1, &ph);
    fr_buf b = {0};
    CHECK(fr_img_encode(&ph, FR_IMG_PNG, 0, &b, &err) == 0);
    fr_image_stage_result res;
    CHECK(fr_image_stage_run(pool, (const uint8_t *)b.data, b.len, "image/png", NULL, &res, &err) == 0);
    CHECK(!res.ocr_on);
    CHECK(res.ocr.text == NULL);
    CHECK(strstr(res.reason, "<") != NULL);
    fr_image_stage_result_free(&res);
    fr_buf_free(&b);
    fr_image_free(&ph);
    /* a document JPEG: OCR route */
    fr_doc_opts o;
    fr_doc_opts_clean(&o, 3);
    o.receipt = true;
    fr_image img;
    fr_doc_truth t;
    CHECK(fr_doc_render(&o, &img, &t, &err) == 0);
    CHECK(fr_img_encode(&img, FR_IMG_JPEG, 85, &b, &err) == 0);
    CHECK(fr_image_stage_run(pool, (const uint8_t *)b.data, b.len, "image/jpeg", NULL, &res, &err) == 0);
    CHECK(res.ocr_on);
    CHECK(res.ocr.text && strstr(res.ocr.text, t.invoice_no) != NULL);
    cJSON *jo = fr_image_stage_json(&res);
    char *js = cJSON_PrintUnformatted(jo);
    CHECK(strstr(js, "\"ocr_on\":true") != NULL);
    free(js);
    cJSON_Delete(jo);
    fr_image_stage_result_free(&res);
    /* a threshold above 1 forces the vision route; a bad media type is a clear error */
    fr_image_stage_cfg sc = {.threshold = 1.01f};
    CHECK(fr_image_stage_run(pool, (const uint8_t *)b.data, b.len, NULL, &sc, &res, &err) == 0);
    CHECK(!res.ocr_on);
    fr_image_stage_result_free(&res);
    CHECK(fr_image_stage_run(pool, (const uint8_t *)b.data, b.len, "image/png", NULL, &res, &err) == -1);
    CHECK(strstr(err.msg, "declared PNG but the data is JPEG") != NULL);
    fr_buf_free(&b);
    fr_image_free(&img);
    fr_ocr_pool_free(pool);
}

TEST(missing_language) {
    fr_err err = {0};
    fr_ocr_cfg cfg = {.lang = "xx_nolang"};
    fr_ocr_engine *e = fr_ocr_engine_new(&cfg, &err);
    CHECK(e == NULL);
    CHECK(strstr(err.msg, "xx_nolang") != NULL);
}

TEST(result_json_escapes_every_string) {
    char t0[] = "Payee: \"ACME\\Ltd\"\tline\x01", t1[] = "second \xe4\xb8\xad line";
    char all[64];
    snprintf(all, sizeof all, "%s\n%s", t0, t1);
    fr_ocr_line lines[2] = {{t0, 91.25f, 1, 2, 3, 4}, {t1, 50.0f, 5, 6, 7, 8}};
    fr_ocr_result r = {.text = all, .lines = lines, .n_lines = 2, .mean_conf = 70.66f,
                       .rotation = 90, .passes = 2, .ms = 12.3456};
    cJSON *o = fr_ocr_result_json(&r);
    char *js = cJSON_PrintUnformatted(o);
    cJSON *back = cJSON_Parse(js);
    CHECK(back != NULL);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(back, "text")), all);
    cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(back, "lines"), 0);
    CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "text")), t0);
    CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(l0, "conf")), 91.3, 1e-9); /* to 0.1 */
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(l0, "box")), 4);
    CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetArrayItem(cJSON_GetObjectItem(l0, "box"), 3)), 4);
    CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(back, "mean_conf")), 70.7, 1e-9);
    CHECK_NEAR(cJSON_GetNumberValue(cJSON_GetObjectItem(back, "ms")), 12.35, 1e-9);
    CHECK_EQ_INT(cJSON_GetNumberValue(cJSON_GetObjectItem(back, "rotation")), 90);
    CHECK(strstr(js, "\"conf\":91.3,") != NULL); /* no float noise such as 91.25000000001 */
    cJSON_Delete(back);
    free(js);
    cJSON_Delete(o);
}

int main(void) { return t_main(); }
