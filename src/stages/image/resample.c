/* resample.c — PIL-equal bicubic resizing (see resample.h for the algorithm).
 *
 * A weight table per axis: for output position i, the first source index lo[i], the window
 * length n[i] and ksize integer weights (only the first n[i] used). The horizontal pass reads
 * rows [row0, row1) of the source — the rows the vertical windows touch — and writes an 8-bit
 * image of out_w x (row1 - row0); the vertical pass reads that image with its windows shifted
 * by row0. 8-bit intermediate, integer accumulation and clipping are what Pillow does for 8-bit
 * images, so the two agree bit for bit.
 */
#include "stages/image/resample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RS_PRECISION_BITS 22 /* 32 - 8 bits of sample - 2 bits of headroom */

/* The cubic convolution kernel with a = -0.5 (Keys), support 2. */
static double rs_bicubic(double x) {
    const double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
    return 0.0;
}

/* Weights of one axis. */
typedef struct rs_axis {
    int ksize;    /* weights per output position (the widest window) */
    int *lo;      /* (n_out) first source index of each window */
    int *n;       /* (n_out) window length */
    int32_t *k;   /* (n_out, ksize) fixed-point weights */
} rs_axis;

static void rs_axis_free(rs_axis *a) {
    free(a->lo);
    free(a->n);
    free(a->k);
    memset(a, 0, sizeof *a);
}

/* Weights for resizing n_in samples to n_out; 0, or -1 when memory runs out. */
static int rs_axis_make(int n_in, int n_out, rs_axis *a) {
    memset(a, 0, sizeof *a);
    double scale = (double)n_in / (double)n_out;
    double fscale = scale < 1.0 ? 1.0 : scale;
    double support = 2.0 * fscale;
    int ksize = (int)ceil(support) * 2 + 1;
    a->ksize = ksize;
    a->lo = malloc((size_t)n_out * sizeof(int));
    a->n = malloc((size_t)n_out * sizeof(int));
    a->k = malloc((size_t)n_out * (size_t)ksize * sizeof(int32_t));
    double *w = malloc((size_t)ksize * sizeof(double));
    if (!a->lo || !a->n || !a->k || !w) {
        free(w);
        rs_axis_free(a);
        return -1;
    }
    double inv = 1.0 / fscale;
    for (int i = 0; i < n_out; i++) {
        double centre = ((double)i + 0.5) * scale;
        int lo = (int)(centre - support + 0.5);
        int hi = (int)(centre + support + 0.5);
        if (lo < 0) lo = 0;
        if (hi > n_in) hi = n_in;
        int n = hi - lo;
        double sum = 0.0;
        for (int j = 0; j < n; j++) {
            w[j] = rs_bicubic(((double)(j + lo) - centre + 0.5) * inv);
            sum += w[j];
        }
        int32_t *k = a->k + (size_t)i * (size_t)ksize;
        for (int j = 0; j < n; j++) {
            double v = sum != 0.0 ? w[j] / sum : w[j];
            double f = v * (double)(1 << RS_PRECISION_BITS);
            k[j] = (int32_t)(v < 0.0 ? -0.5 + f : 0.5 + f);
        }
        for (int j = n; j < ksize; j++) k[j] = 0;
        a->lo[i] = lo;
        a->n[i] = n;
    }
    free(w);
    return 0;
}

