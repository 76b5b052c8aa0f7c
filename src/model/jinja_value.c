/* jinja_value.c — arena, errors, Unicode helpers and Python value semantics for the chat-template
 * interpreter: truthiness, ==, ordering, str(), repr(), json.dumps() and conversion from cJSON.
 *
 * Design: values mirror the Python objects jinja2 would see when transformers renders a chat
 * (dict/list/str/int/float/bool/None from json.loads, jinja2's Undefined, namespace()). The text
 * forms follow CPython exactly where a chat template can observe them: repr(float) is the
 * shortest round-trip form with CPython's switch to exponent notation, repr(str) picks quotes and
 * escapes as CPython does (printability from utf8proc's Unicode categories), and json.dumps
 * follows the encoder transformers' tojson filter calls (ensure_ascii, indent, separators,
 * sort_keys). See jinja_impl.h for the memory and error model.
 */
#include "model/jinja_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- errors ------------------------------------------------------------------------------- */

void fr_jj_fail_msg(jj_core *c, const char *msg) {
    if (c->err) {
        /* keep it one line */
        size_t i = 0;
        for (; msg[i] && i + 1 < sizeof c->err->msg; i++) {
            unsigned char ch = (unsigned char)msg[i];
            c->err->msg[i] = (ch < 0x20 || ch == 0x7f) ? ' ' : (char)ch;
        }
        c->err->msg[i] = 0;
    }
    longjmp(*c->jb, 1);
}

FR_NORETURN static void fail_fmt(jj_core *c, const char *pre, int line, const char *post,
                                 const char *fmt, va_list ap) {
    char body[400], msg[600];
    vsnprintf(body, sizeof body, fmt, ap);
    if (line > 0)
        snprintf(msg, sizeof msg, "%s (line %d): %s%s", pre, line, body, post);
    else
        snprintf(msg, sizeof msg, "%s: %s%s", pre, body, post);
    fr_jj_fail_msg(c, msg);
}

void fr_jj_fail(jj_core *c, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_fmt(c, "chat template error", line, "", fmt, ap);
    va_end(ap);
}

void fr_jj_fail_syntax(jj_core *c, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_fmt(c, "chat template syntax error", line, "; " JJ_HINT, fmt, ap);
    va_end(ap);
}

void fr_jj_fail_unsup(jj_core *c, int line, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fail_fmt(c, "chat template uses an unsupported construct", line, "; " JJ_HINT, fmt, ap);
    va_end(ap);
}

void fr_jj_charge(jj_core *c, uint64_t units) {
    c->steps += units;
    if (c->steps > JJ_MAX_STEPS)
        fr_jj_fail(c, 0, "rendering takes too long (more than %d steps)", JJ_MAX_STEPS);
}

/* ---- arena -------------------------------------------------------------------------------- */

#define ARENA_CHUNK (64u << 10)
#define ARENA_ALIGN 16u

static void *alloc_raw(jj_core *c, size_t n);

void *fr_jj_alloc(jj_core *c, size_t n) {
    void *p = alloc_raw(c, n);
    memset(p, 0, n);
    return p;
}

static void *alloc_raw(jj_core *c, size_t n) {
    jj_arena *a = c->ar;
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need < n) fr_jj_fail(c, 0, "out of memory");
    jj_chunk *h = a->head;
    if (!h || h->size - h->used < need) {
        size_t size = need > ARENA_CHUNK ? need : ARENA_CHUNK;
        if (size > JJ_MAX_MEMORY || a->total + size > JJ_MAX_MEMORY)
            fr_jj_fail(c, 0, "rendering needs more than %u MiB of memory", JJ_MAX_MEMORY >> 20);
        h = malloc(sizeof *h + size);
        if (!h) fr_jj_fail(c, 0, "out of memory");
        h->next = a->head;
        h->size = size;
        h->used = 0;
        h->last = 0;
        a->head = h;
        a->total += size;
    }
    char *p = (char *)h->data + h->used;
    h->last = h->used;
    h->used += need;
    return p;
}

void *fr_jj_grow(jj_core *c, void *p, size_t old, size_t n) {
    if (!p) return alloc_raw(c, n);
    if (n <= old) return p;
    jj_chunk *h = c->ar->head;
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (h && (char *)p == (char *)h->data + h->last && need >= n && h->size - h->last >= need) {
        h->used = h->last + need; /* the last allocation grows in place */
        return p;
    }
    void *q = alloc_raw(c, n);
    memcpy(q, p, old);
    return q;
}

