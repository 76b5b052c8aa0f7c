/* test_kquant.c — GGUF K-quants (Q4_K, Q5_K, Q6_K) kept in their blocks: `frugal mkmodel` writes
 * a small random model of each type from the layouts; it loads with its matrices still K-quant
 * and the weights' memory equal to the file's tensor bytes (not F32's); the CPU decoder's logits
 * equal those of the same model with every matrix dequantised to F32 first (dequantise, then
 * multiply: the reference); the writer's blocks decode close to what was quantised; the CPU
 * matmul on K-quant rows of odd counts equals the dequantised product. */
#include "t.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"
#include "backend/cpu/decoder.h"
#include "backend/kv.h"
#include "model/gguf.h"
#include "tools/mkmodel.h"

static char g_tmp[64];

static const char *tmpdir(void) {
    if (!g_tmp[0]) {
        snprintf(g_tmp, sizeof g_tmp, "/tmp/frugal-kq-XXXXXX");
        if (!mkdtemp(g_tmp)) g_tmp[0] = 0;
    }
    return g_tmp;
}

/* A random llama model of hidden 256 (rows the K-quants cut) in type ty at path. 0 or -1. */
static int make_model(const char *ty, char *path, size_t cap) {
    snprintf(path, cap, "%s/m-%s.gguf", tmpdir(), ty);
    char *argv[] = {"mkmodel", "--out", path, "--arch", "llama", "--hidden", "256", "--layers",
                    "2", "--heads", "4", "--kv-heads", "2", "--ffn", "512", "--vocab", "320",
                    "--format", "gguf", "--gguf-type", (char *)ty, "--seed", "7", NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    return fr_cmd_mkmodel(argc, argv) == 0 ? 0 : -1;
}

static fr_dtype want_dtype(const char *ty) {
    return !strcmp(ty, "q4_k") ? FR_DTYPE_Q4_K : !strcmp(ty, "q5_k") ? FR_DTYPE_Q5_K : FR_DTYPE_Q6_K;
}

/* Every 2-D weight of m replaced by an F32 copy (owned by m). */
static void dequantise_all(fr_model *m) {
    fr_tensor *all[16 * 64 + 4];
    int n = 0;
    all[n++] = &m->w.tok_embd;
    if (m->w.output.data && m->w.output.data != m->w.tok_embd.data) all[n++] = &m->w.output;
    for (int l = 0; l < m->hp.n_layer; l++) {
        fr_layer *L = &m->w.layers[l];
        fr_tensor *ts[] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++) all[n++] = ts[i];
    }
    for (int i = 0; i < n; i++) {
        fr_tensor *t = all[i];
        if (t->dtype == FR_DTYPE_F32) continue;
        const int64_t ne = fr_tensor_nelem(t);
        float *f = fr_xmalloc((size_t)ne * sizeof *f);
        CHECK_EQ_INT(fr_dtype_to_f32(t->dtype, t->data, f, ne), 0);
        fr_model_own(m, f);
        t->data = f;
        t->dtype = FR_DTYPE_F32;
        t->nbytes = (size_t)ne * sizeof *f;
    }
}

/* Last logits of a fixed 9-token prompt. 0 or -1. */
static int logits(fr_model *m, float *out) {
    fr_err err = {0};
    fr_decoder *d = fr_decoder_new(m, 64, 64, &err);
    fr_kv_pool *kv = d ? fr_kv_pool_new(&m->hp, 16, 16) : NULL;
    if (!d || !kv) {
        fprintf(stderr, "  decoder: %s\n", err.msg);
        fr_decoder_free(d);
        return -1;
    }
    const int32_t ids[9] = {1, 17, 250, 3, 99, 318, 42, 5, 200};
    int32_t pos[9];
    fr_seq s = {0}, *sq[9];
    uint8_t want[9] = {0};
    for (int i = 0; i < 9; i++) pos[i] = i, sq[i] = &s;
    want[8] = 1;
    int rc = fr_seq_reserve(&s, kv, 9);
    fr_batch b = {.n_tokens = 9, .tokens = ids, .pos = pos, .seqs = sq, .logits = want};
    if (!rc && fr_decoder_forward(d, kv, &b, out, &err)) {
        fprintf(stderr, "  forward: %s\n", err.msg);
        rc = -1;
    }
    fr_seq_release(&s, kv);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
    return rc;
}

