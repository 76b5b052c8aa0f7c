/* test_ppocr.c — the PP-OCR pipeline around the networks on constructed inputs: detection sizes
 * and normalisation, DB post-processing of synthetic probability maps (axis-aligned and rotated
 * boxes, reading order, unclip, score and size filters, hostile maps), the perspective crop, the
 * classifier and recogniser inputs, the dictionary, CTC decoding, script detection and the JSON. */
#include "t.h"

#include <cjson/cJSON.h>

#include "base/npy.h"
#include "stages/ocr/ppocr.h"

/* ---- helpers ---- */

/* Whether pixel centre (x, y) lies inside the convex quad (edges included). */
static int in_quad(const float *qx, const float *qy, double x, double y) {
    int pos = 0, neg = 0;
    for (int i = 0; i < 4; i++) {
        int j = (i + 1) & 3;
        double c = (qx[j] - qx[i]) * (y - qy[i]) - (qy[j] - qy[i]) * (x - qx[i]);
        pos |= c > 1e-9;
        neg |= c < -1e-9;
    }
    return !(pos && neg);
}

/* IoU of two convex quads by counting 0.25-px samples over [0, w) x [0, h). */
static double quad_iou(const float *ax, const float *ay, const float *bx, const float *by, int w,
                       int h) {
    long inter = 0, uni = 0;
    for (double y = 0; y < h; y += 0.25)
        for (double x = 0; x < w; x += 0.25) {
            int a = in_quad(ax, ay, x, y), b = in_quad(bx, by, x, y);
            inter += a && b;
            uni += a || b;
        }
    return uni ? (double)inter / uni : 0;
}

/* A rectangle of size rw x rh centred at (cx, cy) turned by deg degrees, as corner arrays. */
static void rot_rect(double cx, double cy, double rw, double rh, double deg, float *qx, float *qy) {
    double a = deg * M_PI / 180, ux = cos(a), uy = sin(a), vx = -sin(a), vy = cos(a);
    const double su[4] = {-1, 1, 1, -1}, sv[4] = {-1, -1, 1, 1};
    for (int i = 0; i < 4; i++) {
        qx[i] = (float)(cx + su[i] * rw / 2 * ux + sv[i] * rh / 2 * vx);
        qy[i] = (float)(cy + su[i] * rw / 2 * uy + sv[i] * rh / 2 * vy);
    }
}

/* Paint value v into map (w x h) at the pixels whose centres lie inside the quad. */
static void paint(float *map, int w, int h, const float *qx, const float *qy, float v) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (in_quad(qx, qy, x, y)) map[y * w + x] = v;
}

static double side(const fr_ppocr_box *b, int i, int j) {
    return hypot(b->x[i] - b->x[j], b->y[i] - b->y[j]);
}

/* ---- detection ---- */

TEST(det_size_limits_and_rounds_to_32) {
    uint32_t w, h;
    fr_ppocr_det_size(1000, 500, 960, &w, &h); /* 960 x 480 */
    CHECK_EQ_INT(w, 960);
    CHECK_EQ_INT(h, 480);
    fr_ppocr_det_size(100, 50, 960, &w, &h); /* never up: 3.125 -> 96, 1.5625 -> 64 */
    CHECK_EQ_INT(w, 96);
    CHECK_EQ_INT(h, 64);
    fr_ppocr_det_size(10, 3, 960, &w, &h);
    CHECK_EQ_INT(w, 32);
    CHECK_EQ_INT(h, 32);
    fr_ppocr_det_size(3000, 4000, 960, &w, &h); /* 720 x 960; 720 / 32 = 22.5 -> 22 (half to even) */
    CHECK_EQ_INT(w, 704);
    CHECK_EQ_INT(h, 960);
}

TEST(det_prep_normalises_bgr_chw) {
    uint8_t pix[4 * 2 * 3];
    for (int i = 0; i < 8; i++) {
        pix[3 * i] = 255; /* red */
        pix[3 * i + 1] = 0;
        pix[3 * i + 2] = 51;
    }
    fr_image img = {pix, 4, 2, 3};
    float out[3 * 32 * 32];
    fr_ppocr_det_prep(&img, 32, 32, out);
    size_t plane = 32 * 32;
    CHECK_NEAR(out[0], (0.2 - 0.485) / 0.229, 1e-4);              /* channel 0 = blue */
    CHECK_NEAR(out[plane + 100], (0 - 0.456) / 0.224, 1e-4);      /* green */
    CHECK_NEAR(out[2 * plane + 1023], (1 - 0.406) / 0.225, 1e-4); /* red */
}

TEST(db_boxes_axis_aligned_and_rotated_in_reading_order) {
    enum { W = 240, H = 160 };
    static float map[W * H];
    memset(map, 0, sizeof map);
    float ax[4], ay[4], bx[4], by[4], cx[4], cy[4];
    rot_rect(160, 20, 60, 14, 0, ax, ay); /* right on the first line */
    rot_rect(60, 22, 70, 12, 0, bx, by);  /* left on the first line, 2 px lower */
    rot_rect(120, 100, 100, 20, 20, cx, cy);
    paint(map, W, H, ax, ay, 0.9f);
    paint(map, W, H, bx, by, 0.8f);
    paint(map, W, H, cx, cy, 0.95f);
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    p.unclip_ratio = 0; /* the boxes themselves */
    fr_ppocr_box b[8];
    fr_err err = {0};
    int n = fr_ppocr_det_boxes(map, W, H, W, H, &p, b, 8, &err);
    CHECK_EQ_INT(n, 3);
    if (n != 3) return;
    CHECK(quad_iou(b[0].x, b[0].y, bx, by, W, H) > 0.9); /* reading order: left, right, below */
    CHECK(quad_iou(b[1].x, b[1].y, ax, ay, W, H) > 0.9);
    CHECK(quad_iou(b[2].x, b[2].y, cx, cy, W, H) > 0.9);
    CHECK_NEAR(b[0].score, 0.8, 1e-4);
    /* the mask's truncated vertices take in a rim of the rotated box's 0 neighbours */
    CHECK(b[2].score > 0.88 && b[2].score <= 0.95);
    CHECK(b[2].y[1] > b[2].y[0]); /* turned clockwise by 20 degrees: top edge goes down */
    /* the same map at half resolution maps back to image scale */
    n = fr_ppocr_det_boxes(map, W, H, 2 * W, 2 * H, &p, b, 8, &err);
    CHECK_EQ_INT(n, 3);
    if (n == 3) CHECK_NEAR(b[2].x[0] + b[2].x[2], 2 * 240, 4);
}

