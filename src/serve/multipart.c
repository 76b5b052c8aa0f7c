/* multipart.c — see multipart.h. */
#include "serve/multipart.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int fail(fr_mp_error *e, int status, const char *code, const char *fmt, ...) {
    e->status = status;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static int is_tchar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* A parameter value at *p (quoted string or token) into out (cap bytes); advances *p.
 * Returns 0, or -1 (bad quoting, too long, empty). */
static int param_value(const char **p, const char *end, char *out, size_t cap) {
    const char *s = *p;
    size_t n = 0;
    if (s < end && *s == '"') {
        s++;
        for (;;) {
            if (s >= end) return -1;
            char c = *s++;
            if (c == '"') break;
            if (c == '\\') {
                if (s >= end) return -1;
                c = *s++;
            }
            if ((unsigned char)c < 0x20 && c != '\t') return -1;
            if (n + 1 >= cap) return -1;
            out[n++] = c;
        }
    } else {
        while (s < end && is_tchar(*s)) {
            if (n + 1 >= cap) return -1;
            out[n++] = *s++;
        }
        if (!n) return -1;
    }
    out[n] = 0;
    *p = s;
    return 0;
}

static const char *skip_ws(const char *s, const char *end) {
    while (s < end && (*s == ' ' || *s == '\t')) s++;
    return s;
}

/* The next "; key=value" of a parameter list at *p: the key span (*k, *kl) and the value into v
 * (cap bytes); *p advances past it. Returns 1, 0 at the end of the list, -1 when the list is
 * malformed, -2 when only the value is (bad quoting, empty, over cap - 1 bytes). */
static int next_param(const char **p, const char *end, const char **k, size_t *kl, char *v,
                      size_t cap) {
    const char *s = skip_ws(*p, end);
    if (s >= end) return 0;
    if (*s != ';') return -1;
    s = skip_ws(s + 1, end);
    *k = s;
    while (s < end && is_tchar(*s)) s++;
    *kl = (size_t)(s - *k);
    s = skip_ws(s, end);
    if (!*kl || s >= end || *s != '=') return -1;
    s = skip_ws(s + 1, end);
    if (param_value(&s, end, v, cap)) return -2;
    *p = s;
    return 1;
}

static bool key_is(const char *k, size_t kl, const char *name) {
    return kl == strlen(name) && !strncasecmp(k, name, kl);
}

int fr_mp_boundary(const char *ct, char *out, fr_mp_error *err) {
    if (!ct) return fail(err, 400, "not_multipart", "Content-Type is missing; send multipart/form-data");
    const char *end = ct + strlen(ct);
    const char *s = skip_ws(ct, end);
    if (strncasecmp(s, "multipart/form-data", 19))
        return fail(err, 400, "not_multipart", "Content-Type must be multipart/form-data");
    s += 19;
    const char *k;
    size_t kl;
    char v[FR_MP_MAX_BOUNDARY + 2];
    int r;
    while ((r = next_param(&s, end, &k, &kl, v, sizeof v))) {
        if (r == -1) return fail(err, 400, "bad_content_type", "malformed Content-Type parameters");
        bool is_boundary = key_is(k, kl, "boundary");
        if (r == -2)
            return fail(err, 400, is_boundary ? "bad_boundary" : "bad_content_type",
                        "malformed Content-Type parameter (the boundary is 1 to 70 characters)");
        if (is_boundary) {
            size_t n = strlen(v);
            if (n > FR_MP_MAX_BOUNDARY || (n && v[n - 1] == ' '))
                return fail(err, 400, "bad_boundary", "the boundary is 1 to 70 characters");
            memcpy(out, v, n + 1);
            return 0;
        }
    }
    return fail(err, 400, "missing_boundary", "multipart/form-data needs a boundary parameter");
}

static const char *find(const char *h, size_t hn, const char *n, size_t nn) {
    if (nn == 0 || hn < nn) return NULL;
    for (size_t i = 0; i + nn <= hn; i++) {
        const char *p = memchr(h + i, n[0], hn - nn - i + 1);
        if (!p) return NULL;
        if (!memcmp(p, n, nn)) return p;
        i = (size_t)(p - h);
    }
    return NULL;
}

/* Content-Disposition: form-data; name="..."; filename="..." */
static int disposition(const char *s, const char *end, fr_mp_part *pt, fr_mp_error *err) {
    s = skip_ws(s, end);
    if ((size_t)(end - s) < 9 || strncasecmp(s, "form-data", 9))
        return fail(err, 400, "bad_part_header", "a part's Content-Disposition must be form-data");
    s += 9;
    int have_name = 0;
    const char *k;
    size_t kl;
    char v[FR_MP_MAX_NAME];
    int r;
    while ((r = next_param(&s, end, &k, &kl, v, sizeof v))) {
        if (r == -1) return fail(err, 400, "bad_part_header", "malformed Content-Disposition");
        if (r == -2)
            return fail(err, 400, "bad_part_header",
                        "malformed Content-Disposition value (at most %d bytes)", FR_MP_MAX_NAME - 1);
        if (key_is(k, kl, "name")) {
            memcpy(pt->name, v, sizeof v);
            have_name = 1;
        } else if (key_is(k, kl, "filename")) {
            memcpy(pt->filename, v, sizeof v);
        }
    }
    if (!have_name || !pt->name[0])
        return fail(err, 400, "bad_part_header", "a part's Content-Disposition has no name");
    return 0;
}

