/* test_grammar.c — the JSON Schema compiler and matcher (engine/grammar.h) and the token masks
 * (engine/tokmask.h).
 *
 *   - texts the schema accepts / refuses, byte by byte;
 *   - unsupported keywords and hostile schemas are refused with the right code, naming the keyword;
 *   - the cached mask equals the brute-force mask (every token's bytes through the whole state) at
 *     every step of random walks over the qwen2-tiny vocabulary (4,005 tokens), for several schemas;
 *   - random walks that respect the length budget (fr_tokmask_need_after) always end complete
 *     within it, and the text validates (tests/schema_check.h, written apart from the compiler).
 */
#include <cjson/cJSON.h>

#include "engine/grammar.h"
#include "engine/tokmask.h"
#include "model/tokenizer.h"
#include "schema_check.h"
#include "t.h"

static fr_grammar *compile(const char *schema) {
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_text(schema, strlen(schema), &err);
    if (!g) fprintf(stderr, "  compile failed: %s\n", err.msg);
    return g;
}

/* the whole text is accepted and may end there */
static bool accepts(const fr_grammar *g, const char *text) {
    static fr_gstate st, tmp[2];
    fr_gstate_init(g, &st);
    return fr_gstate_feed_bytes(g, &st, text, strlen(text), tmp) && fr_gstate_can_finish(g, &st);
}

static const char *PERSON =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":8},\"age\":{\"type\":\"integer\"},\"tags\":{\"type\":\"array\",\"items\":"
    "{\"enum\":[\"a\",\"b\",7,null]},\"minItems\":1,\"maxItems\":3},\"ok\":{\"type\":\"boolean\"}},"
    "\"required\":[\"name\",\"tags\"],\"additionalProperties\":false}";

TEST(accepts_and_refuses_texts) {
    fr_grammar *g = compile(PERSON);
    CHECK(g);
    if (!g) return;
    CHECK(accepts(g, "{\"name\":\"bo\",\"tags\":[\"a\"]}"));
    CHECK(accepts(g, "{\"name\": \"bo\", \"age\": -12, \"tags\": [7, null], \"ok\": true}"));
    CHECK(accepts(g, "{\"name\":\"\\u00e9\\n\",\"tags\":[\"b\",\"b\",\"a\"]}"));
    CHECK(!accepts(g, "{\"name\":\"\",\"tags\":[\"a\"]}"));          /* minLength */
    CHECK(!accepts(g, "{\"name\":\"123456789\",\"tags\":[\"a\"]}")); /* maxLength */
    CHECK(!accepts(g, "{\"name\":\"x\",\"tags\":[]}"));              /* minItems */
    CHECK(!accepts(g, "{\"name\":\"x\",\"tags\":[7,7,7,7]}"));       /* maxItems */
    CHECK(!accepts(g, "{\"tags\":[\"a\"]}"));                        /* required */
    CHECK(!accepts(g, "{\"name\":\"x\",\"tags\":[\"c\"]}"));         /* enum */
    CHECK(!accepts(g, "{\"name\":\"x\",\"age\":1.5,\"tags\":[7]}")); /* integer */
    CHECK(!accepts(g, "{\"name\":\"x\",\"tags\":[7],\"zz\":1}"));    /* additional */
    CHECK(!accepts(g, "{\"name\":\"x\",\"tags\":[7]"));              /* incomplete */
    CHECK(!accepts(g, "{\"name\":\"\\ud800\",\"tags\":[7]}"));       /* lone surrogate */
    CHECK(!accepts(g, "{\"name\":\"\xc3\",\"tags\":[7]}"));          /* broken UTF-8 */
    CHECK(accepts(g, "{\"name\":\"\xc3\xa9\xe2\x82\xac\",\"tags\":[7]}"));
    fr_grammar_free(g);
}

