/* ogg.c — the Ogg container check and the libvorbisfile decoder. See ogg.h for why. */
#include "stages/audio/ogg.h"

#include <stdlib.h>
#include <string.h>
#include <vorbis/vorbisfile.h>

#define OGG_HEADER 27 /* fixed part of a page header, before the segment table */

/* CRC-32 of the Ogg framing: polynomial 0x04c11db7, MSB first, initial value 0, no final xor. */
static void crc_table(uint32_t t[256]) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t r = i << 24;
        for (int k = 0; k < 8; k++) r = r & 0x80000000u ? (r << 1) ^ 0x04c11db7u : r << 1;
        t[i] = r;
    }
}

static uint32_t page_crc(const uint32_t t[256], const uint8_t *p, size_t n) {
    uint32_t c = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t byte = i >= 22 && i < 26 ? 0 : p[i]; /* the CRC field itself counts as zero */
        c = (c << 8) ^ t[(c >> 24) ^ byte];
    }
    return c;
}

static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int fr_ogg_check(const uint8_t *b, size_t len, fr_err *err) {
    uint32_t tab[256];
    crc_table(tab);
    static const char *const want[3] = {"\001vorbis", "\003vorbis", "\005vorbis"};
    uint8_t head[3][7];   /* first bytes of the three header packets */
    size_t head_n[3] = {0};
    int packets = 0;      /* packets completed so far */
    size_t open_len = 0;  /* bytes of the packet in progress (0: none open) */
    uint32_t serial = 0;
    size_t off = 0;
    int eos = 0;
    for (uint32_t page = 0; off < len; page++) {
        if (eos) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: bytes after the end-of-stream page");
            return -1;
        }
        const uint8_t *p = b + off;
        size_t left = len - off;
        if (left < OGG_HEADER || left < OGG_HEADER + (size_t)p[26]) {
            if (left >= 4 && memcmp(p, "OggS", 4)) goto not_a_page;
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: truncated ogg file: page %u is cut off",
                        page);
            return -1;
        }
        if (memcmp(p, "OggS", 4)) goto not_a_page;
        if (p[4] != 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: page %u has Ogg version %u", page, p[4]);
            return -1;
        }
        int flags = p[5], nseg = p[26];
        size_t body = 0;
        for (int i = 0; i < nseg; i++) body += p[OGG_HEADER + i];
        size_t size = OGG_HEADER + (size_t)nseg + body;
        if (size > left) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: truncated ogg file: page %u is cut off",
                        page);
            return -1;
        }
        if (page_crc(tab, p, size) != rd32(p + 22)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: page %u fails its checksum", page);
            return -1;
        }
        if (page == 0) serial = rd32(p + 14);
        else if (rd32(p + 14) != serial) {
            fr_err_setc(err, FR_ERR_UNSUPPORTED,
                        "audio: ogg file with several logical streams (not supported)");
            return -1;
        }
        if (rd32(p + 18) != page) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: page %u is numbered %u (pages missing)", page,
                        rd32(p + 18));
            return -1;
        }
        if ((page == 0) != ((flags & 2) != 0) || ((flags & 1) != 0) != (open_len > 0)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: page %u has inconsistent flags", page);
            return -1;
        }
        const uint8_t *data = p + OGG_HEADER + nseg;
        for (int i = 0; i < nseg; i++) {
            size_t l = p[OGG_HEADER + i];
            if (packets < 3)
                for (size_t k = 0; k < l && head_n[packets] < sizeof head[0]; k++)
                    head[packets][head_n[packets]++] = data[k];
            data += l;
            open_len += l;
            if (l < 255) { /* a lacing value below 255 ends the packet */
                if (packets < 3 &&
                    (head_n[packets] < 7 || memcmp(head[packets], want[packets], 7))) {
                    if (packets == 0) /* another codec (Opus, FLAC, Speex...) */
                        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                                    "audio: the ogg file is not Ogg Vorbis (only Vorbis is "
                                    "decoded)");
                    else
                        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                                    "audio: corrupt ogg file: Vorbis header packet %d is "
                                    "malformed", packets + 1);
                    return -1;
                }
                packets++;
                open_len = 0;
            }
        }
        if (page == 0 && (packets != 1 || open_len)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST,
                        "audio: corrupt ogg file: the first page must hold the Vorbis "
                        "identification header alone");
            return -1;
        }
        if (flags & 4) eos = 1;
        off += size;
    }
    if (packets < 3) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "audio: truncated ogg file: the Vorbis headers are incomplete");
        return -1;
    }
    if (!eos || open_len) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "audio: truncated ogg file: no end-of-stream page (the file is cut off)");
        return -1;
    }
    return 0;
