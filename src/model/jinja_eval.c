/* jinja_eval.c — the tree-walking evaluator: statements, expressions, scopes and macros.
 *
 * Design
 *   Scoping follows what jinja2's compiler produces: the template body writes to the global
 *   scope; every for-loop iteration, macro call, with block, set block, filter block and
 *   generation block runs in a fresh child scope, so `{% set %}` inside a loop body is local to
 *   that iteration (reads fall through to outer scopes until the first assignment) and never
 *   leaks out — the Llama-3 template relies on this. `if` does not open a scope. namespace()
 *   objects are the sanctioned way to carry state out of a loop. Macros see the global scope
 *   (as top-level macros do in jinja2) plus their parameters.
 *
 *   Expressions use Python semantics (see jinja_value.c): `and`/`or` return an operand, `+`
 *   adds numbers or concatenates str/list/tuple, `~` concatenates str() of its operands, `/` is
 *   true division, `//` and `%` floor, comparisons chain, `a if c` without else is undefined
 *   when c is false. Undefined values print as "" and iterate as empty, but arithmetic,
 *   ordering, calling or taking an attribute of one fails, as with jinja2's default Undefined.
 *
 *   jinja2 also folds constant subexpressions at compile time; that is only observable where
 *   a slice of a constant fails (folded: undefined; at run time: an error), so the parser marks
 *   such subexpressions and eval() tries them the compile-time way first (try_fold).
 *
 *   Bounds: recursion depth (JJ_MAX_DEPTH), nested macro calls (JJ_MAX_CALLS), loop iterations
 *   (JJ_MAX_ITERS) and evaluation steps (JJ_MAX_STEPS) are checked here; string sizes and memory
 *   in jinja_value.c.
 */
#include "model/jinja_impl.h"

#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

struct jj_scope {
    jj_scope *parent; /* enclosing scope (NULL for globals) */
    size_t n, cap;    /* variables used / allocated */
    jj_str *k;        /* names */
    jj_val *v;        /* values */
};

enum { ST_OK, ST_BREAK, ST_CONTINUE };

static jj_core *C(jj_rt *rt) { return &rt->core; }

static jj_val *scope_find(jj_rt *rt, jj_scope *s, jj_str name) {
    for (; s; s = s->parent) {
        fr_jj_charge(C(rt), s->n / 4);
        for (size_t i = s->n; i-- > 0;)
            if (jj_str_eq(s->k[i], name)) return &s->v[i];
    }
    return NULL;
}

static void scope_set(jj_rt *rt, jj_scope *s, jj_str name, jj_val v) {
    fr_jj_charge(C(rt), s->n / 4);
    for (size_t i = 0; i < s->n; i++)
        if (jj_str_eq(s->k[i], name)) {
            s->v[i] = v;
            return;
        }
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        s->k = fr_jj_grow(C(rt), s->k, s->cap * sizeof *s->k, cap * sizeof *s->k);
        s->v = fr_jj_grow(C(rt), s->v, s->cap * sizeof *s->v, cap * sizeof *s->v);
        s->cap = cap;
    }
    s->k[s->n] = name;
    s->v[s->n++] = v;
}

static jj_val undef_fmt(jj_rt *rt, const char *fmt, ...) FR_PRINTF(2, 3);
static jj_val undef_fmt(jj_rt *rt, const char *fmt, ...) {
    char buf[200];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (k < 0) k = 0;
    return jj_undef_hint(fr_jj_strdup(C(rt), buf, FR_MIN((size_t)k, sizeof buf - 1)));
}

void fr_jj_fail_undefined(jj_rt *rt, int line, const jj_val *v) {
    if (v->t == JT_UNDEF && v->u.s.n) fr_jj_fail(C(rt), line, "%.*s", (int)v->u.s.n, v->u.s.p);
    fr_jj_fail(C(rt), line, "use of an undefined value");
}

static void enter(jj_rt *rt, int line) {
    if (++rt->depth > JJ_MAX_DEPTH)
        fr_jj_fail(C(rt), line, "template recursion too deep (more than %d levels)", JJ_MAX_DEPTH);
    fr_jj_charge(C(rt), 1);
}

/* ---- expressions -------------------------------------------------------------------------- */

