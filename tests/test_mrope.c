/* test_mrope.c — image pads and M-RoPE positions (model/mrope.h) on cases computed by hand from
 * HF transformers 5.17's get_rope_index (one image, a wide one, two in one prompt, a temporal
 * grid, text only) and the mismatches it refuses. */
#include "model/mrope.h"
#include "t.h"

#define IMG 151655
#define VS 151652
#define VE 151653

/* pos rows (3, n) equal to the expected t, h, w rows. */
static bool rows_eq(const int32_t *pos, size_t n, const int32_t *t, const int32_t *h,
                    const int32_t *w) {
    for (size_t i = 0; i < n; i++)
        if (pos[i] != t[i] || pos[n + i] != h[i] || pos[2 * n + i] != w[i]) {
            fprintf(stderr, "  token %zu: (%d, %d, %d), expected (%d, %d, %d)\n", i, pos[i],
                    pos[n + i], pos[2 * n + i], t[i], h[i], w[i]);
            return false;
        }
    return true;
}

TEST(one_image_text_continues_after_the_grid) {
    /* text 0..2, a 4x4 patch grid = 2x2 tokens at 3 + (row, col), text from 3 + 4/2 = 5 */
    const int32_t ids[] = {10, 11, VS, IMG, IMG, IMG, IMG, VE, 12, 13};
    const int32_t g[3] = {1, 4, 4};
    const int32_t t[] = {0, 1, 2, 3, 3, 3, 3, 5, 6, 7}, h[] = {0, 1, 2, 3, 3, 4, 4, 5, 6, 7},
                  w[] = {0, 1, 2, 3, 4, 3, 4, 5, 6, 7};
    int32_t pos[30], delta = 99;
    fr_err err = {0};
    CHECK(fr_vl_rope_index(ids, 10, IMG, g, 1, 2, pos, &delta, &err) == 0);
    CHECK(rows_eq(pos, 10, t, h, w));
    CHECK_EQ_INT(delta, 8 - 10);
}

TEST(wide_image_and_two_images) {
    /* 2x6 patches = 1x3 tokens: (1,1,1..3), text from 1 + 6/2 = 4 */
    const int32_t a[] = {1, IMG, IMG, IMG, 2};
    const int32_t ga[3] = {1, 2, 6};
    const int32_t at[] = {0, 1, 1, 1, 4}, ah[] = {0, 1, 1, 1, 4}, aw[] = {0, 1, 2, 3, 4};
    int32_t pos[60], delta;
    fr_err err = {0};
    CHECK(fr_vl_rope_index(a, 5, IMG, ga, 1, 2, pos, &delta, &err) == 0);
    CHECK(rows_eq(pos, 5, at, ah, aw));
    CHECK_EQ_INT(delta, 0);
    /* both in one prompt: the second image starts where the text after the first left off */
    const int32_t b[] = {1, IMG, IMG, IMG, IMG, 2, IMG, IMG, IMG, 3};
    const int32_t gb[6] = {1, 4, 4, 1, 2, 6};
    const int32_t bt[] = {0, 1, 1, 1, 1, 3, 4, 4, 4, 7}, bh[] = {0, 1, 1, 2, 2, 3, 4, 4, 4, 7},
                  bw[] = {0, 1, 2, 1, 2, 3, 4, 5, 6, 7};
    CHECK(fr_vl_rope_index(b, 10, IMG, gb, 2, 2, pos, &delta, &err) == 0);
    CHECK(rows_eq(pos, 10, bt, bh, bw));
    CHECK_EQ_INT(delta, 8 - 10);
}

TEST(temporal_grid_uses_the_517_rule) {
    /* t = 2: (0,0,0), (1,0,0); text continues at 0 + max(2,2)/2 = 1 (not max + 1 = 2), and the
     * delta counts the largest position, 1 */
    const int32_t ids[] = {IMG, IMG, 5};
    const int32_t g[3] = {2, 2, 2};
    const int32_t t[] = {0, 1, 1}, h[] = {0, 0, 1}, w[] = {0, 0, 1};
    int32_t pos[9], delta;
    fr_err err = {0};
    CHECK(fr_vl_rope_index(ids, 3, IMG, g, 1, 2, pos, &delta, &err) == 0);
    CHECK(rows_eq(pos, 3, t, h, w));
    CHECK_EQ_INT(delta, 2 - 3);
}

