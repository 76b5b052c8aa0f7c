/* mel.h — Whisper's log-mel features, equal to HF's WhisperFeatureExtractor.
 *
 * Usage:
 *   fr_mel *mel = fr_mel_new(80, NULL, &err);            // slaney filters computed here
 *   float *feat; int n_frames;
 *   fr_mel_compute(mel, pcm, n, FR_MEL_N_SAMPLES, &feat, &n_frames, &err);  // (80, 3000)
 *   ... free(feat); fr_mel_free(mel);
 * A fr_mel is immutable after fr_mel_new and may be shared by threads.
 *
 * The computation (the extractor's, step by step): the 16 kHz samples are padded with zeros or cut
 * to n_target samples (480000 = 30 s: the extractor's default; the sample count itself for long
 * audio, its truncation=False / padding="longest"); reflect-padded by n_fft/2 = 200 on both sides
 * (torch.stft center=True); frames of 400 samples every 160, times the periodic Hann window; the
 * power spectrum of bins 0..200 by a mixed-radix FFT (400 = 4 * 4 * 5 * 5) in double precision;
 * the last frame dropped (n_target / 160 frames remain); the mel filter bank applied; log10 of
 * max(x, 1e-10); every value raised to at least (the global maximum - 8); then (x + 4) / 4.
 * The filter bank is HF's mel_filter_bank(201 bins, n_mels, 0 to 8000 Hz, 16 kHz, norm "slaney",
 * mel_scale "slaney") unless the caller gives one (whisper.cpp's ggml files carry theirs).
 */
#ifndef FRUGAL_MEL_H
#define FRUGAL_MEL_H

#include <stddef.h>

#include "base/base.h"

#define FR_MEL_SAMPLE_RATE 16000
#define FR_MEL_N_FFT 400
#define FR_MEL_N_BINS (FR_MEL_N_FFT / 2 + 1) /* 201 */
#define FR_MEL_HOP 160
#define FR_MEL_N_SAMPLES 480000 /* 30 s */
#define FR_MEL_MAX_MELS 512

typedef struct fr_mel fr_mel;

/* n_mels in 1..FR_MEL_MAX_MELS; filters (n_mels, 201) is copied, or NULL for HF's slaney bank.
 * Returns NULL with err (FR_ERR_BAD_REQUEST) for a bad n_mels or a non-finite filter value. */
fr_mel *fr_mel_new(int n_mels, const float *filters, fr_err *err);
void fr_mel_free(fr_mel *m);
int fr_mel_n_mels(const fr_mel *m);
/* The filter bank in use, (n_mels, 201). */
const float *fr_mel_filters(const fr_mel *m);

/* HF's slaney filter bank (the float64 values, rounded to float) into out (n_mels, 201). */
void fr_mel_filter_bank(int n_mels, float *out);

/* Log-mel features of n samples in [-1, 1] at 16 kHz, fitted to n_target samples first (see
 * above; n_target must be > 200). *out gets a malloc'd (n_mels, *n_frames) array (row-major,
 * frame index innermost), *n_frames = n_target / 160. Returns 0, or -1 with err
 * (FR_ERR_BAD_REQUEST for n_target <= 200, FR_ERR_TOO_LARGE past 4 hours). */
int fr_mel_compute(const fr_mel *m, const float *pcm, size_t n, size_t n_target, float **out,
                   int *n_frames, fr_err *err);

/* The complex DFT of n = FR_MEL_N_FFT points (re, im in; out_re, out_im: bins 0..n-1), by the
 * mixed-radix FFT used above. Exposed for the tests (against a direct DFT). */
void fr_mel_fft400(const fr_mel *m, const double *re, const double *im, double *out_re,
                   double *out_im);

#endif
