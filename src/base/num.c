/* num.c — strict number parsers (see num.h). */
#include "base/num.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

/* strto* skip leading white space; a value written as " 5" is not a strict number. */
static bool starts_ok(const char *s) { return s && *s && !isspace((unsigned char)*s); }

bool fr_parse_long(const char *s, long lo, long hi, long *out) {
    if (!starts_ok(s)) return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool fr_parse_u64(const char *s, uint64_t *out) {
    if (!starts_ok(s) || *s == '-' || *s == '+') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > UINT64_MAX) return false;
    *out = (uint64_t)v;
    return true;
}

bool fr_parse_double(const char *s, double lo, double hi, double *out) {
    if (!starts_ok(s)) return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !(v >= lo && v <= hi)) return false;
    *out = v;
    return true;
}
