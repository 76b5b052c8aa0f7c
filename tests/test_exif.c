/* test_exif.c — EXIF orientation and PIL's RGB conversion in the image decoder
 * (src/stages/image/exif.c, image.c with FR_IMG_DECODE_ALPHA_DROP).
 *
 * References made with PIL (Image.open, ImageOps.exif_transpose, convert("RGB")):
 * tests/fixtures/ref/exif-pil/ (Pillow 9.4, scripts/make_resample_refs.py: PNG eXIf with
 * orientations 1..8, WebP and JPEG with 3/6/8, RGBA / LA / palette-with-transparency PNGs, an
 * RGBA WebP) and the GPU host's tests/fixtures/ref/resample/ vl_images (Pillow 12.3: an RGBA PNG,
 * a gray PNG, a WebP, JPEGs, one with Orientation 6). Measured: every decoded image equal to
 * PIL's, 0 levels of difference, JPEG included (same libjpeg-turbo IDCT); the test requires 0.
 * Hand-built EXIF blocks cover both byte orders, SHORT and LONG values and malformed blocks.
 */
#include <stdint.h>

#include <cjson/cJSON.h>

#include "base/npy.h"
#include "stages/image/exif.h"
#include "stages/image/image.h"
#include "t.h"

static int load_rgb_npy(const char *path, fr_image *img) {
    fr_npy a;
    fr_err e = {0};
    memset(img, 0, sizeof *img);
    if (fr_npy_load_f32(path, &a, &e) || a.n_dims != 3 || a.shape[2] != 3) {
        fprintf(stderr, "  %s: %s\n", path, e.msg[0] ? e.msg : "not [h, w, 3]");
        fr_npy_free(&a);
        return -1;
    }
    img->height = (uint32_t)a.shape[0];
    img->width = (uint32_t)a.shape[1];
    img->channels = 3;
    img->pix = malloc((size_t)a.n);
    for (int64_t i = 0; i < a.n; i++) img->pix[i] = (uint8_t)a.data[i];
    fr_npy_free(&a);
    return 0;
}

/* Decodes path as the VL path does and compares with ref; returns the largest difference, -1
 * when something is missing or the sizes differ. */
static int decode_vs(const char *path, const fr_image *ref) {
    size_t len = 0;
    fr_err e = {0};
    char *b = fr_read_file(path, 1 << 24, &len, &e);
    if (!b) {
        fprintf(stderr, "  %s\n", e.msg);
        return -1;
    }
    fr_image img;
    int rc = fr_img_decode_flags((const uint8_t *)b, len, NULL, NULL, 3, FR_IMG_DECODE_ALPHA_DROP, &img, &e);
    free(b);
    if (rc) {
        fprintf(stderr, "  %s: %s\n", path, e.msg);
        return -1;
    }
    int d = 0;
    if (img.width != ref->width || img.height != ref->height) {
        fprintf(stderr, "  %s: decoded %ux%u, PIL %ux%u\n", path, img.width, img.height, ref->width, ref->height);
        d = -1;
    } else {
        for (size_t i = 0; i < (size_t)img.width * img.height * 3; i++)
            d = FR_MAX(d, abs((int)img.pix[i] - (int)ref->pix[i]));
    }
    fr_image_free(&img);
    return d;
}

TEST(decoded_equals_pil_exif_transpose_convert_rgb) {
    char dir[1024], ip[1100];
    snprintf(dir, sizeof dir, "%s/ref/exif-pil", t_fixtures());
    snprintf(ip, sizeof ip, "%s/index.json", dir);
    size_t len;
    fr_err e = {0};
    char *text = fr_read_file(ip, 1 << 20, &len, &e);
    CHECK(text != NULL);
    if (!text) return;
    cJSON *j = cJSON_Parse(text), *c;
    int n = 0, worst = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "cases")) {
        const char *file = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "file"));
        const char *up = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "upright"));
        char fp[2200], upp[2200];
        snprintf(fp, sizeof fp, "%s/%s", dir, file ? file : "");
        snprintf(upp, sizeof upp, "%s/%s", dir, up ? up : "");
        fr_image ref;
        CHECK(file && up && load_rgb_npy(upp, &ref) == 0);
        if (!file || !up || !ref.pix) continue;
        int d = decode_vs(fp, &ref);
        if (d != 0) fprintf(stderr, "  %s: difference %d\n", file, d);
        CHECK(d == 0);
        worst = FR_MAX(worst, d);
        n++;
        fr_image_free(&ref);
    }
    printf("# exif-pil: %d images, max |decoded - PIL| = %d levels\n", n, worst);
    CHECK(n >= 18);
    cJSON_Delete(j);
    free(text);
}

