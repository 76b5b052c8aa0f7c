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

/* Chinese labels (金额, 小写 over 大写, 发票号码 not 发票代码, 销售方名称 not 购买方名称), OCR-misread
 * labels within one edit (收吉方, 票号码) but not unrelated words, fullwidth digits (NFKC) */
/* What the PP-OCR recogniser makes of labels (on the tuning pages, seed 7): digits for letters,
 * a receipt's title that is one edit from 收款方, a number prefixed by letters after "No.". */
TEST(fields_ppocr_readings) {
    fr_fields f;
    fr_fields_extract("Northwind Hardware Ltd\nReceipt\nInvoice #TT-468264\nTota1:$9,336.86", &f);
    CHECK_STR(f.amount, "9336.86");
    CHECK_STR(f.invoice_no, "TT-468264");
    fr_fields_extract("\xe8\xa5\xbf\xe5\xae\x89\xe6\x96\xb0\xe5\x85\x83\xe6\x9c\x89\xe9\x99\x90"
                      "\xe5\x85\xac\xe5\x8f\xb8\n" /* 西安新元有限公司 */
                      "\xe6\x94\xb6\xe6\xac\xbe\xe6\x94\xb6\xe6\x8d\xae\n" /* 收款收据 */
                      "\xe6\x94\xb6\xe6\xac\xbe\xe6\x96\xb9\xef\xbc\x9a" /* 收款方： */
                      "\xe8\xa5\xbf\xe5\xae\x89\xe6\x96\xb0\xe5\x85\x83\xe6\x9c\x89\xe9\x99\x90"
                      "\xe5\x85\xac\xe5\x8f\xb8\nNo.NO-2024-1932", &f);
    CHECK_STR(f.payee, "\xe8\xa5\xbf\xe5\xae\x89\xe6\x96\xb0\xe5\x85\x83\xe6\x9c\x89\xe9\x99\x90"
                       "\xe5\x85\xac\xe5\x8f\xb8");
    CHECK_STR(f.invoice_no, "NO-2024-1932");
    fr_fields_extract("No. of items 3\nTotal 5.00", &f); /* "No." before a word is no number */
    CHECK_STR(f.invoice_no, "");
    /* a dollar sign read as S after its two-letter prefix, only before a figure */
    fr_fields_extract("Harbour Tools\nTotal due: USS1,234.50", &f);
    CHECK_STR(f.currency, "USD");
    CHECK_STR(f.amount, "1234.50");
    fr_fields_extract("Harbour Tools\nTotal: HKS 80.00", &f);
    CHECK_STR(f.currency, "HKD");
    fr_fields_extract("USS Enterprise Ltd\nTotal: 5.00\nRS 100 cable", &f);
    CHECK_STR(f.currency, "");
    /* a capital I read as l at a word's start before a consonant */
    fr_fields_extract("lronbridge Supplies lnc.\nlnvoice No: 4411-22\nTotal: 3 lbs 12.00", &f);
    CHECK_STR(f.payee, "Ironbridge Supplies Inc.");
    CHECK_STR(f.invoice_no, "4411-22");
    fr_fields_extract("lloyd Hall Ltd\nTotal: 5.00", &f); /* "ll", vowels, "lb" stay */
    CHECK_STR(f.payee, "lloyd Hall Ltd");
    /* an O or I read as a figure in an invoice number's letter prefix */
    fr_fields_extract("Acme\nInvoice No: N0-2020-3565\nTotal 5.00", &f);
    CHECK_STR(f.invoice_no, "NO-2020-3565");
    fr_fields_extract("Acme\nInvoice No: 1NV-2019-4542\nTotal 5.00", &f);
    CHECK_STR(f.invoice_no, "INV-2019-4542");
    fr_fields_extract("Acme\nInvoice No: 2024-0042\nTotal 5.00", &f); /* figures stay */
    CHECK_STR(f.invoice_no, "2024-0042");
    /* an l read as 1 ending a label; a decimal point read as a slash after a grouped figure */
    fr_fields_extract("Silverline\nSubtota1: 18,379.00\nTota1: 20,216.90", &f);
    CHECK_STR(f.amount, "20216.90");
    fr_fields_extract("Brightwater Co.\nDate: 03/01/2019\nBalance due EUR 9,113/18", &f);
    CHECK_STR(f.amount, "9113.18");
    CHECK_STR(f.date, "2019-01-03");
    /* a label run into a name cuts it; a lower-case stretch inside the name does not */
    fr_fields_extract("INVOICE\nVendor:GraniteLogisticsLtd\nTotal:GBP4,122.24", &f);
    CHECK_STR(f.payee, "GraniteLogisticsLtd");
    fr_fields_extract("INVOICE\nVendor: Acme LtdDate: 2024-01-02\nTotal 5.00", &f);
    CHECK_STR(f.payee, "Acme Ltd");
}

