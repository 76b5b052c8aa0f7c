/* jinja_builtins.c — what a chat template can call: filters, tests, globals (range, namespace,
 * dict, raise_exception, strftime_now), methods of str/dict/list/loop, plus the operators with
 * Python semantics (arithmetic, `in`, slicing, attribute and item access).
 *
 * Design: each builtin is a C function over jj_val with Python's argument binding (positional
 * or keyword, defaults) done by bind(). Behaviour follows jinja2's filters.py/tests.py and
 * CPython's str methods, with transformers' overrides: `tojson` is json.dumps(x,
 * ensure_ascii=False, indent=None, separators=None, sort_keys=False), raise_exception(msg) fails
 * the render with msg, strftime_now(fmt) formats local time. Attribute and item access follow
 * the ImmutableSandboxedEnvironment: obj.name looks for a method first and then an item,
 * obj[key] an item first and then an attribute; a miss is undefined, not an error; methods that
 * would mutate a list or dict are refused when called.
 *
 * Unicode: case mapping and character classes use utf8proc (simple case mappings; CPython's
 * few one-to-many mappings such as 'ß'.upper() are not reproduced). Lengths, indexes and slices
 * count code points, as Python does.
 */
#include "model/jinja_impl.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

static jj_core *C(jj_rt *rt) { return &rt->core; }

#define NAMEF(s) (int)FR_MIN((s).n, 60), (s).p

/* ---- argument binding --------------------------------------------------------------------- */

#define MAXP 8

typedef struct bound {
    jj_val v[MAXP];     /* argument values (undefined when not given) */
    bool given[MAXP];   /* whether each was passed */
} bound;

/* Bind positional and keyword arguments to `params` (Python rules). */
static void bind(jj_rt *rt, int line, const char *what, jj_str name, const char *const *params,
                 size_t np, const jj_args *a, bound *b) {
    memset(b, 0, sizeof *b);
    if (a->npos > np)
        fr_jj_fail(C(rt), line, "%s '%.*s' takes at most %zu argument(s), %zu given", what,
                   NAMEF(name), np, a->npos);
    for (size_t i = 0; i < a->npos; i++) {
        b->v[i] = a->pos[i];
        b->given[i] = true;
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && !jj_str_eqz(a->kwn[k], params[i])) i++;
        if (i == np)
            fr_jj_fail(C(rt), line, "%s '%.*s' got an unexpected keyword argument '%.*s'", what,
                       NAMEF(name), NAMEF(a->kwn[k]));
        if (b->given[i])
            fr_jj_fail(C(rt), line, "%s '%.*s' got multiple values for argument '%s'", what,
                       NAMEF(name), params[i]);
        b->v[i] = a->kwv[k];
        b->given[i] = true;
    }
}

static int64_t want_int(jj_rt *rt, int line, const jj_val *v, const char *what) {
    if (v->t == JT_INT) return v->u.i;
    if (v->t == JT_BOOL) return v->u.b;
    if (v->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, v);
    fr_jj_fail(C(rt), line, "%s: an integer is required, not '%s'", what, fr_jj_type_name(v));
}

static jj_str want_str(jj_rt *rt, int line, const jj_val *v, const char *what) {
    if (v->t == JT_STR) return v->u.s;
    if (v->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, v);
    fr_jj_fail(C(rt), line, "%s: a string is required, not '%s'", what, fr_jj_type_name(v));
}

/* ---- Unicode helpers ---------------------------------------------------------------------- */

static bool valid_cp(uint32_t c) { return c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF); }
static uint32_t cp_lower(uint32_t c) {
    if (c < 0x80) return (c >= 'A' && c <= 'Z') ? c + 32 : c;
    return valid_cp(c) ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)c) : c;
}
static uint32_t cp_upper(uint32_t c) {
    if (c < 0x80) return (c >= 'a' && c <= 'z') ? c - 32 : c;
    return valid_cp(c) ? (uint32_t)utf8proc_toupper((utf8proc_int32_t)c) : c;
}
static uint32_t cp_title(uint32_t c) {
    if (c < 0x80) return cp_upper(c);
    return valid_cp(c) ? (uint32_t)utf8proc_totitle((utf8proc_int32_t)c) : c;
}
static int cp_cat(uint32_t c) {
    return valid_cp(c) ? (int)utf8proc_category((utf8proc_int32_t)c) : UTF8PROC_CATEGORY_CN;
}
static bool cp_cased(uint32_t c) {
    int k = cp_cat(c);
    return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}
static bool cp_alpha(uint32_t c) {
    int k = cp_cat(c);
    return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}
