/* jinja_parse.c — the template parser: tokens to an AST (jj_node, see jinja_impl.h).
 *
 * Design: recursive descent mirroring jinja2/parser.py function by function, so precedence and
 * the odd corners match Jinja2: filters bind tighter than any operator (`x|trim + 'a'` is
 * `(x|trim) + 'a'`), `is` tests sit with filters, `not` is above comparisons, comparisons chain,
 * `~` sits between additive and multiplicative operators, adjacent string literals concatenate,
 * `a if b` without else is allowed, implicit tuples are recognised where Jinja2 recognises them.
 *
 * Statements: if/elif/else, for/else (with `if` filter; `recursive` is unsupported), set (plain,
 * tuple unpacking, namespace attribute, block form with filters), macro, filter blocks, with,
 * print, break/continue (transformers enables jinja2.ext.loopcontrols), generation (the tag
 * transformers' AssistantTracker adds; rendered as a plain scoped body). Template inheritance,
 * include/import, call blocks and the like are reported as unsupported constructs.
 *
 * Unknown filters and tests fail at parse time unless they sit inside an if statement or a
 * conditional expression, where Jinja2 defers the error to when they are evaluated; filters and
 * tests Jinja2 has but this interpreter lacks always fail when evaluated, so templates that only
 * use them on paths a request does not take still render.
 *
 * Nesting is bounded (JJ_MAX_NEST) so hostile input cannot exhaust the stack.
 */
#include "model/jinja_impl.h"

#include <stdio.h>
#include <string.h>

typedef struct parser {
    jj_core *c;       /* errors and memory */
    const jj_tok *t;  /* tokens, ending with TK_EOF */
    size_t n, i;      /* token count, current token */
    int nest;         /* current nesting (bounded by JJ_MAX_NEST) */
    int loops;        /* enclosing for-loop bodies (for break/continue) */
} parser;

typedef struct nvec {
    jj_node **v; /* nodes */
    size_t n;    /* used */
    size_t cap;  /* allocated */
} nvec;

static void nv_push(parser *P, nvec *v, jj_node *x) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 4;
        v->v = fr_jj_grow(P->c, v->v, v->cap * sizeof *v->v, cap * sizeof *v->v);
        v->cap = cap;
    }
    v->v[v->n++] = x;
}

static jj_node *node(parser *P, jj_node_kind kind, int line) {
    jj_node *x = fr_jj_alloc(P->c, sizeof *x);
    x->kind = (uint8_t)kind;
    x->line = line;
    return x;
}

static int depth_of(const jj_node *x) { return x ? x->depth : 0; }

static bool child_foldable(const jj_node *x) {
    return !x || x->kind == JN_CONST || (x->info & JJ_FOLDABLE);
}
static bool child_slice(const jj_node *x) { return x && (x->info & JJ_HAS_SLICE); }

/* Whether jinja2 can evaluate the expression at compile time (nodes.Expr.as_const succeeds
 * structurally) and whether it contains a slice; computed bottom-up as nodes are finished.
 * Used for the one observable effect of constant folding, see fold_walk. */
static void fold_info(jj_node *x) {
    bool f;
    switch (x->kind) {
    case JN_FILTER:
        f = x->a && x->id >= 0 && !jj_str_eqz(x->name, "map") && !jj_str_eqz(x->name, "select") &&
            !jj_str_eqz(x->name, "reject") && !jj_str_eqz(x->name, "selectattr") &&
            !jj_str_eqz(x->name, "rejectattr"); /* these take the context: never folded */
        break;
    case JN_TEST: f = x->id >= 0; break;
    case JN_AND:
    case JN_OR: /* `a and b` folds when a decides it, so only a must be constant */
        f = child_foldable(x->a);
        break;
    case JN_CONDEX: /* folds when the taken branch is constant */
        f = child_foldable(x->a) && (child_foldable(x->b) || (x->c && child_foldable(x->c)));
        break;
    case JN_LIST: case JN_TUPLE: case JN_DICT: case JN_CONCAT: case JN_NOT: case JN_NEG:
    case JN_POS: case JN_BINOP: case JN_COMPARE: case JN_GETITEM: case JN_SLICE:
    case JN_GETATTR: f = true; break;
    default: f = false;
    }
    bool sl = x->kind == JN_SLICE;
    if (x->kind != JN_AND && x->kind != JN_OR && x->kind != JN_CONDEX)
        f = f && child_foldable(x->a) && child_foldable(x->b) && child_foldable(x->c);
    sl = sl || child_slice(x->a) || child_slice(x->b) || child_slice(x->c);
    for (size_t i = 0; i < x->nkids; i++) {
        f = f && child_foldable(x->kids[i]);
        sl = sl || child_slice(x->kids[i]);
    }
    for (size_t i = 0; i < x->nkw; i++) {
        f = f && child_foldable(x->kwvals[i]);
        sl = sl || child_slice(x->kwvals[i]);
    }
    x->info = (uint8_t)((f ? JJ_FOLDABLE : 0) | (sl ? JJ_HAS_SLICE : 0));
}

/* Set the height of an expression node whose children are final; chains built by loops
 * (a + b + c ..., x|f|g ..., a.b.c ...) are bounded here, nesting by enter(). */
