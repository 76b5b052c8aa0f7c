/* flags.h — one small command-line flag reader for every `frugal` subcommand.
 *
 * The reader walks argv one argument at a time; each fr_flag_* call tests the current argument
 * against one flag name and, on a match, takes its value (the next argument) and checks it with the
 * strict parsers of base/num.h. A missing or bad value is reported once on stderr as
 * "frugal CMD: ..." and stops the walk with f->rc = 2 (the usage exit status). A command reads:
 *
 *   fr_flags f;
 *   fr_flags_init(&f, "build-lm", argc, argv);
 *   while (fr_flags_next(&f)) {
 *       if (fr_flag_help(&f)) return puts(USAGE), 0;
 *       else if (fr_flag_str(&f, "--out", &out)) continue;
 *       else if (fr_flag_int(&f, "--order", 2, 3, &order)) continue;
 *       else if (fr_flag_switch(&f, "--clean", &clean)) continue;
 *       else if (fr_flags_positional(&f)) file = f.arg;
 *       else return fr_flags_unknown(&f);
 *   }
 *   if (f.rc) return f.rc;
 *
 * "--name=value" is accepted as well as "--name value". Not thread-safe per reader (one reader per
 * parse); no allocation; argv is not modified and values point into it.
 *
 * A parser that returns its errors instead of printing them (serve's settings, read by a library
 * function) calls fr_flags_errors_to after fr_flags_init: each usage error then fills that fr_err
 * with the code FR_ERR_BAD_REQUEST and the bare message ("--port must be ...", "unknown option
 * '--x'"), and nothing is printed; the caller says how to get help.
 */
#ifndef FRUGAL_BASE_FLAGS_H
#define FRUGAL_BASE_FLAGS_H

#include <stdbool.h>
#include <stdint.h>

#include "base/base.h"

typedef struct fr_flags {
    const char *cmd;  /* subcommand name for messages ("build-lm") */
    int argc;         /* argument count, argv[0] is the subcommand */
    char **argv;      /* the arguments */
    int i;            /* index of the current argument */
    const char *arg;  /* the current argument (argv[i]) */
    int rc;           /* 0, or 2 after a usage error (message already printed or in *err) */
    fr_err *err;      /* NULL: usage errors go to stderr; else they fill *err (fr_flags_errors_to) */
} fr_flags;

/* Starts a walk over argv[1..argc). */
void fr_flags_init(fr_flags *f, const char *cmd, int argc, char **argv);

/* Usage errors of this walk fill *err (code FR_ERR_BAD_REQUEST) instead of being printed. */
void fr_flags_errors_to(fr_flags *f, fr_err *err);

/* Moves to the next argument; false at the end or after a usage error (f->rc). */
bool fr_flags_next(fr_flags *f);

/* "--help" or "-h". */
bool fr_flag_help(const fr_flags *f);

/* A flag without a value: true when the current argument is `name`; sets *on = true (on may be
 * NULL). */
bool fr_flag_switch(fr_flags *f, const char *name, bool *on);

/* A flag with a value. Each returns true when the current argument is `name` (or "name=..."),
 * whether or not the value was good: on a missing or bad value it prints the error, sets f->rc = 2
 * and leaves *out unchanged, and the next fr_flags_next returns false. */
bool fr_flag_str(fr_flags *f, const char *name, const char **out);
bool fr_flag_int(fr_flags *f, const char *name, int lo, int hi, int *out);
bool fr_flag_u64(fr_flags *f, const char *name, uint64_t *out);
bool fr_flag_double(fr_flags *f, const char *name, double lo, double hi, double *out);
bool fr_flag_float(fr_flags *f, const char *name, double lo, double hi, float *out);

/* The current argument is not an option ("-" alone counts as a positional: standard input). */
bool fr_flags_positional(const fr_flags *f);

/* Reports the current argument as an unknown option (or an unexpected argument when it is not an
 * option; printed with a pointer to `frugal CMD --help`); sets and returns f->rc = 2. */
int fr_flags_unknown(fr_flags *f);

/* Reports a usage error "frugal CMD: <message>" (or fills f->err with <message>); sets and
 * returns f->rc = 2. */
int fr_flags_fail(fr_flags *f, const char *fmt, ...) FR_PRINTF(2, 3);

#endif