void fr_jj_arena_free(jj_arena *a) {
    jj_chunk *h = a->head;
    while (h) {
        jj_chunk *nx = h->next;
        free(h);
        h = nx;
    }
    a->head = NULL;
    a->total = 0;
}

jj_str fr_jj_strdup(jj_core *c, const char *p, size_t n) {
    char *q = fr_jj_alloc(c, n + 1);
    if (n) memcpy(q, p, n);
    jj_str s = {q, n};
    return s;
}

char *fr_jj_cstr(jj_core *c, jj_str s) { return (char *)fr_jj_strdup(c, s.p, s.n).p; }

/* ---- Unicode ------------------------------------------------------------------------------ */

uint32_t fr_jj_utf8_next(const char *s, size_t n, size_t *i) {
    const unsigned char *p = (const unsigned char *)s + *i;
    size_t left = n - *i;
    unsigned b = p[0];
    if (b < 0x80) {
        (*i)++;
        return b;
    }
    uint32_t cp;
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
        cp = b & 0x1F;
    } else if (b >= 0xE0 && b <= 0xEF) {
        len = 3;
        cp = b & 0x0F;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        len = 4;
        cp = b & 0x07;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        (*i)++;
        return 0xDC00 + b;
    }
    if (left < len) {
        (*i)++;
        return 0xDC00 + b;
    }
    for (size_t k = 1; k < len; k++) {
        unsigned cb = p[k];
        if (cb < (k == 1 ? lo : 0x80) || cb > (k == 1 ? hi : 0xBF)) {
            (*i)++;
            return 0xDC00 + b;
        }
        cp = (cp << 6) | (cb & 0x3F);
    }
    *i += len;
    return cp;
}

size_t fr_jj_utf8_put(char *o, uint32_t cp) {
    unsigned char *out = (unsigned char *)o;
    if (cp >= 0xDC80 && cp <= 0xDCFF) {
        out[0] = (unsigned char)(cp - 0xDC00);
        return 1;
    }
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

size_t fr_jj_ascii_run(const char *p, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { /* eight bytes at a time */
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull) break;
    }
    while (i < n && (unsigned char)p[i] < 0x80) i++;
    return i;
}

size_t fr_jj_utf8_len(jj_str s) {
    size_t n = 0, i = 0;
    while (i < s.n) {
        size_t a = fr_jj_ascii_run(s.p + i, s.n - i);
        n += a;
        i += a;
        if (i < s.n) {
            fr_jj_utf8_next(s.p, s.n, &i);
            n++;
        }
    }
    return n;
}

bool fr_jj_py_isspace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
        cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---- string builder ----------------------------------------------------------------------- */

