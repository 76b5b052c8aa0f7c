/* ppocr_signs.c — currency signs the recogniser cannot emit, found in the line image; see ppocr.h
 * (fr_ppocr_find_signs).
 *
 * Design: ppocr_keys_v1.txt has "$", "¥", "￥" and "￡" but no "€" and no "£", and the recogniser
 * emits a blank over them (now and then an "f" for "£"), so an English page whose only currency
 * mark is one of them loses its currency. The greedy CTC path tells where each emitted character
 * sits in the line; a stretch beside a number where the path emits nothing (or a lone "f") but
 * the line image holds a glyph of the line's full height is a character the dictionary lacks.
 * Beside a figure that is a currency sign; its shape says which: "£" stands on a bar that reaches
 * the glyph's bottom-left corner, "€" is a C whose lower curve leaves that corner empty.
 *
 * Geometry: time step t of the recogniser's output covers input columns [t, t + 1) * in_w / T; the
 * crop was resized to used_w = min(in_w, ceil(48 w / h)) columns, so crop column x = input
 * column * w / used_w.
 */
#include "stages/ocr/ppocr.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define SIGN_MAX_STEPS 4096 /* recogniser output steps looked at (the widest input gives 300) */

static const char SIGN_POUND[] = "\xc2\xa3"; /* £ */
static const char SIGN_EURO[] = "\xe2\x82\xac"; /* € */

/* Gray value of a crop pixel. */
static int gray_at(const fr_image *im, uint32_t x, uint32_t y) {
    const uint8_t *p = im->pix + ((size_t)y * im->width + x) * im->channels;
    return im->channels == 3 ? (77 * p[0] + 150 * p[1] + 29 * p[2]) >> 8 : p[0];
}

/* Otsu's threshold of the crop's gray values: ink is at or below it. */
static int otsu(const fr_image *im) {
    double hist[256] = {0};
    for (uint32_t y = 0; y < im->height; y++)
        for (uint32_t x = 0; x < im->width; x++) hist[gray_at(im, x, y)]++;
    double total = (double)im->width * im->height, sum = 0;
    for (int i = 0; i < 256; i++) sum += i * hist[i];
    double wb = 0, sb = 0, best = -1;
    int thr = 128;
    for (int i = 0; i < 256; i++) {
        wb += hist[i];
        if (wb == 0) continue;
        double wf = total - wb;
        if (wf == 0) break;
        sb += i * hist[i];
        double mb = sb / wb, mf = (sum - sb) / wf, v = wb * wf * (mb - mf) * (mb - mf);
        if (v > best) best = v, thr = i;
    }
    return thr;
}

static bool is_digit_cls(const fr_ppocr_dict *d, int c) {
    const char *s = d->chars[c];
    return s[0] >= '0' && s[0] <= '9' && !s[1];
}

static bool is_money_sep(const fr_ppocr_dict *d, int c) {
    const char *s = d->chars[c];
    return (s[0] == '.' || s[0] == ',') && !s[1];
}

static bool is_space_cls(const fr_ppocr_dict *d, int c) { return !strcmp(d->chars[c], " "); }

/* Whether the number of emitted chars that starts at k (dir +1) or ends at k (dir -1) reads as
 * a price: figures and separators whose last separator has exactly two figures after it
 * ("1,234.50", "80,00"). An invoice or account number ("81221524") is no price, so no sign. */
static bool price_run(const fr_ppocr_dict *d, const int *cls, int n, int k, int dir) {
    int a = k, b = k; /* a space between figure groups ("1 234,56") is part of the number */
    if (dir > 0)
        while (b + 1 < n && (is_digit_cls(d, cls[b + 1]) || is_money_sep(d, cls[b + 1]) ||
                             (is_space_cls(d, cls[b + 1]) && b + 2 < n && is_digit_cls(d, cls[b + 2]))))
            b++;
    else
        while (a > 0 && (is_digit_cls(d, cls[a - 1]) || is_money_sep(d, cls[a - 1]) ||
                         (is_space_cls(d, cls[a - 1]) && a > 1 && is_digit_cls(d, cls[a - 2]))))
            a--;
    while (b > a && is_money_sep(d, cls[b])) b--; /* a sentence's full stop after it */
    int tail = 0;
    for (int j = b; j >= a; j--) {
        if (is_money_sep(d, cls[j])) return tail == 2;
        if (is_space_cls(d, cls[j])) return false; /* "1,234 56": groups, no decimals */
        tail++;
    }
    return false;
}

static bool is_ascii_letter_cls(const fr_ppocr_dict *d, int c) {
    const char *s = d->chars[c];
    return ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z') && !s[1];
}

