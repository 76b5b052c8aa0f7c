/* mkmodel.c — `frugal mkmodel`: a random-weight model of any Qwen2/Llama shape (see mkmodel.h).
 *
 *   frugal mkmodel --out PATH --arch qwen2|llama --hidden N --layers N --heads N --kv-heads N
 *                  --ffn N --vocab N [--head-dim N] [--ctx N] [--tied] [--dtype f32|f16|bf16]
 *                  [--format hf|gguf] [--gguf-type f32|f16|q8_0|q4_0|q4_k|q5_k|q6_k]
 *                  [--tokenizer tokenizer.json] [--seed S]
 *
 * Design: the file layout (every tensor's name, shape, type, offset) is computed first, so the
 * header is written once and tensors are then generated and written one slice of rows at a time:
 * memory stays at a few MiB whatever the model size. Weights: matrices ~ normal(0, 1/sqrt(fan_in))
 * (fan_in = the row length), norms 1, biases ~ normal(0, 0.02); each tensor has its own generator
 * seeded from --seed and its index, so output is reproducible. Quantised GGUF types use ggml's
 * reference rounding for Q8_0 / Q4_0; the K-quants (Q4_K, Q5_K, Q6_K: super-blocks of 256 in
 * ggml's layouts, as docs/gguf.md's types and model/gguf.c's dequantisation read them) are
 * written from the layouts with plain min/max scales (no search); a matrix whose rows are not a
 * multiple of 256 is written Q8_0 instead, as llama.cpp's quantiser falls back.
 *
 * Tokenizer: --tokenizer copies an HF tokenizer.json (its size must not exceed --vocab); the
 * default is a minimal byte-level BPE (256 byte tokens, no merges, the Qwen2 Split regex) plus
 * <|endoftext|>, <|im_start|>, <|im_end|>, with a ChatML chat template. The embedding may have
 * more rows than the tokenizer has tokens, as in real checkpoints. GGUF output carries the same
 * vocabulary as tokenizer.ggml.* metadata, padded with "[PADi]" tokens (type unused) to --vocab
 * entries, since llama.cpp takes the token count as the embedding's row count.
 *
 * GGUF output follows ggml's docs/gguf.md (v3) and what llama.cpp's loader requires (key types
 * u32/f32/bool/string as it reads them, tensor names and shapes of its llama and qwen2 loaders,
 * data packed in tensor order at 32-byte alignment); tests/gguf_spec.c checks it independently.
 */
#include "tools/mkmodel.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"
#include "base/flags.h"

#define MIB (1024.0 * 1024.0)

static const char *QWEN2_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *LLAMA3_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *CHATML_TEMPLATE =
    "{%- for message in messages %}{{- '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|im_start|>assistant\\n' }}{%- endif %}";

/* storage types of the output */
enum { T_F32, T_F16, T_BF16, T_Q8_0, T_Q4_0, T_Q4_K, T_Q5_K, T_Q6_K };
static const char *type_st_name[] = {"F32", "F16", "BF16", "", "", "", "", ""};
static const uint32_t type_ggml[] = {0, 1, 30, 8, 2, 12, 13, 14};
static bool is_kquant(int t) { return t == T_Q4_K || t == T_Q5_K || t == T_Q6_K; }

typedef struct opts {
    const char *out;        /* output folder (hf) or file (gguf) */
    const char *arch;       /* "qwen2" or "llama" */
    const char *tokenizer;  /* tokenizer.json to copy, or NULL for the default */
    long hidden, layers, heads, kv_heads, ffn, vocab, head_dim, ctx; /* shape */
    bool tied;              /* tie_word_embeddings */
    bool gguf;              /* --format gguf */
    int dtype;              /* hf: T_F32/T_F16/T_BF16 */
    int gtype;              /* gguf: T_F32/T_F16/T_Q8_0/T_Q4_0 for matrices */
    unsigned long long seed; /* --seed */
} opts;

/* One tensor of the output. */
typedef struct mk_tensor {
    char hf_name[96];   /* HF name */
    char gguf_name[64]; /* GGUF name */
    int n_dims;         /* 1 or 2 */
    int64_t ne0, ne1;   /* ne[0] (row length, fan_in), ne[1] (rows; 1 for vectors) */
    int kind;           /* 0 matrix, 1 norm (ones), 2 bias */
    int type;           /* storage type */
    uint64_t offset;    /* in the data section */
    uint64_t nbytes;    /* bytes */
} mk_tensor;

typedef struct plan {
    mk_tensor *t;       /* tensors in file order */
    int n;              /* count */
    uint64_t total;     /* data bytes */
} plan;

/* ---- random numbers ---- */

