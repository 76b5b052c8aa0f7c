/* npy.c — the .npy reader and writer (see npy.h).
 *
 * The header dict is parsed by a small recursive-descent reader over the bytes [p, end) that
 * accepts exactly the Python literal numpy writes and close variants (either quote, any spacing,
 * a trailing comma): a string for 'descr', True/False for 'fortran_order', a tuple of
 * non-negative decimal integers for 'shape'. Anything else is refused; no byte outside the
 * header is ever read while parsing it. The data is decoded byte by byte as little-endian, so the
 * reader does not depend on the host's byte order or on alignment.
 */
#include "base/npy.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef enum npy_dtype { NPY_F4, NPY_F8, NPY_F2, NPY_I4, NPY_I8, NPY_U1 } npy_dtype;

static const struct {
    const char *descr;
    npy_dtype type;
    int size;
} npy_types[] = {
    {"<f4", NPY_F4, 4}, {"<f8", NPY_F8, 8}, {"<f2", NPY_F2, 2},
    {"<i4", NPY_I4, 4}, {"<i8", NPY_I8, 8}, {"|u1", NPY_U1, 1},
};

/* The header reader: a cursor over [p, end). */
typedef struct hdr_rd {
    const char *p, *end;
} hdr_rd;

static void hdr_ws(hdr_rd *r) {
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r'))
        r->p++;
}

static bool hdr_eat(hdr_rd *r, char c) {
    hdr_ws(r);
    if (r->p < r->end && *r->p == c) {
        r->p++;
        return true;
    }
    return false;
}

/* A quoted string without escapes into out (at most cap-1 bytes). */
static bool hdr_string(hdr_rd *r, char *out, size_t cap) {
    hdr_ws(r);
    if (r->p >= r->end || (*r->p != '\'' && *r->p != '"')) return false;
    char q = *r->p++;
    size_t n = 0;
    while (r->p < r->end && *r->p != q) {
        if (*r->p == '\\' || (unsigned char)*r->p < 0x20 || n + 1 >= cap) return false;
        out[n++] = *r->p++;
    }
    if (r->p >= r->end) return false;
    r->p++;
    out[n] = 0;
    return true;
}

static bool hdr_word(hdr_rd *r, const char *w) {
    hdr_ws(r);
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n)) return false;
    const char *after = r->p + n;
    if (after < r->end && ((*after >= 'a' && *after <= 'z') || (*after >= 'A' && *after <= 'Z') ||
                           (*after >= '0' && *after <= '9') || *after == '_'))
        return false;
    r->p = after;
    return true;
}

/* A non-negative decimal integer up to FR_NPY_MAX_ELEMS (a larger one is *big = true). */
static bool hdr_int(hdr_rd *r, int64_t *v, bool *big) {
    hdr_ws(r);
    if (r->p >= r->end || *r->p < '0' || *r->p > '9') return false;
    int64_t x = 0;
    while (r->p < r->end && *r->p >= '0' && *r->p <= '9') {
        if (x > FR_NPY_MAX_ELEMS) *big = true; /* keep reading the digits, stop growing */
        else x = x * 10 + (*r->p - '0');
        r->p++;
    }
    if (x > FR_NPY_MAX_ELEMS) *big = true;
    *v = x;
    return true;
}

/* (a, b, ...) with an optional trailing comma; () is a scalar; (a) without a comma is refused
 * (it is not a tuple in Python). */
static int hdr_shape(hdr_rd *r, int64_t *shape, int *n_dims, bool *big, bool *too_many) {
    if (!hdr_eat(r, '(')) return -1;
    int n = 0;
    if (hdr_eat(r, ')')) {
        *n_dims = 0;
        return 0;
    }
    for (;;) {
        int64_t v;
        if (!hdr_int(r, &v, big)) return -1;
        if (n >= FR_NPY_MAX_DIMS) *too_many = true;
        else shape[n] = v;
        n++;
        if (hdr_eat(r, ')')) {
            if (n == 1) return -1;
            break;
        }
        if (!hdr_eat(r, ',')) return -1;
        if (hdr_eat(r, ')')) break;
    }
    *n_dims = n > FR_NPY_MAX_DIMS ? FR_NPY_MAX_DIMS : n;
    return 0;
}

static uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static float npy_elem(const uint8_t *p, npy_dtype t) {
    switch (t) {
    case NPY_F4: {
        uint32_t u = (uint32_t)rd_le(p, 4);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case NPY_F8: {
        uint64_t u = rd_le(p, 8);
        double d;
        memcpy(&d, &u, 8);
        return (float)d;
    }
    case NPY_F2: return fr_f16_to_f32((uint16_t)rd_le(p, 2));
    case NPY_I4: return (float)(int32_t)(uint32_t)rd_le(p, 4);
    case NPY_I8: return (float)(int64_t)rd_le(p, 8);
    case NPY_U1: return (float)p[0];
    }
    return 0.0f;
}

int fr_npy_parse_f32(const uint8_t *buf, size_t len, const char *name, fr_npy *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    if (!name) name = "npy";
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: not a .npy file (no \\x93NUMPY magic)", name);
        return -1;
    }
    int major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: .npy version %d.%d (1.0, 2.0, 3.0 are read)",
                    name, major, minor);
        return -1;
    }
    size_t pre = major == 1 ? 10 : 12;
    if (len < pre) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated .npy preamble", name);
        return -1;
    }
    uint64_t hlen = rd_le(buf + 8, major == 1 ? 2 : 4);
    if (hlen > FR_NPY_MAX_HEADER) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: .npy header of %llu bytes (at most %d)", name,
                    (unsigned long long)hlen, FR_NPY_MAX_HEADER);
        return -1;
    }
    if (hlen > len - pre) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: truncated .npy header (%llu bytes, %zu left)",
                    name, (unsigned long long)hlen, len - pre);
        return -1;
    }
    hdr_rd r = {(const char *)buf + pre, (const char *)buf + pre + hlen};
    char descr[16] = "";
    int have_descr = 0, have_fortran = 0, have_shape = 0;
    bool fortran = false, big = false, too_many = false;
    int64_t shape[FR_NPY_MAX_DIMS] = {0};
    int n_dims = 0;
    bool ok = hdr_eat(&r, '{');
    while (ok && !hdr_eat(&r, '}')) {
        char key[32];
        if (!hdr_string(&r, key, sizeof key) || !hdr_eat(&r, ':')) {
            ok = false;
            break;
        }
        if (!strcmp(key, "descr") && !have_descr) {
            have_descr = 1;
            ok = hdr_string(&r, descr, sizeof descr);
        } else if (!strcmp(key, "fortran_order") && !have_fortran) {
            have_fortran = 1;
            if (hdr_word(&r, "True")) fortran = true;
            else ok = hdr_word(&r, "False");
        } else if (!strcmp(key, "shape") && !have_shape) {
            have_shape = 1;
            ok = hdr_shape(&r, shape, &n_dims, &big, &too_many) == 0;
        } else {
            ok = false; /* an unknown or repeated key */
            break;
        }
        if (!ok) break;
        if (hdr_eat(&r, '}')) break;
        if (!hdr_eat(&r, ',')) ok = false;
    }
    if (ok) {
        hdr_ws(&r); /* the padding and the final newline */
        ok = r.p == r.end;
    }
    if (!ok || !have_descr || !have_fortran || !have_shape) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST,
                    "%s: malformed .npy header (a dict with exactly descr, fortran_order, shape)",
                    name);
        return -1;
    }
    int ti = -1;
    for (size_t i = 0; i < FR_ARRAY_LEN(npy_types); i++)
        if (!strcmp(descr, npy_types[i].descr)) ti = (int)i;
    if (ti < 0) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED,
                    "%s: .npy dtype '%.15s' (read: <f4 <f8 <f2 <i4 <i8 |u1, little-endian)", name,
                    descr);
        return -1;
    }
    if (fortran) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "%s: Fortran-order .npy arrays are not read", name);
        return -1;
    }
    if (too_many) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: .npy array of more than %d dimensions", name,
                    FR_NPY_MAX_DIMS);
        return -1;
    }
    int64_t n = 1;
    for (int i = 0; i < n_dims && !big; i++) {
        if (shape[i] == 0) n = 0;
        else if (n > FR_NPY_MAX_ELEMS / shape[i]) big = true;
        else n *= shape[i];
    }
    if (big) {
        fr_err_setc(err, FR_ERR_TOO_LARGE, "%s: .npy array of more than %lld elements", name,
                    (long long)FR_NPY_MAX_ELEMS);
        return -1;
    }
    size_t esz = (size_t)npy_types[ti].size;
    size_t have = len - pre - (size_t)hlen;
    size_t need = (size_t)n * esz;
    if (have != need) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: .npy data of %zu bytes where the shape needs %zu (%s)",
                    name, have, need, have < need ? "truncated" : "trailing bytes");
        return -1;
    }
    float *data = malloc(n ? (size_t)n * sizeof(float) : 1);
    if (!data) {
        fr_err_setc(err, FR_ERR_INTERNAL, "%s: out of memory for %lld floats", name, (long long)n);
        return -1;
    }
    const uint8_t *src = buf + pre + hlen;
    npy_dtype t = npy_types[ti].type;
    if (t == NPY_F4) {
        for (int64_t i = 0; i < n; i++) data[i] = npy_elem(src + (size_t)i * 4, NPY_F4);
    } else {
        for (int64_t i = 0; i < n; i++) data[i] = npy_elem(src + (size_t)i * esz, t);
    }
    out->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) out->shape[i] = shape[i];
    out->n = n;
    out->data = data;
    return 0;
}