static jj_node *fix(parser *P, jj_node *x) {
    int d = FR_MAX(depth_of(x->a), FR_MAX(depth_of(x->b), depth_of(x->c)));
    for (size_t i = 0; i < x->nkids; i++) d = FR_MAX(d, depth_of(x->kids[i]));
    for (size_t i = 0; i < x->nkw; i++) d = FR_MAX(d, depth_of(x->kwvals[i]));
    x->depth = d + 1;
    fold_info(x);
    if (x->depth > JJ_MAX_AST_DEPTH)
        fr_jj_fail_syntax(P->c, x->line, "expression nested too deeply (more than %d levels)",
                          JJ_MAX_AST_DEPTH);
    return x;
}

/* ---- token helpers ------------------------------------------------------------------------ */

static const jj_tok *cur(const parser *P) { return &P->t[P->i]; }
static const jj_tok *look(const parser *P) {
    return P->i + 1 < P->n ? &P->t[P->i + 1] : &P->t[P->n - 1];
}
static const jj_tok *next(parser *P) {
    const jj_tok *t = &P->t[P->i];
    if (t->kind != TK_EOF) P->i++;
    return t;
}
static bool is_name(const jj_tok *t, const char *z) {
    return t->kind == TK_NAME && jj_str_eqz(t->s, z);
}
static bool is_op(const jj_tok *t, jj_op op) { return t->kind == TK_OP && t->op == op; }

static const char *op_text(int op) {
    static const char *const txt[] = {"+", "-", "/", "//", "*", "**", "%", "~", "[", "]", "(",
                                      ")", "{", "}", "==", "!=", ">", ">=", "<", "<=", "=", ".",
                                      ":", "|", ",", ";", "in", "not in"};
    return op >= 0 && (size_t)op < FR_ARRAY_LEN(txt) ? txt[op] : "?";
}

static void describe(const jj_tok *t, char *buf, size_t n) {
    switch (t->kind) {
    case TK_EOF: snprintf(buf, n, "end of template"); break;
    case TK_DATA: snprintf(buf, n, "template data"); break;
    case TK_BLOCK_BEGIN: snprintf(buf, n, "begin of statement block"); break;
    case TK_BLOCK_END: snprintf(buf, n, "end of statement block"); break;
    case TK_VAR_BEGIN: snprintf(buf, n, "begin of print statement"); break;
    case TK_VAR_END: snprintf(buf, n, "end of print statement"); break;
    case TK_NAME: snprintf(buf, n, "'%.*s'", (int)FR_MIN(t->s.n, 60), t->s.p); break;
    case TK_STRING: snprintf(buf, n, "string"); break;
    case TK_INT:
    case TK_FLOAT: snprintf(buf, n, "number"); break;
    default: snprintf(buf, n, "'%s'", op_text(t->op)); break;
    }
}

FR_NORETURN static void unexpected(parser *P, const jj_tok *t) {
    char d[96];
    describe(t, d, sizeof d);
    fr_jj_fail_syntax(P->c, t->line, "unexpected %s", d);
}

static void expect_op(parser *P, jj_op op) {
    const jj_tok *t = cur(P);
    if (!is_op(t, op)) {
        char d[96];
        describe(t, d, sizeof d);
        if (t->kind == TK_EOF)
            fr_jj_fail_syntax(P->c, t->line, "unexpected end of template, expected '%s'",
                              op_text(op));
        fr_jj_fail_syntax(P->c, t->line, "expected '%s', got %s", op_text(op), d);
    }
    next(P);
}

static void expect_kind(parser *P, jj_tok_kind k) {
    const jj_tok *t = cur(P);
    if (t->kind != k) {
        char d[96];
        const char *w = k == TK_BLOCK_END ? "end of statement block"
                        : k == TK_VAR_END ? "end of print statement"
                                          : "another token";
        describe(t, d, sizeof d);
        if (t->kind == TK_EOF)
            fr_jj_fail_syntax(P->c, t->line, "unexpected end of template, expected %s", w);
        fr_jj_fail_syntax(P->c, t->line, "expected %s, got %s", w, d);
    }
    next(P);
}

static jj_str expect_name(parser *P) {
    const jj_tok *t = cur(P);
    if (t->kind != TK_NAME) {
        char d[96];
        describe(t, d, sizeof d);
        fr_jj_fail_syntax(P->c, t->line, "expected a name, got %s", d);
    }
    next(P);
    return t->s;
}

static void enter(parser *P) {
    if (++P->nest > JJ_MAX_NEST)
        fr_jj_fail_syntax(P->c, cur(P)->line, "template nested too deeply (more than %d levels)",
                          JJ_MAX_NEST);
}
static void leave(parser *P) { P->nest--; }

/* ---- expressions -------------------------------------------------------------------------- */

static jj_node *parse_expression(parser *P, bool with_condexpr);
static jj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end,
                            bool explicit_parens, bool with_namespace);
static jj_node *parse_unary(parser *P, bool with_filter);
static jj_node *parse_primary(parser *P, bool with_namespace);
static jj_node *parse_postfix(parser *P, jj_node *x);
static jj_node *parse_filter(parser *P, jj_node *x, bool start_inline);

static jj_node *binop(parser *P, jj_node_kind kind, jj_op op, jj_node *a, jj_node *b, int line) {
    jj_node *x = node(P, kind, line);
    x->op = (uint8_t)op;
    x->a = a;
    x->b = b;
    return fix(P, x);
}

static jj_node *parse_or(parser *P);