/* A sign the dictionary has ("$", "¥", "￥", "￡") or a letter code next to the figure: the
 * figure already carries its currency. */
static bool is_known_mark(const fr_ppocr_dict *d, int c) {
    const char *s = d->chars[c];
    return !strcmp(s, "$") || !strcmp(s, "\xc2\xa5") || !strcmp(s, "\xef\xbf\xa5") ||
           !strcmp(s, "\xef\xbf\xa1");
}

/* The ink of the crop in columns [x0, x1): the widest run of columns holding ink (gaps of one
 * column bridged), its ink box; false when there is none. */
typedef struct glyph {
    int x0, x1, y0, y1; /* ink box, inclusive */
} glyph;

static bool glyph_in(const fr_image *im, const int *colink, int min_col, int x0, int x1, int thr,
                     glyph *g) {
    int best_a = -1, best_b = -1, a = -1, last = -10;
    for (int x = x0; x < x1; x++) {
        if (colink[x] < min_col) continue;
        if (x - last > 2) a = x;
        last = x;
        if (best_a < 0 || x - a > best_b - best_a) best_a = a, best_b = x;
    }
    if (best_a < 0) return false;
    g->x0 = best_a;
    g->x1 = best_b;
    g->y0 = (int)im->height;
    g->y1 = -1;
    for (int x = best_a; x <= best_b; x++)
        for (uint32_t y = 0; y < im->height; y++)
            if (gray_at(im, (uint32_t)x, y) <= thr) {
                if ((int)y < g->y0) g->y0 = (int)y;
                if ((int)y > g->y1) g->y1 = (int)y;
            }
    return g->y1 >= g->y0;
}

/* A glyph of a sign in columns [xa, xb) of the crop: ink of the line's height (0.6 of the rows
 * holding ink), 0.35 to 1.8 pitches wide, that does not run on past a bound into the character
 * there (checked on the sides where left / right say so: a sign may touch the figure it stands
 * before, whose own ink reaches into the region by less than the least width; a stretch after a
 * figure must not start inside the figure's tail). */
static bool sign_glyph(const fr_image *im, const int *colink, int min_col, int thr, int xa, int xb,
                       bool left, bool right, double pitch, int rows_ink, glyph *g) {
    int W = (int)im->width;
    if (xb - xa < 2 || !glyph_in(im, colink, min_col, xa, xb, thr, g)) return false;
    int w = g->x1 - g->x0 + 1, h = g->y1 - g->y0 + 1;
    if (w < 0.35 * pitch || w > 1.8 * pitch || h < 0.6 * rows_ink) return false;
    if (left && g->x0 == xa && xa > 0 && colink[xa - 1] >= min_col) return false;
    if (right && g->x1 == xb - 1 && xb < W && colink[xb] >= min_col) return false;
    return true;
}

/* The longest run of columns without ink in [x0, x1) (a space between words is one). */
static int blank_run(const int *colink, int min_col, int x0, int x1) {
    int best = 0, run = 0;
    for (int x = x0 < 0 ? 0 : x0; x < x1; x++) {
        run = colink[x] < min_col ? run + 1 : 0;
        if (run > best) best = run;
    }
    return best;
}

/* Which sign the glyph is: "£" when ink fills over a third of its bottom-left corner (the
 * lowest 18 % of rows, as many columns from its left edge: a quarter of a sign's width), "€"
 * otherwise. The corner is measured from the height and the left edge only, so where the glyph's
 * right end was cut (the region stops short of the next figure, which a kerned sign may touch)
 * does not change it. */
static const char *glyph_sign(const fr_image *im, const glyph *g, int thr) {
    int h = g->y1 - g->y0 + 1, side = (h * 18 + 99) / 100;
    int cx1 = FR_MIN(g->x1 + 1, g->x0 + side), cy0 = g->y1 + 1 - side;
    int ink = 0, n = 0;
    for (int y = cy0; y <= g->y1; y++)
        for (int x = g->x0; x < cx1; x++, n++) ink += gray_at(im, (uint32_t)x, (uint32_t)y) <= thr;
    return n && ink * 3 > n ? SIGN_POUND : SIGN_EURO;
}

int fr_ppocr_find_signs(const float *probs, int T, int C, const fr_ppocr_dict *d,
                        const fr_image *crop, uint32_t in_w, fr_ppocr_text *t, fr_err *err) {
    if (!probs || T <= 0 || C <= 0 || T > SIGN_MAX_STEPS) return 0;
    float *path = malloc(sizeof(float) * 2 * (size_t)T);
    if (!path) {
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr signs: out of memory");
        return -1;
    }
    fr_ppocr_best_path(probs, T, C, path);
    int rc = fr_ppocr_find_signs_path(path, T, d, crop, in_w, t, err);
    free(path);
    return rc;
}

