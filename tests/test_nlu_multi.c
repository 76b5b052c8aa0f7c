/* test_nlu_multi.c — multi-label intents (NLU++ label set): the shipped model on sentences written
 * for this test, the shape of fr_intent_select's output and how the per-label thresholds decide
 * it, the version-3 file (round trip, corrupt thresholds), the NLU++ reader on small fixtures,
 * the F1 arithmetic, and deterministic training with thresholds tuned on held-out folds. Runs from
 * the repository root. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "stages/nlu/intent.h"
#include "stages/nlu/intent_multi.h"
#include "stages/nlu/intent_train.h"
#include "t.h"

#define MODEL "models/intent-nlupp.bin"
#define NLUPP "data/nlupp/banking"
#define ONTO "data/nlupp/ontology.json"

static fr_intent_model *shipped(void) {
    static fr_intent_model *m;
    if (!m) {
        fr_err err;
        m = fr_intent_load(MODEL, &err);
        if (!m) fprintf(stderr, "  %s\n", err.msg);
    }
    return m;
}

/* 1 when label name is among the n predictions. */
static int has(const fr_intent_pred *p, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(p[i].name, name)) return 1;
    return 0;
}

TEST(shipped_model_is_multilabel_over_the_ontology) {
    fr_intent_model *m = shipped();
    CHECK(m != NULL);
    if (!m) return;
    CHECK(fr_intent_is_multilabel(m));
    CHECK_EQ_INT(fr_intent_n_labels(m), 48); /* banking + general intents of the ontology */
    CHECK(fr_intent_label_index(m, "how_long") >= 0);
    CHECK(fr_intent_label_index(m, "pin") >= 0);
    CHECK(fr_intent_label_index(m, "handoff") >= 0);
    const float *t = fr_intent_thresholds(m);
    CHECK(t != NULL);
    for (int l = 0; t && l < 48; l++) CHECK(t[l] > 0 && t[l] <= 1);
}

TEST(shipped_model_finds_several_intents) {
    fr_intent_model *m = shipped();
    if (!m) {
        CHECK(m != NULL);
        return;
    }
    static const struct { const char *text; const char *want[4]; } cases[] = {
        {"How long will it take for my new card to arrive?", {"how_long", "new", "card", "arrival"}},
        {"I want to cancel my standing order", {"cancel_close_leave_freeze", "standing_order"}},
        {"my contactless payment is not working", {"contactless", "wrong_notworking_notshowing"}},
        {"I lost my card, please freeze it", {"lost_stolen", "card"}},
        {"can I speak to a human", {"handoff"}},
        {"yes please", {"affirm"}},
    };
    for (size_t i = 0; i < FR_ARRAY_LEN(cases); i++) {
        fr_intent_pred p[16];
        fr_err err;
        int n = fr_intent_select(m, cases[i].text, strlen(cases[i].text), p, 16, &err);
        CHECK(n >= 1 && n <= 16);
        for (int k = 0; k < 4 && cases[i].want[k]; k++) {
            int ok = has(p, n, cases[i].want[k]);
            if (!ok) fprintf(stderr, "  '%s': %s missing\n", cases[i].text, cases[i].want[k]);
            CHECK(ok);
        }
        CHECK(!has(p, n, "greet"));
    }
}

