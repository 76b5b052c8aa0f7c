/* test_asr.c — speech text normalisation, WER, the Kneser-Ney ARPA writer (header counts,
 * per-context probability sums with back-off, pocketsphinx loads it) and recognition of a
 * sentence synthesised here with espeak-ng through the shipped domain LM and the decoder pool. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "stages/asr/asr.h"
#include "stages/asr/lm.h"
#include "stages/asr/ps_wrap.h"
#include "t.h"

static void norm_is(const char *in, const char *want) {
    fr_buf b = {0};
    fr_asr_normalize(in, &b);
    CHECK_STR(b.data, want);
    fr_buf_free(&b);
}

TEST(normalize) {
    norm_is("I can't find my 2nd card!", "i can't find my second card");
    norm_is("Why was I charged $1,250.50 extra?", "why was i charged one thousand two hundred fifty dollars fifty cents extra");
    norm_is("  It took 21 days & 3%  ", "it took twenty one days and three percent");
    norm_is("card 0123", "card zero one two three");
    norm_is("", "");
}

TEST(wer) {
    size_t n = 0;
    CHECK_EQ_INT(fr_wer_edits("a b c d", "a x c", &n), 2);
    CHECK_EQ_INT(n, 4);
    CHECK_EQ_INT(fr_wer_edits("a b", "a b", &n), 0);
    CHECK_EQ_INT(fr_wer_edits("", "a", &n), 1);
}

/* tiny ARPA reader: n-gram text → (log10 p, log10 bow) */
typedef struct ent { char key[96]; double p, bow; int order; } ent;
static ent E[4096];
static int NE;
static const ent *find(const char *k) {
    for (int i = 0; i < NE; i++) if (!strcmp(E[i].key, k)) return &E[i];
    return NULL;
}
static double pbig(const char *v, const char *w) {
    char k[96];
    snprintf(k, sizeof k, "%s %s", v, w);
    const ent *e = find(k);
    if (e) return pow(10, e->p);
    const ent *ev = find(v), *ew = find(w);
    return pow(10, (ev ? ev->bow : 0) + ew->p);
}
static double ptri(const char *u, const char *v, const char *w) {
    char k[96];
    snprintf(k, sizeof k, "%s %s %s", u, v, w);
    const ent *e = find(k);
    if (e) return pow(10, e->p);
    snprintf(k, sizeof k, "%s %s", u, v);
    const ent *c = find(k);
    return pow(10, c ? c->bow : 0) * pbig(v, w);
}