int fr_npy_load_f32(const char *path, fr_npy *out, fr_err *err) {
    memset(out, 0, sizeof *out);
    fr_mmap m;
    if (fr_mmap_open(&m, path, err) != 0) return -1;
    int rc = fr_npy_parse_f32(m.data ? m.data : (const uint8_t *)"", m.size, path, out, err);
    fr_mmap_close(&m);
    return rc;
}

int fr_npy_save_f32(const char *path, const float *data, int n_dims, const int64_t *shape,
                    fr_err *err) {
    if (n_dims < 0 || n_dims > FR_NPY_MAX_DIMS || (n_dims > 0 && !shape)) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: .npy rank %d (0..%d)", path, n_dims,
                    FR_NPY_MAX_DIMS);
        return -1;
    }
    int64_t n = 1;
    char dims[FR_NPY_MAX_DIMS * 24 + 8] = "";
    size_t dl = 0;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] < 0 || (shape[i] > 0 && n > INT64_MAX / 4 / shape[i])) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: bad .npy dimension %lld", path,
                        (long long)shape[i]);
            return -1;
        }
        n *= shape[i];
        dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%s%lld", i ? ", " : "",
                               (long long)shape[i]);
    }
    if (n_dims == 1) dl += (size_t)snprintf(dims + dl, sizeof dims - dl, ",");
    if (n > 0 && !data) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: no data for %lld floats", path, (long long)n);
        return -1;
    }
    char hdr[sizeof dims + 128];
    int hl = snprintf(hdr + 10, sizeof hdr - 10, "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }", dims);
    size_t total = 10 + (size_t)hl + 1; /* preamble, dict, '\n' */
    size_t padded = (total + 63) / 64 * 64;
    memset(hdr + 10 + hl, ' ', padded - total);
    hdr[padded - 1] = '\n';
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    hdr[8] = (char)((padded - 10) & 0xff);
    hdr[9] = (char)((padded - 10) >> 8);
    FILE *f = fopen(path, "wb");
    if (!f) {
        int e = errno;
        fr_err_setc(err, e == ENOENT || e == ENOTDIR ? FR_ERR_NOT_FOUND : FR_ERR_INTERNAL,
                    "%s: cannot create: %s", path, strerror(e));
        return -1;
    }
    bool ok = fwrite(hdr, 1, padded, f) == padded;
    uint8_t chunk[4096];
    for (int64_t i = 0; ok && i < n;) {
        size_t k = 0;
        for (; k + 4 <= sizeof chunk && i < n; i++, k += 4) {
            uint32_t u;
            memcpy(&u, &data[i], 4);
            chunk[k] = (uint8_t)u;
            chunk[k + 1] = (uint8_t)(u >> 8);
            chunk[k + 2] = (uint8_t)(u >> 16);
            chunk[k + 3] = (uint8_t)(u >> 24);
        }
        ok = fwrite(chunk, 1, k, f) == k;
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        fr_err_setc(err, FR_ERR_INTERNAL, "%s: write failed: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

void fr_npy_free(fr_npy *a) {
    if (!a) return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
