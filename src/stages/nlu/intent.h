/* intent.h — intent classification: a trained model file in, top-k {name, confidence} out.
 *
 * Design: a text becomes a sparse TF-IDF vector of hashed word and character n-grams (textfeat.h;
 * sublinear tf, per-bucket idf from the training set, L2 normalisation per feature group, buckets
 * never seen in training are dropped). The model is a small ensemble of members, each either a
 * linear softmax layer or one ReLU hidden layer + softmax; member probabilities are averaged with
 * the members' weights. First-layer weights are stored as int8 with one f32 scale per row and
 * exist only for the buckets seen in training, which keeps the file a few MB.
 *
 * File format (little-endian), version 1:
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
 *   u64 checksum                                            FNV-1a 64 of every byte before it
 * The loader checks every count against caps and the bytes that remain before allocating, so a
 * truncated or hostile file gives an error message, never a crash or a huge allocation.
 *
 * Thread safety: a loaded model is read-only; fr_intent_classify may run on many threads at once.
 */
#ifndef FRUGAL_NLU_INTENT_H
#define FRUGAL_NLU_INTENT_H

#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define FR_INTENT_MAGIC "FRINTENT"
#define FR_INTENT_VERSION 1u
#define FR_INTENT_MAX_LABELS 4096u
#define FR_INTENT_MAX_MEMBERS 16u
#define FR_INTENT_MAX_HIDDEN 4096u
#define FR_INTENT_MAX_FILE ((size_t)512 << 20)

typedef struct fr_intent_model fr_intent_model;

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

/* Summary for logs: "77 labels, 3 members, 41234 rows, 2^18 buckets". */
void fr_intent_describe(const fr_intent_model *m, char *buf, size_t n);

#endif
