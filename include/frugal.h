/* frugal.h — the public C API of frugal: load a model, choose a device, tokenize, render a chat,
 * generate. The `frugal` CLI's model commands (tokenize, render, generate) are written against
 * this header only; `frugal serve` loads its model, chooses its device and tokenizes through it
 * and hands the handles to its serving engine (that hand-over, src/frugal_internal.h, is not part
 * of the public API).
 *
 * Objects
 *   frugal_model    weights, tokenizer and chat template of one model folder or .gguf file.
 *                   Immutable once loaded: share it between any number of threads and contexts.
 *   frugal_context  per-caller generation state on one device ("cpu", "cuda", "cuda:N"). Not
 *                   thread-safe: use one context from one thread at a time; make one context per
 *                   thread to generate concurrently on one model.
 *
 * Ownership: every *_new / *_load has its *_free; strings inside params structs are borrowed for
 * the duration of the call (a context copies what it keeps). Everything an output pointer
 * receives is the caller's: free ids and strings with frugal_free, results with
 * frugal_result_free. No function calls exit() or prints; on failure a function returns NULL or
 * a frugal_status other than FRUGAL_OK and, when `err` is not NULL, fills *err with that status
 * and a one-line message for people (branch on the status, not on the text).
 *
 * Beginning of sequence (BOS): text given to frugal_tokenize with add_special = 1 is encoded as
 * HF's Tokenizer.encode(text) does, BOS included when the model's post-processor adds one. A
 * rendered chat already holds the BOS text of its template, so frugal_tokenize_chat tokenizes it
 * without special tokens, as HF tokenizes apply_chat_template's output: one BOS, never two.
 *
 * Example (error checks shortened):
 *
 *   frugal_error err;
 *   frugal_model *m = frugal_model_load("models/qwen2.5-0.5b", frugal_model_default_params(), &err);
 *   if (!m) { fprintf(stderr, "%s (%s)\n", err.message, frugal_status_str(err.status)); return 1; }
 *   frugal_context_params cp = frugal_context_default_params();
 *   cp.device = "cuda:0";                     // FRUGAL_ERR_UNSUPPORTED in a build without CUDA
 *   frugal_context *ctx = frugal_context_new(m, cp, &err);
 *   int32_t *ids; size_t n;
 *   frugal_tokenize_chat(m, "[{\"role\":\"user\",\"content\":\"Where is my card?\"}]", NULL,
 *                        &ids, &n, &err);
 *   frugal_generate_params gp = frugal_generate_default_params();
 *   gp.max_tokens = 64;
 *   gp.temperature = 0;                       // greedy
 *   frugal_result r;
 *   if (frugal_generate(ctx, ids, n, &gp, &r, &err) == FRUGAL_OK) puts(r.text);
 *   frugal_result_free(&r);
 *   frugal_free(ids);
 *   frugal_context_free(ctx);
 *   frugal_model_free(m);
 */
#ifndef FRUGAL_H
#define FRUGAL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FRUGAL_VERSION "0.2.0"
#define FRUGAL_MAX_STOP 8 /* stop strings per generation */

/* ---- status -------------------------------------------------------------------------------- */

typedef enum frugal_status {
    FRUGAL_OK = 0,
    FRUGAL_ERR_INVALID_ARGUMENT, /* malformed input: a parameter, device name, messages JSON */
    FRUGAL_ERR_NOT_FOUND,        /* the model path does not exist */
    FRUGAL_ERR_UNSUPPORTED,      /* well-formed but not available here: a CUDA device in a build
                                    without the CUDA backend, a model without a chat template */
    FRUGAL_ERR_TOO_LARGE,        /* prompt + max_tokens beyond the model's context */
    FRUGAL_ERR_UNAVAILABLE,      /* the device cannot be used now (no GPU, out of memory) */
    FRUGAL_ERR_INTERNAL,         /* anything else: the message says what */
} frugal_status;

/* Filled by a failing call when the caller passes one (status FRUGAL_OK on success). */
typedef struct frugal_error {
    frugal_status status;
    char message[512]; /* one line, for people */
} frugal_error;

