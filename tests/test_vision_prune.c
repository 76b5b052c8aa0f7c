/* test_vision_prune.c — query-guided visual-token pruning and the downsampling baseline
 * (src/stages/vision/prune.h) on constructed feature maps: counts, positions, query dependence,
 * diversity against relevance alone, determinism, hostile parameters. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stages/vision/prune.h"
#include "t.h"

/* ---- deterministic random numbers ---- */
static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
static double rng_u(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return ((double)(rng_state >> 11) + 0.5) / 9007199254740992.0;
}
static float rng_g(void) { return (float)(sqrt(-2.0 * log(rng_u())) * cos(6.283185307179586 * rng_u())); }
static void rand_unit(float *v, int d) {
    double s = 0;
    for (int c = 0; c < d; c++) {
        v[c] = rng_g();
        s += (double)v[c] * v[c];
    }
    for (int c = 0; c < d; c++) v[c] /= (float)sqrt(s);
}
/* v = a + scale * unit noise */
static void noisy(float *v, const float *a, float scale, int d) {
    float *g = malloc((size_t)d * sizeof *g);
    rand_unit(g, d);
    for (int c = 0; c < d; c++) v[c] = a[c] + scale * g[c];
    free(g);
}

/* An 8 x 8 grid whose left half aligns with e_a, right half with e_b, plus a large component
 * shared by every token (as real merger outputs have). feat (64, d). */
static void two_regions(float *feat, int d, const float *ea, const float *eb, const float *common) {
    float *base = malloc((size_t)d * sizeof *base);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++) {
            const float *e = x < 4 ? ea : eb;
            for (int c = 0; c < d; c++) base[c] = e[c] + 3.0f * common[c];
            noisy(feat + (y * 8 + x) * d, base, 0.6f, d);
        }
    free(base);
}

/* The question: 3 tokens near e, 2 unrelated tokens with weight 0 (template / stop words), and
 * one unrelated token with weight 1 (a content word about nothing in the image). */
static void question(float *q, float *w, int d, const float *e) {
    for (int j = 0; j < 3; j++) {
        noisy(q + j * d, e, 0.3f, d);
        w[j] = 1;
    }
    for (int j = 3; j < 6; j++) {
        rand_unit(q + j * d, d);
        w[j] = j < 5 ? 0.0f : 1.0f;
    }
}

static int count_left(const int64_t *kept, int64_t k) {
    int c = 0;
    for (int64_t i = 0; i < k; i++) c += (kept[i] % 8) < 4;
    return c;
}

static void check_sorted(const int64_t *kept, int64_t k, int64_t n) {
    for (int64_t i = 0; i < k; i++) {
        CHECK(kept[i] >= 0 && kept[i] < n);
        if (i) CHECK(kept[i] > kept[i - 1]);
    }
}

static void query_case(int d, int sketch) {
    rng_seed(7);
    float *ea = malloc(d * sizeof *ea), *eb = malloc(d * sizeof *eb), *cm = malloc(d * sizeof *cm);
    rand_unit(ea, d);
    rand_unit(eb, d);
    rand_unit(cm, d);
    float *feat = malloc((size_t)64 * d * sizeof *feat);
    two_regions(feat, d, ea, eb, cm);
    float *qa = malloc(6 * d * sizeof *qa), *qb = malloc(6 * d * sizeof *qb), wa[6], wb[6];
    question(qa, wa, d, ea);
    question(qb, wb, d, eb);
    fr_vision_prune_params p = fr_vision_prune_default_params();
    p.keep_ratio = 0.25;
    p.sketch_dim = sketch;
    fr_vision_prune_input in = {.feat = feat, .n = 64, .d = d, .query = qa, .query_w = wa, .m = 6};
    int64_t ka[64], kb[64];
    float rel[64];
    fr_vision_prune_report rep;
    fr_err err = {0};
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, ka, NULL, rel, &rep, &err), 16);
    double left = 0, right = 0;
    for (int i = 0; i < 64; i++) *(i % 8 < 4 ? &left : &right) += rel[i];
    CHECK(left > 2 * right); /* relevance itself points at the asked region */
    in.query = qb;
    in.query_w = wb;
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, kb, NULL, NULL, &rep, &err), 16);
    check_sorted(ka, 16, 64);
    check_sorted(kb, 16, 64);
    int la = count_left(ka, 16), lb = count_left(kb, 16);
    fprintf(stderr, "  d=%d sketch=%d: question A keeps %d/16 left, question B keeps %d/16 right\n",
            d, rep.sketch_dim, la, 16 - lb);
    CHECK(la >= 13);      /* question A: mostly the left region */
    CHECK(16 - lb >= 13); /* question B: mostly the right region */
    CHECK_EQ_INT(rep.sketch_dim, sketch > 0 && d > sketch ? sketch : d);
    free(ea);
    free(eb);
    free(cm);
    free(feat);
    free(qa);
    free(qb);
}