TEST(db_unclip_grows_by_area_ratio_over_perimeter) {
    enum { W = 200, H = 100 };
    static float map[W * H];
    memset(map, 0, sizeof map);
    float qx[4], qy[4];
    rot_rect(100, 50, 81, 21, 0, qx, qy); /* pixel centres 60..140 x 40..60: 80 x 20 */
    paint(map, W, H, qx, qy, 0.9f);
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    fr_ppocr_box b[2];
    int n = fr_ppocr_det_boxes(map, W, H, W, H, &p, b, 2, NULL);
    CHECK_EQ_INT(n, 1);
    if (n != 1) return;
    double d = 80.0 * 20 * 1.5 / (2 * (80 + 20)); /* 12 */
    CHECK_NEAR(side(&b[0], 0, 1), 80 + 2 * d, 1.5);
    CHECK_NEAR(side(&b[0], 0, 3), 20 + 2 * d, 1.5);
    CHECK_NEAR(b[0].x[0], 60 - d, 1);
    CHECK_NEAR(b[0].y[0], 40 - d, 1);
    /* unclip alone on a rotated rectangle keeps its centre and angle */
    fr_ppocr_box r;
    rot_rect(50, 50, 40, 10, 30, r.x, r.y);
    fr_ppocr_unclip(&r, 2.0f);
    double dd = 40.0 * 10 * 2 / (2 * 50.0);
    CHECK_NEAR(side(&r, 0, 1), 40 + 2 * dd, 1e-3);
    CHECK_NEAR(side(&r, 1, 2), 10 + 2 * dd, 1e-3);
    CHECK_NEAR((r.x[0] + r.x[2]) / 2, 50, 1e-3);
    CHECK_NEAR(atan2(r.y[1] - r.y[0], r.x[1] - r.x[0]) * 180 / M_PI, 30, 1e-3);
}

TEST(db_filters_low_score_and_small_boxes) {
    enum { W = 128, H = 64 };
    static float map[W * H];
    memset(map, 0, sizeof map);
    float qx[4], qy[4];
    rot_rect(30, 20, 40, 12, 0, qx, qy);
    paint(map, W, H, qx, qy, 0.5f); /* above thresh, below box_thresh */
    rot_rect(90, 20, 2, 2, 0, qx, qy);
    paint(map, W, H, qx, qy, 0.99f); /* too small */
    rot_rect(60, 50, 40, 10, 0, qx, qy);
    paint(map, W, H, qx, qy, 0.99f); /* kept */
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    fr_ppocr_box b[4];
    int n = fr_ppocr_det_boxes(map, W, H, W, H, &p, b, 4, NULL);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK(b[0].y[0] > 30);
}

