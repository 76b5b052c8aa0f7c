/* grammar.c — the matcher of grammar.h: a set of pushdown stacks over the node table of
 * grammar_impl.h, fed one byte at a time.
 *
 * Feeding a byte to a stack looks at its top frame: the frame consumes the byte (perhaps pushing
 * a child frame for a value), dies, or, when it is complete and the byte is not its own (a
 * number followed by ','), pops and hands the byte to its parent. A frame whose last byte closes
 * it ('"', '}', ']', a literal's end) pops at once and tells its parent (child_done). Pushing a
 * CHOICE forks the stack, one copy per alternative; an object key forks over the properties it
 * may start. Results are deduplicated; beyond FR_GRAMMAR_MAX_STACKS extra forks are dropped
 * (each kept stack is a valid, completable path, so what comes out stays valid).
 *
 * need(): the bytes of the shortest completion, frame by frame from the top (each frame's rest
 * once its child is done), from the nodes' minsize.
 */
#include "engine/grammar_impl.h"

#include <string.h>

/* phases */
enum { S_OPEN, S_BODY, S_ESC, S_U1, S_U2, S_U3, S_U4, S_UTF };
enum { N_START, N_MINUS, N_ZERO, N_INT, N_DOT, N_FRAC, N_E, N_ESIGN, N_EXP };
enum { O_OPEN, O_FIRST, O_KEYSP, O_KEY, O_INKEY, O_COLON, O_VALSP, O_VAL, O_INVAL, O_AFTER };
enum { A_OPEN, A_FIRST, A_IN, A_AFTER, A_SP, A_VAL };

#define NUM_DIGITS 16
#define EXP_DIGITS 2

static const gnode *node(const fr_grammar *g, int id) { return &g->nodes[id]; }

void fr_gstack_copy(fr_gstack *dst, const fr_gstack *src) {
    dst->len = src->len;
    memcpy(dst->f, src->f, sizeof(fr_gframe) * (size_t)src->len);
}

static bool stack_eq(const fr_gstack *a, const fr_gstack *b) {
    return a->len == b->len && !memcmp(a->f, b->f, sizeof(fr_gframe) * (size_t)a->len);
}

static void emit(fr_gstate *out, const fr_gstack *s) {
    for (int i = 0; i < out->n; i++)
        if (stack_eq(&out->s[i], s)) return;
    if (out->n < FR_GRAMMAR_MAX_STACKS) fr_gstack_copy(&out->s[out->n++], s);
}

static fr_gframe *top(fr_gstack *s) { return &s->f[s->len - 1]; }

/* the parent learns that its child frame matched completely */
static void child_done(const fr_grammar *g, fr_gstack *s) {
    if (s->len == 0) return;
    fr_gframe *f = top(s);
    if (f->node == GN_BASE) return;
    switch (node(g, f->node)->kind) {
    case GK_OBJ:
        if (f->ph == O_INKEY) f->ph = O_COLON;
        else if (f->ph == O_INVAL) f->ph = O_AFTER;
        break;
    case GK_ARR:
        if (f->ph == A_IN) {
            f->n++;
            f->ph = A_AFTER;
        }
        break;
    default:
        break;
    }
}

static void pop_done(const fr_grammar *g, fr_gstack *s) {
    s->len--;
    child_done(g, s);
}

static bool frame_push(fr_gstack *s, int32_t nd, int ph) {
    if (s->len >= FR_GRAMMAR_MAX_FRAMES) return false;
    s->f[s->len++] = (fr_gframe){.node = nd, .ph = (int16_t)ph};
    return true;
}

static void feed_stack(const fr_grammar *g, fr_gstack *s, uint8_t c, fr_gstate *out);

/* Push value node nd onto s and feed it c: CHOICE forks. */
static void push_value(const fr_grammar *g, fr_gstack *s, int32_t nd, uint8_t c, fr_gstate *out) {
    const gnode *n = node(g, nd);
    if (n->kind == GK_CHOICE) {
        fr_gstack cp;
        for (int k = 0; k < n->b; k++) {
            fr_gstack_copy(&cp, s);
            push_value(g, &cp, g->kids[n->a + k], c, out);
        }
        return;
    }
    if (!frame_push(s, nd, 0)) return;
    feed_stack(g, s, c, out);
}