static jj_val eval(jj_rt *rt, jj_scope *sc, const jj_node *e);
static int exec_body(jj_rt *rt, jj_scope *sc, jj_node *const *kids, size_t n);


static jj_args eval_args(jj_rt *rt, jj_scope *sc, const jj_node *e) {
    jj_args a = {0};
    if (e->nkids) {
        jj_val *pos = fr_jj_alloc(C(rt), e->nkids * sizeof *pos);
        for (size_t i = 0; i < e->nkids; i++) pos[i] = eval(rt, sc, e->kids[i]);
        a.pos = pos;
        a.npos = e->nkids;
    }
    if (e->nkw) {
        jj_val *kwv = fr_jj_alloc(C(rt), e->nkw * sizeof *kwv);
        for (size_t i = 0; i < e->nkw; i++) kwv[i] = eval(rt, sc, e->kwvals[i]);
        a.kwn = e->kwnames;
        a.kwv = kwv;
        a.nkw = e->nkw;
    }
    return a;
}

static jj_val eval_name(jj_rt *rt, jj_scope *sc, const jj_node *e) {
    jj_val *p = scope_find(rt, sc, e->name);
    if (p) return *p;
    jj_val g = fr_jj_global_func(rt, e->name);
    if (g.t != JT_UNDEF) return g;
    return undef_fmt(rt, "'%.*s' is undefined", (int)FR_MIN(e->name.n, 80), e->name.p);
}

static bool compare_op(jj_rt *rt, int line, int op, const jj_val *a, const jj_val *b) {
    switch (op) {
    case JO_EQ: return fr_jj_equal(C(rt), a, b);
    case JO_NE: return !fr_jj_equal(C(rt), a, b);
    case JO_IN: return fr_jj_contains(rt, line, b, a);
    case JO_NOTIN: return !fr_jj_contains(rt, line, b, a);
    default: break;
    }
    int r = fr_jj_compare(C(rt), line, a, b);
    if (r == 2) return false; /* NaN */
    switch (op) {
    case JO_LT: return r < 0;
    case JO_LTEQ: return r <= 0;
    case JO_GT: return r > 0;
    default: return r >= 0;
    }
}

/* a + b + c + ...: the same left-to-right evaluation and additions as pairwise, but a run of
 * plain strings is joined in one buffer instead of copying every intermediate result. */
static jj_val eval_add_chain(jj_rt *rt, jj_scope *sc, const jj_node *e) {
    size_t n = 1;
    for (const jj_node *x = e; x->kind == JN_BINOP && x->op == JO_ADD && !x->fold; x = x->a) n++;
    const jj_node **terms = fr_jj_alloc(C(rt), n * sizeof *terms);
    size_t k = n;
    const jj_node *x = e;
    for (; x->kind == JN_BINOP && x->op == JO_ADD && !x->fold; x = x->a) terms[--k] = x->b;
    terms[0] = x;
    jj_val acc = eval(rt, sc, terms[0]);
    jj_sb run = {0};
    bool joining = false; /* acc's text is in run */
    for (size_t i = 1; i < n; i++) {
        jj_val r = eval(rt, sc, terms[i]);
        fr_jj_charge(C(rt), 1);
        if (acc.t == JT_STR && r.t == JT_STR && !((acc.flags | r.flags) & JF_MARKUP)) {
            if (!joining) {
                fr_jj_sb_put(C(rt), &run, acc.u.s.p, acc.u.s.n);
                joining = true;
            }
            fr_jj_sb_put(C(rt), &run, r.u.s.p, r.u.s.n);
            acc = jj_strv(jj_sb_str(&run));
            continue;
        }
        if (joining) { /* acc stays valid: run is not appended to again */
            joining = false;
            memset(&run, 0, sizeof run);
        }
        acc = fr_jj_arith(rt, e->line, JO_ADD, &acc, &r);
    }
    return acc;
}

