/* test_audio.c — audio decoding: WAV/FLAC/OGG written here with libsndfile (into memory through
 * its virtual I/O), resampling length and energy, header limits (a two-hour WAV header refused
 * without decoding), truncated / corrupt / zero-length / not-audio input. */
#include <malloc.h>
#include <math.h>
#include <sndfile.h>

#include "stages/audio/audio.h"
#include "t.h"

/* Heap bytes in use: the sanitizer allocator's count under ASan, glibc's otherwise. */
size_t __sanitizer_get_current_allocated_bytes(void) __attribute__((weak));
int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
static size_t heap_bytes(void) {
    if (__sanitizer_get_current_allocated_bytes) return __sanitizer_get_current_allocated_bytes();
    return mallinfo2().uordblks;
}

/* growable in-memory file for libsndfile writes */
typedef struct mfile {
    unsigned char *p; /* bytes */
    sf_count_t len;   /* file length */
    sf_count_t cap;   /* allocated */
    sf_count_t pos;   /* position */
} mfile;
static sf_count_t m_len(void *u) { return ((mfile *)u)->len; }
static sf_count_t m_seek(sf_count_t o, int wh, void *u) {
    mfile *m = u;
    sf_count_t b = wh == SEEK_SET ? 0 : wh == SEEK_CUR ? m->pos : m->len;
    m->pos = b + o;
    return m->pos;
}
static sf_count_t m_read(void *p, sf_count_t n, void *u) {
    mfile *m = u;
    if (m->pos >= m->len) return 0;
    if (n > m->len - m->pos) n = m->len - m->pos;
    memcpy(p, m->p + m->pos, (size_t)n);
    m->pos += n;
    return n;
}
static sf_count_t m_write(const void *p, sf_count_t n, void *u) {
    mfile *m = u;
    if (m->pos + n > m->cap) {
        m->cap = (m->pos + n) * 2;
        m->p = realloc(m->p, (size_t)m->cap);
    }
    memcpy(m->p + m->pos, p, (size_t)n);
    m->pos += n;
    if (m->pos > m->len) m->len = m->pos;
    return n;
}
static sf_count_t m_tell(void *u) { return ((mfile *)u)->pos; }

/* Encode `secs` of a 440 Hz sine (amplitude 0.5) with `ch` channels at `rate`. */
static mfile encode(int format, int rate, int ch, double secs) {
    mfile m = {0};
    SF_VIRTUAL_IO io = {m_len, m_seek, m_read, m_write, m_tell};
    SF_INFO si = {0};
    si.samplerate = rate;
    si.channels = ch;
    si.format = format;
    SNDFILE *sf = sf_open_virtual(&io, SFM_WRITE, &si, &m);
    CHECK(sf != NULL);
    if (!sf) return m;
    size_t n = (size_t)(secs * rate);
    float *buf = malloc(n * (size_t)ch * sizeof(float));
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++) buf[i * ch + c] = 0.5f * sinf(2 * 3.14159265f * 440.f * (float)i / rate);
    sf_writef_float(sf, buf, (sf_count_t)n);
    sf_close(sf);
    free(buf);
    return m;
}

static double rms(const float *x, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)x[i] * x[i];
    return n ? sqrt(s / n) : 0;
}

