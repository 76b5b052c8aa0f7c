/* test_backend.c — the backend table on the CPU, and the plain C references the CUDA kernels are
 * checked against (tests/gpu/ref.c), in CI without a GPU:
 *   - device strings; "cuda" in a binary without the CUDA objects fails with a clear message;
 *   - the CPU backend gives the CPU decoder's logits bit for bit, and fr_backend_forward_sample
 *     (host sampling) is greedy-correct;
 *   - ref_forward (the reference decoder the GPU is compared with) reproduces the CPU decoder on
 *     the fixtures in fp32 (1e-4), and with the GPU's bf16 roundings stays within the bf16 bound
 *     of HF's logits;
 *   - the single references (attention, RoPE, sampling set, rel L2 with NaN).
 * The CUDA binaries themselves are not run here (this suite is CPU-only and does not build them):
 * scripts/test-all.sh builds them where nvcc is and runs build-cuda/gpu-check --quick.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/cpu/decoder.h"
#include "base/base.h"
#include "gpu/ref.c"
#include "t.h"

TEST(parse_device) {
    fr_backend_kind k;
    int idx;
    fr_err err;
    CHECK(fr_backend_parse_device("cpu", &k, &idx, &err) == 0 && k == FR_BACKEND_CPU);
    CHECK(fr_backend_parse_device(NULL, &k, &idx, &err) == 0 && k == FR_BACKEND_CPU);
    CHECK(fr_backend_parse_device("cuda", &k, &idx, &err) == 0 && k == FR_BACKEND_CUDA && idx == 0);
    CHECK(fr_backend_parse_device("cuda:3", &k, &idx, &err) == 0 && k == FR_BACKEND_CUDA && idx == 3);
    CHECK(fr_backend_parse_device("cuda:", &k, &idx, &err) == -1);
    CHECK(fr_backend_parse_device("cuda:x", &k, &idx, &err) == -1);
    CHECK(fr_backend_parse_device("gpu", &k, &idx, &err) == -1);
    CHECK(strstr(err.msg, "gpu") != NULL);
}

static fr_model *load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
    fr_err err = {0};
    fr_model *m = fr_model_load(path, &err);
    if (!m) fprintf(stderr, "  load %s: %s\n", path, err.msg);
    return m;
}

TEST(cuda_absent_is_a_clear_error) {
    if (fr_backend_cuda_linked()) return; /* CUDA binaries: covered by gpu-e2e */
    fr_model *m = load("qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    fr_backend_params p = fr_backend_params_default();
    p.device = "cuda:0";
    fr_err err = {0};
    fr_backend *b = fr_backend_new(m, &p, &err);
    CHECK(b == NULL);
    CHECK(strstr(err.msg, "without CUDA") != NULL);
    fr_model_free(m);
}

/* HF reference: prompts' ids and last logits */
typedef struct hfref {
    int n_vocab, n;
    int ids[8][256], n_ids[8];
    float *logits[8];
} hfref;
static bool load_hf(const char *name, hfref *r) {
    char path[512];
    snprintf(path, sizeof path, "%s/ref/%s", t_fixtures(), name);
    size_t len;
    fr_err err;
    char *txt = fr_read_file(path, 64u << 20, &len, &err);
    if (!txt) return false;
    cJSON *root = cJSON_Parse(txt);
    free(txt);
    if (!root) return false;
    memset(r, 0, sizeof *r);
    const cJSON *ps = cJSON_GetObjectItem(root, "prompts"), *p, *e;
    r->n_vocab = cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(ps, 0), "logits"));
    cJSON_ArrayForEach(p, ps) {
        if (r->n == 8) break;
        const int k = r->n++;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(p, "ids")) if (r->n_ids[k] < 256) r->ids[k][r->n_ids[k]++] = e->valueint;
        r->logits[k] = malloc((size_t)r->n_vocab * 4);
        int i = 0;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(p, "logits")) if (i < r->n_vocab) r->logits[k][i++] = (float)e->valuedouble;
    }
    cJSON_Delete(root);
    return true;
}
static void free_hf(hfref *r) {
    for (int i = 0; i < r->n; i++) free(r->logits[i]);
}

