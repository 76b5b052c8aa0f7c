/* test_structured.c — constrained decoding through the serving engine on the tiny random-weight
 * Qwen2 fixture: 100 generations (5 schemas x 20 seeds, temperature 1, 32 running at once, tight
 * and loose max_tokens) all parse and validate against their schemas (tests/schema_check.h,
 * written apart from the compiler). The weights are random, so the guarantee is the grammar's
 * and the length budget's, not the model's. Also: a grammar that cannot fit max_tokens is
 * refused at submit, greedy constrained output is the same alone and in a batch, and outputs stay
 * valid through preemption and recompute.
 */
#include <cjson/cJSON.h>

#include "engine/engine.h"
#include "engine/grammar.h"
#include "model/tokenizer.h"
#include "schema_check.h"
#include "t.h"

static fr_model *g_model;
static fr_model *tiny(void) {
    if (!g_model) {
        char path[512];
        snprintf(path, sizeof path, "%s/qwen2-tiny", t_fixtures());
        fr_err err = {0};
        g_model = fr_model_load(path, &err);
        if (!g_model) fprintf(stderr, "  load: %s\n", err.msg);
    }
    return g_model;
}

static fr_engine *engine(void) {
    fr_engine_config c = fr_engine_config_default();
    c.kv_blocks = 512;
    c.step_tokens = 96;
    c.prefill_chunk = 32;
    c.max_running = 32;
    c.max_ctx = 512;
    c.warmup = false;
    fr_err err = {0};
    fr_engine *e = fr_engine_new(tiny(), &c, &err);
    if (!e) fprintf(stderr, "  engine: %s\n", err.msg);
    return e;
}

static const char *SCHEMAS[] = {
    "{\"type\":\"object\",\"properties\":{\"intent\":{\"enum\":[\"block_card\",\"balance\","
    "\"dispute\",\"other\"]},\"confidence\":{\"type\":\"number\"},\"urgent\":{\"type\":"
    "\"boolean\"}},\"required\":[\"intent\",\"urgent\"],\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":2,"
    "\"maxLength\":10},\"items\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},"
    "\"minItems\":1,\"maxItems\":4}},\"required\":[\"name\",\"items\"]}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":"
    "\"object\",\"properties\":{\"b\":{\"type\":[\"string\",\"integer\"],\"maxLength\":6}},"
    "\"required\":[\"b\"]}]},\"c\":{\"const\":\"fixed\"}},\"required\":[\"a\",\"c\"]}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":"
    "\"string\",\"maxLength\":4}},\"required\":[\"k\"]},\"maxItems\":3}",
    NULL, /* json_object */
};

static fr_grammar *grammar_of(const cJSON *schema) {
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_schema(schema, NULL, NULL, &err);
    if (!g) fprintf(stderr, "  grammar: %s\n", err.msg);
    return g;
}

TEST(hundred_random_weight_generations_validate) {
    fr_engine *e = engine();
    CHECK(e);
    if (!e) return;
    const fr_model *m = tiny();
    int32_t *ids = NULL;
    size_t n = 0;
    fr_err err = {0};
    CHECK(!fr_tokenize(m->tok, "Reply in JSON.", 14, false, &ids, &n, &err));
    enum { N = 100 };
    fr_req *reqs[N];
    cJSON *schemas[FR_ARRAY_LEN(SCHEMAS)];
    for (size_t k = 0; k < FR_ARRAY_LEN(SCHEMAS); k++)
        schemas[k] = SCHEMAS[k] ? cJSON_Parse(SCHEMAS[k]) : NULL;
    for (int i = 0; i < N; i++) {
        fr_req_params p;
        memset(&p, 0, sizeof p);
        p.prompt = ids;
        p.n_prompt = (int)n;
        p.gen = fr_gen_params_default();
        p.gen.max_tokens = i % 2 ? 200 : 60 + i % 7; /* tight budgets force early closing */
        p.sampling = fr_sampling_default();
        p.sampling.seed = 1000 + (uint64_t)i;
        p.tier = 1;
        p.grammar = grammar_of(schemas[i % FR_ARRAY_LEN(SCHEMAS)]);
        fr_admission adm;
        reqs[i] = fr_engine_submit(e, &p, &adm);
        if (!reqs[i]) {
            fprintf(stderr, "  submit %d: %s\n", i, adm.msg);
            fr_grammar_free(p.grammar);
        }
        CHECK(reqs[i]);
    }
    int valid = 0, stopped = 0;
    for (int i = 0; i < N; i++) {
        if (!reqs[i]) continue;
        fr_buf out = {0};
        fr_req_info info;
        while (!fr_req_wait(reqs[i], &out, 5.0, &info)) {
        }
        const cJSON *s = schemas[i % FR_ARRAY_LEN(SCHEMAS)];
        bool ok = sc_text_valid(out.data ? out.data : "", out.len, s);
        valid += ok;
        stopped += info.end == FR_END_STOP;
        if (!ok)
            fprintf(stderr, "  request %d (%s, %d tokens): [%.*s]\n", i, fr_end_name(info.end),
                    info.n_generated, (int)out.len, out.data ? out.data : "");
        fr_buf_free(&out);
        fr_req_release(reqs[i]);
    }
    CHECK_EQ_INT(valid, N);
    CHECK_EQ_INT(stopped, N); /* complete before max_tokens, ended by the grammar or EOS */
    for (size_t k = 0; k < FR_ARRAY_LEN(SCHEMAS); k++) cJSON_Delete(schemas[k]);
    free(ids);
    fr_engine_free(e);
}

