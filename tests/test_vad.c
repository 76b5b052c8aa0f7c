/* test_vad.c — Silero VAD on the ONNX executor (stages/audio/vad.h) against onnxruntime's
 * per-window probabilities and final state (tests/fixtures/vad/ref/, written by
 * scripts/make_vad_refs.py with onnxruntime 1.30, CPU, fp32, optimisations off), the
 * segmentation on the committed fixtures and on hand-made probability tracks, and the missing-model
 * path. A missing model or reference file is a FAIL, never a skip.
 *
 *   build/tests/test_vad            run the cases
 *   build/tests/test_vad --dump F   print the window probabilities of WAV file F (16 kHz mono)
 */
#include "t.h"

#include "base/base.h"
#include "base/npy.h"
#include "stages/asr/asr.h"
#include "stages/asr/lm.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/audio.h"
#include "stages/audio/vad.h"

#define FIX "tests/fixtures/vad/"
#define REF_TOL 1e-4 /* |C - onnxruntime| per window probability (measured: 2.2e-5) */
/* The final state after hundreds of windows: the LSTM cell state grows to |c| ~ 80 on speech,
 * so its tolerance is absolute + relative, |C - ort| <= 1e-4 + 1e-5 |ort| (measured: 1.8e-4 at
 * c = -77.13, 2.4e-6 relative) */
#define STATE_TOL_ABS 1e-4
#define STATE_TOL_REL 1e-5

static float *load_wav(const char *path, size_t *n) {
    fr_err err = {0};
    size_t len = 0;
    char *buf = fr_read_file(path, (size_t)64 << 20, &len, &err);
    if (!buf) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    fr_audio a = {0};
    const int rc = fr_audio_decode(buf, len, NULL, FR_VAD_RATE, &a, &err);
    free(buf);
    if (rc) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    *n = a.n;
    return a.pcm;
}

static fr_vad *vad(void) {
    fr_err err = {0};
    fr_vad *v = fr_vad_new("models/vad/silero_vad.onnx", &err);
    if (!v) fprintf(stderr, "  %s (run scripts/install-deps.sh)\n", err.msg);
    return v;
}

/* The window probabilities of fixture name. */
static float *probs_of(fr_vad *v, const char *name, size_t *nw, size_t *ns) {
    char path[256];
    snprintf(path, sizeof path, FIX "%s.wav", name);
    float *pcm = load_wav(path, ns);
    if (!pcm) return NULL;
    float *p = NULL;
    fr_err err = {0};
    if (fr_vad_probs(v, pcm, *ns, &p, nw, NULL, &err)) fprintf(stderr, "  %s\n", err.msg);
    free(pcm);
    return p;
}

static void check_ref(const char *name) {
    fr_vad *v = vad();
    CHECK(v != NULL);
    if (!v) return;
    size_t nw = 0, ns = 0;
    float *p = probs_of(v, name, &nw, &ns);
    CHECK(p != NULL);
    char path[256];
    snprintf(path, sizeof path, FIX "ref/%s.probs.npy", name);
    fr_npy ref = {0}, st = {0};
    fr_err err = {0};
    const int rc = fr_npy_load_f32(path, &ref, &err);
    if (rc) fprintf(stderr, "  %s (scripts/make_vad_refs.py writes it)\n", err.msg);
    CHECK(rc == 0);
    if (p && !rc) {
        CHECK_EQ_INT(ref.n, (long long)nw);
        double worst = 0;
        for (size_t k = 0; k < nw && (int64_t)k < ref.n; k++)
            worst = fmax(worst, fabs((double)p[k] - ref.data[k]));
        fprintf(stderr, "  %s: %zu windows, max |C - onnxruntime| %.3g\n", name, nw, worst);
        CHECK(worst <= REF_TOL);
    }
    snprintf(path, sizeof path, FIX "ref/%s.state.npy", name);
    const int rs = fr_npy_load_f32(path, &st, &err);
    CHECK(rs == 0);
    if (p && !rs) {
        CHECK_EQ_INT(st.n, 256);
        double worst = 0;
        int at = 0, bad = 0;
        for (int64_t k = 0; k < st.n && k < 256; k++) {
            const double d = fabs((double)fr_vad_state(v)[k] - st.data[k]);
            bad += d > STATE_TOL_ABS + STATE_TOL_REL * fabs(st.data[k]);
            if (d > worst) worst = d, at = (int)k;
        }
        fprintf(stderr, "  %s: final state, max |C - onnxruntime| %.3g (at %d: %g vs %g)\n", name,
                worst, at, fr_vad_state(v)[at], st.data[at]);
        CHECK_EQ_INT(bad, 0);
    }
    fr_npy_free(&ref);
    fr_npy_free(&st);
    free(p);
    fr_vad_free(v);
}

