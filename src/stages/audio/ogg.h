/* ogg.h — Ogg Vorbis input for the audio stage (internal to src/stages/audio).
 *
 * Why not libsndfile: its Ogg/Vorbis reader leaks the codec setup (libvorbis vorbis_info, about
 * 5.8 KB) every time it refuses a truncated or corrupt file, so a client could grow the server's
 * memory at will. Ogg input therefore goes through two steps of our own:
 *   1. fr_ogg_check walks every page of the container before any codec sees it: magic, version,
 *      page inside the buffer, CRC-32, one logical stream, consecutive page numbers, the first
 *      page a beginning-of-stream page that holds only the Vorbis identification header, the
 *      comment and setup headers complete, and a last page that carries the end-of-stream flag
 *      and ends the buffer. A truncated file is refused here with "truncated ogg file".
 *   2. libvorbisfile (ov_open_callbacks over the buffer) decodes; on any failure it releases
 *      what it set up (ov_clear), which the tests check under LeakSanitizer.
 * Every function is reentrant: all state lives in the handle.
 */
#ifndef FRUGAL_AUDIO_OGG_H
#define FRUGAL_AUDIO_OGG_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* Validate the container (step 1 above). 0 when it is a complete single-stream Ogg Vorbis
 * file, -1 with err set ("audio: ...") otherwise. Reads only b[0..len). */
int fr_ogg_check(const uint8_t *b, size_t len, fr_err *err);

typedef struct fr_ogg_dec fr_ogg_dec;

/* Check the container, then open the Vorbis decoder over data[0..len) (which must outlive the
 * handle). Fills channels, rate and frames (the total the stream's last granule position gives).
 * Returns the handle, or NULL with err set; nothing is held after a failure. */
fr_ogg_dec *fr_ogg_open(const void *data, size_t len, int *channels, int *rate, int64_t *frames,
                        fr_err *err);

/* Decode up to `frames` frames into out (interleaved, channels per frame). Returns the frames
 * written (> 0), 0 at the end of the stream, -1 with err set on a decoding error. */
long fr_ogg_read(fr_ogg_dec *d, float *out, int frames, fr_err *err);

/* Release the decoder (NULL is fine). */
void fr_ogg_close(fr_ogg_dec *d);

#endif
