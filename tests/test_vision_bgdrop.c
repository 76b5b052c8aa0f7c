/* test_vision_bgdrop.c — background merge units before the ViT (src/stages/vision/bgdrop.h) on
 * constructed pages: a blank page with a few text blobs, a faint blob, a grey page, a photo, a
 * blank page, hostile layouts. The pages are patchified here from the formula of HF's
 * Qwen2VLImageProcessor (normalise, duplicate the frame, (t, h/m, w/m, m, m, C, T, P, P)). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/vision/bgdrop.h"
#include "t.h"

enum { P = 14, M = 2, T = 2, C = 3, UNIT = P * M };

static const float mean_[3] = {0.48145466f, 0.4578275f, 0.40821073f};
static const float std_[3] = {0.26862954f, 0.26130258f, 0.27577711f};

/* img: H x W x 3 uint8 -> pixel rows (gh * gw, C * T * P * P) in HF's order. */
static float *patchify(const uint8_t *img, int H, int W) {
    int gh = H / P, gw = W / P;
    float *out = malloc((size_t)gh * gw * C * T * P * P * sizeof *out);
    int64_t row = 0;
    for (int bh = 0; bh < gh / M; bh++)
        for (int bw = 0; bw < gw / M; bw++)
            for (int mh = 0; mh < M; mh++)
                for (int mw = 0; mw < M; mw++, row++) {
                    float *o = out + row * (C * T * P * P);
                    int y0 = (bh * M + mh) * P, x0 = (bw * M + mw) * P;
                    for (int c = 0; c < C; c++)
                        for (int t = 0; t < T; t++)
                            for (int py = 0; py < P; py++)
                                for (int px = 0; px < P; px++) {
                                    uint8_t v = img[((y0 + py) * W + x0 + px) * 3 + c];
                                    *o++ = ((float)v / 255.0f - mean_[c]) / std_[c];
                                }
                }
    return out;
}

static uint64_t rs = 1;
static int noise1(void) { /* -1, 0 or +1 */
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rs >> 33) % 3) - 1;
}

static void page(uint8_t *img, int H, int W, int level) {
    for (int i = 0; i < H * W * 3; i++) {
        int v = level + noise1();
        img[i] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
    }
}

/* A text blob: horizontal strokes of ink in [y0, y1) x [x0, x1), like a line of glyphs. */
static void blob(uint8_t *img, int W, int y0, int y1, int x0, int x1, int ink) {
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            int stroke = ((x / 3) % 2 == 0) || (y - y0) % 7 == 0;
            if (!stroke) continue;
            for (int c = 0; c < 3; c++) img[(y * W + x) * 3 + c] = (uint8_t)ink;
        }
}

/* expected background map: a unit is content when any blob pixel falls in it */
static void mark(unsigned char *content, int gw_units, int y0, int y1, int x0, int x1) {
    for (int uy = y0 / UNIT; uy <= (y1 - 1) / UNIT; uy++)
        for (int ux = x0 / UNIT; ux <= (x1 - 1) / UNIT; ux++) content[uy * gw_units + ux] = 1;
}

static int64_t run(const uint8_t *img, int H, int W, int64_t *kept, fr_vision_bg_report *rep) {
    float *pix = patchify(img, H, W);
    fr_vision_bg_params p = fr_vision_bg_default_params();
    fr_err err = {0};
    int64_t k = fr_vision_bg_select(pix, (int64_t)(H / P) * (W / P), C * T * P * P, 1, H / P,
                                    W / P, &p, kept, rep, &err);
    free(pix);
    return k;
}

TEST(blank_page_with_text_blobs) {
    enum { H = 448, W = 336, GU = W / UNIT, UNITS = (H / UNIT) * GU };
    uint8_t *img = malloc(H * W * 3);
    page(img, H, W, 255);
    unsigned char content[UNITS] = {0};
    int blobs[][4] = {{30, 44, 20, 200}, {100, 114, 40, 300}, {300, 330, 150, 170},
                      {420, 430, 300, 336}};
    for (int b = 0; b < 4; b++) {
        blob(img, W, blobs[b][0], blobs[b][1], blobs[b][2], blobs[b][3], 20);
        mark(content, GU, blobs[b][0], blobs[b][1], blobs[b][2], blobs[b][3]);
    }
    /* a solid blue box (a logo, a shaded table header): flat, but not the paper, so kept */
    for (int y = 252; y < 336; y++)
        for (int x = 196; x < 280; x++) {
            img[(y * W + x) * 3 + 0] = 50;
            img[(y * W + x) * 3 + 1] = 100;
            img[(y * W + x) * 3 + 2] = 200;
        }
    mark(content, GU, 252, 336, 196, 280);
    /* a faint grey label (15 levels below the paper): text, kept */
    blob(img, W, 200, 212, 60, 120, 240);
    mark(content, GU, 200, 212, 60, 120);
    int64_t kept[UNITS];
    fr_vision_bg_report rep;
    int64_t k = run(img, H, W, kept, &rep);
    int64_t want = 0;
    for (int u = 0; u < UNITS; u++) want += content[u];
    CHECK_EQ_INT(k, want);
    CHECK_EQ_INT(rep.units, UNITS);
    CHECK_EQ_INT(rep.dropped, UNITS - want);
    for (int64_t i = 0; i < k; i++) {
        CHECK(content[kept[i]]);
        if (i) CHECK(kept[i] > kept[i - 1]);
    }
    for (int c = 0; c < 3; c++) CHECK_NEAR(rep.background[c], (1.0f - mean_[c]) / std_[c], 0.01);
    CHECK(rep.flat > UNITS - want); /* the box's inner units are flat too */
    fprintf(stderr, "  %lld of %d units kept (%.0f %% background)\n", (long long)k, UNITS,
            100.0 * rep.share);
    free(img);
}

