/* audio.h — decode untrusted audio bytes (WAV, FLAC, OGG/Vorbis) to mono PCM at a target rate.
 *
 * Design: the caller hands over a byte buffer (already base64-decoded). The container is detected
 * from its magic bytes (RIFF/WAVE, fLaC, OggS); anything else is refused before libsndfile sees
 * it. libsndfile reads WAV and FLAC through its virtual I/O (sf_open_virtual), so no temporary
 * file is written; Ogg Vorbis is checked page by page and decoded with libvorbisfile instead
 * (libsndfile's Vorbis reader leaks on every refused file: see ogg.h). Duration, channel count and sample rate are checked from the header BEFORE
 * any sample is decoded: a header claiming two hours is refused at once. For WAV the RIFF chunk
 * sizes are also parsed by hand, because libsndfile silently clamps a data chunk that claims more
 * bytes than the buffer holds (that is a truncated file, reported as such). Decoding stops at the
 * frame count the header announced (plus a small slack), so a lying stream cannot grow the output
 * past the duration limit. Channels are averaged to mono, then libsamplerate resamples
 * (SRC_SINC_FASTEST) to the requested rate. Every function is reentrant: no global state.
 * Errors are one-line fr_err messages prefixed with "audio: ".
 */
#ifndef FRUGAL_AUDIO_H
#define FRUGAL_AUDIO_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Container formats accepted. */
typedef enum fr_audio_format {
    FR_AUDIO_UNKNOWN = 0, /* not recognised: refused */
    FR_AUDIO_WAV = 1,     /* RIFF/WAVE (PCM, float, A-law/mu-law, ADPCM as libsndfile reads) */
    FR_AUDIO_FLAC = 2,    /* native FLAC stream ("fLaC") */
    FR_AUDIO_OGG = 3,     /* Ogg Vorbis (own container check, then libvorbisfile: see ogg.h) */
} fr_audio_format;

/* Limits checked before decoding. fr_audio_limits_default() fills the defaults shown. */
typedef struct fr_audio_limits {
    double max_seconds; /* longest recording accepted (default 600 s = 10 minutes) */
    int max_channels;   /* most channels accepted (default 8) */
    int min_rate;       /* lowest source sample rate accepted in Hz (default 4000) */
    int max_rate;       /* highest source sample rate accepted in Hz (default 192000) */
    size_t max_bytes;   /* largest encoded buffer accepted (default 64 MiB) */
} fr_audio_limits;

/* What the header says, known before decoding. */
typedef struct fr_audio_info {
    fr_audio_format format; /* container detected from the magic bytes */
    int channels;           /* channel count in the file */
    int sample_rate;        /* source sample rate in Hz */
    int64_t frames;         /* frames announced by the header */
    double seconds;         /* frames / sample_rate */
} fr_audio_info;

/* Decoded mono audio. Free with fr_audio_free. */
typedef struct fr_audio {
    float *pcm;         /* n mono samples in [-1, 1] at `rate` Hz (malloc'd; NULL when n == 0) */
    size_t n;           /* sample count */
    int rate;           /* sample rate of pcm in Hz */
    double seconds;     /* n / rate */
    fr_audio_info src;  /* the source header */
} fr_audio;

void fr_audio_limits_default(fr_audio_limits *lim);

/* Name of a format ("wav", "flac", "ogg", "unknown"). */
const char *fr_audio_format_name(fr_audio_format f);

/* Detect the container from the first bytes; FR_AUDIO_UNKNOWN when not one we accept. */
fr_audio_format fr_audio_sniff(const void *data, size_t len);

/* Read only the header and check it against `lim` (NULL = defaults). 0 on success, -1 with
 * err set ("audio: ...") on unknown/corrupt/truncated/empty input or a limit exceeded. */
int fr_audio_probe(const void *data, size_t len, const fr_audio_limits *lim, fr_audio_info *info,
                   fr_err *err);

/* Probe, decode, downmix to mono and resample to out_rate Hz (e.g. 16000). 0 on success (out
 * filled; free with fr_audio_free), -1 with err set. */
int fr_audio_decode(const void *data, size_t len, const fr_audio_limits *lim, int out_rate,
                    fr_audio *out, fr_err *err);

/* Resample mono float samples from in_rate to out_rate (libsamplerate, SRC_SINC_FASTEST).
 * Returns a malloc'd buffer (never NULL on success, even for n == 0) and its length in *out_n,
 * or NULL with err set (bad rates). */
float *fr_audio_resample(const float *in, size_t n, int in_rate, int out_rate, size_t *out_n,
                         fr_err *err);

/* Convert float samples to int16 with clipping (out must hold n values). */
void fr_audio_to_s16(const float *in, size_t n, int16_t *out);

void fr_audio_free(fr_audio *a);

#endif
