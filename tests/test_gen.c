/* test_gen.c — the generation state (src/engine/gen.c): text release, stop strings held back
 * across tokens, whole UTF-8 characters, EOS and max tokens; and the public C API. */
#include "t.h"

#include <cjson/cJSON.h>

#include "engine/gen.h"
#include "frugal.h"
#include "model/model.h"
#include "model/tokenizer.h"

static fr_model *load(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", t_fixtures(), name);
    fr_err e = {0};
    fr_model *m = fr_model_load(p, &e);
    if (!m) fprintf(stderr, "  load %s: %s\n", p, e.msg);
    return m;
}

/* Pushes the ids of `text` through a generator; returns the concatenated deltas (malloc'd). */
static char *run(fr_model *m, const char *text, fr_gen_params *gp, fr_finish *fin, bool *all_valid) {
    int32_t *ids = NULL;
    size_t n = 0;
    fr_err e;
    CHECK(fr_tokenize(m->tok, text, strlen(text), false, &ids, &n, &e) == 0);
    fr_gen g;
    fr_gen_init(&g, m, gp);
    fr_buf out = {0}, delta = {0};
    *fin = FR_FINISH_NONE;
    *all_valid = true;
    for (size_t i = 0; i < n && *fin == FR_FINISH_NONE; i++) {
        delta.len = 0;
        *fin = fr_gen_push(&g, ids[i], &delta);
        if (!fr_utf8_valid(delta.data ? delta.data : "", delta.len)) *all_valid = false;
        fr_buf_append(&out, delta.data ? delta.data : "", delta.len);
    }
    CHECK_STR(fr_buf_cstr(&out), fr_buf_cstr(&g.text));
    fr_gen_free(&g);
    fr_buf_free(&delta);
    free(ids);
    return fr_buf_cstr(&out);
}

TEST(release_all_text_at_max_tokens) {
    fr_model *m = load("qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    const char *text = "Hello world! How are you today? \xe6\x88\x91\xe7\x9a\x84\xe9\x93\xb6\xe8\xa1\x8c\xe5\x8d\xa1 \xf0\x9f\x98\x80 done";
    int32_t *ids;
    size_t n;
    fr_err e;
    fr_tokenize(m->tok, text, strlen(text), false, &ids, &n, &e);
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = (int)n;
    fr_finish fin;
    bool valid;
    char *out = run(m, text, &gp, &fin, &valid);
    CHECK_STR(out, text);
    CHECK_EQ_INT(fin, FR_FINISH_LENGTH);
    CHECK(valid); /* every delta is whole UTF-8 characters */
    free(out);
    free(ids);
    fr_model_free(m);
}

TEST(stop_strings_cut_before_the_match_even_across_tokens) {
    fr_model *m = load("qwen2-tiny");
    if (!m) { CHECK(m != NULL); return; }
    const char *text = "Hello world! How are you today?";
    const char *stops[] = {"How", "ld! H", "o", "today?", "not present"};
    const char *want[] = {"Hello world! ", "Hello wor", "Hell", "Hello world! How are you ", NULL};
    for (int i = 0; i < 5; i++) {
        fr_gen_params gp = fr_gen_params_default();
        gp.max_tokens = 1000;
        gp.stop[0] = stops[i];
        gp.n_stop = 1;
        fr_finish fin;
        bool valid;
        char *out = run(m, text, &gp, &fin, &valid);
        if (want[i]) {
            CHECK_STR(out, want[i]);
            CHECK_EQ_INT(fin, FR_FINISH_STOP);
        } else {
            /* nothing matched and the tokens ran out: all text except a held-back prefix */
            CHECK(strncmp(out, text, strlen(out)) == 0);
            CHECK_EQ_INT(fin, FR_FINISH_NONE);
        }
        free(out);
    }
    fr_model_free(m);
}

TEST(eos_ends_without_text_unless_ignored) {
    fr_model *m = load("qwen2-tiny");
    if (!m) { CHECK(m != NULL); return; }
    int eos = m->hp.eos_id;
    CHECK(eos >= 0);
    CHECK(fr_gen_is_eos(m, eos));
    CHECK(!fr_gen_is_eos(m, 5));
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = 10;
    fr_gen g;
    fr_gen_init(&g, m, &gp);
    fr_buf d = {0};
    int a = fr_tokenizer_find(m->tok, "a");
    CHECK(a >= 0);
    CHECK_EQ_INT(fr_gen_push(&g, a, &d), FR_FINISH_NONE);
    CHECK_EQ_INT(fr_gen_push(&g, eos, &d), FR_FINISH_STOP);
    CHECK_STR(fr_buf_cstr(&d), "a");
    fr_gen_free(&g);
    gp.ignore_eos = true;
    gp.max_tokens = 2;
    fr_gen_init(&g, m, &gp);
    d.len = 0;
    CHECK_EQ_INT(fr_gen_push(&g, eos, &d), FR_FINISH_NONE);
    CHECK_EQ_INT(fr_gen_push(&g, a, &d), FR_FINISH_LENGTH);
    fr_gen_free(&g);
    fr_buf_free(&d);
    fr_model_free(m);
}

static void collect(const char *piece, size_t len, void *user) { fr_buf_append(user, piece, len); }

/* ---- the public API (include/frugal.h) ---- */

static frugal_model *api_load(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), name);
    frugal_error err;
    frugal_model *m = frugal_model_load(path, frugal_model_default_params(), &err);
    if (!m) fprintf(stderr, "  load %s: %s\n", path, err.message);
    return m;
}