typedef struct rng {
    uint64_t s;      /* splitmix64 state */
    double spare;    /* second deviate of the last pair */
    bool has_spare;  /* spare is valid */
} rng;

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Normal deviates by Marsaglia's polar method (two per accepted pair). */
static double rng_normal(rng *r) {
    if (r->has_spare) {
        r->has_spare = false;
        return r->spare;
    }
    double u, v, q;
    do {
        u = (double)(splitmix(&r->s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        v = (double)(splitmix(&r->s) >> 11) * (2.0 / 9007199254740992.0) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    double f = sqrt(-2.0 * log(q) / q);
    r->spare = v * f;
    r->has_spare = true;
    return u * f;
}

/* ---- quantisation (ggml reference rounding) ---- */

static void quant_q8_0(const float *x, uint8_t *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, out += 34) {
        float amax = 0;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t h = fr_f32_to_f16(d);
        memcpy(out, &h, 2);
        for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)roundf(x[j] * id);
    }
}

static void quant_q4_0(const float *x, uint8_t *out, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, x += 32, out += 18) {
        float amax = 0, max = 0;
        for (int j = 0; j < 32; j++)
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        float d = max / -8.0f, id = d ? 1.0f / d : 0.0f;
        uint16_t h = fr_f32_to_f16(d);
        memcpy(out, &h, 2);
        for (int j = 0; j < 16; j++) {
            int q0 = (int)(x[j] * id + 8.5f), q1 = (int)(x[j + 16] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0 < 0 ? 0 : q0;
            q1 = q1 > 15 ? 15 : q1 < 0 ? 0 : q1;
            out[2 + j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* ---- K-quants: super-blocks of 256 (layouts of ggml's block_q4_K / q5_K / q6_K) ---- */

static void put_f16(uint8_t *p, float v) {
    uint16_t h = fr_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins: x ~ d*s*q - dmin*m, q in
 * 0..qmax. Fills q (256 codes) and the 12 packed scale bytes; returns d and dmin. */
static void kq_scales(const float *x, int qmax, uint8_t *q, uint8_t sc[12], float *dd, float *dm) {
    float scale[8], mn[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = -INFINITY; /* the min is an offset down from 0: lo <= 0 */
        for (int l = 0; l < 32; l++) {
            lo = fminf(lo, x[32 * j + l]);
            hi = fmaxf(hi, x[32 * j + l]);
        }
        scale[j] = (hi - lo) / (float)qmax;
        mn[j] = -lo;
        smax = fmaxf(smax, scale[j]);
        mmax = fmaxf(mmax, mn[j]);
    }
    const float d = fr_f16_to_f32(fr_f32_to_f16(smax / 63.0f));
    const float dmin = fr_f16_to_f32(fr_f32_to_f16(mmax / 63.0f));
    uint8_t s6[8], m6[8];
    for (int j = 0; j < 8; j++) {
        s6[j] = (uint8_t)clampi(d > 0 ? (int)lrintf(scale[j] / d) : 0, 0, 63);
        m6[j] = (uint8_t)clampi(dmin > 0 ? (int)lrintf(mn[j] / dmin) : 0, 0, 63);
        const float ds = d * s6[j], off = dmin * m6[j];
        for (int l = 0; l < 32; l++)
            q[32 * j + l] = (uint8_t)clampi(ds > 0 ? (int)lrintf((x[32 * j + l] + off) / ds) : 0,
                                            0, qmax);
    }
    for (int k = 0; k < 4; k++) {
        sc[k] = (uint8_t)((s6[k] & 63) | ((s6[k + 4] >> 4) << 6));
        sc[k + 4] = (uint8_t)((m6[k] & 63) | ((m6[k + 4] >> 4) << 6));
        sc[k + 8] = (uint8_t)((s6[k + 4] & 15) | ((m6[k + 4] & 15) << 4));
    }
    *dd = d, *dm = dmin;
}

/* Q4_K (144 bytes): d, dmin, 12 scale bytes, 128 bytes: in each 64-element chunk c, byte l holds
 * element 64c + l (low nibble) and 64c + 32 + l (high nibble). */
static void quant_q4_k(const float *x, uint8_t *out, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, out += 144) {
        uint8_t q[256];
        float d, dm;
        kq_scales(x, 15, q, out + 4, &d, &dm);
        put_f16(out, d);
        put_f16(out + 2, dm);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                out[16 + 32 * c + l] = (uint8_t)(q[64 * c + l] | (q[64 * c + 32 + l] << 4));
    }
}

/* Q5_K (176 bytes): d, dmin, 12 scale bytes, 32 bytes of fifth bits (bit 2c of byte l: element
 * 64c + l; bit 2c + 1: element 64c + 32 + l), then the nibbles as Q4_K's. */
static void quant_q5_k(const float *x, uint8_t *out, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, out += 176) {
        uint8_t q[256];
        float d, dm;
        kq_scales(x, 31, q, out + 4, &d, &dm);
        put_f16(out, d);
        put_f16(out + 2, dm);
        uint8_t *qh = out + 16, *ql = out + 48;
        memset(qh, 0, 32);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                const int a = q[64 * c + l], z = q[64 * c + 32 + l];
                ql[32 * c + l] = (uint8_t)((a & 15) | ((z & 15) << 4));
                qh[l] |= (uint8_t)(((a >> 4) << (2 * c)) | ((z >> 4) << (2 * c + 1)));
            }
    }
}

/* Q6_K (210 bytes): 128 bytes of low nibbles, 64 bytes of high bit pairs, 16 int8 scales (one
 * per 16 elements), f16 d; x ~ d * sc * (q - 32). In each half h (128 elements), step l < 32
 * holds elements l, l + 32, l + 64, l + 96: low nibbles of the first two in ql[l] / ql[l + 32]
 * (low), of the last two in their high nibbles, the bit pairs in qh[l] at shifts 0, 2, 4, 6. */
static void quant_q6_k(const float *x, uint8_t *out, int64_t n) {
    for (int64_t b = 0; b < n / 256; b++, x += 256, out += 210) {
        float sub[16], amax = 0;
        for (int i = 0; i < 16; i++) {
            float m = 0;
            for (int l = 0; l < 16; l++) m = fmaxf(m, fabsf(x[16 * i + l]));
            sub[i] = m / 31.0f;
            amax = fmaxf(amax, sub[i]);
        }
        const float d = fr_f16_to_f32(fr_f32_to_f16(amax / 127.0f));
        int8_t *sc = (int8_t *)(out + 192);
        int q[256];
        for (int i = 0; i < 16; i++) {
            sc[i] = (int8_t)clampi(d > 0 ? (int)lrintf(sub[i] / d) : 0, -128, 127);
            const float ds = d * sc[i];
            for (int l = 0; l < 16; l++)
                q[16 * i + l] = clampi(ds != 0 ? (int)lrintf(x[16 * i + l] / ds) : 0, -32, 31) + 32;
        }
        put_f16(out + 208, d);
        for (int h = 0; h < 2; h++) {
            uint8_t *ql = out + 64 * h, *qh = out + 128 + 32 * h;
            const int *qq = q + 128 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((qq[l] & 15) | ((qq[l + 64] & 15) << 4));
                ql[l + 32] = (uint8_t)((qq[l + 32] & 15) | ((qq[l + 96] & 15) << 4));
                qh[l] = (uint8_t)((qq[l] >> 4) | ((qq[l + 32] >> 4) << 2) | ((qq[l + 64] >> 4) << 4) |
                                  ((qq[l + 96] >> 4) << 6));
            }
        }
    }
}

static uint64_t row_bytes(int type, int64_t n) {
    switch (type) {
    case T_F32: return (uint64_t)n * 4;
    case T_F16: case T_BF16: return (uint64_t)n * 2;
    case T_Q8_0: return (uint64_t)(n / 32) * 34;
    case T_Q4_K: return (uint64_t)(n / 256) * 144;
    case T_Q5_K: return (uint64_t)(n / 256) * 176;
    case T_Q6_K: return (uint64_t)(n / 256) * 210;
    default: return (uint64_t)(n / 32) * 18;
    }
}

/* ---- tokenizer ---- */

/* GPT-2's byte -> printable code point table. */
static void byte_unicode(int cp[256]) {
    int n = 0;
    for (int b = 0; b < 256; b++) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp[b] = printable ? b : 256 + n++;
    }
}

static int utf8_put(char *o, int cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2; /* code points here are < 0x800 */
}

static cJSON *bytelevel(void) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "ByteLevel");
    cJSON_AddFalseToObject(o, "add_prefix_space");
    cJSON_AddFalseToObject(o, "trim_offsets");
    cJSON_AddFalseToObject(o, "use_regex");
    return o;
}

