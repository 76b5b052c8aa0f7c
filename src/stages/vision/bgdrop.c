/* bgdrop.c — background merge units of a document image before the ViT (bgdrop.h). */
#include "stages/vision/bgdrop.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

fr_vision_bg_params fr_vision_bg_default_params(void) {
    fr_vision_bg_params p;
    memset(&p, 0, sizeof p);
    p.channels = 3;
    p.temporal = 2;
    p.patch = 14;
    p.merge = 2;
    p.eps = 0.08f;
    p.min_share = 0.3f;
    return p;
}

/* Per unit and channel: min, max, mean; plus whether every value was finite. */
typedef struct unit_stat {
    float lo[FR_VISION_BG_MAX_CHANNELS], hi[FR_VISION_BG_MAX_CHANNELS];
    float mean[FR_VISION_BG_MAX_CHANNELS];
    int64_t bin[FR_VISION_BG_MAX_CHANNELS]; /* round(mean / eps) (flat units only) */
    int flat;                               /* every channel's range within eps */
    int64_t id;                             /* unit index */
} unit_stat;

static int cmp_bin(const void *a, const void *b, int nc) {
    const unit_stat *x = a, *y = b;
    for (int c = 0; c < nc; c++)
        if (x->bin[c] != y->bin[c]) return x->bin[c] < y->bin[c] ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}
/* Sorts unit stats by bin, then index (a merge sort: qsort has no context for nc). */
static void bin_sort(unit_stat *v, int64_t n, int nc, unit_stat *tmp) {
    if (n < 2) return;
    int64_t h = n / 2;
    bin_sort(v, h, nc, tmp);
    bin_sort(v + h, n - h, nc, tmp);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = cmp_bin(&v[i], &v[j], nc) <= 0 ? v[i++] : v[j++];
    while (i < h) tmp[o++] = v[i++];
    while (j < n) tmp[o++] = v[j++];
    memcpy(v, tmp, (size_t)n * sizeof *v);
}

static int check(const float *pixels, int64_t n_patches, int64_t patch_dim, int gt, int gh,
                 int gw, const fr_vision_bg_params *p, const int64_t *kept, fr_err *err) {
    if (!pixels || !p || !kept) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "vision background: missing buffers");
        return -1;
    }
    if (p->channels < 1 || p->channels > FR_VISION_BG_MAX_CHANNELS || p->temporal < 1 ||
        p->temporal > 16 || p->patch < 1 || p->patch > 64 || p->merge < 1 || p->merge > 8 ||
        !(isfinite(p->eps) && p->eps >= 0) ||
        !(isfinite(p->min_share) && p->min_share >= 0 && p->min_share <= 1)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision background: bad parameters (C %d, T %d, P %d, merge %d, eps %g, "
                    "min_share %g)", p->channels, p->temporal, p->patch, p->merge,
                    (double)p->eps, (double)p->min_share);
        return -1;
    }
    if (gt < 1 || gh < 1 || gw < 1 || gh % p->merge || gw % p->merge ||
        n_patches > FR_VISION_BG_MAX_PATCHES || gt > FR_VISION_BG_MAX_PATCHES ||
        gh > FR_VISION_BG_MAX_PATCHES || gw > FR_VISION_BG_MAX_PATCHES ||
        (int64_t)gt * gh * gw != n_patches) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision background: grid %dx%dx%d does not give %lld patches in whole %dx%d "
                    "merge units", gt, gh, gw, (long long)n_patches, p->merge, p->merge);
        return -1;
    }
    int64_t want = (int64_t)p->channels * p->temporal * p->patch * p->patch;
    if (patch_dim != want) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "vision background: patch rows of %lld values, expected C*T*P*P = %lld",
                    (long long)patch_dim, (long long)want);
        return -1;
    }
    return 0;
}

