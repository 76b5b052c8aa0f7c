/* conf.c — the binary's one configuration loader (see conf.h): cJSON parses; a second pass over
 * the (then known valid) text gives every node its line, so that errors found while the caller
 * walks the tree name file:line; duplicate keys are found by sorting each object's names.
 *
 * Why a pass of our own for the lines: cJSON keeps no positions. Its tree keeps the document's
 * order, so the n-th value met in the text is the n-th node of a pre-order walk of the tree.
 */
#include "base/conf.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- lines: one pass over valid JSON text ---------------------------------------------------- */

typedef struct scan {
    const char *s;  /* text */
    size_t n, i;    /* length, position */
    int line;       /* line at i */
    int *lines;     /* lines of the values met so far */
    int nl, cap;    /* count, capacity */
} scan;

/* Whitespace as cJSON reads it: every byte up to and including ' ' (so a control character
 * between tokens is skipped there too, and must be here for the counts to agree). */
static bool is_ws(char ch) { return (unsigned char)ch <= ' '; }

static void skip_ws(scan *c) {
    while (c->i < c->n && is_ws(c->s[c->i])) {
        if (c->s[c->i] == '\n') c->line++;
        c->i++;
    }
}

static void skip_string(scan *c) { /* at the opening quote */
    c->i++;
    while (c->i < c->n && c->s[c->i] != '"') {
        if (c->s[c->i] == '\n') c->line++; /* cJSON keeps a raw newline inside a string */
        c->i += c->s[c->i] == '\\' && c->i + 1 < c->n && c->s[c->i + 1] != '\n' ? 2 : 1;
    }
    c->i++;
}

static void record(scan *c, int line) {
    if (c->nl == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->lines = fr_xrealloc(c->lines, (size_t)c->cap * sizeof *c->lines);
    }
    c->lines[c->nl++] = line;
}

/* One value at c->i (after whitespace), recorded at `line` (its key's line inside an object). */
static void scan_value(scan *c, int line) {
    record(c, line);
    if (c->i >= c->n) return;
    char open = c->s[c->i];
    if (open == '"') {
        skip_string(c);
        return;
    }
    if (open != '{' && open != '[') { /* number, true, false, null */
        while (c->i < c->n && !is_ws(c->s[c->i]) && !strchr(",:]}", c->s[c->i])) c->i++;
        return;
    }
    char close = open == '{' ? '}' : ']';
    c->i++;
    for (;;) {
        skip_ws(c);
        if (c->i >= c->n || c->s[c->i] == close) break;
        int at = c->line;
        if (open == '{') {
            skip_string(c); /* the key */
            skip_ws(c);
            c->i++; /* ':' */
            skip_ws(c);
        }
        scan_value(c, at);
        skip_ws(c);
        if (c->i < c->n && c->s[c->i] == ',') c->i++;
    }
    c->i++;
}

static void collect(fr_conf_doc *d, const cJSON *it, int *cap) {
    if (d->n == *cap) {
        *cap = *cap ? 2 * *cap : 64;
        d->node = fr_xrealloc(d->node, (size_t)*cap * sizeof *d->node);
    }
    d->node[d->n++] = it;
    for (const cJSON *ch = it->child; ch; ch = ch->next) collect(d, ch, cap);
}

/* ---- duplicate keys -------------------------------------------------------------------------- */

typedef struct named {
    const char *name; /* the key */
    int order;        /* position among its siblings */
} named;

