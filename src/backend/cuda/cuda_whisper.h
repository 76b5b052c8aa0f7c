/* cuda_whisper.h — the Whisper encoder and decoder on one CUDA device: the same functions as the
 * CPU reference (backend/cpu/whisper.h), with bf16 weights, bf16 matrix inputs, fp32
 * accumulation (cuBLAS), an fp32 residual stream, fp32 LayerNorm statistics and fp32 softmax;
 * the caches (self-attention K/V and cross-attention K/V) are bf16.
 *
 *   fr_cuda_whisper *cw = fr_cuda_whisper_new(model, 0, &err);        // uploads the weights
 *   fr_cuda_whisper_cross *x[2];
 *   fr_cuda_whisper_encode(cw, mel, 2, enc_or_NULL, x, &err);          // 2 windows at once
 *   fr_cuda_whisper_kv *kv = fr_cuda_whisper_kv_new(cw, &err);
 *   fr_cuda_whisper_decode(cw, x[0], kv, prompt, n, logits, false, &err); // as the CPU's
 *   // or one step of many sequences (other requests, beams) at once, argmax on the device:
 *   fr_cuda_whisper_step(cw, n_seq, kvs, xs, tokens, logits_or_NULL, next_or_NULL, &err);
 *   fr_cuda_whisper_kv_free(cw, kv); fr_cuda_whisper_cross_free(cw, x[0]); ...
 *   fr_cuda_whisper_free(cw);
 *
 * Continuous batching: a step takes any set of sequences, each with its own cache, length and
 * cross-attention cache (its own audio); sequences join and leave between steps. The step
 * (embedding, every layer, the final LayerNorm, the logits and the argmax) runs as one CUDA graph
 * per row bucket (1, 2, 4, ... 64 rows, padded with dummy rows), captured on first use
 * (thread-local capture mode) and replayed with new inputs (token, position, cache pointers are
 * read from device buffers that the graph does not own).
 *
 * Across requests: calls from several threads are combined. Concurrent fr_cuda_whisper_decode /
 * fr_cuda_whisper_step calls (each its own sequences) are run as one step of all their rows
 * (up to 64), concurrent fr_cuda_whisper_encode calls as one encoder batch (up to 8 windows):
 * the first caller to find no batch running takes everything queued, runs it and wakes the
 * others (no scheduler thread; a lone caller runs at once). fr_cuda_whisper_get_stats tells how
 * many calls went into how many batches.
 *
 * Thread safety: any thread may call; the device work is serialised on the handle's mutex (one
 * stream, one cuBLAS handle, one set of activation buffers); the model on the host is read only
 * at fr_cuda_whisper_new and may be freed after it. Caches belong to the handle that made them,
 * and a cache to one thread at a time; free every cache before the handle. Nothing calls a
 * device-wide synchronisation; caches are allocated stream-ordered from the handle's pool.
 *
 * Checked by gpu-whisper (tests/gpu/whisper_check.c) against the CPU reference.
 */
#ifndef FRUGAL_CUDA_WHISPER_H
#define FRUGAL_CUDA_WHISPER_H

