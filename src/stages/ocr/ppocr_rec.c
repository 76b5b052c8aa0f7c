/* ppocr_rec.c — from detected boxes to text: perspective crop of each line, the direction
 * classifier's input and flip, the recogniser's input (height 48, width buckets), the dictionary,
 * CTC greedy decoding, script detection and the OCR result with its text joined by rows
 * (PaddleOCR's predict_system, cls and rec steps, and CTCLabelDecode).
 *
 * The crop maps the unit square onto the box's quadrilateral with the closed-form projective map
 * (Heckbert's square-to-quad) and samples the image bilinearly at the destination pixels' images,
 * exactly as cv2.warpPerspective with getPerspectiveTransform(quad, w x h rectangle) does; borders
 * are replicated. PaddleOCR samples bicubically here; bilinear differs from it by under a grey
 * level on text edges and is what the recogniser is robust to.
 */
#include "stages/ocr/ppocr.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- crop ---- */

/* Bilinear sample of channel c at (sx, sy), border replicated. */
static float sample(const fr_image *img, double sx, double sy, uint32_t c) {
    double mx = img->width - 1.0, my = img->height - 1.0;
    sx = sx < 0 ? 0 : sx > mx ? mx : sx;
    sy = sy < 0 ? 0 : sy > my ? my : sy;
    uint32_t x0 = (uint32_t)sx, y0 = (uint32_t)sy;
    uint32_t x1 = x0 + 1 < img->width ? x0 + 1 : x0, y1 = y0 + 1 < img->height ? y0 + 1 : y0;
    double fx = sx - x0, fy = sy - y0;
    size_t ch = img->channels, w = img->width;
    const uint8_t *p = img->pix;
    double a = p[(y0 * w + x0) * ch + c], b = p[(y0 * w + x1) * ch + c];
    double d = p[(y1 * w + x0) * ch + c], e = p[(y1 * w + x1) * ch + c];
    return (float)((1 - fy) * ((1 - fx) * a + fx * b) + fy * ((1 - fx) * d + fx * e));
}

int fr_ppocr_crop(const fr_image *img, const fr_ppocr_box *b, fr_image *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    double top = hypot(b->x[1] - b->x[0], b->y[1] - b->y[0]);
    double bot = hypot(b->x[2] - b->x[3], b->y[2] - b->y[3]);
    double lft = hypot(b->x[3] - b->x[0], b->y[3] - b->y[0]);
    double rgt = hypot(b->x[2] - b->x[1], b->y[2] - b->y[1]);
    double fw = top > bot ? top : bot, fh = lft > rgt ? lft : rgt;
    if (!(fw >= 1 && fh >= 1) || !img || !img->pix || !img->width || !img->height) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr crop: degenerate box");
        return -1;
    }
    if (fw > FR_PPOCR_MAX_CROP_SIDE || fh > FR_PPOCR_MAX_CROP_SIDE) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "ppocr crop: box %.0fx%.0f over %u px a side", fw, fh,
                    FR_PPOCR_MAX_CROP_SIDE);
        return -1;
    }
    uint32_t w = (uint32_t)fw, h = (uint32_t)fh, ch = img->channels;
    /* projective map of the unit square: (0,0) p0, (1,0) p1, (1,1) p2, (0,1) p3 */
    double x0 = b->x[0], x1 = b->x[1], x2 = b->x[2], x3 = b->x[3];
    double y0 = b->y[0], y1 = b->y[1], y2 = b->y[2], y3 = b->y[3];
    double dx1 = x1 - x2, dx2 = x3 - x2, dx3 = x0 - x1 + x2 - x3;
    double dy1 = y1 - y2, dy2 = y3 - y2, dy3 = y0 - y1 + y2 - y3;
    double g = 0, hh = 0, den = dx1 * dy2 - dx2 * dy1;
    if ((dx3 != 0 || dy3 != 0) && den != 0) {
        g = (dx3 * dy2 - dx2 * dy3) / den;
        hh = (dx1 * dy3 - dx3 * dy1) / den;
    }
    double A = x1 - x0 + g * x1, B = x3 - x0 + hh * x3, D = y1 - y0 + g * y1, E = y3 - y0 + hh * y3;
    uint8_t *pix = malloc((size_t)w * h * ch);
    if (!pix) {
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr crop: out of memory");
        return -1;
    }
    for (uint32_t y = 0; y < h; y++) {
        double v = (double)y / h;
        for (uint32_t x = 0; x < w; x++) {
            double u = (double)x / w, q = g * u + hh * v + 1;
            double sx = (A * u + B * v + x0) / q, sy = (D * u + E * v + y0) / q;
            for (uint32_t c = 0; c < ch; c++) {
                float s = sample(img, sx, sy, c);
                pix[((size_t)y * w + x) * ch + c] = (uint8_t)lrintf(s < 0 ? 0 : s > 255 ? 255 : s);
            }
        }
    }
    out->pix = pix;
    out->width = w;
    out->height = h;
    out->channels = ch;
    if ((double)h / w >= 1.5) { /* np.rot90: 90° counter-clockwise = 270° clockwise */
        fr_image r;
        fr_image_rotate(out, 270, &r);
        fr_image_free(out);
        *out = r;
    }
    return 0;
}