TEST(text_only_is_plain_positions) {
    const int32_t ids[] = {4, 5, 6, 7};
    const int32_t r[] = {0, 1, 2, 3};
    int32_t pos[12], delta = 5;
    fr_err err = {0};
    CHECK(fr_vl_rope_index(ids, 4, IMG, NULL, 0, 2, pos, &delta, &err) == 0);
    CHECK(rows_eq(pos, 4, r, r, r));
    CHECK_EQ_INT(delta, 0);
}

TEST(mismatches_are_bad_requests) {
    const int32_t ids[] = {1, IMG, IMG, IMG, 2, IMG, 3};
    const int32_t g[6] = {1, 2, 6, 1, 4, 4};
    int32_t pos[21], delta;
    fr_err err = {0};
    /* the second run has 1 token, its grid needs 4 */
    CHECK(fr_vl_rope_index(ids, 7, IMG, g, 2, 2, pos, &delta, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    /* two runs, one grid */
    err.code = FR_ERR_INTERNAL;
    CHECK(fr_vl_rope_index(ids, 7, IMG, g, 1, 2, pos, &delta, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    /* one run, two grids */
    err.code = FR_ERR_INTERNAL;
    CHECK(fr_vl_rope_index(ids, 5, IMG, g, 2, 2, pos, &delta, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    /* a grid not divisible by the merge, a zero grid */
    const int32_t odd[3] = {1, 3, 4}, zero[3] = {1, 0, 4};
    err.code = FR_ERR_INTERNAL;
    CHECK(fr_vl_rope_index(ids, 5, IMG, odd, 1, 2, pos, &delta, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    CHECK(fr_vl_image_tokens(zero, 2) == -1);
    const int32_t huge[3] = {1 << 30, 1 << 30, 1 << 30};
    CHECK(fr_vl_image_tokens(huge, 2) == -1);
}

TEST(expand_pads) {
    const int32_t ids[] = {1, VS, IMG, VE, 2, VS, IMG, VE, 3};
    const int32_t g[6] = {1, 4, 4, 1, 2, 6};
    int32_t *out = NULL;
    size_t n = 0;
    fr_err err = {0};
    CHECK(fr_vl_expand_pads(ids, 9, IMG, g, 2, 2, 1000, &out, &n, &err) == 0);
    const int32_t want[] = {1, VS, IMG, IMG, IMG, IMG, VE, 2, VS, IMG, IMG, IMG, VE, 3};
    CHECK_EQ_INT(n, 14);
    CHECK(out && n == 14 && memcmp(out, want, sizeof want) == 0);
    /* the expanded prompt's positions follow */
    int32_t pos[42], delta;
    CHECK(out && fr_vl_rope_index(out, n, IMG, g, 2, 2, pos, &delta, &err) == 0);
    /* 1:0 VS:1 [2x2 at 2] VE:4 2:5 VS:6 [1x3 at 7] VE:10 3:11 */
    CHECK_EQ_INT(pos[13], 11);
    CHECK_EQ_INT(pos[9], 7);
    CHECK_EQ_INT(pos[14 + 11], 7);
    CHECK_EQ_INT(pos[28 + 11], 9);
    CHECK_EQ_INT(delta, 12 - 14);
    free(out);
    /* placeholders and images disagree; too long */
    CHECK(fr_vl_expand_pads(ids, 9, IMG, g, 1, 2, 1000, &out, &n, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST && out == NULL);
    const int32_t g3[9] = {1, 4, 4, 1, 2, 6, 1, 2, 2};
    CHECK(fr_vl_expand_pads(ids, 9, IMG, g3, 3, 2, 1000, &out, &n, &err) == -1);
    CHECK(err.code == FR_ERR_BAD_REQUEST);
    CHECK(fr_vl_expand_pads(ids, 9, IMG, g, 2, 2, 13, &out, &n, &err) == -1);
    CHECK(err.code == FR_ERR_TOO_LARGE);
}

int main(void) { return t_main(); }
