/* test_num.c — the strict number parsers of src/base/num.c (used by the serve options and the
 * CLI flags), the flag reader of src/base/flags.c (every `frugal` subcommand) and
 * fr_hparams_add_eos (used by the GGUF and the HF-config loaders). */
#include <limits.h>
#include <stdint.h>

#include "base/flags.h"
#include "base/num.h"
#include "model/model.h"
#include "t.h"

TEST(parse_long_accepts_whole_numbers_in_range) {
    long v = 0;
    CHECK(fr_parse_long("42", 0, 100, &v) && v == 42);
    CHECK(fr_parse_long("-3", -5, 5, &v) && v == -3);
    CHECK(fr_parse_long("+7", 0, 10, &v) && v == 7);
    CHECK(fr_parse_long("0", 0, 0, &v) && v == 0);
    CHECK(fr_parse_long("65535", 0, 65535, &v) && v == 65535);
}

TEST(parse_long_refuses_junk_range_and_overflow) {
    long v = 99;
    const char *bad[] = {"", " 5", "5 ", "5x", "0x10", "1e3", "-", "+", "\t1", "1.0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (fr_parse_long(bad[i], LONG_MIN, LONG_MAX, &v)) fprintf(stderr, "  took [%s]\n", bad[i]);
        CHECK(!fr_parse_long(bad[i], LONG_MIN, LONG_MAX, &v));
    }
    CHECK(!fr_parse_long("65536", 0, 65535, &v));
    CHECK(!fr_parse_long("-1", 0, 65535, &v));
    CHECK(!fr_parse_long("99999999999999999999999", LONG_MIN, LONG_MAX, &v));
    CHECK(!fr_parse_long(NULL, 0, 1, &v));
    CHECK_EQ_INT(v, 99); /* untouched on failure */
}

TEST(parse_u64_takes_the_full_range_and_no_sign) {
    uint64_t v = 7;
    CHECK(fr_parse_u64("18446744073709551615", &v) && v == UINT64_MAX);
    CHECK(fr_parse_u64("0", &v) && v == 0);
    v = 7;
    CHECK(!fr_parse_u64("-1", &v)); /* strtoull would wrap it to UINT64_MAX */
    CHECK(!fr_parse_u64("+1", &v));
    CHECK(!fr_parse_u64("18446744073709551616", &v));
    CHECK(!fr_parse_u64(" 1", &v));
    CHECK(!fr_parse_u64("1k", &v));
    CHECK(!fr_parse_u64("", &v));
    CHECK_EQ_INT(v, 7);
}

TEST(parse_double_range_and_junk) {
    double v = 0;
    CHECK(fr_parse_double("0.5", 0, 1, &v) && v == 0.5);
    CHECK(fr_parse_double("1e-2", 0.01, 1, &v) && v == 0.01);
    CHECK(fr_parse_double("1", 0, 1, &v) && v == 1);
    v = 3;
    CHECK(!fr_parse_double("nan", -1e300, 1e300, &v));
    CHECK(!fr_parse_double("1.5", 0, 1, &v));
    CHECK(!fr_parse_double("0.5x", 0, 1, &v));
    CHECK(!fr_parse_double(" 0.5", 0, 1, &v));
    CHECK(!fr_parse_double("", 0, 1, &v));
    CHECK(!fr_parse_double("1e999", 0, 1e308, &v));
    CHECK(v == 3);
}

TEST(hparams_add_eos_skips_main_duplicates_negatives_and_overflow) {
    fr_hparams hp;
    memset(&hp, 0, sizeof hp);
    hp.eos_id = 2;
    for (int i = 0; i < 4; i++) hp.eos_ids[i] = -1;
    fr_hparams_add_eos(&hp, 2);  /* the main eos */
    fr_hparams_add_eos(&hp, -1); /* absent */
    fr_hparams_add_eos(&hp, 10);
    fr_hparams_add_eos(&hp, 10); /* duplicate */
    fr_hparams_add_eos(&hp, 11);
    fr_hparams_add_eos(&hp, 12);
    fr_hparams_add_eos(&hp, 13);
    fr_hparams_add_eos(&hp, 14); /* list full: dropped */
    CHECK_EQ_INT(hp.eos_ids[0], 10);
    CHECK_EQ_INT(hp.eos_ids[1], 11);
    CHECK_EQ_INT(hp.eos_ids[2], 12);
    CHECK_EQ_INT(hp.eos_ids[3], 13);
    CHECK_EQ_INT(hp.eos_id, 2);
}

