/* test_image.c — image decoding (each format, encoded in the test), limits checked before
 * allocation, mismatched magic, truncated / corrupt / empty data, and the text-density estimate
 * separating rendered documents from photo-like images. */
#include <stdint.h>

#include "stages/image/density.h"
#include "stages/image/image.h"
#include "stages/ocr/docgen.h"
#include "t.h"

/* fontconfig (behind cairo's toy text API in the document generator) keeps its pattern cache
 * until exit; not ours to free. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libfontconfig\n"; }

/* a small RGB test pattern: left half dark red, right half light blue */
static fr_image pattern(uint32_t w, uint32_t h, uint32_t ch) {
    fr_image im = {fr_xmalloc((size_t)w * h * ch), w, h, ch};
    for (uint32_t y = 0; y < h; y++)
        for (uint32_t x = 0; x < w; x++) {
            uint8_t *p = im.pix + ((size_t)y * w + x) * ch;
            if (ch == 1) p[0] = x < w / 2 ? 40 : 220;
            else if (x < w / 2) p[0] = 200, p[1] = 20, p[2] = 20;
            else p[0] = 180, p[1] = 210, p[2] = 250;
        }
    return im;
}

static void roundtrip(fr_img_format f, int q, uint32_t ch, const char *declared) {
    fr_image src = pattern(37, 23, ch);
    fr_buf b = {0};
    fr_err err = {0};
    CHECK(fr_img_encode(&src, f, q, &b, &err) == 0);
    CHECK(fr_img_sniff((const uint8_t *)b.data, b.len) == f);
    fr_img_info info;
    CHECK(fr_img_probe((const uint8_t *)b.data, b.len, declared, NULL, &info, &err) == 0);
    CHECK_EQ_INT(info.width, 37);
    CHECK_EQ_INT(info.height, 23);
    for (uint32_t oc = 1; oc <= 3; oc += 2) {
        fr_image out;
        int rc = fr_img_decode((const uint8_t *)b.data, b.len, declared, NULL, oc, &out, &err);
        CHECK(rc == 0);
        if (rc) {
            fprintf(stderr, "  %s: %s\n", fr_img_format_name(f), err.msg);
            continue;
        }
        CHECK_EQ_INT(out.width, 37);
        CHECK_EQ_INT(out.height, 23);
        CHECK_EQ_INT(out.channels, oc);
        /* a pixel well inside each half keeps its brightness (lossy formats: loose) */
        const uint8_t *l = out.pix + (size_t)(11 * 37 + 5) * oc, *r = out.pix + (size_t)(11 * 37 + 30) * oc;
        int lv = oc == 1 ? l[0] : (77 * l[0] + 150 * l[1] + 29 * l[2]) >> 8;
        int rv = oc == 1 ? r[0] : (77 * r[0] + 150 * r[1] + 29 * r[2]) >> 8;
        CHECK(lv < 120 && rv > 150);
        fr_image_free(&out);
    }
    fr_buf_free(&b);
    fr_image_free(&src);
}

TEST(decode_png) { roundtrip(FR_IMG_PNG, 0, 3, "image/png"), roundtrip(FR_IMG_PNG, 0, 1, NULL); }
TEST(decode_jpeg) { roundtrip(FR_IMG_JPEG, 90, 3, "image/jpeg"), roundtrip(FR_IMG_JPEG, 90, 1, "image/jpg"); }
TEST(decode_webp) { roundtrip(FR_IMG_WEBP, 90, 3, "image/webp"), roundtrip(FR_IMG_WEBP, 100, 1, NULL); }
TEST(decode_tiff) { roundtrip(FR_IMG_TIFF, 0, 3, "image/tiff"), roundtrip(FR_IMG_TIFF, 0, 1, NULL); }

static fr_buf encoded(fr_img_format f) {
    fr_image src = pattern(64, 48, 3);
    fr_buf b = {0};
    fr_err err;
    FR_ASSERT(fr_img_encode(&src, f, 80, &b, &err) == 0);
    fr_image_free(&src);
    return b;
}

