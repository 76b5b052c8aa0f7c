/* test_gguf.c — the checkpoint parsers on their own (no tokenizer, no model): safetensors files and
 * sharded folders, GGUF files, config.json; and each parser against corrupt inputs (truncations,
 * lengths and counts past the end, absurd shapes). Every corrupt input must give -1 and a one-line
 * message that names the file. Buffers are malloc'd at their exact size so ASan sees any read past
 * the end. */
#include "t.h"

#include <cjson/cJSON.h>
#include <stdint.h>

#include "model/gguf.h"
#include "model/hfconfig.h"
#include "model/safetensors.h"

static char *fx(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t_fixtures(), name);
    return buf[k];
}

static uint8_t *slurp(const char *path, size_t *n) {
    fr_err e;
    char *s = fr_read_file(path, 1u << 30, n, &e);
    if (!s) fprintf(stderr, "  %s\n", e.msg);
    return (uint8_t *)s;
}

/* A malloc'd copy of the first n bytes (exact size, so ASan catches over-reads). */
static uint8_t *prefix(const uint8_t *p, size_t n) {
    uint8_t *q = malloc(n ? n : 1);
    memcpy(q, p, n);
    return q;
}

static bool one_line(const char *s) { return s[0] && !strchr(s, '\n'); }

/* ---------------------------------------------------------------- safetensors */

TEST(st_parse_qwen2_fixture) {
    fr_st_file f;
    fr_err e = {0};
    CHECK(fr_st_open(&f, fx("qwen2-tiny/model.safetensors"), &e) == 0);
    CHECK_EQ_INT(f.n_tensors, 26); /* 2 layers x 12 + embed + norm; no lm_head (tied) */
    const fr_st_tensor *t = fr_st_find(&f, "model.embed_tokens.weight");
    CHECK(t != NULL);
    if (t) {
        CHECK_EQ_INT(t->n_dims, 2);
        CHECK_EQ_INT(t->shape[0], 4005);
        CHECK_EQ_INT(t->shape[1], 64);
        CHECK_EQ_INT(t->dtype, FR_DTYPE_F32);
        CHECK_EQ_INT(t->nbytes, 4005 * 64 * 4);
    }
    CHECK(fr_st_find(&f, "lm_head.weight") == NULL);
    CHECK(fr_st_find(&f, "__metadata__") == NULL);
    t = fr_st_find(&f, "model.layers.1.self_attn.k_proj.bias");
    CHECK(t && t->n_dims == 1 && t->shape[0] == 32);
    fr_st_close(&f);
    fr_st_close(&f); /* idempotent */
}

TEST(st_parse_bf16_fixture) {
    fr_st_file f;
    fr_err e = {0};
    CHECK(fr_st_open(&f, fx("qwen2-tiny-bf16/model.safetensors"), &e) == 0);
    const fr_st_tensor *t = fr_st_find(&f, "model.norm.weight");
    CHECK(t && t->dtype == FR_DTYPE_BF16 && t->nbytes == 128);
    fr_st_close(&f);
}

TEST(st_set_sharded) {
    fr_st_set s;
    fr_err e = {0};
    CHECK(fr_st_set_open(&s, fx("llama-tiny"), &e) == 0);
    CHECK_EQ_INT(s.n_files, 3);
    CHECK(strstr(s.where, "model.safetensors.index.json") != NULL);
    const fr_st_file *f = NULL;
    const fr_st_tensor *t = fr_st_set_find(&s, "lm_head.weight", &f);
    CHECK(t && f && strstr(f->path, "model-00002-of-00003.safetensors"));
    CHECK(fr_st_set_find(&s, "model.layers.2.mlp.down_proj.weight", NULL) != NULL);
    CHECK(fr_st_set_find(&s, "model.layers.3.mlp.down_proj.weight", NULL) == NULL);
    fr_st_set_close(&s);
}

TEST(st_set_missing_folder) {
    fr_st_set s;
    fr_err e = {0};
    CHECK(fr_st_set_open(&s, "tests", &e) == -1);
    CHECK(strstr(e.msg, "tests") && strstr(e.msg, "model.safetensors"));
}

/* Builds a safetensors image from a header string and a data section of `dlen` bytes. */
static uint8_t *st_image(const char *header, size_t dlen, size_t *n) {
    size_t h = strlen(header);
    *n = 8 + h + dlen;
    uint8_t *p = calloc(1, *n);
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(p + 8, header, h);
    return p;
}

/* Parse must fail naming "bad.safetensors" and containing `kw`. */
static void st_expect_fail(const uint8_t *p, size_t n, const char *kw) {
    fr_st_file f;
    fr_err e = {0};
    uint8_t *q = prefix(p, n);
    int rc = fr_st_parse(&f, "dir/bad.safetensors", q, n, &e);
    CHECK_EQ_INT(rc, -1);
    if (rc == 0) fr_st_close(&f);
    if (!strstr(e.msg, "dir/bad.safetensors") || !strstr(e.msg, kw) || !one_line(e.msg))
        fprintf(stderr, "  message [%s] lacks [%s]\n", e.msg, kw);
    CHECK(strstr(e.msg, "dir/bad.safetensors") != NULL);
    CHECK(strstr(e.msg, kw) != NULL);
    CHECK(one_line(e.msg));
    free(q);
}