static jj_val eval_inner(jj_rt *rt, jj_scope *sc, const jj_node *e) {
    switch (e->kind) {
    case JN_CONST: return e->val;
    case JN_NAME: return eval_name(rt, sc, e);
    case JN_LIST:
    case JN_TUPLE: {
        jj_val v = fr_jj_list_new(C(rt), e->nkids, e->kind == JN_TUPLE);
        for (size_t i = 0; i < e->nkids; i++) v.u.l->v[i] = eval(rt, sc, e->kids[i]);
        return v;
    }
    case JN_DICT: {
        jj_val v = fr_jj_dict_new(C(rt), e->nkids / 2);
        jj_dict *d = v.u.d;
        d->n = 0;
        for (size_t i = 0; i + 1 < e->nkids; i += 2) {
            jj_val k = eval(rt, sc, e->kids[i]);
            jj_val x = eval(rt, sc, e->kids[i + 1]);
            if (k.t == JT_LIST && !(k.flags & JF_TUPLE))
                fr_jj_fail(C(rt), e->line, "unhashable type: 'list'");
            if (k.t == JT_DICT || k.t == JT_NS)
                fr_jj_fail(C(rt), e->line, "unhashable type: '%s'", fr_jj_type_name(&k));
            jj_val *old = fr_jj_dict_get(C(rt), d, &k);
            if (old) {
                *old = x;
                continue;
            }
            d->k[d->n] = k;
            d->v[d->n++] = x;
        }
        return v;
    }
    case JN_GETATTR: {
        jj_val o = eval(rt, sc, e->a);
        return fr_jj_getattr(rt, e->line, &o, e->name);
    }
    case JN_GETITEM: {
        jj_val o = eval(rt, sc, e->a);
        if (e->b->kind == JN_SLICE) {
            const jj_node *s = e->b;
            jj_val a = s->a ? eval(rt, sc, s->a) : jj_none();
            jj_val b = s->b ? eval(rt, sc, s->b) : jj_none();
            jj_val c = s->c ? eval(rt, sc, s->c) : jj_none();
            if (o.t == JT_UNDEF) fr_jj_fail_undefined(rt, e->line, &o);
            return fr_jj_slice(rt, e->line, &o, &a, &b, &c, rt->folding);
        }
        jj_val k = eval(rt, sc, e->b);
        return fr_jj_getitem(rt, e->line, &o, &k);
    }
    case JN_SLICE: fr_jj_fail(C(rt), e->line, "a slice outside of a subscript");
    case JN_CALL: {
        jj_val f = eval(rt, sc, e->a);
        jj_args a = eval_args(rt, sc, e);
        return fr_jj_call_func(rt, e->line, &f, &a);
    }
    case JN_FILTER: {
        jj_val in;
        if (e->a) in = eval(rt, sc, e->a);
        else if (rt->block_in) in = *rt->block_in;
        else in = jj_undef();
        jj_args a = eval_args(rt, sc, e);
        return fr_jj_call_filter(rt, e->line, e->id, e->name, &in, &a);
    }
    case JN_TEST: {
        jj_val in = eval(rt, sc, e->a);
        jj_args a = eval_args(rt, sc, e);
        return jj_bool(fr_jj_call_test(rt, e->line, e->id, e->name, &in, &a));
    }
    case JN_NOT: {
        jj_val v = eval(rt, sc, e->a);
        return jj_bool(!fr_jj_truthy(&v));
    }
    case JN_NEG:
    case JN_POS: {
        jj_val v = eval(rt, sc, e->a);
        if (v.t == JT_UNDEF) fr_jj_fail_undefined(rt, e->line, &v);
        if (v.t == JT_BOOL) v = jj_int(v.u.b);
        if (e->kind == JN_POS && (v.t == JT_INT || v.t == JT_FLOAT)) return v;
        if (v.t == JT_INT) {
            if (v.u.i == INT64_MIN) fr_jj_fail(C(rt), e->line, "integer overflow");
            return jj_int(-v.u.i);
        }
        if (v.t == JT_FLOAT) return jj_float(-v.u.f);
        fr_jj_fail(C(rt), e->line, "bad operand type for unary %c: '%s'",
                   e->kind == JN_NEG ? '-' : '+', fr_jj_type_name(&v));
    }
    case JN_AND: {
        jj_val l = eval(rt, sc, e->a);
        if (!fr_jj_truthy(&l)) return l;
        return eval(rt, sc, e->b);
    }
    case JN_OR: {
        jj_val l = eval(rt, sc, e->a);
        if (fr_jj_truthy(&l)) return l;
        return eval(rt, sc, e->b);
    }
    case JN_BINOP: {
        if (e->op == JO_ADD && e->a->kind == JN_BINOP && e->a->op == JO_ADD)
            return eval_add_chain(rt, sc, e);
        jj_val l = eval(rt, sc, e->a);
        jj_val r = eval(rt, sc, e->b);
        return fr_jj_arith(rt, e->line, e->op, &l, &r);
    }
    case JN_CONCAT: {
        jj_sb b = {0};
        for (size_t i = 0; i < e->nkids; i++) {
            jj_val v = eval(rt, sc, e->kids[i]);
            fr_jj_to_str(C(rt), &b, &v);
        }
        return jj_strv(jj_sb_str(&b));
    }
    case JN_COMPARE: {
        jj_val l = eval(rt, sc, e->a);
        for (size_t i = 0; i < e->nkids; i++) {
            jj_val r = eval(rt, sc, e->kids[i]);
            if (!compare_op(rt, e->line, e->ops[i], &l, &r)) return jj_bool(false);
            l = r;
        }
        return jj_bool(true);
    }
    case JN_CONDEX: {
        jj_val t = eval(rt, sc, e->a);
        if (fr_jj_truthy(&t)) return eval(rt, sc, e->b);
        if (e->c) return eval(rt, sc, e->c);
        return undef_fmt(rt,
                         "the inline if-expression on line %d evaluated to false and no else "
                         "section was defined",
                         e->line);
    }
    case JN_NSREF: fr_jj_fail(C(rt), e->line, "a namespace reference outside of an assignment");
    default: fr_jj_fail(C(rt), e->line, "statement used as an expression");
    }
}

