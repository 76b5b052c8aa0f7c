/* lm.h — text normalisation for speech and the project's n-gram language-model builder.
 *
 * Design: fr_asr_normalize turns written customer-service text into the spoken word sequence the
 * pocketsphinx dictionary spells (lower case, digits and amounts as words, "$5" -> "five dollars",
 * "3rd" -> "third", punctuation dropped, inner apostrophes kept). The same function normalises
 * reference transcripts for WER, so training text, references and hypotheses agree.
 *
 * The builder (fr_lm_add_text / fr_lm_add_words) counts trigrams over <s> w1 .. wn </s> (words
 * missing from the dictionary become <unk>, which keeps the counts and left contexts right and is
 * left out of the written model). fr_lm_write_arpa applies interpolated Kneser-Ney smoothing (one
 * discount per order, D = n1 / (n1 + 2 n2); continuation counts for the lower orders, raw counts
 * for n-grams starting with <s>), optionally prunes trigrams seen fewer than `min_count3` times,
 * computes every back-off weight from the n-grams actually written, so each context's
 * distribution sums to one over the written vocabulary, and writes the standard ARPA text format
 * pocketsphinx reads.
 * The builder holds no global state; a fr_lm_builder is used by one thread at a time.
 */
#ifndef FRUGAL_ASR_LM_H
#define FRUGAL_ASR_LM_H

#include <stddef.h>
#include <stdio.h>

#include "base/base.h"

/* Normalise `text` to space-separated lower-case spoken words; appends to `out` (NUL-terminated
 * through fr_buf_cstr). */
void fr_asr_normalize(const char *text, fr_buf *out);

/* A set of words (the pronunciation dictionary). */
typedef struct fr_wordset fr_wordset;
/* Load the words of a CMU-style dictionary ("word PH ON ES", variants "word(2)" folded). */
fr_wordset *fr_wordset_load_dict(const char *path, fr_err *err);
int fr_wordset_has(const fr_wordset *s, const char *word);
size_t fr_wordset_size(const fr_wordset *s);
void fr_wordset_free(fr_wordset *s);

typedef struct fr_lm_builder fr_lm_builder;

/* vocab: words allowed in the model (NULL = every word); the builder keeps the pointer. */
fr_lm_builder *fr_lm_builder_new(const fr_wordset *vocab);
/* Add one sentence of raw text (normalised inside). */
void fr_lm_add_text(fr_lm_builder *b, const char *text);
/* Add one sentence of already-normalised words. */
void fr_lm_add_words(fr_lm_builder *b, const char *words);

/* Summary of a built model. */
typedef struct fr_lm_stats {
    size_t sentences;    /* sentences added */
    size_t tokens;       /* words added (without <s> </s>) */
    size_t oov_tokens;   /* of which not in the vocabulary (<unk>) */
    size_t n[3];         /* n-grams written per order */
    double discount[3];  /* Kneser-Ney discount per order */
} fr_lm_stats;

/* Smooth and write an ARPA trigram model (max_order 2 or 3). Trigrams seen fewer than
 * min_count3 times are pruned (1 = keep all). 0 on success, -1 with err set. */
int fr_lm_write_arpa(fr_lm_builder *b, int max_order, int min_count3, FILE *f, fr_lm_stats *st,
                     fr_err *err);
void fr_lm_builder_free(fr_lm_builder *b);

/* Word error rate pieces: edit distance between two space-separated word strings. *ref_words
 * gets the reference word count. Returns substitutions + deletions + insertions. */
size_t fr_wer_edits(const char *ref, const char *hyp, size_t *ref_words);

#endif
