/* test_analyze_heads.c — the decoder's attention-probability probe and `frugal analyze heads`.
 *
 * - The probe against a plain reference: a random in-memory model, the prompt's attention
 *   probabilities softmax(q k^T / sqrt(head_dim)) recomputed here from reference ops (fr_ref_*),
 *   for every layer, head and captured row; and the logits with the probe on are the logits
 *   without it, bit for bit.
 * - Two heads made identical (layer 1's query rows and bias of head 1 copied from head 0; both
 *   read KV head 0) give similarity 1 for that pair on the qwen25vl-tiny fixture, and not
 *   before the copy.
 * - The output files exist and parse (JSON, PNG signature, self-contained HTML).
 * - Bad inputs: missing data file, malformed line, missing pixel file, a text-only model, each
 *   with its code.
 */
#include "backend/cpu/cpu.h"
#include "backend/cpu/decoder.h"
#include "tools/analyze_heads.h"
#include "t.h"

#include <cjson/cJSON.h>
#include <unistd.h>

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static float frand(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 40) * (1.0 / 8388608.0)) - 1.0f;
}
static void rand_tensor(fr_model *m, fr_tensor *t, int64_t n0, int64_t n1, float scale, float base) {
    float *p = malloc((size_t)(n0 * n1) * 4);
    for (int64_t i = 0; i < n0 * n1; i++) p[i] = base + scale * frand();
    fr_model_own(m, p);
    *t = (fr_tensor){.dtype = FR_DTYPE_F32, .n_dims = n1 > 1 ? 2 : 1, .ne = {n0, n1, 1, 1},
                     .data = p, .nbytes = (size_t)(n0 * n1) * 4};
}

enum { V = 300, E = 64, H = 4, HKV = 2, HD = 16, Q = H * HD, KV = HKV * HD, F = 96, NL = 2 };

static fr_model *random_model(void) {
    fr_model *m = calloc(1, sizeof *m);
    fr_hparams *hp = &m->hp;
    *hp = (fr_hparams){.arch = FR_ARCH_QWEN2, .n_vocab = V, .n_embd = E, .n_layer = NL,
                       .n_head = H, .n_head_kv = HKV, .head_dim = HD, .n_ff = F,
                       .n_ctx_train = 256, .rms_eps = 1e-6f, .rope_theta = 10000.0f,
                       .tied_embeddings = true, .bos_id = -1, .eos_id = -1};
    rand_tensor(m, &m->w.tok_embd, E, V, 1.0f, 0);
    m->w.output = m->w.tok_embd;
    rand_tensor(m, &m->w.output_norm, E, 1, 0.1f, 1.0f);
    m->w.layers = calloc(NL, sizeof(fr_layer));
    for (int l = 0; l < NL; l++) {
        fr_layer *L = &m->w.layers[l];
        rand_tensor(m, &L->attn_norm, E, 1, 0.1f, 1.0f);
        rand_tensor(m, &L->wq, E, Q, 0.5f, 0);
        rand_tensor(m, &L->wk, E, KV, 0.5f, 0);
        rand_tensor(m, &L->wv, E, KV, 0.25f, 0);
        rand_tensor(m, &L->bq, Q, 1, 0.1f, 0);
        rand_tensor(m, &L->bk, KV, 1, 0.1f, 0);
        rand_tensor(m, &L->bv, KV, 1, 0.1f, 0);
        rand_tensor(m, &L->wo, Q, E, 0.25f, 0);
        rand_tensor(m, &L->ffn_norm, E, 1, 0.1f, 1.0f);
        rand_tensor(m, &L->w_gate, E, F, 0.25f, 0);
        rand_tensor(m, &L->w_up, E, F, 0.25f, 0);
        rand_tensor(m, &L->w_down, F, E, 0.2f, 0);
    }
    return m;
}

/* probs (NL, n, H, n): softmax(q k^T / sqrt(HD)) of every row over positions 0..row (0 beyond),
 * from reference ops only (plain RoPE at 0..n-1). */