TEST(numbers_anyof_and_any) {
    fr_grammar *g = compile("{\"anyOf\":[{\"type\":\"number\"},{\"type\":\"null\"},"
                            "{\"type\":\"array\",\"items\":{\"type\":\"string\"}}]}");
    CHECK(g);
    if (!g) return;
    CHECK(accepts(g, "0") && accepts(g, "-0.5e+10") && accepts(g, "12.25") && accepts(g, "null"));
    CHECK(accepts(g, "[]") && accepts(g, "[\"x\", \"y\"]"));
    CHECK(!accepts(g, "01") && !accepts(g, "1.") && !accepts(g, "-") && !accepts(g, "[1]"));
    fr_grammar_free(g);
    fr_err err = {0};
    g = fr_grammar_from_schema(NULL, NULL, NULL, &err); /* json_object */
    CHECK(g);
    if (!g) return;
    CHECK(accepts(g, "{}") && accepts(g, "{\"a\": [1, {\"b\": null}], \"c\": \"d\"}"));
    CHECK(!accepts(g, "[]") && !accepts(g, "1") && !accepts(g, "{\"a\"}"));
    fr_grammar_free(g);
}

TEST(prefix_suffix_wrapper) {
    cJSON *s = cJSON_Parse("{\"type\":\"object\",\"properties\":{\"name\":{\"const\":\"f\"}},"
                           "\"required\":[\"name\"]}");
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_schema(s, "<tool_call>\n", "\n</tool_call>", &err);
    CHECK(g);
    if (g) {
        CHECK(accepts(g, "<tool_call>\n{\"name\":\"f\"}\n</tool_call>"));
        CHECK(!accepts(g, "<tool_call>\n{\"name\":\"f\"}"));
        static fr_gstate st, tmp[2];
        fr_gstate_init(g, &st);
        const char *t = "<tool_call>\n{\"name\":\"f\"}\n</tool_call>";
        CHECK(fr_gstate_feed_bytes(g, &st, t, strlen(t), tmp) && fr_gstate_terminal(g, &st));
        fr_grammar_free(g);
    }
    cJSON_Delete(s);
}

static void refused(const char *schema, fr_err_code code, const char *word) {
    fr_err err = {0};
    fr_grammar *g = fr_grammar_from_text(schema, strlen(schema), &err);
    CHECK(!g);
    fr_grammar_free(g);
    CHECK_EQ_INT(err.code, code);
    if (word && !strstr(err.msg, word)) {
        fprintf(stderr, "  message [%s] lacks [%s]\n", err.msg, word);
        CHECK(0);
    }
}

TEST(refusals_name_the_keyword) {
    refused("{\"type\":\"string\",\"pattern\":\"^a\"}", FR_ERR_UNSUPPORTED, "pattern");
    refused("{\"type\":\"string\",\"format\":\"date\"}", FR_ERR_UNSUPPORTED, "format");
    refused("{\"$ref\":\"#\"}", FR_ERR_UNSUPPORTED, "$ref");
    refused("{\"oneOf\":[{}]}", FR_ERR_UNSUPPORTED, "oneOf");
    refused("{\"type\":\"integer\",\"minimum\":3}", FR_ERR_UNSUPPORTED, "minimum");
    refused("{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\",\"pattern\":\"x\"}}}",
            FR_ERR_UNSUPPORTED, "properties.a");
    refused("{\"type\":\"object\",\"required\":[\"x\"]}", FR_ERR_UNSUPPORTED, "required");
    refused("{\"enum\":[]}", FR_ERR_BAD_REQUEST, "enum");
    refused("{\"type\":\"string\",\"minLength\":5,\"maxLength\":2}", FR_ERR_BAD_REQUEST, "minLength");
    refused("{\"type\":\"strin\"}", FR_ERR_UNSUPPORTED, "strin");
    refused("[1]", FR_ERR_BAD_REQUEST, NULL);
    refused("{\"items\":[{}]}", FR_ERR_UNSUPPORTED, "items");
    /* a name with a control byte (fuzz_schema's find): the message stays one printable line */
    refused("{\"addition\\nal\\u00e9\":false}", FR_ERR_UNSUPPORTED, "addition?al??");
}

