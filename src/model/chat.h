/* chat.h — chat templates: a Jinja2 subset interpreter sufficient for the templates HF models
 * ship (ChatML/Qwen2.5 and Llama-3 families and the like), rendering exactly what transformers'
 * apply_chat_template(messages, add_generation_prompt=True) renders.
 *
 * Semantics are jinja2's under the settings transformers uses: an ImmutableSandboxedEnvironment
 * with trim_blocks, lstrip_blocks, keep_trailing_newline=False, the loopcontrols extension
 * (break/continue) and the `generation` tag, its own `tojson` (json.dumps with
 * ensure_ascii=False), raise_exception(msg) and strftime_now(fmt). Template variables: messages,
 * tools (None when absent, as transformers passes tools=None), documents (None),
 * add_generation_prompt, bos_token and eos_token (undefined when NULL).
 *
 * Unsupported constructs (template inheritance, include/import, call blocks, recursive loops,
 * a few rarely used filters) fail with a one-line error that names the construct and says
 * "choose a built-in template with --chat-template chatml|llama3". Hostile templates and inputs
 * are bounded in time and memory (see src/model/jinja_impl.h) and fail with an error.
 *
 * Known differences from CPython + jinja2: integers are 64-bit (overflow is an error); a JSON
 * number with an integral value is an int (json.loads would keep 1.0 a float); case mapping is
 * Unicode's simple one-to-one mapping. All functions are thread-safe.
 */
#ifndef FRUGAL_CHAT_H
#define FRUGAL_CHAT_H

#include "base/base.h"

struct cJSON;

typedef struct fr_chat_opts {
    bool add_generation_prompt;
    const char *bos_token;     /* string value of bos_token, "" if none (NULL: undefined) */
    const char *eos_token;     /* string value of eos_token, "" if none (NULL: undefined) */
    const struct cJSON *tools; /* JSON array or NULL (template variable `tools`) */
} fr_chat_opts;

/* Render `messages` (a JSON array of objects with "role" and "content") with template source
 * `tmpl`. Returns a malloc'd string, or NULL with err set to a one-line message that says what
 * is unsupported and names the --chat-template option for choosing a built-in template. */
char *fr_chat_render(const char *tmpl, const struct cJSON *messages, const fr_chat_opts *opts,
                     fr_err *err);

/* Built-in template sources: "chatml" (Qwen2.5 style), "llama3". NULL for an unknown name. */
const char *fr_chat_builtin(const char *name);

/* The same in two steps, to parse a template once (e.g. at model load, which also reports
 * syntax errors and unsupported tags early) and render it per request, from any thread. */
typedef struct fr_chat_template fr_chat_template;
fr_chat_template *fr_chat_compile(const char *tmpl, fr_err *err); /* NULL on error */
char *fr_chat_render_compiled(const fr_chat_template *t, const struct cJSON *messages,
                              const fr_chat_opts *opts, fr_err *err);
void fr_chat_free(fr_chat_template *t);

#endif
