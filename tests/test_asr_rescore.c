/* test_asr_rescore.c — the joint ASR + intent rescoring of n-best lists (stages/asr/rescore.h):
 * the rule on hand-made lists, then on committed generated speech (tests/fixtures/asr_rescore,
 * made by make.sh there from tuning-split texts) through the decoder pool and through the media
 * stage that /v1/assist runs, where the rescored transcript carries the right intent and the
 * ASR 1-best does not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/assist.h"
#include "stages/asr/asr.h"
#include "stages/asr/lm.h"
#include "stages/asr/rescore.h"
#include "stages/nlu/intent.h"
#include "t.h"

#define FIX "tests/fixtures/asr_rescore/"

static fr_intent_model *load_model(void) {
    fr_err err = {0};
    fr_intent_model *m = fr_intent_load("models/intent-banking77.bin", &err);
    if (!m) fprintf(stderr, "  %s\n", err.msg);
    return m;
}

static int label_of(const fr_intent_model *m, const char *t) {
    fr_intent_pred p;
    fr_intent_verdict v;
    fr_err err = {0};
    return fr_intent_assess(m, t, strlen(t), &p, 1, &v, &err) > 0 ? p.label : -1;
}

TEST(rule_on_hand_made_lists) {
    fr_intent_model *m = load_model();
    CHECK(m != NULL);
    if (!m) return;
    /* the 1-best is garbled; the second hypothesis is a clear question */
    fr_asr_hyp h[3] = {{"where can i edit you you triple true start", 0.0},
                       {"where can i find the exchange rate", -2.0},
                       {"where can i find edit you huge rate", -1.0}};
    fr_asr_pick pk;
    fr_err err = {0};
    CHECK_EQ_INT(fr_asr_rescore(m, h, 3, 0.0, &pk, &err), 0);
    CHECK_EQ_INT(pk.index, 1); /* weight 0: the intent model alone */
    CHECK_STR(fr_intent_label(m, pk.label), "exchange_rate");
    CHECK(pk.confidence > 0.5f);
    CHECK_EQ_INT(fr_asr_rescore(m, h, 3, FR_ASR_RESCORE_WEIGHT, &pk, &err), 0);
    CHECK_EQ_INT(pk.index, 1); /* the default weight: 2 nats of ASR score do not outweigh it */
    CHECK_EQ_INT(fr_asr_rescore(m, h, 3, 100.0, &pk, &err), 0);
    CHECK_EQ_INT(pk.index, 0); /* a huge weight keeps the 1-best */
    /* joint score: the formula of the header */
    CHECK_NEAR(fr_asr_joint(-2.0, 0.5f, 0.25), -0.5 + log(0.5), 1e-9);
    CHECK_NEAR(fr_asr_joint(0.0, 0.0f, 1.0), log(1e-4), 1e-9);
    CHECK(fr_asr_joint(-INFINITY, 0.9f, 1.0) < -1e20);
    /* bad arguments */
    CHECK_EQ_INT(fr_asr_rescore(m, h, 3, -1.0, &pk, &err), -1);
    CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
    CHECK_EQ_INT(fr_asr_rescore(m, h, 3, NAN, &pk, &err), -1);
    CHECK_EQ_INT(fr_asr_rescore(m, NULL, 2, 0.1, &pk, &err), -1);
    CHECK_EQ_INT(fr_asr_rescore(m, h, FR_ASR_NBEST_MAX + 1, 0.1, &pk, &err), -1);
    CHECK_EQ_INT(fr_asr_rescore(m, h, 0, 0.1, &pk, &err), 0);
    CHECK_EQ_INT(pk.index, -1);
    /* the result form replaces the text only */
    fr_asr_result r;
    memset(&r, 0, sizeof r);
    r.text = fr_xstrdup(h[0].text);
    r.hyps = fr_xcalloc(3, sizeof *r.hyps);
    for (int i = 0; i < 3; i++) r.hyps[i].text = fr_xstrdup(h[i].text), r.hyps[i].score = h[i].score;
    r.n_hyps = 3;
    CHECK_EQ_INT(fr_asr_result_rescore(m, &r, FR_ASR_RESCORE_WEIGHT, &err), 1);
    CHECK_STR(r.text, h[1].text);
    CHECK_STR(r.hyps[0].text, h[0].text);
    fr_asr_result_free(&r);
    fr_intent_free(m);
}

/* One committed utterance. */
typedef struct fixture {
    char file[256]; /* path */
    char kind[16];  /* "fix": rescoring corrects the intent; "short": must survive whole */
    char label[96]; /* reference intent */
    char text[256]; /* reference text */
} fixture;

/* The fixture list (FIX "cases.tsv": file<TAB>kind<TAB>label<TAB>text). */
static int read_cases(fixture *out, int cap) {
    size_t len;
    fr_err err = {0};
    char *t = fr_read_file(FIX "cases.tsv", 1 << 16, &len, &err);
    if (!t) return fprintf(stderr, "  %s\n", err.msg), 0;
    int n = 0;
    for (char *line = strtok(t, "\n"); line && n < cap; line = strtok(NULL, "\n")) {
        char *f[4];
        int k = 0;
        for (char *q = line; q && k < 4; k++) {
            f[k] = q;
            q = k < 3 ? strchr(q, '\t') : NULL;
            if (q) *q++ = 0;
        }
        if (k < 4 || !f[3]) continue;
        snprintf(out[n].file, sizeof out[n].file, FIX "%s", f[0]);
        snprintf(out[n].kind, sizeof out[n].kind, "%s", f[1]);
        snprintf(out[n].label, sizeof out[n].label, "%s", f[2]);
        snprintf(out[n].text, sizeof out[n].text, "%s", f[3]);
        n++;
    }
    free(t);
    return n;
}