TEST(ref_speech_pauses) { check_ref("speech_pauses"); }
TEST(ref_silence) { check_ref("silence"); }
TEST(ref_noise) { check_ref("noise"); }

/* The fixture's layout (tests/fixtures/vad/README.md): words in [0.6, 4.405) s and
 * [7.405, 9.956) s, silence elsewhere. The spans must cover the words and not the 3 s pause. */
TEST(segments_of_fixture) {
    fr_vad *v = vad();
    CHECK(v != NULL);
    if (!v) return;
    size_t nw = 0, ns = 0;
    float *p = probs_of(v, "speech_pauses", &nw, &ns);
    CHECK(p != NULL);
    fr_vad_seg *s = NULL;
    size_t n = 0;
    fr_vad_segments(p, nw, ns, NULL, &s, &n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, "  span %zu: %.3f .. %.3f s\n", i, s[i].start / 16000.0, s[i].end / 16000.0);
    CHECK_EQ_INT(n, 2);
    if (n == 2) {
        CHECK(s[0].start <= (int64_t)(0.75 * 16000) && s[0].end >= (int64_t)(3.9 * 16000));
        CHECK(s[0].end <= (int64_t)(4.9 * 16000));
        CHECK(s[1].start >= (int64_t)(6.9 * 16000) && s[1].start <= (int64_t)(7.6 * 16000));
        CHECK(s[1].end >= (int64_t)(9.6 * 16000));
    }
    free(s);
    free(p);
    fr_vad_free(v);
}

TEST(silence_and_noise_have_no_speech) {
    fr_vad *v = vad();
    CHECK(v != NULL);
    if (!v) return;
    const char *names[2] = {"silence", "noise"};
    for (int k = 0; k < 2; k++) {
        size_t nw = 0, ns = 0, n = 9;
        float *p = probs_of(v, names[k], &nw, &ns);
        CHECK(p != NULL);
        fr_vad_seg *s = NULL;
        fr_vad_segments(p, nw, ns, NULL, &s, &n);
        CHECK_EQ_INT(n, 0);
        free(s);
        free(p);
    }
    fr_vad_free(v);
}

