/* audio.c — container sniffing, header limits, libsndfile virtual-I/O decoding, downmix and
 * streaming libsamplerate resampling. See audio.h for the contract.
 *
 * Memory is bounded by the limits: samples are decoded in blocks of FR_AUDIO_BLOCK frames,
 * averaged to mono and pushed through one SRC_STATE, so only the output (at the target rate)
 * is held in full. Nothing here is global; each call owns its libsndfile and libsamplerate
 * handles, so concurrent calls from many threads are safe. Ogg Vorbis does not go through
 * libsndfile (its Vorbis reader leaks the codec setup on every refused file): see ogg.h.
 */
#include "stages/audio/audio.h"

#include <math.h>
#include <samplerate.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>

#include "stages/audio/ogg.h"

#define FR_AUDIO_BLOCK 4096 /* frames decoded per sf_readf_float call */

void fr_audio_limits_default(fr_audio_limits *lim) {
    lim->max_seconds = 600.0;
    lim->max_channels = 8;
    lim->min_rate = 4000;
    lim->max_rate = 192000;
    lim->max_bytes = (size_t)64 << 20;
}

const char *fr_audio_format_name(fr_audio_format f) {
    switch (f) {
    case FR_AUDIO_WAV: return "wav";
    case FR_AUDIO_FLAC: return "flac";
    case FR_AUDIO_OGG: return "ogg";
    default: return "unknown";
    }
}

fr_audio_format fr_audio_sniff(const void *data, size_t len) {
    const uint8_t *b = data;
    if (!b) return FR_AUDIO_UNKNOWN;
    if (len >= 12 && !memcmp(b, "RIFF", 4) && !memcmp(b + 8, "WAVE", 4)) return FR_AUDIO_WAV;
    if (len >= 4 && !memcmp(b, "fLaC", 4)) return FR_AUDIO_FLAC;
    if (len >= 4 && !memcmp(b, "OggS", 4)) return FR_AUDIO_OGG;
    return FR_AUDIO_UNKNOWN;
}

/* ---- libsndfile virtual I/O over a read-only buffer ---- */
typedef struct vio {
    const uint8_t *data; /* the encoded bytes */
    sf_count_t len;      /* their count */
    sf_count_t pos;      /* read position */
} vio;

static sf_count_t vio_len(void *u) { return ((vio *)u)->len; }
static sf_count_t vio_seek(sf_count_t off, int whence, void *u) {
    vio *v = u;
    sf_count_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? v->pos : v->len;
    sf_count_t p = base + off;
    if (p < 0 || p > v->len) return -1;
    v->pos = p;
    return p;
}
static sf_count_t vio_read(void *ptr, sf_count_t n, void *u) {
    vio *v = u;
    if (n <= 0 || v->pos >= v->len) return 0;
    if (n > v->len - v->pos) n = v->len - v->pos;
    memcpy(ptr, v->data + v->pos, (size_t)n);
    v->pos += n;
    return n;
}
static sf_count_t vio_write(const void *ptr, sf_count_t n, void *u) {
    (void)ptr, (void)n, (void)u;
    return 0;
}
static sf_count_t vio_tell(void *u) { return ((vio *)u)->pos; }

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Walk the RIFF chunks by hand: fmt fields and the data chunk's claimed size. Checks the claimed
 * duration against the limit first (so a two-hour header is "too long", not "truncated"), then
 * that the data chunk fits in the buffer. */
