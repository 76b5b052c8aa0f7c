/* test_chat.c — chat templates (src/model/chat.h and the Jinja2 interpreter behind it).
 *
 * Reference renders: every chat of tests/fixtures/ref/{qwen2-tiny,llama-tiny}.json must come out
 * byte-identical to what transformers rendered, with the template read from the fixture files and
 * again with the built-in templates. Then focused tests of the interpreter whose expected strings
 * were derived by hand from Jinja2's semantics (trim_blocks / lstrip_blocks whitespace, loop
 * variables, scoping, namespace, tojson, tests, slicing, errors), the Qwen2.5 template with tools
 * and tool calls, and hostile inputs that must fail cleanly (never crash, never run unbounded).
 */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <string.h>

#include "model/chat.h"
#include "t.h"

#define HINT "choose a built-in template with --chat-template chatml|llama3"

static char *fixture(const char *rel) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", t_fixtures(), rel);
    fr_err err = {0};
    size_t n;
    char *s = fr_read_file(path, 64u << 20, &n, &err);
    if (!s) fprintf(stderr, "  %s\n", err.msg);
    return s;
}

/* Render with messages given as JSON text; NULL on error (message in err). */
static char *render_json(const char *tmpl, const char *messages, const fr_chat_opts *o,
                         fr_err *err) {
    cJSON *m = cJSON_Parse(messages);
    if (!m) {
        fr_err_set(err, "test: bad messages JSON");
        return NULL;
    }
    char *s = fr_chat_render(tmpl, m, o, err);
    cJSON_Delete(m);
    return s;
}

static const char *MSGS =
    "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U1\"},"
    " {\"role\": \"assistant\", \"content\": \"A1\"}]";

/* Render `tmpl` over MSGS and compare with `want`. */
#define CHECK_RENDER(tmpl, want)                                                            \
    do {                                                                                    \
        fr_err e_ = {0};                                                                  \
        fr_chat_opts o_ = {.add_generation_prompt = true};                                  \
        char *got_ = render_json((tmpl), MSGS, &o_, &e_);                                    \
        if (!got_) fprintf(stderr, "  render failed: %s\n", e_.msg);                        \
        CHECK_STR(got_, (want));                                                            \
        free(got_);                                                                         \
    } while (0)

/* Render `tmpl` over MSGS, expecting an error that contains `part`. */
#define CHECK_FAILS(tmpl, part)                                                             \
    do {                                                                                    \
        fr_err e_ = {0};                                                                  \
        fr_chat_opts o_ = {.add_generation_prompt = true};                                  \
        char *got_ = render_json((tmpl), MSGS, &o_, &e_);                                    \
        CHECK(got_ == NULL);                                                                \
        if (got_) fprintf(stderr, "  unexpected output: [%.200s]\n", got_);                 \
        else if (!strstr(e_.msg, (part)))                                                   \
            fprintf(stderr, "  error [%s] lacks [%s]\n", e_.msg, (part));                   \
        CHECK(got_ != NULL || strstr(e_.msg, (part)) != NULL);                              \
        CHECK(strchr(e_.msg, '\n') == NULL);                                                \
        free(got_);                                                                         \
    } while (0)

/* ---- reference renders -------------------------------------------------------------------- */

static int check_ref_chats(const char *model, const char *tmpl, const char *bos, const char *eos) {
    char rel[128];
    snprintf(rel, sizeof rel, "ref/%s.json", model);
    char *txt = fixture(rel);
    CHECK(txt != NULL);
    if (!txt) return 0;
    cJSON *ref = cJSON_Parse(txt);
    free(txt);
    CHECK(ref != NULL);
    cJSON *chats = cJSON_GetObjectItem(ref, "chat");
    CHECK(cJSON_IsArray(chats));
    int n = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, chats) {
        fr_chat_opts o = {.add_generation_prompt = true, .bos_token = bos, .eos_token = eos};
        fr_err err = {0};
        char *got = fr_chat_render(tmpl, cJSON_GetObjectItem(c, "messages"), &o, &err);
        if (!got) fprintf(stderr, "  %s chat %d: %s\n", model, n, err.msg);
        CHECK_STR(got, cJSON_GetObjectItem(c, "rendered")->valuestring);
        free(got);
        n++;
    }
    cJSON_Delete(ref);
    return n;
}