/* The default tokenizer.json text (malloc'd). */
static char *default_tokenizer_json(void) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddNullToObject(root, "truncation");
    cJSON_AddNullToObject(root, "padding");
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    static const char *specials[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 3; i++) {
        cJSON *a = cJSON_CreateObject();
        cJSON_AddNumberToObject(a, "id", 256 + i);
        cJSON_AddStringToObject(a, "content", specials[i]);
        cJSON_AddFalseToObject(a, "single_word");
        cJSON_AddFalseToObject(a, "lstrip");
        cJSON_AddFalseToObject(a, "rstrip");
        cJSON_AddFalseToObject(a, "normalized");
        cJSON_AddTrueToObject(a, "special");
        cJSON_AddItemToArray(added, a);
    }
    cJSON *norm = cJSON_AddObjectToObject(root, "normalizer");
    cJSON_AddStringToObject(norm, "type", "NFC");
    cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
    cJSON_AddStringToObject(pre, "type", "Sequence");
    cJSON *pres = cJSON_AddArrayToObject(pre, "pretokenizers");
    cJSON *split = cJSON_CreateObject();
    cJSON_AddStringToObject(split, "type", "Split");
    cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", QWEN2_REGEX);
    cJSON_AddStringToObject(split, "behavior", "Isolated");
    cJSON_AddFalseToObject(split, "invert");
    cJSON_AddItemToArray(pres, split);
    cJSON_AddItemToArray(pres, bytelevel());
    cJSON_AddItemToObject(root, "post_processor", bytelevel());
    cJSON_AddItemToObject(root, "decoder", bytelevel());
    cJSON *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "dropout");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddNullToObject(model, "continuing_subword_prefix");
    cJSON_AddNullToObject(model, "end_of_word_suffix");
    cJSON_AddFalseToObject(model, "fuse_unk");
    cJSON_AddFalseToObject(model, "byte_fallback");
    cJSON_AddFalseToObject(model, "ignore_merges");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    int cp[256];
    byte_unicode(cp);
    for (int b = 0; b < 256; b++) {
        char s[4] = {0};
        utf8_put(s, cp[b]);
        cJSON_AddNumberToObject(vocab, s, b);
    }
    cJSON_AddArrayToObject(model, "merges");
    char *txt = cJSON_Print(root);
    cJSON_Delete(root);
    return txt;
}

/* The vocabulary of a tokenizer.json, for sizes, special ids and GGUF metadata. */
typedef struct vocab {
    int n;              /* max id + 1 */
    char **tok;         /* token string by id ("[PADn]" for holes) */
    int32_t *type;      /* 1 normal, 3 control (special added), 4 user-defined, 5 unused */
    char **merges;      /* "a b" */
    int n_merges;       /* count */
    const char *pre;    /* GGUF pre-tokenizer name */
} vocab;

static void vocab_free(vocab *v) {
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tok);
    free(v->type);
    free(v->merges);
    memset(v, 0, sizeof *v);
}

static int vocab_find(const vocab *v, const char *s) {
    for (int i = 0; i < v->n; i++)
        if (v->tok[i] && !strcmp(v->tok[i], s)) return i;
    return -1;
}

/* Find the Split regex anywhere in the pre_tokenizer. */
static const char *find_regex(const cJSON *pre) {
    if (!cJSON_IsObject(pre)) return NULL;
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pre, "pattern");
    const cJSON *rx = cJSON_IsObject(pat) ? cJSON_GetObjectItemCaseSensitive(pat, "Regex") : NULL;
    if (cJSON_IsString(rx)) return rx->valuestring;
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    for (const cJSON *e = cJSON_IsArray(seq) ? seq->child : NULL; e; e = e->next) {
        const char *r = find_regex(e);
        if (r) return r;
    }
    return NULL;
}

static int vocab_parse(vocab *v, const char *json, const char *path, fr_err *err) {
    memset(v, 0, sizeof *v);
    cJSON *root = cJSON_Parse(json);
    const cJSON *model = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    const cJSON *vj = cJSON_IsObject(model) ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
    const cJSON *ty = cJSON_IsObject(model) ? cJSON_GetObjectItemCaseSensitive(model, "type") : NULL;
    const cJSON *added = root ? cJSON_GetObjectItemCaseSensitive(root, "added_tokens") : NULL;
    int rc = -1;
    if (!cJSON_IsObject(vj) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "BPE")) {
        fr_err_set(err, "%s: not a BPE tokenizer.json (need model.type \"BPE\" and model.vocab)",
                   path);
        goto done;
    }
    int maxid = -1;
    for (const cJSON *e = vj->child; e; e = e->next) {
        if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble > (1 << 24)) {
            fr_err_set(err, "%s: a vocab id is not an integer in 0..2^24", path);
            goto done;
        }
        maxid = FR_MAX(maxid, (int)e->valuedouble);
    }
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "id");
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > (1 << 24) ||
            !cJSON_IsString(c)) {
            fr_err_set(err, "%s: added_tokens entries need an integer id and a string content",
                       path);
            goto done;
        }
        maxid = FR_MAX(maxid, (int)id->valuedouble);
    }
    v->n = maxid + 1;
    v->tok = fr_xcalloc((size_t)FR_MAX(v->n, 1), sizeof *v->tok);
    v->type = fr_xcalloc((size_t)FR_MAX(v->n, 1), sizeof *v->type);
    for (const cJSON *e = vj->child; e; e = e->next) {
        int id = (int)e->valuedouble;
        free(v->tok[id]);
        v->tok[id] = fr_xstrdup(e->string);
        v->type[id] = 1;
    }
    for (const cJSON *e = cJSON_IsArray(added) ? added->child : NULL; e; e = e->next) {
        int id = (int)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble;
        free(v->tok[id]);
        v->tok[id] = fr_xstrdup(cJSON_GetObjectItemCaseSensitive(e, "content")->valuestring);
        v->type[id] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "special")) ? 3 : 4;
    }
    for (int i = 0; i < v->n; i++)
        if (!v->tok[i]) {
            char b[32];
            snprintf(b, sizeof b, "[PAD%d]", i);
            v->tok[i] = fr_xstrdup(b);
            v->type[i] = 5;
        }
    const cJSON *mj = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int nm = cJSON_IsArray(mj) ? cJSON_GetArraySize(mj) : 0;
    v->merges = fr_xcalloc((size_t)FR_MAX(nm, 1), sizeof *v->merges);
    for (const cJSON *e = nm ? mj->child : NULL; e; e = e->next) {
        if (cJSON_IsString(e)) {
            v->merges[v->n_merges++] = fr_xstrdup(e->valuestring);
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 &&
                   cJSON_IsString(e->child) && cJSON_IsString(e->child->next)) {
            fr_buf b = {0};
            fr_buf_printf(&b, "%s %s", e->child->valuestring, e->child->next->valuestring);
            v->merges[v->n_merges++] = fr_buf_cstr(&b);
        } else {
            fr_err_set(err, "%s: model.merges entries must be \"a b\" or [\"a\", \"b\"]", path);
            goto done;
        }
    }
    const char *rx = find_regex(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    v->pre = rx && !strcmp(rx, QWEN2_REGEX) ? "qwen2" : rx && !strcmp(rx, LLAMA3_REGEX) ? "llama-bpe" : NULL;
    rc = 0;
done:
    cJSON_Delete(root);
    if (rc) vocab_free(v);
    return rc;
}

