/* test_cli.c — the CLI contract end to end: `frugal tokenize|render|generate` on the fixture
 * models against the references made by HF transformers/tokenizers (tests/fixtures/ref). */
#include "t.h"
#include "cli_util.h"

static char fx[512];
static const char *fxp(const char *rel) {
    snprintf(fx, sizeof fx, "%s/%s", t_fixtures(), rel);
    return fx;
}

static cJSON *ref(const char *name) {
    char p[512];
    snprintf(p, sizeof p, "%s/ref/%s.json", t_fixtures(), name);
    return cli_load_json(p);
}

/* Runs generate --json greedy for 24 tokens and compares with the HF greedy continuation. */
static void check_greedy(const char *model_rel, const char *ref_name, int prompt_idx) {
    cJSON *r = ref(ref_name);
    CHECK(r != NULL);
    if (!r) return;
    cJSON *p = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "prompts"), prompt_idx);
    char model[512];
    snprintf(model, sizeof model, "%s/%s", t_fixtures(), model_rel);
    const char *argv[] = {"", "generate", "--model", model, "--prompt",
                          cJSON_GetObjectItem(p, "text")->valuestring, "--temperature", "0",
                          "--max-tokens", "24", "--ignore-eos", "--json", NULL};
    cli_result res = cli_run(argv);
    CHECK_EQ_INT(res.status, 0);
    cJSON *o = cJSON_Parse(res.out);
    CHECK(o != NULL);
    if (o) {
        CHECK(cli_ids_equal(cJSON_GetObjectItem(o, "prompt_ids"), cJSON_GetObjectItem(p, "ids")));
        CHECK(cli_ids_equal(cJSON_GetObjectItem(o, "ids"), cJSON_GetObjectItem(p, "greedy")));
        CHECK(cJSON_IsString(cJSON_GetObjectItem(o, "text")));
    } else {
        fprintf(stderr, "  stdout: %s\n  stderr: %s\n", res.out, res.err);
    }
    cJSON_Delete(o);
    cli_free(&res);
    cJSON_Delete(r);
}

TEST(generate_greedy_qwen2_hf) { check_greedy("qwen2-tiny", "qwen2-tiny", 0); check_greedy("qwen2-tiny", "qwen2-tiny", 2); }
TEST(generate_greedy_llama_sharded) { check_greedy("llama-tiny", "llama-tiny", 1); }
TEST(generate_greedy_qwen2_gguf_f32) { check_greedy("qwen2-tiny-f32.gguf", "qwen2-tiny", 3); }

TEST(tokenize_matches_hf) {
    const char *models[] = {"qwen2-tiny", "llama-tiny", "qwen2-tiny-f32.gguf", "llama-tiny-f16.gguf"};
    const char *refs[] = {"qwen2-tiny", "llama-tiny", "qwen2-tiny", "llama-tiny"};
    for (int m = 0; m < 4; m++) {
        cJSON *r = ref(refs[m]);
        CHECK(r != NULL);
        if (!r) continue;
        cJSON *list = cJSON_GetObjectItem(r, "tokenize");
        int idx[] = {1, 3, 4, 6};
        for (int k = 0; k < 4; k++) {
            cJSON *e = cJSON_GetArrayItem(list, idx[k]);
            char model[512];
            snprintf(model, sizeof model, "%s/%s", t_fixtures(), models[m]);
            const char *argv[] = {"", "tokenize", "--model", model,
                                  cJSON_GetObjectItem(e, "text")->valuestring, NULL};
            cli_result res = cli_run(argv);
            CHECK_EQ_INT(res.status, 0);
            cJSON *ids = cJSON_Parse(res.out);
            bool eq = cli_ids_equal(ids, cJSON_GetObjectItem(e, "ids"));
            if (!eq) fprintf(stderr, "  %s: text #%d: got %s\n", models[m], idx[k], res.out);
            CHECK(eq);
            cJSON_Delete(ids);
            cli_free(&res);
        }
        cJSON_Delete(r);
    }
}

static char *write_messages(const cJSON *msgs) {
    static char path[64];
    strcpy(path, "/tmp/frugal-msgs-XXXXXX");
    int fd = mkstemp(path);
    char *s = cJSON_PrintUnformatted(msgs);
    if (write(fd, s, strlen(s)) < 0) perror("write");
    close(fd);
    free(s);
    return path;
}

TEST(render_matches_hf_chat_template) {
    const char *names[] = {"qwen2-tiny", "llama-tiny"};
    for (int m = 0; m < 2; m++) {
        cJSON *r = ref(names[m]);
        CHECK(r != NULL);
        if (!r) continue;
        cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItem(r, "chat")) {
            char *path = write_messages(cJSON_GetObjectItem(c, "messages"));
            char model[512];
            snprintf(model, sizeof model, "%s/%s", t_fixtures(), names[m]);
            const char *argv[] = {"", "render", "--model", model, "--messages", path, NULL};
            cli_result res = cli_run(argv);
            CHECK_EQ_INT(res.status, 0);
            CHECK_STR(res.out, cJSON_GetObjectItem(c, "rendered")->valuestring);
            cli_free(&res);
            unlink(path);
        }
        cJSON_Delete(r);
    }
}