/* Python values jinja2's compiler keeps as folded constants (compiler.has_safe_repr). */
static bool safe_repr(const jj_val *v, int depth) {
    if (depth > JJ_MAX_VALUE_DEPTH) return false;
    switch (v->t) {
    case JT_NONE: case JT_BOOL: case JT_INT: case JT_FLOAT: case JT_STR: return true;
    case JT_LIST:
        if (v->flags & JF_RANGE) return false;
        for (size_t i = 0; i < v->u.l->n; i++)
            if (!safe_repr(&v->u.l->v[i], depth + 1)) return false;
        return true;
    case JT_DICT:
        for (size_t i = 0; i < v->u.d->n; i++)
            if (!safe_repr(&v->u.d->k[i], depth + 1) || !safe_repr(&v->u.d->v[i], depth + 1))
                return false;
        return true;
    default: return false;
    }
}

/* Evaluate e as jinja2's optimizer would at compile time. Any failure there, including
 * reaching a part that is not constant, is jinja2's `Impossible`: false is returned and the
 * caller evaluates at run time instead. Folding has no side effects (calls, names and
 * statements are never constant), so abandoning it midway is safe. */
static bool try_fold(jj_rt *rt, jj_scope *sc, const jj_node *e, jj_val *out) {
    jmp_buf jb;
    jmp_buf *saved = rt->core.jb;
    int depth = rt->depth;
    fr_err msg = {0}, *saved_err = rt->core.err;
    rt->core.jb = &jb;
    rt->core.err = &msg; /* a failed fold is not an error */
    rt->folding = true;
    if (setjmp(jb)) {
        rt->core.jb = saved;
        rt->core.err = saved_err;
        rt->folding = false;
        rt->depth = depth;
        return false;
    }
    *out = eval_inner(rt, sc, e);
    rt->core.jb = saved;
    rt->core.err = saved_err;
    rt->folding = false;
    return true;
}

static jj_val eval(jj_rt *rt, jj_scope *sc, const jj_node *e) {
    enter(rt, e->line);
    jj_val v;
    if (rt->folding && e->kind != JN_CONST && !(e->info & JJ_FOLDABLE)) {
        fr_jj_fail_msg(C(rt), "not a constant"); /* ends the fold attempt */
    } else if (e->fold && !rt->folding) {
        /* a constant subexpression jinja2 evaluates at compile time (see fold_walk): its value
         * is kept when it is a plain value, or printed when it is a whole {{ }} expression */
        if (!try_fold(rt, sc, e, &v) || (e->fold == 1 && !safe_repr(&v, 0)))
            v = eval_inner(rt, sc, e);
    } else {
        v = eval_inner(rt, sc, e);
    }
    rt->depth--;
    return v;
}

/* ---- statements --------------------------------------------------------------------------- */

