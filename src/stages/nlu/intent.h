/* intent.h — intent classification: a trained model file in, top-k {name, confidence} out.
 *
 * Design: a text becomes a sparse TF-IDF vector of hashed word and character n-grams (textfeat.h;
 * sublinear tf, per-bucket idf from the training set, L2 normalisation per feature group, buckets
 * never seen in training are dropped). The model is a small ensemble of members, each either a
 * linear softmax layer or one ReLU hidden layer + softmax; member probabilities are averaged with
 * the members' weights. First-layer weights are stored as int8 with one f32 scale per row and
 * exist only for the buckets seen in training, which keeps the file a few MB.
 *
 * Calibration and out of scope (version 2): the ensemble probabilities are sharpened or
 * flattened by a temperature T (p_c ∝ p_c^(1/T)), fitted on a calibration split carved from the
 * training data (never the validation split). A model may hold an "out_of_scope" label trained on
 * negative examples; fr_intent_assess says a text is out of scope when the calibrated probability
 * of that label is at least oos_min_prob, the best in-scope probability is below min_conf, or the
 * share of the text's word features the model knows (coverage) is below min_coverage — the three
 * thresholds are chosen on the calibration split and stored in the file.
 *
 * File format (little-endian), version 1 (version 2 adds the calibration block):
 *   "FRINTENT" u32 version
 *   u32 bucket_bits word_max char_min char_max flags       featuriser (textfeat.h)
 *   f32 group_weight[2]                                     word / char group scale
 *   u32 n_labels n_rows n_members
 *   n_labels × (u16 len, len bytes of UTF-8)                label names, distinct, 1..255 bytes
 *   n_rows × u32                                            used buckets, strictly ascending
 *   n_rows × f32                                            idf per row (finite, > 0)
 *   n_members × member:
 *     u32 hidden, f32 weight                                hidden 0 = linear member
 *     n_rows × f32 scale, n_rows × d × i8                   first layer, d = hidden or n_labels
 *     hidden > 0: f32 b1[hidden], f32 w2[n_labels][hidden]
 *     f32 b2[n_labels]
 *   version 2: f32 temperature, i32 oos_label (-1: none),  calibration block
              f32 oos_min_prob, f32 min_conf, f32 min_coverage
   u64 checksum                                            FNV-1a 64 of every byte before it
 * The loader checks every count against caps and the bytes that remain before allocating, so a
 * truncated or hostile file gives an error message, never a crash or a huge allocation.
 *
 * Multi-label models (version 3, e.g. the NLU++ label set, where "How long does it take to get a
 * new pin?" is how_long + pin + arrival + new): every member ends in one sigmoid per label instead
 * of the softmax, member probabilities are averaged the same way, and label l is present when its
 * probability is at least thresholds[l], chosen per label on rows held out of training. No
 * temperature (the calibration block is the identity). Version 3 appends to the version 2 layout:
 *   u32 multilabel (1), f32 thresholds[n_labels] (each in (0, 1])
 * Single-label models are still written as version 2, so their files do not change.
 *
 * Thread safety: a loaded model is read-only; fr_intent_classify may run on many threads at once.
 */
#ifndef FRUGAL_NLU_INTENT_H
#define FRUGAL_NLU_INTENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_INTENT_MAGIC "FRINTENT"
#define FR_INTENT_VERSION 3u     /* newest; versions 1..3 are read (2 written for single-label) */
#define FR_INTENT_OOS_LABEL "out_of_scope"
#define FR_INTENT_MAX_LABELS 4096u
#define FR_INTENT_MAX_MEMBERS 16u
#define FR_INTENT_MAX_HIDDEN 4096u
#define FR_INTENT_MAX_FILE ((size_t)512 << 20)

typedef struct fr_intent_model fr_intent_model;

/* Calibration and the out-of-scope rule (see the design note). */
typedef struct fr_intent_calib {
    float temperature;  /* > 0; 1 = the raw ensemble probabilities */
    int32_t oos_label;  /* index of the out-of-scope label, or -1 */
    float oos_min_prob; /* out of scope when P(oos label) >= this (> 1: never) */
    float min_conf;     /* out of scope when the best in-scope probability is below this */
    float min_coverage; /* out of scope when the known share of word features is below this */
} fr_intent_calib;