TEST(db_hostile_maps_are_bounded) {
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    fr_ppocr_box *b = malloc(FR_PPOCR_MAX_BOXES * sizeof *b);
    fr_err err = {0};
    enum { W = 256, H = 256 };
    float *map = calloc(W * H, sizeof *map);
    CHECK_EQ_INT(fr_ppocr_det_boxes(map, W, H, W, H, &p, b, FR_PPOCR_MAX_BOXES, &err), 0);
    for (int i = 0; i < W * H; i++) map[i] = 1.0f; /* everything is text: one box, clipped */
    int n = fr_ppocr_det_boxes(map, W, H, 500, 400, &p, b, FR_PPOCR_MAX_BOXES, &err);
    CHECK_EQ_INT(n, 1);
    if (n == 1) {
        CHECK_NEAR(b[0].x[0], 0, 1e-6);
        CHECK_NEAR(b[0].y[0], 0, 1e-6);
        CHECK_NEAR(b[0].x[2], 499, 1e-6);
        CHECK_NEAR(b[0].y[2], 399, 1e-6);
    }
    for (int i = 0; i < W * H; i++) map[i] = NAN;
    CHECK_EQ_INT(fr_ppocr_det_boxes(map, W, H, W, H, &p, b, FR_PPOCR_MAX_BOXES, &err), 0);
    for (int i = 0; i < W * H; i++) map[i] = (i % 7 == 0) ? INFINITY : 0.0f;
    n = fr_ppocr_det_boxes(map, W, H, W, H, &p, b, FR_PPOCR_MAX_BOXES, &err);
    CHECK_EQ_INT(n, 0); /* infinities count as 0 */
    /* a grid of 6x6 blocks: 1024 components, only the first FR_PPOCR_MAX_CANDIDATES examined */
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) map[y * W + x] = (x % 8 < 6 && y % 8 < 6) ? 1.0f : 0.0f;
    n = fr_ppocr_det_boxes(map, W, H, 4 * W, 4 * H, &p, b, FR_PPOCR_MAX_BOXES, &err);
    CHECK_EQ_INT(n, FR_PPOCR_MAX_CANDIDATES);
    n = fr_ppocr_det_boxes(map, W, H, 4 * W, 4 * H, &p, b, 5, &err); /* the caller's cap */
    CHECK_EQ_INT(n, 5);
    /* pseudo-random noise: bounded, boxes inside the image */
    unsigned s = 12345;
    for (int i = 0; i < W * H; i++) {
        s = s * 1103515245u + 12345u;
        map[i] = (float)((s >> 16) & 1023) / 1023.0f;
    }
    n = fr_ppocr_det_boxes(map, W, H, W, H, &p, b, FR_PPOCR_MAX_BOXES, &err);
    CHECK(n >= 0 && n <= FR_PPOCR_MAX_BOXES);
    for (int i = 0; i < n; i++)
        for (int q = 0; q < 4; q++) CHECK(b[i].x[q] >= 0 && b[i].x[q] <= W - 1);
    /* over the bound and empty: errors with codes, nothing read */
    CHECK_EQ_INT(fr_ppocr_det_boxes(map, 5000, 5000, 10, 10, &p, b, 4, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
    CHECK_EQ_INT(fr_ppocr_det_boxes(map, 0, 10, 10, 10, &p, b, 4, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    free(map);
    free(b);
}

TEST(sort_boxes_groups_lines_by_tolerance) {
    fr_ppocr_box b[4] = {0};
    float pos[4][2] = {{300, 100}, {10, 105}, {0, 200}, {150, 100}};
    for (int i = 0; i < 4; i++) {
        b[i].x[0] = pos[i][0];
        b[i].y[0] = pos[i][1];
        b[i].score = (float)i;
    }
    fr_ppocr_sort_boxes(b, 4, 10);
    CHECK_EQ_INT((int)b[0].score, 1); /* (10,105), (150,100), (300,100), (0,200) */
    CHECK_EQ_INT((int)b[1].score, 3);
    CHECK_EQ_INT((int)b[2].score, 0);
    CHECK_EQ_INT((int)b[3].score, 2);
}

/* A w x h box at (x, y) on a page turned by deg degrees about the origin. */
static fr_ppocr_box turned_box(float x, float y, float w, float h, float deg, float score) {
    float px[4] = {x, x + w, x + w, x}, py[4] = {y, y, y + h, y + h};
    double a = deg * M_PI / 180, c = cos(a), s = sin(a);
    fr_ppocr_box b = {.score = score};
    for (int q = 0; q < 4; q++) {
        b.x[q] = (float)(px[q] * c - py[q] * s);
        b.y[q] = (float)(px[q] * s + py[q] * c);
    }
    return b;
}

/* A page turned by -3 degrees: a value 500 px right of its label sits 26 px higher, so PaddleOCR's
 * rule (top-left y within 10 px) puts it in a row of its own above the label; the skew-aware
 * order keeps label and value in one row, and the text joins them on one line. */
TEST(sort_rows_follows_the_skew) {
    fr_ppocr_box b[5] = {
        turned_box(600, 100, 150, 20, -3, 1), /* "INV-1" right of "Invoice No:" */
        turned_box(100, 100, 200, 20, -3, 0), /* "Invoice No:" */
        turned_box(100, 140, 200, 20, -3, 2), /* "Date:" */
        turned_box(600, 140, 150, 20, -3, 3), /* "2024-03-05" */
        turned_box(100, 180, 400, 20, -3, 4), /* "Total: 12.00" */
    };
    CHECK_NEAR(fr_ppocr_skew(b, 5), -3 * M_PI / 180, 1e-3);
    fr_ppocr_box p[5];
    memcpy(p, b, sizeof b);
    fr_ppocr_sort_boxes(p, 5, 10);
    CHECK_EQ_INT((int)p[0].score, 1); /* PaddleOCR's: the value first, on a row of its own */
    fr_ppocr_sort_rows(b, 5);
    for (int i = 0; i < 5; i++) CHECK_EQ_INT((int)b[i].score, i);
    CHECK(fr_ppocr_same_row(&b[0], &b[1], fr_ppocr_skew(b, 5)));
    CHECK(!fr_ppocr_same_row(&b[1], &b[2], fr_ppocr_skew(b, 5)));
    char *t[5] = {"Invoice No:", "INV-1", "Date:", "2024-03-05", "Total: 12.00"};
    char *s = fr_ppocr_join_text(b, t, 5, 10, 40.0f);
    CHECK_STR(s, "Invoice No: INV-1\nDate: 2024-03-05\nTotal: 12.00");
    free(s);
    fr_ppocr_sort_rows(b, 0); /* nothing to do */
    CHECK_NEAR(fr_ppocr_skew(b, 0), 0, 0);
}

/* ---- crop ---- */

/* Solve the 8x8 system for the projective map (u, v) in the unit square -> quad. */
static void homography(const float *qx, const float *qy, double *hm) {
    double a[8][9] = {{0}};
    const double us[4] = {0, 1, 1, 0}, vs[4] = {0, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        double *r = a[2 * i], *s = a[2 * i + 1];
        r[0] = us[i]; r[1] = vs[i]; r[2] = 1; r[6] = -us[i] * qx[i]; r[7] = -vs[i] * qx[i]; r[8] = qx[i];
        s[3] = us[i]; s[4] = vs[i]; s[5] = 1; s[6] = -us[i] * qy[i]; s[7] = -vs[i] * qy[i]; s[8] = qy[i];
    }
    for (int c = 0; c < 8; c++) {
        int piv = c;
        for (int r = c + 1; r < 8; r++)
            if (fabs(a[r][c]) > fabs(a[piv][c])) piv = r;
        for (int k = 0; k < 9; k++) {
            double t = a[c][k];
            a[c][k] = a[piv][k];
            a[piv][k] = t;
        }
        for (int r = 0; r < 8; r++) {
            if (r == c) continue;
            double f = a[r][c] / a[c][c];
            for (int k = 0; k < 9; k++) a[r][k] -= f * a[c][k];
        }
    }
    for (int i = 0; i < 8; i++) hm[i] = a[i][8] / a[i][i];
}

static int pattern(double u, double v) { return (((int)(u * 4) + (int)(v * 2)) % 2) ? 220 : 30; }

TEST(crop_rectifies_a_perspective_quad) {
    enum { W = 240, H = 200 };
    fr_ppocr_box b = {{40, 210, 220, 20}, {50, 30, 170, 160}, 1};
    double hm[8];
    homography(b.x, b.y, hm);
    /* render: each image pixel takes the pattern at its (u, v), found by a fine forward scan */
    uint8_t *pix = malloc(W * H);
    memset(pix, 128, W * H);
    for (double v = 0; v < 1; v += 0.0015)
        for (double u = 0; u < 1; u += 0.0015) {
            double q = hm[6] * u + hm[7] * v + 1;
            int x = (int)lrint((hm[0] * u + hm[1] * v + hm[2]) / q);
            int y = (int)lrint((hm[3] * u + hm[4] * v + hm[5]) / q);
            if (x >= 0 && y >= 0 && x < W && y < H) pix[y * W + x] = (uint8_t)pattern(u, v);
        }
    fr_image img = {pix, W, H, 1}, crop;
    fr_err err = {0};
    CHECK_EQ_INT(fr_ppocr_crop(&img, &b, &crop, &err), 0);
    CHECK_EQ_INT(crop.width, 200);  /* the longer of top (171.2) and bottom (200.2) */
    CHECK_EQ_INT(crop.height, 140); /* the longer of left (111.8) and right (140.4) */
    long good = 0, total = 0;
    for (uint32_t y = 0; y < crop.height; y++)
        for (uint32_t x = 0; x < crop.width; x++) {
            double u = (double)x / crop.width, v = (double)y / crop.height;
            /* away from the cell edges */
            if (fabs(u * 4 - lrint(u * 4)) < 0.06 || fabs(v * 2 - lrint(v * 2)) < 0.06) continue;
            total++;
            good += abs(crop.pix[y * crop.width + x] - pattern(u, v)) < 40;
        }
    CHECK(total > 1000);
    CHECK(good > total * 98 / 100);
    fr_image_free(&crop);
    /* a tall box is turned 90 degrees counter-clockwise: its top-right corner comes first */
    memset(pix, 0, W * H);
    pix[10 * W + 29] = 255; /* top-right pixel of the box x 10..30, y 10..70 */
    fr_ppocr_box t = {{10, 30, 30, 10}, {10, 10, 70, 70}, 1};
    CHECK_EQ_INT(fr_ppocr_crop(&img, &t, &crop, &err), 0);
    CHECK_EQ_INT(crop.width, 60);
    CHECK_EQ_INT(crop.height, 20);
    if (crop.pix) { /* (19, 0) in the box -> (0, 0) after the turn, (19, 1) -> (1, 0) */
        CHECK(crop.pix[0] > 100);
        CHECK(crop.pix[1] < 50);
    }
    fr_image_free(&crop);
    fr_ppocr_box z = {{5, 5, 5, 5}, {5, 5, 5, 5}, 1};
    CHECK_EQ_INT(fr_ppocr_crop(&img, &z, &crop, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    fr_ppocr_box big = {{0, 9000, 9000, 0}, {0, 0, 10, 10}, 1};
    CHECK_EQ_INT(fr_ppocr_crop(&img, &big, &crop, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
    free(pix);
}

/* ---- classifier and recogniser inputs ---- */

TEST(cls_input_flip_rule_and_flip) {
    uint8_t pix[48 * 48];
    memset(pix, 255, sizeof pix);
    fr_image sq = {pix, 48, 48, 1};
    static float in[3 * 48 * 192];
    fr_ppocr_cls_prep(&sq, in);
    CHECK_NEAR(in[47], 1, 1e-6);
    CHECK_NEAR(in[48], 0, 1e-6); /* padding */
    CHECK_NEAR(in[2 * 48 * 192 + 47 * 192], 1, 1e-6);
    float f1[2] = {0.05f, 0.95f}, f2[2] = {0.15f, 0.85f}, f3[2] = {0.95f, 0.05f}, f4[2] = {NAN, NAN};
    CHECK(fr_ppocr_cls_says_flip(f1, 0.9f));
    CHECK(!fr_ppocr_cls_says_flip(f2, 0.9f));
    CHECK(!fr_ppocr_cls_says_flip(f3, 0.9f));
    CHECK(!fr_ppocr_cls_says_flip(f4, 0.9f));
    uint8_t p6[6] = {1, 2, 3, 4, 5, 6};
    fr_image im = {p6, 3, 2, 1};
    fr_ppocr_flip180(&im);
    CHECK(p6[0] == 6 && p6[2] == 4 && p6[5] == 1);
}

TEST(rec_width_prep_and_order) {
    CHECK_EQ_INT(fr_ppocr_rec_width(2.0f, 320, 32, 1600), 320);
    CHECK_EQ_INT(fr_ppocr_rec_width(10.0f, 320, 32, 1600), 480);
    CHECK_EQ_INT(fr_ppocr_rec_width(10.1f, 320, 32, 1600), 512);
    CHECK_EQ_INT(fr_ppocr_rec_width(100.0f, 320, 32, 1600), 1600);
    CHECK_EQ_INT(fr_ppocr_rec_width(NAN, 320, 32, 1600), 320);
    uint8_t pix[100 * 48 * 3];
    for (int i = 0; i < 100 * 48; i++) {
        pix[3 * i] = 255;
        pix[3 * i + 1] = 0;
        pix[3 * i + 2] = 0;
    }
    fr_image c = {pix, 100, 48, 3};
    static float in[3 * 48 * 320];
    fr_ppocr_rec_prep(&c, 320, in);
    size_t plane = 48 * 320;
    CHECK_NEAR(in[0], -1, 1e-6);            /* blue */
    CHECK_NEAR(in[2 * plane + 99], 1, 1e-6); /* red, last column of the line */
    CHECK_NEAR(in[2 * plane + 100], 0, 1e-6);
    fr_image crops[3] = {{NULL, 300, 30, 1}, {NULL, 50, 50, 1}, {NULL, 200, 40, 1}};
    int idx[3];
    fr_ppocr_rec_order(crops, 3, idx);
    CHECK(idx[0] == 1 && idx[1] == 2 && idx[2] == 0);
}

/* ---- dictionary and CTC ---- */

TEST(dict_parse_conventions_and_errors) {
    fr_ppocr_dict d;
    fr_err err = {0};
    const char *s = "a\nb\r\n\xe4\xb8\xad\n";
    CHECK_EQ_INT(fr_ppocr_dict_parse(s, strlen(s), 1, &d, &err), 0);
    CHECK_EQ_INT(d.n, 5);
    if (d.n == 5) {
        CHECK_STR(d.chars[0], "");
        CHECK_STR(d.chars[2], "b");
        CHECK_STR(d.chars[3], "\xe4\xb8\xad");
        CHECK_STR(d.chars[4], " ");
    }
    fr_ppocr_dict_free(&d);
    CHECK_EQ_INT(fr_ppocr_dict_parse("a\nb", 3, 0, &d, &err), 0); /* no final newline */
    CHECK_EQ_INT(d.n, 3);
    fr_ppocr_dict_free(&d);
    CHECK_EQ_INT(fr_ppocr_dict_parse("a\n\xff\n", 4, 1, &d, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_ppocr_dict_parse("", 0, 1, &d, &err), -1);
    CHECK_EQ_INT(fr_ppocr_dict_load("/nonexistent/ppocr_keys.txt", 1, &d, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
}

/* probs (T, C) with the argmax of step t at cls[t] holding p[t], the rest sharing what is left. */
static void make_probs(float *probs, int T, int C, const int *cls, const float *p) {
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++)
            probs[t * C + c] = c == cls[t] ? p[t] : (1 - p[t]) / (C - 1);
}

TEST(ctc_greedy_decoding) {
    fr_ppocr_dict d;
    CHECK_EQ_INT(fr_ppocr_dict_parse("a\nb\nc\n", 6, 1, &d, NULL), 0); /* "", a, b, c, " " */
    enum { C = 7 };                                                   /* 2 classes unknown */
    int cls[10] = {1, 1, 0, 1, 2, 2, 4, 3, 6, 0};
    float p[10] = {0.9f, 0.7f, 0.99f, 0.8f, 0.6f, 0.6f, 0.5f, 0.9f, 0.9f, 0.9f};
    float probs[10 * C];
    make_probs(probs, 10, C, cls, p);
    fr_ppocr_text t;
    fr_err err = {0};
    CHECK_EQ_INT(fr_ppocr_ctc_decode(probs, 10, C, &d, &t, &err), 0);
    CHECK_STR(t.text, "aab c");
    CHECK_EQ_INT(t.n_unknown, 1);
    CHECK_NEAR(t.conf, (0.9 + 0.8 + 0.6 + 0.5 + 0.9) / 5, 1e-5);
    free(t.text);
    /* all blanks, NaN rows and no steps give "" with confidence 0 */
    for (int i = 0; i < 10 * C; i++) probs[i] = NAN;
    CHECK_EQ_INT(fr_ppocr_ctc_decode(probs, 10, C, &d, &t, &err), 0);
    CHECK_STR(t.text, "");
    CHECK_NEAR(t.conf, 0, 0);
    free(t.text);
    CHECK_EQ_INT(fr_ppocr_ctc_decode(probs, 0, C, &d, &t, &err), 0);
    CHECK_STR(t.text, "");
    free(t.text);
    CHECK_EQ_INT(fr_ppocr_ctc_decode(probs, 1, 0, &d, &t, &err), -1);
    fr_ppocr_dict_free(&d);
}

/* ---- currency signs the dictionary lacks ---- */

/* A 48-px line crop, white, with ink boxes; the recogniser's path over it puts one emitted class
 * per listed step (4 columns a step: in_w = the crop's width, T = width / 4). */
typedef struct sign_line {
    fr_image crop;
    float *probs; /* (T, C) */
    int T;
} sign_line;

static void ink(fr_image *im, int x0, int x1, int y0, int y1) { /* inclusive */
    for (int y = y0; y <= y1; y++)
        for (int x = x0; x <= x1; x++) im->pix[(size_t)y * im->width + x] = 20;
}

/* "<label>:<glyph?><1>2.50" drawn as boxes, the ':' at step 2, the figures from step 9 on. */
static void sign_line_make(sign_line *l, int C, const int *steps, const int *classes, int n) {
    enum { W = 160 };
    l->crop = (fr_image){fr_xmalloc(W * 48), W, 48, 1};
    memset(l->crop.pix, 250, W * 48);
    l->T = W / 4;
    l->probs = fr_xcalloc((size_t)l->T * C, sizeof *l->probs);
    for (int s = 0; s < l->T; s++) l->probs[(size_t)s * C] = 1; /* blank */
    for (int i = 0; i < n; i++) {
        l->probs[(size_t)steps[i] * C] = 0;
        l->probs[(size_t)steps[i] * C + classes[i]] = 1;
    }
}

TEST(best_path_first_largest_nan_never_wins) {
    const float inf = INFINITY, nan = NAN;
    const float probs[4 * 4] = {0.1f, 0.7f, 0.7f, 0.2f,  /* tie: the first */
                                nan,  0.3f, nan,  0.4f,  /* NaN never wins */
                                -inf, -inf, -inf, -inf,  /* nothing above -inf: class 0 */
                                nan,  nan,  nan,  nan};
    float path[8];
    fr_ppocr_best_path(probs, 4, 4, path);
    CHECK(path[0] == 1.0f && path[1] == 0.7f);
    CHECK(path[2] == 3.0f && path[3] == 0.4f);
    CHECK(path[4] == 0.0f && path[5] == -inf);
    CHECK(path[6] == 0.0f && path[7] == -inf);
    /* decoding the path equals decoding the probabilities it came from */
    fr_ppocr_dict d;
    fr_err err = {0};
    CHECK_EQ_INT(fr_ppocr_dict_parse("a\nb\nc\n", 6, 0, &d, &err), 0);
    const int T = 6, C = 4;
    float pr[6 * 4], pa[12];
    for (int t = 0; t < T; t++)
        for (int c = 0; c < C; c++) pr[t * C + c] = (float)((t * 7 + c * 3) % 5) / 5.0f;
    fr_ppocr_best_path(pr, T, C, pa);
    fr_ppocr_text x, y;
    CHECK_EQ_INT(fr_ppocr_ctc_decode(pr, T, C, &d, &x, &err), 0);
    CHECK_EQ_INT(fr_ppocr_ctc_decode_path(pa, T, &d, &y, &err), 0);
    CHECK_STR(x.text, y.text);
    CHECK(x.conf == y.conf && x.n_unknown == y.n_unknown);
    /* a hostile path (negative, huge or NaN indices) decodes as blanks, in bounds */
    const float bad[6] = {-3.0f, 0.9f, 1e30f, 0.9f, nan, 0.9f};
    fr_ppocr_text z;
    CHECK_EQ_INT(fr_ppocr_ctc_decode_path(bad, 3, &d, &z, &err), 0);
    CHECK_EQ_INT(z.n_unknown, 0);
    CHECK_STR(z.text, "");
    free(x.text);
    free(y.text);
    free(z.text);
    fr_ppocr_dict_free(&d);
}

/* The padded work of a cut: sum over its batches of rows x width + a run's fixed cost. */
static double cut_work(const float *r, const int *ends, int nb, const fr_ppocr_opts *o) {
    double w = 0;
    for (int b = 0, s = 0; b < nb; s = ends[b++])
        w += fr_ppocr_batch_rows(o, o->rec_batch, ends[b] - s) *
                 (double)fr_ppocr_rec_width(r[ends[b] - 1], o->rec_min_w, o->rec_step, o->rec_max_w) +
             4.0 * o->rec_min_w;
    return w;
}

TEST(rec_batches_rows_and_cuts) {
    fr_ppocr_opts c = fr_ppocr_default_opts(), g = fr_ppocr_cuda_opts(0);
    CHECK_EQ_INT(fr_ppocr_batch_rows(&c, 6, 5), 5);
    CHECK_EQ_INT(fr_ppocr_batch_rows(&g, 32, 1), 8);
    CHECK_EQ_INT(fr_ppocr_batch_rows(&g, 32, 9), 16);
    CHECK_EQ_INT(fr_ppocr_batch_rows(&g, 32, 17), 32);
    CHECK_EQ_INT(fr_ppocr_batch_rows(&g, 2, 1), 2);
    /* 20 narrow lines and 3 very wide ones */
    float r[23];
    for (int i = 0; i < 20; i++) r[i] = 2.0f + 0.1f * (float)i;
    r[20] = 30, r[21] = 40, r[22] = 45;
    int ends[23];
    int nb = fr_ppocr_rec_batches(r, 23, &c, ends); /* the CPU: runs of 6 */
    CHECK_EQ_INT(nb, 4);
    CHECK(ends[0] == 6 && ends[1] == 12 && ends[2] == 18 && ends[3] == 23);
    nb = fr_ppocr_rec_batches(r, 23, &g, ends);
    CHECK(nb >= 2);
    CHECK_EQ_INT(ends[nb - 1], 23);
    for (int b = 0, s = 0; b < nb; s = ends[b++]) CHECK(ends[b] > s && ends[b] - s <= g.rec_batch);
    /* less padded work than one run of all 23 at the widest line's width (what batches of 32
     * in ratio order gave): the narrow lines run narrow, and only what rides in a wide run's
     * padding rows joins it */
    const int one[1] = {23};
    CHECK(cut_work(r, ends, nb, &g) < 0.5 * cut_work(r, one, 1, &g));
    /* the cut is the least work: against every cut of a small set (brute force over the 2^(n-1)
     * ways to cut n = 12 sorted crops, batches of at most 8) */
    g.rec_batch = 8;
    float q[12];
    for (int i = 0; i < 12; i++) q[i] = 1.0f + (float)(i * i) * 0.35f;
    int e12[12];
    int n12 = fr_ppocr_rec_batches(q, 12, &g, e12);
    double got = cut_work(q, e12, n12, &g), best = INFINITY;
    for (unsigned m = 0; m < (1u << 11); m++) {
        int e[12], ne = 0, ok = 1;
        for (int i = 1; i < 12; i++)
            if (m >> (i - 1) & 1) e[ne++] = i;
        e[ne++] = 12;
        for (int b = 0, s = 0; b < ne; s = e[b++]) ok &= e[b] - s <= 8;
        if (ok) best = fmin(best, cut_work(q, e, ne, &g));
    }
    CHECK(fabs(got - best) < 1e-6);
    CHECK_EQ_INT(fr_ppocr_rec_batches(q, 0, &g, e12), 0);
}

TEST(signs_the_dictionary_lacks_from_the_glyph) {
    /* classes: 1..10 the figures, 11 '.', 12 ':', 13 'f', 14 '$', 15 ' ' */
    fr_ppocr_dict d;
    const char *keys = "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n.\n:\nf\n$\n";
    CHECK_EQ_INT(fr_ppocr_dict_parse(keys, strlen(keys), 1, &d, NULL), 0);
    enum { C = 16 };
    /* ':' step 2, figures 1 2 . 5 0 at steps 9 13 17 21 25 (pitch 4 steps = 16 px) */
    int steps[6] = {2, 9, 13, 17, 21, 25}, cls[6] = {12, 2, 3, 11, 6, 1};
    fr_err err = {0};
    for (int kind = 0; kind < 6; kind++) {
        sign_line l;
        cls[3] = kind == 5 ? 3 : 11; /* kind 5: "12250", a number without decimals */
        sign_line_make(&l, C, steps, cls, 6);
        ink(&l.crop, 8, 11, 18, 21), ink(&l.crop, 8, 11, 30, 33); /* the colon */
        for (int i = 1; i < 6; i++)                                /* the figures */
            ink(&l.crop, steps[i] * 4 - 2, steps[i] * 4 + 6, i == 3 ? 34 : 10, 37);
        if (kind == 0) { /* a pound: stem, crossbar, a bar to the bottom-left corner */
            ink(&l.crop, 23, 25, 10, 37), ink(&l.crop, 20, 28, 22, 24), ink(&l.crop, 20, 29, 34, 37);
            ink(&l.crop, 25, 29, 10, 12);
        } else if (kind == 1 || kind == 5) { /* a euro: a C whose lower curve leaves the corner empty */
            ink(&l.crop, 20, 22, 14, 30), ink(&l.crop, 23, 29, 10, 13), ink(&l.crop, 24, 29, 34, 37);
            ink(&l.crop, 19, 26, 20, 21), ink(&l.crop, 19, 26, 25, 26);
        } else if (kind == 4) { /* a dash: not of the line's height, no sign */
            ink(&l.crop, 20, 29, 22, 25);
        } else if (kind == 3) { /* a line holding no figure at all beside the glyph */
            ink(&l.crop, 20, 29, 10, 37);
            for (int s = 0; s < l.T * C; s++) l.probs[s] = s % C == 0;
        }
        fr_ppocr_text t = {fr_xstrdup(kind == 3 ? "" : kind == 5 ? ":12250" : ":12.50"), 0.9f, 0};
        int rc = fr_ppocr_find_signs(l.probs, l.T, C, &d, &l.crop, 160, &t, &err);
        if (kind == 0) CHECK_STR(t.text, ":\xc2\xa3" "12.50");
        if (kind == 1) CHECK_STR(t.text, ":\xe2\x82\xac" "12.50");
        if (kind == 2 || kind == 3) CHECK_EQ_INT(rc, 0); /* blank paper (a space) / no figure */
        if (kind == 2) CHECK_STR(t.text, ":12.50");
        if (kind == 4) CHECK_STR(t.text, ":12.50");
        if (kind == 5) { /* an invoice or account number is no price: no sign before it */
            CHECK_EQ_INT(rc, 0);
            CHECK_STR(t.text, ":12250");
        }
        free(t.text);
        free(l.probs);
        fr_image_free(&l.crop);
    }
    /* a sign the dictionary has, right before the figures: nothing added */
    int steps2[7] = {2, 5, 9, 13, 17, 21, 25}, cls2[7] = {12, 14, 2, 3, 11, 6, 1};
    sign_line l;
    sign_line_make(&l, C, steps2, cls2, 7);
    ink(&l.crop, 20, 29, 10, 37);
    fr_ppocr_text t = {fr_xstrdup(":$12.50"), 0.9f, 0};
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, &l.crop, 160, &t, &err), 0);
    CHECK_STR(t.text, ":$12.50");
    free(t.text);
    /* a lone "f" before the figures is the recogniser's pound */
    cls2[1] = 13;
    free(l.probs);
    fr_image_free(&l.crop);
    sign_line_make(&l, C, steps2, cls2, 7);
    t = (fr_ppocr_text){fr_xstrdup(":f12.50"), 0.9f, 0};
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, &l.crop, 160, &t, &err), 1);
    CHECK_STR(t.text, ":\xc2\xa3" "12.50");
    free(t.text);
    free(l.probs);
    fr_image_free(&l.crop);
    /* after the figures: "12.50 €" */
    int steps3[5] = {2, 6, 10, 14, 18}, cls3[5] = {2, 3, 11, 6, 1};
    sign_line_make(&l, C, steps3, cls3, 5);
    for (int i = 0; i < 5; i++) ink(&l.crop, steps3[i] * 4 - 2, steps3[i] * 4 + 6, i == 2 ? 34 : 10, 37);
    ink(&l.crop, 94, 96, 14, 30), ink(&l.crop, 97, 103, 10, 13), ink(&l.crop, 98, 103, 34, 37);
    ink(&l.crop, 92, 100, 20, 21), ink(&l.crop, 92, 100, 25, 26);
    t = (fr_ppocr_text){fr_xstrdup("12.50"), 0.9f, 0};
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, &l.crop, 160, &t, &err), 1);
    CHECK_STR(t.text, "12.50\xe2\x82\xac");
    free(t.text);
    /* inputs it does not look at: no crop, a crop of a few pixels, NaN rows, too many steps */
    t = (fr_ppocr_text){fr_xstrdup("12.50"), 0.9f, 0};
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, NULL, 160, &t, &err), 0);
    fr_image tiny = {l.crop.pix, 3, 3, 1};
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, &tiny, 160, &t, &err), 0);
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, 5000, C, &d, &l.crop, 160, &t, &err), 0);
    for (int i = 0; i < l.T * C; i++) l.probs[i] = NAN;
    CHECK_EQ_INT(fr_ppocr_find_signs(l.probs, l.T, C, &d, &l.crop, 160, &t, &err), 0);
    CHECK_STR(t.text, "12.50");
    free(t.text);
    /* a box read as nothing beside a figure in its row: the sign alone */
    fr_ppocr_box bx[2] = {{{0, 60, 60, 0}, {0, 0, 20, 20}, 1}, {{64, 80, 80, 64}, {0, 0, 20, 20}, 1}};
    fr_image crops[2] = {{0}};
    crops[1] = (fr_image){fr_xmalloc(16 * 20), 16, 20, 1};
    memset(crops[1].pix, 250, 16 * 20);
    for (int y = 2; y < 18; y++) /* a pound: stem and a bar to the bottom-left corner */
        for (int x = 0; x < 16; x++)
            if ((x >= 5 && x <= 7) || y >= 15 || (y >= 9 && y <= 10 && x <= 11))
                crops[1].pix[y * 16 + x] = 20;
    fr_ppocr_text tx[2] = {{fr_xstrdup("12.50"), 0.9f, 0}, {fr_xstrdup(""), 0.0f, 0}};
    CHECK_EQ_INT(fr_ppocr_lone_signs(bx, crops, tx, 2, &err), 1);
    CHECK_STR(tx[1].text, "\xc2\xa3");
    free(tx[1].text);
    tx[1].text = fr_xstrdup("");
    free(tx[0].text);
    tx[0].text = fr_xstrdup("Total"); /* no figure beside it: nothing */
    CHECK_EQ_INT(fr_ppocr_lone_signs(bx, crops, tx, 2, &err), 0);
    free(tx[0].text);
    free(tx[1].text);
    fr_image_free(&crops[1]);
    free(l.probs);
    fr_image_free(&l.crop);
    fr_ppocr_dict_free(&d);
}