/* A hand-made track (windows of 32 ms): each rule of the segmentation. */
TEST(segments_rules) {
    float pr[64];
    for (int i = 0; i < 64; i++) pr[i] = 0.0f;
    for (int i = 4; i < 20; i++) pr[i] = 0.9f;  /* 0.512 s of speech */
    pr[10] = 0.4f;                              /* between the thresholds: no end */
    for (int i = 22; i < 24; i++) pr[i] = 0.9f; /* 64 ms: under min_speech once alone */
    fr_vad_params p = fr_vad_default_params();
    p.speech_pad_ms = 0;
    p.min_silence_ms = 100; /* 4 windows (3.1) */
    fr_vad_seg *s = NULL;
    size_t n = 0;
    fr_vad_segments(pr, 64, 64 * 512, &p, &s, &n);
    CHECK_EQ_INT(n, 1); /* the gap of 2 windows does not end the span: 4..24 */
    if (n == 1) {
        CHECK_EQ_INT(s[0].start, 4 * 512);
        CHECK_EQ_INT(s[0].end, 24 * 512);
    }
    free(s);
    p.min_silence_ms = 30; /* 480 samples: one quiet window ends it at 20, then 22..24 is too short */
    fr_vad_segments(pr, 64, 64 * 512, &p, &s, &n);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK_EQ_INT(s[0].end, 20 * 512);
    free(s);
    p.speech_pad_ms = 32; /* 512 samples each side */
    fr_vad_segments(pr, 64, 64 * 512, &p, &s, &n);
    if (n == 1) {
        CHECK_EQ_INT(s[0].start, 3 * 512);
        CHECK_EQ_INT(s[0].end, 21 * 512);
    }
    free(s);
    for (int i = 0; i < 64; i++) pr[i] = 0.9f; /* speech to the end: the span ends at n */
    fr_vad_segments(pr, 64, 64 * 512 - 100, &p, &s, &n);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK_EQ_INT(s[0].end, 64 * 512 - 100);
    free(s);
}

TEST(join_keeps_the_spans) {
    int16_t pcm[100];
    for (int i = 0; i < 100; i++) pcm[i] = (int16_t)i;
    fr_vad_seg s[2] = {{10, 20}, {50, 55}};
    size_t n = 0;
    int16_t *o = fr_vad_join_i16(pcm, s, 2, &n);
    CHECK_EQ_INT(n, 15);
    CHECK_EQ_INT(o[0], 10);
    CHECK_EQ_INT(o[9], 19);
    CHECK_EQ_INT(o[10], 50);
    free(o);
}

