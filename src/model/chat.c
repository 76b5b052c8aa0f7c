/* chat.c — chat templates: the public entry points of chat.h over the Jinja2-subset interpreter
 * (jinja_lex.c, jinja_parse.c, jinja_eval.c, jinja_builtins.c, jinja_value.c; see
 * jinja_impl.h for the design), and the built-in templates.
 *
 * Design: a compiled template (tokens and AST in one arena) is immutable, so one compiled
 * template may be rendered by many threads at once; each render owns a private arena and
 * jmp_buf, both on the heap so that they stay valid across longjmp. The template variables are
 * the ones transformers passes to jinja2: messages, tools (None when absent), documents (None),
 * add_generation_prompt, and the special tokens bos_token / eos_token (undefined when NULL, as
 * a missing special token is in transformers).
 *
 * Number formatting relies on the "C" locale for LC_NUMERIC (snprintf/strtod), which is the
 * default unless the program calls setlocale.
 */
#include "model/chat.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "model/jinja_impl.h"

struct fr_chat_template {
    jj_arena ar;        /* owns tokens and AST */
    const jj_node *root; /* the parsed template body */
};

/* Per-call state kept on the heap: automatic variables changed after setjmp are indeterminate
 * after longjmp, a pointer set before it is not. */
typedef struct compile_state {
    jj_core core; /* errors and memory */
    jj_arena ar;  /* the arena being filled */
    jmp_buf jb;   /* where failures land */
} compile_state;

fr_chat_template *fr_chat_compile(const char *tmpl, fr_err *err) {
    if (!tmpl) {
        fr_err_set(err, "chat template: no template given");
        return NULL;
    }
    size_t n = strlen(tmpl);
    if (n > JJ_MAX_TEMPLATE) {
        fr_err_set(err, "chat template: larger than %u MiB; " JJ_HINT, JJ_MAX_TEMPLATE >> 20);
        return NULL;
    }
    compile_state *st = calloc(1, sizeof *st);
    if (!st) {
        fr_err_set(err, "chat template: out of memory");
        return NULL;
    }
    st->core.err = err;
    st->core.ar = &st->ar;
    st->core.jb = &st->jb;
    if (setjmp(st->jb)) {
        fr_jj_arena_free(&st->ar);
        free(st);
        return NULL;
    }
    jj_tok *toks;
    size_t ntoks = fr_jj_lex(&st->core, tmpl, n, &toks);
    jj_node *root = fr_jj_parse(&st->core, toks, ntoks);
    fr_chat_template *t = malloc(sizeof *t);
    if (!t) fr_jj_fail_msg(&st->core, "chat template: out of memory");
    t->ar = st->ar;
    t->root = root;
    free(st);
    return t;
}

void fr_chat_free(fr_chat_template *t) {
    if (!t) return;
    fr_jj_arena_free(&t->ar);
    free(t);
}

typedef struct render_state {
    jj_rt rt;    /* the render */
    jj_arena ar; /* values of this render */
    jj_sb out;   /* the output (malloc'd) */
    jmp_buf jb;  /* where failures land */
} render_state;

char *fr_chat_render_compiled(const fr_chat_template *t, const cJSON *messages,
                              const fr_chat_opts *opts, fr_err *err) {
    if (!t) {
        fr_err_set(err, "chat template: no template given");
        return NULL;
    }
    if (!messages || !cJSON_IsArray(messages)) {
        fr_err_set(err, "chat template: messages must be a JSON array");
        return NULL;
    }
    if (opts && opts->tools && !cJSON_IsArray(opts->tools)) {
        fr_err_set(err, "chat template: tools must be a JSON array");
        return NULL;
    }
    render_state *st = calloc(1, sizeof *st);
    if (!st) {
        fr_err_set(err, "chat template: out of memory");
        return NULL;
    }
    jj_rt *rt = &st->rt;
    rt->core.err = err;
    rt->core.ar = &st->ar;
    rt->core.jb = &st->jb;
    if (setjmp(st->jb)) {
        fr_jj_arena_free(&st->ar);
        free(st->out.p);
        free(st);
        return NULL;
    }
    jj_scope *g = fr_jj_scope_new(rt);
    rt->globals = g;
    fr_jj_scope_define(rt, g, "messages", fr_jj_from_cjson(&rt->core, messages, 0));
    fr_jj_scope_define(rt, g, "tools",
                       opts && opts->tools ? fr_jj_from_cjson(&rt->core, opts->tools, 0)
                                           : jj_none());
    fr_jj_scope_define(rt, g, "documents", jj_none());
    fr_jj_scope_define(rt, g, "add_generation_prompt",
                       jj_bool(opts && opts->add_generation_prompt));
    if (opts && opts->bos_token) fr_jj_scope_define(rt, g, "bos_token", jj_strz(opts->bos_token));
    if (opts && opts->eos_token) fr_jj_scope_define(rt, g, "eos_token", jj_strz(opts->eos_token));
    fr_jj_render(rt, t->root, &st->out);
    st->out.limit++; /* room for the NUL */
    fr_jj_sb_putc(&rt->core, &st->out, 0);
    char *s = st->out.p;
    fr_jj_arena_free(&st->ar);
    free(st);
    return s;
}

