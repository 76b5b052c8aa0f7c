/* test_whisper_hf.c — Whisper against HF transformers (tests/fixtures/whisper-tiny and
 * tests/fixtures/ref/whisper, made by scripts/make_whisper_fixtures.py on a GPU host: two tiny
 * random WhisperForConditionalGeneration, 80 mels in F32 and 128 mels in F16, each also as a
 * whisper.cpp ggml file).
 *
 * The audio is read from the WAV files with the project's decoder (libsndfile) and the long
 * inputs are rebuilt from their recipes. Checked: the mel filter banks; the log-mel features of
 * every case (the extractor's default 30 s padding, and the whole recording for long-form) within
 * 1e-5 relative L2 with the constant tail where HF has one; the HF and ggml loads of each model
 * hold the same weights; encoder outputs and decoder logits within 1e-4 relative L2; every
 * generate case (greedy and 3-beam search, forced and detected language, translate, timestamps,
 * long-form segments) gives HF's prompt and HF's tokens. A missing fixture file fails.
 */
#include <cjson/cJSON.h>

#include "backend/cpu/whisper.h"
#include "base/npy.h"
#include "model/whisper.h"
#include "stages/asr/whisper_asr.h"
#include "stages/audio/audio.h"
#include "stages/audio/mel.h"
#include "t.h"

static cJSON *ref;

static char *fx(const char *rel) {
    char *p = malloc(strlen(t_fixtures()) + strlen(rel) + 2);
    sprintf(p, "%s/%s", t_fixtures(), rel);
    return p;
}

static cJSON *load_ref(void) {
    if (ref) return ref;
    char *p = fx("ref/whisper/ref.json");
    size_t len;
    fr_err err = {0};
    char *txt = fr_read_file(p, 16u << 20, &len, &err);
    if (!txt) fprintf(stderr, "  %s\n", err.msg);
    ref = txt ? cJSON_ParseWithLength(txt, len) : NULL;
    free(txt);
    free(p);
    return ref;
}

static int load_npy(const char *file, fr_npy *a) {
    char rel[256];
    snprintf(rel, sizeof rel, "ref/whisper/%s", file);
    char *p = fx(rel);
    fr_err err = {0};
    int rc = fr_npy_load_f32(p, a, &err);
    if (rc) fprintf(stderr, "  %s\n", err.msg);
    free(p);
    return rc;
}

static float *read_wav(const char *rel, size_t *n) {
    char *p = fx(rel);
    size_t len;
    fr_err err = {0};
    char *b = fr_read_file(p, 64u << 20, &len, &err);
    free(p);
    fr_audio a = {0};
    if (!b || fr_audio_decode(b, len, NULL, 16000, &a, &err)) {
        fprintf(stderr, "  %s: %s\n", rel, err.msg);
        free(b);
        return NULL;
    }
    free(b);
    *n = a.n;
    float *x = a.pcm;
    a.pcm = NULL;
    fr_audio_free(&a);
    return x;
}

/* the samples of an audio entry: a WAV file or a recipe over the files */
static float *audio_of(const char *name, size_t *n) {
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetObjectItem(load_ref(), "audio"), name);
    if (!e) return NULL;
    const cJSON *file = cJSON_GetObjectItem(e, "file");
    if (file) return read_wav(file->valuestring, n);
    const cJSON *rec = cJSON_GetObjectItem(e, "recipe");
    size_t total = (size_t)cJSON_GetObjectItem(e, "n_samples")->valuedouble, o = 0;
    float *x = calloc(total, sizeof(float));
    const cJSON *s;
    cJSON_ArrayForEach(s, rec) {
        const cJSON *src = cJSON_GetObjectItem(s, "src");
        size_t from = (size_t)cJSON_GetObjectItem(s, "from")->valuedouble;
        size_t k = (size_t)cJSON_GetObjectItem(s, "n")->valuedouble;
        if (o + k > total) break;
        if (cJSON_IsString(src)) {
            size_t ns = 0;
            float *y = audio_of(src->valuestring, &ns);
            if (!y || from + k > ns) {
                free(y);
                free(x);
                return NULL;
            }
            memcpy(x + o, y + from, k * sizeof(float));
            free(y);
        }
        o += k;
    }
    *n = total;
    return o == total ? x : (free(x), NULL);
}

