/* vlproc.h — the Qwen2-VL / Qwen2.5-VL image preprocessing, equal to HF transformers'
 * Qwen2VLImageProcessor (the PIL backend, Qwen2VLImageProcessorPil of transformers 5).
 *
 * Steps, in HF's order:
 *   1. RGB: a gray image is repeated into three channels (the decoder already gives RGB with
 *      alpha dropped and EXIF orientation applied: fr_img_decode_flags with FR_IMG_DECODE_PIL);
 *   2. smart_resize: factor = patch * merge; both sides rounded (half to even, as Python's
 *      round) to multiples of the factor; when the area is over max_pixels the sides are scaled
 *      by sqrt(h * w / max_pixels) and floored to the factor (at least one factor), when under
 *      min_pixels scaled by sqrt(min_pixels / (h * w)) and ceiled; an aspect ratio over 200 is
 *      refused as HF refuses it;
 *   3. PIL's bicubic resize on the 8-bit image (stages/image/resample.h), skipped when the size
 *      is already right;
 *   4. rescale: (float)(level * rescale) computed in double, as numpy's float64 multiply then
 *      float32 cast; normalise: (x - mean[c]) / std[c] in float32;
 *   5. the frame repeated `temporal` times (grid_t = 1) and patchified into rows
 *      [grid_h * grid_w, 3 * temporal * patch * patch] in HF's order: rows by merge block
 *      (block row, block column, row in block, column in block), columns by (channel, t, y, x).
 *
 * Configuration: processor_config.json (transformers 5: the image processor's keys, at the top
 * or under "image_processor") or preprocessor_config.json (older, flat). Keys read: min_pixels,
 * max_pixels, size {shortest_edge, longest_edge} (or {min_pixels, max_pixels}), patch_size,
 * merge_size, temporal_patch_size, image_mean, image_std, rescale_factor, do_resize,
 * do_rescale, do_normalize, do_convert_rgb, resample (must be 3, bicubic). min_pixels /
 * max_pixels override size, as HF's __init__ does. Limits checked at load and per request:
 * factor^2 <= min_pixels <= max_pixels <= factor^2 * FR_VL_MAX_MERGED_TOKENS.
 *
 *   fr_vl_proc_cfg cfg; fr_vl_pixels px; fr_err err = {0};
 *   if (fr_vl_proc_cfg_load(model_dir, &cfg, &err)) ...
 *   fr_vl_proc_override ov = {.max_pixels = 200704};        // a request's mm_processor_kwargs
 *   if (fr_vl_proc_cfg_apply(&cfg, &ov, &err)) ...          // FR_ERR_BAD_REQUEST
 *   if (fr_vl_preprocess(&rgb, &cfg, &px, &err)) ...
 *   ... px.data rows, px.grid_t/h/w ...
 *   fr_vl_pixels_free(&px);
 *
 * Thread-safe: no global state; a cfg is read-only during fr_vl_preprocess.
 */
#ifndef FRUGAL_IMAGE_VLPROC_H
#define FRUGAL_IMAGE_VLPROC_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/image/image.h"

/* The largest max_pixels accepted: factor^2 times this many merged tokens (12,845,056 pixels for
 * Qwen's factor 28, vLLM's default ceiling for Qwen2.5-VL). */
#define FR_VL_MAX_MERGED_TOKENS 16384
/* HF refuses max(h, w) / min(h, w) above this. */
#define FR_VL_MAX_ASPECT 200.0