/* ---- script and result ---- */

TEST(script_from_cjk_share) {
    float share;
    CHECK_EQ_INT(fr_ppocr_detect_script("Invoice No. INV-2024-001", &share), FR_PPOCR_SCRIPT_LATIN);
    CHECK_NEAR(share, 0, 0);
    CHECK_EQ_INT(fr_ppocr_detect_script("\xe5\x8f\x91\xe7\xa5\xa8\xe5\x8f\xb7\xe7\xa0\x81 INV-1",
                                        &share),
                 FR_PPOCR_SCRIPT_HAN); /* 发票号码: 4 of 7 letters */
    CHECK_NEAR(share, 4.0 / 7, 1e-6);
    CHECK_EQ_INT(fr_ppocr_detect_script("12 345 ,.", NULL), FR_PPOCR_SCRIPT_NONE);
    CHECK_EQ_INT(fr_ppocr_detect_script("\xff\xfe ab", NULL), FR_PPOCR_SCRIPT_LATIN);
    CHECK_STR(fr_ppocr_script_lang(FR_PPOCR_SCRIPT_HAN), "chi_sim");
}

TEST(result_and_json) {
    fr_ppocr_box b[2] = {{{10, 50, 50, 10}, {5, 5, 20, 20}, 0.9f},
                         {{0, 9, 9, 0}, {30, 30, 40, 40}, 0.8f}};
    fr_ppocr_text t[2] = {{fr_xstrdup(""), 0, 0}, {fr_xstrdup("Total 5"), 0.75f, 0}};
    fr_ocr_result r;
    CHECK_EQ_INT(fr_ppocr_result(b, t, 2, 10, 1.0f, &r, NULL), 0);
    CHECK_EQ_INT(r.n_lines, 1);
    CHECK_STR(r.text, "Total 5");
    CHECK_NEAR(r.mean_conf, 75, 1e-4);
    CHECK(r.lines[0].x0 == 0 && r.lines[0].y0 == 30 && r.lines[0].x1 == 9 && r.lines[0].y1 == 40);
    CHECK(t[1].text == NULL);
    free(t[0].text);
    CHECK(r.quads && r.quads[0] == 0 && r.quads[1] == 30 && r.quads[4] == 9 && r.quads[5] == 40);
    CHECK_STR(r.engine, "ppocr");
    CHECK_STR(r.lang, "eng");
    cJSON *o = fr_ocr_result_json(&r);
    char *s = cJSON_PrintUnformatted(o);
    CHECK(strstr(s, "\"engine\":\"ppocr\"") != NULL);
    CHECK(strstr(s, "\"script\":\"latin\"") != NULL);
    CHECK(strstr(s, "\"lang\":\"eng\"") != NULL);
    CHECK(strstr(s, "\"quad\":[0,30,9,30,9,40,0,40]") != NULL);
    CHECK(strstr(s, "\"box\":[0,30,9,40]") != NULL);
    free(s);
    cJSON_Delete(o);
    fr_ocr_result_free(&r);
}

