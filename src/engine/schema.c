/* schema.c — JSON Schema (the subset of grammar.h) compiled to the node table of
 * grammar_impl.h.
 *
 * One recursive walk over the cJSON schema: each schema object becomes one node (a CHOICE for
 * anyOf, enum, a type list and booleans). Every keyword is checked against the supported list
 * first, so an unsupported one is refused by name before anything is built; every count (depth,
 * nodes, enum values, literal bytes, min/max values) is bounded before use. "Any JSON value" is
 * one shared, self-referencing CHOICE (the stack depth limit bounds its nesting at match time).
 * A schema that no value can satisfy (an empty enum, minLength > maxLength, a required property
 * that is not declared) is refused as a bad request: the matcher relies on every prefix having a
 * completion.
 */
#include "engine/grammar_impl.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MINSIZE_CAP (1 << 24)   /* minsize saturates here (big minItems x big items) */
#define MAX_COUNT 1000000       /* minItems / maxItems / minLength / maxLength */
#define MAX_ANYOF 64            /* branches of one anyOf / type list */

typedef struct cctx {
    fr_grammar *g;
    fr_err *err;
    char path[160];  /* where in the schema, for messages ("properties.a.items") */
    int any;         /* node of "any JSON value", -1 until needed */
    bool failed;
} cctx;

static void *grow(void *p, int *cap, int need, size_t elem) {
    if (need <= *cap) return p;
    int nc = *cap ? *cap * 2 : 16;
    while (nc < need) nc *= 2;
    *cap = nc;
    return fr_xrealloc(p, (size_t)nc * elem);
}

static int fail(cctx *c, fr_err_code code, const char *fmt, const char *what) {
    if (!c->failed) {
        char m[200];
        snprintf(m, sizeof m, fmt, what);
        fr_err_setc(c->err, code, "%s (at %s)", m, c->path[0] ? c->path : "the schema root");
        /* names come from the schema: one printable ASCII line (a cut name stays valid text) */
        for (char *p = c->err ? c->err->msg : NULL; p && *p; p++)
            if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f) *p = '?';
    }
    c->failed = true;
    return -1;
}

static int new_node(cctx *c, uint8_t kind, int a, int b, int item) {
    fr_grammar *g = c->g;
    if (g->n_nodes >= FR_GRAMMAR_MAX_NODES)
        return fail(c, FR_ERR_TOO_LARGE, "the schema needs more than %s grammar nodes", "4096");
    g->nodes = grow(g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(gnode));
    g->nodes[g->n_nodes] = (gnode){.kind = kind, .a = a, .b = b, .item = item};
    return g->n_nodes++;
}

static int sat_add(int a, int b) { return a + b > MINSIZE_CAP ? MINSIZE_CAP : a + b; }

static int lit_node(cctx *c, const char *s, size_t n) {
    fr_grammar *g = c->g;
    if (n == 0 || (size_t)g->n_bytes + n > FR_GRAMMAR_MAX_BYTES)
        return fail(c, FR_ERR_TOO_LARGE, "the schema's literals exceed %s bytes", "65536");
    g->bytes = grow(g->bytes, &g->cap_bytes, g->n_bytes + (int)n, 1);
    memcpy(g->bytes + g->n_bytes, s, n);
    int id = new_node(c, GK_LIT, g->n_bytes, (int)n, -1);
    g->n_bytes += (int)n;
    if (id >= 0) g->nodes[id].minsize = (int)n;
    return id;
}

/* a JSON value as a literal (const, enum), printed compactly */
static int value_lit(cctx *c, const cJSON *v) {
    char *s = cJSON_PrintUnformatted(v);
    if (!s) return fail(c, FR_ERR_INTERNAL, "%s", "out of memory printing a schema value");
    int id = lit_node(c, s, strlen(s));
    free(s);
    return id;
}

