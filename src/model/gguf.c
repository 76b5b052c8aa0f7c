/* gguf.c — see gguf.h.
 *
 * Design: a cursor (pos, end) walks the buffer; every read checks the remaining byte count first,
 * and every count from the file is bounded by the remaining bytes divided by the smallest
 * encoding of one element before anything is allocated. Nested arrays are walked recursively up
 * to a fixed depth. Multi-byte values are read with memcpy (the buffer has no alignment
 * guarantee) and assume a little-endian host, which is what GGUF stores.
 */
#include "model/gguf.h"

#include "model/quote.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GGUF_MAX_ARRAY_DEPTH 4       /* arrays of arrays of ... */
#define GGUF_MAX_NAME (64u * 1024u)  /* longest key / tensor name accepted */

typedef struct ggml_type_info {
    const char *name; /* ggml's name */
    int blck;         /* elements per block */
    int bytes;        /* bytes per block */
} ggml_type_info;

/* ggml's type table (ggml.c type_traits); holes are ids ggml removed. */
static const ggml_type_info ggml_types[] = {
    [0] = {"F32", 1, 4},         [1] = {"F16", 1, 2},        [2] = {"Q4_0", 32, 18},
    [3] = {"Q4_1", 32, 20},      [6] = {"Q5_0", 32, 22},     [7] = {"Q5_1", 32, 24},
    [8] = {"Q8_0", 32, 34},      [9] = {"Q8_1", 32, 36},     [10] = {"Q2_K", 256, 84},
    [11] = {"Q3_K", 256, 110},   [12] = {"Q4_K", 256, 144},  [13] = {"Q5_K", 256, 176},
    [14] = {"Q6_K", 256, 210},   [15] = {"Q8_K", 256, 292},  [16] = {"IQ2_XXS", 256, 66},
    [17] = {"IQ2_XS", 256, 74},  [18] = {"IQ3_XXS", 256, 98}, [19] = {"IQ1_S", 256, 50},
    [20] = {"IQ4_NL", 32, 18},   [21] = {"IQ3_S", 256, 110}, [22] = {"IQ2_S", 256, 82},
    [23] = {"IQ4_XS", 256, 136}, [24] = {"I8", 1, 1},        [25] = {"I16", 1, 2},
    [26] = {"I32", 1, 4},        [27] = {"I64", 1, 8},       [28] = {"F64", 1, 8},
    [29] = {"IQ1_M", 256, 56},   [30] = {"BF16", 1, 2},      [34] = {"TQ1_0", 256, 54},
    [35] = {"TQ2_0", 256, 66},   [39] = {"MXFP4", 32, 17},
};

const char *fr_ggml_type_name(uint32_t t) {
    return t < FR_ARRAY_LEN(ggml_types) ? ggml_types[t].name : NULL;
}
int fr_ggml_block_elems(uint32_t t) {
    return t < FR_ARRAY_LEN(ggml_types) ? ggml_types[t].blck : 0;
}
int fr_ggml_block_bytes(uint32_t t) {
    return t < FR_ARRAY_LEN(ggml_types) ? ggml_types[t].bytes : 0;
}

/* Encoded size of fixed-size value types; 0 for string/array/unknown. */
static size_t vtype_size(uint32_t t) {
    switch (t) {
    case FR_GGUF_U8: case FR_GGUF_I8: case FR_GGUF_BOOL: return 1;
    case FR_GGUF_U16: case FR_GGUF_I16: return 2;
    case FR_GGUF_U32: case FR_GGUF_I32: case FR_GGUF_F32: return 4;
    case FR_GGUF_U64: case FR_GGUF_I64: case FR_GGUF_F64: return 8;
    default: return 0;
    }
}

static const char *vtype_name(uint32_t t) {
    static const char *names[] = {"u8",  "i8",  "u16",  "i16",   "u32", "i32", "f32",
                                  "bool", "string", "array", "u64", "i64", "f64"};
    return t < FR_ARRAY_LEN(names) ? names[t] : "unknown";
}

/* ---- cursor ---- */

typedef struct cursor {
    const uint8_t *p;   /* next byte */
    const uint8_t *end; /* one past the last byte */
} cursor;

static size_t cur_left(const cursor *c) { return (size_t)(c->end - c->p); }