/* ---- layout ---- */

static void plan_add(plan *p, const char *hf, const char *gg, int nd, int64_t ne0, int64_t ne1,
                     int kind, int type) {
    p->t = fr_xrealloc(p->t, (size_t)(p->n + 1) * sizeof *p->t);
    mk_tensor *t = &p->t[p->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->hf_name, sizeof t->hf_name, "%s", hf);
    snprintf(t->gguf_name, sizeof t->gguf_name, "%s", gg);
    t->n_dims = nd;
    t->ne0 = ne0;
    t->ne1 = ne1;
    t->kind = kind;
    t->type = kind ? T_F32 : type; /* GGUF keeps vectors F32; HF: set below */
    if (is_kquant(t->type) && ne0 % 256) t->type = T_Q8_0; /* rows the K-quants cannot cut */
    t->nbytes = row_bytes(t->type, ne0) * (uint64_t)ne1;
}

static void plan_build(plan *p, const opts *o) {
    int mt = o->gguf ? o->gtype : o->dtype;
    int64_t E = o->hidden, F = o->ffn, V = o->vocab;
    int64_t Q = o->heads * o->head_dim, KV = o->kv_heads * o->head_dim;
    bool qwen = !strcmp(o->arch, "qwen2");
    plan_add(p, "model.embed_tokens.weight", "token_embd.weight", 2, E, V, 0, mt);
    for (long l = 0; l < o->layers; l++) {
        struct { const char *h, *g; int nd; int64_t a, b; int kind; } ts[] = {
            {"input_layernorm.weight", "attn_norm.weight", 1, E, 1, 1},
            {"self_attn.q_proj.weight", "attn_q.weight", 2, E, Q, 0},
            {"self_attn.q_proj.bias", "attn_q.bias", 1, Q, 1, 2},
            {"self_attn.k_proj.weight", "attn_k.weight", 2, E, KV, 0},
            {"self_attn.k_proj.bias", "attn_k.bias", 1, KV, 1, 2},
            {"self_attn.v_proj.weight", "attn_v.weight", 2, E, KV, 0},
            {"self_attn.v_proj.bias", "attn_v.bias", 1, KV, 1, 2},
            {"self_attn.o_proj.weight", "attn_output.weight", 2, Q, E, 0},
            {"post_attention_layernorm.weight", "ffn_norm.weight", 1, E, 1, 1},
            {"mlp.gate_proj.weight", "ffn_gate.weight", 2, E, F, 0},
            {"mlp.up_proj.weight", "ffn_up.weight", 2, E, F, 0},
            {"mlp.down_proj.weight", "ffn_down.weight", 2, F, E, 0},
        };
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++) {
            if (ts[i].kind == 2 && !qwen) continue;
            char h[96], g[64];
            snprintf(h, sizeof h, "model.layers.%ld.%s", l, ts[i].h);
            snprintf(g, sizeof g, "blk.%ld.%s", l, ts[i].g);
            plan_add(p, h, g, ts[i].nd, ts[i].a, ts[i].b, ts[i].kind, mt);
        }
    }
    plan_add(p, "model.norm.weight", "output_norm.weight", 1, E, 1, 1, mt);
    if (!o->tied) plan_add(p, "lm_head.weight", "output.weight", 2, E, V, 0, mt);
    uint64_t off = 0;
    for (int i = 0; i < p->n; i++) {
        mk_tensor *t = &p->t[i];
        if (!o->gguf) { /* safetensors: one dtype for everything */
            t->type = o->dtype;
            t->nbytes = row_bytes(t->type, t->ne0) * (uint64_t)t->ne1;
        }
        t->offset = off;
        off += t->nbytes;
        if (o->gguf) off = (off + 31) / 32 * 32;
    }
    p->total = off;
}

/* ---- writing ---- */

typedef struct writer {
    FILE *f;              /* output */
    const char *path;     /* for messages */
    uint64_t done, total; /* bytes of tensor data written / to write */
    int last_pct;         /* progress shown */
    bool tty;             /* stderr is a terminal */
    bool failed;          /* a write failed */
} writer;

static void w_bytes(writer *w, const void *p, size_t n) {
    if (n && !w->failed && fwrite(p, 1, n, w->f) != n) w->failed = true;
}

static void w_progress(writer *w, uint64_t add) {
    w->done += add;
    if (w->total < (64u << 20)) return; /* small files: just the final line */
    int pct = w->total ? (int)(100.0 * (double)w->done / (double)w->total) : 100;
    int step = w->tty ? 1 : 10;
    if (w->last_pct >= 0 && pct / step == w->last_pct / step) return;
    w->last_pct = pct;
    fprintf(stderr, "%sfrugal mkmodel: writing %s: %3d%% (%.0f / %.0f MiB)%s", w->tty ? "\r" : "",
            w->path, pct, (double)w->done / MIB, (double)w->total / MIB,
            w->tty && pct < 100 ? "" : "\n");
    fflush(stderr);
}

/* Generate and write tensor i in slices of rows. */
/* One slice of rows of one tensor, generated and encoded by a worker thread. */
typedef struct slice_job {
    const mk_tensor *t;  /* the tensor */
    uint64_t seed;       /* generator seed of this slice */
    int64_t n;           /* elements (whole rows) */
    float *x;            /* scratch: the values */
    uint8_t *o;          /* the encoded bytes */
    size_t nb;           /* their count */
} slice_job;

