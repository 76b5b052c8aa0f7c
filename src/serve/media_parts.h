/* media_parts.h — image and audio content parts of /v1/chat/completions turned into text before
 * the LLM, by the same stages and routing rule as /v1/assist:
 *   - image_url (a base64 data URL; PNG, JPEG, WebP, TIFF): the text-density estimate runs first;
 *     a mostly-text image (density >= threshold, 0.35 by default) goes to OCR and its text is
 *     inserted; a picture would need a vision-language model, which this server does not run
 *     for images: 400 with code "unsupported_content_part" naming the density and the reason
 *     (never a fake answer). A server that runs one takes image parts through serve/vlm.h
 *     instead (fr_api_media_image_bytes below).
 *   - input_audio ({"data": base64, "format": "wav"|"flac"|"ogg"}): decoded, resampled and
 *     transcribed by ASR; the transcript is inserted.
 * Errors follow the stages' error codes (serve/error.h): corrupt → 400, too large → 413, wrong
 * media type → 415.
 */
#ifndef FRUGAL_MEDIA_PARTS_H
#define FRUGAL_MEDIA_PARTS_H

#include <stdint.h>

#include "serve/api.h"

struct cJSON;

/* Appends the text of one image_url / input_audio part to *out. `param` names the part for error
 * messages (e.g. "messages[0].content[1]"). OCR and ASR run under fr_api_media_set_bounds'
 * time limits and pixel budget (default fr_assist_config_init's), never cancelled. Returns 0, or
 * -1 with *err set (504 ocr_timeout / asr_timeout, 503 shutting_down, ...). Thread-safe. */
int fr_api_media_part_text(const struct cJSON *part, const char *type, const char *param,
                           fr_buf *out, fr_api_error *err);

/* The same, with the stages metered as CPU steps of account `r` on meter `m` ("decode_media",
 * "ocr", "asr"; m or r NULL: not metered) and OCR / ASR stopped by `cancel` (NULL: never). */
struct fr_meter;
struct fr_meter_req;
int fr_api_media_part_text_metered(const struct cJSON *part, const char *type, const char *param,
                                   struct fr_meter *m, struct fr_meter_req *r,
                                   const fr_cancel *cancel, fr_buf *out, fr_api_error *err);

/* The bytes of an image part for a vision-language model (type "image_url": {"url": U} or U;
 * type "image": {"image": U}), U a base64 data URL, plain base64, or, when
 * lim->allow_remote_images, an http(s) URL fetched with libcurl within lim->remote_timeout_s and
 * lim->remote_max_bytes (no redirects to other protocols; an HTTP error status is an error).
 * Metered as the "decode_media" stage of lim's account. *data is malloc'd (the caller frees),
 * mime gets the declared type (data URL or Content-Type; "" = none). Returns 0, or -1 with *err:
 * 400 remote_image_refused (a URL when remote images are off), 400 invalid_data_url /
 * invalid_base64 / invalid_media, 413 media_too_large, 400 remote_image_failed (the fetch
 * failed: status, timeout, size). Thread-safe. */
int fr_api_media_image_bytes(const struct cJSON *part, const char *type, const char *param,
                             const fr_api_limits *lim, uint8_t **data, size_t *len, char *mime,
                             size_t mime_cap, fr_api_error *err);

/* The transcript of a recording (WAV, FLAC or OGG, told by its bytes; mime: the declared media
 * type or NULL) for the audio endpoints (serve/audio_api.h): decoded and resampled as the
 * "decode_media" stage, transcribed as the "asr" stage of account `r` on meter `m` (either NULL:
 * not metered), under the same time limit as input_audio parts and stopped by `cancel` (NULL:
 * never). `param` names the field in errors. Returns 0 with *text (malloc'd; the caller frees)
 * and *seconds (the recording's length), or -1 with *err as for input_audio parts (400
 * invalid_audio for empty or corrupt bytes, 415 unsupported_media_type, 413 media_too_large, 504
 * asr_timeout, 503 shutting_down, 400 unsupported_content_part when this build has no ASR).
 * Thread-safe. */
int fr_api_media_transcribe(const uint8_t *data, size_t n, const char *mime, const char *param,
                            struct fr_meter *m, struct fr_meter_req *r, const fr_cancel *cancel,
                            char **text, double *seconds, fr_api_error *err);

/* Text-density threshold used for image parts (default 0.35). */
void fr_api_media_set_threshold(double t);
/* The OCR / ASR bounds of media parts (default: fr_assist_config_init's); the server sets its
 * /v1/assist config's at start, before any request. */
void fr_api_media_set_bounds(double ocr_time_limit_s, uint64_t ocr_max_pixels,
                             double asr_time_limit_s_per_min);

#endif