static bool cp_digit(uint32_t c) { return cp_cat(c) == UTF8PROC_CATEGORY_ND; }
static bool cp_numeric(uint32_t c) {
    int k = cp_cat(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

typedef enum { CASE_LOWER, CASE_UPPER, CASE_TITLE, CASE_CAPITALIZE, CASE_SWAP } case_mode;

/* The one-to-many mappings of Unicode's SpecialCasing.txt that CPython applies and a chat might
 * contain (Latin and ligatures): code point, upper, title, lower. */
static const struct {
    uint32_t cp;                   /* the character */
    const char *upper, *title, *lower; /* its full mappings (NULL: the simple one) */
} SPECIAL_CASE[] = {
    {0x00DF, "SS", "Ss", NULL},            /* ß */
    {0x0130, NULL, NULL, "i\xcc\x87"},     /* İ */
    {0x0149, "\xca\xbcN", "\xca\xbcN", NULL}, /* ŉ */
    {0x01F0, "J\xcc\x8c", "J\xcc\x8c", NULL}, /* ǰ */
    {0xFB00, "FF", "Ff", NULL},
    {0xFB01, "FI", "Fi", NULL},
    {0xFB02, "FL", "Fl", NULL},
    {0xFB03, "FFI", "Ffi", NULL},
    {0xFB04, "FFL", "Ffl", NULL},
    {0xFB05, "ST", "St", NULL},
    {0xFB06, "ST", "St", NULL},
};

static const char *special_case(uint32_t c, int which) {
    if (c < 0xDF) return NULL;
    for (size_t i = 0; i < FR_ARRAY_LEN(SPECIAL_CASE); i++)
        if (SPECIAL_CASE[i].cp == c)
            return which == 0 ? SPECIAL_CASE[i].upper : which == 1 ? SPECIAL_CASE[i].title
                                                                 : SPECIAL_CASE[i].lower;
    return NULL;
}

static jj_str str_case(jj_rt *rt, jj_str s, case_mode mode) {
    jj_sb b = {0};
    fr_jj_charge(C(rt), s.n / 64);
    size_t i = 0;
    bool prev_cased = false, first = true;
    while (i < s.n) {
        uint32_t c = fr_jj_utf8_next(s.p, s.n, &i), o = c;
        int which = -1; /* 0 upper, 1 title, 2 lower */
        switch (mode) {
        case CASE_LOWER: which = 2; break;
        case CASE_UPPER: which = 0; break;
        case CASE_TITLE:
            which = prev_cased ? 2 : 1;
            prev_cased = cp_cased(c);
            break;
        case CASE_CAPITALIZE: which = first ? 1 : 2; break;
        case CASE_SWAP: {
            int k = cp_cat(c);
            which = k == UTF8PROC_CATEGORY_LU ? 2 : k == UTF8PROC_CATEGORY_LL ? 0 : -1;
            break;
        }
        }
        first = false;
        const char *full = which >= 0 ? special_case(c, which) : NULL;
        if (full) {
            fr_jj_sb_puts(C(rt), &b, full);
            continue;
        }
        o = which == 0 ? cp_upper(c) : which == 1 ? cp_title(c) : which == 2 ? cp_lower(c) : c;
        fr_jj_sb_putcp(C(rt), &b, o);
    }
    return jj_sb_str(&b);
}

/* Byte offsets of every code point of s plus the end, or NULL when s is ASCII (offset ==
 * index). *ncp receives the code point count. */
static size_t *cp_offsets(jj_rt *rt, jj_str s, size_t *ncp) {
    fr_jj_charge(C(rt), s.n / 64);
    size_t i = fr_jj_ascii_run(s.p, s.n);
    if (i == s.n) {
        *ncp = s.n;
        return NULL;
    }
    size_t *off = fr_jj_alloc(C(rt), (s.n + 1) * sizeof *off), k = 0;
    i = 0;
    while (i < s.n) {
        off[k++] = i;
        fr_jj_utf8_next(s.p, s.n, &i);
    }
    off[k] = s.n;
    *ncp = k;
    return off;
}

/* Code points of s, charged to the step budget (like every pass over a string here). */
static size_t ulen(jj_rt *rt, jj_str s) {
    fr_jj_charge(C(rt), s.n / 64);
    return fr_jj_utf8_len(s);
}

static size_t cp_count_upto(jj_rt *rt, jj_str s, size_t byte) {
    jj_str h = {s.p, byte};
    return ulen(rt, h);
}

static bool in_set(uint32_t c, jj_str set) {
    size_t i = 0;
    while (i < set.n)
        if (fr_jj_utf8_next(set.p, set.n, &i) == c) return true;
    return false;
}

/* str.strip/lstrip/rstrip with chars NULL for whitespace. */
static jj_str str_strip(jj_rt *rt, jj_str s, const jj_str *chars, bool left, bool right) {
    fr_jj_charge(C(rt), (s.n / 64) * (chars ? chars->n / 8 + 1 : 1));
    size_t a = 0, b = s.n;
    if (left) {
        while (a < b) {
            size_t j = a;
            uint32_t c = fr_jj_utf8_next(s.p, s.n, &j);
            if (chars ? !in_set(c, *chars) : !fr_jj_py_isspace(c)) break;
            a = j;
        }
    }
    if (right) {
        size_t i = a, end = a;
        while (i < b) {
            uint32_t c = fr_jj_utf8_next(s.p, b, &i);
            if (chars ? !in_set(c, *chars) : !fr_jj_py_isspace(c)) end = i;
        }
        b = end;
    }
    jj_str r = {s.p + a, b - a};
    return r;
}

static const char *find_bytes(jj_rt *rt, jj_str hay, size_t from, jj_str needle) {
    if (needle.n == 0) return hay.p + from;
    if (from > hay.n || hay.n - from < needle.n) return NULL;
    const char *hit = memmem(hay.p + from, hay.n - from, needle.p, needle.n);
    fr_jj_charge(C(rt), ((hit ? (size_t)(hit - hay.p) : hay.n) - from + needle.n) / 64 + 1);
    return hit;
}

static const char *rfind_bytes(jj_rt *rt, jj_str hay, jj_str needle) {
    if (needle.n > hay.n) return NULL;
    for (size_t i = hay.n - needle.n + 1; i-- > 0;) {
        if ((i & 63) == 0) fr_jj_charge(C(rt), 1 + needle.n / 64 * 64);
        if (memcmp(hay.p + i, needle.p, needle.n) == 0) return hay.p + i;
    }
    return NULL;
}

static jj_str str_replace(jj_rt *rt, jj_str s, jj_str old, jj_str new_, int64_t count) {
    jj_sb b = {0};
    fr_jj_charge(C(rt), s.n / 64);
    if (count < 0) count = INT64_MAX;
    if (old.n == 0) {
        /* inserts `new` before every code point and at the end */
        size_t i = 0;
        int64_t k = 0;
        while (i < s.n) {
            if (k < count) {
                fr_jj_sb_put(C(rt), &b, new_.p, new_.n);
                k++;
            }
            size_t j = i;
            fr_jj_utf8_next(s.p, s.n, &j);
            fr_jj_sb_put(C(rt), &b, s.p + i, j - i);
            i = j;
        }
        if (k < count) fr_jj_sb_put(C(rt), &b, new_.p, new_.n);
        return jj_sb_str(&b);
    }
    size_t i = 0;
    int64_t k = 0;
    while (k < count) {
        const char *hit = find_bytes(rt, s, i, old);
        if (!hit) break;
        size_t at = (size_t)(hit - s.p);
        fr_jj_sb_put(C(rt), &b, s.p + i, at - i);
        fr_jj_sb_put(C(rt), &b, new_.p, new_.n);
        i = at + old.n;
        k++;
    }
    if (k == 0) return s;
    fr_jj_sb_put(C(rt), &b, s.p + i, s.n - i);
    return jj_sb_str(&b);
}

/* A growable list of values. */
typedef struct vlist {
    jj_val *v;     /* items */
    size_t n, cap; /* used, allocated */
} vlist;

static void vl_push(jj_rt *rt, vlist *l, jj_val v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        l->v = fr_jj_grow(C(rt), l->v, l->cap * sizeof *l->v, cap * sizeof *l->v);
        l->cap = cap;
    }
    l->v[l->n++] = v;
}

static jj_val vl_list(jj_rt *rt, vlist *l) {
    jj_val v = fr_jj_list_new(C(rt), 0, false);
    v.u.l->n = l->n;
    v.u.l->v = l->v;
    (void)rt;
    return v;
}

static jj_val sub(jj_str s, size_t a, size_t b) {
    jj_str r = {s.p + a, b - a};
    return jj_strv(r);
}

/* str.split(sep, maxsplit) (rsplit when `right`). */
static jj_val str_split(jj_rt *rt, int line, jj_str s, const jj_val *sepv, int64_t maxsplit,
                        bool right) {
    vlist out = {0};
    fr_jj_charge(C(rt), s.n / 64);
    if (maxsplit < 0) maxsplit = INT64_MAX;
    if (sepv && sepv->t != JT_NONE) {
        jj_str sep = want_str(rt, line, sepv, "split");
        if (!sep.n) fr_jj_fail(C(rt), line, "split: empty separator");
        if (!right) {
            size_t i = 0;
            int64_t k = 0;
            while (k < maxsplit) {
                const char *hit = find_bytes(rt, s, i, sep);
                if (!hit) break;
                size_t at = (size_t)(hit - s.p);
                vl_push(rt, &out, sub(s, i, at));
                i = at + sep.n;
                k++;
            }
            vl_push(rt, &out, sub(s, i, s.n));
        } else {
            size_t end = s.n;
            int64_t k = 0;
            vlist rev = {0};
            while (k < maxsplit) {
                jj_str h = {s.p, end};
                const char *hit = rfind_bytes(rt, h, sep);
                if (!hit) break;
                size_t at = (size_t)(hit - s.p);
                vl_push(rt, &rev, sub(s, at + sep.n, end));
                end = at;
                k++;
            }
            vl_push(rt, &out, sub(s, 0, end));
            for (size_t i = rev.n; i-- > 0;) vl_push(rt, &out, rev.v[i]);
        }
        return vl_list(rt, &out);
    }
    /* whitespace splitting */
    size_t *off = NULL, n;
    off = cp_offsets(rt, s, &n);
#define OFF(k) (off ? off[k] : (k))
    uint32_t *cps = fr_jj_alloc(C(rt), (n + 1) * sizeof *cps);
    {
        size_t i = 0, k = 0;
        while (i < s.n) cps[k++] = fr_jj_utf8_next(s.p, s.n, &i);
    }
    if (!right) {
        size_t i = 0;
        int64_t k = 0;
        while (i < n && fr_jj_py_isspace(cps[i])) i++;
        while (i < n) {
            if (k == maxsplit) {
                vl_push(rt, &out, sub(s, OFF(i), s.n));
                break;
            }
            size_t j = i;
            while (j < n && !fr_jj_py_isspace(cps[j])) j++;
            vl_push(rt, &out, sub(s, OFF(i), OFF(j)));
            k++;
            i = j;
            while (i < n && fr_jj_py_isspace(cps[i])) i++;
        }
    } else {
        vlist rev = {0};
        size_t j = n;
        int64_t k = 0;
        while (j > 0 && fr_jj_py_isspace(cps[j - 1])) j--;
        while (j > 0) {
            if (k == maxsplit) {
                vl_push(rt, &rev, sub(s, 0, OFF(j)));
                break;
            }
            size_t i = j;
            while (i > 0 && !fr_jj_py_isspace(cps[i - 1])) i--;
            vl_push(rt, &rev, sub(s, OFF(i), OFF(j)));
            k++;
            j = i;
            while (j > 0 && fr_jj_py_isspace(cps[j - 1])) j--;
        }
        for (size_t i = rev.n; i-- > 0;) vl_push(rt, &out, rev.v[i]);
    }
#undef OFF
    return vl_list(rt, &out);
}

static bool is_line_break(uint32_t c) {
    return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
           c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
}

static jj_val str_splitlines(jj_rt *rt, jj_str s, bool keepends) {
    vlist out = {0};
    size_t i = 0, start = 0;
    while (i < s.n) {
        size_t at = i;
        uint32_t c = fr_jj_utf8_next(s.p, s.n, &i);
        if (!is_line_break(c)) continue;
        if (c == '\r' && i < s.n && s.p[i] == '\n') i++;
        vl_push(rt, &out, sub(s, start, keepends ? i : at));
        start = i;
    }
    if (start < s.n) vl_push(rt, &out, sub(s, start, s.n));
    return vl_list(rt, &out);
}

static jj_str html_escape(jj_rt *rt, jj_str s) {
    jj_sb b = {0};
    for (size_t i = 0; i < s.n; i++) {
        switch (s.p[i]) {
        case '&': fr_jj_sb_puts(C(rt), &b, "&amp;"); break;
        case '<': fr_jj_sb_puts(C(rt), &b, "&lt;"); break;
        case '>': fr_jj_sb_puts(C(rt), &b, "&gt;"); break;
        case '"': fr_jj_sb_puts(C(rt), &b, "&#34;"); break;
        case '\'': fr_jj_sb_puts(C(rt), &b, "&#39;"); break;
        default: fr_jj_sb_putc(C(rt), &b, s.p[i]);
        }
    }
    return jj_sb_str(&b);
}

/* ---- iteration, access, operators --------------------------------------------------------- */

static jj_val run_generator(jj_rt *rt, const jj_gen *g);

jj_list fr_jj_iterate(jj_rt *rt, int line, const jj_val *v) {
    jj_list r = {0, NULL, 0, 0, 0, 0};
    switch (v->t) {
    case JT_UNDEF: return r;
    case JT_LIST: return *v->u.l;
    case JT_DICT:
        r.n = v->u.d->n;
        r.v = v->u.d->k;
        return r;
    case JT_STR: {
        jj_str s = v->u.s;
        size_t n = ulen(rt, s), i = 0, k = 0;
        fr_jj_charge(C(rt), s.n / 16);
        r.v = n ? fr_jj_alloc(C(rt), n * sizeof *r.v) : NULL;
        while (i < s.n) {
            size_t a = i;
            fr_jj_utf8_next(s.p, s.n, &i);
            r.v[k++] = sub(s, a, i);
        }
        r.n = k;
        return r;
    }
    case JT_LOOP: {
        fr_jj_loop_fill(rt, v->u.loop, SIZE_MAX);
        jj_list l = {v->u.loop->npass, v->u.loop->pass, 0, 0, 0, 0};
        return l;
    }
    case JT_GEN: {
        /* run the generator's filter now, once */
        jj_gen *g = v->u.gen;
        if (g->consumed) return r;
        g->consumed = true;
        if (++rt->depth > JJ_MAX_DEPTH)
            fr_jj_fail(C(rt), line, "template recursion too deep (more than %d levels)",
                       JJ_MAX_DEPTH);
        jj_val items = run_generator(rt, g);
        rt->depth--;
        return *items.u.l;
    }
    default: fr_jj_fail(C(rt), line, "'%s' object is not iterable", fr_jj_type_name(v));
    }
}

static jj_val make_method(jj_rt *rt, jj_func_kind kind, int id, const jj_val *self, jj_str name) {
    jj_func *fn = fr_jj_alloc(C(rt), sizeof *fn);
    fn->kind = (uint8_t)kind;
    fn->id = (uint16_t)id;
    fn->self = *self;
    fn->name = name;
    jj_val v = {0};
    v.t = JT_FUNC;
    v.u.fn = fn;
    return v;
}

/* Method ids. */
enum {
    M_STRIP, M_LSTRIP, M_RSTRIP, M_STARTSWITH, M_ENDSWITH, M_SPLIT, M_RSPLIT, M_SPLITLINES,
    M_UPPER, M_LOWER, M_TITLE, M_CAPITALIZE, M_SWAPCASE, M_CASEFOLD, M_REPLACE, M_FIND, M_RFIND,
    M_INDEX, M_RINDEX, M_COUNT, M_JOIN, M_ISDIGIT, M_ISALPHA, M_ISALNUM, M_ISSPACE, M_ISLOWER,
    M_ISUPPER, M_ISASCII, M_ISDECIMAL, M_ISNUMERIC, M_REMOVEPREFIX, M_REMOVESUFFIX, M_CENTER,
    M_LJUST, M_RJUST, M_ZFILL, M_PARTITION, M_RPARTITION,
    M_STR_UNSUPPORTED,
};
static const char *const STR_METHODS[] = {
    "strip", "lstrip", "rstrip", "startswith", "endswith", "split", "rsplit", "splitlines",
    "upper", "lower", "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind",
    "index", "rindex", "count", "join", "isdigit", "isalpha", "isalnum", "isspace", "islower",
    "isupper", "isascii", "isdecimal", "isnumeric", "removeprefix", "removesuffix", "center",
    "ljust", "rjust", "zfill", "partition", "rpartition",
};
static const char *const STR_UNSUPPORTED[] = {"format", "format_map", "encode", "expandtabs",
                                              "translate", "maketrans", "isidentifier",
                                              "isprintable", "istitle"};

enum { D_GET, D_ITEMS, D_KEYS, D_VALUES, D_COPY };
static const char *const DICT_METHODS[] = {"get", "items", "keys", "values", "copy"};
static const char *const DICT_UNSAFE[] = {"pop", "popitem", "setdefault", "update", "clear",
                                          "fromkeys"};
enum { L_INDEX, L_COUNT, L_COPY };
static const char *const LIST_METHODS[] = {"index", "count", "copy"};
static const char *const LIST_UNSAFE[] = {"append", "extend", "insert", "pop", "remove",
                                          "reverse", "sort", "clear"};
enum { LP_CYCLE, LP_CHANGED };

static int find_name(jj_str name, const char *const *tab, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (jj_str_eqz(name, tab[i])) return (int)i;
    return -1;
}

static jj_val no_attr(jj_rt *rt, const jj_val *obj, jj_str name) {
    char buf[200];
    int k = snprintf(buf, sizeof buf, "'%s object' has no attribute '%.*s'", fr_jj_type_name(obj),
                     NAMEF(name));
    return jj_undef_hint(fr_jj_strdup(C(rt), buf, FR_MIN((size_t)FR_MAX(k, 0), sizeof buf - 1)));
}

jj_val fr_jj_getattr(jj_rt *rt, int line, const jj_val *obj, jj_str name) {
    int id;
    switch (obj->t) {
    case JT_UNDEF: fr_jj_fail_undefined(rt, line, obj);
    case JT_DICT: {
        if ((id = find_name(name, DICT_METHODS, FR_ARRAY_LEN(DICT_METHODS))) >= 0)
            return make_method(rt, JFN_DICT, id, obj, name);
        if (find_name(name, DICT_UNSAFE, FR_ARRAY_LEN(DICT_UNSAFE)) >= 0)
            return make_method(rt, JFN_UNSAFE, 0, obj, name);
        jj_val key = jj_strv(name);
        jj_val *v = fr_jj_dict_get(C(rt), obj->u.d, &key);
        return v ? *v : no_attr(rt, obj, name);
    }
    case JT_STR:
        if ((id = find_name(name, STR_METHODS, FR_ARRAY_LEN(STR_METHODS))) >= 0)
            return make_method(rt, JFN_STR, id, obj, name);
        if (find_name(name, STR_UNSUPPORTED, FR_ARRAY_LEN(STR_UNSUPPORTED)) >= 0)
            return make_method(rt, JFN_STR, M_STR_UNSUPPORTED, obj, name);
        return no_attr(rt, obj, name);
    case JT_LIST:
        if (obj->flags & (JF_VIEW | JF_RANGE)) {
            if ((obj->flags & JF_RANGE) && (jj_str_eqz(name, "index") || jj_str_eqz(name, "count")))
                return make_method(rt, JFN_LIST,
                                   find_name(name, LIST_METHODS, FR_ARRAY_LEN(LIST_METHODS)), obj,
                                   name);
            return no_attr(rt, obj, name);
        }
        if ((id = find_name(name, LIST_METHODS, FR_ARRAY_LEN(LIST_METHODS))) >= 0)
            return make_method(rt, JFN_LIST, id, obj, name);
        if (find_name(name, LIST_UNSAFE, FR_ARRAY_LEN(LIST_UNSAFE)) >= 0)
            return make_method(rt, JFN_UNSAFE, 0, obj, name);
        return no_attr(rt, obj, name);
    case JT_NS:
        fr_jj_charge(C(rt), obj->u.ns->n / 4);
        for (size_t i = obj->u.ns->n; i-- > 0;)
            if (jj_str_eq(obj->u.ns->k[i], name)) return obj->u.ns->v[i];
        return no_attr(rt, obj, name);
    case JT_LOOP: {
        jj_loop *lp = obj->u.loop;
        if (jj_str_eqz(name, "index")) return jj_int((int64_t)lp->i + 1);
        if (jj_str_eqz(name, "index0")) return jj_int((int64_t)lp->i);
        if (jj_str_eqz(name, "first")) return jj_bool(lp->i == 0);
        if (jj_str_eqz(name, "depth")) return jj_int(1);
        if (jj_str_eqz(name, "depth0")) return jj_int(0);
        if (jj_str_eqz(name, "previtem"))
            return lp->i > 0 ? lp->pass[lp->i - 1]
                             : jj_undef_hint(jj_s("there is no previous item"));
        bool all = jj_str_eqz(name, "length") || jj_str_eqz(name, "revindex") ||
            jj_str_eqz(name, "revindex0");
        bool peek = jj_str_eqz(name, "last") || jj_str_eqz(name, "nextitem");
        if (all || peek) fr_jj_loop_fill(rt, lp, all ? SIZE_MAX : lp->i + 2);
        size_t n = lp->npass;
        if (jj_str_eqz(name, "length")) return jj_int((int64_t)n);
        if (jj_str_eqz(name, "revindex")) return jj_int((int64_t)(n - lp->i));
        if (jj_str_eqz(name, "revindex0")) return jj_int((int64_t)(n - lp->i - 1));
        if (jj_str_eqz(name, "last")) return jj_bool(lp->i + 1 >= n);
        if (jj_str_eqz(name, "nextitem"))
            return lp->i + 1 < n ? lp->pass[lp->i + 1]
                                 : jj_undef_hint(jj_s("there is no next item"));
        if (jj_str_eqz(name, "cycle")) return make_method(rt, JFN_LOOP, LP_CYCLE, obj, name);
        if (jj_str_eqz(name, "changed")) return make_method(rt, JFN_LOOP, LP_CHANGED, obj, name);
        return no_attr(rt, obj, name);
    }
    case JT_BOOL:
    case JT_INT:
    case JT_FLOAT:
        if (jj_str_eqz(name, "real")) return obj->t == JT_BOOL ? jj_int(obj->u.b) : *obj;
        if (jj_str_eqz(name, "imag")) return obj->t == JT_FLOAT ? jj_float(0) : jj_int(0);
        return no_attr(rt, obj, name);
    default: return no_attr(rt, obj, name);
    }
}

/* Python index normalisation; false when out of range. */
static bool norm_index(int64_t i, size_t n, size_t *out) {
    if (i < 0) i += (int64_t)n;
    if (i < 0 || (uint64_t)i >= n) return false;
    *out = (size_t)i;
    return true;
}

jj_val fr_jj_getitem(jj_rt *rt, int line, const jj_val *obj, const jj_val *key) {
    size_t ix;
    switch (obj->t) {
    case JT_UNDEF: fr_jj_fail_undefined(rt, line, obj);
    case JT_LIST:
        if (obj->flags & JF_VIEW) break;
        if (key->t == JT_INT || key->t == JT_BOOL) {
            if (norm_index(key->t == JT_INT ? key->u.i : key->u.b, obj->u.l->n, &ix))
                return obj->u.l->v[ix];
            return jj_undef_hint(jj_s("list index out of range"));
        }
        break;
    case JT_STR:
        if (key->t == JT_INT || key->t == JT_BOOL) {
            size_t n, *off = cp_offsets(rt, obj->u.s, &n);
            if (!norm_index(key->t == JT_INT ? key->u.i : key->u.b, n, &ix))
                return jj_undef_hint(jj_s("string index out of range"));
            jj_val ch = off ? sub(obj->u.s, off[ix], off[ix + 1]) : sub(obj->u.s, ix, ix + 1);
            ch.flags = obj->flags & JF_MARKUP;
            return ch;
        }
        break;
    case JT_DICT: {
        if (key->t == JT_LIST && !(key->flags & JF_TUPLE)) break;
        jj_val *v = fr_jj_dict_get(C(rt), obj->u.d, key);
        if (v) return *v;
        break;
    }
    default: break;
    }
    if (key->t == JT_STR) return fr_jj_getattr(rt, line, obj, key->u.s);
    char buf[200];
    jj_sb kb = {0};
    fr_jj_repr(C(rt), &kb, key, 0);
    int k = snprintf(buf, sizeof buf, "'%s object' has no item %.*s", fr_jj_type_name(obj),
                     (int)FR_MIN(kb.n, 80), kb.p ? kb.p : "");
    return jj_undef_hint(fr_jj_strdup(C(rt), buf, FR_MIN((size_t)FR_MAX(k, 0), sizeof buf - 1)));
}

static bool slice_arg(const jj_val *v, bool *none, int64_t *out) {
    *none = v->t == JT_NONE;
    if (*none) return true;
    if (v->t == JT_INT) *out = v->u.i;
    else if (v->t == JT_BOOL) *out = v->u.b;
    else return false;
    return true;
}

jj_val fr_jj_slice(jj_rt *rt, int line, const jj_val *obj, const jj_val *start, const jj_val *stop,
                   const jj_val *step, bool lenient) {
    bool n0, n1, n2;
    int64_t a = 0, b = 0, st = 1;
    if (lenient && ((obj->t != JT_LIST && obj->t != JT_STR) || (obj->flags & JF_VIEW)))
        return jj_undef_hint(jj_s("not sliceable"));
    if (lenient &&
        (!slice_arg(start, &n0, &a) || !slice_arg(stop, &n1, &b) || !slice_arg(step, &n2, &st)))
        return jj_undef_hint(jj_s("not sliceable"));
    /* jinja2 slices with Python's own subscript (not the sandbox's getitem), so what cannot be
     * sliced is an error rather than undefined */
    if ((obj->t != JT_LIST && obj->t != JT_STR) || (obj->flags & JF_VIEW)) {
        if (obj->t == JT_DICT) fr_jj_fail(C(rt), line, "unhashable type: 'slice'");
        fr_jj_fail(C(rt), line, "'%s' object is not subscriptable", fr_jj_type_name(obj));
    }
    if (!slice_arg(start, &n0, &a) || !slice_arg(stop, &n1, &b) || !slice_arg(step, &n2, &st))
        fr_jj_fail(C(rt), line, "slice indices must be integers or None");
    if (n2) st = 1;
    if (st == 0) fr_jj_fail(C(rt), line, "slice step cannot be zero");
    size_t len, *off = NULL;
    if (obj->t == JT_LIST)
        len = obj->u.l->n;
    else off = cp_offsets(rt, obj->u.s, &len);
    int64_t L = (int64_t)len;
    int64_t lo = st < 0 ? -1 : 0, hi = st < 0 ? L - 1 : L;
    if (n0) a = st < 0 ? hi : lo;
    else {
        if (a < 0) a = a < -L ? lo : a + L;
        if (a < lo) a = lo;
        if (a > hi) a = hi;
    }
    if (n1) b = st < 0 ? lo : hi;
    else {
        if (b < 0) b = b < -L ? lo : b + L;
        if (b < lo) b = lo;
        if (b > hi) b = hi;
    }
    int64_t count = 0;
    if (st > 0 && a < b) count = (b - a - 1) / st + 1;
    if (st < 0 && b < a) count = (a - b - 1) / (-st) + 1;
    fr_jj_charge(C(rt), (uint64_t)count / 16);
    if (obj->t == JT_LIST) {
        jj_val v = fr_jj_list_new(C(rt), (size_t)count, obj->flags & JF_TUPLE);
        for (int64_t k = 0; k < count; k++) v.u.l->v[k] = obj->u.l->v[a + k * st];
        if (obj->flags & JF_RANGE) { /* a slice of a range is a range */
            const jj_list *r = obj->u.l;
            v.flags = JF_RANGE;
            v.u.l->start = r->start + a * r->step;
            v.u.l->stop = r->start + b * r->step;
            v.u.l->step = r->step * st;
        }
        return v;
    }
    jj_str s = obj->u.s;
    jj_val r;
#define OFF(k) (off ? off[k] : (size_t)(k))
    if (st == 1) {
        r = count ? sub(s, OFF(a), OFF(a + count)) : jj_strz("");
    } else {
        jj_sb out = {0};
        for (int64_t k = 0; k < count; k++) {
            int64_t i = a + k * st;
            fr_jj_sb_put(C(rt), &out, s.p + OFF(i), OFF(i + 1) - OFF(i));
        }
        r = jj_strv(jj_sb_str(&out));
    }
#undef OFF
    r.flags = obj->flags & JF_MARKUP; /* Markup slices are Markup */
    return r;
}

bool fr_jj_contains(jj_rt *rt, int line, const jj_val *c, const jj_val *item) {
    switch (c->t) {
    case JT_STR: {
        if (item->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, item);
        if (item->t != JT_STR)
            fr_jj_fail(C(rt), line, "'in <string>' requires string as left operand, not %s",
                       fr_jj_type_name(item));
        fr_jj_charge(C(rt), c->u.s.n / 64);
        return find_bytes(rt, c->u.s, 0, item->u.s) != NULL;
    }
    case JT_LIST:
        for (size_t i = 0; i < c->u.l->n; i++) {
            fr_jj_charge(C(rt), 1);
            if (fr_jj_equal(C(rt), &c->u.l->v[i], item)) return true;
        }
        return false;
    case JT_DICT:
        if (item->t == JT_LIST && !(item->flags & JF_TUPLE))
            fr_jj_fail(C(rt), line, "unhashable type: 'list'");
        return fr_jj_dict_get(C(rt), c->u.d, item) != NULL;
    case JT_UNDEF: return false;
    case JT_LOOP:
    case JT_GEN: {
        jj_list l = fr_jj_iterate(rt, line, c);
        for (size_t i = 0; i < l.n; i++)
            if (fr_jj_equal(C(rt), &l.v[i], item)) return true;
        return false;
    }
    default: fr_jj_fail(C(rt), line, "argument of type '%s' is not iterable", fr_jj_type_name(c));
    }
}

/* ---- arithmetic --------------------------------------------------------------------------- */

static jj_val repeat(jj_rt *rt, int line, const jj_val *seq, int64_t times) {
    if (times < 0) times = 0;
    if (seq->t == JT_STR) {
        if (times && seq->u.s.n && (uint64_t)times > JJ_MAX_STRING / seq->u.s.n)
            fr_jj_fail(C(rt), line, "a string exceeds %u MiB", JJ_MAX_STRING >> 20);
        jj_sb b = {0};
        for (int64_t i = 0; i < times; i++) fr_jj_sb_put(C(rt), &b, seq->u.s.p, seq->u.s.n);
        jj_val v = jj_strv(jj_sb_str(&b));
        return v;
    }
    size_t n = seq->u.l->n;
    if (times && n && (uint64_t)times > (JJ_MAX_MEMORY / sizeof(jj_val)) / n)
        fr_jj_fail(C(rt), line, "list too long");
    jj_val v = fr_jj_list_new(C(rt), n * (size_t)times, seq->flags & JF_TUPLE);
    fr_jj_charge(C(rt), n * (size_t)times / 16);
    for (int64_t i = 0; i < times; i++)
        memcpy(v.u.l->v + (size_t)i * n, seq->u.l->v, n * sizeof(jj_val));
    return v;
}

static jj_str percent_format(jj_rt *rt, int line, jj_str fmt, const jj_val *args, size_t nargs,
                             const jj_val *mapping, bool maplike);

static FR_NORETURN void bad_operands(jj_rt *rt, int line, int op, const jj_val *a,
                                     const jj_val *b) {
    static const char *const sym[] = {"+", "-", "/", "//", "*", "**", "%"};
    const char *s = op >= JO_ADD && op <= JO_MOD ? sym[op - JO_ADD] : "?";
    fr_jj_fail(C(rt), line, "unsupported operand type(s) for %s: '%s' and '%s'", s,
               fr_jj_type_name(a), fr_jj_type_name(b));
}

static void py_divmod(double x, double y, double *div, double *mod) {
    double m = fmod(x, y);
    double d = (x - m) / y;
    if (m != 0) {
        if ((y < 0) != (m < 0)) {
            m += y;
            d -= 1.0;
        }
    } else {
        m = copysign(0.0, y);
    }
    double fd;
    if (d != 0) {
        fd = floor(d);
        if (d - fd > 0.5) fd += 1.0;
    } else {
        fd = copysign(0.0, x / y);
    }
    *div = fd;
    *mod = m;
}

jj_val fr_jj_arith(jj_rt *rt, int line, int op, const jj_val *a, const jj_val *b) {
    if (op == JO_MOD && a->t == JT_STR) {
        /* str % x: a tuple gives the arguments, anything else is one argument; like CPython,
         * unused arguments are only an error when x has no mapping protocol */
        if (b->t == JT_LIST && (b->flags & JF_TUPLE))
            return jj_strv(percent_format(rt, line, a->u.s, b->u.l->v, b->u.l->n, NULL, false));
        bool maplike = b->t == JT_DICT || b->t == JT_LIST || b->t == JT_UNDEF;
        return jj_strv(percent_format(rt, line, a->u.s, b, 1, b->t == JT_DICT ? b : NULL, maplike));
    }
    if (a->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, a);
    if (b->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, b);
    if (fr_jj_is_num(a) && fr_jj_is_num(b)) {
        if (a->t != JT_FLOAT && b->t != JT_FLOAT) {
            int64_t x = a->t == JT_BOOL ? a->u.b : a->u.i, y = b->t == JT_BOOL ? b->u.b : b->u.i, r;
            switch (op) {
            case JO_ADD:
                if (__builtin_add_overflow(x, y, &r)) goto overflow;
                return jj_int(r);
            case JO_SUB:
                if (__builtin_sub_overflow(x, y, &r)) goto overflow;
                return jj_int(r);
            case JO_MUL:
                if (__builtin_mul_overflow(x, y, &r)) goto overflow;
                return jj_int(r);
            case JO_DIV:
                if (!y) fr_jj_fail(C(rt), line, "division by zero");
                return jj_float((double)x / (double)y);
            case JO_FLOORDIV:
            case JO_MOD: {
                if (!y) fr_jj_fail(C(rt), line, "integer division or modulo by zero");
                if (y == -1) {
                    if (op == JO_MOD) return jj_int(0);
                    if (x == INT64_MIN) goto overflow;
                    return jj_int(-x);
                }
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                return jj_int(op == JO_MOD ? m : q);
            }
            case JO_POW: {
                if (y < 0) {
                    if (!x) fr_jj_fail(C(rt), line, "0.0 cannot be raised to a negative power");
                    return jj_float(pow((double)x, (double)y));
                }
                int64_t res = 1, base = x;
                while (y) {
                    if (y & 1)
                        if (__builtin_mul_overflow(res, base, &res)) goto overflow;
                    y >>= 1;
                    if (y && __builtin_mul_overflow(base, base, &base)) goto overflow;
                }
                return jj_int(res);
            }
            default: break;
            }
        } else {
            double x = fr_jj_num(a), y = fr_jj_num(b), d, m;
            switch (op) {
            case JO_ADD: return jj_float(x + y);
            case JO_SUB: return jj_float(x - y);
            case JO_MUL: return jj_float(x * y);
            case JO_DIV:
                if (y == 0) fr_jj_fail(C(rt), line, "float division by zero");
                return jj_float(x / y);
            case JO_FLOORDIV:
            case JO_MOD:
                if (y == 0) fr_jj_fail(C(rt), line, "float floor division or modulo by zero");
                py_divmod(x, y, &d, &m);
                return jj_float(op == JO_MOD ? m : d);
            case JO_POW: {
                if (x == 0 && y < 0)
                    fr_jj_fail(C(rt), line, "0.0 cannot be raised to a negative power");
                if (x < 0 && y != floor(y) && isfinite(y))
                    fr_jj_fail_unsup(C(rt), line, "complex result of a power");
                double r = pow(x, y);
                if (isinf(r) && isfinite(x) && isfinite(y))
                    fr_jj_fail(C(rt), line, "numerical result out of range");
                return jj_float(r);
            }
            default: break;
            }
        }
        bad_operands(rt, line, op, a, b);
    }
    if (op == JO_ADD && a->t == JT_STR && b->t == JT_STR) {
        jj_str x = a->u.s, y = b->u.s;
        bool mk = (a->flags | b->flags) & JF_MARKUP;
        if (mk) {
            /* markupsafe: the plain operand is HTML-escaped */
            if (!(a->flags & JF_MARKUP)) x = html_escape(rt, x);
            if (!(b->flags & JF_MARKUP)) y = html_escape(rt, y);
        }
        if (!x.n || !y.n) {
            jj_val v = jj_strv(x.n ? x : y);
            v.flags = mk ? JF_MARKUP : 0;
            return v;
        }
        jj_sb s = {0};
        fr_jj_sb_put(C(rt), &s, x.p, x.n);
        fr_jj_sb_put(C(rt), &s, y.p, y.n);
        jj_val v = jj_strv(jj_sb_str(&s));
        v.flags = mk ? JF_MARKUP : 0;
        return v;
    }
    if (op == JO_ADD && a->t == JT_LIST && b->t == JT_LIST &&
        (a->flags & JF_TUPLE) == (b->flags & JF_TUPLE) &&
        !((a->flags | b->flags) & (JF_RANGE | JF_VIEW))) {
        size_t n = a->u.l->n + b->u.l->n;
        jj_val v = fr_jj_list_new(C(rt), n, a->flags & JF_TUPLE);
        if (a->u.l->n) memcpy(v.u.l->v, a->u.l->v, a->u.l->n * sizeof(jj_val));
        if (b->u.l->n) memcpy(v.u.l->v + a->u.l->n, b->u.l->v, b->u.l->n * sizeof(jj_val));
        fr_jj_charge(C(rt), n / 16);
        return v;
    }
    if (op == JO_MUL) {
        if ((a->t == JT_STR || (a->t == JT_LIST && !(a->flags & (JF_RANGE | JF_VIEW)))) &&
            (b->t == JT_INT || b->t == JT_BOOL))
            return repeat(rt, line, a, b->t == JT_INT ? b->u.i : b->u.b);
        if ((b->t == JT_STR || (b->t == JT_LIST && !(b->flags & (JF_RANGE | JF_VIEW)))) &&
            (a->t == JT_INT || a->t == JT_BOOL))
            return repeat(rt, line, b, a->t == JT_INT ? a->u.i : a->u.b);
    }
    bad_operands(rt, line, op, a, b);
overflow:
    fr_jj_fail_unsup(C(rt), line, "integer overflow (integers are 64-bit here)");
}

/* ---- printf-style formatting (str % args, |format) ---------------------------------------- */

static void pad_to(jj_rt *rt, jj_sb *out, jj_str s, long width, bool left) {
    size_t n = ulen(rt, s);
    long pad = width > (long)n ? width - (long)n : 0;
    if (pad > (long)JJ_MAX_STRING) fr_jj_fail(C(rt), 0, "format width too large");
    if (!left)
        for (long i = 0; i < pad; i++) fr_jj_sb_putc(C(rt), out, ' ');
    fr_jj_sb_put(C(rt), out, s.p, s.n);
    if (left)
        for (long i = 0; i < pad; i++) fr_jj_sb_putc(C(rt), out, ' ');
}

static jj_str percent_format(jj_rt *rt, int line, jj_str fmt, const jj_val *args, size_t nargs,
                             const jj_val *mapping, bool maplike) {
    jj_sb out = {0};
    size_t ai = 0, i = 0;
    bool used_mapping = false;
    while (i < fmt.n) {
        const char *pc = memchr(fmt.p + i, '%', fmt.n - i);
        if (!pc) {
            fr_jj_sb_put(C(rt), &out, fmt.p + i, fmt.n - i);
            break;
        }
        size_t at = (size_t)(pc - fmt.p);
        fr_jj_sb_put(C(rt), &out, fmt.p + i, at - i);
        i = at + 1;
        if (i >= fmt.n) fr_jj_fail(C(rt), line, "incomplete format");
        const jj_val *arg = NULL;
        if (fmt.p[i] == '(') {
            size_t j = i + 1;
            while (j < fmt.n && fmt.p[j] != ')') j++;
            if (j >= fmt.n) fr_jj_fail(C(rt), line, "incomplete format key");
            if (!mapping) fr_jj_fail(C(rt), line, "format requires a mapping");
            jj_val key = sub(fmt, i + 1, j);
            arg = fr_jj_dict_get(C(rt), mapping->u.d, &key);
            if (!arg)
                fr_jj_fail(C(rt), line, "format key %.*s not found", (int)FR_MIN(j - i - 1, 60),
                           fmt.p + i + 1);
            used_mapping = true;
            i = j + 1;
        }
        char flags[8];
        int nf = 0;
        while (i < fmt.n && strchr("#0- +", fmt.p[i]) && fmt.p[i] && nf < 7)
            flags[nf++] = fmt.p[i++];
        flags[nf] = 0;
        long width = 0, prec = -1;
        if (i < fmt.n && fmt.p[i] == '*')
            fr_jj_fail_unsup(C(rt), line, "'*' width in a format string");
        while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && width < 100000)
            width = width * 10 + (fmt.p[i++] - '0');
        if (i < fmt.n && fmt.p[i] == '.') {
            i++;
            prec = 0;
            while (i < fmt.n && fmt.p[i] >= '0' && fmt.p[i] <= '9' && prec < 100000)
                prec = prec * 10 + (fmt.p[i++] - '0');
        }
        while (i < fmt.n && strchr("hlL", fmt.p[i]) && fmt.p[i]) i++;
        if (i >= fmt.n) fr_jj_fail(C(rt), line, "incomplete format");
        char conv = fmt.p[i++];
        if (conv == '%') {
            fr_jj_sb_putc(C(rt), &out, '%');
            continue;
        }
        if (!arg) {
            if (ai >= nargs) fr_jj_fail(C(rt), line, "not enough arguments for format string");
            arg = &args[ai++];
        }
        bool left = strchr(flags, '-') != NULL;
        char cf[48], tmp[400];
        switch (conv) {
        case 's':
        case 'r':
        case 'a': {
            jj_str s;
            if (conv == 's')
                s = fr_jj_str_of(C(rt), arg);
            else {
                jj_sb r = {0};
                fr_jj_repr(C(rt), &r, arg, 0);
                s = jj_sb_str(&r);
            }
            if (prec >= 0) {
                size_t n, *off = cp_offsets(rt, s, &n);
                if ((size_t)prec < n) s.n = off ? off[prec] : (size_t)prec;
            }
            pad_to(rt, &out, s, width, left);
            break;
        }
        case 'd':
        case 'i':
        case 'u':
        case 'x':
        case 'X':
        case 'o': {
            long long v;
            if (arg->t == JT_INT || arg->t == JT_BOOL) v = arg->t == JT_INT ? arg->u.i : arg->u.b;
            else if (arg->t == JT_FLOAT && (conv == 'd' || conv == 'i' || conv == 'u')) {
                if (!isfinite(arg->u.f) || fabs(arg->u.f) >= 9.2e18)
                    fr_jj_fail(C(rt), line, "cannot convert float to integer");
                v = (long long)arg->u.f;
            } else
                fr_jj_fail(C(rt), line, "%%%c format: a number is required, not %s", conv,
                           fr_jj_type_name(arg));
            if (width > 300 || prec > 300) fr_jj_fail_unsup(C(rt), line, "format width above 300");
            if (prec >= 0)
                snprintf(cf, sizeof cf, "%%%s%ld.%ldll%c", flags, width, prec,
                         conv == 'u' ? 'd' : conv);
            else
                snprintf(cf, sizeof cf, "%%%s%ldll%c", flags, width, conv == 'u' ? 'd' : conv);
            snprintf(tmp, sizeof tmp, cf, v);
            fr_jj_sb_puts(C(rt), &out, tmp);
            break;
        }
        case 'e':
        case 'E':
        case 'f':
        case 'F':
        case 'g':
        case 'G': {
            if (!fr_jj_is_num(arg))
                fr_jj_fail(C(rt), line, "must be real number, not %s", fr_jj_type_name(arg));
            if (width > 300 || prec > 300) fr_jj_fail_unsup(C(rt), line, "format width above 300");
            if (prec < 0) prec = 6;
            snprintf(cf, sizeof cf, "%%%s%ld.%ld%c", flags, width, prec, conv);
            snprintf(tmp, sizeof tmp, cf, fr_jj_num(arg));
            fr_jj_sb_puts(C(rt), &out, tmp);
            break;
        }
        case 'c': {
            jj_sb ch = {0};
            if (arg->t == JT_INT && arg->u.i >= 0 && arg->u.i <= 0x10FFFF)
                fr_jj_sb_putcp(C(rt), &ch, (uint32_t)arg->u.i);
            else if (arg->t == JT_STR && ulen(rt, arg->u.s) == 1)
                fr_jj_sb_put(C(rt), &ch, arg->u.s.p, arg->u.s.n);
            else
                fr_jj_fail(C(rt), line, "%%c requires an int or a single character");
            pad_to(rt, &out, jj_sb_str(&ch), width, left);
            break;
        }
        default: fr_jj_fail(C(rt), line, "unsupported format character '%c'", conv);
        }
    }
    if (!used_mapping && ai < nargs && !mapping && !maplike)
        fr_jj_fail(C(rt), line, "not all arguments converted during string formatting");
    return jj_sb_str(&out);
}

