/* vqa_score.h — the answer metrics of `frugal eval-vqa`.
 *
 * Exact match, normalised as the VQA evaluation (vqaEval.py of the VQA v2 challenge) does:
 * newlines and tabs become spaces, the ends are trimmed; punctuation ; / [ ] " { } ( ) = + \ _ -
 * > < @ ` , ? ! is removed where it touches a space or where the text has a digit-comma-digit
 * (1,000), else replaced by a space; a period not followed by a digit is removed; then the text
 * is lowercased (Unicode simple case mapping) and split on whitespace, number words zero..ten
 * and "none" become digits, the articles a / an / the are dropped, the common apostrophe-less
 * contractions get their apostrophe (dont -> don't; a subset of vqaEval's table, listed in
 * vqa_score.c), and the words are joined by single spaces. A prediction matches when its
 * normalised form equals one reference's.
 *
 * ANLS (DocVQA, Biten et al. 2019): both strings trimmed, lowercased and their whitespace runs
 * collapsed to one space; NL = Levenshtein distance over Unicode code points / the longer
 * length; the score is 1 - NL when NL < tau (0.5), else 0, maximised over the references. Two
 * empty strings score 1.
 *
 * Pure functions; thread-safe. Invalid UTF-8 is treated byte by byte (each byte one code point).
 */
#ifndef FRUGAL_TOOLS_VQA_SCORE_H
#define FRUGAL_TOOLS_VQA_SCORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The VQA normal form of s (malloc'd). */
char *fr_vqa_normalize(const char *s);
/* 1 when the normalised pred equals one of the normalised answers, else 0 (0 for n == 0). */
bool fr_vqa_exact(const char *pred, const char *const *answers, int n);

/* Edit distance (insert, delete, substitute: cost 1) of a (na) and b (nb); O(na * nb) time,
 * O(min) memory. */
size_t fr_levenshtein(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);
/* ANLS of pred against one reference with threshold tau. */
double fr_anls_pair(const char *pred, const char *gt, double tau);
/* Max over answers of fr_anls_pair (0 for n == 0). */
double fr_anls(const char *pred, const char *const *answers, int n, double tau);

#endif