static void *slice_run(void *arg) {
    slice_job *j = arg;
    const mk_tensor *t = j->t;
    rng r = {.s = j->seed};
    double sd = t->kind == 0 ? 1.0 / sqrt((double)t->ne0) : 0.02;
    float *x = j->x;
    int64_t n = j->n;
    for (int64_t i = 0; i < n; i++) x[i] = t->kind == 1 ? 1.0f : (float)(sd * rng_normal(&r));
    uint8_t *o = j->o;
    switch (t->type) {
    case T_F32: memcpy(o, x, (size_t)n * 4); break;
    case T_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = fr_f32_to_f16(x[i]);
            memcpy(o + 2 * i, &h, 2);
        }
        break;
    case T_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = fr_f32_to_bf16(x[i]);
            memcpy(o + 2 * i, &h, 2);
        }
        break;
    case T_Q8_0: quant_q8_0(x, o, n); break;
    case T_Q4_K: quant_q4_k(x, o, n); break;
    case T_Q5_K: quant_q5_k(x, o, n); break;
    case T_Q6_K: quant_q6_k(x, o, n); break;
    default: quant_q4_0(x, o, n); break;
    }
    return NULL;
}

#define MK_THREADS 16

/* Generate and write tensor `index` in slices of about 1M elements (whole rows), up to
 * MK_THREADS slices at a time; each slice has its own seed, so the bytes do not depend on the
 * thread count. */
static void write_tensor(writer *w, const mk_tensor *t, int index, unsigned long long seed) {
    int64_t rows_per = FR_MAX(1, (1 << 20) / t->ne0);
    int nt = FR_MAX(1, FR_MIN(fr_n_cores(), MK_THREADS));
    slice_job jobs[MK_THREADS];
    pthread_t th[MK_THREADS];
    bool started[MK_THREADS];
    for (int k = 0; k < nt; k++) {
        jobs[k].x = fr_xmalloc((size_t)(rows_per * t->ne0) * sizeof(float));
        jobs[k].o = fr_xmalloc((size_t)row_bytes(t->type, t->ne0) * (size_t)rows_per);
    }
    uint64_t slice = 0;
    for (int64_t r0 = 0; r0 < t->ne1 && !w->failed;) {
        int k = 0;
        for (; k < nt && r0 < t->ne1; k++, slice++) {
            int64_t nr = FR_MIN(rows_per, t->ne1 - r0);
            uint64_t s = seed * 0x9e3779b97f4a7c15ull + (uint64_t)index * 0xd1b54a32d192ed03ull +
                         slice * 0x8cb92ba72f3d8dd7ull + 1;
            jobs[k].t = t;
            jobs[k].seed = s;
            jobs[k].n = nr * t->ne0;
            jobs[k].nb = (size_t)row_bytes(t->type, t->ne0) * (size_t)nr;
            started[k] = k > 0 && pthread_create(&th[k], NULL, slice_run, &jobs[k]) == 0;
            r0 += nr;
        }
        for (int i = 0; i < k; i++)
            if (!started[i]) slice_run(&jobs[i]);
        for (int i = 0; i < k; i++) {
            if (started[i]) pthread_join(th[i], NULL);
            w_bytes(w, jobs[i].o, jobs[i].nb);
            w_progress(w, jobs[i].nb);
        }
    }
    for (int k = 0; k < nt; k++) {
        free(jobs[k].x);
        free(jobs[k].o);
    }
}

/* GGUF metadata helpers */
static void g_u32(fr_buf *b, uint32_t v) { fr_buf_append(b, &v, 4); }
static void g_u64(fr_buf *b, uint64_t v) { fr_buf_append(b, &v, 8); }
static void g_str(fr_buf *b, const char *s) { g_u64(b, strlen(s)); fr_buf_append(b, s, strlen(s)); }
static void g_key(fr_buf *b, const char *arch, const char *k, uint32_t type) {
    char full[128];
    if (arch) snprintf(full, sizeof full, "%s.%s", arch, k);
    else snprintf(full, sizeof full, "%s", k);
    g_str(b, full);
    g_u32(b, type);
}
static void kv_u32(fr_buf *b, int *n, const char *arch, const char *k, uint32_t v) { g_key(b, arch, k, 4); g_u32(b, v); (*n)++; }
static void kv_f32(fr_buf *b, int *n, const char *arch, const char *k, float v) { g_key(b, arch, k, 6); fr_buf_append(b, &v, 4); (*n)++; }
static void kv_str(fr_buf *b, int *n, const char *arch, const char *k, const char *v) { g_key(b, arch, k, 8); g_str(b, v); (*n)++; }
static void kv_bool(fr_buf *b, int *n, const char *arch, const char *k, bool v) { g_key(b, arch, k, 7); uint8_t c = v; fr_buf_append(b, &c, 1); (*n)++; }

static int eos_of(const vocab *v) {
    const char *c[] = {"<|im_end|>", "<|eot_id|>", "<|endoftext|>", "<|end_of_text|>"};
    for (int i = 0; i < 4; i++) {
        int id = vocab_find(v, c[i]);
        if (id >= 0) return id;
    }
    return -1;
}

static bool has_chatml(const vocab *v) {
    return vocab_find(v, "<|im_start|>") >= 0 && vocab_find(v, "<|im_end|>") >= 0;
}

static double rope_theta(const opts *o) { return !strcmp(o->arch, "qwen2") ? 1000000.0 : 500000.0; }

/* Files next to a given tokenizer.json (tokenizer_config.json, chat_template.jinja), or NULL. */
static char *sibling(const char *tokenizer, const char *name) {
    if (!tokenizer) return NULL;
    const char *slash = strrchr(tokenizer, '/');
    char *dir = slash ? fr_xstrndup(tokenizer, (size_t)(slash - tokenizer)) : fr_xstrdup(".");
    char *p = fr_path_join(dir, name);
    free(dir);
    char *txt = fr_path_exists(p) ? fr_read_file(p, 64u << 20, NULL, NULL) : NULL;
    free(p);
    return txt;
}

/* The chat template to ship: the given tokenizer's own, else ChatML when its tokens exist. */
static char *chat_template_for(const opts *o, const vocab *v) {
    char *t = sibling(o->tokenizer, "chat_template.jinja");
    if (t) return t;
    char *tc = sibling(o->tokenizer, "tokenizer_config.json");
    if (tc) {
        cJSON *j = cJSON_Parse(tc);
        const cJSON *ct = cJSON_GetObjectItemCaseSensitive(j, "chat_template");
        if (cJSON_IsString(ct)) t = fr_xstrdup(ct->valuestring);
        cJSON_Delete(j);
        free(tc);
        if (t) return t;
    }
    return has_chatml(v) ? fr_xstrdup(CHATML_TEMPLATE) : NULL;
}