void fr_jj_sb_put(jj_core *c, jj_sb *b, const char *p, size_t n) {
    if (!n) return;
    size_t limit = b->limit ? b->limit : JJ_MAX_STRING;
    if (n > limit || b->n > limit - n) {
        if (limit == JJ_MAX_OUTPUT && b->limit == JJ_MAX_OUTPUT)
            fr_jj_fail(c, 0, "the rendered prompt exceeds %u MiB", JJ_MAX_OUTPUT >> 20);
        fr_jj_fail(c, 0, "a string exceeds %zu MiB", limit >> 20);
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : (n > 48 ? n + 16 : 64);
        while (cap < b->n + n) cap *= 2;
        if (b->heap) {
            char *q = realloc(b->p, cap);
            if (!q) fr_jj_fail(c, 0, "out of memory");
            b->p = q;
        } else {
            b->p = fr_jj_grow(c, b->p, b->cap, cap);
        }
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

void fr_jj_sb_puts(jj_core *c, jj_sb *b, const char *z) { fr_jj_sb_put(c, b, z, strlen(z)); }
void fr_jj_sb_putc(jj_core *c, jj_sb *b, char ch) { fr_jj_sb_put(c, b, &ch, 1); }
void fr_jj_sb_putcp(jj_core *c, jj_sb *b, uint32_t cp) {
    char tmp[4];
    fr_jj_sb_put(c, b, tmp, fr_jj_utf8_put(tmp, cp));
}

/* ---- values ------------------------------------------------------------------------------- */

jj_val fr_jj_list_new(jj_core *c, size_t n, bool tuple) {
    jj_list *l = fr_jj_alloc(c, sizeof *l);
    if (n > JJ_MAX_MEMORY / sizeof(jj_val)) fr_jj_fail(c, 0, "list too long");
    l->n = n;
    l->v = n ? fr_jj_alloc(c, n * sizeof(jj_val)) : NULL;
    jj_val v = {0};
    v.t = JT_LIST;
    v.flags = tuple ? JF_TUPLE : 0;
    v.u.l = l;
    return v;
}

jj_val fr_jj_dict_new(jj_core *c, size_t n) {
    jj_dict *d = fr_jj_alloc(c, sizeof *d);
    if (n > JJ_MAX_MEMORY / sizeof(jj_val)) fr_jj_fail(c, 0, "dict too large");
    d->n = n;
    d->k = n ? fr_jj_alloc(c, n * sizeof(jj_val)) : NULL;
    d->v = n ? fr_jj_alloc(c, n * sizeof(jj_val)) : NULL;
    jj_val v = {0};
    v.t = JT_DICT;
    v.u.d = d;
    return v;
}

const char *fr_jj_type_name(const jj_val *v) {
    switch (v->t) {
    case JT_UNDEF: return "Undefined";
    case JT_NONE: return "NoneType";
    case JT_BOOL: return "bool";
    case JT_INT: return "int";
    case JT_FLOAT: return "float";
    case JT_STR: return "str";
    case JT_LIST:
        if (v->flags & JF_VIEW)
            return v->u.l->view == 0 ? "dict_keys"
                : v->u.l->view == 1  ? "dict_values"
                                     : "dict_items";
        return (v->flags & JF_TUPLE) ? "tuple" : (v->flags & JF_RANGE) ? "range" : "list";
    case JT_DICT: return "dict";
    case JT_NS: return "Namespace";
    case JT_FUNC: return "function";
    case JT_LOOP: return "LoopContext";
    case JT_GEN: return "generator";
    }
    return "object";
}

bool fr_jj_truthy(const jj_val *v) {
    switch (v->t) {
    case JT_UNDEF:
    case JT_NONE: return false;
    case JT_BOOL: return v->u.b;
    case JT_INT: return v->u.i != 0;
    case JT_FLOAT: return v->u.f != 0.0;
    case JT_STR: return v->u.s.n != 0;
    case JT_LIST: return v->u.l->n != 0;
    case JT_DICT: return v->u.d->n != 0;
    default: return true;
    }
}

bool fr_jj_is_num(const jj_val *v) { return v->t == JT_BOOL || v->t == JT_INT || v->t == JT_FLOAT; }

double fr_jj_num(const jj_val *v) {
    if (v->t == JT_BOOL) return v->u.b;
    if (v->t == JT_INT) return (double)v->u.i;
    return v->u.f;
}

static int64_t as_i64(const jj_val *v) { return v->t == JT_BOOL ? v->u.b : v->u.i; }

/* Exact Python comparison of numbers: -1, 0, 1 (2 if either is NaN). */
static int num_cmp(const jj_val *a, const jj_val *b) {
    if (a->t != JT_FLOAT && b->t != JT_FLOAT) {
        int64_t x = as_i64(a), y = as_i64(b);
        return x < y ? -1 : x > y;
    }
    if (a->t == JT_FLOAT && b->t == JT_FLOAT) {
        double x = a->u.f, y = b->u.f;
        if (isnan(x) || isnan(y)) return 2;
        return x < y ? -1 : x > y;
    }
    /* int against float: compare exactly */
    bool flip = a->t == JT_FLOAT;
    int64_t i = flip ? as_i64(b) : as_i64(a);
    double f = flip ? a->u.f : b->u.f;
    int r;
    if (isnan(f)) return 2;
    if (f >= 9223372036854775808.0) r = -1;
    else if (f < -9223372036854775808.0) r = 1;
    else {
        double fl = floor(f);
        int64_t fi = (int64_t)fl;
        if (i < fi) r = -1;
        else if (i > fi) r = 1;
        else r = (f > fl) ? -1 : 0;
    }
    return flip ? -r : r;
}

static bool equal_d(jj_core *c, const jj_val *a, const jj_val *b, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) fr_jj_fail(c, 0, "values nested too deeply");
    fr_jj_charge(c, 1); /* shared substructures can make a small value huge to walk */
    if (fr_jj_is_num(a) && fr_jj_is_num(b)) return num_cmp(a, b) == 0;
    if (a->t != b->t) return false;
    switch (a->t) {
    case JT_UNDEF:
    case JT_NONE: return true;
    case JT_STR: fr_jj_charge(c, a->u.s.n / 64); return jj_str_eq(a->u.s, b->u.s);
    case JT_LIST: {
        if ((a->flags & (JF_TUPLE | JF_RANGE | JF_VIEW)) !=
            (b->flags & (JF_TUPLE | JF_RANGE | JF_VIEW)))
            return false;
        if (a->u.l == b->u.l) return true; /* CPython compares items by identity first */
        if (a->u.l->n != b->u.l->n) return false;
        fr_jj_charge(c, a->u.l->n / 16);
        for (size_t i = 0; i < a->u.l->n; i++)
            if (!equal_d(c, &a->u.l->v[i], &b->u.l->v[i], depth + 1)) return false;
        return true;
    }
    case JT_DICT: {
        const jj_dict *x = a->u.d, *y = b->u.d;
        if (x == y) return true;
        if (x->n != y->n) return false;
        for (size_t i = 0; i < x->n; i++) {
            const jj_val *o = fr_jj_dict_get(c, y, &x->k[i]);
            if (!o || !equal_d(c, &x->v[i], o, depth + 1)) return false;
        }
        return true;
    }
    case JT_NS: return a->u.ns == b->u.ns;
    case JT_FUNC: return a->u.fn == b->u.fn;
    case JT_LOOP: return a->u.loop == b->u.loop;
    case JT_GEN: return a->u.gen == b->u.gen;
    default: return false;
    }
}

bool fr_jj_equal(jj_core *c, const jj_val *a, const jj_val *b) { return equal_d(c, a, b, 0); }

static int compare_d(jj_core *c, int line, const jj_val *a, const jj_val *b, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) fr_jj_fail(c, line, "values nested too deeply");
    fr_jj_charge(c, 1);
    if (fr_jj_is_num(a) && fr_jj_is_num(b)) {
        int r = num_cmp(a, b);
        return r == 2 ? 2 : r; /* NaN: every ordering is false */
    }
    if (a->t == JT_UNDEF || b->t == JT_UNDEF) {
        const jj_val *u = a->t == JT_UNDEF ? a : b;
        if (u->u.s.n) fr_jj_fail(c, line, "%.*s", (int)u->u.s.n, u->u.s.p);
        fr_jj_fail(c, line, "an undefined value cannot be compared");
    }
    if (a->t == JT_STR && b->t == JT_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        fr_jj_charge(c, n / 64);
        int r = n ? memcmp(a->u.s.p, b->u.s.p, n) : 0;
        if (r) return r < 0 ? -1 : 1;
        return a->u.s.n < b->u.s.n ? -1 : a->u.s.n > b->u.s.n;
    }
    if (a->t == JT_LIST && b->t == JT_LIST && (a->flags & JF_TUPLE) == (b->flags & JF_TUPLE) &&
        !((a->flags | b->flags) & (JF_RANGE | JF_VIEW))) {
        const jj_list *x = a->u.l, *y = b->u.l;
        size_t n = x->n < y->n ? x->n : y->n;
        for (size_t i = 0; i < n; i++)
            if (!equal_d(c, &x->v[i], &y->v[i], depth + 1))
                return compare_d(c, line, &x->v[i], &y->v[i], depth + 1);
        return x->n < y->n ? -1 : x->n > y->n;
    }
    fr_jj_fail(c, line, "ordering comparison not supported between instances of '%s' and '%s'",
               fr_jj_type_name(a), fr_jj_type_name(b));
}

