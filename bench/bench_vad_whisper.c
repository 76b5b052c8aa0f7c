/* bench_vad_whisper.c — Whisper's CPU cost with and without the VAD in front, on the recordings
 * of bench/vad/run.sh, with random weights of the whisper-tiny shape (d_model 384, 6 heads,
 * 4 + 4 layers, 80 mels; tests/whisper_synth.h) since no real Whisper weights can be installed
 * here. The words of random weights mean nothing, so only the cost is measured: each window
 * decodes a fixed number of tokens (--tokens, default 24; the random model rarely ends early),
 * so the difference is the windows (30 s of features each, one encoder pass) and the VAD itself.
 *
 *   make build/bench_vad_whisper
 *   build/bench_vad_whisper [--tokens N] FILE.wav...     (16 kHz mono; models/vad installed)
 *
 * Prints one row per file and the totals: audio seconds, windows and CPU seconds without VAD;
 * windows, CPU seconds and the VAD's own CPU seconds with it (process CPU time,
 * CLOCK_PROCESS_CPUTIME_ID, so OpenBLAS threads count).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base.h"
#include "model/whisper.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/audio.h"
#include "stages/audio/vad.h"
#include "../tests/whisper_synth.h"

static double cpu_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *load(const char *path, size_t *n) {
    fr_err err = {0};
    size_t len = 0;
    char *buf = fr_read_file(path, (size_t)64 << 20, &len, &err);
    fr_audio a = {0};
    if (!buf || fr_audio_decode(buf, len, NULL, 16000, &a, &err)) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        free(buf);
        return NULL;
    }
    free(buf);
    *n = a.n;
    return a.pcm;
}

int main(int argc, char **argv) {
    int tokens = 24, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--tokens")) tokens = atoi(argv[2]), first = 3;
    synth_cfg c = {.n_text = 200, .n_lang = 3, .d = 384, .n_head = 6, .n_enc = 4, .n_dec = 4,
                   .n_mels = 80, .f16 = 0, .seed = 7};
    size_t size = 0;
    uint8_t *bytes = synth_ggml(&c, &size);
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load_ggml_buffer(bytes, size, "tiny-shape.bin", &err);
    free(bytes);
    fr_vad *v = fr_vad_new("models/vad/silero_vad.onnx", &err);
    if (!m || !v) return fprintf(stderr, "%s\n", err.msg), 1;
    fr_whisper_params p = fr_whisper_default_params();
    p.max_new_tokens = tokens;
    p.timestamps = true; /* long-form needs them; HF forces them past 30 s too */
    double T[5] = {0};
    printf("| file | audio s | windows, no VAD | CPU s, no VAD | windows, VAD | CPU s, VAD | of it VAD s |\n"
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (int i = first; i < argc; i++) {
        size_t n = 0;
        float *pcm = load(argv[i], &n);
        if (!pcm) return 1;
        fr_whisper_result r0, r1;
        double t0 = cpu_s();
        if (fr_whisper_transcribe(m, pcm, n, &p, &r0, &err)) return fprintf(stderr, "%s\n", err.msg), 1;
        double t1 = cpu_s();
        float *pr = NULL;
        size_t nw = 0;
        fr_vad_probs(v, pcm, n, &pr, &nw, NULL, &err); /* the VAD alone, for its share */
        free(pr);
        double t2 = cpu_s();
        int spans = 0;
        if (fr_whisper_transcribe_vad(m, v, pcm, n, &p, &r1, &spans, &err))
            return fprintf(stderr, "%s\n", err.msg), 1;
        double t3 = cpu_s();
        const double a = (double)n / 16000;
        printf("| %s | %.1f | %d | %.2f | %d | %.2f | %.3f |\n", argv[i], a, r0.n_windows, t1 - t0,
               r1.n_windows, t3 - t2, t2 - t1);
        T[0] += a, T[1] += r0.n_windows, T[2] += t1 - t0, T[3] += r1.n_windows, T[4] += t3 - t2;
        fr_whisper_result_free(&r0);
        fr_whisper_result_free(&r1);
        free(pcm);
    }
    printf("| total | %.1f | %.0f | %.2f | %.0f | %.2f | |\n", T[0], T[1], T[2], T[3], T[4]);
    fr_vad_free(v);
    fr_whisper_free(m);
    return 0;
}