/* A stable lower-case name of a status ("ok", "invalid_argument", ...). Thread-safe; the string
 * is static. */
const char *frugal_status_str(frugal_status s);

/* Frees what the API handed out (id arrays, strings); NULL is fine. Thread-safe. */
void frugal_free(void *p);

/* ---- model --------------------------------------------------------------------------------- */

typedef struct frugal_model frugal_model; /* opaque: weights, tokenizer, chat template */

typedef struct frugal_model_params {
    const char *quant; /* NULL (weights as stored), "q8" or "q4": weight-only quantisation on load,
                          for CPU contexts (a CUDA context chooses its own weight format) */
} frugal_model_params;

/* quant NULL. Thread-safe. */
frugal_model_params frugal_model_default_params(void);

/* path: an HF model folder (config.json, tokenizer.json, *.safetensors) or a .gguf file.
 * Returns the model (free with frugal_model_free) or NULL: FRUGAL_ERR_NOT_FOUND when path, or a
 * file the model folder needs (tokenizer.json), does not exist; FRUGAL_ERR_INVALID_ARGUMENT for a
 * bad quant or an unreadable / unsupported model.
 * Thread-safe (loads share nothing). */
frugal_model *frugal_model_load(const char *path, frugal_model_params params, frugal_error *err);
/* Frees the model; every context on it must be freed first. NULL is fine. */
void frugal_model_free(frugal_model *m);

/* ---- text ---------------------------------------------------------------------------------- */

/* Token ids of `text`: with add_special nonzero as HF's Tokenizer.encode(text) (BOS when the
 * model adds one), with 0 as encode(text, add_special_tokens=False). On FRUGAL_OK *ids is a
 * malloc'd array of *n ids (free with frugal_free; NULL when *n is 0). Thread-safe. */
frugal_status frugal_tokenize(const frugal_model *m, const char *text, int add_special,
                              int32_t **ids, size_t *n, frugal_error *err);

/* The chat prompt of messages_json (a JSON array of {"role": string, "content": ...} objects)
 * rendered with the model's template, or with the built-in "chatml" / "llama3" when
 * chat_template is not NULL, ending with the assistant's generation prompt. Returns a string to
 * free with frugal_free, or NULL: FRUGAL_ERR_INVALID_ARGUMENT for bad JSON, a bad message or an
 * unknown built-in name, FRUGAL_ERR_UNSUPPORTED when the model has no template and none is
 * named. The text holds the template's BOS (tokenize it with add_special = 0). Thread-safe. */
char *frugal_render_chat(const frugal_model *m, const char *messages_json,
                         const char *chat_template, frugal_error *err);

/* frugal_render_chat, then frugal_tokenize(add_special = 0): the ids HF's
 * apply_chat_template(messages, add_generation_prompt=True, tokenize=True) returns, with exactly
 * the BOS the template writes. Outputs and errors as the two calls. Thread-safe. */
frugal_status frugal_tokenize_chat(const frugal_model *m, const char *messages_json,
                                   const char *chat_template, int32_t **ids, size_t *n,
                                   frugal_error *err);

/* ---- context ------------------------------------------------------------------------------- */

typedef struct frugal_context frugal_context; /* opaque: device and its settings */

typedef struct frugal_context_params {
    const char *device;   /* "cpu" (default), "cuda" (= "cuda:0") or "cuda:N" */
    const char *weights;  /* CUDA weight format: NULL/"bf16" (default), "int8", "int4"; the CPU
                             runs the model's own weights (frugal_model_params.quant) */
    const char *kv_cache; /* NULL/"bf16" (default; f32 on the CPU) or "int8" (CUDA) */
    float kv_fraction;    /* CUDA: share of the free device memory for the KV cache (0.9) */
} frugal_context_params;

/* device "cpu", everything else NULL / default. Thread-safe. */
frugal_context_params frugal_context_default_params(void);

