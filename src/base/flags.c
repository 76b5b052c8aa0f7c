/* flags.c — the command-line flag reader (see flags.h). */
#include "base/flags.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/num.h"

void fr_flags_init(fr_flags *f, const char *cmd, int argc, char **argv) {
    *f = (fr_flags){.cmd = cmd, .argc = argc, .argv = argv, .i = 0, .arg = NULL, .rc = 0,
                    .err = NULL};
}

void fr_flags_errors_to(fr_flags *f, fr_err *err) { f->err = err; }

bool fr_flags_next(fr_flags *f) {
    if (f->rc || f->i + 1 >= f->argc) return false;
    f->arg = f->argv[++f->i];
    return true;
}

bool fr_flag_help(const fr_flags *f) { return !strcmp(f->arg, "--help") || !strcmp(f->arg, "-h"); }

int fr_flags_fail(fr_flags *f, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (f->err) {
        char msg[sizeof f->err->msg];
        vsnprintf(msg, sizeof msg, fmt, ap);
        fr_err_setc(f->err, FR_ERR_BAD_REQUEST, "%s", msg);
    } else {
        fprintf(stderr, "frugal %s: ", f->cmd);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
    }
    va_end(ap);
    return f->rc = 2;
}

bool fr_flag_switch(fr_flags *f, const char *name, bool *on) {
    if (strcmp(f->arg, name)) return false;
    if (on) *on = true;
    return true;
}

/* When the current argument is `name` or "name=...": true, with *val its value or NULL after
 * reporting a missing one. */
static bool value_of(fr_flags *f, const char *name, const char **val) {
    size_t n = strlen(name);
    if (strncmp(f->arg, name, n)) return false;
    if (f->arg[n] == '=') {
        *val = f->arg + n + 1;
        return true;
    }
    if (f->arg[n]) return false;
    if (f->i + 1 >= f->argc) {
        fr_flags_fail(f, "%s needs a value", name);
        *val = NULL;
        return true;
    }
    *val = f->argv[++f->i];
    return true;
}

bool fr_flag_str(fr_flags *f, const char *name, const char **out) {
    const char *v;
    if (!value_of(f, name, &v)) return false;
    if (v) *out = v;
    return true;
}

bool fr_flag_int(fr_flags *f, const char *name, int lo, int hi, int *out) {
    const char *v;
    if (!value_of(f, name, &v)) return false;
    long l;
    if (v && !fr_parse_long(v, lo, hi, &l))
        fr_flags_fail(f, "%s must be an integer in %d..%d (got '%s')", name, lo, hi, v);
    else if (v) *out = (int)l;
    return true;
}

bool fr_flag_u64(fr_flags *f, const char *name, uint64_t *out) {
    const char *v;
    if (!value_of(f, name, &v)) return false;
    if (v && !fr_parse_u64(v, out))
        fr_flags_fail(f, "%s must be a non-negative integer (got '%s')", name, v);
    return true;
}

bool fr_flag_double(fr_flags *f, const char *name, double lo, double hi, double *out) {
    const char *v;
    if (!value_of(f, name, &v)) return false;
    if (v && !fr_parse_double(v, lo, hi, out))
        fr_flags_fail(f, "%s must be a number in %g..%g (got '%s')", name, lo, hi, v);
    return true;
}

bool fr_flag_float(fr_flags *f, const char *name, double lo, double hi, float *out) {
    double d = 0;
    bool hit = fr_flag_double(f, name, lo, hi, &d);
    if (hit && !f->rc) *out = (float)d;
    return hit;
}

bool fr_flags_positional(const fr_flags *f) { return f->arg[0] != '-' || !f->arg[1]; }

int fr_flags_unknown(fr_flags *f) {
    if (fr_flags_positional(f)) return fr_flags_fail(f, "unexpected argument '%s'", f->arg);
    if (f->err) return fr_flags_fail(f, "unknown option '%s'", f->arg);
    return fr_flags_fail(f, "unknown option '%s' (see `frugal %s --help`)", f->arg, f->cmd);
}