static void roundtrip(int format, fr_audio_format want) {
    mfile m = encode(format, 44100, 2, 1.0);
    fr_audio a;
    fr_err err = {0};
    CHECK_EQ_INT(fr_audio_sniff(m.p, (size_t)m.len), want);
    int rc = fr_audio_decode(m.p, (size_t)m.len, NULL, 16000, &a, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    CHECK_EQ_INT(rc, 0);
    if (!rc) {
        CHECK_EQ_INT(a.src.channels, 2);
        CHECK_EQ_INT(a.src.sample_rate, 44100);
        CHECK_NEAR((double)a.n, 16000, 160);
        CHECK_NEAR(rms(a.pcm + 1000, a.n - 2000), 0.5 / sqrt(2), 0.03);
        fr_audio_free(&a);
    }
    free(m.p);
}

TEST(decode_wav) { roundtrip(SF_FORMAT_WAV | SF_FORMAT_PCM_16, FR_AUDIO_WAV); }
TEST(decode_flac) { roundtrip(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, FR_AUDIO_FLAC); }
TEST(decode_ogg) { roundtrip(SF_FORMAT_OGG | SF_FORMAT_VORBIS, FR_AUDIO_OGG); }

TEST(resample_length_energy) {
    size_t n = 48000;
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = 0.8f * sinf(2 * 3.14159265f * 300.f * (float)i / 48000);
    size_t on = 0;
    fr_err err;
    float *y = fr_audio_resample(x, n, 48000, 16000, &on, &err);
    CHECK(y != NULL);
    CHECK_NEAR((double)on, 16000, 20);
    CHECK_NEAR(rms(y + 500, on - 1000), 0.8 / sqrt(2), 0.02);
    free(y);
    y = fr_audio_resample(x, n, 8000, 16000, &on, &err); /* upsampling doubles the length */
    CHECK_NEAR((double)on, 96000, 50);
    free(y);
    y = fr_audio_resample(x, 0, 8000, 16000, &on, &err);
    CHECK(y != NULL);
    CHECK_EQ_INT(on, 0);
    free(y);
    int16_t s[3];
    float f[3] = {2.f, -2.f, 0.5f};
    fr_audio_to_s16(f, 3, s);
    CHECK_EQ_INT(s[0], 32767);
    CHECK_EQ_INT(s[1], -32768);
    CHECK_EQ_INT(s[2], 16384);
    free(x);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

TEST(two_hour_header_refused_fast) {
    unsigned char h[44 + 3200];
    memset(h, 0, sizeof h);
    uint32_t data = 7200u * 16000u * 2u;
    memcpy(h, "RIFF", 4);
    put32(h + 4, 36 + data);
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16);
    h[20] = 1; /* PCM */
    h[22] = 1; /* mono */
    put32(h + 24, 16000);
    put32(h + 28, 32000);
    h[32] = 2;
    h[34] = 16;
    memcpy(h + 36, "data", 4);
    put32(h + 40, data);
    fr_err err = {0};
    fr_audio a;
    double t0 = fr_time_s();
    CHECK_EQ_INT(fr_audio_decode(h, sizeof h, NULL, 16000, &a, &err), -1);
    CHECK(fr_time_s() - t0 < 0.05);
    CHECK(strstr(err.msg, "7200.0 s") && strstr(err.msg, "limit"));
    /* a tighter configured limit refuses a real 2 s file */
    mfile m = encode(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, 2.0);
    fr_audio_limits lim;
    fr_audio_limits_default(&lim);
    lim.max_seconds = 1.0;
    CHECK_EQ_INT(fr_audio_decode(m.p, (size_t)m.len, &lim, 16000, &a, &err), -1);
    CHECK(strstr(err.msg, "limit") != NULL);
    lim.max_seconds = 600;
    lim.max_channels = 1;
    free(m.p);
    m = encode(SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 2, 0.5);
    CHECK_EQ_INT(fr_audio_probe(m.p, (size_t)m.len, &lim, NULL, &err), -1);
    CHECK(strstr(err.msg, "channels") != NULL);
    free(m.p);
}

TEST(bad_inputs) {
    fr_err err = {0};
    fr_audio a;
    CHECK_EQ_INT(fr_audio_decode("", 0, NULL, 16000, &a, &err), -1);
    CHECK(strstr(err.msg, "empty") != NULL);
    const char *txt = "hello, this is not audio at all";
    CHECK_EQ_INT(fr_audio_decode(txt, strlen(txt), NULL, 16000, &a, &err), -1);
    CHECK(strstr(err.msg, "not a WAV") != NULL);
    const unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    CHECK_EQ_INT(fr_audio_decode(png, sizeof png, NULL, 16000, &a, &err), -1);
    /* truncated WAV and FLAC */
    mfile m = encode(SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 1, 1.0);
    CHECK_EQ_INT(fr_audio_decode(m.p, (size_t)m.len / 2, NULL, 16000, &a, &err), -1);
    CHECK(strstr(err.msg, "truncated") != NULL);
    CHECK_EQ_INT(fr_audio_decode(m.p, 20, NULL, 16000, &a, &err), -1);
    /* corrupt: valid RIFF magic, garbage chunks */
    memset(m.p + 12, 0xAB, 40);
    CHECK_EQ_INT(fr_audio_decode(m.p, (size_t)m.len, NULL, 16000, &a, &err), -1);
    free(m.p);
    m = encode(SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000, 1, 2.0);
    CHECK_EQ_INT(fr_audio_decode(m.p, (size_t)m.len / 2, NULL, 16000, &a, &err), -1);
    CHECK_EQ_INT(fr_audio_decode(m.p, 8, NULL, 16000, &a, &err), -1);
    free(m.p);
    m = encode(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, 1.0);
    CHECK_EQ_INT(fr_audio_decode(m.p, 30, NULL, 16000, &a, &err), -1);
    memset(m.p + 60, 0x5A, 200); /* corrupt the Vorbis headers */
    int rc = fr_audio_decode(m.p, (size_t)m.len, NULL, 16000, &a, &err);
    if (!rc) fr_audio_free(&a); /* must not crash; an error is the expected outcome */
    CHECK_EQ_INT(rc, -1);
    free(m.p);
}

/* Full-scale noise resampled 8 -> 16 kHz: the sinc resampler overshoots past 1.5 (found by
 * fuzz_audio); the output must still be in [-1, 1] as audio.h promises. */
TEST(resampled_full_scale_stays_in_range) {
    mfile m = {0};
    SF_VIRTUAL_IO io = {m_len, m_seek, m_read, m_write, m_tell};
    SF_INFO si = {.samplerate = 8000, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_FLOAT};
    SNDFILE *sf = sf_open_virtual(&io, SFM_WRITE, &si, &m);
    CHECK(sf != NULL);
    if (!sf) return;
    float buf[8000];
    uint32_t r = 12345;
    for (int i = 0; i < 8000; i++) {
        r = r * 1664525u + 1013904223u;
        buf[i] = r >> 31 ? 1.f : -1.f;
    }
    sf_writef_float(sf, buf, 8000);
    sf_close(sf);
    fr_audio a;
    fr_err err = {0};
    CHECK_EQ_INT(fr_audio_decode(m.p, (size_t)m.len, NULL, 16000, &a, &err), 0);
    float mx = 0;
    for (size_t i = 0; i < a.n; i++) mx = fabsf(a.pcm[i]) > mx ? fabsf(a.pcm[i]) : mx;
    CHECK(a.n > 15000);
    CHECK(mx <= 1.f);
    if (mx > 1.f) fprintf(stderr, "  peak %g\n", mx);
    fr_audio_free(&a);
    free(m.p);
}

/* The Ogg page CRC (polynomial 0x04c11db7, MSB first), to rewrite a page after corrupting it. */
static uint32_t ogg_crc(const unsigned char *p, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) {
        c ^= (uint32_t)(i >= 22 && i < 26 ? 0 : p[i]) << 24;
        for (int k = 0; k < 8; k++) c = c & 0x80000000u ? (c << 1) ^ 0x04c11db7u : c << 1;
    }
    return c;
}
static size_t ogg_page_size(const unsigned char *p) {
    size_t n = 27 + p[26];
    for (int i = 0; i < p[26]; i++) n += p[27 + i];
    return n;
}

