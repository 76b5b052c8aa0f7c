/* test_ppocr_run.c — the PP-OCR engine end to end on the real models (models/ppocr, installed by
 * scripts/install-deps.sh; missing models are a FAIL): the two generated pages of
 * tests/fixtures/ocr_lang (bench/ocr_eval/gen_invoices.py, seed 7: tuning pages, not the
 * evaluation set) read with their fields right and no language given; hostile images (tiny,
 * blank, black, noise, a thin strip) end in a result or a coded error; a cancel check stops a
 * page with its code; the pool runs the engine under a time limit; an empty models folder makes
 * the default reader tesseract and an explicit ppocr pool NOT_FOUND. */
#include "t.h"


#include <cjson/cJSON.h>
#include <stdbool.h>
#include <unistd.h>

#include "stages/image/image.h"
#include "stages/ocr/fields.h"
#include "stages/ocr/ocr.h"
#include "stages/ocr/ppocr.h"

static fr_ppocr_models *g_models;

static fr_ppocr_models *models(void) {
    if (g_models) return g_models;
    fr_err err = {0};
    g_models = fr_ppocr_models_load(NULL, &err);
    if (!g_models) fprintf(stderr, "  %s\n", err.msg);
    return g_models;
}

static fr_ppocr *engine(void) {
    if (!models()) return NULL;
    fr_err err = {0};
    fr_ppocr_opts o = fr_ppocr_default_opts();
    fr_ppocr *e = fr_ppocr_new(g_models, &o, &err);
    if (!e) fprintf(stderr, "  %s\n", err.msg);
    return e;
}

static int load_png(const char *path, uint32_t channels, fr_image *img) {
    fr_err err = {0};
    size_t len = 0;
    char *data = fr_read_file(path, 64u << 20, &len, &err);
    if (!data) {
        fprintf(stderr, "  %s\n", err.msg);
        return -1;
    }
    int rc = fr_img_decode((const uint8_t *)data, len, NULL, NULL, channels, img, &err);
    free(data);
    if (rc) fprintf(stderr, "  %s: %s\n", path, err.msg);
    return rc;
}

/* The fields of the page read by e against the generator's truth next to it. */
/* with_currency: the page's currency is to be found (its dictionary has $ ¥ ￥ and letters but not
 * € or £; those are put in from the line image by fr_ppocr_find_signs / fr_ppocr_lone_signs). */
static void check_page(const char *png, const char *truth_json, const char *want_lang,
                       bool with_currency) {
    fr_ppocr *e = engine();
    CHECK(e != NULL);
    fr_image img = {0};
    CHECK_EQ_INT(load_png(png, 1, &img), 0);
    size_t tl = 0;
    char *tj = fr_read_file(truth_json, 1 << 20, &tl, NULL);
    CHECK(tj != NULL);
    if (!e || !img.pix || !tj) {
        fr_ppocr_free(e);
        fr_image_free(&img);
        free(tj);
        return;
    }
    cJSON *t = cJSON_Parse(tj);
    fr_ocr_result r;
    fr_err err = {0};
    fr_ocr_status st = fr_ppocr_run(e, &img, NULL, &r, &err);
    if (st) fprintf(stderr, "  %s\n", err.msg);
    CHECK_EQ_INT(st, FR_OCR_OK);
    CHECK_STR(r.engine, "ppocr");
    CHECK_STR(r.lang, want_lang);
    CHECK(r.n_lines >= 8);
    CHECK(r.quads != NULL);
    fr_fields f;
    fr_fields_extract(r.text, &f);
    char a[128], b[128];
    fr_fields_norm_id(f.invoice_no, a, sizeof a);
    fr_fields_norm_id(cJSON_GetObjectItem(t, "invoice_no")->valuestring, b, sizeof b);
    CHECK_STR(a, b);
    CHECK_STR(f.date, cJSON_GetObjectItem(t, "date")->valuestring);
    CHECK_STR(f.amount, cJSON_GetObjectItem(t, "amount")->valuestring);
    if (with_currency) CHECK_STR(f.currency, cJSON_GetObjectItem(t, "currency")->valuestring);
    else CHECK_STR(f.currency, "");
    fr_fields_norm_payee(f.payee, a, sizeof a);
    fr_fields_norm_payee(cJSON_GetObjectItem(t, "payee")->valuestring, b, sizeof b);
    CHECK_STR(a, b);
    /* the JSON names the engine, the script, and gives each line its quad */
    cJSON *o = fr_ocr_result_json(&r);
    char *s = cJSON_PrintUnformatted(o);
    CHECK(strstr(s, "\"engine\":\"ppocr\"") != NULL);
    CHECK(strstr(s, "\"quad\":[") != NULL);
    free(s);
    cJSON_Delete(o);
    fr_ocr_result_free(&r);
    cJSON_Delete(t);
    free(tj);
    fr_image_free(&img);
    fr_ppocr_free(e);
}

