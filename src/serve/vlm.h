/* vlm.h — the images of a request to a vision-language model (Qwen2-VL / Qwen2.5-VL), from the
 * bytes the client sent to what the serving engine takes (engine.h: image feature rows and
 * M-RoPE positions), shared by /v1/chat/completions and /v1/assist.
 *
 * Per image, in prompt order:
 *   1. the encoder cache key: SHA-256 of the bytes as received + the resolved min/max pixels
 *      (stages/vision/cache.h); a hit takes the cached merger output and skips 2-4;
 *   2. decode through the image stage and its limits (stages/image/image.h: format sniffed and
 *      checked against the declared type, side / pixel / byte caps; EXIF orientation applied and
 *      alpha dropped as PIL's convert("RGB") does for HF's processor);
 *   3. preprocessing equal to HF's Qwen2VLImageProcessor (stages/image/vlproc.h), with the
 *      request's mm_processor_kwargs min_pixels / max_pixels over the model's processor config;
 *   4. the vision tower on the CPU (backend/cpu/vision.h), or on the CUDA device named by
 *      fr_vlm_use_device (backend/cuda/cuda_vision.h, one request at a time), its output put
 *      in the cache;
 * then the prompt: each image placeholder expanded to the image's tokens (model/mrope.h), the
 * M-RoPE positions of the whole prompt (HF's get_rope_index), and pruning per request after the
 * cache (stages/vision/prune.h: keep_ratio / max_image_tokens, scored against the question's
 * token embeddings; kept tokens keep their original positions, dropped ones leave the prompt).
 * Steps 2-4 and the pruning are metered as the request's "vision" stage (a CPU step), the
 * base64 / fetch as "decode_media" (serve/media_parts.c).
 *
 * Thread-safe: an fr_vlm is read-only after fr_vlm_new / fr_vlm_use_device except the cache,
 * which locks itself, and the CUDA tower, which a mutex guards.
 */
#ifndef FRUGAL_SERVE_VLM_H
#define FRUGAL_SERVE_VLM_H

#include "base/base.h"
#include "model/model.h"
#include "serve/api.h"

struct fr_meter;
struct fr_meter_req;

typedef struct fr_vlm fr_vlm;

/* Encoder cache counters (for /metrics). */
typedef struct fr_vlm_stats {
    uint64_t hits, misses, evictions, inserts;
    int64_t entries;
    size_t bytes, budget;
} fr_vlm_stats;

/* The vision path of model m (read-only, outlives the fr_vlm), its processor config read from
 * the model folder, an encoder cache of cache_bytes (0: none). NULL with err when the model has
 * no vision tower (FR_ERR_UNSUPPORTED) or its processor config cannot be read. */
fr_vlm *fr_vlm_new(const fr_model *m, size_t cache_bytes, fr_err *err);
/* Run the tower on `device` ("cuda", "cuda:N": uploads the tower's weights there; "cpu" / NULL:
 * nothing changes). Call once, before requests. 0, or -1 with err (FR_ERR_UNSUPPORTED in a
 * build without CUDA; the tower's errors). */
int fr_vlm_use_device(fr_vlm *v, const char *device, fr_err *err);
void fr_vlm_free(fr_vlm *v);
/* Drop the plain background units of document images before the tower (stages/vision/bgdrop.h;
 * a photo has too few to qualify and keeps every unit). Set before serving: the encoder cache
 * holds what the tower computed under this setting. Default off. */
void fr_vlm_set_background_drop(fr_vlm *v, bool on);
void fr_vlm_stats_get(fr_vlm *v, fr_vlm_stats *out);

/* A request's pruning and preprocessing settings. */
typedef struct fr_vlm_opts {
    double keep_ratio;        /* (0, 1]: share of each image's tokens kept */
    int64_t max_image_tokens; /* 0 = no budget, else the most image tokens the request keeps */
    int64_t min_pixels;       /* 0 = the processor config's */
    int64_t max_pixels;       /* 0 = the processor config's */
    const fr_cancel *cancel;  /* the request's stop check (client gone, shutdown), or NULL */
    double time_limit_s;      /* the whole vision stage's time (0 = none): past it, TIMEOUT */
} fr_vlm_opts;

/* What the engine gets. */
typedef struct fr_vlm_prompt {
    int32_t *ids;             /* (n) prompt ids, image pads expanded and pruned (malloc'd) */
    size_t n;
    int32_t *rope_pos;        /* (3, n) M-RoPE positions (malloc'd) */
    float *embd;              /* (n_rows, n_embd) feature rows of the image tokens (malloc'd) */
    int n_rows;
    int n_images;
    int64_t image_tokens;     /* before pruning */
    int64_t image_tokens_kept;/* after */
    int cache_hits;           /* images found in the encoder cache */
    double vision_s;          /* seconds of decode + preprocess + tower + pruning */
} fr_vlm_prompt;

void fr_vlm_prompt_free(fr_vlm_prompt *p);

/* Builds the engine's input from raw (n_raw ids: the rendered chat tokenized, one image
 * placeholder per image) and the request's images (bytes as received, n_images of them, in
 * prompt order). meter / mreq: the request's account for the "vision" stage (NULL: not
 * metered). Returns 0, or -1 with *err set: 400 invalid_image (corrupt), 413 image_too_large,
 * 415 unsupported_media_type (wrong declared type or an unknown format), 400
 * invalid_image_input (placeholders and images differ; bad pruning or pixel settings); the
 * message names the image's param. */
int fr_vlm_prepare(fr_vlm *v, const int32_t *raw, size_t n_raw, const fr_api_image *images,
                   int n_images, const fr_vlm_opts *opts, struct fr_meter *meter,
                   struct fr_meter_req *mreq, fr_vlm_prompt *out, fr_api_error *err);

#endif