TEST(too_long_for_max_tokens_is_refused) {
    fr_engine *e = engine();
    if (!e) {
        CHECK(0);
        return;
    }
    cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"a_long_property_name\":"
                           "{\"type\":\"string\",\"minLength\":40}},\"required\":"
                           "[\"a_long_property_name\"]}");
    int32_t ids[3] = {1, 2, 3};
    fr_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = ids;
    p.n_prompt = 3;
    p.gen = fr_gen_params_default();
    p.gen.max_tokens = 20;
    p.sampling = fr_sampling_default();
    p.grammar = grammar_of(s);
    fr_admission adm;
    fr_req *r = fr_engine_submit(e, &p, &adm);
    CHECK(!r);
    CHECK_EQ_INT(adm.verdict, FR_ADMIT_TOO_LARGE);
    CHECK(strstr(adm.msg, "max_tokens") != NULL);
    fr_grammar_free(p.grammar); /* refused: still ours */
    cJSON_Delete(s);
    fr_engine_free(e);
}

static char *run_greedy(fr_engine *e, const cJSON *schema, int n_side) {
    int32_t ids[4] = {5, 6, 7, 8};
    fr_req *side[8] = {0};
    for (int i = 0; i < n_side; i++) { /* unconstrained neighbours in the same batch */
        fr_req_params q;
        memset(&q, 0, sizeof q);
        q.prompt = ids;
        q.n_prompt = 4;
        q.gen = fr_gen_params_default();
        q.gen.max_tokens = 40;
        q.gen.ignore_eos = true;
        q.sampling = fr_sampling_default();
        q.sampling.seed = (uint64_t)i;
        side[i] = fr_engine_submit(e, &q, NULL);
    }
    fr_req_params p;
    memset(&p, 0, sizeof p);
    p.prompt = ids;
    p.n_prompt = 4;
    p.gen = fr_gen_params_default();
    p.gen.max_tokens = 120;
    p.sampling = fr_sampling_default();
    p.sampling.temperature = 0;
    p.grammar = grammar_of(schema);
    fr_req *r = fr_engine_submit(e, &p, NULL);
    fr_buf out = {0};
    fr_req_info info;
    while (r && !fr_req_wait(r, &out, 5.0, &info)) {
    }
    if (r) fr_req_release(r);
    for (int i = 0; i < n_side; i++) {
        fr_buf o = {0};
        while (side[i] && !fr_req_wait(side[i], &o, 5.0, &info)) {
        }
        fr_buf_free(&o);
        if (side[i]) fr_req_release(side[i]);
    }
    char *s = fr_xstrndup(out.data ? out.data : "", out.len);
    fr_buf_free(&out);
    return s;
}

TEST(greedy_constrained_same_alone_and_batched) {
    fr_engine *e = engine();
    if (!e) {
        CHECK(0);
        return;
    }
    cJSON *s = cJSON_Parse(SCHEMAS[1]);
    char *a = run_greedy(e, s, 0), *b = run_greedy(e, s, 6);
    CHECK_STR(a, b);
    CHECK(sc_text_valid(a, strlen(a), s));
    free(a);
    free(b);
    cJSON_Delete(s);
    fr_engine_free(e);
}

TEST(valid_through_preemption) {
    fr_engine_config c = fr_engine_config_default();
    c.kv_blocks = 24; /* 16 requests of ~100 tokens in 24 blocks of 16: constant preemption */
    c.step_tokens = 64;
    c.prefill_chunk = 16;
    c.max_running = 16;
    c.max_ctx = 256;
    c.warmup = false;
    fr_err err = {0};
    fr_engine *e = fr_engine_new(tiny(), &c, &err);
    CHECK(e);
    if (!e) return;
    cJSON *s = cJSON_Parse(SCHEMAS[1]);
    int32_t ids[6] = {11, 12, 13, 14, 15, 16};
    fr_req *r[16];
    for (int i = 0; i < 16; i++) {
        fr_req_params p;
        memset(&p, 0, sizeof p);
        p.prompt = ids;
        p.n_prompt = 6;
        p.gen = fr_gen_params_default();
        p.gen.max_tokens = 90;
        p.sampling = fr_sampling_default();
        p.sampling.seed = 77 + (uint64_t)i;
        p.tier = i % 3;
        p.grammar = grammar_of(s);
        r[i] = fr_engine_submit(e, &p, NULL);
        if (!r[i]) fr_grammar_free(p.grammar);
    }
    int valid = 0;
    for (int i = 0; i < 16; i++) {
        fr_buf out = {0};
        fr_req_info info;
        while (r[i] && !fr_req_wait(r[i], &out, 5.0, &info)) {
        }
        valid += r[i] && sc_text_valid(out.data ? out.data : "", out.len, s);
        fr_buf_free(&out);
        if (r[i]) fr_req_release(r[i]);
    }
    fr_engine_stats st;
    fr_engine_stats_get(e, &st);
    uint64_t pre = st.preempted[0] + st.preempted[1] + st.preempted[2];
    CHECK(pre > 0); /* the test is about preemption: it must have happened */
    CHECK_EQ_INT(valid, 16);
    cJSON_Delete(s);
    fr_engine_free(e);
}

int main(void) {
    int rc = t_main();
    fr_model_free(g_model);
    return rc;
}