static char *llama_fixture_template(void) {
    char *txt = fixture("llama-tiny/tokenizer_config.json");
    if (!txt) return NULL;
    cJSON *j = cJSON_Parse(txt);
    free(txt);
    cJSON *t = cJSON_GetObjectItem(j, "chat_template");
    char *s = cJSON_IsString(t) ? strdup(t->valuestring) : NULL;
    cJSON_Delete(j);
    return s;
}

TEST(reference_qwen2_fixture_template) {
    char *tmpl = fixture("qwen2-tiny/chat_template.jinja");
    CHECK(tmpl != NULL);
    if (!tmpl) return;
    /* qwen2 has no bos_token (undefined in transformers); eos is <|im_end|> */
    CHECK(check_ref_chats("qwen2-tiny", tmpl, NULL, "<|im_end|>") >= 4);
    free(tmpl);
}

TEST(reference_llama_fixture_template) {
    char *tmpl = llama_fixture_template();
    CHECK(tmpl != NULL);
    if (!tmpl) return;
    CHECK(check_ref_chats("llama-tiny", tmpl, "<|begin_of_text|>", "<|eot_id|>") >= 4);
    free(tmpl);
}

TEST(reference_builtin_templates) {
    CHECK(fr_chat_builtin("chatml") != NULL);
    CHECK(fr_chat_builtin("llama3") != NULL);
    CHECK(fr_chat_builtin("nope") == NULL);
    CHECK(fr_chat_builtin(NULL) == NULL);
    /* the built-ins are the templates the models ship, byte for byte */
    char *q = fixture("qwen2-tiny/chat_template.jinja"), *l = llama_fixture_template();
    CHECK_STR(fr_chat_builtin("chatml"), q);
    CHECK_STR(fr_chat_builtin("llama3"), l);
    free(q);
    free(l);
    CHECK(check_ref_chats("qwen2-tiny", fr_chat_builtin("chatml"), NULL, "<|im_end|>") >= 4);
    CHECK(check_ref_chats("llama-tiny", fr_chat_builtin("llama3"), "<|begin_of_text|>",
                          "<|eot_id|>") >= 4);
}

/* ---- Qwen2.5 with tools (expected string derived by hand from the template) ---------------- */