static void ref_probs(const fr_model *m, const int32_t *ids, int n, double *probs) {
    const fr_hparams *hp = &m->hp;
    float *x = malloc((size_t)n * E * 4), *xn = malloc((size_t)n * E * 4);
    float *q = malloc((size_t)n * Q * 4), *att = malloc((size_t)n * Q * 4);
    float *k = malloc((size_t)n * KV * 4), *v = malloc((size_t)n * KV * 4);
    float *g = malloc((size_t)n * F * 4), *u = malloc((size_t)n * F * 4), *o = malloc((size_t)n * E * 4);
    int32_t *pos = malloc((size_t)n * 4);
    int *blocks = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) pos[i] = blocks[i] = i;
    fr_ref_embed(x, &m->w.tok_embd, ids, n);
    for (int l = 0; l < NL; l++) {
        const fr_layer *L = &m->w.layers[l];
        fr_ref_rmsnorm(xn, x, L->attn_norm.data, n, E, hp->rms_eps);
        fr_ref_matmul(q, xn, &L->wq, n);
        fr_ref_matmul(k, xn, &L->wk, n);
        fr_ref_matmul(v, xn, &L->wv, n);
        for (int t = 0; t < n; t++) {
            for (int i = 0; i < Q; i++) q[t * Q + i] += ((const float *)L->bq.data)[i];
            for (int i = 0; i < KV; i++) {
                k[t * KV + i] += ((const float *)L->bk.data)[i];
                v[t * KV + i] += ((const float *)L->bv.data)[i];
            }
        }
        fr_ref_rope(q, n, H, HD, pos, hp->rope_theta, false, NULL);
        fr_ref_rope(k, n, HKV, HD, pos, hp->rope_theta, false, NULL);
        for (int t = 0; t < n; t++)
            for (int h = 0; h < H; h++) {
                double *p = probs + (((size_t)l * n + t) * H + h) * n, mx = -INFINITY, sum = 0;
                for (int j = 0; j < n; j++) p[j] = 0;
                for (int j = 0; j <= t; j++) {
                    double s = 0;
                    for (int i = 0; i < HD; i++)
                        s += (double)q[t * Q + h * HD + i] * k[j * KV + (h / (H / HKV)) * HD + i];
                    p[j] = s / sqrt((double)HD);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= t; j++) sum += p[j] = exp(p[j] - mx);
                for (int j = 0; j <= t; j++) p[j] /= sum;
            }
        fr_kv_view view = {k, v, 1, 0, 1, KV};
        for (int t = 0; t < n; t++)
            fr_ref_attention(att + (size_t)t * Q, q + (size_t)t * Q, &view, blocks, t, H, HKV, HD);
        fr_ref_matmul(o, att, &L->wo, n);
        for (int i = 0; i < n * E; i++) x[i] += o[i];
        fr_ref_rmsnorm(xn, x, L->ffn_norm.data, n, E, hp->rms_eps);
        fr_ref_matmul(g, xn, &L->w_gate, n);
        fr_ref_matmul(u, xn, &L->w_up, n);
        fr_ref_swiglu(g, g, u, (int64_t)n * F);
        fr_ref_matmul(o, g, &L->w_down, n);
        for (int i = 0; i < n * E; i++) x[i] += o[i];
    }
    free(x); free(xn); free(q); free(att); free(k); free(v); free(g); free(u); free(o);
    free(pos); free(blocks);
}

typedef struct cap {
    int n, calls;
    float *probs;  /* (NL, n, H, n) */
    bool bad_len;
} cap;

static void cap_fn(void *user, int layer, int row, int head, const float *p, int n) {
    cap *c = user;
    c->calls++;
    if (n != row + 1) c->bad_len = true; /* one prefill from position 0: pos == row */
    memcpy(c->probs + (((size_t)layer * c->n + row) * H + head) * c->n, p, (size_t)n * 4);
}

/* Runs ids through a fresh decoder with rows `want`; logits (n_wanted, V). */
static int run(const fr_model *m, const int32_t *ids, int n, const uint8_t *want, cap *c,
               float *logits) {
    fr_err err = {0};
    fr_decoder *d = fr_decoder_new(m, n, n, &err);
    fr_kv_pool *kv = fr_kv_pool_new(&m->hp, 4, 16);
    fr_seq s = {0}, *seqs[64];
    int32_t pos[64];
    if (!d || !kv || fr_seq_reserve(&s, kv, n)) return -1;
    for (int i = 0; i < n; i++) pos[i] = i, seqs[i] = &s;
    if (c) fr_decoder_set_attn_probe(d, cap_fn, c);
    fr_batch b = {.n_tokens = n, .tokens = ids, .pos = pos, .seqs = seqs, .logits = want};
    int rc = fr_decoder_forward(d, kv, &b, logits, &err);
    fr_seq_release(&s, kv);
    fr_kv_pool_free(kv);
    fr_decoder_free(d);
    return rc;
}