TEST(select_output_shape_and_thresholds) {
    fr_err err;
    fr_intent_model *m = fr_intent_load(MODEL, &err);
    CHECK(m != NULL);
    if (!m) return;
    const char *text = "How much is the fee for an international transfer?";
    size_t len = strlen(text);
    int nl = fr_intent_n_labels(m);
    float *p = malloc((size_t)nl * sizeof *p), *t = malloc((size_t)nl * sizeof *t);
    CHECK_EQ_INT(fr_intent_probs(m, text, len, p, NULL, &err), 0);
    /* the model's own decision: exactly the labels whose probability reaches their threshold */
    fr_intent_pred out[64];
    int n = fr_intent_select(m, text, len, out, 64, &err), want = 0;
    for (int l = 0; l < nl; l++) want += p[l] >= fr_intent_thresholds(m)[l];
    CHECK_EQ_INT(n, want);
    for (int i = 1; i < n; i++) CHECK(out[i - 1].confidence >= out[i].confidence);
    for (int i = 0; i < n; i++) CHECK_NEAR(out[i].confidence, p[out[i].label], 1e-6);
    /* every threshold at the floor: every label at or above 0.01 is present, best first */
    for (int l = 0; l < nl; l++) t[l] = 0.0f; /* clamped to 0.01 */
    fr_intent_set_thresholds(m, t);
    CHECK_NEAR(fr_intent_thresholds(m)[0], 0.01, 1e-7);
    int low = 0;
    for (int l = 0; l < nl; l++) low += p[l] >= 0.01f;
    CHECK_EQ_INT(fr_intent_select(m, text, len, out, 64, &err), low);
    /* cap smaller than the count: the count still comes back, out holds the best ones */
    fr_intent_pred two[2];
    CHECK_EQ_INT(fr_intent_select(m, text, len, two, 2, &err), low);
    CHECK_EQ_INT(two[0].label, out[0].label);
    CHECK_EQ_INT(two[1].label, out[1].label);
    CHECK_EQ_INT(fr_intent_select(m, text, len, NULL, 0, &err), low);
    /* raising the best label's threshold above its probability removes only that label */
    int best = out[0].label;
    t[best] = p[best] + 1e-3f > 1 ? 1 : p[best] + 1e-3f;
    if (p[best] >= 1.0f) t[best] = 1.0f;
    fr_intent_set_thresholds(m, t);
    int n2 = fr_intent_select(m, text, len, out, 64, &err);
    if (p[best] < 1.0f) {
        CHECK_EQ_INT(n2, low - 1);
        CHECK(!has(out, n2, fr_intent_label(m, best)));
    }
    /* a single-label model refuses */
    fr_intent_model *b = fr_intent_load("models/intent-banking77.bin", &err);
    CHECK(b != NULL);
    if (b) {
        CHECK(!fr_intent_is_multilabel(b));
        CHECK(fr_intent_thresholds(b) == NULL);
        CHECK_EQ_INT(fr_intent_select(b, text, len, out, 4, &err), -1);
        fr_intent_free(b);
    }
    free(p);
    free(t);
    fr_intent_free(m);
}