char *fr_chat_render(const char *tmpl, const cJSON *messages, const fr_chat_opts *opts,
                     fr_err *err) {
    fr_chat_template *t = fr_chat_compile(tmpl, err);
    if (!t) return NULL;
    char *s = fr_chat_render_compiled(t, messages, opts, err);
    fr_chat_free(t);
    return s;
}

/* Qwen2.5's chat template (ChatML with tool calling), byte for byte as the model ships it. */
static const char CHATML_TEMPLATE[] =
    "{%- if tools %}\n"
    "    {{- '<|im_start|>system\\n' }}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- messages[0]['content'] }}\n"
    "    {%- else %}\n"
    "        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}\n"
    "    {%- endif %}\n"
    "    {{- \"\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user "
    "query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\"
    "n<tools>\" }}\n"
    "    {%- for tool in tools %}\n"
    "        {{- \"\\n\" }}\n"
    "        {{- tool | tojson }}\n"
    "    {%- endfor %}\n"
    "    {{- \"\\n</tools>\\n\\nFor each function call, return a json object with function na"
    "me and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\\"name\\\":"
    " <function-name>, \\\"arguments\\\": <args-json-object>}\\n</tool_call><|im_end|>\\n\" }"
    "}\n"
    "{%- else %}\n"
    "    {%- if messages[0]['role'] == 'system' %}\n"
    "        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n"
    "    {%- else %}\n"
    "        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a help"
    "ful assistant.<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first)"
    " or (message.role == \"assistant\" and not message.tool_calls) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\"
    "n' }}\n"
    "    {%- elif message.role == \"assistant\" %}\n"
    "        {{- '<|im_start|>' + message.role }}\n"
    "        {%- if message.content %}\n"
    "            {{- '\\n' + message.content }}\n"
    "        {%- endif %}\n"
    "        {%- for tool_call in message.tool_calls %}\n"
    "            {%- if tool_call.function is defined %}\n"
    "                {%- set tool_call = tool_call.function %}\n"
    "            {%- endif %}\n"
    "            {{- '\\n<tool_call>\\n{\"name\": \"' }}\n"
    "            {{- tool_call.name }}\n"
    "            {{- '\", \"arguments\": ' }}\n"
    "            {{- tool_call.arguments | tojson }}\n"
    "            {{- '}\\n</tool_call>' }}\n"
    "        {%- endfor %}\n"
    "        {{- '<|im_end|>\\n' }}\n"
    "    {%- elif message.role == \"tool\" %}\n"
    "        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != \"tool\") %}\n"
    "            {{- '<|im_start|>user' }}\n"
    "        {%- endif %}\n"
    "        {{- '\\n<tool_response>\\n' }}\n"
    "        {{- message.content }}\n"
    "        {{- '\\n</tool_response>' }}\n"
    "        {%- if loop.last or (messages[loop.index0 + 1].role != \"tool\") %}\n"
    "            {{- '<|im_end|>\\n' }}\n"
    "        {%- endif %}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "{%- endif %}\n";

/* Meta Llama-3 Instruct chat template, byte for byte as the model ships it. */
static const char LLAMA3_TEMPLATE[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|"
    "start_header_id|>' + message['role'] + '<|end_header_id|>\n"
    "\n"
    "'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = "
    "bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n"
    "\n"
    "' }}{% endif %}";

const char *fr_chat_builtin(const char *name) {
    if (!name) return NULL;
    if (!strcmp(name, "chatml")) return CHATML_TEMPLATE;
    if (!strcmp(name, "llama3")) return LLAMA3_TEMPLATE;
    return NULL;
}
