/* seeds.c — writes the binary seed files of the fuzz corpora (tests/fuzz/make-seeds.sh runs it):
 *   seeds audio DIR   s.wav (16-bit PCM), s.flac, s.ogg (Vorbis), u.wav (8 kHz mu-law): 0.2 s tones
 *   seeds image DIR   24x16 PNG, JPEG, WebP and TIFF in gray and RGB, each prefixed with the
 *                     fuzz_image selector byte of its declared type and channel count
 *   seeds npy DIR     small .npy arrays: float32 written by fr_npy_save_f32 (2-d, 1-d, scalar,
 *                     empty) and hand-built |u1 (v1.0), <f8 (v2.0) and <i8 (v3.0) ones
 *   seeds mmproj DIR  llama.cpp-style mmproj GGUFs of tiny Qwen2.5-VL (q25-mmproj.gguf) and
 *                     Qwen2-VL (q2-mmproj.gguf) vision towers (hidden 8, 2 heads, 2 blocks,
 *                     patch 2, projection 64), for fuzz_gguf
 *   seeds onnx DIR    small ONNX models written through protobuf-c (tests/onnx_build.h): a
 *                     Constant + Conv + Relu graph in file order and reversed, and a graph with
 *                     every attribute type the loader reads and an int64 initializer
 * Built with the release library:
 *   cc -Isrc -Itests -Ibuild/gen tests/fuzz/seeds.c build/libfrugal.a $(LDLIBS). */
#include <math.h>
#include <stdbool.h>
#include <sndfile.h>
#include <stdio.h>
#include <string.h>

#include "base/npy.h"
#include "onnx_build.h"
#include "stages/image/image.h"

static int write_file(const char *dir, const char *name, const void *p, size_t n) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "seeds: cannot write %s\n", path);
        if (f) fclose(f);
        return 1;
    }
    return fclose(f) != 0;
}

static int audio(const char *dir) {
    static const struct { const char *name; int format, rate; } a[] = {
        {"s.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000},
        {"s.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 16000},
        {"s.ogg", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 16000},
        {"u.wav", SF_FORMAT_WAV | SF_FORMAT_ULAW, 8000},
    };
    float buf[3200];
    for (size_t k = 0; k < sizeof a / sizeof a[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, a[k].name);
        SF_INFO si = {.samplerate = a[k].rate, .channels = 1, .format = a[k].format};
        SNDFILE *sf = sf_open(path, SFM_WRITE, &si);
        if (!sf) {
            fprintf(stderr, "seeds: %s: %s\n", path, sf_strerror(NULL));
            return 1;
        }
        int n = a[k].rate / 5;
        for (int i = 0; i < n; i++) buf[i] = 0.5f * sinf(2 * 3.14159265f * 440.f * (float)i / (float)a[k].rate);
        sf_writef_float(sf, buf, n);
        sf_close(sf);
    }
    return 0;
}

static int image(const char *dir) {
    static const struct { const char *ext; fr_img_format f; int sel; } fm[] = {
        {"png", FR_IMG_PNG, 1}, {"jpg", FR_IMG_JPEG, 2}, {"webp", FR_IMG_WEBP, 3}, {"tiff", FR_IMG_TIFF, 4}};
    uint8_t pix[24 * 16 * 3];
    for (int ch = 1; ch <= 3; ch += 2) {
        for (int i = 0; i < 24 * 16 * ch; i++) pix[i] = (uint8_t)(i * 37 % 251);
        fr_image img = {.pix = pix, .width = 24, .height = 16, .channels = (uint32_t)ch};
        for (size_t k = 0; k < 4; k++) {
            fr_buf b = {0};
            fr_err err = {0};
            uint8_t sel = (uint8_t)(fm[k].sel | (ch == 3 ? 0x10 : 0));
            fr_buf_append(&b, &sel, 1);
            if (fr_img_encode(&img, fm[k].f, 80, &b, &err)) {
                fprintf(stderr, "seeds: %s\n", err.msg);
                return 1;
            }
            char name[32];
            snprintf(name, sizeof name, "%s-%s", ch == 1 ? "gray" : "rgb", fm[k].ext);
            if (write_file(dir, name, b.data, b.len)) return 1;
            fr_buf_free(&b);
        }
    }
    return 0;
}

/* A .npy file of version major with the dict padded to 64 bytes, then dlen bytes of data. */
static int npy_raw(const char *dir, const char *name, int major, const char *dict, const void *data,
                   size_t dlen) {
    uint8_t b[512];
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t total = (pre + dl + 1 + 63) / 64 * 64;
    if (total + dlen > sizeof b) return 1;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    memset(b + 8, 0, 4);
    b[8] = (uint8_t)(total - pre);
    b[9] = (uint8_t)((total - pre) >> 8);
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', total - pre - dl - 1);
    b[total - 1] = '\n';
    memcpy(b + total, data, dlen);
    return write_file(dir, name, b, total + dlen);
}

static int npy(const char *dir) {
    float v[12];
    for (int i = 0; i < 12; i++) v[i] = (float)i * 0.25f - 1.0f;
    int64_t s2[2] = {3, 4}, s1[1] = {5}, s0[3] = {2, 0, 3};
    fr_err err = {0};
    char path[1024];
    struct { const char *name; int nd; const int64_t *shape; } f[] = {
        {"f4-2d.npy", 2, s2}, {"f4-1d.npy", 1, s1}, {"f4-scalar.npy", 0, NULL}, {"f4-empty.npy", 3, s0}};
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, f[k].name);
        if (fr_npy_save_f32(path, v, f[k].nd, f[k].shape, &err)) {
            fprintf(stderr, "seeds: %s\n", err.msg);
            return 1;
        }
    }
    uint8_t u1[6] = {0, 1, 2, 127, 128, 255};
    double f8[2] = {0.5, -1e300};
    int64_t i8[2] = {-3, 1LL << 40};
    return npy_raw(dir, "u1-v1.npy", 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 3), }", u1, 6) ||
           npy_raw(dir, "f8-v2.npy", 2, "{\"descr\": \"<f8\", \"fortran_order\": False, \"shape\": (2,)}", f8, 16) ||
           npy_raw(dir, "i8-v3.npy", 3, "{'shape': (1, 2), 'fortran_order': False, 'descr': '<i8', }", i8, 16);
}