/* Sum of the file's tensor bytes (from its own header). */
static size_t file_tensor_bytes(const char *path) {
    size_t len = 0, n = 0;
    fr_err err = {0};
    char *data = fr_read_file(path, 256u << 20, &len, &err);
    fr_gguf g;
    memset(&g, 0, sizeof g);
    if (data && !fr_gguf_parse(&g, path, (const uint8_t *)data, len, &err)) {
        for (int64_t i = 0; i < g.n_tensors; i++) n += g.tensors[i].nbytes;
        fr_gguf_free(&g);
    }
    free(data);
    return n;
}

/* The bytes the model's tensors hold, all of them. */
static size_t model_tensor_bytes(const fr_model *m, size_t *f32) {
    size_t n = m->w.tok_embd.nbytes + m->w.output_norm.nbytes;
    *f32 = (size_t)(fr_tensor_nelem(&m->w.tok_embd) + fr_tensor_nelem(&m->w.output_norm)) * 4;
    if (m->w.output.data && m->w.output.data != m->w.tok_embd.data) {
        n += m->w.output.nbytes;
        *f32 += (size_t)fr_tensor_nelem(&m->w.output) * 4;
    }
    for (int l = 0; l < m->hp.n_layer; l++) {
        const fr_layer *L = &m->w.layers[l];
        const fr_tensor *ts[] = {&L->attn_norm, &L->wq, &L->wk, &L->wv, &L->wo, &L->ffn_norm,
                                 &L->w_gate, &L->w_up, &L->w_down, &L->bq, &L->bk, &L->bv};
        for (size_t i = 0; i < FR_ARRAY_LEN(ts); i++)
            if (ts[i]->data) n += ts[i]->nbytes, *f32 += (size_t)fr_tensor_nelem(ts[i]) * 4;
    }
    return n;
}

static void check_type(const char *ty) {
    char path[128];
    CHECK_EQ_INT(make_model(ty, path, sizeof path), 0);
    fr_err err = {0};
    fr_model *m = fr_model_load(path, &err), *r = fr_model_load(path, &err);
    CHECK(m != NULL && r != NULL);
    if (!m || !r) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        fr_model_free(m);
        fr_model_free(r);
        return;
    }
    /* kept in blocks: the matrices keep the file's type, and the weights hold the file's bytes */
    CHECK_EQ_INT(m->w.layers[0].wq.dtype, want_dtype(ty));
    CHECK_EQ_INT(m->w.layers[1].w_down.dtype, want_dtype(ty));
    size_t f32 = 0;
    const size_t fb = file_tensor_bytes(path), mb = model_tensor_bytes(m, &f32);
    printf("  %s: the model's tensors hold %zu bytes, the file's tensors %zu (as F32: %zu)\n", ty,
           mb, fb, f32);
    CHECK(fb > 0 && mb == fb);
    dequantise_all(r);
    CHECK(r->w.layers[0].wq.dtype == FR_DTYPE_F32);
    const int V = m->hp.n_vocab;
    float *a = fr_xmalloc(sizeof(float) * (size_t)V), *b = fr_xmalloc(sizeof(float) * (size_t)V);
    CHECK_EQ_INT(logits(m, a), 0);
    CHECK_EQ_INT(logits(r, b), 0);
    double num = 0, den = 0;
    for (int i = 0; i < V; i++) num += ((double)a[i] - b[i]) * (a[i] - b[i]), den += (double)b[i] * b[i];
    printf("  %s: logits vs dequantise-then-multiply: rel L2 %.2e\n", ty, sqrt(num / den));
    CHECK(den > 0 && sqrt(num / den) < 1e-6);
    free(a);
    free(b);
    fr_model_free(m);
    fr_model_free(r);
    unlink(path);
}

TEST(q4_k_model_kept_in_blocks) { check_type("q4_k"); }
TEST(q5_k_model_kept_in_blocks) { check_type("q5_k"); }
TEST(q6_k_model_kept_in_blocks) { check_type("q6_k"); }

/* The writer's blocks against the reader: a model of each type, its first matrix decoded by
 * fr_ggml_to_f32 is close to a fresh F32 model of the same seed (the same random weights). */