int fr_jj_compare(jj_core *c, int line, const jj_val *a, const jj_val *b) {
    return compare_d(c, line, a, b, 0);
}

jj_val *fr_jj_dict_get(jj_core *c, const jj_dict *d, const jj_val *key) {
    fr_jj_charge(c, d->n / 32);
    if (key->t == JT_STR) {
        fr_jj_charge(c, key->u.s.n / 64);
        for (size_t i = d->n; i-- > 0;)
            if (d->k[i].t == JT_STR && jj_str_eq(d->k[i].u.s, key->u.s)) return &d->v[i];
        return NULL;
    }
    for (size_t i = d->n; i-- > 0;)
        if (fr_jj_equal(c, &d->k[i], key)) return &d->v[i];
    return NULL;
}

jj_val *fr_jj_dict_getz(const jj_dict *d, const char *key) {
    for (size_t i = d->n; i-- > 0;)
        if (d->k[i].t == JT_STR && jj_str_eqz(d->k[i].u.s, key)) return &d->v[i];
    return NULL;
}

/* ---- text forms --------------------------------------------------------------------------- */

void fr_jj_float_repr(double x, char out[40]) {
    if (isnan(x)) {
        strcpy(out, "nan");
        return;
    }
    if (isinf(x)) {
        strcpy(out, x < 0 ? "-inf" : "inf");
        return;
    }
    if (x == 0) {
        strcpy(out, signbit(x) ? "-0.0" : "0.0");
        return;
    }
    char buf[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    /* buf: [-]d[.ddd]e[+-]XX */
    char digits[24];
    int nd = 0;
    const char *p = buf;
    bool neg = false;
    if (*p == '-') {
        neg = true;
        p++;
    }
    for (; *p && *p != 'e'; p++)
        if (*p >= '0' && *p <= '9') digits[nd++] = *p;
    int exp = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    char *o = out;
    if (neg) *o++ = '-';
    if (exp >= -5 + 1 && exp < 16) {
        if (exp >= 0) {
            for (int i = 0; i <= exp; i++) *o++ = i < nd ? digits[i] : '0';
            *o++ = '.';
            if (nd > exp + 1)
                for (int i = exp + 1; i < nd; i++) *o++ = digits[i];
            else
                *o++ = '0';
        } else {
            *o++ = '0';
            *o++ = '.';
            for (int i = 0; i < -exp - 1; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

static bool py_isprintable(uint32_t cp) {
    if (cp < 0x80) return cp >= 0x20 && cp < 0x7f;
    if (cp >= 0xD800 && cp <= 0xDFFF) return false;
    if (cp > 0x10FFFF) return false;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
    }
}

static void repr_str(jj_core *c, jj_sb *b, jj_str s) {
    bool has_sq = memchr(s.p, '\'', s.n) != NULL, has_dq = memchr(s.p, '"', s.n) != NULL;
    char q = (has_sq && !has_dq) ? '"' : '\'';
    fr_jj_charge(c, s.n / 64);
    fr_jj_sb_putc(c, b, q);
    size_t i = 0;
    while (i < s.n) {
        uint32_t cp = fr_jj_utf8_next(s.p, s.n, &i);
        char tmp[16];
        if (cp == (uint32_t)q || cp == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)cp;
            fr_jj_sb_put(c, b, tmp, 2);
        } else if (cp == '\t')
            fr_jj_sb_puts(c, b, "\\t");
        else if (cp == '\n')
            fr_jj_sb_puts(c, b, "\\n");
        else if (cp == '\r')
            fr_jj_sb_puts(c, b, "\\r");
        else if (py_isprintable(cp))
            fr_jj_sb_putcp(c, b, cp);
        else {
            if (cp <= 0xff)
                snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)cp);
            else if (cp <= 0xffff) snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            else snprintf(tmp, sizeof tmp, "\\U%08x", (unsigned)cp);
            fr_jj_sb_puts(c, b, tmp);
        }
    }
    fr_jj_sb_putc(c, b, q);
}

void fr_jj_repr(jj_core *c, jj_sb *b, const jj_val *v, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) fr_jj_fail(c, 0, "values nested too deeply");
    fr_jj_charge(c, 1);
    switch (v->t) {
    case JT_UNDEF: fr_jj_sb_puts(c, b, "Undefined"); return;
    case JT_STR:
        if (v->flags & JF_MARKUP) fr_jj_sb_puts(c, b, "Markup(");
        repr_str(c, b, v->u.s);
        if (v->flags & JF_MARKUP) fr_jj_sb_putc(c, b, ')');
        return;
    case JT_LIST: {
        bool tup = v->flags & JF_TUPLE;
        if (v->flags & JF_RANGE) {
            char tmp[80];
            const jj_list *l = v->u.l;
            if (l->step == 1)
                snprintf(tmp, sizeof tmp, "range(%lld, %lld)", (long long)l->start,
                         (long long)l->stop);
            else
                snprintf(tmp, sizeof tmp, "range(%lld, %lld, %lld)", (long long)l->start,
                         (long long)l->stop, (long long)l->step);
            fr_jj_sb_puts(c, b, tmp);
            return;
        }
        if (v->flags & JF_VIEW) {
            fr_jj_sb_puts(c, b, fr_jj_type_name(v));
            fr_jj_sb_putc(c, b, '(');
        }
        fr_jj_sb_putc(c, b, tup ? '(' : '[');
        for (size_t i = 0; i < v->u.l->n; i++) {
            if (i) fr_jj_sb_puts(c, b, ", ");
            fr_jj_repr(c, b, &v->u.l->v[i], depth + 1);
        }
        if (tup && v->u.l->n == 1) fr_jj_sb_putc(c, b, ',');
        fr_jj_sb_putc(c, b, tup ? ')' : ']');
        if (v->flags & JF_VIEW) fr_jj_sb_putc(c, b, ')');
        return;
    }
    case JT_DICT:
        fr_jj_sb_putc(c, b, '{');
        for (size_t i = 0; i < v->u.d->n; i++) {
            if (i) fr_jj_sb_puts(c, b, ", ");
            fr_jj_repr(c, b, &v->u.d->k[i], depth + 1);
            fr_jj_sb_puts(c, b, ": ");
            fr_jj_repr(c, b, &v->u.d->v[i], depth + 1);
        }
        fr_jj_sb_putc(c, b, '}');
        return;
    case JT_NS:
        fr_jj_sb_puts(c, b, "<Namespace {");
        for (size_t i = 0; i < v->u.ns->n; i++) {
            if (i) fr_jj_sb_puts(c, b, ", ");
            repr_str(c, b, v->u.ns->k[i]);
            fr_jj_sb_puts(c, b, ": ");
            fr_jj_repr(c, b, &v->u.ns->v[i], depth + 1);
        }
        fr_jj_sb_puts(c, b, "}>");
        return;
    default: fr_jj_to_str(c, b, v); return;
    }
}