TEST(english_page_fields_without_a_language) {
    check_page("tests/fixtures/ocr_lang/en.png", "tests/fixtures/ocr_lang/en.json", "eng",
               true); /* € amounts: the signs come from the glyphs */
}

TEST(chinese_page_fields_without_a_language) {
    check_page("tests/fixtures/ocr_lang/zh.png", "tests/fixtures/ocr_lang/zh.json", "chi_sim",
               true);
}

/* An RGB page reads like its gray copy (the networks take both). */
TEST(rgb_page_reads_as_well) {
    fr_ppocr *e = engine();
    fr_image img = {0};
    CHECK(e != NULL);
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/en.png", 3, &img), 0);
    if (e && img.pix) {
        fr_ocr_result r;
        fr_err err = {0};
        CHECK_EQ_INT(fr_ppocr_run(e, &img, NULL, &r, &err), FR_OCR_OK);
        CHECK(r.text && strstr(r.text, "INV-2022-8401") != NULL);
        fr_ocr_result_free(&r);
    }
    fr_image_free(&img);
    fr_ppocr_free(e);
}

/* Text without its spaces, into out (cap bytes). */
static void no_spaces(const char *s, char *out, size_t cap) {
    size_t n = 0;
    for (; s && *s && n + 1 < cap; s++)
        if (*s != ' ') out[n++] = *s;
    out[n] = 0;
}

/* The CUDA settings (up to 32 lines a run, padded to 8, 16 or 32 rows, the recogniser's batches
 * cut where that saves padded work, widths in steps of 320, the detector on a 960 x 720 white
 * portrait canvas) run on the CPU
 * executor here: the padding rows must not change what is read, and the wider width buckets
 * (more blank input after a line) at most where a space falls (measured on this page: one word
 * gap of 17 lines is read without its space), so the lines, their characters and the fields
 * are the same. */
TEST(padded_batches_read_like_unpadded_ones) {
    fr_ppocr *e = engine();
    fr_ppocr_opts o = fr_ppocr_cuda_opts(0);
    o.device = -1;
    fr_err err = {0};
    fr_ppocr *p = models() ? fr_ppocr_new(g_models, &o, &err) : NULL;
    fr_image img = {0};
    CHECK(e != NULL && p != NULL);
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/en.png", 1, &img), 0);
    if (e && p && img.pix) {
        fr_ocr_result a, b;
        CHECK_EQ_INT(fr_ppocr_run(e, &img, NULL, &a, &err), FR_OCR_OK);
        CHECK_EQ_INT(fr_ppocr_run(p, &img, NULL, &b, &err), FR_OCR_OK);
        CHECK_EQ_INT((int)b.n_lines, (int)a.n_lines);
        static char ta[8192], tb[8192];
        no_spaces(a.text, ta, sizeof ta);
        no_spaces(b.text, tb, sizeof tb);
        CHECK(strlen(ta) > 100);
        CHECK_STR(tb, ta);
        fr_fields fa, fb;
        fr_fields_extract(a.text, &fa);
        fr_fields_extract(b.text, &fb);
        CHECK_STR(fb.invoice_no, fa.invoice_no);
        CHECK_STR(fb.amount, fa.amount);
        CHECK_STR(fb.date, fa.date);
        CHECK_STR(fb.payee, fa.payee);
        fr_ocr_result_free(&a);
        fr_ocr_result_free(&b);
    }
    fr_image_free(&img);
    fr_ppocr_free(p);
    fr_ppocr_free(e);
}

/* A landscape page (the English page on white paper twice as wide): with the CUDA settings its
 * detector input (960 x ~670) goes on the 960 x 720 landscape canvas, and the page reads as it
 * does at its own size with the default settings. */
