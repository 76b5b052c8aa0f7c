/* mel.c — see mel.h.
 *
 * The FFT is a recursive decimation-in-time mixed-radix transform over the factors of 400
 * (4, 4, 5, 5), with one table of twiddles e^{-2 pi i k / 400}; each stage combines its p
 * sub-transforms with a direct p-point DFT. About 7,000 complex multiply-adds per frame instead
 * of the direct DFT's 80,000. Everything is in double and rounded to float at the end.
 */
#include "stages/audio/mel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N FR_MEL_N_FFT
#define MAX_TARGET ((size_t)FR_MEL_SAMPLE_RATE * 3600 * 4)

struct fr_mel {
    int n_mels;       /* mel bins */
    float *filters;   /* (n_mels, 201) */
    double window[N]; /* periodic Hann */
    double tw_re[N], tw_im[N]; /* twiddles e^{-2 pi i k / N} */
    int *lo, *hi;     /* (n_mels) the bins [lo, hi) where a filter is not zero */
};

/* out[0..n) = DFT of in[0], in[s], in[2s], ... (n points); tws = N / n (twiddle stride). */
static void fft_rec(const fr_mel *M, const double *ir, const double *ii, int s, double *or_,
                    double *oi, int n, int tws) {
    const double *tw_re = M->tw_re, *tw_im = M->tw_im;
    if (n == 1) {
        or_[0] = ir[0];
        oi[0] = ii[0];
        return;
    }
    int p = n % 4 == 0 ? 4 : n % 2 == 0 ? 2 : n % 5 == 0 ? 5 : n % 3 == 0 ? 3 : n;
    int m = n / p;
    for (int j = 0; j < p; j++)
        fft_rec(M, ir + j * s, ii + j * s, s * p, or_ + j * m, oi + j * m, m, tws * p);
    double tr[8], ti[8], yr[8], yi[8];
    for (int k = 0; k < m; k++) {
        for (int j = 0; j < p; j++) { /* t_j = X_j[k] * W_n^{jk} */
            int e = (j * k * tws) % N;
            double xr = or_[j * m + k], xi = oi[j * m + k];
            tr[j] = xr * tw_re[e] - xi * tw_im[e];
            ti[j] = xr * tw_im[e] + xi * tw_re[e];
        }
        for (int q = 0; q < p; q++) { /* y_q = sum_j t_j W_p^{jq} */
            double ar = 0, ai = 0;
            for (int j = 0; j < p; j++) {
                int e = ((j * q) % p) * (N / p);
                ar += tr[j] * tw_re[e] - ti[j] * tw_im[e];
                ai += tr[j] * tw_im[e] + ti[j] * tw_re[e];
            }
            yr[q] = ar;
            yi[q] = ai;
        }
        for (int q = 0; q < p; q++) {
            or_[q * m + k] = yr[q];
            oi[q * m + k] = yi[q];
        }
    }
}

void fr_mel_fft400(const fr_mel *m, const double *re, const double *im, double *out_re,
                   double *out_im) {
    fft_rec(m, re, im, 1, out_re, out_im, N, 1);
}

/* ---- HF's mel_filter_bank (audio_utils.py), slaney scale and norm */

static double hz_to_mel(double f) {
    const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = 27.0 / log(6.4);
    return f >= min_log_hz ? min_log_mel + log(f / min_log_hz) * logstep : 3.0 * f / 200.0;
}

static double mel_to_hz(double m) {
    const double min_log_hz = 1000.0, min_log_mel = 15.0, logstep = log(6.4) / 27.0;
    return m >= min_log_mel ? min_log_hz * exp(logstep * (m - min_log_mel)) : 200.0 * m / 3.0;
}

void fr_mel_filter_bank(int n_mels, float *out) {
    double mel_min = hz_to_mel(0.0), mel_max = hz_to_mel(8000.0);
    double *ff = malloc((size_t)(n_mels + 2) * sizeof *ff);
    for (int i = 0; i < n_mels + 2; i++) { /* np.linspace(mel_min, mel_max, n_mels + 2) */
        double step = (mel_max - mel_min) / (n_mels + 1);
        double mv = i == n_mels + 1 ? mel_max : mel_min + i * step;
        ff[i] = mel_to_hz(mv);
    }
    for (int b = 0; b < FR_MEL_N_BINS; b++) {
        /* np.linspace(0, 8000, 201) */
        double f = b == FR_MEL_N_BINS - 1 ? 8000.0 : b * (8000.0 / (FR_MEL_N_BINS - 1));
        for (int i = 0; i < n_mels; i++) {
            double down = -(ff[i] - f) / (ff[i + 1] - ff[i]);
            double up = (ff[i + 2] - f) / (ff[i + 2] - ff[i + 1]);
            double v = fmax(0.0, fmin(down, up));
            double enorm = 2.0 / (ff[i + 2] - ff[i]);
            out[(size_t)i * FR_MEL_N_BINS + b] = (float)(v * enorm);
        }
    }
    free(ff);
}