TEST(probe_equals_reference_softmax) {
    enum { N = 23 };
    fr_model *m = random_model();
    int32_t ids[N];
    uint8_t want[N];
    int n_want = 0;
    for (int i = 0; i < N; i++) {
        ids[i] = (i * 37 + 11) % V;
        want[i] = i % 4 == 1 || i == N - 1;
        n_want += want[i];
    }
    cap c = {.n = N, .probs = calloc((size_t)NL * N * H * N, 4)};
    for (size_t i = 0; i < (size_t)NL * N * H * N; i++) c.probs[i] = -1; /* poison */
    float *la = malloc((size_t)n_want * V * 4), *lb = malloc((size_t)n_want * V * 4);
    CHECK_EQ_INT(run(m, ids, N, want, &c, la), 0);
    CHECK_EQ_INT(run(m, ids, N, want, NULL, lb), 0);
    CHECK(!memcmp(la, lb, (size_t)n_want * V * 4)); /* the probe changes nothing */
    CHECK_EQ_INT(c.calls, NL * n_want * H);
    CHECK(!c.bad_len);
    double *ref = malloc((size_t)NL * N * H * N * sizeof(double)), worst = 0;
    ref_probs(m, ids, N, ref);
    int unwritten = 0;
    for (int l = 0; l < NL; l++)
        for (int t = 0; t < N; t++) {
            if (!want[t]) continue;
            for (int h = 0; h < H; h++)
                for (int j = 0; j <= t; j++) {
                    size_t i = (((size_t)l * N + t) * H + h) * N + j;
                    if (c.probs[i] < 0) unwritten++;
                    double e = fabs(c.probs[i] - ref[i]);
                    worst = e > worst ? e : worst;
                }
        }
    CHECK_EQ_INT(unwritten, 0);
    CHECK(worst < 2e-5);
    if (worst >= 2e-5) fprintf(stderr, "  worst |probe - ref| = %g\n", worst);
    /* Not a trivial map: the last row's layer-0 probabilities are not uniform. */
    double mx = 0;
    for (int j = 0; j < N; j++) mx = FR_MAX(mx, ref[((size_t)(N - 1) * H) * N + j]);
    CHECK(mx > 1.5 / N);
    free(ref); free(la); free(lb); free(c.probs);
    fr_model_free(m);
}

/* ------------------------------------------------------------------ on the VL fixture */

static char model_dir[512], data_path[512], tmp_dir[64];

static void cleanup(void) {
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp_dir);
    if (system(cmd)) fprintf(stderr, "  could not remove %s\n", tmp_dir);
}

static void setup(void) {
    if (tmp_dir[0]) return;
    atexit(cleanup);
    snprintf(model_dir, sizeof model_dir, "%s/qwen25vl-tiny", t_fixtures());
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/test_heads_%d", (int)getpid());
    fr_err err = {0};
    FR_ASSERT(!fr_mkdir_p(tmp_dir, 0755, &err));
    snprintf(data_path, sizeof data_path, "%s/data.jsonl", tmp_dir);
    char ref[1024], cwd[256];
    FR_ASSERT(getcwd(cwd, sizeof cwd));
    const char *fx = t_fixtures(); /* absolute: the data file lives elsewhere */
    snprintf(ref, sizeof ref, "%s%s%s/ref/qwen25vl-tiny", fx[0] == '/' ? "" : cwd,
             fx[0] == '/' ? "" : "/", fx);
    FILE *f = fopen(data_path, "w");
    FR_ASSERT(f);
    fprintf(f, "{\"pixel_values\": \"%s/one_image-pixel_values.npy\", \"grid_thw\": [[1, 6, 8]], "
            "\"question\": \"Describe this image.\", \"id\": \"one\"}\n\n"
            "{\"pixel_values\": \"%s/two_images-pixel_values.npy\", \"grid_thw\": [[1, 6, 4], "
            "[1, 8, 4]], \"question\": \"Compare the two pictures.\"}\n"
            "{\"pixel_values\": \"%s/regions_left-pixel_values.npy\", \"grid_thw\": [[1, 4, 8]], "
            "\"question\": \"What is in the left half of the picture?\"}\n", ref, ref, ref);
    fclose(f);
}

