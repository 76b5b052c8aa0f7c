/* sampler.c — next-token selection: greedy, or temperature + min-p + top-k + top-p sampling with a
 * seeded xoroshiro128+ generator.
 *
 * Greedy (temperature <= 0, or top_k == 1) is the argmax with the lowest index among ties.
 * Otherwise, in order:
 *   1. p_i = softmax(logits / temperature) (double accumulation, max subtracted);
 *   2. min-p: drop tokens with p_i < min_p * max_j p_j;
 *   3. top-k: keep the k most probable (ties broken by lower index);
 *   4. top-p: keep the smallest prefix, most probable first, whose mass reaches top_p of what is
 *      left;
 *   5. draw u uniform in [0, mass) and walk the kept tokens in that order.
 * Sorting the whole vocabulary each step would cost milliseconds, so only candidates above a
 * probability cutoff are sorted: the cutoff starts at 1e-3 * p_max and is lowered until the kept
 * tokens provably contain the answer (top-k: at least k of them; top-p: their mass reaches top_p).
 * The same seed gives the same sequence of draws.
 */
#include "backend/sampler.h"

#include "base/base.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fr_cand {
    float p;   /* probability */
    int32_t i; /* token id */
} fr_cand;

fr_sampling fr_sampling_default(void) {
    return (fr_sampling){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .seed = 0};
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[2]) {
    uint64_t s0 = s[0], s1 = s[1], r = s0 + s1;
    s1 ^= s0;
    s[0] = rotl(s0, 24) ^ s1 ^ (s1 << 16);
    s[1] = rotl(s1, 37);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double next_unit(uint64_t s[2]) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void fr_sampler_init(fr_sampler *s, const fr_sampling *p, int n_vocab) {
    memset(s, 0, sizeof *s);
    s->p = *p;
    s->n_vocab = n_vocab;
    uint64_t x = p->seed;
    s->rng[0] = splitmix64(&x);
    s->rng[1] = splitmix64(&x);
    if (!s->rng[0] && !s->rng[1]) s->rng[1] = 1;
    s->probs = fr_xmalloc((size_t)n_vocab * sizeof(float));
    s->idx = fr_xmalloc((size_t)n_vocab * sizeof(int32_t));
    s->cand = fr_xmalloc((size_t)n_vocab * sizeof(fr_cand));
}

void fr_sampler_free(fr_sampler *s) {
    free(s->probs);
    free(s->idx);
    free(s->cand);
    s->probs = NULL;
    s->idx = NULL;
    s->cand = NULL;
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* most probable first, lower id first among equals */
static int cmp_cand(const void *a, const void *b) {
    const fr_cand *x = a, *y = b;
    if (x->p != y->p) return x->p > y->p ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

int fr_sample(fr_sampler *s, const float *logits) {
    const int n = s->n_vocab;
    const fr_sampling *p = &s->p;
    int amax = argmax(logits, n);
    if (!(p->temperature > 0.0f) || p->top_k == 1) return amax;

    /* 1. softmax of logits / T */
    float *pr = s->probs;
    double mx = logits[amax], inv_t = 1.0 / p->temperature, sum = 0;
    for (int i = 0; i < n; i++) {
        double e = exp(((double)logits[i] - mx) * inv_t);
        pr[i] = (float)e;
        sum += e;
    }
    for (int i = 0; i < n; i++) pr[i] = (float)(pr[i] / sum);
    const float pmax = pr[amax];

    /* 2. min-p floor; mass of what survives it */
    const float floor_p = p->min_p > 0.0f ? p->min_p * pmax : 0.0f;
    const int k = p->top_k > 0 && p->top_k < n ? p->top_k : n;
    const bool use_top_p = p->top_p > 0.0f && p->top_p < 1.0f, sorted = k < n || use_top_p;
    double total = 0;
    for (int i = 0; i < n; i++)
        if (pr[i] >= floor_p) total += pr[i];

    /* candidates above a cutoff, lowered until they provably contain the kept set */
    fr_cand *c = s->cand;
    int nc = 0;
    float thr = sorted ? FR_MAX(1e-3f * pmax, floor_p) : floor_p;
    for (;;) {
        double kept = 0;
        nc = 0;
        for (int i = 0; i < n; i++)
            if (pr[i] >= thr && pr[i] > 0.0f) {
                c[nc].p = pr[i];
                c[nc++].i = i;
                kept += pr[i];
            }
        if (thr <= floor_p) break;
        bool enough = k < n ? nc >= k : (!use_top_p || kept >= p->top_p * total);
        if (enough) break;
        thr *= 1e-3f;
        if (thr < 1e-30f || thr < floor_p) thr = floor_p;
    }
    if (nc == 0) return amax;
    if (sorted) qsort(c, (size_t)nc, sizeof(fr_cand), cmp_cand);
    /* 3. top-k */
    if (nc > k) nc = k;
    /* 4. top-p over what is left */
    double mass = 0;
    for (int i = 0; i < nc; i++) mass += c[i].p;
    if (use_top_p) {
        double target = p->top_p * mass, cum = 0;
        int keep = nc;
        for (int i = 0; i < nc; i++) {
            cum += c[i].p;
            if (cum >= target) {
                keep = i + 1;
                break;
            }
        }
        nc = keep;
        mass = 0;
        for (int i = 0; i < nc; i++) mass += c[i].p;
    }
    /* 5. draw */
    double u = next_unit(s->rng) * mass, acc = 0;
    int pick = c[nc - 1].i;
    for (int i = 0; i < nc; i++) {
        acc += c[i].p;
        if (u < acc) {
            pick = c[i].i;
            break;
        }
    }
    return pick;
}

int fr_sampler_apply_mask(float *logits, const uint32_t *mask, int n) {
    int allowed = 0;
    for (int w = 0; w < (n + 31) / 32; w++) allowed += __builtin_popcount(mask[w]);
    if (allowed == 0) return 0;
    int full = n / 32;
    for (int w = 0; w < full; w++) { /* branch-free per word: the compiler vectorises it */
        uint32_t b = mask[w];
        if (b == 0xffffffffu) continue;
        float *x = logits + (size_t)w * 32;
        for (int j = 0; j < 32; j++) x[j] = (b >> j & 1) ? x[j] : -INFINITY;
    }
    for (int i = full * 32; i < n; i++)
        if (!(mask[i >> 5] >> (i & 31) & 1)) logits[i] = -INFINITY;
    return allowed;
}
