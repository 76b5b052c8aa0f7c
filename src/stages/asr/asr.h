/* asr.h — speech recognition with pocketsphinx (CMU Sphinx US English acoustic model).
 *
 * Design: a fr_asr is one pocketsphinx decoder (acoustic model + dictionary + one language
 * model), initialised once and reused for every utterance; it is NOT safe to share between
 * threads. Servers use a fr_asr_pool: up to n decoders, created lazily the first time a worker
 * needs one (so a server that never sees audio never loads the model), handed out under a mutex
 * and returned after each request, so each decoder is used by one thread at a time.
 * Initialisation (pocketsphinx and sphinxbase keep a little global logging state) is serialised
 * by a process-wide mutex; decoding runs in parallel.
 *
 * Bounds (fr_asr_limits): audio is fed to pocketsphinx in blocks of 4096 samples (0.26 s); the
 * time limit and the cancel check (client gone, shutdown) are checked between blocks and while
 * waiting for a pooled decoder, so a stopped call returns within one block's work.
 *
 * N-best rescoring: every result carries the n-best list of the lattice (res->hyps). When a
 * rescoring model is loaded (fr_asr_config.rescore_model; by default the shipped BANKING77 intent
 * model), res->text is the hypothesis that maximises the joint ASR + intent score (rescore.h),
 * chosen inside the call, so it counts against the same time limit. A pool loads the model once
 * and shares it (read-only) between its decoders.
 *
 * Voice-activity detection: when the Silero VAD model is installed (<data root>/models/vad/, see
 * stages/audio/vad.h) each decoder runs it first and decodes only the speech spans it finds,
 * joined (leading and trailing silence and pauses longer than the VAD's min_silence_ms + twice
 * its pad are not decoded); audio with no span gives an empty transcript. The model missing means
 * no VAD (one log line says so); fr_asr_config.vad_model "" turns it off, and so does
 * FRUGAL_NO_VAD=1 in the environment for the default (vad_model NULL).
 *
 * Language model: FR_ASR_LM_DOMAIN (default) is the project's banking trigram built by
 * `frugal build-lm` (<data root>/models/asr/banking.lm.bin, or $FRUGAL_ASR_LM); FR_ASR_LM_GENERIC is the
 * Debian package's general US English model. cfg->lm overrides both with any ARPA / DMP file.
 */
#ifndef FRUGAL_ASR_H
#define FRUGAL_ASR_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/audio/audio.h"
#include "stages/audio/vad.h"

#define FR_ASR_RATE 16000 /* the acoustic model's sample rate */
#define FR_ASR_MODEL_DIR "/usr/share/pocketsphinx/model/en-us"
#define FR_ASR_DOMAIN_LM "models/asr/banking.lm.bin" /* under the data root (fr_data_path) */
#define FR_ASR_RESCORE_MODEL "models/intent-banking77.bin" /* default rescoring model, ditto */

typedef enum fr_asr_lm_kind {
    FR_ASR_LM_DOMAIN = 0,  /* project-built banking LM (default) */
    FR_ASR_LM_GENERIC = 1, /* pocketsphinx-en-us general LM */
} fr_asr_lm_kind;

#define FR_ASR_NBEST_DEFAULT 30 /* distinct hypotheses kept per utterance by default */
#define FR_ASR_NBEST_MAX 64     /* cap on fr_asr_config.nbest */
#define FR_ASR_EXTRA_ARGS_MAX 16 /* cap on the option/value pairs of fr_asr_config.extra_args */

/* Decoder configuration; zero-initialise and set what you need. */
typedef struct fr_asr_config {
    const char *hmm;        /* acoustic model dir; NULL = FR_ASR_MODEL_DIR "/en-us" */
    const char *dict;       /* pronunciation dictionary; NULL = cmudict-en-us.dict there */
    const char *lm;         /* LM file (ARPA or DMP); NULL = chosen by lm_kind */
    fr_asr_lm_kind lm_kind; /* default LM when lm is NULL */
    int beam_fast;          /* 1 = narrower beams (faster, slightly less accurate) */
    int nbest;              /* distinct hypotheses per result (res->hyps): 0 = FR_ASR_NBEST_DEFAULT,
                               1 = the best only; capped at FR_ASR_NBEST_MAX */
    const char *extra_args; /* extra pocketsphinx options "-opt value ..." applied after the
                               defaults (measurements and tuning); NULL = none */
    const char *rescore_model; /* intent model that rescores the n-best list (rescore.h):
                                  NULL = FR_ASR_RESCORE_MODEL under the data root when it exists
                                  (else no rescoring), "" = no rescoring */
    double rescore_weight;     /* ASR-score weight of the rescoring; 0 = FR_ASR_RESCORE_WEIGHT */
    int no_utt_cmn;            /* 1 = pocketsphinx's running cepstral mean instead of the
                                  utterance's own (see asr.c; for measurements) */
    const char *vad_model;     /* Silero VAD in front of the decoder: NULL = FR_VAD_MODEL under
                                  the data root when it exists (else none), "" = off */
} fr_asr_config;