#ifdef __cplusplus
extern "C" {
#endif

#include <stdbool.h>

#include "base/base.h"
#include "model/whisper.h"

#define FR_CUDA_WHISPER_MAX_ROWS 64 /* rows of one graph step (larger calls are cut) */
#define FR_CUDA_WHISPER_MAX_BATCH 64 /* windows of one fr_cuda_whisper_encode call */

typedef struct fr_cuda_whisper fr_cuda_whisper;
typedef struct fr_cuda_whisper_cross fr_cuda_whisper_cross; /* one window's cross K/V (device) */
typedef struct fr_cuda_whisper_kv {
    void *d; /* device bf16 (n_text_layer, 2, n_text_ctx, n_text_state): K then V per layer */
    int n;   /* positions filled */
    int cap; /* n_text_ctx */
} fr_cuda_whisper_kv;

/* What the handle ran (counters since creation). */
typedef struct fr_cuda_whisper_stats {
    long enc_calls;   /* fr_cuda_whisper_encode calls */
    long encodes;     /* encoder batches run (calls of concurrent threads combined) */
    long enc_windows; /* windows in them */
    long step_calls;  /* decode / step calls (a prompt over 64 tokens counts per chunk) */
    long steps;       /* decoder steps run (calls of concurrent threads combined) */
    long step_rows;   /* rows in them, without the bucket's padding */
} fr_cuda_whisper_stats;

/* Upload m to `device`. Returns NULL with err: head size above 128 (FR_ERR_UNSUPPORTED), a
 * device that does not exist (FR_ERR_UNAVAILABLE), out of device memory (FR_ERR_TOO_LARGE). */
fr_cuda_whisper *fr_cuda_whisper_new(const fr_whisper_model *m, int device, fr_err *err);
void fr_cuda_whisper_free(fr_cuda_whisper *cw);
void fr_cuda_whisper_get_stats(fr_cuda_whisper *cw, fr_cuda_whisper_stats *out);
/* The device index the handle runs on. */
int fr_cuda_whisper_device(const fr_cuda_whisper *cw);
/* Graphs on (default) or off (every step launched eagerly: the check's comparison). */
void fr_cuda_whisper_set_graphs(fr_cuda_whisper *cw, bool on);

/* Encode n_batch windows: mel host f32 (n_batch, n_mels, 2 * n_audio_ctx). enc (host f32
 * (n_batch, n_audio_ctx, n_audio_state)) gets the encoder output when not NULL; x (when not
 * NULL) gets n_batch new cross-attention caches (free each with fr_cuda_whisper_cross_free).
 * Returns 0 or -1 with err (n_batch out of 1..FR_CUDA_WHISPER_MAX_BATCH: FR_ERR_BAD_REQUEST;
 * out of device memory: FR_ERR_TOO_LARGE). */
int fr_cuda_whisper_encode(fr_cuda_whisper *cw, const float *mel, int n_batch, float *enc,
                           fr_cuda_whisper_cross **x, fr_err *err);
/* A cross-attention cache from an encoder output computed elsewhere: enc host f32
 * (n_audio_ctx, n_audio_state). NULL with err (FR_ERR_TOO_LARGE). */
fr_cuda_whisper_cross *fr_cuda_whisper_cross_new(fr_cuda_whisper *cw, const float *enc,
                                                 fr_err *err);
void fr_cuda_whisper_cross_free(fr_cuda_whisper *cw, fr_cuda_whisper_cross *x);

/* The self-attention cache of one sequence (empty). NULL with err (FR_ERR_TOO_LARGE). */
fr_cuda_whisper_kv *fr_cuda_whisper_kv_new(fr_cuda_whisper *cw, fr_err *err);
void fr_cuda_whisper_kv_free(fr_cuda_whisper *cw, fr_cuda_whisper_kv *kv);
/* dst = src's first src->n positions. */
void fr_cuda_whisper_kv_copy(fr_cuda_whisper *cw, fr_cuda_whisper_kv *dst,
                             const fr_cuda_whisper_kv *src);

/* fr_whisper_decode's contract (backend/cpu/whisper.h) for one sequence: append n tokens and
 * write the logits of the last token (n_vocab floats) or, when all, of each token (n, n_vocab).
 * Returns 0, or -1 with err (FR_ERR_BAD_REQUEST: positions past n_text_ctx, a token out of
 * range). */
int fr_cuda_whisper_decode(fr_cuda_whisper *cw, const fr_cuda_whisper_cross *x,
                           fr_cuda_whisper_kv *kv, const int *tokens, int n, float *logits,
                           bool all, fr_err *err);

/* One decoder step of n_seq sequences (continuous batching): sequence i appends tokens[i] to
 * kv[i] (its cross cache x[i]); logits (host (n_seq, n_vocab)) and next (host n_seq: the argmax
 * of each row's logits, computed on the device) are written when not NULL. The sequences must be
 * distinct caches. Returns 0 or -1 with err (FR_ERR_BAD_REQUEST: n_seq out of
 * 1..FR_CUDA_WHISPER_MAX_ROWS, a full cache, a token out of range, a cache given twice). */
int fr_cuda_whisper_step(fr_cuda_whisper *cw, int n_seq, fr_cuda_whisper_kv *const *kv,
                         const fr_cuda_whisper_cross *const *x, const int *tokens, float *logits,
                         int *next, fr_err *err);

#ifdef __cplusplus
}
#endif
#endif