int fr_ppocr_find_signs_path(const float *path, int T, const fr_ppocr_dict *d,
                             const fr_image *crop, uint32_t in_w, fr_ppocr_text *t, fr_err *err) {
    if (!path || T <= 0 || !d || !crop || !crop->pix || crop->width < 4 ||
        crop->height < 4 || in_w == 0 || !t || !t->text || T > SIGN_MAX_STEPS)
        return 0;
    /* the greedy path: each emitted class with its first and last step */
    int *cls = malloc(sizeof(int) * 4 * (size_t)T); /* cls, st, en, gaps: T each */
    if (!cls) {
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr signs: out of memory");
        return -1;
    }
    int *st = cls + T, *en = cls + 2 * T, *gaps = cls + 3 * T;
    int rc = 0;
    int n = 0, prev = -1;
    bool digit = false;
    for (int s = 0; s < T; s++) {
        const float fi = path[2 * s];
        const int best = fi >= 0 && fi < (float)INT32_MAX ? (int)fi : 0;
        if (best != 0 && best == prev && n) en[n - 1] = s;
        else if (best != 0 && (size_t)best < d->n) {
            cls[n] = best;
            st[n] = en[n] = s;
            digit |= is_digit_cls(d, best);
            n++;
        }
        prev = best;
    }
    uint32_t used_w = (uint32_t)ceilf(48.0f * (float)crop->width / (float)crop->height);
    if (used_w > in_w) used_w = in_w;
    if (!digit || n < 2 || used_w == 0) goto done;
    double px_step = (double)in_w / T * crop->width / used_w; /* crop columns per step */
    /* the pitch: median distance of neighbouring characters, in steps */
    int ng = 0;
    for (int k = 1; k < n; k++) gaps[ng++] = st[k] - st[k - 1];
    for (int i = 1; i < ng; i++) /* insertion sort: at most a few hundred */
        for (int j = i; j > 0 && gaps[j] < gaps[j - 1]; j--) {
            int tmp = gaps[j];
            gaps[j] = gaps[j - 1];
            gaps[j - 1] = tmp;
        }
    double pitch = gaps[ng / 2] * px_step;
    if (pitch < 2) goto done;
    int thr = otsu(crop);
    int W = (int)crop->width;
    int *colink = calloc((size_t)W, sizeof *colink);
    if (!colink) {
        fr_err_setc(err, FR_ERR_INTERNAL, "ppocr signs: out of memory");
        rc = -1;
        goto done;
    }
    int rows_ink = 0;
    for (uint32_t y = 0; y < crop->height; y++) {
        int cnt = 0;
        for (uint32_t x = 0; x < crop->width; x++)
            if (gray_at(crop, x, y) <= thr) colink[x]++, cnt++;
        rows_ink += cnt >= 2;
    }
    int min_col = 1 + (int)crop->height / 24;
    /* candidates: before the first figure of a number (after a non-figure), or after its last */
    int ins_at = -1;          /* insert the sign before emitted char ins_at (n: at the end) */
    int replace = -1;         /* or replace this emitted "f" */
    const char *sign = NULL;
    for (int k = 0; k < n && !sign; k++) {
        if (!is_digit_cls(d, cls[k])) continue;
        /* the neighbours that are not spaces (a space the recogniser emits is no character) */
        int kp = k - 1, kn = k + 1;
        while (kp >= 0 && is_space_cls(d, cls[kp])) kp--;
        while (kn < n && is_space_cls(d, cls[kn])) kn++;
        bool starts = kp < 0 || (!is_digit_cls(d, cls[kp]) && !is_money_sep(d, cls[kp]));
        bool ends = kn >= n || (!is_digit_cls(d, cls[kn]) && !is_money_sep(d, cls[kn]));
        if (starts && kp >= 0 && is_known_mark(d, cls[kp])) starts = false;
        if (ends && kn < n && is_known_mark(d, cls[kn])) ends = false;
        starts = starts && price_run(d, cls, n, k, +1);
        ends = ends && price_run(d, cls, n, k, -1);
        if (starts) {
            int kpp = kp - 1;
            while (kpp >= 0 && is_space_cls(d, cls[kpp])) kpp--;
            /* a lone "f" before a figure (the word before it a pitch and more away): the
             * recogniser's £ */
            if (kp >= 0 && !strcmp(d->chars[cls[kp]], "f") &&
                (kpp < 0 || !is_ascii_letter_cls(d, cls[kpp]) ||
                 blank_run(colink, min_col, (int)((en[kpp] + 0.5) * px_step),
                           (int)fmin(W, (st[kp] + 0.5) * px_step)) >= 0.25 * pitch)) {
                replace = kp;
                sign = SIGN_POUND;
                break;
            }
            double a = kp >= 0 ? (en[kp] + 0.5) * px_step + 0.45 * pitch : 0;
            double b = (st[k] + 0.5) * px_step - 0.45 * pitch;
            int xa = (int)fmax(0, ceil(a)), xb = (int)fmin(W, floor(b));
            glyph g;
            if (sign_glyph(crop, colink, min_col, thr, xa, xb, kp >= 0, false, pitch, rows_ink,
                           &g)) {
                sign = glyph_sign(crop, &g, thr);
                ins_at = k;
                break;
            }
        }
        /* after the figures only at the line's end or before a non-letter: a figure before a
         * word is no price ("4 October" is a date, "910 Harbor Road" an address) */
        if (ends && (kn >= n || !is_ascii_letter_cls(d, cls[kn]))) {
            double a = (en[k] + 0.5) * px_step + 0.45 * pitch;
            double b = kn < n ? (st[kn] + 0.5) * px_step - 0.45 * pitch : W;
            int xa = (int)fmax(0, ceil(a)), xb = (int)fmin(W, floor(b));
            glyph g;
            if (sign_glyph(crop, colink, min_col, thr, xa, xb, true, kn < n, pitch, rows_ink,
                           &g)) {
                sign = glyph_sign(crop, &g, thr);
                ins_at = k + 1;
            }
        }
    }
    free(colink);
    if (sign) {
        fr_buf b = {0};
        for (int k = 0; k <= n; k++) {
            if (k == ins_at) fr_buf_puts(&b, sign);
            if (k == n) break;
            fr_buf_puts(&b, k == replace ? sign : d->chars[cls[k]]);
        }
        free(t->text);
        t->text = fr_buf_cstr(&b);
        rc = 1;
    }
done:
    free(cls);
    return rc;
}

