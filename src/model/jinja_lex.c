/* jinja_lex.c — the template lexer: source text to tokens, with Jinja2's whitespace control
 * under the environment transformers renders chat templates with (trim_blocks=True,
 * lstrip_blocks=True, keep_trailing_newline=False).
 *
 * Design: a direct transcription of jinja2/lexer.py's state machine (root / block / variable /
 * comment / raw states) without regular expressions:
 *   - newlines (\r\n, \r, \n) are normalised to \n and one trailing newline is dropped;
 *   - a tag opener may carry '-' (strip all whitespace before it) or '+' (no lstrip);
 *   - lstrip_blocks: spaces/tabs (any Unicode whitespace but newlines) between the start of a
 *     line and a block or comment tag are removed, never before a {{ variable }};
 *   - trim_blocks: one newline right after %} or #} is removed; '-%}' '-}}' '-#}' remove all
 *     whitespace after the tag and '+%}' keeps it;
 *   - inside tags the end delimiter is only recognised while brackets are balanced, so
 *     {{ {'a': 1}}} works as in Jinja2;
 *   - string literals are decoded as Python's unicode-escape codec does after jinja2's
 *     backslashreplace (\n, \t, \xNN, \uNNNN, \UNNNNNNNN, octal; unknown escapes stay verbatim).
 */
#include "model/jinja_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

typedef struct lexer {
    jj_core *c;       /* errors and memory */
    const char *s;    /* normalised source */
    size_t n;         /* its length */
    size_t pos;       /* current offset */
    int line;         /* line of pos */
    size_t line_pos;  /* offset up to which newlines were counted into line */
    jj_tok *toks;     /* output */
    size_t ntoks, cap;
    char bal[JJ_MAX_NEST]; /* expected closing brackets inside a tag */
    int nbal;
} lexer;

static int line_at(lexer *L, size_t pos) {
    for (; L->line_pos < pos; L->line_pos++)
        if (L->s[L->line_pos] == '\n') L->line++;
    return L->line;
}

static jj_tok *push(lexer *L, jj_tok_kind kind, size_t at) {
    if (L->ntoks == L->cap) {
        size_t cap = L->cap ? L->cap * 2 : 256;
        L->toks = fr_jj_grow(L->c, L->toks, L->cap * sizeof(jj_tok), cap * sizeof(jj_tok));
        L->cap = cap;
    }
    jj_tok *t = &L->toks[L->ntoks++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    t->line = line_at(L, at);
    return t;
}

/* Length of the whitespace run (Python \s) at p. */
static size_t ws_len(const lexer *L, size_t p) {
    size_t q = p;
    while (q < L->n) {
        unsigned char ch = (unsigned char)L->s[q];
        if (ch < 0x80) {
            if (!fr_jj_py_isspace(ch)) break;
            q++;
            continue;
        }
        size_t r = q;
        uint32_t cp = fr_jj_utf8_next(L->s, L->n, &r);
        if (!fr_jj_py_isspace(cp)) break;
        q = r;
    }
    return q - p;
}

/* End of text [a, b) with trailing whitespace removed (str.rstrip()). */
static size_t rstrip_end(const lexer *L, size_t a, size_t b) {
    size_t end = a, i = a;
    while (i < b) {
        uint32_t cp = fr_jj_utf8_next(L->s, b, &i);
        if (!fr_jj_py_isspace(cp)) end = i;
    }
    return end;
}

static bool at(const lexer *L, size_t p, const char *lit) {
    size_t k = strlen(lit);
    return p <= L->n && L->n - p >= k && memcmp(L->s + p, lit, k) == 0;
}

/* Emit text [a, b) before a tag whose sign is `sign`; `lstrip` says whether lstrip_blocks applies
 * to that tag (block, comment and raw tags, not variables). */
static void emit_text(lexer *L, size_t a, size_t b, char sign, bool lstrip, bool line_starting) {
    if (sign == '-') {
        b = rstrip_end(L, a, b);
    } else if (sign != '+' && lstrip) {
        size_t l = b;
        while (l > a && L->s[l - 1] != '\n') l--;
        if (l > a || line_starting) {
            /* strip when [l, b) is non-empty whitespace */
            if (l < b && ws_len(L, l) == b - l) b = l;
        }
    }
    if (b > a) {
        jj_tok *t = push(L, TK_DATA, a);
        t->s.p = L->s + a;
        t->s.n = b - a;
    }
}

static bool isdig(char ch) { return ch >= '0' && ch <= '9'; }

/* Length of a non-ASCII identifier character at p (0 if none): letters may start a name;
 * letters, digits, marks and connector punctuation may continue it (str.isidentifier()). */
static size_t ident_char(const lexer *L, size_t p, bool start) {
    if ((unsigned char)L->s[p] < 0x80) return 0;
    size_t q = p;
    uint32_t cp = fr_jj_utf8_next(L->s, L->n, &q);
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL:
        return q - p;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
        return start ? 0 : q - p;
    default: return 0;
    }
}
static bool isalpha_(char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
}
static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* (\d+_)*\d+ at p: end offset, or 0 when there is no digit. */
static size_t digits_us(const lexer *L, size_t p) {
    if (p >= L->n || !isdig(L->s[p])) return 0;
    while (p < L->n && isdig(L->s[p])) p++;
    while (p + 1 < L->n && L->s[p] == '_' && isdig(L->s[p + 1])) {
        p++;
        while (p < L->n && isdig(L->s[p])) p++;
    }
    return p;
}

