/* fuzz_nlu.c — libFuzzer harness for the NLU stage: the intent model loader
 * (src/stages/nlu/intent.c), the featuriser (textfeat.c) and the slot extractor (slots.c).
 *
 * The first input byte (mod 4) picks the mode; the rest is the payload, copied to a buffer of
 * exactly its size so AddressSanitizer sees any read past the end.
 *   0: load the payload as a model with the checksum skipped (so mutations reach the structural
 *      checks); a model that loads must classify a few texts to valid probabilities and
 *      serialise → load back to identical bytes.
 *   1: the same with the checksum enforced (a failure must be a message).
 *   2: extract slots from the payload (reference date from the payload's first bytes): spans must
 *      lie inside the input in order without overlap (but a part of the day inside its date,
 *      "this morning"), names must be set, card/account slots
 *      must hold at most four digits in text and value.
 *   3: classify and assess (the out-of-scope verdict) the payload with a small model built at
 *      start-up, featurise it, run the attachment rule (attach.h), the currency scanner and
 *      the OCR field extractor (stages/ocr/fields.h) on it.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/nlu/attach.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/intent_train.h"
#include "stages/nlu/slots.h"
#include "stages/nlu/textfeat.h"
#include "stages/ocr/fields.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static fr_intent_model *small_model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fr_log_level = FR_LOG_ERROR + 1;
    static char *texts[] = {"where is my card", "my card has not arrived", "card still not here",
                            "I lost my card", "my card was stolen", "someone stole my card",
                            "change my pin", "how do I change my PIN", "new pin please",
                            "卡还没到", "卡丢了", "改密码"};
    static int labels[] = {0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2};
    static char *names[] = {"card_arrival", "lost_or_stolen_card", "change_pin"};
    fr_intent_data d = {12, texts, labels, 3, names, NULL, NULL};
    fr_intent_train_cfg c;
    fr_intent_train_defaults(&c);
    c.feat.bucket_bits = 10;
    c.min_df = 1;
    c.val_frac = 0;
    c.verbose = 0;
    c.member[0].epochs = 5;
    c.member[1].hidden = 8;
    c.member[1].epochs = 5;
    fr_err err;
    small_model = fr_intent_train(&d, &c, NULL, &err);
    if (!small_model) abort();
    return 0;
}

static void check_preds(const fr_intent_model *m, const char *t, size_t n) {
    fr_intent_pred p[4];
    fr_err err;
    int k = fr_intent_classify(m, t, n, p, 4, &err);
    if (k < 1 || k > 4) abort();
    for (int i = 0; i < k; i++) {
        if (!(p[i].confidence >= 0 && p[i].confidence <= 1.0001f) || !p[i].name) abort();
        if (i && p[i].confidence > p[i - 1].confidence) abort();
    }
}

/* A multi-label model's decision: a count within the labels, the best first, each at or above
 * its label's threshold. */