/* Whether UTF-8 s starts (at_end: ends) with an ASCII figure. */
static bool digit_edge(const char *s, bool at_end) {
    if (!s || !s[0]) return false;
    char c = at_end ? s[strlen(s) - 1] : s[0];
    return c >= '0' && c <= '9';
}

int fr_ppocr_lone_signs(const fr_ppocr_box *boxes, const fr_image *crops, fr_ppocr_text *texts,
                        int n, fr_err *err) {
    if (!boxes || !crops || !texts || n < 2) return 0;
    float skew = fr_ppocr_skew(boxes, n);
    int added = 0;
    for (int i = 0; i < n; i++) {
        const fr_image *c = &crops[i];
        if ((texts[i].text && texts[i].text[0]) || !c->pix || c->height < 6 ||
            c->width > 2 * c->height)
            continue;
        /* the figure beside it, in the same row, less than a line height away */
        float h = hypotf(boxes[i].x[3] - boxes[i].x[0], boxes[i].y[3] - boxes[i].y[0]);
        bool fig = false;
        for (int j = i - 1; j <= i + 1 && !fig; j += 2) {
            if (j < 0 || j >= n || !fr_ppocr_same_row(&boxes[i], &boxes[j], skew)) continue;
            bool left = j < i; /* the figure before the sign: "1.234,56 €" */
            float gap = left ? boxes[i].x[0] - boxes[j].x[1] : boxes[j].x[0] - boxes[i].x[1];
            fig = gap < h && digit_edge(texts[j].text, left);
        }
        if (!fig) continue;
        int W = (int)c->width, thr = otsu(c);
        int *colink = calloc((size_t)W, sizeof *colink);
        if (!colink) {
            fr_err_setc(err, FR_ERR_INTERNAL, "ppocr signs: out of memory");
            return -1;
        }
        for (uint32_t y = 0; y < c->height; y++)
            for (uint32_t x = 0; x < c->width; x++) colink[x] += gray_at(c, x, y) <= thr;
        glyph g;
        bool one = glyph_in(c, colink, 1 + (int)c->height / 24, 0, W, thr, &g) &&
                   g.y1 - g.y0 + 1 >= (int)c->height / 2 && g.x1 - g.x0 + 1 >= (int)c->height / 4;
        free(colink);
        if (!one) continue;
        free(texts[i].text);
        texts[i].text = fr_xstrdup(glyph_sign(c, &g, thr));
        if (texts[i].conf < 0.5f) texts[i].conf = 0.5f;
        added++;
    }
    return added;
}