/* The exponent part e[+-]?digits at p: end offset or 0. */
static size_t exponent(const lexer *L, size_t p) {
    if (p >= L->n || (L->s[p] != 'e' && L->s[p] != 'E')) return 0;
    p++;
    if (p < L->n && (L->s[p] == '+' || L->s[p] == '-')) p++;
    return digits_us(L, p);
}

/* A float literal at p: end offset or 0. */
static size_t float_end(const lexer *L, size_t p) {
    if (p > 0 && L->s[p - 1] == '.') return 0;
    size_t a = digits_us(L, p);
    if (!a) return 0;
    if (a < L->n && L->s[a] == '.') {
        size_t b = digits_us(L, a + 1);
        if (b) {
            size_t e = exponent(L, b);
            return e ? e : b;
        }
    }
    return exponent(L, a);
}

/* An integer literal at p: end offset or 0; value in *v (fails when it does not fit). */
static size_t int_end(lexer *L, size_t p, int64_t *v) {
    const char *s = L->s;
    size_t n = L->n, q = p;
    int base = 10;
    if (q + 1 < n && s[q] == '0' && s[q + 1] && strchr("bBoOxX", s[q + 1])) {
        char k = (char)(s[q + 1] | 0x20);
        base = k == 'b' ? 2 : k == 'o' ? 8 : 16;
        size_t r = q + 2, ndig = 0;
        for (;;) {
            size_t t = r;
            if (t < n && s[t] == '_') t++;
            int d = t < n ? hexval(s[t]) : -1;
            if (d < 0 || d >= base) break;
            r = t + 1;
            ndig++;
        }
        if (ndig) q = r;
        else base = 10; /* just "0" */
    }
    if (base == 10) {
        if (q >= n || !isdig(s[q])) return 0;
        if (s[q] == '0') {
            q++;
            for (;;) {
                size_t t = q;
                if (t < n && s[t] == '_') t++;
                if (t < n && s[t] == '0') q = t + 1;
                else break;
            }
        } else {
            q++;
            for (;;) {
                size_t t = q;
                if (t < n && s[t] == '_') t++;
                if (t < n && isdig(s[t])) q = t + 1;
                else break;
            }
        }
    }
    uint64_t acc = 0;
    size_t i = p + (base != 10 ? 2 : 0);
    for (; i < q; i++) {
        if (s[i] == '_') continue;
        uint64_t d = (uint64_t)hexval(s[i]);
        if (acc > (UINT64_MAX - d) / (uint64_t)base ||
            acc * (uint64_t)base + d > (uint64_t)INT64_MAX)
            fr_jj_fail_unsup(L->c, line_at(L, p), "integer literal too large");
        acc = acc * (uint64_t)base + d;
    }
    *v = (int64_t)acc;
    return q;
}

/* Decode the body of a string literal [a, b) as Python's unicode-escape codec would after
 * jinja2's encode("ascii", "backslashreplace"). */
