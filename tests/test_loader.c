/* test_loader.c — fr_model_load on every fixture (hyperparameters checked against config.json,
 * weights against each other across formats), and on corrupt checkpoints that the test writes
 * into a temporary folder: each must fail with one line naming the file and the problem. */
#include "t.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/gguf.h"
#include "model/model.h"
#include "model/tokenizer.h"
#include "tools/mkmodel.h"

static char *fx(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", t_fixtures(), name);
    return buf[k];
}

static fr_model *load(const char *path) {
    fr_err e = {0};
    fr_model *m = fr_model_load(path, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", path, e.msg);
    return m;
}

static bool one_line(const char *s) { return s[0] && !strchr(s, '\n'); }

/* Loading must fail; the message must name `file` and contain `kw`. */
static void expect_fail(const char *path, const char *file, const char *kw) {
    fr_err e = {0};
    fr_model *m = fr_model_load(path, &e);
    CHECK(m == NULL);
    fr_model_free(m);
    if (!strstr(e.msg, file) || !strstr(e.msg, kw) || !one_line(e.msg))
        fprintf(stderr, "  load %s: message [%s] lacks [%s] or [%s]\n", path, e.msg, file, kw);
    CHECK(strstr(e.msg, file) != NULL);
    CHECK(strstr(e.msg, kw) != NULL);
    CHECK(one_line(e.msg));
}

/* ---------------------------------------------------------------- temp files */

static char tmp_root[64];

static const char *tmp_dir(void) {
    if (!tmp_root[0]) {
        snprintf(tmp_root, sizeof tmp_root, "/tmp/frugal-loader-XXXXXX");
        if (!mkdtemp(tmp_root)) {
            perror("mkdtemp");
            abort();
        }
    }
    return tmp_root;
}

static char *tmp_path(const char *name) {
    static char buf[4][600];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp_dir(), name);
    return buf[k];
}

static uint8_t *slurp(const char *path, size_t *n) {
    fr_err e;
    char *s = fr_read_file(path, 1u << 30, n, &e);
    if (!s) fprintf(stderr, "  %s\n", e.msg);
    return (uint8_t *)s;
}

static void spit(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) {
        perror(path);
        abort();
    }
    fclose(f);
}

/* Copy a fixture folder to tmp/name (files only). */
static char *copy_model(const char *fixture, const char *name) {
    static const char *files[] = {"config.json", "generation_config.json", "tokenizer.json",
                                  "tokenizer_config.json", "chat_template.jinja",
                                  "model.safetensors", "model.safetensors.index.json",
                                  "model-00001-of-00003.safetensors",
                                  "model-00002-of-00003.safetensors",
                                  "model-00003-of-00003.safetensors"};
    char *dir = fr_xstrdup(tmp_path(name));
    mkdir(dir, 0755);
    for (size_t i = 0; i < FR_ARRAY_LEN(files); i++) {
        char src[600], dst[700];
        snprintf(src, sizeof src, "%s/%s", fx(fixture), files[i]);
        snprintf(dst, sizeof dst, "%s/%s", dir, files[i]);
        if (!fr_path_exists(src)) continue;
        size_t n;
        uint8_t *p = slurp(src, &n);
        spit(dst, p, n);
        free(p);
    }
    return dir;
}

