/* num.h — strict number parsers for command-line and configuration values.
 *
 * Each parser accepts the whole string or nothing: no leading or trailing junk (strtol's leading
 * white space is refused too), no empty string, no overflow, and the value must lie in [lo, hi].
 * On failure *out is left unchanged and false is returned; the caller words the message.
 * Thread-safe (errno is thread-local); no allocation.
 */
#ifndef FRUGAL_BASE_NUM_H
#define FRUGAL_BASE_NUM_H

#include <stdbool.h>
#include <stdint.h>

/* A decimal integer in [lo, hi] ("-3", "+7", "42"). */
bool fr_parse_long(const char *s, long lo, long hi, long *out);

/* A non-negative decimal integer up to UINT64_MAX (seeds, counts); a sign is refused. */
bool fr_parse_u64(const char *s, uint64_t *out);

/* A finite decimal or exponent number in [lo, hi] (NaN is never in range). */
bool fr_parse_double(const char *s, double lo, double hi, double *out);

#endif
