/* transcribe_cmd.c — `frugal transcribe`: Whisper on the CPU.
 *
 *   frugal transcribe --model DIR_OR_BIN --audio FILE [--language xx] [--task transcribe|translate]
 *                     [--timestamps] [--beams N] [--max-new-tokens N] [--json]
 *
 * The model is an HF folder (WhisperForConditionalGeneration) or a whisper.cpp ggml .bin; the
 * audio is WAV, FLAC or OGG/Vorbis (stages/audio: mono, resampled to 16 kHz). Prints the
 * transcript (with --timestamps one "[start --> end] text" line per segment), or with --json one
 * object: file, model, language, task, text, segments [{start, end, text, tokens}], tokens,
 * audio_s, proc_s, rtfx. Card numbers and IBANs are masked in what is printed.
 */
#include "tools/transcribe_cmd.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/mask.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/vad.h"
#include "stages/audio/audio.h"

#define USAGE                                                                                  \
    "usage: frugal transcribe --model DIR_OR_BIN --audio FILE [--language xx]\n"               \
    "                         [--task transcribe|translate] [--timestamps] [--beams N]\n"      \
    "                         [--max-new-tokens N] [--json] [--device cpu|cuda|cuda:N]\n"     \
    "                         [--no-vad]\n"

static void print_json(const char *file, const char *model, const fr_whisper_model *m,
                       const fr_whisper_params *p, const fr_whisper_result *r, double proc_s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "file", file);
    cJSON_AddStringToObject(o, "model", model);
    const char *lang = fr_whisper_lang_code(r->language);
    if (lang) cJSON_AddStringToObject(o, "language", lang);
    else cJSON_AddNullToObject(o, "language");
    cJSON_AddStringToObject(o, "task", p->task == FR_WHISPER_TASK_TRANSLATE ? "translate" : "transcribe");
    char *t = fr_mask_dup(r->text);
    cJSON_AddStringToObject(o, "text", t);
    free(t);
    cJSON *segs = cJSON_AddArrayToObject(o, "segments");
    for (int i = 0; i < r->n_segments; i++) {
        const fr_whisper_segment *s = &r->segments[i];
        cJSON *so = cJSON_CreateObject();
        cJSON_AddNumberToObject(so, "start", s->start);
        cJSON_AddNumberToObject(so, "end", s->end);
        char *st = fr_mask_dup(s->text);
        cJSON_AddStringToObject(so, "text", st);
        free(st);
        cJSON_AddItemToObject(so, "tokens", cJSON_CreateIntArray(s->tokens, s->n_tokens));
        cJSON_AddItemToArray(segs, so);
    }
    cJSON_AddItemToObject(o, "tokens", cJSON_CreateIntArray(r->tokens, r->n_tokens));
    cJSON_AddNumberToObject(o, "windows", r->n_windows);
    cJSON_AddNumberToObject(o, "audio_s", r->audio_s);
    cJSON_AddNumberToObject(o, "proc_s", proc_s);
    cJSON_AddNumberToObject(o, "rtfx", proc_s > 0 ? r->audio_s / proc_s : 0);
    (void)m;
    char *s = cJSON_PrintUnformatted(o);
    printf("%s\n", s);
    free(s);
    cJSON_Delete(o);
}

int fr_cmd_transcribe(int argc, char **argv) {
    const char *model = NULL, *audio = NULL, *lang = NULL, *task = NULL, *device = NULL;
    bool ts = false, json = false, no_vad = false;
    fr_whisper_params p = fr_whisper_default_params();
    fr_flags fl;
    fr_flags_init(&fl, "transcribe", argc, argv);
    while (fr_flags_next(&fl)) {
        if (fr_flag_help(&fl)) {
            printf(USAGE "  transcribes one WAV/FLAC/OGG file with a Whisper model (HF folder or "
                         "whisper.cpp .bin) on the CPU, or with --device cuda on a CUDA device (frugal-cuda)\n");
            return 0;
        } else if (fr_flag_str(&fl, "--model", &model) || fr_flag_str(&fl, "--audio", &audio) ||
                   fr_flag_str(&fl, "--language", &lang) || fr_flag_str(&fl, "--task", &task) ||
                   fr_flag_str(&fl, "--device", &device) ||
                   fr_flag_switch(&fl, "--timestamps", &ts) || fr_flag_switch(&fl, "--json", &json) ||
                   fr_flag_switch(&fl, "--no-vad", &no_vad) ||
                   fr_flag_int(&fl, "--beams", 1, 16, &p.num_beams) ||
                   fr_flag_int(&fl, "--max-new-tokens", 1, 4096, &p.max_new_tokens)) {
            continue;
        } else {
            return fr_flags_unknown(&fl);
        }
    }
    if (fl.rc) return fl.rc;
    if (!model || !audio) {
        fprintf(stderr, USAGE);
        return 2;
    }
    if (lang) {
        p.language = fr_whisper_lang_index(lang);
        if (p.language < 0) {
            fprintf(stderr, "frugal transcribe: --language %s: not a Whisper language code\n", lang);
            return 2;
        }
    }
    if (task) {
        if (!strcmp(task, "translate")) p.task = FR_WHISPER_TASK_TRANSLATE;
        else if (strcmp(task, "transcribe")) {
            fprintf(stderr, "frugal transcribe: --task transcribe|translate\n");
            return 2;
        }
    }
    p.timestamps = ts;
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load(model, &err);
    if (!m) return fprintf(stderr, "frugal transcribe: %s\n", err.msg), 1;
    if (fr_whisper_cuda_open(m, device, &p.cuda, &err)) {
        fprintf(stderr, "frugal transcribe: --device %s: %s\n", device, err.msg);
        fr_whisper_free(m);
        return 1;
    }
    size_t len;
    char *bytes = fr_read_file(audio, (size_t)64 << 20, &len, &err);
    fr_audio a = {0};
    int rc = 1;
    if (!bytes || fr_audio_decode(bytes, len, NULL, FR_WHISPER_SAMPLE_RATE, &a, &err)) {
        fprintf(stderr, "frugal transcribe: %s: %s\n", audio, err.msg);
        goto out;
    }
    double t0 = fr_time_s();
    fr_whisper_result r;
    fr_vad *vad = no_vad ? NULL : fr_vad_new_default();
    int spans = -1;
    const int trc = fr_whisper_transcribe_vad(m, vad, a.pcm, a.n, &p, &r, &spans, &err);
    fr_vad_free(vad);
    if (spans >= 0) fr_info("transcribe: the vad kept %d span(s)", spans);
    if (trc) {
        fprintf(stderr, "frugal transcribe: %s: %s\n", audio, err.msg);
        goto out;
    }
    double dt = fr_time_s() - t0;
    if (json) {
        print_json(audio, model, m, &p, &r, dt);
    } else if (p.timestamps || r.n_windows > 1) {
        for (int i = 0; i < r.n_segments; i++) {
            char *s = fr_mask_dup(r.segments[i].text);
            printf("[%.2f --> %.2f] %s\n", r.segments[i].start, r.segments[i].end, s);
            free(s);
        }
    } else {
        char *s = fr_mask_dup(r.text);
        printf("%s\n", s);
        free(s);
    }
    fr_whisper_result_free(&r);
    rc = 0;
out:
    fr_audio_free(&a);
    free(bytes);
    fr_whisper_cuda_free(p.cuda);
    fr_whisper_free(m);
    return rc;
}