static bool cur_u32(cursor *c, uint32_t *v) {
    if (cur_left(c) < 4) return false;
    memcpy(v, c->p, 4);
    c->p += 4;
    return true;
}
static bool cur_u64(cursor *c, uint64_t *v) {
    if (cur_left(c) < 8) return false;
    memcpy(v, c->p, 8);
    c->p += 8;
    return true;
}
/* A string of at most `max` bytes. */
static bool cur_str(cursor *c, fr_gguf_str *s, uint64_t max) {
    uint64_t n;
    if (!cur_u64(c, &n) || n > cur_left(c) || n > max) return false;
    s->p = (const char *)c->p;
    s->n = (size_t)n;
    c->p += n;
    return true;
}

/* Skip one value of type t (arrays recursively). Sets *why on failure. */
static bool skip_value(cursor *c, uint32_t t, int depth, const char **why) {
    size_t sz = vtype_size(t);
    if (sz) {
        if (cur_left(c) < sz) { *why = "value runs past the end of the file"; return false; }
        c->p += sz;
        return true;
    }
    if (t == FR_GGUF_STR) {
        fr_gguf_str s;
        if (!cur_str(c, &s, UINT64_MAX)) { *why = "string length runs past the end of the file"; return false; }
        return true;
    }
    if (t == FR_GGUF_ARR) {
        if (depth >= GGUF_MAX_ARRAY_DEPTH) { *why = "arrays nested too deeply"; return false; }
        uint32_t et;
        uint64_t n;
        if (!cur_u32(c, &et) || !cur_u64(c, &n)) { *why = "array header runs past the end of the file"; return false; }
        if (et >= FR_GGUF_VTYPE_COUNT) { *why = "array of an unknown value type"; return false; }
        size_t esz = vtype_size(et);
        if (esz) {
            if (n > cur_left(c) / esz) { *why = "array count runs past the end of the file"; return false; }
            c->p += n * esz;
            return true;
        }
        /* strings take >= 8 bytes each, arrays >= 12 */
        size_t min = et == FR_GGUF_STR ? 8 : 12;
        if (n > cur_left(c) / min) { *why = "array count runs past the end of the file"; return false; }
        for (uint64_t i = 0; i < n; i++)
            if (!skip_value(c, et, depth + 1, why)) return false;
        return true;
    }
    *why = "unknown value type";
    return false;
}

/* A GGUF string quoted for a message (a fresh buffer per use). */
#define QS(str) fr_quote((str).p, (str).n, (char[160]){0}, 160)

/* Byte-wise order of strings (shorter first on a common prefix). */
static int str_cmp(const fr_gguf_str *a, const fr_gguf_str *b) {
    int c = memcmp(a->p, b->p, FR_MIN(a->n, b->n));
    if (c) return c;
    return a->n < b->n ? -1 : a->n > b->n;
}
static int str_cmp_q(const void *a, const void *b) {
    return str_cmp(*(const fr_gguf_str *const *)a, *(const fr_gguf_str *const *)b);
}

/* Pointers to the n name fields (first at `first`, `stride` bytes apart), sorted. */
static const fr_gguf_str **sort_by_name(const fr_gguf_str *first, size_t stride, int64_t n) {
    const fr_gguf_str **v = fr_xmalloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (const fr_gguf_str *)(const void *)((const char *)first + (size_t)i * stride);
    qsort(v, (size_t)n, sizeof *v, str_cmp_q);
    return v;
}

