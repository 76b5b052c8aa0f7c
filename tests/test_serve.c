/* test_serve.c — the serving layer without sockets: OpenAI request validation (types, ranges,
 * unsupported parts and parameters, UTF-8, limits), response and stream chunk shapes, config
 * file and API key parsing, constant-time key matching, Prometheus rendering. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <unistd.h>

#include "serve/api.h"
#include "serve/config.h"
#include "serve/metrics.h"
#include "t.h"

static const fr_api_limits LIM = {.max_body_bytes = 1 << 20, .max_messages = 8, .max_tokens = 100};

static int parse(fr_api_kind k, const char *body, fr_api_req *q, fr_api_error *e) {
    return fr_api_parse(k, body, strlen(body), &LIM, q, e);
}

/* Expect a 4xx naming `param` (NULL = don't care). */
static void expect_bad(fr_api_kind k, const char *body, int status, const char *param) {
    fr_api_req q;
    fr_api_error e;
    memset(&e, 0, sizeof e);
    int rc = parse(k, body, &q, &e);
    CHECK_EQ_INT(rc, -1);
    CHECK_EQ_INT(e.status, status);
    if (param) CHECK_STR(e.param, param);
    if (rc == 0) fr_api_req_free(&q);
}

TEST(chat_request_ok) {
    fr_api_req q;
    fr_api_error e;
    const char *body =
        "{\"model\":\"m\",\"messages\":[{\"role\":\"developer\",\"content\":\"be brief\"},"
        "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},{\"type\":\"text\","
        "\"text\":\"b\"}]},{\"role\":\"assistant\",\"content\":null}],\"max_tokens\":5,"
        "\"max_completion_tokens\":7,\"temperature\":0,\"top_p\":0.5,\"seed\":-3,"
        "\"stop\":[\"x\",\"yy\"],\"n\":1,\"stream\":true,\"stream_options\":{\"include_usage\":true},"
        "\"priority\":\"P2\",\"unknown_thing\":[1,2,3],\"presence_penalty\":0,\"logprobs\":false}";
    CHECK_EQ_INT(parse(FR_API_CHAT, body, &q, &e), 0);
    CHECK_STR(q.model, "m");
    CHECK_EQ_INT(q.max_tokens, 7); /* max_completion_tokens wins */
    CHECK_NEAR(q.temperature, 0, 0);
    CHECK_NEAR(q.top_p, 0.5, 1e-12);
    CHECK(q.has_seed);
    CHECK(q.seed == (uint64_t)(int64_t)-3);
    CHECK_EQ_INT(q.n_stop, 2);
    CHECK_STR(q.stop[1], "yy");
    CHECK(q.stream && q.include_usage);
    CHECK_EQ_INT(q.priority, 2);
    CHECK_EQ_INT(cJSON_GetArraySize(q.messages), 3);
    const cJSON *m0 = cJSON_GetArrayItem(q.messages, 0), *m1 = cJSON_GetArrayItem(q.messages, 1);
    CHECK_STR(cJSON_GetObjectItem(m0, "role")->valuestring, "system"); /* developer -> system */
    CHECK_STR(cJSON_GetObjectItem(m1, "content")->valuestring, "a\nb");
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(q.messages, 2), "content")->valuestring, "");
    fr_api_req_free(&q);
}

TEST(completion_request_ok) {
    fr_api_req q;
    fr_api_error e;
    CHECK_EQ_INT(parse(FR_API_COMPLETIONS, "{\"prompt\":[\"hi\"],\"stop\":\"\\n\",\"echo\":false}", &q, &e), 0);
    CHECK_STR(q.prompt, "hi");
    CHECK_EQ_INT(q.max_tokens, -1);
    CHECK_NEAR(q.temperature, 1, 0);
    CHECK_EQ_INT(q.n_stop, 1);
    fr_api_req_free(&q);
}