static void check_select(const fr_intent_model *m, const char *t, size_t n) {
    if (!fr_intent_is_multilabel(m)) return;
    fr_intent_pred p[8];
    fr_err err;
    int k = fr_intent_select(m, t, n, p, 8, &err);
    if (k < 0 || k > fr_intent_n_labels(m)) abort();
    const float *th = fr_intent_thresholds(m);
    for (int i = 0; i < k && i < 8; i++) {
        if (!(p[i].confidence >= th[p[i].label] && p[i].confidence <= 1.0001f)) abort();
        if (i && p[i].confidence > p[i - 1].confidence) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    int mode = data[0] % 4;
    size_t n = size - 1;
    char *s = malloc(n ? n : 1);
    if (n) memcpy(s, data + 1, n);
    if (mode <= 1) {
        fr_err err = {0};
        fr_intent_model *m = fr_intent_load_mem(s, n, mode == 0 ? FR_INTENT_LOAD_NO_CHECKSUM : 0, &err);
        if (!m) {
            if (!err.msg[0] || strchr(err.msg, '\n')) abort();
        } else {
            check_preds(m, "where is my card", 16);
            check_preds(m, "", 0);
            check_preds(m, "\xe5\x8d\xa1\xff", 4);
            check_select(m, "how long until my new card arrives", 34);
            check_select(m, "", 0);
            size_t n1, n2;
            uint8_t *b1 = fr_intent_serialize(m, &n1);
            fr_intent_model *m2 = fr_intent_load_mem(b1, n1, 0, &err);
            if (!m2) abort();
            uint8_t *b2 = fr_intent_serialize(m2, &n2);
            if (n1 != n2 || memcmp(b1, b2, n1)) abort();
            free(b1);
            free(b2);
            fr_intent_free(m2);
            fr_intent_free(m);
        }
    } else if (mode == 2) {
        fr_slot_ref ref = {2022, 3, 15, 9, 0, 0};
        if (n >= 2) {
            ref.month = 1 + data[1] % 12;
            ref.day = 1 + data[2 % size] % 28;
        }
        fr_slot sl[24];
        fr_err err;
        int k = fr_slots_extract(s, n, &ref, sl, 24, &err);
        if (k < 0 || k > 24) abort();
        size_t prev_end = 0;
        for (int i = 0; i < k; i++) {
            /* the one allowed overlap: a part of the day inside its date ("this morning") */
            bool inside = i > 0 && sl[i].kind == FR_SLOT_TIME_PERIOD && sl[i - 1].kind == FR_SLOT_DATE &&
                          sl[i].start >= sl[i - 1].start && sl[i].end <= sl[i - 1].end;
            if (sl[i].start >= sl[i].end || sl[i].end > n || (sl[i].start < prev_end && !inside) || !sl[i].name)
                abort();
            if (!inside) prev_end = sl[i].end;
            if (!memchr(sl[i].text, 0, sizeof sl[i].text) || !memchr(sl[i].value, 0, sizeof sl[i].value)) abort();
            if (sl[i].kind == FR_SLOT_CARD_NUMBER || sl[i].kind == FR_SLOT_ACCOUNT_NUMBER) {
                size_t dt = 0, dv = 0;
                for (const char *p = sl[i].text; *p; p++) dt += *p >= '0' && *p <= '9';
                for (const char *p = sl[i].value; *p; p++) dv += *p >= '0' && *p <= '9';
                if (dt > 4 || dv > 4) abort();
            }
            if (sl[i].kind == FR_SLOT_DATE && (sl[i].month < 1 || sl[i].month > 12 || sl[i].day < 1 || sl[i].day > 31))
                abort();
            if (sl[i].kind == FR_SLOT_TIME && (sl[i].hour < 0 || sl[i].hour > 23 || sl[i].minute < 0 || sl[i].minute > 59))
                abort();
            if (sl[i].kind == FR_SLOT_AMOUNT && !(sl[i].amount >= 0 && isfinite(sl[i].amount))) abort();
        }
    } else {
        check_preds(small_model, s, n);
        fr_feat_scratch sc = {0};
        fr_feat_cfg cfg = {12, 3, 1, 8, FR_FEAT_ALL_FLAGS};
        size_t nf = fr_feat_extract(&cfg, s, n, &sc);
        for (size_t i = 1; i < nf; i++)
            if (sc.feats[i].key <= sc.feats[i - 1].key) abort();
        fr_feat_scratch_free(&sc);
        /* the serving call: in-scope intents only, a verdict with a reason */
        fr_intent_pred p[4];
        fr_intent_verdict v;
        int k = fr_intent_assess(small_model, s, n, p, 4, &v, NULL);
        if (k < 1 || !v.reason || (v.in_scope != 0 && v.in_scope != 1)) abort();
        if (!(v.coverage >= 0 && v.coverage <= 1) || !(v.confidence >= 0 && v.confidence <= 1.0001f)) abort();
        /* the attachment rule and the OCR field extractor (currency included) on any bytes */
        (void)fr_nlu_refers_to_attachment(s, n);
        size_t at = (size_t)-1;
        const char *cur = fr_fields_currency_in(s, n, &at);
        if (cur[0] && (strlen(cur) != 3 || at >= n)) abort();
        char *z = malloc(n + 1);
        memcpy(z, s, n);
        z[n] = 0;
        fr_fields f;
        fr_fields_extract(z, &f);
        if (f.currency[0] && strlen(f.currency) != 3) abort();
        free(z);
    }
    free(s);
    return 0;
}
