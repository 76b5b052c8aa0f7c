/* vad_cmd.c — `frugal vad [--model PATH] [--threshold P] [--min-silence-ms N] [--pad-ms N]
 * [--probs] FILE...`: decodes each WAV / FLAC / OGG file to 16 kHz mono, runs Silero VAD
 * (stages/audio/vad.h; default model <data root>/models/vad/silero_vad.onnx) and prints one JSON
 * object per file: its seconds, the windows, the speech spans in seconds, the speech seconds and
 * the VAD's own seconds; --probs adds every window's probability. */
#include "tools/vad_cmd.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "stages/audio/audio.h"
#include "stages/audio/vad.h"

#define USAGE                                                                                  \
    "usage: frugal vad [--model PATH] [--threshold P] [--min-silence-ms N] [--pad-ms N]\n"     \
    "                  [--probs] FILE...\n"

/* The JSON line of one file. */
static void print_file(const char *path, const fr_audio *a, const float *pr, size_t nw,
                       const fr_vad_seg *s, size_t ns, double vad_s, bool probs) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", path);
    cJSON_AddNumberToObject(o, "audio_s", a->seconds);
    cJSON_AddNumberToObject(o, "windows", (double)nw);
    cJSON *sp = cJSON_AddArrayToObject(o, "spans");
    double speech = 0;
    for (size_t i = 0; i < ns; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)s[i].start / FR_VAD_RATE));
        cJSON_AddItemToArray(p, cJSON_CreateNumber((double)s[i].end / FR_VAD_RATE));
        cJSON_AddItemToArray(sp, p);
        speech += (double)(s[i].end - s[i].start) / FR_VAD_RATE;
    }
    cJSON_AddNumberToObject(o, "speech_s", speech);
    cJSON_AddNumberToObject(o, "vad_s", vad_s);
    if (probs) cJSON_AddItemToObject(o, "probs", cJSON_CreateFloatArray(pr, (int)nw));
    char *t = cJSON_PrintUnformatted(o);
    printf("%s\n", t);
    free(t);
    cJSON_Delete(o);
}

/* One file through the VAD; 0, or 1 with the message printed. */
static int one_file(fr_vad *v, const char *path, const fr_vad_params *p, bool probs) {
    fr_err err = {0};
    size_t len = 0;
    char *bytes = fr_read_file(path, (size_t)64 << 20, &len, &err);
    fr_audio a = {0};
    if (!bytes || fr_audio_decode(bytes, len, NULL, FR_VAD_RATE, &a, &err)) {
        fprintf(stderr, "frugal vad: %s: %s\n", path, err.msg);
        free(bytes);
        return 1;
    }
    free(bytes);
    float *pr = NULL;
    size_t nw = 0, ns = 0;
    const double t0 = fr_time_s();
    int rc = fr_vad_probs(v, a.pcm, a.n, &pr, &nw, NULL, &err);
    const double dt = fr_time_s() - t0;
    if (rc) {
        fprintf(stderr, "frugal vad: %s: %s\n", path, err.msg);
    } else {
        fr_vad_seg *s = NULL;
        fr_vad_segments(pr, nw, a.n, p, &s, &ns);
        print_file(path, &a, pr, nw, s, ns, dt, probs);
        free(s);
    }
    free(pr);
    fr_audio_free(&a);
    return rc ? 1 : 0;
}

int fr_cmd_vad(int argc, char **argv) {
    const char *model = NULL;
    bool probs = false;
    fr_vad_params p = fr_vad_default_params();
    float th = p.threshold;
    int first = -1;
    fr_flags fl;
    fr_flags_init(&fl, "vad", argc, argv);
    while (first < 0 && fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf(USAGE "  prints the speech spans Silero VAD finds in each file, one JSON line "
                         "per file (docs/ASR.md)\n");
            return 0;
        } else if (fr_flag_str(&fl, "--model", &model) || fr_flag_switch(&fl, "--probs", &probs) ||
                   fr_flag_float(&fl, "--threshold", 0.01, 0.99, &th) ||
                   fr_flag_int(&fl, "--min-silence-ms", 0, 60000, &p.min_silence_ms) ||
                   fr_flag_int(&fl, "--pad-ms", 0, 10000, &p.speech_pad_ms)) {
            continue;
        } else if (fr_flags_positional(&fl)) {
            first = fl.i;
        } else {
            return fr_flags_unknown(&fl);
        }
    }
    if (fl.rc) return fl.rc;
    if (first < 0) return fputs(USAGE, stderr), 2;
    p.threshold = th;
    p.neg_threshold = th - 0.15f > 0.01f ? th - 0.15f : 0.01f;
    fr_err err = {0};
    fr_vad *v = fr_vad_new(model, &err);
    if (!v) return fprintf(stderr, "frugal vad: %s\n", err.msg), 1;
    int rc = 0;
    for (int i = first; i < argc; i++) rc |= one_file(v, argv[i], &p, probs);
    fr_vad_free(v);
    return rc;
}