static int write_gguf(const opts *o, const plan *p, const vocab *v, fr_err *err) {
    if (!v->pre) {
        fr_err_set(err, "%s: its Split regex is neither Qwen2's nor Llama 3's, so the GGUF "
                        "pre-tokenizer cannot be named", o->tokenizer);
        return -1;
    }
    const char *a = o->arch;
    fr_buf kv = {0};
    int n = 0;
    kv_str(&kv, &n, NULL, "general.architecture", a);
    kv_str(&kv, &n, NULL, "general.name", "random");
    kv_u32(&kv, &n, NULL, "general.alignment", 32);
    /* llama_ftype of the matrices: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_0 2 */
    /* MOSTLY_Q4_K_S 14, MOSTLY_Q5_K_S 16, MOSTLY_Q6_K 18 */
    static const uint32_t ftype[] = {0, 1, 32, 7, 2, 14, 16, 18};
    kv_u32(&kv, &n, NULL, "general.file_type", ftype[o->gtype]);
    /* the spec: present whenever a tensor is quantized (ggml's GGML_QNT_VERSION is 2) */
    if (o->gtype == T_Q8_0 || o->gtype == T_Q4_0 || is_kquant(o->gtype))
        kv_u32(&kv, &n, NULL, "general.quantization_version", 2);
    kv_u32(&kv, &n, a, "context_length", (uint32_t)o->ctx);
    kv_u32(&kv, &n, a, "embedding_length", (uint32_t)o->hidden);
    kv_u32(&kv, &n, a, "block_count", (uint32_t)o->layers);
    kv_u32(&kv, &n, a, "feed_forward_length", (uint32_t)o->ffn);
    kv_u32(&kv, &n, a, "attention.head_count", (uint32_t)o->heads);
    kv_u32(&kv, &n, a, "attention.head_count_kv", (uint32_t)o->kv_heads);
    kv_u32(&kv, &n, a, "attention.key_length", (uint32_t)o->head_dim);
    kv_u32(&kv, &n, a, "attention.value_length", (uint32_t)o->head_dim);
    kv_u32(&kv, &n, a, "rope.dimension_count", (uint32_t)o->head_dim);
    kv_f32(&kv, &n, a, "rope.freq_base", (float)rope_theta(o));
    kv_f32(&kv, &n, a, "attention.layer_norm_rms_epsilon", 1e-6f);
    kv_str(&kv, &n, NULL, "tokenizer.ggml.model", "gpt2");
    kv_str(&kv, &n, NULL, "tokenizer.ggml.pre", v->pre);
    /* llama.cpp's n_vocab is the length of tokenizer.ggml.tokens and token_embd must have exactly
     * that many rows: the rows past the tokenizer get "[PADi]" tokens of type 5 (unused), as
     * llama.cpp's convert_hf_to_gguf.py writes them */
    const long nv = o->vocab;
    g_key(&kv, NULL, "tokenizer.ggml.tokens", 9);
    g_u32(&kv, 8);
    g_u64(&kv, (uint64_t)nv);
    for (long i = 0; i < nv; i++) {
        char pad[32];
        snprintf(pad, sizeof pad, "[PAD%ld]", i);
        g_str(&kv, i < v->n ? v->tok[i] : pad);
    }
    n++;
    g_key(&kv, NULL, "tokenizer.ggml.token_type", 9);
    g_u32(&kv, 5);
    g_u64(&kv, (uint64_t)nv);
    fr_buf_append(&kv, v->type, (size_t)v->n * 4);
    for (long i = v->n; i < nv; i++) g_u32(&kv, 5);
    n++;
    g_key(&kv, NULL, "tokenizer.ggml.merges", 9);
    g_u32(&kv, 8);
    g_u64(&kv, (uint64_t)v->n_merges);
    for (int i = 0; i < v->n_merges; i++) g_str(&kv, v->merges[i]);
    n++;
    int eos = eos_of(v), bos = vocab_find(v, "<|begin_of_text|>");
    if (eos >= 0) kv_u32(&kv, &n, NULL, "tokenizer.ggml.eos_token_id", (uint32_t)eos);
    if (bos >= 0) kv_u32(&kv, &n, NULL, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    kv_bool(&kv, &n, NULL, "tokenizer.ggml.add_bos_token", bos >= 0);
    char *tmpl = chat_template_for(o, v);
    if (tmpl) kv_str(&kv, &n, NULL, "tokenizer.chat_template", tmpl);
    free(tmpl);

    fr_buf h = {0};
    fr_buf_append(&h, "GGUF", 4);
    g_u32(&h, 3);
    g_u64(&h, (uint64_t)p->n);
    g_u64(&h, (uint64_t)n);
    fr_buf_append(&h, kv.data, kv.len);
    fr_buf_free(&kv);
    for (int i = 0; i < p->n; i++) {
        const mk_tensor *t = &p->t[i];
        g_str(&h, t->gguf_name);
        g_u32(&h, (uint32_t)t->n_dims);
        g_u64(&h, (uint64_t)t->ne0);
        if (t->n_dims == 2) g_u64(&h, (uint64_t)t->ne1);
        g_u32(&h, type_ggml[t->type]);
        g_u64(&h, t->offset);
    }
    while (h.len % 32) fr_buf_append(&h, "", 1);

    writer w = {.path = o->out, .total = p->total, .last_pct = -1, .tty = isatty(2)};
    if (fr_mkdir_parent(o->out, 0755, err)) {
        fr_buf_free(&h);
        return -1;
    }
    w.f = fopen(o->out, "wb");
    if (!w.f) {
        fr_err_set(err, "%s: cannot create: %s", o->out, strerror(errno));
        fr_buf_free(&h);
        return -1;
    }
    w_bytes(&w, h.data, h.len);
    fr_buf_free(&h);
    static const uint8_t zeros[32];
    uint64_t pos = 0;
    for (int i = 0; i < p->n && !w.failed; i++) {
        write_tensor(&w, &p->t[i], i, o->seed);
        pos = p->t[i].offset + p->t[i].nbytes;
        uint64_t next = i + 1 < p->n ? p->t[i + 1].offset : (pos + 31) / 32 * 32;
        w_bytes(&w, zeros, (size_t)(next - pos));
        w_progress(&w, next - pos);
    }
    if (fclose(w.f) != 0) w.failed = true;
    if (w.failed) {
        fr_err_set(err, "%s: write failed: %s", o->out, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_text_file(const char *dir, const char *name, const char *text, fr_err *err) {
    char *path = fr_path_join(dir, name);
    FILE *f = fopen(path, "wb");
    size_t n = strlen(text);
    bool ok = f && fwrite(text, 1, n, f) == n;
    if (f && fclose(f) != 0) ok = false;
    if (!ok) fr_err_set(err, "%s: cannot write: %s", path, strerror(errno));
    free(path);
    return ok ? 0 : -1;
}

static int write_hf(const opts *o, const plan *p, const vocab *v, const char *tok_json,
                    fr_err *err) {
    if (fr_mkdir_p(o->out, 0755, err)) return -1;
    bool qwen = !strcmp(o->arch, "qwen2");
    cJSON *c = cJSON_CreateObject();
    cJSON *archs = cJSON_AddArrayToObject(c, "architectures");
    cJSON_AddItemToArray(archs, cJSON_CreateString(qwen ? "Qwen2ForCausalLM" : "LlamaForCausalLM"));
    cJSON_AddStringToObject(c, "model_type", o->arch);
    cJSON_AddNumberToObject(c, "hidden_size", (double)o->hidden);
    cJSON_AddNumberToObject(c, "num_hidden_layers", (double)o->layers);
    cJSON_AddNumberToObject(c, "num_attention_heads", (double)o->heads);
    cJSON_AddNumberToObject(c, "num_key_value_heads", (double)o->kv_heads);
    cJSON_AddNumberToObject(c, "head_dim", (double)o->head_dim);
    cJSON_AddNumberToObject(c, "intermediate_size", (double)o->ffn);
    cJSON_AddNumberToObject(c, "vocab_size", (double)o->vocab);
    cJSON_AddNumberToObject(c, "max_position_embeddings", (double)o->ctx);
    cJSON_AddNumberToObject(c, "rms_norm_eps", 1e-6);
    cJSON_AddNumberToObject(c, "rope_theta", rope_theta(o));
    cJSON_AddBoolToObject(c, "tie_word_embeddings", o->tied);
    cJSON_AddStringToObject(c, "hidden_act", "silu");
    cJSON_AddStringToObject(c, "torch_dtype", o->dtype == T_F32 ? "float32" : o->dtype == T_F16 ? "float16" : "bfloat16");
    int eos = eos_of(v), bos = vocab_find(v, "<|begin_of_text|>");
    if (bos >= 0) cJSON_AddNumberToObject(c, "bos_token_id", bos);
    else cJSON_AddNullToObject(c, "bos_token_id");
    if (eos >= 0) cJSON_AddNumberToObject(c, "eos_token_id", eos);
    char *txt = cJSON_Print(c);
    cJSON_Delete(c);
    int rc = write_text_file(o->out, "config.json", txt, err);
    free(txt);
    if (rc) return -1;
    /* tokenizer_config.json: the given tokenizer's own (bos/eos strings, template), else ours */
    txt = sibling(o->tokenizer, "tokenizer_config.json");
    char *jinja = sibling(o->tokenizer, "chat_template.jinja");
    if (!txt) {
        cJSON *tc = cJSON_CreateObject();
        if (bos >= 0) cJSON_AddStringToObject(tc, "bos_token", v->tok[bos]);
        else cJSON_AddNullToObject(tc, "bos_token");
        if (eos >= 0) cJSON_AddStringToObject(tc, "eos_token", v->tok[eos]);
        char *tmpl = chat_template_for(o, v);
        if (tmpl && !jinja) cJSON_AddStringToObject(tc, "chat_template", tmpl);
        free(tmpl);
        txt = cJSON_Print(tc);
        cJSON_Delete(tc);
    }
    rc = write_text_file(o->out, "tokenizer_config.json", txt, err);
    if (!rc && jinja) rc = write_text_file(o->out, "chat_template.jinja", jinja, err);
    free(jinja);
    free(txt);
    if (rc || write_text_file(o->out, "tokenizer.json", tok_json, err)) return -1;

    /* safetensors header, padded with spaces to a multiple of 8 */
    cJSON *hj = cJSON_CreateObject();
    cJSON_AddStringToObject(cJSON_AddObjectToObject(hj, "__metadata__"), "format", "pt");
    for (int i = 0; i < p->n; i++) {
        const mk_tensor *t = &p->t[i];
        cJSON *e = cJSON_AddObjectToObject(hj, t->hf_name);
        cJSON_AddStringToObject(e, "dtype", type_st_name[t->type]);
        cJSON *sh = cJSON_AddArrayToObject(e, "shape");
        if (t->n_dims == 2) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne1));
        cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)t->ne0));
        cJSON *of = cJSON_AddArrayToObject(e, "data_offsets");
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)t->offset));
        cJSON_AddItemToArray(of, cJSON_CreateNumber((double)(t->offset + t->nbytes)));
    }
    char *hdr = cJSON_PrintUnformatted(hj);
    cJSON_Delete(hj);
    fr_buf h = {0};
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    uint64_t hl64 = padded;
    fr_buf_append(&h, &hl64, 8);
    fr_buf_append(&h, hdr, hl);
    while (h.len < 8 + padded) fr_buf_append(&h, " ", 1);
    free(hdr);
    char *path = fr_path_join(o->out, "model.safetensors");
    writer w = {.path = path, .total = p->total, .last_pct = -1, .tty = isatty(2)};
    w.f = fopen(path, "wb");
    if (!w.f) {
        fr_err_set(err, "%s: cannot create: %s", path, strerror(errno));
        fr_buf_free(&h);
        free(path);
        return -1;
    }
    w_bytes(&w, h.data, h.len);
    fr_buf_free(&h);
    for (int i = 0; i < p->n && !w.failed; i++) write_tensor(&w, &p->t[i], i, o->seed);
    if (fclose(w.f) != 0) w.failed = true;
    if (w.failed) fr_err_set(err, "%s: write failed: %s", path, strerror(errno));
    free(path);
    return w.failed ? -1 : 0;
}