TEST(mismatched_magic) {
    fr_buf j = encoded(FR_IMG_JPEG);
    fr_image out;
    fr_err err = {0};
    CHECK(fr_img_decode((const uint8_t *)j.data, j.len, "image/png", NULL, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "declared PNG but the data is JPEG") != NULL);
    CHECK(out.pix == NULL);
    CHECK(fr_img_decode((const uint8_t *)j.data, j.len, "image/gif", NULL, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "unsupported image media type") != NULL);
    /* a PNG signature glued onto JPEG data */
    fr_buf x = {0};
    fr_buf_append(&x, "\x89PNG\r\n\x1a\n", 8);
    fr_buf_append(&x, j.data, j.len);
    CHECK(fr_img_decode((const uint8_t *)x.data, x.len, NULL, NULL, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "PNG") != NULL);
    CHECK(fr_img_decode((const uint8_t *)"hello world, not an image", 25, NULL, NULL, 1, &out, &err) == -1);
    CHECK(strstr(err.msg, "unrecognised image format") != NULL);
    fr_buf_free(&x);
    fr_buf_free(&j);
}

TEST(zero_length) {
    fr_image out;
    fr_err err = {0};
    CHECK(fr_img_decode((const uint8_t *)"", 0, "image/png", NULL, 1, &out, &err) == -1);
    CHECK(strstr(err.msg, "empty image") != NULL);
    CHECK(fr_img_decode(NULL, 0, NULL, NULL, 1, &out, &err) == -1);
}

TEST(truncated_and_corrupt) {
    fr_img_format fs[] = {FR_IMG_PNG, FR_IMG_JPEG, FR_IMG_WEBP, FR_IMG_TIFF};
    for (size_t k = 0; k < FR_ARRAY_LEN(fs); k++) {
        fr_buf b = encoded(fs[k]);
        fr_image out;
        fr_err err = {0};
        /* every truncation length: an error (or, rarely, a decode), never a crash */
        size_t step = b.len > 400 ? b.len / 97 : 1;
        for (size_t n = 1; n < b.len; n += step) {
            int rc = fr_img_decode((const uint8_t *)b.data, n, NULL, NULL, 3, &out, &err);
            if (rc == 0) fr_image_free(&out);
            else CHECK(err.msg[0] != 0);
        }
        /* half the file: always an error */
        CHECK(fr_img_decode((const uint8_t *)b.data, b.len / 2, NULL, NULL, 3, &out, &err) == -1);
        /* corrupt the middle */
        for (size_t i = b.len / 3; i < b.len / 3 + 16 && i < b.len; i++) b.data[i] ^= 0x5A;
        if (fr_img_decode((const uint8_t *)b.data, b.len, NULL, NULL, 3, &out, &err) == 0)
            fr_image_free(&out);
        fr_buf_free(&b);
    }
}

/* hand-made headers declaring a huge image; the body is absent, so a decoder that allocated
 * before checking would be caught by the sanitizer / the limit message */