TEST(chat_request_errors) {
    expect_bad(FR_API_CHAT, "", 400, NULL);
    expect_bad(FR_API_CHAT, "{", 400, NULL);
    expect_bad(FR_API_CHAT, "{} x", 400, NULL);
    expect_bad(FR_API_CHAT, "[]", 400, NULL);
    expect_bad(FR_API_CHAT, "{}", 400, "messages");
    expect_bad(FR_API_CHAT, "{\"messages\":[]}", 400, "messages");
    expect_bad(FR_API_CHAT, "{\"messages\":{}}", 400, "messages");
    expect_bad(FR_API_CHAT, "{\"messages\":[1]}", 400, "messages[0]");
    expect_bad(FR_API_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", 400, "messages[0].content");
    expect_bad(FR_API_CHAT, "{\"messages\":[{\"role\":7,\"content\":\"x\"}]}", 400,
               "messages[0].role");
    expect_bad(FR_API_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400,
               "messages[0].content");
    expect_bad(FR_API_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"a\"},"
               "{\"type\":\"image_url\",\"image_url\":{\"url\":\"u\"}}]}]}",
               400, "messages[0].content[1]");
    expect_bad(FR_API_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_audio\","
               "\"input_audio\":{}}]}]}",
               400, "messages[0].content[0]");
    expect_bad(FR_API_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":1}]}]}",
               400, "messages[0].content[0]");
    const char *pre = "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],";
    char b[512];
    struct { const char *tail, *param; } cases[] = {
        {"\"max_tokens\":0}", "max_tokens"},
        {"\"max_tokens\":-1}", "max_tokens"},
        {"\"max_tokens\":101}", "max_tokens"},
        {"\"max_tokens\":1e300}", "max_tokens"},
        {"\"max_tokens\":1.5}", "max_tokens"},
        {"\"max_tokens\":\"5\"}", "max_tokens"},
        {"\"max_completion_tokens\":-2}", "max_completion_tokens"},
        {"\"temperature\":3}", "temperature"},
        {"\"temperature\":\"1\"}", "temperature"},
        {"\"top_p\":1.5}", "top_p"},
        {"\"seed\":0.5}", "seed"},
        {"\"stop\":[1]}", "stop"},
        {"\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop"},
        {"\"stop\":7}", "stop"},
        {"\"n\":2}", "n"},
        {"\"stream\":1}", "stream"},
        {"\"stream_options\":{\"include_usage\":1}}", "stream_options.include_usage"},
        {"\"priority\":\"P9\"}", "priority"},
        {"\"logprobs\":true}", "logprobs"},
        {"\"tools\":[{\"type\":\"function\"}]}", "tools[0]"},
        {"\"tools\":{}}", "tools"},
        {"\"tool_choice\":\"required\"}", "tool_choice"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\"}}],\"tool_choice\":"
         "{\"type\":\"function\",\"function\":{\"name\":\"g\"}}}", "tool_choice.function.name"},
        {"\"response_format\":{\"type\":\"xml\"}}", "response_format.type"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\","
         "\"schema\":{\"type\":\"string\",\"pattern\":\"a\"}}}}", "response_format.json_schema.schema"},
        {"\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{}}}}",
         "response_format.json_schema.name"},
        {"\"frequency_penalty\":0.5}", "frequency_penalty"},
        {"\"logit_bias\":{\"5\":1}}", "logit_bias"},
        {"\"model\":5}", "model"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        snprintf(b, sizeof b, "%s%s", pre, cases[i].tail);
        expect_bad(FR_API_CHAT, b, 400, cases[i].param);
    }
    /* too many messages */
    expect_bad(FR_API_CHAT,
               "{\"messages\":[{\"role\":\"user\",\"content\":\"1\"},{\"role\":\"user\",\"content\":"
               "\"2\"},{\"role\":\"user\",\"content\":\"3\"},{\"role\":\"user\",\"content\":\"4\"},"
               "{\"role\":\"user\",\"content\":\"5\"},{\"role\":\"user\",\"content\":\"6\"},{\"role\":"
               "\"user\",\"content\":\"7\"},{\"role\":\"user\",\"content\":\"8\"},{\"role\":\"user\","
               "\"content\":\"9\"}]}",
               400, "messages");
}

TEST(encoding_errors) {
    fr_api_req q;
    fr_api_error e;
    const char bad_utf8[] = "{\"prompt\":\"caf\xe9\"}";
    CHECK_EQ_INT(fr_api_parse(FR_API_COMPLETIONS, bad_utf8, strlen(bad_utf8), &LIM, &q, &e), -1);
    CHECK_STR(e.code, "invalid_utf8");
    const char nul[] = "{\"prompt\":\"a\0b\"}";
    CHECK_EQ_INT(fr_api_parse(FR_API_COMPLETIONS, nul, sizeof nul - 1, &LIM, &q, &e), -1);
    expect_bad(FR_API_COMPLETIONS, "{\"prompt\":\"\\ud800\"}", 400, NULL); /* lone surrogate */
    expect_bad(FR_API_COMPLETIONS, "{\"prompt\":[1,2,3]}", 400, "prompt");
    expect_bad(FR_API_COMPLETIONS, "{\"prompt\":\"x\",\"echo\":true}", 400, "echo");
    fr_api_limits tiny = LIM;
    tiny.max_body_bytes = 10;
    const char *big = "{\"prompt\":\"0123456789\"}";
    CHECK_EQ_INT(fr_api_parse(FR_API_COMPLETIONS, big, strlen(big), &tiny, &q, &e), -1);
    CHECK_EQ_INT(e.status, 413);
}

TEST(error_and_response_shapes) {
    fr_api_error e;
    fr_api_error_set(&e, 400, "invalid_request_error", NULL, "max_tokens", "bad \"x\"");
    char *s = fr_api_error_json(&e);
    CHECK_STR(s, "{\"error\":{\"message\":\"bad \\\"x\\\"\",\"type\":\"invalid_request_error\","
                 "\"param\":\"max_tokens\",\"code\":null}}");
    free(s);
    int32_t ids[2] = {5, 6};
    fr_api_result r = {.id = "chatcmpl-1", .model = "m", .created = 7, .text = "hi\n",
                       .text_len = 3, .finish = "stop", .prompt_tokens = 4,
                       .completion_tokens = 2, .token_ids = ids, .n_token_ids = 2};
    s = fr_api_chat_response(&r);
    cJSON *j = cJSON_Parse(s);
    CHECK(j != NULL);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
    CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(c0, "message"), "content")->valuestring, "hi\n");
    CHECK_STR(cJSON_GetObjectItem(c0, "finish_reason")->valuestring, "stop");
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(c0, "token_ids")), 2);
    CHECK_EQ_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "total_tokens")->valueint, 6);
    cJSON_Delete(j);
    free(s);
    fr_buf b = {0};
    r.token_ids = NULL;
    fr_api_stream_chunk(&b, FR_API_CHAT, &r, true, NULL, 0, NULL, false);
    CHECK(strstr(fr_buf_cstr(&b), "\"delta\":{\"role\":\"assistant\",\"content\":\"\"}") != NULL);
    CHECK(!strncmp(b.data, "data: {", 7) && b.len > 2 && !strcmp(b.data + b.len - 2, "\n\n"));
    b.len = 0;
    fr_api_stream_chunk(&b, FR_API_COMPLETIONS, &r, false, "ab", 2, "length", true);
    CHECK(strstr(fr_buf_cstr(&b), "\"text\":\"ab\"") && strstr(b.data, "\"finish_reason\":\"length\"") &&
          strstr(b.data, "\"usage\":null"));
    b.len = 0;
    fr_api_stream_usage(&b, FR_API_CHAT, &r);
    CHECK(strstr(fr_buf_cstr(&b), "\"choices\":[]") && strstr(b.data, "\"prompt_tokens\":4"));
    b.len = 0;
    fr_api_stream_done(&b);
    CHECK_STR(fr_buf_cstr(&b), "data: [DONE]\n\n");
    fr_buf_free(&b);
    char id1[64], id2[64];
    fr_api_new_id(id1, sizeof id1, "cmpl-");
    fr_api_new_id(id2, sizeof id2, "cmpl-");
    CHECK(!strncmp(id1, "cmpl-", 5) && strcmp(id1, id2));
}

