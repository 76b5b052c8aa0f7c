/* ogg_leak.c — resident memory over many truncated Ogg Vorbis files.
 *
 * Encodes 2 s of a tone as Ogg Vorbis with libsndfile, then decodes N truncated copies (every
 * cut point in turn) and prints the process RSS every N/10 files:
 *   frugal      through fr_audio_decode (the server's path: own container check + libvorbisfile)
 *   libsndfile  through sf_open_virtual directly, as the audio stage did before (leaks ~5.8 KB
 *               per refused file inside libvorbis)
 *
 *   cc -O2 -Isrc bench/ogg_leak.c build/libfrugal.a -o build/ogg_leak $(LDLIBS of the Makefile)
 *   build/ogg_leak frugal 10000 ; build/ogg_leak libsndfile 10000
 */
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stages/audio/audio.h"

typedef struct mfile {
    unsigned char *p;  /* bytes */
    sf_count_t len;    /* file length (reads stop here) */
    sf_count_t cap;    /* allocated */
    sf_count_t pos;    /* position */
} mfile;
static sf_count_t m_len(void *u) { return ((mfile *)u)->len; }
static sf_count_t m_seek(sf_count_t o, int wh, void *u) {
    mfile *m = u;
    sf_count_t b = wh == SEEK_SET ? 0 : wh == SEEK_CUR ? m->pos : m->len;
    if (b + o < 0 || b + o > m->len) return -1;
    return m->pos = b + o;
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

static long rss_kb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv) {
    int direct = argc > 1 && !strcmp(argv[1], "libsndfile");
    long n = argc > 2 ? atol(argv[2]) : 10000;
    if (argc < 2 || (!direct && strcmp(argv[1], "frugal")) || n < 10) {
        fprintf(stderr, "usage: ogg_leak frugal|libsndfile [N >= 10]\n");
        return 2;
    }
    mfile m = {0};
    SF_VIRTUAL_IO io = {m_len, m_seek, m_read, m_write, m_tell};
    SF_INFO si = {.samplerate = 16000, .channels = 1, .format = SF_FORMAT_OGG | SF_FORMAT_VORBIS};
    SNDFILE *w = sf_open_virtual(&io, SFM_WRITE, &si, &m);
    if (!w) return 1;
    static float tone[32000];
    for (int i = 0; i < 32000; i++) tone[i] = 0.5f * sinf(2 * 3.14159265f * 440.f * (float)i / 16000);
    sf_writef_float(w, tone, 32000);
    sf_close(w);
    size_t full = (size_t)m.len;
    long refused = 0;
    printf("%s: %ld truncated copies of a %zu-byte Ogg Vorbis file\n", argv[1], n, full);
    printf("%8s %10s\n", "files", "rss_kb");
    printf("%8d %10ld\n", 0, rss_kb());
    for (long k = 0; k < n; k++) {
        size_t cut = 28 + (size_t)k * 37 % (full - 28);
        if (direct) {
            mfile r = {m.p, (sf_count_t)cut, (sf_count_t)cut, 0};
            SF_INFO ri;
            memset(&ri, 0, sizeof ri);
            SNDFILE *sf = sf_open_virtual(&io, SFM_READ, &ri, &r);
            if (sf) sf_close(sf);
            else refused++;
        } else {
            fr_audio a;
            fr_err err = {0};
            if (fr_audio_decode(m.p, cut, NULL, 16000, &a, &err)) refused++;
            else fr_audio_free(&a);
        }
        if ((k + 1) % (n / 10) == 0) printf("%8ld %10ld\n", k + 1, rss_kb());
    }
    printf("refused %ld of %ld\n", refused, n);
    free(m.p);
    return 0;
}
