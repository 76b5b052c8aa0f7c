/* t.h — the test harness: each tests/test_*.c is a program of TEST() cases; it prints one line per
 * case ("ok"/"FAIL") and a summary line "N passed, N failed" and exits non-zero on a failure.
 * tests/run.sh runs every program and adds the totals.
 *
 *   TEST(name) { CHECK(x == 1); CHECK_EQ_INT(a, b); CHECK_STR(a, b); CHECK_NEAR(a, b, tol); }
 *   int main(void) { return t_main(); }
 */
#ifndef FRUGAL_T_H
#define FRUGAL_T_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*t_fn)(void);
static struct { const char *name; t_fn fn; } t_cases[256];
static int t_ncases, t_fail_cur;

#define TEST(n)                                                               \
    static void test_##n(void);                                               \
    __attribute__((constructor)) static void reg_##n(void) {                  \
        t_cases[t_ncases].name = #n;                                          \
        t_cases[t_ncases++].fn = test_##n;                                    \
    }                                                                         \
    static void test_##n(void)

#define CHECK(c)                                                                       \
    do {                                                                               \
        if (!(c)) {                                                                    \
            fprintf(stderr, "  %s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #c);     \
            t_fail_cur++;                                                              \
        }                                                                              \
    } while (0)
#define CHECK_EQ_INT(a, b)                                                                   \
    do {                                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                                  \
        if (a_ != b_) {                                                                      \
            fprintf(stderr, "  %s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__,   \
                    #a, #b, a_, b_);                                                         \
            t_fail_cur++;                                                                    \
        }                                                                                    \
    } while (0)
#define CHECK_STR(a, b)                                                                      \
    do {                                                                                     \
        const char *a_ = (a), *b_ = (b);                                                     \
        if (!a_ || !b_ || strcmp(a_, b_)) {                                                  \
            fprintf(stderr, "  %s:%d: %s == %s failed:\n    got      [%s]\n    expected [%s]\n", \
                    __FILE__, __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");     \
            t_fail_cur++;                                                                    \
        }                                                                                    \
    } while (0)
#define CHECK_NEAR(a, b, tol)                                                                \
    do {                                                                                     \
        double a_ = (a), b_ = (b);                                                           \
        if (!(fabs(a_ - b_) <= (tol))) {                                                     \
            fprintf(stderr, "  %s:%d: |%s - %s| <= %g failed: %g vs %g\n", __FILE__, __LINE__, \
                    #a, #b, (double)(tol), a_, b_);                                          \
            t_fail_cur++;                                                                    \
        }                                                                                    \
    } while (0)

/* Relative L2 error of a against the reference b, in double; INFINITY when b is all zeros (a NaN
 * in a gives NaN, which no tolerance passes). */
static inline double t_rel_l2(const float *a, const float *b, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return den > 0 ? sqrt(num / den) : INFINITY;
}

static inline int t_main(void) {
    int pass = 0, fail = 0;
    for (int i = 0; i < t_ncases; i++) {
        t_fail_cur = 0;
        t_cases[i].fn();
        printf("%s %s\n", t_fail_cur ? "FAIL" : "ok  ", t_cases[i].name);
        fflush(stdout);
        if (t_fail_cur) fail++; else pass++;
    }
    printf("%d passed, %d failed\n", pass, fail);
    return fail ? 1 : 0;
}

/* Fixture root: $FRUGAL_FIXTURES or tests/fixtures (tests run from the repository root). */
static inline const char *t_fixtures(void) {
    const char *e = getenv("FRUGAL_FIXTURES");
    return e ? e : "tests/fixtures";
}

#endif
