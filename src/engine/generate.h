/* generate.h — single-sequence generation on the decoder: prefill a prompt in chunks, then sample
 * and decode until the generation state (gen.h) says stop. Used by `frugal generate` and the
 * public C API; the server's engine batches many sequences instead. */
#ifndef FRUGAL_GENERATE_H
#define FRUGAL_GENERATE_H

#include "engine/decoder.h"
#include "engine/gen.h"

typedef struct fr_generate_result {
    int32_t *ids;          /* generated ids (malloc'd), EOS included when it ended generation */
    int n_ids;
    char *text;            /* released text (malloc'd) */
    fr_finish finish;      /* STOP or LENGTH */
    double prefill_s;      /* seconds of prompt processing */
    double decode_s;       /* seconds of token generation */
} fr_generate_result;

/* Called with each piece of released text (len > 0). */
typedef void (*fr_text_fn)(const char *piece, size_t len, void *user);

/* Generates from prompt ids. Returns 0 and fills *res (free with fr_generate_result_free), or -1
 * with err set. */
int fr_generate(const fr_model *m, const int32_t *prompt, size_t n_prompt,
                const fr_sampling *sampling, const fr_gen_params *gp, fr_text_fn on_text,
                void *user, fr_generate_result *res, fr_err *err);
void fr_generate_result_free(fr_generate_result *r);

#endif
