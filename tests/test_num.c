/* test_num.c — the strict number parsers of src/base/num.c (used by the serve options and the
 * CLI flags) and fr_hparams_add_eos (used by the GGUF and the HF-config loaders). */
#include <limits.h>
#include <stdint.h>

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

int main(void) { return t_main(); }