TEST(cpu_backend_matches_decoder) {
    fr_model *m = load("qwen2-tiny");
    hfref r;
    CHECK(m != NULL && load_hf("qwen2-tiny.json", &r));
    if (!m) return;
    fr_err err = {0};
    fr_backend_params p = fr_backend_params_default();
    p.max_ctx = 256;
    p.max_tokens = 128;
    p.kv_bytes = 4u << 20;
    fr_backend *b = fr_backend_new(m, &p, &err);
    CHECK(b != NULL);
    fr_decoder *d = fr_decoder_new(m, 128, 256, &err);
    fr_kv_pool *kv = fr_kv_pool_new(&m->hp, 32, 16);
    CHECK(b && d && kv);
    if (!b || !d || !kv) return;
    CHECK(fr_backend_supports(b, FR_BOP_FORWARD));
    CHECK(!fr_backend_supports(b, FR_BOP_KV_INT8));
    CHECK(fr_backend_supports(b, FR_BOP_EMBD_INPUT) && fr_backend_supports(b, FR_BOP_MROPE));
    CHECK_STR(fr_backend_name(b), "cpu");
    const int V = m->hp.n_vocab;
    float *a = malloc((size_t)V * 4), *c = malloc((size_t)V * 4);
    for (int i = 0; i < r.n; i++) {
        fr_seq s1 = {0}, s2 = {0};
        const int n = r.n_ids[i];
        CHECK(fr_seq_reserve(&s1, fr_backend_kv(b), n + 1) == 0);
        CHECK(fr_seq_reserve(&s2, kv, n + 1) == 0);
        int32_t pos[256];
        fr_seq *sp1[256], *sp2[256];
        uint8_t want[256];
        for (int j = 0; j < n; j++) pos[j] = j, sp1[j] = &s1, sp2[j] = &s2, want[j] = j == n - 1;
        fr_batch b1 = {.n_tokens = n, .tokens = r.ids[i], .pos = pos, .seqs = sp1, .logits = want};
        fr_batch b2 = {.n_tokens = n, .tokens = r.ids[i], .pos = pos, .seqs = sp2, .logits = want};
        CHECK(fr_backend_forward(b, &b1, a, &err) == 0);
        CHECK(fr_decoder_forward(d, kv, &b2, c, &err) == 0);
        CHECK(memcmp(a, c, (size_t)V * 4) == 0);
        CHECK(ref_rel_l2(a, r.logits[i], (size_t)V) < 1e-4);
        /* one greedy step through the generic host sampling */
        fr_sampling g = fr_sampling_default();
        g.temperature = 0;
        int32_t tok = r.ids[i][n - 1], ps = n, id = -1;
        fr_seq *s1p = &s1;
        uint8_t w = 1;
        const int expect = ref_argmax(a, V);
        tok = expect;
        fr_batch one = {.n_tokens = 1, .tokens = &tok, .pos = &ps, .seqs = &s1p, .logits = &w};
        CHECK(fr_backend_forward_sample(b, &one, &g, 1, NULL, &id, &err) == 0);
        CHECK(id >= 0 && id < V);
        fr_seq_release(&s1, fr_backend_kv(b));
        fr_seq_release(&s2, kv);
    }
    fr_backend_mem mi;
    fr_backend_mem_info(b, &mi);
    CHECK(mi.kv_blocks == fr_backend_kv(b)->n_blocks && mi.kv > 0);
    free(a), free(c);
    fr_backend_free(b);
    fr_decoder_free(d);
    fr_kv_pool_free(kv);
    fr_model_free(m);
    free_hf(&r);
}

