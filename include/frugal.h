/* frugal.h — the public C API of frugal.
 *
 * Thread safety: a loaded frugal_model is immutable and may be shared by any number of threads;
 * each frugal_generate call keeps its own state (KV cache, sampler), so concurrent calls on one
 * model are safe. Nothing here calls exit(); every failure returns NULL or -1 and writes a
 * one-line message into the caller's error buffer.
 *
 * Example:
 *
 *   char err[512];
 *   frugal_model_params mp = frugal_model_default_params();
 *   frugal_model *m = frugal_model_load("models/qwen2.5-0.5b", mp, err, sizeof err);
 *   if (!m) { fprintf(stderr, "%s\n", err); return 1; }
 *   frugal_generate_params gp = frugal_generate_default_params();
 *   gp.max_tokens = 64;
 *   gp.temperature = 0;                       // greedy
 *   char *text = NULL;
 *   if (frugal_generate(m, "Where is my card?", &gp, NULL, NULL, &text, err, sizeof err) == 0)
 *       puts(text);
 *   frugal_free(text);
 *   frugal_model_free(m);
 */
#ifndef FRUGAL_H
#define FRUGAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRUGAL_VERSION "0.1.0"

typedef struct frugal_model frugal_model; /* opaque: weights, tokenizer, chat template */

typedef struct frugal_model_params {
    const char *quant; /* NULL, "q8" or "q4": weight-only quantisation on load (CPU) */
} frugal_model_params;
frugal_model_params frugal_model_default_params(void);

/* path: an HF model folder or a .gguf file. */
frugal_model *frugal_model_load(const char *path, frugal_model_params params, char *err,
                                size_t err_len);
void frugal_model_free(frugal_model *m);

/* Token ids of `text` as HF's Tokenizer.encode(text) returns them. Writes at most cap ids and
 * returns the total count (call again with a larger buffer when it exceeds cap), or -1. */
int frugal_tokenize(const frugal_model *m, const char *text, int32_t *ids, int cap, char *err,
                    size_t err_len);

/* Chat prompt rendered from a JSON array of {role, content} messages with the model's template
 * (or the built-in "chatml"/"llama3" when chat_template is not NULL). Returns a string to free
 * with frugal_free, or NULL. */
char *frugal_render_chat(const frugal_model *m, const char *messages_json, const char *chat_template,
                         char *err, size_t err_len);

typedef struct frugal_generate_params {
    int max_tokens;      /* default 128 */
    float temperature;   /* 0 = greedy; default 0.8 */
    int top_k;           /* 0 = off; default 40 */
    float top_p;         /* 1 = off; default 0.95 */
    float min_p;         /* 0 = off; default 0.05 */
    uint64_t seed;       /* default 0 */
    const char *stop[8]; /* stop strings, NULL-terminated */
    int ignore_eos;      /* nonzero: generate through end-of-sequence tokens */
} frugal_generate_params;
frugal_generate_params frugal_generate_default_params(void);

/* Receives each piece of generated text as soon as it is final (whole UTF-8 characters). */
typedef void (*frugal_text_callback)(const char *piece, size_t len, void *user);

/* Generates a continuation of `prompt` (tokenized with the model's tokenizer, BOS as HF adds it).
 * On success returns 0 and, if text_out is not NULL, a string to free with frugal_free. */
int frugal_generate(const frugal_model *m, const char *prompt, const frugal_generate_params *params,
                    frugal_text_callback on_text, void *user, char **text_out, char *err,
                    size_t err_len);

void frugal_free(void *p);

#ifdef __cplusplus
}
#endif
#endif
