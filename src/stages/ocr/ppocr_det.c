/* ppocr_det.c — DB text detection around the network: input resize + normalisation, and the
 * post-processing of the probability map into text boxes (PaddleOCR's DBPostProcess).
 *
 * Components, not traced contours: the map is binarised and labelled into 8-connected components
 * by a breadth-first fill (one visited byte per pixel, one queue of pixel indices, both sized by
 * the map: bounded). The outline kept of a component is its leftmost and rightmost pixel of every
 * row it spans (at most 2 points per row). Every vertex of the component's convex hull is such a
 * point, so the minimum-area rectangle of this outline is the rectangle OpenCV's minAreaRect gives
 * on the traced outer contour (pixel centres) that PaddleOCR uses. Holes (the inner contours of
 * RETR_LIST) are not boxes here: a hole inside a text region has no text of its own.
 *
 * Unclip: PaddleOCR offsets the polygon with pyclipper (round joins) by area * ratio / perimeter
 * and takes the minimum-area rectangle of the result; for the rectangles DB boxes are, that is
 * exactly the rectangle grown by the same distance on every side, which is what is done here.
 */
#include "stages/ocr/ppocr.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

fr_ppocr_det_params fr_ppocr_det_default_params(void) {
    fr_ppocr_det_params p = {.limit_side = 960, .thresh = 0.3f, .box_thresh = 0.6f,
                             .unclip_ratio = 1.5f, .min_size = 3.0f, .line_tol = 10.0f};
    return p;
}

void fr_ppocr_det_size(uint32_t w, uint32_t h, int limit_side, uint32_t *out_w, uint32_t *out_h) {
    double ratio = 1.0;
    uint32_t m = w > h ? w : h;
    if (limit_side > 0 && m > (uint32_t)limit_side) ratio = (double)limit_side / m;
    double rw = floor(w * ratio), rh = floor(h * ratio);
    rw = rint(rw / 32.0) * 32.0; /* Python's round: half to even, as rint by default */
    rh = rint(rh / 32.0) * 32.0;
    *out_w = rw < 32 ? 32 : (uint32_t)rw;
    *out_h = rh < 32 ? 32 : (uint32_t)rh;
}

/* Source coordinate of destination index d for a scale src/dst (OpenCV's INTER_LINEAR rule). */
static void lin_coord(uint32_t d, double scale, uint32_t n, uint32_t *i0, uint32_t *i1, float *f) {
    double s = (d + 0.5) * scale - 0.5;
    if (s < 0) s = 0;
    uint32_t i = (uint32_t)s;
    if (i >= n - 1) {
        *i0 = *i1 = n - 1;
        *f = 0;
        return;
    }
    *i0 = i;
    *i1 = i + 1;
    *f = (float)(s - i);
}

/* Bilinear sample of channel c (of 3, RGB; gray images give the same value for all three). */
static float px(const fr_image *img, uint32_t x, uint32_t y, uint32_t c) {
    uint32_t ch = img->channels;
    return img->pix[((size_t)y * img->width + x) * ch + (ch >= 3 ? c : 0)];
}

void fr_ppocr_det_prep(const fr_image *img, uint32_t out_w, uint32_t out_h, float *out) {
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, stdv[3] = {0.229f, 0.224f, 0.225f};
    double sx = (double)img->width / out_w, sy = (double)img->height / out_h;
    size_t plane = (size_t)out_w * out_h;
    for (uint32_t y = 0; y < out_h; y++) {
        uint32_t y0, y1;
        float fy;
        lin_coord(y, sy, img->height, &y0, &y1, &fy);
        for (uint32_t x = 0; x < out_w; x++) {
            uint32_t x0, x1;
            float fx;
            lin_coord(x, sx, img->width, &x0, &x1, &fx);
            for (uint32_t c = 0; c < 3; c++) {
                uint32_t src = 2 - c; /* BGR: channel 0 is blue = RGB index 2 */
                float v = (1 - fy) * ((1 - fx) * px(img, x0, y0, src) + fx * px(img, x1, y0, src)) +
                          fy * ((1 - fx) * px(img, x0, y1, src) + fx * px(img, x1, y1, src));
                out[c * plane + (size_t)y * out_w + x] = (v / 255.0f - mean[c]) / stdv[c];
            }
        }
    }
}

/* ---- geometry ---- */

static double cross3(const double *o, const double *a, const double *b) {
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
}

