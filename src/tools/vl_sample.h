/* vl_sample.h — the samples of `frugal analyze heads` and `frugal eval-vqa`, and the prompt one
 * sample becomes for a Qwen2-VL / Qwen2.5-VL model on the CPU.
 *
 * A data file is JSON lines, one sample per non-blank line:
 *   {"image": "a.png" | ["a.png", "b.jpg"], "question": "...", "answers": ["...", ...], "id": "..."}
 * or, instead of image files, HF's processor output:
 *   {"pixel_values": "x.npy", "grid_thw": [[1, 4, 6], ...], "question": "..."}
 * Relative paths are taken from the data file's folder. "answers" (strings) is what eval-vqa
 * scores against; "id" is optional (the line number otherwise).
 *
 * The prompt: one user message holding the images then the question, rendered with the model's
 * chat template (generation prompt added), tokenized, image pads expanded to each grid's token
 * count (model/mrope.h), M-RoPE positions as HF's get_rope_index, and the image features from the
 * CPU vision tower (backend/cpu/vision.h), in prompt order. Image files are decoded by the image
 * stage (RGB with alpha dropped and EXIF orientation applied, as PIL's convert("RGB") after
 * exif_transpose; its default limits) and preprocessed as HF's processor
 * (stages/image/vlproc.h, the model folder's processor config).
 *
 * Errors carry codes: a malformed line or field FR_ERR_BAD_REQUEST, a missing file
 * FR_ERR_NOT_FOUND, a model without a vision tower FR_ERR_UNSUPPORTED, limits FR_ERR_TOO_LARGE.
 * Not thread-safe per sample; the functions share no state.
 */
#ifndef FRUGAL_TOOLS_VL_SAMPLE_H
#define FRUGAL_TOOLS_VL_SAMPLE_H

#include "backend/cpu/cpu.h"
#include "model/model.h"

#define FR_VL_SAMPLE_MAX_IMAGES 16     /* images per sample */
#define FR_VL_SAMPLE_MAX_ANSWERS 64    /* answers per sample */
#define FR_VL_SAMPLE_MAX_LINE (1u << 20) /* bytes per JSONL line */
#define FR_VL_SAMPLE_MAX_TEXT 65536    /* bytes of a question or an answer */

/* One line of a data file (every string owned). */
typedef struct fr_vl_sample {
    char *id;                               /* "id", or "line N" */
    char *images[FR_VL_SAMPLE_MAX_IMAGES];  /* image paths (resolved), n_images of them */
    int n_images;
    char *pixel_values;                     /* .npy path (resolved) instead of images, or NULL */
    int32_t grid_thw[3 * FR_VL_SAMPLE_MAX_IMAGES]; /* with pixel_values: one grid per image */
    int n_grids;
    char *question;                         /* the text after the images */
    char *answers[FR_VL_SAMPLE_MAX_ANSWERS];/* reference answers (may be none) */
    int n_answers;
} fr_vl_sample;

/* Parses one JSONL line (len bytes, not NUL-terminated) into *out; base_dir resolves relative
 * paths (NULL: as given); line_no names the sample when it has no id. Returns 0, or -1 with err
 * (FR_ERR_BAD_REQUEST naming the field; FR_ERR_TOO_LARGE over the limits above) and *out
 * zeroed. Touches no file. */
int fr_vl_sample_parse(const char *line, size_t len, const char *base_dir, int line_no,
                       fr_vl_sample *out, fr_err *err);
void fr_vl_sample_free(fr_vl_sample *s);

/* Reads a JSONL file: *out (malloc'd array of *n samples; free each and the array), blank lines
 * skipped. Stops at the first bad line: -1 with err prefixed "FILE:LINE" (codes as above;
 * FR_ERR_NOT_FOUND when the file does not exist). At most max_samples samples (0: no limit). */
int fr_vl_samples_load(const char *path, int max_samples, fr_vl_sample **out, int *n, fr_err *err);

/* One sample as the model's prompt. */
typedef struct fr_vl_prompt {
    int32_t *ids;        /* (n) prompt ids, image pads expanded */
    int n;
    int32_t *rope_pos;   /* (3, n) M-RoPE positions (t row, then h, then w) */
    int32_t delta;       /* decoded token at KV position q: q + delta on all rows */
    float *feat;         /* (n_img, n_embd) image features after the merger, prompt order */
    int64_t n_img;       /* image tokens in the prompt */
    int32_t grid_thw[3 * FR_VL_SAMPLE_MAX_IMAGES]; /* per image, in patches */
    int n_images;
    int first_img, last_img; /* prompt indexes of the first and last image token */
    double vision_s;     /* seconds of preprocessing + vision tower */
} fr_vl_prompt;

/* Builds the prompt of s for m (a model with a vision tower and M-RoPE). pool: worker threads of
 * the tower, or NULL. Returns 0, or -1 with err (codes as above). */
int fr_vl_prompt_build(const fr_model *m, fr_pool *pool, const fr_vl_sample *s, fr_vl_prompt *out,
                       fr_err *err);
void fr_vl_prompt_free(fr_vl_prompt *p);

#endif