/* A page whose currency symbol the reader cannot emit (PP-OCR's dictionary has no euro or pound
 * sign) still implies its currency; an ambiguous numeric date takes the page's own order. */
TEST(fields_page_evidence) {
    fr_fields f;
    /* the symbol dropped: the currency from an IBAN, a VAT number, a word elsewhere */
    fr_fields_extract("Harbour Tools Ltd\nDate: 04/07/2024\nTotal: 1,250.00\n"
                      "IBAN GB29 NWBK 6016 1331 9268 19", &f);
    CHECK_STR(f.currency, "GBP");
    CHECK_STR(f.date, "2024-07-04");
    fr_fields_extract("Atelier Nord GmbH\nUSt / VAT No. DE 123456789\nTotal 88.10", &f);
    CHECK_STR(f.currency, "EUR");
    fr_fields_extract("Payment in euros to the account below\nTotal 88.10", &f);
    CHECK_STR(f.currency, "EUR");
    fr_fields_extract("Ship to: TRY Street\nTotal 5.00", &f); /* no currency named */
    CHECK_STR(f.currency, "");
    /* a dollar invoice is month first, unless another date on the page is day first */
    fr_fields_extract("Invoice date: 04/07/2024\nTotal: $10.00", &f);
    CHECK_STR(f.date, "2024-04-07");
    fr_fields_extract("Invoice date: 04/07/2024\nDue: 25/07/2024\nTotal: $10.00", &f);
    CHECK_STR(f.date, "2024-07-04");
    /* and a page without a currency is day first unless a date says month first */
    fr_fields_extract("Invoice date: 04/07/2024\nDue: 07/25/2024\nTotal: 10.00", &f);
    CHECK_STR(f.date, "2024-04-07");
}

/* PP-OCR drops most spaces and fuses neighbouring words: a one-edit label inside a name is no
 * label, a punctuated label ("receipt#") is exact only, a month fused to the word before it is
 * still a date; a dotted numeric date is day first even on a dollar page; 0/1 read for letters
 * inside the payee's words are put back. */
