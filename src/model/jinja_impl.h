/* jinja_impl.h — internals of the chat-template interpreter behind chat.h (not a public header).
 *
 * Design
 *   The interpreter is a classic pipeline: jinja_lex.c turns template source into tokens with
 *   exactly Jinja2's whitespace rules under the settings transformers uses (trim_blocks,
 *   lstrip_blocks, keep_trailing_newline=False); jinja_parse.c builds an AST by recursive descent
 *   following jinja2/parser.py's grammar and precedence; jinja_eval.c walks the AST with Python
 *   value semantics (jinja_value.c: values, str()/repr()/json.dumps(), comparison, Unicode) and
 *   the builtins of jinja_builtins.c (filters, tests, methods, globals).
 *
 *   Memory: every allocation made while compiling (tokens, AST) or rendering (values, scopes,
 *   buffers) comes from an arena owned by that compile or render, so values can be shared freely
 *   (they are immutable, as in the ImmutableSandboxedEnvironment transformers uses; only
 *   namespace() objects mutate) and nothing is freed piecemeal.
 *
 *   Errors: bad input never aborts. A failing compile or render records a one-line message and
 *   longjmp()s back to its entry point (*jj_core.jb), which frees the arena. There is no global
 *   mutable state, so distinct renders may run on distinct threads, also of one compiled template
 *   (a compiled template is read-only while rendering).
 *
 *   Hostile templates and inputs are bounded: template size, parser nesting, evaluation depth,
 *   loop iterations, evaluation steps, string/output size and total arena memory all have caps
 *   (JJ_MAX_*), each failing with an error.
 */
#ifndef FRUGAL_JINJA_IMPL_H
#define FRUGAL_JINJA_IMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

/* ---- limits ------------------------------------------------------------------------------- */
#define JJ_MAX_TEMPLATE (4u << 20)   /* template source bytes */
#define JJ_MAX_OUTPUT (16u << 20)    /* rendered prompt bytes */
#define JJ_MAX_STRING (16u << 20)    /* bytes of any one string value */
#define JJ_MAX_MEMORY (192u << 20)   /* arena bytes of one compile or render */
#define JJ_MAX_NEST 100              /* parser nesting of brackets, operators and blocks */
#define JJ_MAX_AST_DEPTH 250         /* height of one expression tree */
#define JJ_MAX_DEPTH 400             /* evaluation recursion (statements, expressions, calls) */
#define JJ_MAX_CALLS 40              /* nested macro calls */
#define JJ_MAX_ITERS 2000000         /* loop iterations of one render */
#define JJ_MAX_STEPS 30000000        /* evaluation steps of one render (work units) */
#define JJ_MAX_RANGE 100000          /* items of range(), as jinja2's sandbox */
#define JJ_MAX_VALUE_DEPTH 500       /* nesting of values walked by repr/json/compare */

#define JJ_HINT "choose a built-in template with --chat-template chatml|llama3"

/* ---- arena -------------------------------------------------------------------------------- */
typedef struct jj_chunk {
    struct jj_chunk *next; /* older chunk */
    size_t size;           /* usable bytes in data */
    size_t used;           /* bytes handed out */
    size_t last;           /* offset of the most recent allocation (for in-place growth) */
    max_align_t data[];    /* the bytes */
} jj_chunk;

typedef struct jj_arena {
    jj_chunk *head; /* current chunk */
    size_t total;   /* bytes of all chunks */
} jj_arena;

/* The state every stage shares: where errors go and where memory comes from. */
typedef struct jj_core {
    jmp_buf *jb;  /* longjmp target on failure: the entry point, or a constant-folding attempt */
    fr_err *err;  /* receives the message (may be NULL) */
    jj_arena *ar; /* allocations */
    uint64_t steps; /* work units spent (render only; bounded by JJ_MAX_STEPS) */
} jj_core;

FR_NORETURN void fr_jj_fail_msg(jj_core *c, const char *msg);
/* runtime error: "chat template error (line N): ..." */
FR_NORETURN void fr_jj_fail(jj_core *c, int line, const char *fmt, ...) FR_PRINTF(3, 4);
/* syntax error, with the --chat-template hint */
FR_NORETURN void fr_jj_fail_syntax(jj_core *c, int line, const char *fmt, ...) FR_PRINTF(3, 4);
/* an unsupported construct, with the --chat-template hint */
FR_NORETURN void fr_jj_fail_unsup(jj_core *c, int line, const char *fmt, ...) FR_PRINTF(3, 4);

