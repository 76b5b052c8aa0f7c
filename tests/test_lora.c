/* test_lora.c — LoRA adapters (model/lora.h) on the CPU decoder against HF + peft: the
 * adapters of tests/fixtures/lora (scripts/make_lora_fixtures.py, random A and B) give the last
 * logits peft gives (and the merged model's), greedy ids equal, one batch mixing two adapters and
 * the base model equals each alone, and the loader refuses what it does not take. */
#include "t.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/decoder.h"
#include "backend/kv.h"
#include "model/lora.h"

typedef struct ref {
    int32_t ids[64];
    int n_ids;
    float *lora, *merged, *base; /* (n_vocab) */
    int greedy[32], n_greedy;
    int n_vocab;
} ref;

static cJSON *g_refs;

static int floats(const cJSON *a, float **out) {
    int n = cJSON_GetArraySize(a);
    *out = calloc((size_t)n + 1, sizeof **out);
    for (int i = 0; i < n; i++) (*out)[i] = (float)cJSON_GetArrayItem(a, i)->valuedouble;
    return n;
}

/* The reference of adapter name; 0, or -1 when the file or the entry is missing. */
static int load_ref(const char *name, ref *r) {
    memset(r, 0, sizeof *r);
    if (!g_refs) {
        char p[512];
        snprintf(p, sizeof p, "%s/ref/lora.json", t_fixtures());
        size_t len = 0;
        fr_err err = {0};
        char *txt = fr_read_file(p, 16u << 20, &len, &err);
        g_refs = txt ? cJSON_ParseWithLength(txt, len) : NULL;
        free(txt);
        if (!g_refs) fprintf(stderr, "  %s: missing or not JSON\n", p);
    }
    const cJSON *a = cJSON_GetObjectItem(cJSON_GetObjectItem(g_refs, "adapters"), name);
    if (!a) return -1;
    const cJSON *ids = cJSON_GetObjectItem(a, "ids"), *g = cJSON_GetObjectItem(a, "greedy");
    r->n_ids = cJSON_GetArraySize(ids);
    if (r->n_ids < 1 || r->n_ids > 64) return -1;
    for (int i = 0; i < r->n_ids; i++) r->ids[i] = cJSON_GetArrayItem(ids, i)->valueint;
    r->n_greedy = FR_MIN(32, cJSON_GetArraySize(g));
    for (int i = 0; i < r->n_greedy; i++) r->greedy[i] = cJSON_GetArrayItem(g, i)->valueint;
    r->n_vocab = floats(cJSON_GetObjectItem(a, "lora_logits"), &r->lora);
    floats(cJSON_GetObjectItem(a, "merged_logits"), &r->merged);
    floats(cJSON_GetObjectItem(a, "base_logits"), &r->base);
    return 0;
}

static void ref_free(ref *r) {
    free(r->lora);
    free(r->merged);
    free(r->base);
}

static double rel_l2(const float *a, const float *b, int n) {
    double num = 0, den = 0;
    for (int i = 0; i < n; i++) {
        num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

typedef struct rig {
    fr_model *m;
    fr_decoder *d;
    fr_kv_pool *kv;
} rig;

static int rig_open(rig *g, const char *model) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), model);
    fr_err err = {0};
    memset(g, 0, sizeof *g);
    if (!(g->m = fr_model_load(path, &err)) || !(g->d = fr_decoder_new(g->m, 256, 128, &err))) {
        fprintf(stderr, "  %s: %s\n", path, err.msg);
        return -1;
    }
    g->kv = fr_kv_pool_new(&g->m->hp, 64, 16);
    return 0;
}

static void rig_close(rig *g) {
    fr_kv_pool_free(g->kv);
    fr_decoder_free(g->d);
    fr_model_free(g->m);
}

/* Tokens ids[0..n) of each of ns sequences in one batch (sequence k with adapter ad[k]), the last
 * token of each asking for logits: out (ns, n_vocab). 0 or -1. */
