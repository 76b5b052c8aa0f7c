/* test_sampler.c — greedy, temperature, top-k, top-p, min-p and the seeded generator.
 *
 * Statistical checks use fixed seeds and many draws, with bounds several standard deviations wide,
 * so they are deterministic (same seed, same draws) and not flaky.
 */
#include "backend/sampler.h"
#include "base/base.h"
#include "t.h"

static fr_sampling mk(float temp, int top_k, float top_p, float min_p, uint64_t seed) {
    fr_sampling p = fr_sampling_default();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.seed = seed;
    return p;
}

TEST(defaults) {
    fr_sampling p = fr_sampling_default();
    CHECK(p.temperature == 1.0f && p.top_k == 0 && p.top_p == 1.0f && p.min_p == 0.0f && p.seed == 0);
}

TEST(greedy_is_argmax_lowest_index) {
    float lg[100];
    for (int i = 0; i < 100; i++) lg[i] = (float)((i * 37) % 100) * 0.01f;
    fr_sampling p = mk(0, 0, 1, 0, 1);
    fr_sampler s;
    fr_sampler_init(&s, &p, 100);
    int want = 0;
    for (int i = 1; i < 100; i++)
        if (lg[i] > lg[want]) want = i;
    CHECK_EQ_INT(fr_sample(&s, lg), want);
    lg[10] = lg[90] = 5.0f; /* tie: lowest index */
    CHECK_EQ_INT(fr_sample(&s, lg), 10);
    fr_sampler_free(&s);
}

TEST(top_k_1_is_greedy) {
    float lg[500];
    for (int r = 0; r < 50; r++) {
        for (int i = 0; i < 500; i++) lg[i] = (float)(((i + 1) * (r + 7) * 7919) % 1000) * 0.01f;
        fr_sampling pg = mk(0, 0, 1, 0, 0), pk = mk(1.5f, 1, 1, 0, (uint64_t)r);
        fr_sampler a, b;
        fr_sampler_init(&a, &pg, 500);
        fr_sampler_init(&b, &pk, 500);
        CHECK_EQ_INT(fr_sample(&a, lg), fr_sample(&b, lg));
        fr_sampler_free(&a);
        fr_sampler_free(&b);
    }
}

static void draw_seq(uint64_t seed, const float *lg, int n, int *out, int count) {
    fr_sampling p = mk(1.0f, 0, 1, 0, seed);
    fr_sampler s;
    fr_sampler_init(&s, &p, n);
    for (int i = 0; i < count; i++) out[i] = fr_sample(&s, lg);
    fr_sampler_free(&s);
}

TEST(seeds) {
    float lg[64];
    for (int i = 0; i < 64; i++) lg[i] = 0.0f; /* uniform */
    int a[100], b[100], c[100];
    draw_seq(42, lg, 64, a, 100);
    draw_seq(42, lg, 64, b, 100);
    draw_seq(43, lg, 64, c, 100);
    CHECK(memcmp(a, b, sizeof a) == 0);
    int same = 0;
    for (int i = 0; i < 100; i++) same += a[i] == c[i];
    CHECK(same < 20); /* expected ~1.6 */
}

/* draw counts over n tokens */
static void histogram(const fr_sampling *p, const float *lg, int n, int draws, int *cnt) {
    fr_sampler s;
    fr_sampler_init(&s, p, n);
    memset(cnt, 0, (size_t)n * sizeof(int));
    for (int i = 0; i < draws; i++) cnt[fr_sample(&s, lg)]++;
    fr_sampler_free(&s);
}

TEST(distribution_matches_softmax) {
    enum { N = 8, D = 200000 };
    float lg[N] = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.5f, 0.0f, 1.5f};
    static const float temps[] = {1.0f, 0.5f, 2.0f};
    for (size_t ti = 0; ti < FR_ARRAY_LEN(temps); ti++) {
        fr_sampling p = mk(temps[ti], 0, 1, 0, 7 + ti);
        int cnt[N];
        histogram(&p, lg, N, D, cnt);
        double z = 0, pr[N];
        for (int i = 0; i < N; i++) z += exp(lg[i] / temps[ti]);
        for (int i = 0; i < N; i++) {
            pr[i] = exp(lg[i] / temps[ti]) / z;
            double sd = sqrt(pr[i] * (1 - pr[i]) / D);
            CHECK_NEAR((double)cnt[i] / D, pr[i], 5 * sd + 1e-4);
        }
    }
}