TEST(limits_before_allocation) {
    uint8_t png[33] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13, 'I', 'H', 'D', 'R',
                       0, 0, 0x27, 0x10, 0, 0, 0x27, 0x10, 8, 2, 0, 0, 0}; /* 10000 x 10000 */
    fr_img_info info;
    fr_err err = {0};
    CHECK(fr_img_probe(png, sizeof png, "image/png", NULL, &info, &err) == -1);
    CHECK(strstr(err.msg, "100.0 megapixels") != NULL);
    fr_image out;
    CHECK(fr_img_decode(png, sizeof png, NULL, NULL, 3, &out, &err) == -1);
    CHECK(out.pix == NULL);
    /* JPEG SOF0 with 60000 x 60000 */
    uint8_t jpg[] = {0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8, 0xEA, 0x60, 0xEA, 0x60, 1, 1, 0x11, 0};
    CHECK(fr_img_decode(jpg, sizeof jpg, "image/jpeg", NULL, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "per side") != NULL);
    /* a configured small limit refuses a real image */
    fr_buf b = encoded(FR_IMG_PNG);
    fr_img_limits lim = {0, 0, 1000};
    CHECK(fr_img_decode((const uint8_t *)b.data, b.len, NULL, &lim, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "too large") != NULL);
    fr_img_limits lb = {100, 0, 0};
    CHECK(fr_img_decode((const uint8_t *)b.data, b.len, NULL, &lb, 3, &out, &err) == -1);
    CHECK(strstr(err.msg, "bytes") != NULL);
    fr_buf_free(&b);
    /* TIFF whose IFD declares 20000 x 20000 and nothing else */
    fr_buf t = {0};
    fr_buf_append(&t, "II*\0\x08\0\0\0", 8);
    uint8_t ifd[2 + 12 * 2 + 4] = {2, 0, 0, 1, 4, 0, 1, 0, 0, 0, 0x20, 0x4e, 0, 0,
                                   1, 1, 4, 0, 1, 0, 0, 0, 0x20, 0x4e, 0, 0, 0, 0, 0, 0};
    fr_buf_append(&t, ifd, sizeof ifd);
    int rc = fr_img_decode((const uint8_t *)t.data, t.len, "image/tiff", NULL, 1, &out, &err);
    CHECK(rc == -1);
    fr_buf_free(&t);
}

TEST(rotate) {
    fr_image a = pattern(5, 3, 1), r;
    fr_image_rotate(&a, 90, &r);
    CHECK_EQ_INT(r.width, 3);
    CHECK_EQ_INT(r.height, 5);
    CHECK_EQ_INT(r.pix[0], a.pix[2 * 5]); /* top-left of 90cw = bottom-left of the source */
    fr_image_free(&r);
    fr_image_free(&a);
}

TEST(density_separates_documents_from_photos) {
    float doc_min = 1, photo_max = 0;
    for (int l = 0; l < 2; l++)
        for (int s = 0; s < 4; s++) {
            fr_doc_opts o;
            fr_doc_opts_random(&o, l == 1, 100 + (uint64_t)s);
            fr_image im;
            fr_doc_truth t;
            fr_err err;
            CHECK(fr_doc_render(&o, &im, &t, &err) == 0);
            fr_density d;
            fr_density_measure(&im, &d);
            if (d.score < doc_min) doc_min = d.score;
            CHECK(fr_density_route_ocr(&d, 0));
            fr_image_free(&im);
        }
    double worst_ms = 0;
    for (int k = 0; k < FR_DOC_PHOTO_KINDS; k++)
        for (int s = 0; s < 3; s++) {
            fr_image ph;
            fr_doc_photo(k, 1000, 1000, (uint64_t)(k * 10 + s), &ph);
            fr_density d;
            fr_density_measure(&ph, &d);
            if (d.score > photo_max) photo_max = d.score;
            if (d.ms > worst_ms) worst_ms = d.ms;
            CHECK(!fr_density_route_ocr(&d, 0));
            fr_image_free(&ph);
        }
    printf("  density: documents min %.3f, photo-like max %.3f, slowest 1 MP photo %.1f ms\n",
           doc_min, photo_max, worst_ms);
    CHECK(doc_min > photo_max + 0.15f);
    /* an all-white page and a tiny image have no text */
    fr_image w = {fr_xmalloc(200 * 100), 200, 100, 1};
    memset(w.pix, 255, 200 * 100);
    fr_density d;
    fr_density_measure(&w, &d);
    CHECK(d.score < 0.01f);
    fr_image_free(&w);
    fr_image tiny = pattern(3, 2, 3);
    fr_density_measure(&tiny, &d);
    CHECK(d.score == 0);
    fr_image_free(&tiny);
}

int main(void) { return t_main(); }