TEST(query_chooses_its_region) { query_case(48, 256); }

TEST(query_chooses_its_region_sketched) { query_case(512, 128); }

TEST(ratio_and_budget_respected) {
    fr_vision_prune_params p = fr_vision_prune_default_params();
    fr_err err = {0};
    CHECK_EQ_INT(fr_vision_prune_keep_count(100, &p, &err), 100);
    p.keep_ratio = 0.3;
    CHECK_EQ_INT(fr_vision_prune_keep_count(100, &p, &err), 30);
    p.max_image_tokens = 20;
    CHECK_EQ_INT(fr_vision_prune_keep_count(100, &p, &err), 20); /* budget tighter */
    p.max_image_tokens = 50;
    CHECK_EQ_INT(fr_vision_prune_keep_count(100, &p, &err), 30); /* ratio tighter */
    p.keep_ratio = 0.7;
    p.max_image_tokens = FR_VISION_PRUNE_NO_BUDGET;
    CHECK_EQ_INT(fr_vision_prune_keep_count(10, &p, &err), 7);
    p.keep_ratio = 0.001;
    CHECK_EQ_INT(fr_vision_prune_keep_count(100, &p, &err), 1); /* at least one */
    p.keep_ratio = 1;
    p.max_image_tokens = 1000;
    CHECK_EQ_INT(fr_vision_prune_keep_count(64, &p, &err), 64);

    /* several images: ratio per image, then the request's budget shared in proportion */
    int64_t n[3] = {100, 50, 10}, k[3];
    p.keep_ratio = 0.5;
    p.max_image_tokens = FR_VISION_PRUNE_NO_BUDGET;
    CHECK_EQ_INT(fr_vision_prune_keep_counts(n, 3, &p, k, &err), 0);
    CHECK(k[0] == 50 && k[1] == 25 && k[2] == 5);
    p.max_image_tokens = 40;
    CHECK_EQ_INT(fr_vision_prune_keep_counts(n, 3, &p, k, &err), 0);
    CHECK_EQ_INT(k[0] + k[1] + k[2], 40);
    CHECK(k[0] == 25 && k[1] == 12 && k[2] == 3);
    p.max_image_tokens = 3;
    CHECK_EQ_INT(fr_vision_prune_keep_counts(n, 3, &p, k, &err), 0);
    CHECK(k[0] == 1 && k[1] == 1 && k[2] == 1);

    /* the selection keeps exactly that many, over every ratio and budget */
    rng_seed(3);
    enum { N = 90, D = 24 };
    static float feat[N * D];
    for (int i = 0; i < N * D; i++) feat[i] = rng_g();
    fr_vision_prune_input in = {.feat = feat, .n = N, .d = D};
    int64_t kept[N];
    fr_vision_prune_report rep;
    for (int b = 1; b <= N + 5; b += 7)
        for (double r = 0.05; r <= 1.0; r += 0.19) {
            p.keep_ratio = r;
            p.max_image_tokens = b;
            int64_t want = fr_vision_prune_keep_count(N, &p, &err);
            CHECK(want >= 1 && want <= b && want <= N);
            CHECK_EQ_INT(fr_vision_prune_select(&in, &p, kept, NULL, NULL, &rep, &err), want);
            CHECK_EQ_INT(rep.n_kept, want);
            CHECK_EQ_INT(rep.n, N);
            check_sorted(kept, want, N);
        }
}