/* Bounds of one call (a zeroed struct or NULL: none). */
typedef struct fr_asr_limits {
    double time_limit_s;     /* wall-clock limit of the call (pool wait included); 0 = none */
    const fr_cancel *cancel; /* external cancel check (base.h), or NULL */
} fr_asr_limits;

#define FR_ASR_STOPPED (-2) /* return value: cut short, res->stopped says why */

/* One hypothesis of an utterance's n-best list. */
typedef struct fr_asr_hyp {
    char *text;   /* lower-case words separated by spaces ("" for silence) */
    double score; /* path score (acoustic + weighted LM) in nats relative to the best path: <= 0 */
} fr_asr_hyp;

/* One recognition result. Free with fr_asr_result_free. */
typedef struct fr_asr_result {
    char *text;        /* transcript: lower-case words separated by spaces ("" if nothing heard) */
    double confidence; /* posterior probability of the transcript in [0, 1]; -1 if unavailable */
    double audio_s;    /* seconds of audio recognised */
    double decode_s;   /* seconds spent decoding/resampling the container (0 for raw PCM) */
    double proc_s;     /* seconds spent in recognition */
    double rtf;        /* real-time factor: (decode_s + proc_s) / audio_s; < 1 is faster than real time */
    fr_audio_info src; /* source header (zeroed for raw PCM input) */
    fr_cancel_reason stopped; /* why the call was cut short (FR_ASR_STOPPED), else NONE */
    fr_asr_hyp *hyps;  /* n-best list in ASR order, distinct texts; hyps[0] is the 1-best */
    int n_hyps;        /* its length (>= 1 on success) */
    int chosen;        /* the hypothesis in text: 0 = the 1-best, > 0 = picked by the intent
                          rescoring (text is then hyps[chosen].text) */
    int vad;           /* 1: the VAD ran and only its spans were decoded */
    int vad_spans;     /* speech spans it found */
    double vad_s;      /* seconds the VAD took (inside proc_s) */
    double speech_s;   /* seconds of audio the decoder saw (audio_s without VAD) */
} fr_asr_result;

typedef struct fr_asr fr_asr;

/* Load the acoustic model, dictionary and LM. NULL with err set when a file is missing/bad. */
fr_asr *fr_asr_new(const fr_asr_config *cfg, fr_err *err);
/* Recognise 16-kHz mono int16 PCM as one utterance. 0 on success (res filled), -1 with err. */
int fr_asr_run(fr_asr *a, const int16_t *pcm, size_t n, fr_asr_result *res, fr_err *err);
/* The same under limits (NULL = none): 0, -1 with err, or FR_ASR_STOPPED with err and
 * res->stopped (no text; res->proc_s is the time spent). */
int fr_asr_run_limited(fr_asr *a, const int16_t *pcm, size_t n, const fr_asr_limits *lim,
                       fr_asr_result *res, fr_err *err);
/* Decode WAV/FLAC/OGG bytes (limits: NULL = defaults), resample to 16 kHz, recognise. */
int fr_asr_run_bytes(fr_asr *a, const void *bytes, size_t len, const fr_audio_limits *lim,
                     fr_asr_result *res, fr_err *err);
void fr_asr_free(fr_asr *a);
void fr_asr_result_free(fr_asr_result *r);

/* A pool of decoders for worker threads. */
typedef struct fr_asr_pool fr_asr_pool;
/* n decoders at most (n <= 0: number of cores). The config's strings are copied. Nothing is
 * loaded until the first request; fr_asr_pool_warm loads one decoder now to surface errors. */
fr_asr_pool *fr_asr_pool_new(const fr_asr_config *cfg, int n);
int fr_asr_pool_warm(fr_asr_pool *p, fr_err *err);
/* Thread-safe: take a decoder (waiting while all n are busy), run fr_asr_run_bytes, return it. */
int fr_asr_pool_transcribe(fr_asr_pool *p, const void *bytes, size_t len,
                           const fr_audio_limits *lim, fr_asr_result *res, fr_err *err);
/* Same for raw 16-kHz int16 PCM. */
int fr_asr_pool_transcribe_pcm(fr_asr_pool *p, const int16_t *pcm, size_t n, fr_asr_result *res,
                               fr_err *err);
/* Same under limits; the wait for a free decoder counts and is cut short too (FR_ASR_STOPPED). */
int fr_asr_pool_transcribe_pcm_limited(fr_asr_pool *p, const int16_t *pcm, size_t n,
                                       const fr_asr_limits *lim, fr_asr_result *res, fr_err *err);
void fr_asr_pool_free(fr_asr_pool *p);

#endif
