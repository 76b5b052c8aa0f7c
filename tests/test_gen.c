/* test_gen.c — the generation state (src/engine/gen.c): text release, stop strings held back
 * across tokens, whole UTF-8 characters, EOS and max tokens; and the public C API. */
#include "t.h"

#include "engine/gen.h"
#include "frugal.h"
#include "model/model.h"
#include "model/tokenizer.h"

static fr_model *load(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", t_fixtures(), name);
    fr_err e = {{0}};
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

TEST(public_api_generates_and_streams) {
    char path[512], err[512];
    snprintf(path, sizeof path, "%s/qwen2-tiny", t_fixtures());
    frugal_model *m = frugal_model_load(path, frugal_model_default_params(), err, sizeof err);
    CHECK(m != NULL);
    if (!m) { fprintf(stderr, "  %s\n", err); return; }
    int32_t ids[64];
    int n = frugal_tokenize(m, "Hello world!", ids, 64, err, sizeof err);
    CHECK(n > 0);
    frugal_generate_params gp = frugal_generate_default_params();
    gp.max_tokens = 8;
    gp.temperature = 0;
    gp.ignore_eos = 1;
    fr_buf streamed = {0};
    char *text = NULL;
    CHECK_EQ_INT(frugal_generate(m, "Hello world!", &gp, collect, &streamed, &text, err, sizeof err), 0);
    CHECK(text != NULL);
    CHECK_STR(fr_buf_cstr(&streamed), text);
    char *r = frugal_render_chat(m, "[{\"role\":\"user\",\"content\":\"hi\"}]", NULL, err, sizeof err);
    CHECK(r && strstr(r, "<|im_start|>user\nhi<|im_end|>") != NULL);
    frugal_free(r);
    CHECK(frugal_render_chat(m, "{not json", NULL, err, sizeof err) == NULL);
    CHECK(frugal_model_load("/nonexistent", frugal_model_default_params(), err, sizeof err) == NULL);
    CHECK(strstr(err, "/nonexistent") != NULL);
    frugal_free(text);
    fr_buf_free(&streamed);
    frugal_model_free(m);
}

int main(void) { return t_main(); }