static int wav_precheck(const uint8_t *b, size_t len, const fr_audio_limits *lim, fr_err *err) {
    size_t off = 12;
    int have_fmt = 0;
    unsigned channels = 0, rate = 0, align = 0;
    while (off + 8 <= len) {
        uint32_t sz = rd32(b + off + 4);
        const uint8_t *id = b + off;
        size_t body = off + 8;
        if (!memcmp(id, "fmt ", 4)) {
            if (sz < 16 || body + 16 > len) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt WAV: short fmt chunk");
                return -1;
            }
            channels = rd16(b + body + 2);
            rate = rd32(b + body + 4);
            align = rd16(b + body + 12);
            have_fmt = 1;
        } else if (!memcmp(id, "data", 4)) {
            if (!have_fmt) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST,
                            "audio: corrupt WAV: data chunk before fmt chunk");
                return -1;
            }
            if (channels == 0 || rate == 0 || align == 0) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST,
                            "audio: corrupt WAV: %u channels, %u Hz, block size %u", channels, rate,
                            align);
                return -1;
            }
            size_t avail = len - body;
            /* 0 and 0xFFFFFFFF are written by streaming encoders that never patched the size */
            int unknown = sz == 0 || sz == 0xFFFFFFFFu;
            double claimed = unknown ? (double)avail : (double)sz;
            double secs = claimed / align / rate;
            if (secs > lim->max_seconds) {
                fr_err_setc(err, FR_ERR_TOO_LARGE,
                            "audio: recording is %.1f s long (WAV header), the limit is %.0f s",
                            secs, lim->max_seconds);
                return -1;
            }
            if (!unknown && (size_t)sz > avail && (size_t)sz - avail >= align) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST,
                            "audio: truncated WAV: header announces %u bytes of samples, only %zu "
                            "present",
                            sz, avail);
                return -1;
            }
            if (unknown && avail < align) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: WAV holds no samples");
                return -1;
            }
            return 0;
        }
        if (sz > len - body) break;
        off = body + sz + (sz & 1u);
    }
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: truncated WAV: no data chunk");
    return -1;
}

/* An open decoder: libsndfile for WAV and FLAC, libvorbisfile for Ogg Vorbis. */
typedef struct source {
    SNDFILE *sf;     /* WAV / FLAC, or NULL */
    fr_ogg_dec *ogg; /* Ogg Vorbis, or NULL */
    int channels;    /* channels per frame */
    vio v;           /* libsndfile's data source */
} source;

static void source_close(source *s) {
    if (s->sf) sf_close(s->sf);
    fr_ogg_close(s->ogg);
    s->sf = NULL;
    s->ogg = NULL;
}

/* Decode up to `frames` interleaved frames: > 0 frames, 0 at the end, -1 with err set. */
static long source_read(source *s, float *blk, int frames, fr_err *err) {
    if (s->ogg) return fr_ogg_read(s->ogg, blk, frames, err);
    return (long)sf_readf_float(s->sf, blk, frames);
}

/* Open WAV / FLAC with libsndfile; fills channels, rate and frames. */
static int open_sndfile(const void *data, size_t len, fr_audio_format f, source *s,
                        fr_audio_info *info, fr_err *err) {
    s->v.data = data;
    s->v.len = (sf_count_t)len;
    s->v.pos = 0;
    SF_VIRTUAL_IO io = {vio_len, vio_seek, vio_read, vio_write, vio_tell};
    SF_INFO si;
    memset(&si, 0, sizeof si);
    SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &si, &s->v);
    if (!sf) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt %s file: %s", fr_audio_format_name(f),
                    sf_strerror(NULL));
        return -1;
    }
    int major = si.format & SF_FORMAT_TYPEMASK;
    int want = f == FR_AUDIO_WAV ? SF_FORMAT_WAV : SF_FORMAT_FLAC;
    if (major != want) {
        sf_close(sf);
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "audio: %s header but the data decodes as another format",
                    fr_audio_format_name(f));
        return -1;
    }
    s->sf = sf;
    info->channels = si.channels;
    info->sample_rate = si.samplerate;
    info->frames = si.frames == SF_COUNT_MAX ? INT64_MAX : (int64_t)si.frames;
    return 0;
}

