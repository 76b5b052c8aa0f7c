/* whisper_synth.h — a small random Whisper model in whisper.cpp's ggml .bin format, written in
 * memory, for tests/test_whisper.c and tests/fuzz/fuzz_whisper_ggml.c. The layout is the one
 * convert-pt-to-ggml.py writes (see src/model/whisper.h): hparams, mel filters, the text words,
 * then every tensor with openai-whisper's names; F16 for matrices when f16 is set (1-D tensors,
 * conv biases and positional embeddings stay F32). Deterministic for a seed.
 */
#ifndef FRUGAL_WHISPER_SYNTH_H
#define FRUGAL_WHISPER_SYNTH_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

typedef struct synth_cfg {
    int n_text;  /* text words (one byte each: 'a', 'b', ..., the first one " ") */
    int n_lang;  /* language tokens */
    int d;       /* d_model */
    int n_head;
    int n_enc, n_dec; /* layers */
    int n_mels;
    int f16;     /* matrices as F16 */
    uint32_t seed;
} synth_cfg;

static inline int synth_n_vocab(const synth_cfg *c) { return c->n_text + 2 + c->n_lang + 6 + 1501; }

typedef struct synth_buf {
    uint8_t *p;
    size_t n, cap;
} synth_buf;

static inline void sb_put(synth_buf *b, const void *x, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 1024;
        b->p = (uint8_t *)realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, x, n);
    b->n += n;
}

static inline void sb_i32(synth_buf *b, int32_t v) { sb_put(b, &v, 4); }

static inline float synth_rand(uint32_t *s) { /* uniform in [-1, 1) */
    *s ^= *s << 13;
    *s ^= *s >> 17;
    *s ^= *s << 5;
    return (float)((*s >> 8) * (1.0 / 8388608.0)) - 1.0f;
}

/* kind: 0 matrix (scaled 1/sqrt(fan_in) by the caller's dims), 1 norm weight (~1), 2 bias,
 * 3 token embedding, 4 positions */
static inline void synth_tensor(synth_buf *b, const synth_cfg *c, uint32_t *rs, const char *name,
                                int nd, const int *dims /* torch order */, int kind) {
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= dims[i];
    int is_small = nd < 2 || !strcmp(name, "encoder.conv1.bias") || !strcmp(name, "encoder.conv2.bias") ||
                   strstr(name, "positional_embedding") != NULL;
    int ft = c->f16 && !is_small ? 1 : 0;
    sb_i32(b, nd);
    sb_i32(b, (int32_t)strlen(name));
    sb_i32(b, ft);
    for (int i = nd - 1; i >= 0; i--) sb_i32(b, dims[i]);
    sb_put(b, name, strlen(name));
    float fan = nd >= 2 ? (float)(n / dims[0]) : 1.0f;
    for (int64_t i = 0; i < n; i++) {
        float r = synth_rand(rs), v;
        if (kind == 0) v = r * 1.7f / sqrtf(fan);
        else if (kind == 1) v = 1.0f + 0.1f * r;
        else if (kind == 2) v = 0.05f * r;
        else if (kind == 3) v = 0.8f * r;
        else v = 0.2f * r;
        if (ft) {
            uint16_t h = fr_f32_to_f16(v);
            sb_put(b, &h, 2);
        } else {
            sb_put(b, &v, 4);
        }
    }
}

static inline void synth_attn(synth_buf *b, const synth_cfg *c, uint32_t *rs, const char *pre) {
    char nm[320];
    int w[2] = {c->d, c->d}, v1[1] = {c->d};
    const char *parts[] = {"query", "key", "value", "out"};
    for (int i = 0; i < 4; i++) {
        snprintf(nm, sizeof nm, "%s.%s.weight", pre, parts[i]);
        synth_tensor(b, c, rs, nm, 2, w, 0);
        if (i != 1) {
            snprintf(nm, sizeof nm, "%s.%s.bias", pre, parts[i]);
            synth_tensor(b, c, rs, nm, 1, v1, 2);
        }
    }
}