TEST(config_json) {
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    const char *js = "{\"port\":0,\"kv_blocks\":64,\"step_tokens\":32,\"default_tier\":\"P2\","
                     "\"tiers\":{\"P0\":{\"weight\":5,\"max_wait_ms\":250,\"ttft_slo_ms\":100},"
                     "\"P2\":{\"queue_max\":3}},\"limits\":{\"max_body_bytes\":4096,"
                     "\"idle_timeout_s\":2},\"shutdown_grace_s\":1.5,\"aging_ms\":500}";
    CHECK_EQ_INT(fr_serve_config_apply_json(&c, js, strlen(js), &err), 0);
    CHECK_EQ_INT(c.port, 0);
    CHECK_EQ_INT(c.engine.kv_blocks, 64);
    CHECK_EQ_INT(c.engine.step_tokens, 32);
    CHECK_EQ_INT(c.default_tier, 2);
    CHECK_NEAR(c.engine.weight[0], 5, 0);
    CHECK_NEAR(c.engine.weight[1], 20, 0);
    CHECK_NEAR(c.engine.max_wait_s[0], 0.25, 1e-12);
    CHECK_NEAR(c.ttft_slo_s[0], 0.1, 1e-12);
    CHECK_EQ_INT(c.engine.queue_max[2], 3);
    CHECK_EQ_INT((int)c.max_body_bytes, 4096);
    CHECK_EQ_INT(c.idle_timeout_s, 2);
    CHECK_NEAR(c.shutdown_grace_s, 1.5, 0);
    CHECK_NEAR(c.engine.aging_s, 0.5, 1e-12);
    const char *bad[] = {"{\"prot\":1}", "{\"port\":70000}", "{\"port\":1.5}",
                         "{\"tiers\":{\"P3\":{}}}", "{\"tiers\":{\"P0\":{\"weight\":0}}}",
                         "{\"limits\":{\"max_tokens\":0}}", "{\"quant\":\"q2\"}", "[1]",
                         "{\"default_tier\":\"high\"}", "{\"warmup\":1}"};
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) {
        err.msg[0] = 0;
        CHECK_EQ_INT(fr_serve_config_apply_json(&c, bad[i], strlen(bad[i]), &err), -1);
        CHECK(err.msg[0] != 0);
    }
    fr_serve_config_free(&c);
}

