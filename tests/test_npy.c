/* test_npy.c — the .npy reader and writer (src/base/npy.c): round trips, every dtype, the
 * header variants numpy writes (versions 1/2/3, either quote, trailing comma), numpy's exact
 * header bytes for a saved float32 array, and refusals with their codes (Fortran order, big
 * endian, unknown dtype, truncated and trailing data, overflowing shapes, too many dimensions,
 * malformed dicts, a missing file). */
#include <stdint.h>
#include <unistd.h>

#include "base/npy.h"
#include "t.h"

/* A .npy image with the given version and dict text (padded with spaces to a multiple of 64,
 * ending in '\n') followed by data; returns its malloc'd bytes and length. */
static uint8_t *mk(int major, const char *dict, const void *data, size_t dlen, size_t *len) {
    size_t pre = major == 1 ? 10 : 12;
    size_t dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64;
    uint8_t *b = malloc(total + dlen + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    size_t hl = total - pre;
    b[8] = (uint8_t)hl;
    b[9] = (uint8_t)(hl >> 8);
    if (major > 1) b[10] = b[11] = 0;
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', total - pre - dl - 1);
    b[total - 1] = '\n';
    if (dlen) memcpy(b + total, data, dlen);
    *len = total + dlen;
    return b;
}

static int parse(int major, const char *dict, const void *data, size_t dlen, fr_npy *a, fr_err *e) {
    size_t len;
    uint8_t *b = mk(major, dict, data, dlen, &len);
    int rc = fr_npy_parse_f32(b, len, "t.npy", a, e);
    free(b);
    return rc;
}

static char tmp_path[64];
static const char *tmp_npy(void) {
    snprintf(tmp_path, sizeof tmp_path, "/tmp/test_npy_%d.npy", (int)getpid());
    return tmp_path;
}

TEST(save_then_load_round_trips) {
    float v[6] = {1.5f, -2.0f, 0.0f, 3.25e-8f, 1e30f, -0.0f};
    int64_t shape[2] = {2, 3};
    fr_err e = {0};
    CHECK(fr_npy_save_f32(tmp_npy(), v, 2, shape, &e) == 0);
    fr_npy a;
    CHECK(fr_npy_load_f32(tmp_npy(), &a, &e) == 0);
    CHECK_EQ_INT(a.n_dims, 2);
    CHECK_EQ_INT(a.shape[0], 2);
    CHECK_EQ_INT(a.shape[1], 3);
    CHECK_EQ_INT(a.n, 6);
    CHECK(a.data && !memcmp(a.data, v, sizeof v));
    fr_npy_free(&a);
    CHECK(a.data == NULL && a.n == 0);
    /* 1-d, 0-d, and an empty array */
    int64_t s1 = 6;
    CHECK(fr_npy_save_f32(tmp_npy(), v, 1, &s1, &e) == 0);
    CHECK(fr_npy_load_f32(tmp_npy(), &a, &e) == 0 && a.n_dims == 1 && a.n == 6 && a.data[5] == 0.0f);
    fr_npy_free(&a);
    CHECK(fr_npy_save_f32(tmp_npy(), v, 0, NULL, &e) == 0);
    CHECK(fr_npy_load_f32(tmp_npy(), &a, &e) == 0 && a.n_dims == 0 && a.n == 1 && a.data[0] == 1.5f);
    fr_npy_free(&a);
    int64_t s0[3] = {4, 0, 2};
    CHECK(fr_npy_save_f32(tmp_npy(), NULL, 3, s0, &e) == 0);
    CHECK(fr_npy_load_f32(tmp_npy(), &a, &e) == 0 && a.n_dims == 3 && a.n == 0 && a.data != NULL);
    fr_npy_free(&a);
    unlink(tmp_npy());
}

/* numpy 1.x/2.x write exactly these 128 bytes before the data of np.save(f, np.zeros((2, 3),
 * np.float32)): version 1.0, header length 118, the dict, spaces, '\n'. */
TEST(save_writes_numpys_header_bytes) {
    float v[6] = {0};
    int64_t shape[2] = {2, 3};
    fr_err e = {0};
    CHECK(fr_npy_save_f32(tmp_npy(), v, 2, shape, &e) == 0);
    size_t len = 0;
    char *b = fr_read_file(tmp_npy(), 1 << 20, &len, &e);
    CHECK(b && len == 128 + 24);
    if (b && len >= 128) {
        CHECK(!memcmp(b, "\x93NUMPY\x01\x00\x76\x00", 10));
        const char *d = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        CHECK(!memcmp(b + 10, d, strlen(d)));
        for (size_t i = 10 + strlen(d); i < 127; i++) CHECK(b[i] == ' ');
        CHECK(b[127] == '\n');
    }
    free(b);
    int64_t s1 = 7;
    float w[7] = {0};
    CHECK(fr_npy_save_f32(tmp_npy(), w, 1, &s1, &e) == 0);
    b = fr_read_file(tmp_npy(), 1 << 20, &len, &e);
    CHECK(b && len == 128 + 28 && strstr(b + 10, "'shape': (7,), }"));
    free(b);
    unlink(tmp_npy());
}

TEST(every_dtype_converts) {
    fr_npy a;
    fr_err e = {0};
    double f8[3] = {0.5, -1e10, 3.0};
    CHECK(parse(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", f8, sizeof f8, &a, &e) == 0);
    CHECK(a.n == 3 && a.data[0] == 0.5f && a.data[1] == -1e10f && a.data[2] == 3.0f);
    fr_npy_free(&a);
    uint16_t f2[2] = {0x3c00, 0xc000}; /* 1.0, -2.0 */
    CHECK(parse(1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", f2, sizeof f2, &a, &e) == 0);
    CHECK(a.n == 2 && a.data[0] == 1.0f && a.data[1] == -2.0f);
    fr_npy_free(&a);
    int32_t i4[2] = {-7, 123456};
    CHECK(parse(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }", i4, sizeof i4, &a, &e) == 0);
    CHECK(a.n == 2 && a.data[0] == -7.0f && a.data[1] == 123456.0f);
    fr_npy_free(&a);
    int64_t i8[2] = {-9, 1LL << 40};
    CHECK(parse(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i8, sizeof i8, &a, &e) == 0);
    CHECK(a.n == 2 && a.data[0] == -9.0f && a.data[1] == (float)(1LL << 40));
    fr_npy_free(&a);
    uint8_t u1[6] = {0, 1, 127, 128, 254, 255};
    CHECK(parse(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", u1, sizeof u1, &a, &e) == 0);
    CHECK(a.n == 6 && a.data[2] == 127.0f && a.data[5] == 255.0f);
    fr_npy_free(&a);
}

TEST(header_variants_numpy_may_write) {
    fr_npy a;
    fr_err e = {0};
    float v[4] = {1, 2, 3, 4};
    /* versions 2 and 3 (4-byte header length), other key order, double quotes, no trailing comma */
    CHECK(parse(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", v, sizeof v, &a, &e) == 0 && a.n == 4);
    fr_npy_free(&a);
    CHECK(parse(3, "{\"shape\": (2,2), \"fortran_order\": False, \"descr\": \"<f4\"}", v, sizeof v, &a, &e) == 0 && a.n == 4);
    fr_npy_free(&a);
    CHECK(parse(1, "{'descr':'<f4','fortran_order':False,'shape':(1,1,4)}", v, sizeof v, &a, &e) == 0 && a.n_dims == 3);
    fr_npy_free(&a);
    /* a scalar */
    CHECK(parse(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", v, 4, &a, &e) == 0 && a.n == 1 && a.n_dims == 0);
    fr_npy_free(&a);
}

static void refused(int major, const char *dict, const void *data, size_t dlen, fr_err_code code) {
    fr_npy a;
    fr_err e = {0};
    int rc = parse(major, dict, data, dlen, &a, &e);
    if (rc == 0 || e.code != code)
        fprintf(stderr, "  [%s]: rc %d code %s (%s), wanted %s\n", dict, rc, fr_err_code_name(e.code),
                e.msg, fr_err_code_name(code));
    CHECK(rc == -1);
    CHECK_EQ_INT(e.code, code);
    CHECK(a.data == NULL && a.n == 0);
    CHECK(strstr(e.msg, "t.npy") != NULL);
}

TEST(refusals_carry_codes) {
    float v[8] = {0};
    refused(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", v, 16, FR_ERR_UNSUPPORTED);
    refused(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }", v, 16, FR_ERR_UNSUPPORTED);
    refused(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", v, 16, FR_ERR_UNSUPPORTED);
    refused(1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", v, 16, FR_ERR_UNSUPPORTED);
    /* truncated and trailing data */
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", v, 15, FR_ERR_BAD_REQUEST);
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", v, 20, FR_ERR_BAD_REQUEST);
    /* a product that overflows int64, a dimension over the cap, more than 8 dimensions */
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", v, 0, FR_ERR_TOO_LARGE);
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999999,), }", v, 0, FR_ERR_TOO_LARGE);
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (65536, 65536), }", v, 0, FR_ERR_TOO_LARGE);
    refused(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", v, 4, FR_ERR_TOO_LARGE);
    /* malformed dicts */
    const char *bad[] = {
        "{'descr': '<f4', 'fortran_order': False, }",                               /* no shape */
        "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",  /* repeated */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1, }",        /* extra key */
        "{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }",                /* not Python */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2), }",                 /* not a tuple */
        "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,), }",
        "{'descr': '<f4, 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }",
        "['descr', '<f4']",
        "",
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) refused(1, bad[i], v, 8, FR_ERR_BAD_REQUEST);
}

TEST(refuses_bad_preambles) {
    fr_npy a;
    fr_err e = {0};
    const uint8_t *junk = (const uint8_t *)"\x93NUMPZ\x01\x00\x10\x00{}";
    CHECK(fr_npy_parse_f32(junk, 12, "x", &a, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    CHECK(fr_npy_parse_f32((const uint8_t *)"\x93NUMPY\x04\x00\x10\x00", 10, "x", &a, &e) == -1 &&
          e.code == FR_ERR_UNSUPPORTED);
    CHECK(fr_npy_parse_f32((const uint8_t *)"\x93NUMPY\x01\x01\x10\x00", 10, "x", &a, &e) == -1 &&
          e.code == FR_ERR_UNSUPPORTED);
    /* the header length runs past the end; a v2 header length over the cap */
    CHECK(fr_npy_parse_f32((const uint8_t *)"\x93NUMPY\x01\x00\xff\x00{}", 12, "x", &a, &e) == -1 &&
          e.code == FR_ERR_BAD_REQUEST);
    CHECK(fr_npy_parse_f32((const uint8_t *)"\x93NUMPY\x02\x00\x00\x00\x02\x00", 12, "x", &a, &e) == -1 &&
          e.code == FR_ERR_TOO_LARGE);
    CHECK(fr_npy_parse_f32((const uint8_t *)"\x93NUMPY\x02\x00\x00", 9, "x", &a, &e) == -1);
    CHECK(fr_npy_load_f32("/nonexistent/dir/x.npy", &a, &e) == -1 && e.code == FR_ERR_NOT_FOUND);
}

TEST(save_refuses_bad_shapes) {
    fr_err e = {0};
    float v[1] = {0};
    int64_t neg[2] = {2, -1};
    CHECK(fr_npy_save_f32(tmp_npy(), v, 2, neg, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    int64_t s[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK(fr_npy_save_f32(tmp_npy(), v, 9, s, &e) == -1 && e.code == FR_ERR_BAD_REQUEST);
    CHECK(fr_npy_save_f32("/nonexistent/dir/x.npy", v, 1, s, &e) == -1 && e.code == FR_ERR_NOT_FOUND);
}

int main(void) { return t_main(); }
