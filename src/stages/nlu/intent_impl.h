/* intent_impl.h — internals shared by intent.c (file format, inference) and intent_train.c
 * (training builds a model in this representation and quantises it). Not a public interface. */
#ifndef FRUGAL_NLU_INTENT_IMPL_H
#define FRUGAL_NLU_INTENT_IMPL_H

#include "stages/nlu/intent.h"
#include "stages/nlu/textfeat.h"

/* One ensemble member. First layer rows are int8 with a per-row scale. */
typedef struct fr_intent_member {
    uint32_t hidden;  /* 0: linear softmax member; else width of the ReLU hidden layer */
    float weight;     /* weight of this member's probabilities in the ensemble average */
    uint32_t dim;     /* first-layer width: hidden, or n_labels for a linear member */
    float *scale;     /* [n_rows] dequantisation scale of each first-layer row */
    int8_t *w1;       /* [n_rows][dim] first-layer weights */
    float *b1;        /* [hidden] hidden bias (NULL for linear) */
    float *w2;        /* [n_labels][hidden] output weights (NULL for linear) */
    float *b2;        /* [n_labels] output bias */
} fr_intent_member;

struct fr_intent_model {
    fr_feat_cfg feat;          /* featuriser settings */
    float group_weight[FR_FEAT_N_GROUPS]; /* scale of each L2-normalised feature group */
    uint32_t n_labels;         /* number of intents */
    char **labels;             /* [n_labels] names */
    uint32_t n_rows;           /* number of used buckets */
    uint32_t *buckets;         /* [n_rows] used buckets, ascending */
    int32_t *row_of;           /* [2^bucket_bits] row of a bucket or -1 */
    float *idf;                /* [n_rows] inverse document frequency */
    uint32_t n_members;        /* ensemble size */
    fr_intent_member *members; /* [n_members] */
    fr_intent_calib calib;     /* temperature and out-of-scope rule (identity for version 1) */
    uint32_t multilabel;       /* 1: sigmoid per label, a text may hold several (version 3) */
    float *thresholds;         /* [n_labels] per-label decision thresholds (multi-label only) */
};

/* A sparse TF-IDF vector: entries (row, value); rows may repeat across groups. */
typedef struct fr_intent_vec {
    int32_t *rows; /* [n] model rows */
    float *vals;   /* [n] values */
    size_t n;      /* number of entries */
} fr_intent_vec;

/* Map extracted features to a TF-IDF vector using m->row_of, m->idf, m->group_weight. rows and
 * vals must have room for nf entries. Returns the entry count. */
size_t fr_intent_vectorize(const fr_intent_model *m, const fr_feat *feats, size_t nf, int32_t *rows,
                           float *vals);

/* Temperature 1, no out-of-scope label, thresholds that never fire. */
void fr_intent_calib_identity(fr_intent_calib *c);

/* Build m->row_of from m->buckets (allocates). */
void fr_intent_build_row_map(fr_intent_model *m);

/* In place softmax of z[n] (n >= 1), max subtracted, float accumulation: the one used by both
 * inference and training, so a trained model scores the same in both. */
void fr_intent_softmax(float *z, uint32_t n);

/* In place logistic sigmoid of z[n]: the multi-label output of inference and training. */
void fr_intent_sigmoid(float *z, uint32_t n);

/* Quantise a float first layer [n_rows][dim] into member->scale / member->w1 (allocates). */
void fr_intent_quantize_rows(fr_intent_member *mb, const float *w, uint32_t n_rows, uint32_t dim);

#endif