static int choice_node(cctx *c, const int *alts, int n) {
    fr_grammar *g = c->g;
    if (n == 1) return alts[0];
    int first = g->n_kids;
    g->kids = grow(g->kids, &g->cap_kids, g->n_kids + n, sizeof(int32_t));
    int ms = MINSIZE_CAP;
    for (int i = 0; i < n; i++) {
        g->kids[g->n_kids++] = alts[i];
        ms = FR_MIN(ms, g->nodes[alts[i]].minsize);
    }
    int id = new_node(c, GK_CHOICE, first, n, -1);
    if (id >= 0) g->nodes[id].minsize = ms;
    return id;
}

/* the shared "any JSON value" node: {obj, arr, str, num, true, false, null} */
static int any_node(cctx *c) {
    if (c->any >= 0) return c->any;
    fr_grammar *g = c->g;
    int ch = new_node(c, GK_CHOICE, 0, 0, -1);
    if (ch < 0) return -1;
    c->any = ch;
    int alts[7] = {new_node(c, GK_OBJ, 0, 0, ch), new_node(c, GK_ARR, 0, -1, ch),
                   new_node(c, GK_STR, 0, -1, -1), new_node(c, GK_NUM, 0, 0, -1),
                   lit_node(c, "true", 4), lit_node(c, "false", 5), lit_node(c, "null", 4)};
    for (int i = 0; i < 7; i++)
        if (alts[i] < 0) return -1;
    g->nodes[alts[0]].minsize = g->nodes[alts[1]].minsize = g->nodes[alts[2]].minsize = 2;
    g->nodes[alts[3]].minsize = 1;
    int first = g->n_kids;
    g->kids = grow(g->kids, &g->cap_kids, g->n_kids + 7, sizeof(int32_t));
    for (int i = 0; i < 7; i++) g->kids[g->n_kids++] = alts[i];
    g->nodes[ch].a = first;
    g->nodes[ch].b = 7;
    g->nodes[ch].minsize = 1;
    return ch;
}

static int compile(cctx *c, const cJSON *s, int depth);

/* path helpers: append ".name" for the walk, restore after */
static size_t path_push(cctx *c, const char *a, const char *b) {
    size_t n = strlen(c->path);
    snprintf(c->path + n, sizeof c->path - n, "%s%s%.40s", n ? "." : "", a, b ? b : "");
    return n;
}
static void path_pop(cctx *c, size_t n) { c->path[n] = 0; }

static const char *const KNOWN[] = {
    "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems",
    "minLength", "maxLength", "enum", "const", "anyOf", "title", "description", "default",
    "examples", "$schema", "$id", "$comment"};

static int check_keywords(cctx *c, const cJSON *s) {
    const cJSON *k;
    cJSON_ArrayForEach(k, s) {
        bool ok = false;
        for (size_t i = 0; i < FR_ARRAY_LEN(KNOWN) && !ok; i++) ok = !strcmp(k->string, KNOWN[i]);
        if (!ok) {
            char name[64];
            snprintf(name, sizeof name, "%.60s", k->string);
            return fail(c, FR_ERR_UNSUPPORTED, "JSON Schema keyword \"%s\" is not supported", name);
        }
    }
    return 0;
}

/* an integer keyword in 0..MAX_COUNT, or dflt when absent; -2 on error */
static int count_kw(cctx *c, const cJSON *s, const char *kw, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, kw);
    if (!v) return dflt;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= MAX_COUNT) ||
        v->valuedouble != (double)(long long)v->valuedouble) {
        fail(c, FR_ERR_BAD_REQUEST, "\"%s\" must be an integer in 0..1000000", kw);
        return -2;
    }
    return (int)v->valuedouble;
}

static int compile_string(cctx *c, const cJSON *s) {
    int mn = count_kw(c, s, "minLength", 0), mx = count_kw(c, s, "maxLength", -1);
    if (mn == -2 || mx == -2) return -1;
    if (mx >= 0 && mn > mx) return fail(c, FR_ERR_BAD_REQUEST, "%s exceeds maxLength", "minLength");
    int id = new_node(c, GK_STR, mn, mx, -1);
    if (id >= 0) c->g->nodes[id].minsize = sat_add(2, mn);
    return id;
}

