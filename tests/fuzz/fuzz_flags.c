/* fuzz_flags.c — libFuzzer harness for the strict number parsers (src/base/num.c) and the flag
 * reader (src/base/flags.c).
 *
 * The input is split at NUL bytes into strings. Each string goes through fr_parse_long,
 * fr_parse_u64 and fr_parse_double, and every verdict is checked against a reference written here
 * independently: a strict integer is an optional sign (none for u64) and one or more ASCII
 * digits, nothing else, whose value (accumulated digit by digit with an overflow check) lies in
 * range; an accepted double must come from a string strtod reads whole, without leading space,
 * and lie in range. The strings, as an argv, are then walked by the flag reader with one flag of
 * each kind: the walk must end, every value handed out must point into argv, a failed value must
 * leave the target unchanged, and f.rc must be 0 or 2; walked again with the errors captured
 * (fr_flags_errors_to), a usage error must carry FR_ERR_BAD_REQUEST and a message. Build and run: `make fuzz`
 * (tests/fuzz/README.md). */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/flags.h"
#include "base/num.h"

#define FAIL(what)                                                                           \
    do {                                                                                     \
        fprintf(stderr, "fuzz_flags: %s (line %d)\n", what, __LINE__);                       \
        abort();                                                                             \
    } while (0)

/* The reference: a strict decimal integer; *neg for a leading '-'; the magnitude saturates at
 * UINT64_MAX with *over set. */
static bool ref_digits(const char *s, bool allow_sign, bool *neg, uint64_t *mag, bool *over) {
    *neg = false;
    *over = false;
    *mag = 0;
    if (allow_sign && (*s == '+' || *s == '-')) *neg = *s++ == '-';
    if (!*s) return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        unsigned d = (unsigned)(*s - '0');
        if (*mag > (UINT64_MAX - d) / 10) *over = true;
        else *mag = *mag * 10 + d;
    }
    return true;
}

static void check_numbers(const char *s) {
    bool neg, over;
    uint64_t mag;
    long lv = 12345;
    bool ok = fr_parse_long(s, -1000, 1000, &lv);
    bool shape = ref_digits(s, true, &neg, &mag, &over);
    bool want = shape && !over && mag <= 1000;
    if (ok != want) FAIL("fr_parse_long verdict");
    if (ok && lv != (neg ? -(long)mag : (long)mag)) FAIL("fr_parse_long value");
    if (!ok && lv != 12345) FAIL("fr_parse_long wrote on failure");
    ok = fr_parse_long(s, LONG_MIN, LONG_MAX, &lv);
    want = shape && !over &&
           (neg ? mag <= (uint64_t)LONG_MAX + 1 : mag <= (uint64_t)LONG_MAX);
    if (ok != want) FAIL("fr_parse_long full-range verdict");
    uint64_t uv = 7;
    ok = fr_parse_u64(s, &uv);
    shape = ref_digits(s, false, &neg, &mag, &over);
    if (ok != (shape && !over)) FAIL("fr_parse_u64 verdict");
    if (ok && uv != mag) FAIL("fr_parse_u64 value");
    if (!ok && uv != 7) FAIL("fr_parse_u64 wrote on failure");
    double dv = 0.5;
    ok = fr_parse_double(s, -1e6, 1e6, &dv);
    if (ok) {
        char *end;
        double r = strtod(s, &end);
        if (*end || end == s || isspace((unsigned char)s[0])) FAIL("fr_parse_double took junk");
        if (!(dv >= -1e6 && dv <= 1e6) || dv != r) FAIL("fr_parse_double value");
    } else if (dv != 0.5) {
        FAIL("fr_parse_double wrote on failure");
    }
}

static bool in_argv(const char *p, int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (p >= argv[i] && p <= argv[i] + strlen(argv[i])) return true;
    return false;
}

/* capture: usage errors go to an fr_err (fr_flags_errors_to), which must then hold the code
 * FR_ERR_BAD_REQUEST and a non-empty message. */
static void check_walk(int argc, char **argv, bool capture) {
    fr_err err = {0};
    const char *str = NULL;
    int n = -7;
    uint64_t u = 9;
    double d = 0.25;
    float fl = 0.75f;
    bool sw = false;
    fr_flags f;
    fr_flags_init(&f, "fuzz", argc, argv);
    if (capture) fr_flags_errors_to(&f, &err);
    int steps = 0;
    while (fr_flags_next(&f)) {
        if (++steps > argc) FAIL("the walk does not end");
        int n0 = n;
        uint64_t u0 = u;
        double d0 = d;
        float fl0 = fl;
        if (fr_flag_str(&f, "--s", &str)) {
            if (str && !in_argv(str, argc, argv)) FAIL("value outside argv");
        } else if (fr_flag_int(&f, "--n", -5, 5, &n)) {
            if (f.rc ? n != n0 : n < -5 || n > 5) FAIL("--n");
        } else if (fr_flag_u64(&f, "--u", &u)) {
            if (f.rc && u != u0) FAIL("--u wrote on failure");
        } else if (fr_flag_double(&f, "--d", 0, 1, &d)) {
            if (f.rc ? d != d0 : !(d >= 0 && d <= 1)) FAIL("--d");
        } else if (fr_flag_float(&f, "--f", 0, 2, &fl)) {
            if (f.rc ? fl != fl0 : !(fl >= 0 && fl <= 2)) FAIL("--f");
        } else if (fr_flag_switch(&f, "--w", &sw) || fr_flags_positional(&f) || fr_flag_help(&f)) {
            continue;
        } else {
            if (fr_flags_unknown(&f) != 2) FAIL("unknown is not 2");
        }
    }
    if (f.rc != 0 && f.rc != 2) FAIL("rc");
    if (capture && f.rc == 2 && (err.code != FR_ERR_BAD_REQUEST || !err.msg[0]))
        FAIL("a captured usage error without its code or message");
    if (capture && f.rc == 0 && err.msg[0]) FAIL("a message without a usage error");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 4096) return 0;
    char *buf = malloc(size + 1);
    memcpy(buf, data, size);
    buf[size] = 0;
    char *argv[65];
    int argc = 0;
    argv[argc++] = "fuzz";
    for (char *p = buf; argc < 64;) {
        argv[argc++] = p;
        check_numbers(p);
        size_t l = strlen(p);
        if (p + l >= buf + size) break;
        p += l + 1;
    }
    argv[argc] = NULL;
    check_walk(argc, argv, false);
    check_walk(argc, argv, true);
    free(buf);
    return 0;
}