/* The processor configuration. */
typedef struct fr_vl_proc_cfg {
    int patch;              /* patch_size (14) */
    int merge;              /* merge_size (2): factor = patch * merge */
    int temporal;           /* temporal_patch_size (2): the frame is repeated this many times */
    int64_t min_pixels;     /* size.shortest_edge / min_pixels (56 * 56) */
    int64_t max_pixels;     /* size.longest_edge / max_pixels (28 * 28 * 1280) */
    float mean[3];          /* image_mean (OpenAI CLIP's) */
    float std[3];           /* image_std (OpenAI CLIP's) */
    double rescale;         /* rescale_factor (1 / 255), applied in double like numpy */
    bool do_resize;         /* smart_resize + bicubic (true) */
    bool do_rescale;        /* multiply by rescale (true) */
    bool do_normalize;      /* (x - mean) / std (true) */
    bool do_rgb;            /* do_convert_rgb: gray becomes RGB (true) */
} fr_vl_proc_cfg;

/* Per-request overrides of the pixel bounds (vLLM's mm_processor_kwargs); 0 keeps the value. */
typedef struct fr_vl_proc_override {
    int64_t min_pixels; /* 0 = the configured one */
    int64_t max_pixels; /* 0 = the configured one */
} fr_vl_proc_override;

/* The preprocessed image. */
typedef struct fr_vl_pixels {
    float *data;        /* (n_patches, patch_dim) owned, HF's row order */
    int64_t n_patches;  /* grid_t * grid_h * grid_w */
    int64_t patch_dim;  /* 3 * temporal * patch * patch */
    int grid_t;         /* 1 for an image */
    int grid_h;         /* resized height / patch */
    int grid_w;         /* resized width / patch */
} fr_vl_pixels;

/* HF's defaults (Qwen2VLImageProcessor's class attributes). */
void fr_vl_proc_cfg_default(fr_vl_proc_cfg *cfg);

/* Reads model_dir/processor_config.json, else model_dir/preprocessor_config.json, over the
 * defaults. 0, or -1 with err: FR_ERR_NOT_FOUND when neither file exists, FR_ERR_BAD_REQUEST for
 * bad JSON or a bad value (named), FR_ERR_UNSUPPORTED for a resample filter other than bicubic. */
int fr_vl_proc_cfg_load(const char *model_dir, fr_vl_proc_cfg *cfg, fr_err *err);

/* Checks a configuration (patch 1..64, merge 1..8, temporal 1..8, the pixel bounds above, std
 * non-zero and finite). 0, or -1 with FR_ERR_BAD_REQUEST naming the value. */
int fr_vl_proc_cfg_check(const fr_vl_proc_cfg *cfg, fr_err *err);

/* Applies ov to *cfg and checks the result; *cfg is unchanged on error (FR_ERR_BAD_REQUEST).
 * ov may be NULL (nothing to apply). */
int fr_vl_proc_cfg_apply(fr_vl_proc_cfg *cfg, const fr_vl_proc_override *ov, fr_err *err);

/* HF's smart_resize: the resized height and width for an h x w image. 0, or -1 with
 * FR_ERR_BAD_REQUEST (an empty image, an aspect ratio over FR_VL_MAX_ASPECT, bad bounds). */
int fr_vl_smart_resize(int64_t h, int64_t w, int factor, int64_t min_pixels, int64_t max_pixels,
                       int64_t *out_h, int64_t *out_w, fr_err *err);

/* Preprocesses one image (1 or 3 channels). 0, or -1 with err set (codes above; FR_ERR_TOO_LARGE
 * when the patches would exceed the configured bound, which a checked cfg prevents) and *out
 * zeroed. The caller frees with fr_vl_pixels_free. */
/* The float fr_vl_preprocess makes of each 8-bit value v of channel c (rescale, normalise):
 * lut[c * 256 + v]. The preprocessing's own table, for a device that patchifies itself. */
void fr_vl_proc_lut(const fr_vl_proc_cfg *cfg, float lut[3 * 256]);
int fr_vl_preprocess(const fr_image *rgb, const fr_vl_proc_cfg *cfg, fr_vl_pixels *out, fr_err *err);

/* Frees the data and zeroes *p (a zeroed struct is fine). */
void fr_vl_pixels_free(fr_vl_pixels *p);

#endif