TEST(rescoring_fixes_the_intent_of_generated_speech) {
    fr_intent_model *m = load_model();
    fixture fx[16];
    int n = read_cases(fx, 16);
    CHECK(m != NULL);
    CHECK(n >= 4); /* the committed set is there */
    if (!m || n < 4) {
        fr_intent_free(m);
        return;
    }
    /* defaults (domain LM, rescoring on) but the VAD off: the "fix" fixtures were chosen where
       the 1-best of the whole recording is wrong; behind the VAD fix1's 1-best is already right */
    fr_asr_config nv = {0};
    nv.vad_model = "";
    fr_asr_pool *pool = fr_asr_pool_new(&nv, 1);
    fr_assist_media md;
    fr_assist_media_default(&md);
    CHECK(md.asr != NULL);
    int fixed = 0, asr_ran = 0;
    for (int i = 0; i < n; i++) {
        size_t len;
        fr_err err = {0};
        char *bytes = fr_read_file(fx[i].file, 1 << 22, &len, &err);
        CHECK(bytes != NULL);
        if (!bytes) continue;
        int want = fr_intent_label_index(m, fx[i].label);
        CHECK(want >= 0);
        fr_asr_result r;
        CHECK_EQ_INT(fr_asr_pool_transcribe(pool, bytes, len, NULL, &r, &err), 0);
        if (r.n_hyps < 2) {
            fprintf(stderr, "  %s: %d hypotheses\n", fx[i].file, r.n_hyps);
            CHECK(r.n_hyps >= 2);
            fr_asr_result_free(&r);
            free(bytes);
            continue;
        }
        int l1 = label_of(m, r.hyps[0].text), lr = label_of(m, r.text);
        int is_fix = !strcmp(fx[i].kind, "fix");
        fr_buf ref = {0};
        fr_asr_normalize(fx[i].text, &ref);
        size_t nw = 0, e = fr_wer_edits(fr_buf_cstr(&ref), r.text, &nw);
        fr_buf_free(&ref);
        if ((is_fix && l1 == want) || lr != want || (!is_fix && e * 4 > nw))
            fprintf(stderr, "  %s (%s): 1-best [%s] -> %s, rescored [%s] -> %s, %zu/%zu edits\n",
                    fx[i].file, fx[i].label, r.hyps[0].text,
                    l1 >= 0 ? fr_intent_label(m, l1) : "-", r.text,
                    lr >= 0 ? fr_intent_label(m, lr) : "-", e, nw);
        CHECK_EQ_INT(lr, want); /* the transcript we return gets the intent right */
        CHECK_STR(r.text, r.hyps[r.chosen].text);
        if (is_fix) {
            asr_ran++;
            CHECK(l1 != want); /* the ASR 1-best gets it wrong */
            CHECK(r.chosen > 0);
            fixed += l1 != want && lr == want;
        } else {
            CHECK(e * 4 <= nw); /* a short question survives: WER <= 0.25 */
        }
        /* the voice path of /v1/assist: the media stage returns the rescored transcript */
        if (md.asr) {
            fr_assist_media_err me;
            memset(&me, 0, sizeof me);
            void *au = md.audio_decode(md.ctx, (const uint8_t *)bytes, len, NULL, &me);
            CHECK(au != NULL);
            if (au) {
                fr_assist_bound b = {.time_limit_s = 60};
                char *t = md.asr(md.ctx, au, &b, &me);
                CHECK(t != NULL);
                if (t) CHECK_EQ_INT(label_of(m, t), want);
                free(t);
                md.audio_free(md.ctx, au);
            }
        }
        fr_asr_result_free(&r);
        free(bytes);
    }
    CHECK_EQ_INT(fixed, asr_ran);
    CHECK(asr_ran >= 2);
    /* rescoring off: the same decoder setup returns the 1-best */
    fr_asr_config off = {0};
    off.rescore_model = "";
    off.vad_model = ""; /* as above */
    fr_asr_pool *p1 = fr_asr_pool_new(&off, 1);
    size_t len;
    fr_err err = {0};
    char *bytes = fr_read_file(fx[0].file, 1 << 22, &len, &err);
    if (bytes) {
        fr_asr_result r;
        CHECK_EQ_INT(fr_asr_pool_transcribe(p1, bytes, len, NULL, &r, &err), 0);
        CHECK_EQ_INT(r.chosen, 0);
        CHECK(r.n_hyps >= 2);
        if (r.n_hyps) CHECK_STR(r.text, r.hyps[0].text);
        CHECK(label_of(m, r.text) != fr_intent_label_index(m, fx[0].label));
        fr_asr_result_free(&r);
    }
    free(bytes);
    /* a named rescoring model that does not exist is an error at the first decoder */
    fr_asr_config bad = {0};
    bad.rescore_model = "/nonexistent/intent.bin";
    fr_asr_pool *p2 = fr_asr_pool_new(&bad, 1);
    CHECK_EQ_INT(fr_asr_pool_warm(p2, &err), -1);
    fr_asr_pool_free(p2);
    fr_asr_pool_free(p1);
    fr_asr_pool_free(pool);
    fr_intent_free(m);
}

int main(void) { return t_main(); }