static void ns_set(jj_rt *rt, jj_ns *ns, jj_str name, jj_val v) {
    fr_jj_charge(C(rt), ns->n / 4);
    for (size_t i = 0; i < ns->n; i++)
        if (jj_str_eq(ns->k[i], name)) {
            ns->v[i] = v;
            return;
        }
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 8;
        ns->k = fr_jj_grow(C(rt), ns->k, ns->cap * sizeof *ns->k, cap * sizeof *ns->k);
        ns->v = fr_jj_grow(C(rt), ns->v, ns->cap * sizeof *ns->v, cap * sizeof *ns->v);
        ns->cap = cap;
    }
    ns->k[ns->n] = name;
    ns->v[ns->n++] = v;
}

static void assign(jj_rt *rt, jj_scope *sc, const jj_node *t, const jj_val *v) {
    switch (t->kind) {
    case JN_NAME: scope_set(rt, sc, t->name, *v); return;
    case JN_NSREF: {
        jj_val *ns = scope_find(rt, sc, t->name);
        if (!ns || ns->t != JT_NS)
            fr_jj_fail(C(rt), t->line, "cannot assign attribute on non-namespace object");
        ns_set(rt, ns->u.ns, t->name2, *v);
        return;
    }
    case JN_TUPLE: {
        if (v->t == JT_UNDEF) fr_jj_fail_undefined(rt, t->line, v);
        jj_list items = fr_jj_iterate(rt, t->line, v);
        if (items.n != t->nkids)
            fr_jj_fail(C(rt), t->line, "%s values to unpack (expected %zu, got %zu)",
                       items.n > t->nkids ? "too many" : "not enough", t->nkids, items.n);
        for (size_t i = 0; i < t->nkids; i++) assign(rt, sc, t->kids[i], &items.v[i]);
        return;
    }
    default: fr_jj_fail(C(rt), t->line, "invalid assignment target");
    }
}

/* Run body with output captured into a string. */
static int capture(jj_rt *rt, jj_scope *sc, const jj_node *s, jj_str *out) {
    jj_sb buf = {0};
    buf.limit = JJ_MAX_STRING;
    jj_sb *saved = rt->out;
    rt->out = &buf;
    jj_scope inner = {0};
    inner.parent = sc;
    int st = exec_body(rt, &inner, s->kids, s->nkids);
    rt->out = saved;
    *out = jj_sb_str(&buf);
    return st;
}

static jj_val apply_block_filter(jj_rt *rt, jj_scope *sc, const jj_node *chain, jj_val in) {
    const jj_val *saved = rt->block_in;
    rt->block_in = &in;
    jj_val v = eval(rt, sc, chain);
    rt->block_in = saved;
    return v;
}

void fr_jj_loop_fill(jj_rt *rt, jj_loop *lp, size_t want) {
    while (!lp->done && lp->npass < want) {
        if (lp->pos >= lp->nraw || !lp->scope) {
            lp->done = true;
            break;
        }
        if (++rt->iters > JJ_MAX_ITERS)
            fr_jj_fail(C(rt), lp->test->line, "too many loop iterations (more than %d)",
                       JJ_MAX_ITERS);
        const jj_val *item = &lp->raw[lp->pos++];
        lp->scope->n = 0;
        assign(rt, lp->scope, lp->target, item);
        jj_val t = eval(rt, lp->scope, lp->test);
        if (!fr_jj_truthy(&t)) continue;
        if (lp->npass == lp->cap) {
            size_t cap = lp->cap ? lp->cap * 2 : 16;
            lp->pass =
                fr_jj_grow(C(rt), lp->pass, lp->cap * sizeof *lp->pass, cap * sizeof *lp->pass);
            lp->cap = cap;
        }
        lp->pass[lp->npass++] = *item;
    }
}

