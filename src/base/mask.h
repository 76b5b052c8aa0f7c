/* mask.h — the one masker for card and account numbers in everything that leaves the process
 * (responses, error messages, logs, the ledger, traces).
 *
 *   char line[] = "card 4111 1111 1111 1111, IBAN gb82 west 1234 5698 7654 32";
 *   fr_mask_inplace(line);   // "card **** **** **** 1111, IBAN gb** **** **** **** **54 32"
 *
 * What is masked:
 *   - card numbers: 13 to 19 digits that pass the Luhn check, written as digit groups joined by
 *     separators; every digit but the last four becomes '*';
 *   - IBANs: a country code of the IBAN registry, two check digits and the country's length of
 *     letters and digits (case-insensitive, separators allowed anywhere) whose mod-97 checksum
 *     is valid; everything but the country code and the last four characters becomes '*'.
 * How text is read: each character is read through its NFKC compatibility form (fullwidth and
 * other compatibility digits and letters count as ASCII ones; U+00A0, U+202F, U+3000 and the
 * other Unicode spaces are spaces); default-ignorable characters (U+200B-U+200D, U+2060, U+FEFF,
 * soft hyphen, ...) are skipped and combining marks belong to the character before them. A
 * separator is a run of at most FR_MASK_MAX_SEP characters from: Unicode spaces (Zs), tab, '.',
 * '/', '-', U+2010-U+2015, U+2212. A digit group is a maximal run of digits; a card candidate
 * starts at a group start and ends at a group end. There is no cap on the number of matches.
 * After masking, no Luhn-valid card candidate and no valid IBAN is left in the output, even one
 * formed by digits kept from a masked number and the text after it (tests/fuzz/fuzz_mask.c).
 *
 * What comes out: the input with only the masked characters replaced, byte for byte the same
 * length: a masked fullwidth character (U+FF01-U+FF5E) becomes U+FF0A '＊', any other masked
 * character of k bytes (with the marks on it) becomes k '*'. Invalid UTF-8 bytes become '?', so the output is always
 * valid UTF-8 of exactly the input's length. Offsets into the text stay valid.
 *
 * Thread-safety: no state; every function is reentrant. None can fail (allocation failure
 * aborts, as fr_xmalloc).
 */
#ifndef FRUGAL_BASE_MASK_H
#define FRUGAL_BASE_MASK_H

#include <stddef.h>

#define FR_MASK_MAX_SEP 16 /* longest separator run between two groups, in characters */

/* Mask in[0..n) into out (which must hold n + 1 bytes; out == in is allowed). Writes exactly n
 * bytes and a NUL. Returns the number of numbers masked. */
int fr_mask(const char *in, size_t n, char *out);

/* Mask a NUL-terminated string in place. Returns the number of numbers masked. */
int fr_mask_inplace(char *s);

/* A malloc'd masked copy of s (NULL gives NULL). */
char *fr_mask_dup(const char *s);

/* Mask a span already known to be a card or account number (the slot extractor's): every ASCII
 * letter or digit except the last `keep` of them becomes '*', other bytes are kept. Writes at
 * most cap-1 bytes and a NUL; returns the length written. */
size_t fr_mask_span(const char *s, size_t n, int keep, char *out, size_t cap);

#endif
