/* quote.h — quoting bytes from a checkpoint inside one-line error messages.
 *
 * Names and strings read from files (tensor names, architecture names, dtype strings, ...) may hold
 * newlines, control characters or invalid UTF-8, which would break the one-line, UTF-8 contract of
 * fr_err messages (they end up in logs and JSON error bodies). fr_quote copies a bounded, cleaned
 * version: control characters and bytes of invalid UTF-8 sequences become '?', and the result is
 * cut (at a character boundary) to fit the buffer, with "..." marking the cut.
 */
#ifndef FRUGAL_QUOTE_H
#define FRUGAL_QUOTE_H

#include <string.h>

#include "base/base.h"

/* Cleaned copy of the n bytes at s into buf (cap >= 8). Returns buf. */
static inline const char *fr_quote(const char *s, size_t n, char *buf, size_t cap) {
    size_t o = 0, i = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (i < n) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4 : 0;
        bool ok = k && i + k <= n && (k == 1 || fr_utf8_valid(s + i, k));
        size_t len = ok ? k : 1;
        if (o + len + 4 > cap) { /* no room for this character and "..." */
            memcpy(buf + o, "...", 3);
            o += 3;
            break;
        }
        if (!ok || c < 0x20 || c == 0x7f) buf[o++] = '?';
        else {
            memcpy(buf + o, s + i, len);
            o += len;
        }
        i += len;
    }
    buf[o] = 0;
    return buf;
}

/* The same for a NUL-terminated string. */
static inline const char *fr_quotez(const char *s, char *buf, size_t cap) {
    return fr_quote(s, strlen(s), buf, cap);
}

#endif