static int cmp_pt(const void *a, const void *b) {
    const double *p = a, *q = b;
    if (p[0] != q[0]) return p[0] < q[0] ? -1 : 1;
    if (p[1] != q[1]) return p[1] < q[1] ? -1 : 1;
    return 0;
}

/* Order 4 corners as get_mini_boxes does: by x; of the two leftmost the upper is top-left, of the
 * two rightmost the upper is top-right. */
static void order_quad(double c[4][2], fr_ppocr_box *out) {
    double p[4][2];
    memcpy(p, c, sizeof p);
    qsort(p, 4, sizeof p[0], cmp_pt);
    int i1 = p[1][1] > p[0][1] ? 0 : 1, i4 = 1 - i1;
    int i2 = p[3][1] > p[2][1] ? 2 : 3, i3 = 5 - i2;
    const int idx[4] = {i1, i2, i3, i4};
    for (int k = 0; k < 4; k++) {
        out->x[k] = (float)p[idx[k]][0];
        out->y[k] = (float)p[idx[k]][1];
    }
}

void fr_ppocr_min_area_rect(const float *pts, int n, fr_ppocr_box *out, float *short_side) {
    double (*p)[2] = malloc(sizeof(*p) * (size_t)n), (*h)[2] = malloc(sizeof(*h) * (size_t)(2 * n + 1));
    FR_ASSERT(p && h);
    for (int i = 0; i < n; i++) {
        p[i][0] = pts[2 * i];
        p[i][1] = pts[2 * i + 1];
    }
    qsort(p, (size_t)n, sizeof p[0], cmp_pt);
    int k = 0; /* Andrew's monotone chain, counter-clockwise, no collinear points */
    for (int i = 0; i < n; i++) {
        while (k >= 2 && cross3(h[k - 2], h[k - 1], p[i]) <= 0) k--;
        memcpy(h[k++], p[i], sizeof h[0]);
    }
    for (int i = n - 2, lo = k + 1; i >= 0; i--) {
        while (k >= lo && cross3(h[k - 2], h[k - 1], p[i]) <= 0) k--;
        memcpy(h[k++], p[i], sizeof h[0]);
    }
    if (k > 1) k--; /* the last point repeats the first */
    double c[4][2] = {{0}};
    if (k < 3) { /* a point or a segment: a rectangle of width 0 */
        double *a = h[0], *b = h[k - 1];
        c[0][0] = a[0]; c[0][1] = a[1];
        c[1][0] = b[0]; c[1][1] = b[1];
        c[2][0] = b[0]; c[2][1] = b[1];
        c[3][0] = a[0]; c[3][1] = a[1];
        *short_side = 0;
    } else {
        double best = INFINITY;
        for (int e = 0; e < k; e++) {
            double *a = h[e], *b = h[(e + 1) % k];
            double ux = b[0] - a[0], uy = b[1] - a[1], len = hypot(ux, uy);
            if (len == 0) continue;
            ux /= len;
            uy /= len;
            double umin = INFINITY, umax = -INFINITY, vmin = INFINITY, vmax = -INFINITY;
            for (int i = 0; i < k; i++) {
                double dx = h[i][0] - a[0], dy = h[i][1] - a[1];
                double u = dx * ux + dy * uy, v = -dx * uy + dy * ux;
                if (u < umin) umin = u;
                if (u > umax) umax = u;
                if (v < vmin) vmin = v;
                if (v > vmax) vmax = v;
            }
            double area = (umax - umin) * (vmax - vmin);
            if (area < best) {
                best = area;
                double us[4] = {umin, umax, umax, umin}, vs[4] = {vmin, vmin, vmax, vmax};
                for (int q = 0; q < 4; q++) {
                    c[q][0] = a[0] + us[q] * ux - vs[q] * uy;
                    c[q][1] = a[1] + us[q] * uy + vs[q] * ux;
                }
                double w = umax - umin, hh = vmax - vmin;
                *short_side = (float)(w < hh ? w : hh);
            }
        }
    }
    order_quad(c, out);
    free(p);
    free(h);
}

void fr_ppocr_unclip(fr_ppocr_box *b, float ratio) {
    double ux = b->x[1] - b->x[0], uy = b->y[1] - b->y[0], vx = b->x[3] - b->x[0],
           vy = b->y[3] - b->y[0];
    double w = hypot(ux, uy), h = hypot(vx, vy);
    if (w == 0 || h == 0) return; /* no area: PaddleOCR's offset is 0 too */
    double d = w * h * ratio / (2 * (w + h));
    ux *= d / w; uy *= d / w; vx *= d / h; vy *= d / h;
    const double su[4] = {-1, 1, 1, -1}, sv[4] = {-1, -1, 1, 1};
    for (int q = 0; q < 4; q++) {
        b->x[q] = (float)(b->x[q] + su[q] * ux + sv[q] * vx);
        b->y[q] = (float)(b->y[q] + su[q] * uy + sv[q] * vy);
    }
}