/* Checks params without a model (what frugal_context_new checks first): a malformed device,
 * weights or kv_cache is FRUGAL_ERR_INVALID_ARGUMENT, a CUDA device in a build without the CUDA
 * backend or a CUDA-only setting on the CPU FRUGAL_ERR_UNSUPPORTED. Lets a caller refuse bad
 * settings before an expensive load. Thread-safe. */
frugal_status frugal_context_params_check(const frugal_context_params *params, frugal_error *err);

/* A context on params.device for model m (which must outlive it). Returns the context (free with
 * frugal_context_free) or NULL: FRUGAL_ERR_INVALID_ARGUMENT for a malformed device, weights or
 * kv_cache, or CUDA weights asked of a model quantised on load; FRUGAL_ERR_UNSUPPORTED for a
 * CUDA device in a build without the CUDA backend (the CPU-only `frugal`; `frugal-cuda` from
 * `make cuda` has it) or a CUDA-only setting on the CPU. The device itself is opened by
 * frugal_generate, which reports a missing GPU as FRUGAL_ERR_UNAVAILABLE. Thread-safe. */
frugal_context *frugal_context_new(const frugal_model *m, frugal_context_params params,
                                   frugal_error *err);
/* NULL is fine. */
void frugal_context_free(frugal_context *ctx);

/* ---- generation ---------------------------------------------------------------------------- */

/* Receives each piece of generated text as soon as it is final: whole UTF-8 characters, never
 * a prefix of a stop string, never empty. Called on the generating thread. */
typedef void (*frugal_text_callback)(const char *piece, size_t len, void *user_data);

typedef struct frugal_generate_params {
    int max_tokens;                    /* tokens to generate, >= 1 (default 128) */
    float temperature;                 /* 0 = greedy (default 0.8) */
    int top_k;                         /* 0 = off (default 40) */
    float top_p;                       /* 1 = off (default 0.95) */
    float min_p;                       /* 0 = off (default 0.05) */
    uint64_t seed;                     /* sampling seed (default 0): same seed, same output */
    const char *stop[FRUGAL_MAX_STOP]; /* stop strings, NULL-terminated (default none); the
                                          text ends before the first match */
    int ignore_eos;                    /* nonzero: generate through end-of-sequence tokens */
    frugal_text_callback on_text;      /* NULL: no streaming */
    void *user_data;                   /* passed to on_text */
} frugal_generate_params;

/* The defaults above: the one place the CLI's (and the library's) defaults are written.
 * Thread-safe. */
frugal_generate_params frugal_generate_default_params(void);

typedef enum frugal_finish {
    FRUGAL_FINISH_STOP = 1, /* an end-of-sequence token or a stop string */
    FRUGAL_FINISH_LENGTH,   /* max_tokens reached */
} frugal_finish;

typedef struct frugal_result {
    int32_t *ids;     /* generated ids (the ending EOS included), n_ids of them */
    int n_ids;
    char *text;       /* the released text, NUL-terminated */
    frugal_finish finish;
    double prefill_s; /* seconds of prompt processing */
    double decode_s;  /* seconds of token generation */
} frugal_result;

/* Generates a continuation of prompt ids (from frugal_tokenize / frugal_tokenize_chat) on the
 * context's device. On FRUGAL_OK fills *out (free with frugal_result_free); on failure *out is
 * empty (safe to free): FRUGAL_ERR_INVALID_ARGUMENT for an empty prompt or bad params,
 * FRUGAL_ERR_TOO_LARGE when n_prompt + max_tokens exceeds the model's context,
 * FRUGAL_ERR_UNAVAILABLE when the device cannot be opened. One call at a time per context. */
frugal_status frugal_generate(frugal_context *ctx, const int32_t *prompt, size_t n_prompt,
                              const frugal_generate_params *params, frugal_result *out,
                              frugal_error *err);
/* Frees what *r holds and empties it; an empty result is fine. */
void frugal_result_free(frugal_result *r);

/* ---- images (vision-language models: Qwen2-VL, Qwen2.5-VL) ------------------------------- */

/* One image of a prompt: either the encoded file (PNG, JPEG, WebP, TIFF; decoded to RGB under the
 * image stage's limits, then preprocessed as HF's Qwen2VLImageProcessor does with the model's
 * processor_config.json / preprocessor_config.json) or pixel values already preprocessed (HF's
 * processor output for this image). Borrowed for the call. */
