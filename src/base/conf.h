/* conf.h — the configuration format of the whole binary: one JSON object per file (RFC 8259,
 * parsed by cJSON), read through this one loader by `frugal serve --config`, the meter
 * (--meter-config, `frugal audit --config`; docs/METERING.md) and every other settings file.
 *
 * What the loader adds to cJSON: messages that name the file and the line of the offending key
 * ("serve.json:12: limits.max_tokens: must be an integer in 1..1000000"), a rejected document when
 * anything follows the object, when a key appears twice in one object or when a NUL byte is in the
 * text, and typed getters that check the JSON type and the range. Callers walk the objects
 * themselves and reject the keys they do not know (fr_conf_unknown), so a typo never silently
 * keeps a default.
 *
 * Usage:
 *     fr_conf_doc d;
 *     if (fr_conf_parse(&d, text, len, "serve.json", err)) return -1;
 *     const cJSON *it;
 *     cJSON_ArrayForEach(it, d.root) {
 *         if (!strcmp(it->string, "port")) { long p; if (fr_conf_int(&d, it, "port", 0, 65535, &p, err)) ...}
 *         else { fr_conf_unknown(&d, it, "", err); ... }
 *     }
 *     fr_conf_free(&d);
 *
 * Thread safety: a document is used by one thread at a time; distinct documents are independent.
 * Every failing function returns -1 with err set, its code FR_ERR_BAD_REQUEST for a bad document
 * (fr_conf_load keeps fr_read_file's code: FR_ERR_NOT_FOUND for a missing file, FR_ERR_TOO_LARGE
 * over FR_CONF_MAX_BYTES); none of them allocates on failure.
 */
#ifndef FRUGAL_BASE_CONF_H
#define FRUGAL_BASE_CONF_H

#include <stdbool.h>
#include <stddef.h>

#include "base/base.h"

typedef struct cJSON cJSON;

#define FR_CONF_MAX_BYTES (1u << 20) /* the largest settings file fr_conf_load reads */

typedef struct fr_conf_doc {
    cJSON *root;          /* the parsed top-level object (owned) */
    char what[256];       /* the source named in messages (a file name), "" = none */
    int n;                /* nodes located */
    const cJSON **node;   /* (n) every node of the tree in document order */
    int *line;            /* (n) 1-based line of each node: its key's, or its own in an array */
} fr_conf_doc;

/* Parses `len` bytes of text (need not be NUL-terminated) as one JSON object. -1 with err
 * "<what>:<line>:<col>: …" on a syntax error, a NUL byte, trailing text, a top level that is not an
 * object, or a key repeated in one object. On success d owns the tree (fr_conf_free). */
int fr_conf_parse(fr_conf_doc *d, const char *text, size_t len, const char *what, fr_err *err);
/* Reads `path` (at most FR_CONF_MAX_BYTES) and parses it, naming the file in messages. */
int fr_conf_load(fr_conf_doc *d, const char *path, fr_err *err);
void fr_conf_free(fr_conf_doc *d);

/* The 1-based line of `it` in the document's text, 0 when it is not from this document. */
int fr_conf_line(const fr_conf_doc *d, const cJSON *it);
/* Sets err to "<what>:<line>: <name>: <message>" for the node `it` (name = its dotted path as the
 * caller knows it). Returns -1 so that callers can `return fr_conf_fail(...)`. */
int fr_conf_fail(const fr_conf_doc *d, const cJSON *it, const char *name, fr_err *err,
                 const char *fmt, ...) FR_PRINTF(5, 6);
/* "unknown key" for it: the message names `prefix` + its key (prefix "" or "section."). */
int fr_conf_unknown(const fr_conf_doc *d, const cJSON *it, const char *prefix, fr_err *err);

/* Typed getters: 0 and *out set, or -1 with err naming the file, line and `name`. */
int fr_conf_num(const fr_conf_doc *d, const cJSON *it, const char *name, double lo, double hi,
                double *out, fr_err *err); /* a finite JSON number in [lo, hi] */
int fr_conf_int(const fr_conf_doc *d, const cJSON *it, const char *name, long lo, long hi,
                long *out, fr_err *err); /* an integral JSON number in [lo, hi] */
int fr_conf_bool(const fr_conf_doc *d, const cJSON *it, const char *name, bool *out,
                 fr_err *err); /* true or false */
/* A JSON string (its bytes, borrowed from the tree) or, when null_ok, null (*out = NULL); a
 * string of `max` bytes or more is refused when max > 0. */
int fr_conf_str(const fr_conf_doc *d, const cJSON *it, const char *name, bool null_ok, size_t max,
                const char **out, fr_err *err);
/* A JSON string equal to one of `names` (NULL-terminated); *out = its index. */
int fr_conf_enum(const fr_conf_doc *d, const cJSON *it, const char *name,
                 const char *const *names, int *out, fr_err *err);
/* A JSON object (the caller walks its members). */
int fr_conf_object(const fr_conf_doc *d, const cJSON *it, const char *name, fr_err *err);

#endif