TEST(grey_paper) {
    enum { H = 224, W = 224, GU = W / UNIT, UNITS = (H / UNIT) * GU };
    uint8_t *img = malloc(H * W * 3);
    page(img, H, W, 200);
    unsigned char content[UNITS] = {0};
    blob(img, W, 60, 75, 30, 150, 0);
    mark(content, GU, 60, 75, 30, 150);
    int64_t kept[UNITS];
    fr_vision_bg_report rep;
    int64_t k = run(img, H, W, kept, &rep);
    int64_t want = 0;
    for (int u = 0; u < UNITS; u++) want += content[u];
    CHECK_EQ_INT(k, want);
    for (int64_t i = 0; i < k; i++) CHECK(content[kept[i]]);
    CHECK_NEAR(rep.background[0], (200.0f / 255.0f - mean_[0]) / std_[0], 0.01);
    free(img);
}

TEST(photo_keeps_everything) {
    enum { H = 224, W = 280, UNITS = (H / UNIT) * (W / UNIT) };
    uint8_t *img = malloc(H * W * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                img[(y * W + x) * 3 + c] =
                    (uint8_t)(128 + 100 * sin(0.05 * x + 0.5 * c) * cos(0.07 * y));
    /* a small white patch of sky (two units): under min_share, so kept too */
    for (int y = 0; y < UNIT; y++)
        for (int x = 0; x < 2 * UNIT; x++)
            for (int c = 0; c < 3; c++) img[(y * W + x) * 3 + c] = 255;
    int64_t kept[UNITS];
    fr_vision_bg_report rep;
    CHECK_EQ_INT(run(img, H, W, kept, &rep), UNITS);
    CHECK_EQ_INT(rep.dropped, 0);
    CHECK(rep.share > 0 && rep.share < 0.3f);
    for (int i = 0; i < UNITS; i++) CHECK_EQ_INT(kept[i], i);
    free(img);
}

TEST(blank_page_keeps_one) {
    enum { H = 112, W = 112, UNITS = (H / UNIT) * (W / UNIT) };
    uint8_t *img = malloc(H * W * 3);
    page(img, H, W, 255);
    int64_t kept[UNITS];
    fr_vision_bg_report rep;
    CHECK_EQ_INT(run(img, H, W, kept, &rep), 1);
    CHECK_EQ_INT(kept[0], 0);
    CHECK_NEAR(rep.share, 1.0, 1e-6);
    free(img);
}

TEST(non_finite_is_never_background) {
    enum { H = 56, W = 56, UNITS = 4 };
    uint8_t img[H * W * 3];
    memset(img, 255, sizeof img);
    float *pix = patchify(img, H, W);
    pix[3 * M * M * (C * T * P * P) + 17] = NAN; /* unit 3 */
    fr_vision_bg_params p = fr_vision_bg_default_params();
    int64_t kept[UNITS];
    fr_err err = {0};
    int64_t k = fr_vision_bg_select(pix, 16, C * T * P * P, 1, 4, 4, &p, kept, NULL, &err);
    CHECK_EQ_INT(k, 1);
    CHECK_EQ_INT(kept[0], 3);
    free(pix);
}

TEST(hostile_layouts) {
    static float pix[16 * C * T * P * P];
    fr_vision_bg_params p = fr_vision_bg_default_params();
    int64_t kept[16];
    fr_err err = {0};
    const int64_t pd = C * T * P * P;
    struct { int64_t n, dim; int t, h, w; } bad[] = {
        {16, pd - 1, 1, 4, 4}, {16, pd, 1, 4, 3}, {12, pd, 1, 3, 4}, {15, pd, 1, 4, 4},
        {16, pd, 0, 4, 4},     {16, pd, 1, -4, -4}, {0, pd, 1, 0, 0}, {16, pd, 1, 1 << 30, 1 << 30}};
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) {
        CHECK_EQ_INT(fr_vision_bg_select(pix, bad[i].n, bad[i].dim, bad[i].t, bad[i].h, bad[i].w,
                                         &p, kept, NULL, &err), -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    }
    fr_vision_bg_params q = p;
    q.eps = NAN;
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &q, kept, NULL, &err), -1);
    q = p;
    q.min_share = 2;
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &q, kept, NULL, &err), -1);
    q = p;
    q.channels = 0;
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &q, kept, NULL, &err), -1);
    CHECK_EQ_INT(fr_vision_bg_select(NULL, 16, pd, 1, 4, 4, &p, kept, NULL, &err), -1);
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &p, NULL, NULL, &err), -1);
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, NULL, kept, NULL, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &p, kept, NULL, &err), 1); /* sane */
    /* huge flat values and eps 0: the colour bins are clamped, never an out-of-range cast */
    for (size_t i = 0; i < FR_ARRAY_LEN(pix); i++) pix[i] = i < FR_ARRAY_LEN(pix) / 2 ? 3e38f : -3e38f;
    q = p;
    q.eps = 0;
    /* two flat colours of two units each: the tie goes to the lower bin, the other stays */
    CHECK_EQ_INT(fr_vision_bg_select(pix, 16, pd, 1, 4, 4, &q, kept, NULL, &err), 2);
    CHECK(kept[0] == 0 && kept[1] == 1);
}

int main(void) { return t_main(); }