/* ---- network inputs ---- */

/* Bilinear resize of img to rw x rh into the left of out (3, rh, total_w), BGR, (v/255 - 0.5) /
 * 0.5; columns rw..total_w-1 are zero. */
static void resize_pm1(const fr_image *img, uint32_t rw, uint32_t rh, uint32_t total_w, float *out) {
    size_t plane = (size_t)total_w * rh;
    memset(out, 0, 3 * plane * sizeof *out);
    double sx = (double)img->width / rw, sy = (double)img->height / rh;
    for (uint32_t y = 0; y < rh; y++) {
        double fy = (y + 0.5) * sy - 0.5;
        for (uint32_t x = 0; x < rw; x++) {
            double fx = (x + 0.5) * sx - 0.5;
            for (uint32_t c = 0; c < 3; c++) {
                uint32_t src = img->channels >= 3 ? 2 - c : 0;
                float v = sample(img, fx, fy, src);
                out[c * plane + (size_t)y * total_w + x] = v / 127.5f - 1.0f;
            }
        }
    }
}

static uint32_t scaled_w(const fr_image *crop, uint32_t cap) {
    double r = ceil(FR_PPOCR_REC_H * (double)crop->width / crop->height);
    return r > cap ? cap : r < 1 ? 1 : (uint32_t)r;
}

void fr_ppocr_cls_prep(const fr_image *crop, float *out) {
    resize_pm1(crop, scaled_w(crop, FR_PPOCR_CLS_W), FR_PPOCR_REC_H, FR_PPOCR_CLS_W, out);
}

int fr_ppocr_cls_says_flip(const float probs[2], float thresh) {
    return probs[1] > probs[0] && probs[1] > thresh;
}

void fr_ppocr_flip180(fr_image *img) {
    size_t n = (size_t)img->width * img->height, ch = img->channels;
    for (size_t i = 0, j = n - 1; n && i < j; i++, j--)
        for (size_t c = 0; c < ch; c++) {
            uint8_t t = img->pix[i * ch + c];
            img->pix[i * ch + c] = img->pix[j * ch + c];
            img->pix[j * ch + c] = t;
        }
}

uint32_t fr_ppocr_rec_width(float max_ratio, uint32_t min_w, uint32_t step, uint32_t max_w) {
    double w = isfinite(max_ratio) && max_ratio > 0 ? floor(FR_PPOCR_REC_H * (double)max_ratio) : 0;
    if (w > max_w) w = max_w;
    uint32_t r = w < min_w ? min_w : (uint32_t)w;
    if (step > 1) r = (r + step - 1) / step * step;
    if (max_w && r > max_w) r = max_w;
    return r;
}

void fr_ppocr_rec_prep(const fr_image *crop, uint32_t width, float *out) {
    resize_pm1(crop, scaled_w(crop, width), FR_PPOCR_REC_H, width, out);
}

void fr_ppocr_rec_order(const fr_image *crops, int n, int *idx) {
    /* insertion sort: stable, n is a page's lines */
    for (int i = 0; i < n; i++) idx[i] = i;
    for (int i = 1; i < n; i++) {
        int k = idx[i];
        double rk = (double)crops[k].width / crops[k].height;
        int j = i - 1;
        while (j >= 0 && (double)crops[idx[j]].width / crops[idx[j]].height > rk) {
            idx[j + 1] = idx[j];
            j--;
        }
        idx[j + 1] = k;
    }
}

/* ---- dictionary ---- */

void fr_ppocr_dict_free(fr_ppocr_dict *d) {
    if (!d) return;
    for (size_t i = 0; i < d->n; i++) free(d->chars[i]);
    free(d->chars);
    memset(d, 0, sizeof *d);
}