static jj_str decode_string(lexer *L, size_t a, size_t b) {
    jj_core *c = L->c;
    const char *s = L->s;
    if (!memchr(s + a, '\\', b - a)) {
        jj_str r = {s + a, b - a};
        return r;
    }
    jj_sb out = {0};
    int line = line_at(L, a);
    size_t i = a;
    while (i < b) {
        if (s[i] != '\\') {
            size_t j = i + 1;
            while (j < b && s[j] != '\\') j++;
            fr_jj_sb_put(c, &out, s + i, j - i);
            i = j;
            continue;
        }
        i++;
        if (i >= b) fr_jj_fail_syntax(c, line, "\\ at end of string");
        char e = s[i];
        uint32_t cp = 0;
        int need = 0;
        switch (e) {
        case '\n': i++; continue;
        case '\\':
        case '\'':
        case '"':
            fr_jj_sb_putc(c, &out, e);
            i++;
            continue;
        case 'a':
            fr_jj_sb_putc(c, &out, '\a');
            i++;
            continue;
        case 'b':
            fr_jj_sb_putc(c, &out, '\b');
            i++;
            continue;
        case 'f':
            fr_jj_sb_putc(c, &out, '\f');
            i++;
            continue;
        case 'n':
            fr_jj_sb_putc(c, &out, '\n');
            i++;
            continue;
        case 'r':
            fr_jj_sb_putc(c, &out, '\r');
            i++;
            continue;
        case 't':
            fr_jj_sb_putc(c, &out, '\t');
            i++;
            continue;
        case 'v':
            fr_jj_sb_putc(c, &out, '\v');
            i++;
            continue;
        case 'x': need = 2; break;
        case 'u': need = 4; break;
        case 'U': need = 8; break;
        case 'N': fr_jj_fail_unsup(c, line, "\\N{...} escape in a string literal");
        default: break;
        }
        if (e >= '0' && e <= '7') {
            int k = 0;
            while (k < 3 && i < b && s[i] >= '0' && s[i] <= '7')
                cp = cp * 8 + (uint32_t)(s[i++] - '0'), k++;
            fr_jj_sb_putcp(c, &out, cp);
            continue;
        }
        if (need) {
            i++;
            for (int k = 0; k < need; k++, i++) {
                int d = i < b ? hexval(s[i]) : -1;
                if (d < 0)
                    fr_jj_fail_syntax(c, line, "truncated \\%c escape in a string literal", e);
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10FFFF)
                fr_jj_fail_syntax(c, line, "illegal Unicode character in a string literal");
            if (cp >= 0xD800 && cp <= 0xDFFF)
                fr_jj_fail_unsup(c, line, "surrogate escape in a string literal");
            fr_jj_sb_putcp(c, &out, cp);
            continue;
        }
        if ((unsigned char)e >= 0x80) {
            /* backslash before a non-ASCII character: the codec sees "\\" followed by the
             * character's own escape text, so a backslash and that text (minus its backslash)
             * come out */
            size_t j = i;
            uint32_t ch = fr_jj_utf8_next(s, b, &j);
            char tmp[16];
            if (ch >= 0xDC80 && ch <= 0xDCFF) {
                fr_jj_sb_putc(c, &out, '\\');
                fr_jj_sb_put(c, &out, s + i, j - i);
            } else {
                if (ch <= 0xff)
                    snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)ch);
                else if (ch <= 0xffff) snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)ch);
                else snprintf(tmp, sizeof tmp, "\\U%08x", (unsigned)ch);
                fr_jj_sb_puts(c, &out, tmp);
            }
            i = j;
            continue;
        }
        /* unknown escape: kept verbatim */
        fr_jj_sb_putc(c, &out, '\\');
        fr_jj_sb_putc(c, &out, e);
        i++;
    }
    return jj_sb_str(&out);
}

static const struct {
    const char *s;
    jj_op op;
} OPS[] = {
    {"//", JO_FLOORDIV}, {"**", JO_POW}, {"==", JO_EQ}, {"!=", JO_NE}, {">=", JO_GTEQ},
    {"<=", JO_LTEQ}, {"+", JO_ADD}, {"-", JO_SUB}, {"/", JO_DIV}, {"*", JO_MUL},
    {"%", JO_MOD}, {"~", JO_TILDE}, {"[", JO_LBRACKET}, {"]", JO_RBRACKET}, {"(", JO_LPAREN},
    {")", JO_RPAREN}, {"{", JO_LBRACE}, {"}", JO_RBRACE}, {">", JO_GT}, {"<", JO_LT},
    {"=", JO_ASSIGN}, {".", JO_DOT}, {":", JO_COLON}, {"|", JO_PIPE}, {",", JO_COMMA},
    {";", JO_SEMICOLON},
};