void fr_jj_to_str(jj_core *c, jj_sb *b, const jj_val *v) {
    char tmp[48];
    switch (v->t) {
    case JT_UNDEF: return;
    case JT_NONE: fr_jj_sb_puts(c, b, "None"); return;
    case JT_BOOL: fr_jj_sb_puts(c, b, v->u.b ? "True" : "False"); return;
    case JT_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        fr_jj_sb_puts(c, b, tmp);
        return;
    case JT_FLOAT:
        fr_jj_float_repr(v->u.f, tmp);
        fr_jj_sb_puts(c, b, tmp);
        return;
    case JT_STR: fr_jj_sb_put(c, b, v->u.s.p, v->u.s.n); return;
    case JT_LIST:
    case JT_DICT:
    case JT_NS: fr_jj_repr(c, b, v, 0); return;
    case JT_FUNC: {
        /* as Python prints them, with a fixed stand-in for addresses */
        const jj_func *fn = v->u.fn;
        jj_str nm = fn->name;
        if (fn->kind == JFN_MACRO) {
            fr_jj_sb_puts(c, b, "<Macro '");
            fr_jj_sb_put(c, b, nm.p, nm.n);
            fr_jj_sb_puts(c, b, "'>");
        } else if (fn->kind == JFN_GLOBAL) {
            if (jj_str_eqz(nm, "range") || jj_str_eqz(nm, "dict")) {
                fr_jj_sb_puts(c, b, "<class '");
                fr_jj_sb_put(c, b, nm.p, nm.n);
                fr_jj_sb_puts(c, b, "'>");
            } else if (jj_str_eqz(nm, "namespace")) {
                fr_jj_sb_puts(c, b, "<class 'jinja2.utils.Namespace'>");
            } else {
                fr_jj_sb_puts(c, b, "<function ");
                fr_jj_sb_put(c, b, nm.p, nm.n);
                fr_jj_sb_puts(c, b, " at 0x7f0000000000>");
            }
        } else if (fn->kind == JFN_LOOP) {
            fr_jj_sb_puts(c, b, "<bound method LoopContext.");
            fr_jj_sb_put(c, b, nm.p, nm.n);
            fr_jj_sb_puts(c, b, " of ");
            fr_jj_to_str(c, b, &fn->self);
            fr_jj_sb_putc(c, b, '>');
        } else {
            fr_jj_sb_puts(c, b, "<built-in method ");
            fr_jj_sb_put(c, b, nm.p, nm.n);
            fr_jj_sb_puts(c, b, " of ");
            fr_jj_sb_puts(c, b, fr_jj_type_name(&fn->self));
            fr_jj_sb_puts(c, b, " object at 0x7f0000000000>");
        }
        return;
    }
    case JT_LOOP:
        snprintf(tmp, sizeof tmp, "<LoopContext %zu/%zu>", v->u.loop->i + 1, v->u.loop->npass);
        fr_jj_sb_puts(c, b, tmp);
        return;
    case JT_GEN: fr_jj_sb_puts(c, b, v->u.gen->repr); return;
    }
}