static float finite_or0(float v) { return isfinite(v) ? v : 0.0f; }

/* Mean of prob over the box's polygon mask (integer vertices, edges included), as
 * box_score_fast does with cv2.fillPoly on the box's bounding rectangle. */
static float box_score(const float *prob, uint32_t mw, uint32_t mh, const fr_ppocr_box *b) {
    float fx0 = b->x[0], fx1 = b->x[0], fy0 = b->y[0], fy1 = b->y[0];
    for (int q = 1; q < 4; q++) {
        fx0 = fminf(fx0, b->x[q]); fx1 = fmaxf(fx1, b->x[q]);
        fy0 = fminf(fy0, b->y[q]); fy1 = fmaxf(fy1, b->y[q]);
    }
    long x0 = lrintf(floorf(fx0)), x1 = lrintf(ceilf(fx1)), y0 = lrintf(floorf(fy0)),
         y1 = lrintf(ceilf(fy1));
    x0 = x0 < 0 ? 0 : x0 > (long)mw - 1 ? (long)mw - 1 : x0;
    x1 = x1 < 0 ? 0 : x1 > (long)mw - 1 ? (long)mw - 1 : x1;
    y0 = y0 < 0 ? 0 : y0 > (long)mh - 1 ? (long)mh - 1 : y0;
    y1 = y1 < 0 ? 0 : y1 > (long)mh - 1 ? (long)mh - 1 : y1;
    long vx[4], vy[4]; /* vertices relative to (x0, y0), truncated as astype(np.int32) */
    for (int q = 0; q < 4; q++) {
        vx[q] = (long)(b->x[q] - x0);
        vy[q] = (long)(b->y[q] - y0);
    }
    double sum = 0;
    size_t cnt = 0;
    for (long y = 0; y <= y1 - y0; y++)
        for (long x = 0; x <= x1 - x0; x++) {
            int pos = 0, neg = 0;
            for (int q = 0; q < 4; q++) {
                int r = (q + 1) & 3;
                long cr = (vx[r] - vx[q]) * (y - vy[q]) - (vy[r] - vy[q]) * (x - vx[q]);
                pos |= cr > 0;
                neg |= cr < 0;
            }
            if (pos && neg) continue;
            sum += finite_or0(prob[(size_t)(y + y0) * mw + (size_t)(x + x0)]);
            cnt++;
        }
    return cnt ? (float)(sum / cnt) : 0.0f;
}

/* ---- reading order ---- */

static int cmp_box(const void *a, const void *b) {
    const fr_ppocr_box *p = a, *q = b;
    if (p->y[0] != q->y[0]) return p->y[0] < q->y[0] ? -1 : 1;
    if (p->x[0] != q->x[0]) return p->x[0] < q->x[0] ? -1 : 1;
    return 0;
}

void fr_ppocr_sort_boxes(fr_ppocr_box *b, int n, float line_tol) {
    if (n < 2) return;
    qsort(b, (size_t)n, sizeof *b, cmp_box);
    for (int i = 0; i < n - 1; i++)
        for (int j = i; j >= 0; j--) {
            if (fabsf(b[j + 1].y[0] - b[j].y[0]) < line_tol && b[j + 1].x[0] < b[j].x[0]) {
                fr_ppocr_box t = b[j];
                b[j] = b[j + 1];
                b[j + 1] = t;
            } else {
                break;
            }
        }
}

/* The page's skew: the median slope of the top edges of boxes at least twice as wide as they are
 * high (text lines), in radians, within +-0.2 (about 11 degrees); 0 when there are none. */
float fr_ppocr_skew(const fr_ppocr_box *b, int n) {
    float *a = malloc(sizeof *a * (size_t)(n > 0 ? n : 1));
    int k = 0;
    if (!a) return 0;
    for (int i = 0; i < n; i++) {
        float dx = b[i].x[1] - b[i].x[0], dy = b[i].y[1] - b[i].y[0];
        float h = hypotf(b[i].x[3] - b[i].x[0], b[i].y[3] - b[i].y[0]);
        if (dx > 0 && hypotf(dx, dy) >= 2 * h) a[k++] = atan2f(dy, dx);
    }
    for (int i = 1; i < k; i++) /* insertion sort: boxes are at most FR_PPOCR_MAX_BOXES */
        for (int j = i; j > 0 && a[j] < a[j - 1]; j--) {
            float t = a[j];
            a[j] = a[j - 1];
            a[j - 1] = t;
        }
    float m = k ? a[k / 2] : 0;
    free(a);
    return m > 0.2f ? 0.2f : m < -0.2f ? -0.2f : m;
}