/* Boxes of one row join with a space when close, with '\n' when far apart or on another row. */
TEST(join_text_by_rows) {
    /* h 20: a at x 10..100, b at 110..200 (gap 10 < 20), c at 400..500 (gap 200), d next row */
    fr_ppocr_box b[4] = {{{10, 100, 100, 10}, {50, 50, 70, 70}, 1},
                         {{110, 200, 200, 110}, {52, 52, 72, 72}, 1},
                         {{400, 500, 500, 400}, {51, 51, 71, 71}, 1},
                         {{10, 90, 90, 10}, {90, 90, 110, 110}, 1}};
    char *t[4] = {"Invoice", "No. 12", "Total", "Date"};
    char *s = fr_ppocr_join_text(b, t, 4, 10, 1.0f);
    CHECK_STR(s, "Invoice No. 12\nTotal\nDate");
    free(s);
    s = fr_ppocr_join_text(b, t, 4, 10, 15.0f); /* a gap of 200 px is under 15 line heights */
    CHECK_STR(s, "Invoice No. 12 Total\nDate");
    free(s);
    s = fr_ppocr_join_text(b, t, 0, 10, 1.0f);
    CHECK_STR(s, "");
    free(s);
}

/* The model files: all four present, or the folder does not count (the tesseract fallback). */
TEST(models_present_needs_all_four_files) {
    char *dir = fr_data_path("models/ppocr");
    bool have = fr_ppocr_models_present(dir);
    if (!have) fprintf(stderr, "  no PP-OCR models in %s (run scripts/install-deps.sh)\n", dir);
    CHECK(have);
    CHECK(fr_ppocr_models_present(NULL) == have); /* NULL is the same default folder */
    CHECK_EQ_INT(fr_ocr_kind_default(dir), FR_OCR_KIND_PPOCR);
    free(dir);
    char tmp[] = "/tmp/frugal-ppocr-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    CHECK(!fr_ppocr_models_present(tmp));
    CHECK_EQ_INT(fr_ocr_kind_default(tmp), FR_OCR_KIND_TESSERACT);
    fr_err err = {0};
    CHECK(fr_ppocr_models_load(tmp, &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, FR_PPOCR_DET_FILE) != NULL);
    static const char *const f[3] = {FR_PPOCR_DET_FILE, FR_PPOCR_CLS_FILE, FR_PPOCR_REC_FILE};
    for (int i = 0; i < 3; i++) { /* three of four (and empty) still count as absent */
        char *p = fr_path_join(tmp, f[i]);
        FILE *fp = fopen(p, "w");
        if (fp) fclose(fp);
        free(p);
    }
    CHECK(!fr_ppocr_models_present(tmp));
    CHECK(fr_ppocr_models_load(tmp, &err) == NULL); /* empty files are not models */
    CHECK(err.code != FR_ERR_INTERNAL);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    CHECK_EQ_INT(system(cmd), 0);
}