/* ---- filters ------------------------------------------------------------------------------ */

typedef jj_val (*filter_fn)(jj_rt *rt, int line, jj_str name, const jj_val *in, const jj_args *a);

#define FILTER(fname) \
    static jj_val fname(jj_rt *rt, int line, jj_str name, const jj_val *in, const jj_args *a)
#define BIND(...) \
    static const char *const params_[] = {__VA_ARGS__}; \
    bound b; \
    bind(rt, line, "filter", name, params_, FR_ARRAY_LEN(params_), a, &b)
#define NOARGS() bind(rt, line, "filter", name, NULL, 0, a, &(bound){0})

/* str() of the input; undefined is "" (soft_str). */
static jj_str in_str(jj_rt *rt, const jj_val *in) { return fr_jj_str_of(C(rt), in); }

/* An attribute getter as jinja2's make_attrgetter: dotted path, digits index. */
static jj_val get_path(jj_rt *rt, int line, const jj_val *item, jj_str path) {
    jj_val cur = *item;
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < path.n && path.p[j] != '.') j++;
        jj_str part = {path.p + i, j - i};
        bool digits = part.n > 0;
        for (size_t k = 0; k < part.n; k++)
            if (part.p[k] < '0' || part.p[k] > '9') digits = false;
        jj_val key;
        if (digits && part.n < 18)
            key = jj_int(strtoll(fr_jj_cstr(C(rt), part), NULL, 10));
        else
            key = jj_strv(part);
        cur = fr_jj_getitem(rt, line, &cur, &key);
        if (j >= path.n) break;
        i = j + 1;
    }
    return cur;
}