static char *join(const char *dir, const char *name) {
    static char buf[2][700];
    static int k;
    k = (k + 1) % 2;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* Rewrite a safetensors header in place: edit(root) changes the parsed JSON. */
static void st_edit(const char *path, void (*edit)(cJSON *root, void *ctx), void *ctx) {
    size_t n;
    uint8_t *p = slurp(path, &n);
    uint64_t h = 0;
    for (int i = 7; i >= 0; i--) h = (h << 8) | p[i];
    cJSON *root = cJSON_ParseWithLength((const char *)p + 8, (size_t)h);
    edit(root, ctx);
    char *hdr = cJSON_PrintUnformatted(root);
    size_t hl = strlen(hdr);
    fr_buf out = {0};
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    fr_buf_append(&out, len, 8);
    fr_buf_append(&out, hdr, hl);
    fr_buf_append(&out, p + 8 + h, n - 8 - (size_t)h);
    spit(path, out.data, out.len);
    fr_buf_free(&out);
    free(hdr);
    cJSON_Delete(root);
    free(p);
}

static void edit_remove(cJSON *root, void *ctx) { cJSON_DeleteItemFromObjectCaseSensitive(root, ctx); }

typedef struct { const char *name, *key; const char *json; } item_set;
static void edit_set(cJSON *root, void *ctx) {
    item_set *s = ctx;
    cJSON *t = cJSON_GetObjectItemCaseSensitive(root, s->name);
    cJSON_ReplaceItemInObjectCaseSensitive(t, s->key, cJSON_Parse(s->json));
}

static void write_text(const char *path, const char *s) { spit(path, s, strlen(s)); }

/* ---- GGUF rewriting: copy a file with metadata / tensor-info edits; the data section is kept. */
typedef struct gguf_edit {
    const char *drop_kv;        /* key to remove */
    const char *kv_key;         /* key whose encoded type+value is replaced by kv_raw */
    const void *kv_raw;         /* u32 type + value bytes */
    size_t kv_raw_len;          /* their count */
    const char *drop_tensor;    /* tensor info to remove */
    const char *shape_tensor;   /* tensor whose ne[0], ne[1] become ne0, ne1 */
    int64_t ne0, ne1;           /* new dims */
} gguf_edit;

static void gguf_rewrite(const char *src, const char *dst, const gguf_edit *ed) {
    size_t n;
    uint8_t *p = slurp(src, &n);
    fr_gguf g;
    fr_err e;
    if (fr_gguf_parse(&g, src, p, n, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        abort();
    }
    fr_buf o = {0};
    uint32_t u32;
    uint64_t u64;
    int64_t nkv = g.n_kv, nt = g.n_tensors;
    for (int64_t i = 0; i < g.n_kv; i++)
        if (ed->drop_kv && g.kv[i].key.n == strlen(ed->drop_kv) &&
            !memcmp(g.kv[i].key.p, ed->drop_kv, g.kv[i].key.n))
            nkv--;
    for (int64_t i = 0; i < g.n_tensors; i++)
        if (ed->drop_tensor && g.tensors[i].name.n == strlen(ed->drop_tensor) &&
            !memcmp(g.tensors[i].name.p, ed->drop_tensor, g.tensors[i].name.n))
            nt--;
    fr_buf_append(&o, "GGUF", 4);
    u32 = 3;
    fr_buf_append(&o, &u32, 4);
    u64 = (uint64_t)nt;
    fr_buf_append(&o, &u64, 8);
    u64 = (uint64_t)nkv;
    fr_buf_append(&o, &u64, 8);
    const uint8_t *kv_end = g.n_tensors ? (const uint8_t *)g.tensors[0].name.p - 8 : p + g.data_offset;
    for (int64_t i = 0; i < g.n_kv; i++) {
        const fr_gguf_kv *kv = &g.kv[i];
        const uint8_t *start = (const uint8_t *)kv->key.p - 8;
        const uint8_t *end = i + 1 < g.n_kv ? (const uint8_t *)g.kv[i + 1].key.p - 8 : kv_end;
        bool is = false;
        if (ed->drop_kv && kv->key.n == strlen(ed->drop_kv) && !memcmp(kv->key.p, ed->drop_kv, kv->key.n))
            continue;
        if (ed->kv_key && kv->key.n == strlen(ed->kv_key) && !memcmp(kv->key.p, ed->kv_key, kv->key.n))
            is = true;
        if (is) {
            fr_buf_append(&o, start, 8 + kv->key.n);
            fr_buf_append(&o, ed->kv_raw, ed->kv_raw_len);
        } else {
            fr_buf_append(&o, start, (size_t)(end - start));
        }
    }
    for (int64_t i = 0; i < g.n_tensors; i++) {
        const fr_gguf_tensor *t = &g.tensors[i];
        bool match_drop = ed->drop_tensor && t->name.n == strlen(ed->drop_tensor) &&
                          !memcmp(t->name.p, ed->drop_tensor, t->name.n);
        if (match_drop) continue;
        bool reshape = ed->shape_tensor && t->name.n == strlen(ed->shape_tensor) &&
                       !memcmp(t->name.p, ed->shape_tensor, t->name.n);
        u64 = t->name.n;
        fr_buf_append(&o, &u64, 8);
        fr_buf_append(&o, t->name.p, t->name.n);
        u32 = (uint32_t)t->n_dims;
        fr_buf_append(&o, &u32, 4);
        for (int d = 0; d < t->n_dims; d++) {
            u64 = (uint64_t)(reshape && d < 2 ? (d ? ed->ne1 : ed->ne0) : t->ne[d]);
            fr_buf_append(&o, &u64, 8);
        }
        fr_buf_append(&o, &t->type, 4);
        fr_buf_append(&o, &t->offset, 8);
    }
    while (o.len % g.alignment) fr_buf_append(&o, "", 1);
    fr_buf_append(&o, p + g.data_offset, n - g.data_offset);
    spit(dst, o.data, o.len);
    fr_buf_free(&o);
    fr_gguf_free(&g);
    free(p);
}

/* ---------------------------------------------------------------- loads */

static bool same_tensor(const fr_tensor *a, const fr_tensor *b) {
    if (a->n_dims != b->n_dims || a->dtype != b->dtype || a->nbytes != b->nbytes) return false;
    for (int i = 0; i < FR_MAX_DIMS; i++)
        if (a->ne[i] != b->ne[i]) return false;
    return !memcmp(a->data, b->data, a->nbytes);
}

/* All the tensors of a model, in one order. */
static int model_tensors(const fr_model *m, const fr_tensor **out, int cap) {
    int n = 0;
    out[n++] = &m->w.tok_embd;
    out[n++] = &m->w.output_norm;
    out[n++] = &m->w.output;
    for (int l = 0; l < m->hp.n_layer && n + 12 <= cap; l++) {
        const fr_layer *y = &m->w.layers[l];
        const fr_tensor *ts[] = {&y->attn_norm, &y->wq, &y->wk, &y->wv, &y->bq, &y->bk,
                                 &y->bv, &y->wo, &y->ffn_norm, &y->w_gate, &y->w_up, &y->w_down};
        for (int i = 0; i < 12; i++) out[n++] = ts[i];
    }
    return n;
}

TEST(load_qwen2_tiny) {
    fr_model *m = load(fx("qwen2-tiny"));
    CHECK(m != NULL);
    if (!m) return;
    const fr_hparams *hp = &m->hp;
    CHECK_EQ_INT(hp->arch, FR_ARCH_QWEN2);
    CHECK_STR(m->arch_name, "qwen2");
    CHECK_STR(m->name, "qwen2-tiny");
    CHECK_EQ_INT(hp->n_vocab, 4005);
    CHECK_EQ_INT(hp->n_embd, 64);
    CHECK_EQ_INT(hp->n_layer, 2);
    CHECK_EQ_INT(hp->n_head, 4);
    CHECK_EQ_INT(hp->n_head_kv, 2);
    CHECK_EQ_INT(hp->head_dim, 16);
    CHECK_EQ_INT(hp->n_ff, 160);
    CHECK_EQ_INT(hp->n_ctx_train, 512);
    CHECK_NEAR(hp->rms_eps, 1e-6, 1e-12);
    CHECK_NEAR(hp->rope_theta, 1e6, 1e-3);
    CHECK(hp->tied_embeddings);
    CHECK(!hp->rope_interleaved);
    CHECK_EQ_INT(hp->bos_id, -1);
    CHECK_EQ_INT(hp->eos_id, 4002);
    CHECK(m->w.rope_freq_factors == NULL);
    CHECK(m->w.output.data == m->w.tok_embd.data);
    const fr_layer *l0 = &m->w.layers[0];
    CHECK_STR(l0->wq.name, "blk.0.attn_q.weight");
    CHECK_STR(m->w.layers[1].w_down.name, "blk.1.ffn_down.weight");
    CHECK(l0->wq.n_dims == 2 && l0->wq.ne[0] == 64 && l0->wq.ne[1] == 64 && l0->wq.dtype == FR_DTYPE_F32);
    CHECK(l0->wk.ne[0] == 64 && l0->wk.ne[1] == 32);
    CHECK(l0->w_down.ne[0] == 160 && l0->w_down.ne[1] == 64);
    CHECK(fr_tensor_present(&l0->bq) && l0->bq.ne[0] == 64 && l0->bq.dtype == FR_DTYPE_F32);
    CHECK(fr_tensor_present(&l0->bk) && l0->bk.ne[0] == 32);
    CHECK(m->w.tok_embd.ne[0] == 64 && m->w.tok_embd.ne[1] == 4005);
    CHECK(m->chat_template && strstr(m->chat_template, "<|im_start|>assistant"));
    CHECK(m->bos_token_str == NULL);
    CHECK_STR(m->eos_token_str, "<|im_end|>");
    CHECK(m->tok && fr_tokenizer_n_vocab(m->tok) <= hp->n_vocab);
    CHECK_EQ_INT(m->n_params, 4005 * 64 + 64 + 2 * (2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 + 2 * 32 +
                                                    64 * 64 + 3 * 64 * 160));
    /* all F32 weights (the tied output reads the embedding) plus one embedding row */
    CHECK_EQ_INT(m->weight_bytes, (size_t)m->n_params * 4 + 64 * 4);
    CHECK(m->load_seconds >= 0);
    fr_model_free(m);
}

TEST(load_llama_tiny_sharded) {
    fr_model *m = load(fx("llama-tiny"));
    CHECK(m != NULL);
    if (!m) return;
    const fr_hparams *hp = &m->hp;
    CHECK_EQ_INT(hp->arch, FR_ARCH_LLAMA);
    CHECK_EQ_INT(hp->n_vocab, 3005);
    CHECK_EQ_INT(hp->n_layer, 3);
    CHECK_EQ_INT(hp->n_head, 8);
    CHECK_EQ_INT(hp->n_head_kv, 2);
    CHECK_EQ_INT(hp->head_dim, 8);
    CHECK_EQ_INT(hp->n_ff, 192);
    CHECK_EQ_INT(hp->n_ctx_train, 16384);
    CHECK_NEAR(hp->rms_eps, 1e-5, 1e-11);
    CHECK_NEAR(hp->rope_theta, 500000.0, 1e-2);
    CHECK(!hp->tied_embeddings);
    CHECK(!hp->rope_interleaved);
    CHECK(m->w.output.data != m->w.tok_embd.data);
    CHECK(m->w.output.ne[0] == 64 && m->w.output.ne[1] == 3005);
    CHECK_EQ_INT(m->n_maps, 3);
    CHECK(!fr_tensor_present(&m->w.layers[0].bq));
    CHECK_EQ_INT(hp->bos_id, 3000);
    CHECK_EQ_INT(hp->eos_id, 3004);
    CHECK_STR(m->bos_token_str, "<|begin_of_text|>");
    CHECK_STR(m->eos_token_str, "<|eot_id|>");
    CHECK(m->chat_template && strstr(m->chat_template, "bos_token"));
    CHECK(m->w.rope_freq_factors != NULL);
    if (m->w.rope_freq_factors) {
        double theta = 500000, factor = 8, lo = 1, hi = 4, old = 8192;
        for (int i = 0; i < 4; i++) {
            double freq = 1.0 / pow(theta, (2.0 * i) / 8), wl = 2 * M_PI / freq, want;
            if (wl < old / hi) want = 1;
            else if (wl > old / lo) want = factor;
            else {
                double s = (old / wl - lo) / (hi - lo);
                want = 1 / ((1 - s) / factor + s);
            }
            CHECK_NEAR(m->w.rope_freq_factors[i], want, 1e-6 * want);
        }
    }
    fr_model_free(m);
}

/* qwen2-tiny-f32.gguf holds byte-identical weights to the safetensors checkpoint. */
TEST(gguf_f32_weights_equal_hf) {
    fr_model *a = load(fx("qwen2-tiny")), *b = load(fx("qwen2-tiny-f32.gguf"));
    CHECK(a && b);
    if (a && b) {
        const fr_tensor *ta[64], *tb[64];
        int na = model_tensors(a, ta, 64), nb = model_tensors(b, tb, 64);
        CHECK_EQ_INT(na, nb);
        int diff = 0;
        for (int i = 0; i < na && i < nb; i++)
            if (!same_tensor(ta[i], tb[i])) {
                fprintf(stderr, "  differs: %s\n", ta[i]->name ? ta[i]->name : "?");
                diff++;
            }
        CHECK_EQ_INT(diff, 0);
        CHECK(!b->hp.rope_interleaved);
        CHECK(b->hp.tied_embeddings);
        CHECK_EQ_INT(b->hp.eos_id, 4002);
        CHECK_STR(b->eos_token_str, "<|im_end|>");
        CHECK(b->chat_template && !strcmp(a->chat_template, b->chat_template));
        CHECK_EQ_INT(a->weight_bytes, b->weight_bytes);
        CHECK_EQ_INT(a->n_params, b->n_params);
        CHECK_STR(b->name, "qwen2-tiny-f32");
    }
    fr_model_free(a);
    fr_model_free(b);
}

/* BF16 checkpoint: each weight equals the bf16 rounding of the fp32 one. */
TEST(bf16_weights_equal_rounded_f32) {
    fr_model *a = load(fx("qwen2-tiny")), *b = load(fx("qwen2-tiny-bf16"));
    CHECK(a && b);
    if (a && b) {
        const fr_tensor *ta[64], *tb[64];
        int n = model_tensors(a, ta, 64);
        model_tensors(b, tb, 64);
        long bad = 0, total = 0;
        for (int i = 0; i < n; i++) {
            if (!fr_tensor_present(ta[i])) continue;
            CHECK(tb[i]->dtype == FR_DTYPE_F32 && tb[i]->nbytes == ta[i]->nbytes);
            const float *x = ta[i]->data, *y = tb[i]->data;
            for (int64_t k = 0; k < fr_tensor_nelem(ta[i]); k++, total++)
                if (fr_bf16_to_f32(fr_f32_to_bf16(x[k])) != y[k]) bad++;
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(total > 300000);
        CHECK_EQ_INT(a->n_maps, 1); /* F32 weights point into the map */
        CHECK_EQ_INT(b->n_maps, 0); /* all converted: the BF16 file is unmapped */
    }
    fr_model_free(a);
    fr_model_free(b);
}

/* Llama GGUF (F16): Q/K rows permuted by the converter (hence rope_interleaved), others in HF
 * order; all equal to the f16 rounding of the fp32 checkpoint. */
TEST(llama_f16_gguf_vs_hf) {
    fr_model *a = load(fx("llama-tiny")), *b = load(fx("llama-tiny-f16.gguf"));
    CHECK(a && b);
    if (a && b) {
        CHECK(b->hp.rope_interleaved);
        CHECK(!a->hp.rope_interleaved);
        CHECK_EQ_INT(b->hp.head_dim, 8);
        CHECK_EQ_INT(b->hp.n_vocab, 3005);
        CHECK(!b->hp.tied_embeddings);
        CHECK_EQ_INT(b->hp.bos_id, 3000);
        CHECK_EQ_INT(b->hp.eos_id, 3004);
        CHECK_STR(b->bos_token_str, "<|begin_of_text|>");
        CHECK_STR(b->eos_token_str, "<|eot_id|>");
        CHECK(b->w.rope_freq_factors != NULL);
        for (int i = 0; i < 4 && b->w.rope_freq_factors; i++)
            CHECK_NEAR(a->w.rope_freq_factors[i], b->w.rope_freq_factors[i],
                       1e-6 * a->w.rope_freq_factors[i]);
        long bad = 0;
        int hd = 8;
        for (int l = 0; l < 3; l++) {
            const fr_layer *x = &a->w.layers[l], *y = &b->w.layers[l];
            const fr_tensor *plain[][2] = {{&x->wv, &y->wv}, {&x->wo, &y->wo},
                                           {&x->w_gate, &y->w_gate}, {&x->w_up, &y->w_up},
                                           {&x->w_down, &y->w_down}, {&x->attn_norm, &y->attn_norm}};
            for (size_t t = 0; t < FR_ARRAY_LEN(plain); t++) {
                const float *p = plain[t][0]->data, *q = plain[t][1]->data;
                CHECK(plain[t][1]->dtype == FR_DTYPE_F32);
                bool is_norm = t == 5; /* norms are stored F32 in the GGUF */
                for (int64_t k = 0; k < fr_tensor_nelem(plain[t][0]); k++) {
                    float want = is_norm ? p[k] : fr_f16_to_f32(fr_f32_to_f16(p[k]));
                    if (q[k] != want) bad++;
                }
            }
            const fr_tensor *perm[][2] = {{&x->wq, &y->wq}, {&x->wk, &y->wk}};
            for (int t = 0; t < 2; t++) {
                const float *p = perm[t][0]->data, *q = perm[t][1]->data;
                int64_t in = perm[t][0]->ne[0], rows = perm[t][0]->ne[1];
                for (int64_t h = 0; h < rows / hd; h++)
                    for (int i = 0; i < hd / 2; i++)
                        for (int j = 0; j < 2; j++)
                            for (int64_t c = 0; c < in; c++) {
                                float src = p[(h * hd + j * (hd / 2) + i) * in + c];
                                if (q[(h * hd + 2 * i + j) * in + c] != fr_f16_to_f32(fr_f32_to_f16(src)))
                                    bad++;
                            }
            }
        }
        CHECK_EQ_INT(bad, 0);
    }
    fr_model_free(a);
    fr_model_free(b);
}

TEST(gguf_quantised_types) {
    const char *files[] = {"qwen2-tiny-q8_0.gguf", "qwen2-tiny-q4_0.gguf"};
    fr_dtype want[] = {FR_DTYPE_Q8_0, FR_DTYPE_Q4_0};
    size_t f32_bytes = 0;
    fr_model *ref = load(fx("qwen2-tiny-f32.gguf"));
    if (ref) f32_bytes = ref->weight_bytes;
    fr_model_free(ref);
    for (int i = 0; i < 2; i++) {
        fr_model *m = load(fx(files[i]));
        CHECK(m != NULL);
        if (!m) continue;
        const fr_layer *l = &m->w.layers[1];
        CHECK(l->wq.dtype == want[i] && l->w_down.dtype == want[i]);
        CHECK(m->w.tok_embd.dtype == want[i]);
        CHECK_EQ_INT(l->w_down.nbytes, fr_dtype_row_size(want[i], 160) * 64);
        CHECK_EQ_INT(m->w.tok_embd.nbytes, fr_dtype_row_size(want[i], 64) * 4005);
        CHECK(l->attn_norm.dtype == FR_DTYPE_F32 && l->bq.dtype == FR_DTYPE_F32);
        CHECK(m->w.output_norm.dtype == FR_DTYPE_F32);
        CHECK(m->weight_bytes < f32_bytes / 3);
        CHECK(!m->hp.rope_interleaved);
        fr_model_free(m);
    }
    CHECK_EQ_INT(fr_dtype_block(FR_DTYPE_Q8_0), 32);
    CHECK_EQ_INT(fr_dtype_block(FR_DTYPE_Q4_K), 256);
    CHECK_EQ_INT(fr_dtype_row_size(FR_DTYPE_Q4_K, 512), 288);
    CHECK_EQ_INT(fr_dtype_row_size(FR_DTYPE_BF16, 10), 20);
    CHECK_STR(fr_dtype_name(FR_DTYPE_Q4_0), "Q4_0");
}

/* A GGUF image at an odd address: F32 tensors are copied to aligned memory, values equal. */
TEST(gguf_buffer_misaligned) {
    size_t n;
    uint8_t *p = slurp(fx("qwen2-tiny-f32.gguf"), &n);
    uint8_t *q = malloc(n + 1);
    memcpy(q + 1, p, n);
    fr_err e = {0};
    fr_model *a = fr_model_load_gguf_buffer(p, n, "aligned.gguf", &e);
    fr_model *b = fr_model_load_gguf_buffer(q + 1, n, "odd.gguf", &e);
    CHECK(a && b);
    if (a && b) {
        CHECK(((uintptr_t)b->w.layers[0].wq.data & 3) == 0);
        CHECK(same_tensor(&a->w.layers[0].wq, &b->w.layers[0].wq));
        CHECK(same_tensor(&a->w.tok_embd, &b->w.tok_embd));
    }
    fr_model_free(a);
    fr_model_free(b);
    free(q);
    free(p);
}

TEST(load_path_forms) {
    /* a file inside the folder loads the folder; missing paths and other files fail */
    fr_model *m = load(fx("qwen2-tiny/config.json"));
    CHECK(m && m->hp.n_layer == 2);
    fr_model_free(m);
    expect_fail("/nonexistent/model", "/nonexistent/model", "no such");
    expect_fail(fx("corpus-en.txt"), "corpus-en.txt", "GGUF");
}

/* ---------------------------------------------------------------- corrupt HF folders */

TEST(hf_corrupt_safetensors) {
    char *d = copy_model("qwen2-tiny", "st");
    char *st = fr_xstrdup(join(d, "model.safetensors"));
    size_t n;
    uint8_t *orig = slurp(st, &n);
    /* truncated at several lengths */
    size_t lens[] = {0, 5, 8, 100, 2711, 2712, 5000, n / 2, n - 1};
    for (size_t i = 0; i < FR_ARRAY_LEN(lens); i++) {
        spit(st, orig, lens[i]);
        expect_fail(d, "model.safetensors", lens[i] < 8 ? "8-byte" : lens[i] < 2712 ? "header" : "past the end");
    }
    /* header length past the end */
    spit(st, orig, n);
    {
        uint8_t *c = malloc(n);
        memcpy(c, orig, n);
        uint64_t big = n;
        memcpy(c, &big, 8);
        spit(st, c, n);
        expect_fail(d, "model.safetensors", "header length");
        free(c);
    }
    /* offsets past the end, wrong dtype, wrong shape, missing tensor, unusable dtype */
    spit(st, orig, n);
    item_set s1 = {"model.norm.weight", "data_offsets", "[1374096, 1374352]"};
    st_edit(st, edit_set, &s1);
    expect_fail(d, "model.safetensors", "past the end");
    spit(st, orig, n);
    item_set s2 = {"model.norm.weight", "dtype", "\"F99\""};
    st_edit(st, edit_set, &s2);
    expect_fail(d, "model.safetensors", "F99");
    spit(st, orig, n);
    item_set s3 = {"model.layers.1.self_attn.q_proj.weight", "shape", "[32, 128]"};
    st_edit(st, edit_set, &s3);
    expect_fail(d, "model.safetensors", "'model.layers.1.self_attn.q_proj.weight' has shape [32, 128], expected [64, 64]");
    spit(st, orig, n);
    st_edit(st, edit_remove, (void *)"model.norm.weight");
    expect_fail(d, "model.safetensors", "'model.norm.weight' not found");
    spit(st, orig, n);
    item_set s4 = {"model.norm.weight", "dtype", "\"I32\""};
    st_edit(st, edit_set, &s4);
    expect_fail(d, "model.safetensors", "type I32");
    spit(st, orig, n);
    item_set s5 = {"model.layers.0.self_attn.k_proj.weight", "shape", "[1000, 1000, 1000, 1000, 1000, 1000, 1000]"};
    st_edit(st, edit_set, &s5);
    expect_fail(d, "model.safetensors", "dimensions");
    spit(st, orig, n);
    item_set s6 = {"model.layers.0.self_attn.k_proj.weight", "shape", "[4294967296, 4294967296]"};
    st_edit(st, edit_set, &s6);
    expect_fail(d, "model.safetensors", "too large");
    spit(st, orig, n);
    st_edit(st, edit_remove, (void *)"model.layers.0.self_attn.v_proj.bias");
    expect_fail(d, "model.safetensors", "'model.layers.0.self_attn.v_proj.bias' not found");
    spit(st, orig, n);
    fr_model *m = load(d);
    CHECK(m != NULL); /* restored: loads again */
    fr_model_free(m);
    free(orig);
    free(st);
    free(d);
}

TEST(hf_corrupt_json) {
    char *d = copy_model("qwen2-tiny", "js");
    size_t n;
    char *cfg = fr_xstrdup(join(d, "config.json"));
    uint8_t *orig = slurp(cfg, &n);
    write_text(cfg, "{\"architectures\": [\"Qwen2ForCausalLM\"], \"hidden_size\": 64,");
    expect_fail(d, "config.json", "invalid JSON");
    write_text(cfg, "{\"architectures\": [\"MistralForCausalLM\"], \"hidden_size\": 64}");
    expect_fail(d, "config.json", "unsupported architecture 'MistralForCausalLM'");
    /* rope type other than default/llama3 */
    {
        char *s = fr_xstrdup((const char *)orig);
        char *at = strstr(s, "\"default\"");
        CHECK(at != NULL);
        fr_buf b = {0};
        fr_buf_append(&b, s, (size_t)(at - s));
        fr_buf_puts(&b, "\"yarn\"");
        fr_buf_puts(&b, at + 9);
        write_text(cfg, b.data);
        expect_fail(d, "config.json", "yarn");
        fr_buf_free(&b);
        free(s);
    }
    /* vocab_size that disagrees with the embedding */
    {
        char *s = fr_xstrdup((const char *)orig);
        char *at = strstr(s, "\"vocab_size\": 4005");
        CHECK(at != NULL);
        memcpy(at, "\"vocab_size\": 4006", 18);
        write_text(cfg, s);
        expect_fail(d, "model.safetensors", "'model.embed_tokens.weight' has shape [4005, 64], expected [4006, 64]");
        free(s);
    }
    spit(cfg, orig, n);
    char *tj = fr_xstrdup(join(d, "tokenizer.json"));
    size_t tn;
    uint8_t *torig = slurp(tj, &tn);
    write_text(tj, "{\"model\": {\"type\": \"BPE\", \"vocab\": 12}");
    expect_fail(d, "tokenizer.json", "tokenizer.json");
    write_text(tj, "[]");
    expect_fail(d, "tokenizer.json", "tokenizer.json");
    unlink(tj);
    expect_fail(d, "tokenizer.json", "not found");
    spit(tj, torig, tn);
    char *gc = fr_xstrdup(join(d, "generation_config.json"));
    write_text(gc, "{\"eos_token_id\": \"x\"}");
    expect_fail(d, "generation_config.json", "eos_token_id");
    write_text(gc, "{\"eos_token_id\": [4002, 4000]}");
    fr_model *m = load(d);
    CHECK(m && m->hp.eos_id == 4002 && m->hp.eos_ids[0] == 4000);
    fr_model_free(m);
    char *tc = fr_xstrdup(join(d, "tokenizer_config.json"));
    write_text(tc, "{\"eos_token\": 5}");
    expect_fail(d, "tokenizer_config.json", "eos_token");
    /* template list form, token objects */
    unlink(join(d, "chat_template.jinja"));
    write_text(tc, "{\"bos_token\": {\"content\": \"<|endoftext|>\", \"lstrip\": false}, "
                   "\"eos_token\": \"<|endoftext|>\", \"chat_template\": [{\"name\": \"tool_use\", "
                   "\"template\": \"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}");
    m = load(d);
    CHECK(m != NULL);
    if (m) {
        CHECK_STR(m->chat_template, "D");
        CHECK_STR(m->bos_token_str, "<|endoftext|>");
        /* tokenizer_config's eos joins the end ids */
        CHECK(m->hp.eos_id == 4002 && m->hp.eos_ids[0] == 4000);
    }
    fr_model_free(m);
    free(tc);
    free(gc);
    free(torig);
    free(tj);
    free(orig);
    free(cfg);
    free(d);
}

TEST(hf_corrupt_sharded) {
    char *d = copy_model("llama-tiny", "sh");
    char *idx = fr_xstrdup(join(d, "model.safetensors.index.json"));
    size_t n;
    uint8_t *orig = slurp(idx, &n);
    unlink(join(d, "model-00002-of-00003.safetensors"));
    expect_fail(d, "model-00002-of-00003.safetensors", "cannot open");
    write_text(idx, "{\"weight_map\": {\"model.norm.weight\": \"../../etc/passwd\"}}");
    expect_fail(d, "model.safetensors.index.json", "plain file name");
    write_text(idx, "{\"weight_map\": {\"model.nope\": \"model-00001-of-00003.safetensors\"}}");
    expect_fail(d, "model.safetensors.index.json", "model.nope");
    write_text(idx, "{\"weight_map\": {\"model.embed_tokens.weight\": "
                    "\"model-00001-of-00003.safetensors\"}}");
    expect_fail(d, "model.safetensors.index.json", "not found");
    write_text(idx, "{\"weight_map\": 3}");
    expect_fail(d, "model.safetensors.index.json", "weight_map");
    write_text(idx, "nope");
    expect_fail(d, "model.safetensors.index.json", "invalid JSON");
    spit(idx, orig, n);
    /* untied config and no lm_head: required */
    char *sh2 = fr_xstrdup(join(d, "model-00002-of-00003.safetensors"));
    size_t n2;
    uint8_t *s2 = slurp(fx("llama-tiny/model-00002-of-00003.safetensors"), &n2);
    spit(sh2, s2, n2);
    st_edit(sh2, edit_remove, (void *)"lm_head.weight");
    cJSON *ix = cJSON_Parse((const char *)orig);
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(ix, "weight_map"),
                                            "lm_head.weight");
    char *txt = cJSON_Print(ix);
    write_text(idx, txt);
    expect_fail(d, "model.safetensors.index.json", "'lm_head.weight' not found");
    free(txt);
    cJSON_Delete(ix);
    free(s2);
    free(sh2);
    free(orig);
    free(idx);
    free(d);
}

/* ---------------------------------------------------------------- corrupt GGUF files */

TEST(gguf_corrupt_files) {
    const char *src = fx("qwen2-tiny-f32.gguf");
    size_t n;
    uint8_t *orig = slurp(src, &n);
    char *bad = fr_xstrdup(tmp_path("bad-model.gguf"));
    size_t lens[] = {4, 10, 24, 40, 1000, 50000, 200000, n / 2, n - 100};
    for (size_t i = 0; i < FR_ARRAY_LEN(lens); i++) {
        spit(bad, orig, lens[i]);
        expect_fail(bad, "bad-model.gguf", lens[i] < 24 ? "header" : "bad-model.gguf");
    }
    free(orig);
    uint8_t raw[32];
    uint32_t ty = FR_GGUF_STR;
    uint64_t len = 3;
    memcpy(raw, &ty, 4);
    memcpy(raw + 4, &len, 8);
    memcpy(raw + 12, "gpt", 3);
    gguf_edit e1 = {.kv_key = "general.architecture", .kv_raw = raw, .kv_raw_len = 15};
    gguf_rewrite(src, bad, &e1);
    expect_fail(bad, "bad-model.gguf", "unsupported architecture 'gpt'");
    memcpy(raw + 12, "lla", 3);
    gguf_edit e1b = {.kv_key = "tokenizer.ggml.model", .kv_raw = raw, .kv_raw_len = 15};
    gguf_rewrite(src, bad, &e1b);
    expect_fail(bad, "bad-model.gguf", "tokenizer model 'lla'");
    gguf_edit e2 = {.drop_tensor = "blk.1.ffn_up.weight"};
    gguf_rewrite(src, bad, &e2);
    expect_fail(bad, "bad-model.gguf", "'blk.1.ffn_up.weight' not found");
    gguf_edit e3 = {.shape_tensor = "blk.0.attn_k.weight", .ne0 = 32, .ne1 = 64};
    gguf_rewrite(src, bad, &e3);
    expect_fail(bad, "bad-model.gguf", "'blk.0.attn_k.weight' has shape [32, 64], expected [64, 32]");
    gguf_edit e4 = {.drop_kv = "qwen2.block_count"};
    gguf_rewrite(src, bad, &e4);
    expect_fail(bad, "bad-model.gguf", "qwen2.block_count");
    gguf_edit e5 = {.drop_kv = "tokenizer.ggml.tokens"};
    gguf_rewrite(src, bad, &e5);
    expect_fail(bad, "bad-model.gguf", "tokenizer.ggml.tokens");
    /* huge string length in the chat template value */
    len = UINT64_C(1) << 62;
    memcpy(raw + 4, &len, 8);
    gguf_edit e6 = {.kv_key = "tokenizer.chat_template", .kv_raw = raw, .kv_raw_len = 12};
    gguf_rewrite(src, bad, &e6);
    expect_fail(bad, "bad-model.gguf", "string length");
    /* huge array count for the merges */
    uint32_t at = FR_GGUF_ARR, et = FR_GGUF_STR;
    uint64_t cnt = UINT64_C(1) << 60;
    memcpy(raw, &at, 4);
    memcpy(raw + 4, &et, 4);
    memcpy(raw + 8, &cnt, 8);
    gguf_edit e7 = {.kv_key = "tokenizer.ggml.merges", .kv_raw = raw, .kv_raw_len = 16};
    gguf_rewrite(src, bad, &e7);
    expect_fail(bad, "bad-model.gguf", "array count");
    /* a key with the wrong type */
    ty = FR_GGUF_F32;
    float fv = 2.0f;
    memcpy(raw, &ty, 4);
    memcpy(raw + 4, &fv, 4);
    gguf_edit e8 = {.kv_key = "qwen2.attention.head_count", .kv_raw = raw, .kv_raw_len = 8};
    gguf_rewrite(src, bad, &e8);
    expect_fail(bad, "bad-model.gguf", "qwen2.attention.head_count");
    /* absurd hyperparameter */
    ty = FR_GGUF_U32;
    uint32_t big = 3000000000u;
    memcpy(raw, &ty, 4);
    memcpy(raw + 4, &big, 4);
    gguf_edit e9 = {.kv_key = "qwen2.embedding_length", .kv_raw = raw, .kv_raw_len = 8};
    gguf_rewrite(src, bad, &e9);
    expect_fail(bad, "bad-model.gguf", "qwen2.embedding_length");
    /* rope scaling we don't implement */
    ty = FR_GGUF_STR;
    len = 4;
    memcpy(raw, &ty, 4);
    memcpy(raw + 4, &len, 8);
    memcpy(raw + 12, "yarn", 4);
    gguf_edit e10 = {.kv_key = "qwen2.rope.freq_base", .kv_raw = raw, .kv_raw_len = 16};
    gguf_rewrite(src, bad, &e10);
    expect_fail(bad, "bad-model.gguf", "qwen2.rope.freq_base");
    /* unchanged rewrite still loads (the rewriter itself is sound) */
    gguf_edit none = {0};
    gguf_rewrite(src, bad, &none);
    fr_model *m = load(bad);
    CHECK(m != NULL);
    fr_model_free(m);
    free(bad);
}

/* ---------------------------------------------------------------- mkmodel */

/* Runs `frugal mkmodel` in-process with stderr captured; shows it only when the exit status is
 * not the expected one. */
static int mk_expect(const char **args, int want) {
    int n = 0;
    while (args[n]) n++;
    fflush(stderr);
    int saved = dup(2);
    FILE *cap = tmpfile();
    dup2(fileno(cap), 2);
    int rc = fr_cmd_mkmodel(n, (char **)args);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    if (rc != want) {
        char line[512];
        rewind(cap);
        while (fgets(line, sizeof line, cap)) fprintf(stderr, "  mkmodel: %s", line);
    }
    fclose(cap);
    return rc;
}
#define mk(args) mk_expect(args, 0)

static double stddev(const float *x, int64_t n) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < n; i++) {
        s += x[i];
        s2 += (double)x[i] * x[i];
    }
    return sqrt(s2 / (double)n - (s / (double)n) * (s / (double)n));
}

