/* gguf_spec.c — an independent check of GGUF files: the GGUF specification (ggml's
 * docs/gguf.md, version 3) and what llama.cpp's loader requires of the `llama` and `qwen2`
 * architectures and of the `gpt2` (byte-level BPE) and `llama` (SentencePiece) tokenizers.
 *
 *   gguf-spec FILE...     one line per problem, "FILE: ok (...)" for a clean file;
 *                         exit status 0 only when every file is clean.
 *
 * It shares no code with the project's reader (src/model/gguf.c) or writer (src/tools/mkmodel.c):
 * it was written from the specification and from llama.cpp's sources, so a misreading in ours
 * does not hide the same misreading here. Where llama.cpp is stricter than the specification,
 * llama.cpp's rule is checked, and the comment says where it comes from:
 *   - gguf.cpp: nested arrays are rejected; general.alignment must be uint32 and a power of two;
 *     tensor names are shorter than 64 bytes and unique; each tensor's offset equals the sum of
 *     the aligned sizes of the tensors before it (data packed in info order); ne[0] is a multiple
 *     of the type's block size.
 *   - llama-model-loader.cpp: a key read as uint32/float/bool/string must have exactly that type
 *     ("key ... has wrong type"); every tensor's shape must equal the expected one
 *     (check_tensor_dims), and every tensor in the file must be used by the architecture.
 *   - llama-model.cpp (llama, qwen2): token_embd.weight is {n_embd, n_vocab} where n_vocab is the
 *     number of entries of tokenizer.ggml.tokens; output.weight is optional (tied); qwen2 needs the
 *     q/k/v biases; llama accepts rope_freqs.weight; n_rot must equal the head size.
 *   - llama-vocab.cpp (gpt2): tokenizer.ggml.merges must exist; each merge is split at its first
 *     space after position 0; token strings must be unique (an assertion otherwise); special ids
 *     are read as uint32; an unknown tokenizer.ggml.pre silently falls back to another regex.
 *   - llama-vocab.cpp (llama, SentencePiece): no merges and no pre are read; eos defaults to 2;
 *     the byte fallback finds "<0xXX>" or the byte itself as a token, or throws.
 *
 * The parser is bounds-checked everywhere (tests/fuzz/fuzz_gguf_spec.c runs it on arbitrary
 * bytes). Built with -DGGUF_SPEC_NO_MAIN it exposes only gguf_spec_check().
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- problems ---- */

typedef struct spec_ctx {
    const char *name;   /* file name for messages */
    FILE *out;          /* where problems go, or NULL (quiet) */
    int problems;       /* count */
} spec_ctx;

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static void problem(spec_ctx *c, const char *fmt, ...) {
    c->problems++;
    if (!c->out || c->problems > 40) return; /* the first 40 are enough to act on */
    va_list ap;
    va_start(ap, fmt);
    fprintf(c->out, "%s: ", c->name);
    vfprintf(c->out, fmt, ap);
    fputc('\n', c->out);
    va_end(ap);
}

/* ---- bounded little-endian reader ---- */

typedef struct rd {
    const uint8_t *p;   /* the file */
    size_t n;           /* its size */
    size_t pos;         /* next byte */
    bool bad;           /* a read went past the end */
} rd;

static bool rd_need(rd *r, uint64_t k) {
    if (r->bad || k > r->n - r->pos) {
        r->bad = true;
        return false;
    }
    return true;
}
static uint32_t rd_u32(rd *r) {
    if (!rd_need(r, 4)) return 0;
    const uint8_t *b = r->p + r->pos;
    r->pos += 4;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static uint64_t rd_u64(rd *r) {
    uint64_t lo = rd_u32(r), hi = rd_u32(r);
    return lo | hi << 32;
}
/* A GGUF string: u64 length, then bytes. Returns the bytes in place (not NUL-terminated). */
static const uint8_t *rd_str(rd *r, uint64_t *len) {
    *len = rd_u64(r);
    if (!rd_need(r, *len)) return NULL;
    const uint8_t *s = r->p + r->pos;
    r->pos += (size_t)*len;
    return s;
}

static bool utf8_valid(const uint8_t *s, uint64_t n) {
    uint64_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        int k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xE0) == 0xC0) {
            k = 1, cp = c & 0x1Fu;
        } else if ((c & 0xF0) == 0xE0) {
            k = 2, cp = c & 0x0Fu;
        } else if ((c & 0xF8) == 0xF0) {
            k = 3, cp = c & 0x07u;
        } else {
            return false;
        }
        if (n - i <= (uint64_t)k) return false; /* truncated sequence */
        for (int j = 1; j <= k; j++) {
            uint8_t d = s[i + (uint64_t)j];
            if ((d & 0xC0) != 0x80) return false;
            cp = cp << 6 | (d & 0x3Fu);
        }
        if ((k == 1 && cp < 0x80) || (k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) ||
            cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
            return false; /* overlong, out of range, surrogate */
        i += (uint64_t)k + 1;
    }
    return true;
}

/* Orders byte strings (memcmp, then length). */
static int bytes_cmp(const uint8_t *a, uint64_t an, const uint8_t *b, uint64_t bn) {
    uint64_t m = an < bn ? an : bn;
    int r = m ? memcmp(a, b, (size_t)m) : 0;
    return r ? r : (an > bn) - (an < bn);
}

