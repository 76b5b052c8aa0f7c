/* toolcall.c — tool-call formats per template family (toolcall.h).
 *
 * Forced calls: the call object is a JSON Schema the grammar compiler already knows,
 *   {"type": "object", "properties": {"name": {"const": NAME}, ARGS: PARAMETERS},
 *    "required": ["name", ARGS], "additionalProperties": false}
 * (ARGS "arguments" for Qwen, "parameters" for Llama-3.1), an anyOf over the tools for
 * "required", wrapped in "<tool_call>\n" ... "\n</tool_call>" for Qwen.
 *
 * Parsing is bounded: at most FR_TOOL_MAX_CALLS blocks; each block's JSON is parsed by cJSON
 * with the length given.
 */
#include "serve/toolcall.h"

#include "engine/grammar.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char QWEN_OPEN[] = "<tool_call>", QWEN_CLOSE[] = "</tool_call>";

fr_tool_family fr_tool_family_of(const char *tmpl) {
    if (!tmpl) return FR_TOOL_NONE;
    if (strstr(tmpl, QWEN_OPEN)) return FR_TOOL_QWEN;
    if (strstr(tmpl, "<|python_tag|>") || (strstr(tmpl, "<|eot_id|>") && strstr(tmpl, "tools")))
        return FR_TOOL_LLAMA3;
    return FR_TOOL_NONE;
}

static const char *args_key(fr_tool_family f) { return f == FR_TOOL_QWEN ? "arguments" : "parameters"; }

static const cJSON *tool_fn(const cJSON *tool) {
    return cJSON_GetObjectItemCaseSensitive(tool, "function");
}

static const char *tool_name(const cJSON *tool) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(tool_fn(tool), "name");
    return cJSON_IsString(n) ? n->valuestring : NULL;
}

/* the schema of one call to `tool` */
static cJSON *call_schema(fr_tool_family f, const cJSON *tool) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "type", "object");
    cJSON *props = cJSON_AddObjectToObject(s, "properties");
    cJSON *nm = cJSON_AddObjectToObject(props, "name");
    cJSON_AddStringToObject(nm, "const", tool_name(tool));
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(tool_fn(tool), "parameters");
    cJSON *p = params ? cJSON_Duplicate(params, true) : cJSON_CreateObject();
    if (!params) cJSON_AddStringToObject(p, "type", "object");
    cJSON_AddItemToObject(props, args_key(f), p);
    cJSON *req = cJSON_AddArrayToObject(s, "required");
    cJSON_AddItemToArray(req, cJSON_CreateString("name"));
    cJSON_AddItemToArray(req, cJSON_CreateString(args_key(f)));
    cJSON_AddFalseToObject(s, "additionalProperties");
    return s;
}

fr_grammar *fr_tool_grammar(fr_tool_family f, const cJSON *tools, const char *name, fr_err *err) {
    if (f == FR_TOOL_NONE) {
        fr_err_setc(err, FR_ERR_UNSUPPORTED, "this model's chat template has no tool-call format");
        return NULL;
    }
    cJSON *any = cJSON_CreateArray();
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const char *n = tool_name(t);
        if (n && (!name || !strcmp(n, name))) cJSON_AddItemToArray(any, call_schema(f, t));
    }
    int n_alt = cJSON_GetArraySize(any);
    if (n_alt == 0) {
        cJSON_Delete(any);
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "no tool named \"%.64s\"", name ? name : "");
        return NULL;
    }
    cJSON *schema;
    if (n_alt == 1) {
        schema = cJSON_DetachItemFromArray(any, 0);
        cJSON_Delete(any);
    } else {
        schema = cJSON_CreateObject();
        cJSON_AddItemToObject(schema, "anyOf", any);
    }
    fr_grammar *g = fr_grammar_from_schema(schema, f == FR_TOOL_QWEN ? "<tool_call>\n" : NULL,
                                           f == FR_TOOL_QWEN ? "\n</tool_call>" : NULL, err);
    cJSON_Delete(schema);
    return g;
}

static bool known_tool(const cJSON *tools, const char *name) {
    if (!tools) return true;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const char *n = tool_name(t);
        if (n && !strcmp(n, name)) return true;
    }
    return false;
}

/* one OpenAI tool call from a parsed {"name", ARGS} object, or NULL */
static cJSON *make_call(const cJSON *obj, const cJSON *tools, uint64_t seed, int idx) {
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, "name");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "arguments");
    if (!a) a = cJSON_GetObjectItemCaseSensitive(obj, "parameters");
    if (!cJSON_IsString(n) || !known_tool(tools, n->valuestring)) return NULL;
    if (a && !cJSON_IsObject(a)) return NULL;
    char *args = a ? cJSON_PrintUnformatted(a) : NULL;
    cJSON *c = cJSON_CreateObject();
    char id[48];
    uint64_t x = (seed + (uint64_t)idx + 1) * 0x9E3779B97F4A7C15ull;
    snprintf(id, sizeof id, "call_%016llx%08x", (unsigned long long)x,
             (unsigned)(x >> 17) ^ (unsigned)idx);
    cJSON_AddStringToObject(c, "id", id);
    cJSON_AddStringToObject(c, "type", "function");
    cJSON *fn = cJSON_AddObjectToObject(c, "function");
    cJSON_AddStringToObject(fn, "name", n->valuestring);
    cJSON_AddStringToObject(fn, "arguments", args ? args : "{}");
    free(args);
    return c;
}

