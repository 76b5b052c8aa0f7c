/* whisper_asr.h — transcription with a Whisper model: the decoding loop of HF's
 * WhisperForConditionalGeneration.generate, on the CPU reference (backend/cpu/whisper.h).
 *
 * Usage:
 *   fr_whisper_model *m = fr_whisper_load(path, &err);
 *   fr_whisper_params p = fr_whisper_default_params();
 *   p.language = fr_whisper_lang_index("en");   // -1: detect
 *   p.timestamps = true;
 *   fr_whisper_result r;
 *   if (fr_whisper_transcribe(m, pcm, n, &p, &r, &err) == 0) puts(r.text);
 *   fr_whisper_result_free(&r);
 * The model is shared read-only; each call allocates its own state (thread-safe). With p.cuda
 * (fr_whisper_cuda_open) the encoder and decoder run on that CUDA device instead, the decoding
 * rules unchanged (the logits come back to the host for them).
 *
 * What it does, as HF does it (transformers' generation_whisper.py and logits_process.py):
 *   - the decoder prompt: <|startoftranscript|>, then (multilingual models) the language (given,
 *     or detected once: the argmax over the language tokens of the logits after
 *     <|startoftranscript|> on the first window), the task (<|transcribe|> / <|translate|>), then <|notimestamps|>
 *     unless timestamps are asked for;
 *   - logits processors in HF's order: begin-suppress (begin_suppress_tokens at the first
 *     generated position), suppress (suppress_tokens), then with timestamps the timestamp rules
 *     (WhisperTimeStampLogitsProcessor: <|notimestamps|> never; timestamps in pairs except
 *     before <|endoftext|>; never decreasing; the first token a timestamp no later than
 *     max_initial_timestamp_index; a timestamp forced when their total probability beats every
 *     text token);
 *   - greedy decoding, or beam search with HF's rules (2 x beams candidates per step, finished
 *     hypotheses scored by sum of log-probabilities / generated length ^ length_penalty, the
 *     early-stop heuristic of early_stopping=False), up to max_new_tokens or <|endoftext|>;
 *   - the seek loop of transformers 5, for every input: features of up to 30 s are padded to one
 *     window of 3000 frames, longer audio is long-form (timestamps forced on, features of the
 *     whole recording with one global maximum); each window is the 3000 frames from `seek`
 *     (zero-padded past the end), decoded alone from the same prompt; its tokens (the final
 *     <|endoftext|> dropped) split into segments at consecutive timestamp pairs, the tail after the
 *     last pair dropped; seek moves to the first timestamp of the last pair, or by the whole window
 *     when the tokens end in a single timestamp or hold no pair. So a window whose tokens stop at
 *     a pair before its end (also without timestamps asked: a model may emit timestamp tokens)
 *     is followed by another one from there, as HF does.
 * Not done: temperature fallback, compression-ratio / log-prob / no-speech thresholds,
 * conditioning on previous text, word timestamps.
 */
#ifndef FRUGAL_WHISPER_ASR_H
#define FRUGAL_WHISPER_ASR_H

#include <stdbool.h>
#include <stddef.h>

#include "backend/cpu/whisper.h"
#include "base/base.h"
#include "model/whisper.h"

typedef enum fr_whisper_task {
    FR_WHISPER_TASK_TRANSCRIBE = 0, /* <|transcribe|> */
    FR_WHISPER_TASK_TRANSLATE = 1,  /* <|translate|>: into English */
} fr_whisper_task;

typedef struct fr_whisper_params {
    int language;         /* language index (fr_whisper_lang_index), -1 = detect */
    fr_whisper_task task; /* transcribe (default) or translate */
    bool timestamps;      /* predict timestamp tokens (always on for audio over 30 s) */
    int num_beams;        /* 1 = greedy (default) */
    float length_penalty; /* beam search: score = sum log p / length ^ length_penalty (1.0) */
    int max_new_tokens;   /* per window; 0 = up to the decoder's positions (default 0) */
    const fr_cancel *cancel; /* checked before every decoder step, or NULL */
    struct fr_cuda_whisper *cuda; /* the model on a CUDA device (fr_whisper_cuda_open), or NULL:
                                     the CPU reference (default) */
} fr_whisper_params;

fr_whisper_params fr_whisper_default_params(void);