TEST(positions_preserved) {
    rng_seed(11);
    enum { GH = 6, GW = 10, N = GH * GW, D = 16 };
    static float feat[N * D];
    for (int i = 0; i < N * D; i++) feat[i] = rng_g();
    int32_t pos[3 * N];
    for (int i = 0; i < N; i++) { /* an image after 17 text tokens, as get_rope_index numbers it */
        pos[i] = 17;
        pos[N + i] = 17 + i / GW;
        pos[2 * N + i] = 17 + i % GW;
    }
    float q[2 * D];
    for (int i = 0; i < 2 * D; i++) q[i] = rng_g();
    fr_vision_prune_params p = fr_vision_prune_default_params();
    p.keep_ratio = 0.4;
    fr_vision_prune_input in = {.feat = feat, .n = N, .d = D, .pos = pos, .query = q, .m = 2};
    int64_t kept[N];
    int32_t kp[3 * N];
    fr_err err = {0};
    int64_t k = fr_vision_prune_select(&in, &p, kept, kp, NULL, NULL, &err);
    CHECK_EQ_INT(k, 24);
    for (int64_t t = 0; t < k; t++) {
        CHECK_EQ_INT(kp[t], 17);
        CHECK_EQ_INT(kp[k + t], 17 + kept[t] / GW);
        CHECK_EQ_INT(kp[2 * k + t], 17 + kept[t] % GW);
    }
    float out[N * D];
    fr_vision_prune_gather(feat, N, D, kept, k, out);
    for (int64_t t = 0; t < k; t++) CHECK(!memcmp(out + t * D, feat + kept[t] * D, D * sizeof *out));
}

/* Four tight clusters of 16 tokens; the question points mostly at cluster 0. */
static void clusters(float *feat, float *q, int d) {
    float c[4][64];
    for (int a = 0; a < 4; a++) rand_unit(c[a], d);
    for (int i = 0; i < 64; i++) noisy(feat + i * d, c[i / 16], 0.15f, d);
    for (int e = 0; e < d; e++) q[e] = c[0][e] + 0.5f * (c[1][e] + c[2][e] + c[3][e]);
}

static int n_clusters(const int64_t *kept, int64_t k) {
    int seen[4] = {0}, s = 0;
    for (int64_t i = 0; i < k; i++) seen[kept[i] / 16] = 1;
    for (int a = 0; a < 4; a++) s += seen[a];
    return s;
}

TEST(diversity_covers_more_than_relevance_alone) {
    rng_seed(5);
    enum { D = 32 };
    static float feat[64 * D];
    float q[D];
    clusters(feat, q, D);
    fr_vision_prune_params p = fr_vision_prune_default_params();
    p.max_image_tokens = 8;
    fr_vision_prune_input in = {.feat = feat, .n = 64, .d = D, .query = q, .m = 1};
    int64_t kr[64], kd[64];
    fr_vision_prune_report rr, rd;
    fr_err err = {0};
    p.relevance_weight = 1.0f; /* relevance only */
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, kr, NULL, NULL, &rr, &err), 8);
    p.relevance_weight = 0.5f; /* the default: with the diversity term */
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, kd, NULL, NULL, &rd, &err), 8);
    double cr = fr_vision_prune_coverage(feat, 64, D, kr, 8, 0, &err);
    double cd = fr_vision_prune_coverage(feat, 64, D, kd, 8, 0, &err);
    fprintf(stderr, "  relevance only: %d cluster(s), coverage %.3f; with diversity: %d, %.3f\n",
            n_clusters(kr, 8), cr, n_clusters(kd, 8), cd);
    CHECK_EQ_INT(n_clusters(kr, 8), 1);
    CHECK_EQ_INT(kr[0] / 16, 0); /* the collapse is onto the asked cluster */
    CHECK_EQ_INT(n_clusters(kd, 8), 4);
    CHECK(cd >= 0 && cr > 0 && cd < 0.5 * cr);
    CHECK(rr.kept_relevance > rd.kept_relevance);
    int in0 = 0;
    for (int i = 0; i < 8; i++) in0 += kd[i] < 16;
    CHECK(in0 >= 3); /* the asked cluster still gets the largest share */
}