static jj_val attr_of(jj_rt *rt, int line, const jj_val *item, const jj_val *attr) {
    if (attr->t == JT_STR) return get_path(rt, line, item, attr->u.s);
    if (attr->t == JT_INT) return fr_jj_getitem(rt, line, item, attr);
    return fr_jj_getitem(rt, line, item, attr);
}

FILTER(f_abs) {
    NOARGS();
    if (in->t == JT_INT) {
        if (in->u.i == INT64_MIN) fr_jj_fail_unsup(C(rt), line, "integer overflow");
        return jj_int(in->u.i < 0 ? -in->u.i : in->u.i);
    }
    if (in->t == JT_BOOL) return jj_int(in->u.b);
    if (in->t == JT_FLOAT) return jj_float(fabs(in->u.f));
    fr_jj_fail(C(rt), line, "bad operand type for abs(): '%s'", fr_jj_type_name(in));
}

FILTER(f_attr) {
    BIND("name");
    if (!b.given[0]) fr_jj_fail(C(rt), line, "attr filter requires a name");
    jj_str nm = fr_jj_str_of(C(rt), &b.v[0]);
    if (in->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, in);
    /* getattr semantics, without falling back to items for dicts' own methods */
    return fr_jj_getattr(rt, line, in, nm);
}

FILTER(f_capitalize) {
    NOARGS();
    return jj_strv(str_case(rt, in_str(rt, in), CASE_CAPITALIZE));
}

static jj_val length_of(jj_rt *rt, int line, const jj_val *v) {
    switch (v->t) {
    case JT_UNDEF: return jj_int(0);
    case JT_STR: return jj_int((int64_t)ulen(rt, v->u.s));
    case JT_LIST: return jj_int((int64_t)v->u.l->n);
    case JT_DICT: return jj_int((int64_t)v->u.d->n);
    case JT_LOOP:
        fr_jj_loop_fill(rt, v->u.loop, SIZE_MAX);
        return jj_int((int64_t)v->u.loop->npass);
    default: fr_jj_fail(C(rt), line, "object of type '%s' has no len()", fr_jj_type_name(v));
    }
}

FILTER(f_length) {
    NOARGS();
    return length_of(rt, line, in);
}

FILTER(f_default) {
    BIND("default_value", "boolean");
    jj_val dflt = b.given[0] ? b.v[0] : jj_strz("");
    bool boolean = b.given[1] && fr_jj_truthy(&b.v[1]);
    if (in->t == JT_UNDEF || (boolean && !fr_jj_truthy(in))) return dflt;
    return *in;
}

/* Stable merge sort of values by key values. */
typedef struct sortctx {
    jj_rt *rt;          /* for errors */
    int line;           /* for errors */
    const jj_val *keys; /* sort keys, parallel to the items */
    bool reverse;       /* descending */
} sortctx;

static void msort(sortctx *s, size_t *ix, size_t *tmp, size_t n) {
    if (n < 2) return;
    size_t h = n / 2;
    msort(s, ix, tmp, h);
    msort(s, ix + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        fr_jj_charge(C(s->rt), 1);
        int c = fr_jj_compare(C(s->rt), s->line, &s->keys[ix[j]], &s->keys[ix[i]]);
        if (c == 2) c = 0;
        bool take_right = s->reverse ? c > 0 : c < 0;
        tmp[k++] = take_right ? ix[j++] : ix[i++];
    }
    while (i < h) tmp[k++] = ix[i++];
    while (j < n) tmp[k++] = ix[j++];
    memcpy(ix, tmp, n * sizeof *ix);
}

static size_t *sorted_index(jj_rt *rt, int line, const jj_val *keys, size_t n, bool reverse) {
    size_t *ix = fr_jj_alloc(C(rt), (n + 1) * sizeof *ix),
           *tmp = fr_jj_alloc(C(rt), (n + 1) * sizeof *tmp);
    for (size_t i = 0; i < n; i++) ix[i] = i;
    sortctx s = {rt, line, keys, reverse};
    msort(&s, ix, tmp, n);
    return ix;
}

/* Sort key: lower-cased strings unless case_sensitive. */
static jj_val sort_key(jj_rt *rt, const jj_val *v, bool case_sensitive) {
    if (!case_sensitive && v->t == JT_STR) return jj_strv(str_case(rt, v->u.s, CASE_LOWER));
    return *v;
}

FILTER(f_dictsort) {
    BIND("case_sensitive", "by", "reverse");
    if (in->t != JT_DICT) fr_jj_fail(C(rt), line, "dictsort: a mapping is required");
    bool cs = b.given[0] && fr_jj_truthy(&b.v[0]), rev = b.given[2] && fr_jj_truthy(&b.v[2]);
    int pos = 0;
    if (b.given[1]) {
        jj_str by = want_str(rt, line, &b.v[1], "dictsort");
        if (jj_str_eqz(by, "value")) pos = 1;
        else if (!jj_str_eqz(by, "key"))
            fr_jj_fail(C(rt), line, "You can only sort by either 'key' or 'value'");
    }
    const jj_dict *d = in->u.d;
    jj_val *keys = fr_jj_alloc(C(rt), (d->n + 1) * sizeof *keys);
    for (size_t i = 0; i < d->n; i++) keys[i] = sort_key(rt, pos ? &d->v[i] : &d->k[i], cs);
    size_t *ix = sorted_index(rt, line, keys, d->n, rev);
    jj_val out = fr_jj_list_new(C(rt), d->n, false);
    for (size_t i = 0; i < d->n; i++) {
        jj_val t = fr_jj_list_new(C(rt), 2, true);
        t.u.l->v[0] = d->k[ix[i]];
        t.u.l->v[1] = d->v[ix[i]];
        out.u.l->v[i] = t;
    }
    return out;
}

FILTER(f_escape) {
    NOARGS();
    if (in->t == JT_STR && (in->flags & JF_MARKUP)) return *in;
    jj_val v = jj_strv(html_escape(rt, in_str(rt, in)));
    v.flags = JF_MARKUP;
    return v;
}

FILTER(f_first) {
    NOARGS();
    jj_list l = fr_jj_iterate(rt, line, in);
    return l.n ? l.v[0] : jj_undef_hint(jj_s("No first item, sequence was empty."));
}

FILTER(f_last) {
    NOARGS();
    if (in->t == JT_GEN) fr_jj_fail(C(rt), line, "'generator' object is not reversible");
    jj_list l = fr_jj_iterate(rt, line, in);
    return l.n ? l.v[l.n - 1] : jj_undef_hint(jj_s("No last item, sequence was empty."));
}

/* Python float(str): optional whitespace, sign, digits with single underscores, inf/nan. */
static bool parse_py_float(jj_rt *rt, jj_str s, double *out) {
    s = str_strip(rt, s, NULL, true, true);
    if (!s.n || s.n > 400) return false;
    char buf[512];
    size_t k = 0, i = 0;
    if (s.p[i] == '+' || s.p[i] == '-') buf[k++] = s.p[i++];
    jj_str rest = {s.p + i, s.n - i};
    const char *words[] = {"inf", "infinity", "nan"};
    for (size_t w = 0; w < 3; w++) {
        if (rest.n != strlen(words[w])) continue;
        bool eq = true;
        for (size_t j = 0; j < rest.n; j++)
            if ((rest.p[j] | 0x20) != words[w][j]) eq = false;
        if (eq) {
            double v = w == 2 ? NAN : INFINITY;
            *out = buf[0] == '-' && k ? -v : v;
            return true;
        }
    }
    bool digits = false, dot = false, exp = false;
    for (; i < s.n; i++) {
        char ch = s.p[i];
        if (ch >= '0' && ch <= '9') {
            buf[k++] = ch;
            digits = true;
        } else if (ch == '_') {
            if (!(i > 0 && s.p[i - 1] >= '0' && s.p[i - 1] <= '9' && i + 1 < s.n &&
                  s.p[i + 1] >= '0' && s.p[i + 1] <= '9'))
                return false;
        } else if (ch == '.' && !dot && !exp) {
            buf[k++] = ch;
            dot = true;
        } else if ((ch == 'e' || ch == 'E') && digits && !exp) {
            buf[k++] = 'e';
            exp = true;
            digits = false;
            if (i + 1 < s.n && (s.p[i + 1] == '+' || s.p[i + 1] == '-')) buf[k++] = s.p[++i];
        } else {
            return false;
        }
    }
    if (!digits) return false;
    buf[k] = 0;
    (void)rt;
    *out = strtod(buf, NULL);
    return true;
}