TEST(hostile_schemas_are_bounded) {
    char deep[4096] = "";
    for (int i = 0; i < 40; i++) strcat(deep, "{\"type\":\"array\",\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < 40; i++) strcat(deep, "}");
    refused(deep, FR_ERR_TOO_LARGE, "nests");
    size_t cap = 2000 * 8 + 64;
    char *big = malloc(cap);
    strcpy(big, "{\"enum\":[");
    for (int i = 0; i < 2000; i++) sprintf(big + strlen(big), "%s%d", i ? "," : "", i);
    strcat(big, "]}");
    refused(big, FR_ERR_TOO_LARGE, "enum");
    free(big);
    /* many wide anyOfs: the node limit */
    size_t cap2 = 1 << 20;
    char *wide = malloc(cap2);
    strcpy(wide, "{\"type\":\"object\",\"properties\":{");
    for (int i = 0; i < 3000; i++)
        sprintf(wide + strlen(wide), "%s\"p%d\":{\"type\":\"boolean\"}", i ? "," : "", i);
    strcat(wide, "}}");
    refused(wide, FR_ERR_TOO_LARGE, NULL);
    free(wide);
}

/* --- masks over a real vocabulary --- */

static fr_tokenizer *tok;
static fr_tokvocab *voc;

static bool load_vocab(void) {
    if (voc) return true;
    char path[512];
    snprintf(path, sizeof path, "%s/qwen2-tiny/tokenizer.json", t_fixtures());
    fr_err err = {0};
    tok = fr_tokenizer_load_json(path, &err);
    if (!tok) {
        fprintf(stderr, "  %s\n", err.msg);
        return false;
    }
    int eos = fr_tokenizer_find(tok, "<|im_end|>");
    voc = fr_tokvocab_new(tok, fr_tokenizer_n_vocab(tok), &eos, 1);
    return true;
}

static uint64_t rng = 88172645463325252ull;
static uint32_t next_rand(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}

/* Random walk of at most budget tokens: at each step the cached mask must equal the brute-force
 * one; a random allowed token whose completion still fits is taken. Returns whether the walk
 * ended complete; the text in out. */
static bool walk(fr_grammar *g, int budget, fr_buf *out, int *mismatch) {
    int words = fr_tokmask_words(voc), n = fr_tokvocab_n(voc);
    uint32_t *a = malloc(sizeof(uint32_t) * (size_t)words), *b = malloc(sizeof(uint32_t) * (size_t)words);
    int32_t *cand = malloc(sizeof(int32_t) * (size_t)n);
    fr_tokmask *m = fr_tokmask_new(voc, g);
    bool done = false;
    for (int step = 0; step < budget && !done; step++) {
        fr_tokmask_fill(m, a);
        fr_tokmask_fill_ref(m, b);
        if (memcmp(a, b, sizeof(uint32_t) * (size_t)words)) (*mismatch)++;
        int nc = 0;
        for (int id = 0; id < n; id++)
            if (a[id >> 5] >> (id & 31) & 1) {
                int need = fr_tokmask_need_after(m, id);
                if (need >= 0 && need <= budget - step - 1) cand[nc++] = id;
            }
        if (nc == 0) break;
        int id = cand[next_rand() % (uint32_t)nc];
        size_t l;
        const char *s = fr_token_data(tok, id, &l);
        if (fr_tokenizer_is_special(tok, id)) {
            done = true;
            break;
        }
        CHECK(fr_tokmask_accept(m, id));
        fr_buf_append(out, s, l);
        done = fr_tokmask_terminal(m);
    }
    if (!done) { /* budget spent: complete iff the state may end */
        fr_tokmask_fill(m, a);
        int eos = fr_tokenizer_find(tok, "<|im_end|>");
        done = a[eos >> 5] >> (eos & 31) & 1;
    }
    fr_tokmask_free(m);
    free(a);
    free(b);
    free(cand);
    return done;
}