int fr_ppocr_dict_parse(const char *data, size_t len, int with_space, fr_ppocr_dict *d,
                        fr_err *err) {
    memset(d, 0, sizeof *d);
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += data[i] == '\n';
    if (len && data[len - 1] != '\n') lines++;
    if (lines == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr dict: empty");
        return -1;
    }
    if (lines > FR_PPOCR_MAX_DICT) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr dict: %zu entries, over %d", lines,
                    FR_PPOCR_MAX_DICT);
        return -1;
    }
    d->chars = fr_xcalloc(lines + 2, sizeof *d->chars);
    d->chars[d->n++] = fr_xstrdup("");
    for (size_t s = 0; s < len;) {
        size_t e = s;
        while (e < len && data[e] != '\n') e++;
        size_t l = e - s;
        if (l && data[s + l - 1] == '\r') l--;
        if (l > 64 || !fr_utf8_valid(data + s, l) || memchr(data + s, 0, l)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr dict: entry %zu is not a short UTF-8 "
                        "string", d->n);
            fr_ppocr_dict_free(d);
            return -1;
        }
        d->chars[d->n++] = fr_xstrndup(data + s, l);
        s = e + 1;
    }
    if (with_space) d->chars[d->n++] = fr_xstrdup(" ");
    return 0;
}

int fr_ppocr_dict_load(const char *path, int with_space, fr_ppocr_dict *d, fr_err *err) {
    size_t len = 0;
    memset(d, 0, sizeof *d);
    char *data = fr_read_file(path, (size_t)FR_PPOCR_MAX_DICT * 66, &len, err);
    if (!data) return -1;
    int rc = fr_ppocr_dict_parse(data, len, with_space, d, err);
    free(data);
    if (rc) fr_err_prefix(err, "%s", path);
    return rc;
}

/* ---- CTC ---- */

void fr_ppocr_best_path(const float *probs, int T, int C, float *path) {
    for (int t = 0; t < T; t++) {
        const float *row = probs + (size_t)t * C;
        int best = 0;
        float bv = -INFINITY;
        for (int c = 0; c < C; c++)
            if (row[c] > bv) { /* NaN is never greater */
                bv = row[c];
                best = c;
            }
        path[2 * t] = (float)best;
        path[2 * t + 1] = bv;
    }
}

int fr_ppocr_ctc_decode(const float *probs, int T, int C, const fr_ppocr_dict *d,
                        fr_ppocr_text *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    if (C <= 0 || T < 0 || !d) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr ctc: %d classes", C);
        return -1;
    }
    float *path = malloc(sizeof(float) * 2 * (size_t)(T ? T : 1));
    if (!path) {
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr ctc: out of memory");
        return -1;
    }
    fr_ppocr_best_path(probs, T, C, path);
    int rc = fr_ppocr_ctc_decode_path(path, T, d, out, err);
    free(path);
    return rc;
}

int fr_ppocr_ctc_decode_path(const float *path, int T, const fr_ppocr_dict *d, fr_ppocr_text *out,
                             fr_err *err) {
    memset(out, 0, sizeof *out);
    if (T < 0 || !d) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "ppocr ctc: %d steps", T);
        return -1;
    }
    fr_buf b = {0};
    double sum = 0;
    int kept = 0, prev = -1;
    for (int t = 0; t < T; t++) {
        const float fi = path[2 * t], bv = path[2 * t + 1];
        const int best = fi >= 0 && fi < (float)INT32_MAX ? (int)fi : 0;
        int keep = best != 0 && best != prev;
        prev = best;
        if (!keep) continue;
        if ((size_t)best >= d->n) {
            out->n_unknown++;
            continue;
        }
        fr_buf_puts(&b, d->chars[best]);
        sum += bv;
        kept++;
    }
    out->text = b.data ? fr_buf_cstr(&b) : fr_xstrdup("");
    out->conf = kept ? (float)(sum / kept) : 0.0f;
    return 0;
}

/* ---- script ---- */

static int is_cjk(int32_t c) {
    return (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x4E00 && c <= 0x9FFF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x20000 && c <= 0x3134F);
}