static int compile_array(cctx *c, const cJSON *s, int depth) {
    int mn = count_kw(c, s, "minItems", 0), mx = count_kw(c, s, "maxItems", -1);
    if (mn == -2 || mx == -2) return -1;
    if (mx >= 0 && mn > mx) return fail(c, FR_ERR_BAD_REQUEST, "%s exceeds maxItems", "minItems");
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (it && cJSON_IsArray(it))
        return fail(c, FR_ERR_UNSUPPORTED, "%s (the array form) is not supported", "\"items\"");
    size_t at = path_push(c, "items", NULL);
    int item = it ? compile(c, it, depth + 1) : any_node(c);
    path_pop(c, at);
    if (item < 0) return -1;
    int id = new_node(c, GK_ARR, mn, mx, item);
    if (id < 0) return -1;
    int ms = c->g->nodes[item].minsize;
    long long m = mn == 0 ? 2 : 2 + (long long)mn * ms + (mn - 1);
    c->g->nodes[id].minsize = m > MINSIZE_CAP ? MINSIZE_CAP : (int)m;
    return id;
}

static bool is_required(const cJSON *req, const char *name) {
    const cJSON *r;
    cJSON_ArrayForEach(r, req) if (cJSON_IsString(r) && !strcmp(r->valuestring, name)) return true;
    return false;
}

/* required must be an array of distinct declared property names */
static int check_required(cctx *c, const cJSON *req, const cJSON *props) {
    if (!req) return 0;
    if (!cJSON_IsArray(req)) return fail(c, FR_ERR_BAD_REQUEST, "%s must be an array", "\"required\"");
    const cJSON *r;
    cJSON_ArrayForEach(r, req) {
        if (!cJSON_IsString(r))
            return fail(c, FR_ERR_BAD_REQUEST, "%s must hold strings", "\"required\"");
        if (!props || !cJSON_GetObjectItemCaseSensitive(props, r->valuestring))
            return fail(c, FR_ERR_UNSUPPORTED,
                        "\"required\" names \"%.60s\", which \"properties\" does not declare",
                        r->valuestring);
    }
    return 0;
}

static int add_prop(cctx *c, const cJSON *p, bool required, int depth) {
    cJSON *ks = cJSON_CreateString(p->string);
    int key = ks ? value_lit(c, ks) : -1;
    cJSON_Delete(ks);
    size_t at = path_push(c, "properties.", p->string);
    int v = key < 0 ? -1 : compile(c, p, depth + 1);
    path_pop(c, at);
    if (v < 0) return -1;
    fr_grammar *g = c->g;
    g->props = grow(g->props, &g->cap_props, g->n_props + 1, sizeof(gprop));
    g->props[g->n_props++] = (gprop){.key = key, .value = v, .required = required};
    return 0;
}

static int extra_node(cctx *c, const cJSON *s, bool has_props, int depth) {
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (cJSON_IsFalse(ap)) return -2;
    if (has_props) return -2; /* only the declared properties are generated (docs/SERVING.md) */
    if (!ap || cJSON_IsTrue(ap)) return any_node(c);
    if (!cJSON_IsObject(ap))
        return fail(c, FR_ERR_BAD_REQUEST, "%s must be a boolean or a schema", "\"additionalProperties\"");
    size_t at = path_push(c, "additionalProperties", NULL);
    int v = compile(c, ap, depth + 1);
    path_pop(c, at);
    return v;
}