/* --- per kind: return 1 consumed (s valid), 0 dead, 2 popped lazily (re-feed c), 3 handled */

static int feed_lit(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c) {
    const gnode *n = node(g, f->node);
    if (g->bytes[n->a + f->n] != c) return 0;
    if (++f->n == n->b) pop_done(g, s);
    return 1;
}

static bool is_hex(uint8_t c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* a raw byte >= 0x80 starting a character: its continuation count and first-byte range code */
static int utf8_lead(uint8_t c, int *range) {
    *range = 0;
    if (c >= 0xC2 && c <= 0xDF) return 1;
    if (c == 0xE0) *range = 1;
    else if (c == 0xED) *range = 2;
    if (c >= 0xE0 && c <= 0xEF) return 2;
    if (c == 0xF0) *range = 3;
    else if (c == 0xF4) *range = 4;
    if (c >= 0xF0 && c <= 0xF4) return 3;
    return 0;
}

static bool utf8_cont_ok(uint8_t c, int range) {
    static const uint8_t lo[5] = {0x80, 0xA0, 0x80, 0x90, 0x80}, hi[5] = {0xBF, 0xBF, 0x9F, 0xBF, 0x8F};
    return c >= lo[range] && c <= hi[range];
}

static int str_body(const fr_grammar *g, fr_gstack *s, fr_gframe *f, const gnode *n, uint8_t c) {
    bool room = n->b < 0 || f->n < n->b;
    if (c == '"') {
        if (f->n < n->a) return 0;
        pop_done(g, s);
        return 1;
    }
    if (c < 0x20 || !room) return 0;
    if (c >= 0x80) {
        int range, k = utf8_lead(c, &range);
        if (!k) return 0;
        f->ph = S_UTF;
        f->aux = (int16_t)(k | range << 2);
    } else if (c == '\\') {
        f->ph = S_ESC;
    }
    f->n++;
    return 1;
}

static int feed_str(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c) {
    const gnode *n = node(g, f->node);
    switch (f->ph) {
    case S_OPEN:
        if (c != '"') return 0;
        f->ph = S_BODY;
        return 1;
    case S_BODY:
        return str_body(g, s, f, n, c);
    case S_ESC:
        if (c == 'u') f->ph = S_U1;
        else if (c && strchr("\"\\/bfnrt", c)) f->ph = S_BODY;
        else return 0;
        return 1;
    case S_U1: /* aux bit 0: a surrogate may follow (D800..DFFF, refused); bit 1: zeros so far
                  (\u0000 is refused: C consumers cut the string there) */
        if (!is_hex(c)) return 0;
        f->aux = (int16_t)((c == 'd' || c == 'D') | (c == '0') << 1);
        f->ph = S_U2;
        return 1;
    case S_U2:
        if (!is_hex(c) || ((f->aux & 1) && !(c >= '0' && c <= '7'))) return 0;
        f->aux = (int16_t)((f->aux & 2) && c == '0' ? 2 : 0);
        f->ph = S_U3;
        return 1;
    case S_U3:
    case S_U4:
        if (!is_hex(c) || (f->ph == S_U4 && (f->aux & 2) && c == '0')) return 0;
        f->aux = (int16_t)((f->aux & 2) && c == '0' ? 2 : 0);
        f->ph = f->ph == S_U3 ? S_U4 : S_BODY;
        return 1;
    default: { /* S_UTF */
        int k = f->aux & 3, range = f->aux >> 2;
        if (!utf8_cont_ok(c, range)) return 0;
        if (--k == 0) f->ph = S_BODY;
        f->aux = (int16_t)k; /* later continuation bytes: plain range */
        return 1;
    }
    }
}

static bool num_complete(int ph) { return ph == N_ZERO || ph == N_INT || ph == N_FRAC || ph == N_EXP; }

static int feed_num(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c) {
    bool integer = node(g, f->node)->a, digit = c >= '0' && c <= '9';
    int ph = f->ph;
    if (ph == N_START && c == '-') f->ph = N_MINUS;
    else if ((ph == N_START || ph == N_MINUS) && digit) {
        f->ph = c == '0' ? N_ZERO : N_INT;
        f->n = 1;
    } else if (ph == N_INT && digit && f->n < NUM_DIGITS) f->n++;
    else if ((ph == N_ZERO || ph == N_INT) && c == '.' && !integer) f->ph = N_DOT;
    else if ((ph == N_DOT && digit) || (ph == N_FRAC && digit && f->n < NUM_DIGITS)) {
        f->n = ph == N_DOT ? 1 : f->n + 1;
        f->ph = N_FRAC;
    } else if ((ph == N_ZERO || ph == N_INT || ph == N_FRAC) && (c == 'e' || c == 'E') && !integer)
        f->ph = N_E;
    else if (ph == N_E && (c == '+' || c == '-')) f->ph = N_ESIGN;
    else if ((ph == N_E || ph == N_ESIGN) && digit) {
        f->ph = N_EXP;
        f->n = 1;
    } else if (ph == N_EXP && digit && f->n < EXP_DIGITS) f->n++;
    else if (num_complete(ph)) {
        pop_done(g, s);
        return 2;
    } else return 0;
    return 1;
}

/* is there a required property at index >= i */
static bool req_left(const fr_grammar *g, const gnode *n, int i) {
    for (int j = i; j < n->b; j++)
        if (g->props[n->a + j].required) return true;
    return false;
}

/* '"' at a key position: one fork per property that may come next, and extra keys */
static void obj_key(const fr_grammar *g, fr_gstack *s, const gnode *n, fr_gstate *out) {
    fr_gframe f0 = *top(s);
    fr_gstack cp;
    for (int j = f0.i; j < n->b; j++) {
        const gprop *p = &g->props[n->a + j];
        fr_gstack_copy(&cp, s);
        fr_gframe *f = top(&cp);
        f->i = j + 1;
        f->n = p->value;
        f->ph = O_INKEY;
        if (frame_push(&cp, p->key, 0)) {
            top(&cp)->n = 1; /* the '"' just read */
            emit(out, &cp);
        }
        if (p->required) return;
    }
    if (n->item < 0) return;
    fr_gstack_copy(&cp, s);
    fr_gframe *f = top(&cp);
    f->i = n->b;
    f->n = n->item;
    f->ph = O_INKEY;
    if (frame_push(&cp, g->any_str, S_BODY)) emit(out, &cp);
}

static bool obj_more(const fr_grammar *g, const gnode *n, int i) { return i < n->b || n->item >= 0; }

static int feed_obj(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c, fr_gstate *out) {
    const gnode *n = node(g, f->node);
    switch (f->ph) {
    case O_OPEN:
        if (c != '{') return 0;
        f->ph = O_FIRST;
        return 1;
    case O_FIRST:
    case O_KEYSP:
    case O_KEY:
        if (c == ' ' && f->ph == O_KEYSP) f->ph = O_KEY;
        else if (c == '}' && f->ph == O_FIRST && !req_left(g, n, f->i)) pop_done(g, s);
        else if (c == '"') {
            obj_key(g, s, n, out);
            return 3;
        } else return 0;
        return 1;
    case O_COLON:
        if (c != ':') return 0;
        f->ph = O_VALSP;
        return 1;
    case O_VALSP:
    case O_VAL:
        if (c == ' ' && f->ph == O_VALSP) {
            f->ph = O_VAL;
            return 1;
        }
        f->ph = O_INVAL;
        push_value(g, s, f->n, c, out);
        return 3;
    case O_AFTER:
        if (c == ',' && obj_more(g, n, f->i)) f->ph = O_KEYSP;
        else if (c == '}' && !req_left(g, n, f->i)) pop_done(g, s);
        else return 0;
        return 1;
    default:
        return 0; /* a child is on top */
    }
}

static int feed_arr(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c, fr_gstate *out) {
    const gnode *n = node(g, f->node);
    switch (f->ph) {
    case A_OPEN:
        if (c != '[') return 0;
        f->ph = A_FIRST;
        return 1;
    case A_AFTER:
        if (c == ',' && (n->b < 0 || f->n < n->b)) f->ph = A_SP;
        else if (c == ']' && f->n >= n->a) pop_done(g, s);
        else return 0;
        return 1;
    case A_FIRST:
    case A_SP:
    case A_VAL:
        if (f->ph == A_FIRST && c == ']') {
            if (n->a > 0) return 0;
            pop_done(g, s);
            return 1;
        }
        if (f->ph == A_SP && c == ' ') {
            f->ph = A_VAL;
            return 1;
        }
        if (f->ph == A_FIRST && n->b == 0) return 0;
        f->ph = A_IN;
        push_value(g, s, n->item, c, out);
        return 3;
    default:
        return 0;
    }
}

static int feed_seq(const fr_grammar *g, fr_gstack *s, fr_gframe *f, uint8_t c, fr_gstate *out) {
    const gnode *n = node(g, f->node);
    if (f->i >= n->b) {
        s->len--; /* complete: the byte is the parent's */
        child_done(g, s);
        return 2;
    }
    int32_t kid = g->kids[n->a + f->i++];
    push_value(g, s, kid, c, out);
    return 3;
}

/* Feed c to stack s (modified in place); the surviving stacks go to out. */
static void feed_stack(const fr_grammar *g, fr_gstack *s, uint8_t c, fr_gstate *out) {
    for (;;) {
        if (s->len == 0) return; /* complete: nothing more may follow */
        fr_gframe *f = top(s);
        if (f->node == GN_BASE) {
            out->hit_base = true;
            return;
        }
        int r;
        switch (node(g, f->node)->kind) {
        case GK_LIT: r = feed_lit(g, s, f, c); break;
        case GK_STR: r = feed_str(g, s, f, c); break;
        case GK_NUM: r = feed_num(g, s, f, c); break;
        case GK_OBJ: r = feed_obj(g, s, f, c, out); break;
        case GK_ARR: r = feed_arr(g, s, f, c, out); break;
        case GK_SEQ: r = feed_seq(g, s, f, c, out); break;
        default: r = 0; break;
        }
        if (r == 2) continue;
        if (r == 1) emit(out, s);
        return;
    }
}

void fr_gstate_init(const fr_grammar *g, fr_gstate *st) {
    (void)g;
    st->n = 1;
    st->hit_base = false;
    st->s[0].len = 1;
    st->s[0].f[0] = (fr_gframe){.node = 0};
}

int fr_gstate_feed(const fr_grammar *g, const fr_gstate *in, uint8_t c, fr_gstate *out) {
    out->n = 0;
    out->hit_base = false;
    fr_gstack tmp;
    for (int i = 0; i < in->n; i++) {
        fr_gstack_copy(&tmp, &in->s[i]);
        feed_stack(g, &tmp, c, out);
    }
    return out->n;
}

static void gstate_copy(fr_gstate *dst, const fr_gstate *src) {
    dst->n = src->n;
    dst->hit_base = src->hit_base;
    for (int i = 0; i < src->n; i++) fr_gstack_copy(&dst->s[i], &src->s[i]);
}

bool fr_gstate_feed_bytes(const fr_grammar *g, fr_gstate *st, const char *s, size_t n,
                          fr_gstate tmp[2]) {
    const fr_gstate *cur = st;
    for (size_t i = 0; i < n; i++) {
        fr_gstate *dst = &tmp[i & 1];
        if (!fr_gstate_feed(g, cur, (uint8_t)s[i], dst)) return false;
        cur = dst;
    }
    if (cur != st) gstate_copy(st, cur);
    return true;
}

/* may the stack end here: complete lazily-ending frames popped away */
static bool stack_can_finish(const fr_grammar *g, const fr_gstack *s) {
    for (int k = s->len - 1; k >= 0; k--) {
        const fr_gframe *f = &s->f[k];
        if (f->node == GN_BASE) return false;
        const gnode *n = node(g, f->node);
        if (n->kind == GK_NUM && num_complete(f->ph)) continue;
        if (n->kind == GK_SEQ && f->i >= n->b) continue;
        return false;
    }
    return true;
}

bool fr_gstate_can_finish(const fr_grammar *g, const fr_gstate *st) {
    for (int i = 0; i < st->n; i++)
        if (stack_can_finish(g, &st->s[i])) return true;
    return false;
}

bool fr_gstate_terminal(const fr_grammar *g, const fr_gstate *st) {
    for (int i = 0; i < st->n; i++) {
        const fr_gstack *s = &st->s[i];
        if (s->len == 0) continue;
        if (s->len == 1 && s->f[0].node == 0 && node(g, 0)->kind == GK_SEQ &&
            s->f[0].i >= node(g, 0)->b)
            continue;
        return false;
    }
    return st->n > 0;
}

/* --- need(): shortest completion --- */

static int prop_cost(const fr_grammar *g, const gprop *p) {
    return node(g, p->key)->minsize + 1 + node(g, p->value)->minsize;
}

/* the rest of an object after property index i is decided: ", key: value" per required one, '}' */
static int obj_tail(const fr_grammar *g, const gnode *n, int i) {
    int t = 1;
    for (int j = i; j < n->b; j++)
        if (g->props[n->a + j].required) t += 1 + prop_cost(g, &g->props[n->a + j]);
    return t;
}

/* at a key position (after '{' or ','): the cheapest next property and what follows it */
static int obj_next_key(const fr_grammar *g, const gnode *n, int i) {
    int best = -1;
    for (int j = i; j < n->b; j++) {
        const gprop *p = &g->props[n->a + j];
        int c = prop_cost(g, p) + obj_tail(g, n, j + 1);
        if (best < 0 || c < best) best = c;
        if (p->required) return best;
    }
    if (n->item >= 0) {
        int c = 2 + 1 + node(g, n->item)->minsize + obj_tail(g, n, n->b);
        if (best < 0 || c < best) best = c;
    }
    return best < 0 ? 1 : best;
}

static int obj_need(const fr_grammar *g, const gnode *n, const fr_gframe *f) {
    switch (f->ph) {
    case O_OPEN: return n->minsize;
    case O_FIRST: return req_left(g, n, f->i) ? obj_next_key(g, n, f->i) : 1;
    case O_KEYSP:
    case O_KEY: return obj_next_key(g, n, f->i);
    case O_INKEY:
    case O_COLON: return 1 + node(g, f->n)->minsize + obj_tail(g, n, f->i);
    case O_VALSP:
    case O_VAL: return node(g, f->n)->minsize + obj_tail(g, n, f->i);
    default: return obj_tail(g, n, f->i);
    }
}

static int arr_need(const fr_grammar *g, const gnode *n, const fr_gframe *f) {
    int ms = node(g, n->item)->minsize, k;
    switch (f->ph) {
    case A_OPEN: return n->minsize;
    case A_FIRST: return n->a == 0 ? 1 : n->a * ms + (n->a - 1) + 1;
    case A_IN:
        k = FR_MAX(0, n->a - (f->n + 1));
        return k * (ms + 1) + 1;
    case A_AFTER:
        k = FR_MAX(0, n->a - f->n);
        return k * (ms + 1) + 1;
    default:
        k = FR_MAX(1, n->a - f->n);
        return ms + (k - 1) * (ms + 1) + 1;
    }
}

static int str_need(const gnode *n, const fr_gframe *f) {
    int chars = FR_MAX(0, n->a - f->n);
    switch (f->ph) {
    case S_OPEN: return n->minsize;
    case S_BODY: return chars + 1;
    case S_ESC: return 1 + chars + 1;
    case S_U1: return 4 + chars + 1;
    case S_U2: return 3 + chars + 1;
    case S_U3: return 2 + chars + 1;
    case S_U4: return 1 + chars + 1;
    default: return (f->aux & 3) + chars + 1;
    }
}

static int num_need(const fr_gframe *f) { return num_complete(f->ph) ? 0 : 1; }

static int frame_need(const fr_grammar *g, const fr_gframe *f) {
    if (f->node == GN_BASE) return 0;
    const gnode *n = node(g, f->node);
    switch (n->kind) {
    case GK_LIT: return n->b - f->n;
    case GK_STR: return str_need(n, f);
    case GK_NUM: return num_need(f);
    case GK_OBJ: return obj_need(g, n, f);
    case GK_ARR: return arr_need(g, n, f);
    case GK_SEQ: {
        int t = 0;
        for (int k = f->i; k < n->b; k++) t += node(g, g->kids[n->a + k])->minsize;
        return t;
    }
    default: return n->minsize;
    }
}

int fr_gstate_need(const fr_grammar *g, const fr_gstate *st) {
    int best = -1;
    for (int i = 0; i < st->n; i++) {
        int t = 0;
        for (int k = 0; k < st->s[i].len; k++) t += frame_need(g, &st->s[i].f[k]);
        if (best < 0 || t < best) best = t;
    }
    return best < 0 ? 1 << 30 : best;
}

void fr_gstate_from_frame(const fr_grammar *g, const fr_gframe *f, fr_gstate *st) {
    (void)g;
    st->n = 1;
    st->hit_base = false;
    st->s[0].len = 2;
    st->s[0].f[0] = (fr_gframe){.node = GN_BASE};
    st->s[0].f[1] = *f;
}

fr_gframe fr_gframe_key(const fr_grammar *g, const fr_gframe *f, int max_chars) {
    fr_gframe k = *f;
    const gnode *n = node(g, f->node);
    if (n->kind == GK_STR && f->n >= n->a) /* past minLength: only the room left matters, up to
                                              the longest token */
        k.n = -1 - (n->b < 0 ? max_chars : FR_MIN(n->b - f->n, max_chars));
    else if (n->kind == GK_ARR && n->b < 0)
        k.n = FR_MIN(f->n, n->a);
    return k;
}

bool fr_gframe_string_body(const fr_grammar *g, const fr_gframe *f, int *n, int *min, int *max) {
    if (f->node < 0) return false;
    const gnode *nd = node(g, f->node);
    if (nd->kind != GK_STR || f->ph != S_BODY) return false;
    *n = f->n;
    *min = nd->a;
    *max = nd->b;
    return true;
}

void fr_gstate_pop_top(const fr_grammar *g, const fr_gstack *s, fr_gstate *out) {
    out->n = 1;
    out->hit_base = false;
    fr_gstack_copy(&out->s[0], s);
    if (out->s[0].len > 0) pop_done(g, &out->s[0]);
}

int fr_grammar_n_nodes(const fr_grammar *g) { return g->n_nodes; }

static void put32(uint8_t *o, size_t *k, int32_t x) {
    memcpy(o + *k, &x, 4);
    *k += 4;
}

uint8_t *fr_grammar_fingerprint(const fr_grammar *g, size_t *len) {
    size_t cap = 16 + (size_t)g->n_nodes * 20 + (size_t)g->n_props * 12 + (size_t)g->n_kids * 4 +
                 (size_t)g->n_bytes;
    uint8_t *o = fr_xmalloc(cap);
    size_t k = 0;
    put32(o, &k, g->n_nodes);
    put32(o, &k, g->n_props);
    put32(o, &k, g->n_kids);
    put32(o, &k, g->any_str);
    for (int i = 0; i < g->n_nodes; i++) { /* field by field: no padding bytes */
        const gnode *n = &g->nodes[i];
        put32(o, &k, n->kind);
        put32(o, &k, n->a);
        put32(o, &k, n->b);
        put32(o, &k, n->item);
        put32(o, &k, n->minsize);
    }
    for (int i = 0; i < g->n_props; i++) {
        put32(o, &k, g->props[i].key);
        put32(o, &k, g->props[i].value);
        put32(o, &k, g->props[i].required);
    }
    for (int i = 0; i < g->n_kids; i++) put32(o, &k, g->kids[i]);
    if (g->n_bytes) memcpy(o + k, g->bytes, (size_t)g->n_bytes);
    *len = k + (size_t)g->n_bytes;
    return o;
}