static fr_model *load_fixture(void) {
    fr_err err = {0};
    fr_model *m = fr_model_load(model_dir, &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    return m;
}

/* Layer l's head `to` gets head `from`'s query rows and bias (copies; the map stays read-only). */
static void copy_head(fr_model *m, int l, int from, int to) {
    fr_layer *L = &m->w.layers[l];
    const int hd = m->hp.head_dim, E_ = m->hp.n_embd;
    FR_ASSERT(L->wq.dtype == FR_DTYPE_F32);
    float *w = malloc(L->wq.nbytes);
    memcpy(w, L->wq.data, L->wq.nbytes);
    memcpy(w + (size_t)to * hd * E_, w + (size_t)from * hd * E_, (size_t)hd * E_ * 4);
    fr_model_own(m, w);
    L->wq.data = w;
    if (fr_tensor_present(&L->bq)) {
        float *b = malloc(L->bq.nbytes);
        memcpy(b, L->bq.data, L->bq.nbytes);
        memcpy(b + (size_t)to * hd, b + (size_t)from * hd, (size_t)hd * 4);
        fr_model_own(m, b);
        L->bq.data = b;
    }
}

TEST(identical_heads_give_similarity_one) {
    setup();
    fr_model *m = load_fixture();
    CHECK(m != NULL);
    if (!m) return;
    fr_err err = {0};
    fr_vl_sample *s = NULL;
    int n = 0;
    CHECK_EQ_INT(fr_vl_samples_load(data_path, 0, &s, &n, &err), 0);
    CHECK_EQ_INT(n, 3);
    CHECK_STR(n > 0 ? s[0].id : NULL, "one");
    CHECK_STR(n > 1 ? s[1].id : NULL, "line 3");
    CHECK(m->hp.n_head == 4 && m->hp.n_head_kv == 2 && m->hp.n_layer == 2);
    fr_heads_opts o = {.threshold = 0.9, .rows = FR_HEADS_ROWS_TEXT};
    fr_heads_result before = {0}, after = {0};
    CHECK_EQ_INT(fr_heads_analyze(m, s, n, &o, &before, &err), 0);
    if (err.msg[0]) fprintf(stderr, "  %s\n", err.msg);
    copy_head(m, 1, 0, 1);
    CHECK_EQ_INT(fr_heads_analyze(m, s, n, &o, &after, &err), 0);
    if (before.sim && after.sim) {
        const double *b1 = before.sim + 16, *a1 = after.sim + 16, *a0 = after.sim;
        CHECK_EQ_INT(after.n_samples, 3);
        CHECK(b1[0 * 4 + 1] < 0.999);        /* not redundant before the copy */
        CHECK_NEAR(a1[0 * 4 + 1], 1.0, 1e-9); /* identical after */
        CHECK_NEAR(a1[1 * 4 + 0], 1.0, 1e-9);
        CHECK(a1[2 * 4 + 3] < 0.999);        /* the other pair untouched */
        for (int i = 0; i < 16; i++) CHECK(a0[i] == before.sim[i]); /* layer 0 unchanged */
        int pairs, heads;
        fr_heads_layer_counts(&after, 1, 0.9999, &pairs, &heads);
        CHECK_EQ_INT(pairs, 1);
        CHECK_EQ_INT(heads, 2);
        /* the files */
        char out[128], path[256];
        snprintf(out, sizeof out, "%s/out", tmp_dir);
        CHECK_EQ_INT(fr_heads_write(&after, &o, model_dir, out, &err), 0);
        snprintf(path, sizeof path, "%s/heads.json", out);
        char *js = fr_read_file(path, 1 << 20, NULL, &err);
        cJSON *j = js ? cJSON_Parse(js) : NULL;
        CHECK(j != NULL);
        const cJSON *layers = cJSON_GetObjectItem(j, "layers");
        CHECK_EQ_INT(cJSON_GetArraySize(layers), 2);
        const cJSON *l1 = cJSON_GetArrayItem(layers, 1);
        const cJSON *row0 = cJSON_GetArrayItem(cJSON_GetObjectItem(l1, "similarity"), 0);
        CHECK(row0 && fabs(cJSON_GetArrayItem(row0, 1)->valuedouble - 1.0) < 1e-9);
        CHECK_EQ_INT(cJSON_GetObjectItem(j, "samples")->valueint, 3);
        for (int l = 0; l < 2; l++) {
            snprintf(path, sizeof path, "%s/layer_%02d.png", out, l);
            size_t len = 0;
            char *png = fr_read_file(path, 1 << 20, &len, &err);
            CHECK(png && len > 8 && !memcmp(png, "\x89PNG\r\n\x1a\n", 8));
            free(png);
        }
        snprintf(path, sizeof path, "%s/index.html", out);
        char *html = fr_read_file(path, 1 << 20, NULL, &err);
        CHECK(html && strstr(html, "data:image/png;base64,iVBORw0KGgo") &&
              strstr(html, "</html>") && !strstr(html, "src=\"layer_"));
        free(html);
        cJSON_Delete(j);
        free(js);
    }
    fr_heads_result_free(&before);
    fr_heads_result_free(&after);
    for (int i = 0; i < n; i++) fr_vl_sample_free(&s[i]);
    free(s);
    fr_model_free(m);
}

static fr_err_code load_code(const char *text) {
    char path[256];
    snprintf(path, sizeof path, "%s/bad.jsonl", tmp_dir);
    FILE *f = fopen(path, "w");
    FR_ASSERT(f);
    fputs(text, f);
    fclose(f);
    fr_err err = {0};
    fr_vl_sample *s = NULL;
    int n = 0;
    int rc = fr_vl_samples_load(path, 0, &s, &n, &err);
    if (rc == 0) {
        for (int i = 0; i < n; i++) fr_vl_sample_free(&s[i]);
        free(s);
        return (fr_err_code)-1;
    }
    CHECK(s == NULL && n == 0 && err.msg[0]);
    return err.code;
}

TEST(bad_inputs_have_codes) {
    setup();
    fr_err err = {0};
    fr_vl_sample *s = NULL;
    int n = 0;
    CHECK_EQ_INT(fr_vl_samples_load("/nonexistent/data.jsonl", 0, &s, &n, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    const char *good = "{\"pixel_values\": \"x.npy\", \"grid_thw\": [[1,2,2]], \"question\": \"q\"}\n";
    CHECK_EQ_INT((int)load_code(good), -1);
    char two[512];
    snprintf(two, sizeof two, "%s{\"image\": \"a.png\", \"question\": \"q\"\n", good);
    CHECK_EQ_INT(load_code(two), FR_ERR_BAD_REQUEST); /* truncated line 2 */
    CHECK_EQ_INT(load_code("[1, 2]\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("\n\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"question\": \"q\"}\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"image\": 3, \"question\": \"q\"}\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"image\": \"a.png\"}\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"image\": \"a.png\", \"question\": \"q\", \"answers\": [1]}\n"),
                 FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"pixel_values\": \"x.npy\", \"grid_thw\": [[1,2]], \"question\": "
                           "\"q\"}\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"pixel_values\": \"x.npy\", \"grid_thw\": [[1,2,0.5]], "
                           "\"question\": \"q\"}\n"), FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(load_code("{\"image\": [], \"question\": \"q\"}\n"), FR_ERR_BAD_REQUEST);
    /* the message names the file and line */
    char path[256];
    snprintf(path, sizeof path, "%s/bad.jsonl", tmp_dir);
    FILE *f = fopen(path, "w");
    fputs(two, f);
    fclose(f);
    CHECK_EQ_INT(fr_vl_samples_load(path, 0, &s, &n, &err), -1);
    CHECK(strstr(err.msg, "bad.jsonl:2") != NULL);

    /* a missing pixel file; a text-only model */
    fr_model *m = load_fixture();
    CHECK(m != NULL);
    if (!m) return;
    fr_vl_sample one;
    const char *line = "{\"pixel_values\": \"/nonexistent/p.npy\", \"grid_thw\": [[1,4,4]], "
                       "\"question\": \"q\"}";
    CHECK_EQ_INT(fr_vl_sample_parse(line, strlen(line), NULL, 1, &one, &err), 0);
    fr_heads_opts o = {.threshold = 0.9};
    fr_heads_result r = {0};
    CHECK_EQ_INT(fr_heads_analyze(m, &one, 1, &o, &r, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    CHECK(strstr(err.msg, "line 1") != NULL);
    fr_vl_sample_free(&one);
    struct fr_vision *vis = m->vision;
    m->vision = NULL;
    CHECK_EQ_INT(fr_vl_sample_parse(good, strlen(good) - 1, NULL, 1, &one, &err), 0);
    fr_vl_prompt p;
    CHECK_EQ_INT(fr_vl_prompt_build(m, NULL, &one, &p, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
    m->vision = vis;
    fr_vl_sample_free(&one);
    fr_model_free(m);
}

int main(void) { return t_main(); }