TEST(writer_blocks_decode_close_to_the_weights) {
    char pf[128];
    CHECK_EQ_INT(make_model("f32", pf, sizeof pf), 0);
    fr_err err = {0};
    fr_model *f = fr_model_load(pf, &err);
    CHECK(f != NULL);
    static const struct { const char *ty; double tol; } ts[] = {
        {"q4_k", 0.12}, {"q5_k", 0.06}, {"q6_k", 0.03}};
    for (size_t k = 0; f && k < FR_ARRAY_LEN(ts); k++) {
        char p[128];
        CHECK_EQ_INT(make_model(ts[k].ty, p, sizeof p), 0);
        fr_model *q = fr_model_load(p, &err);
        CHECK(q != NULL);
        if (!q) continue;
        const fr_tensor *a = &f->w.layers[0].w_gate, *b = &q->w.layers[0].w_gate;
        const int64_t n = fr_tensor_nelem(a);
        float *y = fr_xmalloc((size_t)n * sizeof *y);
        CHECK_EQ_INT(fr_dtype_to_f32(b->dtype, b->data, y, n), 0);
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            const double x = ((const float *)a->data)[i];
            num += (y[i] - x) * (y[i] - x), den += x * x;
        }
        printf("  %s: blocks decode at rel L2 %.3f of the weights (tolerance %.2f)\n", ts[k].ty,
               sqrt(num / den), ts[k].tol);
        CHECK(sqrt(num / den) < ts[k].tol);
        free(y);
        fr_model_free(q);
        unlink(p);
    }
    fr_model_free(f);
    unlink(pf);
}

/* The CPU matmul on K-quant rows (N = 7 rows, T = 1 and 5 tokens) equals the F32 product of the
 * same rows dequantised (the same fixed-order F32 tiles, so to the last bit). */
TEST(cpu_matmul_on_kquant_rows_equals_the_dequantised_product) {
    const int K = 512, N = 7;
    static const fr_dtype types[] = {FR_DTYPE_Q4_K, FR_DTYPE_Q5_K, FR_DTYPE_Q6_K};
    for (size_t k = 0; k < FR_ARRAY_LEN(types); k++) {
        const size_t rb = fr_dtype_row_size(types[k], K);
        uint8_t *w = fr_xmalloc(rb * N);
        uint32_t s = 99 + (uint32_t)k;
        for (size_t i = 0; i < rb * N; i++) w[i] = (uint8_t)((s = s * 1103515245u + 12345u) >> 24);
        /* the f16 scales kept finite and small: every block's d / dmin fields */
        const size_t blk = fr_dtype_row_size(types[k], 256);
        for (size_t b = 0; b < rb * N / blk; b++) {
            uint8_t *p = w + b * blk;
            uint16_t h = fr_f32_to_f16(0.01f + 0.001f * (float)(b % 7));
            if (types[k] == FR_DTYPE_Q6_K) {
                memcpy(p + 208, &h, 2);
            } else {
                memcpy(p, &h, 2);
                memcpy(p + 2, &h, 2);
            }
        }
        fr_tensor wt = {.name = "w", .dtype = types[k], .n_dims = 2, .ne = {K, N}, .data = w,
                        .nbytes = rb * N};
        float *wf = fr_xmalloc(sizeof(float) * (size_t)K * N);
        for (int r = 0; r < N; r++) CHECK_EQ_INT(fr_dtype_to_f32(types[k], w + rb * r, wf + (size_t)r * K, K), 0);
        fr_tensor ft = {.name = "wf", .dtype = FR_DTYPE_F32, .n_dims = 2, .ne = {K, N}, .data = wf,
                        .nbytes = sizeof(float) * (size_t)K * N};
        for (int T = 1; T <= 5; T += 4) {
            float x[5 * 512], y1[5 * 7], y2[5 * 7];
            for (int i = 0; i < T * K; i++) x[i] = (float)((i * 37 % 101) - 50) / 50.0f;
            fr_cpu_scratch *sc = fr_cpu_scratch_new(T, K, 1);
            fr_cpu_matmul(NULL, sc, y1, x, &wt, T);
            fr_cpu_matmul(NULL, sc, y2, x, &ft, 1 * T);
            CHECK(!memcmp(y1, y2, sizeof(float) * (size_t)T * N));
            fr_cpu_scratch_free(sc);
        }
        free(wf);
        free(w);
    }
}

int main(void) {
    int rc = t_main();
    if (g_tmp[0]) rmdir(g_tmp);
    return rc;
}
