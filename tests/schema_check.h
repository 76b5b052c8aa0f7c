/* schema_check.h — a small JSON Schema validator for the subset grammar.h supports, written
 * independently of the compiler (tests only): the judge of every constrained output.
 *
 *   cJSON *v = cJSON_Parse(text);  bool ok = sc_valid(v, schema);
 */
#ifndef FRUGAL_TESTS_SCHEMA_CHECK_H
#define FRUGAL_TESTS_SCHEMA_CHECK_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

static int sc_chars(const char *s) {
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static bool sc_type_is(const cJSON *v, const char *t) {
    if (!strcmp(t, "object")) return cJSON_IsObject(v);
    if (!strcmp(t, "array")) return cJSON_IsArray(v);
    if (!strcmp(t, "string")) return cJSON_IsString(v);
    if (!strcmp(t, "number")) return cJSON_IsNumber(v);
    if (!strcmp(t, "integer")) return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    if (!strcmp(t, "boolean")) return cJSON_IsBool(v);
    if (!strcmp(t, "null")) return cJSON_IsNull(v);
    return false;
}

static bool sc_valid(const cJSON *v, const cJSON *s);

static bool sc_object(const cJSON *v, const cJSON *s) {
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *r, *m;
    cJSON_ArrayForEach(r, req) if (!cJSON_GetObjectItemCaseSensitive(v, r->valuestring)) return false;
    cJSON_ArrayForEach(m, v) {
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, m->string) : NULL;
        if (ps) {
            if (!sc_valid(m, ps)) return false;
        } else if (cJSON_IsFalse(ap)) {
            return false;
        } else if (cJSON_IsObject(ap) && !sc_valid(m, ap)) {
            return false;
        }
    }
    return true;
}

static bool sc_array(const cJSON *v, const cJSON *s) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(s, "items"), *e;
    const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems");
    const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
    int n = cJSON_GetArraySize(v);
    if (mn && n < mn->valueint) return false;
    if (mx && n > mx->valueint) return false;
    if (it) cJSON_ArrayForEach(e, v) if (!sc_valid(e, it)) return false;
    return true;
}

static bool sc_valid(const cJSON *v, const cJSON *s) {
    if (cJSON_IsTrue(s)) return true;
    const cJSON *k, *e;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "const")) && !cJSON_Compare(v, k, true)) return false;
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "enum"))) {
        bool any = false;
        cJSON_ArrayForEach(e, k) any |= cJSON_Compare(v, e, true);
        if (!any) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "anyOf"))) {
        bool any = false;
        cJSON_ArrayForEach(e, k) any |= sc_valid(v, e);
        if (!any) return false;
    }
    if ((k = cJSON_GetObjectItemCaseSensitive(s, "type"))) {
        bool any = false;
        if (cJSON_IsString(k)) any = sc_type_is(v, k->valuestring);
        else cJSON_ArrayForEach(e, k) any |= sc_type_is(v, e->valuestring);
        if (!any) return false;
    }
    if (cJSON_IsObject(v) && !sc_object(v, s)) return false;
    if (cJSON_IsArray(v) && !sc_array(v, s)) return false;
    if (cJSON_IsString(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        int n = sc_chars(v->valuestring);
        if ((mn && n < mn->valueint) || (mx && n > mx->valueint)) return false;
    }
    return true;
}

/* text parses as one JSON value (nothing after it) that the schema accepts */
static bool sc_text_valid(const char *text, size_t len, const cJSON *schema) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, false);
    bool ok = v && end == text + len && (!schema || sc_valid(v, schema));
    if (v && !schema) ok = ok && cJSON_IsObject(v);
    cJSON_Delete(v);
    return ok;
}

#endif
