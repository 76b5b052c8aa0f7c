/* test_toolcall.c — tool calls per template family (serve/toolcall.h): the family of the
 * built-in and fixture templates, parsing Qwen2.5 <tool_call> blocks and Llama-3.1 JSON into
 * OpenAI tool_calls (content around the calls kept, unknown names and broken JSON left as
 * content), and the forced-call grammar accepting exactly a valid call. */
#include <cjson/cJSON.h>

#include "engine/grammar.h"
#include "model/chat.h"
#include "serve/toolcall.h"
#include "t.h"

static const char TOOLS[] =
    "[{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"parameters\":{\"type\":"
    "\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"days\":{\"type\":\"integer\"}},"
    "\"required\":[\"city\"]}}},{\"type\":\"function\",\"function\":{\"name\":\"block_card\"}}]";

static const char *call_name(const cJSON *calls, int i) {
    const cJSON *c = cJSON_GetArrayItem(calls, i);
    return cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "name")->valuestring;
}
static const char *call_args(const cJSON *calls, int i) {
    const cJSON *c = cJSON_GetArrayItem(calls, i);
    return cJSON_GetObjectItem(cJSON_GetObjectItem(c, "function"), "arguments")->valuestring;
}

TEST(families) {
    CHECK_EQ_INT(fr_tool_family_of(fr_chat_builtin("chatml")), FR_TOOL_QWEN);
    CHECK_EQ_INT(fr_tool_family_of(fr_chat_builtin("llama3")), FR_TOOL_NONE); /* no tools part */
    CHECK_EQ_INT(fr_tool_family_of("{{ '<|python_tag|>' }}"), FR_TOOL_LLAMA3);
    CHECK_EQ_INT(fr_tool_family_of(NULL), FR_TOOL_NONE);
}

TEST(qwen_blocks) {
    cJSON *tools = cJSON_Parse(TOOLS);
    const char *t = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                    "{\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n<tool_call>\n{\"name\": "
                    "\"block_card\", \"arguments\": {}}\n</tool_call>";
    char *content = NULL;
    cJSON *calls = fr_tool_parse(FR_TOOL_QWEN, t, strlen(t), tools, 1, &content);
    CHECK(calls && cJSON_GetArraySize(calls) == 2);
    if (calls) {
        CHECK_STR(call_name(calls, 0), "get_weather");
        CHECK_STR(call_args(calls, 0), "{\"city\":\"Paris\",\"days\":2}");
        CHECK_STR(call_name(calls, 1), "block_card");
        CHECK_STR(call_args(calls, 1), "{}");
        const cJSON *c0 = cJSON_GetArrayItem(calls, 0);
        CHECK_STR(cJSON_GetObjectItem(c0, "type")->valuestring, "function");
        CHECK(!strncmp(cJSON_GetObjectItem(c0, "id")->valuestring, "call_", 5));
        CHECK(strcmp(cJSON_GetObjectItem(c0, "id")->valuestring,
                     cJSON_GetObjectItem(cJSON_GetArrayItem(calls, 1), "id")->valuestring));
    }
    CHECK_STR(content, "Let me check.");
    free(content);
    cJSON_Delete(calls);
    /* an unknown tool and broken JSON stay content; no call at all gives NULL */
    const char *u = "<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call> and "
                    "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": </tool_call>";
    calls = fr_tool_parse(FR_TOOL_QWEN, u, strlen(u), tools, 1, &content);
    CHECK(!calls && !content);
    calls = fr_tool_parse(FR_TOOL_QWEN, "plain text", 10, tools, 1, &content);
    CHECK(!calls && !content);
    cJSON_Delete(tools);
}

TEST(qwen_unclosed_last_block) {
    const char *t = "<tool_call>\n{\"name\": \"block_card\", \"arguments\": {\"x\": 1}}";
    char *content = NULL;
    cJSON *calls = fr_tool_parse(FR_TOOL_QWEN, t, strlen(t), NULL, 3, &content);
    CHECK(calls && cJSON_GetArraySize(calls) == 1);
    CHECK(!content);
    cJSON_Delete(calls);
}

