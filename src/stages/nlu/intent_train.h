/* intent_train.h — training the intent classifier from a labelled CSV, deterministically.
 *
 * Design: the data set is read from a CSV (header with a text column and a label column), labels
 * are sorted by name, and a stratified validation split is carved with a seeded hash order (per
 * label: rows sorted by splitmix64(seed * 0x100000001b3 ^ row) — row is the 0-based data row — and
 * the first round(n_label * frac) go to validation). The featuriser's buckets seen in the training
 * rows (document frequency >= min_df) become the model's rows, with smoothed idf
 * ln((1 + N) / (1 + df)) + 1. Each ensemble member is trained with mini-batch Adam (lazy on the
 * sparse first-layer rows), decoupled weight decay, linearly decaying learning rate, optional
 * dropout on the hidden layer and label smoothing; example order and initialisation come from a
 * splitmix64 stream seeded by (seed, member index). Everything is single-threaded per member and
 * members are independent, so the result is bit-identical for a given build whatever the thread
 * count. Progress (epoch, loss, train/val accuracy) goes to stderr.
 */
#ifndef FRUGAL_NLU_INTENT_TRAIN_H
#define FRUGAL_NLU_INTENT_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"
#include "stages/nlu/intent.h"
#include "stages/nlu/textfeat.h"

/* A labelled data set. */
typedef struct fr_intent_data {
    size_t n;           /* number of examples */
    char **texts;       /* [n] UTF-8 texts */
    int *labels;        /* [n] label index into names */
    int n_labels;       /* number of distinct labels */
    char **names;       /* [n_labels] label names, sorted */
    uint8_t *multi;     /* [n][n_labels] multi-hot label sets (multi-label data), or NULL; then
                           labels[i] is the first label of row i, or -1 for an empty set */
    int *group;         /* [n] source group of each row (NLU++: the fold), or NULL */
} fr_intent_data;

/* Read a CSV with a header row. The text column is named "text" (else the first column), the
 * label column "category", "label" or "intent" (else the last column). RFC 4180 quoting. */
int fr_intent_data_load_csv(fr_intent_data *d, const char *path, fr_err *err);
void fr_intent_data_free(fr_intent_data *d);

/* Adds one example per non-empty line of every *.txt file in dir (files in name order; a path to
 * one file works too) with the given label (created if new; label indices are renumbered to keep
 * names sorted, rows keep their order, so a split of the earlier rows is unchanged). -1 with err
 * when nothing could be read. */
int fr_intent_data_add_lines(fr_intent_data *d, const char *dir, const char *label, fr_err *err);

/* Stratified split: is_val[i] = 1 for validation rows. frac 0 gives no validation rows. */
void fr_intent_split(const fr_intent_data *d, double frac, uint64_t seed, uint8_t *is_val);
/* Three-way split: per label, in the same seeded order, the first round(n * val_frac) rows are
 * validation (mark 1, the same rows fr_intent_split picks), the next round(n * calib_frac) are
 * calibration (mark 2), the rest training (0); at least one training row per label. */
void fr_intent_split3(const fr_intent_data *d, double val_frac, double calib_frac, uint64_t seed,
                      uint8_t *mark);

#define FR_INTENT_TRAIN_MAX_MEMBERS 8

/* Hyper-parameters of one ensemble member. */
typedef struct fr_intent_member_cfg {
    uint32_t hidden;     /* 0: linear softmax; else ReLU hidden width */
    uint32_t epochs;     /* passes over the training rows */
    uint32_t batch;      /* examples per Adam step */
    float lr;            /* peak Adam learning rate (decays linearly to 0) */
    float wd;            /* decoupled weight decay per step (times lr) */
    float dropout;       /* dropout probability on the hidden layer */
    float smooth;        /* label smoothing */
    float init;          /* first-layer init: uniform(-init, init) (MLP only) */
    float weight;        /* ensemble weight */
} fr_intent_member_cfg;

/* Training settings. fr_intent_train_defaults() gives the shipped model's recipe. */
typedef struct fr_intent_train_cfg {
    fr_feat_cfg feat;                 /* featuriser */
    float group_weight[FR_FEAT_N_GROUPS]; /* word / char group scale */
    uint32_t min_df;                  /* buckets seen in fewer training rows are dropped */
    double val_frac;                  /* validation fraction (0: train on everything) */
    double calib_frac;                /* calibration fraction carved from the rest (0: none, no
                                         temperature and no out-of-scope thresholds) */
    double oos_target;                /* in-scope calibration rows the out-of-scope rule may flag
                                         (0.01) */
    const uint8_t *marks;             /* [n] the caller's split (0 training, 1 validation, 2
                                         calibration / threshold tuning), or NULL: the seeded
                                         stratified split of val_frac and calib_frac */
    int refit;                        /* after calibrating, train again on training +
                                         calibration rows and keep the calibration (the
                                         validation rows stay held out) */
    uint64_t seed;                    /* split, init and order seed */
    int n_members;                    /* ensemble size */
    fr_intent_member_cfg member[FR_INTENT_TRAIN_MAX_MEMBERS]; /* per member */
    int threads;                      /* members trained in parallel (no effect on the result) */
    int verbose;                      /* progress on stderr */
} fr_intent_train_cfg;

void fr_intent_train_defaults(fr_intent_train_cfg *cfg);

/* What training measured. */
typedef struct fr_intent_train_report {
    size_t n_train, n_val;   /* split sizes */
    size_t n_calib;          /* calibration rows */
    double val_acc;          /* accuracy of the final (quantised) model on the validation rows */
    fr_intent_calib calib;   /* what calibration chose */
    double calib_in_flagged; /* in-scope calibration rows flagged out of scope (share) */
    double calib_oos_flagged;/* out-of-scope calibration rows flagged (share; 0 without any) */
    double val_micro_f1;     /* multi-label: micro / macro F1 of the final model on validation */
    double val_macro_f1;
    double member_val_acc[FR_INTENT_TRAIN_MAX_MEMBERS]; /* float accuracy of each member alone */
    double seconds;          /* wall time */
} fr_intent_train_report;

/* Training of a multi-label data set (d->multi set): every member ends in sigmoids trained with
 * binary cross-entropy (label smoothing unused); the model is multi-label with thresholds tuned
 * on the calibration rows (mark 2) by fr_intent_tune_thresholds, or 0.5 without such rows; no
 * temperature, no out-of-scope rule. Progress shows micro-F1 at 0.5 instead of accuracy. */
fr_intent_model *fr_intent_train(const fr_intent_data *d, const fr_intent_train_cfg *cfg,
                                 fr_intent_train_report *rep, fr_err *err);

/* Fits the temperature (NLL of the in-scope rows) and then the out-of-scope thresholds on the
 * rows of d with mark[i] == want: the rule flagging at most `target` of the in-scope rows that
 * flags the most out-of-scope ones (ties: fewer in-scope flagged, then larger thresholds). The
 * result goes into the model; rates into *in_flagged / *oos_flagged (may be NULL). */
void fr_intent_calibrate(fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                         int want, double target, double *in_flagged, double *oos_flagged);

/* Expected calibration error of the top-1 confidence (15 equal-width bins) over the rows of d
 * with mark[i] == want whose label the model knows and is not out of scope; temperature t
 * replaces the model's. *acc gets the accuracy of those rows (may be NULL). */
double fr_intent_ece(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mark,
                     int want, float t, double *acc);

/* Accuracy of a model on the rows of d with mask[i] == want (mask NULL: all rows). */
double fr_intent_accuracy(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                          int want, size_t *n_used);

#endif