/* Binary search in a sorted pointer array; the index of the match or -1. */
static int64_t find_sorted(const fr_gguf_str *const *v, int64_t n, const char *z) {
    fr_gguf_str key = {z, strlen(z)};
    int64_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = str_cmp(v[mid], &key);
        if (!c) return mid;
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int fr_gguf_parse(fr_gguf *g, const char *path, const uint8_t *data, size_t size, fr_err *err) {
    memset(g, 0, sizeof *g);
    g->path = fr_xstrdup(path);
    g->data = data;
    g->size = size;
    g->alignment = 32;
    cursor c = {data, data + size};
    uint32_t version;
    uint64_t n_tensors, n_kv;
    if (size < 4 || memcmp(data, "GGUF", 4)) {
        fr_err_set(err, "%s: not a GGUF file (bad magic)", path);
        goto fail;
    }
    c.p += 4;
    if (!cur_u32(&c, &version)) {
        fr_err_set(err, "%s: truncated GGUF header", path);
        goto fail;
    }
    if (version == 0x03000000u || version == 0x02000000u) {
        fr_err_set(err, "%s: big-endian GGUF is not supported", path);
        goto fail;
    }
    if (version != 2 && version != 3) {
        fr_err_set(err, "%s: GGUF version %u is not supported (supported: 2, 3)", path, version);
        goto fail;
    }
    g->version = version;
    if (!cur_u64(&c, &n_tensors) || !cur_u64(&c, &n_kv)) {
        fr_err_set(err, "%s: truncated GGUF header", path);
        goto fail;
    }
    /* a key/value takes >= 13 bytes, a tensor info >= 32 */
    if (n_kv > cur_left(&c) / 13) {
        fr_err_set(err, "%s: metadata count %llu is more than the file can hold (truncated or "
                        "corrupt)", path, (unsigned long long)n_kv);
        goto fail;
    }
    g->kv = fr_xcalloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kv);
    for (uint64_t i = 0; i < n_kv; i++) {
        fr_gguf_kv *kv = &g->kv[i];
        if (!cur_str(&c, &kv->key, GGUF_MAX_NAME)) {
            fr_err_set(err, "%s: metadata key %llu: bad or truncated key string", path,
                       (unsigned long long)i);
            goto fail;
        }
        if (!cur_u32(&c, &kv->type)) {
            fr_err_set(err, "%s: metadata '%s': truncated", path, QS(kv->key));
            goto fail;
        }
        kv->val = c.p;
        if (kv->type == FR_GGUF_ARR && cur_left(&c) >= 12) {
            memcpy(&kv->arr_type, c.p, 4);
            memcpy(&kv->arr_n, c.p + 4, 8);
            kv->arr = c.p + 12;
        }
        const char *why = NULL;
        if (!skip_value(&c, kv->type, 0, &why)) {
            fr_err_set(err, "%s: metadata '%s' (%s): %s", path, QS(kv->key),
                       vtype_name(kv->type), why);
            goto fail;
        }
        g->n_kv = (int64_t)i + 1;
    }
    g->kv_by_key = sort_by_name(&g->kv[0].key, sizeof *g->kv, g->n_kv);
    for (int64_t i = 1; i < g->n_kv; i++)
        if (str_cmp(g->kv_by_key[i - 1], g->kv_by_key[i]) == 0) {
            fr_err_set(err, "%s: metadata key '%s' appears twice", path, QS(*g->kv_by_key[i]));
            goto fail;
        }
    int64_t al;
    int rc = fr_gguf_get_int(g, "general.alignment", 1, 1 << 30, &al, err);
    if (rc < 0) goto fail;
    if (rc == 0) {
        if (al & (al - 1)) {
            fr_err_set(err, "%s: general.alignment %lld is not a power of two", path,
                       (long long)al);
            goto fail;
        }
        g->alignment = (uint32_t)al;
    }
    if (n_tensors > cur_left(&c) / 32) {
        fr_err_set(err, "%s: tensor count %llu is more than the file can hold (truncated or "
                        "corrupt)", path, (unsigned long long)n_tensors);
        goto fail;
    }
    g->tensors = fr_xcalloc((size_t)(n_tensors ? n_tensors : 1), sizeof *g->tensors);
    for (uint64_t i = 0; i < n_tensors; i++) {
        fr_gguf_tensor *t = &g->tensors[i];
        uint32_t nd;
        if (!cur_str(&c, &t->name, GGUF_MAX_NAME)) {
            fr_err_set(err, "%s: tensor info %llu: bad or truncated name", path,
                       (unsigned long long)i);
            goto fail;
        }
        if (!cur_u32(&c, &nd)) {
            fr_err_set(err, "%s: tensor '%s': truncated tensor info", path, QS(t->name));
            goto fail;
        }
        if (nd < 1 || nd > FR_MAX_DIMS) {
            fr_err_set(err, "%s: tensor '%s': n_dims %u out of range (1..%d)", path,
                       QS(t->name), nd, FR_MAX_DIMS);
            goto fail;
        }
        t->n_dims = (int)nd;
        uint64_t n = 1;
        for (int d = 0; d < FR_MAX_DIMS; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < nd; d++) {
            uint64_t v;
            if (!cur_u64(&c, &v)) {
                fr_err_set(err, "%s: tensor '%s': truncated tensor info", path, QS(t->name));
                goto fail;
            }
            if (v == 0 || v > (UINT64_C(1) << 62) / n) {
                fr_err_set(err, "%s: tensor '%s': dimension %u = %llu is out of range", path,
                           QS(t->name), d, (unsigned long long)v);
                goto fail;
            }
            n *= v;
            t->ne[d] = (int64_t)v;
        }
        t->n_elem = (int64_t)n;
        if (!cur_u32(&c, &t->type) || !cur_u64(&c, &t->offset)) {
            fr_err_set(err, "%s: tensor '%s': truncated tensor info", path, QS(t->name));
            goto fail;
        }
        int blck = fr_ggml_block_elems(t->type), bb = fr_ggml_block_bytes(t->type);
        if (!blck) {
            fr_err_set(err, "%s: tensor '%s': unknown ggml type %u", path, QS(t->name),
                       t->type);
            goto fail;
        }
        if (t->ne[0] % blck) {
            fr_err_set(err, "%s: tensor '%s': row length %lld is not a multiple of the %s "
                            "block size %d", path, QS(t->name), (long long)t->ne[0],
                       fr_ggml_type_name(t->type), blck);
            goto fail;
        }
        /* n / blck * bb <= 2^62 / 1 * 292 / 256 < 2^63: no overflow */
        uint64_t nbytes = n / (uint64_t)blck * (uint64_t)bb;
        if (t->offset % g->alignment) {
            fr_err_set(err, "%s: tensor '%s': offset %llu is not a multiple of the alignment "
                            "%u", path, QS(t->name), (unsigned long long)t->offset,
                       g->alignment);
            goto fail;
        }
        t->nbytes = (size_t)nbytes;
        g->n_tensors = (int64_t)i + 1;
    }
    g->tensors_by_name = sort_by_name(&g->tensors[0].name, sizeof *g->tensors, g->n_tensors);
    for (int64_t i = 1; i < g->n_tensors; i++)
        if (str_cmp(g->tensors_by_name[i - 1], g->tensors_by_name[i]) == 0) {
            fr_err_set(err, "%s: tensor '%s' appears twice", path, QS(*g->tensors_by_name[i]));
            goto fail;
        }
    size_t pos = (size_t)(c.p - data);
    size_t dstart = pos + (g->alignment - pos % g->alignment) % g->alignment;
    if (dstart > size) dstart = size; /* only valid when no tensor has bytes: checked below */
    g->data_offset = dstart;
    size_t dsize = size - dstart;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        fr_gguf_tensor *t = &g->tensors[i];
        if (t->offset > dsize || t->nbytes > dsize - t->offset) {
            fr_err_set(err, "%s: tensor '%s': data [%llu, +%zu) runs past the end of the file "
                            "(data section is %zu bytes; truncated?)", path,
                       QS(t->name), (unsigned long long)t->offset,
                       t->nbytes, dsize);
            goto fail;
        }
        t->data = data + dstart + t->offset;
    }
    return 0;