/* A box in the frame turned by the skew: its extent across the lines [lo, hi] and its start
 * along them. */
typedef struct row_span {
    float lo, hi, u0;
} row_span;

static row_span span_of(const fr_ppocr_box *b, float c, float s) {
    row_span r = {INFINITY, -INFINITY, INFINITY};
    for (int q = 0; q < 4; q++) {
        float v = -b->x[q] * s + b->y[q] * c, u = b->x[q] * c + b->y[q] * s;
        r.lo = fminf(r.lo, v);
        r.hi = fmaxf(r.hi, v);
        r.u0 = fminf(r.u0, u);
    }
    return r;
}

/* Whether two spans share a row: they overlap across the lines by half the lower one's height. */
static bool same_row(row_span a, row_span b) {
    float ov = fminf(a.hi, b.hi) - fmaxf(a.lo, b.lo);
    return ov >= 0.5f * fminf(a.hi - a.lo, b.hi - b.lo);
}

bool fr_ppocr_same_row(const fr_ppocr_box *a, const fr_ppocr_box *b, float skew) {
    float c = cosf(skew), s = sinf(skew);
    return same_row(span_of(a, c, s), span_of(b, c, s));
}

typedef struct row_item {
    row_span sp;   /* the box's span */
    int row;       /* its row */
    int idx;       /* its index in the input */
} row_item;

static int cmp_centre(const void *a, const void *b) {
    const row_item *p = a, *q = b;
    float cp = p->sp.lo + p->sp.hi, cq = q->sp.lo + q->sp.hi;
    return cp < cq ? -1 : cp > cq;
}

static int cmp_row_u(const void *a, const void *b) {
    const row_item *p = a, *q = b;
    if (p->row != q->row) return p->row < q->row ? -1 : 1;
    return p->sp.u0 < q->sp.u0 ? -1 : p->sp.u0 > q->sp.u0;
}

void fr_ppocr_sort_rows(fr_ppocr_box *b, int n) {
    if (n < 2) return;
    float sk = fr_ppocr_skew(b, n), c = cosf(sk), s = sinf(sk);
    row_item *it = malloc(sizeof *it * (size_t)n);
    fr_ppocr_box *tmp = malloc(sizeof *tmp * (size_t)n);
    if (!it || !tmp) { /* out of memory: PaddleOCR's order, which needs none */
        free(it);
        free(tmp);
        fr_ppocr_sort_boxes(b, n, 10.0f);
        return;
    }
    for (int i = 0; i < n; i++) it[i] = (row_item){span_of(&b[i], c, s), -1, i};
    qsort(it, (size_t)n, sizeof *it, cmp_centre);
    /* rows by the span of their first box (the highest), looked for among the last few rows */
    int rows = 0;
    for (int i = 0; i < n; i++) {
        int r = -1;
        for (int j = i - 1; j >= 0 && r < 0 && it[j].row >= rows - 3; j--)
            if (it[j].row >= 0 && same_row(it[j].sp, it[i].sp)) r = it[j].row;
        it[i].row = r >= 0 ? r : rows++;
    }
    qsort(it, (size_t)n, sizeof *it, cmp_row_u);
    for (int i = 0; i < n; i++) tmp[i] = b[it[i].idx];
    memcpy(b, tmp, sizeof *b * (size_t)n);
    free(tmp);
    free(it);
}

/* ---- DB post-processing ---- */

/* A kept candidate mapped to the image and checked as filter_tag_det_res does; 1 if kept. */
static int to_image(fr_ppocr_box *b, uint32_t mw, uint32_t mh, uint32_t iw, uint32_t ih) {
    double c[4][2] = {{0}};
    for (int q = 0; q < 4; q++) {
        double x = rint((double)b->x[q] / mw * iw), y = rint((double)b->y[q] / mh * ih);
        x = x < 0 ? 0 : x > iw - 1.0 ? iw - 1.0 : x;
        y = y < 0 ? 0 : y > ih - 1.0 ? ih - 1.0 : y;
        c[q][0] = x;
        c[q][1] = y;
    }
    float score = b->score;
    order_quad(c, b);
    b->score = score;
    int w = (int)hypotf(b->x[0] - b->x[1], b->y[0] - b->y[1]);
    int h = (int)hypotf(b->x[0] - b->x[3], b->y[0] - b->y[3]);
    return w > 3 && h > 3;
}