/* ---- metadata ---- */

enum { V_U8, V_I8, V_U16, V_I16, V_U32, V_I32, V_F32, V_BOOL, V_STR, V_ARR, V_U64, V_I64, V_F64,
       V_COUNT };
static const char *const vname[V_COUNT] = {"u8",  "i8",   "u16", "i16", "u32", "i32", "f32",
                                           "bool", "str", "arr", "u64", "i64", "f64"};
static const int vsize[V_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct kv {
    const uint8_t *key;   /* key bytes */
    uint64_t klen;        /* their count */
    uint32_t type;        /* value type */
    uint32_t etype;       /* arrays: element type */
    uint64_t n;           /* arrays: element count */
    size_t at;            /* file offset of the value (arrays: of the first element) */
} kv;

/* The spec's key rule: ASCII, segments of lower_snake_case separated by '.', <= 65535 bytes. */
static bool key_valid(const uint8_t *k, uint64_t n) {
    if (n == 0 || n > 65535) return false;
    bool seg_empty = true;
    for (uint64_t i = 0; i < n; i++) {
        uint8_t c = k[i];
        if (c == '.') {
            if (seg_empty) return false;
            seg_empty = true;
        } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_') {
            seg_empty = false;
        } else {
            return false;
        }
    }
    return !seg_empty;
}

/* Reads and validates one value of type t (not an array) at r. */
static void read_scalar(spec_ctx *c, rd *r, uint32_t t, const kv *k, uint64_t idx) {
    if (t == V_STR) {
        uint64_t len;
        const uint8_t *s = rd_str(r, &len);
        if (s && !utf8_valid(s, len))
            problem(c, "key '%.*s'[%llu]: string is not valid UTF-8 (the spec says UTF-8)",
                    (int)(k->klen > 80 ? 80 : k->klen), (const char *)k->key, (unsigned long long)idx);
        return;
    }
    if (!rd_need(r, (uint64_t)vsize[t])) return;
    if (t == V_BOOL && r->p[r->pos] > 1)
        problem(c, "key '%.*s'[%llu]: bool byte %u (the spec allows only 0 and 1)", (int)(k->klen > 80 ? 80 : k->klen),
                (const char *)k->key, (unsigned long long)idx, r->p[r->pos]);
    r->pos += (size_t)vsize[t];
}