fail:
    fr_gguf_free(g);
    return -1;
}

void fr_gguf_free(fr_gguf *g) {
    free(g->kv);
    free(g->tensors);
    free(g->kv_by_key);
    free(g->tensors_by_name);
    free(g->path);
    memset(g, 0, sizeof *g);
}

/* The key / name is the first member of fr_gguf_kv / fr_gguf_tensor, so the sorted pointers
 * convert back to the structs. */
const fr_gguf_kv *fr_gguf_find(const fr_gguf *g, const char *key) {
    if (!g->kv_by_key) return NULL;
    int64_t i = find_sorted(g->kv_by_key, g->n_kv, key);
    return i < 0 ? NULL : (const fr_gguf_kv *)(const void *)g->kv_by_key[i];
}

const fr_gguf_tensor *fr_gguf_find_tensor(const fr_gguf *g, const char *name) {
    if (!g->tensors_by_name) return NULL;
    int64_t i = find_sorted(g->tensors_by_name, g->n_tensors, name);
    return i < 0 ? NULL : (const fr_gguf_tensor *)(const void *)g->tensors_by_name[i];
}

/* ---- typed getters ---- */

/* Decode an integer of type t at p; false for a non-integer type. */
static bool decode_int(uint32_t t, const uint8_t *p, int64_t *v, bool *overflow) {
    *overflow = false;
    switch (t) {
    case FR_GGUF_U8: *v = p[0]; return true;
    case FR_GGUF_I8: *v = (int8_t)p[0]; return true;
    case FR_GGUF_U16: { uint16_t x; memcpy(&x, p, 2); *v = x; return true; }
    case FR_GGUF_I16: { int16_t x; memcpy(&x, p, 2); *v = x; return true; }
    case FR_GGUF_U32: { uint32_t x; memcpy(&x, p, 4); *v = x; return true; }
    case FR_GGUF_I32: { int32_t x; memcpy(&x, p, 4); *v = x; return true; }
    case FR_GGUF_I64: { int64_t x; memcpy(&x, p, 8); *v = x; return true; }
    case FR_GGUF_U64: {
        uint64_t x;
        memcpy(&x, p, 8);
        if (x > (uint64_t)INT64_MAX) { *overflow = true; *v = INT64_MAX; }
        else *v = (int64_t)x;
        return true;
    }
    default: return false;
    }
}