static int cmp_named(const void *a, const void *b) {
    const named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

/* The first repeated key of an object (the later occurrence), or NULL. */
static const cJSON *duplicate(const cJSON *obj) {
    int n = cJSON_GetArraySize(obj);
    if (n < 2) return NULL;
    named *v = fr_xmalloc((size_t)n * sizeof *v);
    const cJSON **by_order = fr_xmalloc((size_t)n * sizeof *by_order);
    int k = 0;
    for (const cJSON *ch = obj->child; ch && k < n; ch = ch->next, k++) {
        v[k].name = ch->string ? ch->string : "";
        v[k].order = k;
        by_order[k] = ch;
    }
    qsort(v, (size_t)k, sizeof *v, cmp_named);
    const cJSON *dup = NULL;
    int best = k;
    for (int i = 1; i < k; i++)
        if (!strcmp(v[i].name, v[i - 1].name) && v[i].order < best) best = v[i].order;
    if (best < k) dup = by_order[best];
    free(v);
    free(by_order);
    return dup;
}

/* ---- parse ----------------------------------------------------------------------------------- */

static void where(const char *text, size_t upto, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < upto; i++) {
        if (text[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

static int syntax(fr_conf_doc *d, const char *text, size_t at, fr_err *err, const char *msg) {
    int line, col;
    where(text, at, &line, &col);
    if (d->what[0]) fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s:%d:%d: %s", d->what, line, col, msg);
    else fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d:%d: %s", line, col, msg);
    cJSON_Delete(d->root);
    d->root = NULL;
    return -1;
}

int fr_conf_parse(fr_conf_doc *d, const char *text, size_t len, const char *what, fr_err *err) {
    memset(d, 0, sizeof *d);
    snprintf(d->what, sizeof d->what, "%s", what ? what : "");
    const char *nul = len ? memchr(text, 0, len) : NULL;
    if (nul) return syntax(d, text, (size_t)(nul - text), err, "a NUL byte in the text");
    const char *end = NULL;
    d->root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!d->root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return syntax(d, text, at, err, "not valid JSON here");
    }
    size_t rest = (size_t)(end - text);
    while (rest < len && is_ws(text[rest])) rest++;
    if (rest < len) return syntax(d, text, rest, err, "text after the end of the JSON object");
    if (!cJSON_IsObject(d->root)) return syntax(d, text, 0, err, "expected one JSON object {...}");
    /* every node and its line */
    int cap = 0;
    collect(d, d->root, &cap);
    scan c = {.s = text, .n = len, .i = 0, .line = 1, .lines = NULL, .nl = 0, .cap = 0};
    skip_ws(&c);
    scan_value(&c, c.line);
    if (c.nl == d->n) {
        d->line = c.lines;
    } else { /* cannot happen for text cJSON accepted; then lines are unknown, never wrong */
        free(c.lines);
        d->line = NULL;
    }
    for (int i = 0; i < d->n; i++) {
        if (!cJSON_IsObject(d->node[i])) continue;
        const cJSON *dup = duplicate(d->node[i]);
        if (dup) {
            fr_conf_fail(d, dup, dup->string, err, "key given twice in one object");
            fr_conf_free(d);
            return -1;
        }
    }
    return 0;
}

int fr_conf_load(fr_conf_doc *d, const char *path, fr_err *err) {
    memset(d, 0, sizeof *d);
    size_t len = 0;
    char *text = fr_read_file(path, FR_CONF_MAX_BYTES, &len, err);
    if (!text) return -1;
    int rc = fr_conf_parse(d, text, len, path, err);
    free(text);
    return rc;
}

void fr_conf_free(fr_conf_doc *d) {
    cJSON_Delete(d->root);
    free(d->node);
    free(d->line);
    memset(d, 0, sizeof *d);
}

int fr_conf_line(const fr_conf_doc *d, const cJSON *it) {
    if (!d->line) return 0;
    for (int i = 0; i < d->n; i++)
        if (d->node[i] == it) return d->line[i];
    return 0;
}

/* ---- messages and getters -------------------------------------------------------------------- */

int fr_conf_fail(const fr_conf_doc *d, const cJSON *it, const char *name, fr_err *err,
                 const char *fmt, ...) {
    if (!err) return -1;
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = it ? fr_conf_line(d, it) : 0;
    char at[300];
    if (line > 0 && d->what[0]) snprintf(at, sizeof at, "%.240s:%d", d->what, line);
    else if (line > 0) snprintf(at, sizeof at, "line %d", line);
    else snprintf(at, sizeof at, "%.240s", d->what[0] ? d->what : "config");
    fr_err_setc(err, FR_ERR_BAD_REQUEST, "%s: %.120s: %s", at, name && *name ? name : "(top level)", msg);
    for (char *p = err->msg; *p; p++) /* keys are the file's bytes: keep the message one line */
        if ((unsigned char)*p < 0x20) *p = '?';
    return -1;
}

int fr_conf_unknown(const fr_conf_doc *d, const cJSON *it, const char *prefix, fr_err *err) {
    char name[200];
    snprintf(name, sizeof name, "%s%s", prefix ? prefix : "", it->string ? it->string : "");
    return fr_conf_fail(d, it, name, err, "unknown key");
}

int fr_conf_num(const fr_conf_doc *d, const cJSON *it, const char *name, double lo, double hi,
                double *out, fr_err *err) {
    if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) ||
        !(it->valuedouble >= lo && it->valuedouble <= hi))
        return fr_conf_fail(d, it, name, err, "must be a number in %g..%g", lo, hi);
    *out = it->valuedouble;
    return 0;
}

int fr_conf_int(const fr_conf_doc *d, const cJSON *it, const char *name, long lo, long hi,
                long *out, fr_err *err) {
    if (!cJSON_IsNumber(it) || !(it->valuedouble >= (double)lo && it->valuedouble <= (double)hi) ||
        it->valuedouble != floor(it->valuedouble))
        return fr_conf_fail(d, it, name, err, "must be an integer in %ld..%ld", lo, hi);
    *out = (long)it->valuedouble;
    return 0;
}

int fr_conf_bool(const fr_conf_doc *d, const cJSON *it, const char *name, bool *out,
                 fr_err *err) {
    if (!cJSON_IsBool(it)) return fr_conf_fail(d, it, name, err, "must be true or false");
    *out = cJSON_IsTrue(it);
    return 0;
}

int fr_conf_str(const fr_conf_doc *d, const cJSON *it, const char *name, bool null_ok, size_t max,
                const char **out, fr_err *err) {
    if (null_ok && cJSON_IsNull(it)) {
        *out = NULL;
        return 0;
    }
    if (!cJSON_IsString(it) || !it->valuestring)
        return fr_conf_fail(d, it, name, err, null_ok ? "must be a string or null" : "must be a string");
    if (max > 0 && strlen(it->valuestring) >= max)
        return fr_conf_fail(d, it, name, err, "longer than %zu bytes", max - 1);
    *out = it->valuestring;
    return 0;
}

int fr_conf_enum(const fr_conf_doc *d, const cJSON *it, const char *name,
                 const char *const *names, int *out, fr_err *err) {
    if (cJSON_IsString(it) && it->valuestring)
        for (int i = 0; names[i]; i++)
            if (!strcmp(it->valuestring, names[i])) {
                *out = i;
                return 0;
            }
    char list[200] = "";
    size_t used = 0;
    for (int i = 0; names[i] && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s\"%s\"", i ? ", " : "", names[i]);
    return fr_conf_fail(d, it, name, err, "must be one of %s", list);
}

int fr_conf_object(const fr_conf_doc *d, const cJSON *it, const char *name, fr_err *err) {
    if (!cJSON_IsObject(it)) return fr_conf_fail(d, it, name, err, "must be an object");
    return 0;
}