static inline void synth_block(synth_buf *b, const synth_cfg *c, uint32_t *rs, const char *side,
                               int l) {
    char pre[64], nm[128];
    int v1[1] = {c->d}, f1[2] = {4 * c->d, c->d}, f2[2] = {c->d, 4 * c->d}, fb[1] = {4 * c->d};
    snprintf(pre, sizeof pre, "%s.blocks.%d", side, l);
    snprintf(nm, sizeof nm, "%s.attn_ln.weight", pre);
    synth_tensor(b, c, rs, nm, 1, v1, 1);
    snprintf(nm, sizeof nm, "%s.attn_ln.bias", pre);
    synth_tensor(b, c, rs, nm, 1, v1, 2);
    snprintf(nm, sizeof nm, "%s.attn", pre);
    synth_attn(b, c, rs, nm);
    if (!strcmp(side, "decoder")) {
        snprintf(nm, sizeof nm, "%s.cross_attn_ln.weight", pre);
        synth_tensor(b, c, rs, nm, 1, v1, 1);
        snprintf(nm, sizeof nm, "%s.cross_attn_ln.bias", pre);
        synth_tensor(b, c, rs, nm, 1, v1, 2);
        snprintf(nm, sizeof nm, "%s.cross_attn", pre);
        synth_attn(b, c, rs, nm);
    }
    snprintf(nm, sizeof nm, "%s.mlp_ln.weight", pre);
    synth_tensor(b, c, rs, nm, 1, v1, 1);
    snprintf(nm, sizeof nm, "%s.mlp_ln.bias", pre);
    synth_tensor(b, c, rs, nm, 1, v1, 2);
    snprintf(nm, sizeof nm, "%s.mlp.0.weight", pre);
    synth_tensor(b, c, rs, nm, 2, f1, 0);
    snprintf(nm, sizeof nm, "%s.mlp.0.bias", pre);
    synth_tensor(b, c, rs, nm, 1, fb, 2);
    snprintf(nm, sizeof nm, "%s.mlp.2.weight", pre);
    synth_tensor(b, c, rs, nm, 2, f2, 0);
    snprintf(nm, sizeof nm, "%s.mlp.2.bias", pre);
    synth_tensor(b, c, rs, nm, 1, v1, 2);
}

/* The whole file (malloc'd) and its size. */
static inline uint8_t *synth_ggml(const synth_cfg *c, size_t *size) {
    synth_buf b = {0};
    uint32_t rs = c->seed ? c->seed : 1;
    int nv = synth_n_vocab(c);
    int32_t hp[11] = {nv, 1500, c->d, c->n_head, c->n_enc, 448, c->d, c->n_head, c->n_dec, c->n_mels, c->f16};
    sb_i32(&b, 0x67676d6c);
    sb_put(&b, hp, sizeof hp);
    sb_i32(&b, c->n_mels);
    sb_i32(&b, 201);
    for (int i = 0; i < c->n_mels * 201; i++) {
        float v = 0.01f * (1.0f + synth_rand(&rs));
        sb_put(&b, &v, 4);
    }
    sb_i32(&b, c->n_text);
    for (int i = 0; i < c->n_text; i++) {
        char ch = i == 0 ? ' ' : (char)('a' + (i - 1) % 26);
        sb_i32(&b, 1);
        sb_put(&b, &ch, 1);
    }
    int d = c->d;
    int c1[3] = {d, c->n_mels, 3}, c2[3] = {d, d, 3}, cb[2] = {d, 1}, v1[1] = {d};
    int ep[2] = {1500, d}, te[2] = {nv, d}, dp[2] = {448, d};
    synth_tensor(&b, c, &rs, "encoder.positional_embedding", 2, ep, 4);
    synth_tensor(&b, c, &rs, "encoder.conv1.weight", 3, c1, 0);
    synth_tensor(&b, c, &rs, "encoder.conv1.bias", 2, cb, 2);
    synth_tensor(&b, c, &rs, "encoder.conv2.weight", 3, c2, 0);
    synth_tensor(&b, c, &rs, "encoder.conv2.bias", 2, cb, 2);
    for (int l = 0; l < c->n_enc; l++) synth_block(&b, c, &rs, "encoder", l);
    synth_tensor(&b, c, &rs, "encoder.ln_post.weight", 1, v1, 1);
    synth_tensor(&b, c, &rs, "encoder.ln_post.bias", 1, v1, 2);
    synth_tensor(&b, c, &rs, "decoder.positional_embedding", 2, dp, 4);
    synth_tensor(&b, c, &rs, "decoder.token_embedding.weight", 2, te, 3);
    for (int l = 0; l < c->n_dec; l++) synth_block(&b, c, &rs, "decoder", l);
    synth_tensor(&b, c, &rs, "decoder.ln.weight", 1, v1, 1);
    synth_tensor(&b, c, &rs, "decoder.ln.bias", 1, v1, 2);
    *size = b.n;
    return b.p;
}

#endif
