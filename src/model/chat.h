/* chat.h — chat templates: a Jinja2 subset interpreter sufficient for the templates HF models
 * ship (ChatML/Qwen2.5 and Llama-3 families and the like), rendering exactly what transformers'
 * apply_chat_template(messages, add_generation_prompt=True) renders.
 */
#ifndef FRUGAL_CHAT_H
#define FRUGAL_CHAT_H

#include "base/base.h"

struct cJSON;

typedef struct fr_chat_opts {
    bool add_generation_prompt;
    const char *bos_token;     /* string value of bos_token, "" if none */
    const char *eos_token;     /* string value of eos_token, "" if none */
    const struct cJSON *tools; /* JSON array or NULL (template variable `tools`) */
} fr_chat_opts;

/* Render `messages` (a JSON array of objects with "role" and "content") with template source
 * `tmpl`. Returns a malloc'd string, or NULL with err set to a one-line message that says what
 * is unsupported and names the --chat-template option for choosing a built-in template. */
char *fr_chat_render(const char *tmpl, const struct cJSON *messages, const fr_chat_opts *opts,
                     fr_err *err);

/* Built-in template sources: "chatml" (Qwen2.5 style), "llama3". NULL for an unknown name. */
const char *fr_chat_builtin(const char *name);

#endif