/* Tokens inside {% %} (block) or {{ }} (!block) up to the end delimiter. Returns whether the
 * last match ended with a newline (for lstrip_blocks). */
static bool lex_tag(lexer *L, bool block) {
    jj_core *c = L->c;
    const char *s = L->s;
    L->nbal = 0;
    for (;;) {
        size_t p = L->pos;
        if (p >= L->n) return false; /* the parser reports the unexpected end */
        if (L->nbal == 0) {
            size_t end = 0;
            if (block) {
                if (at(L, p, "+%}")) end = p + 3;
                else if (at(L, p, "-%}")) end = p + 3 + ws_len(L, p + 3);
                else if (at(L, p, "%}")) end = p + 2 + (at(L, p + 2, "\n") ? 1 : 0);
            } else {
                if (at(L, p, "-}}")) end = p + 3 + ws_len(L, p + 3);
                else if (at(L, p, "}}")) end = p + 2;
            }
            if (end) {
                push(L, block ? TK_BLOCK_END : TK_VAR_END, p);
                L->pos = end;
                return s[end - 1] == '\n';
            }
        }
        size_t w = ws_len(L, p);
        if (w) {
            L->pos = p + w;
            continue;
        }
        size_t e = float_end(L, p);
        if (e) {
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < e && k + 1 < sizeof buf; i++)
                if (s[i] != '_') buf[k++] = s[i];
            buf[k] = 0;
            jj_tok *t = push(L, TK_FLOAT, p);
            t->f = strtod(buf, NULL);
            L->pos = e;
            continue;
        }
        int64_t iv;
        e = int_end(L, p, &iv);
        if (e) {
            jj_tok *t = push(L, TK_INT, p);
            t->i = iv;
            L->pos = e;
            continue;
        }
        size_t k0 = isalpha_(s[p]) ? 1 : ident_char(L, p, true);
        if (k0) {
            e = p + k0;
            for (;;) {
                size_t k = 0;
                if (e < L->n && (isalpha_(s[e]) || isdig(s[e]))) k = 1;
                else if (e < L->n) k = ident_char(L, e, false);
                if (!k) break;
                e += k;
            }
            jj_tok *t = push(L, TK_NAME, p);
            t->s.p = s + p;
            t->s.n = e - p;
            L->pos = e;
            continue;
        }
        if (s[p] == '\'' || s[p] == '"') {
            char q = s[p];
            size_t i = p + 1;
            while (i < L->n && s[i] != q) i += s[i] == '\\' ? 2 : 1;
            if (i >= L->n) fr_jj_fail_syntax(c, line_at(L, p), "unterminated string literal");
            jj_str v = decode_string(L, p + 1, i);
            jj_tok *t = push(L, TK_STRING, p);
            t->s = v;
            L->pos = i + 1;
            continue;
        }
        size_t k = 0;
        for (; k < FR_ARRAY_LEN(OPS); k++)
            if (at(L, p, OPS[k].s)) break;
        if (k == FR_ARRAY_LEN(OPS)) {
            unsigned char ch = (unsigned char)s[p];
            if (ch >= 0x20 && ch < 0x7f)
                fr_jj_fail_syntax(c, line_at(L, p), "unexpected character '%c'", ch);
            fr_jj_fail_syntax(c, line_at(L, p), "unexpected character (byte 0x%02x)", ch);
        }
        jj_op op = OPS[k].op;
        if (op == JO_LBRACE || op == JO_LPAREN || op == JO_LBRACKET) {
            if (L->nbal == JJ_MAX_NEST)
                fr_jj_fail_syntax(c, line_at(L, p), "brackets nested too deeply");
            L->bal[L->nbal++] = op == JO_LBRACE ? '}' : op == JO_LPAREN ? ')' : ']';
        } else if (op == JO_RBRACE || op == JO_RPAREN || op == JO_RBRACKET) {
            char ch = s[p];
            if (!L->nbal) fr_jj_fail_syntax(c, line_at(L, p), "unexpected '%c'", ch);
            char want = L->bal[--L->nbal];
            if (want != ch)
                fr_jj_fail_syntax(c, line_at(L, p), "unexpected '%c', expected '%c'", ch, want);
        }
        jj_tok *t = push(L, TK_OP, p);
        t->op = (uint8_t)op;
        L->pos = p + strlen(OPS[k].s);
    }
}