TEST(landscape_page_on_the_short_canvas) {
    fr_ppocr *e = engine();
    fr_ppocr_opts o = fr_ppocr_cuda_opts(0);
    o.device = -1;
    CHECK(o.det_canvas_short > 0 && o.det_canvas_short < o.det_canvas);
    fr_err err = {0};
    fr_ppocr *p = models() ? fr_ppocr_new(g_models, &o, &err) : NULL;
    fr_image img = {0}, wide = {0};
    CHECK(e != NULL && p != NULL);
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/en.png", 1, &img), 0);
    if (e && p && img.pix) {
        wide.width = img.width * 2, wide.height = img.height, wide.channels = 1;
        wide.pix = fr_xmalloc((size_t)wide.width * wide.height);
        memset(wide.pix, 255, (size_t)wide.width * wide.height);
        for (uint32_t y = 0; y < img.height; y++)
            memcpy(wide.pix + (size_t)y * wide.width, img.pix + (size_t)y * img.width, img.width);
        fr_ocr_result a, b;
        CHECK_EQ_INT(fr_ppocr_run(e, &wide, NULL, &a, &err), FR_OCR_OK);
        CHECK_EQ_INT(fr_ppocr_run(p, &wide, NULL, &b, &err), FR_OCR_OK);
        static char ta[8192], tb[8192];
        no_spaces(a.text, ta, sizeof ta);
        no_spaces(b.text, tb, sizeof tb);
        CHECK(strlen(ta) > 100);
        CHECK_STR(tb, ta);
        fr_ocr_result_free(&a);
        fr_ocr_result_free(&b);
    }
    fr_image_free(&wide);
    fr_image_free(&img);
    fr_ppocr_free(p);
    fr_ppocr_free(e);
}

/* This test binary has no CUDA backend: a CUDA device is refused with UNSUPPORTED. */
TEST(cuda_device_without_the_backend_is_unsupported) {
    if (!models()) {
        CHECK(models() != NULL);
        return;
    }
    fr_ppocr_opts o = fr_ppocr_cuda_opts(0);
    fr_err err = {0};
    fr_ppocr *e = fr_ppocr_new(g_models, &o, &err);
    CHECK(e == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
    CHECK(strstr(err.msg, "cuda:0") != NULL);
    fr_ppocr_free(e);
}

static void fill(fr_image *img, uint32_t w, uint32_t h, uint32_t ch, int kind) {
    img->width = w, img->height = h, img->channels = ch;
    size_t n = (size_t)w * h * ch;
    img->pix = fr_xmalloc(n ? n : 1);
    uint32_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        img->pix[i] = kind == 0 ? 255 : kind == 1 ? 0 : (uint8_t)(s >> 24);
    }
}

/* Hostile pages: each ends in a result (no text or some) or a coded error, never a crash. */
TEST(hostile_images) {
    fr_ppocr *e = engine();
    CHECK(e != NULL);
    if (!e) return;
    static const struct { uint32_t w, h, ch; int kind; } cases[] = {
        {1, 1, 1, 0},      {1, 1, 3, 2},     {31, 7, 1, 2},   {800, 600, 1, 0},
        {800, 600, 1, 1},  {640, 480, 3, 2}, {4000, 2, 1, 2}, {3, 3000, 1, 2},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        fr_image img = {0};
        fill(&img, cases[i].w, cases[i].h, cases[i].ch, cases[i].kind);
        fr_ocr_result r;
        fr_err err = {0};
        fr_ocr_status st = fr_ppocr_run(e, &img, NULL, &r, &err);
        CHECK(st == FR_OCR_OK || (st == FR_OCR_FAILED && err.code != FR_ERR_INTERNAL));
        if (cases[i].kind == 0) { /* blank paper: nothing to read */
            CHECK_EQ_INT(st, FR_OCR_OK);
            CHECK_EQ_INT(r.n_lines, 0);
            CHECK_STR(r.text, "");
        }
        fr_ocr_result_free(&r);
        fr_image_free(&img);
    }
    fr_image none = {0};
    fr_ocr_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_ppocr_run(e, &none, NULL, &r, &err), FR_OCR_FAILED);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    fr_image two = {0};
    fill(&two, 10, 10, 1, 0);
    two.channels = 2;
    CHECK_EQ_INT(fr_ppocr_run(e, &two, NULL, &r, &err), FR_OCR_FAILED);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    fr_image_free(&two);
    fr_ppocr_free(e);
}

static int g_calls;
static fr_cancel_reason gone_after_one(void *ctx) {
    (void)ctx;
    return g_calls++ > 0 ? FR_CANCEL_CLIENT_GONE : FR_CANCEL_NONE;
}