/* Python int(str, base). */
static bool parse_py_int(jj_rt *rt, jj_str s, int base, int64_t *out) {
    s = str_strip(rt, s, NULL, true, true);
    size_t i = 0;
    bool neg = false;
    if (i < s.n && (s.p[i] == '+' || s.p[i] == '-')) neg = s.p[i++] == '-';
    if (base == 0 || base == 16 || base == 8 || base == 2) {
        if (i + 1 < s.n && s.p[i] == '0') {
            char k = (char)(s.p[i + 1] | 0x20);
            int pb = k == 'x' ? 16 : k == 'o' ? 8 : k == 'b' ? 2 : 0;
            if (pb && (base == 0 || base == pb)) {
                base = pb;
                i += 2;
                if (i < s.n && s.p[i] == '_') i++;
            }
        }
        if (base == 0) base = 10;
    }
    if (base < 2 || base > 36 || i >= s.n) return false;
    uint64_t acc = 0;
    bool any = false;
    for (; i < s.n; i++) {
        char ch = s.p[i];
        if (ch == '_' && any && i + 1 < s.n && s.p[i + 1] != '_') continue;
        int d = ch >= '0' && ch <= '9'                 ? ch - '0'
            : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z' ? (ch | 0x20) - 'a' + 10
                                                       : 99;
        if (d >= base) return false;
        if (acc > (UINT64_MAX - (uint64_t)d) / (uint64_t)base) return false;
        acc = acc * (uint64_t)base + (uint64_t)d;
        if (acc > (uint64_t)INT64_MAX + (neg ? 1 : 0)) return false;
        any = true;
    }
    if (!any) return false;
    *out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
    return true;
}

FILTER(f_float) {
    BIND("default");
    jj_val dflt = b.given[0] ? b.v[0] : jj_float(0.0);
    double d;
    switch (in->t) {
    case JT_FLOAT: return *in;
    case JT_INT:
    case JT_BOOL: return jj_float(fr_jj_num(in));
    case JT_STR: return parse_py_float(rt, in->u.s, &d) ? jj_float(d) : dflt;
    case JT_UNDEF: fr_jj_fail_undefined(rt, line, in);
    default: return dflt;
    }
}

FILTER(f_int) {
    BIND("default", "base");
    jj_val dflt = b.given[0] ? b.v[0] : jj_int(0);
    int64_t base = b.given[1] ? want_int(rt, line, &b.v[1], "int") : 10;
    int64_t i;
    double d;
    switch (in->t) {
    case JT_INT: return *in;
    case JT_BOOL: return jj_int(in->u.b);
    case JT_FLOAT:
        if (!isfinite(in->u.f))
            fr_jj_fail(C(rt), line, "cannot convert float %s to integer",
                       isnan(in->u.f) ? "NaN" : "infinity");
        if (fabs(in->u.f) >= 9.2e18) fr_jj_fail_unsup(C(rt), line, "integer overflow");
        return jj_int((int64_t)in->u.f);
    case JT_STR:
        if (parse_py_int(rt, in->u.s, (int)base, &i)) return jj_int(i);
        if (parse_py_float(rt, in->u.s, &d) && isfinite(d) && fabs(d) < 9.2e18)
            return jj_int((int64_t)d);
        return dflt;
    case JT_UNDEF: fr_jj_fail_undefined(rt, line, in);
    default: return dflt;
    }
}

FILTER(f_indent) {
    BIND("width", "first", "blank");
    /* jinja2 does `s += "\n"`: only strings are accepted */
    if (in->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, in);
    if (in->t != JT_STR)
        fr_jj_fail(C(rt), line, "unsupported operand type(s) for +=: '%s' and 'str'",
                   fr_jj_type_name(in));
    jj_str ind;
    if (b.given[0] && b.v[0].t == JT_STR)
        ind = b.v[0].u.s;
    else {
        int64_t w = b.given[0] ? want_int(rt, line, &b.v[0], "indent") : 4;
        if (w < 0) w = 0;
        if (w > 10000) fr_jj_fail_unsup(C(rt), line, "indent width above 10000");
        char *sp = fr_jj_alloc(C(rt), (size_t)w + 1);
        memset(sp, ' ', (size_t)w);
        ind.p = sp;
        ind.n = (size_t)w;
    }
    bool first = b.given[1] && fr_jj_truthy(&b.v[1]), blank = b.given[2] && fr_jj_truthy(&b.v[2]);
    jj_str s = in_str(rt, in);
    jj_sb tmp = {0};
    fr_jj_sb_put(C(rt), &tmp, s.p, s.n);
    fr_jj_sb_putc(C(rt), &tmp, '\n'); /* jinja2 appends a newline before splitlines() */
    jj_val lines = str_splitlines(rt, jj_sb_str(&tmp), false);
    jj_sb out = {0};
    if (first) fr_jj_sb_put(C(rt), &out, ind.p, ind.n);
    for (size_t i = 0; i < lines.u.l->n; i++) {
        jj_str ln = lines.u.l->v[i].u.s;
        if (i) {
            fr_jj_sb_putc(C(rt), &out, '\n');
            if (blank || ln.n) fr_jj_sb_put(C(rt), &out, ind.p, ind.n);
        }
        fr_jj_sb_put(C(rt), &out, ln.p, ln.n);
    }
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_items) {
    NOARGS();
    if (in->t == JT_UNDEF) return fr_jj_list_new(C(rt), 0, false);
    if (in->t != JT_DICT) fr_jj_fail(C(rt), line, "Can only get item pairs from a mapping.");
    const jj_dict *d = in->u.d;
    jj_val out = fr_jj_list_new(C(rt), d->n, false);
    for (size_t i = 0; i < d->n; i++) {
        jj_val t = fr_jj_list_new(C(rt), 2, true);
        t.u.l->v[0] = d->k[i];
        t.u.l->v[1] = d->v[i];
        out.u.l->v[i] = t;
    }
    return out;
}

FILTER(f_join) {
    BIND("d", "attribute");
    jj_str sep = b.given[0] ? fr_jj_str_of(C(rt), &b.v[0]) : jj_s("");
    jj_list l = fr_jj_iterate(rt, line, in);
    jj_sb out = {0};
    for (size_t i = 0; i < l.n; i++) {
        if (i) fr_jj_sb_put(C(rt), &out, sep.p, sep.n);
        jj_val item =
            b.given[1] && b.v[1].t != JT_NONE ? attr_of(rt, line, &l.v[i], &b.v[1]) : l.v[i];
        fr_jj_to_str(C(rt), &out, &item);
    }
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_list) {
    NOARGS();
    jj_list l = fr_jj_iterate(rt, line, in);
    jj_val v = fr_jj_list_new(C(rt), l.n, false);
    if (l.n) memcpy(v.u.l->v, l.v, l.n * sizeof(jj_val));
    return v;
}

FILTER(f_lower) {
    NOARGS();
    return jj_strv(str_case(rt, in_str(rt, in), CASE_LOWER));
}

FILTER(f_upper) {
    NOARGS();
    return jj_strv(str_case(rt, in_str(rt, in), CASE_UPPER));
}

FILTER(f_title) {
    NOARGS();
    /* jinja2: split on runs of [-\s({\[<]; each piece's first character upper, rest lower */
    jj_str s = in_str(rt, in);
    jj_sb out = {0};
    size_t i = 0;
    bool at_start = true;
    while (i < s.n) {
        uint32_t c = fr_jj_utf8_next(s.p, s.n, &i);
        bool sep = c == '-' || fr_jj_py_isspace(c) || c == '(' || c == '{' || c == '[' || c == '<';
        if (sep) {
            fr_jj_sb_putcp(C(rt), &out, c);
            at_start = true;
            continue;
        }
        fr_jj_sb_putcp(C(rt), &out, at_start ? cp_upper(c) : cp_lower(c));
        at_start = false;
    }
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_map) {
    if (!fr_jj_truthy(in)) return fr_jj_list_new(C(rt), 0, false); /* jinja2: `if value:` first */
    jj_list l = fr_jj_iterate(rt, line, in);
    jj_val out = fr_jj_list_new(C(rt), l.n, false);
    if (a->npos == 0) {
        jj_val attr = jj_undef(), dflt = jj_undef();
        bool has_attr = false, has_dflt = false;
        for (size_t k = 0; k < a->nkw; k++) {
            if (jj_str_eqz(a->kwn[k], "attribute")) attr = a->kwv[k], has_attr = true;
            else if (jj_str_eqz(a->kwn[k], "default")) dflt = a->kwv[k], has_dflt = true;
            else
                fr_jj_fail(C(rt), line, "map: unexpected keyword argument '%.*s'",
                           NAMEF(a->kwn[k]));
        }
        if (!has_attr) fr_jj_fail(C(rt), line, "map requires a filter argument");
        for (size_t i = 0; i < l.n; i++) {
            jj_val v = attr_of(rt, line, &l.v[i], &attr);
            if (has_dflt && v.t == JT_UNDEF) v = dflt;
            out.u.l->v[i] = v;
        }
        return out;
    }
    jj_str fname = want_str(rt, line, &a->pos[0], "map");
    int id = fr_jj_filter_id(fname);
    jj_args rest = *a;
    rest.pos++;
    rest.npos--;
    for (size_t i = 0; i < l.n; i++)
        out.u.l->v[i] = fr_jj_call_filter(rt, line, id, fname, &l.v[i], &rest);
    return out;
}

static jj_val minmax(jj_rt *rt, int line, jj_str name, const jj_val *in, const jj_args *a,
                     bool max) {
    BIND("case_sensitive", "attribute");
    bool cs = b.given[0] && fr_jj_truthy(&b.v[0]);
    jj_list l = fr_jj_iterate(rt, line, in);
    if (!l.n) return jj_undef_hint(jj_s("No aggregated item, sequence was empty."));
    size_t best = 0;
    jj_val bk = {0};
    for (size_t i = 0; i < l.n; i++) {
        jj_val item =
            b.given[1] && b.v[1].t != JT_NONE ? attr_of(rt, line, &l.v[i], &b.v[1]) : l.v[i];
        jj_val k = sort_key(rt, &item, cs);
        if (i == 0) {
            bk = k;
            continue;
        }
        int c = fr_jj_compare(C(rt), line, &k, &bk);
        if (c != 2 && (max ? c > 0 : c < 0)) {
            best = i;
            bk = k;
        }
    }
    return l.v[best];
}

FILTER(f_max) { return minmax(rt, line, name, in, a, true); }
FILTER(f_min) { return minmax(rt, line, name, in, a, false); }

/* select/reject/selectattr/rejectattr */
static jj_val select_impl(jj_rt *rt, int line, const jj_val *in, const jj_args *a, bool attr,
                          bool keep) {
    if (!fr_jj_truthy(in)) return fr_jj_list_new(C(rt), 0, false); /* jinja2: `if value:` first */
    jj_list l = fr_jj_iterate(rt, line, in);
    size_t skip = 0;
    jj_val attrname = jj_undef();
    if (attr) {
        if (a->npos < 1) fr_jj_fail(C(rt), line, "Missing parameter for attribute name");
        attrname = a->pos[0];
        skip = 1;
    }
    bool has_test = a->npos > skip;
    jj_str tname = has_test ? want_str(rt, line, &a->pos[skip], "select") : jj_s("");
    int tid = has_test ? fr_jj_test_id(tname) : 0;
    jj_args rest = *a;
    if (has_test) {
        rest.pos += skip + 1;
        rest.npos -= skip + 1;
    } else {
        rest.npos = 0;
    }
    vlist out = {0};
    for (size_t i = 0; i < l.n; i++) {
        jj_val item = attr ? attr_of(rt, line, &l.v[i], &attrname) : l.v[i];
        bool ok =
            has_test ? fr_jj_call_test(rt, line, tid, tname, &item, &rest) : fr_jj_truthy(&item);
        if (ok == keep) vl_push(rt, &out, l.v[i]);
    }
    return vl_list(rt, &out);
}

FILTER(f_select) { (void)name; return select_impl(rt, line, in, a, false, true); }
FILTER(f_reject) { (void)name; return select_impl(rt, line, in, a, false, false); }
FILTER(f_selectattr) { (void)name; return select_impl(rt, line, in, a, true, true); }
FILTER(f_rejectattr) { (void)name; return select_impl(rt, line, in, a, true, false); }

FILTER(f_replace) {
    BIND("old", "new", "count");
    if (!b.given[0] || !b.given[1]) fr_jj_fail(C(rt), line, "replace requires old and new");
    int64_t count = b.given[2] && b.v[2].t != JT_NONE ? want_int(rt, line, &b.v[2], "replace") : -1;
    return jj_strv(str_replace(rt, in_str(rt, in), fr_jj_str_of(C(rt), &b.v[0]),
                               fr_jj_str_of(C(rt), &b.v[1]), count));
}

/* The items of reversed(x) (the generator behind |reverse). */
FILTER(f_reversed_items) {
    (void)name;
    (void)a;
    jj_list l = fr_jj_iterate(rt, line, in);
    jj_val v = fr_jj_list_new(C(rt), l.n, false);
    for (size_t i = 0; i < l.n; i++) v.u.l->v[i] = l.v[l.n - 1 - i];
    return v;
}

static jj_val make_gen(jj_rt *rt, int line, int id, jj_str name, const jj_val *in,
                       const jj_args *a);
static int filter_index(const char *name);

FILTER(f_reverse) {
    NOARGS();
    if (in->t == JT_STR) {
        jj_val z = jj_none();
        jj_val m1 = jj_int(-1);
        return fr_jj_slice(rt, line, in, &z, &z, &m1, false);
    }
    if (in->t == JT_GEN) /* reversed() fails, jinja2 falls back to a reversed list */
        return f_reversed_items(rt, line, name, in, a);
    if (in->t != JT_LIST && in->t != JT_DICT && in->t != JT_UNDEF && in->t != JT_LOOP)
        fr_jj_fail(C(rt), line, "argument must be iterable");
    return make_gen(rt, line, filter_index("(reversed)"), name, in, a);
}

static double round_half_even_digits(double x, int64_t nd) {
    if (nd > 323) return x;
    if (nd < -308) return 0.0 * x;
    if (nd >= 0) {
        char buf[800];
        snprintf(buf, sizeof buf, "%.*f", (int)nd, x);
        return strtod(buf, NULL);
    }
    double p = pow(10.0, (double)-nd);
    return nearbyint(x / p) * p;
}