static const cJSON *feature_case(const char *name) {
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItem(load_ref(), "features"))
        if (!strcmp(cJSON_GetObjectItem(f, "name")->valuestring, name)) return f;
    return NULL;
}

static int jint(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItem(o, k);
    return cJSON_IsNumber(v) ? (int)v->valuedouble : -1;
}

static int *jints(const cJSON *a, int *n) {
    *n = cJSON_GetArraySize(a);
    int *v = malloc((size_t)(*n + 1) * sizeof(int));
    for (int i = 0; i < *n; i++) v[i] = (int)cJSON_GetArrayItem(a, i)->valuedouble;
    return v;
}

TEST(fixtures_present) {
    CHECK(load_ref() != NULL);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(load_ref(), "features")) >= 9);
}

TEST(mel_filter_banks) {
    for (int k = 0; k < 2; k++) {
        int nm = k ? 128 : 80;
        char f[64];
        snprintf(f, sizeof f, "mel_filters-%d.npy", nm);
        fr_npy a;
        CHECK_EQ_INT(load_npy(f, &a), 0);
        if (a.n != (int64_t)nm * 201) {
            CHECK(0);
            continue;
        }
        float *mine = malloc((size_t)nm * 201 * sizeof(float));
        fr_mel_filter_bank(nm, mine);
        double r = t_rel_l2(mine, a.data, a.n);
        if (!(r < 1e-6)) fprintf(stderr, "  %d mels: rel L2 %.3g\n", nm, r);
        CHECK(r < 1e-6);
        free(mine);
        fr_npy_free(&a);
    }
}

/* our features of a features case: (n_mels, *T) */
static float *features_of(const cJSON *fc, int *T) {
    size_t n = 0;
    float *x = audio_of(cJSON_GetObjectItem(fc, "audio")->valuestring, &n);
    if (!x) return NULL;
    fr_err err = {0};
    fr_mel *mel = fr_mel_new(jint(fc, "n_mels"), NULL, &err);
    bool longest = !strcmp(cJSON_GetObjectItem(fc, "mode")->valuestring, "longest");
    float *f = NULL;
    if (fr_mel_compute(mel, x, n, longest ? n : FR_MEL_N_SAMPLES, &f, T, &err))
        fprintf(stderr, "  %s\n", err.msg);
    fr_mel_free(mel);
    free(x);
    return f;
}

TEST(features_equal_hf) {
    const cJSON *fc;
    int n_cases = 0;
    cJSON_ArrayForEach(fc, cJSON_GetObjectItem(load_ref(), "features")) {
        const char *name = cJSON_GetObjectItem(fc, "name")->valuestring;
        int T = 0, M = jint(fc, "n_mels");
        float *f = features_of(fc, &T);
        CHECK(f != NULL);
        if (!f) continue;
        CHECK_EQ_INT(T, jint(fc, "n_frames"));
        fr_npy a;
        CHECK_EQ_INT(load_npy(cJSON_GetObjectItem(fc, "file")->valuestring, &a), 0);
        int start = jint(fc, "start"), stop = jint(fc, "stop"), step = jint(fc, "step");
        int k = (stop - start + step - 1) / step;
        if (a.n_dims == 2 && a.shape[0] == M && a.shape[1] == k && stop <= T) {
            float *sub = malloc((size_t)M * k * sizeof(float));
            for (int i = 0; i < M; i++)
                for (int j = 0; j < k; j++) sub[(size_t)i * k + j] = f[(size_t)i * T + start + j * step];
            double r = t_rel_l2(sub, a.data, a.n), worst = 0;
            for (int64_t i = 0; i < a.n; i++) worst = fmax(worst, fabs(sub[i] - a.data[i]));
            if (!(r < 1e-5 && worst < 1e-3) || getenv("FRUGAL_TEST_VERBOSE"))
                fprintf(stderr, "  %s: rel L2 %.3g, max abs %.3g\n", name, r, worst);
            CHECK(r < 1e-5 && worst < 1e-3);
            free(sub);
        } else {
            fprintf(stderr, "  %s: reference shape\n", name);
            CHECK(0);
        }
        const cJSON *tf = cJSON_GetObjectItem(fc, "tail_from");
        if (cJSON_IsNumber(tf)) {
            float tv = (float)cJSON_GetObjectItem(fc, "tail_value")->valuedouble;
            double worst = 0;
            for (int i = 0; i < M; i++)
                for (int t = (int)tf->valuedouble; t < T; t++)
                    worst = fmax(worst, fabs(f[(size_t)i * T + t] - tv));
            CHECK(worst < 1e-4);
        }
        fr_npy_free(&a);
        free(f);
        n_cases++;
    }
    CHECK(n_cases >= 9);
}