TEST(cancel_stops_the_page_with_its_code) {
    fr_ppocr *e = engine();
    fr_image img = {0};
    CHECK(e != NULL);
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/en.png", 1, &img), 0);
    if (e && img.pix) {
        g_calls = 0;
        fr_cancel c = {gone_after_one, NULL};
        fr_ocr_result r;
        fr_err err = {0};
        CHECK_EQ_INT(fr_ppocr_run(e, &img, &c, &r, &err), FR_OCR_STOPPED);
        CHECK_EQ_INT(r.stopped, FR_CANCEL_CLIENT_GONE);
        CHECK_EQ_INT(err.code, FR_ERR_CANCELLED);
        CHECK_EQ_INT(r.n_lines, 0);
        CHECK(r.text == NULL);
        fr_ocr_result_free(&r);
    }
    fr_image_free(&img);
    fr_ppocr_free(e);
}

/* The pool runs PP-OCR engines: a page reads, and a time limit far below a page's time stops it
 * as a timeout. */
TEST(pool_runs_ppocr_under_limits) {
    fr_ocr_cfg c = {.kind = FR_OCR_KIND_PPOCR};
    fr_err err = {0};
    fr_ocr_pool *p = fr_ocr_pool_new(&c, 2, &err);
    if (!p) fprintf(stderr, "  %s\n", err.msg);
    CHECK(p != NULL);
    fr_image img = {0};
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/zh.png", 1, &img), 0);
    if (p && img.pix) {
        CHECK_EQ_INT(fr_ocr_pool_kind(p), FR_OCR_KIND_PPOCR);
        fr_ocr_result r;
        CHECK_EQ_INT(fr_ocr_pool_run(p, &img, &r, &err), 0);
        CHECK_STR(r.engine, "ppocr");
        CHECK(r.text && strstr(r.text, "41052842") != NULL);
        fr_ocr_result_free(&r);
        fr_ocr_limits lim = {.time_limit_s = 1e-4};
        CHECK_EQ_INT(fr_ocr_pool_run_limited(p, &img, &lim, &r, &err), FR_OCR_STOPPED);
        CHECK_EQ_INT(r.stopped, FR_CANCEL_TIMEOUT);
        CHECK_EQ_INT(err.code, FR_ERR_TIMEOUT);
        fr_ocr_result_free(&r);
        /* a pixel budget that needs more than 2x shrinking is refused, as with tesseract */
        fr_ocr_limits small = {.max_pixels = 10000};
        CHECK_EQ_INT(fr_ocr_pool_run_limited(p, &img, &small, &r, &err), FR_OCR_OVER_BUDGET);
        CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
        fr_ocr_result_free(&r);
    }
    fr_image_free(&img);
    fr_ocr_pool_free(p);
}

/* Models absent (an empty folder): the default reader is tesseract and it still reads; asking
 * for ppocr there is NOT_FOUND. */
TEST(empty_models_folder_means_tesseract) {
    char tmp[] = "/tmp/frugal-ppocr-run-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    CHECK_EQ_INT(fr_ocr_kind_default(tmp), FR_OCR_KIND_TESSERACT);
    CHECK_EQ_INT(fr_ocr_kind_default(NULL), FR_OCR_KIND_PPOCR); /* the installed models */
    fr_ocr_cfg c = {.kind = FR_OCR_KIND_PPOCR, .ppocr_dir = tmp};
    fr_err err = {0};
    CHECK(fr_ocr_pool_new(&c, 1, &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    c.kind = fr_ocr_kind_default(tmp);
    fr_ocr_pool *p = fr_ocr_pool_new(&c, 1, &err);
    CHECK(p != NULL);
    fr_image img = {0};
    CHECK_EQ_INT(load_png("tests/fixtures/ocr_lang/en.png", 1, &img), 0);
    if (p && img.pix) {
        fr_ocr_result r;
        CHECK_EQ_INT(fr_ocr_pool_run(p, &img, &r, &err), 0);
        CHECK_STR(r.engine, "tesseract");
        CHECK(r.quads == NULL);
        CHECK(r.text && strstr(r.text, "INV-2022-8401") != NULL);
        fr_ocr_result_free(&r);
    }
    fr_image_free(&img);
    fr_ocr_pool_free(p);
    rmdir(tmp);
}

int main(void) {
    int rc = t_main();
    fr_ppocr_models_free(g_models);
    return rc;
}