/* ---- command line ---- */

static const char *USAGE =
    "usage: frugal mkmodel --out PATH --arch qwen2|llama --hidden N --layers N --heads N\n"
    "                      --kv-heads N --ffn N --vocab N [options]\n"
    "  --out PATH           output folder (hf) or .gguf file\n"
    "  --head-dim N         per-head size (default hidden / heads)\n"
    "  --ctx N              max_position_embeddings / context_length (default 4096)\n"
    "  --tied               tie the output projection to the embedding\n"
    "  --format hf|gguf     default: gguf when --out ends in .gguf, else hf\n"
    "  --dtype f32|f16|bf16 safetensors dtype (default f32)\n"
    "  --gguf-type f32|f16|q8_0|q4_0|q4_k|q5_k|q6_k\n"
    "                                  GGUF matrix type (default f32; vectors stay f32; K-quant\n"
    "                                  matrices whose rows are not a multiple of 256: q8_0)\n"
    "  --tokenizer FILE     tokenizer.json to use (default: 256 byte tokens + 3 specials)\n"
    "  --seed S             random seed (default 0)\n";

static int usage_error(const char *msg) {
    fprintf(stderr, "frugal mkmodel: %s (see frugal mkmodel --help)\n", msg);
    return 2;
}

static int pick(const char *s, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) return i;
    return -1;
}