TEST(arpa_writer) {
    const char *corpus[] = {"my card has not arrived", "my card was declined",
                            "why was my card declined", "i lost my card",
                            "where is my new card", "my card zzqxv arrived", "card declined again"};
    fr_lm_builder *b = fr_lm_builder_new(NULL);
    for (size_t i = 0; i < FR_ARRAY_LEN(corpus); i++) fr_lm_add_text(b, corpus[i]);
    char path[] = "/tmp/frugal-test-lm-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fr_lm_stats st;
    fr_err err = {0};
    CHECK_EQ_INT(fr_lm_write_arpa(b, 3, 1, f, &st, &err), 0);
    fclose(f);
    fr_lm_builder_free(b);
    CHECK_EQ_INT(st.sentences, 7);
    /* parse back: header counts equal the sections' line counts */
    FILE *r = fopen(path, "r");
    char line[256];
    int hdr[4] = {0}, cnt[4] = {0}, sec = 0;
    NE = 0;
    while (r && fgets(line, sizeof line, r)) {
        int o, c;
        if (sscanf(line, "ngram %d=%d", &o, &c) == 2 && o >= 1 && o <= 3) hdr[o] = c;
        else if (sscanf(line, "\\%d-grams:", &o) == 1) sec = o;
        else if (sec && line[0] != '\n' && line[0] != '\\') {
            cnt[sec]++;
            char *tok[5];
            int nt = 0;
            for (char *t = strtok(line, "\t\n"); t && nt < 5; t = strtok(NULL, "\t\n")) tok[nt++] = t;
            CHECK(nt >= 2);
            if (NE < 4096 && nt >= 2) {
                E[NE].p = atof(tok[0]);
                snprintf(E[NE].key, sizeof E[NE].key, "%s", tok[1]);
                E[NE].bow = nt >= 3 ? atof(tok[2]) : 0;
                E[NE].order = sec;
                NE++;
            }
        }
    }
    if (r) fclose(r);
    for (int o = 1; o <= 3; o++) CHECK_EQ_INT(hdr[o], cnt[o]);
    CHECK(find("<unk>") == NULL); /* out-of-vocabulary mass is not written */
    /* every context's distribution over the vocabulary sums to one */
    const char *vocab[64];
    int nv = 0;
    for (int i = 0; i < NE; i++)
        if (E[i].order == 1 && strcmp(E[i].key, "<s>")) vocab[nv++] = E[i].key;
    double s1 = 0;
    for (int i = 0; i < nv; i++) s1 += pow(10, find(vocab[i])->p);
    CHECK_NEAR(s1, 1.0, 1e-3);
    const char *ctx1[] = {"my", "card", "<s>", "declined"};
    for (size_t c = 0; c < FR_ARRAY_LEN(ctx1); c++) {
        double s = 0;
        for (int i = 0; i < nv; i++) s += pbig(ctx1[c], vocab[i]);
        CHECK_NEAR(s, 1.0, 1e-3);
    }
    const char *ctx2[][2] = {{"<s>", "my"}, {"my", "card"}, {"was", "declined"}};
    for (size_t c = 0; c < FR_ARRAY_LEN(ctx2); c++) {
        double s = 0;
        for (int i = 0; i < nv; i++) s += ptri(ctx2[c][0], ctx2[c][1], vocab[i]);
        CHECK_NEAR(s, 1.0, 1e-3);
    }
    /* pocketsphinx reads it */
    err_set_logfp(NULL);
    logmath_t *lm = logmath_init(1.0001, 0, 0);
    ngram_model_t *m = ngram_model_read(NULL, path, NGRAM_ARPA, lm);
    CHECK(m != NULL);
    if (m) {
        CHECK_EQ_INT(ngram_model_get_size(m), 3);
        ngram_model_free(m);
    }
    logmath_free(lm);
    unlink(path);
}

/* Shared state of the pool test threads. */
typedef struct pool_arg {
    fr_asr_pool *pool; /* the pool */
    char *bytes;       /* the WAV */
    size_t len;        /* its length */
    char text[512];    /* transcript */
    int rc;            /* return code */
} pool_arg;

static void *pool_thread(void *p) {
    pool_arg *a = p;
    fr_asr_result r;
    fr_err err = {0};
    a->rc = fr_asr_pool_transcribe(a->pool, a->bytes, a->len, NULL, &r, &err);
    if (!a->rc) snprintf(a->text, sizeof a->text, "%s", r.text);
    fr_asr_result_free(&r);
    return NULL;
}

TEST(recognise_espeak_sentence) {
    const char *sentence = "can you tell me when my new card will arrive";
    char wav[] = "/tmp/frugal-test-asr-XXXXXX";
    int fd = mkstemp(wav);
    CHECK(fd >= 0);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "espeak-ng -v en-us -s 150 -w %s '%s'", wav, sentence);
    CHECK_EQ_INT(system(cmd), 0);
    size_t len = 0;
    fr_err err = {0};
    char *bytes = fr_read_file(wav, 1 << 24, &len, &err);
    CHECK(bytes != NULL);
    unlink(wav);
    if (!bytes) return;
    fr_asr_pool *pool = fr_asr_pool_new(NULL, 2); /* default: the shipped domain LM */
    pool_arg args[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].pool = pool, args[i].bytes = bytes, args[i].len = len;
        pthread_create(&th[i], NULL, pool_thread, &args[i]);
    }
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) {
        CHECK_EQ_INT(args[i].rc, 0);
        size_t n = 0;
        size_t e = fr_wer_edits(sentence, args[i].text, &n);
        double w = (double)e / (double)n;
        if (w > 0.5) fprintf(stderr, "  hyp [%s] WER %.2f\n", args[i].text, w);
        CHECK(w <= 0.5);
    }
    CHECK_STR(args[0].text, args[1].text); /* same decoder setup, same answer */
    /* bad media is refused before a decoder is used */
    fr_asr_result r;
    CHECK_EQ_INT(fr_asr_pool_transcribe(pool, "RIFFxxxxWAVE", 12, NULL, &r, &err), -1);
    CHECK(strstr(err.msg, "audio:") != NULL);
    fr_asr_pool_free(pool);
    free(bytes);
}

int main(void) { return t_main(); }