TEST(st_corrupt_inputs) {
    size_t n;
    uint8_t *p;
    const char *ok = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}";
    p = st_image(ok, 24, &n);
    {
        fr_st_file f;
        fr_err e;
        uint8_t *q = prefix(p, n);
        CHECK(fr_st_parse(&f, "ok.safetensors", q, n, &e) == 0);
        CHECK_EQ_INT(f.n_tensors, 1);
        fr_st_close(&f);
        free(q);
    }
    /* truncated at every length */
    for (size_t k = 0; k < n; k++) {
        fr_st_file f;
        fr_err e = {0};
        uint8_t *q = prefix(p, k);
        CHECK(fr_st_parse(&f, "dir/bad.safetensors", q, k, &e) == -1);
        CHECK(strstr(e.msg, "dir/bad.safetensors") != NULL);
        free(q);
    }
    st_expect_fail(p, n - 1, "past the end");
    free(p);
    /* header length past the end, and absurd */
    p = st_image(ok, 24, &n);
    p[0] = 0xff;
    p[1] = 0x7f;
    st_expect_fail(p, n, "header length");
    memset(p, 0xff, 8);
    st_expect_fail(p, n, "header length");
    free(p);
    struct { const char *hdr; size_t dlen; const char *kw; } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,240]}}", 24, "past the end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]}}", 24, "past the end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, "needs 24"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[4,0]}}", 24, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[-4,20]}}", 24, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0]}}", 24, "data_offsets"},
        {"{\"a\":{\"dtype\":\"F99\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, "F99"},
        {"{\"a\":{\"dtype\":7,\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, "dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,6],\"data_offsets\":[0,24]}}", 24, "dimensions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[0,0]}}", 24, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}}", 24, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e300,3],\"data_offsets\":[0,24]}}", 24, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,24]}}", 24, "too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5,3],\"data_offsets\":[0,24]}}", 24, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":\"x\",\"data_offsets\":[0,24]}}", 24, "shape"},
        {"{\"a\":[1,2]}", 24, "not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24, "twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]", 24, "JSON"},
        {"[1,2,3]", 24, "JSON"},
        /* names from the file are quoted: control characters never reach the message */
        {"{\"a\\nb\":{\"dtype\":\"F\\n32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", 24,
         "'a?b': unknown dtype 'F?32'"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        p = st_image(cases[i].hdr, cases[i].dlen, &n);
        st_expect_fail(p, n, cases[i].kw);
        free(p);
    }
    /* unsupported-but-valid dtypes parse; the loader rejects them when used */
    p = st_image("{\"a\":{\"dtype\":\"I64\",\"shape\":[3],\"data_offsets\":[0,24]}}", 24, &n);
    fr_st_file f;
    fr_err e;
    CHECK(fr_st_parse(&f, "x.safetensors", p, n, &e) == 0);
    CHECK(f.n_tensors == 1 && f.tensors[0].dtype == -1 && !strcmp(f.tensors[0].dtype_name, "I64"));
    fr_st_close(&f);
    free(p);
}

TEST(st_truncated_fixture) {
    size_t n;
    uint8_t *p = slurp(fx("qwen2-tiny/model.safetensors"), &n);
    CHECK(p != NULL);
    if (!p) return;
    size_t lens[] = {0, 1, 7, 8, 9, 100, 2000, 2711, 2712, 2713, 100000, n / 2, n - 4, n - 1};
    for (size_t i = 0; i < FR_ARRAY_LEN(lens); i++) {
        fr_st_file f;
        fr_err e = {0};
        uint8_t *q = prefix(p, lens[i]);
        CHECK(fr_st_parse(&f, "cut.safetensors", q, lens[i], &e) == -1);
        CHECK(strstr(e.msg, "cut.safetensors") != NULL);
        free(q);
    }
    free(p);
}

/* ---------------------------------------------------------------- GGUF */