int fr_cmd_mkmodel(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.ctx = 4096;
    const char *format = NULL, *dtype = "f32", *gtype = "f32";
    struct { const char *name; long *dst; int hi; } nums[] = {
        {"--hidden", &o.hidden, 1 << 20}, {"--layers", &o.layers, 4096},
        {"--heads", &o.heads, 4096},      {"--kv-heads", &o.kv_heads, 4096},
        {"--ffn", &o.ffn, 1 << 22},       {"--vocab", &o.vocab, 1 << 24},
        {"--head-dim", &o.head_dim, 4096}, {"--ctx", &o.ctx, INT32_MAX},
    };
    uint64_t seed = 0;
    fr_flags f;
    fr_flags_init(&f, "mkmodel", argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_help(&f)) {
            fputs(USAGE, stdout);
            return 0;
        }
        bool hit = fr_flag_switch(&f, "--tied", &o.tied) || fr_flag_str(&f, "--out", &o.out) ||
                   fr_flag_str(&f, "--arch", &o.arch) || fr_flag_str(&f, "--format", &format) ||
                   fr_flag_str(&f, "--dtype", &dtype) || fr_flag_str(&f, "--gguf-type", &gtype) ||
                   fr_flag_str(&f, "--tokenizer", &o.tokenizer) ||
                   fr_flag_u64(&f, "--seed", &seed);
        for (size_t k = 0; k < FR_ARRAY_LEN(nums) && !hit; k++) {
            int v;
            if ((hit = fr_flag_int(&f, nums[k].name, 1, nums[k].hi, &v)) && !f.rc) *nums[k].dst = v;
        }
        if (!hit) return fr_flags_unknown(&f);
    }
    if (f.rc) return f.rc;
    o.seed = seed;
    if (!o.out) return usage_error("--out is required");
    if (!o.arch || (strcmp(o.arch, "qwen2") && strcmp(o.arch, "llama")))
        return usage_error("--arch must be qwen2 or llama");
    if (!o.hidden || !o.layers || !o.heads || !o.ffn || !o.vocab)
        return usage_error("--hidden, --layers, --heads, --ffn and --vocab are required");
    if (!o.kv_heads) o.kv_heads = o.heads;
    if (o.heads % o.kv_heads) return usage_error("--heads must be a multiple of --kv-heads");
    if (!o.head_dim) {
        if (o.hidden % o.heads) return usage_error("--hidden is not a multiple of --heads; give --head-dim");
        o.head_dim = o.hidden / o.heads;
    }
    if (o.head_dim % 2) return usage_error("the head dimension must be even");
    size_t ol = strlen(o.out);
    o.gguf = format ? !strcmp(format, "gguf") : (ol > 5 && !strcmp(o.out + ol - 5, ".gguf"));
    if (format && strcmp(format, "gguf") && strcmp(format, "hf"))
        return usage_error("--format must be hf or gguf");
    static const char *const dnames[] = {"f32", "f16", "bf16"};
    static const char *const gnames[] = {"f32", "f16", "", "q8_0", "q4_0", "q4_k", "q5_k", "q6_k"};
    o.dtype = pick(dtype, dnames, 3);
    o.gtype = pick(gtype, gnames, 8);
    if (o.dtype < 0) return usage_error("--dtype must be f32, f16 or bf16");
    if (o.gtype < 0 || o.gtype == T_BF16)
        return usage_error("--gguf-type must be f32, f16, q8_0, q4_0, q4_k, q5_k or q6_k");
    if (o.gguf && o.gtype >= T_Q8_0 &&
        (o.hidden % 32 || o.ffn % 32 || (o.heads * o.head_dim) % 32))
        return usage_error("q8_0/q4_0 need --hidden, --ffn and heads x head-dim to be multiples of 32");

    fr_err err = {0};
    char *tok_json = NULL;
    if (o.tokenizer) {
        tok_json = fr_read_file(o.tokenizer, 256u << 20, NULL, &err);
        if (!tok_json) {
            fprintf(stderr, "frugal mkmodel: %s\n", err.msg);
            return 1;
        }
    } else {
        tok_json = default_tokenizer_json();
    }
    vocab v;
    if (vocab_parse(&v, tok_json, o.tokenizer ? o.tokenizer : "default tokenizer", &err) != 0) {
        fprintf(stderr, "frugal mkmodel: %s\n", err.msg);
        free(tok_json);
        return 1;
    }
    int rc = 0;
    if (v.n > o.vocab) {
        fprintf(stderr, "frugal mkmodel: the tokenizer has %d tokens; --vocab must be at least "
                        "that\n", v.n);
        rc = 2;
    }
    plan p = {0};
    if (!rc) {
        plan_build(&p, &o);
        double t0 = fr_time_s();
        if ((o.gguf ? write_gguf(&o, &p, &v, &err) : write_hf(&o, &p, &v, tok_json, &err)) != 0) {
            fprintf(stderr, "frugal mkmodel: %s\n", err.msg);
            rc = 1;
        } else {
            int64_t params = 0;
            for (int i = 0; i < p.n; i++) params += p.t[i].ne0 * p.t[i].ne1;
            fprintf(stderr, "frugal mkmodel: wrote %s (%s, %s): %.1fM params, %.1f MiB in %.1f s\n",
                    o.out, o.arch, o.gguf ? "gguf" : "hf", (double)params / 1e6,
                    (double)p.total / MIB, fr_time_s() - t0);
        }
    }
    free(p.t);
    vocab_free(&v);
    free(tok_json);
    return rc;
}