static uint32_t kv_u32(const rd *r, const kv *k) {
    const uint8_t *b = r->p + k->at;
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}
static float kv_f32(const rd *r, const kv *k) {
    uint32_t u = kv_u32(r, k);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
/* A string value. */
static const uint8_t *kv_str(const rd *r, const kv *k, uint64_t *len) {
    rd t = {r->p, r->n, k->at, false};
    return rd_str(&t, len);
}

/* ---- ggml types (block size, bytes per block), from ggml's type definitions ---- */

typedef struct gtype {
    uint32_t id;      /* ggml_type */
    const char *name; /* its name */
    int blck;         /* elements per block */
    int bytes;        /* bytes per block */
} gtype;

static const gtype gtypes[] = {
    {0, "F32", 1, 4},      {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},  {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},   {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},  {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210}, {30, "BF16", 1, 2},
};

static const gtype *gtype_of(uint32_t id) {
    for (size_t i = 0; i < sizeof gtypes / sizeof gtypes[0]; i++)
        if (gtypes[i].id == id) return &gtypes[i];
    return NULL;
}

/* ---- tensors ---- */

typedef struct tinfo {
    const uint8_t *name;  /* name bytes */
    uint64_t nlen;        /* their count */
    uint32_t n_dims;      /* 1..4 */
    uint64_t ne[4];       /* dims, ne[0] innermost; unused ones 1 */
    uint32_t type;        /* ggml type */
    uint64_t offset;      /* in the data section */
    uint64_t nbytes;      /* size (0 when the type is unknown) */
    bool used;            /* matched by the architecture's table */
} tinfo;

typedef struct gfile {
    rd r;                 /* the bytes */
    uint32_t version;     /* header */
    kv *kvs;              /* metadata in file order */
    uint64_t n_kv;        /* count */
    const kv **kv_ix;     /* the same sorted by key, for lookups */
    tinfo *ts;            /* tensor infos in file order */
    uint64_t n_t;         /* count */
    tinfo **t_ix;         /* the same sorted by name */
    uint32_t align;       /* general.alignment or 32 */
} gfile;

static int kv_ix_cmp(const void *x, const void *y) {
    const kv *a = *(const kv *const *)x, *b = *(const kv *const *)y;
    return bytes_cmp(a->key, a->klen, b->key, b->klen);
}
static int t_ix_cmp(const void *x, const void *y) {
    const tinfo *a = *(const tinfo *const *)x, *b = *(const tinfo *const *)y;
    return bytes_cmp(a->name, a->nlen, b->name, b->nlen);
}

static const kv *find_kv(const gfile *g, const char *key) {
    kv probe = {.key = (const uint8_t *)key, .klen = strlen(key)};
    const kv *pp = &probe, **hit = bsearch(&pp, g->kv_ix, (size_t)g->n_kv, sizeof *g->kv_ix, kv_ix_cmp);
    return hit ? *hit : NULL;
}

static tinfo *find_t(const gfile *g, const char *name) {
    tinfo probe = {.name = (const uint8_t *)name, .nlen = strlen(name)};
    tinfo *pp = &probe, **hit = bsearch(&pp, g->t_ix, (size_t)g->n_t, sizeof *g->t_ix, t_ix_cmp);
    return hit ? *hit : NULL;
}

/* Typed access to a key. want: the exact value type llama.cpp reads it as. Returns the kv, or
 * NULL when absent (a problem if required) or of another type (always a problem). */
static const kv *want_kv(spec_ctx *c, const gfile *g, const char *key, uint32_t want, bool required) {
    const kv *k = find_kv(g, key);
    if (!k) {
        if (required) problem(c, "missing key '%s' (%s)", key, vname[want]);
        return NULL;
    }
    if (k->type != want) {
        problem(c, "key '%s' has type %s; llama.cpp reads it as %s and refuses the file", key,
                k->type < V_COUNT ? vname[k->type] : "?", vname[want]);
        return NULL;
    }
    return k;
}

/* An array key with a given element type. */
static const kv *want_arr(spec_ctx *c, const gfile *g, const char *key, uint32_t etype, bool required) {
    const kv *k = want_kv(c, g, key, V_ARR, required);
    if (k && k->etype != etype) {
        problem(c, "key '%s' is an array of %s; expected an array of %s", key,
                k->etype < V_COUNT ? vname[k->etype] : "?", vname[etype]);
        return NULL;
    }
    return k;
}

static int parse(spec_ctx *c, gfile *g) {
    rd *r = &g->r;
    if (r->n < 24 || memcmp(r->p, "GGUF", 4)) {
        problem(c, "not a GGUF file (magic)");
        return -1;
    }
    r->pos = 4;
    g->version = rd_u32(r);
    if (g->version != 3) problem(c, "version %u (the spec describes version 3)", g->version);
    g->n_t = rd_u64(r);
    g->n_kv = rd_u64(r);
    /* every kv takes >= 12 bytes and every tensor info >= 28: caps before allocating */
    if (g->n_kv > r->n / 12 || g->n_t > r->n / 28) {
        problem(c, "%llu keys / %llu tensors cannot fit in %zu bytes", (unsigned long long)g->n_kv,
                (unsigned long long)g->n_t, r->n);
        return -1;
    }
    g->kvs = calloc((size_t)g->n_kv + 1, sizeof *g->kvs);
    g->ts = calloc((size_t)g->n_t + 1, sizeof *g->ts);
    if (!g->kvs || !g->ts) return -1;
    for (uint64_t i = 0; i < g->n_kv && !r->bad; i++) {
        kv *k = &g->kvs[i];
        k->key = rd_str(r, &k->klen);
        k->type = rd_u32(r);
        if (r->bad) break;
        if (!key_valid(k->key, k->klen))
            problem(c, "key %llu '%.*s' is not lower_snake_case segments separated by '.'",
                    (unsigned long long)i, (int)(k->klen > 80 ? 80 : k->klen), (const char *)k->key);
        if (k->type >= V_COUNT) {
            problem(c, "key '%.*s': value type %u is not a GGUF type", (int)(k->klen > 80 ? 80 : k->klen),
                    (const char *)k->key, k->type);
            return -1;
        }
        if (k->type == V_ARR) {
            k->etype = rd_u32(r);
            k->n = rd_u64(r);
            if (r->bad) break;
            if (k->etype == V_ARR || k->etype >= V_COUNT) {
                /* the spec allows nested arrays; llama.cpp's gguf.cpp rejects them */
                problem(c, "key '%.*s': array of type %u (llama.cpp reads no nested arrays)",
                        (int)(k->klen > 80 ? 80 : k->klen), (const char *)k->key, k->etype);
                return -1;
            }
            uint64_t min = k->etype == V_STR ? 8 : (uint64_t)vsize[k->etype];
            if (k->n > (r->n - r->pos) / min) {
                r->bad = true;
                break;
            }
            k->at = r->pos;
            for (uint64_t e = 0; e < k->n && !r->bad; e++) read_scalar(c, r, k->etype, k, e);
        } else {
            k->at = r->pos;
            read_scalar(c, r, k->type, k, 0);
        }
    }
    if (r->bad) {
        problem(c, "metadata runs past the end of the file");
        return -1;
    }
    g->kv_ix = malloc(((size_t)g->n_kv + 1) * sizeof *g->kv_ix);
    if (!g->kv_ix) return -1;
    for (uint64_t i = 0; i < g->n_kv; i++) g->kv_ix[i] = &g->kvs[i];
    qsort(g->kv_ix, (size_t)g->n_kv, sizeof *g->kv_ix, kv_ix_cmp);
    for (uint64_t i = 1; i < g->n_kv; i++)
        if (!kv_ix_cmp(&g->kv_ix[i - 1], &g->kv_ix[i]))
            problem(c, "duplicate key '%.*s' (gguf.cpp refuses the file)", (int)(g->kv_ix[i]->klen > 80 ? 80 : g->kv_ix[i]->klen),
                    (const char *)g->kv_ix[i]->key);
    g->align = 32; /* the spec's default */
    const kv *al = find_kv(g, "general.alignment");
    if (al) {
        if (al->type != V_U32) {
            problem(c, "general.alignment has type %s (gguf.cpp requires u32)", vname[al->type]);
            return -1;
        }
        g->align = kv_u32(r, al);
        if (g->align == 0 || (g->align & (g->align - 1)) || g->align % 8) {
            problem(c, "general.alignment %u: must be a power of two (gguf.cpp) and a multiple "
                       "of 8 (spec)", g->align);
            return -1;
        }
    }
    for (uint64_t i = 0; i < g->n_t && !r->bad; i++) {
        tinfo *t = &g->ts[i];
        t->name = rd_str(r, &t->nlen);
        t->n_dims = rd_u32(r);
        if (r->bad) break;
        if (t->nlen == 0 || t->nlen >= 64)
            problem(c, "tensor %llu: name of %llu bytes (ggml names are 1..63 bytes)",
                    (unsigned long long)i, (unsigned long long)t->nlen);
        if (!utf8_valid(t->name, t->nlen)) problem(c, "tensor %llu: name is not UTF-8", (unsigned long long)i);
        if (t->n_dims < 1 || t->n_dims > 4) {
            problem(c, "tensor '%.*s': %u dimensions (1..4)", (int)(t->nlen > 80 ? 80 : t->nlen),
                    (const char *)t->name, t->n_dims);
            return -1;
        }
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) t->ne[d] = rd_u64(r);
        t->type = rd_u32(r);
        t->offset = rd_u64(r);
        if (r->bad) break;
        uint64_t nel = 1;
        bool ovf = false;
        for (int d = 0; d < 4; d++) {
            if (t->ne[d] == 0 || t->ne[d] > (1ull << 40)) ovf = true;
            else if (nel > UINT64_MAX / t->ne[d]) ovf = true;
            else nel *= t->ne[d];
        }
        if (ovf || nel > (1ull << 50)) {
            problem(c, "tensor '%.*s': dimensions zero or too large", (int)(t->nlen > 80 ? 80 : t->nlen), (const char *)t->name);
            continue;
        }
        const gtype *gt = gtype_of(t->type);
        if (!gt) {
            problem(c, "tensor '%.*s': ggml type %u is not one this check knows", (int)t->nlen,
                    (const char *)t->name, t->type);
            continue;
        }
        if (t->ne[0] % (uint64_t)gt->blck) {
            problem(c, "tensor '%.*s': ne[0] = %llu is not a multiple of %s's block of %d",
                    (int)(t->nlen > 80 ? 80 : t->nlen), (const char *)t->name, (unsigned long long)t->ne[0], gt->name,
                    gt->blck);
            continue;
        }
        t->nbytes = nel / (uint64_t)gt->blck * (uint64_t)gt->bytes;
    }
    if (r->bad) {
        problem(c, "tensor infos run past the end of the file");
        return -1;
    }
    g->t_ix = malloc(((size_t)g->n_t + 1) * sizeof *g->t_ix);
    if (!g->t_ix) return -1;
    for (uint64_t i = 0; i < g->n_t; i++) g->t_ix[i] = &g->ts[i];
    qsort(g->t_ix, (size_t)g->n_t, sizeof *g->t_ix, t_ix_cmp);
    for (uint64_t i = 1; i < g->n_t; i++)
        if (!t_ix_cmp(&g->t_ix[i - 1], &g->t_ix[i]))
            problem(c, "duplicate tensor name '%.*s'", (int)(g->t_ix[i]->nlen > 80 ? 80 : g->t_ix[i]->nlen),
                    (const char *)g->t_ix[i]->name);
    /* padding to the alignment (0x00 bytes), then the data section */
    uint64_t data = ((uint64_t)r->pos + g->align - 1) / g->align * g->align;
    if (data > r->n) {
        problem(c, "the data section would start past the end of the file");
        return -1;
    }
    for (uint64_t i = r->pos; i < data; i++)
        if (r->p[i]) {
            problem(c, "padding byte at %llu is not 0x00", (unsigned long long)i);
            break;
        }
    /* gguf.cpp: tensor i starts where the aligned tensors before it end */
    uint64_t expect = 0, end = data;
    for (uint64_t i = 0; i < g->n_t; i++) {
        tinfo *t = &g->ts[i];
        if (t->offset % g->align)
            problem(c, "tensor '%.*s': offset %llu is not a multiple of %u", (int)t->nlen,
                    (const char *)t->name, (unsigned long long)t->offset, g->align);
        if (t->offset != expect)
            problem(c, "tensor '%.*s': offset %llu, but the tensors before it end (aligned) at "
                       "%llu (gguf.cpp refuses the file)", (int)(t->nlen > 80 ? 80 : t->nlen), (const char *)t->name,
                    (unsigned long long)t->offset, (unsigned long long)expect);
        if (t->nbytes > r->n || t->offset > r->n - data || t->nbytes > r->n - data - t->offset) {
            problem(c, "tensor '%.*s': data runs past the end of the file", (int)t->nlen,
                    (const char *)t->name);
            return -1;
        }
        uint64_t tend = data + t->offset + t->nbytes;
        uint64_t padded = (t->nbytes + g->align - 1) / g->align * g->align;
        /* the gap up to the next tensor (or to the end of the file) is 0x00 */
        for (uint64_t b = tend; b < data + t->offset + padded && b < r->n; b++)
            if (r->p[b]) {
                problem(c, "tensor '%.*s': padding after it is not 0x00", (int)t->nlen,
                        (const char *)t->name);
                break;
            }
        if (t->offset == expect) expect += padded;
        if (tend > end) end = tend;
    }
    if (r->n > data + expect && g->n_t)
        problem(c, "%llu bytes after the last tensor's padding", (unsigned long long)(r->n - data - expect));
    (void)end;
    return 0;
}