TEST(engine_kind_names) {
    fr_ocr_kind k = FR_OCR_KIND_TESSERACT;
    fr_err err = {0};
    CHECK_EQ_INT(fr_ocr_kind_parse("ppocr", &k, &err), 0);
    CHECK_EQ_INT(k, FR_OCR_KIND_PPOCR);
    CHECK_EQ_INT(fr_ocr_kind_parse("tesseract", &k, &err), 0);
    CHECK_EQ_INT(k, FR_OCR_KIND_TESSERACT);
    CHECK_EQ_INT(fr_ocr_kind_parse("paddle", &k, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_ocr_kind_parse(NULL, &k, &err), -1);
    CHECK_STR(fr_ocr_kind_name(FR_OCR_KIND_PPOCR), "ppocr");
    CHECK_STR(fr_ocr_kind_name(FR_OCR_KIND_TESSERACT), "tesseract");
}

/* ---- on the real models' outputs (onnxruntime references, tests/onnx/make_refs.mjs) ---- */

TEST(real_dictionary_fits_the_recogniser_and_decodes_its_output) {
    char *keys = fr_data_path("models/ppocr/ppocr_keys_v1.txt");
    fr_ppocr_dict d;
    fr_err err = {0};
    int rc = fr_ppocr_dict_load(keys, 1, &d, &err);
    if (rc) fprintf(stderr, "  %s (run scripts/install-deps.sh)\n", err.msg);
    free(keys);
    CHECK_EQ_INT(rc, 0);
    if (rc) return;
    CHECK_EQ_INT(d.n, 6625); /* blank + 6,623 lines + " " */
    fr_npy y = {0};
    CHECK_EQ_INT(fr_npy_load_f32("tests/fixtures/ref/onnx/rec_1x48x160.out.npy", &y, &err), 0);
    if (y.data && y.n_dims == 3) {
        CHECK_EQ_INT(y.shape[2], (int64_t)d.n); /* the model's classes are the dictionary's */
        fr_ppocr_text t;
        CHECK_EQ_INT(fr_ppocr_ctc_decode(y.data, (int)y.shape[1], (int)y.shape[2], &d, &t, &err), 0);
        CHECK_EQ_INT(t.n_unknown, 0);
        CHECK(fr_utf8_valid(t.text, strlen(t.text)));
        CHECK(t.conf >= 0 && t.conf <= 1);
        free(t.text);
    }
    free(y.data);
    fr_ppocr_dict_free(&d);
}

TEST(db_on_the_detector_output_is_bounded) {
    fr_npy y = {0};
    fr_err err = {0};
    CHECK_EQ_INT(fr_npy_load_f32("tests/fixtures/ref/onnx/det_96x128.out.npy", &y, &err), 0);
    if (!y.data || y.n_dims != 4) return;
    uint32_t mw = (uint32_t)y.shape[3], mh = (uint32_t)y.shape[2];
    fr_ppocr_det_params p = fr_ppocr_det_default_params();
    fr_ppocr_box b[FR_PPOCR_MAX_BOXES];
    int n = fr_ppocr_det_boxes(y.data, mw, mh, 2 * mw, 2 * mh, &p, b, FR_PPOCR_MAX_BOXES, &err);
    CHECK(n >= 0);
    for (int i = 0; i < n; i++) {
        CHECK(b[i].score >= p.box_thresh && b[i].score <= 1);
        for (int q = 0; q < 4; q++) CHECK(b[i].x[q] >= 0 && b[i].x[q] <= 2 * mw - 1);
    }
    free(y.data);
}

int main(void) { return t_main(); }