/* Decode `reps` inputs made by `make` and check that at least `min_refused` are refused with
 * `want` in the message and that the heap does not grow (libsndfile's Vorbis reader leaked ~5.8 KB per refused file:
 * 2,000 files grew the heap by 11 MB). Under ASan, LeakSanitizer is asked as well. */
static void refused_without_leak(const mfile *m, int reps, int min_refused,
                                 size_t (*make)(const mfile *, int, unsigned char *), const char *want) {
    unsigned char *buf = malloc((size_t)m->len);
    size_t before = 0;
    int refused = 0, named = 0;
    for (int k = 0; k < reps; k++) {
        if (k == 50) before = heap_bytes(); /* after the first calls have warmed every cache */
        size_t n = make(m, k, buf);
        fr_audio a;
        fr_err err = {0};
        int rc = fr_audio_decode(buf, n, NULL, 16000, &a, &err);
        if (!rc) fr_audio_free(&a);
        refused += rc == -1;
        named += rc == -1 && strstr(err.msg, want) != NULL;
    }
    size_t after = heap_bytes();
    CHECK(refused >= min_refused);
    CHECK(named >= min_refused);
    long grew = (long)after - (long)before;
    if (grew > 64 * 1024) fprintf(stderr, "  heap grew by %ld bytes over %d refused files\n", grew, reps - 50);
    CHECK(grew <= 64 * 1024);
    if (__lsan_do_recoverable_leak_check) CHECK_EQ_INT(__lsan_do_recoverable_leak_check(), 0);
    free(buf);
}

static size_t make_truncated(const mfile *m, int k, unsigned char *buf) {
    size_t n = 28 + (size_t)k * 37 % ((size_t)m->len - 28); /* every cut inside the file */
    memcpy(buf, m->p, n);
    return n;
}

/* The setup header (the third Vorbis header, on page 1 after the comment header) garbled, with
 * the page CRC rewritten so the container is valid and the Vorbis decoder itself must refuse
 * (a few garblings still decode: the setup header has slack). */
static size_t make_bad_setup(const mfile *m, int k, unsigned char *buf) {
    memcpy(buf, m->p, (size_t)m->len);
    unsigned char *p1 = buf + ogg_page_size(buf);
    size_t sz = ogg_page_size(p1);
    size_t body = 27 + p1[26];
    size_t comment = p1[27]; /* the comment header is short: one lacing value */
    for (size_t i = body + comment + 7 + (size_t)k % 16; i < sz; i += 3) p1[i] ^= (unsigned char)(0x5A + k);
    uint32_t c = ogg_crc(p1, sz);
    p1[22] = (unsigned char)c, p1[23] = (unsigned char)(c >> 8), p1[24] = (unsigned char)(c >> 16),
    p1[25] = (unsigned char)(c >> 24);
    return (size_t)m->len;
}

TEST(ogg_truncated_no_leak) {
    mfile m = encode(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, 1.0);
    CHECK(m.len > 1000);
    if (m.len > 1000) refused_without_leak(&m, 2050, 2050, make_truncated, "truncated ogg file");
    free(m.p);
}

TEST(ogg_corrupt_setup_no_leak) {
    mfile m = encode(SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000, 1, 1.0);
    CHECK(m.len > 1000 && m.p[27] < 255 && m.p[26] == 1);
    if (m.len > 1000) refused_without_leak(&m, 300, 270, make_bad_setup, "corrupt ogg file");
    free(m.p);
}

int main(void) { return t_main(); }
