/* intent_multi.h — multi-label intents (NLU++): the data set reader, the per-label thresholds, the
 * F1 scores and the cross-validation over folds.
 *
 * Design: NLU++ ships an ontology (intent names with the domains they belong to) and folds, each a
 * JSON array of {"text", "intents": [...], "slots": {...}}. fr_intent_data_load_nlupp reads the
 * folds asked for into a multi-label fr_intent_data (labels: the ontology's intents of the domain
 * and of "general", sorted; group: the fold of each row). Training is fr_intent_train (intent_train.h)
 * with a caller-given split; thresholds are then chosen per label on rows held out of training
 * (fr_intent_tune_thresholds). fr_intent_multi_cv runs the whole recipe once per group of folds
 * held out, so every row is predicted by a model that neither trained nor tuned on it.
 *
 * Usage:
 *   fr_intent_data d;
 *   fr_intent_data_load_nlupp(&d, "data/nlupp/banking", "data/nlupp/ontology.json", "banking",
 *                             0x7fff, &err);               // folds 0..14
 *   fr_intent_train_cfg cfg; fr_intent_multi_defaults(&cfg); cfg.marks = marks;
 *   fr_intent_model *m = fr_intent_train(&d, &cfg, &rep, &err); // thresholds tuned on mark 2
 * Thread safety: reentrant; a model is only read.
 */
#ifndef FRUGAL_NLU_INTENT_MULTI_H
#define FRUGAL_NLU_INTENT_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/intent_train.h"

#define FR_NLUPP_MAX_FOLDS 32

/* Read dir/fold<K>.json for every bit K of folds into d (multi-label; d->group = K). Labels: the
 * intents of ontology_path whose "domain" list holds `domain` or "general". A row naming an
 * intent outside that set is an error, so is a missing fold. Returns 0, or -1 with err. */
int fr_intent_data_load_nlupp(fr_intent_data *d, const char *dir, const char *ontology_path,
                              const char *domain, uint32_t folds, fr_err *err);

/* The recipe of the multi-label model (fr_intent_train_defaults with the members and the feature
 * cut-off chosen by cross-validation over NLU++ banking folds 0-14; bench/RESULTS.md). */
void fr_intent_multi_defaults(fr_intent_train_cfg *cfg);

/* Per-label counts of a multi-label model on the rows of d with mask[i] == want (mask NULL: all):
 * tp[l], pred[l], gold[l] (arrays of d->n_labels, added to, not cleared). The model's labels are
 * matched to d's by name. `thr` NULL: the model's thresholds; else one threshold for every label. */
void fr_intent_multi_count(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                           int want, const float *thr, long *tp, long *pred, long *gold);

/* Micro-F1 (pooled counts) and macro-F1 (mean over the labels with at least one gold row) of
 * counts over n labels. */
void fr_intent_f1_of(const long *tp, const long *pred, const long *gold, int n, double *micro,
                     double *macro);

/* Micro / macro F1 of the model's decisions on the rows of d with mask[i] == want. */
void fr_intent_multi_f1(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                        int want, double *micro, double *macro, size_t *n_used);

/* Choose the thresholds on the rows of d with mark[i] == want: first one global threshold (the
 * best micro-F1 over a grid of 0.05..0.95 in steps of 0.025), then per label with at least 3 gold
 * rows there the threshold of the best F1 of that label (ties: the one nearest the global one);
 * labels with fewer keep the global threshold. Writes them into the model; returns the global one. */
float fr_intent_tune_thresholds(fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                                int want);

/* Cross-validation over the folds of d (d->group): the distinct groups in ascending order are cut
 * into n_parts contiguous parts; for each part p the model trains on the others except part
 * (p + 1) mod n_parts, which tunes the thresholds, and predicts part p. Counts are pooled over the
 * parts, per label, for three decision rules. */
typedef struct fr_intent_cv_report {
    int n_labels;      /* labels of d */
    long *tp[3], *pred[3], *gold; /* [n_labels] counts: rule 0 threshold 0.5, rule 1 the tuned
                                     global threshold, rule 2 the tuned per-label thresholds */
    double micro[3], macro[3];    /* F1 of each rule */
    double part_micro[FR_NLUPP_MAX_FOLDS]; /* micro-F1 of the per-label rule on each part */
    int n_parts;       /* parts */
    size_t n_rows;     /* rows predicted */
    double seconds;    /* wall time */
} fr_intent_cv_report;

int fr_intent_multi_cv(const fr_intent_data *d, const fr_intent_train_cfg *cfg, int n_parts,
                       fr_intent_cv_report *rep, fr_err *err);
void fr_intent_cv_report_free(fr_intent_cv_report *rep);

#endif