/* ---- mmproj GGUF (metadata + F32 tensors, the names of llama.cpp's converter) ---- */

typedef struct gw {
    uint8_t kv[8192], ti[16384], data[65536];
    size_t nkv_b, nti_b, nd_b;
    uint64_t n_kv, n_t;
} gw;

static void put(uint8_t *dst, size_t *at, const void *p, size_t n) {
    memcpy(dst + *at, p, n);
    *at += n;
}
static void gw_key(gw *g, const char *k, uint32_t type) {
    uint64_t n = strlen(k);
    put(g->kv, &g->nkv_b, &n, 8);
    put(g->kv, &g->nkv_b, k, n);
    put(g->kv, &g->nkv_b, &type, 4);
    g->n_kv++;
}
static void gw_str(gw *g, const char *k, const char *v) {
    gw_key(g, k, 8);
    uint64_t n = strlen(v);
    put(g->kv, &g->nkv_b, &n, 8);
    put(g->kv, &g->nkv_b, v, n);
}
static void gw_u32(gw *g, const char *k, uint32_t v) {
    gw_key(g, k, 4);
    put(g->kv, &g->nkv_b, &v, 4);
}
static void gw_f32(gw *g, const char *k, float v) {
    gw_key(g, k, 6);
    put(g->kv, &g->nkv_b, &v, 4);
}
static void gw_tensor(gw *g, const char *name, int nd, const uint64_t *ne) {
    uint64_t n = strlen(name), cnt = 1;
    uint32_t d = (uint32_t)nd, type = 0;
    put(g->ti, &g->nti_b, &n, 8);
    put(g->ti, &g->nti_b, name, n);
    put(g->ti, &g->nti_b, &d, 4);
    for (int i = 0; i < nd; i++) {
        put(g->ti, &g->nti_b, &ne[i], 8);
        cnt *= ne[i];
    }
    put(g->ti, &g->nti_b, &type, 4);
    while (g->nd_b % 32) g->data[g->nd_b++] = 0;
    uint64_t off = g->nd_b;
    put(g->ti, &g->nti_b, &off, 8);
    for (uint64_t i = 0; i < cnt; i++) {
        float v = (float)((i * 37 + n * 11) % 17) / 17.0f - 0.5f;
        put(g->data, &g->nd_b, &v, 4);
    }
    g->n_t++;
}