static int exec_for(jj_rt *rt, jj_scope *sc, const jj_node *s) {
    jj_val it = eval(rt, sc, s->b);
    jj_list items = fr_jj_iterate(rt, s->line, &it);
    jj_loop *lp = fr_jj_alloc(C(rt), sizeof *lp);
    lp->raw = items.v;
    lp->nraw = items.n;
    if (s->c) {
        lp->test = s->c;
        lp->target = s->a;
        lp->scope = fr_jj_scope_new(rt);
        lp->scope->parent = sc;
    } else {
        lp->pass = (jj_val *)items.v;
        lp->npass = lp->cap = items.n;
        lp->pos = items.n;
        lp->done = true;
    }
    jj_val loopv = {0};
    loopv.t = JT_LOOP;
    loopv.u.loop = lp;
    static const char loop_name[] = "loop";
    jj_str lname = {loop_name, 4};
    jj_scope body = {0};
    body.parent = sc;
    /* jinja2 runs the else block unless some iteration reached the end of the body: an
     * iteration left by break or continue does not count */
    bool completed = false;
    for (size_t i = 0;; i++) {
        fr_jj_loop_fill(rt, lp, i + 1);
        if (i >= lp->npass) break;
        if (!s->c && ++rt->iters > JJ_MAX_ITERS)
            fr_jj_fail(C(rt), s->line, "too many loop iterations (more than %d)", JJ_MAX_ITERS);
        body.n = 0; /* a fresh scope per iteration (storage reused) */
        lp->i = i;
        scope_set(rt, &body, lname, loopv);
        assign(rt, &body, s->a, &lp->pass[i]);
        int st = exec_body(rt, &body, s->kids, s->nkids);
        if (st == ST_OK) completed = true;
        if (st == ST_BREAK) break;
    }
    lp->done = true; /* the loop object may outlive the loop (in a namespace): test no more */
    lp->scope = NULL;
    if (completed || !s->nkids2) return ST_OK;
    jj_scope inner = {0};
    inner.parent = sc;
    return exec_body(rt, &inner, s->kids2, s->nkids2);
}

static int exec(jj_rt *rt, jj_scope *sc, const jj_node *s);

static int exec_inner(jj_rt *rt, jj_scope *sc, const jj_node *s) {
    switch (s->kind) {
    case JS_OUTPUT:
        for (size_t i = 0; i < s->nkids; i++) {
            const jj_node *k = s->kids[i];
            if (k->kind == JN_CONST && k->val.t == JT_STR) {
                fr_jj_sb_put(C(rt), rt->out, k->val.u.s.p, k->val.u.s.n);
                continue;
            }
            jj_val v = eval(rt, sc, k);
            fr_jj_to_str(C(rt), rt->out, &v);
        }
        return ST_OK;
    case JS_IF:
        for (;;) {
            jj_val t = eval(rt, sc, s->a);
            if (fr_jj_truthy(&t)) return exec_body(rt, sc, s->kids, s->nkids);
            if (s->nkids2 == 1 && s->kids2[0]->kind == JS_IF) {
                s = s->kids2[0]; /* elif: iterate rather than recurse */
                fr_jj_charge(C(rt), 1);
                continue;
            }
            return exec_body(rt, sc, s->kids2, s->nkids2);
        }
    case JS_FOR: return exec_for(rt, sc, s);
    case JS_SET: {
        jj_val v = eval(rt, sc, s->b);
        assign(rt, sc, s->a, &v);
        return ST_OK;
    }
    case JS_SETBLOCK: {
        jj_str text;
        int st = capture(rt, sc, s, &text);
        if (st != ST_OK) return st;
        jj_val v = jj_strv(text);
        if (s->c) v = apply_block_filter(rt, sc, s->c, v);
        assign(rt, sc, s->a, &v);
        return ST_OK;
    }
    case JS_FILTER: {
        jj_str text;
        int st = capture(rt, sc, s, &text);
        if (st != ST_OK) return st;
        jj_val v = apply_block_filter(rt, sc, s->c, jj_strv(text));
        fr_jj_to_str(C(rt), rt->out, &v);
        return ST_OK;
    }
    case JS_MACRO: {
        jj_func *fn = fr_jj_alloc(C(rt), sizeof *fn);
        fn->kind = JFN_MACRO;
        fn->name = s->name;
        fn->macro = s;
        jj_val v = {0};
        v.t = JT_FUNC;
        v.u.fn = fn;
        scope_set(rt, sc, s->name, v);
        return ST_OK;
    }
    case JS_WITH: {
        jj_scope inner = {0};
        inner.parent = sc;
        jj_val *vals = s->nkids3 ? fr_jj_alloc(C(rt), s->nkids3 * sizeof *vals) : NULL;
        for (size_t i = 0; i < s->nkids3; i++) vals[i] = eval(rt, sc, s->kids4[i]);
        for (size_t i = 0; i < s->nkids3; i++) assign(rt, &inner, s->kids3[i], &vals[i]);
        return exec_body(rt, &inner, s->kids, s->nkids);
    }
    case JS_BLOCK: {
        jj_scope inner = {0};
        inner.parent = sc;
        return exec_body(rt, &inner, s->kids, s->nkids);
    }
    case JS_BREAK: return ST_BREAK;
    case JS_CONTINUE: return ST_CONTINUE;
    default: {
        /* an expression statement cannot occur; evaluate for safety */
        jj_val v = eval(rt, sc, s);
        (void)v;
        return ST_OK;
    }
    }
}