typedef struct frugal_image {
    const void *data;           /* encoded bytes, or NULL when pixel_values is given */
    size_t size;                /* bytes at data */
    const float *pixel_values;  /* (n_patches, patch_dim) rows as HF's processor emits, or NULL */
    int64_t n_patches;          /* rows at pixel_values: grid_thw[0] * [1] * [2] */
    int64_t patch_dim;          /* C * temporal * patch * patch of the model (checked) */
    int grid_thw[3];            /* with pixel_values: frames, patch rows, patch columns */
} frugal_image;

typedef struct frugal_vl_params {
    const frugal_image *images; /* n_images images, shown before the text in one user message */
    int n_images;               /* 0..64 */
    float keep_ratio;           /* share of each image's tokens kept, (0, 1]; default 1 (off) */
    int max_image_tokens;       /* image token budget of the request, shared by the images in
                                   proportion (each keeps at least 1); 0 = none (default) */
    const char *chat_template;  /* NULL: the model's; or a built-in name */
    int want_last_logits;       /* nonzero: fill last_logits */
    int want_pixel_values;      /* nonzero: fill pixel_values */
    int want_image_features;    /* nonzero: fill image_features */
} frugal_vl_params;

/* No images, keep_ratio 1, no budget, the model's template, nothing extra. Thread-safe. */
frugal_vl_params frugal_vl_default_params(void);

typedef struct frugal_vl_result {
    frugal_result gen;          /* ids, text, finish, timings */
    int32_t *prompt_ids;        /* the prompt as run: image pads expanded, less the pruned ones */
    size_t n_prompt_ids;
    int32_t *image_grid_thw;    /* (n_images, 3) */
    int n_images;
    int64_t image_tokens;       /* image tokens after the merger, before pruning */
    int64_t image_tokens_kept;  /* image tokens the LLM saw (after pruning) */
    int64_t *kept_index;        /* (image_tokens_kept) which image tokens were kept: indices over
                                   all images' tokens in prompt order, increasing */
    float *last_logits;         /* (n_vocab) the prompt's last-position logits, when asked */
    int n_vocab;
    float *pixel_values;        /* (n_patches, patch_dim) all images' rows, when asked */
    int64_t n_patches, patch_dim;
    float *image_features;      /* (image_tokens, feature_dim) the merger's output before
                                   pruning, when asked */
    int64_t feature_dim;
    double vision_s;            /* seconds in preprocessing and the vision tower */
} frugal_vl_result;

/* Generates an answer to `prompt` about the images: the chat template renders one user message
 * holding the images, then the text, with the generation prompt; each image placeholder becomes
 * its grid's token count (t*h*w / merge^2), the vision tower's features replace those tokens'
 * embeddings, and positions are HF's M-RoPE (get_rope_index). With keep_ratio < 1 or a budget,
 * query-guided pruning (docs/VISION.md) keeps a subset of each image's tokens chosen for the
 * prompt's text; kept tokens keep their original positions and the rest leave the prompt. On
 * FRUGAL_OK fills *out (free with frugal_vl_result_free; everything in it is the caller's); on
 * failure *out is empty: FRUGAL_ERR_UNSUPPORTED for a model without a vision tower or a device
 * whose backend takes no image features yet (CUDA);
 * FRUGAL_ERR_INVALID_ARGUMENT for corrupt or empty image data, pixel values that disagree with
 * their grid or the model, or bad params; FRUGAL_ERR_TOO_LARGE for an image over the image limits
 * or a prompt beyond the context. One call at a time per context. */
frugal_status frugal_generate_vl(frugal_context *ctx, const char *prompt,
                                 const frugal_vl_params *vp, const frugal_generate_params *gp,
                                 frugal_vl_result *out, frugal_error *err);
/* Frees what *r holds and empties it; an empty result is fine. */
void frugal_vl_result_free(frugal_vl_result *r);

#ifdef __cplusplus
}
#endif
#endif