TEST(no_question_is_pure_diversity) {
    rng_seed(9);
    enum { D = 32 };
    static float feat[64 * D];
    float q[D];
    clusters(feat, q, D);
    fr_vision_prune_params p = fr_vision_prune_default_params();
    p.max_image_tokens = 4;
    fr_vision_prune_input in = {.feat = feat, .n = 64, .d = D};
    int64_t kept[64];
    float rel[64];
    fr_vision_prune_report rep;
    fr_err err = {0};
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, kept, NULL, rel, &rep, &err), 4);
    CHECK_EQ_INT(n_clusters(kept, 4), 4);
    for (int i = 0; i < 64; i++) CHECK(rel[i] == 1.0f);
    CHECK(rep.rel_min == 0 && rep.rel_max == 0);
}

TEST(deterministic) {
    rng_seed(13);
    enum { N = 300, D = 700 };
    float *feat = malloc((size_t)N * D * sizeof *feat), q[4 * D];
    for (int i = 0; i < N * D; i++) feat[i] = rng_g();
    for (int i = 0; i < 4 * D; i++) q[i] = rng_g();
    fr_vision_prune_params p = fr_vision_prune_default_params();
    p.keep_ratio = 0.3;
    fr_vision_prune_input in = {.feat = feat, .n = N, .d = D, .query = q, .m = 4};
    int64_t k1[N], k2[N];
    float r1[N], r2[N];
    fr_vision_prune_report rep;
    fr_err err = {0};
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, k1, NULL, r1, &rep, &err), 90);
    CHECK_EQ_INT(rep.sketch_dim, 128);
    CHECK_EQ_INT(fr_vision_prune_select(&in, &p, k2, NULL, r2, &rep, &err), 90);
    CHECK(!memcmp(k1, k2, 90 * sizeof *k1));
    CHECK(!memcmp(r1, r2, sizeof r1));
    free(feat);
}

static int64_t count_down(int gt, int gh, int gw, int64_t k, int64_t *kept) {
    fr_err err = {0};
    return fr_vision_downsample_stride(gt, gh, gw, k, kept, &err);
}

TEST(downsample_counts_equal) {
    static int64_t kept[4096];
    int grids[][3] = {{1, 16, 16}, {1, 7, 13}, {1, 32, 18}, {1, 1, 9}, {1, 9, 1}, {2, 5, 6},
                      {1, 3, 40}};
    for (size_t g = 0; g < FR_ARRAY_LEN(grids); g++) {
        int gt = grids[g][0], gh = grids[g][1], gw = grids[g][2];
        int64_t n = (int64_t)gt * gh * gw;
        for (int64_t k = 1; k <= n; k++) {
            CHECK_EQ_INT(count_down(gt, gh, gw, k, kept), k);
            check_sorted(kept, k, n);
        }
    }
    /* the same count as the pruner keeps: 100/50/25/10 % of a 16 x 16 image */
    fr_vision_prune_params p = fr_vision_prune_default_params();
    double ratios[] = {1.0, 0.5, 0.25, 0.1};
    for (int r = 0; r < 4; r++) {
        fr_err err = {0};
        p.keep_ratio = ratios[r];
        int64_t k = fr_vision_prune_keep_count(256, &p, &err);
        CHECK_EQ_INT(count_down(1, 16, 16, k, kept), k);
    }
    /* a quarter of a 16 x 16 grid is the regular 2-stride sub-grid */
    CHECK_EQ_INT(count_down(1, 16, 16, 64, kept), 64);
    for (int i = 0; i < 64; i++) CHECK_EQ_INT(kept[i], (2 * (i / 8)) * 16 + 2 * (i % 8));
}

