/* multipart.h — a bounded multipart/form-data parser (RFC 7578) for the audio endpoints.
 * The body is parsed in place: parts point into it. Limits: part count, header bytes of one
 * part, bytes of one part, total body bytes. Framing is CRLF only; field names may be quoted
 * ("a b", with \" and \\ escapes) or bare tokens. Errors carry a status (400, 413) and a code. */
#ifndef FRUGAL_MULTIPART_H
#define FRUGAL_MULTIPART_H

#include <stddef.h>

#define FR_MP_MAX_BOUNDARY 70 /* RFC 2046 */
#define FR_MP_MAX_NAME 128

typedef struct fr_mp_limits {
    int max_parts;          /* parts in the body */
    size_t max_header_bytes; /* header block of one part */
    size_t max_part_bytes;  /* data of one part */
    size_t max_total_bytes; /* the whole body */
} fr_mp_limits;

typedef struct fr_mp_part {
    char name[FR_MP_MAX_NAME];     /* form field name */
    char filename[FR_MP_MAX_NAME]; /* "" = none */
    char type[FR_MP_MAX_NAME];     /* Content-Type of the part, "" = none */
    const char *data;              /* into the body */
    size_t len;
} fr_mp_part;

typedef struct fr_mp_error {
    int status;       /* 400 or 413 */
    const char *code; /* "missing_boundary", "bad_multipart", "part_too_large", "too_many_parts", ... */
    char msg[200];
} fr_mp_error;

/* The boundary of a Content-Type "multipart/form-data; boundary=..." (quoted or not) into
 * out (FR_MP_MAX_BOUNDARY + 1 bytes). Returns 0, or -1 with *err (400 missing_boundary /
 * 415-style not_multipart is reported as 400 with code "not_multipart"). */
int fr_mp_boundary(const char *content_type, char *out, fr_mp_error *err);

/* Parses body into at most lim->max_parts parts (*parts malloc'd, *n set; the caller frees
 * *parts). Returns 0, or -1 with *err. */
int fr_mp_parse(const char *body, size_t len, const char *boundary, const fr_mp_limits *lim,
                fr_mp_part **parts, int *n, fr_mp_error *err);

/* The first part named `name`, or NULL. */
const fr_mp_part *fr_mp_find(const fr_mp_part *parts, int n, const char *name);

#endif
