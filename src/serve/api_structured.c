/* api_structured.c — the request fields of structured outputs and function calling
 * (docs/SERVING.md): response_format (text, json_object, json_schema compiled to a grammar
 * here, so that an unsupported keyword is a 400 naming it), tools, tool_choice and
 * parallel_tool_calls. Bounds: FR_API_MAX_TOOLS tools, names of 1..64 characters
 * [A-Za-z0-9_-], OpenAI's rule.
 */
#include "serve/api.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "engine/grammar.h"

#define FR_API_MAX_TOOLS 64

static const cJSON *fld(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static bool good_name(const cJSON *n) {
    if (!cJSON_IsString(n)) return false;
    size_t len = strlen(n->valuestring);
    if (len < 1 || len > 64) return false;
    for (const char *p = n->valuestring; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_' || *p == '-'))
            return false;
    return true;
}

/* the schema compiler's error as an OpenAI 400 */
static int schema_error(fr_api_error *err, const fr_err *fe, const char *param, const char *what) {
    const char *code = fe->code == FR_ERR_UNSUPPORTED ? "unsupported_schema"
                       : fe->code == FR_ERR_TOO_LARGE ? "schema_too_large"
                                                      : "invalid_schema";
    fr_api_error_set(err, 400, "invalid_request_error", code, param, "Invalid schema for %s: %s",
                     what, fe->msg);
    return -1;
}

static int parse_json_schema(const cJSON *js, fr_api_req *out, fr_api_error *err) {
    const char *P = "response_format.json_schema";
    if (!cJSON_IsObject(js)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, P, "\"%s\" must be an object", P);
        return -1;
    }
    const cJSON *name = fld(js, "name"), *schema = fld(js, "schema"), *strict = fld(js, "strict");
    if (!good_name(name)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "response_format.json_schema.name",
                         "response_format.json_schema.name must be 1 to 64 characters of a-z, "
                         "A-Z, 0-9, '_' and '-'");
        return -1;
    }
    if (strict && !cJSON_IsBool(strict)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "response_format.json_schema.strict",
                         "response_format.json_schema.strict must be true or false");
        return -1;
    }
    fr_err fe = {0};
    out->grammar = fr_grammar_from_schema(schema, NULL, NULL, &fe); /* no schema: any object */
    if (!out->grammar) {
        char what[96];
        snprintf(what, sizeof what, "response_format '%s'", name->valuestring);
        return schema_error(err, &fe, "response_format.json_schema.schema", what);
    }
    return 0;
}

static int parse_response_format(const cJSON *rf, fr_api_req *out, fr_api_error *err) {
    const cJSON *t = cJSON_IsObject(rf) ? fld(rf, "type") : NULL;
    if (!cJSON_IsString(t)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "response_format",
                         "\"response_format\" must be an object with a \"type\"");
        return -1;
    }
    if (!strcmp(t->valuestring, "text")) return 0;
    if (!strcmp(t->valuestring, "json_schema")) return parse_json_schema(fld(rf, "json_schema"), out, err);
    if (!strcmp(t->valuestring, "json_object")) {
        fr_err fe = {0};
        out->grammar = fr_grammar_from_schema(NULL, NULL, NULL, &fe);
        return out->grammar ? 0 : schema_error(err, &fe, "response_format", "json_object");
    }
    fr_api_error_set(err, 400, "invalid_request_error", NULL, "response_format.type",
                     "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
    return -1;
}

/* one entry of "tools": {"type": "function", "function": {"name", "description"?,
 * "parameters"?, "strict"?}}, its name distinct from the earlier ones */
static int check_tool(const cJSON *t, int i, const cJSON *tools, fr_api_error *err) {
    char param[64];
    snprintf(param, sizeof param, "tools[%d]", i);
    const cJSON *ty = cJSON_IsObject(t) ? fld(t, "type") : NULL, *fn = fld(t, "function");
    if (!cJSON_IsString(ty) || strcmp(ty->valuestring, "function") || !cJSON_IsObject(fn)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s must be {\"type\": \"function\", \"function\": {...}}", param);
        return -1;
    }
    const cJSON *name = fld(fn, "name"), *params = fld(fn, "parameters"), *d = fld(fn, "description");
    if (!good_name(name) || (d && !cJSON_IsString(d)) || (params && !cJSON_IsObject(params))) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                         "%s.function needs a name of 1 to 64 characters of a-z, A-Z, 0-9, '_' "
                         "and '-', a string description and an object parameters", param);
        return -1;
    }
    int k = 0;
    const cJSON *o;
    cJSON_ArrayForEach(o, tools) {
        if (k++ >= i) break;
        const cJSON *on = fld(fld(o, "function"), "name");
        if (cJSON_IsString(on) && !strcmp(on->valuestring, name->valuestring)) {
            fr_api_error_set(err, 400, "invalid_request_error", NULL, param,
                             "two tools are named \"%s\"", name->valuestring);
            return -1;
        }
    }
    return 0;
}