#define KEYFMT "%s: metadata '%s'"

int fr_gguf_get_int(const fr_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) return 1;
    int64_t v;
    bool ovf;
    if (!decode_int(kv->type, kv->val, &v, &ovf)) {
        fr_err_set(err, KEYFMT " has type %s, expected an integer", g->path, key,
                   vtype_name(kv->type));
        return -1;
    }
    if (ovf || v < lo || v > hi) {
        fr_err_set(err, KEYFMT " = %lld is out of range [%lld, %lld]", g->path, key,
                   (long long)v, (long long)lo, (long long)hi);
        return -1;
    }
    *out = v;
    return 0;
}

int fr_gguf_get_float(const fr_gguf *g, const char *key, double *out, fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) return 1;
    double v;
    if (kv->type == FR_GGUF_F32) {
        float f;
        memcpy(&f, kv->val, 4);
        v = f;
    } else if (kv->type == FR_GGUF_F64) {
        memcpy(&v, kv->val, 8);
    } else {
        int64_t i;
        bool ovf;
        if (!decode_int(kv->type, kv->val, &i, &ovf)) {
            fr_err_set(err, KEYFMT " has type %s, expected a number", g->path, key,
                       vtype_name(kv->type));
            return -1;
        }
        v = (double)i;
    }
    if (!isfinite(v)) {
        fr_err_set(err, KEYFMT " is not a finite number", g->path, key);
        return -1;
    }
    *out = v;
    return 0;
}

int fr_gguf_get_bool(const fr_gguf *g, const char *key, bool *out, fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) return 1;
    if (kv->type != FR_GGUF_BOOL) {
        fr_err_set(err, KEYFMT " has type %s, expected bool", g->path, key, vtype_name(kv->type));
        return -1;
    }
    *out = kv->val[0] != 0;
    return 0;
}

int fr_gguf_get_str(const fr_gguf *g, const char *key, fr_gguf_str *out, fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) return 1;
    if (kv->type != FR_GGUF_STR) {
        fr_err_set(err, KEYFMT " has type %s, expected string", g->path, key,
                   vtype_name(kv->type));
        return -1;
    }
    uint64_t n;
    memcpy(&n, kv->val, 8); /* validated by the parser */
    out->p = (const char *)kv->val + 8;
    out->n = (size_t)n;
    return 0;
}

char *fr_gguf_get_strdup(const fr_gguf *g, const char *key, int *rc, fr_err *err) {
    fr_gguf_str s;
    int r = fr_gguf_get_str(g, key, &s, err);
    if (rc) *rc = r;
    if (r != 0) return NULL;
    if (memchr(s.p, 0, s.n)) {
        fr_err_set(err, KEYFMT " contains a NUL byte", g->path, key);
        if (rc) *rc = -1;
        return NULL;
    }
    return fr_xstrndup(s.p, s.n);
}

static const fr_gguf_kv *get_array(const fr_gguf *g, const char *key, int *rc, fr_err *err) {
    const fr_gguf_kv *kv = fr_gguf_find(g, key);
    if (!kv) {
        *rc = 1;
        return NULL;
    }
    if (kv->type != FR_GGUF_ARR) {
        fr_err_set(err, KEYFMT " has type %s, expected an array", g->path, key,
                   vtype_name(kv->type));
        *rc = -1;
        return NULL;
    }
    *rc = 0;
    return kv;
}