static int part_headers(const char *s, const char *end, fr_mp_part *pt, fr_mp_error *err) {
    int have_cd = 0;
    while (s < end) {
        const char *eol = find(s, (size_t)(end - s), "\r\n", 2);
        if (!eol) eol = end;
        const char *colon = memchr(s, ':', (size_t)(eol - s));
        if (!colon || colon == s)
            return fail(err, 400, "bad_part_header", "a part header line has no name");
        for (const char *q = s; q < eol; q++)
            if ((unsigned char)*q < 0x20 && *q != '\t')
                return fail(err, 400, "bad_part_header", "a part header holds a control byte");
        for (const char *q = s; q < colon; q++)
            if (!is_tchar(*q)) return fail(err, 400, "bad_part_header", "bad part header name");
        size_t kl = (size_t)(colon - s);
        if (key_is(s, kl, "Content-Disposition")) {
            if (have_cd) return fail(err, 400, "bad_part_header", "Content-Disposition given twice");
            have_cd = 1;
            if (disposition(colon + 1, eol, pt, err)) return -1;
        } else if (key_is(s, kl, "Content-Type")) {
            const char *v = skip_ws(colon + 1, eol);
            size_t vl = (size_t)(eol - v);
            if (vl >= sizeof pt->type) vl = sizeof pt->type - 1;
            memcpy(pt->type, v, vl);
            pt->type[vl] = 0;
        }
        s = eol + 2;
    }
    if (!have_cd) return fail(err, 400, "bad_part_header", "a part has no Content-Disposition");
    return 0;
}

int fr_mp_parse(const char *body, size_t len, const char *boundary, const fr_mp_limits *lim,
                fr_mp_part **parts, int *n, fr_mp_error *err) {
    *parts = NULL;
    *n = 0;
    size_t bl = strlen(boundary);
    if (!bl || bl > FR_MP_MAX_BOUNDARY) return fail(err, 400, "bad_boundary", "bad boundary");
    if (len > lim->max_total_bytes)
        return fail(err, 413, "request_too_large", "the form is %zu bytes, over the limit of %zu",
                    len, lim->max_total_bytes);
    char delim[FR_MP_MAX_BOUNDARY + 5]; /* "\r\n--" boundary */
    snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    size_t dl = bl + 4;
    const char *end = body + len;
    const char *p;
    /* the first delimiter may open the body without its CRLF */
    if (len >= dl - 2 && !memcmp(body, delim + 2, dl - 2)) p = body + dl - 2;
    else {
        const char *f = find(body, len, delim, dl);
        if (!f) return fail(err, 400, "bad_multipart", "the body holds no boundary delimiter");
        p = f + dl;
    }
    int cap = lim->max_parts > 0 ? lim->max_parts : 1;
    fr_mp_part *out = calloc((size_t)cap, sizeof *out);
    if (!out) return fail(err, 500, "out_of_memory", "out of memory");
    int count = 0;
    for (;;) {
        /* after a delimiter: "--" closes, else optional whitespace then CRLF */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') break;
        while (p < end && (*p == ' ' || *p == '\t')) p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
            free(out);
            return fail(err, 400, "bad_multipart", "a boundary delimiter is not followed by CRLF "
                                                   "(or the closing delimiter is missing)");
        }
        p += 2;
        if (count >= cap) {
            free(out);
            return fail(err, 400, "too_many_parts", "the form has more than %d parts", cap);
        }
        fr_mp_part *pt = &out[count];
        const char *hend = NULL;
        size_t hroom = ((lim->max_header_bytes + 4) < (size_t)(end - p) ? lim->max_header_bytes + 4 : (size_t)(end - p));
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n') hend = p; /* no headers */
        else {
            const char *f = find(p, hroom, "\r\n\r\n", 4);
            if (f) hend = f + 2;
        }
        if (!hend) {
            free(out);
            if ((size_t)(end - p) > lim->max_header_bytes)
                return fail(err, 400, "part_header_too_large",
                            "a part's headers exceed %zu bytes", lim->max_header_bytes);
            return fail(err, 400, "bad_multipart", "a part's headers do not end");
        }
        if ((size_t)(hend - p) > lim->max_header_bytes) {
            free(out);
            return fail(err, 400, "part_header_too_large", "a part's headers exceed %zu bytes",
                        lim->max_header_bytes);
        }
        if (part_headers(p, hend, pt, err)) {
            free(out);
            return -1;
        }
        const char *d = hend + 2;
        const char *f = find(d, (size_t)(end - d), delim, dl);
        if (!f) {
            free(out);
            return fail(err, 400, "bad_multipart", "part %d has no closing boundary", count);
        }
        if ((size_t)(f - d) > lim->max_part_bytes) {
            int rc = fail(err, 413, "part_too_large", "part \"%.60s\" is %zu bytes, over the limit of %zu",
                          pt->name, (size_t)(f - d), lim->max_part_bytes);
            free(out); /* after the message: pt points into out */
            return rc;
        }
        pt->data = d;
        pt->len = (size_t)(f - d);
        count++;
        p = f + dl;
    }
    *parts = out;
    *n = count;
    return 0;
}

const fr_mp_part *fr_mp_find(const fr_mp_part *parts, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (!strcmp(parts[i].name, name)) return &parts[i];
    return NULL;
}
