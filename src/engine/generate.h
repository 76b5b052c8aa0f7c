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

/* What a prompt with images adds (everything borrowed for the call; all NULL / 0: a text prompt).
 * The prompt's image tokens (ids == image_token_id, pads expanded, model/mrope.h) take the rows
 * of embd in order instead of their token embedding; rope_pos gives the M-RoPE positions of the
 * whole prompt (fr_vl_rope_index, or the kept tokens' original positions after pruning), and each
 * decoded token at KV position q gets q + delta on all three rows, delta = max(rope_pos) + 1 -
 * n_prompt (HF's rope_deltas when nothing was pruned). */
typedef struct fr_generate_mm {
    const float *embd;        /* (n_embd_rows, n_embd) image features after the merger, or NULL */
    int64_t n_embd_rows;      /* must equal the prompt's count of image_token_id */
    int image_token_id;       /* the placeholder id (hp.image_token_id) */
    const int32_t *rope_pos;  /* (3, n_prompt) t, h, w rows, or NULL (plain positions) */
    float *last_logits;       /* (n_vocab) out: the prompt's last-position logits, or NULL */
} fr_generate_mm;

/* fr_generate_on with a multimodal prompt (mm may be NULL). Errors as fr_generate_on, and
 * FR_ERR_BAD_REQUEST when the image rows and the prompt's image tokens differ in number or
 * rope_pos is given to a model without M-RoPE, FR_ERR_UNSUPPORTED when the device's backend takes
 * no image rows or M-RoPE positions (both backends take them now). */
int fr_generate_mm_on(const fr_model *m, const fr_generate_device *dev, const int32_t *prompt,
                      size_t n_prompt, const fr_generate_mm *mm, const fr_sampling *sampling,
                      const fr_gen_params *gp, fr_text_fn on_text, void *user,
                      fr_generate_result *res, fr_err *err);

/* The vision tower of m (m->vision) on the device: pixels (n_patches, patch_dim) of n_images
 * images with grid_thw (n_images, 3), HF's processor layout, into out (n_tokens, out_hidden),
 * n_tokens = sum of t*h*w / merge^2 (the merger's output, before pruning). Runs on the CPU (fp32,
 * backend/cpu/vision.h) with one worker per core, or on a CUDA device (backend/cuda/cuda_vision.h:
 * the tower's weights uploaded for this call; FR_ERR_UNSUPPORTED in a build without CUDA).
 * Returns 0 or -1 with err (the tower's codes: no tower FR_ERR_UNSUPPORTED, a
 * grid that does not match FR_ERR_BAD_REQUEST). */
int fr_generate_vision(const fr_model *m, const fr_generate_device *dev, const float *pixels,
                       int64_t n_patches, const int32_t *grid_thw, int n_images, float *out,
                       fr_err *err);

#endif