static jj_node *parse_condexpr(parser *P) {
    int line = cur(P)->line;
    jj_node *e1 = parse_or(P);
    while (is_name(cur(P), "if")) {
        next(P);
        jj_node *x = node(P, JN_CONDEX, line);
        x->a = parse_or(P);
        x->b = e1;
        if (is_name(cur(P), "else")) {
            next(P);
            enter(P);
            x->c = parse_condexpr(P);
            leave(P);
        }
        e1 = fix(P, x);
        line = cur(P)->line;
    }
    return e1;
}

static jj_node *parse_expression(parser *P, bool with_condexpr) {
    enter(P);
    jj_node *x = with_condexpr ? parse_condexpr(P) : parse_or(P);
    leave(P);
    return x;
}

static jj_node *parse_not(parser *P);
static jj_node *parse_and(parser *P) {
    int line = cur(P)->line;
    jj_node *l = parse_not(P);
    while (is_name(cur(P), "and")) {
        next(P);
        l = binop(P, JN_AND, 0, l, parse_not(P), line);
        line = cur(P)->line;
    }
    return l;
}

static jj_node *parse_or(parser *P) {
    int line = cur(P)->line;
    jj_node *l = parse_and(P);
    while (is_name(cur(P), "or")) {
        next(P);
        l = binop(P, JN_OR, 0, l, parse_and(P), line);
        line = cur(P)->line;
    }
    return l;
}

static jj_node *parse_compare(parser *P);
static jj_node *parse_not(parser *P) {
    if (is_name(cur(P), "not")) {
        int line = next(P)->line;
        enter(P);
        jj_node *x = node(P, JN_NOT, line);
        x->a = parse_not(P);
        leave(P);
        return fix(P, x);
    }
    return parse_compare(P);
}

static jj_node *parse_math1(parser *P);
static jj_node *parse_compare(parser *P) {
    int line = cur(P)->line;
    jj_node *e = parse_math1(P);
    nvec operands = {0};
    size_t nops = 0, capops = 0;
    uint8_t *ops = NULL;
    for (;;) {
        const jj_tok *t = cur(P);
        int op = -1;
        if (t->kind == TK_OP && (t->op == JO_EQ || t->op == JO_NE || t->op == JO_LT ||
                                 t->op == JO_LTEQ || t->op == JO_GT || t->op == JO_GTEQ)) {
            op = t->op;
            next(P);
        } else if (is_name(t, "in")) {
            op = JO_IN;
            next(P);
        } else if (is_name(t, "not") && is_name(look(P), "in")) {
            op = JO_NOTIN;
            next(P);
            next(P);
        } else {
            break;
        }
        if (nops == capops) {
            size_t cap = capops ? capops * 2 : 4;
            ops = fr_jj_grow(P->c, ops, capops, cap);
            capops = cap;
        }
        ops[nops++] = (uint8_t)op;
        nv_push(P, &operands, parse_math1(P));
        line = cur(P)->line;
    }
    if (!nops) return e;
    jj_node *x = node(P, JN_COMPARE, line);
    x->a = e;
    x->kids = operands.v;
    x->nkids = operands.n;
    x->ops = ops;
    return fix(P, x);
}

static jj_node *parse_concat(parser *P);
static jj_node *parse_math1(parser *P) {
    int line = cur(P)->line;
    jj_node *l = parse_concat(P);
    while (is_op(cur(P), JO_ADD) || is_op(cur(P), JO_SUB)) {
        jj_op op = (jj_op)next(P)->op;
        l = binop(P, JN_BINOP, op, l, parse_concat(P), line);
        line = cur(P)->line;
    }
    return l;
}

static jj_node *parse_math2(parser *P);
static jj_node *parse_concat(parser *P) {
    int line = cur(P)->line;
    jj_node *first = parse_math2(P);
    if (!is_op(cur(P), JO_TILDE)) return first;
    nvec args = {0};
    nv_push(P, &args, first);
    while (is_op(cur(P), JO_TILDE)) {
        next(P);
        nv_push(P, &args, parse_math2(P));
    }
    jj_node *x = node(P, JN_CONCAT, line);
    x->kids = args.v;
    x->nkids = args.n;
    return fix(P, x);
}

static jj_node *parse_pow(parser *P);
static jj_node *parse_math2(parser *P) {
    int line = cur(P)->line;
    jj_node *l = parse_pow(P);
    for (;;) {
        const jj_tok *t = cur(P);
        if (!(is_op(t, JO_MUL) || is_op(t, JO_DIV) || is_op(t, JO_FLOORDIV) || is_op(t, JO_MOD)))
            break;
        next(P);
        l = binop(P, JN_BINOP, (jj_op)t->op, l, parse_pow(P), line);
        line = cur(P)->line;
    }
    return l;
}

static jj_node *parse_pow(parser *P) {
    int line = cur(P)->line;
    jj_node *l = parse_unary(P, true);
    while (is_op(cur(P), JO_POW)) {
        next(P);
        l = binop(P, JN_BINOP, JO_POW, l, parse_unary(P, true), line);
        line = cur(P)->line;
    }
    return l;
}

static jj_node *parse_filter_expr(parser *P, jj_node *x);

static jj_node *parse_unary(parser *P, bool with_filter) {
    const jj_tok *t = cur(P);
    jj_node *x;
    enter(P);
    if (is_op(t, JO_SUB) || is_op(t, JO_ADD)) {
        next(P);
        x = node(P, is_op(t, JO_SUB) ? JN_NEG : JN_POS, t->line);
        x->a = parse_unary(P, false);
        fix(P, x);
    } else {
        x = parse_primary(P, false);
    }
    x = parse_postfix(P, x);
    if (with_filter) x = parse_filter_expr(P, x);
    leave(P);
    return x;
}

