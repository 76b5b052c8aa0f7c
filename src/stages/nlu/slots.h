/* slots.h — slot extraction for customer-service text: amounts with currency, dates, date periods,
 * times, card / account / invoice numbers and company names, each with byte offsets and a
 * normalised value.
 *
 * Design: a fixed set of PCRE2 patterns (compiled once, JIT where available, thread-safe) finds
 * candidate spans; a hand-written normaliser per pattern turns each into a typed value or rejects
 * it (invalid date, failed Luhn / IBAN check, stop-word company, ...). Overlapping candidates are
 * resolved longest-first (then by pattern priority). Dates and times get a role from their left
 * context ("from/since/between" → *_from, "to/until/till/up to" or "and" after "between" →
 * *_to), and the slot name carries it (date_from, time_to, as in NLU++). Relative expressions
 * ("next Tuesday", "in 3 days", "15 minutes ago", "this month") are resolved against a reference
 * date-time given by the caller. Conventions follow NLU++ (reference 2022-03-15): a bare weekday
 * is the next one after today, "next <weekday>" is that day of next week, "last <weekday>" the
 * most recent one before today, a day-month without a year is this year unless the month is
 * already past, an ordinal alone ("the 5th") is this month unless the day is past, d/m/y is
 * day-first unless the second field exceeds 12, and "25 to 7 p.m." is 18:35.
 *
 * Past tense: when the sentence speaks of the past ("I was charged on 3 March", "did I pay ... on
 * Friday", "... ago"), a date without a year, a bare weekday and a bare ordinal resolve to the
 * most recent such day on or before the reference date instead of the next one.
 *
 * Person names, shopping categories, hour/minute periods and bare numbers (NLU++ person_name,
 * shopping_category, time_period, number) come from their context: a name after a payment cue
 * ("to", "from", "paid", "under the name"...) made of words that are not common English words; a
 * category from a list, or the words after "spend/spent on"; "last/next N hours/minutes"; and an
 * integer that no other slot covers. Dates keep a leading weekday ("Friday 7 January 2016"), and
 * without a year the weekday picks the year. A part of the day after a day word ("yesterday
 * afternoon", "this morning") is a time_period; "this morning" is also a date, and both are
 * returned (the only case of two slots sharing bytes).
 *
 * A date_period that is a length of time ("for 11 years", "after 3 days") has an ISO 8601
 * duration as value ("P11Y", "P3D"), a recurrence ("the 4th of each month") a repeating interval
 * ("R/P1M/D4"), a vague one ("lately", "for days") the value "" (year..day2 are then 0).
 *
 * Card and account numbers are masked inside the extractor (fr_slot_mask: every letter/digit but
 * the last four becomes '*'): the raw number is never copied into a slot, so nothing downstream
 * (logs, responses, stored records) can leak it.
 *
 * Input: any bytes (invalid UTF-8 is tolerated by PCRE2_MATCH_INVALID_UTF); only the first
 * FR_SLOTS_MAX_INPUT bytes are scanned.
 */
#ifndef FRUGAL_NLU_SLOTS_H
#define FRUGAL_NLU_SLOTS_H

#include <stddef.h>

#include "base/base.h"

#define FR_SLOTS_MAX_INPUT (64 * 1024)
#define FR_SLOT_TEXT_MAX 128

typedef enum fr_slot_kind {
    FR_SLOT_AMOUNT,
    FR_SLOT_DATE,
    FR_SLOT_DATE_PERIOD,
    FR_SLOT_TIME,
    FR_SLOT_CARD_NUMBER,
    FR_SLOT_ACCOUNT_NUMBER,
    FR_SLOT_INVOICE_NUMBER,
    FR_SLOT_COMPANY_NAME,
    FR_SLOT_PERSON_NAME,       /* a payee or account holder by context ("transfer to jo smith") */
    FR_SLOT_SHOPPING_CATEGORY, /* an expense category ("how much did I spend on groceries") */
    FR_SLOT_TIME_PERIOD,       /* a span of hours / minutes ("the last 3 hours") */
    FR_SLOT_NUMBER,            /* a bare count no other slot explains ("make it 3") */
    FR_SLOT_N_KINDS
} fr_slot_kind;

typedef enum fr_slot_role { FR_SLOT_ROLE_NONE, FR_SLOT_ROLE_FROM, FR_SLOT_ROLE_TO } fr_slot_role;

/* One extracted slot. Strings are NUL-terminated and truncated to fit. */
typedef struct fr_slot {
    fr_slot_kind kind;            /* what it is */
    fr_slot_role role;            /* from/to for dates and times, else NONE */
    const char *name;             /* static: amount, date, date_from, date_to, date_period, time,
                                     time_from, time_to, card_number, account_number,
                                     invoice_number, company_name, person_name,
                                     shopping_category, time_period, number */
    size_t start, end;            /* byte offsets [start, end) in the input */
    char text[FR_SLOT_TEXT_MAX];  /* the input span (masked for card / account numbers) */
    char value[FR_SLOT_TEXT_MAX]; /* normalised: "1200.50 USD", "2024-03-15",
                                     "2022-03-21/2022-03-27", "18:35", "************1111",
                                     "INV-2024-00123", "Acme Ltd" */
    double amount;                /* AMOUNT: the number */
    char currency[4];             /* AMOUNT: ISO 4217 code, "" when the text names none */
    int year, month, day;         /* DATE; DATE_PERIOD: first day */
    int year2, month2, day2;      /* DATE_PERIOD: last day */
    int hour, minute;             /* TIME (24-hour clock); TIME_PERIOD: start */
    int hour2, minute2;           /* TIME_PERIOD: end ("09:01/10:31" in value) */
} fr_slot;

/* The moment relative expressions are resolved against. */
typedef struct fr_slot_ref {
    int year, month, day; /* today */
    int hour, minute;     /* now */
    int forward_only;     /* 1: partial dates always resolve forward whatever the tense (the
                             convention NLU++'s annotations follow); 0: tense-aware (serving) */
} fr_slot_ref;

/* The reference for "now" in local time. */
void fr_slot_ref_now(fr_slot_ref *ref);

/* Extract slots from text[0..len) into out (at most cap), sorted by start. Returns the number
 * written, or -1 with err set (pattern compilation failure). ref NULL: the current local date. */
int fr_slots_extract(const char *text, size_t len, const fr_slot_ref *ref, fr_slot *out, int cap,
                     fr_err *err);

/* Mask s[0..n): each ASCII letter or digit except the last four of them becomes '*'; other bytes
 * are kept. Writes at most cap-1 bytes and a NUL; returns the length written. */
size_t fr_slot_mask(const char *s, size_t n, char *out, size_t cap);

#endif