TEST(downsample_pool_averages_cells) {
    enum { GH = 4, GW = 6, N = GH * GW, D = 3 };
    float feat[N * D];
    int32_t pos[3 * N];
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < D; c++) feat[i * D + c] = (float)(i * 10 + c);
        pos[i] = 4;
        pos[N + i] = 4 + i / GW;
        pos[2 * N + i] = 4 + i % GW;
    }
    float out[N * D];
    int32_t op[3 * N];
    int64_t kept[N];
    fr_err err = {0};
    /* 6 cells: 2 bands of 3 cells of 2 x 2 tokens */
    CHECK_EQ_INT(fr_vision_downsample_pool(feat, D, pos, 1, GH, GW, 6, out, op, &err), 6);
    CHECK_EQ_INT(fr_vision_downsample_stride(1, GH, GW, 6, kept, &err), 6);
    for (int cell = 0; cell < 6; cell++) {
        int r0 = (cell / 3) * 2, c0 = (cell % 3) * 2;
        for (int c = 0; c < D; c++) {
            double s = 0;
            for (int y = r0; y < r0 + 2; y++)
                for (int x = c0; x < c0 + 2; x++) s += feat[(y * GW + x) * D + c];
            CHECK_NEAR(out[cell * D + c], s / 4, 1e-4);
        }
        CHECK_EQ_INT(kept[cell], r0 * GW + c0); /* the centre token (upper-left of the middle) */
        CHECK_EQ_INT(op[cell], 4);
        CHECK_EQ_INT(op[6 + cell], 4 + r0);
        CHECK_EQ_INT(op[12 + cell], 4 + c0);
    }
    /* k = n is the identity */
    CHECK_EQ_INT(fr_vision_downsample_pool(feat, D, NULL, 1, GH, GW, N, out, NULL, &err), N);
    CHECK(!memcmp(out, feat, sizeof feat));
}

static void expect_bad(int64_t got, fr_err *err) {
    CHECK_EQ_INT(got, -1);
    CHECK_EQ_INT(err->code, FR_ERR_BAD_REQUEST);
    CHECK(err->msg[0] != 0);
    memset(err, 0, sizeof *err);
}