/* ---- the llama / qwen2 architecture (llama.cpp's llama-model.cpp) ---- */

typedef struct arch_hp {
    uint64_t E, L, F, H, Hkv, Hd, V; /* embedding, blocks, ffn, heads, kv heads, head size, vocab */
} arch_hp;

/* Checks tensor `name` exists (or is optional and absent) with shape {a, b} (b = 0: 1-D). */
static void want_t(spec_ctx *c, gfile *g, const char *name, uint64_t a, uint64_t b, bool required) {
    tinfo *t = find_t(g, name);
    if (!t) {
        if (required) problem(c, "missing tensor '%s'", name);
        return;
    }
    t->used = true;
    uint64_t want[4] = {a, b ? b : 1, 1, 1};
    bool ok = true;
    for (int d = 0; d < 4; d++) ok = ok && t->ne[d] == want[d];
    if (!ok)
        problem(c, "tensor '%s' has shape [%llu, %llu, %llu, %llu]; llama.cpp expects [%llu, %llu] "
                   "(ne[0] innermost)", name, (unsigned long long)t->ne[0],
                (unsigned long long)t->ne[1], (unsigned long long)t->ne[2],
                (unsigned long long)t->ne[3], (unsigned long long)a, (unsigned long long)(b ? b : 1));
    /* gguf-py and llama.cpp's quantizer keep 1-D tensors (norms, biases, rope factors) in F32 */
    if (!b && t->type != 0)
        problem(c, "tensor '%s' is 1-D but of type %s (1-D tensors are F32)", name,
                gtype_of(t->type) ? gtype_of(t->type)->name : "?");
}