TEST(llama_json) {
    cJSON *tools = cJSON_Parse(TOOLS);
    const char *t = "  {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n";
    char *content = NULL;
    cJSON *calls = fr_tool_parse(FR_TOOL_LLAMA3, t, strlen(t), tools, 9, &content);
    CHECK(calls && cJSON_GetArraySize(calls) == 1);
    if (calls) {
        CHECK_STR(call_name(calls, 0), "get_weather");
        CHECK_STR(call_args(calls, 0), "{\"city\":\"Oslo\"}");
    }
    CHECK(!content);
    cJSON_Delete(calls);
    const char *p = "<|python_tag|>{\"name\": \"block_card\", \"arguments\": {}}";
    calls = fr_tool_parse(FR_TOOL_LLAMA3, p, strlen(p), tools, 9, &content);
    CHECK(calls && cJSON_GetArraySize(calls) == 1);
    cJSON_Delete(calls);
    const char *x = "The weather is {\"name\": \"get_weather\"} fine";
    calls = fr_tool_parse(FR_TOOL_LLAMA3, x, strlen(x), tools, 9, &content);
    CHECK(!calls);
    cJSON_Delete(tools);
}

static bool accepts(const fr_grammar *g, const char *text) {
    static fr_gstate st, tmp[2];
    fr_gstate_init(g, &st);
    return fr_gstate_feed_bytes(g, &st, text, strlen(text), tmp) && fr_gstate_can_finish(g, &st);
}

TEST(forced_call_grammar) {
    cJSON *tools = cJSON_Parse(TOOLS);
    fr_err err = {0};
    fr_grammar *q = fr_tool_grammar(FR_TOOL_QWEN, tools, NULL, &err);
    CHECK(q);
    if (q) {
        CHECK(accepts(q, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                         "\"Rome\"}}\n</tool_call>"));
        CHECK(accepts(q, "<tool_call>\n{\"name\":\"block_card\",\"arguments\":{}}\n</tool_call>"));
        CHECK(!accepts(q, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));
        CHECK(!accepts(q, "{\"name\":\"block_card\",\"arguments\":{}}"));
    }
    fr_grammar_free(q);
    fr_grammar *l = fr_tool_grammar(FR_TOOL_LLAMA3, tools, "get_weather", &err);
    CHECK(l);
    if (l) {
        CHECK(accepts(l, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Rome\", \"days\": 3}}"));
        CHECK(!accepts(l, "{\"name\": \"block_card\", \"parameters\": {}}"));
    }
    fr_grammar_free(l);
    CHECK(!fr_tool_grammar(FR_TOOL_QWEN, tools, "nope", &err));
    CHECK(!fr_tool_grammar(FR_TOOL_NONE, tools, NULL, &err));
    CHECK_EQ_INT(err.code, FR_ERR_UNSUPPORTED);
    cJSON_Delete(tools);
}

TEST(stream_safe_prefix) {
    const char *t = "Sure. <tool";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_QWEN, t, strlen(t), 0), 6); /* "<tool" kept back */
    t = "Sure. <tool_call>\n{\"name\"";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_QWEN, t, strlen(t), 0), 6);
    t = "a < b";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_QWEN, t, strlen(t), 0), 5);
    t = "<";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_QWEN, t, 1, 0), 0);
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_QWEN, t, 1, 3), 3); /* never below what was sent */
    t = "  {\"name\": \"f\"";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_LLAMA3, t, strlen(t), 0), 0);
    t = "  ";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_LLAMA3, t, 2, 0), 0);
    t = "  Hello";
    CHECK_EQ_INT(fr_tool_stream_safe(FR_TOOL_LLAMA3, t, strlen(t), 0), 7);
}

int main(void) { return t_main(); }