jj_str fr_jj_str_of(jj_core *c, const jj_val *v) {
    if (v->t == JT_STR) return v->u.s;
    jj_sb b = {0};
    fr_jj_to_str(c, &b, v);
    return jj_sb_str(&b);
}

/* ---- json.dumps --------------------------------------------------------------------------- */

static void json_str(jj_core *c, jj_sb *b, jj_str s, bool ensure_ascii) {
    static const char hex[] = "0123456789abcdef";
    fr_jj_charge(c, s.n / 64);
    fr_jj_sb_putc(c, b, '"');
    size_t i = 0, run = 0;
    while (i < s.n) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\' && ch < 0x80) {
            /* copy runs of plain ASCII at once */
            run = i;
            while (i < s.n) {
                ch = (unsigned char)s.p[i];
                if (ch < 0x20 || ch == '"' || ch == '\\' || ch >= 0x80) break;
                i++;
            }
            fr_jj_sb_put(c, b, s.p + run, i - run);
            continue;
        }
        size_t start = i;
        uint32_t cp = fr_jj_utf8_next(s.p, s.n, &i);
        char tmp[16];
        switch (cp) {
        case '"': fr_jj_sb_puts(c, b, "\\\""); continue;
        case '\\': fr_jj_sb_puts(c, b, "\\\\"); continue;
        case '\n': fr_jj_sb_puts(c, b, "\\n"); continue;
        case '\r': fr_jj_sb_puts(c, b, "\\r"); continue;
        case '\t': fr_jj_sb_puts(c, b, "\\t"); continue;
        case '\b': fr_jj_sb_puts(c, b, "\\b"); continue;
        case '\f': fr_jj_sb_puts(c, b, "\\f"); continue;
        default: break;
        }
        if (cp < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)cp);
            fr_jj_sb_puts(c, b, tmp);
        } else if (!ensure_ascii) {
            fr_jj_sb_put(c, b, s.p + start, i - start);
        } else if (cp < 0x10000) {
            char u[6] = {
                '\\',        'u', hex[(cp >> 12) & 15], hex[(cp >> 8) & 15], hex[(cp >> 4) & 15],
                hex[cp & 15]};
            fr_jj_sb_put(c, b, u, 6);
        } else {
            uint32_t v = cp - 0x10000, hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
            snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", (unsigned)hi, (unsigned)lo);
            fr_jj_sb_puts(c, b, tmp);
        }
    }
    fr_jj_sb_putc(c, b, '"');
}

