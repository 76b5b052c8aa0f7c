/* toolcall.h — function calling per chat-template family: which format a template's model
 * writes tool calls in, the grammar that forces a valid call (tool_choice "required" or a named
 * function), and the parser that turns generated text into OpenAI tool_calls.
 *
 * Families:
 *   QWEN   (Qwen2.5 / ChatML with tools): <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>,
 *          one block per call, text around the blocks is the message content;
 *   LLAMA3 (Llama-3.1 JSON tool calling): the whole reply is {"name": "f", "parameters": {...}},
 *          optionally after <|python_tag|>; "arguments" is accepted for "parameters".
 *
 *   fr_tool_family f = fr_tool_family_of(template_source);
 *   cJSON *calls = fr_tool_parse(f, text, len, &content);   // OpenAI shape, or NULL: no call
 *
 * All functions are thread-safe (no state).
 */
#ifndef FRUGAL_SERVE_TOOLCALL_H
#define FRUGAL_SERVE_TOOLCALL_H

#include "base/base.h"

struct cJSON;
struct fr_grammar;

typedef enum fr_tool_family {
    FR_TOOL_NONE = 0, /* the template shows no tool-call format */
    FR_TOOL_QWEN,
    FR_TOOL_LLAMA3,
} fr_tool_family;

#define FR_TOOL_MAX_CALLS 16 /* calls parsed from one reply */

/* The family of a chat template's source (NULL: NONE). */
fr_tool_family fr_tool_family_of(const char *tmpl);

/* The grammar of exactly one call to `name` (NULL: any of the tools) whose arguments match that
 * tool's "parameters" schema (absent: any object). tools: the request's validated "tools" array.
 * NULL with err (the schema compiler's codes; the message names the tool). */
struct fr_grammar *fr_tool_grammar(fr_tool_family f, const struct cJSON *tools, const char *name,
                                   fr_err *err);

/* The tool calls in generated text, as an OpenAI tool_calls array ({id, type: "function",
 * function: {name, arguments: JSON string}}; ids "call_" + 24 hex digits from id_seed and the
 * index), or NULL when the text holds none (then it is plain content). *content (malloc'd, may
 * be NULL when empty) is the text outside the calls, trimmed. A call whose name is not among
 * `tools` (may be NULL: any) or whose JSON does not parse is left in the content. */
struct cJSON *fr_tool_parse(fr_tool_family f, const char *text, size_t len,
                            const struct cJSON *tools, uint64_t id_seed, char **content);

/* Streaming with tools: how many leading bytes of the reply so far (text[0..len)) are surely
 * content and may be sent as content deltas now. Qwen: everything before the first <tool_call>
 * (less a tail that could be its beginning); Llama-3.1: everything, once the reply's first
 * character shows it is not a call ('{' or '<' start one: nothing is released then). Never
 * less than `released` (what was sent already). */
size_t fr_tool_stream_safe(fr_tool_family f, const char *text, size_t len, size_t released);

#endif