static int mmproj_one(const char *dir, const char *name, bool q25) {
    static gw g;
    memset(&g, 0, sizeof g);
    const uint64_t H = 8, F = 12, M = 32, P = 2, O = 64;
    gw_str(&g, "general.architecture", "clip");
    gw_str(&g, "clip.projector_type", q25 ? "qwen2.5vl_merger" : "qwen2vl_merger");
    gw_u32(&g, "clip.vision.embedding_length", (uint32_t)H);
    gw_u32(&g, "clip.vision.block_count", 2);
    gw_u32(&g, "clip.vision.attention.head_count", 2);
    gw_u32(&g, "clip.vision.patch_size", (uint32_t)P);
    gw_u32(&g, "clip.vision.projection_dim", (uint32_t)O);
    gw_f32(&g, "clip.vision.attention.layer_norm_epsilon", 1e-6f);
    if (q25) {
        gw_u32(&g, "clip.vision.n_wa_pattern", 2);
        gw_u32(&g, "clip.vision.window_size", 8);
    }
    gw_tensor(&g, "v.patch_embd.weight", 4, (uint64_t[]){P, P, 3, H});
    gw_tensor(&g, "v.patch_embd.weight.1", 4, (uint64_t[]){P, P, 3, H});
    char n[64];
    for (int b = 0; b < 2; b++) {
        const char *mats[] = {"attn_q", "attn_k", "attn_v", "attn_out"};
        for (int i = 0; i < 4; i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s.weight", b, mats[i]);
            gw_tensor(&g, n, 2, (uint64_t[]){H, H});
            snprintf(n, sizeof n, "v.blk.%d.%s.bias", b, mats[i]);
            gw_tensor(&g, n, 1, (uint64_t[]){H});
        }
        for (int i = 0; i < (q25 ? 2 : 4); i++) {
            snprintf(n, sizeof n, "v.blk.%d.ln%d.%s", b, 1 + i % 2, i < 2 ? "weight" : "bias");
            gw_tensor(&g, n, 1, (uint64_t[]){H});
        }
        const char *ffn[] = {"ffn_up", "ffn_gate"};
        for (int i = 0; i < (q25 ? 2 : 1); i++) {
            snprintf(n, sizeof n, "v.blk.%d.%s.weight", b, ffn[i]);
            gw_tensor(&g, n, 2, (uint64_t[]){H, F});
            snprintf(n, sizeof n, "v.blk.%d.%s.bias", b, ffn[i]);
            gw_tensor(&g, n, 1, (uint64_t[]){F});
        }
        snprintf(n, sizeof n, "v.blk.%d.ffn_down.weight", b);
        gw_tensor(&g, n, 2, (uint64_t[]){F, H});
        snprintf(n, sizeof n, "v.blk.%d.ffn_down.bias", b);
        gw_tensor(&g, n, 1, (uint64_t[]){H});
    }
    gw_tensor(&g, "v.post_ln.weight", 1, (uint64_t[]){H});
    if (!q25) gw_tensor(&g, "v.post_ln.bias", 1, (uint64_t[]){H});
    gw_tensor(&g, "mm.0.weight", 2, (uint64_t[]){M, M});
    gw_tensor(&g, "mm.0.bias", 1, (uint64_t[]){M});
    gw_tensor(&g, "mm.2.weight", 2, (uint64_t[]){M, O});
    gw_tensor(&g, "mm.2.bias", 1, (uint64_t[]){O});
    static uint8_t out[8 + 4 + 16 + sizeof g.kv + sizeof g.ti + 32 + sizeof g.data];
    size_t at = 0;
    uint32_t ver = 3;
    put(out, &at, "GGUF", 4);
    put(out, &at, &ver, 4);
    put(out, &at, &g.n_t, 8);
    put(out, &at, &g.n_kv, 8);
    put(out, &at, g.kv, g.nkv_b);
    put(out, &at, g.ti, g.nti_b);
    while (at % 32) out[at++] = 0;
    put(out, &at, g.data, g.nd_b);
    return write_file(dir, name, out, at);
}

static int mmproj(const char *dir) {
    return mmproj_one(dir, "q25-mmproj.gguf", true) || mmproj_one(dir, "q2-mmproj.gguf", false);
}

/* If on Equal(int64 input, 1): then x * k (k a branch initializer) with a nested If on a shape,
 * else -x (opset 16). */
