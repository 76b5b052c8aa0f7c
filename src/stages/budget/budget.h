/* budget.h — the token budget assembler: OCR text, a ticket (JSON), the dialogue history and the
 * question become one LLM prompt that fits a budget in tokens, keeping what matters instead of
 * cutting the tail.
 *
 * Design: the inputs are cut into pieces (one per ticket leaf "path: value", one per OCR line,
 * one per history turn, the question) and each gets a priority:
 *   0  the question (always kept; truncated at the head only if it alone exceeds the budget)
 *   1  key fields: ticket leaves whose key names an invoice number, amount / total, date / due
 *      date, payee / merchant / beneficiary, IBAN / account, currency, reference, checksum /
 *      signature / hash; OCR lines with the same words (English and Chinese)
 *   2  the two latest history turns
 *   3  older history turns, newest first, kept as a contiguous recent window
 *   4  other ticket fields, 5 other OCR lines
 * Pieces are taken greedily by (priority, position) while they fit; the kept pieces are then
 * emitted in their original order under section headers ("Ticket:", "Document (OCR):",
 * "Conversation:", "Question:"). The whole text is counted again and, while it is over budget
 * (headers, joins, tokenizer context effects), the least important kept piece is dropped.
 *
 * Counting: with a tokenizer callback (the served model's tokenizer) the count is exact; without
 * one, fr_budget_estimate: every run of ASCII letters/digits costs ceil(len / 4) tokens, every
 * other non-space ASCII byte 1, every non-ASCII code point 1 (CJK characters are about one token
 * each in current BPE vocabularies; the estimate errs on the high side for English).
 *
 * Thread safety: no global state; inputs are read-only.
 */
#ifndef FRUGAL_BUDGET_H
#define FRUGAL_BUDGET_H

#include <stddef.h>

#include "base/base.h"

struct cJSON;

/* Tokens in text[0..len); NULL callback means fr_budget_estimate. */
typedef size_t (*fr_budget_count_fn)(void *ctx, const char *text, size_t len);

/* One earlier turn. */
typedef struct fr_budget_turn {
    const char *role; /* "user", "assistant", ... (NULL: "user") */
    const char *text; /* the turn's text */
} fr_budget_turn;

typedef struct fr_budget_input {
    const char *question;          /* the customer's question (may be NULL) */
    const char *ocr_text;          /* OCR output, lines separated by '\n' (may be NULL) */
    const struct cJSON *ticket;    /* bill / transaction object (may be NULL) */
    const fr_budget_turn *history; /* oldest first */
    int n_history;                 /* entries in history */
    int budget_tokens;             /* the limit (>= 1) */
    fr_budget_count_fn count;      /* tokenizer, or NULL for the estimate */
    void *count_ctx;               /* its context */
} fr_budget_input;

typedef struct fr_budget_result {
    char *text;             /* the assembled prompt (malloc'd) */
    int tokens;             /* its count */
    int pieces_total;       /* pieces offered */
    int pieces_kept;        /* pieces kept */
    int key_fields_kept;    /* priority-1 pieces kept */
    int key_fields_total;   /* priority-1 pieces offered */
    int turns_kept;         /* history turns kept */
    int question_truncated; /* 1 when the question alone exceeded the budget */
} fr_budget_result;

/* Assembles the prompt. 0, or -1 with err (budget < 1). */
int fr_budget_assemble(const fr_budget_input *in, fr_budget_result *out, fr_err *err);
void fr_budget_result_free(fr_budget_result *r);

/* The documented estimate (see above). */
size_t fr_budget_estimate(const char *text, size_t len);

/* True when a ticket key (any case, '_', '-', ' ' ignored) names a key field. */
int fr_budget_is_key_name(const char *key);

#endif