/* One format for the whole binary: the meter's keys are the "metering" section of the serve
 * config; errors name the file and the line of the key (unknown keys, bad values, duplicates). */
TEST(config_metering_section_and_lines) {
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    const char *js = "{\"port\": 0,\n"
                     " \"metering\": {\"cost\": {\"pue\": 1.25}, \"ledger\": {\"path\": \"\"},\n"
                     "              \"slo\": {\"P0\": 0.5}}}";
    CHECK_EQ_INT(fr_serve_config_apply_json(&c, js, strlen(js), &err), 0);
    CHECK_STR(err.msg, "");
    CHECK_NEAR(c.metering.cost.pue, 1.25, 0);
    CHECK(c.metering.ledger_path_set && !c.metering.ledger_path[0]);
    CHECK_EQ_INT(c.metering.n_slo, 1);
    CHECK_NEAR(c.metering.sample_ms, 100, 0); /* the rest keeps the meter's defaults */
    static const struct { const char *text, *msg; } bad[] = {
        {"{\"port\": 0,\n \"prot\": 1}", "line 2: prot: unknown key"},
        {"{\"limits\": {\n\n  \"max_tokens\": 0}}", "line 3: limits.max_tokens: must be an integer in 1..16777216"},
        {"{\"metering\": {\"cost\": {\n  \"pue\": 11}}}", "line 2: metering.cost.pue: must be a number in 1..10"},
        {"{\"metering\": {\"costs\": {}}}",
         "line 1: metering.costs: unknown section (meter, cost, ledger, trace, audit, slo, ab)"},
        {"{\"port\": 1,\n \"port\": 2}", "line 2: port: key given twice in one object"},
        {"{\"device\": \"tpu\"}", NULL},
        {"{\"host\": null}", "line 1: host: must be a string"},
        {"{\"port\": 1} {}", "line 1:13: text after the end of the JSON object"},
        /* cJSON skips control bytes between tokens and keeps raw newlines in strings: the
         * lines still count right */
        {"{\x1b\"host\": \"a\nb\",\x01\n\x1b \"prot\": 2}", "line 3: prot: unknown key"},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(bad); i++) {
        err.msg[0] = 0;
        CHECK_EQ_INT(fr_serve_config_apply_json(&c, bad[i].text, strlen(bad[i].text), &err), -1);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        if (bad[i].msg) CHECK_STR(err.msg, bad[i].msg);
        else CHECK(!strncmp(err.msg, "line 1: device: ", 16));
    }
    fr_serve_config_free(&c);
    /* --config FILE: the message starts with the file name and the line */
    char path[] = "/tmp/frugal-serve-config-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    const char *text = "{\n  \"model\": \"m\",\n  \"tiers\": {\"P1\": {\"wieght\": 2}}\n}\n";
    CHECK_EQ_INT((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    fr_serve_config_init(&c);
    char *argv[] = {"serve", "--config", path};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 3, argv, &err), 1);
    char want[300];
    snprintf(want, sizeof want,
             "%s:3: tiers.P1.wieght: unknown key (weight, queue_max, max_wait_ms, ttft_slo_ms, tpot_slo_ms)",
             path);
    CHECK_STR(err.msg, want);
    fr_serve_config_free(&c);
    unlink(path);
}

TEST(config_args) {
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    char *argv[] = {"serve", "--model", "m", "--port", "0", "--host", "::1", "--quant", "q8",
                    "--chat-template", "chatml"};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 11, argv, &err), 0);
    CHECK_STR(c.model, "m");
    CHECK_STR(c.host, "::1");
    CHECK_STR(c.quant, "q8");
    CHECK_EQ_INT(c.port, 0);
    CHECK(!c.no_vad);
    fr_serve_config_free(&c);
    fr_serve_config_init(&c);
    char *nv[] = {"serve", "--model", "m", "--no-vad"};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 4, nv, &err), 0);
    CHECK(c.no_vad);
    fr_serve_config_free(&c);
    fr_serve_config_init(&c);
    CHECK_EQ_INT(fr_serve_config_apply_json(&c, "{\"vad\":false}", 13, &err), 0);
    CHECK(c.no_vad);
    CHECK_EQ_INT(fr_serve_config_apply_json(&c, "{\"vad\":true}", 12, &err), 0);
    CHECK(!c.no_vad);
    CHECK_EQ_INT(fr_serve_config_apply_json(&c, "{\"vad\":1}", 9, &err), -1);
    char *bad1[] = {"serve", "--port", "99999", "--model", "m"};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 5, bad1, &err), 2);
    char *bad2[] = {"serve", "--port", "1"};
    fr_serve_config_free(&c);
    fr_serve_config_init(&c);
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 3, bad2, &err), 2); /* no --model */
    char *bad3[] = {"serve", "--model", "m", "--config", "/nonexistent/frugal.json"};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, 5, bad3, &err), 1);
    fr_serve_config_free(&c);
}