/* Open the buffer and check the header. On success *s is open (close with source_close). */
static int open_checked(const void *data, size_t len, const fr_audio_limits *lim, source *s,
                        fr_audio_info *info, fr_err *err) {
    memset(s, 0, sizeof *s);
    memset(info, 0, sizeof *info);
    if (!data || len == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: empty input (zero bytes)");
        return -1;
    }
    if (len > lim->max_bytes) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "audio: input is %zu bytes, the limit is %zu", len,
                    lim->max_bytes);
        return -1;
    }
    fr_audio_format f = fr_audio_sniff(data, len);
    if (f == FR_AUDIO_UNKNOWN) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "audio: not a WAV, FLAC or OGG file (unrecognised header bytes)");
        return -1;
    }
    if (f == FR_AUDIO_WAV && wav_precheck(data, len, lim, err)) return -1;
    if (f == FR_AUDIO_OGG) {
        s->ogg = fr_ogg_open(data, len, &info->channels, &info->sample_rate, &info->frames, err);
        if (!s->ogg) return -1;
    } else if (open_sndfile(data, len, f, s, info, err)) {
        return -1;
    }
    info->format = f;
    s->channels = info->channels;
    if (info->channels < 1 || info->channels > lim->max_channels) {
        source_close(s);
        fr_err_setc(err, info->channels < 1 ? FR_ERR_BAD_REQUEST : FR_ERR_TOO_LARGE,
                    "audio: %d channels, the limit is %d", info->channels, lim->max_channels);
        return -1;
    }
    if (info->sample_rate < lim->min_rate || info->sample_rate > lim->max_rate) {
        source_close(s);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: sample rate %d Hz outside %d..%d Hz",
                    info->sample_rate, lim->min_rate, lim->max_rate);
        return -1;
    }
    if (info->frames <= 0 || info->frames == INT64_MAX) {
        source_close(s);
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    info->frames <= 0 ? "audio: the %s file holds no samples"
                                      : "audio: the %s file does not state its length",
                    fr_audio_format_name(f));
        return -1;
    }
    info->seconds = (double)info->frames / info->sample_rate;
    if (info->seconds > lim->max_seconds) {
        source_close(s);
        fr_err_setc(err, FR_ERR_TOO_LARGE, "audio: recording is %.1f s long, the limit is %.0f s",
                    info->seconds, lim->max_seconds);
        return -1;
    }
    return 0;
}

int fr_audio_probe(const void *data, size_t len, const fr_audio_limits *lim, fr_audio_info *info,
                   fr_err *err) {
    fr_audio_limits dl;
    if (!lim) fr_audio_limits_default(&dl), lim = &dl;
    source src;
    fr_audio_info tmp;
    if (open_checked(data, len, lim, &src, info ? info : &tmp, err)) return -1;
    source_close(&src);
    return 0;
}

/* A growable float array. */
typedef struct fbuf {
    float *p;   /* samples */
    size_t n;   /* used */
    size_t cap; /* allocated */
} fbuf;

static void fbuf_reserve(fbuf *b, size_t extra) {
    if (b->n + extra <= b->cap) return;
    size_t c = b->cap ? b->cap : 4096;
    while (c < b->n + extra) c *= 2;
    b->p = fr_xrealloc(b->p, c * sizeof(float));
    b->cap = c;
}

/* Push `n` mono samples through the resampler (or copy when st is NULL). */
static int push(SRC_STATE *st, double ratio, const float *in, size_t n, int eoi, fbuf *out,
                fr_err *err) {
    if (!st) {
        fbuf_reserve(out, n);
        if (n) memcpy(out->p + out->n, in, n * sizeof(float));
        out->n += n;
        return 0;
    }
    for (;;) {
        size_t room = (size_t)ceil((double)n * ratio) + 256;
        fbuf_reserve(out, room);
        SRC_DATA d;
        memset(&d, 0, sizeof d);
        d.data_in = in;
        d.input_frames = (long)n;
        d.data_out = out->p + out->n;
        d.output_frames = (long)room;
        d.end_of_input = eoi;
        d.src_ratio = ratio;
        int e = src_process(st, &d);
        if (e) {
            fr_err_set(err, "audio: resampling failed: %s", src_strerror(e));
            return -1;
        }
        /* a sinc resampler overshoots near full scale (up to ~1.6 on clipped noise): clip again */
        for (long i = 0; i < d.output_frames_gen; i++) {
            float *y = &out->p[out->n + (size_t)i];
            *y = *y > 1.f ? 1.f : *y < -1.f ? -1.f : *y;
        }
        out->n += (size_t)d.output_frames_gen;
        in += d.input_frames_used;
        n -= (size_t)d.input_frames_used;
        if (n == 0 && (!eoi || d.output_frames_gen == 0)) return 0;
    }
}