static inline uint8_t rs_clip8(int64_t acc) {
    int64_t v = acc >> RS_PRECISION_BITS; /* arithmetic: floor for negative sums */
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

/* rows [row0, row0 + n_rows) of src (w_in wide) -> dst (w_out wide, n_rows high). */
static void rs_horizontal(const uint8_t *src, uint32_t w_in, uint32_t row0, uint32_t n_rows,
                          uint32_t c, const rs_axis *ax, uint32_t w_out, uint8_t *dst) {
    for (uint32_t y = 0; y < n_rows; y++) {
        const uint8_t *row = src + ((size_t)(row0 + y) * w_in) * c;
        uint8_t *out = dst + (size_t)y * w_out * c;
        for (uint32_t x = 0; x < w_out; x++) {
            const int32_t *k = ax->k + (size_t)x * (size_t)ax->ksize;
            const uint8_t *s = row + (size_t)ax->lo[x] * c;
            int n = ax->n[x];
            for (uint32_t ch = 0; ch < c; ch++) {
                int64_t acc = 1 << (RS_PRECISION_BITS - 1);
                for (int j = 0; j < n; j++) acc += (int64_t)s[(size_t)j * c + ch] * k[j];
                out[(size_t)x * c + ch] = rs_clip8(acc);
            }
        }
    }
}

/* src (w wide; the windows of ax shifted by -row0) -> dst (w wide, h_out high). */
static void rs_vertical(const uint8_t *src, uint32_t w, uint32_t row0, uint32_t c,
                        const rs_axis *ax, uint32_t h_out, uint8_t *dst) {
    size_t stride = (size_t)w * c;
    for (uint32_t y = 0; y < h_out; y++) {
        const int32_t *k = ax->k + (size_t)y * (size_t)ax->ksize;
        const uint8_t *s0 = src + (size_t)(ax->lo[y] - (int)row0) * stride;
        int n = ax->n[y];
        uint8_t *out = dst + (size_t)y * stride;
        for (size_t i = 0; i < stride; i++) {
            int64_t acc = 1 << (RS_PRECISION_BITS - 1);
            for (int j = 0; j < n; j++) acc += (int64_t)s0[(size_t)j * stride + i] * k[j];
            out[i] = rs_clip8(acc);
        }
    }
}

int fr_img_resize_bicubic(const fr_image *in, uint32_t out_w, uint32_t out_h, fr_image *out,
                          fr_err *err) {
    memset(out, 0, sizeof *out);
    if (!in || !in->pix || in->width == 0 || in->height == 0 ||
        (in->channels != 1 && in->channels != 3)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "resize: an empty image or one of %u channels (1 or 3)",
                    in ? in->channels : 0);
        return -1;
    }
    if (out_w == 0 || out_h == 0 || out_w > FR_RESAMPLE_MAX_SIDE || out_h > FR_RESAMPLE_MAX_SIDE ||
        in->width > FR_RESAMPLE_MAX_SIDE || in->height > FR_RESAMPLE_MAX_SIDE) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "resize: %ux%u to %ux%u (sides 1..%u)", in->width,
                    in->height, out_w, out_h, FR_RESAMPLE_MAX_SIDE);
        return -1;
    }
    uint32_t c = in->channels;
    bool need_h = out_w != in->width, need_v = out_h != in->height;
    rs_axis ah = {0}, av = {0};
    uint8_t *tmp = NULL;
    uint8_t *res = NULL;
    if ((need_h && rs_axis_make((int)in->width, (int)out_w, &ah)) ||
        (need_v && rs_axis_make((int)in->height, (int)out_h, &av)))
        goto oom;
    /* the source rows the vertical pass reads */
    uint32_t row0 = 0, row1 = in->height;
    if (need_v) {
        row0 = (uint32_t)av.lo[0];
        row1 = (uint32_t)(av.lo[out_h - 1] + av.n[out_h - 1]);
    }
    const uint8_t *cur = in->pix;
    uint32_t cur_w = in->width, cur_row0 = 0;
    if (need_h) {
        tmp = malloc((size_t)out_w * (row1 - row0) * c);
        if (!tmp) goto oom;
        rs_horizontal(in->pix, in->width, row0, row1 - row0, c, &ah, out_w, tmp);
        cur = tmp;
        cur_w = out_w;
        cur_row0 = row0;
    }
    res = malloc((size_t)out_w * out_h * c);
    if (!res) goto oom;
    if (need_v) rs_vertical(cur, cur_w, cur_row0, c, &av, out_h, res);
    else memcpy(res, cur, (size_t)out_w * out_h * c);
    free(tmp);
    rs_axis_free(&ah);
    rs_axis_free(&av);
    out->pix = res;
    out->width = out_w;
    out->height = out_h;
    out->channels = c;
    return 0;
oom:
    free(tmp);
    free(res);
    rs_axis_free(&ah);
    rs_axis_free(&av);
    fr_err_setc(err, FR_ERR_INTERNAL, "resize: out of memory for %ux%u", out_w, out_h);
    return -1;
}