static void check_arch(spec_ctx *c, gfile *g, bool qwen2, uint64_t n_tokens) {
    const char *a = qwen2 ? "qwen2" : "llama";
    char key[128];
    arch_hp hp = {0};
    struct { const char *suffix; uint64_t *dst; bool required; } u32s[] = {
        {"context_length", NULL, true},          {"embedding_length", &hp.E, true},
        {"block_count", &hp.L, true},            {"feed_forward_length", &hp.F, true},
        {"attention.head_count", &hp.H, true},   {"attention.head_count_kv", &hp.Hkv, false},
        {"attention.key_length", &hp.Hd, false}, {"attention.value_length", NULL, false},
        {"rope.dimension_count", NULL, !qwen2},  /* the spec lists it as required for LLaMA */
        {"vocab_size", NULL, false},
    };
    uint64_t vals[sizeof u32s / sizeof u32s[0]] = {0};
    bool have[sizeof u32s / sizeof u32s[0]] = {0};
    for (size_t i = 0; i < sizeof u32s / sizeof u32s[0]; i++) {
        snprintf(key, sizeof key, "%s.%s", a, u32s[i].suffix);
        const kv *k = want_kv(c, g, key, V_U32, u32s[i].required);
        if (!k) continue;
        have[i] = true;
        vals[i] = kv_u32(&g->r, k);
        if (u32s[i].dst) *u32s[i].dst = vals[i];
        if (vals[i] == 0) problem(c, "key '%s' is 0", key);
    }
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", a);
    const kv *k = want_kv(c, g, key, V_F32, true);
    if (k && !(kv_f32(&g->r, k) > 0)) problem(c, "key '%s' must be positive", key);
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    k = want_kv(c, g, key, V_F32, false);
    if (k && !(kv_f32(&g->r, k) > 0)) problem(c, "key '%s' must be positive", key);
    if (!hp.E || !hp.L || !hp.F || !hp.H) return; /* already reported */
    if (!hp.Hkv) hp.Hkv = hp.H;
    if (hp.H % hp.Hkv) problem(c, "head_count %llu is not a multiple of head_count_kv %llu",
                               (unsigned long long)hp.H, (unsigned long long)hp.Hkv);
    if (!hp.Hd) {
        if (hp.E % hp.H) problem(c, "embedding_length is not a multiple of head_count and there is no key_length");
        hp.Hd = hp.E / hp.H;
    }
    if (have[7] && vals[7] != hp.Hd)
        problem(c, "value_length %llu differs from the key length %llu (llama.cpp asserts they are "
                   "equal for %s)", (unsigned long long)vals[7], (unsigned long long)hp.Hd, a);
    if (have[8] && vals[8] != hp.Hd)
        problem(c, "rope.dimension_count %llu differs from the head size %llu (llama.cpp: \"invalid "
                   "n_rot\")", (unsigned long long)vals[8], (unsigned long long)hp.Hd);
    if (have[9] && vals[9] != n_tokens)
        problem(c, "vocab_size %llu differs from the %llu tokens", (unsigned long long)vals[9],
                (unsigned long long)n_tokens);
    if (hp.L > 4096) {
        problem(c, "block_count %llu is implausible", (unsigned long long)hp.L);
        return;
    }
    /* llama.cpp's n_vocab is the token count: the embedding must have exactly that many rows */
    hp.V = n_tokens;
    uint64_t E = hp.E, Q = hp.Hd * hp.H, KV = hp.Hd * hp.Hkv, F = hp.F, V = hp.V;
    want_t(c, g, "token_embd.weight", E, V, true);
    want_t(c, g, "output_norm.weight", E, 0, true);
    want_t(c, g, "output.weight", E, V, false); /* absent: tied to token_embd */
    if (!qwen2) want_t(c, g, "rope_freqs.weight", hp.Hd / 2, 0, false);
    for (uint64_t l = 0; l < hp.L; l++) {
        char n[96];
#define T(suffix, a_, b_, req)                                                                   \
    do {                                                                                         \
        snprintf(n, sizeof n, "blk.%llu.%s", (unsigned long long)l, suffix);                    \
        want_t(c, g, n, a_, b_, req);                                                            \
    } while (0)
        T("attn_norm.weight", E, 0, true);
        T("attn_q.weight", E, Q, true);
        T("attn_k.weight", E, KV, true);
        T("attn_v.weight", E, KV, true);
        T("attn_output.weight", Q, E, true);
        T("attn_q.bias", Q, 0, qwen2); /* qwen2: required; llama: optional */
        T("attn_k.bias", KV, 0, qwen2);
        T("attn_v.bias", KV, 0, qwen2);
        if (!qwen2) {
            T("attn_output.bias", E, 0, false);
            T("ffn_gate.bias", F, 0, false);
            T("ffn_up.bias", F, 0, false);
            T("ffn_down.bias", E, 0, false);
        }
        T("ffn_norm.weight", E, 0, true);
        T("ffn_gate.weight", E, F, true);
        T("ffn_up.weight", E, F, true);
        T("ffn_down.weight", F, E, true);
#undef T
    }
    /* llama.cpp counts the tensors it created against the file's: any extra one fails the load */
    for (uint64_t i = 0; i < g->n_t; i++)
        if (!g->ts[i].used)
            problem(c, "tensor '%.*s' is not one llama.cpp's %s loader uses (\"wrong number of "
                       "tensors\")", (int)(g->ts[i].nlen > 80 ? 80 : g->ts[i].nlen), (const char *)g->ts[i].name, a);
}