TEST(gguf_parse_fixtures) {
    const char *files[] = {"qwen2-tiny-f32.gguf", "qwen2-tiny-q8_0.gguf", "qwen2-tiny-q4_0.gguf",
                           "llama-tiny-f16.gguf"};
    uint32_t wtype[] = {FR_GGML_F32, FR_GGML_Q8_0, FR_GGML_Q4_0, FR_GGML_F16};
    for (int i = 0; i < 4; i++) {
        size_t n;
        uint8_t *p = slurp(fx(files[i]), &n);
        CHECK(p != NULL);
        if (!p) continue;
        fr_gguf g;
        fr_err e = {0};
        CHECK(fr_gguf_parse(&g, files[i], p, n, &e) == 0);
        if (e.msg[0]) fprintf(stderr, "  %s\n", e.msg);
        CHECK_EQ_INT(g.version, 3);
        CHECK_EQ_INT(g.alignment, 32);
        bool llama = i == 3;
        CHECK_EQ_INT(g.n_tensors, llama ? 1 + 3 * 9 + 2 + 1 : 1 + 2 * 12 + 1);
        const fr_gguf_tensor *t = fr_gguf_find_tensor(&g, "token_embd.weight");
        CHECK(t && t->n_dims == 2 && t->ne[0] == 64 && t->ne[1] == (llama ? 3005 : 4005));
        CHECK(t && t->type == wtype[i]);
        t = fr_gguf_find_tensor(&g, "blk.1.attn_norm.weight");
        CHECK(t && t->type == FR_GGML_F32 && t->n_dims == 1 && t->ne[0] == 64);
        fr_gguf_str s;
        CHECK(fr_gguf_get_str(&g, "general.architecture", &s, &e) == 0);
        CHECK(s.n == 5 && !memcmp(s.p, llama ? "llama" : "qwen2", 5));
        int64_t v;
        CHECK(fr_gguf_get_int(&g, llama ? "llama.block_count" : "qwen2.block_count", 0, 100, &v,
                              &e) == 0);
        CHECK_EQ_INT(v, llama ? 3 : 2);
        CHECK(fr_gguf_get_int(&g, "nope", 0, 1, &v, &e) == 1);
        /* wrong type: a string read as an integer */
        CHECK(fr_gguf_get_int(&g, "general.architecture", 0, 1, &v, &e) == -1);
        CHECK(strstr(e.msg, files[i]) && strstr(e.msg, "general.architecture"));
        const char **toks;
        size_t *lens;
        int64_t ntok;
        CHECK(fr_gguf_get_str_array(&g, "tokenizer.ggml.tokens", &toks, &lens, &ntok, &e) == 0);
        CHECK_EQ_INT(ntok, llama ? 3005 : 4005);
        if (!llama) CHECK(lens[4002] == 10 && !memcmp(toks[4002], "<|im_end|>", 10));
        free(toks);
        free(lens);
        int32_t *types;
        CHECK(fr_gguf_get_i32_array(&g, "tokenizer.ggml.token_type", &types, &ntok, &e) == 0);
        CHECK(types[0] == 1 && types[llama ? 3000 : 4000] == 3);
        free(types);
        if (llama) {
            t = fr_gguf_find_tensor(&g, "rope_freqs.weight");
            CHECK(t && t->type == FR_GGML_F32 && t->ne[0] == 4);
        }
        fr_gguf_free(&g);
        free(p);
    }
}

/* The GGUF F32 file holds exactly the safetensors bytes (qwen2: no row permutation). */
TEST(gguf_f32_equals_safetensors) {
    size_t n;
    uint8_t *p = slurp(fx("qwen2-tiny-f32.gguf"), &n);
    fr_gguf g;
    fr_err e;
    CHECK(p && fr_gguf_parse(&g, "f32.gguf", p, n, &e) == 0);
    fr_st_file f;
    CHECK(fr_st_open(&f, fx("qwen2-tiny/model.safetensors"), &e) == 0);
    static const char *map[][2] = {
        {"token_embd.weight", "model.embed_tokens.weight"},
        {"output_norm.weight", "model.norm.weight"},
        {"blk.%d.attn_norm.weight", "model.layers.%d.input_layernorm.weight"},
        {"blk.%d.ffn_norm.weight", "model.layers.%d.post_attention_layernorm.weight"},
        {"blk.%d.attn_q.weight", "model.layers.%d.self_attn.q_proj.weight"},
        {"blk.%d.attn_k.weight", "model.layers.%d.self_attn.k_proj.weight"},
        {"blk.%d.attn_v.weight", "model.layers.%d.self_attn.v_proj.weight"},
        {"blk.%d.attn_q.bias", "model.layers.%d.self_attn.q_proj.bias"},
        {"blk.%d.attn_k.bias", "model.layers.%d.self_attn.k_proj.bias"},
        {"blk.%d.attn_v.bias", "model.layers.%d.self_attn.v_proj.bias"},
        {"blk.%d.attn_output.weight", "model.layers.%d.self_attn.o_proj.weight"},
        {"blk.%d.ffn_gate.weight", "model.layers.%d.mlp.gate_proj.weight"},
        {"blk.%d.ffn_up.weight", "model.layers.%d.mlp.up_proj.weight"},
        {"blk.%d.ffn_down.weight", "model.layers.%d.mlp.down_proj.weight"},
    };
    int compared = 0;
    for (int l = 0; l < 2; l++)
        for (size_t i = 0; i < FR_ARRAY_LEN(map); i++) {
            if (l && !strchr(map[i][0], '%')) continue;
            char a[128], b[128];
            snprintf(a, sizeof a, map[i][0], l);
            snprintf(b, sizeof b, map[i][1], l);
            const fr_gguf_tensor *gt = fr_gguf_find_tensor(&g, a);
            const fr_st_tensor *st = fr_st_find(&f, b);
            CHECK(gt && st);
            if (!gt || !st) continue;
            CHECK_EQ_INT(gt->nbytes, st->nbytes);
            CHECK(gt->nbytes == st->nbytes && !memcmp(gt->data, st->data, st->nbytes));
            compared++;
        }
    CHECK_EQ_INT(compared, 2 + 2 * 12);
    fr_st_close(&f);
    fr_gguf_free(&g);
    free(p);
}