static cJSON *api_ref(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/ref/%s.json", t_fixtures(), name);
    fr_err e;
    char *s = fr_read_file(p, 64u << 20, NULL, &e);
    if (!s) fprintf(stderr, "  %s\n", e.msg);
    cJSON *j = s ? cJSON_Parse(s) : NULL;
    free(s);
    return j;
}

static bool ids_equal(const int32_t *ids, size_t n, const cJSON *want) {
    if (!cJSON_IsArray(want) || (size_t)cJSON_GetArraySize(want) != n) return false;
    for (size_t i = 0; i < n; i++)
        if (cJSON_GetArrayItem(want, (int)i)->valueint != ids[i]) return false;
    return true;
}

TEST(api_default_params_are_the_documented_ones) {
    frugal_generate_params g = frugal_generate_default_params();
    CHECK_EQ_INT(g.max_tokens, 128);
    CHECK_NEAR(g.temperature, 0.8, 1e-6);
    CHECK_EQ_INT(g.top_k, 40);
    CHECK_NEAR(g.top_p, 0.95, 1e-6);
    CHECK_NEAR(g.min_p, 0.05, 1e-6);
    CHECK(g.seed == 0 && g.stop[0] == NULL && g.ignore_eos == 0 && g.on_text == NULL);
    frugal_context_params c = frugal_context_default_params();
    CHECK_STR(c.device, "cpu");
    CHECK(c.weights == NULL && c.kv_cache == NULL);
    CHECK(frugal_model_default_params().quant == NULL);
    CHECK_STR(frugal_status_str(FRUGAL_ERR_UNSUPPORTED), "unsupported");
}

/* The device: "cpu" works; a CUDA device in this (CPU-only) test binary is UNSUPPORTED; a name
 * that is no device, or a setting the CPU does not have, is an error with its code. */