int fr_ppocr_det_boxes(const float *prob, uint32_t map_w, uint32_t map_h, uint32_t img_w,
                       uint32_t img_h, const fr_ppocr_det_params *p, fr_ppocr_box *out, int cap,
                       fr_err *err) {
    if (!prob || !p || !out || cap < 0 || !map_w || !map_h || !img_w || !img_h) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr det: empty map or image");
        return -1;
    }
    if ((uint64_t)map_w * map_h > FR_PPOCR_MAX_MAP_PIXELS) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "ppocr det: probability map %ux%u over %u pixels",
                    map_w, map_h, FR_PPOCR_MAX_MAP_PIXELS);
        return -1;
    }
    size_t npx = (size_t)map_w * map_h;
    uint8_t *seen = calloc(npx, 1);
    uint32_t *queue = malloc(npx * sizeof *queue);
    int32_t *rmin = malloc(map_h * sizeof *rmin), *rmax = malloc(map_h * sizeof *rmax);
    float *pts = malloc((size_t)map_h * 2 * 2 * sizeof *pts);
    if (!seen || !queue || !rmin || !rmax || !pts) {
        free(seen); free(queue); free(rmin); free(rmax); free(pts);
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr det: out of memory for a %ux%u map", map_w, map_h);
        return -1;
    }
    for (uint32_t y = 0; y < map_h; y++) {
        rmin[y] = INT32_MAX;
        rmax[y] = -1;
    }
    int n = 0, candidates = 0;
    for (size_t s = 0; s < npx && candidates < FR_PPOCR_MAX_CANDIDATES && n < cap; s++) {
        if (seen[s] || !(finite_or0(prob[s]) > p->thresh)) continue;
        candidates++;
        size_t qh = 0, qt = 0;
        uint32_t ymin = (uint32_t)(s / map_w), ymax = ymin;
        seen[s] = 1;
        queue[qt++] = (uint32_t)s;
        while (qh < qt) { /* 8-connected fill */
            uint32_t i = queue[qh++], x = i % map_w, y = i / map_w;
            if ((int32_t)x < rmin[y]) rmin[y] = (int32_t)x;
            if ((int32_t)x > rmax[y]) rmax[y] = (int32_t)x;
            if (y > ymax) ymax = y;
            for (int dy = -1; dy <= 1; dy++)
                for (int dx = -1; dx <= 1; dx++) {
                    long nx = (long)x + dx, ny = (long)y + dy;
                    if (nx < 0 || ny < 0 || nx >= (long)map_w || ny >= (long)map_h) continue;
                    size_t j = (size_t)ny * map_w + (size_t)nx;
                    if (seen[j] || !(finite_or0(prob[j]) > p->thresh)) continue;
                    seen[j] = 1;
                    queue[qt++] = (uint32_t)j;
                }
        }
        int np = 0; /* the outline: leftmost and rightmost pixel of each row */
        for (uint32_t y = ymin; y <= ymax; y++) {
            if (rmax[y] < 0) continue;
            pts[2 * np] = (float)rmin[y];
            pts[2 * np + 1] = (float)y;
            np++;
            if (rmax[y] != rmin[y]) {
                pts[2 * np] = (float)rmax[y];
                pts[2 * np + 1] = (float)y;
                np++;
            }
            rmin[y] = INT32_MAX;
            rmax[y] = -1;
        }
        fr_ppocr_box b;
        float sside;
        fr_ppocr_min_area_rect(pts, np, &b, &sside);
        if (sside < p->min_size) continue;
        b.score = box_score(prob, map_w, map_h, &b);
        if (b.score < p->box_thresh) continue;
        fr_ppocr_unclip(&b, p->unclip_ratio);
        float score = b.score;
        float cx[8];
        for (int q = 0; q < 4; q++) {
            cx[2 * q] = b.x[q];
            cx[2 * q + 1] = b.y[q];
        }
        fr_ppocr_min_area_rect(cx, 4, &b, &sside);
        b.score = score;
        if (sside < p->min_size + 2) continue;
        if (!to_image(&b, map_w, map_h, img_w, img_h)) continue;
        out[n++] = b;
    }
    free(seen); free(queue); free(rmin); free(rmax); free(pts);
    fr_ppocr_sort_rows(out, n);
    return n;
}