static int exec(jj_rt *rt, jj_scope *sc, const jj_node *s) {
    enter(rt, s->line);
    int st = exec_inner(rt, sc, s);
    rt->depth--;
    return st;
}

static int exec_body(jj_rt *rt, jj_scope *sc, jj_node *const *kids, size_t n) {
    for (size_t i = 0; i < n; i++) {
        int st = exec(rt, sc, kids[i]);
        if (st != ST_OK) return st;
    }
    return ST_OK;
}

/* ---- macros and entry --------------------------------------------------------------------- */

jj_val fr_jj_call_macro(jj_rt *rt, int line, const jj_func *fn, const jj_args *a) {
    const jj_node *m = fn->macro;
    int nm = (int)FR_MIN(m->name.n, 60);
    if (rt->calls >= JJ_MAX_CALLS)
        fr_jj_fail(C(rt), line, "macro calls nested too deeply (more than %d)", JJ_MAX_CALLS);
    size_t np = m->nkids3;
    if (a->npos > np)
        fr_jj_fail(C(rt), line, "macro '%.*s' takes not more than %zu argument(s)", nm, m->name.p,
                   np);
    jj_scope sc = {0};
    sc.parent = rt->globals;
    bool *given = fr_jj_alloc(C(rt), np + 1);
    for (size_t i = 0; i < a->npos; i++) {
        scope_set(rt, &sc, m->kids3[i]->name, a->pos[i]);
        given[i] = true;
    }
    for (size_t k = 0; k < a->nkw; k++) {
        size_t i = 0;
        while (i < np && !jj_str_eq(m->kids3[i]->name, a->kwn[k])) i++;
        if (i == np)
            fr_jj_fail(C(rt), line, "macro '%.*s' takes no keyword argument '%.*s'", nm, m->name.p,
                       (int)FR_MIN(a->kwn[k].n, 60), a->kwn[k].p);
        if (given[i])
            fr_jj_fail(C(rt), line, "macro '%.*s' got multiple values for argument '%.*s'", nm,
                       m->name.p, (int)FR_MIN(a->kwn[k].n, 60), a->kwn[k].p);
        scope_set(rt, &sc, m->kids3[i]->name, a->kwv[k]);
        given[i] = true;
    }
    rt->calls++;
    for (size_t i = 0; i < np; i++) {
        if (given[i]) continue;
        jj_val v;
        if (i < m->nkids4 && m->kids4[i]) v = eval(rt, &sc, m->kids4[i]);
        else
            v = undef_fmt(rt, "parameter '%.*s' was not provided",
                          (int)FR_MIN(m->kids3[i]->name.n, 60), m->kids3[i]->name.p);
        scope_set(rt, &sc, m->kids3[i]->name, v);
    }
    jj_sb buf = {0};
    buf.limit = JJ_MAX_STRING;
    jj_sb *saved = rt->out;
    rt->out = &buf;
    exec_body(rt, &sc, m->kids, m->nkids);
    rt->out = saved;
    rt->calls--;
    return jj_strv(jj_sb_str(&buf));
}

jj_scope *fr_jj_scope_new(jj_rt *rt) { return fr_jj_alloc(C(rt), sizeof(jj_scope)); }
void fr_jj_scope_define(jj_rt *rt, jj_scope *s, const char *name, jj_val v) {
    scope_set(rt, s, jj_s(name), v);
}

void fr_jj_render(jj_rt *rt, const jj_node *root, jj_sb *out) {
    out->limit = JJ_MAX_OUTPUT;
    out->heap = true;
    rt->out = out;
    exec_body(rt, rt->globals, root->kids, root->nkids);
}