TEST(api_device_selection_answers_with_codes) {
    frugal_model *m = api_load("qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    frugal_error err;
    frugal_context_params cp = frugal_context_default_params();
    frugal_context *ctx = frugal_context_new(m, cp, &err);
    CHECK(ctx != NULL);
    CHECK_EQ_INT(err.status, FRUGAL_OK);
    frugal_context_free(ctx);
    cp.device = "cuda:0";
    CHECK(frugal_context_new(m, cp, &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_UNSUPPORTED);
    CHECK(strstr(err.message, "cuda:0") != NULL);
    CHECK_EQ_INT(frugal_context_params_check(&cp, &err), FRUGAL_ERR_UNSUPPORTED);
    const char *bad[] = {"gpu", "cuda:", "cuda:x", "cuda:-1", "cpu0", "CUDA"};
    for (int i = 0; i < 6; i++) {
        cp.device = bad[i];
        frugal_context *c = frugal_context_new(m, cp, &err);
        if (c) fprintf(stderr, "  device '%s' accepted\n", bad[i]);
        CHECK(c == NULL);
        CHECK_EQ_INT(err.status, FRUGAL_ERR_INVALID_ARGUMENT);
        frugal_context_free(c);
    }
    cp = frugal_context_default_params();
    cp.weights = "int8";
    CHECK(frugal_context_new(m, cp, &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_UNSUPPORTED);
    cp.weights = "int3";
    CHECK(frugal_context_new(m, cp, &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_INVALID_ARGUMENT);
    cp = frugal_context_default_params();
    cp.kv_cache = "int8";
    CHECK(frugal_context_new(m, cp, &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_UNSUPPORTED);
    frugal_model_free(m);
}

/* Greedy generation through the API on the CPU equals HF transformers' greedy continuation
 * (tests/fixtures/ref), and the streamed pieces are the result's text. */
TEST(api_generates_hf_greedy_and_streams) {
    frugal_model *m = api_load("qwen2-tiny");
    cJSON *r = api_ref("qwen2-tiny");
    CHECK(m != NULL && r != NULL);
    if (!m || !r) { frugal_model_free(m); cJSON_Delete(r); return; }
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "prompts"), 0);
    frugal_error err;
    int32_t *ids;
    size_t n;
    CHECK_EQ_INT(frugal_tokenize(m, cJSON_GetObjectItem(p, "text")->valuestring, 1, &ids, &n, &err),
                 FRUGAL_OK);
    CHECK(ids_equal(ids, n, cJSON_GetObjectItem(p, "ids")));
    frugal_context *ctx = frugal_context_new(m, frugal_context_default_params(), &err);
    CHECK(ctx != NULL);
    frugal_generate_params gp = frugal_generate_default_params();
    gp.max_tokens = 24;
    gp.temperature = 0;
    gp.ignore_eos = 1;
    fr_buf streamed = {0};
    gp.on_text = collect;
    gp.user_data = &streamed;
    frugal_result res;
    CHECK_EQ_INT(frugal_generate(ctx, ids, n, &gp, &res, &err), FRUGAL_OK);
    CHECK(ids_equal(res.ids, (size_t)res.n_ids, cJSON_GetObjectItem(p, "greedy")));
    CHECK_EQ_INT(res.finish, FRUGAL_FINISH_LENGTH);
    CHECK(res.text != NULL);
    CHECK_STR(fr_buf_cstr(&streamed), res.text ? res.text : "(null)");
    frugal_result_free(&res);
    CHECK(res.ids == NULL && res.text == NULL);
    /* errors with their codes */
    CHECK_EQ_INT(frugal_generate(ctx, ids, 0, &gp, &res, &err), FRUGAL_ERR_INVALID_ARGUMENT);
    gp.max_tokens = 1 << 30;
    CHECK_EQ_INT(frugal_generate(ctx, ids, n, &gp, &res, &err), FRUGAL_ERR_TOO_LARGE);
    gp.max_tokens = 4;
    gp.top_p = 2;
    CHECK_EQ_INT(frugal_generate(ctx, ids, n, &gp, &res, &err), FRUGAL_ERR_INVALID_ARGUMENT);
    int32_t bad_id = 1 << 30;
    gp.top_p = 1;
    CHECK_EQ_INT(frugal_generate(ctx, &bad_id, 1, &gp, &res, &err), FRUGAL_ERR_INVALID_ARGUMENT);
    frugal_free(ids);
    fr_buf_free(&streamed);
    frugal_context_free(ctx);
    frugal_model_free(m);
    cJSON_Delete(r);
}

/* BOS has one owner: the rendered chat holds the template's BOS, so frugal_tokenize_chat gives
 * llama-tiny's ids with exactly one <|begin_of_text|> (3000), as HF's apply_chat_template
 * (tokenize=True); Tokenizer.encode of the same text (add_special = 1) doubles it, as in HF.
 * qwen2-tiny has no BOS: its chat ids start with <|im_start|>. */
TEST(api_chat_ids_have_exactly_one_bos) {
    const char *msgs = "[{\"role\":\"system\",\"content\":\"You are a bank assistant.\"},"
                       "{\"role\":\"user\",\"content\":\"Hello\"}]";
    frugal_model *m = api_load("llama-tiny");
    cJSON *r = api_ref("llama-tiny");
    CHECK(m != NULL && r != NULL);
    if (!m || !r) { frugal_model_free(m); cJSON_Delete(r); return; }
    int bos = cJSON_GetObjectItem(r, "bos")->valueint;
    CHECK_EQ_INT(bos, 3000);
    frugal_error err;
    char *text = frugal_render_chat(m, msgs, NULL, &err);
    CHECK(text != NULL);
    CHECK_STR(text, cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "chat"), 1),
                                        "rendered")->valuestring);
    int32_t *ids, *ids2, *enc;
    size_t n, n2, nenc;
    CHECK_EQ_INT(frugal_tokenize_chat(m, msgs, NULL, &ids, &n, &err), FRUGAL_OK);
    CHECK(n > 5);
    if (n > 5) {
        CHECK_EQ_INT(ids[0], bos);
        CHECK(ids[1] != bos);
        int n_bos = 0;
        for (size_t i = 0; i < n; i++) n_bos += ids[i] == bos;
        CHECK_EQ_INT(n_bos, 1);
    }
    CHECK_EQ_INT(frugal_tokenize(m, text, 0, &ids2, &n2, &err), FRUGAL_OK);
    CHECK(n2 == n && !memcmp(ids, ids2, n * sizeof *ids));
    CHECK_EQ_INT(frugal_tokenize(m, text, 1, &enc, &nenc, &err), FRUGAL_OK);
    CHECK(nenc == n + 1 && enc[0] == bos && enc[1] == bos); /* HF encode parity */
    frugal_free(ids), frugal_free(ids2), frugal_free(enc), frugal_free(text);
    frugal_model_free(m);
    cJSON_Delete(r);

    m = api_load("qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    CHECK_EQ_INT(frugal_tokenize_chat(m, msgs, NULL, &ids, &n, &err), FRUGAL_OK);
    int32_t *im;
    size_t nim;
    CHECK_EQ_INT(frugal_tokenize(m, "<|im_start|>", 0, &im, &nim, &err), FRUGAL_OK);
    CHECK(n > 2 && nim == 1 && ids[0] == im[0]);
    CHECK_EQ_INT(frugal_tokenize(m, "Hello", 1, &enc, &nenc, &err), FRUGAL_OK);
    CHECK(nenc == 1); /* no BOS to add */
    frugal_free(ids), frugal_free(im), frugal_free(enc);
    frugal_model_free(m);
}

TEST(api_errors_carry_codes) {
    frugal_error err;
    CHECK(frugal_model_load("/nonexistent", frugal_model_default_params(), &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_NOT_FOUND);
    CHECK(strstr(err.message, "/nonexistent") != NULL);
    frugal_model_params mp = frugal_model_default_params();
    mp.quant = "q3";
    char path[512];
    snprintf(path, sizeof path, "%s/qwen2-tiny", t_fixtures());
    CHECK(frugal_model_load(path, mp, &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_INVALID_ARGUMENT);
    /* a folder without its tokenizer: the loader's FR_ERR_NOT_FOUND comes through */
    snprintf(path, sizeof path, "%s/ledger", t_fixtures());
    CHECK(frugal_model_load(path, frugal_model_default_params(), &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_NOT_FOUND);
    /* a file that is no model */
    snprintf(path, sizeof path, "%s/corpus-en.txt", t_fixtures());
    CHECK(frugal_model_load(path, frugal_model_default_params(), &err) == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_INVALID_ARGUMENT);
    frugal_model *m = api_load("qwen2-tiny");
    CHECK(m != NULL);
    if (!m) return;
    char *s = frugal_render_chat(m, "{not json", NULL, &err);
    CHECK(s == NULL);
    CHECK_EQ_INT(err.status, FRUGAL_ERR_INVALID_ARGUMENT);
    s = frugal_render_chat(m, "[{\"role\": 1, \"content\": \"x\"}]", NULL, &err);
    CHECK(s == NULL && err.status == FRUGAL_ERR_INVALID_ARGUMENT);
    s = frugal_render_chat(m, "[{\"role\":\"user\",\"content\":\"hi\"}]", "nope", &err);
    CHECK(s == NULL && err.status == FRUGAL_ERR_INVALID_ARGUMENT);
    s = frugal_render_chat(m, "[{\"role\":\"user\",\"content\":\"hi\"}]", "llama3", &err);
    CHECK(s && strstr(s, "<|start_header_id|>user<|end_header_id|>") != NULL);
    frugal_free(s);
    s = frugal_render_chat(m, "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, &err);
    CHECK(s && strstr(s, "<|im_start|>user\nhi<|im_end|>") != NULL);
    CHECK_EQ_INT(err.status, FRUGAL_OK);
    frugal_free(s);
    frugal_model_free(m);
}

int main(void) { return t_main(); }