static int compile_object(cctx *c, const cJSON *s, int depth) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    if (props && !cJSON_IsObject(props))
        return fail(c, FR_ERR_BAD_REQUEST, "%s must be an object", "\"properties\"");
    if (check_required(c, req, props)) return -1;
    /* the props of one object are contiguous: compile values first (they add props of their own)
     * into a local list, then copy */
    int n = props ? cJSON_GetArraySize(props) : 0;
    if (n > FR_GRAMMAR_MAX_NODES) return fail(c, FR_ERR_TOO_LARGE, "%s: too many properties", "object");
    gprop *tmp = n ? fr_xmalloc(sizeof(gprop) * (size_t)n) : NULL;
    int k = 0, nreq = 0, ms = 2;
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        for (const cJSON *q = props->child; q != p; q = q->next)
            if (!strcmp(q->string, p->string)) {
                free(tmp);
                return fail(c, FR_ERR_BAD_REQUEST, "property \"%.60s\" is declared twice", p->string);
            }
        bool rq = req && is_required(req, p->string);
        if (add_prop(c, p, rq, depth)) {
            free(tmp);
            return -1;
        }
        tmp[k++] = c->g->props[--c->g->n_props];
        if (rq) {
            ms = sat_add(ms, (nreq++ ? 1 : 0) + c->g->nodes[tmp[k - 1].key].minsize + 1 +
                                 c->g->nodes[tmp[k - 1].value].minsize);
        }
    }
    int extra = extra_node(c, s, n > 0, depth);
    if (extra == -1) {
        free(tmp);
        return -1;
    }
    fr_grammar *g = c->g;
    int first = g->n_props;
    g->props = grow(g->props, &g->cap_props, g->n_props + k, sizeof(gprop));
    if (k) memcpy(g->props + first, tmp, sizeof(gprop) * (size_t)k);
    g->n_props += k;
    free(tmp);
    int id = new_node(c, GK_OBJ, first, k, extra < 0 ? -1 : extra);
    if (id >= 0) g->nodes[id].minsize = ms;
    return id;
}

static bool type_is(const cJSON *v, const char *t) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer"))
        return cJSON_IsNumber(v) && fabs(v->valuedouble) < 9e15 &&
               v->valuedouble == (double)(long long)v->valuedouble;
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    return !strcmp(t, "null") && cJSON_IsNull(v);
}

static int utf8_chars(const char *p) {
    int n = 0;
    for (; *p; p++) n += ((unsigned char)*p & 0xC0) != 0x80;
    return n;
}

/* Does a const / enum value meet the schema's other keywords? Values are literals, so the
 * sibling keywords filter them: type, minLength/maxLength, minItems/maxItems; properties,
 * required and items beside an object or array value are refused (-1). */
static int value_fits(cctx *c, const cJSON *v, const cJSON *s) {
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(s, "type"), *t;
    if (cJSON_IsString(ty) && !type_is(v, ty->valuestring)) return 0;
    if (cJSON_IsArray(ty)) {
        bool any = false;
        cJSON_ArrayForEach(t, ty) any |= cJSON_IsString(t) && type_is(v, t->valuestring);
        if (!any) return 0;
    }
    static const char *const deep[] = {"properties", "required", "items", "additionalProperties"};
    for (size_t i = 0; i < FR_ARRAY_LEN(deep); i++)
        if ((cJSON_IsObject(v) || cJSON_IsArray(v)) && cJSON_GetObjectItemCaseSensitive(s, deep[i]))
            return fail(c, FR_ERR_UNSUPPORTED, "\"%s\" beside an object or array const/enum value "
                        "is not supported", deep[i]);
    int mn = count_kw(c, s, "minLength", 0), mx = count_kw(c, s, "maxLength", -1);
    int mi = count_kw(c, s, "minItems", 0), xi = count_kw(c, s, "maxItems", -1);
    if (mn == -2 || mx == -2 || mi == -2 || xi == -2) return -1;
    if (cJSON_IsString(v) && (utf8_chars(v->valuestring) < mn ||
                              (mx >= 0 && utf8_chars(v->valuestring) > mx)))
        return 0;
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : 0;
    if (cJSON_IsArray(v) && (n < mi || (xi >= 0 && n > xi))) return 0;
    return 1;
}