not_a_page:
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt ogg file: no Ogg page at byte %zu", off);
    return -1;
}

/* ---- libvorbisfile over a read-only buffer ---- */
typedef struct mem {
    const uint8_t *p; /* the encoded bytes */
    size_t len;       /* their count */
    size_t pos;       /* read position */
} mem;

struct fr_ogg_dec {
    OggVorbis_File vf; /* the decoder */
    mem m;             /* its data source */
    int channels;      /* channels per frame */
};

static size_t mem_read(void *ptr, size_t size, size_t nmemb, void *u) {
    mem *m = u;
    if (!size || m->pos >= m->len) return 0;
    size_t n = FR_MIN(nmemb, (m->len - m->pos) / size);
    memcpy(ptr, m->p + m->pos, n * size);
    m->pos += n * size;
    return n;
}
static int mem_seek(void *u, ogg_int64_t off, int whence) {
    mem *m = u;
    ogg_int64_t base = whence == SEEK_SET ? 0 : whence == SEEK_CUR ? (ogg_int64_t)m->pos : (ogg_int64_t)m->len;
    if (off > (ogg_int64_t)m->len || off < -(ogg_int64_t)m->len) return -1;
    ogg_int64_t p = base + off;
    if (p < 0 || p > (ogg_int64_t)m->len) return -1;
    m->pos = (size_t)p;
    return 0;
}
static long mem_tell(void *u) { return (long)((mem *)u)->pos; }

static const char *ov_name(int rc) {
    switch (rc) {
    case OV_EREAD: return "read error";
    case OV_ENOTVORBIS: return "not Vorbis data";
    case OV_EVERSION: return "unsupported Vorbis version";
    case OV_EBADHEADER: return "invalid Vorbis header";
    case OV_EFAULT: return "decoder fault";
    case OV_EBADLINK: return "invalid stream section";
    case OV_HOLE: return "data interrupted";
    default: return "undecodable stream";
    }
}

fr_ogg_dec *fr_ogg_open(const void *data, size_t len, int *channels, int *rate, int64_t *frames,
                        fr_err *err) {
    if (fr_ogg_check(data, len, err)) return NULL;
    fr_ogg_dec *d = fr_xcalloc(1, sizeof *d);
    d->m = (mem){data, len, 0};
    ov_callbacks cb = {mem_read, mem_seek, NULL, mem_tell};
    int rc = ov_open_callbacks(&d->m, &d->vf, NULL, 0, cb);
    if (rc < 0) { /* ov_open_callbacks has cleared the handle itself */
        free(d);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt ogg file: %s", ov_name(rc));
        return NULL;
    }
    vorbis_info *vi = ov_info(&d->vf, -1);
    ogg_int64_t total = ov_pcm_total(&d->vf, -1);
    if (!vi || ov_streams(&d->vf) != 1 || total < 0) {
        fr_ogg_close(d);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt ogg file: %s",
                    !vi || total < 0 ? "no stream length" : "chained streams");
        return NULL;
    }
    d->channels = vi->channels;
    *channels = vi->channels;
    *rate = vi->rate > 0x7fffffffL ? 0 : (int)vi->rate;
    *frames = (int64_t)total;
    return d;
}

long fr_ogg_read(fr_ogg_dec *d, float *out, int frames, fr_err *err) {
    for (int holes = 0; holes < 64; holes++) {
        float **pcm = NULL;
        int link = 0;
        long r = ov_read_float(&d->vf, &pcm, frames, &link);
        if (r == OV_HOLE) continue; /* a gap in the data: skip it */
        if (r < 0) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt ogg file: %s", ov_name((int)r));
            return -1;
        }
        for (long i = 0; i < r; i++)
            for (int c = 0; c < d->channels; c++) out[i * d->channels + c] = pcm[c][i];
        return r;
    }
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "audio: corrupt ogg file: %s", ov_name(OV_HOLE));
    return -1;
}

void fr_ogg_close(fr_ogg_dec *d) {
    if (!d) return;
    ov_clear(&d->vf);
    free(d);
}