static void json_float(jj_core *c, jj_sb *b, double f) {
    char tmp[48];
    if (isnan(f))
        fr_jj_sb_puts(c, b, "NaN");
    else if (isinf(f))
        fr_jj_sb_puts(c, b, f < 0 ? "-Infinity" : "Infinity");
    else {
        fr_jj_float_repr(f, tmp);
        fr_jj_sb_puts(c, b, tmp);
    }
}

static void json_newline(jj_core *c, jj_sb *b, const jj_json_opts *o, int level) {
    fr_jj_sb_putc(c, b, '\n');
    for (int i = 0; i < level; i++) fr_jj_sb_put(c, b, o->indent.p, o->indent.n);
}

/* Stable merge sort of indexes by key (for sort_keys). */
static void sort_idx(jj_core *c, int line, size_t *ix, size_t *tmp, size_t n, const jj_val *keys) {
    if (n < 2) return;
    size_t h = n / 2;
    sort_idx(c, line, ix, tmp, h, keys);
    sort_idx(c, line, ix + h, tmp, n - h, keys);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        fr_jj_charge(c, 1);
        if (fr_jj_compare(c, line, &keys[ix[j]], &keys[ix[i]]) < 0)
            tmp[k++] = ix[j++];
        else
            tmp[k++] = ix[i++];
    }
    while (i < h) tmp[k++] = ix[i++];
    while (j < n) tmp[k++] = ix[j++];
    memcpy(ix, tmp, n * sizeof *ix);
}