void *fr_jj_alloc(jj_core *c, size_t n); /* zeroed */
/* Like realloc within the arena (the new bytes are not zeroed); grows in place when p is the
 * latest allocation. */
void *fr_jj_grow(jj_core *c, void *p, size_t old, size_t n);
void fr_jj_arena_free(jj_arena *a);
/* Count work units; fails when the budget is spent. */
void fr_jj_charge(jj_core *c, uint64_t units);

/* ---- strings and Unicode ------------------------------------------------------------------ */
typedef struct jj_str {
    const char *p; /* bytes (UTF-8 expected, not NUL-terminated) */
    size_t n;      /* byte count */
} jj_str;

static inline jj_str jj_s(const char *z) {
    jj_str s;
    s.p = z;
    s.n = 0;
    while (z[s.n]) s.n++;
    return s;
}
static inline bool jj_str_eq(jj_str a, jj_str b) {
    if (a.n != b.n) return false;
    for (size_t i = 0; i < a.n; i++)
        if (a.p[i] != b.p[i]) return false;
    return true;
}
static inline bool jj_str_eqz(jj_str a, const char *z) {
    size_t i = 0;
    for (; i < a.n; i++)
        if (!z[i] || a.p[i] != z[i]) return false;
    return z[i] == 0;
}
jj_str fr_jj_strdup(jj_core *c, const char *p, size_t n);
/* A NUL-terminated copy (for C library calls). */
char *fr_jj_cstr(jj_core *c, jj_str s);

/* Decode one code point at p[*i] (n bytes in all) and advance *i. Invalid bytes decode to
 * 0xDC80+byte (Python's surrogateescape), so that encoding gives back the same bytes. */
uint32_t fr_jj_utf8_next(const char *p, size_t n, size_t *i);
/* Append the UTF-8 form of cp (surrogateescape code points give their raw byte). */
size_t fr_jj_utf8_put(char *out, uint32_t cp);
size_t fr_jj_utf8_len(jj_str s);                 /* code points */
size_t fr_jj_ascii_run(const char *p, size_t n); /* length of the leading ASCII bytes */
bool fr_jj_py_isspace(uint32_t cp);              /* str.isspace() */

/* A growable byte string in the arena. */
typedef struct jj_sb {
    char *p;      /* bytes */
    size_t n;     /* used */
    size_t cap;   /* allocated */
    size_t limit; /* most bytes allowed (JJ_MAX_STRING or JJ_MAX_OUTPUT) */
    bool heap;    /* p is malloc'd (the owner frees it), not in the arena */
} jj_sb;
void fr_jj_sb_put(jj_core *c, jj_sb *b, const char *p, size_t n);
void fr_jj_sb_puts(jj_core *c, jj_sb *b, const char *z);
void fr_jj_sb_putc(jj_core *c, jj_sb *b, char ch);
void fr_jj_sb_putcp(jj_core *c, jj_sb *b, uint32_t cp);
static inline jj_str jj_sb_str(const jj_sb *b) {
    jj_str s;
    s.p = b->p ? b->p : "";
    s.n = b->n;
    return s;
}

/* ---- values ------------------------------------------------------------------------------- */
typedef enum jj_type {
    JT_UNDEF, /* jinja2 Undefined: prints "", false, iterates empty; most other uses fail */
    JT_NONE,
    JT_BOOL,
    JT_INT,
    JT_FLOAT,
    JT_STR,
    JT_LIST, /* list, or tuple with JF_TUPLE */
    JT_DICT,
    JT_NS,   /* namespace() */
    JT_FUNC, /* builtin global, bound method, macro */
    JT_LOOP, /* the `loop` variable of a for loop */
    JT_GEN,  /* a Python generator made by a filter (map, select, items, ...): lazy, run once */
} jj_type;