fr_ppocr_script fr_ppocr_detect_script(const char *text, float *cjk_share) {
    size_t letters = 0, cjk = 0;
    const utf8proc_uint8_t *s = (const utf8proc_uint8_t *)(text ? text : "");
    utf8proc_ssize_t left = (utf8proc_ssize_t)strlen((const char *)s);
    while (left > 0) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s, left, &c);
        if (k <= 0) { /* invalid byte: skip it */
            s++;
            left--;
            continue;
        }
        s += k;
        left -= k;
        utf8proc_category_t cat = utf8proc_category(c);
        if (is_cjk(c)) {
            cjk++;
            letters++;
        } else if (cat >= UTF8PROC_CATEGORY_LU && cat <= UTF8PROC_CATEGORY_LO) {
            letters++;
        }
    }
    float share = letters ? (float)cjk / letters : 0.0f;
    if (cjk_share) *cjk_share = share;
    if (!letters) return FR_PPOCR_SCRIPT_NONE;
    return share >= 0.3f ? FR_PPOCR_SCRIPT_HAN : FR_PPOCR_SCRIPT_LATIN;
}

const char *fr_ppocr_script_lang(fr_ppocr_script s) {
    return s == FR_PPOCR_SCRIPT_HAN ? "chi_sim" : s == FR_PPOCR_SCRIPT_LATIN ? "eng" : "";
}

/* ---- result ---- */

/* The top-left corner and height of a box (for rows and gaps). */
static float box_h(const fr_ppocr_box *b) {
    return 0.5f * (hypotf(b->x[3] - b->x[0], b->y[3] - b->y[0]) +
                   hypotf(b->x[2] - b->x[1], b->y[2] - b->y[1]));
}

char *fr_ppocr_join_text(const fr_ppocr_box *boxes, char *const *texts, int n, float line_tol,
                         float join_gap) {
    fr_buf all = {0};
    float skew = fr_ppocr_skew(boxes, n);
    for (int i = 0; i < n; i++) {
        if (i) {
            const fr_ppocr_box *a = &boxes[i - 1], *b = &boxes[i];
            float h = fmaxf(box_h(a), box_h(b));
            float gap = fminf(b->x[0], b->x[3]) - fmaxf(a->x[1], a->x[2]);
            bool row = (fabsf(b->y[0] - a->y[0]) < line_tol || fr_ppocr_same_row(a, b, skew)) &&
                       b->x[0] >= a->x[0];
            fr_buf_puts(&all, row && gap < join_gap * h ? " " : "\n");
        }
        fr_buf_puts(&all, texts[i] ? texts[i] : "");
    }
    return all.data ? fr_buf_cstr(&all) : fr_xstrdup("");
}

int fr_ppocr_result(fr_ppocr_box *boxes, fr_ppocr_text *texts, int n, float line_tol,
                    float join_gap, fr_ocr_result *res, fr_err *err) {
    memset(res, 0, sizeof *res);
    res->passes = 1;
    res->scale = 1;
    res->engine = "ppocr";
    res->lines = fr_xcalloc(n > 0 ? (size_t)n : 1, sizeof *res->lines);
    res->quads = fr_xcalloc(n > 0 ? (size_t)n * 8 : 8, sizeof *res->quads);
    char **kept = fr_xcalloc(n > 0 ? (size_t)n : 1, sizeof *kept);
    double csum = 0;
    size_t k = 0;
    for (int i = 0; i < n; i++) {
        if (!texts[i].text || !texts[i].text[0]) continue;
        fr_ocr_line *l = &res->lines[k];
        const fr_ppocr_box b = boxes[i];
        float x0 = b.x[0], x1 = b.x[0], y0 = b.y[0], y1 = b.y[0];
        for (int q = 1; q < 4; q++) {
            x0 = fminf(x0, b.x[q]); x1 = fmaxf(x1, b.x[q]);
            y0 = fminf(y0, b.y[q]); y1 = fmaxf(y1, b.y[q]);
        }
        l->x0 = (int)floorf(x0);
        l->y0 = (int)floorf(y0);
        l->x1 = (int)ceilf(x1);
        l->y1 = (int)ceilf(y1);
        l->conf = texts[i].conf * 100.0f;
        l->text = texts[i].text;
        texts[i].text = NULL;
        for (int c = 0; c < 4; c++) {
            res->quads[k * 8 + 2 * c] = b.x[c];
            res->quads[k * 8 + 2 * c + 1] = b.y[c];
        }
        kept[k] = l->text;
        csum += l->conf;
        boxes[k] = b;
        k++;
    }
    res->n_lines = k;
    res->text = fr_ppocr_join_text(boxes, kept, (int)k, line_tol, join_gap);
    free(kept);
    res->mean_conf = k ? (float)(csum / k) : 0.0f;
    res->lang = fr_ppocr_script_lang(fr_ppocr_detect_script(res->text, NULL));
    (void)err;
    return 0;
}