fr_mel *fr_mel_new(int n_mels, const float *filters, fr_err *err) {
    if (n_mels < 1 || n_mels > FR_MEL_MAX_MELS) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "mel: %d mel bins (1..%d)", n_mels, FR_MEL_MAX_MELS);
        return NULL;
    }
    size_t nf = (size_t)n_mels * FR_MEL_N_BINS;
    if (filters)
        for (size_t i = 0; i < nf; i++)
            if (!isfinite(filters[i])) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "mel: the filter bank holds a non-finite value");
                return NULL;
            }
    fr_mel *m = fr_xcalloc(1, sizeof *m);
    m->n_mels = n_mels;
    m->filters = fr_xmalloc(nf * sizeof(float));
    if (filters) memcpy(m->filters, filters, nf * sizeof(float));
    else fr_mel_filter_bank(n_mels, m->filters);
    m->lo = fr_xmalloc((size_t)n_mels * sizeof(int));
    m->hi = fr_xmalloc((size_t)n_mels * sizeof(int));
    for (int b = 0; b < n_mels; b++) { /* zero weights add exact zeros: skipping them is exact */
        const float *w = m->filters + (size_t)b * FR_MEL_N_BINS;
        int lo = 0, hi = FR_MEL_N_BINS;
        while (lo < hi && w[lo] == 0.0f) lo++;
        while (hi > lo && w[hi - 1] == 0.0f) hi--;
        m->lo[b] = lo;
        m->hi[b] = hi;
    }
    for (int i = 0; i < N; i++) {
        m->window[i] = 0.5 - 0.5 * cos(2 * M_PI * i / N);
        m->tw_re[i] = cos(2 * M_PI * i / N);
        m->tw_im[i] = -sin(2 * M_PI * i / N);
    }
    return m;
}

void fr_mel_free(fr_mel *m) {
    if (!m) return;
    free(m->filters);
    free(m->lo);
    free(m->hi);
    free(m);
}

int fr_mel_n_mels(const fr_mel *m) { return m->n_mels; }
const float *fr_mel_filters(const fr_mel *m) { return m->filters; }

int fr_mel_compute(const fr_mel *m, const float *pcm, size_t n, size_t n_target, float **out,
                   int *n_frames, fr_err *err) {
    *out = NULL;
    *n_frames = 0;
    if (n_target <= N / 2) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "mel: %zu samples: at least %d needed", n_target,
                    N / 2 + 1);
        return -1;
    }
    if (n_target > MAX_TARGET) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "mel: %zu samples is over 4 hours", n_target);
        return -1;
    }
    /* the fitted signal, reflect-padded: x[-i] = x[i], x[L-1+i] = x[L-1-i] */
    size_t L = n_target, P = N / 2;
    double *x = fr_xmalloc((L + 2 * P) * sizeof *x);
    for (size_t i = 0; i < L; i++) x[P + i] = i < n ? pcm[i] : 0.0;
    for (size_t i = 1; i <= P; i++) {
        x[P - i] = x[P + i];
        x[P + L - 1 + i] = x[P + L - 1 - i];
    }
    int T = (int)(L / FR_MEL_HOP); /* 1 + L/hop frames, the last dropped */
    int M = m->n_mels;
    float *o = malloc((size_t)M * (size_t)T * sizeof *o);
    double *lm = malloc((size_t)M * (size_t)T * sizeof *lm);
    if (!o || !lm) {
        free(x);
        free(o);
        free(lm);
        fr_err_setc(err, FR_ERR_TOO_LARGE, "mel: cannot allocate the features");
        return -1;
    }
    double re[N], im[N], fr_[N], fi[N], pw[FR_MEL_N_BINS];
    double mx = -INFINITY;
    for (int t = 0; t < T; t++) {
        const double *f = x + (size_t)t * FR_MEL_HOP;
        for (int i = 0; i < N; i++) {
            re[i] = f[i] * m->window[i];
            im[i] = 0;
        }
        fft_rec(m, re, im, 1, fr_, fi, N, 1);
        for (int k = 0; k < FR_MEL_N_BINS; k++) pw[k] = fr_[k] * fr_[k] + fi[k] * fi[k];
        for (int b = 0; b < M; b++) {
            const float *w = m->filters + (size_t)b * FR_MEL_N_BINS;
            double s = 0;
            for (int k = m->lo[b]; k < m->hi[b]; k++) s += (double)w[k] * pw[k];
            double v = log10(s > 1e-10 ? s : 1e-10);
            lm[(size_t)b * T + t] = v;
            if (v > mx) mx = v;
        }
    }
    double floor_ = mx - 8.0;
    for (size_t i = 0; i < (size_t)M * (size_t)T; i++) {
        double v = lm[i] > floor_ ? lm[i] : floor_;
        o[i] = (float)((v + 4.0) / 4.0);
    }
    free(x);
    free(lm);
    *out = o;
    *n_frames = T;
    return 0;
}