int fr_gguf_get_str_array(const fr_gguf *g, const char *key, const char ***ptrs, size_t **lens,
                          int64_t *n, fr_err *err) {
    int rc;
    const fr_gguf_kv *kv = get_array(g, key, &rc, err);
    if (!kv) return rc;
    if (kv->arr_type != FR_GGUF_STR) {
        fr_err_set(err, KEYFMT " is an array of %s, expected strings", g->path, key,
                   vtype_name(kv->arr_type));
        return -1;
    }
    if (kv->arr_n > (uint64_t)INT32_MAX) {
        fr_err_set(err, KEYFMT " has too many elements", g->path, key);
        return -1;
    }
    /* count <= remaining bytes / 8 was checked by the parser */
    size_t cnt = (size_t)kv->arr_n;
    const char **p = fr_xmalloc((cnt ? cnt : 1) * sizeof *p);
    size_t *l = fr_xmalloc((cnt ? cnt : 1) * sizeof *l);
    cursor c = {kv->arr, g->data + g->size};
    for (size_t i = 0; i < cnt; i++) {
        fr_gguf_str s;
        if (!cur_str(&c, &s, UINT64_MAX)) { /* cannot happen after a successful parse */
            free(p);
            free(l);
            fr_err_set(err, KEYFMT ": truncated string array", g->path, key);
            return -1;
        }
        p[i] = s.p;
        l[i] = s.n;
    }
    *ptrs = p;
    *lens = l;
    *n = (int64_t)cnt;
    return 0;
}

int fr_gguf_get_i32_array(const fr_gguf *g, const char *key, int32_t **vals, int64_t *n,
                          fr_err *err) {
    int rc;
    const fr_gguf_kv *kv = get_array(g, key, &rc, err);
    if (!kv) return rc;
    size_t esz = vtype_size(kv->arr_type);
    int64_t probe;
    bool ovf;
    uint8_t zero[8] = {0};
    if (!esz || kv->arr_type == FR_GGUF_F32 || kv->arr_type == FR_GGUF_F64 ||
        kv->arr_type == FR_GGUF_BOOL || !decode_int(kv->arr_type, zero, &probe, &ovf)) {
        fr_err_set(err, KEYFMT " is an array of %s, expected integers", g->path, key,
                   vtype_name(kv->arr_type));
        return -1;
    }
    if (kv->arr_n > (uint64_t)INT32_MAX) {
        fr_err_set(err, KEYFMT " has too many elements", g->path, key);
        return -1;
    }
    size_t cnt = (size_t)kv->arr_n;
    int32_t *v = fr_xmalloc((cnt ? cnt : 1) * sizeof *v);
    for (size_t i = 0; i < cnt; i++) {
        int64_t x = 0;
        decode_int(kv->arr_type, kv->arr + i * esz, &x, &ovf);
        if (ovf || x < INT32_MIN || x > INT32_MAX) {
            free(v);
            fr_err_set(err, KEYFMT "[%zu] = %lld does not fit in 32 bits", g->path, key, i,
                       (long long)x);
            return -1;
        }
        v[i] = (int32_t)x;
    }
    *vals = v;
    *n = (int64_t)cnt;
    return 0;
}

int fr_gguf_get_f32_array(const fr_gguf *g, const char *key, float **vals, int64_t *n,
                          fr_err *err) {
    int rc;
    const fr_gguf_kv *kv = get_array(g, key, &rc, err);
    if (!kv) return rc;
    if (kv->arr_type != FR_GGUF_F32) {
        fr_err_set(err, KEYFMT " is an array of %s, expected f32", g->path, key,
                   vtype_name(kv->arr_type));
        return -1;
    }
    if (kv->arr_n > (uint64_t)INT32_MAX) {
        fr_err_set(err, KEYFMT " has too many elements", g->path, key);
        return -1;
    }
    size_t cnt = (size_t)kv->arr_n;
    float *v = fr_xmalloc((cnt ? cnt : 1) * sizeof *v);
    if (cnt) memcpy(v, kv->arr, cnt * sizeof *v); /* little-endian, as the file */
    *vals = v;
    *n = (int64_t)cnt;
    return 0;
}

/* ---- dequantisation (ggml reference layouts) ---- */

static float rd_f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fr_f16_to_f32(h);
}

