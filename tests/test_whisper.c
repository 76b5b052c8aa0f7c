/* test_whisper.c — Whisper: loaders (model/whisper.h), log-mel features (stages/audio/mel.h),
 * the CPU encoder/decoder (backend/cpu/whisper.h) and the decoding loop
 * (stages/asr/whisper_asr.h).
 *
 * Self-contained cases on a random model written in whisper.cpp's ggml format in memory
 * (tests/whisper_synth.h): the FFT against a direct DFT; the loader's hparams, vocabulary layout
 * and tensor values (F32 and F16); every truncation and a set of corrupted headers refused with
 * their codes; cached decoding equal to a full forward; greedy and beam search obeying the
 * timestamp rules; long-form windows and seeking.
 */
#include "backend/cpu/whisper.h"
#include "base/npy.h"
#include "model/whisper.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/mel.h"
#include "t.h"
#include "whisper_synth.h"

static const synth_cfg SYN = {.n_text = 30, .n_lang = 3, .d = 8, .n_head = 2, .n_enc = 1,
                              .n_dec = 2, .n_mels = 6, .f16 = 0, .seed = 7};

static fr_whisper_model *synth_model(synth_cfg c, uint8_t **bytes, size_t *n) {
    *bytes = synth_ggml(&c, n);
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load_ggml_buffer(*bytes, *n, "synth.bin", &err);
    if (!m) fprintf(stderr, "  synth: %s\n", err.msg);
    return m;
}

TEST(fft_equals_direct_dft) {
    fr_err err = {0};
    fr_mel *mel = fr_mel_new(80, NULL, &err);
    CHECK(mel != NULL);
    if (!mel) return;
    double re[400], im[400], fr[400], fi[400];
    uint32_t s = 99;
    for (int i = 0; i < 400; i++) {
        re[i] = synth_rand(&s);
        im[i] = synth_rand(&s);
    }
    fr_mel_fft400(mel, re, im, fr, fi);
    double worst = 0;
    for (int k = 0; k < 400; k++) {
        double ar = 0, ai = 0;
        for (int n = 0; n < 400; n++) {
            double a = -2 * M_PI * (double)((k * n) % 400) / 400;
            ar += re[n] * cos(a) - im[n] * sin(a);
            ai += re[n] * sin(a) + im[n] * cos(a);
        }
        worst = fmax(worst, fmax(fabs(ar - fr[k]), fabs(ai - fi[k])));
    }
    CHECK(worst < 1e-10);
    fr_mel_free(mel);
}