static void json_val(jj_core *c, int line, jj_sb *b, const jj_val *v, const jj_json_opts *o,
                     int level) {
    char tmp[48];
    if (level > JJ_MAX_VALUE_DEPTH) fr_jj_fail(c, line, "values nested too deeply for tojson");
    fr_jj_charge(c, 1);
    switch (v->t) {
    case JT_NONE: fr_jj_sb_puts(c, b, "null"); return;
    case JT_BOOL: fr_jj_sb_puts(c, b, v->u.b ? "true" : "false"); return;
    case JT_INT:
        snprintf(tmp, sizeof tmp, "%lld", (long long)v->u.i);
        fr_jj_sb_puts(c, b, tmp);
        return;
    case JT_FLOAT: json_float(c, b, v->u.f); return;
    case JT_STR: json_str(c, b, v->u.s, o->ensure_ascii); return;
    case JT_LIST: {
        const jj_list *l = v->u.l;
        if (v->flags & (JF_RANGE | JF_VIEW))
            fr_jj_fail(c, line, "tojson: object of type %s is not JSON serializable",
                       fr_jj_type_name(v));
        if (!l->n) {
            fr_jj_sb_puts(c, b, "[]");
            return;
        }
        fr_jj_sb_putc(c, b, '[');
        for (size_t i = 0; i < l->n; i++) {
            if (i) fr_jj_sb_put(c, b, o->item_sep.p, o->item_sep.n);
            if (o->has_indent) json_newline(c, b, o, level + 1);
            json_val(c, line, b, &l->v[i], o, level + 1);
        }
        if (o->has_indent) json_newline(c, b, o, level);
        fr_jj_sb_putc(c, b, ']');
        return;
    }
    case JT_DICT: {
        const jj_dict *d = v->u.d;
        if (!d->n) {
            fr_jj_sb_puts(c, b, "{}");
            return;
        }
        size_t *ix = fr_jj_alloc(c, d->n * sizeof *ix);
        for (size_t i = 0; i < d->n; i++) ix[i] = i;
        if (o->sort_keys) sort_idx(c, line, ix, fr_jj_alloc(c, d->n * sizeof *ix), d->n, d->k);
        fr_jj_sb_putc(c, b, '{');
        for (size_t k = 0; k < d->n; k++) {
            const jj_val *key = &d->k[ix[k]];
            if (k) fr_jj_sb_put(c, b, o->item_sep.p, o->item_sep.n);
            if (o->has_indent) json_newline(c, b, o, level + 1);
            switch (key->t) {
            case JT_STR: json_str(c, b, key->u.s, o->ensure_ascii); break;
            case JT_NONE: fr_jj_sb_puts(c, b, "\"null\""); break;
            case JT_BOOL: fr_jj_sb_puts(c, b, key->u.b ? "\"true\"" : "\"false\""); break;
            case JT_INT:
            case JT_FLOAT:
                fr_jj_sb_putc(c, b, '"');
                json_val(c, line, b, key, o, level + 1);
                fr_jj_sb_putc(c, b, '"');
                break;
            default:
                fr_jj_fail(c, line, "tojson: keys must be str, int, float, bool or None, not %s",
                           fr_jj_type_name(key));
            }
            fr_jj_sb_put(c, b, o->key_sep.p, o->key_sep.n);
            json_val(c, line, b, &d->v[ix[k]], o, level + 1);
        }
        if (o->has_indent) json_newline(c, b, o, level);
        fr_jj_sb_putc(c, b, '}');
        return;
    }
    default:
        fr_jj_fail(c, line, "tojson: object of type %s is not JSON serializable",
                   fr_jj_type_name(v));
    }
}

void fr_jj_to_json(jj_core *c, int line, jj_sb *b, const jj_val *v, const jj_json_opts *o) {
    json_val(c, line, b, v, o, 0);
}

/* ---- cJSON -------------------------------------------------------------------------------- */

jj_val fr_jj_from_cjson(jj_core *c, const cJSON *j, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) fr_jj_fail(c, 0, "input JSON nested too deeply");
    if (!j) return jj_none();
    if (cJSON_IsTrue(j)) return jj_bool(true);
    if (cJSON_IsFalse(j)) return jj_bool(false);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (isfinite(d) && d == floor(d) && fabs(d) < 9.2e18) return jj_int((int64_t)d);
        return jj_float(d);
    }
    if (cJSON_IsString(j) || cJSON_IsRaw(j)) return jj_strz(j->valuestring ? j->valuestring : "");
    if (cJSON_IsArray(j)) {
        size_t n = 0;
        for (const cJSON *e = j->child; e; e = e->next) n++;
        jj_val v = fr_jj_list_new(c, n, false);
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next)
            v.u.l->v[i++] = fr_jj_from_cjson(c, e, depth + 1);
        return v;
    }
    if (cJSON_IsObject(j)) {
        size_t n = 0;
        for (const cJSON *e = j->child; e; e = e->next) n++;
        jj_val v = fr_jj_dict_new(c, n);
        size_t i = 0;
        for (const cJSON *e = j->child; e; e = e->next, i++) {
            v.u.d->k[i] = jj_strz(e->string ? e->string : "");
            v.u.d->v[i] = fr_jj_from_cjson(c, e, depth + 1);
        }
        return v;
    }
    return jj_none();
}