/* ---- the gpt2 tokenizer (llama.cpp's llama-vocab.cpp) ---- */

typedef struct tok {
    const uint8_t *s; /* bytes */
    uint64_t n;       /* length */
} tok;

static int tok_cmp(const void *x, const void *y) {
    const tok *a = x, *b = y;
    return bytes_cmp(a->s, a->n, b->s, b->n);
}

static bool tok_has(const tok *sorted, uint64_t n, const uint8_t *s, uint64_t len) {
    tok key = {s, len};
    return bsearch(&key, sorted, (size_t)n, sizeof *sorted, tok_cmp) != NULL;
}

/* Known tokenizer.ggml.pre values (llama-vocab.cpp); another value falls back to 'default'. */
static const char *const known_pre[] = {
    "default", "llama3", "llama-v3", "llama-bpe", "qwen2", "deepseek-r1-qwen", "gpt-2",
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "falcon", "mpt", "starcoder", "refact",
    "command-r", "stablelm2", "olmo", "dbrx", "smaug-bpe", "poro-chat", "chatglm-bpe", "viking",
    "jais", "tekken", "smollm", "codeshell", "bloom", "gpt3-finnish", "exaone", "chameleon",
    "minerva-7b", "megrez", "gpt-4o", "superbpe", "trillion", "bailingmoe",
};

/* llama (SentencePiece) vocabularies: llama.cpp's byte fallback (byte_to_token) looks up
 * "<0xXX>", else the byte itself as a token, and throws when neither exists. */
static void check_spm_bytes(spec_ctx *c, const tok *sorted, uint64_t n) {
    static const char hex[] = "0123456789ABCDEF";
    int missing = 0;
    for (int b = 0; b < 256; b++) {
        uint8_t name[6] = {'<', '0', 'x', (uint8_t)hex[b >> 4], (uint8_t)hex[b & 15], '>'};
        uint8_t one = (uint8_t)b;
        if (tok_has(sorted, n, name, 6) || tok_has(sorted, n, &one, 1)) continue;
        if (missing++ < 3)
            problem(c, "no token <0x%02X> nor the byte itself: llama.cpp's SentencePiece byte "
                       "fallback throws on it", b);
    }
}