/* What fr_intent_assess found besides the ranked intents. */
typedef struct fr_intent_verdict {
    float confidence;   /* calibrated probability of the best in-scope intent */
    float oos_prob;     /* calibrated probability of the out-of-scope label (0 without one) */
    float coverage;     /* share of the text's word uni/bigrams known to the model, 0..1 */
    int in_scope;       /* 1: in scope and confident (a template may answer) */
    const char *reason; /* static: why out of scope ("" when in scope) */
} fr_intent_verdict;

/* One ranked intent. */
typedef struct fr_intent_pred {
    const char *name; /* label name, owned by the model */
    float confidence; /* ensemble probability in [0, 1] */
    int label;        /* label index in the model */
} fr_intent_pred;

enum {
    FR_INTENT_LOAD_NO_CHECKSUM = 1 /* skip the checksum (fuzzing: reach the structural checks) */
};

fr_intent_model *fr_intent_load(const char *path, fr_err *err);
/* Parse a model from memory (the bytes are copied; data may be freed afterwards). */
fr_intent_model *fr_intent_load_mem(const void *data, size_t n, int flags, fr_err *err);
void fr_intent_free(fr_intent_model *m);

/* Serialise; fr_intent_save writes path atomically (temp file + rename). */
int fr_intent_save(const fr_intent_model *m, const char *path, fr_err *err);
/* The file bytes into a malloc'd buffer; *n gets the size. */
uint8_t *fr_intent_serialize(const fr_intent_model *m, size_t *n);

int fr_intent_n_labels(const fr_intent_model *m);
const char *fr_intent_label(const fr_intent_model *m, int i);
/* Index of a label name, or -1. */
int fr_intent_label_index(const fr_intent_model *m, const char *name);

/* Classify text[0..len) (any bytes; invalid UTF-8 is tolerated). Writes the k best intents,
 * best first, into out and returns their number (min(k, labels)), or -1 with err set. */
int fr_intent_classify(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                       int k, fr_err *err);

/* Like fr_intent_classify but over the in-scope labels only (the out-of-scope label, if any, is
 * never in out), with the verdict of the out-of-scope rule in *v. Returns the count or -1. */
int fr_intent_assess(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                     int k, fr_intent_verdict *v, fr_err *err);

/* Calibrated probabilities of every label into p[n_labels] and the word-feature coverage. For
 * calibration and evaluation. Returns 0, or -1 with err. */
int fr_intent_probs(const fr_intent_model *m, const char *text, size_t len, float *p,
                    float *coverage, fr_err *err);

/* The model's calibration (read-only) and a setter for training. */
const fr_intent_calib *fr_intent_get_calib(const fr_intent_model *m);
void fr_intent_set_calib(fr_intent_model *m, const fr_intent_calib *c);
/* The out-of-scope decision from a text's calibrated probabilities (rule above); *reason gets a
 * static string. */
int fr_intent_rule_in_scope(const fr_intent_calib *c, const float *p, int n_labels, float coverage,
                            const char **reason);

/* 1 when the model is multi-label (sigmoid outputs with per-label thresholds), else 0. */
int fr_intent_is_multilabel(const fr_intent_model *m);
/* Per-label thresholds [n_labels] of a multi-label model (NULL for a single-label one). */
const float *fr_intent_thresholds(const fr_intent_model *m);
/* Make the model multi-label with these thresholds (copied; each clamped to [0.01, 1]). */
void fr_intent_set_thresholds(fr_intent_model *m, const float *t);

/* Multi-label decision: the labels whose probability reaches their threshold, most probable
 * first, into out (at most cap; cap 0 counts only). Returns how many labels are present (may
 * exceed cap), or -1 with err set (bad arguments, or a single-label model). */
int fr_intent_select(const fr_intent_model *m, const char *text, size_t len, fr_intent_pred *out,
                     int cap, fr_err *err);

/* Summary for logs: "77 labels, 3 members, 41234 rows, 2^18 buckets". */
void fr_intent_describe(const fr_intent_model *m, char *buf, size_t n);

#endif