FILTER(f_round) {
    BIND("precision", "method");
    int64_t prec = b.given[0] ? want_int(rt, line, &b.v[0], "round") : 0;
    jj_str method = b.given[1] ? want_str(rt, line, &b.v[1], "round") : jj_s("common");
    bool common = jj_str_eqz(method, "common"), ceil_ = jj_str_eqz(method, "ceil"),
         floor_ = jj_str_eqz(method, "floor");
    if (!common && !ceil_ && !floor_)
        fr_jj_fail(C(rt), line, "method must be 'common', 'ceil' or 'floor'");
    if (!fr_jj_is_num(in))
        fr_jj_fail(C(rt), line, "type %s doesn't define __round__ method", fr_jj_type_name(in));
    if (common) {
        if (in->t != JT_FLOAT) return in->t == JT_BOOL ? jj_int(in->u.b) : *in; /* round(int, n) */
        if (!isfinite(in->u.f)) return *in;
        return jj_float(round_half_even_digits(in->u.f, prec));
    }
    if (prec > 308 || prec < -308) fr_jj_fail_unsup(C(rt), line, "round precision out of range");
    double p = pow(10.0, (double)prec), x = fr_jj_num(in) * p;
    return jj_float((ceil_ ? ceil(x) : floor(x)) / p);
}

FILTER(f_safe) {
    NOARGS();
    jj_val v = jj_strv(in_str(rt, in));
    v.flags = JF_MARKUP;
    return v;
}

FILTER(f_sort) {
    BIND("reverse", "case_sensitive", "attribute");
    bool rev = b.given[0] && fr_jj_truthy(&b.v[0]), cs = b.given[1] && fr_jj_truthy(&b.v[1]);
    jj_list l = fr_jj_iterate(rt, line, in);
    jj_val *keys = fr_jj_alloc(C(rt), (l.n + 1) * sizeof *keys);
    for (size_t i = 0; i < l.n; i++) {
        jj_val item =
            b.given[2] && b.v[2].t != JT_NONE ? attr_of(rt, line, &l.v[i], &b.v[2]) : l.v[i];
        keys[i] = sort_key(rt, &item, cs);
    }
    size_t *ix = sorted_index(rt, line, keys, l.n, rev);
    jj_val out = fr_jj_list_new(C(rt), l.n, false);
    for (size_t i = 0; i < l.n; i++) out.u.l->v[i] = l.v[ix[i]];
    return out;
}

FILTER(f_string) {
    NOARGS();
    if (in->t == JT_STR) return *in;
    return jj_strv(in_str(rt, in));
}

FILTER(f_sum) {
    BIND("attribute", "start");
    jj_val total = b.given[1] ? b.v[1] : jj_int(0);
    jj_list l = fr_jj_iterate(rt, line, in);
    for (size_t i = 0; i < l.n; i++) {
        jj_val item =
            b.given[0] && b.v[0].t != JT_NONE ? attr_of(rt, line, &l.v[i], &b.v[0]) : l.v[i];
        total = fr_jj_arith(rt, line, JO_ADD, &total, &item);
    }
    return total;
}

FILTER(f_tojson) {
    BIND("ensure_ascii", "indent", "separators", "sort_keys");
    jj_json_opts o;
    memset(&o, 0, sizeof o);
    o.ensure_ascii = b.given[0] && fr_jj_truthy(&b.v[0]);
    o.sort_keys = b.given[3] && fr_jj_truthy(&b.v[3]);
    if (b.given[1] && b.v[1].t != JT_NONE) {
        o.has_indent = true;
        if (b.v[1].t == JT_STR) o.indent = b.v[1].u.s;
        else {
            int64_t w = want_int(rt, line, &b.v[1], "tojson indent");
            if (w < 0) w = 0;
            if (w > 1000) fr_jj_fail_unsup(C(rt), line, "tojson indent above 1000");
            char *sp = fr_jj_alloc(C(rt), (size_t)w + 1);
            memset(sp, ' ', (size_t)w);
            o.indent.p = sp;
            o.indent.n = (size_t)w;
        }
    }
    o.item_sep = o.has_indent ? jj_s(",") : jj_s(", ");
    o.key_sep = jj_s(": ");
    if (b.given[2] && b.v[2].t != JT_NONE) {
        jj_list sp = fr_jj_iterate(rt, line, &b.v[2]);
        if (sp.n != 2 || sp.v[0].t != JT_STR || sp.v[1].t != JT_STR)
            fr_jj_fail(C(rt), line, "tojson: separators must be a pair of strings");
        o.item_sep = sp.v[0].u.s;
        o.key_sep = sp.v[1].u.s;
    }
    jj_sb out = {0};
    fr_jj_to_json(C(rt), line, &out, in, &o);
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_trim) {
    BIND("chars");
    jj_str s = in_str(rt, in);
    if (b.given[0] && b.v[0].t != JT_NONE) {
        jj_str chars = want_str(rt, line, &b.v[0], "trim");
        return jj_strv(str_strip(rt, s, &chars, true, true));
    }
    return jj_strv(str_strip(rt, s, NULL, true, true));
}

FILTER(f_unique) {
    BIND("case_sensitive", "attribute");
    bool cs = b.given[0] && fr_jj_truthy(&b.v[0]);
    jj_list l = fr_jj_iterate(rt, line, in);
    vlist out = {0}, seen = {0};
    for (size_t i = 0; i < l.n; i++) {
        jj_val item =
            b.given[1] && b.v[1].t != JT_NONE ? attr_of(rt, line, &l.v[i], &b.v[1]) : l.v[i];
        jj_val k = sort_key(rt, &item, cs);
        if ((k.t == JT_LIST && !(k.flags & JF_TUPLE)) || k.t == JT_DICT || k.t == JT_NS ||
            k.t == JT_GEN)
            fr_jj_fail(C(rt), line, "unhashable type: '%s'", fr_jj_type_name(&k));
        bool dup = false;
        for (size_t j = 0; j < seen.n && !dup; j++) {
            fr_jj_charge(C(rt), 1);
            dup = fr_jj_equal(C(rt), &seen.v[j], &k);
        }
        if (dup) continue;
        vl_push(rt, &seen, k);
        vl_push(rt, &out, l.v[i]);
    }
    return vl_list(rt, &out);
}

FILTER(f_wordcount) {
    NOARGS();
    jj_str s = in_str(rt, in);
    fr_jj_charge(C(rt), s.n / 64);
    size_t i = 0;
    int64_t n = 0;
    bool in_word = false;
    while (i < s.n) {
        uint32_t c = fr_jj_utf8_next(s.p, s.n, &i);
        bool w = c == '_' || cp_alpha(c) || cp_numeric(c);
        if (w && !in_word) n++;
        in_word = w;
    }
    return jj_int(n);
}

FILTER(f_center) {
    BIND("width");
    int64_t w = b.given[0] ? want_int(rt, line, &b.v[0], "center") : 80;
    jj_str s = in_str(rt, in);
    int64_t n = (int64_t)ulen(rt, s);
    if (w <= n) return jj_strv(s);
    if (w > 100000) fr_jj_fail_unsup(C(rt), line, "center width above 100000");
    int64_t pad = w - n, left = pad / 2 + (pad & w & 1);
    jj_sb out = {0};
    for (int64_t i = 0; i < left; i++) fr_jj_sb_putc(C(rt), &out, ' ');
    fr_jj_sb_put(C(rt), &out, s.p, s.n);
    for (int64_t i = 0; i < pad - left; i++) fr_jj_sb_putc(C(rt), &out, ' ');
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_truncate) {
    BIND("length", "killwords", "end", "leeway");
    int64_t len = b.given[0] ? want_int(rt, line, &b.v[0], "truncate") : 255;
    bool killwords = b.given[1] && fr_jj_truthy(&b.v[1]);
    jj_str end = b.given[2] ? want_str(rt, line, &b.v[2], "truncate") : jj_s("...");
    int64_t leeway =
        b.given[3] && b.v[3].t != JT_NONE ? want_int(rt, line, &b.v[3], "truncate") : 5;
    int64_t endn = (int64_t)ulen(rt, end);
    if (len < endn)
        fr_jj_fail(C(rt), line, "expected length >= %lld, got %lld", (long long)endn,
                   (long long)len);
    if (leeway < 0) fr_jj_fail(C(rt), line, "expected leeway >= 0, got %lld", (long long)leeway);
    if (in->t == JT_UNDEF) return *in;
    if (in->t != JT_STR) {
        /* jinja2 returns anything short enough unchanged, else slices it as a string */
        int64_t n = length_of(rt, line, in).u.i;
        if (n <= len + leeway) return *in;
        fr_jj_fail(C(rt), line, "truncate: a string is required, not '%s'", fr_jj_type_name(in));
    }
    jj_str s = in->u.s;
    size_t n, *off = cp_offsets(rt, s, &n);
    if ((int64_t)n <= len + leeway) return jj_strv(s);
    size_t keep = (size_t)(len - endn);
    jj_str head = {s.p, off ? off[keep] : keep};
    if (!killwords) {
        const char *sp = NULL;
        for (size_t i = head.n; i-- > 0;)
            if (head.p[i] == ' ') {
                sp = head.p + i;
                break;
            }
        if (sp) head.n = (size_t)(sp - head.p);
    }
    jj_sb out = {0};
    fr_jj_sb_put(C(rt), &out, head.p, head.n);
    fr_jj_sb_put(C(rt), &out, end.p, end.n);
    return jj_strv(jj_sb_str(&out));
}

FILTER(f_batch) {
    BIND("linecount", "fill_with");
    if (!b.given[0]) fr_jj_fail(C(rt), line, "batch() missing required argument 'linecount'");
    int64_t per = want_int(rt, line, &b.v[0], "batch");
    if (per <= 0) fr_jj_fail(C(rt), line, "batch: linecount must be positive"); /* jinja2 hangs */
    bool fill = b.given[1] && b.v[1].t != JT_NONE;
    jj_list l = fr_jj_iterate(rt, line, in);
    vlist out = {0};
    for (size_t i = 0; i < l.n; i += (size_t)per) {
        size_t n = FR_MIN((size_t)per, l.n - i), m = fill ? (size_t)per : n;
        jj_val row = fr_jj_list_new(C(rt), m, false);
        for (size_t k = 0; k < m; k++) row.u.l->v[k] = k < n ? l.v[i + k] : b.v[1];
        vl_push(rt, &out, row);
    }
    return vl_list(rt, &out);
}

FILTER(f_slice) {
    BIND("slices", "fill_with");
    if (!b.given[0]) fr_jj_fail(C(rt), line, "slice() missing required argument 'slices'");
    int64_t slices = want_int(rt, line, &b.v[0], "slice");
    if (slices <= 0) fr_jj_fail(C(rt), line, "slice: the number of slices must be positive");
    if (slices > JJ_MAX_RANGE)
        fr_jj_fail_unsup(C(rt), line, "slice into more than %d parts", JJ_MAX_RANGE);
    bool fill = b.given[1] && b.v[1].t != JT_NONE;
    jj_list l = fr_jj_iterate(rt, line, in);
    size_t per = l.n / (size_t)slices, extra = l.n % (size_t)slices, offset = 0;
    jj_val out = fr_jj_list_new(C(rt), (size_t)slices, false);
    for (size_t k = 0; k < (size_t)slices; k++) {
        size_t start = offset + k * per;
        if (k < extra) offset++;
        size_t end = offset + (k + 1) * per;
        bool pad = fill && k >= extra;
        jj_val row = fr_jj_list_new(C(rt), end - start + (pad ? 1 : 0), false);
        for (size_t i = start; i < end; i++) row.u.l->v[i - start] = l.v[i];
        if (pad) row.u.l->v[end - start] = b.v[1];
        out.u.l->v[k] = row;
    }
    return out;
}

FILTER(f_format) {
    if (a->npos && a->nkw)
        fr_jj_fail(C(rt), line, "can't handle positional and keyword arguments at the same time");
    jj_str fmt = in_str(rt, in);
    if (a->nkw) {
        jj_val d = fr_jj_dict_new(C(rt), a->nkw);
        for (size_t i = 0; i < a->nkw; i++) {
            d.u.d->k[i] = jj_strv(a->kwn[i]);
            d.u.d->v[i] = a->kwv[i];
        }
        return jj_strv(percent_format(rt, line, fmt, &d, 1, &d, true));
    }
    (void)name;
    return jj_strv(percent_format(rt, line, fmt, a->pos, a->npos, NULL, false));
}

static const struct {
    const char *name; /* filter name ("(...)": internal, not reachable from templates) */
    filter_fn fn;     /* implementation */
    bool gen;         /* jinja2's version is a generator: return a lazy JT_GEN */
} FILTERS[] = {
    {"abs", f_abs, false},           {"attr", f_attr, false},
    {"batch", f_batch, true},        {"slice", f_slice, true},
    {"capitalize", f_capitalize, false}, {"center", f_center, false},
    {"count", f_length, false},      {"d", f_default, false},
    {"default", f_default, false},   {"dictsort", f_dictsort, false},
    {"e", f_escape, false},          {"escape", f_escape, false},
    {"first", f_first, false},       {"float", f_float, false},
    {"format", f_format, false},     {"indent", f_indent, false},
    {"int", f_int, false},           {"items", f_items, true},
    {"join", f_join, false},         {"last", f_last, false},
    {"length", f_length, false},     {"list", f_list, false},
    {"lower", f_lower, false},       {"map", f_map, true},
    {"max", f_max, false},           {"min", f_min, false},
    {"reject", f_reject, true},      {"rejectattr", f_rejectattr, true},
    {"replace", f_replace, false},   {"reverse", f_reverse, false},
    {"round", f_round, false},       {"safe", f_safe, false},
    {"select", f_select, true},      {"selectattr", f_selectattr, true},
    {"sort", f_sort, false},         {"string", f_string, false},
    {"sum", f_sum, false},           {"title", f_title, false},
    {"tojson", f_tojson, false},     {"trim", f_trim, false},
    {"truncate", f_truncate, false}, {"unique", f_unique, true},
    {"upper", f_upper, false},       {"wordcount", f_wordcount, false},
    {"(reversed)", f_reversed_items, true},
};

static int filter_index(const char *name) {
    for (size_t i = 0; i < FR_ARRAY_LEN(FILTERS); i++)
        if (!strcmp(FILTERS[i].name, name)) return (int)i;
    return -1;
}

static jj_val make_gen(jj_rt *rt, int line, int id, jj_str name, const jj_val *in,
                       const jj_args *a) {
    jj_gen *g = fr_jj_alloc(C(rt), sizeof *g);
    g->filter = id;
    g->name = name;
    g->in = *in;
    g->args = *a;
    g->line = line;
    /* Python prints the generator function and an address; the address is a fixed stand-in so
     * that rendering stays deterministic */
    filter_fn f = FILTERS[id].fn;
    g->repr = f == f_map ? "<generator object sync_do_map at 0x7f0000000000>"
              : f == f_batch ? "<generator object do_batch at 0x7f0000000000>"
              : f == f_slice ? "<generator object sync_do_slice at 0x7f0000000000>"
              : f == f_unique ? "<generator object sync_do_unique at 0x7f0000000000>"
              : f == f_items  ? "<generator object do_items at 0x7f0000000000>"
              : f != f_reversed_items ? "<generator object select_or_reject at 0x7f0000000000>"
              : in->t == JT_DICT ? "<dict_reversekeyiterator object at 0x7f0000000000>"
              : (in->flags & JF_RANGE) ? "<range_iterator object at 0x7f0000000000>"
              : in->t == JT_LIST ? "<list_reverseiterator object at 0x7f0000000000>"
                                 : "<reversed object at 0x7f0000000000>";
    jj_val v = {0};
    v.t = JT_GEN;
    v.u.gen = g;
    return v;
}