/* Q8_0 / Q4_0 dequantisation against the F32 file: within half a quantisation step. */
TEST(gguf_dequant_q8_q4) {
    size_t n0, n8, n4;
    uint8_t *p0 = slurp(fx("qwen2-tiny-f32.gguf"), &n0), *p8 = slurp(fx("qwen2-tiny-q8_0.gguf"), &n8),
            *p4 = slurp(fx("qwen2-tiny-q4_0.gguf"), &n4);
    fr_gguf g0, g8, g4;
    fr_err e;
    CHECK(fr_gguf_parse(&g0, "a", p0, n0, &e) == 0 && fr_gguf_parse(&g8, "b", p8, n8, &e) == 0 &&
          fr_gguf_parse(&g4, "c", p4, n4, &e) == 0);
    const char *names[] = {"blk.0.attn_q.weight", "blk.1.ffn_down.weight", "token_embd.weight"};
    for (int i = 0; i < 3; i++) {
        const fr_gguf_tensor *t0 = fr_gguf_find_tensor(&g0, names[i]),
                             *t8 = fr_gguf_find_tensor(&g8, names[i]),
                             *t4 = fr_gguf_find_tensor(&g4, names[i]);
        CHECK(t0 && t8 && t4 && t8->type == FR_GGML_Q8_0 && t4->type == FR_GGML_Q4_0);
        if (!t0 || !t8 || !t4) continue;
        int64_t ne = t0->n_elem;
        float *ref = malloc((size_t)ne * 4), *d8 = malloc((size_t)ne * 4), *d4 = malloc((size_t)ne * 4);
        CHECK(fr_ggml_to_f32(FR_GGML_F32, t0->data, ref, ne) == 0);
        CHECK(fr_ggml_to_f32(FR_GGML_Q8_0, t8->data, d8, ne) == 0);
        CHECK(fr_ggml_to_f32(FR_GGML_Q4_0, t4->data, d4, ne) == 0);
        int bad8 = 0, bad4 = 0;
        for (int64_t b = 0; b < ne / 32; b++) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(ref[b * 32 + j]));
            for (int j = 0; j < 32; j++) {
                float r = ref[b * 32 + j];
                if (fabsf(d8[b * 32 + j] - r) > amax / 127 * 0.51f + 1e-3f * amax) bad8++;
                if (fabsf(d4[b * 32 + j] - r) > amax / 8 * 1.01f + 1e-6f) bad4++; /* rounding or clamp to 7d */
            }
        }
        CHECK_EQ_INT(bad8, 0);
        CHECK_EQ_INT(bad4, 0);
        free(ref);
        free(d8);
        free(d4);
    }
    fr_gguf_free(&g0);
    fr_gguf_free(&g8);
    fr_gguf_free(&g4);
    free(p0);
    free(p8);
    free(p4);
}