static cJSON *parse_obj(const char *s, size_t n) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(s, n, &end, false);
    if (!v) return NULL;
    while (end < s + n && strchr(" \t\r\n", *end)) end++;
    if (!cJSON_IsObject(v) || end != s + n) {
        cJSON_Delete(v);
        return NULL;
    }
    return v;
}

static void trim(const char **s, size_t *n) {
    while (*n && strchr(" \t\r\n", (*s)[0])) (*s)++, (*n)--;
    while (*n && strchr(" \t\r\n", (*s)[*n - 1])) (*n)--;
}

/* Qwen: each <tool_call>...</tool_call> block that holds a valid call; the rest is content */
static cJSON *parse_qwen(const char *text, size_t len, const cJSON *tools, uint64_t seed,
                         fr_buf *rest) {
    cJSON *calls = cJSON_CreateArray();
    const char *p = text, *end = text + len;
    int k = 0;
    while (p < end && k < FR_TOOL_MAX_CALLS) {
        const char *o = memmem(p, (size_t)(end - p), QWEN_OPEN, sizeof QWEN_OPEN - 1);
        if (!o) break;
        const char *b = o + sizeof QWEN_OPEN - 1;
        const char *c = memmem(b, (size_t)(end - b), QWEN_CLOSE, sizeof QWEN_CLOSE - 1);
        const char *bend = c ? c : end; /* an unclosed last block (max_tokens) is tried too */
        const char *js = b;
        size_t jn = (size_t)(bend - b);
        trim(&js, &jn);
        cJSON *obj = parse_obj(js, jn);
        cJSON *call = obj ? make_call(obj, tools, seed, k) : NULL;
        cJSON_Delete(obj);
        const char *next = c ? c + sizeof QWEN_CLOSE - 1 : end;
        fr_buf_append(rest, p, (size_t)(o - p));
        if (call) {
            cJSON_AddItemToArray(calls, call);
            k++;
        } else {
            fr_buf_append(rest, o, (size_t)(next - o));
        }
        p = next;
    }
    fr_buf_append(rest, p, (size_t)(end - p));
    return calls;
}

/* Llama-3.1: the whole reply is one call object */
static cJSON *parse_llama(const char *text, size_t len, const cJSON *tools, uint64_t seed,
                          fr_buf *rest) {
    cJSON *calls = cJSON_CreateArray();
    const char *s = text;
    size_t n = len;
    trim(&s, &n);
    static const char tag[] = "<|python_tag|>";
    if (n >= sizeof tag - 1 && !memcmp(s, tag, sizeof tag - 1)) {
        s += sizeof tag - 1;
        n -= sizeof tag - 1;
        trim(&s, &n);
    }
    cJSON *obj = n && s[0] == '{' ? parse_obj(s, n) : NULL;
    cJSON *call = obj ? make_call(obj, tools, seed, 0) : NULL;
    cJSON_Delete(obj);
    if (call) cJSON_AddItemToArray(calls, call);
    else fr_buf_append(rest, text, len);
    return calls;
}

cJSON *fr_tool_parse(fr_tool_family f, const char *text, size_t len, const cJSON *tools,
                     uint64_t id_seed, char **content) {
    *content = NULL;
    if (f == FR_TOOL_NONE || !text) return NULL;
    fr_buf rest = {0};
    cJSON *calls = f == FR_TOOL_QWEN ? parse_qwen(text, len, tools, id_seed, &rest)
                                     : parse_llama(text, len, tools, id_seed, &rest);
    if (cJSON_GetArraySize(calls) == 0) {
        cJSON_Delete(calls);
        fr_buf_free(&rest);
        return NULL;
    }
    const char *s = rest.data ? rest.data : "";
    size_t n = rest.len;
    trim(&s, &n);
    if (n) *content = fr_xstrndup(s, n);
    fr_buf_free(&rest);
    return calls;
}

size_t fr_tool_stream_safe(fr_tool_family f, const char *text, size_t len, size_t released) {
    size_t safe = released;
    if (f == FR_TOOL_QWEN) {
        const char *o = memmem(text, len, QWEN_OPEN, sizeof QWEN_OPEN - 1);
        if (o) {
            safe = (size_t)(o - text);
        } else { /* keep back a tail that may begin "<tool_call>" */
            size_t keep = 0;
            for (size_t k = FR_MIN(len, sizeof QWEN_OPEN - 2); k > 0 && !keep; k--)
                if (!memcmp(text + len - k, QWEN_OPEN, k)) keep = k;
            safe = len - keep;
        }
    } else if (f == FR_TOOL_LLAMA3) {
        size_t i = 0;
        while (i < len && strchr(" \t\r\n", text[i]) && text[i]) i++;
        if (i < len && text[i] != '{' && text[i] != '<') safe = len; /* plain text */
    }
    return safe > released ? safe : released;
}