size_t fr_jj_lex(jj_core *c, const char *src, size_t n, jj_tok **out) {
    lexer L;
    memset(&L, 0, sizeof L);
    L.c = c;
    L.line = 1;
    /* normalise newlines; drop one trailing newline (keep_trailing_newline=False) */
    char *s = fr_jj_alloc(c, n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (src[i] == '\r') {
            s[m++] = '\n';
            if (i + 1 < n && src[i + 1] == '\n') i++;
        } else {
            s[m++] = src[i];
        }
    }
    if (m && s[m - 1] == '\n') m--;
    L.s = s;
    L.n = m;

    bool line_starting = true;
    while (L.pos < L.n) {
        size_t i = L.pos;
        while (i + 1 < L.n &&
               !(s[i] == '{' && (s[i + 1] == '%' || s[i + 1] == '{' || s[i + 1] == '#')))
            i++;
        if (i + 1 >= L.n) {
            emit_text(&L, L.pos, L.n, 0, false, line_starting);
            L.pos = L.n;
            break;
        }
        char kind = s[i + 1];
        size_t j = i + 2;
        char sign = 0;
        if (j < L.n && (s[j] == '-' || s[j] == '+')) sign = s[j++];

        /* {% raw %} ... {% endraw %} */
        if (kind == '%') {
            size_t t = j + ws_len(&L, j), raw_end = 0;
            if (at(&L, t, "raw")) {
                t += 3;
                t += ws_len(&L, t);
                if (at(&L, t, "-%}")) raw_end = t + 3 + ws_len(&L, t + 3);
                else if (at(&L, t, "%}")) raw_end = t + 2;
            }
            if (raw_end) {
                emit_text(&L, L.pos, i, sign, true, line_starting);
                bool ls = s[raw_end - 1] == '\n';
                size_t p = raw_end, body_end = 0, end = 0;
                char sign2 = 0;
                for (; p + 1 < L.n; p++) {
                    if (s[p] != '{' || s[p + 1] != '%') continue;
                    size_t q = p + 2;
                    char sg = 0;
                    if (q < L.n && (s[q] == '-' || s[q] == '+')) sg = s[q++];
                    q += ws_len(&L, q);
                    if (!at(&L, q, "endraw")) continue;
                    q += 6;
                    q += ws_len(&L, q);
                    if (at(&L, q, "+%}")) end = q + 3;
                    else if (at(&L, q, "-%}")) end = q + 3 + ws_len(&L, q + 3);
                    else if (at(&L, q, "%}")) end = q + 2 + (at(&L, q + 2, "\n") ? 1 : 0);
                    else continue;
                    body_end = p;
                    sign2 = sg;
                    break;
                }
                if (!end) fr_jj_fail_syntax(c, line_at(&L, i), "missing end of raw directive");
                emit_text(&L, raw_end, body_end, sign2, true, ls);
                L.pos = end;
                line_starting = s[end - 1] == '\n';
                continue;
            }
        }

        emit_text(&L, L.pos, i, sign, kind != '{', line_starting);
        if (kind == '#') {
            size_t p = j, end = 0;
            for (; p < L.n; p++) {
                if (at(&L, p, "+#}")) end = p + 3;
                else if (at(&L, p, "-#}")) end = p + 3 + ws_len(&L, p + 3);
                else if (at(&L, p, "#}")) end = p + 2 + (at(&L, p + 2, "\n") ? 1 : 0);
                if (end) break;
            }
            if (!end) fr_jj_fail_syntax(c, line_at(&L, i), "missing end of comment tag");
            L.pos = end;
            line_starting = s[end - 1] == '\n';
            continue;
        }
        push(&L, kind == '%' ? TK_BLOCK_BEGIN : TK_VAR_BEGIN, i);
        L.pos = j;
        line_starting = lex_tag(&L, kind == '%');
    }
    push(&L, TK_EOF, L.n);
    *out = L.toks;
    return L.ntoks;
}