/* Returns the token count (0 if unusable). */
static uint64_t check_tokenizer(spec_ctx *c, gfile *g, uint64_t *n_merges) {
    const rd *r = &g->r;
    uint64_t len;
    bool spm = false; /* tokenizer.ggml.model "llama": SentencePiece, no merges, no pre */
    const kv *k = want_kv(c, g, "tokenizer.ggml.model", V_STR, true);
    if (k) {
        const uint8_t *s = kv_str(r, k, &len);
        spm = len == 5 && !memcmp(s, "llama", 5);
        if (!(len == 4 && !memcmp(s, "gpt2", 4)) && !spm) {
            problem(c, "tokenizer.ggml.model is '%.*s'; this check knows the gpt2 (byte-level "
                       "BPE) and llama (SentencePiece) tokenizers only", (int)len, (const char *)s);
            return 0;
        }
    }
    k = want_kv(c, g, "tokenizer.ggml.pre", V_STR, !spm);
    if (k) {
        const uint8_t *s = kv_str(r, k, &len);
        bool known = false;
        for (size_t i = 0; i < sizeof known_pre / sizeof known_pre[0]; i++)
            known = known || (strlen(known_pre[i]) == len && !memcmp(known_pre[i], s, (size_t)len));
        if (!known)
            problem(c, "tokenizer.ggml.pre '%.*s' is not one llama.cpp knows (it would split text "
                       "with another regex)", (int)(len > 60 ? 60 : len), (const char *)s);
    }
    const kv *tk = want_arr(c, g, "tokenizer.ggml.tokens", V_STR, true);
    if (!tk) return 0;
    uint64_t n = tk->n;
    if (n == 0) {
        problem(c, "tokenizer.ggml.tokens is empty");
        return 0;
    }
    tok *all = malloc((size_t)n * sizeof *all), *sorted = malloc((size_t)n * sizeof *sorted);
    if (!all || !sorted) {
        free(all);
        free(sorted);
        return 0;
    }
    rd t = {r->p, r->n, tk->at, false};
    for (uint64_t i = 0; i < n; i++) {
        all[i].s = rd_str(&t, &all[i].n);
        if (all[i].n == 0) problem(c, "token %llu is empty (llama.cpp renames it)", (unsigned long long)i);
    }
    memcpy(sorted, all, (size_t)n * sizeof *all);
    qsort(sorted, (size_t)n, sizeof *sorted, tok_cmp);
    int dups = 0;
    for (uint64_t i = 1; i < n; i++)
        if (!tok_cmp(&sorted[i - 1], &sorted[i]) && dups++ < 3)
            problem(c, "token string '%.*s' appears twice (llama.cpp asserts unique tokens)",
                    (int)(sorted[i].n > 60 ? 60 : sorted[i].n), (const char *)sorted[i].s);
    const kv *ty = want_arr(c, g, "tokenizer.ggml.token_type", V_I32, true);
    int32_t *types = NULL;
    if (ty) {
        if (ty->n != n) {
            problem(c, "tokenizer.ggml.token_type has %llu entries, tokens %llu",
                    (unsigned long long)ty->n, (unsigned long long)n);
        } else {
            types = malloc((size_t)n * sizeof *types);
            for (uint64_t i = 0; types && i < n; i++) {
                uint32_t u;
                const uint8_t *b = r->p + ty->at + 4 * i;
                u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
                memcpy(&types[i], &u, 4);
                if (types[i] < 1 || types[i] > 6) {
                    problem(c, "token %llu has type %d (1 normal .. 6 byte)", (unsigned long long)i, types[i]);
                    break;
                }
            }
        }
    }
    const kv *sc = want_arr(c, g, "tokenizer.ggml.scores", V_F32, false);
    if (sc && sc->n != n) problem(c, "tokenizer.ggml.scores has %llu entries, tokens %llu",
                                  (unsigned long long)sc->n, (unsigned long long)n);
    if (spm) check_spm_bytes(c, sorted, n);
    /* merges: required for gpt2; "a b", both halves and their concatenation tokens */
    const kv *mk = spm ? NULL : want_arr(c, g, "tokenizer.ggml.merges", V_STR, true);
    if (mk) {
        *n_merges = mk->n;
        rd m = {r->p, r->n, mk->at, false};
        int bad = 0;
        uint8_t *cat = NULL;
        size_t cap = 0;
        for (uint64_t i = 0; i < mk->n && bad < 3; i++) {
            uint64_t ml;
            const uint8_t *s = rd_str(&m, &ml);
            const uint8_t *sp = ml > 1 ? memchr(s + 1, ' ', (size_t)ml - 1) : NULL;
            uint64_t la = sp ? (uint64_t)(sp - s) : 0, lb = sp ? ml - la - 1 : 0;
            if (!sp || lb == 0 || memchr(sp + 1, ' ', (size_t)lb)) {
                problem(c, "merge %llu '%.*s' is not \"a b\"", (unsigned long long)i,
                        (int)(ml > 60 ? 60 : ml), (const char *)s);
                bad++;
                continue;
            }
            if (la + lb > cap) {
                cap = (size_t)(la + lb) * 2;
                uint8_t *nc = realloc(cat, cap);
                if (!nc) break;
                cat = nc;
            }
            memcpy(cat, s, (size_t)la);
            memcpy(cat + la, sp + 1, (size_t)lb);
            if (!tok_has(sorted, n, s, la) || !tok_has(sorted, n, sp + 1, lb) ||
                !tok_has(sorted, n, cat, la + lb)) {
                problem(c, "merge %llu '%.*s': a part or the merged token is not in the vocabulary",
                        (unsigned long long)i, (int)(ml > 60 ? 60 : ml), (const char *)s);
                bad++;
            }
        }
        free(cat);
    }
    /* special ids: uint32 (llama.cpp's get_key<uint32_t>) and inside the vocabulary */
    static const char *const ids[] = {
        "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id", "tokenizer.ggml.unknown_token_id",
        "tokenizer.ggml.seperator_token_id", "tokenizer.ggml.padding_token_id",
        "tokenizer.ggml.mask_token_id",
    };
    bool have_bos = false;
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        k = want_kv(c, g, ids[i], V_U32, i == 1 && !spm); /* gpt2 without eos: id 11 */
        if (!k) continue;
        uint32_t id = kv_u32(r, k);
        if (id >= n) problem(c, "%s = %u is outside the %llu tokens", ids[i], id, (unsigned long long)n);
        if (i == 0) have_bos = true;
    }
    static const char *const flags[] = {"tokenizer.ggml.add_bos_token", "tokenizer.ggml.add_eos_token",
                                        "tokenizer.ggml.add_sep_token", "tokenizer.ggml.add_space_prefix"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        k = want_kv(c, g, flags[i], V_BOOL, false);
        if (k && i == 0 && r->p[k->at] && !have_bos)
            problem(c, "add_bos_token is true but there is no bos_token_id (llama.cpp would "
                       "prepend id 11)");
    }
    /* the pre-tokenizers that llama.cpp gives add_bos = true by default need a bos id */
    const kv *pk = find_kv(g, "tokenizer.ggml.pre");
    if (pk && pk->type == V_STR && !find_kv(g, "tokenizer.ggml.add_bos_token") && !have_bos) {
        const uint8_t *s = kv_str(r, pk, &len);
        if ((len == 9 && !memcmp(s, "llama-bpe", 9)) || (len == 6 && !memcmp(s, "llama3", 6)))
            problem(c, "pre-tokenizer llama-bpe adds BOS by default, but there is no bos_token_id");
    }
    want_kv(c, g, "tokenizer.chat_template", V_STR, false);
    free(types);
    free(all);
    free(sorted);
    return n;
}

