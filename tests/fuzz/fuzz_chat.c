/* fuzz_chat.c — libFuzzer harness for the chat-template interpreter (src/model/chat.c and
 * src/model/jinja_*.c).
 *
 * The input bytes are the template source. It is rendered over a fixed conversation that has a
 * system message, multibyte text, an assistant tool call and tool results, with a tools list, so
 * that real template code paths (tojson, loops over tool calls, namespace bookkeeping) get data
 * to work on. Invariants: a render either succeeds or fails with a non-empty one-line message;
 * compiling once and rendering twice gives the same result as the one-shot render (templates
 * that read the clock are exempt); sanitizers catch memory errors and undefined behaviour, and
 * the interpreter's caps keep every input bounded in time and memory.
 */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/chat.h"

static const char MESSAGES[] =
    "[{\"role\": \"system\", \"content\": \"You are a bank assistant.\"},"
    " {\"role\": \"user\", \"content\": \"  I lost my card \\u2014 freeze it \\ud83d\\ude22\\n\"},"
    " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"c1\", \"type\":"
    "   \"function\", \"function\": {\"name\": \"freeze_card\", \"arguments\": {\"last4\":"
    "   \"1234\", \"reason\": [\"lost\", 1, 2.5, null, true]}}}]},"
    " {\"role\": \"tool\", \"content\": \"{\\\"ok\\\": true}\", \"tool_call_id\": \"c1\"},"
    " {\"role\": \"tool\", \"content\": \"done\"},"
    " {\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"thanks\"},"
    "   {\"type\": \"image\"}]},"
    " {\"role\": \"assistant\", \"content\": \"<think>ok</think>You are welcome.\"}]";

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"freeze_card\", \"description\":"
    " \"Freeze a card \\u00e9\", \"parameters\": {\"type\": \"object\", \"properties\": {\"last4\":"
    " {\"type\": \"string\"}, \"reason\": {\"type\": \"array\", \"items\": {\"type\": \"string\"}}},"
    " \"required\": [\"last4\"]}}}]";

static cJSON *messages, *tools;

static void check_error(const fr_err *err) {
    size_t n = strlen(err->msg);
    if (n == 0 || memchr(err->msg, '\n', n)) {
        fprintf(stderr, "bad error message: [%s]\n", err->msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!messages) {
        messages = cJSON_Parse(MESSAGES);
        tools = cJSON_Parse(TOOLS);
        if (!messages || !tools) abort();
    }
    char *tmpl = malloc(size + 1);
    if (!tmpl) return 0;
    memcpy(tmpl, data, size);
    tmpl[size] = 0;
    fr_chat_opts o = {.add_generation_prompt = true,
                      .bos_token = "<s>",
                      .eos_token = "</s>",
                      .tools = (size & 1) ? tools : NULL};
    fr_err e1 = {0}, e2 = {0};
    char *r1 = fr_chat_render(tmpl, messages, &o, &e1);
    if (!r1) check_error(&e1);

    fr_chat_template *t = fr_chat_compile(tmpl, &e2);
    if (!t) {
        check_error(&e2);
        if (r1) abort(); /* the one-shot render compiled it */
    } else {
        char *r2 = fr_chat_render_compiled(t, messages, &o, &e2);
        if (!r2) check_error(&e2);
        bool clock = strstr(tmpl, "strftime_now") != NULL;
        if (!clock && (!r1 != !r2 || (r1 && strcmp(r1, r2)))) {
            fprintf(stderr, "one-shot and compiled renders differ\n");
            abort();
        }
        free(r2);
        fr_chat_free(t);
    }
    free(r1);
    free(tmpl);
    return 0;
}