enum {
    JF_TUPLE = 1,  /* a JT_LIST that is a tuple */
    JF_MARKUP = 2, /* a JT_STR that is markupsafe.Markup (from |safe or |escape) */
    JF_RANGE = 4,  /* a JT_LIST made by range(): prints as range(a, b[, s]) */
    JF_VIEW = 8,   /* a JT_LIST from dict.keys()/values()/items(): not subscriptable */
};

typedef struct jj_val {
    uint8_t t;     /* jj_type */
    uint8_t flags; /* JF_* */
    union {
        bool b;                /* JT_BOOL */
        int64_t i;             /* JT_INT */
        double f;              /* JT_FLOAT */
        jj_str s;              /* JT_STR; JT_UNDEF: the hint for error messages */
        struct jj_list *l;     /* JT_LIST */
        struct jj_dict *d;     /* JT_DICT */
        struct jj_ns *ns;      /* JT_NS */
        struct jj_func *fn;    /* JT_FUNC */
        struct jj_loop *loop;  /* JT_LOOP */
        struct jj_gen *gen;    /* JT_GEN */
    } u;
} jj_val;

/* Evaluated call arguments. */
typedef struct jj_args {
    const jj_val *pos; /* positional arguments */
    size_t npos;       /* their count */
    const jj_str *kwn; /* keyword argument names */
    const jj_val *kwv; /* keyword argument values */
    size_t nkw;        /* their count */
} jj_args;

typedef struct jj_list {
    size_t n;                  /* item count */
    jj_val *v;                 /* the items */
    int64_t start, stop, step; /* the arguments of range() (JF_RANGE) */
    int view;  /* JF_VIEW: 0 dict_keys, 1 dict_values, 2 dict_items */
} jj_list;

/* An insertion-ordered mapping; on duplicate keys lookups find the last one (as json.loads). */
typedef struct jj_dict {
    size_t n;  /* pairs */
    jj_val *k; /* keys */
    jj_val *v; /* values */
} jj_dict;

/* namespace(): the one mutable object. */
typedef struct jj_ns {
    size_t n, cap; /* attributes used / allocated */
    jj_str *k;     /* names */
    jj_val *v;     /* values */
} jj_ns;

typedef enum jj_func_kind {
    JFN_GLOBAL,  /* id: JG_* */
    JFN_STR,     /* string method; id: JM_* */
    JFN_DICT,    /* dict method */
    JFN_LIST,    /* list method */
    JFN_LOOP,    /* loop.cycle / loop.changed */
    JFN_MACRO,   /* a {% macro %} */
    JFN_UNSAFE,  /* a method the immutable sandbox refuses */
} jj_func_kind;

typedef struct jj_func {
    uint8_t kind;               /* jj_func_kind */
    uint16_t id;                /* builtin id */
    jj_val self;                /* bound object of a method */
    jj_str name;                /* for messages */
    const struct jj_node *macro; /* JFN_MACRO: the definition */
} jj_func;

/* A generator: jinja2's map/select/reject/selectattr/rejectattr/unique/items filters return
 * Python generators (and reverse an iterator), which are always true, have no len(), run their
 * filter only when iterated, and yield their items once. */
typedef struct jj_gen {
    int filter;    /* the filter that makes the items (jinja_builtins.c) */
    jj_str name;   /* its name, for messages */
    jj_val in;     /* its input */
    jj_args args;  /* its arguments */
    int line;      /* where it was called */
    bool consumed; /* iterated already */
    const char *repr; /* how Python prints it, e.g. "<generator object do_items at 0x...>" */
} jj_gen;

/* The `loop` variable. With a loop filter (`for x in xs if cond`) items are tested lazily, as
 * jinja2 does: the body sees item k once k items passed, and loop.last / nextitem / length test
 * further items only when asked. */
typedef struct jj_loop {
    size_t i;                     /* current index0 */
    const jj_val *raw;            /* the items iterated, before the filter */
    size_t nraw;                  /* their count */
    size_t pos;                   /* raw items tested so far */
    jj_val *pass;                 /* items that passed (raw itself without a filter) */
    size_t npass, cap;            /* passed so far / allocated */
    bool done;                    /* no more raw items will be tested */
    const struct jj_node *test;   /* the loop filter (NULL: none) */
    const struct jj_node *target; /* the loop target, bound while testing */
    struct jj_scope *scope;       /* scope the filter is tested in */
    jj_val last_changed;          /* argument of the previous loop.changed() */
    bool changed_called;          /* loop.changed() seen */
} jj_loop;