static int parse_tools(const cJSON *tools, fr_api_kind kind, fr_api_req *out, fr_api_error *err) {
    if (!cJSON_IsArray(tools)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "tools", "\"tools\" must be an array");
        return -1;
    }
    int n = cJSON_GetArraySize(tools);
    if (n == 0) return 0;
    if (kind != FR_API_CHAT) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_parameter", "tools",
                         "\"tools\" needs /v1/chat/completions");
        return -1;
    }
    if (n > FR_API_MAX_TOOLS) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "tools",
                         "\"tools\" holds %d tools; at most %d are accepted", n, FR_API_MAX_TOOLS);
        return -1;
    }
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) if (check_tool(t, i++, tools, err)) return -1;
    out->tools = cJSON_Duplicate(tools, true);
    out->tool_choice = FR_API_TOOLS_AUTO;
    return 0;
}

static bool has_tool(const cJSON *tools, const char *name) {
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *n = fld(fld(t, "function"), "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) return true;
    }
    return false;
}

static int parse_tool_choice(const cJSON *tc, fr_api_req *out, fr_api_error *err) {
    const char *P = "tool_choice";
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")) {
        out->tool_choice = FR_API_TOOLS_NONE;
        return 0;
    }
    if (cJSON_IsString(tc) && !strcmp(tc->valuestring, "auto")) return 0;
    bool req = cJSON_IsString(tc) && !strcmp(tc->valuestring, "required");
    const cJSON *fn = cJSON_IsObject(tc) ? fld(tc, "function") : NULL;
    const cJSON *ty = cJSON_IsObject(tc) ? fld(tc, "type") : NULL;
    const cJSON *name = fld(fn, "name");
    bool named = cJSON_IsString(ty) && !strcmp(ty->valuestring, "function") && cJSON_IsString(name);
    if (!req && !named) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, P,
                         "\"tool_choice\" must be \"none\", \"auto\", \"required\" or {\"type\": "
                         "\"function\", \"function\": {\"name\": ...}}");
        return -1;
    }
    if (!out->tools) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, P,
                         "\"tool_choice\" forces a call but \"tools\" is empty");
        return -1;
    }
    if (named && !has_tool(out->tools, name->valuestring)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "tool_choice.function.name",
                         "no tool is named \"%.64s\"", name->valuestring);
        return -1;
    }
    out->tool_choice = req ? FR_API_TOOLS_REQUIRED : FR_API_TOOLS_NAMED;
    if (named) out->tool_name = fr_xstrdup(name->valuestring);
    return 0;
}

int fr_api_parse_structured(const cJSON *root, fr_api_kind kind, fr_api_req *out,
                            fr_api_error *err) {
    const cJSON *it;
    if ((it = fld(root, "response_format")) && parse_response_format(it, out, err)) return -1;
    if ((it = fld(root, "tools")) && parse_tools(it, kind, out, err)) return -1;
    if ((it = fld(root, "tool_choice")) && parse_tool_choice(it, out, err)) return -1;
    if ((it = fld(root, "parallel_tool_calls")) && !cJSON_IsBool(it)) {
        fr_api_error_set(err, 400, "invalid_request_error", NULL, "parallel_tool_calls",
                         "\"parallel_tool_calls\" must be true or false");
        return -1;
    }
    if (out->grammar && out->tool_choice >= FR_API_TOOLS_REQUIRED) {
        fr_api_error_set(err, 400, "invalid_request_error", "unsupported_parameter",
                         "response_format",
                         "\"response_format\" cannot be combined with a forced \"tool_choice\"");
        return -1;
    }
    if (out->tool_choice == FR_API_TOOLS_NONE) {
        cJSON_Delete(out->tools);
        out->tools = NULL;
    }
    return 0;
}