/* enum / const (one value, as a one-value list): the values that fit, as literals */
static int compile_values(cctx *c, const cJSON *e, bool single, const cJSON *s) {
    const char *kw = single ? "\"const\"" : "\"enum\"";
    if (!single && !cJSON_IsArray(e)) return fail(c, FR_ERR_BAD_REQUEST, "%s must be an array", kw);
    int n = single ? 1 : cJSON_GetArraySize(e);
    if (n > FR_GRAMMAR_MAX_ENUM)
        return fail(c, FR_ERR_TOO_LARGE, "\"enum\" has more than %s values", "256");
    int alts[FR_GRAMMAR_MAX_ENUM], k = 0;
    const cJSON *v = single ? e : e->child;
    for (int i = 0; i < n; i++, v = single ? NULL : v->next) {
        int fit = value_fits(c, v, s);
        if (fit < 0) return -1;
        if (fit && (alts[k++] = value_lit(c, v)) < 0) return -1;
    }
    if (k == 0) return fail(c, FR_ERR_BAD_REQUEST, "no value of %s meets the schema", kw);
    return choice_node(c, alts, k);
}

static int compile_type(cctx *c, const cJSON *s, const char *t, int depth) {
    if (!strcmp(t, "object")) return compile_object(c, s, depth);
    if (!strcmp(t, "array")) return compile_array(c, s, depth);
    if (!strcmp(t, "string")) return compile_string(c, s);
    if (!strcmp(t, "number") || !strcmp(t, "integer")) {
        int id = new_node(c, GK_NUM, t[1] == 'n', 0, -1);
        if (id >= 0) c->g->nodes[id].minsize = 1;
        return id;
    }
    if (!strcmp(t, "boolean")) {
        int alts[2] = {lit_node(c, "true", 4), lit_node(c, "false", 5)};
        return alts[0] < 0 || alts[1] < 0 ? -1 : choice_node(c, alts, 2);
    }
    if (!strcmp(t, "null")) return lit_node(c, "null", 4);
    return fail(c, FR_ERR_UNSUPPORTED, "type \"%.40s\" is not supported", t);
}

static int compile_types(cctx *c, const cJSON *s, const cJSON *ty, int depth) {
    if (cJSON_IsString(ty)) return compile_type(c, s, ty->valuestring, depth);
    if (!cJSON_IsArray(ty) || cJSON_GetArraySize(ty) == 0 || cJSON_GetArraySize(ty) > 7)
        return fail(c, FR_ERR_BAD_REQUEST, "%s must be a type name or a list of them", "\"type\"");
    int alts[7], k = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, ty) {
        if (!cJSON_IsString(t)) return fail(c, FR_ERR_BAD_REQUEST, "%s must hold strings", "\"type\"");
        if ((alts[k++] = compile_type(c, s, t->valuestring, depth)) < 0) return -1;
    }
    return choice_node(c, alts, k);
}

static int compile_anyof(cctx *c, const cJSON *s, const cJSON *a, int depth) {
    static const char *const alone[] = {"type", "properties", "items", "enum", "const",
                                        "minLength", "maxLength", "minItems", "maxItems",
                                        "required", "additionalProperties"};
    for (size_t i = 0; i < FR_ARRAY_LEN(alone); i++)
        if (cJSON_GetObjectItemCaseSensitive(s, alone[i]))
            return fail(c, FR_ERR_UNSUPPORTED, "\"%s\" beside \"anyOf\" is not supported", alone[i]);
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0;
    if (n < 1) return fail(c, FR_ERR_BAD_REQUEST, "%s must be a non-empty array", "\"anyOf\"");
    if (n > MAX_ANYOF) return fail(c, FR_ERR_TOO_LARGE, "\"anyOf\" has more than %s branches", "64");
    int alts[MAX_ANYOF], k = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, a) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", k);
        size_t at = path_push(c, "anyOf.", idx);
        alts[k] = compile(c, b, depth + 1);
        path_pop(c, at);
        if (alts[k++] < 0) return -1;
    }
    return choice_node(c, alts, k);
}

