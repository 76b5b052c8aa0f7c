/* media.c — the media stages this build links into the assist handler (serve/assist.h).
 *
 * Integration point: the image decoder + text-density estimate (src/stages/image), OCR
 * (src/stages/ocr), audio decoding (src/stages/audio) and ASR (src/stages/asr) are bound here as
 * they land; until a stage is built its entries stay NULL and the route reports it
 * "unavailable" with the reason below. Adapters must be thread-safe (fr_assist_handle runs on
 * every connection thread).
 */
#include <string.h>

#include "serve/assist.h"

void fr_assist_media_default(fr_assist_media *m) {
    memset(m, 0, sizeof *m);
    m->why_image = "unavailable: image decoding / text-density stage not built into this server";
    m->why_ocr = "unavailable: OCR stage not built into this server";
    m->why_audio = "unavailable: audio decoding stage not built into this server";
    m->why_asr = "unavailable: ASR stage not built into this server";
}