static const char *WALK_SCHEMAS[] = {
    NULL, /* PERSON */
    "{\"type\":\"object\",\"properties\":{\"intent\":{\"enum\":[\"block_card\",\"balance\","
    "\"dispute\"]},\"amount\":{\"type\":\"number\"},\"items\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},\"note\":{\"type\":"
    "[\"string\",\"null\"],\"maxLength\":12}},\"required\":[\"id\"]},\"maxItems\":2}},"
    "\"required\":[\"intent\",\"items\"]}",
    "{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1}},\"required\":[\"a\"]},"
    "{\"type\":\"object\",\"properties\":{\"ab\":{\"type\":\"string\",\"maxLength\":5}},"
    "\"required\":[\"ab\"]}]}",
    "{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}",
    "{\"type\":\"object\"}",
};

TEST(mask_equals_brute_force_and_walks_validate) {
    if (!load_vocab()) {
        CHECK(0);
        return;
    }
    int mismatch = 0, complete = 0, valid = 0, walks = 0;
    for (size_t k = 0; k < FR_ARRAY_LEN(WALK_SCHEMAS); k++) {
        const char *src = WALK_SCHEMAS[k] ? WALK_SCHEMAS[k] : PERSON;
        cJSON *schema = cJSON_Parse(src);
        fr_grammar *g = compile(src);
        CHECK(g);
        for (int r = 0; g && r < 6; r++) {
            fr_buf out = {0};
            fr_gstate st0;
            fr_gstate_init(g, &st0);
            int budget = fr_gstate_need(g, &st0) + r * 10; /* r = 0: exactly the shortest */
            bool done = walk(g, budget, &out, &mismatch);
            walks++;
            complete += done;
            bool ok = sc_text_valid(out.data ? out.data : "", out.len, schema);
            valid += ok;
            if (!ok || !done)
                fprintf(stderr, "  schema %zu budget %d: %s [%.*s]\n", k, budget,
                        done ? "invalid" : "incomplete", (int)out.len, out.data ? out.data : "");
            fr_buf_free(&out);
        }
        fr_grammar_free(g);
        cJSON_Delete(schema);
    }
    CHECK_EQ_INT(mismatch, 0);
    CHECK_EQ_INT(complete, walks);
    CHECK_EQ_INT(valid, walks);
}

/* A vocabulary of JSON-ish pieces (quotes, escapes, digits, brackets, partial and whole UTF-8,
 * spaces), stored byte-level as GGUF vocabularies are: the fast paths' corner cases. */
static int byte_cp(int b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    return 256 + n;
}

static fr_tokenizer *tricky_vocab(int n_tokens) {
    static const char *pieces[] = {"\"", "{", "}", "[", "]", ",", ":", " ", "\\", "n", "u", "0",
                                   "1", "7", ".", "-", "e", "+", "a", "b", "k", "true", "null",
                                   "\xc3", "\xa9", "\xc3\xa9", "\xe2\x82\xac", "\n", "d8", "00"};
    char **toks = calloc((size_t)n_tokens + 1, sizeof *toks);
    int n = 0;
    for (int b = 0; b < 256; b++) {
        char o[4];
        int cp = byte_cp(b);
        if (cp < 0x80) o[0] = (char)cp, o[1] = 0;
        else o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3F)), o[2] = 0;
        toks[n++] = strdup(o);
    }
    while (n < n_tokens - 1) {
        char raw[64] = "", st[160];
        int parts = 1 + (int)(next_rand() % 4);
        for (int i = 0; i < parts; i++) strcat(raw, pieces[next_rand() % FR_ARRAY_LEN(pieces)]);
        size_t k = 0;
        for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
            int cp = byte_cp(*p);
            if (cp < 0x80) st[k++] = (char)cp;
            else st[k++] = (char)(0xC0 | cp >> 6), st[k++] = (char)(0x80 | (cp & 0x3F));
        }
        st[k] = 0;
        bool dup = false;
        for (int i = 256; i < n && !dup; i++) dup = !strcmp(toks[i], st);
        if (!dup) toks[n++] = strdup(st);
    }
    toks[n++] = strdup("<|im_end|>");
    int32_t *types = calloc((size_t)n, sizeof *types);
    for (int i = 0; i < n; i++) types[i] = i == n - 1 ? 3 : 1;
    fr_vocab_spec spec = {.n_tokens = n, .tokens = (const char *const *)toks, .token_types = types,
                          .pre = "qwen2", .bos_id = -1, .eos_id = n - 1, .pad_id = -1};
    fr_err err = {0};
    fr_tokenizer *t = fr_tokenizer_from_vocab(&spec, &err);
    if (!t) fprintf(stderr, "  tricky vocab: %s\n", err.msg);
    for (int i = 0; i < n; i++) free(toks[i]);
    free(toks);
    free(types);
    return t;
}