TEST(mel_tone_silence_and_frames) {
    fr_err err = {0};
    fr_mel *mel = fr_mel_new(80, NULL, &err);
    CHECK(mel != NULL);
    if (!mel) return;
    /* 1 s of 1 kHz: the loudest bin is the filter around 1 kHz, in every frame with audio */
    float *pcm = malloc(16000 * sizeof(float));
    for (int i = 0; i < 16000; i++) pcm[i] = 0.5f * (float)sin(2 * M_PI * 1000.0 * i / 16000);
    float *f = NULL;
    int T = 0;
    CHECK_EQ_INT(fr_mel_compute(mel, pcm, 16000, FR_MEL_N_SAMPLES, &f, &T, &err), 0);
    CHECK_EQ_INT(T, 3000);
    const float *fb = fr_mel_filters(mel);
    int want = 0; /* the filter with the largest weight at bin 25 (1000 Hz) */
    for (int b = 1; b < 80; b++)
        if (fb[b * 201 + 25] > fb[want * 201 + 25]) want = b;
    int best = 0;
    for (int b = 1; b < 80; b++)
        if (f[b * T + 50] > f[best * T + 50]) best = b;
    CHECK(abs(best - want) <= 1);
    /* past the audio (and the window's reach) every value is the floor: max - 8, normalised */
    float mx = -1e9f;
    for (int i = 0; i < 80 * T; i++) mx = f[i] > mx ? f[i] : mx;
    CHECK_NEAR(f[3 * T + 2000], mx - 2.0f, 1e-5);
    free(f);
    /* silence: log10(1e-10) everywhere: (-10 + 4) / 4 */
    memset(pcm, 0, 16000 * sizeof(float));
    CHECK_EQ_INT(fr_mel_compute(mel, pcm, 16000, 16000, &f, &T, &err), 0);
    CHECK_EQ_INT(T, 100);
    int bad = 0;
    for (int i = 0; i < 80 * T; i++) bad += f[i] != -1.5f;
    CHECK_EQ_INT(bad, 0);
    free(f);
    CHECK_EQ_INT(fr_mel_compute(mel, pcm, 100, 200, &f, &T, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    free(pcm);
    fr_mel_free(mel);
}

TEST(ggml_loader_layout_and_values) {
    uint8_t *b;
    size_t n;
    fr_whisper_model *m = synth_model(SYN, &b, &n);
    CHECK(m != NULL);
    if (!m) {
        free(b);
        return;
    }
    CHECK_EQ_INT(m->hp.n_vocab, synth_n_vocab(&SYN));
    CHECK_EQ_INT(m->hp.n_audio_state, 8);
    CHECK_EQ_INT(m->hp.n_audio_ff, 32);
    CHECK_EQ_INT(m->hp.n_text_layer, 2);
    CHECK_EQ_INT(m->vocab.n_text, 30);
    CHECK_EQ_INT(m->vocab.eot, 30);
    CHECK_EQ_INT(m->vocab.sot, 31);
    CHECK_EQ_INT(m->vocab.lang_begin, 32);
    CHECK_EQ_INT(m->vocab.n_lang, 3);
    CHECK_EQ_INT(m->vocab.transcribe, 36);
    CHECK_EQ_INT(m->vocab.no_timestamps, 40);
    CHECK_EQ_INT(m->vocab.ts_begin, 41);
    CHECK(m->vocab.multilingual);
    CHECK_EQ_INT(m->vocab.n_begin_suppress, 2);
    CHECK_EQ_INT(m->vocab.begin_suppress[0], 0); /* the " " word */
    size_t len;
    const char *t = fr_whisper_token_bytes(m, 3, &len);
    CHECK(t && len == 1 && t[0] == 'c');
    CHECK(fr_whisper_token_bytes(m, 30, &len) == NULL);
    CHECK(m->proj == m->tok_emb);
    /* the first value of decoder.ln.bias is the file's last 32 bytes' first float */
    float last[8];
    memcpy(last, b + n - 32, 32);
    CHECK(memcmp(m->dec_ln_b, last, 32) == 0);
    CHECK(m->mel_filters != NULL);
    /* F16: the same tensors rounded */
    synth_cfg c16 = SYN;
    c16.f16 = 1;
    uint8_t *b16;
    size_t n16;
    fr_whisper_model *h = synth_model(c16, &b16, &n16);
    CHECK(h != NULL);
    if (h) {
        double worst = 0;
        for (int i = 0; i < 8 * 8; i++)
            worst = fmax(worst, fabs(h->dec[1].fc2_w[i] - m->dec[1].fc2_w[i]));
        CHECK(worst > 0 && worst < 1e-3);
        CHECK(memcmp(h->enc_pos, m->enc_pos, 1500 * 8 * 4) == 0); /* positions stay F32 */
        fr_whisper_free(h);
    }
    free(b16);
    fr_whisper_free(m);
    free(b);
}

TEST(ggml_hostile_files_fail_with_codes) {
    synth_cfg c = SYN;
    size_t n;
    uint8_t *b = synth_ggml(&c, &n);
    fr_err err;
    int crashes = 0, wrong = 0;
    /* every truncation point in the header region, then every 997th byte */
    for (size_t cut = 0; cut < n; cut += cut < 6000 ? 1 : 997) {
        memset(&err, 0, sizeof err);
        fr_whisper_model *m = fr_whisper_load_ggml_buffer(b, cut, "cut.bin", &err);
        if (m) {
            crashes++;
            fr_whisper_free(m);
        } else if (err.code != FR_ERR_BAD_REQUEST) {
            wrong++;
        }
    }
    CHECK_EQ_INT(crashes, 0);
    CHECK_EQ_INT(wrong, 0);
    struct {
        size_t off;
        int32_t v;
        fr_err_code code;
    } edits[] = {
        {0, 0x12345678, FR_ERR_BAD_REQUEST},  /* magic */
        {4, 0, FR_ERR_BAD_REQUEST},           /* n_vocab */
        {4, 2000000000, FR_ERR_BAD_REQUEST},  /* n_vocab over the cap */
        {8, 1499, FR_ERR_BAD_REQUEST},        /* n_audio_ctx */
        {8, 0x7fffffff, FR_ERR_BAD_REQUEST},  /* n_audio_ctx that overflowed a doubling (fuzzer) */
        {16, 3, FR_ERR_BAD_REQUEST},          /* heads do not divide d_model */
        {44, 2, FR_ERR_UNSUPPORTED},          /* ftype q4_0 */
        {48, 5, FR_ERR_BAD_REQUEST},          /* filter rows != n_mels */
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        uint8_t *x = malloc(n);
        memcpy(x, b, n);
        memcpy(x + edits[i].off, &edits[i].v, 4);
        memset(&err, 0, sizeof err);
        fr_whisper_model *m = fr_whisper_load_ggml_buffer(x, n, "edit.bin", &err);
        CHECK(m == NULL);
        if (!m && err.code != edits[i].code)
            fprintf(stderr, "  edit %zu: code %d (%s)\n", i, err.code, err.msg);
        CHECK(m || err.code == edits[i].code);
        fr_whisper_free(m);
        free(x);
    }
    /* a vocabulary size that disagrees with the layout (fewer than 1501 timestamps) */
    {
        uint8_t *x = malloc(n);
        memcpy(x, b, n);
        int32_t nv = synth_n_vocab(&c) - 2000;
        memcpy(x + 4, &nv, 4);
        memset(&err, 0, sizeof err);
        CHECK(fr_whisper_load_ggml_buffer(x, n, "vocab.bin", &err) == NULL);
        CHECK(err.code == FR_ERR_BAD_REQUEST || err.code == FR_ERR_UNSUPPORTED);
        free(x);
    }
    /* a tensor renamed: unknown, and the one it replaced missing */
    {
        uint8_t *x = malloc(n);
        memcpy(x, b, n);
        uint8_t *p = memmem(x, n, "decoder.ln.weight", 17);
        CHECK(p != NULL);
        if (p) p[8] = 'X';
        memset(&err, 0, sizeof err);
        CHECK(fr_whisper_load_ggml_buffer(x, n, "rename.bin", &err) == NULL);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK(strstr(err.msg, "rename.bin") != NULL);
        free(x);
    }
    /* a control byte in a tensor name is refused by name, and the message stays one line */
    {
        uint8_t *x = malloc(n);
        memcpy(x, b, n);
        uint8_t *p = memmem(x, n, "decoder.ln.weight", 17);
        CHECK(p != NULL);
        if (p) p[8] = '\n';
        memset(&err, 0, sizeof err);
        CHECK(fr_whisper_load_ggml_buffer(x, n, "ctl.bin", &err) == NULL);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK(strstr(err.msg, "control byte") != NULL);
        CHECK(strchr(err.msg, '\n') == NULL);
        free(x);
    }
    /* trailing garbage is a truncated tensor header */
    {
        uint8_t *x = malloc(n + 6);
        memcpy(x, b, n);
        memset(x + n, 0x41, 6);
        memset(&err, 0, sizeof err);
        CHECK(fr_whisper_load_ggml_buffer(x, n + 6, "tail.bin", &err) == NULL);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        free(x);
    }
    memset(&err, 0, sizeof err);
    CHECK(fr_whisper_load("tests/fixtures/no-such-whisper.bin", &err) == NULL);
    CHECK_EQ_INT(err.code, FR_ERR_NOT_FOUND);
    free(b);
}

/* a deterministic "audio": a few tones and noise */
static float *test_audio(size_t n, uint32_t seed) {
    float *x = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        x[i] = 0.3f * (float)sin(2 * M_PI * 300.0 * (double)i / 16000) +
               0.2f * (float)sin(2 * M_PI * (800.0 + (double)(i % 48000) / 100.0) * (double)i / 16000) +
               0.05f * synth_rand(&seed);
    return x;
}

TEST(cached_decoding_equals_full_forward) {
    uint8_t *b;
    size_t n;
    fr_whisper_model *m = synth_model(SYN, &b, &n);
    CHECK(m != NULL);
    if (!m) {
        free(b);
        return;
    }
    float *pcm = test_audio(16000 * 3, 5), *feat;
    int F;
    fr_err err = {0};
    CHECK_EQ_INT(fr_whisper_features(m, pcm, 16000 * 3, true, &feat, &F, &err), 0);
    CHECK_EQ_INT(F, 3000);
    float *enc = malloc(1500 * 8 * sizeof(float));
    fr_whisper_encode(m, feat, enc);
    fr_whisper_cross *c = fr_whisper_cross_new(m, enc);
    int V = m->hp.n_vocab;
    int toks[7] = {m->vocab.sot, m->vocab.lang_begin, m->vocab.transcribe, 5, 9, 2, 17};
    float *all = malloc(7 * (size_t)V * sizeof(float)), *one = malloc((size_t)V * sizeof(float));
    fr_whisper_kv *kv = fr_whisper_kv_new(m);
    CHECK_EQ_INT(fr_whisper_decode(m, c, kv, toks, 7, all, true, &err), 0);
    fr_whisper_kv *kv2 = fr_whisper_kv_new(m);
    double worst = 0;
    for (int i = 0; i < 7; i++) {
        CHECK_EQ_INT(fr_whisper_decode(m, c, kv2, &toks[i], 1, one, false, &err), 0);
        worst = fmax(worst, t_rel_l2(one, all + (size_t)i * V, V));
    }
    CHECK(worst < 1e-5);
    /* a copied cache continues the same way */
    fr_whisper_kv *kv3 = fr_whisper_kv_new(m);
    fr_whisper_kv_copy(m, kv3, kv);
    int nx = 3;
    float *l1 = malloc((size_t)V * sizeof(float)), *l2 = malloc((size_t)V * sizeof(float));
    CHECK_EQ_INT(fr_whisper_decode(m, c, kv, &nx, 1, l1, false, &err), 0);
    CHECK_EQ_INT(fr_whisper_decode(m, c, kv3, &nx, 1, l2, false, &err), 0);
    CHECK(memcmp(l1, l2, (size_t)V * sizeof(float)) == 0);
    int bad = V;
    CHECK_EQ_INT(fr_whisper_decode(m, c, kv, &bad, 1, l1, false, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    free(l1);
    free(l2);
    fr_whisper_kv_free(kv);
    fr_whisper_kv_free(kv2);
    fr_whisper_kv_free(kv3);
    free(all);
    free(one);
    fr_whisper_cross_free(c);
    free(enc);
    free(feat);
    free(pcm);
    fr_whisper_free(m);
    free(b);
}

/* Whisper's timestamp rules on generated ids */
static int timestamp_rule_violations(const fr_whisper_model *m, const int *t, int n) {
    int tb = m->vocab.ts_begin, bad = 0, last = -1;
    if (n > 0 && (t[0] < tb || t[0] - tb > m->vocab.max_initial_ts)) bad++;
    for (int i = 0; i < n; i++) {
        if (t[i] == m->vocab.no_timestamps) bad++;
        if (t[i] >= tb) {
            if (last >= 0 && t[i] < last) bad++;
            last = t[i];
        }
        /* three timestamps in a row never happen */
        if (i >= 2 && t[i] >= tb && t[i - 1] >= tb && t[i - 2] >= tb) bad++;
    }
    return bad;
}

TEST(greedy_and_beam_obey_the_rules) {
    uint8_t *b;
    size_t n;
    fr_whisper_model *m = synth_model(SYN, &b, &n);
    CHECK(m != NULL);
    if (!m) {
        free(b);
        return;
    }
    float *pcm = test_audio(16000 * 5, 11), *feat;
    int F;
    fr_err err = {0};
    CHECK_EQ_INT(fr_whisper_features(m, pcm, 16000 * 5, true, &feat, &F, &err), 0);
    float *enc = malloc(1500 * 8 * sizeof(float));
    fr_whisper_encode(m, feat, enc);
    fr_whisper_cross *c = fr_whisper_cross_new(m, enc);
    int lang = fr_whisper_detect_language(m, c, &err);
    CHECK(lang >= 0 && lang < 3);
    int prompt[4];
    for (int beams = 1; beams <= 3; beams += 2) {
        fr_whisper_params p = fr_whisper_default_params();
        p.timestamps = true;
        p.num_beams = beams;
        p.max_new_tokens = 24;
        int np = fr_whisper_prompt(m, lang, p.task, true, prompt);
        CHECK_EQ_INT(np, 3);
        int *out, no;
        CHECK_EQ_INT(fr_whisper_generate(m, c, prompt, np, &p, &out, &no, &err), 0);
        CHECK(no >= 1 && no <= 24);
        CHECK_EQ_INT(timestamp_rule_violations(m, out, no), 0);
        int sup = 0;
        for (int i = 0; i < no; i++)
            for (int k = 0; k < m->vocab.n_suppress; k++) sup += out[i] == m->vocab.suppress[k];
        CHECK_EQ_INT(sup, 0);
        free(out);
    }
    /* without timestamps (HF masks no timestamp then): not a space or <|endoftext|> first */
    fr_whisper_params p = fr_whisper_default_params();
    p.max_new_tokens = 20;
    int np = fr_whisper_prompt(m, lang, p.task, false, prompt);
    CHECK_EQ_INT(prompt[np - 1], m->vocab.no_timestamps);
    int *out, no;
    CHECK_EQ_INT(fr_whisper_generate(m, c, prompt, np, &p, &out, &no, &err), 0);
    CHECK(no >= 1);
    CHECK(out[0] != 0 && out[0] != m->vocab.eot);
    free(out);
    fr_whisper_cross_free(c);
    free(enc);
    free(feat);
    free(pcm);
    fr_whisper_free(m);
    free(b);
}

TEST(long_form_windows_and_seek) {
    uint8_t *b;
    size_t n;
    fr_whisper_model *m = synth_model(SYN, &b, &n);
    CHECK(m != NULL);
    if (!m) {
        free(b);
        return;
    }
    size_t ns = 16000 * 45;
    float *pcm = test_audio(ns, 3);
    fr_whisper_params p = fr_whisper_default_params();
    p.max_new_tokens = 12;
    p.language = 1;
    fr_whisper_result r;
    fr_err err = {0};
    CHECK_EQ_INT(fr_whisper_transcribe(m, pcm, ns, &p, &r, &err), 0);
    CHECK(r.n_windows >= 2);
    CHECK_EQ_INT(r.language, 1);
    CHECK_EQ_INT(r.n_prompt, 3); /* sot, language, transcribe: timestamps are forced on */
    CHECK(r.n_segments >= r.n_windows);
    int order = 0;
    for (int i = 0; i < r.n_segments; i++) {
        order += r.segments[i].end < r.segments[i].start - 1e-9;
        order += i > 0 && r.segments[i].start < r.segments[i - 1].start - 30.0;
        order += r.segments[i].end > 45.0 + 30.0;
    }
    CHECK_EQ_INT(order, 0);
    CHECK(r.text != NULL);
    fr_whisper_result_free(&r);
    /* a language the model lacks */
    p.language = 5;
    CHECK_EQ_INT(fr_whisper_transcribe(m, pcm, 16000, &p, &r, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    free(pcm);
    fr_whisper_free(m);
    free(b);
}

int main(void) { return t_main(); }