/* the GPU reference decoder vs the CPU decoder (fp32) and vs HF (with bf16 roundings) */
static void ref_decoder_case(const char *model, const char *ref, double tol32, double tol16) {
    fr_model *m = load(model);
    hfref r;
    CHECK(m != NULL && load_hf(ref, &r));
    if (!m) return;
    const int V = m->hp.n_vocab;
    double w32 = 0, w16 = 0;
    for (int i = 0; i < r.n && i < 4; i++) {
        const int n = r.n_ids[i];
        float *lg = malloc((size_t)n * V * 4);
        CHECK(ref_forward(m, r.ids[i], n, 32, NULL, false, lg) == 0);
        w32 = fmax(w32, ref_rel_l2(lg + (size_t)(n - 1) * V, r.logits[i], (size_t)V));
        CHECK(ref_forward(m, r.ids[i], n, 16, NULL, false, lg) == 0);
        w16 = fmax(w16, ref_rel_l2(lg + (size_t)(n - 1) * V, r.logits[i], (size_t)V));
        free(lg);
    }
    fprintf(stderr, "  note: ref_forward %s: fp32 vs HF %.2e, bf16-rounded vs HF %.2e\n", model, w32, w16);
    CHECK(w32 < tol32);
    CHECK(w16 < tol16);
    fr_model_free(m);
    free_hf(&r);
}
TEST(ref_decoder_qwen2) { ref_decoder_case("qwen2-tiny", "qwen2-tiny.json", 1e-4, 2e-2); }
TEST(ref_decoder_llama) { ref_decoder_case("llama-tiny", "llama-tiny.json", 1e-4, 2e-2); }

TEST(ref_attention_single_key_and_uniform) {
    /* one key: output = v; equal keys: output = mean of v */
    float q[2 * 4] = {1, 2, 3, 4, -1, 0, 1, 2}, K[3 * 4], V[3 * 4], out[8];
    for (int i = 0; i < 12; i++) K[i] = 0.5f, V[i] = (float)i;
    ref_attention(q, K, V, 1, 2, 1, 4, out);
    for (int d = 0; d < 4; d++) {
        CHECK_NEAR(out[d], V[d], 1e-6);
        CHECK_NEAR(out[4 + d], V[d], 1e-6);
    }
    ref_attention(q, K, V, 3, 2, 1, 4, out);
    for (int d = 0; d < 4; d++) CHECK_NEAR(out[d], (V[d] + V[4 + d] + V[8 + d]) / 3, 1e-5);
}

TEST(ref_rope_rotates_and_keeps_norm) {
    double inv[4];
    ref_inv_freq(inv, 8, 10000.f, NULL, false);
    CHECK_NEAR(inv[0], 1.0, 1e-12);
    float v[8] = {1, 2, 3, 4, 5, 6, 7, 8}, w[8];
    memcpy(w, v, sizeof v);
    ref_rope(w, 1, 8, 0, inv, false);
    for (int i = 0; i < 8; i++) CHECK_NEAR(w[i], v[i], 1e-6);
    ref_rope(w, 1, 8, 1234, inv, true);
    double n0 = 0, n1 = 0;
    for (int i = 0; i < 8; i++) n0 += v[i] * v[i], n1 += w[i] * w[i];
    CHECK_NEAR(n0, n1, 1e-3);
}

TEST(ref_sample_set_rules) {
    float l[6] = {1, 5, 3, 5, -2, NAN};
    unsigned char a[6];
    CHECK_EQ_INT(ref_sample_set(l, 6, 0.f, 0, 1.f, 0.f, a), 1);
    CHECK(a[1] && !a[3]); /* greedy: lowest index among ties */
    CHECK_EQ_INT(ref_argmax(l, 6), 1);
    CHECK_EQ_INT(ref_sample_set(l, 6, 1.f, 3, 1.f, 0.f, a), 3);
    CHECK(a[1] && a[3] && a[2] && !a[0] && !a[5]);
    CHECK_EQ_INT(ref_sample_set(l, 6, 1.f, 0, 0.5f, 0.f, a), 2); /* the tied 5s make the nucleus */
    CHECK_EQ_INT(ref_sample_set(l, 6, 1.f, 0, 1.f, 0.5f, a), 2);
}

TEST(ref_rel_l2_nan_never_passes) {
    float a[3] = {1, 2, NAN}, b[3] = {1, 2, 3};
    CHECK(!(ref_rel_l2(a, b, 3) < 1.0));
    CHECK(ref_rel_l2(b, b, 3) == 0.0);
    CHECK(ref_bf16(1.0f) == 1.0f);
    CHECK(ref_f16(65504.f) == 65504.f);
}

int main(void) { return t_main(); }