TEST(hostile_parameters) {
    enum { N = 16, D = 8 };
    float feat[N * D], q[D], w[1] = {1};
    for (int i = 0; i < N * D; i++) feat[i] = (float)(i % 7) - 3.0f;
    for (int i = 0; i < D; i++) q[i] = 1;
    int64_t kept[N];
    int32_t kp[3 * N];
    fr_err err = {0};
    fr_vision_prune_input in = {.feat = feat, .n = N, .d = D, .query = q, .query_w = w, .m = 1};
    fr_vision_prune_params p = fr_vision_prune_default_params();
    double bad_ratio[] = {0.0, -0.5, 1.5, NAN, INFINITY, -INFINITY};
    for (size_t i = 0; i < FR_ARRAY_LEN(bad_ratio); i++) {
        p.keep_ratio = bad_ratio[i];
        expect_bad(fr_vision_prune_select(&in, &p, kept, NULL, NULL, NULL, &err), &err);
        expect_bad(fr_vision_prune_keep_count(10, &p, &err), &err);
    }
    p = fr_vision_prune_default_params();
    int64_t bad_budget[] = {0, -1, -1000, INT64_MIN};
    for (size_t i = 0; i < FR_ARRAY_LEN(bad_budget); i++) {
        p.max_image_tokens = bad_budget[i];
        expect_bad(fr_vision_prune_select(&in, &p, kept, NULL, NULL, NULL, &err), &err);
    }
    p = fr_vision_prune_default_params();
    expect_bad(fr_vision_prune_select(&in, NULL, kept, NULL, NULL, NULL, &err), &err);
    expect_bad(fr_vision_prune_select(NULL, &p, kept, NULL, NULL, NULL, &err), &err);
    expect_bad(fr_vision_prune_select(&in, &p, NULL, NULL, NULL, NULL, &err), &err);
    expect_bad(fr_vision_prune_select(&in, &p, kept, kp, NULL, NULL, &err), &err); /* no pos */
    float th[] = {NAN, -0.1f, 1.5f};
    for (int i = 0; i < 3; i++) {
        p.relevance_weight = th[i];
        expect_bad(fr_vision_prune_select(&in, &p, kept, NULL, NULL, NULL, &err), &err);
    }
    p = fr_vision_prune_default_params();
    float tau[] = {0.0f, -1.0f, NAN, INFINITY};
    for (int i = 0; i < 4; i++) {
        p.temperature = tau[i];
        expect_bad(fr_vision_prune_select(&in, &p, kept, NULL, NULL, NULL, &err), &err);
    }
    p = fr_vision_prune_default_params();
    p.sketch_dim = -1;
    expect_bad(fr_vision_prune_select(&in, &p, kept, NULL, NULL, NULL, &err), &err);
    p = fr_vision_prune_default_params();
    fr_vision_prune_input b = in;
    b.n = 0;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b.n = -5;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b.n = (int64_t)FR_VISION_PRUNE_MAX_TOKENS + 1;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b = in;
    b.d = 0;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b = in;
    b.m = -1;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b = in;
    b.query = NULL;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b = in;
    float wneg[1] = {-1}, wnan[1] = {NAN};
    b.query_w = wneg;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b.query_w = wnan;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    b = in;
    p.keep_ratio = 0.5; /* with every token kept the features are not read */
    feat[37] = NAN;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    feat[37] = INFINITY;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    feat[37] = 0;
    q[3] = NAN;
    expect_bad(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), &err);
    q[3] = 1;
    CHECK_EQ_INT(fr_vision_prune_select(&b, &p, kept, NULL, NULL, NULL, &err), N / 2); /* sane again */

    int64_t n3[3] = {10, 10, 10}, k3[3];
    p.max_image_tokens = 2; /* below the number of images */
    expect_bad(fr_vision_prune_keep_counts(n3, 3, &p, k3, &err), &err);
    p = fr_vision_prune_default_params();
    expect_bad(fr_vision_prune_keep_counts(n3, 0, &p, k3, &err), &err);
    n3[1] = 0;
    expect_bad(fr_vision_prune_keep_counts(n3, 3, &p, k3, &err), &err);

    /* the baseline */
    expect_bad(fr_vision_downsample_stride(1, 4, 4, 0, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(1, 4, 4, 17, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(1, 4, 4, -3, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(0, 4, 4, 1, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(1, -4, 4, 1, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(1, 1 << 30, 1 << 30, 1, kept, &err), &err);
    expect_bad(fr_vision_downsample_stride(1, 4, 4, 2, NULL, &err), &err);
    float out[N * D];
    expect_bad(fr_vision_downsample_pool(feat, 0, NULL, 1, 4, 4, 2, out, NULL, &err), &err);
    expect_bad(fr_vision_downsample_pool(feat, D, NULL, 1, 4, 4, 2, out, kp, &err), &err);
    expect_bad(fr_vision_downsample_pool(feat, D, NULL, 1, 4, 4, 0, out, NULL, &err), &err);
}

TEST(stopwords) {
    const char *stop[] = {" the", "The", "?", " ", "", " is", " What", "\n", "'s", " of", " a"};
    const char *content[] = {" cat", "Invoice", " total", " red", "42", "\xe7\x8c\xab",
                             " amount", " thermometer"};
    for (size_t i = 0; i < FR_ARRAY_LEN(stop); i++)
        CHECK(fr_vision_prune_is_stopword(stop[i], strlen(stop[i])));
    for (size_t i = 0; i < FR_ARRAY_LEN(content); i++)
        CHECK(!fr_vision_prune_is_stopword(content[i], strlen(content[i])));
}

int main(void) { return t_main(); }