TEST(qwen25_tools_and_tool_calls) {
    const char *msgs =
        "[{\"role\": \"user\", \"content\": \"What's the weather in Paris?\"},"
        " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"type\": \"function\","
        "   \"function\": {\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}]},"
        " {\"role\": \"tool\", \"content\": \"{\\\"temp\\\": 22}\"}]";
    cJSON *tools = cJSON_Parse(
        "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\":"
        " \"Get weather \\u00e9\", \"parameters\": {\"type\": \"object\","
        " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}]");
    CHECK(tools != NULL);
    fr_chat_opts o = {.add_generation_prompt = true, .eos_token = "<|im_end|>", .tools = tools};
    fr_err err = {0};
    char *got = render_json(fr_chat_builtin("chatml"), msgs, &o, &err);
    if (!got) fprintf(stderr, "  %s\n", err.msg);
    CHECK_STR(got,
              "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
              "assistant.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
              "query.\n\nYou are provided with function signatures within <tools></tools> XML "
              "tags:\n<tools>\n"
              "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "
              "\"Get weather \xc3\xa9\", \"parameters\": {\"type\": \"object\", \"properties\": "
              "{\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}}"
              "\n</tools>\n\nFor each function call, return a json object with function name and "
              "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
              "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n"
              "<|im_start|>user\nWhat's the weather in Paris?<|im_end|>\n"
              "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
              "{\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n"
              "<|im_start|>user\n<tool_response>\n{\"temp\": 22}\n</tool_response><|im_end|>\n"
              "<|im_start|>assistant\n");
    free(got);
    /* with a system message, it replaces the default one inside the tools preamble */
    const char *msgs2 = "[{\"role\": \"system\", \"content\": \"Be brief.\"},"
                        " {\"role\": \"user\", \"content\": \"Hi\"}]";
    got = render_json(fr_chat_builtin("chatml"), msgs2, &o, &err);
    CHECK(got && strncmp(got, "<|im_start|>system\nBe brief.\n\n# Tools\n", 37) == 0);
    CHECK(got && strstr(got, "</tool_call><|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                             "<|im_start|>assistant\n") != NULL);
    free(got);
    cJSON_Delete(tools);
}

/* ---- whitespace control ------------------------------------------------------------------- */

TEST(whitespace_trim_and_lstrip_blocks) {
    /* trim_blocks: the newline after a block tag goes; lstrip_blocks: indentation before it */
    CHECK_RENDER("a\n{% if true %}\n  x\n{% endif %}\nb", "a\n  x\nb");
    CHECK_RENDER(
        "<ul>\n    {% for m in messages %}\n    <li>{{ m.role }}</li>\n    {% endfor %}\n</ul>\n",
        "<ul>\n    <li>system</li>\n    <li>user</li>\n    <li>assistant</li>\n</ul>");
    /* explicit - strips all whitespace, newlines included */
    CHECK_RENDER("a  {%- if true %} b {% endif -%}  \n c", "a b c");
    CHECK_RENDER("x\n  {{- 'y' -}}  \n z", "xyz");
    /* no lstrip before {{ }}; comments are lstripped and trimmed; + disables lstrip */
    CHECK_RENDER("  {{ 'v' }}\n  {# note #}\n  {%+ if true %}k{% endif %}", "  v\n  k");
    /* keep_trailing_newline=False drops exactly one final newline; \r\n becomes \n */
    CHECK_RENDER("x\n\n", "x\n");
    CHECK_RENDER("a\r\nb\r\n", "a\nb");
    CHECK_RENDER("{% raw %}{{ kept }} {% if %}{% endraw %}", "{{ kept }} {% if %}");
    CHECK_RENDER("{{ {'a': 1}['a']}}", "1"); /* }} inside brackets is not the end tag */
}

/* ---- loops, scoping, namespace ------------------------------------------------------------ */

TEST(loop_variables) {
    CHECK_RENDER("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                 "{{ loop.revindex0 }}{{ loop.first|int }}{{ loop.last|int }}{{ loop.length }}"
                 "{{ loop.previtem.role if loop.previtem is defined else '-' }}"
                 "{{ (loop.nextitem|default({'role': '-'})).role }};{% endfor %}",
                 "1032103-user;2121003systemassistant;3210013user-;");
    /* a loop filter counts only what passes; else runs on no iterations */
    CHECK_RENDER("{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.content }}/"
                 "{{ loop.length }} {% else %}none{% endfor %}",
                 "1:U1/2 2:A1/2 ");
    CHECK_RENDER("{% for m in [] %}x{% else %}none{% endfor %}", "none");
    CHECK_RENDER("{% for k, v in {'b': 1, 'a': [2]}|items %}{{ k }}={{ v }} {% endfor %}"
                 "{% for c in 'h\xc3\xa9' %}[{{ c }}]{% endfor %}",
                 "b=1 a=[2] [h][\xc3\xa9]");
    CHECK_RENDER("{% for x in [1, 2, 3, 4] %}{% if x == 2 %}{% continue %}{% endif %}"
                 "{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}",
                 "13");
    CHECK_RENDER("{% for x in range(4) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "abab");
}

TEST(scoping_and_namespace) {
    /* set inside a loop is local to the iteration (the Llama-3 template relies on it) */
    CHECK_RENDER("{% set c = 'outer' %}{% for m in messages %}{% set c = m.role %}{{ c }},"
                 "{% endfor %}{{ c }}",
                 "system,user,assistant,outer");
    CHECK_RENDER("{% for m in messages %}{% set y = 1 %}{% endfor %}{{ y is defined }}", "False");
    /* if does not open a scope */
    CHECK_RENDER("{% if true %}{% set z = 5 %}{% endif %}{{ z }}", "5");
    /* namespace() carries state out of loops */
    CHECK_RENDER("{% set ns = namespace(n=0, names='') %}{% for m in messages %}"
                 "{% set ns.n = ns.n + 1 %}{% set ns.names = ns.names ~ m.role[0] %}{% endfor %}"
                 "{{ ns.n }} {{ ns.names }}",
                 "3 sua");
    CHECK_RENDER("{% set a, b = 1, 'two' %}{{ a }}{{ b }}", "1two");
    CHECK_RENDER("{% set x %}v={{ 1 + 1 }}{% endset %}[{{ x }}]", "[v=2]");
    CHECK_RENDER("{% macro f(a, b='B') %}<{{ a }}{{ b }}>{% endmacro %}{{ f(1) }}{{ f(b=2, a=3) }}",
                 "<1B><32>");
    CHECK_RENDER("{% filter upper %}hi {{ 'there' }}{% endfilter %}", "HI THERE");
    CHECK_FAILS("{% set x = 1 %}{% set x.y = 2 %}", "non-namespace");
}

/* ---- expressions, filters, tests ---------------------------------------------------------- */

TEST(tojson_formatting) {
    /* json.dumps with ensure_ascii=False and ", " / ": " separators, as transformers' tojson */
    CHECK_RENDER("{{ {'a': '\xc3\xa9\xf0\x9f\x98\x80', 'b': [1, 2.5, none, true], 'c': {}, "
                 "'d': {'e': []}} | tojson }}",
                 "{\"a\": \"\xc3\xa9\xf0\x9f\x98\x80\", \"b\": [1, 2.5, null, true], \"c\": {}, "
                 "\"d\": {\"e\": []}}");
    CHECK_RENDER("{{ {'a': [1, {'b': 'x'}], 'c': {}} | tojson(indent=2) }}",
                 "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x\"\n    }\n  ],\n  \"c\": {}\n}");
    CHECK_RENDER("{{ 'q\"\\\\\\n\\t\\u0001' | tojson }}", "\"q\\\"\\\\\\n\\t\\u0001\"");
    CHECK_RENDER("{{ '\xc3\xa9\xf0\x9f\x98\x80' | tojson(ensure_ascii=true) }}",
                 "\"\\u00e9\\ud83d\\ude00\"");
    CHECK_RENDER("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true, separators=(',', ':')) }}",
                 "{\"a\":2,\"b\":1}");
    CHECK_RENDER("{{ messages[0] | tojson }}", "{\"role\": \"system\", \"content\": \"S\"}");
    CHECK_FAILS("{{ nothing | tojson }}", "not JSON serializable");
}

TEST(defined_and_undefined) {
    CHECK_RENDER(
        "{{ nope is defined }} {{ messages is defined }} {{ messages[0].nope is defined }} "
        "{{ messages[0].role is not defined }}",
        "False True False False");
    /* printing undefined gives "", it iterates as empty and is false */
    CHECK_RENDER("[{{ nope }}][{{ messages[0].nope }}][{% for x in nope %}x{% endfor %}]"
                 "[{{ 'y' if nope else 'n' }}][{{ nope | default('d') }}]",
                 "[][][][n][d]");
    /* but arithmetic on it, or an attribute of it, fails as in jinja2 */
    CHECK_FAILS("{{ nope + 1 }}", "'nope' is undefined");
    CHECK_FAILS("{{ nope.attr }}", "'nope' is undefined");
    CHECK_RENDER("{{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} "
                 "{{ 1 is number }} {{ 'a' is sequence }} {{ 3 is odd }} {{ 9 is divisibleby 3 }}",
                 "True True True True True True True True");
}

TEST(slicing_and_indexing) {
    CHECK_RENDER(
        "{{ messages[1:] | map(attribute='role') | join(',') }} {{ messages[::-1][0].role }} "
        "{{ messages[-1].content }} {{ 'abcdef'[1:4] }} {{ 'abcdef'[::-2] }} "
        "{{ [1,2,3,4][-2:] }}",
        "user,assistant assistant A1 bcd fdb [3, 4]");
    CHECK_RENDER(
        "{{ 'h\xc3\xa9llo'[1] }}{{ 'h\xc3\xa9llo'[-4:-2] }}|{{ messages[10] }}|{{ [1][5:] }}",
        "\xc3\xa9\xc3\xa9l||[]");
    CHECK_RENDER("{{ messages[0]['role'] }} {{ messages.0.role }}", "system system");
}

TEST(operators_and_values) {
    CHECK_RENDER(
        "{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }} {{ 'a' ~ 1 ~ none }} "
        "{{ 1 == 1.0 }} {{ 'b' in 'abc' }} {{ 3 not in [1, 2] }}",
        "3 -4 2 3.5 256 a1None True True True");
    CHECK_RENDER(
        "{{ 1.5 }} {{ 1.0 }} {{ 1e16 }} {{ 0.0001 }} {{ 1e-05 }} {{ [1, 'a', none, true] }} "
        "{{ {'k': \"it's\"} }}",
        "1.5 1.0 1e+16 0.0001 1e-05 [1, 'a', None, True] {'k': \"it's\"}");
    CHECK_RENDER(
        "{{ 1 and 'x' }} {{ 0 or '' or 'last' }} {{ 'y' if 1 > 2 else 'n' }} {{ 1 < 2 < 3 }}",
        "x last n True");
    /* filters bind tighter than +, so `x | trim + y` trims x only */
    CHECK_RENDER("{{ '  a  ' | trim + '  b' }}", "a  b");
    CHECK_RENDER("{{ '\\u00e9\\x41\\101\\n' | length }} {{ \"it's\" 'ok' }}", "4 it'sok");
}

TEST(filters_and_methods) {
    CHECK_RENDER(
        "{{ '  x ' | trim }}|{{ 'Hi' | upper }}|{{ 'Hi' | lower }}|{{ 'hello world' | title }}|"
        "{{ 'hELLO' | capitalize }}|{{ 'a-b' | replace('-', '+') }}|{{ [3,1,2] | sort | join }}|"
        "{{ [1,2,2] | unique | list }}|{{ none | default('d') }}|{{ 'x'|length }}",
        "x|HI|hi|Hello World|Hello|a+b|123|[1, 2]|None|1");
    CHECK_RENDER("{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'abc'.startswith('a') }}|"
                 "{{ 'abc'.endswith('bc') }}|{{ {'k': 1}.get('k') }}|{{ {'k': 1}.get('z', 0) }}",
                 "a b|['a', 'b']|True|True|1|0");
    CHECK_RENDER("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | "
                 "list }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2] | reverse | list }} "
                 "{{ [1, 2, 3] | sum }} {{ [3, 9, 2] | max }} {{ 'x<y' | escape }}",
                 "['U1'] [1, 3] [2, 1] 6 9 x&lt;y");
    CHECK_RENDER("{{ '42' | int + '2.5' | float }} {{ 'zz' | int(7) }} {{ 2.675 | round(2) }} "
                 "{{ 'a\\nb' | indent(2, true) }} {{ 'x=%s %03d' % ('y', 7) }}",
                 "44.5 7 2.67   a\n  b x=y 007");
    CHECK_RENDER("{{ 'Stra\xc3\x9f""e' | upper }}", "STRASSE");
}

TEST(jinja2_quirks) {
    /* filters like selectattr return generators: always true, even when empty */
    CHECK_RENDER("{{ 'y' if messages | selectattr('role', 'equalto', 'nobody') else 'n' }}", "y");
    CHECK_RENDER("{{ (messages | map(attribute='role') | first) }} "
                 "{{ messages | map(attribute='role') | join('+') }}",
                 "system system+user+assistant");
    CHECK_FAILS("{{ messages | selectattr('role') | length }}", "has no len()");
    CHECK_RENDER("{{ range(3) }} {{ range(1, 10, 2)[1:3] }} {{ range(3) | list }}",
                 "range(0, 3) range(3, 7, 2) [0, 1, 2]");
    /* for-else runs unless an iteration reached the end of the body */
    CHECK_RENDER("{% for x in [1, 2] %}{% continue %}{% else %}E{% endfor %}|"
                 "{% for x in [1] %}{% break %}{% else %}B{% endfor %}",
                 "E|B");
    CHECK_RENDER("{{ {'a': 1}.keys() }}|{{ {'a': 1}.items() | list }}|{{ {'a': 1}.keys()[0] }}|",
                 "dict_keys(['a'])|[('a', 1)]||");
    CHECK_RENDER("{% set caf\xc3\xa9 = 1 %}{{ caf\xc3\xa9 }}", "1"); /* Unicode names */
    /* loop filters are applied lazily; last/length look ahead */
    CHECK_RENDER("{% for m in messages if m.role != 'system' %}{{ loop.last }}{{ loop.length }}"
                 "{% endfor %}",
                 "False2True2");
    /* str % undefined formats it as ""; a slice of a constant is folded at compile time */
    CHECK_RENDER("{{ '%s' % nothing }}|{{ none[1:] }}|{{ not none[1:] }}", "||True");
    CHECK_FAILS("{% set y = none[1:] %}", "not subscriptable");
}

TEST(raise_exception_and_strftime) {
    fr_err err = {0};
    fr_chat_opts o = {0};
    char *s = render_json("{% if messages[0].role == 'system' %}{{ raise_exception('System role "
                          "not supported') }}{% endif %}",
                          MSGS, &o, &err);
    CHECK(s == NULL);
    CHECK_STR(err.msg, "System role not supported");
    free(s);
    CHECK_RENDER("{{ strftime_now('%Y') | length }}", "4");
}

TEST(variables_from_options) {
    fr_err err = {0};
    fr_chat_opts o = {.add_generation_prompt = false, .bos_token = "<s>", .eos_token = "</s>"};
    char *s = render_json("{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|"
                          "{{ tools is none }}|{{ documents is none }}",
                          MSGS, &o, &err);
    CHECK_STR(s, "<s>|</s>|False|True|True");
    free(s);
    fr_chat_opts o2 = {0};
    s = render_json("[{{ bos_token }}]{{ bos_token is defined }}", MSGS, &o2, &err);
    CHECK_STR(s, "[]False");
    free(s);
    s = render_json("{{ messages|length }}", MSGS, NULL, &err); /* opts may be NULL */
    CHECK_STR(s, "3");
    free(s);
    /* content given as an array of parts is exposed as JSON */
    s = render_json("{% for p in messages[0].content %}{{ p.text }}{% endfor %}",
                    "[{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"a\"},"
                    " {\"type\": \"text\", \"text\": \"b\"}]}]",
                    &o2, &err);
    CHECK_STR(s, "ab");
    free(s);
}

/* ---- errors and hostile inputs ------------------------------------------------------------ */

TEST(unsupported_constructs_name_the_option) {
    CHECK_FAILS("{% extends 'base.html' %}", "'{% extends %}' tag; " HINT);
    CHECK_FAILS("{% include 'x' %}", "include");
    CHECK_FAILS("{% for x in y recursive %}{% endfor %}", "recursive for loop; " HINT);
    CHECK_FAILS("{{ 'a' | wordwrap(1) }}", "filter 'wordwrap'; " HINT);
    CHECK_FAILS("{{ x | no_such_filter }}", "no filter named 'no_such_filter'; " HINT);
    CHECK_FAILS("{% frobnicate %}", "unknown tag 'frobnicate'; " HINT);
    /* an unknown filter inside an if is only an error when reached, as in jinja2 */
    CHECK_RENDER("{% if false %}{{ x | no_such_filter }}{% endif %}ok", "ok");
}

TEST(syntax_errors) {
    CHECK_FAILS("{{ 1 ", "unexpected end of template");
    CHECK_FAILS("{% if true %}x", "'endif'");
    CHECK_FAILS("{% for x in y %}", "'endfor'");
    CHECK_FAILS("{# never closed", "missing end of comment");
    CHECK_FAILS("{{ 'never closed }}", "unterminated string");
    CHECK_FAILS("{{ (1 + 2 }}", "expected ')'");
    CHECK_FAILS("{% endif %}", "unknown tag 'endif'");
    CHECK_FAILS("{% break %}", "outside of a loop");
    CHECK_FAILS("line1\nline2 {{ 1 +* 2 }}", "(line 2)");
}

TEST(runtime_errors) {
    CHECK_FAILS("{{ 'a' + 1 }}", "unsupported operand type(s) for +: 'str' and 'int'");
    CHECK_FAILS("{{ 1 / 0 }}", "division by zero");
    CHECK_FAILS("{{ messages.append(1) }}", "unsafe");
    CHECK_FAILS("{{ range(200000) | length }}", "range too big");
    CHECK_FAILS("{% for x in 5 %}{% endfor %}", "not iterable");
    fr_err err = {0};
    cJSON *notarray = cJSON_Parse("{\"role\": \"user\"}");
    CHECK(fr_chat_render("x", notarray, NULL, &err) == NULL);
    CHECK(strstr(err.msg, "JSON array") != NULL);
    CHECK(fr_chat_render(NULL, notarray, NULL, &err) == NULL);
    cJSON_Delete(notarray);
}

static char *repeat(const char *a, int n, const char *mid, const char *b) {
    size_t la = strlen(a), lm = strlen(mid), lb = strlen(b);
    char *s = malloc(la * (size_t)n + lm + lb * (size_t)n + 1), *p = s;
    for (int i = 0; i < n; i++, p += la) memcpy(p, a, la);
    memcpy(p, mid, lm);
    p += lm;
    for (int i = 0; i < n; i++, p += lb) memcpy(p, b, lb);
    *p = 0;
    return s;
}

TEST(hostile_nesting) {
    char *t, *inner = repeat("(", 20000, "1", ")");
    size_t n = strlen(inner);
    t = malloc(n + 8);
    snprintf(t, n + 8, "{{ %s }}", inner);
    CHECK_FAILS(t, "nested too deeply");
    free(t);
    free(inner);
    t = repeat("{% if true %}", 5000, "x", "{% endif %}");
    CHECK_FAILS(t, "nested too deeply");
    free(t);
    t = repeat("[", 5000, "", "]");
    n = strlen(t);
    char *u = malloc(n + 8);
    snprintf(u, n + 8, "{{ %s }}", t);
    CHECK_FAILS(u, "nested too deeply");
    free(u);
    free(t);
    /* long left-deep chains are bounded too */
    t = repeat("1 + ", 50000, "1", "");
    n = strlen(t);
    u = malloc(n + 8);
    snprintf(u, n + 8, "{{ %s }}", t);
    CHECK_FAILS(u, "nested too deeply");
    free(u);
    free(t);
    t = repeat("not ", 50000, "1", "");
    n = strlen(t);
    u = malloc(n + 8);
    snprintf(u, n + 8, "{{ %s }}", t);
    CHECK_FAILS(u, "nested too deeply");
    free(u);
    free(t);
    /* a long elif chain is fine: it is walked iteratively */
    u = malloc(20 * 3000 + 64);
    strcpy(u, "{% if false %}");
    for (int i = 0; i < 3000; i++) strcat(u, "{% elif false %}");
    strcat(u, "{% else %}ok{% endif %}");
    CHECK_RENDER(u, "ok");
    free(u);
    CHECK_FAILS("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "too deep");
}

TEST(hostile_loops_and_sizes) {
    CHECK_FAILS("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                "too many loop iterations");
    CHECK_FAILS("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "exceeds 16 MiB");
    CHECK_FAILS(
        "{% set ns = namespace(s='xx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}",
        "exceeds 16 MiB");
    CHECK_FAILS("{{ 'x' * 100000000 }}", "exceeds 16 MiB");
    CHECK_FAILS(
        "{% set ns = namespace(l=[1]) %}{% for i in range(60) %}{% set ns.l = ns.l + ns.l %}"
        "{% endfor %}",
        "");
    CHECK_FAILS("{% for i in range(100000) %}{% for j in range(100000) %}{% if j in range(1) %}"
                "{% endif %}{% endfor %}{% endfor %}",
                "");
    /* deeply nested JSON input */
    char *deep = repeat("[", 900, "", "]");
    size_t n = strlen(deep);
    char *msgs = malloc(n + 64);
    snprintf(msgs, n + 64, "[{\"role\": \"user\", \"content\": %s}]", deep);
    fr_err err = {0};
    cJSON *m = cJSON_Parse(msgs); /* cJSON itself may refuse this depth */
    if (m) {
        char *s = fr_chat_render("{{ messages | tojson }}", m, NULL, &err);
        CHECK(s == NULL);
        free(s);
        cJSON_Delete(m);
    }
    free(msgs);
    free(deep);
}

TEST(hostile_bytes) {
    /* invalid UTF-8 and NULs in templates and content must not crash */
    fr_err err = {0};
    char *s =
        render_json("\xff\xfe{{ '\xc3' }}{{ messages[0].content | upper | length }}",
                    "[{\"role\": \"user\", \"content\": \"\\u00ff\\ud83d\\ude00x\"}]", NULL, &err);
    CHECK_STR(s,
              "\xff\xfe\xc3"
              "3");
    free(s);
    s = render_json("{{ '\\x00' | length }}{{ 'a\\N{BULLET}' }}", MSGS, NULL, &err);
    CHECK(s == NULL);
    free(s);
}

/* ---- compile once, render from many threads ----------------------------------------------- */

typedef struct thread_job {
    const fr_chat_template *t; /* shared compiled template */
    const cJSON *msgs;         /* shared messages */
    const char *want;          /* expected render */
    int bad;                   /* mismatches seen */
} thread_job;

static void *render_many(void *arg) {
    thread_job *j = arg;
    for (int i = 0; i < 200; i++) {
        fr_err err = {0};
        fr_chat_opts o = {.add_generation_prompt = true};
        char *s = fr_chat_render_compiled(j->t, j->msgs, &o, &err);
        if (!s || strcmp(s, j->want)) j->bad++;
        free(s);
    }
    return NULL;
}

TEST(compiled_template_threads) {
    fr_err err = {0};
    fr_chat_template *t = fr_chat_compile(fr_chat_builtin("chatml"), &err);
    CHECK(t != NULL);
    cJSON *m = cJSON_Parse(MSGS);
    const char *want = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n"
                       "<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>assistant\n";
    thread_job jobs[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        jobs[i] = (thread_job){t, m, want, 0};
        pthread_create(&th[i], NULL, render_many, &jobs[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(jobs[i].bad, 0);
    }
    fr_chat_free(t);
    cJSON_Delete(m);
    CHECK(fr_chat_compile("{% if %}", &err) == NULL);
    CHECK(strstr(err.msg, HINT) != NULL);
    fr_chat_free(NULL);
}

int main(void) { return t_main(); }