TEST(decoded_equals_the_gpu_hosts_pil) {
    char ip[1100];
    snprintf(ip, sizeof ip, "%s/ref/resample/index.json", t_fixtures());
    size_t len;
    fr_err e = {0};
    char *text = fr_read_file(ip, 1 << 20, &len, &e);
    CHECK(text != NULL);
    if (!text) return;
    cJSON *j = cJSON_Parse(text), *c;
    int n = 0, exif = 0, worst = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(j, "vl_images")) {
        const char *image = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "image"));
        const char *rgb = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "rgb"));
        if (!image || !rgb) continue; /* an RGB PNG: no decoded copy kept */
        char fp[2200], rp[2200];
        snprintf(fp, sizeof fp, "%s/%s", t_fixtures(), image);
        snprintf(rp, sizeof rp, "%s/ref/resample/%s", t_fixtures(), rgb);
        fr_image ref;
        CHECK(load_rgb_npy(rp, &ref) == 0);
        if (!ref.pix) continue;
        int d = decode_vs(fp, &ref);
        if (d != 0) fprintf(stderr, "  %s: difference %d\n", image, d);
        CHECK(d == 0);
        worst = FR_MAX(worst, d);
        exif += cJSON_GetObjectItemCaseSensitive(c, "exif_orientation")->valueint != 1;
        n++;
        fr_image_free(&ref);
    }
    printf("# resample vl_images: %d images (%d with an EXIF orientation), max |decoded - PIL| = %d levels\n", n, exif, worst);
    CHECK(n >= 4 && exif >= 1);
    cJSON_Delete(j);
    free(text);
}

/* The default path still composites alpha onto white (documents): it differs from the dropped
 * colours where alpha < 255 and equals white where alpha is 0. */
TEST(default_decode_composites_alpha) {
    char p[1100];
    snprintf(p, sizeof p, "%s/ref/exif-pil/rgba.png", t_fixtures());
    size_t len;
    fr_err e = {0};
    char *b = fr_read_file(p, 1 << 20, &len, &e);
    CHECK(b != NULL);
    if (!b) return;
    fr_image comp, drop;
    CHECK(fr_img_decode((const uint8_t *)b, len, NULL, NULL, 3, &comp, &e) == 0);
    CHECK(fr_img_decode_flags((const uint8_t *)b, len, NULL, NULL, 3, FR_IMG_DECODE_ALPHA_DROP, &drop, &e) == 0);
    CHECK(comp.pix && drop.pix && memcmp(comp.pix, drop.pix, (size_t)comp.width * comp.height * 3) != 0);
    /* the first pixel has alpha 0: white when composited */
    CHECK(comp.pix && comp.pix[0] == 255 && comp.pix[1] == 255 && comp.pix[2] == 255);
    CHECK(drop.pix && drop.pix[0] == 220);
    fr_image_free(&comp);
    fr_image_free(&drop);
    free(b);
}

/* An EXIF block: byte order, IFD0 with a filler tag and then Orientation. */
static size_t tiff_block(uint8_t *b, int le, int type, uint32_t count, uint32_t value) {
    size_t n = 0;
#define P16(v) (le ? (b[n] = (uint8_t)(v), b[n + 1] = (uint8_t)((v) >> 8)) : (b[n] = (uint8_t)((v) >> 8), b[n + 1] = (uint8_t)(v)), n += 2)
#define P32(v) (le ? (P16((v) & 0xffff), P16((v) >> 16)) : (P16((v) >> 16), P16((v) & 0xffff)))
    memcpy(b, "Exif\0\0", 6);
    n = 6;
    b[n] = b[n + 1] = le ? 'I' : 'M';
    n += 2;
    P16(42);
    P32(8u);
    P16(2); /* two entries */
    P16(0x010F); P16(2); P32(4u); P32(0x41424300u); /* Make, ASCII, inline */
    P16(0x0112); P16(type); P32(count);
    if (type == 3) { P16(value); P16(0); } else P32(value);
    P32(0u); /* no next IFD */
    return n;
#undef P16
#undef P32
}

TEST(exif_blocks_both_byte_orders) {
    uint8_t b[128];
    for (int le = 0; le <= 1; le++)
        for (uint32_t o = 1; o <= 8; o++) {
            size_t n = tiff_block(b, le, 3, 1, o);
            CHECK_EQ_INT(fr_exif_orientation(b, n), o);
            CHECK_EQ_INT(fr_exif_orientation(b + 6, n - 6), o); /* without the Exif prefix */
            n = tiff_block(b, le, 4, 1, o);
            CHECK_EQ_INT(fr_exif_orientation(b, n), o);
        }
    size_t n = tiff_block(b, 1, 3, 1, 9);
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1); /* out of range */
    n = tiff_block(b, 0, 3, 2, 6);
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1); /* count 2 is not an orientation */
    n = tiff_block(b, 1, 2, 1, 6);
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1); /* ASCII */
    n = tiff_block(b, 1, 3, 1, 6);
    for (size_t k = 0; k < n - 4; k++) CHECK_EQ_INT(fr_exif_orientation(b, k), 1); /* every truncation */
    b[8] = 'X';
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1); /* bad byte order */
    n = tiff_block(b, 1, 3, 1, 6);
    b[14] = 0xff, b[15] = 0xff; /* entry count 65535 running past the end, */
    b[28] = 0x13;               /* and the second entry is not Orientation */
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1);
    n = tiff_block(b, 0, 3, 1, 6);
    b[10] = b[11] = b[12] = b[13] = 0xff; /* IFD0 offset far outside */
    CHECK_EQ_INT(fr_exif_orientation(b, n), 1);
    CHECK_EQ_INT(fr_exif_orientation(NULL, 0), 1);
}