TEST(generate_from_messages_uses_rendered_prompt) {
    cJSON *r = ref("llama-tiny");
    cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "chat"), 1);
    char *path = write_messages(cJSON_GetObjectItem(c, "messages"));
    const char *argv[] = {"", "generate", "--model", fxp("llama-tiny"), "--messages", path,
                          "--temperature", "0", "--max-tokens", "5", "--json", NULL};
    cli_result res = cli_run(argv);
    CHECK_EQ_INT(res.status, 0);
    cJSON *o = cJSON_Parse(res.out);
    CHECK(o != NULL);
    if (o) {
        cJSON *pi = cJSON_GetObjectItem(o, "prompt_ids");
        /* the rendered Llama-3 prompt starts with exactly one <|begin_of_text|> */
        CHECK(cJSON_GetArraySize(pi) > 5);
        CHECK_EQ_INT(cJSON_GetArrayItem(pi, 0)->valueint, cJSON_GetObjectItem(r, "bos")->valueint);
        CHECK(cJSON_GetArrayItem(pi, 1)->valueint != cJSON_GetObjectItem(r, "bos")->valueint);
        CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(o, "ids")) >= 1);
    }
    cJSON_Delete(o);
    cli_free(&res);
    unlink(path);
    cJSON_Delete(r);
}

TEST(stream_equals_json_text_and_stop_strings) {
    const char *prompt = "How do I transfer money to another account?";
    const char *a1[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", prompt,
                        "--temperature", "0", "--max-tokens", "24", "--ignore-eos", "--json", NULL};
    cli_result j = cli_run(a1);
    CHECK_EQ_INT(j.status, 0);
    cJSON *o = cJSON_Parse(j.out);
    const char *text = o ? cJSON_GetObjectItem(o, "text")->valuestring : "";
    const char *a2[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", prompt,
                        "--temperature", "0", "--max-tokens", "24", "--ignore-eos", NULL};
    cli_result s = cli_run(a2);
    CHECK_EQ_INT(s.status, 0);
    size_t tl = strlen(text);
    CHECK(strlen(s.out) == tl + 1 && !strncmp(s.out, text, tl));
    /* stop at a string taken from the middle of the greedy text */
    if (tl >= 12) {
        char stop[5];
        memcpy(stop, text + tl / 2, 4);
        stop[4] = 0;
        const char *first = strstr(text, stop);
        size_t keep = (size_t)(first - text);
        const char *a3[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", prompt,
                            "--temperature", "0", "--max-tokens", "24", "--ignore-eos", "--stop",
                            stop, "--json", NULL};
        cli_result t = cli_run(a3);
        cJSON *o3 = cJSON_Parse(t.out);
        CHECK(o3 != NULL);
        if (o3) {
            const char *t3 = cJSON_GetObjectItem(o3, "text")->valuestring;
            CHECK_EQ_INT(strlen(t3), keep);
            CHECK(!strncmp(t3, text, keep));
            CHECK_STR(cJSON_GetObjectItem(o3, "finish_reason")->valuestring, "stop");
        }
        cJSON_Delete(o3);
        cli_free(&t);
    }
    cJSON_Delete(o);
    cli_free(&j);
    cli_free(&s);
}

TEST(seeded_sampling_is_reproducible) {
    const char *a[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "hello",
                       "--temperature", "1.0", "--seed", "42", "--max-tokens", "16", "--ignore-eos",
                       "--json", NULL};
    cli_result r1 = cli_run(a), r2 = cli_run(a);
    CHECK_EQ_INT(r1.status, 0);
    CHECK_STR(r1.out, r2.out);
    a[9] = "43";
    cli_result r3 = cli_run(a);
    CHECK(strcmp(r1.out, r3.out) != 0);
    cli_free(&r1), cli_free(&r2), cli_free(&r3);
}

