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
} fr_intent_data;

/* Read a CSV with a header row. The text column is named "text" (else the first column), the
 * label column "category", "label" or "intent" (else the last column). RFC 4180 quoting. */
int fr_intent_data_load_csv(fr_intent_data *d, const char *path, fr_err *err);
void fr_intent_data_free(fr_intent_data *d);

/* Stratified split: is_val[i] = 1 for validation rows. frac 0 gives no validation rows. */
void fr_intent_split(const fr_intent_data *d, double frac, uint64_t seed, uint8_t *is_val);

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
    double val_acc;          /* accuracy of the final (quantised) model on the validation rows */
    double member_val_acc[FR_INTENT_TRAIN_MAX_MEMBERS]; /* float accuracy of each member alone */
    double seconds;          /* wall time */
} fr_intent_train_report;

fr_intent_model *fr_intent_train(const fr_intent_data *d, const fr_intent_train_cfg *cfg,
                                 fr_intent_train_report *rep, fr_err *err);

/* Accuracy of a model on the rows of d with mask[i] == want (mask NULL: all rows). */
double fr_intent_accuracy(const fr_intent_model *m, const fr_intent_data *d, const uint8_t *mask,
                          int want, size_t *n_used);

#endif
