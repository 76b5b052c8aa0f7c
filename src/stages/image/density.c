/* density.c — text-density estimate; see density.h for the method. */
#include "stages/image/density.h"

#include <stdlib.h>
#include <string.h>

#define TILE 16
#define TARGET_PIXELS 150000u

typedef struct dimg {
    uint8_t *p; /* gray pixels */
    uint32_t w; /* width */
    uint32_t h; /* height */
} dimg;

/* Integer box downscale of a gray or RGB image to gray. */
static dimg downscale(const fr_image *img) {
    uint64_t np = (uint64_t)img->width * img->height;
    uint32_t f = 1;
    while (np / ((uint64_t)f * f) > TARGET_PIXELS) f++;
    dimg d;
    d.w = FR_MAX(1u, img->width / f);
    d.h = FR_MAX(1u, img->height / f);
    d.p = fr_xmalloc((size_t)d.w * d.h);
    uint32_t c = img->channels;
    uint32_t *acc = fr_xcalloc(d.w, sizeof *acc);
    for (uint32_t oy = 0; oy < d.h; oy++) {
        memset(acc, 0, d.w * sizeof *acc);
        for (uint32_t dy = 0; dy < f; dy++) {
            const uint8_t *row = img->pix + ((size_t)(oy * f + dy) * img->width) * c;
            if (c == 1) {
                for (uint32_t ox = 0; ox < d.w; ox++) {
                    const uint8_t *s = row + (size_t)ox * f;
                    uint32_t a = 0;
                    for (uint32_t dx = 0; dx < f; dx++) a += s[dx];
                    acc[ox] += a;
                }
            } else {
                for (uint32_t ox = 0; ox < d.w; ox++) {
                    const uint8_t *s = row + (size_t)ox * f * 3;
                    uint32_t a = 0;
                    for (uint32_t dx = 0; dx < f; dx++)
                        a += (77u * s[3 * dx] + 150u * s[3 * dx + 1] + 29u * s[3 * dx + 2]) >> 8;
                    acc[ox] += a;
                }
            }
        }
        for (uint32_t ox = 0; ox < d.w; ox++) d.p[(size_t)oy * d.w + ox] = (uint8_t)(acc[ox] / (f * f));
    }
    free(acc);
    return d;
}

typedef struct dres {
    float score, text, pict, paper;
    int level;
} dres;

static dres score_img(const dimg *d, bool invert) {
    dres r = {0, 0, 0, 0, 0};
    size_t n = (size_t)d->w * d->h;
    uint32_t hist[256] = {0};
    for (size_t i = 0; i < n; i++) hist[invert ? 255 - d->p[i] : d->p[i]]++;
    /* paper: the most populated 16-level window in the upper half (smoothed mode) */
    uint32_t best = 0;
    int lvl = 255;
    for (int v = 100; v < 256; v++) {
        uint32_t s = 0;
        for (int k = v - 8; k <= v + 8; k++)
            if (k >= 0 && k < 256) s += hist[k];
        if (s >= best) best = s, lvl = v;
    }
    /* paper spread: half-width where the histogram falls below a quarter of the mode (noise) */
    uint32_t peak = hist[lvl];
    int lo = lvl, hi2 = lvl;
    while (lo > 0 && hist[lo - 1] * 4 >= peak) lo--;
    while (hi2 < 255 && hist[hi2 + 1] * 4 >= peak) hi2++;
    int spread = FR_MAX(lvl - lo, hi2 - lvl);
    int tol = FR_MIN(60, FR_MAX(24, 2 * spread)), ink_thr = lvl - FR_MAX(60, tol + 30);
    uint64_t paper = 0;
    for (int v = lvl - tol; v <= lvl + tol; v++)
        if (v >= 0 && v < 256) paper += hist[v];
    r.paper = (float)paper / (float)n;
    r.level = lvl;
    if (ink_thr < 20) return r; /* no light background at all */
    uint32_t tx = d->w / TILE, ty = d->h / TILE;
    if (!tx || !ty) return r;
    uint32_t ntext = 0, npict = 0;
    for (uint32_t by = 0; by < ty; by++)
        for (uint32_t bx = 0; bx < tx; bx++) {
            uint32_t bg = 0, ink = 0, multi_rows = 0;
            for (uint32_t y = 0; y < TILE; y++) {
                const uint8_t *row = d->p + (size_t)(by * TILE + y) * d->w + bx * TILE;
                uint32_t runs = 0;
                bool prev = false;
                for (uint32_t x = 0; x < TILE; x++) {
                    int v = invert ? 255 - row[x] : row[x];
                    bool is_ink = v < ink_thr;
                    ink += is_ink;
                    bg += v >= lvl - tol && v <= lvl + tol;
                    if (is_ink && !prev) runs++;
                    prev = is_ink;
                }
                multi_rows += runs >= 2;
            }
            const uint32_t A = TILE * TILE;
            if (bg >= A * 97 / 100 && ink <= A / 100) continue; /* blank */
            if (bg >= A * 45 / 100 && ink >= A / 50 && ink <= A / 2 && multi_rows >= TILE / 4)
                ntext++;
            else npict++;
        }
    uint32_t ntiles = tx * ty;
    r.text = (float)ntext / (float)ntiles;
    r.pict = (float)npict / (float)ntiles;
    if (ntext + npict == 0) return r;
    float s = (float)ntext / (float)(ntext + npict);
    float occupied = (float)(ntext + npict) / (float)ntiles;
    if (occupied < 0.02f) s *= occupied / 0.02f;
    float pf = r.paper < 0.4f ? r.paper / 0.4f : 1.0f; /* documents are mostly background */
    r.score = s * pf;
    return r;
}

void fr_density_measure(const fr_image *img, fr_density *out) {
    double t0 = fr_time_s();
    memset(out, 0, sizeof *out);
    if (!img || !img->pix || !img->width || !img->height) return;
    dimg d = downscale(img);
    dres a = score_img(&d, false), b = score_img(&d, true);
    bool inv = b.score > a.score;
    dres r = inv ? b : a;
    free(d.p);
    out->score = r.score;
    out->text_tiles = r.text;
    out->picture_tiles = r.pict;
    out->paper = r.paper;
    out->paper_level = inv ? 255 - r.level : r.level;
    out->inverted = inv;
    out->ms = (fr_time_s() - t0) * 1e3;
}

bool fr_density_route_ocr(const fr_density *d, float threshold) {
    if (threshold <= 0) threshold = (float)FR_DENSITY_DEFAULT_THRESHOLD;
    return d->score >= threshold;
}