/* The command line through base/flags: every usage error is exit status 2 with the code
 * FR_ERR_BAD_REQUEST and a message that names the option (nothing printed: the command prints
 * err); "--name=value" works; the options override --config wherever they stand, and several
 * --config files apply in order. */
static void args_fail(int argc, char **argv, const char *msg_start) {
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    int rc = fr_serve_config_from_args(&c, argc, argv, &err);
    if (rc != 2 || err.code != FR_ERR_BAD_REQUEST || strncmp(err.msg, msg_start, strlen(msg_start)))
        printf("  %s %s: rc %d, code %s, '%s'\n", argv[1], argc > 2 ? argv[2] : "", rc,
               fr_err_code_name(err.code), err.msg);
    CHECK_EQ_INT(rc, 2);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK(!strncmp(err.msg, msg_start, strlen(msg_start)));
    fr_serve_config_free(&c);
}

TEST(config_args_errors) {
    /* unknown options and stray arguments */
    args_fail(4, (char *[]){"serve", "--model", "m", "--nope"}, "unknown option '--nope'");
    args_fail(5, (char *[]){"serve", "--nope", "1", "--model", "m"}, "unknown option '--nope'");
    args_fail(4, (char *[]){"serve", "--model", "m", "stray"}, "unexpected argument 'stray'");
    /* a missing value, for each option */
    static const char *const opts[] = {
        "--config", "--model", "--host", "--port", "--quant", "--chat-template", "--api-keys",
        "--served-model-name", "--kv-memory-mb", "--device", "--weights", "--kv-cache",
        "--kv-fraction", "--meter", "--meter-config", "--ledger"};
    for (size_t i = 0; i < FR_ARRAY_LEN(opts); i++) {
        char want[64];
        snprintf(want, sizeof want, "%s needs a value", opts[i]);
        args_fail(4, (char *[]){"serve", "--model", "m", (char *)opts[i]}, want);
    }
    /* bad numbers and bad words */
    args_fail(5, (char *[]){"serve", "--port", "99999", "--model", "m"}, "--port must be an integer in 0..65535");
    args_fail(5, (char *[]){"serve", "--port", "80x", "--model", "m"}, "--port must be an integer");
    args_fail(4, (char *[]){"serve", "--port=-1", "--model", "m"}, "--port must be an integer");
    args_fail(5, (char *[]){"serve", "--kv-memory-mb", "0", "--model", "m"}, "--kv-memory-mb must be an integer");
    args_fail(5, (char *[]){"serve", "--kv-memory-mb", "1.5", "--model", "m"}, "--kv-memory-mb must be an integer");
    args_fail(5, (char *[]){"serve", "--kv-fraction", "2", "--model", "m"}, "--kv-fraction must be a number in 0.01..1");
    args_fail(5, (char *[]){"serve", "--kv-fraction", "nan", "--model", "m"}, "--kv-fraction must be a number");
    args_fail(5, (char *[]){"serve", "--quant", "q5", "--model", "m"}, "--quant must be q8 or q4");
    args_fail(5, (char *[]){"serve", "--meter", "yes", "--model", "m"}, "--meter must be on or off");
    args_fail(5, (char *[]){"serve", "--device", "gpu", "--model", "m"}, "unknown device 'gpu'");
    args_fail(5, (char *[]){"serve", "--weights", "int3", "--model", "m"}, "weights: unknown value 'int3'");
    args_fail(4, (char *[]){"serve", "--kv-cache=fp8", "--model", "m"}, "kv_cache: unknown value 'fp8'");
    args_fail(3, (char *[]){"serve", "--port", "1"}, "--model PATH is required");

    /* good values, --name=value, and the precedence over --config */
    char path[] = "/tmp/frugal-serve-args-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0) return;
    const char *text = "{\"model\": \"file-model\", \"port\": 1234, \"host\": \"10.0.0.1\"}\n";
    CHECK_EQ_INT((int)write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    char path2[] = "/tmp/frugal-serve-args2-XXXXXX";
    fd = mkstemp(path2);
    CHECK(fd >= 0);
    if (fd < 0) return;
    const char *text2 = "{\"host\": \"10.0.0.2\"}\n";
    CHECK_EQ_INT((int)write(fd, text2, strlen(text2)), (int)strlen(text2));
    close(fd);
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    char *argv[] = {"serve", "--port=5", "--kv-memory-mb", "64", "--config", path,
                    "--kv-fraction=0.5", "--meter", "off", "--device", "cpu", "--weights=q4",
                    "--config", path2};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, (int)FR_ARRAY_LEN(argv), argv, &err), 0);
    CHECK_STR(c.model, "file-model");    /* from the file */
    CHECK_EQ_INT(c.port, 5);             /* the option, though the file came later */
    CHECK_STR(c.host, "10.0.0.2");       /* the second file over the first */
    CHECK(c.engine.kv_bytes == (size_t)64 << 20);
    CHECK(c.engine.kv_fraction == 0.5f);
    CHECK(!c.meter);
    CHECK_STR(c.device, "cpu");
    CHECK_STR(c.weights, "q4");
    /* the API's settings of those options: the CPU's q4 is the load-time quantisation */
    frugal_model_params mp;
    frugal_context_params cp;
    fr_serve_api_params(&c, &mp, &cp);
    CHECK(mp.quant && !strcmp(mp.quant, "q4"));
    CHECK(cp.weights == NULL);
    CHECK_STR(cp.device, "cpu");
    CHECK(cp.kv_fraction == 0.5f);
    fr_serve_config_free(&c);
    /* on CUDA the weights are the context's (q8 = int8), f32 the default */
    fr_serve_config_init(&c);
    char *cuda[] = {"serve", "--model", "m", "--device", "cuda:1", "--weights", "q8",
                    "--kv-cache", "int8"};
    CHECK_EQ_INT(fr_serve_config_from_args(&c, (int)FR_ARRAY_LEN(cuda), cuda, &err), 0);
    fr_serve_api_params(&c, &mp, &cp);
    CHECK(mp.quant == NULL);
    CHECK(cp.weights && !strcmp(cp.weights, "int8"));
    CHECK_STR(cp.device, "cuda:1");
    CHECK(cp.kv_cache && !strcmp(cp.kv_cache, "int8"));
    free(c.weights);
    c.weights = fr_xstrdup("f32");
    fr_serve_api_params(&c, &mp, &cp);
    CHECK(cp.weights == NULL);
    fr_serve_config_free(&c);
    unlink(path);
    unlink(path2);
}