/* Walk argv as a subcommand would; returns f.rc, or 3 for an unknown argument. */
typedef struct parsed {
    const char *out, *file;
    int n;
    uint64_t seed;
    double frac;
    float temp;
    bool clean;
} parsed;
static int walk(int argc, char **argv, parsed *p) {
    fr_flags f;
    fr_flags_init(&f, "test", argc, argv);
    while (fr_flags_next(&f)) {
        if (fr_flag_str(&f, "--out", &p->out) || fr_flag_int(&f, "--n", 1, 100, &p->n) ||
            fr_flag_u64(&f, "--seed", &p->seed) || fr_flag_double(&f, "--frac", 0, 1, &p->frac) ||
            fr_flag_float(&f, "--temp", 0, 2, &p->temp) || fr_flag_switch(&f, "--clean", &p->clean))
            continue;
        if (fr_flags_positional(&f) && !p->file) p->file = f.arg;
        else return fr_flags_unknown(&f) == 2 ? 3 : -1;
    }
    return f.rc;
}

TEST(flags_take_values_switches_and_positionals) {
    char *argv[] = {"test", "--out", "dir", "--n=7", "in.txt", "--seed", "18446744073709551615",
                    "--frac", "0.25", "--temp", "1.5", "--clean", NULL};
    parsed p = {0};
    CHECK_EQ_INT(walk(12, argv, &p), 0);
    CHECK_STR(p.out, "dir");
    CHECK_STR(p.file, "in.txt");
    CHECK_EQ_INT(p.n, 7);
    CHECK(p.seed == UINT64_MAX);
    CHECK(p.frac == 0.25);
    CHECK(p.temp == 1.5f);
    CHECK(p.clean);
    char *dash[] = {"test", "-", NULL}; /* "-" is a positional (standard input) */
    parsed q = {0};
    CHECK_EQ_INT(walk(2, dash, &q), 0);
    CHECK_STR(q.file, "-");
}

TEST(flags_stop_at_the_first_bad_value) {
    struct {
        int argc;
        char *argv[4];
    } bad[] = {
        {2, {"test", "--out"}},              /* missing value */
        {3, {"test", "--n", "0"}},           /* below the range */
        {3, {"test", "--n", "7x"}},          /* junk */
        {3, {"test", "--n", "101"}},         /* above the range */
        {3, {"test", "--seed", "-1"}},       /* a sign on an unsigned value */
        {3, {"test", "--frac", "1.5"}},      /* out of range */
        {3, {"test", "--temp", "nan"}},      /* not a number in range */
        {2, {"test", "--n="}},               /* empty value */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        parsed p = {.n = 5, .temp = 1};
        int rc = walk(bad[k].argc, bad[k].argv, &p);
        if (rc != 2) fprintf(stderr, "  case %zu: rc %d\n", k, rc);
        CHECK_EQ_INT(rc, 2);
        CHECK_EQ_INT(p.n, 5);    /* left unchanged */
        CHECK(p.temp == 1.0f);
    }
    char *unknown[] = {"test", "--nope", "x", NULL};
    parsed p = {0};
    CHECK_EQ_INT(walk(3, unknown, &p), 3);
    char *extra[] = {"test", "a", "b", NULL};
    parsed q = {0};
    CHECK_EQ_INT(walk(3, extra, &q), 3);
    /* a flag name is matched whole: --output is not --out */
    char *longer[] = {"test", "--output", "x", NULL};
    parsed r = {0};
    CHECK_EQ_INT(walk(3, longer, &r), 3);
    CHECK(r.out == NULL);
}

/* With fr_flags_errors_to the usage error is returned, not printed: code FR_ERR_BAD_REQUEST and
 * the bare message (an unknown option without the pointer to --help, which the caller adds). */
TEST(flags_errors_to_an_fr_err) {
    struct {
        int argc;
        char *argv[4];
        const char *msg;
    } cases[] = {
        {2, {"test", "--out"}, "--out needs a value"},
        {3, {"test", "--n", "7x"}, "--n must be an integer in 1..100 (got '7x')"},
        {3, {"test", "--seed", "-1"}, "--seed must be a non-negative integer (got '-1')"},
        {3, {"test", "--frac=2"}, "--frac must be a number in 0..1 (got '2')"},
        {2, {"test", "--nope"}, "unknown option '--nope'"},
        {3, {"test", "a", "b"}, "unexpected argument 'b'"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fr_err err = {0};
        fr_flags f;
        fr_flags_init(&f, "test", cases[k].argc, cases[k].argv);
        fr_flags_errors_to(&f, &err);
        const char *out = NULL, *file = NULL;
        int n = 5;
        uint64_t seed = 0;
        double frac = 0;
        while (fr_flags_next(&f)) {
            if (fr_flag_str(&f, "--out", &out) || fr_flag_int(&f, "--n", 1, 100, &n) ||
                fr_flag_u64(&f, "--seed", &seed) || fr_flag_double(&f, "--frac", 0, 1, &frac))
                continue;
            if (fr_flags_positional(&f) && !file) file = f.arg;
            else fr_flags_unknown(&f);
        }
        CHECK_EQ_INT(f.rc, 2);
        CHECK_EQ_INT(err.code, FR_ERR_BAD_REQUEST);
        CHECK_STR(err.msg, cases[k].msg);
        CHECK_EQ_INT(n, 5);
    }
}

int main(void) { return t_main(); }