static jj_val run_generator(jj_rt *rt, const jj_gen *g) {
    return FILTERS[g->filter].fn(rt, g->line, g->name, &g->in, &g->args);
}

/* Filters jinja2 has that this interpreter does not. */
static const char *const FILTERS_UNSUPPORTED[] = {
    "filesizeformat", "forceescape", "groupby", "pprint", "random", "striptags", "urlencode",
    "urlize", "wordwrap", "xmlattr",
};

int fr_jj_filter_id(jj_str name) {
    for (size_t i = 0; i < FR_ARRAY_LEN(FILTERS); i++)
        if (FILTERS[i].name[0] != '(' && jj_str_eqz(name, FILTERS[i].name)) return (int)i;
    for (size_t i = 0; i < FR_ARRAY_LEN(FILTERS_UNSUPPORTED); i++)
        if (jj_str_eqz(name, FILTERS_UNSUPPORTED[i])) return -2;
    return -1;
}

jj_val fr_jj_call_filter(jj_rt *rt, int line, int id, jj_str name, const jj_val *in,
                         const jj_args *a) {
    if (id == -2) fr_jj_fail_unsup(C(rt), line, "filter '%.*s'", NAMEF(name));
    if (id < 0 || (size_t)id >= FR_ARRAY_LEN(FILTERS))
        fr_jj_fail(C(rt), line, "no filter named '%.*s'", NAMEF(name));
    if (FILTERS[id].gen) return make_gen(rt, line, id, name, in, a);
    return FILTERS[id].fn(rt, line, name, in, a);
}

/* ---- tests -------------------------------------------------------------------------------- */

typedef enum {
    T_DEFINED, T_UNDEFINED, T_NONE, T_BOOLEAN, T_FALSE, T_TRUE, T_INTEGER, T_FLOAT, T_NUMBER,
    T_STRING, T_MAPPING, T_ITERABLE, T_SEQUENCE, T_CALLABLE, T_ODD, T_EVEN, T_DIVISIBLEBY,
    T_EQ, T_NE, T_GT, T_GE, T_LT, T_LE, T_IN, T_SAMEAS, T_LOWER, T_UPPER, T_ESCAPED, T_FILTER,
    T_TEST,
} test_kind;

static const struct {
    const char *name; /* test name */
    test_kind k;      /* which test */
} TESTS[] = {
    {"defined", T_DEFINED}, {"undefined", T_UNDEFINED}, {"none", T_NONE},
    {"boolean", T_BOOLEAN}, {"false", T_FALSE},         {"true", T_TRUE},
    {"integer", T_INTEGER}, {"float", T_FLOAT},         {"number", T_NUMBER},
    {"string", T_STRING},   {"mapping", T_MAPPING},     {"iterable", T_ITERABLE},
    {"sequence", T_SEQUENCE}, {"callable", T_CALLABLE}, {"odd", T_ODD},
    {"even", T_EVEN},       {"divisibleby", T_DIVISIBLEBY}, {"eq", T_EQ},
    {"equalto", T_EQ},      {"==", T_EQ},               {"ne", T_NE},
    {"!=", T_NE},           {"gt", T_GT},               {"greaterthan", T_GT},
    {">", T_GT},            {"ge", T_GE},               {">=", T_GE},
    {"lt", T_LT},           {"lessthan", T_LT},         {"<", T_LT},
    {"le", T_LE},           {"<=", T_LE},               {"in", T_IN},
    {"sameas", T_SAMEAS},   {"lower", T_LOWER},         {"upper", T_UPPER},
    {"escaped", T_ESCAPED}, {"filter", T_FILTER},       {"test", T_TEST},
};

int fr_jj_test_id(jj_str name) {
    for (size_t i = 0; i < FR_ARRAY_LEN(TESTS); i++)
        if (jj_str_eqz(name, TESTS[i].name)) return (int)i;
    return -1;
}

static bool str_is_case(jj_rt *rt, jj_str s, bool upper) {
    bool cased = false;
    size_t i = 0;
    fr_jj_charge(C(rt), s.n / 64);
    while (i < s.n) {
        uint32_t c = fr_jj_utf8_next(s.p, s.n, &i);
        int k = cp_cat(c);
        if (k == UTF8PROC_CATEGORY_LT) return false;
        if (k == UTF8PROC_CATEGORY_LU) {
            if (!upper) return false;
            cased = true;
        } else if (k == UTF8PROC_CATEGORY_LL) {
            if (upper) return false;
            cased = true;
        }
    }
    return cased;
}

bool fr_jj_call_test(jj_rt *rt, int line, int id, jj_str name, const jj_val *in, const jj_args *a) {
    if (id < 0 || (size_t)id >= FR_ARRAY_LEN(TESTS))
        fr_jj_fail(C(rt), line, "no test named '%.*s'", NAMEF(name));
    test_kind k = TESTS[id].k;
    const char *one[] = {"value"};
    bound b;
    bool needs_arg = k == T_DIVISIBLEBY || k == T_EQ || k == T_NE || k == T_GT || k == T_GE ||
                     k == T_LT || k == T_LE || k == T_IN || k == T_SAMEAS;
    bind(rt, line, "test", name, one, needs_arg ? 1 : 0, a, &b);
    if (needs_arg && !b.given[0])
        fr_jj_fail(C(rt), line, "test '%.*s' requires an argument", NAMEF(name));
    const jj_val *x = &b.v[0];
    switch (k) {
    case T_DEFINED: return in->t != JT_UNDEF;
    case T_UNDEFINED: return in->t == JT_UNDEF;
    case T_NONE: return in->t == JT_NONE;
    case T_BOOLEAN: return in->t == JT_BOOL;
    case T_FALSE: return in->t == JT_BOOL && !in->u.b;
    case T_TRUE: return in->t == JT_BOOL && in->u.b;
    case T_INTEGER: return in->t == JT_INT;
    case T_FLOAT: return in->t == JT_FLOAT;
    case T_NUMBER: return fr_jj_is_num(in);
    case T_STRING: return in->t == JT_STR;
    case T_MAPPING: return in->t == JT_DICT;
    case T_ITERABLE:
        return in->t == JT_STR || in->t == JT_LIST || in->t == JT_DICT || in->t == JT_UNDEF ||
               in->t == JT_LOOP || in->t == JT_GEN;
    case T_SEQUENCE:
        return in->t == JT_STR || in->t == JT_LIST || in->t == JT_DICT || in->t == JT_UNDEF;
    case T_CALLABLE: return in->t == JT_FUNC || in->t == JT_UNDEF || in->t == JT_LOOP;
    case T_ODD:
    case T_EVEN:
    case T_DIVISIBLEBY: {
        jj_val two = jj_int(2);
        jj_val m = fr_jj_arith(rt, line, JO_MOD, in, k == T_DIVISIBLEBY ? x : &two);
        jj_val zero = jj_int(0);
        bool z = fr_jj_equal(C(rt), &m, &zero);
        return k == T_ODD ? !z : z;
    }
    case T_EQ: return fr_jj_equal(C(rt), in, x);
    case T_NE: return !fr_jj_equal(C(rt), in, x);
    case T_GT:
    case T_GE:
    case T_LT:
    case T_LE: {
        int c = fr_jj_compare(C(rt), line, in, x);
        if (c == 2) return false;
        return k == T_GT ? c > 0 : k == T_GE ? c >= 0 : k == T_LT ? c < 0 : c <= 0;
    }
    case T_IN: return fr_jj_contains(rt, line, x, in);
    case T_SAMEAS:
        if (in->t != x->t) return false;
        switch (in->t) {
        case JT_NONE: case JT_UNDEF: return in->t == JT_NONE;
        case JT_BOOL: return in->u.b == x->u.b;
        case JT_INT: return in->u.i == x->u.i && in->u.i >= -5 && in->u.i <= 256;
        case JT_STR: return in->u.s.p == x->u.s.p && in->u.s.n == x->u.s.n;
        case JT_LIST: return in->u.l == x->u.l;
        case JT_DICT: return in->u.d == x->u.d;
        case JT_NS: return in->u.ns == x->u.ns;
        default: return false;
        }
    case T_LOWER: return str_is_case(rt, in_str(rt, in), false);
    case T_UPPER: return str_is_case(rt, in_str(rt, in), true);
    case T_ESCAPED: return in->t == JT_STR && (in->flags & JF_MARKUP);
    case T_FILTER: return in->t == JT_STR && fr_jj_filter_id(in->u.s) != -1;
    case T_TEST: return in->t == JT_STR && fr_jj_test_id(in->u.s) >= 0;
    }
    return false;
}

/* ---- globals ------------------------------------------------------------------------------ */

enum { G_RANGE, G_NAMESPACE, G_DICT, G_RAISE, G_STRFTIME, G_UNSUPPORTED };
static const char *const GLOBALS[] = {"range", "namespace", "dict", "raise_exception",
                                      "strftime_now"};
static const char *const GLOBALS_UNSUPPORTED[] = {"lipsum", "cycler", "joiner"};

jj_val fr_jj_global_func(jj_rt *rt, jj_str name) {
    int id = find_name(name, GLOBALS, FR_ARRAY_LEN(GLOBALS));
    if (id < 0 && find_name(name, GLOBALS_UNSUPPORTED, FR_ARRAY_LEN(GLOBALS_UNSUPPORTED)) >= 0)
        id = G_UNSUPPORTED;
    if (id < 0) return jj_undef();
    jj_val none = jj_none();
    return make_method(rt, JFN_GLOBAL, id, &none, name);
}

static jj_val g_range(jj_rt *rt, int line, const jj_args *a) {
    if (a->nkw) fr_jj_fail(C(rt), line, "range() takes no keyword arguments");
    if (a->npos < 1 || a->npos > 3)
        fr_jj_fail(C(rt), line, "range expected 1 to 3 arguments, got %zu", a->npos);
    int64_t start = 0, stop, step = 1;
    if (a->npos == 1)
        stop = want_int(rt, line, &a->pos[0], "range");
    else {
        start = want_int(rt, line, &a->pos[0], "range");
        stop = want_int(rt, line, &a->pos[1], "range");
        if (a->npos == 3) step = want_int(rt, line, &a->pos[2], "range");
    }
    if (step == 0) fr_jj_fail(C(rt), line, "range() arg 3 must not be zero");
    double count = 0;
    if (step > 0 && start < stop) count = ceil(((double)stop - (double)start) / (double)step);
    if (step < 0 && start > stop) count = ceil(((double)start - (double)stop) / (double)-step);
    if (count > JJ_MAX_RANGE)
        fr_jj_fail(C(rt), line, "range too big (at most %d items are allowed)", JJ_MAX_RANGE);
    size_t n = (size_t)count;
    jj_val v = fr_jj_list_new(C(rt), n, false);
    for (size_t i = 0; i < n; i++) v.u.l->v[i] = jj_int(start + (int64_t)i * step);
    v.flags = JF_RANGE;
    v.u.l->start = start;
    v.u.l->stop = stop;
    v.u.l->step = step;
    return v;
}

/* dict(...) / namespace(...) contents: a mapping or pairs positional, then keywords. */
static jj_val make_mapping(jj_rt *rt, int line, const jj_args *a, const char *what) {
    if (a->npos > 1) fr_jj_fail(C(rt), line, "%s expected at most 1 positional argument", what);
    size_t n0 = 0;
    jj_list pairs = {0, NULL, 0, 0, 0, 0};
    const jj_dict *src = NULL;
    if (a->npos) {
        if (a->pos[0].t == JT_DICT) {
            src = a->pos[0].u.d;
            n0 = src->n;
        } else {
            pairs = fr_jj_iterate(rt, line, &a->pos[0]);
            n0 = pairs.n;
        }
    }
    jj_val d = fr_jj_dict_new(C(rt), n0 + a->nkw);
    d.u.d->n = 0;
    for (size_t i = 0; i < n0 + a->nkw; i++) {
        jj_val k, v;
        if (i < n0 && src) {
            k = src->k[i];
            v = src->v[i];
        } else if (i < n0) {
            jj_list pr = fr_jj_iterate(rt, line, &pairs.v[i]);
            if (pr.n != 2)
                fr_jj_fail(C(rt), line, "%s: sequence element #%zu has length %zu; 2 is required",
                           what, i, pr.n);
            k = pr.v[0];
            v = pr.v[1];
        } else {
            k = jj_strv(a->kwn[i - n0]);
            v = a->kwv[i - n0];
        }
        jj_val *old = fr_jj_dict_get(C(rt), d.u.d, &k);
        if (old)
            *old = v;
        else {
            d.u.d->k[d.u.d->n] = k;
            d.u.d->v[d.u.d->n++] = v;
        }
    }
    return d;
}

static jj_val call_global(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    switch (fn->id) {
    case G_RANGE: return g_range(rt, line, a);
    case G_DICT: return make_mapping(rt, line, a, "dict");
    case G_NAMESPACE: {
        jj_val d = make_mapping(rt, line, a, "namespace");
        jj_ns *ns = fr_jj_alloc(C(rt), sizeof *ns);
        ns->n = 0;
        ns->cap = d.u.d->n;
        ns->k = fr_jj_alloc(C(rt), (ns->cap + 1) * sizeof *ns->k);
        ns->v = fr_jj_alloc(C(rt), (ns->cap + 1) * sizeof *ns->v);
        for (size_t i = 0; i < d.u.d->n; i++) {
            if (d.u.d->k[i].t != JT_STR) fr_jj_fail(C(rt), line, "namespace keys must be strings");
            ns->k[ns->n] = d.u.d->k[i].u.s;
            ns->v[ns->n++] = d.u.d->v[i];
        }
        jj_val v = {0};
        v.t = JT_NS;
        v.u.ns = ns;
        return v;
    }
    case G_RAISE: {
        static const char *const p[] = {"message"};
        bound b;
        bind(rt, line, "function", fn->name, p, 1, a, &b);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "raise_exception() missing 1 required positional argument");
        jj_str msg = fr_jj_str_of(C(rt), &b.v[0]);
        fr_jj_fail_msg(C(rt), fr_jj_cstr(C(rt), msg.n > 500 ? (jj_str){msg.p, 500} : msg));
    }
    case G_STRFTIME: {
        static const char *const p[] = {"format"};
        bound b;
        bind(rt, line, "function", fn->name, p, 1, a, &b);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "strftime_now() missing 1 required positional argument");
        jj_str f = want_str(rt, line, &b.v[0], "strftime_now");
        if (f.n > 200) fr_jj_fail_unsup(C(rt), line, "strftime_now format longer than 200 bytes");
        time_t now = time(NULL);
        struct tm tmv;
        localtime_r(&now, &tmv);
        char out[2048];
        size_t n = f.n ? strftime(out, sizeof out, fr_jj_cstr(C(rt), f), &tmv) : 0;
        return jj_strv(fr_jj_strdup(C(rt), out, n));
    }
    default: fr_jj_fail_unsup(C(rt), line, "global function '%.*s'", NAMEF(fn->name));
    }
}

