/* vision_plan.c — the vision tower's plan from the grids (see vision_plan.h). */
#include "backend/vision_plan.h"

#include <math.h>
#include <stdlib.h>

int64_t fr_vision_n_tokens(const fr_vision_hparams *hp, const int32_t *g, int n_images) {
    if (n_images < 1 || hp->merge < 1) return -1;
    int64_t n = 0;
    for (int i = 0; i < n_images; i++) {
        int64_t t = g[3 * i], h = g[3 * i + 1], w = g[3 * i + 2];
        if (t < 1 || h < 1 || w < 1 || h % hp->merge || w % hp->merge ||
            t > FR_VISION_MAX_PATCHES || h > FR_VISION_MAX_PATCHES || w > FR_VISION_MAX_PATCHES)
            return -1;
        n += t * h * w;
        if (n > FR_VISION_MAX_PATCHES) return -1;
    }
    return n / ((int64_t)hp->merge * hp->merge);
}

int fr_vision_rot_pos(const fr_vision_hparams *hp, const int32_t *g, int n_images,
                      int32_t *pos) {
    if (fr_vision_n_tokens(hp, g, n_images) < 0) return -1;
    int m = hp->merge;
    int64_t at = 0;
    for (int i = 0; i < n_images; i++) {
        int t = g[3 * i], h = g[3 * i + 1], w = g[3 * i + 2];
        for (int f = 0; f < t; f++)
            for (int bh = 0; bh < h / m; bh++)
                for (int bw = 0; bw < w / m; bw++)
                    for (int ih = 0; ih < m; ih++)
                        for (int iw = 0; iw < m; iw++, at++) {
                            pos[2 * at] = bh * m + ih;
                            pos[2 * at + 1] = bw * m + iw;
                        }
    }
    return 0;
}

int fr_vision_window_index(const fr_vision_hparams *hp, const int32_t *g, int n_images,
                           int32_t *win, int32_t *cu, int *n_windows) {
    if (fr_vision_n_tokens(hp, g, n_images) < 0) return -1;
    int m = hp->merge, mu = m * m;
    int W = hp->window_size > 0 ? hp->window_size / m / hp->patch : 0;
    if (hp->window_size > 0 && W < 1) return -1;
    int64_t at = 0, base = 0;
    int nw = 0;
    cu[0] = 0;
    for (int i = 0; i < n_images; i++) {
        int t = g[3 * i], gh = g[3 * i + 1] / m, gw = g[3 * i + 2] / m;
        for (int f = 0; f < t; f++) {
            int64_t fb = base + (int64_t)f * gh * gw; /* first unit of the frame */
            if (W == 0) { /* no windows: identity, one segment per frame */
                for (int64_t u = 0; u < (int64_t)gh * gw; u++) win[at++] = (int32_t)(fb + u);
                cu[nw + 1] = (int32_t)(at * mu);
                nw++;
                continue;
            }
            /* HF pads each side to whole windows (a full window more when it divides); the
             * padding's empty windows add repeated boundaries that unique_consecutive drops */
            int nwh = (gh + W - gh % W) / W, nww = (gw + W - gw % W) / W;
            for (int wh = 0; wh < nwh; wh++)
                for (int ww = 0; ww < nww; ww++) {
                    int64_t before = at;
                    for (int r = wh * W; r < (wh + 1) * W && r < gh; r++)
                        for (int c = ww * W; c < (ww + 1) * W && c < gw; c++)
                            win[at++] = (int32_t)(fb + (int64_t)r * gw + c);
                    if (at > before) cu[++nw] = (int32_t)(at * mu);
                }
        }
        base += (int64_t)t * gh * gw;
    }
    *n_windows = nw;
    return 0;
}

/* Boundaries cu[0..*nb] (in patches of the unfiltered window order) recounted over the kept
 * units: unit at window-order place i is win[i]; before[i] = kept units among places < i. */
static void recount(int32_t *cu, int *nb, const int64_t *before, int64_t n_tok, int mu) {
    int o = 0;
    cu[0] = 0;
    for (int s = 1; s <= *nb; s++) {
        int64_t place = cu[s] / mu;
        int32_t v = (int32_t)((place >= n_tok ? before[n_tok] : before[place]) * mu);
        if (v != cu[o]) cu[++o] = v;
    }
    *nb = o;
}

void fr_vision_plan_keep(const fr_vision_hparams *hp, const uint8_t *keep, int64_t n_tok,
                         int32_t *win, int32_t *cu_window, int *n_windows, int32_t *cu_full,
                         int *n_full, int64_t *n_kept) {
    if (!keep) {
        *n_kept = n_tok;
        return;
    }
    const int mu = hp->merge * hp->merge;
    int64_t *before = malloc(sizeof(int64_t) * (size_t)(n_tok + 1));
    FR_ASSERT(before);
    int64_t k = 0;
    for (int64_t i = 0; i < n_tok; i++) {
        before[i] = k;
        if (keep[win[i]]) win[k++] = win[i];
    }
    before[n_tok] = k;
    recount(cu_window, n_windows, before, n_tok, mu);
    /* the window order permutes units only inside a frame, so a frame boundary has the same
     * units before it in either order */
    recount(cu_full, n_full, before, n_tok, mu);
    *n_kept = k;
    free(before);
}

void fr_vision_rope_table(const fr_vision_hparams *hp, const int32_t *pos, const int32_t *win,
                          int64_t n, float *cs, float *sn) {
    const int half = hp->head_dim / 2, q = hp->head_dim / 4, mu = hp->merge * hp->merge;
    FR_ASSERT(q >= 1 && q <= 1024 && hp->head_dim % 4 == 0);
    /* inv_freq and the angles in float32, as torch computes them */
    float inv[1024];
    for (int j = 0; j < q; j++)
        inv[j] = 1.0f / powf(hp->rope_theta, (float)(2 * j) / (float)half);
    for (int64_t i = 0; i < n; i++) {
        int64_t src = (int64_t)win[i / mu] * mu + i % mu; /* processor-order patch */
        float row = (float)pos[2 * src], col = (float)pos[2 * src + 1];
        for (int k = 0; k < half; k++) {
            float a = k < q ? row * inv[k] : col * inv[k - q];
            cs[i * half + k] = (float)cos((double)a);
            sn[i * half + k] = (float)sin((double)a);
        }
    }
}