TEST(api_keys) {
    fr_serve_config c;
    fr_serve_config_init(&c);
    fr_err err = {0};
    CHECK_EQ_INT(fr_serve_keys_parse(&c, "# comment\n\nsk-a P0\n  sk-b P2 P1 # note\nsk-c\n",
                                     "keys", false, &err), 0);
    CHECK_EQ_INT(c.n_keys, 3);
    CHECK_EQ_INT(fr_serve_keys_parse(&c, "sk-env:P2,sk-env2", "ENV", true, &err), 0);
    CHECK_EQ_INT(c.n_keys, 5);
    const fr_api_key *k = fr_serve_find_key(&c, "sk-b", 4);
    CHECK(k != NULL);
    if (k) {
        CHECK_EQ_INT(k->default_tier, 2);
        CHECK_EQ_INT(k->highest_tier, 1);
    }
    k = fr_serve_find_key(&c, "sk-c", 4);
    CHECK(k && k->default_tier == c.default_tier && k->highest_tier == 0);
    k = fr_serve_find_key(&c, "sk-env", 6);
    CHECK(k && k->default_tier == 2);
    CHECK(fr_serve_find_key(&c, "sk-", 3) == NULL);
    CHECK(fr_serve_find_key(&c, "sk-aa", 5) == NULL);
    CHECK(fr_serve_find_key(&c, "", 0) == NULL);
    CHECK(fr_ct_equal("abc", 3, "abc", 3));
    CHECK(!fr_ct_equal("abd", 3, "abc", 3));
    CHECK(!fr_ct_equal("abcd", 4, "abc", 3));
    CHECK(!fr_ct_equal("ab", 2, "abc", 3));
    /* errors never echo the key */
    CHECK_EQ_INT(fr_serve_keys_parse(&c, "sk-secret P7\n", "keys", false, &err), -1);
    CHECK(strstr(err.msg, "sk-secret") == NULL);
    CHECK(strstr(err.msg, "keys:1") != NULL);
    CHECK_EQ_INT(fr_serve_keys_parse(&c, "sk-x P2 P0 P1\n", "keys", false, &err), -1);
    CHECK_EQ_INT(fr_serve_keys_parse(&c, "sk-x P0 P2\n", "keys", false, &err), -1);
    fr_serve_config_free(&c);
}