TEST(mask_equals_brute_force_on_tricky_vocab) {
    if (!load_vocab()) {
        CHECK(0);
        return;
    }
    fr_tokenizer *saved_tok = tok;
    fr_tokvocab *saved_voc = voc;
    tok = tricky_vocab(3000);
    CHECK(tok);
    if (!tok) {
        tok = saved_tok;
        return;
    }
    int eos = fr_tokenizer_n_vocab(tok) - 1;
    voc = fr_tokvocab_new(tok, fr_tokenizer_n_vocab(tok), &eos, 1);
    int mismatch = 0, complete = 0, valid = 0, walks = 0;
    for (size_t k = 0; k < FR_ARRAY_LEN(WALK_SCHEMAS); k++) {
        const char *src = WALK_SCHEMAS[k] ? WALK_SCHEMAS[k] : PERSON;
        cJSON *schema = cJSON_Parse(src);
        fr_grammar *g = compile(src);
        for (int r = 0; g && r < 6; r++) {
            fr_buf out = {0};
            fr_gstate st0;
            fr_gstate_init(g, &st0);
            bool done = walk(g, fr_gstate_need(g, &st0) + r * 10, &out, &mismatch);
            walks++;
            complete += done;
            valid += sc_text_valid(out.data ? out.data : "", out.len, schema);
            fr_buf_free(&out);
        }
        fr_grammar_free(g);
        cJSON_Delete(schema);
    }
    CHECK_EQ_INT(mismatch, 0);
    CHECK_EQ_INT(complete, walks);
    CHECK_EQ_INT(valid, walks);
    fr_tokvocab_free(voc);
    fr_tokenizer_free(tok);
    tok = saved_tok;
    voc = saved_voc;
}

TEST(apply_mask_in_sampler_terms) {
    if (!load_vocab()) {
        CHECK(0);
        return;
    }
    fr_grammar *g = compile("{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"boolean\"}},"
                            "\"required\":[\"k\"]}");
    fr_tokmask *m = fr_tokmask_new(voc, g);
    int words = fr_tokmask_words(voc);
    uint32_t *a = calloc((size_t)words, sizeof(uint32_t));
    fr_tokmask_fill(m, a);
    /* at the start only tokens that begin "{\"k\":" (a prefix of it, or it and more) */
    for (int id = 0; id < fr_tokvocab_n(voc); id++) {
        if (!(a[id >> 5] >> (id & 31) & 1)) continue;
        size_t l;
        const char *s = fr_token_data(tok, id, &l);
        const char *want = "{\"k\":";
        size_t c = l < 5 ? l : 5;
        CHECK(!memcmp(s, want, c));
    }
    long hits, misses;
    fr_tokmask_fill(m, a);
    fr_tokmask_stats(m, &hits, &misses);
    CHECK(hits >= 1); /* the second fill of the same state is cached */
    free(a);
    fr_tokmask_free(m);
    fr_grammar_free(g);
}

int main(void) {
    int rc = t_main();
    fr_tokvocab_free(voc);
    fr_tokenizer_free(tok);
    return rc;
}