TEST(bad_input_is_a_clear_error) {
    const char *a1[] = {"", "generate", "--model", "/nonexistent/model", "--prompt", "x", NULL};
    cli_result r = cli_run(a1);
    CHECK_EQ_INT(r.status, 1);
    CHECK(strstr(r.err, "/nonexistent/model") != NULL);
    CHECK_EQ_INT(cli_lines(r.err), 1);
    cli_free(&r);
    const char *a2[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "x", "--bogus", NULL};
    r = cli_run(a2);
    CHECK_EQ_INT(r.status, 2);
    cli_free(&r);
    const char *a3[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "x", "--quant", "q3", NULL};
    r = cli_run(a3);
    CHECK_EQ_INT(r.status, 2);
    cli_free(&r);
    const char *a4[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "x", "--max-tokens", "-5", NULL};
    r = cli_run(a4);
    CHECK_EQ_INT(r.status, 2);
    cli_free(&r);
    char path[] = "/tmp/frugal-badmsg-XXXXXX";
    int fd = mkstemp(path);
    if (write(fd, "{\"role\": 1", 10) < 0) perror("write");
    close(fd);
    const char *a5[] = {"", "render", "--model", fxp("qwen2-tiny"), "--messages", path, NULL};
    r = cli_run(a5);
    CHECK_EQ_INT(r.status, 1);
    CHECK(strstr(r.err, path) != NULL);
    cli_free(&r);
    unlink(path);
    const char *a6[] = {"", "frobnicate", NULL};
    r = cli_run(a6);
    CHECK_EQ_INT(r.status, 2);
    cli_free(&r);
}

/* --device goes through the API: a CUDA device in the CPU-only binary is one clear line and exit
 * 1 (unsupported, before the model is loaded: the model path here does not exist), a name that
 * is no device is a usage error; "cpu" runs. */
TEST(device_selection) {
    const char *a1[] = {"", "generate", "--model", "/nonexistent/model", "--prompt", "x",
                        "--device", "cuda:0", NULL};
    cli_result r = cli_run(a1);
    CHECK_EQ_INT(r.status, 1);
    CHECK(strstr(r.err, "cuda:0") != NULL && strstr(r.err, "make cuda") != NULL);
    CHECK(strstr(r.err, "/nonexistent") == NULL); /* refused before loading */
    CHECK_EQ_INT(cli_lines(r.err), 1);
    cli_free(&r);
    const char *a2[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "x",
                        "--device", "gpu", NULL};
    r = cli_run(a2);
    CHECK_EQ_INT(r.status, 2);
    CHECK(strstr(r.err, "gpu") != NULL);
    cli_free(&r);
    const char *a3[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "x",
                        "--device", "cpu", "--kv-cache", "int8", NULL};
    r = cli_run(a3);
    CHECK_EQ_INT(r.status, 1); /* well-formed, but the CPU has no int8 KV cache */
    CHECK_EQ_INT(cli_lines(r.err), 1);
    cli_free(&r);
    const char *a4[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "hello",
                        "--device", "cpu", "--temperature", "0", "--max-tokens", "4",
                        "--ignore-eos", "--json", NULL};
    r = cli_run(a4);
    CHECK_EQ_INT(r.status, 0);
    cJSON *o = cJSON_Parse(r.out);
    CHECK(o && cJSON_GetArraySize(cJSON_GetObjectItem(o, "ids")) == 4);
    cJSON_Delete(o);
    cli_free(&r);
}

/* --weights int4 on the CPU is quantisation on load (= --quant q4): the output equals
 * --quant q4's exactly and differs from the f32 weights' (on this prompt it does). */
TEST(cpu_weights_alias_quantises_on_load) {
    const char *a[] = {"", "generate", "--model", fxp("qwen2-tiny"), "--prompt", "hello",
                       "--temperature", "0", "--max-tokens", "12", "--ignore-eos", "--json",
                       NULL, NULL, NULL};
    cli_result f32 = cli_run(a);
    a[12] = "--weights", a[13] = "int4";
    cli_result w4 = cli_run(a);
    a[12] = "--quant", a[13] = "q4";
    cli_result q4 = cli_run(a);
    CHECK_EQ_INT(f32.status, 0);
    CHECK_EQ_INT(w4.status, 0);
    CHECK_EQ_INT(q4.status, 0);
    CHECK(w4.out[0] == '{');
    CHECK_STR(w4.out, q4.out);
    CHECK(strcmp(w4.out, f32.out) != 0);
    cli_free(&f32), cli_free(&w4), cli_free(&q4);
    a[12] = "--weights", a[13] = "int3";
    cli_result bad = cli_run(a);
    CHECK_EQ_INT(bad.status, 2);
    cli_free(&bad);
}

/* The defaults --help prints are the API's (frugal_generate_default_params). */
TEST(help_shows_the_api_defaults) {
    const char *a[] = {"", "generate", "--help", NULL};
    cli_result r = cli_run(a);
    CHECK_EQ_INT(r.status, 0);
    CHECK(strstr(r.out, "tokens to generate (default 128)") != NULL);
    CHECK(strstr(r.out, "0 = greedy (default 0.8)") != NULL);
    CHECK(strstr(r.out, "(defaults 40, 0.95, 0.05)") != NULL);
    cli_free(&r);
}

int main(void) { return t_main(); }