TEST(metrics_render) {
    fr_metrics m;
    fr_metrics_init(&m);
    fr_metrics_request(&m, FR_EP_CHAT, 0, 200, 0.3);
    fr_metrics_request(&m, FR_EP_CHAT, 0, 200, 0.03);
    fr_metrics_request(&m, FR_EP_HEALTH, -1, 200, -1);
    fr_req_info info;
    memset(&info, 0, sizeof info);
    info.tier = 0;
    info.end = FR_END_LENGTH;
    info.t_arrival = 10;
    info.t_admit = 10.001;
    info.t_first = 10.02;
    info.t_end = 10.12;
    info.n_generated = 11;
    fr_metrics_generation(&m, &info, 0.2, 0.05);
    fr_engine_stats st;
    memset(&st, 0, sizeof st);
    st.kv_blocks_total = 10;
    st.kv_blocks_used = 4;
    st.running[1] = 2;
    fr_buf o = {0};
    fr_metrics_render(&m, &st, NULL, &o);
    const char *t = fr_buf_cstr(&o);
    CHECK(strstr(t, "frugal_requests_total{endpoint=\"/v1/chat/completions\",tier=\"P0\",status=\"200\"} 2\n"));
    CHECK(strstr(t, "frugal_requests_total{endpoint=\"/health\",tier=\"none\",status=\"200\"} 1\n"));
    CHECK(strstr(t, "frugal_request_duration_seconds_bucket{tier=\"P0\",le=\"0.05\"} 1\n"));
    CHECK(strstr(t, "frugal_request_duration_seconds_bucket{tier=\"P0\",le=\"0.5\"} 2\n"));
    CHECK(strstr(t, "frugal_request_duration_seconds_bucket{tier=\"P0\",le=\"+Inf\"} 2\n"));
    CHECK(strstr(t, "frugal_time_per_output_token_seconds_bucket{tier=\"P0\",le=\"0.01\"} 1\n"));
    CHECK(strstr(t, "frugal_time_to_first_token_seconds_count{tier=\"P0\"} 1\n"));
    CHECK(strstr(t, "frugal_slo_met_total{tier=\"P0\"} 1\n"));
    CHECK(strstr(t, "frugal_kv_usage_ratio 0.400000\n"));
    CHECK(strstr(t, "frugal_requests_running{tier=\"P1\"} 2\n"));
    CHECK(strstr(t, "# TYPE frugal_requests_cancelled_total counter\n"));
    fr_buf_free(&o);
    fr_metrics_destroy(&m);
}