TEST(mkmodel_formats) {
    char *hf = fr_xstrdup(tmp_path("mk-hf")), *hf2 = fr_xstrdup(tmp_path("mk-hf2"));
    const char *a1[] = {"mkmodel", "--out", hf, "--arch", "qwen2", "--hidden", "128",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "256",
                        "--vocab", "1000", "--seed", "7", NULL};
    CHECK_EQ_INT(mk(a1), 0);
    fr_model *m = load(hf);
    CHECK(m != NULL);
    if (m) {
        CHECK_EQ_INT(m->hp.arch, FR_ARCH_QWEN2);
        CHECK_EQ_INT(m->hp.n_vocab, 1000);
        CHECK_EQ_INT(m->hp.n_embd, 128);
        CHECK_EQ_INT(m->hp.head_dim, 32);
        CHECK_EQ_INT(m->hp.n_ff, 256);
        CHECK(!m->hp.tied_embeddings);
        CHECK(fr_tensor_present(&m->w.layers[1].bv));
        CHECK_EQ_INT(fr_tokenizer_n_vocab(m->tok), 259);
        CHECK_STR(m->eos_token_str, "<|im_end|>");
        CHECK(m->chat_template && strstr(m->chat_template, "<|im_start|>"));
        /* normal(0, 1/sqrt(fan_in)) matrices, unit norms */
        const fr_tensor *w = &m->w.layers[0].w_gate;
        CHECK_NEAR(stddev(w->data, fr_tensor_nelem(w)), 1 / sqrt(128.0), 0.01);
        w = &m->w.layers[0].w_down;
        CHECK_NEAR(stddev(w->data, fr_tensor_nelem(w)), 1 / sqrt(256.0), 0.01);
        CHECK(((const float *)m->w.layers[1].ffn_norm.data)[5] == 1.0f);
        /* the default tokenizer round-trips bytes */
        const char *text = "hi \xc3\xa9!<|im_end|>";
        int32_t *ids = NULL;
        size_t n = 0;
        fr_err e = {0};
        CHECK(fr_tokenize(m->tok, text, strlen(text), false, &ids, &n, &e) == 0);
        CHECK(n == 7 && ids[0] == 'h' && ids[2] == ' ' && ids[3] == 0xc3 && ids[6] == 258);
        char *back = fr_detokenize(m->tok, ids, n, false);
        CHECK_STR(back, text);
        free(back);
        free(ids);
    }
    /* same seed: same bytes */
    const char *a2[] = {"mkmodel", "--out", hf2, "--arch", "qwen2", "--hidden", "128",
                        "--layers", "2", "--heads", "4", "--kv-heads", "2", "--ffn", "256",
                        "--vocab", "1000", "--seed", "7", NULL};
    CHECK_EQ_INT(mk(a2), 0);
    fr_model *m2 = load(hf2);
    CHECK(m && m2 && same_tensor(&m->w.layers[1].wq, &m2->w.layers[1].wq));
    CHECK(m && m2 && same_tensor(&m->w.tok_embd, &m2->w.tok_embd));
    fr_model_free(m2);
    /* the same command with --format gguf: identical F32 weights */
    char *gs = fr_xstrdup(tmp_path("mk-same.gguf"));
    const char *a2g[] = {"mkmodel", "--out", gs, "--format", "gguf", "--arch", "qwen2",
                         "--hidden", "128", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                         "--ffn", "256", "--vocab", "1000", "--seed", "7", NULL};
    CHECK_EQ_INT(mk(a2g), 0);
    m2 = load(gs);
    CHECK(m && m2);
    if (m && m2) {
        CHECK(same_tensor(&m->w.layers[1].wk, &m2->w.layers[1].wk));
        CHECK(same_tensor(&m->w.layers[1].bk, &m2->w.layers[1].bk));
        CHECK(same_tensor(&m->w.output, &m2->w.output));
        CHECK_EQ_INT(m->weight_bytes, m2->weight_bytes);
    }
    fr_model_free(m2);
    free(gs);

    /* GGUF of each type, and HF bf16 with a real tokenizer and its config */
    const char *gtypes[] = {"f32", "f16", "q8_0", "q4_0"};
    fr_dtype want[] = {FR_DTYPE_F32, FR_DTYPE_F32, FR_DTYPE_Q8_0, FR_DTYPE_Q4_0};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "mk-%s.gguf", gtypes[i]);
        char *g = fr_xstrdup(tmp_path(name));
        const char *a[] = {"mkmodel", "--out", g, "--arch", i % 2 ? "llama" : "qwen2",
                           "--hidden", "128", "--layers", "3", "--heads", "4", "--kv-heads", "1",
                           "--ffn", "192", "--vocab", "1000", "--gguf-type", gtypes[i],
                           "--tied", "--seed", "7", NULL};
        CHECK_EQ_INT(mk(a), 0);
        fr_model *q = load(g);
        CHECK(q != NULL);
        if (q) {
            CHECK_EQ_INT(q->hp.n_layer, 3);
            CHECK_EQ_INT(q->hp.n_head_kv, 1);
            CHECK(q->hp.tied_embeddings);
            CHECK(q->w.layers[2].w_up.dtype == want[i]);
            CHECK(q->w.layers[2].ffn_norm.dtype == FR_DTYPE_F32);
            CHECK_EQ_INT(q->hp.rope_interleaved, i % 2 == 1);
            CHECK_STR(q->eos_token_str, "<|im_end|>");
            CHECK(q->chat_template != NULL);
        }
        fr_model_free(q);
        free(g);
    }
    fr_model_free(m);
    char *hf3 = fr_xstrdup(tmp_path("mk-llama-bf16"));
    const char *a3[] = {"mkmodel", "--out", hf3, "--arch", "llama", "--hidden", "64",
                        "--layers", "1", "--heads", "8", "--kv-heads", "2", "--head-dim", "16",
                        "--ffn", "96", "--vocab", "3100", "--dtype", "bf16", "--tokenizer",
                        fx("llama-tiny/tokenizer.json"), NULL};
    CHECK_EQ_INT(mk(a3), 0);
    m = load(hf3);
    CHECK(m != NULL);
    if (m) {
        CHECK_EQ_INT(m->hp.head_dim, 16);
        CHECK_EQ_INT(m->hp.n_vocab, 3100);
        CHECK_EQ_INT(m->hp.bos_id, 3000);
        CHECK_STR(m->bos_token_str, "<|begin_of_text|>");
        CHECK(m->chat_template && strstr(m->chat_template, "<|start_header_id|>"));
        CHECK(m->w.layers[0].wq.ne[1] == 128 && m->w.layers[0].wo.ne[0] == 128);
        const float *x = m->w.layers[0].wo.data;
        CHECK(fr_bf16_to_f32(fr_f32_to_bf16(x[3])) == x[3]);
    }
    fr_model_free(m);
    /* errors: vocab below the tokenizer size, bad options */
    const char *a4[] = {"mkmodel", "--out", hf3, "--arch", "llama", "--hidden", "64",
                        "--layers", "1", "--heads", "8", "--ffn", "96", "--vocab", "100",
                        "--tokenizer", fx("llama-tiny/tokenizer.json"), NULL};
    CHECK_EQ_INT(mk_expect(a4, 2), 2);
    const char *a5[] = {"mkmodel", "--out", hf3, "--arch", "gpt2", "--hidden", "64", NULL};
    CHECK_EQ_INT(mk_expect(a5, 2), 2);
    const char *a6[] = {"mkmodel", "--out", "x.gguf", "--arch", "qwen2", "--hidden", "48",
                        "--layers", "1", "--heads", "4", "--ffn", "96", "--vocab", "300",
                        "--gguf-type", "q8_0", NULL};
    CHECK_EQ_INT(mk_expect(a6, 2), 2);
    free(hf);
    free(hf2);
    free(hf3);
}

static void cleanup(void) {
    if (!tmp_root[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "cleanup of %s failed\n", tmp_root);
}

int main(void) {
    fr_log_level = FR_LOG_WARN; /* no "loaded ..." lines */
    int rc = t_main();
    cleanup();
    return rc;
}