static jj_node *parse_list(parser *P) {
    int line = cur(P)->line;
    expect_op(P, JO_LBRACKET);
    nvec items = {0};
    while (!is_op(cur(P), JO_RBRACKET)) {
        if (items.n) expect_op(P, JO_COMMA);
        if (is_op(cur(P), JO_RBRACKET)) break;
        nv_push(P, &items, parse_expression(P, true));
    }
    expect_op(P, JO_RBRACKET);
    jj_node *x = node(P, JN_LIST, line);
    x->kids = items.v;
    x->nkids = items.n;
    return fix(P, x);
}

static jj_node *parse_dict(parser *P) {
    int line = cur(P)->line;
    expect_op(P, JO_LBRACE);
    nvec items = {0};
    while (!is_op(cur(P), JO_RBRACE)) {
        if (items.n) expect_op(P, JO_COMMA);
        if (is_op(cur(P), JO_RBRACE)) break;
        nv_push(P, &items, parse_expression(P, true));
        expect_op(P, JO_COLON);
        nv_push(P, &items, parse_expression(P, true));
    }
    expect_op(P, JO_RBRACE);
    jj_node *x = node(P, JN_DICT, line);
    x->kids = items.v;
    x->nkids = items.n;
    return fix(P, x);
}

static jj_node *parse_primary(parser *P, bool with_namespace) {
    const jj_tok *t = cur(P);
    jj_node *x;
    switch (t->kind) {
    case TK_NAME:
        next(P);
        x = node(P, JN_CONST, t->line);
        if (jj_str_eqz(t->s, "true") || jj_str_eqz(t->s, "True")) x->val = jj_bool(true);
        else if (jj_str_eqz(t->s, "false") || jj_str_eqz(t->s, "False")) x->val = jj_bool(false);
        else if (jj_str_eqz(t->s, "none") || jj_str_eqz(t->s, "None")) x->val = jj_none();
        else if (with_namespace && is_op(cur(P), JO_DOT)) {
            next(P);
            x->kind = JN_NSREF;
            x->name = t->s;
            x->name2 = expect_name(P);
        } else {
            x->kind = JN_NAME;
            x->name = t->s;
        }
        return x;
    case TK_STRING: {
        next(P);
        x = node(P, JN_CONST, t->line);
        if (cur(P)->kind != TK_STRING) {
            x->val = jj_strv(t->s);
            return x;
        }
        jj_sb b = {0};
        fr_jj_sb_put(P->c, &b, t->s.p, t->s.n);
        while (cur(P)->kind == TK_STRING) {
            fr_jj_sb_put(P->c, &b, cur(P)->s.p, cur(P)->s.n);
            next(P);
        }
        x->val = jj_strv(jj_sb_str(&b));
        return x;
    }
    case TK_INT:
        next(P);
        x = node(P, JN_CONST, t->line);
        x->val = jj_int(t->i);
        return x;
    case TK_FLOAT:
        next(P);
        x = node(P, JN_CONST, t->line);
        x->val = jj_float(t->f);
        return x;
    case TK_OP:
        if (t->op == JO_LPAREN) {
            next(P);
            x = parse_tuple(P, false, true, NULL, true, false);
            expect_op(P, JO_RPAREN);
            return x;
        }
        if (t->op == JO_LBRACKET) return parse_list(P);
        if (t->op == JO_LBRACE) return parse_dict(P);
        break;
    default: break;
    }
    unexpected(P, t);
}

static bool is_tuple_end(parser *P, const char *extra_end) {
    const jj_tok *t = cur(P);
    if (t->kind == TK_VAR_END || t->kind == TK_BLOCK_END || is_op(t, JO_RPAREN)) return true;
    return extra_end && is_name(t, extra_end);
}

static jj_node *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end,
                            bool explicit_parens, bool with_namespace) {
    int line = cur(P)->line;
    nvec args = {0};
    bool is_tuple = false;
    for (;;) {
        if (args.n) expect_op(P, JO_COMMA);
        if (is_tuple_end(P, extra_end)) break;
        nv_push(P, &args, simplified ? parse_primary(P, with_namespace)
                                     : parse_expression(P, with_condexpr));
        if (is_op(cur(P), JO_COMMA)) is_tuple = true;
        else break;
        line = cur(P)->line;
    }
    if (!is_tuple) {
        if (args.n) return args.v[0];
        if (!explicit_parens) {
            char d[96];
            describe(cur(P), d, sizeof d);
            fr_jj_fail_syntax(P->c, cur(P)->line, "expected an expression, got %s", d);
        }
    }
    jj_node *x = node(P, JN_TUPLE, line);
    x->kids = args.v;
    x->nkids = args.n;
    return fix(P, x);
}