/* The vllm:* families: vLLM's names, types, labels and buckets (serve/metrics_vllm.c). */
TEST(metrics_render_vllm_names) {
    fr_metrics m;
    fr_metrics_init(&m);
    fr_req_info info;
    memset(&info, 0, sizeof info);
    info.tier = 1;
    info.end = FR_END_STOP;
    info.t_arrival = 10;
    info.t_admit = 10.5;
    info.t_first = 10.03;
    info.t_end = 10.39;
    info.n_generated = 5; /* 4 intervals of 0.09 s */
    fr_metrics_generation(&m, &info, 1, 1);
    fr_engine_stats st;
    memset(&st, 0, sizeof st);
    st.kv_blocks_total = 8;
    st.kv_blocks_used = 2;
    st.running[0] = 1, st.running[2] = 2;
    st.waiting[1] = 3;
    st.prefix_queries = 300;
    st.prefix_hits = 128;
    st.ended[1][FR_END_STOP] = 4;
    st.ended[0][FR_END_CANCELLED] = 1;
    fr_metrics_extra x = {.model_name = "tiny\"q"};
    fr_buf o = {0};
    fr_metrics_render(&m, &st, &x, &o);
    const char *t = fr_buf_cstr(&o);
#define L "{model_name=\"tiny\\\"q\",engine=\"0\""
    CHECK(strstr(t, "# TYPE vllm:num_requests_running gauge\n"));
    CHECK(strstr(t, "vllm:num_requests_running" L "} 3\n"));
    CHECK(strstr(t, "vllm:num_requests_waiting" L "} 3\n"));
    CHECK(strstr(t, "vllm:kv_cache_usage_perc" L "} 0.25\n"));
    CHECK(strstr(t, "vllm:gpu_cache_usage_perc" L "} 0.25\n"));
    CHECK(strstr(t, "# TYPE vllm:prefix_cache_queries_total counter\n"));
    CHECK(strstr(t, "vllm:prefix_cache_queries_total" L "} 300\n"));
    CHECK(strstr(t, "vllm:prefix_cache_hits_total" L "} 128\n"));
    CHECK(strstr(t, "vllm:request_success_total" L ",finished_reason=\"stop\"} 4\n"));
    CHECK(strstr(t, "vllm:request_success_total" L ",finished_reason=\"abort\"} 1\n"));
    CHECK(strstr(t, "# TYPE vllm:time_to_first_token_seconds histogram\n"));
    CHECK(strstr(t, "vllm:time_to_first_token_seconds_bucket" L ",le=\"0.02\"} 0\n"));
    CHECK(strstr(t, "vllm:time_to_first_token_seconds_bucket" L ",le=\"0.04\"} 1\n"));
    CHECK(strstr(t, "vllm:time_to_first_token_seconds_bucket" L ",le=\"2560.0\"} 1\n"));
    CHECK(strstr(t, "vllm:time_to_first_token_seconds_bucket" L ",le=\"+Inf\"} 1\n"));
    CHECK(strstr(t, "vllm:time_per_output_token_seconds_count" L "} 4\n"));
    CHECK(strstr(t, "vllm:time_per_output_token_seconds_bucket" L ",le=\"0.075\"} 0\n"));
    CHECK(strstr(t, "vllm:time_per_output_token_seconds_bucket" L ",le=\"0.1\"} 4\n"));
    CHECK(strstr(t, "vllm:e2e_request_latency_seconds_bucket" L ",le=\"0.5\"} 1\n"));
    CHECK(strstr(t, "vllm:request_queue_time_seconds_count" L "} 1\n"));
    CHECK(strstr(t, "# TYPE vllm:lora_requests_info gauge\n"));
    CHECK(strstr(t, "vllm:lora_requests_info{max_lora=\"0\",running_lora_adapters=\"\","
                    "waiting_lora_adapters=\"\"} "));
#undef L
    /* without a model name (a caller that does not serve one) the family is left out */
    fr_buf o2 = {0};
    fr_metrics_render(&m, &st, NULL, &o2);
    CHECK(!strstr(fr_buf_cstr(&o2), "vllm:"));
    CHECK(strstr(fr_buf_cstr(&o2), "frugal_prefix_cache_hit_tokens_total 128\n"));
    fr_buf_free(&o);
    fr_buf_free(&o2);
    fr_metrics_destroy(&m);
}

int main(void) { return t_main(); }