/* One piece of the transcript between two timestamps (or the whole window without them). */
typedef struct fr_whisper_segment {
    double start, end; /* seconds from the start of the audio */
    int *tokens;       /* the segment's tokens (timestamps included) */
    int n_tokens;
    char *text;        /* its text tokens decoded ("" for a model without a vocabulary) */
} fr_whisper_segment;

typedef struct fr_whisper_result {
    int language;            /* the language used (given or detected), -1 for an English-only model */
    int *prompt;             /* the decoder prompt of the first window */
    int n_prompt;
    int *tokens;             /* every generated token of every segment, in order, without the
                                final <|endoftext|> */
    int n_tokens;
    fr_whisper_segment *segments;
    int n_segments;
    char *text;              /* the segments' text joined */
    int n_windows;           /* windows decoded */
    double audio_s;          /* seconds of audio */
} fr_whisper_result;

void fr_whisper_result_free(fr_whisper_result *r);

/* Transcribe n samples at 16 kHz in [-1, 1]. Returns 0 (r filled; free it), or -1 with err:
 * FR_ERR_BAD_REQUEST (bad params: a language the model lacks, a task for an English-only model),
 * FR_ERR_CANCELLED / FR_ERR_TIMEOUT / FR_ERR_UNAVAILABLE when the cancel check stopped it. */
int fr_whisper_transcribe(const fr_whisper_model *m, const float *pcm, size_t n,
                          const fr_whisper_params *p, fr_whisper_result *r, fr_err *err);

/* The CUDA model of m for `device` (backend/cuda/cuda_whisper.h: bf16 weights, the decoder step
 * in CUDA graphs, beams stepped together): "cuda" or "cuda:N"; NULL, "" or "cpu" give *out =
 * NULL (the CPU reference) and 0. Returns 0, or -1 with err: FR_ERR_BAD_REQUEST (not a device
 * name), FR_ERR_UNSUPPORTED (this binary has no CUDA backend: the CPU-only frugal; frugal-cuda
 * has it), or fr_cuda_whisper_new's errors (FR_ERR_UNAVAILABLE: no such device). The handle is
 * thread-safe (calls are serialised on it); free it with fr_whisper_cuda_free after the last
 * transcription. */
int fr_whisper_cuda_open(const fr_whisper_model *m, const char *device,
                         struct fr_cuda_whisper **out, fr_err *err);
void fr_whisper_cuda_free(struct fr_cuda_whisper *cw);
/* The CUDA device index of cw, or -1 for NULL (the CPU). */
int fr_whisper_cuda_device(const struct fr_cuda_whisper *cw);
/* The same behind a VAD (stages/audio/vad.h; NULL: none): only the speech spans, joined, are
 * transcribed, and segment times are mapped back to the recording's. No span: an empty
 * transcript (r->text "", no segments, no window decoded), never Whisper's guess at silence.
 * *spans (may be NULL) gets the span count, -1 without VAD. */
struct fr_vad;
int fr_whisper_transcribe_vad(const fr_whisper_model *m, struct fr_vad *vad, const float *pcm,
                              size_t n, const fr_whisper_params *p, fr_whisper_result *r,
                              int *spans, fr_err *err);

/* ---- the pieces, for the tests */

/* The log-mel features a model wants for n samples: (n_mels, *n_frames) with n_frames 3000 when
 * n <= 480000 (or pad30), else n / 160. Uses the ggml file's filters when it has them. */
int fr_whisper_features(const fr_whisper_model *m, const float *pcm, size_t n, bool pad30,
                        float **feat, int *n_frames, fr_err *err);
/* The detected language index from a window's cross-attention cache. */
int fr_whisper_detect_language(const fr_whisper_model *m, const fr_whisper_cross *c, fr_err *err);
/* The decoder prompt for a language index (-1: none), task and timestamps into out (at most 4
 * ids); returns the count. */
int fr_whisper_prompt(const fr_whisper_model *m, int language, fr_whisper_task task,
                      bool timestamps, int *out);
/* Decode one window from a prompt: greedy or beam search per p (p->timestamps selects the
 * timestamp rules). *out gets the generated ids (malloc'd; the final <|endoftext|> included when
 * produced), *n_out their count. Returns 0 or -1 with err. */
int fr_whisper_generate(const fr_whisper_model *m, const fr_whisper_cross *c, const int *prompt,
                        int n_prompt, const fr_whisper_params *p, int **out, int *n_out,
                        fr_err *err);

#endif