/* A JPEG written here with a big-endian APP1 inserted after SOI: decoded upright (the stored
 * 32x16 becomes 16x32 for orientation 6 and the stored bottom-left colour is at the top left). */
TEST(jpeg_app1_big_endian_is_applied) {
    enum { W = 32, H = 16 };
    uint8_t pix[W * H * 3];
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *p = pix + (y * W + x) * 3;
            int q = (y >= H / 2) * 2 + (x >= W / 2); /* 0 TL red, 1 TR green, 2 BL blue, 3 BR white */
            static const uint8_t col[4][3] = {{230, 20, 20}, {20, 220, 20}, {20, 20, 230}, {245, 245, 245}};
            memcpy(p, col[q], 3);
        }
    fr_image img = {.pix = pix, .width = W, .height = H, .channels = 3};
    fr_buf jb = {0};
    fr_err e = {0};
    CHECK(fr_img_encode(&img, FR_IMG_JPEG, 100, &jb, &e) == 0);
    uint8_t blk[128];
    size_t bn = tiff_block(blk, 0, 3, 1, 6);
    fr_buf withexif = {0};
    uint8_t seg[4] = {0xFF, 0xE1, (uint8_t)((bn + 2) >> 8), (uint8_t)(bn + 2)};
    fr_buf_append(&withexif, jb.data, 2);
    fr_buf_append(&withexif, seg, 4);
    fr_buf_append(&withexif, blk, bn);
    fr_buf_append(&withexif, (const uint8_t *)jb.data + 2, jb.len - 2);
    CHECK_EQ_INT(fr_img_file_orientation((const uint8_t *)withexif.data, withexif.len, FR_IMG_JPEG), 6);
    fr_image plain, up;
    CHECK(fr_img_decode((const uint8_t *)jb.data, jb.len, NULL, NULL, 3, &plain, &e) == 0);
    CHECK(fr_img_decode((const uint8_t *)withexif.data, withexif.len, "image/jpeg", NULL, 3, &up, &e) == 0);
    CHECK(up.width == H && up.height == W);
    if (up.pix && up.width == H) {
        const uint8_t *tl = up.pix + (1 * up.width + 1) * 3;             /* near the top left */
        const uint8_t *tr = up.pix + (1 * up.width + up.width - 2) * 3;  /* near the top right */
        CHECK(tl[2] > 200 && tl[0] < 60);  /* blue: stored bottom-left */
        CHECK(tr[0] > 200 && tr[1] < 60);  /* red: stored top-left */
        fr_image ref;
        fr_image_orient(&plain, 6, &ref);
        CHECK(!memcmp(ref.pix, up.pix, (size_t)W * H * 3));
        fr_image_free(&ref);
    }
    /* the gray path is oriented too */
    fr_image g;
    CHECK(fr_img_decode((const uint8_t *)withexif.data, withexif.len, NULL, NULL, 1, &g, &e) == 0 && g.width == H);
    fr_image_free(&g);
    fr_image_free(&plain);
    fr_image_free(&up);
    fr_buf_free(&jb);
    fr_buf_free(&withexif);
}

/* Orientations compose as PIL's table says: 6 then 8 is the identity, 3 twice is, 2 twice is,
 * and 5 / 7 are their own inverses. */
TEST(orient_algebra) {
    enum { W = 5, H = 3 };
    uint8_t pix[W * H];
    for (int i = 0; i < W * H; i++) pix[i] = (uint8_t)i;
    fr_image img = {.pix = pix, .width = W, .height = H, .channels = 1};
    static const int pairs[][2] = {{6, 8}, {8, 6}, {3, 3}, {2, 2}, {4, 4}, {5, 5}, {7, 7}};
    for (size_t k = 0; k < FR_ARRAY_LEN(pairs); k++) {
        fr_image a, b;
        fr_image_orient(&img, pairs[k][0], &a);
        fr_image_orient(&a, pairs[k][1], &b);
        CHECK(b.width == W && b.height == H && !memcmp(b.pix, pix, sizeof pix));
        fr_image_free(&a);
        fr_image_free(&b);
    }
    fr_image r;
    fr_image_orient(&img, 6, &r); /* rotate 90 clockwise: the stored bottom-left is the top-left */
    CHECK(r.width == H && r.height == W && r.pix[0] == (H - 1) * W && r.pix[H - 1] == 0);
    fr_image_free(&r);
}

int main(void) { return t_main(); }