static fr_whisper_model *load_model(const char *rel) {
    char *p = fx(rel);
    fr_err err = {0};
    fr_whisper_model *m = fr_whisper_load(p, &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    free(p);
    return m;
}

TEST(hf_and_ggml_loads_agree) {
    const cJSON *mo;
    cJSON_ArrayForEach(mo, cJSON_GetObjectItem(load_ref(), "models")) {
        fr_whisper_model *h = load_model(cJSON_GetObjectItem(mo, "dir")->valuestring);
        fr_whisper_model *g = load_model(cJSON_GetObjectItem(mo, "ggml")->valuestring);
        CHECK(h && g);
        if (h && g) {
            CHECK_EQ_INT(h->hp.n_vocab, g->hp.n_vocab);
            CHECK_EQ_INT(h->hp.n_mels, jint(mo, "n_mels"));
            CHECK_EQ_INT(h->vocab.ts_begin, g->vocab.ts_begin);
            CHECK_EQ_INT(h->vocab.sot, jint(cJSON_GetObjectItem(load_ref(), "vocab"), "sot"));
            CHECK(h->arena_floats == g->arena_floats &&
                  memcmp(h->arena, g->arena, h->arena_floats * sizeof(float)) == 0);
            /* the ggml file carries HF's filter bank */
            float *fb = malloc((size_t)h->hp.n_mels * 201 * sizeof(float));
            fr_mel_filter_bank(h->hp.n_mels, fb);
            CHECK(t_rel_l2(g->mel_filters, fb, (int64_t)h->hp.n_mels * 201) < 1e-6);
            free(fb);
        }
        fr_whisper_free(h);
        fr_whisper_free(g);
    }
    /* the tokenizer text */
    fr_whisper_model *m = load_model("whisper-tiny/hf-80");
    const cJSON *st = cJSON_GetObjectItem(cJSON_GetObjectItem(load_ref(), "vocab"), "sample_text");
    if (m && st) {
        int n;
        int *ids = jints(cJSON_GetObjectItem(st, "ids"), &n);
        fr_buf b = {0};
        for (int i = 0; i < n; i++) {
            size_t len;
            const char *s = fr_whisper_token_bytes(m, ids[i], &len);
            if (s) fr_buf_append(&b, s, len);
        }
        CHECK_STR(fr_buf_cstr(&b), cJSON_GetObjectItem(st, "text")->valuestring);
        fr_buf_free(&b);
        free(ids);
    }
    CHECK(m != NULL);
    fr_whisper_free(m);
}

static float *encode_case(const fr_whisper_model *m, const char *fname) {
    int T = 0;
    float *f = features_of(feature_case(fname), &T);
    if (!f) return NULL;
    float *enc = malloc((size_t)m->hp.n_audio_ctx * m->hp.n_audio_state * sizeof(float));
    fr_whisper_encode(m, f, enc);
    free(f);
    return enc;
}

TEST(encoder_and_logits_equal_hf) {
    const cJSON *mo;
    cJSON_ArrayForEach(mo, cJSON_GetObjectItem(load_ref(), "models")) {
        for (int which = 0; which < 2; which++) {
            fr_whisper_model *m = load_model(
                cJSON_GetObjectItem(mo, which ? "ggml" : "dir")->valuestring);
            CHECK(m != NULL);
            if (!m) continue;
            int d = m->hp.n_audio_state;
            const cJSON *e;
            cJSON_ArrayForEach(e, cJSON_GetObjectItem(mo, "encoder")) {
                float *enc = encode_case(m, cJSON_GetObjectItem(e, "features")->valuestring);
                fr_npy a;
                CHECK(enc != NULL);
                CHECK_EQ_INT(load_npy(cJSON_GetObjectItem(e, "file")->valuestring, &a), 0);
                int step = jint(e, "step"), k = (1500 + step - 1) / step;
                if (enc && a.n == (int64_t)k * d) {
                    float *sub = malloc((size_t)k * d * sizeof(float));
                    for (int i = 0; i < k; i++)
                        memcpy(sub + (size_t)i * d, enc + (size_t)i * step * d, (size_t)d * sizeof(float));
                    double r = t_rel_l2(sub, a.data, a.n);
                    if (!(r < 1e-4) || getenv("FRUGAL_TEST_VERBOSE"))
                        fprintf(stderr, "  %s encoder: rel L2 %.3g\n", m->path, r);
                    CHECK(r < 1e-4);
                    free(sub);
                } else {
                    CHECK(0);
                }
                fr_npy_free(&a);
                free(enc);
            }
            const cJSON *lc;
            cJSON_ArrayForEach(lc, cJSON_GetObjectItem(mo, "logits")) {
                float *enc = encode_case(m, cJSON_GetObjectItem(lc, "features")->valuestring);
                CHECK(enc != NULL);
                if (!enc) continue;
                fr_whisper_cross *c = fr_whisper_cross_new(m, enc);
                int n;
                int *prompt = jints(cJSON_GetObjectItem(lc, "prompt"), &n);
                float *lg = malloc((size_t)n * m->hp.n_vocab * sizeof(float));
                fr_whisper_kv *kv = fr_whisper_kv_new(m);
                fr_err err = {0};
                CHECK_EQ_INT(fr_whisper_decode(m, c, kv, prompt, n, lg, true, &err), 0);
                fr_npy a;
                CHECK_EQ_INT(load_npy(cJSON_GetObjectItem(lc, "file")->valuestring, &a), 0);
                CHECK(a.n == (int64_t)n * m->hp.n_vocab);
                if (a.n == (int64_t)n * m->hp.n_vocab) {
                    double r = t_rel_l2(lg, a.data, a.n);
                    if (!(r < 1e-4) || getenv("FRUGAL_TEST_VERBOSE"))
                        fprintf(stderr, "  %s logits: rel L2 %.3g\n", m->path, r);
                    CHECK(r < 1e-4);
                }
                fr_npy_free(&a);
                fr_whisper_kv_free(kv);
                free(lg);
                free(prompt);
                fr_whisper_cross_free(c);
                free(enc);
            }
            fr_whisper_free(m);
        }
    }
}

static void strip_eot(const fr_whisper_model *m, const int *t, int *n) {
    while (*n > 0 && t[*n - 1] == m->vocab.eot) (*n)--;
}

static bool same_ids(const int *a, int na, const int *b, int nb) {
    return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int)) == 0);
}

