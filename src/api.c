/* api.c — the public API (include/frugal.h) over the internal modules. */
#include "frugal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/generate.h"
#include "model/chat.h"
#include "model/tokenizer.h"

struct frugal_model {
    fr_model *m;
};

static void copy_err(const fr_err *e, char *err, size_t len) {
    if (err && len) snprintf(err, len, "%s", e->msg);
}

frugal_model_params frugal_model_default_params(void) {
    frugal_model_params p = {NULL};
    return p;
}

frugal_model *frugal_model_load(const char *path, frugal_model_params params, char *err,
                                size_t err_len) {
    fr_err e = {{0}};
    fr_model *m = fr_model_load(path, &e);
    if (!m) {
        copy_err(&e, err, err_len);
        return NULL;
    }
    if (params.quant && fr_model_quantize(m, params.quant, &e)) {
        copy_err(&e, err, err_len);
        fr_model_free(m);
        return NULL;
    }
    frugal_model *h = fr_xmalloc(sizeof *h);
    h->m = m;
    return h;
}

void frugal_model_free(frugal_model *h) {
    if (!h) return;
    fr_model_free(h->m);
    free(h);
}

int frugal_tokenize(const frugal_model *h, const char *text, int32_t *ids, int cap, char *err,
                    size_t err_len) {
    fr_err e = {{0}};
    int32_t *all = NULL;
    size_t n = 0;
    if (fr_tokenize(h->m->tok, text, strlen(text), true, &all, &n, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    if (ids && cap > 0) memcpy(ids, all, sizeof(int32_t) * FR_MIN(n, (size_t)cap));
    free(all);
    return (int)n;
}

char *frugal_render_chat(const frugal_model *h, const char *messages_json, const char *chat_template,
                         char *err, size_t err_len) {
    fr_err e = {{0}};
    const char *tmpl = chat_template ? fr_chat_builtin(chat_template) : h->m->chat_template;
    if (!tmpl) {
        fr_err_set(&e, chat_template ? "unknown chat template '%s' (built-in: chatml, llama3)"
                                     : "%s has no chat template; choose a built-in one with "
                                       "--chat-template chatml|llama3",
                   chat_template ? chat_template : h->m->path);
        copy_err(&e, err, err_len);
        return NULL;
    }
    cJSON *msgs = cJSON_Parse(messages_json);
    if (!cJSON_IsArray(msgs)) {
        cJSON_Delete(msgs);
        fr_err_set(&e, "messages must be a JSON array of {role, content} objects");
        copy_err(&e, err, err_len);
        return NULL;
    }
    fr_chat_opts co = {.add_generation_prompt = true,
                       .bos_token = h->m->bos_token_str ? h->m->bos_token_str : "",
                       .eos_token = h->m->eos_token_str ? h->m->eos_token_str : "",
                       .tools = NULL};
    char *out = fr_chat_render(tmpl, msgs, &co, &e);
    cJSON_Delete(msgs);
    if (!out) copy_err(&e, err, err_len);
    return out;
}

frugal_generate_params frugal_generate_default_params(void) {
    frugal_generate_params p;
    memset(&p, 0, sizeof p);
    p.max_tokens = 128;
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    p.min_p = 0.05f;
    return p;
}

int frugal_generate(const frugal_model *h, const char *prompt, const frugal_generate_params *p,
                    frugal_text_callback on_text, void *user, char **text_out, char *err,
                    size_t err_len) {
    fr_err e = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    if (text_out) *text_out = NULL;
    if (fr_tokenize(h->m->tok, prompt, strlen(prompt), true, &ids, &n, &e)) {
        copy_err(&e, err, err_len);
        return -1;
    }
    fr_sampling s = fr_sampling_default();
    s.temperature = p->temperature;
    s.top_k = p->top_k;
    s.top_p = p->top_p;
    s.min_p = p->min_p;
    s.seed = p->seed;
    fr_gen_params gp = fr_gen_params_default();
    gp.max_tokens = p->max_tokens;
    gp.ignore_eos = p->ignore_eos != 0;
    for (int i = 0; i < FR_GEN_MAX_STOP && p->stop[i]; i++) gp.stop[gp.n_stop++] = p->stop[i];
    fr_generate_result r;
    int rc = fr_generate(h->m, ids, n, &s, &gp, on_text, user, &r, &e);
    free(ids);
    if (rc) {
        copy_err(&e, err, err_len);
        return -1;
    }
    if (text_out) {
        *text_out = r.text;
        r.text = NULL;
    }
    fr_generate_result_free(&r);
    return 0;
}

void frugal_free(void *p) { free(p); }