TEST(missing_model_is_not_found) {
    fr_err err = {0};
    fr_vad *v = fr_vad_new("tests/fixtures/vad/no-such-model.onnx", &err);
    CHECK(v == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
}

TEST(too_long_input_is_too_large) {
    fr_vad *v = vad();
    CHECK(v != NULL);
    if (!v) return;
    float x = 0, *p = NULL;
    size_t nw = 0;
    fr_err err = {0};
    CHECK(fr_vad_probs(v, &x, FR_VAD_MAX_SAMPLES + 1, &p, &nw, NULL, &err) == -1);
    CHECK_EQ_INT(err.code, FR_ERR_TOO_LARGE);
    fr_vad_free(v);
}

/* pocketsphinx on the fixture with its 3 s pause, with and without the VAD: the VAD decodes
 * under 70 % of the audio and its transcript has no more word errors than the whole recording's
 * (measured: 3 vs 5 edits over the 17 words). */
static size_t asr_edits(const char *vad_model, const int16_t *pcm, size_t n, fr_asr_result *r) {
    fr_asr_config cfg = {.vad_model = vad_model};
    fr_err err = {0};
    fr_asr *a = fr_asr_new(&cfg, &err);
    if (!a) {
        fprintf(stderr, "  %s\n", err.msg);
        return 999;
    }
    const int rc = fr_asr_run(a, pcm, n, r, &err);
    fr_asr_free(a);
    if (rc) return 998;
    size_t words = 0;
    const char *ref = "please transfer one hundred dollars to my savings account what is the "
                      "balance of my checking account";
    const size_t e = fr_wer_edits(ref, r->text, &words);
    fprintf(stderr, "  %s: \"%s\" (%zu edits, %.2f of %.2f s decoded)\n",
            *vad_model ? "vad" : "no vad", r->text, e, r->speech_s, r->audio_s);
    return e;
}

TEST(asr_with_vad_transcribes_as_well) {
    size_t n = 0;
    float *f = load_wav(FIX "speech_pauses.wav", &n);
    CHECK(f != NULL);
    if (!f) return;
    int16_t *pcm = fr_xmalloc(n * sizeof *pcm);
    fr_audio_to_s16(f, n, pcm);
    fr_asr_result with, without;
    const size_t ev = asr_edits("models/vad/silero_vad.onnx", pcm, n, &with);
    const size_t en = asr_edits("", pcm, n, &without);
    CHECK(ev < 900 && en < 900);
    CHECK(ev <= en);
    CHECK_EQ_INT(with.vad, 1);
    CHECK_EQ_INT(with.vad_spans, 2);
    CHECK(with.speech_s < 0.7 * with.audio_s);
    CHECK_EQ_INT(without.vad, 0);
    CHECK(fabs(without.speech_s - without.audio_s) < 1e-9);
    fr_asr_result_free(&with);
    fr_asr_result_free(&without);
    free(pcm);
    free(f);
}

/* A named VAD model that is missing is an error of the decoder's creation, never a crash. */
TEST(asr_with_a_missing_vad_model_fails_cleanly) {
    fr_asr_config cfg = {.vad_model = "tests/fixtures/vad/no-such-model.onnx"};
    fr_err err = {0};
    fr_asr *a = fr_asr_new(&cfg, &err);
    CHECK(a == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
}

/* Whisper behind the VAD (the tiny random-weight fixture: its words mean nothing, its times
 * do): silence decodes no window and gives ""; the fixture with pauses decodes the spans only,
 * every segment time lies inside a span of the recording. */
TEST(whisper_behind_the_vad) {
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load("tests/fixtures/whisper-tiny/ggml-80-f32.bin", &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    CHECK(m != NULL);
    fr_vad *v = vad();
    CHECK(v != NULL);
    if (!m || !v) {
        fr_vad_free(v);
        fr_whisper_free(m);
        return;
    }
    fr_whisper_params p = fr_whisper_default_params();
    p.timestamps = true;
    p.max_new_tokens = 8;
    size_t n = 0;
    float *f = load_wav(FIX "silence.wav", &n);
    fr_whisper_result r;
    int spans = -9;
    CHECK(f && fr_whisper_transcribe_vad(m, v, f, n, &p, &r, &spans, &err) == 0);
    CHECK_EQ_INT(spans, 0);
    if (f) {
        CHECK_STR(r.text, "");
        CHECK_EQ_INT(r.n_windows, 0);
        CHECK(fabs(r.audio_s - 2.0) < 1e-6);
        fr_whisper_result_free(&r);
    }
    free(f);
    f = load_wav(FIX "speech_pauses.wav", &n);
    CHECK(f && fr_whisper_transcribe_vad(m, v, f, n, &p, &r, &spans, &err) == 0);
    CHECK_EQ_INT(spans, 2);
    if (f) {
        CHECK(fabs(r.audio_s - (double)n / 16000) < 1e-6);
        for (int i = 0; i < r.n_segments; i++) /* not inside the 3 s pause's middle */
            CHECK(r.segments[i].start < 4.7 || r.segments[i].start > 7.0);
        fr_whisper_result_free(&r);
    }
    free(f);
    /* the time map: joined time -> recording time */
    const fr_vad_seg s[2] = {{16000, 32000}, {64000, 80000}};
    CHECK(fabs(fr_vad_time_map(s, 2, 0.5) - 1.5) < 1e-9);
    CHECK(fabs(fr_vad_time_map(s, 2, 1.25) - 4.25) < 1e-9);
    fr_vad_free(v);
    fr_whisper_free(m);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--dump")) {
        fr_vad *v = vad();
        size_t n = 0, nw = 0;
        float *pcm = v ? load_wav(argv[2], &n) : NULL, *p = NULL;
        fr_err err = {0};
        if (!pcm || fr_vad_probs(v, pcm, n, &p, &nw, NULL, &err)) {
            fprintf(stderr, "%s\n", err.msg);
            return 1;
        }
        for (size_t k = 0; k < nw; k++) printf("%zu %.6f\n", k, p[k]);
        free(p);
        free(pcm);
        fr_vad_free(v);
        return 0;
    }
    return t_main();
}