TEST(fields_fused_words) {
    fr_fields f;
    /* "Supplies" + "L" is one edit from the label "supplier": not a label inside a name */
    fr_fields_extract("HarborSuppliesLtd\nReceipt\nInvoiceNo:77120045\nTotal:$5.00", &f);
    CHECK_STR(f.payee, "HarborSuppliesLtd");
    /* a one-edit label at the line start or before its separator still counts */
    fr_fields_extract("Suplier: Granite Foods Co\nTotal 5.00", &f);
    CHECK_STR(f.payee, "Granite Foods Co");
    /* "Receipt" alone is the title, not "receipt#" one edit away: the next line is no number */
    fr_fields_extract("Receipt\nVend0r1: Pioneer Labs\nInvoice # AB-204411\nTotal 9.10", &f);
    CHECK_STR(f.invoice_no, "AB-204411");
    /* the payee's letters back from digits; digits of a name stay */
    fr_fields_extract("Vendor: Summit 0ffice Supp1y Ltd\nTotal 1.00", &f);
    CHECK_STR(f.payee, "Summit Office Supply Ltd");
    fr_fields_extract("Vendor: Studio 54 3M Co\nTotal 1.00", &f);
    CHECK_STR(f.payee, "Studio 54 3M Co");
    /* dotted: day first, whatever the currency; slashes on a dollar page: month first */
    fr_fields_extract("InvoiceDate:03.11.2024\nTotal:US$19.00", &f);
    CHECK_STR(f.date, "2024-11-03");
    fr_fields_extract("InvoiceDate:03/11/2024\nTotal:US$19.00", &f);
    CHECK_STR(f.date, "2024-03-11");
    /* a month fused to a garbled label before it; but not a month inside another word */
    fr_fields_extract("Buyer: Lakeside CoDaheSep 7, 2022\nTotal 3.00", &f);
    CHECK_STR(f.date, "2022-09-07");
    fr_fields_extract("Summary 5, 2024 items\nTotal 3.00", &f);
    CHECK_STR(f.date, "");
    /* a header row joined into one line: the name at the left, "No." and the number at the right */
    fr_fields_extract("Harbor Foods Ltd   No. 77120045\nTotal 5.00", &f);
    CHECK_STR(f.invoice_no, "77120045");
    CHECK_STR(f.payee, "Harbor Foods Ltd");
    fr_fields_extract("\xe6\x9d\xad\xe5\xb7\x9e\xe7\x91\x9e\xe4\xb8\xb0\xe5\x85\xac"
                      "\xe5\x8f\xb8 No.NO-2021-0815\n\xe5\x90\x88\xe8\xae\xa1 5.00", &f); /* 杭州瑞丰公司, 合计 */
    CHECK_STR(f.invoice_no, "NO-2021-0815");
    CHECK_STR(f.payee, "\xe6\x9d\xad\xe5\xb7\x9e\xe7\x91\x9e\xe4\xb8\xb0\xe5\x85\xac\xe5\x8f\xb8");
    /* the first line as the payee is cut before a label that starts a word, not inside one */
    fr_fields_extract("Granite Logistics Ltd  Tel 555 0100\nTotal 5.00", &f);
    CHECK_STR(f.payee, "Granite Logistics Ltd");
    /* the O of October read as 0 and fused to the day */
    fr_fields_extract("Date:20ctober2025\nTotal 5.00", &f);
    CHECK_STR(f.date, "2025-10-02");
    fr_fields_extract("Date:10Oct2025\nTotal 5.00", &f);
    CHECK_STR(f.date, "2025-10-10");
    /* "no." inside a word is no label */
    fr_fields_extract("Vendor: Al Casino. 12 Corp\nTotal 5.00", &f);
    CHECK_STR(f.payee, "Al Casino. 12 Corp");
    CHECK_STR(f.invoice_no, "");
}

TEST(fields_chinese_labels_noisy) {
    fr_fields f;
    fr_fields_extract("增值税普通发票\n发票代码: 031002300111\n发票号码: 08812345\n"
                      "开票日期: 2024年3月5日\n购买方名称: 北京甲公司 销售方名称: 上海乙科技有限公司\n"
                      "合计 ¥1,000.00 ¥130.00\n价税合计(大写) 壹仟壹佰叁拾元整 (小写) ¥1,130.00\n", &f);
    CHECK_STR(f.invoice_no, "08812345");
    CHECK_STR(f.amount, "1130.00");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.payee, "上海乙科技有限公司");
    CHECK_STR(f.currency, "CNY");
    /* the label 金额 alone; misread labels; fullwidth digits and colon */
    fr_fields_extract("收 据\n票号码 : ＮＯ-２０２４-００４２\n收吉方 : 杭州丙商贸\n"
                      "日期：２０２４／３／５\n金额：￥８８８．５０\n", &f);
    CHECK_STR(f.invoice_no, "NO-2024-0042");
    CHECK_STR(f.amount, "888.50");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.payee, "杭州丙商贸");
    CHECK_STR(f.currency, "CNY");
    /* chi_sim reads the dash as '.': repaired after a letter prefix; the buyer is not the payee */
    fr_fields_extract("发票号码: INV.2024.0042\n付款方: 某某\n", &f);
    CHECK_STR(f.invoice_no, "INV-2024-0042");
    CHECK(strcmp(f.payee, "某某") != 0);
    /* one edit is the bound: two misread characters do not make a label */
    fr_fields_extract("收吉吉: 丁公司\n", &f);
    CHECK(strstr(f.payee, "丁公司") == NULL || !strncmp(f.payee, "收吉吉", 9));
    /* the value on the next line (table and two-column layouts) */
    fr_fields_extract("Amount due\n$ 2,500.00\n", &f);
    CHECK_STR(f.amount, "2500.00");
    CHECK_STR(f.currency, "USD");
    /* a label alone does not take a number from further down the page */
    fr_fields_extract("Total\nInvoice No. INV-2022-8401\n", &f);
    CHECK_STR(f.amount, "");
    CHECK_STR(f.invoice_no, "INV-2022-8401");
}