/* One pass: per unit and channel min / max / mean. */
static void unit_stats(const float *pixels, int64_t units, int64_t patch_dim,
                       const fr_vision_bg_params *p, unit_stat *st) {
    const int nc = p->channels, mm = p->merge * p->merge;
    const int64_t per_ch = patch_dim / nc; /* T * P * P values of one channel in one row */
    for (int64_t u = 0; u < units; u++) {
        unit_stat *s = &st[u];
        s->id = u;
        s->flat = 1;
        for (int c = 0; c < nc; c++) {
            float lo = INFINITY, hi = -INFINITY;
            double sum = 0;
            int finite = 1;
            for (int r = 0; r < mm; r++) {
                const float *v = pixels + (u * mm + r) * patch_dim + c * per_ch;
                for (int64_t i = 0; i < per_ch; i++) {
                    float x = v[i];
                    lo = x < lo ? x : lo;
                    hi = x > hi ? x : hi;
                    sum += x;
                }
            }
            if (!isfinite(lo) || !isfinite(hi) || !isfinite(sum)) finite = 0; /* NaN: in sum */
            s->lo[c] = lo;
            s->hi[c] = hi;
            s->mean[c] = (float)(sum / (double)(per_ch * mm));
            if (!finite || !(hi - lo <= p->eps)) s->flat = 0;
        }
    }
}

int64_t fr_vision_bg_select(const float *pixels, int64_t n_patches, int64_t patch_dim,
                            int grid_t, int grid_h, int grid_w, const fr_vision_bg_params *p,
                            int64_t *kept, fr_vision_bg_report *rep, fr_err *err) {
    double t0 = fr_time_s();
    if (check(pixels, n_patches, patch_dim, grid_t, grid_h, grid_w, p, kept, err) < 0) return -1;
    const int nc = p->channels;
    const int64_t units = n_patches / (p->merge * p->merge);
    unit_stat *st = malloc((size_t)units * sizeof *st);
    unit_stat *flat = malloc((size_t)units * sizeof *flat);
    unit_stat *tmp = malloc((size_t)units * sizeof *tmp);
    if (!st || !flat || !tmp) {
        free(st);
        free(flat);
        free(tmp);
        fr_err_setc(err, FR_ERR_INTERNAL, "vision background: out of memory");
        return -1;
    }
    unit_stats(pixels, units, patch_dim, p, st);

    /* the background: the most populated eps-bin of flat units' means */
    int64_t nf = 0;
    const float q = p->eps > 0 ? p->eps : 1e-6f;
    for (int64_t u = 0; u < units; u++) {
        if (!st[u].flat) continue;
        for (int c = 0; c < nc; c++) {
            double b = floor((double)st[u].mean[c] / q + 0.5);
            st[u].bin[c] = b > 1e18 ? (int64_t)1e18 : b < -1e18 ? (int64_t)-1e18 : (int64_t)b;
        }
        flat[nf++] = st[u];
    }
    bin_sort(flat, nf, nc, tmp);
    int64_t best_at = -1, best_len = 0;
    for (int64_t i = 0; i < nf;) {
        int64_t j = i + 1;
        while (j < nf && !memcmp(flat[j].bin, flat[i].bin, (size_t)nc * sizeof flat[i].bin[0])) j++;
        if (j - i > best_len) {
            best_len = j - i;
            best_at = i;
        }
        i = j;
    }
    float bg[FR_VISION_BG_MAX_CHANNELS] = {0};
    if (best_at >= 0)
        for (int c = 0; c < nc; c++) {
            double s = 0;
            for (int64_t i = best_at; i < best_at + best_len; i++) s += flat[i].mean[c];
            bg[c] = (float)(s / (double)best_len);
        }

    /* droppable: every value within eps of the background */
    int64_t ndrop = 0;
    unsigned char *drop = fr_xcalloc((size_t)units, 1); /* units <= 2^20: bounded above */
    if (best_at >= 0)
        for (int64_t u = 0; u < units; u++) {
            if (!st[u].flat) continue;
            int ok = 1;
            for (int c = 0; c < nc; c++)
                if (!(st[u].lo[c] >= bg[c] - p->eps && st[u].hi[c] <= bg[c] + p->eps)) ok = 0;
            drop[u] = (unsigned char)ok;
            ndrop += ok;
        }
    float share = (float)((double)ndrop / (double)units);
    if (share < p->min_share || ndrop == 0) memset(drop, 0, (size_t)units);
    else if (ndrop == units) drop[0] = 0; /* at least one token */
    int64_t k = 0;
    for (int64_t u = 0; u < units; u++)
        if (!drop[u]) kept[k++] = u;
    if (rep) {
        memset(rep, 0, sizeof *rep);
        rep->units = units;
        rep->flat = nf;
        rep->dropped = units - k;
        rep->share = share;
        memcpy(rep->background, bg, sizeof bg);
        rep->ms = (fr_time_s() - t0) * 1e3;
    }
    free(drop);
    free(st);
    free(flat);
    free(tmp);
    return k;
}