static int compile(cctx *c, const cJSON *s, int depth) {
    if (c->failed) return -1;
    if (depth > FR_GRAMMAR_MAX_DEPTH)
        return fail(c, FR_ERR_TOO_LARGE, "the schema nests deeper than %s levels", "12");
    if (cJSON_IsTrue(s)) return any_node(c);
    if (!cJSON_IsObject(s))
        return fail(c, FR_ERR_BAD_REQUEST, "%s must be an object (or true)", "a schema");
    if (check_keywords(c, s)) return -1;
    const cJSON *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) return compile_anyof(c, s, v, depth);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "const"))) {
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
        bool in = !e;
        const cJSON *x;
        if (cJSON_IsArray(e)) cJSON_ArrayForEach(x, e) in |= cJSON_Compare(x, v, true);
        if (!in) return fail(c, FR_ERR_BAD_REQUEST, "%s is not among the enum values", "\"const\"");
        return compile_values(c, v, true, s);
    }
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "enum"))) return compile_values(c, v, false, s);
    if ((v = cJSON_GetObjectItemCaseSensitive(s, "type"))) return compile_types(c, s, v, depth);
    if (cJSON_GetObjectItemCaseSensitive(s, "properties")) return compile_object(c, s, depth);
    if (cJSON_GetObjectItemCaseSensitive(s, "items")) return compile_array(c, s, depth);
    return any_node(c);
}

void fr_grammar_free(fr_grammar *g) {
    if (!g) return;
    free(g->nodes);
    free(g->props);
    free(g->kids);
    free(g->bytes);
    free(g);
}

/* node 0: SEQ [prefix?, value, suffix?], filled in at the end */
fr_grammar *fr_grammar_from_schema(const cJSON *schema, const char *prefix, const char *suffix,
                                   fr_err *err) {
    fr_grammar *g = fr_xcalloc(1, sizeof *g);
    cctx c = {.g = g, .err = err, .any = -1};
    new_node(&c, GK_SEQ, 0, 0, -1);
    g->any_str = new_node(&c, GK_STR, 0, -1, -1);
    g->nodes[g->any_str].minsize = 2;
    int parts[3], n = 0;
    if (prefix && *prefix) parts[n++] = lit_node(&c, prefix, strlen(prefix));
    if (schema) {
        parts[n++] = compile(&c, schema, 0);
    } else { /* json_object: any object */
        int any = any_node(&c);
        parts[n++] = any < 0 ? -1 : g->kids[g->nodes[any].a];
    }
    if (suffix && *suffix) parts[n++] = lit_node(&c, suffix, strlen(suffix));
    for (int i = 0; i < n; i++)
        if (parts[i] < 0) c.failed = true;
    if (c.failed) {
        fr_grammar_free(g);
        return NULL;
    }
    g->kids = grow(g->kids, &g->cap_kids, g->n_kids + n, sizeof(int32_t));
    g->nodes[0].a = g->n_kids;
    g->nodes[0].b = n;
    int ms = 0;
    for (int i = 0; i < n; i++) {
        g->kids[g->n_kids++] = parts[i];
        ms = sat_add(ms, g->nodes[parts[i]].minsize);
    }
    g->nodes[0].minsize = ms;
    return g;
}

fr_grammar *fr_grammar_from_text(const char *json, size_t len, fr_err *err) {
    cJSON *s = cJSON_ParseWithLength(json, len);
    if (!s) {
        fr_err_setc(err, FR_ERR_BAD_REQUEST, "the schema is not valid JSON");
        return NULL;
    }
    fr_grammar *g = fr_grammar_from_schema(s, NULL, NULL, err);
    cJSON_Delete(s);
    return g;
}