/* English labels and forms: Invoice Number / Balance due / Issue date / Bill to (not the payee),
 * both decimal conventions, dates in the common forms, the ambiguity rule */
TEST(fields_english_forms) {
    fr_fields f;
    fr_fields_extract("INVOICE\nFrom: Northwind Traders\nBill to: Contoso Ltd\n"
                      "Invoice Number: INV-2024-0042 Issue date: 5 March 2024\n"
                      "Due date: 2024-04-05\nSubtotal 1,000.00\nBalance due EUR 1.210,50\n", &f);
    CHECK_STR(f.invoice_no, "INV-2024-0042");
    CHECK_STR(f.amount, "1210.50");
    CHECK_STR(f.currency, "EUR");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.payee, "Northwind Traders");
    fr_fields_extract("Receipt\nNo. 12345678\nPayee: Blue Sky Cafe\nDate: March 5, 2024\n"
                      "Total due: HK$ 1 234,5\n", &f);
    CHECK_STR(f.invoice_no, "12345678");
    CHECK_STR(f.amount, "1234.50");
    CHECK_STR(f.currency, "HKD");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.payee, "Blue Sky Cafe");
    /* OCR-misread English label ("lnvoice Number") and an em dash in the number */
    fr_fields_extract("lnvoice Number: A\xe2\x80\x94" "77 Date: 05.03.2024\nTotal: \xc2\xa3 99\n", &f);
    CHECK_STR(f.invoice_no, "A-77");
    CHECK_STR(f.date, "2024-03-05");
    CHECK_STR(f.currency, "GBP");
    CHECK_STR(f.amount, "99.00");
    /* 03/05/2024: month first on a dollar invoice, day first otherwise; 13/05 is never month */
    fr_fields_extract("Date: 03/05/2024\nTotal: $10\n", &f);
    CHECK_STR(f.date, "2024-03-05");
    fr_fields_extract("Date: 03/05/2024\nTotal: 10 EUR\n", &f);
    CHECK_STR(f.date, "2024-05-03");
    fr_fields_extract("Date: 05/13/2024\nTotal: 10 EUR\n", &f);
    CHECK_STR(f.date, "2024-05-13");
    char a[32], d[16];
    CHECK(fr_fields_norm_amount("1.234.567,89", a, sizeof a) && !strcmp(a, "1234567.89"));
    CHECK(fr_fields_norm_amount("1,234,567", a, sizeof a) && !strcmp(a, "1234567.00"));
    CHECK(fr_fields_norm_amount("12,5", a, sizeof a) && !strcmp(a, "12.50"));
    CHECK(fr_fields_norm_date("2024/3/5", d, sizeof d) && !strcmp(d, "2024-03-05"));
    CHECK(fr_fields_norm_date("Mar. 5, 2024", d, sizeof d) && !strcmp(d, "2024-03-05"));
    CHECK(!fr_fields_norm_date("2024-13-05", d, sizeof d));
    /* the due date is not the issue date; an invoice date is not an invoice number */
    fr_fields_extract("Due Date: 2024-04-30\nInvoice Date: 2024-04-01\nTotal 5\n", &f);
    CHECK_STR(f.date, "2024-04-01");
    CHECK_STR(f.invoice_no, "");
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
