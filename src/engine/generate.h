/* generate.h — single-sequence generation on a backend (backend/backend.h: the CPU decoder or a
 * CUDA GPU): prefill a prompt in chunks, then sample on the host and decode until the generation
 * state (gen.h) says stop. Used by `frugal generate` and the public C API; the server's engine
 * batches many sequences instead. On the CPU the pool is exactly the prompt + output positions,
 * so results are the decoder's, bit for bit. */
#ifndef FRUGAL_GENERATE_H
#define FRUGAL_GENERATE_H

#include "backend/sampler.h"
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

/* Where fr_generate_on runs (strings borrowed). All NULL / 0: the CPU, as fr_generate. */
typedef struct fr_generate_device {
    const char *device;  /* NULL/"cpu", "cuda", "cuda:N" */
    const char *weights; /* CUDA: NULL/"bf16", "int8", "int4" (CPU: quantise the model on load) */
    const char *kv;      /* NULL/"bf16", "int8" (CUDA) */
    float kv_fraction;   /* CUDA: share of free device memory for the KV pool (0: 0.9) */
} fr_generate_device;

/* fr_generate on a device; "built without CUDA: rebuild with make cuda" when CUDA is asked for in
 * a binary without the CUDA objects. */
int fr_generate_on(const fr_model *m, const fr_generate_device *dev, const int32_t *prompt,
                   size_t n_prompt, const fr_sampling *sampling, const fr_gen_params *gp,
                   fr_text_fn on_text, void *user, fr_generate_result *res, fr_err *err);

#endif