TEST(top_k_keeps_k_most_probable) {
    enum { N = 50, D = 50000 };
    float lg[N];
    for (int i = 0; i < N; i++) lg[i] = (float)((i * 13) % N) * 0.05f; /* distinct values */
    fr_sampling p = mk(1.0f, 5, 1, 0, 99);
    int cnt[N];
    histogram(&p, lg, N, D, cnt);
    /* the 5 largest logits: values 49..45 * 0.05 */
    double z = 0;
    for (int i = 0; i < N; i++)
        if ((i * 13) % N >= 45) z += exp(lg[i]);
    for (int i = 0; i < N; i++) {
        if ((i * 13) % N >= 45) {
            double pr = exp(lg[i]) / z, sd = sqrt(pr * (1 - pr) / D);
            CHECK_NEAR((double)cnt[i] / D, pr, 5 * sd);
        } else {
            CHECK_EQ_INT(cnt[i], 0);
        }
    }
}

TEST(top_p_keeps_the_nucleus) {
    /* probabilities 0.5, 0.25, 0.125, 0.0625, ... : top_p 0.8 keeps the first three (0.875) */
    enum { N = 10, D = 60000 };
    float lg[N];
    for (int i = 0; i < N; i++) lg[i] = -(float)i * logf(2.0f);
    fr_sampling p = mk(1.0f, 0, 0.8f, 0, 5);
    int cnt[N];
    histogram(&p, lg, N, D, cnt);
    for (int i = 3; i < N; i++) CHECK_EQ_INT(cnt[i], 0);
    double pr[3] = {0.5 / 0.875, 0.25 / 0.875, 0.125 / 0.875};
    for (int i = 0; i < 3; i++) CHECK_NEAR((double)cnt[i] / D, pr[i], 5 * sqrt(pr[i] / D));
    /* top_p 0.5 keeps exactly the first */
    p.top_p = 0.5f;
    histogram(&p, lg, N, 1000, cnt);
    CHECK_EQ_INT(cnt[0], 1000);
    /* a large vocabulary with a flat tail: the nucleus search must still find every member */
    enum { V = 5000 };
    float *big = malloc(V * sizeof(float));
    for (int i = 0; i < V; i++) big[i] = 0.0f;
    big[123] = 10.0f; /* p = 0.815; the nucleus (0.95) takes ~3650 tail tokens */
    int *bc = malloc(V * sizeof(int));
    fr_sampling q = mk(1.0f, 0, 0.95f, 0, 11);
    histogram(&q, big, V, 3000, bc);
    int tail = 0;
    for (int i = 0; i < V; i++) tail += i != 123 && bc[i] > 0;
    CHECK(bc[123] > 2400 && bc[123] < 2750); /* expected 3000 * 0.815 / 0.95 = 2574 */
    CHECK(tail > 200);                       /* the flat tail is in the nucleus */
    free(big);
    free(bc);
}

TEST(min_p_drops_unlikely_tokens) {
    enum { N = 6, D = 50000 };
    /* probabilities proportional to 1, 0.5, 0.2, 0.09, 0.05, 0.01 */
    float rel[N] = {1.0f, 0.5f, 0.2f, 0.09f, 0.05f, 0.01f}, lg[N];
    for (int i = 0; i < N; i++) lg[i] = logf(rel[i]);
    fr_sampling p = mk(1.0f, 0, 1, 0.1f, 3); /* keeps p >= 0.1 * pmax: the first three */
    int cnt[N];
    histogram(&p, lg, N, D, cnt);
    for (int i = 3; i < N; i++) CHECK_EQ_INT(cnt[i], 0);
    double z = 1.7;
    for (int i = 0; i < 3; i++) {
        double pr = rel[i] / z;
        CHECK_NEAR((double)cnt[i] / D, pr, 5 * sqrt(pr * (1 - pr) / D));
    }
    /* combined with top-k 2 */
    p.top_k = 2;
    histogram(&p, lg, N, D, cnt);
    CHECK(cnt[2] == 0 && cnt[0] + cnt[1] == D);
}

int main(void) { return t_main(); }