/* ---- the whole check ---- */

static bool quantized(uint32_t type) { return type != 0 && type != 1 && type != 30; }

int gguf_spec_check(const char *name, const uint8_t *data, size_t size, FILE *out);

/* Checks one GGUF image; returns the number of problems (0: clean). Problems and the final "ok"
 * line go to `out` when it is not NULL. */
int gguf_spec_check(const char *name, const uint8_t *data, size_t size, FILE *out) {
    spec_ctx c = {name, out, 0};
    gfile g;
    memset(&g, 0, sizeof g);
    g.r.p = data;
    g.r.n = size;
    uint64_t n_tokens = 0, n_merges = 0;
    char arch[16] = "?";
    if (parse(&c, &g) == 0) {
        const kv *a = want_kv(&c, &g, "general.architecture", V_STR, true);
        if (a) {
            uint64_t len;
            const uint8_t *s = kv_str(&g.r, a, &len);
            bool qwen2 = len == 5 && !memcmp(s, "qwen2", 5), llama = len == 5 && !memcmp(s, "llama", 5);
            if (len < sizeof arch) {
                memcpy(arch, s, (size_t)len);
                arch[len] = 0;
            }
            if (!qwen2 && !llama) {
                problem(&c, "general.architecture '%.*s': this check knows llama and qwen2",
                        (int)(len > 40 ? 40 : len), (const char *)s);
            } else {
                n_tokens = check_tokenizer(&c, &g, &n_merges);
                if (n_tokens) check_arch(&c, &g, qwen2, n_tokens);
            }
        }
        want_kv(&c, &g, "general.name", V_STR, false);
        want_kv(&c, &g, "general.file_type", V_U32, false);
        bool any_q = false;
        for (uint64_t i = 0; i < g.n_t; i++) any_q = any_q || quantized(g.ts[i].type);
        /* the spec: "If any tensors are quantized, this _must_ be present" */
        want_kv(&c, &g, "general.quantization_version", V_U32, any_q);
    }
    if (!c.problems && out) {
        fprintf(out, "%s: ok (GGUF v%u, %s, %llu keys, %llu tensors, %llu tokens, %llu merges, "
                     "alignment %u)\n", name, g.version, arch, (unsigned long long)g.n_kv,
                (unsigned long long)g.n_t, (unsigned long long)n_tokens,
                (unsigned long long)n_merges, g.align);
    } else if (c.problems > 40 && out) {
        fprintf(out, "%s: ... %d problems in all\n", name, c.problems);
    }
    free(g.kvs);
    free(g.kv_ix);
    free(g.ts);
    free(g.t_ix);
    return c.problems;
}

#ifndef GGUF_SPEC_NO_MAIN
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: gguf-spec FILE.gguf...\n");
        return 2;
    }
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
            printf("%s: cannot open, or empty\n", argv[i]);
            if (fd >= 0) close(fd);
            bad++;
            continue;
        }
        size_t n = (size_t)st.st_size;
        void *map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        close(fd);
        if (map == MAP_FAILED) {
            printf("%s: cannot map\n", argv[i]);
            bad++;
            continue;
        }
        if (gguf_spec_check(argv[i], map, n, stdout)) bad++;
        munmap(map, n);
    }
    return bad ? 1 : 0;
}
#endif