static inline jj_val jj_undef(void) {
    jj_val v = {0};
    v.t = JT_UNDEF;
    return v;
}
static inline jj_val jj_undef_hint(jj_str hint) {
    jj_val v = jj_undef();
    v.u.s = hint;
    return v;
}
static inline jj_val jj_none(void) {
    jj_val v = {0};
    v.t = JT_NONE;
    return v;
}
static inline jj_val jj_bool(bool b) {
    jj_val v = {0};
    v.t = JT_BOOL;
    v.u.b = b;
    return v;
}
static inline jj_val jj_int(int64_t i) {
    jj_val v = {0};
    v.t = JT_INT;
    v.u.i = i;
    return v;
}
static inline jj_val jj_float(double f) {
    jj_val v = {0};
    v.t = JT_FLOAT;
    v.u.f = f;
    return v;
}
static inline jj_val jj_strv(jj_str s) {
    jj_val v = {0};
    v.t = JT_STR;
    v.u.s = s;
    return v;
}
static inline jj_val jj_strz(const char *z) { return jj_strv(jj_s(z)); }

jj_val fr_jj_list_new(jj_core *c, size_t n, bool tuple); /* items zeroed (undefined) */
jj_val fr_jj_dict_new(jj_core *c, size_t n);
const char *fr_jj_type_name(const jj_val *v); /* Python's type name: 'str', 'list', ... */

bool fr_jj_truthy(const jj_val *v);
bool fr_jj_is_num(const jj_val *v); /* bool, int, float */
double fr_jj_num(const jj_val *v);  /* as double */
/* Python ==. */
bool fr_jj_equal(jj_core *c, const jj_val *a, const jj_val *b);
/* Python ordering (<: -1, ==: 0, >: 1); fails with a TypeError message for unorderable types. */
int fr_jj_compare(jj_core *c, int line, const jj_val *a, const jj_val *b);
/* Find key in a dict (last match); NULL if absent. */
jj_val *fr_jj_dict_get(jj_core *c, const jj_dict *d, const jj_val *key);
jj_val *fr_jj_dict_getz(const jj_dict *d, const char *key);

/* str(v) appended to b (jinja2 prints undefined as ""). */
void fr_jj_to_str(jj_core *c, jj_sb *b, const jj_val *v);
jj_str fr_jj_str_of(jj_core *c, const jj_val *v);
/* repr(v) appended to b. */
void fr_jj_repr(jj_core *c, jj_sb *b, const jj_val *v, int depth);
void fr_jj_float_repr(double x, char out[40]); /* Python repr(float) */

/* json.dumps(v, ensure_ascii, indent, separators, sort_keys). indent: NULL for none. */
typedef struct jj_json_opts {
    bool ensure_ascii;   /* escape non-ASCII as \uXXXX */
    bool sort_keys;      /* sort object keys */
    bool has_indent;     /* pretty-print */
    jj_str indent;       /* indent unit (when has_indent) */
    jj_str item_sep;     /* ", " or "," */
    jj_str key_sep;      /* ": " */
} jj_json_opts;
void fr_jj_to_json(jj_core *c, int line, jj_sb *b, const jj_val *v, const jj_json_opts *o);

/* Convert a cJSON value into an interpreter value (strings are shared, not copied). */
struct cJSON;
jj_val fr_jj_from_cjson(jj_core *c, const struct cJSON *j, int depth);

/* ---- tokens ------------------------------------------------------------------------------- */
typedef enum jj_tok_kind {
    TK_EOF,
    TK_DATA,        /* template text */
    TK_BLOCK_BEGIN, /* {% */
    TK_BLOCK_END,   /* %} */
    TK_VAR_BEGIN,   /* {{ */
    TK_VAR_END,     /* }} */
    TK_NAME,
    TK_STRING,      /* s: decoded value */
    TK_INT,
    TK_FLOAT,
    TK_OP,          /* op: JO_* */
} jj_tok_kind;