static void print_ids(const char *what, const int *t, int n) {
    fprintf(stderr, "    %s:", what);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", t[i]);
    fprintf(stderr, "\n");
}

TEST(generate_equals_hf) {
    const cJSON *mo;
    int n_cases = 0;
    cJSON_ArrayForEach(mo, cJSON_GetObjectItem(load_ref(), "models")) {
        fr_whisper_model *m = load_model(cJSON_GetObjectItem(mo, "dir")->valuestring);
        CHECK(m != NULL);
        if (!m) continue;
        int max_new = jint(load_ref(), "max_new_tokens");
        const cJSON *g;
        cJSON_ArrayForEach(g, cJSON_GetObjectItem(mo, "generate")) {
            const char *name = cJSON_GetObjectItem(g, "name")->valuestring;
            const cJSON *kw = cJSON_GetObjectItem(g, "kwargs");
            fr_whisper_params p = fr_whisper_default_params();
            const cJSON *lang = cJSON_GetObjectItem(kw, "language");
            if (cJSON_IsString(lang)) p.language = fr_whisper_lang_index(lang->valuestring);
            const cJSON *task = cJSON_GetObjectItem(kw, "task");
            if (cJSON_IsString(task) && !strcmp(task->valuestring, "translate"))
                p.task = FR_WHISPER_TASK_TRANSLATE;
            p.timestamps = cJSON_IsTrue(cJSON_GetObjectItem(kw, "return_timestamps"));
            if (cJSON_IsNumber(cJSON_GetObjectItem(kw, "num_beams"))) p.num_beams = jint(kw, "num_beams");
            p.max_new_tokens = max_new;
            size_t ns = 0;
            float *x = audio_of(cJSON_GetObjectItem(g, "audio")->valuestring, &ns);
            CHECK(x != NULL);
            if (!x) continue;
            fr_whisper_result r;
            fr_err err = {0};
            int rc = fr_whisper_transcribe(m, x, ns, &p, &r, &err);
            CHECK_EQ_INT(rc, 0);
            free(x);
            if (rc) continue;
            int ni, nt;
            int *init = jints(cJSON_GetObjectItem(g, "init_tokens"), &ni);
            int *toks = jints(cJSON_GetObjectItem(g, "tokens"), &nt);
            const cJSON *det = cJSON_GetObjectItem(g, "detected_language");
            if (cJSON_IsNumber(det)) CHECK_EQ_INT(r.language + m->vocab.lang_begin, jint(g, "detected_language"));
            bool ok_prompt = same_ids(r.prompt, r.n_prompt, init, ni);
            const cJSON *segs = cJSON_GetObjectItem(g, "segments");
            bool ok_tokens;
            if (cJSON_IsArray(segs)) { /* long-form: HF's segments, one by one */
                ok_tokens = cJSON_GetArraySize(segs) == r.n_segments;
                int k = 0;
                const cJSON *s;
                cJSON_ArrayForEach(s, segs) {
                    int nst;
                    int *st = jints(cJSON_GetObjectItem(s, "tokens"), &nst);
                    if (k < r.n_segments) {
                        fr_whisper_segment *mine = &r.segments[k];
                        int nm = mine->n_tokens;
                        strip_eot(m, st, &nst);
                        strip_eot(m, mine->tokens, &nm);
                        ok_tokens = ok_tokens && same_ids(mine->tokens, nm, st, nst) &&
                                    fabs(mine->start - cJSON_GetObjectItem(s, "start")->valuedouble) < 1e-4 &&
                                    fabs(mine->end - cJSON_GetObjectItem(s, "end")->valuedouble) < 1e-4;
                        if (!ok_tokens) {
                            print_ids("hf segment", st, nst);
                            print_ids("our segment", mine->tokens, nm);
                        }
                    }
                    free(st);
                    k++;
                }
            } else {
                strip_eot(m, toks, &nt);
                ok_tokens = same_ids(r.tokens, r.n_tokens, toks, nt);
            }
            if (!ok_prompt || !ok_tokens) {
                fprintf(stderr, "  %s: differs from HF\n", name);
                print_ids("hf prompt", init, ni);
                print_ids("our prompt", r.prompt, r.n_prompt);
                print_ids("hf tokens", toks, nt);
                print_ids("our tokens", r.tokens, r.n_tokens);
            }
            CHECK(ok_prompt);
            CHECK(ok_tokens);
            free(init);
            free(toks);
            fr_whisper_result_free(&r);
            n_cases++;
        }
        fr_whisper_free(m);
    }
    CHECK(n_cases >= 11);
}

int main(void) {
    int rc = t_main();
    cJSON_Delete(ref);
    return rc;
}