static int onnx_if(const char *dir) {
    ob b = {0}, t = {0}, e = {0}, t2 = {0}, e2 = {0};
    b.opset = 16;
    ob_input(&b, "x", 1, (const int64_t[]){-1});
    ob_input_i64(&b, "sel", 0, NULL);
    ob_init(&b, ob_itensor(&b, "one", 0, NULL, (const int64_t[]){1}, 1));
    ob_init(&b, ob_itensor(&b, "zero", 0, NULL, (const int64_t[]){0}, 1));
    ob_node(&b, "Equal", "eq", (const char *[]){"sel", "one", NULL}, (const char *[]){"cond", NULL});
    ob_init(&t, ob_tensor(&t, "k", 1, (const int64_t[]){1}, (const float[]){2.0f}, 1, 1));
    ob_node(&t, "Shape", "sh", (const char *[]){"x", NULL}, (const char *[]){"shp", NULL});
    ob_node(&t, "Gather", "ga", (const char *[]){"shp", "zero", NULL}, (const char *[]){"len", NULL});
    ob_node(&t, "Equal", "eq2", (const char *[]){"len", "one", NULL}, (const char *[]){"c2", NULL});
    ob_node(&t2, "Mul", "m", (const char *[]){"x", "k", NULL}, (const char *[]){"tm", NULL});
    ob_output(&t2, "tm");
    ob_node(&e2, "Identity", "id", (const char *[]){"x", NULL}, (const char *[]){"ti", NULL});
    ob_output(&e2, "ti");
    Onnx__NodeProto *n2 = ob_node(&t, "If", "inner", (const char *[]){"c2", NULL}, (const char *[]){"tx", NULL});
    ob_attr_graph(&t, n2, "then_branch", ob_graph(&t, &t2));
    ob_attr_graph(&t, n2, "else_branch", ob_graph(&t, &e2));
    ob_output(&t, "tx");
    ob_node(&e, "Neg", "ng", (const char *[]){"x", NULL}, (const char *[]){"ex", NULL});
    ob_output(&e, "ex");
    Onnx__NodeProto *n = ob_node(&b, "If", "outer", (const char *[]){"cond", NULL}, (const char *[]){"y", NULL});
    ob_attr_graph(&b, n, "then_branch", ob_graph(&b, &t));
    ob_attr_graph(&b, n, "else_branch", ob_graph(&b, &e));
    ob_output(&b, "y");
    size_t len;
    uint8_t *a = ob_pack(&b, &len);
    ob_free(&b);
    const int rc = write_file(dir, "if-nested.onnx", a, len);
    free(a);
    return rc;
}

/* Pad (reflect) → Unsqueeze → 1-D Conv → Transpose → LSTM (H = 2) with Y, Y_h, Y_c, and
 * ConstantOfShape / Log / Cast to BOOL beside them (opset 16). */
static int onnx_seq(const char *dir) {
    ob b = {0};
    b.opset = 16;
    static const float w[2 * 1 * 3] = {0.5f, -1, 0.25f, 1, 0.5f, -0.5f};
    static const float lw[8 * 2] = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f,
                                    -0.1f, 0.2f, 0.3f, -0.4f, 0.5f, 0.6f, -0.7f, 0.8f};
    ob_input(&b, "x", 2, (const int64_t[]){1, -1});
    ob_init(&b, ob_itensor(&b, "pads", 1, (const int64_t[]){4}, (const int64_t[]){0, 2, 0, 2}, 4));
    ob_init(&b, ob_itensor(&b, "ax", 1, (const int64_t[]){1}, (const int64_t[]){1}, 1));
    ob_init(&b, ob_itensor(&b, "perm_shape", 1, (const int64_t[]){2}, (const int64_t[]){2, 3}, 2));
    ob_init(&b, ob_tensor(&b, "w", 3, (const int64_t[]){2, 1, 3}, w, 6, 1));
    ob_init(&b, ob_tensor(&b, "W", 3, (const int64_t[]){1, 8, 2}, lw, 16, 1));
    ob_init(&b, ob_tensor(&b, "R", 3, (const int64_t[]){1, 8, 2}, lw, 16, 1));
    Onnx__NodeProto *p = ob_node(&b, "Pad", "pad", (const char *[]){"x", "pads", NULL}, (const char *[]){"xp", NULL});
    Onnx__AttributeProto *md = ob_attr(&b, p, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    md->has_s = 1;
    md->s.data = (uint8_t *)ob_str(&b, "reflect");
    md->s.len = 7;
    ob_node(&b, "Unsqueeze", "us", (const char *[]){"xp", "ax", NULL}, (const char *[]){"xu", NULL});
    Onnx__NodeProto *cv = ob_node(&b, "Conv", "c1", (const char *[]){"xu", "w", NULL}, (const char *[]){"xc", NULL});
    ob_attr_ints(&b, cv, "kernel_shape", 1, (const int64_t[]){3});
    ob_attr_ints(&b, cv, "strides", 1, (const int64_t[]){2});
    Onnx__NodeProto *tr = ob_node(&b, "Transpose", "tr", (const char *[]){"xc", NULL}, (const char *[]){"xt", NULL});
    ob_attr_ints(&b, tr, "perm", 3, (const int64_t[]){2, 0, 1});
    Onnx__NodeProto *l = ob_node(&b, "LSTM", "lstm", (const char *[]){"xt", "W", "R", NULL},
                                 (const char *[]){"Y", "Yh", "Yc", NULL});
    ob_attr_int(&b, l, "hidden_size", 2);
    ob_node(&b, "ConstantOfShape", "cs", (const char *[]){"perm_shape", NULL}, (const char *[]){"k", NULL});
    ob_node(&b, "Log", "lg", (const char *[]){"Yc", NULL}, (const char *[]){"lc", NULL});
    Onnx__NodeProto *cb = ob_node(&b, "Cast", "cb", (const char *[]){"Yh", NULL}, (const char *[]){"bh", NULL});
    ob_attr_int(&b, cb, "to", 9);
    ob_output(&b, "Y");
    ob_output(&b, "lc");
    ob_output(&b, "bh");
    ob_output(&b, "k");
    size_t len;
    uint8_t *a = ob_pack(&b, &len);
    ob_free(&b);
    const int rc = write_file(dir, "lstm-pad-conv1d.onnx", a, len);
    free(a);
    return rc;
}