typedef enum jj_op {
    JO_ADD, JO_SUB, JO_DIV, JO_FLOORDIV, JO_MUL, JO_POW, JO_MOD, JO_TILDE,
    JO_LBRACKET, JO_RBRACKET, JO_LPAREN, JO_RPAREN, JO_LBRACE, JO_RBRACE,
    JO_EQ, JO_NE, JO_GT, JO_GTEQ, JO_LT, JO_LTEQ,
    JO_ASSIGN, JO_DOT, JO_COLON, JO_PIPE, JO_COMMA, JO_SEMICOLON,
    JO_IN, JO_NOTIN, /* comparison operators built by the parser */
} jj_op;

typedef struct jj_tok {
    uint8_t kind; /* jj_tok_kind */
    uint8_t op;   /* TK_OP: jj_op */
    int line;     /* 1-based source line */
    jj_str s;     /* TK_DATA/TK_NAME/TK_STRING text */
    int64_t i;    /* TK_INT */
    double f;     /* TK_FLOAT */
} jj_tok;

/* Tokenize (Jinja2 lexer with trim_blocks and lstrip_blocks). Returns the count; the array ends
 * with TK_EOF. */
size_t fr_jj_lex(jj_core *c, const char *src, size_t n, jj_tok **out);

/* ---- AST ---------------------------------------------------------------------------------- */
typedef enum jj_node_kind {
    /* expressions */
    JN_CONST,    /* val */
    JN_NAME,     /* name */
    JN_LIST,     /* kids */
    JN_TUPLE,    /* kids */
    JN_DICT,     /* kids: key, value, key, value, ... */
    JN_GETATTR,  /* a.name */
    JN_GETITEM,  /* a[b] */
    JN_SLICE,    /* a:b:c (each may be NULL) */
    JN_CALL,     /* a(args) */
    JN_FILTER,   /* a|name(args); a NULL in a filter block: the block's text */
    JN_TEST,     /* a is name(args) */
    JN_NOT,      /* not a */
    JN_NEG,      /* -a */
    JN_POS,      /* +a */
    JN_AND,      /* a and b */
    JN_OR,       /* a or b */
    JN_BINOP,    /* a op b */
    JN_CONCAT,   /* kids joined with ~ */
    JN_COMPARE,  /* a ops[0] kids[0] ops[1] kids[1] ... */
    JN_CONDEX,   /* b if a else c */
    JN_NSREF,    /* name.name2 as an assignment target */
    /* statements */
    JS_OUTPUT,   /* kids: JN_CONST data and expressions to print */
    JS_IF,       /* if a: kids else kids2 (an elif is an JS_IF alone in kids2) */
    JS_FOR,      /* for a in b [if c]: kids else kids2 */
    JS_SET,      /* set a = b */
    JS_SETBLOCK, /* set a [| filter c]: kids */
    JS_MACRO,    /* macro name(params kids3 = defaults kids4): kids */
    JS_FILTER,   /* filter c: kids */
    JS_WITH,     /* with targets kids3 = values kids4: kids */
    JS_BLOCK,    /* a plain body (generation blocks): kids */
    JS_BREAK,
    JS_CONTINUE,
} jj_node_kind;

typedef struct jj_node {
    uint8_t kind;   /* jj_node_kind */
    uint8_t op;     /* JN_BINOP: jj_op */
    uint8_t fold;   /* a constant subexpression with a slice, which jinja2 folds at compile
                       time (1; 2: a whole {{ }} expression), see fold_walk in jinja_parse.c */
    uint8_t info;   /* parser facts: JJ_FOLDABLE, JJ_HAS_SLICE */
    int id;         /* JN_FILTER/JN_TEST: builtin id (negative: unknown, fails when reached) */
    int line;       /* source line */
    int depth;      /* expression tree height (bounded by JJ_MAX_AST_DEPTH) */
    jj_val val;     /* JN_CONST */
    jj_str name;    /* names, attributes, filter and test names */
    jj_str name2;   /* JN_NSREF attribute */
    struct jj_node *a, *b, *c;  /* operands (see jj_node_kind) */
    struct jj_node **kids;      /* children: items, arguments, body */
    size_t nkids;               /* their count */
    struct jj_node **kids2;     /* else body */
    size_t nkids2;              /* its length */
    struct jj_node **kids3;     /* macro/with parameter names */
    size_t nkids3;              /* their count */
    struct jj_node **kids4;     /* macro defaults / with values (NULL entries: no default) */
    size_t nkids4;              /* their count */
    jj_str *kwnames;            /* keyword argument names (calls, filters, tests) */
    struct jj_node **kwvals;    /* keyword argument values */
    size_t nkw;                 /* their count */
    uint8_t *ops;               /* JN_COMPARE operators (jj_op) */
} jj_node;