/* Call arguments "(a, b, k=v)" into x->kids / x->kwnames / x->kwvals. */
static void parse_call_args(parser *P, jj_node *x) {
    const jj_tok *open = cur(P);
    expect_op(P, JO_LPAREN);
    nvec args = {0}, kwv = {0};
    jj_str *kwn = NULL;
    size_t capkw = 0;
    bool need_comma = false;
    while (!is_op(cur(P), JO_RPAREN)) {
        if (need_comma) {
            expect_op(P, JO_COMMA);
            if (is_op(cur(P), JO_RPAREN)) break;
        }
        if (is_op(cur(P), JO_MUL) || is_op(cur(P), JO_POW))
            fr_jj_fail_unsup(P->c, cur(P)->line, "*args / **kwargs in a call");
        if (cur(P)->kind == TK_NAME && is_op(look(P), JO_ASSIGN)) {
            jj_str k = next(P)->s;
            next(P);
            if (kwv.n == capkw) {
                size_t cap = capkw ? capkw * 2 : 4;
                kwn = fr_jj_grow(P->c, kwn, capkw * sizeof *kwn, cap * sizeof *kwn);
                capkw = cap;
            }
            kwn[kwv.n] = k;
            nv_push(P, &kwv, parse_expression(P, true));
        } else {
            if (kwv.n)
                fr_jj_fail_syntax(P->c, open->line, "invalid syntax for function call expression");
            nv_push(P, &args, parse_expression(P, true));
        }
        need_comma = true;
    }
    expect_op(P, JO_RPAREN);
    x->kids = args.v;
    x->nkids = args.n;
    x->kwnames = kwn;
    x->kwvals = kwv.v;
    x->nkw = kwv.n;
}

static jj_node *parse_call(parser *P, jj_node *callee) {
    jj_node *x = node(P, JN_CALL, cur(P)->line);
    x->a = callee;
    parse_call_args(P, x);
    return fix(P, x);
}

static jj_node *parse_subscribed(parser *P) {
    int line = cur(P)->line;
    jj_node *start = NULL;
    if (is_op(cur(P), JO_COLON)) {
        next(P);
    } else {
        jj_node *e = parse_expression(P, true);
        if (!is_op(cur(P), JO_COLON)) return e;
        next(P);
        start = e;
    }
    jj_node *x = node(P, JN_SLICE, line);
    x->a = start;
    if (!is_op(cur(P), JO_COLON) && !is_op(cur(P), JO_RBRACKET) && !is_op(cur(P), JO_COMMA))
        x->b = parse_expression(P, true);
    if (is_op(cur(P), JO_COLON)) {
        next(P);
        if (!is_op(cur(P), JO_RBRACKET) && !is_op(cur(P), JO_COMMA))
            x->c = parse_expression(P, true);
    }
    return fix(P, x);
}

/* jinja2 folds constant subexpressions at compile time, where a subscript goes through the
 * sandbox's getitem (a failing slice gives undefined) instead of Python's own (an error). A
 * folded value replaces the expression when it is a plain value (None, bool, number, str, or
 * containers of them), and always for a whole {{ }} expression. Mark the foldable subexpressions
 * that contain a slice (the only case where folding is observable); the evaluator then does the
 * same (jinja_eval.c). */
static void fold_walk(jj_node *x, bool output) {
    while (x && x->kind == JS_IF) { /* elif chains iteratively */
        fold_walk(x->a, false);
        for (size_t i = 0; i < x->nkids; i++) fold_walk(x->kids[i], false);
        if (x->nkids2 == 1 && x->kids2[0]->kind == JS_IF) {
            x = x->kids2[0];
            continue;
        }
        for (size_t i = 0; i < x->nkids2; i++) fold_walk(x->kids2[i], false);
        return;
    }
    if (!x) return;
    /* jinja2's optimizer works bottom-up: every constant part folds on its own, so an inner
     * part can fold to a plain value even when the whole (say, a bound method) is not kept */
    if (x->kind < JS_OUTPUT && (x->info & JJ_FOLDABLE) && (x->info & JJ_HAS_SLICE))
        x->fold = output ? 2 : 1;
    bool kid_output = x->kind == JS_OUTPUT;
    fold_walk(x->a, false);
    fold_walk(x->b, false);
    fold_walk(x->c, false);
    for (size_t i = 0; i < x->nkids; i++) fold_walk(x->kids[i], kid_output);
    for (size_t i = 0; i < x->nkids2; i++) fold_walk(x->kids2[i], false);
    for (size_t i = 0; i < x->nkids4; i++) fold_walk(x->kids4[i], false);
    for (size_t i = 0; i < x->nkw; i++) fold_walk(x->kwvals[i], false);
}

static jj_node *parse_subscript(parser *P, jj_node *obj) {
    const jj_tok *t = next(P);
    if (is_op(t, JO_DOT)) {
        const jj_tok *a = next(P);
        if (a->kind == TK_NAME) {
            jj_node *x = node(P, JN_GETATTR, t->line);
            x->a = obj;
            x->name = a->s;
            return fix(P, x);
        }
        if (a->kind != TK_INT) fr_jj_fail_syntax(P->c, a->line, "expected name or number");
        jj_node *k = node(P, JN_CONST, a->line);
        k->val = jj_int(a->i);
        jj_node *x = node(P, JN_GETITEM, t->line);
        x->a = obj;
        x->b = k;
        return fix(P, x);
    }
    /* '[' */
    nvec args = {0};
    while (!is_op(cur(P), JO_RBRACKET)) {
        if (args.n) expect_op(P, JO_COMMA);
        nv_push(P, &args, parse_subscribed(P));
    }
    expect_op(P, JO_RBRACKET);
    jj_node *x = node(P, JN_GETITEM, t->line);
    x->a = obj;
    if (args.n == 1) {
        x->b = args.v[0];
    } else {
        jj_node *tup = node(P, JN_TUPLE, t->line);
        tup->kids = args.v;
        tup->nkids = args.n;
        x->b = fix(P, tup);
    }
    return fix(P, x);
}

static jj_node *parse_postfix(parser *P, jj_node *x) {
    for (;;) {
        const jj_tok *t = cur(P);
        if (is_op(t, JO_DOT) || is_op(t, JO_LBRACKET)) x = parse_subscript(P, x);
        else if (is_op(t, JO_LPAREN)) x = parse_call(P, x);
        else break;
    }
    return x;
}

