/* gguf.h — reader for GGUF files (ggml's docs/gguf.md; versions 3 and 2, little-endian).
 *
 * Layout: "GGUF", u32 version, u64 tensor count, u64 metadata count; metadata key/value pairs
 * (key: u64 length + bytes; u32 value type; value); tensor infos (name, u32 n_dims, u64 dims
 * (ne[0] innermost), u32 ggml type, u64 offset); padding to general.alignment (default 32); the
 * data section, each tensor at its offset (a multiple of the alignment).
 *
 * The parser works on a byte buffer (a file's memory map or a fuzzer's input) and checks every
 * length and count against the bytes that remain before using it, so a hostile file can neither
 * read out of bounds nor make it allocate more than a small multiple of the file size. Strings
 * are not NUL-terminated in GGUF: they are returned as (pointer, length) into the buffer. Values
 * are decoded on demand by the getters; parsing only records where each value starts.
 */
#ifndef FRUGAL_GGUF_H
#define FRUGAL_GGUF_H

#include "model/model.h"

/* GGUF metadata value types. */
typedef enum fr_gguf_vtype {
    FR_GGUF_U8 = 0, FR_GGUF_I8 = 1, FR_GGUF_U16 = 2, FR_GGUF_I16 = 3, FR_GGUF_U32 = 4,
    FR_GGUF_I32 = 5, FR_GGUF_F32 = 6, FR_GGUF_BOOL = 7, FR_GGUF_STR = 8, FR_GGUF_ARR = 9,
    FR_GGUF_U64 = 10, FR_GGUF_I64 = 11, FR_GGUF_F64 = 12, FR_GGUF_VTYPE_COUNT
} fr_gguf_vtype;

/* ggml tensor types this project names (the parser knows the sizes of all of ggml's types). */
enum {
    FR_GGML_F32 = 0, FR_GGML_F16 = 1, FR_GGML_Q4_0 = 2, FR_GGML_Q8_0 = 8, FR_GGML_Q4_K = 12,
    FR_GGML_Q5_K = 13, FR_GGML_Q6_K = 14, FR_GGML_BF16 = 30
};

/* A string inside the buffer (not NUL-terminated). */
typedef struct fr_gguf_str {
    const char *p; /* first byte */
    size_t n;      /* length in bytes */
} fr_gguf_str;

typedef struct fr_gguf_kv {
    fr_gguf_str key;       /* the key (first member: lookups cast &key back to the kv) */
    uint32_t type;         /* fr_gguf_vtype */
    const uint8_t *val;    /* the encoded value in the buffer */
    uint32_t arr_type;     /* arrays: element type */
    uint64_t arr_n;        /* arrays: element count */
    const uint8_t *arr;    /* arrays: first element */
} fr_gguf_kv;

typedef struct fr_gguf_tensor {
    fr_gguf_str name;      /* tensor name (first member, as for fr_gguf_kv) */
    uint32_t type;         /* ggml type id */
    int n_dims;            /* 1..FR_MAX_DIMS */
    int64_t ne[FR_MAX_DIMS]; /* elements per dimension, ne[0] innermost; unused dims 1 */
    int64_t n_elem;        /* product of ne */
    uint64_t offset;       /* from the start of the data section */
    const uint8_t *data;   /* the tensor's bytes in the buffer */
    size_t nbytes;         /* their count */
} fr_gguf_tensor;

typedef struct fr_gguf {
    char *path;            /* name for messages (owned) */
    const uint8_t *data;   /* the whole file */
    size_t size;           /* its size */
    uint32_t version;      /* 2 or 3 */
    uint32_t alignment;    /* general.alignment, a power of two */
    fr_gguf_kv *kv;        /* metadata in file order */
    int64_t n_kv;          /* entries in kv */
    fr_gguf_tensor *tensors; /* tensor infos in file order */
    int64_t n_tensors;     /* entries in tensors */
    size_t data_offset;    /* start of the data section */
    const fr_gguf_str **kv_by_key;       /* &kv[i].key sorted by key, for lookups */
    const fr_gguf_str **tensors_by_name; /* &tensors[i].name sorted by name */
} fr_gguf;

/* Parse a GGUF image (kept alive by the caller). Returns 0 or -1 with err naming `path`. */
int fr_gguf_parse(fr_gguf *g, const char *path, const uint8_t *data, size_t size, fr_err *err);
void fr_gguf_free(fr_gguf *g);

const fr_gguf_kv *fr_gguf_find(const fr_gguf *g, const char *key);
const fr_gguf_tensor *fr_gguf_find_tensor(const fr_gguf *g, const char *name);

/* Typed getters. Return 1 when the key is absent (*out untouched), 0 on success, -1 with err set
 * (naming the file and key) when the value has the wrong type or is out of range. */
int fr_gguf_get_int(const fr_gguf *g, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    fr_err *err); /* any integer type, value checked to be in [lo, hi] */
int fr_gguf_get_float(const fr_gguf *g, const char *key, double *out, fr_err *err); /* f32/f64 */
int fr_gguf_get_bool(const fr_gguf *g, const char *key, bool *out, fr_err *err);
int fr_gguf_get_str(const fr_gguf *g, const char *key, fr_gguf_str *out, fr_err *err);
/* A NUL-terminated malloc'd copy of a string value, or NULL (absent or error: check err). */
char *fr_gguf_get_strdup(const fr_gguf *g, const char *key, int *rc, fr_err *err);
/* An array of strings: malloc'd arrays of pointers (into the buffer) and lengths. */
int fr_gguf_get_str_array(const fr_gguf *g, const char *key, const char ***ptrs, size_t **lens,
                          int64_t *n, fr_err *err);
/* An array of integers (any integer element type) as malloc'd int32 (values must fit). */
int fr_gguf_get_i32_array(const fr_gguf *g, const char *key, int32_t **vals, int64_t *n,
                          fr_err *err);

/* An array of f32 as a malloc'd float array. */
int fr_gguf_get_f32_array(const fr_gguf *g, const char *key, float **vals, int64_t *n,
                          fr_err *err);

/* ggml type name ("Q4_K"), or NULL for an id ggml doesn't define. */
const char *fr_ggml_type_name(uint32_t type);
/* Elements per block and bytes per block; 0 for an unknown id. */
int fr_ggml_block_elems(uint32_t type);
int fr_ggml_block_bytes(uint32_t type);
/* Convert n elements (a multiple of the block size) of F32/F16/BF16/Q8_0/Q4_0/Q4_K/Q5_K/Q6_K data
 * to F32. Returns 0, or -1 for another type. */
int fr_ggml_to_f32(uint32_t type, const void *src, float *dst, int64_t n);

#endif