/* Q4_K / Q5_K: 6-bit scale and min of sub-block j from the 12 packed bytes. */
static void k_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* Q4_K block (144 bytes): f16 d, f16 dmin, 12 bytes of scales/mins, 128 bytes of nibbles. */
static void deq_q4_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, q += 32) {
        uint8_t s, m;
        k_scale_min(is, sc, &s, &m);
        float d1 = d * s, m1 = dmin * m;
        k_scale_min(is + 1, sc, &s, &m);
        float d2 = d * s, m2 = dmin * m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)(q[l] & 0xF) - m1;
        for (int l = 0; l < 32; l++) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
}

/* Q5_K block (176 bytes): f16 d, f16 dmin, 12 bytes scales, 32 bytes high bits, 128 nibbles. */
static void deq_q5_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *ql = b + 48;
    unsigned u1 = 1, u2 = 2;
    for (int j = 0, is = 0; j < 256; j += 64, is += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
        uint8_t s, m;
        k_scale_min(is, sc, &s, &m);
        float d1 = d * s, m1 = dmin * m;
        k_scale_min(is + 1, sc, &s, &m);
        float d2 = d * s, m2 = dmin * m;
        for (int l = 0; l < 32; l++)
            *y++ = d1 * (float)((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
        for (int l = 0; l < 32; l++)
            *y++ = d2 * (float)((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
}

/* Q6_K block (210 bytes): 128 bytes low nibbles, 64 bytes high 2-bit pairs, 16 int8 scales,
 * f16 d. */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
            y[l] = d * sc[is] * (float)q1;
            y[l + 32] = d * sc[is + 2] * (float)q2;
            y[l + 64] = d * sc[is + 4] * (float)q3;
            y[l + 96] = d * sc[is + 6] * (float)q4;
        }
    }
}

#if defined(__F16C__)
#include <immintrin.h>
#endif

int fr_ggml_to_f32(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *s = src;
    switch (type) {
    case FR_GGML_F32:
        memcpy(dst, s, (size_t)n * 4);
        return 0;
    case FR_GGML_F16: {
        int64_t i = 0;
#if defined(__F16C__)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + 2 * i))));
#endif
        for (; i < n; i++) dst[i] = rd_f16(s + 2 * i);
        return 0;
    }
    case FR_GGML_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = fr_bf16_to_f32(h);
        }
        return 0;
    case FR_GGML_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, s += 34) {
            float d = rd_f16(s);
            for (int j = 0; j < 32; j++) dst[b * 32 + j] = d * (float)(int8_t)s[2 + j];
        }
        return 0;
    case FR_GGML_Q4_0:
        for (int64_t b = 0; b < n / 32; b++, s += 18) {
            float d = rd_f16(s);
            for (int j = 0; j < 16; j++) {
                dst[b * 32 + j] = d * (float)((s[2 + j] & 0xF) - 8);
                dst[b * 32 + j + 16] = d * (float)((s[2 + j] >> 4) - 8);
            }
        }
        return 0;
    case FR_GGML_Q4_K:
        for (int64_t b = 0; b < n / 256; b++) deq_q4_k(s + b * 144, dst + b * 256);
        return 0;
    case FR_GGML_Q5_K:
        for (int64_t b = 0; b < n / 256; b++) deq_q5_k(s + b * 176, dst + b * 256);
        return 0;
    case FR_GGML_Q6_K:
        for (int64_t b = 0; b < n / 256; b++) deq_q6_k(s + b * 210, dst + b * 256);
        return 0;
    default:
        return -1;
    }
}

/* model.h's dtypes through the ggml conversions above (here, not in model.c, so the CUDA
 * programs that link the decoder without the loader have it with gguf.o alone). */
int fr_dtype_to_f32(fr_dtype t, const void *src, float *dst, int64_t n) {
    static const uint32_t ggml[FR_DTYPE_COUNT] = {
        [FR_DTYPE_F32] = FR_GGML_F32,   [FR_DTYPE_F16] = FR_GGML_F16,
        [FR_DTYPE_BF16] = FR_GGML_BF16, [FR_DTYPE_Q8_0] = FR_GGML_Q8_0,
        [FR_DTYPE_Q4_0] = FR_GGML_Q4_0, [FR_DTYPE_Q4_K] = FR_GGML_Q4_K,
        [FR_DTYPE_Q5_K] = FR_GGML_Q5_K, [FR_DTYPE_Q6_K] = FR_GGML_Q6_K};
    if ((unsigned)t >= FR_DTYPE_COUNT) return -1;
    if (t == FR_DTYPE_F32) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return 0;
    }
    return fr_ggml_to_f32(ggml[t], src, dst, n);
}