/* A filter or test name, possibly dotted. */
static jj_str parse_dotted_name(parser *P) {
    jj_str name = expect_name(P);
    if (!is_op(cur(P), JO_DOT)) return name;
    jj_sb b = {0};
    fr_jj_sb_put(P->c, &b, name.p, name.n);
    while (is_op(cur(P), JO_DOT)) {
        next(P);
        jj_str more = expect_name(P);
        fr_jj_sb_putc(P->c, &b, '.');
        fr_jj_sb_put(P->c, &b, more.p, more.n);
    }
    return jj_sb_str(&b);
}

static jj_node *parse_filter(parser *P, jj_node *x, bool start_inline) {
    while (is_op(cur(P), JO_PIPE) || start_inline) {
        if (!start_inline) next(P);
        start_inline = false;
        int line = cur(P)->line;
        jj_str name = parse_dotted_name(P);
        jj_node *f = node(P, JN_FILTER, line);
        f->a = x;
        f->name = name;
        f->id = fr_jj_filter_id(name);
        if (is_op(cur(P), JO_LPAREN)) parse_call_args(P, f);
        x = fix(P, f);
    }
    return x;
}

static jj_node *parse_test(parser *P, jj_node *x) {
    int line = next(P)->line; /* 'is' */
    bool negated = false;
    if (is_name(cur(P), "not")) {
        next(P);
        negated = true;
    }
    jj_str name = parse_dotted_name(P);
    jj_node *t = node(P, JN_TEST, line);
    t->a = x;
    t->name = name;
    t->id = fr_jj_test_id(name);
    const jj_tok *c = cur(P);
    if (is_op(c, JO_LPAREN)) {
        parse_call_args(P, t);
    } else if ((c->kind == TK_NAME || c->kind == TK_STRING || c->kind == TK_INT ||
                c->kind == TK_FLOAT || is_op(c, JO_LBRACKET) || is_op(c, JO_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            fr_jj_fail_syntax(P->c, c->line, "you cannot chain multiple tests with is");
        enter(P);
        jj_node *arg = parse_postfix(P, parse_primary(P, false));
        leave(P);
        t->kids = fr_jj_alloc(P->c, sizeof *t->kids);
        t->kids[0] = arg;
        t->nkids = 1;
    }
    fix(P, t);
    if (!negated) return t;
    jj_node *n = node(P, JN_NOT, line);
    n->a = t;
    return fix(P, n);
}

static jj_node *parse_filter_expr(parser *P, jj_node *x) {
    for (;;) {
        const jj_tok *t = cur(P);
        if (is_op(t, JO_PIPE)) x = parse_filter(P, x, false);
        else if (is_name(t, "is")) x = parse_test(P, x);
        else if (is_op(t, JO_LPAREN)) x = parse_call(P, x);
        else break;
    }
    return x;
}

/* ---- statements --------------------------------------------------------------------------- */

static nvec subparse(parser *P, const char *const *end, size_t nend);

static bool can_assign(const jj_node *x) {
    if (x->kind == JN_NAME || x->kind == JN_NSREF) return true;
    if (x->kind != JN_TUPLE) return false;
    for (size_t i = 0; i < x->nkids; i++)
        if (!can_assign(x->kids[i])) return false;
    return true;
}

static jj_node *parse_assign_target(parser *P, const char *extra_end, bool with_namespace) {
    int line = cur(P)->line;
    jj_node *x = parse_tuple(P, true, true, extra_end, false, with_namespace);
    if (!can_assign(x)) fr_jj_fail_syntax(P->c, line, "can't assign to this expression");
    return x;
}

/* The body of a block statement up to one of `end` (the end name stays current unless
 * drop_needle). */
static nvec parse_statements(parser *P, const char *const *end, size_t nend, bool drop_needle,
                             const char *tag, int tag_line) {
    if (is_op(cur(P), JO_COLON)) next(P);
    expect_kind(P, TK_BLOCK_END);
    nvec body = subparse(P, end, nend);
    if (cur(P)->kind == TK_EOF) {
        char want[160];
        size_t k = 0;
        for (size_t i = 0; i < nend && k < sizeof want; i++)
            k += (size_t)snprintf(want + k, sizeof want - k, "%s'%s'", i ? " or " : "", end[i]);
        fr_jj_fail_syntax(P->c, cur(P)->line,
                          "unexpected end of template, expected %s to close '%s' from line %d",
                          want, tag, tag_line);
    }
    if (drop_needle) next(P);
    return body;
}

static void set_body(jj_node *x, nvec b) {
    x->kids = b.v;
    x->nkids = b.n;
}
static void set_else(jj_node *x, nvec b) {
    x->kids2 = b.v;
    x->nkids2 = b.n;
}

static jj_node *parse_for(parser *P) {
    int line = next(P)->line;
    jj_node *x = node(P, JS_FOR, line);
    x->a = parse_assign_target(P, "in", false);
    if (!is_name(cur(P), "in")) {
        char d[96];
        describe(cur(P), d, sizeof d);
        fr_jj_fail_syntax(P->c, cur(P)->line, "expected 'in', got %s", d);
    }
    next(P);
    x->b = parse_tuple(P, false, false, "recursive", false, false);
    if (is_name(cur(P), "if")) {
        next(P);
        x->c = parse_expression(P, true);
    }
    if (is_name(cur(P), "recursive")) fr_jj_fail_unsup(P->c, cur(P)->line, "recursive for loop");
    static const char *const end1[] = {"endfor", "else"}, *const end2[] = {"endfor"};
    P->loops++;
    set_body(x, parse_statements(P, end1, 2, false, "for", line));
    P->loops--;
    if (is_name(next(P), "else")) set_else(x, parse_statements(P, end2, 1, true, "for", line));
    return x;
}

static jj_node *parse_if(parser *P) {
    int line = next(P)->line;
    static const char *const end1[] = {"elif", "else", "endif"}, *const end2[] = {"endif"};
    jj_node *top = node(P, JS_IF, line), *x = top;
    for (;;) {
        x->a = parse_tuple(P, false, false, NULL, false, false);
        set_body(x, parse_statements(P, end1, 3, false, "if", line));
        const jj_tok *t = next(P);
        if (is_name(t, "elif")) {
            jj_node *e = node(P, JS_IF, t->line);
            x->kids2 = fr_jj_alloc(P->c, sizeof *x->kids2);
            x->kids2[0] = e;
            x->nkids2 = 1;
            x = e;
            continue;
        }
        if (is_name(t, "else")) set_else(x, parse_statements(P, end2, 1, true, "if", line));
        break;
    }
    return top;
}

static jj_node *parse_set(parser *P) {
    int line = next(P)->line;
    jj_node *target = parse_assign_target(P, NULL, true);
    if (is_op(cur(P), JO_ASSIGN)) {
        next(P);
        jj_node *x = node(P, JS_SET, line);
        x->a = target;
        x->b = parse_tuple(P, false, true, NULL, false, false);
        return x;
    }
    if (target->kind == JN_TUPLE) fr_jj_fail_unsup(P->c, line, "block set with several targets");
    jj_node *x = node(P, JS_SETBLOCK, line);
    x->a = target;
    x->c = parse_filter(P, NULL, false);
    static const char *const end[] = {"endset"};
    set_body(x, parse_statements(P, end, 1, true, "set", line));
    return x;
}

static jj_node *parse_macro(parser *P) {
    int line = next(P)->line;
    jj_node *x = node(P, JS_MACRO, line);
    x->name = expect_name(P);
    expect_op(P, JO_LPAREN);
    nvec params = {0}, defaults = {0};
    bool any_default = false;
    while (!is_op(cur(P), JO_RPAREN)) {
        if (params.n) expect_op(P, JO_COMMA);
        jj_node *pn = node(P, JN_NAME, cur(P)->line);
        pn->name = expect_name(P);
        nv_push(P, &params, pn);
        if (is_op(cur(P), JO_ASSIGN)) {
            next(P);
            nv_push(P, &defaults, parse_expression(P, true));
            any_default = true;
        } else {
            if (any_default)
                fr_jj_fail_syntax(P->c, cur(P)->line,
                                  "non-default argument follows default argument");
            nv_push(P, &defaults, NULL);
        }
    }
    expect_op(P, JO_RPAREN);
    x->kids3 = params.v;
    x->nkids3 = params.n;
    x->kids4 = defaults.v;
    x->nkids4 = defaults.n;
    int loops = P->loops;
    P->loops = 0;
    static const char *const end[] = {"endmacro"};
    set_body(x, parse_statements(P, end, 1, true, "macro", line));
    P->loops = loops;
    return x;
}

static jj_node *parse_filter_block(parser *P) {
    int line = next(P)->line;
    jj_node *x = node(P, JS_FILTER, line);
    x->c = parse_filter(P, NULL, true);
    static const char *const end[] = {"endfilter"};
    set_body(x, parse_statements(P, end, 1, true, "filter", line));
    return x;
}

static jj_node *parse_with(parser *P) {
    int line = next(P)->line;
    jj_node *x = node(P, JS_WITH, line);
    nvec targets = {0}, values = {0};
    while (cur(P)->kind != TK_BLOCK_END) {
        if (targets.n) expect_op(P, JO_COMMA);
        jj_node *t = parse_assign_target(P, NULL, false);
        if (t->kind != JN_NAME) fr_jj_fail_unsup(P->c, line, "with statement with tuple targets");
        nv_push(P, &targets, t);
        expect_op(P, JO_ASSIGN);
        nv_push(P, &values, parse_expression(P, true));
    }
    x->kids3 = targets.v;
    x->nkids3 = targets.n;
    x->kids4 = values.v;
    x->nkids4 = values.n;
    static const char *const end[] = {"endwith"};
    set_body(x, parse_statements(P, end, 1, true, "with", line));
    return x;
}

static jj_node *parse_print(parser *P) {
    int line = next(P)->line;
    jj_node *x = node(P, JS_OUTPUT, line);
    nvec items = {0};
    while (cur(P)->kind != TK_BLOCK_END) {
        if (items.n) expect_op(P, JO_COMMA);
        nv_push(P, &items, parse_expression(P, true));
    }
    set_body(x, items);
    return x;
}

static jj_node *parse_statement(parser *P) {
    const jj_tok *t = cur(P);
    if (t->kind != TK_NAME) fr_jj_fail_syntax(P->c, t->line, "tag name expected");
    if (is_name(t, "for")) return parse_for(P);
    if (is_name(t, "if")) return parse_if(P);
    if (is_name(t, "set")) return parse_set(P);
    if (is_name(t, "macro")) return parse_macro(P);
    if (is_name(t, "filter")) return parse_filter_block(P);
    if (is_name(t, "with")) return parse_with(P);
    if (is_name(t, "print")) return parse_print(P);
    if (is_name(t, "break") || is_name(t, "continue")) {
        bool brk = is_name(t, "break");
        next(P);
        if (!P->loops)
            fr_jj_fail_syntax(P->c, t->line, "'%s' outside of a loop", brk ? "break" : "continue");
        return node(P, brk ? JS_BREAK : JS_CONTINUE, t->line);
    }
    if (is_name(t, "generation")) {
        int line = next(P)->line;
        jj_node *x = node(P, JS_BLOCK, line);
        int loops = P->loops;
        P->loops = 0;
        static const char *const end[] = {"endgeneration"};
        set_body(x, parse_statements(P, end, 1, true, "generation", line));
        P->loops = loops;
        return x;
    }
    static const char *const unsupported[] = {"block", "extends", "include", "import", "from",
                                              "call", "autoescape", "raw", "do", "trans",
                                              "pluralize"};
    for (size_t i = 0; i < FR_ARRAY_LEN(unsupported); i++)
        if (is_name(t, unsupported[i]))
            fr_jj_fail_unsup(P->c, t->line, "'{%% %s %%}' tag", unsupported[i]);
    fr_jj_fail_syntax(P->c, t->line, "encountered unknown tag '%.*s'", (int)FR_MIN(t->s.n, 60),
                      t->s.p);
}

static nvec subparse(parser *P, const char *const *end, size_t nend) {
    nvec body = {0}, data = {0};
    int data_line = 0;
    enter(P);
    for (;;) {
        const jj_tok *t = cur(P);
        if (t->kind == TK_EOF) break;
        if (t->kind == TK_DATA) {
            if (!data.n) data_line = t->line;
            jj_node *x = node(P, JN_CONST, t->line);
            x->val = jj_strv(t->s);
            nv_push(P, &data, x);
            next(P);
        } else if (t->kind == TK_VAR_BEGIN) {
            if (!data.n) data_line = t->line;
            next(P);
            nv_push(P, &data, parse_tuple(P, false, true, NULL, false, false));
            expect_kind(P, TK_VAR_END);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            if (data.n) {
                jj_node *o = node(P, JS_OUTPUT, data_line);
                set_body(o, data);
                nv_push(P, &body, o);
                memset(&data, 0, sizeof data);
            }
            next(P);
            for (size_t i = 0; i < nend; i++)
                if (is_name(cur(P), end[i])) {
                    leave(P);
                    return body;
                }
            nv_push(P, &body, parse_statement(P));
            expect_kind(P, TK_BLOCK_END);
        } else {
            unexpected(P, t);
        }
    }
    if (data.n) {
        jj_node *o = node(P, JS_OUTPUT, data_line);
        set_body(o, data);
        nv_push(P, &body, o);
    }
    leave(P);
    return body;
}

/* Unknown filters and tests fail at compile time unless inside an if statement or a conditional
 * expression ("soft" frames in jinja2's code generator; loop, macro and block bodies start
 * hard again). */
static void check_names(parser *P, const jj_node *x, bool soft) {
    /* elif chains are walked iteratively: their length is not bounded by nesting */
    while (x && x->kind == JS_IF) {
        check_names(P, x->a, true);
        for (size_t i = 0; i < x->nkids; i++) check_names(P, x->kids[i], true);
        if (x->nkids2 == 1 && x->kids2[0]->kind == JS_IF) {
            x = x->kids2[0];
            continue;
        }
        for (size_t i = 0; i < x->nkids2; i++) check_names(P, x->kids2[i], true);
        return;
    }
    if (!x) return;
    if ((x->kind == JN_FILTER || x->kind == JN_TEST) && x->id == -1 && !soft)
        fr_jj_fail_syntax(P->c, x->line, "no %s named '%.*s'",
                          x->kind == JN_FILTER ? "filter" : "test", (int)FR_MIN(x->name.n, 60),
                          x->name.p);
    bool inner = soft;
    switch (x->kind) {
    case JN_CONDEX: soft = inner = true; break;
    case JS_FOR:
    case JS_MACRO:
    case JS_SETBLOCK:
    case JS_FILTER:
    case JS_WITH:
    case JS_BLOCK: inner = false; break;
    default: break;
    }
    check_names(P, x->a, x->kind == JS_FOR ? soft : inner);
    check_names(P, x->b, soft);
    check_names(P, x->c, x->kind == JS_FOR ? false : inner);
    for (size_t i = 0; i < x->nkids; i++) check_names(P, x->kids[i], inner);
    for (size_t i = 0; i < x->nkids2; i++) check_names(P, x->kids2[i], inner);
    for (size_t i = 0; i < x->nkids4; i++) check_names(P, x->kids4[i], soft);
    for (size_t i = 0; i < x->nkw; i++) check_names(P, x->kwvals[i], inner);
}

jj_node *fr_jj_parse(jj_core *c, const jj_tok *toks, size_t ntoks) {
    parser P;
    memset(&P, 0, sizeof P);
    P.c = c;
    P.t = toks;
    P.n = ntoks;
    nvec body = subparse(&P, NULL, 0);
    if (cur(&P)->kind != TK_EOF) unexpected(&P, cur(&P));
    jj_node *root = node(&P, JS_BLOCK, 1);
    set_body(root, body);
    for (size_t i = 0; i < body.n; i++) {
        check_names(&P, body.v[i], false);
        fold_walk(body.v[i], false);
    }
    return root;
}