TEST(version3_file_round_trip_and_corruption) {
    fr_err err;
    fr_intent_model *m = shipped();
    CHECK(m != NULL);
    if (!m) return;
    size_t n;
    uint8_t *bytes = fr_intent_serialize(m, &n);
    CHECK_EQ_INT(bytes[8], 3); /* version 3 */
    fr_intent_model *r = fr_intent_load_mem(bytes, n, 0, &err);
    CHECK(r != NULL);
    if (r) {
        size_t n2;
        uint8_t *b2 = fr_intent_serialize(r, &n2);
        CHECK(n2 == n && !memcmp(b2, bytes, n));
        free(b2);
        fr_intent_free(r);
    }
    /* the thresholds are the last f32s before the checksum */
    int nl = fr_intent_n_labels(m);
    size_t t0 = n - 8 - (size_t)nl * 4;
    static const uint32_t bad[] = {0x00000000u /* 0 */, 0x7fc00000u /* NaN */, 0x40000000u /* 2 */};
    for (size_t k = 0; k < FR_ARRAY_LEN(bad); k++) {
        uint8_t *c = malloc(n);
        memcpy(c, bytes, n);
        memcpy(c + t0 + 4, &bad[k], 4);
        fr_intent_model *x = fr_intent_load_mem(c, n, FR_INTENT_LOAD_NO_CHECKSUM, &err);
        CHECK(x == NULL);
        if (!x) CHECK(strstr(err.msg, "threshold") != NULL);
        fr_intent_free(x);
        free(c);
    }
    /* the multi-label flag must be 1 */
    uint8_t *c = malloc(n);
    memcpy(c, bytes, n);
    c[t0 - 4] = 2;
    fr_intent_model *x = fr_intent_load_mem(c, n, FR_INTENT_LOAD_NO_CHECKSUM, &err);
    CHECK(x == NULL);
    fr_intent_free(x);
    /* truncated inside the threshold table */
    x = fr_intent_load_mem(c, t0 + 8, FR_INTENT_LOAD_NO_CHECKSUM, &err);
    CHECK(x == NULL);
    fr_intent_free(x);
    free(c);
    free(bytes);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

TEST(nlupp_reader_on_fixtures) {
    char dir[] = "/tmp/frugal-nlupp-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char p[256], onto[256];
    snprintf(onto, sizeof onto, "%s/ontology.json", dir);
    write_file(onto, "{\"intents\": {\"affirm\": {\"domain\": [\"general\"]}, \"pin\": {\"domain\": "
                     "[\"banking\"]}, \"room\": {\"domain\": [\"hotels\"]}, \"card\": {\"domain\": "
                     "[\"banking\", \"hotels\"]}}}");
    snprintf(p, sizeof p, "%s/fold0.json", dir);
    write_file(p, "[{\"text\": \"yes\", \"intents\": [\"affirm\"]}, {\"text\": \"new pin for my card\", "
                  "\"intents\": [\"pin\", \"card\"]}, {\"text\": \"hello there\"}]");
    snprintf(p, sizeof p, "%s/fold3.json", dir);
    write_file(p, "[{\"text\": \"my pin\", \"intents\": [\"pin\"]}]");
    fr_intent_data d;
    fr_err err;
    CHECK_EQ_INT(fr_intent_data_load_nlupp(&d, dir, onto, "banking", 1u | 1u << 3, &err), 0);
    CHECK_EQ_INT(d.n_labels, 3); /* affirm, card, pin (sorted); room is hotels only */
    CHECK_EQ_INT(d.n, 4);
    if (d.n == 4 && d.n_labels == 3) {
        CHECK_STR(d.names[0], "affirm");
        CHECK_STR(d.names[1], "card");
        CHECK_STR(d.names[2], "pin");
        static const uint8_t want[4][3] = {{1, 0, 0}, {0, 1, 1}, {0, 0, 0}, {0, 0, 1}};
        CHECK(!memcmp(d.multi, want, sizeof want));
        CHECK_EQ_INT(d.labels[1], 1);
        CHECK_EQ_INT(d.labels[2], -1); /* no intent */
        CHECK_EQ_INT(d.group[0], 0);
        CHECK_EQ_INT(d.group[3], 3);
    }
    fr_intent_data_free(&d);
    /* a missing fold is an error */
    CHECK_EQ_INT(fr_intent_data_load_nlupp(&d, dir, onto, "banking", 1u << 1, &err), -1);
    CHECK(strstr(err.msg, "fold1.json") != NULL);
    /* an intent outside the domain's set is an error */
    snprintf(p, sizeof p, "%s/fold2.json", dir);
    write_file(p, "[{\"text\": \"a room\", \"intents\": [\"room\"]}]");
    CHECK_EQ_INT(fr_intent_data_load_nlupp(&d, dir, onto, "banking", 1u << 2, &err), -1);
    CHECK(strstr(err.msg, "'room'") != NULL);
    write_file(p, "[{\"text\": 5}]");
    CHECK_EQ_INT(fr_intent_data_load_nlupp(&d, dir, onto, "banking", 1u << 2, &err), -1);
    /* fr_intent_data_add_lines refuses a multi-label set */
    CHECK_EQ_INT(fr_intent_data_load_nlupp(&d, dir, onto, "banking", 1u, &err), 0);
    CHECK_EQ_INT(fr_intent_data_add_lines(&d, onto, "x", &err), -1);
    fr_intent_data_free(&d);
    const char *names[] = {"fold0.json", "fold2.json", "fold3.json", "ontology.json"};
    for (size_t i = 0; i < FR_ARRAY_LEN(names); i++) {
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
}

TEST(f1_arithmetic) {
    /* label 0: tp 2 of pred 4, gold 2 → F1 2/3; label 1: tp 1, pred 1, gold 3 → F1 1/2;
     * label 2: no gold (left out of macro), one false alarm */
    long tp[] = {2, 1, 0}, pred[] = {4, 1, 1}, gold[] = {2, 3, 0};
    double mi, ma;
    fr_intent_f1_of(tp, pred, gold, 3, &mi, &ma);
    CHECK_NEAR(mi, 2.0 * 3 / (6 + 5), 1e-12);
    CHECK_NEAR(ma, (2.0 / 3 + 0.5) / 2, 1e-12);
}

/* A small multi-label model on NLU++ folds 0-2, thresholds tuned on fold 3. */
static fr_intent_model *small_model(fr_intent_data *d, uint8_t **marks, fr_intent_train_report *rep) {
    fr_err err;
    if (fr_intent_data_load_nlupp(d, NLUPP, ONTO, "banking", 0xfu, &err)) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    *marks = malloc(d->n + 1);
    for (size_t i = 0; i < d->n; i++) (*marks)[i] = d->group[i] == 3 ? 2 : 0;
    fr_intent_train_cfg cfg;
    fr_intent_multi_defaults(&cfg);
    cfg.feat.bucket_bits = 14;
    cfg.member[0].hidden = 32;
    cfg.member[0].epochs = 20;
    cfg.member[0].lr = 0.01f;
    cfg.verbose = 0;
    cfg.marks = *marks;
    return fr_intent_train(d, &cfg, rep, &err);
}

TEST(multilabel_training_is_deterministic_and_tunes_thresholds) {
    fr_intent_data d1, d2;
    uint8_t *m1 = NULL, *m2 = NULL;
    fr_intent_train_report r1, r2;
    fr_intent_model *a = small_model(&d1, &m1, &r1), *b = small_model(&d2, &m2, &r2);
    CHECK(a != NULL && b != NULL);
    if (a && b) {
        CHECK(fr_intent_is_multilabel(a));
        CHECK(r1.n_calib > 50 && r1.n_train > 200);
        size_t na, nb;
        uint8_t *ba = fr_intent_serialize(a, &na), *bb = fr_intent_serialize(b, &nb);
        CHECK(na == nb && !memcmp(ba, bb, na));
        free(ba);
        free(bb);
        /* tuned: not every threshold is the 0.5 of an untuned model */
        const float *t = fr_intent_thresholds(a);
        int moved = 0;
        for (int l = 0; l < fr_intent_n_labels(a); l++) moved += t[l] != 0.5f;
        CHECK(moved > 10);
        /* the tuned thresholds do at least as well as 0.5 on the rows they were tuned on */
        int nl = d1.n_labels;
        long *c = calloc(6 * (size_t)nl, sizeof *c);
        float half = 0.5f;
        fr_intent_multi_count(a, &d1, m1, 2, NULL, c, c + nl, c + 2 * nl);
        fr_intent_multi_count(a, &d1, m1, 2, &half, c + 3 * nl, c + 4 * nl, c + 5 * nl);
        double tuned, fixed;
        fr_intent_f1_of(c, c + nl, c + 2 * nl, nl, &tuned, NULL);
        fr_intent_f1_of(c + 3 * nl, c + 4 * nl, c + 5 * nl, nl, &fixed, NULL);
        CHECK(tuned >= fixed);
        if (!(tuned > 0.5)) fprintf(stderr, "  tuned micro-F1 %.3f (0.5: %.3f)\n", tuned, fixed);
        CHECK(tuned > 0.5);
        free(c);
    }
    fr_intent_free(a);
    fr_intent_free(b);
    fr_intent_data_free(&d1);
    fr_intent_data_free(&d2);
    free(m1);
    free(m2);
}

int main(void) { return t_main(); }
