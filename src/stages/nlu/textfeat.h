/* textfeat.h — text normalisation and hashed n-gram features for the intent classifier.
 *
 * Design: a text is normalised once (NFKC + case folding + lumping of look-alike punctuation via
 * utf8proc; invalid UTF-8 bytes become U+FFFD), then split into tokens: runs of letters, marks and
 * digits, except that ideographs and kana (scripts written without spaces) are one token each.
 * Two feature groups are hashed into one space of 2^bucket_bits buckets:
 *   - word group: token unigrams and adjacent-token bigrams (optionally with sentence-boundary
 *     tokens), hashed over the tokens' UTF-8 bytes;
 *   - char group: n-grams of char_min..char_max code points over the "char stream" — the
 *     normalised text with every run of non-word characters collapsed to one space and padded
 *     with a space at both ends — so Chinese gets n-grams over code points, English gets in-word
 *     and cross-word n-grams (or in-word only with FR_FEAT_CHAR_WB).
 * fr_feat_extract() returns, for one text, the distinct (group, bucket) keys with their counts in
 * ascending key order; the caller (training or inference) turns counts into TF-IDF values with its
 * own bucket→row map and idf table (see intent.c), so training and inference share one code path.
 * The hash (FNV-1a 64 with a per-group seed, then a 64-bit finaliser) is fixed: it is part of the
 * model format, changing it invalidates shipped models.
 * Thread safety: functions are reentrant; a fr_feat_scratch belongs to one thread at a time.
 */
#ifndef FRUGAL_NLU_TEXTFEAT_H
#define FRUGAL_NLU_TEXTFEAT_H

#include <stddef.h>
#include <stdint.h>

/* Texts longer than this many code points (after normalisation) are featurised on their prefix. */
#define FR_FEAT_MAX_CODEPOINTS 4096

enum {
    FR_FEAT_CHAR_WB = 1u << 0,     /* char n-grams never span an interior space (in-word only) */
    FR_FEAT_DIGITS = 1u << 1,      /* map every decimal digit to '0' before hashing */
    FR_FEAT_WORD_BOUNDS = 1u << 2, /* add <s>/</s> boundary tokens to word bigrams */
    FR_FEAT_ALL_FLAGS = 0x7u
};

enum { FR_FEAT_GROUP_WORD = 0, FR_FEAT_GROUP_CHAR = 1, FR_FEAT_N_GROUPS = 2 };

/* Featuriser settings; stored verbatim in the model file. */
typedef struct fr_feat_cfg {
    uint32_t bucket_bits; /* hash space is 2^bucket_bits buckets (10..22) */
    uint32_t word_max;    /* word n-grams 1..word_max (0: no word group; at most 3) */
    uint32_t char_min;    /* shortest char n-gram in code points (1..char_max) */
    uint32_t char_max;    /* longest char n-gram in code points (0: no char group; at most 8) */
    uint32_t flags;       /* FR_FEAT_* bits */
} fr_feat_cfg;

/* One distinct feature of a text: key = group << 32 | bucket, and its count in the text. */
typedef struct fr_feat {
    uint64_t key;   /* group << 32 | bucket */
    uint32_t count; /* occurrences in the text */
} fr_feat;

/* Reusable buffers of one featurisation (grown on demand, freed by fr_feat_scratch_free). */
typedef struct fr_feat_scratch {
    int32_t *cps;          /* normalised code points */
    size_t cps_cap;        /* capacity of cps */
    uint64_t *keys;        /* raw keys, one per n-gram occurrence */
    size_t keys_cap;       /* capacity of keys */
    fr_feat *feats;        /* distinct keys with counts: the result */
    size_t feats_cap;      /* capacity of feats */
    char *fixed;           /* UTF-8 copy with invalid bytes replaced */
    size_t fixed_cap;      /* capacity of fixed */
} fr_feat_scratch;

/* Check settings; returns NULL when valid, else a static message. */
const char *fr_feat_cfg_check(const fr_feat_cfg *cfg);

/* Features of text[0..len) into s->feats (ascending key order); returns their number. Never
 * fails: any byte string is accepted. */
size_t fr_feat_extract(const fr_feat_cfg *cfg, const char *text, size_t len, fr_feat_scratch *s);

void fr_feat_scratch_free(fr_feat_scratch *s);

/* Normalise text (as the featuriser does) into a malloc'd NUL-terminated UTF-8 string. For tests
 * and diagnostics. */
char *fr_feat_normalize(const char *text, size_t len);

#endif
