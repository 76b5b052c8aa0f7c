/* config_legacy.c — the meter's older `key = value` syntax, read for one more release (then
 * removed): every shipped file is JSON now (config.c), a file in this syntax still loads with a
 * deprecation warning, and ledgers written before keep their configuration dump in it.
 *
 * Format: one `key = value` per line; `[section]` lines prefix the keys that follow ("[cost]" +
 * "pue = 1.4" is "cost.pue"); `#` starts a comment at the start of a line or after whitespace (not
 * inside double quotes); a value may be double-quoted as a whole (to keep a '#') and may not
 * contain a quote otherwise. Values go through fr_meter_config_set (the same keys and ranges).
 *
 * The parser reads untrusted bytes (it is fuzzed): every line is bounded, and any bad line fails
 * the whole parse with "line N: …".
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "meter/meter_int.h"

static void trim(char **b, char **e) {
    while (*b < *e && isspace((unsigned char)**b)) (*b)++;
    while (*e > *b && isspace((unsigned char)(*e)[-1])) (*e)--;
}

int fr_meter_config_parse_legacy(fr_meter_config *c, const char *text, size_t len, fr_err *err) {
    char section[64] = "";
    char line[4096], key[192];
    size_t pos = 0;
    int lineno = 0;
    while (pos < len) {
        lineno++;
        size_t e = pos;
        while (e < len && text[e] != '\n') e++;
        size_t n = e - pos;
        if (n >= sizeof line) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: longer than %zu bytes", lineno, sizeof line - 1);
            return -1;
        }
        memcpy(line, text + pos, n);
        line[n] = 0;
        pos = e + 1;
        if (memchr(line, 0, n)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: NUL byte", lineno);
            return -1;
        }
        char *b = line, *en = line + n;
        /* comments: '#' at the start or after whitespace, outside quotes */
        bool inq = false;
        for (char *p = b; p < en; p++) {
            if (*p == '"') inq = !inq;
            else if (*p == '#' && !inq && (p == b || isspace((unsigned char)p[-1]))) {
                en = p;
                break;
            }
        }
        trim(&b, &en);
        if (b == en) continue;
        *en = 0;
        if (*b == '[') {
            if (en[-1] != ']' || en - b < 3 || (size_t)(en - b - 2) >= sizeof section) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: bad section header", lineno);
                return -1;
            }
            memcpy(section, b + 1, (size_t)(en - b - 2));
            section[en - b - 2] = 0;
            if (!fr_meter_name_ok(section, sizeof section)) {
                fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: bad section name", lineno);
                return -1;
            }
            continue;
        }
        char *eq = strchr(b, '=');
        if (!eq) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: expected key = value", lineno);
            return -1;
        }
        char *kb = b, *ke = eq, *vb = eq + 1, *ve = en;
        trim(&kb, &ke);
        trim(&vb, &ve);
        *ke = 0;
        *ve = 0;
        if (ve - vb >= 2 && *vb == '"' && ve[-1] == '"') {
            vb++;
            *--ve = 0;
        }
        if (strchr(vb, '"')) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: a quote inside a value", lineno);
            return -1;
        }
        if (!fr_meter_name_ok(kb, 128)) {
            fr_err_setc(err, FR_ERR_BAD_REQUEST, "line %d: bad key", lineno);
            return -1;
        }
        if (section[0]) snprintf(key, sizeof key, "%.63s.%.127s", section, kb);
        else snprintf(key, sizeof key, "%.127s", kb);
        if (fr_meter_config_set(c, key, vb, err)) {
            fr_err_prefix(err, "line %d", lineno);
            return -1;
        }
    }
    return fr_meter_config_check(c, err);
}