enum { JJ_FOLDABLE = 1, JJ_HAS_SLICE = 2 }; /* jj_node.info */

/* Parse tokens into the template body (a JS_BLOCK). */
jj_node *fr_jj_parse(jj_core *c, const jj_tok *toks, size_t ntoks);

/* ---- builtins ----------------------------------------------------------------------------- */
/* Filter and test ids by name; -1 if unknown to Jinja2, -2 if known but not supported. */
int fr_jj_filter_id(jj_str name);
int fr_jj_test_id(jj_str name);

/* ---- evaluation --------------------------------------------------------------------------- */
typedef struct jj_scope jj_scope;

/* The render state. */
typedef struct jj_rt {
    jj_core core;          /* errors, arena, step budget (first member) */
    jj_scope *globals;     /* template variables and top-level assignments */
    jj_sb *out;            /* where output goes now */
    uint64_t iters;        /* loop iterations so far */
    int depth;             /* evaluation recursion */
    int calls;             /* nested macro calls */
    const jj_val *block_in; /* text of the filter block / set block being filtered */
    bool folding;          /* evaluating as jinja2's compile-time constant folding does */
} jj_rt;

/* Test the loop filter until `want` items passed or the items run out (jinja_eval.c). */
void fr_jj_loop_fill(jj_rt *rt, jj_loop *lp, size_t want);

/* Scopes (jinja_eval.c). */
jj_scope *fr_jj_scope_new(jj_rt *rt);
void fr_jj_scope_define(jj_rt *rt, jj_scope *s, const char *name, jj_val v);

/* Builtins used by the evaluator (jinja_builtins.c). */
jj_val fr_jj_global_func(jj_rt *rt, jj_str name); /* range, namespace, ...; undefined if none */
jj_val fr_jj_arith(jj_rt *rt, int line, int op, const jj_val *a, const jj_val *b);     /* a op b */
bool fr_jj_contains(jj_rt *rt, int line, const jj_val *container, const jj_val *item); /* in */
/* obj[start:stop:step]; `lenient` gives undefined instead of errors (jinja2 folds slices of
 * literals at compile time through the sandbox's getitem). */
jj_val fr_jj_slice(jj_rt *rt, int line, const jj_val *obj, const jj_val *start, const jj_val *stop,
                   const jj_val *step, bool lenient);

jj_val fr_jj_call_filter(jj_rt *rt, int line, int id, jj_str name, const jj_val *in,
                         const jj_args *a);
bool fr_jj_call_test(jj_rt *rt, int line, int id, jj_str name, const jj_val *in, const jj_args *a);
jj_val fr_jj_call_func(jj_rt *rt, int line, const jj_val *fn, const jj_args *a);
/* obj.name with jinja2 sandbox semantics (methods first, then items). */
jj_val fr_jj_getattr(jj_rt *rt, int line, const jj_val *obj, jj_str name);
/* obj[key] with jinja2 sandbox semantics (items first, then attributes). */
jj_val fr_jj_getitem(jj_rt *rt, int line, const jj_val *obj, const jj_val *key);
/* Items of an iterable (list, tuple, dict keys, string characters; undefined: none). */
jj_list fr_jj_iterate(jj_rt *rt, int line, const jj_val *v);
/* Call a macro. */
jj_val fr_jj_call_macro(jj_rt *rt, int line, const jj_func *fn, const jj_args *a);
/* Fail with the undefined value's message. */
FR_NORETURN void fr_jj_fail_undefined(jj_rt *rt, int line, const jj_val *v);

/* Render a parsed template into out (a heap jj_sb the caller frees, also after a failure). */
void fr_jj_render(jj_rt *rt, const jj_node *root, jj_sb *out);

#endif