static int onnx(const char *dir) {
    size_t len;
    uint8_t *a = ob_conv_relu(0, &len);
    int rc = write_file(dir, "conv-relu.onnx", a, len);
    free(a);
    a = ob_conv_relu(1, &len);
    rc |= write_file(dir, "conv-relu-rev.onnx", a, len);
    free(a);
    ob b = {0};
    ob_input(&b, "x", 4, (const int64_t[]){1, 2, 4, 4});
    Onnx__TensorProto *shape = ob_tensor(&b, "shape", 1, (const int64_t[]){2}, NULL, 0, 0);
    shape->data_type = ONNX__TENSOR_PROTO__DATA_TYPE__INT64;
    shape->n_int64_data = 2;
    shape->int64_data = ob_alloc(&b, 2 * sizeof(int64_t));
    shape->int64_data[0] = 1;
    shape->int64_data[1] = -1;
    ob_init(&b, shape);
    Onnx__NodeProto *r = ob_node(&b, "Resize", "up", (const char *[]){"x", "", "", NULL},
                                 (const char *[]){"u", NULL});
    Onnx__AttributeProto *mode = ob_attr(&b, r, "mode", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__STRING);
    mode->has_s = 1;
    mode->s.data = (uint8_t *)ob_str(&b, "nearest");
    mode->s.len = 7;
    Onnx__NodeProto *h = ob_node(&b, "HardSigmoid", "hs", (const char *[]){"u", NULL},
                                 (const char *[]){"h", NULL});
    Onnx__AttributeProto *al = ob_attr(&b, h, "alpha", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOAT);
    al->has_f = 1;
    al->f = 0.2f;
    Onnx__AttributeProto *fl = ob_attr(&b, h, "extra", ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS);
    fl->n_floats = 2;
    fl->floats = ob_alloc(&b, 2 * sizeof(float));
    fl->floats[1] = 1.5f;
    Onnx__NodeProto *t = ob_node(&b, "Transpose", "tr", (const char *[]){"h", NULL},
                                 (const char *[]){"t", NULL});
    ob_attr_ints(&b, t, "perm", 4, (const int64_t[]){0, 2, 3, 1});
    ob_node(&b, "Reshape", "rs", (const char *[]){"t", "shape", NULL}, (const char *[]){"y", NULL});
    ob_output(&b, "y");
    a = ob_pack(&b, &len);
    ob_free(&b);
    rc |= write_file(dir, "attrs.onnx", a, len);
    free(a);
    rc |= onnx_if(dir);
    rc |= onnx_seq(dir);
    return rc;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "onnx")) return onnx(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "mmproj")) return mmproj(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "audio")) return audio(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "image")) return image(argv[2]);
    if (argc == 3 && !strcmp(argv[1], "npy")) return npy(argv[2]);
    fprintf(stderr, "usage: seeds audio|image|npy|mmproj|onnx DIR\n");
    return 2;
}