/* K-quant layouts on hand-made blocks. */
TEST(gguf_dequant_k_quants) {
    float y[256];
    uint16_t one = fr_f32_to_f16(1.0f), half = fr_f32_to_f16(0.5f);
    /* Q4_K: d = 1, dmin = 0.5; scales: sub-block j has scale j+1 and min 1 (j < 4 direct,
     * j >= 4 packed); quants q[l] = l % 16 low, (l+1) % 16 high */
    uint8_t b4[144] = {0};
    memcpy(b4, &one, 2);
    memcpy(b4 + 2, &half, 2);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; j++) { sc[j] = (uint8_t)(j + 1); mn[j] = 1; }
    for (int j = 0; j < 4; j++) {
        b4[4 + j] = (uint8_t)(sc[j] | ((sc[j + 4] >> 4) << 6));
        b4[4 + j + 4] = (uint8_t)(mn[j] | ((mn[j + 4] >> 4) << 6));
        b4[4 + j + 8] = (uint8_t)((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    for (int l = 0; l < 128; l++) b4[16 + l] = (uint8_t)((l % 16) | (((l + 1) % 16) << 4));
    CHECK(fr_ggml_to_f32(FR_GGML_Q4_K, b4, y, 256) == 0);
    int bad = 0;
    for (int i = 0; i < 256; i++) {
        int chunk = i / 64, half_i = (i % 64) / 32, l = i % 32, j = 2 * chunk + half_i;
        int qbyte = chunk * 32 + l;
        int q = half_i ? ((qbyte + 1) % 16) : (qbyte % 16);
        float want = (float)sc[j] * (float)q - 0.5f * (float)mn[j];
        if (y[i] != want) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* Q6_K: d = 0.5, scales[k] = k - 8, all quants 33 (=> q - 32 = 1) */
    uint8_t b6[210] = {0};
    for (int l = 0; l < 128; l++) b6[l] = 0x11;      /* low nibbles 1 */
    for (int l = 0; l < 64; l++) b6[128 + l] = 0xAA; /* high bits 2 -> (2 << 4) | 1 = 33 */
    for (int k = 0; k < 16; k++) b6[192 + k] = (uint8_t)(int8_t)(k - 8);
    memcpy(b6 + 208, &half, 2);
    CHECK(fr_ggml_to_f32(FR_GGML_Q6_K, b6, y, 256) == 0);
    bad = 0;
    for (int i = 0; i < 256; i++) {
        int k = (i / 128) * 8 + ((i % 128) / 32) * 2 + (i % 32) / 16;
        if (y[i] != 0.5f * (float)(k - 8)) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* Q5_K: d = 1, dmin = 0, scales 1, low nibbles 3, high bit set only for the first 64 */
    uint8_t b5[176] = {0};
    memcpy(b5, &one, 2);
    for (int j = 0; j < 4; j++) b5[4 + j] = 1;
    for (int j = 0; j < 4; j++) b5[4 + 8 + j] = 1;
    for (int l = 0; l < 32; l++) b5[16 + l] = 0x03; /* bits 0,1: chunk 0 both halves */
    for (int l = 0; l < 128; l++) b5[48 + l] = 0x33;
    CHECK(fr_ggml_to_f32(FR_GGML_Q5_K, b5, y, 256) == 0);
    bad = 0;
    for (int i = 0; i < 256; i++)
        if (y[i] != (i < 64 ? 19.0f : 3.0f)) bad++;
    CHECK_EQ_INT(bad, 0);
    CHECK(fr_ggml_to_f32(3 /* Q4_1 */, b4, y, 32) == -1);
}

/* --- a small GGUF writer for corrupt inputs --- */
typedef struct gw { fr_buf b; } gw;
static void gw_u32(gw *w, uint32_t v) { fr_buf_append(&w->b, &v, 4); }
static void gw_u64(gw *w, uint64_t v) { fr_buf_append(&w->b, &v, 8); }
static void gw_str(gw *w, const char *s) { gw_u64(w, strlen(s)); fr_buf_append(&w->b, s, strlen(s)); }
static void gw_kv_str(gw *w, const char *k, const char *v) { gw_str(w, k); gw_u32(w, FR_GGUF_STR); gw_str(w, v); }
static void gw_kv_u32(gw *w, const char *k, uint32_t v) { gw_str(w, k); gw_u32(w, FR_GGUF_U32); gw_u32(w, v); }
static void gw_pad(gw *w, size_t al) { while (w->b.len % al) fr_buf_append(&w->b, "", 1); }

/* A valid file: 2 kv, 1 tensor (F32 [8, 2]). */
static uint8_t *gguf_small(size_t *n) {
    gw w = {0};
    fr_buf_append(&w.b, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, 1);
    gw_u64(&w, 2);
    gw_kv_str(&w, "general.architecture", "qwen2");
    gw_kv_u32(&w, "general.alignment", 32);
    gw_str(&w, "t");
    gw_u32(&w, 2);
    gw_u64(&w, 8);
    gw_u64(&w, 2);
    gw_u32(&w, FR_GGML_F32);
    gw_u64(&w, 0);
    gw_pad(&w, 32);
    float d[16] = {0};
    fr_buf_append(&w.b, d, sizeof d);
    *n = w.b.len;
    return (uint8_t *)w.b.data;
}

static void gguf_expect_fail(const uint8_t *p, size_t n, const char *kw) {
    fr_gguf g;
    fr_err e = {0};
    uint8_t *q = prefix(p, n);
    int rc = fr_gguf_parse(&g, "dir/bad.gguf", q, n, &e);
    CHECK_EQ_INT(rc, -1);
    if (rc == 0) fr_gguf_free(&g);
    if (!strstr(e.msg, "dir/bad.gguf") || !strstr(e.msg, kw) || !one_line(e.msg))
        fprintf(stderr, "  message [%s] lacks [%s]\n", e.msg, kw);
    CHECK(strstr(e.msg, "dir/bad.gguf") != NULL);
    CHECK(strstr(e.msg, kw) != NULL);
    free(q);
}

/* Offsets in gguf_small's layout. */
#define OFF_NKV 16
#define OFF_KV0_LEN 24
#define OFF_KV0_VAL (24 + 8 + 20 + 4)          /* string value length of general.architecture */
#define OFF_KV1 (OFF_KV0_VAL + 8 + 5)
#define OFF_ALIGN_VAL (OFF_KV1 + 8 + 17 + 4)
#define OFF_T0 (OFF_ALIGN_VAL + 4)
#define OFF_T0_NDIMS (OFF_T0 + 8 + 1)
#define OFF_T0_DIM0 (OFF_T0_NDIMS + 4)
#define OFF_T0_TYPE (OFF_T0_DIM0 + 16)
#define OFF_T0_OFFSET (OFF_T0_TYPE + 4)

TEST(gguf_corrupt_inputs) {
    size_t n;
    uint8_t *p = gguf_small(&n);
    {
        fr_gguf g;
        fr_err e = {0};
        CHECK(fr_gguf_parse(&g, "small.gguf", p, n, &e) == 0);
        const fr_gguf_tensor *t = fr_gguf_find_tensor(&g, "t");
        CHECK(t && t->ne[0] == 8 && t->ne[1] == 2 && t->nbytes == 64);
        fr_gguf_free(&g);
    }
    /* every truncation */
    for (size_t k = 0; k < n; k++) {
        fr_gguf g;
        fr_err e = {0};
        uint8_t *q = prefix(p, k);
        CHECK(fr_gguf_parse(&g, "dir/bad.gguf", q, k, &e) == -1);
        CHECK(strstr(e.msg, "dir/bad.gguf") != NULL);
        free(q);
    }
    uint8_t *c = prefix(p, n);
#define PATCH32(off, v) do { uint32_t v_ = (v); memcpy(c + (off), &v_, 4); } while (0)
#define PATCH64(off, v) do { uint64_t v_ = (v); memcpy(c + (off), &v_, 8); } while (0)
#define RESET() memcpy(c, p, n)
    memcpy(c, "GGUG", 4);
    gguf_expect_fail(c, n, "magic");
    RESET();
    PATCH32(4, 1);
    gguf_expect_fail(c, n, "version 1");
    PATCH32(4, 0x03000000);
    gguf_expect_fail(c, n, "big-endian");
    RESET();
    PATCH64(8, UINT64_MAX);
    gguf_expect_fail(c, n, "tensor count");
    RESET();
    PATCH64(OFF_NKV, 1ull << 40);
    gguf_expect_fail(c, n, "metadata count");
    RESET();
    PATCH64(OFF_KV0_LEN, 1ull << 62);
    gguf_expect_fail(c, n, "key");
    RESET();
    PATCH64(OFF_KV0_VAL, UINT64_MAX - 3);
    gguf_expect_fail(c, n, "string length");
    RESET();
    PATCH32(OFF_KV0_VAL - 4, 99);
    gguf_expect_fail(c, n, "unknown value type");
    RESET();
    PATCH32(OFF_ALIGN_VAL, 24);
    gguf_expect_fail(c, n, "power of two");
    RESET();
    PATCH32(OFF_ALIGN_VAL, 0);
    gguf_expect_fail(c, n, "general.alignment");
    RESET();
    PATCH32(OFF_T0_NDIMS, 1000);
    gguf_expect_fail(c, n, "n_dims 1000");
    PATCH32(OFF_T0_NDIMS, 0);
    gguf_expect_fail(c, n, "n_dims 0");
    RESET();
    PATCH64(OFF_T0_DIM0, 0);
    gguf_expect_fail(c, n, "dimension 0");
    PATCH64(OFF_T0_DIM0, UINT64_MAX);
    gguf_expect_fail(c, n, "out of range");
    PATCH64(OFF_T0_DIM0, 1ull << 40);
    PATCH64(OFF_T0_DIM0 + 8, 1ull << 40);
    gguf_expect_fail(c, n, "out of range");
    RESET();
    PATCH64(OFF_T0_DIM0, 1ull << 30);
    gguf_expect_fail(c, n, "past the end");
    RESET();
    PATCH32(OFF_T0_TYPE, 1234);
    gguf_expect_fail(c, n, "unknown ggml type 1234");
    c[OFF_T0 + 8] = '\n'; /* tensor name "\n" */
    gguf_expect_fail(c, n, "tensor '?'");
    PATCH32(OFF_T0_TYPE, FR_GGML_Q8_0); /* 8 elements: not a multiple of 32 */
    gguf_expect_fail(c, n, "multiple");
    RESET();
    PATCH64(OFF_T0_OFFSET, 7);
    gguf_expect_fail(c, n, "alignment");
    PATCH64(OFF_T0_OFFSET, 64);
    gguf_expect_fail(c, n, "past the end");
    PATCH64(OFF_T0_OFFSET, UINT64_MAX & ~31ull);
    gguf_expect_fail(c, n, "past the end");
    free(c);
    free(p);

    /* a huge array count and a deeply nested array */
    gw w = {0};
    fr_buf_append(&w.b, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, 0);
    gw_u64(&w, 1);
    gw_str(&w, "tokenizer.ggml.tokens");
    gw_u32(&w, FR_GGUF_ARR);
    gw_u32(&w, FR_GGUF_STR);
    gw_u64(&w, 1ull << 61);
    gw_str(&w, "a");
    gguf_expect_fail((uint8_t *)w.b.data, w.b.len, "array count");
    w.b.len = 0;
    fr_buf_append(&w.b, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, 0);
    gw_u64(&w, 1);
    gw_str(&w, "k");
    gw_u32(&w, FR_GGUF_ARR);
    for (int i = 0; i < 10; i++) { gw_u32(&w, FR_GGUF_ARR); gw_u64(&w, 1); }
    gw_u32(&w, FR_GGUF_U8);
    gw_u64(&w, 0);
    gguf_expect_fail((uint8_t *)w.b.data, w.b.len, "nested");
    w.b.len = 0;
    /* u32 array with a count that does not fit */
    fr_buf_append(&w.b, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, 0);
    gw_u64(&w, 1);
    gw_str(&w, "k");
    gw_u32(&w, FR_GGUF_ARR);
    gw_u32(&w, FR_GGUF_U32);
    gw_u64(&w, 3);
    gw_u32(&w, 1);
    gw_u32(&w, 2);
    gguf_expect_fail((uint8_t *)w.b.data, w.b.len, "array count");
    /* ...and the same with the third element present parses */
    gw_u32(&w, 3);
    {
        fr_gguf g;
        fr_err e;
        CHECK(fr_gguf_parse(&g, "ok.gguf", (uint8_t *)w.b.data, w.b.len, &e) == 0);
        int32_t *v;
        int64_t cnt;
        CHECK(fr_gguf_get_i32_array(&g, "k", &v, &cnt, &e) == 0);
        CHECK(cnt == 3 && v[2] == 3);
        free(v);
        const char **sp;
        size_t *sl;
        CHECK(fr_gguf_get_str_array(&g, "k", &sp, &sl, &cnt, &e) == -1);
        CHECK(strstr(e.msg, "ok.gguf") && strstr(e.msg, "'k'"));
        fr_gguf_free(&g);
    }
    /* duplicate key */
    w.b.len = 0;
    fr_buf_append(&w.b, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, 0);
    gw_u64(&w, 2);
    gw_kv_u32(&w, "k", 1);
    gw_kv_u32(&w, "k", 2);
    gguf_expect_fail((uint8_t *)w.b.data, w.b.len, "twice");
    fr_buf_free(&w.b);
}

/* Truncations of a real file at many lengths, including inside the vocabulary arrays. Cuts in
 * the padding after the last tensor's data leave a complete file. */
TEST(gguf_truncated_fixture) {
    size_t n;
    uint8_t *p = slurp(fx("llama-tiny-f16.gguf"), &n);
    CHECK(p != NULL);
    if (!p) return;
    fr_gguf g;
    fr_err e = {0};
    CHECK(fr_gguf_parse(&g, "full.gguf", p, n, &e) == 0);
    size_t data_end = 0;
    for (int64_t i = 0; i < g.n_tensors; i++)
        data_end = FR_MAX(data_end, (size_t)(g.tensors[i].data - p) + g.tensors[i].nbytes);
    fr_gguf_free(&g);
    CHECK(data_end > n - 32 && data_end <= n);
    int fails = 0, tried = 0;
    for (size_t k = 0; k < data_end; k += (k < 2048 ? 1 : k < 200000 ? 997 : 65537)) {
        uint8_t *q = prefix(p, k);
        memset(&e, 0, sizeof e);
        int rc = fr_gguf_parse(&g, "cut.gguf", q, k, &e);
        tried++;
        if (rc == -1 && strstr(e.msg, "cut.gguf") && one_line(e.msg)) fails++;
        if (rc == 0) fr_gguf_free(&g);
        free(q);
    }
    CHECK_EQ_INT(fails, tried);
    gguf_expect_fail(p, data_end - 1, "past the end");
    uint8_t *q = prefix(p, data_end);
    CHECK(fr_gguf_parse(&g, "cut.gguf", q, data_end, &e) == 0);
    fr_gguf_free(&g);
    free(q);
    free(p);
}

/* ---------------------------------------------------------------- config.json */

TEST(hfconfig_qwen2) {
    fr_hf_config c;
    fr_err e = {0};
    CHECK(fr_hf_config_load(&c, fx("qwen2-tiny"), &e) == 0);
    if (e.msg[0]) fprintf(stderr, "  %s\n", e.msg);
    CHECK_EQ_INT(c.hp.arch, FR_ARCH_QWEN2);
    CHECK_EQ_INT(c.hp.n_vocab, 4005);
    CHECK_EQ_INT(c.hp.n_embd, 64);
    CHECK_EQ_INT(c.hp.n_layer, 2);
    CHECK_EQ_INT(c.hp.n_head, 4);
    CHECK_EQ_INT(c.hp.n_head_kv, 2);
    CHECK_EQ_INT(c.hp.head_dim, 16);
    CHECK_EQ_INT(c.hp.n_ff, 160);
    CHECK_EQ_INT(c.hp.n_ctx_train, 512);
    CHECK_NEAR(c.hp.rms_eps, 1e-6, 1e-12);
    CHECK_NEAR(c.hp.rope_theta, 1e6, 1e-3);
    CHECK_EQ_INT(c.tie, 1);
    CHECK(c.rope_freq_factors == NULL);
    CHECK_EQ_INT(c.hp.bos_id, -1);
    CHECK_EQ_INT(c.hp.eos_id, 4002);
    CHECK(c.chat_template && strstr(c.chat_template, "<|im_start|>"));
    CHECK(c.bos_token_str == NULL);
    CHECK_STR(c.eos_token_str, "<|im_end|>");
    fr_hf_config_free(&c);
}

TEST(hfconfig_llama_rope_factors) {
    fr_hf_config c;
    fr_err e = {0};
    CHECK(fr_hf_config_load(&c, fx("llama-tiny"), &e) == 0);
    CHECK_EQ_INT(c.hp.arch, FR_ARCH_LLAMA);
    CHECK_EQ_INT(c.hp.n_layer, 3);
    CHECK_EQ_INT(c.hp.n_head, 8);
    CHECK_EQ_INT(c.hp.n_head_kv, 2);
    CHECK_EQ_INT(c.hp.head_dim, 8);
    CHECK_EQ_INT(c.hp.n_ff, 192);
    CHECK_EQ_INT(c.hp.n_vocab, 3005);
    CHECK_EQ_INT(c.tie, 0);
    CHECK_NEAR(c.hp.rope_theta, 500000.0, 1e-3);
    CHECK_EQ_INT(c.hp.bos_id, 3000);
    CHECK_EQ_INT(c.hp.eos_id, 3004);
    CHECK_STR(c.bos_token_str, "<|begin_of_text|>");
    CHECK_STR(c.eos_token_str, "<|eot_id|>");
    CHECK(c.chat_template && strstr(c.chat_template, "<|start_header_id|>"));
    CHECK(c.rope_freq_factors != NULL);
    if (!c.rope_freq_factors) return;
    /* the llama3 formula (scripts/make_fixtures.py llama3_rope_factors), computed here in double */
    double theta = 500000, factor = 8, lo = 1, hi = 4, old = 8192;
    for (int i = 0; i < 4; i++) {
        double freq = 1.0 / pow(theta, (2.0 * i) / 8), wl = 2 * M_PI / freq, want;
        if (wl < old / hi) want = 1;
        else if (wl > old / lo) want = factor;
        else {
            double s = (old / wl - lo) / (hi - lo);
            want = 1 / ((1 - s) / factor + s);
        }
        CHECK_NEAR(c.rope_freq_factors[i], want, 1e-6 * want);
    }
    /* and the same numbers as the GGUF converter wrote into rope_freqs.weight */
    size_t n;
    uint8_t *p = slurp(fx("llama-tiny-f16.gguf"), &n);
    fr_gguf g;
    CHECK(p && fr_gguf_parse(&g, "l.gguf", p, n, &e) == 0);
    const fr_gguf_tensor *t = fr_gguf_find_tensor(&g, "rope_freqs.weight");
    CHECK(t && t->ne[0] == 4);
    if (t) {
        float f[4];
        memcpy(f, t->data, 16);
        for (int i = 0; i < 4; i++) CHECK_NEAR(c.rope_freq_factors[i], f[i], 1e-6 * f[i]);
        CHECK(f[0] == 1.0f && f[3] > 1.0f);
    }
    fr_gguf_free(&g);
    free(p);
    fr_hf_config_free(&c);
}

static void cfg_expect_fail(const char *json, const char *kw) {
    fr_hf_config c;
    fr_err e = {0};
    int rc = fr_hf_config_parse(&c, json, strlen(json), "dir/config.json", &e);
    CHECK_EQ_INT(rc, -1);
    if (rc == 0) fr_hf_config_free(&c);
    if (!strstr(e.msg, "dir/config.json") || !strstr(e.msg, kw))
        fprintf(stderr, "  message [%s] lacks [%s]\n", e.msg, kw);
    CHECK(strstr(e.msg, "dir/config.json") != NULL);
    CHECK(strstr(e.msg, kw) != NULL);
    CHECK(one_line(e.msg));
}

#define BASE_CFG "\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4," \
                 "\"intermediate_size\":128,\"vocab_size\":300"

TEST(hfconfig_errors) {
    cfg_expect_fail("{not json", "invalid JSON");
    cfg_expect_fail("[1]", "not a JSON object");
    cfg_expect_fail("{\"architectures\":[\"MistralForCausalLM\"]," BASE_CFG "}",
                    "unsupported architecture 'MistralForCausalLM'");
    cfg_expect_fail("{\"architectures\":[\"GPT2LMHeadModel\"]}", "GPT2LMHeadModel");
    cfg_expect_fail("{\"architectures\":[\"Evil\\nArch\\u0001\\u00e9\"]}", "'Evil?Arch?\xc3\xa9'");
    cfg_expect_fail("{" BASE_CFG "}", "architectures");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"num_hidden_layers\":2}",
                    "hidden_size");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":-1,"
                    "\"num_hidden_layers\":2}", "hidden_size");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"],\"hidden_size\":1e30,"
                    "\"num_hidden_layers\":2}", "hidden_size");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"num_key_value_heads\":3}", "multiple");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}", "yarn");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"rope_parameters\":{\"rope_type\":\"dynamic\",\"rope_theta\":1e4}}",
                    "dynamic");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"rope_scaling\":{\"type\":\"llama3\",\"factor\":8}}", "low_freq_factor");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"rope_parameters\":{\"full_attention\":{\"rope_theta\":1e6}}}",
                    "per-layer-type");
    cfg_expect_fail("{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                    ",\"rope_scaling\":{\"type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
                    "\"high_freq_factor\":1,\"original_max_position_embeddings\":8192}}",
                    "llama3");
    cfg_expect_fail("{\"architectures\":[\"Qwen2ForCausalLM\"]," BASE_CFG
                    ",\"quantization_config\":{\"quant_method\":\"gptq\"}}", "gptq");
    cfg_expect_fail("{\"architectures\":[\"Qwen2ForCausalLM\"]," BASE_CFG
                    ",\"hidden_act\":\"gelu\"}", "gelu");
    cfg_expect_fail("{\"architectures\":[\"Qwen2ForCausalLM\"]," BASE_CFG
                    ",\"eos_token_id\":\"x\"}", "eos_token_id");
    cfg_expect_fail("{\"architectures\":[\"Qwen2ForCausalLM\"]," BASE_CFG
                    ",\"tie_word_embeddings\":3}", "tie_word_embeddings");
    cfg_expect_fail("{\"architectures\":[\"Qwen2ForCausalLM\"]," BASE_CFG ",\"head_dim\":7}",
                    "head_dim");
    /* defaults and the eos list */
    const char *ok = "{\"architectures\":[\"LlamaForCausalLM\"]," BASE_CFG
                     ",\"eos_token_id\":[7,8,7,9],\"rope_scaling\":null,\"head_dim\":null}";
    fr_hf_config c;
    fr_err e;
    CHECK(fr_hf_config_parse(&c, ok, strlen(ok), "config.json", &e) == 0);
    CHECK_EQ_INT(c.hp.n_head_kv, 4);
    CHECK_EQ_INT(c.hp.head_dim, 16);
    CHECK_NEAR(c.hp.rope_theta, 10000.0, 1e-3);
    CHECK_EQ_INT(c.hp.eos_id, 7);
    CHECK(c.hp.eos_ids[0] == 8 && c.hp.eos_ids[1] == 9 && c.hp.eos_ids[2] == -1);
    CHECK_EQ_INT(c.tie, -1);
    fr_hf_config_free(&c);
}

int main(void) { return t_main(); }