int fr_audio_decode(const void *data, size_t len, const fr_audio_limits *lim, int out_rate,
                    fr_audio *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    fr_audio_limits dl;
    if (!lim) fr_audio_limits_default(&dl), lim = &dl;
    if (out_rate < 1000 || out_rate > 384000) {
        fr_err_set(err, "audio: output rate %d Hz not supported", out_rate);
        return -1;
    }
    source src;
    fr_audio_info info;
    if (open_checked(data, len, lim, &src, &info, err)) return -1;
    int ch = info.channels;
    double ratio = (double)out_rate / info.sample_rate;
    SRC_STATE *st = NULL;
    if (info.sample_rate != out_rate) {
        int e = 0;
        st = src_new(SRC_SINC_FASTEST, 1, &e);
        if (!st) {
            source_close(&src);
            fr_err_set(err, "audio: resampler: %s", src_strerror(e));
            return -1;
        }
    }
    /* never decode more than announced (+1 % slack) nor more than the limit allows */
    int64_t cap = info.frames + info.frames / 100 + FR_AUDIO_BLOCK;
    float *blk = fr_xmalloc((size_t)FR_AUDIO_BLOCK * (size_t)ch * sizeof(float));
    float mono[FR_AUDIO_BLOCK];
    fbuf o = {0};
    int64_t got = 0;
    int rc = 0;
    for (;;) {
        long r = source_read(&src, blk, FR_AUDIO_BLOCK, err);
        if (r < 0) {
            rc = -1;
            break;
        }
        if (r == 0) break;
        got += r;
        if (got > cap) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt %s file: more samples than the header announces",
                        fr_audio_format_name(info.format));
            rc = -1;
            break;
        }
        for (long i = 0; i < r; i++) {
            float s = 0;
            for (int c = 0; c < ch; c++) s += blk[i * ch + c];
            s /= (float)ch;
            /* NaN/inf from a corrupt float WAV become silence; clip to [-1, 1] */
            if (!isfinite(s)) s = 0;
            mono[i] = s > 1.f ? 1.f : s < -1.f ? -1.f : s;
        }
        if (push(st, ratio, mono, (size_t)r, 0, &o, err)) {
            rc = -1;
            break;
        }
    }
    if (!rc && got == 0) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt %s file: no samples could be decoded",
                    fr_audio_format_name(info.format));
        rc = -1;
    }
    /* a stream that ends well short of what its header announced is truncated */
    if (!rc && got < info.frames - info.frames / 50 - 1) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "audio: truncated %s file: %lld of %lld frames decoded",
                    fr_audio_format_name(info.format), (long long)got, (long long)info.frames);
        rc = -1;
    }
    if (!rc && push(st, ratio, mono, 0, 1, &o, err)) rc = -1;
    free(blk);
    if (st) src_delete(st);
    source_close(&src);
    if (rc) {
        free(o.p);
        return -1;
    }
    out->pcm = o.p;
    out->n = o.n;
    out->rate = out_rate;
    out->seconds = (double)o.n / out_rate;
    out->src = info;
    return 0;
}

float *fr_audio_resample(const float *in, size_t n, int in_rate, int out_rate, size_t *out_n,
                         fr_err *err) {
    *out_n = 0;
    if (in_rate < 1000 || out_rate < 1000 || in_rate > 384000 || out_rate > 384000) {
        fr_err_set(err, "audio: resample %d -> %d Hz not supported", in_rate, out_rate);
        return NULL;
    }
    fbuf o = {0};
    fbuf_reserve(&o, 1);
    SRC_STATE *st = NULL;
    if (in_rate != out_rate) {
        int e = 0;
        st = src_new(SRC_SINC_FASTEST, 1, &e);
        if (!st) {
            free(o.p);
            fr_err_set(err, "audio: resampler: %s", src_strerror(e));
            return NULL;
        }
    }
    double ratio = (double)out_rate / in_rate;
    int rc = n ? push(st, ratio, in, n, 0, &o, err) : 0;
    static const float none[1] = {0};
    if (!rc) rc = push(st, ratio, none, 0, 1, &o, err);
    if (st) src_delete(st);
    if (rc) {
        free(o.p);
        return NULL;
    }
    *out_n = o.n;
    return o.p;
}

void fr_audio_to_s16(const float *in, size_t n, int16_t *out) {
    for (size_t i = 0; i < n; i++) {
        float s = in[i] * 32767.f;
        s = s > 32767.f ? 32767.f : s < -32768.f ? -32768.f : s;
        out[i] = (int16_t)lrintf(s);
    }
}

void fr_audio_free(fr_audio *a) {
    if (!a) return;
    free(a->pcm);
    memset(a, 0, sizeof *a);
}