static int forward(rig *g, fr_seq **s, const fr_lora *const *ad, int ns, const int32_t *ids,
                   int n, float *out) {
    int32_t tok[256], pos[256];
    fr_seq *seqs[256];
    const fr_lora *la[256];
    uint8_t want[256];
    int k = 0;
    for (int q = 0; q < ns; q++) {
        if (fr_seq_reserve(s[q], g->kv, s[q]->n_pos + n)) return -1;
        for (int i = 0; i < n; i++, k++) {
            tok[k] = ids[i], pos[k] = s[q]->n_pos + i, seqs[k] = s[q], la[k] = ad[q];
            want[k] = i == n - 1;
        }
    }
    fr_batch b = {.n_tokens = k, .tokens = tok, .pos = pos, .seqs = seqs, .logits = want,
                  .lora = la};
    fr_err err = {0};
    if (fr_decoder_forward(g->d, g->kv, &b, out, &err)) {
        fprintf(stderr, "  forward: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static fr_lora *load_adapter(const rig *g, const char *name) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/lora/%s", t_fixtures(), name);
    fr_err err = {0};
    fr_lora *a = fr_lora_load(dir, name, &g->m->hp, &err);
    if (!a) fprintf(stderr, "  %s: %s\n", dir, err.msg);
    return a;
}

/* The adapter's last logits against peft's and the merged model's, and its greedy ids. */
static void check_against_hf(const char *model, const char *name) {
    rig g;
    ref r;
    CHECK_EQ_INT(load_ref(name, &r), 0);
    CHECK_EQ_INT(rig_open(&g, model), 0);
    fr_lora *a = g.m ? load_adapter(&g, name) : NULL;
    CHECK(a != NULL);
    if (a && r.n_vocab == g.m->hp.n_vocab) {
        const int V = r.n_vocab;
        float *lg = malloc(sizeof(float) * (size_t)V);
        fr_seq s = {0}, *sp = &s;
        const fr_lora *ad = a;
        CHECK_EQ_INT(forward(&g, &sp, &ad, 1, r.ids, r.n_ids, lg), 0);
        double e_lora = rel_l2(lg, r.lora, V), e_merged = rel_l2(lg, r.merged, V);
        double moved = rel_l2(r.base, r.lora, V);
        printf("  %s: rel L2 vs peft %.2e, vs merged %.2e (the adapter moves the logits by %.2e)\n",
               name, e_lora, e_merged, moved);
        CHECK(e_lora < 1e-4);
        CHECK(e_merged < 1e-4);
        CHECK(moved > 1e-2); /* the adapter really changes the model */
        int same = 0, tok = argmax(lg, V);
        for (int i = 0; i < r.n_greedy; i++) {
            same += tok == r.greedy[i];
            if (tok != r.greedy[i]) break;
            int32_t t = tok;
            CHECK_EQ_INT(forward(&g, &sp, &ad, 1, &t, 1, lg), 0);
            tok = argmax(lg, V);
        }
        CHECK_EQ_INT(same, r.n_greedy);
        fr_seq_release(&s, g.kv);
        free(lg);
    } else {
        CHECK(r.n_vocab > 0);
    }
    fr_lora_free(a);
    rig_close(&g);
    ref_free(&r);
}

TEST(qwen2_all_projections_match_peft) { check_against_hf("qwen2-tiny", "qwen2-tiny-all"); }
TEST(qwen2_rslora_q_v_match_peft) { check_against_hf("qwen2-tiny", "qwen2-tiny-qv"); }
TEST(llama_all_projections_match_peft) { check_against_hf("llama-tiny", "llama-tiny-all"); }

/* One batch: the base model, adapter "all" and adapter "qv" on the same prompt: each row equals
 * the same sequence run alone, bit for bit (the decoder's arithmetic does not depend on the
 * batch), and the base row equals peft's base logits. */
TEST(one_batch_mixes_adapters_and_the_base) {
    rig g;
    ref r;
    CHECK_EQ_INT(load_ref("qwen2-tiny-all", &r), 0);
    CHECK_EQ_INT(rig_open(&g, "qwen2-tiny"), 0);
    fr_lora *all = g.m ? load_adapter(&g, "qwen2-tiny-all") : NULL;
    fr_lora *qv = g.m ? load_adapter(&g, "qwen2-tiny-qv") : NULL;
    CHECK(all && qv);
    if (all && qv) {
        const int V = g.m->hp.n_vocab;
        float *mix = malloc(sizeof(float) * 3 * (size_t)V), *one = malloc(sizeof(float) * (size_t)V);
        fr_seq s[3] = {{0}}, *sp[3] = {&s[0], &s[1], &s[2]};
        const fr_lora *ad[3] = {NULL, all, qv};
        CHECK_EQ_INT(forward(&g, sp, ad, 3, r.ids, r.n_ids, mix), 0);
        for (int q = 0; q < 3; q++) {
            fr_seq t = {0}, *tp = &t;
            CHECK_EQ_INT(forward(&g, &tp, &ad[q], 1, r.ids, r.n_ids, one), 0);
            CHECK(!memcmp(one, mix + (size_t)q * V, sizeof(float) * (size_t)V));
            fr_seq_release(&t, g.kv);
        }
        CHECK(rel_l2(mix, r.base, V) < 1e-4);
        CHECK(rel_l2(mix + V, mix + 2 * (size_t)V, V) > 1e-2); /* two adapters, two answers */
        for (int q = 0; q < 3; q++) fr_seq_release(&s[q], g.kv);
        free(mix);
        free(one);
    }
    fr_lora_free(all);
    fr_lora_free(qv);
    rig_close(&g);
    ref_free(&r);
}

/* Writes dir/adapter_config.json with `cfg` and copies the fixture's tensors beside it. */
static void make_adapter(const char *dir, const char *cfg, const char *from) {
    char p[2048], q[700];
    snprintf(p, sizeof p, "mkdir -p '%s' && cp '%s/lora/%s/adapter_model.safetensors' '%s/'", dir,
             t_fixtures(), from, dir);
    CHECK_EQ_INT(system(p), 0);
    snprintf(q, sizeof q, "%s/adapter_config.json", dir);
    FILE *f = fopen(q, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(cfg, f);
        fclose(f);
    }
}

TEST(loader_refuses_with_codes) {
    rig g;
    CHECK_EQ_INT(rig_open(&g, "qwen2-tiny"), 0);
    if (!g.m) return;
    char tmp[] = "/tmp/frugal-lora-XXXXXX";
    CHECK(mkdtemp(tmp) != NULL);
    static const struct {
        const char *cfg;
        fr_err_code code;
        const char *names;
    } cases[] = {
        {"{\"r\":8,\"lora_alpha\":16,\"target_modules\":[\"q_proj\",\"k_proj\",\"v_proj\",\"o_proj\","
         "\"gate_proj\",\"up_proj\",\"down_proj\"],\"use_dora\":true}", FR_ERR_UNSUPPORTED, "use_dora"},
        {"{\"r\":8,\"target_modules\":\"all-linear\",\"bias\":\"all\"}", FR_ERR_UNSUPPORTED, "bias"},
        {"{\"r\":8,\"target_modules\":\".*proj\"}", FR_ERR_UNSUPPORTED, "target_modules"},
        {"{\"r\":8,\"target_modules\":[\"lm_head\"]}", FR_ERR_UNSUPPORTED, "lm_head"},
        {"{\"r\":65,\"target_modules\":\"all-linear\"}", FR_ERR_UNSUPPORTED, "rank 65"},
        {"{\"r\":4,\"target_modules\":\"all-linear\"}", FR_ERR_BAD_REQUEST, "shape"}, /* r 8 stored */
        {"{\"r\":8,\"target_modules\":[\"q_proj\"]}", FR_ERR_BAD_REQUEST, "target_modules"},
        {"[1, 2]", FR_ERR_BAD_REQUEST, "object"},
        {"{\"r\":8,\"peft_type\":\"IA3\",\"target_modules\":\"all-linear\"}", FR_ERR_UNSUPPORTED, "IA3"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        char dir[64];
        snprintf(dir, sizeof dir, "%s/c%zu", tmp, i);
        make_adapter(dir, cases[i].cfg, "qwen2-tiny-all");
        fr_err err = {0};
        fr_lora *a = fr_lora_load(dir, "x", &g.m->hp, &err);
        CHECK(a == NULL);
        CHECK_EQ_INT(err.code, cases[i].code);
        CHECK(strstr(err.msg, cases[i].names) != NULL);
        if (!strstr(err.msg, cases[i].names)) fprintf(stderr, "  case %zu: %s\n", i, err.msg);
        fr_lora_free(a);
    }
    fr_err err = {0};
    char none[64];
    snprintf(none, sizeof none, "%s/none", tmp);
    CHECK(fr_lora_load(none, "x", &g.m->hp, &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    /* an adapter for the other model: shapes refused */
    rig h;
    CHECK_EQ_INT(rig_open(&h, "llama-tiny"), 0);
    if (h.m) {
        fr_lora *a = load_adapter(&h, "qwen2-tiny-all");
        CHECK(a == NULL);
        fr_lora_free(a);
        rig_close(&h);
    }
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    CHECK_EQ_INT(system(rm), 0);
    rig_close(&g);
}

int main(void) {
    int rc = t_main();
    cJSON_Delete(g_refs);
    return rc;
}