/* ---- methods ------------------------------------------------------------------------------ */

static jj_val call_str_method(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    jj_str s = fn->self.u.s;
    bound b;
    static const char *const p_chars[] = {"chars"}, *const p_prefix[] = {"prefix", "start", "end"},
                             *const p_split[] = {"sep", "maxsplit"}, *const p_keep[] = {"keepends"},
                             *const p_repl[] = {"old", "new", "count"},
                             *const p_sub[] = {"sub", "start", "end"},
                             *const p_iter[] = {"iterable"},
                             *const p_width[] = {"width", "fillchar"};
#define MBIND(p) bind(rt, line, "method", fn->name, p, FR_ARRAY_LEN(p), a, &b)
#define MNOARGS() bind(rt, line, "method", fn->name, NULL, 0, a, &b)
    switch (fn->id) {
    case M_STRIP:
    case M_LSTRIP:
    case M_RSTRIP: {
        MBIND(p_chars);
        bool l = fn->id != M_RSTRIP, r = fn->id != M_LSTRIP;
        if (b.given[0] && b.v[0].t != JT_NONE) {
            jj_str chars = want_str(rt, line, &b.v[0], "strip");
            return jj_strv(str_strip(rt, s, &chars, l, r));
        }
        return jj_strv(str_strip(rt, s, NULL, l, r));
    }
    case M_STARTSWITH:
    case M_ENDSWITH: {
        MBIND(p_prefix);
        if (!b.given[0]) fr_jj_fail(C(rt), line, "startswith/endswith takes at least 1 argument");
        if (b.given[1] || b.given[2])
            fr_jj_fail_unsup(C(rt), line, "start/end arguments of startswith/endswith");
        jj_list cands;
        if (b.v[0].t == JT_LIST && (b.v[0].flags & JF_TUPLE))
            cands = *b.v[0].u.l;
        else if (b.v[0].t == JT_STR) cands = (jj_list){1, &b.v[0], 0, 0, 0, 0};
        else
            fr_jj_fail(C(rt), line, "startswith first arg must be str or a tuple of str, not %s",
                       fr_jj_type_name(&b.v[0]));
        for (size_t i = 0; i < cands.n; i++) {
            jj_str p = want_str(rt, line, &cands.v[i], "startswith");
            fr_jj_charge(C(rt), p.n / 64 + 1);
            if (p.n > s.n) continue;
            const char *at = fn->id == M_STARTSWITH ? s.p : s.p + s.n - p.n;
            if (!p.n || memcmp(at, p.p, p.n) == 0) return jj_bool(true);
        }
        return jj_bool(false);
    }
    case M_SPLIT:
    case M_RSPLIT: {
        MBIND(p_split);
        int64_t maxsplit = b.given[1] ? want_int(rt, line, &b.v[1], "split") : -1;
        return str_split(rt, line, s, b.given[0] ? &b.v[0] : NULL, maxsplit, fn->id == M_RSPLIT);
    }
    case M_SPLITLINES:
        MBIND(p_keep);
        return str_splitlines(rt, s, b.given[0] && fr_jj_truthy(&b.v[0]));
    case M_UPPER: MNOARGS(); return jj_strv(str_case(rt, s, CASE_UPPER));
    case M_LOWER:
    case M_CASEFOLD: MNOARGS(); return jj_strv(str_case(rt, s, CASE_LOWER));
    case M_TITLE: MNOARGS(); return jj_strv(str_case(rt, s, CASE_TITLE));
    case M_CAPITALIZE: MNOARGS(); return jj_strv(str_case(rt, s, CASE_CAPITALIZE));
    case M_SWAPCASE: MNOARGS(); return jj_strv(str_case(rt, s, CASE_SWAP));
    case M_REPLACE: {
        MBIND(p_repl);
        if (!b.given[0] || !b.given[1])
            fr_jj_fail(C(rt), line, "replace expected at least 2 arguments");
        int64_t count = b.given[2] ? want_int(rt, line, &b.v[2], "replace") : -1;
        return jj_strv(str_replace(rt, s, want_str(rt, line, &b.v[0], "replace"),
                                   want_str(rt, line, &b.v[1], "replace"), count));
    }
    case M_FIND:
    case M_RFIND:
    case M_INDEX:
    case M_RINDEX:
    case M_COUNT: {
        MBIND(p_sub);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "%.*s() takes at least 1 argument", NAMEF(fn->name));
        if (b.given[1] || b.given[2])
            fr_jj_fail_unsup(C(rt), line, "start/end arguments of %.*s()", NAMEF(fn->name));
        jj_str needle = want_str(rt, line, &b.v[0], "find");
        fr_jj_charge(C(rt), s.n / 64);
        if (fn->id == M_COUNT) {
            if (!needle.n) return jj_int((int64_t)ulen(rt, s) + 1);
            int64_t n = 0;
            size_t i = 0;
            const char *hit;
            while ((hit = find_bytes(rt, s, i, needle))) {
                n++;
                i = (size_t)(hit - s.p) + needle.n;
            }
            return jj_int(n);
        }
        bool rev = fn->id == M_RFIND || fn->id == M_RINDEX;
        const char *hit = rev ? (needle.n ? rfind_bytes(rt, s, needle) : s.p + s.n)
                              : find_bytes(rt, s, 0, needle);
        if (!hit) {
            if (fn->id == M_INDEX || fn->id == M_RINDEX)
                fr_jj_fail(C(rt), line, "substring not found");
            return jj_int(-1);
        }
        return jj_int((int64_t)cp_count_upto(rt, s, (size_t)(hit - s.p)));
    }
    case M_JOIN: {
        MBIND(p_iter);
        if (!b.given[0]) fr_jj_fail(C(rt), line, "join() takes exactly one argument");
        jj_list l = fr_jj_iterate(rt, line, &b.v[0]);
        jj_sb out = {0};
        for (size_t i = 0; i < l.n; i++) {
            if (l.v[i].t != JT_STR)
                fr_jj_fail(C(rt), line, "sequence item %zu: expected str instance, %s found", i,
                           fr_jj_type_name(&l.v[i]));
            if (i) fr_jj_sb_put(C(rt), &out, s.p, s.n);
            fr_jj_sb_put(C(rt), &out, l.v[i].u.s.p, l.v[i].u.s.n);
        }
        return jj_strv(jj_sb_str(&out));
    }
    case M_ISDIGIT:
    case M_ISALPHA:
    case M_ISALNUM:
    case M_ISSPACE:
    case M_ISASCII:
    case M_ISDECIMAL:
    case M_ISNUMERIC: {
        MNOARGS();
        fr_jj_charge(C(rt), s.n / 64);
        if (!s.n) return jj_bool(fn->id == M_ISASCII);
        size_t i = 0;
        while (i < s.n) {
            uint32_t c = fr_jj_utf8_next(s.p, s.n, &i);
            bool ok;
            switch (fn->id) {
            case M_ISDIGIT:
            case M_ISDECIMAL: ok = cp_digit(c); break;
            case M_ISNUMERIC: ok = cp_numeric(c); break;
            case M_ISALPHA: ok = cp_alpha(c); break;
            case M_ISALNUM: ok = cp_alpha(c) || cp_numeric(c); break;
            case M_ISSPACE: ok = fr_jj_py_isspace(c); break;
            default: ok = c < 0x80; break;
            }
            if (!ok) return jj_bool(false);
        }
        return jj_bool(true);
    }
    case M_ISLOWER: MNOARGS(); return jj_bool(str_is_case(rt, s, false));
    case M_ISUPPER: MNOARGS(); return jj_bool(str_is_case(rt, s, true));
    case M_REMOVEPREFIX:
    case M_REMOVESUFFIX: {
        MBIND(p_iter);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "%.*s() takes exactly one argument", NAMEF(fn->name));
        jj_str p = want_str(rt, line, &b.v[0], "removeprefix");
        if (p.n <= s.n) {
            if (fn->id == M_REMOVEPREFIX && !memcmp(s.p, p.p, p.n)) return sub(s, p.n, s.n);
            if (fn->id == M_REMOVESUFFIX && p.n && !memcmp(s.p + s.n - p.n, p.p, p.n))
                return sub(s, 0, s.n - p.n);
        }
        return fn->self;
    }
    case M_CENTER:
    case M_LJUST:
    case M_RJUST:
    case M_ZFILL: {
        MBIND(p_width);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "%.*s() takes at least 1 argument", NAMEF(fn->name));
        int64_t w = want_int(rt, line, &b.v[0], "width");
        jj_str fill = b.given[1] ? want_str(rt, line, &b.v[1], "fillchar")
                                 : jj_s(fn->id == M_ZFILL ? "0" : " ");
        if (ulen(rt, fill) != 1)
            fr_jj_fail(C(rt), line, "The fill character must be exactly one character long");
        int64_t n = (int64_t)ulen(rt, s);
        if (w <= n) return fn->self;
        if (w > 100000) fr_jj_fail_unsup(C(rt), line, "width above 100000");
        int64_t pad = w - n, left;
        if (fn->id == M_CENTER)
            left = pad / 2 + (pad & w & 1);
        else if (fn->id == M_LJUST) left = 0;
        else left = pad;
        jj_sb out = {0};
        size_t start = 0;
        if (fn->id == M_ZFILL && s.n && (s.p[0] == '+' || s.p[0] == '-')) {
            fr_jj_sb_putc(C(rt), &out, s.p[0]);
            start = 1;
        }
        for (int64_t i = 0; i < left; i++) fr_jj_sb_put(C(rt), &out, fill.p, fill.n);
        fr_jj_sb_put(C(rt), &out, s.p + start, s.n - start);
        for (int64_t i = 0; i < pad - left; i++) fr_jj_sb_put(C(rt), &out, fill.p, fill.n);
        return jj_strv(jj_sb_str(&out));
    }
    case M_PARTITION:
    case M_RPARTITION: {
        MBIND(p_iter);
        if (!b.given[0])
            fr_jj_fail(C(rt), line, "%.*s() takes exactly one argument", NAMEF(fn->name));
        jj_str sep = want_str(rt, line, &b.v[0], "partition");
        if (!sep.n) fr_jj_fail(C(rt), line, "empty separator");
        const char *hit =
            fn->id == M_PARTITION ? find_bytes(rt, s, 0, sep) : rfind_bytes(rt, s, sep);
        jj_val t = fr_jj_list_new(C(rt), 3, true);
        if (!hit) {
            bool front = fn->id == M_PARTITION;
            t.u.l->v[0] = front ? fn->self : jj_strz("");
            t.u.l->v[1] = jj_strz("");
            t.u.l->v[2] = front ? jj_strz("") : fn->self;
            return t;
        }
        size_t at = (size_t)(hit - s.p);
        t.u.l->v[0] = sub(s, 0, at);
        t.u.l->v[1] = sub(s, at, at + sep.n);
        t.u.l->v[2] = sub(s, at + sep.n, s.n);
        return t;
    }
    default: fr_jj_fail_unsup(C(rt), line, "string method '%.*s'", NAMEF(fn->name));
    }
#undef MBIND
#undef MNOARGS
}

static jj_val call_dict_method(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    const jj_dict *d = fn->self.u.d;
    bound b;
    static const char *const p_get[] = {"key", "default"};
    switch (fn->id) {
    case D_GET: {
        bind(rt, line, "method", fn->name, p_get, 2, a, &b);
        if (!b.given[0]) fr_jj_fail(C(rt), line, "get expected at least 1 argument, got 0");
        jj_val *v = fr_jj_dict_get(C(rt), d, &b.v[0]);
        return v ? *v : b.given[1] ? b.v[1] : jj_none();
    }
    case D_ITEMS: {
        bind(rt, line, "method", fn->name, NULL, 0, a, &b);
        jj_args none = {0};
        jj_val v = f_items(rt, line, fn->name, &fn->self, &none);
        v.flags = JF_VIEW;
        v.u.l->view = 2;
        return v;
    }
    case D_KEYS:
    case D_VALUES: {
        bind(rt, line, "method", fn->name, NULL, 0, a, &b);
        jj_val v = fr_jj_list_new(C(rt), d->n, false);
        if (d->n) memcpy(v.u.l->v, fn->id == D_KEYS ? d->k : d->v, d->n * sizeof(jj_val));
        v.flags = JF_VIEW;
        v.u.l->view = fn->id == D_KEYS ? 0 : 1;
        return v;
    }
    default: bind(rt, line, "method", fn->name, NULL, 0, a, &b); return fn->self;
    }
}

static jj_val call_list_method(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    const jj_list *l = fn->self.u.l;
    bound b;
    static const char *const p_x[] = {"value"};
    if (fn->id == L_COPY) {
        bind(rt, line, "method", fn->name, NULL, 0, a, &b);
        return fn->self;
    }
    bind(rt, line, "method", fn->name, p_x, 1, a, &b);
    if (!b.given[0]) fr_jj_fail(C(rt), line, "%.*s() takes exactly one argument", NAMEF(fn->name));
    int64_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        fr_jj_charge(C(rt), 1);
        if (fr_jj_equal(C(rt), &l->v[i], &b.v[0])) {
            if (fn->id == L_INDEX) return jj_int((int64_t)i);
            n++;
        }
    }
    if (fn->id == L_INDEX) fr_jj_fail(C(rt), line, "value is not in list");
    return jj_int(n);
}

static jj_val call_loop_method(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    jj_loop *lp = fn->self.u.loop;
    if (a->nkw) fr_jj_fail(C(rt), line, "loop.%.*s() takes no keyword arguments", NAMEF(fn->name));
    if (fn->id == LP_CYCLE) {
        if (!a->npos) fr_jj_fail(C(rt), line, "no items for cycling given");
        return a->pos[lp->i % a->npos];
    }
    jj_val cur = fr_jj_list_new(C(rt), a->npos, false);
    for (size_t i = 0; i < a->npos; i++) cur.u.l->v[i] = a->pos[i];
    if (lp->changed_called && fr_jj_equal(C(rt), &lp->last_changed, &cur)) return jj_bool(false);
    lp->changed_called = true;
    lp->last_changed = cur;
    return jj_bool(true);
}

jj_val fr_jj_call_func(jj_rt *rt, int line, const jj_val *f, const jj_args *a) {
    if (f->t == JT_UNDEF) fr_jj_fail_undefined(rt, line, f);
    if (f->t != JT_FUNC) fr_jj_fail(C(rt), line, "'%s' object is not callable", fr_jj_type_name(f));
    const jj_func *fn = f->u.fn;
    switch (fn->kind) {
    case JFN_GLOBAL: return call_global(rt, line, fn, a);
    case JFN_STR: return call_str_method(rt, line, fn, a);
    case JFN_DICT: return call_dict_method(rt, line, fn, a);
    case JFN_LIST: return call_list_method(rt, line, fn, a);
    case JFN_LOOP: return call_loop_method(rt, line, fn, a);
    case JFN_MACRO: return fr_jj_call_macro(rt, line, fn, a);
    default:
        fr_jj_fail(C(rt), line, "access to attribute '%.*s' of '%s' object is unsafe",
                   NAMEF(fn->name), fr_jj_type_name(&fn->self));
    }
}
